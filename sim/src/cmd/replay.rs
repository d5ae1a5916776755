//! `mcp-sim replay`: run one seed again and print its summary, violations, trace slice,
//! diagram and report files.

use std::path::PathBuf;
use std::process::ExitCode;

use mcp_sim::model::Transport;
use mcp_sim::report;

use super::sweep::{run_seed, summary_text, write_report};
use crate::args::{Overrides, TransportArg};

#[derive(clap::Args)]
pub struct Args {
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

pub fn run(args: &Args) -> ExitCode {
    if let Err(e) = args.overrides.validate() {
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
    let era = match args.overrides.eras()[..] {
        [era] => era,
        _ => {
            eprintln!("mcp-sim replay: pick one era");
            return ExitCode::from(2);
        }
    };
    let r = run_seed(&args.overrides, args.seed, transport, era);
    let replay = args
        .overrides
        .repro(args.seed, transport, era)
        .replay_line();
    print!("{}", summary_text(&r, &replay));
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
        match write_report(&args.report_dir, &r, &replay) {
            Ok(folder) => println!("report written to {}", folder.display()),
            Err(e) => eprintln!("mcp-sim replay: cannot write the report: {e}"),
        }
    }
    if r.judged.fails() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
