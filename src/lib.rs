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
//! - [`fuzzing`]: the bodies of the cargo-fuzz targets, kept in the library so that stable
//!   `cargo test` replays every committed crasher.
#![warn(missing_docs)]

pub mod framing;
pub mod fuzzing;
pub mod wire;
