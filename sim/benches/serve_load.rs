//! `mcp-sim serve --http` under load: 64 concurrent clients of both eras on loopback, bounded
//! in count and time, each on one keep-alive connection. Half are 2026-07-28 clients
//! (`server/discover`, then `tools/list` requests, stateless); half are legacy ones
//! (`initialize`, then `tools/list` and `ping` in their session, then the session's
//! `DELETE`). Prints requests per second, the median and p99 latency, the serve process's
//! peak memory (`VmHWM`) while it served and at its very end (after SIGTERM, when it judges
//! the run and writes its trace: the true peak), and the messages lost: requests without a
//! well-formed answer of their own id in the era they spoke (the figure must be 0). It runs
//! at 1× and 10× the requests per client, so the two peaks say whether memory grows with
//! the run's length.
//!
//! Run: `cargo bench -p mcp-sim-cli --bench serve_load` (`MCP_SIM_LOAD_SCALES=1` runs 1× only;
//! `MCP_SIM_LOAD_KEEP=DIR` keeps the traces).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MCP_SIM: &str = env!("CARGO_BIN_EXE_mcp-sim");
/// Concurrent clients, half of each era.
const CLIENTS: usize = 64;
/// Requests each client sends after its opening, at 1×.
const REQUESTS: usize = 300;
/// The whole run's bound, at 1×.
const BOUND: Duration = Duration::from_secs(60);

const MODERN_META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// An answer: its status, headers (names in lower case) and body.
type Answer = (u16, Vec<(String, String)>, String);

/// One request on `conn`: its answer.
fn exchange(
    conn: &mut BufReader<TcpStream>,
    method: &str,
    headers: &[(&str, String)],
    body: &str,
) -> std::io::Result<Answer> {
    let mut head = format!("{method} /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let stream = conn.get_mut();
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut status_line = String::new();
    conn.read_line(&mut status_line)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut got = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        conn.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_owned());
            if k == "content-length" {
                length = v.parse().unwrap_or(0);
            }
            got.push((k, v));
        }
    }
    let mut body = vec![0; length];
    conn.read_exact(&mut body)?;
    Ok((status, got, String::from_utf8_lossy(&body).into_owned()))
}

/// Whether `body` is a result for `id`, with `resultType` in the modern era only.
fn answers(body: &str, id: usize, modern: bool) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return false;
    };
    v["id"] == id
        && v.get("result").is_some()
        && (v["result"].get("resultType").is_some() == modern)
}

