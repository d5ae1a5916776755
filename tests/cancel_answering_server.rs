//! A hand-written stdio server plugged into the simulation, recorded at its own end, with and
//! without the bug of python-sdk #1419: answering each `notifications/cancelled` with an error
//! response ("Request cancelled") for the request it cancels, right after reading it. §3.3
//! forbids any response to a cancelled request; the oracle's `response-after-cancel` rule
//! judges it from the server's own observations (its `recv` of the cancel, its `send` of the
//! error), with no grace window.

#![cfg(feature = "turmoil")]

use std::collections::BTreeMap;
use std::time::Duration;

use mcp_sim::lanes::turmoil::{ServerIo, ServerUnderTest, TurmoilOptions};
use mcp_sim::model::Transport;
use mcp_sim::oracle::{self, rule};
use mcp_sim::run::{judge_with_server, Judged};
use mcp_sim::scenario::Scenario;
use mcp_sim::trace::{EventKind, Side, Trace};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::task::{spawn_local, AbortHandle};

/// One `slow_op` call: `steps` sleeps of `step_ms`, progress after each when asked for, then
/// the result.
async fn slow_op(call: Value, out: UnboundedSender<Value>) {
    let args = &call["params"]["arguments"];
    let (steps, step_ms) = (args["steps"].as_u64(), args["step_ms"].as_u64());
    let token = &call["params"]["_meta"]["progressToken"];
    for done in 1..=steps.unwrap_or(1) {
        tokio::time::sleep(Duration::from_millis(step_ms.unwrap_or(100))).await;
        if !token.is_null() {
            let progress = json!({"progressToken": token, "progress": done});
            let _ = out.send(
                json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}),
            );
        }
    }
    let result = json!({"resultType": "complete", "content": []});
    let _ = out.send(json!({"jsonrpc": "2.0", "id": call["id"], "result": result}));
}

