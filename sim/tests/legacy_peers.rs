//! The legacy peers people run, installed by the tests at pinned versions
//! (`common::peers`), each judged by the rules of the revision it speaks and held to a
//! pinned baseline of its findings (`tests/baselines/*.txt`): an unexpected finding fails,
//! and so does a baseline entry that no longer occurs.
//!
//! | peer | tool | era spoken | baseline |
//! | --- | --- | --- | --- |
//! | TS SDK v1 1.32.2 server | `probe` (stdio, auto) | 2025-11-25 | nothing |
//! | `server-everything` 2026.8.31 | `probe` (stdio, auto) | 2025-11-25 | `response-after-cancel` (progress after the cancel) |
//! | `server-everything` 2026.8.31 | `probe` (HTTP, auto) | 2025-11-25 | `message-shape` (its 400 to `server/discover` has `"id": null`) |
//! | `server-everything` 2026.8.31 | `probe` (HTTP, legacy, half the streams reset) | 2025-11-25 | `replay-other-stream`, `message-shape` (and on some seeds `response-after-cancel`, a SHOULD left unpinned: which streams are reset depends on timing) |
//! | Python SDK 1.30.0 server | `probe` (stdio, auto) | 2025-11-25 | `response-after-cancel` (code 0 "Request cancelled") |
//! | Python SDK 2.3.0 server | `probe` (HTTP, legacy) | 2025-11-25 | `priming-event` |
//! | TS SDK v2 2.4.0 server | `probe` (stdio, legacy) | 2025-11-25 | `response-after-cancel` |
//! | TS SDK v1 1.32.2 client | `serve` (stdio, HTTP) | 2025-11-25 | nothing: it cancels at its timeout |
//! | TS SDK v1 1.32.2 client | `record` (connect timeout) | 2025-11-25 | `initialize-cancelled` |
//! | Python SDK 1.30.0 client | `serve` (stdio, HTTP) | 2025-11-25 | `declared-deadline` (no cancel at its timeout) |
//! | TS SDK v2 2.4.0 client, SDK default | `serve` (stdio) | 2025-11-25 | nothing |
//! | TS SDK v1 client → Python SDK 2.3.0 server | `record --http` | 2025-11-25 | `response-after-cancel` (a stateless server's call runs on after a POSTed cancel), `priming-event` |
//!
//! (rmcp's default client is in `tests/rmcp_serve.rs`.) Each probe case runs the seeds of
//! `MCP_SIM_PEER_SEEDS` (`A..B` or a list, default `1`): `MCP_SIM_PEER_SEEDS=1..21` is the
//! 20-seed sweep. Wall-clock margins as in `probe_verdicts.rs`: calls of about 1.2 s, cancels
//! in their first two fifths, liveness checks allowed 10 s. Every call is cancelled: the
//! barrier catches a message after the cancel unless it was written in the few ms between
//! the server reading the cancel and answering the barrier (a legal crossing, about 2 % of
//! the cancels of a 200 ms step), so four cancels a run make such a finding show every time.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::peers::{
    node_ts_sdk, node_ts_sdk_v1, python_sdk, python_sdk_v1, ts_v1_client, NodeSdk,
};
use common::probe::cancelling_schedule as schedule;
use common::repo;
use common::serve::*;

fn baseline(name: &str) -> PathBuf {
    repo().join("tests/baselines").join(name)
}

/// The rules a baseline file lists.
fn listed(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(baseline(name)).expect("the baseline reads");
    let b = mcp_sim::ci::Baseline::parse(&text, mcp_sim::ci::is_rule).expect("a valid baseline");
    b.expected.into_iter().collect()
}

const SLOW_OP: &str = r#"{"steps":6,"step_ms":200}"#;

