//! The reference MCP client.
//!
//! Per request the client goes through one lifecycle:
//!
//! ```text
//!   start_request ──> AwaitingResponse ──response──────────────> done: Result | Error
//!                          │  │   │
//!                          │  │   └─timeout / cancel()─> send cancel (stdio) or close the
//!                          │  │                          stream (HTTP) ──> done: TimedOut | Cancelled
//!                          │  └─stream lost (HTTP) or pipe lost (stdio)──> done: Lost
//!                          │                             (idempotent: re-issue, new id and token)
//!                          └─valid progress: deliver, maybe reset the idle clock
//! ```
//!
//! A finished request is forgotten, so anything that arrives for it later (a response that
//! crossed the cancel, progress after completion, progress with an unknown token) finds no
//! outstanding request and is dropped without failing: exactly one outcome reaches the
//! application per request id (docs/spec/mcp-2026-07-28.md §3.3 items 5 and 7, §9 rules 20, 27, 28).
//!
//! Ids are integers counting from 1 and tokens are strings `p-N`; neither is ever reused in a
//! run (host policy, docs/spec/mcp-2026-07-28.md §1.2 and §6), so a stray message from an old attempt can never be
//! mistaken for a new one.
//!
//! Three results end a request without ending the application's call (§7):
//!
//! - `input_required` (MRTR): the request's outcome is `input_required`, and the client answers
//!   every input request (accepting each elicitation) and retries at once under a new id and a
//!   new token, echoing `requestState` exactly and omitting it when none came (`Retried`
//!   links the two).
//! - `task` (a call that declared the Tasks extension): the call's outcome waits for the task.
//!   The client polls `tasks/get`, each poll an ordinary request with [`POLL_POLICY`], spaced at
//!   least `pollIntervalMs` apart, until a terminal status (the call's outcome: `completed` is a
//!   result, `failed` an error, `cancelled` a cancellation), an unknown-task error (lost: the
//!   server forgot it) or the task's `ttlMs` (timed out). A lost poll is just followed by the
//!   next one: a task survives what kills a call. The application cancels a task with
//!   `tasks/cancel`, never `notifications/cancelled`, and is told at once; the client still
//!   polls until the task reports a terminal state, so that what the server did with the
//!   cancel (cancelled, or completed anyway: eventual consistency) is on the record.
//! - A `subscriptions/listen` has no response deadline but an acknowledgement deadline
//!   ([`LISTEN_ACK_DEADLINE`]); it ends when the application cancels it, when the server ends
//!   it with a result, or with its transport (then it is re-opened under a new id, §9 G57).
//!
//! A client of the legacy era ([`Connect::Pinned`], docs/spec/mcp-2025-11-25.md §2) puts a
//! handshake in front of all this on every connection: its first request sends `initialize`,
//! and every request waits behind it (its timers counting from when it goes out) until the
//! result; then `notifications/initialized` and the waiting requests go out in order. The
//! handshake is never cancelled (LA3): after [`HANDSHAKE_TIMEOUT`] the client drops the
//! connection and shakes hands on a new one, and a waiting request that gives up sends
//! nothing, since it never went out. It cancels with `notifications/cancelled` on both
//! transports (over HTTP a POST of its own, answered 202), and while a call waits on a quiet
//! server it sends `ping` every [`PING_AFTER`].
//!
//! Over HTTP the legacy handshake opens a session (docs/spec/mcp-2025-11-25.md §5): every later
//! POST and `GET` carries its `Mcp-Session-Id` and the negotiated `MCP-Protocol-Version`
//! ([`Client::post_headers`]), and the client offers the server a `GET` stream of its own. A
//! request's stream that breaks is not lost when the client read an event id on it: after the
//! `retry` the server asked for (else [`DEFAULT_RETRY`]) the client resumes it with a `GET`
//! carrying `Last-Event-ID`, at most [`MAX_RESUMES`] times. A 404 to a request sent in the
//! current session means the server forgot the session: the client initializes a new one,
//! and what was in flight in the old one is lost (and re-issued, when it may be). When the
//! host is done ([`Client::end_session`]) the client ends the session with a `DELETE`, once
//! nothing is outstanding and every POST has its answer.
//!
//! A legacy server may ask the client too (docs/spec/mcp-2025-11-25.md LB7): the client
//! answers `ping` and `roots/list` at once and `sampling/createMessage` after the host's model
//! took [`SAMPLING_DELAY`], each answer a message of its own (over HTTP a POST, answered 202);
//! a cancel from the server drops the answer unsent, and a request replayed on a resumed
//! stream is answered once.
//!
//! In auto mode ([`Connect::Auto`], the dual-era SDKs' `auto`) the era is the server's
//! to tell: the first request waits behind a `server/discover`, as requests wait behind a
//! handshake. A result keeps the modern era; any error (over HTTP, any error status: the
//! TypeScript SDK v1 answers 400 with a null id) or [`DISCOVER_TIMEOUT`] of silence (the
//! probe then cancelled as a modern request is) falls back to the legacy handshake, and what
//! waited takes the legacy shape.
//!
//! Where each part lives: the lifecycle above, the timers and `poll_*` here; the connection
//! and the era it carries in `conn`; the opening (discover, fallback, handshake) in
//! `opening`; sending a request in `requests`; the legacy HTTP session and resumption in
//! `session`; the server's own requests and the liveness `ping` in `server_requests`; tasks,
//! input rounds and `listen` in `long_work`; the public values in `config` and `output`.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::policy::{TimeoutPolicy, TimeoutReason};
use super::tasks::TaskStatus;
use super::{StreamId, Transport};
use crate::model::mutant::Mutant;
use crate::time::Time;
use crate::wire::{
    codes, Era, Message, ProgressToken, RequestId, ResultResponse, ResultType,
    META_SUBSCRIPTION_ID, METHOD_LISTEN, METHOD_SUBSCRIPTIONS_ACKNOWLEDGED,
};

