//! The rules, one small function each, grouped by the section of the 2026-07-28 digest they
//! enforce: [`messages`] (§1, §8), [`progress`] (§2), [`cancellation`] (§3), [`timeouts`]
//! (§4), [`transport`] and [`http`] (§5), [`listen`] (§7.1) and [`tasks`] (§7.2, §7.3), and
//! the legacy era's handshake in [`lifecycle`] (docs/spec/mcp-2025-11-25.md LA1-LA4), its HTTP
//! sessions in [`sessions`] (LA5, LA6, LC11) and its resumable streams in [`resumability`]
//! (LB8, LE15-LE19), and the server's own requests of that era in [`server_requests`]. Each
//! reads the [`Index`] built once per trace and reports through a [`Sink`]; what they share (who
//! sent a message, whether a request is outstanding) is here.

mod cancellation;
mod http;
pub(super) mod intermediary;
mod lifecycle;
mod listen;
mod messages;
mod progress;
mod resumability;
mod server_requests;
mod sessions;
mod tasks;
mod timeouts;
mod transport;

pub use cancellation::CANCEL_REACTION_MS;

use super::index::{Index, Req};
use super::{Level, OracleConfig, Violation};
use crate::trace::{EventKind, Side};
use cancellation::{
    after_cancel, cancel_on_timeout, cancel_over_http, cancel_unknown_request,
    late_response_delivered, race_not_graceful, resource_leak, server_cancel_not_listen,
    single_outcome,
};
use http::{http_request_headers, http_status, origin_validated};
use lifecycle::{
    initialize_cancelled, initialize_first, ping_answered, request_before_initialized,
};
use listen::{listen_ack_first, listen_filter, listen_reopened, listen_tagged};
use messages::{
    duplicate_response, error_code_reserved, ids_and_tokens, message_shapes, notification_answered,
};
use progress::{progress, reset_needs_token};
use resumability::resumability;
use server_requests::server_requests_rules;
use sessions::{disconnect_taken_as_cancel, protocol_version_header, session_id_sent};
use tasks::{
    cancel_targets_task, input_required_retry, input_required_shape, task_ack, task_not_negotiated,
    task_poll_interval, task_states, task_unknown, Tasks,
};
use timeouts::{declared_deadline, discover_timeout, timeouts};
use transport::{idle_stream_cut, wire_integrity};

/// Collects violations for one check.
struct Sink<'a, 'c> {
    ix: &'a Index<'a>,
    config: &'c OracleConfig,
    out: Vec<Violation>,
}

impl Sink<'_, '_> {
    /// Flags `rule` at its catalog level in the trace's era; nothing in an era that has no
    /// such rule. The level lives in the catalog only.
    fn flag(&mut self, rule: &'static str, events: Vec<usize>, message: String) {
        self.flag_at_most(rule, Level::Must, events, message);
    }

    /// Flags `rule` at its catalog level, or at `at_most` where that is weaker: for the few
    /// rules whose text sets a weaker level in one circumstance (each caller names it). A
    /// caller can soften a rule, never make it stricter than the catalog.
    fn flag_at_most(
        &mut self,
        rule: &'static str,
        at_most: Level,
        events: Vec<usize>,
        message: String,
    ) {
        let info = super::rule_info(rule).expect("rule! names a catalog rule");
        let Some(level) = info.level_in(self.ix.era) else {
            return;
        };
        let level = level.max(at_most);
        self.out.push(Violation {
            rule,
            level,
            events,
            message,
            hop: None,
            conn: None,
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
    cancel_over_http(&mut s);
    for r in 0..ix.requests.len() {
        let req = &ix.requests[r];
        duplicate_response(&mut s, req);
        after_cancel(&mut s, req);
        cancel_on_timeout(&mut s, req);
        timeouts(&mut s, req);
        discover_timeout(&mut s, req);
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
    origin_validated(&mut s);
    initialize_first(&mut s);
    request_before_initialized(&mut s);
    initialize_cancelled(&mut s);
    ping_answered(&mut s);
    server_requests_rules(&mut s);
    session_id_sent(&mut s);
    protocol_version_header(&mut s);
    disconnect_taken_as_cancel(&mut s);
    resumability(&mut s);
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

/// `side` when it was recorded, else the other end: whose view of an event to use.
fn view(ix: &Index<'_>, side: Side) -> Side {
    match side {
        Side::Client if !ix.has(Side::Client) => Side::Server,
        Side::Server if !ix.has(Side::Server) => Side::Client,
        side => side,
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
