//! The reference server's driver: everything a lane does around the sans-IO [`Server`] that is
//! not I/O. It reads stdio lines, records what the server reads (with the POST's headers, and
//! the policy a black-box client declared) and writes, refuses a request whose headers
//! disagree with its body (2026-07-28) or that comes from a session the server did not issue
//! (the legacy era: 404, or 400 without the session it did), hands a legacy `GET` to the model,
//! and keeps the backend's ledger when the backend runs in process.
//!
//! As the client's driver ([`super::client_driver`]), it has no clock and does no I/O: every
//! call takes the model's `now`, events go to a [`RunSink`], and output comes back one
//! [`ServerOutput`] at a time from [`ServerDriver::poll_io`], already recorded. Used by the
//! in-memory lane and `mcp-sim serve` (whose backends are in process) and the turmoil lane's
//! `server` host (whose backend is a host of its own).

use std::collections::{BTreeMap, VecDeque};

#[cfg(any(feature = "turmoil", feature = "live"))]
use crate::lanes::http_serve::{HttpEvent, IncomingRequest, OverLimit, Responder};
use crate::lanes::readers::StdioReader;
use crate::lanes::recorder;
use crate::lanes::response_writer::{ResponseWriter, ServerWrite};
use crate::lanes::RunSink;
use crate::model::server::{Refusal, RequestHead};
use crate::model::{Backend, BackendCall, ClientPolicies, Server, StreamId, Transport};
use crate::time::Time;
use crate::trace::{EventKind, Side};
use crate::wire::http::Method;
#[cfg(any(feature = "turmoil", feature = "live"))]
use crate::wire::origin::HostAndOrigin;
use crate::wire::origin::OriginPolicy;
use crate::wire::{Era, Message};

/// How a lane wants its server recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerRecording {
    /// Record received text as written (a real client's) instead of as the model decoded it.
    pub(crate) as_written: bool,
    /// The timeout policies a black-box client declared, recorded on each request they cover.
    pub(crate) client_policy: Option<ClientPolicies>,
    /// Count each request received (no client driver counts them: the client is real).
    pub(crate) count_requests: bool,
}

/// What the lane must do for the server; recorded (and counted) before it is returned.
#[derive(Debug)]
pub(crate) enum ServerOutput {
    /// Write this: a stdio line, or a part of an HTTP response ([`ResponseWriter`]).
    Write(ServerWrite),
    /// Send this call to the backend host (a lane whose backend is not in process).
    #[cfg_attr(not(feature = "turmoil"), allow(dead_code))] // only turmoil's backend is remote
    Backend(BackendCall),
}

/// The reference server and its bookkeeping.
pub(crate) struct ServerDriver {
    server: Server,
    transport: Transport,
    recording: ServerRecording,
    lines: StdioReader,
    /// The backend's ledger when it runs in process; `None` when the lane sends the calls on.
    backend: Option<Backend>,
    /// The `Host` and `Origin` a real listener serves (none checked in the simulation).
    #[cfg_attr(not(any(feature = "turmoil", feature = "live")), allow(dead_code))]
    origin_policy: Option<OriginPolicy>,
    /// How each transmit is written.
    writer: ResponseWriter,
    /// The writes of the last transmit not yet handed to the lane.
    writes: VecDeque<ServerWrite>,
}

impl ServerDriver {
    /// Drives `server`; `backend` when the backend runs in process. Its event streams say
    /// `X-Accel-Buffering: no` when `no_buffering`.
    pub(crate) fn new(
        server: Server,
        backend: Option<Backend>,
        recording: ServerRecording,
        no_buffering: bool,
    ) -> Self {
        ServerDriver {
            transport: server.config().transport,
            writer: ResponseWriter::new(server.config().behaviour.sse_style, no_buffering),
            server,
            recording,
            lines: StdioReader::default(),
            backend,
            origin_policy: None,
            writes: VecDeque::new(),
        }
    }

    /// The same driver behind a real listener: requests whose `Host` or `Origin` `policy`
    /// refuses are answered 403 before anything else (`wire::origin`).
    #[cfg(feature = "live")]
    pub(crate) fn guarded(mut self, policy: OriginPolicy) -> Self {
        self.origin_policy = Some(policy);
        self
    }