mod cancelling;
mod config;
mod conn;
mod long_work;
mod opening;
mod output;
mod requests;
mod server_requests;
mod session;

pub use config::{CallSpec, ClientConfig, POLL_POLICY};
use conn::Conn;
pub use conn::Connect;
use conn::Handshake;
pub use conn::{DISCOVER_TIMEOUT, HANDSHAKE_TIMEOUT};
use long_work::{ClientTask, MIN_POLL};
pub use long_work::{LISTEN_ACK_DEADLINE, MAX_ROUNDS_ANSWERED, SETTLE_WATCH};
pub use output::{ClientError, ClientEvent, ClientTransmit, Outcome};
pub use server_requests::{PING_AFTER, PING_POLICY, SAMPLING_DELAY};
use session::{Resume, SessionEnd};
pub use session::{DEFAULT_RETRY, MAX_RESUMES};

/// One outstanding request.
#[derive(Debug, Clone)]
struct Pending {
    spec: CallSpec,
    token: Option<ProgressToken>,
    stream: Option<StreamId>,
    sent: Time,
    last_progress_at: Option<Time>,
    last_progress: Option<f64>,
    retries_left: u32,
    /// A message has arrived on its stream (HTTP).
    received_any: bool,
    /// What the request is for.
    purpose: Purpose,
    /// `input_required` rounds answered so far for this call.
    rounds: u32,
    /// A listen's acknowledgement arrived.
    acked: bool,
    /// The legacy era's resumption of its stream.
    resume: Resume,
}

/// Why a request was sent.
#[derive(Debug, Clone, PartialEq)]
enum Purpose {
    /// The application's own call.
    Call,
    /// A `tasks/get` poll for the task of the call `origin`.
    Poll { origin: RequestId },
    /// A `tasks/cancel` (the application already has its outcome).
    TaskCancel,
    /// A legacy `ping`, the client's liveness check of a quiet server.
    Ping,
}

