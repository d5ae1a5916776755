//! The server side of a Streamable HTTP exchange, shared by the simulated server host and
//! `mcp-sim serve --http`: hyper's HTTP/1.1 server hands each POST's body and a slot for its
//! response to the driver, and the driver answers with what the reference [`Server`] transmits
//! (an SSE stream, a JSON body, or 202), written by [`ResponseWriter`] as it writes every
//! lane's responses.
//!
//! When hyper drops a response body or a pending request before the server ended it, the
//! client went away: a [`HttpEvent::Dropped`] tells the driver, whose model treats it as the
//! cancellation (§3.2).
//!
//! [`Server`]: crate::model::Server
//! [`ResponseWriter`]: crate::lanes::response_writer::ResponseWriter

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use hyper::body::Frame;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{mpsc, oneshot};

use crate::lanes::response_writer::{ResponseHead, ResponsePart};
use crate::model::StreamId;
use crate::wire;
use crate::wire::http::Method;
use crate::wire::origin::HostAndOrigin;

/// A response body: a stream of SSE bytes, or a whole body.
pub(crate) type ResponseBody = Either<SseBody, Full<Bytes>>;
/// A response of the server.
pub(crate) type HttpResponse = hyper::Response<ResponseBody>;
/// How the HTTP side hands events to the driver (its input channel, wrapped).
pub(crate) type Notify = Rc<dyn Fn(HttpEvent)>;

/// The bounds of one HTTP front's connections (`serve --http`). A request whose header block
/// is over `max_header_bytes`, or whose body is over `max_body_bytes`, reaches the driver as
/// `HttpEvent::Post` with an `OverLimit` (its body unread), which records it and answers 431
/// or 413 with a JSON-RPC error naming the bound; hyper's own read buffer is bounded at
/// twice the header bound, so a head far over it is cut with 431 before it is a request.
/// The connection bound is the listener's (`lanes::live::serve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// The largest request body read, in bytes (default 4 MiB, the decoder's own bound).
    pub max_body_bytes: usize,
    /// The largest header block read, in bytes (default 64 KiB; at least 8 KiB).
    pub max_header_bytes: usize,
    /// Connections open at once (default 1024); one more is answered 503 and closed.
    pub max_connections: usize,
    /// How long a connection may wait for its next request head (no request in flight, or a
    /// head unfinished) before it is closed, in ms (default 30 s, hyper's own). A legacy
    /// session outlives its connections, so closing an idle one loses nothing.
    pub idle_connection_ms: u64,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body_bytes: crate::wire::Limits::DEFAULT.max_message_bytes,
            max_header_bytes: 64 << 10,
            max_connections: 1024,
            idle_connection_ms: 30_000,
        }
    }
}

/// The answer of a front to a request or connection it refuses before any handling: `status`
/// with a JSON-RPC error whose message says why (`id` null when no request was read), and the
/// connection closed after it.
pub(crate) fn refusal_response(status: u16, id: Option<wire::RequestId>, why: &str) -> Vec<u8> {
    let reason = hyper::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Refused");
    let error = crate::wire::ErrorResponse::new(id, crate::wire::codes::INVALID_REQUEST, why);
    let body = crate::wire::encode(&error.into()).unwrap_or_default();
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Why a connection over `max` open ones is refused (503).
pub(crate) fn connections_full(max: usize) -> String {
    format!(
        "Service Unavailable: {max} connections are open, the most this front serves (--max-connections)"
    )
}

/// What one of mcp-sim's HTTP listeners serves (`serve --http`, `record --http`): the
/// widenings of its `Host`/`Origin` policy and its bounds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpFront {
    /// The hosts served beyond the listener's own default (`--allow-host`): on a loopback
    /// listener every loopback name, elsewhere the bound address ([`crate::wire::origin`]).
    pub allow_hosts: Vec<String>,
    /// The origins served beyond that default (`--allow-origin`).
    pub allow_origins: Vec<String>,
    /// The bounds on bodies, header blocks, open and idle connections.
    pub limits: HttpLimits,
}

impl HttpFront {
    /// The policy of a listener bound to `addr`.
    pub fn policy(&self, addr: std::net::IpAddr) -> crate::wire::origin::OriginPolicy {
        crate::wire::origin::OriginPolicy {
            allow_hosts: self.allow_hosts.clone(),
            allow_origins: self.allow_origins.clone(),
            ..crate::wire::origin::OriginPolicy::for_listener(addr)
        }
    }
}

