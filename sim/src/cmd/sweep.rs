//! `mcp-sim sweep`: run a range of seeded scenarios, judge every trace, and make every
//! failure reproducible from one line.

use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use mcp_sim::exit::Exit;
use mcp_sim::repro::EraChoice;
use mcp_sim::sweep::Sweep;

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

pub fn run(args: &Args) -> ExitCode {
    let virtual_peer = &args.virtual_peer;
    if virtual_peer.on || virtual_peer.client {
        if args.around.is_some() || args.shard.is_some() {
            let mode = if virtual_peer.on {
                "--virtual"
            } else {
                "--virtual-client"
            };
            eprintln!("mcp-sim sweep: {mode} takes neither --around nor --shard");
            return ExitCode::from(Exit::Usage);
        }
        let sweep = match virtual_peer.on {
            true => super::virtual_peer::sweep,
            false => super::virtual_client::sweep,
        };
        return sweep(
            virtual_peer,
            &args.overrides,
            args.seeds,
            args.jobs,
            &args.report_dir,
            args.format,
        );
    }
    if let Err(e) = args.overrides.validate() {
        eprintln!("mcp-sim sweep: {e}");
        return ExitCode::from(Exit::Usage);
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
    let sweep = Sweep {
        seeds: args.seeds,
        shard: args.shard.unwrap_or((1, 1)),
        transports: args.overrides.transports(),
        eras: args.overrides.eras(),
        base: args.overrides.repro(a, None, EraChoice::FromSeed),
        setup: args.overrides.setup(),
        report_dir: args.report_dir.clone(),
        jobs: args.jobs,
    };
    let shard = args
        .shard
        .map(|(k, n)| format!(", shard {k}/{n}"))
        .unwrap_or_default();
    let runs = sweep.runs().len();
    let header = format!(
        "sweep: seeds {a}..{b}{shard}, {runs} runs, {}, {} job(s)",
        args.overrides.lane.describe(),
        args.jobs.max(1)
    );
    if matches!(args.format, Format::Text) {
        println!("{header}");
    }
    let bar = ProgressBar::new(runs as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {per_sec} eta {eta}")
            .expect("valid template"),
    );
    let totals = sweep.run(&|| bar.inc(1));
    bar.finish_and_clear();
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string(&totals).expect("totals serialize")
        ),
        Format::Text => print!("{}", totals.text()),
        Format::Junit => print!("{}", totals.junit("mcp-sim sweep")),
        Format::Github => print!("{}", totals.github()),
    }
    totals.exit().into()
}
