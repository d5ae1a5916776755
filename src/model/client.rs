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
//! application per request id (digest §3.3 items 5 and 7, §9 rules 20, 27, 28).
//!
//! Ids are integers counting from 1 and tokens are strings `p-N`; neither is ever reused in a
//! run (host policy, digest §1.2 and §6), so a stray message from an old attempt can never be
//! mistaken for a new one.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use serde_json::{Map, Value};

use super::policy::{TimeoutPolicy, TimeoutReason};
use super::{StreamId, Transport};
use crate::model::mutant::{Mutant, MutantSet};
use crate::time::Time;
use crate::wire::{Cancelled, Message, ProgressToken, Request, RequestId};

/// Client configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The transport.
    pub transport: Transport,
    /// How many times an idempotent request lost with its stream or pipe is re-issued.
    pub max_retries: u32,
    /// Faulty behaviours switched on (none for the reference client).
    pub mutants: MutantSet,
}

impl ClientConfig {
    /// A client on `transport` that re-issues lost idempotent requests once.
    pub fn new(transport: Transport) -> Self {
        ClientConfig {
            transport,
            max_retries: 1,
            mutants: MutantSet::NONE,
        }
    }
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
    transmits: VecDeque<ClientTransmit>,
    events: VecDeque<ClientEvent>,
}

impl Client {
    /// A client with nothing outstanding.
    pub fn new(config: ClientConfig) -> Self {
        Client {
            config,
            next_id: 1,
            next_token: 1,
            next_stream: 1,
            pending: BTreeMap::new(),
            by_token: BTreeMap::new(),
            by_stream: BTreeMap::new(),
            abandoned: Default::default(),
            deferred_close: Default::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Sends a new request; returns its id.
    pub fn start_request(&mut self, now: Time, spec: CallSpec) -> RequestId {
        let retries = self.config.max_retries;
        self.issue(now, spec, retries)
    }

    fn issue(&mut self, now: Time, spec: CallSpec, retries_left: u32) -> RequestId {
        let id = RequestId::Number(self.next_id);
        self.next_id += 1;
        let mut request = Request::new(id.clone(), spec.method.clone());
        request.params = spec.params.clone();
        // A client whose timer resets on progress must ask for progress (opencode #28186).
        let wants_token = spec.progress || spec.policy.reset_timeout_on_progress;
        let token = match wants_token {
            _ if self.mutant(Mutant::ResetWithoutToken) => None,
            true if self.mutant(Mutant::TokenReuseCrosswire) => Some(ProgressToken::from("p-1")),
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
        let stream = match self.config.transport {
            Transport::Stdio => {
                self.transmits
                    .push_back(ClientTransmit::Line(request.into()));
                None
            }
            Transport::Http => {
                let stream = StreamId(self.next_stream);
                self.next_stream += 1;
                self.by_stream.insert(stream, id.clone());
                self.transmits.push_back(ClientTransmit::Post {
                    stream,
                    msg: request.into(),
                });
                Some(stream)
            }
        };
        let pending = Pending {
            spec,
            token,
            stream,
            sent: now,
            last_progress_at: None,
            last_progress: None,
            retries_left,
            received_any: false,
        };
        self.pending.insert(id.clone(), pending);
        id
    }

    /// The application cancels an outstanding request.
    pub fn cancel(&mut self, now: Time, id: &RequestId) -> Result<(), ClientError> {
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

    /// Whether `id` is still waiting for its response.
    pub fn is_outstanding(&self, id: &RequestId) -> bool {
        self.pending.contains_key(id)
    }

    /// The timeout policy of an outstanding request (recorded in traces with its send).
    pub fn policy_of(&self, id: &RequestId) -> Option<TimeoutPolicy> {
        self.pending.get(id).map(|p| p.spec.policy)
    }

    /// Number of outstanding requests.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// A message arrived: on the pipe (stdio, `stream` is `None`) or on a response stream.
    pub fn handle_message(&mut self, now: Time, stream: Option<StreamId>, msg: Message) {
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
            Message::Result(r) => self.handle_response(now, stream, r.id, Outcome::Result),
            // An error without id answers something unreadable we sent; nothing to match.
            Message::Error(e) => {
                if let Some(id) = e.id {
                    self.handle_response(now, stream, id, Outcome::Error);
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
            // Server-sent cancellations only end listen streams; other notifications and any
            // server-sent request carry nothing this client acts on.
            Message::Cancelled(_) | Message::Notification(_) | Message::Request(_) => {}
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
        if stream.is_some() && stream != pending.stream {
            return;
        }
        self.finish(&id);
        self.events.push_back(ClientEvent::Outcome {
            request: id,
            outcome,
        });
    }

    /// HTTP: a response stream ended. If its request had no response yet, the request is lost.
    pub fn handle_stream_closed(&mut self, now: Time, stream: StreamId) {
        if let Some(id) = self.by_stream.get(&stream).cloned() {
            self.lose(now, &id);
        }
    }

    /// stdio: the pipe broke (the server exited). Every outstanding request is lost.
    pub fn handle_disconnect(&mut self, now: Time) {
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
        if pending.spec.idempotent && pending.retries_left > 0 {
            let new = self.issue(now, pending.spec, pending.retries_left - 1);
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
        match pending.stream {
            Some(stream)
                if self.mutant(Mutant::CancelBlockedByPendingPost) && !pending.received_any =>
            {
                self.deferred_close.insert(stream);
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
        self.pending
            .values()
            .filter_map(|p| self.deadline(p))
            .map(|(t, _)| t)
            .min()
    }

    /// Fires every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Time) {
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
                || self.mutant(Mutant::RetryWithoutCancel);
            if !silent {
                let text = format!("client {} timeout", reason.as_str());
                self.abandon(now, &id, text, Outcome::TimedOut);
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
                let new = self.issue(now, pending.spec, pending.retries_left - 1);
                self.events
                    .push_back(ClientEvent::Retried { lost: id, new });
            }
        }
    }

    /// The next message or stream action for the peer.
    pub fn poll_transmit(&mut self) -> Option<ClientTransmit> {
        self.transmits.pop_front()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }
}
