//! The server side of a Streamable HTTP exchange, shared by the simulated server host and
//! `mcp-sim serve --http`: hyper's HTTP/1.1 server hands each POST's body and a slot for its
//! response to the driver, and the driver answers with what the reference [`Server`] transmits
//! (an SSE stream, a JSON body, or 202).
//!
//! When hyper drops a response body or a pending request before the server ended it, the
//! client went away: a [`HttpEvent::Dropped`] tells the driver, whose model treats it as the
//! cancellation (§3.2).
//!
//! [`Server`]: crate::model::Server

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

use crate::framing::sse;
use crate::model::{ServerTransmit, SseStyle, StreamId};
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
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body_bytes: crate::wire::Limits::DEFAULT.max_message_bytes,
            max_header_bytes: 64 << 10,
            max_connections: 1024,
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
    /// `DELETE`, the session's end): its stream, body and the slot for its response.
    Post {
        /// The request's method (`None`: one the endpoint does not serve).
        method: Option<Method>,
        /// The stream the request and its response travel on.
        stream: StreamId,
        /// The request body (empty when over a bound).
        body: Bytes,
        /// The request was over a bound, and its body was not read.
        oversized: Option<OverLimit>,
        /// The request's headers that the rules judge (`wire::http::RECORDED`).
        headers: std::collections::BTreeMap<String, String>,
        /// Its `Host` and `Origin`, for the listener's DNS-rebinding protection.
        sent: HostAndOrigin,
        /// Where the response goes.
        respond: oneshot::Sender<HttpResponse>,
    },
    /// hyper dropped a stream's response (or the pending request): the client is gone.
    Dropped(StreamId),
    /// The listener refused a connection over its bound, before any request (503).
    #[cfg_attr(not(feature = "live"), allow(dead_code))] // only `serve` bounds its connections
    ConnectionRefused,
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
            notify(HttpEvent::Post {
                method,
                stream,
                body,
                oversized,
                headers,
                sent,
                respond,
            });
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
        .max_buf_size(limits.max_header_bytes.saturating_mul(2).max(8 << 10))
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// Turns the model's HTTP transmits into hyper responses: the slot of each stream not yet
/// answered, and the body of each open SSE stream.
pub(crate) struct Responder {
    pending: BTreeMap<StreamId, oneshot::Sender<HttpResponse>>,
    bodies: BTreeMap<StreamId, mpsc::UnboundedSender<Bytes>>,
    /// Send `X-Accel-Buffering: no` on SSE responses.
    no_buffering: bool,
    style: SseStyle,
    /// The driver's own input, for the drop signals of response bodies.
    notify: Notify,
}

impl Responder {
    /// A responder writing SSE events in `style`.
    pub(crate) fn new(style: SseStyle, no_buffering: bool, notify: Notify) -> Self {
        Responder {
            pending: BTreeMap::new(),
            bodies: BTreeMap::new(),
            no_buffering,
            style,
            notify,
        }
    }

    /// A POST arrived on `stream`; its response goes to `respond`.
    pub(crate) fn post(&mut self, stream: StreamId, respond: oneshot::Sender<HttpResponse>) {
        self.pending.insert(stream, respond);
    }

    /// hyper dropped `stream`; whether it was still open (not ended by the server).
    pub(crate) fn dropped(&mut self, stream: StreamId) -> bool {
        self.pending.remove(&stream).is_some() | self.bodies.remove(&stream).is_some()
    }

    /// Writes one transmit of the model (stdio lines are not this responder's).
    pub(crate) fn transmit(&mut self, t: ServerTransmit) {
        match t {
            ServerTransmit::Line(_) => {}
            ServerTransmit::SseStart { stream } => {
                let (body_tx, body_rx) = mpsc::unbounded_channel();
                let body = SseBody {
                    rx: body_rx,
                    _signal: DropSignal(Some((stream, self.notify.clone()))),
                };
                let mut builder = hyper::Response::builder()
                    .status(200)
                    .header("content-type", "text/event-stream");
                if self.no_buffering {
                    builder = builder.header("x-accel-buffering", "no");
                }
                let response = builder
                    .body(Either::Left(body))
                    .expect("static response parts are valid");
                if let Some(slot) = self.pending.remove(&stream) {
                    let _ = slot.send(response);
                    self.bodies.insert(stream, body_tx);
                }
            }
            ServerTransmit::SseEvent {
                stream,
                msg,
                event_id,
            } => {
                if let Some(body) = self.bodies.get(&stream) {
                    for piece in self.style.encode_with_id(&msg, event_id.as_deref()) {
                        let _ = body.send(Bytes::from(piece));
                    }
                }
            }
            ServerTransmit::SsePrime {
                stream,
                event_id,
                retry_ms,
            } => {
                if let Some(body) = self.bodies.get(&stream) {
                    let _ = body.send(Bytes::from(sse::encode_priming(&event_id, retry_ms)));
                }
            }
            ServerTransmit::SseComment { stream } => {
                if let Some(body) = self.bodies.get(&stream) {
                    let _ = body.send(Bytes::from(sse::encode_comment("keep-alive")));
                }
            }
            ServerTransmit::SseEnd { stream } => {
                self.bodies.remove(&stream);
            }
            ServerTransmit::Json {
                stream,
                status,
                msg,
                session,
            } => {
                let body = wire::encode(&msg).unwrap_or_default();
                let mut builder = hyper::Response::builder()
                    .status(status)
                    .header("content-type", "application/json");
                if let Some(id) = session {
                    builder = builder.header("mcp-session-id", id);
                }
                let response = builder
                    .body(Either::Right(Full::new(Bytes::from(body))))
                    .expect("static response parts are valid");
                if let Some(slot) = self.pending.remove(&stream) {
                    let _ = slot.send(response);
                }
            }
            ServerTransmit::Accepted { stream } => {
                let mut response = hyper::Response::new(Either::Right(Full::new(Bytes::new())));
                *response.status_mut() = hyper::StatusCode::ACCEPTED;
                if let Some(slot) = self.pending.remove(&stream) {
                    let _ = slot.send(response);
                }
            }
        }
    }
}
