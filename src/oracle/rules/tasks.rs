//! §7.2 multi round-trip requests and §7.3 the Tasks extension.
//!
//! Tasks are followed by id across the messages that name them: the `CreateTaskResult` that
//! announces a task (and, through its response id, the call it came from), every `tasks/get`
//! answer and `notifications/tasks` that reports its status, and the client's `tasks/get`,
//! `tasks/cancel` and `tasks/update` requests. The rules that judge what a server knows about a
//! task (unknown, expired, cancelled without being asked) need the task's whole life in the
//! trace: simulations and `probe` runs have it; a recording that starts in the middle of a
//! session may not.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{sender, Sink};
use crate::model::TaskStatus;
use crate::oracle::index::Index;
use crate::trace::{EventKind, Side};
use crate::wire::{
    codes, Era, LegacyRevision, Message, Request, ResultResponse, ResultType, METHOD_CANCELLED,
    METHOD_TASKS_CANCEL, METHOD_TASKS_GET, METHOD_TASKS_UPDATE, METHOD_TOOLS_CALL, MRTR_METHODS,
};

/// The request message that created request `r` (the client's send, or the server's receipt).
fn request_of<'a>(ix: &'a Index<'_>, r: usize) -> Option<&'a Request> {
    match ix.msg(ix.requests[r].created)? {
        Message::Request(q) => Some(q),
        _ => None,
    }
}

/// The request a server-view response at event `i` answers.
fn answered(ix: &Index<'_>, i: usize) -> Option<usize> {
    let id = ix.msg(i)?.id()?;
    ix.response_of(i).or_else(|| ix.by_id(id, i))
}

/// Whether the client read event `i`'s message (its receipt, or the server's send when the
/// client side was not recorded).
fn client_reads(ix: &Index<'_>, i: usize) -> bool {
    let e = &ix.trace.events[i];
    match (&e.kind, e.side) {
        (EventKind::Recv(_), Side::Client) => true,
        (EventKind::Send(_), Side::Server) => !ix.has(Side::Client),
        _ => false,
    }
}

/// What the trace says about one task.
#[derive(Default)]
struct TaskView {
    /// The emission of its `CreateTaskResult`.
    created: Option<usize>,
    /// The call it came from.
    origin: Option<usize>,
    /// `ttlMs` as announced.
    ttl_ms: Option<u64>,
    /// Status reports, server view: (event, status).
    statuses: Vec<(usize, String)>,
}

/// A task's id and status as a message reports them (a task result or `notifications/tasks`).
fn task_report(msg: &Message) -> Option<(&str, &str, &Map<String, Value>)> {
    let fields = match msg {
        Message::Result(r) => &r.result,
        Message::Notification(n) if n.method == "notifications/tasks" => n.params.as_ref()?,
        _ => return None,
    };
    let id = fields.get("taskId")?.as_str()?;
    let status = fields.get("status")?.as_str()?;
    Some((id, status, fields))
}

/// Every task the trace names, by id: built once per check, shared by the rules that follow
/// tasks.
#[derive(Default)]
pub(super) struct Tasks(BTreeMap<String, TaskView>);

impl Tasks {
    pub(super) fn build(ix: &Index<'_>) -> Tasks {
        Tasks(tasks(ix))
    }

    /// Whether `id` is a string some task report in the trace names as its `taskId`.
    pub(super) fn is_task_id(&self, id: &crate::wire::RequestId) -> bool {
        matches!(id, crate::wire::RequestId::String(t) if self.0.contains_key(t))
    }
}

fn tasks(ix: &Index<'_>) -> BTreeMap<String, TaskView> {
    let mut tasks: BTreeMap<String, TaskView> = BTreeMap::new();
    for &i in &ix.emissions {
        let Some(msg) = ix.msg(i) else { continue };
        let Some((id, status, fields)) = task_report(msg) else {
            continue;
        };
        let view = tasks.entry(id.to_owned()).or_default();
        if let Message::Result(r) = msg {
            if r.result_type == Some(ResultType::Task) && view.created.is_none() {
                view.created = Some(i);
                view.origin = answered(ix, i);
                view.ttl_ms = fields.get("ttlMs").and_then(Value::as_u64);
            }
        }
        view.statuses.push((i, status.to_owned()));
    }
    tasks
}

