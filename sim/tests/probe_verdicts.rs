//! `mcp-sim probe` verdicts on servers whose behaviour is known: a raw stdio server
//! (`tests/peers/raw_stdio_server.py`, Python standard library only) in each of its modes, and
//! processes that exit at once, never answer, or are not there.
//!
//! Each test reads the probe's `--format json` verdict. The timing here is real, so the
//! assertions have wide margins: calls last a second or more, cancels fall in their first
//! two fifths, and the decisive evidence (a barrier, an answer 0-5 ms after a cancel, 600 ms
//! or more before the call's natural end) does not depend on how loaded the machine is.

mod common;

use serde_json::Value;

fn probe(args: &[&str], server: &[&str]) -> (i32, Value) {
    common::probe::probe_json(args, server)
}

fn raw_server(mode: &str) -> Vec<String> {
    let script = common::repo().join("tests/peers/raw_stdio_server.py");
    vec!["python3".into(), script.display().to_string(), mode.into()]
}

use common::probe::SLOW;

fn rules(verdict: &Value) -> Vec<String> {
    verdict["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|v| v["rule"].as_str().expect("rule").to_string())
        .collect()
}

fn messages(verdict: &Value) -> String {
    verdict["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|v| v["message"].as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

fn run_raw(mode: &str, seed: &str, extra: &[&str]) -> (i32, Value) {
    let server = raw_server(mode);
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let mut args = vec!["--seed", seed];
    args.extend_from_slice(SLOW);
    args.extend_from_slice(extra);
    probe(&args, &server)
}

/// The seeds used here each cancel at least one call (the schedule is seeded; checked below).
const SEEDS: &[&str] = &["1", "2", "3"];

#[test]
fn a_server_that_answers_each_cancel_fails_with_its_evidence() {
    for seed in SEEDS {
        let (code, v) = run_raw("answer-cancel", seed, &[]);
        assert_eq!(code, 1, "seed {seed}: {v:#}");
        assert_eq!(v["verdict"], "violations", "seed {seed}: {v:#}");
        assert!(
            rules(&v).iter().any(|r| r == "response-after-cancel"),
            "seed {seed}: {v:#}"
        );
        assert!(
            messages(&v).contains("it answers the cancel"),
            "the evidence is the answer's timing against the uncancelled calls:\n{v:#}"
        );
        assert!(v["natural_ms"].as_u64().is_some_and(|d| d >= 1000), "{v:#}");
    }
}

#[test]
fn a_server_that_keeps_sending_after_a_cancel_is_caught_by_the_barrier() {
    // A grace window as long as the run: only the barrier can tell.
    let (code, v) = run_raw("ignore-cancel", "1", &["--grace-ms", "60000"]);
    assert_eq!(code, 1, "{v:#}");
    assert!(
        rules(&v).iter().any(|r| r == "response-after-cancel"),
        "{v:#}"
    );
    assert!(
        messages(&v).contains("stdio pipes are ordered"),
        "the evidence is the barrier:\n{v:#}"
    );
}

#[test]
fn a_correct_server_is_clean_and_its_cancels_meet_running_work() {
    for seed in SEEDS {
        let (code, v) = run_raw("correct", seed, &[]);
        assert_eq!(code, 0, "seed {seed}: {v:#}");
        assert_eq!(v["verdict"], "clean", "seed {seed}: {v:#}");
        let c = &v["coverage"];
        assert!(c["cancels"].as_u64() > Some(0), "seed {seed}: {v:#}");
        assert_eq!(
            c["cancels"], c["cancels_met_running_work"],
            "seed {seed}: {v:#}"
        );
        assert!(c["results"].as_u64() > Some(0), "seed {seed}: {v:#}");
        assert!(
            c["progress_received"].as_u64() > Some(0),
            "seed {seed}: {v:#}"
        );
        assert_eq!(
            c["other_requests"], c["other_answered"],
            "the start-up check and every barrier were answered: {v:#}"
        );
    }
}

#[test]
fn stalls_and_restarts_are_injected_recorded_and_do_not_blame_a_correct_server() {
    let (code, v) = run_raw(
        "correct",
        "2",
        &[
            "--stall-percent",
            "100",
            "--stall-ms",
            "1500..2500",
            "--restarts",
            "1",
        ],
    );
    assert_eq!(code, 0, "{v:#}");
    let faults = &v["coverage"]["faults"];
    assert_eq!(faults["restart"], 1, "{v:#}");
    assert!(faults["stall"].as_u64() >= Some(1), "{v:#}");
}

#[test]
fn a_server_that_exits_at_once_is_a_server_fault() {
    let (code, v) = probe(
        &["--calls", "2"],
        &["python3", "-c", "import sys; sys.exit(3)"],
    );
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["verdict"], "server-fault", "{v:#}");
    assert_eq!(v["findings"][0]["finding"], "server-exited", "{v:#}");
    assert!(
        v["findings"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("exit status: 3")),
        "{v:#}"
    );
}

#[test]
fn a_server_that_never_answers_is_a_server_fault() {
    let (code, v) = probe(
        &[
            "--calls",
            "2",
            "--timeout-ms",
            "700",
            "--max-total-ms",
            "1500",
            "--drain-ms",
            "100",
        ],
        &["python3", "-c", "import time; time.sleep(60)"],
    );
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["findings"][0]["finding"], "no-response", "{v:#}");
    assert_eq!(v["coverage"]["calls_answered"], 0, "{v:#}");
}

#[test]
fn a_run_whose_calls_all_fail_is_inconclusive() {
    let (code, v) = run_raw("correct", "1", &["--tool", "no_such_tool"]);
    assert_eq!(code, 3, "{v:#}");
    assert_eq!(v["verdict"], "inconclusive", "{v:#}");
    assert_eq!(v["findings"][0]["finding"], "nothing-exercised", "{v:#}");
}

#[test]
fn a_run_whose_cancels_all_come_too_late_is_inconclusive() {
    let server = raw_server("correct");
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let (code, v) = probe(
        &[
            "--seed",
            "4",
            "--calls",
            "3",
            "--args",
            r#"{"steps":1,"step_ms":10}"#,
            "--cancel-percent",
            "100",
            "--cancel-within-ms",
            "1000000",
            "--drain-ms",
            "100",
        ],
        &server,
    );
    assert_eq!(code, 3, "{v:#}");
    assert_eq!(v["findings"][0]["finding"], "nothing-exercised", "{v:#}");
    assert_eq!(v["coverage"]["cancels_met_running_work"], 0, "{v:#}");
}

fn findings(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["finding"].as_str().expect("finding").to_string())
        .collect()
}

