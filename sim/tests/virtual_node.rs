//! Real Node.js servers inside the simulation: `mcp-sim sweep --virtual` and `replay --virtual`
//! run the pinned TypeScript SDK v1 (1.32.2) and v2 (2.4.0) servers, `server-everything`
//! 2026.8.31 and FastMCP for TypeScript 4.20.16, on stdio and (where they serve it)
//! Streamable HTTP, under the virtual clock. Each must give the verdict its live baseline
//! pins, the same digests on every run, and a failing seed whose replay reprints its digest; a
//! raw CommonJS server shows the shim's seeding and names each escape as `not-replayable`.
//!
//! The SDKs install themselves on first use (`common::peers`), and the shim its pinned fake
//! timers (npm ci); without `node` 20 or `npm` the tests skip, or fail under `CI=true`.

mod common;

use common::peers::{node_fastmcp, node_ts_sdk, node_ts_sdk_v1, NodeSdk};
use common::virtual_sweep::{
    assert_all_judged, assert_caught_and_replayed, baseline, rules, sweep,
};

use std::collections::BTreeSet;

const SLOW: &str = r#"{"steps":5,"step_ms":1000}"#;
const LONG_RUNNING_ARGS: &str = r#"{"duration":1.2,"steps":6}"#;

fn words(parts: &[String]) -> Vec<&str> {
    parts.iter().map(String::as_str).collect()
}

fn node(sdk: &NodeSdk) -> String {
    sdk.node.display().to_string()
}

fn in_sdk(sdk: &NodeSdk, file: &str) -> String {
    sdk.dir.join(file).display().to_string()
}

#[test]
fn ts_sdk_v1_server_is_clean_and_replays_byte_for_byte() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let server = [node(&sdk), in_sdk(&sdk, "ts_v1_slow_server.mjs")];
    let flags = ["--seeds", "0..16", "--args", SLOW, "--verify"];
    let (code, first) = sweep(&flags, &words(&server), &[]);
    assert_eq!(code, 0, "clean, as its live baseline: {first:#}");
    assert_eq!(rules(&first), baseline("ts-sdk-v1-server.txt"), "{first:#}");
    assert_eq!(
        first["eras"]["2025-11-25"], 16,
        "it speaks the legacy era only"
    );
    assert_all_judged(&first);
    assert!(
        first["outcomes"]["cancelled"].as_u64() > Some(0),
        "{first:#}"
    );
    let (_, second) = sweep(&flags, &words(&server), &[]);
    assert_eq!(first["traces"], second["traces"], "the same digests");
    // Killed and restarted twice between calls: each process a fresh one, every run clean.
    let restarts = [
        "--seeds",
        "0..6",
        "--args",
        SLOW,
        "--verify",
        "--restarts",
        "2",
    ];
    let (code, totals) = sweep(&restarts, &words(&server), &[]);
    assert_eq!(code, 0, "{totals:#}");
    assert_all_judged(&totals);
}

#[test]
fn ts_sdk_v2_server_gives_its_live_verdicts_in_both_eras() {
    let Some(sdk) = node_ts_sdk() else { return };
    let server = [node(&sdk), in_sdk(&sdk, "ts_slow_server.mjs")];
    // 2026-07-28 (auto): the progress of a step that ended after the cancel goes out, as the
    // live probe finds (sim/tests/probe_typescript.rs), a MUST there.
    let flags = ["--seeds", "0..10", "--args", SLOW, "--verify"];
    let (code, modern) = sweep(&flags, &words(&server), &[]);
    assert_eq!(code, 1, "{modern:#}");
    assert_eq!(
        rules(&modern),
        BTreeSet::from(["response-after-cancel".to_string()]),
        "{modern:#}"
    );
    assert_eq!(modern["eras"]["2026-07-28"], 10, "{modern:#}");
    assert!(modern.get("not_replayable").is_none(), "{modern:#}");
    assert_caught_and_replayed(&modern, "response-after-cancel");
    let legacy = ["--seeds", "0..10", "--args", SLOW, "--era", "legacy"];
    let (code, totals) = sweep(&legacy, &words(&server), &[]);
    assert_eq!(code, 0, "a SHOULD in the legacy era: {totals:#}");
    assert_eq!(
        rules(&totals),
        baseline("ts-sdk-v2-legacy-server.txt"),
        "{totals:#}"
    );
    assert_all_judged(&totals);
}

