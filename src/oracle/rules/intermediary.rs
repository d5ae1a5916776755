//! The intermediary rules ([`crate::oracle::hops`]): `cancel-forwarded`,
//! `cancel-answered-locally`, `late-result-forwarded`, `progress-forwarded`,
//! `request-id-mapping` and `intermediary-timeout`, comparing the front hop's index with the
//! upstream hop's. The pairing of requests and the comparison of answers are described in the
//! docs of `hops`.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::model::Transport;
use crate::oracle::index::{Index, Req};
use crate::oracle::{Level, OracleConfig, Violation};
use crate::trace::{EventKind, Side, FAULT_BLACKHOLE, FAULT_PARTITION};
use crate::wire::{Era, Message, METHOD_TOOLS_CALL};

/// One upstream connection, as the intermediary rules read it.
pub(in crate::oracle) struct BackConn<'a, 't> {
    /// Its index.
    pub ix: &'a Index<'t>,
    /// Each of its events' index in the whole trace.
    pub origin: &'a [usize],
    /// Its number, where there are several.
    pub conn: Option<u32>,
}

/// The intermediary rules' violations over the front hop's index and the upstream
/// connections'; events are given as indices of the whole trace through each hop's `origin`,
/// and `end` is the trace's last time (what would have happened later was not seen).
pub(in crate::oracle) fn across(
    f: &Index<'_>,
    backs: &[BackConn<'_, '_>],
    front_origin: &[usize],
    config: &OracleConfig,
    end: u64,
) -> Vec<Violation> {
    let faults: Vec<Vec<(u64, u64)>> = backs.iter().map(|b| link_faults(b.ix)).collect();
    let pairs = pairs(f, backs, &faults);
    Across {
        pairs,
        faults: faults.first().cloned().unwrap_or_default(),
        all_faults: faults,
        f,
        b: backs[0].ix,
        back_origin: backs[0].origin,
        conn: 0,
        backs,
        front_origin,
        grace: config.grace_ms,
        tolerance: config.timer_tolerance_ms,
        timeout: config.intermediary_timeout_ms,
        end,
        out: Vec::new(),
    }
    .judge()
}

/// A front `tools/call` and the upstream request that serves it, if one does: indices into
/// the front's [`Index::requests`] and (connection, request) into the upstream's.
struct Pair {
    front: usize,
    back: Option<(usize, usize)>,
}

/// Pairs every front `tools/call` the client sent with the upstream request, on whichever
/// connection, that carries the same call (see the module docs). A front request the
/// intermediary dropped with its whole front connection, unanswered, after the upstream
/// crashed during that connection's life, is not paired with an upstream request that arrived
/// after the crash: that one came from a later connection (a retried call has the same
/// params), and the dropped one died with the crashed upstream.
fn pairs(f: &Index<'_>, backs: &[BackConn<'_, '_>], faults: &[Vec<(u64, u64)>]) -> Vec<Pair> {
    let calls = |ix: &Index<'_>| -> Vec<(usize, u64, Value)> {
        ix.requests
            .iter()
            .enumerate()
            .filter(|(_, r)| r.method == METHOD_TOOLS_CALL)
            .filter_map(|(k, r)| {
                let (_, params) = ix.request_params(r.created)?;
                Some((k, ix.t(r.created), Value::Object(params.clone())))
            })
            .collect()
    };
    let crashes: Vec<u64> = faults
        .iter()
        .flatten()
        .filter(|(a, b)| a == b)
        .map(|&(a, _)| a)
        .collect();
    let mut upstream: Vec<((usize, usize), u64, Value)> = backs
        .iter()
        .enumerate()
        .flat_map(|(c, b)| calls(b.ix).into_iter().map(move |(u, t, p)| ((c, u), t, p)))
        .collect();
    upstream.sort_by_key(|(_, t, _)| *t);
    let mut taken = BTreeSet::new();
    calls(f)
        .into_iter()
        .filter(|(k, _, _)| f.requests[*k].client_send.is_some())
        .map(|(k, sent, params)| {
            let fr = &f.requests[k];
            // The crashes the front connection that dropped `fr` lived through.
            let died_with: Vec<u64> = match connection_dropped(f, fr) {
                Some(d) => {
                    let opened = connection_opened(f, fr.created);
                    crashes
                        .iter()
                        .copied()
                        .filter(|c| (opened..=f.t(d)).contains(c))
                        .collect()
                }
                None => Vec::new(),
            };
            let back = upstream
                .iter()
                .find(|(u, t, p)| {
                    !taken.contains(u)
                        && *t >= sent
                        && *p == params
                        && !died_with.iter().any(|c| c <= t)
                })
                .map(|(u, _, _)| *u);
            if let Some(u) = back {
                taken.insert(u);
            }
            Pair { front: k, back }
        })
        .collect()
}

