//! The in-memory driver: a discrete-event simulation of a [`Scenario`] with no sockets and
//! no async runtime.
//!
//! It connects the sans-IO client, server and backend through real framing (NDJSON lines on
//! stdio; one POST body and an SSE or JSON response per request on HTTP), with seeded
//! per-message latency, ordered delivery per pipe and per stream, an idle-timeout proxy,
//! stream resets, server crashes and partitions, and records trace format v1 at every
//! observation point. Time jumps from one event to the next, so a 90-second call costs
//! microseconds: this is the fast lane that shares scenarios and the oracle with the turmoil
//! harness, used by property tests and long sweeps.
//!
//! Determinism: one ChaCha8 stream for latencies, a queue ordered by (time, sequence number),
//! `BTreeMap`s everywhere; the same scenario gives the same trace byte for byte.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::time::Duration;

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::client_driver::{ClientDriver, ClientOutput, EndedBy};
use super::intermediary::{Expiry, FromServer, Intermediary};
use super::memory_server::{process_gone, SimServer, SimServerOutput};
use super::readers::{ExchangeItem, ResponseReader};
use super::response_writer::{ResponsePart, ServerWrite};
use super::server_driver::{ServerDriver, ServerRecording};
use super::{RunResult, RunSink, RunStats, SimTrace};
use crate::model::server::Playback;
use crate::model::{Backend, Mutant, Server, StreamId, Transport};
use crate::scenario::workload::{Crashes, Step, Workload};
use crate::scenario::{Fault, ProxyConfig, Scenario, ToolCalls};
use crate::time::Time;
use crate::trace::{EventKind, Side, Trace};
use crate::wire;
use crate::wire::http::Method;

#[cfg(feature = "live")]
mod origin_check;

/// A piece of an HTTP response travelling to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Piece {
    /// The status line and the `Content-Type`, if the response has one (a 202 and a gateway's
    /// empty answer have none, as the byte lanes read them), and the `Mcp-Session-Id` it
    /// issues (a legacy `initialize`).
    Status(u16, Option<&'static str>, Option<String>),
    Body(Vec<u8>),
    End,
}

impl Piece {
    /// What a gateway that answers an idle stream sends: its status, no content type, no body.
    pub(super) fn gateway_answer(status: u16) -> [Piece; 2] {
        [Piece::Status(status, None, None), Piece::End]
    }
}

/// Every open HTTP stream (from the client's POST to the response's end or a close), with the
/// proxy's connection of each when there is a proxy. The proxy stands at the server's end of
/// the lane's one hop: its clock starts when the client sends the POST, and the POST's bytes
/// pass it as they reach the server.
#[derive(Debug, Default)]
pub(super) struct OpenStreams {
    open: BTreeMap<StreamId, Option<Intermediary<Piece, Time>>>,
}

impl OpenStreams {
    /// The client sent the POST of `stream` at `now`.
    pub(super) fn open(&mut self, stream: StreamId, proxy: Option<ProxyConfig>, now: Time) {
        let conn = proxy.map(|c| Intermediary::new(c, now));
        self.open.insert(stream, conn);
    }

    /// The POST's bytes reach the server's end at `now`.
    pub(super) fn client_bytes(&mut self, stream: StreamId, now: Time) {
        if let Some(Some(conn)) = self.open.get_mut(&stream) {
            conn.client_sent(now);
        }
    }

    /// The server writes `part` of its response at `now`: what reaches the client now. The
    /// stream closes with the response's end.
    pub(super) fn server_sent(
        &mut self,
        stream: StreamId,
        now: Time,
        part: FromServer<Piece>,
    ) -> Vec<Piece> {
        let ends = matches!(part, FromServer::End(_));
        let mut pieces = Vec::new();
        match self.open.get_mut(&stream) {
            Some(Some(conn)) => conn.server_sent(now, part, &mut pieces),
            _ => pieces.push(match part {
                FromServer::Head { part, .. } | FromServer::Body(part) | FromServer::End(part) => {
                    part
                }
            }),
        }
        if ends {
            self.open.remove(&stream);
        }
        pieces
    }

    /// The stream closed or was cut: what the proxy held is lost.
    pub(super) fn close(&mut self, stream: StreamId) {
        self.open.remove(&stream);
    }

