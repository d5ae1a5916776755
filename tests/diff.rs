//! `diff` in the simulation, where the ground truth is known: the reference against itself
//! shows nothing, the reference against each mutant names the rule that mutant breaks, a
//! difference the base's repeats also show is noise, and runs whose calls do not pair are not
//! compared.

use mcp_sim::diff::{self, Class, DiffOptions};
use mcp_sim::exit::Exit;
use mcp_sim::lanes::Lane;
use mcp_sim::model::MutantSet;
use mcp_sim::mutants::{self, hunt_scenario};
use mcp_sim::run::{judge, CRASH};
use mcp_sim::scenario::Scenario;
use mcp_sim::trace::Trace;

/// Seeds a mutant is hunted on before its diff is taken (the mutation tests use as many).
const BUDGET: u64 = 100;

fn options(scenario: &Scenario, run: &mcp_sim::lanes::RunResult) -> DiffOptions {
    DiffOptions {
        oracle: run.oracle_config(scenario),
        ..DiffOptions::default()
    }
}

#[test]
fn the_reference_against_itself_shows_no_change_on_either_era_or_transport() {
    for seed in 0..40 {
        let s = Scenario::from_seed(seed);
        let a = judge(&s, Lane::Memory).run;
        let b = judge(&s, Lane::Memory).run;
        let d = diff::diff(&a.trace, &b.trace, &[], &options(&s, &a));
        assert_eq!(d.aligned_share(), 1.0, "seed {seed}: {}", diff::text(&d));
        assert_eq!(d.exit(), Exit::Pass, "seed {seed}: {}", diff::text(&d));
        assert!(d.newly_broken.is_empty() && d.fixed.is_empty());
    }
}