/// When the front connection that event `i` was on opened: the time of the last close of a
/// whole front connection before it, or 0.
fn connection_opened(f: &Index<'_>, i: usize) -> u64 {
    f.trace.events[..i]
        .iter()
        .rev()
        .find(|e| matches!(e.kind, EventKind::Close { stream: None, .. }))
        .map_or(0, |e| e.t)
}

/// When the server end closed the whole front connection after `fr` was created and before
/// any answer to it arrived.
fn connection_dropped(f: &Index<'_>, fr: &Req) -> Option<usize> {
    (fr.created..f.trace.events.len()).find(|&i| {
        fr.client_response.is_none_or(|r| i < r)
            && matches!(
                f.trace.events[i].kind,
                EventKind::Close {
                    stream: None,
                    by: Side::Server,
                    ..
                }
            )
    })
}

/// What a response answered, in a form both hops share: a result's `content` and whether it
/// is an error (or, without `content`, the result without its `_meta`); an error's code.
/// Intermediaries re-encode what they pass on (an SDK adds `isError: false`, drops members it
/// does not model), so only what every faithful one keeps is compared.
fn answer(ix: &Index<'_>, i: usize) -> Option<Value> {
    let msg = ix.wire(i)?.msg.as_ref()?;
    if let Some(Value::Object(result)) = msg.get("result") {
        let is_error = result.get("isError") == Some(&Value::Bool(true));
        return Some(match result.get("content") {
            Some(content) => serde_json::json!({"content": content, "isError": is_error}),
            None => {
                let mut result = result.clone();
                result.remove("_meta");
                result.remove("isError");
                Value::Object(result)
            }
        });
    }
    let code = msg.get("error")?.get("code")?;
    Some(serde_json::json!({ "error": code }))
}

/// Whether the front's answer `front` passes on the upstream's `upstream`: equal, or an
/// upstream error turned into a tool result flagged `isError` (what SDK-built intermediaries
/// do with an exception from upstream).
fn passes_on(front: Option<&Value>, upstream: Option<&Value>) -> bool {
    match (front, upstream) {
        (Some(f), Some(u)) if f == u => true,
        (Some(f), Some(u)) => {
            u.get("error").is_some() && f.get("isError") == Some(&Value::Bool(true))
        }
        _ => false,
    }
}

/// The faults the upstream hop's recording names on its link: a simulated partition (held
/// for `ms`) or blackhole (lost for `ms`), and a crash of the upstream (its close of the whole
/// connection). What was in flight then arrived late or never, through no fault of the
/// intermediary's, so the rules ask for evidence instead of a deadline across such a span.
fn link_faults(b: &Index<'_>) -> Vec<(u64, u64)> {
    b.trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Fault { fault, ms, .. }
                if fault == FAULT_BLACKHOLE || fault == FAULT_PARTITION =>
            {
                Some((e.t, e.t + ms.unwrap_or(0)))
            }
            EventKind::Close {
                stream: None,
                by: Side::Server,
                ..
            } => Some((e.t, e.t)),
            _ => None,
        })
        .collect()
}

