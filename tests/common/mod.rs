//! Shared proptest strategies: they build the same [`Scenario`] type that
//! `Scenario::from_seed` draws, so failing cases shrink to small scenarios.

#![allow(dead_code)]

use std::time::Duration;

use mcp_sim::model::{ResponseMode, ServerBehaviour, SseStyle, TimeoutPolicy, Transport};
use mcp_sim::mutants::Mutants;
use mcp_sim::scenario::{Fault, PlannedCall, ProxyConfig, Scenario};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

/// A proptest configuration that keeps its regressions in the top-level
/// `proptest-regressions/` folder. `PROPTEST_CASES` overrides `cases`.
pub fn config(file: &'static str, cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(file))),
        ..Config::default()
    }
}

fn ms(lo: u64, hi: u64) -> impl Strategy<Value = Duration> {
    (lo..=hi).prop_map(Duration::from_millis)
}

pub fn arb_transport() -> impl Strategy<Value = Transport> {
    prop_oneof![Just(Transport::Stdio), Just(Transport::Http)]
}

pub fn arb_policy() -> impl Strategy<Value = TimeoutPolicy> {
    prop_oneof![
        Just(TimeoutPolicy::inspector_v1()),
        Just(TimeoutPolicy::typescript_sdk()),
        ms(1_000, 100_000).prop_map(TimeoutPolicy::fixed),
        (ms(1_000, 20_000), ms(20_000, 120_000)).prop_map(|(t, m)| TimeoutPolicy::resetting(t, m)),
    ]
}

pub fn arb_proxy() -> impl Strategy<Value = Option<ProxyConfig>> {
    prop_oneof![
        Just(None),
        Just(Some(ProxyConfig::NGINX)),
        Just(Some(ProxyConfig::ALB)),
        Just(Some(ProxyConfig::CLOUDFLARE)),
        ms(2_000, 30_000).prop_map(|d| Some(ProxyConfig::custom(d))),
    ]
}

pub fn arb_call() -> impl Strategy<Value = PlannedCall> {
    (
        ms(0, 20_000),
        0u32..30,
        ms(10, 3_000),
        any::<bool>(),
        arb_policy(),
        proptest::option::of(ms(0, 60_000)),
        any::<bool>(),
    )
        .prop_map(
            |(at, steps, step, progress, policy, cancel_after, idempotent)| PlannedCall {
                at,
                steps,
                step,
                progress,
                policy,
                cancel_after,
                idempotent,
            },
        )
}

pub fn arb_fault(calls: usize) -> impl Strategy<Value = Fault> {
    prop_oneof![
        (ms(0, 60_000), 0..calls.max(1)).prop_map(|(at, call)| Fault::ResetStream { at, call }),
        ms(0, 60_000).prop_map(|at| Fault::CrashServer { at }),
        (ms(0, 60_000), ms(10, 30_000))
            .prop_map(|(at, duration)| Fault::Partition { at, duration }),
        (ms(0, 60_000), ms(10, 10_000))
            .prop_map(|(at, duration)| Fault::Blackhole { at, duration }),
    ]
}

pub fn arb_scenario() -> impl Strategy<Value = Scenario> {
    let knobs = (
        any::<u64>(),
        arb_transport(),
        prop_oneof![
            Just((0, 1)),
            Just((1, 20)),
            Just((10, 200)),
            Just((50, 2_000))
        ],
        arb_proxy(),
        prop_oneof![Just(0u64), Just(500), Just(5_000)],
        prop_oneof![Just(1_000u64), Just(15_000), Just(30_000)],
        prop_oneof![4 => Just(ResponseMode::Sse), 1 => Just(ResponseMode::Json)],
        any::<bool>(),
    );
    (knobs, proptest::collection::vec(arb_call(), 1..=8))
        .prop_flat_map(|(k, calls)| {
            let n = calls.len();
            (
                Just(k),
                Just(calls),
                proptest::collection::vec(arb_fault(n), 0..=2),
            )
        })
        .prop_map(
            |(
                (seed, transport, (lo, hi), proxy, progress_ms, keepalive_ms, mode, no_buffering),
                calls,
                mut faults,
            )| {
                faults.sort_by_key(mcp_sim::scenario::fault_time);
                let server = ServerBehaviour {
                    progress_min_interval: Duration::from_millis(progress_ms),
                    keepalive_interval: Some(Duration::from_millis(keepalive_ms)),
                    response_mode: mode,
                    sse_style: if seed % 4 == 0 {
                        SseStyle::PrettyCrlfSplit
                    } else {
                        SseStyle::Plain
                    },
                };
                let scenario = Scenario {
                    seed,
                    transport: Transport::Http,
                    latency: (Duration::from_millis(lo), Duration::from_millis(hi)),
                    proxy,
                    server,
                    no_buffering_header: no_buffering,
                    calls,
                    faults,
                    mutants: Mutants::NONE,
                };
                scenario.with_transport(transport)
            },
        )
}

/// Runs `scenario` on `lane` and fails the test on a crash, a MUST violation or a run that
/// does not settle; returns the run's trace digest.
pub fn assert_clean(scenario: &Scenario, lane: mcp_sim::run::Lane) -> u64 {
    let judged = mcp_sim::run::judge(scenario, lane);
    let musts: Vec<String> = judged
        .report
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
