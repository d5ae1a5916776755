//! The `mcp-sim` command.
//!
//! Subcommands share the library's layers; this crate only parses arguments, reads files and
//! prints. Exit codes: 0 success, 1 a MUST-level violation was found, 2 usage or input error.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod check;
mod decode;
mod probe;
mod probe_http;
mod sweep;

/// Deterministic simulation and fuzzing of MCP 2026-07-28 progress, cancellation and timeouts.
#[derive(Parser)]
#[command(name = "mcp-sim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode NDJSON messages from stdin; print one JSON verdict per input line.
    Decode(decode::Args),
    /// Judge a trace (JSON Lines, format v1) with the oracle.
    CheckTrace(check::Args),
    /// Run a range of seeded scenarios and judge every trace.
    Sweep(sweep::SweepArgs),
    /// Run one seed again: summary, violations, trace slice, diagram, report files.
    Replay(sweep::ReplayArgs),
    /// Hunt every mutant (a real SDK bug) until the oracle flags it: the mutation score.
    Mutants(sweep::MutantsArgs),
    /// Drive a real MCP server (stdio: `-- COMMAND ARGS...`; Streamable HTTP: `--url URL`) with
    /// a seeded schedule and judge the trace.
    Probe(probe::Args),
    /// Print the oracle's rule catalog as a Markdown table.
    Rules,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode(args) => decode::run(&args),
        Command::CheckTrace(args) => check::run(&args),
        Command::Sweep(args) => sweep::sweep(&args),
        Command::Replay(args) => sweep::replay(&args),
        Command::Mutants(args) => sweep::mutants(&args),
        Command::Probe(args) => probe::run(&args),
        Command::Rules => {
            println!("| rule | level | spec | what it demands |");
            println!("| --- | --- | --- | --- |");
            for r in mcp_sim::oracle::RULES {
                println!(
                    "| `{}` | {} | {} | {} |",
                    r.name, r.level, r.spec, r.summary
                );
            }
            ExitCode::SUCCESS
        }
    }
}
