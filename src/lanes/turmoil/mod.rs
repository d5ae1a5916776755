//! The turmoil lane: the sans-IO model on simulated hosts and sockets under a simulated
//! clock.
//!
//! Hosts: `client` (the reference client and the workload), `server` (the reference server:
//! NDJSON over one TCP stream for stdio, hyper for Streamable HTTP), `backend` (the ledger the
//! server's tools call over TCP) and, when the scenario has one, `proxy` (an idle-timeout
//! intermediary between client and server) or `bridge` (the reference MCP intermediary,
//! stdio on both hops, or the era bridge's 2026-07-28 HTTP front before a legacy stdio
//! upstream: the trace then has two hops). Each host runs an async driver that feeds socket
//! input to its state machine with the current simulated time, writes its transmits to the
//! sockets, and sleeps until the machine's `poll_timeout`.
//!
//! Every HTTP request is its own POST on its own connection, so closing a response stream
//! closes a connection, as HTTP/1.1 requires; hyper notices the FIN and drops the response
//! body, which the server driver turns into the cancellation. The stream id travels in an
//! `x-mcp-sim-stream` header so that both sides record the same id.
//!
//! Faults (turmoil-notes.md): turmoil's TCP never retransmits, so a partition is modelled
//! with `hold`/`release` (delay, not loss); a server crash is a `bounce` (its peers read EOF,
//! it restarts empty); a stream reset is the client's connection being dropped. The safety
//! phase runs the workload with its faults; afterwards the client lingers with the network
//! healed, and the run must end settled (liveness) before the horizon.
//!
//! Determinism: `rng_seed` and a fixed `epoch`, `biased` selects, `BTreeMap`s, no threads;
//! the crate is built with `--cfg tokio_unstable` (`.cargo/config.toml`) so that turmoil
//! seeds tokio's scheduler too. Every spawned task runs under a panic guard that fails the
//! run (turmoil would otherwise swallow the panic). Host clocks read `turmoil::sim_elapsed`;
//! events are sorted by time (stably) when the run ends, since hosts run one after another
//! within a tick.
//!
//! A user's own server or client can take a reference peer's place: see [`run_with_server`]
//! and [`run_with_client`].

mod backend;
mod bridge;
mod client;
mod custom;
pub(super) mod proxy;
mod server;
mod tap;

pub use custom::{
    ClientFactory, ClientFuture, ClientUnderTest, ServerFactory, ServerFuture, ServerIo,
    ServerUnderTest, SERVER_STDIO_ADDR,
};
pub use tap::{ServerListener, ServerReadHalf, ServerStream, ServerWriteHalf};

use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

use futures_util::FutureExt;

use crate::lanes::{RunResult, RunStats};
use crate::model::server::Playback;
use crate::model::Transport;
use crate::scenario::{fault_time, Fault, Scenario, ToolCalls};
use crate::time::Time;
use crate::trace::{EventKind, Side, Trace};

/// Ports of the simulated hosts.
pub(crate) const SERVER_HTTP_PORT: u16 = 80;
pub(crate) const SERVER_STDIO_PORT: u16 = 9000;
pub(crate) const PROXY_PORT: u16 = 8080;
pub(crate) const BACKEND_PORT: u16 = 7000;
/// Header carrying the client's stream id.
pub(crate) use crate::lanes::http_exchange::STREAM_HEADER;

pub(crate) use crate::lanes::wiretap::stream_id;

/// Settings of the turmoil lane that are not part of the scenario.
#[derive(Debug, Clone)]
pub struct TurmoilOptions {
    /// turmoil's tick. Latencies and deliveries are quantised to it; timers inside a host are
    /// exact. Costs about 1 µs per host per tick.
    pub tick: Duration,
    /// The tool the reference client calls for each planned call, and its arguments. The
    /// default, `slow_op` with each call's `{steps, step_ms}`, is the reference server's one
    /// tool; a [`ServerUnderTest::Custom`] server can be driven through any of its own
    /// (unused with a [`ClientUnderTest::Custom`] client, which brings its own calls).
    pub tool_calls: ToolCalls,
    /// A recording the reference server plays back for the calls it holds (`serve --from`
    /// under the simulated clock; with a [`ClientUnderTest::Custom`] client, a Rust client
    /// meets a real server's recorded behaviour, deterministically).
    pub playback: Option<Playback>,
}

