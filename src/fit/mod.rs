//! From one recorded session to a scenario (`mcp-sim fit`): the bridge between the runs people
//! see (probe, serve, record, check-proxy) and the deterministic simulation.
//!
//! A recording is one run of a real peer; a [`Scenario`] is every knob of a simulated one.
//! [`fit`] reads the knobs the wire shows (the calls: starts, arguments, progress asked,
//! cancels, work and the client's timeout policy; the wire: transport, era, opening, latency,
//! idle cuts, injected faults, the server's stream habits), each with its provenance
//! (`recorded`, `inferred` with its evidence, or `default`). The peer's behaviour is what the
//! recording shows it doing wrong: for each rule the recording breaks, the mutants that break
//! it under the fitted scenario are found by running the scenario once per candidate mutant
//! (the mutants whose catalog entry expects that rule). A rule the fitted scenario breaks with
//! the reference peers alone is a race of its timing; a rule no mutant reproduces is said to
//! have no model, never matched to the nearest.
//!
//! The fit's fidelity is the fitted scenario run again beside the recording: the same rules
//! broken, the same outcome per aligned call (`mcp-sim diff`'s alignment), and how far each
//! call's duration moved.

mod calls;
#[cfg(all(feature = "live", feature = "turmoil"))]
pub mod confirm;
pub mod live;
pub mod neighbours;
mod wire;

use std::collections::{BTreeMap, BTreeSet};

use crate::diff::{self, Class, DiffOptions};
use crate::lanes::Lane;
use crate::model::{Mutant, MutantSet, ServerBehaviour};
use crate::oracle::{self, OracleConfig};
use crate::recording::{self, RecordingError};
use crate::run::{self, Judged};
use crate::scenario::file::{Explained, Provenance, ScenarioFile, Source};
use crate::scenario::Scenario;
use crate::trace::{EventKind, Hop, Trace};

/// How to fit.
#[derive(Debug, Clone, Copy)]
pub struct FitOptions {
    /// The lane the fitted scenario is run on to find mutants and measure fidelity (a two-hop
    /// recording needs turmoil's, which has the intermediary).
    pub lane: Lane,
}

impl Default for FitOptions {
    /// The in-memory lane.
    fn default() -> Self {
        FitOptions { lane: Lane::Memory }
    }
}

/// A fitted scenario and how well it fits.
#[derive(Debug, Clone)]
pub struct Fit {
    /// The scenario file: the scenario, each knob's provenance, what live runs send, and the
    /// recording's violations with their models.
    pub file: ScenarioFile,
    /// What the fit left out or could not read.
    pub notes: Vec<String>,
    /// The fitted scenario run again beside the recording.
    pub fidelity: Fidelity,
}

/// The fitted scenario's run against the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Fidelity {
    /// The rules the recording breaks.
    pub recorded_rules: Vec<&'static str>,
    /// The rules the fitted run breaks.
    pub fitted_rules: Vec<&'static str>,
    /// The recording's calls of a method a scenario plans (tool calls, subscriptions, task polls).
    pub calls: usize,
    /// Calls paired.
    pub aligned: usize,
    /// Paired calls that ended the same way (the outcome class of `mcp-sim diff`).
    pub same_outcome: usize,
    /// Paired calls whose duration moved by at most the tolerance (twice the fitted latency's
    /// high end plus 50 ms).
    pub timely: usize,
    /// The largest move of a paired call's duration, in ms.
    pub max_duration_error_ms: u64,
    /// Where the fitted run diverged, for people.
    pub diverged: Vec<String>,
}

impl Fidelity {
    /// The same rules broken and the same outcome for every call.
    pub fn agrees(&self) -> bool {
        self.recorded_rules == self.fitted_rules
            && self.aligned == self.calls
            && self.same_outcome == self.calls
    }
}

