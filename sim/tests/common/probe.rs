//! Running `mcp-sim probe --format json` and reading its verdict.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
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

/// A pinned baseline of a peer's findings, `tests/baselines/NAME.txt`.
pub fn baseline(name: &str) -> PathBuf {
    super::repo()
        .join("tests/baselines")
        .join(format!("{name}.txt"))
}

/// The rules the baseline `name` lists.
pub fn listed(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(baseline(name)).expect("the baseline reads");
    let b = mcp_sim::ci::Baseline::parse(&text, mcp_sim::ci::is_rule).expect("a valid baseline");
    b.expected.into_iter().collect()
}

/// Probes a server with [`cancelling_schedule`] of `slow_op` (its arguments `args`) in `era`
/// over every seed of [`super::peer_seeds`]: `target` is `(["--url", URL], [])` or
/// `([], COMMAND)`. Each run must speak `speaks` and meet running work with a cancel, and the
/// baseline `name` is held over the seeds: a MUST finding it does not list fails, and so does
/// a listed finding no seed showed, unless `races` names it with the baseline's family (`name`
/// without `-modern`/`-legacy`): its occurrence is the wall clock's doing. Returns each rule's
/// count of seeds, printed.
pub fn probe_peer(
    name: &str,
    era: &str,
    speaks: &str,
    target: (&[&str], &[&str]),
    args: &str,
    races: &[(&str, &str)],
) -> BTreeMap<String, usize> {
    let expected = listed(name);
    let seeds = super::peer_seeds();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for seed in &seeds {
        let mut argv = vec!["--seed", seed, "--era", era];
        argv.extend(cancelling_schedule("slow_op", args));
        argv.extend_from_slice(target.0);
        let (_, v) = probe_json(&argv, target.1);
        assert_eq!(v["era"], speaks, "{name} {era} seed {seed}: {v:#}");
        assert!(
            v["coverage"]["cancels_met_running_work"].as_u64() > Some(0),
            "{name} {era} seed {seed}: {v:#}"
        );
        let mut rules: Vec<(String, String)> = v["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .map(|x| {
                (
                    x["rule"].as_str().unwrap_or("?").to_owned(),
                    x["level"].as_str().unwrap_or("?").to_owned(),
                )
            })
            .collect();
        rules.sort();
        rules.dedup_by(|a, b| a.0 == b.0);
        for (rule, level) in &rules {
            assert!(
                level != "MUST" || expected.contains(rule),
                "{name} {era} seed {seed}: {rule} (MUST) is not in the baseline: {v:#}"
            );
            *seen.entry(rule.clone()).or_default() += 1;
        }
    }
    let family = name.trim_end_matches("-modern").trim_end_matches("-legacy");
    for rule in &expected {
        let race = races.contains(&(family, rule.as_str()));
        assert!(
            race || seen.contains_key(rule),
            "{name} {era}: the baseline lists {rule}, which no seed of {seeds:?} showed"
        );
    }
    eprintln!(
        "{name} ({era}, spoke {speaks}) over {} seed(s): {seen:?}",
        seeds.len()
    );
    seen
}