impl Default for TurmoilOptions {
    /// A 10 ms tick: idle timeouts of 60-100 s and calls of 90 s are the point, and 10 ms keeps
    /// a 4-host run of several simulated minutes near 100 ms of wall time. `slow_op` calls.
    fn default() -> Self {
        TurmoilOptions {
            tick: Duration::from_millis(10),
            tool_calls: ToolCalls::default(),
            playback: None,
        }
    }
}

/// State the hosts share (all hosts run on one thread).
#[derive(Default)]
pub(crate) struct Shared {
    /// The trace so far; events go in through [`Shared::push`].
    trace: Trace,
    /// Events a custom server's recording streams observed, not yet in `trace`.
    pub taps: tap::TapQueue,
    /// The first panic of any simulated task.
    pub failure: Option<String>,
    /// Tool calls running at the server now.
    pub server_jobs: usize,
    /// Requests holding a backend resource now.
    pub backend_held: usize,
    /// Requests the client still waits for.
    pub client_outstanding: usize,
    /// The client finished its workload and its linger.
    pub client_done: bool,
    /// Counters.
    pub stats: RunStats,
}

impl Shared {
    /// Appends an event, after the tapped events that happened before it.
    pub fn push(&mut self, t: Time, side: Side, kind: EventKind) {
        self.merge_taps();
        self.trace.push(t, side, kind);
    }

    /// Moves the tapped events into the trace, in the order they happened.
    fn merge_taps(&mut self) {
        for (t, kind) in self.taps.drain() {
            self.trace.push(t, Side::Server, kind);
        }
    }
}

pub(crate) type SharedRef = Rc<RefCell<Shared>>;

thread_local! {
    /// The run's tick in ms (all hosts of a run share one thread).
    static TICK_MS: std::cell::Cell<u64> = const { std::cell::Cell::new(1) };
}

/// The trace and counters of the run, shared by the hosts, for the lanes' drivers.
impl crate::lanes::RunSink for SharedRef {
    fn record(&mut self, side: Side, kind: EventKind) {
        record(self, side, kind);
    }

    fn tally(&mut self, update: impl FnOnce(&mut RunStats)) {
        update(&mut self.borrow_mut().stats);
    }
}

/// Simulated time now, as this host's clock reads it.
pub(crate) fn now() -> Time {
    Time::from_millis(turmoil::sim_elapsed().unwrap_or_default().as_millis() as u64)
}

/// The time recorded in traces: [`now`] rounded down to the tick.
///
/// Within one tick each host's clock runs ahead on its own timers while messages are only
/// delivered at tick boundaries, so a receiver's clock can read less than its sender's did.
/// Rounding to the tick makes both read the same time, and the stable sort at the end of the
/// run keeps them in the order they happened.
pub(crate) fn trace_time() -> Time {
    let ms = now().as_millis();
    let tick = TICK_MS.with(|t| t.get()).max(1);
    Time::from_millis(ms - ms % tick)
}

/// A connection to `addr` once its host listens (it may be starting or restarting), tried
/// again every `every`.
pub(crate) async fn connect_retrying<A>(addr: A, every: Duration) -> turmoil::net::TcpStream
where
    A: turmoil::ToSocketAddrs + Clone,
{
    loop {
        match turmoil::net::TcpStream::connect(addr.clone()).await {
            Ok(s) => break s,
            Err(_) => tokio::time::sleep(every).await,
        }
    }
}

