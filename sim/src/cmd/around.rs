//! `mcp-sim sweep --around FILE`: the neighbours of a scenario file (a fitted session, most
//! often) run in simulation; those that break a rule the scenario does not are listed nearest
//! first, each with the line that replays it, and with `--minimize` the nearest one per rule
//! is shrunk to the smallest change that still breaks it, said in words.
//!
//! With `--hypotheses SIDE`, the same search is made once more for each behaviour of that
//! side's peer that the session does not refute ([`neighbours::hypotheses`]): a session that
//! broke nothing names no mutant, yet its peer may have a bug its timing never met. Those
//! findings are hypotheses; `probe --scenario ... --hypothesis M` confirms one live or not.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;
use std::process::ExitCode;

use mcp_sim::ci::{self, Annotation, Case, CaseResult, Suite};
use mcp_sim::exit::Exit;
use mcp_sim::fit::neighbours::{self, Around, Minimized};
use mcp_sim::lanes::Lane;
use mcp_sim::model::mutant::MutantSide;
use mcp_sim::model::Mutant;
use mcp_sim::oracle::{self, Level};
use mcp_sim::repro::FileRepro;
use mcp_sim::scenario::around::PerturbSpec;
use mcp_sim::scenario::file::ScenarioFile;
use mcp_sim::scenario::Scenario;
use serde_json::json;

use crate::args::Format;

/// At most this many failing neighbours of one search are listed in the text output.
const LISTED: usize = 20;
/// ... and of each hypothesis's.
const LISTED_PER_HYPOTHESIS: usize = 3;

/// What `sweep` hands over when `--around` is given.
pub struct AroundArgs<'a> {
    pub path: &'a Path,
    pub seeds: Range<u64>,
    pub perturb: Option<&'a str>,
    pub minimize: bool,
    /// `--hypotheses`: the sides whose unrefuted behaviours are searched too.
    pub hypotheses: &'a [MutantSide],
    pub lane: Lane,
    pub jobs: usize,
    pub format: Format,
}

/// One search: of the scenario itself, or of it with a hypothesis on.
struct Search {
    hypothesis: Option<Mutant>,
    around: Around,
    minimized: Vec<Minimized>,
}

pub fn run(args: AroundArgs<'_>) -> ExitCode {
    let spec = match args.perturb.map(PerturbSpec::parse) {
        Some(Err(e)) => {
            eprintln!("mcp-sim sweep --around: {e}");
            return ExitCode::from(Exit::Usage);
        }
        Some(Ok(spec)) => spec,
        None => PerturbSpec::default(),
    };
    let file = match ScenarioFile::read(args.path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("mcp-sim sweep --around: {e}");
            return ExitCode::from(Exit::Usage);
        }
    };
    let base = &file.scenario;
    let mut assumed: Vec<Option<Mutant>> = vec![None];
    if !args.hypotheses.is_empty() {
        assumed.extend(
            neighbours::hypotheses(base, args.hypotheses, args.lane)
                .into_iter()
                .map(Some),
        );
    }
    let searches: Vec<Search> = assumed
        .into_iter()
        .map(|hypothesis| {
            let scenario = neighbours::assuming(base, hypothesis);
            let around =
                neighbours::search(&scenario, args.seeds.clone(), &spec, args.lane, args.jobs);
            let minimized = match args.minimize {
                true => first_per_rule(&around)
                    .into_iter()
                    .map(|(rule, k)| {
                        neighbours::minimize(&scenario, &around.found[k], rule, args.lane)
                    })
                    .collect(),
                false => Vec::new(),
            };
            Search {
                hypothesis,
                around,
                minimized,
            }
        })
        .collect();
    // A search in which no neighbour differs from the scenario searched nothing, and says so.
    if searches[0].around.runs == 0 {
        eprintln!(
            "mcp-sim sweep --around: nothing searched: no neighbour of seeds {}..{} differs from \
             the scenario (--perturb moves no knob this scenario has)",
            args.seeds.start, args.seeds.end
        );
        return ExitCode::from(Exit::Inconclusive);
    }
    let replay = |seed: u64, hypothesis: Option<Mutant>| {
        let mut line = FileRepro {
            path: args.path.to_owned(),
            perturb_seed: Some(seed),
            perturb: spec.clone(),
            hypothesis,
            lane: args.lane,
        }
        .replay_line();
        if let Some(p) = args.perturb {
            line.push_str(&format!(" --perturb '{p}'"));
        }
        line
    };
    match args.format {
        Format::Json => println!("{}", json_of(&args, base, &searches, &replay)),
        Format::Text => print!("{}", text_of(&args, base, &searches, &replay)),
        Format::Junit => print!(
            "{}",
            ci::junit_suites(
                "mcp-sim sweep --around",
                &[suite_of(&args, base, &searches, &replay)]
            )
        ),
        Format::Github => print!(
            "{}",
            ci::github_lines(&annotations_of(base, &searches, &replay))
        ),
    }
    // Only the scenario's own neighbours fail the run: a hypothesis is no finding until it is
    // confirmed live.
    match searches[0].around.found.is_empty() {
        true => ExitCode::from(Exit::Pass),
        false => ExitCode::from(Exit::Broken),
    }
}

