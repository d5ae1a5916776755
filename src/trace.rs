//! Trace format v1: the record of a run, one JSON object per line.
//!
//! One format serves simulated runs, recordings of real peers and hand-written cases. Every
//! line has `t` (milliseconds since the start, a number), `side` (`client`, `server`, `proxy`
//! or `backend`: where the event was observed) and `kind`:
//!
//! | kind | fields | meaning |
//! | --- | --- | --- |
//! | `send`, `recv` | `transport` (`stdio`/`http`), `stream` (HTTP), `msg` or `raw`, `policy` | a message written or read by `side`; `raw` holds text that did not decode |
//! | `close` | `stream` (absent: the whole connection or pipe), `by`, `reason` | a stream or connection ended, as seen by `side`, closed by `by` (`reason`: `idle` for an intermediary's idle timeout, `reset` for an injected reset) |
//! | `timeout` | `request`, `reason` (`idle`/`maximum`) | the client's timer fired |
//! | `outcome` | `request`, `outcome` (`result`/`error`/`cancelled`/`timed_out`/`lost`) | what the client application was told |
//! | `work`, `release` | `request` | the backend did work for, or released the resource of, a request |
//! | `comment` | `stream` | an SSE comment (keep-alive) sent or read |
//! | `status` | `stream`, `status`, `content_type` | an HTTP response status sent or read |
//! | `progress` | `request`, `progress` | the client application was given progress |
//! | `fault` | `fault`, `stream`, `ms` | a fault a live driver injected on purpose: `stall` (the client stopped reading for `ms`), `restart` (the server process was restarted), `latency` (`stream` delayed by `ms` each way), `reset` (`stream` to be reset mid-response) |
//!
//! A two-hop trace (a run through an intermediary, `mcp-sim check-proxy`) gives every event a
//! `hop`: `front` (client and intermediary) or `back` (intermediary and upstream server); on
//! each hop `side` is the role there, so the intermediary is the front's `server` and the
//! back's `client`. Request ids, tokens and stream numbers belong to their hop. A trace
//! without `hop` is a one-hop trace, as before. An intermediary may open several upstream
//! connections (a process per request, a side session, a socket per call): the upstream
//! hop's events then carry `conn`, the connection's number from 1 in the order they began,
//! and each connection is judged on its own, in its own era (request ids, tokens, streams
//! and the handshake belong to their connection). Without `conn` the upstream hop is one
//! connection.
//!
//! `policy` (optional, on a client's `send` of a request) records the request's timeout policy
//! as `{"timeout_ms", "reset_on_progress", "max_total_ms"}`; rules that need it skip requests
//! without it. Any side may be missing (a recording of a real server has only the client's and
//! the wire's view), and unknown members are ignored, so later versions can add fields.
//!
//! The serialized form is deterministic (members in a fixed order, message members as
//! recorded), so a trace's [`Trace::digest`] identifies a run byte for byte.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

pub mod connections;
pub mod frame;

pub use crate::model::recorded::Origin;
use crate::model::{Outcome, StreamId, TimeoutPolicy, TimeoutReason, Transport};
use crate::time::Time;
use crate::wire::{self, DecodeError, DecodeOptions, Message, RequestId};

/// Where an event was observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The MCP client.
    Client,
    /// The MCP server.
    Server,
    /// An intermediary (proxy, load balancer).
    Proxy,
    /// The backend the server's tools call.
    Backend,
}

impl Side {
    /// `client`, `server`, `proxy` or `backend`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
            Side::Proxy => "proxy",
            Side::Backend => "backend",
        }
    }
}

/// Which hop of a two-hop run an event was observed on: a run through an intermediary (a
/// stdio↔HTTP bridge, a gateway, an era translator) records the client's end of the front hop
/// and the server's end of the upstream hop in one trace. On each hop `side` is the role on
/// that hop, so the intermediary is the server of the front hop and the client of the back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hop {
    /// Between the client and the intermediary.
    Front,
    /// Between the intermediary and the upstream server.
    Back,
}

impl Hop {
    /// `front` or `back`.
    pub fn as_str(self) -> &'static str {
        match self {
            Hop::Front => "front",
            Hop::Back => "back",
        }
    }
}

