//! §3 Cancellation: who may cancel what, nothing sent after a cancel reached the server (with
//! the black-box evidence: barriers and answers to a cancel), work and resources after a
//! cancel, one outcome per request, races handled gracefully.

use super::{outstanding_at, sender, Sink};
use crate::model::{Outcome, Transport};
use crate::oracle::index::{Index, Req};
use crate::oracle::{Level, Profile};
use crate::trace::{EventKind, Side, TransportName};
use crate::wire::Message;

pub(super) fn server_cancel_not_listen(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for &i in &ix.emissions {
        let Some(Message::Cancelled(c)) = ix.msg(i) else {
            continue;
        };
        let target = ix.by_id(&c.request_id, i).map(|r| &ix.requests[r]);
        let problem = match target {
            None => Some(format!(
                "the server cancels {}, which the client never sent",
                c.request_id
            )),
            Some(r) if !r.is_listen() => Some(format!(
                "the server cancels {} ({}); it may cancel only subscriptions/listen",
                c.request_id, r.method
            )),
            Some(r) if r.responses.iter().any(|&d| d < i) => Some(format!(
                "the server cancels listen {} after ending it",
                c.request_id
            )),
            Some(_) => None,
        };
        if let Some(p) = problem {
            s.flag(rule!("server-cancel-not-listen"), vec![i], p);
        }
    }
}

pub(super) fn cancel_unknown_request(s: &mut Sink<'_, '_>, tasks: &super::tasks::Tasks) {
    let ix = s.ix;
    for i in 0..ix.trace.events.len() {
        if sender(ix, i) != Some(Side::Client) {
            continue;
        }
        let Some(Message::Cancelled(c)) = ix.msg(i) else {
            continue;
        };
        let target = ix
            .by_id(&c.request_id, i)
            .filter(|r| ix.requests[*r].created < i);
        // A call that became a task, or a task's own id, is cancel-targets-task's to report.
        if target.is_some_and(|r| super::tasks::names_a_task(ix, r, i))
            || tasks.is_task_id(&c.request_id)
        {
            continue;
        }
        let problem = match target.map(|r| &ix.requests[r]) {
            None => Some((
                vec![i],
                format!("cancel of {}, which the client never sent", c.request_id),
            )),
            Some(r) => match (r.client_response, r.client_cancels.iter().find(|&&e| e < i)) {
                (Some(resp), _) if resp < i => Some((
                    vec![resp, i],
                    format!("cancel of {} after its response arrived", c.request_id),
                )),
                // A 2026-07-28 notification POSTed after closing the stream (which was the
                // cancel) is cancel-over-http's to report: it has no meaning in that binding.
                (_, Some(&first)) if posted_in_modern(ix, i) && is_close(ix, first) => None,
                (_, Some(&first)) => Some((
                    vec![first, i],
                    format!("{} was already cancelled", c.request_id),
                )),
                _ => None,
            },
        };
        if let Some((events, p)) = problem {
            s.flag(rule!("cancel-unknown-request"), events, p);
        }
    }
}

/// Whether event `i` is a message sent over Streamable HTTP in the 2026-07-28 era.
fn posted_in_modern(ix: &Index<'_>, i: usize) -> bool {
    let http = match &ix.trace.events[i].kind {
        EventKind::Send(w) | EventKind::Recv(w) => w.transport == TransportName::Http,
        _ => false,
    };
    http && !ix.era.is_legacy()
}

fn is_close(ix: &Index<'_>, i: usize) -> bool {
    matches!(ix.trace.events[i].kind, EventKind::Close { .. })
}

/// §3.2: over Streamable HTTP in 2026-07-28, closing the request's stream is the cancel, and
/// "no `notifications/cancelled` message is required or expected": the binding defines no
/// client-to-server notifications. A client that POSTs one anyway (go-sdk beside its stream
/// close) relies on what the server need not read: host policy, not a MUST.
pub(super) fn cancel_over_http(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for i in 0..ix.trace.events.len() {
        if sender(ix, i) != Some(Side::Client) || !posted_in_modern(ix, i) {
            continue;
        }
        let Some(Message::Cancelled(c)) = ix.msg(i) else {
            continue;
        };
        s.flag(
            rule!("cancel-over-http"),
            vec![i],
            format!(
                "the client POSTed notifications/cancelled for {} over Streamable HTTP: in \
                 2026-07-28 closing the request's stream is the cancel, and the binding \
                 expects no notification",
                c.request_id
            ),
        );
    }
}

