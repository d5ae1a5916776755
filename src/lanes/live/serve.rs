//! `mcp-sim serve`: the reference server as a real process, for judging real clients and
//! hosts.
//!
//! A client launches it (stdio: NDJSON on stdin and stdout, §5.1) or connects to it
//! (Streamable HTTP on a bound listener, one POST per message, §5.2). It serves
//! `server/discover`, `tools/list` and [`SLOW_TOOL`](crate::model::SLOW_TOOL) `{"steps": N, "step_ms": M}`: the tool works
//! `steps × step_ms` ms and, when the request carries a progress token, sends one progress
//! notification after each step (progress = steps done, total = steps), then the result. The
//! server-side mutants of the catalog can be switched on, to see how a client copes with a
//! faulty server.
//!
//! Everything is recorded from the server's end, on the wall clock since the start: what it
//! read (as written), what it wrote, the closes it saw, and the backend's ledger (work and
//! release per request). The client is a black box, so the trace has no client side and the
//! oracle judges the client by what reached the server (see [`crate::oracle`], observation
//! points). What the client promises about timeouts cannot be seen from here, so it is
//! declared ([`ServeConfig::client_policy`]) and recorded as the `policy` of every request the
//! server receives; the oracle then checks the cancels that reach the server against it.
//!
//! The run ends when stdin closes (stdio), when the stop flag is raised (the command raises it
//! on SIGTERM and SIGINT), or after [`ServeConfig::max_seconds`].

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::net::stdio;
use super::net::wall_trace::WallTrace;
use crate::lanes::http_serve::{self, serve_connection, HttpEvent, Notify, Responder};
pub use crate::lanes::http_serve::{HttpFront, HttpLimits};
use crate::lanes::recorder;
use crate::lanes::response_writer::ServerWrite;
use crate::lanes::server_driver::{ServerDriver, ServerOutput, ServerRecording};
use crate::lanes::RunResult;
use crate::model::server::{Playback, PlaybackCounts};
use crate::model::{
    Backend, ClientPolicies, MutantSet, ResponseMode, Server, ServerBehaviour, ServerConfig,
    SessionLimits, SseStyle, StreamId, Transport,
};
use crate::time::Time;
use crate::trace::{EventKind, Side, Trace};
use crate::wire::{DecodeOptions, Era, Message, METHOD_TOOLS_CALL};

/// How often the loop looks at the stop flag and the time bound.
const STOP_POLL: Duration = Duration::from_millis(50);

/// What `serve` does, apart from where it listens.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Server-side mutants switched on (none: the reference server).
    pub mutants: MutantSet,
    /// The timeout policies the client under test declares, per method; recorded on every
    /// request one covers.
    pub client_policy: Option<ClientPolicies>,
    /// Stop after this many seconds.
    pub max_seconds: Option<u64>,
    /// Print every trace event to stderr as it is recorded.
    pub verbose: bool,
    /// Write every trace event to this file as it is recorded.
    pub trace_file: Option<super::TraceFile>,
    /// Keep-alive comments on quiet SSE streams after this long (`None`: the model's default,
    /// 15 s).
    pub keepalive: Option<Duration>,
    /// The eras it serves: both by default, each request in the era it speaks
    /// ([`crate::model::server`]).
    pub eras: crate::model::ServerEras,
    /// Stamp events with the ms since this moment instead of since the start (the upstream
    /// of `mcp-sim check-proxy`, whose trace joins the probe's on one clock).
    pub clock_origin: Option<std::time::SystemTime>,
    /// HTTP: the listener's `Host`/`Origin` policy and bounds.
    pub http: HttpFront,
    /// HTTP: the bounds on legacy sessions and the streams each holds open.
    pub session_limits: SessionLimits,
    /// A recording to play back for the calls it holds (`serve --from`).
    pub playback: Option<Playback>,
}

impl Default for ServeConfig {
    /// The reference server, both eras, no declared policy, the default HTTP bounds
    /// ([`HttpLimits`], and at most [`MAX_SESSIONS`] sessions of [`MAX_SESSION_STREAMS`]
    /// open streams each).
    fn default() -> Self {
        ServeConfig {
            mutants: MutantSet::NONE,
            client_policy: None,
            max_seconds: None,
            verbose: false,
            trace_file: None,
            keepalive: None,
            eras: crate::model::ServerEras::Both,
            clock_origin: None,
            http: HttpFront::default(),
            session_limits: SessionLimits {
                max_sessions: Some(MAX_SESSIONS),
                max_session_streams: Some(MAX_SESSION_STREAMS),
            },
            playback: None,
        }
    }
}