/// One client's run: each request's latency, and how many were lost.
fn client(addr: String, k: usize, requests: usize, deadline: Instant) -> (Vec<Duration>, usize) {
    let modern = k % 2 == 0;
    let mut latencies = Vec::new();
    let mut lost = 0;
    let Ok(stream) = TcpStream::connect(&addr) else {
        return (latencies, requests + 1);
    };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut conn = BufReader::new(stream);
    let base = |m: &str| {
        let mut h = vec![
            ("content-type", "application/json".to_owned()),
            ("accept", "application/json, text/event-stream".to_owned()),
        ];
        if modern {
            h.push(("mcp-protocol-version", "2026-07-28".into()));
            h.push(("mcp-method", m.to_owned()));
        }
        h
    };
    let mut session: Option<String> = None;
    for n in 0..=requests {
        if Instant::now() > deadline {
            lost += requests + 1 - n;
            break;
        }
        let id = n + 1;
        let (method, params) = match (modern, n) {
            (true, 0) => ("server/discover", format!(r#"{{"_meta":{MODERN_META}}}"#)),
            (true, _) => ("tools/list", format!(r#"{{"_meta":{MODERN_META}}}"#)),
            (false, 0) => (
                "initialize",
                r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#.to_owned(),
            ),
            (false, n) if n % 2 == 0 => ("ping", "{}".to_owned()),
            (false, _) => ("tools/list", "{}".to_owned()),
        };
        let mut headers = base(method);
        if let Some(s) = &session {
            headers.push(("mcp-session-id", s.clone()));
            headers.push(("mcp-protocol-version", "2025-11-25".into()));
        }
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
        let start = Instant::now();
        match exchange(&mut conn, "POST", &headers, &body) {
            Ok((200, got, answer)) if answers(&answer, id, modern) => {
                latencies.push(start.elapsed());
                if n == 0 && !modern {
                    session = got
                        .into_iter()
                        .find(|(k, _)| k == "mcp-session-id")
                        .map(|(_, v)| v);
                    // The handshake's notification, answered 202.
                    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
                    let mut h = base("notifications/initialized");
                    if let Some(s) = &session {
                        h.push(("mcp-session-id", s.clone()));
                        h.push(("mcp-protocol-version", "2025-11-25".into()));
                    }
                    if !matches!(exchange(&mut conn, "POST", &h, note), Ok((202, _, _))) {
                        lost += 1;
                    }
                }
            }
            _ => lost += 1,
        }
    }
    if let Some(s) = session {
        let h = vec![
            ("mcp-session-id", s),
            ("mcp-protocol-version", "2025-11-25".into()),
        ];
        let _ = exchange(&mut conn, "DELETE", &h, "");
    }
    (latencies, lost)
}

/// The peak resident memory of process `pid`, in KiB (Linux `VmHWM`).
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let scales: Vec<usize> = std::env::var("MCP_SIM_LOAD_SCALES")
        .unwrap_or_else(|_| "1,10".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let mut lost = 0;
    let mut peaks = Vec::new();
    for scale in scales {
        let (l, peak) = run(scale);
        lost += l;
        peaks.push((scale, peak));
    }
    if let [(1, Some(one)), (ten, Some(big))] = peaks[..] {
        println!(
            "peak memory at {ten}x / at 1x: {:.2} (the goal is at most 1.2)",
            big as f64 / one as f64
        );
    }
    assert_eq!(lost, 0, "every request has its answer");
}

/// One run at `scale` times the requests: the messages lost and the true peak (KiB).
fn run(scale: usize) -> (usize, Option<u64>) {
    let requests = REQUESTS * scale;
    let trace =
        std::env::temp_dir().join(format!("mcp-sim-serve-load-{}.jsonl", std::process::id()));
    let mut serve = Command::new(MCP_SIM)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--max-seconds",
            "3600",
            "--trace",
        ])
        .arg(&trace)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcp-sim serve starts");
    let mut lines = BufReader::new(serve.stderr.take().expect("stderr")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let url = &first[first.find("http://").expect("the address is printed") + 7..];
    let addr = url.trim_end_matches("/mcp").to_owned();
    std::thread::spawn(move || for _ in lines {});
    let deadline = Instant::now() + BOUND * scale as u32;
    let start = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|k| {
            let addr = addr.clone();
            std::thread::spawn(move || client(addr, k, requests, deadline))
        })
        .collect();
    let mut latencies = Vec::new();
    let mut lost = 0;
    for t in threads {
        let (l, n) = t.join().expect("a client thread");
        latencies.extend(l);
        lost += n;
    }
    let wall = start.elapsed();
    let serving = peak_kib(serve.id());
    // SAFETY: SIGTERM to our own child, not yet reaped.
    unsafe {
        libc::kill(serve.id() as i32, libc::SIGTERM);
    }
    // It judges the run and writes its trace's end now: its peak is read until it exits.
    let ended = Instant::now();
    let mut peak = serving;
    while serve.try_wait().ok().flatten().is_none() {
        peak = peak_kib(serve.id()).or(peak);
        std::thread::sleep(Duration::from_millis(5));
    }
    let judging = ended.elapsed();
    let trace_bytes = std::fs::metadata(&trace).map_or(0, |m| m.len());
    // `MCP_SIM_LOAD_KEEP=DIR` keeps each run's trace there, to judge or profile apart.
    match std::env::var_os("MCP_SIM_LOAD_KEEP") {
        Some(dir) => {
            let kept = std::path::Path::new(&dir).join(format!("serve-load-{scale}x.jsonl"));
            let _ = std::fs::rename(&trace, &kept);
        }
        None => {
            let _ = std::fs::remove_file(&trace);
        }
    }
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    println!(
        "serve --http at {scale}x, {CLIENTS} clients ({} modern, {} legacy), {requests} requests each: {} answered in {:.2} s",
        CLIENTS / 2,
        CLIENTS / 2,
        latencies.len(),
        wall.as_secs_f64()
    );
    println!(
        "  requests per second: {:.0}",
        latencies.len() as f64 / wall.as_secs_f64()
    );
    println!("  latency: median {:?}, p99 {:?}", pct(0.5), pct(0.99));
    let mib = |k: Option<u64>| {
        k.map_or("unknown (no /proc)".into(), |k| {
            format!("{:.1} MiB", k as f64 / 1024.0)
        })
    };
    println!(
        "  peak memory of serve: {} while serving, {} in all (judged and ended in {:.2} s); trace {:.1} MiB",
        mib(serving),
        mib(peak),
        judging.as_secs_f64(),
        trace_bytes as f64 / (1024.0 * 1024.0)
    );
    println!("  lost messages: {lost}");
    (lost, peak)
}
