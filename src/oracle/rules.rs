//! The rules, one function each, over the [`Index`].

use super::index::{Index, Req};
use super::{rule, Level, OracleConfig, Profile, Violation};
use crate::model::{Outcome, Transport};
use crate::trace::{EventKind, Side};
use crate::wire::{Message, META_SUBSCRIPTION_ID, METHOD_SUBSCRIPTIONS_ACKNOWLEDGED};

/// Collects violations for one check.
struct Sink<'a, 'c> {
    ix: &'a Index<'a>,
    config: &'c OracleConfig,
    out: Vec<Violation>,
}

impl Sink<'_, '_> {
    fn flag(&mut self, rule: &'static str, level: Level, events: Vec<usize>, message: String) {
        self.out.push(Violation {
            rule,
            level,
            events,
            message,
        });
    }

    fn t(&self, i: usize) -> u64 {
        self.ix.t(i)
    }

    fn name(&self, r: &Req) -> String {
        r.id.as_ref()
            .map_or_else(|| "?".into(), |id| format!("request {id}"))
    }
}

pub(super) fn check_all(ix: &Index<'_>, config: &OracleConfig) -> Vec<Violation> {
    let mut s = Sink {
        ix,
        config,
        out: Vec::new(),
    };
    message_shape(&mut s);
    request_ids(&mut s);
    progress(&mut s);
    server_cancels(&mut s);
    client_cancels(&mut s);
    for r in 0..ix.requests.len() {
        let req = &ix.requests[r];
        duplicate_response(&mut s, req);
        after_cancel(&mut s, req);
        cancel_on_timeout(&mut s, req);
        timeouts(&mut s, req);
        reset_needs_token(&mut s, req);
        late_delivery(&mut s, req);
        resources(&mut s, req);
        outcomes(&mut s, req);
    }
    listen_ack_first(&mut s);
    connection_races(&mut s);
    idle_cuts(&mut s);
    wire_integrity(&mut s);
    s.out
}

/// The side that wrote the message of event `i`, if it is judged here: sends are judged;
/// receipts only when the sender's own side was not recorded (so nothing is judged twice).
fn sender(ix: &Index<'_>, i: usize) -> Option<Side> {
    let e = &ix.trace.events[i];
    match (&e.kind, e.side) {
        (EventKind::Send(_), side @ (Side::Client | Side::Server)) => Some(side),
        (EventKind::Recv(_), Side::Client) if !ix.has(Side::Server) => Some(Side::Server),
        (EventKind::Recv(_), Side::Server) if !ix.has(Side::Client) => Some(Side::Client),
        _ => None,
    }
}

fn message_shape(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for i in 0..ix.trace.events.len() {
        let Some(from) = sender(ix, i) else { continue };
        let Some(decoded) = &ix.msgs[i] else { continue };
        let msg = match decoded {
            Err(e) => {
                let rule = if e.path.contains("progressToken") {
                    rule::PROGRESS_TOKEN_TYPE
                } else {
                    rule::MESSAGE_SHAPE
                };
                s.flag(
                    rule,
                    Level::Must,
                    vec![i],
                    format!("{} sent an invalid message: {e}", from.as_str()),
                );
                continue;
            }
            Ok(m) => m,
        };
        let problem = match (from, msg) {
            (Side::Client, Message::Progress(_)) => {
                Some("clients do not send notifications/progress in 2026-07-28")
            }
            (Side::Client, Message::Notification(_)) => {
                Some("the only notification a client sends is notifications/cancelled")
            }
            (Side::Client, Message::Result(_) | Message::Error(_)) => {
                Some("clients never send responses")
            }
            (Side::Server, Message::Request(_)) => Some("servers never send requests"),
            (Side::Server, Message::Result(r)) if r.result_type.is_none() => {
                Some("server results MUST carry resultType")
            }
            _ => None,
        };
        if let Some(p) = problem {
            s.flag(rule::MESSAGE_SHAPE, Level::Must, vec![i], p.into());
        }
    }
}