/// The server answers with a `CreateTaskResult` only a `tools/call` that declared the Tasks
/// extension in its own `clientCapabilities` (§7.3, §9 H58).
pub(super) fn task_not_negotiated(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for &i in &ix.emissions {
        let Some(Message::Result(res)) = ix.msg(i) else {
            continue;
        };
        if res.result_type != Some(ResultType::Task) {
            continue;
        }
        let Some(r) = answered(ix, i) else { continue };
        let Some(q) = request_of(ix, r) else { continue };
        let why = if q.method != METHOD_TOOLS_CALL {
            format!(
                "a task answers {} ({}); only tools/call may become one",
                q.id, q.method
            )
        } else if !q.declares_tasks() {
            format!(
                "a task answers {}, which did not declare the Tasks extension",
                q.id
            )
        } else {
            continue;
        };
        let created = ix.requests[r].created;
        s.flag(rule!("task-not-negotiated"), vec![created, i], why);
    }
}

/// `tasks/cancel` and `tasks/update` are acknowledged with an empty `complete` result
/// (§7.3, §9 H61).
pub(super) fn task_ack(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for &i in &ix.emissions {
        let Some(Message::Result(res)) = ix.msg(i) else {
            continue;
        };
        let Some(r) = answered(ix, i) else { continue };
        let method = ix.requests[r].method.as_str();
        if method != METHOD_TASKS_CANCEL && method != METHOD_TASKS_UPDATE {
            continue;
        }
        // An absent resultType is message-shape's to report.
        let why = match res.result_type {
            Some(ResultType::Complete) if has_task_fields(res) => format!(
                "the {method} acknowledgement of {} carries the task's fields; it is an empty result",
                res.id
            ),
            Some(t @ (ResultType::Task | ResultType::InputRequired)) => format!(
                "the {method} acknowledgement of {} has resultType {}; it must be complete",
                res.id,
                t.as_str()
            ),
            _ => continue,
        };
        s.flag(rule!("task-ack"), vec![i], why);
    }
}

fn has_task_fields(res: &ResultResponse) -> bool {
    res.result.contains_key("taskId") || res.result.contains_key("status")
}

/// Completed, failed and cancelled never change (§7.3, §9 H61); a task reported cancelled does
/// no more work (§7.3, §3.3 item 3); a task ends cancelled only when a `tasks/cancel` asked for
/// it: a dropped connection does not cancel a task (§6, §7.3).
pub(super) fn task_states(s: &mut Sink<'_, '_>, tasks: &Tasks) {
    let ix = s.ix;
    for (id, view) in &tasks.0 {
        let terminal = view
            .statuses
            .iter()
            .find(|(_, st)| TaskStatus::parse(st).is_some_and(TaskStatus::is_terminal));
        if let Some((first, status)) = terminal {
            if let Some((later, other)) = view
                .statuses
                .iter()
                .find(|(e, st)| e > first && st != status)
            {
                let msg = format!("task {id} reported {status}, later {other}");
                s.flag(rule!("task-terminal"), vec![*first, *later], msg);
            }
        }
        let Some(&(cancelled, _)) = view.statuses.iter().find(|(_, st)| st == "cancelled") else {
            continue;
        };
        let asked = ix.requests.iter().any(|r| {
            r.method == METHOD_TASKS_CANCEL
                && r.created < cancelled
                && ix
                    .request_params(r.created)
                    .and_then(|(_, p)| p.get("taskId"))
                    .and_then(Value::as_str)
                    == Some(id.as_str())
        });
        if !asked {
            let msg = format!("task {id} was cancelled, but no tasks/cancel asked for it");
            s.flag(rule!("task-cancelled-unasked"), vec![cancelled], msg);
        }
        let Some(origin) = view.origin else { continue };
        let limit = s.t(cancelled) + s.config.grace_ms;
        if let Some(&w) = ix.requests[origin].work.iter().find(|&&w| s.t(w) > limit) {
            let msg = format!(
                "task {id} was reported cancelled, but its work went on {} ms later",
                s.t(w) - s.t(cancelled)
            );
            s.flag(rule!("task-work-after-cancelled"), vec![cancelled, w], msg);
        }
    }
}

