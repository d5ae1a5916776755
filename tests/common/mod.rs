//! What the simulation tests share: the library's proptest strategies, a clean-run check and
//! the environment's replay seed.

#![allow(dead_code)]

use mcp_sim::model::Transport;
pub use mcp_sim::scenario::strategies::*;
use mcp_sim::scenario::Scenario;

/// Runs `scenario` on `lane` and fails the test on a crash, a MUST violation or a run that
/// does not settle; returns the run's trace digest.
pub fn assert_clean(scenario: &Scenario, lane: mcp_sim::lanes::Lane) -> u64 {
    let judged = mcp_sim::run::judge(scenario, lane);
    let musts: Vec<String> = judged
        .verdict
        .violations
        .iter()
        .filter(|v| v.level == mcp_sim::oracle::Level::Must)
        .map(|v| v.to_string())
        .collect();
    assert!(
        judged.crash.is_none(),
        "{scenario}\ncrash: {:?}",
        judged.crash
    );
    assert!(musts.is_empty(), "{scenario}\n{}", musts.join("\n"));
    judged.run.trace.digest()
}

/// The seed and transport named by `MCP_SIM_SEED` (default 0) and `MCP_SIM_TRANSPORT`, as the
/// `cargo test` replay lines printed by `mcp-sim sweep` set them.
pub fn scenario_from_env() -> Scenario {
    let seed: u64 = std::env::var("MCP_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let scenario = Scenario::from_seed(seed);
    match std::env::var("MCP_SIM_TRANSPORT").as_deref() {
        Ok("stdio") => scenario.with_transport(Transport::Stdio),
        Ok("http") => scenario.with_transport(Transport::Http),
        _ => scenario,
    }
}

/// `MCP_SIM_SEEDS`, or `default`.
pub fn seed_count(default: u64) -> u64 {
    std::env::var("MCP_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
