//! Decode throughput: the strict typed decoder against generic `serde_json::Value` parsing of
//! the same bytes, for a typical progress notification and a `tools/call` request.
//!
//! Run with `cargo bench --bench decode`. Prints messages per second for both and their
//! ratio (typed / generic; above 1.0 means strict decoding is faster). Each figure is the
//! median of several rounds.

use std::hint::black_box;
use std::time::Instant;

const PROGRESS: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":2.5,"total":3,"message":"step 2 of 3"}}"#;
const TOOLS_CALL: &[u8] = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow_op","arguments":{"steps":3,"path":"/data/big.csv"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p-7"}}}"#;

const ROUNDS: usize = 7;
const ITERATIONS: usize = 200_000;

/// Median messages per second of `f` over the rounds.
fn rate(f: impl Fn()) -> f64 {
    let mut rates: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..ITERATIONS {
                f();
            }
            ITERATIONS as f64 / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[ROUNDS / 2]
}

fn main() {
    println!(
        "{:<18} {:>14} {:>14} {:>7}",
        "message", "typed msg/s", "Value msg/s", "ratio"
    );
    for (name, bytes) in [("progress", PROGRESS), ("tools/call", TOOLS_CALL)] {
        mcp_sim::wire::decode(bytes).expect("benchmark input is valid");
        let typed = rate(|| {
            black_box(mcp_sim::wire::decode(black_box(bytes)).ok());
        });
        let generic = rate(|| {
            black_box(serde_json::from_slice::<serde_json::Value>(black_box(bytes)).ok());
        });
        println!(
            "{name:<18} {typed:>14.0} {generic:>14.0} {:>7.2}",
            typed / generic
        );
    }
}