#[test]
fn a_server_wedged_by_a_cancel_is_named_and_the_run_stops_there() {
    // The check's bound only matters for a server that answers: this one never does again.
    let (code, v) = run_raw("hang-on-cancel", "1", &["--liveness-ms", "1500"]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["verdict"], "server-fault", "{v:#}");
    assert_eq!(findings(&v), ["unresponsive-after-cancel"], "{v:#}");
    let message = v["findings"][0]["message"].as_str().expect("message");
    assert!(
        message.contains("after the cancel of call") && message.contains("the run stopped"),
        "{v:#}"
    );
    assert_eq!(v["coverage"]["faults"]["restart"], Value::Null, "{v:#}");
}

#[test]
fn with_restarts_a_wedged_server_is_restarted_and_the_run_goes_on() {
    let path = std::env::temp_dir().join(format!("mcp-sim-wedged-{}.jsonl", std::process::id()));
    let trace_arg = path.display().to_string();
    // SLOW with eight calls, so that calls remain to start after the first hang.
    let mut args = vec!["--seed", "1"];
    let calls = SLOW
        .iter()
        .position(|a| *a == "--calls")
        .expect("SLOW sets --calls");
    args.extend_from_slice(&SLOW[..calls]);
    args.extend_from_slice(&["--calls", "8"]);
    args.extend_from_slice(&SLOW[calls + 2..]);
    args.extend_from_slice(&[
        "--liveness-ms",
        "1500",
        "--restarts",
        "1",
        "--trace",
        &trace_arg,
    ]);
    let server = raw_server("hang-on-cancel");
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let (code, v) = probe(&args, &server);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(findings(&v), ["unresponsive-after-cancel"], "{v:#}");
    let message = v["findings"][0]["message"].as_str().expect("message");
    assert!(message.contains("went on"), "{v:#}");
    // The planned restart and at least one after a hang.
    let restarts = v["coverage"]["faults"]["restart"].as_u64().unwrap_or(0);
    assert!(restarts >= 2, "{v:#}");
    // A call sent after the first hang was given up on got its result: the run went on.
    let hung_at: u64 = message
        .split("(at ")
        .nth(1)
        .and_then(|m| m.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the finding says when");
    let trace = std::fs::read_to_string(&path).expect("the trace");
    let trace = mcp_sim::trace::Trace::from_jsonl(&trace).expect("the trace reads");
    let mut sent_after = std::collections::BTreeSet::new();
    let mut answered_after = 0;
    for e in &trace.events {
        let (mcp_sim::trace::EventKind::Send(w) | mcp_sim::trace::EventKind::Recv(w)) = &e.kind
        else {
            continue;
        };
        let Some(msg) = &w.msg else { continue };
        let id = msg.get("id").map(ToString::to_string);
        match (&e.kind, id) {
            (mcp_sim::trace::EventKind::Send(_), Some(id))
                if e.t > hung_at && msg["method"] == "tools/call" =>
            {
                sent_after.insert(id);
            }
            (mcp_sim::trace::EventKind::Recv(_), Some(id))
                if msg.get("result").is_some() && sent_after.contains(&id) =>
            {
                answered_after += 1;
            }
            _ => {}
        }
    }
    assert!(answered_after > 0, "{v:#}\n{}", trace.to_jsonl());
}

/// A legacy server that answers every call but never a `ping`: not unresponsive, since it
/// answers the calls written after the unanswered check on the same pipe; it breaks
/// `ping-answered`, and the liveness finding says so.
#[test]
fn a_server_that_answers_calls_but_never_ping_is_named_for_the_ping() {
    let script = common::repo().join("tests/peers/raw_stdio_server.py");
    let script = script.display().to_string();
    let server = ["python3", script.as_str(), "ignore-ping", "legacy"];
    // Six calls, and a bound wide enough that a call written after the first unanswered
    // check (at about 2.9 s on seed 1) is answered (about 4.5 s) before the check gives up.
    let mut args = vec!["--seed", "1", "--era", "legacy"];
    let calls = SLOW
        .iter()
        .position(|a| *a == "--calls")
        .expect("SLOW sets --calls");
    args.extend_from_slice(&SLOW[..calls]);
    args.extend_from_slice(&["--calls", "6"]);
    args.extend_from_slice(&SLOW[calls + 2..]);
    args.extend_from_slice(&["--liveness-ms", "4000"]);
    let (code, v) = probe(&args, &server);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(findings(&v), ["liveness-check-unanswered"], "{v:#}");
    let message = v["findings"][0]["message"].as_str().expect("message");
    assert!(
        message.contains("answers requests but not `ping` (ping-answered, MUST)"),
        "{v:#}"
    );
    assert!(rules(&v).contains(&"ping-answered".to_string()), "{v:#}");
}
