//! The reference client's driver: everything a lane does around the sans-IO [`Client`] that is
//! not I/O. It records what the client sends, reads and tells its application, keeps the run's
//! counters and the map from the application's calls to the requests that carry them (through
//! retries), and reads stdio lines with the lanes' [`StdioReader`]. A lane keeps only how bytes
//! and time reach the driver and how the client's output leaves it.
//!
//! The driver has no clock and does no I/O: every call takes the model's `now`, events go to a
//! [`RunSink`] that stamps them with the lane's own clock (the turmoil lane quantises trace
//! times to its tick, the live lanes read the wall clock), and output comes back one
//! [`ClientOutput`] at a time from [`ClientDriver::poll_io`], already recorded, so a lane that
//! writes asynchronously writes each before it asks for the next. When the lane flushes is
//! its own choice (after each input, or after each message), because that decides the order
//! of events at one instant and so the trace.
//!
//! Used by the in-memory lane, the turmoil lane's `client` host, the live probe and the
//! `live_output` fuzz target (which therefore fuzzes this code).

use std::collections::{BTreeMap, BTreeSet};

use crate::framing::ndjson;
use crate::lanes::readers::{ExchangeItem, StdioReader};
use crate::lanes::recorder::{self, ClientNote};
use crate::lanes::RunSink;
use crate::model::{CallSpec, Client, ClientTransmit, Outcome, StreamId, Transport};
use crate::time::Time;
use crate::trace::{EventKind, Side, WireEvent};
use crate::wire::http::Method;
use crate::wire::{Message, RequestId};

/// What the lane must do for the client; recorded (and counted) before it is returned.
#[derive(Debug)]
pub(crate) enum ClientOutput {
    /// Write this NDJSON line to the server's stdin.
    Line(Vec<u8>),
    /// POST `msg` on a connection of its own; its response is `stream`.
    Post {
        /// The exchange.
        stream: StreamId,
        /// The message.
        msg: Message,
        /// The POST's headers (names in lower case; none computed for the in-memory lane's
        /// modern-era POSTs, which carry none).
        headers: BTreeMap<String, String>,
    },
    /// Open `stream` with a request without a message (legacy era): a `GET` (a resume, or the
    /// session's own stream) or the session's `DELETE`.
    Open {
        /// The exchange.
        stream: StreamId,
        /// `GET` or `DELETE`.
        method: Method,
        /// The request's headers (names in lower case), `Last-Event-ID` among them.
        headers: BTreeMap<String, String>,
    },
    /// Drop `stream`'s connection (the HTTP cancellation).
    Close(StreamId),
    /// Drop the pipe to the server.
    Disconnect,
}

/// How a lane wants its client recorded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientRecording {
    /// Record received text as written (a real peer's) instead of as the model decoded it.
    pub(crate) as_written: bool,
    /// Record each POST's headers on its `send` (the lane sends real POSTs; the in-memory
    /// lane moves messages and has none).
    pub(crate) post_headers: bool,
}

/// Who ended a response whose last item a lane hands over: the server, which finished its
/// body, unless the lane knows better (an intermediary cut the connection, or the scenario
/// reset it), with the reason it gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EndedBy {
    /// Who ended it.
    pub(crate) side: Side,
    /// Why, as the one who ended it said (an idle timeout's `idle`).
    pub(crate) reason: Option<String>,
}

impl EndedBy {
    /// The server ended the response.
    pub(crate) const SERVER: EndedBy = EndedBy {
        side: Side::Server,
        reason: None,
    };

    /// An intermediary (a proxy, the probe's relay, a reset) cut it.
    #[cfg_attr(not(any(feature = "turmoil", feature = "live")), allow(dead_code))]
    pub(crate) fn proxy(reason: Option<String>) -> Self {
        EndedBy {
            side: Side::Proxy,
            reason,
        }
    }
}

/// The reference client and its bookkeeping.
pub(crate) struct ClientDriver {
    client: Client,
    transport: Transport,
    recording: ClientRecording,
    lines: StdioReader,
    /// The request each planned call of the application was first sent as ([`Self::current`]
    /// follows its retries).
    calls: BTreeMap<usize, RequestId>,
    /// The stream each request was POSTed on.
    streams: BTreeMap<RequestId, StreamId>,
    /// How each request ended, and when.
    outcomes: BTreeMap<RequestId, (Outcome, Time)>,
    /// Requests lost and re-issued: old id to new id.
    retried: BTreeMap<RequestId, RequestId>,
    /// Progress notifications handed to the application.
    progress: usize,
    /// The id of the SSE event whose message is read next, per stream.
    event_ids: BTreeMap<StreamId, String>,
    /// The HTTP streams the client opened and has not seen end or closed itself: a response
    /// is read only on these.
    open: BTreeSet<StreamId>,
}

