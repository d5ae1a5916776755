//! An rmcp 3.x server as a real stdio process, for `mcp-sim probe`: the tool `slow_op`
//! `{steps, step_ms}` works `steps` steps `step_ms` apart, reports progress after each when
//! the request carries a progress token, and stops when its cancellation token fires.
//!
//! ```text
//! cargo build --example rmcp_stdio_server
//! cargo run --release -p mcp-sim-cli -- probe --args '{"steps":4,"step_ms":100}' \
//!     -- target/debug/examples/rmcp_stdio_server
//! ```

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer, ServiceExt};

struct SlowServer;

#[tool_router(server_handler)]
impl SlowServer {
    #[tool(description = "Timed work with progress")]
    async fn slow_op(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let arg = |k: &str, d: u64| args.get(k).and_then(|v| v.as_u64()).unwrap_or(d);
        let (steps, step_ms) = (arg("steps", 3), arg("step_ms", 1000));
        let token = ctx.meta.get_progress_token();
        for done in 1..=steps {
            tokio::select! {
                _ = ctx.ct.cancelled() => {
                    return Err(ErrorData::internal_error("cancelled", None));
                }
                _ = tokio::time::sleep(Duration::from_millis(step_ms)) => {}
            }
            if let Some(token) = &token {
                let _ = ctx
                    .peer
                    .notify_progress(
                        ProgressNotificationParam::new(token.clone(), done as f64)
                            .with_total(steps as f64),
                    )
                    .await;
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Ok(running) = SlowServer.serve(rmcp::transport::stdio()).await {
        let _ = running.waiting().await;
    }
}