/// Probes `server` (a command, or `--url` in `target`) in `era` over every seed; each run must
/// speak 2025-11-25, exercise a cancel, and agree with the baseline.
fn probe_peer(name: &str, era: &str, schedule: &[&str], target: &[&str], server: &[&str]) {
    let file = baseline(name);
    let file = file.display().to_string();
    for seed in common::peer_seeds() {
        let mut args = vec!["--seed", &seed, "--era", era, "--baseline", &file];
        args.extend_from_slice(schedule);
        args.extend_from_slice(target);
        let (code, v) = common::probe::probe_json(&args, server);
        assert_eq!(v["era"], "2025-11-25", "{name} seed {seed}: {v:#}");
        assert_eq!(v["baseline"]["agrees"], true, "{name} seed {seed}: {v:#}");
        assert_eq!(code, 0, "{name} seed {seed}: {v:#}");
        let c = &v["coverage"];
        assert!(
            c["cancels_met_running_work"].as_u64() > Some(0),
            "{name} seed {seed}: {v:#}"
        );
        assert_eq!(
            c["other_requests"], c["other_answered"],
            "{name} seed {seed}: every liveness check answered: {v:#}"
        );
    }
}

fn node(sdk: &NodeSdk, script: &str) -> Vec<String> {
    vec![
        sdk.node.display().to_string(),
        sdk.dir.join(script).display().to_string(),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn typescript_sdk_v1_server_is_judged_legacy_and_clean() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let server = node(&sdk, "ts_v1_slow_server.mjs");
    let s = schedule("slow_op", SLOW_OP);
    probe_peer("ts-sdk-v1-server.txt", "auto", &s, &[], &strs(&server));
}

const LONG_RUNNING: &str = "trigger-long-running-operation";
const LONG_RUNNING_ARGS: &str = r#"{"duration":1.2,"steps":6}"#;

fn server_everything(sdk: &NodeSdk) -> String {
    sdk.dir
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

/// server-everything's Streamable HTTP transport on a free port (it takes the port from
/// `PORT`).
fn server_everything_http(sdk: &NodeSdk) -> Upstream {
    let mut command = Command::new(&sdk.node);
    command.args([&server_everything(sdk), "streamableHttp"]);
    Upstream::start(command, |c, port| {
        c.env("PORT", port.to_string());
    })
}

#[test]
fn server_everything_keeps_sending_progress_after_a_cancel_over_stdio() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let node = sdk.node.display().to_string();
    let script = server_everything(&sdk);
    let s = schedule(LONG_RUNNING, LONG_RUNNING_ARGS);
    probe_peer(
        "server-everything-stdio.txt",
        "auto",
        &s,
        &[],
        &[&node, &script, "stdio"],
    );
}

#[test]
fn server_everything_over_streamable_http() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let server = server_everything_http(&sdk);
    let url = server.url();
    let s = schedule(LONG_RUNNING, LONG_RUNNING_ARGS);
    probe_peer(
        "server-everything-http.txt",
        "auto",
        &s,
        &["--url", &url],
        &[],
    );
}

/// The legacy HTTP faults on a server that sends event ids: the probe's relay resets half the
/// POSTs mid-response and the client resumes each stream it still wants with `GET` and
/// `Last-Event-ID`. server-everything's event store replays every event after that id,
/// whatever stream it was on (`replay-other-stream`, MUST, LE16), priming events included,
/// which go out as `{}` (`message-shape`, MUST). Which POSTs are reset follows their order on
/// the wire, and what a resume replays follows what the other streams sent meanwhile: the wall
/// clock decides both, so one seed may show nothing (seed 6 did, of 20). The baseline is then
/// held over the seeds: no run breaks a MUST rule it does not list (unexpected), and every
/// entry occurs in some run (not stale). The replays also bring, on most seeds, progress it
/// kept sending after a cancel (`response-after-cancel`, a SHOULD, not pinned).
#[test]
fn server_everything_replays_other_streams_when_a_stream_is_resumed() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let server = server_everything_http(&sdk);
    let url = server.url();
    let expected: BTreeSet<String> = listed("server-everything-http-resets.txt")
        .into_iter()
        .collect();
    let mut seen = BTreeSet::new();
    // Three seeds by default: a baseline held over the seeds needs more than one.
    let seeds = match std::env::var("MCP_SIM_PEER_SEEDS") {
        Ok(_) => common::peer_seeds(),
        Err(_) => ["1", "2", "3"].map(String::from).to_vec(),
    };
    for seed in seeds {
        let mut args = vec!["--seed", &seed, "--era", "legacy"];
        args.extend_from_slice(&[
            "--tool",
            LONG_RUNNING,
            "--args",
            LONG_RUNNING_ARGS,
            "--calls",
            "6",
            "--cancel-percent",
            "30",
            "--reset-percent",
            "50",
            "--max-seconds",
            "40",
            "--drain-ms",
            "800",
            "--url",
            &url,
        ]);
        let (code, v) = common::probe::probe_json(&args, &[]);
        assert_eq!(v["era"], "2025-11-25", "seed {seed}: {v:#}");
        let must: BTreeSet<String> = v["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .filter(|x| x["level"] == "MUST")
            .filter_map(|x| x["rule"].as_str().map(str::to_owned))
            .collect();
        assert!(must.is_subset(&expected), "seed {seed}: unexpected: {v:#}");
        assert!(
            v["findings"].as_array().is_some_and(Vec::is_empty),
            "seed {seed}: {v:#}"
        );
        assert_eq!(code, i32::from(!must.is_empty()), "seed {seed}: {v:#}");
        seen.extend(must);
    }
    assert_eq!(seen, expected, "a baseline entry occurred in no run");
}

