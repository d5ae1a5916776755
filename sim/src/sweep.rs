//! `mcp-sim sweep` and `mcp-sim replay`: run seeded scenarios, judge every trace, and make
//! every failure reproducible from one line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use mcp_sim::harness::{self, HarnessOptions};
use mcp_sim::memory::{self, RunResult};
use mcp_sim::model::{Outcome, Transport};
use mcp_sim::oracle::{self, Report};
use mcp_sim::report;
use mcp_sim::scenario::{ProxyConfig, Scenario};

/// Which transport to run each seed on.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// As drawn from the seed.
    Seed,
    /// stdio only.
    Stdio,
    /// Streamable HTTP only.
    Http,
    /// Each seed on both.
    Both,
}

/// Which driver runs the scenario.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lane {
    /// turmoil: simulated hosts, TCP, hyper, proxies, crashes (the full simulation).
    Turmoil,
    /// The in-memory discrete-event driver: the same model and oracle, ~100x faster.
    Memory,
}

/// Knobs that override what the seed draws; part of the replay line.
#[derive(clap::Args, Clone)]
pub struct Overrides {
    /// Driver.
    #[arg(long, value_enum, default_value_t = Lane::Turmoil)]
    lane: Lane,
    /// turmoil tick in milliseconds.
    #[arg(long, default_value_t = 10)]
    tick_ms: u64,
    /// Transport.
    #[arg(long, value_enum, default_value_t = TransportArg::Seed)]
    transport: TransportArg,
    /// Idle-timeout proxy on HTTP: nginx, alb, cloudflare, custom:SECONDS or none.
    #[arg(long)]
    proxy: Option<String>,
}

impl Overrides {
    fn transports(&self) -> Vec<Option<Transport>> {
        match self.transport {
            TransportArg::Seed => vec![None],
            TransportArg::Stdio => vec![Some(Transport::Stdio)],
            TransportArg::Http => vec![Some(Transport::Http)],
            TransportArg::Both => vec![Some(Transport::Stdio), Some(Transport::Http)],
        }
    }

    fn proxy(&self) -> Result<Option<Option<ProxyConfig>>, String> {
        match self.proxy.as_deref() {
            None => Ok(None),
            Some("none") => Ok(Some(None)),
            Some(name) => ProxyConfig::preset(name)
                .map(|p| Some(Some(p)))
                .ok_or_else(|| format!("unknown proxy preset {name:?}")),
        }
    }

    fn scenario(&self, seed: u64, transport: Option<Transport>) -> Scenario {
        let mut s = Scenario::from_seed(seed);
        if let Some(t) = transport {
            s = s.with_transport(t);
        }
        if let Ok(Some(p)) = self.proxy() {
            s = s.with_proxy(p);
        }
        s
    }

    /// The `cargo test` command that replays `seed` (transport override only; the proxy
    /// override has no test form).
    fn test_line(&self, seed: u64, transport: Option<Transport>) -> String {
        let transport = transport
            .map(|t| format!("MCP_SIM_TRANSPORT={t} "))
            .unwrap_or_default();
        let test = match self.lane {
            Lane::Turmoil => "turmoil_sim",
            Lane::Memory => "simulation",
        };
        format!("MCP_SIM_SEED={seed} {transport}cargo test --release --test {test} replay_one_seed -- --nocapture")
    }

    /// The command that replays `seed` with these overrides.
    fn replay_line(&self, seed: u64, transport: Option<Transport>) -> String {
        let mut line = format!("cargo run --release -p mcp-sim-cli -- replay --seed {seed}");
        if self.lane == Lane::Memory {
            line.push_str(" --lane memory");
        }
        if self.tick_ms != 10 {
            let _ = write!(line, " --tick-ms {}", self.tick_ms);
        }
        if let Some(t) = transport {
            let _ = write!(line, " --transport {t}");
        }
        if let Some(p) = &self.proxy {
            let _ = write!(line, " --proxy {p}");
        }
        line
    }
}

#[derive(clap::Args)]
pub struct SweepArgs {
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
}

#[derive(clap::Args)]
pub struct ReplayArgs {
    /// The seed to replay.
    #[arg(long)]
    seed: u64,
    #[command(flatten)]
    overrides: Overrides,
    /// Also print the Mermaid sequence diagram of the violations.
    #[arg(long)]
    mermaid: bool,
    /// Print the whole trace (JSON Lines).
    #[arg(long)]
    trace: bool,
    /// Where to write the report files.
    #[arg(long, default_value = "target/mcp-sim-reports")]
    report_dir: PathBuf,
}

