//! §1 JSON-RPC base rules: message shapes, request ids, one response per request.

use super::{outstanding_at, sender, Sink};

use crate::oracle::index::Req;
use crate::oracle::Level;
use crate::trace::{EventKind, Side};
use crate::wire::Message;

pub(super) fn message_shapes(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for i in 0..ix.trace.events.len() {
        let Some(from) = sender(ix, i) else { continue };
        let Some(decoded) = &ix.msgs[i] else { continue };
        let msg = match decoded {
            Err(_) if http_error_body(ix, i) => continue,
            Err(e) => {
                let rule = if e.path.contains("progressToken") {
                    rule!("progress-token-type")
                } else {
                    rule!("message-shape")
                };
                s.flag(
                    rule,
                    vec![i],
                    format!("{} sent an invalid message: {e}", from.as_str()),
                );
                continue;
            }
            Ok(m) => m,
        };
        let problem = if s.ix.era.is_legacy() {
            legacy_shape_problem(from, msg)
        } else {
            modern_shape_problem(from, msg)
        };
        if let Some(p) = problem {
            s.flag(rule!("message-shape"), vec![i], p.into());
        }
    }
}

/// Whether event `i` is the body of an HTTP error answer (a 4xx or 5xx status on its stream)
/// that does not try to be JSON-RPC (no `jsonrpc` member, or no JSON at all): such a body "MAY
/// be a JSON-RPC error" (§5.2; legacy §5 alike), so anything else there is allowed and is not
/// a message to judge. One that claims to be JSON-RPC is judged as any message.
fn http_error_body(ix: &crate::oracle::index::Index<'_>, i: usize) -> bool {
    let Some(w) = ix.wire(i) else { return false };
    let Some(stream) = w.stream else { return false };
    if w.msg.as_ref().is_some_and(|m| m.get("jsonrpc").is_some()) {
        return false;
    }
    ix.trace.events[..i]
        .iter()
        .rev()
        .find_map(|e| match e.kind {
            EventKind::Status {
                stream: Some(st),
                status,
                ..
            } if st == stream => Some(status >= 400),
            _ => None,
        })
        .unwrap_or(false)
}

/// What the modern era forbids of a well-formed message from `from` (§1.1-1.2).
fn modern_shape_problem(from: Side, msg: &Message) -> Option<&'static str> {
    match (from, msg) {
        (Side::Client, Message::Progress(_)) => {
            Some("clients do not send notifications/progress in 2026-07-28")
        }
        (Side::Client, Message::Notification(_)) => {
            Some("the only notification a client sends is notifications/cancelled")
        }
        (Side::Client, Message::Result(_) | Message::Error(_)) => {
            Some("clients never send responses")
        }
        (Side::Server, Message::Request(_)) => Some("servers never send requests"),
        (Side::Server, Message::Result(r)) if r.result_type.is_none() => {
            Some("server results MUST carry resultType")
        }
        _ => None,
    }
}

/// What the legacy era forbids of a well-formed message from `from`: either side may send
/// requests, notifications, progress and answers (docs/spec/mcp-2025-11-25.md §2-§4), but the
/// handshake's messages go one way only.
fn legacy_shape_problem(from: Side, msg: &Message) -> Option<&'static str> {
    match (from, msg) {
        (Side::Server, Message::Request(r)) if r.method == "initialize" => {
            Some("only the client sends initialize")
        }
        (Side::Server, Message::Notification(n)) if n.method == "notifications/initialized" => {
            Some("only the client sends notifications/initialized")
        }
        _ => None,
    }
}

