//! Real Python servers inside the simulation: `mcp-sim sweep --virtual` and `replay --virtual`
//! run the pinned Python SDK servers (2.3.0 on stdio and Streamable HTTP, 1.30.0 on stdio)
//! and this repository's Python mutants under the virtual clock, and must give the verdicts
//! their live baselines pin, the same digests on every run, the right rule for each mutant
//! with a replay line that reprints its digest, and `not-replayable` (exit 3) for a program
//! that escapes the shim.
//!
//! The SDKs install themselves on first use (`common::peers`); without `python3` the tests
//! skip, or fail under `CI=true`. The runs' outcomes do not depend on the wall clock: the
//! program's clock is virtual (only a worker thread past its 10 s bound would).

mod common;

use common::virtual_sweep::{
    assert_all_judged, assert_caught_and_replayed, baseline, rules, sweep,
};

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const SLOW: &str = r#"{"steps":5,"step_ms":1000}"#;

fn script(path: &str) -> String {
    common::repo().join(path).display().to_string()
}

fn python(py: &Path) -> String {
    py.display().to_string()
}

#[test]
fn sdk2_stdio_server_is_clean_and_replays_byte_for_byte_whatever_the_hash_seed() {
    let Some(py) = common::peers::python_sdk() else {
        return;
    };
    let server = [python(&py), script("tests/peers/python_slow_server.py")];
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let flags = ["--seeds", "0..30", "--args", SLOW, "--verify"];
    let (code, first) = sweep(&flags, &server, &[("PYTHONHASHSEED", "1")]);
    assert_eq!(code, 0, "clean, as its live probe: {first:#}");
    assert_eq!(first["runs"], 30);
    assert!(rules(&first).is_empty(), "{first:#}");
    assert_all_judged(&first);
    assert!(
        first["outcomes"]["cancelled"].as_u64() > Some(0),
        "{first:#}"
    );
    let (_, second) = sweep(&flags, &server, &[("PYTHONHASHSEED", "2")]);
    assert_eq!(first["traces"], second["traces"], "the same digests");
    assert_eq!(
        first["eras"]["2026-07-28"], 30,
        "auto mode spoke 2026-07-28"
    );
    // Killed and restarted twice between calls: every run still replays and is clean.
    let restarts = [
        "--seeds",
        "0..8",
        "--args",
        SLOW,
        "--verify",
        "--restarts",
        "2",
    ];
    let (code, totals) = sweep(&restarts, &server, &[]);
    assert_eq!(code, 0, "{totals:#}");
    assert_all_judged(&totals);
    // The same server named as `mcp run` names it (`file.py:object`), and written as `mcp run`
    // takes it (the file without its `__main__` block): started the same way, the same traces.
    let source = std::fs::read_to_string(script("tests/peers/python_slow_server.py")).unwrap();
    let (server_only, _) = source
        .split_once("\nif __name__")
        .expect("a __main__ block");
    let dir = std::env::temp_dir().join(format!("mcp-sim-mcp-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mcp_run_file = dir.join("server_only.py");
    std::fs::write(&mcp_run_file, server_only).unwrap();
    for program in [
        format!("{}:server", script("tests/peers/python_slow_server.py")),
        mcp_run_file.display().to_string(),
    ] {
        let (code, totals) = sweep(&flags, &[&python(&py), &program], &[]);
        assert_eq!(code, 0, "{program}: {totals:#}");
        assert_eq!(totals["traces"], first["traces"], "{program}");
    }
}

#[test]
fn sync_tools_and_blocking_sleeps_run_on_the_virtual_clock() {
    let Some(py) = common::peers::python_sdk() else {
        return;
    };
    let server = [
        python(&py),
        script("tests/peers/python_sync_tool_server.py"),
    ];
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    // A sync tool runs in a worker thread; its time.sleep waits on the virtual clock while the
    // other calls go on, and two runs of each seed agree.
    // Calls of 3.5 s under the 5 s idle timeout (they report no progress) on a fast network.
    let args = r#"{"steps":5,"step_ms":700}"#;
    let flags = [
        "--seeds",
        "0..16",
        "--verify",
        "--latency-ms",
        "1..50",
        "--args",
        args,
    ];
    let (code, totals) = sweep(&flags, &server, &[]);
    assert_eq!(code, 0, "{totals:#}");
    assert_all_judged(&totals);
    let per_run = totals["sim_ms"].as_u64().unwrap() / totals["runs"].as_u64().unwrap();
    assert!(
        per_run >= 3500,
        "the sleeps took virtual time: {per_run} ms a run"
    );
    // An async tool that blocks its loop with time.sleep: the loop's own clock moves, what it
    // writes afterwards is that much later, and the seeds still replay.
    let flags = [
        "--seeds",
        "0..8",
        "--verify",
        "--tool",
        "blocking_op",
        "--args",
        args,
    ];
    let (_, blocking) = sweep(&flags, &server, &[]);
    assert!(blocking.get("not_replayable").is_none(), "{blocking:#}");
    assert_ne!(blocking["traces"], totals["traces"]);
    assert!(
        blocking["outcomes"]["result"].as_u64() > Some(0),
        "{blocking:#}"
    );
}

#[test]
fn sdk1_server_gives_its_live_baseline_in_the_legacy_era_on_both_transports() {
    let Some(py) = common::peers::python_sdk_v1() else {
        return;
    };
    let server = [python(&py), script("tests/peers/python1/slow_server.py")];
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let (code, totals) = sweep(&["--seeds", "0..20", "--args", SLOW], &server, &[]);
    assert_eq!(code, 0, "a SHOULD only: {totals:#}");
    assert_eq!(
        rules(&totals),
        baseline("python-sdk-1-server.txt"),
        "{totals:#}"
    );
    assert_eq!(totals["eras"]["2025-11-25"], 20, "{totals:#}");
    assert_all_judged(&totals);
    // Over Streamable HTTP, with sessions: the same answer to a cancel, and the SSE streams
    // open without a priming event, as the SDK 2.3.0's legacy streams do.
    let http = [
        python(&py),
        script("tests/peers/python1/slow_server.py"),
        "http".into(),
        "8000".into(),
    ];
    let http: Vec<&str> = http.iter().map(String::as_str).collect();
    let flags = [
        "--transport",
        "http",
        "--seeds",
        "0..8",
        "--args",
        SLOW,
        "--verify",
    ];
    let (code, totals) = sweep(&flags, &http, &[]);
    assert_eq!(code, 0, "SHOULDs only: {totals:#}");
    let mut expected = baseline("python-sdk-1-server.txt");
    expected.extend(baseline("python-sdk-2-legacy-http-server.txt"));
    assert_eq!(rules(&totals), expected, "{totals:#}");
    assert_all_judged(&totals);
}

#[test]
fn sdk2_http_server_gives_its_live_verdicts_in_both_eras() {
    let Some(py) = common::peers::python_sdk() else {
        return;
    };
    let server = [
        python(&py),
        script("tests/peers/python_slow_http_server.py"),
        "8000".into(),
    ];
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let modern = [
        "--transport",
        "http",
        "--era",
        "modern",
        "--seeds",
        "0..12",
        "--args",
        SLOW,
        "--verify",
    ];
    let (code, totals) = sweep(&modern, &server, &[]);
    assert_eq!(code, 0, "{totals:#}");
    assert!(rules(&totals).is_empty(), "{totals:#}");
    assert_all_judged(&totals);
    // Through nginx's idle cut, half the streams reset mid-call: still clean, every run
    // replayed (a run whose every call was reset exercised nothing, and says so).
    let faults = [
        "--transport",
        "http",
        "--era",
        "modern",
        "--seeds",
        "0..8",
        "--args",
        SLOW,
        "--verify",
        "--proxy",
        "nginx",
        "--reset-percent",
        "50",
    ];
    let (code, totals) = sweep(&faults, &server, &[]);
    assert_eq!(code, 0, "{totals:#}");
    assert!(totals.get("not_replayable").is_none(), "{totals:#}");
    assert!(
        totals["outcomes"]["lost"].as_u64() > Some(0),
        "resets happened: {totals:#}"
    );
    let legacy = [
        "--transport",
        "http",
        "--era",
        "legacy",
        "--seeds",
        "0..6",
        "--args",
        SLOW,
    ];
    let (_, totals) = sweep(&legacy, &server, &[]);
    assert_eq!(
        rules(&totals),
        baseline("python-sdk-2-legacy-http-server.txt"),
        "{totals:#}"
    );
    assert_all_judged(&totals);
}

#[test]
fn python_mutants_are_caught_with_their_rule_and_replay() {
    let Some(py) = common::peers::python_sdk() else {
        return;
    };
    for (file, rule) in [
        ("swallow_cancel_server.py", "response-after-cancel"),
        ("late_progress_server.py", "progress-after-completion"),
    ] {
        let server = [
            python(&py),
            script(&format!("tests/peers/python_mutants/{file}")),
        ];
        let server: Vec<&str> = server.iter().map(String::as_str).collect();
        let (code, totals) = sweep(&["--seeds", "0..12", "--args", SLOW], &server, &[]);
        assert_eq!(code, 1, "{file}: {totals:#}");
        assert_all_judged(&totals);
        assert_caught_and_replayed(&totals, rule);
    }
}

#[test]
fn programs_that_escape_the_shim_are_not_replayable_and_say_where() {
    let Some(py) = common::peers::python_sdk() else {
        return;
    };
    let escaping = script("tests/peers/python_mutants/escaping_server.py");
    let cases = [
        ("subprocess", "a subprocess was started"),
        ("socket", "a real socket connected"),
        ("thread", "a thread outside the worker pools"),
        ("pid", "two runs of the seed differ"),
    ];
    for (mode, why) in cases {
        let server = [python(&py), escaping.clone(), mode.into()];
        let server: Vec<&str> = server.iter().map(String::as_str).collect();
        let flags = [
            "--seeds",
            "0..2",
            "--verify",
            "--args",
            r#"{"steps":2,"step_ms":100}"#,
        ];
        let (code, totals) = sweep(&flags, &server, &[]);
        assert_eq!(code, 3, "{mode}: never a pass: {totals:#}");
        assert!(
            totals["failing"].as_array().unwrap().is_empty(),
            "never a finding"
        );
        let runs = totals["not_replayable"].as_array().expect("not replayable");
        assert_eq!(runs.len(), 2, "{mode}: {totals:#}");
        for r in runs {
            let text = r["why"].as_str().unwrap();
            assert!(text.contains(why), "{mode}: {text}");
        }
        if mode != "pid" {
            let text = runs[0]["why"].as_str().unwrap();
            assert!(text.contains("escaping_server.py:"), "where: {text}");
        }
    }
}

#[test]
fn synchronous_servers_run_in_thread_mode_with_their_live_verdicts() {
    let Some(py) = common::peers::python_sdk() else {
        return;
    };
    // tests/peers/raw_stdio_server.py: stdin read on the main thread, a thread per call that
    // waits on an Event with a timeout; the probe's own tests (probe_verdicts.rs,
    // probe_legacy.rs) pin these verdicts live.
    let raw = script("tests/peers/raw_stdio_server.py");
    let args = r#"{"steps":4,"step_ms":300}"#;
    for (mode, era, code, rule) in [
        ("correct", "modern", 0, None),
        (
            "answer-cancel",
            "modern",
            1,
            Some(("response-after-cancel", "MUST")),
        ),
        (
            "ignore-cancel",
            "modern",
            1,
            Some(("response-after-cancel", "MUST")),
        ),
        (
            "answer-cancel",
            "legacy",
            0,
            Some(("response-after-cancel", "SHOULD")),
        ),
    ] {
        let mut server = vec![python(&py), raw.clone(), mode.to_string()];
        if era == "legacy" {
            server.push("legacy".into());
        }
        let server: Vec<&str> = server.iter().map(String::as_str).collect();
        let flags = [
            "--seeds",
            "0..8",
            "--verify",
            "--era",
            era,
            "--args",
            args,
            "--cancel-percent",
            "50",
        ];
        let (got, totals) = sweep(&flags, &server, &[]);
        assert_eq!(got, code, "{mode} {era}: {totals:#}");
        assert!(totals.get("not_replayable").is_none(), "{mode}: {totals:#}");
        match rule {
            None => assert!(rules(&totals).is_empty(), "{mode}: {totals:#}"),
            Some((rule, level)) => {
                assert_eq!(
                    rules(&totals),
                    BTreeSet::from([rule.to_string()]),
                    "{totals:#}"
                );
                assert_eq!(totals["violations"][rule]["level"], level, "{totals:#}");
            }
        }
    }
}

/// Races by seed: with no service time the SDK 2.3.0 server rarely sends a message after a
/// cancel reached it (the cancel is dispatched in a task of its own, which a completing step
/// can beat only at the very instant); with a seeded service time its loop is busy as a real
/// one is, and the sweep finds the race on many seeds, each replaying its digest. The same
/// flags give the same digests twice.
#[test]
fn service_time_sweeps_the_races_a_busy_loop_runs_into() {
    let Some(py) = common::peers::python_sdk() else {
        return;
    };
    let server = [python(&py), script("tests/peers/python_slow_server.py")];
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let base = [
        "--seeds",
        "0..60",
        "--timeout-ms",
        "1000",
        "--args",
        r#"{"steps":5,"step_ms":200}"#,
    ];
    let count = |totals: &serde_json::Value| {
        totals["violations"]["response-after-cancel"]["runs"]
            .as_u64()
            .unwrap_or(0)
    };
    let (_, plain) = sweep(&base, &server, &[]);
    let busy: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--service-us", "100000", "--shuffle-ties"])
        .collect();
    let (code, first) = sweep(&busy, &server, &[]);
    assert_eq!(code, 1, "{first:#}");
    assert!(
        count(&first) >= count(&plain) + 5,
        "service time finds the race more often: {} against {}",
        count(&first),
        count(&plain)
    );
    assert_ne!(first["traces"], plain["traces"]);
    let (_, second) = sweep(&busy, &server, &[]);
    assert_eq!(first["traces"], second["traces"], "one seed, one run");
    assert_caught_and_replayed(&first, "response-after-cancel");
}

#[test]
fn bad_virtual_commands_are_usage_errors() {
    for (args, says) in [
        (
            vec!["--", "ruby", "server.rb"],
            "not an interpreter mcp-sim has a shim for",
        ),
        (vec!["--", "node", "no/such/server.js"], "no such file"),
        (vec!["--", "python3"], "no program after the interpreter"),
        (
            vec![
                "--transport",
                "http",
                "--restarts",
                "1",
                "--",
                "python3",
                "s.py",
            ],
            "--restarts is for --transport stdio",
        ),
        (
            vec!["--args", "[1]", "--", "python3", "s.py"],
            "--args must be a JSON object",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
            .args(["sweep", "--virtual"])
            .args(&args)
            .output()
            .expect("mcp-sim runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["sweep", "--virtual", "--service-us", "1000", "--"])
        .args(["go", "test", "./server", "-run", "TestServer"])
        .output()
        .expect("mcp-sim runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a Go bubble does not"), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["sweep", "--tool", "x", "--seeds", "0..1"])
        .output()
        .expect("mcp-sim runs");
    assert_eq!(out.status.code(), Some(2), "--tool needs --virtual");
}