    /// The server.
    pub(crate) fn server(&self) -> &Server {
        &self.server
    }

    /// The server's timers due at `now` fire.
    pub(crate) fn timers(&mut self, now: Time) {
        self.server.handle_timeout(now);
    }

    /// How many requests hold a resource in the in-process backend (none without one).
    pub(crate) fn backend_held(&self) -> usize {
        self.backend.as_ref().map_or(0, Backend::held_count)
    }

    /// The in-process backend's ledger.
    pub(crate) fn backend_mut(&mut self) -> Option<&mut Backend> {
        self.backend.as_mut()
    }

    /// The server process died and `fresh` runs in its place, reading a new pipe from the
    /// start (the in-memory lane's crash; the backend's ledger is the lane's to settle).
    pub(crate) fn restart(&mut self, fresh: Server) {
        self.server = fresh;
        self.lines = StdioReader::default();
    }

    /// stdio bytes from the client: each line received, each framing error recorded.
    pub(crate) fn stdio_bytes(&mut self, now: Time, bytes: &[u8], sink: &mut impl RunSink) {
        for item in self.lines.push(bytes) {
            match item {
                Ok(line) => self.receive(now, None, &line, None, sink),
                Err(w) => sink.record(Side::Server, EventKind::Recv(w)),
            }
        }
    }

    /// The client closed the server's stdin: the truncated last line, the close, and what was
    /// in progress is abandoned (§5.1). A next connection's lines are read from the start.
    pub(crate) fn input_closed(&mut self, now: Time, sink: &mut impl RunSink) {
        if let Some(w) = self.lines.finish() {
            sink.record(Side::Server, EventKind::Recv(w));
        }
        sink.record(Side::Server, recorder::close(None, Side::Client, None));
        self.server.handle_disconnect(now);
        self.lines = StdioReader::default();
    }

    /// A POST's body on `stream`, with the headers worth recording (`None`: the lane moves
    /// messages, not POSTs, and has none).
    pub(crate) fn post(
        &mut self,
        now: Time,
        stream: StreamId,
        body: &[u8],
        headers: Option<BTreeMap<String, String>>,
        sink: &mut impl RunSink,
    ) {
        self.receive(now, Some(stream), body, headers, sink);
    }

    /// What hyper's listener reports, the one path from it to the server: a request is
    /// taken from its slot in `http` and served ([`ServerDriver::http_request`]); a response
    /// hyper dropped before the server ended it is the client's close of that stream; a
    /// connection refused over the listener's bound is recorded as the 503 it got.
    #[cfg(any(feature = "turmoil", feature = "live"))]
    pub(crate) fn http_event(
        &mut self,
        now: Time,
        event: HttpEvent,
        http: &mut Responder,
        sink: &mut impl RunSink,
    ) {
        match event {
            HttpEvent::Post(posted) => {
                http.accept(posted, |request| self.http_request(now, request, sink));
            }
            HttpEvent::Dropped(stream) => {
                if http.dropped(stream) {
                    self.stream_closed(now, stream, Side::Client, sink);
                }
            }
            HttpEvent::ConnectionRefused => sink.record(
                Side::Server,
                EventKind::Status {
                    stream: None,
                    status: 503,
                    content_type: Some("application/json".into()),
                    headers: None,
                },
            ),
        }
    }

    /// An HTTP request, as hyper handed it over: a POST's body, or a legacy `GET` or
    /// `DELETE` (a method the endpoint does not serve is answered 405). A request the
    /// listener's `Host`/`Origin` policy refuses is recorded with both headers and answered 403;
    /// one whose body was over the limit is recorded and answered 413; nothing else is done
    /// with either.
    #[cfg(any(feature = "turmoil", feature = "live"))]
    pub(crate) fn http_request(
        &mut self,
        now: Time,
        request: IncomingRequest<'_>,
        sink: &mut impl RunSink,
    ) {
        let IncomingRequest {
            stream,
            method,
            body,
            headers,
            sent,
            oversized,
        } = request;
        let refused = self
            .origin_policy
            .as_ref()
            .and_then(|p| p.check_request(sent).err());
        if let Some(refusal) = refused {
            return self.forbid(stream, method, body, headers, sent, &refusal, sink);
        }
        if let Some(over) = oversized {
            sink.record(
                Side::Server,
                EventKind::Open {
                    stream: stream.0,
                    method: method.map_or("OTHER", Method::as_str).into(),
                    headers: Some(headers),
                },
            );
            let (status, why) = match over {
                OverLimit::Body(limit) => (
                    413,
                    format!("Payload Too Large: the request body is over {limit} bytes (--max-body-bytes)"),
                ),
                OverLimit::Headers(limit) => (
                    431,
                    format!("Request Header Fields Too Large: the header block is over {limit} bytes (--max-header-bytes)"),
                ),
            };
            return self.server.refuse(stream, None, status, &why);
        }
        match method {
            Some(Method::Post) => self.post(now, stream, body, Some(headers), sink),
            Some(m) => self.open(now, stream, m, headers, sink),
            None => self.server.refuse(
                stream,
                None,
                405,
                "the endpoint serves POST, GET and DELETE",
            ),
        }
    }

