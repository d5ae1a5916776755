//! The live lane: real processes and sockets on the wall clock.
//!
//! The model's clock here is the number of milliseconds since the run began, read from
//! `std::time::Instant`; everything else is as in the simulated lanes: the reference client
//! drives the peer, the lanes' recorder writes the same trace shapes, and the
//! same oracle judges them. Seeds still decide the schedule and the faults, so a run can be
//! repeated, but a real peer's timing cannot be: verdicts here lean on evidence that does not
//! depend on timing where it can (barriers on stdio, calibration; see [`probe`]).
//!
//! One module per tool, over the sockets and processes they share ([`net`]):
//!
//! - [`probe`]: drive a real server with a seeded schedule ([`probe::probe`]), and what a run
//!   exercised, found beyond the rules and concluded ([`probe::findings`]);
//! - [`serve`]: the reference server for a real client (`mcp-sim serve`);
//! - [`record`]: a transparent tap between a real host and its server (`mcp-sim record`);
//! - [`check_proxy`]: an intermediary between the reference client and the reference server,
//!   both hops in one trace (`mcp-sim check-proxy`);
//! - [`interrupt`]: ending a run early on a signal, and what a run must not leave behind;
//! - [`net`]: a child process's pipes ([`stdio`]), posts to a live endpoint ([`http`]), a
//!   local intermediary with the simulation's proxy presets and seeded faults ([`relay`]), and
//!   the wall-clock trace the tools record into.

pub mod check_proxy;
pub mod interrupt;
pub mod net;
pub mod probe;
pub mod record;
pub mod serve;

pub use net::trace_file::{TraceFile, TraceFileError};
pub use net::TraceOut;
pub use net::{http, relay, stdio};
pub use probe::findings;

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
