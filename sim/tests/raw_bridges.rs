//! `mcp-sim check-proxy` on a raw bridge whose behaviour is known
//! (`tests/peers/raw_bridge.py`, Python standard library only), one mode per behaviour of the
//! bridges people run: the verdict names what each does wrong and nothing it does right, every
//! upstream connection is judged on its own in its own era, and no finding is ever made
//! against mcp-sim's reference client or server (`judge_defects` stays empty).
//!
//! | mode | upstream | expected |
//! | --- | --- | --- |
//! | `relay` | stdio, one process | clean |
//! | `side-session` | stdio, plus an unused legacy session | clean; two connections, eras 2026-07-28 and 2025-11-25 |
//! | `child-per-request` | a process per request | clean; a connection per request |
//! | `misaddressed` | a process per request, cancels to the newest | `cancel-forwarded`, `cancel-unknown-request` (the wrong child) |
//! | `early-cancel` | stdio, cancelled 300 ms after each call | `request-id-mapping` |
//! | `http-close` | 2026-07-28 HTTP, the stream closed on cancel | clean |
//! | `http-post-cancel` | 2026-07-28 HTTP, a POSTed cancel and the stream left open | `cancel-forwarded`, `cancel-over-http` |
//! | `front-relay` (a legacy HTTP front) | stdio | clean |
//! | `front-wrong-stream` (a legacy HTTP front) | stdio, a call's progress on another call's stream | `progress-stream`, at times `progress-after-completion` |
//!
//! Wall clock: calls of 3 s, cancels in their first two fifths, the grace window of 1 s; a
//! run takes about 10 s.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::check_proxy::{check_proxy, SCHEDULE};
use common::repo;
use mcp_sim::trace::{Hop, Trace};
use serde_json::Value;

/// `mcp-sim check-proxy --format json` on `raw_bridge.py MODE`, upstream as `upstream`: the
/// exit code, the verdict and the two-hop trace.
fn check(mode: &str, upstream: &[&str], extra: &[&str]) -> (i32, Value, Trace) {
    let mut flags = vec!["--era", "modern"];
    flags.extend_from_slice(extra);
    check_scheduled(mode, upstream, &flags, SCHEDULE)
}

