//! Server-Sent Events framing for Streamable HTTP responses (docs/spec/mcp-2026-07-28.md §5.2, §10.5).
//!
//! The decoder follows the WHATWG event-stream interpretation rules: a leading BOM is dropped;
//! lines end in LF, CR or CR LF (also when the CR and LF arrive in different chunks); a line
//! starting with `:` is a comment; `field:value` drops one space after the colon; a line
//! without a colon is a field with an empty value; `data` lines are joined with LF; an empty
//! line dispatches the event, unless it has no data. Comments are surfaced as items because
//! the simulation cares about keep-alives (they keep proxies open, but are not progress).
//! MCP 2026-07-28 defines no `id`, `event` or `retry` fields; they are parsed and exposed so
//! that the oracle can see them.

use super::{Buffer, FrameError};
use crate::wire::{Limits, Rule};

/// Options of the SSE decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseOptions {
    /// Longest accepted line, without its terminator.
    pub max_line_bytes: usize,
    /// Largest accepted event data (all `data` lines joined).
    pub max_event_bytes: usize,
}

impl Default for SseOptions {
    fn default() -> Self {
        let max = Limits::DEFAULT.max_message_bytes;
        SseOptions {
            max_line_bytes: max + 16,
            max_event_bytes: max,
        }
    }
}

/// A dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The event type; `message` unless an `event` field set it.
    pub event_type: String,
    /// The joined `data` lines.
    pub data: String,
    /// The last event id buffer at dispatch (empty unless an `id` field set it).
    pub last_event_id: String,
    /// This event itself had an `id` field (the buffer may hold an earlier event's).
    pub has_id: bool,
}

/// What the decoder yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// A complete event.
    Event(SseEvent),
    /// A comment line: the text after the colon (a keep-alive when used as one).
    Comment(String),
}