/// The first (nearest) failing neighbour of each new rule, rules in name order.
fn first_per_rule(around: &Around) -> Vec<(&'static str, usize)> {
    let mut first: BTreeMap<&'static str, usize> = BTreeMap::new();
    for (k, f) in around.found.iter().enumerate() {
        for rule in &f.new_rules {
            first.entry(rule).or_insert(k);
        }
    }
    first.into_iter().collect()
}

fn name(hypothesis: Option<Mutant>) -> Option<&'static str> {
    hypothesis.map(|m| m.info().name)
}

fn text_of(
    args: &AroundArgs<'_>,
    base: &Scenario,
    searches: &[Search],
    replay: &impl Fn(u64, Option<Mutant>) -> String,
) -> String {
    let mut out = String::new();
    let own = &searches[0].around;
    let _ = writeln!(
        out,
        "sweep --around {}: scenario digest {:016x}, perturbation seeds {}..{}, {} neighbours differ from it",
        args.path.display(),
        base.digest(),
        args.seeds.start,
        args.seeds.end,
        own.runs
    );
    let broken = match own.base_rules.is_empty() {
        true => "nothing".to_string(),
        false => own.base_rules.join(", "),
    };
    let _ = writeln!(out, "the scenario itself breaks: {broken}");
    if !args.hypotheses.is_empty() {
        let unrefuted = searches.len() - 1;
        let fruitful = searches
            .iter()
            .filter(|s| s.hypothesis.is_some() && !s.around.found.is_empty())
            .count();
        let _ = writeln!(
            out,
            "{unrefuted} behaviour(s) of the peer the session does not refute, {fruitful} with \
             neighbours that break a rule (--format json names them all)"
        );
    }
    for search in searches {
        let found = &search.around.found;
        let listed = match search.hypothesis {
            None if found.is_empty() => {
                let _ = writeln!(out, "no neighbour breaks a rule the scenario does not");
                continue;
            }
            None => {
                let _ = writeln!(
                    out,
                    "{} neighbour(s) break a rule the scenario does not, nearest first:",
                    found.len()
                );
                LISTED
            }
            Some(_) if found.is_empty() => continue,
            Some(m) => {
                let _ = writeln!(
                    out,
                    "if the peer behaves as {} ({}): {} neighbour(s) break a rule the scenario does not, nearest first:",
                    m.info().name,
                    m.info().bug,
                    found.len()
                );
                LISTED_PER_HYPOTHESIS
            }
        };
        for f in found.iter().take(listed) {
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
            let _ = writeln!(
                out,
                "    replay: {}",
                replay(n.perturb_seed, search.hypothesis)
            );
        }
        if found.len() > listed {
            let _ = writeln!(
                out,
                "  ... and {} more (--format json lists all)",
                found.len() - listed
            );
        }
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for f in found {
            for r in &f.new_rules {
                *counts.entry(r).or_default() += 1;
            }
        }
        let counts: Vec<String> = counts.iter().map(|(r, n)| format!("{r} {n}")).collect();
        let _ = writeln!(out, "  by rule: {}", counts.join(", "));
        for m in &search.minimized {
            let _ = writeln!(out, "  minimized ({}): {}", m.rule, m.words);
        }
    }
    out
}

