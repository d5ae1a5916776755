//! `mcp-sim merge FILE...`: add up the `--format json` outputs of the shards of one sweep
//! (`mcp-sim sweep --shard K/N`) into the summary a single run of the whole range prints.
//!
//! The files must come from the same seed range and the same lane and overrides, with the same
//! shard count and no shard twice; a missing shard is reported and fails the merge, since the
//! summary would not cover the range. Wall time is the sum over the shards (the machine time
//! spent), so the compression figure is per machine. Exit 0 when no run failed, 1 when one
//! did, 2 when the files cannot be read or do not belong together.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use mcp_sim::exit::Exit;
use mcp_sim::sweep::{Totals, TOTALS_FORMAT};

use crate::args::Format;

#[derive(clap::Args)]
pub struct Args {
    /// The shards' JSON outputs (`-` reads one from stdin).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output: the text summary, or the merged JSON object.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

fn read(path: &PathBuf) -> Result<Totals, String> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let totals: Totals = serde_json::from_str(text.trim())
        .map_err(|e| format!("{}: not a sweep's JSON output: {e}", path.display()))?;
    if totals.format != TOTALS_FORMAT {
        return Err(format!(
            "{}: format {:?}, expected {TOTALS_FORMAT:?}",
            path.display(),
            totals.format
        ));
    }
    Ok(totals)
}

/// Adds `parts` up, checking that they are shards of one sweep.
pub(crate) fn merge(parts: Vec<Totals>) -> Result<Totals, String> {
    let mut parts = parts.into_iter();
    let mut total = parts.next().ok_or("nothing to merge")?;
    for p in parts {
        if p.seeds != total.seeds || p.setup != total.setup {
            return Err(format!(
                "shards of different sweeps: seeds {:?} {:?} and {:?} {:?}",
                total.seeds, total.setup, p.seeds, p.setup
            ));
        }
        total.shards.extend(p.shards);
        total.runs += p.runs;
        total.sim_ms += p.sim_ms;
        total.wall_ms += p.wall_ms;
        total.requests += p.requests;
        total.traces ^= p.traces;
        for (e, n) in p.eras {
            *total.eras.entry(e).or_default() += n;
        }
        for (o, n) in p.outcomes {
            *total.outcomes.entry(o).or_default() += n;
        }
        for (rule, c) in p.violations {
            total
                .violations
                .entry(rule)
                .and_modify(|t| t.runs += c.runs)
                .or_insert(c);
        }
        total.failing.extend(p.failing);
    }
    let counts: BTreeSet<u64> = total.shards.iter().map(|s| s.1).collect();
    if counts.len() != 1 {
        return Err(format!("shards of different counts: {:?}", total.shards));
    }
    let n = total.shards[0].1;
    let indices: BTreeSet<u64> = total.shards.iter().map(|s| s.0).collect();
    if indices.len() != total.shards.len() {
        return Err(format!("a shard appears twice: {:?}", total.shards));
    }
    let missing: Vec<String> = (1..=n)
        .filter(|k| !indices.contains(k))
        .map(|k| format!("{k}/{n}"))
        .collect();
    if !missing.is_empty() {
        return Err(format!("shards missing: {}", missing.join(", ")));
    }
    total.shards.sort_unstable();
    total
        .failing
        .sort_by(|a, b| (a.seed, &a.transport).cmp(&(b.seed, &b.transport)));
    Ok(total)
}

pub fn run(args: &Args) -> ExitCode {
    let parts: Result<Vec<Totals>, String> = args.files.iter().map(read).collect();
    let total = match parts.and_then(merge) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mcp-sim merge: {e}");
            return ExitCode::from(Exit::Usage);
        }
    };
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string(&total).expect("totals serialize")
        ),
        Format::Text => {
            println!(
                "merge: seeds {}..{}, {} shards, {}",
                total.seeds.0,
                total.seeds.1,
                total.shards.len(),
                total.setup
            );
            print!("{}", total.text());
        }
        Format::Junit => print!("{}", total.junit("mcp-sim merge")),
        Format::Github => print!("{}", total.github()),
    }
    if total.failing.is_empty() {
        ExitCode::from(Exit::Pass)
    } else {
        ExitCode::from(Exit::Broken)
    }
}
