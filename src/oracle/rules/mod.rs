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
    after_cancel, cancel_on_timeout, cancel_unknown_request, late_response_delivered,
    race_not_graceful, resource_leak, server_cancel_not_listen, single_outcome,
};
use http::{http_request_headers, http_status};
use listen::{listen_ack_first, listen_filter, listen_reopened, listen_tagged};
use messages::{
    duplicate_response, error_code_reserved, ids_and_tokens, message_shapes, notification_answered,
};
use progress::{progress, reset_needs_token};
use tasks::{
    cancel_targets_task, input_required_retry, input_required_shape, task_ack, task_not_negotiated,
    task_poll_interval, task_states, task_unknown, Tasks,
};
use timeouts::{declared_deadline, timeouts};
use transport::{idle_stream_cut, wire_integrity};

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
    message_shapes(&mut s);
    ids_and_tokens(&mut s);
    progress(&mut s);
    server_cancel_not_listen(&mut s);
    cancel_unknown_request(&mut s, &tasks);
    for r in 0..ix.requests.len() {
        let req = &ix.requests[r];
        duplicate_response(&mut s, req);
        after_cancel(&mut s, req);
        cancel_on_timeout(&mut s, req);
        timeouts(&mut s, req);
        declared_deadline(&mut s, req);
        reset_needs_token(&mut s, req);
        late_response_delivered(&mut s, req);
        resource_leak(&mut s, req);
        single_outcome(&mut s, req);
    }
    listen_ack_first(&mut s);
    listen_tagged(&mut s);
    listen_filter(&mut s);
    listen_reopened(&mut s);
    error_code_reserved(&mut s);
    notification_answered(&mut s);
    task_not_negotiated(&mut s);
    task_ack(&mut s);
    task_states(&mut s, &tasks);
    task_unknown(&mut s, &tasks);
    task_poll_interval(&mut s);
    cancel_targets_task(&mut s, &tasks);
    input_required_shape(&mut s);
    input_required_retry(&mut s);
    race_not_graceful(&mut s);
    idle_stream_cut(&mut s);
    wire_integrity(&mut s);
    http_request_headers(&mut s);
    http_status(&mut s);
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
