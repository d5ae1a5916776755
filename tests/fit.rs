//! `mcp-sim fit` in simulation, where the truth is known: a seed's scenario is run, its trace
//! fitted, and the fitted scenario run again (seed → trace → fit → scenario → trace). The
//! verdicts, the outcome of each call and the knobs the wire shows are compared; with each
//! mutant, which mutant `fit` names. `MCP_SIM_SEEDS` widens the round trip (default 200 seeds
//! per era; `docs/performance.md` has the 1000-seed figures); `--nocapture` prints them;
//! `MCP_SIM_FIT_LANE=turmoil` runs it on turmoil's lane.

mod common;

use mcp_sim::fit::{fit, FitOptions};
use mcp_sim::lanes::{memory, Lane};
use mcp_sim::repro::{EraChoice, Repro};
use mcp_sim::run;
use mcp_sim::scenario::Scenario;
use mcp_sim::wire::Era;

#[derive(Default, Debug)]
struct Tally {
    runs: u64,
    fitted: u64,
    same_verdict: u64,
    same_outcomes: u64,
    requests: u64,
    requests_same: u64,
    calls: u64,
    starts_exact: u64,
    starts_held: u64,
    cancels: u64,
    cancels_exact: u64,
    policies_exact: u64,
    transport_era_exact: u64,
    /// Seeds whose fitted transport or era differ.
    transport_era_wrong: Vec<u64>,
}

/// The round trip over the seeds whose faults (if `faults`) or lack of them (if not) it
/// measures: partitions and blackholes leave no trace of their own, so a recording cannot show
/// them, and the two groups are told apart.
fn round_trip(era: Era, seeds: u64, faults: bool) -> Tally {
    let lane = round_trip_lane();
    // What "exact" means on the lane's clock: to the ms, or to turmoil's tick (a send waits
    // for the step it falls in).
    let resolution = match lane {
        #[cfg(feature = "turmoil")]
        Lane::Turmoil { tick } => tick.as_millis(),
        Lane::Memory => 1,
    };
    let mut t = Tally::default();
    for seed in 0..seeds {
        let repro = Repro {
            era: EraChoice::Fixed(era),
            ..Repro::seed(seed, lane)
        };
        let s = repro.scenario();
        if s.faults.is_empty() == faults {
            continue;
        }
        let original = run::judge(&s, lane);
        t.runs += 1;
        let Ok(fitted) = fit(&original.run.trace, &FitOptions { lane }) else {
            continue;
        };
        t.fitted += 1;
        let f = &fitted.file.scenario;
        let again = run::judge(f, lane);
        t.same_verdict += u64::from(original.rules() == again.rules());
        // Per call, paired as `mcp-sim diff` pairs them (by params and occurrence).
        let d = mcp_sim::diff::diff(
            &original.run.trace,
            &again.run.trace,
            &[],
            &Default::default(),
        );
        let outcome = |c: &mcp_sim::diff::Call| {
            c.classes
                .iter()
                .find(|(k, _)| *k == mcp_sim::diff::Class::Outcome)
                .map(|(_, v)| v.clone())
        };
        let tool_calls = d
            .base
            .calls
            .iter()
            .filter(|c| c.method == "tools/call")
            .count() as u64;
        let same = d
            .pairs
            .iter()
            .filter(|p| d.base.calls[p.base].method == "tools/call")
            .filter(|p| outcome(&d.base.calls[p.base]) == outcome(&d.new.calls[p.new]))
            .count() as u64;
        t.requests += tool_calls;
        t.requests_same += same;
        t.same_outcomes += u64::from(same == tool_calls);
        // The era the run spoke, as the oracle read it: an auto-mode client may fall back (a
        // proxy that strips the protocol's headers makes the server refuse the discovery).
        let spoke = original.verdict.era.era;
        let exact = f.transport == s.transport && f.era == spoke;
        t.transport_era_exact += u64::from(exact);
        if !exact {
            t.transport_era_wrong.push(seed);
        }
        // The knobs the wire shows, call by call in the order they started.
        let mut planned = s.calls.clone();
        planned.sort_by_key(|c| c.at);
        for (a, b) in planned.iter().zip(&f.calls) {
            t.calls += 1;
            // A start shows as the send, which the legacy handshake may hold back.
            t.starts_exact += u64::from(a.at.abs_diff(b.at).as_millis() <= resolution);
            t.starts_held +=
                u64::from(b.at > a.at + std::time::Duration::from_millis(resolution as u64));
            t.policies_exact += u64::from(a.policy == b.policy);
            // A cancel shows on the wire only when its call was still running.
            // When the cancel happened, on the run's clock: the wire shows it from the send,
            // the scenario plans it from the application's start, which in the legacy era may
            // come before the handshake ends (the call then waits for it).
            if let (Some(c), Some(d)) = (a.cancel_after, b.cancel_after) {
                t.cancels += 1;
                t.cancels_exact +=
                    u64::from((a.at + c).abs_diff(b.at + d).as_millis() <= resolution);
            }
        }
    }
    t
}

