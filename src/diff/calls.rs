//! The calls of one run and what each did, read into behaviour classes: what `diff` compares.
//!
//! A call is a request the client made, other than the lifecycle's own (`initialize`, `ping`,
//! `server/discover`): those differ between runs for reasons no user asked about (a liveness
//! ping's timing, a fallback), and their rules are still judged in the verdict delta. Each
//! class is a short text (`cancelled, answered with error 0`), so two runs compare class by
//! class and a report can say what changed in words; timing is kept apart as numbers, compared
//! with a tolerance.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::oracle::index::{Index, Req};
use crate::oracle::Verdict;
use crate::trace::{EventKind, Side};
use crate::wire::Message;

/// The lifecycle's requests, left out of the calls.
const LIFECYCLE: [&str; 3] = ["initialize", "ping", "server/discover"];

/// One behaviour class of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// How the call ended for the client (`result`, `error -32602`, `cancelled`, `timed_out`,
    /// `lost`, `input_required`, or `none` when the trace shows no end).
    Outcome,
    /// Whether the client cancelled it and whether, and how, the server answered the cancel.
    Cancel,
    /// What the server still sent for it after the cancel reached it.
    Tail,
    /// Its progress: none, in order or not, the count of a call that completed, any after
    /// completion.
    Progress,
    /// Its HTTP statuses and who closed its stream.
    Http,
    /// The payload of its final answer, volatile members left out (compared only when asked).
    Payload,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 6] = [
        Class::Outcome,
        Class::Cancel,
        Class::Tail,
        Class::Progress,
        Class::Http,
        Class::Payload,
    ];

    /// Its name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Outcome => "outcome",
            Class::Cancel => "cancel",
            Class::Tail => "tail",
            Class::Progress => "progress",
            Class::Http => "http",
            Class::Payload => "payload",
        }
    }
}

/// One call of a run.
#[derive(Debug, Clone)]
pub struct Call {
    /// Its method.
    pub method: String,
    /// Its tool, for `tools/call`.
    pub tool: Option<String>,
    /// Its params without `_meta` and without the probe's call tag: what a repeat of the call
    /// carries again.
    pub shape: String,
    /// The probe's call tag ([`crate::model::CALL_TAG`]), when the run tagged its calls.
    pub tag: Option<u64>,
    /// When the client made it, in ms (the server's receipt in a server-side trace).
    pub at_ms: u64,
    /// Its behaviour, one text per class (no payload class unless payloads were read).
    pub classes: Vec<(Class, String)>,
    /// From its start to its end for the client (or its answer), in ms.
    pub duration_ms: Option<u64>,
    /// The mean gap between its progress notifications, in ms (two or more).
    pub progress_gap_ms: Option<u64>,
    /// The trace events that tell its story, for a diagram.
    pub story: Vec<Beat>,
}

impl Call {
    /// The text of `class`, if the call has one.
    pub fn class(&self, class: Class) -> Option<&str> {
        self.classes
            .iter()
            .find(|(c, _)| *c == class)
            .map(|(_, v)| v.as_str())
    }

    /// `tools/call slow_op` or the method alone.
    pub fn label(&self) -> String {
        match &self.tool {
            Some(tool) => format!("{} {tool}", self.method),
            None => self.method.clone(),
        }
    }
}

/// What one run shows: its calls in the order they were made, and the methods of the
/// requests the server made of the client.
#[derive(Debug, Clone, Default)]
pub struct RunCalls {
    /// The calls.
    pub calls: Vec<Call>,
    /// The server's own requests, by method, with their counts.
    pub server_requests: Vec<(String, usize)>,
}

/// Reads the calls of the run `ix` indexes; `verdict` is the oracle's over the same events
/// (from the client's side alone, whether a message came after the server read a cancel is
/// its judgement: barriers, the grace window, an answer within the reaction time),
/// `grace_ms` how long after a client's cancel a message may still be in flight, and
/// `payloads` whether answers' payloads are read as a class.
pub(crate) fn read(ix: &Index<'_>, verdict: &Verdict, grace_ms: u64, payloads: bool) -> RunCalls {
    // The events the oracle names as sent after the cancel reached the server.
    let after_cancel: BTreeSet<usize> = verdict
        .violations
        .iter()
        .filter(|v| v.rule == "response-after-cancel")
        .flat_map(|v| v.events.iter().copied())
        .collect();
    let seen = Seen {
        after_cancel,
        grace_ms,
    };
    let mut run = RunCalls::default();
    let mut asked: std::collections::BTreeMap<String, usize> = Default::default();
    for req in &ix.requests {
        if !ix.by_client(req) {
            *asked.entry(req.method.clone()).or_default() += 1;
            continue;
        }
        if LIFECYCLE.contains(&req.method.as_str()) {
            continue;
        }
        run.calls.push(call(ix, req, &seen, payloads));
    }
    run.server_requests = asked.into_iter().collect();
    run
}

