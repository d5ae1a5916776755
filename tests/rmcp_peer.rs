//! rmcp inside the simulation: an rmcp server on the simulated `server` host, driven by the
//! reference client through [`ServerUnderTest::Custom`] under the same seeds, faults and
//! oracle as the reference server.

#![cfg(feature = "harness")]

use std::cell::Cell;
use std::time::Duration;

use mcp_sim::harness::{HarnessOptions, ServerIo, ServerUnderTest};
use mcp_sim::model::{Outcome, Transport};
use mcp_sim::run::{judge_with, Judged};
use mcp_sim::scenario::Scenario;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData, RoleServer, ServiceExt};

thread_local! {
    /// Tool calls whose handler saw its cancellation token fire (all hosts of a run share the
    /// test's thread).
    static HANDLER_CANCELLED: Cell<u32> = const { Cell::new(0) };
    /// Tool calls whose handler ran to the end.
    static HANDLER_DONE: Cell<u32> = const { Cell::new(0) };
}

/// The same tool as the reference server's: `steps` steps `step_ms` apart, progress after
/// each when the request carries a progress token, stopping when cancelled.
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
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
    }
}

/// One stdio "subprocess": rmcp serving the accepted byte stream.
async fn rmcp_stdio(io: ServerIo) {
    let ServerIo::Stdio(stream) = io else { return };
    if let Ok(running) = SlowServer.serve(stream).await {
        let _ = running.waiting().await;
    }
}

fn sweep(seeds: impl IntoIterator<Item = u64>) -> Vec<(u64, Judged)> {
    let server = ServerUnderTest::custom(rmcp_stdio);
    let options = HarnessOptions::default();
    seeds
        .into_iter()
        .map(|seed| {
            let scenario = Scenario::from_seed(seed).with_transport(Transport::Stdio);
            (seed, judge_with(&scenario, &options, &server))
        })
        .collect()
}

/// Seeds of the stdio sweep: between them, results, progress, application cancels, client
/// timeouts (idle, total), server crashes with lost requests, and partitions.
const STDIO_SEEDS: std::ops::Range<u64> = 0..16;

/// rmcp 3.x serves the 2026-07-28 lifecycle: no `initialize`, every request carrying
/// `io.modelcontextprotocol/protocolVersion` and `io.modelcontextprotocol/clientCapabilities`
/// in `_meta`. The reference client's requests are accepted as they are, results come back
/// with `resultType: "complete"`, progress reaches the client under the request's token, and a
/// `notifications/cancelled` fires the handler's cancellation token and suppresses the
/// response. The oracle finds nothing on any seed, and every run settles.
#[test]
fn rmcp_stdio_server_passes_the_oracle_on_every_seed() {
    HANDLER_CANCELLED.with(|c| c.set(0));
    HANDLER_DONE.with(|c| c.set(0));
    let mut results = 0;
    let mut progress = 0;
    for (seed, judged) in sweep(STDIO_SEEDS) {
        assert_eq!(judged.crash, None, "seed {seed}");
        assert!(judged.run.complete, "seed {seed} did not settle");
        assert!(
            judged.report.violations.is_empty(),
            "seed {seed}: {:?}",
            judged.report.violations
        );
        results += judged
            .run
            .stats
            .outcomes
            .get(&Outcome::Result)
            .copied()
            .unwrap_or(0);
        let text = judged.run.trace.to_jsonl();
        // The client's 2026-07-28 requests reached the tool: no "missing metadata" or
        // "unsupported version" errors, and no initialize anywhere.
        assert!(!text.contains("\"initialize\""), "seed {seed}");
        assert!(!text.contains("\"error\""), "seed {seed}: {text}");
        progress += text.matches("notifications/progress").count();
    }
    assert!(results > 20, "{results} results");
    assert!(progress > 100, "{progress} progress notifications");
    println!(
        "{results} results, {progress} progress notifications, handlers cancelled {} and done {}",
        HANDLER_CANCELLED.with(Cell::get),
        HANDLER_DONE.with(Cell::get)
    );
    // Cancellations reached the handlers through their cancellation tokens.
    assert!(HANDLER_CANCELLED.with(Cell::get) > 0);
    assert!(HANDLER_DONE.with(Cell::get) > 0);
}

/// The sweep is deterministic: the same seed gives the same trace, rmcp included.
#[test]
fn rmcp_stdio_runs_replay() {
    for seed in [1, 5, 9] {
        let a = sweep([seed]).remove(0).1;
        let b = sweep([seed]).remove(0).1;
        assert_eq!(a.run.trace.digest(), b.run.trace.digest(), "seed {seed}");
    }
}
