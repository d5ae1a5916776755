//! `mcp-sim sweep`: run a range of seeded scenarios, judge every trace, and make every
//! failure reproducible from one line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use mcp_sim::model::{Outcome, Transport};
use mcp_sim::oracle::Level;
use mcp_sim::report;
use mcp_sim::repro::EraChoice;
use mcp_sim::run::{self, Judged};
use mcp_sim::scenario::Scenario;

use crate::args::{parse_range, Format, Overrides};

#[derive(clap::Args)]
pub struct Args {
    /// Seed range `A..B` (B excluded), or a single seed.
    #[arg(long, default_value = "0..1000", value_parser = parse_range)]
    seeds: (u64, u64),
    #[command(flatten)]
    overrides: Overrides,
    /// Worker threads (each seed is independent; results do not depend on this).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Write a report (trace, diagram, summary) for each failing seed here.
    #[arg(long, default_value = "target/mcp-sim-reports")]
    report_dir: PathBuf,
    /// Run only shard K of N (`K/N`, 1 <= K <= N): the seeds `s` with `(s - A) mod N = K - 1`.
    /// The N shards are disjoint and together are the whole range; `mcp-sim merge` adds up
    /// their `--format json` outputs.
    #[arg(long, value_parser = parse_shard)]
    shard: Option<(u64, u64)>,
    /// Output: the text summary, or one JSON object (a summary plus one entry per failing run
    /// with its replay line), which `mcp-sim merge` reads.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Search the neighbours of this scenario file (`mcp-sim fit`'s output, or `replay
    /// --save-scenario`'s) instead of drawn scenarios: `--seeds` are then perturbation seeds,
    /// and the neighbours that break a rule the scenario does not are listed nearest first.
    #[arg(long, conflicts_with = "shard")]
    around: Option<PathBuf>,
    /// With `--around`: which knobs may move and how far, e.g.
    /// `cancel=±2s,start=±500ms,latency=x0.25..x8,proxy=nginx|alb|cloudflare,reset=0..1,crash=0..1,transport=stdio|http`
    /// (only the knobs named move; without `--perturb`, all of these but the transport).
    #[arg(long, requires = "around")]
    perturb: Option<String>,
    /// With `--around`: shrink the nearest failing neighbour of each rule to the smallest
    /// change that still breaks it, and say it in words.
    #[arg(long, requires = "around")]
    minimize: bool,
    /// With `--around`: also search, one at a time, the behaviours of the real peer on these
    /// sides (`server`, `client`, `intermediary`) that the scenario does not refute: a session
    /// that broke nothing may hide a bug its timing never met. Hypotheses are listed, not
    /// failed, until `probe --scenario ... --hypothesis M` confirms one live.
    #[arg(long, requires = "around", value_delimiter = ',', value_parser = crate::args::parse_side)]
    hypotheses: Vec<mcp_sim::model::mutant::MutantSide>,
    #[command(flatten)]
    virtual_peer: super::virtual_peer::VirtualOptions,
}

/// `K/N` with `1 <= K <= N`.
fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (k, n) = s
        .split_once('/')
        .ok_or_else(|| format!("expected K/N, got {s:?}"))?;
    let k: u64 = k
        .trim()
        .parse()
        .map_err(|_| format!("bad shard index in {s:?}"))?;
    let n: u64 = n
        .trim()
        .parse()
        .map_err(|_| format!("bad shard count in {s:?}"))?;
    if n == 0 || k == 0 || k > n {
        return Err(format!("shard {s:?}: need 1 <= K <= N"));
    }
    Ok((k, n))
}

/// One judged seed.
pub(crate) struct SeedRun {
    pub(crate) seed: u64,
    pub(crate) transport: Option<Transport>,
    pub(crate) era: EraChoice,
    pub(crate) scenario: Scenario,
    pub(crate) judged: Judged,
}

pub(crate) fn run_seed(
    overrides: &Overrides,
    seed: u64,
    transport: Option<Transport>,
    era: EraChoice,
) -> SeedRun {
    let repro = overrides.repro(seed, transport, era);
    let scenario = repro.scenario();
    let judged = run::judge(&scenario, repro.lane);
    SeedRun {
        seed,
        transport,
        era,
        scenario,
        judged,
    }
}

/// Writes trace, diagram and summary of a failing run; returns the folder.
pub(crate) fn write_report(dir: &Path, r: &SeedRun, replay: &str) -> std::io::Result<PathBuf> {
    write_report_with(dir, r, replay, &r.scenario.to_string())
}

