//! Running a real client against `mcp-sim serve` (or through `mcp-sim record`) and reading
//! the files it wrote: the shared part of `serve_clients.rs` and `legacy_peers.rs`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_sim::trace::{EventKind, Side, Trace};
use mcp_sim::wire::{DecodeOptions, Message};
use serde_json::Value;

pub const MCP_SIM: &str = env!("CARGO_BIN_EXE_mcp-sim");

/// Cancels the client sent as `notifications/cancelled`, as the server read them (a stream's
/// close, the 2026-07-28 HTTP cancel, is not counted: [`Case::cancels_seen`] counts both).
pub fn cancels_posted(trace: &Trace) -> usize {
    trace
        .events
        .iter()
        .filter(|e| e.side == Side::Server)
        .filter(|e| match &e.kind {
            EventKind::Recv(w) => matches!(
                w.decode(&DecodeOptions::default()),
                Ok(Message::Cancelled(_))
            ),
            _ => false,
        })
        .count()
}

/// A fresh folder for one case's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch folder");
    dir
}

/// What one case produced.
pub struct Case {
    /// One JSON object per call, as the client printed it.
    pub outcomes: Vec<Value>,
    /// `serve --report` / `record --report`: `{ok, events, violations}`.
    pub report: Value,
    /// The trace it wrote.
    pub trace: Trace,
}

impl Case {
    pub fn outcome_names(&self) -> Vec<&str> {
        self.outcomes
            .iter()
            .map(|o| o["outcome"].as_str().unwrap_or("?"))
            .collect()
    }

    pub fn rules(&self) -> Vec<String> {
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

    /// Cancels that reached the server: notifications, and in 2026-07-28 HTTP closes by the
    /// client of a stream whose response the server had not sent yet (closing a finished
    /// stream, or a keep-alive connection after it, cancels nothing; in the legacy era a
    /// disconnect is no cancel at all).
    pub fn cancels_seen(&self) -> usize {
        let legacy = mcp_sim::oracle::EraReading::of_trace(&self.trace)
            .era
            .is_legacy();
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
                } if !legacy && !answered.contains(s) => cancels += 1,
                _ => {}
            }
        }
        cancels
    }

    pub fn describe(&self) -> String {
        format!(
            "outcomes {:?}\nreport {}\ntrace:\n{}",
            self.outcomes,
            self.report,
            self.trace.to_jsonl()
        )
    }
}

/// Waits for `path` to hold a whole file: the report the tap or server writes as it exits,
/// or the trace it writes as it goes, once its `end` line is written.
pub fn read_when_written(path: &Path) -> String {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let framed = text.starts_with("{\"begin\"");
            let ended = text
                .lines()
                .next_back()
                .is_some_and(|l| l.starts_with("{\"end\""));
            if text.ends_with('\n') && (!framed || ended) {
                return text;
            }
        }
        assert!(Instant::now() < until, "{} was not written", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `client` (its command line up to the server part) with `server_part` appended, and
/// reads the files `server_part` was told to write.
pub fn run_client(client: &mut Command, dir: &Path) -> Case {
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
pub fn serve_args(dir: &Path, policy: &str) -> Vec<String> {
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
pub struct Listening {
    child: Child,
    /// The address it printed.
    pub url: String,
}

impl Listening {
    pub fn start(args: &[String]) -> Listening {
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

    /// The `host:port` it listens on.
    pub fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .expect("an address")
            .to_owned()
    }

    pub fn stop(mut self) -> i32 {
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
pub fn against_listening(
    args: &[String],
    path: &str,
    mut client: Command,
    dir: &Path,
) -> (Case, i32) {
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
pub fn against_stdio_serve(mut client: Command, dir: &Path, policy: &str, extra: &[&str]) -> Case {
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
pub fn against_http_serve(client: Command, dir: &Path, policy: &str) -> (Case, i32) {
    let mut args = serve_args(dir, policy);
    args.extend(["--http".into(), "127.0.0.1:0".into()]);
    against_listening(&args, "", client, dir)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

pub fn wait_for_port(port: u16) {
    let until = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < until,
            "the server never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A server process listening on a local port, for `probe --url` or `record --upstream`;
/// killed when dropped.
pub struct Upstream {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Upstream {
    /// Starts `command` (told its port by `configure`, as an argument or in its environment)
    /// on a free port, and waits until it listens.
    pub fn start(mut command: Command, configure: impl FnOnce(&mut Command, u16)) -> Upstream {
        let port = free_port();
        configure(&mut command, port);
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the upstream server starts");
        wait_for_port(port);
        Upstream { child, port }
    }

    /// The Python SDK's stateless Streamable HTTP server (`tests/peers/python_slow_http_server.py`)
    /// run by the venv python `py`.
    pub fn python_sdk(py: &Path) -> Upstream {
        let mut command = Command::new(py);
        command.arg(super::repo().join("tests/peers/python_slow_http_server.py"));
        Upstream::start(command, |c, port| {
            c.arg(port.to_string());
        })
    }

    /// Its `/mcp` endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One raw HTTP/1.1 POST to `/mcp` at `addr` on a connection of its own, with `host:
/// 127.0.0.1` unless `extra_headers` carries a `host` of its own: the status and the body.
pub fn raw_post(addr: &str, extra_headers: &str, body: &str) -> (u16, String) {
    let (status, _, body) = raw_exchange(addr, extra_headers, body);
    (status, body)
}

/// As [`raw_post`], with the response's head (status line and headers) too.
pub fn raw_exchange(addr: &str, extra_headers: &str, body: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    let names_host = extra_headers
        .split("\r\n")
        .any(|line| line.to_ascii_lowercase().starts_with("host:"));
    let host = if names_host {
        ""
    } else {
        "host: 127.0.0.1\r\n"
    };
    let req = format!(
        "POST /mcp HTTP/1.1\r\n{host}content-type: application/json\r\naccept: application/json, text/event-stream\r\n{extra_headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(req.as_bytes());
    let mut answer = String::new();
    let _ = conn.read_to_string(&mut answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (status, head.to_owned(), body.to_owned())
}
