//! Real clients against `mcp-sim serve`, and through `mcp-sim record` in front of a real
//! server: the Python SDK 2.3.0 client and the TypeScript SDK 2.4.0 client, over stdio and
//! Streamable HTTP, each with the timeout policy it declares.
//!
//! Compliant cases must be clean; the known findings are asserted as a baseline, each by the
//! rule that catches it:
//!
//! | client | options | on the wire | rule |
//! | --- | --- | --- | --- |
//! | Python SDK | no `read_timeout_seconds` (the default) | the call runs to its end, no cancel | `declared-deadline` against a declared 1 s timeout |
//! | TypeScript SDK | `{timeout: 4000, maxTotalTimeout: 1000}` | the cancel comes at about 4000 ms (typescript-sdk #2695) | `declared-deadline` |
//! | TypeScript SDK | `{timeout: 1000, resetTimeoutOnProgress: true, maxTotalTimeout: 2000}`, progress every 300 ms | the application gets "Maximum total timeout exceeded", no cancel is sent, the server works on | `declared-deadline` |
//!
//! Wall-clock margins: every deadline is at least a second away from what the assertion
//! needs (the oracle's grace window is 1000 ms; the calls run for seconds).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::peers::{node_ts_sdk, python_sdk};
use mcp_sim::trace::{EventKind, Side, Trace};
use mcp_sim::wire::{DecodeOptions, Message};
use serde_json::Value;

const MCP_SIM: &str = env!("CARGO_BIN_EXE_mcp-sim");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// A fresh folder for one case's files.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch folder");
    dir
}

/// What one case produced.
struct Case {
    /// One JSON object per call, as the client printed it.
    outcomes: Vec<Value>,
    /// `serve --report` / `record --report`: `{ok, events, violations}`.
    report: Value,
    trace: Trace,
}

impl Case {
    fn outcome_names(&self) -> Vec<&str> {
        self.outcomes
            .iter()
            .map(|o| o["outcome"].as_str().unwrap_or("?"))
            .collect()
    }