/// The reference client. See the module docs for the lifecycle.
#[derive(Debug, Clone)]
pub struct Client {
    config: ClientConfig,
    next_id: i64,
    next_token: u64,
    next_stream: u64,
    pending: BTreeMap<RequestId, Pending>,
    by_token: BTreeMap<ProgressToken, RequestId>,
    by_stream: BTreeMap<StreamId, RequestId>,
    /// Requests the client cancelled or timed out (what a crossing response can name).
    abandoned: std::collections::BTreeSet<RequestId>,
    /// Streams whose close waits for a first message (`cancel_blocked_by_pending_post`).
    deferred_close: std::collections::BTreeSet<StreamId>,
    /// Tasks being polled, by the call that created them.
    tasks: BTreeMap<RequestId, ClientTask>,
    transmits: VecDeque<ClientTransmit>,
    events: VecDeque<ClientEvent>,
    /// The connection, its era and its opening.
    conn: Conn,
    /// The host's word on its session ([`Client::end_session`]). It is the application's,
    /// whatever the era: an auto-mode host may be done before discovery falls back, and its
    /// legacy HTTP session then still ends with a `DELETE`.
    session_end: SessionEnd,
}

impl Client {
    /// A client with nothing outstanding.
    pub fn new(config: ClientConfig) -> Self {
        Client {
            next_id: 1,
            next_token: 1,
            next_stream: 1,
            pending: BTreeMap::new(),
            by_token: BTreeMap::new(),
            by_stream: BTreeMap::new(),
            abandoned: Default::default(),
            deferred_close: Default::default(),
            tasks: BTreeMap::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            conn: Conn::new(config.connect),
            session_end: SessionEnd::Open,
            config,
        }
    }