    /// The server's side of `stream` ended: what the client still gets (the proxy's held body).
    pub(super) fn server_gone(&mut self, stream: StreamId) -> Vec<Piece> {
        self.open
            .remove(&stream)
            .flatten()
            .map(|mut conn| conn.server_closed())
            .unwrap_or_default()
    }

    /// The open streams, in order.
    pub(super) fn ids(&self) -> Vec<StreamId> {
        self.open.keys().copied().collect()
    }

    /// When the proxy's first idle clock runs out.
    pub(super) fn deadline(&self) -> Option<Time> {
        self.open
            .values()
            .flatten()
            .map(Intermediary::deadline)
            .min()
    }

    /// The streams whose idle clock has run out at `now`, with what running out does.
    pub(super) fn expired(&self, now: Time) -> Vec<(StreamId, Expiry)> {
        self.open
            .iter()
            .filter_map(|(id, conn)| conn.as_ref().map(|conn| (*id, conn)))
            .filter(|(_, conn)| conn.deadline() <= now)
            .map(|(id, conn)| (id, conn.expiry()))
            .collect()
    }
}

#[derive(Debug, Clone)]
enum Action {
    /// Bytes for the server: a stdio chunk or an HTTP request's body (a POST's; a legacy
    /// `GET` or `DELETE` has none); the legacy era's headers, which the model decides.
    ToServer {
        epoch: u64,
        stream: Option<StreamId>,
        bytes: Vec<u8>,
        headers: Option<BTreeMap<String, String>>,
        method: Method,
    },
    /// The server notices that the client (or the proxy) closed a stream.
    ServerSeesClose {
        epoch: u64,
        stream: StreamId,
        by: Side,
    },
    /// stdio bytes for the client.
    ToClientLine { bytes: Vec<u8> },
    /// A piece of an HTTP response for the client.
    ToClientHttp { stream: StreamId, piece: Piece },
    /// The client notices that a stream was cut.
    ClientSeesCut { stream: StreamId, by: Side },
    /// The client notices that the server's pipe broke.
    ClientSeesPipeClosed,
}

#[derive(Debug)]
struct Scheduled {
    at: Time,
    seq: u64,
    action: Action,
}

impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Direction and channel of a delivery, for per-channel ordering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Channel {
    ToServer(Option<StreamId>),
    ToClient(Option<StreamId>),
}

/// The scenario's server, started at `t`, playing `playback` back if there is one (a
/// restarted one plays from the start of the recording again).
fn new_server(scenario: &Scenario, playback: Option<&Playback>, t: Time) -> Server {
    let server = Server::new(scenario.server_config()).started_at(t);
    match playback {
        Some(p) => server.playing(p.clone()),
        None => server,
    }
}

struct Sim<'s, 'p> {
    scenario: &'s Scenario,
    /// The tool and arguments of each planned call.
    tool_calls: &'s ToolCalls,
    /// A recording the server plays back ([`run_playing`]).
    playback: Option<Playback>,
    /// The clock, the trace and the counters.
    rec: SimTrace,
    seq: u64,
    queue: BinaryHeap<Reverse<Scheduled>>,
    rng: ChaCha8Rng,
    fifo: BTreeMap<Channel, Time>,
    partitions: Vec<(Time, Time)>,
    blackholes: Vec<(Time, Time)>,
    /// Channels that lost a message in a blackhole: TCP does not recover, nothing more passes.
    wedged: BTreeSet<Channel>,
    client: ClientDriver,
    /// The server: the model's with its in-process backend, or a virtual peer.
    server: SimServer<'p>,
    epoch: u64,
    /// The server process the client's stdio pipe leads to, as the client knows it: until it
    /// sees the pipe break, what it writes goes into the dead process's pipe and is lost.
    client_pipe: u64,
    /// The response bodies the client is reading.
    client_streams: BTreeMap<StreamId, ResponseReader>,
    /// The open HTTP streams, through the proxy if there is one.
    open: OpenStreams,
    /// Streams the server no longer has (seen closed, or lost in a crash).
    server_closed: BTreeSet<StreamId>,
    /// What the application does and its host suffers: once the host's part is done, the
    /// client ends its session.
    workload: Workload,
}

/// The time windows of the faults `f` selects.
fn windows(scenario: &Scenario, f: impl Fn(&Fault) -> bool) -> Vec<(Time, Time)> {
    scenario
        .faults
        .iter()
        .filter(|x| f(x))
        .map(|x| {
            (
                Time::ZERO + crate::scenario::fault_time(x),
                Time::ZERO + crate::scenario::fault_end(x),
            )
        })
        .collect()
}