/// [`write_report`] with the scenario said as `scenario` (a virtual run's knobs are not the
/// reference server's).
pub(crate) fn write_report_with(
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
    let folder = dir.join(format!("seed-{}{suffix}", r.seed));
    std::fs::create_dir_all(&folder)?;
    let trace = &r.judged.run.trace;
    std::fs::write(folder.join("trace.jsonl"), trace.to_jsonl())?;
    let events = report::slice(trace, &r.judged.verdict);
    std::fs::write(
        folder.join("sequence.mmd"),
        report::mermaid(trace, &r.judged.verdict, &events),
    )?;
    std::fs::write(
        folder.join("summary.txt"),
        summary_text_with(r, replay, scenario),
    )?;
    Ok(folder)
}

pub(crate) fn summary_text(r: &SeedRun, replay: &str) -> String {
    summary_text_with(r, replay, &r.scenario.to_string())
}

/// [`summary_text`] with the scenario said as `scenario`.
pub(crate) fn summary_text_with(r: &SeedRun, replay: &str, scenario: &str) -> String {
    let (trace, report) = (&r.judged.run.trace, &r.judged.verdict);
    let mut out = String::new();
    let _ = writeln!(out, "SEED={} {scenario}", r.seed);
    if let Some(c) = &r.judged.crash {
        let _ = writeln!(out, "CRASH: {c}");
    }
    let _ = writeln!(
        out,
        "trace: {} events, digest {:016x}, complete={}",
        trace.events.len(),
        trace.digest(),
        r.judged.run.complete
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

/// What a sweep keeps of one run.
struct Summary {
    seed: u64,
    transport: Option<Transport>,
    era: EraChoice,
    /// The era the run's client spoke (the oracle's reading of the trace).
    spoke: &'static str,
    sim_ms: u64,
    requests: u64,
    outcomes: BTreeMap<Outcome, u64>,
    rules: Vec<(&'static str, &'static str)>,
    fails: bool,
    /// The run's trace digest.
    digest: u64,
    replay: String,
    test_line: String,
    report: Option<PathBuf>,
}

impl Summary {
    fn of(r: &SeedRun, overrides: &Overrides, report_dir: &Path) -> Summary {
        let repro = overrides.repro(r.seed, r.transport, r.era);
        let replay = repro.replay_line();
        let mut rules: Vec<(&'static str, &'static str)> = r
            .judged
            .verdict
            .violations
            .iter()
            .map(|v| (v.rule, v.level.as_str()))
            .collect();
        if r.judged.crash.is_some() {
            rules.push((run::CRASH, Level::Must.as_str()));
        }
        rules.sort();
        rules.dedup();
        let fails = r.judged.fails();
        let report = if fails {
            write_report(report_dir, r, &replay).ok()
        } else {
            None
        };
        let stats = &r.judged.run.stats;
        Summary {
            seed: r.seed,
            transport: r.transport,
            era: r.era,
            // As the oracle read it from the trace: an auto-mode client may have fallen back.
            spoke: match r.judged.crash {
                Some(_) => r.scenario.era.version(),
                None => r.judged.verdict.era.era.version(),
            },
            sim_ms: stats.sim_ms,
            requests: stats.requests,
            outcomes: stats.outcomes.clone(),
            rules,
            fails,
            digest: r.judged.run.trace.digest(),
            test_line: repro.test_line(),
            replay,
            report,
        }
    }
}

pub fn run(args: &Args) -> ExitCode {
    if args.virtual_peer.on {
        if args.around.is_some() || args.shard.is_some() {
            eprintln!("mcp-sim sweep: --virtual takes neither --around nor --shard");
            return ExitCode::from(2);
        }
        return super::virtual_peer::sweep(
            &args.virtual_peer,
            &args.overrides,
            args.seeds,
            args.jobs,
            &args.report_dir,
            args.format,
        );
    }
    if let Err(e) = args.overrides.validate() {
        eprintln!("mcp-sim sweep: {e}");
        return ExitCode::from(2);
    }
    let (a, b) = args.seeds;
    if let Some(path) = &args.around {
        return super::around::run(super::around::AroundArgs {
            path,
            seeds: a..b,
            perturb: args.perturb.as_deref(),
            minimize: args.minimize,
            hypotheses: &args.hypotheses,
            lane: args.overrides.lane.lane(),
            jobs: args.jobs,
            format: args.format,
        });
    }
    let (k, n) = args.shard.unwrap_or((1, 1));
    let transports = args.overrides.transports();
    let eras = args.overrides.eras();
    let runs: Vec<(u64, Option<Transport>, EraChoice)> = (a..b)
        .filter(|s| (s - a) % n == k - 1)
        .flat_map(|s| transports.iter().map(move |t| (s, *t)))
        .flat_map(|(s, t)| eras.iter().map(move |e| (s, t, *e)))
        .collect();
    let shard = args
        .shard
        .map(|(k, n)| format!(", shard {k}/{n}"))
        .unwrap_or_default();
    let header = format!(
        "sweep: seeds {a}..{b}{shard}, {} runs, {}, {} job(s)",
        runs.len(),
        args.overrides.lane.describe(),
        args.jobs.max(1)
    );
    if matches!(args.format, Format::Text) {
        println!("{header}");
    }
    let bar = ProgressBar::new(runs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {per_sec} eta {eta}")
            .expect("valid template"),
    );
    let start = Instant::now();
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<Summary>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..args.jobs.max(1) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&(seed, transport, era)) = runs.get(k) else {
                    break;
                };
                let r = run_seed(&args.overrides, seed, transport, era);
                let s = Summary::of(&r, &args.overrides, &args.report_dir);
                results
                    .lock()
                    .expect("no worker panics while holding the lock")
                    .push(s);
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    let wall = start.elapsed();
    let mut results = results.into_inner().expect("workers finished");
    results.sort_by_key(|s| (s.seed, s.transport, s.era));

    let mut totals = Totals {
        format: TOTALS_FORMAT.into(),
        seeds: args.seeds,
        shards: vec![(k, n)],
        setup: args.overrides.setup(),
        runs: results.len() as u64,
        sim_ms: 0,
        wall_ms: wall.as_millis() as u64,
        requests: 0,
        outcomes: BTreeMap::new(),
        eras: BTreeMap::new(),
        violations: BTreeMap::new(),
        traces: 0,
        failing: Vec::new(),
        not_replayable: Vec::new(),
        inconclusive: 0,
    };
    for s in &results {
        totals.traces ^= run_digest(s.seed, s.transport, s.digest);
        totals.sim_ms += s.sim_ms;
        totals.requests += s.requests;
        *totals.eras.entry(s.spoke.to_string()).or_default() += 1;
        for (o, n) in &s.outcomes {
            *totals.outcomes.entry(*o).or_default() += n;
        }
        for (rule, level) in &s.rules {
            totals
                .violations
                .entry((*rule).to_string())
                .or_insert_with(|| RuleCount {
                    level: (*level).to_string(),
                    runs: 0,
                })
                .runs += 1;
        }
        if s.fails {
            totals.failing.push(FailingRun {
                seed: s.seed,
                transport: s.transport.map(|t| t.to_string()),
                rules: s.rules.iter().map(|r| r.0.to_string()).collect(),
                replay: s.replay.clone(),
                test: s.test_line.clone(),
                digest: format!("{:016x}", s.digest),
                report: s.report.as_ref().map(|p| p.display().to_string()),
            });
        }
    }
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string(&totals).expect("totals serialize")
        ),
        Format::Text => print!("{}", totals.text()),
        Format::Junit => print!("{}", totals.junit("mcp-sim sweep")),
        Format::Github => print!("{}", totals.github()),
    }
    if totals.failing.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The `format` member of a sweep's JSON output.
