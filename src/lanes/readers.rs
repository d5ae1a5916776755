//! How a peer's output becomes input, one chunk at a time and without I/O: a stdio stream
//! into lines ([`StdioReader`]), a Streamable HTTP response body into messages, comments and
//! its end ([`ResponseReader`]).
//!
//! The live and turmoil lanes read stdio with [`StdioReader`] and response bodies, through
//! the HTTP exchange they share, with [`ResponseReader`]; the `live_output` fuzz target feeds
//! them arbitrary bytes cut at arbitrary points
//! (`mcp_sim::fuzzing::live_output`): what a real peer writes is input the user does not
//! control, so the readers are kept free of the runtime that delivers it.

use crate::framing::ndjson::{LineDecoder, LineOptions};
use crate::framing::sse::{ClientSseFramer, SseItem};
use crate::trace::WireEvent;

use super::recorder;

/// What one HTTP exchange yields, in order: a status, then messages and comments, then the
/// end or a cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeItem {
    /// The response status and `Content-Type`.
    Status {
        /// The status code.
        status: u16,
        /// The `Content-Type`, if any.
        content_type: Option<String>,
        /// The `Mcp-Session-Id` it issued, if any (the legacy era's sessions).
        session: Option<String>,
    },
    /// An SSE event's `id` and the `retry` in force, just before the event's message; alone
    /// (`primes`) for an event with an id and empty data, the legacy era's priming event.
    /// Only events with an `id` field yield one.
    EventId {
        /// The event's id.
        id: String,
        /// The `retry` in force, in ms.
        retry_ms: Option<u64>,
        /// The event carried no data: nothing follows it.
        primes: bool,
    },
    /// One message's text: an SSE event's data, a JSON body, or a framing error's description.
    Message(Vec<u8>),
    /// An SSE comment (keep-alive).
    Comment,
    /// The response ended normally.
    Ended,
    /// The connection failed or was cut before the response ended.
    Cut,
}

/// Whether a `Content-Type` is `text/event-stream`, parameters aside.
pub fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|c| {
        c.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
    })
}

/// A response body as the client reads it: SSE events and comments as they complete when the
/// response is an event stream, otherwise the whole body as one message at its end.
#[derive(Debug)]
pub struct ResponseReader {
    framer: Option<ClientSseFramer>,
    json: Vec<u8>,
}

impl ResponseReader {
    /// A reader for a response with this `Content-Type`; `crlf_chunk_split_bug` makes the SSE
    /// framer faulty (the framer mutant).
    pub fn new(content_type: Option<&str>, crlf_chunk_split_bug: bool) -> Self {
        ResponseReader {
            framer: is_event_stream(content_type)
                .then(|| ClientSseFramer::new(crlf_chunk_split_bug)),
            json: Vec::new(),
        }
    }

    /// One chunk of the body; hands what it completes to `emit`.
    pub fn push(&mut self, data: &[u8], mut emit: impl FnMut(ExchangeItem)) {
        let Some(framer) = &mut self.framer else {
            self.json.extend_from_slice(data);
            return;
        };
        framer.push(data);
        while let Some(item) = framer.next_item() {
            let out = match item {
                Ok(SseItem::Event(e)) => {
                    let retry_ms = framer.retry();
                    if e.has_id {
                        let primes = e.data.is_empty();
                        emit(ExchangeItem::EventId {
                            id: e.last_event_id,
                            retry_ms,
                            primes,
                        });
                        if primes {
                            continue;
                        }
                    }
                    ExchangeItem::Message(e.data.into_bytes())
                }
                Ok(SseItem::Comment(_)) => ExchangeItem::Comment,
                Err(e) => ExchangeItem::Message(e.to_string().into_bytes()),
            };
            emit(out);
        }
    }

    /// The body ended normally: a JSON body's message (if it had any bytes), then
    /// [`ExchangeItem::Ended`]. An unfinished SSE event is dropped, as WHATWG drops it.
    pub fn finish(self, mut emit: impl FnMut(ExchangeItem)) {
        if !self.json.is_empty() {
            emit(ExchangeItem::Message(self.json));
        }
        emit(ExchangeItem::Ended);
    }
}

/// A peer's stdio stream: whole lines, and a framing error's description (as the raw payload
/// it is recorded as) where a line breaks the framing.
#[derive(Debug)]
pub struct StdioReader {
    lines: LineDecoder,
}

impl Default for StdioReader {
    fn default() -> Self {
        StdioReader {
            lines: LineDecoder::new(LineOptions::default()),
        }
    }
}

impl StdioReader {
    /// A reader with the given line options.
    pub fn new(opts: LineOptions) -> Self {
        StdioReader {
            lines: LineDecoder::new(opts),
        }
    }

    /// One chunk of the stream: the lines it completes, in order.
    #[allow(clippy::result_large_err)]
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Result<Vec<u8>, WireEvent>> {
        recorder::stdio_lines(&mut self.lines, bytes)
    }

    /// The stream ended: a truncated last line, recorded rather than dropped.
    pub fn finish(&mut self) -> Option<WireEvent> {
        recorder::stdio_end(&mut self.lines)
    }
}
