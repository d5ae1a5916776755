//! `mcp-sim sweep --around FILE`: the neighbours of a scenario file (a fitted session, most
//! often) run in simulation; those that break a rule the scenario does not are listed nearest
//! first, each with the line that replays it, and with `--minimize` the nearest one per rule
//! is shrunk to the smallest change that still breaks it, said in words.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;
use std::process::ExitCode;

use mcp_sim::ci::{self, Annotation, Case, CaseResult, Suite};
use mcp_sim::fit::neighbours::{self, Around, Minimized};
use mcp_sim::lanes::Lane;
use mcp_sim::oracle::{self, Level};
use mcp_sim::repro::FileRepro;
use mcp_sim::scenario::around::PerturbSpec;
use mcp_sim::scenario::file::ScenarioFile;
use mcp_sim::scenario::Scenario;
use serde_json::json;

use crate::args::Format;

/// At most this many failing neighbours are listed one per line in the text output.
const LISTED: usize = 20;

/// What `sweep` hands over when `--around` is given.
pub struct AroundArgs<'a> {
    pub path: &'a Path,
    pub seeds: Range<u64>,
    pub perturb: Option<&'a str>,
    pub minimize: bool,
    pub lane: Lane,
    pub jobs: usize,
    pub format: Format,
}

pub fn run(args: AroundArgs<'_>) -> ExitCode {
    let spec = match args.perturb.map(PerturbSpec::parse) {
        Some(Err(e)) => {
            eprintln!("mcp-sim sweep --around: {e}");
            return ExitCode::from(2);
        }
        Some(Ok(spec)) => spec,
        None => PerturbSpec::default(),
    };
    let file = match ScenarioFile::read(args.path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("mcp-sim sweep --around: {e}");
            return ExitCode::from(2);
        }
    };
    let base = &file.scenario;
    let around = neighbours::search(base, args.seeds.clone(), &spec, args.lane, args.jobs);
    let minimized: Vec<Minimized> = if args.minimize {
        first_per_rule(&around)
            .into_iter()
            .map(|(rule, k)| neighbours::minimize(base, &around.found[k], rule, args.lane))
            .collect()
    } else {
        Vec::new()
    };
    let replay = |seed: u64| {
        let mut line = FileRepro {
            path: args.path.to_owned(),
            perturb_seed: Some(seed),
            perturb: spec.clone(),
            lane: args.lane,
        }
        .replay_line();
        if let Some(p) = args.perturb {
            line.push_str(&format!(" --perturb {p}"));
        }
        line
    };
    match args.format {
        Format::Json => println!(
            "{}",
            json_of(&args, base.digest(), &around, &minimized, &replay)
        ),
        Format::Text => print!(
            "{}",
            text_of(&args, base.digest(), &around, &minimized, &replay)
        ),
        Format::Junit => print!(
            "{}",
            ci::junit_suites(
                "mcp-sim sweep --around",
                &[suite_of(&args, base, &around, &replay)]
            )
        ),
        Format::Github => print!(
            "{}",
            ci::github_lines(&annotations_of(base, &around, &replay))
        ),
    }
    if around.found.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The first (nearest) failing neighbour of each new rule, rules in name order.
fn first_per_rule(around: &Around) -> Vec<(&'static str, usize)> {
    let mut first: std::collections::BTreeMap<&'static str, usize> = Default::default();
    for (k, f) in around.found.iter().enumerate() {
        for rule in &f.new_rules {
            first.entry(rule).or_insert(k);
        }
    }
    first.into_iter().collect()
}

fn text_of(
    args: &AroundArgs<'_>,
    digest: u64,
    around: &Around,
    minimized: &[Minimized],
    replay: &impl Fn(u64) -> String,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sweep --around {}: scenario digest {digest:016x}, perturbation seeds {}..{}, {} neighbours",
        args.path.display(),
        args.seeds.start,
        args.seeds.end,
        around.runs
    );
    let base = if around.base_rules.is_empty() {
        "nothing".to_string()
    } else {
        around.base_rules.join(", ")
    };
    let _ = writeln!(out, "the scenario itself breaks: {base}");
    if around.found.is_empty() {
        let _ = writeln!(out, "no neighbour breaks a rule the scenario does not");
        return out;
    }
    let _ = writeln!(
        out,
        "{} neighbour(s) break a rule the scenario does not, nearest first:",
        around.found.len()
    );
    for f in around.found.iter().take(LISTED) {
        let n = &f.neighbour;
        let _ = writeln!(
            out,
            "  perturb seed {}, distance {:.3}: {} (digest {:016x})",
            n.perturb_seed,
            n.distance,
            f.new_rules.join(", "),
            f.digest
        );
        let changes: Vec<String> = n.changes.iter().map(|c| c.describe()).collect();
        let _ = writeln!(out, "    {}", changes.join("; "));
        let _ = writeln!(out, "    replay: {}", replay(n.perturb_seed));
    }
    if around.found.len() > LISTED {
        let _ = writeln!(
            out,
            "  ... and {} more (--format json lists all)",
            around.found.len() - LISTED
        );
    }
    let mut counts: std::collections::BTreeMap<&str, u64> = Default::default();
    for f in &around.found {
        for r in &f.new_rules {
            *counts.entry(r).or_default() += 1;
        }
    }
    let counts: Vec<String> = counts.iter().map(|(r, n)| format!("{r} {n}")).collect();
    let _ = writeln!(out, "by rule: {}", counts.join(", "));
    for m in minimized {
        let _ = writeln!(out, "minimized ({}): {}", m.rule, m.words);
    }
    out
}

