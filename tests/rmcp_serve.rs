//! rmcp's client against the live reference server (`mcp-sim serve`'s library half,
//! [`mcp_sim::lanes::live::serve`]), judged from the server's end with the policy the client
//! declares.
//!
//! rmcp 3.11 enforces `max_total_timeout` and cancels on the wire when it fires, so a client
//! declaring `timeout=1000,reset,max=2000` is clean: its cancel reaches the server at the
//! maximum and a call after the race still succeeds. Over stdio the server runs on one end of
//! a socket pair; over Streamable HTTP on a local port. Each case runs twice: with
//! `ClientLifecycleMode::Discover` (2026-07-28), and with rmcp's default `serve`, which opens
//! with `initialize` and is judged by the legacy era's rules (2025-11-25).

#![cfg(feature = "live")]

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use mcp_sim::lanes::live::serve::{serve, Listen, ServeConfig, Served};
use mcp_sim::model::{ClientPolicies, TimeoutPolicy};
use mcp_sim::oracle::{self, OracleConfig};
use mcp_sim::trace::{EventKind, Side};
use mcp_sim::wire::{DecodeOptions, Message};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, JsonObject, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, PeerRequestOptions, ServiceError};
use rmcp::ClientHandler;

#[derive(Clone)]
struct Quiet;

impl ClientHandler for Quiet {}

fn declared() -> TimeoutPolicy {
    TimeoutPolicy::resetting(Duration::from_millis(1000), Duration::from_millis(2000))
}

fn options() -> PeerRequestOptions {
    let mut o = PeerRequestOptions::with_timeout(Duration::from_millis(1000));
    o.reset_timeout_on_progress = true;
    o.max_total_timeout = Some(Duration::from_millis(2000));
    o
}

fn call(steps: u64, step_ms: u64) -> ClientRequest {
    let mut args = JsonObject::new();
    args.insert("steps".into(), steps.into());
    args.insert("step_ms".into(), step_ms.into());
    ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("slow_op").with_arguments(args),
    ))
}

/// The client's work: a long call that hits the maximum, then a short one. `modern`: the
/// 2026-07-28 lifecycle; else rmcp's default (`initialize`, the legacy era).
async fn client<T, E, A>(io: T, modern: bool) -> Vec<String>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = if modern {
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        Quiet.serve_with_lifecycle(io, lifecycle).await
    } else {
        rmcp::ServiceExt::serve(Quiet, io).await
    }
    .expect("rmcp's client starts");
    let mut outcomes = Vec::new();
    for (steps, step_ms) in [(30, 300), (3, 100)] {
        let handle = running
            .peer()
            .send_request_with_option(call(steps, step_ms), options())
            .await
            .expect("the request is sent");
        outcomes.push(match handle.await_response().await {
            Ok(_) => "result".to_string(),
            Err(ServiceError::Timeout { .. }) => "timeout".to_string(),
            Err(e) => format!("failed: {e}"),
        });
    }
    let _ = running.cancel().await;
    outcomes
}

/// The rules broken and the cancels seen; panics unless the trace speaks `era`.
fn judge(served: &Served, era: &str) -> (Vec<&'static str>, usize) {
    let verdict = oracle::check(&served.run.trace, &OracleConfig::default());
    assert_eq!(
        verdict.era.era.version(),
        era,
        "{}",
        served.run.trace.to_jsonl()
    );
    let rules = verdict.violations.iter().map(|v| v.rule).collect();
    let cancels = served
        .run
        .trace
        .events
        .iter()
        .filter(|e| e.side == Side::Server)
        .filter(|e| match &e.kind {
            EventKind::Recv(w) => matches!(
                w.decode(&DecodeOptions::default()),
                Ok(Message::Cancelled(_))
            ),
            EventKind::Close {
                stream: Some(_),
                by: Side::Client,
                ..
            } => true,
            _ => false,
        })
        .count();
    (rules, cancels)
}

fn config() -> ServeConfig {
    ServeConfig {
        client_policy: Some(ClientPolicies::every_request(declared())),
        ..ServeConfig::default()
    }
}

#[test]
fn rmcp_client_over_stdio_cancels_at_its_maximum() {
    over_stdio(true, "2026-07-28");
}

#[test]
fn rmcp_default_client_over_stdio_is_judged_legacy_and_cancels_at_its_maximum() {
    over_stdio(false, "2025-11-25");
}

#[test]
fn rmcp_client_over_http_closes_the_stream_at_its_maximum() {
    over_http(true, "2026-07-28");
}

#[test]
fn rmcp_default_client_over_http_is_judged_legacy_and_cancels_at_its_maximum() {
    over_http(false, "2025-11-25");
}

fn over_stdio(modern: bool, era: &str) {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let input = theirs.try_clone().expect("clone");
        std::thread::spawn(move || {
            serve(
                Listen::Stdio {
                    input: Box::new(input),
                    output: Box::new(theirs),
                },
                &config(),
                stop,
            )
            .expect("serve runs")
        })
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let outcomes = runtime.block_on(async {
        ours.set_nonblocking(true).expect("nonblocking");
        let io = tokio::net::UnixStream::from_std(ours).expect("tokio stream");
        client(io, modern).await
    });
    drop(runtime); // closes the client's end: the server reads the end of its input
    let served = server.join().expect("the server thread");
    let (rules, cancels) = judge(&served, era);
    assert_eq!(outcomes, ["timeout", "result"]);
    assert!(
        rules.is_empty(),
        "{rules:?}\n{}",
        served.run.trace.to_jsonl()
    );
    assert_eq!(cancels, 1, "{}", served.run.trace.to_jsonl());
}

fn over_http(modern: bool, era: &str) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            serve(Listen::Http(listener), &config(), stop).expect("serve runs")
        })
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let outcomes = runtime.block_on(async {
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
        client(transport, modern).await
    });
    drop(runtime);
    // Let the server see the last close, then stop it.
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let served = server.join().expect("the server thread");
    let (rules, cancels) = judge(&served, era);
    assert_eq!(outcomes, ["timeout", "result"]);
    assert!(
        rules.is_empty(),
        "{rules:?}\n{}",
        served.run.trace.to_jsonl()
    );
    assert!(cancels >= 1, "{}", served.run.trace.to_jsonl());
}
