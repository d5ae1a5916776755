//! Any bytes as a JSON Lines trace into the reader and the oracle; see
//! `mcp_sim::fuzzing::trace_jsonl`.
#![no_main]

use libfuzzer_sys::fuzz_target;

mcp_sim::asan_defaults!();

fuzz_target!(|data: &[u8]| mcp_sim::fuzzing::trace_jsonl(data));
