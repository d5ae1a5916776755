//! Running `mcp-sim probe --format json` and reading its verdict.

#![allow(dead_code)]

use std::process::Command;

use mcp_sim::trace::{EventKind, Trace};
use serde_json::Value;

/// Calls of about 1.2 s, half of them cancelled: the schedule the probe tests share.
pub const SLOW: &[&str] = &[
    "--calls",
    "4",
    "--args",
    r#"{"steps":6,"step_ms":200}"#,
    "--cancel-percent",
    "50",
    "--timeout-ms",
    "5000",
    "--max-total-ms",
    "20000",
    "--max-seconds",
    "30",
    "--drain-ms",
    "800",
];

/// Runs `mcp-sim probe --format json ARGS [-- SERVER...]`; returns the exit code and the
/// verdict object, or panics with the probe's output when it printed no single JSON object.
pub fn probe_json(args: &[&str], server: &[&str]) -> (i32, Value) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mcp-sim"));
    command.args(["probe", "--format", "json"]).args(args);
    if !server.is_empty() {
        command.arg("--").args(server);
    }
    let out = command.output().expect("mcp-sim runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let verdict: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON verdict ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), verdict)
}

/// How many requests the client sent in `trace` (messages with an id).
pub fn requests_sent(trace: &Trace) -> usize {
    trace
        .events
        .iter()
        .filter(|e| match &e.kind {
            EventKind::Send(w) => w.msg.as_ref().is_some_and(|m| m.get("id").is_some()),
            _ => false,
        })
        .count()
}

/// The probe's schedule the peer tests share, with `args` for the tool: calls of about 1.2 s,
/// every one cancelled, so that each seed exercises four cancels (a finding that shows on some
/// cancels and not others, such as progress crossing a cancel, then shows in every run).
pub fn cancelling_schedule<'a>(tool: &'a str, args: &'a str) -> Vec<&'a str> {
    vec![
        "--tool",
        tool,
        "--args",
        args,
        "--calls",
        "4",
        "--cancel-percent",
        "100",
        "--timeout-ms",
        "5000",
        "--max-total-ms",
        "20000",
        "--max-seconds",
        "40",
        "--drain-ms",
        "800",
    ]
}
