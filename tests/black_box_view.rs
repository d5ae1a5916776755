//! The oracle's black-box evidence for `response-after-cancel`, measured on simulated stdio
//! runs judged from the client's side alone (the server's events removed), as `mcp-sim probe`
//! and `check-trace` judge a real server.
//!
//! - The reference server never sends anything for a request after it read the cancel, but
//!   its results and progress cross cancels on the wire: none of those crossings may be
//!   flagged (the false-alarm rate of the grace window and of the "answer to the cancel"
//!   evidence, which needs no barrier).
//! - The `respond_after_cancel` mutant (python-sdk #1419) answers a cancel: it must be flagged
//!   from the client's side too, on the first seeds that cancel a running call.
//!
//! Network faults are left out of these scenarios: from the client's side the grace window
//! stands in for the server's receipt of the cancel, which holds for a pipe to a local process
//! and not across a partition that holds messages for seconds.
//!
//! `MCP_SIM_SEEDS` widens the sweep (default 300 seeds); `--nocapture` prints the figures.

mod common;

use mcp_sim::lanes::memory;
use mcp_sim::model::Transport;
use mcp_sim::mutants::{Mutant, MutantSet};
use mcp_sim::oracle::{self, rule};
use mcp_sim::scenario::Scenario;
use mcp_sim::trace::{EventKind, Side, Trace};
use mcp_sim::wire::{self, Message};

fn seeds() -> u64 {
    common::seed_count(300)
}

/// The figures `docs/live.md` gives for these tests at the default 300 seeds: the seed's own
/// scenarios' cancels and crossings, the natural-end cancels and crossings, and the runs in
/// which `respond_after_cancel` was flagged of those in which it answered a cancel. `None`
/// when `MCP_SIM_SEEDS` widens the sweep.
fn documented() -> Option<[usize; 6]> {
    if std::env::var_os("MCP_SIM_SEEDS").is_some() {
        return None;
    }
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/live.md"))
        .expect("docs/live.md");
    let numbers = |text: &str| -> Vec<usize> {
        text.split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect()
    };
    let row = docs
        .lines()
        .find(|l| l.starts_with("| reference server, simulated, client side only"))
        .expect("the table row");
    let cells = numbers(row.split_once(") |").expect("the figures").1);
    let rate = docs
        .split_once("`respond_after_cancel` mutant is flagged in ")
        .expect("the mutant's rate")
        .1;
    let rate = numbers(&rate[..rate.find(" runs").expect("its end")]);
    Some([cells[0], cells[1], cells[2], cells[3], rate[0], rate[1]])
}

/// The trace as a black-box server's client sees it.
fn client_side(trace: &Trace) -> Trace {
    let mut out = Trace::new();
    for e in trace.events.iter().filter(|e| e.side == Side::Client) {
        out.events.push(e.clone());
    }
    out
}

/// Cancels the client sent, and of those how many were followed by a message for the same
/// request (a crossing, in the reference's runs).
fn cancels_and_crossings(trace: &Trace) -> (usize, usize) {
    let mut cancelled = std::collections::BTreeMap::new();
    for (i, e) in trace.events.iter().enumerate() {
        let (EventKind::Send(w), Side::Client) = (&e.kind, e.side) else {
            continue;
        };
        if let Ok(Message::Cancelled(c)) = w.decode(&wire::DecodeOptions::default()) {
            cancelled.entry(c.request_id).or_insert(i);
        }
    }
    let mut crossed = std::collections::BTreeSet::new();
    for (i, e) in trace.events.iter().enumerate() {
        let (EventKind::Recv(w), Side::Client) = (&e.kind, e.side) else {
            continue;
        };
        let Ok(msg) = w.decode(&wire::DecodeOptions::default()) else {
            continue;
        };
        if let Some(id) = msg.id() {
            if cancelled.get(id).is_some_and(|&c| c < i) {
                crossed.insert(id.clone());
            }
        }
    }
    (cancelled.len(), crossed.len())
}

/// The seed's scenario on stdio, without network faults and with one-way latency capped at
/// 400 ms: the grace window assumes a pipe whose delay stays below it, as a local process's
/// does (a partition or a 2 s latency is no pipe a probe sees).
fn stdio(seed: u64, mutants: MutantSet) -> Scenario {
    let mut s = Scenario::from_seed(seed).with_transport(Transport::Stdio);
    s.faults.clear();
    let cap = std::time::Duration::from_millis(400);
    s.latency = (s.latency.0.min(cap), s.latency.1.min(cap));
    s.mutants = mutants;
    s
}

