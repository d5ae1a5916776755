//! The reference peers on turmoil: property sweeps over latency, proxies, faults, cancel
//! timing, progress cadence and timeout policies on both transports, judged by the oracle;
//! same seed, same trace.
//!
//! `PROPTEST_CASES` and `MCP_SIM_SEEDS` make the sweeps longer.

mod common;

use mcp_sim::lanes::turmoil::{self as turmoil_lane, TurmoilOptions};
use mcp_sim::lanes::Lane;
use mcp_sim::scenario::Scenario;
use proptest::prelude::*;

fn assert_clean(scenario: &Scenario) -> u64 {
    common::assert_clean(scenario, Lane::turmoil())
}

proptest! {
    #![proptest_config(common::config("proptest-regressions/turmoil_sim.txt", 24))]

    #[test]
    fn reference_peers_on_turmoil_never_break_a_must_rule(scenario in common::arb_scenario()) {
        assert_clean(&scenario);
    }
}

#[test]
fn seeds_replay_to_identical_traces() {
    for seed in 0..common::seed_count(12) {
        let scenario = Scenario::from_seed(seed);
        let first = assert_clean(&scenario);
        let second = turmoil_lane::run(&scenario, &TurmoilOptions::default())
            .expect("second run")
            .trace
            .digest();
        assert_eq!(first, second, "seed {seed} gave two different traces");
    }
}

/// Replays the run the environment names (`mcp_sim::repro`), as `mcp-sim sweep` prints it
/// for a failing seed: `MCP_SIM_SEED=N [MCP_SIM_TRANSPORT=..] [MCP_SIM_TICK_MS=..]
/// [MCP_SIM_PROXY=..] [MCP_SIM_MUTANT=..] cargo test --test turmoil_sim replay_one_seed --
/// --nocapture`. Without `MCP_SIM_SEED` it replays seed 0.
#[test]
fn replay_one_seed() {
    common::replay_from_env(Lane::turmoil());
}

/// The legacy era on the turmoil lane: judged by the legacy rules, no rule broken, the same
/// digest twice.
#[test]
fn legacy_seeds_on_turmoil_are_clean_and_replay_identically() {
    for seed in 0..common::seed_count(12) {
        let scenario = Scenario::from_seed(seed).in_era(mcp_sim::Era::LEGACY);
        let judged = mcp_sim::run::judge(
            &scenario,
            mcp_sim::lanes::Lane::Turmoil {
                tick: TurmoilOptions::default().tick,
            },
        );
        assert_eq!(judged.verdict.era.era, mcp_sim::Era::LEGACY, "seed {seed}");
        assert!(
            judged.verdict.violations.is_empty(),
            "seed {seed}: {:?}",
            judged.verdict.violations
        );
        let again = turmoil_lane::run(&scenario, &TurmoilOptions::default())
            .expect("second run")
            .trace
            .digest();
        assert_eq!(judged.run.trace.digest(), again, "seed {seed}");
    }
}

/// Judged as `check-proxy` judges (the reference peers at both ends), the run holds no
/// violation against either end: the judge reads the cancel point and every connection
/// right (`OracleConfig::reference_ends`).
fn no_finding_against_the_reference_ends(
    scenario: &Scenario,
    judged: &mcp_sim::run::Judged,
    seed: u64,
) {
    let config = mcp_sim::oracle::OracleConfig {
        reference_ends: true,
        ..judged.run.oracle_config(scenario)
    };
    let verdict = mcp_sim::oracle::check(&judged.run.trace, &config);
    let defects: Vec<String> = verdict
        .judge_defects
        .iter()
        .map(|v| v.to_string())
        .collect();
    assert!(defects.is_empty(), "seed {seed} ({scenario}): {defects:#?}");
}

/// Through the reference intermediary (two hops, stdio on both) the reference peers break no
/// MUST rule and no intermediary rule, in either era, faults and cancels included; and the
/// trace has both hops.
#[test]
fn the_reference_bridge_breaks_no_rule_across_its_hops() {
    let mut problems = Vec::new();
    for seed in 0..common::seed_count(24) {
        let scenario = Scenario::from_seed(seed).with_bridge();
        let judged = mcp_sim::run::judge(&scenario, Lane::turmoil());
        let trace = &judged.run.trace;
        assert!(trace.is_two_hop(), "seed {seed}: one hop only");
        no_finding_against_the_reference_ends(&scenario, &judged, seed);
        let across: Vec<String> = judged
            .verdict
            .violations
            .iter()
            .filter(|v| v.level == mcp_sim::oracle::Level::Must || v.hop.is_none())
            .map(|v| v.to_string())
            .collect();
        if judged.crash.is_some() || !across.is_empty() {
            problems.push(format!(
                "seed {seed} ({scenario}): {:?} {across:#?}",
                judged.crash
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Through the reference era bridge (a 2026-07-28 HTTP front before a 2025-11-25 stdio
/// upstream) the reference peers break no rule at all, each hop is judged in its own era, the
/// run replays to the same trace, and the client's closed streams reach the upstream as
/// `notifications/cancelled`: the sweep exercised the translation.
#[test]
fn the_reference_era_bridge_translates_closed_streams_into_legacy_cancels() {
    use mcp_sim::trace::{EventKind, Hop, Side};
    let mut problems = Vec::new();
    let (mut closes, mut cancels) = (0, 0);
    for seed in 0..common::seed_count(24) {
        let scenario = Scenario::from_seed(seed).with_era_bridge();
        let judged = mcp_sim::run::judge(&scenario, Lane::turmoil());
        let trace = &judged.run.trace;
        no_finding_against_the_reference_ends(&scenario, &judged, seed);
        assert_eq!(judged.verdict.era.era, mcp_sim::Era::Modern, "seed {seed}");
        assert_eq!(
            judged.verdict.upstream_era.as_ref().map(|e| e.era),
            Some(mcp_sim::Era::LEGACY),
            "seed {seed}"
        );
        for e in &trace.events {
            match (&e.hop, e.side, &e.kind) {
                (Some(Hop::Front), Side::Client, EventKind::Close { by, .. })
                    if *by == Side::Client =>
                {
                    closes += 1
                }
                (Some(Hop::Back), Side::Server, EventKind::Recv(w))
                    if w.msg.as_ref().and_then(|m| m.get("method"))
                        == Some(&serde_json::json!("notifications/cancelled")) =>
                {
                    cancels += 1
                }
                _ => {}
            }
        }
        let again = turmoil_lane::run(&scenario, &TurmoilOptions::default())
            .expect("second run")
            .trace
            .digest();
        if judged.crash.is_some()
            || !judged.verdict.violations.is_empty()
            || again != trace.digest()
        {
            problems.push(format!(
                "seed {seed} ({scenario}): {:?} {:#?}",
                judged.crash, judged.verdict.violations
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        closes > 0 && cancels > 0,
        "{closes} closes, {cancels} cancels"
    );
}
