//! A recorded session as a script of both peers, and the matching of new requests to its
//! calls: pure data, read from a trace by [`crate::recording`], played back by the reference
//! server ([`crate::model::server::Playback`]).
//!
//! Offsets are kept from causes, not from the start of the session, because a new run's
//! clock is its own: a progress notification recorded 400 ms after the previous one goes out
//! 400 ms after the previous one goes out in the new run, whenever the new client's request
//! arrived.
//!
//! [`Matcher`] pairs a new request with a recorded call: by method and params without `_meta`
//! (repeats of an identical request in recorded order), strictly (the `_meta` too, less its
//! progress token and protocol version), or by order. A miss names the closest recorded call
//! and the JSON pointer where they first differ.

use serde_json::{Map, Value};

use crate::model::TimeoutPolicy;
use crate::wire::{Era, ProgressToken, RequestId};

/// The lifecycle's requests: the server answers them itself; they are no recorded calls.
pub const LIFECYCLE: [&str; 3] = ["initialize", "ping", "server/discover"];

/// Where a message the server wrote came from, when it plays a recording back: marked on its
/// `send` in the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Sent as the recording holds it, from this line of the recording (1-based).
    Recorded {
        /// The line.
        line: usize,
    },
    /// Not in the recording: the server made it up (an answer the recording never saw).
    Extrapolated,
}

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
    /// When the server read that cancel, in ms after it read the request (the client's
    /// cancel when the server's side was not recorded).
    pub cancel_seen_ms: Option<u64>,
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
    /// The recorded server's `initialize` result (legacy era), if the session opened with one.
    pub initialize: Option<Map<String, Value>>,
    /// The recorded server's `server/discover` result (2026-07-28), if the client asked.
    pub discover: Option<Map<String, Value>>,
}

/// The `_meta` members strict matching compares: all but the progress token and the protocol
/// version (a new client has its own).
pub(crate) fn strict_meta(mut meta: Map<String, Value>) -> Map<String, Value> {
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
