//! The calls of a fitted scenario: when each started, what it asked for, how long its work
//! took, when it was cancelled, and the client's timeout policy.
//!
//! A call's work is the time from the server's receipt to its answer (the client's send and
//! receipt when only its side was recorded), cut into steps by its progress (`total` when the
//! server gave one, else the count). A cancelled call never showed its duration: it is
//! censored, as the probe's calibration censors it: an identical call that ran to its end
//! lends its work; else the rate its progress showed is extrapolated to its `total`; else it
//! is taken to need a second more than it ran, stated as a lower bound.
//!
//! The timeout policy is the recorded one when the client wrote it on its requests (`policy`
//! on a send). Else a fingerprint: when every call the client gave up on (a cancel it was not
//! told to send) was given up the same time after its send, whatever progress came, that is a
//! fixed timeout; the same time after its last progress, a timeout progress resets. Else the
//! default, which never fires before a call the recording saw answered.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::model::recorded::{RecordedCall, Recording};
use crate::model::{Outcome, TimeoutPolicy, CALL_TAG};
use crate::scenario::file::{LiveCall, Provenance};
use crate::scenario::{CallKind, PlannedCall, STALE_TASK};
use crate::trace::{EventKind, Trace};
use crate::wire::EXTENSION_TASKS;

/// One call fitted, with the evidence for its knobs.
pub(super) struct FittedCall {
    pub(super) call: PlannedCall,
    pub(super) live: LiveCall,
    pub(super) provenance: Vec<(String, Provenance)>,
}

/// The work a call showed: its duration and steps, and how they were read.
struct Work {
    steps: u32,
    step_ms: u64,
    provenance: Provenance,
}

/// The recorded client's calls that a scenario can plan (tool calls, subscriptions, polls of
/// a task), in order; the others are named in the returned notes.
pub(super) fn fit_calls(
    trace: &Trace,
    recording: &Recording,
    t0: u64,
) -> (Vec<FittedCall>, Vec<String>) {
    let mut notes = Vec::new();
    let mut left_out: BTreeMap<String, usize> = BTreeMap::new();
    let plannable: Vec<&RecordedCall> = recording
        .calls
        .iter()
        .filter(|c| {
            let ok = plannable(c);
            if !ok {
                *left_out.entry(c.method.clone()).or_default() += 1;
            }
            ok
        })
        .collect();
    for (method, n) in left_out {
        notes.push(format!(
            "{n} {method} request(s) left out: a retry after input_required, a poll of a \
             call's task, or a method a scenario does not plan (the fitted client makes its own)"
        ));
    }
    let works: Vec<Option<Work>> = plannable.iter().map(|c| uncensored(c)).collect();
    let policy = fingerprint(&plannable, &works);
    let fitted = plannable
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let mut provenance = Vec::new();
            let at = format!("calls/{k}");
            let sent = trace.events.get(c.line - 1).map_or(t0, |e| e.t);
            provenance.push((
                format!("{at}/at_ms"),
                Provenance::recorded(format!("sent at line {}", c.line)),
            ));
            let work = match &works[k] {
                Some(w) => Work {
                    steps: w.steps,
                    step_ms: w.step_ms,
                    provenance: w.provenance.clone(),
                },
                None => censored(c, &plannable, &works),
            };
            provenance.push((format!("{at}/steps"), work.provenance.clone()));
            let kind = kind_of(c);
            let (policy, policy_provenance) = match c.policy {
                Some(p) => (
                    p,
                    Provenance::recorded(format!("the policy on the request (line {})", c.line)),
                ),
                None => policy.clone(),
            };
            provenance.push((format!("{at}/policy"), policy_provenance));
            // A cancel the client's own timer sent is the policy's; one it was told to send is
            // the application's.
            let timed_out = timed_out(trace, c);
            let cancel_after_ms = c.cancel_after_ms.or_else(|| task_cancel(recording, c));
            let cancel_after = match (cancel_after_ms, timed_out) {
                (Some(ms), false) => {
                    provenance.push((
                        format!("{at}/cancel_after_ms"),
                        Provenance::recorded(format!("cancelled {ms} ms after its send")),
                    ));
                    Some(Duration::from_millis(ms))
                }
                (None, false) => seen_cancel(c, &policy).map(|ms| {
                    provenance.push((
                        format!("{at}/cancel_after_ms"),
                        Provenance::inferred(format!(
                            "the server read the cancel {ms} ms after the request (the \
                             client's side was not recorded), not at its policy's deadline"
                        )),
                    ));
                    Duration::from_millis(ms)
                }),
                _ => None,
            };
            let args = c.params.get("arguments").cloned().unwrap_or(Value::Null);
            let call = PlannedCall {
                at: Duration::from_millis(sent.saturating_sub(t0)),
                steps: work.steps,
                step: Duration::from_millis(work.step_ms),
                progress: c.token.is_some(),
                policy,
                cancel_after,
                idempotent: false,
                kind,
                sampling: args.get("sample").and_then(Value::as_bool).unwrap_or(false)
                    || c.server
                        .iter()
                        .any(|e| e.msg.get("method").is_some() && e.msg.get("id").is_some()),
            };
            FittedCall {
                call,
                live: LiveCall {
                    method: c.method.clone(),
                    params: Value::Object(c.params.clone()),
                },
                provenance,
            }
        })
        .collect();
    (fitted, notes)
}

