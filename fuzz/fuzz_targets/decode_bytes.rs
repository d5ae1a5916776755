//! Raw bytes into the strict decoder; see `mcp_sim::fuzzing::decode_bytes`.
#![no_main]

use libfuzzer_sys::fuzz_target;

mcp_sim::asan_defaults!();

fuzz_target!(|data: &[u8]| mcp_sim::fuzzing::decode_bytes(data));
