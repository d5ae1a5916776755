//! rmcp's client inside the simulation: an rmcp 3.x client on the simulated `client` host,
//! speaking stdio to the reference server through [`ClientUnderTest::Custom`], under the
//! scenario's latency and faults. Only the server and the backend are recorded; the oracle
//! judges the server's side and infers or skips the client's.
//!
//! What rmcp 3.11's client does on the wire, test by test:
//!
//! - `ClientLifecycleMode::Discover` opens with `server/discover`; rmcp requires `ttlMs` and
//!   `cacheScope` in the result and refuses one without them, which the reference server first
//!   sent (a relay strips them to keep that visible:
//!   [`rmcp_client_refuses_the_reference_discover_result`]); the default lifecycle sends a
//!   legacy `initialize` without `_meta`, while `Auto` opens with `server/discover`
//!   ([`rmcp_client_default_lifecycle_sends_a_legacy_initialize`]).
//! - Against the reference server as it is, calls carry the 2026-07-28
//!   metadata and a progress token, and every way of giving up on a call except dropping a
//!   `RequestHandle` sends `notifications/cancelled`
//!   ([`rmcp_client_calls_with_progress_cancel_and_timeout`],
//!   [`rmcp_client_dropping_a_request_handle_sends_no_cancel`]).
//! - A crash fails the calls for good, with no reconnect
//!   ([`rmcp_client_gives_up_when_the_server_crashes`]); a lost message stalls the client
//!   forever ([`rmcp_client_waits_forever_for_a_lost_response`]).

#![cfg(feature = "turmoil")]

use std::cell::{Cell, RefCell};
use std::time::Duration;

use mcp_sim::lanes::turmoil::{run_with_client, ClientUnderTest, TurmoilOptions};
use mcp_sim::lanes::RunResult;
use mcp_sim::model::Transport;
use mcp_sim::oracle::{self, Level};
use mcp_sim::scenario::Scenario;
use mcp_sim::trace::{EventKind, Side};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, JsonObject, ProgressNotificationParam,
    ProtocolVersion,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, PeerRequestOptions, ServiceError,
};
use rmcp::{ClientHandler, Peer, RoleClient};
use serde_json::Value;

thread_local! {
    /// Progress notifications rmcp's client handed to its handler.
    static PROGRESS: Cell<u32> = const { Cell::new(0) };
    /// What each call ended with, as the client saw it.
    static OUTCOMES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// How the client's startup ended.
    static STARTUP: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A client handler that counts progress notifications.
struct Counter;

impl ClientHandler for Counter {
    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        PROGRESS.with(|p| p.set(p.get() + 1));
    }
}

/// How one call ends on the client's side.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// Awaited to the end (`Peer::call_tool`).
    Complete,
    /// `RequestHandle::cancel` after the delay.
    Cancel(u64),
    /// `Peer::call_tool` dropped after the delay (a `tokio::time::timeout` around it).
    Drop(u64),
    /// rmcp's own request timeout (`PeerRequestOptions::with_timeout`).
    Timeout(u64),
}

/// splitmix64: a small seeded generator.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seeded workload: six calls of `slow_op`, started up to 3 s apart, each completed,
/// cancelled, dropped or timed out. Every mode appears on every seed.
fn workload(seed: u64) -> Vec<(u64, u64, u64, Mode)> {
    let mut s = seed;
    let mut calls = Vec::new();
    for k in 0..6u64 {
        let at = next(&mut s) % 3000;
        let steps = 2 + next(&mut s) % 5;
        let step_ms = 200 + next(&mut s) % 800;
        let work = steps * step_ms;
        let delay = 100 + next(&mut s) % work;
        let mode = match k % 4 {
            0 => Mode::Complete,
            1 => Mode::Cancel(delay),
            2 => Mode::Timeout(delay),
            _ => Mode::Drop(delay),
        };
        calls.push((at, steps, step_ms, mode));
    }
    calls
}