/// Whether request `r` is still outstanding at event `i`, in the client's view when the client
/// was recorded, else the server's.
fn outstanding_at(ix: &Index<'_>, r: &Req, i: usize) -> bool {
    let end = if ix.has(Side::Client) {
        r.client_end()
    } else {
        [r.responses.first().copied(), r.server_cancel_seen]
            .into_iter()
            .flatten()
            .min()
    };
    r.created < i && end.is_none_or(|e| e > i)
}

fn request_ids(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for (n, r) in ix.requests.iter().enumerate() {
        // The request's first sighting: the client's send, or the server's receipt when the
        // client was not recorded (a black-box client is judged by the server's view).
        let Some(id) = &r.id else { continue };
        let sent = r.created;
        for earlier in ix.requests[..n]
            .iter()
            .filter(|e| e.id.as_ref() == Some(id))
        {
            if outstanding_at(ix, earlier, sent) {
                let msg =
                    format!("id {id} is reused while the request that carried it is outstanding");
                s.flag(
                    rule::REQUEST_ID_UNIQUE,
                    Level::Must,
                    vec![earlier.created, sent],
                    msg,
                );
            } else {
                let msg = format!("id {id} is reused after the request that carried it ended");
                s.flag(
                    rule::REQUEST_ID_REUSE,
                    Level::Policy,
                    vec![earlier.created, sent],
                    msg,
                );
            }
        }
        let Some(token) = &r.token else { continue };
        for earlier in ix.requests[..n]
            .iter()
            .filter(|e| e.token.as_ref() == Some(token))
        {
            if outstanding_at(ix, earlier, sent) {
                let msg = format!(
                    "progressToken {token} is already carried by the outstanding {}",
                    s.name(earlier)
                );
                s.flag(
                    rule::PROGRESS_TOKEN_UNIQUE,
                    Level::Must,
                    vec![earlier.created, sent],
                    msg,
                );
            }
        }
    }
}

fn progress(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    let mut last: Vec<Option<(usize, f64)>> = vec![None; ix.requests.len()];
    for &i in &ix.emissions {
        let Some(Message::Progress(p)) = ix.msg(i) else {
            continue;
        };
        if p.meta
            .as_ref()
            .is_some_and(|m| m.contains_key(META_SUBSCRIPTION_ID))
        {
            s.flag(
                rule::PROGRESS_STREAM,
                Level::Must,
                vec![i],
                "progress never carries a subscriptionId".into(),
            );
        }
        let received =
            |r: &Req| !ix.has(Side::Server) || r.server_recv.is_some_and(|recv| recv < i);
        let Some(r) = ix
            .by_token(&p.token, i)
            .filter(|r| received(&ix.requests[*r]))
        else {
            s.flag(
                rule::PROGRESS_UNKNOWN_TOKEN,
                Level::Must,
                vec![i],
                format!(
                    "progressToken {} belongs to no request the server received",
                    p.token
                ),
            );
            continue;
        };
        let req = &ix.requests[r];
        if let Some(&done) = req.responses.iter().find(|&&d| d < i) {
            s.flag(
                rule::PROGRESS_AFTER_COMPLETION,
                Level::Must,
                vec![done, i],
                format!("progress for {} after its final response", s.name(req)),
            );
        }
        if req.transport == Some(Transport::Http) {
            let stream = ix.wire(i).and_then(|w| w.stream);
            if stream.is_some() && req.stream.is_some() && stream != req.stream {
                let msg = format!(
                    "progress for {} on stream {:?}, not on its own stream {:?}",
                    s.name(req),
                    stream,
                    req.stream
                );
                s.flag(
                    rule::PROGRESS_STREAM,
                    Level::Must,
                    vec![req.created, i],
                    msg,
                );
            }
        }
        if let Some((prev_i, prev)) = last[r] {
            let broken = match s.config.profile {
                Profile::Strict => p.progress <= prev,
                Profile::Lenient => p.progress < prev,
            };
            if broken {
                let msg = format!(
                    "progress {} after {} for {} does not increase",
                    p.progress,
                    prev,
                    s.name(req)
                );
                s.flag(rule::PROGRESS_MONOTONIC, Level::Must, vec![prev_i, i], msg);
            }
        }
        last[r] = Some((i, p.progress));
    }
}

