//! `mcp-sim probe` against a real server from another ecosystem: the Python SDK's `MCPServer`
//! (PyPI `mcp` 2.3.0) with a slow tool that reports progress (`tests/peers/python_slow_server.py`).
//!
//! The SDK installs itself on first use into a virtual environment in the build folder
//! (`common::peers`); without `python3` the test is skipped, or fails under `CI=true`.
//! `MCP_SIM_SKIP_PYTHON=1` skips it.

mod common;

use std::process::Command;

use mcp_sim::trace::{EventKind, Trace};

#[test]
fn probe_drives_the_python_sdk_server() {
    let Some(python) = common::peers::python_sdk() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("mcp-sim-probe-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let trace_path = dir.join("trace.jsonl");
    let server = common::repo().join("tests/peers/python_slow_server.py");
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--seed", "1", "--calls", "3", "--tool", "slow_op"])
        .args(["--args", r#"{"steps":4,"step_ms":100}"#])
        // The first calls wait for the interpreter to import the SDK: about 1.2 s, over 3 s on
        // a loaded machine. The run ends once every call has its outcome, so the wide timeout
        // costs nothing when the server is quick.
        .args(["--timeout-ms", "20000", "--max-total-ms", "30000"])
        .args(["--max-seconds", "45", "--drain-ms", "1200"])
        .arg("--trace")
        .arg(&trace_path)
        .arg("--")
        .arg(&python)
        .arg(&server)
        .output()
        .expect("mcp-sim runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the Python SDK is clean\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("verdict: clean (exit 0)"),
        "report:\n{stdout}"
    );
    let text = std::fs::read_to_string(&trace_path).expect("the probe wrote its trace");
    let trace = Trace::from_jsonl(&text).expect("the trace reads back");
    let requests = common::probe::requests_sent(&trace);
    let outcomes = trace
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Outcome { .. }))
        .count();
    // The start-up check, two calibration calls, three calls and a barrier per cancel.
    assert!(requests >= 6, "the requests were sent:\n{text}");
    assert_eq!(outcomes, requests, "every request has one outcome:\n{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn probe_exits_2_when_the_server_cannot_start() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--calls", "1", "--", "/nonexistent/mcp-server"])
        .output()
        .expect("mcp-sim runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot start"), "stderr:\n{stderr}");
}

#[test]
fn probe_exits_2_on_bad_arguments() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--args", "[1]", "--", "true"])
        .output()
        .expect("mcp-sim runs");
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--calls", "2"])
        .output()
        .expect("mcp-sim runs");
    assert_eq!(
        out.status.code(),
        Some(2),
        "no server command is a usage error"
    );
}
