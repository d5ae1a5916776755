//! One pass over a trace that decodes every message and gathers, per request, the events the
//! rules ask about.
//!
//! A request is identified by the event that created it: the client's `send`, or the server's
//! `recv` when the client side was not recorded. Later events find their request by id, by
//! progress token or by HTTP stream; when ids or tokens were reused, the latest request
//! created before the event is the one meant, except for responses: a response goes to the
//! oldest request with its id that is still waiting for one in that view (so two requests sent
//! with the same id while outstanding, each answered once, are not one request answered
//! twice), else to the latest.

use std::collections::{BTreeMap, BTreeSet};

use super::OracleConfig;
use crate::model::{TimeoutPolicy, Transport};
use crate::trace::{EventKind, Side, Trace, TransportName, WireEvent, FAULT_STALL};
use crate::wire::Era;
use crate::wire::{
    DecodeError, DecodeOptions, Message, ProgressToken, RequestId, Rule, META_SUBSCRIPTION_ID,
    METHOD_LISTEN,
};

/// What the trace says about one request.
#[derive(Debug, Default)]
pub(crate) struct Req {
    pub id: Option<RequestId>,
    pub method: String,
    pub token: Option<ProgressToken>,
    pub transport: Option<Transport>,
    pub stream: Option<u64>,
    /// The event that created the request.
    pub created: usize,
    pub client_send: Option<usize>,
    pub server_recv: Option<usize>,
    /// Final responses in the server's view (its sends, or the client's receipts).
    pub responses: Vec<usize>,
    /// The client's first receipt of a final response.
    pub client_response: Option<usize>,
    /// The client's cancellations: stdio `notifications/cancelled` sends, HTTP closes of the
    /// request's stream by the client.
    pub client_cancels: Vec<usize>,
    /// The server's own observation of the cancellation (stdio cancel received, HTTP stream
    /// close seen).
    pub server_cancel_seen: Option<usize>,
    /// Every close of the request's stream, by anyone, seen anywhere.
    pub closes: Vec<usize>,
    pub timeout: Option<usize>,
    pub outcomes: Vec<usize>,
    /// Progress given to the client application.
    pub deliveries: Vec<usize>,
    pub work: Vec<usize>,
    pub release: Vec<usize>,
    pub policy: Option<TimeoutPolicy>,
    /// Server-view messages about this request (progress with its token, anything on its
    /// stream, its responses), in order.
    pub emissions: Vec<usize>,
    /// The client's receipts of progress carrying this request's token.
    pub client_progress: Vec<usize>,
}

impl Req {
    pub fn is_listen(&self) -> bool {
        self.method == METHOD_LISTEN
    }