/// Which bound a request was over, and the bound in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OverLimit {
    /// The header block (431).
    Headers(usize),
    /// The body (413).
    Body(usize),
}

/// What the HTTP side tells the driver.
pub(crate) enum HttpEvent {
    /// A request (a POST, or the legacy era's `GET`, a resume or listening stream, or
    /// `DELETE`, the session's end), with the slot for its response.
    Post(Posted),
    /// hyper dropped a stream's response (or the pending request): the client is gone.
    Dropped(StreamId),
    /// The listener refused a connection over its bound, before any request (503).
    #[cfg_attr(not(feature = "live"), allow(dead_code))] // only `serve` bounds its connections
    ConnectionRefused,
}

/// A request as hyper read it, and where its response goes: handed to the server driver by
/// [`Responder::accept`].
pub(crate) struct Posted {
    /// The request's method (`None`: one the endpoint does not serve).
    pub(crate) method: Option<Method>,
    /// The stream the request and its response travel on.
    pub(crate) stream: StreamId,
    /// The request body (empty when over a bound).
    pub(crate) body: Bytes,
    /// The request was over a bound, and its body was not read.
    pub(crate) oversized: Option<OverLimit>,
    /// The request's headers that the rules judge (`wire::http::RECORDED`).
    pub(crate) headers: BTreeMap<String, String>,
    /// Its `Host` and `Origin`, for the listener's DNS-rebinding protection.
    pub(crate) sent: HostAndOrigin,
    /// Where the response goes.
    pub(crate) respond: oneshot::Sender<HttpResponse>,
}

/// One HTTP request as the server driver takes it ([`Responder::accept`]).
pub(crate) struct IncomingRequest<'a> {
    /// The stream it and its response travel on.
    pub(crate) stream: StreamId,
    /// Its method (`None`: one the endpoint does not serve).
    pub(crate) method: Option<Method>,
    /// A POST's body.
    pub(crate) body: &'a [u8],
    /// The headers the rules judge.
    pub(crate) headers: BTreeMap<String, String>,
    /// Its `Host` and `Origin`.
    pub(crate) sent: &'a HostAndOrigin,
    /// The request was over a bound, and its body was not read.
    pub(crate) oversized: Option<OverLimit>,
}

/// Sends [`HttpEvent::Dropped`] when hyper drops what it holds, unless disarmed first.
pub(crate) struct DropSignal(Option<(StreamId, Notify)>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some((stream, notify)) = self.0.take() {
            notify(HttpEvent::Dropped(stream));
        }
    }
}

/// A streaming SSE response body fed by the driver.
pub(crate) struct SseBody {
    rx: mpsc::UnboundedReceiver<Bytes>,
    _signal: DropSignal,
}

impl hyper::body::Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

