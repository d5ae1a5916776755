//! `mcp-sim probe -- COMMAND ARGS...`: drive a real stdio MCP server and judge what it did;
//! `mcp-sim probe --url URL`: the same against a live Streamable HTTP server (see
//! [`crate::probe_http`]).
//!
//! The probe starts the server as a subprocess and talks to it with the library's reference
//! [`Client`] over NDJSON on its stdin and stdout (spec §5.1), in real time: the model's clock is
//! the number of milliseconds since the probe started. Every call asks for progress and runs
//! under a timeout policy (an idle timeout that valid progress resets, under a hard maximum,
//! spec §4).
//!
//! # Phases
//!
//! 1. **Start-up check**: one `tools/list`, alone, allowed `--startup-timeout-ms` (an
//!    interpreter's start-up is not what is judged). A server that exits or never answers is
//!    named (`server-exited`, `no-response`: see [`crate::probe_report`]) instead of passing
//!    a run that exercised nothing.
//! 2. **Calibration**: two calls of the tool, one after the other, not cancelled: the shorter
//!    one's duration is the call's natural duration `D` (a first call may pay for warming up).
//! 3. **The schedule**, seeded (ChaCha8 from `--seed`): overlapping calls; a share of them
//!    cancelled at a seeded offset. Without `--cancel-within-ms` the offsets fall in
//!    `[D/10, 2D/5)`, so every cancel meets a call with more than half its work left: that is
//!    what lets the oracle tell a server that answers a cancel from one whose result merely
//!    crossed it (see `mcp_sim::oracle`, "An answer to the cancel").
//!
//! # Barriers (stdio)
//!
//! Right after each `notifications/cancelled` the probe writes a `tools/list`. The pipes are
//! ordered both ways, so once its answer arrives, the server has certainly read the cancel,
//! and anything for the cancelled call that arrives after that answer was written after the
//! server read the cancel: a `response-after-cancel` with no timing assumption at all.
//!
//! # Faults
//!
//! Seeded like the schedule and recorded in the trace as `fault` events. stdio:
//! `--stall-percent` of the calls see the probe stop reading the server's stdout for a span of
//! `--stall-ms` (back-pressure: the server's writes wait in the pipe), and `--restarts N`
//! kills and restarts the server between calls (stdin closed, 2 s to exit, then killed; the
//! new process gets the start-up check). HTTP: see [`crate::probe_http`].
//!
//! Everything the client observes is recorded as a trace (format v1, client side only): its
//! sends and receives, timer firings, outcomes, progress given to the application, faults and
//! closes. The oracle judges that trace; rules that need the server's view infer it with the
//! grace window and the barriers. The server's stderr is read and discarded (§5.1).
//!
//! The run ends once every call has an outcome and a drain window has passed (so messages that
//! arrive after a cancellation are seen), or at `--max-seconds`, when the calls still open are
//! cancelled and the drain window runs. Shutdown follows §5.1: close stdin, wait, then kill.
//! Over HTTP the server is not the probe's to stop: the run ends by dropping the connections
//! still open.
//!
//! Exit codes: see [`crate::probe_report`] (0 clean, 1 violation or server fault, 2 usage or
//! cannot start, 3 inconclusive).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_sim::framing::ndjson::{self, LineDecoder, LineOptions};
use mcp_sim::model::client::{CallSpec, Client, ClientConfig, ClientEvent, ClientTransmit};
use mcp_sim::model::{Outcome, StreamId, TimeoutPolicy, Transport};
use mcp_sim::oracle::{self, OracleConfig, CANCEL_REACTION_MS};
use mcp_sim::report;
use mcp_sim::scenario::ProxyConfig;
use mcp_sim::time::Time;
use mcp_sim::trace::{EventKind, Side, Trace, WireEvent, FAULT_STALL};
use mcp_sim::wire::{self, Message, RequestId};
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

use crate::check::{oracle_config, Format, ProfileArg};
use crate::probe_http::{self, ConnFaults, Http, Input, RelayConfig};
use crate::probe_report::{self, Coverage, Finding, JsonVerdict, ServerEnd};

/// The longest hard maximum a call may be given, in ms (one hour).
const MAX_TOTAL_CEILING_MS: u64 = 60 * 60 * 1000;
/// The most calls one probe makes.
const MAX_CALLS: u32 = 1000;
/// Calibration calls before the schedule.
const CALIBRATION_CALLS: usize = 2;
/// How long a server may take to exit once its stdin closed, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