const REFUSALS: &[i64] = &[
    codes::INVALID_PARAMS,
    codes::PARSE_ERROR,
    codes::INVALID_REQUEST,
    codes::METHOD_NOT_FOUND,
    codes::HEADER_MISMATCH,
    codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
    codes::UNSUPPORTED_PROTOCOL_VERSION,
];

/// A `tasks/*` request about a task the server never announced, or one past its `ttlMs`, gets
/// -32602 (§7.3, §8).
pub(super) fn task_unknown(s: &mut Sink<'_, '_>, tasks: &Tasks) {
    let ix = s.ix;
    let known = &tasks.0;
    for (r, req) in ix.requests.iter().enumerate() {
        let method = req.method.as_str();
        if ![METHOD_TASKS_GET, METHOD_TASKS_CANCEL, METHOD_TASKS_UPDATE].contains(&method) {
            continue;
        }
        let Some(&answer) = req.responses.first() else {
            continue;
        };
        let Some(task_id) = request_of(ix, r)
            .and_then(|q| q.params.get("taskId"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let view = known
            .get(task_id)
            .filter(|v| v.created.is_some_and(|c| c < answer));
        let why = match view {
            None => "a task the server never announced",
            Some(v) => {
                let (Some(created), Some(ttl)) = (v.created, v.ttl_ms) else {
                    continue;
                };
                if s.t(answer) <= s.t(created) + ttl + s.config.grace_ms {
                    continue;
                }
                "a task past its ttlMs"
            }
        };
        let wrong = match ix.msg(answer) {
            Some(Message::Result(_)) => "a result".to_string(),
            // Refusals that come before the task is looked at (a malformed request, headers,
            // version, no Tasks support at all) are not answers about the task.
            Some(Message::Error(e)) if !REFUSALS.contains(&e.error.code) => {
                format!("error {}", e.error.code)
            }
            _ => continue,
        };
        let msg = format!("{method} of {task_id}, {why}, was answered with {wrong}, not -32602");
        s.flag(rule!("task-unknown"), vec![req.created, answer], msg);
    }
}

/// The client polls one task no faster than the `pollIntervalMs` it was last given (§7.3,
/// §9 H60).
pub(super) fn task_poll_interval(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    let mut interval: BTreeMap<String, u64> = BTreeMap::new();
    let mut last_poll: BTreeMap<String, usize> = BTreeMap::new();
    let tolerance = s.config.timer_tolerance_ms;
    for i in 0..ix.trace.events.len() {
        if client_reads(ix, i) {
            if let Some((id, _, fields)) = ix.msg(i).and_then(task_report) {
                if let Some(ms) = fields.get("pollIntervalMs").and_then(Value::as_u64) {
                    interval.insert(id.to_owned(), ms);
                }
            }
            continue;
        }
        if sender(ix, i) != Some(Side::Client) {
            continue;
        }
        let Some((METHOD_TASKS_GET, params)) = ix.request_params(i) else {
            continue;
        };
        let Some(id) = params.get("taskId").and_then(Value::as_str) else {
            continue;
        };
        if let (Some(&prev), Some(&every)) = (last_poll.get(id), interval.get(id)) {
            let gap = s.t(i) - s.t(prev);
            if gap + tolerance < every {
                let msg = format!(
                    "tasks/get of {id} {gap} ms after the last one; the server asked for {every} ms"
                );
                s.flag(rule!("task-poll-interval"), vec![prev, i], msg);
            }
        }
        last_poll.insert(id.to_owned(), i);
    }
}

/// `notifications/cancelled` never targets a task: once the client read the
/// `CreateTaskResult`, its call is over and `tasks/cancel` is the way (§7.3, §9 C31). A cancel
/// sent before the task was announced to the client is an ordinary cancel of its call.
///
/// In the legacy era tasks exist from 2025-11-25 on, with the same rule ("For task-augmented
/// requests, the `tasks/cancel` request MUST be used instead", LC13); there the
/// `CreateTaskResult` is `{"task": {"taskId": …}}`, without `resultType`, and before
/// 2025-11-25 there are no tasks to target.
pub(super) fn cancel_targets_task(s: &mut Sink<'_, '_>, tasks: &Tasks) {
    let ix = s.ix;
    let known = &tasks.0;
    for i in 0..ix.trace.events.len() {
        if sender(ix, i) != Some(Side::Client) {
            continue;
        }
        let Some(Message::Cancelled(c)) = ix.msg(i) else {
            continue;
        };
        // Seen from the server alone, a cancel that arrives within a round trip (twice the
        // grace window) of the CreateTaskResult may have crossed it: the client had not read
        // it yet.
        let crossed = |r: usize| {
            !ix.has(Side::Client)
                && ix.requests[r]
                    .responses
                    .first()
                    .is_some_and(|&u| s.t(i) < s.t(u) + 2 * s.config.grace_ms)
        };
        let by_call = ix
            .by_id(&c.request_id, i)
            .filter(|&r| !crossed(r))
            .and_then(|r| Some((r, task_created_for(ix, r, i)?)))
            .and_then(|(r, legacy_id)| {
                known
                    .iter()
                    .find(|(_, v)| v.origin == Some(r))
                    .map(|(id, _)| id.clone())
                    .or(legacy_id)
            });
        // (`Tasks` follows the modern shapes; a legacy cancel naming a task's id names no
        // request, which cancel-unknown-request reports.)
        let by_id = match &c.request_id {
            crate::wire::RequestId::String(t) if !ix.era.is_legacy() => {
                known.contains_key(t).then(|| t.clone())
            }
            _ => None,
        };
        if let Some(task) = by_call.or(by_id) {
            let msg = format!(
                "{METHOD_CANCELLED} for {} targets task {task}; tasks are cancelled with tasks/cancel",
                c.request_id
            );
            s.flag(rule!("cancel-targets-task"), vec![i], msg);
        }
    }
}

/// Whether request `r` had become a task for the client by event `i`: the client read its
/// `CreateTaskResult` before (the server's send, when the client was not recorded).
pub(super) fn names_a_task(ix: &Index<'_>, r: usize, i: usize) -> bool {
    task_created_for(ix, r, i).is_some()
}

/// `Some` when request `r` had become a task for the client by event `i` (see
/// [`names_a_task`]), with the task's id when the legacy `{"task": {"taskId": …}}` shape
/// carries it (a modern task is found by its origin in [`Tasks`]).
fn task_created_for(ix: &Index<'_>, r: usize, i: usize) -> Option<Option<String>> {
    let req = &ix.requests[r];
    let read = if ix.has(Side::Client) {
        req.client_response
    } else {
        req.responses.first().copied()
    };
    let Some(Message::Result(res)) = read.filter(|&e| e < i).and_then(|e| ix.msg(e)) else {
        return None;
    };
    match ix.era {
        Era::Modern => (res.result_type == Some(ResultType::Task)).then_some(None),
        Era::Legacy(r) if r >= LegacyRevision::V2025_11_25 => {
            let id = res.result.get("task")?.get("taskId")?.as_str()?;
            Some(Some(id.to_owned()))
        }
        // No tasks before 2025-11-25: a `task` member is just part of a result.
        Era::Legacy(_) => None,
    }
}

/// An `InputRequiredResult` answers only `tools/call`, `prompts/get` or `resources/read`, and
/// carries `inputRequests` or `requestState` (§7.2, §9 F50).
pub(super) fn input_required_shape(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for &i in &ix.emissions {
        let Some(Message::Result(res)) = ix.msg(i) else {
            continue;
        };
        if res.result_type != Some(ResultType::InputRequired) {
            continue;
        }
        let method = answered(ix, i).map(|r| ix.requests[r].method.as_str());
        let why = match method {
            Some(m) if !MRTR_METHODS.contains(&m) => {
                format!(
                    "input_required answers {} ({m}), which may not ask for input",
                    res.id
                )
            }
            _ if !res.result.contains_key("inputRequests")
                && !res.result.contains_key("requestState") =>
            {
                format!(
                    "input_required for {} carries neither inputRequests nor requestState",
                    res.id
                )
            }
            _ => continue,
        };
        s.flag(rule!("input-required-shape"), vec![i], why);
    }
}

/// One `input_required` answer the client read, waiting for its retry.
struct Round {
    answer: usize,
    request: usize,
    method: String,
    base: Map<String, Value>,
    state: Option<Value>,
}

/// The params a retry repeats: all but `inputResponses` and `requestState`.
fn base_params(params: &Map<String, Value>) -> Map<String, Value> {
    let mut base = params.clone();
    base.remove("inputResponses");
    base.remove("requestState");
    base
}

/// The retry after `input_required` has a new id and echoes `requestState` exactly, or leaves it
/// out when none was given; a `requestState` comes only from the server (§7.2, §9 F49).
pub(super) fn input_required_retry(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    let mut rounds: Vec<Round> = Vec::new();
    for i in 0..ix.trace.events.len() {
        if client_reads(ix, i) {
            let Some(Message::Result(res)) = ix.msg(i) else {
                continue;
            };
            if res.result_type != Some(ResultType::InputRequired) {
                continue;
            }
            let Some(r) = ix.by_id(&res.id, i) else {
                continue;
            };
            let Some(q) = request_of(ix, r) else { continue };
            rounds.push(Round {
                answer: i,
                request: r,
                method: q.method.to_string(),
                base: base_params(&q.params),
                state: res.result.get("requestState").cloned(),
            });
            continue;
        }
        if sender(ix, i) != Some(Side::Client) {
            continue;
        }
        let Some(Message::Request(q)) = ix.msg(i) else {
            continue;
        };
        let echoed = q.params.get("requestState");
        if !q.params.contains_key("inputResponses") && echoed.is_none() {
            continue;
        }
        let base = base_params(&q.params);
        // The round this retries: of the rounds of an identical call, the one whose state it
        // echoes if any (two identical calls in flight may be answered and retried in either
        // order, as the server sees them), else the latest.
        let same = |r: &Round| r.method == q.method && r.base == base;
        let Some(k) = rounds
            .iter()
            .rposition(|r| same(r) && r.state.as_ref() == echoed && echoed.is_some())
            .or_else(|| rounds.iter().rposition(same))
        else {
            if echoed.is_some() {
                let msg = format!(
                    "request {} carries a requestState no input_required gave for this call",
                    q.id
                );
                s.flag(rule!("input-required-retry"), vec![i], msg);
            }
            continue;
        };
        // A retry lost in turn may be sent again with the same state: the round stays.
        let round = &rounds[k];
        let original = ix.requests[round.request].id.as_ref();
        let why = if original == Some(&q.id) {
            format!("the retry reuses the id {} of the request it retries", q.id)
        } else if echoed != round.state.as_ref() {
            match (&round.state, echoed) {
                (Some(_), None) => format!(
                    "the retry {} leaves out the requestState it was given",
                    q.id
                ),
                (None, Some(_)) => {
                    format!("the retry {} adds a requestState none was given for", q.id)
                }
                _ => format!("the retry {} changes the requestState it was given", q.id),
            }
        } else {
            continue;
        };
        s.flag(rule!("input-required-retry"), vec![round.answer, i], why);
    }
}
