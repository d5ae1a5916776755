//! Long work (2026-07-28 §7): input rounds asked before a call's work starts, tasks
//! created, polled, cancelled and expired, and `subscriptions/listen` streams notified.

use serde_json::{json, Map, Value};

use crate::model::mutant::Mutant;
use crate::model::server_eras::JobKey;
use crate::model::server_transmit::ServerTransmit;
use crate::model::tasks::{request_state, result_of, task_fields, TaskStatus};
use crate::model::StreamId;
use crate::time::Time;
use crate::wire::{
    codes, ErrorResponse, Notification, Progress, Request, ResultType, META_SUBSCRIPTION_ID,
    METHOD_SUBSCRIPTIONS_ACKNOWLEDGED, METHOD_TASKS_CANCEL, METHOD_TASKS_GET,
};

use super::config::ResponseMode;
use super::{keepalive_due, Server};

/// An open `subscriptions/listen` request.
#[derive(Debug, Clone)]
pub(super) struct Listen {
    pub(super) stream: Option<StreamId>,
    pub(super) filter: Map<String, Value>,
    pub(super) last_write: Time,
    pub(super) next_notify: Option<Time>,
}

impl Server {
    /// Ends the call with an `InputRequiredResult` for `round` (§7.2).
    pub(super) fn ask_for_input(
        &mut self,
        stream: Option<StreamId>,
        r: &Request,
        round: u64,
        arguments: &Value,
    ) {
        let mut fields = Map::new();
        if !self.mutant(Mutant::InputRequiredWithoutState) {
            let ask = json!({"method": "elicitation/create", "params": {
                "message": format!("confirm round {round}"),
                "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}});
            fields.insert("inputRequests".into(), json!({ "confirm": ask }));
            fields.insert(
                "requestState".into(),
                json!(request_state(round, arguments)),
            );
        }
        let res = result_of(r.id.clone(), ResultType::InputRequired, fields);
        if let (Some(token), true) = (
            r.progress_token(),
            self.mutant(Mutant::ProgressAfterInputRequired),
        ) {
            // The handler keeps reporting after it asked for input; on HTTP it holds the
            // stream open for that.
            if let (Some(s), ResponseMode::Sse) = (stream, self.config.behaviour.response_mode) {
                self.sse_start(s);
            }
            self.send(stream, res.into());
            self.send(stream, Progress::new(token.clone(), 1.0).into());
            if let Some(s) = stream.filter(|s| self.open_sse.remove(s)) {
                self.transmits
                    .push_back(ServerTransmit::SseEnd { stream: s });
            }
        } else {
            self.respond(stream, res.into(), 200);
        }
        let key = self.key(stream, r.id.clone());
        self.answered.insert(key);
    }

    pub(super) fn task_fields(&self, id: &str) -> Map<String, Value> {
        let b = &self.config.behaviour;
        self.tasks
            .get(id)
            .map(|t| task_fields(id, t, b.task_ttl, b.poll_interval))
            .unwrap_or_default()
    }

    /// `tasks/get`, `tasks/cancel` and `tasks/update` (§7.3). An unknown or expired task is
    /// -32602; so is a cancel of a task already ended (conformance `tasks-lifecycle`).
    pub(super) fn task_request(&mut self, now: Time, stream: Option<StreamId>, r: Request) {
        let task_id = r.params.get("taskId").and_then(Value::as_str);
        let Some(task_id) = task_id.filter(|id| self.tasks.get(id).is_some()) else {
            if let (Some(id), true) = (task_id, self.mutant(Mutant::UnknownTaskWorking)) {
                let fields = json!({"taskId": id, "status": "working"});
                let fields = fields.as_object().cloned().unwrap_or_default();
                let res = result_of(r.id, ResultType::Complete, fields);
                return self.respond(stream, res.into(), 200);
            }
            let e = ErrorResponse::new(
                Some(r.id),
                codes::INVALID_PARAMS,
                "unknown or expired taskId",
            );
            return self.respond(stream, e.into(), 400);
        };
        let task_id = task_id.to_owned();
        let status = self.tasks.get(&task_id).map(|t| t.status);
        let answer = match &*r.method {
            METHOD_TASKS_GET => {
                let mut fields = self.task_fields(&task_id);
                if let Some(result) = self.tasks.get(&task_id).and_then(|t| t.result.clone()) {
                    fields.insert("result".into(), Value::Object(result));
                }
                result_of(r.id, ResultType::Complete, fields)
            }
            METHOD_TASKS_CANCEL if status.is_some_and(TaskStatus::is_terminal) => {
                let e = ErrorResponse::new(Some(r.id), codes::INVALID_PARAMS, "the task has ended");
                return self.respond(stream, e.into(), 400);
            }
            METHOD_TASKS_CANCEL => {
                self.cancel_task(now, &task_id);
                let fields = if self.mutant(Mutant::CancelAckIsTask) {
                    self.task_fields(&task_id)
                } else {
                    Map::new()
                };
                result_of(r.id, ResultType::Complete, fields)
            }
            // Input during a task: the reference server never asks for any, so an update is
            // acknowledged and changes nothing (eventually consistent, §7.3).
            _ => result_of(r.id, ResultType::Complete, Map::new()),
        };
        self.respond(stream, answer.into(), 200);
    }

    /// `tasks/cancel` reached a working task: it ends `cancelled` and its work stops. The
    /// faulty store marks it cancelled but lets the work finish and overwrite the state.
    pub(super) fn cancel_task(&mut self, now: Time, task_id: &str) {
        let Some(task) = self.tasks.get_mut(task_id) else {
            return;
        };
        task.status = TaskStatus::Cancelled;
        task.updated = now;
        let origin = task.origin.clone();
        if !self.mutant(Mutant::TaskTerminalChanges) {
            self.cancel(&origin);
        }
    }

    /// The faulty server of [`Mutant::TaskCancelledOnDisconnect`]: a connection's end takes
    /// every working task with it.
    pub(super) fn cancel_every_task(&mut self, now: Time) {
        let working: Vec<String> = self.jobs.values().filter_map(|j| j.task.clone()).collect();
        for id in working {
            self.cancel_task(now, &id);
        }
    }

    pub(super) fn start_listen(&mut self, now: Time, stream: Option<StreamId>, r: Request) {
        let filter = r
            .params
            .get("notifications")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(s) = stream {
            self.sse_start(s);
        }
        let mut params = Map::new();
        params.insert("notifications".into(), Value::Object(filter.clone()));
        params.insert(
            "_meta".into(),
            json!({ META_SUBSCRIPTION_ID: r.id.to_json() }),
        );
        let ack = Notification {
            method: METHOD_SUBSCRIPTIONS_ACKNOWLEDGED.into(),
            params: Some(params),
        };
        self.send(stream, ack.into());
        let wants_changes = filter.get("toolsListChanged") == Some(&Value::Bool(true))
            || self.mutant(Mutant::ListenUnfiltered);
        let next_notify = self
            .config
            .behaviour
            .listen_notify_interval
            .filter(|_| wants_changes)
            .map(|d| now + d);
        let listen = Listen {
            stream,
            filter,
            last_write: now,
            next_notify,
        };
        let key = self.key(stream, r.id);
        self.listens.insert(key, listen);
    }

    /// The tool list changed: notify every listen that opted into `toolsListChanged`.
    pub fn notify_tools_changed(&mut self, now: Time) {
        let targets: Vec<JobKey> = self
            .listens
            .iter()
            .filter(|(_, l)| {
                l.filter.get("toolsListChanged") == Some(&Value::Bool(true))
                    || self.mutant(Mutant::ListenUnfiltered)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in targets {
            self.notify_listen(now, &id);
        }
    }

    /// One `notifications/tools/list_changed` on subscription `id`, tagged with it.
    pub(super) fn notify_listen(&mut self, now: Time, key: &JobKey) {
        let id = &key.id;
        let Some(listen) = self.listens.get_mut(key) else {
            return;
        };
        listen.last_write = now;
        let stream = listen.stream;
        let mut params = Map::new();
        if !self.config.mutants.has(Mutant::ListenUntagged) {
            params.insert(
                "_meta".into(),
                json!({ META_SUBSCRIPTION_ID: id.to_json() }),
            );
        }
        let n = Notification {
            method: "notifications/tools/list_changed".into(),
            params: Some(params),
        };
        self.send(stream, n.into());
    }

    /// Subscription notices and keep-alives due at `now`.
    pub(super) fn listen_timers(&mut self, now: Time) {
        let keepalive = self.keepalive_interval();
        let every = self.config.behaviour.listen_notify_interval;
        let ids: Vec<JobKey> = self.listens.keys().cloned().collect();
        for id in ids {
            let Some(listen) = self.listens.get_mut(&id) else {
                continue;
            };
            if let (Some(at), Some(every)) = (listen.next_notify, every) {
                if at <= now {
                    listen.next_notify = Some(now + every);
                    self.notify_listen(now, &id);
                }
            }
            if let Some(listen) = self.listens.get_mut(&id) {
                let comment = keepalive_due(now, keepalive, listen.stream, &mut listen.last_write);
                self.transmits.extend(comment);
            }
        }
    }

    /// Forgets tasks past their `ttlMs`; a task still working then stops (§7.3: the server
    /// MAY delete it).
    pub(super) fn expire_tasks(&mut self, now: Time) {
        for (_, task) in self.tasks.expire(now, self.config.behaviour.task_ttl) {
            self.cancel(&task.origin);
        }
    }
}
