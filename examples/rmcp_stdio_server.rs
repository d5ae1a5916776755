//! An rmcp 3.x server as a real stdio process, for `mcp-sim probe`: the tool `slow_op`
//! `{steps, step_ms}` of `tests/peers/rmcp_slow_op.rs` (the one the rmcp simulation tests
//! use), served on stdin and stdout.
//!
//! ```text
//! cargo build --example rmcp_stdio_server
//! cargo run --release -p mcp-sim-cli -- probe --args '{"steps":4,"step_ms":100}' \
//!     -- target/debug/examples/rmcp_stdio_server
//! ```

#[path = "../tests/peers/rmcp_slow_op.rs"]
mod rmcp_slow_op;

use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = rmcp_slow_op::SlowServer;
    if let Ok(running) = server.serve(rmcp::transport::stdio()).await {
        let _ = running.waiting().await;
    }
}