pub(super) fn ids_and_tokens(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for (n, r) in ix.requests.iter().enumerate() {
        // The request's first sighting: the client's send, or the server's receipt when the
        // client was not recorded (a black-box client is judged by the server's view).
        let Some(id) = &r.id else { continue };
        let sent = r.created;
        for earlier in ix.requests[..n]
            .iter()
            .filter(|e| e.id.as_ref() == Some(id))
        {
            if outstanding_at(ix, earlier, sent) {
                let msg =
                    format!("id {id} is reused while the request that carried it is outstanding");
                s.flag(rule!("request-id-unique"), vec![earlier.created, sent], msg);
            } else {
                let msg = format!("id {id} is reused after the request that carried it ended");
                s.flag(rule!("request-id-reuse"), vec![earlier.created, sent], msg);
            }
        }
        let Some(token) = &r.token else { continue };
        for earlier in ix.requests[..n]
            .iter()
            .filter(|e| e.token.as_ref() == Some(token))
        {
            if outstanding_at(ix, earlier, sent) {
                let msg = format!(
                    "progressToken {token} is already carried by the outstanding {}",
                    s.name(earlier)
                );
                s.flag(
                    rule!("progress-token-unique"),
                    vec![earlier.created, sent],
                    msg,
                );
            } else {
                let msg = format!(
                    "progressToken {token} is reused after {} ended",
                    s.name(earlier)
                );
                s.flag(
                    rule!("progress-token-reuse"),
                    vec![earlier.created, sent],
                    msg,
                );
            }
        }
    }
}

/// The server never sends the codes 2026-07-28 retired (-32002, -32042) or an undefined code of
/// the spec's range -32020 to -32099 (MUST NOT), and avoids the legacy range -32000 to -32019
/// (SHOULD NOT) (§8, §9 I62).
pub(super) fn error_code_reserved(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for &i in &ix.emissions {
        let Some(Message::Error(e)) = ix.msg(i) else {
            continue;
        };
        let code = e.error.code;
        // Codes of the legacy era's own range are a SHOULD to leave behind; a retired or
        // undefined code of the reserved range breaks the MUST.
        let (at_most, why) = match code {
            -32002 | -32042 => (Level::Must, "a code 2026-07-28 retired"),
            -32022..=-32020 => continue,
            -32099..=-32023 => (
                Level::Must,
                "an undefined code of the spec's reserved range",
            ),
            -32019..=-32000 => (Level::Should, "a legacy code"),
            _ => continue,
        };
        let msg = format!("error {code} is {why}");
        s.flag_at_most(rule!("error-code-reserved"), at_most, vec![i], msg);
    }
}

pub(super) fn duplicate_response(s: &mut Sink<'_, '_>, r: &Req) {
    if let [first, second, ..] = r.responses[..] {
        s.flag(
            rule!("duplicate-response"),
            vec![first, second],
            format!("{} answered twice", s.name(r)),
        );
    }
}

/// On stdio the server never answers a notification (§8, §9 A10). An error without an id is the
/// answer to something whose id could not be read; when every message the server had read so
/// far decoded, there was none such, and an id-less error answers a notification (a real
/// server's -32601 for `notifications/initialized`, sharplens-mcp #6, rust-analyzer-mcp #21).
/// Each undecodable message read excuses one id-less error.
pub(super) fn notification_answered(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    let mut unreadable = 0usize;
    let mut last_notification = None;
    for i in 0..ix.trace.events.len() {
        let Some(w) = ix.wire(i) else { continue };
        if w.transport != crate::trace::TransportName::Stdio {
            continue;
        }
        if sender(ix, i) == Some(Side::Client) {
            match &ix.msgs[i] {
                Some(Err(_)) => unreadable += 1,
                Some(Ok(
                    Message::Cancelled(_) | Message::Notification(_) | Message::Progress(_),
                )) => last_notification = Some(i),
                _ => {}
            }
            continue;
        }
        if sender(ix, i) != Some(Side::Server) {
            continue;
        }
        let Some(Message::Error(e)) = ix.msg(i) else {
            continue;
        };
        if e.id.is_some() {
            continue;
        }
        if unreadable > 0 {
            unreadable -= 1;
            continue;
        }
        let events = last_notification.into_iter().chain([i]).collect();
        let msg = format!(
            "error {} without an id, though everything the client wrote was readable: it answers a notification",
            e.error.code
        );
        s.flag(rule!("notification-answered"), events, msg);
    }
}
