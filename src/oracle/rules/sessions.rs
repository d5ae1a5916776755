//! The legacy era's HTTP sessions and its disconnects (docs/spec/mcp-2025-11-25.md §5, LA5,
//! LA6, LC11): the session id and the protocol-version header on every request, a new
//! handshake after a 404, and a closed stream that is not a cancel.
//!
//! The headers are judged where the trace recorded them (the `headers` of a POST, of an `open`
//! and of a `status`); a trace without them has nothing to judge here.

use std::collections::BTreeSet;

use super::{sender, Sink};

use crate::model::Transport;
use crate::trace::{EventKind, Side};
use crate::wire::Message;
use crate::wire::{Era, LegacyRevision};

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";

/// The side whose view of statuses is used: the client's when it was recorded.
fn viewer(s: &Sink<'_, '_>) -> Side {
    super::view(s.ix, Side::Client)
}

/// What the client sent at event `i` over HTTP with its headers: the method (`initialize`,
/// `tools/call`, `GET`, a notification's method, `response`) and the headers, when recorded.
fn client_http<'t>(
    s: &Sink<'t, '_>,
    i: usize,
) -> Option<(String, &'t std::collections::BTreeMap<String, String>)> {
    let ix = s.ix;
    let event = &ix.trace.events[i];
    match &event.kind {
        EventKind::Open {
            method, headers, ..
        } if event.side == viewer(s) => Some((method.clone(), headers.as_ref()?)),
        EventKind::Send(w) | EventKind::Recv(w)
            if sender(ix, i) == Some(Side::Client)
                && Transport::from(w.transport) == Transport::Http =>
        {
            let method = match ix.msg(i)? {
                Message::Request(r) => r.method.to_string(),
                Message::Notification(n) => n.method.clone(),
                Message::Cancelled(_) => "notifications/cancelled".into(),
                Message::Progress(_) => "notifications/progress".into(),
                Message::Result(_) | Message::Error(_) => "response".into(),
            };
            Some((method, w.headers.as_ref()?))
        }
        _ => None,
    }
}

/// The stream of a client's send or `open`.
fn stream_of(kind: &EventKind) -> Option<u64> {
    match kind {
        EventKind::Open { stream, .. } => Some(*stream),
        EventKind::Send(w) | EventKind::Recv(w) => w.stream,
        _ => None,
    }
}

/// LA5: once the initialize response issued `Mcp-Session-Id`, every later request carries
/// it; after a 404 (the session expired) the client's next request is a new `initialize`.
pub(super) fn session_id_sent(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if !ix.era.is_legacy() {
        return;
    }
    let init_streams: BTreeSet<u64> = ix
        .requests
        .iter()
        .filter(|r| r.method == "initialize")
        .filter_map(|r| r.stream)
        .collect();
    let viewer = viewer(s);
    let mut session: Option<(String, usize)> = None;
    let mut expired: Option<usize> = None;
    // The session header each stream's request went out with.
    let mut sent_in: std::collections::BTreeMap<u64, Option<String>> = Default::default();
    for (i, event) in ix.trace.events.iter().enumerate() {
        if let EventKind::Status {
            stream: Some(stream),
            status,
            headers,
            ..
        } = &event.kind
        {
            if event.side != viewer {
                continue;
            }
            // A 404 expires the session only when the request it answers was sent in it (a
            // late answer to the old session's request says nothing of the new one).
            let sent_in_current = session
                .as_ref()
                .is_some_and(|(id, _)| sent_in.get(stream) == Some(&Some(id.clone())));
            if *status == 404 && sent_in_current {
                expired = Some(i);
            } else if init_streams.contains(stream) {
                if let Some(id) = headers.as_ref().and_then(|h| h.get(SESSION)) {
                    session = Some((id.clone(), i));
                    expired = None;
                }
            }
            continue;
        }
        let Some((method, headers)) = client_http(s, i) else {
            continue;
        };
        if let Some(stream) = stream_of(&event.kind) {
            sent_in.insert(stream, headers.get(SESSION).cloned());
        }
        if method == "initialize" {
            session = None;
            expired = None;
            continue;
        }
        if let Some(at) = expired.take() {
            let msg = format!("after the 404 the client sent {method} before initializing again");
            s.flag(rule!("session-id-sent"), vec![at, i], msg);
            continue;
        }
        let Some((id, issued)) = &session else {
            continue;
        };
        let problem = match headers.get(SESSION) {
            None => Some(format!(
                "{method} carries no Mcp-Session-Id (the session is {id})"
            )),
            Some(v) if v != id => Some(format!(
                "{method} carries Mcp-Session-Id {v}, the session is {id}"
            )),
            Some(_) => None,
        };
        if let Some(msg) = problem {
            s.flag(rule!("session-id-sent"), vec![*issued, i], msg);
        }
    }
}

