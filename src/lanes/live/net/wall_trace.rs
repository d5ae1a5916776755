//! The trace of a live run on the wall clock: each event stamped with the milliseconds since
//! the run started, written to the run's trace file as it happens ([`TraceFile`]), and echoed
//! to stderr with `--verbose`.

use std::time::{Instant, SystemTime};

use super::trace_file::TraceFile;
use crate::lanes::RunSink;
use crate::lanes::RunStats;
use crate::time::Time;
use crate::trace::{EventKind, Side, Trace};

/// A trace being recorded on the wall clock, with the run's counters.
pub(crate) struct WallTrace {
    started: Instant,
    /// The events so far.
    pub(crate) trace: Trace,
    /// The counters so far.
    pub(crate) stats: RunStats,
    out: TraceOut,
}

/// Where a live run's events go besides memory: a trace file written as the run goes, and
/// stderr.
#[derive(Debug, Clone, Default)]
pub struct TraceOut {
    /// Print every event to stderr as it is recorded (`--verbose`).
    pub verbose: bool,
    /// Write every event to this file as it is recorded (`--trace`).
    pub file: Option<TraceFile>,
}

impl WallTrace {
    /// A trace whose times count from `origin` (a moment on the system clock shared with
    /// another recorder), or from now, that also goes to `out`.
    pub(crate) fn new(out: TraceOut, origin: Option<SystemTime>) -> Self {
        let now = Instant::now();
        let since_origin = origin
            .and_then(|o| SystemTime::now().duration_since(o).ok())
            .unwrap_or_default();
        WallTrace {
            started: now.checked_sub(since_origin).unwrap_or(now),
            trace: Trace::new(),
            stats: RunStats::default(),
            out,
        }
    }

    /// Milliseconds since the start.
    pub(crate) fn now(&self) -> Time {
        Time::from_millis(u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    /// Appends `kind` as `side` observed it, now.
    pub(crate) fn push(&mut self, side: Side, kind: EventKind) {
        let t = self.now();
        self.trace.push(t, side, kind);
        let Some(e) = self.trace.events.last() else {
            return;
        };
        if let Some(file) = &self.out.file {
            file.write(e);
        }
        if self.out.verbose {
            eprintln!(
                "{}",
                serde_json::to_string(e).expect("trace events serialize")
            );
        }
    }
}

impl RunSink for WallTrace {
    fn record(&mut self, side: Side, kind: EventKind) {
        self.push(side, kind);
    }

    fn tally(&mut self, update: impl FnOnce(&mut RunStats)) {
        update(&mut self.stats);
    }
}