/// The most legacy sessions `serve --http` keeps open by default.
pub const MAX_SESSIONS: u32 = 1024;

/// The most streams one legacy session holds open by default.
pub const MAX_SESSION_STREAMS: u32 = 256;

/// Where the server listens.
pub enum Listen {
    /// NDJSON on a byte stream pair: the process's stdin and stdout, or any pipe.
    Stdio {
        /// What the client writes.
        input: Box<dyn std::io::Read + Send>,
        /// What the client reads.
        output: Box<dyn std::io::Write + Send>,
    },
    /// Streamable HTTP on a bound listener; every POST to any path is a message.
    Http(std::net::TcpListener),
}

/// Why a serve run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServeEnd {
    /// stdio: the client closed stdin.
    InputClosed,
    /// The stop flag was raised (SIGTERM, SIGINT).
    Stopped,
    /// [`ServeConfig::max_seconds`] passed.
    TimeBound,
    /// The server crashed (a mutant that panics, as the SDK it reproduces does); the panic's
    /// text.
    Crashed(String),
}

impl ServeEnd {
    /// For people.
    pub fn describe(&self) -> String {
        match self {
            ServeEnd::InputClosed => "the client closed stdin".into(),
            ServeEnd::Stopped => "stopped by a signal".into(),
            ServeEnd::TimeBound => "the time bound passed".into(),
            ServeEnd::Crashed(panic) => format!("the server crashed ({panic})"),
        }
    }
}

/// What a serve run recorded.
#[derive(Debug, Clone)]
pub struct Served {
    /// The server-side trace (format v1) and counters; `complete` when no work was running at
    /// the end.
    pub run: RunResult,
    /// Why it ended.
    pub end: ServeEnd,
    /// HTTP connections accepted.
    pub connections: usize,
    /// Writes to the client that failed.
    pub write_errors: usize,
    /// How the playback of a recording went (`serve --from`).
    pub playback: Option<PlaybackCounts>,
}

/// What a served client did, counted from the server's end of the trace in the era it spoke.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServedCounts {
    /// `tools/call` requests received.
    pub calls: usize,
    /// Results sent.
    pub results: usize,
    /// Progress notifications sent.
    pub progress: usize,
    /// Cancels seen: `notifications/cancelled`, and in 2026-07-28 the client's stream closes.
    pub cancels: usize,
}

impl ServedCounts {
    /// Counts `trace` read in `era` (the oracle's reading) with `decode`'s limits.
    pub fn of(trace: &Trace, era: Era, decode: &DecodeOptions) -> ServedCounts {
        let decode = DecodeOptions { era, ..*decode };
        let mut n = ServedCounts::default();
        for e in &trace.events {
            match (&e.kind, e.side) {
                (EventKind::Recv(w), Side::Server) => match w.decode(&decode) {
                    Ok(Message::Request(r)) if r.method == METHOD_TOOLS_CALL => n.calls += 1,
                    Ok(Message::Cancelled(_)) => n.cancels += 1,
                    _ => {}
                },
                (EventKind::Send(w), Side::Server) => match w.decode(&decode) {
                    Ok(Message::Progress(_)) => n.progress += 1,
                    Ok(Message::Result(_)) => n.results += 1,
                    _ => {}
                },
                (
                    EventKind::Close {
                        stream: Some(_),
                        by: Side::Client,
                        ..
                    },
                    Side::Server,
                ) if !era.is_legacy() => n.cancels += 1,
                _ => {}
            }
        }
        n
    }
}

/// The model's configuration for `serve`: one progress per step, plain SSE with keep-alives.
pub fn server_config(transport: Transport, config: &ServeConfig) -> ServerConfig {
    ServerConfig {
        transport,
        behaviour: ServerBehaviour {
            progress_min_interval: Duration::ZERO,
            keepalive_interval: Some(config.keepalive.unwrap_or(Duration::from_secs(15))),
            response_mode: ResponseMode::Sse,
            sse_style: SseStyle::Plain,
            ..ServerBehaviour::default()
        },
        mutants: config.mutants,
        eras: config.eras,
        limits: match transport {
            Transport::Http => config.session_limits,
            Transport::Stdio => SessionLimits::default(),
        },
    }
}

