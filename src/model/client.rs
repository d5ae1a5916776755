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
//! A client of the legacy era ([`ClientConfig::era`], docs/spec/mcp-2025-11-25.md §2) puts a
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
//! In auto mode ([`ClientConfig::auto`], the dual-era SDKs' `auto`) the era is the server's
//! to tell: the first request waits behind a `server/discover`, as requests wait behind a
//! handshake. A result keeps the modern era; any error (over HTTP, any error status: the
//! TypeScript SDK v1 answers 400 with a null id) or [`DISCOVER_TIMEOUT`] of silence (the
//! probe then cancelled as a modern request is) falls back to the legacy handshake, and what
//! waited takes the legacy shape.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

use super::policy::{TimeoutPolicy, TimeoutReason};
use super::tasks::TaskStatus;
use super::{StreamId, Transport};
use crate::model::mutant::{Mutant, MutantSet};
use crate::time::Time;
use crate::wire::{
    codes, Cancelled, Era, LegacyRevision, Message, Notification, ProgressToken, Request,
    RequestId, ResultResponse, ResultType, META_SUBSCRIPTION_ID, METHOD_LISTEN,
    METHOD_SUBSCRIPTIONS_ACKNOWLEDGED, METHOD_TASKS_CANCEL, METHOD_TASKS_GET,
};

/// How long a client in auto mode waits for the `server/discover` answer before it falls back
/// to the legacy handshake (rmcp's `Auto` waits 10 s: fastmcp 3.x on `mcp` 1.x ignores the
/// request, MayDay-wpf/snow-app PR #56).
pub const DISCOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the host's model takes to answer a legacy server's `sampling/createMessage`.
pub const SAMPLING_DELAY: Duration = Duration::from_secs(4);

/// How long a legacy client waits for the initialize result before it gives the connection
/// up and opens another (it never cancels `initialize`, LA3).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a legacy client waits before it resumes a broken stream when the server set no
/// `retry` (the TypeScript SDK's initial reconnection delay).
pub const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// How many times a legacy client resumes one request's stream before it gives it up.
pub const MAX_RESUMES: u32 = 3;

/// A legacy client whose calls have heard nothing from the server this long sends a `ping`
/// (its liveness check; on stdio the answer is also a barrier: the server read everything
/// before it).
pub const PING_AFTER: Duration = Duration::from_secs(15);

/// How long a `ping` may take to be answered.
pub const PING_POLICY: TimeoutPolicy = TimeoutPolicy {
    timeout: Some(Duration::from_secs(10)),
    reset_timeout_on_progress: false,
    max_total_timeout: None,
};

/// The timeout of each `tasks/get` poll and `tasks/cancel`: short, ordinary requests.
pub const POLL_POLICY: TimeoutPolicy = TimeoutPolicy {
    timeout: Some(Duration::from_secs(30)),
    reset_timeout_on_progress: false,
    max_total_timeout: None,
};

/// How long a `subscriptions/listen` may wait for its acknowledgement (host policy, §9 D39).
pub const LISTEN_ACK_DEADLINE: Duration = Duration::from_secs(10);

/// At most this many `input_required` rounds are answered for one call; the call ends with the
/// last one unanswered.
pub const MAX_ROUNDS_ANSWERED: u32 = 16;

/// How long a task whose outcome the application already has is still polled to see it
/// settle.
pub const SETTLE_WATCH: Duration = Duration::from_secs(60);

/// The shortest poll spacing honoured, whatever a server asks (a guard against 0).
const MIN_POLL: Duration = Duration::from_millis(100);

/// Client configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The transport.
    pub transport: Transport,
    /// How many times an idempotent request lost with its stream or pipe is re-issued.
    pub max_retries: u32,
    /// Faulty behaviours switched on (none for the reference client).
    pub mutants: MutantSet,
    /// The protocol era it speaks. A legacy client opens every connection with `initialize`,
    /// holds its requests until the result, then sends `notifications/initialized`; its
    /// requests carry no modern `_meta` keys (docs/spec/mcp-2025-11-25.md §2).
    pub era: Era,
    /// Auto mode, the dual-era SDKs' default or option (Python `mcp` 2.x, fastmcp, rmcp's
    /// `Auto`): with `era` modern, the client's first request waits behind a
    /// `server/discover`; a result keeps the modern era, and a refusal (any error) or
    /// [`DISCOVER_TIMEOUT`] of silence falls back to this revision's handshake
    /// (docs/spec/mcp-2025-11-25.md §1). The era so decided holds for the client's life.
    pub auto: Option<LegacyRevision>,
}

impl ClientConfig {
    /// A client on `transport` that re-issues lost idempotent requests once, in the modern era.
    pub fn new(transport: Transport) -> Self {
        ClientConfig {
            transport,
            max_retries: 1,
            mutants: MutantSet::NONE,
            era: Era::Modern,
            auto: None,
        }
    }
}

/// Where a legacy client's handshake stands on the current connection.
#[derive(Debug, Clone, Default)]
enum Handshake {
    /// Nothing sent yet: the first request starts it.
    #[default]
    NotStarted,
    /// `initialize` (or, `probe`, the auto mode's `server/discover`) is out since `sent`; the
    /// requests behind it wait, in order.
    Waiting {
        id: RequestId,
        probe: bool,
        sent: Time,
        /// The HTTP stream it went out on.
        stream: Option<StreamId>,
        /// Its stream broke before the answer: a new handshake starts then.
        broke: Option<Time>,
        queued: VecDeque<(RequestId, ClientTransmit)>,
    },
    /// The result arrived (and every modern connection is here from the start).
    Done,
}

/// What the application asks the client to send.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSpec {
    /// The method.
    pub method: String,
    /// The params other than `_meta`.
    pub params: Map<String, Value>,
    /// Ask for progress (attach a fresh `progressToken`).
    pub progress: bool,
    /// When to give up.
    pub policy: TimeoutPolicy,
    /// Safe to re-issue when lost (a read, or an idempotent tool).
    pub idempotent: bool,
    /// Declare the Tasks extension in this request's `clientCapabilities` (§7.3).
    pub task: bool,
}

