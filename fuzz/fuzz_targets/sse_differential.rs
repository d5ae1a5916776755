//! The SSE decoder against `sse-stream` on the same bytes in the same chunks; see
//! `tests/common/sse_oracle.rs`, which `tests/fuzz_regressions.rs` replays the inputs through.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_sim::fuzzing::{split_at, ChunkedInput};

#[path = "../../tests/common/sse_oracle.rs"]
mod sse_oracle;

mcp_sim::asan_defaults!();

fuzz_target!(|input: ChunkedInput| {
    let chunks = split_at(&input.data, &input.cuts);
    if let Err(e) = sse_oracle::compare(&input.data, &chunks) {
        panic!("{e}");
    }
});
