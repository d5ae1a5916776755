//! Bodies of the cargo-fuzz targets in `fuzz/`.
//!
//! Each target in `fuzz/fuzz_targets/` is one call into this module, so the logic builds and
//! runs on stable: `tests/fuzz_regressions.rs` replays every committed crasher and seed
//! through the same functions. Each function panics only when an invariant breaks, which is
//! what the fuzzer reports. (The `sse_differential` target is the exception: it compares the
//! SSE decoder with another crate's, so its body lives with the tests,
//! `tests/common/sse_oracle.rs`, which `tests/fuzz_regressions.rs` includes to replay it.)

use arbitrary::{Arbitrary, Unstructured};

/// AddressSanitizer settings of the fuzz targets, which [`asan_defaults!`] compiles into each.
///
/// - `detect_stack_use_after_return=0`: that check moves every frame holding a local whose
///   address escapes onto a heap-allocated fake stack, and the decoder's serde frames are
///   large. Returning a reference to a dead frame does not compile in safe Rust, and the code
///   the targets run has no `unsafe` of its own.
/// - `malloc_context_size=0`: a report names the faulting access's stack but not where the
///   block was allocated and freed, which otherwise is recorded for every allocation. Rerun a
///   crasher with `ASAN_OPTIONS=malloc_context_size=30` to get them: the environment
///   overrides these defaults.
///
/// Together they took `decode_bytes` from 18,738 to 28,601 executions a second (15 s each on
/// the same corpus, `fuzz/README.md`). Out-of-bounds accesses, use after free and double frees
/// are still caught.
pub const ASAN_DEFAULTS: &std::ffi::CStr = c"detect_stack_use_after_return=0:malloc_context_size=0";

/// Defines `__asan_default_options`, which AddressSanitizer reads at start-up, in the fuzz
/// target that invokes it: [`ASAN_DEFAULTS`]. Without a sanitizer nothing reads it.
#[macro_export]
macro_rules! asan_defaults {
    () => {
        /// AddressSanitizer's start-up settings: `mcp_sim::fuzzing::ASAN_DEFAULTS`.
        #[no_mangle]
        pub extern "C" fn __asan_default_options() -> *const ::std::ffi::c_char {
            $crate::fuzzing::ASAN_DEFAULTS.as_ptr()
        }
    };
}
use serde_json::{Map, Value};

use crate::framing::ndjson::{LineDecoder, LineOptions};
use crate::framing::sse::{self, SseDecoder, SseItem, SseOptions};
use crate::framing::FrameError;
use crate::wire::{self, DecodeOptions, Message};

/// The decoder settings an input of [`decode_bytes`] asks for, and the bytes to decode.
///
/// A last byte in `0x10..=0x2F` is not input but knobs: its low three bits switch on the three
/// strictness options, bit 3 tight limits (256 bytes, depth 4) and `0x20..=0x2F` the legacy
/// era's shapes (`decode --era legacy`). No JSON text ends in such a
/// byte (they are control characters, not whitespace), so every seed is a plain message decoded
/// with the defaults, and the fuzzer reaches every setting by appending one byte. One execution
/// is one decode and its round trip.
pub fn decode_knobs(data: &[u8]) -> (&[u8], DecodeOptions) {
    match data.split_last() {
        Some((&k @ 0x10..=0x2F, body)) => {
            let limits = if k & 8 != 0 {
                wire::Limits {
                    max_message_bytes: 256,
                    max_depth: 4,
                }
            } else {
                wire::Limits::DEFAULT
            };
            let opts = DecodeOptions {
                limits,
                allow_null_error_id: k & 1 != 0,
                allow_integral_float_ids: k & 2 != 0,
                require_result_type: k & 4 != 0,
                // 0x20..=0x2F: the legacy shapes, which the encoder writes back as they came
                // (a legacy request's version is its era's).
                era: if k >= 0x20 {
                    crate::wire::Era::LEGACY
                } else {
                    crate::wire::Era::Modern
                },
            };
            (body, opts)
        }
        _ => (data, DecodeOptions::default()),
    }
}

