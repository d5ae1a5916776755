//! A recorded session read as a script of both peers: for each call the client made, when it
//! made it, which answer it followed and when it cancelled; and what the server sent for it,
//! each message with its offset from its cause (the request's receipt, the call's previous
//! message, or the cancel's receipt). The recorded server played back to a new client, and the
//! recorded client's requests sent again to a new server, both start from this reading.
//!
//! Offsets are kept from causes, not from the start of the session, because a new run's
//! clock is its own: a progress notification recorded 400 ms after the previous one goes out
//! 400 ms after the previous one goes out in the new run, whenever the new client's request
//! arrived. The server's own view is used when the recording has it (`record`, `serve`), the
//! client's otherwise (`probe`): from the client's side the offsets carry the link's jitter.
//!
//! [`Matcher`] pairs a new request with a recorded call: by method and params without `_meta`
//! (repeats of an identical request in recorded order), strictly (the `_meta` too, less its
//! progress token and protocol version), or by order. A miss names the closest recorded call
//! and the JSON pointer where they first differ.

use serde_json::{Map, Value};

use crate::model::TimeoutPolicy;
use crate::oracle::index::{Index, Req};
use crate::oracle::{self, OracleConfig};
use crate::trace::{Hop, Side, Trace};
use crate::wire::{Era, ProgressToken, RequestId};

/// The lifecycle's requests: the server answers them itself; they are no recorded calls.
pub const LIFECYCLE: [&str; 3] = ["initialize", "ping", "server/discover"];

/// What a message the server sent is timed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The server's receipt of the request.
    Receipt,
    /// The call's previous message.
    Previous,
    /// The server's receipt of the cancel (the first message after it).
    Cancel,
}

/// One message the server sent for a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Emission {
    /// The message as recorded.
    pub msg: Value,
    /// Its line in the recording (1-based).
    pub line: usize,
    /// What it is timed from, and how long after, in ms.
    pub cause: Cause,
    /// The offset from its cause.
    pub offset_ms: u64,
    /// It is the call's final answer (a result or an error with its id).
    pub is_answer: bool,
}

/// One call of the recorded session.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    /// Its method.
    pub method: String,
    /// Its params without `_meta`.
    pub params: Map<String, Value>,
    /// Its `_meta`, less its progress token and protocol version (strict matching).
    pub meta: Map<String, Value>,
    /// The line of its request in the recording (1-based).
    pub line: usize,
    /// Its recorded id and progress token (messages naming them name the new ones in a
    /// playback).
    pub id: Option<RequestId>,
    /// Its recorded progress token.
    pub token: Option<ProgressToken>,
    /// When the client made it, in ms after the session's first call.
    pub start_ms: u64,
    /// The call whose answer it followed (the latest answer the client had read before it),
    /// and how long after that answer, in ms.
    pub after: Option<(usize, u64)>,
    /// When the client cancelled it, in ms after its start.
    pub cancel_after_ms: Option<u64>,
    /// The timeout policy the client recorded for it.
    pub policy: Option<TimeoutPolicy>,
    /// What the server sent for it, in order.
    pub server: Vec<Emission>,
    /// How many of [`RecordedCall::server`] went out before the server read the cancel (all
    /// of them when the call was not cancelled).
    pub before_cancel: usize,
}

impl RecordedCall {
    /// Whether the recording holds the call's final answer.
    pub fn answered(&self) -> bool {
        self.server.iter().any(|e| e.is_answer)
    }
}

/// A recorded session's calls, in the order the client made them.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// The era the session spoke.
    pub era: Era,
    /// The calls.
    pub calls: Vec<RecordedCall>,
    /// The server's side was recorded (its offsets are its own).
    pub server_side: bool,
}

/// Why a trace is no recording to play.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordingError {
    /// `hop` was asked of a one-hop trace, or a two-hop trace was given without one.
    Hop(String),
    /// The session made no call to play.
    NoCalls,
}

impl std::fmt::Display for RecordingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordingError::Hop(why) => f.write_str(why),
            RecordingError::NoCalls => f.write_str(
                "the recording holds no call (only the lifecycle's initialize, ping or \
                 server/discover, or nothing)",
            ),
        }
    }
}

