//! What a probe run exercised, what it found about the server beyond the oracle's rules, and
//! the verdict with its exit code.
//!
//! A verdict is never vacuous. The oracle's rules only judge what happened; a run in which
//! nothing happened (the server exited at once, never answered, or no cancel met a call still
//! running) breaks no rule, so it is named here as a finding:
//!
//! | finding | kind | when |
//! | --- | --- | --- |
//! | `server-exited` | server fault | the server closed its output or exited before the run was over |
//! | `no-response` | server fault | the server answered none of the requests it was sent |
//! | `unresponsive-after-cancel` | server fault | the liveness check after a cancel or a timeout (`ping` in the legacy era, `tools/list` in 2026-07-28) got no answer within its bound, and nothing written after it was answered |
//! | `liveness-check-unanswered` | server fault | stdio: such a check got no answer while a request written after it on the same pipe was (the server drops the check; in the legacy era, `ping-answered`) |
//! | `nothing-exercised` | inconclusive | no call of the tool returned a result, or cancels were planned and none met a call still running |
//!
//! A `fault` fails the run and an `inconclusive` finding leaves it inconclusive: the words and
//! exit codes are [`crate::exit`]'s, as for every command.

use std::collections::{BTreeMap, BTreeSet};

use super::rebinding;
use crate::oracle::{OracleConfig, Verdict};
use crate::trace::{EventKind, Side, Trace, TransportName};
use crate::wire::{DecodeOptions, Message, ProgressToken, RequestId, METHOD_TOOLS_CALL};
use serde::Serialize;

pub use crate::exit::{Finding, FindingKind};

/// What the run exercised, counted from its trace.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Coverage {
    /// `tools/call` requests sent (the calibration call included).
    pub calls_sent: usize,
    /// Of those, how many got a final response (result or error).
    pub calls_answered: usize,
    /// Results among the answers.
    pub results: usize,
    /// Errors among the answers.
    pub errors: usize,
    /// Cancellations of calls (stdio `notifications/cancelled`, HTTP stream closes).
    pub cancels: usize,
    /// Cancels after which the call got no final response within the grace window, or only
    /// one the oracle reads as an answer to the cancel: the cancel met work still running.
    pub cancels_met_running_work: usize,
    /// Cancels followed within the grace window by a message for the call that the oracle
    /// did not flag: a crossing, legal since the server wrote it before it read the cancel.
    pub crossings: usize,
    /// Progress notifications received.
    pub progress_received: usize,
    /// Timer firings of the client (idle or maximum).
    pub timeouts: usize,
    /// Other requests: the start-up check (`tools/list`) and the liveness checks after each
    /// cancel and timeout (`ping` in the legacy era, `tools/list` in 2026-07-28).
    pub other_requests: usize,
    /// Of those, answered.
    pub other_answered: usize,
    /// Faults injected on purpose, by name.
    pub faults: BTreeMap<String, usize>,
}

/// How the server process or endpoint ended, as far as the probe saw.
#[derive(Debug, Default, Clone)]
pub struct ServerEnd {
    /// The server closed its output (stdio) before the probe was done with it.
    pub exited_early: Option<String>,
    /// Connections that could not be opened (HTTP).
    pub refused: usize,
    /// Liveness checks the server left unanswered.
    pub hangs: Vec<Hang>,
}

/// A liveness check the server left unanswered within its bound.
#[derive(Debug, Clone, Serialize)]
pub struct Hang {
    /// What it followed: `the cancel of call 3`, `the timeout of call 2`.
    pub after: String,
    /// When the check was written, in ms since the run began.
    pub sent_ms: u64,
    /// The check's request id.
    #[serde(skip)]
    pub check: RequestId,
    /// When the client gave up on the check, in ms since the run began.
    pub at_ms: u64,
    /// Whether the probe restarted the server and went on (stdio with `--restarts`).
    pub restarted: bool,
}

#[derive(Default)]
struct CallView {
    is_call: bool,
    cancel: Option<usize>,
    final_responses: Vec<usize>,
    /// Messages for the request after its cancel (progress and responses).
    after_cancel: Vec<usize>,
}

