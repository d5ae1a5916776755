//! The reference MCP server.
//!
//! Its one tool, [`SLOW_TOOL`], runs as timed work: `steps` backend calls `step_ms` apart,
//! then a result. While it runs it sends progress (only when the request carried a token,
//! strictly increasing, at most one per `progress_min_interval`, never after the response)
//! and, on an SSE stream, comment keep-alives when the stream has been quiet for
//! `keepalive_interval`. A request ends at the server when it sends the response or observes
//! the cancellation (stdio `notifications/cancelled`, HTTP stream closed); after that it sends
//! nothing more for it and releases the backend resource (docs/spec/mcp-2026-07-28.md §3.3, §5.2).
//!
//! It also serves `subscriptions/listen`: the acknowledgement is the first message tagged with
//! the subscription id, every notification on it is tagged and of a type the filter asked for
//! (`notifications/tools/list_changed` every `listen_notify_interval`, standing in for a
//! changing tool list), an HTTP listen stream gets keep-alives like a call's, and
//! [`Server::shutdown`] ends it with a graceful result. `notifications/cancelled` is never
//! sent (§3.2 allows it only for listen teardown on stdio; the graceful result is the form the
//! TypeScript SDK chose).
//!
//! Long work has two more shapes (§7.2, §7.3; [`super::tasks`]): a call whose arguments ask
//! for `input_rounds` rounds of input is answered with an `InputRequiredResult` until a retry
//! brings the last round's `requestState` back; a call that declares the Tasks extension is
//! answered at once with a `CreateTaskResult` and runs on as a task, polled with `tasks/get`
//! and cancelled with `tasks/cancel`.
//!
//! It is dual-era, as the SDK servers are: on stdio a connection's first request decides, over
//! HTTP every request speaks for itself ([`super::server_eras`], the one place where an era is
//! decided). `initialize` opens the legacy era (docs/spec/mcp-2025-11-25.md §2): the answer names the legacy version
//! the client asked for (else 2025-11-25), `ping` is answered with an empty result, results
//! carry no `resultType`, and on HTTP a cancel is the POSTed notification while a closed stream
//! is not one (LC11). Anything else opens the modern era. Over HTTP each legacy `initialize`
//! issues a session of its own (a request naming a session the server does not know gets 404,
//! [`Server::admit`]), request ids are unique per session, and every event stream of a
//! session is resumable (`model/resume.rs`): a stream that breaks keeps its work
//! and its events, and a `GET` with `Last-Event-ID` picks them up. A `DELETE` ends the session.
//!
//! In the legacy era a call whose arguments say `"sample": true` (the era's way to ask the
//! client for something, where 2026-07-28 has input rounds) makes the server send a request
//! of its own, `sampling/createMessage`, on the call's stream, when the client declared the
//! `sampling` capability. The call's work does not wait for it; the server cancels it (LC9)
//! when the call ends first, is cancelled, or [`SAMPLING_TIMEOUT`] passes, and its ids `s-T-N`
//! name the process's start so that a restarted server never reuses one. A server configured
//! [`ServerEras::LegacyOnly`] speaks only the legacy era and refuses an auto-mode client's
//! `server/discover`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::backend::BackendCall;
pub use super::server_eras::{
    Admission, Refusal, RequestHead, ServerEras, SessionLimits, LEGACY_RETRY_MS,
};
use super::server_eras::{EraSeam, JobKey, Scope};
pub use super::server_transmit::ServerTransmit;
use super::tasks::{request_state, result_of, task_fields, verify_state, TaskStatus, TaskStore};
use super::{StreamId, Transport};
use crate::model::mutant::{Mutant, MutantSet};
use crate::time::Time;
use crate::wire::{
    codes, DecodeError, Era, ErrorResponse, Message, Notification, Progress, ProgressToken,
    Request, RequestId, ResultResponse, ResultType, EXTENSION_TASKS, META_SUBSCRIPTION_ID,
    METHOD_LISTEN, METHOD_SUBSCRIPTIONS_ACKNOWLEDGED, METHOD_TASKS_CANCEL, METHOD_TASKS_GET,
    METHOD_TASKS_UPDATE, METHOD_TOOLS_CALL, PROTOCOL_VERSION,
};

/// The name of the reference server's tool. Arguments: `steps` (default 3, at most
/// [`MAX_STEPS`]), `step_ms` (default 1000), `input_rounds` (default 0, at most
/// [`MAX_INPUT_ROUNDS`]: rounds of input asked for before the work starts, §7.2) and `task`
/// (`"required"`: the call must declare the Tasks extension, else -32021). A `call` argument
/// (any string or number) is echoed in the result's text, so that a run through an
/// intermediary can tell whose answer each is (`mcp-sim check-proxy` tags every call).
pub const SLOW_TOOL: &str = "slow_op";

/// The tool argument that numbers a run's calls (see [`SLOW_TOOL`]).
pub const CALL_TAG: &str = "call";

/// The largest `steps` the tool accepts.
pub const MAX_STEPS: u64 = 100_000;

/// The largest `input_rounds` the tool accepts.
pub const MAX_INPUT_ROUNDS: u64 = 16;

/// How the server answers a request over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResponseMode {
    /// `text/event-stream`: progress and keep-alives can flow before the response.
    Sse,
    /// `application/json`: one object at the end; no progress can be delivered (§2.4).
    Json,
}

/// How SSE events are written on the wire. Every style is valid WHATWG event-stream; the
/// harder ones exercise the client's framer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SseStyle {
    /// Compact JSON on one `data:` line, LF line ends, one write per event.
    Plain,
    /// Pretty-printed JSON over several `data:` lines, CR LF line ends, each event written in
    /// two pieces split right after its first CR.
    PrettyCrlfSplit,
}

impl SseStyle {
    /// The bytes of one SSE event carrying `msg`, as the pieces the server writes.
    pub fn encode(self, msg: &Message) -> Vec<Vec<u8>> {
        self.encode_with_id(msg, None)
    }

    /// The bytes of one SSE event carrying `msg` with the `id` field `event_id` first, if any.
    pub fn encode_with_id(self, msg: &Message, event_id: Option<&str>) -> Vec<Vec<u8>> {
        match self {
            SseStyle::Plain => {
                let text = crate::wire::encode(msg).unwrap_or_default();
                let event = crate::framing::sse::encode_event(&text);
                let event = match event_id {
                    Some(id) => format!("id: {id}\n{event}"),
                    None => event,
                };
                vec![event.into_bytes()]
            }
            SseStyle::PrettyCrlfSplit => {
                let value = crate::wire::to_value(msg).unwrap_or_default();
                let text = serde_json::to_string_pretty(&value).unwrap_or_default();
                let mut out = String::new();
                if let Some(id) = event_id {
                    out.push_str("id: ");
                    out.push_str(id);
                    out.push_str("\r\n");
                }
                for line in text.lines() {
                    out.push_str("data: ");
                    out.push_str(line);
                    out.push_str("\r\n");
                }
                out.push_str("\r\n");
                let bytes = out.into_bytes();
                let cut = bytes
                    .iter()
                    .position(|b| *b == b'\r')
                    .map_or(bytes.len(), |p| p + 1);
                vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()]
            }
        }
    }
}

