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
//!
//! Where each part lives: dispatch, completion, the timers and `poll_*` here; the tool and its
//! steps in `tools`; the legacy era's handshake, refusals, `GET`/`DELETE` and sampling in
//! `legacy` (which era a request speaks is decided in `model::server_eras`); input rounds,
//! tasks and `listen` in `long_work`; the configuration in `config`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::backend::BackendCall;
pub use super::server_eras::{
    Admission, Refusal, RequestHead, ServerEras, SessionLimits, LEGACY_RETRY_MS,
};
use super::server_eras::{Admitted, EraSeam, JobKey, Scope};
pub use super::server_transmit::ServerTransmit;
use super::tasks::{TaskStatus, TaskStore};
use super::{StreamId, Transport};
use crate::model::mutant::Mutant;
use crate::time::Time;
use crate::wire::{
    codes, DecodeError, Era, ErrorResponse, Message, Progress, ProgressToken, Request, RequestId,
    ResultResponse, EXTENSION_TASKS, META_SUBSCRIPTION_ID, METHOD_LISTEN, METHOD_TASKS_CANCEL,
    METHOD_TASKS_GET, METHOD_TASKS_UPDATE, METHOD_TOOLS_CALL, PROTOCOL_VERSION,
};
use answered::Answered;

mod answered;
mod config;
mod legacy;
mod long_work;
mod playback;
mod tools;

pub use config::{
    ResponseMode, ServerBehaviour, ServerConfig, SseStyle, CALL_TAG, MAX_INPUT_ROUNDS, MAX_STEPS,
    SLOW_TOOL,
};
pub use legacy::SAMPLING_TIMEOUT;
use long_work::Listen;
use playback::Player;
pub use playback::{OnCancel, OnMiss, Playback, PlaybackCounts};

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
    answered: Answered,
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
    /// A recording it plays back (`mcp-sim serve --from`), and how far it got.
    player: Option<Box<Player>>,
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
            answered: Answered::default(),
            open_sse: BTreeSet::new(),
            transmits: VecDeque::new(),
            backend: VecDeque::new(),
            seam: EraSeam::new(config.eras, config.limits, config.transport, config.mutants),
            cancel_ignored: BTreeSet::new(),
            listening: None,
            started: Time::ZERO,
            own_requests: 0,
            player: None,
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

    /// The era a message without an HTTP head is read in (stdio, or a lane that moves
    /// messages without headers): the pipe's once its first request decided it; before that
    /// the legacy era for an `initialize` (`method`), else 2026-07-28.
    pub fn era_to_read(&self, stream: Option<StreamId>, method: Option<&str>) -> Era {
        match self.era().filter(|_| stream.is_none()) {
            Some(era) => era,
            None if method == Some("initialize") => Era::LEGACY,
            None => Era::Modern,
        }
    }

    /// The era a request's head names, without admitting it, for the record of a request
    /// refused before it was admitted (its `Host` or `Origin`): legacy for an `initialize`, a
    /// session's request or a legacy `MCP-Protocol-Version`, else 2026-07-28.
    pub fn era_named_by(head: RequestHead<'_>) -> Era {
        let legacy_version = head
            .version
            .and_then(Era::from_version)
            .is_some_and(Era::is_legacy);
        if head.method == Some("initialize") || head.session.is_some() || legacy_version {
            Era::LEGACY
        } else {
            Era::Modern
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
                        self.cancel_notification(now, &key);
                    }
                } else {
                    let key = self.key(None, c.request_id);
                    self.cancel_notification(now, &key);
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
        // A played call's stream closed: in 2026-07-28 that is its cancel.
        if let Some(key) = self.playing_on(stream) {
            if !self.legacy_on(Some(stream)) {
                self.playback_cancelled(now, &key);
            }
        }
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

    /// A request, dispatched on the era its admission decided (a 2026-07-28 request for
    /// `initialize` is no handshake: it names a method that revision removed).
    fn handle_request(&mut self, now: Time, stream: Option<StreamId>, r: Request) {
        match self.seam.admit_request(stream, r) {
            Admitted::Initialize(r) => self.initialize(stream, r),
            Admitted::DiscoverRefused(r) => self.refuse_discover(stream, r),
            Admitted::Legacy(r) if r.method == "ping" => self.pong(stream, r),
            Admitted::Legacy(r) | Admitted::Modern(r) => self.serve(now, stream, r),
        }
    }

    /// The legacy era's `ping`, answered at once with an empty result
    /// (docs/spec/mcp-2025-11-25.md LA4).
    fn pong(&mut self, stream: Option<StreamId>, r: Request) {
        if self.mutant(Mutant::PingUnanswered) {
            return;
        }
        let pong = ResultResponse {
            id: r.id,
            result_type: None,
            result: Map::new(),
        };
        self.respond(stream, pong.into(), 200);
    }

    /// A request of either era past its opening: a 2026-07-28 request of another version is
    /// refused; an id in use is refused; then the method's handler.
    fn serve(&mut self, now: Time, stream: Option<StreamId>, r: Request) {
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
        let in_use = self.jobs.contains_key(&key) || self.listens.contains_key(&key);
        if in_use || self.is_playing(&key) {
            let e = ErrorResponse::new(
                Some(r.id),
                codes::INVALID_REQUEST,
                "request id is already in use",
            );
            return self.respond(stream, e.into(), 400);
        }
        if self.play(now, stream, &r) {
            return;
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
                self.recorded_discovery(&mut res.result);
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
    fn cancel_notification(&mut self, now: Time, key: &JobKey) {
        if self.is_playing(key) {
            return self.playback_cancelled(now, key);
        }
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
        jobs.chain(listens)
            .chain(expiry)
            .chain(self.playback_due())
            .min()
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
        self.playback_timers(now);
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