/// Runs `scenario` to completion (or to its horizon) and returns the trace.
pub fn run(scenario: &Scenario) -> RunResult {
    run_serving(scenario, None)
}

/// Runs `scenario` with its server playing `playback` back for the calls it holds (the mock
/// of `mcp-sim serve --from`, under the simulated clock): deterministic, as [`run`] is.
pub fn run_playing(scenario: &Scenario, playback: Playback) -> RunResult {
    run_serving(scenario, Some(playback))
}

fn run_serving(scenario: &Scenario, playback: Option<Playback>) -> RunResult {
    let server = new_server(scenario, playback.as_ref(), Time::ZERO);
    let server = SimServer::Model(ServerDriver::new(
        server,
        Some(Backend::new()),
        ServerRecording::default(),
        scenario.no_buffering_header,
    ));
    let tool_calls = ToolCalls::slow_op();
    let sim = Sim::new(scenario, &tool_calls, playback, server);
    sim.run()
}

/// What a run with a virtual server produced: the run, and what its program did that the
/// shim could not hold deterministic, each with the virtual time it was seen.
#[cfg(feature = "live")]
#[derive(Debug, Clone)]
pub struct VirtualRun {
    /// The run.
    pub run: RunResult,
    /// The escapes seen ([`super::virtual_peer::Escape`]): a run with any is not replayable.
    pub escapes: Vec<(Time, super::virtual_peer::Escape)>,
}

/// Runs `scenario` with a real program in the server's place: `peer`'s program under the
/// lane's clock (the scenario's own server behaviour and mutants do not apply to it), called
/// with `tool_calls`. Each process of the run draws its entropy from the scenario's seed, so
/// the same scenario gives the same trace as long as the program did not escape. An error is
/// the peer's failure (it would not start, or broke the control protocol), not the program's.
#[cfg(feature = "live")]
pub fn run_virtual(
    scenario: &Scenario,
    tool_calls: &ToolCalls,
    peer: &mut super::virtual_peer::VirtualPeer,
    origin_check: bool,
) -> Result<VirtualRun, super::virtual_peer::VirtualError> {
    let server = super::virtual_peer::VirtualServer::new(peer, scenario.seed, scenario.transport);
    let mut sim = Sim::new(scenario, tool_calls, None, SimServer::Virtual(server));
    let mut run = sim.run_loop();
    let SimServer::Virtual(mut server) = sim.server else {
        unreachable!("made virtual above")
    };
    if scenario.transport == Transport::Http && origin_check {
        sim.rec.trace = std::mem::take(&mut run.trace);
        origin_check::check(&mut server, sim.client.client().era(), &mut sim.rec);
        run.trace = std::mem::take(&mut sim.rec.trace);
        run.stats.sim_ms = sim.rec.now.as_millis();
    }
    let (error, escapes) = server.finish();
    match error {
        Some(e) => Err(e),
        None => Ok(VirtualRun { run, escapes }),
    }
}

/// Runs `scenario` with a real *intermediary* program between the reference client and the
/// reference server `upstream` (as `serve` runs it): the program's front is the scenario's
/// transport, and the server process it starts, or the URL it connects to, is the reference
/// server, behind a link with the scenario's latency range each way (seeded apart from the
/// front's). The trace has two hops ([`Trace::two_hop`]): the client's end of the front and
/// the server's end of the upstream, each recorded on the lane's one clock, as `check-proxy`
/// records a live intermediary. An error is the peer's failure, not the program's.
#[cfg(feature = "live")]
pub fn run_virtual_bridge(
    scenario: &Scenario,
    tool_calls: &ToolCalls,
    peer: &mut super::virtual_peer::VirtualPeer,
    upstream: &crate::lanes::live::serve::ServeConfig,
) -> Result<VirtualRun, super::virtual_peer::VirtualError> {
    let rng = ChaCha8Rng::seed_from_u64(scenario.seed ^ 0x7570_7374_7265_616d);
    let up = super::virtual_peer::Upstream::new(upstream.clone(), scenario.latency, rng);
    let server =
        super::virtual_peer::VirtualServer::bridge(peer, scenario.seed, scenario.transport, up);
    let mut sim = Sim::new(scenario, tool_calls, None, SimServer::Virtual(server));
    let mut run = sim.run_loop();
    let SimServer::Virtual(mut server) = sim.server else {
        unreachable!("made virtual above")
    };
    let up = server.take_upstream().expect("made with an upstream above");
    let (error, escapes) = server.finish();
    if let Some(e) = error {
        return Err(e);
    }
    // The intermediary is a black box: of the front hop, the client's end.
    let front = Trace {
        events: run
            .trace
            .events
            .into_iter()
            .filter(|e| e.side == Side::Client)
            .collect(),
    };
    run.trace = Trace::two_hop(&front, &up.recording());
    run.stats.sim_ms = run.stats.sim_ms.max(up.sink.now.as_millis());
    Ok(VirtualRun { run, escapes })
}

