//! The frame around a trace written as it happens, and how a reader tells a finished
//! trace from a cut one.
//!
//! A live command (`probe`, `serve`, `record`) writes each event to its trace file the moment
//! it is recorded, so a run that is killed keeps everything up to its last event. To tell such
//! a file from a finished one it writes two lines that are not events: a `begin` line first,
//! naming the recorder, and an `end` line last, saying why the run ended and how many events
//! it holds:
//!
//! ```text
//! {"begin":{"format":1,"by":"mcp-sim serve"}}
//! {"t":0,"side":"server","kind":"recv",...}
//! {"end":{"events":1,"reason":"stopped by a signal"}}
//! ```
//!
//! A trace that begins and does not end was cut: its recorder was killed (SIGKILL), crashed,
//! or could not write (a full disk). A last line without its line feed that does not read as
//! JSON was cut in the middle of a write. [`Trace::read_jsonl`] reads such a trace up to the
//! cut and names it ([`Cut`]); [`Trace::from_jsonl`] refuses a line cut in the middle, as it
//! refuses any unreadable line. Traces written whole (simulated runs, hand-written cases)
//! carry no frame, and need none.

use serde::{Deserialize, Serialize};

use super::{Trace, TraceError};

/// The trace format's version, as a `begin` line states it.
pub const FORMAT: u32 = 1;

/// A line of the frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Frame {
    /// The first line of a trace written as it happens.
    Begin(Begin),
    /// The last line, written once the run ended and every event before it was written.
    End(End),
}

/// A `begin` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Begin {
    /// The trace format's version ([`FORMAT`]).
    pub format: u32,
    /// The recorder: `mcp-sim probe`, `mcp-sim serve`, `mcp-sim record`.
    pub by: String,
}

/// An `end` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    /// The events written before it: a reader that finds another number lost lines.
    pub events: u64,
    /// Why the run ended, for people (`the client closed stdin`, `interrupted by SIGINT`).
    pub reason: String,
}

impl Frame {
    /// The line, without its line feed.
    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("a frame serializes")
    }
}

/// Where a trace read by [`Trace::read_jsonl`] stops short of its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// The last line has no line feed and does not read as an event: the write of it was
    /// cut. The events before it were read.
    MidLine {
        /// The cut line's number, from 1.
        line: usize,
        /// How many bytes of it were written.
        bytes: usize,
    },
    /// The trace has a `begin` line and no `end` line: its recorder stopped before it
    /// finished the run (killed, crashed, or unable to write).
    NoEnd {
        /// The recorder the `begin` line names.
        by: String,
        /// The last line read, from 1.
        after_line: usize,
    },
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cut::MidLine { line, bytes } => write!(
                f,
                "the trace is cut in line {line} ({bytes} bytes of it written, no line feed): \
                 its recorder stopped while writing it; the lines before it are judged"
            ),
            Cut::NoEnd { by, after_line } => write!(
                f,
                "the trace is cut after line {after_line}: {by} began it and never wrote its \
                 end line (it was killed, crashed, or could not write); what it recorded is \
                 judged"
            ),
        }
    }
}

/// A trace as [`Trace::read_jsonl`] read it: its events, its frame and where it was cut.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The events.
    pub trace: Trace,
    /// Its `begin` line, when it has one.
    pub begin: Option<Begin>,
    /// Its `end` line, when it has one.
    pub end: Option<End>,
    /// Where it stops short of its end.
    pub cut: Option<Cut>,
}

/// Reads `line` as a frame line when it is one: an object whose only member is `begin` or
/// `end`. `None` for anything else, which is then read as an event.
pub(super) fn frame(line: &str) -> Option<Result<Frame, String>> {
    let head = line.trim_start();
    if !(head.starts_with("{\"begin\"") || head.starts_with("{\"end\"")) {
        return None;
    }
    Some(serde_json::from_str(line).map_err(|e| format!("a frame line: {e}")))
}