/// [`check`] with the probe's schedule given.
fn check_scheduled(
    mode: &str,
    upstream: &[&str],
    extra: &[&str],
    schedule: &[&str],
) -> (i32, Value, Trace) {
    let dir = std::env::temp_dir().join(format!("mcp-sim-raw-bridges-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let trace: PathBuf = dir.join(format!("{mode}.jsonl"));
    let script = repo()
        .join("tests/peers/raw_bridge.py")
        .display()
        .to_string();
    let mut args = vec!["--seed", "1"];
    args.extend_from_slice(schedule);
    args.extend_from_slice(extra);
    let mut bridge = vec!["python3", &script, mode];
    bridge.extend_from_slice(upstream);
    check_proxy(&args, &bridge, &trace)
}

fn stdio(mode: &str) -> (i32, Value, Trace) {
    let run = check(mode, &["--", "{upstream}"], &[]);
    assert!(
        run.1["coverage"]["cancels"].as_u64() > Some(0),
        "{mode}: {:#}",
        run.1
    );
    run
}

fn rules(v: &Value) -> BTreeSet<String> {
    v["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|x| x["rule"].as_str().expect("a rule").to_owned())
        .collect()
}

/// The upstream connections the trace numbers (1 when it numbers none).
fn connections(trace: &Trace) -> usize {
    let numbered: BTreeSet<u32> = trace
        .events
        .iter()
        .filter(|e| e.hop == Some(Hop::Back))
        .filter_map(|e| e.conn)
        .collect();
    numbered.len().max(1)
}

/// Asserts the run found every rule of `must` and none outside `may` (which holds `must`),
/// with the exit code that follows.
fn assert_found(mode: &str, (code, v, _): &(i32, Value, Trace), must: &[&str], may: &[&str]) {
    let found = rules(v);
    for rule in must {
        assert!(found.contains(*rule), "{mode}: {rule} not found: {v:#}");
    }
    for rule in &found {
        assert!(
            must.contains(&rule.as_str()) || may.contains(&rule.as_str()),
            "{mode}: unexpected {rule}: {v:#}"
        );
    }
    let must_level = v["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .any(|x| x["level"] == "MUST");
    assert_eq!(*code, if must_level { 1 } else { 0 }, "{mode}: {v:#}");
}

#[test]
fn a_relaying_bridge_is_clean() {
    let run = stdio("relay");
    assert_found("relay", &run, &[], &[]);
    assert_eq!(connections(&run.2), 1);
}

#[test]
fn an_unused_side_session_is_its_own_connection_in_its_own_era() {
    let run = stdio("side-session");
    assert_found("side-session", &run, &[], &[]);
    assert_eq!(connections(&run.2), 2);
    // The two children start together: either may be connection 1.
    let reading = run.1["era_reading"].as_str().expect("an era reading");
    let era_of = |c: u32| {
        ["modern", "legacy"]
            .into_iter()
            .find(|era| reading.contains(&format!("connection {c} {era}")))
    };
    let mut eras = [era_of(1), era_of(2)];
    eras.sort();
    assert_eq!(eras, [Some("legacy"), Some("modern")], "{reading}");
    // The upstream's era is that of the connection the calls went on.
    assert_eq!(run.1["upstream_era"], "2026-07-28");
}

#[test]
fn a_child_per_request_is_a_connection_each_and_cancels_follow_their_child() {
    let run = stdio("child-per-request");
    assert_found("child-per-request", &run, &[], &[]);
    assert!(connections(&run.2) >= 6, "{}", connections(&run.2));
    // Sent to the newest child, a cancel misses the one doing the work (which runs on) and
    // names a request its child never had.
    let run = stdio("misaddressed");
    assert_found(
        "misaddressed",
        &run,
        &["cancel-forwarded", "cancel-unknown-request"],
        &[
            "response-after-cancel",
            "late-result-forwarded",
            "request-id-mapping",
        ],
    );
}

#[test]
fn an_upstream_cancel_before_the_clients_is_the_bridges_own() {
    let run = stdio("early-cancel");
    assert_found("early-cancel", &run, &["request-id-mapping"], &[]);
}

#[test]
fn a_modern_http_upstream_is_cancelled_by_closing_the_stream_not_by_a_post() {
    let url = ["--url", "{upstream-url}"];
    let era = ["--upstream-era", "modern"];
    let run = check("http-close", &url, &era);
    assert_found("http-close", &run, &[], &[]);
    // The POSTed cancel is no cancel in this binding: the call runs on upstream, which is
    // right of the reference server (no disconnect-is-cancel, no response-after-cancel
    // against it) and the bridge's failure to cancel.
    let run = check("http-post-cancel", &url, &era);
    assert_found(
        "http-post-cancel",
        &run,
        &["cancel-forwarded", "cancel-over-http"],
        &["response-after-cancel", "late-result-forwarded"],
    );
}

/// A legacy-era HTTP front (`--port`): calls left to run side by side, every progress on its
/// own POST's stream, or each on another call's stream still open (`progress-stream`, SHOULD
/// in this era: a POST's stream carries what relates to its request; and at times
/// `progress-after-completion`, when the misrouted progress arrives after its call's answer).
#[test]
fn progress_on_another_calls_stream_is_flagged_in_the_legacy_era() {
    let front = [
        "--era",
        "2025-11-25",
        "--front-url",
        "http://127.0.0.1:{port}/mcp",
    ];
    let calls = [
        "--calls",
        "4",
        "--cancel-percent",
        "0",
        "--max-seconds",
        "60",
    ];
    let upstream = ["--port", "{port}", "--", "{upstream}"];
    let run = check_scheduled("front-relay", &upstream, &front, &calls);
    assert_found("front-relay", &run, &[], &[]);
    let run = check_scheduled("front-wrong-stream", &upstream, &front, &calls);
    // Sent on another stream, a call's last progress can reach the client after the call's
    // own answer did (the two streams keep no order between them): on some runs the wire
    // shows that too.
    assert_found(
        "front-wrong-stream",
        &run,
        &["progress-stream"],
        &["progress-after-completion"],
    );
    assert_eq!(run.1["era"], "2025-11-25");
}
