//! The legacy era's resumable streams (docs/spec/mcp-2025-11-25.md §5, LB8, LE15-LE19): event
//! ids unique across the session, a resume (`GET` with `Last-Event-ID`) that replays only the
//! broken stream and only what came after that event, the `retry` the client waits, the
//! priming event of 2025-11-25, and a listening `GET` stream that carries no progress.
//!
//! The server's view of what it sent is used (its sends and `sse` events, else the client's
//! receipts), and the client's view of the `GET`s it opened (else the server's).

use std::collections::{BTreeMap, BTreeSet};

use super::{view, Sink};

use crate::trace::{EventKind, Side};
use crate::wire::Message;
use crate::wire::{Era, LegacyRevision};

/// Every resumability check of a legacy trace, over one table of its streams.
pub(super) fn resumability(s: &mut Sink<'_, '_>) {
    if !s.ix.era.is_legacy() {
        return;
    }
    let streams = Streams::build(s);
    progress_on_get_stream(s, &streams);
    event_id_unique(s, &streams);
    replays(s, &streams);
    retry_honoured(s, &streams);
    priming_event(s, &streams);
    resume_broken_stream(s, &streams);
}

/// LE17 with LC11 (derived): a request whose stream broke (not by the client, before its
/// response) after the client read an event id on it, and which the client then gave up as
/// lost, should have been resumed first: the server kept working and kept its events. A
/// resume refused (a non-200 answer) or a session that expired excuses it.
fn resume_broken_stream(s: &mut Sink<'_, '_>, streams: &Streams) {
    let ix = s.ix;
    if !ix.has(Side::Client) {
        return;
    }
    let resumed_from: BTreeSet<u64> = streams
        .resumes()
        .filter_map(|(_, _, from, _)| from)
        .collect();
    for r in &ix.requests {
        let (Some(stream), Some(&lost)) = (r.stream, r.outcomes.last()) else {
            continue;
        };
        let is_lost = matches!(
            ix.trace.events[lost].kind,
            EventKind::Outcome {
                outcome: crate::model::Outcome::Lost,
                ..
            }
        );
        if !is_lost || resumed_from.contains(&stream) {
            continue;
        }
        let mut read_id = false;
        let mut broke = None;
        for (i, e) in ix.trace.events[..lost].iter().enumerate() {
            if e.side != Side::Client {
                continue;
            }
            match &e.kind {
                EventKind::Recv(w) if w.stream == Some(stream) && w.event_id.is_some() => {
                    read_id = true
                }
                EventKind::Sse {
                    stream: st,
                    event_id: Some(_),
                    ..
                } if *st == stream => read_id = true,
                EventKind::Status {
                    stream: Some(st),
                    status,
                    ..
                } if *st == stream && *status != 200 => {
                    read_id = false; // an error answer: nothing to resume
                }
                EventKind::Close {
                    stream: Some(st),
                    by,
                    ..
                } if *st == stream && *by != Side::Client => {
                    broke = Some(i);
                }
                _ => {}
            }
        }
        let Some(broke) = broke.filter(|_| read_id) else {
            continue;
        };
        // A new session began in between (a 404 or a crash): that stream is gone.
        let new_session = ix
            .requests
            .iter()
            .any(|q| q.method == "initialize" && q.created > r.created && q.created < lost)
            || ix.trace.events[r.created..=lost]
                .iter()
                .any(|e| match &e.kind {
                    EventKind::Status { status: 404, .. } => e.side == Side::Client,
                    EventKind::Close { stream: None, .. } => e.side == Side::Server,
                    _ => false,
                });
        if new_session {
            continue;
        }
        let msg = format!(
            "{} was given up as lost after its stream {stream} broke, without a resume from the event id it had read",
            s.name(r)
        );
        s.flag(rule!("resume-broken-stream"), vec![broke, lost], msg);
    }
}

/// A `GET` the client opened: when, and the `Last-Event-ID` it resumed from, if any.
struct Get {
    opened: usize,
    last_event_id: Option<String>,
}

/// One SSE event in the server's view: where and with which id.
struct Sent {
    event: usize,
    stream: u64,
    id: Option<String>,
    /// It carried a message (not a priming or retry-only event).
    message: bool,
}

struct Streams {
    gets: BTreeMap<u64, Get>,
    /// Every SSE event the server sent, in order.
    sent: Vec<Sent>,
    /// The stream each event id was first sent on, outside resumed streams, per session.
    origin: BTreeMap<(usize, String), u64>,
    /// Where each `initialize` starts a new session (ids are unique within one, LE15).
    inits: Vec<usize>,
}