/// What tells a message written after the server read a cancel from one in flight.
struct Seen {
    /// Events the oracle found written after the cancel reached the server.
    after_cancel: BTreeSet<usize>,
    /// Without the server's view or the oracle's word: what arrives later than this after
    /// the cancel.
    grace_ms: u64,
}

impl Seen {
    /// Whether `i`, a message of `req` after its cancel `c`, was written after the server read
    /// the cancel.
    fn after(&self, ix: &Index<'_>, req: &Req, c: usize, i: usize) -> bool {
        match req.server_cancel_seen {
            Some(seen) => i > seen,
            None => self.after_cancel.contains(&i) || ix.t(i) > ix.t(c) + self.grace_ms,
        }
    }
}

fn call(ix: &Index<'_>, req: &Req, seen: &Seen, payloads: bool) -> Call {
    let (shape, tag, tool) = match ix.call_shape(req.created) {
        Some((_, params)) => (
            canonical(&Value::Object(params.clone())),
            tag_of(ix, req.created),
            params
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned),
        ),
        None => (String::new(), None, None),
    };
    let start = ix.t(req.created);
    let answer = req.responses.first().copied();
    let cancel = cancel_of(req);
    let mut classes = vec![
        (Class::Outcome, outcome(ix, req)),
        (Class::Cancel, cancel_class(ix, req, cancel, seen)),
        (Class::Tail, tail(ix, req, cancel, seen)),
        (Class::Progress, progress(ix, req)),
        (Class::Http, http(ix, req)),
    ];
    if payloads {
        let payload = answer.and_then(|a| ix.wire(a)?.msg.clone());
        let text = payload.map_or("none".to_owned(), |v| canonical(&without_volatile(&v)));
        classes.push((Class::Payload, text));
    }
    let end = req.client_end().or(answer);
    let gaps = progress_times(ix, req);
    let progress_gap_ms =
        (gaps.len() >= 2).then(|| (gaps[gaps.len() - 1] - gaps[0]) / (gaps.len() as u64 - 1));
    Call {
        method: req.method.clone(),
        tool,
        shape,
        tag,
        at_ms: start,
        classes,
        duration_ms: end.map(|e| ix.t(e).saturating_sub(start)),
        progress_gap_ms,
        story: story(ix, req, start),
    }
}

/// The probe's tag of the request at `i`: `arguments.call`.
fn tag_of(ix: &Index<'_>, i: usize) -> Option<u64> {
    let (_, params) = ix.request_params(i)?;
    params
        .get("arguments")?
        .get(crate::model::CALL_TAG)?
        .as_u64()
}

/// When the cancel happened: the client's cancel, else the server's sight of it.
fn cancel_of(req: &Req) -> Option<usize> {
    req.client_cancels
        .first()
        .copied()
        .or(req.server_cancel_seen)
}

fn outcome(ix: &Index<'_>, req: &Req) -> String {
    if let Some(&o) = req.outcomes.first() {
        if let EventKind::Outcome { outcome, .. } = &ix.trace.events[o].kind {
            return match outcome {
                crate::model::Outcome::Error => answer_kind(ix, req.responses.first().copied()),
                other => other.as_str().to_owned(),
            };
        }
    }
    // Without the application's own word: a call its client cancelled before reading an answer
    // ended as cancelled, whatever came after (a trace of `record` or `serve` has no outcomes).
    let cancelled = req.client_cancels.first().copied();
    let read = req.client_response;
    if cancelled.is_some_and(|c| read.is_none_or(|r| r > c)) {
        return "cancelled".into();
    }
    match req.responses.first() {
        Some(&a) => answer_kind(ix, Some(a)),
        None if cancel_of(req).is_some() => "cancelled".into(),
        None => "none".into(),
    }
}

