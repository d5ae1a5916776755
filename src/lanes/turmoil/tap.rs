//! The custom server's end of the transport, recorded where the server is.
//!
//! A [`ServerStream`] is the server's end of one connection with a tap on it: the bytes the
//! server reads and writes pass through unchanged, and the tap frames them as the reference
//! server's driver does and records what it sees as `Side::Server` events, on the server host's
//! clock, at the moment the server reads or writes them:
//!
//! - stdio: each NDJSON line read is a `recv`, each line written a `send` (the message, or
//!   `raw` text when it does not decode; a framing error's description when the line is
//!   broken); reading the end of the stream is the client's `close` of the pipe;
//! - Streamable HTTP: the HTTP/1.1 requests read and responses written are parsed as they
//!   flow; a request's body is a `recv` on its stream (the client's `x-mcp-sim-stream` id, so
//!   both sides name the stream alike), a response head a `status`, each SSE event's data a
//!   `send` and each SSE comment a `comment`, a JSON body one `send`, the end of an SSE body
//!   the server's `close` of the stream; reading the end of the connection (or failing to read
//!   or write it) while a response is still open is the client's `close` of that stream.
//!
//! The streams are `Send` (rmcp, for one, requires it), so they cannot hold the run's shared
//! state: they queue their events with the time they happened, and the harness merges the
//! queue into the trace before any other event is recorded, which keeps the order in which
//! things happened.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use turmoil::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::stream_id;
use super::trace_time;
use crate::framing::ndjson::{LineDecoder, LineOptions};
use crate::framing::sse::{SseDecoder, SseItem, SseOptions};
use crate::lanes::http_exchange::is_event_stream;
use crate::lanes::recorder::{observe, stdio_lines};
use crate::model::{StreamId, Transport};
use crate::time::Time;
use crate::trace::{EventKind, Side, WireEvent};

/// Where taps queue what they observed: the server's events with their times.
pub(crate) type TapSender = mpsc::Sender<(Time, EventKind)>;

/// The queue of tapped events not yet in the trace.
pub(crate) struct TapQueue {
    tx: TapSender,
    rx: mpsc::Receiver<(Time, EventKind)>,
}

impl Default for TapQueue {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel();
        TapQueue { tx, rx }
    }
}

impl TapQueue {
    /// A sender for a new tap.
    pub fn sender(&self) -> TapSender {
        self.tx.clone()
    }

    /// The queued events, oldest first.
    pub fn drain(&self) -> impl Iterator<Item = (Time, EventKind)> + '_ {
        self.rx.try_iter()
    }
}

/// The byte stream handed to a custom server: its end of one connection (a
/// `turmoil::net::TcpStream`), recorded at the server host.
///
/// Everything the server reads and writes through it passes unchanged and is recorded as the
/// server's own observations (`Side::Server` events on the server host's clock), framed as
/// the reference server records its own: stdio NDJSON lines, or HTTP/1.1 requests and
/// responses (see [`ServerIo`](super::ServerIo)). It implements tokio's `AsyncRead` and
/// `AsyncWrite` and is `Send` and `Unpin`, so any server that takes a byte stream takes it;
/// [`into_split`](Self::into_split) gives owned halves for a reader task and a writer task
/// (`tokio::io::split` works as well). The recording sees what crosses the stream: a line the
/// server reads is recorded when the server takes the bytes off the stream, whether or not it
/// has acted on it yet, and a line it writes when the stream accepts the bytes.
#[derive(Debug)]
pub struct ServerStream {
    read: ServerReadHalf,
    write: ServerWriteHalf,
}

/// The reading half of a [`ServerStream`], from [`ServerStream::into_split`].
#[derive(Debug)]
pub struct ServerReadHalf {
    inner: OwnedReadHalf,
    tap: Tap,
}

/// The writing half of a [`ServerStream`], from [`ServerStream::into_split`]. Dropping it
/// closes the server's side of the connection, as dropping the stream does.
#[derive(Debug)]
pub struct ServerWriteHalf {
    inner: OwnedWriteHalf,
    tap: Tap,
}

/// The listener handed to a custom Streamable HTTP server: the server host's HTTP port.
///
/// Each accepted connection is a [`ServerStream`] that records the HTTP exchange at the server
/// host. Serve it with hyper (`hyper_util::rt::TokioIo::new(stream)`) or any HTTP/1.1 server
/// that takes a byte stream.
pub struct ServerListener {
    inner: turmoil::net::TcpListener,
    tx: TapSender,
}

impl ServerListener {
    pub(crate) fn new(inner: turmoil::net::TcpListener, tx: TapSender) -> ServerListener {
        ServerListener { inner, tx }
    }