impl CallSpec {
    /// A `tools/call` of `name` with `arguments`, asking for progress.
    pub fn tool(name: &str, arguments: Value, policy: TimeoutPolicy) -> Self {
        let mut params = Map::new();
        params.insert("name".into(), Value::from(name));
        params.insert("arguments".into(), arguments);
        CallSpec {
            method: "tools/call".into(),
            params,
            progress: true,
            policy,
            idempotent: false,
            task: false,
        }
    }

    /// A `subscriptions/listen` with `filter` (`params.notifications`). It has no response
    /// deadline; it is re-opened when its transport is lost.
    pub fn listen(filter: Map<String, Value>) -> Self {
        let mut params = Map::new();
        params.insert("notifications".into(), Value::Object(filter));
        CallSpec {
            method: METHOD_LISTEN.into(),
            params,
            progress: false,
            policy: TimeoutPolicy::none(),
            idempotent: true,
            task: false,
        }
    }

    /// A `tasks/get` of `task_id`, as a call of the application's own (one that resumes a
    /// task it remembers).
    pub fn task_get(task_id: &str) -> Self {
        Self::about_task(METHOD_TASKS_GET, task_id)
    }

    /// An ordinary request about task `task_id` (`tasks/get`, `tasks/cancel`).
    fn about_task(method: &str, task_id: &str) -> Self {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::from(task_id));
        CallSpec {
            method: method.into(),
            params,
            progress: false,
            policy: POLL_POLICY,
            idempotent: false,
            task: false,
        }
    }
}

/// How a request ended for the application. Exactly one per request id.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A result response arrived.
    Result,
    /// An error response arrived.
    Error,
    /// The application cancelled it.
    Cancelled,
    /// The client's timeout fired.
    TimedOut,
    /// Its stream (HTTP) or the pipe (stdio) was lost before the response.
    Lost,
    /// The server asked for input (`input_required`, §7.2): this request is over and a retry
    /// under a new id carries the call on.
    InputRequired,
}

impl Outcome {
    /// `result`, `error`, `cancelled`, `timed_out` or `lost`, as in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Result => "result",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
            Outcome::TimedOut => "timed_out",
            Outcome::Lost => "lost",
            Outcome::InputRequired => "input_required",
        }
    }
}

/// Output towards the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientTransmit {
    /// stdio: write this message as one line.
    Line(Message),
    /// HTTP: POST this message; its response arrives on `stream`.
    Post {
        /// The new stream.
        stream: StreamId,
        /// The message.
        msg: Message,
    },
    /// HTTP: close `stream`, which cancels its request.
    Close {
        /// The stream to close.
        stream: StreamId,
    },
    /// stdio: drop the connection (and start a new one). Only a faulty client does this.
    Disconnect,
    /// HTTP, legacy era: open `stream` with a `GET`: the resume of a broken stream after
    /// `last_event_id`, or (without one) the session's own stream for what the server sends
    /// unasked.
    Get {
        /// The new stream.
        stream: StreamId,
        /// The `Last-Event-ID` header.
        last_event_id: Option<String>,
    },
    /// HTTP, legacy era: end the session with a `DELETE` on `stream` (the host is done and
    /// every POST has its answer, docs/spec/mcp-2025-11-25.md §5).
    Delete {
        /// The new stream.
        stream: StreamId,
    },
}

/// Output towards the application (and the trace).
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// Valid progress for an outstanding request.
    Progress {
        /// The request.
        request: RequestId,
        /// The progress value.
        progress: f64,
        /// The total, if known.
        total: Option<f64>,
    },
    /// The client's timer fired for a request (followed by its `TimedOut` outcome).
    Timeout {
        /// The request.
        request: RequestId,
        /// Which deadline fired.
        reason: TimeoutReason,
    },
    /// The request ended.
    Outcome {
        /// The request.
        request: RequestId,
        /// How.
        outcome: Outcome,
    },
    /// A lost request was re-issued as a new request.
    Retried {
        /// The lost request.
        lost: RequestId,
        /// Its replacement (new id, new token).
        new: RequestId,
    },
}

/// A local API misuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// `cancel` named a request that is not outstanding.
    NotOutstanding(RequestId),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NotOutstanding(id) => write!(f, "request {id} is not outstanding"),
        }
    }
}

impl std::error::Error for ClientError {}

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

