//! A Rust client against a real server's recording, under the simulated clock: rmcp 3.11's
//! client on the turmoil lane's `client` host ([`ClientUnderTest::Custom`]) meets the Python
//! SDK 1.30.0 server as `mcp-sim record` saw it (`tests/recordings/python-sdk-1.30.0-stdio.jsonl`:
//! the TypeScript SDK v1 client's legacy stdio session, three calls, the second cancelled at
//! the client's timeout and answered with code 0 by that server, python-sdk #2480), played back
//! by the reference server ([`TurmoilOptions::playback`]).
//!
//! rmcp makes the same three calls and cancels the second. With the recorded behaviour after a
//! cancel, the server's code-0 answer comes back (`response-after-cancel`, the recorded
//! server's bug) and rmcp copes with it; played correctly, nothing is found. Deterministic:
//! the same run twice gives the same trace.

#![cfg(feature = "turmoil")]

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use mcp_sim::lanes::turmoil::{run_with_client, ClientUnderTest, TurmoilOptions};
use mcp_sim::model::recorded::{MatchMode, Origin};
use mcp_sim::model::server::{OnCancel, OnMiss, Playback};
use mcp_sim::model::Transport;
use mcp_sim::oracle;
use mcp_sim::recording;
use mcp_sim::scenario::Scenario;
use mcp_sim::trace::{EventKind, Side, Trace};
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, JsonObject};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, PeerRequestOptions, ServiceError};

thread_local! {
    /// What each call ended with, as rmcp's client saw it.
    static OUTCOMES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
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
        Err(ServiceError::McpError(e)) => format!("error {}", e.code.0),
        Err(e) => format!("failed: {e}"),
    }
}

/// The recorded session's calls: the first and last awaited, the second cancelled after 1 s.
async fn client(stream: turmoil::net::TcpStream) {
    let Ok(client) = ().serve_with_lifecycle(stream, ClientLifecycleMode::Initialize).await else {
        OUTCOMES.with(|o| o.borrow_mut().push("startup failed".into()));
        return;
    };
    let peer = client.peer().clone();
    let first = outcome(peer.call_tool(request(3, 100)).await);
    let tool = ClientRequest::CallToolRequest(CallToolRequest::new(request(25, 200)));
    let second = match peer
        .send_cancellable_request(tool, PeerRequestOptions::no_options())
        .await
    {
        Ok(mut handle) => {
            match tokio::time::timeout(Duration::from_millis(1000), &mut handle.rx).await {
                Ok(Ok(r)) => outcome(r),
                Ok(Err(_)) => "failed: response channel closed".into(),
                Err(_) => match handle.cancel(Some("cancelled by the user".into())).await {
                    Ok(()) => "cancelled".into(),
                    Err(e) => outcome::<()>(Err(e)),
                },
            }
        }
        Err(e) => outcome::<()>(Err(e)),
    };
    // Time for what follows the cancel to arrive before the next call.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let third = outcome(peer.call_tool(request(2, 100)).await);
    OUTCOMES.with(|o| o.borrow_mut().extend([first, second, third]));
    let _ = client.cancel().await;
}

fn recorded() -> Arc<recording::Recording> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/recordings/python-sdk-1.30.0-stdio.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("the recording");
    let trace = Trace::from_jsonl(&text).expect("a trace");
    Arc::new(recording::read(&trace, None).expect("a recording"))
}

/// One run of rmcp against the recording: its outcomes, the trace and the rules broken.
fn run(on_cancel: OnCancel) -> (Vec<String>, Trace, Vec<&'static str>) {
    OUTCOMES.with(|o| o.borrow_mut().clear());
    let scenario = Scenario::from_seed(1).with_transport(Transport::Stdio);
    let options = TurmoilOptions {
        playback: Some(Playback {
            recording: recorded(),
            matching: MatchMode::Params,
            on_cancel,
            on_miss: OnMiss::Error,
        }),
        ..TurmoilOptions::default()
    };
    let client = ClientUnderTest::custom(client);
    let run = run_with_client(&scenario, &options, &client).expect("the run");
    let verdict = oracle::check(&run.trace, &run.oracle_config(&scenario));
    let mut rules: Vec<&str> = verdict.violations.iter().map(|v| v.rule).collect();
    rules.dedup();
    (
        OUTCOMES.with(|o| o.borrow_mut().drain(..).collect()),
        run.trace,
        rules,
    )
}

fn played_as_recorded(trace: &Trace) -> usize {
    trace
        .events
        .iter()
        .filter(|e| {
            matches!((e.side, &e.kind), (Side::Server, EventKind::Send(w))
                if matches!(w.origin, Some(Origin::Recorded { .. })))
        })
        .count()
}

#[test]
fn rmcp_meets_the_recorded_python_sdk_1_server_and_copes_with_its_answer_to_the_cancel() {
    let (outcomes, trace, rules) = run(OnCancel::Recorded);
    assert_eq!(
        outcomes,
        ["result", "cancelled", "result"],
        "{}",
        trace.to_jsonl()
    );
    assert_eq!(rules, ["response-after-cancel"], "{}", trace.to_jsonl());
    let code_0 = trace.events.iter().any(|e| {
        matches!((e.side, &e.kind), (Side::Server, EventKind::Send(w))
            if w.msg.as_ref().is_some_and(|m| m["error"]["code"] == 0))
    });
    assert!(code_0, "{}", trace.to_jsonl());
    assert!(played_as_recorded(&trace) >= 5, "{}", trace.to_jsonl());
    // Deterministic: the same run, the same trace.
    let (_, again, _) = run(OnCancel::Recorded);
    assert_eq!(trace.to_jsonl(), again.to_jsonl());
}

#[test]
fn played_back_correctly_after_the_cancel_the_same_session_is_clean() {
    let (outcomes, trace, rules) = run(OnCancel::Correct);
    assert_eq!(
        outcomes,
        ["result", "cancelled", "result"],
        "{}",
        trace.to_jsonl()
    );
    assert!(rules.is_empty(), "{rules:?}\n{}", trace.to_jsonl());
}
