//! The Java SDK (`io.modelcontextprotocol.sdk:mcp` 2.2.0, the SDK Spring AI's MCP starters
//! wrap) as a peer, built by the tests at its pinned version with Maven
//! (`common::peers::java_sdk`, from `tests/peers/java/`), each program judged by the rules of
//! the revision it speaks and held to a pinned baseline of its findings
//! (`tests/baselines/java-sdk-*.txt`).
//!
//! 2.2.0 carries two stacks that do not speak each other's era: the `modern` package
//! (2026-07-28 only: it refuses `initialize` with `-32022`, and its client sends no
//! `server/discover` and never falls back) and the long-standing `McpServer`/`McpClient`
//! (2025-11-25 and before). Both are judged, each in the era it speaks; the other era pinned
//! exercises nothing, and the probe says so.
//!
//! Servers (`SlowServer`: `slow_op` reports progress after each step and stops when its thread
//! is interrupted, as a blocking handler of either stack is written) through `probe`:
//!
//! | stack | transport | era spoken | baseline |
//! | --- | --- | --- | --- |
//! | modern | stdio | 2026-07-28 | clean: a cancel interrupts the handler and nothing more is sent for it |
//! | modern | HTTP (servlet on Jetty) | 2026-07-28 | `origin-validated` (a foreign `Host` is served; a foreign `Origin` gets 403) |
//! | legacy | stdio | 2025-11-25 | `response-after-cancel` (SHOULD): no cancellation either way (java-sdk #130): the cancelled call runs to its end with its progress and answers |
//! | legacy | HTTP (servlet on Jetty) | 2025-11-25 | `origin-validated`, `event-id-unique` (one event id twice in a session), `priming-event` |
//!
//! Over HTTP a modern blocking handler runs to its end after its client closed the request's
//! stream, the 2026-07-28 cancel: invisible on the wire (nothing can cross a closed stream),
//! shown by the server's own log of its handlers' ends.
//!
//! Clients (`PlanClient`) through `serve` under the declared policy their timeout sets
//! (`timeout=6000`, fixed: neither stack resets a timeout on progress): the modern client
//! cancels at its `roundTimeout` (the notification on stdio, the stream's close over HTTP),
//! clean; the legacy client's `requestTimeout` sends no cancel on either transport (java-sdk
//! #130): `declared-deadline`. Through `record`, a whole Java session of each stack.
//!
//! Each probe case runs the seeds of `MCP_SIM_PEER_SEEDS` (default `1`), its baseline held over
//! them as in `go_peers.rs`.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use common::peers::{java_sdk, JavaPeers};
use common::probe::{cancelling_schedule, probe_json};
use common::serve::*;
use mcp_sim::trace::{EventKind, Side, Trace};

/// Calls of about 3 s: a cancel that meets running work lands well before the answer, so a
/// server that answers it anyway is not taken for one that had finished.
const SLOW_OP: &str = r#"{"steps":10,"step_ms":300}"#;

fn probe_peer(
    name: &str,
    era: &str,
    speaks: &str,
    target: (&[&str], &[&str]),
) -> BTreeMap<String, usize> {
    common::probe::probe_peer(name, era, speaks, target, SLOW_OP, &[])
}

fn server(java: &JavaPeers, stack: &str) -> Vec<String> {
    let mut argv = java.argv("SlowServer");
    argv.extend(["-stack".into(), stack.into()]);
    argv
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The server over HTTP on a free port, with `flags`.
fn http_server(java: &JavaPeers, stack: &str, flags: &[&str]) -> Upstream {
    let mut command = java.command("SlowServer");
    command.args(["-stack", stack]).args(flags);
    Upstream::start(command, |c, port| {
        c.args(["-http", &port.to_string()]);
    })
}

/// How the server's handlers ended, from its log: (stopped early, ran to the end).
fn handler_ends(log: &std::path::Path) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let stopped = text.lines().filter(|l| l.contains("stopped after")).count();
    let finished = text.lines().filter(|l| l.contains("finished")).count();
    (stopped, finished)
}