#[test]
fn the_reference_against_each_mutant_names_the_rule_that_mutant_breaks() {
    let mut problems = Vec::new();
    let mut named = 0;
    for &m in mutants::ALL.iter().filter(|m| !m.turmoil_only()) {
        // A mutant that panics the server is caught by the run, not by a rule of its trace.
        if m.expected_rules() == [CRASH] {
            continue;
        }
        let hunt = mutants::hunt(m, 0..BUDGET, Lane::Memory);
        let Some(kill) = hunt.kill else {
            problems.push(format!("{m} was not killed"));
            continue;
        };
        let env = m.environment();
        let base_scenario = hunt_scenario(m, kill.seed, env);
        let base = judge(&base_scenario, Lane::Memory).run;
        let new = judge(&hunt_scenario(m, kill.seed, env.with(m)), Lane::Memory).run;
        let d = diff::diff(
            &base.trace,
            &new.trace,
            &[],
            &options(&base_scenario, &base),
        );
        let newly: Vec<&str> = d.newly_broken.iter().map(|r| r.rule).collect();
        if !newly.iter().any(|r| m.expected_rules().contains(r)) {
            problems.push(format!(
                "{m} (seed {}): newly broken {newly:?}, expected one of {:?}\n{}",
                kill.seed,
                m.expected_rules(),
                diff::text(&d)
            ));
        } else if d.exit() == Exit::Pass {
            problems.push(format!("{m}: exit 0 for a regression\n{}", diff::text(&d)));
        } else {
            named += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(named >= 50, "only {named} mutants compared");
}

/// The seed's run of the reference and of `m` (the base and the new run).
fn runs(m: mutants::Mutant, seed: u64) -> (Scenario, Trace, Trace) {
    let s = hunt_scenario(m, seed, MutantSet::NONE);
    let base = judge(&s, Lane::Memory).run.trace;
    let new = judge(
        &hunt_scenario(m, seed, MutantSet::NONE.with(m)),
        Lane::Memory,
    )
    .run
    .trace;
    (s, base, new)
}

#[test]
fn an_answered_cancel_is_a_change_of_class_and_a_rule_newly_broken() {
    let m = mutants::Mutant::RespondAfterCancel;
    let kill = mutants::hunt(m, 0..BUDGET, Lane::Memory)
        .kill
        .expect("killed");
    let (_, base, new) = runs(m, kill.seed);
    let d = diff::diff(&base, &new, &[], &DiffOptions::default());
    let changed: Vec<&diff::ClassChange> = d
        .changed_pairs()
        .flat_map(|p| &p.changes)
        .filter(|c| c.class == Class::Cancel)
        .collect();
    assert!(
        changed
            .iter()
            .any(|c| c.base.starts_with("cancelled") && c.new.contains("answered with")),
        "{}",
        diff::text(&d)
    );
    assert_eq!(d.exit(), Exit::Broken);
    // Every format says so.
    let json = diff::json(&d);
    assert_eq!(json["exit_code"], 1);
    assert!(json["newly_broken"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["rule"] == "response-after-cancel" && r["level"] == "MUST"));
    assert!(diff::junit(&d).contains("<failure"));
    assert!(diff::github(&d).contains("::error title=response-after-cancel::newly broken: "));
    let mermaid = diff::mermaid(&d).expect("a call changed");
    assert!(mermaid.starts_with("sequenceDiagram") && mermaid.contains("box new"));
}

#[test]
fn a_difference_the_base_repeats_also_show_is_noise() {
    let m = mutants::Mutant::RespondAfterCancel;
    let kill = mutants::hunt(m, 0..BUDGET, Lane::Memory)
        .kill
        .expect("killed");
    let (_, base, new) = runs(m, kill.seed);
    // A "repeat of the base" that behaves as the new run: everything that differs is noise.
    let d = diff::diff(
        &base,
        &new,
        std::slice::from_ref(&new),
        &DiffOptions::default(),
    );
    assert_eq!(d.exit(), Exit::Pass, "{}", diff::text(&d));
    assert!(d.newly_broken.iter().all(|r| r.noise));
    assert!(d.pairs.iter().flat_map(|p| &p.changes).all(|c| c.noise));
    // A repeat that agrees with the base leaves the change standing.
    let d = diff::diff(
        &base,
        &new,
        std::slice::from_ref(&base),
        &DiffOptions::default(),
    );
    assert_eq!(d.exit(), Exit::Broken, "{}", diff::text(&d));
}

#[test]
fn runs_whose_calls_do_not_pair_are_not_compared() {
    // Two seeds with different calls: few pair by params.
    let (a, b) = (Scenario::from_seed(3), Scenario::from_seed(4));
    let (ta, tb) = (
        judge(&a, Lane::Memory).run.trace,
        judge(&b, Lane::Memory).run.trace,
    );
    let d = diff::diff(&ta, &tb, &[], &DiffOptions::default());
    assert!(d.aligned_share() < diff::MIN_ALIGNED, "{}", diff::text(&d));
    assert_eq!(d.exit(), Exit::Inconclusive);
    assert!(!d.only_base.is_empty() || !d.only_new.is_empty());
    // Two empty traces made no call: nothing to compare is not "no change".
    let empty = Trace::new();
    let d = diff::diff(&empty, &empty, &[], &DiffOptions::default());
    assert_eq!(d.exit(), Exit::Inconclusive);
}

#[cfg(feature = "turmoil")]
#[test]
fn through_an_intermediary_the_front_hops_calls_pair_and_the_cross_hop_rule_is_named() {
    let m = mutants::Mutant::BridgeAnswersCancel;
    let kill = mutants::hunt(m, 0..20, Lane::turmoil())
        .kill
        .expect("killed through the bridge");
    let env = m.environment();
    let s = hunt_scenario(m, kill.seed, env);
    let base = judge(&s, Lane::turmoil()).run;
    let new = judge(&hunt_scenario(m, kill.seed, env.with(m)), Lane::turmoil()).run;
    assert!(base.trace.is_two_hop() && new.trace.is_two_hop());
    let d = diff::diff(&base.trace, &new.trace, &[], &options(&s, &base));
    assert_eq!(d.aligned_share(), 1.0, "{}", diff::text(&d));
    let newly: Vec<&str> = d.newly_broken.iter().map(|r| r.rule).collect();
    assert!(
        newly.contains(&"cancel-answered-locally"),
        "{}",
        diff::text(&d)
    );
    assert_eq!(d.exit(), Exit::Broken);
}

/// Only the server's side, as `serve` records it: the answer written after the server read
/// the cancel is still the change, seen from the server.
#[test]
fn a_server_side_trace_alone_shows_the_answered_cancel() {
    let m = mutants::Mutant::RespondAfterCancel;
    let kill = mutants::hunt(m, 0..BUDGET, Lane::Memory)
        .kill
        .expect("killed");
    let (_, base, new) = runs(m, kill.seed);
    let server_side = |t: &Trace| Trace {
        events: t
            .events
            .iter()
            .filter(|e| e.side != mcp_sim::trace::Side::Client)
            .cloned()
            .collect(),
    };
    let d = diff::diff(
        &server_side(&base),
        &server_side(&new),
        &[],
        &DiffOptions::default(),
    );
    let cancel = d
        .changed_pairs()
        .flat_map(|p| &p.changes)
        .find(|c| c.class == Class::Cancel)
        .unwrap_or_else(|| panic!("{}", diff::text(&d)));
    assert!(cancel.new.contains("answered with"), "{}", diff::text(&d));
    assert!(d
        .newly_broken
        .iter()
        .any(|r| r.rule == "response-after-cancel"));
}
