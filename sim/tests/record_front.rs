//! `mcp-sim record --http`'s listener is as strict as `serve --http`'s: `Host` and `Origin`
//! validated (403), a body, a header block and the connections open at once bounded (413,
//! 431, 503), each refusal answered with a JSON-RPC error naming what was wrong and recorded
//! in the trace, and nothing refused reaching the server.

mod common;

use common::serve::{raw_post, read_when_written, scratch, Listening};

const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
const MODERN: &str = "mcp-protocol-version: 2026-07-28\r\nmcp-method: server/discover\r\n";

#[test]
fn the_record_front_refuses_what_serve_refuses_and_records_each_refusal() {
    let upstream = Listening::start(&[
        "serve".into(),
        "--http".into(),
        "127.0.0.1:0".into(),
        "--max-seconds".into(),
        "120".into(),
    ]);
    let dir = scratch("record-front");
    let trace = dir.join("trace.jsonl");
    let front = Listening::start(&[
        "record".into(),
        "--http".into(),
        "127.0.0.1:0".into(),
        "--upstream".into(),
        upstream.url.clone(),
        "--max-body-bytes".into(),
        "1000".into(),
        "--max-connections".into(),
        "2".into(),
        "--max-seconds".into(),
        "120".into(),
        "--trace".into(),
        trace.display().to_string(),
    ]);
    let addr = front.addr();
    let post = |headers: &str, body: &str| raw_post(&addr, &format!("{MODERN}{headers}"), body);

    let (status, body) = post("", DISCOVER);
    assert_eq!(status, 200, "a loopback request is passed on: {body}");
    let (status, body) = post("origin: http://localhost:5173\r\n", DISCOVER);
    assert_eq!(status, 200, "a page on another local port is fine: {body}");

    let (status, body) = post("host: evil.example\r\n", DISCOVER);
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("Host") && body.contains("evil.example"),
        "{body}"
    );
    assert!(body.contains("\"code\":-32600"), "{body}");
    let (status, body) = post("origin: http://evil.example\r\n", DISCOVER);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("Origin"), "{body}");

    let big = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(2000)
    );
    let (status, body) = post("", &big);
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("--max-body-bytes"), "{body}");
    let (status, body) = post(&format!("x-pad: {}\r\n", "y".repeat(80 << 10)), DISCOVER);
    assert_eq!(status, 431, "{body}");
    assert!(body.contains("--max-header-bytes"), "{body}");

    // Two connections held open fill the front; a third is answered 503 and closed.
    let held: Vec<_> = (0..2)
        .map(|_| std::net::TcpStream::connect(&addr).expect("connect"))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (status, body) = post("", DISCOVER);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("--max-connections"), "{body}");
    drop(held);
    // Their places come back once the front has seen them close.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let served = loop {
        let (status, _) = post("", DISCOVER);
        if status == 200 || std::time::Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(served, 200);

    front.stop();
    upstream.stop();
    let text = read_when_written(&trace);
    for code in [403, 413, 431, 503] {
        assert!(
            text.contains(&format!("\"status\":{code}")),
            "the trace records the {code}:\n{text}"
        );
    }
    let client_lines = || text.lines().filter(|l| l.contains(r#""side":"client""#));
    assert!(
        client_lines().any(|l| l.contains(r#""host":"evil.example""#)),
        "the refused request is recorded with its Host:\n{text}"
    );
    assert!(
        client_lines().any(|l| l.contains(r#""origin":"http://evil.example""#)),
        "and the other with its Origin:\n{text}"
    );
    assert!(
        !text
            .lines()
            .filter(|l| l.contains(r#""side":"server""#))
            .any(|l| l.contains("evil.example") || l.contains("\"pad\"")),
        "nothing refused reached the server:\n{text}"
    );
}
