//! The server's side of long work that outlives its request: the Tasks extension's task store
//! (§7.3) and the `requestState` of multi round-trip requests (§7.2).
//!
//! A task is created when a `tools/call` that declared the extension in its own
//! `clientCapabilities` reaches the reference server: the call is answered at once with a
//! `CreateTaskResult` (which ends the call and its progress) and the work runs on as a job with
//! no stream and no token. Nothing about a connection ends a task: a closed stream, a lost
//! pipe or a proxy's cut leave it running, and only `tasks/cancel`, completion or its `ttlMs`
//! end it. The store lives in the server process, so a crash loses it and later polls get
//! -32602, as the spec requires for an unknown task; a durable store is a server's choice the
//! spec leaves open.
//!
//! `requestState` is opaque to the client and the server keeps nothing between rounds
//! (§6): the state names the round reached and carries a check over it and the call's
//! arguments, so a state the client altered or moved to another call is refused with -32602.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::server_eras::JobKey;
use crate::time::Time;
use crate::wire::{RequestId, ResultResponse, ResultType};

/// A task's state (§7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaskStatus {
    /// The work is running.
    Working,
    /// The work finished; its result is inlined in `tasks/get`.
    Completed,
    /// The work failed at the protocol level.
    Failed,
    /// `tasks/cancel` stopped it.
    Cancelled,
}

impl TaskStatus {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Parses the wire spelling (`input_required` counts as working here: the reference
    /// server never asks for input during a task).
    pub fn parse(s: &str) -> Option<TaskStatus> {
        match s {
            "working" | "input_required" => Some(TaskStatus::Working),
            "completed" => Some(TaskStatus::Completed),
            "failed" => Some(TaskStatus::Failed),
            "cancelled" => Some(TaskStatus::Cancelled),
            _ => None,
        }
    }

    /// Completed, failed and cancelled never change (§7.3).
    pub fn is_terminal(self) -> bool {
        self != TaskStatus::Working
    }
}

/// One task in the store.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    /// The `tools/call` that created it; its backend work is booked under this id.
    pub origin: JobKey,
    pub status: TaskStatus,
    pub created: Time,
    pub updated: Time,
    /// The tool's result once completed.
    pub result: Option<Map<String, Value>>,
}

/// The server's tasks, by id.
#[derive(Debug, Clone, Default)]
pub(crate) struct TaskStore {
    tasks: BTreeMap<String, Task>,
    next: u64,
}

impl TaskStore {
    /// Creates a working task for `origin`; returns its id, `task-<ms>-<n>`: the creation
    /// time keeps ids of a restarted server apart from those of the process before it, so an
    /// old id never names a new task.
    pub fn create(&mut self, now: Time, origin: JobKey) -> String {
        self.next += 1;
        let id = format!("task-{}-{}", now.as_millis(), self.next);
        let task = Task {
            origin,
            status: TaskStatus::Working,
            created: now,
            updated: now,
            result: None,
        };
        self.tasks.insert(id.clone(), task);
        id
    }

    pub fn get(&self, id: &str) -> Option<&Task> {
        self.tasks.get(id)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Task> {
        self.tasks.get_mut(id)
    }

    /// Removes every task whose `ttl` has run out at `now`; returns them with their ids.
    pub fn expire(&mut self, now: Time, ttl: Duration) -> Vec<(String, Task)> {
        let gone: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.created + ttl <= now)
            .map(|(id, _)| id.clone())
            .collect();
        gone.into_iter()
            .filter_map(|id| self.tasks.remove(&id).map(|t| (id, t)))
            .collect()
    }

    /// The next expiry.
    pub fn next_expiry(&self, ttl: Duration) -> Option<Time> {
        self.tasks.values().map(|t| t.created + ttl).min()
    }
}

/// `Time` as an ISO-8601 instant counted from the epoch: the simulation has no calendar, and
/// the field only needs to be well formed and ordered.
pub fn iso8601(t: Time) -> String {
    let ms = t.as_millis();
    let (s, ms) = (ms / 1000, ms % 1000);
    let (days, s) = (s / 86_400, s % 86_400);
    format!(
        "1970-01-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        1 + days.min(30),
        s / 3600,
        s / 60 % 60,
        s % 60,
        ms
    )
}

/// The task's fields as `CreateTaskResult` and `tasks/get` carry them, flat in the result.
pub(crate) fn task_fields(
    id: &str,
    task: &Task,
    ttl: Duration,
    poll: Duration,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("taskId".into(), json!(id));
    m.insert("status".into(), json!(task.status.as_str()));
    m.insert("createdAt".into(), json!(iso8601(task.created)));
    m.insert("lastUpdatedAt".into(), json!(iso8601(task.updated)));
    m.insert("ttlMs".into(), json!(ttl.as_millis() as u64));
    m.insert("pollIntervalMs".into(), json!(poll.as_millis() as u64));
    m
}

/// A result of the given type with `fields`.
pub(crate) fn result_of(
    id: RequestId,
    result_type: ResultType,
    fields: Map<String, Value>,
) -> ResultResponse {
    ResultResponse {
        id,
        result_type: Some(result_type),
        result: fields,
    }
}

/// The `requestState` after `round` answered rounds of a call with `arguments`.
pub fn request_state(round: u64, arguments: &Value) -> String {
    format!("round:{round}:{:016x}", check(round, arguments))
}

/// The round a `requestState` vouches for, if it is one this server wrote for `arguments`.
pub fn verify_state(state: &str, arguments: &Value) -> Option<u64> {
    let rest = state.strip_prefix("round:")?;
    let (round, sum) = rest.split_once(':')?;
    let round: u64 = round.parse().ok()?;
    (format!("{:016x}", check(round, arguments)) == sum).then_some(round)
}

/// FNV-1a over the round and the arguments' JSON text: an integrity check for the model, not
/// a secret (a real server signs its state).
fn check(round: u64, arguments: &Value) -> u64 {
    let text = format!("{round}|{arguments}");
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_verifies_only_for_its_round_and_arguments() {
        let args = json!({"steps": 3});
        let s = request_state(2, &args);
        assert_eq!(verify_state(&s, &args), Some(2));
        assert_eq!(verify_state(&s, &json!({"steps": 4})), None);
        assert_eq!(verify_state(&s.replace("round:2", "round:3"), &args), None);
        assert_eq!(verify_state("garbage", &args), None);
    }

    #[test]
    fn instants_are_iso8601() {
        assert_eq!(iso8601(Time::ZERO), "1970-01-01T00:00:00.000Z");
        let t = Time::ZERO + Duration::from_millis(90_061_001);
        assert_eq!(iso8601(t), "1970-01-02T01:01:01.001Z");
    }
}