pub(crate) const TOTALS_FORMAT: &str = "mcp-sim-sweep/1";

/// What a sweep (or a shard of one) found: the summary and every failing run. `--format json`
/// prints it; `mcp-sim merge` adds shards up.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct Totals {
    /// [`TOTALS_FORMAT`].
    pub format: String,
    /// The seed range `[A, B)`.
    pub seeds: (u64, u64),
    /// The shards covered, `(K, N)`.
    pub shards: Vec<(u64, u64)>,
    /// The lane and overrides, as the flags of a replay line: shards of one sweep agree.
    pub setup: String,
    pub runs: u64,
    pub sim_ms: u64,
    /// Wall time in ms (summed over merged shards).
    pub wall_ms: u64,
    pub requests: u64,
    pub outcomes: BTreeMap<Outcome, u64>,
    /// Runs per era the client spoke (its revision).
    #[serde(default)]
    pub eras: BTreeMap<String, u64>,
    /// Runs per violated rule, with the rule's level.
    pub violations: BTreeMap<String, RuleCount>,
    /// Every run's trace at once: the XOR over the runs of [`run_digest`], so shards merge
    /// by XOR and two sweeps of the same range ran the same traces exactly when it agrees.
    #[serde(with = "hex_u64")]
    pub traces: u64,
    /// Every run that broke a MUST rule or crashed, in seed order.
    pub failing: Vec<FailingRun>,
    /// Virtual runs that cannot be trusted to replay (an escape, or two runs that differed):
    /// neither findings nor passes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_replayable: Vec<NotReplayableRun>,
    /// Virtual runs that exercised nothing (no call ended with a result or was cancelled).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inconclusive: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A virtual run that is not replayable, and why.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct NotReplayableRun {
    pub seed: u64,
    /// The escape, or where two runs of the seed parted.
    pub why: String,
    /// The `mcp-sim replay` line.
    pub replay: String,
}

