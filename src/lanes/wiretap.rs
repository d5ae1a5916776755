//! How the bytes a server reads and writes become its trace events, for recording a peer that
//! is not the model: the custom servers of the turmoil lane (their recording streams) and the
//! live tap (`mcp-sim record`). The bytes are framed as the reference server's driver frames
//! them:
//!
//! - stdio: each NDJSON line read is a `recv`, each line written a `send` (the message, or
//!   `raw` text when it does not decode; a framing error's description when the line is
//!   broken); reading the end of the stream is the client's `close` of the pipe;
//! - Streamable HTTP: the HTTP/1.1 requests read and responses written are parsed as they
//!   flow; a request's body is a `recv` on its stream (the client's `x-mcp-sim-stream` id when
//!   it sends one, so both sides name the stream alike, else a number counted by the tap), a
//!   response head a `status`, each SSE event's data a `send` and each SSE comment a
//!   `comment`, a JSON body one `send`, the end of an SSE body the server's `close` of the
//!   stream; reading the end of the connection (or failing to read or write it) while a
//!   response is still open is the client's `close` of that stream.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::framing::ndjson::{LineDecoder, LineOptions};
use crate::framing::sse::{SseDecoder, SseItem, SseOptions};
use crate::lanes::http_exchange::{is_event_stream, STREAM_HEADER};
use crate::lanes::recorder::{
    observe, observe_as_written, recorded_headers, stdio_lines, SESSION_HEADER,
};
use crate::model::{StreamId, Transport};
use crate::trace::{EventKind, Side, WireEvent};
use crate::wire::origin::HostAndOrigin;
use crate::wire::{DecodeError, Message};

/// Finds `x-mcp-sim-stream` in a request head: the client's stream id, as the proxy and a
/// custom server's recording stream read it.
pub(crate) fn stream_id(head: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(head);
    text.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case(STREAM_HEADER)
            .then(|| value.trim().parse().ok())?
    })
}

/// How a message's text becomes a payload: as decoded (a simulated peer, whose text the
/// model's encoder wrote or whose decoded form is what the model saw) or as written (a real
/// peer seen by the live tap).
type Observe = fn(Transport, Option<StreamId>, &[u8]) -> (WireEvent, Result<Message, DecodeError>);

impl Framing {
    /// A stdio pipe of a simulated run.
    pub(crate) fn stdio() -> Framing {
        Framing::Stdio(StdioTap::default())
    }

    /// A stdio pipe between real peers: payloads as written.
    pub(crate) fn stdio_as_written() -> Framing {
        Framing::Stdio(StdioTap {
            observe: observe_as_written,
            ..StdioTap::default()
        })
    }

    /// An HTTP/1.1 connection; requests without the simulation's stream header get numbers
    /// from `next_stream`, and with `next_stream` the payloads are recorded as written (a real
    /// peer).
    pub(crate) fn http(next_stream: Option<Arc<AtomicU64>>) -> Framing {
        let observe = if next_stream.is_some() {
            observe_as_written
        } else {
            observe
        };
        Framing::Http(Box::new(HttpTap {
            next_stream,
            observe,
            ..HttpTap::default()
        }))
    }
}

/// How a connection's bytes are framed into events.
pub(crate) enum Framing {
    Stdio(StdioTap),
    Http(Box<HttpTap>),
}

impl Framing {
    /// The server read `bytes`.
    pub(crate) fn read(&mut self, bytes: &[u8], out: &mut Vec<EventKind>) {
        match self {
            Framing::Stdio(s) => stdio_events(&mut s.read, s.observe, bytes, EventKind::Recv, out),
            Framing::Http(h) => h.read(bytes, out),
        }
    }

    /// The server wrote `bytes`.
    pub(crate) fn wrote(&mut self, bytes: &[u8], out: &mut Vec<EventKind>) {
        match self {
            Framing::Stdio(s) => stdio_events(&mut s.write, s.observe, bytes, EventKind::Send, out),
            Framing::Http(h) => h.wrote(bytes, out),
        }
    }

    /// The server read the end of the connection, or failed to read or write it: the client
    /// went away.
    pub(crate) fn client_gone(&mut self, out: &mut Vec<EventKind>) {
        self.gone(Side::Client, None, out);
    }

