//! The in-memory lane's driver of a virtual server: what `server_driver` is for the model.
//!
//! What reaches the program and what it writes are recorded at its end of the transport, as
//! the wire tap records a custom server in the turmoil lane (stdio lines; HTTP requests,
//! statuses, SSE events and closes; payloads as written), so the oracle judges it with both
//! sides in view. An HTTP exchange is recorded as the HTTP/1.1 bytes it would have been on a
//! socket (one connection per stream, named by the `x-mcp-sim-stream` header), so the same
//! tap frames it.
//!
//! Like the model's driver it has no clock: each input carries the lane's `now`, and what the
//! program wrote comes back from [`VirtualServer::poll_io`], recorded. A process that ends is
//! started again, at the lane's `now`, by the next input (a host restarting its server).
//!
//! An intermediary ([`VirtualServer::bridge`]) is driven the same way on its front, and what
//! it does as a client (the server process it starts, the URL it connects to) reaches the
//! reference server of its [`Upstream`], recorded there as the second hop. The upstream's
//! instants are this server's timers to the lane: at each, the upstream server acts, then
//! what reaches the program is handed to it, then the program's own timers fire.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::upstream::Upstream;
use super::{Escape, Output, Report, VirtualError, VirtualPeer};
use crate::lanes::http_exchange::STREAM_HEADER;
use crate::lanes::response_writer::{ResponseHead, ResponsePart, ServerWrite};
use crate::lanes::wiretap::Framing;
use crate::lanes::RunSink;
use crate::model::{StreamId, Transport};
use crate::time::Time;
use crate::trace::{EventKind, Side};
use crate::wire::http::Method;

/// What the lane must do for a virtual server.
#[derive(Debug)]
pub(crate) enum VirtualWrite {
    /// Carry this to the client (recorded already).
    Write(ServerWrite),
    /// The program's process ended: its pipe broke, its streams were cut.
    Exited,
}

/// A virtual server in the in-memory lane: the program's runs (one process at a time), the
/// recording of its transport, what it wrote not yet handed to the lane.
pub(crate) struct VirtualServer<'p> {
    peer: &'p mut VirtualPeer,
    seed: u64,
    transport: Transport,
    /// A process is running.
    running: bool,
    /// Processes started in this run (a restarted one draws fresh entropy from the seed).
    starts: u64,
    stdio: Framing,
    /// stdin bytes delivered to the program's pipe and not yet read by it: recorded as
    /// received when it reads them.
    unread: VecDeque<u8>,
    /// Per HTTP stream: its connection's framing, and whether its response ended.
    http: BTreeMap<u64, Framing>,
    /// HTTP streams whose response has a `Content-Length` (the others are chunked).
    lengths: BTreeSet<u64>,
    next: Option<Time>,
    /// The program's clock, as its last report gave it.
    clock: Time,
    writes: VecDeque<(Time, Output)>,
    exited: bool,
    escapes: Vec<(Time, Escape)>,
    /// The peer broke its protocol or could not start: the run cannot go on.
    error: Option<VirtualError>,
    fatal: bool,
    /// An intermediary's upstream: the reference server it reaches.
    upstream: Option<Upstream>,
}

impl<'p> VirtualServer<'p> {
    /// Drives runs of `peer`'s program, seeded from `seed`.
    pub(crate) fn new(peer: &'p mut VirtualPeer, seed: u64, transport: Transport) -> Self {
        VirtualServer {
            peer,
            seed,
            transport,
            running: false,
            starts: 0,
            stdio: Framing::stdio_as_written(),
            unread: VecDeque::new(),
            http: BTreeMap::new(),
            lengths: BTreeSet::new(),
            next: None,
            clock: Time::ZERO,
            writes: VecDeque::new(),
            exited: false,
            escapes: Vec::new(),
            error: None,
            fatal: false,
            upstream: None,
        }
    }