/// One run's share of [`Totals::traces`]: its seed, transport and trace digest mixed into one
/// word (FNV-1a over the three), so that equal traces of different seeds do not cancel out.
pub(crate) fn run_digest(seed: u64, transport: Option<Transport>, digest: u64) -> u64 {
    let transport: u64 = match transport {
        None => 0,
        Some(Transport::Stdio) => 1,
        Some(Transport::Http) => 2,
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in [seed, transport, digest]
        .iter()
        .flat_map(|w| w.to_le_bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A `u64` as 16 hex digits in JSON (the digests' usual spelling).
mod hex_u64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:016x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        u64::from_str_radix(&text, 16).map_err(serde::de::Error::custom)
    }
}

/// Runs that broke one rule.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct RuleCount {
    pub level: String,
    pub runs: u64,
}

/// One failing run and how to reproduce it.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct FailingRun {
    pub seed: u64,
    pub transport: Option<String>,
    pub rules: Vec<String>,
    /// The `mcp-sim replay` line.
    pub replay: String,
    /// The `cargo test` line.
    pub test: String,
    /// The run's trace digest, which both lines reproduce.
    pub digest: String,
    /// The report folder, on the machine that ran it.
    pub report: Option<String>,
}

/// How many failing runs a CI report lists per rule (the JSON output has them all).
const CI_LISTED: usize = 50;