/// The `fault` of a [`EventKind::Fault`] for a client that stopped reading the server's
/// output for a while; the oracle adds such spans to its grace window.
pub const FAULT_STALL: &str = "stall";

/// The `fault` of a [`EventKind::Fault`] for a link that lost everything sent over it for
/// `ms` (a simulated blackhole on an intermediary's upstream link): what was sent then never
/// arrived, through no fault of a peer's.
pub const FAULT_BLACKHOLE: &str = "blackhole";

/// The `fault` of a [`EventKind::Fault`] for a link that held everything sent over it for
/// `ms` and then delivered it (a simulated partition on an intermediary's upstream link).
pub const FAULT_PARTITION: &str = "partition";

/// One line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// Milliseconds since the start of the run.
    #[serde(deserialize_with = "millis")]
    pub t: u64,
    /// Where the event was observed.
    pub side: Side,
    /// The hop, in a two-hop trace; absent in a one-hop trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop: Option<Hop>,
    /// On the upstream hop of an intermediary that opened more than one upstream connection
    /// (a process it started, an HTTP session, a socket): which one, numbered from 1 in the
    /// order they began. Absent where the upstream hop is one connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn: Option<u32>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// A message written by `side`.
    Send(WireEvent),
    /// A message read by `side`.
    Recv(WireEvent),
    /// A stream or connection ended.
    Close {
        /// The HTTP stream; absent for the whole connection or pipe.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<u64>,
        /// Who closed it.
        by: Side,
        /// Why, when the closer says: `idle` for an intermediary's idle timeout.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The client's timer fired for a request.
    Timeout {
        /// The request.
        #[serde(with = "request_id")]
        request: RequestId,
        /// Which deadline.
        reason: TimeoutReason,
    },
    /// The client application was told how a request ended.
    Outcome {
        /// The request.
        #[serde(with = "request_id")]
        request: RequestId,
        /// How it ended.
        outcome: Outcome,
    },
    /// The backend did work for a request.
    Work {
        /// The request.
        #[serde(with = "request_id")]
        request: RequestId,
    },
    /// The backend released a request's resource.
    Release {
        /// The request.
        #[serde(with = "request_id")]
        request: RequestId,
    },
    /// An SSE comment line (keep-alive).
    Comment {
        /// The HTTP stream.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<u64>,
    },
    /// An HTTP response status.
    Status {
        /// The HTTP stream.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<u64>,
        /// The status code.
        status: u16,
        /// The `Content-Type`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_type: Option<String>,
        /// The response's headers, names in lower case, when the recorder saw them (the legacy
        /// era's `mcp-session-id` comes this way).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        headers: Option<BTreeMap<String, String>>,
    },
    /// The client opened HTTP stream `stream` with a request that carries no JSON-RPC message
    /// (legacy era): a `GET` for the server's messages or to resume a stream (with
    /// `last-event-id`), or a `DELETE` that ends the session.
    Open {
        /// The new stream.
        stream: u64,
        /// `GET` or `DELETE`.
        method: String,
        /// Its headers, names in lower case, when the recorder saw them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        headers: Option<BTreeMap<String, String>>,
    },
    /// An SSE event that carried no message (legacy era): the priming event of 2025-11-25 (an
    /// id and empty data) or an event that only sets `retry`.
    Sse {
        /// The HTTP stream.
        stream: u64,
        /// Its `id`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
        /// Its `retry`, in ms, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_ms: Option<u64>,
    },
    /// A fault the driver injected on purpose (live runs), so that a reader of the trace can
    /// tell it from the peer's doing: `stall` (the client stopped reading the server's output
    /// for `ms`), `restart` (the server process was killed and started again), `latency`
    /// (an intermediary delays the bytes of `stream` by `ms` each way), `reset` (an
    /// intermediary will reset `stream`'s connection in the middle of the response).
    Fault {
        /// Which fault.
        fault: String,
        /// The HTTP stream it applies to, if one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<u64>,
        /// Its length or size in ms, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    /// The client application was given progress for a request.
    Progress {
        /// The request.
        #[serde(with = "request_id")]
        request: RequestId,
        /// The progress value.
        progress: f64,
    },
}

/// A message on the wire, as seen by one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireEvent {
    /// The transport.
    pub transport: TransportName,
    /// The HTTP stream (one per request POST).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u64>,
    /// The message as JSON, when the text was JSON.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::wire::json::optional_value"
    )]
    pub msg: Option<Value>,
    /// The text, when it was not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// The client's timeout policy for a request it sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyRecord>,
    /// Streamable HTTP: the headers of the POST that carried the message, names in lower
    /// case (`accept`, `content-type`, `mcp-protocol-version`, `mcp-method`, `mcp-name`), when
    /// the recorder saw them. Absent in traces that do not record headers; the header rules
    /// then have nothing to judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Streamable HTTP: the `id` of the SSE event that carried the message, if it had one
    /// (legacy era resumability).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// A recording played back (`serve --from`): where the server's message came from, the
    /// recording's line or `extrapolated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