#[test]
fn java_modern_server_over_stdio_stops_on_cancel_and_speaks_no_legacy() {
    let Some(java) = java_sdk() else { return };
    let command = server(&java, "modern");
    for era in ["auto", "modern"] {
        probe_peer(
            "java-sdk-modern-server-stdio",
            era,
            "2026-07-28",
            (&[], &strs(&command)),
        );
    }
    // The handlers' own account: each cancel that met running work interrupted one.
    let dir = scratch("java-modern-stdio-log");
    let log = dir.join("ends.log");
    let mut with_log = command.clone();
    with_log.extend(["-log".into(), log.display().to_string()]);
    let mut argv = vec!["--seed", "1", "--era", "modern"];
    argv.extend(cancelling_schedule("slow_op", SLOW_OP));
    let (_, v) = probe_json(&argv, &strs(&with_log));
    let met = v["coverage"]["cancels_met_running_work"]
        .as_u64()
        .unwrap_or(0) as usize;
    let (stopped, _) = handler_ends(&log);
    assert!(
        met > 0 && stopped == met,
        "stopped {stopped}, met {met}: {v:#}"
    );
    // The legacy era pinned: `initialize` is refused (-32022), no call runs, and the probe
    // says the run exercised nothing (exit 3) rather than passing it.
    let mut argv = vec!["--seed", "1", "--era", "legacy"];
    argv.extend(cancelling_schedule("slow_op", SLOW_OP));
    let (code, v) = probe_json(&argv, &strs(&command));
    assert_eq!(code, 3, "{v:#}");
    assert_eq!(v["coverage"]["results"], 0, "{v:#}");
}

/// A modern blocking handler over HTTP runs to its end after its stream was closed: the
/// server's log shows no handler stopped though cancels met running work.
#[test]
fn java_modern_http_server_runs_handlers_on_after_their_stream_closed() {
    let Some(java) = java_sdk() else { return };
    let server = http_server(&java, "modern", &[]);
    let url = server.url();
    for era in ["auto", "modern"] {
        probe_peer(
            "java-sdk-modern-server-http",
            era,
            "2026-07-28",
            (&["--url", &url], &[]),
        );
    }
    drop(server);
    // A server of its own for the evidence, so that no earlier run's handler is still going.
    let dir = scratch("java-modern-http");
    let log = dir.join("ends.log");
    let log_text = log.display().to_string();
    let server = http_server(&java, "modern", &["-log", &log_text]);
    let url = server.url();
    let mut argv = vec!["--seed", "1", "--era", "modern", "--url", &url];
    argv.extend(cancelling_schedule("slow_op", SLOW_OP));
    let (_, v) = probe_json(&argv, &[]);
    let met = v["coverage"]["cancels_met_running_work"]
        .as_u64()
        .unwrap_or(0);
    assert!(met > 0, "{v:#}");
    // The handlers that ran on finish their 10 × 300 ms before the log is read.
    std::thread::sleep(std::time::Duration::from_millis(3500));
    drop(server);
    let (stopped, finished) = handler_ends(&log);
    assert_eq!(stopped, 0, "no handler stops: {v:#}");
    assert_eq!(
        finished as u64,
        v["coverage"]["calls_sent"].as_u64().unwrap_or(0),
        "every call runs to its end: {v:#}"
    );
}

#[test]
fn java_legacy_server_over_stdio_answers_cancelled_requests() {
    let Some(java) = java_sdk() else { return };
    let command = server(&java, "legacy");
    for era in ["auto", "legacy"] {
        let seen = probe_peer(
            "java-sdk-legacy-server-stdio",
            era,
            "2025-11-25",
            (&[], &strs(&command)),
        );
        assert!(seen.contains_key("response-after-cancel"), "{seen:?}");
    }
}

#[test]
fn java_legacy_http_server_is_judged_legacy() {
    let Some(java) = java_sdk() else { return };
    let server = http_server(&java, "legacy", &[]);
    let url = server.url();
    for era in ["auto", "legacy"] {
        probe_peer(
            "java-sdk-legacy-server-http",
            era,
            "2025-11-25",
            (&["--url", &url], &[]),
        );
    }
}

/// Three calls, the second given up at its 6 s timeout while it runs (12 s of work); the third
/// keeps the session open past that timeout's grace, so a give-up without a cancel shows. The
/// timeout is wide because a cold JVM under load took 1.4 s for the first call's first 100 ms
/// step: at 1.5 s, four of five runs beside a build timed the first call out. The second
/// call's 245 ms steps put its timeout mid-step: with 200 ms steps 6 s is 30 steps, so the
/// cancel reached the server within a few ms of a step's end, and in 1 of 20 runs beside a
/// build the modern server's progress for that step followed `record`'s write of the cancel
/// by 45 ms: a race `record`'s clock cannot settle, as it times the cancel at its write to the
/// server's pipe, not at the server's read.
const PLAN: &str = r#"[{"steps":3,"step_ms":100,"timeout_ms":6000},{"steps":50,"step_ms":245,"timeout_ms":6000},{"steps":12,"step_ms":100,"timeout_ms":6000}]"#;

fn client(java: &JavaPeers, stack: &str) -> Command {
    let mut c = java.command("PlanClient");
    c.args(["-stack", stack, PLAN]);
    c
}