impl Totals {
    /// The sweep as one JUnit suite: a case per rule that applies in an era it ran (and one
    /// for crashes), a MUST rule failing with its failing runs' replay lines.
    pub fn junit(&self, tool: &str) -> String {
        use mcp_sim::ci::{junit_suites, Case, CaseResult, Suite};
        let eras: Vec<mcp_sim::Era> = self
            .eras
            .keys()
            .filter_map(|v| mcp_sim::Era::from_version(v))
            .collect();
        let mut names: Vec<&str> = mcp_sim::oracle::RULES
            .iter()
            .filter(|r| !r.spans_hops() && eras.iter().any(|&e| r.level_in(e).is_some()))
            .map(|r| r.name)
            .collect();
        // A crash, or a rule of an era none of the runs was read in, still gets its case.
        let extra: Vec<&str> = self
            .violations
            .keys()
            .map(String::as_str)
            .filter(|v| !names.contains(v))
            .collect();
        names.extend(extra);
        let cases = names
            .into_iter()
            .map(|name| {
                let result = match self.violations.get(name) {
                    None => CaseResult::Passed,
                    Some(count) if count.level == Level::Must.as_str() => {
                        let failing: Vec<&FailingRun> = self
                            .failing
                            .iter()
                            .filter(|f| f.rules.iter().any(|r| r == name))
                            .collect();
                        let mut text: Vec<String> = failing
                            .iter()
                            .take(CI_LISTED)
                            .map(|f| format!("seed {}: {}", f.seed, f.replay))
                            .collect();
                        if failing.len() > CI_LISTED {
                            text.push(format!("and {} more", failing.len() - CI_LISTED));
                        }
                        CaseResult::Failed {
                            kind: "MUST".into(),
                            message: format!("{} of {} runs break it", count.runs, self.runs),
                            text: text.join("\n"),
                        }
                    }
                    Some(count) => CaseResult::PassedWithOutput(format!(
                        "{} of {} runs break this {} rule",
                        count.runs, self.runs, count.level
                    )),
                };
                Case {
                    name: name.to_owned(),
                    result,
                }
            })
            .collect();
        let suite = Suite {
            name: format!("seeds {}..{} {}", self.seeds.0, self.seeds.1, self.setup),
            properties: vec![
                ("runs".into(), self.runs.to_string()),
                ("traces".into(), format!("{:016x}", self.traces)),
                (
                    "eras".into(),
                    self.eras
                        .iter()
                        .map(|(e, n)| format!("{e} {n}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
            ],
            cases,
        };
        junit_suites(tool, &[suite])
    }

    /// The sweep as GitHub annotations: one per broken rule, with the first failing runs'
    /// replay lines for a MUST rule.
    pub fn github(&self) -> String {
        use mcp_sim::ci::{github_lines, Annotation};
        let annotations: Vec<Annotation> = self
            .violations
            .iter()
            .map(|(rule, count)| {
                let level = match count.level.as_str() {
                    "MUST" => Level::Must,
                    "SHOULD" => Level::Should,
                    _ => Level::Policy,
                };
                let mut message = format!(
                    "{} of {} runs of seeds {}..{} break {} ({})",
                    count.runs, self.runs, self.seeds.0, self.seeds.1, rule, count.level
                );
                let listed = if level == Level::Must { 3 } else { 0 };
                for f in self
                    .failing
                    .iter()
                    .filter(|f| f.rules.iter().any(|r| r == rule))
                    .take(listed)
                {
                    let _ = write!(message, "\nreplay: {}", f.replay);
                }
                Annotation {
                    command: mcp_sim::ci::annotation_command(level),
                    title: rule.clone(),
                    message,
                }
            })
            .collect();
        github_lines(&annotations)
    }

    /// The text summary `mcp-sim sweep` prints after its header.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let wall = self.wall_ms as f64 / 1000.0;
        let _ = writeln!(out, "runs:        {}", self.runs);
        let _ = writeln!(
            out,
            "simulated:   {:.0} s ({:.1} h)",
            self.sim_ms as f64 / 1000.0,
            self.sim_ms as f64 / 3.6e6
        );
        let _ = writeln!(
            out,
            "wall:        {wall:.2} s ({:.0} runs/s)",
            self.runs as f64 / wall
        );
        let _ = writeln!(
            out,
            "compression: {:.0}x simulated seconds per wall second",
            self.sim_ms as f64 / 1000.0 / wall
        );
        let _ = writeln!(out, "requests:    {}", self.requests);
        let _ = writeln!(
            out,
            "traces:      {:016x} (digest of every run's trace)",
            self.traces
        );
        let outcome_text: Vec<String> = self
            .outcomes
            .iter()
            .map(|(o, n)| format!("{} {n}", o.as_str()))
            .collect();
        let _ = writeln!(out, "outcomes:    {}", outcome_text.join(", "));
        let era_text: Vec<String> = self
            .eras
            .iter()
            .rev()
            .map(|(e, n)| format!("{e} {n}"))
            .collect();
        if !era_text.is_empty() {
            let _ = writeln!(out, "eras:        {}", era_text.join(", "));
        }
        if self.violations.is_empty() {
            let _ = writeln!(out, "violations:  none");
        } else {
            let _ = writeln!(out, "violations (runs per rule):");
            for (rule, c) in &self.violations {
                let _ = writeln!(out, "  {rule:<28} {:<7} {}", c.level, c.runs);
            }
        }
        if self.inconclusive > 0 {
            let _ = writeln!(
                out,
                "inconclusive: {} runs exercised nothing (no tools/call ended with a result)",
                self.inconclusive
            );
        }
        for n in &self.not_replayable {
            let _ = writeln!(out, "NOT-REPLAYABLE seed {}: {}", n.seed, n.why);
            let _ = writeln!(out, "  replay: {}", n.replay);
        }
        for f in &self.failing {
            let _ = writeln!(out, "FAIL seed {}: {}", f.seed, f.rules.join(", "));
            if let Some(folder) = &f.report {
                let _ = writeln!(out, "  report: {folder}");
            }
            let _ = writeln!(out, "  digest: {}", f.digest);
            let _ = writeln!(out, "  replay: {}", f.replay);
            if !f.test.is_empty() {
                let _ = writeln!(out, "  test:   {}", f.test);
            }
        }
        if !self.failing.is_empty() {
            let _ = writeln!(
                out,
                "{} of {} runs violate a MUST rule",
                self.failing.len(),
                self.runs
            );
        }
        out
    }
}