fn request(steps: u64, step_ms: u64) -> CallToolRequestParams {
    let mut args = JsonObject::new();
    args.insert("steps".into(), steps.into());
    args.insert("step_ms".into(), step_ms.into());
    CallToolRequestParams::new("slow_op").with_arguments(args)
}

fn outcome<T>(r: Result<T, ServiceError>) -> String {
    match r {
        Ok(_) => "result".into(),
        Err(ServiceError::Timeout { .. }) => "timeout".into(),
        Err(ServiceError::McpError(e)) => format!("error {}", e.code.0),
        Err(e) => format!("failed: {e}"),
    }
}

async fn call(peer: Peer<RoleClient>, steps: u64, step_ms: u64, mode: Mode) -> String {
    let params = request(steps, step_ms);
    let tool = |p| ClientRequest::CallToolRequest(CallToolRequest::new(p));
    match mode {
        Mode::Complete => outcome(peer.call_tool(params).await),
        Mode::Drop(ms) => {
            match tokio::time::timeout(Duration::from_millis(ms), peer.call_tool(params)).await {
                Ok(r) => outcome(r),
                Err(_) => "dropped".into(),
            }
        }
        Mode::Cancel(ms) => {
            let mut handle = match peer
                .send_cancellable_request(tool(params), PeerRequestOptions::no_options())
                .await
            {
                Ok(h) => h,
                Err(e) => return outcome::<()>(Err(e)),
            };
            match tokio::time::timeout(Duration::from_millis(ms), &mut handle.rx).await {
                Ok(Ok(r)) => outcome(r),
                Ok(Err(_)) => "failed: response channel closed".into(),
                Err(_) => match handle.cancel(Some("cancelled by the user".into())).await {
                    Ok(()) => "cancelled".into(),
                    Err(e) => outcome::<()>(Err(e)),
                },
            }
        }
        Mode::Timeout(ms) => {
            let options = PeerRequestOptions::with_timeout(Duration::from_millis(ms));
            match peer.send_request_with_option(tool(params), options).await {
                Ok(handle) => outcome(handle.await_response().await),
                Err(e) => outcome::<()>(Err(e)),
            }
        }
    }
}

/// A relay between rmcp and the server's stream that removes `ttlMs` and `cacheScope` from a
/// result carrying `supportedVersions` (the `server/discover` result), as the reference server
/// first answered, and passes every other line through unchanged.
fn discover_shim(stream: turmoil::net::TcpStream) -> tokio::io::DuplexStream {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (mut from_rmcp, mut to_rmcp) = tokio::io::split(ours);
    let (from_server, mut to_server) = stream.into_split();
    tokio::task::spawn_local(async move {
        let _ = tokio::io::copy(&mut from_rmcp, &mut to_server).await;
        let _ = to_server.shutdown().await;
    });
    tokio::task::spawn_local(async move {
        let mut lines = BufReader::new(from_server).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut out = line;
            if let Ok(mut v) = serde_json::from_str::<Value>(&out) {
                if let Some(r) = v.get_mut("result").and_then(Value::as_object_mut) {
                    if r.contains_key("supportedVersions") {
                        r.remove("ttlMs");
                        r.remove("cacheScope");
                        out = v.to_string();
                    }
                }
            }
            out.push('\n');
            if to_rmcp.write_all(out.as_bytes()).await.is_err() {
                break;
            }
        }
        let _ = to_rmcp.shutdown().await;
    });
    theirs
}

/// The whole client: discover, the seeded calls side by side, then close the pipe. With
/// `shim`, rmcp talks to the server through [`discover_shim`], which strips the discover
/// result's cache fields.
async fn rmcp_client(
    stream: turmoil::net::TcpStream,
    seed: u64,
    shim: bool,
    lifecycle: ClientLifecycleMode,
) {
    if shim {
        run_client(discover_shim(stream), seed, lifecycle).await
    } else {
        run_client(stream, seed, lifecycle).await
    }
}

