//! `mcp-sim record`: a transparent tap between a real host and its real server.
//!
//! stdio ([`record_stdio`]): the host launches `mcp-sim record -- SERVER ARGS...` instead of the
//! server. The tap starts the server, passes the bytes unchanged both ways (each chunk is
//! written on before it is recorded), lets the server's stderr through, and keeps the
//! server's exit status. Streamable HTTP ([`record_http`]): a reverse proxy, one upstream
//! connection per downstream connection, bytes passed on as they stream, closes propagated
//! both ways, and with a proxy preset the idle cuts of that intermediary (the relay of the
//! probe's faults, [`super::relay`]).
//!
//! The trace is two-sided, seen from the tap: every message is the sender's `send` and the
//! receiver's `recv` at the moment it crossed the tap (with a preset that holds an SSE body,
//! the server's `send` when the tap read it, the client's `recv` when the tap passed it on).
//! Anything that does not decode is recorded raw and still passed on. What neither peer puts
//! on the wire (the client's timers, what its application was told) is not in the trace, so
//! the rules that need it stay silent.

use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::interrupt::{kill_group, own_group, terminate, track, untrack};
use super::net::gate::GateRefusal;
use super::net::relay::{refuse_connection, Front, Relay, RelayObserver, Relayed};
use super::net::wall_trace::WallTrace;
use super::TraceOut;
use crate::lanes::http_serve::HttpFront;
use crate::lanes::wiretap::Framing;
use crate::lanes::RunResult;
use crate::scenario::ProxyConfig;
use crate::trace::{EventKind, Side};

/// The recording of one relayed connection (`mcp-sim record --http`): the same framing at the
/// client's end of the relay and at the server's, so that what an intermediary holds back or
/// cuts shows as the difference between the two.
pub(crate) struct RelayTap {
    /// Where the events go.
    pub(crate) recording: SharedWireLog,
    /// The connection as the client's end of the relay sees it.
    pub(crate) client: Framing,
    /// The connection as the server's end sees it.
    pub(crate) server: Framing,
    /// Bytes passed up (to the server) and down (to the client).
    pub(crate) bytes: (Arc<AtomicU64>, Arc<AtomicU64>),
}

impl RelayTap {
    fn lock(&self) -> std::sync::MutexGuard<'_, WireLog> {
        self.recording
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl RelayObserver for RelayTap {
    /// The client sent `bytes` (read from the downstream connection).
    fn client_sent(&mut self, bytes: &[u8]) {
        let mut out = Vec::new();
        self.client.read(bytes, &mut out);
        self.lock().client_view(out);
    }

    /// `bytes` reached the server (written upstream).
    fn server_read(&mut self, bytes: &[u8]) {
        self.bytes
            .0
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let mut out = Vec::new();
        self.server.read(bytes, &mut out);
        self.lock().server_view(out);
    }

    /// The server wrote `bytes` (read from upstream).
    fn server_wrote(&mut self, bytes: &[u8]) {
        let mut out = Vec::new();
        self.server.wrote(bytes, &mut out);
        self.lock().server_view(out);
    }

    /// `bytes` reached the client (written downstream).
    fn client_got(&mut self, bytes: &[u8]) {
        self.bytes
            .1
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let mut out = Vec::new();
        self.client.wrote(bytes, &mut out);
        self.lock().client_view(out);
    }

    /// The connection ended by `by`'s doing: each end sees its open streams closed. A cut by
    /// the intermediary reaches the server as the client going away.
    fn gone(&mut self, by: Side, reason: Option<&str>) {
        let mut out = Vec::new();
        self.client.gone(by, reason, &mut out);
        self.lock().client_view(out);
        let mut out = Vec::new();
        let server_by = if by == Side::Proxy { Side::Client } else { by };
        self.server.gone(server_by, None, &mut out);
        self.lock().server_view(out);
    }

    /// A request refused for its `Host` or `Origin` is recorded with both.
    fn refused(&mut self, refusal: &GateRefusal) {
        if let Some(sent) = &refusal.sent {
            let headers = [("host", &sent.host), ("origin", &sent.origin)]
                .into_iter()
                .filter_map(|(name, value)| Some((name.to_owned(), value.clone()?)))
                .collect();
            self.client.annotate(refusal.ordinal, headers);
        }
    }
}

/// The wire log both directions of a recorded session write into, on the wall clock (named
/// apart from [`crate::model::recorded::Recording`], a recorded client's calls).
pub(crate) struct WireLog(WallTrace);

/// The wire log, shared by both directions.
pub(crate) type SharedWireLog = Arc<Mutex<WireLog>>;

impl WireLog {
    fn new(out: TraceOut) -> SharedWireLog {
        Arc::new(Mutex::new(WireLog(WallTrace::new(out, None))))
    }