/// Behaviour knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerBehaviour {
    /// At most one progress notification per token per this interval (SHOULD rate-limit).
    pub progress_min_interval: Duration,
    /// Send an SSE comment when a stream has been quiet this long (`None`: never).
    pub keepalive_interval: Option<Duration>,
    /// SSE or JSON responses over HTTP.
    pub response_mode: ResponseMode,
    /// How SSE events are written.
    pub sse_style: SseStyle,
    /// A task is forgotten this long after its creation (`ttlMs`, §7.3).
    pub task_ttl: Duration,
    /// The `pollIntervalMs` the server asks of clients polling a task.
    pub poll_interval: Duration,
    /// How often the tool list "changes" while a subscription asked to hear of it (`None`:
    /// never).
    pub listen_notify_interval: Option<Duration>,
}

impl Default for ServerBehaviour {
    /// Progress at most every second, keep-alives after 15 s of quiet, plain SSE; ten-minute
    /// tasks polled every two seconds; a tool-list change every 20 s.
    fn default() -> Self {
        ServerBehaviour {
            progress_min_interval: Duration::from_secs(1),
            keepalive_interval: Some(Duration::from_secs(15)),
            response_mode: ResponseMode::Sse,
            sse_style: SseStyle::Plain,
            task_ttl: Duration::from_secs(600),
            poll_interval: Duration::from_secs(2),
            listen_notify_interval: Some(Duration::from_secs(20)),
        }
    }
}

/// Server configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerConfig {
    /// The transport.
    pub transport: Transport,
    /// Behaviour knobs.
    pub behaviour: ServerBehaviour,
    /// Faulty behaviours switched on (none for the reference server).
    pub mutants: MutantSet,
    /// The protocol eras it speaks.
    pub eras: ServerEras,
    /// Bounds on what legacy clients hold open over HTTP (none by default).
    pub limits: SessionLimits,
}

impl ServerConfig {
    /// The default behaviour on `transport`, in both eras.
    pub fn new(transport: Transport) -> Self {
        ServerConfig {
            transport,
            behaviour: ServerBehaviour::default(),
            mutants: MutantSet::NONE,
            eras: ServerEras::Both,
            limits: SessionLimits::default(),
        }
    }
}

/// A tool call in progress.
#[derive(Debug, Clone)]
struct Job {
    stream: Option<StreamId>,
    token: Option<ProgressToken>,
    steps: u32,
    step: Duration,
    done: u32,
    next_step_at: Time,
    last_progress_at: Option<Time>,
    last_write: Time,
    /// The task this job's work is for (its call was answered with a `CreateTaskResult`).
    task: Option<String>,
    /// The call's `call` argument, echoed in the result.
    call_tag: Option<String>,
    /// Legacy era: the server's own `sampling/createMessage` for this call, not yet
    /// answered, and when the server gives up on it.
    sampling: Option<(RequestId, Time)>,
}

/// How long the server waits for the client's answer to its `sampling/createMessage` before
/// it cancels the request.
pub const SAMPLING_TIMEOUT: Duration = Duration::from_secs(20);

/// An open `subscriptions/listen` request.
#[derive(Debug, Clone)]
struct Listen {
    stream: Option<StreamId>,
    filter: Map<String, Value>,
    last_write: Time,
    next_notify: Option<Time>,
}

/// The reference server. See the module docs.
#[derive(Debug, Clone)]
pub struct Server {
    config: ServerConfig,
    jobs: BTreeMap<JobKey, Job>,
    listens: BTreeMap<JobKey, Listen>,
    tasks: TaskStore,
    /// A request on this connection declared the Tasks extension (only the faulty server of
    /// [`Mutant::CapabilitiesRemembered`] looks).
    tasks_declared: bool,
    /// Requests already answered (what a racing cancel can still name).
    answered: BTreeSet<JobKey>,
    /// HTTP streams answered with `text/event-stream` and not yet ended.
    open_sse: BTreeSet<StreamId>,
    transmits: VecDeque<ServerTransmit>,
    backend: VecDeque<BackendCall>,
    /// Which era each request is read and answered in, and the legacy connections' state
    /// ([`super::server_eras`]).
    seam: EraSeam,
    /// Calls whose cancel the faulty server of [`Mutant::LegacyIgnoresCancel`] read and ignored.
    cancel_ignored: BTreeSet<JobKey>,
    /// The listening `GET` stream the faulty server of [`Mutant::ProgressOnGetStream`] keeps.
    listening: Option<StreamId>,
    /// When this server process started: session ids name it, so that a restarted server
    /// never issues an id it issued before.
    started: Time,
    /// How many requests of its own this server sent (their ids are `s-N`).
    own_requests: u64,
}

impl Server {
    /// A server with nothing in progress.
    pub fn new(config: ServerConfig) -> Self {
        Server {
            config,
            jobs: BTreeMap::new(),
            listens: BTreeMap::new(),
            tasks: TaskStore::default(),
            tasks_declared: false,
            answered: BTreeSet::new(),
            open_sse: BTreeSet::new(),
            transmits: VecDeque::new(),
            backend: VecDeque::new(),
            seam: EraSeam::new(config.eras, config.limits, config.transport, config.mutants),
            cancel_ignored: BTreeSet::new(),
            listening: None,
            started: Time::ZERO,
            own_requests: 0,
        }
    }

    /// The same server, as a process started at `t` (its session ids say so).
    pub fn started_at(mut self, t: Time) -> Self {
        self.started = t;
        self
    }

    /// The stdio pipe's era, once its first request decided it (over HTTP each request
    /// has its own: [`Self::admit`]).
    pub fn era(&self) -> Option<Era> {
        self.seam.pipe_era()
    }

    /// The era a message on `stream` (`None`: the pipe) is read in, as decided so far.
    fn legacy_on(&self, stream: Option<StreamId>) -> bool {
        self.seam.era_on(stream).is_legacy()
    }

    /// The key of request `id` arriving on `stream`.
    fn key(&self, stream: Option<StreamId>, id: RequestId) -> JobKey {
        JobKey {
            scope: self.seam.scope(stream),
            id,
        }
    }