impl ClientDriver {
    /// Drives `client` on `transport`, recording as `recording` says.
    pub(crate) fn new(client: Client, transport: Transport, recording: ClientRecording) -> Self {
        ClientDriver {
            client,
            transport,
            recording,
            lines: StdioReader::default(),
            calls: BTreeMap::new(),
            streams: BTreeMap::new(),
            outcomes: BTreeMap::new(),
            retried: BTreeMap::new(),
            progress: 0,
            event_ids: BTreeMap::new(),
            open: BTreeSet::new(),
        }
    }

    /// The reference client of `scenario`, as a simulated lane drives it: the messages
    /// recorded as the model decoded them, each POST's headers only where the lane sends real
    /// POSTs (`post_headers`).
    pub(crate) fn for_scenario(scenario: &crate::scenario::Scenario, post_headers: bool) -> Self {
        ClientDriver::new(
            Client::new(scenario.client_config()),
            scenario.transport,
            ClientRecording {
                as_written: false,
                post_headers,
            },
        )
    }

    /// The client.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The application starts a request that is none of its planned calls (the probe's
    /// start-up and liveness checks, the fuzz target's one call).
    pub(crate) fn start_request(&mut self, now: Time, spec: CallSpec) -> RequestId {
        self.client.start_request(now, spec)
    }

    /// The application cancels request `id` (under the id it goes by now). Cancelling one
    /// that has ended does nothing, as for an application whose cancel crosses the result.
    pub(crate) fn cancel(&mut self, now: Time, id: &RequestId) {
        let id = self.current(id);
        let _ = self.client.cancel(now, &id);
    }

    /// The client's timers due at `now` fire.
    pub(crate) fn timers(&mut self, now: Time) {
        self.client.handle_timeout(now);
    }

    /// The application is done: the client ends its session (legacy HTTP's `DELETE`).
    pub(crate) fn end_session(&mut self) {
        self.client.end_session();
    }

    /// The host restarted the server: the client loses what was in flight on the old pipe.
    #[cfg(feature = "live")] // the probe's
    pub(crate) fn server_restarted(&mut self, now: Time) {
        self.client.handle_disconnect(now);
    }

    /// The application starts its call `key` (a planned call's index).
    pub(crate) fn start_call(&mut self, now: Time, key: usize, spec: CallSpec) -> RequestId {
        let id = self.client.start_request(now, spec);
        self.calls.insert(key, id.clone());
        id
    }

    /// The application cancels its call `key` under the id it goes by now.
    pub(crate) fn cancel_call(&mut self, now: Time, key: usize) {
        if let Some(id) = self.calls.get(&key).cloned() {
            self.cancel(now, &id);
        }
    }

    /// The stream call `key`'s current request was POSTed on.
    pub(crate) fn stream_of_call(&self, key: usize) -> Option<StreamId> {
        let id = self.current(self.calls.get(&key)?);
        self.streams.get(&id).copied()
    }

    /// The id a request goes by now (a lost idempotent request is re-issued under a new one).
    pub(crate) fn current(&self, id: &RequestId) -> RequestId {
        let mut id = id.clone();
        while let Some(new) = self.retried.get(&id) {
            id = new.clone();
        }
        id
    }

    /// How a request (or its re-issue) ended, and when.
    #[cfg(feature = "live")] // the probe's
    pub(crate) fn outcome(&self, id: &RequestId) -> Option<(Outcome, Time)> {
        self.outcomes.get(&self.current(id)).copied()
    }

    /// Progress notifications handed to the application so far.
    #[cfg(feature = "live")] // the probe's
    pub(crate) fn progress_told(&self) -> usize {
        self.progress
    }