    fn rules(&self) -> Vec<String> {
        let mut rules: Vec<String> = self.report["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .map(|v| v["rule"].as_str().unwrap_or("?").to_string())
            .collect();
        rules.sort();
        rules.dedup();
        rules
    }

    /// Cancels that reached the server: stdio notifications, and HTTP closes by the client of
    /// a stream whose response the server had not sent yet (closing a finished stream, or a
    /// keep-alive connection after it, cancels nothing).
    fn cancels_seen(&self) -> usize {
        let mut answered = std::collections::BTreeSet::new();
        let mut cancels = 0;
        for e in self.trace.events.iter().filter(|e| e.side == Side::Server) {
            match &e.kind {
                EventKind::Recv(w) => {
                    if let Ok(Message::Cancelled(_)) = w.decode(&DecodeOptions::default()) {
                        cancels += 1;
                    }
                }
                EventKind::Send(w) => {
                    if let Ok(Message::Result(_) | Message::Error(_)) =
                        w.decode(&DecodeOptions::default())
                    {
                        answered.extend(w.stream);
                    }
                }
                EventKind::Close {
                    stream: Some(s),
                    by: Side::Client,
                    ..
                } if !answered.contains(s) => cancels += 1,
                _ => {}
            }
        }
        cancels
    }

    fn describe(&self) -> String {
        format!(
            "outcomes {:?}\nreport {}\ntrace:\n{}",
            self.outcomes,
            self.report,
            self.trace.to_jsonl()
        )
    }
}

/// Waits for `path` to hold a whole file (the tap or server writes it as it exits).
fn read_when_written(path: &Path) -> String {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text;
            }
        }
        assert!(Instant::now() < until, "{} was not written", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `client` (its command line up to the server part) with `server_part` appended, and
/// reads the files `server_part` was told to write.
fn run_client(client: &mut Command, dir: &Path) -> Case {
    let out = client.output().expect("the client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let outcomes: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let report = read_when_written(&dir.join("report.json"));
    let trace = read_when_written(&dir.join("trace.jsonl"));
    let case = Case {
        outcomes,
        report: serde_json::from_str(&report).expect("the report is JSON"),
        trace: Trace::from_jsonl(&trace).expect("the trace reads"),
    };
    assert!(
        out.status.success(),
        "the client failed: {}\nstderr:\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        case.describe()
    );
    case
}

/// `mcp-sim serve` arguments writing into `dir`, with the declared client policy.
fn serve_args(dir: &Path, policy: &str) -> Vec<String> {
    vec![
        "serve".into(),
        "--client-policy".into(),
        policy.into(),
        "--trace".into(),
        dir.join("trace.jsonl").display().to_string(),
        "--report".into(),
        dir.join("report.json").display().to_string(),
    ]
}

/// A background process that prints `... http://ADDR ...` on its first stderr line; stopped
/// with SIGTERM so that it writes its files.
struct Listening {
    child: Child,
    url: String,
}

impl Listening {
    fn start(args: &[String]) -> Listening {
        let mut child = Command::new(MCP_SIM)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcp-sim starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr is piped")).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let start = first.find("http://").expect("the address is printed");
        let url = first[start..]
            .split([',', ' '])
            .next()
            .expect("a URL")
            .to_string();
        // Keep reading stderr so the process never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Listening { child, url }
    }

    fn stop(mut self) -> i32 {
        // SAFETY: SIGTERM to our own child, not yet reaped.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        self.child
            .wait()
            .expect("mcp-sim exits")
            .code()
            .unwrap_or(-1)
    }
}

/// Starts `mcp-sim ARGS` listening, runs the client `client(url + path)` against it, stops it;
/// returns the case (from the files it wrote into `dir`) and its exit code.
fn against_listening(args: &[String], path: &str, mut client: Command, dir: &Path) -> (Case, i32) {
    let listening = Listening::start(args);
    let url = format!("{}{path}", listening.url);
    let out = client
        .args(["--url", &url])
        .output()
        .expect("the client runs");
    let code = listening.stop();
    let case = Case {
        outcomes: String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
        report: serde_json::from_str(&read_when_written(&dir.join("report.json")))
            .expect("the report is JSON"),
        trace: Trace::from_jsonl(&read_when_written(&dir.join("trace.jsonl")))
            .expect("the trace reads"),
    };
    assert!(
        out.status.success(),
        "the client failed: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        case.describe()
    );
    (case, code)
}

/// `mcp-sim serve` over stdio, launched by `client` with the declared `policy` and `extra`
/// arguments.
fn against_stdio_serve(mut client: Command, dir: &Path, policy: &str, extra: &[&str]) -> Case {
    run_client(
        client
            .arg("--")
            .arg(MCP_SIM)
            .args(serve_args(dir, policy))
            .args(extra),
        dir,
    )
}

/// `mcp-sim serve --http` on a free port, with the declared `policy`.
fn against_http_serve(client: Command, dir: &Path, policy: &str) -> (Case, i32) {
    let mut args = serve_args(dir, policy);
    args.extend(["--http".into(), "127.0.0.1:0".into()]);
    against_listening(&args, "", client, dir)
}

fn python(python: &Path, plan: &str) -> Command {
    let mut c = Command::new(python);
    c.arg(repo().join("tests/peers/python_client.py")).arg(plan);
    c
}

fn typescript(sdk: &common::peers::NodeSdk, plan: &str) -> Command {
    let mut c = Command::new(&sdk.node);
    c.arg(sdk.dir.join("ts_client.mjs")).arg(plan);
    c
}

/// A compliant plan for a client with a 1500 ms timeout: a short call, a long one that times
/// out, and a short one after the race (the client keeps working).
const PY_PLAN: &str = r#"[{"steps":3,"step_ms":100,"timeout_ms":1500},{"steps":25,"step_ms":200,"timeout_ms":1500},{"steps":2,"step_ms":100,"timeout_ms":1500}]"#;
const TS_PLAN: &str = r#"[{"steps":3,"step_ms":100,"options":{"timeout":1500}},{"steps":25,"step_ms":200,"options":{"timeout":1500}},{"steps":2,"step_ms":100,"options":{"timeout":1500}}]"#;

/// The plans through the tap: the first call may take the real server's start-up (an
/// interpreter warming up), so it waits up to 10 s.
const PY_RECORD_PLAN: &str = r#"[{"steps":3,"step_ms":100,"timeout_ms":10000},{"steps":25,"step_ms":200,"timeout_ms":1500},{"steps":2,"step_ms":100,"timeout_ms":1500}]"#;
const TS_RECORD_PLAN: &str = r#"[{"steps":3,"step_ms":100,"options":{"timeout":10000}},{"steps":25,"step_ms":200,"options":{"timeout":1500}},{"steps":2,"step_ms":100,"options":{"timeout":1500}}]"#;

fn assert_compliant(case: &Case) {
    assert_eq!(
        case.outcome_names(),
        ["result", "timeout", "result"],
        "{}",
        case.describe()
    );
    assert_eq!(case.report["ok"], true, "{}", case.describe());
    assert!(case.rules().is_empty(), "{}", case.describe());
    assert_eq!(case.cancels_seen(), 1, "{}", case.describe());
}

#[test]
fn python_sdk_client_over_stdio_cancels_at_its_timeout() {
    let Some(py) = python_sdk() else { return };
    let dir = scratch("py-stdio");
    let case = against_stdio_serve(python(&py, PY_PLAN), &dir, "timeout=1500", &[]);
    assert_compliant(&case);
}

#[test]
fn python_sdk_client_over_http_closes_the_stream_at_its_timeout() {
    let Some(py) = python_sdk() else { return };
    let dir = scratch("py-http");
    let (case, code) = against_http_serve(python(&py, PY_PLAN), &dir, "timeout=1500");
    assert_compliant(&case);
    assert_eq!(code, 0, "{}", case.describe());
}

/// Known finding: the Python SDK client has no default timeout. A host that promises one
/// (here 1 s) and leaves `read_timeout_seconds` unset waits for the whole call.
#[test]
fn python_sdk_client_without_a_timeout_breaks_a_declared_one() {
    let Some(py) = python_sdk() else { return };
    let dir = scratch("py-no-timeout");
    let plan = r#"[{"steps":15,"step_ms":200}]"#;
    let case = against_stdio_serve(python(&py, plan), &dir, "timeout=1000", &[]);
    assert_eq!(case.outcome_names(), ["result"], "{}", case.describe());
    assert_eq!(case.rules(), ["declared-deadline"], "{}", case.describe());
    assert_eq!(case.cancels_seen(), 0, "{}", case.describe());
}

#[test]
fn typescript_sdk_client_over_stdio_cancels_at_its_timeout() {
    let Some(sdk) = node_ts_sdk() else { return };
    let dir = scratch("ts-stdio");
    let case = against_stdio_serve(typescript(&sdk, TS_PLAN), &dir, "timeout=1500", &[]);
    assert_compliant(&case);
}

#[test]
fn typescript_sdk_client_over_http_closes_the_stream_at_its_timeout() {
    let Some(sdk) = node_ts_sdk() else { return };
    let dir = scratch("ts-http");
    let (case, code) = against_http_serve(typescript(&sdk, TS_PLAN), &dir, "timeout=1500");
    assert_compliant(&case);
    assert_eq!(code, 0, "{}", case.describe());
}

/// Known finding (typescript-sdk #2695): `maxTotalTimeout` shorter than `timeout` is not
/// enforced; the call gives up, and cancels, at `timeout`.
#[test]
fn typescript_sdk_max_total_timeout_below_timeout_is_not_enforced() {
    let Some(sdk) = node_ts_sdk() else { return };
    let dir = scratch("ts-max-below");
    let plan = r#"[{"steps":30,"step_ms":200,"options":{"timeout":4000,"maxTotalTimeout":1000}}]"#;
    let case = against_stdio_serve(typescript(&sdk, plan), &dir, "timeout=4000,max=1000", &[]);
    assert_eq!(case.outcome_names(), ["timeout"], "{}", case.describe());
    let ms = case.outcomes[0]["ms"].as_u64().expect("ms");
    assert!((3500..6000).contains(&ms), "gave up after {ms} ms");
    assert_eq!(case.rules(), ["declared-deadline"], "{}", case.describe());
    assert_eq!(case.cancels_seen(), 1, "{}", case.describe());
}

/// Known finding: when `maxTotalTimeout` fires, the TypeScript SDK tells the application but
/// sends no `notifications/cancelled`, so the server works on.
#[test]
fn typescript_sdk_max_total_timeout_sends_no_cancel() {
    let Some(sdk) = node_ts_sdk() else { return };
    let dir = scratch("ts-max-no-cancel");
    let plan = r#"[{"steps":40,"step_ms":300,"options":{"timeout":1000,"resetTimeoutOnProgress":true,"maxTotalTimeout":2000}},{"steps":5,"step_ms":300,"options":{"timeout":1000,"resetTimeoutOnProgress":true,"maxTotalTimeout":2000}},{"steps":5,"step_ms":300,"options":{"timeout":1000,"resetTimeoutOnProgress":true,"maxTotalTimeout":2000}},{"steps":5,"step_ms":300,"options":{"timeout":1000,"resetTimeoutOnProgress":true,"maxTotalTimeout":2000}}]"#;
    let case = against_stdio_serve(
        typescript(&sdk, plan),
        &dir,
        "timeout=1000,reset,max=2000",
        &[],
    );
    assert_eq!(
        case.outcome_names(),
        ["timeout", "result", "result", "result"],
        "{}",
        case.describe()
    );
    assert!(
        case.outcomes[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("Maximum total timeout")),
        "{}",
        case.describe()
    );
    assert_eq!(case.rules(), ["declared-deadline"], "{}", case.describe());
    assert_eq!(case.cancels_seen(), 0, "{}", case.describe());
}

/// A faulty server (`--mutant respond_after_cancel`: it answers a call after its cancel, as
/// python-sdk #1419 did): the late answer crosses the client's cancel, and the client copes:
/// it stays connected and its next call succeeds. The report names the server's fault and
/// nothing of the client's.
#[test]
fn python_sdk_client_copes_with_a_late_answer_after_its_cancel() {
    let Some(py) = python_sdk() else { return };
    let dir = scratch("py-late-answer");
    let mutant = ["--mutant", "respond_after_cancel"];
    let case = against_stdio_serve(python(&py, PY_PLAN), &dir, "timeout=1500", &mutant);
    assert_eq!(
        case.outcome_names(),
        ["result", "timeout", "result"],
        "{}",
        case.describe()
    );
    assert_eq!(
        case.rules(),
        ["response-after-cancel"],
        "{}",
        case.describe()
    );
}

/// The same clients through `mcp-sim record` in front of the Python SDK's own server: bytes
/// pass unchanged, the trace has both sides, and it is clean.
#[test]
fn clients_through_the_stdio_tap_in_front_of_the_python_sdk_server() {
    let Some(py) = python_sdk() else { return };
    let server = repo().join("tests/peers/python_slow_server.py");
    let tap = |dir: &Path| -> Vec<String> {
        vec![
            "record".into(),
            "--trace".into(),
            dir.join("trace.jsonl").display().to_string(),
            "--report".into(),
            dir.join("report.json").display().to_string(),
            "--".into(),
            py.display().to_string(),
            server.display().to_string(),
        ]
    };
    let dir = scratch("record-py");
    let case = run_client(
        python(&py, PY_RECORD_PLAN)
            .arg("--")
            .arg(MCP_SIM)
            .args(tap(&dir)),
        &dir,
    );
    assert_compliant(&case);
    let sides: std::collections::BTreeSet<Side> =
        case.trace.events.iter().map(|e| e.side).collect();
    assert!(sides.contains(&Side::Client) && sides.contains(&Side::Server));
    if let Some(sdk) = node_ts_sdk() {
        let dir = scratch("record-ts");
        let case = run_client(
            typescript(&sdk, TS_RECORD_PLAN)
                .arg("--")
                .arg(MCP_SIM)
                .args(tap(&dir)),
            &dir,
        );
        assert_compliant(&case);
    }
}

#[test]
fn clients_through_the_http_tap_in_front_of_the_python_sdk_server() {
    let Some(py) = python_sdk() else { return };
    let port = free_port();
    let mut upstream = Command::new(&py)
        .arg(repo().join("tests/peers/python_slow_http_server.py"))
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the Python SDK server starts");
    wait_for_port(port);
    let dir = scratch("record-http");
    let tap = [
        "record".into(),
        "--http".into(),
        "127.0.0.1:0".into(),
        "--upstream".into(),
        format!("http://127.0.0.1:{port}"),
        "--trace".into(),
        dir.join("trace.jsonl").display().to_string(),
        "--report".into(),
        dir.join("report.json").display().to_string(),
    ];
    let (case, code) = against_listening(&tap, "/mcp", python(&py, PY_RECORD_PLAN), &dir);
    let _ = upstream.kill();
    let _ = upstream.wait();
    assert_compliant(&case);
    assert_eq!(code, 0, "{}", case.describe());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn wait_for_port(port: u16) {
    let until = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < until,
            "the server never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
