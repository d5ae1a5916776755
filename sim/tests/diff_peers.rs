//! `mcp-sim diff` on real servers, installed at pinned versions (`common::peers`), each probed
//! over stdio with the schedule of `legacy_peers.rs` (`common::probe::cancelling_schedule`:
//! four calls of about 1.2 s, each cancelled in its first two fifths) and its trace written:
//!
//! - **the noise floor**: the same server probed twice on one seed (Python SDK 2.3.0,
//!   TypeScript SDK v1 1.32.2, `server-everything` 2026.8.31) shows no change at all, neither
//!   in a call's behaviour nor in the verdicts;
//! - **known differences**: TypeScript SDK v1 1.32.2 against v2 2.4.0, both in the legacy era,
//!   shows exactly `response-after-cancel` newly broken (v2 sends progress after the cancel);
//!   Python SDK 1.30.0 against TypeScript SDK v1 shows its code-0 answers to the cancels gone
//!   and that rule fixed.
//!
//! Each case runs the seeds of `MCP_SIM_PEER_SEEDS` (`A..B` or a list, default `1`);
//! `MCP_SIM_PEER_SEEDS=1..21` is the 20-seed sweep.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::peers::{node_ts_sdk, node_ts_sdk_v1, python_sdk, python_sdk_v1, NodeSdk};
use common::repo;
use common::serve::scratch;
use serde_json::Value;

/// The slow tool's arguments, as `legacy_peers.rs` calls it.
const SLOW_OP: &str = r#"{"steps":6,"step_ms":200}"#;

/// Probes `server` on `seed` in `era`, writing its trace to `out`.
fn probe(seed: &str, era: &str, tool: Option<(&str, &str)>, server: &[String], out: &Path) {
    let (tool, args) = tool.unwrap_or(("slow_op", SLOW_OP));
    let schedule = common::probe::cancelling_schedule(tool, args);
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--seed", seed, "--era", era, "--trace"])
        .arg(out)
        .args(&schedule)
        .args(["--format", "json", "--"])
        .args(server)
        .output()
        .expect("mcp-sim runs");
    let code = output.status.code();
    assert!(
        matches!(code, Some(0 | 1)) && out.exists(),
        "probe exited {code:?}:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `mcp-sim diff --format json BASE NEW`: its exit code and JSON.
fn diff(base: &Path, new: &Path) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["diff", "--format", "json"])
        .args([base, new])
        .output()
        .expect("mcp-sim runs");
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap_or(-1), json)
}

/// The text of the same diff, for failure messages.
fn diff_text(base: &Path, new: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .arg("diff")
        .args([base, new])
        .output()
        .expect("mcp-sim runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn rules(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap().to_owned())
        .collect()
}

/// The changes of every pair, as `class: base -> new`.
fn changes(v: &Value) -> Vec<String> {
    v["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["changes"].as_array().unwrap().clone())
        .map(|c| format!("{}: {} -> {}", c["class"], c["base"], c["new"]))
        .collect()
}

fn node(sdk: &NodeSdk, script: &str) -> Vec<String> {
    vec![
        sdk.node.display().to_string(),
        sdk.dir.join(script).display().to_string(),
    ]
}

/// Probes `server` twice per seed; the two runs must show no change.
fn noise_floor(name: &str, tool: Option<(&str, &str)>, server: &[String]) {
    let dir = scratch(&format!("diff-noise-{name}"));
    for seed in common::peer_seeds() {
        let (a, b) = (
            dir.join(format!("{seed}-a.jsonl")),
            dir.join(format!("{seed}-b.jsonl")),
        );
        probe(&seed, "auto", tool, server, &a);
        probe(&seed, "auto", tool, server, &b);
        let (code, v) = diff(&a, &b);
        let why = format!("{name} seed {seed}:\n{}", diff_text(&a, &b));
        assert_eq!(code, 0, "{why}");
        assert_eq!(v["aligned_share"], 1.0, "{why}");
        assert!(changes(&v).is_empty(), "{why}");
        assert!(
            rules(&v, "newly_broken").is_empty() && rules(&v, "fixed").is_empty(),
            "{why}"
        );
    }
}

#[test]
fn the_same_python_sdk_2_server_probed_twice_shows_no_change() {
    let Some(py) = python_sdk() else { return };
    let script = repo().join("tests/peers/python_slow_server.py");
    noise_floor(
        "python-2",
        None,
        &[py.display().to_string(), script.display().to_string()],
    );
}

#[test]
fn the_same_typescript_sdk_v1_server_probed_twice_shows_no_change() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    noise_floor("ts-v1", None, &node(&sdk, "ts_v1_slow_server.mjs"));
}

#[test]
fn the_same_server_everything_probed_twice_shows_no_change() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let script: PathBuf = sdk
        .dir
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let server = [
        sdk.node.display().to_string(),
        script.display().to_string(),
        "stdio".into(),
    ];
    let tool = (
        "trigger-long-running-operation",
        r#"{"duration":1.2,"steps":6}"#,
    );
    noise_floor("everything", Some(tool), &server);
}

