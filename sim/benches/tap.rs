//! What `mcp-sim record` costs: the latency the tap adds per message, against a direct pipe
//! and a direct HTTP connection, in one run; and whether it loses or reorders anything at
//! 10,000 messages a second.
//!
//! stdio: `cat` echoes NDJSON lines; each message is a `notifications/progress` line with a
//! sequence number, timed from the write to the echo's arrival, first straight through `cat`,
//! then through `mcp-sim record -- cat`. A line crosses the tap twice (to `cat` and back), so
//! the tap's cost per message is half the difference of the round trips.
//!
//! HTTP: a minimal HTTP/1.1 echo server on a local port (one keep-alive connection, the POST
//! body back as `application/json`), timed per request directly and through
//! `mcp-sim record --http`.
//!
//! Run: `cargo bench -p mcp-sim-cli --bench tap` (release build of the tap).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MCP_SIM: &str = env!("CARGO_BIN_EXE_mcp-sim");
/// Messages timed one at a time, per lane.
const LATENCY_MESSAGES: usize = 20_000;
/// The throughput check: this many messages, paced at `RATE` a second.
const RATE_MESSAGES: usize = 30_000;
const RATE: u64 = 10_000;

fn line(seq: usize) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":\"t\",\"progress\":{seq}}}}}\n"
    )
    .into_bytes()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

struct Figures {
    p50: Duration,
    p99: Duration,
}

