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
//! The script's data and the matching of new requests to its calls ([`Matcher`]) are the
//! model's ([`crate::model::recorded`]), which plays it; this module reads it from a trace.

use serde_json::{Map, Value};

use crate::model::recorded::strict_meta;
pub use crate::model::recorded::{
    Cause, Emission, MatchMode, Matcher, Miss, RecordedCall, Recording, LIFECYCLE,
};
use crate::oracle::index::{Index, Req};
use crate::oracle::{self, OracleConfig};
use std::borrow::Cow;

use crate::trace::{Hop, Side, Trace};

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

/// Reads `trace` (one hop of it, `hop`, when it has two) as a recording.
pub fn read(trace: &Trace, hop: Option<Hop>) -> Result<Recording, RecordingError> {
    let trace = one_hop(trace, hop)?;
    let recording = oracle::with_index(&trace, &OracleConfig::default(), |ix, _| script(ix));
    match recording.calls.is_empty() {
        true => Err(RecordingError::NoCalls),
        false => Ok(recording),
    }
}

/// The hop `hop` of `trace`, or the trace itself when it has one.
fn one_hop(trace: &Trace, hop: Option<Hop>) -> Result<Cow<'_, Trace>, RecordingError> {
    match (trace.is_two_hop(), hop) {
        (true, Some(hop)) => Ok(Cow::Owned(trace.hop(hop).0)),
        (true, None) => Err(RecordingError::Hop(
            "a two-hop recording: name the hop to play (front or back)".into(),
        )),
        (false, Some(_)) => Err(RecordingError::Hop(
            "a one-hop recording has no hop to choose".into(),
        )),
        (false, None) => Ok(Cow::Borrowed(trace)),
    }
}

/// Why a finding of the recorded client is not repeated when its requests are sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unrepeated {
    /// The client's reaction to what it read (an answer taken as fatal, an outcome told
    /// twice): a re-send meets another server, which may never give it the same cause.
    Reaction,
    /// Something the client sent (an id, a token, a header, its timer's cancel): a re-send
    /// goes out through the reference client, which sends it correctly.
    Sent,
}

/// The client's rules a re-send cannot repeat, and why. The rules not listed judge the
/// server (or both peers' framing) and are what a re-send tests.
pub const CLIENT_RULES: &[(&str, Unrepeated)] = &[
    ("race-not-graceful", Unrepeated::Reaction),
    ("late-response-delivered", Unrepeated::Reaction),
    ("single-outcome", Unrepeated::Reaction),
    ("listen-reopened", Unrepeated::Reaction),
    ("resume-broken-stream", Unrepeated::Reaction),
    ("retry-honoured", Unrepeated::Reaction),
    ("task-poll-interval", Unrepeated::Reaction),
    ("input-required-retry", Unrepeated::Reaction),
    ("progress-token-type", Unrepeated::Sent),
    ("progress-token-unique", Unrepeated::Sent),
    ("progress-token-reuse", Unrepeated::Sent),
    ("request-id-unique", Unrepeated::Sent),
    ("request-id-reuse", Unrepeated::Sent),
    ("cancel-unknown-request", Unrepeated::Sent),
    ("cancel-on-timeout", Unrepeated::Sent),
    ("cancel-over-http", Unrepeated::Sent),
    ("cancel-targets-task", Unrepeated::Sent),
    ("timeout-maximum", Unrepeated::Sent),
    ("timeout-deadline", Unrepeated::Sent),
    ("declared-deadline", Unrepeated::Sent),
    ("discover-timeout", Unrepeated::Sent),
    ("reset-needs-token", Unrepeated::Sent),
    ("http-request-headers", Unrepeated::Sent),
    ("request-before-initialized", Unrepeated::Sent),
    ("initialize-cancelled", Unrepeated::Sent),
    ("protocol-version-header", Unrepeated::Sent),
    ("session-id-sent", Unrepeated::Sent),
];

/// A finding of the recorded client that sending its requests again does not repeat.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NotRepeated {
    /// The rule it broke.
    pub rule: &'static str,
    /// How many times.
    pub count: usize,
    /// Why a re-send does not repeat it.
    pub why: Unrepeated,
}

/// The recorded client's own findings in `trace` (its hop `hop`), which `probe --from` cannot
/// send again: reported as not re-playable rather than passed.
pub fn unrepeated_findings(
    trace: &Trace,
    hop: Option<Hop>,
) -> Result<Vec<NotRepeated>, RecordingError> {
    let trace = one_hop(trace, hop)?;
    let verdict = oracle::check(&trace, &OracleConfig::default());
    let mut found: Vec<NotRepeated> = Vec::new();
    for v in &verdict.violations {
        let Some(&(rule, why)) = CLIENT_RULES.iter().find(|(r, _)| *r == v.rule) else {
            continue;
        };
        match found.iter_mut().find(|f| f.rule == rule) {
            Some(f) => f.count += 1,
            None => found.push(NotRepeated {
                rule,
                count: 1,
                why,
            }),
        }
    }
    Ok(found)
}

