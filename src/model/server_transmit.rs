//! What the reference server hands its lane: a stdio line, or a part of an HTTP response.
//! Its own module so that the layers between the server and the wire (the legacy era's
//! resumable streams, [`super::resume`]) can rewrite it without depending on the server.

use super::StreamId;
use crate::wire::Message;

/// Output towards the client.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerTransmit {
    /// stdio: write this message as one line.
    Line(Message),
    /// HTTP: answer the POST on `stream` with `200`, `text/event-stream` and
    /// `X-Accel-Buffering: no`.
    SseStart {
        /// The stream.
        stream: StreamId,
    },
    /// HTTP: one SSE event carrying `msg`.
    SseEvent {
        /// The stream.
        stream: StreamId,
        /// The message.
        msg: Message,
        /// The event's `id` (the legacy era's resumable streams; none in the modern era).
        event_id: Option<String>,
    },
    /// HTTP, legacy era (2025-11-25): the priming event, an `id` with empty data and the
    /// `retry` the client waits before it resumes.
    SsePrime {
        /// The stream.
        stream: StreamId,
        /// The event's id.
        event_id: String,
        /// The `retry` field, in milliseconds.
        retry_ms: Option<u64>,
    },
    /// HTTP: an SSE comment (a keep-alive; not progress).
    SseComment {
        /// The stream.
        stream: StreamId,
    },
    /// HTTP: end the SSE stream.
    SseEnd {
        /// The stream.
        stream: StreamId,
    },
    /// HTTP: a complete `application/json` response with `status`, ending the exchange.
    Json {
        /// The stream.
        stream: StreamId,
        /// The HTTP status.
        status: u16,
        /// The message.
        msg: Message,
        /// The `Mcp-Session-Id` the answer issues (a legacy `initialize` over HTTP).
        session: Option<String>,
    },
    /// HTTP: `202 Accepted` with no body, for a notification POST or the session's `DELETE`.
    Accepted {
        /// The stream.
        stream: StreamId,
    },
}

impl ServerTransmit {
    /// The HTTP stream this transmit is part of (`None`: a stdio line).
    pub fn stream(&self) -> Option<StreamId> {
        match self {
            ServerTransmit::Line(_) => None,
            ServerTransmit::SseStart { stream }
            | ServerTransmit::SseEvent { stream, .. }
            | ServerTransmit::SsePrime { stream, .. }
            | ServerTransmit::SseComment { stream }
            | ServerTransmit::SseEnd { stream }
            | ServerTransmit::Json { stream, .. }
            | ServerTransmit::Accepted { stream } => Some(*stream),
        }
    }

    /// The message it carries, if it carries one.
    pub fn message(&self) -> Option<&Message> {
        match self {
            ServerTransmit::Line(msg)
            | ServerTransmit::SseEvent { msg, .. }
            | ServerTransmit::Json { msg, .. } => Some(msg),
            _ => None,
        }
    }
}
