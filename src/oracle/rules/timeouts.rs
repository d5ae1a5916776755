//! §4 Timeouts: the client's deadlines against its recorded policy, and the hard maximum.

use super::Sink;
use crate::model::{Outcome, Transport};
use crate::oracle::index::Req;
use crate::trace::{EventKind, Side};
use crate::wire::Message;

/// Valid progress receipts of `r` in the client's view: its token, its stream (or a resume of
/// it), strictly increasing, before the client stopped waiting.
fn valid_progress_times(s: &Sink<'_, '_>, r: &Req, until: usize) -> Vec<u64> {
    let ix = s.ix;
    let mut last = f64::NEG_INFINITY;
    let mut times = Vec::new();
    for &i in r.client_progress.iter().filter(|&&i| i < until) {
        let Some(Message::Progress(p)) = ix.msg(i) else {
            continue;
        };
        // (A legacy stream resumed with `Last-Event-ID` carries its request's progress.)
        let stream = ix
            .wire(i)
            .and_then(|w| w.stream)
            .map(|st| ix.origin_stream(st));
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

pub(super) fn timeouts(s: &mut Sink<'_, '_>, r: &Req) {
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
        s.flag(rule!("timeout-maximum"), vec![sent, last], msg);
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
            s.flag(rule!("timeout-deadline"), vec![sent, fired], msg);
        }
        (Some(fired), None) => {
            let msg = format!(
                "{} timed out although its policy has no deadline",
                s.name(r)
            );
            s.flag(rule!("timeout-deadline"), vec![sent, fired], msg);
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
                s.flag(rule!("timeout-deadline"), vec![sent, last], msg);
            }
        }
        _ => {}
    }
}

/// Seen from the server, when the client was not recorded: a client whose policy was declared
/// (recorded on the request's receipt) must cancel a request still running at its deadline.
/// The deadline runs from the receipt and from the progress the server sent (a local client
/// reads them within the grace window); the cancel must reach the server within the grace
/// window after it. A cancel earlier than the deadline is the application's and is not judged.
pub(super) fn declared_deadline(s: &mut Sink<'_, '_>, r: &Req) {
    let ix = s.ix;
    if ix.has(Side::Client) || r.is_listen() {
        return;
    }
    let (Some(recv), Some(policy)) = (r.server_recv, r.policy) else {
        return;
    };
    let ended = [r.responses.first().copied(), r.server_cancel_seen]
        .into_iter()
        .flatten()
        .min();
    let mut last = f64::NEG_INFINITY;
    let mut progress = Vec::new();
    for &i in &r.emissions {
        if ended.is_some_and(|e| i >= e) {
            break;
        }
        if let Some(Message::Progress(p)) = ix.msg(i) {
            if p.progress > last {
                last = p.progress;
                progress.push(s.t(i));
            }
        }
    }
    let t_recv = s.t(recv);
    let Some(deadline) = expected_deadline(policy, t_recv, &progress, s.config.timer_tolerance_ms)
    else {
        return;
    };
    let grace = s.config.grace_ms;
    let end_t = ended.map_or(ix.trace.end(), |e| s.t(e));
    if end_t > deadline + grace {
        let last = ended.unwrap_or(ix.trace.events.len() - 1);
        let how = match (ended, r.server_cancel_seen) {
            (Some(e), Some(c)) if e == c => {
                format!("its cancel reached the server only at {end_t} ms")
            }
            (Some(_), _) => {
                format!("the server answered it at {end_t} ms and no cancel came before")
            }
            (None, _) => format!("it was still running at the server at {end_t} ms, not cancelled"),
        };
        let msg = format!(
            "{}: the declared policy puts its deadline at {deadline} ms ({} ms after the server received it); {how}",
            s.name(r),
            deadline - t_recv
        );
        s.flag(rule!("declared-deadline"), vec![recv, last], msg);
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

/// A client's `server/discover` that gets no answer is given up within
/// [`OracleConfig::discover_timeout_ms`](crate::oracle::OracleConfig::discover_timeout_ms)
/// plus the timer tolerance (§4: timeouts for all requests; the back-compat probe treats a
/// discover "not answered within a reasonable timeout" as a legacy server's). Giving up is
/// any sign that the client stopped waiting: its timer, a cancel (seen by either side), a
/// later request (the fallback `initialize`), or the connection or the request's stream
/// closed. A trace that ends sooner says nothing.
pub(super) fn discover_timeout(s: &mut Sink<'_, '_>, r: &Req) {
    let ix = s.ix;
    if r.method != "server/discover" || !r.responses.is_empty() || r.client_response.is_some() {
        return;
    }
    let created = r.created;
    let later_request = ix
        .requests
        .iter()
        .map(|q| q.created)
        .filter(|&c| c > created)
        .min();
    let closed = (created + 1..ix.trace.events.len()).find(|&i| match ix.trace.events[i].kind {
        EventKind::Close { stream: None, .. } => true,
        EventKind::Close {
            stream: Some(st), ..
        } => r.stream == Some(ix.origin_stream(st)),
        _ => false,
    });
    let given_up = [r.client_end(), r.server_cancel_seen, later_request, closed]
        .into_iter()
        .flatten()
        .min();
    let waited_until = given_up.map_or(ix.trace.end(), |g| s.t(g));
    let bound = s.config.discover_timeout_ms;
    let waited = waited_until.saturating_sub(s.t(created));
    if waited > bound + s.config.timer_tolerance_ms {
        let last = given_up.unwrap_or(ix.trace.events.len() - 1);
        let msg = match given_up {
            Some(_) => format!(
                "the client waited {waited} ms on its unanswered server/discover ({}), past {bound} ms",
                s.name(r)
            ),
            None => format!(
                "the client was still waiting on its unanswered server/discover ({}) {waited} ms after sending it, past {bound} ms",
                s.name(r)
            ),
        };
        s.flag(rule!("discover-timeout"), vec![created, last], msg);
    }
}