/// How a client host lingers once its work is done: the network healed (every fault over),
/// then twice the worst latency and 2 s, so that late messages still land in the trace, and
/// then in steps of [`Linger::STEP`] while the server's work still runs (a cancel lost on a
/// wedged connection); the horizon bounds the wait.
pub(crate) struct Linger;

impl Linger {
    /// Re-checks the server's work this often once the first wait is over.
    pub(crate) const STEP: Duration = Duration::from_millis(100);

    /// When the first wait ends, for a host whose work ended at `now`.
    pub(crate) fn first_end(scenario: &Scenario, now: Time) -> Time {
        let (_, hi) = scenario.latency;
        let healed = scenario
            .faults
            .iter()
            .map(crate::scenario::fault_end)
            .max()
            .map_or(Time::ZERO, |d| Time::ZERO + d);
        now.max(healed) + hi * 2 + Duration::from_secs(2)
    }

    /// Whether the server's work still runs, so the linger goes on.
    pub(crate) fn server_busy(shared: &SharedRef) -> bool {
        let s = shared.borrow();
        s.server_jobs > 0 || s.backend_held > 0
    }
}

/// Appends an event at the current simulated time.
pub(crate) fn record(shared: &SharedRef, side: Side, kind: EventKind) {
    shared.borrow_mut().push(trace_time(), side, kind);
}

/// Spawns a task on the host's local set; a panic in it is recorded as the run's failure.
pub(crate) fn spawn_guarded<F>(shared: &SharedRef, fut: F) -> tokio::task::JoinHandle<()>
where
    F: Future<Output = ()> + 'static,
{
    let shared = shared.clone();
    tokio::task::spawn_local(async move {
        if let Err(panic) = AssertUnwindSafe(fut).catch_unwind().await {
            let text = crate::lanes::panic_text(panic.as_ref());
            shared.borrow_mut().failure.get_or_insert(text);
        }
    })
}

/// How a turmoil run can fail outright (as opposed to a trace that breaks a rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurmoilError {
    /// A simulated task panicked.
    Panic(String),
    /// turmoil reported an error.
    Sim(String),
}

impl std::fmt::Display for TurmoilError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurmoilError::Panic(p) => write!(f, "a simulated task panicked: {p}"),
            TurmoilError::Sim(e) => write!(f, "simulation error: {e}"),
        }
    }
}

impl std::error::Error for TurmoilError {}

/// Runs `scenario` on turmoil against the reference server and returns the trace.
///
/// The shorthand for [`run_with_server`] and [`ServerUnderTest::Reference`].
pub fn run(scenario: &Scenario, options: &TurmoilOptions) -> Result<RunResult, TurmoilError> {
    run_with_server(scenario, options, &ServerUnderTest::Reference)
}

