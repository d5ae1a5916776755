//! Interrupted runs lose nothing: SIGINT and SIGTERM end `probe` and `check-proxy` cleanly
//! (open calls cancelled, every process they started ended, their temporary folder removed,
//! the trace ended, what was recorded judged, exit 130); a second signal ends them at once;
//! a killed recorder (SIGKILL) leaves a trace `check-trace` reads up to the cut and names;
//! a trace that cannot be written stops a run before it starts.
//!
//! Real processes on the wall clock: each wait polls for what it needs, with wide bounds.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::serve::{scratch, MCP_SIM};
use mcp_sim::trace::frame::Cut;
use mcp_sim::trace::{EventKind, Side, Trace};
use serde_json::Value;

/// A server that outlives its stdin: `serve` under a shell that then sleeps, with `marker`
/// in its command line so the test can look for it (a launcher's server, as `npx` or `uv
/// run` start one). Only a kill of its process group ends the sleep.
fn lingering_server(marker: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!("\"$0\" serve; sleep 600 # {marker}"),
        MCP_SIM.into(),
    ]
}

/// Whether a process whose command line holds `marker` is still running a second after
/// (a killed process takes a moment to go).
fn running(marker: &str) -> bool {
    let found = || {
        Command::new("pgrep")
            .args(["-f", marker])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        if !found() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    found()
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// Waits (at most `bound`) until `file` holds `n` lines that contain `what`.
fn wait_for_lines(file: &Path, what: &str, n: usize, bound: Duration) {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.lines().filter(|l| l.contains(what)).count() >= n {
            return;
        }
        assert!(
            start.elapsed() < bound,
            "{} never held {n} lines with {what}:\n{text}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (at most `bound`) for `child` to exit, and returns its output.
fn finish(mut child: Child, bound: Duration) -> (Output, Duration) {
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > bound {
            let _ = child.kill();
            panic!("still running {} s after the signal", bound.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = start.elapsed();
    (child.wait_with_output().expect("output"), took)
}

fn read(path: &Path) -> mcp_sim::trace::frame::Reading {
    let text = std::fs::read_to_string(path).expect("the trace exists");
    Trace::read_jsonl(&text).expect("the trace is valid JSON Lines")
}

/// `tools/call` requests the client sent, and cancels.
fn calls_and_cancels(trace: &Trace) -> (usize, usize) {
    let method = |e: &mcp_sim::trace::TraceEvent| match (&e.kind, e.side) {
        (EventKind::Send(w), Side::Client) => w
            .msg
            .as_ref()
            .and_then(|m| m.get("method")?.as_str().map(str::to_owned)),
        _ => None,
    };
    let methods: Vec<String> = trace.events.iter().filter_map(method).collect();
    let count = |m: &str| methods.iter().filter(|x| *x == m).count();
    (count("tools/call"), count("notifications/cancelled"))
}

fn probe_command(trace: &Path, marker: &str) -> Command {
    let mut c = Command::new(MCP_SIM);
    c.args([
        "probe",
        "--format",
        "json",
        "--calls",
        "30",
        "--cancel-percent",
        "0",
    ])
    .args([
        "--args",
        r#"{"steps":10,"step_ms":300}"#,
        "--drain-ms",
        "500",
    ])
    .arg("--trace")
    .arg(trace)
    .arg("--")
    .args(lingering_server(marker))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c
}

#[test]
fn sigint_ends_a_probe_cleanly_its_calls_cancelled_its_server_gone_its_trace_whole() {
    let dir = scratch("interrupt-probe");
    let trace = dir.join("probe.jsonl");
    let marker = format!("interrupt-probe-{}", std::process::id());
    let child = probe_command(&trace, &marker)
        .spawn()
        .expect("probe starts");
    // The calibration's two calls, then three of the schedule's: the run is in full swing.
    wait_for_lines(
        &trace,
        r#""method":"tools/call""#,
        5,
        Duration::from_secs(60),
    );
    signal(&child, "INT");
    let (out, took) = finish(child, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    let verdict: Value = serde_json::from_str(stdout.trim()).expect("one JSON verdict");
    assert_eq!(verdict["verdict"], "interrupted", "{verdict}");
    assert_eq!(verdict["exit_code"], 130);
    let findings: Vec<&str> = verdict["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["finding"].as_str())
        .collect();
    assert_eq!(findings, ["interrupted"], "{verdict}");
    // Not the 30 calls' minutes: the open calls were cancelled, the server shut down.
    assert!(took < Duration::from_secs(15), "{took:?}");
    assert!(
        !running(&marker),
        "the server's process group outlived the probe"
    );
    let r = read(&trace);
    assert_eq!(r.cut, None);
    assert_eq!(r.end.expect("an end line").reason, "interrupted by SIGINT");
    let (calls, cancels) = calls_and_cancels(&r.trace);
    assert!((5..30).contains(&calls), "{calls} calls");
    assert!(cancels >= 1, "the open calls were cancelled");
    assert_eq!(verdict["violations"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_second_signal_ends_a_probe_at_once_and_kills_what_it_started() {
    let dir = scratch("interrupt-twice");
    let trace = dir.join("probe.jsonl");
    let marker = format!("interrupt-twice-{}", std::process::id());
    let mut command = probe_command(&trace, &marker);
    // A long drain, so that the first signal's ending takes a while.
    command.args(["--drain-ms", "20000"]);
    let child = command.spawn().expect("probe starts");
    wait_for_lines(
        &trace,
        r#""method":"tools/call""#,
        5,
        Duration::from_secs(60),
    );
    signal(&child, "INT");
    wait_for_lines(
        &trace,
        "notifications/cancelled",
        1,
        Duration::from_secs(10),
    );
    signal(&child, "INT");
    let (out, took) = finish(child, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(130));
    assert!(took < Duration::from_secs(5), "{took:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a second signal"), "{stderr}");
    assert!(
        !running(&marker),
        "the server's process group outlived the probe"
    );
    // Nothing was judged and the trace has no end: check-trace reads it and names the cut.
    let r = read(&trace);
    assert!(matches!(r.cut, Some(Cut::NoEnd { .. })), "{:?}", r.cut);
    let out = Command::new(MCP_SIM)
        .arg("check-trace")
        .arg(&trace)
        .output()
        .expect("check-trace");
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("trace-cut: the trace is cut after line"),
        "{stdout}"
    );
}

#[test]
fn sigterm_ends_check_proxy_with_its_intermediary_upstream_and_folder_gone() {
    let dir = scratch("interrupt-check-proxy");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let trace = dir.join("two-hop.jsonl");
    let marker = format!("interrupt-bridge-{}", std::process::id());
    // A pass-through intermediary that outlives its input, as the lingering server does.
    let bridge = format!("\"$@\"; sleep 600 # {marker}");
    let child = Command::new(MCP_SIM)
        .args(["check-proxy", "--format", "json", "--calls", "30"])
        .args(["--cancel-percent", "0", "--drain-ms", "500"])
        .args(["--args", r#"{"steps":10,"step_ms":300}"#])
        .arg("--trace")
        .arg(&trace)
        .args(["--", "sh", "-c", &bridge, "sh", "{upstream}"])
        .env("TMPDIR", &tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("check-proxy starts");
    // The reference upstream writes its trace as it goes: wait for the schedule's calls.
    let upstream = wait_for_upstream_trace(&tmp, Duration::from_secs(60));
    wait_for_lines(
        &upstream,
        r#""method":"tools/call""#,
        5,
        Duration::from_secs(60),
    );
    signal(&child, "TERM");
    let (out, _) = finish(child, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    let verdict: Value = serde_json::from_str(stdout.trim()).expect("one JSON verdict");
    assert_eq!(verdict["verdict"], "interrupted", "{verdict}");
    assert!(!running(&marker), "the intermediary outlived check-proxy");
    let left: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .expect("tmp")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let r = read(&trace);
    assert!(r.trace.is_two_hop());
    let upstream_calls = r
        .trace
        .events
        .iter()
        .filter(|e| e.hop == Some(mcp_sim::trace::Hop::Back) && e.side == Side::Server)
        .filter(|e| matches!(&e.kind, EventKind::Recv(w) if w.msg.as_ref().is_some_and(|m| m["method"] == "tools/call")))
        .count();
    assert!(upstream_calls >= 5, "{upstream_calls}");
}

/// The trace the reference upstream is writing under `tmp`'s check-proxy folder.
fn wait_for_upstream_trace(tmp: &Path, bound: Duration) -> PathBuf {
    let start = Instant::now();
    loop {
        let found = std::fs::read_dir(tmp)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "part"));
        if let Some(p) = found {
            return p;
        }
        assert!(
            start.elapsed() < bound,
            "no upstream trace under {}",
            tmp.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_serve_leaves_a_trace_that_check_trace_reads_up_to_the_cut() {
    let dir = scratch("interrupt-sigkill");
    let trace = dir.join("serve.jsonl");
    let mut child = Command::new(MCP_SIM)
        .arg("serve")
        .arg("--trace")
        .arg(&trace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow_op","arguments":{"steps":50,"step_ms":100},"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{call}").expect("write");
    }
    wait_for_lines(&trace, "notifications/progress", 3, Duration::from_secs(30));
    signal(&child, "KILL");
    let _ = child.wait();
    let r = read(&trace);
    assert!(matches!(r.cut, Some(Cut::NoEnd { .. })), "{:?}", r.cut);
    assert!(r.trace.events.len() >= 4);
    for format in ["text", "json"] {
        let out = Command::new(MCP_SIM)
            .args(["check-trace", "--format", format])
            .arg(&trace)
            .output()
            .expect("check-trace");
        assert_eq!(out.status.code(), Some(3), "{format}");
        // Said once: with the verdict in text, on stderr beside a verdict for programs.
        let said = |bytes: &[u8]| {
            String::from_utf8_lossy(bytes)
                .matches("mcp-sim serve began it and never wrote its end line")
                .count()
        };
        let (stdout, stderr) = (said(&out.stdout), said(&out.stderr));
        match format {
            "text" => assert_eq!((stdout, stderr), (1, 0), "{format}"),
            _ => assert_eq!(stderr, 1, "{format}"),
        }
        if format == "json" {
            let v: Value = serde_json::from_slice(&out.stdout).expect("json");
            assert!(v["inconclusive"]
                .as_str()
                .is_some_and(|s| s.contains("trace-cut")));
        }
    }
    // A line cut mid-write reads up to the line before it.
    let mut text = std::fs::read_to_string(&trace).expect("trace");
    text.push_str(r#"{"t":99999,"side":"ser"#);
    let cut = dir.join("cut.jsonl");
    std::fs::write(&cut, &text).expect("write");
    let out = Command::new(MCP_SIM)
        .arg("check-trace")
        .arg(&cut)
        .output()
        .expect("check-trace");
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("no line feed"), "{stdout}");
}

#[test]
fn a_trace_that_cannot_be_written_stops_every_live_command_before_it_starts() {
    let dir = scratch("interrupt-unwritable");
    let missing = dir.join("no-such-folder").join("t.jsonl");
    let marker = format!("interrupt-unwritable-{}", std::process::id());
    let runs: [(&str, Vec<String>); 4] = [
        ("probe", {
            let mut a = vec!["probe".into(), "--trace".into()];
            a.push(missing.display().to_string());
            a.push("--".into());
            a.extend(lingering_server(&marker));
            a
        }),
        (
            "serve",
            vec![
                "serve".into(),
                "--trace".into(),
                missing.display().to_string(),
            ],
        ),
        (
            "record",
            vec![
                "record".into(),
                "--trace".into(),
                missing.display().to_string(),
                "--".into(),
                "sh".into(),
                "-c".into(),
                format!("sleep 600 # {marker}"),
            ],
        ),
        // A full disk refuses the begin line.
        (
            "serve on a full disk",
            vec!["serve".into(), "--trace".into(), "/dev/full".into()],
        ),
    ];
    for (what, args) in runs {
        if what.contains("full") && !Path::new("/dev/full").exists() {
            continue;
        }
        let out = Command::new(MCP_SIM)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        let named = if what.contains("full") {
            "/dev/full".to_string()
        } else {
            missing.display().to_string()
        };
        assert!(
            stderr.contains(&format!("cannot write the trace {named}")),
            "{what}: {stderr}"
        );
        assert!(!running(&marker), "{what} started its peer anyway");
    }
}
