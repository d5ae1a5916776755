//! `mcp-sim probe --url` through its relay: the simulation's proxy presets, added latency and
//! resets in the middle of a stream, against a raw Streamable HTTP server
//! (`tests/peers/raw_http_server.py`, Python standard library only).
//!
//! Each fault must be visible in the trace (a `fault` event, a `close` by the proxy with its
//! reason, a gateway status) and must not be blamed on a server that did nothing wrong.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use mcp_sim::trace::{EventKind, Side, Trace};
use serde_json::Value;

/// The raw server on a free port; killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(flags: &[&str]) -> Server {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/peers/raw_http_server.py");
        // Port 0: the server binds a free port itself and writes it once it listens, so no
        // other process can take the port between picking it and binding it.
        let mut child = Command::new("python3")
            .arg(script)
            .arg("0")
            .args(flags)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the raw HTTP server's stdout");
        let port = line.trim().parse().unwrap_or_else(|_| {
            let status = child.try_wait();
            panic!("the raw HTTP server wrote no port ({line:?}, exit status {status:?})")
        });
        Server { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the probe; returns its exit code, JSON verdict and trace.
fn probe(server: &Server, name: &str, args: &[&str]) -> (i32, Value, Trace) {
    let dir = std::env::temp_dir().join(format!("mcp-sim-http-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let trace_path = dir.join(format!("{name}.jsonl"));
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--format", "json", "--url", &server.url()])
        .args(args)
        .arg("--trace")
        .arg(&trace_path)
        .output()
        .expect("mcp-sim runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let verdict: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON verdict ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let text = std::fs::read_to_string(&trace_path).expect("the trace");
    let trace = Trace::from_jsonl(&text).expect("the trace reads back");
    (out.status.code().unwrap_or(-1), verdict, trace)
}

fn proxy_closes(trace: &Trace, reason: &str) -> usize {
    trace
        .events
        .iter()
        .filter(|e| {
            matches!(&e.kind, EventKind::Close { by: Side::Proxy, reason: Some(r), .. } if r == reason)
        })
        .count()
}

fn rules(v: &Value) -> Vec<&str> {
    v["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .filter_map(|x| x["rule"].as_str())
        .collect()
}

#[test]
fn latency_and_resets_are_recorded_and_a_correct_server_stays_clean() {
    let server = Server::start(&[]);
    let (code, v, trace) = probe(
        &server,
        "latency-reset",
        &[
            "--seed",
            "3",
            "--calls",
            "8",
            "--args",
            r#"{"steps":5,"step_ms":150}"#,
            "--cancel-percent",
            "40",
            "--latency-ms",
            "5..40",
            "--reset-percent",
            "60",
            "--drain-ms",
            "600",
        ],
    );
    assert_eq!(code, 0, "{v:#}");
    let faults = &v["coverage"]["faults"];
    assert!(faults["latency"].as_u64() >= Some(8), "{v:#}");
    assert!(faults["reset"].as_u64() >= Some(1), "{v:#}");
    assert!(
        proxy_closes(&trace, "reset") >= 1,
        "a planned reset cut a stream in its middle: {v:#}"
    );
}

#[test]
fn a_silent_start_behind_cloudflare_gets_524_and_is_named_an_idle_cut() {
    // Cloudflare's behaviour with a 1 s idle timeout instead of 100 s.
    let server = Server::start(&["--head-delay-ms", "2500"]);
    let (code, v, trace) = probe(
        &server,
        "cloudflare",
        &[
            "--calls",
            "1",
            "--cancel-percent",
            "0",
            "--args",
            r#"{"steps":1,"step_ms":50}"#,
            "--proxy",
            "cloudflare",
            "--proxy-idle-ms",
            "1000",
            "--timeout-ms",
            "8000",
            "--drain-ms",
            "200",
        ],
    );
    let statuses: Vec<u16> = trace
        .events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Status { status, .. } => Some(status),
            _ => None,
        })
        .collect();
    assert!(statuses.contains(&524), "statuses {statuses:?}: {v:#}");
    assert!(proxy_closes(&trace, "idle") >= 1, "{v:#}");
    assert!(rules(&v).contains(&"idle-stream-cut"), "{v:#}");
    // No call got a result: the run is inconclusive, not a pass.
    assert_eq!(code, 3, "{v:#}");
}

#[test]
fn nginx_buffers_progress_unless_the_server_opts_out() {
    let args = [
        "--calls",
        "1",
        "--cancel-percent",
        "0",
        "--args",
        r#"{"steps":4,"step_ms":300}"#,
        "--proxy",
        "nginx",
        "--drain-ms",
        "200",
        // The receipts counted below are the calls' only.
        "--no-origin-check",
    ];
    // Progress times relative to the result's, per call: buffered progress arrives with it.
    let spread = |trace: &Trace| -> u64 {
        let recv: Vec<u64> = trace
            .events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Recv(_)))
            .map(|e| e.t)
            .collect();
        let last = *recv.last().expect("messages");
        // The last call's messages: the last five receipts (four progress, one result).
        last - recv[recv.len() - 5]
    };
    let buffered = Server::start(&["--no-accel-header"]);
    let (code, v, trace) = probe(&buffered, "nginx-buffered", &args);
    assert_eq!(code, 0, "{v:#}");
    assert!(
        spread(&trace) < 200,
        "held until the end: {} ms\n{v:#}",
        spread(&trace)
    );
    let streaming = Server::start(&[]);
    let (code, v, trace) = probe(&streaming, "nginx-streaming", &args);
    assert_eq!(code, 0, "{v:#}");
    assert!(
        spread(&trace) >= 600,
        "streamed as sent: {} ms\n{v:#}",
        spread(&trace)
    );
}

/// A server that stops answering mid-run: the call it wedged on times out or is cancelled, the
/// liveness check after it (`tools/list`, 2026-07-28) goes unanswered, and the probe names it
/// and stops there (an HTTP server is not the probe's to restart).
#[test]
fn a_wedged_http_server_is_named_unresponsive() {
    let server = Server::start(&["--hang-after", "3"]);
    let (code, v, _) = probe(
        &server,
        "wedged",
        &[
            "--seed",
            "1",
            "--calls",
            "4",
            "--args",
            r#"{"steps":6,"step_ms":200}"#,
            "--timeout-ms",
            "2000",
            "--liveness-ms",
            "1500",
            "--drain-ms",
            "300",
        ],
    );
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["verdict"], "server-fault", "{v:#}");
    let findings: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["finding"].as_str())
        .collect();
    assert_eq!(findings, ["unresponsive-after-cancel"], "{v:#}");
}
