//! Newline-delimited JSON framing for stdio (docs/spec/mcp-2026-07-28.md §5.1, §10.5).
//!
//! Each message is one line ending in LF and MUST NOT contain a raw newline. Blank lines and
//! CR LF endings are not covered by the spec; strict mode (the default) reports them,
//! lenient mode skips blank lines and strips the CR. A line longer than the maximum is
//! reported once and skipped up to its end, so one bad line never wedges the stream.

use super::{Buffer, FrameError};
use crate::wire::{self, EncodeError, Limits, Message, Rule};

/// Options of the line decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineOptions {
    /// Longest accepted line, without its terminator (default: [`Limits::DEFAULT`]'s message
    /// size).
    pub max_line_bytes: usize,
    /// Strip a CR before the LF instead of reporting [`Rule::CrLf`].
    pub allow_crlf: bool,
    /// Skip empty lines instead of reporting [`Rule::BlankLine`].
    pub allow_blank_lines: bool,
}

impl Default for LineOptions {
    fn default() -> Self {
        LineOptions {
            max_line_bytes: Limits::DEFAULT.max_message_bytes,
            allow_crlf: false,
            allow_blank_lines: false,
        }
    }
}

/// One complete line, without its terminator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The 1-based line number.
    pub number: u64,
    /// The bytes of the line (CR stripped in lenient mode).
    pub bytes: Vec<u8>,
}

/// Incremental NDJSON line splitter.
#[derive(Debug, Clone, Default)]
pub struct LineDecoder {
    opts: LineOptions,
    buf: Buffer,
    /// Bytes of `buf` already searched for LF.
    scanned: usize,
    /// Inside a line already reported as too long: drop bytes up to the next LF.
    discarding: bool,
    /// Number of the line being read (1-based).
    line: u64,
}

impl LineDecoder {
    /// A decoder with the given options.
    pub fn new(opts: LineOptions) -> Self {
        LineDecoder {
            opts,
            line: 1,
            ..Default::default()
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.push(chunk);
    }

    /// The next complete line or framing error, or `None` until more bytes arrive.
    pub fn next_line(&mut self) -> Option<Result<Line, FrameError>> {
        loop {
            let data = self.buf.as_slice();
            let Some(pos) = memchr::memchr(b'\n', &data[self.scanned..]).map(|p| p + self.scanned)
            else {
                self.scanned = data.len();
                if !self.discarding && data.len() > self.opts.max_line_bytes {
                    self.discarding = true;
                    self.buf.clear();
                    self.scanned = 0;
                    return Some(Err(self.too_long()));
                }
                if self.discarding {
                    self.buf.clear();
                    self.scanned = 0;
                }
                return None;
            };
            let number = self.line;
            self.line += 1;
            let was_discarding = std::mem::replace(&mut self.discarding, false);
            let mut line = &data[..pos];
            let result = if was_discarding {
                None
            } else if line.len() > self.opts.max_line_bytes {
                Some(Err(self.too_long_at(number)))
            } else if line.last() == Some(&b'\r') && !self.opts.allow_crlf {
                Some(Err(FrameError {
                    rule: Rule::CrLf,
                    line: number,
                    detail: "line ends in CR LF".into(),
                }))
            } else {
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                if line.is_empty() && self.opts.allow_blank_lines {
                    None
                } else if line.is_empty() {
                    Some(Err(FrameError {
                        rule: Rule::BlankLine,
                        line: number,
                        detail: "empty line".into(),
                    }))
                } else {
                    Some(Ok(Line {
                        number,
                        bytes: line.to_vec(),
                    }))
                }
            };
            self.buf.consume(pos + 1);
            self.scanned = 0;
            if result.is_some() {
                return result;
            }
        }
    }

    /// Ends the stream: reports a final line that lacks its LF.
    pub fn finish(&mut self) -> Option<FrameError> {
        let partial = self.buf.len() > 0 && !self.discarding;
        self.buf.clear();
        self.scanned = 0;
        self.discarding = false;
        partial.then(|| FrameError {
            rule: Rule::Truncated,
            line: self.line,
            detail: "the stream ended inside a line".into(),
        })
    }

    fn too_long(&self) -> FrameError {
        self.too_long_at(self.line)
    }

    fn too_long_at(&self, line: u64) -> FrameError {
        FrameError {
            rule: Rule::LineTooLong,
            line,
            detail: format!("line exceeds {} bytes", self.opts.max_line_bytes),
        }
    }
}

/// Encodes a message as one NDJSON line, LF included. The compact JSON never holds a raw
/// newline, so the line is always a single frame.
pub fn encode_line(msg: &Message) -> Result<Vec<u8>, EncodeError> {
    let mut text = wire::encode(msg)?.into_bytes();
    text.push(b'\n');
    Ok(text)
}