    /// Records a request refused for its `Host` or `Origin` (with both headers) and answers
    /// it 403 with a JSON-RPC error naming the header, without handing it to the model.
    #[cfg(any(feature = "turmoil", feature = "live"))]
    #[allow(clippy::too_many_arguments)]
    fn forbid(
        &mut self,
        stream: StreamId,
        method: Option<Method>,
        body: &[u8],
        mut headers: BTreeMap<String, String>,
        sent: &HostAndOrigin,
        refusal: &crate::wire::origin::OriginRefusal,
        sink: &mut impl RunSink,
    ) {
        for (name, value) in [("host", &sent.host), ("origin", &sent.origin)] {
            if let Some(v) = value {
                headers.insert(name.into(), v.clone());
            }
        }
        let mut id = None;
        match method {
            Some(Method::Post) => {
                let method = bytes_method(body);
                let era = Server::era_named_by(RequestHead {
                    session: headers.get(recorder::SESSION_HEADER).map(String::as_str),
                    version: headers.get("mcp-protocol-version").map(String::as_str),
                    method: method.as_deref(),
                });
                let (mut w, decoded) =
                    recorder::observe_as_written_in(era, self.transport, Some(stream), body);
                id = decoded.ok().and_then(|m| m.id().cloned());
                w.headers = Some(headers);
                sink.record(Side::Server, EventKind::Recv(w));
            }
            m => sink.record(
                Side::Server,
                EventKind::Open {
                    stream: stream.0,
                    method: m.map_or("OTHER", Method::as_str).into(),
                    headers: Some(headers),
                },
            ),
        }
        self.server.refuse(stream, id, 403, &refusal.to_string());
    }

    /// A request without a message opened `stream` (legacy era): a `GET` (a resume, with
    /// `Last-Event-ID`, or a listening stream) or the session's `DELETE`. Recorded with its
    /// headers, and handed to the model; a `POST` goes to [`Self::post`] instead.
    pub(crate) fn open(
        &mut self,
        now: Time,
        stream: StreamId,
        method: Method,
        headers: BTreeMap<String, String>,
        sink: &mut impl RunSink,
    ) {
        let last_event_id = headers.get("last-event-id").cloned();
        let head = RequestHead {
            session: headers.get(recorder::SESSION_HEADER).map(String::as_str),
            ..RequestHead::default()
        };
        let refusal = self.server.admit(stream, false, head).refusal;
        sink.record(
            Side::Server,
            EventKind::Open {
                stream: stream.0,
                method: method.as_str().into(),
                headers: Some(headers),
            },
        );
        match (refusal, method) {
            (Some(r), _) => self.server.refuse(stream, None, r.status, &r.why),
            (None, Method::Delete) => self.server.handle_delete(now, stream),
            (None, _) => self
                .server
                .handle_get(now, stream, last_event_id.as_deref()),
        }
    }

    /// A response stream that was still open (the lane knows) went away by `by`'s doing: the
    /// client, or an intermediary the lane can tell apart from it.
    pub(crate) fn stream_closed(
        &mut self,
        now: Time,
        stream: StreamId,
        by: Side,
        sink: &mut impl RunSink,
    ) {
        sink.record(Side::Server, recorder::close(Some(stream), by, None));
        self.server.handle_stream_closed(now, stream);
    }

