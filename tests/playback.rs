//! The recorded server played back (`serve --from`'s mock) under the simulated clock, where
//! the ground truth is known: the reference server's recording served back to the same
//! client gives no finding, and each server mutant's recording served back reproduces the
//! mutant's finding when the bug lies in what the server sent for a call (the mutation score
//! for the mock; bugs of the protocol's own machinery, which the reference server keeps doing
//! right, are counted apart and named).

use std::sync::Arc;

use mcp_sim::lanes::{memory, Lane};
use mcp_sim::model::mutant::MutantSide;
use mcp_sim::model::recorded::MatchMode;
use mcp_sim::model::server::{OnCancel, OnMiss, Playback};
use mcp_sim::mutants::{self, hunt_scenario};
use mcp_sim::oracle;
use mcp_sim::recording;
use mcp_sim::run::CRASH;
use mcp_sim::scenario::Scenario;
use mcp_sim::trace::{EventKind, Origin, Side, Trace};

fn playback(trace: &Trace, on_cancel: OnCancel) -> Playback {
    Playback {
        recording: Arc::new(recording::read(trace, None).expect("a recording")),
        matching: MatchMode::Params,
        on_cancel,
        on_miss: OnMiss::Error,
    }
}

/// The rules the run of `scenario` against `playback` breaks.
fn played(scenario: &Scenario, playback: Playback) -> (Trace, Vec<&'static str>) {
    let run = memory::run_playing(scenario, playback);
    let verdict = oracle::check(&run.trace, &run.oracle_config(scenario));
    let mut rules: Vec<&'static str> = verdict.violations.iter().map(|v| v.rule).collect();
    rules.sort_unstable();
    rules.dedup();
    (run.trace, rules)
}

/// The messages `side` wrote in `trace`, with their origin.
fn sent(trace: &Trace, side: Side) -> impl Iterator<Item = (&serde_json::Value, Option<Origin>)> {
    trace.events.iter().filter_map(move |e| match &e.kind {
        EventKind::Send(w) if e.side == side => w.msg.as_ref().map(|m| (m, w.origin)),
        _ => None,
    })
}

/// The server's sends of `trace`, by origin: (recorded, extrapolated, unmarked).
fn origins(trace: &Trace) -> (usize, usize, usize) {
    let mut counts = (0, 0, 0);
    for e in &trace.events {
        if let (Side::Server, EventKind::Send(w)) = (e.side, &e.kind) {
            match w.origin {
                Some(Origin::Recorded { .. }) => counts.0 += 1,
                Some(Origin::Extrapolated) => counts.1 += 1,
                None => counts.2 += 1,
            }
        }
    }
    counts
}

#[test]
fn the_reference_servers_recording_served_back_gives_no_finding() {
    let mut recorded = 0;
    for seed in 0..60 {
        let s = Scenario::calls_only(seed);
        let original = memory::run(&s);
        if recording::read(&original.trace, None).is_err() {
            continue;
        }
        let (trace, rules) = played(&s, playback(&original.trace, OnCancel::Recorded));
        let before = oracle::check(&original.trace, &original.oracle_config(&s));
        let before: Vec<&str> = before.violations.iter().map(|v| v.rule).collect();
        let new: Vec<&&str> = rules.iter().filter(|r| !before.contains(r)).collect();
        assert!(new.is_empty(), "seed {seed}: the mock caused {new:?}");
        recorded += origins(&trace).0;
    }
    assert!(recorded > 100, "only {recorded} recorded messages played");
}