impl<'s, 'p> Sim<'s, 'p> {
    fn new(
        scenario: &'s Scenario,
        tool_calls: &'s ToolCalls,
        playback: Option<Playback>,
        server: SimServer<'p>,
    ) -> Self {
        Sim {
            scenario,
            tool_calls,
            playback,
            rec: SimTrace {
                now: Time::ZERO,
                trace: Trace::new(),
                stats: RunStats::default(),
            },
            seq: 0,
            queue: BinaryHeap::new(),
            rng: ChaCha8Rng::seed_from_u64(scenario.seed ^ 0x6d63_702d_7369_6d00),
            fifo: BTreeMap::new(),
            partitions: windows(scenario, |f| matches!(f, Fault::Partition { .. })),
            blackholes: windows(scenario, |f| matches!(f, Fault::Blackhole { .. })),
            wedged: BTreeSet::new(),
            // The in-memory lane moves messages, not POSTs: no headers to record, unless
            // the server is a real program, which reads a POST's headers as a real one would.
            client: ClientDriver::for_scenario(scenario, !matches!(server, SimServer::Model(_))),
            server,
            epoch: 0,
            client_pipe: 0,
            client_streams: BTreeMap::new(),
            open: OpenStreams::default(),
            server_closed: BTreeSet::new(),
            workload: Workload::of(scenario, Crashes::Included),
        }
    }

    fn run(mut self) -> RunResult {
        self.run_loop()
    }

    /// Runs to the end (or the horizon, or until a virtual server must stop).
    fn run_loop(&mut self) -> RunResult {
        let sim = self;
        let scenario = sim.scenario;
        let horizon = Time::ZERO + scenario.horizon();
        loop {
            if sim.server.stopped() {
                break;
            }
            let next_step = sim.workload.next_due();
            let next_action = sim.queue.peek().map(|s| s.0.at);
            let next_timer = sim.next_timer();
            let next = [next_step, next_action, next_timer]
                .into_iter()
                .flatten()
                .min();
            // A server that runs ahead goes first to the lane's next instant: what it writes
            // before then comes first.
            if sim.server.catch_up(next.unwrap_or(horizon).min(horizon)) {
                continue;
            }
            let Some(next) = next else {
                break;
            };
            if next > horizon {
                break;
            }
            // A deadline already past (a model may name one: "call me now") never moves time back.
            sim.rec.now = next.max(sim.rec.now);
            // The workload's steps go before deliveries due at the same instant.
            if next_step == Some(next) {
                let step = sim.workload.poll(next).expect("due");
                sim.step(step);
            } else if next_action == Some(next) {
                let Reverse(s) = sim.queue.pop().expect("peeked");
                sim.apply(s.action);
            } else {
                sim.client.timers(sim.rec.now);
                sim.server.timers(sim.rec.now);
                sim.proxy_timeouts();
            }
            sim.drain();
        }
        let complete = sim.client.client().outstanding() == 0 && sim.server.settled();
        sim.rec.stats.sim_ms = sim.rec.now.as_millis();
        RunResult {
            trace: std::mem::take(&mut sim.rec.trace),
            complete,
            stats: std::mem::take(&mut sim.rec.stats),
        }
    }

