//! Every JSON example of the spec digest's §10 (`docs/spec/mcp-2026-07-28.md`, 10.1 to 10.5)
//! with the verdict the digest gives it.
//!
//! One table per section. The JSON text is copied verbatim from the digest. A row is either
//! `valid(kind, id, json)` (the message decodes to that kind, with that id) or
//! `invalid(rule, path, id, code, json)`: decoding fails with that rule at that field path,
//! recovers that id, and, when the message would be answered at all, a receiver answers with
//! that JSON-RPC code (`None` for notifications and responses, which are never answered).
//! Examples the digest calls "invalid" only at trace level are well-formed messages and appear
//! as `valid` rows; the examples the digest marks as strictness switches are tested under both
//! settings.

use mcp_sim::framing::ndjson::{Line, LineDecoder, LineOptions};
use mcp_sim::framing::sse::{SseDecoder, SseEvent, SseItem, SseOptions};
use mcp_sim::framing::FrameError;
use mcp_sim::wire::{
    decode, decode_with, DecodeError, DecodeOptions, Message, MessageKind, ProgressToken,
    RequestId, ResultType,
};

/// An id as written in a table row.
#[derive(Debug, Clone, Copy)]
enum Id {
    None,
    Num(i64),
    Str(&'static str),
}

impl Id {
    fn get(self) -> Option<RequestId> {
        match self {
            Id::None => None,
            Id::Num(n) => Some(RequestId::Number(n)),
            Id::Str(s) => Some(RequestId::from(s)),
        }
    }
}

enum Verdict {
    Valid {
        kind: MessageKind,
        id: Id,
    },
    Invalid {
        rule: &'static str,
        path: &'static str,
        id: Id,
        code: Option<i64>,
    },
}

struct Case {
    json: &'static str,
    verdict: Verdict,
}

const fn valid(kind: MessageKind, id: Id, json: &'static str) -> Case {
    Case {
        json,
        verdict: Verdict::Valid { kind, id },
    }
}

const fn invalid(
    rule: &'static str,
    path: &'static str,
    id: Id,
    code: Option<i64>,
    json: &'static str,
) -> Case {
    Case {
        json,
        verdict: Verdict::Invalid {
            rule,
            path,
            id,
            code,
        },
    }
}

use Id::{None as NoId, Num, Str};
use MessageKind as K;

const PARSE_ERROR: Option<i64> = Some(-32700);
const INVALID_REQUEST: Option<i64> = Some(-32600);
const METHOD_NOT_FOUND: Option<i64> = Some(-32601);
const INVALID_PARAMS: Option<i64> = Some(-32602);
/// Not answered: a notification or a response.
const UNANSWERED: Option<i64> = None;

fn check_table(section: &str, cases: &[Case], opts: &DecodeOptions) {
    let mut failures = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        let row = format!("{section} row {}: {}", n + 1, case.json);
        let got = decode_with(case.json.as_bytes(), opts);
        match (&case.verdict, &got) {
            (Verdict::Valid { kind, id }, Ok(msg)) => {
                if msg.kind() != *kind || msg.id() != id.get().as_ref() {
                    failures.push(format!(
                        "{row}\n    expected {} with id {:?}, got {} with id {:?}",
                        kind.as_str(),
                        id.get(),
                        msg.kind().as_str(),
                        msg.id()
                    ));
                }
            }
            (
                Verdict::Invalid {
                    rule,
                    path,
                    id,
                    code,
                },
                Err(e),
            ) => {
                let code_ok = code.is_none_or(|c| c == e.jsonrpc_code());
                if e.rule.as_str() != *rule || e.path != *path || e.id != id.get() || !code_ok {
                    failures.push(format!(
                        "{row}\n    expected {rule} at {path:?} id {:?} code {code:?}, \
                         got {} at {:?} id {:?} code {} ({})",
                        id.get(),
                        e.rule,
                        e.path,
                        e.id,
                        e.jsonrpc_code(),
                        e.detail
                    ));
                }
            }
            (Verdict::Valid { kind, .. }, Err(e)) => failures.push(format!(
                "{row}\n    expected a valid {}, got error {e}",
                kind.as_str()
            )),
            (Verdict::Invalid { rule, path, .. }, Ok(msg)) => failures.push(format!(
                "{row}\n    expected {rule} at {path:?}, got a valid {}",
                msg.kind().as_str()
            )),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

fn strict() -> DecodeOptions {
    DecodeOptions::default()
}

fn decoded(json: &str) -> Message {
    decode(json.as_bytes()).unwrap_or_else(|e| panic!("{json}: {e}"))
}

fn rejected(json: &str, opts: &DecodeOptions) -> DecodeError {
    match decode_with(json.as_bytes(), opts) {
        Ok(m) => panic!("{json}: expected an error, got {m:?}"),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------------
// 10.1 Requests

#[rustfmt::skip]
const REQUESTS: &[Case] = &[
    valid(K::Request, Num(7),
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow_op","arguments":{"steps":3},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p-7"}}}"#),
    valid(K::Request, Str("req-a1"),
        r#"{"jsonrpc":"2.0","id":"req-a1","method":"resources/read","params":{"uri":"file:///data/big.csv","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"sim-client","version":"0.1.0"},"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info","progressToken":1001}}}"#),
    valid(K::Request, Str("listen-1"),
        r#"{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#),
    valid(K::Request, Num(8),
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"slow_op","arguments":{"steps":3},"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"opaque-blob-1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":"p-8"}}}"#),
    invalid("null-id", "id", NoId, INVALID_REQUEST,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#),
    invalid("fractional-id", "id", NoId, INVALID_REQUEST,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#),
    invalid("missing-meta", "params._meta", Num(3), INVALID_PARAMS,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{}}}"#),
    invalid("missing-meta", "params._meta.io.modelcontextprotocol/clientCapabilities", Num(4), INVALID_PARAMS,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#),
    invalid("wrong-type", "params._meta.progressToken", Num(5), INVALID_PARAMS,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":true}}}"#),
    invalid("positional-params", "params", Num(6), INVALID_PARAMS,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":["x"]}"#),
    invalid("batch", "", NoId, INVALID_REQUEST,
        r#"[{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}]"#),
    // A legacy handshake has no `_meta`: the strict decoder reports that, with the id, so the
    // server can answer with an error (-32602).
    invalid("missing-meta", "params._meta", Num(10), INVALID_PARAMS,
        r#"{"jsonrpc":"2.0","id":10,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}"#),
];

#[test]
fn requests_10_1() {
    check_table("10.1", REQUESTS, &strict());
}

#[test]
fn requests_10_1_fields() {
    let Message::Request(r) = decoded(REQUESTS[0].json) else {
        panic!("not a request")
    };
    assert_eq!(r.method, "tools/call");
    assert_eq!(r.progress_token(), Some(&ProgressToken::from("p-7")));
    assert_eq!(r.meta.protocol_version, "2026-07-28");
    assert_eq!(r.params["arguments"], serde_json::json!({"steps": 3}));
    assert!(!r.params.contains_key("_meta"));

    let Message::Request(r) = decoded(REQUESTS[1].json) else {
        panic!("not a request")
    };
    assert_eq!(r.progress_token(), Some(&ProgressToken::Number(1001)));
    assert_eq!(r.meta.other["io.modelcontextprotocol/logLevel"], "info");
    assert!(r
        .meta
        .other
        .contains_key("io.modelcontextprotocol/clientInfo"));

    let Message::Request(r) = decoded(REQUESTS[2].json) else {
        panic!("not a request")
    };
    assert_eq!(r.progress_token(), None);

    let Message::Request(r) = decoded(REQUESTS[3].json) else {
        panic!("not a request")
    };
    assert_eq!(r.progress_token(), Some(&ProgressToken::from("p-8")));
    assert_eq!(r.params["requestState"], "opaque-blob-1");
    assert_eq!(
        r.meta.client_capabilities["elicitation"],
        serde_json::json!({})
    );
}

/// "Also invalid: `null`, `2.5`, `{}`, `[]`" for the progress token of the `id: 5` example.
#[test]
fn requests_10_1_other_bad_tokens() {
    let base = REQUESTS[8].json;
    assert!(base.contains(r#""progressToken":true"#));
    for (token, rule) in [
        ("null", "null-id"),
        ("2.5", "fractional-id"),
        ("{}", "wrong-type"),
        ("[]", "wrong-type"),
    ] {
        let json = base.replace(
            r#""progressToken":true"#,
            &format!(r#""progressToken":{token}"#),
        );
        let e = rejected(&json, &strict());
        assert_eq!(
            (e.rule.as_str(), e.path.as_str()),
            (rule, "params._meta.progressToken"),
            "{json}"
        );
        assert_eq!(e.id, Some(RequestId::Number(5)), "{json}");
        assert_eq!(e.jsonrpc_code(), -32602, "{json}");
    }
}

/// The request without `_meta` is answered with -32602 and its id (docs/spec/mcp-2026-07-28.md §1.5, §10.1).
#[test]
fn requests_10_1_missing_meta_keeps_the_id() {
    let e = rejected(REQUESTS[6].json, &strict());
    assert_eq!(e.id, Some(RequestId::Number(3)));
    assert_eq!(e.jsonrpc_code(), -32602);
}

/// Edge variant of the fractional id: `"id":1.0` is rejected by default and accepted with
/// `allow_integral_float_ids` (Appendix B.6).
#[test]
fn requests_10_1_integral_float_id_is_a_switch() {
    let json = REQUESTS[5].json.replace(r#""id":1.5"#, r#""id":1.0"#);
    assert!(json.contains(r#""id":1.0"#));

    let e = rejected(&json, &strict());
    assert_eq!((e.rule.as_str(), e.path.as_str()), ("fractional-id", "id"));

    let lenient = DecodeOptions {
        allow_integral_float_ids: true,
        ..DecodeOptions::default()
    };
    let msg = decode_with(json.as_bytes(), &lenient).expect("1.0 accepted under the switch");
    assert_eq!(msg.kind(), MessageKind::Request);
    assert_eq!(msg.id(), Some(&RequestId::Number(1)));

    // The switch is about integral values only: 1.5 stays invalid.
    let e = rejected(REQUESTS[5].json, &lenient);
    assert_eq!(e.rule.as_str(), "fractional-id");
}

// ---------------------------------------------------------------------------------------------
// 10.2 Progress notifications

#[rustfmt::skip]
const PROGRESS: &[Case] = &[
    valid(K::Progress, NoId,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":1}}"#),
    valid(K::Progress, NoId,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":2.5,"total":3,"message":"step 2 of 3"}}"#),
    valid(K::Progress, NoId,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1001,"progress":0.75,"total":1.0,"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}}}"#),
    invalid("missing-field", "params.progressToken", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#),
    invalid("missing-field", "params.progress", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7"}}"#),
    invalid("wrong-type", "params.progress", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":"50"}}"#),
    invalid("null-id", "params.progressToken", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":null,"progress":1}}"#),
    invalid("fractional-id", "params.progressToken", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1.5,"progress":1}}"#),
    invalid("wrong-type", "params.total", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":1,"total":"10"}}"#),
    invalid("wrong-type", "params.message", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":1,"message":42}}"#),
    invalid("missing-field", "params", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#),
    invalid("jsonrpc-version", "jsonrpc", NoId, UNANSWERED,
        r#"{"method":"notifications/progress","params":{"progressToken":"p-7","progress":1}}"#),
    // With an id it is a request whose method is a notification name: no such request method
    // exists, so a receiver that answers says -32601, with the id.
    invalid("notification-with-id", "id", Num(11), METHOD_NOT_FOUND,
        r#"{"jsonrpc":"2.0","id":11,"method":"notifications/progress","params":{"progressToken":"p-7","progress":1}}"#),
];

#[test]
fn progress_10_2() {
    check_table("10.2", PROGRESS, &strict());
}

#[test]
fn progress_10_2_fields() {
    let Message::Progress(p) = decoded(PROGRESS[1].json) else {
        panic!("not progress")
    };
    assert_eq!(p.token, ProgressToken::from("p-7"));
    assert_eq!(p.progress, 2.5);
    assert_eq!(p.total, Some(3.0));
    assert_eq!(p.message.as_deref(), Some("step 2 of 3"));

    let Message::Progress(p) = decoded(PROGRESS[2].json) else {
        panic!("not progress")
    };
    assert_eq!(p.token, ProgressToken::Number(1001));
    assert_eq!((p.progress, p.total), (0.75, Some(1.0)));
    assert!(p.meta.expect("_meta kept").contains_key("traceparent"));
}

/// The trace-level examples of 10.2 are well-formed messages; the violations are in the
/// sequence, which the oracle checks, not the decoder.
#[test]
fn progress_10_2_trace_level_examples_are_well_formed() {
    for json in [
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":50}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":40}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-zzz","progress":1}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":1,"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}"#,
    ] {
        assert_eq!(decoded(json).kind(), MessageKind::Progress, "{json}");
    }
}

// ---------------------------------------------------------------------------------------------
// 10.3 Cancellation notifications

#[rustfmt::skip]
const CANCELLED: &[Case] = &[
    valid(K::Cancelled, NoId,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#),
    valid(K::Cancelled, NoId,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"req-a1","reason":"client timeout after 30000 ms"}}"#),
    valid(K::Cancelled, NoId,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"listen-1","reason":"server shutting down"}}"#),
    invalid("missing-field", "params.requestId", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#),
    invalid("null-id", "params.requestId", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":null}}"#),
    invalid("fractional-id", "params.requestId", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7.5}}"#),
    invalid("wrong-type", "params.requestId", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"id":7}}}"#),
    invalid("wrong-type", "params.reason", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":5}}"#),
    invalid("missing-field", "params", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#),
    // A request with a notification's method name: answered with -32601 and its id.
    invalid("notification-with-id", "id", Num(12), METHOD_NOT_FOUND,
        r#"{"jsonrpc":"2.0","id":12,"method":"notifications/cancelled","params":{"requestId":7}}"#),
    // American spelling: a well-formed notification with an unknown method. The receiver
    // ignores it and it cancels nothing; it is not a cancellation.
    valid(K::Notification, NoId,
        r#"{"jsonrpc":"2.0","method":"notifications/canceled","params":{"requestId":7}}"#),
];

#[test]
fn cancelled_10_3() {
    check_table("10.3", CANCELLED, &strict());
}

#[test]
fn cancelled_10_3_fields() {
    let Message::Cancelled(c) = decoded(CANCELLED[0].json) else {
        panic!("not a cancellation")
    };
    assert_eq!(c.request_id, RequestId::Number(7));
    assert_eq!(c.reason, None);

    let Message::Cancelled(c) = decoded(CANCELLED[1].json) else {
        panic!("not a cancellation")
    };
    assert_eq!(c.request_id, RequestId::from("req-a1"));
    assert_eq!(c.reason.as_deref(), Some("client timeout after 30000 ms"));

    let Message::Notification(n) = decoded(CANCELLED[10].json) else {
        panic!("not a plain notification")
    };
    assert_eq!(n.method, "notifications/canceled");
}

// ---------------------------------------------------------------------------------------------
// 10.4 Responses

#[rustfmt::skip]
const RESPONSES: &[Case] = &[
    valid(K::Result, Num(7),
        r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[{"type":"text","text":"done"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"sim-server","version":"0.1.0"}}}}"#),
    valid(K::Result, Num(7),
        r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"mode":"form","message":"Proceed?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}},"requestState":"opaque-blob-1"}}"#),
    valid(K::Error, Str("req-a1"),
        r#"{"jsonrpc":"2.0","id":"req-a1","error":{"code":-32602,"message":"Missing required _meta field io.modelcontextprotocol/clientCapabilities"}}"#),
    valid(K::Error, NoId,
        r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#),
    valid(K::Error, Num(1),
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"1900-01-01"}}}"#),
    valid(K::Result, Str("listen-1"),
        r#"{"jsonrpc":"2.0","id":"listen-1","result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}"#),
    // Listen acknowledgement and tagged notification.
    valid(K::Notification, NoId,
        r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}"#),
    valid(K::Notification, NoId,
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}"#),
    // Invalid or edge responses, in the digest's order.
    // 1. No resultType: accepted as "complete" by default (see the switch test below).
    valid(K::Result, Num(7), r#"{"jsonrpc":"2.0","id":7,"result":{}}"#),
    invalid("unknown-result-type", "result.resultType", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"bogus"}}"#),
    invalid("result-and-error", "", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete"},"error":{"code":-32603,"message":"x"}}"#),
    // 4. "id": null on an error: rejected by default (see the switch test below).
    invalid("null-id", "id", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#),
    invalid("wrong-type", "error.code", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":"-32602","message":"bad"}}"#),
    invalid("wrong-type", "error.code", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602.5,"message":"bad"}}"#),
    invalid("missing-field", "error.message", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602}}"#),
    invalid("null-id", "id", NoId, UNANSWERED,
        r#"{"jsonrpc":"2.0","id":null,"result":{"resultType":"complete"}}"#),
    // 9. Well-formed; -32001 has no defined meaning, which is for the oracle to judge.
    valid(K::Error, Num(7),
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"Request timed out"}}"#),
];

#[test]
fn responses_10_4() {
    check_table("10.4", RESPONSES, &strict());
}

#[test]
fn responses_10_4_fields() {
    let Message::Result(r) = decoded(RESPONSES[1].json) else {
        panic!("not a result")
    };
    assert_eq!(r.result_type, Some(ResultType::InputRequired));
    assert_eq!(r.result["requestState"], "opaque-blob-1");
    assert!(!r.result.contains_key("resultType"));

    let Message::Error(e) = decoded(RESPONSES[4].json) else {
        panic!("not an error")
    };
    assert_eq!(e.error.code, -32022);
    assert_eq!(e.error.message, "Unsupported protocol version");
    assert_eq!(
        e.error.data,
        Some(serde_json::json!({"supported":["2026-07-28"],"requested":"1900-01-01"}))
    );

    let Message::Error(e) = decoded(RESPONSES[16].json) else {
        panic!("not an error")
    };
    assert_eq!(e.error.code, -32001);
}

/// 10.4 item 1: a result without `resultType` is accepted as `complete` by default (clients
/// MUST) and rejected when the decoder is told to require it (servers MUST send it).
#[test]
fn responses_10_4_missing_result_type_is_a_switch() {
    let json = RESPONSES[8].json;
    let Message::Result(r) = decoded(json) else {
        panic!("not a result")
    };
    assert_eq!(r.result_type, None);
    assert_eq!(r.effective_type(), ResultType::Complete);

    let require = DecodeOptions {
        require_result_type: true,
        ..DecodeOptions::default()
    };
    let e = rejected(json, &require);
    assert_eq!(
        (e.rule.as_str(), e.path.as_str()),
        ("missing-result-type", "result.resultType")
    );
    // The valid results all carry it, so they pass under the switch too.
    for case in &RESPONSES[..6] {
        assert!(
            decode_with(case.json.as_bytes(), &require).is_ok(),
            "{}",
            case.json
        );
    }
}

/// 10.4 items 4 and 8: `"id": null` is rejected by default; with `allow_null_error_id` it is
/// accepted on an error (as an absent id), never on a result.
#[test]
fn responses_10_4_null_error_id_is_a_switch() {
    let lenient = DecodeOptions {
        allow_null_error_id: true,
        ..DecodeOptions::default()
    };
    let Ok(Message::Error(e)) = decode_with(RESPONSES[11].json.as_bytes(), &lenient) else {
        panic!("null id on an error is accepted under the switch")
    };
    assert_eq!(e.id, None);
    assert_eq!(e.error.code, -32700);

    let e = rejected(RESPONSES[15].json, &lenient);
    assert_eq!((e.rule.as_str(), e.path.as_str()), ("null-id", "id"));
}

// ---------------------------------------------------------------------------------------------
// 10.5 Framing

/// The valid stdio line; the digest writes its terminating LF as `\n`.
const STDIO_VALID: &str =
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#;

/// Not JSON at all: truncated, then a trailing comma.
#[rustfmt::skip]
const NOT_JSON: &[Case] = &[
    invalid("json-syntax", "", NoId, PARSE_ERROR,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":1"#),
    invalid("json-syntax", "", NoId, PARSE_ERROR,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,}}"#),
];

const SSE_EXAMPLE: &str = r#": keep-alive

data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":1,"total":3}}

data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":2,"total":3}}

data: {"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[]}}

"#;

fn lines(opts: LineOptions, input: &[u8]) -> (Vec<Result<Line, FrameError>>, Option<FrameError>) {
    let mut d = LineDecoder::new(opts);
    d.push(input);
    let mut out = Vec::new();
    while let Some(item) = d.next_line() {
        out.push(item);
    }
    (out, d.finish())
}

fn strict_lines() -> LineOptions {
    LineOptions::default()
}

fn lenient_lines() -> LineOptions {
    LineOptions {
        allow_crlf: true,
        allow_blank_lines: true,
        ..LineOptions::default()
    }
}

fn frame_rule(item: &Result<Line, FrameError>) -> &'static str {
    match item {
        Ok(_) => "line",
        Err(e) => e.rule.as_str(),
    }
}

#[test]
fn framing_10_5_not_json() {
    check_table("10.5", NOT_JSON, &strict());
}

#[test]
fn framing_10_5_valid_line() {
    let input = format!("{STDIO_VALID}\n");
    for opts in [strict_lines(), lenient_lines()] {
        let (items, end) = lines(opts, input.as_bytes());
        assert_eq!(end, None);
        assert_eq!(items.len(), 1);
        let line = items[0].as_ref().expect("one frame");
        assert_eq!(line.number, 1);
        assert_eq!(line.bytes, STDIO_VALID.as_bytes());
        assert_eq!(decode(&line.bytes).unwrap().kind(), MessageKind::Cancelled);
    }
}

/// The not-JSON examples as stdio lines: each is a frame, and the frame fails to decode with
/// -32700 and no id.
#[test]
fn framing_10_5_not_json_through_lines() {
    let input = format!("{}\n{}\n", NOT_JSON[0].json, NOT_JSON[1].json);
    let (items, end) = lines(strict_lines(), input.as_bytes());
    assert_eq!(end, None);
    assert_eq!(items.len(), 2);
    for item in items {
        let line = item.expect("a frame");
        let e = decode(&line.bytes).unwrap_err();
        assert_eq!(e.rule.as_str(), "json-syntax");
        assert_eq!(e.jsonrpc_code(), -32700);
        assert_eq!(e.id, None);
    }
}

/// Two JSON objects on one line: one frame, which is not one message.
#[test]
fn framing_10_5_two_objects_on_one_line() {
    let input = format!("{STDIO_VALID}{STDIO_VALID}\n");
    let (items, end) = lines(strict_lines(), input.as_bytes());
    assert_eq!(end, None);
    assert_eq!(items.len(), 1);
    let e = decode(&items[0].as_ref().unwrap().bytes).unwrap_err();
    assert_eq!(e.rule.as_str(), "json-syntax");
    assert_eq!(e.jsonrpc_code(), -32700);

    // With a space between them too.
    let e = decode(format!("{STDIO_VALID} {STDIO_VALID}").as_bytes()).unwrap_err();
    assert_eq!(e.rule.as_str(), "json-syntax");
}

/// Pretty-printed JSON spread over several lines: every line is a frame and none decodes.
#[test]
fn framing_10_5_pretty_printed() {
    let value: serde_json::Value = serde_json::from_str(STDIO_VALID).unwrap();
    let pretty = serde_json::to_string_pretty(&value).unwrap() + "\n";
    let (items, end) = lines(strict_lines(), pretty.as_bytes());
    assert_eq!(end, None);
    assert!(items.len() > 1, "{pretty}");
    for item in &items {
        let line = item.as_ref().expect("each line is a frame");
        let e = decode(&line.bytes).unwrap_err();
        assert_eq!(
            e.jsonrpc_code(),
            -32700,
            "{:?}",
            String::from_utf8_lossy(&line.bytes)
        );
    }
}

/// A banner on stdout is one frame that is not JSON.
#[test]
fn framing_10_5_banner() {
    let input = format!("Server started\n{STDIO_VALID}\n");
    let (items, _) = lines(strict_lines(), input.as_bytes());
    assert_eq!(items.len(), 2);
    let e = decode(&items[0].as_ref().unwrap().bytes).unwrap_err();
    assert_eq!((e.rule.as_str(), e.jsonrpc_code()), ("json-syntax", -32700));
    assert!(decode(&items[1].as_ref().unwrap().bytes).is_ok());
}

/// Blank lines and CRLF are a strictness flag: strict mode reports them, lenient mode skips
/// the blank line and strips the CR.
#[test]
fn framing_10_5_blank_lines_and_crlf() {
    let input = format!("\n{STDIO_VALID}\r\n\n{STDIO_VALID}\n");

    let (items, end) = lines(strict_lines(), input.as_bytes());
    assert_eq!(end, None);
    let verdicts: Vec<(&str, u64)> = items
        .iter()
        .map(|i| {
            (
                frame_rule(i),
                match i {
                    Ok(l) => l.number,
                    Err(e) => e.line,
                },
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("blank-line", 1),
            ("crlf", 2),
            ("blank-line", 3),
            ("line", 4)
        ]
    );

    let (items, end) = lines(lenient_lines(), input.as_bytes());
    assert_eq!(end, None);
    let got: Vec<(u64, Vec<u8>)> = items
        .into_iter()
        .map(|i| {
            let l = i.expect("lenient mode yields only frames");
            (l.number, l.bytes)
        })
        .collect();
    assert_eq!(
        got,
        [
            (2, STDIO_VALID.as_bytes().to_vec()),
            (4, STDIO_VALID.as_bytes().to_vec())
        ]
    );

    // Each switch alone.
    let only_crlf = LineOptions {
        allow_crlf: true,
        ..LineOptions::default()
    };
    let (items, _) = lines(only_crlf, input.as_bytes());
    let rules: Vec<&str> = items.iter().map(frame_rule).collect();
    assert_eq!(rules, ["blank-line", "line", "blank-line", "line"]);
    let only_blank = LineOptions {
        allow_blank_lines: true,
        ..LineOptions::default()
    };
    let (items, _) = lines(only_blank, input.as_bytes());
    let rules: Vec<&str> = items.iter().map(frame_rule).collect();
    assert_eq!(rules, ["crlf", "line"]);
}

/// A last line without its LF is reported when the stream ends.
#[test]
fn framing_10_5_missing_final_lf() {
    let (items, end) = lines(strict_lines(), STDIO_VALID.as_bytes());
    assert!(items.is_empty());
    assert_eq!(
        end.map(|e| (e.rule.as_str(), e.line)),
        Some(("truncated", 1))
    );
}

fn sse_items(chunks: &[&[u8]]) -> (Vec<SseItem>, Option<FrameError>) {
    let mut d = SseDecoder::new(SseOptions::default());
    let mut out = Vec::new();
    for chunk in chunks {
        d.push(chunk);
        while let Some(item) = d.next_item() {
            out.push(item.expect("no framing error in the example"));
        }
    }
    (out, d.finish())
}

fn event(data: &str) -> SseItem {
    SseItem::Event(SseEvent {
        event_type: "message".into(),
        data: data.into(),
        last_event_id: String::new(),
        has_id: false,
    })
}

/// The SSE response for `id:7`: a keep-alive comment, two progress events, the result.
#[test]
fn framing_10_5_sse_example() {
    let data: Vec<&str> = SSE_EXAMPLE
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.len(), 3);
    let expected = vec![
        SseItem::Comment(" keep-alive".into()),
        event(data[0]),
        event(data[1]),
        event(data[2]),
    ];

    let (items, end) = sse_items(&[SSE_EXAMPLE.as_bytes()]);
    assert_eq!(items, expected);
    assert_eq!(end, None);

    // Byte by byte gives the same.
    let bytes: Vec<&[u8]> = SSE_EXAMPLE.as_bytes().chunks(1).collect();
    assert_eq!(sse_items(&bytes), (expected.clone(), None));

    // And so do CRLF line ends.
    let crlf = SSE_EXAMPLE.replace('\n', "\r\n");
    assert_eq!(sse_items(&[crlf.as_bytes()]), (expected, None));

    // The event data are the messages.
    let msgs: Vec<Message> = data.iter().map(|d| decoded(d)).collect();
    let Message::Progress(p1) = &msgs[0] else {
        panic!("first event is progress")
    };
    let Message::Progress(p2) = &msgs[1] else {
        panic!("second event is progress")
    };
    assert_eq!(p1.token, ProgressToken::from("p-7"));
    assert_eq!(p2.token, ProgressToken::from("p-7"));
    assert_eq!((p1.progress, p1.total), (1.0, Some(3.0)));
    assert_eq!((p2.progress, p2.total), (2.0, Some(3.0)));
    let Message::Result(r) = &msgs[2] else {
        panic!("last event is the result")
    };
    assert_eq!(r.id, RequestId::Number(7));
    assert_eq!(r.result_type, Some(ResultType::Complete));
}

/// Closing the stream before the result: the events so far are delivered, nothing is
/// pending, so the cut is clean at an event boundary and reported inside an event.
#[test]
fn framing_10_5_sse_cut_short() {
    let cut = SSE_EXAMPLE
        .find("data: {\"jsonrpc\":\"2.0\",\"id\":7")
        .unwrap();
    let (items, end) = sse_items(&[&SSE_EXAMPLE.as_bytes()[..cut]]);
    assert_eq!(items.len(), 3);
    assert_eq!(end, None);

    let (items, end) = sse_items(&[&SSE_EXAMPLE.as_bytes()[..cut + 10]]);
    assert_eq!(items.len(), 3);
    assert_eq!(end.map(|e| e.rule.as_str()), Some("truncated"));
}