/// Counts what the trace shows the run exercised.
///
/// `flagged` are the events the oracle named as decisive in a violation of
/// `response-after-cancel`: a final response among them answered the cancel and does not make
/// the cancel a crossing of finished work, and no message from the first of them on counts as
/// a crossing.
pub fn coverage(trace: &Trace, config: &OracleConfig, flagged: &BTreeSet<usize>) -> Coverage {
    // Read in the era the trace speaks (a legacy server's answers carry no resultType).
    let era = config
        .era
        .unwrap_or_else(|| crate::oracle::EraReading::of_trace(trace).era);
    let lenient = DecodeOptions {
        era,
        allow_null_error_id: true,
        allow_integral_float_ids: true,
        require_result_type: false,
        ..DecodeOptions::default()
    };
    let mut c = Coverage::default();
    let mut views: BTreeMap<RequestId, CallView> = BTreeMap::new();
    let mut by_token: BTreeMap<ProgressToken, RequestId> = BTreeMap::new();
    let mut by_stream: BTreeMap<u64, RequestId> = BTreeMap::new();
    for (i, e) in trace.events.iter().enumerate() {
        if e.side != Side::Client {
            if let EventKind::Fault { fault, .. } = &e.kind {
                *c.faults.entry(fault.clone()).or_default() += 1;
            }
            continue;
        }
        match &e.kind {
            // The DNS-rebinding checks (sent with the Host and Origin a rebinding page would
            // send, recorded with them) are judged by `origin-validated`, not the workload.
            EventKind::Send(w) if w.headers.as_ref().is_some_and(rebinding::is_check) => {}
            EventKind::Send(w) => match w.decode(&lenient) {
                Ok(Message::Request(r)) => {
                    if let Some(t) = &r.meta.progress_token {
                        by_token.insert(t.clone(), r.id.clone());
                    }
                    if let Some(s) = w.stream {
                        by_stream.insert(s, r.id.clone());
                    }
                    views.insert(
                        r.id.clone(),
                        CallView {
                            is_call: r.method == METHOD_TOOLS_CALL,
                            ..CallView::default()
                        },
                    );
                }
                Ok(Message::Cancelled(n)) => {
                    if let Some(v) = views.get_mut(&n.request_id) {
                        v.cancel.get_or_insert(i);
                    }
                }
                _ => {}
            },
            EventKind::Close {
                stream: Some(s),
                by: Side::Client,
                ..
            } => {
                if let Some(v) = by_stream.get(s).and_then(|id| views.get_mut(id)) {
                    if v.final_responses.is_empty() {
                        v.cancel.get_or_insert(i);
                    }
                }
            }
            EventKind::Recv(w) => {
                let Ok(msg) = w.decode(&lenient) else {
                    continue;
                };
                let id = match &msg {
                    Message::Progress(p) => {
                        c.progress_received += 1;
                        by_token.get(&p.token).cloned()
                    }
                    Message::Result(_) | Message::Error(_) => msg.id().cloned(),
                    _ => None,
                };
                let Some(v) = id.and_then(|id| views.get_mut(&id)) else {
                    continue;
                };
                if matches!(msg, Message::Result(_) | Message::Error(_)) {
                    if v.final_responses.is_empty() && v.is_call {
                        match msg {
                            Message::Result(_) => c.results += 1,
                            _ => c.errors += 1,
                        }
                    }
                    v.final_responses.push(i);
                }
                if v.cancel.is_some() {
                    v.after_cancel.push(i);
                }
            }
            EventKind::Timeout { .. } => c.timeouts += 1,
            EventKind::Fault { fault, .. } => *c.faults.entry(fault.clone()).or_default() += 1,
            _ => {}
        }
    }
    let t = |i: usize| trace.events[i].t;
    for v in views.values() {
        if !v.is_call {
            c.other_requests += 1;
            c.other_answered += usize::from(!v.final_responses.is_empty());
            continue;
        }
        c.calls_sent += 1;
        c.calls_answered += usize::from(!v.final_responses.is_empty());
        let Some(cancel) = v.cancel else { continue };
        c.cancels += 1;
        let window = t(cancel) + config.grace_ms;
        // Messages from the first one the oracle flagged on are not crossings.
        let first_flagged = v.after_cancel.iter().copied().find(|m| flagged.contains(m));
        let crossing = v
            .after_cancel
            .iter()
            .any(|&m| t(m) <= window && first_flagged.is_none_or(|f| m < f));
        c.crossings += usize::from(crossing);
        let finished_first = v
            .final_responses
            .iter()
            .any(|&d| d > cancel && t(d) <= window && !flagged.contains(&d));
        c.cancels_met_running_work += usize::from(!finished_first);
    }
    c
}

