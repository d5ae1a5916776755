//! Real clients against `mcp-sim serve`, and through `mcp-sim record` in front of a real
//! server: the Python SDK 2.3.0 client and the TypeScript SDK 2.4.0 client, over stdio and
//! Streamable HTTP, each with the timeout policy it declares.
//!
//! Compliant cases must be clean; the known findings are asserted as a baseline, each by the
//! rule that catches it:
//!
//! | client | options | on the wire | rule |
//! | --- | --- | --- | --- |
//! | Python SDK | no `read_timeout_seconds` (the default) | the call runs to its end, no cancel | `declared-deadline` against a declared 1 s timeout |
//! | TypeScript SDK | `{timeout: 4000, maxTotalTimeout: 1000}` | the cancel comes at about 4000 ms (typescript-sdk #2695) | `declared-deadline` |
//! | TypeScript SDK | `{timeout: 1000, resetTimeoutOnProgress: true, maxTotalTimeout: 2000}`, progress every 300 ms | the application gets "Maximum total timeout exceeded", no cancel is sent, the server works on | `declared-deadline` |
//!
//! Wall-clock margins: every deadline is at least a second away from what the assertion
//! needs (the oracle's grace window is 1000 ms; the calls run for seconds).

mod common;

use std::path::Path;
use std::process::Command;

use common::peers::{node_ts_sdk, python_sdk};
use common::repo;
use common::serve::*;
use mcp_sim::trace::Side;

fn python(python: &Path, plan: &str) -> Command {
    let mut c = Command::new(python);
    c.arg(repo().join("tests/peers/python_client.py")).arg(plan);
    c
}

fn typescript(sdk: &common::peers::NodeSdk, plan: &str) -> Command {
    let mut c = Command::new(&sdk.node);
    c.arg(sdk.dir.join("ts_client.mjs")).arg(plan);
    c
}

/// A compliant plan for a client with a 1500 ms timeout: a short call, a long one that times
/// out, and a short one after the race (the client keeps working).
const PY_PLAN: &str = r#"[{"steps":3,"step_ms":100,"timeout_ms":1500},{"steps":25,"step_ms":200,"timeout_ms":1500},{"steps":2,"step_ms":100,"timeout_ms":1500}]"#;
const TS_PLAN: &str = r#"[{"steps":3,"step_ms":100,"options":{"timeout":1500}},{"steps":25,"step_ms":200,"options":{"timeout":1500}},{"steps":2,"step_ms":100,"options":{"timeout":1500}}]"#;

/// The plans through the tap: the first call may take the real server's start-up (an
/// interpreter warming up), so it waits up to 10 s.
const PY_RECORD_PLAN: &str = r#"[{"steps":3,"step_ms":100,"timeout_ms":10000},{"steps":25,"step_ms":200,"timeout_ms":1500},{"steps":2,"step_ms":100,"timeout_ms":1500}]"#;
const TS_RECORD_PLAN: &str = r#"[{"steps":3,"step_ms":100,"options":{"timeout":10000}},{"steps":25,"step_ms":200,"options":{"timeout":1500}},{"steps":2,"step_ms":100,"options":{"timeout":1500}}]"#;

fn assert_compliant(case: &Case) {
    assert_eq!(
        case.outcome_names(),
        ["result", "timeout", "result"],
        "{}",
        case.describe()
    );
    assert_eq!(case.report["ok"], true, "{}", case.describe());
    assert!(case.rules().is_empty(), "{}", case.describe());
    assert_eq!(case.cancels_seen(), 1, "{}", case.describe());
}

#[test]
fn python_sdk_client_over_stdio_cancels_at_its_timeout() {
    let Some(py) = python_sdk() else { return };
    let dir = scratch("py-stdio");
    let case = against_stdio_serve(python(&py, PY_PLAN), &dir, "timeout=1500", &[]);
    assert_compliant(&case);
}

#[test]
fn python_sdk_client_over_http_closes_the_stream_at_its_timeout() {
    let Some(py) = python_sdk() else { return };
    let dir = scratch("py-http");
    let (case, code) = against_http_serve(python(&py, PY_PLAN), &dir, "timeout=1500");
    assert_compliant(&case);
    assert_eq!(code, 0, "{}", case.describe());
}

/// Known finding: the Python SDK client has no default timeout. A host that promises one
/// (here 1 s) and leaves `read_timeout_seconds` unset waits for the whole call.
#[test]
fn python_sdk_client_without_a_timeout_breaks_a_declared_one() {
    let Some(py) = python_sdk() else { return };
    let dir = scratch("py-no-timeout");
    let plan = r#"[{"steps":15,"step_ms":200}]"#;
    let case = against_stdio_serve(python(&py, plan), &dir, "timeout=1000", &[]);
    assert_eq!(case.outcome_names(), ["result"], "{}", case.describe());
    assert_eq!(case.rules(), ["declared-deadline"], "{}", case.describe());
    assert_eq!(case.cancels_seen(), 0, "{}", case.describe());
}

#[test]
fn typescript_sdk_client_over_stdio_cancels_at_its_timeout() {
    let Some(sdk) = node_ts_sdk() else { return };
    let dir = scratch("ts-stdio");
    let case = against_stdio_serve(typescript(&sdk, TS_PLAN), &dir, "timeout=1500", &[]);
    assert_compliant(&case);
}

#[test]
fn typescript_sdk_client_over_http_closes_the_stream_at_its_timeout() {
    let Some(sdk) = node_ts_sdk() else { return };
    let dir = scratch("ts-http");
    let (case, code) = against_http_serve(typescript(&sdk, TS_PLAN), &dir, "timeout=1500");
    assert_compliant(&case);
    assert_eq!(code, 0, "{}", case.describe());
}

