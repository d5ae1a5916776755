//! How fast real servers and clients run inside the simulation: `mcp-sim sweep --virtual` over
//! `VIRTUAL_SEEDS` seeds (default 1000) on 2 jobs, for the pinned Python (SDK 2.3.0 and
//! 1.30.0), Node.js (TypeScript SDK v1 1.32.2 and v2 2.4.0, server-everything, FastMCP) and Go
//! (go-sdk v1.8.0) servers on the transports they serve (a slow tool with progress: 5 steps
//! of 1 s, a third of the calls cancelled; server-everything's long-running operation), and
//! `sweep --virtual-client` for the Python SDK 2.3.0 client (stdio and by URL) and the
//! TypeScript SDK v2 client (stdio), each with three calls, one timing out at 1500 ms. Each
//! case runs twice (Python with `PYTHONHASHSEED` 1, then 2) and prints seeds per second and
//! compression (simulated seconds per wall second), both with the runtimes' start-up included
//! (the whole command's wall time), the rules found, and whether the two runs gave the same
//! `traces:` digest. `VIRTUAL_CASES` (a comma-separated list of words) keeps the cases whose
//! name holds one of them.
//!
//! Needs the peers in `target/peers/` (the tests install them: `cargo test -p mcp-sim-cli
//! --test virtual_python --test virtual_node --test virtual_go`).
//! Run: `cargo bench -p mcp-sim-cli --bench virtual_peers`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

const MCP_SIM: &str = env!("CARGO_BIN_EXE_mcp-sim");
const SLOW: &str = r#"{"steps":5,"step_ms":1000}"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// One server: its command (`None` when its peer is not installed), the sweep's flags, and
/// the environments of its two runs.
struct Case {
    name: &'static str,
    /// `--virtual` (a server) or `--virtual-client`.
    mode: &'static str,
    command: Vec<PathBuf>,
    flags: Vec<&'static str>,
    envs: [&'static [(&'static str, &'static str)]; 2],
}

const HASH_SEEDS: [&[(&str, &str)]; 2] = [&[("PYTHONHASHSEED", "1")], &[("PYTHONHASHSEED", "2")]];
const PLAIN: [&[(&str, &str)]; 2] = [&[], &[]];

fn cases(root: &Path) -> Vec<Case> {
    let peers = root.join("target/peers");
    let py2 = peers.join("python-mcp-2.3.0/bin/python");
    let py1 = peers.join("python-mcp-1.30.0/bin/python");
    let ts1 = peers.join("node-ts-sdk-v1-1.32.2");
    let ts2 = peers.join("node-ts-sdk-2.4.0");
    let fastmcp = peers.join("node-fastmcp-4.20.16");
    let everything = ts1.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let go = peers.join("go-sdks-v1.8.0-v1.2.1/bin/virtual.test");
    let node = PathBuf::from("node");
    let slow = vec!["--args", SLOW];
    let http = |era: &'static str| {
        let mut f = vec!["--args", SLOW, "--transport", "http"];
        if !era.is_empty() {
            f.extend(["--era", era]);
        }
        f
    };
    let long_running = |transport: &'static str| {
        vec![
            "--tool",
            "trigger-long-running-operation",
            "--args",
            r#"{"duration":1.2,"steps":6}"#,
            "--transport",
            transport,
        ]
    };
    let p = |s: &str| PathBuf::from(s);
    vec![
        Case {
            mode: "--virtual",
            name: "Python SDK 2.3.0, stdio",
            command: vec![py2.clone(), root.join("tests/peers/python_slow_server.py")],
            flags: slow.clone(),
            envs: HASH_SEEDS,
        },
        Case {
            mode: "--virtual",
            name: "Python SDK 2.3.0, Streamable HTTP, 2026-07-28",
            command: vec![
                py2.clone(),
                root.join("tests/peers/python_slow_http_server.py"),
                p("8000"),
            ],
            flags: http("modern"),
            envs: HASH_SEEDS,
        },
        Case {
            mode: "--virtual",
            name: "Python SDK 1.30.0, stdio",
            command: vec![py1.clone(), root.join("tests/peers/python1/slow_server.py")],
            flags: slow.clone(),
            envs: HASH_SEEDS,
        },
        Case {
            mode: "--virtual",
            name: "Python SDK 1.30.0, Streamable HTTP (sessions)",
            command: vec![
                py1,
                root.join("tests/peers/python1/slow_server.py"),
                p("http"),
                p("8000"),
            ],
            flags: http(""),
            envs: HASH_SEEDS,
        },
        Case {
            mode: "--virtual",
            name: "Node.js TS SDK v1 1.32.2, stdio",
            command: vec![node.clone(), ts1.join("ts_v1_slow_server.mjs")],
            flags: slow.clone(),
            envs: PLAIN,
        },
        Case {
            mode: "--virtual",
            name: "Node.js TS SDK v2 2.4.0, stdio",
            command: vec![node.clone(), ts2.join("ts_slow_server.mjs")],
            flags: slow.clone(),
            envs: PLAIN,
        },
        Case {
            mode: "--virtual",
            name: "Node.js server-everything, stdio",
            command: vec![node.clone(), everything.clone(), p("stdio")],
            flags: long_running("stdio"),
            envs: PLAIN,
        },
        Case {
            mode: "--virtual",
            name: "Node.js server-everything, Streamable HTTP",
            command: vec![node.clone(), everything, p("streamableHttp")],
            flags: long_running("http"),
            envs: PLAIN,
        },
        Case {
            mode: "--virtual",
            name: "Node.js FastMCP 4.20.16, stdio",
            command: vec![node.clone(), fastmcp.join("fastmcp_slow_server.mjs")],
            flags: slow.clone(),
            envs: PLAIN,
        },
        Case {
            mode: "--virtual",
            name: "Node.js FastMCP 4.20.16, httpStream",
            command: vec![
                node,
                fastmcp.join("fastmcp_slow_server.mjs"),
                p("--http"),
                p("8000"),
            ],
            flags: http(""),
            envs: PLAIN,
        },
        Case {
            mode: "--virtual",
            name: "Go go-sdk v1.8.0, stdio",
            command: vec![go, p("-test.run"), p("TestMCPSimVirtual")],
            flags: slow,
            envs: PLAIN,
        },
        Case {
            mode: "--virtual-client",
            name: "Python SDK 2.3.0 client, stdio",
            command: vec![
                py2.clone(),
                root.join("tests/peers/python_client.py"),
                p(PY_CLIENT_PLAN),
                p("--"),
                p("server"),
            ],
            flags: vec!["--client-policy", "timeout=1500"],
            envs: HASH_SEEDS,
        },
        Case {
            mode: "--virtual-client",
            name: "Python SDK 2.3.0 client, Streamable HTTP",
            command: vec![
                py2,
                root.join("tests/peers/python_client.py"),
                p(PY_CLIENT_PLAN),
                p("--url"),
                p("http://127.0.0.1:8000/mcp"),
            ],
            flags: vec!["--client-policy", "timeout=1500"],
            envs: HASH_SEEDS,
        },
        Case {
            mode: "--virtual-client",
            name: "Node.js TS SDK v2 2.4.0 client, stdio",
            command: vec![
                PathBuf::from("node"),
                ts2.join("ts_client.mjs"),
                p(TS_CLIENT_PLAN),
                p("--"),
                p("server"),
            ],
            flags: vec!["--client-policy", "timeout=1500"],
            envs: PLAIN,
        },
    ]
}

