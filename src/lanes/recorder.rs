//! What a peer reads, writes and tells its application becomes trace events here, the same
//! way in every lane: the in-memory driver, the turmoil hosts, the recording streams a custom
//! server is handed, and the live probe. A rule that judges a trace from one lane therefore
//! judges a trace from any other by the same shapes.
//!
//! Text from a real peer (the live lane) is recorded as it was written (its JSON, or its text
//! when it is not JSON), never as a re-encoding of what the model decoded: an unknown member
//! or an odd number is evidence the oracle must see ([`observe_as_written`]). In the simulated
//! lanes the text comes from the model's own encoder, so the decoded message is recorded
//! ([`observe`]), which spares a second parse per message. Sent messages are recorded as the
//! model built them, with the timeout policy the client put on each request.

use crate::framing::ndjson::LineDecoder;
use crate::model::{Client, ClientEvent, ServerTransmit, StreamId, Transport};
use crate::trace::{EventKind, Side, WireEvent};
use crate::wire::{self, DecodeError, DecodeOptions, Era, Message, RequestId};

/// The payload of one message's text as `transport` carried it (on `stream` for HTTP), and the
/// message when the text decodes strictly: the decoded message, or the text when it does not
/// decode.
#[cfg(any(feature = "turmoil", feature = "live"))] // the wire tap's
pub(crate) fn observe(
    transport: Transport,
    stream: Option<StreamId>,
    bytes: &[u8],
) -> (WireEvent, Result<Message, DecodeError>) {
    observe_in(Era::Modern, transport, stream, bytes)
}

/// Like [`observe`], reading the shapes of `era`.
pub(crate) fn observe_in(
    era: Era,
    transport: Transport,
    stream: Option<StreamId>,
    bytes: &[u8],
) -> (WireEvent, Result<Message, DecodeError>) {
    match wire::decode_with(bytes, &in_era(era)) {
        Ok(msg) => (WireEvent::message(transport, stream, &msg), Ok(msg)),
        Err(e) => (WireEvent::raw(transport, stream, bytes), Err(e)),
    }
}

/// Like [`observe`], but the payload is the text as written whether or not it decodes: what a
/// real peer wrote.
#[cfg(any(feature = "turmoil", feature = "live"))] // the wire tap's
pub(crate) fn observe_as_written(
    transport: Transport,
    stream: Option<StreamId>,
    bytes: &[u8],
) -> (WireEvent, Result<Message, DecodeError>) {
    observe_as_written_in(Era::Modern, transport, stream, bytes)
}

/// Like [`observe_as_written`], reading the shapes of `era`.
pub(crate) fn observe_as_written_in(
    era: Era,
    transport: Transport,
    stream: Option<StreamId>,
    bytes: &[u8],
) -> (WireEvent, Result<Message, DecodeError>) {
    (
        WireEvent::raw(transport, stream, bytes),
        wire::decode_with(bytes, &in_era(era)),
    )
}

/// The default decoding of `era`'s shapes.
fn in_era(era: Era) -> DecodeOptions {
    DecodeOptions {
        era,
        ..DecodeOptions::default()
    }
}

/// The headers of a POST worth recording (`wire::http::RECORDED`), names in lower case.
#[cfg(feature = "async")]
pub(crate) fn recorded_headers<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> std::collections::BTreeMap<String, String> {
    headers
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .filter(|(k, _)| wire::http::RECORDED.contains(&k.as_str()))
        .map(|(k, v)| (k, v.to_owned()))
        .collect()
}

/// What is wrong with the headers of a request POST, if it decoded as a request.
pub(crate) fn header_mismatch(
    decoded: &Result<Message, DecodeError>,
    headers: &std::collections::BTreeMap<String, String>,
) -> Option<String> {
    let Ok(Message::Request(r)) = decoded else {
        return None;
    };
    wire::http::header_mismatch(
        headers,
        &r.method,
        Some(&r.meta.protocol_version),
        &r.params,
    )
}

/// Feeds stdio bytes to `lines` and returns what they complete, in order: each whole line, or
/// a framing error's description as a raw stdio payload. (The `Err` side is the payload
/// itself, recorded at once by every caller, not an error passed up: its size does not matter.)
#[allow(clippy::result_large_err)]
pub(crate) fn stdio_lines(
    lines: &mut LineDecoder,
    bytes: &[u8],
) -> Vec<Result<Vec<u8>, WireEvent>> {
    lines.push(bytes);
    std::iter::from_fn(|| lines.next_line())
        .map(|item| match item {
            Ok(line) => Ok(line.bytes),
            Err(e) => Err(framing_error(e.to_string())),
        })
        .collect()
}