fn server_cancels(s: &mut Sink<'_, '_>) {
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
            s.flag(rule::SERVER_CANCEL_NOT_LISTEN, Level::Must, vec![i], p);
        }
    }
}

fn client_cancels(s: &mut Sink<'_, '_>) {
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
                (_, Some(&first)) => Some((
                    vec![first, i],
                    format!("{} was already cancelled", c.request_id),
                )),
                _ => None,
            },
        };
        if let Some((events, p)) = problem {
            s.flag(rule::CANCEL_UNKNOWN_REQUEST, Level::Must, events, p);
        }
    }
}

fn duplicate_response(s: &mut Sink<'_, '_>, r: &Req) {
    if let [first, second, ..] = r.responses[..] {
        s.flag(
            rule::DUPLICATE_RESPONSE,
            Level::Must,
            vec![first, second],
            format!("{} answered twice", s.name(r)),
        );
    }
}

/// The point after which the server must send nothing for `r`, as an event index when the
/// server recorded it, else as an inferred time.
enum CancelPoint {
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
    let (method, params) = ix.request_params(send)?;
    let siblings: Vec<u64> = ix
        .requests
        .iter()
        .filter(|q| q.client_cancels.is_empty() && q.client_send != Some(send))
        .filter_map(|q| {
            let (q_send, q_answer) = (q.client_send?, q.client_response?);
            if q.timeout.is_some_and(|t| t < q_answer) {
                return None;
            }
            (ix.request_params(q_send)? == (method, params)).then(|| s.t(q_answer) - s.t(q_send))
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

fn after_cancel(s: &mut Sink<'_, '_>, r: &Req) {
    let Some(point) = cancel_point(s, r) else {
        return;
    };
    let (rule, level) = match r.transport {
        Some(Transport::Http) => (rule::DISCONNECT_IS_CANCEL, Level::Must),
        _ => match s.config.profile {
            Profile::Strict => (rule::RESPONSE_AFTER_CANCEL, Level::Must),
            Profile::Lenient => (rule::RESPONSE_AFTER_CANCEL, Level::Should),
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
        s.flag(rule, level, events, message);
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
        let (rule, level) = match r.transport {
            Some(Transport::Http) => (rule::DISCONNECT_IS_CANCEL, Level::Must),
            _ => (rule::WORK_AFTER_CANCEL, Level::Should),
        };
        s.flag(rule, level, vec![anchor, w], msg);
    }
}

fn cancel_on_timeout(s: &mut Sink<'_, '_>, r: &Req) {
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
    let deadline = s.t(a) + s.config.grace_ms;
    if r.client_cancels.iter().any(|&c| s.t(c) <= deadline) {
        return;
    }
    let (level, how) = match r.transport {
        Some(Transport::Http) => (Level::Should, "closing its stream"),
        _ => (Level::Must, "sending notifications/cancelled"),
    };
    s.flag(
        rule::CANCEL_ON_TIMEOUT,
        level,
        vec![a],
        format!("the client abandoned {} without {how}", s.name(r)),
    );
}

/// Valid progress receipts of `r` in the client's view: its token, its stream, strictly
/// increasing, before the client stopped waiting.
fn valid_progress_times(s: &Sink<'_, '_>, r: &Req, until: usize) -> Vec<u64> {
    let ix = s.ix;
    let mut last = f64::NEG_INFINITY;
    let mut times = Vec::new();
    for &i in r.client_progress.iter().filter(|&&i| i < until) {
        let Some(Message::Progress(p)) = ix.msg(i) else {
            continue;
        };
        let stream = ix.wire(i).and_then(|w| w.stream);
        if r.transport == Some(Transport::Http) && stream.is_some() && stream != r.stream {
            continue;
        }
        if p.progress > last {
            last = p.progress;
            times.push(s.t(i));
        }
    }
    times
}

fn timeouts(s: &mut Sink<'_, '_>, r: &Req) {
    let ix = s.ix;
    let Some(sent) = r.client_send else { return };
    if r.is_listen() {
        return;
    }
    let tol = s.config.timer_tolerance_ms;
    let t_sent = s.t(sent);
    let trace_end = ix.trace.end();
    // The client's own end of waiting other than by its timer.
    let other_end = [
        r.client_response,
        r.outcomes.iter().copied().find(|&o| {
            !matches!(
                ix.trace.events[o].kind,
                EventKind::Outcome {
                    outcome: Outcome::TimedOut,
                    ..
                }
            )
        }),
    ]
    .into_iter()
    .flatten()
    .filter(|&e| r.timeout.is_none_or(|t| e < t))
    .min();
    let end_i = r.client_end();
    let open_until = end_i.map_or(trace_end, |e| s.t(e));

    let policy_bound = r
        .policy
        .and_then(|p| p.hard_bound())
        .map(|d| d.as_millis() as u64);
    let bound = policy_bound.map_or(s.config.max_request_ms, |b| b.min(s.config.max_request_ms));
    if open_until.saturating_sub(t_sent) > bound + tol {
        let last = end_i.unwrap_or(ix.trace.events.len() - 1);
        let msg = format!(
            "{} stayed open {} ms, past its hard maximum of {} ms",
            s.name(r),
            open_until - t_sent,
            bound
        );
        s.flag(rule::TIMEOUT_MAXIMUM, Level::Should, vec![sent, last], msg);
    }

    let Some(policy) = r.policy else { return };
    let until = [r.timeout, other_end]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(ix.trace.events.len());
    // Progress that arrives within the tolerance of the deadline may or may not have beaten
    // the timer (trace times are coarser than the client's clock): accept either reading.
    let progress = valid_progress_times(s, r, until);
    let strict = expected_deadline(policy, t_sent, &progress, 0);
    let lenient = expected_deadline(policy, t_sent, &progress, tol);
    let deadline = match (strict, lenient) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    match (r.timeout, deadline) {
        (Some(fired), Some((early, late)))
            if s.t(fired).abs_diff(early) > tol
                && s.t(fired).abs_diff(late) > tol
                && other_end.is_none_or(|o| o > fired) =>
        {
            let msg = format!(
                "{} timed out at {} ms; its policy puts the deadline at {} ms",
                s.name(r),
                s.t(fired),
                early
            );
            s.flag(
                rule::TIMEOUT_DEADLINE,
                Level::Policy,
                vec![sent, fired],
                msg,
            );
        }
        (Some(fired), None) => {
            let msg = format!(
                "{} timed out although its policy has no deadline",
                s.name(r)
            );
            s.flag(
                rule::TIMEOUT_DEADLINE,
                Level::Policy,
                vec![sent, fired],
                msg,
            );
        }
        (None, Some((_, late))) => {
            let waited_until = other_end.map_or(trace_end, |e| s.t(e));
            if waited_until > late + tol {
                let last = other_end.unwrap_or(ix.trace.events.len() - 1);
                let msg = format!(
                    "{} should have timed out at {} ms but was still waiting at {} ms",
                    s.name(r),
                    late,
                    waited_until
                );
                s.flag(rule::TIMEOUT_DEADLINE, Level::Policy, vec![sent, last], msg);
            }
        }
        _ => {}
    }
}

/// The deadline `policy` gives a request sent at `sent` with valid progress at `progress`,
/// counting progress that arrives up to `slack` ms after the running deadline as in time.
fn expected_deadline(
    policy: crate::model::TimeoutPolicy,
    sent: u64,
    progress: &[u64],
    slack: u64,
) -> Option<u64> {
    use crate::time::Time;
    let mut deadline = policy
        .deadline(Time::from_millis(sent), None)
        .map(|(t, _)| t.as_millis());
    for &p in progress {
        match deadline {
            Some(d) if p < d + slack => {
                deadline = policy
                    .deadline(Time::from_millis(sent), Some(Time::from_millis(p)))
                    .map(|(t, _)| t.as_millis());
            }
            _ => break,
        }
    }
    deadline
}

fn late_delivery(s: &mut Sink<'_, '_>, r: &Req) {
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
                rule::LATE_RESPONSE_DELIVERED,
                Level::Should,
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
                rule::LATE_RESPONSE_DELIVERED,
                Level::Should,
                vec![first, d],
                format!(
                    "progress for {} reached the application after its outcome",
                    s.name(r)
                ),
            );
        }
    }
}

fn resources(s: &mut Sink<'_, '_>, r: &Req) {
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
            rule::RESOURCE_LEAK,
            Level::Should,
            events,
            format!("the backend resource of {} was never released", s.name(r)),
        );
    }
}

