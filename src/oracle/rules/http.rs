//! §5.2 and §8 on Streamable HTTP: the headers of a request POST, and the status each answer
//! comes with. Judged where the trace recorded them (`headers` on a POST's message, `status`
//! events); traces without them have nothing to judge here.

use std::collections::BTreeMap;

use super::{sender, Sink};
use crate::trace::{EventKind, Side, TransportName};
use crate::wire::http::{header_mismatch, status_for_code};
use crate::wire::{codes, Message};

/// A request POST's headers are missing or differ from its body (§9 E41): the client's fault.
pub(super) fn http_request_headers(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for i in 0..ix.trace.events.len() {
        if sender(ix, i) != Some(Side::Client) {
            continue;
        }
        let (Some(w), Some(Message::Request(r))) = (ix.wire(i), ix.msg(i)) else {
            continue;
        };
        let (TransportName::Http, Some(headers)) = (w.transport, &w.headers) else {
            continue;
        };
        if let Some(why) = header_mismatch(
            headers,
            &r.method,
            Some(&r.meta.protocol_version),
            &r.params,
        ) {
            let msg = format!("the POST of request {}: {why}", r.id);
            s.flag(rule!("http-request-headers"), vec![i], msg);
        }
    }
}

/// One HTTP stream as the server's end saw it (or the client's, when the server was not
/// recorded): the POST's message, the answer's status, the first response on it.
#[derive(Default)]
struct StreamView {
    post: Option<usize>,
    status: Option<(usize, u16, Option<String>)>,
    response: Option<usize>,
}

/// An answer's status disagrees with what it answers (§9 E41-E43, I63): a request whose headers
/// do not match its body gets 400 with -32020; an error whose code has a status (§8) comes with
/// it; an accepted notification gets 202; a request's 200 is JSON or an event stream. The
/// server's fault.
pub(super) fn http_status(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    let view = if ix.has(Side::Server) {
        Side::Server
    } else {
        Side::Client
    };
    let mut streams: BTreeMap<u64, StreamView> = BTreeMap::new();
    for (i, e) in ix.trace.events.iter().enumerate() {
        if e.side != view {
            continue;
        }
        match &e.kind {
            EventKind::Status {
                stream: Some(st),
                status,
                content_type,
                ..
            } => {
                streams.entry(*st).or_default().status.get_or_insert((
                    i,
                    *status,
                    content_type.clone(),
                ));
            }
            EventKind::Send(w) | EventKind::Recv(w) => {
                let Some(st) = w.stream else { continue };
                let incoming = matches!(
                    (view, &e.kind),
                    (Side::Server, EventKind::Recv(_)) | (Side::Client, EventKind::Send(_))
                );
                let v = streams.entry(st).or_default();
                if incoming {
                    v.post.get_or_insert(i);
                } else if matches!(ix.msg(i), Some(Message::Result(_) | Message::Error(_))) {
                    v.response.get_or_insert(i);
                }
            }
            _ => {}
        }
    }
    for v in streams.values() {
        let (Some(post), Some((at, status, content_type))) = (v.post, v.status.clone()) else {
            continue;
        };
        let mut flag = |why: String| {
            let mut events = vec![post, at];
            events.extend(v.response);
            events.sort_unstable();
            s.flag(rule!("http-status"), events, why);
        };
        let error_code = v.response.and_then(|r| match ix.msg(r) {
            Some(Message::Error(e)) => Some(e.error.code),
            _ => None,
        });
        match ix.msg(post) {
            Some(Message::Request(r)) => {
                let mismatch = ix
                    .wire(post)
                    .and_then(|w| w.headers.as_ref())
                    .and_then(|h| {
                        header_mismatch(h, &r.method, Some(&r.meta.protocol_version), &r.params)
                    });
                if let Some(why) = mismatch {
                    if status != 400 || error_code != Some(codes::HEADER_MISMATCH) {
                        flag(format!(
                            "request {} came with mismatched headers ({why}) and was answered {status}{}, not 400 with -32020",
                            r.id,
                            error_code.map(|c| format!(" with {c}")).unwrap_or_default()
                        ));
                    }
                    continue;
                }
                if let Some(want) = error_code.and_then(status_for_code) {
                    if status != want {
                        flag(format!(
                            "the error {} to request {} came with status {status}, not {want}",
                            error_code.unwrap_or_default(),
                            r.id
                        ));
                    }
                    continue;
                }
                let json_or_sse = content_type.as_deref().is_some_and(|c| {
                    let c = c.to_ascii_lowercase();
                    c.starts_with("application/json") || c.starts_with("text/event-stream")
                });
                if status == 200 && !json_or_sse {
                    flag(format!(
                        "request {} was answered 200 with content type {content_type:?}, neither application/json nor text/event-stream",
                        r.id
                    ));
                }
            }
            Some(Message::Cancelled(_) | Message::Progress(_) | Message::Notification(_))
                if (200..300).contains(&status) && status != 202 =>
            {
                flag(format!(
                    "a notification POST was accepted with {status}, not 202"
                ));
            }
            _ => {}
        }
    }
}

/// DNS-rebinding protection (2026-07-28 §9 I63, 2025-11-25 §5): a request whose recorded
/// `Origin` or `Host` names a host other than a loopback one (what the probe sends a loopback
/// server after its run, and what `serve` records of a request it refuses) must be refused
/// before it is served. A bad `Origin` gets 403 in 2026-07-28; the legacy era and a bad `Host`
/// ask only for a refusal (any 4xx). A request no status answered (the connection closed) was
/// not served either.
pub(super) fn origin_validated(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    let modern = !ix.era.is_legacy();
    for i in 0..ix.trace.events.len() {
        if sender(ix, i) != Some(Side::Client) {
            continue;
        }
        let Some(w) = ix.wire(i) else { continue };
        let (TransportName::Http, Some(headers), Some(stream)) =
            (w.transport, &w.headers, w.stream)
        else {
            continue;
        };
        let foreign = |name: &'static str| {
            headers
                .get(name)
                .filter(|v| !names_loopback(name, v))
                .map(|v| (name, v.as_str()))
        };
        let Some((header, value)) = foreign("origin").or_else(|| foreign("host")) else {
            continue;
        };
        let side = ix.trace.events[i].side;
        let status = (i + 1..ix.trace.events.len()).find_map(|j| {
            let e = &ix.trace.events[j];
            match &e.kind {
                EventKind::Status {
                    stream: Some(st),
                    status,
                    ..
                } if *st == stream && (e.side == side || !ix.has(side)) => Some((j, *status)),
                _ => None,
            }
        });
        let Some((j, status)) = status else { continue };
        let shown = if header == "origin" { "Origin" } else { "Host" };
        let why = if status < 400 {
            format!("the server served a request whose {shown} is {value:?} (status {status}): DNS rebinding reaches it")
        } else if modern && header == "origin" && status != 403 {
            format!("the server refused a request whose Origin is {value:?} with {status}, not 403")
        } else {
            continue;
        };
        s.flag(rule!("origin-validated"), vec![i, j], why);
    }
}

/// Whether the value of `header` (`origin` or `host`) names a loopback host.
fn names_loopback(header: &str, value: &str) -> bool {
    let host = match header {
        "origin" => match value.trim().split_once("://") {
            Some((_, rest)) if !rest.contains('/') => rest,
            _ => return false,
        },
        _ => value.trim(),
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(n, p)| {
            if p.bytes().all(|b| b.is_ascii_digit()) {
                n
            } else {
                host
            }
        }),
    };
    crate::wire::origin::is_loopback_name(name)
}