/// The driver of `serve`'s reference server on `transport`, its process started at `now`:
/// its backend in process, recorded as the server of a black-box client (what it read as
/// written, the policy the client declares on each request it covers, every request
/// counted), its event streams saying `X-Accel-Buffering: no`. `serve` and the virtual-client
/// lane both run it.
pub(crate) fn reference_driver(
    transport: Transport,
    config: &ServeConfig,
    now: Time,
) -> ServerDriver {
    let server = Server::new(server_config(transport, config)).started_at(now);
    let server = match config.playback.clone() {
        Some(p) => server.playing(p),
        None => server,
    };
    ServerDriver::new(
        server,
        Some(Backend::new()),
        ServerRecording {
            as_written: true,
            client_policy: config.client_policy.clone(),
            count_requests: true,
        },
        true,
    )
}

/// Serves until the input closes, `stop` is raised or the time bound passes; returns the
/// trace. Runs on the calling thread (a single-threaded tokio runtime), with a thread each
/// for reading and writing stdio.
pub fn serve(
    listen: Listen,
    config: &ServeConfig,
    stop: Arc<AtomicBool>,
) -> std::io::Result<Served> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, run(listen, config.clone(), stop))
}

async fn run(
    listen: Listen,
    config: ServeConfig,
    stop: Arc<AtomicBool>,
) -> std::io::Result<Served> {
    // Two channels: stdio input comes from a reader thread, HTTP events (which hold
    // single-threaded response bodies) from tasks on this thread.
    let (stdio_tx, mut stdio_rx) = mpsc::unbounded_channel::<super::Input>();
    let (tx, mut http_rx) = mpsc::unbounded_channel::<HttpEvent>();
    let write_errors = Arc::new(AtomicUsize::new(0));
    let connections = Rc::new(Cell::new(0usize));
    let mut origin_policy = None;
    let (transport, stdout) = match listen {
        Listen::Stdio { input, output } => {
            stdio::pump(
                input,
                move |i| stdio_tx.send(i).is_ok(),
                Arc::new(Mutex::new(None)),
            );
            (
                Transport::Stdio,
                Some(stdio::writer(output, Arc::clone(&write_errors))),
            )
        }
        Listen::Http(listener) => {
            origin_policy = Some(config.http.policy(listener.local_addr()?.ip()));
            listener.set_nonblocking(true)?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let tx = tx.clone();
            let connections = Rc::clone(&connections);
            let next_stream = Rc::new(Cell::new(0u64));
            let limits = config.http.limits;
            let open = Rc::new(Cell::new(0usize));
            tokio::task::spawn_local(async move {
                while let Ok((socket, _)) = listener.accept().await {
                    connections.set(connections.get() + 1);
                    if open.get() >= limits.max_connections {
                        let _ = tx.send(HttpEvent::ConnectionRefused);
                        tokio::task::spawn_local(refuse_connection(socket, limits.max_connections));
                        continue;
                    }
                    open.set(open.get() + 1);
                    let tx = tx.clone();
                    let notify: Notify = Rc::new(move |e| {
                        let _ = tx.send(e);
                    });
                    let next_stream = Rc::clone(&next_stream);
                    let stream_of = move |_: &hyper::Request<hyper::body::Incoming>| {
                        next_stream.set(next_stream.get() + 1);
                        StreamId(next_stream.get())
                    };
                    let open = Rc::clone(&open);
                    tokio::task::spawn_local(async move {
                        serve_connection(socket, notify, stream_of, limits).await;
                        open.set(open.get() - 1);
                    });
                }
            });
            (Transport::Http, None)
        }
    };
    let notify: Notify = {
        let tx = tx.clone();
        Rc::new(move |e| {
            let _ = tx.send(e);
        })
    };
    drop(tx);
    let mut driver = reference_driver(transport, &config, Time::ZERO);
    if let Some(policy) = origin_policy {
        driver = driver.guarded(policy);
    }
    let mut d = ServeLoop {
        rec: WallTrace::new(
            super::TraceOut {
                verbose: config.verbose,
                file: config.trace_file.clone(),
            },
            config.clock_origin,
        ),
        driver,
        stdout,
        http: Responder::new(notify),
        config,
    };
    let bound = d.config.max_seconds.map(|s| Duration::from_secs(s.max(1)));
    let end = loop {
        if stop.load(Ordering::Relaxed) {
            break ServeEnd::Stopped;
        }
        if bound.is_some_and(|b| d.now().as_millis() >= b.as_millis() as u64) {
            break ServeEnd::TimeBound;
        }
        let now = d.now();
        let wait = d
            .driver
            .server()
            .poll_timeout()
            .map_or(STOP_POLL, |t| {
                Duration::from_millis(t.as_millis().saturating_sub(now.as_millis()))
            })
            .min(STOP_POLL);
        // A panic of the model (the mutants that reproduce crashing SDKs) is the server
        // crashing: the connection closes and the run ends, with the trace kept.
        let mut closed = false;
        let outcome = tokio::select! {
            biased;
            input = stdio_rx.recv(), if transport == Transport::Stdio => match input {
                Some(super::Input::Bytes(bytes)) => guard(|| d.stdio_bytes(&bytes)),
                _ => {
                    closed = true;
                    guard(|| d.input_closed())
                }
            },
            Some(event) = http_rx.recv() => guard(|| d.http_event(event)),
            _ = tokio::time::sleep(wait) => Ok(()),
        };
        let outcome = outcome.and_then(|()| guard(|| d.timers()));
        if let Err(panic) = outcome {
            d.record(
                Side::Server,
                recorder::close(None, Side::Server, Some("crash".into())),
            );
            break ServeEnd::Crashed(panic);
        }
        if closed {
            break ServeEnd::InputClosed;
        }
    };
    d.stdout = None; // closes stdout
    let complete = d.driver.server().active_jobs() == 0;
    let playback = d.driver.server().playback_counts();
    let mut stats = d.rec.stats;
    stats.sim_ms = d.rec.trace.end();
    Ok(Served {
        run: RunResult {
            trace: d.rec.trace,
            complete,
            stats,
        },
        end,
        connections: connections.get(),
        write_errors: write_errors.load(Ordering::Relaxed),
        playback,
    })
}

