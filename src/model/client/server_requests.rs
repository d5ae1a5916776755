//! The server's own requests to the client (sampling, roots, `ping`) and the client's
//! liveness `ping` of a legacy server: answered, timed, and their answers shaped per era.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::model::policy::TimeoutPolicy;
use crate::time::Time;
use crate::wire::{codes, Message, Request, RequestId, ResultResponse};

use super::config::CallSpec;
use super::{Client, Purpose};

/// How long the host's model takes to answer a legacy server's `sampling/createMessage`.
pub const SAMPLING_DELAY: Duration = Duration::from_secs(4);

/// A legacy client whose calls have heard nothing from the server this long sends a `ping`
/// (its liveness check; on stdio the answer is also a barrier: the server read everything
/// before it).
pub const PING_AFTER: Duration = Duration::from_secs(15);

/// How long a `ping` may take to be answered.
pub const PING_POLICY: TimeoutPolicy = TimeoutPolicy {
    timeout: Some(Duration::from_secs(10)),
    reset_timeout_on_progress: false,
    max_total_timeout: None,
};

/// A result in the legacy shape (no `resultType`).
fn legacy_result(id: RequestId, result: Map<String, Value>) -> ResultResponse {
    ResultResponse {
        id,
        result_type: None,
        result,
    }
}

impl Client {
    /// Legacy era: a request of the server's own (docs/spec/mcp-2025-11-25.md LB7). `ping`
    /// and `roots/list` are answered at once, `sampling/createMessage` after the host's
    /// model took [`SAMPLING_DELAY`], anything else with -32601.
    /// A request from a server outside the legacy era carries nothing this client acts on.
    pub(super) fn server_request(&mut self, now: Time, r: Request) {
        let Some(legacy) = self.conn.legacy_mut() else {
            return;
        };
        if !legacy.asked.insert(r.id.clone()) {
            return;
        }
        if r.method == "sampling/createMessage" {
            legacy.answering.insert(r.id, now + SAMPLING_DELAY);
            return;
        }
        let answer: Message = match &*r.method {
            "ping" => legacy_result(r.id, Map::new()).into(),
            "roots/list" => {
                let roots = serde_json::json!({"roots": []});
                legacy_result(r.id, roots.as_object().cloned().unwrap_or_default()).into()
            }
            _ => crate::wire::ErrorResponse::new(
                Some(r.id),
                codes::METHOD_NOT_FOUND,
                "Method not found",
            )
            .into(),
        };
        let (_, transmit) = self.addressed(answer);
        self.transmits.push_back(transmit);
    }

    /// The answers of the host's model that are due at `now`.
    pub(super) fn answer_timers(&mut self, now: Time) {
        let Some(legacy) = self.conn.legacy_mut() else {
            return;
        };
        let due: Vec<RequestId> = legacy
            .answering
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &due {
            legacy.answering.remove(id);
        }
        for id in due {
            let sampled = serde_json::json!({
                "role": "assistant",
                "content": {"type": "text", "text": "The step is done."},
                "model": "mcp-sim",
                "stopReason": "endTurn",
            });
            let answer = legacy_result(id, sampled.as_object().cloned().unwrap_or_default());
            let (_, transmit) = self.addressed(answer.into());
            self.transmits.push_back(transmit);
        }
    }

    /// When the legacy client pings next: [`PING_AFTER`] after it last heard from the server,
    /// while a call is outstanding, the handshake is done and no ping is in flight.
    pub(super) fn ping_due(&self) -> Option<Time> {
        let waiting = self.pending.values().any(|p| p.purpose == Purpose::Call);
        let legacy = self.conn.legacy()?;
        let ready = legacy.opened() && legacy.ping.is_none() && waiting;
        ready.then_some(legacy.last_heard + PING_AFTER)
    }

    pub(super) fn ping_timer(&mut self, now: Time) {
        if self.ping_due().is_none_or(|at| at > now) {
            return;
        }
        let spec = CallSpec {
            method: "ping".into(),
            params: Map::new(),
            progress: false,
            policy: PING_POLICY,
            idempotent: false,
            task: false,
        };
        // The next ping counts from this one, answered or not.
        if let Some(legacy) = self.conn.legacy_mut() {
            legacy.last_heard = now;
        }
        let id = self.issue(now, spec, 0, Purpose::Ping);
        if let Some(legacy) = self.conn.legacy_mut() {
            legacy.ping = Some(id);
        }
    }
}
