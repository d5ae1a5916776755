//! The reference server behind a virtual client's TCP connections: HTTP/1.1 read from the
//! bytes the client wrote on each connection, handed to the sans-IO server driver as the live
//! listener hands hyper's requests ([`ServerDriver::http_request`]), and each response framed
//! back as HTTP/1.1 bytes (chunked, so that an event stream's events leave as they are
//! written).
//!
//! One request at a time on a connection, as HTTP/1.1 without pipelining: bytes after a
//! request wait until its response has ended. A client that closes a connection whose
//! response is still open closes that stream (on 2026-07-28, the cancel of its request). Bytes
//! that are not HTTP/1.1 get a 400 and the connection's close.

use std::collections::{BTreeMap, VecDeque};

use crate::lanes::http_serve::IncomingRequest;
use crate::lanes::live::serve::{reference_driver, ServeConfig};
use crate::lanes::recorder::recorded_headers;
use crate::lanes::response_writer::{ResponsePart, ServerWrite};
use crate::lanes::server_driver::{ServerDriver, ServerOutput};
use crate::lanes::RunSink;
use crate::model::{StreamId, Transport};
use crate::time::Time;
use crate::trace::Side;
use crate::wire::http::Method;
use crate::wire::origin::HostAndOrigin;

/// Most headers a request may carry.
const MAX_HEADERS: usize = 64;
/// Longest request body read (larger ones are refused with the connection's close).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// What goes back on a connection.
pub(super) enum ConnWrite {
    /// Bytes of a response.
    Bytes(Vec<u8>),
    /// The server closes the connection.
    Close,
}

#[derive(Default)]
struct Conn {
    /// Bytes read and not yet taken as a request.
    buf: Vec<u8>,
    /// The stream whose response is being written.
    open: Option<StreamId>,
}

/// The reference server over a client's connections.
pub(super) struct HttpServer {
    driver: ServerDriver,
    conns: BTreeMap<u64, Conn>,
    streams: BTreeMap<StreamId, u64>,
    next_stream: u64,
    /// Writes waiting to be taken, in order.
    out: VecDeque<(u64, ConnWrite)>,
}

impl HttpServer {
    /// `serve`'s server on HTTP, started at `now`.
    pub(super) fn new(serve: &ServeConfig, now: Time) -> HttpServer {
        HttpServer {
            driver: reference_driver(Transport::Http, serve, now),
            conns: BTreeMap::new(),
            streams: BTreeMap::new(),
            next_stream: 1,
            out: VecDeque::new(),
        }
    }

    /// The server's next timer.
    pub(super) fn poll_timeout(&self) -> Option<Time> {
        self.driver.server().poll_timeout()
    }

    /// Whether a job is still running.
    pub(super) fn busy(&self) -> bool {
        self.driver.server().active_jobs() > 0
    }

    /// The server's timers due at `now` fire.
    pub(super) fn timers(&mut self, now: Time, sink: &mut impl RunSink) {
        self.driver.timers(now);
        self.flush(now, sink);
    }

    /// The client opened `conn`.
    pub(super) fn connected(&mut self, conn: u64) {
        self.conns.entry(conn).or_default();
    }

    /// Bytes the client wrote on `conn`.
    pub(super) fn bytes(&mut self, now: Time, conn: u64, bytes: &[u8], sink: &mut impl RunSink) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.buf.extend_from_slice(bytes);
        self.take_requests(now, conn, sink);
    }

    /// The client closed `conn`: an open response's stream closes with it.
    pub(super) fn closed(&mut self, now: Time, conn: u64, sink: &mut impl RunSink) {
        if let Some(stream) = self.conns.remove(&conn).and_then(|c| c.open) {
            self.streams.remove(&stream);
            self.driver.stream_closed(now, stream, Side::Client, sink);
            self.flush(now, sink);
        }
    }

    /// The next write for a connection.
    pub(super) fn poll(&mut self) -> Option<(u64, ConnWrite)> {
        self.out.pop_front()
    }

    /// Serves the requests complete in `conn`'s buffer, one at a time.
    fn take_requests(&mut self, now: Time, conn: u64, sink: &mut impl RunSink) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if c.open.is_some() || c.buf.is_empty() {
                return;
            }
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut request = httparse::Request::new(&mut headers);
            let head_len = match request.parse(&c.buf) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) => return,
                Err(_) => return self.refuse(conn),
            };
            let all: Vec<(String, String)> = request
                .headers
                .iter()
                .map(|h| {
                    let value = String::from_utf8_lossy(h.value).into_owned();
                    (h.name.to_ascii_lowercase(), value)
                })
                .collect();
            let length = all
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if all.iter().any(|(k, _)| k == "transfer-encoding") || length > MAX_BODY {
                return self.refuse(conn);
            }
            if c.buf.len() < head_len + length {
                return;
            }
            let method = request.method.and_then(Method::parse);
            let body: Vec<u8> = c.buf[head_len..head_len + length].to_vec();
            c.buf.drain(..head_len + length);
            let stream = StreamId(self.next_stream);
            self.next_stream += 1;
            c.open = Some(stream);
            self.streams.insert(stream, conn);
            let sent =
                HostAndOrigin::from_headers(all.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            let headers = recorded_headers(all.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            self.driver.http_request(
                now,
                IncomingRequest {
                    stream,
                    method,
                    body: &body,
                    headers,
                    sent: &sent,
                    oversized: None,
                },
                sink,
            );
            self.flush(now, sink);
        }
    }

    /// Bytes that are not a request this server reads: a 400, and the connection closes.
    fn refuse(&mut self, conn: u64) {
        self.conns.remove(&conn);
        let answer = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        self.out
            .push_back((conn, ConnWrite::Bytes(answer.to_vec())));
        self.out.push_back((conn, ConnWrite::Close));
    }

    /// The server's writes, framed as HTTP/1.1 on their connections.
    fn flush(&mut self, now: Time, sink: &mut impl RunSink) {
        let mut ended = Vec::new();
        while let Some(out) = self.driver.poll_io(now, sink) {
            let ServerOutput::Write(ServerWrite::Http(stream, part)) = out else {
                continue;
            };
            let Some(&conn) = self.streams.get(&stream) else {
                continue; // its connection is gone
            };
            let bytes = match part {
                ResponsePart::Head(head) => {
                    let mut text = format!("HTTP/1.1 {} {}\r\n", head.status, reason(head.status));
                    if let Some(t) = head.content_type {
                        text.push_str(&format!("content-type: {t}\r\n"));
                    }
                    if let Some(s) = &head.session {
                        text.push_str(&format!("mcp-session-id: {s}\r\n"));
                    }
                    if head.told_not_to_buffer {
                        text.push_str("x-accel-buffering: no\r\n");
                    }
                    text.push_str("transfer-encoding: chunked\r\n\r\n");
                    text.into_bytes()
                }
                ResponsePart::Body(body) if body.is_empty() => continue,
                ResponsePart::Body(body) => {
                    let mut b = format!("{:x}\r\n", body.len()).into_bytes();
                    b.extend_from_slice(&body);
                    b.extend_from_slice(b"\r\n");
                    b
                }
                ResponsePart::End => {
                    self.streams.remove(&stream);
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.open = None;
                    }
                    ended.push(conn);
                    b"0\r\n\r\n".to_vec()
                }
            };
            self.out.push_back((conn, ConnWrite::Bytes(bytes)));
        }
        // A connection whose response ended may hold its next request already.
        for conn in ended {
            self.take_requests(now, conn, sink);
        }
    }
}

/// The reason phrase of the statuses the server answers with.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