    /// Drives runs of `peer`'s *intermediary* program, seeded from `seed`: its front on
    /// `transport`, its upstream `upstream`.
    pub(crate) fn bridge(
        peer: &'p mut VirtualPeer,
        seed: u64,
        transport: Transport,
        upstream: Upstream,
    ) -> Self {
        VirtualServer {
            upstream: Some(upstream),
            ..VirtualServer::new(peer, seed, transport)
        }
    }

    /// The upstream of an intermediary, taken at the end of a run.
    pub(crate) fn take_upstream(&mut self) -> Option<Upstream> {
        self.upstream.take()
    }

    /// The upstream's next instant: the server side's, or what reaches a running program.
    fn upstream_due(&self) -> Option<Time> {
        let up = self.upstream.as_ref()?;
        let program = up.program_due().filter(|_| self.running);
        up.server_due().into_iter().chain(program).min()
    }

    /// Whether the run must stop: the peer failed, or an escape left it unable to go on.
    pub(crate) fn stopped(&self) -> bool {
        self.error.is_some() || self.fatal
    }

    /// The peer's failure, if any, and every escape seen with its virtual time.
    pub(crate) fn finish(mut self) -> (Option<VirtualError>, Vec<(Time, Escape)>) {
        if self.error.is_none() {
            if let Err(e) = self.peer.end() {
                self.error = Some(e);
            }
        }
        (self.error, self.escapes)
    }

    /// The program's next timer, or the time of a write it stamped later than the lane's
    /// clock (a loop its own thread held, by blocking, past the instant of its input).
    pub(crate) fn poll_timeout(&self) -> Option<Time> {
        if self.stopped() {
            return None;
        }
        self.program_due()
            .into_iter()
            .chain(self.upstream_due())
            .min()
    }

    /// The program's own next instant: its timer, or a write it stamped later than the lane's
    /// clock.
    fn program_due(&self) -> Option<Time> {
        let timer = self.next.filter(|_| self.running);
        let write = self.writes.front().map(|(t, _)| *t);
        timer.into_iter().chain(write).min()
    }

    /// A shim that runs ahead ([`VirtualPeer::lookahead`]) is brought to `until`, the lane's
    /// next instant, before the lane acts at it: it stops earlier at its program's first
    /// write. Whether it wrote (the lane then takes that write first).
    pub(crate) fn catch_up(&mut self, until: Time) -> bool {
        if !self.peer.lookahead() || !self.running || self.stopped() || self.clock >= until {
            return false;
        }
        let before = self.writes.len();
        let r = self.peer.advance(until);
        self.absorb(r);
        self.writes.len() > before || self.exited
    }

    /// The program's clock, as its last report gave it (ahead of the lane's for a shim that
    /// ran ahead to the end of the run).
    pub(crate) fn clock(&self) -> Time {
        self.clock
    }

    /// Timers due by `now` fire: the upstream's first (its server, then what reaches the
    /// program), then the program's.
    pub(crate) fn timers(&mut self, now: Time) {
        if let Some(up) = self.upstream.as_mut() {
            up.serve(now);
            while self.running && !self.stopped() {
                let Some(item) = self.upstream.as_mut().and_then(|u| u.pop_for_program(now)) else {
                    break;
                };
                let r = Upstream::deliver(self.peer, now, item);
                self.absorb(r);
            }
        }
        if self.stopped() {
            return;
        }
        if self.program_due().is_some_and(|t| t <= now) {
            let r = self.peer.advance(now);
            self.absorb(r);
        }
    }

