//! What configures the client and what the application asks it to send.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::model::mutant::MutantSet;
use crate::model::policy::TimeoutPolicy;
use crate::model::Transport;
use crate::wire::{Era, METHOD_LISTEN, METHOD_TASKS_GET};

use super::conn::Connect;

/// The timeout of each `tasks/get` poll and `tasks/cancel`: short, ordinary requests.
pub const POLL_POLICY: TimeoutPolicy = TimeoutPolicy {
    timeout: Some(Duration::from_secs(30)),
    reset_timeout_on_progress: false,
    max_total_timeout: None,
};

/// Client configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The transport.
    pub transport: Transport,
    /// How many times an idempotent request lost with its stream or pipe is re-issued.
    pub max_retries: u32,
    /// Faulty behaviours switched on (none for the reference client).
    pub mutants: MutantSet,
    /// How it opens its connections: pinned to an era, or in auto mode.
    pub connect: Connect,
}

impl ClientConfig {
    /// A client on `transport` that re-issues lost idempotent requests once, in the modern era.
    pub fn new(transport: Transport) -> Self {
        ClientConfig {
            transport,
            max_retries: 1,
            mutants: MutantSet::NONE,
            connect: Connect::Pinned(Era::Modern),
        }
    }
}

/// What the application asks the client to send.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSpec {
    /// The method.
    pub method: String,
    /// The params other than `_meta`.
    pub params: Map<String, Value>,
    /// Ask for progress (attach a fresh `progressToken`).
    pub progress: bool,
    /// When to give up.
    pub policy: TimeoutPolicy,
    /// Safe to re-issue when lost (a read, or an idempotent tool).
    pub idempotent: bool,
    /// Declare the Tasks extension in this request's `clientCapabilities` (§7.3).
    pub task: bool,
}

impl CallSpec {
    /// A `tools/call` of `name` with `arguments`, asking for progress.
    pub fn tool(name: &str, arguments: Value, policy: TimeoutPolicy) -> Self {
        let mut params = Map::new();
        params.insert("name".into(), Value::from(name));
        params.insert("arguments".into(), arguments);
        CallSpec {
            method: "tools/call".into(),
            params,
            progress: true,
            policy,
            idempotent: false,
            task: false,
        }
    }

    /// A `subscriptions/listen` with `filter` (`params.notifications`). It has no response
    /// deadline; it is re-opened when its transport is lost.
    pub fn listen(filter: Map<String, Value>) -> Self {
        let mut params = Map::new();
        params.insert("notifications".into(), Value::Object(filter));
        CallSpec {
            method: METHOD_LISTEN.into(),
            params,
            progress: false,
            policy: TimeoutPolicy::none(),
            idempotent: true,
            task: false,
        }
    }

    /// A `tasks/get` of `task_id`, as a call of the application's own (one that resumes a
    /// task it remembers).
    pub fn task_get(task_id: &str) -> Self {
        Self::about_task(METHOD_TASKS_GET, task_id)
    }

    /// An ordinary request about task `task_id` (`tasks/get`, `tasks/cancel`).
    pub(super) fn about_task(method: &str, task_id: &str) -> Self {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::from(task_id));
        CallSpec {
            method: method.into(),
            params,
            progress: false,
            policy: POLL_POLICY,
            idempotent: false,
            task: false,
        }
    }
}