    /// The connection ended by `by`'s doing (the client, the server, or an intermediary with
    /// `reason`): the close of the pipe (stdio), or of every stream still open (HTTP). Only the
    /// first end is recorded.
    pub(crate) fn gone(&mut self, by: Side, reason: Option<&str>, out: &mut Vec<EventKind>) {
        match self {
            Framing::Stdio(s) => {
                if !std::mem::replace(&mut s.gone, true) {
                    out.push(EventKind::Close {
                        stream: None,
                        by,
                        reason: reason.map(Into::into),
                    });
                }
            }
            Framing::Http(h) => h.gone(by, reason, out),
        }
    }

    /// Headers to record with the connection's request `ordinal` (0: the first) when its head
    /// is read: the `Host` and `Origin` of a request a front refused.
    pub(crate) fn annotate(&mut self, ordinal: u64, headers: BTreeMap<String, String>) {
        if let Framing::Http(h) = self {
            h.annotations.insert(ordinal, headers);
        }
    }

    /// The server shut its writing side down.
    pub(crate) fn write_end(&mut self, out: &mut Vec<EventKind>) {
        if let Framing::Http(h) = self {
            let mut pieces = Vec::new();
            h.responses.end(&mut pieces);
            h.response_pieces(pieces, out);
        }
    }
}

/// The stdio lines `bytes` complete, as `kind` (`Recv` or `Send`) events.
fn stdio_events(
    lines: &mut LineDecoder,
    observe: Observe,
    bytes: &[u8],
    kind: fn(WireEvent) -> EventKind,
    out: &mut Vec<EventKind>,
) {
    for item in stdio_lines(lines, bytes) {
        out.push(kind(match item {
            Ok(line) => observe(Transport::Stdio, None, &line).0,
            Err(framing_error) => framing_error,
        }));
    }
}

/// The two directions of a stdio pipe.
pub(crate) struct StdioTap {
    observe: Observe,
    read: LineDecoder,
    write: LineDecoder,
    /// The end of the pipe was recorded.
    gone: bool,
}

impl Default for StdioTap {
    fn default() -> Self {
        StdioTap {
            observe,
            read: LineDecoder::new(LineOptions::default()),
            write: LineDecoder::new(LineOptions::default()),
            gone: false,
        }
    }
}

/// One HTTP/1.1 connection as the server sees it: requests read, responses written, answered
/// in order.
pub(crate) struct HttpTap {
    observe: Observe,
    requests: Direction,
    responses: Direction,
    /// The request being read.
    request: Option<RequestRead>,
    /// Streams whose request head was read and whose response has not ended, oldest first.
    open: VecDeque<u64>,
    /// The response being written.
    response: Option<Response>,
    /// The end of the connection was recorded.
    gone: bool,
    /// Request heads read so far.
    heads: u64,
    /// Headers to add to a request's, by its ordinal ([`Framing::annotate`]).
    annotations: BTreeMap<u64, BTreeMap<String, String>>,
    /// Numbers the streams of requests without `x-mcp-sim-stream` (a live tap), shared by
    /// the connections of one run.
    next_stream: Option<Arc<AtomicU64>>,
}

/// A request whose head was read and whose body is being read.
struct RequestRead {
    stream: u64,
    body: Vec<u8>,
    headers: BTreeMap<String, String>,
    method: Option<String>,
}

struct Response {
    observe: Observe,
    stream: Option<u64>,
    /// The SSE decoder of an event stream; `None` for any other body.
    sse: Option<SseDecoder>,
    body: Vec<u8>,
}

