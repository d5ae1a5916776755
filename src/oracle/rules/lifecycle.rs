//! The legacy era's lifecycle (docs/spec/mcp-2025-11-25.md §2, §6, LA1-LA4): the handshake
//! comes first, nothing but `ping` goes before its result, `initialize` is never cancelled,
//! and a `ping` is answered with an empty result. In the modern era there is no handshake and
//! these rules do not apply ([`super::Sink::flag`] drops them).

use super::{sender, Sink};

use crate::oracle::index::{Index, Req};
use crate::trace::{EventKind, Side, TransportName};
use crate::wire::Era;
use crate::wire::{Message, RequestId};

const INITIALIZE: &str = "initialize";
const PING: &str = "ping";

/// LA1: the first request of every connection is `initialize`, and its result carries
/// `protocolVersion`, `capabilities` and `serverInfo`. A connection starts with the trace and
/// again after the whole connection closed (`close` without a stream: a broken pipe, a
/// server that restarted) as the client saw it (the server's view when the client was not
/// recorded): what the client wrote before it learnt of the close was for the old one.
pub(super) fn initialize_first(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if !ix.era.is_legacy() {
        return;
    }
    let mut fresh = true;
    let client_view = super::view(ix, Side::Client);
    for (i, event) in ix.trace.events.iter().enumerate() {
        if let EventKind::Close { stream: None, .. } = event.kind {
            fresh |= event.side == client_view;
            continue;
        }
        if sender(ix, i) != Some(Side::Client) {
            continue;
        }
        let Some(Message::Request(req)) = ix.msg(i) else {
            continue;
        };
        if ix.probes.contains(&i) {
            continue;
        }
        if fresh && req.method != INITIALIZE {
            let msg = format!(
                "the first request of the connection is {}, not initialize",
                req.method
            );
            s.flag(rule!("initialize-first"), vec![i], msg);
        }
        fresh = false;
    }
    for r in ix.requests.iter().filter(|r| r.method == INITIALIZE) {
        for &answer in &r.responses {
            let Some(Message::Result(result)) = ix.msg(answer) else {
                continue;
            };
            let member = |name: &str| result.result.get(name);
            let missing: Vec<&str> = [
                (
                    "protocolVersion (a string)",
                    member("protocolVersion").is_some_and(|v| v.is_string()),
                ),
                (
                    "capabilities (an object)",
                    member("capabilities").is_some_and(|v| v.is_object()),
                ),
                (
                    "serverInfo (an object)",
                    member("serverInfo").is_some_and(|v| v.is_object()),
                ),
            ]
            .into_iter()
            .filter(|(_, present)| !present)
            .map(|(name, _)| name)
            .collect();
            if !missing.is_empty() {
                let msg = format!("the initialize result lacks {}", missing.join(", "));
                s.flag(rule!("initialize-first"), vec![r.created, answer], msg);
            }
        }
    }
}

/// When the initialize request `init` ended for the side that judges it: the client's receipt
/// of its result when the client was recorded, else the server's answer.
fn handshake_done(s: &Sink<'_, '_>, init: &Req) -> Option<usize> {
    if s.ix.has(Side::Client) {
        init.client_response
    } else {
        init.responses.first().copied()
    }
}

/// LA2: between `initialize` and its result the client sends no request other than `ping`.
pub(super) fn request_before_initialized(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if !ix.era.is_legacy() {
        return;
    }
    for init in ix.requests.iter().filter(|r| r.method == INITIALIZE) {
        let done = handshake_done(s, init);
        // The next initialize starts a new handshake: what follows it is its business.
        let next = ix
            .requests
            .iter()
            .filter(|r| r.method == INITIALIZE && r.created > init.created)
            .map(|r| r.created)
            .min();
        let until = [done, next].into_iter().flatten().min();
        for r in ix.requests.iter().filter(|r| {
            r.created > init.created
                && until.is_none_or(|u| r.created < u)
                && r.method != PING
                && r.method != INITIALIZE
        }) {
            let msg = format!(
                "{} ({}) went out before the initialize result",
                s.name(r),
                r.method
            );
            s.flag(
                rule!("request-before-initialized"),
                vec![init.created, r.created],
                msg,
            );
        }
    }
}

/// LA3: the client never cancels `initialize`.
pub(super) fn initialize_cancelled(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if !ix.era.is_legacy() {
        return;
    }
    for init in ix.requests.iter().filter(|r| r.method == INITIALIZE) {
        if let Some(&cancel) = init.client_cancels.first() {
            let msg = format!("the client cancelled initialize ({})", s.name(init));
            s.flag(
                rule!("initialize-cancelled"),
                vec![init.created, cancel],
                msg,
            );
        }
    }
}

