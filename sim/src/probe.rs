//! `mcp-sim probe -- COMMAND ARGS...`: drive a real stdio MCP server and judge what it did;
//! `mcp-sim probe --url URL`: the same against a live Streamable HTTP server (see
//! [`crate::probe_http`]).
//!
//! The probe starts the server as a subprocess and talks to it with the library's reference
//! [`Client`] over NDJSON on its stdin and stdout (spec §5.1), in real time: the model's clock is
//! the number of milliseconds since the probe started. A seeded schedule (ChaCha8 from
//! `--seed`) decides when each `tools/call` starts and which calls the application cancels,
//! and when. Every call asks for progress and runs under a timeout policy (an idle timeout that
//! valid progress resets, under a hard maximum, spec §4).
//!
//! Everything the client observes is recorded as a trace (format v1, client side only): its
//! sends and receives, timer firings, outcomes, progress given to the application and the
//! pipe's close. The oracle judges that trace; rules that need the server's view infer it with
//! the grace window. The server's stderr is read and discarded (§5.1: stderr is not an error
//! signal).
//!
//! The run ends once every call has an outcome and a drain window has passed (so messages that
//! arrive after a cancellation are seen), or at `--max-seconds`, when the calls still open are
//! cancelled and the drain window runs. Shutdown follows §5.1: close stdin, wait, then kill.
//!
//! Over HTTP every request is a POST on a connection of its own and a cancellation closes that
//! connection; the trace records each response's status, its messages and comments, and how
//! its stream ended. The server is not the probe's to stop: the run ends by dropping the
//! connections still open.
//!
//! Exit 0 when no MUST rule is violated, 1 when one is, 2 when the server cannot be started
//! (or, with `--url`, accepts no connection) or the arguments are wrong.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_sim::framing::ndjson::{self, LineDecoder, LineOptions};
use mcp_sim::model::client::{CallSpec, Client, ClientConfig, ClientEvent, ClientTransmit};
use mcp_sim::model::{Outcome, StreamId, TimeoutPolicy, Transport};
use mcp_sim::oracle::{self, OracleConfig, Profile};
use mcp_sim::report;
use mcp_sim::time::Time;
use mcp_sim::trace::{EventKind, Side, Trace, WireEvent};
use mcp_sim::wire::{self, Message, RequestId};
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::check::ProfileArg;
use crate::probe_http::{self, Http};

/// The longest hard maximum a call may be given, in ms (one hour).
const MAX_TOTAL_CEILING_MS: u64 = 60 * 60 * 1000;
/// The most calls one probe makes.
const MAX_CALLS: u32 = 1000;

#[derive(clap::Args)]
pub struct Args {
    /// Seed of the schedule (call start times, which calls are cancelled and when).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The tool to call.
    #[arg(long, default_value = "slow_op")]
    tool: String,
    /// The tool's arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Number of `tools/call` requests.
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
    /// Cancellations fall within this many ms after their call's start.
    #[arg(long, default_value_t = 1000)]
    cancel_within_ms: u64,
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
    /// Print every trace event as it is recorded (to stderr).
    #[arg(long)]
    verbose: bool,
    /// Probe the Streamable HTTP server at this endpoint (`http://HOST:PORT/PATH`) instead of
    /// starting a command.
    #[arg(long, conflicts_with = "command")]
    url: Option<String>,
    /// With `--url`: relay through a local proxy on 127.0.0.1 that cuts a connection after
    /// this many ms without bytes from the server (an intermediary's idle timeout).
    #[arg(long)]
    proxy_idle_ms: Option<u64>,
    /// The server command and its arguments (after `--`).
    #[arg(required_unless_present = "url", last = true, num_args = 1..)]
    command: Vec<String>,
}

/// One call of the schedule.
#[derive(Debug, Clone, Copy)]
struct Planned {
    /// When the application starts it, in ms since the probe started.
    start_ms: u64,
    /// When the application cancels it, in ms after its start.
    cancel_after_ms: Option<u64>,
}

/// Draws the schedule: starts spread so calls overlap, some cancelled while they run.
fn schedule(args: &Args) -> Vec<Planned> {
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut below = |n: u64| rng.next_u64() % n.max(1);
    let mut at = 0;
    let cancel_window = args.cancel_within_ms.max(1);
    (0..args.calls)
        .map(|_| {
            at += below(400);
            let cancelled = below(100) < args.cancel_percent;
            let offset = below(cancel_window);
            Planned {
                start_ms: at,
                cancel_after_ms: cancelled.then_some(offset),
            }
        })
        .collect()
}

