//! `mcp-sim rules`: the oracle's rule catalog as a Markdown table.

use std::process::ExitCode;

pub fn run() -> ExitCode {
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