    /// Waits for the next connection, as `turmoil::net::TcpListener::accept` does.
    pub async fn accept(&self) -> io::Result<(ServerStream, SocketAddr)> {
        let (stream, peer) = self.inner.accept().await?;
        let framing = Framing::Http(Box::default());
        Ok((ServerStream::new(stream, framing, self.tx.clone()), peer))
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

impl ServerStream {
    /// A stdio stream: NDJSON lines both ways.
    pub(crate) fn stdio(stream: turmoil::net::TcpStream, tx: TapSender) -> ServerStream {
        ServerStream::new(stream, Framing::Stdio(StdioTap::default()), tx)
    }

    fn new(stream: turmoil::net::TcpStream, framing: Framing, tx: TapSender) -> ServerStream {
        let tap = Tap(Arc::new(Mutex::new(TapState { framing, tx })));
        let (read, write) = stream.into_split();
        ServerStream {
            read: ServerReadHalf {
                inner: read,
                tap: tap.clone(),
            },
            write: ServerWriteHalf { inner: write, tap },
        }
    }

    /// Splits the stream into a reading and a writing half, each recorded as the whole stream
    /// is (as `turmoil::net::TcpStream::into_split`).
    pub fn into_split(self) -> (ServerReadHalf, ServerWriteHalf) {
        (self.read, self.write)
    }
}

impl AsyncRead for ServerReadHalf {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let room = buf.remaining() > 0;
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        match &poll {
            Poll::Ready(Ok(())) => {
                let read = &buf.filled()[before..];
                if !read.is_empty() {
                    this.tap.observe(|f, out| f.read(read, out));
                } else if room {
                    this.tap.observe(Framing::client_gone);
                }
            }
            Poll::Ready(Err(_)) => this.tap.observe(Framing::client_gone),
            Poll::Pending => {}
        }
        poll
    }
}

impl AsyncWrite for ServerWriteHalf {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        match &poll {
            Poll::Ready(Ok(n)) => this.tap.observe(|f, out| f.wrote(&buf[..*n], out)),
            Poll::Ready(Err(_)) => this.tap.observe(Framing::client_gone),
            Poll::Pending => {}
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_shutdown(cx);
        if let Poll::Ready(Ok(())) = poll {
            this.tap.observe(Framing::write_end);
        }
        poll
    }
}

impl AsyncRead for ServerStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.read).poll_read(cx, buf)
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.write).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.write).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.write).poll_shutdown(cx)
    }
}

impl fmt::Debug for ServerListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerListener")
            .field("local_addr", &self.inner.local_addr().ok())
            .finish_non_exhaustive()
    }
}

/// The recording state of one connection, shared by its two halves.
#[derive(Clone)]
struct Tap(Arc<Mutex<TapState>>);

impl fmt::Debug for Tap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tap(..)")
    }
}

struct TapState {
    framing: Framing,
    tx: TapSender,
}

impl Tap {
    /// Runs `f` on the connection's framing and queues the events it produced, at the server
    /// host's time now.
    fn observe(&self, f: impl FnOnce(&mut Framing, &mut Vec<EventKind>)) {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        f(&mut state.framing, &mut out);
        if out.is_empty() {
            return;
        }
        let t = trace_time();
        for kind in out {
            let _ = state.tx.send((t, kind));
        }
    }
}

/// How a connection's bytes are framed into events.
enum Framing {
    Stdio(StdioTap),
    Http(Box<HttpTap>),
}

impl Framing {
    /// The server read `bytes`.
    fn read(&mut self, bytes: &[u8], out: &mut Vec<EventKind>) {
        match self {
            Framing::Stdio(s) => stdio_events(&mut s.read, bytes, EventKind::Recv, out),
            Framing::Http(h) => h.read(bytes, out),
        }
    }

    /// The server wrote `bytes`.
    fn wrote(&mut self, bytes: &[u8], out: &mut Vec<EventKind>) {
        match self {
            Framing::Stdio(s) => stdio_events(&mut s.write, bytes, EventKind::Send, out),
            Framing::Http(h) => h.wrote(bytes, out),
        }
    }

    /// The server read the end of the connection, or failed to read or write it: the client
    /// went away.
    fn client_gone(&mut self, out: &mut Vec<EventKind>) {
        match self {
            Framing::Stdio(s) => {
                if !std::mem::replace(&mut s.gone, true) {
                    out.push(EventKind::Close {
                        stream: None,
                        by: Side::Client,
                        reason: None,
                    });
                }
            }
            Framing::Http(h) => h.client_gone(out),
        }
    }