#[derive(clap::Args)]
pub struct Args {
    /// Seed of the schedule (call start times, which calls are cancelled and when, faults).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The tool to call.
    #[arg(long, default_value = "slow_op")]
    tool: String,
    /// The tool's arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Number of scheduled `tools/call` requests (after the calibration call).
    #[arg(long, default_value_t = 6)]
    calls: u32,
    /// Idle timeout of each call in ms; valid progress restarts it.
    #[arg(long, default_value_t = 5000)]
    timeout_ms: u64,
    /// Hard maximum of each call in ms, whatever progress arrives.
    #[arg(long, default_value_t = 30_000)]
    max_total_ms: u64,
    /// Percentage of calls the application cancels, at a seeded offset after their start.
    #[arg(long, default_value_t = 34)]
    cancel_percent: u64,
    /// Cancellations fall within this many ms after their call's start. Default: between a
    /// tenth and two fifths of the calibrated duration of a call.
    #[arg(long)]
    cancel_within_ms: Option<u64>,
    /// How long the start-up check (`tools/list`) may wait for the server's first answer,
    /// in ms: an interpreter's start-up is not what the probe judges.
    #[arg(long, default_value_t = 30_000)]
    startup_timeout_ms: u64,
    /// Bound on the whole run in seconds; calls still open then are cancelled.
    #[arg(long, default_value_t = 60)]
    max_seconds: u64,
    /// How long to keep reading after the last outcome, in ms (late messages after a cancel).
    #[arg(long, default_value_t = 1500)]
    drain_ms: u64,
    /// Write the trace (JSON Lines, format v1) to this file.
    #[arg(long)]
    trace: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = ProfileArg::Strict)]
    profile: ProfileArg,
    /// Window for inferring the server's observations and for stopping work, in ms.
    #[arg(long, default_value_t = OracleConfig::default().grace_ms)]
    grace_ms: u64,
    /// Output: text lines, or one JSON object with the verdict, coverage, findings and
    /// violations.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Print every trace event as it is recorded (to stderr).
    #[arg(long)]
    verbose: bool,
    /// Probe the Streamable HTTP server at this endpoint (`http://HOST:PORT/PATH`) instead of
    /// starting a command.
    #[arg(long, conflicts_with = "command")]
    url: Option<String>,
    /// With `--url`: relay through a local intermediary with the idle timeout, buffering and
    /// gateway status of a preset: `nginx`, `alb`, `cloudflare`, `custom:SECONDS` or
    /// `custom:MSms`.
    #[arg(long, value_parser = parse_proxy)]
    proxy: Option<ProxyConfig>,
    /// With `--url`: the relay's idle timeout in ms. Alone, a plain idle cutter (the same as
    /// `--proxy custom:MSms`); with `--proxy`, that preset with this timeout instead of its
    /// own (nginx's `proxy_read_timeout 10s`, say).
    #[arg(long)]
    proxy_idle_ms: Option<u64>,
    /// With `--url`: the relay delays every post's bytes, each way, by a seeded latency in
    /// this range of ms (`A..B`).
    #[arg(long, value_parser = parse_ms_range)]
    latency_ms: Option<(u64, u64)>,
    /// With `--url`: percentage of posts whose connection the relay resets in the middle of
    /// the response.
    #[arg(long, default_value_t = 0)]
    reset_percent: u64,
    /// stdio: percentage of calls during which the probe stops reading the server's stdout
    /// for a while (back-pressure).
    #[arg(long, default_value_t = 0)]
    stall_percent: u64,
    /// stdio: how long a stall lasts, a range of ms (`A..B`).
    #[arg(long, value_parser = parse_ms_range, default_value = "200..2000")]
    stall_ms: (u64, u64),
    /// stdio: kill and restart the server this many times, between calls.
    #[arg(long, default_value_t = 0)]
    restarts: u32,
    /// The server command and its arguments (after `--`).
    #[arg(required_unless_present = "url", last = true, num_args = 1..)]
    command: Vec<String>,
}

fn parse_proxy(s: &str) -> Result<ProxyConfig, String> {
    ProxyConfig::preset(s).ok_or_else(|| {
        format!("unknown proxy {s:?}: nginx, alb, cloudflare, custom:SECONDS or custom:MSms")
    })
}

/// `A..B` in ms, `A <= B`.
fn parse_ms_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?} is not a range A..B"))?;
    let a: u64 = a
        .trim()
        .parse()
        .map_err(|_| format!("bad start in {s:?}"))?;
    let b: u64 = b.trim().parse().map_err(|_| format!("bad end in {s:?}"))?;
    if a > b {
        return Err(format!("empty range {s:?}"));
    }
    Ok((a, b))
}

/// One call of the schedule.
#[derive(Debug, Clone, Copy)]
struct Planned {
    /// When the application starts it, in ms after the schedule began.
    start_ms: u64,
    /// When the application cancels it, in ms after its start.
    cancel_after_ms: Option<u64>,
    /// A stall of the reader: when (ms after the call's start) and how long.
    stall: Option<(u64, u64)>,
    /// Kill and restart the server before this call, once nothing is outstanding.
    restart_before: bool,
}

/// The window cancels fall in, in ms after their call's start, `[from, to)`.
fn cancel_window(args: &Args, natural_ms: Option<u64>) -> (u64, u64) {
    match (args.cancel_within_ms, natural_ms) {
        (Some(w), _) => (0, w.max(1)),
        (None, Some(d)) => (d / 10, (2 * d / 5).max(d / 10 + 1)),
        (None, None) => (0, 1000),
    }
}

/// Draws the schedule: starts spread so calls overlap, some cancelled while they run, faults.
fn schedule(args: &Args, window: (u64, u64)) -> Vec<Planned> {
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut below = |n: u64| rng.next_u64() % n.max(1);
    let mut at = 0;
    let mut plan: Vec<Planned> = (0..args.calls)
        .map(|_| {
            at += below(400);
            let cancelled = below(100) < args.cancel_percent;
            let offset = window.0 + below(window.1 - window.0);
            let stalled = below(100) < args.stall_percent;
            let stall = (
                below(window.1.max(1)),
                args.stall_ms.0 + below(args.stall_ms.1 - args.stall_ms.0 + 1),
            );
            Planned {
                start_ms: at,
                cancel_after_ms: cancelled.then_some(offset),
                stall: stalled.then_some(stall),
                restart_before: false,
            }
        })
        .collect();
    // Restarts go before distinct calls other than the first.
    let mut gaps: Vec<usize> = (1..plan.len()).collect();
    for _ in 0..args.restarts {
        let k = gaps.remove(below(gaps.len() as u64) as usize);
        plan[k].restart_before = true;
    }
    plan
}

