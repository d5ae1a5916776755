//! `sweep --virtual-client` and `replay --virtual-client`: a real client program (the
//! command after `--`) run by seed under the virtual clock against the reference server,
//! through the library's virtual peers (`mcp_sim::virtual_client`). This file reads the flags
//! and prints; the runs are the library's.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use mcp_sim::lanes::live::serve::ServeConfig;
use mcp_sim::lanes::virtual_peer::{PeerCommand, Runtime};
use mcp_sim::model::{ClientPolicies, ServerEras, Transport};
use mcp_sim::repro::EraChoice;
use mcp_sim::sweep::report::{judged_summary, write_judged_report};
use mcp_sim::sweep::virtual_seeds::Seeded;
use mcp_sim::sweep::Totals;
use mcp_sim::virtual_client::{judge_client_seed, ClientJudged, ClientPlan, DEFAULT_BOUND_MS};
use mcp_sim::Era;

use super::virtual_peer::{
    fail, finish_replay, heading, peer_log, print_totals, replay_words, run_seeds, start_peer,
    start_peers, VirtualOptions,
};
use crate::args::{EraArg, Format, Overrides, TransportArg};

/// The plan and the program from the flags; errors name the flag.
fn plan(
    options: &VirtualOptions,
    overrides: &Overrides,
) -> Result<(ClientPlan, PeerCommand), String> {
    if overrides.mutant.is_some() {
        return Err("--mutant: a virtual client's server is the reference server".into());
    }
    if !matches!(
        overrides.transport,
        TransportArg::Seed | TransportArg::Stdio
    ) {
        return Err(
            "--transport: a virtual client reaches its server on stdio (the process it starts)"
                .into(),
        );
    }
    let client_policy = match &options.client_policy {
        Some(spec) => {
            Some(ClientPolicies::from_spec(spec).map_err(|e| format!("--client-policy: {e}"))?)
        }
        None => None,
    };
    // The server's eras: both (the client decides, the default), or one, as `serve --era`.
    let eras = match overrides.era {
        EraArg::One(EraChoice::Fixed(Era::Modern)) => ServerEras::ModernOnly,
        EraArg::One(EraChoice::Fixed(Era::Legacy(_))) => ServerEras::LegacyOnly {
            ignores_discover: false,
        },
        EraArg::One(EraChoice::FromSeed) | EraArg::Auto | EraArg::Both => ServerEras::Both,
    };
    let plan = ClientPlan {
        latency_ms: options.latency_ms,
        serve: ServeConfig {
            client_policy,
            eras,
            ..ServeConfig::default()
        },
        bound_ms: options.bound_ms.unwrap_or(DEFAULT_BOUND_MS),
        ..ClientPlan::default()
    };
    plan.validate()?;
    let command = PeerCommand::parse(&options.command).map_err(|e| e.to_string())?;
    if command.runtime() == Runtime::Go {
        return Err(
            "--virtual-client runs Python and Node.js clients (a Go test's bubble cannot \
                    give its client a virtual server process)"
                .into(),
        );
    }
    Ok((plan, command))
}

/// The flags that make `plan` again, for replay lines.
fn flags(plan: &ClientPlan, options: &VirtualOptions) -> Vec<String> {
    let mut words = Vec::new();
    if let Some(spec) = &options.client_policy {
        words.push("--client-policy".into());
        words.push(spec.clone());
    }
    match plan.serve.eras {
        ServerEras::ModernOnly => words.extend(["--era".into(), "modern".into()]),
        ServerEras::LegacyOnly { .. } => words.extend(["--era".into(), "legacy".into()]),
        ServerEras::Both => {}
    }
    if let Some((lo, hi)) = plan.latency_ms {
        words.push("--latency-ms".into());
        words.push(format!("{lo}..{hi}"));
    }
    if plan.bound_ms != DEFAULT_BOUND_MS {
        words.push("--bound-ms".into());
        words.push(plan.bound_ms.to_string());
    }
    words
}

fn replay_line(
    plan: &ClientPlan,
    options: &VirtualOptions,
    command: &PeerCommand,
    seed: u64,
) -> String {
    replay_words(
        "--virtual-client",
        seed,
        flags(plan, options),
        options.verify,
        command,
    )
}