/// Incremental WHATWG event-stream decoder.
#[derive(Debug, Clone, Default)]
pub struct SseDecoder {
    opts: SseOptions,
    buf: Buffer,
    scanned: usize,
    /// The BOM check at stream start is done.
    bom_checked: bool,
    /// The previous line ended in CR: an LF right after it belongs to that line end.
    after_cr: bool,
    /// Inside an over-long line: drop bytes up to the next line end.
    discarding: bool,
    /// The current event's data outgrew the limit: ignore its data until dispatch.
    oversized: bool,
    line: u64,
    data: String,
    event_type: String,
    last_event_id: String,
    /// An `id` field came since the last dispatch.
    id_seen: bool,
    retry: Option<u64>,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseDecoder {
    /// A decoder with the given options.
    pub fn new(opts: SseOptions) -> Self {
        SseDecoder {
            opts,
            line: 1,
            ..Default::default()
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.push(chunk);
    }

    /// The reconnection time set by the last valid `retry` field, if any.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// The next item or framing error, or `None` until more bytes arrive.
    pub fn next_item(&mut self) -> Option<Result<SseItem, FrameError>> {
        loop {
            if !self.bom_checked {
                let head = self.buf.as_slice();
                let n = head.len().min(BOM.len());
                if head[..n] != BOM[..n] {
                    self.bom_checked = true;
                } else if n == BOM.len() {
                    self.buf.consume(BOM.len());
                    self.bom_checked = true;
                } else {
                    return None;
                }
            }
            if self.after_cr {
                match self.buf.as_slice().first() {
                    None => return None,
                    Some(b'\n') => self.buf.consume(1),
                    Some(_) => {}
                }
                self.after_cr = false;
            }
            let data = self.buf.as_slice();
            let Some(pos) =
                memchr::memchr2(b'\n', b'\r', &data[self.scanned..]).map(|p| p + self.scanned)
            else {
                self.scanned = data.len();
                if !self.discarding && data.len() > self.opts.max_line_bytes {
                    self.discarding = true;
                    self.buf.clear();
                    self.scanned = 0;
                    return Some(Err(self.error(
                        Rule::LineTooLong,
                        format!("line exceeds {} bytes", self.opts.max_line_bytes),
                    )));
                }
                if self.discarding {
                    self.buf.clear();
                    self.scanned = 0;
                }
                return None;
            };
            self.after_cr = data[pos] == b'\r';
            let line = if std::mem::replace(&mut self.discarding, false) {
                None
            } else if pos > self.opts.max_line_bytes {
                Some(Err(self.error(
                    Rule::LineTooLong,
                    format!("line exceeds {} bytes", self.opts.max_line_bytes),
                )))
            } else {
                Some(Ok(String::from_utf8_lossy(&data[..pos]).into_owned()))
            };
            self.buf.consume(pos + 1);
            self.scanned = 0;
            let number = self.line;
            self.line += 1;
            match line {
                None => {}
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(text)) => {
                    if let Some(item) = self.process_line(&text, number) {
                        return Some(item);
                    }
                }
            }
        }
    }

    /// Interprets one complete line; `number` is its 1-based line number.
    fn process_line(&mut self, line: &str, number: u64) -> Option<Result<SseItem, FrameError>> {
        if line.is_empty() {
            return self.dispatch().map(|e| Ok(SseItem::Event(e)));
        }
        if let Some(comment) = line.strip_prefix(':') {
            return Some(Ok(SseItem::Comment(comment.to_owned())));
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" if !self.oversized => {
                if self.data.len() + value.len() + 1 > self.opts.max_event_bytes {
                    self.oversized = true;
                    self.data.clear();
                    return Some(Err(FrameError {
                        rule: Rule::LineTooLong,
                        line: number,
                        detail: format!("event data exceeds {} bytes", self.opts.max_event_bytes),
                    }));
                }
                self.data.push_str(value);
                self.data.push('\n');
            }
            "event" => self.event_type = value.to_owned(),
            "id" if !value.contains('\0') => {
                self.last_event_id = value.to_owned();
                self.id_seen = true;
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = Some(value.parse().unwrap_or(u64::MAX));
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event_type = std::mem::take(&mut self.event_type);
        if std::mem::replace(&mut self.oversized, false) || self.data.is_empty() {
            self.data.clear();
            self.id_seen = false;
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the LF after the last data line
        let event_type = if event_type.is_empty() {
            "message".to_owned()
        } else {
            event_type
        };
        Some(SseEvent {
            event_type,
            data,
            last_event_id: self.last_event_id.clone(),
            has_id: std::mem::take(&mut self.id_seen),
        })
    }

    /// Ends the stream: an unterminated line or an undispatched event is reported as
    /// [`Rule::Truncated`] and dropped, as the WHATWG rules drop it.
    pub fn finish(&mut self) -> Option<FrameError> {
        let partial_line = self.buf.len() > 0 && !self.discarding;
        let pending_event = !self.data.is_empty() || self.oversized;
        *self = SseDecoder {
            line: self.line,
            ..SseDecoder::new(self.opts)
        };
        (partial_line || pending_event)
            .then(|| self.error(Rule::Truncated, "the stream ended inside an event".into()))
    }

    fn error(&self, rule: Rule, detail: String) -> FrameError {
        FrameError {
            rule,
            line: self.line,
            detail,
        }
    }
}

/// Encodes one event carrying `data`: one `data:` line per line of `data`, where CR LF, CR
/// and LF all end a line (they would end the field on the wire too).
pub fn encode_event(data: &str) -> String {
    let mut out = String::with_capacity(data.len() + 8);
    let normalized = data.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// Encodes an event with an `id` and empty data (the legacy era's priming event), with a
/// `retry` field when given.
pub fn encode_priming(id: &str, retry_ms: Option<u64>) -> String {
    match retry_ms {
        Some(ms) => format!("id: {id}\nretry: {ms}\ndata:\n\n"),
        None => format!("id: {id}\ndata:\n\n"),
    }
}

/// Encodes a comment line, the keep-alive form (`: text`).
pub fn encode_comment(text: &str) -> String {
    format!(": {text}\n\n")
}

/// The client's SSE framer: the real decoder, or, with `crlf_chunk_split_bug` (the mutant
/// `sse_crlf_chunk_split`), the same decoder with eventsource-parser #17's bug: when a chunk ends in CR and the next one
/// starts with LF, the LF is taken as an empty line, which dispatches the event early.
#[derive(Debug)]
pub struct ClientSseFramer {
    inner: SseDecoder,
    crlf_bug: bool,
    last_was_cr: bool,
}

impl ClientSseFramer {
    /// A framer, with eventsource-parser #17's bug or without.
    pub fn new(crlf_chunk_split_bug: bool) -> Self {
        ClientSseFramer {
            inner: SseDecoder::new(Default::default()),
            crlf_bug: crlf_chunk_split_bug,
            last_was_cr: false,
        }
    }

    /// Appends a received chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.crlf_bug && self.last_was_cr && chunk.first() == Some(&b'\n') {
            // The correct decoder skips this LF as the end of the CR LF pair; an extra LF
            // makes it see the empty line the buggy parser sees.
            self.inner.push(b"\n");
        }
        if let Some(&last) = chunk.last() {
            self.last_was_cr = last == b'\r';
        }
        self.inner.push(chunk);
    }

    /// The next item, as [`SseDecoder::next_item`].
    pub fn next_item(&mut self) -> Option<Result<SseItem, crate::framing::FrameError>> {
        self.inner.next_item()
    }

    /// The reconnection time in force, as [`SseDecoder::retry`].
    pub fn retry(&self) -> Option<u64> {
        self.inner.retry()
    }
}