impl HttpTap {
    fn read(&mut self, bytes: &[u8], out: &mut Vec<EventKind>) {
        let mut pieces = Vec::new();
        self.requests.feed(bytes, true, &mut pieces);
        for piece in pieces {
            match piece {
                Piece::Head(head) => {
                    let counted = || {
                        self.next_stream
                            .as_ref()
                            .map_or(0, |n| n.fetch_add(1, Ordering::Relaxed) + 1)
                    };
                    let stream = head.stream.unwrap_or_else(counted);
                    self.open.push_back(stream);
                    let mut headers = head.headers;
                    headers.extend(self.annotations.remove(&self.heads).unwrap_or_default());
                    self.heads += 1;
                    self.request = Some(RequestRead {
                        stream,
                        body: Vec::new(),
                        headers,
                        method: head.method,
                    });
                }
                Piece::Data(data) => {
                    if let Some(r) = &mut self.request {
                        r.body.extend_from_slice(&data);
                    }
                }
                Piece::End => {
                    let Some(r) = self.request.take() else {
                        continue;
                    };
                    // A legacy GET (a listening or resumed stream) or DELETE (the session's
                    // end) carries no message: it opens a stream, as the reference server
                    // records it.
                    match r.method {
                        Some(method) if method == "GET" || method == "DELETE" => {
                            out.push(EventKind::Open {
                                stream: r.stream,
                                method,
                                headers: Some(r.headers),
                            });
                        }
                        _ => {
                            let stream = Some(StreamId(r.stream));
                            let (mut w, _) = (self.observe)(Transport::Http, stream, &r.body);
                            w.headers = Some(r.headers);
                            out.push(EventKind::Recv(w));
                        }
                    }
                }
                Piece::Invalid(bytes) => {
                    out.push(EventKind::Recv(WireEvent::raw(
                        Transport::Http,
                        None,
                        &bytes,
                    )));
                }
            }
        }
    }

    fn wrote(&mut self, bytes: &[u8], out: &mut Vec<EventKind>) {
        let mut pieces = Vec::new();
        self.responses.feed(bytes, false, &mut pieces);
        self.response_pieces(pieces, out);
    }

    fn response_pieces(&mut self, pieces: Vec<Piece>, out: &mut Vec<EventKind>) {
        for piece in pieces {
            match piece {
                // An interim response (100 Continue): the final one follows.
                Piece::Head(head) if head.status.is_some_and(|s| s < 200) => self.response = None,
                Piece::Head(head) => {
                    let stream = self.open.front().copied();
                    out.push(EventKind::Status {
                        stream,
                        status: head.status.unwrap_or_default(),
                        content_type: head.content_type.clone(),
                        headers: (!head.headers.is_empty()).then(|| head.headers.clone()),
                    });
                    let sse = is_event_stream(head.content_type.as_deref())
                        .then(|| SseDecoder::new(SseOptions::default()));
                    self.response = Some(Response {
                        observe: self.observe,
                        stream,
                        sse,
                        body: Vec::new(),
                    });
                }
                Piece::Data(data) => {
                    if let Some(r) = &mut self.response {
                        r.data(&data, out);
                    }
                }
                Piece::End => {
                    if let Some(r) = self.response.take() {
                        let transport = Transport::Http;
                        if r.sse.is_some() {
                            out.push(EventKind::Close {
                                stream: r.stream,
                                by: Side::Server,
                                reason: None,
                            });
                        } else if !r.body.is_empty() {
                            let (w, _) = (r.observe)(transport, r.stream.map(StreamId), &r.body);
                            out.push(EventKind::Send(w));
                        }
                        if r.stream.is_some() {
                            self.open.pop_front();
                        }
                    }
                }
                Piece::Invalid(bytes) => {
                    let stream = self.open.front().copied().map(StreamId);
                    let w = WireEvent::raw(Transport::Http, stream, &bytes);
                    out.push(EventKind::Send(w));
                }
            }
        }
    }

    fn gone(&mut self, by: Side, reason: Option<&str>, out: &mut Vec<EventKind>) {
        if std::mem::replace(&mut self.gone, true) {
            return;
        }
        for &stream in &self.open {
            out.push(EventKind::Close {
                stream: Some(stream),
                by,
                reason: reason.map(Into::into),
            });
        }
    }
}

impl Default for HttpTap {
    fn default() -> Self {
        HttpTap {
            observe,
            requests: Direction::default(),
            responses: Direction::default(),
            request: None,
            open: VecDeque::new(),
            response: None,
            gone: false,
            heads: 0,
            annotations: BTreeMap::new(),
            next_stream: None,
        }
    }
}

