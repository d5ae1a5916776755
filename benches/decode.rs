//! Decode throughput: the strict typed decoder against generic `serde_json::Value` parsing of
//! the same bytes, for a typical progress notification and a `tools/call` request.
//!
//! Run with `cargo bench --bench decode`. Prints messages per second for both and their
//! ratio (typed / generic; above 1.0 means strict decoding is faster). Each round times both
//! decoders back to back, so a burst of load from other processes hits both alike; each
//! figure is the median over the rounds, the ratio the median of the rounds' ratios.

use std::hint::black_box;
use std::time::Instant;

const PROGRESS: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":2.5,"total":3,"message":"step 2 of 3"}}"#;
const TOOLS_CALL: &[u8] = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow_op","arguments":{"steps":3,"path":"/data/big.csv"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p-7"}}}"#;

const ROUNDS: usize = 15;
const ITERATIONS: usize = 100_000;

/// Messages per second of one timed run of `f`.
fn rate(f: &impl Fn()) -> f64 {
    let start = Instant::now();
    for _ in 0..ITERATIONS {
        f();
    }
    ITERATIONS as f64 / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    println!(
        "{:<18} {:>14} {:>14} {:>7}",
        "message", "typed msg/s", "Value msg/s", "ratio"
    );
    for (name, bytes) in [("progress", PROGRESS), ("tools/call", TOOLS_CALL)] {
        mcp_sim::wire::decode(bytes).expect("benchmark input is valid");
        let typed = || {
            black_box(mcp_sim::wire::decode(black_box(bytes)).ok());
        };
        let generic = || {
            black_box(serde_json::from_slice::<serde_json::Value>(black_box(bytes)).ok());
        };
        let rounds: Vec<(f64, f64)> = (0..ROUNDS)
            .map(|_| (rate(&typed), rate(&generic)))
            .collect();
        let typed = median(rounds.iter().map(|r| r.0).collect());
        let generic = median(rounds.iter().map(|r| r.1).collect());
        let ratio = median(rounds.iter().map(|r| r.0 / r.1).collect());
        println!("{name:<18} {typed:>14.0} {generic:>14.0} {ratio:>7.2}");
    }
}
