//! Real clients inside the simulation: `mcp-sim sweep --virtual-client` and `replay
//! --virtual-client` run the pinned Python SDK 2.3.0 and TypeScript SDK v1 (1.32.2) and v2
//! (2.4.0) clients under the virtual clock, each against the reference server it starts as its
//! stdio child or reaches by URL, with each seed's latency between them. They must give the verdicts that
//! `serve_clients.rs` pins live (a compliant timeout is clean, a client with no timeout and
//! the TypeScript SDK's unenforced `maxTotalTimeout` break the policy they declare), the same
//! digests on every run, and a failing seed whose replay reprints its digest. A raw client
//! shows the two ways a run does not stand: one that escapes its shim (`not-replayable`) and
//! one that calls no tool (nothing exercised).
//!
//! The SDKs install themselves on first use (`common::peers`); without them the tests skip,
//! or fail under `CI=true`.

mod common;

use std::path::Path;
use std::process::Command;

use common::peers::{node_ts_sdk, node_ts_sdk_v1, python_sdk, NodeSdk};
use common::repo;
use common::virtual_sweep::{assert_caught_and_replayed, rules, sweep_client};
use serde_json::Value;

/// A short call, one that times out at 1500 ms, a short one after (the client goes on).
const PY_PLAN: &str = r#"[{"steps":3,"step_ms":100,"timeout_ms":1500},{"steps":25,"step_ms":200,"timeout_ms":1500},{"steps":2,"step_ms":100,"timeout_ms":1500}]"#;
const TS_PLAN: &str = r#"[{"steps":3,"step_ms":100,"options":{"timeout":1500}},{"steps":25,"step_ms":200,"options":{"timeout":1500}},{"steps":2,"step_ms":100,"options":{"timeout":1500}}]"#;

fn script(path: &str) -> String {
    repo().join(path).display().to_string()
}

/// `PROGRAM SCRIPT PLAN -- server`: a client, and the server command it is given (never run).
fn client(program: &Path, script: String, plan: &str) -> Vec<String> {
    let program = program.display().to_string();
    [program, script, plan.into(), "--".into(), "server".into()].into()
}

fn sweep(flags: &[&str], command: &[String]) -> (i32, Value) {
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    sweep_client(flags, &words)
}

/// Clean, exercised, replayable on every seed, with the same traces' digest twice.
fn assert_clean_twice(flags: &[&str], command: &[String]) {
    let (code, first) = sweep(flags, command);
    assert_eq!(code, 0, "{first:#}");
    assert!(rules(&first).is_empty(), "{first:#}");
    assert!(first.get("not_replayable").is_none(), "{first:#}");
    let inconclusive = first.get("inconclusive").and_then(Value::as_u64);
    assert_eq!(inconclusive.unwrap_or(0), 0, "{first:#}");
    let (_, second) = sweep(flags, command);
    assert_eq!(first["traces"], second["traces"], "same seeds, same traces");
}

/// Exit 1, `rule` and nothing else broken, on `failing` seeds, the first replayed.
fn assert_caught(flags: &[&str], command: &[String], rule: &str, failing: usize) {
    let (code, totals) = sweep(flags, command);
    assert_eq!(code, 1, "{totals:#}");
    assert_eq!(rules(&totals), [rule.to_string()].into(), "{totals:#}");
    let found = totals["failing"].as_array().map(Vec::len);
    assert_eq!(found, Some(failing), "{totals:#}");
    assert_caught_and_replayed(&totals, rule);
}

#[test]
fn python_sdk_client_cancels_at_its_timeout_on_every_seed() {
    let Some(py) = python_sdk() else { return };
    let flags = [
        "--seeds",
        "0..24",
        "--client-policy",
        "timeout=1500",
        "--verify",
    ];
    let command = client(&py, script("tests/peers/python_client.py"), PY_PLAN);
    assert_clean_twice(&flags, &command);
}

/// Over Streamable HTTP the client reaches its server by URL (whatever host: nothing is
/// resolved); its timeout closes the call's stream, the 2026-07-28 cancel.
#[test]
fn python_sdk_client_over_http_closes_the_stream_at_its_timeout() {
    let Some(py) = python_sdk() else { return };
    let flags = [
        "--seeds",
        "0..16",
        "--client-policy",
        "timeout=1500",
        "--verify",
    ];
    let mut command = client(&py, script("tests/peers/python_client.py"), PY_PLAN);
    command.truncate(3);
    command.extend(["--url".into(), "http://localhost:8000/mcp".into()]);
    assert_clean_twice(&flags, &command);
}

/// `--era legacy`: the reference server refuses `server/discover`, as a legacy-only server
/// does, and the Python SDK client falls back to `initialize`: clean, in 2025-11-25; `--era
/// modern` keeps it in 2026-07-28. The era is in the replay lines.
#[test]
fn python_sdk_client_falls_back_to_a_legacy_only_server() {
    let Some(py) = python_sdk() else { return };
    let command = client(&py, script("tests/peers/python_client.py"), PY_PLAN);
    for (era, spoke) in [("legacy", "2025-11-25"), ("modern", "2026-07-28")] {
        let flags = [
            "--seeds",
            "0..6",
            "--client-policy",
            "timeout=1500",
            "--era",
            era,
        ];
        let (code, totals) = sweep(&flags, &command);
        assert_eq!(code, 0, "{totals:#}");
        assert!(rules(&totals).is_empty(), "{totals:#}");
        assert_eq!(totals["eras"][spoke], 6, "{totals:#}");
    }
}

