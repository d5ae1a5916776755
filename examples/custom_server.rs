//! Your own server on the simulated `server` host, driven by the reference client under the
//! same seeds, faults and oracle as the reference server.
//!
//! The server here is a small hand-written stdio server: NDJSON lines in, NDJSON lines out.
//! Its one tool, `slow_op`, sleeps `steps` times `step_ms` apart, reports progress after each
//! step when the request carried a progress token, and stops when the client cancels it. The
//! stream it is handed records every line it reads and writes, so the oracle judges it by what
//! it saw itself.
//!
//! ```text
//! cargo run --example custom_server            # seeds 0..20
//! cargo run --example custom_server -- 7 8 9   # these seeds
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use mcp_sim::lanes::turmoil::{ServerIo, ServerUnderTest, TurmoilOptions};
use mcp_sim::model::Transport;
use mcp_sim::run::judge_with_server;
use mcp_sim::scenario::Scenario;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// One stdio session: the whole server.
async fn serve(io: ServerIo) {
    let ServerIo::Stdio(stream) = io else {
        return; // this example only speaks stdio
    };
    let (read, mut write) = stream.into_split();
    // Every outgoing line goes through one writer task.
    let (out, mut lines_out) = mpsc::unbounded_channel::<Value>();
    tokio::task::spawn_local(async move {
        while let Some(v) = lines_out.recv().await {
            if write.write_all(format!("{v}\n").as_bytes()).await.is_err() {
                break;
            }
        }
    });
    let jobs: Rc<RefCell<HashMap<String, tokio::task::AbortHandle>>> = Rc::default();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = msg.get("id").cloned();
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        match (msg["method"].as_str(), id) {
            (Some("tools/call"), Some(id)) => {
                let steps = params["arguments"]["steps"].as_u64().unwrap_or(3);
                let step_ms = params["arguments"]["step_ms"].as_u64().unwrap_or(1000);
                let token = params["_meta"]["progressToken"].clone();
                let (out, jobs2, key) = (out.clone(), jobs.clone(), id.to_string());
                let task = tokio::task::spawn_local(async move {
                    for done in 1..=steps {
                        tokio::time::sleep(Duration::from_millis(step_ms)).await;
                        if !token.is_null() {
                            let _ = out.send(json!({"jsonrpc": "2.0",
                                "method": "notifications/progress",
                                "params": {"progressToken": token, "progress": done, "total": steps}}));
                        }
                    }
                    let _ = out.send(json!({"jsonrpc": "2.0", "id": id,
                        "result": {"resultType": "complete",
                                   "content": [{"type": "text", "text": "done"}]}}));
                    jobs2.borrow_mut().remove(&key);
                });
                jobs.borrow_mut()
                    .insert(msg["id"].to_string(), task.abort_handle());
            }
            (Some("notifications/cancelled"), None) => {
                let key = params["requestId"].to_string();
                if let Some(job) = jobs.borrow_mut().remove(&key) {
                    job.abort();
                }
            }
            (Some(method), Some(id)) => {
                let _ = out.send(json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("unknown method {method}")}}));
            }
            _ => {}
        }
    }
    // The pipe closed: abandon whatever is still running.
    for (_, job) in jobs.borrow_mut().drain() {
        job.abort();
    }
}

fn main() {
    let seeds: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let seeds = if seeds.is_empty() {
        (0..20).collect()
    } else {
        seeds
    };
    // The few lines a user writes: wrap the server, pick scenarios, judge.
    let server = ServerUnderTest::custom(serve);
    let options = TurmoilOptions::default();
    for seed in seeds {
        let scenario = Scenario::from_seed(seed).with_transport(Transport::Stdio);
        let judged = judge_with_server(&scenario, &options, &server);
        let verdict = if judged.fails() { "FAIL" } else { "ok" };
        println!(
            "seed {seed:>3}: {verdict:4} complete={} events={} outcomes={:?} rules={:?}",
            judged.run.complete,
            judged.run.trace.events.len(),
            judged.run.stats.outcomes,
            judged.rules()
        );
        if let Some(crash) = &judged.crash {
            println!("          crash: {crash}");
        }
    }
}