/// One connection over [`HttpLimits::max_connections`]: answered 503 with a JSON-RPC error
/// naming the bound, then closed, without reading a request.
async fn refuse_connection(mut socket: tokio::net::TcpStream, max: usize) {
    use tokio::io::AsyncWriteExt;
    let answer = http_serve::refusal_response(503, None, &http_serve::connections_full(max));
    let _ = socket.write_all(&answer).await;
    let _ = socket.shutdown().await;
}

/// Runs `f`, turning a panic into its text.
fn guard(f: impl FnOnce()) -> Result<(), String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|p| crate::lanes::panic_text(p.as_ref()))
}

/// What `serve` runs: the reference server's driver between the real client and the wall clock.
struct ServeLoop {
    /// The trace and counters, on the wall clock.
    rec: WallTrace,
    /// The reference server and its in-process backend.
    driver: ServerDriver,
    stdout: Option<std_mpsc::Sender<Vec<u8>>>,
    http: Responder,
    config: ServeConfig,
}

impl ServeLoop {
    fn now(&self) -> Time {
        self.rec.now()
    }

    fn record(&mut self, side: Side, kind: EventKind) {
        self.rec.push(side, kind);
    }

    fn stdio_bytes(&mut self, bytes: &[u8]) {
        let now = self.now();
        self.driver.stdio_bytes(now, bytes, &mut self.rec);
        self.flush();
    }

    fn http_event(&mut self, event: HttpEvent) {
        let now = self.now();
        self.driver
            .http_event(now, event, &mut self.http, &mut self.rec);
        self.flush();
    }

    /// stdio: the client closed stdin; everything in progress is abandoned (§5.1).
    fn input_closed(&mut self) {
        let now = self.now();
        self.driver.input_closed(now, &mut self.rec);
        self.flush();
    }

    fn timers(&mut self) {
        let now = self.now();
        if self
            .driver
            .server()
            .poll_timeout()
            .is_some_and(|t| t <= now)
        {
            self.driver.timers(now);
            self.flush();
        }
    }

    /// Writes every transmit of the model; the driver applies its backend calls in process.
    fn flush(&mut self) {
        let now = self.now();
        while let Some(out) = self.driver.poll_io(now, &mut self.rec) {
            match out {
                ServerOutput::Write(ServerWrite::Line(line)) => {
                    if let Some(out) = &self.stdout {
                        let _ = out.send(line);
                    }
                }
                ServerOutput::Write(ServerWrite::Http(stream, part)) => {
                    self.http.write(stream, part)
                }
                // The backend is in process: the driver keeps its ledger.
                ServerOutput::Backend(_) => {}
            }
        }
    }
}