/// Checks where a frame line may stand and what it says, given what was read before it:
/// `begin` only first, `end` only last and counting the events read.
pub(super) fn place(
    frame: Frame,
    line_no: usize,
    events: usize,
    reading: &mut Reading,
    last_line: bool,
) -> Result<(), TraceError> {
    let err = |message: String| TraceError {
        line: line_no,
        message,
    };
    match frame {
        Frame::Begin(begin) => {
            if events > 0 || reading.begin.is_some() {
                return Err(err("a begin line comes first, and once".into()));
            }
            if begin.format != FORMAT {
                return Err(err(format!(
                    "trace format {} (this mcp-sim reads format {FORMAT})",
                    begin.format
                )));
            }
            reading.begin = Some(begin);
        }
        Frame::End(end) => {
            if !last_line || reading.end.is_some() {
                return Err(err("an end line comes last: nothing may follow it".into()));
            }
            if end.events != events as u64 {
                return Err(err(format!(
                    "the end line counts {} events and the trace holds {events}: lines were \
                     lost",
                    end.events
                )));
            }
            reading.end = Some(end);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENT: &str = r#"{"t":3,"side":"server","kind":"comment"}"#;
    const BEGIN: &str = r#"{"begin":{"format":1,"by":"mcp-sim serve"}}"#;

    fn end(events: u64) -> String {
        Frame::End(End {
            events,
            reason: "stopped by a signal".into(),
        })
        .line()
    }

    #[test]
    fn a_framed_trace_reads_whole_and_uncut() {
        let text = format!("{BEGIN}\n{EVENT}\n{EVENT}\n{}\n", end(2));
        let r = Trace::read_jsonl(&text).expect("reads");
        assert_eq!(r.trace.events.len(), 2);
        assert_eq!(r.begin.expect("begin").by, "mcp-sim serve");
        assert_eq!(r.end.expect("end").reason, "stopped by a signal");
        assert_eq!(r.cut, None);
        assert_eq!(Trace::from_jsonl(&text).expect("reads").events.len(), 2);
    }

    #[test]
    fn a_trace_that_began_and_never_ended_is_cut_after_its_last_line() {
        let text = format!("{BEGIN}\n{EVENT}\n{EVENT}\n");
        let r = Trace::read_jsonl(&text).expect("reads");
        assert_eq!(r.trace.events.len(), 2);
        let cut = r.cut.expect("cut");
        assert_eq!(
            cut,
            Cut::NoEnd {
                by: "mcp-sim serve".into(),
                after_line: 3
            }
        );
        assert!(cut.to_string().contains("after line 3"), "{cut}");
    }

    #[test]
    fn a_line_cut_mid_write_is_left_out_and_named_and_from_jsonl_refuses_it() {
        let text = format!("{BEGIN}\n{EVENT}\n{}", &EVENT[..17]);
        let r = Trace::read_jsonl(&text).expect("reads");
        assert_eq!(r.trace.events.len(), 1);
        assert_eq!(r.cut, Some(Cut::MidLine { line: 3, bytes: 17 }));
        let e = Trace::from_jsonl(&text).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("cut"), "{e}");
        // An end line cut mid-write is a cut too.
        let text = format!("{EVENT}\n{}", &end(1)[..12]);
        let r = Trace::read_jsonl(&text).expect("reads");
        assert_eq!(r.cut, Some(Cut::MidLine { line: 2, bytes: 12 }));
    }

    #[test]
    fn a_last_line_without_its_line_feed_that_reads_is_no_cut() {
        let r = Trace::read_jsonl(EVENT).expect("reads");
        assert_eq!((r.trace.events.len(), r.cut), (1, None));
        // An unreadable line anywhere else is an error, as before.
        let bad = format!("{}\n{EVENT}\n", &EVENT[..17]);
        assert_eq!(Trace::read_jsonl(&bad).unwrap_err().line, 1);
        // A bad event that is JSON is an error even at the end, with or without its line feed.
        let bad = format!("{EVENT}\n{{\"t\":1}}");
        assert_eq!(Trace::read_jsonl(&bad).unwrap_err().line, 2);
    }

    #[test]
    fn frame_lines_out_of_place_or_miscounting_are_errors_naming_the_line() {
        let cases = [
            (format!("{EVENT}\n{BEGIN}\n"), 2, "first"),
            (format!("{}\n{EVENT}\n", end(0)), 1, "last"),
            (format!("{BEGIN}\n{EVENT}\n{}\n", end(5)), 3, "lost"),
            (
                r#"{"begin":{"format":2,"by":"x"}}"#.to_string(),
                1,
                "format 2",
            ),
            (r#"{"end":{"events":0}}"#.to_string(), 1, "reason"),
        ];
        for (text, line, says) in cases {
            let e = Trace::read_jsonl(&text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
    }
}
