//! A real peer's output, cut at arbitrary points, through the live lane's readers and the
//! reference client; see `mcp_sim::fuzzing::live_output`.
#![no_main]

use libfuzzer_sys::fuzz_target;

mcp_sim::asan_defaults!();

fuzz_target!(|input: mcp_sim::fuzzing::LiveOutput| mcp_sim::fuzzing::live_output(&input));
