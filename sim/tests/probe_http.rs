//! `mcp-sim probe --url` against a real Streamable HTTP server from another ecosystem: the
//! Python SDK's `MCPServer` (PyPI `mcp` 2.3.0) served by uvicorn on 127.0.0.1, stateless, with
//! a slow tool that reports progress (`tests/peers/python_slow_http_server.py`).
//!
//! The SDK (and uvicorn, which it brings) installs itself on first use into a virtual
//! environment in the build folder (`common::peers`); without `python3` the test is skipped, or
//! fails under `CI=true`. `MCP_SIM_SKIP_PYTHON=1` skips it.

mod common;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use mcp_sim::trace::{EventKind, Side, Trace};

/// The server process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the server on a free port of 127.0.0.1 and waits (at most 30 s) until it accepts
/// connections.
fn start_server(python: &Path) -> (Server, u16) {
    let port = TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let script = common::repo().join("tests/peers/python_slow_http_server.py");
    let child = Command::new(python)
        .arg(&script)
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the venv's python starts");
    let mut server = Server(child);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return (server, port);
        }
        if let Ok(Some(status)) = server.0.try_wait() {
            panic!("the Python HTTP server exited before accepting connections: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the Python HTTP server did not accept connections on {addr} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn probe(port: u16, extra: &[&str], trace: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--url", &format!("http://127.0.0.1:{port}/mcp")])
        .args(["--seed", "1", "--calls", "3", "--tool", "slow_op"])
        .args(["--timeout-ms", "3000", "--max-total-ms", "10000"])
        .args(["--max-seconds", "20", "--drain-ms", "800"])
        .args(extra)
        .arg("--trace")
        .arg(trace)
        .output()
        .expect("mcp-sim runs")
}

/// Checks the exit code and reads the trace back.
fn judged(out: &Output, trace: &Path, code: i32) -> Trace {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(code),
        "probe exit\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let text = std::fs::read_to_string(trace).expect("the probe wrote its trace");
    Trace::from_jsonl(&text).expect("the trace reads back")
}

fn count(trace: &Trace, f: impl Fn(&EventKind) -> bool) -> usize {
    trace.events.iter().filter(|e| f(&e.kind)).count()
}

#[test]
fn probe_drives_the_python_sdk_http_server() {
    let Some(python) = common::peers::python_sdk() else {
        return;
    };
    let (_server, port) = start_server(&python);
    let dir = std::env::temp_dir().join(format!("mcp-sim-probe-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    // Direct: progress over SSE, some calls cancelled by closing their connection.
    let path = dir.join("direct.jsonl");
    let out = probe(port, &["--args", r#"{"steps":4,"step_ms":100}"#], &path);
    // Clean, and exercised: the verdict would be inconclusive otherwise.
    let trace = judged(&out, &path, 0);
    let text = trace.to_jsonl();
    let sends = count(&trace, |k| matches!(k, EventKind::Send(_)));
    assert!(
        sends >= 6,
        "the start-up check, two calibration calls and three calls:\n{text}"
    );
    assert!(
        count(&trace, |k| matches!(k, EventKind::Status { .. })) >= 1,
        "a response status was recorded:\n{text}"
    );
    assert_eq!(
        count(&trace, |k| matches!(k, EventKind::Outcome { .. })),
        sends,
        "every request has one outcome:\n{text}"
    );

    // Through the idle-timeout relay: steps slower than its timeout, so streams get cut.
    let path = dir.join("proxy.jsonl");
    let out = probe(
        port,
        &[
            "--args",
            r#"{"steps":2,"step_ms":600}"#,
            "--cancel-percent",
            "0",
            "--proxy-idle-ms",
            "200",
        ],
        &path,
    );
    // Every call is cut before its result: nothing was exercised, which is no pass.
    let trace = judged(&out, &path, 3);
    let text = trace.to_jsonl();
    assert!(
        count(&trace, |k| matches!(k, EventKind::Send(_))) >= 6,
        "the requests were sent:\n{text}"
    );
    assert!(
        count(&trace, |k| matches!(
            k,
            EventKind::Close {
                by: Side::Proxy,
                reason: Some(r),
                ..
            } if r == "idle"
        )) >= 1,
        "the relay cut an idle stream:\n{text}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("idle-stream-cut"), "report:\n{stdout}");
    assert!(
        stdout.contains("finding: nothing-exercised"),
        "report:\n{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn probe_exits_2_when_nothing_listens_at_the_url() {
    // Bound but never listening: the port stays this test's for its whole run (a port freed
    // after a bind can be taken by a server another test starts), and a connection is refused.
    let held =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    held.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .expect("a port");
    let port = held
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .expect("an inet address")
        .port();
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--calls", "1", "--url"])
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .output()
        .expect("mcp-sim runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot connect"), "stderr:\n{stderr}");
}

/// An endpoint that answers every request 404 (a wrong path) cannot be reached as an MCP
/// server: exit 2 within seconds, not a 30 s wait that ends as a server fault.
#[test]
fn probe_exits_2_quickly_when_every_request_is_answered_404() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("an address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut buf = [0u8; 65536];
                // One response per read of a request head (and its body, if it came along).
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let body = "Not Found";
                    let reply = format!(
                        "HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(reply.as_bytes()).is_err() {
                        break;
                    }
                }
            });
        }
    });
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["probe", "--calls", "1", "--url"])
        .arg(format!("http://127.0.0.1:{port}/wrong"))
        .output()
        .expect("mcp-sim runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("404 Not Found"), "stderr:\n{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn probe_url_argument_errors_exit_2() {
    for args in [
        &["probe", "--url", "https://127.0.0.1:1/mcp"][..],
        &["probe", "--url", "127.0.0.1:1/mcp"],
        &["probe", "--proxy-idle-ms", "100", "--", "true"],
        &["probe", "--url", "http://127.0.0.1:1/", "--", "true"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
            .args(args)
            .output()
            .expect("mcp-sim runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