/// The transport as written in traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportName {
    /// stdio.
    Stdio,
    /// Streamable HTTP.
    Http,
}

impl From<Transport> for TransportName {
    fn from(t: Transport) -> Self {
        match t {
            Transport::Stdio => TransportName::Stdio,
            Transport::Http => TransportName::Http,
        }
    }
}

impl From<TransportName> for Transport {
    fn from(t: TransportName) -> Self {
        match t {
            TransportName::Stdio => Transport::Stdio,
            TransportName::Http => Transport::Http,
        }
    }
}

/// A timeout policy as recorded on a request's `send`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRecord {
    /// The idle timeout in milliseconds; absent means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Whether valid progress restarts the idle clock.
    #[serde(default)]
    pub reset_on_progress: bool,
    /// The hard maximum in milliseconds; absent means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_ms: Option<u64>,
}

impl From<TimeoutPolicy> for PolicyRecord {
    fn from(p: TimeoutPolicy) -> Self {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        PolicyRecord {
            timeout_ms: p.timeout.map(ms),
            reset_on_progress: p.reset_timeout_on_progress,
            max_total_ms: p.max_total_timeout.map(ms),
        }
    }
}

impl From<PolicyRecord> for TimeoutPolicy {
    fn from(p: PolicyRecord) -> Self {
        TimeoutPolicy {
            timeout: p.timeout_ms.map(Duration::from_millis),
            reset_timeout_on_progress: p.reset_on_progress,
            max_total_timeout: p.max_total_ms.map(Duration::from_millis),
        }
    }
}

impl WireEvent {
    /// A wire event for a typed message.
    pub fn message(transport: Transport, stream: Option<StreamId>, msg: &Message) -> Self {
        // Messages built by the model always encode; a refusal would be a model bug, recorded
        // as raw text so the oracle reports it instead of the run crashing.
        let (msg, raw) = match wire::to_value(msg) {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(format!("<unencodable: {e}>"))),
        };
        WireEvent {
            transport: transport.into(),
            stream: stream.map(|s| s.0),
            msg,
            raw,
            policy: None,
            headers: None,
            event_id: None,
            origin: None,
        }
    }

    /// A wire event for text that did not decode.
    pub fn raw(transport: Transport, stream: Option<StreamId>, text: &[u8]) -> Self {
        let text = String::from_utf8_lossy(text).into_owned();
        // `null` stays text: as a message it would read back as no message at all.
        let msg = crate::wire::json::value_from_str(&text)
            .ok()
            .filter(|v| !v.is_null());
        let raw = if msg.is_some() { None } else { Some(text) };
        WireEvent {
            transport: transport.into(),
            stream: stream.map(|s| s.0),
            msg,
            raw,
            policy: None,
            headers: None,
            event_id: None,
            origin: None,
        }
    }

    /// The message, strictly decoded; `Err` for raw text or an invalid message.
    pub fn decode(&self, opts: &DecodeOptions) -> Result<Message, DecodeError> {
        match (&self.msg, &self.raw) {
            (Some(v), _) => wire::decode_with(v.to_string().as_bytes(), opts),
            (None, Some(r)) => wire::decode_with(r.as_bytes(), opts),
            (None, None) => Err(DecodeError::new(
                wire::Rule::MissingField,
                "msg",
                "neither msg nor raw",
            )),
        }
    }
}

/// A whole trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The events in the order they were observed (non-decreasing `t`).
    pub events: Vec<TraceEvent>,
}

