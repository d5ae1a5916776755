//! The reference client and server under the in-memory driver: random workloads, latencies,
//! proxies and faults on both transports never break a MUST rule, every run settles, and the
//! same scenario always gives the same trace.

mod common;

use std::time::Duration;

use mcp_sim::lanes::memory;
use mcp_sim::lanes::Lane;
use mcp_sim::model::{Outcome, ResponseMode, ServerBehaviour, TimeoutPolicy, Transport};
use mcp_sim::oracle;
use mcp_sim::scenario::{CallKind, PlannedCall, Scenario};
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
        kind: mcp_sim::scenario::CallKind::TOOL,
        sampling: false,
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
        era: mcp_sim::Era::Modern,
        opening: mcp_sim::scenario::Opening::Pinned,
        bridge: false,
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

/// Replays the run the environment names (`mcp_sim::repro`), as `mcp-sim sweep` prints it
/// for a failing seed: `MCP_SIM_SEED=N [MCP_SIM_TRANSPORT=..] [MCP_SIM_TICK_MS=..]
/// [MCP_SIM_PROXY=..] [MCP_SIM_MUTANT=..] cargo test --test simulation replay_one_seed --
/// --nocapture`. Without `MCP_SIM_SEED` it replays seed 0.
#[test]
fn replay_one_seed() {
    common::replay_from_env(Lane::Memory);
}

/// Outcomes of the application's tool calls (not of polls or cancels) in a run.
fn call_outcomes(run: &mcp_sim::lanes::RunResult) -> std::collections::BTreeMap<Outcome, u64> {
    let calls: std::collections::BTreeSet<mcp_sim::wire::RequestId> = run
        .trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Send(w) if e.side == mcp_sim::trace::Side::Client => {
                match w.decode(&Default::default()) {
                    Ok(mcp_sim::wire::Message::Request(r)) if r.method == "tools/call" => {
                        Some(r.id)
                    }
                    _ => None,
                }
            }
            _ => None,
        })
        .collect();
    let mut out = std::collections::BTreeMap::new();
    for e in &run.trace.events {
        if let EventKind::Outcome { request, outcome } = &e.kind {
            if calls.contains(request) {
                *out.entry(*outcome).or_default() += 1;
            }
        }
    }
    out
}

/// Tasks survive what kills calls (§6, §7.3). Each seed's tool calls run on Streamable HTTP
/// under the seed's faults and proxy twice, as plain calls and declared as tasks, none retried:
/// a call whose stream is reset or cut is lost, while a task's work goes on and the next poll
/// finds it. Server crashes are left out: the reference keeps its tasks in memory, so a crash
/// loses them as it loses calls. Both runs are clean; the figures are printed (`--nocapture`).
#[test]
fn tasks_survive_the_faults_that_kill_calls() {
    let mut calls = std::collections::BTreeMap::new();
    let mut tasks = std::collections::BTreeMap::new();
    for seed in 0..common::seed_count(300) {
        let mut plain = Scenario::calls_only(seed).with_transport(Transport::Http);
        // A crash takes the reference server's tasks with it (they live in its memory).
        plain
            .faults
            .retain(|f| !matches!(f, mcp_sim::scenario::Fault::CrashServer { .. }));
        if plain.faults.is_empty() && plain.proxy.is_none() {
            continue;
        }
        for c in &mut plain.calls {
            c.idempotent = false;
        }
        let mut as_tasks = plain.clone();
        for c in &mut as_tasks.calls {
            c.kind = CallKind::Tool {
                task: true,
                input_rounds: 0,
            };
        }
        for (scenario, totals) in [(&plain, &mut calls), (&as_tasks, &mut tasks)] {
            let run = assert_clean(scenario);
            for (o, n) in call_outcomes(&run) {
                *totals.entry(o).or_insert(0u64) += n;
            }
        }
    }
    println!("as calls: {calls:?}\nas tasks: {tasks:?}");
    let lost =
        |m: &std::collections::BTreeMap<Outcome, u64>| m.get(&Outcome::Lost).copied().unwrap_or(0);
    let done = |m: &std::collections::BTreeMap<Outcome, u64>| {
        m.get(&Outcome::Result).copied().unwrap_or(0)
    };
    assert!(
        lost(&tasks) * 2 < lost(&calls),
        "tasks lost {} vs calls {}",
        lost(&tasks),
        lost(&calls)
    );
    assert!(
        done(&tasks) > done(&calls),
        "tasks done {} vs calls {}",
        done(&tasks),
        done(&calls)
    );
}

/// The legacy era on the in-memory lane, on both transports: every seed's client opens with
/// `initialize`, the trace is judged by the legacy rules, no MUST or SHOULD is broken (a
/// host-policy finding, an idle stream cut, may be), and a seed replays to the same digest.
#[test]
fn legacy_seeds_are_judged_as_legacy_clean_and_deterministic() {
    let mut transports = std::collections::BTreeSet::new();
    for seed in 0..common::seed_count(500) {
        let scenario = Scenario::from_seed(seed).in_era(mcp_sim::Era::LEGACY);
        transports.insert(scenario.transport);
        let judged = mcp_sim::run::judge(&scenario, Lane::Memory);
        assert_eq!(judged.verdict.era.era, mcp_sim::Era::LEGACY, "seed {seed}");
        let broken: Vec<_> = judged
            .verdict
            .violations
            .iter()
            .filter(|v| v.level != mcp_sim::oracle::Level::Policy)
            .collect();
        assert!(broken.is_empty(), "seed {seed}: {broken:?}");
        assert!(!judged.fails(), "seed {seed}");
        let again = memory::run(&scenario).trace.digest();
        assert_eq!(judged.run.trace.digest(), again, "seed {seed}");
    }
    assert_eq!(transports.len(), 2, "both transports ran: {transports:?}");
}