/// The state of one judgement across the hops. The per-pair rules read the upstream
/// connection of the pair at hand through `b`, `back_origin` and `faults`, which
/// [`Across::select`] points at it.
struct Across<'a, 't> {
    pairs: Vec<Pair>,
    /// Spans of time `[from, until]` in which the selected connection's link delayed or lost
    /// what crossed it, or the instant `[t, t]` its upstream crashed ([`link_faults`]).
    faults: Vec<(u64, u64)>,
    /// Each connection's faults.
    all_faults: Vec<Vec<(u64, u64)>>,
    f: &'a Index<'t>,
    /// The selected upstream connection's index.
    b: &'a Index<'t>,
    front_origin: &'a [usize],
    /// The selected upstream connection's origin.
    back_origin: &'a [usize],
    /// The selected connection.
    conn: usize,
    backs: &'a [BackConn<'a, 't>],
    grace: u64,
    /// Tolerance of the intermediary's timer against its documented timeout.
    tolerance: u64,
    /// The intermediary's documented request timeout.
    timeout: Option<u64>,
    /// The time of the trace's last event: what happened later was not seen.
    end: u64,
    out: Vec<Violation>,
}

/// An event of one hop, for a violation's list: the front's, the selected upstream
/// connection's, or another connection's.
#[derive(Clone, Copy)]
enum At {
    Front(usize),
    Back(usize),
    Other(usize, usize),
}

impl<'a, 't> Across<'a, 't> {
    fn judge(mut self) -> Vec<Violation> {
        for p in 0..self.pairs.len() {
            let Pair { front, back } = self.pairs[p];
            let fr = &self.f.requests[front];
            if let Some((c, _)) = back {
                self.select(c);
            }
            self.cancel_answered_locally(fr, back.map(|(_, u)| u));
            self.kept_past_timeout(fr);
            let Some((_, back)) = back else { continue };
            let br = &self.b.requests[back];
            self.cut_before_timeout(fr, br);
            self.cancel_forwarded(fr, br);
            self.late_result_forwarded(fr, br);
            self.progress_forwarded(fr, br);
            self.answer_mapped(fr, back);
        }
        self.cancels_mapped();
        self.out
    }

    /// `request 7`, and its connection where there are several: an upstream request of the
    /// selected connection, for messages.
    fn upstream(&self, r: &Req) -> String {
        self.upstream_on(self.conn, r)
    }

    /// `request 7 on connection 2`: an upstream request of connection `c`, for messages.
    fn upstream_on(&self, c: usize, r: &Req) -> String {
        match self.backs[c].conn {
            Some(n) => format!("{} on connection {n}", name(r)),
            None => name(r),
        }
    }

    /// Points the per-pair rules at upstream connection `c`.
    fn select(&mut self, c: usize) {
        let back: &'a BackConn<'a, 't> = &self.backs[c];
        self.b = back.ix;
        self.back_origin = back.origin;
        self.faults = self.all_faults[c].clone();
        self.conn = c;
    }

    /// The upstream request a pair's upstream side is, on its own connection.
    fn back_req(&self, (c, u): (usize, usize)) -> (&'a Index<'t>, &'a Req) {
        let ix: &'a Index<'t> = self.backs[c].ix;
        (ix, &ix.requests[u])
    }

    fn flag(&mut self, rule: &'static str, era: Era, events: &[At], message: String) {
        self.flag_at_most(rule, era, Level::Must, events, message);
    }

    /// Reports `rule` at its catalog level in `era` (the hop whose rules it applies), or at
    /// `at_most` where that is weaker (a caller may soften a rule, never make it stricter).
    fn flag_at_most(
        &mut self,
        rule: &'static str,
        era: Era,
        at_most: Level,
        events: &[At],
        message: String,
    ) {
        let level = Self::level(rule, era).max(at_most);
        self.push(rule, level, events, message, None);
    }

    /// Reports a one-hop rule broken on the upstream connection being judged, at its
    /// catalog level in that connection's era, its hop and connection named.
    fn flag_upstream(&mut self, rule: &'static str, events: &[At], message: String) {
        let level = Self::level(rule, self.b.era);
        self.push(
            rule,
            level,
            events,
            message,
            Some(self.backs[self.conn].conn),
        );
    }