impl std::error::Error for RecordingError {}

impl Recording {
    /// Reads `trace` (one hop of it, `hop`, when it has two) as a recording.
    pub fn read(trace: &Trace, hop: Option<Hop>) -> Result<Recording, RecordingError> {
        let one;
        let trace = match (trace.is_two_hop(), hop) {
            (true, Some(hop)) => {
                one = trace.hop(hop).0;
                &one
            }
            (true, None) => {
                return Err(RecordingError::Hop(
                    "a two-hop recording: name the hop to play (front or back)".into(),
                ))
            }
            (false, Some(_)) => {
                return Err(RecordingError::Hop(
                    "a one-hop recording has no hop to choose".into(),
                ))
            }
            (false, None) => trace,
        };
        let recording = oracle::with_index(trace, &OracleConfig::default(), |ix, _| read(ix));
        match recording.calls.is_empty() {
            true => Err(RecordingError::NoCalls),
            false => Ok(recording),
        }
    }
}

fn read(ix: &Index<'_>) -> Recording {
    let server_side = ix.has(Side::Server);
    let client: Vec<&Req> = ix
        .requests
        .iter()
        .filter(|r| ix.by_client(r) && !LIFECYCLE.contains(&r.method.as_str()))
        .collect();
    let first = client.first().map_or(0, |r| ix.t(r.created));
    // When the client read each call's answer.
    let answered_at: Vec<Option<u64>> = client
        .iter()
        .map(|r| {
            r.client_response
                .or_else(|| r.responses.first().copied())
                .map(|i| ix.t(i))
        })
        .collect();
    let calls = client
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let start = ix.t(r.client_send.unwrap_or(r.created));
            let after = (0..k)
                .filter_map(|j| answered_at[j].filter(|&t| t <= start).map(|t| (j, t)))
                .max_by_key(|&(j, t)| (t, j))
                .map(|(j, t)| (j, start - t));
            call(ix, r, start.saturating_sub(first), after)
        })
        .collect();
    Recording {
        era: ix.era,
        calls,
        server_side,
    }
}

fn call(ix: &Index<'_>, r: &Req, start_ms: u64, after: Option<(usize, u64)>) -> RecordedCall {
    // The params as written: the decoded request keeps its `_meta` apart.
    let raw = ix.wire(r.created).and_then(|w| w.msg.as_ref());
    let (params, meta) = match raw.and_then(|m| m.get("params")) {
        Some(Value::Object(p)) => {
            let mut params = p.clone();
            let meta = match params.remove("_meta") {
                Some(Value::Object(m)) => strict_meta(m),
                _ => Map::new(),
            };
            (params, meta)
        }
        _ => (Map::new(), Map::new()),
    };
    let receipt = r.server_recv.unwrap_or(r.created);
    let cancel = r.server_cancel_seen.or(r.client_cancels.first().copied());
    let mut server = Vec::new();
    let mut before_cancel = 0;
    let mut previous = receipt;
    let mut cancel_passed = false;
    for &e in &r.emissions {
        let Some(msg) = ix.wire(e).and_then(|w| w.msg.clone()) else {
            continue;
        };
        let cause = match cancel {
            Some(c) if e > c && !cancel_passed => {
                cancel_passed = true;
                previous = c;
                Cause::Cancel
            }
            _ if e == r.emissions[0] || server.is_empty() => Cause::Receipt,
            _ => Cause::Previous,
        };
        if !cancel_passed {
            before_cancel += 1;
        }
        let is_answer = r.responses.contains(&e);
        server.push(Emission {
            msg,
            line: e + 1,
            cause,
            offset_ms: ix.t(e).saturating_sub(ix.t(previous)),
            is_answer,
        });
        previous = e;
    }
    let start = ix.t(r.client_send.unwrap_or(r.created));
    RecordedCall {
        method: r.method.clone(),
        params,
        meta,
        line: r.created + 1,
        id: r.id.clone(),
        token: r.token.clone(),
        start_ms,
        after,
        cancel_after_ms: r
            .client_cancels
            .first()
            .map(|&c| ix.t(c).saturating_sub(start)),
        policy: r.policy,
        server,
        before_cancel,
    }
}