/// The 2026-07-28 lifecycle: `server/discover`, preferring 2026-07-28.
fn discover() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

async fn run_client<S>(stream: S, seed: u64, lifecycle: ClientLifecycleMode)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let client = match Counter.serve_with_lifecycle(stream, lifecycle).await {
        Ok(c) => {
            STARTUP.with(|s| *s.borrow_mut() = Some("ok".into()));
            c
        }
        Err(e) => {
            STARTUP.with(|s| *s.borrow_mut() = Some(format!("startup failed: {e}")));
            return;
        }
    };
    let tasks: Vec<_> = workload(seed)
        .into_iter()
        .map(|(at, steps, step_ms, mode)| {
            let peer = client.peer().clone();
            tokio::task::spawn_local(async move {
                tokio::time::sleep(Duration::from_millis(at)).await;
                call(peer, steps, step_ms, mode).await
            })
        })
        .collect();
    for task in tasks {
        let out = task.await.unwrap_or_else(|e| format!("task failed: {e}"));
        OUTCOMES.with(|o| o.borrow_mut().push(out));
    }
    let _ = client.cancel().await;
}

/// One run: the trace, the startup, the client's outcomes and its progress count.
struct Observed {
    scenario: Scenario,
    run: RunResult,
    startup: Option<String>,
    outcomes: Vec<String>,
    progress: u32,
}

fn observe(seed: u64, shim: bool) -> Observed {
    observe_with(seed, shim, discover())
}

fn observe_with(seed: u64, shim: bool, lifecycle: ClientLifecycleMode) -> Observed {
    PROGRESS.with(|p| p.set(0));
    OUTCOMES.with(|o| o.borrow_mut().clear());
    STARTUP.with(|s| *s.borrow_mut() = None);
    // The scenario's latency and faults; the client brings its own calls.
    let scenario = Scenario::from_seed(seed).with_transport(Transport::Stdio);
    let client =
        ClientUnderTest::custom(move |stream| rmcp_client(stream, seed, shim, lifecycle.clone()));
    let run = run_with_client(&scenario, &TurmoilOptions::default(), &client).expect("the run");
    Observed {
        scenario,
        run,
        startup: STARTUP.with(|s| s.borrow_mut().take()),
        outcomes: OUTCOMES.with(|o| o.borrow_mut().drain(..).collect()),
        progress: PROGRESS.with(Cell::get),
    }
}

/// What the server received, in order: each message as JSON (or its raw text).
fn received(run: &RunResult) -> Vec<Value> {
    run.trace
        .events
        .iter()
        .filter(|e| e.side == Side::Server)
        .filter_map(|e| match &e.kind {
            EventKind::Recv(w) => w.msg.clone().or_else(|| w.raw.clone().map(Value::String)),
            _ => None,
        })
        .collect()
}

/// Seeds: no faults and short latency (1), two server crashes (2), up to 400 ms of latency (3),
/// up to 2 s of latency (4).
const SEEDS: [u64; 4] = [1, 2, 3, 4];

/// The run's MUST violations.
fn musts(o: &Observed) -> Vec<oracle::Violation> {
    let config = o.run.oracle_config(&o.scenario);
    oracle::check(&o.run.trace, &config)
        .violations
        .into_iter()
        .filter(|v| v.level == Level::Must)
        .collect()
}