    /// The one place a finding is made: its events placed in the whole trace, and for a
    /// one-hop finding of the upstream (`upstream`: its connection) the hop.
    fn push(
        &mut self,
        rule: &'static str,
        level: Level,
        events: &[At],
        message: String,
        upstream: Option<Option<u32>>,
    ) {
        let events = events
            .iter()
            .map(|at| match *at {
                At::Front(i) => self.front_origin[i],
                At::Back(i) => self.back_origin[i],
                At::Other(c, i) => self.backs[c].origin[i],
            })
            .collect();
        self.out.push(Violation {
            rule,
            level,
            events,
            message,
            hop: upstream.map(|_| crate::trace::Hop::Back),
            conn: upstream.flatten(),
        });
    }

    /// Whether a link fault touches the span `[from, until]`.
    fn faulted(&self, from: u64, until: u64) -> bool {
        self.faults.iter().any(|&(a, b)| a <= until && b >= from)
    }

    /// The catalog's level of `rule` in `era`.
    fn level(rule: &str, era: Era) -> Level {
        crate::oracle::rule_info(rule)
            .and_then(|r| r.level_in(era))
            .unwrap_or(Level::Should)
    }

    /// When the front request ended without the upstream's answer reaching it: the client's
    /// cancel (before any answer), or a final response the intermediary made up itself.
    fn front_gave_up(&self, fr: &Req, br: &Req) -> Option<usize> {
        let cancel = fr
            .client_cancels
            .first()
            .copied()
            .filter(|&c| fr.client_response.is_none_or(|r| r > c));
        let made_up = fr
            .client_response
            .filter(|&r| !self.upstream_answered(br, r));
        let cut = self.front_closed(fr);
        cancel.into_iter().chain(made_up).chain(cut).min()
    }

    /// The intermediary's close of the front request's stream (HTTP) or of the whole front
    /// connection after the request was sent and before its answer arrived, whichever came
    /// first.
    fn front_closed(&self, fr: &Req) -> Option<usize> {
        let by_server = |i: &usize| {
            fr.client_response.is_none_or(|r| *i < r)
                && matches!(
                    self.f.trace.events[*i].kind,
                    EventKind::Close {
                        by: Side::Server,
                        ..
                    }
                )
        };
        let stream = fr.closes.iter().copied().find(by_server);
        stream
            .into_iter()
            .chain(connection_dropped(self.f, fr))
            .min()
    }

    /// How the intermediary ended the front request itself, if it did before the client
    /// ended it: a final response the upstream did not send, or a close ([`Self::front_closed`]).
    /// (An answer some other upstream request got is `request-id-mapping`'s.)
    fn front_cut(&self, fr: &Req) -> Option<usize> {
        let made_up = fr.client_response.filter(|&r| {
            !self.backs.iter().any(|b| {
                b.ix.requests
                    .iter()
                    .any(|br| answered_by(self.f, b.ix, br, r, self.tolerance))
            })
        });
        let cut = made_up.into_iter().chain(self.front_closed(fr)).min()?;
        let client_first = [fr.client_cancels.first().copied(), fr.timeout]
            .into_iter()
            .flatten()
            .any(|e| e < cut);
        (!client_first).then_some(cut)
    }

    /// `intermediary-timeout`, the early half: the intermediary cut a front request while
    /// its upstream request still ran (unanswered, no link fault), sooner than its documented
    /// timeout after the client sent it, or at all when it documents none.
    fn cut_before_timeout(&mut self, fr: &Req, br: &Req) {
        let Some(cut) = self.front_cut(fr) else {
            return;
        };
        let (sent, at) = (self.f.t(fr.created), self.f.t(cut));
        let upstream_done = br.responses.first().is_some_and(|&u| self.b.t(u) <= at);
        if upstream_done || self.faulted(self.b.t(br.created), at) {
            return;
        }
        let elapsed = at.saturating_sub(sent);
        let allowed = match self.timeout {
            Some(t) if elapsed + self.tolerance >= t => return,
            Some(t) => format!("its documented timeout is {t} ms"),
            None => "it documents no timeout".into(),
        };
        let how = match self.f.trace.events[cut].kind {
            EventKind::Close { .. } => "closed it",
            _ => "answered it",
        };
        self.flag(
            rule!("intermediary-timeout"),
            self.f.era,
            &[At::Front(fr.created), At::Front(cut), At::Back(br.created)],
            format!(
                "the intermediary {how} at {at} ms, {elapsed} ms after front {} was sent, while \
                 upstream {} still ran; {allowed}",
                name(fr),
                self.upstream(br)
            ),
        );
    }