/// `result`, `input_required`, `error CODE`, or `error` when the answer is not in the trace.
fn answer_kind(ix: &Index<'_>, answer: Option<usize>) -> String {
    match answer.and_then(|a| ix.msg(a)) {
        Some(Message::Error(e)) => format!("error {}", e.error.code),
        Some(Message::Result(r))
            if r.result_type == Some(crate::wire::ResultType::InputRequired) =>
        {
            "input_required".into()
        }
        Some(Message::Result(_)) => "result".into(),
        _ => "error".into(),
    }
}

/// Whether the client cancelled, and what the server did with it: no answer, an answer
/// written after it read the cancel ([`Seen`]), or an answer that crossed it.
fn cancel_class(ix: &Index<'_>, req: &Req, cancel: Option<usize>, seen: &Seen) -> String {
    let Some(c) = cancel else {
        return "not cancelled".into();
    };
    match req.responses.first().copied() {
        None => "cancelled, unanswered".into(),
        Some(a) if a > c && seen.after(ix, req, c, a) => {
            format!("cancelled, answered with {}", answer_kind(ix, Some(a)))
        }
        Some(a) => format!("cancelled, crossed by its {}", answer_kind(ix, Some(a))),
    }
}

/// What the server sent for the call after it read the cancel ([`Seen`]), beyond the answer.
fn tail(ix: &Index<'_>, req: &Req, cancel: Option<usize>, seen: &Seen) -> String {
    let Some(c) = cancel else {
        return "no cancel".into();
    };
    let progress = progress_events(ix, req)
        .into_iter()
        .filter(|&i| i > c && seen.after(ix, req, c, i))
        .count();
    match progress {
        0 => "none".into(),
        _ => "progress after the cancel".into(),
    }
}

/// The progress notifications of the call, in the server's view when the trace has it, else
/// in the client's.
fn progress_events(ix: &Index<'_>, req: &Req) -> Vec<usize> {
    let server: Vec<usize> = req
        .emissions
        .iter()
        .copied()
        .filter(|&i| matches!(ix.msg(i), Some(Message::Progress(_))))
        .collect();
    if !server.is_empty() {
        return server;
    }
    req.client_progress.clone()
}

fn progress_times(ix: &Index<'_>, req: &Req) -> Vec<u64> {
    progress_events(ix, req)
        .into_iter()
        .map(|i| ix.t(i))
        .collect()
}

fn progress(ix: &Index<'_>, req: &Req) -> String {
    let events = progress_events(ix, req);
    // Only a call that ran to its end has a count that means something, or can tell "none"
    // from "in order": a cancel or a timeout cuts it where the clock falls.
    let completed = !req.responses.is_empty() && cancel_of(req).is_none() && req.timeout.is_none();
    if events.is_empty() {
        return if completed { "none" } else { "in order" }.into();
    }
    let values: Vec<f64> = events
        .iter()
        .filter_map(|&i| match ix.msg(i) {
            Some(Message::Progress(p)) => Some(p.progress),
            _ => None,
        })
        .collect();
    let ordered = values.windows(2).all(|w| w[1] > w[0]);
    let mut text = if ordered {
        "in order".to_owned()
    } else {
        "out of order".to_owned()
    };
    if completed {
        text = format!("{} {text}", events.len());
    }
    let answered = req.responses.first().copied();
    if answered.is_some_and(|a| events.iter().any(|&i| i > a)) {
        text.push_str(", some after completion");
    }
    text
}

/// The statuses the call's stream got, and who closed it.
fn http(ix: &Index<'_>, req: &Req) -> String {
    let Some(stream) = req.stream else {
        return "stdio".into();
    };
    let mut statuses = BTreeSet::new();
    for e in &ix.trace.events {
        if let EventKind::Status {
            stream: Some(s),
            status,
            ..
        } = &e.kind
        {
            if *s == stream {
                statuses.insert(*status);
            }
        }
    }
    let closed = req
        .closes
        .first()
        .and_then(|&c| match &ix.trace.events[c].kind {
            EventKind::Close { by, .. } => Some(by.as_str()),
            _ => None,
        });
    let statuses: Vec<String> = statuses.iter().map(u16::to_string).collect();
    let statuses = match statuses.is_empty() {
        true => "no status".to_owned(),
        false => statuses.join("+"),
    };
    match closed {
        Some(by) => format!("{statuses}, closed by the {by}"),
        None => statuses,
    }
}