impl Streams {
    fn build(s: &Sink<'_, '_>) -> Streams {
        let ix = s.ix;
        let server_view = view(ix, Side::Server);
        let client_view = view(ix, Side::Client);
        let mut gets = BTreeMap::new();
        let mut sent = Vec::new();
        for (i, event) in ix.trace.events.iter().enumerate() {
            match &event.kind {
                EventKind::Open {
                    stream,
                    method,
                    headers,
                } if event.side == client_view && method == "GET" => {
                    let last_event_id = headers
                        .as_ref()
                        .and_then(|h| h.get("last-event-id"))
                        .cloned();
                    gets.insert(
                        *stream,
                        Get {
                            opened: i,
                            last_event_id,
                        },
                    );
                }
                EventKind::Sse {
                    stream, event_id, ..
                } if event.side == server_view => sent.push(Sent {
                    event: i,
                    stream: *stream,
                    id: event_id.clone(),
                    message: false,
                }),
                EventKind::Send(w) | EventKind::Recv(w)
                    if ix.emissions.binary_search(&i).is_ok() =>
                {
                    if let Some(stream) = w.stream {
                        sent.push(Sent {
                            event: i,
                            stream,
                            id: w.event_id.clone(),
                            message: true,
                        });
                    }
                }
                _ => {}
            }
        }
        let mut inits: Vec<usize> = ix
            .requests
            .iter()
            .filter(|r| r.method == "initialize")
            .map(|r| r.created)
            .collect();
        inits.sort_unstable();
        let mut streams = Streams {
            gets,
            sent,
            origin: BTreeMap::new(),
            inits,
        };
        let mut origin = BTreeMap::new();
        for e in &streams.sent {
            if let Some(id) = &e.id {
                if !streams.is_resume(e.stream) {
                    let key = (streams.session(e.event), id.clone());
                    origin.entry(key).or_insert(e.stream);
                }
            }
        }
        streams.origin = origin;
        streams
    }

    /// The session event `i` belongs to: how many `initialize`s came before it.
    fn session(&self, i: usize) -> usize {
        self.inits.partition_point(|&x| x < i)
    }

    /// The stream event id `id` was first sent on in event `i`'s session.
    fn origin_of(&self, i: usize, id: &str) -> Option<u64> {
        self.origin.get(&(self.session(i), id.to_owned())).copied()
    }

    fn is_resume(&self, stream: u64) -> bool {
        self.gets
            .get(&stream)
            .is_some_and(|g| g.last_event_id.is_some())
    }

    /// The resumed streams: (stream, its GET, the stream it resumes, the id it resumes from).
    fn resumes(&self) -> impl Iterator<Item = (u64, &Get, Option<u64>, &str)> + '_ {
        self.gets.iter().filter_map(|(&stream, get)| {
            let from = get.last_event_id.as_deref()?;
            Some((stream, get, self.origin_of(get.opened, from), from))
        })
    }
}

/// LB8: no progress on a `GET` stream opened to listen (not to resume).
fn progress_on_get_stream(s: &mut Sink<'_, '_>, streams: &Streams) {
    let listening: BTreeSet<u64> = streams
        .gets
        .iter()
        .filter(|(_, g)| g.last_event_id.is_none())
        .map(|(&stream, _)| stream)
        .collect();
    for e in streams.sent.iter().filter(|e| e.message) {
        if listening.contains(&e.stream) {
            if let Some(Message::Progress(p)) = s.ix.msg(e.event) {
                let msg = format!(
                    "progress for token {} on GET stream {}, not on its request's POST stream",
                    p.token, e.stream
                );
                s.flag(rule!("progress-on-get-stream"), vec![e.event], msg);
            }
        }
    }
}

/// LE15: an event id is never used twice in a session outside a resumed stream's replay.
fn event_id_unique(s: &mut Sink<'_, '_>, streams: &Streams) {
    let mut first: BTreeMap<(usize, &str), usize> = BTreeMap::new();
    for e in &streams.sent {
        let Some(id) = e.id.as_deref() else { continue };
        if streams.is_resume(e.stream) {
            continue;
        }
        let key = (streams.session(e.event), id);
        if let Some(&earlier) = first.get(&key) {
            let msg = format!("event id {id:?} was used before in the session (at #{earlier})");
            s.flag(rule!("event-id-unique"), vec![earlier, e.event], msg);
        } else {
            first.insert(key, e.event);
        }
    }
}

