//! How fast real Python servers run inside the simulation: `mcp-sim sweep --virtual` over
//! `VIRTUAL_SEEDS` seeds (default 1000) on 2 jobs, for the Python SDK 2.3.0 and 1.30.0
//! servers on stdio and Streamable HTTP (a slow tool with progress: 5 steps of 1 s, a third of
//! the calls cancelled). Each case runs twice, with `PYTHONHASHSEED` 1 and
//! 2, and prints seeds per second and compression (simulated seconds per wall second), both
//! with the interpreters' start-up included (the whole command's wall time), and whether the
//! two runs gave the same `traces:` digest.
//!
//! Needs the SDKs in `target/peers/` (the tests install them:
//! `cargo test -p mcp-sim-cli --test virtual_python`).
//! Run: `cargo bench -p mcp-sim-cli --bench virtual_python`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

const MCP_SIM: &str = env!("CARGO_BIN_EXE_mcp-sim");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

struct Case {
    name: &'static str,
    venv: &'static str,
    script: &'static [&'static str],
    flags: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "SDK 2.3.0, stdio, auto (2026-07-28)",
        venv: "python-mcp-2.3.0",
        script: &["tests/peers/python_slow_server.py"],
        flags: &[],
    },
    Case {
        name: "SDK 2.3.0, Streamable HTTP, 2026-07-28",
        venv: "python-mcp-2.3.0",
        script: &["tests/peers/python_slow_http_server.py", "8000"],
        flags: &["--transport", "http", "--era", "modern"],
    },
    Case {
        name: "SDK 1.30.0, stdio, auto (2025-11-25)",
        venv: "python-mcp-1.30.0",
        script: &["tests/peers/python1/slow_server.py"],
        flags: &[],
    },
    Case {
        name: "SDK 1.30.0, Streamable HTTP (sessions), auto (2025-11-25)",
        venv: "python-mcp-1.30.0",
        script: &["tests/peers/python1/slow_server.py", "http", "8000"],
        flags: &["--transport", "http"],
    },
];

fn main() {
    let seeds: u64 = std::env::var("VIRTUAL_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let root = repo();
    println!("virtual sweeps: {seeds} seeds, 2 jobs, start-up included");
    for case in CASES {
        let python = root.join("target/peers").join(case.venv).join("bin/python");
        if !python.exists() {
            println!(
                "{}: skipped ({} missing: run the virtual_python tests first)",
                case.name,
                python.display()
            );
            continue;
        }
        let mut digests = Vec::new();
        for hash_seed in ["1", "2"] {
            let start = Instant::now();
            let out = Command::new(MCP_SIM)
                .args(["sweep", "--virtual", "--format", "json", "--jobs", "2"])
                .args(["--seeds", &format!("0..{seeds}")])
                .args(["--args", r#"{"steps":5,"step_ms":1000}"#])
                .args(["--report-dir", "target/mcp-sim-reports/bench-virtual"])
                .args(case.flags)
                .arg("--")
                .arg(&python)
                .args(case.script.iter().map(|s| {
                    if s.ends_with(".py") {
                        root.join(s).display().to_string()
                    } else {
                        s.to_string()
                    }
                }))
                .env("PYTHONHASHSEED", hash_seed)
                .output()
                .expect("mcp-sim runs");
            let wall = start.elapsed().as_secs_f64();
            let totals: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!(
                    "{}: not the sweep's JSON ({e}): {}",
                    case.name,
                    String::from_utf8_lossy(&out.stderr)
                )
            });
            let sim_s = totals["sim_ms"].as_u64().unwrap_or(0) as f64 / 1000.0;
            let rules: Vec<&String> = totals["violations"]
                .as_object()
                .map(|m| m.keys().collect())
                .unwrap_or_default();
            let not_replayable = totals["not_replayable"].as_array().map_or(0, Vec::len);
            println!(
                "{} (PYTHONHASHSEED={hash_seed}): {:.1} seeds/s, {:.0}x ({sim_s:.0} simulated s in {wall:.1} s), traces {}, rules {rules:?}, not-replayable {not_replayable}",
                case.name,
                seeds as f64 / wall,
                sim_s / wall,
                totals["traces"].as_str().unwrap_or("?"),
            );
            digests.push(totals["traces"].clone());
        }
        println!(
            "{}: digests {} over the two hash seeds",
            case.name,
            if digests[0] == digests[1] {
                "equal"
            } else {
                "DIFFER"
            }
        );
    }
}