/// The server: calls run as tasks, a cancel aborts its call's task. `answers_cancels` adds the
/// bug: the aborted call is also answered, with the error python-sdk sent.
async fn serve(io: ServerIo, answers_cancels: bool) {
    let ServerIo::Stdio(stream) = io else { return };
    let (read, mut write) = stream.into_split();
    // Calls hand their messages to one writer, so aborting a call never cuts a line short.
    let (out, mut outbox) = unbounded_channel::<Value>();
    spawn_local(async move {
        while let Some(msg) = outbox.recv().await {
            if write
                .write_all(format!("{msg}\n").as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    });
    let mut calls: BTreeMap<String, AbortHandle> = BTreeMap::new();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let msg: Value = serde_json::from_str(&line).unwrap_or_default();
        calls.retain(|_, call| !call.is_finished());
        match (msg["method"].as_str(), msg.get("id")) {
            (Some("tools/call"), Some(id)) => {
                let key = id.to_string();
                calls.insert(key, spawn_local(slow_op(msg, out.clone())).abort_handle());
            }
            (Some("notifications/cancelled"), None) => {
                let id = &msg["params"]["requestId"];
                let Some(call) = calls.remove(&id.to_string()) else {
                    continue;
                };
                call.abort();
                if answers_cancels {
                    let error = json!({"code": 0, "message": "Request cancelled"});
                    let _ = out.send(json!({"jsonrpc": "2.0", "id": id, "error": error}));
                }
            }
            (_, Some(id)) => {
                let error = json!({"code": -32601, "message": "method not found"});
                let _ = out.send(json!({"jsonrpc": "2.0", "id": id, "error": error}));
            }
            _ => {}
        }
    }
}

fn judge(seed: u64, answers_cancels: bool) -> Judged {
    let server = ServerUnderTest::custom(move |io| serve(io, answers_cancels));
    let scenario = Scenario::from_seed(seed).with_transport(Transport::Stdio);
    judge_with_server(&scenario, &TurmoilOptions::default(), &server)
}

/// The message of event `i` when `side` sent (`sending`) or received it.
fn message(trace: &Trace, i: usize, side: Side, sending: bool) -> Option<&Value> {
    let e = &trace.events[i];
    match (&e.kind, sending) {
        (EventKind::Send(w), true) | (EventKind::Recv(w), false) if e.side == side => {
            w.msg.as_ref()
        }
        _ => None,
    }
}

/// Whether the server wrote a "Request cancelled" error: the bug showed on this seed.
fn answered_a_cancel(trace: &Trace) -> bool {
    (0..trace.events.len()).any(|i| {
        message(trace, i, Side::Server, true)
            .is_some_and(|m| m["error"]["message"] == "Request cancelled")
    })
}

/// Whether the server read a cancel for a call it had read and not answered yet.
fn cancel_reached_a_running_call(trace: &Trace) -> bool {
    let mut running = Vec::new();
    for i in 0..trace.events.len() {
        if let Some(m) = message(trace, i, Side::Server, false) {
            match m["method"].as_str() {
                Some("tools/call") => running.push(m["id"].clone()),
                Some("notifications/cancelled") if running.contains(&m["params"]["requestId"]) => {
                    return true
                }
                _ => {}
            }
        }
        if let Some(m) = message(trace, i, Side::Server, true) {
            running.retain(|id| *id != m["id"]);
        }
    }
    false
}

const SEEDS: std::ops::Range<u64> = 0..24;

/// On every seed where the server received a cancel for a call still running, the buggy
/// server fails with `response-after-cancel`, and the violation points at the server's own
/// events: its `recv` of the cancel, then its `send` of the error for the same request. The
/// same server without the bug is clean on the same seeds.
#[test]
fn answering_a_cancel_breaks_response_after_cancel_at_the_servers_end() {
    let mut caught = Vec::new();
    for seed in SEEDS {
        let good = judge(seed, false);
        assert!(good.run.complete, "seed {seed} did not settle");
        assert!(
            good.verdict.violations.is_empty(),
            "seed {seed}: {:?}",
            good.verdict.violations
        );
        let bad = judge(seed, true);
        let trace = &bad.run.trace;
        // The bug shows exactly where a cancel reaches a running call.
        assert_eq!(
            answered_a_cancel(trace),
            cancel_reached_a_running_call(&good.run.trace),
            "seed {seed}"
        );
        if !answered_a_cancel(trace) {
            assert!(!bad.fails(), "seed {seed}: {:?}", bad.verdict.violations);
            continue;
        }
        assert!(bad.fails(), "seed {seed}");
        assert_eq!(bad.rules(), [rule::RESPONSE_AFTER_CANCEL], "seed {seed}");
        for v in &bad.verdict.violations {
            let [cancel, answer] = v.events[..] else {
                panic!("seed {seed}: {v}");
            };
            let cancel = message(trace, cancel, Side::Server, false).expect("server recv");
            let answer = message(trace, answer, Side::Server, true).expect("server send");
            assert_eq!(cancel["method"], "notifications/cancelled", "seed {seed}");
            assert_eq!(
                answer["error"]["message"], "Request cancelled",
                "seed {seed}"
            );
            assert_eq!(cancel["params"]["requestId"], answer["id"], "seed {seed}");
        }
        caught.push(seed);
    }
    println!("caught on seeds {caught:?}");
    assert_eq!(caught.first(), Some(&0), "seed 0 cancels a running call");
    assert!(caught.len() >= 3, "{caught:?}");
}

/// Seen only from the client's side, the same run looks clean: the error follows the client's
/// cancel by less than the grace window, which the oracle grants a server it cannot see. The
/// server's own events are what make the verdict.
#[test]
fn from_the_clients_side_alone_the_grace_window_hides_the_bug() {
    let bad = judge(1, true);
    assert!(bad.verdict.violates(rule::RESPONSE_AFTER_CANCEL));
    let mut client_only = bad.run.trace.clone();
    client_only.events.retain(|e| e.side != Side::Server);
    let config = bad.run.oracle_config(&Scenario::from_seed(1));
    let report = oracle::check(&client_only, &config);
    assert!(!report.violates(rule::RESPONSE_AFTER_CANCEL), "{report:?}");
}

/// Same seed, same trace, the server's side included.
#[test]
fn custom_server_runs_replay() {
    for seed in [1, 5, 11] {
        for answers_cancels in [false, true] {
            let first = judge(seed, answers_cancels).run.trace;
            let second = judge(seed, answers_cancels).run.trace;
            assert!(first.events.iter().any(|e| e.side == Side::Server));
            assert_eq!(first.digest(), second.digest(), "seed {seed}");
        }
    }
}

#[test]
fn the_one_call_check_fails_the_buggy_server_with_a_report_and_passes_the_correct_one() {
    use mcp_sim::{check_server, CheckOptions};
    let options = CheckOptions {
        transports: vec![Transport::Stdio],
        ..CheckOptions::seeds(0..8)
    };
    let buggy = ServerUnderTest::custom(|io| serve(io, true));
    let failure = check_server(&buggy, &options).expect_err("the bug is found");
    let text = failure.to_string();
    for needle in [
        "response-after-cancel",
        "§3.3 item 6",
        "MCP_SIM_SEED=",
        "sequenceDiagram",
        "scenario: seed=",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    let correct = ServerUnderTest::custom(|io| serve(io, false));
    let summary = check_server(&correct, &options).unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(summary.runs, 8);
    assert!(summary.requests > 0);
}

/// The README's sample failure is what `check_server` prints for this server: each of its
/// lines (a trailing ` ...` marks one cut short) begins a line of the real report, in order.
#[test]
fn the_readme_sample_is_what_check_server_prints() {
    let server = ServerUnderTest::custom(move |io| serve(io, true));
    let options = mcp_sim::CheckOptions {
        seeds: 0..1,
        transports: vec![Transport::Stdio],
        ..mcp_sim::CheckOptions::default()
    };
    let failure = mcp_sim::check_server(&server, &options).expect_err("the server answers cancels");
    let report = failure.to_string();
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("the README");
    let start = readme
        .find("```\nmcp-sim: seed ")
        .expect("the README's sample")
        + 4;
    let sample = &readme[start..start + readme[start..].find("```").expect("its end")];
    let mut real = report.lines();
    for line in sample.lines() {
        let want = line.strip_suffix(" ...").unwrap_or(line);
        assert!(
            real.any(|l| l.starts_with(want)),
            "the README's line\n  {line}\nis not (in this order) in the report:\n{report}"
        );
    }
}