    fn ensure_running(&mut self, now: Time) -> bool {
        if self.stopped() {
            return false;
        }
        if !self.running {
            let seed = self
                .seed
                .wrapping_add(self.starts.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            self.starts += 1;
            self.stdio = Framing::stdio_as_written();
            self.unread.clear();
            self.http.clear();
            self.lengths.clear();
            self.running = true;
            let r = match self.upstream {
                Some(_) => self.peer.spawn_bridge(seed, now, self.transport),
                None => self.peer.spawn(seed, now, self.transport),
            };
            self.absorb(r);
        }
        self.running && !self.stopped()
    }

    fn absorb(&mut self, report: Result<Report, VirtualError>) {
        match report {
            Err(e) => {
                self.error.get_or_insert(e);
            }
            Ok(r) => {
                self.next = r.next;
                self.clock = r.t;
                for (t, out) in r.out {
                    let out = match self.upstream.as_mut() {
                        Some(up) => match up.take(t, out) {
                            Ok(()) => continue,
                            Err(out) => out,
                        },
                        None => out,
                    };
                    self.writes.push_back((t, out));
                }
                self.escapes.extend(r.escapes.into_iter().map(|e| (r.t, e)));
                self.fatal |= r.fatal;
                if r.exit.is_some() {
                    if let Some(up) = self.upstream.as_mut() {
                        up.program_exited(r.t);
                    }
                    self.running = false;
                    self.exited = true;
                    self.next = None;
                }
            }
        }
    }

    /// stdio bytes from the client, into the program's pipe (recorded as it reads them).
    pub(crate) fn stdio_bytes(&mut self, now: Time, bytes: &[u8]) {
        if !self.ensure_running(now) {
            return;
        }
        self.unread.extend(bytes);
        let r = self.peer.deliver(now, bytes);
        self.absorb(r);
    }

    /// The client closed the program's stdin.
    pub(crate) fn input_closed(&mut self, now: Time, sink: &mut impl RunSink) {
        if !self.running || self.stopped() {
            return;
        }
        let mut events = Vec::new();
        self.stdio.client_gone(&mut events);
        record(sink, events);
        let r = self.peer.close(now);
        self.absorb(r);
        // Its end is the client's doing, which the client knows: no broken pipe to tell.
        self.exited = false;
        // A program that outlives its stdin is ended as a host ends it.
        if self.running {
            if let Err(e) = self.peer.end() {
                self.error.get_or_insert(e);
            }
            self.running = false;
        }
    }

    /// The process is killed (the lane's crash); the next input starts another.
    pub(crate) fn kill(&mut self) {
        if self.running {
            if let Err(e) = self.peer.end() {
                self.error.get_or_insert(e);
            }
            self.running = false;
            self.next = None;
        }
    }

    /// An HTTP request on `stream`: a POST's body, or a `GET` or `DELETE` with none.
    pub(crate) fn request(
        &mut self,
        now: Time,
        stream: StreamId,
        method: Method,
        body: &[u8],
        headers: BTreeMap<String, String>,
        sink: &mut impl RunSink,
    ) {
        if !self.ensure_running(now) {
            return;
        }
        let mut headers = headers;
        headers.insert(STREAM_HEADER.into(), stream.0.to_string());
        if method == Method::Post {
            headers
                .entry("content-type".into())
                .or_insert_with(|| "application/json".into());
            headers
                .entry("accept".into())
                .or_insert_with(|| "application/json, text/event-stream".into());
        }
        let mut head = format!("{} /mcp HTTP/1.1\r\n", method.as_str());
        if !headers.contains_key("host") {
            head.push_str("host: server\r\n");
        }
        for (name, value) in &headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        let framing = self
            .http
            .entry(stream.0)
            .or_insert_with(|| Framing::http(Some(Arc::new(AtomicU64::new(0)))));
        let mut events = Vec::new();
        framing.read(&bytes, &mut events);
        record(sink, events);
        let r = self
            .peer
            .request(now, stream.0, method.as_str(), &headers, body);
        self.absorb(r);
    }

    /// The client (or an intermediary, `by`) closed `stream`.
    pub(crate) fn stream_closed(
        &mut self,
        now: Time,
        stream: StreamId,
        by: Side,
        sink: &mut impl RunSink,
    ) {
        let Some(mut framing) = self.http.remove(&stream.0) else {
            return;
        };
        let mut events = Vec::new();
        framing.gone(by, None, &mut events);
        record(sink, events);
        if self.running && !self.stopped() {
            let r = self.peer.disconnect(now, stream.0);
            self.absorb(r);
        }
    }

    /// The next thing the program wrote by `now`, recorded (the lane's clock is then the
    /// instant the program stamped it). Its process's end comes after everything it wrote.
    pub(crate) fn poll_io(&mut self, now: Time, sink: &mut impl RunSink) -> Option<VirtualWrite> {
        let due = self.writes.front().is_some_and(|(t, _)| *t <= now);
        let Some((_, out)) = due.then(|| self.writes.pop_front()).flatten() else {
            let ended = self.writes.is_empty() && std::mem::take(&mut self.exited);
            return ended.then_some(VirtualWrite::Exited);
        };
        let mut events = Vec::new();
        let write = match out {
            Output::Read(n) => {
                let n = n.min(self.unread.len());
                let bytes: Vec<u8> = self.unread.drain(..n).collect();
                self.stdio.read(&bytes, &mut events);
                record(sink, events);
                return self.poll_io(now, sink);
            }
            // A client program's, never a server's.
            Output::Spawned(_)
            | Output::ChildStdio(_)
            | Output::Closed
            | Output::Killed(_)
            | Output::Connect { .. }
            | Output::ConnData { .. }
            | Output::ConnClosed { .. } => return self.poll_io(now, sink),
            Output::Stdio(bytes) => {
                self.stdio.wrote(&bytes, &mut events);
                ServerWrite::Line(bytes)
            }
            Output::Head {
                stream,
                status,
                headers,
            } => {
                let mut text = format!("HTTP/1.1 {status} X\r\n");
                for (name, value) in &headers {
                    text.push_str(&format!("{name}: {value}\r\n"));
                }
                if headers.contains_key("content-length") {
                    self.lengths.insert(stream);
                } else {
                    text.push_str("transfer-encoding: chunked\r\n");
                }
                text.push_str("\r\n");
                self.tap(stream, text.as_bytes(), &mut events);
                let head = ResponseHead {
                    status,
                    content_type: known_content_type(headers.get("content-type")),
                    session: headers.get("mcp-session-id").cloned(),
                    told_not_to_buffer: headers
                        .get("x-accel-buffering")
                        .is_some_and(|v| v.eq_ignore_ascii_case("no")),
                };
                ServerWrite::Http(StreamId(stream), ResponsePart::Head(head))
            }
            Output::Body { stream, bytes } => {
                let chunked = self.chunked(stream);
                let framed = if chunked {
                    let mut b = format!("{:x}\r\n", bytes.len()).into_bytes();
                    b.extend_from_slice(&bytes);
                    b.extend_from_slice(b"\r\n");
                    b
                } else {
                    bytes.clone()
                };
                self.tap(stream, &framed, &mut events);
                ServerWrite::Http(StreamId(stream), ResponsePart::Body(bytes))
            }
            Output::End { stream } => {
                if self.chunked(stream) {
                    self.tap(stream, b"0\r\n\r\n", &mut events);
                }
                if let Some(framing) = self.http.get_mut(&stream) {
                    framing.write_end(&mut events);
                }
                self.http.remove(&stream);
                self.lengths.remove(&stream);
                ServerWrite::Http(StreamId(stream), ResponsePart::End)
            }
        };
        for e in &events {
            if matches!(e, EventKind::Send(_)) {
                sink.tally(|s| s.messages += 1);
            }
        }
        record(sink, events);
        Some(VirtualWrite::Write(write))
    }

    fn tap(&mut self, stream: u64, bytes: &[u8], events: &mut Vec<EventKind>) {
        if let Some(framing) = self.http.get_mut(&stream) {
            framing.wrote(bytes, events);
        }
    }

    /// The response on `stream` has no length: its body is chunked on the synthesised wire.
    fn chunked(&self, stream: u64) -> bool {
        !self.lengths.contains(&stream)
    }
}

fn record(sink: &mut impl RunSink, events: Vec<EventKind>) {
    for e in events {
        sink.record(Side::Server, e);
    }
}

/// The content types the lane's client tells apart, as the model's writer names them.
fn known_content_type(value: Option<&String>) -> Option<&'static str> {
    let essence = value?.split(';').next()?.trim().to_ascii_lowercase();
    match essence.as_str() {
        "text/event-stream" => Some(ResponseHead::EVENT_STREAM),
        "application/json" => Some("application/json"),
        _ => Some("text/plain"),
    }
}
