//! Long work: tasks polled to their end, input rounds (`input_required`) answered, and
//! `subscriptions/listen` acknowledged (2026-07-28 §7).

use std::time::Duration;

use serde_json::{Map, Value};

use crate::model::mutant::Mutant;
use crate::model::tasks::TaskStatus;
use crate::model::{StreamId, Transport};
use crate::time::Time;
use crate::wire::{
    Cancelled, Message, RequestId, ResultResponse, METHOD_TASKS_CANCEL, METHOD_TASKS_GET,
};

use super::config::CallSpec;
use super::output::{ClientEvent, ClientTransmit, Outcome};
use super::{Client, Purpose};

/// How long a `subscriptions/listen` may wait for its acknowledgement (host policy, §9 D39).
pub const LISTEN_ACK_DEADLINE: Duration = Duration::from_secs(10);

/// At most this many `input_required` rounds are answered for one call; the call ends with the
/// last one unanswered.
pub const MAX_ROUNDS_ANSWERED: u32 = 16;

/// How long a task whose outcome the application already has is still polled to see it
/// settle.
pub const SETTLE_WATCH: Duration = Duration::from_secs(60);

/// The shortest poll spacing honoured, whatever a server asks (a guard against 0).
pub(super) const MIN_POLL: Duration = Duration::from_millis(100);

/// A task the client is waiting on: the call `origin` was answered with a `CreateTaskResult`.
#[derive(Debug, Clone)]
pub(super) struct ClientTask {
    pub(super) task_id: String,
    pub(super) poll_interval: Duration,
    /// When the last poll was sent.
    pub(super) last_poll: Time,
    /// The poll in flight, if any.
    pub(super) poll: Option<RequestId>,
    /// `createdAt + ttlMs`, counted from the receipt of the `CreateTaskResult`: the server
    /// may have forgotten the task by then.
    pub(super) expires: Option<Time>,
    /// The call's own hard bound (its policy's, from the call's send): then the client cancels
    /// the task and gives up.
    pub(super) deadline: Option<Time>,
    /// The application already has the call's outcome (it cancelled, or the deadline passed):
    /// polls go on only to see the task settle, until [`SETTLE_WATCH`] after that.
    pub(super) settled: bool,
}

impl Client {
    /// The call whose task the outstanding request `id` polls, if it is a poll.
    pub(super) fn poll_origin(&self, id: &RequestId) -> Option<RequestId> {
        match &self.pending.get(id)?.purpose {
            Purpose::Poll { origin } => Some(origin.clone()),
            _ => None,
        }
    }

    /// An `input_required` round: the request is over; the retry answers every input request
    /// and echoes `requestState` (§7.2).
    pub(super) fn answer_input(&mut self, now: Time, r: &ResultResponse) {
        let Some(pending) = self.finish(&r.id) else {
            return;
        };
        self.events.push_back(ClientEvent::Outcome {
            request: r.id.clone(),
            outcome: Outcome::InputRequired,
        });
        if pending.rounds >= MAX_ROUNDS_ANSWERED {
            return;
        }
        let mut spec = pending.spec.clone();
        spec.params.remove("inputResponses");
        spec.params.remove("requestState");
        if let Some(requests) = r.result.get("inputRequests").and_then(Value::as_object) {
            let answers: Map<String, Value> = requests
                .keys()
                .map(|k| {
                    let accept = serde_json::json!({"action": "accept", "content": {"ok": true}});
                    (k.clone(), accept)
                })
                .collect();
            spec.params
                .insert("inputResponses".into(), Value::Object(answers));
        }
        if let Some(state) = r.result.get("requestState") {
            if !self.mutant(Mutant::RequestStateDropped) {
                spec.params.insert("requestState".into(), state.clone());
            }
        }
        let reuse = pending
            .token
            .clone()
            .filter(|_| self.mutant(Mutant::RetryReusesToken));
        let new = self.issue_with_token(now, spec, pending.retries_left, Purpose::Call, reuse);
        if let Some(p) = self.pending.get_mut(&new) {
            p.rounds = pending.rounds + 1;
        }
        self.events.push_back(ClientEvent::Retried {
            lost: r.id.clone(),
            new,
        });
    }