    /// The server shut its writing side down.
    fn write_end(&mut self, out: &mut Vec<EventKind>) {
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
struct StdioTap {
    read: LineDecoder,
    write: LineDecoder,
    /// The end of the pipe was recorded.
    gone: bool,
}

impl Default for StdioTap {
    fn default() -> Self {
        StdioTap {
            read: LineDecoder::new(LineOptions::default()),
            write: LineDecoder::new(LineOptions::default()),
            gone: false,
        }
    }
}

/// One HTTP/1.1 connection as the server sees it: requests read, responses written, answered
/// in order.
#[derive(Default)]
struct HttpTap {
    requests: Direction,
    responses: Direction,
    /// The request being read: its stream and its body so far.
    request: Option<(u64, Vec<u8>)>,
    /// Streams whose request head was read and whose response has not ended, oldest first.
    open: VecDeque<u64>,
    /// The response being written.
    response: Option<Response>,
    /// The end of the connection was recorded.
    gone: bool,
}

struct Response {
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
                    let stream = head.stream.unwrap_or(0);
                    self.open.push_back(stream);
                    self.request = Some((stream, Vec::new()));
                }
                Piece::Data(data) => {
                    if let Some((_, body)) = &mut self.request {
                        body.extend_from_slice(&data);
                    }
                }
                Piece::End => {
                    if let Some((stream, body)) = self.request.take() {
                        let (w, _) = observe(Transport::Http, Some(StreamId(stream)), &body);
                        out.push(EventKind::Recv(w));
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
                    });
                    let sse = is_event_stream(head.content_type.as_deref())
                        .then(|| SseDecoder::new(SseOptions::default()));
                    self.response = Some(Response {
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
                            let (w, _) = observe(transport, r.stream.map(StreamId), &r.body);
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

    fn client_gone(&mut self, out: &mut Vec<EventKind>) {
        if std::mem::replace(&mut self.gone, true) {
            return;
        }
        for &stream in &self.open {
            out.push(EventKind::Close {
                stream: Some(stream),
                by: Side::Client,
                reason: None,
            });
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
                Ok(SseItem::Event(e)) => {
                    EventKind::Send(observe(Transport::Http, stream, e.data.as_bytes()).0)
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
enum Piece {
    Head(Head),
    Data(Vec<u8>),
    /// The message's body ended.
    End,
    /// Bytes that are not HTTP/1.1: the direction is no longer parsed.
    Invalid(Vec<u8>),
}

struct Head {
    /// A response's status.
    status: Option<u16>,
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
struct Direction {
    buf: Vec<u8>,
    /// The body being read; `None` between messages.
    body: Option<Body>,
    broken: bool,
}

impl Direction {
    fn feed(&mut self, bytes: &[u8], requests: bool, out: &mut Vec<Piece>) {
        if self.broken {
            return;
        }
        self.buf.extend_from_slice(bytes);
        while self.step(requests, out) {}
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
                    self.buf.drain(..len);
                    self.body = Some(head.body_start());
                    out.push(Piece::Head(head));
                    true
                }
                Ok(None) if self.buf.len() <= MAX_HEAD => false,
                _ => self.invalid(out),
            };
        };
        match body {
            Body::Length(left) | Body::Chunked(Chunk::Data(left)) => {
                let n = (*left).min(self.buf.len() as u64);
                if n > 0 {
                    out.push(Piece::Data(self.buf.drain(..n as usize).collect()));
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
                    out.push(Piece::Data(std::mem::take(&mut self.buf)));
                }
                false
            }
            Body::Chunked(Chunk::Size) => match httparse::parse_chunk_size(&self.buf) {
                Ok(httparse::Status::Complete((len, size))) => {
                    self.buf.drain(..len);
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
                    self.buf.drain(..2);
                    *body = Body::Chunked(Chunk::Size);
                    true
                }
                Some(_) => self.invalid(out),
            },
            Body::Chunked(Chunk::Trailer) => {
                let Some(eol) = self.buf.windows(2).position(|w| w == b"\r\n") else {
                    return false;
                };
                self.buf.drain(..eol + 2);
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
        out.push(Piece::Invalid(std::mem::take(&mut self.buf)));
        false
    }
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
    let (len, status, headers) = if requests {
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(buf)? {
            httparse::Status::Complete(len) => (len, None, request.headers),
            httparse::Status::Partial => return Ok(None),
        }
    } else {
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(buf)? {
            httparse::Status::Complete(len) => (len, response.code, response.headers),
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
            status,
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
                    kind,
                };
                serde_json::to_string(&e).expect("serializes")
            })
            .collect()
    }

    fn http() -> Framing {
        Framing::Http(Box::default())
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
