//! A user's rmcp server checked with one call, as a user's own test would: only the public
//! API of mcp-sim, and rmcp's `slow_op` server of `tests/peers/rmcp_slow_op.rs` standing in
//! for the user's code, in both protocol eras: the reference client speaks 2026-07-28 and,
//! as a legacy host does, opens with `initialize` (2025-11-25). `cargo test --workspace` runs
//! its test; `cargo run --example check_rmcp_server` prints the summary.

#[path = "../tests/peers/rmcp_slow_op.rs"]
mod rmcp_slow_op;

use mcp_sim::{
    check_server, CheckOptions, CheckSummary, Era, ServerIo, ServerUnderTest, Transport,
};
use rmcp::ServiceExt;

/// The user's server on the simulated host: rmcp serving the stdio stream it is handed.
fn server() -> ServerUnderTest {
    ServerUnderTest::custom(|io| async move {
        if let ServerIo::Stdio(stream) = io {
            if let Ok(running) = rmcp_slow_op::SlowServer.serve(stream).await {
                let _ = running.waiting().await;
            }
        }
    })
}

fn check() -> CheckSummary {
    let options = CheckOptions {
        transports: vec![Transport::Stdio],
        eras: vec![Era::Modern, Era::LEGACY],
        ..CheckOptions::seeds(0..8)
    };
    check_server(&server(), &options).unwrap_or_else(|failure| panic!("{failure}"))
}

#[cfg_attr(test, allow(dead_code))]
fn main() {
    let summary = check();
    println!(
        "{} runs, {} requests, outcomes {:?}, findings {:?}",
        summary.runs, summary.requests, summary.outcomes, summary.findings
    );
}

#[test]
fn rmcp_server_passes_the_check() {
    let summary = check();
    assert_eq!(summary.runs, 16, "8 seeds in each era");
}
