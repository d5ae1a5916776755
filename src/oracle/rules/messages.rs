//! §1 JSON-RPC base rules: message shapes, request ids, one response per request.

use super::{outstanding_at, sender, Sink};

use crate::oracle::index::Req;
use crate::oracle::{rule, Level};
use crate::trace::Side;
use crate::wire::Message;

pub(super) fn message_shape(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for i in 0..ix.trace.events.len() {
        let Some(from) = sender(ix, i) else { continue };
        let Some(decoded) = &ix.msgs[i] else { continue };
        let msg = match decoded {
            Err(e) => {
                let rule = if e.path.contains("progressToken") {
                    rule::PROGRESS_TOKEN_TYPE
                } else {
                    rule::MESSAGE_SHAPE
                };
                s.flag(
                    rule,
                    Level::Must,
                    vec![i],
                    format!("{} sent an invalid message: {e}", from.as_str()),
                );
                continue;
            }
            Ok(m) => m,
        };
        let problem = match (from, msg) {
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
        };
        if let Some(p) = problem {
            s.flag(rule::MESSAGE_SHAPE, Level::Must, vec![i], p.into());
        }
    }
}

pub(super) fn request_ids(s: &mut Sink<'_, '_>) {
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
                s.flag(
                    rule::REQUEST_ID_UNIQUE,
                    Level::Must,
                    vec![earlier.created, sent],
                    msg,
                );
            } else {
                let msg = format!("id {id} is reused after the request that carried it ended");
                s.flag(
                    rule::REQUEST_ID_REUSE,
                    Level::Policy,
                    vec![earlier.created, sent],
                    msg,
                );
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
                    rule::PROGRESS_TOKEN_UNIQUE,
                    Level::Must,
                    vec![earlier.created, sent],
                    msg,
                );
            }
        }
    }
}

pub(super) fn duplicate_response(s: &mut Sink<'_, '_>, r: &Req) {
    if let [first, second, ..] = r.responses[..] {
        s.flag(
            rule::DUPLICATE_RESPONSE,
            Level::Must,
            vec![first, second],
            format!("{} answered twice", s.name(r)),
        );
    }
}