/// Whether a recorded request is a call a scenario plans: a tool call that is no retry after
/// `input_required` (the client retries on its own), a subscription, or a poll of a task the
/// server never had ([`STALE_TASK`]); the reference client polls its own tasks.
pub(super) fn plannable(c: &RecordedCall) -> bool {
    match c.method.as_str() {
        "tools/call" => {
            !c.params.contains_key("inputResponses") && !c.params.contains_key("requestState")
        }
        "subscriptions/listen" => true,
        "tasks/get" => c.params.get("taskId").and_then(Value::as_str) == Some(STALE_TASK),
        _ => false,
    }
}

fn kind_of(c: &RecordedCall) -> CallKind {
    match c.method.as_str() {
        "subscriptions/listen" => {
            let tools_changed = c
                .params
                .get("notifications")
                .or_else(|| c.params.get("filter"))
                .is_some_and(|f| f.to_string().contains("toolsListChanged"));
            CallKind::Listen { tools_changed }
        }
        "tasks/get" => CallKind::StaleTask,
        _ => {
            let args = c.params.get("arguments");
            let input_rounds = args
                .and_then(|a| a.get("input_rounds"))
                .and_then(Value::as_u64)
                .unwrap_or(0) as u32;
            let task = c.meta.values().any(|v| {
                v.get("extensions")
                    .and_then(|e| e.get(EXTENSION_TASKS))
                    .is_some()
            });
            CallKind::Tool { task, input_rounds }
        }
    }
}

/// A task's cancel (`tasks/cancel` naming the task the call created), in ms after the call's
/// start: a task is cancelled by request, not by notification.
fn task_cancel(recording: &Recording, c: &RecordedCall) -> Option<u64> {
    // The task may come from a retry after input_required: the same tool and arguments again.
    let chain = recording.calls.iter().filter(|o| {
        o.line == c.line
            || (o.start_ms >= c.start_ms
                && o.method == c.method
                && !plannable(o)
                && o.params.get("name") == c.params.get("name")
                && o.params.get("arguments") == c.params.get("arguments"))
    });
    let task = chain
        .flat_map(|o| &o.server)
        .find_map(|e| e.msg.pointer("/result/taskId").and_then(Value::as_str))?;
    recording
        .calls
        .iter()
        .filter(|o| o.method == "tasks/cancel" && o.start_ms >= c.start_ms)
        .find(|o| o.params.get("taskId").and_then(Value::as_str) == Some(task))
        .map(|o| o.start_ms - c.start_ms)
}