    /// The next output, recorded; once none is left, everything the client told its
    /// application is recorded (outcomes counted, retries followed) and `None` returned.
    pub(crate) fn poll_io(&mut self, now: Time, sink: &mut impl RunSink) -> Option<ClientOutput> {
        while let Some(t) = self.client.poll_transmit() {
            match t {
                ClientTransmit::Line(msg) => {
                    self.record_send(None, &msg, None, sink);
                    if let Ok(line) = ndjson::encode_line(&msg) {
                        return Some(ClientOutput::Line(line));
                    }
                }
                ClientTransmit::Post { stream, msg } => {
                    // Computed once, for the trace and the POST, and only where they go
                    // somewhere: a lane that sends real POSTs, or the legacy era's (the
                    // model's own session, so every lane carries and records them), and an
                    // auto-mode client's (its era is the server's to tell).
                    let client = &self.client;
                    let wanted = self.recording.post_headers
                        || client.era().is_legacy()
                        || client.config().connect.is_auto();
                    let headers = match wanted {
                        true => self.client.post_headers(&msg),
                        false => BTreeMap::new(),
                    };
                    self.record_send(Some(stream), &msg, wanted.then_some(&headers), sink);
                    if let Some(id) = msg.id() {
                        self.streams.insert(id.clone(), stream);
                    }
                    self.open.insert(stream);
                    return Some(ClientOutput::Post {
                        stream,
                        msg,
                        headers,
                    });
                }
                ClientTransmit::Get {
                    stream,
                    last_event_id,
                } => {
                    let headers = self.client.get_headers(last_event_id.as_deref());
                    return Some(self.open(stream, Method::Get, headers, sink));
                }
                ClientTransmit::Delete { stream } => {
                    let headers = self.client.delete_headers();
                    return Some(self.open(stream, Method::Delete, headers, sink));
                }
                ClientTransmit::Close { stream } => {
                    self.open.remove(&stream);
                    sink.record(
                        Side::Client,
                        recorder::close(Some(stream), Side::Client, None),
                    );
                    return Some(ClientOutput::Close(stream));
                }
                ClientTransmit::Disconnect => {
                    sink.record(Side::Client, recorder::close(None, Side::Client, None));
                    return Some(ClientOutput::Disconnect);
                }
            }
        }
        while let Some(e) = self.client.poll_event() {
            match recorder::client_event(e) {
                ClientNote::Record(kind) => {
                    match &kind {
                        EventKind::Progress { .. } => self.progress += 1,
                        EventKind::Outcome { request, outcome } => {
                            self.outcomes.insert(request.clone(), (*outcome, now));
                            let outcome = *outcome;
                            sink.tally(|s| *s.outcomes.entry(outcome).or_default() += 1);
                        }
                        _ => {}
                    }
                    sink.record(Side::Client, kind);
                }
                ClientNote::Retried { lost, new } => {
                    self.outcomes.remove(&lost);
                    self.retried.insert(lost, new);
                }
            }
        }
        None
    }

    /// A `GET` or `DELETE` on `stream`, recorded.
    fn open(
        &mut self,
        stream: StreamId,
        method: Method,
        headers: BTreeMap<String, String>,
        sink: &mut impl RunSink,
    ) -> ClientOutput {
        self.open.insert(stream);
        let open = EventKind::Open {
            stream: stream.0,
            method: method.as_str().into(),
            headers: Some(headers.clone()),
        };
        sink.record(Side::Client, open);
        ClientOutput::Open {
            stream,
            method,
            headers,
        }
    }

    fn record_send(
        &mut self,
        stream: Option<StreamId>,
        msg: &Message,
        headers: Option<&BTreeMap<String, String>>,
        sink: &mut impl RunSink,
    ) {
        let request = matches!(msg, Message::Request(_));
        sink.tally(|s| {
            s.messages += 1;
            if request {
                s.requests += 1;
            }
        });
        let mut kind = recorder::client_send(&self.client, self.transport, stream, msg);
        if let (EventKind::Send(w), Some(h)) = (&mut kind, headers) {
            w.headers = Some(h.clone());
        }
        sink.record(Side::Client, kind);
    }

    /// Splits stdio bytes from the server into lines and framing errors, in order; hand each
    /// to [`ClientDriver::read_line`].
    pub(crate) fn stdio_lines(&mut self, bytes: &[u8]) -> Vec<Result<Vec<u8>, WireEvent>> {
        self.lines.push(bytes)
    }

    /// One item of [`ClientDriver::stdio_lines`]: a line is received, a framing error recorded.
    pub(crate) fn read_line(
        &mut self,
        now: Time,
        item: Result<Vec<u8>, WireEvent>,
        sink: &mut impl RunSink,
    ) {
        match item {
            Ok(line) => self.receive(now, None, &line, sink),
            Err(w) => sink.record(Side::Client, EventKind::Recv(w)),
        }
    }

    /// Whether the client still reads `stream`'s response (it opened it, and neither closed it
    /// nor saw it end).
    pub(crate) fn reads(&self, stream: StreamId) -> bool {
        self.open.contains(&stream)
    }

