//! The probe's check of a local server's DNS-rebinding protection (2026-07-28 §9 I63,
//! 2025-11-25 §5: servers MUST validate `Origin`).
//!
//! After the run, when the URL names a loopback host, the probe sends two more POSTs, each on a
//! connection of its own: one with a foreign `Origin` (and the server's own `Host`), one with a
//! foreign `Host`. Each carries the request a client of the run's era opens with
//! (`server/discover` in 2026-07-28, `initialize` in the legacy era), so that a server that does
//! not check serves it as it would serve a page's script. Both are recorded with their `Host`
//! and `Origin`, their status and, when it is JSON, their answer; the oracle's
//! `origin-validated` judges them. `--no-origin-check` leaves them out.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::json;

use super::Probe;
use crate::lanes::live::net::http::Endpoint;
use crate::model::{Outcome, StreamId, Transport};
use crate::trace::{EventKind, Side, WireEvent};
use crate::wire::origin::is_loopback_name;
use crate::wire::{self, Era, Message, Request, RequestId};

/// The host a rebinding page would name.
pub const FOREIGN_HOST: &str = "evil.example";

/// The streams the checks travel on, apart from any the run used.
const FIRST_STREAM: u64 = 1 << 40;

/// How long one check may take, connection and answer.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of an answer the probe reads.
const MAX_ANSWER: u64 = 64 * 1024;

/// Whether a POST recorded with `headers` is one of these checks: the run's own requests
/// record neither `Host` nor `Origin`.
pub(super) fn is_check(headers: &BTreeMap<String, String>) -> bool {
    headers.contains_key("host") || headers.contains_key("origin")
}

/// Whether `endpoint` names a loopback host (the checks are for local servers only).
pub(super) fn applies(endpoint: &Endpoint) -> bool {
    let host = match endpoint.authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => endpoint
            .authority
            .rsplit_once(':')
            .map_or(endpoint.authority.as_str(), |(h, _)| h),
    };
    is_loopback_name(host)
}

/// Sends both checks and records them.
pub(super) fn check(probe: &mut Probe, endpoint: &Endpoint) {
    let era = probe.driver.client().era();
    for c in checks(era, &endpoint.authority) {
        probe.record(c.sent());
        let answer = post(endpoint, &c.headers, &c.msg).ok();
        for e in c.answered(era, answer) {
            probe.record(e);
        }
    }
}

/// One check: its stream, its request and the headers it carries.
pub(crate) struct Check {
    /// A stream apart from any the run used.
    pub(crate) stream: StreamId,
    /// The request a client of the run's era opens with.
    pub(crate) msg: Message,
    /// Its headers, `host` and `origin` among them.
    pub(crate) headers: BTreeMap<String, String>,
}

/// An answer to a check: its status, content type and body.
pub(crate) type Answer = (u16, Option<String>, Vec<u8>);

/// The two checks of a client of `era` for a server whose own authority is `own_host`: a
/// foreign `Origin` with the server's own `Host`, then a foreign `Host`.
pub(crate) fn checks(era: Era, own_host: &str) -> [Check; 2] {
    let cases = [
        (own_host.to_owned(), Some(format!("http://{FOREIGN_HOST}"))),
        (FOREIGN_HOST.to_owned(), None),
    ];
    let mut k = 0;
    cases.map(|(host, origin)| {
        let msg = opening(era, k);
        let stream = StreamId(FIRST_STREAM + k as u64);
        k += 1;
        let mut headers = wire::http::request_headers(&msg);
        if era.is_legacy() {
            headers.remove("mcp-method");
            headers.remove("mcp-protocol-version");
        }
        headers.insert("host".into(), host);
        if let Some(o) = origin {
            headers.insert("origin".into(), o);
        }
        Check {
            stream,
            msg,
            headers,
        }
    })
}

impl Check {
    /// What the client records of sending it.
    pub(crate) fn sent(&self) -> EventKind {
        let mut sent = WireEvent::message(Transport::Http, Some(self.stream), &self.msg);
        sent.headers = Some(self.headers.clone());
        EventKind::Send(sent)
    }