#[test]
fn server_everything_gives_its_live_baselines_on_both_transports() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let everything = in_sdk(
        &sdk,
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    let tool = ["--tool", "trigger-long-running-operation"];
    let stdio = [node(&sdk), everything.clone(), "stdio".into()];
    let mut flags = vec!["--seeds", "0..10", "--args", LONG_RUNNING_ARGS, "--verify"];
    flags.extend(tool);
    let (code, totals) = sweep(&flags, &words(&stdio), &[]);
    assert_eq!(code, 0, "a SHOULD only: {totals:#}");
    assert_eq!(
        rules(&totals),
        baseline("server-everything-stdio.txt"),
        "{totals:#}"
    );
    assert_all_judged(&totals);
    // Over Streamable HTTP (the port it would bind is only a name under the shim): the 400
    // with `"id": null` to `server/discover`, and the foreign Origin and Host it serves.
    let http = [node(&sdk), everything, "streamableHttp".into()];
    let mut flags = vec![
        "--transport",
        "http",
        "--seeds",
        "0..6",
        "--args",
        LONG_RUNNING_ARGS,
        "--verify",
    ];
    flags.extend(tool);
    let (code, totals) = sweep(&flags, &words(&http), &[("PORT", "3001")]);
    assert_eq!(code, 1, "{totals:#}");
    assert_eq!(
        rules(&totals),
        baseline("server-everything-http.txt"),
        "{totals:#}"
    );
    assert!(totals.get("not_replayable").is_none(), "{totals:#}");
}

#[test]
fn fastmcp_server_gives_its_live_baselines_on_both_transports() {
    let Some(sdk) = node_fastmcp() else { return };
    let script = in_sdk(&sdk, "fastmcp_slow_server.mjs");
    let stdio = [node(&sdk), script.clone()];
    let flags = ["--seeds", "0..8", "--args", SLOW, "--verify"];
    let (code, totals) = sweep(&flags, &words(&stdio), &[]);
    assert_eq!(code, 0, "{totals:#}");
    assert_eq!(
        rules(&totals),
        baseline("fastmcp-server-stdio.txt"),
        "{totals:#}"
    );
    assert_all_judged(&totals);
    let http = [node(&sdk), script, "--http".into(), "8000".into()];
    let flags = [
        "--transport",
        "http",
        "--seeds",
        "0..6",
        "--args",
        SLOW,
        "--verify",
    ];
    let (code, totals) = sweep(&flags, &words(&http), &[]);
    assert_eq!(code, 1, "{totals:#}");
    assert_eq!(
        rules(&totals),
        baseline("fastmcp-server-http.txt"),
        "{totals:#}"
    );
    assert!(totals.get("not_replayable").is_none(), "{totals:#}");
    // Without the rebinding checks, nothing to find.
    let mut quiet = flags.to_vec();
    quiet.push("--no-origin-check");
    let (code, totals) = sweep(&quiet, &words(&http), &[]);
    assert_eq!(code, 0, "{totals:#}");
}

#[test]
fn commonjs_programs_are_seeded_and_their_escapes_named() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let script = common::repo()
        .join("tests/peers/node_raw_server.cjs")
        .display()
        .to_string();
    let args = r#"{"steps":4,"step_ms":500}"#;
    let clean = [node(&sdk), script.clone()];
    let flags = ["--seeds", "0..8", "--args", args, "--verify"];
    let (code, totals) = sweep(&flags, &words(&clean), &[]);
    assert_eq!(
        code, 0,
        "its clock, draws and ids follow the seed: {totals:#}"
    );
    assert_all_judged(&totals);
    for (mode, says) in [
        ("subprocess", "a child process"),
        ("socket", "a real socket connected"),
        ("worker", "a worker thread"),
        ("pid", "two runs of the seed differ"),
    ] {
        let escaping = [node(&sdk), script.clone(), mode.into()];
        let (code, totals) = sweep(&flags, &words(&escaping), &[]);
        assert_eq!(code, 3, "{mode}: not-replayable, never a pass: {totals:#}");
        let runs = totals["not_replayable"].as_array().expect("not_replayable");
        assert!(!runs.is_empty(), "{mode}: {totals:#}");
        for run in runs {
            let why = run["why"].as_str().unwrap_or_default();
            assert!(why.contains(says), "{mode}: {why}");
            if mode != "pid" {
                assert!(
                    why.contains("node_raw_server.cjs:"),
                    "{mode} names where: {why}"
                );
            }
        }
        assert!(
            rules(&totals).is_empty(),
            "{mode}: never a finding: {totals:#}"
        );
    }
}

/// Races by seed in Node.js: a seeded service time (whole ms: the loop busy, the timers due
/// meanwhile fired late, before the input) and tie order leave every run replayable, change
/// the runs, and leave the v1 server clean, as it is without them.
#[test]
fn service_time_runs_are_replayable_and_keep_the_verdict() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let server = [node(&sdk), in_sdk(&sdk, "ts_v1_slow_server.mjs")];
    let base = [
        "--seeds",
        "0..8",
        "--timeout-ms",
        "1000",
        "--args",
        r#"{"steps":5,"step_ms":200}"#,
    ];
    let (code, plain) = sweep(&base, &words(&server), &[]);
    assert_eq!(code, 0, "{plain:#}");
    let busy: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--service-us", "50000", "--shuffle-ties", "--verify"])
        .collect();
    let (code, first) = sweep(&busy, &words(&server), &[]);
    assert_eq!(code, 0, "{first:#}");
    assert!(rules(&first).is_empty(), "{first:#}");
    assert!(first.get("not_replayable").is_none(), "{first:#}");
    assert_ne!(
        first["traces"], plain["traces"],
        "the costs change the runs"
    );
}