/// The point after which the server must send nothing for `r`, as an event index when the
/// server recorded it, else as an inferred time.
pub(super) enum CancelPoint {
    Seen(usize),
    Inferred(u64, usize),
}

fn cancel_point(s: &Sink<'_, '_>, r: &Req) -> Option<CancelPoint> {
    let ix = s.ix;
    if let Some(seen) = r.server_cancel_seen {
        return Some(CancelPoint::Seen(seen));
    }
    let trigger = match r.transport? {
        // Without the server's own view, the cancel reached it within the grace window.
        Transport::Stdio if !ix.has(Side::Server) => r.client_cancels.first().copied(),
        Transport::Stdio => None,
        Transport::Http if ix.has(Side::Server) => None,
        // A stream cut by anyone but the server itself, before the response.
        Transport::Http => r.closes.iter().copied().find(|&c| {
            let by_server = matches!(
                ix.trace.events[c].kind,
                EventKind::Close {
                    by: Side::Server,
                    ..
                }
            );
            !by_server && r.responses.first().is_none_or(|&d| d > c)
        }),
    }?;
    Some(CancelPoint::Inferred(
        s.t(trigger) + s.config.grace_ms,
        trigger,
    ))
}

/// How soon after a stdio cancel a final response must arrive to be read as an answer to it,
/// in ms (see the oracle's module docs, "An answer to the cancel").
pub const CANCEL_REACTION_MS: u64 = 100;

/// The first message for `r` the server sent after the cancellation reached it, with the
/// events that show it (decisive last) and, when the evidence is not the server's own view,
/// how it is known.
///
/// With the server's `recv` of the cancel recorded, any later send is one. Without the
/// server's side (a black box) there are three kinds of evidence, strongest first:
///
/// 1. **Barrier** (stdio): a message received after the answer to a request the client sent
///    after its cancel ([`Index::answered_after`]). Certain: the pipes are ordered.
/// 2. **Grace window**: a message received later than the cancel plus the grace window.
/// 3. **An answer to the cancel** (stdio): see [`answer_to_cancel`].
fn message_after_cancel(
    s: &Sink<'_, '_>,
    r: &Req,
    point: &CancelPoint,
) -> Option<(Vec<usize>, String)> {
    let (trigger, limit) = match *point {
        CancelPoint::Seen(i) => {
            let e = r.emissions.iter().copied().find(|&e| e > i)?;
            return Some((vec![i, e], String::new()));
        }
        CancelPoint::Inferred(t, i) => (i, t),
    };
    let stdio = r.transport == Some(Transport::Stdio);
    let barrier = stdio.then(|| s.ix.answered_after(trigger)).flatten();
    // A message the client read late because it stalled its reads on purpose was written
    // that much earlier.
    let late = r.emissions.iter().copied().find(|&e| {
        let stalled = s.ix.stalled_ms(s.t(trigger), s.t(e));
        s.t(e) > limit + stalled || barrier.is_some_and(|b| e > b)
    });
    if let Some(e) = late {
        return Some(match barrier.filter(|&b| e > b) {
            Some(b) => (
                vec![trigger, b, e],
                format!(
                    " (it arrived after the answer #{b} to a request the client wrote after the \
                     cancel, and stdio pipes are ordered: the server had read the cancel)"
                ),
            ),
            None => (
                vec![trigger, e],
                format!(
                    " (more than the {} ms grace window after the cancel)",
                    s.config.grace_ms
                ),
            ),
        });
    }
    if stdio {
        return answer_to_cancel(s, r, trigger);
    }
    None
}

