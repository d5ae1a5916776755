//! `mcp-sim serve --http` answers each request in the era it speaks, for any number of
//! clients in any order: the reference client of each era (`mcp-sim probe`) drives one serve
//! process at the same time as the other, and each is judged clean in its own era. The
//! probes' DNS-rebinding checks run against it too, so the process's Host and Origin
//! validation is judged by `origin-validated` in both eras.

mod common;

use common::probe::{probe_json, SLOW};
use common::serve::{raw_post, Listening};

#[test]
fn one_serve_process_serves_a_legacy_and_a_modern_client_at_once() {
    let serve = Listening::start(&[
        "serve".into(),
        "--http".into(),
        "127.0.0.1:0".into(),
        "--max-seconds".into(),
        "120".into(),
    ]);
    let url = serve.url.clone();
    let run = |era: &'static str, seed: &'static str| {
        let url = url.clone();
        std::thread::spawn(move || {
            let mut args = vec!["--url", url.as_str(), "--era", era, "--seed", seed];
            args.extend_from_slice(SLOW);
            let (code, v) = probe_json(&args, &[]);
            (era, code, v)
        })
    };
    // Two legacy sessions and a modern client, interleaved.
    let probes = [run("legacy", "1"), run("modern", "2"), run("legacy", "3")];
    for probe in probes {
        let (era, code, v) = probe.join().expect("the probe thread");
        assert_eq!(
            code, 0,
            "the {era} client against the dual-era serve: {v:#}"
        );
        let spoken = v["era"].as_str().unwrap_or_default();
        let want = if era == "legacy" {
            "2025-11-25"
        } else {
            "2026-07-28"
        };
        assert_eq!(spoken, want, "{v:#}");
        assert!(
            v["coverage"]["calls_answered"].as_u64().unwrap_or(0) > 0,
            "{v:#}"
        );
        let rules: Vec<&str> = v["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .filter_map(|x| x["rule"].as_str())
            .collect();
        assert!(!rules.contains(&"origin-validated"), "{v:#}");
    }
    serve.stop();
}

#[test]
fn a_server_without_rebinding_protection_is_named_by_the_probe() {
    // `serve --allow-host evil.example --allow-origin http://evil.example` serves what a
    // rebinding page sends: the probe's check must name it, in each era.
    let serve = Listening::start(&[
        "serve".into(),
        "--http".into(),
        "127.0.0.1:0".into(),
        "--max-seconds".into(),
        "120".into(),
        "--allow-host".into(),
        "evil.example".into(),
        "--allow-origin".into(),
        "http://evil.example".into(),
    ]);
    for era in ["legacy", "modern"] {
        let mut args = vec!["--url", serve.url.as_str(), "--era", era, "--seed", "1"];
        args.extend_from_slice(SLOW);
        let (code, v) = probe_json(&args, &[]);
        assert_eq!(code, 1, "{v:#}");
        let named = v["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .filter(|x| x["rule"] == "origin-validated" && x["level"] == "MUST")
            .count();
        assert_eq!(named, 2, "the Origin and the Host check, in {era}: {v:#}");
        // And off on request.
        args.push("--no-origin-check");
        let (code, v) = probe_json(&args, &[]);
        assert_eq!(code, 0, "{v:#}");
    }
    serve.stop();
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// Opens a legacy session; its id.
fn open_session(addr: &str) -> String {
    let (status, head, body) = common::serve::raw_exchange(addr, "", INITIALIZE);
    assert_eq!(status, 200, "{body}");
    head.lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id in {head}"))
}

#[test]
fn the_http_front_answers_over_its_bounds_with_the_status_for_each() {
    let dir = common::serve::scratch("serve-limits");
    let trace = dir.join("trace.jsonl");
    let serve = Listening::start(&[
        "serve".into(),
        "--http".into(),
        "127.0.0.1:0".into(),
        "--max-seconds".into(),
        "60".into(),
        "--max-body-bytes".into(),
        "1000".into(),
        "--max-sessions".into(),
        "1".into(),
        "--trace".into(),
        trace.display().to_string(),
    ]);
    let addr = serve.addr();
    // A body over the bound: 413 with a JSON-RPC error naming it.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(2000)
    );
    let (status, body) = raw_post(&addr, "", &big);
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("--max-body-bytes"), "{body}");
    // A header block over the bound (64 KiB by default): 431, named; far over it, hyper's
    // read buffer cuts it with 431 before it is a request.
    let huge = format!("x-pad: {}\r\n", "y".repeat(80 << 10));
    let (status, body) = raw_post(&addr, &huge, INITIALIZE);
    assert_eq!(status, 431, "{body}");
    assert!(body.contains("--max-header-bytes"), "{body}");
    let huger = format!("x-pad: {}\r\n", "y".repeat(400 << 10));
    let (status, _) = raw_post(&addr, &huger, INITIALIZE);
    assert_eq!(status, 431);
    // One session is kept: a second initialize ends the first, idle, which then is not
    // found (404), as a client that went away without a DELETE leaves it.
    let first = open_session(&addr);
    let second = open_session(&addr);
    let in_session =
        |id: &str| format!("mcp-session-id: {id}\r\nmcp-protocol-version: 2025-11-25\r\n");
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let (status, body) = raw_post(&addr, &in_session(&first), list);
    assert_eq!(status, 404, "{body}");
    // A session with a call in flight is kept: one more initialize is refused with 503
    // naming the bound.
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow_op","arguments":{"steps":30,"step_ms":100}}}"#;
    let busy = {
        let (addr, headers) = (addr.clone(), in_session(&second));
        std::thread::spawn(move || raw_post(&addr, &headers, call))
    };
    std::thread::sleep(std::time::Duration::from_millis(800));
    let (status, body) = raw_post(&addr, "", INITIALIZE);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("--max-sessions"), "{body}");
    let (status, body) = busy.join().expect("the call");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("result"), "{body}");
    // A 2026-07-28 request is served all the same: nothing else is dropped.
    let discover = r#"{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let (status, body) = raw_post(
        &addr,
        "mcp-protocol-version: 2026-07-28\r\nmcp-method: server/discover\r\n",
        discover,
    );
    assert_eq!(status, 200, "{body}");
    serve.stop();
    let text = common::serve::read_when_written(&trace);
    for code in [413, 431, 404, 503] {
        assert!(
            text.contains(&format!("\"status\":{code}")),
            "the trace records the {code}:\n{text}"
        );
    }
}

#[test]
fn an_idle_connection_is_closed_after_its_bound_and_a_busy_one_is_not() {
    use std::io::Read;
    let serve = Listening::start(&[
        "serve".into(),
        "--http".into(),
        "127.0.0.1:0".into(),
        "--max-seconds".into(),
        "60".into(),
        "--idle-connection-ms".into(),
        "300".into(),
    ]);
    let addr = serve.addr();
    let mut idle = std::net::TcpStream::connect(&addr).expect("connect");
    idle.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .expect("timeout");
    let started = std::time::Instant::now();
    let mut buf = [0u8; 64];
    let n = idle.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the server closes an idle connection without a word");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "closed after its bound, not the read timeout: {:?}",
        started.elapsed()
    );
    // A request takes as long as it takes: a tool call of 1.5 s on a connection whose idle
    // bound is 300 ms is answered whole.
    let call = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow_op","arguments":{"steps":3,"step_ms":500},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let (status, body) = raw_post(
        &addr,
        "mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: slow_op\r\n",
        call,
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""id":5"#) && body.contains("result"),
        "{body}"
    );
    serve.stop();
}