/// A trace line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// The 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for TraceError {}

impl Trace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `declared` as the client's policy of each request it covers that has none
    /// recorded (`check-trace --client-policy`: a trace taken where the client's promise could
    /// not be seen). Both ends' records of a request get it; a policy already recorded stays.
    pub fn declare_client_policies(&mut self, declared: &crate::model::ClientPolicies) {
        for event in &mut self.events {
            let w = match (&mut event.kind, event.side) {
                (EventKind::Send(w), Side::Client) | (EventKind::Recv(w), Side::Server) => w,
                _ => continue,
            };
            if w.policy.is_some() {
                continue;
            }
            let method = w.msg.as_ref().and_then(|m| {
                m.get("id")?;
                m.get("method")?.as_str().map(str::to_owned)
            });
            if let Some(policy) = method.and_then(|m| declared.for_method(&m)) {
                w.policy = Some(policy.into());
            }
        }
    }

    /// Appends an event.
    pub fn push(&mut self, t: Time, side: Side, kind: EventKind) {
        self.events.push(TraceEvent {
            t: t.as_millis(),
            side,
            hop: None,
            conn: None,
            kind,
        });
    }

    /// Reads JSON Lines; blank lines are skipped. Events must not go back in time. The frame
    /// of a trace written as it happens ([`frame`]) is read and checked; a line cut in the
    /// middle is an error, as any unreadable line ([`Trace::read_jsonl`] reads up to it).
    pub fn from_jsonl(text: &str) -> Result<Trace, TraceError> {
        let reading = Trace::read_jsonl(text)?;
        match reading.cut {
            Some(frame::Cut::MidLine { line, .. }) => Err(TraceError {
                line,
                message: "the line is cut: no line feed, and it does not read as an event".into(),
            }),
            _ => Ok(reading.trace),
        }
    }

    /// Reads JSON Lines as [`Trace::from_jsonl`] does, and also a trace that was cut: a last
    /// line without its line feed that does not read (a write cut short) is left out, and a
    /// trace that began and did not end is read whole; [`frame::Reading::cut`] names the cut.
    pub fn read_jsonl(text: &str) -> Result<frame::Reading, TraceError> {
        let mut reading = frame::Reading {
            trace: Trace::new(),
            begin: None,
            end: None,
            cut: None,
        };
        let lines: Vec<&str> = text.lines().collect();
        let last = lines.iter().rposition(|l| !l.trim().is_empty());
        let unterminated = !text.ends_with('\n');
        for (i, line) in lines.iter().enumerate() {
            let line_no = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let last_line = Some(i) == last;
            if let Some(read) = frame::frame(line) {
                match read {
                    Ok(f) => {
                        let events = reading.trace.events.len();
                        frame::place(f, line_no, events, &mut reading, last_line)?;
                        continue;
                    }
                    Err(_) if last_line && unterminated && !is_json(line) => {
                        reading.cut = Some(frame::Cut::MidLine {
                            line: line_no,
                            bytes: line.len(),
                        });
                        break;
                    }
                    Err(message) => {
                        return Err(TraceError {
                            line: line_no,
                            message,
                        })
                    }
                }
            }
            let event = match Self::read_event(line, line_no, reading.trace.events.last()) {
                Ok(e) => e,
                Err(_) if last_line && unterminated && !is_json(line) => {
                    reading.cut = Some(frame::Cut::MidLine {
                        line: line_no,
                        bytes: line.len(),
                    });
                    break;
                }
                Err(e) => return Err(e),
            };
            reading.trace.events.push(event);
        }
        if reading.cut.is_none() && reading.end.is_none() {
            if let Some(begin) = &reading.begin {
                reading.cut = Some(frame::Cut::NoEnd {
                    by: begin.by.clone(),
                    after_line: last.map_or(0, |l| l + 1),
                });
            }
        }
        Ok(reading)
    }

    /// Reads one event line, checked against the event before it.
    fn read_event(
        line: &str,
        line_no: usize,
        prev: Option<&TraceEvent>,
    ) -> Result<TraceEvent, TraceError> {
        let event: TraceEvent = serde_json::from_str(line).map_err(|e| TraceError {
            line: line_no,
            message: e.to_string(),
        })?;
        if let EventKind::Send(w) | EventKind::Recv(w) = &event.kind {
            if w.msg.is_none() && w.raw.is_none() {
                return Err(TraceError {
                    line: line_no,
                    message: "a send or recv needs msg or raw".into(),
                });
            }
        }
        if let Some(conn) = event.conn {
            if event.hop != Some(Hop::Back) || conn == 0 {
                return Err(TraceError {
                    line: line_no,
                    message: format!(
                        "conn {conn}: a connection number (from 1) belongs to an event of \
                         the upstream hop (\"hop\":\"back\") only"
                    ),
                });
            }
        }
        if let Some(prev) = prev {
            if event.t < prev.t {
                return Err(TraceError {
                    line: line_no,
                    message: format!("t goes back in time ({} after {})", event.t, prev.t),
                });
            }
        }
        Ok(event)
    }

    /// Writes JSON Lines, one event per line, each ending in LF.
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for e in &self.events {
            out.push_str(&serde_json::to_string(e).expect("trace events serialize"));
            out.push('\n');
        }
        out
    }

    /// A 64-bit FNV-1a digest of the JSON Lines form: equal digests mean byte-identical traces.
    pub fn digest(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.to_jsonl().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }

    /// The trace with each JSON-RPC batch (a send or recv whose message is a non-empty JSON
    /// array, as 2025-03-26 allowed) split into one event per member, at the same time, side,
    /// transport and stream, and for each new event the index of the event it came from; `None`
    /// when there is no batch. The oracle judges the members one by one, as their receiver
    /// reads them, and reports the original events. An empty batch stays whole: it is no
    /// message, and the decoder says so.
    pub fn unbatched(&self) -> Option<(Trace, Vec<usize>)> {
        let is_batch = |e: &TraceEvent| {
            matches!(&e.kind, EventKind::Send(w) | EventKind::Recv(w)
                if matches!(&w.msg, Some(Value::Array(a)) if !a.is_empty()))
        };
        if !self.events.iter().any(is_batch) {
            return None;
        }
        let mut events = Vec::with_capacity(self.events.len());
        let mut origin = Vec::with_capacity(self.events.len());
        for (i, e) in self.events.iter().enumerate() {
            let (EventKind::Send(w) | EventKind::Recv(w)) = &e.kind else {
                events.push(e.clone());
                origin.push(i);
                continue;
            };
            let Some(Value::Array(members)) = w.msg.as_ref().filter(|_| is_batch(e)) else {
                events.push(e.clone());
                origin.push(i);
                continue;
            };
            for (k, m) in members.iter().enumerate() {
                // One SSE event carried the whole batch: its id is the first member's only,
                // or the rest would read as replays of it.
                let member = WireEvent {
                    transport: w.transport,
                    stream: w.stream,
                    msg: Some(m.clone()),
                    raw: None,
                    policy: w.policy,
                    headers: w.headers.clone(),
                    event_id: w.event_id.clone().filter(|_| k == 0),
                    origin: w.origin,
                };
                let kind = match &e.kind {
                    EventKind::Send(_) => EventKind::Send(member),
                    _ => EventKind::Recv(member),
                };
                events.push(TraceEvent {
                    t: e.t,
                    side: e.side,
                    hop: e.hop,
                    conn: e.conn,
                    kind,
                });
                origin.push(i);
            }
        }
        Some((Trace { events }, origin))
    }

    /// Whether some event names its hop: a two-hop trace.
    pub fn is_two_hop(&self) -> bool {
        self.events.iter().any(|e| e.hop.is_some())
    }

    /// The events of one hop of a two-hop trace, without their `hop`, as a one-hop trace,
    /// with each event's index in `self`. An event without a hop belongs to the front (the
    /// client's own notes, such as its faults).
    pub fn hop(&self, hop: Hop) -> (Trace, Vec<usize>) {
        let mut events = Vec::new();
        let mut origin = Vec::new();
        for (i, e) in self.events.iter().enumerate() {
            if e.hop.unwrap_or(Hop::Front) == hop {
                events.push(TraceEvent {
                    hop: None,
                    ..e.clone()
                });
                origin.push(i);
            }
        }
        (Trace { events }, origin)
    }

    /// One two-hop trace from the client's recording of the front hop and the server's of the
    /// back, both on one clock: ordered by time, each hop's own order kept, and at equal times
    /// a `send` before a `recv` of the other hop (a message crosses the intermediary forward in
    /// time, never back).
    pub fn two_hop(front: &Trace, back: &Trace) -> Trace {
        let tag = |e: &TraceEvent, hop| TraceEvent {
            hop: Some(hop),
            ..e.clone()
        };
        let is_recv = |e: &TraceEvent| matches!(e.kind, EventKind::Recv(_));
        let (mut f, mut b) = (
            front.events.iter().peekable(),
            back.events.iter().peekable(),
        );
        let mut events = Vec::with_capacity(front.events.len() + back.events.len());
        loop {
            let take_front = match (f.peek(), b.peek()) {
                (Some(x), Some(y)) => x.t < y.t || (x.t == y.t && (!is_recv(x) || is_recv(y))),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            match take_front {
                true => events.push(tag(f.next().expect("peeked"), Hop::Front)),
                false => events.push(tag(b.next().expect("peeked"), Hop::Back)),
            }
        }
        Trace { events }
    }

    /// The time of the last event.
    pub fn end(&self) -> u64 {
        self.events.last().map_or(0, |e| e.t)
    }
}

fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = f64::deserialize(d)?;
    if (0.0..1.8e19).contains(&v) {
        Ok(v as u64)
    } else {
        Err(de::Error::custom(format!(
            "t must be a non-negative number of milliseconds, found {v}"
        )))
    }
}

/// Serde for request ids in traces: a string or an integer, as on the wire.
/// Whether `line` is JSON at all (a line cut in the middle is not).
fn is_json(line: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(line).is_ok()
}

mod request_id {
    use super::*;

    pub fn serialize<S: Serializer>(id: &RequestId, s: S) -> Result<S::Ok, S::Error> {
        id.to_json().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RequestId, D::Error> {
        match de::DeserializeSeed::deserialize(crate::wire::json::ValueSeed, d)? {
            Value::String(s) => Ok(RequestId::String(s)),
            Value::Number(n) if n.is_i64() => Ok(RequestId::Number(n.as_i64().expect("checked"))),
            other => Err(de::Error::custom(format!(
                "request must be a string or an integer, found {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: u64, side: &str, kind: &str) -> String {
        let msg =
            r#""transport":"stdio","msg":{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        format!(r#"{{"t":{t},"side":"{side}","kind":"{kind}",{msg}}}"#)
    }

    fn trace(lines: &[String]) -> Trace {
        Trace::from_jsonl(&lines.join("\n")).expect("valid")
    }

    #[test]
    fn two_hop_keeps_each_hops_order_and_puts_a_send_before_the_other_hops_recv() {
        let front = trace(&[line(5, "client", "send"), line(9, "client", "recv")]);
        let back = trace(&[line(5, "server", "recv"), line(9, "server", "send")]);
        let both = Trace::two_hop(&front, &back);
        let order: Vec<(u64, Option<Hop>, bool)> = both
            .events
            .iter()
            .map(|e| (e.t, e.hop, matches!(e.kind, EventKind::Send(_))))
            .collect();
        assert_eq!(
            order,
            [
                (5, Some(Hop::Front), true),
                (5, Some(Hop::Back), false),
                (9, Some(Hop::Back), true),
                (9, Some(Hop::Front), false),
            ]
        );
        assert!(both.is_two_hop() && !front.is_two_hop());
        let text = both.to_jsonl();
        assert!(text.starts_with(r#"{"t":5,"side":"client","hop":"front","kind":"send""#));
        assert_eq!(Trace::from_jsonl(&text).expect("reads back"), both);
        let (f, origin) = both.hop(Hop::Front);
        assert_eq!((f, origin), (front.clone(), vec![0, 3]));
        // A one-hop trace is written as before: no `hop` member.
        assert!(!front.to_jsonl().contains("hop"));
    }

    #[test]
    fn an_unknown_hop_is_a_typed_error_naming_it() {
        let bad = r#"{"t":0,"side":"client","hop":"middle","kind":"comment"}"#;
        let e = Trace::from_jsonl(bad).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("middle"), "{e}");
    }
}