#[test]
fn each_server_mutants_recording_reproduces_its_finding() {
    let mut reproduced = Vec::new();
    let mut not = Vec::new();
    for &m in mutants::ALL.iter().filter(|m| !m.turmoil_only()) {
        if m.info().side != MutantSide::Server || m.expected_rules() == [CRASH] {
            continue;
        }
        let Some(kill) = mutants::hunt(m, 0..100, Lane::Memory).kill else {
            continue;
        };
        let env = m.environment();
        let faulty = memory::run(&hunt_scenario(m, kill.seed, env.with(m)));
        let reference = hunt_scenario(m, kill.seed, env);
        let (trace, rules) = played(&reference, playback(&faulty.trace, OnCancel::Recorded));
        if rules.iter().any(|r| m.expected_rules().contains(r)) {
            reproduced.push(m);
            // Played back correctly after a cancel, a cancel's bug is gone.
            let (_, correct) = played(&reference, playback(&faulty.trace, OnCancel::Correct));
            let cancel_bug = m.expected_rules().contains(&"response-after-cancel");
            if cancel_bug {
                assert!(
                    !correct.contains(&"response-after-cancel"),
                    "{m} with --on-cancel correct: {correct:?}"
                );
            }
            assert!(origins(&trace).0 > 0, "{m}: nothing played as recorded");
        } else {
            not.push(format!("{m} ({:?} -> {rules:?})", m.expected_rules()));
        }
    }
    eprintln!(
        "mock mutation score: {} of {} server mutants reproduced; not: {not:#?}",
        reproduced.len(),
        reproduced.len() + not.len()
    );
    // The bugs in what the server sends for a call: each must come back from its recording.
    // Not among them, and why: a progress notification under a token no request carried names
    // no call on stdio, so the recording cannot tie it to one (forged_progress_token); the
    // rest are the protocol's own machinery, which the reference server keeps doing right
    // (streams and keep-alives, event ids and resumption, ping, answers to notifications, the
    // task store, a legacy disconnect).
    assert!(
        reproduced.len() >= 18,
        "{} reproduced: {not:#?}",
        reproduced.len()
    );
    for m in [
        mutants::Mutant::RespondAfterCancel,
        mutants::Mutant::IgnoreCancel,
        mutants::Mutant::ProgressAfterCompletion,
        mutants::Mutant::FlatProgress,
        mutants::Mutant::LegacyCancelAnswered,
        mutants::Mutant::LegacyIgnoresCancel,
    ] {
        assert!(reproduced.contains(&m), "{m} not reproduced: {not:#?}");
    }
}

#[test]
fn a_request_the_recording_does_not_hold_is_answered_naming_the_difference() {
    let s = Scenario::calls_only(1);
    let original = memory::run(&s);
    // Another scenario's calls carry other arguments: every call misses.
    let mut other = Scenario::calls_only(1);
    for c in &mut other.calls {
        c.steps += 1;
    }
    let run = memory::run_playing(&other, playback(&original.trace, OnCancel::Recorded));
    let answer = sent(&run.trace, Side::Server)
        .find(|(m, _)| m.get("error").is_some())
        .map(|(m, o)| (m.clone(), o))
        .expect("an error answer");
    let message = answer.0["error"]["message"].as_str().unwrap();
    assert!(message.contains("differs at /arguments/steps"), "{message}");
    assert_eq!(answer.1, Some(Origin::Extrapolated));
}

/// The bug no record-and-replay tool can show, in simulation: a client that drops its
/// connection on an answer to a request it cancelled (claude-code #51073, the client mutant
/// `late_response_is_fatal`) meets a recording of a server that answers cancels
/// (`legacy_cancel_answered`, python-sdk #2480). Played back as recorded, the client's bug
/// shows on seeds where it does not against the reference server (`race-not-graceful`, as
/// against the live mutant); played correctly, only where a result crosses the cancel, as
/// against the reference server.
#[test]
fn a_client_that_cannot_bear_an_answer_to_its_cancel_is_caught_with_the_recorded_answer() {
    use mcp_sim::model::MutantSet;
    let server_bug = mutants::Mutant::LegacyCancelAnswered;
    let client_bug = mutants::Mutant::LateResponseIsFatal;
    let race = "race-not-graceful";
    let (mut caught, mut added) = (Vec::new(), Vec::new());
    for seed in 0..100 {
        let faulty = hunt_scenario(server_bug, seed, MutantSet::NONE.with(server_bug));
        let recorded = memory::run(&faulty);
        if recording::read(&recorded.trace, None).is_err() {
            continue;
        }
        let client = hunt_scenario(server_bug, seed, MutantSet::NONE.with(client_bug));
        let reference = memory::run(&client);
        let verdict = oracle::check(&reference.trace, &reference.oracle_config(&client));
        let against_reference = verdict.violates(race);
        let (_, rules) = played(&client, playback(&recorded.trace, OnCancel::Recorded));
        if rules.contains(&race) && !against_reference {
            caught.push(seed);
        }
        let (_, rules) = played(&client, playback(&recorded.trace, OnCancel::Correct));
        if rules.contains(&race) && !against_reference {
            added.push(seed);
        }
    }
    assert!(
        !caught.is_empty(),
        "the recorded answer never met the client's bug"
    );
    assert!(
        added.is_empty(),
        "played correctly, the mock made the client choke: {added:?}"
    );
}