/// How long after the request the server read the cancel of `c`, when only the server's side
/// was recorded (`serve`) and the cancel is not its client's timer: a cancel read within
/// [`TIMER_SLACK_MS`] after the deadline of a policy that progress does not reset is the
/// timer's, which the fitted policy sends by itself.
fn seen_cancel(c: &RecordedCall, policy: &TimeoutPolicy) -> Option<u64> {
    let seen = c.cancel_seen_ms?;
    let timer = policy
        .timeout
        .filter(|_| !policy.reset_timeout_on_progress)
        .map(|t| t.as_millis() as u64);
    match timer {
        Some(t) if seen >= t && seen <= t + TIMER_SLACK_MS => None,
        _ => Some(seen),
    }
}

/// How late after a deadline a server may read the timer's cancel, in ms: the way there and
/// a loaded machine's timer.
const TIMER_SLACK_MS: u64 = 50;

/// Whether the client's timer gave the call up: a `timeout` event for it, or the application
/// told it timed out (a task's timer ends in `tasks/cancel`, with no timeout of the request).
fn timed_out(trace: &Trace, c: &RecordedCall) -> bool {
    let Some(id) = &c.id else { return false };
    trace.events.iter().any(|e| match &e.kind {
        EventKind::Timeout { request, .. } => request == id,
        EventKind::Outcome { request, outcome } => request == id && *outcome == Outcome::TimedOut,
        _ => false,
    })
}

/// The call's work when it ran to its answer before any cancel; `slow_op`'s own arguments when
/// the recording holds them.
fn uncensored(c: &RecordedCall) -> Option<Work> {
    let args = c.params.get("arguments");
    let arg = |k: &str| args.and_then(|a| a.get(k)).and_then(Value::as_u64);
    if let (Some(steps), Some(step_ms)) = (arg("steps"), arg("step_ms")) {
        return Some(Work {
            steps: steps.min(u64::from(u32::MAX)) as u32,
            step_ms,
            provenance: Provenance::recorded("slow_op's steps and step_ms in the request"),
        });
    }
    let answer = c
        .server
        .iter()
        .take(c.before_cancel)
        .position(|e| e.is_answer)?;
    let ms: u64 = c.server[..=answer].iter().map(|e| e.offset_ms).sum();
    let (count, total) = progress_of(c, answer + 1);
    let steps = total.unwrap_or(count).max(1);
    Some(Work {
        steps: steps as u32,
        step_ms: ms / steps,
        provenance: Provenance::inferred(format!(
            "answered {ms} ms after it was read, with {count} progress notification(s){}",
            total.map_or(String::new(), |t| format!(" of total {t}"))
        )),
    })
}

/// Progress among the first `n` messages of a call: the count, and the `total` they named.
fn progress_of(c: &RecordedCall, n: usize) -> (u64, Option<u64>) {
    let progress: Vec<&Value> = c.server[..n.min(c.server.len())]
        .iter()
        .map(|e| &e.msg)
        .filter(|m| m.get("method").and_then(Value::as_str) == Some("notifications/progress"))
        .collect();
    let total = progress
        .iter()
        .filter_map(|m| m.pointer("/params/total").and_then(Value::as_f64))
        .fold(None, |acc: Option<f64>, t| {
            Some(acc.map_or(t, |a| a.max(t)))
        })
        .filter(|t| t.is_finite() && *t >= 1.0 && *t < 1e6)
        .map(|t| t as u64);
    (progress.len() as u64, total)
}

