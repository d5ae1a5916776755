//! Structure-aware encode/decode round trip; see `mcp_sim::fuzzing::roundtrip`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_sim::fuzzing::ArbMessage;

mcp_sim::asan_defaults!();

fuzz_target!(|msg: ArbMessage| mcp_sim::fuzzing::roundtrip(&msg));