/// The clients' plans: a short call, one that times out at 1500 ms, a short one after.
const PY_CLIENT_PLAN: &str = r#"[{"steps":3,"step_ms":100,"timeout_ms":1500},{"steps":25,"step_ms":200,"timeout_ms":1500},{"steps":2,"step_ms":100,"timeout_ms":1500}]"#;
const TS_CLIENT_PLAN: &str = r#"[{"steps":3,"step_ms":100,"options":{"timeout":1500}},{"steps":25,"step_ms":200,"options":{"timeout":1500}},{"steps":2,"step_ms":100,"options":{"timeout":1500}}]"#;

fn main() {
    let seeds: u64 = std::env::var("VIRTUAL_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let only: Vec<String> = std::env::var("VIRTUAL_CASES")
        .map(|v| v.split(',').map(|w| w.trim().to_lowercase()).collect())
        .unwrap_or_default();
    let root = repo();
    println!("virtual sweeps: {seeds} seeds, 2 jobs, start-up included");
    for case in cases(&root) {
        let lower = case.name.to_lowercase();
        if !only.is_empty() && !only.iter().any(|w| lower.contains(w.as_str())) {
            continue;
        }
        let missing = case.command.iter().find(|p| p.is_absolute() && !p.exists());
        if let Some(path) = missing {
            println!(
                "{}: skipped ({} missing: run the virtual tests first)",
                case.name,
                path.display()
            );
            continue;
        }
        let mut digests = Vec::new();
        for env in case.envs {
            let start = Instant::now();
            let out = Command::new(MCP_SIM)
                .args(["sweep", case.mode, "--format", "json", "--jobs", "2"])
                .args(["--seeds", &format!("0..{seeds}")])
                .args(["--report-dir", "target/mcp-sim-reports/bench-virtual"])
                .args(&case.flags)
                .arg("--")
                .args(&case.command)
                .envs(env.iter().copied())
                .env("PORT", "3001")
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
                "{} {env:?}: {:.1} seeds/s, {:.0}x ({sim_s:.0} simulated s in {wall:.1} s), traces {}, rules {rules:?}, not-replayable {not_replayable}",
                case.name,
                seeds as f64 / wall,
                sim_s / wall,
                totals["traces"].as_str().unwrap_or("?"),
            );
            digests.push(totals["traces"].clone());
        }
        println!(
            "{}: digests {} over the two runs",
            case.name,
            if digests[0] == digests[1] {
                "equal"
            } else {
                "DIFFER"
            }
        );
    }
}