/// Why a trace cannot be fitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FitError {
    /// It is no recording of calls.
    Recording(RecordingError),
    /// A two-hop recording on a lane without intermediaries.
    NeedsTurmoil,
}

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FitError::Recording(e) => write!(f, "{e}"),
            FitError::NeedsTurmoil => f.write_str(
                "a two-hop recording is fitted with an intermediary, which only the turmoil lane runs",
            ),
        }
    }
}

impl std::error::Error for FitError {}

/// Fits a scenario to `trace` (a two-hop trace: the front hop's calls, the intermediary as the
/// scenario's bridge).
pub fn fit(trace: &Trace, options: &FitOptions) -> Result<Fit, FitError> {
    let two_hop = trace.is_two_hop();
    if two_hop && options.lane == Lane::Memory {
        return Err(FitError::NeedsTurmoil);
    }
    let front = match two_hop {
        true => trace.hop(Hop::Front).0,
        false => trace.clone(),
    };
    let recording = recording::read(&front, None).map_err(FitError::Recording)?;
    // Trace times count from the start of the run (or of the recording), as a scenario's do.
    let t0 = 0;
    let mut provenance: BTreeMap<String, Provenance> = BTreeMap::new();
    let mut put = |k: &str, p: Provenance| {
        provenance.insert(k.to_owned(), p);
    };
    let (transport, p) = wire::transport(&front);
    put("transport", p);
    let ((era, p), (opening, q)) = wire::era_and_opening(&front);
    put("era", p);
    put("opening", q);
    let (latency, p) = wire::latency(&front);
    put("latency_ms", p);
    let proxy = wire::proxy(&front);
    match &proxy {
        Some((_, p)) => put("proxy", p.clone()),
        None => put(
            "proxy",
            Provenance::default_because("no stream cut idle: none"),
        ),
    }
    let habits = wire::habits(&front, transport);
    put("server/keepalive_interval_ms", habits.keepalive.1.clone());
    put("server/response_mode", habits.response_mode.1.clone());
    put(
        "server/progress_min_interval_ms",
        habits.progress_interval.1.clone(),
    );
    put("no_buffering_header", habits.no_buffering_header.1.clone());
    let (fitted_calls, mut notes) = calls::fit_calls(&front, &recording, t0);
    let streams: Vec<Option<u64>> = recording
        .calls
        .iter()
        .filter(|c| calls::plannable(c))
        .map(|c| match front.events.get(c.line - 1).map(|e| &e.kind) {
            Some(EventKind::Send(w) | EventKind::Recv(w)) => w.stream,
            _ => None,
        })
        .collect();
    let (faults, fault_notes) =
        wire::faults(&front, t0, |s| streams.iter().position(|x| *x == Some(s)));
    notes.extend(fault_notes);
    if !faults.is_empty() {
        put(
            "faults",
            Provenance::recorded("the recorder's fault events"),
        );
    }
    let mut live_calls = Vec::new();
    let mut planned = Vec::new();
    for c in fitted_calls {
        for (k, p) in c.provenance {
            put(&k, p);
        }
        planned.push(c.call);
        live_calls.push(c.live);
    }
    put(
        "seed",
        Provenance::default_because(
            "the recording's digest: it seeds the per-message latency draws",
        ),
    );
    let defaults = ServerBehaviour::default();
    let mut scenario = Scenario {
        seed: front.digest(),
        transport,
        latency,
        proxy: proxy
            .map(|(p, _)| p)
            .filter(|_| transport == crate::model::Transport::Http),
        server: ServerBehaviour {
            progress_min_interval: habits.progress_interval.0,
            keepalive_interval: habits.keepalive.0,
            response_mode: habits.response_mode.0,
            ..defaults
        },
        no_buffering_header: habits.no_buffering_header.0,
        calls: planned,
        faults,
        mutants: MutantSet::NONE,
        era,
        opening,
        bridge: two_hop,
    };
    let (explained, mutants) = explain(trace, &scenario, options.lane);
    scenario.mutants = mutants;
    put(
        "mutants",
        match mutants.is_empty() {
            true => Provenance::default_because("the recording breaks no rule a mutant models"),
            false => Provenance::inferred(
                "the mutants that reproduce the recording's violations under this scenario",
            ),
        },
    );
    let fidelity = fidelity(&front, trace, &scenario, options.lane);
    Ok(Fit {
        file: ScenarioFile {
            scenario,
            provenance,
            live_calls,
            explained,
            source: None,
        },
        notes,
        fidelity,
    })
}