/// Raw bytes into the strict decoder under the settings [`decode_knobs`] reads from the input:
/// never a panic, and a message that decodes re-encodes to bytes that decode to the same
/// message.
pub fn decode_bytes(data: &[u8]) {
    let (body, opts) = decode_knobs(data);
    if let Ok(msg) = wire::decode_with(body, &opts) {
        round_trip(&msg, &opts);
    }
    // The same bytes as a 2025-03-26 frame, which may be a batch: every member that decodes
    // round-trips on its own.
    let batches = DecodeOptions {
        era: wire::Era::Legacy(wire::LegacyRevision::V2025_03_26),
        ..opts
    };
    match wire::decode_frame(body, &batches) {
        Ok(wire::Frame::Single(msg)) => round_trip(&msg, &batches),
        Ok(wire::Frame::Batch(members)) => {
            for msg in members.iter().flatten() {
                round_trip(msg, &batches);
            }
        }
        Err(_) => {}
    }
}

fn round_trip(msg: &wire::Message, opts: &DecodeOptions) {
    let text = wire::encode(msg).expect("a decoded message re-encodes");
    let again = wire::decode_with(text.as_bytes(), opts).expect("re-encoded message decodes");
    assert!(
        &again == msg,
        "round trip changed the message: {msg:?} -> {again:?}"
    );
}

/// Splits `data` into chunks at the positions drawn from `cuts` (taken modulo its length plus
/// one, so any cut is valid and empty chunks occur).
pub fn split_at<'a>(data: &'a [u8], cuts: &[u16]) -> Vec<&'a [u8]> {
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
    let split = frame_lines(&split_at(&input.data, &input.cuts), opts);
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
        frame_sse(&split_at(&input.data, &input.cuts), opts),
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
            0 => {
                // A legacy request has its era's version and no capabilities in `_meta`.
                let legacy: bool = u.arbitrary()?;
                let (protocol_version, client_capabilities) = if legacy {
                    (Era::LEGACY.version().into(), Map::new())
                } else {
                    (wire::protocol_version_of(u.arbitrary()?), arb_map(u, 2)?)
                };
                Message::Request(Request {
                    id: u.arbitrary()?,
                    method: wire::request_method_of(u.arbitrary()?),
                    meta: RequestMeta {
                        protocol_version,
                        client_capabilities,
                        progress_token: u.arbitrary()?,
                        other: arb_map(u, 2)?,
                        legacy,
                    },
                    params: arb_map(u, 3)?,
                })
            }
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
            let era = match msg {
                Message::Request(r) if r.meta.legacy => wire::Era::LEGACY,
                _ => wire::Era::Modern,
            };
            let opts = DecodeOptions {
                era,
                ..DecodeOptions::default()
            };
            let back = wire::decode_with(text.as_bytes(), &opts)
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

/// The oracle settings a trace input asks for with a last byte in `0x10..=0x1F` (as
/// [`decode_knobs`]): bit 0 the lenient profile, bit 1 the liveness checks, bit 2 a zero grace
/// window, bit 3 the lenient decoder options.
fn oracle_knobs(data: &[u8]) -> (&[u8], crate::oracle::OracleConfig) {
    use crate::oracle::{OracleConfig, Profile};
    let mut config = OracleConfig::default();
    let body = match data.split_last() {
        Some((&k @ 0x10..=0x1F, body)) => {
            if k & 1 != 0 {
                config.profile = Profile::Lenient;
            }
            config.complete = k & 2 != 0;
            if k & 4 != 0 {
                config.grace_ms = 0;
            }
            if k & 8 != 0 {
                config.decode.allow_null_error_id = true;
                config.decode.allow_integral_float_ids = true;
            }
            body
        }
        _ => data,
    };
    (body, config)
}