/// Live baseline: the Python SDK client has no default timeout; a host that declares 1 s and
/// leaves `read_timeout_seconds` unset waits for the whole call.
#[test]
fn python_sdk_client_without_a_timeout_breaks_a_declared_one() {
    let Some(py) = python_sdk() else { return };
    let flags = [
        "--seeds",
        "0..8",
        "--client-policy",
        "timeout=1000",
        "--latency-ms",
        "1..50",
    ];
    let plan = r#"[{"steps":15,"step_ms":200}]"#;
    let command = client(&py, script("tests/peers/python_client.py"), plan);
    assert_caught(&flags, &command, "declared-deadline", 8);
}

#[test]
fn ts_sdk_clients_cancel_at_their_timeout_on_every_seed() {
    let flags = [
        "--seeds",
        "0..8",
        "--client-policy",
        "timeout=1500",
        "--verify",
    ];
    if let Some(sdk) = node_ts_sdk() {
        let command = client(&sdk.node, in_sdk(&sdk, "ts_client.mjs"), TS_PLAN);
        assert_clean_twice(&flags, &command);
    }
    if let Some(sdk) = node_ts_sdk_v1() {
        let command = client(&sdk.node, in_sdk(&sdk, "ts_v1_client.mjs"), TS_PLAN);
        assert_clean_twice(&flags, &command);
    }
}

/// The same clients by URL: `fetch`'s connections are the lane's (v2 speaks 2026-07-28 and
/// closes the stream; v1 the legacy era, with its session, and sends a cancel).
#[test]
fn ts_sdk_clients_over_http_give_up_at_their_timeout_on_every_seed() {
    let flags = [
        "--seeds",
        "0..6",
        "--client-policy",
        "timeout=1500",
        "--verify",
    ];
    let by_url = |sdk: &NodeSdk, file: &str| {
        let mut command = client(&sdk.node, in_sdk(sdk, file), TS_PLAN);
        command.truncate(3);
        command.extend(["--url".into(), "http://127.0.0.1:8000/mcp".into()]);
        command
    };
    if let Some(sdk) = node_ts_sdk() {
        assert_clean_twice(&flags, &by_url(&sdk, "ts_client.mjs"));
    }
    if let Some(sdk) = node_ts_sdk_v1() {
        assert_clean_twice(&flags, &by_url(&sdk, "ts_v1_client.mjs"));
    }
}

/// Live baseline (typescript-sdk #2695): `maxTotalTimeout` below `timeout` is not enforced;
/// the call gives up, and cancels, at `timeout`.
#[test]
fn ts_sdk_max_total_timeout_below_timeout_is_caught_by_seed() {
    let Some(sdk) = node_ts_sdk() else { return };
    let plan = r#"[{"steps":30,"step_ms":200,"options":{"timeout":4000,"maxTotalTimeout":1000}}]"#;
    let command = client(&sdk.node, in_sdk(&sdk, "ts_client.mjs"), plan);
    let flags = [
        "--seeds",
        "0..6",
        "--client-policy",
        "timeout=4000,max=1000",
    ];
    assert_caught(&flags, &command, "declared-deadline", 6);
}

fn in_sdk(sdk: &NodeSdk, file: &str) -> String {
    sdk.dir.join(file).display().to_string()
}

/// A client that starts a real process escapes the clock: every run is `not-replayable`
/// (exit 3), never judged; one that calls no tool exercised nothing (exit 3).
#[test]
fn a_client_that_escapes_or_calls_nothing_does_not_pass() {
    let Some(py) = python_sdk() else { return };
    let raw = |mode: &str| client(&py, script("tests/peers/python_raw_client.py"), mode);
    let (code, totals) = sweep(&["--seeds", "0..3"], &raw("escape"));
    assert_eq!(code, 3, "{totals:#}");
    let not_replayable = totals["not_replayable"].as_array().expect("listed");
    assert_eq!(not_replayable.len(), 3, "{totals:#}");
    let why = not_replayable[0]["why"].as_str().expect("a reason");
    assert!(
        why.contains("subprocess") && why.contains("python_raw_client.py"),
        "{why}"
    );

    let (code, totals) = sweep(&["--seeds", "0..3"], &raw("idle"));
    assert_eq!(code, 3, "{totals:#}");
    assert_eq!(totals["inconclusive"], 3, "{totals:#}");
}

/// Go clients cannot be given a virtual server process: a usage error that says so.
#[test]
fn a_go_client_is_refused_with_why() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["sweep", "--virtual-client", "--seeds", "0..1", "--"])
        .args(["go", "test", "./client", "-run", "TestClient"])
        .output()
        .expect("mcp-sim runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Python and Node.js clients"), "{stderr}");
}