/// How a legacy request's broken stream is resumed (docs/spec/mcp-2025-11-25.md §5, LB8,
/// LE18): from the last event id it received, after the `retry` the server asked for.
#[derive(Debug, Clone, Default)]
struct Resume {
    last_event_id: Option<String>,
    retry: Option<Duration>,
    /// When the `GET` goes out (the stream broke and the client waits `retry`).
    at: Option<Time>,
    /// Resumes spent.
    spent: u32,
    /// The server answered 404 for the session it was sent in: its error body is not the
    /// request's outcome; the request is lost when the stream ends.
    expired: bool,
    /// The session the request went out in (a stream of another session cannot be resumed,
    /// nor its request cancelled, in this one).
    session: Option<String>,
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

/// A task the client is waiting on: the call `origin` was answered with a `CreateTaskResult`.
#[derive(Debug, Clone)]
struct ClientTask {
    task_id: String,
    poll_interval: Duration,
    /// When the last poll was sent.
    last_poll: Time,
    /// The poll in flight, if any.
    poll: Option<RequestId>,
    /// `createdAt + ttlMs`, counted from the receipt of the `CreateTaskResult`: the server
    /// may have forgotten the task by then.
    expires: Option<Time>,
    /// The call's own hard bound (its policy's, from the call's send): then the client cancels
    /// the task and gives up.
    deadline: Option<Time>,
    /// The application already has the call's outcome (it cancelled, or the deadline passed):
    /// polls go on only to see the task settle, until [`SETTLE_WATCH`] after that.
    settled: bool,
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
    /// The legacy era's handshake on the current connection.
    handshake: Handshake,
    /// The legacy era's HTTP session, once the initialize response issued one.
    session: Option<String>,
    /// When a message from the server last arrived (the legacy `ping` counts from it).
    last_heard: Time,
    /// The legacy `ping` in flight.
    ping: Option<RequestId>,
    /// The session each HTTP stream not yet answered was opened in (legacy era).
    sent_in: BTreeMap<StreamId, Option<String>>,
    /// Where the host stands with the legacy HTTP session ([`Client::end_session`]).
    ending: SessionEnd,
    /// The era it speaks now: the configured one, or in auto mode the one discovery decided.
    era: Era,
    /// Auto mode: the server answered `server/discover`, so the modern era holds.
    discovered: bool,
    /// Legacy era: the server's own requests being worked on, with when each answer is due
    /// (a cancel from the server drops it unanswered).
    answering: BTreeMap<RequestId, Time>,
    /// The server's requests seen so far: one replayed on a resumed stream is not answered
    /// twice.
    asked: std::collections::BTreeSet<RequestId>,
}

/// The host's word on the legacy HTTP session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SessionEnd {
    /// The host may start more requests.
    Open,
    /// The host is done: the `DELETE` goes out once nothing is outstanding and every POST
    /// has its answer (sent any earlier, it would end the session under a cancel or a
    /// request the server has not read yet).
    Wanted,
    /// The `DELETE` went out; a new request starts a new session.
    Sent,
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
            handshake: match (config.era, config.auto) {
                (Era::Modern, None) => Handshake::Done,
                _ => Handshake::NotStarted,
            },
            session: None,
            last_heard: Time::ZERO,
            ping: None,
            sent_in: BTreeMap::new(),
            ending: SessionEnd::Open,
            era: config.era,
            discovered: false,
            answering: BTreeMap::new(),
            asked: Default::default(),
            config,
        }
    }

    /// The era it speaks: the configured one, or in auto mode the one discovery decided
    /// (modern until it falls back).
    pub fn era(&self) -> Era {
        self.era
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Sends a new request; returns its id. After the session's `DELETE` it opens a new
    /// session.
    pub fn start_request(&mut self, now: Time, spec: CallSpec) -> RequestId {
        if self.ending == SessionEnd::Sent {
            self.session = None;
            self.handshake = Handshake::NotStarted;
        }
        self.ending = SessionEnd::Open;
        let retries = self.config.max_retries;
        self.issue(now, spec, retries, Purpose::Call)
    }

    fn issue(
        &mut self,
        now: Time,
        spec: CallSpec,
        retries_left: u32,
        purpose: Purpose,
    ) -> RequestId {
        self.issue_with_token(now, spec, retries_left, purpose, None)
    }

    /// Sends a request; `reuse` is the token of the faulty retry of
    /// [`Mutant::RetryReusesToken`].
    fn issue_with_token(
        &mut self,
        now: Time,
        spec: CallSpec,
        retries_left: u32,
        purpose: Purpose,
        reuse: Option<ProgressToken>,
    ) -> RequestId {
        let id = RequestId::Number(self.next_id);
        self.next_id += 1;
        let mut request = Request::new(id.clone(), spec.method.clone());
        request.params = spec.params.clone();
        if spec.task {
            request.declare_tasks();
        }
        // A client whose timer resets on progress must ask for progress (opencode #28186).
        let wants_token = spec.progress || spec.policy.reset_timeout_on_progress;
        let token = match wants_token {
            _ if self.mutant(Mutant::ResetWithoutToken) => None,
            true if self.mutant(Mutant::TokenReuseCrosswire) => Some(ProgressToken::from("p-1")),
            true if reuse.is_some() => reuse,
            true => {
                let t = ProgressToken::String(format!("p-{}", self.next_token));
                self.next_token += 1;
                Some(t)
            }
            false => None,
        };
        request.meta.progress_token = token.clone();
        if let Some(t) = &token {
            self.by_token.insert(t.clone(), id.clone());
        }
        self.legacy_shape(&mut request);
        let (stream, transmit) = self.addressed(request.into());
        if let Some(s) = stream {
            self.by_stream.insert(s, id.clone());
        }
        self.push_request(now, &id, transmit);
        let pending = Pending {
            spec,
            token,
            stream,
            sent: now,
            last_progress_at: None,
            last_progress: None,
            retries_left,
            received_any: false,
            purpose,
            rounds: 0,
            acked: false,
            resume: Resume::default(),
        };
        self.pending.insert(id.clone(), pending);
        id
    }

    /// The transmit that carries `msg`: a line on stdio, a POST on a new stream on HTTP.
    fn addressed(&mut self, msg: Message) -> (Option<StreamId>, ClientTransmit) {
        match self.config.transport {
            Transport::Stdio => (None, ClientTransmit::Line(msg)),
            Transport::Http => {
                let stream = StreamId(self.next_stream);
                self.next_stream += 1;
                (Some(stream), ClientTransmit::Post { stream, msg })
            }
        }
    }

    /// A legacy request's shape: its era's version, no capabilities, no modern keys.
    fn legacy_shape(&self, request: &mut Request) {
        if let Era::Legacy(_) = self.era {
            request.meta.protocol_version = self.era.version().into();
            request.meta.client_capabilities.clear();
            request.meta.legacy = true;
        }
    }

    /// Sends a request, or holds it behind a legacy handshake (starting one if none is out).
    fn push_request(&mut self, now: Time, id: &RequestId, transmit: ClientTransmit) {
        if matches!(self.handshake, Handshake::NotStarted) {
            self.start_opening(now, VecDeque::new());
        }
        match &mut self.handshake {
            Handshake::Waiting { queued, .. } => queued.push_back((id.clone(), transmit)),
            _ => self.transmits.push_back(transmit),
        }
    }

    /// Opens a connection with `queued` waiting: the auto mode's `server/discover` while the
    /// era is undecided, else the legacy handshake.
    fn start_opening(&mut self, now: Time, queued: VecDeque<(RequestId, ClientTransmit)>) {
        if self.config.auto.is_some() && !self.discovered && !self.era.is_legacy() {
            self.start_discover(now, queued)
        } else {
            self.start_handshake(now, queued)
        }
    }

    /// Auto mode: sends `server/discover` (in the modern shape), with `queued` waiting.
    fn start_discover(&mut self, now: Time, queued: VecDeque<(RequestId, ClientTransmit)>) {
        let id = RequestId::Number(self.next_id);
        self.next_id += 1;
        let discover = Request::new(id.clone(), "server/discover");
        let (stream, transmit) = self.addressed(discover.into());
        self.transmits.push_back(transmit);
        self.handshake = Handshake::Waiting {
            id,
            probe: true,
            sent: now,
            stream,
            broke: None,
            queued,
        };
    }

    /// Auto mode: the server refused `server/discover` or kept silent. The client speaks
    /// the legacy era from now on: what waited takes the legacy shape and waits behind the
    /// handshake.
    fn fall_back(&mut self, now: Time, mut queued: VecDeque<(RequestId, ClientTransmit)>) {
        let Some(revision) = self.config.auto else {
            return;
        };
        self.era = Era::Legacy(revision);
        for (_, transmit) in &mut queued {
            if let ClientTransmit::Line(Message::Request(r))
            | ClientTransmit::Post {
                msg: Message::Request(r),
                ..
            } = transmit
            {
                self.legacy_shape(r);
            }
        }
        self.start_handshake(now, queued);
    }

    /// Sends `initialize` (legacy era), with `queued` waiting behind it. It is never cancelled
    /// (LA3): after [`HANDSHAKE_TIMEOUT`] the client drops the connection and starts another;
    /// a pipe that breaks starts the next connection's handshake afresh.
    fn start_handshake(&mut self, now: Time, queued: VecDeque<(RequestId, ClientTransmit)>) {
        let id = RequestId::Number(self.next_id);
        self.next_id += 1;
        let mut init = Request::new(id.clone(), "initialize");
        init.params.insert(
            "protocolVersion".into(),
            serde_json::Value::from(self.era.version()),
        );
        // It answers the server's sampling requests (the legacy era's requests to the client).
        init.params
            .insert("capabilities".into(), serde_json::json!({"sampling": {}}));
        init.params.insert(
            "clientInfo".into(),
            serde_json::json!({"name": "mcp-sim", "version": env!("CARGO_PKG_VERSION")}),
        );
        self.legacy_shape(&mut init);
        let (stream, transmit) = self.addressed(init.into());
        self.transmits.push_back(transmit);
        self.handshake = Handshake::Waiting {
            id,
            probe: false,
            sent: now,
            stream,
            broke: None,
            queued,
        };
    }

    /// The handshake's deadline passed: its timeout and outcome, the connection dropped, and
    /// a new handshake with the same requests waiting.
    fn handshake_timer(&mut self, now: Time) {
        let Handshake::Waiting {
            id,
            probe,
            sent,
            stream,
            broke,
            ..
        } = &self.handshake
        else {
            return;
        };
        if let Some(at) = *broke {
            if now < at {
                return;
            }
            let queued = self.end_handshake(Handshake::NotStarted);
            if !queued.is_empty() {
                self.start_opening(now, queued);
            }
            return;
        }
        let (probe, stream) = (*probe, *stream);
        let timeout = if probe {
            DISCOVER_TIMEOUT
        } else {
            HANDSHAKE_TIMEOUT
        };
        if now < *sent + timeout {
            return;
        }
        let id = id.clone();
        let queued = self.end_handshake(Handshake::NotStarted);
        self.events.push_back(ClientEvent::Timeout {
            request: id.clone(),
            reason: TimeoutReason::Idle,
        });
        let id_for_cancel = id.clone();
        self.events.push_back(ClientEvent::Outcome {
            request: id,
            outcome: Outcome::TimedOut,
        });
        if probe {
            // An ordinary modern request given up: cancelled as the modern era cancels (the
            // notification on stdio, the stream's close on HTTP), then the fallback.
            match stream {
                Some(stream) => self.transmits.push_back(ClientTransmit::Close { stream }),
                None => {
                    let mut cancel = Cancelled::new(id_for_cancel);
                    cancel.reason = Some("server/discover unanswered: falling back".into());
                    self.transmits
                        .push_back(ClientTransmit::Line(cancel.into()));
                }
            }
            return self.fall_back(now, queued);
        }
        if self.mutant(Mutant::CancelsInitialize) {
            let mut cancel = Cancelled::new(id_for_cancel);
            cancel.reason = Some("initialize timed out".into());
            let (_, transmit) = self.addressed(cancel.into());
            self.transmits.push_back(transmit);
        }
        if self.config.transport == Transport::Stdio {
            self.transmits.push_back(ClientTransmit::Disconnect);
        }
        // Another connection only for requests still waiting; the next request otherwise.
        if !queued.is_empty() {
            self.start_handshake(now, queued);
        }
    }

    /// Ends the waiting handshake (the client's state becomes `next`) and returns what waited
    /// behind it.
    fn end_handshake(&mut self, next: Handshake) -> VecDeque<(RequestId, ClientTransmit)> {
        match std::mem::replace(&mut self.handshake, next) {
            Handshake::Waiting { queued, .. } => queued,
            _ => VecDeque::new(),
        }
    }

    /// The answer to `initialize`: the handshake's outcome; on a result the client sends
    /// `notifications/initialized` and then what waited, in order; on an error what waited
    /// fails with it. Whether `id` was the handshake's.
    fn handshake_answered(&mut self, now: Time, id: &RequestId, ok: bool) -> bool {
        let Handshake::Waiting {
            id: init, probe, ..
        } = &self.handshake
        else {
            return false;
        };
        if init != id {
            return false;
        }
        let probe = *probe;
        let queued = self.end_handshake(Handshake::Done);
        self.events.push_back(ClientEvent::Outcome {
            request: id.clone(),
            outcome: if ok { Outcome::Result } else { Outcome::Error },
        });
        if probe && !ok {
            self.fall_back(now, queued);
        } else if probe {
            self.discovered = true;
            self.release(now, queued);
        } else if ok {
            let initialized = Notification {
                method: "notifications/initialized".into(),
                params: None,
            };
            let (_, transmit) = self.addressed(initialized.into());
            self.transmits.push_back(transmit);
            // Over HTTP the client offers the server a stream of its own (a server without
            // one answers 405).
            if self.legacy_http() {
                let stream = StreamId(self.next_stream);
                self.next_stream += 1;
                self.transmits.push_back(ClientTransmit::Get {
                    stream,
                    last_event_id: None,
                });
            }
            self.release(now, queued);
        } else {
            for (queued_id, _) in queued {
                if self.finish(&queued_id).is_some() {
                    self.events.push_back(ClientEvent::Outcome {
                        request: queued_id,
                        outcome: Outcome::Error,
                    });
                }
            }
            self.handshake = Handshake::NotStarted;
        }
        true
    }

    /// What waited behind the opening goes on the wire now, and its timers count from now.
    fn release(&mut self, now: Time, queued: VecDeque<(RequestId, ClientTransmit)>) {
        for (queued_id, transmit) in queued {
            if let Some(p) = self.pending.get_mut(&queued_id) {
                p.sent = now;
            }
            self.transmits.push_back(transmit);
        }
    }

    /// Whether `id` still waits behind the handshake (never sent): then giving up on it sends
    /// nothing, and it leaves the queue.
    fn unqueue(&mut self, id: &RequestId) -> bool {
        let Handshake::Waiting { queued, .. } = &mut self.handshake else {
            return false;
        };
        let before = queued.len();
        queued.retain(|(q, _)| q != id);
        queued.len() != before
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
        match &self.handshake {
            Handshake::Waiting {
                id: init, probe, ..
            } if init == id => Some(TimeoutPolicy::fixed(if *probe {
                DISCOVER_TIMEOUT
            } else {
                HANDSHAKE_TIMEOUT
            })),
            _ => self.pending.get(id).map(|p| p.spec.policy),
        }
    }

    /// Number of outstanding requests and tasks, and a legacy handshake still waiting.
    pub fn outstanding(&self) -> usize {
        let handshake = usize::from(matches!(self.handshake, Handshake::Waiting { .. }));
        self.pending.len() + self.tasks.len() + handshake
    }

    /// A message arrived: on the pipe (stdio, `stream` is `None`) or on a response stream.
    pub fn handle_message(&mut self, now: Time, stream: Option<StreamId>, msg: Message) {
        self.last_heard = now;
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
            Message::Cancelled(c) if self.answering.remove(&c.request_id).is_some() => {}
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
            Message::Request(r) if self.era.is_legacy() => self.server_request(now, r),
            // Other notifications, and a server-sent request outside the legacy era, carry
            // nothing this client acts on.
            Message::Notification(_) | Message::Request(_) => {}
        }
    }

    /// Legacy era: a request of the server's own (docs/spec/mcp-2025-11-25.md LB7). `ping`
    /// and `roots/list` are answered at once, `sampling/createMessage` after the host's
    /// model took [`SAMPLING_DELAY`], anything else with -32601.
    fn server_request(&mut self, now: Time, r: Request) {
        if !self.asked.insert(r.id.clone()) {
            return;
        }
        if r.method == "sampling/createMessage" {
            self.answering.insert(r.id, now + SAMPLING_DELAY);
            return;
        }
        let answer: Message = match &*r.method {
            "ping" => legacy_result(r.id, Map::new()).into(),
            "roots/list" => {
                let roots = serde_json::json!({"roots": []});
                legacy_result(r.id, roots.as_object().cloned().unwrap_or_default()).into()
            }
            _ => crate::wire::ErrorResponse::new(
                Some(r.id),
                codes::METHOD_NOT_FOUND,
                "Method not found",
            )
            .into(),
        };
        let (_, transmit) = self.addressed(answer);
        self.transmits.push_back(transmit);
    }

    /// The answers of the host's model that are due at `now`.
    fn answer_timers(&mut self, now: Time) {
        let due: Vec<RequestId> = self
            .answering
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            self.answering.remove(&id);
            let sampled = serde_json::json!({
                "role": "assistant",
                "content": {"type": "text", "text": "The step is done."},
                "model": "mcp-sim",
                "stopReason": "endTurn",
            });
            let answer = legacy_result(id, sampled.as_object().cloned().unwrap_or_default());
            let (_, transmit) = self.addressed(answer.into());
            self.transmits.push_back(transmit);
        }
    }

    /// A result: for a call, a final result, an `input_required` round or a task; for a poll,
    /// the task's state.
    fn handle_result(&mut self, now: Time, stream: Option<StreamId>, r: ResultResponse) {
        if self.handshake_answered(now, &r.id, true) {
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

    /// The call whose task the outstanding request `id` polls, if it is a poll.
    fn poll_origin(&self, id: &RequestId) -> Option<RequestId> {
        match &self.pending.get(id)?.purpose {
            Purpose::Poll { origin } => Some(origin.clone()),
            _ => None,
        }
    }

    /// An `input_required` round: the request is over; the retry answers every input request
    /// and echoes `requestState` (§7.2).
    fn answer_input(&mut self, now: Time, r: &ResultResponse) {
        let Some(pending) = self.finish(&r.id) else {
            return;
        };
        self.events.push_back(ClientEvent::Outcome {
            request: r.id.clone(),
            outcome: Outcome::InputRequired,
        });
        if pending.rounds >= MAX_ROUNDS_ANSWERED {
            return;
        }
        let mut spec = pending.spec.clone();
        spec.params.remove("inputResponses");
        spec.params.remove("requestState");
        if let Some(requests) = r.result.get("inputRequests").and_then(Value::as_object) {
            let answers: Map<String, Value> = requests
                .keys()
                .map(|k| {
                    let accept = serde_json::json!({"action": "accept", "content": {"ok": true}});
                    (k.clone(), accept)
                })
                .collect();
            spec.params
                .insert("inputResponses".into(), Value::Object(answers));
        }
        if let Some(state) = r.result.get("requestState") {
            if !self.mutant(Mutant::RequestStateDropped) {
                spec.params.insert("requestState".into(), state.clone());
            }
        }
        let reuse = pending
            .token
            .clone()
            .filter(|_| self.mutant(Mutant::RetryReusesToken));
        let new = self.issue_with_token(now, spec, pending.retries_left, Purpose::Call, reuse);
        if let Some(p) = self.pending.get_mut(&new) {
            p.rounds = pending.rounds + 1;
        }
        self.events.push_back(ClientEvent::Retried {
            lost: r.id.clone(),
            new,
        });
    }

    /// A poll of the task of `origin` ended: a terminal status ends the call, anything else
    /// (a working status, an error, a lost poll) waits for the next poll.
    fn polled(&mut self, origin: &RequestId, poll: &RequestId, status: Option<TaskStatus>) {
        let Some(task) = self.tasks.get_mut(origin) else {
            return;
        };
        if task.poll.as_ref() == Some(poll) {
            task.poll = None;
        }
        let outcome = match status {
            Some(TaskStatus::Completed) => Outcome::Result,
            Some(TaskStatus::Failed) => Outcome::Error,
            Some(TaskStatus::Cancelled) => Outcome::Cancelled,
            Some(TaskStatus::Working) | None => return,
        };
        self.end_task(origin, outcome);
    }

    fn end_task(&mut self, origin: &RequestId, outcome: Outcome) {
        if let Some(task) = self.tasks.remove(origin) {
            if !task.settled {
                self.events.push_back(ClientEvent::Outcome {
                    request: origin.clone(),
                    outcome,
                });
            }
        }
    }

    /// The application cancels the task of `origin`, or its deadline passed: `tasks/cancel`, and
    /// the call ends with `outcome` at once; polls go on until the task settles, for
    /// [`SETTLE_WATCH`] at most. The faulty client sends `notifications/cancelled` for the call.
    fn cancel_task(&mut self, now: Time, origin: &RequestId, outcome: Outcome) {
        let Some(task) = self.tasks.get_mut(origin) else {
            return;
        };
        task.settled = true;
        task.expires = Some(
            task.expires
                .map_or(now + SETTLE_WATCH, |e| e.min(now + SETTLE_WATCH)),
        );
        let task_id = task.task_id.clone();
        if self.mutant(Mutant::CancelTaskWithNotification) {
            let mut cancel = Cancelled::new(origin.clone());
            cancel.reason = Some("cancelled by the application".into());
            let msg: Message = cancel.into();
            let t = match self.config.transport {
                Transport::Stdio => ClientTransmit::Line(msg),
                Transport::Http => {
                    let stream = StreamId(self.next_stream);
                    self.next_stream += 1;
                    ClientTransmit::Post { stream, msg }
                }
            };
            self.transmits.push_back(t);
        } else {
            let spec = CallSpec::about_task(METHOD_TASKS_CANCEL, &task_id);
            self.issue(now, spec, 0, Purpose::TaskCancel);
        }
        self.events.push_back(ClientEvent::Outcome {
            request: origin.clone(),
            outcome,
        });
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
        self.sent_in.remove(&stream);
        if let Handshake::Waiting {
            id,
            stream: Some(s),
            broke,
            ..
        } = &mut self.handshake
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
        if self.legacy_http() && !self.mutant(Mutant::DropsResumable) {
            let retry = if self.mutant(Mutant::ResumesBeforeRetry) {
                Duration::ZERO
            } else {
                self.pending
                    .get(&id)
                    .and_then(|p| p.resume.retry)
                    .unwrap_or(DEFAULT_RETRY)
            };
            let session = self.session.clone();
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

    /// HTTP, legacy era: an SSE event on `stream` had the id `event_id`, with `retry_ms` the
    /// reconnection time in force. Its request resumes from there if the stream breaks.
    pub fn handle_event_id(&mut self, stream: StreamId, event_id: &str, retry_ms: Option<u64>) {
        let Some(p) = self
            .by_stream
            .get(&stream)
            .and_then(|id| self.pending.get_mut(id))
        else {
            return;
        };
        p.resume.last_event_id = Some(event_id.to_owned());
        if let Some(ms) = retry_ms {
            p.resume.retry = Some(Duration::from_millis(ms));
        }
    }

    /// HTTP: the response on `stream` came with `status`. In the legacy era an error status
    /// ends any hope of resuming its request, and a 404 to a request sent in the current
    /// session means the server forgot the session: the client initializes a new one, and the
    /// request is lost (and re-issued in the new session if it may be, LA5).
    pub fn handle_status(&mut self, now: Time, stream: StreamId, status: u16) {
        if status >= 400 && self.probe_refused(now, stream) {
            return;
        }
        let sent_in = self.sent_in.remove(&stream);
        if status < 400 || !self.legacy_http() {
            return;
        }
        let id = self.by_stream.get(&stream).cloned();
        if let Some(p) = id.as_ref().and_then(|id| self.pending.get_mut(id)) {
            p.resume.last_event_id = None;
        }
        let expired =
            status == 404 && self.session.is_some() && sent_in == Some(self.session.clone());
        if expired {
            self.session = None;
            // The server that asked forgot the session: its requests have no one to answer.
            self.answering.clear();
            if matches!(self.handshake, Handshake::Done) {
                self.handshake = Handshake::NotStarted;
            }
            if let Some(p) = id.and_then(|id| self.pending.get_mut(&id)) {
                p.resume.expired = true;
            }
            // A stream of the forgotten session cannot be resumed in a new one.
            let waiting: Vec<RequestId> = self
                .pending
                .iter()
                .filter(|(_, p)| p.resume.at.is_some())
                .map(|(id, _)| id.clone())
                .collect();
            for id in waiting {
                self.lose(now, &id);
            }
        }
    }

    /// Auto mode over HTTP: an error status on the `server/discover` stream refuses it,
    /// whatever its body (the TypeScript SDK v1 answers 400 with a null id). Whether it did.
    fn probe_refused(&mut self, now: Time, stream: StreamId) -> bool {
        let Handshake::Waiting {
            id,
            probe: true,
            stream: Some(s),
            ..
        } = &self.handshake
        else {
            return false;
        };
        if *s != stream {
            return false;
        }
        let id = id.clone();
        let queued = self.end_handshake(Handshake::NotStarted);
        self.events.push_back(ClientEvent::Outcome {
            request: id,
            outcome: Outcome::Error,
        });
        self.fall_back(now, queued);
        true
    }

    /// HTTP, legacy era: the initialize response issued the session `id`; every later request
    /// carries it (LA5).
    pub fn handle_session(&mut self, id: &str) {
        if self.era.is_legacy() {
            self.session = Some(id.to_owned());
        }
    }

    /// The legacy era's HTTP session, once issued.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The headers of the POST carrying `msg` (names in lower case): 2026-07-28's
    /// (`wire::http::request_headers`), or in the legacy era `Accept`, `Content-Type`, the
    /// session id once issued and, after the handshake, the negotiated `MCP-Protocol-Version`
    /// (2025-06-18 and later).
    pub fn post_headers(&self, msg: &Message) -> std::collections::BTreeMap<String, String> {
        if !self.era.is_legacy() {
            return crate::wire::http::request_headers(msg);
        }
        let mut h = self.legacy_headers();
        h.insert("content-type".into(), "application/json".into());
        h.insert("accept".into(), crate::wire::http::ACCEPT.into());
        h
    }

    /// The headers of a legacy `GET` (a resume after `last_event_id`, or the session's own
    /// stream).
    pub fn get_headers(
        &self,
        last_event_id: Option<&str>,
    ) -> std::collections::BTreeMap<String, String> {
        let mut h = self.legacy_headers();
        h.insert("accept".into(), "text/event-stream".into());
        if let Some(id) = last_event_id {
            h.insert("last-event-id".into(), id.to_owned());
        }
        h
    }

    /// The headers of the session's `DELETE`: its id and the negotiated version.
    pub fn delete_headers(&self) -> std::collections::BTreeMap<String, String> {
        self.legacy_headers()
    }

    fn legacy_headers(&self) -> std::collections::BTreeMap<String, String> {
        let mut h = std::collections::BTreeMap::new();
        if let (Some(id), false) = (&self.session, self.mutant(Mutant::NoSessionId)) {
            h.insert("mcp-session-id".into(), id.clone());
        }
        let versioned = matches!(self.era, Era::Legacy(r) if r >= LegacyRevision::V2025_06_18);
        if versioned && matches!(self.handshake, Handshake::Done) {
            h.insert("mcp-protocol-version".into(), self.era.version().into());
        }
        h
    }

    fn legacy_http(&self) -> bool {
        self.era.is_legacy() && self.config.transport == Transport::Http
    }

    /// When the legacy client pings next: [`PING_AFTER`] after it last heard from the server,
    /// while a call is outstanding, the handshake is done and no ping is in flight.
    fn ping_due(&self) -> Option<Time> {
        let waiting = self.pending.values().any(|p| p.purpose == Purpose::Call);
        let ready = self.era.is_legacy()
            && matches!(self.handshake, Handshake::Done)
            && self.ping.is_none()
            && waiting;
        ready.then_some(self.last_heard + PING_AFTER)
    }

    fn ping_timer(&mut self, now: Time) {
        if self.ping_due().is_none_or(|at| at > now) {
            return;
        }
        let spec = CallSpec {
            method: "ping".into(),
            params: Map::new(),
            progress: false,
            policy: PING_POLICY,
            idempotent: false,
            task: false,
        };
        // The next ping counts from this one, answered or not.
        self.last_heard = now;
        let id = self.issue(now, spec, 0, Purpose::Ping);
        self.ping = Some(id);
    }

    /// Legacy requests whose `retry` wait is over: each resumes on a new `GET`.
    fn resume_timers(&mut self, now: Time) {
        let due: Vec<RequestId> = self
            .pending
            .iter()
            .filter(|(_, p)| p.resume.at.is_some_and(|at| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let stream = StreamId(self.next_stream);
            self.next_stream += 1;
            let Some(p) = self.pending.get_mut(&id) else {
                continue;
            };
            p.resume.at = None;
            p.resume.spent += 1;
            p.stream = Some(stream);
            let last_event_id = p.resume.last_event_id.clone();
            self.by_stream.insert(stream, id);
            self.transmits.push_back(ClientTransmit::Get {
                stream,
                last_event_id,
            });
        }
    }

    /// stdio: the pipe broke (the server exited). Every outstanding request is lost.
    pub fn handle_disconnect(&mut self, now: Time) {
        self.reset_handshake();
        // The server that asked is gone with the pipe.
        self.answering.clear();
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

    /// A new connection (legacy era): its first request starts a new handshake. What waited
    /// behind the old one is outstanding and is lost (or retried) with the connection.
    fn reset_handshake(&mut self) {
        // A modern connection has no handshake (once auto mode's discovery is done).
        if matches!(self.handshake, Handshake::Done) && !self.era.is_legacy() {
            return;
        }
        if let Handshake::Waiting {
            id, broke: None, ..
        } = std::mem::replace(&mut self.handshake, Handshake::NotStarted)
        {
            // The handshake went with its connection (one whose stream broke was already
            // reported lost).
            self.events.push_back(ClientEvent::Outcome {
                request: id,
                outcome: Outcome::Lost,
            });
        }
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
        if self.ping.as_ref() == Some(id) {
            self.ping = None;
        }
        if let Some(t) = &pending.token {
            self.by_token.remove(t);
        }
        if let Some(s) = pending.stream {
            self.by_stream.remove(&s);
        }
        Some(pending)
    }

    /// Sends the transport's cancellation and reports `outcome`.
    fn abandon(&mut self, _now: Time, id: &RequestId, reason: String, outcome: Outcome) {
        let Some(pending) = self.finish(id) else {
            return;
        };
        self.abandoned.insert(id.clone());
        if self.unqueue(id) {
            self.events.push_back(ClientEvent::Outcome {
                request: id.clone(),
                outcome,
            });
            return;
        }
        match pending.stream {
            Some(stream)
                if self.mutant(Mutant::CancelBlockedByPendingPost) && !pending.received_any =>
            {
                self.deferred_close.insert(stream);
            }
            // The legacy era cancels by notification on HTTP too (a POST answered 202); the
            // stream, of no more use, is dropped after it.
            // A request of a session the server forgot has nothing left to cancel; a server
            // that issued no session (the Python SDK's stateless mode) still gets the cancel.
            stream if self.legacy_http() => {
                let same_session = pending.resume.session == self.session;
                if same_session {
                    let mut cancel = Cancelled::new(id.clone());
                    cancel.reason = Some(reason);
                    let (_, post) = self.addressed(cancel.into());
                    self.transmits.push_back(post);
                }
                if let Some(stream) = stream {
                    self.transmits.push_back(ClientTransmit::Close { stream });
                }
            }
            Some(stream) => self.transmits.push_back(ClientTransmit::Close { stream }),
            None => {
                let mut cancel = Cancelled::new(id.clone());
                cancel.reason = Some(reason);
                self.transmits
                    .push_back(ClientTransmit::Line(cancel.into()));
            }
        }
        self.events.push_back(ClientEvent::Outcome {
            request: id.clone(),
            outcome,
        });
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
        let handshake = match &self.handshake {
            Handshake::Waiting {
                broke: Some(at), ..
            } => Some(*at),
            Handshake::Waiting {
                sent, probe: true, ..
            } => Some(*sent + DISCOVER_TIMEOUT),
            Handshake::Waiting { sent, .. } => Some(*sent + HANDSHAKE_TIMEOUT),
            _ => None,
        };
        let resumes = self.pending.values().filter_map(|p| p.resume.at);
        let ping = self.ping_due();
        let answers = self.answering.values().copied();
        requests
            .chain(answers)
            .chain(tasks)
            .chain(handshake)
            .chain(resumes)
            .chain(ping)
            .min()
    }

    /// Polls due and tasks past their `ttlMs` at `now`.
    fn task_timers(&mut self, now: Time) {
        let origins: Vec<RequestId> = self.tasks.keys().cloned().collect();
        for origin in origins {
            let Some(task) = self.tasks.get(&origin) else {
                continue;
            };
            if task.expires.is_some_and(|e| e <= now) {
                self.end_task(&origin, Outcome::TimedOut);
                continue;
            }
            if !task.settled && task.deadline.is_some_and(|d| d <= now) {
                self.cancel_task(now, &origin, Outcome::TimedOut);
                continue;
            }
            if task.poll.is_some() || task.last_poll + task.poll_interval > now {
                continue;
            }
            let spec = CallSpec::about_task(METHOD_TASKS_GET, &task.task_id);
            let poll = self.issue(
                now,
                spec,
                0,
                Purpose::Poll {
                    origin: origin.clone(),
                },
            );
            if let Some(task) = self.tasks.get_mut(&origin) {
                task.poll = Some(poll);
                task.last_poll = now;
            }
        }
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

    /// The host is done: over legacy HTTP the client ends its session with a `DELETE` once
    /// nothing is outstanding and every POST has its answer (nothing elsewhere; a trace
    /// cannot tell when a host is done, so no rule asks for it).
    pub fn end_session(&mut self) {
        if self.ending == SessionEnd::Open {
            self.ending = SessionEnd::Wanted;
        }
    }

    /// The session's `DELETE`, if it is due now.
    fn session_delete(&mut self) -> Option<ClientTransmit> {
        let idle = self.pending.is_empty()
            && self.answering.is_empty()
            && self.tasks.is_empty()
            && self.sent_in.is_empty()
            && self.transmits.is_empty();
        let due = self.ending == SessionEnd::Wanted
            && self.legacy_http()
            && self.session.is_some()
            && matches!(self.handshake, Handshake::Done)
            && idle;
        if !due {
            return None;
        }
        self.ending = SessionEnd::Sent;
        let stream = StreamId(self.next_stream);
        self.next_stream += 1;
        Some(ClientTransmit::Delete { stream })
    }

    /// The next message or stream action for the peer.
    pub fn poll_transmit(&mut self) -> Option<ClientTransmit> {
        let t = match self.transmits.pop_front() {
            Some(t) => t,
            None => self.session_delete()?,
        };
        if let (
            ClientTransmit::Post { stream, .. }
            | ClientTransmit::Get { stream, .. }
            | ClientTransmit::Delete { stream },
            true,
        ) = (&t, self.legacy_http())
        {
            self.sent_in.insert(*stream, self.session.clone());
        }
        if let ClientTransmit::Post {
            msg: Message::Request(r),
            ..
        } = &t
        {
            if let Some(p) = self.pending.get_mut(&r.id) {
                p.resume.session = self.session.clone();
            }
        }
        Some(t)
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }
}

/// A result in the legacy shape (no `resultType`).
fn legacy_result(id: RequestId, result: Map<String, Value>) -> ResultResponse {
    ResultResponse {
        id,
        result_type: None,
        result,
    }
}