/// Any bytes as a JSON Lines trace, the way `check-trace` reads a user's file: a trace that
/// does not read is a typed error naming a line the text has; one that reads is judged without
/// a panic, the same way twice, and every violation names events the trace holds.
pub fn trace_jsonl(data: &[u8]) {
    let (body, config) = oracle_knobs(data);
    let text = String::from_utf8_lossy(body);
    match crate::trace::Trace::from_jsonl(&text) {
        Err(e) => {
            let lines = text.lines().count().max(1);
            assert!(
                (1..=lines).contains(&e.line),
                "error names line {} of {lines}: {e}",
                e.line
            );
            assert!(!e.message.is_empty());
        }
        Ok(trace) => judge_trace(&trace, &config),
    }
}

/// The oracle over `trace`: no panic, the same verdict twice, events that exist.
fn judge_trace(trace: &crate::trace::Trace, config: &crate::oracle::OracleConfig) {
    let verdict = crate::oracle::check(trace, config);
    for v in &verdict.violations {
        assert!(
            v.events.iter().all(|&e| e < trace.events.len()),
            "{v} names an event the trace does not hold"
        );
    }
    assert_eq!(
        verdict,
        crate::oracle::check(trace, config),
        "the oracle is not a function"
    );
}

/// One event of a structure-aware trace.
#[derive(Debug, Arbitrary)]
pub struct ArbEvent {
    /// Milliseconds after the previous event.
    pub dt: u8,
    /// Who (client, server, proxy, backend).
    pub side: u8,
    /// What kind of event.
    pub kind: u8,
    /// stdio or HTTP.
    pub http: bool,
    /// The HTTP stream (small, so that events share streams).
    pub stream: u8,
    /// A request id for the events that name one (small, so that they match).
    pub request: u8,
    /// The message of a send or receipt.
    pub msg: ArbMessage,
}

/// A structure-aware trace: events from [`ArbEvent`] and oracle knobs.
#[derive(Debug, Arbitrary)]
pub struct ArbTrace {
    /// The events.
    pub events: Vec<ArbEvent>,
    /// The oracle settings (as the last byte of [`trace_jsonl`]).
    pub knobs: u8,
}

/// A structure-aware trace, built from well-typed events: it survives JSON Lines unchanged and
/// the oracle judges it without a panic, the same way twice.
pub fn trace_events(input: &ArbTrace) {
    use crate::model::{Outcome, StreamId, TimeoutReason, Transport};
    use crate::time::Time;
    use crate::trace::{EventKind, Side, Trace, WireEvent};
    let mut trace = Trace::new();
    let mut t = 0u64;
    for e in input.events.iter().take(256) {
        t += u64::from(e.dt);
        let side = [Side::Client, Side::Server, Side::Proxy, Side::Backend][e.side as usize % 4];
        let transport = if e.http {
            Transport::Http
        } else {
            Transport::Stdio
        };
        let stream = e.http.then_some(StreamId(u64::from(e.stream % 8)));
        let request = wire::RequestId::Number(i64::from(e.request % 16));
        let kind = match e.kind % 10 {
            0..=2 => EventKind::Send(WireEvent::message(transport, stream, &e.msg.0)),
            3..=5 => EventKind::Recv(WireEvent::message(transport, stream, &e.msg.0)),
            6 => EventKind::Close {
                stream: stream.map(|s| s.0),
                by: [Side::Client, Side::Server, Side::Proxy][e.request as usize % 3],
                reason: (e.dt % 3 == 0).then(|| "idle".to_string()),
            },
            7 => EventKind::Timeout {
                request,
                reason: [
                    TimeoutReason::Idle,
                    TimeoutReason::Maximum,
                    TimeoutReason::Ack,
                ][e.dt as usize % 3],
            },
            8 => EventKind::Outcome {
                request,
                outcome: [
                    Outcome::Result,
                    Outcome::Error,
                    Outcome::Cancelled,
                    Outcome::TimedOut,
                    Outcome::Lost,
                    Outcome::InputRequired,
                ][e.dt as usize % 6],
            },
            _ => match e.dt % 3 {
                0 => EventKind::Work { request },
                1 => EventKind::Release { request },
                _ => EventKind::Status {
                    stream: stream.map(|s| s.0),
                    status: [200, 202, 400, 404, 524][e.request as usize % 5],
                    content_type: None,
                    headers: None,
                },
            },
        };
        trace.push(Time::from_millis(t), side, kind);
    }
    let text = trace.to_jsonl();
    let read = Trace::from_jsonl(&text).expect("a trace this crate wrote reads back");
    assert_eq!(read.to_jsonl(), text, "JSON Lines changed the trace");
    let (_, config) = oracle_knobs(&[0x10 | (input.knobs & 0x0F)]);
    judge_trace(&read, &config);
}

