//! The SSE decoder under arbitrary chunking; see `mcp_sim::fuzzing::sse_chunks`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_sim::fuzzing::ChunkedInput;

mcp_sim::asan_defaults!();

fuzz_target!(|input: ChunkedInput| mcp_sim::fuzzing::sse_chunks(&input));