fn json_of(
    args: &AroundArgs<'_>,
    digest: u64,
    around: &Around,
    minimized: &[Minimized],
    replay: &impl Fn(u64) -> String,
) -> serde_json::Value {
    json!({
        "scenario": args.path.display().to_string(),
        "digest": format!("{digest:016x}"),
        "perturb_seeds": [args.seeds.start, args.seeds.end],
        "runs": around.runs,
        "base_rules": around.base_rules,
        "found": around.found.iter().map(|f| json!({
            "perturb_seed": f.neighbour.perturb_seed,
            "distance": f.neighbour.distance,
            "changes": f.neighbour.changes.iter().map(|c| c.describe()).collect::<Vec<_>>(),
            "rules": f.new_rules,
            "digest": format!("{:016x}", f.digest),
            "replay": replay(f.neighbour.perturb_seed),
        })).collect::<Vec<_>>(),
        "minimized": minimized.iter().map(|m| json!({
            "rule": m.rule,
            "changes": m.changes.iter().map(|c| c.describe()).collect::<Vec<_>>(),
            "words": m.words,
            "digest": format!("{:016x}", m.scenario.digest()),
        })).collect::<Vec<_>>(),
    })
}

/// The level of `rule` in the scenario's era (a crash is a MUST).
fn level_of(base: &Scenario, rule: &str) -> Level {
    oracle::rule_info(rule)
        .and_then(|r| r.level_in(base.era))
        .unwrap_or(Level::Must)
}

/// One line per new rule: the nearest neighbour that breaks it.
fn nearest_line(around: &Around, k: usize, replay: &impl Fn(u64) -> String) -> String {
    let n = &around.found[k].neighbour;
    let changes: Vec<String> = n.changes.iter().map(|c| c.describe()).collect();
    format!(
        "perturb seed {} (distance {:.3}): {}; replay: {}",
        n.perturb_seed,
        n.distance,
        changes.join("; "),
        replay(n.perturb_seed)
    )
}

/// A JUnit suite: one failed case per rule a neighbour breaks that the scenario does not.
fn suite_of(
    args: &AroundArgs<'_>,
    base: &Scenario,
    around: &Around,
    replay: &impl Fn(u64) -> String,
) -> Suite {
    let mut cases: Vec<Case> = first_per_rule(around)
        .into_iter()
        .map(|(rule, k)| {
            let line = nearest_line(around, k, replay);
            Case {
                name: rule.to_string(),
                result: CaseResult::Failed {
                    kind: level_of(base, rule).as_str().to_string(),
                    message: format!("a neighbour breaks {rule}: {line}"),
                    text: line,
                },
            }
        })
        .collect();
    if cases.is_empty() {
        cases.push(Case {
            name: "neighbours".into(),
            result: CaseResult::Passed,
        });
    }
    Suite {
        name: format!("around {}", args.path.display()),
        properties: vec![
            ("digest".into(), format!("{:016x}", base.digest())),
            (
                "perturb_seeds".into(),
                format!("{}..{}", args.seeds.start, args.seeds.end),
            ),
        ],
        cases,
    }
}

/// A GitHub annotation per rule a neighbour breaks that the scenario does not.
fn annotations_of(
    base: &Scenario,
    around: &Around,
    replay: &impl Fn(u64) -> String,
) -> Vec<Annotation> {
    first_per_rule(around)
        .into_iter()
        .map(|(rule, k)| Annotation {
            command: ci::annotation_command(level_of(base, rule)),
            title: rule.to_string(),
            message: format!(
                "a neighbour breaks {rule}: {}",
                nearest_line(around, k, replay)
            ),
        })
        .collect()
}