/// One step of the sans-IO model target.
#[derive(Debug, Arbitrary)]
pub enum ModelOp {
    /// The application starts a `slow_op` call.
    Call {
        /// `slow_op` steps (small).
        steps: u8,
        /// Ask for progress.
        progress: bool,
        /// Declare the Tasks extension.
        task: bool,
        /// Rounds of input asked for.
        rounds: u8,
        /// Timeout in 100 ms units (0: none).
        timeout: u8,
    },
    /// The application cancels the k-th call it started.
    Cancel(u8),
    /// Time passes (in 100 ms units); every due timer fires.
    Advance(u8),
    /// The network delivers the next message in flight to the server.
    ToServer,
    /// The network delivers the next message in flight to the client.
    ToClient,
    /// The network loses the next message in flight to the server.
    DropToServer,
    /// Arbitrary bytes reach the server (a broken or hostile client).
    ServerGets(Vec<u8>),
    /// An arbitrary message reaches the client (a broken or hostile server).
    ClientGets(ArbMessage),
    /// The pipe breaks (stdio) or every stream is closed (HTTP), both sides notice.
    Disconnect,
}

/// The two peers of [`model_ops`], the network between them and what the checks remember.
struct ModelRig {
    client: crate::model::Client,
    server: crate::model::Server,
    now: crate::time::Time,
    calls: Vec<wire::RequestId>,
    to_server: std::collections::VecDeque<(Option<crate::model::StreamId>, Message)>,
    to_client: std::collections::VecDeque<(Option<crate::model::StreamId>, Message)>,
    outcomes: std::collections::BTreeMap<wire::RequestId, u32>,
    /// Requests the server sent a final response for.
    answered: std::collections::BTreeSet<wire::RequestId>,
    /// The request each progress token of the client's requests belongs to.
    tokens: std::collections::BTreeMap<wire::ProgressToken, wire::RequestId>,
}

impl ModelRig {
    /// Moves every output of both peers onto the network, checking the invariants.
    fn drain(&mut self) {
        use crate::model::{ClientEvent, ClientTransmit, ServerTransmit};
        while let Some(t) = self.client.poll_transmit() {
            match t {
                ClientTransmit::Line(m) => self.to_server.push_back((None, m)),
                ClientTransmit::Post { stream, msg } => {
                    self.to_server.push_back((Some(stream), msg))
                }
                ClientTransmit::Close { .. }
                | ClientTransmit::Disconnect
                | ClientTransmit::Get { .. }
                | ClientTransmit::Delete { .. } => {}
            }
        }
        while let Some(e) = self.client.poll_event() {
            if let ClientEvent::Outcome { request, .. } = e {
                let n = self.outcomes.entry(request.clone()).or_default();
                *n += 1;
                assert!(*n == 1, "request {request} got a second outcome");
            }
        }
        while let Some(t) = self.server.poll_transmit() {
            let (stream, msg) = match t {
                ServerTransmit::Line(m) => (None, m),
                ServerTransmit::SseEvent { stream, msg, .. }
                | ServerTransmit::Json { stream, msg, .. } => (Some(stream), msg),
                _ => continue,
            };
            match &msg {
                Message::Progress(p) => {
                    if let Some(id) = self.tokens.get(&p.token) {
                        assert!(
                            !self.answered.contains(id),
                            "the server sent progress for {id} after its final response"
                        );
                    }
                }
                m if m.is_response() => {
                    if let Some(id) = m.id() {
                        self.answered.insert(id.clone());
                    }
                }
                _ => {}
            }
            self.to_client.push_back((stream, msg));
        }
        while self.server.poll_backend().is_some() {}
    }