    /// A poll of the task of `origin` ended: a terminal status ends the call, anything else
    /// (a working status, an error, a lost poll) waits for the next poll.
    pub(super) fn polled(
        &mut self,
        origin: &RequestId,
        poll: &RequestId,
        status: Option<TaskStatus>,
    ) {
        let Some(task) = self.tasks.get_mut(origin) else {
            return;
        };
        if task.poll.as_ref() == Some(poll) {
            task.poll = None;
        }
        let outcome = match status {
            Some(TaskStatus::Completed) => Outcome::Result,
            Some(TaskStatus::Failed) => Outcome::Error,
            Some(TaskStatus::Cancelled) => Outcome::Cancelled,
            Some(TaskStatus::Working) | None => return,
        };
        self.end_task(origin, outcome);
    }

    pub(super) fn end_task(&mut self, origin: &RequestId, outcome: Outcome) {
        if let Some(task) = self.tasks.remove(origin) {
            if !task.settled {
                self.events.push_back(ClientEvent::Outcome {
                    request: origin.clone(),
                    outcome,
                });
            }
        }
    }

    /// The application cancels the task of `origin`, or its deadline passed: `tasks/cancel`, and
    /// the call ends with `outcome` at once; polls go on until the task settles, for
    /// [`SETTLE_WATCH`] at most. The faulty client sends `notifications/cancelled` for the call.
    pub(super) fn cancel_task(&mut self, now: Time, origin: &RequestId, outcome: Outcome) {
        let Some(task) = self.tasks.get_mut(origin) else {
            return;
        };
        task.settled = true;
        task.expires = Some(
            task.expires
                .map_or(now + SETTLE_WATCH, |e| e.min(now + SETTLE_WATCH)),
        );
        let task_id = task.task_id.clone();
        if self.mutant(Mutant::CancelTaskWithNotification) {
            let mut cancel = Cancelled::new(origin.clone());
            cancel.reason = Some("cancelled by the application".into());
            let msg: Message = cancel.into();
            let t = match self.config.transport {
                Transport::Stdio => ClientTransmit::Line(msg),
                Transport::Http => {
                    let stream = StreamId(self.next_stream);
                    self.next_stream += 1;
                    ClientTransmit::Post { stream, msg }
                }
            };
            self.transmits.push_back(t);
        } else {
            let spec = CallSpec::about_task(METHOD_TASKS_CANCEL, &task_id);
            self.issue(now, spec, 0, Purpose::TaskCancel);
        }
        self.events.push_back(ClientEvent::Outcome {
            request: origin.clone(),
            outcome,
        });
    }

    /// Polls due and tasks past their `ttlMs` at `now`.
    pub(super) fn task_timers(&mut self, now: Time) {
        let origins: Vec<RequestId> = self.tasks.keys().cloned().collect();
        for origin in origins {
            let Some(task) = self.tasks.get(&origin) else {
                continue;
            };
            if task.expires.is_some_and(|e| e <= now) {
                self.end_task(&origin, Outcome::TimedOut);
                continue;
            }
            if !task.settled && task.deadline.is_some_and(|d| d <= now) {
                self.cancel_task(now, &origin, Outcome::TimedOut);
                continue;
            }
            if task.poll.is_some() || task.last_poll + task.poll_interval > now {
                continue;
            }
            let spec = CallSpec::about_task(METHOD_TASKS_GET, &task.task_id);
            let poll = self.issue(
                now,
                spec,
                0,
                Purpose::Poll {
                    origin: origin.clone(),
                },
            );
            if let Some(task) = self.tasks.get_mut(&origin) {
                task.poll = Some(poll);
                task.last_poll = now;
            }
        }
    }
}