impl Response {
    /// Body bytes of the response: SSE items as they complete, any other body kept whole.
    fn data(&mut self, data: &[u8], out: &mut Vec<EventKind>) {
        let Some(sse) = &mut self.sse else {
            self.body.extend_from_slice(data);
            return;
        };
        let stream = self.stream.map(StreamId);
        sse.push(data);
        while let Some(item) = sse.next_item() {
            out.push(match item {
                // The legacy era's priming event (an id, no data) is no message.
                Ok(SseItem::Event(e)) if e.has_id && e.data.is_empty() => match self.stream {
                    Some(stream) => EventKind::Sse {
                        stream,
                        event_id: Some(e.last_event_id),
                        retry_ms: sse.retry(),
                    },
                    None => continue,
                },
                Ok(SseItem::Event(e)) => {
                    let (mut w, _) = (self.observe)(Transport::Http, stream, e.data.as_bytes());
                    w.event_id = e.has_id.then_some(e.last_event_id);
                    EventKind::Send(w)
                }
                Ok(SseItem::Comment(_)) => EventKind::Comment {
                    stream: self.stream,
                },
                Err(e) => EventKind::Send(WireEvent::raw(
                    Transport::Http,
                    stream,
                    e.to_string().as_bytes(),
                )),
            });
        }
    }
}

/// What one direction of an HTTP/1.1 connection yields as it is parsed.
pub(crate) enum Piece {
    Head(Head),
    Data(Vec<u8>),
    /// The message's body ended.
    End,
    /// Bytes that are not HTTP/1.1: the direction is no longer parsed.
    Invalid(Vec<u8>),
}

pub(crate) struct Head {
    /// A request's method.
    method: Option<String>,
    /// A request's `Host` and `Origin`, for a front's DNS-rebinding protection.
    pub(crate) sent: HostAndOrigin,
    /// The head's length in bytes, up to and with its empty line.
    pub(crate) len: usize,
    /// Its `Content-Length`, when it gives one.
    pub(crate) content_length: Option<u64>,
    /// A response's status.
    status: Option<u16>,
    /// A request's headers that the rules judge (`wire::http::RECORDED`).
    headers: BTreeMap<String, String>,
    /// A request's `x-mcp-sim-stream`.
    stream: Option<u64>,
    content_type: Option<String>,
    body: Body,
}

/// How a message's body is delimited (RFC 9112 §6).
enum Body {
    Length(u64),
    Chunked(Chunk),
    /// Up to the end of the connection.
    ToEnd,
}

enum Chunk {
    Size,
    Data(u64),
    /// The CR LF after a chunk's data.
    DataEnd,
    /// Trailer lines after the last chunk, up to an empty line.
    Trailer,
}

/// Longest message head parsed.
const MAX_HEAD: usize = 64 * 1024;

/// One direction of an HTTP/1.1 connection, parsed incrementally.
#[derive(Default)]
pub(crate) struct Direction {
    buf: Vec<u8>,
    /// The body being read; `None` between messages.
    body: Option<Body>,
    broken: bool,
    /// Bytes taken from `buf` as pieces so far: the offset in the direction of what `buf`
    /// holds.
    consumed: u64,
    /// Give up on an unfinished head longer than this (`None`: [`MAX_HEAD`]).
    max_head: Option<usize>,
}

impl Direction {
    fn feed(&mut self, bytes: &[u8], requests: bool, out: &mut Vec<Piece>) {
        if self.broken {
            return;
        }
        self.buf.extend_from_slice(bytes);
        while self.step(requests, out) {}
    }

    /// Like [`Self::feed`] for requests, each piece with the offset in the direction where
    /// its bytes begin.
    pub(crate) fn feed_requests(&mut self, bytes: &[u8], out: &mut Vec<(u64, Piece)>) {
        if self.broken {
            return;
        }
        self.buf.extend_from_slice(bytes);
        let mut pieces = Vec::new();
        loop {
            let at = self.consumed;
            let more = self.step(true, &mut pieces);
            out.extend(pieces.drain(..).map(|p| (at, p)));
            if !more {
                break;
            }
        }
    }

    /// A direction that never gives up on a long head: its reader bounds it instead.
    pub(crate) fn unbounded() -> Direction {
        Direction {
            max_head: Some(usize::MAX),
            ..Direction::default()
        }
    }

    /// The bytes fed and not yet taken as pieces: an unfinished head, or a chunk's size line.
    pub(crate) fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Whether a message's body is being read (`false` between messages).
    pub(crate) fn in_body(&self) -> bool {
        self.body.is_some()
    }