/// Runs `scenario` on turmoil with `server` on the `server` host and returns the trace.
///
/// Any server can take the `server` host in place of the reference one; the
/// reference client drives it under the same scenarios, seeds, faults and oracle. The server
/// is a factory taking a [`ServerIo`]: for stdio, one accepted byte stream per "subprocess"
/// (a [`ServerStream`] of NDJSON lines, tokio's `AsyncRead`/`AsyncWrite`, split with
/// [`ServerStream::into_split`]); for Streamable HTTP, the bound [`ServerListener`] (the
/// client POSTs to `/mcp` with `Host: server`; each accepted connection is a
/// [`ServerStream`] to serve with hyper or any HTTP/1.1 server).
///
/// ```no_run
/// use mcp_sim::lanes::turmoil::{run_with_server, TurmoilOptions, ServerIo, ServerUnderTest};
/// use mcp_sim::scenario::Scenario;
///
/// async fn my_server(io: ServerIo) {
///     if let ServerIo::Stdio(stream) = io {
///         // read requests from `stream`, write responses and notifications to it
///         # drop(stream);
///     }
/// }
///
/// let server = ServerUnderTest::custom(my_server);
/// let scenario = Scenario::from_seed(7);
/// let run = run_with_server(&scenario, &TurmoilOptions::default(), &server).unwrap();
/// // or judged by the oracle, with the liveness check:
/// let judged = mcp_sim::run::judge_with_server(&scenario, &TurmoilOptions::default(), &server);
/// # let _ = (run, judged);
/// ```
///
/// A custom server is recorded at its end of the transport: the streams it is handed record
/// what it reads and writes as the server's own events, on the server host's clock, in the
/// shapes the reference server records (stdio lines; HTTP requests, statuses, SSE events,
/// JSON bodies and the closes of each stream; see [`ServerStream`]). The oracle judges it with
/// both sides in view, as it judges the reference server: what the server received and when
/// is what its transport saw, not the client's send plus a grace window (see
/// [`crate::oracle`], observation points). What it does inside stays a black box: no
/// `backend` host runs, and the run is complete once the client has ended every call and
/// lingered. A server crash (`Fault::CrashServer`) restarts the host: the factory runs again
/// on the next connection (stdio) or with a fresh listener (HTTP). Everything the server
/// spawns must run on the host's tokio runtime (`tokio::spawn` or `spawn_local`), with
/// turmoil's sockets and tokio's timers, so that the run stays deterministic.
/// `examples/custom_server.rs` is a complete stdio server in a few dozen lines;
/// `tests/rmcp_peer.rs` runs an rmcp server.
///
/// The reference client calls the reference server's tool, `slow_op`, with each planned
/// call's `{steps, step_ms}`; [`TurmoilOptions::tool_calls`] drives one of the custom server's
/// own tools instead, with arguments from a list or a function of the call's index and the
/// seed ([`ToolCalls`]).
///
///
///
/// With [`ServerUnderTest::Custom`] the trace holds the client's side (and the proxy's, when
/// the scenario has one) and the server's, as the streams handed to it recorded what it read
/// and wrote; no `backend` host runs, and the run is complete once the client has ended every
/// call and lingered.
pub fn run_with_server(
    scenario: &Scenario,
    options: &TurmoilOptions,
    server: &ServerUnderTest,
) -> Result<RunResult, TurmoilError> {
    run_hosts(scenario, options, server, &ClientUnderTest::Reference)
}

/// Runs the reference server and its backend under `scenario`'s latency and faults, with
/// `client` on the `client` host, and returns the trace.
///
/// A [`ClientUnderTest::Custom`] client speaks stdio (the scenario runs with
/// [`Transport::Stdio`]), records nothing, and brings its own workload: the scenario's planned
/// calls and stream resets are not made. The trace holds the server's and the backend's
/// observations. The run ends when the client's future returns and the client host has
/// lingered (the faults healed, the server's work over), and must end before the scenario's
/// horizon (its last planned call or fault, plus twice its loosest timeout, plus a minute).
///
/// Any client can take the `client` host in place of the reference one,
/// against the reference server and its backend, under the scenario's latency and faults. The
/// client is a factory called once with a `turmoil::net::TcpStream` connected to the server's
/// stdio port (NDJSON lines both ways); after a server crash the stream reads EOF, and
/// reconnecting to [`SERVER_STDIO_ADDR`] is the client's business. The client brings its own
/// workload: the scenario's planned calls and stream resets are not made, and the scenario runs
/// over stdio.
///
/// ```no_run
/// use mcp_sim::lanes::turmoil::{run_with_client, ClientUnderTest, TurmoilOptions};
/// use mcp_sim::scenario::Scenario;
///
/// async fn my_client(stream: turmoil::net::TcpStream) {
///     // write `server/discover` and `tools/call` requests, read the server's lines
///     # drop(stream);
/// }
///
/// let client = ClientUnderTest::custom(my_client);
/// let scenario = Scenario::from_seed(7);
/// let run = run_with_client(&scenario, &TurmoilOptions::default(), &client).unwrap();
/// let report = mcp_sim::oracle::check(&run.trace, &run.oracle_config(&scenario));
/// # let _ = report;
/// ```
///
/// A custom client is a black box: the trace holds the server's and the backend's observations
/// only, and the oracle's client-side rules infer or skip (see [`crate::oracle`], observation
/// points). The run ends when the client's future returns and the client host has lingered
/// with the network healed until the server's work is over, so that late server work lands in
/// the trace; the run is complete if that happens before the horizon. `tests/rmcp_client.rs`
/// runs an rmcp client.
pub fn run_with_client(
    scenario: &Scenario,
    options: &TurmoilOptions,
    client: &ClientUnderTest,
) -> Result<RunResult, TurmoilError> {
    match client {
        ClientUnderTest::Reference => {
            run_hosts(scenario, options, &ServerUnderTest::Reference, client)
        }
        ClientUnderTest::Custom(_) => {
            let scenario = scenario.clone().with_transport(Transport::Stdio);
            run_hosts(&scenario, options, &ServerUnderTest::Reference, client)
        }
    }
}