    /// When the client stopped waiting: first response receipt, cancellation, timeout or
    /// outcome, whichever came first.
    pub fn client_end(&self) -> Option<usize> {
        [
            self.client_response,
            self.client_cancels.first().copied(),
            self.timeout,
            self.outcomes.first().copied(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// When the client abandoned the request (cancel sent, stream closed or timer fired), if it
    /// did so before any response arrived.
    pub fn client_abandoned(&self) -> Option<usize> {
        let abandon = [self.client_cancels.first().copied(), self.timeout]
            .into_iter()
            .flatten()
            .min()?;
        match self.client_response {
            Some(r) if r < abandon => None,
            _ => Some(abandon),
        }
    }
}

/// The legacy era's HTTP error bodies: text that is not JSON on a stream its side saw answered
/// with a status of 400 or more (`404 Not Found: Session not found`). The legacy era asks no
/// JSON-RPC body of a refused session, a missing header or a refused GET, so such a body is no
/// message; the modern era answers every error with one (§8), and there it stays a message to
/// judge.
fn error_bodies(trace: &Trace) -> BTreeSet<usize> {
    let mut refused: BTreeSet<(Side, u64)> = BTreeSet::new();
    let mut bodies = BTreeSet::new();
    for (i, e) in trace.events.iter().enumerate() {
        match &e.kind {
            EventKind::Status {
                stream: Some(stream),
                status,
                ..
            } => {
                if *status >= 400 {
                    refused.insert((e.side, *stream));
                } else {
                    refused.remove(&(e.side, *stream));
                }
            }
            EventKind::Send(w) | EventKind::Recv(w)
                if w.msg.is_none() && w.stream.is_some_and(|s| refused.contains(&(e.side, s))) =>
            {
                bodies.insert(i);
            }
            _ => {}
        }
    }
    bodies
}

pub(crate) struct Index<'t> {
    pub trace: &'t Trace,
    /// The era the trace is judged by: in the legacy era a closed HTTP stream is not a cancel.
    pub era: Era,
    /// Decoded message of each `send`/`recv` event.
    pub msgs: Vec<Option<Result<Message, DecodeError>>>,
    pub sides: BTreeSet<Side>,
    /// Legacy traces: the modern-era requests a dual-era client probed with before its
    /// handshake.
    pub probes: BTreeSet<usize>,
    pub requests: Vec<Req>,
    /// Events that are server-view emissions (server sends, or client receipts when the
    /// server side was not recorded), in order.
    pub emissions: Vec<usize>,
    by_id: BTreeMap<RequestId, Vec<usize>>,
    by_token: BTreeMap<ProgressToken, Vec<usize>>,
    by_stream: BTreeMap<u64, usize>,
    /// Each server-view response event, with the request it answers (one each).
    response_of: BTreeMap<usize, usize>,
    /// stdio requests the client sent and got an answer to, as (send, first answer) event
    /// pairs ordered by send, each answer replaced by the earliest answer of this or any later
    /// send: the ordered-pipe barriers of [`Index::answered_after`].
    stdio_answers: Vec<(usize, usize)>,
    /// Spans of time, `[from, until)` in ms, in which the client stopped reading the server's
    /// output on purpose (`fault` events `stall`).
    stalls: Vec<(u64, u64)>,
    /// Legacy era: each `GET` stream that resumed another, with the stream it resumed.
    resumed: BTreeMap<u64, u64>,
    /// Legacy era: server-view emissions that send again an event id the session already
    /// sent (a resumed stream's replay); the replay rules judge them, the others skip them.
    replays: BTreeSet<usize>,
}

impl<'t> Index<'t> {
    pub fn build(trace: &'t Trace, config: &OracleConfig) -> Index<'t> {
        // A dual-era client may probe with a modern request before it falls back to the
        // legacy handshake: such a request, before the first `initialize`, is read (and
        // judged) as the modern era's, and is no breach of the legacy one.
        let first_initialize = trace.events.iter().position(|e| match &e.kind {
            EventKind::Send(w) | EventKind::Recv(w) => w
                .msg
                .as_ref()
                .and_then(|m| m.get("method"))
                .is_some_and(|m| m == "initialize"),
            _ => false,
        });
        let mut probes = BTreeSet::new();
        let error_bodies = if config.decode.era.is_legacy() {
            error_bodies(trace)
        } else {
            BTreeSet::new()
        };
        let msgs = trace
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| match &e.kind {
                _ if error_bodies.contains(&i) => None,
                EventKind::Send(w) | EventKind::Recv(w) => {
                    let decoded = w.decode(&config.decode);
                    let before_handshake = first_initialize.is_some_and(|f| i < f);
                    match decoded {
                        Err(err) if before_handshake && err.rule == Rule::ModernMetaInLegacy => {
                            probes.insert(i);
                            let modern = DecodeOptions {
                                era: Era::Modern,
                                ..config.decode
                            };
                            Some(w.decode(&modern))
                        }
                        other => Some(other),
                    }
                }
                _ => None,
            })
            .collect();
        let sides = trace.events.iter().map(|e| e.side).collect();
        let mut index = Index {
            trace,
            era: config.decode.era,
            msgs,
            sides,
            probes,
            requests: Vec::new(),
            emissions: Vec::new(),
            by_id: BTreeMap::new(),
            by_token: BTreeMap::new(),
            by_stream: BTreeMap::new(),
            response_of: BTreeMap::new(),
            stdio_answers: Vec::new(),
            stalls: Vec::new(),
            resumed: BTreeMap::new(),
            replays: BTreeSet::new(),
        };
        for i in 0..trace.events.len() {
            index.visit(i);
        }
        if index.era.is_legacy() {
            index.resumptions();
            // A replayed event is the same message again: no second response, no new message
            // about its request.
            let replays = std::mem::take(&mut index.replays);
            for r in &mut index.requests {
                r.responses.retain(|i| !replays.contains(i));
                r.emissions.retain(|i| !replays.contains(i));
            }
            index.response_of.retain(|i, _| !replays.contains(i));
            index.replays = replays;
        }
        index.misplaced_responses();
        index.stdio_answers = index
            .requests
            .iter()
            .filter(|r| r.transport == Some(Transport::Stdio))
            .filter_map(|r| Some((r.client_send?, r.client_response?)))
            .collect();
        index.stdio_answers.sort_unstable();
        let mut earliest = usize::MAX;
        for pair in index.stdio_answers.iter_mut().rev() {
            earliest = earliest.min(pair.1);
            pair.1 = earliest;
        }
        index
    }

    /// Legacy era: which `GET` resumed which stream, and which emissions are replays. Event
    /// ids are unique within a session, and every `initialize` starts one.
    fn resumptions(&mut self) {
        let inits: BTreeSet<usize> = self
            .requests
            .iter()
            .filter(|r| r.method == "initialize")
            .map(|r| r.created)
            .collect();
        let emitted: BTreeSet<usize> = self.emissions.iter().copied().collect();
        let mut session = 0usize;
        let mut origin: BTreeMap<(usize, String), u64> = BTreeMap::new();
        for (i, e) in self.trace.events.iter().enumerate() {
            if inits.contains(&i) {
                session += 1;
            }
            match &e.kind {
                EventKind::Send(w) | EventKind::Recv(w) if emitted.contains(&i) => {
                    if let (Some(stream), Some(id)) = (w.stream, &w.event_id) {
                        match origin.entry((session, id.clone())) {
                            std::collections::btree_map::Entry::Occupied(_) => {
                                self.replays.insert(i);
                            }
                            std::collections::btree_map::Entry::Vacant(v) => {
                                v.insert(stream);
                            }
                        }
                    }
                }
                // A priming event's id names its stream too: a resume may start from it.
                EventKind::Sse {
                    stream,
                    event_id: Some(id),
                    ..
                } => {
                    origin.entry((session, id.clone())).or_insert(*stream);
                }
                EventKind::Open {
                    stream,
                    method,
                    headers: Some(h),
                } if method == "GET" => {
                    let from = h.get("last-event-id").map(|id| (session, id.clone()));
                    if let Some(&o) = from.and_then(|k| origin.get(&k)) {
                        self.resumed.entry(*stream).or_insert(o);
                    }
                }
                _ => {}
            }
        }
    }

    /// A client takes a request's response only from the request's own stream (or, in the
    /// legacy era, a stream resuming it): one that reached it on another request's stream (a
    /// server replaying events of other streams, or writing on the wrong one) did not end its
    /// wait, so a later cancel or timeout of the request is no fault of the client's. The
    /// rules about streams name the server's mistake; here the receipt that counts is the
    /// first on the right stream, if any.
    fn misplaced_responses(&mut self) {
        let stream_of = |i: usize| match &self.trace.events[i].kind {
            EventKind::Recv(w) => w.stream,
            _ => None,
        };
        let mut moved = Vec::new();
        for (r, req) in self.requests.iter().enumerate() {
            let (Some(own), Some(first), Some(id)) = (req.stream, req.client_response, &req.id)
            else {
                continue;
            };
            let right = |i: usize| stream_of(i).is_none_or(|s| self.origin_stream(s) == own);
            if right(first) {
                continue;
            }
            let next = (first + 1..self.trace.events.len()).find(|&j| {
                self.trace.events[j].side == Side::Client
                    && matches!(self.trace.events[j].kind, EventKind::Recv(_))
                    && matches!(self.msg(j), Some(Message::Result(_) | Message::Error(_)))
                    && self.msg(j).and_then(Message::id) == Some(id)
                    && right(j)
            });
            moved.push((r, next));
        }
        for (r, next) in moved {
            let modern = self.era == Era::Modern || self.requests[r].method == "server/discover";
            let first = self.requests[r].client_response.unwrap_or(0);
            self.requests[r].client_response = next;
            if !modern {
                continue;
            }
            // The client's closes of the stream while it still waited are its cancels (the
            // first reading skipped them, taking the misplaced response for the answer).
            let before = next.unwrap_or(usize::MAX);
            let trace = self.trace;
            let req = &mut self.requests[r];
            for &c in &req.closes {
                let by_client = matches!(
                    &trace.events[c],
                    e if e.side == Side::Client
                        && matches!(e.kind, EventKind::Close { by: Side::Client, .. })
                );
                if by_client && c > first && c < before && !req.client_cancels.contains(&c) {
                    req.client_cancels.push(c);
                }
            }
            req.client_cancels.sort_unstable();
        }
    }

    /// The stream whose messages `stream` carries: itself, or (legacy era) the stream a
    /// resuming `GET` took over, through every resume.
    pub fn origin_stream(&self, stream: u64) -> u64 {
        let mut s = stream;
        for _ in 0..=self.resumed.len() {
            match self.resumed.get(&s) {
                Some(&o) => s = o,
                None => break,
            }
        }
        s
    }

    /// Whether emission `i` replays an event the session already sent (legacy era).
    pub fn is_replay(&self, i: usize) -> bool {
        self.replays.contains(&i)
    }

    /// The client's first receipt of an answer to a stdio request it sent after event `i`.
    ///
    /// stdio is one ordered pipe each way, so the server read whatever the client wrote before
    /// that request before it read the request, and wrote that answer after reading it: any
    /// server message the client receives after the answer was written after the server had
    /// read event `i`'s message. A request sent right after a cancel is therefore a barrier
    /// that turns "the cancel reached the server within the grace window" into a certainty.
    pub fn answered_after(&self, i: usize) -> Option<usize> {
        let first_later = self.stdio_answers.partition_point(|&(send, _)| send <= i);
        self.stdio_answers
            .get(first_later)
            .map(|&(_, answer)| answer)
    }

    /// How many ms of `[from, until)` the client spent not reading the server's output on
    /// purpose: messages written in that time reached it that much later.
    pub fn stalled_ms(&self, from: u64, until: u64) -> u64 {
        self.stalls
            .iter()
            .map(|&(a, b)| b.min(until).saturating_sub(a.max(from)))
            .sum()
    }

    /// The request of event `i`'s message, when it is one: its method and params (without
    /// `_meta`).
    pub fn request_params(
        &self,
        i: usize,
    ) -> Option<(&str, &serde_json::Map<String, serde_json::Value>)> {
        match self.msg(i)? {
            Message::Request(r) => Some((&*r.method, &r.params)),
            _ => None,
        }
    }

    /// What makes two calls alike for timing comparisons: the method and params of event
    /// `i`'s request, without `_meta` and without the tool argument
    /// [`CALL_TAG`](crate::model::CALL_TAG) (a run's own numbering of its calls).
    pub fn call_shape(
        &self,
        i: usize,
    ) -> Option<(&str, serde_json::Map<String, serde_json::Value>)> {
        let (method, params) = self.request_params(i)?;
        let mut params = params.clone();
        if let Some(serde_json::Value::Object(args)) = params.get_mut("arguments") {
            args.remove(crate::model::CALL_TAG);
        }
        Some((method, params))
    }

    /// Whether the client made request `r` (its send, or the server's receipt of it, created
    /// it), not the server.
    pub fn by_client(&self, r: &Req) -> bool {
        let e = &self.trace.events[r.created];
        matches!(
            (e.side, &e.kind),
            (Side::Client, EventKind::Send(_)) | (Side::Server, EventKind::Recv(_))
        )
    }

    pub fn has(&self, side: Side) -> bool {
        self.sides.contains(&side)
    }

    pub fn t(&self, i: usize) -> u64 {
        self.trace.events[i].t
    }

    /// The last event at the same instant as event `i`. Recorders and hand-written traces
    /// put events of one millisecond in either order, so a rule that looks for what came
    /// before `i` looks up to here: the events of that instant are not ordered by their lines.
    pub fn instant_end(&self, i: usize) -> usize {
        let t = self.t(i);
        let events = &self.trace.events;
        (i..events.len())
            .take_while(|&j| events[j].t == t)
            .last()
            .unwrap_or(i)
    }

    pub fn msg(&self, i: usize) -> Option<&Message> {
        self.msgs[i].as_ref().and_then(|m| m.as_ref().ok())
    }

    pub fn wire(&self, i: usize) -> Option<&WireEvent> {
        match &self.trace.events[i].kind {
            EventKind::Send(w) | EventKind::Recv(w) => Some(w),
            _ => None,
        }
    }

    /// The request whose server-view responses include event `i`.
    pub fn response_of(&self, i: usize) -> Option<usize> {
        self.response_of.get(&i).copied()
    }

    /// The latest request with `id` created at or before event `i`.
    pub fn by_id(&self, id: &RequestId, i: usize) -> Option<usize> {
        self.by_id
            .get(id)?
            .iter()
            .rev()
            .copied()
            .find(|r| self.requests[*r].created <= i)
    }

    /// The oldest request with `id` created at or before event `i` for which `waiting` holds.
    fn oldest_waiting(
        &self,
        id: &RequestId,
        i: usize,
        waiting: impl Fn(&Req) -> bool,
    ) -> Option<usize> {
        let reqs = &self.requests;
        self.by_id
            .get(id)?
            .iter()
            .copied()
            .find(|&r| reqs[r].created <= i && waiting(&reqs[r]))
    }

    /// The latest request with `token` created at or before event `i`.
    pub fn by_token(&self, token: &ProgressToken, i: usize) -> Option<usize> {
        self.by_token
            .get(token)?
            .iter()
            .rev()
            .copied()
            .find(|r| self.requests[*r].created <= i)
    }

    /// The request whose POST opened HTTP stream `stream`.
    pub fn by_stream(&self, stream: u64) -> Option<usize> {
        self.by_stream.get(&stream).copied()
    }

    /// Whether event `i` is a server-view emission.
    fn is_emission(&self, i: usize) -> bool {
        let e = &self.trace.events[i];
        match e.kind {
            EventKind::Send(_) => e.side == Side::Server,
            EventKind::Recv(_) => e.side == Side::Client && !self.has(Side::Server),
            _ => false,
        }
    }

    fn create(
        &mut self,
        i: usize,
        w: &WireEvent,
        id: RequestId,
        method: &str,
        token: Option<ProgressToken>,
    ) -> usize {
        let r = self.requests.len();
        self.requests.push(Req {
            id: Some(id.clone()),
            method: method.to_owned(),
            token: token.clone(),
            transport: Some(w.transport.into()),
            stream: w.stream,
            created: i,
            policy: w.policy.map(Into::into),
            ..Req::default()
        });
        self.by_id.entry(id).or_default().push(r);
        if let Some(t) = token {
            self.by_token.entry(t).or_default().push(r);
        }
        if let Some(s) = w.stream {
            self.by_stream.insert(s, r);
        }
        r
    }

    fn visit(&mut self, i: usize) {
        let trace: &'t Trace = self.trace;
        let event = &trace.events[i];
        let (side, t_kind) = (event.side, &event.kind);
        match t_kind {
            EventKind::Send(w) | EventKind::Recv(w) => {
                let sending = matches!(t_kind, EventKind::Send(_));
                let Some(msg) = self.msg(i).cloned() else {
                    // Undecodable: still tie it to its stream for the HTTP rules.
                    if self.is_emission(i) {
                        self.emissions.push(i);
                        if let Some(r) = w.stream.and_then(|s| self.by_stream.get(&s).copied()) {
                            self.requests[r].emissions.push(i);
                        }
                    }
                    return;
                };
                self.visit_message(i, side, sending, w, &msg);
            }
            EventKind::Close {
                stream: Some(s),
                by,
                ..
            } => {
                let Some(&r) = self.by_stream.get(s) else {
                    return;
                };
                let req = &mut self.requests[r];
                // `server/discover` is a modern request even in a legacy trace (the probe of
                // an auto-mode client that fell back): its stream's close is its cancel.
                let modern = self.era == Era::Modern || req.method == "server/discover";
                req.closes.push(i);
                if !modern {
                    return;
                }
                if side == Side::Server
                    && req.server_cancel_seen.is_none()
                    && req.responses.is_empty()
                {
                    req.server_cancel_seen = Some(i);
                }
                if side == Side::Client && *by == Side::Client && req.client_response.is_none() {
                    req.client_cancels.push(i);
                }
            }
            EventKind::Close { stream: None, .. } => {}
            EventKind::Timeout { request, .. } => {
                if let Some(r) = self.by_id(request, i) {
                    self.requests[r].timeout.get_or_insert(i);
                }
            }
            EventKind::Outcome { request, .. } => {
                if let Some(r) = self.by_id(request, i) {
                    self.requests[r].outcomes.push(i);
                }
            }
            EventKind::Progress { request, .. } => {
                if let Some(r) = self.by_id(request, i) {
                    self.requests[r].deliveries.push(i);
                }
            }
            EventKind::Work { request } => {
                if let Some(r) = self.by_id(request, i) {
                    self.requests[r].work.push(i);
                }
            }
            EventKind::Release { request } => {
                if let Some(r) = self.by_id(request, i) {
                    self.requests[r].release.push(i);
                }
            }
            EventKind::Fault { fault, ms, .. } => {
                if fault == FAULT_STALL {
                    let t = event.t;
                    self.stalls.push((t, t + ms.unwrap_or(0)));
                }
            }
            EventKind::Comment { .. }
            | EventKind::Status { .. }
            | EventKind::Open { .. }
            | EventKind::Sse { .. } => {}
        }
    }

    fn visit_message(&mut self, i: usize, side: Side, sending: bool, w: &WireEvent, msg: &Message) {
        let emission = self.is_emission(i);
        if emission {
            self.emissions.push(i);
        }
        match msg {
            Message::Request(req) => {
                let creates = match (side, sending) {
                    (Side::Client, true) => true,
                    (Side::Server, false) => !self.has(Side::Client),
                    _ => false,
                };
                if creates {
                    let r = self.create(
                        i,
                        w,
                        req.id.clone(),
                        &req.method,
                        req.meta.progress_token.clone(),
                    );
                    if side == Side::Client {
                        self.requests[r].client_send = Some(i);
                    } else {
                        self.requests[r].server_recv = Some(i);
                    }
                } else if side == Side::Server && !sending {
                    if let Some(r) = self.by_id(&req.id, i) {
                        self.requests[r].server_recv.get_or_insert(i);
                    }
                }
            }
            Message::Cancelled(c) => {
                // In 2026-07-28 over Streamable HTTP the stream's close is the cancel; a
                // notification POSTed there cancels nothing (the binding expects none, and a
                // server rightly works on while the stream stays open). `cancel-over-http`
                // judges the POST itself.
                if self.era == Era::Modern && w.transport == TransportName::Http {
                    return;
                }
                let Some(r) = self.by_id(&c.request_id, i) else {
                    return;
                };
                match (side, sending) {
                    (Side::Client, true) => self.requests[r].client_cancels.push(i),
                    // A cancel that overtook its request (legacy HTTP: another connection)
                    // names a request the server does not know yet: it may be ignored.
                    (Side::Server, false) => {
                        let req = &mut self.requests[r];
                        let known = req.server_recv.is_some();
                        if known && req.server_cancel_seen.is_none() && req.responses.is_empty() {
                            req.server_cancel_seen = Some(i);
                        }
                    }
                    _ => {}
                }
            }
            Message::Progress(p) => {
                let Some(r) = self.by_token(&p.token, i) else {
                    return;
                };
                if emission {
                    self.requests[r].emissions.push(i);
                }
                if side == Side::Client && !sending {
                    self.requests[r].client_progress.push(i);
                }
            }
            Message::Result(_) | Message::Error(_) => {
                let Some(id) = msg.id() else { return };
                let client_recv = side == Side::Client && !sending;
                let waiting = |r: &Req| {
                    if client_recv {
                        r.client_end().is_none()
                    } else {
                        emission && r.responses.is_empty() && r.server_cancel_seen.is_none()
                    }
                };
                let Some(r) = self
                    .oldest_waiting(id, i, waiting)
                    .or_else(|| self.by_id(id, i))
                else {
                    return;
                };
                let req = &mut self.requests[r];
                if emission {
                    req.emissions.push(i);
                    req.responses.push(i);
                    self.response_of.insert(i, r);
                }
                if side == Side::Client && !sending && req.client_response.is_none() {
                    req.client_response = Some(i);
                }
            }
            Message::Notification(n) => {
                if !emission {
                    return;
                }
                // A notification belongs to the request whose stream carries it, or to the
                // subscription its tag names (stdio), so that nothing-after-cancel applies.
                let tagged = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("_meta"))
                    .and_then(|m| m.get(META_SUBSCRIPTION_ID))
                    .and_then(RequestId::from_json)
                    .and_then(|id| self.by_id(&id, i))
                    .filter(|&r| self.requests[r].is_listen());
                let by_stream = w.stream.and_then(|s| self.by_stream.get(&s).copied());
                if let Some(r) = by_stream.or(tagged) {
                    self.requests[r].emissions.push(i);
                }
            }
        }
    }
}