fn script(ix: &Index<'_>) -> Recording {
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
    let own = own_requests(ix, &client);
    let calls = client
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let start = ix.t(r.client_send.unwrap_or(r.created));
            let after = (0..k)
                .filter_map(|j| answered_at[j].filter(|&t| t <= start).map(|t| (j, t)))
                .max_by_key(|&(j, t)| (t, j))
                .map(|(j, t)| (j, start - t));
            call(ix, r, &own[k], start.saturating_sub(first), after)
        })
        .collect();
    // The recorded server's introduction, which a playback repeats.
    let introduction = |method: &str| {
        ix.requests
            .iter()
            .filter(|r| ix.by_client(r) && r.method == method)
            .find_map(|r| {
                let answer = ix.wire(*r.responses.first()?)?.msg.as_ref()?;
                answer.get("result")?.as_object().cloned()
            })
    };
    Recording {
        era: ix.era,
        calls,
        server_side,
        initialize: introduction("initialize"),
        discover: introduction("server/discover"),
    }
}

/// The server's own requests (legacy sampling, roots, elicitation) each call made, by call:
/// on HTTP those on the call's stream; on stdio, where nothing ties them to a call, the call
/// the server read last among those it had not answered yet.
fn own_requests(ix: &Index<'_>, calls: &[&Req]) -> Vec<Vec<usize>> {
    let mut own = vec![Vec::new(); calls.len()];
    let server_side = ix.has(Side::Server);
    for (i, e) in ix.trace.events.iter().enumerate() {
        let view = match server_side {
            true => (Side::Server, true),
            false => (Side::Client, false),
        };
        let sending = matches!(e.kind, crate::trace::EventKind::Send(_));
        if (e.side, sending) != view {
            continue;
        }
        let Some(w) = ix.wire(i) else { continue };
        let is_request = w
            .msg
            .as_ref()
            .is_some_and(|m| m.get("method").is_some() && m.get("id").is_some());
        if !is_request {
            continue;
        }
        let running = |r: &&Req| {
            let read = r.server_recv.unwrap_or(r.created);
            read < i && r.responses.first().is_none_or(|&a| a > i)
        };
        let by_stream = w
            .stream
            .and_then(|s| calls.iter().position(|r| r.stream == Some(s)));
        let latest = || {
            (0..calls.len())
                .filter(|&k| running(&calls[k]))
                .max_by_key(|&k| calls[k].server_recv.unwrap_or(calls[k].created))
        };
        if let Some(k) = by_stream.or_else(latest) {
            own[k].push(i);
        }
    }
    own
}

fn call(
    ix: &Index<'_>,
    r: &Req,
    own: &[usize],
    start_ms: u64,
    after: Option<(usize, u64)>,
) -> RecordedCall {
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
    // What the server's messages after a cancel are timed from: its own receipt of the
    // cancel when its side was recorded (none when it had answered before the cancel came:
    // what it sent crossed the cancel and goes out whether or not the new client cancels),
    // else the client's cancel.
    let cancel = match ix.has(Side::Server) {
        true => r.server_cancel_seen,
        false => r.client_cancels.first().copied(),
    };
    let mut server = Vec::new();
    let mut before_cancel = 0;
    let mut previous = receipt;
    let mut cancel_passed = false;
    let mut emitted: Vec<usize> = r.emissions.iter().chain(own).copied().collect();
    emitted.sort_unstable();
    emitted.dedup();
    for &e in &emitted {
        let Some(msg) = ix.wire(e).and_then(|w| w.msg.clone()) else {
            continue;
        };
        let cause = match cancel {
            Some(c) if e > c && !cancel_passed => {
                cancel_passed = true;
                previous = c;
                Cause::Cancel
            }
            _ if server.is_empty() => Cause::Receipt,
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
        cancel_seen_ms: cancel.map(|c| ix.t(c).saturating_sub(ix.t(receipt))),
        policy: r.policy,
        server,
        before_cancel,
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
        let r = read(&trace("response-after-cancel-violates.jsonl"), None).unwrap();
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
        let r = read(&trace("response-after-cancel-violates.jsonl"), None).unwrap();
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
    fn the_recorded_clients_own_findings_are_named_as_not_repeated() {
        for (rule, _) in CLIENT_RULES {
            assert!(crate::oracle::rule_info(rule).is_some(), "{rule}");
        }
        let of = |name: &str| unrepeated_findings(&trace(name), None).unwrap();
        let race = of("race-not-graceful-violates.jsonl");
        assert_eq!(race.len(), 1, "{race:?}");
        assert_eq!(
            (race[0].rule, race[0].why),
            ("race-not-graceful", Unrepeated::Reaction)
        );
        let reuse = of("request-id-reuse-violates.jsonl");
        assert_eq!(
            (reuse[0].rule, reuse[0].why),
            ("request-id-reuse", Unrepeated::Sent)
        );
        // The server's bug is what a re-send tests: nothing of the client's to report.
        assert_eq!(of("response-after-cancel-violates.jsonl"), vec![]);
    }

    #[test]
    fn a_two_hop_recording_is_played_one_hop_at_a_time() {
        let t = trace("cancel-forwarded-violates.jsonl");
        assert!(matches!(read(&t, None), Err(RecordingError::Hop(_))));
        let back = read(&t, Some(Hop::Back)).unwrap();
        assert_eq!(
            back.calls[0].server.len(),
            4,
            "three progress and the answer"
        );
        assert!(back.calls[0]
            .server
            .iter()
            .all(|e| e.cause != Cause::Cancel));
        let front = read(&t, Some(Hop::Front)).unwrap();
        assert_eq!(front.calls[0].cancel_after_ms, Some(490));
        let one = trace("response-after-cancel-passes.jsonl");
        assert!(matches!(
            read(&one, Some(Hop::Front)),
            Err(RecordingError::Hop(_))
        ));
    }
}