/// The end of a stdio stream: a truncated last line is recorded (as a framing error), not
/// dropped.
pub(crate) fn stdio_end(lines: &mut LineDecoder) -> Option<WireEvent> {
    lines.finish().map(|e| framing_error(e.to_string()))
}

fn framing_error(text: String) -> WireEvent {
    WireEvent::raw(Transport::Stdio, None, text.as_bytes())
}

/// A message the reference client sends, with the policy it put on a request.
pub(crate) fn client_send(
    client: &Client,
    transport: Transport,
    stream: Option<StreamId>,
    msg: &Message,
) -> EventKind {
    let mut w = WireEvent::message(transport, stream, msg);
    if let Message::Request(r) = msg {
        w.policy = client.policy_of(&r.id).map(Into::into);
    }
    EventKind::Send(w)
}

pub(crate) use crate::wire::http::SESSION_HEADER;

/// What a client event is to its driver.
pub(crate) enum ClientNote {
    /// An event for the trace.
    Record(EventKind),
    /// A lost idempotent request was re-issued under a new id: bookkeeping, not an event (the
    /// new request's send is recorded).
    Retried {
        /// The id given up.
        lost: RequestId,
        /// The id it goes on under.
        new: RequestId,
    },
}

/// What the reference client told its application, as the trace records it.
pub(crate) fn client_event(e: ClientEvent) -> ClientNote {
    ClientNote::Record(match e {
        ClientEvent::Progress {
            request, progress, ..
        } => EventKind::Progress { request, progress },
        ClientEvent::Timeout { request, reason } => EventKind::Timeout { request, reason },
        ClientEvent::Outcome { request, outcome } => EventKind::Outcome { request, outcome },
        ClientEvent::Retried { lost, new } => return ClientNote::Retried { lost, new },
    })
}

/// A close of a stream (or of the whole connection, `stream` `None`) by `by`.
pub(crate) fn close(stream: Option<StreamId>, by: Side, reason: Option<String>) -> EventKind {
    EventKind::Close {
        stream: stream.map(|s| s.0),
        by,
        reason,
    }
}

/// What one transmit of the reference server puts in the trace, in order (one or two events;
/// no allocation on this per-message path).
pub(crate) fn server_transmit(
    transport: Transport,
    t: &ServerTransmit,
) -> impl Iterator<Item = EventKind> {
    server_transmit_events(transport, t).into_iter().flatten()
}

fn server_transmit_events(transport: Transport, t: &ServerTransmit) -> [Option<EventKind>; 2] {
    let status = |stream: StreamId, status: u16, content_type: Option<&str>| EventKind::Status {
        stream: Some(stream.0),
        status,
        content_type: content_type.map(Into::into),
        headers: None,
    };
    let send = |stream: Option<StreamId>, msg: &Message| {
        EventKind::Send(WireEvent::message(transport, stream, msg))
    };
    let (first, second) = match t {
        ServerTransmit::Line(msg) => (send(None, msg), None),
        ServerTransmit::SseStart { stream } => {
            (status(*stream, 200, Some("text/event-stream")), None)
        }
        ServerTransmit::SseEvent {
            stream,
            msg,
            event_id,
        } => {
            let mut kind = send(Some(*stream), msg);
            if let EventKind::Send(w) = &mut kind {
                w.event_id = event_id.clone();
            }
            (kind, None)
        }
        ServerTransmit::SsePrime {
            stream,
            event_id,
            retry_ms,
        } => (
            EventKind::Sse {
                stream: stream.0,
                event_id: Some(event_id.clone()),
                retry_ms: *retry_ms,
            },
            None,
        ),
        ServerTransmit::SseComment { stream } => (
            EventKind::Comment {
                stream: Some(stream.0),
            },
            None,
        ),
        ServerTransmit::SseEnd { stream } => (close(Some(*stream), Side::Server, None), None),
        ServerTransmit::Json {
            stream,
            status: code,
            msg,
            session,
        } => {
            let mut head = status(*stream, *code, Some("application/json"));
            if let (EventKind::Status { headers, .. }, Some(id)) = (&mut head, session) {
                *headers = Some([(SESSION_HEADER.to_owned(), id.clone())].into());
            }
            (head, Some(send(Some(*stream), msg)))
        }
        ServerTransmit::Accepted { stream } => (status(*stream, 202, None), None),
    };
    [Some(first), second]
}