/// The lane of the round trip: the in-memory one, or turmoil's with `MCP_SIM_FIT_LANE=turmoil`
/// (HTTP over simulated TCP, hyper, the idle-cutting proxies).
fn round_trip_lane() -> Lane {
    match std::env::var("MCP_SIM_FIT_LANE").as_deref() {
        #[cfg(feature = "turmoil")]
        Ok("turmoil") => Lane::turmoil(),
        Ok("memory") | Err(_) => Lane::Memory,
        Ok(other) => panic!("MCP_SIM_FIT_LANE={other:?}: memory or turmoil"),
    }
}

fn share(n: u64, of: u64) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}

#[test]
fn a_seeds_trace_fitted_runs_again_as_it_ran() {
    let seeds = common::seed_count(200);
    for (era, faults) in [
        (Era::Modern, false),
        (Era::LEGACY, false),
        (Era::Modern, true),
        (Era::LEGACY, true),
    ] {
        let t = round_trip(era, seeds, faults);
        println!(
            "{} {}: {} runs, {} fitted; same verdict {:.1} %, every tool call's outcome the same {:.1} % ({:.1} % of {} tool calls); starts exact {:.1} % (held back by the handshake {:.1} %), cancels exact {:.1} %, policies exact {:.1} %, transport and era {:.1} %",
            era.version(),
            if faults { "with faults" } else { "without faults" },
            t.runs,
            t.fitted,
            share(t.same_verdict, t.fitted),
            share(t.same_outcomes, t.fitted),
            share(t.requests_same, t.requests),
            t.requests,
            share(t.starts_exact, t.calls),
            share(t.starts_held, t.calls),
            share(t.cancels_exact, t.cancels),
            share(t.policies_exact, t.calls),
            share(t.transport_era_exact, t.fitted),
        );
        if !faults {
            assert_eq!(t.transport_era_exact, t.fitted, "{t:?}");
            assert!(share(t.same_verdict, t.fitted) >= 95.0, "{t:?}");
            assert!(share(t.requests_same, t.requests) >= 90.0, "{t:?}");
            assert!(share(t.cancels_exact, t.cancels) >= 90.0, "{t:?}");
        }
    }
}

#[test]
fn the_same_trace_fits_the_same_scenario() {
    let s = Scenario::calls_only(11);
    let trace = memory::run(&s).trace;
    let a = fit(&trace, &FitOptions::default()).unwrap().file.to_json();
    let b = fit(&trace, &FitOptions::default()).unwrap().file.to_json();
    assert_eq!(a, b);
}