fn outcomes(s: &mut Sink<'_, '_>, r: &Req) {
    if let [first, second, ..] = r.outcomes[..] {
        s.flag(
            rule::SINGLE_OUTCOME,
            Level::Policy,
            vec![first, second],
            format!("{} has more than one outcome", s.name(r)),
        );
    }
    if s.config.complete && r.client_send.is_some() && r.outcomes.is_empty() && !r.is_listen() {
        s.flag(
            rule::SINGLE_OUTCOME,
            Level::Policy,
            vec![r.created],
            format!("{} never got an outcome", s.name(r)),
        );
    }
}

fn subscription_of(msg: &Message) -> Option<&serde_json::Value> {
    let meta = match msg {
        Message::Notification(n) => n.params.as_ref()?.get("_meta")?,
        Message::Progress(p) => return p.meta.as_ref()?.get(META_SUBSCRIPTION_ID),
        Message::Result(r) => r.result.get("_meta")?,
        _ => return None,
    };
    meta.get(META_SUBSCRIPTION_ID)
}

fn listen_ack_first(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for r in ix.requests.iter().filter(|r| r.is_listen()) {
        let Some(id) = &r.id else { continue };
        let first = ix
            .emissions
            .iter()
            .copied()
            .filter(|&e| e > r.created)
            .find(|&e| {
                ix.msg(e)
                    .and_then(subscription_of)
                    .is_some_and(|v| *v == id.to_json())
            });
        let Some(e) = first else { continue };
        let is_ack = matches!(ix.msg(e), Some(Message::Notification(n)) if n.method == METHOD_SUBSCRIPTIONS_ACKNOWLEDGED);
        if !is_ack {
            s.flag(
                rule::LISTEN_ACK_FIRST,
                Level::Must,
                vec![r.created, e],
                format!("the first message of subscription {id} is not its acknowledgement"),
            );
        }
    }
}