/// Serves one HTTP/1.1 connection: every request's body goes to the driver as a
/// [`HttpEvent::Post`] on the stream `stream_of` names.
pub(crate) async fn serve_connection<IO>(
    io: IO,
    notify: Notify,
    stream_of: impl Fn(&hyper::Request<hyper::body::Incoming>) -> StreamId + 'static,
    limits: HttpLimits,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let notify = notify.clone();
        let stream = stream_of(&req);
        let method = Method::parse(req.method().as_str());
        let all = || {
            req.headers()
                .iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
        };
        let headers = crate::lanes::recorder::recorded_headers(all());
        let sent = HostAndOrigin::from_headers(all());
        // Each header as `name: value` and its line end.
        let head_bytes: usize = all().map(|(k, v)| k.len() + v.len() + 4).sum();
        async move {
            let limit = limits.max_body_bytes;
            let (body, oversized) = if head_bytes > limits.max_header_bytes {
                (
                    Bytes::new(),
                    Some(OverLimit::Headers(limits.max_header_bytes)),
                )
            } else {
                match Limited::new(req.into_body(), limit).collect().await {
                    Ok(b) => (b.to_bytes(), None),
                    Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                        (Bytes::new(), Some(OverLimit::Body(limit)))
                    }
                    Err(_) => (Bytes::new(), None),
                }
            };
            let (respond, response) = oneshot::channel();
            let mut signal = DropSignal(Some((stream, notify.clone())));
            notify(HttpEvent::Post(Posted {
                method,
                stream,
                body,
                oversized,
                headers,
                sent,
                respond,
            }));
            let response = response.await;
            signal.0 = None; // answered: from here on the body signals a drop
            Ok::<_, Infallible>(response.unwrap_or_else(|_| {
                let mut r = hyper::Response::new(Either::Right(Full::new(Bytes::new())));
                *r.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
                r
            }))
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(std::time::Duration::from_millis(limits.idle_connection_ms))
        .max_buf_size(limits.max_header_bytes.saturating_mul(2).max(8 << 10))
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// Hands the server's response parts ([`ResponsePart`]) to hyper: the slot of each stream not
/// yet answered, the body of each open event stream, and each whole body until its end.
pub(crate) struct Responder {
    pending: BTreeMap<StreamId, oneshot::Sender<HttpResponse>>,
    bodies: BTreeMap<StreamId, mpsc::UnboundedSender<Bytes>>,
    /// The heads and bodies of responses written whole (JSON, 202), until their end.
    whole: BTreeMap<StreamId, (ResponseHead, Vec<u8>)>,
    /// The driver's own input, for the drop signals of response bodies.
    notify: Notify,
}

impl Responder {
    /// A responder whose event streams tell `notify` when hyper drops them.
    pub(crate) fn new(notify: Notify) -> Self {
        Responder {
            pending: BTreeMap::new(),
            bodies: BTreeMap::new(),
            whole: BTreeMap::new(),
            notify,
        }
    }

    /// Keeps `posted`'s response slot and hands the request to `serve` (the server driver's
    /// [`http_request`](crate::lanes::server_driver::ServerDriver::http_request)).
    pub(crate) fn accept(&mut self, posted: Posted, serve: impl FnOnce(IncomingRequest<'_>)) {
        let Posted {
            method,
            stream,
            body,
            oversized,
            headers,
            sent,
            respond,
        } = posted;
        self.post(stream, respond);
        serve(IncomingRequest {
            stream,
            method,
            body: &body,
            headers,
            sent: &sent,
            oversized,
        });
    }

    /// A POST arrived on `stream`; its response goes to `respond`.
    pub(crate) fn post(&mut self, stream: StreamId, respond: oneshot::Sender<HttpResponse>) {
        self.pending.insert(stream, respond);
    }

    /// hyper dropped `stream`; whether it was still open (not ended by the server).
    pub(crate) fn dropped(&mut self, stream: StreamId) -> bool {
        self.pending.remove(&stream).is_some() | self.bodies.remove(&stream).is_some()
    }

    /// Writes one part of `stream`'s response.
    pub(crate) fn write(&mut self, stream: StreamId, part: ResponsePart) {
        match part {
            ResponsePart::Head(head) if head.is_event_stream() => {
                let (body_tx, body_rx) = mpsc::unbounded_channel();
                let body = SseBody {
                    rx: body_rx,
                    _signal: DropSignal(Some((stream, self.notify.clone()))),
                };
                let response = response_head(&head)
                    .body(Either::Left(body))
                    .expect("static response parts are valid");
                if let Some(slot) = self.pending.remove(&stream) {
                    let _ = slot.send(response);
                    self.bodies.insert(stream, body_tx);
                }
            }
            ResponsePart::Head(head) => {
                self.whole.insert(stream, (head, Vec::new()));
            }
            ResponsePart::Body(bytes) => {
                if let Some(body) = self.bodies.get(&stream) {
                    let _ = body.send(Bytes::from(bytes));
                } else if let Some((_, whole)) = self.whole.get_mut(&stream) {
                    whole.extend_from_slice(&bytes);
                }
            }
            ResponsePart::End => {
                self.bodies.remove(&stream);
                if let Some((head, body)) = self.whole.remove(&stream) {
                    let response = response_head(&head)
                        .body(Either::Right(Full::new(Bytes::from(body))))
                        .expect("static response parts are valid");
                    if let Some(slot) = self.pending.remove(&stream) {
                        let _ = slot.send(response);
                    }
                }
            }
        }
    }
}

/// A response builder with `head`'s status and headers.
fn response_head(head: &ResponseHead) -> hyper::http::response::Builder {
    let mut builder = hyper::Response::builder().status(head.status);
    if let Some(content_type) = head.content_type {
        builder = builder.header("content-type", content_type);
    }
    if head.told_not_to_buffer {
        builder = builder.header("x-accel-buffering", "no");
    }
    if let Some(id) = &head.session {
        builder = builder.header("mcp-session-id", id);
    }
    builder
}
