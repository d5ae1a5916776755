//! `mcp-sim check-proxy --format json` run from a test: the exit code, the verdict and the
//! two-hop trace, with the one thing every intermediary test holds: the judge never blames
//! mcp-sim's reference client or server (no `judge_defects`, no internal line on stderr).

use std::path::Path;
use std::process::Command;

use mcp_sim::trace::Trace;
use serde_json::Value;

/// The schedule: four calls of the reference tool, every one cancelled (a seed's draw of a
/// smaller share may cancel none); the two calibration calls run to their result.
#[allow(dead_code)] // not every test binary that has `common` uses it
pub const SCHEDULE: &[&str] = &[
    "--calls",
    "4",
    "--cancel-percent",
    "100",
    "--max-seconds",
    "60",
];

/// `mcp-sim check-proxy --format json --trace TRACE ARGS -- INTERMEDIARY`.
#[allow(dead_code)] // not every test binary that has `common` uses it
pub fn check_proxy(args: &[&str], intermediary: &[&str], trace: &Path) -> (i32, Value, Trace) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["check-proxy", "--format", "json", "--trace"])
        .arg(trace)
        .args(args)
        .arg("--")
        .args(intermediary)
        .output()
        .expect("mcp-sim runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let verdict: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON verdict ({e}):\n{stdout}\nstderr:\n{stderr}"));
    assert!(
        verdict.get("judge_defects").is_none() && !stderr.contains("internal:"),
        "a finding against a reference peer:\n{verdict:#}\n{stderr}"
    );
    let text = std::fs::read_to_string(trace).expect("the trace was written");
    let trace = Trace::from_jsonl(&text).expect("a valid two-hop trace");
    (out.status.code().unwrap_or(-1), verdict, trace)
}