    /// The era it speaks: the configured one, or in auto mode the one discovery decided
    /// (modern until it falls back).
    pub fn era(&self) -> Era {
        self.conn.era()
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Sends a new request; returns its id. After the session's `DELETE` it opens a new
    /// session.
    pub fn start_request(&mut self, now: Time, spec: CallSpec) -> RequestId {
        if self.session_end == SessionEnd::Sent {
            if let Some(legacy) = self.conn.legacy_mut() {
                legacy.session = None;
                legacy.handshake = Handshake::NotStarted;
            }
        }
        self.session_end = SessionEnd::Open;
        let retries = self.config.max_retries;
        self.issue(now, spec, retries, Purpose::Call)
    }

    /// The application cancels an outstanding request.
    pub fn cancel(&mut self, now: Time, id: &RequestId) -> Result<(), ClientError> {
        if self.tasks.get(id).is_some_and(|t| !t.settled) {
            self.cancel_task(now, id, Outcome::Cancelled);
            return Ok(());
        }
        if !self.pending.contains_key(id) {
            return Err(ClientError::NotOutstanding(id.clone()));
        }
        self.abandon(
            now,
            id,
            "cancelled by the application".into(),
            Outcome::Cancelled,
        );
        Ok(())
    }

    /// Whether `id` is still waiting for its response (or its task).
    pub fn is_outstanding(&self, id: &RequestId) -> bool {
        self.pending.contains_key(id) || self.tasks.contains_key(id)
    }

    /// The timeout policy of an outstanding request (recorded in traces with its send).
    pub fn policy_of(&self, id: &RequestId) -> Option<TimeoutPolicy> {
        match self.conn.opening() {
            Handshake::Awaiting {
                id: init, awaits, ..
            } if init == id => self.opening_timeout(*awaits).map(TimeoutPolicy::fixed),
            _ => self.pending.get(id).map(|p| p.spec.policy),
        }
    }

    /// Number of outstanding requests and tasks, and a legacy handshake still waiting.
    pub fn outstanding(&self) -> usize {
        let handshake = usize::from(matches!(self.conn.opening(), Handshake::Awaiting { .. }));
        self.pending.len() + self.tasks.len() + handshake
    }

    /// A message arrived: on the pipe (stdio, `stream` is `None`) or on a response stream.
    pub fn handle_message(&mut self, now: Time, stream: Option<StreamId>, msg: Message) {
        if let Some(legacy) = self.conn.legacy_mut() {
            legacy.last_heard = now;
        }
        if let Some(s) = stream {
            if self.deferred_close.remove(&s) {
                self.transmits
                    .push_back(ClientTransmit::Close { stream: s });
            }
            if let Some(p) = self
                .by_stream
                .get(&s)
                .and_then(|id| self.pending.get_mut(id))
            {
                p.received_any = true;
            }
        }
        match msg {
            Message::Result(r) => self.handle_result(now, stream, r),
            // An error without id answers something unreadable we sent; nothing to match.
            Message::Error(e) => {
                if let Some(id) = e.id {
                    if self.handshake_answered(now, &id, false) {
                        return;
                    }
                    let origin = self.poll_origin(&id);
                    self.handle_response(now, stream, id.clone(), Outcome::Error);
                    if let Some(origin) = origin {
                        if e.error.code == codes::INVALID_PARAMS {
                            // The server no longer knows the task (expired or lost in a crash).
                            self.end_task(&origin, Outcome::Lost);
                        } else {
                            self.polled(&origin, &id, None);
                        }
                    }
                }
            }
            Message::Progress(p) => {
                let Some(id) = self.by_token.get(&p.token).cloned() else {
                    if self.mutant(Mutant::StaleProgressIsError) {
                        self.fatal(now);
                    }
                    return;
                };
                let Some(pending) = self.pending.get_mut(&id) else {
                    return;
                };
                // On HTTP, progress belongs on its request's own stream (§2.4).
                if stream.is_some() && stream != pending.stream {
                    return;
                }
                let accept_any = self.config.mutants.has(Mutant::AcceptNonIncreasingProgress);
                if !accept_any && pending.last_progress.is_some_and(|last| p.progress <= last) {
                    return; // not strictly increasing: drop, and do not reset the timer
                }
                pending.last_progress = Some(p.progress);
                pending.last_progress_at = Some(now);
                self.events.push_back(ClientEvent::Progress {
                    request: id,
                    progress: p.progress,
                    total: p.total,
                });
            }
            // The legacy server gives up on its own request: the answer is dropped.
            Message::Cancelled(c)
                if self
                    .conn
                    .legacy_mut()
                    .is_some_and(|l| l.answering.remove(&c.request_id).is_some()) => {}
            // A server-sent cancellation may end a stdio listen (§7.1).
            Message::Cancelled(c) => {
                if self
                    .pending
                    .get(&c.request_id)
                    .is_some_and(|p| p.spec.method == METHOD_LISTEN)
                {
                    self.handle_response(now, stream, c.request_id, Outcome::Cancelled);
                }
            }
            Message::Notification(n) if n.method == METHOD_SUBSCRIPTIONS_ACKNOWLEDGED => {
                let tag = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("_meta"))
                    .and_then(|m| m.get(META_SUBSCRIPTION_ID))
                    .and_then(RequestId::from_json);
                if let Some(p) = tag.and_then(|id| self.pending.get_mut(&id)) {
                    p.acked = true;
                }
            }
            Message::Request(r) => self.server_request(now, r),
            // Other notifications carry nothing this client acts on.
            Message::Notification(_) => {}
        }
    }

