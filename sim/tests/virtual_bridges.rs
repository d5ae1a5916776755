//! Real intermediaries inside the simulation: `mcp-sim check-proxy --virtual` runs PyPI
//! mcp-proxy 0.13.0 in client mode (a stdio front, the reference server's Streamable HTTP as
//! its upstream, reached through httpx) under the virtual clock, both hops virtual. Without a
//! service time its verdict is the live one of `intermediaries.rs` (it answers a cancel
//! itself and never passes it upstream: SHOULDs of the legacy era), every seed replayed; with
//! a seeded service time the sweep finds the race the live check meets on 1 seed in 20 (its
//! own answer to a cancel overtaken by a progress notification it then passes on:
//! `progress-after-completion`), and the failing seed's replay line reprints its digest ten
//! times out of ten.
//!
//! mcp-proxy installs itself on first use (`common::peers`); without it the tests skip, or
//! fail under `CI=true`.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::peers::{npm_mcp_proxy, python_mcp_proxy};
use common::virtual_sweep::{baseline, rules, shell_words, sweep_with};
use serde_json::Value;

/// Four calls, all cancelled, as the live check's schedule.
const SCHEDULE: &[&str] = &["--calls", "4", "--cancel-percent", "100"];

/// `python -m mcp_proxy` with mcp-proxy's own Python.
fn pypi_mcp_proxy() -> Option<Vec<String>> {
    let python = python_mcp_proxy()?.parent()?.join("python");
    Some(vec![
        python.display().to_string(),
        "-m".into(),
        "mcp_proxy".into(),
    ])
}

/// `python -m mcp_proxy --transport streamablehttp {upstream-url}`: client mode.
fn client_mode() -> Option<Vec<String>> {
    let mut words = pypi_mcp_proxy()?;
    words.extend(["--transport", "streamablehttp", "{upstream-url}"].map(String::from));
    Some(words)
}

/// `mcp-sim check-proxy --virtual --format json FLAGS -- COMMAND`: exit code and totals.
fn sweep(flags: &[&str], command: &[String]) -> (i32, Value) {
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    sweep_with(&["check-proxy", "--virtual"], flags, &words, &[])
}

#[test]
fn pypi_mcp_proxy_client_mode_answers_cancels_itself_on_every_seed_replayed() {
    let Some(command) = client_mode() else { return };
    let flags: Vec<&str> = ["--seeds", "0..16", "--verify"]
        .into_iter()
        .chain(SCHEDULE.iter().copied())
        .collect();
    let (code, totals) = sweep(&flags, &command);
    assert_eq!(code, 0, "SHOULDs only: {totals:#}");
    assert!(totals.get("not_replayable").is_none(), "{totals:#}");
    let found = rules(&totals);
    let expected: BTreeSet<String> = ["cancel-answered-locally", "cancel-forwarded"]
        .map(String::from)
        .into();
    assert_eq!(found, expected, "{totals:#}");
    assert!(found.is_subset(&baseline("pypi-mcp-proxy-client-mode.txt")));
    assert_eq!(totals["eras"]["2025-11-25"], 16, "{totals:#}");
    // A seed whose latency leaves every call cancelled before mcp-proxy forwards it exercised
    // nothing, and says so; most seeds do exercise the path.
    let inconclusive = totals.get("inconclusive").and_then(Value::as_u64);
    assert!(inconclusive.unwrap_or(0) * 3 < 16, "{totals:#}");
}

