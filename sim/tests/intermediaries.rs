//! The intermediaries people put between hosts and servers, installed by the tests at pinned
//! versions (`common::peers`) and judged by `mcp-sim check-proxy`: the reference client on
//! the front, the reference server as the upstream, both hops in one trace. Each is held to
//! a pinned baseline of its findings (`tests/baselines/*.txt`): an unexpected finding fails,
//! and so does an entry that no longer occurs.
//!
//! | intermediary | front | upstream | eras (front, upstream) | baseline |
//! | --- | --- | --- | --- | --- |
//! | npm `mcp-proxy` 6.7.19 | HTTP, 2026-07-28 | stdio | 2026-07-28, 2025-11-25 | nothing: a stream close goes upstream as `notifications/cancelled` |
//! | npm `mcp-proxy` 6.7.19 | HTTP, 2025-11-25 | stdio | 2025-11-25, 2025-11-25 | nothing |
//! | PyPI `mcp-proxy` 0.13.0, server mode | HTTP (JSON only) | stdio | 2025-11-25, 2025-11-25 | `progress-forwarded`, `cancel-forwarded` |
//! | PyPI `mcp-proxy` 0.13.0, client mode | stdio | HTTP | 2025-11-25, 2025-11-25 | `cancel-answered-locally`, `cancel-forwarded`, `response-after-cancel`; on some seeds also `progress-after-completion` (MUST: upstream progress passed on after its own answer to the cancel, a race the wall clock decides) |
//! | npm `mcp-remote` 0.15.1, `--protocol legacy` | stdio, 2025-11-25 | HTTP | 2025-11-25, 2025-11-25 | nothing (a side session and GET probes, each its own connection) |
//! | npm `mcp-remote` 0.15.1, `--protocol auto` | stdio, 2025-11-25 | HTTP | 2025-11-25, 2026-07-28 | see `tests/baselines/mcp-remote-auto.txt` |
//! | npm `mcp-remote` 0.15.1, a 2026-07-28 host, either protocol | stdio, 2026-07-28 | HTTP | 2026-07-28, 2026-07-28 | see `tests/baselines/mcp-remote-modern-host*.txt` |
//! | npm `supergateway` 4.0.0, stdio→Streamable HTTP, stateless | HTTP | stdio, a child per request | both eras | see `tests/baselines/supergateway-stateless-*.txt` |
//! | npm `supergateway` 4.0.0, stdio→Streamable HTTP, `--stateful` | HTTP | stdio | both eras | see `tests/baselines/supergateway-stateful-*.txt` |
//! | npm `supergateway` 4.0.0, Streamable HTTP→stdio | stdio | HTTP | 2025-11-25; a 2026-07-28 host is not served | see `tests/baselines/supergateway-stdio-front-legacy.txt` |
//!
//! `npm_mcp_proxy_times_calls_out_as_documented` holds npm `mcp-proxy`'s `--requestTimeout`
//! to `intermediary-timeout`, on one seed (the schedule has no cancels to draw).
//!
//! Each case runs the seeds of `MCP_SIM_PEER_SEEDS` (as `legacy_peers.rs`; default `1`).
//! Wall-clock margins: calls of 3 s (three steps of 1 s, progress after each), every
//! scheduled call cancelled in its first two fifths, the grace window of 1 s; a run takes
//! about 15 s.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::check_proxy::{check_proxy, SCHEDULE};
use common::peers::{mcp_remote, npm_mcp_proxy, python_mcp_proxy, supergateway};
use common::repo;
use mcp_sim::trace::{EventKind, Hop, Side, Trace};
use serde_json::Value;

fn baseline(name: &str) -> String {
    repo()
        .join("tests/baselines")
        .join(name)
        .display()
        .to_string()
}

/// A trace file of its own for one run.
fn trace_path(name: &str, seed: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-sim-intermediaries-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir.join(format!("{name}-{seed}.jsonl"))
}

/// How many messages with `method` the upstream received.
fn upstream_received(trace: &Trace, method: &str) -> usize {
    trace
        .events
        .iter()
        .filter(|e| e.hop == Some(Hop::Back) && e.side == Side::Server)
        .filter(|e| match &e.kind {
            EventKind::Recv(w) => w
                .msg
                .as_ref()
                .and_then(|m| m.get("method"))
                .is_some_and(|m| m == method),
            _ => false,
        })
        .count()
}