    fn push(&mut self, side: Side, kind: EventKind) {
        self.0.push(side, kind);
    }

    /// Records what the server view of a connection produced: the client's side of each event
    /// first when the client wrote it (a request), the server's first when the server wrote it.
    pub(crate) fn server_view(&mut self, events: Vec<EventKind>) {
        for kind in events {
            match &kind {
                EventKind::Recv(w) => {
                    self.0.stats.messages += 1;
                    if w.msg
                        .as_ref()
                        .is_some_and(|m| m.get("method").is_some() && m.get("id").is_some())
                    {
                        self.0.stats.requests += 1;
                    }
                }
                EventKind::Send(_) => self.0.stats.messages += 1,
                _ => {}
            }
            self.push(Side::Server, kind);
        }
    }

    /// Records what the client view of a connection produced (the same framing, seen at the
    /// client's end of the tap): a request read from the client is its `send`, a response
    /// written to it its `recv`.
    pub(crate) fn client_view(&mut self, events: Vec<EventKind>) {
        for kind in events {
            let kind = match kind {
                EventKind::Recv(w) => EventKind::Send(w),
                EventKind::Send(w) => EventKind::Recv(w),
                other => other,
            };
            self.push(Side::Client, kind);
        }
    }

    fn finish(&mut self) -> RunResult {
        let mut stats = std::mem::take(&mut self.0.stats);
        stats.sim_ms = self.0.trace.end();
        RunResult {
            trace: std::mem::take(&mut self.0.trace),
            complete: false,
            stats,
        }
    }
}

fn lock(r: &SharedWireLog) -> std::sync::MutexGuard<'_, WireLog> {
    r.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a recording produced.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The two-sided trace, as the tap saw it.
    pub run: RunResult,
    /// stdio: how the server process ended (`None`: still running when the tap stopped, and
    /// killed).
    pub exit: Option<ExitStatus>,
    /// Bytes passed from the host (client) to the server, and back.
    pub bytes_up: u64,
    /// Bytes passed from the server to the host (client).
    pub bytes_down: u64,
    /// HTTP: downstream connections accepted.
    pub connections: usize,
}

/// The stdio tap: starts `command`, passes `host_in` to its stdin and its stdout to
/// `host_out`, records both directions, and returns once the server exited (or `stop` was
/// raised: the server's stdin is closed, and it is killed after two seconds).
pub fn record_stdio(
    command: &[String],
    host_in: impl Read + Send + 'static,
    host_out: impl Write + Send + 'static,
    stop: Arc<AtomicBool>,
    out: TraceOut,
) -> std::io::Result<Recorded> {
    let Some((program, args)) = command.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no server command",
        ));
    };
    let mut child = own_group(Command::new(program).args(args))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    track(child.id());
    let recording = WireLog::new(out);
    let framing = Arc::new(Mutex::new(Framing::stdio_as_written()));
    let up_bytes = Arc::new(AtomicU64::new(0));
    let down_bytes = Arc::new(AtomicU64::new(0));
    let child_in = child.stdin.take().expect("stdin is piped");
    let child_out = child.stdout.take().expect("stdout is piped");
    // Host to server: the client's sends, the server's receipts; the end of the host's
    // input closes the server's stdin.
    tap_direction(host_in, child_in, &recording, &framing, &up_bytes, true);
    // Server to host: the server's sends, the client's receipts.
    let down = tap_direction(
        child_out,
        host_out,
        &recording,
        &framing,
        &down_bytes,
        false,
    );
    let mut stopping: Option<Instant> = None;
    let exit = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if stop.load(Ordering::Relaxed) && stopping.is_none() {
            stopping = Some(Instant::now());
            // Our own child, whose pid is valid while it is not reaped.
            terminate(child.id());
        }
        if stopping.is_some_and(|s| s.elapsed() > super::net::stdio::EXIT_GRACE) {
            kill_group(child.id());
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    untrack(child.id());
    // What the server wrote before it exited is passed on and recorded before the end.
    let _ = down.join();
    let run = lock(&recording).finish();
    Ok(Recorded {
        run,
        exit,
        bytes_up: up_bytes.load(Ordering::Relaxed),
        bytes_down: down_bytes.load(Ordering::Relaxed),
        connections: 0,
    })
}

