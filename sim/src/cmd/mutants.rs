//! `mcp-sim mutants`: hunt every mutant (a real SDK bug) until the oracle flags it, and print
//! the mutation score.

use std::process::ExitCode;
use std::time::Instant;

use mcp_sim::mutants::{self, Mutant};

use crate::args::{LaneOptions, Overrides, TransportArg};

#[derive(clap::Args)]
pub struct Args {
    /// Seeds to try per mutant before it counts as surviving.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    #[command(flatten)]
    lane: LaneOptions,
    /// Hunt only these mutants (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

pub fn run(args: &Args) -> ExitCode {
    let mut chosen = Vec::new();
    for name in &args.only {
        match Mutant::from_name(name) {
            Some(m) => chosen.push(m),
            None => {
                eprintln!("mcp-sim mutants: unknown mutant {name:?}");
                return ExitCode::from(2);
            }
        }
    }
    if chosen.is_empty() {
        chosen = mutants::ALL.to_vec();
    }
    // Header mutants need POSTs with headers, which only the turmoil lane has.
    let memory = matches!(args.lane.lane(), mcp_sim::lanes::Lane::Memory);
    let skipped: Vec<Mutant> = chosen
        .iter()
        .copied()
        .filter(|m| memory && m.needs_headers())
        .collect();
    chosen.retain(|m| !skipped.contains(m));
    for m in &skipped {
        println!(
            "mutants: {} needs HTTP headers: hunt it on the turmoil lane",
            m.info().name
        );
    }
    println!(
        "mutants: {} mutants, up to {} seeds each, {}",
        chosen.len(),
        args.seeds,
        args.lane.describe()
    );
    println!("| mutant | real bug | caught by | seeds to first detection | replay |");
    println!("| --- | --- | --- | ---: | --- |");
    let start = Instant::now();
    let mut survivors = Vec::new();
    let mut reference_failures = Vec::new();
    for &m in &chosen {
        let hunt = mutants::hunt(m, 0..args.seeds, args.lane.lane());
        let info = m.info();
        match &hunt.kill {
            Some(kill) => {
                let overrides = Overrides {
                    lane: args.lane.clone(),
                    transport: TransportArg::Seed,
                    proxy: None,
                    mutant: Some(info.name.to_string()),
                };
                println!(
                    "| `{}` | {} | {} | {} | `{}` |",
                    info.name,
                    info.bug,
                    kill.rules.join(", "),
                    kill.seeds_run,
                    overrides.replay_line(kill.seed, None)
                );
            }
            None => {
                println!("| `{}` | {} | SURVIVED | - | - |", info.name, info.bug);
                survivors.push(info.name);
            }
        }
        reference_failures.extend(
            hunt.reference_failures
                .iter()
                .map(|(s, r)| (info.name, *s, r.clone())),
        );
    }
    let killed = chosen.len() - survivors.len();
    println!();
    println!(
        "mutation score: {killed}/{} killed ({:.0}%), {:.1} s",
        chosen.len(),
        100.0 * killed as f64 / chosen.len() as f64,
        start.elapsed().as_secs_f64()
    );
    for (name, seed, rules) in &reference_failures {
        println!(
            "REFERENCE FAILS seed {seed} (hunting {name}): {}",
            rules.join(", ")
        );
    }
    if !survivors.is_empty() {
        println!("survivors: {}", survivors.join(", "));
    }
    if survivors.is_empty() && reference_failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
