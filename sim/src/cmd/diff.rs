//! `mcp-sim diff BASE NEW [--noise BASE2 ...]`: did cancellation, progress or timeouts behave
//! differently between two runs? The comparison is the library's ([`mcp_sim::diff`], whose
//! docs say how calls align and what is compared); this command reads the traces and prints.
//!
//! Exit codes: 0 no regression beyond noise (fixes and changes that break no rule are listed),
//! 1 a regression (a rule newly broken, an outcome changed, timing beyond tolerance), 2 a
//! trace that cannot be read, 3 the runs do not align (fewer than 80 % of the calls pair).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcp_sim::diff::{self, Align, DiffOptions};
use mcp_sim::exit::Exit;
use mcp_sim::trace::Trace;

use crate::args::Format;

/// `--align`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum AlignArg {
    /// By the probe's call tag when both runs tagged their calls, else by params.
    Auto,
    /// By the probe's call tag.
    Tag,
    /// By method, params without `_meta`, and occurrence.
    Params,
    /// By order, where the methods agree.
    Order,
}

#[derive(clap::Args)]
pub struct Args {
    /// The base run's trace (JSON Lines, format v1).
    base: PathBuf,
    /// The new run's trace.
    new: PathBuf,
    /// Another run of the base: what differs between the base and it is noise. Repeatable.
    #[arg(long)]
    noise: Vec<PathBuf>,
    /// How calls pair.
    #[arg(long, value_enum, default_value_t = AlignArg::Auto)]
    align: AlignArg,
    /// Compare the payloads of answers too (ids, tokens, `_meta`, `ttlMs`, timestamps and
    /// UUIDs left out).
    #[arg(long)]
    payloads: bool,
    /// A timing change within this many ms is none (also within half the base's figure, and
    /// twice the spread of the `--noise` runs).
    #[arg(long, default_value_t = DiffOptions::default().timing_tolerance_ms)]
    timing_tolerance_ms: u64,
    /// How long after a cancel a message may still be in flight, in ms: what arrives later is
    /// the server's tail (also the oracle's grace window).
    #[arg(long, default_value_t = DiffOptions::default().oracle.grace_ms)]
    grace_ms: u64,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Print the first changed call as a two-column Mermaid diagram (text format).
    #[arg(long)]
    mermaid: bool,
}

fn read(path: &Path) -> Result<Trace, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Trace::from_jsonl(&text).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run(args: &Args) -> ExitCode {
    let traces = std::iter::once(&args.base)
        .chain(std::iter::once(&args.new))
        .chain(&args.noise)
        .map(|p| read(p))
        .collect::<Result<Vec<Trace>, String>>();
    let traces = match traces {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mcp-sim diff: {e}");
            return ExitCode::from(Exit::Usage);
        }
    };
    let mut options = DiffOptions {
        align: match args.align {
            AlignArg::Auto => Align::Auto,
            AlignArg::Tag => Align::Tag,
            AlignArg::Params => Align::Params,
            AlignArg::Order => Align::Order,
        },
        payloads: args.payloads,
        timing_tolerance_ms: args.timing_tolerance_ms,
        ..DiffOptions::default()
    };
    options.oracle.grace_ms = args.grace_ms;
    let d = diff::diff(&traces[0], &traces[1], &traces[2..], &options);
    match args.format {
        Format::Text => {
            print!("{}", diff::text(&d));
            if args.mermaid {
                match diff::mermaid(&d) {
                    Some(m) => print!("{m}"),
                    None => println!("(no call changed: no diagram)"),
                }
            }
        }
        Format::Json => println!("{}", diff::json(&d)),
        Format::Junit => print!("{}", diff::junit(&d)),
        Format::Github => print!("{}", diff::github(&d)),
    }
    d.exit().into()
}