/// Any trace is a recording a user may hand to `serve --from`: each hand-written trace of the
/// rule catalog (odd shapes, both eras, two hops, forged tokens, unanswered calls) is read and
/// played to the calls of a few seeds without a panic, and what cannot be played says why.
#[test]
fn every_hand_written_trace_reads_and_plays_without_a_panic() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/traces");
    let mut played_any = 0;
    for sub in ["", "legacy"] {
        let Ok(entries) = std::fs::read_dir(format!("{dir}/{sub}")) else {
            continue;
        };
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        {
            let Ok(trace) = Trace::from_jsonl(&std::fs::read_to_string(path).unwrap()) else {
                continue;
            };
            let hops = match trace.is_two_hop() {
                true => vec![
                    Some(mcp_sim::trace::Hop::Front),
                    Some(mcp_sim::trace::Hop::Back),
                ],
                false => vec![None],
            };
            for hop in hops {
                let Ok(recording) = recording::read(&trace, hop) else {
                    continue;
                };
                let recording = Arc::new(recording);
                for seed in 0..3 {
                    for on_cancel in [OnCancel::Recorded, OnCancel::Correct] {
                        let p = Playback {
                            recording: Arc::clone(&recording),
                            matching: MatchMode::Params,
                            on_cancel,
                            on_miss: OnMiss::Reference,
                        };
                        memory::run_playing(&Scenario::calls_only(seed), p);
                        played_any += 1;
                    }
                }
            }
        }
    }
    assert!(played_any > 500, "only {played_any} playbacks");
}

/// The recorded server introduces itself as it did, in either era: the capabilities and
/// instructions of its `server/discover` result (2026-07-28) or of its `initialize` result
/// (legacy), and never versions it does not speak.
#[test]
fn the_recorded_introduction_is_played_in_both_eras() {
    use mcp_sim::wire::Era;
    for era in [Era::Modern, Era::LEGACY] {
        let mut s = Scenario::calls_only(3).in_era(era);
        // The 2026-07-28 client discovers only in auto mode.
        s.opening = mcp_sim::scenario::Opening::Auto { silent: false };
        let original = memory::run(&s);
        let mut recording = recording::read(&original.trace, None).expect("a recording");
        let method = match era {
            Era::Modern => "server/discover",
            Era::Legacy(_) => "initialize",
        };
        let introduction = match era {
            Era::Modern => recording.discover.as_mut(),
            Era::Legacy(_) => recording.initialize.as_mut(),
        };
        let introduction = introduction.unwrap_or_else(|| panic!("{method} recorded"));
        introduction.insert("instructions".into(), "as recorded".into());
        let mut p = playback(&original.trace, OnCancel::Recorded);
        p.recording = Arc::new(recording);
        let run = memory::run_playing(&s, p);
        let id = sent(&run.trace, Side::Client)
            .find(|(m, _)| m["method"] == method)
            .map(|(m, _)| m["id"].clone())
            .unwrap_or_else(|| panic!("{method} sent in {era:?}"));
        let answer = sent(&run.trace, Side::Server)
            .find(|(m, _)| m["id"] == id && m.get("result").is_some())
            .map(|(m, _)| m.clone());
        let answer = answer.unwrap_or_else(|| panic!("{method} answered"));
        assert_eq!(answer["result"]["instructions"], "as recorded", "{era:?}");
    }
}

/// The server's sends of `trace` that are requests of its own: (id, origin).
fn own_requests(trace: &Trace) -> Vec<(serde_json::Value, Option<Origin>)> {
    sent(trace, Side::Server)
        .filter(|(m, _)| m.get("method").is_some() && m.get("id").is_some())
        .map(|(m, o)| (m["id"].clone(), o))
        .collect()
}

/// The legacy server's own requests (here sampling, asked during a call) are played back
/// under fresh ids of the playing server's, marked recorded; the new client answers them
/// under those ids, and the playback adds no finding.
#[test]
fn the_recorded_servers_own_requests_are_played_under_fresh_ids() {
    use mcp_sim::wire::Era;
    let (mut played_requests, mut answered) = (0, 0);
    for seed in 0..200 {
        let s = Scenario::from_seed(seed).in_era(Era::LEGACY);
        if !s.calls.iter().any(|c| c.sampling) {
            continue;
        }
        let original = memory::run(&s);
        if own_requests(&original.trace).is_empty() {
            continue;
        }
        let (trace, rules) = played(&s, playback(&original.trace, OnCancel::Recorded));
        let before = oracle::check(&original.trace, &original.oracle_config(&s));
        let before: Vec<&str> = before.violations.iter().map(|v| v.rule).collect();
        let new: Vec<&&str> = rules.iter().filter(|r| !before.contains(r)).collect();
        assert!(new.is_empty(), "seed {seed}: the mock caused {new:?}");
        for (id, origin) in own_requests(&trace) {
            assert!(
                matches!(origin, Some(Origin::Recorded { .. })),
                "seed {seed}: {id} sent as {origin:?}"
            );
            played_requests += 1;
            let answer =
                sent(&trace, Side::Client).any(|(m, _)| m["id"] == id && m.get("method").is_none());
            answered += usize::from(answer);
        }
    }
    eprintln!("{answered} of {played_requests} played requests of the server's own answered");
    assert!(played_requests >= 5, "only {played_requests} played");
    assert!(
        answered * 2 >= played_requests,
        "{answered} of {played_requests} answered"
    );
}