/// LA4: a `ping`, from either side, is answered with an empty result; in a complete run every
/// ping is answered.
pub(super) fn ping_answered(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if ix.era == Era::Modern {
        return;
    }
    let seen = PingEvidence::of(ix);
    for i in 0..ix.trace.events.len() {
        let Some(from) = sender(ix, i) else { continue };
        let Some(Message::Request(ping)) = ix.msg(i) else {
            continue;
        };
        if ping.method != PING {
            continue;
        }
        let answer = seen
            .answers
            .after(&ping.id, i)
            .find(|&j| sender(ix, j).is_some_and(|by| by != from));
        // A ping the peer never read (lost in a partition), or that its sender cancelled, is
        // owed no answer.
        let other = match from {
            Side::Client => Side::Server,
            _ => Side::Client,
        };
        let read = !ix.has(other)
            || seen
                .ping_reads
                .after(&ping.id, i)
                .any(|j| ix.trace.events[j].side == other);
        let cancelled_at = seen
            .cancels
            .after(&ping.id, i)
            .find(|&j| sender(ix, j) == Some(from));
        let cancelled = cancelled_at.is_some();
        let problem = match answer.map(|j| (j, ix.msg(j))) {
            Some((j, Some(Message::Result(r)))) if !r.result.is_empty() => {
                Some((j, "answered with a result that is not empty".to_owned()))
            }
            // A session the server no longer has is refused whole (404), ping included.
            Some((j, Some(Message::Error(_)))) if session_gone(ix, j) => None,
            Some((j, Some(Message::Error(e)))) => {
                Some((j, format!("answered with error {}", e.error.code)))
            }
            Some(_) => None,
            None if s.config.complete && read && !cancelled => {
                Some((i, "never answered".to_owned()))
            }
            // A ping cancelled only after the peer went on without it is dropped all the same.
            None => answered_past(ix, i, from, &ping.id)
                .filter(|&k| cancelled_at.is_none_or(|c| k < c))
                .map(|k| {
                    let why =
                        "never answered, though the peer read it and answered a later request";
                    (k, why.to_owned())
                })
                .or_else(|| {
                    let k = sent_past(ix, i, from, s.config.grace_ms)
                        .filter(|&k| cancelled_at.is_none_or(|c| k < c))?;
                    let why = format!(
                        "never answered, though the client went on sending requests more than \
                         {} ms after it had the ping",
                        s.config.grace_ms
                    );
                    Some((k, why))
                }),
        };
        if let Some((j, why)) = problem {
            let msg = format!("the {} ping {} was {why}", from.as_str(), ping.id);
            let events = if j == i { vec![i] } else { vec![i, j] };
            s.flag(rule!("ping-answered"), events, msg);
        }
    }
}

/// Where each request id's answers, `ping` receipts and cancels are, found in one pass so
/// that each ping looks only at its own id's events (a trace with thousands of pings is
/// judged in time linear in its length, not quadratic).
struct PingEvidence {
    /// Results and errors sent (in the sender's view), by id.
    answers: Positions,
    /// `ping` requests received, by id.
    ping_reads: Positions,
    /// `notifications/cancelled` sent, by the id they cancel.
    cancels: Positions,
}

/// Event indices by request id, each list in trace order.
#[derive(Default)]
struct Positions(std::collections::BTreeMap<RequestId, Vec<usize>>);

impl Positions {
    fn add(&mut self, id: &RequestId, i: usize) {
        self.0.entry(id.clone()).or_default().push(i);
    }

    /// The events of `id` after event `i`, in order.
    fn after<'a>(&'a self, id: &RequestId, i: usize) -> impl Iterator<Item = usize> + 'a {
        let list = self.0.get(id).map_or(&[][..], Vec::as_slice);
        list[list.partition_point(|&j| j <= i)..].iter().copied()
    }
}

impl PingEvidence {
    fn of(ix: &Index<'_>) -> Self {
        let mut seen = PingEvidence {
            answers: Positions::default(),
            ping_reads: Positions::default(),
            cancels: Positions::default(),
        };
        for j in 0..ix.trace.events.len() {
            let received = matches!(ix.trace.events[j].kind, EventKind::Recv(_));
            match ix.msg(j) {
                Some(m @ (Message::Result(_) | Message::Error(_))) if sender(ix, j).is_some() => {
                    if let Some(id) = m.id() {
                        seen.answers.add(id, j);
                    }
                }
                Some(Message::Request(r)) if received && r.method == PING => {
                    seen.ping_reads.add(&r.id, j);
                }
                Some(Message::Cancelled(c)) if sender(ix, j).is_some() => {
                    seen.cancels.add(&c.request_id, j);
                }
                _ => {}
            }
        }
        seen
    }
}