/// Runs `scenario`, judges it from the client's side alone and fails on any
/// `response-after-cancel` (the reference never sends after reading a cancel); returns the
/// cancels and the crossings seen.
fn clean_from_the_client_side(scenario: &Scenario, what: &str) -> (usize, usize) {
    let run = memory::run(scenario);
    let view = client_side(&run.trace);
    let verdict = oracle::check(&view, &run.oracle_config(scenario));
    let flagged: Vec<_> = verdict
        .violations
        .iter()
        .filter(|v| v.rule == rule::RESPONSE_AFTER_CANCEL)
        .collect();
    assert!(
        flagged.is_empty(),
        "seed {} ({what}): a crossing judged as a message after the cancel: {flagged:#?}\n\
         replay: cargo run --release -p mcp-sim-cli -- replay --seed {} --transport stdio --lane memory --trace (without its faults)",
        scenario.seed,
        scenario.seed
    );
    cancels_and_crossings(&view)
}

#[test]
fn crossings_of_the_reference_server_are_not_flagged_from_the_client_side() {
    let (mut cancels, mut crossings, mut runs) = (0, 0, 0);
    for seed in 0..seeds() {
        let (c, x) = clean_from_the_client_side(&stdio(seed, MutantSet::NONE), "seed's scenario");
        cancels += c;
        crossings += x;
        runs += 1;
    }
    eprintln!(
        "reference, client side only: {runs} stdio runs, {cancels} cancels, {crossings} crossed \
         by a response, 0 flagged"
    );
    assert!(
        crossings > 0,
        "the sweep must contain crossings to measure anything"
    );
    if let Some(d) = documented() {
        assert_eq!(
            [cancels, crossings],
            [d[0], d[1]],
            "the figures of docs/live.md"
        );
    }
}

/// The shape of a probe run: identical calls (the first call's work for all), a local pipe
/// (one-way latency at most 10 ms), no network faults.
fn probe_shaped(seed: u64, mutants: MutantSet) -> Scenario {
    let mut s = stdio(seed, mutants);
    let first = s.calls[0];
    for c in &mut s.calls {
        (c.steps, c.step, c.progress) = (first.steps, first.step, first.progress);
    }
    let cap = std::time::Duration::from_millis(10);
    s.latency = (s.latency.0.min(cap), s.latency.1.min(cap));
    s
}

#[test]
fn probe_shaped_runs_of_the_reference_are_clean_and_the_answering_mutant_is_flagged() {
    let mutant = MutantSet::NONE.with(Mutant::RespondAfterCancel);
    let (mut cancels, mut crossings) = (0, 0);
    let (mut answered, mut flagged, mut first) = (0, 0, None);
    for seed in 0..seeds() {
        let (c, x) =
            clean_from_the_client_side(&probe_shaped(seed, MutantSet::NONE), "probe-shaped");
        cancels += c;
        crossings += x;

        let scenario = probe_shaped(seed, mutant);
        let run = memory::run(&scenario);
        if !oracle::check(&run.trace, &run.oracle_config(&scenario))
            .violates(rule::RESPONSE_AFTER_CANCEL)
        {
            continue; // no cancel met a running call on this seed
        }
        answered += 1;
        let view = client_side(&run.trace);
        if oracle::check(&view, &run.oracle_config(&scenario)).violates(rule::RESPONSE_AFTER_CANCEL)
        {
            flagged += 1;
            first.get_or_insert(seed);
        }
    }
    // Cancels timed to the calls' natural end: results and cancels cross on the wire.
    let (mut late_cancels, mut late_crossings) = (0, 0);
    for seed in 0..seeds() {
        let mut scenario = probe_shaped(seed, MutantSet::NONE);
        for c in &mut scenario.calls {
            if c.cancel_after.is_some() {
                c.cancel_after = Some(c.step * c.steps);
            }
        }
        let (c, x) = clean_from_the_client_side(&scenario, "cancels at the natural end");
        late_cancels += c;
        late_crossings += x;
    }
    assert!(
        late_crossings > 0,
        "cancels at the natural end must cross results"
    );
    eprintln!(
        "probe-shaped, client side only: reference {cancels} cancels, {crossings} crossed by a \
         response, and with cancels at the natural end {late_cancels} cancels, {late_crossings} \
         crossed; 0 flagged; respond_after_cancel flagged in {flagged} of {answered} runs in \
         which it answered a cancel (first seed {first:?})"
    );
    assert!(answered > 0 && flagged > 0, "the mutant is never caught");
    if let Some(d) = documented() {
        assert_eq!(
            [late_cancels, late_crossings, flagged, answered],
            [d[2], d[3], d[4], d[5]],
            "the figures of docs/live.md"
        );
    }
}
