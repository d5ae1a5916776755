//! How what a peer reads or writes becomes a trace event's payload: shared by the reference
//! peers and by the recording streams a custom server is handed, so that every side records
//! the same shapes.

use crate::framing::ndjson::LineDecoder;
use crate::model::{StreamId, Transport};
use crate::trace::WireEvent;
use crate::wire::{self, DecodeError, Message};

/// The payload of one message's text as `transport` carried it (on `stream` for HTTP), and the
/// message when the text decodes strictly. Text that does not decode is recorded raw.
pub(crate) fn observe(
    transport: Transport,
    stream: Option<StreamId>,
    bytes: &[u8],
) -> (WireEvent, Result<Message, DecodeError>) {
    match wire::decode(bytes) {
        Ok(msg) => (WireEvent::message(transport, stream, &msg), Ok(msg)),
        Err(e) => (WireEvent::raw(transport, stream, bytes), Err(e)),
    }
}

/// Feeds stdio bytes to `lines` and returns what they complete, in order: each whole line, or
/// a framing error's description as a raw stdio payload.
pub(crate) fn stdio_lines(
    lines: &mut LineDecoder,
    bytes: &[u8],
) -> Vec<Result<Vec<u8>, WireEvent>> {
    lines.push(bytes);
    std::iter::from_fn(|| lines.next_line())
        .map(|item| match item {
            Ok(line) => Ok(line.bytes),
            Err(e) => Err(WireEvent::raw(
                Transport::Stdio,
                None,
                e.to_string().as_bytes(),
            )),
        })
        .collect()
}
