//! The trace of a live run on the wall clock: each event stamped with the milliseconds since
//! the run started, and echoed to stderr as it happens with `--verbose`.

use std::time::{Instant, SystemTime};

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
    verbose: bool,
}

impl WallTrace {
    /// A trace whose times count from `origin` (a moment on the system clock shared with
    /// another recorder), or from now; `verbose` echoes every event.
    pub(crate) fn new(verbose: bool, origin: Option<SystemTime>) -> Self {
        let now = Instant::now();
        let since_origin = origin
            .and_then(|o| SystemTime::now().duration_since(o).ok())
            .unwrap_or_default();
        WallTrace {
            started: now.checked_sub(since_origin).unwrap_or(now),
            trace: Trace::new(),
            stats: RunStats::default(),
            verbose,
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
        if self.verbose {
            if let Some(e) = self.trace.events.last() {
                eprintln!(
                    "{}",
                    serde_json::to_string(e).expect("trace events serialize")
                );
            }
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
