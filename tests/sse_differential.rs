//! The SSE decoder against `sse-stream` (see `common/sse_oracle.rs`): the reproducers of every
//! disagreement found, each on the side that breaks a WHATWG event-stream rule. The committed
//! inputs of the `sse_differential` fuzz target are replayed by `fuzz_regressions.rs`.

#[path = "common/sse_oracle.rs"]
mod sse_oracle;

use sse_oracle::{compare, ours, sse_stream, Event, Known};

fn event(ty: &str, data: &str, id: &str) -> Event {
    (ty.into(), data.into(), id.into())
}

/// Cases where both agree with the WHATWG rules, one rule each.
#[test]
fn both_follow_whatwg() {
    let cases: &[(&[u8], Vec<Event>)] = &[
        (b"data: a\n\n", vec![event("message", "a", "")]),
        (b"\xEF\xBB\xBFdata: a\n\n", vec![event("message", "a", "")]),
        (
            b"data: a\r\ndata: b\r\r",
            vec![event("message", "a\nb", "")],
        ),
        (
            b"data:  two spaces\n\n",
            vec![event("message", " two spaces", "")],
        ),
        (b"data\n\n", vec![event("message", "", "")]),
        (
            b"id: 7\ndata: a\n\ndata: b\n\n",
            vec![event("message", "a", "7"), event("message", "b", "7")],
        ),
        (b"id: 1\0\ndata: a\n\n", vec![event("message", "a", "")]),
        (
            b"event: x\ndata: a\n\ndata: b\n\n",
            vec![event("x", "a", ""), event("message", "b", "")],
        ),
        (b"event: x\n\ndata: b\n\n", vec![event("message", "b", "")]),
        (
            b": keep-alive\nfoo: 1\ndata: a\n\n",
            vec![event("message", "a", "")],
        ),
        (
            b"data: a\n\ndata: unfinished",
            vec![event("message", "a", "")],
        ),
    ];
    for (input, want) in cases {
        let text = String::from_utf8_lossy(input);
        assert_eq!(&ours(&[input]), want, "mcp-sim on {text:?}");
        assert_eq!(&sse_stream(&[input]).events, want, "sse-stream on {text:?}");
        for cut in 0..=input.len() {
            let chunks = [&input[..cut], &input[cut..]];
            assert_eq!(compare(input, &chunks), Ok(None), "{text:?} cut at {cut}");
        }
    }
}

/// sse-stream 0.3.0 ends the stream at bytes that are not UTF-8 in a field value; WHATWG
/// decodes with U+FFFD and goes on (the event-stream is "decoded using UTF-8 decode"). An MCP
/// client on it loses every later message of the response.
#[test]
fn sse_stream_stops_at_invalid_utf8() {
    let input: &[u8] = b"data: \xFF\n\ndata: ok\n\n";
    assert_eq!(
        ours(&[input]),
        vec![event("message", "\u{FFFD}", ""), event("message", "ok", "")]
    );
    let theirs = sse_stream(&[input]);
    assert!(
        theirs.events.is_empty() && theirs.error.is_some(),
        "{theirs:?}"
    );
    assert_eq!(
        compare(input, &[input]),
        Ok(Some(Known::StopsAtInvalidUtf8))
    );
}

/// The decoder of sse-stream 0.2.6, which rmcp 3 resolves to, driven as rmcp drives it
/// (`SseStream::from_bytes_stream`, the stream given up at its first error).
fn rmcp_decoder(chunks: &[&[u8]]) -> (Vec<Event>, Option<String>) {
    let stream = sse_stream_02::SseStream::from_bytes_stream(sse_oracle::byte_stream(chunks));
    let (mut events, mut last_id) = (Vec::new(), String::new());
    for block in sse_oracle::poll_all(stream) {
        let b = match block {
            Ok(b) => b,
            Err(e) => return (events, Some(e.to_string())),
        };
        if let Some(id) = b.id {
            last_id = id;
        }
        if let Some(data) = b.data {
            let ty = b.event.filter(|t| !t.is_empty());
            events.push((
                ty.unwrap_or_else(|| "message".into()),
                data,
                last_id.clone(),
            ));
        }
    }
    (events, None)
}

/// Where the decoder rmcp ships today breaks a WHATWG rule: each input, the rule, and what
/// WHATWG (and mcp-sim) give. Each row is asserted both ways, so a row that stops
/// reproducing fails here.
#[test]
fn rmcp_sse_decoder_reproducers() {
    struct Row {
        input: &'static [&'static [u8]],
        rule: &'static str,
        whatwg: Vec<Event>,
    }
    let rows = [
        Row {
            input: &[b"data\n\n"],
            rule: "a line without a colon is a field named by the whole line, value empty",
            whatwg: vec![event("message", "", "")],
        },
        Row {
            input: &[b"foo: 1\ndata: x\n\n"],
            rule: "a field with another name is ignored",
            whatwg: vec![event("message", "x", "")],
        },
        Row {
            input: &[b"event: a\nevent: b\ndata: x\n\n"],
            rule: "a later event field replaces the event type",
            whatwg: vec![event("b", "x", "")],
        },
        Row {
            input: &[b"id: 1\nid: 2\ndata: x\n\n"],
            rule: "a later id field replaces the last event id",
            whatwg: vec![event("message", "x", "2")],
        },
        Row {
            input: &[b"retry: soon\ndata: y\n\n"],
            rule: "a retry value that is not all digits is ignored",
            whatwg: vec![event("message", "y", "")],
        },
        Row {
            input: &[b"data: \xFF\n\n"],
            rule: "the stream is decoded as UTF-8 with replacement characters",
            whatwg: vec![event("message", "\u{FFFD}", "")],
        },
        Row {
            input: &[b"data: a\n\nfoo\n"],
            rule: "events before a bad line are dispatched (0.2.6 reports the error first)",
            whatwg: vec![event("message", "a", "")],
        },
    ];
    let mut report = Vec::new();
    for row in &rows {
        assert_eq!(ours(row.input), row.whatwg, "mcp-sim: {}", row.rule);
        let rmcp = rmcp_decoder(row.input);
        assert!(
            rmcp != (row.whatwg.clone(), None),
            "sse-stream 0.2.6 now follows \"{}\" on {:?}: drop the row",
            row.rule,
            row.input
        );
        report.push(format!("{:?}: {} -> {rmcp:?}", row.input, row.rule));
    }
    // Whether 0.2.6 delivers the event before a bad line depends on where the read ended:
    // the same bytes, two outcomes for an rmcp client.
    let whole = rmcp_decoder(&[b"data: a\n\nfoo\n"]);
    let split = rmcp_decoder(&[b"data: a\n\n", b"foo\n"]);
    assert_eq!(whole.0, vec![], "{whole:?}");
    assert_eq!(split.0, vec![event("message", "a", "")], "{split:?}");
    println!("{}", report.join("\n"));
}