/// The client dropped its connection because of a late message, or gave up a request as lost
/// with no close by the server or an intermediary to explain it (claude-code #51073,
/// typescript-sdk #2580). Closing the connection to shut down is allowed (§9 C23); closing it
/// right after a message for a finished request, with other requests outstanding, is not.
fn connection_races(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if !ix.has(Side::Client) {
        return;
    }
    for (i, e) in ix.trace.events.iter().enumerate() {
        let (
            Side::Client,
            EventKind::Close {
                stream: None,
                by: Side::Client,
                ..
            },
        ) = (e.side, &e.kind)
        else {
            continue;
        };
        let outstanding = ix
            .requests
            .iter()
            .any(|r| r.client_send.is_some() && outstanding_at(ix, r, i));
        let late = (0..i)
            .rev()
            .take_while(|&j| s.t(j) + s.config.grace_ms >= e.t)
            .find(|&j| late_message(ix, j));
        if let (true, Some(late)) = (outstanding, late) {
            let msg = "the client dropped its connection, and the requests on it, after a message for a finished request";
            s.flag(
                rule::RACE_NOT_GRACEFUL,
                Level::Must,
                vec![late, i],
                msg.into(),
            );
        }
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
            let explained = ix.trace.events[r.created..o]
                .iter()
                .any(|e| match (&e.kind, e.side) {
                    (
                        EventKind::Close {
                            stream: None, by, ..
                        },
                        Side::Client,
                    ) => *by != Side::Client,
                    (
                        EventKind::Close {
                            stream: Some(st),
                            by,
                            ..
                        },
                        Side::Client,
                    ) => Some(*st) == r.stream && *by != Side::Client,
                    _ => false,
                });
            if !explained {
                s.flag(rule::RACE_NOT_GRACEFUL, Level::Must, vec![r.created, o], format!("the client gave up {} as lost although nothing closed its stream or connection", s.name(r)));
            }
        }
    }
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