/// The `_meta` members strict matching compares: all but the progress token and the protocol
/// version (a new client has its own).
fn strict_meta(mut meta: Map<String, Value>) -> Map<String, Value> {
    meta.remove("progressToken");
    meta.remove("io.modelcontextprotocol/protocolVersion");
    meta
}

/// How a new request finds its recorded call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchMode {
    /// Method and params without `_meta`; identical requests take identical recorded calls
    /// in their recorded order.
    Params,
    /// As `Params`, and the `_meta` too, less its progress token and protocol version.
    Strict,
    /// The `k`-th request takes the `k`-th recorded call, if the method agrees.
    Order,
}

/// A request the recording does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    /// The closest recorded call of the same method (its index), if any.
    pub closest: Option<usize>,
    /// Where the request first differs from it (a JSON pointer into the params, `_meta`
    /// under `/_meta`), or why none is close.
    pub differs_at: String,
}

impl std::fmt::Display for Miss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.closest {
            Some(k) => write!(
                f,
                "no recorded call matches; the closest is recorded call {}, which differs at {}",
                k + 1,
                self.differs_at
            ),
            None => write!(f, "no recorded call matches: {}", self.differs_at),
        }
    }
}

/// Pairs new requests with recorded calls, each recorded call used once.
#[derive(Debug, Clone)]
pub struct Matcher {
    mode: MatchMode,
    used: Vec<bool>,
    /// Requests seen so far (order matching).
    seen: usize,
}

impl Matcher {
    /// A matcher over `recording`'s calls.
    pub fn new(recording: &Recording, mode: MatchMode) -> Self {
        Matcher {
            mode,
            used: vec![false; recording.calls.len()],
            seen: 0,
        }
    }

    /// The recorded call for a request of `method` with `params` (its `_meta` among them, as
    /// on the wire), taken; or why there is none.
    pub fn take(
        &mut self,
        recording: &Recording,
        method: &str,
        params: &Map<String, Value>,
    ) -> Result<usize, Miss> {
        let mut params = params.clone();
        let meta = match params.remove("_meta") {
            Some(Value::Object(m)) => strict_meta(m),
            _ => Map::new(),
        };
        let k = self.seen;
        self.seen += 1;
        let calls = &recording.calls;
        let found = match self.mode {
            MatchMode::Order => calls
                .get(k)
                .filter(|c| c.method == method && !self.used[k])
                .map(|_| k),
            MatchMode::Params | MatchMode::Strict => (0..calls.len()).find(|&j| {
                let c = &calls[j];
                !self.used[j]
                    && c.method == method
                    && c.params == params
                    && (self.mode == MatchMode::Params || c.meta == meta)
            }),
        };
        if let Some(j) = found {
            self.used[j] = true;
            return Ok(j);
        }
        Err(closest(recording, method, &params, &meta, self.mode))
    }
}

/// The recorded call closest to a request that matched none: of the same method, the one whose
/// params (and `_meta`, strictly) differ at the fewest places; where they first differ.
fn closest(
    recording: &Recording,
    method: &str,
    params: &Map<String, Value>,
    meta: &Map<String, Value>,
    mode: MatchMode,
) -> Miss {
    let with_meta = |p: &Map<String, Value>, m: &Map<String, Value>| {
        let mut all = p.clone();
        if mode == MatchMode::Strict {
            all.insert("_meta".into(), Value::Object(m.clone()));
        }
        Value::Object(all)
    };
    let wanted = with_meta(params, meta);
    let best = recording
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.method == method)
        .map(|(k, c)| {
            let mut at = Vec::new();
            differences(
                &with_meta(&c.params, &c.meta),
                &wanted,
                String::new(),
                &mut at,
            );
            (at.len(), k, at)
        })
        .min_by_key(|(n, k, _)| (*n, *k));
    match best {
        Some((0, k, _)) => Miss {
            closest: Some(k),
            differs_at: "nowhere: every recorded call like it was used already".into(),
        },
        Some((_, k, at)) => Miss {
            closest: Some(k),
            differs_at: at.into_iter().next().unwrap_or_default(),
        },
        None => Miss {
            closest: None,
            differs_at: format!("the recording has no {method} request"),
        },
    }
}

