//! FastMCP for TypeScript (npm `fastmcp` 4.20.16, about a million downloads a month, built on
//! the TypeScript SDK v1 with npm `mcp-proxy` as its HTTP front) as a peer, installed by the
//! tests at its pinned version (`common::peers::node_fastmcp`, from `tests/peers/fastmcp/`).
//!
//! Its server (`fastmcp_slow_server.mjs`: `slow_op` reports progress with
//! `context.reportProgress` and ignores `context.signal`, as most tools written with the
//! framework do) through `probe`, on both transports, `--era auto` and each era pinned:
//!
//! | transport | era spoken | baseline |
//! | --- | --- | --- |
//! | stdio | 2025-11-25 (auto falls back: the SDK v1 knows no `server/discover`) | clean: no progress and no answer after any cancel, though the tool runs on (the SDK v1 drops what an aborted request sends) |
//! | HTTP (`httpStream`) | 2025-11-25 (its front refuses 2026-07-28 requests) | `origin-validated` |
//!
//! Over HTTP a 2026-07-28 request is refused with `-32000` and a `reason`, where a server that
//! does not support the version MUST answer `-32022` with the versions it supports (§1.5):
//! pinned by [`fastmcp_http_front_refuses_the_modern_era_with_a_legacy_code`].
//!
//! Each probe case runs the seeds of `MCP_SIM_PEER_SEEDS` (default `1`), its baseline held over
//! them as in `go_peers.rs`.

mod common;

use std::process::Command;

use common::peers::{node_fastmcp, NodeSdk};
use common::probe::{cancelling_schedule, probe_json, probe_peer};
use common::serve::Upstream;
use mcp_sim::trace::{EventKind, Side, Trace};
use mcp_sim::wire::{DecodeOptions, Message, RequestId};

const SLOW_OP: &str = r#"{"steps":6,"step_ms":200}"#;

fn server(sdk: &NodeSdk) -> Vec<String> {
    vec![
        sdk.node.display().to_string(),
        sdk.dir
            .join("fastmcp_slow_server.mjs")
            .display()
            .to_string(),
    ]
}

fn http_server(sdk: &NodeSdk) -> Upstream {
    let mut command = Command::new(&sdk.node);
    command.arg(sdk.dir.join("fastmcp_slow_server.mjs"));
    Upstream::start(command, |c, port| {
        c.args(["--http", &port.to_string()]);
    })
}

/// What the server sent about a request after the client's cancel of it reached the wire:
/// (progress notifications, answers), counted from the raw trace, not by the oracle.
fn after_cancels(trace: &Trace) -> (usize, usize) {
    let opts = DecodeOptions::default();
    let mut cancelled: Vec<RequestId> = Vec::new();
    let mut tokens: Vec<serde_json::Value> = Vec::new();
    let mut sent_tokens: Vec<(RequestId, serde_json::Value)> = Vec::new();
    let (mut progress, mut answers) = (0, 0);
    for e in &trace.events {
        match &e.kind {
            EventKind::Send(w) if e.side == Side::Client => {
                let Ok(m) = w.decode(&opts) else { continue };
                if let Some(raw) = &w.msg {
                    if let (Some(id), Some(t)) =
                        (m.id().cloned(), raw.pointer("/params/_meta/progressToken"))
                    {
                        sent_tokens.push((id, t.clone()));
                    }
                }
                if let Message::Cancelled(c) = m {
                    let id = c.request_id;
                    if let Some((_, t)) = sent_tokens.iter().find(|(i, _)| *i == id) {
                        tokens.push(t.clone());
                    }
                    cancelled.push(id);
                }
            }
            EventKind::Recv(w) if e.side == Side::Client => {
                let Some(raw) = &w.msg else { continue };
                if let Some(t) = raw.pointer("/params/progressToken") {
                    progress += usize::from(tokens.contains(t));
                }
                if let Ok(m) = w.decode(&opts) {
                    if m.is_response() && m.id().is_some_and(|id| cancelled.contains(id)) {
                        answers += 1;
                    }
                }
            }
            _ => {}
        }
    }
    (progress, answers)
}

/// The issue's claim, checked on the raw wire beside the oracle: FastMCP's stdio server, whose
/// tool ignores its abort signal, sends neither progress nor an answer for a cancelled request.
#[test]
fn fastmcp_server_over_stdio_is_clean_in_the_legacy_era() {
    let Some(sdk) = node_fastmcp() else { return };
    let command = server(&sdk);
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    for era in ["auto", "legacy"] {
        probe_peer(
            "fastmcp-server-stdio",
            era,
            "2025-11-25",
            (&[], &command),
            SLOW_OP,
            &[],
        );
    }
    let dir = common::serve::scratch("fastmcp-stdio-wire");
    let trace_path = dir.join("trace.jsonl");
    let trace_arg = trace_path.display().to_string();
    let mut argv = vec!["--seed", "1", "--era", "legacy", "--trace", &trace_arg];
    argv.extend(cancelling_schedule("slow_op", SLOW_OP));
    let (_, v) = probe_json(&argv, &command);
    let cancels = v["coverage"]["cancels_met_running_work"]
        .as_u64()
        .unwrap_or(0);
    assert!(cancels >= 3, "{v:#}");
    let trace = Trace::from_jsonl(&std::fs::read_to_string(&trace_path).expect("the trace"))
        .expect("a trace");
    assert_eq!(after_cancels(&trace), (0, 0), "{}", trace.to_jsonl());
}

#[test]
fn fastmcp_http_server_is_judged_legacy() {
    let Some(sdk) = node_fastmcp() else { return };
    let server = http_server(&sdk);
    let url = server.url();
    for era in ["auto", "legacy"] {
        probe_peer(
            "fastmcp-server-http",
            era,
            "2025-11-25",
            (&["--url", &url], &[]),
            SLOW_OP,
            &[],
        );
    }
}

/// A 2026-07-28 request to FastMCP's HTTP front is refused, as a server without that revision
/// may, but with `-32000` and a `reason` instead of `-32022` with `data.supported`, so a
/// client cannot tell from the code which versions to retry with. Pinned as seen: the probe
/// with the era pinned exercises nothing, and says so.
#[test]
fn fastmcp_http_front_refuses_the_modern_era_with_a_legacy_code() {
    let Some(sdk) = node_fastmcp() else { return };
    let server = http_server(&sdk);
    let url = server.url();
    let mut argv = vec!["--seed", "1", "--era", "modern", "--url", &url];
    argv.extend(cancelling_schedule("slow_op", SLOW_OP));
    let (code, v) = probe_json(&argv, &[]);
    assert_ne!(code, 0, "{v:#}");
    assert_eq!(v["coverage"]["results"], 0, "{v:#}");
    let codes: Vec<i64> = v["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .filter(|x| x["rule"] == "error-code-reserved")
        .filter_map(|x| {
            x["message"]
                .as_str()?
                .strip_prefix("error ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert!(
        !codes.is_empty() && codes.iter().all(|c| *c == -32000),
        "{v:#}"
    );
}