/// One direction of the stdio tap, in a thread: bytes pass on, then the pipe's framing turns
/// them into events, recorded on the writer's side first. `up`: from the host (client) to the
/// server.
fn tap_direction(
    from: impl Read + Send + 'static,
    to: impl Write + Send + 'static,
    recording: &SharedWireLog,
    framing: &Arc<Mutex<Framing>>,
    bytes: &Arc<AtomicU64>,
    up: bool,
) -> std::thread::JoinHandle<()> {
    let (recording, framing, bytes) = (
        Arc::clone(recording),
        Arc::clone(framing),
        Arc::clone(bytes),
    );
    std::thread::spawn(move || {
        pass(from, to, &bytes, |chunk| {
            let mut events = Vec::new();
            let mut f = framing.lock().unwrap_or_else(PoisonError::into_inner);
            match (chunk, up) {
                (Some(c), true) => f.read(c, &mut events),
                (Some(c), false) => f.wrote(c, &mut events),
                (None, true) => f.client_gone(&mut events),
                // The server's end is recorded even after the host's (one framing, two ends).
                (None, false) => events.push(EventKind::Close {
                    stream: None,
                    by: Side::Server,
                    reason: None,
                }),
            }
            drop(f);
            let mut r = lock(&recording);
            if up {
                r.client_view(events.clone());
                r.server_view(events);
            } else {
                r.server_view(events.clone());
                r.client_view(events);
            }
        });
    })
}

/// Copies `from` to `to` chunk by chunk, each chunk written and flushed before `seen` records
/// it; `seen(None)` at the end. Closes `to` (by dropping it) when `from` ends.
fn pass(
    mut from: impl Read,
    mut to: impl Write,
    bytes: &AtomicU64,
    mut seen: impl FnMut(Option<&[u8]>),
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let _ = to.write_all(&buf[..n]).and_then(|()| to.flush());
                bytes.fetch_add(n as u64, Ordering::Relaxed);
                seen(Some(&buf[..n]));
            }
        }
    }
    drop(to);
    seen(None);
}

/// The Streamable HTTP tap: a reverse proxy on `listener` to `upstream` (`host:port`), with
/// the idle cuts of `proxy` if given, recording both ends of every connection, until `stop`
/// is raised or `max` passes. The listener validates `Host` and `Origin` and keeps the
/// bounds of `front`, as `serve --http` does; each refusal is recorded.
pub fn record_http(
    listener: std::net::TcpListener,
    upstream: std::net::SocketAddr,
    front: &HttpFront,
    proxy: Option<ProxyConfig>,
    stop: Arc<AtomicBool>,
    max: Option<Duration>,
    out: TraceOut,
) -> std::io::Result<Recorded> {
    let recording = WireLog::new(out);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let connections = Arc::new(AtomicUsize::new(0));
    let relayed = Arc::new(Mutex::new(Relayed::default()));
    let bytes = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let front = Front::new(front.policy(listener.local_addr()?.ip()), front.limits);
    runtime.block_on(async {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        loop {
            if stop.load(Ordering::Relaxed) || max.is_some_and(|m| started.elapsed() >= m) {
                break;
            }
            let accept = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
            let Ok(Ok((down, peer))) = accept else {
                continue;
            };
            let n = connections.fetch_add(1, Ordering::Relaxed) as u64;
            // Streams of connection n are numbered from n * 1000 + 1 in both views.
            let tap = RelayTap {
                recording: Arc::clone(&recording),
                client: Framing::http(Some(Arc::new(AtomicU64::new(n * 1000)))),
                server: Framing::http(Some(Arc::new(AtomicU64::new(n * 1000)))),
                bytes: bytes.clone(),
            };
            let Some(admitted) = front.admit() else {
                let mut tap = tap;
                refuse_connection(down, front.limits.max_connections, Some(&mut tap)).await;
                continue;
            };
            let relay = Relay::new(
                peer.port(),
                upstream,
                proxy,
                Arc::clone(&relayed),
                front.clone(),
                admitted,
            );
            tokio::spawn(relay.run_tapped(down, tap));
        }
        Ok::<(), std::io::Error>(())
    })?;
    drop(runtime);
    let run = lock(&recording).finish();
    Ok(Recorded {
        run,
        exit: None,
        bytes_up: bytes.0.load(Ordering::Relaxed),
        bytes_down: bytes.1.load(Ordering::Relaxed),
        connections: connections.load(Ordering::Relaxed),
    })
}