    /// `intermediary-timeout`, the late half: with a documented timeout, a front request
    /// left waiting longer than the timeout plus the grace window after it was sent or after
    /// a progress notification reached the client (progress may restart the intermediary's
    /// timer: the lenient reading), with nothing else arriving in between.
    fn kept_past_timeout(&mut self, fr: &Req) {
        let Some(t) = self.timeout else { return };
        let Some(sent) = fr.client_send else { return };
        if fr.is_listen() {
            return;
        }
        let ended = fr
            .client_end()
            .into_iter()
            .chain(self.front_closed(fr))
            .map(|e| self.f.t(e))
            .min()
            .unwrap_or(self.end);
        let mut alive: Vec<u64> = fr
            .client_progress
            .iter()
            .chain([&sent])
            .map(|&i| self.f.t(i))
            .filter(|&a| a < ended)
            .collect();
        alive.sort_unstable();
        // The first moment the request had been idle for the timeout plus grace.
        let overdue = alive.iter().enumerate().find_map(|(k, &last)| {
            let due = last + t + self.grace;
            let next = alive.get(k + 1).copied().unwrap_or(ended);
            (next > due && due <= self.end).then_some((last, due))
        });
        let Some((last, due)) = overdue else { return };
        self.flag(
            rule!("intermediary-timeout"),
            self.f.era,
            &[At::Front(sent)],
            format!(
                "front {} was still waiting at {due} ms, idle since {last} ms: the \
                 intermediary's documented timeout of {t} ms (plus {} ms grace) had passed \
                 without its ending the request",
                name(fr),
                self.grace
            ),
        );
    }

    /// Whether the front's response `r` is the upstream's own answer to `br` (of the
    /// selected connection), sent no later than the front received it.
    fn upstream_answered(&self, br: &Req, r: usize) -> bool {
        answered_by(self.f, self.b, br, r, self.tolerance)
    }

    /// `cancel-forwarded`: the upstream request hears of the front's end within the grace
    /// window, unless it had already answered by then.
    fn cancel_forwarded(&mut self, fr: &Req, br: &Req) {
        let Some(gave_up) = self.front_gave_up(fr, br) else {
            return;
        };
        let mut due = self.f.t(gave_up) + self.grace;
        if self.faulted(self.f.t(gave_up), due) {
            // The link was faulty: overdue only once a request the client sent after giving up
            // reached the upstream (an intermediary passes messages on in order).
            let later = self.pairs.iter().filter_map(|p| {
                let sent = self.f.requests[p.front].client_send?;
                let (ix, back) = self.back_req(p.back?);
                (sent > gave_up).then(|| ix.t(back.created))
            });
            match later.min() {
                Some(t) => due = t,
                None => return,
            }
        }
        if due > self.end {
            return;
        }
        // An upstream that crashed while the request ran took it along: nothing to cancel.
        let created = self.b.t(br.created);
        if self
            .faults
            .iter()
            .any(|&(a, b)| a == b && (created..=due).contains(&a))
        {
            return;
        }
        let answered = br.responses.first().is_some_and(|&u| self.b.t(u) <= due);
        let heard = br.server_cancel_seen.filter(|&c| self.b.t(c) <= due);
        // An intermediary that ends the whole upstream connection (a child per request whose
        // input it closes) ends every request on it: nothing is left running to cancel.
        let closed = (br.created..self.b.trace.events.len()).any(|i| {
            let e = &self.b.trace.events[i];
            e.side == Side::Server
                && self.b.t(i) <= due
                && matches!(
                    e.kind,
                    EventKind::Close {
                        stream: None,
                        by: Side::Client,
                        ..
                    }
                )
        });
        if answered || heard.is_some() || closed {
            return;
        }
        let modern_http = self.b.era == Era::Modern && br.transport == Some(Transport::Http);
        // A 2026-07-28 HTTP upstream left open after the front's cancel breaks a SHOULD:
        // the stream's close is the cancel, and a call never cancelled still ends.
        let at_most = if modern_http {
            Level::Should
        } else {
            Level::Must
        };
        let form = if modern_http {
            "closing its stream"
        } else {
            "notifications/cancelled naming it"
        };
        let how = if fr.client_cancels.contains(&gave_up) {
            "the client cancelled"
        } else {
            "the intermediary answered"
        };
        let after = match (br.server_cancel_seen, br.responses.first()) {
            (Some(c), _) => format!("the cancel reached it only at {} ms", self.b.t(c)),
            (None, Some(&u)) => format!("it ran on and answered at {} ms", self.b.t(u)),
            (None, None) => "it was never cancelled".into(),
        };
        let mut events = vec![At::Front(gave_up), At::Back(br.created)];
        if let Some(&u) = br.responses.first() {
            events.push(At::Back(u));
        }
        self.flag_at_most(
            rule!("cancel-forwarded"),
            self.b.era,
            at_most,
            &events,
            format!(
                "{how} front {} at {} ms, but its upstream {} was not told within {} ms (in {} \
                 the cancel is {form}): {after}",
                name(fr),
                self.f.t(gave_up),
                self.upstream(br),
                self.grace,
                self.b.era.version()
            ),
        );
    }