/// A final response to a stdio request that answers its cancellation rather than crossing it
/// (python-sdk #1419: "Request cancelled" errors), judged from the client's side alone.
///
/// A response that crosses a cancel was written when the request's work ended, at a time the
/// cancel did not choose. One that answers the cancel follows it within the server's reaction
/// time, whatever work was left. So a response counts as an answer when both hold:
///
/// - it arrived within [`CANCEL_REACTION_MS`] of the cancel;
/// - the request had at least half its work left: it had run for less than half the duration
///   of the shortest of the uncancelled requests with the same method and params (its
///   siblings, at least one), each answered with no cancel and no timeout.
///
/// For a crossing to look like this, the request would have to end in under half the time of
/// every sibling, and, the cancel's time being drawn by the client independently of the
/// server, end within the reaction window after it: with cancels spread over a window of
/// `W` ms, the second alone has a chance of at most `CANCEL_REACTION_MS / W` per cancel.
fn answer_to_cancel(s: &Sink<'_, '_>, r: &Req, cancel: usize) -> Option<(Vec<usize>, String)> {
    let ix = s.ix;
    let d = r.responses.iter().copied().find(|&d| d > cancel)?;
    let reaction = s.t(d).checked_sub(s.t(cancel))?;
    if reaction > CANCEL_REACTION_MS {
        return None;
    }
    let send = r.client_send?;
    if ix.stalled_ms(s.t(send), s.t(d)) > 0 {
        return None; // the client's own stall moved the arrival: no timing evidence
    }
    let ran = s.t(d).saturating_sub(s.t(send));
    let shape = ix.call_shape(send)?;
    let siblings: Vec<u64> = ix
        .requests
        .iter()
        .filter(|q| q.client_cancels.is_empty() && q.client_send != Some(send))
        .filter_map(|q| {
            let (q_send, q_answer) = (q.client_send?, q.client_response?);
            if q.timeout.is_some_and(|t| t < q_answer) {
                return None;
            }
            (ix.call_shape(q_send)? == shape).then(|| s.t(q_answer) - s.t(q_send))
        })
        .collect();
    let shortest = *siblings.iter().min()?;
    if ran.saturating_mul(2) >= shortest {
        return None;
    }
    Some((
        vec![cancel, d],
        format!(
            " (its final response came {reaction} ms after the cancel, {ran} ms into a call \
             whose {} uncancelled identical calls took at least {shortest} ms: it answers the \
             cancel)",
            siblings.len()
        ),
    ))
}

pub(super) fn after_cancel(s: &mut Sink<'_, '_>, r: &Req) {
    let Some(point) = cancel_point(s, r) else {
        return;
    };
    // In the legacy era the cancel is the notification on every transport, and what may not
    // follow it is the same on both (LC10).
    let http_modern = r.transport == Some(Transport::Http) && !s.ix.era.is_legacy();
    // The lenient profile reads the answer to a cancelled request as the SHOULD it is for
    // servers that cannot stop in time (§3.3 item 6); strict holds the catalog's level.
    let (rule, at_most) = match r.transport {
        Some(Transport::Http) if http_modern => (rule!("disconnect-is-cancel"), Level::Must),
        _ => match s.config.profile {
            Profile::Strict => (rule!("response-after-cancel"), Level::Must),
            Profile::Lenient => (rule!("response-after-cancel"), Level::Should),
        },
    };
    let anchor = match point {
        CancelPoint::Seen(i) | CancelPoint::Inferred(_, i) => i,
    };
    if let Some((events, why)) = message_after_cancel(s, r, &point) {
        let message = format!(
            "the server sent a message for {} after the cancellation reached it{why}",
            s.name(r)
        );
        s.flag_at_most(rule, at_most, events, message);
    }
    // Work: allowed up to the grace window after the server learned of the cancel.
    let limit = match point {
        CancelPoint::Seen(i) => s.t(i) + s.config.grace_ms,
        CancelPoint::Inferred(t, _) => t,
    };
    // On stdio stopping work is a SHOULD (§3.3 item 6). On HTTP the MUST is to treat the
    // disconnect as a cancellation (§3.2, §5.2); work still going on after the grace window is
    // the evidence that it was not (rust-sdk #857: the handler runs to completion).
    if let Some(&w) = r.work.iter().find(|&&w| s.t(w) > limit) {
        let msg = format!(
            "backend work for {} {} ms after the cancellation reached the server",
            s.name(r),
            s.t(w) - (limit - s.config.grace_ms)
        );
        let rule = if http_modern {
            rule!("disconnect-is-cancel")
        } else {
            rule!("work-after-cancel")
        };
        s.flag(rule, vec![anchor, w], msg);
    }
}