/// For each rule the recording breaks, the mutants that break it under `scenario`; and the
/// fewest mutants that explain them all (greedy: the one that reproduces the most rules not
/// yet explained and adds the fewest the recording does not break, in catalog order).
fn explain(trace: &Trace, scenario: &Scenario, lane: Lane) -> (Vec<Explained>, MutantSet) {
    let verdict = oracle::check(trace, &OracleConfig::default());
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for v in &verdict.violations {
        *counts.entry(v.rule).or_default() += 1;
    }
    let recorded: BTreeSet<&'static str> = counts.keys().copied().collect();
    let reference = run::judge(scenario, lane).rules();
    let recorded_profile = cancel_profile(trace);
    // Each candidate's rules and how alike its calls' cancels went to the recording's.
    let mut runs: BTreeMap<Mutant, (Vec<&'static str>, usize)> = BTreeMap::new();
    let mut explained = Vec::new();
    for (&rule, &count) in &counts {
        let by_reference = reference.contains(&rule);
        let mut mutants = Vec::new();
        if !by_reference {
            for &m in crate::model::mutant::ALL {
                if !m.expected_rules().contains(&rule) {
                    continue;
                }
                // With the mutants its bug needs beside it (a client that chokes on a late
                // answer needs a server that sends one).
                let (rules, _) = runs.entry(m).or_insert_with(|| {
                    let mut s = scenario.clone();
                    s.mutants = m.environment().with(m);
                    let judged = run::judge(&s, lane);
                    let alike = likeness(&cancel_profile(&judged.run.trace), &recorded_profile);
                    (judged.rules(), alike)
                });
                if rules.contains(&rule) {
                    mutants.push(m.to_string());
                }
            }
        }
        explained.push(Explained {
            rule: rule.to_owned(),
            count,
            mutants,
            by_reference,
        });
    }
    let mut uncovered: BTreeSet<&str> = explained
        .iter()
        .filter(|e| !e.by_reference && !e.mutants.is_empty())
        .map(|e| e.rule.as_str())
        .collect();
    // A mutant of the recording's era first: the legacy era's bugs have mutants of their own
    // that behave as a modern one does in a legacy session.
    let own_era =
        |m: Mutant| m.adapt(Scenario::calls_only(0)).era.is_legacy() == scenario.era.is_legacy();
    let mut chosen = MutantSet::NONE;
    while !uncovered.is_empty() {
        let best = runs
            .iter()
            .map(|(m, (rules, alike))| {
                let covers = rules.iter().filter(|r| uncovered.contains(*r)).count();
                let extra = rules.iter().filter(|r| !recorded.contains(*r)).count();
                (*m, covers, extra, *alike)
            })
            .filter(|(_, covers, _, _)| *covers > 0)
            .max_by_key(|&(m, covers, extra, alike)| {
                (
                    covers,
                    own_era(m),
                    alike,
                    std::cmp::Reverse(extra),
                    std::cmp::Reverse(m),
                )
            });
        let Some((m, _, _, _)) = best else { break };
        for e in m.environment().iter() {
            chosen = chosen.with(e);
        }
        chosen = chosen.with(m);
        for r in &runs[&m].0 {
            uncovered.remove(*r);
        }
    }
    (explained, chosen)
}

/// How the planned calls of a trace's front hop went after their cancels, as `mcp-sim diff`
/// classes them (whether and how the cancel was answered, what the server still sent): sorted,
/// so that two runs compare as multisets. Of the mutants that reproduce a recording's rules,
/// the one whose run is most alike in this is named: an answered cancel and progress sent on
/// after it break the same rule but are not the same bug.
fn cancel_profile(trace: &Trace) -> Vec<String> {
    let front = match trace.is_two_hop() {
        true => trace.hop(Hop::Front).0,
        false => trace.clone(),
    };
    let config = OracleConfig::default();
    let calls = oracle::with_index(&front, &config, |ix, verdict| {
        diff::calls::read(ix, verdict, config.grace_ms, false)
    });
    let mut profile: Vec<String> = calls
        .calls
        .iter()
        .filter(|c| PLANNED_METHODS.contains(&c.method.as_str()))
        .flat_map(|c| {
            c.classes
                .iter()
                .filter(|(k, _)| matches!(k, Class::Cancel | Class::Tail))
                .map(|(k, v)| format!("{}: {v}", k.as_str()))
        })
        .collect();
    profile.sort();
    profile
}

/// The size of the multiset intersection of two sorted profiles.
fn likeness(a: &[String], b: &[String]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// The methods a scenario plans calls of (the plannable requests of the calls module).
const PLANNED_METHODS: &[&str] = &["tools/call", "subscriptions/listen", "tasks/get"];

fn fidelity(front: &Trace, trace: &Trace, scenario: &Scenario, lane: Lane) -> Fidelity {
    let judged: Judged = run::judge(scenario, lane);
    let recorded = oracle::check(trace, &OracleConfig::default());
    let mut recorded_rules: Vec<&'static str> =
        recorded.violations.iter().map(|v| v.rule).collect();
    recorded_rules.sort_unstable();
    recorded_rules.dedup();
    let fitted_rules = judged.rules();
    let fitted_front = match judged.run.trace.is_two_hop() {
        true => judged.run.trace.hop(Hop::Front).0,
        false => judged.run.trace.clone(),
    };
    let d = diff::diff(front, &fitted_front, &[], &DiffOptions::default());
    let outcome = |call: &diff::Call| {
        call.classes
            .iter()
            .find(|(c, _)| *c == Class::Outcome)
            .map(|(_, v)| v.clone())
    };
    let tolerance = 2 * scenario.latency.1.as_millis() as u64 + 50;
    // Only the calls a scenario plans count: the client's own housekeeping (`tools/list`, a
    // liveness `ping`) is the fitted client's to make, and the fit's notes say it left it out.
    let planned_in = |calls: &[diff::Call]| -> Vec<usize> {
        (0..calls.len())
            .filter(|&k| PLANNED_METHODS.contains(&calls[k].method.as_str()))
            .collect()
    };
    let (base_planned, new_planned) = (planned_in(&d.base.calls), planned_in(&d.new.calls));
    // Paired as `diff` pairs them (by params); a recording whose requests the fitted client
    // does not repeat word for word (a probe's numbered calls, another tool's arguments) is
    // paired call by call in order, as the fit planned them.
    let by_params: Vec<(usize, usize)> = d
        .pairs
        .iter()
        .filter(|p| base_planned.contains(&p.base))
        .map(|p| (p.base, p.new))
        .collect();
    let pairs: Vec<(usize, usize)> = match by_params.len() == base_planned.len() {
        true => by_params,
        false => base_planned
            .iter()
            .copied()
            .zip(new_planned.iter().copied())
            .collect(),
    };
    let mut f = Fidelity {
        recorded_rules,
        fitted_rules,
        calls: base_planned.len(),
        aligned: pairs.len(),
        same_outcome: 0,
        timely: 0,
        max_duration_error_ms: 0,
        diverged: Vec::new(),
    };
    // A recording without the application's word on its calls (`serve`, `record`) shows a
    // call its client's timer gave up as the cancel on the wire: the fitted client's
    // `timed_out` is that same ending.
    let wire_only = !front
        .events
        .iter()
        .any(|e| matches!(e.kind, EventKind::Outcome { .. }));
    let same = |a: Option<String>, b: Option<String>| {
        a == b
            || (wire_only && a.as_deref() == Some("cancelled") && b.as_deref() == Some("timed_out"))
    };
    for &(ka, kb) in &pairs {
        let (a, b) = (&d.base.calls[ka], &d.new.calls[kb]);
        if same(outcome(a), outcome(b)) {
            f.same_outcome += 1;
        } else {
            f.diverged.push(format!(
                "call {} ({}): {} in the recording, {} fitted",
                ka + 1,
                a.method,
                outcome(a).unwrap_or_default(),
                outcome(b).unwrap_or_default()
            ));
        }
        if let (Some(x), Some(y)) = (a.duration_ms, b.duration_ms) {
            let e = x.abs_diff(y);
            f.max_duration_error_ms = f.max_duration_error_ms.max(e);
            if e <= tolerance {
                f.timely += 1;
            }
        } else {
            f.timely += 1;
        }
    }
    for &k in base_planned
        .iter()
        .filter(|k| !pairs.iter().any(|p| p.0 == **k))
    {
        f.diverged.push(format!(
            "call {} ({}): no partner in the fitted run",
            k + 1,
            d.base.calls[k].method
        ));
    }
    let missing: Vec<&&str> = f
        .recorded_rules
        .iter()
        .filter(|r| !f.fitted_rules.contains(r))
        .collect();
    let extra: Vec<&&str> = f
        .fitted_rules
        .iter()
        .filter(|r| !f.recorded_rules.contains(r))
        .collect();
    if !missing.is_empty() {
        f.diverged
            .push(format!("broken in the recording only: {missing:?}"));
    }
    if !extra.is_empty() {
        f.diverged
            .push(format!("broken in the fitted run only: {extra:?}"));
    }
    f
}

/// `--explain`: each knob with its provenance, the recording's violations and their models,
/// the notes and the fidelity, for people.
pub fn explain_text(fit: &Fit) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario {:016x}: {}",
        fit.file.scenario.digest(),
        fit.file.scenario
    );
    let mut by_source: BTreeMap<Source, usize> = BTreeMap::new();
    for (knob, p) in &fit.file.provenance {
        *by_source.entry(p.source).or_default() += 1;
        let source = match p.source {
            Source::Recorded => "recorded",
            Source::Inferred => "inferred",
            Source::Default => "default",
        };
        let _ = writeln!(
            out,
            "  {knob}: {source}{}",
            p.evidence
                .as_ref()
                .map_or(String::new(), |e| format!(" ({e})"))
        );
    }
    let _ = writeln!(
        out,
        "knobs: {} recorded, {} inferred, {} default",
        by_source.get(&Source::Recorded).unwrap_or(&0),
        by_source.get(&Source::Inferred).unwrap_or(&0),
        by_source.get(&Source::Default).unwrap_or(&0)
    );
    for e in &fit.file.explained {
        let model = match (e.by_reference, e.mutants.is_empty()) {
            (true, _) => "the reference peers break it under the fitted timing (a race)".to_owned(),
            (false, true) => "no model of this behaviour: no mutant reproduces it".to_owned(),
            (false, false) => format!("reproduced by {}", e.mutants.join(", ")),
        };
        let _ = writeln!(out, "violation {} ({}x): {model}", e.rule, e.count);
    }
    for n in &fit.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let f = &fit.fidelity;
    let _ = writeln!(
        out,
        "fidelity: rules {:?} recorded, {:?} fitted; {} of {} calls aligned, {} with the same outcome, {} within {} ms (largest move {} ms)",
        f.recorded_rules,
        f.fitted_rules,
        f.aligned,
        f.calls,
        f.same_outcome,
        f.timely,
        2 * fit.file.scenario.latency.1.as_millis() + 50,
        f.max_duration_error_ms
    );
    for d in &f.diverged {
        let _ = writeln!(out, "  diverged: {d}");
    }
    let _ = writeln!(
        out,
        "fit: {}",
        if f.agrees() { "agrees" } else { "diverges" }
    );
    out
}
