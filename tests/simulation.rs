//! The reference client and server under the in-memory driver: random workloads, latencies,
//! proxies and faults on both transports never break a MUST rule, every run settles, and the
//! same scenario always gives the same trace.

mod common;

use std::time::Duration;

use mcp_sim::lanes::memory;
use mcp_sim::lanes::Lane;
use mcp_sim::model::{Outcome, ResponseMode, ServerBehaviour, TimeoutPolicy, Transport};
use mcp_sim::oracle;
use mcp_sim::scenario::{PlannedCall, Scenario};
use mcp_sim::trace::EventKind;
use proptest::prelude::*;

fn assert_clean(scenario: &Scenario) -> mcp_sim::lanes::RunResult {
    common::assert_clean(scenario, Lane::Memory);
    memory::run(scenario)
}

proptest! {
    #![proptest_config(common::config("proptest-regressions/simulation.txt", 256))]

    #[test]
    fn reference_peers_never_break_a_must_rule(scenario in common::arb_scenario()) {
        assert_clean(&scenario);
    }

    #[test]
    fn a_scenario_always_gives_the_same_trace(scenario in common::arb_scenario()) {
        let a = memory::run(&scenario);
        let b = memory::run(&scenario);
        prop_assert_eq!(a.trace.digest(), b.trace.digest());
    }
}

#[test]
fn seeded_scenarios_are_clean_and_deterministic() {
    for seed in 0..common::seed_count(500) {
        let scenario = Scenario::from_seed(seed);
        let first = common::assert_clean(&scenario, Lane::Memory);
        let second = memory::run(&Scenario::from_seed(seed)).trace.digest();
        assert_eq!(first, second, "seed {seed}");
    }
}

/// One call of one 1 s step with a fixed 50 ms latency, cancelled by the application
/// `cancel_ms` after it started.
fn crossing(transport: Transport, cancel_ms: u64) -> Scenario {
    let call = PlannedCall {
        at: Duration::ZERO,
        steps: 1,
        step: Duration::from_secs(1),
        progress: true,
        policy: TimeoutPolicy::typescript_sdk(),
        cancel_after: Some(Duration::from_millis(cancel_ms)),
        idempotent: false,
    };
    Scenario {
        seed: 7,
        transport,
        latency: (Duration::from_millis(50), Duration::from_millis(50)),
        proxy: None,
        server: ServerBehaviour {
            response_mode: ResponseMode::Sse,
            ..ServerBehaviour::default()
        },
        no_buffering_header: true,
        calls: vec![call],
        faults: vec![],
        mutants: mcp_sim::mutants::MutantSet::NONE,
    }
}

fn outcomes(run: &mcp_sim::lanes::RunResult) -> Vec<Outcome> {
    run.trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Outcome { outcome, .. } => Some(*outcome),
            _ => None,
        })
        .collect()
}

#[test]
fn graceful_crossing_of_result_and_cancel() {
    // The server sends the result at 1050 ms; the client cancels at 1060 ms, before the result
    // arrives at 1100 ms; the server gets the cancel at 1110 ms, after it answered.
    for transport in [Transport::Stdio, Transport::Http] {
        let scenario = crossing(transport, 1060);
        let run = memory::run(&scenario);
        let report = oracle::check(&run.trace, &run.oracle_config(&scenario));
        assert!(report.is_clean(), "{transport}: {:?}", report.violations);
        assert_eq!(
            outcomes(&run),
            vec![Outcome::Cancelled],
            "{transport}: the crossed result is dropped quietly"
        );
        let server_results = run
            .trace
            .events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::Send(w) if w.msg.as_ref().is_some_and(|m| m.get("result").is_some())))
            .count();
        assert_eq!(server_results, 1, "{transport}: the result really was sent");
    }
}

#[test]
fn a_cancel_well_before_the_result_stops_the_work() {
    for transport in [Transport::Stdio, Transport::Http] {
        let scenario = crossing(transport, 500);
        let run = assert_clean(&scenario);
        assert_eq!(outcomes(&run), vec![Outcome::Cancelled]);
        let sent_result = run.trace.events.iter().any(|e| {
            matches!(&e.kind, EventKind::Send(w) if w.msg.as_ref().is_some_and(|m| m.get("result").is_some()))
        });
        assert!(
            !sent_result,
            "{transport}: the server answered a request it had been told to cancel"
        );
    }
}

/// Replays one seed on the in-memory lane under `cargo test`:
/// `MCP_SIM_SEED=N [MCP_SIM_TRANSPORT=stdio|http] cargo test --release --test simulation replay_one_seed -- --nocapture`.
#[test]
fn replay_one_seed() {
    let scenario = common::scenario_from_env();
    println!("{scenario}");
    println!(
        "trace digest {:016x}",
        common::assert_clean(&scenario, Lane::Memory)
    );
}
