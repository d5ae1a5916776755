//! What the client hands out: transmits towards the server, events towards the
//! application, each request's outcome, and API misuse.

use std::fmt;

use crate::model::policy::TimeoutReason;
use crate::model::StreamId;
use crate::wire::{Message, RequestId};

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