/// What the reader threads (stdio) and the POST tasks (HTTP) report.
pub(crate) enum Input {
    /// stdio: bytes from the server's stdout.
    Bytes(Vec<u8>),
    /// stdio: the server closed its stdout.
    Eof,
    /// HTTP: a response's status and content type.
    Status {
        stream: StreamId,
        status: u16,
        content_type: Option<String>,
    },
    /// HTTP: one message (an SSE event's data, or a JSON body).
    Message { stream: StreamId, bytes: Vec<u8> },
    /// HTTP: an SSE comment.
    Comment { stream: StreamId },
    /// HTTP: the response ended.
    Ended { stream: StreamId },
    /// HTTP: the connection broke (or could not be opened) before the response ended.
    Cut { stream: StreamId, by_proxy: bool },
}

/// How the probe reaches the server.
enum Conn {
    /// Lines for the writer thread; dropping the sender closes the server's stdin.
    Stdio(Option<mpsc::Sender<Vec<u8>>>),
    Http(Box<Http>),
}

struct Probe {
    started: Instant,
    client: Client,
    trace: Trace,
    transport: Transport,
    conn: Conn,
    lines: LineDecoder,
    verbose: bool,
    /// Per planned call: its request id once started.
    ids: Vec<Option<RequestId>>,
    progress: usize,
    write_errors: Arc<AtomicUsize>,
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
                    Conn::Stdio(stdin) => stdin.as_ref().is_some_and(|s| s.send(line).is_ok()),
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
                if let Conn::Http(http) = &mut self.conn {
                    http.post(stream, msg);
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
                self.conn = Conn::Stdio(None);
            }
        }
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
            ClientEvent::Outcome { request, outcome } => EventKind::Outcome { request, outcome },
            ClientEvent::Retried { lost, new } => {
                for id in self.ids.iter_mut().flatten() {
                    if *id == lost {
                        *id = new.clone();
                    }
                }
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
            Input::Cut { stream, by_proxy } => match by_proxy {
                true => self.stream_ended(stream, Side::Proxy, Some("idle".into())),
                false => self.stream_ended(stream, Side::Server, None),
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
        self.conn = Conn::Stdio(None);
        let now = self.now();
        self.client.handle_disconnect(now);
        self.flush();
    }
}

/// Reads `from` in a thread, forwarding chunks (or dropping them when `tx` is `None`).
fn pump(mut from: impl Read + Send + 'static, tx: Option<mpsc::Sender<Input>>) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
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

pub fn run(args: &Args) -> ExitCode {
    let arguments: Value = match serde_json::from_str(&args.args) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return usage("--args must be a JSON object"),
        Err(e) => return usage(&format!("--args is not JSON: {e}")),
    };
    if args.calls == 0 || args.calls > MAX_CALLS {
        return usage(&format!("--calls must be between 1 and {MAX_CALLS}"));
    }
    if args.timeout_ms == 0 || args.max_total_ms == 0 || args.max_total_ms > MAX_TOTAL_CEILING_MS {
        return usage(&format!(
            "--timeout-ms must be positive and --max-total-ms between 1 and {MAX_TOTAL_CEILING_MS}"
        ));
    }
    if args.max_seconds == 0 || args.cancel_percent > 100 {
        return usage("--max-seconds must be positive and --cancel-percent at most 100");
    }
    let policy = TimeoutPolicy::resetting(
        Duration::from_millis(args.timeout_ms),
        Duration::from_millis(args.max_total_ms),
    );
    if args.proxy_idle_ms.is_some() && args.url.is_none() {
        return usage("--proxy-idle-ms needs --url");
    }
    if args.proxy_idle_ms == Some(0) {
        return usage("--proxy-idle-ms must be positive");
    }
    let plan = schedule(args);
    match &args.url {
        Some(url) => run_http(args, url, &plan, &policy, &arguments),
        None => run_stdio(args, &plan, &policy, &arguments),
    }
}

fn new_probe(transport: Transport, conn: Conn, args: &Args, plan: &[Planned]) -> Probe {
    Probe {
        started: Instant::now(),
        client: Client::new(ClientConfig::new(transport)),
        trace: Trace::new(),
        transport,
        conn,
        lines: LineDecoder::new(LineOptions::default()),
        verbose: args.verbose,
        ids: vec![None; plan.len()],
        progress: 0,
        write_errors: Arc::new(AtomicUsize::new(0)),
    }
}

