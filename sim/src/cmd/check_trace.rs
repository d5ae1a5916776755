//! `mcp-sim check-trace FILE`: judge a recorded or hand-written trace.
//!
//! Exit 0 when no MUST rule is violated, 1 when one is, 2 when the trace cannot be read, 3
//! when it was cut short (a line cut mid-write, or a begin line and no end line: its recorder
//! was killed) and no MUST rule is broken in what it holds.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use mcp_sim::exit::{Exit, Finding, FindingKind, Judged, RunEnd};
use mcp_sim::model::ClientPolicies;
use mcp_sim::oracle::{self, OracleConfig};
use mcp_sim::report;
use mcp_sim::trace::Trace;
use mcp_sim::Era;

use crate::args::{json_verdict, oracle_config, Format, ProfileArg};

/// The finding of a trace cut short ([`mcp_sim::trace::frame::Cut`]).
const TRACE_CUT: &str = "trace-cut";

#[derive(clap::Args)]
pub struct Args {
    /// The trace (JSON Lines, format v1); `-` reads stdin.
    file: PathBuf,
    #[arg(long, value_enum, default_value_t = ProfileArg::Strict)]
    profile: ProfileArg,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Window for inferring an unrecorded side's observations and for stopping work, in ms.
    #[arg(long, default_value_t = OracleConfig::default().grace_ms)]
    grace_ms: u64,
    /// Ceiling for any request without a tighter recorded policy, in ms.
    #[arg(long, default_value_t = OracleConfig::default().max_request_ms)]
    max_request_ms: u64,
    /// The run ended settled: also demand an outcome per request and released resources.
    #[arg(long)]
    complete: bool,
    /// Two-hop traces: the intermediary's documented request timeout in ms
    /// (`intermediary-timeout`).
    #[arg(long)]
    intermediary_timeout_ms: Option<u64>,
    /// Print a Mermaid sequence diagram of the violations (text format).
    #[arg(long)]
    mermaid: bool,
    /// Judge by this era instead of the one the trace speaks: `modern`, `legacy` or a revision
    /// (2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26).
    #[arg(long)]
    era: Option<Era>,
    /// The timeout policy the client declares, as `serve --client-policy` takes it (per
    /// method: `tools/call:timeout=1000,reset`): recorded on each request it covers that has
    /// no policy in the trace, before the trace is judged.
    #[arg(long, value_parser = ClientPolicies::from_spec)]
    client_policy: Option<ClientPolicies>,
    /// Expected findings, one rule per line: the exit code then fails only on a MUST rule
    /// the file does not list, or on a listed rule that no longer occurs.
    #[arg(long)]
    baseline: Option<PathBuf>,
}

pub fn run(args: &Args) -> ExitCode {
    let text = if args.file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map(|_| s)
    } else {
        std::fs::read_to_string(&args.file)
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "mcp-sim check-trace: cannot read {}: {e}",
                args.file.display()
            );
            return ExitCode::from(Exit::Usage);
        }
    };
    // A trace cut short (its recorder killed mid-run) is read up to the cut, judged, and
    // named: never a pass, since the end of the run was not recorded.
    let (mut trace, cut) = match Trace::read_jsonl(&text) {
        Ok(r) => (r.trace, r.cut),
        Err(e) => {
            eprintln!("mcp-sim check-trace: {}: {e}", args.file.display());
            return ExitCode::from(Exit::Usage);
        }
    };
    let findings: Vec<Finding> = cut
        .iter()
        .map(|cut| Finding {
            finding: TRACE_CUT,
            kind: FindingKind::Inconclusive,
            message: cut.to_string(),
        })
        .collect();
    // The text output says it with the verdict; the others are read by programs, so people
    // read it on stderr.
    if !matches!(args.format, Format::Text) {
        for f in &findings {
            eprintln!(
                "mcp-sim check-trace: {}: {}",
                args.file.display(),
                f.message
            );
        }
    }
    if let Some(declared) = &args.client_policy {
        trace.declare_client_policies(declared);
    }
    let config = OracleConfig {
        max_request_ms: args.max_request_ms,
        complete: args.complete,
        era: args.era,
        intermediary_timeout_ms: args.intermediary_timeout_ms,
        ..oracle_config(args.profile, args.grace_ms)
    };
    let baseline = match crate::args::read_baseline(args.baseline.as_deref(), mcp_sim::ci::is_rule)
    {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mcp-sim check-trace: {e}");
            return ExitCode::from(Exit::Usage);
        }
    };
    let verdict = oracle::check(&trace, &config);
    // A trace file is judged whole, both ends, as `record` judges a session.
    let end = RunEnd::decide(&verdict, &findings, baseline.as_ref(), Judged::Session);
    let diff = end.diff;
    let ci_run = || mcp_sim::ci::CiRun {
        name: args.file.display().to_string(),
        verdict: &verdict,
        replay: None,
        outcome: end.outcome.clone(),
        baseline: baseline.as_ref().zip(diff.clone()),
    };
    let exit_code = end.exit.code();
    match args.format {
        Format::Json => {
            println!("{}", json_verdict(&trace, &ci_run(), exit_code));
        }
        Format::Junit => print!("{}", mcp_sim::ci::junit("mcp-sim check-trace", &[ci_run()])),
        Format::Github => print!("{}", mcp_sim::ci::github(&[ci_run()])),
        Format::Text => {
            println!(
                "{} events, {} violations",
                trace.events.len(),
                verdict.violations.len()
            );
            println!("era: {}", verdict.describe_era());
            for f in &findings {
                println!("{}: {}", f.finding, f.message);
            }
            print!("{}", report::violations_text(&verdict));
            if args.mermaid && !verdict.is_clean() {
                println!(
                    "{}",
                    report::mermaid(&trace, &verdict, &report::slice(&trace, &verdict))
                );
            }
        }
    }
    if let Some(diff) = diff {
        eprint!("{}", diff.text());
    }
    end.exit.into()
}