    /// The connection's direction ended: a body delimited by the end ends here.
    fn end(&mut self, out: &mut Vec<Piece>) {
        if matches!(self.body, Some(Body::ToEnd)) {
            self.body = None;
            out.push(Piece::End);
        }
    }

    /// Parses one more piece; `false` when more bytes are needed.
    fn step(&mut self, requests: bool, out: &mut Vec<Piece>) -> bool {
        let Some(body) = &mut self.body else {
            return match parse_head(&self.buf, requests) {
                Ok(Some((len, mut head))) => {
                    take(&mut self.buf, &mut self.consumed, len);
                    self.body = Some(head.body_start());
                    out.push(Piece::Head(head));
                    true
                }
                Ok(None) if self.buf.len() <= self.max_head.unwrap_or(MAX_HEAD) => false,
                _ => self.invalid(out),
            };
        };
        match body {
            Body::Length(left) | Body::Chunked(Chunk::Data(left)) => {
                let n = (*left).min(self.buf.len() as u64);
                if n > 0 {
                    out.push(Piece::Data(take(
                        &mut self.buf,
                        &mut self.consumed,
                        n as usize,
                    )));
                    *left -= n;
                }
                if *left > 0 {
                    return false;
                }
                if matches!(body, Body::Length(_)) {
                    self.body = None;
                    out.push(Piece::End);
                } else {
                    *body = Body::Chunked(Chunk::DataEnd);
                }
                true
            }
            Body::ToEnd => {
                if !self.buf.is_empty() {
                    out.push(Piece::Data(take(
                        &mut self.buf,
                        &mut self.consumed,
                        usize::MAX,
                    )));
                }
                false
            }
            Body::Chunked(Chunk::Size) => match httparse::parse_chunk_size(&self.buf) {
                Ok(httparse::Status::Complete((len, size))) => {
                    take(&mut self.buf, &mut self.consumed, len);
                    *body = Body::Chunked(match size {
                        0 => Chunk::Trailer,
                        n => Chunk::Data(n),
                    });
                    true
                }
                Ok(httparse::Status::Partial) => false,
                Err(_) => self.invalid(out),
            },
            Body::Chunked(Chunk::DataEnd) => match self.buf.get(..2) {
                None => false,
                Some(b"\r\n") => {
                    take(&mut self.buf, &mut self.consumed, 2);
                    *body = Body::Chunked(Chunk::Size);
                    true
                }
                Some(_) => self.invalid(out),
            },
            Body::Chunked(Chunk::Trailer) => {
                let Some(eol) = self.buf.windows(2).position(|w| w == b"\r\n") else {
                    return false;
                };
                take(&mut self.buf, &mut self.consumed, eol + 2);
                if eol == 0 {
                    self.body = None;
                    out.push(Piece::End);
                }
                true
            }
        }
    }

    fn invalid(&mut self, out: &mut Vec<Piece>) -> bool {
        self.broken = true;
        let rest = take(&mut self.buf, &mut self.consumed, usize::MAX);
        out.push(Piece::Invalid(rest));
        false
    }
}

/// Takes the first `n` bytes of `buf` (all of them, if fewer), counting them in `consumed`.
fn take(buf: &mut Vec<u8>, consumed: &mut u64, n: usize) -> Vec<u8> {
    let n = n.min(buf.len());
    *consumed += n as u64;
    buf.drain(..n).collect()
}

impl Head {
    fn body_start(&mut self) -> Body {
        std::mem::replace(&mut self.body, Body::Length(0))
    }
}

