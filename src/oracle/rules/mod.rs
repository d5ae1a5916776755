//! The rules, one small function each, grouped by the section of the 2026-07-28 digest they
//! enforce: [`messages`] (§1, §8), [`progress`] (§2), [`cancellation`] (§3), [`timeouts`]
//! (§4), [`transport`] and [`http`] (§5), [`listen`] (§7.1) and [`tasks`] (§7.2, §7.3). Each
//! reads the [`Index`] built once per trace and reports through a [`Sink`]; what they share (who
//! sent a message, whether a request is outstanding) is here.

mod cancellation;
mod http;
mod listen;
mod messages;
mod progress;
mod tasks;
mod timeouts;
mod transport;

pub use cancellation::CANCEL_REACTION_MS;

use super::index::{Index, Req};
use super::{Level, OracleConfig, Violation};
use crate::trace::{EventKind, Side};
use cancellation::{
    after_cancel, cancel_on_timeout, client_cancels, connection_races, late_delivery, outcomes,
    resources, server_cancels,
};
use http::{request_headers, statuses};
use listen::{listen_ack_first, listen_filter, listen_reopened, listen_tagged};
use messages::{
    duplicate_response, error_codes, message_shape, notification_answered, request_ids,
};
use progress::{progress, reset_needs_token};
use tasks::{
    cancel_targets_task, input_required_retry, input_required_shape, task_acks, task_negotiated,
    task_polls, task_states, task_unknown, Tasks,
};
use timeouts::{declared_deadline, timeouts};
use transport::{idle_cuts, wire_integrity};

/// Collects violations for one check.
struct Sink<'a, 'c> {
    ix: &'a Index<'a>,
    config: &'c OracleConfig,
    out: Vec<Violation>,
}

impl Sink<'_, '_> {
    fn flag(&mut self, rule: &'static str, level: Level, events: Vec<usize>, message: String) {
        self.out.push(Violation {
            rule,
            level,
            events,
            message,
        });
    }

    fn t(&self, i: usize) -> u64 {
        self.ix.t(i)
    }

    fn name(&self, r: &Req) -> String {
        r.id.as_ref()
            .map_or_else(|| "?".into(), |id| format!("request {id}"))
    }
}

pub(super) fn check_all(ix: &Index<'_>, config: &OracleConfig) -> Vec<Violation> {
    let mut s = Sink {
        ix,
        config,
        out: Vec::new(),
    };
    let tasks = Tasks::build(ix);
    message_shape(&mut s);
    request_ids(&mut s);
    progress(&mut s);
    server_cancels(&mut s);
    client_cancels(&mut s, &tasks);
    for r in 0..ix.requests.len() {
        let req = &ix.requests[r];
        duplicate_response(&mut s, req);
        after_cancel(&mut s, req);
        cancel_on_timeout(&mut s, req);
        timeouts(&mut s, req);
        declared_deadline(&mut s, req);
        reset_needs_token(&mut s, req);
        late_delivery(&mut s, req);
        resources(&mut s, req);
        outcomes(&mut s, req);
    }
    listen_ack_first(&mut s);
    listen_tagged(&mut s);
    listen_filter(&mut s);
    listen_reopened(&mut s);
    error_codes(&mut s);
    notification_answered(&mut s);
    task_negotiated(&mut s);
    task_acks(&mut s);
    task_states(&mut s, &tasks);
    task_unknown(&mut s, &tasks);
    task_polls(&mut s);
    cancel_targets_task(&mut s, &tasks);
    input_required_shape(&mut s);
    input_required_retry(&mut s);
    connection_races(&mut s);
    idle_cuts(&mut s);
    wire_integrity(&mut s);
    request_headers(&mut s);
    statuses(&mut s);
    s.out
}

/// The side that wrote the message of event `i`, if it is judged here: sends are judged;
/// receipts only when the sender's own side was not recorded (so nothing is judged twice).
fn sender(ix: &Index<'_>, i: usize) -> Option<Side> {
    let e = &ix.trace.events[i];
    match (&e.kind, e.side) {
        (EventKind::Send(_), side @ (Side::Client | Side::Server)) => Some(side),
        (EventKind::Recv(_), Side::Client) if !ix.has(Side::Server) => Some(Side::Server),
        (EventKind::Recv(_), Side::Server) if !ix.has(Side::Client) => Some(Side::Client),
        _ => None,
    }
}

/// Whether request `r` is still outstanding at event `i`, in the client's view when the client
/// was recorded, else the server's.
fn outstanding_at(ix: &Index<'_>, r: &Req, i: usize) -> bool {
    let end = if ix.has(Side::Client) {
        r.client_end()
    } else {
        [r.responses.first().copied(), r.server_cancel_seen]
            .into_iter()
            .flatten()
            .min()
    };
    r.created < i && end.is_none_or(|e| e > i)
}
