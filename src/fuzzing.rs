//! Bodies of the cargo-fuzz targets in `fuzz/`.
//!
//! Each target in `fuzz/fuzz_targets/` is one call into this module, so the logic builds and
//! runs on stable: `tests/fuzz_regressions.rs` replays every committed crasher and seed
//! through the same functions. Each function panics only when an invariant breaks, which is
//! what the fuzzer reports.

use arbitrary::{Arbitrary, Unstructured};
use serde_json::{Map, Value};

use crate::framing::ndjson::{LineDecoder, LineOptions};
use crate::framing::sse::{self, SseDecoder, SseItem, SseOptions};
use crate::framing::FrameError;
use crate::wire::{self, DecodeOptions, Message};

/// Raw bytes into the strict decoder under every strictness setting: never a panic, and a
/// message that decodes re-encodes to bytes that decode to the same message.
pub fn decode_bytes(data: &[u8]) {
    for bits in 0..8u8 {
        let opts = DecodeOptions {
            allow_null_error_id: bits & 1 != 0,
            allow_integral_float_ids: bits & 2 != 0,
            require_result_type: bits & 4 != 0,
            ..DecodeOptions::default()
        };
        if let Ok(msg) = wire::decode_with(data, &opts) {
            let text = wire::encode(&msg).expect("a decoded message re-encodes");
            let again =
                wire::decode_with(text.as_bytes(), &opts).expect("re-encoded message decodes");
            assert!(
                again == msg,
                "round trip changed the message: {msg:?} -> {again:?}"
            );
        }
        let _ = wire::json::parse_value(data, &opts.limits);
    }
}

/// Splits `data` into chunks at the positions drawn from `cuts`.
fn chunks<'a>(data: &'a [u8], cuts: &[u16]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| *c as usize % (data.len() + 1))
        .collect();
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

/// Input of the framer targets: a byte stream, chunk boundaries and a small line limit.
#[derive(Debug, Arbitrary)]
pub struct ChunkedInput {
    /// The stream.
    pub data: Vec<u8>,
    /// Where to cut it (taken modulo its length).
    pub cuts: Vec<u16>,
    /// Maximum line length, kept small so the limit paths are reached.
    pub max_line: u8,
    /// Framing strictness bits (CR LF, blank lines).
    pub lenient: u8,
}

/// One item of the NDJSON framer: a line's number and bytes, or an error.
pub type LineItem = Result<(u64, Vec<u8>), FrameError>;

/// Feeds `chunks` to a fresh NDJSON decoder and collects every item, the end included.
pub fn frame_lines(chunks: &[&[u8]], opts: LineOptions) -> Vec<LineItem> {
    let mut dec = LineDecoder::new(opts);
    let mut out = Vec::new();
    for c in chunks {
        dec.push(c);
        while let Some(item) = dec.next_line() {
            out.push(item.map(|l| (l.number, l.bytes)));
        }
    }
    if let Some(e) = dec.finish() {
        out.push(Err(e));
    }
    out
}

/// The NDJSON framer: chunking never changes the lines and errors it yields, lines never
/// exceed the limit or contain LF, and each line that decodes as a message round-trips.
pub fn ndjson_chunks(input: &ChunkedInput) {
    let opts = LineOptions {
        max_line_bytes: input.max_line as usize + 1,
        allow_crlf: input.lenient & 1 != 0,
        allow_blank_lines: input.lenient & 2 != 0,
    };
    let whole = frame_lines(&[&input.data], opts);
    let split = frame_lines(&chunks(&input.data, &input.cuts), opts);
    assert_eq!(whole, split, "chunking changed the NDJSON framing");
    let bytewise: Vec<&[u8]> = input.data.chunks(1).collect();
    assert_eq!(
        whole,
        frame_lines(&bytewise, opts),
        "byte-by-byte feeding changed the framing"
    );
    for (_, line) in whole.iter().flatten() {
        assert!(line.len() <= opts.max_line_bytes && !line.contains(&b'\n'));
        decode_bytes(line);
    }
}

/// Feeds `chunks` to a fresh SSE decoder and collects every item, the end included.
pub fn frame_sse(chunks: &[&[u8]], opts: SseOptions) -> Vec<Result<SseItem, FrameError>> {
    let mut dec = SseDecoder::new(opts);
    let mut out = Vec::new();
    for c in chunks {
        dec.push(c);
        while let Some(item) = dec.next_item() {
            out.push(item);
        }
    }
    if let Some(e) = dec.finish() {
        out.push(Err(e));
    }
    out
}