    fn step(&mut self, op: &ModelOp) {
        use crate::model::{CallSpec, TimeoutPolicy, SLOW_TOOL};
        use std::time::Duration;
        let now = self.now;
        match op {
            ModelOp::Call {
                steps,
                progress,
                task,
                rounds,
                timeout,
            } => {
                let args = serde_json::json!({"steps": steps % 8, "step_ms": 100, "input_rounds": rounds % 3});
                let policy = match timeout {
                    0 => TimeoutPolicy::none(),
                    t => TimeoutPolicy::fixed(Duration::from_millis(u64::from(*t) * 100)),
                };
                let mut spec = CallSpec::tool(SLOW_TOOL, args, policy);
                spec.progress = *progress;
                spec.task = *task;
                let id = self.client.start_request(now, spec);
                self.calls.push(id);
            }
            ModelOp::Cancel(k) => {
                if let Some(id) = self.calls.get(*k as usize % self.calls.len().max(1)) {
                    let _ = self.client.cancel(now, id);
                }
            }
            ModelOp::Advance(d) => {
                self.now = now + Duration::from_millis(u64::from(*d) * 100);
                self.client.handle_timeout(self.now);
                self.server.handle_timeout(self.now);
            }
            ModelOp::ToServer => {
                if let Some((stream, msg)) = self.to_server.pop_front() {
                    if let Message::Request(r) = &msg {
                        if let Some(t) = r.progress_token() {
                            self.tokens.insert(t.clone(), r.id.clone());
                        }
                    }
                    self.server.handle_message(now, stream, msg);
                }
            }
            ModelOp::ToClient => {
                if let Some((stream, msg)) = self.to_client.pop_front() {
                    self.client.handle_message(now, stream, msg);
                }
            }
            ModelOp::DropToServer => {
                self.to_server.pop_front();
            }
            ModelOp::ServerGets(bytes) => match wire::decode(bytes) {
                // A hostile request gets an id and a token of its own, so that what the server
                // answers it is never mistaken for an answer to one of the client's requests.
                Ok(Message::Request(mut r)) => {
                    r.id = wire::RequestId::String(format!("hostile-{}", r.id));
                    if let Some(t) = r.meta.progress_token.take() {
                        r.meta.progress_token =
                            Some(wire::ProgressToken::String(format!("hostile-{t}")));
                    }
                    self.server.handle_message(now, None, r.into());
                }
                Ok(msg) => self.server.handle_message(now, None, msg),
                Err(e) => self.server.handle_invalid(now, None, &e),
            },
            ModelOp::ClientGets(m) => self.client.handle_message(now, None, m.0.clone()),
            ModelOp::Disconnect => {
                self.to_server.clear();
                self.to_client.clear();
                self.client.handle_disconnect(now);
                self.server.handle_disconnect(now);
            }
        }
        self.drain();
    }
}

