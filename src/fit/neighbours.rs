//! The neighbourhood of a fitted scenario searched in simulation (`mcp-sim sweep --around`):
//! each perturbation seed's neighbour ([`crate::scenario::around`]) run and judged; those that
//! break a rule the scenario itself does not break are listed nearest first, and the nearest
//! one per rule can be shrunk to the smallest change that still breaks it.

use std::ops::Range;

use crate::diff::Class;
use crate::lanes::Lane;
use crate::model::mutant::{MutantSide, ALL};
use crate::model::Mutant;
use crate::oracle::OracleConfig;
use crate::run;
use crate::scenario::around::{self, Change, Neighbour, PerturbSpec};
use crate::scenario::Scenario;
use crate::trace::Trace;

/// A neighbour that breaks what the scenario does not.
#[derive(Debug, Clone)]
pub struct Found {
    /// The neighbour.
    pub neighbour: Neighbour,
    /// The rules it breaks that the scenario does not (`crash` when a peer panicked).
    pub new_rules: Vec<&'static str>,
    /// Its trace's digest.
    pub digest: u64,
}

/// What a search of the neighbourhood found.
#[derive(Debug, Clone)]
pub struct Around {
    /// The rules the scenario itself breaks.
    pub base_rules: Vec<&'static str>,
    /// Neighbours drawn.
    pub drawn: u64,
    /// Neighbours run: those drawn that differ from the scenario (one that does not would only
    /// run the scenario again).
    pub runs: u64,
    /// Those that broke a rule the scenario does not, nearest first (then by seed).
    pub found: Vec<Found>,
}

/// Runs the neighbours of `base` drawn from `seeds` on `lane`, `jobs` at a time; the result
/// does not depend on `jobs`.
pub fn search(
    base: &Scenario,
    seeds: Range<u64>,
    spec: &PerturbSpec,
    lane: Lane,
    jobs: usize,
) -> Around {
    let base_rules = run::judge(base, lane).rules();
    let drawn = seeds.end.saturating_sub(seeds.start);
    let moved: Vec<Neighbour> = seeds
        .map(|seed| around::neighbour(base, seed, spec))
        .filter(|n| !n.changes.is_empty())
        .collect();
    let jobs = jobs.clamp(1, 64);
    let chunks: Vec<&[Neighbour]> = moved.chunks(moved.len().div_ceil(jobs).max(1)).collect();
    let mut found: Vec<Found> = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let base_rules = &base_rules;
                scope.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|neighbour| {
                            let judged = run::judge(&neighbour.scenario, lane);
                            let new_rules: Vec<&'static str> = judged
                                .rules()
                                .into_iter()
                                .filter(|r| !base_rules.contains(r))
                                .collect();
                            (!new_rules.is_empty()).then(|| Found {
                                digest: judged.run.trace.digest(),
                                neighbour: neighbour.clone(),
                                new_rules,
                            })
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a neighbour's run"))
            .collect()
    });
    found.sort_by(|a, b| {
        a.neighbour
            .distance
            .total_cmp(&b.neighbour.distance)
            .then(a.neighbour.perturb_seed.cmp(&b.neighbour.perturb_seed))
    });
    Around {
        base_rules,
        drawn,
        runs: moved.len() as u64,
        found,
    }
}

/// A failing neighbour shrunk: the fewest, smallest changes that still break `rule`.
#[derive(Debug, Clone)]
pub struct Minimized {
    /// The rule.
    pub rule: &'static str,
    /// The changes left.
    pub changes: Vec<Change>,
    /// Their scenario.
    pub scenario: Scenario,
    /// The changes in words, with where a moved cancel lands against its call's result.
    pub words: String,
}

/// Shrinks `found`'s changes to the smallest that still break `rule` ([`around::minimize`]).
pub fn minimize(base: &Scenario, found: &Found, rule: &'static str, lane: Lane) -> Minimized {
    let changes = around::minimize(base, &found.neighbour.changes, |s| {
        run::judge(s, lane).rules().contains(&rule)
    });
    let scenario = around::apply(base, &changes);
    let trace = run::judge(&scenario, lane).run.trace;
    let words: Vec<String> = changes
        .iter()
        .map(|c| words_of(c, &scenario, &trace))
        .collect();
    Minimized {
        rule,
        words: format!("{} is enough to break {rule}", words.join(" and ")),
        changes,
        scenario,
    }
}

/// A change in words; a cancel also says how far from its call's result it lands in the run.
fn words_of(change: &Change, scenario: &Scenario, trace: &Trace) -> String {
    let text = change.describe();
    let (Change::Cancel { call, to, .. } | Change::Deadline { call, to, .. }) = *change else {
        return text;
    };
    // The planned calls in start order are the tool calls of the run in send order.
    let mut order: Vec<usize> = (0..scenario.calls.len()).collect();
    order.sort_by_key(|&k| (scenario.calls[k].at, k));
    let Some(rank) = order.iter().position(|&k| k == call) else {
        return text;
    };
    let calls = crate::oracle::with_index(trace, &OracleConfig::default(), |ix, verdict| {
        crate::diff::calls::read(ix, verdict, OracleConfig::default().grace_ms, false)
    });
    let tool_calls: Vec<_> = calls
        .calls
        .iter()
        .filter(|c| c.method == "tools/call")
        .collect();
    let Some(run_call) = tool_calls.get(rank) else {
        return text;
    };
    let answered = run_call
        .classes
        .iter()
        .any(|(c, v)| *c == Class::Outcome && v == "result");
    match (answered, run_call.duration_ms) {
        (true, Some(took)) => {
            let (cancel, result) = (to.as_millis() as u64, took);
            match result.cmp(&cancel) {
                std::cmp::Ordering::Greater => {
                    format!("{text}, {} ms before its result", result - cancel)
                }
                _ => format!("{text}, {} ms after its result", cancel - result),
            }
        }
        _ => text,
    }
}

/// The peer behaviours a session does not refute: the mutants of `sides` (the side of the
/// real peer: the server a probe drove, the client `serve` met, the intermediary a check ran)
/// that, added to `base`, break no rule `base` does not. A session that broke nothing names no
/// mutant, yet its peer may have the bug its timing never met; each hypothesis is searched as
/// the scenario's behaviour would be ([`search`] with it on), and only a live confirmation
/// tells whether the real peer has it.
pub fn hypotheses(base: &Scenario, sides: &[MutantSide], lane: Lane) -> Vec<Mutant> {
    let base_rules = run::judge(base, lane).rules();
    ALL.iter()
        .copied()
        .filter(|m| sides.contains(&m.info().side) && !base.mutants.has(*m))
        .filter(|&m| {
            let with = Scenario {
                mutants: base.mutants.with(m),
                ..base.clone()
            };
            run::judge(&with, lane)
                .rules()
                .iter()
                .all(|r| base_rules.contains(r))
        })
        .collect()
}

/// `base` with `hypothesis` on (the scenario itself for none).
pub fn assuming(base: &Scenario, hypothesis: Option<Mutant>) -> Scenario {
    match hypothesis {
        Some(m) => Scenario {
            mutants: base.mutants.with(m),
            ..base.clone()
        },
        None => base.clone(),
    }
}
