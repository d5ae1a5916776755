//! Structure-aware traces into JSON Lines and the oracle; see
//! `mcp_sim::fuzzing::trace_events`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_sim::fuzzing::ArbTrace;

mcp_sim::asan_defaults!();

fuzz_target!(|input: ArbTrace| mcp_sim::fuzzing::trace_events(&input));