/// Progress notifications the server sent for the `k`-th `tools/call` after it had read the
/// next one: work that ran on after its client gave it up and moved on.
fn progress_after_the_next_call(trace: &Trace, k: usize) -> usize {
    let calls: Vec<(usize, &serde_json::Value)> = trace
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.side == Side::Server)
        .filter_map(|(i, e)| match &e.kind {
            EventKind::Recv(w) => w.msg.as_ref().map(|m| (i, m)),
            _ => None,
        })
        .filter(|(_, m)| m["method"] == "tools/call")
        .collect();
    let token = calls[k]
        .1
        .pointer("/params/_meta/progressToken")
        .expect("the call asked for progress");
    let next = calls.get(k + 1).expect("a next call").0;
    trace.events[next..]
        .iter()
        .filter(|e| e.side == Side::Server)
        .filter_map(|e| match &e.kind {
            EventKind::Send(w) => w.msg.as_ref(),
            _ => None,
        })
        .filter(|m| {
            m["method"] == "notifications/progress" && &m["params"]["progressToken"] == token
        })
        .count()
}

#[test]
fn java_clients_through_serve_on_both_transports() {
    let Some(java) = java_sdk() else { return };
    for stack in ["modern", "legacy"] {
        let (speaks, rules, exit): (_, &[&str], _) = match stack {
            "modern" => ("2026-07-28", &[], 0),
            _ => ("2025-11-25", &["declared-deadline"], 1),
        };
        let dir = scratch(&format!("java-client-{stack}-stdio"));
        let case = against_stdio_serve(client(&java, stack), &dir, "timeout=6000", &[]);
        let what = format!("{stack} stdio: {}", case.describe());
        assert_eq!(
            case.outcome_names(),
            ["result", "timeout", "result"],
            "{what}"
        );
        assert_eq!(case.report["era"], speaks, "{what}");
        assert_eq!(case.rules(), rules, "{what}");
        let posted = usize::from(stack == "modern");
        assert_eq!(cancels_posted(&case.trace), posted, "{what}");

        let dir = scratch(&format!("java-client-{stack}-http"));
        let (case, code) = against_http_serve(client(&java, stack), &dir, "timeout=6000");
        let what = format!("{stack} http: {}", case.describe());
        assert_eq!(
            case.outcome_names(),
            ["result", "timeout", "result"],
            "{what}"
        );
        assert_eq!(case.report["era"], speaks, "{what}");
        assert_eq!(case.rules(), rules, "{what}");
        assert_eq!(code, exit, "{what}");
        // Over HTTP the modern client closes the stream (no notification); the legacy one
        // neither closes it nor posts a cancel.
        assert_eq!(cancels_posted(&case.trace), 0, "{what}");
        assert_eq!(case.cancels_seen(), posted, "{what}");
    }
}

/// A whole Java session of each stack through `record` on stdio: the modern client's cancel
/// reaches the modern server, which sends nothing more for the call; the legacy pair has no
/// cancellation at all: no notification, and the timed-out call's work runs on, its progress
/// still coming after the client has moved on to the next call.
#[test]
fn java_sessions_through_record() {
    let Some(java) = java_sdk() else { return };
    for stack in ["modern", "legacy"] {
        let dir = scratch(&format!("java-record-{stack}"));
        let trace_path = dir.join("trace.jsonl");
        let out = client(&java, stack)
            .args(["--", MCP_SIM, "record", "--trace"])
            .arg(&trace_path)
            .arg("--")
            .args(server(&java, stack))
            .output()
            .expect("the client runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(r#""outcome":"timeout""#),
            "{stack}: {stdout}"
        );
        let trace = Trace::from_jsonl(&read_when_written(&trace_path)).expect("a trace");
        let verdict = mcp_sim::oracle::check(&trace, &mcp_sim::oracle::OracleConfig::default());
        let era = if stack == "modern" {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(verdict.era.era.version(), era, "{stack}");
        let rules: Vec<&str> = verdict.violations.iter().map(|v| v.rule).collect();
        assert_eq!(rules, Vec::<&str>::new(), "{stack}: {}", trace.to_jsonl());
        // The calls' answers the server sent, and whether the timed-out second call's work
        // ran on once the client had moved on: the modern one stops at its cancel, the legacy
        // one runs on, uncancelled, until the session ends.
        let tool_answers = trace
            .events
            .iter()
            .filter(|e| e.side == Side::Server)
            .filter(|e| match &e.kind {
                EventKind::Send(w) => w
                    .msg
                    .as_ref()
                    .is_some_and(|m| m.pointer("/result/content").is_some()),
                _ => false,
            })
            .count();
        let ran_on = progress_after_the_next_call(&trace, 1);
        let what = format!("{stack}: {}", trace.to_jsonl());
        assert_eq!(
            (cancels_posted(&trace), tool_answers),
            (usize::from(stack == "modern"), 2),
            "{what}"
        );
        if stack == "modern" {
            assert_eq!(ran_on, 0, "{what}");
        } else {
            assert!(ran_on > 0, "{what}");
        }
    }
}
