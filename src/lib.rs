//! # mcp-sim
//!
//! Deterministic simulation and fuzzing of the Model Context Protocol's progress, cancellation
//! and timeout rules, revision 2026-07-28.
//!
//! # Floors
//!
//! Each module imports only modules on the floors below it, so a reader can tell what a file
//! stands on and no import cycle exists:
//!
//! | floor | module | what |
//! | --- | --- | --- |
//! | 0 | [`time`] | the simulated clock's instants |
//! | 1 | [`wire`] | typed messages, a strict decoder with typed errors and explicit limits, an encoder that never emits an invalid message |
//! | 2 | [`framing`] | incremental NDJSON (stdio) and Server-Sent Events (Streamable HTTP) framers whose output does not depend on chunking; the faulty client framer of one mutant |
//! | 3 | [`model`] | the sans-IO client, server and backend, host timeout policies, and the switches that make a reference peer faulty ([`model::mutant`]) |
//! | 4 | [`trace`] | trace format v1, the JSON Lines record of a run shared by simulations, recordings of real peers and hand-written cases |
//! | 5 | [`oracle`] | named, spec-referenced invariants checked over any trace |
//! | 6 | [`scenario`] | every knob of a run as one value, drawn from a seed |
//! | 7 | [`lanes`] | three ways to run peers, side by side, one [`lanes::RunResult`]: [`lanes::memory`] (in-process discrete events), [`lanes::turmoil`] (simulated hosts and sockets, feature `turmoil`: hyper for Streamable HTTP, NDJSON over TCP for stdio, idle-timeout proxies, crashes and partitions), [`lanes::live`] (real processes and sockets on the wall clock, feature `live`: the probe); one recorder and one HTTP exchange for all; no lane imports another |
//! | 8 | [`run`] | run and judge one scenario on either lane |
//! | 9 | [`mutants`] | the conditions each mutant needs to show, and the hunt that gives the oracle's mutation score |
//! | 10 | [`report`] | failure reports with a trace slice and a Mermaid sequence diagram |
//! | 11 | [`check`] | one call to check a user's server or client in their own `cargo test` |
//!
//! [`fuzzing`] holds the bodies of the cargo-fuzz targets (on [`wire`], [`framing`], the
//! [`trace`] reader with the [`oracle`], the sans-IO [`model`] and the lanes' readers,
//! [`lanes::readers`]), kept in the library so that stable `cargo test` replays every committed
//! crasher. The `mcp-sim`
//! command (`sim/`) stands on all of them.
#![warn(missing_docs)]

#[cfg(feature = "turmoil")]
pub mod check;
pub mod framing;
pub mod fuzzing;
pub mod lanes;
pub mod model;
pub mod mutants;
pub mod oracle;
pub mod report;
pub mod run;
pub mod scenario;
pub mod time;
pub mod trace;
pub mod wire;