pub(super) fn cancel_on_timeout(s: &mut Sink<'_, '_>, r: &Req) {
    let ix = s.ix;
    let abandon = r.timeout.or_else(|| {
        r.outcomes.iter().copied().find(|&o| {
            matches!(
                ix.trace.events[o].kind,
                EventKind::Outcome {
                    outcome: Outcome::Cancelled | Outcome::TimedOut,
                    ..
                }
            )
        })
    });
    let Some(a) = abandon else { return };
    if r.client_response.is_some_and(|resp| resp <= a) {
        return;
    }
    // A legacy handshake that timed out is never cancelled (LA3): the client closes instead.
    if ix.era.is_legacy() && r.method == "initialize" {
        return;
    }
    let deadline = s.t(a) + s.config.grace_ms;
    if r.client_cancels.iter().any(|&c| s.t(c) <= deadline) {
        return;
    }
    // A legacy request the server refused runs nowhere, and one of a session the server
    // forgot (a 404 to the client since it was sent) has no server left that knows it: there
    // is nothing to cancel.
    let sent = r.client_send.unwrap_or(r.created);
    let refused = ix.trace.events[sent..a].iter().any(|e| match e.kind {
        EventKind::Status {
            stream: Some(st),
            status,
            ..
        } => (Some(st) == r.stream && status >= 400) || (status == 404 && e.side == Side::Client),
        _ => false,
    });
    if ix.era.is_legacy() && refused {
        return;
    }
    // In the legacy era the cancel is the notification on every transport (LD14); the
    // catalog's legacy level (SHOULD) applies.
    // An auto-mode client's `server/discover` probe is a modern request in any trace.
    let legacy = ix.era.is_legacy() && r.method != "server/discover";
    // A 2026-07-28 HTTP client that gives up without closing the stream breaks a SHOULD:
    // the close is the cancel, and a stream left open still ends with its answer.
    let (at_most, how) = match r.transport {
        _ if legacy => (Level::Must, "sending notifications/cancelled"),
        Some(Transport::Http) => (Level::Should, "closing its stream"),
        _ => (Level::Must, "sending notifications/cancelled"),
    };
    s.flag_at_most(
        rule!("cancel-on-timeout"),
        at_most,
        vec![a],
        format!("the client abandoned {} without {how}", s.name(r)),
    );
}

pub(super) fn late_response_delivered(s: &mut Sink<'_, '_>, r: &Req) {
    let ix = s.ix;
    if let Some(a) = r.client_abandoned() {
        let late = r.outcomes.iter().copied().find(|&o| {
            o > a
                && matches!(
                    ix.trace.events[o].kind,
                    EventKind::Outcome {
                        outcome: Outcome::Result | Outcome::Error,
                        ..
                    }
                )
        });
        if let Some(o) = late {
            s.flag(
                rule!("late-response-delivered"),
                vec![a, o],
                format!(
                    "a response for {} reached the application after the client abandoned it",
                    s.name(r)
                ),
            );
        }
    }
    if let Some(&first) = r.outcomes.first() {
        if let Some(&d) = r.deliveries.iter().find(|&&d| d > first) {
            s.flag(
                rule!("late-response-delivered"),
                vec![first, d],
                format!(
                    "progress for {} reached the application after its outcome",
                    s.name(r)
                ),
            );
        }
    }
}

pub(super) fn resource_leak(s: &mut Sink<'_, '_>, r: &Req) {
    let Some(&first_work) = r.work.first() else {
        return;
    };
    if r.release.iter().any(|&rel| rel > first_work) {
        return;
    }
    // The request ended for the server when it answered or learned of the cancellation; a
    // black-box server is assumed to learn when the client stopped waiting.
    let client_view = (!s.ix.has(Side::Server)).then(|| r.client_end()).flatten();
    let ended = [
        r.responses.first().copied(),
        r.server_cancel_seen,
        client_view,
    ]
    .into_iter()
    .flatten()
    .min();
    let overdue = match ended {
        Some(e) => s.ix.trace.end() > s.t(e) + s.config.grace_ms,
        None => s.config.complete,
    };
    if overdue {
        let events = ended.map_or(vec![first_work], |e| vec![first_work, e]);
        s.flag(
            rule!("resource-leak"),
            events,
            format!("the backend resource of {} was never released", s.name(r)),
        );
    }
}

pub(super) fn single_outcome(s: &mut Sink<'_, '_>, r: &Req) {
    if let [first, second, ..] = r.outcomes[..] {
        s.flag(
            rule!("single-outcome"),
            vec![first, second],
            format!("{} has more than one outcome", s.name(r)),
        );
    }
    if s.config.complete && r.client_send.is_some() && r.outcomes.is_empty() && !r.is_listen() {
        s.flag(
            rule!("single-outcome"),
            vec![r.created],
            format!("{} never got an outcome", s.name(r)),
        );
    }
}

