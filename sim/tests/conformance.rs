//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned, installed
//! into the build folder on first use with the Node.js 22 it needs; see `common::peers`)
//! against `mcp-sim serve --http`: one process of each configuration serves every scenario
//! that needs no fixture tool, in order and then again, so that whatever one client (of
//! either era) did to the process shows in the next one's checks.
//!
//! Every check must pass, except those the suite itself marks "Not testable" (they need
//! fixture tools such as `test_missing_capability`, which the reference server does not
//! have: it serves `slow_op` only).

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use common::peers::conformance_suite;
use common::serve::{scratch, Listening};

/// The scenarios that need no fixture tool, in the order they run, with the revision each is
/// asked in (`None`: the suite's default for the scenario).
const SCENARIOS: [(&str, Option<&str>); 9] = [
    ("server-initialize", None),
    ("ping", None),
    ("server-session-lifecycle", None),
    ("tools-list", None),
    ("server-stateless", None),
    ("http-header-validation", None),
    ("dns-rebinding-protection", None),
    ("tools-list", Some("2026-07-28")),
    ("dns-rebinding-protection", Some("2026-07-28")),
];

/// The 2026-07-28 scenarios, for the modern-only server.
const MODERN_SCENARIOS: [(&str, Option<&str>); 4] = [
    ("server-stateless", None),
    ("http-header-validation", None),
    ("tools-list", Some("2026-07-28")),
    ("dns-rebinding-protection", Some("2026-07-28")),
];

/// One check of a run: its id, status and message.
struct Check {
    id: String,
    status: String,
    message: String,
    untestable: bool,
}

/// Runs one scenario against `url`; its checks (from the `checks.json` the suite wrote).
fn run_scenario(
    suite: &(std::path::PathBuf, std::path::PathBuf),
    url: &str,
    scenario: &str,
    spec: Option<&str>,
    out: &Path,
) -> Vec<Check> {
    let (node, cli) = suite;
    let _ = std::fs::remove_dir_all(out);
    let mut cmd = Command::new(node);
    cmd.arg(cli)
        .args(["server", "--url", url, "--scenario", scenario, "-o"])
        .arg(out);
    if let Some(v) = spec {
        cmd.args(["--spec-version", v]);
    }
    let run = cmd.output().expect("the conformance suite runs");
    let dir = std::fs::read_dir(out)
        .expect("the suite wrote its output folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.join("checks.json").exists())
        .unwrap_or_else(|| {
            panic!(
                "{scenario}: no checks.json (exit {:?})\n{}\n{}",
                run.status.code(),
                String::from_utf8_lossy(&run.stdout),
                String::from_utf8_lossy(&run.stderr)
            )
        });
    let text = std::fs::read_to_string(dir.join("checks.json")).expect("read checks.json");
    let checks: Vec<Value> = serde_json::from_str(&text).expect("checks.json is a JSON array");
    checks
        .iter()
        .map(|c| Check {
            id: c["id"].as_str().unwrap_or("?").to_owned(),
            status: c["status"].as_str().unwrap_or("?").to_owned(),
            message: c["errorMessage"].as_str().unwrap_or_default().to_owned(),
            untestable: c["details"]["untestable"] == Value::Bool(true)
                || c["errorMessage"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Not testable")),
        })
        .collect()
}

/// Runs `scenarios` twice against one `serve --http` with `extra` arguments; panics naming
/// every check that failed, with its scenario and round. Prints the counts per scenario.
fn suite_passes(name: &str, extra: &[&str], scenarios: &[(&str, Option<&str>)]) {
    let Some(suite) = conformance_suite() else {
        return;
    };
    let dir = scratch(&format!("conformance-{name}"));
    let mut args: Vec<String> = ["serve", "--http", "127.0.0.1:0", "--max-seconds", "900"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let serve = Listening::start(&args);
    let url = serve.url.clone();
    let mut failures = Vec::new();
    let mut passed = 0;
    for round in 1..=2 {
        for (i, (scenario, spec)) in scenarios.iter().enumerate() {
            let out = dir.join(format!("r{round}-{i}-{scenario}"));
            let checks = run_scenario(&suite, &url, scenario, *spec, &out);
            assert!(!checks.is_empty(), "{scenario} ran no check");
            let mut counts = std::collections::BTreeMap::<&str, usize>::new();
            for c in &checks {
                *counts.entry(c.status.as_str()).or_default() += 1;
                match c.status.as_str() {
                    "SUCCESS" | "INFO" | "SKIPPED" => passed += 1,
                    _ if c.untestable => {}
                    _ => failures.push(format!(
                        "round {round}, {scenario} {}: {} {}: {}",
                        spec.unwrap_or(""),
                        c.status,
                        c.id,
                        c.message
                    )),
                }
            }
            eprintln!(
                "{name} round {round}: {scenario} {}: {counts:?}",
                spec.unwrap_or("")
            );
        }
    }
    serve.stop();
    assert!(passed > 0, "no check passed");
    assert!(
        failures.is_empty(),
        "serve {extra:?} fails the conformance suite:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_dual_era_server_passes_the_conformance_suite_in_one_process() {
    suite_passes("dual", &[], &SCENARIOS);
}

#[test]
fn the_modern_only_server_passes_the_2026_scenarios() {
    suite_passes("modern", &["--era", "modern"], &MODERN_SCENARIOS);
}