    /// A result: for a call, a final result, an `input_required` round or a task; for a poll,
    /// the task's state.
    fn handle_result(&mut self, now: Time, stream: Option<StreamId>, r: ResultResponse) {
        // A discover result whose `supportedVersions` leaves out the version this client
        // speaks is no modern server for it: the auto mode falls back as on a refusal
        // (go-sdk's stateful HTTP handler lists only the legacy revisions there).
        let ok = !self.opening_discover(&r.id) || opening::offers(&r, &self.era());
        if self.handshake_answered(now, &r.id, ok) {
            return;
        }
        let Some(pending) = self.pending.get(&r.id) else {
            return self.handle_response(now, stream, r.id, Outcome::Result);
        };
        if stream.is_some() && stream != pending.stream {
            return;
        }
        let purpose = pending.purpose.clone();
        match (purpose, r.effective_type()) {
            (Purpose::Call, ResultType::InputRequired) => self.answer_input(now, &r),
            (Purpose::Call, ResultType::Task) if pending.spec.task => {
                let Some(task_id) = r.task_id() else {
                    return self.handle_response(now, stream, r.id, Outcome::Error);
                };
                let ms = |key: &str| r.result.get(key).and_then(serde_json::Value::as_u64);
                let asked = Duration::from_millis(ms("pollIntervalMs").unwrap_or(1000));
                let task = ClientTask {
                    task_id: task_id.to_owned(),
                    poll_interval: if self.mutant(Mutant::TaskPollTooFast) {
                        Duration::from_millis(200)
                    } else {
                        asked.max(MIN_POLL)
                    },
                    last_poll: now,
                    poll: None,
                    expires: ms("ttlMs").map(|t| now + Duration::from_millis(t)),
                    deadline: pending.spec.policy.hard_bound().map(|b| pending.sent + b),
                    settled: false,
                };
                // The call is over on the wire; its outcome waits for the task.
                self.finish(&r.id);
                self.tasks.insert(r.id, task);
            }
            // A task the call never asked for cannot be followed: an invalid answer.
            (Purpose::Call, ResultType::Task) => {
                self.handle_response(now, stream, r.id, Outcome::Error)
            }
            (Purpose::Poll { origin }, _) => {
                let status = r.task_status().and_then(TaskStatus::parse);
                self.handle_response(now, stream, r.id.clone(), Outcome::Result);
                self.polled(&origin, &r.id, status);
            }
            _ => self.handle_response(now, stream, r.id, Outcome::Result),
        }
    }

    fn handle_response(
        &mut self,
        now: Time,
        stream: Option<StreamId>,
        id: RequestId,
        outcome: Outcome,
    ) {
        let Some(pending) = self.pending.get(&id) else {
            if self.mutant(Mutant::LateResponseIsFatal) && self.abandoned.contains(&id) {
                self.fatal(now);
            }
            return;
        };
        if stream.is_some() && stream != pending.stream || pending.resume.expired {
            return;
        }
        self.finish(&id);
        self.events.push_back(ClientEvent::Outcome {
            request: id,
            outcome,
        });
    }

    /// HTTP: a response stream ended. If its request had no response yet, the request is lost,
    /// unless (legacy era) it received an event id: then it is resumed after `retry`.
    pub fn handle_stream_closed(&mut self, now: Time, stream: StreamId) {
        if let Some(legacy) = self.conn.legacy_mut() {
            legacy.sent_in.remove(&stream);
        }
        if let Some(Handshake::Awaiting {
            id,
            stream: Some(s),
            broke,
            ..
        }) = self.conn.opening_mut()
        {
            if *s == stream && broke.is_none() {
                // The handshake's stream broke before its answer: it is lost now, and a new
                // one starts after a pause (a server that refuses connections must not spin
                // the client).
                *broke = Some(now + DEFAULT_RETRY);
                let id = id.clone();
                self.events.push_back(ClientEvent::Outcome {
                    request: id,
                    outcome: Outcome::Lost,
                });
                return;
            }
        }
        let Some(id) = self.by_stream.get(&stream).cloned() else {
            return;
        };
        if self.legacy_http().is_some() && !self.mutant(Mutant::DropsResumable) {
            let retry = if self.mutant(Mutant::ResumesBeforeRetry) {
                Duration::ZERO
            } else {
                self.pending
                    .get(&id)
                    .and_then(|p| p.resume.retry)
                    .unwrap_or(DEFAULT_RETRY)
            };
            let session = self.session().map(str::to_owned);
            if let Some(p) = self.pending.get_mut(&id) {
                let same_session = session.is_some() && p.resume.session == session;
                if p.resume.last_event_id.is_some() && p.resume.spent < MAX_RESUMES && same_session
                {
                    p.resume.at = Some(now + retry);
                    p.stream = None;
                    self.by_stream.remove(&stream);
                    return;
                }
            }
        }
        self.lose(now, &id);
    }