/// Runs one case over the seeds: the eras read, the baseline agreed with, calls reaching the
/// upstream and cancels made on the front. Returns the traces.
///
/// `racy` names findings that the wall clock lets show on some seeds only (a race inside the
/// intermediary): a run may break them beyond its baseline, and nothing else.
fn judge(
    name: &str,
    era: &str,
    (front_era, upstream_era): (&str, &str),
    front: &[&str],
    intermediary: &[&str],
    racy: &[&str],
) -> Vec<Trace> {
    let file = baseline(&format!("{name}.txt"));
    let mut traces = Vec::new();
    for seed in common::peer_seeds() {
        let mut args = vec!["--seed", &seed, "--era", era, "--baseline", &file];
        args.extend_from_slice(SCHEDULE);
        args.extend_from_slice(front);
        let path = trace_path(name, &seed);
        let (code, v, trace) = check_proxy(&args, intermediary, &path);
        let context = format!("{name} seed {seed}: {v:#}");
        assert_eq!(v["era"], front_era, "{context}");
        assert_eq!(v["upstream_era"], upstream_era, "{context}");
        let unexpected: Vec<&str> = v["baseline"]["unexpected"]
            .as_array()
            .expect("a baseline diff")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(v["baseline"]["stale"], serde_json::json!([]), "{context}");
        assert!(unexpected.iter().all(|u| racy.contains(u)), "{context}");
        let expected_code = if unexpected.is_empty() { 0 } else { 1 };
        assert_eq!(code, expected_code, "{context}");
        assert!(v["coverage"]["cancels"].as_u64() > Some(0), "{context}");
        assert!(upstream_received(&trace, "tools/call") >= 4, "{context}");
        traces.push(trace);
    }
    traces
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `mcp-proxy --port {port} --host 127.0.0.1 -- {upstream}`: either `mcp-proxy` (npm, or PyPI
/// in server mode) with an HTTP front and the reference server as its stdio child.
fn http_front_bridge(proxy: &std::path::Path) -> Vec<String> {
    let mut args = vec![proxy.display().to_string()];
    args.extend(
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
    args
}

#[test]
fn npm_mcp_proxy_turns_a_closed_modern_stream_into_a_legacy_cancel() {
    let Some(proxy) = npm_mcp_proxy() else { return };
    let intermediary = http_front_bridge(&proxy);
    let traces = judge(
        "npm-mcp-proxy-modern",
        "modern",
        ("2026-07-28", "2025-11-25"),
        &["--front-url", "http://127.0.0.1:{port}/mcp"],
        &strs(&intermediary),
        &[],
    );
    for t in &traces {
        assert!(
            upstream_received(t, "notifications/cancelled") > 0,
            "no cancel went upstream"
        );
    }
}

#[test]
fn npm_mcp_proxy_passes_legacy_cancels_and_progress_on() {
    let Some(proxy) = npm_mcp_proxy() else { return };
    let intermediary = http_front_bridge(&proxy);
    judge(
        "npm-mcp-proxy-legacy",
        "2025-11-25",
        ("2025-11-25", "2025-11-25"),
        &["--front-url", "http://127.0.0.1:{port}/mcp"],
        &strs(&intermediary),
        &[],
    );
}

#[test]
fn pypi_mcp_proxy_server_mode_drops_progress_and_cancels() {
    let Some(proxy) = python_mcp_proxy() else {
        return;
    };
    let intermediary = http_front_bridge(&proxy);
    judge(
        "pypi-mcp-proxy-server-mode",
        "auto",
        ("2025-11-25", "2025-11-25"),
        &["--front-url", "http://127.0.0.1:{port}/mcp"],
        &strs(&intermediary),
        &[],
    );
}

#[test]
fn pypi_mcp_proxy_client_mode_answers_cancels_itself() {
    let Some(proxy) = python_mcp_proxy() else {
        return;
    };
    let mut intermediary = vec![proxy.display().to_string()];
    intermediary.extend(["--transport", "streamablehttp", "{upstream-url}"].map(String::from));
    let traces = judge(
        "pypi-mcp-proxy-client-mode",
        "auto",
        ("2025-11-25", "2025-11-25"),
        &[],
        &strs(&intermediary),
        // Its own answer to a cancel can overtake a progress notification already on its way
        // from upstream, which it then passes on: on 1 seed of 20 (seed 14).
        &[mcp_sim::oracle::rule::PROGRESS_AFTER_COMPLETION],
    );
    for t in &traces {
        assert_eq!(upstream_received(t, "notifications/cancelled"), 0);
    }
}

/// `mcp-remote {upstream-url} --transport http-only --allow-http --protocol PROTOCOL`: the
/// stdio-to-remote-HTTP bridge desktop hosts use, its OAuth cache in a scratch folder.
fn mcp_remote_bridge(remote: &std::path::Path, protocol: &str) -> Vec<String> {
    let cache = std::env::temp_dir().join(format!("mcp-sim-mcp-remote-{}", std::process::id()));
    vec![
        "env".into(),
        format!("MCP_REMOTE_CONFIG_DIR={}", cache.display()),
        remote.display().to_string(),
        "{upstream-url}".into(),
        "--transport".into(),
        "http-only".into(),
        "--allow-http".into(),
        "--protocol".into(),
        protocol.into(),
        "--silent".into(),
    ]
}

#[test]
fn mcp_remote_relays_a_legacy_host_as_it_is() {
    let Some(remote) = mcp_remote() else { return };
    let traces = judge(
        "mcp-remote-legacy",
        "2025-11-25",
        ("2025-11-25", "2025-11-25"),
        &[],
        &strs(&mcp_remote_bridge(&remote, "legacy")),
        &[],
    );
    // It probes with GETs and opens a session it never uses before the one it relays on:
    // each is a connection of its own.
    for t in &traces {
        let conns: std::collections::BTreeSet<u32> =
            t.events.iter().filter_map(|e| e.conn).collect();
        assert!(conns.len() >= 2, "{conns:?}");
    }
}

#[test]
fn mcp_remote_auto_posts_a_legacy_hosts_cancel_to_a_modern_server() {
    let Some(remote) = mcp_remote() else { return };
    judge(
        "mcp-remote-auto",
        "2025-11-25",
        ("2025-11-25", "2026-07-28"),
        &[],
        &strs(&mcp_remote_bridge(&remote, "auto")),
        // Whether the upstream's answer, never cancelled, comes before the run ends.
        &[mcp_sim::oracle::rule::LATE_RESULT_FORWARDED],
    );
}

#[test]
fn mcp_remote_relays_a_modern_hosts_calls_beside_a_legacy_session() {
    let Some(remote) = mcp_remote() else { return };
    for (protocol, name) in [
        ("legacy", "mcp-remote-modern-host"),
        ("auto", "mcp-remote-modern-host-auto"),
    ] {
        judge(
            name,
            "modern",
            ("2026-07-28", "2026-07-28"),
            &[],
            &strs(&mcp_remote_bridge(&remote, protocol)),
            &[mcp_sim::oracle::rule::LATE_RESULT_FORWARDED],
        );
    }
}

/// `supergateway --stdio {upstream-line} --outputTransport streamableHttp --port {port}`
/// (with `--stateful` or not): the reference server as a child, as one command string.
fn supergateway_http_front(gateway: &std::path::Path, stateful: bool) -> Vec<String> {
    let mut args: Vec<String> = [
        &gateway.display().to_string(),
        "--stdio",
        "{upstream-line}",
        "--outputTransport",
        "streamableHttp",
        "--port",
        "{port}",
        "--logLevel",
        "none",
    ]
    .map(String::from)
    .to_vec();
    if stateful {
        args.push("--stateful".into());
    }
    args
}

/// In the legacy era a cancel is a notification of its own, which gets a child of its own:
/// the child doing the work is never told (the legacy baseline).
#[test]
fn supergateway_stateless_starts_a_child_per_request() {
    let Some([modern, _]) = supergateway_both_eras("supergateway-stateless", false) else {
        return;
    };
    for t in &modern {
        let conns: std::collections::BTreeSet<u32> =
            t.events.iter().filter_map(|e| e.conn).collect();
        assert!(conns.len() >= 6, "a child per request: {conns:?}");
    }
}

/// `supergateway` with an HTTP front judged with a host of each era, against the baselines
/// `{name}-modern` and `{name}-legacy`: the traces of each.
fn supergateway_both_eras(name: &str, stateful: bool) -> Option<[Vec<Trace>; 2]> {
    let gateway = supergateway()?;
    let front = ["--front-url", "http://127.0.0.1:{port}/mcp"];
    let bridge = supergateway_http_front(&gateway, stateful);
    Some(
        [("modern", "2026-07-28"), ("2025-11-25", "2025-11-25")].map(|(era, version)| {
            let family = if era == "modern" { "modern" } else { "legacy" };
            judge(
                &format!("{name}-{family}"),
                era,
                (version, version),
                &front,
                &strs(&bridge),
                &[],
            )
        }),
    )
}

#[test]
fn supergateway_stateful_keeps_a_child_per_session() {
    supergateway_both_eras("supergateway-stateful", true);
}

#[test]
fn supergateway_to_a_remote_server_renumbers_calls_but_not_cancels() {
    let Some(gateway) = supergateway() else {
        return;
    };
    let bridge = [
        gateway.display().to_string(),
        "--streamableHttp".into(),
        "{upstream-url}".into(),
        "--logLevel".into(),
        "none".into(),
    ];
    judge(
        "supergateway-stdio-front-legacy",
        "2025-11-25",
        ("2025-11-25", "2025-11-25"),
        &[],
        &strs(&bridge),
        // Whether a call the misrouted cancel stopped answers, or one never cancelled ends,
        // before the run does: the wall clock decides.
        &[
            mcp_sim::oracle::rule::LATE_RESULT_FORWARDED,
            mcp_sim::oracle::rule::RESPONSE_AFTER_CANCEL,
            mcp_sim::oracle::rule::CANCEL_UNKNOWN_REQUEST,
        ],
    );
    // A 2026-07-28 host: its calls go up in the legacy session with their modern `_meta`,
    // and every one comes back an error; nothing is exercised, and the verdict says so.
    for seed in common::peer_seeds() {
        let path = trace_path("supergateway-stdio-front-modern", &seed);
        let mut args = vec!["--seed", &seed, "--era", "modern"];
        args.extend_from_slice(SCHEDULE);
        let (code, v, _) = check_proxy(&args, &strs(&bridge), &path);
        let found: Vec<&str> = v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter_map(|f| f["finding"].as_str())
            .collect();
        assert!(found.contains(&"nothing-exercised"), "{v:#}");
        assert!(
            rules_broken(&v).contains(&mcp_sim::oracle::rule::MESSAGE_SHAPE.to_string()),
            "{v:#}"
        );
        assert_eq!(code, 1, "{v:#}");
    }
}

/// The rules a verdict's `violations` name.
fn rules_broken(v: &Value) -> Vec<String> {
    v["violations"]
        .as_array()
        .expect("a list of violations")
        .iter()
        .filter_map(|x| x["rule"].as_str().map(String::from))
        .collect()
}

/// `mcp-sim check-trace --format json [--intermediary-timeout-ms MS] TRACE`: the rules broken.
fn rules_broken_in(trace: &PathBuf, timeout_ms: Option<u64>) -> Vec<String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp-sim"));
    cmd.args(["check-trace", "--format", "json"]);
    if let Some(ms) = timeout_ms {
        cmd.arg("--intermediary-timeout-ms").arg(ms.to_string());
    }
    let out = cmd.arg(trace).output().expect("mcp-sim runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON verdict");
    rules_broken(&v)
}

/// npm `mcp-proxy --requestTimeout 2000` in front of calls of 6 s: it cuts each call after
/// 2 s (an error on the front, `notifications/cancelled` upstream), as documented, so
/// `intermediary-timeout` holds with 2000 ms given and breaks with 10000 ms or none given
/// (the same trace judged again). With its default of 5 minutes and 1000 ms claimed, calls of
/// 4 s without progress stay idle past the claim: the late half breaks. Wall-clock margins:
/// the cut comes at least 2 s after the send (8 s before the 10 s claim); the 4 s calls
/// outlast the 1 s claim plus 1 s grace by 2 s.
#[test]
fn npm_mcp_proxy_times_calls_out_as_documented() {
    let Some(proxy) = npm_mcp_proxy() else { return };
    let run = |timeout: &str, claimed: &str, step_ms: &str| {
        let mut intermediary = vec![proxy.display().to_string()];
        if !timeout.is_empty() {
            intermediary.extend(["--requestTimeout".to_string(), timeout.to_string()]);
        }
        intermediary.extend(http_front_bridge(&proxy).into_iter().skip(1));
        let tool_args = format!(r#"{{"steps":1,"step_ms":{step_ms}}}"#);
        let args = [
            "--seed",
            "1",
            "--era",
            "2025-11-25",
            "--calls",
            "2",
            "--cancel-percent",
            "0",
            "--timeout-ms",
            "20000",
            "--args",
            &tool_args,
            "--intermediary-timeout-ms",
            claimed,
            "--front-url",
            "http://127.0.0.1:{port}/mcp",
        ];
        let path = trace_path(&format!("npm-timeout-{claimed}"), "1");
        let (code, v, trace) = check_proxy(&args, &strs(&intermediary), &path);
        (code, v, trace, path)
    };
    let timeout = mcp_sim::oracle::rule::INTERMEDIARY_TIMEOUT.to_string();

    let (code, v, trace, path) = run("2000", "2000", "6000");
    // Every call cut: no result, so the run is inconclusive whatever the rules say.
    assert_eq!(code, 3, "{v:#}");
    assert_eq!(v["coverage"]["errors"].as_u64(), Some(4), "{v:#}");
    assert_eq!(rules_broken(&v), Vec::<String>::new(), "{v:#}");
    assert_eq!(upstream_received(&trace, "notifications/cancelled"), 4);
    assert_eq!(rules_broken_in(&path, Some(2000)), Vec::<String>::new());
    for claim in [Some(10000), None] {
        let broken = rules_broken_in(&path, claim);
        assert_eq!(broken, vec![timeout.clone(); 4], "claimed {claim:?}");
    }

    let (code, v, _, _) = run("", "1000", "4000");
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(rules_broken(&v), vec![timeout; 4], "{v:#}");
}

/// An intermediary whose arguments name no upstream is a usage error, before anything runs.
#[test]
fn an_intermediary_without_an_upstream_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["check-proxy", "--", "cat"])
        .output()
        .expect("mcp-sim runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("{upstream}"), "{err}");
}