    fn schedule_at(&mut self, at: Time, action: Action) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            action,
        }));
    }

    /// Schedules a delivery after a seeded latency, keeping `channel` in order and holding
    /// it while the network is partitioned.
    fn deliver(&mut self, channel: Channel, action: Action) {
        let (lo, hi) = self.scenario.latency;
        let (lo, hi) = (
            lo.as_millis() as u64,
            hi.as_millis().max(lo.as_millis()) as u64,
        );
        let latency = lo + self.rng.next_u64() % (hi - lo + 1);
        let mut at = self.rec.now + Duration::from_millis(latency);
        // In flight while a blackhole is open: lost, and the connection never recovers.
        let lost = self
            .blackholes
            .iter()
            .any(|&(start, end)| self.rec.now < end && at >= start);
        if lost || self.wedged.contains(&channel) {
            self.wedged.insert(channel);
            return;
        }
        for &(start, end) in &self.partitions {
            if at >= start && at < end {
                at = end + Duration::from_millis(latency);
            }
        }
        let last = self.fifo.entry(channel).or_insert(Time::ZERO);
        at = at.max(*last);
        *last = at;
        self.schedule_at(at, action);
    }

    fn next_timer(&self) -> Option<Time> {
        let proxy = self.open.deadline();
        [
            self.client.client().poll_timeout(),
            self.server.poll_timeout(),
            proxy,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn record(&mut self, side: Side, kind: EventKind) {
        self.rec.record(side, kind);
    }

    /// One step of the workload; after the host's last, the client ends its session.
    fn step(&mut self, step: Step) {
        let now = self.rec.now;
        match step {
            Step::Start(k) => self.start_call(k),
            // Not outstanding any more is fine: the call already ended.
            Step::Cancel(k) => self.client.cancel_call(now, k),
            Step::Reset(call) => {
                if let Some(stream) = self.client.stream_of_call(call) {
                    self.cut(stream, Side::Proxy, None);
                }
            }
            Step::Crash(_) => self.crash(),
            // A scenario's workload has neither (they are the live probe's).
            Step::Stall(_) | Step::Restart(_) => {}
        }
        if !matches!(step, Step::Crash(_)) && self.workload.host_done() {
            self.client.end_session();
        }
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::ToServer {
                epoch,
                stream,
                bytes,
                headers,
                method,
            } => {
                if epoch != self.epoch || stream.is_some_and(|s| self.server_closed.contains(&s)) {
                    return; // sent to a server that has since crashed
                }
                let now = self.rec.now;
                match stream {
                    None => self.server.stdio_bytes(now, &bytes, &mut self.rec),
                    Some(s) => {
                        // The proxy stands at the server's end of the one hop: the POST's
                        // bytes pass it as they reach the server (ALB counts them).
                        self.open.client_bytes(s, now);
                        self.server
                            .request(now, s, method, &bytes, headers, &mut self.rec);
                    }
                }
            }
            Action::ServerSeesClose { epoch, stream, by } => {
                if epoch == self.epoch && self.server_closed.insert(stream) {
                    self.server
                        .stream_closed(self.rec.now, stream, by, &mut self.rec);
                    self.open.close(stream);
                }
            }
            // Bytes written before a crash are still in the pipe: they are delivered.
            Action::ToClientLine { bytes } => {
                for line in self.client.stdio_lines(&bytes) {
                    self.client.read_line(self.rec.now, line, &mut self.rec);
                }
            }
            Action::ToClientHttp { stream, piece } => self.client_piece(stream, piece),
            Action::ClientSeesCut { stream, by } => {
                self.client_streams.remove(&stream);
                let by = EndedBy {
                    side: by,
                    reason: None,
                };
                let now = self.rec.now;
                self.client
                    .response(now, stream, ExchangeItem::Cut, by, &mut self.rec);
            }
            Action::ClientSeesPipeClosed => {
                self.client.pipe_closed(self.rec.now, &mut self.rec);
                self.client.new_pipe();
                self.client_pipe += 1;
            }
        }
    }

    fn start_call(&mut self, k: usize) {
        let call = self.scenario.calls[k];
        let arguments = self.tool_calls.arguments(self.scenario, k);
        let spec = call.call_spec(self.tool_calls.tool(), arguments);
        self.client.start_call(self.rec.now, k, spec);
    }

    /// The connection carrying `stream` is reset: both ends notice after a latency.
    fn cut(&mut self, stream: StreamId, by: Side, reason: Option<&str>) {
        if !self.client.reads(stream) && self.server_closed.contains(&stream) {
            return;
        }
        self.record(
            Side::Proxy,
            EventKind::Close {
                stream: Some(stream.0),
                by,
                reason: reason.map(str::to_owned),
            },
        );
        self.open.close(stream);
        let epoch = self.epoch;
        self.deliver(
            Channel::ToServer(Some(stream)),
            Action::ServerSeesClose { epoch, stream, by },
        );
        self.deliver(
            Channel::ToClient(Some(stream)),
            Action::ClientSeesCut { stream, by },
        );
    }

    /// The server process dies and restarts at once with no memory; the backend drops the
    /// dead process's sessions, releasing what they held.
    fn crash(&mut self) {
        self.record(Side::Server, process_gone());
        let (scenario, playback, now) = (self.scenario, self.playback.as_ref(), self.rec.now);
        let released = self.server.crash(|| new_server(scenario, playback, now));
        for request in released {
            self.record(Side::Backend, EventKind::Release { request });
        }
        self.server_gone();
    }

    /// The server's process is gone (crashed, or a virtual server's program ended): the
    /// client's pipe breaks, or each open stream is cut after what the proxy held.
    fn server_gone(&mut self) {
        let open = self.open.ids();
        self.epoch += 1;
        match self.scenario.transport {
            Transport::Stdio => {
                self.deliver(Channel::ToClient(None), Action::ClientSeesPipeClosed);
            }
            Transport::Http => {
                for stream in open {
                    self.server_closed.insert(stream);
                    // What the proxy held goes on before the cut (nginx passes on what it
                    // read when its upstream closes).
                    for piece in self.open.server_gone(stream) {
                        self.deliver(
                            Channel::ToClient(Some(stream)),
                            Action::ToClientHttp { stream, piece },
                        );
                    }
                    self.deliver(
                        Channel::ToClient(Some(stream)),
                        Action::ClientSeesCut {
                            stream,
                            by: Side::Server,
                        },
                    );
                }
            }
        }
    }

    fn client_piece(&mut self, stream: StreamId, piece: Piece) {
        if !self.client.reads(stream) {
            return;
        }
        let mut items = Vec::new();
        match piece {
            Piece::Status(status, content_type, session) => {
                items.push(ExchangeItem::Status {
                    status,
                    content_type: content_type.map(Into::into),
                    session,
                });
                let crlf_bug = self.scenario.mutants.has(Mutant::SseCrlfChunkSplit);
                let reader = ResponseReader::new(content_type, crlf_bug);
                self.client_streams.insert(stream, reader);
            }
            Piece::Body(bytes) => {
                let Some(reader) = self.client_streams.get_mut(&stream) else {
                    return;
                };
                reader.push(&bytes, |item| items.push(item));
            }
            Piece::End => {
                if let Some(reader) = self.client_streams.remove(&stream) {
                    reader.finish(|item| items.push(item));
                }
                items.retain(|item| !matches!(item, ExchangeItem::Ended));
                items.push(ExchangeItem::Ended);
            }
        }
        for item in items {
            let now = self.rec.now;
            self.client
                .response(now, stream, item, EndedBy::SERVER, &mut self.rec);
        }
    }

    /// Moves every output of the client, server and backend until all are quiet.
    fn drain(&mut self) {
        loop {
            let mut busy = false;
            while let Some(out) = self.client.poll_io(self.rec.now, &mut self.rec) {
                busy = true;
                self.client_output(out);
            }
            while let Some(out) = self.server.poll_io(self.rec.now, &mut self.rec) {
                busy = true;
                match out {
                    SimServerOutput::Write(w) => self.server_write(w),
                    SimServerOutput::Exited => {
                        self.record(Side::Server, process_gone());
                        self.server_gone();
                    }
                }
            }
            if !busy {
                break;
            }
        }
    }

    /// Carries what the client's driver hands over (recorded already).
    fn client_output(&mut self, out: ClientOutput) {
        let epoch = self.epoch;
        match out {
            // The client drops the pipe: the server reads EOF (a subprocess exits on it and is
            // restarted); what was in flight on the old pipe is gone.
            ClientOutput::Disconnect => {
                self.epoch += 1;
                self.client_pipe += 1;
                self.client.new_pipe();
                self.server.input_closed(self.rec.now, &mut self.rec);
            }
            ClientOutput::Line(bytes) => {
                self.deliver(
                    Channel::ToServer(None),
                    Action::ToServer {
                        epoch: self.client_pipe,
                        stream: None,
                        bytes,
                        headers: None,
                        method: Method::Post,
                    },
                );
            }
            ClientOutput::Post {
                stream,
                msg,
                headers,
            } => {
                let bytes = wire::encode(&msg)
                    .expect("the client's messages encode")
                    .into_bytes();
                // The model's POSTs carry headers where they decide something: the legacy
                // era's, and an auto-mode client's.
                let headers = (self.legacy() || !headers.is_empty()).then_some(headers);
                self.open_exchange(stream, bytes, headers, Method::Post);
            }
            ClientOutput::Open {
                stream,
                method,
                headers,
            } => self.open_exchange(stream, Vec::new(), Some(headers), method),
            ClientOutput::Close(stream) => {
                self.client_streams.remove(&stream);
                self.open.close(stream);
                self.deliver(
                    Channel::ToServer(Some(stream)),
                    Action::ServerSeesClose {
                        epoch,
                        stream,
                        by: Side::Client,
                    },
                );
            }
        }
    }

    /// A new exchange on `stream` (a POST of `bytes`, or a legacy `GET` or `DELETE`) on its
    /// way to the server, through the proxy if there is one.
    fn open_exchange(
        &mut self,
        stream: StreamId,
        bytes: Vec<u8>,
        headers: Option<BTreeMap<String, String>>,
        method: Method,
    ) {
        let epoch = self.epoch;
        self.open.open(stream, self.scenario.proxy, self.rec.now);
        self.deliver(
            Channel::ToServer(Some(stream)),
            Action::ToServer {
                epoch,
                stream: Some(stream),
                bytes,
                headers,
                method,
            },
        );
    }

    fn legacy(&self) -> bool {
        self.scenario.era.is_legacy()
    }

    /// Carries a write of the server's driver (its transmit recorded already).
    fn server_write(&mut self, w: ServerWrite) {
        match w {
            ServerWrite::Line(bytes) => {
                self.deliver(Channel::ToClient(None), Action::ToClientLine { bytes });
            }
            ServerWrite::Http(stream, ResponsePart::Head(head)) => {
                let event_stream = head.is_event_stream();
                let part = FromServer::Head {
                    told_not_to_buffer: head.told_not_to_buffer,
                    part: Piece::Status(head.status, head.content_type, head.session),
                    event_stream,
                };
                self.send_to_client(stream, part);
            }
            ServerWrite::Http(stream, ResponsePart::Body(bytes)) => {
                self.send_to_client(stream, FromServer::Body(Piece::Body(bytes)));
            }
            ServerWrite::Http(stream, ResponsePart::End) => {
                self.send_to_client(stream, FromServer::End(Piece::End));
            }
        }
    }

    /// Sends a response part through the proxy (if any), which says what goes on now.
    fn send_to_client(&mut self, stream: StreamId, part: FromServer<Piece>) {
        if self.server_closed.contains(&stream) {
            return; // the stream is gone; a real write would fail
        }
        if matches!(part, FromServer::End(_)) {
            self.server_closed.insert(stream);
        }
        let pieces = self.open.server_sent(stream, self.rec.now, part);
        for p in pieces {
            self.deliver(
                Channel::ToClient(Some(stream)),
                Action::ToClientHttp { stream, piece: p },
            );
        }
    }

    /// Cuts every stream idle for the proxy's timeout.
    fn proxy_timeouts(&mut self) {
        for (stream, expiry) in self.open.expired(self.rec.now) {
            match expiry {
                Expiry::Answer(status) => {
                    // A gateway timeout answer instead of a bare cut: the client reads a status
                    // and the end of the exchange; the server sees its connection closed.
                    self.record(
                        Side::Proxy,
                        EventKind::Close {
                            stream: Some(stream.0),
                            by: Side::Proxy,
                            reason: Some("idle".into()),
                        },
                    );
                    self.open.close(stream);
                    let epoch = self.epoch;
                    self.deliver(
                        Channel::ToServer(Some(stream)),
                        Action::ServerSeesClose {
                            epoch,
                            stream,
                            by: Side::Proxy,
                        },
                    );
                    for piece in Piece::gateway_answer(status) {
                        self.deliver(
                            Channel::ToClient(Some(stream)),
                            Action::ToClientHttp { stream, piece },
                        );
                    }
                }
                Expiry::Cut => self.cut(stream, Side::Proxy, Some("idle")),
            }
        }
    }
}