    /// stdio: the pipe broke (the server exited). Every outstanding request is lost.
    pub fn handle_disconnect(&mut self, now: Time) {
        self.reset_handshake();
        // The server that asked is gone with the pipe.
        if let Some(legacy) = self.conn.legacy_mut() {
            legacy.answering.clear();
        }
        let ids: Vec<RequestId> = self.pending.keys().cloned().collect();
        for id in ids {
            self.lose(now, &id);
        }
    }

    fn lose(&mut self, now: Time, id: &RequestId) {
        let Some(pending) = self.finish(id) else {
            return;
        };
        self.events.push_back(ClientEvent::Outcome {
            request: id.clone(),
            outcome: Outcome::Lost,
        });
        if let Purpose::Poll { origin } = &pending.purpose {
            return self.polled(origin, id, None);
        }
        // On stdio a subscription the application still wants is re-opened after every restart
        // of the server (§9 G57); the new listen waits for the new pipe, so this cannot spin.
        // On HTTP a lost listen stream gets the ordinary retry budget.
        let reopen =
            pending.spec.method == METHOD_LISTEN && self.config.transport == Transport::Stdio;
        if pending.spec.idempotent && (pending.retries_left > 0 || reopen) {
            let left = pending.retries_left.saturating_sub(1);
            let new = self.issue(now, pending.spec, left, Purpose::Call);
            self.events.push_back(ClientEvent::Retried {
                lost: id.clone(),
                new,
            });
        }
    }

    fn mutant(&self, m: Mutant) -> bool {
        self.config.mutants.has(m)
    }

    /// A faulty client's reaction to a race it should have tolerated: it drops the connection
    /// and with it every outstanding request.
    fn fatal(&mut self, now: Time) {
        let ids: Vec<RequestId> = self.pending.keys().cloned().collect();
        self.reset_handshake();
        match self.config.transport {
            Transport::Stdio => self.transmits.push_back(ClientTransmit::Disconnect),
            Transport::Http => {
                for stream in self.by_stream.keys() {
                    self.transmits
                        .push_back(ClientTransmit::Close { stream: *stream });
                }
            }
        }
        for id in ids {
            self.lose(now, &id);
        }
    }

    /// The request's deadline as this client computes it (the policy's, unless a timer
    /// mutant is on).
    fn deadline(&self, p: &Pending) -> Option<(Time, TimeoutReason)> {
        if p.spec.method == METHOD_LISTEN {
            return (!p.acked).then_some((p.sent + LISTEN_ACK_DEADLINE, TimeoutReason::Ack));
        }
        let policy = p.spec.policy;
        let m = self.config.mutants;
        if m.has(Mutant::NoTimeout) {
            None
        } else if m.has(Mutant::FixedTimeoutIgnoresProgress) {
            Some((
                p.sent + std::time::Duration::from_secs(60),
                TimeoutReason::Idle,
            ))
        } else if m.has(Mutant::ResetNotExtending) {
            policy.deadline(p.sent, None)
        } else if m.has(Mutant::CapSlidesWithProgress) {
            let idle = TimeoutPolicy {
                max_total_timeout: None,
                ..policy
            }
            .deadline(p.sent, p.last_progress_at);
            let from = p.last_progress_at.unwrap_or(p.sent);
            let max = policy
                .max_total_timeout
                .map(|d| (from + d, TimeoutReason::Maximum));
            [idle, max].into_iter().flatten().min_by_key(|(t, _)| *t)
        } else if m.has(Mutant::MaxCapOnlyOnProgress) && p.last_progress_at.is_none() {
            TimeoutPolicy {
                max_total_timeout: None,
                ..policy
            }
            .deadline(p.sent, None)
        } else {
            policy.deadline(p.sent, p.last_progress_at)
        }
    }

    /// Forgets a request and returns its state.
    fn finish(&mut self, id: &RequestId) -> Option<Pending> {
        let pending = self.pending.remove(id)?;
        if let Some(legacy) = self
            .conn
            .legacy_mut()
            .filter(|l| l.ping.as_ref() == Some(id))
        {
            legacy.ping = None;
        }
        if let Some(t) = &pending.token {
            self.by_token.remove(t);
        }
        if let Some(s) = pending.stream {
            self.by_stream.remove(&s);
        }
        Some(pending)
    }