    /// One item of `stream`'s response: the one call through which a lane hands over
    /// everything it reads of a response, its status, each event's id, each message and
    /// comment, and its end (`Ended`: the body finished; `Cut`: the connection failed or was
    /// cut), which is `ended_by`'s. Items of a stream the client no longer reads are dropped,
    /// as a real client reads nothing from a connection it dropped.
    pub(crate) fn response(
        &mut self,
        now: Time,
        stream: StreamId,
        item: ExchangeItem,
        ended_by: EndedBy,
        sink: &mut impl RunSink,
    ) {
        if !self.reads(stream) {
            return;
        }
        match item {
            ExchangeItem::Status {
                status,
                content_type,
                session,
            } => self.status(now, stream, status, content_type, session, sink),
            ExchangeItem::EventId {
                id,
                retry_ms,
                primes,
            } => self.event_id(stream, id, retry_ms, primes, sink),
            ExchangeItem::Message(bytes) => self.receive(now, Some(stream), &bytes, sink),
            ExchangeItem::Comment => self.comment(stream, sink),
            ExchangeItem::Ended | ExchangeItem::Cut => {
                self.open.remove(&stream);
                self.stream_ended(now, stream, ended_by, sink);
            }
        }
    }

    /// One message's text from the server (on `stream` for HTTP): recorded, and handed to the
    /// client when it decodes.
    fn receive(
        &mut self,
        now: Time,
        stream: Option<StreamId>,
        bytes: &[u8],
        sink: &mut impl RunSink,
    ) {
        // Read in the era the client speaks (a legacy server's own requests carry no `_meta`).
        let era = self.client.era();
        let (mut w, decoded) = if self.recording.as_written {
            recorder::observe_as_written_in(era, self.transport, stream, bytes)
        } else {
            recorder::observe_in(era, self.transport, stream, bytes)
        };
        w.event_id = stream.and_then(|s| self.event_ids.remove(&s));
        sink.record(Side::Client, EventKind::Recv(w));
        if let Ok(msg) = decoded {
            self.client.handle_message(now, stream, msg);
        }
    }

    /// The server's end of the pipe closed: the truncated last line, the close, and the
    /// client loses what was in flight. The reader starts afresh for the next pipe.
    pub(crate) fn pipe_closed(&mut self, now: Time, sink: &mut impl RunSink) {
        if let Some(w) = self.lines.finish() {
            sink.record(Side::Client, EventKind::Recv(w));
        }
        sink.record(Side::Client, recorder::close(None, Side::Server, None));
        self.client.handle_disconnect(now);
    }

    /// A new pipe to the server: its lines are read from the start.
    pub(crate) fn new_pipe(&mut self) {
        self.lines = StdioReader::default();
    }

    /// A response's status line, content type and the session it issued (legacy era).
    fn status(
        &mut self,
        now: Time,
        stream: StreamId,
        status: u16,
        content_type: Option<String>,
        session: Option<String>,
        sink: &mut impl RunSink,
    ) {
        if let Some(id) = &session {
            self.client.handle_session(id);
        }
        self.client.handle_status(now, stream, status);
        let headers = session.map(|id| [(recorder::SESSION_HEADER.to_owned(), id)].into());
        sink.record(
            Side::Client,
            EventKind::Status {
                stream: Some(stream.0),
                status,
                content_type,
                headers,
            },
        );
    }

    /// An SSE event on `stream` had the id `id` (and `retry_ms` was in force): the id of the
    /// message read next, or (`primes`) a priming event of its own.
    fn event_id(
        &mut self,
        stream: StreamId,
        id: String,
        retry_ms: Option<u64>,
        primes: bool,
        sink: &mut impl RunSink,
    ) {
        self.client.handle_event_id(stream, &id, retry_ms);
        if primes {
            sink.record(
                Side::Client,
                EventKind::Sse {
                    stream: stream.0,
                    event_id: Some(id),
                    retry_ms,
                },
            );
        } else {
            self.event_ids.insert(stream, id);
        }
    }

    /// An SSE comment (a keep-alive) on `stream`.
    fn comment(&mut self, stream: StreamId, sink: &mut impl RunSink) {
        sink.record(
            Side::Client,
            EventKind::Comment {
                stream: Some(stream.0),
            },
        );
    }

    /// A stream the client still had open ended by `by`'s doing.
    fn stream_ended(&mut self, now: Time, stream: StreamId, by: EndedBy, sink: &mut impl RunSink) {
        sink.record(
            Side::Client,
            EventKind::Close {
                stream: Some(stream.0),
                by: by.side,
                reason: by.reason,
            },
        );
        self.client.handle_stream_closed(now, stream);
    }
}
