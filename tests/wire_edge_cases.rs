//! Edge cases of the wire layer: duplicate members, id and token typing, number ranges,
//! limits, top-level shapes, bytes that are not UTF-8 JSON, encoder refusals, and framing
//! corner cases.

use mcp_sim::framing::ndjson::{LineDecoder, LineOptions};
use mcp_sim::framing::sse::{SseDecoder, SseItem, SseOptions};
use mcp_sim::framing::FrameError;
use mcp_sim::wire::json::parse_value;
use mcp_sim::wire::{
    decode, decode_with, encode, encode_with, Cancelled, DecodeError, DecodeOptions, EncodeError,
    ErrorResponse, Limits, Message, Notification, Progress, ProgressToken, Request, RequestId,
    ResultResponse,
};
use serde_json::{json, Map, Value};

fn err(json: &str) -> DecodeError {
    err_with(json, &DecodeOptions::default())
}

fn err_with(json: &str, opts: &DecodeOptions) -> DecodeError {
    match decode_with(json.as_bytes(), opts) {
        Ok(m) => panic!("{json}: expected an error, got {m:?}"),
        Err(e) => e,
    }
}

fn ok(json: &str) -> Message {
    decode(json.as_bytes()).unwrap_or_else(|e| panic!("{json}: {e}"))
}

/// `(rule, path)` of the error.
fn verdict(json: &str) -> (&'static str, String) {
    let e = err(json);
    (e.rule.as_str(), e.path)
}

fn request(params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#)
}

const META: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}"#;

// ---------------------------------------------------------------------------------------------
// Duplicate members