fn run_hosts(
    scenario: &Scenario,
    options: &TurmoilOptions,
    server: &ServerUnderTest,
    client: &ClientUnderTest,
) -> Result<RunResult, TurmoilError> {
    let shared: SharedRef = Rc::new(RefCell::new(Shared::default()));
    TICK_MS.with(|t| t.set(options.tick.as_millis().max(1) as u64));
    let (lo, hi) = scenario.latency;
    let mut sim = turmoil::Builder::new()
        .rng_seed(scenario.seed)
        .epoch(UNIX_EPOCH + Duration::from_secs(1_785_196_800))
        .tick_duration(options.tick)
        .simulation_duration(scenario.horizon())
        .min_message_latency(lo)
        .max_message_latency(hi.max(lo))
        .tcp_capacity(4096)
        .enable_random_order()
        .build();

    let reference = matches!(server, ServerUnderTest::Reference);
    match server {
        ServerUnderTest::Reference => {
            backend::host(&mut sim, &shared);
            server::host(&mut sim, &shared, scenario, options.playback.clone());
        }
        ServerUnderTest::Custom(factory) => custom::host(&mut sim, &shared, scenario, factory),
    }
    if let (Transport::Http, Some(p)) = (scenario.transport, scenario.proxy) {
        proxy::host(&mut sim, &shared, p);
    }
    // Through the reference intermediary: stdio on both hops, or the era bridge's HTTP front.
    let bridged = scenario.bridge;
    match (bridged, scenario.transport) {
        (true, Transport::Stdio) => bridge::host(&mut sim, &shared, scenario.mutants),
        (true, Transport::Http) => bridge::era_host(&mut sim, &shared, scenario.mutants),
        (false, _) => {}
    }
    match client {
        ClientUnderTest::Reference => {
            client::host(&mut sim, &shared, scenario, &options.tool_calls)
        }
        ClientUnderTest::Custom(factory) => {
            custom::client_host(&mut sim, &shared, scenario, factory)
        }
    }
    // The backend, and the proxy when there is one, sit next to the server (same data
    // centre); the scenario's latency range is the client's link.
    if reference {
        sim.set_link_latency("server", "backend", Duration::from_millis(1));
    }
    if scenario.transport == Transport::Http && scenario.proxy.is_some() {
        sim.set_link_latency("proxy", "server", Duration::from_millis(1));
    }
    // The bridge runs beside the client, as a host's local gateway does; the scenario's
    // latency and partitions are its link to the server.
    if bridged {
        sim.set_link_latency("client", "bridge", Duration::from_millis(1));
    }

    let mut faults: Vec<Fault> = scenario.faults.clone();
    faults.sort_by_key(fault_time);
    let mut held_until: Option<Duration> = None;
    let mut cut_until: Option<Duration> = None;
    let peers = match scenario
        .proxy
        .filter(|_| scenario.transport == Transport::Http)
    {
        Some(_) => ("client", "proxy"),
        None if bridged => ("bridge", "server"),
        None => ("client", "server"),
    };
    loop {
        let elapsed = sim.elapsed();
        // Through a bridge a partition or blackhole is the upstream link's; the oracle is told
        // of it (`fault` on the back hop): what crossed the link then arrived late or never.
        let link_fault = |fault: &str, duration: Duration| {
            let kind = EventKind::Fault {
                fault: fault.into(),
                stream: None,
                ms: Some(duration.as_millis() as u64),
            };
            let t = Time::from_millis(elapsed.as_millis() as u64);
            shared.borrow_mut().push(t, Side::Server, kind);
        };
        while let Some(f) = faults.first().copied().filter(|f| fault_time(f) <= elapsed) {
            faults.remove(0);
            match f {
                Fault::CrashServer { .. } => {
                    // Outside any host there is no host clock: stamp it with the sim's.
                    let at = Time::from_millis(elapsed.as_millis() as u64);
                    let close = EventKind::Close {
                        stream: None,
                        by: Side::Server,
                        reason: None,
                    };
                    shared.borrow_mut().push(at, Side::Server, close);
                    sim.bounce("server");
                }
                Fault::Partition { at, duration } => {
                    if bridged {
                        link_fault(crate::trace::FAULT_PARTITION, duration);
                    }
                    sim.hold(peers.0, peers.1);
                    held_until = Some(held_until.map_or(at + duration, |h| h.max(at + duration)));
                }
                Fault::Blackhole { at, duration } => {
                    if bridged {
                        link_fault(crate::trace::FAULT_BLACKHOLE, duration);
                    }
                    sim.partition(peers.0, peers.1);
                    cut_until = Some(cut_until.map_or(at + duration, |h| h.max(at + duration)));
                }
                // Stream resets are carried out by the client host, which owns the connection.
                Fault::ResetStream { .. } => {}
            }
        }
        if held_until.is_some_and(|h| h <= elapsed) {
            sim.release(peers.0, peers.1);
            held_until = None;
        }
        if cut_until.is_some_and(|h| h <= elapsed) {
            sim.repair(peers.0, peers.1);
            cut_until = None;
        }
        let step = sim.step();
        if let Some(p) = shared.borrow_mut().failure.take() {
            return Err(TurmoilError::Panic(p));
        }
        match step {
            Ok(true) => break,
            Ok(false) => {}
            // Running out of simulated time is a liveness failure, reported as an unsettled run.
            Err(e) if e.to_string().contains("Ran for duration") => break,
            Err(e) => return Err(TurmoilError::Sim(e.to_string())),
        }
    }
    let mut shared = shared.borrow_mut();
    let complete = shared.client_done
        && shared.client_outstanding == 0
        && shared.server_jobs == 0
        && shared.backend_held == 0;
    shared.merge_taps();
    let mut trace = std::mem::take(&mut shared.trace);
    trace.events.sort_by_key(|e| e.t);
    // Through the bridge the client's events are the front hop's, the server's and its
    // backend's the upstream hop's.
    if bridged {
        for e in &mut trace.events {
            e.hop = Some(match e.side {
                Side::Client => crate::trace::Hop::Front,
                _ => crate::trace::Hop::Back,
            });
        }
    }
    let mut stats = std::mem::take(&mut shared.stats);
    stats.sim_ms = sim.elapsed().as_millis() as u64;
    Ok(RunResult {
        trace,
        complete,
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic inside a spawned task is not swallowed: it becomes the run's failure.
    #[test]
    fn a_panicking_task_fails_the_run() {
        let shared: SharedRef = Rc::new(RefCell::new(Shared::default()));
        let mut sim = turmoil::Builder::new()
            .rng_seed(1)
            .epoch(UNIX_EPOCH)
            .build();
        let s = shared.clone();
        sim.client("client", async move {
            let task = spawn_guarded(&s, async { panic!("boom in a simulated task") });
            let _ = task.await;
            Ok(())
        });
        sim.run().expect("the guard catches the panic itself");
        assert_eq!(
            shared.borrow().failure.as_deref(),
            Some("boom in a simulated task")
        );
    }
}