fn run_http(
    args: &Args,
    url: &str,
    plan: &[Planned],
    policy: &TimeoutPolicy,
    arguments: &Value,
) -> ExitCode {
    let endpoint = match probe_http::parse_url(url) {
        Ok(e) => e,
        Err(e) => return usage(&e),
    };
    let (tx, rx) = mpsc::channel();
    let http = match Http::start(endpoint, args.proxy_idle_ms.map(Duration::from_millis), tx) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("mcp-sim probe: {url}: {e}");
            return ExitCode::from(2);
        }
    };
    let mut probe = new_probe(Transport::Http, Conn::Http(Box::new(http)), args, plan);
    drive(&mut probe, args, plan, policy, arguments, &rx);
    // The streams still open are the client's to drop.
    let Conn::Http(mut http) = std::mem::replace(&mut probe.conn, Conn::Stdio(None)) else {
        unreachable!("the HTTP probe keeps its connection");
    };
    for stream in http.open() {
        probe.record(EventKind::Close {
            stream: Some(stream.0),
            by: Side::Client,
            reason: None,
        });
    }
    http.shutdown();
    let mut ended = format!(
        "server: {} connections, {} refused",
        http.connections.load(Ordering::Relaxed),
        http.refused.load(Ordering::Relaxed)
    );
    if let (Some(addr), Some(ms)) = (http.proxy, args.proxy_idle_ms) {
        let cuts = probe
            .trace
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EventKind::Close {
                        by: Side::Proxy,
                        ..
                    }
                )
            })
            .count();
        ended.push_str(&format!(
            "; through the idle-timeout proxy on {addr} ({ms} ms): {cuts} cut"
        ));
    }
    finish(probe, args, url, plan, &ended)
}

fn run_stdio(args: &Args, plan: &[Planned], policy: &TimeoutPolicy, arguments: &Value) -> ExitCode {
    let mut child = match Command::new(&args.command[0])
        .args(&args.command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "mcp-sim probe: cannot start {}: {e}",
                args.command.join(" ")
            );
            return ExitCode::from(2);
        }
    };
    let (tx, rx) = mpsc::channel();
    pump(child.stdout.take().expect("stdout is piped"), Some(tx));
    pump(child.stderr.take().expect("stderr is piped"), None);

    let mut probe = new_probe(Transport::Stdio, Conn::Stdio(None), args, plan);
    let stdin = writer(
        child.stdin.take().expect("stdin is piped"),
        Arc::clone(&probe.write_errors),
    );
    probe.conn = Conn::Stdio(Some(stdin));
    let closed = drive(&mut probe, args, plan, policy, arguments, &rx);
    let ended = shutdown(&mut probe, &mut child, closed);
    let label = args.command.join(" ");
    finish(probe, args, &label, plan, &format!("server: {ended}"))
}

/// The event loop; returns whether the server closed its stdout (stdio).
fn drive(
    probe: &mut Probe,
    args: &Args,
    plan: &[Planned],
    policy: &TimeoutPolicy,
    arguments: &Value,
    rx: &Receiver<Input>,
) -> bool {
    let hard_end = Time::from_millis(args.max_seconds.saturating_mul(1000));
    let mut next_call = 0;
    let mut settled_at: Option<Time> = None;
    let mut gave_up = false;
    loop {
        let now = probe.now();
        // Start the calls that are due.
        while next_call < plan.len() && plan[next_call].start_ms <= now.as_millis() && !gave_up {
            let spec = CallSpec::tool(&args.tool, arguments.clone(), *policy);
            let id = probe.client.start_request(now, spec);
            probe.ids[next_call] = Some(id);
            next_call += 1;
            probe.flush();
        }
        // Cancel the calls whose cancellation is due (a no-op for calls already ended).
        for (i, p) in plan.iter().enumerate().take(next_call) {
            let (Some(after), Some(id)) = (p.cancel_after_ms, probe.ids[i].clone()) else {
                continue;
            };
            if p.start_ms + after <= now.as_millis() && probe.client.is_outstanding(&id) {
                let _ = probe.client.cancel(now, &id);
                probe.flush();
            }
        }
        // Fire the client's timers.
        if probe.client.poll_timeout().is_some_and(|t| t <= now) {
            probe.client.handle_timeout(now);
            probe.flush();
        }
        // The run's bound: cancel whatever is still open.
        if now >= hard_end && !gave_up {
            gave_up = true;
            let open: Vec<RequestId> = probe
                .ids
                .iter()
                .flatten()
                .filter(|id| probe.client.is_outstanding(id))
                .cloned()
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
                return false;
            }
        }
        // Sleep until the next thing to do, or until the server writes.
        let mut wake = vec![hard_end];
        if let Some(p) = plan.get(next_call).filter(|_| !gave_up) {
            wake.push(Time::from_millis(p.start_ms));
        }
        for (i, p) in plan.iter().enumerate().take(next_call) {
            if let (Some(after), Some(id)) = (p.cancel_after_ms, &probe.ids[i]) {
                if probe.client.is_outstanding(id) {
                    wake.push(Time::from_millis(p.start_ms + after));
                }
            }
        }
        wake.extend(probe.client.poll_timeout());
        if let Some(at) = settled_at {
            wake.push(Time::from_millis(at.as_millis() + args.drain_ms));
        }
        let wake = wake.into_iter().min().unwrap_or(hard_end);
        let wait = Duration::from_millis(wake.as_millis().saturating_sub(now.as_millis()));
        match rx.recv_timeout(wait) {
            Ok(Input::Bytes(b)) => probe.bytes(&b),
            Ok(Input::Eof) | Err(RecvTimeoutError::Disconnected) => {
                probe.eof();
                return true;
            }
            Ok(input) => probe.http_input(input),
            Err(RecvTimeoutError::Timeout) => {}
        }
        if gave_up && probe.now().as_millis() > hard_end.as_millis() + 10_000 {
            return false; // outcomes never settle: should not happen, but bound the run
        }
    }
}