#[test]
fn python_sdk_1_server_answers_each_cancel_with_code_0() {
    let Some(py) = python_sdk_v1() else { return };
    let script = repo().join("tests/peers/python1/slow_server.py");
    let server = [py.display().to_string(), script.display().to_string()];
    let s = schedule("slow_op", SLOW_OP);
    probe_peer("python-sdk-1-server.txt", "auto", &s, &[], &strs(&server));
}

#[test]
fn python_sdk_2_server_opened_in_the_legacy_era_over_http() {
    let Some(py) = python_sdk() else { return };
    let server = Upstream::python_sdk(&py);
    let url = server.url();
    let s = schedule("slow_op", SLOW_OP);
    probe_peer(
        "python-sdk-2-legacy-http-server.txt",
        "legacy",
        &s,
        &["--url", &url],
        &[],
    );
}

#[test]
fn typescript_sdk_v2_server_opened_in_the_legacy_era() {
    let Some(sdk) = node_ts_sdk() else { return };
    let server = node(&sdk, "ts_slow_server.mjs");
    let s = schedule("slow_op", SLOW_OP);
    probe_peer(
        "ts-sdk-v2-legacy-server.txt",
        "legacy",
        &s,
        &[],
        &strs(&server),
    );
}

/// A short call, a long one the client gives up on at 1.5 s, and a short one after.
const TS_PLAN: &str = r#"[{"steps":3,"step_ms":100,"options":{"timeout":1500}},{"steps":25,"step_ms":200,"options":{"timeout":1500}},{"steps":2,"step_ms":100,"options":{"timeout":1500}}]"#;
/// The same for the Python SDK, with a last call long enough (3 s) that the session is still
/// open well past the long call's deadline and the grace window.
const PY1_PLAN: &str = r#"[{"steps":3,"step_ms":100,"timeout_ms":1500},{"steps":25,"step_ms":200,"timeout_ms":1500},{"steps":15,"step_ms":200,"timeout_ms":10000}]"#;

/// The case speaks 2025-11-25, the client's outcomes are as planned, and the rules broken
/// are exactly the baseline's.
fn assert_legacy_case(case: &Case, outcomes: &[&str], baseline_name: Option<&str>) {
    assert_eq!(case.report["era"], "2025-11-25", "{}", case.describe());
    assert_eq!(case.outcome_names(), outcomes, "{}", case.describe());
    let expected = baseline_name.map(listed).unwrap_or_default();
    assert_eq!(case.rules(), expected, "{}", case.describe());
}

fn python1_client(py: &Path, plan: &str) -> Command {
    let mut c = Command::new(py);
    c.arg(repo().join("tests/peers/python1/client.py"))
        .arg(plan);
    c
}

