//! `mcp-sim probe` against a real server from another ecosystem: the TypeScript SDK v2's
//! `McpServer` (npm `@modelcontextprotocol/server` 2.4.0) over stdio, with a slow tool that
//! reports progress and stops on the abort signal as the SDK's guide shows
//! (`tests/peers/ts/ts_slow_server.mjs`).
//!
//! The trace the probe writes is judged by `mcp-sim check-trace --format json`, and the set of
//! rules the oracle reports is pinned: a change in either direction (a finding gone, or a new
//! one) fails the test, naming what moved.
//!
//! The SDK installs itself on first use into the build folder (`common::peers`); without
//! `node` (20 or later) or `npm` the test is skipped, or fails under `CI=true`.
//! `MCP_SIM_SKIP_NODE=1` skips it.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use mcp_sim::trace::{EventKind, Trace};

/// Calls per run (after the probe's start-up check and two calibration calls).
const CALLS: usize = 6;
/// `slow_op` arguments: calls of about a second, so the calibrated cancels (a tenth to two
/// fifths into a call) always meet a handler in the middle of a step.
const TOOL_ARGS: &str = r#"{"steps":4,"step_ms":250}"#;
/// Seeds whose schedules cancel some of the calls and let others finish.
const SEEDS: [u64; 3] = [1, 2, 3];

/// The rules the oracle reports for the TypeScript SDK on each of [`SEEDS`]:
///
/// - `response-after-cancel`: the SDK aborts `ctx.mcpReq.signal` on `notifications/cancelled`
///   and drops the handler's result, but the handler's step runs on and the progress it then
///   reports with `ctx.mcpReq.notify` is sent after the cancellation, after the answer to the
///   `tools/list` the probe wrote right behind the cancel (the barrier: certain, whatever the
///   timing).
const KNOWN_FINDINGS: &[&str] = &["response-after-cancel"];

/// What one seed's run gave.
struct Run {
    seed: u64,
    trace_path: PathBuf,
    trace: Trace,
    verdict: serde_json::Value,
}

impl Run {
    fn rules(&self) -> BTreeSet<String> {
        self.verdict["violations"]
            .as_array()
            .expect("check-trace JSON has a violations array")
            .iter()
            .map(|v| {
                v["rule"]
                    .as_str()
                    .expect("a violation names its rule")
                    .to_owned()
            })
            .collect()
    }

    fn outcomes(&self) -> Vec<&'static str> {
        self.trace
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Outcome { outcome, .. } => Some(outcome.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Probes the server with one seed, then judges the trace file with `check-trace`.
fn probe_and_judge(node: &Path, server: &Path, seed: u64, dir: &Path) -> Run {
    let trace_path = dir.join(format!("seed-{seed}.jsonl"));
    let seed_text = seed.to_string();
    let calls = CALLS.to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--seed", &seed_text, "--calls", &calls])
        .args(["--tool", "slow_op", "--args", TOOL_ARGS])
        .args(["--cancel-percent", "50"])
        .args(["--timeout-ms", "20000", "--max-total-ms", "30000"])
        .args(["--max-seconds", "60", "--drain-ms", "1500"])
        .arg("--trace")
        .arg(&trace_path)
        .arg("--")
        .arg(node)
        .arg(server)
        .output()
        .expect("mcp-sim probe runs");
    let report = format!(
        "seed {seed}: probe exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&trace_path)
        .unwrap_or_else(|e| panic!("the probe wrote no trace ({e})\n{report}"));
    let trace = Trace::from_jsonl(&text)
        .unwrap_or_else(|e| panic!("the trace does not read back ({e})\n{report}"));

    let check = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["check-trace", "--format", "json"])
        .arg(&trace_path)
        .output()
        .expect("mcp-sim check-trace runs");
    let verdict: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap_or_else(|e| {
        panic!(
            "check-trace printed no JSON verdict ({e}), exit {:?}\nstdout:\n{}\nstderr:\n{}",
            check.status.code(),
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        )
    });
    Run {
        seed,
        trace_path,
        trace,
        verdict,
    }
}

#[test]
fn typescript_sdk_findings_match_the_baseline() {
    let Some(sdk) = common::peers::node_ts_sdk() else {
        return;
    };
    let server = sdk.dir.join("ts_slow_server.mjs");
    let dir = std::env::temp_dir().join(format!("mcp-sim-probe-ts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    // The seeds run side by side: each run waits on the server's clock, not on the CPU.
    let runs: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> = SEEDS
            .iter()
            .map(|&seed| {
                let (node, server, dir) = (&sdk.node, &server, &dir);
                s.spawn(move || probe_and_judge(node, server, seed, dir))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a probe run panicked"))
            .collect()
    });

    let known: BTreeSet<String> = KNOWN_FINDINGS.iter().map(|r| (*r).to_owned()).collect();
    let mut moved = Vec::new();
    for run in &runs {
        let outcomes = run.outcomes();
        let text = run.trace.to_jsonl();
        let requests = common::probe::requests_sent(&run.trace);
        assert_eq!(
            outcomes.len(),
            requests,
            "seed {}: every request has one outcome ({outcomes:?}):\n{text}",
            run.seed
        );
        assert!(
            outcomes.contains(&"cancelled") && outcomes.contains(&"result"),
            "seed {}: the schedule cancels some calls and lets others finish ({outcomes:?}):\n{text}",
            run.seed
        );
        let rules = run.rules();
        if rules != known {
            moved.push(format!(
                "seed {}: newly reported {:?}, no longer reported {:?}\n  verdict: {}\n  trace: {}",
                run.seed,
                rules.difference(&known).collect::<Vec<_>>(),
                known.difference(&rules).collect::<Vec<_>>(),
                run.verdict,
                run.trace_path.display()
            ));
        }
    }
    assert!(
        moved.is_empty(),
        "the TypeScript SDK findings baseline moved (known: {KNOWN_FINDINGS:?}); if the change \
         is real, update KNOWN_FINDINGS here and the TypeScript SDK table in README.md\n{}",
        moved.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