    /// A message's text: recorded (with the POST's headers over HTTP), then handed to the
    /// model; a request whose headers disagree with its body is refused instead.
    fn receive(
        &mut self,
        now: Time,
        stream: Option<StreamId>,
        bytes: &[u8],
        headers: Option<BTreeMap<String, String>>,
        sink: &mut impl RunSink,
    ) {
        let (era, refusal) = self.era_of(stream, bytes, headers.as_ref());
        let (mut w, decoded) = if self.recording.as_written {
            recorder::observe_as_written_in(era, self.transport, stream, bytes)
        } else {
            recorder::observe_in(era, self.transport, stream, bytes)
        };
        // The header checks are 2026-07-28's (Mcp-Method, Mcp-Name); a legacy request has none.
        let mismatch = headers
            .as_ref()
            .filter(|_| !era.is_legacy())
            .and_then(|h| recorder::header_mismatch(&decoded, h));
        w.headers = headers;
        if let Ok(Message::Request(r)) = &decoded {
            let declared = self.recording.client_policy.as_ref();
            if let Some(policy) = declared.and_then(|p| p.for_method(&r.method)) {
                w.policy = Some(policy.into());
            }
            if self.recording.count_requests {
                sink.tally(|s| s.requests += 1);
            }
        }
        sink.record(Side::Server, EventKind::Recv(w));
        if let (Some(r), Some(st)) = (refusal, stream) {
            let id = decoded.as_ref().ok().and_then(|m| m.id()).cloned();
            return self.server.refuse(st, id, r.status, &r.why);
        }
        match (decoded, stream, mismatch) {
            (Ok(Message::Request(r)), Some(st), Some(why)) => {
                self.server.handle_header_mismatch(now, st, r, &why)
            }
            (Ok(msg), _, _) => self.server.handle_message(now, stream, msg),
            (Err(e), _, _) => self.server.handle_invalid(now, stream, &e),
        }
    }

    /// The era to read a client's message in, and the refusal of an HTTP request that is not
    /// served, both as the model decides them: over HTTP what its era seam makes of the
    /// request's head ([`Server::admit`]), otherwise [`Server::era_to_read`]. The driver only
    /// reads the head and the body's `method`.
    fn era_of(
        &mut self,
        stream: Option<StreamId>,
        bytes: &[u8],
        headers: Option<&BTreeMap<String, String>>,
    ) -> (Era, Option<Refusal>) {
        let method = bytes_method(bytes);
        if let (Some(stream), Some(h)) = (stream, headers) {
            let head = RequestHead {
                session: h.get(recorder::SESSION_HEADER).map(String::as_str),
                version: h.get("mcp-protocol-version").map(String::as_str),
                method: method.as_deref(),
            };
            let admission = self.server.admit(stream, true, head);
            return (admission.era, admission.refusal);
        }
        (self.server.era_to_read(stream, method.as_deref()), None)
    }

    /// The next output, recorded: the server's transmits first, then its backend calls (an
    /// in-process backend applies and records them here and returns none).
    pub(crate) fn poll_io(&mut self, now: Time, sink: &mut impl RunSink) -> Option<ServerOutput> {
        loop {
            if let Some(write) = self.writes.pop_front() {
                return Some(ServerOutput::Write(write));
            }
            let Some(t) = self.server.poll_transmit() else {
                break;
            };
            for mut kind in recorder::server_transmit(self.transport, &t) {
                if let EventKind::Send(w) = &mut kind {
                    sink.tally(|s| s.messages += 1);
                    // A recording played back: where the message came from.
                    w.origin = t.message().and_then(|m| self.server.origin_of(m));
                }
                sink.record(Side::Server, kind);
            }
            let writes = &mut self.writes;
            self.writer.write(t, |w| writes.push_back(w));
        }
        while let Some(call) = self.server.poll_backend() {
            let Some(backend) = self.backend.as_mut() else {
                return Some(ServerOutput::Backend(call));
            };
            backend.handle_call(now, &call);
            let kind = match call {
                BackendCall::Work { request, .. } => EventKind::Work { request },
                BackendCall::Release { request } => EventKind::Release { request },
            };
            sink.record(Side::Backend, kind);
        }
        None
    }
}

/// The `method` of a message's text, if it has one (read before the era decides how the
/// message is decoded).
fn bytes_method(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        method: Option<String>,
    }
    serde_json::from_slice::<Head>(bytes).ok()?.method
}
