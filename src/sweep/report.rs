//! A judged seed's report: the folder a failing run leaves (trace, Mermaid diagram, summary)
//! and the summary's text, shared by sweeps, `replay` and the virtual lanes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::model::Transport;
use crate::oracle::Level;
use crate::report;
use crate::repro::EraChoice;
use crate::run::{self, Judged};
use crate::scenario::Scenario;

/// One judged seed.
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// The transport imposed (`None`: the seed's).
    pub transport: Option<Transport>,
    /// The era asked for.
    pub era: EraChoice,
    /// The scenario it played.
    pub scenario: Scenario,
    /// Its run and verdict.
    pub judged: Judged,
}

/// Writes trace, diagram and summary of a failing run; returns the folder.
pub fn write_report(dir: &Path, r: &SeedRun, replay: &str) -> std::io::Result<PathBuf> {
    write_report_with(dir, r, replay, &r.scenario.to_string())
}

/// [`write_report`] with the scenario said as `scenario` (a virtual run's knobs are not the
/// reference server's).
pub fn write_report_with(
    dir: &Path,
    r: &SeedRun,
    replay: &str,
    scenario: &str,
) -> std::io::Result<PathBuf> {
    let mut suffix = r.transport.map(|t| format!("-{t}")).unwrap_or_default();
    if let EraChoice::Fixed(era) = r.era {
        if era.is_legacy() {
            suffix.push_str(&format!("-{}", era.version()));
        }
    }
    write_judged_report(dir, r.seed, &suffix, &r.judged, replay, scenario)
}

/// Writes trace, diagram and summary of a judged run to `seed-S{suffix}`; returns the folder.
pub fn write_judged_report(
    dir: &Path,
    seed: u64,
    suffix: &str,
    judged: &Judged,
    replay: &str,
    scenario: &str,
) -> std::io::Result<PathBuf> {
    let folder = dir.join(format!("seed-{seed}{suffix}"));
    std::fs::create_dir_all(&folder)?;
    let trace = &judged.run.trace;
    std::fs::write(folder.join("trace.jsonl"), trace.to_jsonl())?;
    let events = report::slice(trace, &judged.verdict);
    std::fs::write(
        folder.join("sequence.mmd"),
        report::mermaid(trace, &judged.verdict, &events),
    )?;
    std::fs::write(
        folder.join("summary.txt"),
        judged_summary(seed, judged, replay, scenario),
    )?;
    Ok(folder)
}

/// The summary of a judged seed, its scenario said as the reference server's.
pub fn summary_text(r: &SeedRun, replay: &str) -> String {
    summary_text_with(r, replay, &r.scenario.to_string())
}

/// [`summary_text`] with the scenario said as `scenario`.
pub fn summary_text_with(r: &SeedRun, replay: &str, scenario: &str) -> String {
    judged_summary(r.seed, &r.judged, replay, scenario)
}

/// The summary of a judged run: its knobs, crash, digest, violations, trace slice, replay.
pub fn judged_summary(seed: u64, judged: &Judged, replay: &str, scenario: &str) -> String {
    let (trace, report) = (&judged.run.trace, &judged.verdict);
    let mut out = String::new();
    let _ = writeln!(out, "SEED={seed} {scenario}");
    if let Some(c) = &judged.crash {
        let _ = writeln!(out, "CRASH: {c}");
    }
    let _ = writeln!(
        out,
        "trace: {} events, digest {:016x}, complete={}",
        trace.events.len(),
        trace.digest(),
        judged.run.complete
    );
    let _ = writeln!(out, "violations:\n{}", report::violations_text(report));
    let _ = writeln!(out, "trace slice:");
    for i in report::slice(trace, report) {
        let line = serde_json::to_string(&trace.events[i]).expect("events serialize");
        let _ = writeln!(out, "  #{i} {line}");
    }
    let _ = writeln!(out, "replay: {replay}");
    out
}

/// A run's broken rules with their levels (and [`run::CRASH`] when it crashed), sorted,
/// without repeats.
pub fn rule_levels(judged: &Judged) -> Vec<(&'static str, &'static str)> {
    let mut rules: Vec<(&'static str, &'static str)> = judged
        .verdict
        .violations
        .iter()
        .map(|v| (v.rule, v.level.as_str()))
        .collect();
    if judged.crash.is_some() {
        rules.push((run::CRASH, Level::Must.as_str()));
    }
    rules.sort();
    rules.dedup();
    rules
}
