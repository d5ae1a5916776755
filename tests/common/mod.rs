//! What the simulation tests share: the library's proptest strategies, a clean-run check and
//! the run the environment names for replay.

#![allow(dead_code)]

use mcp_sim::repro::ReproEnv;
#[cfg(feature = "proptest")]
#[allow(unused_imports)] // not every test binary draws scenarios
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

/// Replays the run the environment names on `lane` (`MCP_SIM_SEED`, default 0, and the other
/// variables of [`mcp_sim::repro`]), as the `cargo test` lines printed by `mcp-sim sweep` set
/// them: prints the scenario, the trace digest and the broken rules, and fails as the run
/// fails. A variable that does not parse fails the test naming it.
pub fn replay_from_env(lane: mcp_sim::lanes::Lane) {
    // A scenario file (`mcp-sim fit`'s, or a neighbour of one) names the run instead of a seed.
    if let Some(file) = mcp_sim::repro::FileRepro::from_env(lane).unwrap_or_else(|e| panic!("{e}"))
    {
        let (scenario, digest) = file.scenario().unwrap_or_else(|e| panic!("{e}"));
        println!("scenario {digest:016x}: {scenario}");
        return judge_clean(&scenario, file.lane, &file.replay_line());
    }
    let repro = ReproEnv::read()
        .and_then(|env| env.repro(lane))
        .unwrap_or_else(|e| panic!("{e}"));
    let scenario = repro.scenario();
    println!("{scenario}");
    judge_clean(&scenario, repro.lane, &repro.replay_line());
}

/// Runs `scenario`, prints its digest and rules, and fails with `replay` if it breaks one.
fn judge_clean(scenario: &Scenario, lane: mcp_sim::lanes::Lane, replay: &str) {
    let judged = mcp_sim::run::judge(scenario, lane);
    println!("trace digest {:016x}", judged.run.trace.digest());
    println!("rules: {}", judged.rules().join(", "));
    assert!(
        !judged.fails(),
        "{}\nreplay: {replay}",
        mcp_sim::report::violations_text(&judged.verdict)
    );
}

/// `MCP_SIM_SEEDS` (a seed count), or `default` when it is not set.
pub fn seed_count(default: u64) -> u64 {
    match std::env::var("MCP_SIM_SEEDS") {
        Err(_) => default,
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("MCP_SIM_SEEDS={v:?} is not a seed count")),
    }
}
