//! The `mcp-sim` command.
//!
//! Subcommands share the library's layers; this crate only parses arguments, reads files and
//! prints. The exit codes are the library's one table ([`mcp_sim::exit::Exit`]): 0 success, 1
//! a MUST-level violation was found (or the peer judged is at fault), 2 usage or input error,
//! 3 the run was inconclusive: it did not exercise what it was meant to, or could not be
//! trusted, 4 mcp-sim could not write its trace or report mid-run, 130 `probe` or
//! `check-proxy` was interrupted by SIGINT or SIGTERM.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `eprintln!` that survives a closed stderr: a client that launched `serve` or `record` may
/// close the pipe it gave for stderr before the verdict is said (mcp-go's stdio transport
/// does), and the files they write must still be written.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// `eprint!` that survives a closed stderr, as [`say!`].
macro_rules! say_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($t)*);
    }};
}

mod args;
mod cmd;
mod signals;

use cmd::{
    check_proxy, check_trace, decode, diff, fit, merge, mutants, probe, record, replay, rules,
    serve, sweep,
};

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
    CheckTrace(check_trace::Args),
    /// Compare two runs by behaviour (calls aligned; outcomes, cancels, tails, progress,
    /// statuses; the verdicts' delta): exit 0 no regression beyond noise, 1 a regression.
    Diff(diff::Args),
    /// Fit a scenario to a recorded session (probe, serve, record, check-proxy): every knob
    /// with its provenance, the mutants that reproduce its violations, the fit's fidelity.
    Fit(fit::Args),
    /// Run a range of seeded scenarios and judge every trace.
    Sweep(sweep::Args),
    /// Run one seed again: summary, violations, trace slice, diagram, report files.
    Replay(replay::Args),
    /// Add up the `--format json` outputs of a sweep's shards into one summary.
    Merge(merge::Args),
    /// Hunt every mutant (a real SDK bug) until the oracle flags it: the mutation score.
    Mutants(mutants::Args),
    /// Drive a real MCP server (stdio: `-- COMMAND ARGS...`; Streamable HTTP: `--url URL`) with
    /// a seeded schedule and judge the trace.
    Probe(Box<probe::Args>),
    /// Judge an intermediary (a bridge, a gateway) between the reference client and the
    /// reference server: `-- INTERMEDIARY ARGS...` with `{upstream}`, `{upstream-url}`,
    /// `{port}`; both hops in one trace.
    CheckProxy(Box<check_proxy::Args>),
    /// Be the reference server for a real client: stdio (the client launches `mcp-sim
    /// serve`) or Streamable HTTP (`--http ADDR`); judge the client from the server's end.
    Serve(Box<serve::Args>),
    /// Sit between a real host and its real server (stdio: `-- SERVER ARGS...`; HTTP:
    /// `--http LISTEN --upstream URL`), pass everything on, record both sides, judge.
    Record(Box<record::Args>),
    /// Print the oracle's rule catalog as a Markdown table.
    Rules,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The probe writes to a child's stdin and must see EPIPE when the child dies, not die.
    if !matches!(
        cli.command,
        Command::Probe(_) | Command::CheckProxy(_) | Command::Serve(_) | Command::Record(_)
    ) {
        restore_sigpipe();
    }
    match cli.command {
        Command::Decode(args) => decode::run(&args),
        Command::CheckTrace(args) => check_trace::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Fit(args) => fit::run(&args),
        Command::Sweep(args) => sweep::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Merge(args) => merge::run(&args),
        Command::Mutants(args) => mutants::run(&args),
        Command::Probe(args) => probe::run(&args),
        Command::CheckProxy(args) => check_proxy::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Record(args) => record::run(&args),
        Command::Rules => rules::run(),
    }
}

/// Rust ignores SIGPIPE, so printing into a closed pipe (`mcp-sim replay --trace | head`)
/// would panic; a command-line tool should end quietly instead, as other Unix tools do.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any thread or I/O exists; restoring the
    // default disposition of one signal has no other effect on the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
