//! `mcp-sim probe` in the legacy era (docs/spec/mcp-2025-11-25.md): the default auto mode
//! falls back to `initialize` when a legacy-only server refuses `server/discover`, the
//! barrier after a stdio cancel is a `ping`, the verdict names the era spoken and judges by
//! its rules, and over HTTP the probe opens a session and ends it with `DELETE`.
//!
//! The servers are the raw stdio server in its legacy mode (`tests/peers/raw_stdio_server.py
//! MODE legacy`, standard library only) and `mcp-sim serve --http` (dual-era). The timing is
//! real, so margins are wide: calls last about 1.2 s and the decisive evidence is a barrier.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use mcp_sim::trace::{EventKind, Trace};
use serde_json::Value;

use common::probe::SLOW;

fn legacy_server(mode: &str) -> Vec<String> {
    let script = common::repo().join("tests/peers/raw_stdio_server.py");
    vec![
        "python3".into(),
        script.display().to_string(),
        mode.into(),
        "legacy".into(),
    ]
}

fn trace_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-sim-probe-legacy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(format!("{name}.jsonl"))
}

fn probe_stdio(name: &str, mode: &str, extra: &[&str]) -> (i32, Value, Trace) {
    let path = trace_path(name);
    let path_text = path.display().to_string();
    let mut args = vec!["--seed", "1", "--trace", &path_text];
    args.extend_from_slice(SLOW);
    args.extend_from_slice(extra);
    let server = legacy_server(mode);
    let server: Vec<&str> = server.iter().map(String::as_str).collect();
    let (code, v) = common::probe::probe_json(&args, &server);
    let trace = Trace::from_jsonl(&std::fs::read_to_string(&path).expect("trace written"))
        .expect("trace parses");
    (code, v, trace)
}

/// The methods of the client's sends, in order.
fn sent_methods(trace: &Trace) -> Vec<String> {
    trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Send(w) => w
                .msg
                .as_ref()
                .and_then(|m| m.get("method"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        })
        .collect()
}

fn rules(v: &Value) -> Vec<(String, String)> {
    v["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|x| {
            (
                x["rule"].as_str().unwrap_or_default().to_owned(),
                x["level"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn auto_mode_falls_back_to_initialize_and_a_correct_legacy_server_is_clean() {
    let (code, v, trace) = probe_stdio("auto-correct", "correct", &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["verdict"], "clean", "{v:#}");
    assert_eq!(v["era_asked"], "auto", "{v:#}");
    assert_eq!(v["era"], "2025-11-25", "{v:#}");
    let methods = sent_methods(&trace);
    assert_eq!(methods[0], "server/discover", "{methods:?}");
    assert_eq!(methods[1], "initialize", "the fallback: {methods:?}");
    assert!(
        v["coverage"]["cancels_met_running_work"].as_u64() >= Some(1),
        "{v:#}"
    );
    // Every cancel is followed by a ping, the legacy era's barrier.
    let cancels = methods
        .iter()
        .filter(|m| *m == "notifications/cancelled")
        .count();
    let pings = methods.iter().filter(|m| *m == "ping").count();
    assert!(cancels >= 1 && pings >= cancels, "{methods:?}");
}

#[test]
fn a_legacy_server_that_answers_cancels_breaks_a_should_not_a_must() {
    let (code, v, _) = probe_stdio(
        "legacy-answer-cancel",
        "answer-cancel",
        &["--era", "legacy"],
    );
    assert_eq!(v["era_asked"], "2025-11-25", "{v:#}");
    assert_eq!(v["era"], "2025-11-25", "{v:#}");
    let found = rules(&v);
    assert!(
        found
            .iter()
            .any(|(r, l)| r == "response-after-cancel" && l == "SHOULD"),
        "a response after a cancel is a SHOULD in the legacy era (LC10): {v:#}"
    );
    assert!(found.iter().all(|(_, l)| l != "MUST"), "{v:#}");
    assert_eq!(code, 0, "{v:#}");
}

/// `mcp-sim serve --http` on a port it picks, until dropped.
struct Serve(Child, u16);

impl Serve {
    fn start() -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
            .args(["serve", "--http", "127.0.0.1:0", "--max-seconds", "120"])
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("mcp-sim serve runs");
        let stderr = child.stderr.take().expect("piped stderr");
        let mut lines = BufReader::new(stderr).lines();
        let port = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                let (_, rest) = l.rsplit_once("127.0.0.1:")?;
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .expect("serve names its port");
        // Keep draining its stderr so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Serve(child, port)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn over_http_the_legacy_probe_opens_a_session_and_deletes_it_at_the_end() {
    let serve = Serve::start();
    let path = trace_path("http-legacy");
    let path_text = path.display().to_string();
    let url = format!("http://127.0.0.1:{}/mcp", serve.1);
    let mut args = vec![
        "--seed", "2", "--era", "legacy", "--url", &url, "--trace", &path_text,
    ];
    args.extend_from_slice(SLOW);
    let (code, v) = common::probe::probe_json(&args, &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["era"], "2025-11-25", "{v:#}");
    let trace =
        Trace::from_jsonl(&std::fs::read_to_string(&path).expect("trace")).expect("trace parses");
    let delete = trace.events.iter().position(|e| {
        matches!(&e.kind, EventKind::Open { method, headers: Some(h), .. }
            if method == "DELETE" && h.contains_key("mcp-session-id"))
    });
    let delete = delete.expect("the session ends with a DELETE carrying its id");
    let answered = trace.events[delete..].iter().any(
        |e| matches!(&e.kind, EventKind::Status { status, .. } if (200..300).contains(status)),
    );
    assert!(answered, "the server accepted the DELETE");
}

/// `serve --era` pins the reference server to one era: the auto-mode probe meets a
/// legacy-only server by falling back and a modern-only one by staying modern, clean both
/// times.
#[test]
fn the_auto_probe_follows_the_era_serve_is_pinned_to() {
    let bin = env!("CARGO_BIN_EXE_mcp-sim");
    for (pinned, spoken) in [("legacy", "2025-11-25"), ("modern", "2026-07-28")] {
        let mut args = vec!["--seed", "1"];
        args.extend_from_slice(SLOW);
        let (code, v) = common::probe::probe_json(&args, &[bin, "serve", "--era", pinned]);
        assert_eq!(code, 0, "serve --era {pinned}: {v:#}");
        assert_eq!(v["era"], spoken, "serve --era {pinned}: {v:#}");
    }
}
