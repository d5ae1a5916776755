//! `mcp-sim fit RECORDING -o scenario.json [--explain]`: a scenario fitted to a recorded
//! session, with each knob's provenance, the mutants that reproduce its violations and the
//! fit's fidelity.

use std::path::PathBuf;
use std::process::ExitCode;

use mcp_sim::exit::Exit;
use mcp_sim::fit::{self, FitOptions};
use mcp_sim::trace::Trace;

use crate::args::LaneOptions;

#[derive(clap::Args)]
pub struct Args {
    /// The recording: a trace of `probe`, `serve`, `record`, `check-proxy` or a simulation.
    recording: PathBuf,
    /// Where to write the scenario file (versioned JSON); `-` for standard output.
    #[arg(short, long)]
    output: PathBuf,
    /// Print each knob's provenance, the violations' models and the fit's fidelity.
    #[arg(long)]
    explain: bool,
    /// The lane the fitted scenario is run on to find mutants and measure fidelity (a two-hop
    /// recording needs turmoil's).
    #[command(flatten)]
    lane: LaneOptions,
}

pub fn run(args: &Args) -> ExitCode {
    let text = match std::fs::read_to_string(&args.recording) {
        Ok(t) => t,
        Err(e) => return fail(&format!("cannot read {}: {e}", args.recording.display())),
    };
    let trace = match Trace::from_jsonl(&text) {
        Ok(t) => t,
        Err(e) => return fail(&format!("{}: {e}", args.recording.display())),
    };
    let options = FitOptions {
        lane: args.lane.lane(),
    };
    let mut fitted = match fit::fit(&trace, &options) {
        Ok(f) => f,
        Err(e) => return fail(&format!("{}: {e}", args.recording.display())),
    };
    fitted.file.source = Some(args.recording.display().to_string());
    let json = fitted.file.to_json();
    let written = match args.output.as_os_str() == "-" {
        true => {
            print!("{json}");
            Ok(())
        }
        false => std::fs::write(&args.output, &json),
    };
    if let Err(e) = written {
        return fail(&format!("cannot write {}: {e}", args.output.display()));
    }
    let text = fit::explain_text(&fitted);
    if args.explain {
        eprint!("{text}");
    } else if let Some(last) = text.lines().rev().find(|l| l.starts_with("fidelity:")) {
        eprintln!("{last}");
    }
    eprintln!(
        "scenario {:016x} written to {}; replay: mcp-sim replay --scenario {}",
        fitted.file.scenario.digest(),
        args.output.display(),
        args.output.display()
    );
    ExitCode::from(Exit::Pass)
}

fn fail(why: &str) -> ExitCode {
    eprintln!("mcp-sim fit: {why}");
    ExitCode::from(Exit::Usage)
}