    /// `cancel-answered-locally`: after the client's cancel, a final response on the front
    /// that the upstream did not send.
    fn cancel_answered_locally(&mut self, fr: &Req, back: Option<usize>) {
        let (Some(&cancel), Some(r)) = (fr.client_cancels.first(), fr.client_response) else {
            return;
        };
        if r < cancel {
            return;
        }
        let from_upstream = back.is_some_and(|b| self.upstream_answered(&self.b.requests[b], r));
        if from_upstream {
            return;
        }
        let what = match self.f.msg(r) {
            Some(Message::Error(_)) => "an error",
            _ => "a result",
        };
        self.flag(
            rule!("cancel-answered-locally"),
            self.f.era,
            &[At::Front(cancel), At::Front(r)],
            format!(
                "the client cancelled {} at {} ms and got {what} for it at {} ms that the \
                 upstream never sent: the intermediary answered the cancel itself",
                name(fr),
                self.f.t(cancel),
                self.f.t(r)
            ),
        );
    }

    /// `late-result-forwarded`: the upstream answered after the cancel had reached it (or
    /// well after the front's cancel), and that answer still reached the front.
    fn late_result_forwarded(&mut self, fr: &Req, br: &Req) {
        let (Some(&cancel), Some(r)) = (fr.client_cancels.first(), fr.client_response) else {
            return;
        };
        if r < cancel {
            return;
        }
        let front_answer = answer(self.f, r);
        let late = br.responses.iter().copied().find(|&u| {
            let t = self.b.t(u);
            let after_cancel =
                br.server_cancel_seen.is_some_and(|c| c < u) || t > self.f.t(cancel) + self.grace;
            after_cancel
                && t <= self.f.t(r) + self.tolerance
                && passes_on(front_answer.as_ref(), answer(self.b, u).as_ref())
        });
        let Some(u) = late else { return };
        self.flag(
            rule!("late-result-forwarded"),
            self.f.era,
            &[At::Front(cancel), At::Back(u), At::Front(r)],
            format!(
                "the client cancelled {} at {} ms; the upstream answered {} at {} ms, after the \
                 cancel, and the intermediary passed that answer on at {} ms",
                name(fr),
                self.f.t(cancel),
                self.upstream(br),
                self.b.t(u),
                self.f.t(r)
            ),
        );
    }