fn json_of(
    args: &AroundArgs<'_>,
    base: &Scenario,
    searches: &[Search],
    replay: &impl Fn(u64, Option<Mutant>) -> String,
) -> serde_json::Value {
    let own = &searches[0].around;
    let found = searches.iter().flat_map(|s| {
        s.around.found.iter().map(move |f| {
            json!({
                "hypothesis": name(s.hypothesis),
                "perturb_seed": f.neighbour.perturb_seed,
                "distance": f.neighbour.distance,
                "changes": f.neighbour.changes.iter().map(|c| c.describe()).collect::<Vec<_>>(),
                "rules": f.new_rules,
                "digest": format!("{:016x}", f.digest),
                "replay": replay(f.neighbour.perturb_seed, s.hypothesis),
            })
        })
    });
    let minimized = searches.iter().flat_map(|s| {
        s.minimized.iter().map(move |m| {
            json!({
                "hypothesis": name(s.hypothesis),
                "rule": m.rule,
                "changes": m.changes.iter().map(|c| c.describe()).collect::<Vec<_>>(),
                "words": m.words,
                "digest": format!("{:016x}", m.scenario.digest()),
            })
        })
    });
    json!({
        "scenario": args.path.display().to_string(),
        "digest": format!("{:016x}", base.digest()),
        "perturb_seeds": [args.seeds.start, args.seeds.end],
        "drawn": own.drawn,
        "runs": own.runs,
        "base_rules": own.base_rules,
        "hypotheses": searches.iter().filter_map(|s| name(s.hypothesis)).collect::<Vec<_>>(),
        "found": found.collect::<Vec<_>>(),
        "minimized": minimized.collect::<Vec<_>>(),
    })
}

/// The level of `rule` in the scenario's era (a crash is a MUST).
fn level_of(base: &Scenario, rule: &str) -> Level {
    oracle::rule_info(rule)
        .and_then(|r| r.level_in(base.era))
        .unwrap_or(Level::Must)
}

/// The nearest neighbour that breaks a rule, in one line.
fn nearest_line(
    search: &Search,
    k: usize,
    replay: &impl Fn(u64, Option<Mutant>) -> String,
) -> String {
    let n = &search.around.found[k].neighbour;
    let changes: Vec<String> = n.changes.iter().map(|c| c.describe()).collect();
    format!(
        "perturb seed {} (distance {:.3}): {}; replay: {}",
        n.perturb_seed,
        n.distance,
        changes.join("; "),
        replay(n.perturb_seed, search.hypothesis)
    )
}

/// A JUnit suite: one failed case per rule a neighbour of the scenario itself breaks that the
/// scenario does not (hypotheses are not failures: they are listed as skipped until
/// confirmed live).
fn suite_of(
    args: &AroundArgs<'_>,
    base: &Scenario,
    searches: &[Search],
    replay: &impl Fn(u64, Option<Mutant>) -> String,
) -> Suite {
    let mut cases: Vec<Case> = Vec::new();
    for search in searches {
        for (rule, k) in first_per_rule(&search.around) {
            let line = nearest_line(search, k, replay);
            let result = match search.hypothesis {
                None => CaseResult::Failed {
                    kind: level_of(base, rule).as_str().to_string(),
                    message: format!("a neighbour breaks {rule}: {line}"),
                    text: line,
                },
                Some(m) => CaseResult::Skipped(format!(
                    "if the peer behaves as {}, a neighbour breaks {rule}: {line}",
                    m.info().name
                )),
            };
            let name = match search.hypothesis {
                None => rule.to_string(),
                Some(m) => format!("{rule} if {}", m.info().name),
            };
            cases.push(Case { name, result });
        }
    }
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

/// A GitHub annotation per rule a neighbour breaks that the scenario does not; a notice for a
/// hypothesis's.
fn annotations_of(
    base: &Scenario,
    searches: &[Search],
    replay: &impl Fn(u64, Option<Mutant>) -> String,
) -> Vec<Annotation> {
    let mut out = Vec::new();
    for search in searches {
        for (rule, k) in first_per_rule(&search.around) {
            let line = nearest_line(search, k, replay);
            out.push(match search.hypothesis {
                None => Annotation {
                    command: ci::annotation_command(level_of(base, rule)),
                    title: rule.to_string(),
                    message: format!("a neighbour breaks {rule}: {line}"),
                },
                Some(m) => Annotation {
                    command: "notice",
                    title: format!("{rule} if {}", m.info().name),
                    message: format!(
                        "if the peer behaves as {}, a neighbour breaks {rule}: {line}",
                        m.info().name
                    ),
                },
            });
        }
    }
    out
}