fn reset_needs_token(s: &mut Sink<'_, '_>, r: &Req) {
    let (Some(sent), Some(policy)) = (r.client_send, r.policy) else {
        return;
    };
    if policy.reset_timeout_on_progress && r.token.is_none() {
        s.flag(
            rule::RESET_NEEDS_TOKEN,
            Level::Policy,
            vec![sent],
            format!(
                "{} resets its timer on progress but asks for none",
                s.name(r)
            ),
        );
    }
}

/// An intermediary cut a stream for idleness while its request was still outstanding.
fn idle_cuts(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for (i, e) in ix.trace.events.iter().enumerate() {
        let EventKind::Close {
            stream: Some(st),
            reason: Some(reason),
            ..
        } = &e.kind
        else {
            continue;
        };
        if reason != "idle" {
            continue;
        }
        let Some(r) = ix
            .requests
            .iter()
            .rev()
            .find(|r| r.stream == Some(*st) && r.created < i)
        else {
            continue;
        };
        let answered =
            r.responses.iter().any(|&d| d < i) || r.client_response.is_some_and(|c| c < i);
        // A server that never received the request (the network lost it) cannot keep it alive.
        if ix.has(Side::Server) && r.server_recv.is_none_or(|recv| recv > i) {
            continue;
        }
        let first_report = r.closes.iter().find(|&&c| matches!(&ix.trace.events[c].kind, EventKind::Close { reason: Some(x), .. } if x == "idle")) == Some(&i);
        if !answered && first_report {
            s.flag(rule::IDLE_STREAM_CUT, Level::Policy, vec![r.created, i], format!("the stream of {} stayed silent until an intermediary cut it for idleness; send progress or keep-alives more often", s.name(r)));
        }
    }
}

/// The client read text that does not decode on a channel where the server wrote only valid
/// messages: the framing in between split or corrupted one.
fn wire_integrity(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if !ix.has(Side::Server) || !ix.has(Side::Client) {
        return;
    }
    for (i, e) in ix.trace.events.iter().enumerate() {
        let (Side::Client, EventKind::Recv(w)) = (e.side, &e.kind) else {
            continue;
        };
        if !matches!(ix.msgs[i], Some(Err(_))) {
            continue;
        }
        let server_sent_valid = ix.trace.events[..i].iter().enumerate().any(|(j, x)| {
            matches!(&x.kind, EventKind::Send(sw) if x.side == Side::Server && sw.stream == w.stream && sw.transport == w.transport)
                && matches!(ix.msgs[j], Some(Ok(_)))
        });
        let server_sent_invalid = ix.trace.events[..i].iter().enumerate().any(|(j, x)| {
            matches!(&x.kind, EventKind::Send(sw) if x.side == Side::Server && sw.stream == w.stream && sw.transport == w.transport)
                && matches!(ix.msgs[j], Some(Err(_)))
        });
        if server_sent_valid && !server_sent_invalid {
            s.flag(rule::WIRE_INTEGRITY, Level::Must, vec![i], "the client read text the server never wrote: the framing split or corrupted a message".into());
        }
    }
}