/// LA6 (2025-06-18 and later): every request after the initialize result carries
/// `MCP-Protocol-Version` equal to the negotiated version.
pub(super) fn protocol_version_header(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    let Era::Legacy(revision) = ix.era else {
        return;
    };
    if revision < LegacyRevision::V2025_06_18 {
        return;
    }
    let negotiated = ix.era.version();
    let client = ix.has(Side::Client);
    let Some(done) = ix
        .requests
        .iter()
        .filter(|r| r.method == "initialize")
        .filter_map(|r| {
            if client {
                r.client_response
            } else {
                r.responses.first().copied()
            }
        })
        .min()
    else {
        return;
    };
    for i in done + 1..ix.trace.events.len() {
        let Some((method, headers)) = client_http(s, i) else {
            continue;
        };
        if method == "initialize" {
            continue;
        }
        let problem = match headers.get(VERSION) {
            None => Some(format!("{method} carries no MCP-Protocol-Version")),
            Some(v) if v != negotiated => Some(format!(
                "{method} carries MCP-Protocol-Version {v}, negotiated {negotiated}"
            )),
            Some(_) => None,
        };
        if let Some(msg) = problem {
            s.flag(rule!("protocol-version-header"), vec![done, i], msg);
        }
    }
}

/// LC11: a closed stream is not a cancel. A server that saw a request's stream close, had
/// received no cancel for it, and then released it without answering, with no work after the
/// close and within the grace window of it, dropped the request because its stream closed.
/// A server that works on after the close (and cannot deliver, or delivers on a resumed
/// stream) is correct.
pub(super) fn disconnect_taken_as_cancel(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if !ix.era.is_legacy() || !ix.has(Side::Server) {
        return;
    }
    for r in &ix.requests {
        if r.transport != Some(Transport::Http) || r.work.is_empty() {
            continue;
        }
        let Some(&close) = r
            .closes
            .iter()
            .find(|&&c| ix.trace.events[c].side == Side::Server)
        else {
            continue;
        };
        let Some(&release) = r.release.iter().find(|&&x| x > close) else {
            continue;
        };
        let answered = r.responses.iter().any(|&x| x < release);
        let cancelled = r.server_cancel_seen.is_some_and(|c| c < release);
        let worked_on = r.work.iter().any(|&w| w > close);
        let at_once = s.t(release) <= s.t(close) + s.config.grace_ms;
        // A server that went down in between released everything (its backend's doing).
        let crashed = ix.trace.events[close..=release].iter().any(|e| {
            e.side == Side::Server && matches!(e.kind, EventKind::Close { stream: None, .. })
        });
        if !answered && !cancelled && !worked_on && at_once && !crashed {
            let msg = format!(
                "{} was released without an answer {} ms after its stream closed, with no cancel received",
                s.name(r),
                s.t(release) - s.t(close)
            );
            s.flag(
                rule!("disconnect-taken-as-cancel"),
                vec![close, release],
                msg,
            );
        }
    }
}
