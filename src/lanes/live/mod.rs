//! The live lane: real processes and sockets on the wall clock.
//!
//! The model's clock here is the number of milliseconds since the run began, read from
//! `std::time::Instant`; everything else is as in the simulated lanes: the reference client
//! drives the peer, the lanes' recorder writes the same trace shapes, and the
//! same oracle judges them. Seeds still decide the schedule and the faults, so a run can be
//! repeated, but a real peer's timing cannot be: verdicts here lean on evidence that does not
//! depend on timing where it can (barriers on stdio, calibration; see [`probe`]).
//!
//! - [`probe`]: drive a real server with a seeded schedule ([`probe::probe`]).
//! - [`findings`]: what a run exercised, what it found beyond the rules, its verdict.
//! - [`stdio`]: a child process's pipes; [`http`]: posts to a live endpoint; [`relay`]: a local
//!   intermediary with the simulation's proxy presets and seeded faults.

pub mod findings;
pub mod http;
pub mod probe;
pub mod record;
pub mod relay;
pub mod serve;
pub mod stdio;
pub(crate) mod wall_trace;

use crate::lanes::http_exchange::ExchangeItem;
use crate::model::StreamId;

/// What the reader threads (stdio) and the POST tasks (HTTP) report.
pub enum Input {
    /// stdio: bytes from the server's stdout.
    Bytes(Vec<u8>),
    /// stdio: the server closed its stdout.
    Eof,
    /// HTTP: what a post's exchange yielded. An end or a cut that the local relay caused
    /// carries the relay's reason.
    Http {
        /// The post's stream.
        stream: StreamId,
        /// The status, a message, a comment, the end or a cut.
        item: ExchangeItem,
        /// The relay's cut, when the end or cut was the relay's doing.
        by_relay: Option<Cut>,
    },
}

pub use relay::Cut;