/// rmcp 3.11's client in `ClientLifecycleMode::Discover` opens with `server/discover` (no
/// `initialize`), carrying the protocol version, client info and capabilities in `_meta`, and
/// then refuses a discover result without `ttlMs` and `cacheScope` (the reference server's first
/// answer; [`discover_shim`] strips them): rmcp's `DiscoverResult` requires both, so the result
/// parses as a `CustomResult` and startup fails with "expect initialized result". The client sends nothing
/// more and closes the pipe; the server's side passes the oracle.
#[test]
fn rmcp_client_refuses_the_reference_discover_result() {
    for seed in SEEDS {
        let o = observe(seed, true);
        let startup = o.startup.clone().unwrap_or_default();
        assert!(
            startup.starts_with("startup failed: expect initialized result")
                && startup.contains("supportedVersions"),
            "seed {seed}: {startup}"
        );
        assert!(o.outcomes.is_empty(), "seed {seed}");
        assert_eq!(o.progress, 0, "seed {seed}");
        let got = received(&o.run);
        assert_eq!(got.len(), 1, "seed {seed}: {got:?}");
        assert_eq!(got[0]["method"], "server/discover", "seed {seed}");
        let meta = &got[0]["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "rmcp");
        assert!(o.run.complete, "seed {seed} did not settle");
        assert!(musts(&o).is_empty(), "seed {seed}: {:?}", musts(&o));
    }
}

/// rmcp 3.11's client runs the 2026-07-28 lifecycle against the reference server:
///
/// - `server/discover` first (id 0, no progress token), never `initialize`;
/// - every `tools/call` carries `protocolVersion`, `clientInfo` and `clientCapabilities` in
///   `_meta`, and a `progressToken` (rmcp attaches one to every request, asked for or not);
///   the progress notifications reach the handler's `on_progress`;
/// - `notifications/cancelled` for each call the client gave up on, and only for those:
///   `RequestHandle::cancel` sends the caller's reason, rmcp's own timeout
///   (`PeerRequestOptions::with_timeout`) sends `"request timeout"`, and dropping a
///   `Peer::call_tool` future sends `"request abandoned by the caller"`.
///
/// The server's side passes the oracle at MUST level and every run settles.
#[test]
fn rmcp_client_calls_with_progress_cancel_and_timeout() {
    let mut progress = 0;
    for seed in SEEDS {
        let o = observe(seed, false);
        assert_eq!(o.startup.as_deref(), Some("ok"), "seed {seed}");
        assert_eq!(o.outcomes.len(), 6, "seed {seed}");
        let got = received(&o.run);
        assert_eq!(got[0]["method"], "server/discover", "seed {seed}");
        assert_eq!(got[0]["id"], 0, "seed {seed}");
        assert!(got[0]["params"]["_meta"].get("progressToken").is_none());
        assert!(
            got.iter().all(|m| m["method"] != "initialize"),
            "seed {seed}"
        );
        let calls: Vec<_> = got.iter().filter(|m| m["method"] == "tools/call").collect();
        assert_eq!(calls.len(), 6, "seed {seed}");
        for c in &calls {
            let meta = &c["params"]["_meta"];
            assert_eq!(
                meta["io.modelcontextprotocol/protocolVersion"],
                "2026-07-28"
            );
            assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
            assert!(meta["io.modelcontextprotocol/clientInfo"].is_object());
            assert!(meta["progressToken"].is_number(), "seed {seed}: {c}");
        }
        let reasons = |r: &str| {
            got.iter()
                .filter(|m| m["method"] == "notifications/cancelled")
                .filter(|m| m["params"]["reason"] == r)
                .count()
        };
        let ended = |o2: &str| o.outcomes.iter().filter(|x| *x == o2).count();
        assert_eq!(
            reasons("cancelled by the user"),
            ended("cancelled"),
            "seed {seed}"
        );
        assert_eq!(reasons("request timeout"), ended("timeout"), "seed {seed}");
        assert_eq!(
            reasons("request abandoned by the caller"),
            ended("dropped"),
            "seed {seed}"
        );
        let cancels = got
            .iter()
            .filter(|m| m["method"] == "notifications/cancelled")
            .count();
        assert_eq!(
            cancels,
            ended("cancelled") + ended("timeout") + ended("dropped"),
            "seed {seed}: {:?}",
            o.outcomes
        );
        assert!(ended("result") >= 2, "seed {seed}: {:?}", o.outcomes);
        progress += o.progress;
        assert!(o.run.complete, "seed {seed} did not settle");
        assert!(musts(&o).is_empty(), "seed {seed}: {:?}", musts(&o));
        let config = o.run.oracle_config(&o.scenario);
        println!(
            "seed {seed}: outcomes {:?}, progress {}, violations {:?}",
            o.outcomes,
            o.progress,
            oracle::check(&o.run.trace, &config).violations
        );
    }
    assert!(progress > 10, "{progress} progress notifications");
}

/// rmcp 3.11's default client lifecycle (`ServiceExt::serve`, `serve_client`, i.e.
/// `ClientLifecycleMode::Initialize`) opens with a legacy `initialize` whose params carry
/// `protocolVersion: "2026-07-28"` and no `_meta`. The reference server is dual-era: an
/// `initialize` opens the legacy era, and it answers with the newest legacy revision
/// (2025-11-25), as version negotiation has it; rmcp goes on in that era (`initialized`, its
/// calls without the modern `_meta` keys, cancels by notification), and the trace, judged by
/// the legacy rules it opens with, breaks none. `ClientLifecycleMode::Auto` opens with
/// `server/discover` instead, is judged as 2026-07-28 and starts. Seed 1.
#[test]
fn rmcp_client_default_lifecycle_sends_a_legacy_initialize() {
    let o = observe_with(1, false, ClientLifecycleMode::Initialize);
    let got = received(&o.run);
    assert_eq!(got[0]["method"], "initialize");
    assert_eq!(got[0]["params"]["protocolVersion"], "2026-07-28");
    assert!(got[0]["params"].get("_meta").is_none());
    let config = o.run.oracle_config(&o.scenario);
    let verdict = oracle::check(&o.run.trace, &config);
    assert_eq!(
        verdict.era.era,
        mcp_sim::Era::LEGACY,
        "{}",
        verdict.era.describe()
    );
    assert_eq!(o.startup.as_deref(), Some("ok"));
    assert_eq!(got[1]["method"], "notifications/initialized");
    let calls: Vec<_> = got.iter().filter(|m| m["method"] == "tools/call").collect();
    assert!(!calls.is_empty(), "{got:?}");
    for c in calls {
        let meta = c["params"].get("_meta");
        assert!(
            meta.is_none_or(|m| m.get("io.modelcontextprotocol/protocolVersion").is_none()),
            "{c}"
        );
    }
    assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);

    let auto = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    };
    let o = observe_with(1, false, auto);
    let got = received(&o.run);
    assert_eq!(got[0]["method"], "server/discover", "{got:?}");
    assert!(got.iter().any(|m| m["method"] == "tools/call"), "{got:?}");
    assert!(musts(&o).is_empty(), "{:?}", musts(&o));
}