    /// `progress-forwarded`: every progress the upstream sent while the front still waited
    /// (by more than the grace window) reached the front with the client's token.
    fn progress_forwarded(&mut self, fr: &Req, br: &Req) {
        if fr.token.is_none() {
            return;
        }
        let front_end = fr.client_end().map_or(self.end, |e| self.f.t(e));
        let values = |ix: &Index<'_>, events: &[usize]| -> Vec<(usize, f64)> {
            events
                .iter()
                .filter_map(|&i| match ix.msg(i) {
                    Some(Message::Progress(p)) => Some((i, p.progress)),
                    _ => None,
                })
                .collect()
        };
        let delivered = values(self.f, &fr.client_progress);
        // Across a link fault a notification may arrive late or never: it is demanded only
        // when something the upstream sent later for this request reached the client (a
        // later progress, or its answer), as what crosses one connection keeps its order.
        let answer_sent = fr.client_response.and_then(|r| {
            br.responses
                .iter()
                .map(|&u| self.b.t(u))
                .find(|&t| t <= self.f.t(r) + self.tolerance && self.upstream_answered(br, r))
        });
        let later_seen = |i: usize, v: f64| {
            answer_sent.is_some_and(|t| t >= self.b.t(i)) || delivered.iter().any(|&(_, d)| d > v)
        };
        let sent: Vec<(usize, f64)> = values(self.b, &br.emissions)
            .into_iter()
            .filter(|&(i, v)| {
                let t = self.b.t(i);
                match self.faulted(t, front_end) {
                    false => t + self.grace <= front_end,
                    true => later_seen(i, v),
                }
            })
            .collect();
        let missing: Vec<&(usize, f64)> = sent
            .iter()
            .filter(|(_, v)| !delivered.iter().any(|(_, d)| d == v))
            .collect();
        let Some(&&(first, _)) = missing.first() else {
            return;
        };
        let mut events = vec![At::Front(fr.created), At::Back(first)];
        if let Some(e) = fr.client_end() {
            events.push(At::Front(e));
        }
        self.flag(
            rule!("progress-forwarded"),
            self.f.era,
            &events,
            format!(
                "the upstream sent {} progress notifications for {} while front {} still \
                 waited; {} of them never reached the client (it got {})",
                sent.len(),
                self.upstream(br),
                name(fr),
                missing.len(),
                delivered.len()
            ),
        );
    }

    /// `request-id-mapping`, responses: the front's answer is another upstream request's.
    fn answer_mapped(&mut self, fr: &Req, back: usize) {
        let Some(r) = fr.client_response else { return };
        let br = &self.b.requests[back];
        let Some(front_answer) = answer(self.f, r) else {
            return;
        };
        let own: Vec<Value> = br
            .responses
            .iter()
            .filter_map(|&u| answer(self.b, u))
            .collect();
        if own.is_empty() || own.iter().any(|o| passes_on(Some(&front_answer), Some(o))) {
            return;
        }
        let here = (self.conn, back);
        let other = self.pairs.iter().filter_map(|p| p.back).find_map(|o| {
            (o != here).then_some(())?;
            let (ix, or) = self.back_req(o);
            or.responses
                .iter()
                .copied()
                .find(|&u| {
                    ix.t(u) <= self.f.t(r) + self.tolerance
                        && answer(ix, u).as_ref() == Some(&front_answer)
                })
                .map(|u| (o, u))
        });
        let Some((o, u)) = other else { return };
        let (ix, or) = self.back_req(o);
        self.flag(
            rule!("request-id-mapping"),
            self.b.era,
            &[At::Front(fr.created), At::Other(o.0, u), At::Front(r)],
            format!(
                "front {} got the answer the upstream gave {} (at {} ms), not its own upstream \
                 {}'s: the intermediary mixed the ids",
                name(fr),
                self.upstream_on(o.0, or),
                ix.t(u),
                self.upstream(br)
            ),
        );
    }

    /// `request-id-mapping`, cancels: an upstream request was cancelled while its front
    /// request still waited, neither cancelled nor ending within the grace window.
    fn cancels_mapped(&mut self) {
        for p in 0..self.pairs.len() {
            let Pair { front, back } = self.pairs[p];
            let Some((c, back)) = back else { continue };
            self.select(c);
            let (fr, br) = (&self.f.requests[front], &self.b.requests[back]);
            self.cancel_after_answer(fr, back);
            let Some(c) = br.server_cancel_seen else {
                continue;
            };
            let t = self.b.t(c);
            let front_cancel = fr.client_cancels.first().map(|&x| self.f.t(x));
            // The intermediary's own end of the front request (its answer or close) may reach
            // the client a little after it cancelled upstream; the client's cancel may not: an
            // intermediary passes a cancel on only after it got it.
            let ended = fr
                .client_response
                .into_iter()
                .chain(self.front_closed(fr))
                .any(|e| self.f.t(e) <= t + self.grace);
            if front_cancel.is_some_and(|x| x <= t) || ended || t + self.grace > self.end {
                continue;
            }
            let why = match front_cancel {
                Some(x) => format!(
                    "before the client cancelled front {} (at {x} ms): the intermediary cancelled \
                     on its own, or the cancel was meant for another request",
                    name(fr)
                ),
                None => format!(
                    "while its front {} still waited, uncancelled: the cancel was meant for \
                     another request",
                    name(fr)
                ),
            };
            self.flag(
                rule!("request-id-mapping"),
                self.b.era,
                &[At::Front(fr.created), At::Back(c)],
                format!(
                    "upstream {} was cancelled at {t} ms {why}",
                    self.upstream(br)
                ),
            );
        }
    }

    /// `cancel-unknown-request` on the upstream hop, with the front as evidence: the
    /// intermediary cancelled upstream request `back` after it had passed that request's
    /// answer on to the front, so it knew the request was over, and not as the relay of a
    /// front cancel that crossed the answer. (Seen from the server alone, a cancel that
    /// reaches it after its answer left may have crossed that answer.)
    fn cancel_after_answer(&mut self, fr: &Req, back: usize) {
        let Some(r) = fr.client_response else { return };
        let br = &self.b.requests[back];
        if !self.upstream_answered(br, r) {
            return;
        }
        let Some(id) = br.id.as_ref() else { return };
        let forwarded = self.f.t(r);
        let late = (br.created..self.b.trace.events.len()).find(|&i| {
            let e = &self.b.trace.events[i];
            e.side == Side::Server
                && matches!(e.kind, EventKind::Recv(_))
                && matches!(self.b.msg(i), Some(Message::Cancelled(c)) if &c.request_id == id)
                && self.b.by_id(id, i) == Some(back)
                && self.b.t(i) > forwarded
        });
        let Some(i) = late else { return };
        // The client's own cancel crossing the answer on the front hop, passed on at once, is
        // a race the intermediary relayed, not one it made.
        let relayed = fr.client_cancels.first().is_some_and(|&c| {
            self.f.t(c) <= self.b.t(i) && self.b.t(i) <= self.f.t(c) + self.grace
        });
        if relayed {
            return;
        }
        let message = format!(
            "the intermediary cancelled upstream {} at {} ms, after it had passed that \
             request's answer on to front {} at {forwarded} ms: it cancelled a request it knew \
             was over",
            self.upstream(br),
            self.b.t(i),
            name(fr)
        );
        self.flag_upstream(
            rule!("cancel-unknown-request"),
            &[At::Back(br.created), At::Front(r), At::Back(i)],
            message,
        );
    }
}

/// Whether the front's response `r` is upstream `b`'s own answer to `br`, sent no later than
/// the front received it. The two hops were recorded by two processes (live), each reading
/// the wall clock when it got to it: an answer passed on at once can be recorded a few ms
/// after the front's receipt of it, which `skew` (the timer tolerance) allows.
fn answered_by(f: &Index<'_>, b: &Index<'_>, br: &Req, r: usize, skew: u64) -> bool {
    let front_answer = answer(f, r);
    br.responses.iter().any(|&u| {
        b.t(u) <= f.t(r) + skew && passes_on(front_answer.as_ref(), answer(b, u).as_ref())
    })
}

/// `request 7`, for messages.
fn name(r: &Req) -> String {
    r.id.as_ref()
        .map_or_else(|| "request ?".into(), |id| format!("request {id}"))
}
