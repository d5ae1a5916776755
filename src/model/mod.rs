//! The sans-IO protocol model: an MCP client and server for stdio and Streamable HTTP, the
//! backend their tools call, a message-level intermediary between them ([`bridge`]), and the
//! timeout policies of real hosts.
//!
//! # Contract
//!
//! Every type here is a plain state machine in the style of quinn-proto: inputs are
//! `handle_*(now, ...)` and application calls, outputs are drained with `poll_*`, and
//! `poll_timeout` gives the next deadline at which `handle_timeout(now)` must be called (calling
//! it early or twice is harmless). Time only moves forward and is always an argument; there is
//! no I/O, clock, randomness or async code, so the same model runs in the in-memory driver,
//! under turmoil and against real processes, and a run is a pure function of its inputs.
//!
//! After any input, drain in this order: `poll_transmit`, `poll_event` (client) or
//! `poll_backend` (server), then `poll_timeout`.
//!
//! # Transports
//!
//! On [`Transport::Stdio`] every message is a line on one shared ordered pipe and a client
//! cancels with `notifications/cancelled`. On [`Transport::Http`] every request is its own POST
//! with its own response stream ([`StreamId`]); closing that stream *is* the cancellation, and a
//! stream lost before its response loses the request (docs/spec/mcp-2026-07-28.md §3.2, §5.2).

use std::fmt;

pub mod backend;
pub mod bridge;
pub mod client;
pub mod mutant;
pub mod policy;
pub mod recorded;
pub(crate) mod resume;
pub mod server;
pub mod server_eras;
mod server_transmit;
pub mod tasks;

pub use backend::{Backend, BackendCall};
pub use bridge::{Bridge, BridgeOut};
pub use client::{
    CallSpec, Client, ClientConfig, ClientError, ClientEvent, ClientTransmit, Connect, Outcome,
};
pub use mutant::{Mutant, MutantSet};
pub use policy::{ClientPolicies, TimeoutPolicy, TimeoutReason};
pub use server::{
    Admission, Refusal, RequestHead, ResponseMode, Server, ServerBehaviour, ServerConfig,
    ServerEras, ServerTransmit, SessionLimits, SseStyle, CALL_TAG, SLOW_TOOL,
};
pub use tasks::TaskStatus;

/// The transport a client and server talk over (`stdio` or `http` in files).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// One bidirectional byte stream of NDJSON lines (a subprocess's stdin and stdout).
    Stdio,
    /// Streamable HTTP: one POST per client message, one response stream per request.
    Http,
}

impl Transport {
    /// `stdio` or `http`, as in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One HTTP request/response exchange: the POST of one client message and its response
/// stream. Ids are assigned by the client and never reused in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u64);

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}", self.0)
    }
}