/// Whether the server answered a request the probe wrote after the unanswered check `hang`
/// (other than another check) on the same stdio pipe: the check's method and when that answer
/// came, in ms.
fn answered_after(trace: &Trace, hang: &Hang, hangs: &[Hang]) -> Option<(String, u64)> {
    // Read from the recorded JSON itself: the check and the calls speak the run's era.
    let checks: Vec<serde_json::Value> = hangs.iter().map(|h| h.check.to_json()).collect();
    let check = hang.check.to_json();
    let mut method = None;
    let mut later = Vec::new();
    for e in trace.events.iter().filter(|e| e.side == Side::Client) {
        let (id, is_request) = match &e.kind {
            // What a restarted server answers says nothing of the one that hung.
            EventKind::Fault { fault, .. } if fault == "restart" && e.t >= hang.sent_ms => {
                return None;
            }
            EventKind::Send(w) | EventKind::Recv(w) => match &w.msg {
                Some(m) => (m.get("id"), m.get("method").is_some()),
                None => continue,
            },
            _ => continue,
        };
        let Some(id) = id else { continue };
        match (&e.kind, is_request) {
            // Over HTTP each request travels apart: a later one answered says nothing of
            // whether the server read the check. One ordered pipe (stdio) says it did.
            (EventKind::Send(w), true) if *id == check && w.transport != TransportName::Stdio => {
                return None;
            }
            (EventKind::Send(w), true) if *id == check => {
                method = w
                    .msg
                    .as_ref()
                    .and_then(|m| m.get("method")?.as_str().map(str::to_owned));
            }
            (EventKind::Send(_), true) if e.t >= hang.sent_ms && !checks.contains(id) => {
                later.push(id.clone());
            }
            (EventKind::Recv(_), false) if later.contains(id) => return Some((method?, e.t)),
            _ => {}
        }
    }
    None
}

/// The findings of a run that the oracle's rules cannot name.
pub fn findings(
    c: &Coverage,
    end: &ServerEnd,
    tool: &str,
    cancels_planned: usize,
    trace: &Trace,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let answered = c.calls_answered + c.other_answered;
    let sent = c.calls_sent + c.other_requests;
    if let Some(how) = &end.exited_early {
        out.push(Finding {
            finding: "server-exited",
            kind: FindingKind::Fault,
            message: format!(
                "the server {how} before the run was over: {answered} of {sent} requests answered"
            ),
        });
    } else if answered == 0 {
        let refused = match end.refused {
            0 => String::new(),
            n => format!(" ({n} connections refused)"),
        };
        out.push(Finding {
            finding: "no-response",
            kind: FindingKind::Fault,
            message: format!(
                "the server answered none of the {sent} requests it was sent{refused}: it does \
                 not read its input, is stuck, or speaks no era the probe asked for"
            ),
        });
    }
    if let Some((first, method, answer)) = end.hangs.first().and_then(|h| {
        let (method, answer) = answered_after(trace, h, &end.hangs)?;
        Some((h, method, answer))
    }) {
        // A server that answers requests written after the check is not unresponsive: it
        // drops the check (in the legacy era, ping-answered, MUST).
        let rule = match method.as_str() {
            "ping" => " (ping-answered, MUST)",
            _ => "",
        };
        out.push(Finding {
            finding: "liveness-check-unanswered",
            kind: FindingKind::Fault,
            message: format!(
                "the server answers requests but not `{method}`{rule}: {} liveness checks \
                 unanswered, the first written at {} ms after {}, while it answered a request \
                 written after it at {answer} ms",
                end.hangs.len(),
                first.sent_ms,
                first.after,
            ),
        });
    } else if let Some(first) = end.hangs.first() {
        let restarted = end.hangs.iter().filter(|h| h.restarted).count();
        let then = if restarted > 0 {
            format!("; restarted {restarted} times and went on")
        } else {
            "; the run stopped there (--restarts restarts a stdio server and goes on)".into()
        };
        out.push(Finding {
            finding: "unresponsive-after-cancel",
            kind: FindingKind::Fault,
            message: format!(
                "the server stopped answering: {} liveness checks unanswered, the first after \
                 {} (at {} ms){then}",
                end.hangs.len(),
                first.after,
                first.at_ms
            ),
        });
    }
    if !out.is_empty() {
        return out;
    }
    if c.results == 0 {
        let why = match cut_alike(trace) {
            Some(cut) => format!(
                "every answered call ended with the same error, {cut}: something cut them at \
                 its own timeout (an intermediary's documented one is held to with \
                 --intermediary-timeout-ms); make the calls shorter than that with --args"
            ),
            None => "check --tool and --args".into(),
        };
        out.push(Finding {
            finding: "nothing-exercised",
            kind: FindingKind::Inconclusive,
            message: format!(
                "no call of `{tool}` returned a result ({} answered with an error, {} not \
                 answered): {why}",
                c.errors,
                c.calls_sent - c.calls_answered
            ),
        });
    } else if cancels_planned > 0 && c.cancels_met_running_work == 0 {
        out.push(Finding {
            finding: "nothing-exercised",
            kind: FindingKind::Inconclusive,
            message: format!(
                "{} cancels were sent and none met a call still running: every call had \
                 finished (lower --cancel-within-ms or make the calls longer)",
                c.cancels
            ),
        });
    }
    out
}