#[test]
fn typescript_sdk_v1_client_cancels_at_its_timeout_on_both_transports() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let dir = scratch("legacy-ts-v1-stdio");
    let case = against_stdio_serve(ts_v1_client(&sdk, TS_PLAN), &dir, "timeout=1500", &[]);
    assert_legacy_case(&case, &["result", "timeout", "result"], None);
    assert_eq!(case.cancels_seen(), 1, "{}", case.describe());
    let dir = scratch("legacy-ts-v1-http");
    let (case, code) = against_http_serve(ts_v1_client(&sdk, TS_PLAN), &dir, "timeout=1500");
    assert_legacy_case(&case, &["result", "timeout", "result"], None);
    assert_eq!(case.cancels_seen(), 1, "{}", case.describe());
    assert_eq!(code, 0, "{}", case.describe());
}

#[test]
fn python_sdk_1_client_sends_no_cancel_at_its_timeout_on_either_transport() {
    let Some(py) = python_sdk_v1() else { return };
    let outcomes = ["result", "timeout", "result"];
    let dir = scratch("legacy-py1-stdio");
    let case = against_stdio_serve(python1_client(&py, PY1_PLAN), &dir, "timeout=1500", &[]);
    assert_legacy_case(&case, &outcomes, Some("python-sdk-1-client.txt"));
    assert_eq!(case.cancels_seen(), 0, "{}", case.describe());
    let dir = scratch("legacy-py1-http");
    let (case, code) = against_http_serve(python1_client(&py, PY1_PLAN), &dir, "timeout=1500");
    assert_legacy_case(&case, &outcomes, Some("python-sdk-1-client.txt"));
    assert_eq!(case.cancels_seen(), 0, "{}", case.describe());
    assert_eq!(
        code,
        1,
        "a broken declared policy fails serve: {}",
        case.describe()
    );
}

#[test]
fn typescript_sdk_v2_client_in_its_default_mode_is_judged_legacy() {
    let Some(sdk) = node_ts_sdk() else { return };
    let dir = scratch("legacy-ts-v2-default");
    let mut client = Command::new(&sdk.node);
    client
        .arg(sdk.dir.join("ts_client.mjs"))
        .arg(TS_PLAN)
        .arg("--sdk-default");
    let case = against_stdio_serve(client, &dir, "timeout=1500", &[]);
    assert_legacy_case(&case, &["result", "timeout", "result"], None);
    assert_eq!(case.cancels_seen(), 1, "{}", case.describe());
}