/// Known finding (typescript-sdk #2695): `maxTotalTimeout` shorter than `timeout` is not
/// enforced; the call gives up, and cancels, at `timeout`.
#[test]
fn typescript_sdk_max_total_timeout_below_timeout_is_not_enforced() {
    let Some(sdk) = node_ts_sdk() else { return };
    let dir = scratch("ts-max-below");
    let plan = r#"[{"steps":30,"step_ms":200,"options":{"timeout":4000,"maxTotalTimeout":1000}}]"#;
    let case = against_stdio_serve(typescript(&sdk, plan), &dir, "timeout=4000,max=1000", &[]);
    assert_eq!(case.outcome_names(), ["timeout"], "{}", case.describe());
    let ms = case.outcomes[0]["ms"].as_u64().expect("ms");
    assert!((3500..6000).contains(&ms), "gave up after {ms} ms");
    assert_eq!(case.rules(), ["declared-deadline"], "{}", case.describe());
    assert_eq!(case.cancels_seen(), 1, "{}", case.describe());
}

/// Known finding: when `maxTotalTimeout` fires, the TypeScript SDK tells the application but
/// sends no `notifications/cancelled`, so the server works on.
#[test]
fn typescript_sdk_max_total_timeout_sends_no_cancel() {
    let Some(sdk) = node_ts_sdk() else { return };
    let dir = scratch("ts-max-no-cancel");
    let plan = r#"[{"steps":40,"step_ms":300,"options":{"timeout":1000,"resetTimeoutOnProgress":true,"maxTotalTimeout":2000}},{"steps":5,"step_ms":300,"options":{"timeout":1000,"resetTimeoutOnProgress":true,"maxTotalTimeout":2000}},{"steps":5,"step_ms":300,"options":{"timeout":1000,"resetTimeoutOnProgress":true,"maxTotalTimeout":2000}},{"steps":5,"step_ms":300,"options":{"timeout":1000,"resetTimeoutOnProgress":true,"maxTotalTimeout":2000}}]"#;
    let case = against_stdio_serve(
        typescript(&sdk, plan),
        &dir,
        "timeout=1000,reset,max=2000",
        &[],
    );
    assert_eq!(
        case.outcome_names(),
        ["timeout", "result", "result", "result"],
        "{}",
        case.describe()
    );
    assert!(
        case.outcomes[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("Maximum total timeout")),
        "{}",
        case.describe()
    );
    assert_eq!(case.rules(), ["declared-deadline"], "{}", case.describe());
    assert_eq!(case.cancels_seen(), 0, "{}", case.describe());
}

/// A faulty server (`--mutant respond_after_cancel`: it answers a call after its cancel, as
/// python-sdk #1419 did): the late answer crosses the client's cancel, and the client copes:
/// it stays connected and its next call succeeds. The report names the server's fault and
/// nothing of the client's.
#[test]
fn python_sdk_client_copes_with_a_late_answer_after_its_cancel() {
    let Some(py) = python_sdk() else { return };
    let dir = scratch("py-late-answer");
    let mutant = ["--mutant", "respond_after_cancel"];
    let case = against_stdio_serve(python(&py, PY_PLAN), &dir, "timeout=1500", &mutant);
    assert_eq!(
        case.outcome_names(),
        ["result", "timeout", "result"],
        "{}",
        case.describe()
    );
    assert_eq!(
        case.rules(),
        ["response-after-cancel"],
        "{}",
        case.describe()
    );
}

/// The same clients through `mcp-sim record` in front of the Python SDK's own server: bytes
/// pass unchanged, the trace has both sides, and it is clean.
#[test]
fn clients_through_the_stdio_tap_in_front_of_the_python_sdk_server() {
    let Some(py) = python_sdk() else { return };
    let server = repo().join("tests/peers/python_slow_server.py");
    let tap = |dir: &Path| -> Vec<String> {
        vec![
            "record".into(),
            "--trace".into(),
            dir.join("trace.jsonl").display().to_string(),
            "--report".into(),
            dir.join("report.json").display().to_string(),
            "--".into(),
            py.display().to_string(),
            server.display().to_string(),
        ]
    };
    let dir = scratch("record-py");
    let case = run_client(
        python(&py, PY_RECORD_PLAN)
            .arg("--")
            .arg(MCP_SIM)
            .args(tap(&dir)),
        &dir,
    );
    assert_compliant(&case);
    let sides: std::collections::BTreeSet<Side> =
        case.trace.events.iter().map(|e| e.side).collect();
    assert!(sides.contains(&Side::Client) && sides.contains(&Side::Server));
    if let Some(sdk) = node_ts_sdk() {
        let dir = scratch("record-ts");
        let case = run_client(
            typescript(&sdk, TS_RECORD_PLAN)
                .arg("--")
                .arg(MCP_SIM)
                .args(tap(&dir)),
            &dir,
        );
        assert_compliant(&case);
    }
}

#[test]
fn clients_through_the_http_tap_in_front_of_the_python_sdk_server() {
    let Some(py) = python_sdk() else { return };
    let upstream = Upstream::python_sdk(&py);
    let port = upstream.port;
    let dir = scratch("record-http");
    let tap = [
        "record".into(),
        "--http".into(),
        "127.0.0.1:0".into(),
        "--upstream".into(),
        format!("http://127.0.0.1:{port}"),
        "--trace".into(),
        dir.join("trace.jsonl").display().to_string(),
        "--report".into(),
        dir.join("report.json").display().to_string(),
    ];
    let (case, code) = against_listening(&tap, "/mcp", python(&py, PY_RECORD_PLAN), &dir);
    drop(upstream);
    assert_compliant(&case);
    assert_eq!(code, 0, "{}", case.describe());
}
