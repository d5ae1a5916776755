//! Differential oracle for the SSE decoder: `mcp_sim::framing::sse` against the `sse-stream`
//! crate, fed the same bytes in the same chunks.
//!
//! Why `sse-stream` 0.3.0: it is actively maintained (0.3.0, 2026-09-18 by its changelog,
//! rewrote the parser to the WHATWG rules), its parser runs without a runtime
//! (`SseByteStream` over any stream of byte buffers), and its 0.2 line is the decoder inside
//! rmcp, the Rust MCP SDK, so what it gets wrong is what MCP clients built on it get wrong.
//! `eventsource-stream`'s last release is 0.2.3 of 2022-02-17 (on the crate registry), and LaunchDarkly's
//! `eventsource-client` keeps its parser private.
//!
//! Both sides are reduced to what a WHATWG `EventSource` observes: each dispatched event's
//! type, data and last event id. `sse-stream` yields raw blocks (a block with only `id` or
//! `event` is returned, ids are not carried over), so its blocks are folded by the WHATWG
//! dispatch rules first. `retry` is not compared: WHATWG has no bound on it while `sse-stream`
//! keeps a `u64` and reports it only with a completed block.
//!
//! Shared by the cargo-fuzz target `sse_differential`, `tests/fuzz_regressions.rs` (which
//! replays its seeds and regressions) and `tests/sse_differential.rs` (the reproducers of the
//! disagreements found).

#![allow(dead_code)]

use std::convert::Infallible;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use futures_util::{stream, Stream};
use mcp_sim::framing::sse::{SseDecoder, SseItem, SseOptions};

/// One event as an `EventSource` sees it: type, data, last event id.
pub type Event = (String, String, String);

/// What `sse-stream` yielded: the events its blocks dispatch, and the error that ended it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Theirs {
    /// The events, folded by the WHATWG dispatch rules.
    pub events: Vec<Event>,
    /// The error that ended the stream, if any (`sse-stream` errors are terminal).
    pub error: Option<String>,
    /// That error was `sse-stream`'s UTF-8 error.
    pub utf8_error: bool,
}

/// Our decoder without limits: the events it dispatches.
pub fn ours(chunks: &[&[u8]]) -> Vec<Event> {
    let unlimited = SseOptions {
        max_line_bytes: usize::MAX / 4,
        max_event_bytes: usize::MAX / 4,
    };
    let mut dec = SseDecoder::new(unlimited);
    let mut out = Vec::new();
    for c in chunks {
        dec.push(c);
        while let Some(item) = dec.next_item() {
            if let Ok(SseItem::Event(e)) = item {
                out.push((e.event_type, e.data, e.last_event_id));
            }
        }
    }
    out
}

/// Polls a stream that never waits to its end.
pub fn poll_all<S: Stream>(s: S) -> Vec<S::Item> {
    let mut s = pin!(s);
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    loop {
        match s.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(x)) => out.push(x),
            Poll::Ready(None) => return out,
            Poll::Pending => panic!("a stream over ready chunks waited"),
        }
    }
}

/// The chunks as a stream of byte buffers that never fails.
pub fn byte_stream(chunks: &[&[u8]]) -> impl Stream<Item = Result<Bytes, Infallible>> {
    let owned: Vec<Result<Bytes, Infallible>> = chunks
        .iter()
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    stream::iter(owned)
}

/// Folds raw blocks into events by the WHATWG rules: an `id` field sets the last event id
/// for this and later events; a block with data dispatches one event, of type `message`
/// unless a non-empty `event` field named one.
fn fold(blocks: impl IntoIterator<Item = Result<sse_stream::Sse, sse_stream::Error>>) -> Theirs {
    let mut theirs = Theirs::default();
    let mut last_id = String::new();
    for block in blocks {
        match block {
            Ok(b) => {
                if let Some(id) = b.id {
                    last_id = id;
                }
                if let Some(data) = b.data {
                    let ty = b.event.filter(|t| !t.is_empty());
                    let ty = ty.unwrap_or_else(|| "message".to_owned());
                    theirs.events.push((ty, data, last_id.clone()));
                }
            }
            Err(e) => {
                theirs.utf8_error = matches!(e, sse_stream::Error::Utf8Parse(_));
                theirs.error = Some(e.to_string());
                break;
            }
        }
    }
    theirs
}

/// `sse-stream` 0.3.0's byte-stream decoder.
pub fn sse_stream(chunks: &[&[u8]]) -> Theirs {
    fold(poll_all(sse_stream::SseByteStream::new(byte_stream(
        chunks,
    ))))
}

/// Why a disagreement is on `sse-stream`'s side, when it is one of the known kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// WHATWG decodes the stream as UTF-8 with replacement characters and goes on;
    /// `sse-stream` ends the stream with its UTF-8 error at bytes that are not UTF-8 in a field
    /// value. Told apart only when `sse-stream`, given the stream decoded as WHATWG decodes it
    /// (`String::from_utf8_lossy`, whole), dispatches exactly mcp-sim's events.
    StopsAtInvalidUtf8,
}

/// Compares both decoders on `data` cut into `chunks`. `Ok(None)`: they agree; `Ok(Some(k))`:
/// they disagree in a known way on `sse-stream`'s side; `Err`: an unexplained disagreement,
/// described.
pub fn compare(data: &[u8], chunks: &[&[u8]]) -> Result<Option<Known>, String> {
    let ours = ours(chunks);
    let theirs = sse_stream(chunks);
    let whole = sse_stream(&[data]);
    if theirs != whole {
        return Err(format!(
            "sse-stream: chunking changed its output: whole {whole:?}, chunked {theirs:?}"
        ));
    }
    if theirs.error.is_none() && theirs.events == ours {
        return Ok(None);
    }
    if theirs.utf8_error && std::str::from_utf8(data).is_err() {
        let decoded = String::from_utf8_lossy(data);
        let whatwg = sse_stream(&[decoded.as_bytes()]);
        if whatwg.error.is_none() && whatwg.events == ours {
            return Ok(Some(Known::StopsAtInvalidUtf8));
        }
    }
    Err(format!(
        "decoders disagree on {:?}:\n  mcp-sim:    {ours:?}\n  sse-stream: {theirs:?}",
        String::from_utf8_lossy(data)
    ))
}
