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
//! - [`fuzzing`]: the bodies of the cargo-fuzz targets, kept in the library so that stable
//!   `cargo test` replays every committed crasher.
#![warn(missing_docs)]

pub mod framing;
pub mod fuzzing;
pub mod model;
pub mod time;
pub mod trace;
pub mod wire;