/// The SSE decoder: chunking never changes the items, and every event's data re-encodes to a
/// stream that decodes to the same data.
pub fn sse_chunks(input: &ChunkedInput) {
    let opts = SseOptions {
        max_line_bytes: input.max_line as usize + 1,
        max_event_bytes: input.max_line as usize * 4 + 1,
    };
    let whole = frame_sse(&[&input.data], opts);
    assert_eq!(
        whole,
        frame_sse(&chunks(&input.data, &input.cuts), opts),
        "chunking changed the SSE items"
    );
    let bytewise: Vec<&[u8]> = input.data.chunks(1).collect();
    assert_eq!(
        whole,
        frame_sse(&bytewise, opts),
        "byte-by-byte feeding changed the SSE items"
    );
    for item in whole.iter().flatten() {
        if let SseItem::Event(e) = item {
            let encoded = sse::encode_event(&e.data);
            let unlimited = SseOptions::default();
            let again = frame_sse(&[encoded.as_bytes()], unlimited);
            match again.as_slice() {
                [Ok(SseItem::Event(e2))] => {
                    assert_eq!(e2.data, e.data, "SSE data did not round-trip")
                }
                other => panic!("re-encoded event decoded as {other:?}"),
            }
        }
    }
}

/// A structure-aware message for the round-trip target.
#[derive(Debug)]
pub struct ArbMessage(pub Message);

impl<'a> Arbitrary<'a> for ArbMessage {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        use crate::wire::*;
        let msg = match u.int_in_range(0..=5)? {
            0 => Message::Request(Request {
                id: u.arbitrary()?,
                method: u.arbitrary()?,
                meta: RequestMeta {
                    protocol_version: u.arbitrary()?,
                    client_capabilities: arb_map(u, 2)?,
                    progress_token: u.arbitrary()?,
                    other: arb_map(u, 2)?,
                },
                params: arb_map(u, 3)?,
            }),
            1 => Message::Progress(Progress {
                token: u.arbitrary()?,
                progress: u.arbitrary()?,
                total: u.arbitrary()?,
                message: u.arbitrary()?,
                meta: if u.arbitrary()? {
                    Some(arb_map(u, 2)?)
                } else {
                    None
                },
            }),
            2 => Message::Cancelled(Cancelled {
                request_id: u.arbitrary()?,
                reason: u.arbitrary()?,
                meta: if u.arbitrary()? {
                    Some(arb_map(u, 2)?)
                } else {
                    None
                },
            }),
            3 => Message::Notification(Notification {
                method: u.arbitrary()?,
                params: if u.arbitrary()? {
                    Some(arb_map(u, 3)?)
                } else {
                    None
                },
            }),
            4 => Message::Result(ResultResponse {
                id: u.arbitrary()?,
                result_type: u.arbitrary()?,
                result: arb_map(u, 3)?,
            }),
            _ => Message::Error(ErrorResponse {
                id: u.arbitrary()?,
                error: ErrorObject {
                    code: u.arbitrary()?,
                    message: u.arbitrary()?,
                    data: if u.arbitrary()? {
                        Some(arb_value(u, 2)?)
                    } else {
                        None
                    },
                },
            }),
        };
        Ok(ArbMessage(msg))
    }
}

fn arb_map(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<Map<String, Value>> {
    let mut map = Map::new();
    for _ in 0..u.int_in_range(0..=3)? {
        map.insert(u.arbitrary()?, arb_value(u, depth.saturating_sub(1))?);
    }
    Ok(map)
}

fn arb_value(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<Value> {
    let top = if depth == 0 { 3 } else { 5 };
    Ok(match u.int_in_range(0..=top)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => match u.int_in_range(0..=2)? {
            0 => Value::from(u.arbitrary::<i64>()?),
            1 => Value::from(u.arbitrary::<u64>()?),
            _ => serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        },
        3 => Value::String(u.arbitrary()?),
        4 => Value::Array(
            (0..u.int_in_range(0..=3)?)
                .map(|_| arb_value(u, depth - 1))
                .collect::<Result<_, _>>()?,
        ),
        _ => Value::Object(arb_map(u, depth)?),
    })
}

/// Structure-aware round trip: an arbitrary message either encodes and decodes back to
/// itself, or the encoder refuses it with a typed error for a reason that really applies.
pub fn roundtrip(msg: &ArbMessage) {
    let msg = &msg.0;
    match wire::encode(msg) {
        Ok(text) => {
            let back = wire::decode(text.as_bytes())
                .unwrap_or_else(|e| panic!("encoded {text} does not decode: {e}"));
            assert!(back == *msg, "round trip changed {msg:?} into {back:?}");
            let mut framed = sse::encode_event(&text).into_bytes();
            framed.extend_from_slice(b": keep-alive\n\n");
            let mut dec = SseDecoder::new(SseOptions::default());
            dec.push(&framed);
            match dec.next_item() {
                Some(Ok(SseItem::Event(e))) => assert_eq!(e.data, text),
                other => panic!("SSE framing lost the message: {other:?}"),
            }
        }
        Err(wire::EncodeError::NonFinite { .. }) => {
            let Message::Progress(p) = msg else {
                panic!("non-finite refusal on {msg:?}")
            };
            assert!(!p.progress.is_finite() || p.total.is_some_and(|t| !t.is_finite()));
        }
        Err(wire::EncodeError::ReservedKey { .. } | wire::EncodeError::ReservedMethod(_)) => {}
        Err(e) => panic!("unexpected refusal {e} for {msg:?}"),
    }
}
