//! `mcp-sim replay`: run one seed again and print its summary, violations, trace slice,
//! diagram and report files.

use std::path::PathBuf;
use std::process::ExitCode;

use mcp_sim::exit::Exit;
use mcp_sim::model::Transport;
use mcp_sim::report;
use mcp_sim::repro::{EraChoice, FileRepro};
use mcp_sim::scenario::around::PerturbSpec;
use mcp_sim::sweep::report::{summary_text, write_report};
use mcp_sim::sweep::{run_seed, SeedRun};

use crate::args::{Overrides, TransportArg};

#[derive(clap::Args)]
pub struct Args {
    /// The seed to replay.
    #[arg(
        long,
        required_unless_present = "scenario",
        conflicts_with = "scenario"
    )]
    seed: Option<u64>,
    /// Replay a scenario file instead (`mcp-sim fit`'s output, versioned JSON): the seed of a
    /// real session.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// With `--scenario`: replay its neighbour drawn from this perturbation seed (as
    /// `sweep --around` prints it).
    #[arg(long, requires = "scenario")]
    perturb_seed: Option<u64>,
    /// With `--perturb-seed`: the knobs that may move, as `sweep --around --perturb` took them.
    #[arg(long, requires = "perturb_seed")]
    perturb: Option<String>,
    /// With `--scenario`: assume this behaviour of the peer on top of the file's (a mutant's
    /// name, as `sweep --around --hypotheses` prints it).
    #[arg(long, requires = "scenario", value_parser = crate::args::parse_mutant)]
    hypothesis: Option<mcp_sim::model::Mutant>,
    #[command(flatten)]
    overrides: Overrides,
    /// Also print the Mermaid sequence diagram of the violations.
    #[arg(long)]
    mermaid: bool,
    /// Print the whole trace (JSON Lines).
    #[arg(long)]
    trace: bool,
    /// Also write the run's scenario as a scenario file (to edit, or to `sweep --around`).
    #[arg(long)]
    save_scenario: Option<PathBuf>,
    /// Where to write the report files.
    #[arg(long, default_value = "target/mcp-sim-reports")]
    report_dir: PathBuf,
    #[command(flatten)]
    virtual_peer: super::virtual_peer::VirtualOptions,
}

pub fn run(args: &Args) -> ExitCode {
    if let Some(path) = &args.scenario {
        return run_file(args, path);
    }
    let seed = args.seed.expect("clap requires --seed without --scenario");
    if args.virtual_peer.on || args.virtual_peer.client {
        let replay = match args.virtual_peer.on {
            true => super::virtual_peer::replay,
            false => super::virtual_client::replay,
        };
        return replay(
            &args.virtual_peer,
            &args.overrides,
            seed,
            &args.report_dir,
            args.trace,
        );
    }
    if let Err(e) = args.overrides.validate() {
        eprintln!("mcp-sim replay: {e}");
        return ExitCode::from(Exit::Usage);
    }
    let transport = match args.overrides.transport {
        TransportArg::Stdio => Some(Transport::Stdio),
        TransportArg::Http => Some(Transport::Http),
        TransportArg::Seed => None,
        TransportArg::Both => {
            eprintln!("mcp-sim replay: pick one transport");
            return ExitCode::from(Exit::Usage);
        }
    };
    let era = match args.overrides.eras()[..] {
        [era] => era,
        _ => {
            eprintln!("mcp-sim replay: pick one era");
            return ExitCode::from(Exit::Usage);
        }
    };
    let repro = args.overrides.repro(seed, transport, era);
    finish(args, &run_seed(&repro), &repro.replay_line())
}

/// `--scenario FILE [--perturb-seed N]`: the file's run, or its neighbour's.
fn run_file(args: &Args, path: &std::path::Path) -> ExitCode {
    let perturb = match args.perturb.as_deref().map(PerturbSpec::parse) {
        Some(Err(e)) => {
            eprintln!("mcp-sim replay: {e}");
            return ExitCode::from(Exit::Usage);
        }
        Some(Ok(spec)) => spec,
        None => PerturbSpec::default(),
    };
    let file = FileRepro {
        path: path.to_owned(),
        perturb_seed: args.perturb_seed,
        perturb,
        hypothesis: args.hypothesis,
        lane: args.overrides.lane.lane(),
    };
    let (scenario, digest) = match file.scenario() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mcp-sim replay: {e}");
            return ExitCode::from(Exit::Usage);
        }
    };
    println!("scenario digest {digest:016x}");
    let judged = mcp_sim::run::judge(&scenario, file.lane);
    let r = SeedRun {
        seed: scenario.seed,
        transport: Some(scenario.transport),
        era: EraChoice::Fixed(scenario.era),
        scenario,
        judged,
    };
    let mut replay = file.replay_line();
    if let Some(spec) = &args.perturb {
        replay.push_str(&format!(" --perturb '{spec}'"));
    }
    finish(args, &r, &replay)
}

fn finish(args: &Args, r: &SeedRun, replay: &str) -> ExitCode {
    print!("{}", summary_text(r, replay));
    if let Some(path) = &args.save_scenario {
        let file = mcp_sim::scenario::file::ScenarioFile::of(r.scenario.clone());
        if let Err(e) = std::fs::write(path, file.to_json()) {
            eprintln!("mcp-sim replay: cannot write {}: {e}", path.display());
            return ExitCode::from(Exit::Usage);
        }
    }
    if args.mermaid {
        let events = report::slice(&r.judged.run.trace, &r.judged.verdict);
        println!(
            "{}",
            report::mermaid(&r.judged.run.trace, &r.judged.verdict, &events)
        );
    }
    if args.trace {
        print!("{}", r.judged.run.trace.to_jsonl());
    }
    if !r.judged.verdict.is_clean() || r.judged.crash.is_some() {
        match write_report(&args.report_dir, r, replay) {
            Ok(folder) => println!("report written to {}", folder.display()),
            Err(e) => eprintln!("mcp-sim replay: cannot write the report: {e}"),
        }
    }
    if r.judged.fails() {
        ExitCode::from(Exit::Broken)
    } else {
        ExitCode::from(Exit::Pass)
    }
}