/// The sans-IO client and server, joined by a network the input drives, fed arbitrary
/// messages, timer firings and closes: no panic, at most one outcome per request for the
/// application, and no progress from the reference server for a request after its final
/// response.
pub fn model_ops(ops: &[ModelOp], http: bool) {
    use crate::model::{Client, ClientConfig, Server, ServerConfig, Transport};
    let transport = if http {
        Transport::Http
    } else {
        Transport::Stdio
    };
    let mut rig = ModelRig {
        client: Client::new(ClientConfig::new(transport)),
        server: Server::new(ServerConfig::new(transport)),
        now: crate::time::Time::ZERO,
        calls: Vec::new(),
        to_server: Default::default(),
        to_client: Default::default(),
        outcomes: Default::default(),
        answered: Default::default(),
        tokens: Default::default(),
    };
    for op in ops.iter().take(512) {
        rig.step(op);
    }
    // Settle: the network delivers everything and time runs to every deadline; then each call
    // that is no longer outstanding was told exactly one outcome (one with no deadline whose
    // request was lost waits for ever, as its policy says).
    for _ in 0..10_000 {
        if !rig.to_server.is_empty() {
            rig.step(&ModelOp::ToServer);
        } else if !rig.to_client.is_empty() {
            rig.step(&ModelOp::ToClient);
        } else {
            let next = [rig.client.poll_timeout(), rig.server.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next else { break };
            rig.now = rig.now.max(next);
            rig.client.handle_timeout(rig.now);
            rig.server.handle_timeout(rig.now);
            rig.drain();
        }
    }
    for id in &rig.calls {
        if !rig.client.is_outstanding(id) {
            assert_eq!(
                rig.outcomes.get(id),
                Some(&1),
                "request {id} ended without an outcome"
            );
        }
    }
}

/// Input of [`live_output`]: what a real peer wrote, and where the reads of it ended.
#[derive(Debug, Arbitrary)]
pub struct LiveOutput {
    /// A Streamable HTTP response body (else a server's stdout).
    pub http: bool,
    /// The response's `Content-Type` is `text/event-stream` (else `application/json`).
    pub event_stream: bool,
    /// The peer's bytes.
    pub data: Vec<u8>,
    /// Where reads end (taken modulo the length, see [`split_at`]).
    pub cuts: Vec<u16>,
}

/// What a reader made of a peer's output, the end included.
#[derive(Debug, PartialEq)]
enum Read {
    /// A stdio line, as written.
    Line(Vec<u8>),
    /// A stdio framing error, as the live lane records it.
    Broken(crate::trace::WireEvent),
    /// An item of a response.
    Response(crate::lanes::readers::ExchangeItem),
}

/// Reads `chunks` the way the live lane reads a process's stdout or a response body.
fn read_live(input: &LiveOutput, chunks: &[&[u8]]) -> Vec<Read> {
    use crate::lanes::readers::{ExchangeItem, ResponseReader, StdioReader};
    let mut out = Vec::new();
    if input.http {
        let content_type = if input.event_stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        out.push(Read::Response(ExchangeItem::Status {
            status: 200,
            content_type: Some(content_type.into()),
            session: None,
        }));
        let mut reader = ResponseReader::new(Some(content_type), false);
        for c in chunks {
            reader.push(c, |item| out.push(Read::Response(item)));
        }
        reader.finish(|item| out.push(Read::Response(item)));
    } else {
        let mut reader = StdioReader::default();
        for c in chunks {
            out.extend(reader.push(c).into_iter().map(|l| match l {
                Ok(line) => Read::Line(line),
                Err(w) => Read::Broken(w),
            }));
        }
        out.extend(reader.finish().map(Read::Broken));
    }
    out
}

/// The live lane's readers on arbitrary output of a server, cut at arbitrary points, then what
/// the lane does with it, through the lanes' own client driver with the probe's settings:
/// where the reads end changes nothing that is read; each message is recorded as written, from
/// the client's side, and, when it decodes, handed to the reference client, which has one call
/// out; a stream the client closed is read no further; the client tells that call exactly one
/// outcome once its deadlines pass; the recording survives JSON Lines and the oracle judges it
/// without a panic.
pub fn live_output(input: &LiveOutput) {
    use crate::lanes::client_driver::{ClientDriver, ClientOutput, ClientRecording, EndedBy};
    use crate::lanes::readers::ExchangeItem;
    use crate::lanes::RunSink;
    use crate::lanes::RunStats;
    use crate::model::{
        CallSpec, Client, ClientConfig, StreamId, TimeoutPolicy, Transport, SLOW_TOOL,
    };
    use crate::time::Time;
    use crate::trace::{EventKind, Side, Trace};
    use crate::wire::RequestId;
    use std::time::Duration;

    /// The run's trace at the fuzz clock, checking each outcome told.
    struct Sink {
        trace: Trace,
        now: Time,
        call: RequestId,
        outcomes: usize,
    }
    impl RunSink for Sink {
        fn record(&mut self, side: Side, kind: EventKind) {
            if let EventKind::Outcome { request, .. } = &kind {
                assert_eq!(request, &self.call, "an outcome for a request never sent");
                self.outcomes += 1;
                assert_eq!(self.outcomes, 1, "the call got a second outcome");
            }
            self.trace.push(self.now, side, kind);
        }
        fn tally(&mut self, _: impl FnOnce(&mut RunStats)) {}
    }

    let whole = read_live(input, &[&input.data]);
    assert_eq!(
        whole,
        read_live(input, &split_at(&input.data, &input.cuts)),
        "where the reads ended changed what was read"
    );
    let bytewise: Vec<&[u8]> = input.data.chunks(1).collect();
    assert_eq!(
        whole,
        read_live(input, &bytewise),
        "reading byte by byte changed what was read"
    );

    let transport = if input.http {
        Transport::Http
    } else {
        Transport::Stdio
    };
    // The probe's settings.
    let recording = ClientRecording {
        as_written: true,
        post_headers: true,
    };
    let mut driver = ClientDriver::new(
        Client::new(ClientConfig::new(transport)),
        transport,
        recording,
    );
    let policy = TimeoutPolicy::fixed(Duration::from_secs(10));
    let mut spec = CallSpec::tool(SLOW_TOOL, serde_json::json!({"steps": 3}), policy);
    spec.progress = true;
    let call = driver.start_request(Time::ZERO, spec);
    let mut sink = Sink {
        trace: Trace::new(),
        now: Time::ZERO,
        call: call.clone(),
        outcomes: 0,
    };
    let mut stream: Option<StreamId> = None;
    // Sends what the client queued; true once it closed the stream or the pipe (the live lane
    // stops reading it then).
    let pump = |driver: &mut ClientDriver, sink: &mut Sink, stream: &mut Option<StreamId>| {
        let mut closed = false;
        while let Some(io) = driver.poll_io(sink.now, sink) {
            match io {
                // The call's POST: the response read is this one's.
                ClientOutput::Post { stream: s, .. } => *stream = stream.or(Some(s)),
                ClientOutput::Close(_) | ClientOutput::Disconnect => closed = true,
                ClientOutput::Line(_) | ClientOutput::Open { .. } => {}
            }
        }
        closed
    };
    let mut closed = pump(&mut driver, &mut sink, &mut stream);
    for read in whole {
        if closed {
            break;
        }
        sink.now = sink.now + Duration::from_millis(1);
        let now = sink.now;
        match read {
            Read::Line(bytes) => driver.read_line(now, Ok(bytes), &mut sink),
            Read::Broken(w) => {
                sink.record(Side::Client, EventKind::Recv(w));
                continue;
            }
            Read::Response(item) => {
                let s = stream.expect("the call was POSTed before its response is read");
                // A message or the end may make the client write; the rest cannot.
                let may_write = matches!(
                    item,
                    ExchangeItem::Message(_) | ExchangeItem::Ended | ExchangeItem::Cut
                );
                driver.response(now, s, item, EndedBy::SERVER, &mut sink);
                if !may_write {
                    continue;
                }
            }
        }
        closed = pump(&mut driver, &mut sink, &mut stream);
    }
    // Time runs past every deadline: the call ends, with exactly one outcome.
    for _ in 0..1_000 {
        let Some(next) = driver.client().poll_timeout() else {
            break;
        };
        sink.now = sink.now.max(next);
        driver.timers(sink.now);
        pump(&mut driver, &mut sink, &mut stream);
    }
    assert!(
        !driver.client().is_outstanding(&call),
        "the call outlived its deadline"
    );
    assert_eq!(sink.outcomes, 1, "the call ended without an outcome");
    let trace = sink.trace;

    let text = trace.to_jsonl();
    let read = Trace::from_jsonl(&text).expect("a trace this crate wrote reads back");
    assert_eq!(read.to_jsonl(), text, "JSON Lines changed the trace");
    judge_trace(&read, &crate::oracle::OracleConfig::default());
}