/// LE16 and LE17: what a resumed stream replays. Only messages of the stream `Last-Event-ID`
/// came from (by their ids, and by the request a response or progress belongs to), nothing at
/// or before that event, and no event twice.
fn replays(s: &mut Sink<'_, '_>, streams: &Streams) {
    let ix = s.ix;
    for (resumed, _, from_stream, from_id) in streams.resumes() {
        let Some(origin) = from_stream else { continue };
        let before: BTreeSet<&str> = streams
            .sent
            .iter()
            .filter(|e| e.stream == origin)
            .take_while(|e| e.id.as_deref() != Some(from_id))
            .chain(
                streams
                    .sent
                    .iter()
                    .filter(|e| e.stream == origin && e.id.as_deref() == Some(from_id)),
            )
            .filter_map(|e| e.id.as_deref())
            .collect();
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for e in streams.sent.iter().filter(|e| e.stream == resumed) {
            if let Some(id) = e.id.as_deref() {
                if let Some(other) = streams.origin_of(e.event, id).filter(|&o| o != origin) {
                    let msg = format!(
                        "stream {resumed} resumed stream {origin} but replays event {id:?} of stream {other}"
                    );
                    s.flag(rule!("replay-other-stream"), vec![e.event], msg);
                }
                if before.contains(id) {
                    let msg = format!(
                        "stream {resumed} replays event {id:?}, at or before Last-Event-ID {from_id:?}"
                    );
                    s.flag(rule!("replay-exactly-once"), vec![e.event], msg);
                }
                if let Some(&twice) = seen.get(id) {
                    let msg = format!("stream {resumed} replays event {id:?} twice");
                    s.flag(rule!("replay-exactly-once"), vec![twice, e.event], msg);
                }
                seen.insert(id, e.event);
            }
            // A response or progress on the resumed stream belongs to the origin's request.
            let owner = match ix.msg(e.event) {
                Some(Message::Progress(p)) => ix.by_token(&p.token, e.event),
                Some(m @ (Message::Result(_) | Message::Error(_))) => {
                    m.id().and_then(|id| ix.by_id(id, e.event))
                }
                _ => None,
            };
            let owner_stream = owner.and_then(|r| ix.requests[r].stream);
            if let Some(other) = owner_stream.filter(|&o| o != origin) {
                if !streams.gets.contains_key(&origin) {
                    let msg = format!(
                        "stream {resumed} resumed stream {origin} but carries a message of stream {other}'s request"
                    );
                    s.flag(rule!("replay-other-stream"), vec![e.event], msg);
                }
            }
        }
    }
}

/// LE18 (2025-11-25): the client waits at least the stream's `retry` after the stream broke
/// before it resumes it.
fn retry_honoured(s: &mut Sink<'_, '_>, streams: &Streams) {
    let ix = s.ix;
    if ix.era != Era::Legacy(LegacyRevision::V2025_11_25) {
        return;
    }
    let client_view = view(ix, Side::Client);
    for (_, get, from_stream, _) in streams.resumes() {
        let Some(origin) = from_stream else { continue };
        let broke = ix.trace.events[..get.opened]
            .iter()
            .enumerate()
            .rev()
            .find(|(_, e)| {
                e.side == client_view
                    && matches!(e.kind, EventKind::Close { stream: Some(st), .. } if st == origin)
            });
        let Some((broke, _)) = broke else { continue };
        let retry = ix.trace.events[..broke]
            .iter()
            .rev()
            .find_map(|e| match e.kind {
                EventKind::Sse {
                    stream,
                    retry_ms: Some(ms),
                    ..
                } if stream == origin => Some(ms),
                _ => None,
            });
        let Some(retry) = retry else { continue };
        let waited = s.t(get.opened) - s.t(broke);
        if waited < retry {
            let msg = format!(
                "the client resumed stream {origin} {waited} ms after it broke; the server set retry {retry} ms"
            );
            s.flag(rule!("retry-honoured"), vec![broke, get.opened], msg);
        }
    }
}

/// LE19 (2025-11-25): an SSE response stream opens with a priming event (an id, no data)
/// before its first message.
fn priming_event(s: &mut Sink<'_, '_>, streams: &Streams) {
    let ix = s.ix;
    if ix.era != Era::Legacy(LegacyRevision::V2025_11_25) {
        return;
    }
    let server_view = view(ix, Side::Server);
    let event_streams: BTreeSet<u64> = ix
        .trace
        .events
        .iter()
        .filter(|e| e.side == server_view)
        .filter_map(|e| match &e.kind {
            EventKind::Status {
                stream: Some(st),
                status: 200,
                content_type: Some(ct),
                ..
            } if ct.starts_with("text/event-stream") => Some(*st),
            _ => None,
        })
        .collect();
    for stream in event_streams {
        if streams.gets.contains_key(&stream) {
            continue;
        }
        let first = streams.sent.iter().find(|e| e.stream == stream);
        if let Some(first) = first.filter(|e| e.message || e.id.is_none()) {
            let msg =
                format!("stream {stream}'s first event is not a priming event (an id, no data)");
            s.flag(rule!("priming-event"), vec![first.event], msg);
        }
    }
}