/// The JSON pointers at which `a` and `b` differ, in document order.
fn differences(a: &Value, b: &Value, at: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => differences(p, q, here, out),
                    _ => out.push(here),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (k, (p, q)) in x.iter().zip(y).enumerate() {
                differences(p, q, format!("{at}/{k}"), out);
            }
        }
        _ if a == b => {}
        _ => out.push(if at.is_empty() { "/".into() } else { at }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(name: &str) -> Trace {
        let path = format!("{}/tests/traces/{name}", env!("CARGO_MANIFEST_DIR"));
        Trace::from_jsonl(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn a_recorded_answer_after_the_cancel_is_timed_from_the_cancel() {
        let r = Recording::read(&trace("response-after-cancel-violates.jsonl"), None).unwrap();
        assert!(r.server_side);
        let [call] = &r.calls[..] else {
            panic!("one call: {r:?}")
        };
        assert_eq!(call.method, "tools/call");
        assert_eq!(call.cancel_after_ms, Some(100));
        assert_eq!(call.before_cancel, 0, "{call:?}");
        let [answer] = &call.server[..] else {
            panic!("{call:?}")
        };
        // Read at 101, answered at 150.
        assert_eq!((answer.cause, answer.offset_ms), (Cause::Cancel, 49));
        assert!(answer.is_answer && call.answered());
        assert_eq!(answer.line, 6);
    }

    #[test]
    fn a_request_matches_by_params_without_meta_and_a_miss_names_where_it_differs() {
        let r = Recording::read(&trace("response-after-cancel-violates.jsonl"), None).unwrap();
        let params = |steps: u64, token: &str| -> Map<String, Value> {
            serde_json::from_value(serde_json::json!({
                "name": "slow_op", "arguments": {"steps": steps},
                "_meta": {"progressToken": token}
            }))
            .unwrap()
        };
        let mut m = Matcher::new(&r, MatchMode::Params);
        assert_eq!(m.take(&r, "tools/call", &params(3, "mine")), Ok(0));
        let again = m.take(&r, "tools/call", &params(3, "mine")).unwrap_err();
        assert_eq!(again.closest, Some(0));
        assert!(again.differs_at.starts_with("nowhere"), "{again:?}");
        let mut m = Matcher::new(&r, MatchMode::Params);
        let miss = m.take(&r, "tools/call", &params(4, "mine")).unwrap_err();
        assert_eq!(
            (miss.closest, miss.differs_at.as_str()),
            (Some(0), "/arguments/steps")
        );
        let other = m.take(&r, "tools/list", &Map::new()).unwrap_err();
        assert_eq!(other.closest, None);
        // Strictly, the token does not count, the rest of the _meta does.
        let mut m = Matcher::new(&r, MatchMode::Strict);
        let miss = m.take(&r, "tools/call", &params(3, "mine")).unwrap_err();
        assert!(miss.differs_at.starts_with("/_meta/"), "{miss:?}");
    }

    #[test]
    fn a_two_hop_recording_is_played_one_hop_at_a_time() {
        let t = trace("cancel-forwarded-violates.jsonl");
        assert!(matches!(
            Recording::read(&t, None),
            Err(RecordingError::Hop(_))
        ));
        let back = Recording::read(&t, Some(Hop::Back)).unwrap();
        assert_eq!(
            back.calls[0].server.len(),
            4,
            "three progress and the answer"
        );
        assert!(back.calls[0]
            .server
            .iter()
            .all(|e| e.cause != Cause::Cancel));
        let front = Recording::read(&t, Some(Hop::Front)).unwrap();
        assert_eq!(front.calls[0].cancel_after_ms, Some(490));
        let one = trace("response-after-cancel-passes.jsonl");
        assert!(matches!(
            Recording::read(&one, Some(Hop::Front)),
            Err(RecordingError::Hop(_))
        ));
    }
}
