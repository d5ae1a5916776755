//! # mcp-sim
//!
//! Deterministic simulation and fuzzing of the Model Context Protocol's progress, cancellation
//! and timeout rules, revision 2026-07-28.
//!
//! Layers, from the bytes up (nothing flows back up):
//!
//! - [`wire`]: typed messages, a strict decoder with typed errors and explicit limits, and an
//!   encoder that never emits an invalid message;
//! - [`framing`]: incremental NDJSON (stdio) and Server-Sent Events (Streamable HTTP) framers
//!   whose output does not depend on how the input was chunked;
//! - [`model`]: the sans-IO client, server and backend, and host timeout policies;
//! - [`trace`]: trace format v1, the JSON Lines record of a run shared by simulations,
//!   recordings of real peers and hand-written cases;
//! - [`scenario`]: every knob of a run as one value, drawn from a seed;
//! - [`harness`] (feature `harness`, on by default): the same model on turmoil's simulated
//!   hosts and sockets: hyper for Streamable HTTP, NDJSON over TCP for stdio, an
//!   idle-timeout proxy, crashes and partitions;
//! - [`memory`]: the in-memory discrete-event driver, the fast lane for property tests and
//!   sweeps;
//! - [`oracle`]: named, spec-referenced invariants checked over any trace;
//! - [`mutants`]: real SDK bugs as switchable faults of the reference peers, for the
//!   mutation score of the oracle;
//! - [`run`]: run and judge one scenario on either lane;
//! - [`report`]: failure reports with a trace slice and a Mermaid sequence diagram;
//! - [`fuzzing`]: the bodies of the cargo-fuzz targets, kept in the library so that stable
//!   `cargo test` replays every committed crasher.
#![warn(missing_docs)]

pub mod framing;
pub mod fuzzing;
#[cfg(feature = "harness")]
pub mod harness;
pub mod memory;
pub mod model;
pub mod mutants;
pub mod oracle;
pub mod report;
pub mod run;
pub mod scenario;
pub mod time;
pub mod trace;
pub mod wire;