#[test]
fn typescript_sdk_v1_against_v2_in_the_legacy_era_newly_breaks_response_after_cancel() {
    let (Some(v1), Some(v2)) = (node_ts_sdk_v1(), node_ts_sdk()) else {
        return;
    };
    let dir = scratch("diff-ts-v1-v2");
    for seed in common::peer_seeds() {
        let (a, b) = (
            dir.join(format!("{seed}-v1.jsonl")),
            dir.join(format!("{seed}-v2.jsonl")),
        );
        probe(
            &seed,
            "legacy",
            None,
            &node(&v1, "ts_v1_slow_server.mjs"),
            &a,
        );
        probe(&seed, "legacy", None, &node(&v2, "ts_slow_server.mjs"), &b);
        let (code, v) = diff(&a, &b);
        let why = format!("seed {seed}:\n{}", diff_text(&a, &b));
        assert_eq!(
            rules(&v, "newly_broken"),
            ["response-after-cancel"],
            "{why}"
        );
        assert!(rules(&v, "fixed").is_empty(), "{why}");
        assert_eq!(v["aligned_share"], 1.0, "{why}");
        assert_eq!(code, 1, "{why}");
    }
}

#[test]
fn python_sdk_1_against_typescript_sdk_v1_shows_the_code_0_answers_gone() {
    let (Some(py), Some(ts)) = (python_sdk_v1(), node_ts_sdk_v1()) else {
        return;
    };
    let dir = scratch("diff-py1-ts1");
    let python = [
        py.display().to_string(),
        repo()
            .join("tests/peers/python1/slow_server.py")
            .display()
            .to_string(),
    ];
    for seed in common::peer_seeds() {
        let (a, b) = (
            dir.join(format!("{seed}-py.jsonl")),
            dir.join(format!("{seed}-ts.jsonl")),
        );
        probe(&seed, "auto", None, &python, &a);
        probe(&seed, "auto", None, &node(&ts, "ts_v1_slow_server.mjs"), &b);
        let (code, v) = diff(&a, &b);
        let why = format!("seed {seed}:\n{}", diff_text(&a, &b));
        let gone: Vec<String> = changes(&v)
            .into_iter()
            .filter(|c| c.contains("answered with error 0"))
            .collect();
        assert!(!gone.is_empty(), "{why}");
        assert!(
            gone.iter()
                .all(|c| c.ends_with("-> \"cancelled, unanswered\"")),
            "{why}"
        );
        assert_eq!(rules(&v, "fixed"), ["response-after-cancel"], "{why}");
        assert!(rules(&v, "newly_broken").is_empty(), "{why}");
        assert_eq!(code, 0, "a fix is no regression: {why}");
    }
}
