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

use std::collections::BTreeMap;

use crate::lanes::readers::StdioReader;
use crate::lanes::recorder;
use crate::lanes::RunSink;
use crate::model::{
    Backend, BackendCall, Server, ServerTransmit, StreamId, TimeoutPolicy, Transport,
};
use crate::time::Time;
use crate::trace::{EventKind, Side};
use crate::wire::http::Method;
use crate::wire::{Era, Message};

/// How a lane wants its server recorded.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ServerRecording {
    /// Record received text as written (a real client's) instead of as the model decoded it.
    pub(crate) as_written: bool,
    /// The timeout policy a black-box client declared, recorded on each request it sent.
    pub(crate) client_policy: Option<TimeoutPolicy>,
    /// Count each request received (no client driver counts them: the client is real).
    pub(crate) count_requests: bool,
}

/// What the lane must do for the server; recorded (and counted) before it is returned.
#[derive(Debug)]
pub(crate) enum ServerOutput {
    /// Carry this transmit: a stdio line, or a part of an HTTP response.
    Transmit(ServerTransmit),
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
}

impl ServerDriver {
    /// Drives `server`; `backend` when the backend runs in process.
    pub(crate) fn new(
        server: Server,
        backend: Option<Backend>,
        recording: ServerRecording,
    ) -> Self {
        ServerDriver {
            transport: server.config().transport,
            server,
            recording,
            lines: StdioReader::default(),
            backend,
        }
    }

    /// The server.
    pub(crate) fn server(&self) -> &Server {
        &self.server
    }

    /// The server, for its timers.
    pub(crate) fn server_mut(&mut self) -> &mut Server {
        &mut self.server
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

    /// An HTTP request on `stream` with its `method` (`None`: one the endpoint does not
    /// serve, answered 405): a POST's body, or a legacy `GET` or `DELETE`.
    #[cfg(any(feature = "turmoil", feature = "live"))]
    pub(crate) fn http_request(
        &mut self,
        now: Time,
        stream: StreamId,
        method: Option<Method>,
        body: &[u8],
        headers: BTreeMap<String, String>,
        sink: &mut impl RunSink,
    ) {
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
        let refusal = self.session_refusal(&headers, true);
        sink.record(
            Side::Server,
            EventKind::Open {
                stream: stream.0,
                method: method.as_str().into(),
                headers: Some(headers),
            },
        );
        match (refusal, method) {
            (Some((status, why)), _) => self.server.refuse(stream, None, status, &why),
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
        let era = self.era_of(bytes, headers.as_ref());
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
        let initialize = matches!(&decoded, Ok(Message::Request(r)) if r.method == "initialize");
        let refusal = headers
            .as_ref()
            .filter(|_| era.is_legacy() && !initialize)
            .and_then(|h| self.session_refusal(h, false));
        w.headers = headers;
        if let Ok(Message::Request(_)) = &decoded {
            if let Some(policy) = self.recording.client_policy {
                w.policy = Some(policy.into());
            }
            if self.recording.count_requests {
                sink.tally(|s| s.requests += 1);
            }
        }
        sink.record(Side::Server, EventKind::Recv(w));
        if let (Some((status, why)), Some(st)) = (refusal, stream) {
            let id = decoded.as_ref().ok().and_then(|m| m.id()).cloned();
            return self.server.refuse(st, id, status, &why);
        }
        match (decoded, stream, mismatch) {
            (Ok(Message::Request(r)), Some(st), Some(why)) => {
                self.server.handle_header_mismatch(now, st, r, &why)
            }
            (Ok(msg), _, _) => self.server.handle_message(now, stream, msg),
            (Err(e), _, _) => self.server.handle_invalid(now, stream, &e),
        }
    }

    /// Why a legacy request (or `GET` or `DELETE`, `open`) with these headers is refused, if it is: 404 for a
    /// session this server did not issue (it forgot it in a crash, or never had it), 400 for a
    /// request without the session it did issue (docs/spec/mcp-2025-11-25.md §5, LA5).
    fn session_refusal(
        &self,
        headers: &BTreeMap<String, String>,
        open: bool,
    ) -> Option<(u16, String)> {
        match (headers.get(recorder::SESSION_HEADER), self.server.session()) {
            (Some(sent), issued) if issued != Some(sent.as_str()) => {
                Some((404, format!("session {sent} not found")))
            }
            (None, Some(issued)) => Some((400, format!("Mcp-Session-Id {issued} is missing"))),
            // No session to stream or end: 2026-07-28 serves POSTs only (§9 E46), and a
            // legacy server may refuse such a request just the same.
            (None, None) if open => Some((405, "only POST is served outside a session".into())),
            _ => None,
        }
    }

    /// The era to read a client's message in: the connection's, once its first request
    /// decided it; before that, the legacy era for an `initialize` or a request in a legacy
    /// session (the dual-era server lets the first request pick), else the modern one.
    fn era_of(&self, bytes: &[u8], headers: Option<&BTreeMap<String, String>>) -> Era {
        if let Some(era) = self.server.era() {
            return era;
        }
        if headers.is_some_and(|h| h.contains_key(recorder::SESSION_HEADER)) {
            return Era::LEGACY;
        }
        let opens_legacy = serde_json::from_slice::<serde_json::Value>(bytes)
            .ok()
            .is_some_and(|v| v.get("method").and_then(|m| m.as_str()) == Some("initialize"));
        if opens_legacy {
            Era::LEGACY
        } else {
            Era::Modern
        }
    }

    /// The next output, recorded: the server's transmits first, then its backend calls (an
    /// in-process backend applies and records them here and returns none).
    pub(crate) fn poll_io(&mut self, now: Time, sink: &mut impl RunSink) -> Option<ServerOutput> {
        if let Some(t) = self.server.poll_transmit() {
            for kind in recorder::server_transmit(self.transport, &t) {
                if matches!(kind, EventKind::Send(_)) {
                    sink.tally(|s| s.messages += 1);
                }
                sink.record(Side::Server, kind);
            }
            return Some(ServerOutput::Transmit(t));
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