    /// HTTP: a request opened `stream` with this head. Decides the era its body is read in,
    /// or refuses it before anything else: an unknown session (404), a legacy request
    /// without its session (400), a `GET` or `DELETE` outside a session (405); see
    /// [`super::server_eras`]. `post`: a `POST` (else a `GET` or `DELETE`).
    pub fn admit(&mut self, stream: StreamId, post: bool, head: RequestHead<'_>) -> Admission {
        if post {
            return self.seam.admit_post(stream, head);
        }
        Admission {
            era: Era::LEGACY,
            refusal: self.seam.admit_open(stream, head.session),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Number of tool calls in progress.
    pub fn active_jobs(&self) -> usize {
        self.jobs.len()
    }

    /// A message arrived: on the pipe (stdio, `stream` is `None`) or as the body of the POST
    /// that opened `stream`.
    pub fn handle_message(&mut self, now: Time, stream: Option<StreamId>, msg: Message) {
        match msg {
            Message::Result(_) | Message::Error(_) => self.handle_answer(stream, msg),
            Message::Request(r) => self.handle_request(now, stream, r),
            Message::Cancelled(c) => {
                if let Some(s) = stream {
                    // 2026-07-28's HTTP defines no client notifications: accept the POST, act
                    // on nothing. The legacy era cancels by this very POST.
                    self.transmits
                        .push_back(ServerTransmit::Accepted { stream: s });
                    if self.legacy_on(stream) {
                        let key = self.key(stream, c.request_id);
                        self.cancel_notification(&key);
                    }
                } else {
                    let key = self.key(None, c.request_id);
                    self.cancel_notification(&key);
                }
            }
            // Client progress is not a 2026-07-28 message and responses never come from a
            // client; a notification is never answered, whatever it is (§8).
            Message::Progress(_) | Message::Notification(_) => {
                if let Some(s) = stream {
                    self.transmits
                        .push_back(ServerTransmit::Accepted { stream: s });
                }
            }
        }
    }

    /// A response from the client: in the legacy era the answer to a request of the
    /// server's own (a POST of its own over HTTP, answered 202); 2026-07-28 clients send none.
    fn handle_answer(&mut self, stream: Option<StreamId>, msg: Message) {
        if self.legacy_on(stream) {
            if let Some(id) = msg.id() {
                for job in self.jobs.values_mut() {
                    if job.sampling.as_ref().is_some_and(|(s, _)| s == id) {
                        job.sampling = None;
                    }
                }
            }
            if let Some(s) = stream {
                self.transmits
                    .push_back(ServerTransmit::Accepted { stream: s });
            }
            return;
        }
        if let Some(s) = stream {
            let e = ErrorResponse::new(
                None,
                codes::INVALID_REQUEST,
                "clients do not send responses",
            );
            self.transmits.push_back(ServerTransmit::Json {
                stream: s,
                status: 400,
                msg: e.into(),
                session: None,
            });
        }
    }

    /// Legacy era: asks the client for a `sampling/createMessage` on the call's stream (on
    /// stdio, the pipe); its id and when the server gives up on it.
    fn ask_to_sample(&mut self, now: Time, stream: Option<StreamId>) -> (RequestId, Time) {
        self.own_requests += 1;
        // Named by the process's start too, so that a restarted server never reuses an id.
        let id = RequestId::String(format!(
            "s-{}-{}",
            self.started.as_millis(),
            self.own_requests
        ));
        let mut r = Request::new(id.clone(), "sampling/createMessage");
        r.meta.legacy = true;
        r.params.insert(
            "messages".into(),
            json!([{"role": "user", "content": {"type": "text", "text": "Summarise the step."}}]),
        );
        r.params.insert("maxTokens".into(), json!(16));
        self.send(stream, r.into());
        (id, now + SAMPLING_TIMEOUT)
    }

    /// Cancels the server's own request of `job`, if one is outstanding: the notification
    /// goes where the request went (docs/spec/mcp-2025-11-25.md LC9).
    fn cancel_sampling(&mut self, job: &mut Job, reason: &str) {
        let Some((id, _)) = job.sampling.take() else {
            return;
        };
        let writable = job.stream.is_none_or(|s| self.open_sse.contains(&s));
        if writable {
            let mut c = crate::wire::Cancelled::new(id);
            c.reason = Some(reason.to_owned());
            self.send(job.stream, c.into());
        }
    }

    /// Bytes arrived that do not decode. A request whose id could be read is answered with an
    /// error carrying it; unreadable JSON gets -32700 without id; anything else may have been a
    /// notification and is not answered on stdio (§8). An HTTP POST always gets a response.
    pub fn handle_invalid(&mut self, _now: Time, stream: Option<StreamId>, err: &DecodeError) {
        let code = err.jsonrpc_code();
        let answer = err.id.is_some() || code == codes::PARSE_ERROR || stream.is_some();
        if !answer {
            return;
        }
        let msg = ErrorResponse::new(err.id.clone(), code, err.to_string());
        self.respond(stream, msg.into(), 400);
    }

    /// HTTP: the POST on `stream` carried `request` with headers that are missing or differ
    /// from its body (`wire::http::header_mismatch`): it is refused with 400 and -32020, and not
    /// served (§5.2, §8).
    pub fn handle_header_mismatch(
        &mut self,
        now: Time,
        stream: StreamId,
        request: Request,
        reason: &str,
    ) {
        if self.mutant(Mutant::ServesMismatchedHeaders) {
            return self.handle_message(now, Some(stream), request.into());
        }
        let code = if self.mutant(Mutant::HeaderMismatchInvalidRequest) {
            codes::INVALID_REQUEST
        } else {
            codes::HEADER_MISMATCH
        };
        let e = ErrorResponse::new(Some(request.id), code, reason);
        self.respond(Some(stream), e.into(), 400);
    }

    /// HTTP: the client closed `stream` or the connection dropped. That is the cancellation
    /// of its request (§3.2).
    pub fn handle_stream_closed(&mut self, now: Time, stream: StreamId) {
        self.seam.stream_gone(stream);
        // A legacy stream that breaks is detached, not ended: its request goes on and what it
        // writes waits for a resume (LC11, LB8).
        if let Some(r) = self.seam.resumable(stream) {
            if r.broke(stream) {
                if self.mutant(Mutant::LegacyDisconnectCancels) {
                    self.cancel_on_stream(stream);
                }
                return;
            }
        }
        self.open_sse.remove(&stream);
        if let Some(id) = self.job_on(stream) {
            if self.mutant(Mutant::WriteAfterClosePanics) {
                panic!("ClosedResourceError: the client went away during {}", id.id);
            }
            // In the legacy era a disconnect is not a cancel (LC11): the work goes on.
            if !self.mutant(Mutant::HandlerSurvivesDisconnect) && !self.legacy_on(Some(stream)) {
                self.cancel(&id);
            }
        }
        self.listens.retain(|_, l| l.stream != Some(stream));
        if self.mutant(Mutant::TaskCancelledOnDisconnect) {
            self.cancel_every_task(now);
        }
    }

    /// The tool call answering on `stream`, if one is.
    fn job_on(&self, stream: StreamId) -> Option<JobKey> {
        self.jobs
            .iter()
            .find(|(_, j)| j.stream == Some(stream))
            .map(|(id, _)| id.clone())
    }

    /// The faulty legacy server's reading of a broken stream: the work on it stops.
    fn cancel_on_stream(&mut self, stream: StreamId) {
        if let Some(id) = self.job_on(stream) {
            self.cancel(&id);
        }
    }

    /// stdio: the client closed the pipe. Everything in progress is abandoned.
    /// Tasks run on: they outlive connections (§7.3).
    pub fn handle_disconnect(&mut self, now: Time) {
        // The client that was asked is gone with the pipe: nothing to cancel.
        for job in self.jobs.values_mut() {
            job.sampling = None;
        }
        let ids: Vec<JobKey> = self
            .jobs
            .iter()
            .filter(|(k, j)| j.task.is_none() && k.scope == Scope::Pipe)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.cancel(&id);
        }
        if self.mutant(Mutant::TaskCancelledOnDisconnect) {
            self.cancel_every_task(now);
        }
        self.listens.clear();
        self.open_sse.clear();
        // The next stdio connection decides its own era.
        self.seam.pipe_closed();
    }

    fn handle_request(&mut self, now: Time, stream: Option<StreamId>, r: Request) {
        // A 2026-07-28 request for `initialize` names a method that revision removed.
        if r.method == "initialize" && r.meta.legacy {
            return self.initialize(stream, r);
        }
        let legacy_only = matches!(self.config.eras, ServerEras::LegacyOnly { .. });
        if legacy_only && r.method == "server/discover" {
            return self.refuse_discover(stream, r);
        }
        let era = self.seam.request_era(stream, r.meta.legacy);
        if era.is_legacy() && r.method == "ping" && self.mutant(Mutant::PingUnanswered) {
            return;
        }
        if era.is_legacy() && r.method == "ping" {
            let pong = ResultResponse {
                id: r.id,
                result_type: None,
                result: Map::new(),
            };
            return self.respond(stream, pong.into(), 200);
        }
        if !r.meta.legacy && r.meta.protocol_version != PROTOCOL_VERSION {
            let mut e = ErrorResponse::new(
                Some(r.id),
                codes::UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
            );
            e.error.data = Some(
                json!({"supported": [PROTOCOL_VERSION], "requested": r.meta.protocol_version}),
            );
            return self.respond(stream, e.into(), 400);
        }
        let key = self.key(stream, r.id.clone());
        if self.jobs.contains_key(&key) || self.listens.contains_key(&key) {
            let e = ErrorResponse::new(
                Some(r.id),
                codes::INVALID_REQUEST,
                "request id is already in use",
            );
            return self.respond(stream, e.into(), 400);
        }
        match &*r.method {
            METHOD_TOOLS_CALL => self.start_tool(now, stream, r),
            METHOD_LISTEN => self.start_listen(now, stream, r),
            METHOD_TASKS_GET | METHOD_TASKS_CANCEL | METHOD_TASKS_UPDATE => {
                self.task_request(now, stream, r)
            }
            "server/discover" => {
                let mut res = ResultResponse::complete(r.id);
                res.result
                    .insert("supportedVersions".into(), json!([PROTOCOL_VERSION]));
                res.result.insert(
                    "capabilities".into(),
                    json!({"tools": {}, "extensions": {EXTENSION_TASKS: {}}}),
                );
                // Freshness hints of the discover result; rmcp refuses a result without them.
                res.result.insert("ttlMs".into(), json!(0));
                res.result.insert("cacheScope".into(), json!("private"));
                res.result.insert("_meta".into(), server_info());
                self.respond(stream, res.into(), 200);
            }
            "tools/list" => {
                let mut res = ResultResponse::complete(r.id);
                let tool = json!({"name": SLOW_TOOL, "description": "Timed work with progress",
                    "inputSchema": {"type": "object", "properties": {"steps": {"type": "integer"}, "step_ms": {"type": "integer"}}}});
                res.result.insert("tools".into(), json!([tool]));
                // A cacheable result's freshness hints, as on discover (the Python SDK
                // refuses a list without them).
                res.result.insert("ttlMs".into(), json!(0));
                res.result.insert("cacheScope".into(), json!("private"));
                self.respond(stream, res.into(), 200);
            }
            _ => {
                let e = ErrorResponse::new(
                    Some(r.id),
                    codes::METHOD_NOT_FOUND,
                    format!("unknown method {}", r.method),
                );
                self.respond(stream, e.into(), 404);
            }
        }
    }

    /// The legacy handshake: the version the client asked for when it is a legacy one, else
    /// the newest legacy revision (version negotiation, docs/spec/mcp-2025-11-25.md §2).
    fn initialize(&mut self, stream: Option<StreamId>, r: Request) {
        if self.config.eras == ServerEras::ModernOnly {
            let mut e = ErrorResponse::new(
                Some(r.id),
                codes::UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version: this server speaks 2026-07-28 only",
            );
            let asked = r.params.get("protocolVersion").cloned();
            e.error.data = Some(json!({"supported": [PROTOCOL_VERSION], "requested": asked}));
            return self.respond(stream, e.into(), 400);
        }
        if let Some(refusal) = stream.and(self.seam.session_refusal()) {
            let e = ErrorResponse::new(Some(r.id), codes::INVALID_REQUEST, refusal.why);
            return self.respond(stream, e.into(), refusal.status);
        }
        let asked = r.params.get("protocolVersion").and_then(Value::as_str);
        let era = asked
            .and_then(Era::from_version)
            .filter(|e| e.is_legacy())
            .unwrap_or(Era::LEGACY);
        let samples = r
            .params
            .get("capabilities")
            .and_then(|c| c.get("sampling"))
            .is_some();
        let session = self.seam.open_legacy(stream, era, samples, self.started);
        let mut res = ResultResponse::complete(r.id);
        res.result_type = None;
        res.result
            .insert("protocolVersion".into(), json!(era.version()));
        res.result
            .insert("capabilities".into(), json!({"tools": {}}));
        res.result.insert(
            "serverInfo".into(),
            json!({"name": "mcp-sim-server", "version": env!("CARGO_PKG_VERSION")}),
        );
        self.respond(stream, res.into(), 200);
        if let Some(ServerTransmit::Json {
            session: header, ..
        }) = self.transmits.back_mut()
        {
            *header = session;
        }
    }

    /// HTTP: the request (`id`, if it had one) or `GET` on `stream` is refused with `status`
    /// and -32600: the legacy era's unknown or missing session, or a `GET` with nothing to
    /// resume.
    pub fn refuse(&mut self, stream: StreamId, id: Option<RequestId>, status: u16, why: &str) {
        let e = ErrorResponse::new(id, codes::INVALID_REQUEST, why);
        self.transmits.push_back(ServerTransmit::Json {
            stream,
            status,
            msg: e.into(),
            session: None,
        });
    }

    /// HTTP, legacy era: a `GET` opened `stream`, resuming after `last_event_id` when it has
    /// one. A resume replays what the broken stream missed and carries the rest of it; a
    /// `GET` that resumes nothing this server kept is answered 404, and one without
    /// `Last-Event-ID` 405 (the reference server offers no stream of its own).
    pub fn handle_get(&mut self, _now: Time, stream: StreamId, last_event_id: Option<&str>) {
        let listens = self.mutant(Mutant::ProgressOnGetStream);
        let resumed = match (self.seam.resumable(stream), last_event_id) {
            (Some(r), Some(last)) => {
                let resumed = r.resume(stream, last).is_some();
                self.seam.flush(stream);
                resumed
            }
            // The faulty server keeps a listening stream, and writes progress to it.
            (Some(_), None) if listens => {
                self.listening = Some(stream);
                self.sse_start(stream);
                true
            }
            _ => false,
        };
        if !resumed {
            let (status, why) = match last_event_id {
                Some(last) => (404, format!("no stream to resume after event {last}")),
                None => (405, "this server offers no GET stream".to_owned()),
            };
            self.refuse(stream, None, status, &why);
        }
    }

    /// HTTP, legacy era: the client ended its session with a `DELETE` on `stream` (its
    /// session id checked by the lane). The session is forgotten, so a later request in it
    /// is answered 404 (docs/spec/mcp-2025-11-25.md §5); a listening stream ends with it.
    /// Work in flight goes on: its streams are open and each still ends with its response.
    pub fn handle_delete(&mut self, _now: Time, stream: StreamId) {
        self.seam.end_session(stream);
        if let Some(listening) = self.listening.take() {
            self.transmits
                .push_back(ServerTransmit::SseEnd { stream: listening });
        }
        self.transmits
            .push_back(ServerTransmit::Accepted { stream });
    }

    /// A legacy-only server's answer to `server/discover` (see [`ServerEras::LegacyOnly`]).
    fn refuse_discover(&mut self, stream: Option<StreamId>, r: Request) {
        if let ServerEras::LegacyOnly {
            ignores_discover: true,
        } = self.config.eras
        {
            return;
        }
        match stream {
            Some(stream) if !self.seam.in_session(stream) => {
                let e = ErrorResponse::new(
                    None,
                    codes::SERVER_NOT_INITIALIZED,
                    "Bad Request: Server not initialized",
                );
                self.transmits.push_back(ServerTransmit::Json {
                    stream,
                    status: 400,
                    msg: e.into(),
                    session: None,
                });
            }
            _ => {
                let e = ErrorResponse::new(Some(r.id), codes::METHOD_NOT_FOUND, "Method not found");
                self.respond(stream, e.into(), 200);
            }
        }
    }

    fn start_tool(&mut self, now: Time, stream: Option<StreamId>, r: Request) {
        let name = r.params.get("name").and_then(Value::as_str);
        let arguments = r.params.get("arguments").cloned().unwrap_or(json!({}));
        let args = arguments.as_object();
        let arg = |key: &str, default: u64| {
            args.and_then(|a| a.get(key))
                .map_or(Some(default), Value::as_u64)
        };
        let parsed = (
            name,
            arg("steps", 3),
            arg("step_ms", 1000),
            arg("input_rounds", 0),
        );
        let (steps, step_ms, rounds) = match parsed {
            (Some(SLOW_TOOL), Some(steps), Some(step_ms), Some(rounds))
                if steps <= MAX_STEPS && rounds <= MAX_INPUT_ROUNDS =>
            {
                (steps as u32, step_ms, rounds)
            }
            _ => {
                let e = ErrorResponse::new(Some(r.id), codes::INVALID_PARAMS, format!("unknown tool or bad arguments; call {SLOW_TOOL} with integer steps, step_ms and input_rounds"));
                return self.respond(stream, e.into(), 200);
            }
        };
        let remembered = self.tasks_declared && self.mutant(Mutant::CapabilitiesRemembered);
        self.tasks_declared |= r.declares_tasks();
        let wants_task =
            r.declares_tasks() || remembered || self.mutant(Mutant::TaskWithoutNegotiation);
        if args.and_then(|a| a.get("task")) == Some(&json!("required")) && !wants_task {
            let mut e = ErrorResponse::new(
                Some(r.id),
                codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
                "this tool runs only as a task: declare the Tasks extension",
            );
            e.error.data =
                Some(json!({"requiredCapabilities": {"extensions": {EXTENSION_TASKS: {}}}}));
            return self.respond(stream, e.into(), 400);
        }
        // Multi round-trip: the rounds answered so far are vouched for by the requestState the
        // client echoed; the server itself remembers nothing between rounds (§6, §7.2).
        let answered = match r.params.get("requestState") {
            None => 0,
            Some(state) => match state.as_str().and_then(|s| verify_state(s, &arguments)) {
                Some(round) => round,
                None => {
                    let e = ErrorResponse::new(
                        Some(r.id),
                        codes::INVALID_PARAMS,
                        "requestState was not written by this server for these arguments",
                    );
                    return self.respond(stream, e.into(), 400);
                }
            },
        };
        if answered < rounds {
            return self.ask_for_input(stream, &r, answered + 1, &arguments);
        }
        let key = self.key(stream, r.id.clone());
        let task = wants_task.then(|| self.tasks.create(now, key.clone()));
        let mut stream_of_job = stream;
        let mut token = r.meta.progress_token;
        if let Some(task_id) = &task {
            let fields = self.task_fields(task_id);
            let created = result_of(r.id.clone(), ResultType::Task, fields);
            if self.mutant(Mutant::TaskProgressAfterCreate) {
                // The 2025-11-25 reading: the token stays live for the task's life, so the
                // result is written as one more event and the stream is held open.
                if let (Some(s), ResponseMode::Sse) = (stream, self.config.behaviour.response_mode)
                {
                    self.sse_start(s);
                }
                self.send(stream, created.into());
            } else {
                self.respond(stream, created.into(), 200);
                stream_of_job = None;
                token = None;
            }
            self.answered.insert(key.clone());
        } else if let (Some(s), ResponseMode::Sse) = (stream, self.config.behaviour.response_mode) {
            self.sse_start(s);
        }
        let step = Duration::from_millis(step_ms);
        let samples = args.and_then(|a| a.get("sample")) == Some(&json!(true));
        let can_ask = stream_of_job.is_none_or(|s| self.open_sse.contains(&s));
        let sampling = (samples && self.legacy_on(stream) && self.seam.samples(stream) && can_ask)
            .then(|| self.ask_to_sample(now, stream_of_job));
        let job = Job {
            stream: stream_of_job,
            token,
            steps,
            step,
            done: 0,
            next_step_at: now + step,
            last_progress_at: None,
            last_write: now,
            task,
            call_tag: args.and_then(|a| a.get(CALL_TAG)).map(|c| match c {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            sampling,
        };
        if steps > 0 {
            self.backend.push_back(BackendCall::Work {
                request: r.id.clone(),
                step: 0,
            });
        }
        self.jobs.insert(key.clone(), job);
        if steps == 0 {
            self.complete(now, &key);
        }
    }

    /// Ends the call with an `InputRequiredResult` for `round` (§7.2).
    fn ask_for_input(
        &mut self,
        stream: Option<StreamId>,
        r: &Request,
        round: u64,
        arguments: &Value,
    ) {
        let mut fields = Map::new();
        if !self.mutant(Mutant::InputRequiredWithoutState) {
            let ask = json!({"method": "elicitation/create", "params": {
                "message": format!("confirm round {round}"),
                "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}});
            fields.insert("inputRequests".into(), json!({ "confirm": ask }));
            fields.insert(
                "requestState".into(),
                json!(request_state(round, arguments)),
            );
        }
        let res = result_of(r.id.clone(), ResultType::InputRequired, fields);
        if let (Some(token), true) = (
            r.progress_token(),
            self.mutant(Mutant::ProgressAfterInputRequired),
        ) {
            // The handler keeps reporting after it asked for input; on HTTP it holds the
            // stream open for that.
            if let (Some(s), ResponseMode::Sse) = (stream, self.config.behaviour.response_mode) {
                self.sse_start(s);
            }
            self.send(stream, res.into());
            self.send(stream, Progress::new(token.clone(), 1.0).into());
            if let Some(s) = stream.filter(|s| self.open_sse.remove(s)) {
                self.transmits
                    .push_back(ServerTransmit::SseEnd { stream: s });
            }
        } else {
            self.respond(stream, res.into(), 200);
        }
        let key = self.key(stream, r.id.clone());
        self.answered.insert(key);
    }

    fn task_fields(&self, id: &str) -> Map<String, Value> {
        let b = &self.config.behaviour;
        self.tasks
            .get(id)
            .map(|t| task_fields(id, t, b.task_ttl, b.poll_interval))
            .unwrap_or_default()
    }

    /// `tasks/get`, `tasks/cancel` and `tasks/update` (§7.3). An unknown or expired task is
    /// -32602; so is a cancel of a task already ended (conformance `tasks-lifecycle`).
    fn task_request(&mut self, now: Time, stream: Option<StreamId>, r: Request) {
        let task_id = r.params.get("taskId").and_then(Value::as_str);
        let Some(task_id) = task_id.filter(|id| self.tasks.get(id).is_some()) else {
            if let (Some(id), true) = (task_id, self.mutant(Mutant::UnknownTaskWorking)) {
                let fields = json!({"taskId": id, "status": "working"});
                let fields = fields.as_object().cloned().unwrap_or_default();
                let res = result_of(r.id, ResultType::Complete, fields);
                return self.respond(stream, res.into(), 200);
            }
            let e = ErrorResponse::new(
                Some(r.id),
                codes::INVALID_PARAMS,
                "unknown or expired taskId",
            );
            return self.respond(stream, e.into(), 400);
        };
        let task_id = task_id.to_owned();
        let status = self.tasks.get(&task_id).map(|t| t.status);
        let answer = match &*r.method {
            METHOD_TASKS_GET => {
                let mut fields = self.task_fields(&task_id);
                if let Some(result) = self.tasks.get(&task_id).and_then(|t| t.result.clone()) {
                    fields.insert("result".into(), Value::Object(result));
                }
                result_of(r.id, ResultType::Complete, fields)
            }
            METHOD_TASKS_CANCEL if status.is_some_and(TaskStatus::is_terminal) => {
                let e = ErrorResponse::new(Some(r.id), codes::INVALID_PARAMS, "the task has ended");
                return self.respond(stream, e.into(), 400);
            }
            METHOD_TASKS_CANCEL => {
                self.cancel_task(now, &task_id);
                let fields = if self.mutant(Mutant::CancelAckIsTask) {
                    self.task_fields(&task_id)
                } else {
                    Map::new()
                };
                result_of(r.id, ResultType::Complete, fields)
            }
            // Input during a task: the reference server never asks for any, so an update is
            // acknowledged and changes nothing (eventually consistent, §7.3).
            _ => result_of(r.id, ResultType::Complete, Map::new()),
        };
        self.respond(stream, answer.into(), 200);
    }

    /// `tasks/cancel` reached a working task: it ends `cancelled` and its work stops. The
    /// faulty store marks it cancelled but lets the work finish and overwrite the state.
    fn cancel_task(&mut self, now: Time, task_id: &str) {
        let Some(task) = self.tasks.get_mut(task_id) else {
            return;
        };
        task.status = TaskStatus::Cancelled;
        task.updated = now;
        let origin = task.origin.clone();
        if !self.mutant(Mutant::TaskTerminalChanges) {
            self.cancel(&origin);
        }
    }

    /// The faulty server of [`Mutant::TaskCancelledOnDisconnect`]: a connection's end takes
    /// every working task with it.
    fn cancel_every_task(&mut self, now: Time) {
        let working: Vec<String> = self.jobs.values().filter_map(|j| j.task.clone()).collect();
        for id in working {
            self.cancel_task(now, &id);
        }
    }

    fn start_listen(&mut self, now: Time, stream: Option<StreamId>, r: Request) {
        let filter = r
            .params
            .get("notifications")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(s) = stream {
            self.sse_start(s);
        }
        let mut params = Map::new();
        params.insert("notifications".into(), Value::Object(filter.clone()));
        params.insert(
            "_meta".into(),
            json!({ META_SUBSCRIPTION_ID: r.id.to_json() }),
        );
        let ack = Notification {
            method: METHOD_SUBSCRIPTIONS_ACKNOWLEDGED.into(),
            params: Some(params),
        };
        self.send(stream, ack.into());
        let wants_changes = filter.get("toolsListChanged") == Some(&Value::Bool(true))
            || self.mutant(Mutant::ListenUnfiltered);
        let next_notify = self
            .config
            .behaviour
            .listen_notify_interval
            .filter(|_| wants_changes)
            .map(|d| now + d);
        let listen = Listen {
            stream,
            filter,
            last_write: now,
            next_notify,
        };
        let key = self.key(stream, r.id);
        self.listens.insert(key, listen);
    }

    /// The tool list changed: notify every listen that opted into `toolsListChanged`.
    pub fn notify_tools_changed(&mut self, now: Time) {
        let targets: Vec<JobKey> = self
            .listens
            .iter()
            .filter(|(_, l)| {
                l.filter.get("toolsListChanged") == Some(&Value::Bool(true))
                    || self.mutant(Mutant::ListenUnfiltered)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in targets {
            self.notify_listen(now, &id);
        }
    }

    /// One `notifications/tools/list_changed` on subscription `id`, tagged with it.
    fn notify_listen(&mut self, now: Time, key: &JobKey) {
        let id = &key.id;
        let Some(listen) = self.listens.get_mut(key) else {
            return;
        };
        listen.last_write = now;
        let stream = listen.stream;
        let mut params = Map::new();
        if !self.config.mutants.has(Mutant::ListenUntagged) {
            params.insert(
                "_meta".into(),
                json!({ META_SUBSCRIPTION_ID: id.to_json() }),
            );
        }
        let n = Notification {
            method: "notifications/tools/list_changed".into(),
            params: Some(params),
        };
        self.send(stream, n.into());
    }

    /// Ends every subscription gracefully: a `complete` result tagged with its id, then the
    /// stream ends (§7.1).
    pub fn shutdown(&mut self, _now: Time) {
        for (JobKey { id, .. }, listen) in std::mem::take(&mut self.listens) {
            let mut res = ResultResponse::complete(id.clone());
            res.result.insert(
                "_meta".into(),
                json!({ META_SUBSCRIPTION_ID: id.to_json() }),
            );
            self.respond(listen.stream, res.into(), 200);
        }
    }

    fn mutant(&self, m: Mutant) -> bool {
        self.config.mutants.has(m)
    }

    /// A stdio `notifications/cancelled` arrived. Unknown and finished ids are ignored.
    fn cancel_notification(&mut self, key: &JobKey) {
        let id = &key.id;
        let known = self.jobs.contains_key(key) || self.listens.contains_key(key);
        if self.mutant(Mutant::CancelCompleteRacePanics) && self.answered.contains(key) {
            panic!("Request already responded to: {id}");
        }
        if self.mutant(Mutant::CrashOnCancelNotification) && !known {
            panic!("cannot validate notifications/cancelled for unknown request {id}");
        }
        if self.mutant(Mutant::IgnoreCancel) {
            return;
        }
        if self.mutant(Mutant::LegacyIgnoresCancel) {
            // The work and its progress go on; the SDK under it drops the result.
            if self.jobs.contains_key(key) {
                self.cancel_ignored.insert(key.clone());
            }
            return;
        }
        if !known && self.mutant(Mutant::AnswersNotifications) {
            let e = ErrorResponse::new(None, codes::METHOD_NOT_FOUND, "Method not found");
            self.transmits.push_back(ServerTransmit::Line(e.into()));
            return;
        }
        // A task is not cancelled this way (§7.3): its call is over, the cancel names nothing.
        if self.jobs.get(key).is_some_and(|j| j.task.is_some()) {
            return;
        }
        if self.listens.contains_key(key) && self.mutant(Mutant::ListenIgnoresCancel) {
            return;
        }
        let stream = self.jobs.get(key).and_then(|j| j.stream);
        let had_job = self.jobs.contains_key(key);
        self.cancel(key);
        let answers =
            self.mutant(Mutant::RespondAfterCancel) || self.mutant(Mutant::LegacyCancelAnswered);
        if had_job && answers {
            let e = ErrorResponse::new(Some(id.clone()), 0, "Request cancelled");
            self.respond(stream, e.into(), 200);
        }
    }

    /// Stops a request: nothing more is sent for it and its resource is released.
    fn cancel(&mut self, key: &JobKey) {
        let id = &key.id;
        if let Some(mut job) = self.jobs.remove(key) {
            self.cancel_sampling(&mut job, "the call was cancelled");
            self.backend.push_back(BackendCall::Release {
                request: id.clone(),
            });
            let answers = self.mutant(Mutant::RespondAfterCancel)
                || self.mutant(Mutant::LegacyCancelAnswered);
            if let (Some(stream), true) = (job.stream, answers) {
                let e = ErrorResponse::new(Some(id.clone()), 0, "Request cancelled");
                self.respond(Some(stream), e.into(), 200);
            }
        }
        self.listens.remove(key);
    }

    fn complete(&mut self, now: Time, key: &JobKey) {
        let id = &key.id;
        let Some(mut job) = self.jobs.remove(key) else {
            return;
        };
        self.cancel_sampling(&mut job, "the tool finished without it");
        let mut res = ResultResponse::complete(id.clone());
        res.result.insert(
            "content".into(),
            json!([{"type": "text", "text": match &job.call_tag {
                Some(call) => format!("done: {} steps (call {call})", job.steps),
                None => format!("done: {} steps", job.steps),
            }}]),
        );
        res.result.insert("_meta".into(), server_info());
        if let Some(task_id) = &job.task {
            let overwrite = self.mutant(Mutant::TaskTerminalChanges);
            if let Some(task) = self.tasks.get_mut(task_id) {
                if task.status == TaskStatus::Working || overwrite {
                    task.status = TaskStatus::Completed;
                    task.updated = now;
                    let mut result = res.result.clone();
                    result.insert("resultType".into(), json!("complete"));
                    task.result = Some(result);
                }
            }
            // The 2025-11-25 reading held the call's stream open until the task ended.
            if let Some(s) = job.stream.filter(|s| self.open_sse.remove(s)) {
                self.transmits
                    .push_back(ServerTransmit::SseEnd { stream: s });
            }
        } else if self.cancel_ignored.remove(key) {
            if let Some(s) = job.stream.filter(|s| self.open_sse.remove(s)) {
                self.transmits
                    .push_back(ServerTransmit::SseEnd { stream: s });
            }
        } else {
            self.respond(job.stream, res.into(), 200);
            self.answered.insert(key.clone());
        }
        if let (Some(token), true) = (&job.token, self.mutant(Mutant::ProgressAfterCompletion)) {
            let mut p = Progress::new(token.clone(), f64::from(job.done) + 1.0);
            p.total = Some(f64::from(job.steps));
            self.send(job.stream, p.into());
        }
        if job.steps > 0 {
            self.backend.push_back(BackendCall::Release {
                request: id.clone(),
            });
        }
    }

    /// Sends a final response: a line, the last SSE event then the end of the stream, or a
    /// JSON body with `status`.
    fn respond(&mut self, stream: Option<StreamId>, msg: Message, status: u16) {
        match stream {
            None => self.transmits.push_back(ServerTransmit::Line(msg)),
            Some(s) if self.open_sse.remove(&s) => {
                self.transmits.push_back(ServerTransmit::SseEvent {
                    stream: s,
                    msg,
                    event_id: None,
                });
                self.transmits
                    .push_back(ServerTransmit::SseEnd { stream: s });
            }
            Some(s) => self.transmits.push_back(ServerTransmit::Json {
                stream: s,
                status,
                msg,
                session: None,
            }),
        }
    }

    fn sse_start(&mut self, stream: StreamId) {
        self.open_sse.insert(stream);
        self.transmits
            .push_back(ServerTransmit::SseStart { stream });
    }

    /// Sends a non-final message for an open request.
    fn send(&mut self, stream: Option<StreamId>, msg: Message) {
        self.transmits.push_back(match stream {
            None => ServerTransmit::Line(msg),
            Some(s) => ServerTransmit::SseEvent {
                stream: s,
                msg,
                event_id: None,
            },
        });
    }

    /// The next step, progress, keep-alive, subscription notice or task expiry deadline.
    pub fn poll_timeout(&self) -> Option<Time> {
        let keepalive = self.keepalive_interval();
        let jobs = self.jobs.values().flat_map(|j| {
            let ka = keepalive
                .filter(|_| j.stream.is_some())
                .map(|k| j.last_write + k);
            let sampling = j.sampling.as_ref().map(|(_, at)| *at);
            std::iter::once(j.next_step_at).chain(ka).chain(sampling)
        });
        let listens = self.listens.values().flat_map(|l| {
            let ka = keepalive
                .filter(|_| l.stream.is_some())
                .map(|k| l.last_write + k);
            l.next_notify.into_iter().chain(ka)
        });
        let expiry = self.tasks.next_expiry(self.config.behaviour.task_ttl);
        jobs.chain(listens).chain(expiry).min()
    }

    fn keepalive_interval(&self) -> Option<Duration> {
        if self.mutant(Mutant::NoKeepalive) {
            return None;
        }
        match (self.config.transport, self.config.behaviour.response_mode) {
            (Transport::Http, ResponseMode::Sse) => self.config.behaviour.keepalive_interval,
            _ => None,
        }
    }

    /// Runs every step and keep-alive due at or before `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        let keepalive = self.keepalive_interval();
        let ids: Vec<JobKey> = self.jobs.keys().cloned().collect();
        for id in ids {
            // Only a job whose sampling request is overdue is taken out to cancel it: this
            // runs on every tick of the simulation.
            let overdue = self.jobs.get(&id).and_then(|j| j.sampling.as_ref());
            if overdue.is_some_and(|(_, at)| *at <= now) {
                if let Some(mut job) = self.jobs.remove(&id) {
                    self.cancel_sampling(&mut job, "the client did not answer in time");
                    self.jobs.insert(id.clone(), job);
                }
            }
            while let Some(job) = self.jobs.get(&id) {
                if job.next_step_at > now {
                    break;
                }
                self.step(now, &id);
            }
            if let Some(job) = self.jobs.get_mut(&id) {
                let comment = keepalive_due(now, keepalive, job.stream, &mut job.last_write);
                self.transmits.extend(comment);
            }
        }
        self.listen_timers(now);
        self.expire_tasks(now);
    }

    /// Subscription notices and keep-alives due at `now`.
    fn listen_timers(&mut self, now: Time) {
        let keepalive = self.keepalive_interval();
        let every = self.config.behaviour.listen_notify_interval;
        let ids: Vec<JobKey> = self.listens.keys().cloned().collect();
        for id in ids {
            let Some(listen) = self.listens.get_mut(&id) else {
                continue;
            };
            if let (Some(at), Some(every)) = (listen.next_notify, every) {
                if at <= now {
                    listen.next_notify = Some(now + every);
                    self.notify_listen(now, &id);
                }
            }
            if let Some(listen) = self.listens.get_mut(&id) {
                let comment = keepalive_due(now, keepalive, listen.stream, &mut listen.last_write);
                self.transmits.extend(comment);
            }
        }
    }

    /// Forgets tasks past their `ttlMs`; a task still working then stops (§7.3: the server
    /// MAY delete it).
    fn expire_tasks(&mut self, now: Time) {
        for (_, task) in self.tasks.expire(now, self.config.behaviour.task_ttl) {
            self.cancel(&task.origin);
        }
    }

    /// Finishes one step of a job: progress (if due), then the next step or the result.
    fn step(&mut self, now: Time, key: &JobKey) {
        let id = &key.id;
        let min_interval = self.config.behaviour.progress_min_interval;
        let can_stream = self.config.transport == Transport::Stdio
            || self.config.behaviour.response_mode == ResponseMode::Sse;
        let Some(job) = self.jobs.get_mut(key) else {
            return;
        };
        job.done += 1;
        let due = job
            .last_progress_at
            .is_none_or(|t| now.since(t) >= min_interval);
        let mutants = self.config.mutants;
        let token = match &job.token {
            _ if mutants.has(Mutant::NoKeepalive) => None,
            _ if mutants.has(Mutant::ForgedProgressToken) => {
                Some(ProgressToken::String(format!("tool-call-{id}")))
            }
            t => t.clone(),
        };
        let progress = match token {
            Some(token) if due && can_stream => {
                job.last_progress_at = Some(now);
                job.last_write = now;
                let value = if mutants.has(Mutant::FlatProgress) {
                    1.0
                } else {
                    f64::from(job.done)
                };
                let mut p = Progress::new(token, value);
                p.total = Some(f64::from(job.steps));
                Some((job.stream, p))
            }
            _ => None,
        };
        let finished = job.done >= job.steps;
        if !finished {
            job.next_step_at = job.next_step_at + job.step;
            self.backend.push_back(BackendCall::Work {
                request: id.clone(),
                step: job.done,
            });
        }
        if let Some((stream, p)) = progress {
            // The misrouting server writes progress to the newest open stream.
            let stream = match stream {
                Some(_) if mutants.has(Mutant::ProgressMisrouted) => {
                    self.open_sse.iter().next_back().copied().or(stream)
                }
                Some(_) if mutants.has(Mutant::ProgressOnGetStream) => self.listening.or(stream),
                s => s,
            };
            self.send(stream, p.into());
        }
        if finished {
            self.complete(now, key);
        }
    }

    /// The next message or HTTP action for the client. In the legacy era results carry no
    /// `resultType`.
    pub fn poll_transmit(&mut self) -> Option<ServerTransmit> {
        loop {
            if let Some(t) = self.seam.pop() {
                return Some(t);
            }
            let Some(t) = self.transmits.pop_front() else {
                self.reap_sessions();
                return None;
            };
            self.seam.write(t);
        }
    }

    /// Forgets the ended sessions that have nothing in flight any more; only once every
    /// transmit is written, since a session's streams are read in its era until then.
    fn reap_sessions(&mut self) {
        if self.seam.has_ended_sessions() {
            let (jobs, listens) = (&self.jobs, &self.listens);
            self.seam
                .reap(|scope| jobs.keys().chain(listens.keys()).any(|k| &k.scope == scope));
        }
    }

    /// The next backend call.
    pub fn poll_backend(&mut self) -> Option<BackendCall> {
        self.backend.pop_front()
    }
}

/// The SSE comment a stream quiet since `last_write` is due at `now`, if keep-alives are on;
/// sending it counts as a write.
fn keepalive_due(
    now: Time,
    keepalive: Option<Duration>,
    stream: Option<StreamId>,
    last_write: &mut Time,
) -> Option<ServerTransmit> {
    let (k, stream) = (keepalive?, stream?);
    (*last_write + k <= now).then(|| {
        *last_write = now;
        ServerTransmit::SseComment { stream }
    })
}

fn server_info() -> Value {
    json!({"io.modelcontextprotocol/serverInfo": {"name": "mcp-sim-server", "version": env!("CARGO_PKG_VERSION")}})
}