    /// What the client records of its answer, in order; `None`: refused at the connection or
    /// cut, nothing served, the server's end of the connection gone first.
    pub(crate) fn answered(&self, era: Era, answer: Option<Answer>) -> Vec<EventKind> {
        let stream = Some(self.stream.0);
        let request = self.msg.id().cloned().unwrap_or(RequestId::Number(0));
        let Some((status, content_type, body)) = answer else {
            let close = EventKind::Close {
                stream,
                by: Side::Server,
                reason: None,
            };
            let outcome = Outcome::Lost;
            return vec![close, EventKind::Outcome { request, outcome }];
        };
        let json = content_type
            .as_deref()
            .is_some_and(|c| c.starts_with("application/json"));
        let mut events = vec![EventKind::Status {
            stream,
            status,
            content_type,
            headers: None,
        }];
        if json && !body.is_empty() {
            let (w, _) = crate::lanes::recorder::observe_as_written_in(
                era,
                Transport::Http,
                Some(self.stream),
                &body,
            );
            events.push(EventKind::Recv(w));
        }
        let outcome = match status < 400 {
            true => Outcome::Result,
            false => Outcome::Error,
        };
        events.push(EventKind::Outcome { request, outcome });
        events.push(EventKind::Close {
            stream,
            by: Side::Client,
            reason: None,
        });
        events
    }
}

/// The request a client of `era` opens with.
fn opening(era: Era, k: usize) -> Message {
    let id = RequestId::String(format!("rebinding-{}", k + 1));
    match era {
        Era::Modern => Request::new(id, "server/discover").into(),
        Era::Legacy(_) => {
            let mut r = Request::new(id, "initialize");
            r.meta.legacy = true;
            r.params
                .insert("protocolVersion".into(), json!(era.version()));
            r.params.insert("capabilities".into(), json!({}));
            r.params.insert(
                "clientInfo".into(),
                json!({"name": "mcp-sim-rebinding-check", "version": env!("CARGO_PKG_VERSION")}),
            );
            r.into()
        }
    }
}

/// One POST on a connection of its own: the status, the content type and the body read (up
/// to [`MAX_ANSWER`], the connection closed after it).
fn post(
    endpoint: &Endpoint,
    headers: &BTreeMap<String, String>,
    msg: &Message,
) -> std::io::Result<(u16, Option<String>, Vec<u8>)> {
    let body = wire::encode(msg).unwrap_or_default();
    let addr = endpoint
        .addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("no address"))?;
    let mut conn = TcpStream::connect_timeout(&addr, CHECK_TIMEOUT)?;
    conn.set_read_timeout(Some(CHECK_TIMEOUT))?;
    conn.set_write_timeout(Some(CHECK_TIMEOUT))?;
    let mut head = format!("POST {} HTTP/1.1\r\n", endpoint.path);
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    ));
    conn.write_all(head.as_bytes())?;
    conn.write_all(body.as_bytes())?;
    let mut answer = Vec::new();
    // An event stream stays open: what arrived within the bound is enough.
    let _ = (&mut conn).take(MAX_ANSWER).read_to_end(&mut answer);
    let mut parsed = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut parsed);
    let Ok(httparse::Status::Complete(len)) = response.parse(&answer) else {
        return Err(std::io::Error::other("no complete response head"));
    };
    let status = response.code.unwrap_or(0);
    let content_type = response
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-type"))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .map(|v| v.to_ascii_lowercase());
    let chunked = response.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding")
            && String::from_utf8_lossy(h.value)
                .to_ascii_lowercase()
                .contains("chunked")
    });
    let body = &answer[len..];
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    Ok((status, content_type, body))
}

/// The payload of a chunked body (RFC 9112 §7.1); of one cut short, what arrived whole.
fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    while let Ok(httparse::Status::Complete((at, size))) = httparse::parse_chunk_size(rest) {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let data = &rest[at..];
        if size == 0 || data.len() < size {
            break;
        }
        payload.extend_from_slice(&data[..size]);
        rest = data[size..].strip_prefix(b"\r\n").unwrap_or(&data[size..]);
    }
    payload
}

#[cfg(test)]
mod tests {
    use super::dechunk;

    #[test]
    fn a_chunked_answer_is_read_as_its_payload() {
        let body = b"5\r\n{\"a\":\r\n3;ext=1\r\n1}\n\r\n0\r\n\r\n";
        assert_eq!(dechunk(body), b"{\"a\":1}\n");
        // A body cut inside a chunk keeps the chunks that arrived whole.
        assert_eq!(dechunk(b"2\r\n{}\r\n9\r\n[1,"), b"{}");
        assert_eq!(dechunk(b"not a size"), b"");
    }
}