/// A lost message (a blackhole: turmoil's TCP drops and never retransmits) stalls rmcp's
/// client for good: `server/discover` has no timeout in `ClientLifecycleMode::Discover` (only
/// `Auto` bounds it, at 10 s), nor has `Peer::call_tool`, and nothing reconnects. The client
/// never returns and the run ends at the horizon, incomplete. Seed 10 loses the `server/discover`
/// request itself; seed 13 loses messages of the calls after startup. The server's side shows
/// no MUST violation (the liveness checks are off for an incomplete run).
#[test]
fn rmcp_client_waits_forever_for_a_lost_response() {
    let o = observe(10, false);
    assert!(!o.run.complete);
    assert_eq!(o.startup, None);
    assert!(received(&o.run).is_empty());
    assert!(musts(&o).is_empty(), "{:?}", musts(&o));

    let o = observe(13, false);
    assert!(!o.run.complete);
    assert_eq!(o.startup.as_deref(), Some("ok"));
    assert!(o.outcomes.is_empty(), "{:?}", o.outcomes);
    assert!(musts(&o).is_empty(), "{:?}", musts(&o));
}

/// The runs replay: the same seed gives the same trace, rmcp's client included.
#[test]
fn rmcp_client_runs_replay() {
    for seed in [1, 4] {
        let a = observe(seed, false);
        let b = observe(seed, false);
        assert_eq!(a.run.trace.digest(), b.run.trace.digest(), "seed {seed}");
        assert_eq!(a.outcomes, b.outcomes, "seed {seed}");
    }
}