/// Close stdin, give the server a moment to exit on EOF, then kill it (§5.1).
/// Returns how the server ended, for the report.
fn shutdown(probe: &mut Probe, child: &mut Child, closed: bool) -> String {
    if !closed {
        probe.record(EventKind::Close {
            stream: None,
            by: Side::Client,
            reason: None,
        });
    }
    probe.conn = Conn::Stdio(None);
    let closed_at = Instant::now();
    let deadline = closed_at + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            let after = closed_at.elapsed().as_millis();
            return match closed {
                true => format!("closed its stdout; exited ({status})"),
                false => format!("exited {after} ms after its stdin closed ({status})"),
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    "still running 2 s after its stdin closed: killed".into()
}

fn finish(probe: Probe, args: &Args, label: &str, plan: &[Planned], ended: &str) -> ExitCode {
    let trace = probe.trace;
    if let Some(path) = &args.trace {
        if let Err(e) = std::fs::write(path, trace.to_jsonl()) {
            eprintln!("mcp-sim probe: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    let config = OracleConfig {
        profile: match args.profile {
            ProfileArg::Strict => Profile::Strict,
            ProfileArg::Lenient => Profile::Lenient,
        },
        grace_ms: args.grace_ms,
        complete: true,
        ..OracleConfig::default()
    };
    let verdict = oracle::check(&trace, &config);

    let count = |f: &dyn Fn(&EventKind) -> bool| trace.events.iter().filter(|e| f(&e.kind)).count();
    let sends = count(&|k| matches!(k, EventKind::Send(_)));
    let recvs = count(&|k| matches!(k, EventKind::Recv(_)));
    let timeouts = count(&|k| matches!(k, EventKind::Timeout { .. }));
    let mut outcomes: std::collections::BTreeMap<Outcome, usize> = Default::default();
    for e in &trace.events {
        if let EventKind::Outcome { outcome, .. } = e.kind {
            *outcomes.entry(outcome).or_default() += 1;
        }
    }
    let planned_cancels = plan.iter().filter(|p| p.cancel_after_ms.is_some()).count();
    println!(
        "probe: {} (seed {}, {} calls of {}, {} planned cancels)",
        label,
        args.seed,
        plan.len(),
        args.tool,
        planned_cancels
    );
    println!(
        "policy: idle {} ms reset by progress, hard maximum {} ms",
        args.timeout_ms, args.max_total_ms
    );
    println!(
        "wall: {:.2} s, {} events, {} sent, {} received, {} progress delivered, {} timeouts",
        trace.end() as f64 / 1000.0,
        trace.events.len(),
        sends,
        recvs,
        probe.progress,
        timeouts
    );
    let outcome_text: Vec<String> = outcomes
        .iter()
        .map(|(o, n)| format!("{} {n}", o.as_str()))
        .collect();
    let started = probe.ids.iter().flatten().count();
    println!(
        "calls: {started} of {} started; outcomes: {}",
        plan.len(),
        if outcome_text.is_empty() {
            "none".to_string()
        } else {
            outcome_text.join(", ")
        }
    );
    println!("{ended}");
    let write_errors = probe.write_errors.load(Ordering::Relaxed);
    if write_errors > 0 {
        println!("writes to the server's stdin that failed: {write_errors}");
    }
    if let Some(path) = &args.trace {
        println!("trace: {}", path.display());
    }
    println!("violations: {}", verdict.violations.len());
    print!("{}", report::violations_text(&verdict));
    if verdict.has_must() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