/// Events the oracle named as decisive in a `response-after-cancel` violation.
pub fn flagged_answers(verdict: &Verdict) -> BTreeSet<usize> {
    verdict
        .violations
        .iter()
        .filter(|v| v.rule == crate::oracle::rule::RESPONSE_AFTER_CANCEL)
        .filter_map(|v| v.events.last().copied())
        .collect()
}

/// How long after a call an error must come to read as a cut rather than a refusal.
const CUT_AFTER_MS: u64 = 1000;

/// When the client's answered `tools/call`s all got the same error (code and message), that
/// error and the range of times after the call it came: `code -32001 "Request timed out"
/// 10003..10011 ms after each call`. An intermediary or a server that cuts every call at its
/// own timeout answers them all alike, which is worth naming instead of a guess at the
/// arguments.
fn cut_alike(trace: &Trace) -> Option<String> {
    let mut sent: BTreeMap<String, u64> = BTreeMap::new();
    let mut errors: Vec<(i64, String, u64)> = Vec::new();
    for e in &trace.events {
        if e.side != Side::Client || e.hop == Some(crate::trace::Hop::Back) {
            continue;
        }
        let (EventKind::Send(w) | EventKind::Recv(w)) = &e.kind else {
            continue;
        };
        let Some(msg) = w.msg.as_ref() else { continue };
        let id = msg.get("id").map(|i| i.to_string());
        match (&e.kind, id) {
            (EventKind::Send(_), Some(id))
                if msg.get("method").and_then(|m| m.as_str()) == Some(METHOD_TOOLS_CALL) =>
            {
                sent.insert(id, e.t);
            }
            (EventKind::Recv(_), Some(id)) => {
                let Some(&at) = sent.get(&id) else { continue };
                // A result among them: not every call was cut alike.
                let err = msg.get("error")?;
                let code = err.get("code").and_then(|c| c.as_i64()).unwrap_or(0);
                let text = err
                    .get("message")
                    .and_then(|m| m.as_str())
                    .unwrap_or("")
                    .to_owned();
                errors.push((code, text, e.t.saturating_sub(at)));
            }
            _ => {}
        }
    }
    let (code, text, _) = errors.first()?.clone();
    if errors.iter().any(|(c, t, _)| *c != code || *t != text) {
        return None;
    }
    let lo = errors.iter().map(|e| e.2).min()?;
    let hi = errors.iter().map(|e| e.2).max()?;
    // An error at once is a refusal (an unknown tool, bad arguments), not a cut.
    if lo < CUT_AFTER_MS {
        return None;
    }
    Some(format!(
        "code {code} {text:?} {lo}..{hi} ms after each of the {} calls",
        errors.len()
    ))
}

#[cfg(test)]
mod cut_tests {
    use super::*;

    fn trace(errors: &[(u64, i64, &str)]) -> Trace {
        let mut lines = Vec::new();
        for (k, (after, code, text)) in errors.iter().enumerate() {
            let t = 10 * k as u64;
            lines.push(format!(
                r#"{{"t":{t},"side":"client","kind":"send","transport":"stdio","msg":{{"jsonrpc":"2.0","id":{k},"method":"tools/call","params":{{"name":"slow_op"}}}}}}"#
            ));
            lines.push(format!(
                r#"{{"t":{},"side":"client","kind":"recv","transport":"stdio","msg":{{"jsonrpc":"2.0","id":{k},"error":{{"code":{code},"message":"{text}"}}}}}}"#,
                t + after
            ));
        }
        lines.sort_by_key(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["t"]
                .as_u64()
                .expect("t")
        });
        Trace::from_jsonl(&lines.join("\n")).expect("a trace")
    }

    #[test]
    fn calls_cut_alike_after_a_while_are_named_and_refusals_are_not() {
        let cut = trace(&[
            (10_000, -32001, "Request timed out"),
            (10_004, -32001, "Request timed out"),
        ]);
        let named = cut_alike(&cut).expect("named");
        assert!(
            named.contains("-32001") && named.contains("10000..10004 ms"),
            "{named}"
        );
        let refused = trace(&[(2, -32602, "Unknown tool"), (2, -32602, "Unknown tool")]);
        assert_eq!(cut_alike(&refused), None);
        let mixed = trace(&[
            (10_000, -32001, "Request timed out"),
            (10_000, -32603, "boom"),
        ]);
        assert_eq!(cut_alike(&mixed), None);
    }
}