/// The evidence that the peer read the ping at `i` (sent by `from`) and went on without
/// answering it, in any trace, complete or not: the index of the answer to a request the
/// peer read after the ping. With the peer's end recorded, its own receipts say what it read
/// first; with only the sender's end, one ordered pipe (stdio, the same connection) says it:
/// a request written after the ping and answered was read after it.
fn answered_past(ix: &Index<'_>, i: usize, from: Side, ping: &RequestId) -> Option<usize> {
    let other = match from {
        Side::Client => Side::Server,
        _ => Side::Client,
    };
    let events = &ix.trace.events;
    let n = events.len();
    let answer_to = |id: &RequestId, after: usize| {
        (after..n).find(|&m| {
            sender(ix, m) == Some(other)
                && matches!(ix.msg(m), Some(Message::Result(_) | Message::Error(_)))
                && ix.msg(m).and_then(Message::id) == Some(id)
        })
    };
    let connection_ends = |j: usize| {
        matches!(events[j].kind, EventKind::Close { stream: None, .. })
            || matches!(&events[j].kind, EventKind::Fault { fault, .. } if fault == "restart")
    };
    let request_other_than_ping = |j: usize| match ix.msg(j) {
        Some(Message::Request(r)) if &r.id != ping => Some(r.id.clone()),
        _ => None,
    };
    if ix.has(other) {
        let read = (i..n).find(|&j| {
            events[j].side == other
                && matches!(events[j].kind, EventKind::Recv(_))
                && matches!(ix.msg(j), Some(Message::Request(r)) if &r.id == ping)
        })?;
        // Up to the end of the peer's connection: a restarted peer never read the ping.
        return (read + 1..n)
            .take_while(|&k| !connection_ends(k))
            .filter(|&k| events[k].side == other && matches!(events[k].kind, EventKind::Recv(_)))
            .find_map(|k| answer_to(&request_other_than_ping(k)?, k + 1));
    }
    let stdio =
        matches!(&events[i].kind, EventKind::Send(w) if w.transport == TransportName::Stdio);
    if !stdio {
        return None;
    }
    (i + 1..n)
        .take_while(|&j| !connection_ends(j))
        .filter(|&j| events[j].side == from && matches!(events[j].kind, EventKind::Send(_)))
        .find_map(|j| answer_to(&request_other_than_ping(j)?, j + 1))
}

/// The evidence that a client had the server's ping at `i` and went on without answering
/// it: a request the client sent (its own end) or the server received (the server's end)
/// later than `grace` after the ping reached the client (its receipt) or left the server, so
/// that the client had long had the ping when it wrote that request. A client answers a ping
/// "promptly"; one that keeps calling while a ping waits is the breach, in any trace.
fn sent_past(ix: &Index<'_>, i: usize, from: Side, grace: u64) -> Option<usize> {
    if from != Side::Server {
        return None;
    }
    let events = &ix.trace.events;
    let ping_id = ix.msg(i).and_then(|m| match m {
        Message::Request(r) => Some(r.id.clone()),
        _ => None,
    })?;
    let had = match ix.has(Side::Client) {
        true => (i..events.len()).find(|&j| {
            events[j].side == Side::Client
                && matches!(events[j].kind, EventKind::Recv(_))
                && matches!(ix.msg(j), Some(Message::Request(r)) if r.id == ping_id)
        })?,
        false => i,
    };
    let seen_at = if ix.has(Side::Client) {
        Side::Client
    } else {
        Side::Server
    };
    (had + 1..events.len())
        .take_while(|&k| !matches!(events[k].kind, EventKind::Close { stream: None, .. }))
        .find(|&k| {
            events[k].side == seen_at
                && sender(ix, k) == Some(Side::Client)
                && matches!(ix.msg(k), Some(Message::Request(r)) if r.method != PING)
                && ix.t(k) > ix.t(had) + grace
        })
}

/// Whether the answer at `j` came on an HTTP stream answered with 404: the legacy server did
/// not know the session.
fn session_gone(ix: &crate::oracle::index::Index<'_>, j: usize) -> bool {
    let Some(stream) = ix.wire(j).and_then(|w| w.stream) else {
        return false;
    };
    ix.trace.events.iter().any(|e| {
        matches!(e.kind, EventKind::Status { stream: Some(st), status: 404, .. } if st == stream)
    })
}