#[test]
fn a_seeded_service_time_finds_pypi_mcp_proxy_s_progress_race_and_its_seed_replays() {
    let Some(command) = client_mode() else { return };
    let flags: Vec<&str> = ["--seeds", "0..40", "--service-us", "100000"]
        .into_iter()
        .chain(SCHEDULE.iter().copied())
        .collect();
    let (code, totals) = sweep(&flags, &command);
    assert_eq!(code, 1, "{totals:#}");
    let found = rules(&totals);
    assert!(found.contains("progress-after-completion"), "{totals:#}");
    let mut allowed = baseline("pypi-mcp-proxy-client-mode.txt");
    allowed.insert("progress-after-completion".into());
    assert!(found.is_subset(&allowed), "{found:?}");
    let failing = totals["failing"].as_array().expect("failing");
    let first = failing
        .iter()
        .find(|f| {
            f["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == "progress-after-completion")
        })
        .expect("a failing seed");
    let line = first["replay"].as_str().expect("a replay line");
    let digest = first["digest"].as_str().expect("a digest");
    let words = shell_words(line);
    assert_eq!(
        &words[..3],
        ["mcp-sim", "check-proxy", "--virtual"],
        "{line}"
    );
    for k in 0..10 {
        let dashes = words
            .iter()
            .position(|w| w == "--")
            .expect("the command's --");
        let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
            .args(&words[1..dashes])
            .arg("--report-dir")
            .arg(
                std::env::temp_dir().join(format!("mcp-sim-bridges-replay-{}", std::process::id())),
            )
            .args(&words[dashes..])
            .output()
            .expect("the replay runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "replay {k}: {stdout}");
        assert!(
            stdout.contains(&format!("digest {digest}")),
            "replay {k} reprints {digest}:\n{stdout}"
        );
        assert!(
            stdout.contains("[MUST] progress-after-completion"),
            "{stdout}"
        );
    }
}

/// `mcp-proxy --port {port} --host 127.0.0.1 -- {upstream}` run by `interpreter`: an HTTP
/// front, the reference server as its stdio child.
fn http_front(interpreter: &[String]) -> Vec<String> {
    let mut words = interpreter.to_vec();
    words.extend(
        [
            "--port",
            "{port}",
            "--host",
            "127.0.0.1",
            "--",
            "{upstream}",
        ]
        .map(String::from),
    );
    words
}

/// The HTTP-front bridges give their live baselines: npm mcp-proxy 6.7.19 turns a closed
/// 2026-07-28 stream into its child's legacy cancel and passes progress on (nothing
/// expected); PyPI mcp-proxy 0.13.0 in server mode drops progress and never passes a cancel
/// (two SHOULDs). Both listen only once their child is ready: the front's first requests wait
/// for that, as a live check waits for the front.
#[test]
fn http_front_bridges_give_their_live_verdicts_every_seed_replayed() {
    let front = [
        "--front-url",
        "http://127.0.0.1:{port}/mcp",
        "--seeds",
        "0..12",
    ];
    let flags: Vec<&str> = front
        .into_iter()
        .chain(["--verify", "--era", "modern"])
        .chain(SCHEDULE.iter().copied())
        .collect();
    if let Some(proxy) = npm_mcp_proxy() {
        let command = http_front(&["node".into(), proxy.display().to_string()]);
        let (code, totals) = sweep(&flags, &command);
        assert_eq!(code, 0, "{totals:#}");
        assert!(totals.get("not_replayable").is_none(), "{totals:#}");
        assert!(rules(&totals).is_empty(), "{totals:#}");
        assert!(baseline("npm-mcp-proxy-modern.txt").is_empty());
        assert_eq!(totals["eras"]["2026-07-28"], 12, "{totals:#}");
    }
    if let Some(proxy) = pypi_mcp_proxy() {
        let command = http_front(&proxy);
        let flags: Vec<&str> = front
            .into_iter()
            .chain(["--verify"])
            .chain(SCHEDULE.iter().copied())
            .collect();
        let (code, totals) = sweep(&flags, &command);
        assert_eq!(code, 0, "SHOULDs only: {totals:#}");
        assert!(totals.get("not_replayable").is_none(), "{totals:#}");
        let found = rules(&totals);
        assert!(found.contains("cancel-forwarded"), "{totals:#}");
        assert!(
            found.is_subset(&baseline("pypi-mcp-proxy-server-mode.txt")),
            "{totals:#}"
        );
    }
}

#[test]
fn a_virtual_intermediary_must_name_its_upstream_and_run_in_python_or_node() {
    for (command, says) in [
        (vec!["python3", "bridge.py"], "must name its upstream once"),
        (
            vec!["python3", "bridge.py", "{upstream}", "{upstream-url}"],
            "must name its upstream once",
        ),
        (
            vec!["ruby", "bridge.rb", "{upstream-url}"],
            "not an interpreter mcp-sim has a shim for",
        ),
        (
            vec!["go", "test", "./x", "-run", "T", "{upstream}"],
            "runs Python and Node.js intermediaries",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
            .args(["check-proxy", "--virtual", "--"])
            .args(&command)
            .output()
            .expect("mcp-sim runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {stderr}");
        assert!(stderr.contains(says), "{command:?}: {stderr}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args([
            "check-proxy",
            "--virtual",
            "--intermediary-timeout-ms",
            "100",
        ])
        .args(["--", "python3", "b.py", "{upstream}"])
        .output()
        .expect("mcp-sim runs");
    assert_eq!(out.status.code(), Some(2));
}
