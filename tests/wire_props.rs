//! Property tests of the wire layer and the framers.
//!
//! (a) `decode(encode(m)) == m` for generated messages of all six kinds, and every encoder
//!     refusal has a reason that really applies;
//! (b) the encoder refuses NaN and infinite `progress`/`total`;
//! (c) NDJSON framing: a stream of encoded lines and junk lines yields the items a simple
//!     model predicts, whatever the chunking;
//! (d) SSE framing: the same for events built from comments, multi-line data, fields without
//!     colon, `data:` without space, LF/CR/CRLF line ends and a BOM;
//! (e) decode never panics on arbitrary bytes or on mutated valid messages, and never accepts
//!     what the generic JSON layer rejects.
//!
//! Failing cases are kept in `proptest-regressions/wire_props.txt` and replayed first.
//! `PROPTEST_CASES` sets the number of cases (default 256).

use mcp_sim::framing::ndjson::LineOptions;
use mcp_sim::framing::sse::{SseEvent, SseItem, SseOptions};
use mcp_sim::framing::FrameError;
use mcp_sim::fuzzing::{frame_lines, frame_sse, LineItem};
use mcp_sim::wire::json::parse_value;
use mcp_sim::wire::{
    decode, decode_with, encode, to_value, Cancelled, DecodeOptions, EncodeError, ErrorObject,
    ErrorResponse, Limits, Message, Notification, Progress, ProgressToken, Request, RequestId,
    RequestMeta, ResultResponse, ResultType, Rule, META_CLIENT_CAPABILITIES, META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION, METHOD_CANCELLED, METHOD_PROGRESS, PROTOCOL_VERSION,
};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::FileFailurePersistence;
use serde_json::{Map, Value};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/wire_props.txt",
        ))),
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies

/// Keys the encoder reserves somewhere, plus a few the decoder leaves alone.
const SPECIAL_KEYS: &[&str] = &[
    "_meta",
    "resultType",
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    "io.modelcontextprotocol/subscriptionId",
    "traceparent",
    "jsonrpc",
    "id",
];

/// Short text, biased towards characters that need escaping.
fn arb_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => "[a-z0-9_./-]{0,10}",
        2 => any::<String>(),
        1 => "[^\u{0}-\u{7f}]{1,4}",
        1 => select(vec!["", "1", "\"", "\\", "\n\r\t", "\u{0}", "\u{1f}", "\u{2028}", "\u{1f600}", "\u{feff}", "</script>"])
            .prop_map(str::to_owned),
    ]
    .boxed()
}

fn arb_int() -> BoxedStrategy<i64> {
    prop_oneof![
        4 => -1000i64..1000,
        2 => any::<i64>(),
        1 => select(vec![0, -1, i64::MAX, i64::MIN, 1 << 53, (1 << 53) + 1]),
    ]
    .boxed()
}

fn arb_request_id() -> BoxedStrategy<RequestId> {
    prop_oneof![
        arb_int().prop_map(RequestId::Number),
        arb_text().prop_map(RequestId::String),
    ]
    .boxed()
}

fn arb_token() -> BoxedStrategy<ProgressToken> {
    prop_oneof![
        arb_int().prop_map(ProgressToken::Number),
        arb_text().prop_map(ProgressToken::String),
    ]
    .boxed()
}

/// Finite numbers, with the awkward ones well represented.
fn arb_finite() -> BoxedStrategy<f64> {
    prop_oneof![
        3 => any::<f64>().prop_filter("finite", |f| f.is_finite()),
        2 => (-1000i32..1000).prop_map(f64::from),
        2 => 0.0..1.0f64,
        1 => select(vec![
            0.0,
            -0.0,
            0.1,
            1e21,
            1e-7,
            1e300,
            -1e300,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::from_bits(1),
            9_007_199_254_740_993.0,
            18_446_744_073_709_551_616.0,
        ]),
    ]
    .boxed()
}

fn arb_non_finite() -> impl Strategy<Value = f64> {
    select(vec![f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY])
}

fn arb_key() -> BoxedStrategy<String> {
    prop_oneof![
        6 => "[a-zA-Z_]{1,8}",
        1 => arb_text(),
        1 => select(SPECIAL_KEYS).prop_map(str::to_owned),
    ]
    .boxed()
}