/// The client dropped its connection because of a late message, or gave up a request as lost
/// with no close by the server or an intermediary to explain it (claude-code #51073,
/// typescript-sdk #2580). Closing the connection to shut down is allowed (§9 C23); closing it
/// right after a message for a finished request, with other requests outstanding, is not.
pub(super) fn race_not_graceful(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    // Seen from the client when it was recorded; else from the server (a real client against
    // `mcp-sim serve`): the pipe closed by the client right after the server wrote a message
    // for a request already over at the server, with other requests still running there.
    let client_view = ix.has(Side::Client);
    let view = if client_view {
        Side::Client
    } else {
        Side::Server
    };
    if !ix.has(view) {
        return;
    }
    for (i, e) in ix.trace.events.iter().enumerate() {
        let EventKind::Close {
            stream: None,
            by: Side::Client,
            ..
        } = e.kind
        else {
            continue;
        };
        if e.side != view {
            continue;
        }
        let outstanding = ix.requests.iter().any(|r| {
            let sent = if client_view {
                r.client_send
            } else {
                r.server_recv
            };
            sent.is_some() && outstanding_at(ix, r, i)
        });
        let late = (0..i)
            .rev()
            .take_while(|&j| s.t(j) + s.config.grace_ms >= e.t)
            .find(|&j| {
                if client_view {
                    late_message(ix, j)
                } else {
                    late_emission(ix, j)
                }
            });
        if let (true, Some(late)) = (outstanding, late) {
            let msg = "the client dropped its connection, and the requests on it, after a message for a finished request";
            s.flag(rule!("race-not-graceful"), vec![late, i], msg.into());
        }
    }
    if !client_view {
        return;
    }
    for r in &ix.requests {
        for &o in &r.outcomes {
            if !matches!(
                ix.trace.events[o].kind,
                EventKind::Outcome {
                    outcome: Outcome::Lost,
                    ..
                }
            ) {
                continue;
            }
            // A close at the very instant of the outcome explains it, whichever line a
            // recorder wrote first; so does the client's own close of the request's stream or
            // connection at that instant: it ended the request itself (a give-up, not a race),
            // and told the application so.
            let at = ix.t(o);
            let explained = ix.trace.events[r.created..=ix.instant_end(o)]
                .iter()
                .any(|e| match (&e.kind, e.side) {
                    (
                        EventKind::Close {
                            stream: None, by, ..
                        },
                        Side::Client,
                    ) => *by != Side::Client || e.t == at,
                    (
                        EventKind::Close {
                            stream: Some(st),
                            by,
                            ..
                        },
                        Side::Client,
                    ) => Some(*st) == r.stream && (*by != Side::Client || e.t == at),
                    _ => false,
                });
            if !explained {
                s.flag(rule!("race-not-graceful"), vec![r.created, o], format!("the client gave up {} as lost although nothing closed its stream or connection", s.name(r)));
            }
        }
    }
}

/// Whether event `j` is the server writing a response or progress for a request already over
/// at the server (answered before, or its cancel received).
fn late_emission(ix: &Index<'_>, j: usize) -> bool {
    let e = &ix.trace.events[j];
    if !matches!((&e.kind, e.side), (EventKind::Send(_), Side::Server)) {
        return false;
    }
    let req = match ix.msg(j) {
        Some(m @ (Message::Result(_) | Message::Error(_))) => m.id().and_then(|id| ix.by_id(id, j)),
        Some(Message::Progress(p)) => ix.by_token(&p.token, j),
        _ => return false,
    };
    req.is_some_and(|r| {
        let r = &ix.requests[r];
        [r.responses.first().copied(), r.server_cancel_seen]
            .into_iter()
            .flatten()
            .min()
            .is_some_and(|end| end < j)
    })
}

/// Whether event `j` is the client reading a response or progress for a request it no longer
/// waits for.
fn late_message(ix: &Index<'_>, j: usize) -> bool {
    let e = &ix.trace.events[j];
    if !matches!((&e.kind, e.side), (EventKind::Recv(_), Side::Client)) {
        return false;
    }
    let req = match ix.msg(j) {
        Some(m @ (Message::Result(_) | Message::Error(_))) => m.id().and_then(|id| ix.by_id(id, j)),
        Some(Message::Progress(p)) => ix.by_token(&p.token, j),
        _ => return false,
    };
    req.is_none_or(|r| ix.requests[r].client_end().is_some_and(|end| end < j))
}