    /// The earliest request deadline.
    pub fn poll_timeout(&self) -> Option<Time> {
        let requests = self
            .pending
            .values()
            .filter_map(|p| self.deadline(p))
            .map(|(t, _)| t);
        let tasks = self.tasks.values().flat_map(|t| {
            let poll = t.poll.is_none().then_some(t.last_poll + t.poll_interval);
            let deadline = t.deadline.filter(|_| !t.settled);
            poll.into_iter().chain(t.expires).chain(deadline)
        });
        let handshake = match self.conn.opening() {
            Handshake::Awaiting {
                broke: Some(at), ..
            } => Some(*at),
            Handshake::Awaiting { sent, awaits, .. } => {
                self.opening_timeout(*awaits).map(|timeout| *sent + timeout)
            }
            _ => None,
        };
        let resumes = self.pending.values().filter_map(|p| p.resume.at);
        let ping = self.ping_due();
        let answers = self
            .conn
            .legacy()
            .into_iter()
            .flat_map(|l| l.answering.values().copied());
        requests
            .chain(answers)
            .chain(tasks)
            .chain(handshake)
            .chain(resumes)
            .chain(ping)
            .min()
    }

    /// Fires every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        self.handshake_timer(now);
        self.answer_timers(now);
        self.resume_timers(now);
        self.ping_timer(now);
        self.request_timers(now);
        self.task_timers(now);
    }

    fn request_timers(&mut self, now: Time) {
        let due: Vec<(RequestId, TimeoutReason)> = self
            .pending
            .iter()
            .filter_map(|(id, p)| {
                let (at, reason) = self.deadline(p)?;
                (at <= now).then(|| (id.clone(), reason))
            })
            .collect();
        for (id, reason) in due {
            self.events.push_back(ClientEvent::Timeout {
                request: id.clone(),
                reason,
            });
            let silent = self.mutant(Mutant::TimeoutWithoutCancel)
                || self.mutant(Mutant::RetryWithoutCancel)
                || self.mutant(Mutant::LegacyTimeoutSilent);
            if !silent {
                let text = format!("client {} timeout", reason.as_str());
                let origin = self.poll_origin(&id);
                self.abandon(now, &id, text, Outcome::TimedOut);
                if let Some(origin) = origin {
                    self.polled(&origin, &id, None);
                }
                continue;
            }
            // The faulty clients give up without telling the server.
            let Some(pending) = self.finish(&id) else {
                continue;
            };
            self.abandoned.insert(id.clone());
            self.events.push_back(ClientEvent::Outcome {
                request: id.clone(),
                outcome: Outcome::TimedOut,
            });
            if self.mutant(Mutant::RetryWithoutCancel) && pending.retries_left > 0 {
                let new = self.issue(now, pending.spec, pending.retries_left - 1, Purpose::Call);
                self.events
                    .push_back(ClientEvent::Retried { lost: id, new });
            }
        }
    }

    /// The next message or stream action for the peer.
    pub fn poll_transmit(&mut self) -> Option<ClientTransmit> {
        let t = match self.transmits.pop_front() {
            Some(t) => t,
            None => self.session_delete()?,
        };
        let http = self.config.transport == Transport::Http;
        if let (
            ClientTransmit::Post { stream, .. }
            | ClientTransmit::Get { stream, .. }
            | ClientTransmit::Delete { stream },
            Some(legacy),
        ) = (&t, self.conn.legacy_mut().filter(|_| http))
        {
            legacy.sent_in.insert(*stream, legacy.session.clone());
        }
        if let ClientTransmit::Post {
            msg: Message::Request(r),
            ..
        } = &t
        {
            if let Some(p) = self.pending.get_mut(&r.id) {
                p.resume.session = self.conn.legacy().and_then(|l| l.session.clone());
            }
        }
        Some(t)
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }
}