/// Which mutant `fit` names for the trace of each mutant's first kill on the in-memory lane
/// (the hunt of `mcp-sim mutants`): the confusion matrix's rows. A row's diagonal is the
/// mutant itself among those named; `docs/performance.md` prints the matrix.
#[test]
fn fit_names_the_mutant_that_made_the_trace() {
    use mcp_sim::model::mutant::{MutantSide, ALL};
    use mcp_sim::mutants::hunt_scenario;
    use mcp_sim::scenario::Fault;
    let (mut rows, mut diagonal, mut among) = (0, 0, 0);
    let mut confused = Vec::new();
    let mut unkilled = Vec::new();
    for &m in ALL {
        if m.info().side == MutantSide::Intermediary {
            continue; // the turmoil lane's (a two-hop recording)
        }
        // The first seed whose run breaks a rule the mutant is expected to break, among those
        // whose faults the wire shows (a partition or a blackhole leaves no trace of its own,
        // in a recording as in a simulated trace).
        let visible = |s: &Scenario| {
            !s.faults
                .iter()
                .any(|f| matches!(f, Fault::Partition { .. } | Fault::Blackhole { .. }))
        };
        let kill = (0..common::seed_count(300)).find_map(|seed| {
            let s = hunt_scenario(m, seed, m.environment().with(m));
            if !visible(&s) {
                return None;
            }
            let judged = run::judge(&s, Lane::Memory);
            let hit = judged
                .rules()
                .iter()
                .any(|r| m.expected_rules().contains(r));
            (hit && judged.crash.is_none()).then_some((seed, judged))
        });
        let Some((seed, judged)) = kill else {
            unkilled.push(m.to_string());
            continue;
        };
        let trace = judged.run.trace;
        let Ok(fitted) = fit(&trace, &FitOptions::default()) else {
            confused.push(format!("{m}: not fitted"));
            continue;
        };
        rows += 1;
        let named: Vec<String> = fitted
            .file
            .scenario
            .mutants
            .iter()
            .map(|n| n.to_string())
            .collect();
        if fitted.file.scenario.mutants.has(m) {
            diagonal += 1;
        } else {
            let reproducing: Vec<&str> = fitted
                .file
                .explained
                .iter()
                .flat_map(|e| e.mutants.iter().map(String::as_str))
                .collect();
            if reproducing.contains(&m.to_string().as_str()) {
                among += 1;
            }
            confused.push(format!(
                "{m} (seed {seed}) -> {named:?}, reproducing {reproducing:?}"
            ));
        }
    }
    println!(
        "confusion matrix diagonal: {diagonal} of {rows} mutants named for their own trace; \
         {among} more among the mutants that reproduce it (the same behaviour); not killed with \
         visible faults: {unkilled:?}"
    );
    for c in &confused {
        println!("  {c}");
    }
    assert!(rows >= 30, "only {rows} mutants hunted");
    assert!(
        diagonal * 10 >= rows * 6,
        "{diagonal} of {rows}: {confused:#?}"
    );
    assert!(
        (diagonal + among) * 10 >= rows * 8,
        "{diagonal} + {among} of {rows}: {confused:#?}"
    );
}

/// The pinned real peers' sessions (probes of seed 1, as their baselines were taken, and the
/// recorded Python SDK 1.30.0 session): each fits, the fitted run breaks exactly the rules the
/// peer's baseline pins, and `fit` names the mutant of the peer's behaviour, or none for a
/// clean peer.
#[test]
fn the_pinned_peers_sessions_fit_to_their_baselines() {
    let cases: &[(&str, &str, Option<&str>)] = &[
        (
            "ts-sdk-v1-1.32.2-server-seed1.jsonl",
            "ts-sdk-v1-server.txt",
            None,
        ),
        (
            "ts-sdk-2.4.0-legacy-seed1.jsonl",
            "ts-sdk-v2-legacy-server.txt",
            // Progress of the running step after the cancel: the nearest model is a server
            // that ignores the cancel (its calls' cancels end the same way on the wire).
            Some("legacy_ignores_cancel"),
        ),
        (
            "server-everything-2026.8.31-stdio-seed1.jsonl",
            "server-everything-stdio.txt",
            Some("legacy_ignores_cancel"),
        ),
        (
            "python-sdk-1.30.0-stdio.jsonl",
            "python-sdk-1-server.txt",
            Some("legacy_cancel_answered"),
        ),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    for &(recording, baseline, named) in cases {
        let text = std::fs::read_to_string(dir.join("recordings").join(recording)).unwrap();
        let trace = mcp_sim::trace::Trace::from_jsonl(&text).unwrap();
        let fitted = fit(&trace, &FitOptions::default()).expect("a probe's session fits");
        let pinned = std::fs::read_to_string(dir.join("baselines").join(baseline)).unwrap();
        let pinned = mcp_sim::ci::Baseline::parse(&pinned, mcp_sim::ci::is_rule).unwrap();
        let pinned: Vec<&str> = pinned.expected.iter().map(String::as_str).collect();
        let f = &fitted.fidelity;
        assert_eq!(
            f.fitted_rules, pinned,
            "{recording}: the fitted run breaks the baseline's rules"
        );
        assert!(
            f.agrees(),
            "{recording}:\n{}",
            mcp_sim::fit::explain_text(&fitted)
        );
        let chosen: Vec<String> = fitted
            .file
            .scenario
            .mutants
            .iter()
            .map(|m| m.to_string())
            .collect();
        match named {
            None => assert!(
                chosen.is_empty(),
                "{recording}: a clean peer names no mutant: {chosen:?}"
            ),
            Some(m) => assert!(chosen.iter().any(|c| c == m), "{recording}: {chosen:?}"),
        }
    }
}