fn figures(mut samples: Vec<Duration>) -> Figures {
    samples.sort();
    Figures {
        p50: percentile(&samples, 0.50),
        p99: percentile(&samples, 0.99),
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `cat`, or `mcp-sim record -- cat`, with piped stdio.
fn echo(tapped: bool, trace: &std::path::Path) -> Child {
    let mut c = if tapped {
        let mut c = Command::new(MCP_SIM);
        c.args(["record", "--trace"]).arg(trace).args(["--", "cat"]);
        c
    } else {
        Command::new("cat")
    };
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the echo starts")
}

fn stdio_latency(tapped: bool, trace: &std::path::Path) -> Figures {
    let mut child = echo(tapped, trace);
    let mut input = child.stdin.take().expect("stdin");
    let mut output = BufReader::new(child.stdout.take().expect("stdout"));
    let mut samples = Vec::with_capacity(LATENCY_MESSAGES);
    let mut got = String::new();
    for seq in 0..LATENCY_MESSAGES {
        let start = Instant::now();
        input.write_all(&line(seq)).expect("write");
        input.flush().expect("flush");
        got.clear();
        output.read_line(&mut got).expect("read");
        samples.push(start.elapsed());
    }
    drop(input);
    let _ = child.wait();
    figures(samples)
}

/// Sends `RATE_MESSAGES` lines paced at `RATE` a second from one thread while another reads
/// the echoes; returns how many came back in order, out of order, and the achieved rate.
fn stdio_throughput(trace: &std::path::Path) -> (usize, usize, f64) {
    let mut child = echo(true, trace);
    let mut input = child.stdin.take().expect("stdin");
    let output = BufReader::new(child.stdout.take().expect("stdout"));
    let reader = std::thread::spawn(move || {
        let (mut in_order, mut out_of_order, mut next) = (0, 0, 0usize);
        for l in output.lines() {
            let Ok(l) = l else { break };
            let v: serde_json::Value = serde_json::from_str(&l).expect("an echoed line is JSON");
            let seq = v["params"]["progress"].as_u64().expect("seq") as usize;
            if seq == next {
                in_order += 1;
            } else {
                out_of_order += 1;
            }
            next = seq + 1;
        }
        (in_order, out_of_order)
    });
    let start = Instant::now();
    let gap = Duration::from_nanos(1_000_000_000 / RATE);
    for seq in 0..RATE_MESSAGES {
        let due = start + gap * seq as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        input.write_all(&line(seq)).expect("write");
    }
    let rate = RATE_MESSAGES as f64 / start.elapsed().as_secs_f64();
    drop(input);
    let (in_order, out_of_order) = reader.join().expect("reader");
    let _ = child.wait();
    (in_order, out_of_order, rate)
}

/// An HTTP/1.1 echo server: every POST's body comes back as `application/json`.
fn http_echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            std::thread::spawn(move || {
                let _ = conn.set_nodelay(true);
                let mut reader = BufReader::new(conn.try_clone().expect("clone"));
                let mut writer = conn;
                loop {
                    let mut length = 0usize;
                    let mut head = String::new();
                    loop {
                        head.clear();
                        if reader.read_line(&mut head).unwrap_or(0) == 0 {
                            return;
                        }
                        if head == "\r\n" {
                            break;
                        }
                        if let Some(v) = head.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let mut out = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    out.extend_from_slice(&body);
                    if writer.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

fn http_latency(port: u16) -> Figures {
    let conn = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    conn.set_nodelay(true).expect("nodelay");
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut writer = conn;
    let mut samples = Vec::with_capacity(LATENCY_MESSAGES);
    let mut head = String::new();
    for seq in 0..LATENCY_MESSAGES {
        let body = line(seq);
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let start = Instant::now();
        writer.write_all(request.as_bytes()).expect("write");
        writer.write_all(&body).expect("write");
        let mut length = 0;
        loop {
            head.clear();
            reader.read_line(&mut head).expect("read");
            if head == "\r\n" || head.is_empty() {
                break;
            }
            if let Some(v) = head.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut got = vec![0u8; length];
        reader.read_exact(&mut got).expect("body");
        samples.push(start.elapsed());
    }
    figures(samples)
}

fn main() {
    let dir = std::env::temp_dir().join(format!("mcp-sim-tap-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let trace = dir.join("trace.jsonl");
    println!("tap latency: {LATENCY_MESSAGES} messages each, one at a time (round trips)");
    let direct = stdio_latency(false, &trace);
    let tapped = stdio_latency(true, &trace);
    println!(
        "stdio  direct pipe:  p50 {:8.1} us  p99 {:8.1} us",
        us(direct.p50),
        us(direct.p99)
    );
    println!(
        "stdio  through tap:  p50 {:8.1} us  p99 {:8.1} us",
        us(tapped.p50),
        us(tapped.p99)
    );
    println!(
        "stdio  added per message (half the round-trip difference): p50 {:.1} us, p99 {:.1} us",
        (us(tapped.p50) - us(direct.p50)) / 2.0,
        (us(tapped.p99) - us(direct.p99)) / 2.0
    );
    let port = http_echo();
    let direct = http_latency(port);
    let mut tap = Command::new(MCP_SIM)
        .args(["record", "--http", "127.0.0.1:0", "--upstream"])
        .arg(format!("http://127.0.0.1:{port}"))
        .arg("--trace")
        .arg(dir.join("http.jsonl"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tap starts");
    let mut first = String::new();
    BufReader::new(tap.stderr.take().expect("stderr"))
        .read_line(&mut first)
        .expect("the tap prints its address");
    let tap_port: u16 = first
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split([',', ' ']).next())
        .and_then(|p| p.trim().parse().ok())
        .expect("a port");
    let tapped = http_latency(tap_port);
    // SAFETY: SIGTERM to our own child.
    unsafe {
        libc::kill(tap.id() as i32, libc::SIGTERM);
    }
    let _ = tap.wait();
    println!(
        "http   direct:       p50 {:8.1} us  p99 {:8.1} us",
        us(direct.p50),
        us(direct.p99)
    );
    println!(
        "http   through tap:  p50 {:8.1} us  p99 {:8.1} us",
        us(tapped.p50),
        us(tapped.p99)
    );
    println!(
        "http   added per exchange (request and response): p50 {:.1} us, p99 {:.1} us",
        us(tapped.p50) - us(direct.p50),
        us(tapped.p99) - us(direct.p99)
    );
    let (in_order, out_of_order, rate) = stdio_throughput(&trace);
    println!(
        "stdio  {RATE_MESSAGES} messages paced at {RATE}/s (achieved {rate:.0}/s): {in_order} echoed in order, {out_of_order} out of order, {} lost",
        RATE_MESSAGES - in_order - out_of_order
    );
    let _ = std::fs::remove_dir_all(&dir);
}