/// A server crash mid-workload (seed 1's latency, a crash at 2.5 s): rmcp's client reads EOF,
/// fails every call in flight and every later one (`Transport closed`, or the response
/// channel closed), sends no `notifications/cancelled` for them and does not reconnect: the
/// restarted server hears nothing more. The run settles and the server's side passes the
/// oracle.
#[test]
fn rmcp_client_gives_up_when_the_server_crashes() {
    use mcp_sim::scenario::Fault;
    OUTCOMES.with(|o| o.borrow_mut().clear());
    let crash = Duration::from_millis(2500);
    let mut scenario = Scenario::from_seed(1).with_transport(Transport::Stdio);
    scenario.faults = vec![Fault::CrashServer { at: crash }];
    let client = ClientUnderTest::custom(|stream| rmcp_client(stream, 1, false, discover()));
    let run = run_with_client(&scenario, &TurmoilOptions::default(), &client).expect("the run");
    let outcomes = OUTCOMES.with(|o| o.borrow_mut().drain(..).collect::<Vec<_>>());
    assert_eq!(outcomes.len(), 6);
    assert!(
        outcomes
            .iter()
            .all(|o| o == "result" || o.starts_with("failed:")),
        "{outcomes:?}"
    );
    assert!(outcomes.iter().filter(|o| o.starts_with("failed:")).count() >= 3);
    let late = run.trace.events.iter().filter(|e| {
        e.side == Side::Server
            && e.t >= crash.as_millis() as u64
            && matches!(e.kind, EventKind::Recv(_))
    });
    assert_eq!(late.count(), 0);
    assert!(run.trace.to_jsonl().contains("\"tools/call\""));
    assert!(!run.trace.to_jsonl().contains("notifications/cancelled"));
    assert!(run.complete);
    let report = oracle::check(&run.trace, &run.oracle_config(&scenario));
    assert!(!report.has_must(), "{:?}", report.violations);
}

/// Dropping a `RequestHandle` (from `Peer::send_request_with_option` or
/// `Peer::send_cancellable_request`) sends nothing: unlike a dropped `Peer::call_tool`
/// future, the handle has no drop guard, so the server runs the call to the end and its
/// result goes to a client that no longer waits for it. Seed 1.
#[test]
fn rmcp_client_dropping_a_request_handle_sends_no_cancel() {
    async fn client(stream: turmoil::net::TcpStream) {
        let Ok(client) = Counter.serve_with_lifecycle(stream, discover()).await else {
            return;
        };
        let call = ClientRequest::CallToolRequest(CallToolRequest::new(request(3, 300)));
        let handle = client
            .peer()
            .send_request_with_option(call, PeerRequestOptions::no_options())
            .await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(handle);
        tokio::time::sleep(Duration::from_millis(2000)).await;
        let _ = client.cancel().await;
    }
    let scenario = Scenario::from_seed(1).with_transport(Transport::Stdio);
    let run = run_with_client(
        &scenario,
        &TurmoilOptions::default(),
        &ClientUnderTest::custom(client),
    )
    .expect("the run");
    let got = received(&run);
    assert!(got.iter().any(|m| m["method"] == "tools/call"));
    assert!(got.iter().all(|m| m["method"] != "notifications/cancelled"));
    let result_sent = run.trace.events.iter().any(|e| {
        e.side == Side::Server
            && matches!(&e.kind, EventKind::Send(w)
                if w.msg.as_ref().is_some_and(|m| m["id"] == 1 && m.get("result").is_some()))
    });
    assert!(result_sent);
    assert!(run.complete);
    let report = oracle::check(&run.trace, &run.oracle_config(&scenario));
    assert!(!report.has_must(), "{:?}", report.violations);
}
