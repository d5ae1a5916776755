//! From a real session to the failures near it, in simulation: the committed check-proxy
//! recording of PyPI mcp-proxy 0.13.0 in client mode (seed 3, where its race did not fire) is
//! fitted, and neighbours of the fitted scenario that move a cancel break
//! `progress-after-completion`: the intermediary's own answer to a cancel overtakes upstream
//! progress already inside it. The nearest is shrunk to the smallest move, said in words. The
//! live confirmation of such a neighbour is `check-proxy --scenario` (docs/fit.md).

#![cfg(feature = "turmoil")]

use mcp_sim::fit::neighbours::{minimize, search};
use mcp_sim::fit::{fit, FitOptions};
use mcp_sim::lanes::Lane;
use mcp_sim::scenario::around::PerturbSpec;
use mcp_sim::trace::Trace;

const RACE: &str = "progress-after-completion";

fn recording(name: &str) -> Trace {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/recordings")
        .join(name);
    Trace::from_jsonl(&std::fs::read_to_string(path).expect("a committed recording"))
        .expect("a valid trace")
}

#[test]
fn the_neighbours_of_a_fitted_mcp_proxy_session_break_progress_after_completion() {
    let trace = recording("pypi-mcp-proxy-0.13.0-client-mode-seed3.jsonl");
    let lane = Lane::turmoil();
    let fitted = fit(&trace, &FitOptions { lane }).expect("a two-hop recording fits");
    let file = &fitted.file;
    assert!(
        file.scenario.bridge,
        "two hops: the intermediary is in the scenario"
    );
    let answered = file
        .explained
        .iter()
        .find(|e| e.rule == "cancel-answered-locally")
        .expect("the recording's own finding is explained");
    assert!(answered
        .mutants
        .iter()
        .any(|m| m == "bridge_answers_cancel"));
    let spec = PerturbSpec::parse("cancel=±2s").unwrap();
    let around = search(&file.scenario, 0..200, &spec, lane, 2);
    assert!(
        !around.base_rules.contains(&RACE),
        "the fitted run keeps the recording's luck: {:?}",
        around.base_rules
    );
    let nearest = around
        .found
        .iter()
        .find(|f| f.new_rules.contains(&RACE))
        .unwrap_or_else(|| panic!("no neighbour of 200 breaks {RACE}"));
    // Nearest first, and the same search finds the same neighbours.
    assert!(around
        .found
        .windows(2)
        .all(|w| w[0].neighbour.distance <= w[1].neighbour.distance));
    let again = search(&file.scenario, 0..200, &spec, lane, 1);
    let seeds = |a: &mcp_sim::fit::neighbours::Around| {
        a.found
            .iter()
            .map(|f| (f.neighbour.perturb_seed, f.digest))
            .collect::<Vec<_>>()
    };
    assert_eq!(seeds(&around), seeds(&again), "jobs change nothing");
    let small = minimize(&file.scenario, nearest, RACE, lane);
    assert!(
        small.words.starts_with("moving the cancel of call"),
        "{}",
        small.words
    );
    assert!(small
        .words
        .ends_with("is enough to break progress-after-completion"));
    assert!(small.changes.len() <= nearest.neighbour.changes.len());
    let judged = mcp_sim::run::judge(&small.scenario, lane);
    assert!(
        judged.rules().contains(&RACE),
        "the minimized change still breaks it"
    );
    eprintln!(
        "{} neighbours, {} break {RACE}; nearest: perturb seed {}; {}",
        around.runs,
        around.found.len(),
        nearest.neighbour.perturb_seed,
        small.words
    );
}

/// A session that broke nothing: the TypeScript SDK v2 2.4.0 server probed in the legacy era
/// with every cancel drawn after its call's work (`tests/recordings/ts-sdk-2.4.0-legacy-cancels-after-the-work.jsonl`,
/// seed 2, cancels within 2.5 s of calls of 0.6 s: none met a running call). `fit` names no
/// mutant, and no neighbour breaks a rule with the reference server; but that server's
/// behaviours the session does not refute include answering a cancelled call, and under it
/// neighbours that put a cancel into a call's work break `response-after-cancel`. The live
/// half (`probe --scenario --hypothesis`) is `sim/tests/scenario_live.rs`.
#[test]
fn a_clean_session_names_no_mutant_and_its_hypotheses_are_searched() {
    use mcp_sim::fit::neighbours::{assuming, hypotheses};
    use mcp_sim::model::mutant::MutantSide;
    use mcp_sim::model::Mutant;

    let trace = recording("ts-sdk-2.4.0-legacy-cancels-after-the-work.jsonl");
    let lane = Lane::Memory;
    let fitted = fit(&trace, &FitOptions { lane }).expect("a probe's recording fits");
    assert!(
        fitted.fidelity.agrees(),
        "{}",
        mcp_sim::fit::explain_text(&fitted)
    );
    let base = &fitted.file.scenario;
    assert!(base.mutants.is_empty(), "a clean session names no mutant");
    assert!(fitted.file.explained.is_empty());
    let spec = PerturbSpec::default();
    let own = search(base, 0..100, &spec, lane, 2);
    assert!(own.base_rules.is_empty());
    assert!(
        own.found.is_empty(),
        "the reference server breaks nothing anywhere near: {:?}",
        own.found.iter().map(|f| &f.new_rules).collect::<Vec<_>>()
    );
    let unrefuted = hypotheses(base, &[MutantSide::Server], lane);
    assert!(
        unrefuted.contains(&Mutant::RespondAfterCancel),
        "{unrefuted:?}"
    );
    assert!(
        unrefuted
            .iter()
            .all(|m| m.info().side == MutantSide::Server),
        "only the real peer's side"
    );
    let assumed = assuming(base, Some(Mutant::RespondAfterCancel));
    let around = search(&assumed, 0..100, &spec, lane, 2);
    let nearest = around
        .found
        .iter()
        .find(|f| f.new_rules.contains(&"response-after-cancel"))
        .expect("a neighbour that cancels a running call");
    assert!(nearest
        .neighbour
        .changes
        .iter()
        .any(|c| matches!(c, mcp_sim::scenario::around::Change::Cancel { .. })));
}