fn parse_range(s: &str) -> Result<(u64, u64), String> {
    match s.split_once("..") {
        Some((a, b)) => {
            let a = a.parse().map_err(|_| format!("bad range start in {s:?}"))?;
            let b = b.parse().map_err(|_| format!("bad range end in {s:?}"))?;
            if b <= a {
                return Err(format!("empty range {s:?}"));
            }
            Ok((a, b))
        }
        None => s
            .parse()
            .map(|a: u64| (a, a + 1))
            .map_err(|_| format!("expected A..B or a seed, got {s:?}")),
    }
}

/// One judged run.
struct Judged {
    seed: u64,
    transport: Option<Transport>,
    scenario: Scenario,
    run: RunResult,
    report: Report,
    /// A simulated task panicked or turmoil failed: the run itself is a failure.
    crash: Option<String>,
}

fn judge(overrides: &Overrides, seed: u64, transport: Option<Transport>) -> Judged {
    let scenario = overrides.scenario(seed, transport);
    let (run, crash) = match overrides.lane {
        Lane::Memory => (memory::run(&scenario), None),
        Lane::Turmoil => {
            let options = HarnessOptions {
                tick: Duration::from_millis(overrides.tick_ms.max(1)),
            };
            match harness::run(&scenario, &options) {
                Ok(run) => (run, None),
                Err(e) => {
                    let empty = RunResult {
                        trace: Default::default(),
                        complete: false,
                        stats: Default::default(),
                    };
                    (empty, Some(e.to_string()))
                }
            }
        }
    };
    let mut report = oracle::check(&run.trace, &run.oracle_config(&scenario));
    if !run.complete && crash.is_none() {
        // Liveness: after the heal phase every request must have settled.
        report.violations.push(oracle::Violation {
            rule: "liveness",
            level: oracle::Level::Must,
            events: vec![run.trace.events.len().saturating_sub(1)],
            message: "the run did not settle after the faults healed: a request, a job or a resource is still open".into(),
        });
    }
    Judged {
        seed,
        transport,
        scenario,
        run,
        report,
        crash,
    }
}

/// Writes trace, diagram and summary of a failing run; returns the folder.
fn write_report(dir: &Path, j: &Judged, replay: &str) -> std::io::Result<PathBuf> {
    let suffix = j.transport.map(|t| format!("-{t}")).unwrap_or_default();
    let folder = dir.join(format!("seed-{}{suffix}", j.seed));
    std::fs::create_dir_all(&folder)?;
    std::fs::write(folder.join("trace.jsonl"), j.run.trace.to_jsonl())?;
    let events = report::slice(&j.run.trace, &j.report);
    std::fs::write(
        folder.join("sequence.mmd"),
        report::mermaid(&j.run.trace, &j.report, &events),
    )?;
    std::fs::write(folder.join("summary.txt"), summary_text(j, replay))?;
    Ok(folder)
}

fn summary_text(j: &Judged, replay: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "SEED={} {}", j.seed, j.scenario);
    if let Some(c) = &j.crash {
        let _ = writeln!(out, "CRASH: {c}");
    }
    let _ = writeln!(
        out,
        "trace: {} events, digest {:016x}, complete={}",
        j.run.trace.events.len(),
        j.run.trace.digest(),
        j.run.complete
    );
    let _ = writeln!(out, "violations:\n{}", report::violations_text(&j.report));
    let _ = writeln!(out, "trace slice:");
    for i in report::slice(&j.run.trace, &j.report) {
        let line = serde_json::to_string(&j.run.trace.events[i]).expect("events serialize");
        let _ = writeln!(out, "  #{i} {line}");
    }
    let _ = writeln!(out, "replay: {replay}");
    out
}

