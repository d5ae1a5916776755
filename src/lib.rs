//! # mcp-sim
//!
//! Deterministic simulation and fuzzing of the Model Context Protocol's progress, cancellation
//! and timeout rules, revision 2026-07-28.
//!
//! # Quick start
//!
//! Check a server in your own `cargo test`: the reference client drives it on a simulated
//! host under each seed's latency, faults and intermediary, and the oracle judges every
//! trace. Add `mcp-sim = { path = "../mcp-sim" }` (a clone of this repository; or `git =`
//! its URL) to `[dev-dependencies]`, and, for seeded runs that replay byte for byte, `[build]
//! rustflags = ["--cfg", "tokio_unstable"]` to your crate's `.cargo/config.toml` (turmoil seeds
//! tokio's scheduler only under it; a failure's rerun line sets it when the build lacks it);
//! then a test is
//!
//! ```no_run
//! use mcp_sim::{check_server, CheckOptions, ServerIo, ServerUnderTest};
//!
//! #[test]
//! fn my_server_handles_progress_cancellation_and_timeouts() {
//!     let server = ServerUnderTest::custom(|io| async move {
//!         match io {
//!             ServerIo::Stdio(stream) => { /* my_server::serve_stdio(stream).await */ }
//!             ServerIo::Http(listener) => { /* my_server::serve_http(listener).await */ }
//!         }
//!     });
//!     check_server(&server, &CheckOptions::default()).unwrap_or_else(|f| panic!("{f}"));
//! }
//! ```
//!
//! A failure's message is the whole report: the seed, each broken rule with its level and
//! spec section, the scenario, the line that reruns that seed, and a Mermaid diagram. Here a
//! server that forges progress for a token nobody sent is caught, and the reference server
//! passes:
//!
//! ```
//! use mcp_sim::{check_server, CheckOptions, ServerIo, ServerUnderTest, Transport};
//! use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
//!
//! let forger = ServerUnderTest::custom(|io| async move {
//!     let ServerIo::Stdio(stream) = io else { return };
//!     let (read, mut write) = tokio::io::split(stream);
//!     let mut lines = BufReader::new(read).lines();
//!     while let Ok(Some(_)) = lines.next_line().await {
//!         let forged = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"forged","progress":1}}"#;
//!         let _ = write.write_all(forged).await;
//!         let _ = write.write_all(b"\n").await;
//!     }
//! });
//! let options = CheckOptions {
//!     transports: vec![Transport::Stdio],
//!     ..CheckOptions::seeds(0..4)
//! };
//! let failure = check_server(&forger, &options).unwrap_err();
//! assert!(failure.to_string().contains("progress-unknown-token"), "{failure}");
//!
//! let summary = check_server(&ServerUnderTest::Reference, &options).unwrap();
//! assert_eq!(summary.runs, 4);
//! ```
//!
//! [`CheckOptions`] sets the seeds, the transports, the intermediary ([`ProxyChoice`]),
//! whether the seeds' faults run, and which of your tools the reference client calls
//! ([`TurmoilOptions::tool_calls`]); [`check_client`] checks a client ([`ClientUnderTest`])
//! against the reference server. The `mcp-sim` command (`sim/`) checks running servers,
//! clients and sessions and sweeps seeds; `docs/` in the repository has the manual.
//!
//! # Floors
//!
//! Each module imports only modules on the floors below it, so a reader can tell what a file
//! stands on and no import cycle exists:
//!
//! | floor | module | what |
//! | --- | --- | --- |
//! | 0 | [`time`] | the simulated clock's instants; durations as whole milliseconds in files |
//! | 1 | [`wire`] | typed messages, a strict decoder with typed errors and explicit limits, an encoder that never emits an invalid message |
//! | 2 | [`framing`] | incremental NDJSON (stdio) and Server-Sent Events (Streamable HTTP) framers whose output does not depend on chunking; the faulty client framer of one mutant |
//! | 3 | [`model`] | the sans-IO client, server, backend and intermediary ([`model::bridge`]), host timeout policies, and the switches that make a reference peer faulty ([`model::mutant`]) |
//! | 4 | [`trace`] | trace format v1, the JSON Lines record of a run shared by simulations, recordings of real peers and hand-written cases |
//! | 5 | [`oracle`], [`ci`], [`exit`] | named, spec-referenced invariants checked over any trace, and over the two hops of a run through an intermediary ([`oracle::hops`]); verdicts as JUnit and GitHub annotations against a baseline; the exit codes of every command and the one policy that ends a judged run |
//! | 6 | [`diff`], [`recording`] | two runs compared by behaviour (calls aligned, classes, the verdicts' delta); a recorded session read as a script of both peers, and the matching of new requests to its calls |
//! | 7 | [`scenario`] | every knob of a run as one value, drawn from a seed |
//! | 8 | [`lanes`] | three ways to run peers, side by side, one [`lanes::RunResult`]: [`lanes::memory`] (in-process discrete events), [`lanes::turmoil`] (simulated hosts and sockets, feature `turmoil`: hyper for Streamable HTTP, NDJSON over TCP for stdio, idle-timeout proxies, crashes and partitions), [`lanes::live`] (real processes and sockets on the wall clock, feature `live`: the probe); one recorder and one HTTP exchange for all; no lane imports another |
//! | 9 | [`run`], `virtual_run` | run and judge one scenario on either lane; seeded runs of a real program under the virtual clock (feature `live`), checked for determinism |
//! | 10 | [`mutants`] | the conditions each mutant needs to show, and the hunt that gives the oracle's mutation score |
//! | 11 | [`repro`] | the reproduction contract: the knobs that name a run, the `mcp-sim replay` and `cargo test` lines that rerun it, the strict reading of `MCP_SIM_SEED` and its siblings |
//! | 12 | [`report`] | failure reports with a trace slice and a Mermaid sequence diagram |
//! | 13 | [`check`] | one call to check a user's server or client in their own `cargo test` |
//! | 14 | [`sweep`] | a range of seeds run and judged, their totals and the digest of every trace |
//!
//! The module `fuzzing` (feature `fuzzing`, hidden from these docs) holds the bodies of the
//! cargo-fuzz targets, kept in the library so that stable `cargo test` replays every committed
//! crasher; the fuzz crate and the crate's own tests turn the feature on. The `mcp-sim`
//! command (`sim/`) stands on all of them.
//!
//! # Features
//!
//! `turmoil` (the simulated lane and [`check`]), `live` (real processes and sockets) and
//! `proptest` (the strategies of [`scenario::strategies`]) are on by default; without
//! `turmoil` the crate keeps the wire, framing, model, trace, oracle, scenarios and the
//! in-memory lane. `fuzzing` adds the fuzz bodies and `arbitrary`.
#![warn(missing_docs)]

#[cfg(feature = "turmoil")]
pub use check::{check_client, check_server, CheckError, CheckFailure, CheckOptions, CheckSummary};
#[cfg(feature = "turmoil")]
pub use lanes::turmoil::{ClientUnderTest, ServerIo, ServerUnderTest, TurmoilOptions};
pub use model::{Connect, Transport};
pub use oracle::EraReading;
pub use scenario::{ProxyChoice, ProxyConfig, Scenario, ToolCalls};
pub use wire::{Era, LegacyRevision};

#[cfg(feature = "turmoil")]
pub mod check;
pub mod ci;
pub mod diff;
pub mod exit;
pub mod fit;
pub mod framing;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod lanes;
pub mod model;
pub mod mutants;
pub mod oracle;
pub mod recording;
pub mod report;
pub mod repro;
pub mod run;
pub mod scenario;
pub mod sweep;
pub mod time;
pub mod trace;
#[cfg(feature = "live")]
pub mod virtual_bridge;
#[cfg(feature = "live")]
pub mod virtual_client;
#[cfg(feature = "live")]
pub mod virtual_run;
pub mod wire;
