//! rmcp's version of the reference server's tool, shared by `tests/rmcp_peer.rs` (inside the
//! simulation) and `examples/rmcp_stdio_server.rs` (a real process for `mcp-sim probe`):
//! `slow_op {steps, step_ms}` works `steps` steps `step_ms` apart, reports progress after each
//! when the request carries a progress token, and stops when its cancellation token fires.

use std::cell::Cell;
use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer};

thread_local! {
    /// Tool calls whose handler saw its cancellation token fire (all hosts of a run share the
    /// test's thread).
    pub static HANDLER_CANCELLED: Cell<u32> = const { Cell::new(0) };
    /// Tool calls whose handler ran to the end.
    pub static HANDLER_DONE: Cell<u32> = const { Cell::new(0) };
}

/// A handler's work: `steps` steps `step_ms` apart, progress after each when the request
/// carries a progress token, stopping when cancelled.
pub async fn work(
    ctx: &RequestContext<RoleServer>,
    steps: u64,
    step_ms: u64,
) -> Result<(), ErrorData> {
    let token = ctx.meta.get_progress_token();
    for done in 1..=steps {
        tokio::select! {
            _ = ctx.ct.cancelled() => {
                HANDLER_CANCELLED.with(|c| c.set(c.get() + 1));
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
    HANDLER_DONE.with(|c| c.set(c.get() + 1));
    Ok(())
}

/// The same tool as the reference server's: `slow_op {steps, step_ms}`.
#[derive(Clone)]
pub struct SlowServer;

#[tool_router(server_handler)]
impl SlowServer {
    #[tool(description = "Timed work with progress")]
    async fn slow_op(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let arg = |k: &str, d: u64| args.get(k).and_then(|v| v.as_u64()).unwrap_or(d);
        work(&ctx, arg("steps", 3), arg("step_ms", 1000)).await?;
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
    }
}