/// The call's events for a diagram, with their offsets from its start: each message once, as
/// its writer recorded it (as its reader did when the trace lacks the writer's side), and the
/// client's own timeouts and outcomes.
fn story(ix: &Index<'_>, req: &Req, start: u64) -> Vec<Beat> {
    let mut events: Vec<usize> = [req.created]
        .into_iter()
        .chain(req.client_cancels.iter().copied())
        .chain(req.server_cancel_seen)
        .chain(req.emissions.iter().copied())
        .chain(req.client_progress.iter().copied())
        .chain(req.responses.iter().copied())
        .chain(req.client_response)
        .chain(req.closes.iter().copied())
        .chain(req.timeout)
        .chain(req.outcomes.iter().copied())
        .collect();
    events.sort_unstable();
    events.dedup();
    events
        .into_iter()
        .filter_map(|i| {
            let e = &ix.trace.events[i];
            let t = ix.t(i).saturating_sub(start);
            let (from_client, what) = match &e.kind {
                EventKind::Send(_) => (e.side == Side::Client, message(ix, i)),
                EventKind::Recv(_) => {
                    let writer = if e.side == Side::Client {
                        Side::Server
                    } else {
                        Side::Client
                    };
                    if ix.has(writer) {
                        return None;
                    }
                    (e.side != Side::Client, message(ix, i))
                }
                EventKind::Close { by, .. } => {
                    let what = format!("stream closed by the {}", by.as_str());
                    return Some(Beat::note(t, e.side, what));
                }
                EventKind::Timeout { .. } => return Some(Beat::note(t, e.side, "timeout".into())),
                EventKind::Outcome { outcome, .. } => {
                    let what = format!("outcome {}", outcome.as_str());
                    return Some(Beat::note(t, e.side, what));
                }
                _ => return None,
            };
            Some(Beat {
                t,
                side: e.side,
                arrow: Some(from_client),
                what,
            })
        })
        .collect()
}

/// One step of a call's story.
#[derive(Debug, Clone)]
pub struct Beat {
    /// Ms since the call began.
    pub t: u64,
    /// Who recorded it.
    pub side: Side,
    /// A message, and whether the client wrote it; `None` for a note (a close, a timeout, an
    /// outcome) at `side`.
    pub arrow: Option<bool>,
    /// What it was.
    pub what: String,
}

impl Beat {
    fn note(t: u64, side: Side, what: String) -> Self {
        Beat {
            t,
            side,
            arrow: None,
            what,
        }
    }
}

/// A few words for the message of event `i`.
fn message(ix: &Index<'_>, i: usize) -> String {
    match ix.msg(i) {
        Some(Message::Request(r)) => r.method.to_string(),
        Some(Message::Progress(p)) => format!("progress {}", p.progress),
        Some(Message::Cancelled(_)) => "notifications/cancelled".into(),
        Some(Message::Result(_)) => "result".into(),
        Some(Message::Error(e)) => format!("error {}", e.error.code),
        Some(_) => "a message".into(),
        None => "unreadable bytes".into(),
    }
}

/// `v` as text with object members in order, so equal values read equal.
pub(crate) fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

/// Members that differ from run to run by design, left out of payload comparisons: `_meta`,
/// ids, tokens, `ttlMs`, timestamps and strings shaped like a UUID.
pub(crate) fn without_volatile(v: &Value) -> Value {
    const VOLATILE: [&str; 7] = [
        "_meta",
        "id",
        "progressToken",
        "requestId",
        "taskId",
        "ttlMs",
        "timestamp",
    ];
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !VOLATILE.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), without_volatile(v)))
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_volatile).collect()),
        Value::String(s) if is_uuid(s) => Value::String("<uuid>".into()),
        other => other.clone(),
    }
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volatile_members_and_uuids_are_left_out_and_objects_read_in_order() {
        let a = serde_json::json!({"b": 1, "a": {"id": 3, "x": "0f8fad5b-d9cb-469f-a165-70867728950e"}});
        let b = serde_json::json!({"a": {"x": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "id": 9}, "b": 1});
        assert_eq!(
            canonical(&without_volatile(&a)),
            canonical(&without_volatile(&b))
        );
        assert_ne!(canonical(&a), canonical(&b));
    }
}