/// The server process of a stdio probe and the threads around it.
struct Process {
    child: Child,
    /// Lines for the writer thread; dropping it closes the server's stdin.
    stdin: Option<mpsc::Sender<Vec<u8>>>,
    /// Until when the stdout reader holds what it read (a stall).
    stall_until: Arc<Mutex<Option<Instant>>>,
}

impl Process {
    /// Starts `command` with piped stdio; its stdout arrives on the returned channel.
    fn spawn(
        command: &[String],
        write_errors: &Arc<AtomicUsize>,
    ) -> std::io::Result<(Process, Receiver<Input>)> {
        let mut child = Command::new(&command[0])
            .args(&command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let (tx, rx) = mpsc::channel();
        let stall_until = Arc::new(Mutex::new(None));
        let stdout = child.stdout.take().expect("stdout is piped");
        pump(stdout, Some(tx), Arc::clone(&stall_until));
        let stderr = child.stderr.take().expect("stderr is piped");
        pump(stderr, None, Arc::new(Mutex::new(None)));
        let stdin = writer(
            child.stdin.take().expect("stdin is piped"),
            Arc::clone(write_errors),
        );
        Ok((
            Process {
                child,
                stdin: Some(stdin),
                stall_until,
            },
            rx,
        ))
    }

    /// Closes stdin, gives the server [`EXIT_GRACE`] to exit on EOF, then kills it (§5.1).
    /// Returns how it ended, for the report.
    fn stop(&mut self) -> String {
        self.stdin = None;
        let closed_at = Instant::now();
        while closed_at.elapsed() < EXIT_GRACE {
            if let Ok(Some(status)) = self.child.try_wait() {
                let after = closed_at.elapsed().as_millis();
                return format!("exited {after} ms after its stdin closed ({status})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        format!(
            "still running {} s after its stdin closed: killed",
            EXIT_GRACE.as_secs()
        )
    }

    /// How the process ended, once it closed its stdout (waits briefly for the exit status).
    fn exit_status(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return format!("exited ({status})");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        "closed its stdout".into()
    }
}

/// How the probe reaches the server.
enum Conn {
    Stdio(Box<Process>),
    Http(Box<Http>),
}

struct Probe {
    started: Instant,
    client: Client,
    trace: Trace,
    transport: Transport,
    conn: Conn,
    rx: Receiver<Input>,
    lines: LineDecoder,
    verbose: bool,
    /// The server closed its stdout before the probe was done (stdio).
    eof: Option<String>,
    /// How each request ended, and when.
    outcomes: BTreeMap<RequestId, (Outcome, Time)>,
    /// Requests lost and re-issued: old id to new id.
    retried: BTreeMap<RequestId, RequestId>,
    progress: usize,
    write_errors: Arc<AtomicUsize>,
    /// Seeded draws of the per-post HTTP faults.
    fault_rng: ChaCha8Rng,
    latency_ms: Option<(u64, u64)>,
    reset_percent: u64,
}

impl Probe {
    fn now(&self) -> Time {
        Time::from_millis(u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    fn record(&mut self, kind: EventKind) {
        let t = self.now();
        self.trace.push(t, Side::Client, kind);
        if self.verbose {
            if let Some(e) = self.trace.events.last() {
                eprintln!(
                    "{}",
                    serde_json::to_string(e).expect("trace events serialize")
                );
            }
        }
    }

    /// The id a request has now (a lost idempotent request is re-issued under a new one).
    fn current(&self, id: &RequestId) -> RequestId {
        let mut id = id.clone();
        while let Some(new) = self.retried.get(&id) {
            id = new.clone();
        }
        id
    }

    fn outcome(&self, id: &RequestId) -> Option<(Outcome, Time)> {
        self.outcomes.get(&self.current(id)).copied()
    }

    /// Sends what the client queued and records what it told the application.
    fn flush(&mut self) {
        loop {
            let mut busy = false;
            while let Some(t) = self.client.poll_transmit() {
                busy = true;
                self.transmit(t);
            }
            while let Some(e) = self.client.poll_event() {
                busy = true;
                self.event(e);
            }
            if !busy {
                break;
            }
        }
    }

    fn transmit(&mut self, t: ClientTransmit) {
        match t {
            ClientTransmit::Line(msg) => {
                let mut w = WireEvent::message(Transport::Stdio, None, &msg);
                if let Message::Request(r) = &msg {
                    w.policy = self.client.policy_of(&r.id).map(Into::into);
                }
                self.record(EventKind::Send(w));
                let Ok(line) = ndjson::encode_line(&msg) else {
                    return;
                };
                let queued = match &self.conn {
                    Conn::Stdio(p) => p.stdin.as_ref().is_some_and(|s| s.send(line).is_ok()),
                    Conn::Http(_) => false,
                };
                if !queued {
                    self.write_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            ClientTransmit::Post { stream, msg } => {
                let mut w = WireEvent::message(Transport::Http, Some(stream), &msg);
                if let Message::Request(r) = &msg {
                    w.policy = self.client.policy_of(&r.id).map(Into::into);
                }
                self.record(EventKind::Send(w));
                let faults = self.draw_faults(stream);
                if let Conn::Http(http) = &mut self.conn {
                    http.post(stream, msg, faults);
                }
            }
            ClientTransmit::Close { stream } => {
                self.record(EventKind::Close {
                    stream: Some(stream.0),
                    by: Side::Client,
                    reason: None,
                });
                if let Conn::Http(http) = &mut self.conn {
                    http.close(stream);
                }
            }
            // The reference client never drops the pipe.
            ClientTransmit::Disconnect => {
                self.record(EventKind::Close {
                    stream: None,
                    by: Side::Client,
                    reason: None,
                });
                if let Conn::Stdio(p) = &mut self.conn {
                    p.stdin = None;
                }
            }
        }
    }

    /// The relay's faults for a new post, drawn from the seed and recorded.
    fn draw_faults(&mut self, stream: StreamId) -> ConnFaults {
        let latency_ms = self
            .latency_ms
            .map_or(0, |(a, b)| a + self.fault_rng.next_u64() % (b - a + 1));
        let reset = self.fault_rng.next_u64() % 100 < self.reset_percent;
        if latency_ms > 0 {
            self.record(EventKind::Fault {
                fault: "latency".into(),
                stream: Some(stream.0),
                ms: Some(latency_ms),
            });
        }
        if reset {
            self.record(EventKind::Fault {
                fault: "reset".into(),
                stream: Some(stream.0),
                ms: None,
            });
        }
        ConnFaults { latency_ms, reset }
    }

    fn event(&mut self, e: ClientEvent) {
        let kind = match e {
            ClientEvent::Progress {
                request, progress, ..
            } => {
                self.progress += 1;
                EventKind::Progress { request, progress }
            }
            ClientEvent::Timeout { request, reason } => EventKind::Timeout { request, reason },
            ClientEvent::Outcome { request, outcome } => {
                let now = self.now();
                self.outcomes.insert(request.clone(), (outcome, now));
                EventKind::Outcome { request, outcome }
            }
            ClientEvent::Retried { lost, new } => {
                self.outcomes.remove(&lost);
                self.retried.insert(lost, new);
                return;
            }
        };
        self.record(kind);
    }

    /// Bytes from the server's stdout: split into lines, record each, hand messages over.
    fn bytes(&mut self, bytes: &[u8]) {
        self.lines.push(bytes);
        while let Some(item) = self.lines.next_line() {
            match item {
                Ok(line) => self.receive(None, &line.bytes),
                Err(e) => {
                    let w = WireEvent::raw(Transport::Stdio, None, e.to_string().as_bytes());
                    self.record(EventKind::Recv(w));
                }
            }
        }
    }

    fn receive(&mut self, stream: Option<StreamId>, bytes: &[u8]) {
        // The message as written (its JSON, or its text when it is not JSON), not a
        // re-encoding.
        self.record(EventKind::Recv(WireEvent::raw(
            self.transport,
            stream,
            bytes,
        )));
        if let Ok(msg) = wire::decode(bytes) {
            let now = self.now();
            self.client.handle_message(now, stream, msg);
        }
        self.flush();
    }

    /// Input from an HTTP response.
    fn http_input(&mut self, input: Input) {
        match input {
            Input::Bytes(_) | Input::Eof => {}
            Input::Status {
                stream,
                status,
                content_type,
            } => self.record(EventKind::Status {
                stream: Some(stream.0),
                status,
                content_type,
            }),
            Input::Message { stream, bytes } => self.receive(Some(stream), &bytes),
            Input::Comment { stream } => self.record(EventKind::Comment {
                stream: Some(stream.0),
            }),
            Input::Ended { stream } => self.stream_ended(stream, Side::Server, None),
            Input::Cut { stream, by } => match by {
                Some(cut) => self.stream_ended(stream, Side::Proxy, Some(cut.reason().into())),
                None => self.stream_ended(stream, Side::Server, None),
            },
        }
    }

    /// A response stream ended on the server's (or the relay's) side.
    fn stream_ended(&mut self, stream: StreamId, by: Side, reason: Option<String>) {
        let open = match &mut self.conn {
            Conn::Http(http) => http.ended(stream),
            Conn::Stdio(_) => false,
        };
        if !open {
            return; // the client closed it first
        }
        self.record(EventKind::Close {
            stream: Some(stream.0),
            by,
            reason,
        });
        let now = self.now();
        self.client.handle_stream_closed(now, stream);
        self.flush();
    }

    /// The server closed its stdout.
    fn eof(&mut self) {
        if let Some(e) = self.lines.finish() {
            let w = WireEvent::raw(Transport::Stdio, None, e.to_string().as_bytes());
            self.record(EventKind::Recv(w));
        }
        self.record(EventKind::Close {
            stream: None,
            by: Side::Server,
            reason: None,
        });
        let how = match &mut self.conn {
            Conn::Stdio(p) => {
                p.stdin = None;
                p.exit_status()
            }
            Conn::Http(_) => "closed".into(),
        };
        self.eof = Some(how);
        let now = self.now();
        self.client.handle_disconnect(now);
        self.flush();
    }

    /// Fires the client's due timers.
    fn timers(&mut self) {
        let now = self.now();
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
            self.flush();
        }
    }

    /// Waits for input until `until` (or the client's next timer) and handles it. Returns
    /// false once the server closed its stdout.
    fn wait(&mut self, until: Time) -> bool {
        let now = self.now();
        let until = self.client.poll_timeout().map_or(until, |t| t.min(until));
        let wait = Duration::from_millis(until.as_millis().saturating_sub(now.as_millis()));
        match self.rx.recv_timeout(wait) {
            Ok(Input::Bytes(b)) => self.bytes(&b),
            Ok(Input::Eof) | Err(RecvTimeoutError::Disconnected) => {
                self.eof();
                return false;
            }
            Ok(input) => self.http_input(input),
            Err(RecvTimeoutError::Timeout) => {}
        }
        self.timers();
        true
    }

    /// Starts `spec` and runs until it has an outcome; false when the server went away or
    /// `hard_end` passed first.
    fn alone(&mut self, spec: CallSpec, hard_end: Time) -> Option<RequestId> {
        let now = self.now();
        let id = self.client.start_request(now, spec);
        self.flush();
        loop {
            if self.outcome(&id).is_some() {
                return Some(id);
            }
            if self.now() >= hard_end || !self.wait(hard_end) {
                return None;
            }
        }
    }

    /// Closes the server's stdin and stops the process (§5.1: close, wait, kill), recording
    /// the close; returns how it ended.
    fn stop_server(&mut self) -> String {
        self.record(EventKind::Close {
            stream: None,
            by: Side::Client,
            reason: None,
        });
        match &mut self.conn {
            Conn::Stdio(process) => process.stop(),
            Conn::Http(_) => String::new(),
        }
    }

    /// Kills the server and starts it again (stdio), then waits for its start-up check.
    fn restart(&mut self, command: &[String], startup: &TimeoutPolicy, hard_end: Time) -> bool {
        self.record(EventKind::Fault {
            fault: "restart".into(),
            stream: None,
            ms: None,
        });
        self.stop_server();
        let (new, rx) = match Process::spawn(command, &self.write_errors) {
            Ok(p) => p,
            Err(e) => {
                self.eof = Some(format!("could not be started again ({e})"));
                return false;
            }
        };
        self.conn = Conn::Stdio(Box::new(new));
        self.rx = rx;
        self.lines = LineDecoder::new(LineOptions::default());
        let now = self.now();
        self.client.handle_disconnect(now);
        self.flush();
        self.alone(list_tools(startup), hard_end).is_some()
    }

    /// Stops reading the server's stdout for `ms` (stdio), and records it.
    fn stall(&mut self, ms: u64) {
        if let Conn::Stdio(p) = &self.conn {
            *p.stall_until.lock().expect("stall") =
                Some(Instant::now() + Duration::from_millis(ms));
            self.record(EventKind::Fault {
                fault: FAULT_STALL.into(),
                stream: None,
                ms: Some(ms),
            });
        }
    }
}

/// `tools/list`: the start-up check and the barrier after a stdio cancel.
fn list_tools(policy: &TimeoutPolicy) -> CallSpec {
    CallSpec {
        method: "tools/list".into(),
        params: Map::new(),
        progress: false,
        policy: *policy,
        idempotent: false,
    }
}

/// Reads `from` in a thread, forwarding chunks (or dropping them when `tx` is `None`). While
/// `stall_until` lies ahead, what was read waits: the server's further writes fill the pipe.
fn pump(
    mut from: impl Read + Send + 'static,
    tx: Option<mpsc::Sender<Input>>,
    stall_until: Arc<Mutex<Option<Instant>>>,
) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let until = *stall_until.lock().expect("stall");
                    if let Some(until) = until {
                        std::thread::sleep(until.saturating_duration_since(Instant::now()));
                    }
                    if let Some(tx) = &tx {
                        if tx.send(Input::Bytes(buf[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                }
            }
        }
        if let Some(tx) = tx {
            let _ = tx.send(Input::Eof);
        }
    });
}

/// Writes lines to the server's stdin in a thread, so a server that stops reading never blocks
/// the probe's clock; stdin closes when the sender is dropped (or the server is killed).
fn writer(mut stdin: ChildStdin, errors: Arc<AtomicUsize>) -> mpsc::Sender<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for line in rx {
            if stdin.write_all(&line).and_then(|()| stdin.flush()).is_err() {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    tx
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("mcp-sim probe: {msg}");
    ExitCode::from(2)
}

/// Checks the arguments that clap cannot.
fn validate(args: &Args) -> Result<Value, String> {
    let arguments: Value = match serde_json::from_str(&args.args) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return Err("--args must be a JSON object".into()),
        Err(e) => return Err(format!("--args is not JSON: {e}")),
    };
    if args.calls == 0 || args.calls > MAX_CALLS {
        return Err(format!("--calls must be between 1 and {MAX_CALLS}"));
    }
    if args.timeout_ms == 0 || args.max_total_ms == 0 || args.max_total_ms > MAX_TOTAL_CEILING_MS {
        return Err(format!(
            "--timeout-ms must be positive and --max-total-ms between 1 and {MAX_TOTAL_CEILING_MS}"
        ));
    }
    if args.startup_timeout_ms == 0 {
        return Err("--startup-timeout-ms must be positive".into());
    }
    if args.max_seconds == 0 || args.cancel_percent > 100 {
        return Err("--max-seconds must be positive and --cancel-percent at most 100".into());
    }
    if args.cancel_within_ms == Some(0) {
        return Err("--cancel-within-ms must be positive".into());
    }
    let http_only = args.proxy.is_some()
        || args.proxy_idle_ms.is_some()
        || args.latency_ms.is_some()
        || args.reset_percent > 0;
    if http_only && args.url.is_none() {
        return Err("--proxy, --proxy-idle-ms, --latency-ms and --reset-percent need --url".into());
    }
    if (args.stall_percent > 0 || args.restarts > 0) && args.url.is_some() {
        return Err("--stall-percent and --restarts apply to stdio servers, not --url".into());
    }
    if args.proxy_idle_ms == Some(0) {
        return Err("--proxy-idle-ms must be positive".into());
    }
    if args.reset_percent > 100 || args.stall_percent > 100 {
        return Err("--reset-percent and --stall-percent are at most 100".into());
    }
    if args.restarts >= args.calls {
        return Err("--restarts must be fewer than --calls (a restart goes between calls)".into());
    }
    Ok(arguments)
}

pub fn run(args: &Args) -> ExitCode {
    let arguments = match validate(args) {
        Ok(a) => a,
        Err(e) => return usage(&e),
    };
    let policy = TimeoutPolicy::resetting(
        Duration::from_millis(args.timeout_ms),
        Duration::from_millis(args.max_total_ms),
    );
    match &args.url {
        Some(url) => run_http(args, url, &policy, &arguments),
        None => run_stdio(args, &policy, &arguments),
    }
}

fn new_probe(transport: Transport, conn: Conn, rx: Receiver<Input>, args: &Args) -> Probe {
    Probe {
        started: Instant::now(),
        client: Client::new(ClientConfig::new(transport)),
        trace: Trace::new(),
        transport,
        conn,
        rx,
        lines: LineDecoder::new(LineOptions::default()),
        verbose: args.verbose,
        eof: None,
        outcomes: BTreeMap::new(),
        retried: BTreeMap::new(),
        progress: 0,
        write_errors: Arc::new(AtomicUsize::new(0)),
        fault_rng: ChaCha8Rng::seed_from_u64(args.seed ^ 0x6661_756c_7473),
        latency_ms: args.latency_ms,
        reset_percent: args.reset_percent,
    }
}

fn run_http(args: &Args, url: &str, policy: &TimeoutPolicy, arguments: &Value) -> ExitCode {
    let endpoint = match probe_http::parse_url(url) {
        Ok(e) => e,
        Err(e) => return usage(&e),
    };
    let proxy = match (args.proxy, args.proxy_idle_ms.map(Duration::from_millis)) {
        (Some(preset), Some(idle)) => Some(ProxyConfig {
            idle_timeout: idle,
            ..preset
        }),
        (Some(preset), None) => Some(preset),
        (None, idle) => idle.map(ProxyConfig::custom),
    };
    let relay = RelayConfig {
        proxy,
        faults: args.latency_ms.is_some() || args.reset_percent > 0,
    };
    let (tx, rx) = mpsc::channel();
    let http = match Http::start(endpoint, relay, tx) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("mcp-sim probe: {url}: {e}");
            return ExitCode::from(2);
        }
    };
    let mut probe = new_probe(Transport::Http, Conn::Http(Box::new(http)), rx, args);
    let run = drive(&mut probe, args, policy, arguments);
    // The streams still open are the client's to drop.
    let Conn::Http(http) = &mut probe.conn else {
        unreachable!("the HTTP probe keeps its connection");
    };
    let open = http.open();
    http.shutdown();
    let mut ended = format!(
        "server: {} connections, {} refused",
        http.connections.load(Ordering::Relaxed),
        http.refused.load(Ordering::Relaxed)
    );
    let end = ServerEnd {
        exited_early: None,
        refused: http.refused.load(Ordering::Relaxed),
    };
    if let (Some(addr), Some(p)) = (http.proxy, proxy) {
        ended.push_str(&format!(
            "; through the {} relay on {addr} (idle timeout {} ms)",
            p.name,
            p.idle_timeout.as_millis()
        ));
    }
    for stream in open {
        probe.record(EventKind::Close {
            stream: Some(stream.0),
            by: Side::Client,
            reason: None,
        });
    }
    finish(probe, args, url, &run, &ended, &end)
}

fn run_stdio(args: &Args, policy: &TimeoutPolicy, arguments: &Value) -> ExitCode {
    let write_errors = Arc::new(AtomicUsize::new(0));
    let (process, rx) = match Process::spawn(&args.command, &write_errors) {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "mcp-sim probe: cannot start {}: {e}",
                args.command.join(" ")
            );
            return ExitCode::from(2);
        }
    };
    let mut probe = new_probe(Transport::Stdio, Conn::Stdio(Box::new(process)), rx, args);
    probe.write_errors = write_errors;
    let run = drive(&mut probe, args, policy, arguments);
    let ended = match &probe.eof {
        Some(how) => format!("server: {how}"),
        None => format!("server: {}", probe.stop_server()),
    };
    let end = ServerEnd {
        exited_early: probe.eof.clone(),
        refused: 0,
    };
    let label = args.command.join(" ");
    finish(probe, args, &label, &run, &ended, &end)
}

