//! `mcp-sim probe --from`: a recorded client's calls sent again to another server. The
//! recording is the TypeScript SDK v1 1.32.2 client's legacy session with the Python SDK
//! 1.30.0 server (`tests/recordings/python-sdk-1.30.0-stdio.jsonl`: three calls, the second
//! cancelled at the client's 1.5 s timeout and answered with code 0 by that server). Sent to
//! the TypeScript SDK v1 1.32.2 server, the same calls go out with fresh ids, the second is
//! cancelled at its recorded offset, and `--diff` shows the code-0 answer gone.

mod common;

use common::peers::node_ts_sdk_v1;
use common::repo;
use common::serve::scratch;
use mcp_sim::trace::{EventKind, Side, Trace};
use serde_json::Value;

#[test]
fn a_recorded_client_session_sent_to_another_server() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let dir = scratch("probe-from-ts-v1");
    let recording = repo().join("tests/recordings/python-sdk-1.30.0-stdio.jsonl");
    let trace = dir.join("trace.jsonl");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--from"])
        .arg(&recording)
        .args(["--diff", "--format", "json", "--trace"])
        .arg(&trace)
        .arg("--")
        .arg(&sdk.node)
        .arg(sdk.dir.join("ts_v1_slow_server.mjs"))
        .output()
        .expect("mcp-sim runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(out.status.code(), Some(0), "{v:#}\n{stderr}");
    assert_eq!(v["era"], "2025-11-25", "{v:#}");
    assert!(
        stderr.contains("cancel: cancelled, answered with error 0 -> cancelled, unanswered"),
        "{stderr}"
    );
    assert!(
        stderr.contains("response-after-cancel (SHOULD): 1 -> 0"),
        "{stderr}"
    );
    // The recorded calls, in their order, with their arguments; the second cancelled about
    // 1.5 s after it went out, as recorded.
    let trace = Trace::from_jsonl(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let sent: Vec<(u64, Value)> = trace
        .events
        .iter()
        .filter(|e| e.side == Side::Client)
        .filter_map(|e| match &e.kind {
            EventKind::Send(w) => w.msg.clone().map(|m| (e.t, m)),
            _ => None,
        })
        .collect();
    let calls: Vec<&(u64, Value)> = sent
        .iter()
        .filter(|(_, m)| m["method"] == "tools/call")
        .collect();
    let args: Vec<&Value> = calls
        .iter()
        .map(|(_, m)| &m["params"]["arguments"])
        .collect();
    let expected = [
        serde_json::json!({"steps": 3, "step_ms": 100}),
        serde_json::json!({"steps": 25, "step_ms": 200}),
        serde_json::json!({"steps": 2, "step_ms": 100}),
    ];
    assert_eq!(
        args,
        expected.iter().collect::<Vec<_>>(),
        "{}",
        trace.to_jsonl()
    );
    let cancel = sent
        .iter()
        .find(|(_, m)| m["method"] == "notifications/cancelled")
        .expect("the recorded cancel");
    assert_eq!(cancel.1["params"]["requestId"], calls[1].1["id"]);
    let after = cancel.0 - calls[1].0;
    assert!(
        (1400..2500).contains(&after),
        "cancelled {after} ms after it went out"
    );
}

#[test]
fn a_recording_that_cannot_be_read_is_a_usage_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--from", "no-such.jsonl", "--", "true"])
        .output()
        .expect("mcp-sim runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such.jsonl"));
}

/// A recorded client's own bug cannot be re-sent: a client that gave a request up as lost on
/// a late answer (`race-not-graceful`, a reaction to what it read) is reported as not
/// re-playable, and the run is inconclusive, not passed. The server probed is `mcp-sim
/// serve`'s reference.
#[test]
fn a_recorded_clients_reaction_is_reported_as_not_replayable() {
    let recording = repo().join("tests/traces/race-not-graceful-violates.jsonl");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--format", "json", "--from"])
        .arg(&recording)
        .arg("--")
        .args([env!("CARGO_BIN_EXE_mcp-sim"), "serve"])
        .output()
        .expect("mcp-sim runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(out.status.code(), Some(3), "{v:#}");
    assert_eq!(v["verdict"], "inconclusive", "{v:#}");
    let findings = v["findings"].as_array().expect("findings");
    let named: Vec<&Value> = findings
        .iter()
        .filter(|f| f["finding"] == "not-replayable")
        .collect();
    assert_eq!(named.len(), 1, "{v:#}");
    let message = named[0]["message"].as_str().unwrap();
    assert!(
        message.contains("race-not-graceful") && message.contains("reaction"),
        "{message}"
    );
}