/// Parses a request or response head: its length and what the tap needs of it, `None` until
/// it is complete, `Err` when it is not HTTP/1.1.
fn parse_head(buf: &[u8], requests: bool) -> Result<Option<(usize, Head)>, httparse::Error> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let (len, method, status, headers) = if requests {
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(buf)? {
            httparse::Status::Complete(len) => {
                let method = request.method.map(str::to_owned);
                (len, method, None, request.headers)
            }
            httparse::Status::Partial => return Ok(None),
        }
    } else {
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(buf)? {
            httparse::Status::Complete(len) => (len, None, response.code, response.headers),
            httparse::Status::Partial => return Ok(None),
        }
    };
    let header = |name: &str| {
        headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_owned())
    };
    let chunked =
        header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = header("content-length").and_then(|v| v.parse().ok());
    let bodiless = requests || matches!(status, Some(100..=199 | 204 | 304));
    let body = match (chunked, length) {
        (true, _) => Body::Chunked(Chunk::Size),
        (false, Some(n)) => Body::Length(n),
        (false, None) if bodiless => Body::Length(0),
        (false, None) => Body::ToEnd,
    };
    Ok(Some((
        len,
        Head {
            method,
            sent: if requests {
                HostAndOrigin::from_headers(
                    headers
                        .iter()
                        .filter_map(|h| Some((h.name, std::str::from_utf8(h.value).ok()?.trim()))),
                )
            } else {
                HostAndOrigin::default()
            },
            len,
            content_length: length,
            status,
            // A request's judged headers; of a response's, the legacy session id it issues.
            headers: recorded_headers(
                headers
                    .iter()
                    .filter(|h| requests || h.name.eq_ignore_ascii_case(SESSION_HEADER))
                    .filter_map(|h| Some((h.name, std::str::from_utf8(h.value).ok()?.trim()))),
            ),
            stream: requests.then(|| stream_id(&buf[..len])).flatten(),
            content_type: header("content-type"),
            body,
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds each step to `tap` in pieces of `size` bytes (`true`: the server wrote the bytes,
    /// `false`: it read them), then the end of the connection, twice, and returns the events
    /// as trace lines.
    fn record(mut tap: Framing, steps: &[(bool, &[u8])], size: usize) -> Vec<String> {
        let mut out = Vec::new();
        for &(wrote, bytes) in steps {
            for piece in bytes.chunks(size) {
                match wrote {
                    true => tap.wrote(piece, &mut out),
                    false => tap.read(piece, &mut out),
                }
            }
        }
        tap.client_gone(&mut out);
        tap.client_gone(&mut out);
        out.into_iter()
            .map(|kind| {
                let e = crate::trace::TraceEvent {
                    t: 0,
                    side: Side::Server,
                    hop: None,
                    conn: None,
                    kind,
                };
                serde_json::to_string(&e).expect("serializes")
            })
            .collect()
    }

    fn http() -> Framing {
        Framing::http(None)
    }

    const CALL: &str =
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow_op"}}"#;
    const ERROR: &str = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#;
    const SSE_HEAD: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

    fn request() -> Vec<u8> {
        format!(
            "POST /mcp HTTP/1.1\r\nhost: server\r\nx-mcp-sim-stream: 12\r\ncontent-length: {}\r\n\r\n{CALL}",
            CALL.len()
        )
        .into_bytes()
    }

    fn chunk(data: &str) -> String {
        format!("{:x}\r\n{data}\r\n", data.len())
    }

    /// An SSE response, chunked, in pieces of every size: a status, a comment, progress and
    /// the result on the request's stream, then the server's close of the stream; the
    /// connection's end afterwards is no close of the stream.
    #[test]
    fn an_sse_exchange_is_recorded_whatever_the_chunking() {
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
        let result = r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[]}}"#;
        let response = format!(
            "{SSE_HEAD}{}{}{}0\r\n\r\n",
            chunk(": keep-alive\n\n"),
            chunk(&format!("data: {progress}\n\n")),
            chunk(&format!("data: {result}\n\n")),
        );
        let whole = record(
            http(),
            &[(false, &request()), (true, response.as_bytes())],
            4096,
        );
        assert_eq!(whole.len(), 6, "{whole:#?}");
        assert!(whole[0].contains(r#""kind":"recv","transport":"http","stream":12,"msg":{"#));
        assert!(whole[1].contains(
            r#""kind":"status","stream":12,"status":200,"content_type":"text/event-stream""#
        ));
        assert!(whole[2].contains(r#""kind":"comment","stream":12"#));
        assert!(whole[3].contains("notifications/progress") && whole[3].contains(r#""send""#));
        assert!(whole[4].contains("resultType") && whole[4].contains(r#""stream":12"#));
        assert!(whole[5].contains(r#""kind":"close","stream":12,"by":"server""#));
        for size in [1, 2, 3, 7, 64] {
            let steps = [(false, &request()[..]), (true, response.as_bytes())];
            assert_eq!(record(http(), &steps, size), whole, "size {size}");
        }
    }

    /// The legacy era over HTTP: a GET (here a resume, with `Last-Event-ID`) opens a stream
    /// and carries no message; the response's session id is on its status; a priming event
    /// (an id, no data) is an `sse` event with its `retry`, and a message's event id is on
    /// its send.
    #[test]
    fn a_legacy_get_stream_with_event_ids_and_priming_is_recorded() {
        let get = "GET /mcp HTTP/1.1\r\nhost: server\r\nx-mcp-sim-stream: 13\r\naccept: text/event-stream\r\nmcp-session-id: s-1\r\nlast-event-id: 0/4\r\n\r\n";
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}"#;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s-1\r\ntransfer-encoding: chunked\r\n\r\n";
        let response = format!(
            "{head}{}{}0\r\n\r\n",
            chunk("id: 0/5\nretry: 1000\ndata:\n\n"),
            chunk(&format!("id: 0/6\ndata: {progress}\n\n")),
        );
        let events = record(
            http(),
            &[(false, get.as_bytes()), (true, response.as_bytes())],
            5,
        );
        assert_eq!(events.len(), 5, "{events:#?}");
        assert!(events[0].contains(r#""kind":"open","stream":13,"method":"GET""#));
        assert!(events[0].contains(r#""last-event-id":"0/4""#));
        assert!(
            events[1].contains(r#""status":200"#)
                && events[1].contains(r#""mcp-session-id":"s-1""#)
        );
        assert!(events[2].contains(r#""kind":"sse","stream":13,"event_id":"0/5","retry_ms":1000"#));
        assert!(
            events[3].contains(r#""kind":"send""#) && events[3].contains(r#""event_id":"0/6""#)
        );
        assert!(events[4].contains(r#""kind":"close","stream":13,"by":"server""#));
    }

    /// The client goes away while the SSE response is open: the server reads the end of the
    /// connection, which is the client's close of the stream, recorded once.
    #[test]
    fn the_end_of_the_connection_closes_an_open_stream() {
        let events = record(
            http(),
            &[(false, &request()), (true, SSE_HEAD.as_bytes())],
            9,
        );
        assert_eq!(events.len(), 3, "{events:#?}");
        assert!(events[2].contains(r#""kind":"close","stream":12,"by":"client""#));
    }

    /// A JSON response is one send, whole, once its body is complete; a 202 is a status only.
    #[test]
    fn json_and_accepted_responses() {
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{ERROR}",
            ERROR.len()
        );
        let cut = &response.as_bytes()[..response.len() - 3];
        let partial = record(http(), &[(false, &request()), (true, cut)], 5);
        assert_eq!(partial.len(), 3, "{partial:#?}");
        assert!(partial[2].contains(r#""kind":"close","stream":12,"by":"client""#));
        let accepted = "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
        let steps = [
            (false, &request()[..]),
            (true, response.as_bytes()),
            (false, &request()[..]),
            (true, accepted.as_bytes()),
        ];
        let events = record(http(), &steps, 5);
        assert_eq!(events.len(), 5, "{events:#?}");
        assert!(events[1].contains(r#""status":200,"content_type":"application/json""#));
        assert!(events[2].contains(r#""kind":"send","transport":"http","stream":12"#));
        assert!(events[2].contains("-32601"));
        assert!(events[4].contains(r#""status":202"#) && !events[4].contains("content_type"));
    }

    /// stdio: lines in any chunking, a line that does not decode is raw, a framing error is
    /// described, and the end of the pipe is the client's close, once.
    #[test]
    fn stdio_lines_both_ways() {
        let input = format!("{CALL}\nnot json\n\n");
        let reply = format!("{ERROR}\r\n");
        let steps = [(false, input.as_bytes()), (true, reply.as_bytes())];
        let events = record(Framing::Stdio(StdioTap::default()), &steps, 3);
        assert_eq!(events.len(), 5, "{events:#?}");
        assert!(events[0].contains(r#""kind":"recv","transport":"stdio","msg":{"#));
        assert!(events[1].contains(r#""raw":"not json""#));
        assert!(events[2].contains("empty line"), "{}", events[2]);
        assert!(events[3].contains(r#""kind":"send""#) && events[3].contains("CR LF"));
        assert!(events[4].contains(r#""kind":"close","by":"client""#));
    }
}