/// A cancelled call's work, censored.
fn censored(c: &RecordedCall, calls: &[&RecordedCall], works: &[Option<Work>]) -> Work {
    let found = calls.iter().enumerate().find_map(|(k, o)| {
        let same = o.line != c.line && untagged(&o.params) == untagged(&c.params);
        works[k].as_ref().filter(|_| same).map(|w| (o.line, w))
    });
    if let Some((line, w)) = found {
        return Work {
            steps: w.steps,
            step_ms: w.step_ms,
            provenance: Provenance::inferred(format!(
                "censored by its cancel; as the identical call at line {line}"
            )),
        };
    }
    let before = c.before_cancel.min(c.server.len());
    let (count, total) = progress_of(c, before);
    let last_ms: u64 = c.server[..before].iter().map(|e| e.offset_ms).sum();
    if let (Some(total), true) = (total, count > 0 && last_ms > 0) {
        let step_ms = last_ms / count;
        return Work {
            steps: total as u32,
            step_ms,
            provenance: Provenance::inferred(format!(
                "censored by its cancel; {count} of {total} steps in {last_ms} ms, extrapolated"
            )),
        };
    }
    let ran = c.cancel_seen_ms.or(c.cancel_after_ms).unwrap_or(0);
    Work {
        steps: 1,
        step_ms: ran + 1000,
        provenance: Provenance::inferred(format!(
            "censored by its cancel after {ran} ms, nothing to extrapolate from: taken as a \
             second more (a lower bound)"
        )),
    }
}

/// A request's params without the number a probe tags each call with ([`CALL_TAG`]): calls
/// that differ only in it are the same call.
fn untagged(params: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    let mut p = params.clone();
    if let Some(Value::Object(args)) = p.get_mut("arguments") {
        args.remove(CALL_TAG);
    }
    p
}

/// The client's timeout policy, from how it gave calls up, when no policy was recorded.
fn fingerprint(calls: &[&RecordedCall], works: &[Option<Work>]) -> (TimeoutPolicy, Provenance) {
    // A call's send, and the times after it of its cancel and of its last progress before.
    let mut offsets = Vec::new();
    for c in calls.iter().filter(|c| c.policy.is_none()) {
        let Some(cancel) = c.cancel_after_ms else {
            continue;
        };
        let received = c.cancel_seen_ms.unwrap_or(cancel);
        let mut t = 0;
        let mut last_progress = None;
        for e in &c.server[..c.before_cancel.min(c.server.len())] {
            t += e.offset_ms;
            if e.msg.get("method").and_then(Value::as_str) == Some("notifications/progress")
                && t <= received
            {
                last_progress = Some(t);
            }
        }
        offsets.push((cancel, last_progress.map(|p| cancel.saturating_sub(p))));
    }
    let close = |xs: &[u64]| -> Option<u64> {
        let (lo, hi) = (*xs.iter().min()?, *xs.iter().max()?);
        (hi - lo <= (hi / 20).max(50)).then_some(hi)
    };
    let longest = works
        .iter()
        .flatten()
        .map(|w| u64::from(w.steps) * w.step_ms)
        .max()
        .unwrap_or(0);
    let sends: Vec<u64> = offsets.iter().map(|o| o.0).collect();
    if sends.len() >= 2 || (sends.len() == 1 && offsets[0].1.is_none()) {
        if let Some(t) = close(&sends) {
            let policy = TimeoutPolicy::fixed(Duration::from_millis(t));
            let preset = match t {
                59_000..=61_000 => " (the TypeScript SDK's default)",
                _ => "",
            };
            return (
                policy,
                Provenance::inferred(format!(
                    "{} cancel(s) {t} ms after the send, whatever progress came: a fixed timeout{preset}",
                    sends.len()
                )),
            );
        }
    }
    let idles: Vec<u64> = offsets.iter().filter_map(|o| o.1).collect();
    if idles.len() >= 2 && idles.len() == offsets.len() {
        if let Some(t) = close(&idles) {
            let max = sends.iter().max().copied().unwrap_or(t).max(longest) * 2;
            return (
                TimeoutPolicy::resetting(
                    Duration::from_millis(t),
                    Duration::from_millis(max.max(t)),
                ),
                Provenance::inferred(format!(
                    "{} cancel(s) {t} ms after the last progress: a timeout progress resets",
                    idles.len()
                )),
            );
        }
    }
    let generous = Duration::from_millis((2 * longest).max(60_000));
    (
        TimeoutPolicy::fixed(generous),
        Provenance::default_because(format!(
            "no policy recorded and no common timeout in the {} cancel(s); a fixed timeout \
             past every answered call",
            offsets.len()
        )),
    )
}