/// `record` reads the era from the session it taps: the TS SDK v1 client's `connect()` times
/// out against a server that never answers and cancels `initialize`, a MUST NOT of the legacy
/// era. The report is JUnit here, with the finding as the baseline.
#[test]
fn typescript_sdk_v1_client_cancels_initialize_when_connect_times_out() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let dir = scratch("legacy-ts-v1-connect");
    let (trace, report) = (dir.join("trace.jsonl"), dir.join("report.xml"));
    let out = Command::new(&sdk.node)
        .arg(sdk.dir.join("ts_v1_client.mjs"))
        .args(["[]", "--connect-timeout", "1000", "--", MCP_SIM, "record"])
        .arg("--trace")
        .arg(&trace)
        .arg("--report")
        .arg(&report)
        .args(["--format", "junit", "--baseline"])
        .arg(baseline("ts-sdk-v1-client-connect.txt"))
        // A server that reads everything and answers nothing, and exits when its input ends.
        .args(["--", "python3", "-c", "import sys; sys.stdin.read()"])
        .output()
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(r#""connect":"timeout""#), "{stdout}");
    let trace = mcp_sim::trace::Trace::from_jsonl(&read_when_written(&trace)).expect("a trace");
    let verdict = mcp_sim::oracle::check(&trace, &mcp_sim::oracle::OracleConfig::default());
    assert_eq!(
        verdict.era.era.version(),
        "2025-11-25",
        "{}",
        trace.to_jsonl()
    );
    let rules: Vec<&str> = verdict.violations.iter().map(|v| v.rule).collect();
    assert_eq!(
        rules,
        listed("ts-sdk-v1-client-connect.txt"),
        "{}",
        trace.to_jsonl()
    );
    let xml = read_when_written(&report);
    assert!(xml.contains(r#"name="initialize-cancelled">"#), "{xml}");
    assert!(xml.contains("expected by the baseline"), "{xml}");
    assert!(xml.contains(r#"failures="0""#), "{xml}");
}

/// A declared policy the client's own calls make impossible to honour: the host says its
/// timeout resets on progress, and its calls ask for no progress (`resetTimeoutOnProgress`
/// without `onprogress`: the SDK then sends no progressToken, typescript-sdk #2076). Named in
/// either era: the TS SDK v1 client (2025-11-25) and the TS SDK v2 client (2026-07-28).
#[test]
fn a_declared_reset_on_progress_for_calls_that_ask_for_none_is_named_in_either_era() {
    let plan = r#"[{"steps":3,"step_ms":100,"progress":false,"options":{"timeout":1500,"resetTimeoutOnProgress":true}}]"#;
    let policy = "timeout=1500,reset,max=5000";
    if let Some(sdk) = node_ts_sdk_v1() {
        let dir = scratch("legacy-ts-v1-impossible");
        let case = against_stdio_serve(ts_v1_client(&sdk, plan), &dir, policy, &[]);
        assert_eq!(case.report["era"], "2025-11-25", "{}", case.describe());
        assert_eq!(case.outcome_names(), ["result"], "{}", case.describe());
        assert_eq!(case.rules(), ["reset-needs-token"], "{}", case.describe());
    }
    if let Some(sdk) = node_ts_sdk() {
        let dir = scratch("modern-ts-v2-impossible");
        let mut client = Command::new(&sdk.node);
        client.arg(sdk.dir.join("ts_client.mjs")).arg(plan);
        let (case, code) = against_http_serve(client, &dir, policy);
        assert_eq!(case.report["era"], "2026-07-28", "{}", case.describe());
        assert_eq!(case.outcome_names(), ["result"], "{}", case.describe());
        assert_eq!(case.rules(), ["reset-needs-token"], "{}", case.describe());
        assert_eq!(
            code,
            1,
            "serve fails a policy it cannot honour: {}",
            case.describe()
        );
    }
}

/// `record --http` reads the era from the session it relays: the TS SDK v1 client through the
/// tap in front of the Python SDK 2.3.0 server (stateless Streamable HTTP), which answers its
/// `initialize` in 2025-11-25. The client POSTs its cancel at its timeout (1500 ms, between
/// two of the call's 200 ms steps); the stateless server handles that POST on its own and the
/// call runs on: its next step's progress follows the cancel, a SHOULD of the legacy era
/// (`response-after-cancel`); its streams carry no priming event (`priming-event`, SHOULD).
/// No MUST rule is broken: the tap exits 0.
#[test]
fn record_judges_a_legacy_http_session_by_the_legacy_rules() {
    let (Some(sdk), Some(py)) = (node_ts_sdk_v1(), python_sdk()) else {
        return;
    };
    let upstream = Upstream::python_sdk(&py);
    let dir = scratch("legacy-record-http");
    let tap = [
        "record".into(),
        "--http".into(),
        "127.0.0.1:0".into(),
        "--upstream".into(),
        format!("http://127.0.0.1:{}", upstream.port),
        "--trace".into(),
        dir.join("trace.jsonl").display().to_string(),
        "--report".into(),
        dir.join("report.json").display().to_string(),
    ];
    let plan = r#"[{"steps":3,"step_ms":100,"options":{"timeout":10000}},{"steps":25,"step_ms":200,"options":{"timeout":1500}},{"steps":2,"step_ms":100,"options":{"timeout":1500}}]"#;
    let (case, code) = against_listening(&tap, "/mcp", ts_v1_client(&sdk, plan), &dir);
    drop(upstream);
    assert_eq!(case.report["era"], "2025-11-25", "{}", case.describe());
    assert_eq!(
        case.outcome_names(),
        ["result", "timeout", "result"],
        "{}",
        case.describe()
    );
    assert_eq!(case.cancels_seen(), 1, "{}", case.describe());
    assert_eq!(
        case.rules(),
        ["priming-event", "response-after-cancel"],
        "{}",
        case.describe()
    );
    assert_eq!(case.report["ok"], true, "{}", case.describe());
    assert_eq!(code, 0, "{}", case.describe());
}