/// `mcp-sim sweep --virtual-client`.
pub(crate) fn sweep(
    options: &VirtualOptions,
    overrides: &Overrides,
    seeds: (u64, u64),
    jobs: usize,
    report_dir: &Path,
    format: Format,
) -> ExitCode {
    let (plan, command) = match plan(options, overrides) {
        Ok(p) => p,
        Err(e) => return fail("sweep", e),
    };
    let start = Instant::now();
    let mut peers = match start_peers(
        &command,
        options.peer_log.as_deref(),
        report_dir,
        jobs,
        seeds,
    ) {
        Ok(p) => p,
        Err(e) => return fail("sweep", e),
    };
    if matches!(format, Format::Text) {
        let what = format!("virtual client {}", peers[0].runtime());
        println!(
            "{}",
            heading("sweep", seeds, &what, &command, peers.len(), options.verify)
        );
        println!("{}", policy_line(options));
        println!(
            "program's stderr and stdout: {}",
            peer_log(options, report_dir, 0).display()
        );
    }
    let results = run_seeds(&mut peers, seeds, |peer, seed| {
        judge_client_seed(&plan, seed, peer, options.verify)
    });
    let setup = format!("--virtual-client {}", flags(&plan, options).join(" "));
    let mut totals = Totals::empty(
        seeds,
        (1, 1),
        setup.trim_end().to_string(),
        results.len() as u64,
        start.elapsed().as_millis() as u64,
    );
    for (seed, r) in &results {
        let v = match r {
            Ok(v) => v,
            Err(e) => return fail("sweep", format!("seed {seed}: {e}")),
        };
        let replay = replay_line(&plan, options, &command, *seed);
        add_run(&mut totals, v, &replay, report_dir);
    }
    print_totals(&totals, format, "mcp-sim sweep --virtual-client");
    totals.exit().into()
}

fn policy_line(options: &VirtualOptions) -> String {
    match &options.client_policy {
        Some(spec) => format!("declared client policy: {spec}"),
        None => "declared client policy: none given, so deadlines are not judged".into(),
    }
}

/// Adds one run to the totals, as `sweep --virtual` does.
fn add_run(totals: &mut Totals, v: &ClientJudged, replay: &str, report_dir: &Path) {
    let seeded = Seeded {
        seed: v.seed,
        transport: Transport::Stdio,
        judged: &v.judged,
        status: &v.status,
        fails: v.fails(),
    };
    totals.count_seeded(&seeded, replay, || {
        write_judged_report(
            report_dir,
            v.seed,
            "-client",
            &v.judged,
            replay,
            &v.describe(),
        )
    });
}

/// `mcp-sim replay --seed S --virtual-client`: the seed's run again, its digest, its verdict.
pub(crate) fn replay(
    options: &VirtualOptions,
    overrides: &Overrides,
    seed: u64,
    report_dir: &Path,
    print_trace: bool,
) -> ExitCode {
    let (plan, command) = match plan(options, overrides) {
        Ok(p) => p,
        Err(e) => return fail("replay", e),
    };
    let mut peer = match start_peer(options, &command, report_dir, 0) {
        Ok(p) => p,
        Err(e) => return fail("replay", e),
    };
    println!(
        "virtual client {} ({})",
        peer.runtime(),
        command.words().join(" ")
    );
    println!("{}", policy_line(options));
    let v = match judge_client_seed(&plan, seed, &mut peer, options.verify) {
        Ok(v) => v,
        Err(e) => return fail("replay", e),
    };
    let replay = replay_line(&plan, options, &command, seed);
    print!(
        "{}",
        judged_summary(seed, &v.judged, &replay, &v.describe())
    );
    for argv in &v.spawned {
        println!("server started as: {}", argv.join(" "));
    }
    for (t, e) in &v.escapes {
        println!("escape at {t}: {e}");
    }
    if print_trace {
        print!("{}", v.judged.run.trace.to_jsonl());
    }
    finish_replay(
        &v.status,
        "no tools/call reached the server and was answered or cancelled",
        (v.judged.verdict.is_clean(), v.fails()),
        || {
            write_judged_report(
                report_dir,
                seed,
                "-client",
                &v.judged,
                &replay,
                &v.describe(),
            )
        },
    )
}