/// What the run did, for the report.
struct RunSummary {
    plan: Vec<Planned>,
    natural_ms: Option<u64>,
    window: (u64, u64),
    started: usize,
}

/// The three phases. Returns early when the server goes away.
fn drive(probe: &mut Probe, args: &Args, policy: &TimeoutPolicy, arguments: &Value) -> RunSummary {
    let hard_end = Time::from_millis(args.max_seconds.saturating_mul(1000));
    let mut summary = RunSummary {
        plan: Vec::new(),
        natural_ms: None,
        window: cancel_window(args, None),
        started: 0,
    };
    // 1. The start-up check.
    let startup = TimeoutPolicy::fixed(Duration::from_millis(args.startup_timeout_ms));
    if probe.alone(list_tools(&startup), hard_end).is_none() {
        return summary;
    }
    // 2. Calibration: the shorter of two calls (a first call may pay for warming up).
    for _ in 0..CALIBRATION_CALLS {
        let began = probe.now();
        let spec = CallSpec::tool(&args.tool, arguments.clone(), *policy);
        let Some(id) = probe.alone(spec, hard_end) else {
            return summary;
        };
        summary.started += 1;
        if let Some((Outcome::Result, at)) = probe.outcome(&id) {
            let took = at.as_millis() - began.as_millis();
            summary.natural_ms = Some(summary.natural_ms.map_or(took, |d| d.min(took)));
        }
    }
    summary.window = cancel_window(args, summary.natural_ms);
    summary.plan = schedule(args, summary.window);
    // 3. The schedule.
    let plan = summary.plan.clone();
    let mut base = probe.now().as_millis();
    let mut ids: Vec<Option<RequestId>> = vec![None; plan.len()];
    let mut cancelled = vec![false; plan.len()];
    let mut stalled = vec![false; plan.len()];
    let mut next_call = 0;
    let mut settled_at: Option<Time> = None;
    let mut gave_up = false;
    loop {
        let now = probe.now();
        // Start the calls that are due; a restart waits until nothing is outstanding.
        while next_call < plan.len()
            && base + plan[next_call].start_ms <= now.as_millis()
            && !gave_up
        {
            if plan[next_call].restart_before {
                if probe.client.outstanding() > 0 {
                    break;
                }
                let before = probe.now().as_millis();
                if !probe.restart(&args.command, &startup, hard_end) {
                    return summary;
                }
                base += probe.now().as_millis() - before;
                if base + plan[next_call].start_ms > probe.now().as_millis() {
                    break;
                }
            }
            let now = probe.now();
            let spec = CallSpec::tool(&args.tool, arguments.clone(), *policy);
            ids[next_call] = Some(probe.client.start_request(now, spec));
            next_call += 1;
            summary.started += 1;
            probe.flush();
        }
        // Cancels and stalls that are due. A stdio cancel is followed by a barrier.
        let now = probe.now().as_millis();
        for i in 0..next_call {
            let Some(id) = ids[i].as_ref().map(|id| probe.current(id)) else {
                continue;
            };
            let start = base + plan[i].start_ms;
            if let Some(after) = plan[i].cancel_after_ms {
                if !cancelled[i] && start + after <= now && probe.client.is_outstanding(&id) {
                    cancelled[i] = true;
                    let t = probe.now();
                    let _ = probe.client.cancel(t, &id);
                    if probe.transport == Transport::Stdio {
                        probe.client.start_request(t, list_tools(policy));
                    }
                    probe.flush();
                }
            }
            if let Some((offset, ms)) = plan[i].stall {
                if !stalled[i] && start + offset <= now {
                    stalled[i] = true;
                    probe.stall(ms);
                }
            }
        }
        probe.timers();
        // The run's bound: cancel whatever is still open.
        let now = probe.now();
        if now >= hard_end && !gave_up {
            gave_up = true;
            let open: Vec<RequestId> = ids
                .iter()
                .flatten()
                .map(|id| probe.current(id))
                .filter(|id| probe.client.is_outstanding(id))
                .collect();
            for id in open {
                let _ = probe.client.cancel(now, &id);
            }
            probe.flush();
        }
        let all_started = next_call == plan.len() || gave_up;
        if all_started && probe.client.outstanding() == 0 {
            let at = *settled_at.get_or_insert(now);
            if now.as_millis() >= at.as_millis() + args.drain_ms {
                return summary;
            }
        }
        // Sleep until the next thing to do, or until the server writes.
        let mut wake = vec![hard_end];
        if let Some(p) = plan.get(next_call).filter(|_| !gave_up) {
            wake.push(Time::from_millis(base + p.start_ms));
        }
        for (i, p) in plan.iter().enumerate().take(next_call) {
            let start = base + p.start_ms;
            if let Some(after) = p.cancel_after_ms.filter(|_| !cancelled[i]) {
                wake.push(Time::from_millis(start + after));
            }
            if let Some((offset, _)) = p.stall.filter(|_| !stalled[i]) {
                wake.push(Time::from_millis(start + offset));
            }
        }
        if let Some(at) = settled_at {
            wake.push(Time::from_millis(at.as_millis() + args.drain_ms));
        }
        let wake = wake.into_iter().min().unwrap_or(hard_end);
        if !probe.wait(wake) {
            return summary;
        }
        if gave_up && probe.now().as_millis() > hard_end.as_millis() + 10_000 {
            return summary; // outcomes never settle: should not happen, but bound the run
        }
    }
}