pub fn sweep(args: &SweepArgs) -> ExitCode {
    if let Err(e) = args.overrides.proxy() {
        eprintln!("mcp-sim sweep: {e}");
        return ExitCode::from(2);
    }
    let (a, b) = args.seeds;
    let transports = args.overrides.transports();
    let runs: Vec<(u64, Option<Transport>)> = (a..b)
        .flat_map(|s| transports.iter().map(move |t| (s, *t)))
        .collect();
    let lane = match args.overrides.lane {
        Lane::Turmoil => format!("turmoil, {} ms tick", args.overrides.tick_ms),
        Lane::Memory => "in-memory driver".to_string(),
    };
    println!(
        "sweep: seeds {a}..{b}, {} runs, {lane}, {} job(s)",
        runs.len(),
        args.jobs.max(1)
    );
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
                let Some(&(seed, transport)) = runs.get(k) else {
                    break;
                };
                let j = judge(&args.overrides, seed, transport);
                let s = Summary::of(&j, &args.overrides, &args.report_dir);
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
    results.sort_by_key(|s| (s.seed, s.transport));

    let sim_ms: u64 = results.iter().map(|s| s.sim_ms).sum();
    let requests: u64 = results.iter().map(|s| s.requests).sum();
    let mut outcomes: BTreeMap<Outcome, u64> = BTreeMap::new();
    let mut by_rule: BTreeMap<&'static str, (u64, &'static str)> = BTreeMap::new();
    for s in &results {
        for (o, n) in &s.outcomes {
            *outcomes.entry(*o).or_default() += n;
        }
        for (rule, level) in &s.rules {
            by_rule.entry(rule).or_insert((0, level)).0 += 1;
        }
    }
    println!("runs:        {}", results.len());
    println!(
        "simulated:   {:.0} s ({:.1} h)",
        sim_ms as f64 / 1000.0,
        sim_ms as f64 / 3.6e6
    );
    println!(
        "wall:        {:.2} s ({:.0} runs/s)",
        wall.as_secs_f64(),
        results.len() as f64 / wall.as_secs_f64()
    );
    println!(
        "compression: {:.0}x simulated seconds per wall second",
        sim_ms as f64 / 1000.0 / wall.as_secs_f64()
    );
    println!("requests:    {requests}");
    let outcome_text: Vec<String> = outcomes
        .iter()
        .map(|(o, n)| format!("{} {n}", o.as_str()))
        .collect();
    println!("outcomes:    {}", outcome_text.join(", "));
    if by_rule.is_empty() {
        println!("violations:  none");
    } else {
        println!("violations (runs per rule):");
        for (rule, (n, level)) in &by_rule {
            println!("  {rule:<28} {level:<7} {n}");
        }
    }
    let failing: Vec<&Summary> = results.iter().filter(|s| s.must).collect();
    for s in &failing {
        println!(
            "FAIL seed {}: {}",
            s.seed,
            s.rules.iter().map(|r| r.0).collect::<Vec<_>>().join(", ")
        );
        if let Some(folder) = &s.report {
            println!("  report: {}", folder.display());
        }
        println!("  replay: {}", s.replay);
        println!("  test:   {}", s.test_line);
    }
    if failing.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!(
            "{} of {} runs violate a MUST rule",
            failing.len(),
            results.len()
        );
        ExitCode::from(1)
    }
}

/// What a sweep keeps of one run.
struct Summary {
    seed: u64,
    transport: Option<Transport>,
    sim_ms: u64,
    requests: u64,
    outcomes: BTreeMap<Outcome, u64>,
    rules: Vec<(&'static str, &'static str)>,
    must: bool,
    replay: String,
    /// The `cargo test` form of the replay.
    test_line: String,
    report: Option<PathBuf>,
}

impl Summary {
    fn of(j: &Judged, overrides: &Overrides, report_dir: &Path) -> Summary {
        let replay = overrides.replay_line(j.seed, j.transport);
        let test_line = overrides.test_line(j.seed, j.transport);
        let mut rules: Vec<(&'static str, &'static str)> = j
            .report
            .violations
            .iter()
            .map(|v| (v.rule, v.level.as_str()))
            .collect();
        rules.sort();
        rules.dedup();
        let must = j.report.has_must();
        let report = if must {
            write_report(report_dir, j, &replay).ok()
        } else {
            None
        };
        Summary {
            seed: j.seed,
            transport: j.transport,
            sim_ms: j.run.stats.sim_ms,
            requests: j.run.stats.requests,
            outcomes: j.run.stats.outcomes.clone(),
            rules,
            must,
            replay,
            test_line,
            report,
        }
    }
}

pub fn replay(args: &ReplayArgs) -> ExitCode {
    if let Err(e) = args.overrides.proxy() {
        eprintln!("mcp-sim replay: {e}");
        return ExitCode::from(2);
    }
    let transport = match args.overrides.transport {
        TransportArg::Stdio => Some(Transport::Stdio),
        TransportArg::Http => Some(Transport::Http),
        TransportArg::Seed => None,
        TransportArg::Both => {
            eprintln!("mcp-sim replay: pick one transport");
            return ExitCode::from(2);
        }
    };
    let j = judge(&args.overrides, args.seed, transport);
    let replay = args.overrides.replay_line(args.seed, transport);
    print!("{}", summary_text(&j, &replay));
    if args.mermaid {
        let events = report::slice(&j.run.trace, &j.report);
        println!("{}", report::mermaid(&j.run.trace, &j.report, &events));
    }
    if args.trace {
        print!("{}", j.run.trace.to_jsonl());
    }
    if !j.report.is_clean() {
        match write_report(&args.report_dir, &j, &replay) {
            Ok(folder) => println!("report written to {}", folder.display()),
            Err(e) => eprintln!("mcp-sim replay: cannot write the report: {e}"),
        }
    }
    if j.report.has_must() || j.crash.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