fn arb_json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        arb_int().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        arb_finite().prop_map(Value::from),
        arb_text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((arb_key(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
    .boxed()
}

fn arb_map() -> BoxedStrategy<Map<String, Value>> {
    prop::collection::vec((arb_key(), arb_json()), 0..4)
        .prop_map(|kv| kv.into_iter().collect())
        .boxed()
}

fn arb_method() -> BoxedStrategy<String> {
    prop_oneof![
        6 => "[a-z]{1,8}/[a-z_]{1,8}",
        2 => "notifications/[a-z_/]{1,12}",
        1 => select(vec![METHOD_PROGRESS, METHOD_CANCELLED, "tools/call", "subscriptions/listen", ""])
            .prop_map(str::to_owned),
        1 => arb_text(),
    ]
    .boxed()
}

fn arb_request() -> BoxedStrategy<Request> {
    let meta = (
        prop_oneof![3 => Just(PROTOCOL_VERSION.to_owned()), 1 => arb_text()],
        arb_map(),
        proptest::option::of(arb_token()),
        arb_map(),
    )
        .prop_map(
            |(protocol_version, client_capabilities, progress_token, other)| RequestMeta {
                protocol_version: protocol_version.into(),
                client_capabilities,
                progress_token,
                other,
                legacy: false,
            },
        );
    (arb_request_id(), arb_method(), meta, arb_map())
        .prop_map(|(id, method, meta, params)| Request {
            id,
            method: method.into(),
            meta,
            params,
        })
        .boxed()
}

fn arb_progress() -> BoxedStrategy<Progress> {
    (
        arb_token(),
        arb_finite(),
        proptest::option::of(arb_finite()),
        proptest::option::of(arb_text()),
        proptest::option::of(arb_map()),
    )
        .prop_map(|(token, progress, total, message, meta)| Progress {
            token,
            progress,
            total,
            message,
            meta,
        })
        .boxed()
}

fn arb_cancelled() -> BoxedStrategy<Cancelled> {
    (
        arb_request_id(),
        proptest::option::of(arb_text()),
        proptest::option::of(arb_map()),
    )
        .prop_map(|(request_id, reason, meta)| Cancelled {
            request_id,
            reason,
            meta,
        })
        .boxed()
}

fn arb_notification() -> BoxedStrategy<Notification> {
    (arb_method(), proptest::option::of(arb_map()))
        .prop_map(|(method, params)| Notification { method, params })
        .boxed()
}

fn arb_result() -> BoxedStrategy<ResultResponse> {
    (
        arb_request_id(),
        proptest::option::of(select(vec![
            ResultType::Complete,
            ResultType::InputRequired,
            ResultType::Task,
        ])),
        arb_map(),
    )
        .prop_map(|(id, result_type, result)| ResultResponse {
            id,
            result_type,
            result,
        })
        .boxed()
}

fn arb_error() -> BoxedStrategy<ErrorResponse> {
    (
        proptest::option::of(arb_request_id()),
        prop_oneof![
            select(vec![
                -32700, -32600, -32601, -32602, -32603, -32020, -32021, -32022
            ]),
            any::<i64>()
        ],
        arb_text(),
        proptest::option::of(arb_json()),
    )
        .prop_map(|(id, code, message, data)| ErrorResponse {
            id,
            error: ErrorObject {
                code,
                message,
                data,
            },
        })
        .boxed()
}

/// Messages of all six kinds, some of which the encoder must refuse.
fn arb_message() -> BoxedStrategy<Message> {
    prop_oneof![
        arb_request().prop_map(Message::Request),
        arb_progress().prop_map(Message::Progress),
        arb_cancelled().prop_map(Message::Cancelled),
        arb_notification().prop_map(Message::Notification),
        arb_result().prop_map(Message::Result),
        arb_error().prop_map(Message::Error),
    ]
    .boxed()
}

/// A message the encoder accepts, with its encoding.
fn arb_encoded() -> BoxedStrategy<(Message, String)> {
    arb_message()
        .prop_filter_map("the encoder refuses it", |m| {
            let text = encode(&m).ok()?;
            Some((m, text))
        })
        .boxed()
}

/// Why the encoder must refuse `m`, if it must: the reserved method or key, and where.
fn must_refuse(m: &Message) -> Option<EncodeError> {
    let key = |map: &Map<String, Value>, path: &'static str, keys: &[&str]| {
        keys.iter()
            .find(|k| map.contains_key(**k))
            .map(|k| EncodeError::ReservedKey {
                path,
                key: (*k).to_owned(),
            })
    };
    match m {
        Message::Request(r) if r.method.starts_with("notifications/") => {
            Some(EncodeError::ReservedMethod(r.method.to_string()))
        }
        Message::Request(r) => key(&r.params, "params", &["_meta"]).or_else(|| {
            key(
                &r.meta.other,
                "params._meta",
                &[
                    META_PROTOCOL_VERSION,
                    META_CLIENT_CAPABILITIES,
                    META_PROGRESS_TOKEN,
                ],
            )
        }),
        Message::Notification(n) if n.method == METHOD_PROGRESS || n.method == METHOD_CANCELLED => {
            Some(EncodeError::ReservedMethod(n.method.clone()))
        }
        Message::Result(r) => key(&r.result, "result", &["resultType"]),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Framing helpers

/// Cuts `data` at the positions `cuts` pick.
fn split<'a>(data: &'a [u8], cuts: &[Index]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    let mut last = 0;
    for p in points {
        out.push(&data[last..p]);
        last = p;
    }
    out.push(&data[last..]);
    out
}

/// One stdio line of a generated stream.
#[derive(Debug, Clone)]
enum LinePiece {
    /// An encoded message, LF-terminated.
    Message(Message, String),
    /// The same, CR LF-terminated.
    CrLf(Message, String),
    /// An empty line.
    Blank,
    /// A line longer than the limit by this many bytes.
    TooLong(usize),
    /// A line of text that is not a message.
    Junk(String),
}

fn arb_line_piece() -> BoxedStrategy<LinePiece> {
    prop_oneof![
        4 => arb_encoded().prop_map(|(m, t)| LinePiece::Message(m, t)),
        1 => arb_encoded().prop_map(|(m, t)| LinePiece::CrLf(m, t)),
        1 => Just(LinePiece::Blank),
        1 => (1usize..40).prop_map(LinePiece::TooLong),
        1 => "[ -~]{1,20}".prop_map(LinePiece::Junk),
    ]
    .boxed()
}

/// What the model expects of one frame: a line's bytes or a rule, with the line number.
type Expected = Result<(u64, Vec<u8>), (Rule, u64)>;

fn as_expected(items: &[LineItem]) -> Vec<Expected> {
    items
        .iter()
        .map(|i| match i {
            Ok(l) => Ok(l.clone()),
            Err(e) => Err((e.rule, e.line)),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// SSE helpers

/// One line of a generated event.
#[derive(Debug, Clone)]
enum SseLine {
    /// `:text`
    Comment(String),
    /// `data: value` (with `space`) or `data:value`.
    Data { value: String, space: bool },
    /// `data` without colon: an empty data line.
    DataNoColon,
    /// `event: name`
    Event(String),
    /// `id: value`
    Id(String),
    /// A field this decoder ignores, with or without colon.
    Other(String, Option<String>),
}

fn arb_sse_line() -> BoxedStrategy<SseLine> {
    let value = "[^\r\n]{0,12}";
    prop_oneof![
        2 => value.prop_map(SseLine::Comment),
        5 => (value, any::<bool>()).prop_map(|(value, space)| SseLine::Data { value, space }),
        1 => Just(SseLine::DataNoColon),
        1 => "[a-z]{0,6}".prop_map(SseLine::Event),
        1 => "[a-z0-9]{0,5}".prop_map(SseLine::Id),
        1 => (
            select(vec!["foo", "x-y", "retry", "Data", "data "]),
            proptest::option::of("[a-z0-9 ]{0,5}"),
        )
            .prop_map(|(f, v)| SseLine::Other(f.to_owned(), v)),
    ]
    .boxed()
}

const EOLS: &[&str] = &["\n", "\r", "\r\n"];

/// A stream of blocks (lines then a blank line), with per-line line ends, an optional BOM and
/// optionally a last event that is never dispatched.
#[derive(Debug, Clone)]
struct SseStream {
    bom: bool,
    blocks: Vec<Vec<(SseLine, usize)>>,
    blank_eols: Vec<usize>,
    unfinished: bool,
}

fn arb_sse_stream() -> BoxedStrategy<SseStream> {
    (
        any::<bool>(),
        prop::collection::vec(
            prop::collection::vec((arb_sse_line(), 0..EOLS.len()), 0..5),
            0..6,
        ),
        prop::collection::vec(0..EOLS.len(), 6),
        any::<bool>(),
    )
        .prop_map(|(bom, blocks, blank_eols, unfinished)| SseStream {
            bom,
            blocks,
            blank_eols,
            unfinished,
        })
        .boxed()
}

impl SseStream {
    fn bytes(&self) -> Vec<u8> {
        let mut out = String::new();
        if self.bom {
            out.push('\u{feff}');
        }
        let mut last_cr = false;
        let mut line = |out: &mut String, text: &str, eol: &str| {
            out.push_str(text);
            // A CR then an empty line ended by LF would read as one CR LF line end.
            let eol = if last_cr && text.is_empty() && eol == "\n" {
                "\r\n"
            } else {
                eol
            };
            out.push_str(eol);
            last_cr = eol == "\r";
        };
        for (b, block) in self.blocks.iter().enumerate() {
            for (l, eol) in block {
                let text = match l {
                    SseLine::Comment(t) => format!(":{t}"),
                    SseLine::Data { value, space: true } => format!("data: {value}"),
                    SseLine::Data {
                        value,
                        space: false,
                    } => format!("data:{value}"),
                    SseLine::DataNoColon => "data".to_owned(),
                    SseLine::Event(v) => format!("event: {v}"),
                    SseLine::Id(v) => format!("id: {v}"),
                    SseLine::Other(f, Some(v)) => format!("{f}:{v}"),
                    SseLine::Other(f, None) => f.clone(),
                };
                line(&mut out, &text, EOLS[*eol]);
            }
            line(
                &mut out,
                "",
                EOLS[self.blank_eols[b % self.blank_eols.len()]],
            );
        }
        if self.unfinished {
            line(&mut out, "data: never dispatched", "\n");
        }
        out.into_bytes()
    }

    /// The items the WHATWG rules give, and whether the end of the stream cuts off an event.
    fn expected(&self) -> (Vec<SseItem>, bool) {
        let mut items = Vec::new();
        let mut last_id = String::new();
        for block in &self.blocks {
            let mut data: Option<String> = None;
            let mut event_type = String::new();
            let mut has_id = false;
            for (l, _) in block {
                // Each data line appends its value and an LF; an empty value still counts.
                let mut push_data = |v: &str| {
                    let d = data.get_or_insert_with(String::new);
                    d.push_str(v);
                    d.push('\n');
                };
                match l {
                    SseLine::Comment(t) => items.push(SseItem::Comment(t.clone())),
                    SseLine::Data { value, space } => {
                        let v = if !space {
                            value.strip_prefix(' ').unwrap_or(value)
                        } else {
                            value
                        };
                        push_data(v);
                    }
                    SseLine::DataNoColon => push_data(""),
                    SseLine::Event(v) => event_type = v.clone(),
                    SseLine::Id(v) => {
                        last_id = v.clone();
                        has_id = true;
                    }
                    SseLine::Other(..) => {}
                }
            }
            if let Some(mut d) = data {
                d.pop();
                items.push(SseItem::Event(SseEvent {
                    event_type: if event_type.is_empty() {
                        "message".to_owned()
                    } else {
                        event_type
                    },
                    data: d,
                    last_event_id: last_id.clone(),
                    has_id,
                }));
            }
        }
        (items, self.unfinished)
    }
}

fn run_sse(chunks: &[&[u8]]) -> Vec<Result<SseItem, FrameError>> {
    frame_sse(chunks, SseOptions::default())
}

// ---------------------------------------------------------------------------------------------
// Mutations

#[derive(Debug, Clone)]
enum Mutation {
    Set(Index, u8),
    Insert(Index, u8),
    Delete(Index, usize),
    Duplicate(Index, usize),
    Truncate(Index),
}

/// Bytes that matter to JSON and to this decoder.
const INTERESTING: &[u8] = b"{}[]\",:\\ \n\r\t0123456789-+.eEtfnul\x00\x7f\x80\xbf\xc3\xed\xef\xff";

fn arb_mutation() -> BoxedStrategy<Mutation> {
    let byte = prop_oneof![select(INTERESTING), any::<u8>()];
    prop_oneof![
        (any::<Index>(), byte.clone()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<Index>(), byte).prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<Index>(), 1usize..8).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<Index>(), 1usize..16).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
        any::<Index>().prop_map(Mutation::Truncate),
    ]
    .boxed()
}

fn mutate(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match m {
        Mutation::Set(i, b) if len > 0 => bytes[i.index(len)] = *b,
        Mutation::Set(..) => {}
        Mutation::Insert(i, b) => bytes.insert(i.index(len + 1), *b),
        Mutation::Delete(i, n) if len > 0 => {
            let at = i.index(len);
            bytes.drain(at..(at + n).min(len));
        }
        Mutation::Delete(..) => {}
        Mutation::Duplicate(i, n) if len > 0 => {
            let at = i.index(len);
            let piece = bytes[at..(at + n).min(len)].to_vec();
            bytes.splice(at..at, piece);
        }
        Mutation::Duplicate(..) => {}
        Mutation::Truncate(i) => bytes.truncate(i.index(len + 1)),
    }
}

/// Changes to the JSON value of a message: members removed, replaced or added, at any depth.
#[derive(Debug, Clone)]
enum Edit {
    Remove(Vec<Index>),
    Replace(Vec<Index>, Value),
    Add(Vec<Index>, String, Value),
}

fn arb_edit() -> BoxedStrategy<Edit> {
    let path = prop::collection::vec(any::<Index>(), 0..4);
    let key = prop_oneof![
        select(vec![
            "jsonrpc",
            "id",
            "method",
            "params",
            "result",
            "error",
            "_meta",
            "progressToken",
            "progress",
            "total",
            "message",
            "requestId",
            "reason",
            "resultType",
            "code",
            "data",
        ])
        .prop_map(str::to_owned),
        arb_key(),
    ];
    let value = prop_oneof![
        arb_json(),
        select(vec![
            Value::from("2.0"),
            Value::from(7),
            Value::from(1.5),
            Value::from("notifications/progress"),
            Value::from("notifications/cancelled"),
            Value::from("complete"),
            serde_json::json!({}),
            serde_json::json!([]),
        ]),
    ];
    prop_oneof![
        path.clone().prop_map(Edit::Remove),
        (path.clone(), value.clone()).prop_map(|(p, v)| Edit::Replace(p, v)),
        (path, key, value).prop_map(|(p, k, v)| Edit::Add(p, k, v)),
    ]
    .boxed()
}

/// The container reached by following `path` as far as it goes.
fn walk<'v>(v: &'v mut Value, path: &[Index]) -> &'v mut Value {
    let Some((i, rest)) = path.split_first() else {
        return v;
    };
    let container = |c: &Value| c.is_object() || c.is_array();
    let descend = match &*v {
        Value::Object(m) if !m.is_empty() => {
            m.values().nth(i.index(m.len())).is_some_and(container)
        }
        Value::Array(a) if !a.is_empty() => container(&a[i.index(a.len())]),
        _ => false,
    };
    if !descend {
        return v;
    }
    match v {
        Value::Object(m) => {
            let n = m.len();
            walk(m.values_mut().nth(i.index(n)).unwrap(), rest)
        }
        Value::Array(a) => {
            let n = a.len();
            walk(&mut a[i.index(n)], rest)
        }
        _ => unreachable!("only containers are descended into"),
    }
}

fn edit(v: &mut Value, e: &Edit) {
    match e {
        Edit::Remove(path) => {
            let (last, path) = path
                .split_last()
                .map_or((None, &path[..]), |(l, p)| (Some(l), p));
            match (walk(v, path), last) {
                (Value::Object(m), Some(i)) if !m.is_empty() => {
                    let k = m.keys().nth(i.index(m.len())).cloned().unwrap();
                    m.remove(&k);
                }
                (Value::Array(a), Some(i)) if !a.is_empty() => {
                    let n = a.len();
                    a.remove(i.index(n));
                }
                _ => {}
            }
        }
        Edit::Replace(path, new) => {
            let (last, path) = path
                .split_last()
                .map_or((None, &path[..]), |(l, p)| (Some(l), p));
            match (walk(v, path), last) {
                (Value::Object(m), Some(i)) if !m.is_empty() => {
                    let k = m.keys().nth(i.index(m.len())).cloned().unwrap();
                    m[&k] = new.clone();
                }
                (Value::Array(a), Some(i)) if !a.is_empty() => {
                    let n = a.len();
                    a[i.index(n)] = new.clone();
                }
                (target, None) => *target = new.clone(),
                _ => {}
            }
        }
        Edit::Add(path, key, new) => match walk(v, path) {
            Value::Object(m) => {
                m.insert(key.clone(), new.clone());
            }
            Value::Array(a) => a.push(new.clone()),
            _ => {}
        },
    }
}

/// Decodes under every strictness setting: no panic; an accepted message is JSON, re-encodes,
/// and decodes back to itself.
fn check_decode(bytes: &[u8]) -> Result<(), TestCaseError> {
    let json_ok = parse_value(bytes, &Limits::DEFAULT).is_ok();
    for bits in 0..8u8 {
        let opts = DecodeOptions {
            allow_null_error_id: bits & 1 != 0,
            allow_integral_float_ids: bits & 2 != 0,
            require_result_type: bits & 4 != 0,
            ..DecodeOptions::default()
        };
        match decode_with(bytes, &opts) {
            Ok(msg) => {
                prop_assert!(
                    json_ok,
                    "decoded text that is not JSON: {:?}",
                    String::from_utf8_lossy(bytes)
                );
                let text = encode(&msg).map_err(|e| {
                    TestCaseError::fail(format!("decoded {msg:?} does not re-encode: {e}"))
                })?;
                let again = decode_with(text.as_bytes(), &opts)
                    .map_err(|e| TestCaseError::fail(format!("{text} does not decode: {e}")))?;
                prop_assert_eq!(again, msg);
            }
            Err(e) => {
                // The error is well-formed: a parse error never carries an id.
                if e.jsonrpc_code() == -32700 {
                    prop_assert_eq!(e.id, None);
                }
            }
        }
    }
    Ok(())
}

/// A JSON-looking value that may not be JSON: a string of arbitrary bytes (valid only when
/// they are UTF-8), a string with a `\u` escape that may be a lone surrogate, or a number
/// that may be beyond `f64`.
fn arb_doubtful_value() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        prop::collection::vec(
            any::<u8>().prop_filter("no quote, backslash or control", |b| {
                *b >= 0x20 && *b != b'"' && *b != b'\\'
            }),
            0..8
        )
        .prop_map(|body| [b"\"".as_slice(), &body, b"\""].concat()),
        "\"[a-z]{0,3}\\\\u[dD][0-9a-fA-F]{3}[a-z]{0,3}\"".prop_map(String::into_bytes),
        "-?[1-9][0-9]{0,2}(\\.[0-9]{1,3})?[eE][+-]?[0-9]{1,3}".prop_map(String::into_bytes),
        "\\[(\"[a-z]{0,2}\\\\u[dD][0-9a-f]{3}\"|1e999)\\]".prop_map(String::into_bytes),
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(config())]

    /// (a) Every message the encoder accepts decodes back to itself; every refusal names a
    /// reason that applies, and messages without such a reason are never refused.
    #[test]
    fn round_trip(m in arb_message()) {
        match (encode(&m), must_refuse(&m)) {
            (Ok(text), None) => {
                prop_assert!(!text.contains('\n'), "{}", text);
                let back = decode(text.as_bytes())
                    .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
                prop_assert_eq!(&back, &m);
                // Equal messages encode to the same bytes, and to_value agrees with encode.
                prop_assert_eq!(encode(&back).unwrap(), text.clone());
                let value: Value = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(to_value(&m).unwrap(), value);
                // Requiring resultType rejects exactly the results without one.
                let strict = DecodeOptions { require_result_type: true, ..DecodeOptions::default() };
                let got = decode_with(text.as_bytes(), &strict);
                match &m {
                    Message::Result(r) if r.result_type.is_none() => {
                        prop_assert_eq!(got.map_err(|e| e.rule), Err(Rule::MissingResultType));
                    }
                    _ => prop_assert_eq!(got, Ok(m)),
                }
            }
            (Err(e), Some(reason)) => prop_assert_eq!(e, reason),
            (Ok(text), Some(reason)) => prop_assert!(false, "encoded {} despite {:?}", text, reason),
            (Err(e), None) => prop_assert!(false, "refused {:?}: {}", m, e),
        }
    }

    /// (b) NaN and infinities never reach the wire.
    #[test]
    fn non_finite_progress_is_refused(
        p in arb_progress(),
        bad in arb_non_finite(),
        which in 0..3u8,
    ) {
        let mut p = p;
        let path = match which {
            0 => { p.progress = bad; "params.progress" }
            1 => { p.total = Some(bad); "params.total" }
            _ => { p.progress = bad; p.total = Some(bad); "params.progress" }
        };
        let m = Message::Progress(p);
        prop_assert_eq!(encode(&m), Err(EncodeError::NonFinite { path }));
        prop_assert_eq!(to_value(&m), Err(EncodeError::NonFinite { path }));
    }

    /// (c) NDJSON: lines and junk come out as the model says, for any chunking, strict or
    /// lenient.
    #[test]
    fn ndjson_chunking(
        pieces in prop::collection::vec(arb_line_piece(), 0..8),
        tail in proptest::option::of("[ -~]{1,20}"),
        allow_crlf in any::<bool>(),
        allow_blank_lines in any::<bool>(),
        cuts in prop::collection::vec(any::<Index>(), 0..8),
    ) {
        let longest = pieces
            .iter()
            .map(|p| match p {
                LinePiece::Message(_, t) | LinePiece::CrLf(_, t) => t.len() + 1,
                _ => 0,
            })
            .max()
            .unwrap_or(0)
            .max(24);
        let opts = LineOptions { max_line_bytes: longest, allow_crlf, allow_blank_lines };

        let mut stream = Vec::new();
        let mut expected: Vec<Expected> = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            let n = i as u64 + 1;
            match piece {
                LinePiece::Message(_, t) => {
                    stream.extend_from_slice(t.as_bytes());
                    stream.push(b'\n');
                    expected.push(Ok((n, t.clone().into_bytes())));
                }
                LinePiece::CrLf(_, t) => {
                    stream.extend_from_slice(t.as_bytes());
                    stream.extend_from_slice(b"\r\n");
                    expected.push(if allow_crlf { Ok((n, t.clone().into_bytes())) } else { Err((Rule::CrLf, n)) });
                }
                LinePiece::Blank => {
                    stream.push(b'\n');
                    if !allow_blank_lines {
                        expected.push(Err((Rule::BlankLine, n)));
                    }
                }
                LinePiece::TooLong(k) => {
                    stream.extend(std::iter::repeat_n(b'x', longest + k));
                    stream.push(b'\n');
                    expected.push(Err((Rule::LineTooLong, n)));
                }
                LinePiece::Junk(s) => {
                    stream.extend_from_slice(s.as_bytes());
                    stream.push(b'\n');
                    expected.push(Ok((n, s.clone().into_bytes())));
                }
            }
        }
        if let Some(t) = &tail {
            stream.extend_from_slice(t.as_bytes());
            expected.push(Err((Rule::Truncated, pieces.len() as u64 + 1)));
        }

        let whole = frame_lines(&[&stream], opts);
        prop_assert_eq!(as_expected(&whole), expected);
        prop_assert_eq!(&frame_lines(&split(&stream, &cuts), opts), &whole);
        let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
        prop_assert_eq!(&frame_lines(&bytewise, opts), &whole);

        // The message lines decode to their messages.
        let mut lines = whole.iter().filter_map(|i| i.as_ref().ok());
        for piece in &pieces {
            match piece {
                LinePiece::Message(m, _) => {
                    let (_, bytes) = lines.next().unwrap();
                    prop_assert_eq!(&decode(bytes).unwrap(), m);
                }
                LinePiece::CrLf(m, _) if allow_crlf => {
                    let (_, bytes) = lines.next().unwrap();
                    prop_assert_eq!(&decode(bytes).unwrap(), m);
                }
                LinePiece::Junk(_) => {
                    lines.next().unwrap();
                }
                _ => {}
            }
        }
    }

    /// (d) SSE: comments and events come out as the WHATWG rules say, for any chunking.
    #[test]
    fn sse_chunking(
        s in arb_sse_stream(),
        cuts in prop::collection::vec(any::<Index>(), 0..8),
    ) {
        let bytes = s.bytes();
        let (items, cut_off) = s.expected();
        let whole = run_sse(&[&bytes]);
        let (ok, errors): (Vec<_>, Vec<_>) = whole.iter().cloned().partition(|i| i.is_ok());
        let ok: Vec<SseItem> = ok.into_iter().map(Result::unwrap).collect();
        let errors: Vec<Rule> = errors.into_iter().map(|e| e.unwrap_err().rule).collect();
        prop_assert_eq!(ok, items, "stream {:?}", String::from_utf8_lossy(&bytes));
        prop_assert_eq!(errors, if cut_off { vec![Rule::Truncated] } else { vec![] });
        prop_assert_eq!(&run_sse(&split(&bytes, &cuts)), &whole);
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        prop_assert_eq!(&run_sse(&bytewise), &whole);
    }

    /// (d) SSE carries any encoded message as event data, split over lines or not.
    #[test]
    fn sse_carries_messages(
        msgs in prop::collection::vec(arb_encoded(), 1..4),
        cuts in prop::collection::vec(any::<Index>(), 0..8),
    ) {
        let mut stream = String::new();
        for (_, text) in &msgs {
            stream.push_str(&mcp_sim::framing::sse::encode_comment("keep-alive"));
            stream.push_str(&mcp_sim::framing::sse::encode_event(text));
        }
        let items = run_sse(&split(stream.as_bytes(), &cuts));
        let events: Vec<Message> = items
            .iter()
            .filter_map(|i| match i {
                Ok(SseItem::Event(e)) => Some(decode(e.data.as_bytes()).unwrap()),
                _ => None,
            })
            .collect();
        let sent: Vec<Message> = msgs.into_iter().map(|(m, _)| m).collect();
        // One comment and one event per message, nothing else.
        prop_assert_eq!(items.len(), 2 * sent.len());
        prop_assert_eq!(events, sent);
    }

    /// (e) Arbitrary bytes: no panic, and nothing that is not JSON is accepted.
    #[test]
    fn decode_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check_decode(&bytes)?;
    }

    /// (e) Byte-level mutations of valid messages.
    #[test]
    fn decode_mutated_bytes(
        (_, text) in arb_encoded(),
        mutations in prop::collection::vec(arb_mutation(), 1..5),
    ) {
        let mut bytes = text.into_bytes();
        for m in &mutations {
            mutate(&mut bytes, m);
        }
        check_decode(&bytes)?;
    }

    /// (e) A member nobody reads, in the envelope or in `params`, is still read as JSON: the
    /// decoder accepts the message only if the generic JSON layer does.
    #[test]
    fn decode_unread_members(
        (_, text) in arb_encoded(),
        value in arb_doubtful_value(),
        in_params in any::<bool>(),
    ) {
        let at = match text.find("\"params\":{") {
            Some(p) if in_params => p + "\"params\":{".len(),
            _ => 1,
        };
        let (head, rest) = text.as_bytes().split_at(at);
        // A comma after the member unless the object was empty.
        let comma: &[u8] = if rest.first() == Some(&b'}') { b"" } else { b"," };
        let bytes = [head, b"\"unread\":", &value, comma, rest].concat();
        check_decode(&bytes)?;
    }

    /// (e) Value-level mutations of valid messages (members removed, replaced or added), then
    /// possibly byte-level ones, so that bad bytes also land in members nothing reads.
    #[test]
    fn decode_mutated_values(
        (_, text) in arb_encoded(),
        edits in prop::collection::vec(arb_edit(), 1..4),
        mutations in prop::collection::vec(arb_mutation(), 0..3),
    ) {
        let mut value: Value = serde_json::from_str(&text).unwrap();
        for e in &edits {
            edit(&mut value, e);
        }
        let mut bytes = value.to_string().into_bytes();
        check_decode(&bytes)?;
        for m in &mutations {
            mutate(&mut bytes, m);
        }
        check_decode(&bytes)?;
    }
}