#[test]
fn duplicate_envelope_members() {
    for (json, path) in [
        (
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","method":"notifications/x"}"#,
            "jsonrpc",
        ),
        (r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#, "id"),
        (
            r#"{"jsonrpc":"2.0","method":"a/b","method":"notifications/x"}"#,
            "method",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/x","params":{},"params":[]}"#,
            "params",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
            "result",
        ),
        (
            r#"{"jsonrpc":"2.0","error":{"code":1,"message":"a"},"error":{"code":2,"message":"b"}}"#,
            "error",
        ),
    ] {
        assert_eq!(verdict(json), ("duplicate-key", path.to_owned()), "{json}");
    }
}

#[test]
fn duplicate_members_inside_interpreted_objects() {
    let cases = [
        (
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"a","progressToken":"b","progress":1}}"#.to_owned(),
            "params.progressToken",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"a","progress":1,"progress":2}}"#.to_owned(),
            "params.progress",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}"#.to_owned(),
            "params.requestId",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"code":2,"message":"x"}}"#.to_owned(),
            "error.code",
        ),
        (
            request(&format!(r#"{{"_meta":{{}},"_meta":{{{META}}}}}"#)),
            "params._meta",
        ),
        (
            request(&format!(
                r#"{{"_meta":{{{META},"progressToken":"a","progressToken":"b"}}}}"#
            )),
            "params._meta.progressToken",
        ),
        (
            request(&format!(
                r#"{{"_meta":{{{META},"io.modelcontextprotocol/protocolVersion":"1900-01-01"}}}}"#
            )),
            "params._meta.io.modelcontextprotocol/protocolVersion",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"bogus","resultType":"complete"}}"#.to_owned(),
            "result.resultType",
        ),
        // The same key, once with an escape.
        (
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"request\u0049d":2}}"#.to_owned(),
            "params.requestId",
        ),
    ];
    for (json, path) in cases {
        assert_eq!(verdict(&json), ("duplicate-key", path.to_owned()), "{json}");
    }
    // A duplicate inside a request still carries the request's id.
    let e = err(&request(&format!(r#"{{"_meta":{{}},"_meta":{{{META}}}}}"#)));
    assert_eq!(e.id, Some(RequestId::Number(1)));
}

/// Members this layer does not interpret may repeat (JSON allows it; the free-form map keeps
/// the last).
#[test]
fn duplicate_free_form_members_are_kept_as_json_does() {
    let Message::Request(r) = ok(&request(&format!(
        r#"{{"arguments":{{"a":1,"a":2}},"_meta":{{{META}}}}}"#
    ))) else {
        panic!("a request")
    };
    assert_eq!(r.params["arguments"], json!({"a": 2}));
}

// ---------------------------------------------------------------------------------------------
// Ids and tokens

#[test]
fn string_and_integer_ids_are_different_values() {
    let cancel = |id: &str| {
        let json = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
        );
        match ok(&json) {
            Message::Cancelled(c) => c.request_id,
            other => panic!("{other:?}"),
        }
    };
    let (s, n) = (cancel(r#""1""#), cancel("1"));
    assert_eq!(s, RequestId::String("1".into()));
    assert_eq!(n, RequestId::Number(1));
    assert_ne!(s, n);
    assert_eq!(
        (s.to_string(), n.to_string()),
        (r#""1""#.into(), "1".into())
    );
    let set: std::collections::HashSet<RequestId> = [s, n].into_iter().collect();
    assert_eq!(set.len(), 2);

    let token = |t: &str| {
        let json = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{t},"progress":1}}}}"#
        );
        match ok(&json) {
            Message::Progress(p) => p.token,
            other => panic!("{other:?}"),
        }
    };
    assert_ne!(token(r#""1""#), token("1"));
    assert_eq!(token("1"), ProgressToken::Number(1));

    // Encoding keeps the difference.
    let a = encode(&Cancelled::new("1").into()).unwrap();
    let b = encode(&Cancelled::new(1).into()).unwrap();
    assert!(a.contains(r#""requestId":"1""#), "{a}");
    assert!(b.contains(r#""requestId":1"#), "{b}");
}

#[test]
fn integer_ids_beyond_i64() {
    let result = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
    assert_eq!(
        ok(&result("9223372036854775807")).id(),
        Some(&RequestId::Number(i64::MAX))
    );
    assert_eq!(
        ok(&result("-9223372036854775808")).id(),
        Some(&RequestId::Number(i64::MIN))
    );
    for id in [
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775809",
        "100000000000000000000000000000",
    ] {
        assert_eq!(
            verdict(&result(id)),
            ("integer-out-of-range", "id".into()),
            "{id}"
        );
    }
    // Not even the integral-float switch lets them in.
    let lenient = DecodeOptions {
        allow_integral_float_ids: true,
        ..DecodeOptions::default()
    };
    assert_eq!(
        err_with(&result("1e19"), &lenient).rule.as_str(),
        "integer-out-of-range"
    );
    assert_eq!(
        decode_with(result("2e0").as_bytes(), &lenient)
            .unwrap()
            .id(),
        Some(&RequestId::Number(2))
    );
    for id in ["9223372036854775808.0", "-9223372036854775808.0", "1e300"] {
        assert_eq!(
            err_with(&result(id), &lenient).rule.as_str(),
            "integer-out-of-range",
            "{id}"
        );
    }

    // A request whose id is out of range has no readable id to answer with.
    let e = err(&request(&format!(r#"{{"_meta":{{{META}}}}}"#))
        .replace(r#""id":1"#, r#""id":9223372036854775808"#));
    assert_eq!(
        (e.rule.as_str(), e.path.as_str()),
        ("integer-out-of-range", "id")
    );
    assert_eq!(e.id, None);

    // Tokens and requestId follow the same rule.
    assert_eq!(
        verdict(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":9223372036854775808,"progress":1}}"#
        ),
        ("integer-out-of-range", "params.progressToken".into())
    );
    assert_eq!(
        verdict(&request(&format!(
            r#"{{"_meta":{{{META},"progressToken":18446744073709551615}}}}"#
        ))),
        ("integer-out-of-range", "params._meta.progressToken".into())
    );
    assert_eq!(
        verdict(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":-9223372036854775809}}"#
        ),
        ("integer-out-of-range", "params.requestId".into())
    );
}

#[test]
fn ids_of_other_types() {
    let result = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
    for (id, rule) in [
        ("true", "wrong-type"),
        ("[]", "wrong-type"),
        ("{}", "wrong-type"),
        ("null", "null-id"),
        ("1.5", "fractional-id"),
        ("1.0", "fractional-id"),
        ("1e2", "fractional-id"),
        ("-0.0", "fractional-id"),
    ] {
        assert_eq!(verdict(&result(id)), (rule, "id".into()), "{id}");
    }
    // Missing id on a result.
    assert_eq!(
        verdict(r#"{"jsonrpc":"2.0","result":{}}"#),
        ("missing-field", "id".into())
    );
    // The empty string is a string.
    assert_eq!(
        ok(&result(r#""""#)).id(),
        Some(&RequestId::String(String::new()))
    );
}

#[test]
fn error_code_range() {
    assert_eq!(
        verdict(r#"{"jsonrpc":"2.0","id":1,"error":{"code":9223372036854775808,"message":"x"}}"#),
        ("integer-out-of-range", "error.code".into())
    );
    let Message::Error(e) =
        ok(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-9223372036854775808,"message":"x"}}"#)
    else {
        panic!("an error")
    };
    assert_eq!(e.error.code, i64::MIN);
}

// ---------------------------------------------------------------------------------------------
// Numbers

fn progress(value: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"p","progress":{value}}}}}"#
    )
}

#[test]
fn numbers_beyond_f64_are_out_of_range() {
    for value in ["1e400", "-1e400", "1E+400"] {
        let e = err(&progress(value));
        assert_eq!(e.rule.as_str(), "number-out-of-range", "{value}");
        assert_eq!(e.jsonrpc_code(), -32700);
    }
    let total = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"total":1e400}}"#;
    assert_eq!(err(total).rule.as_str(), "number-out-of-range");
    // Anywhere in the message, even where nothing reads it.
    for json in [
        r#"{"jsonrpc":"2.0","method":"notifications/x","extra":1e400}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/x","extra":[{"a":[1e400]}]}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","data":1e400}}"#,
        r#"{"jsonrpc":"2.0","id":1e400,"result":{}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1e400}}"#,
    ] {
        assert_eq!(err(json).rule.as_str(), "number-out-of-range", "{json}");
    }
    // The generic JSON layer agrees.
    assert_eq!(
        parse_value(b"[1e400]", &Limits::default())
            .unwrap_err()
            .rule
            .as_str(),
        "number-out-of-range"
    );
}

#[test]
fn progress_values() {
    let value = |v: &str| match ok(&progress(v)) {
        Message::Progress(p) => p.progress,
        other => panic!("{other:?}"),
    };
    assert_eq!(value("1e-400"), 0.0);
    assert_eq!(value("-3"), -3.0);
    assert_eq!(value("0.1"), 0.1);
    assert_eq!(value("18446744073709551616"), 18446744073709551616.0);
    assert_eq!(value("1.7976931348623157e308"), f64::MAX);
    for v in ["null", "true", "[]", "{}", r#""1""#] {
        assert_eq!(
            verdict(&progress(v)),
            ("wrong-type", "params.progress".into()),
            "{v}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Limits

#[test]
fn message_too_large() {
    let json = r#"{"jsonrpc":"2.0","method":"notifications/x"}"#;
    let limits = |max| DecodeOptions {
        limits: Limits {
            max_message_bytes: max,
            ..Limits::DEFAULT
        },
        ..DecodeOptions::default()
    };
    assert!(decode_with(json.as_bytes(), &limits(json.len())).is_ok());
    let e = err_with(json, &limits(json.len() - 1));
    assert_eq!(
        (e.rule.as_str(), e.path.as_str(), e.jsonrpc_code()),
        ("message-too-large", "", -32700)
    );
    // Checked before the syntax.
    assert_eq!(
        err_with("{{{{", &limits(3)).rule.as_str(),
        "message-too-large"
    );
    assert_eq!(
        parse_value(
            b"[1,2,3]",
            &Limits {
                max_message_bytes: 6,
                ..Limits::DEFAULT
            }
        )
        .unwrap_err()
        .rule
        .as_str(),
        "message-too-large"
    );
    // The encoder refuses to write what the decoder would refuse.
    let msg = Message::from(Cancelled::new("a-long-request-id"));
    let text = encode(&msg).unwrap();
    let small = Limits {
        max_message_bytes: text.len() - 1,
        ..Limits::DEFAULT
    };
    match encode_with(&msg, &small) {
        Err(EncodeError::Limit(e)) => assert_eq!(e.rule.as_str(), "message-too-large"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn nesting_too_deep() {
    let depth = |max| DecodeOptions {
        limits: Limits {
            max_depth: max,
            ..Limits::DEFAULT
        },
        ..DecodeOptions::default()
    };
    // Depth 4: the message, params, params.a, params.a.b.
    let json = r#"{"jsonrpc":"2.0","method":"notifications/x","params":{"a":{"b":[]}}}"#;
    assert!(decode_with(json.as_bytes(), &depth(4)).is_ok());
    let e = err_with(json, &depth(3));
    assert_eq!(
        (e.rule.as_str(), e.jsonrpc_code()),
        ("nesting-too-deep", -32700)
    );
    // Brackets inside strings do not count, escaped quotes do not end the string.
    let json = r#"{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"[[[{{\"[[["}}"#;
    assert!(decode_with(json.as_bytes(), &depth(2)).is_ok());
    // Deeper than serde_json's own limit: a typed error, even with a huge configured limit.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    for max in [64, 127, 128, 1_000_000] {
        let e = decode_with(deep.as_bytes(), &depth(max)).unwrap_err();
        assert_eq!(e.rule.as_str(), "nesting-too-deep", "{max}");
        let l = Limits {
            max_depth: max,
            ..Limits::DEFAULT
        };
        assert_eq!(
            parse_value(deep.as_bytes(), &l).unwrap_err().rule.as_str(),
            "nesting-too-deep"
        );
    }
    // The default accepts 64 levels and refuses 65.
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(parse_value(nested(64).as_bytes(), &Limits::DEFAULT).is_ok());
    assert_eq!(
        parse_value(nested(65).as_bytes(), &Limits::DEFAULT)
            .unwrap_err()
            .rule
            .as_str(),
        "nesting-too-deep"
    );
    // The clamp: 127 levels is what serde_json can read.
    let l = Limits {
        max_depth: 1000,
        ..Limits::DEFAULT
    };
    assert!(parse_value(nested(127).as_bytes(), &l).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Top-level shapes and envelope

#[test]
fn top_level_shapes() {
    for json in ["1", "-0.5", r#""x""#, "null", "true", " false "] {
        assert_eq!(verdict(json), ("not-an-object", String::new()), "{json}");
        assert_eq!(err(json).jsonrpc_code(), -32600);
    }
    for json in ["[]", "[{}]", "[1,2]"] {
        assert_eq!(verdict(json), ("batch", String::new()), "{json}");
    }
    for json in ["", " ", "{", "}", "{}{}", "{} x", "nul", "\u{feff}{}"] {
        let e = err(json);
        assert_eq!(e.rule.as_str(), "json-syntax", "{json:?}");
        assert_eq!(e.jsonrpc_code(), -32700);
    }
    // Surrounding whitespace is JSON whitespace.
    ok(" \t{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\r\n ");
}

#[test]
fn envelope_rules() {
    for (json, rule, path) in [
        (
            r#"{"jsonrpc":"1.0","method":"notifications/x"}"#,
            "jsonrpc-version",
            "jsonrpc",
        ),
        (
            r#"{"jsonrpc":2.0,"method":"notifications/x"}"#,
            "jsonrpc-version",
            "jsonrpc",
        ),
        (
            r#"{"jsonrpc":null,"method":"notifications/x"}"#,
            "jsonrpc-version",
            "jsonrpc",
        ),
        (
            r#"{"method":"notifications/x"}"#,
            "jsonrpc-version",
            "jsonrpc",
        ),
        (r#"{"jsonrpc":"2.0","method":7}"#, "wrong-type", "method"),
        (r#"{"jsonrpc":"2.0"}"#, "unknown-shape", ""),
        (r#"{"jsonrpc":"2.0","id":1}"#, "unknown-shape", ""),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/x","result":{}}"#,
            "unknown-shape",
            "",
        ),
        (
            r#"{"jsonrpc":"2.0","error":{"code":1,"message":"x"},"result":{}}"#,
            "result-and-error",
            "",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/x","params":[1]}"#,
            "positional-params",
            "params",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/x","params":"p"}"#,
            "wrong-type",
            "params",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":[1]}"#,
            "positional-params",
            "params",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":null}"#,
            "wrong-type",
            "params",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":[]}"#,
            "wrong-type",
            "result",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":1}}"#,
            "wrong-type",
            "result.resultType",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":"x"}"#,
            "wrong-type",
            "error",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}"#,
            "missing-field",
            "error.code",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":null}}"#,
            "wrong-type",
            "error.message",
        ),
    ] {
        assert_eq!(verdict(json), (rule, path.to_owned()), "{json}");
    }
    // The envelope of a request: its errors carry the id.
    let e = err(r#"{"jsonrpc":"1.0","id":"r","method":"tools/call","params":{}}"#);
    assert_eq!(e.id, Some(RequestId::from("r")));
    assert_eq!(e.jsonrpc_code(), -32600);
    let e = err(&request(r#"{"_meta":[]}"#));
    assert_eq!(
        (e.rule.as_str(), e.path.as_str(), e.jsonrpc_code()),
        ("wrong-type", "params._meta", -32602)
    );
    assert_eq!(e.id, Some(RequestId::Number(1)));
    let e = err(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
    assert_eq!(
        (e.rule.as_str(), e.path.as_str(), e.jsonrpc_code()),
        ("missing-meta", "params", -32602)
    );
    // Unknown envelope members are ignored.
    ok(r#"{"jsonrpc":"2.0","method":"notifications/x","extra":{"a":[1,2]}}"#);
}

/// Bytes that are not UTF-8, or escapes that are not Unicode, make the whole message invalid
/// JSON, wherever they are (docs/spec/mcp-2026-07-28.md §1.1).
#[test]
fn not_utf8_anywhere_is_a_syntax_error() {
    let cases: [&[u8]; 6] = [
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"junk\":\"\xff\"}",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"junk\":[\"\xc3\"]}",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":{\"a\":\"\xed\xa0\x80\"}}",
        b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"result\":{}}",
        br#"{"jsonrpc":"2.0","method":"notifications/x","junk":"\ud800"}"#,
        br#"{"jsonrpc":"2.0","id":"\udc00x","method":"tools/call","params":{}}"#,
    ];
    for bytes in cases {
        let e = decode(bytes).unwrap_err();
        assert_eq!(
            (e.rule.as_str(), e.jsonrpc_code(), e.id.clone()),
            ("json-syntax", -32700, None),
            "{}",
            String::from_utf8_lossy(bytes)
        );
        assert!(parse_value(bytes, &Limits::DEFAULT).is_err());
    }
    // A valid surrogate pair is fine.
    let Message::Cancelled(c) = ok(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\ud83d\ude00"}}"#,
    ) else {
        panic!("a cancellation")
    };
    assert_eq!(c.request_id, RequestId::from("\u{1f600}"));
}

// ---------------------------------------------------------------------------------------------
// Encoder refusals

#[test]
fn encoder_refusals() {
    let mut r = Request::new(1, "notifications/x");
    assert_eq!(
        encode(&r.clone().into()),
        Err(EncodeError::ReservedMethod("notifications/x".into()))
    );
    r.method = "tools/call".into();
    r.params.insert("_meta".into(), json!({}));
    assert!(matches!(
        encode(&r.clone().into()),
        Err(EncodeError::ReservedKey { path: "params", key }) if key == "_meta"
    ));
    r.params.clear();
    for key in [
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
        "progressToken",
    ] {
        let mut r = r.clone();
        r.meta.other.insert(key.into(), json!("x"));
        assert!(matches!(
            encode(&r.into()),
            Err(EncodeError::ReservedKey { path: "params._meta", key: k }) if k == key
        ));
    }
    for method in ["notifications/progress", "notifications/cancelled"] {
        let n = Notification {
            method: method.into(),
            params: None,
        };
        assert_eq!(
            encode(&n.into()),
            Err(EncodeError::ReservedMethod(method.into()))
        );
    }
    let mut res = ResultResponse::complete(1);
    res.result.insert("resultType".into(), json!("complete"));
    assert!(matches!(
        encode(&res.into()),
        Err(EncodeError::ReservedKey { path: "result", .. })
    ));
    for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(
            encode(&Progress::new("p", v).into()),
            Err(EncodeError::NonFinite {
                path: "params.progress"
            })
        );
        let mut p = Progress::new("p", 1.0);
        p.total = Some(v);
        assert_eq!(
            encode(&p.into()),
            Err(EncodeError::NonFinite {
                path: "params.total"
            })
        );
    }
}

#[test]
fn encoder_output_shape() {
    let mut r = Request::tools_call(7, "slow_op", json!({"steps": 3})).with_progress_token("p-7");
    r.meta
        .other
        .insert("traceparent".into(), Value::from("00-x"));
    let text = encode(&r.clone().into()).unwrap();
    assert!(text.starts_with(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#));
    assert!(!text.contains('\n'));
    assert_eq!(decode(text.as_bytes()).unwrap(), Message::Request(r));

    let e = ErrorResponse::new(None, -32700, "Parse error");
    assert_eq!(
        encode(&e.into()).unwrap(),
        r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#
    );
    let n = Notification {
        method: "notifications/tools/list_changed".into(),
        params: Some(Map::new()),
    };
    assert_eq!(
        encode(&n.into()).unwrap(),
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}"#
    );
}

// ---------------------------------------------------------------------------------------------
// Framing corner cases

/// A line `(number, bytes)` or a framing error `(rule, line)`.
type LineItem = Result<(u64, Vec<u8>), (&'static str, u64)>;

fn ndjson(opts: LineOptions, chunks: &[&[u8]]) -> Vec<LineItem> {
    let mut d = LineDecoder::new(opts);
    let mut out = Vec::new();
    for c in chunks {
        d.push(c);
        while let Some(item) = d.next_line() {
            out.push(
                item.map(|l| (l.number, l.bytes))
                    .map_err(|e| (e.rule.as_str(), e.line)),
            );
        }
    }
    if let Some(e) = d.finish() {
        out.push(Err((e.rule.as_str(), e.line)));
    }
    out
}

#[test]
fn ndjson_over_long_lines() {
    let opts = LineOptions {
        max_line_bytes: 4,
        ..LineOptions::default()
    };
    let expected = vec![
        Ok((1, b"abcd".to_vec())),
        Err(("line-too-long", 2)),
        Ok((3, b"ok".to_vec())),
        Err(("line-too-long", 4)),
    ];
    let input: &[u8] = b"abcd\nabcdefghij\nok\nabcdefgh";
    assert_eq!(ndjson(opts, &[input]), expected);
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(ndjson(opts, &bytes), expected);
    // A CR counts towards the length in lenient mode, then is stripped.
    let lenient = LineOptions {
        allow_crlf: true,
        ..opts
    };
    assert_eq!(
        ndjson(lenient, &[b"abcd\r\nabc\r\n"]),
        vec![Err(("line-too-long", 1)), Ok((2, b"abc".to_vec()))]
    );
    assert_eq!(
        ndjson(lenient, &[b"abcd", b"\r", b"\n"]),
        vec![Err(("line-too-long", 1))]
    );
}

#[test]
fn ndjson_end_of_stream() {
    let opts = LineOptions::default();
    assert_eq!(ndjson(opts, &[]), vec![]);
    assert_eq!(ndjson(opts, &[b"a\n"]), vec![Ok((1, b"a".to_vec()))]);
    assert_eq!(
        ndjson(opts, &[b"a\nb"]),
        vec![Ok((1, b"a".to_vec())), Err(("truncated", 2))]
    );
    assert_eq!(ndjson(opts, &[b"\r"]), vec![Err(("truncated", 1))]);
    // A raw CR inside a line is not a line end on stdio.
    assert_eq!(ndjson(opts, &[b"a\rb\n"]), vec![Ok((1, b"a\rb".to_vec()))]);
}

fn sse(
    opts: SseOptions,
    chunks: &[&[u8]],
) -> (Vec<Result<SseItem, FrameError>>, Option<FrameError>) {
    let mut d = SseDecoder::new(opts);
    let mut out = Vec::new();
    for c in chunks {
        d.push(c);
        while let Some(item) = d.next_item() {
            out.push(item);
        }
    }
    (out, d.finish())
}

fn data_of(items: &[Result<SseItem, FrameError>]) -> Vec<String> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(SseItem::Event(e)) => Some(e.data.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn sse_field_rules() {
    let input = "\u{feff}data:a\ndata\ndata:  b\n\nevent: x\nid: 7\nretry: 10\ndata: c\n\n: comment\nid: a\0b\nunknown: z\nretry: 1x\ndata: d\n\n\n\nevent: lost\n\n";
    let (items, end) = sse(SseOptions::default(), &[input.as_bytes()]);
    assert_eq!(end, None);
    let events: Vec<(String, String, String)> = items
        .iter()
        .filter_map(|i| match i {
            Ok(SseItem::Event(e)) => Some((
                e.event_type.clone(),
                e.data.clone(),
                e.last_event_id.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        events,
        [
            ("message".into(), "a\n\n b".into(), String::new()),
            ("x".into(), "c".into(), "7".into()),
            ("message".into(), "d".into(), "7".into()),
        ]
    );
    assert!(items.contains(&Ok(SseItem::Comment(" comment".into()))));

    let mut d = SseDecoder::new(SseOptions::default());
    d.push(b"retry: 10\n\nretry: 1x\n\n");
    while d.next_item().is_some() {}
    assert_eq!(d.retry(), Some(10));
}

#[test]
fn sse_bom_only_at_the_start() {
    let (items, _) = sse(
        SseOptions::default(),
        &[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"],
    );
    assert_eq!(data_of(&items), ["a"]);
    // A second BOM is part of the field name, so the line is an unknown field.
    let (items, _) = sse(
        SseOptions::default(),
        &[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"],
    );
    assert!(data_of(&items).is_empty());
}

#[test]
fn sse_cr_lf_split_across_chunks() {
    let (items, end) = sse(
        SseOptions::default(),
        &[b"data: a\r", b"\ndata: b\r", b"\r\n"],
    );
    assert_eq!(data_of(&items), ["a\nb"]);
    assert_eq!(end, None);
    // Lone CRs end lines too.
    let (items, _) = sse(SseOptions::default(), &[b"data: a\rdata: b\r\r"]);
    assert_eq!(data_of(&items), ["a\nb"]);
}

#[test]
fn sse_limits_and_line_numbers() {
    let opts = SseOptions {
        max_line_bytes: 10,
        max_event_bytes: 6,
    };
    // Line 2 is too long; line 5 overflows the event data; both name their own line.
    let input = b"data: a\ndata: 0123456789\n\ndata: abc\ndata: defg\n\ndata: z\n\n";
    let expected_errors = vec![("line-too-long", 2), ("line-too-long", 5)];
    for chunk in [input.len(), 1, 3] {
        let chunks: Vec<&[u8]> = input.chunks(chunk).collect();
        let (items, end) = sse(opts, &chunks);
        let errors: Vec<(&str, u64)> = items
            .iter()
            .filter_map(|i| i.as_ref().err().map(|e| (e.rule.as_str(), e.line)))
            .collect();
        assert_eq!(errors, expected_errors, "chunk size {chunk}");
        assert_eq!(data_of(&items), ["a", "z"], "chunk size {chunk}");
        assert_eq!(end, None);
    }
}

#[test]
fn sse_end_of_stream() {
    let (_, end) = sse(SseOptions::default(), &[b"data: a\n"]);
    assert_eq!(end.map(|e| e.rule.as_str()), Some("truncated"));
    let (_, end) = sse(SseOptions::default(), &[b"data: a"]);
    assert_eq!(end.map(|e| e.rule.as_str()), Some("truncated"));
    let (_, end) = sse(SseOptions::default(), &[b"event: a\n"]);
    assert_eq!(end, None);
    let (_, end) = sse(SseOptions::default(), &[b": ping\n"]);
    assert_eq!(end, None);
}

// ---------------------------------------------------------------------------------------------
// Member names serde_json treats specially

/// serde_json's `Value`, with its `raw_value` feature, reads an object whose first member is
/// `$serde_json::private::RawValue` as the JSON text in that member's string. The name is an
/// ordinary one: every place that holds arbitrary JSON keeps such an object as it is.
#[test]
fn raw_value_token_is_an_ordinary_member_name() {
    const TOKEN: &str = "$serde_json::private::RawValue";
    for value in [r#""1""#, "true", r#""[1,2]""#, "{}"] {
        let object = format!(r#"{{"{TOKEN}":{value}}}"#);
        let want: Value = Value::Object(Map::from_iter([(
            TOKEN.to_owned(),
            parse_value(value.as_bytes(), &Limits::DEFAULT).expect("a JSON value"),
        )]));
        let caps = format!(r#""io.modelcontextprotocol/clientCapabilities":{object}"#);
        let params = format!(
            r#"{{"name":"t","arguments":{object},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28",{caps},"x":{object}}}}}"#
        );
        let Message::Request(r) = ok(&request(&params)) else {
            panic!("a request")
        };
        assert_eq!(r.params["arguments"], want, "arguments {object}");
        assert_eq!(Value::Object(r.meta.client_capabilities.clone()), want);
        assert_eq!(r.meta.other["x"], want);
        let again = decode(encode(&Message::Request(r.clone())).unwrap().as_bytes()).unwrap();
        assert_eq!(again, Message::Request(r), "round trip of {object}");

        let result = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{object}]}}}}"#);
        assert!(matches!(ok(&result), Message::Result(_)), "{result}");
        let progress = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"p","progress":1,"_meta":{object}}}}}"#
        );
        assert!(matches!(ok(&progress), Message::Progress(_)), "{progress}");
        assert_eq!(
            parse_value(object.as_bytes(), &Limits::DEFAULT).unwrap(),
            want
        );
    }
}
