//! The lanes: three ways to run the model's peers against each other or against real ones,
//! side by side, every one producing the same [`RunResult`] and the same trace format.
//!
//! - [`memory`]: an in-process discrete-event driver. No sockets, no runtime: the fastest
//!   lane, used by property tests and long sweeps.
//! - [`turmoil`] (feature `turmoil`): simulated hosts and sockets under turmoil's clock,
//!   hyper for Streamable HTTP, NDJSON over TCP for stdio, idle-timeout proxies, crashes and
//!   partitions; a user's own server or client can take a reference peer's place.
//! - [`live`] (feature `live`): real processes and sockets on the wall clock, one module per
//!   tool: the probe drives a real server, `serve` answers a real client, `record` taps a real
//!   session.
//!
//! Every lane drives the reference peers through the same two drivers, sans-IO glue with no
//! clock of their own: `client_driver` (the recording of what the client sends, reads and
//! tells its application, the counters, the call-to-request map through retries) and
//! `server_driver` (the recording of what the server reads and writes, header checks, the
//! in-process backend). A lane keeps only how bytes and time reach them, through a
//! `RunSink` that stamps events with the lane's own clock. `intermediary` holds what the
//! byte-level idle-timeout proxies decide alike.
//!
//! Shared by all: `recorder` (what a peer reads and writes becomes trace events, the same
//! way in every lane), [`readers`] (a stdio stream or a response body into lines and
//! messages, chunk by chunk, without I/O), [`http_exchange`] (one Streamable HTTP POST and
//! its response, as the simulated client host and the live probe both send it) and
//! `http_serve` (the server side of those exchanges, for the simulated server host and
//! `mcp-sim serve --http`).
//!
//! The lanes stand on [`crate::scenario`], [`crate::trace`], [`crate::oracle`] (only for the
//! settings a run must be judged with), [`crate::model`], [`crate::framing`] and
//! [`crate::wire`]; no lane imports another.

use std::collections::BTreeMap;

use crate::model::Outcome;
use crate::oracle::OracleConfig;
use crate::scenario::Scenario;
use crate::time::Time;
use crate::trace::{EventKind, Side, Trace};

pub(crate) mod client_driver;
#[cfg(any(feature = "turmoil", feature = "live"))]
pub mod http_exchange;
#[cfg(any(feature = "turmoil", feature = "live"))]
pub(crate) mod http_serve;
pub(crate) mod intermediary;
#[cfg(all(test, feature = "turmoil", feature = "live"))]
mod intermediary_table;
#[cfg(feature = "live")]
pub mod live;
pub mod memory;
mod memory_server;
pub mod readers;
pub(crate) mod recorder;
pub(crate) mod response_writer;
pub(crate) mod server_driver;
#[cfg(feature = "turmoil")]
pub mod turmoil;
#[cfg(feature = "live")]
pub mod virtual_peer;
#[cfg(any(feature = "turmoil", feature = "live"))]
pub(crate) mod wiretap;

/// Which driver runs a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// turmoil: simulated hosts, TCP, hyper, proxies, crashes (the full simulation).
    #[cfg(feature = "turmoil")]
    Turmoil {
        /// turmoil's tick.
        tick: std::time::Duration,
    },
    /// The in-memory discrete-event driver: the same model and oracle, much faster.
    Memory,
}

impl Lane {
    /// The turmoil lane with the default tick.
    #[cfg(feature = "turmoil")]
    pub fn turmoil() -> Lane {
        Lane::Turmoil {
            tick: turmoil::TurmoilOptions::default().tick,
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The recorded trace.
    pub trace: Trace,
    /// Whether the run ended settled: nothing outstanding, no work running, nothing held.
    pub complete: bool,
    /// Counters for sweep summaries.
    pub stats: RunStats,
}

impl RunResult {
    /// The oracle settings this run must be judged with.
    pub fn oracle_config(&self, scenario: &Scenario) -> OracleConfig {
        let default = OracleConfig::default();
        // Through the bridge each hop is recorded at one end only, so what crosses the
        // upstream link is judged within the grace window: it must cover the link's latency.
        // The intermediary's timers, seen from the server, are blurred by the link's jitter.
        let latency_ms = scenario.latency.1.as_millis() as u64;
        let (grace_ms, timer_tolerance_ms) = match scenario.bridge {
            true => (
                default.grace_ms.max(latency_ms + 200),
                default.timer_tolerance_ms.max(2 * latency_ms),
            ),
            false => (default.grace_ms, default.timer_tolerance_ms),
        };
        OracleConfig {
            max_request_ms: scenario.max_request().as_millis() as u64,
            complete: self.complete,
            grace_ms,
            timer_tolerance_ms,
            ..default
        }
    }
}

/// Counters of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Requests sent (retries included).
    pub requests: u64,
    /// Outcomes by kind.
    pub outcomes: BTreeMap<Outcome, u64>,
    /// Simulated time at the end, in ms.
    pub sim_ms: u64,
    /// Messages put on the wire.
    pub messages: u64,
}

/// Where a driver's events and counts go: the lane's trace, stamped with the lane's own
/// clock (the model's time, turmoil's tick-quantised time, the wall clock), and its counters.
pub(crate) trait RunSink {
    /// Appends an event observed by `side`.
    fn record(&mut self, side: Side, kind: EventKind);
    /// Updates the run's counters.
    fn tally(&mut self, update: impl FnOnce(&mut RunStats));
}

/// A run's trace and counters at a simulated clock (`now`, which the lane moves): the
/// in-memory lane's and the virtual-client lane's sink.
#[derive(Debug, Default)]
pub(crate) struct SimTrace {
    pub(crate) now: Time,
    pub(crate) trace: Trace,
    pub(crate) stats: RunStats,
}

impl RunSink for SimTrace {
    fn record(&mut self, side: Side, kind: EventKind) {
        self.trace.push(self.now, side, kind);
    }

    fn tally(&mut self, update: impl FnOnce(&mut RunStats)) {
        update(&mut self.stats);
    }
}

/// The text of a panic's payload (a `&str` or a `String`), for reports.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}
