//! Framing: how messages travel on each transport.
//!
//! - [`ndjson`]: stdio, one message per LF-terminated line (docs/spec/mcp-2026-07-28.md §5.1);
//! - [`sse`]: Streamable HTTP responses, Server-Sent Events per the WHATWG event-stream rules
//!   (docs/spec/mcp-2026-07-28.md §5.2).
//!
//! Both decoders are incremental: bytes go in with `push` in chunks of any size, items come
//! out with `next_*`, and `finish` reports what the end of the stream cut off. The sequence of
//! items never depends on where the chunk boundaries fell; property tests and fuzz targets
//! check exactly that. Both bound their memory by a configured maximum line length.

use std::fmt;

use crate::wire::Rule;

pub mod ndjson;
pub mod sse;

/// A framing error: the rule broken and the 1-based line where it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    /// The rule broken ([`Rule::LineTooLong`], [`Rule::BlankLine`], [`Rule::CrLf`],
    /// [`Rule::Truncated`]).
    pub rule: Rule,
    /// The 1-based line number in the stream.
    pub line: u64,
    /// What exactly was wrong.
    pub detail: String,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on line {}: {}", self.rule, self.line, self.detail)
    }
}

impl std::error::Error for FrameError {}

/// A growable byte buffer with a read offset, compacted lazily so that consuming many short
/// lines from one large chunk stays linear.
#[derive(Debug, Default, Clone)]
pub(crate) struct Buffer {
    bytes: Vec<u8>,
    start: usize,
}

impl Buffer {
    pub fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 && self.start * 2 >= self.bytes.len() {
            self.bytes.drain(..self.start);
            self.start = 0;
        }
        self.bytes.extend_from_slice(chunk);
    }
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..]
    }
    pub fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.bytes.len() {
            self.bytes.clear();
            self.start = 0;
        }
    }
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.start = 0;
    }
    pub fn len(&self) -> usize {
        self.bytes.len() - self.start
    }
}