fn finish(
    probe: Probe,
    args: &Args,
    label: &str,
    run: &RunSummary,
    ended: &str,
    end: &ServerEnd,
) -> ExitCode {
    let trace = probe.trace;
    if let Some(path) = &args.trace {
        if let Err(e) = std::fs::write(path, trace.to_jsonl()) {
            eprintln!("mcp-sim probe: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    let config = OracleConfig {
        complete: true,
        ..oracle_config(args.profile, args.grace_ms)
    };
    let verdict = oracle::check(&trace, &config);
    let coverage =
        probe_report::coverage(&trace, &config, &probe_report::flagged_answers(&verdict));
    let planned_cancels = run
        .plan
        .iter()
        .filter(|p| p.cancel_after_ms.is_some())
        .count();
    let findings = probe_report::findings(&coverage, end, &args.tool, planned_cancels);
    let (word, code) = probe_report::verdict(&verdict, &findings);
    match args.format {
        Format::Json => {
            let out = JsonVerdict {
                target: label,
                seed: args.seed,
                verdict: word,
                exit_code: code,
                natural_ms: run.natural_ms,
                cancel_window_ms: [run.window.0, run.window.1],
                coverage: &coverage,
                findings: &findings,
                violations: crate::check::json_violations(&verdict),
                trace: args.trace.as_ref().map(|p| p.display().to_string()),
            };
            println!(
                "{}",
                serde_json::to_string(&out).expect("verdict serializes")
            );
        }
        Format::Text => print_text(&TextReport {
            args,
            label,
            run,
            ended,
            trace: &trace,
            coverage: &coverage,
            findings: &findings,
            verdict: &verdict,
            progress: probe.progress,
            write_errors: probe.write_errors.load(Ordering::Relaxed),
            word,
            code,
        }),
    }
    ExitCode::from(code)
}

struct TextReport<'a> {
    args: &'a Args,
    label: &'a str,
    run: &'a RunSummary,
    ended: &'a str,
    trace: &'a Trace,
    coverage: &'a Coverage,
    findings: &'a [Finding],
    verdict: &'a oracle::Report,
    progress: usize,
    write_errors: usize,
    word: &'a str,
    code: u8,
}

fn print_text(r: &TextReport<'_>) {
    let (args, c, run) = (r.args, r.coverage, r.run);
    let planned_cancels = run
        .plan
        .iter()
        .filter(|p| p.cancel_after_ms.is_some())
        .count();
    println!(
        "probe: {} (seed {}, {CALIBRATION_CALLS} calibration calls and {} calls of {}, {} \
         planned cancels)",
        r.label, args.seed, args.calls, args.tool, planned_cancels
    );
    println!(
        "policy: idle {} ms reset by progress, hard maximum {} ms",
        args.timeout_ms, args.max_total_ms
    );
    let width = run.window.1 - run.window.0;
    match run.natural_ms {
        Some(d) => println!(
            "calibration: the shorter call took {d} ms; cancels fall {}..{} ms into their call. A final \
             response within {CANCEL_REACTION_MS} ms of a cancel, before half the shortest \
             uncancelled call's duration, answers the cancel: for a crossing to look like that \
             the call must end that early and in those {CANCEL_REACTION_MS} ms (at most {:.0} % \
             per cancel for the second alone)",
            run.window.0,
            run.window.1,
            (100.0 * CANCEL_REACTION_MS as f64 / width as f64).min(100.0)
        ),
        None => println!("calibration: no result, so the natural duration of a call is unknown"),
    }
    let mut outcomes: BTreeMap<Outcome, usize> = BTreeMap::new();
    for e in &r.trace.events {
        if let EventKind::Outcome { outcome, .. } = e.kind {
            *outcomes.entry(outcome).or_default() += 1;
        }
    }
    let outcome_text: Vec<String> = outcomes
        .iter()
        .map(|(o, n)| format!("{} {n}", o.as_str()))
        .collect();
    println!(
        "wall: {:.2} s, {} events, {} progress delivered, outcomes (all requests): {}",
        r.trace.end() as f64 / 1000.0,
        r.trace.events.len(),
        r.progress,
        if outcome_text.is_empty() {
            "none".to_string()
        } else {
            outcome_text.join(", ")
        }
    );
    println!(
        "coverage: {} of {} calls started; {} answered ({} results, {} errors); {} cancels, {} \
         met running work, {} crossings; {} progress received; {} timeouts; {} of {} other \
         requests answered",
        run.started,
        args.calls as usize + CALIBRATION_CALLS,
        c.calls_answered,
        c.results,
        c.errors,
        c.cancels,
        c.cancels_met_running_work,
        c.crossings,
        c.progress_received,
        c.timeouts,
        c.other_answered,
        c.other_requests
    );
    if !c.faults.is_empty() {
        let faults: Vec<String> = c.faults.iter().map(|(f, n)| format!("{f} {n}")).collect();
        println!("faults injected: {}", faults.join(", "));
    }
    println!("{}", r.ended);
    if r.write_errors > 0 {
        println!(
            "writes to the server's stdin that failed: {}",
            r.write_errors
        );
    }
    if let Some(path) = &args.trace {
        println!("trace: {}", path.display());
    }
    for f in r.findings {
        println!("finding: {} ({}): {}", f.finding, f.kind, f.message);
    }
    println!("violations: {}", r.verdict.violations.len());
    print!("{}", report::violations_text(r.verdict));
    println!("verdict: {} (exit {})", r.word, r.code);
}
