//! `check-proxy --virtual`: a real intermediary (the command after `--`) run by seed under
//! the virtual clock, both of its hops virtual, through the library's
//! `mcp_sim::virtual_bridge`. With `--seeds A..B` a sweep (FAIL lines with digests, replay
//! lines); with `--seed S` alone one seed, its digest, verdict and report. The schedule's
//! flags are the probe's, as for a live `check-proxy`. This file reads the flags and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use mcp_sim::lanes::live::probe::ProbeConfig;
use mcp_sim::lanes::virtual_peer::{PeerCommand, Runtime, ServiceModel};
use mcp_sim::model::ServerEras;
use mcp_sim::model::Transport;
use mcp_sim::sweep::report::{summary_text_with, write_report_with};
use mcp_sim::sweep::Totals;
use mcp_sim::virtual_bridge::{calibrate_bridge, expand_virtual, judge_bridge_seed, BridgePlan};
use mcp_sim::virtual_run::VirtualPlan;

use super::virtual_peer::{
    add_run, calibration_line, fail, finish_replay, heading, peer_log_at, print_totals, run_seeds,
    seed_run, start_peer_logged, start_peers,
};
use crate::args::{parse_range, Format};

/// The flags of `check-proxy --virtual`.
#[derive(clap::Args, Clone)]
pub(crate) struct VirtualBridgeOptions {
    /// Run the intermediary (`python bridge.py ARGS`, `python -m package ARGS`, `node
    /// bridge.js ARGS`) under the simulation's virtual clock, both of its hops virtual: the
    /// server it starts and the URL it connects to are the reference server. `--seed S` runs
    /// one seed; `--seeds A..B` sweeps.
    #[arg(long = "virtual")]
    pub(crate) on: bool,
    /// With `--virtual`: sweep this seed range `A..B` (B excluded).
    #[arg(long, requires = "on", value_parser = parse_range)]
    seeds: Option<(u64, u64)>,
    /// With `--virtual --seeds`: worker processes (each seed is independent; results do not
    /// depend on this).
    #[arg(long, requires = "seeds", default_value_t = 1)]
    jobs: usize,
    /// With `--virtual`: write a report (trace, diagram, summary) for each failing seed here.
    #[arg(long, requires = "on", default_value = "target/mcp-sim-reports")]
    report_dir: PathBuf,
    /// With `--virtual`: give each input the intermediary handles a seeded service time of
    /// this mean, in µs (races by seed; Node.js's in whole ms). Off by default.
    #[arg(long, requires = "on")]
    service_us: Option<u64>,
    /// With `--virtual`: draw at each input whether the intermediary's timers due at its
    /// very instant fire before it (races by seed). Off by default.
    #[arg(long, requires = "on")]
    shuffle_ties: bool,
    /// With `--virtual`: run each seed twice and report a pair whose traces differ as
    /// `not-replayable` (never a finding).
    #[arg(long, requires = "on")]
    verify: bool,
    /// With `--virtual`: write the intermediary's stderr here, one file per job with `.N`
    /// added (default: `virtual-peer.stderr` in the report folder).
    #[arg(long, requires = "on")]
    peer_log: Option<PathBuf>,
}

/// What the rest of `check-proxy`'s flags say, for a virtual run.
pub(crate) struct BridgeFlags<'a> {
    pub(crate) probe: ProbeConfig,
    pub(crate) front_url: Option<&'a str>,
    pub(crate) upstream_era: ServerEras,
    pub(crate) format: Format,
    pub(crate) trace: Option<&'a Path>,
    pub(crate) command: &'a [String],
}

/// The plan and the program from the flags; errors name the flag.
fn plan(
    options: &VirtualBridgeOptions,
    flags: &BridgeFlags<'_>,
) -> Result<(BridgePlan, PeerCommand), String> {
    let p = &flags.probe;
    if p.stall_percent > 0 {
        return Err("--stall-percent: a virtual front has no stalls yet (a live check's)".into());
    }
    let transport = match flags.front_url {
        Some(_) => Transport::Http,
        None => Transport::Stdio,
    };
    let service = (options.service_us.is_some() || options.shuffle_ties).then(|| ServiceModel {
        mean_us: options.service_us.unwrap_or(0),
        shuffle_ties: options.shuffle_ties,
    });
    let plan = VirtualPlan {
        transport,
        connect: p.connect,
        tool: p.tool.clone(),
        arguments: p.arguments.clone(),
        calls: p.calls,
        timeout_ms: p.timeout_ms,
        max_total_ms: p.max_total_ms,
        cancel_percent: p.cancel_percent,
        cancel_within_ms: p.cancel_within_ms,
        latency_ms: p.latency_ms,
        proxy: p.proxy,
        reset_percent: p.reset_percent,
        restarts: p.restarts,
        // The intermediary's own Host/Origin checks are `probe --url`'s to judge.
        origin_check: false,
        service,
    };
    plan.validate()?;
    let words = expand_virtual(flags.command)?;
    let first = words.first().map(Path::new).and_then(Path::file_name);
    let go = first
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "go" || n.ends_with(".test"));
    let command = match go {
        true => None,
        false => Some(PeerCommand::parse(&words).map_err(|e| e.to_string())?),
    };
    let Some(command) = command.filter(|c| c.runtime() != Runtime::Go) else {
        return Err(
            "--virtual runs Python and Node.js intermediaries (a Go test's bubble cannot give \
             its program a virtual server process or connection)"
                .into(),
        );
    };
    let bridge = BridgePlan {
        plan,
        upstream: flags.upstream_era,
    };
    Ok((bridge, command))
}

/// The `check-proxy --virtual` line that runs `seed` again.
fn replay_line(
    plan: &BridgePlan,
    options: &VirtualBridgeOptions,
    flags: &BridgeFlags<'_>,
    seed: u64,
) -> String {
    let mut words: Vec<String> = ["mcp-sim", "check-proxy", "--virtual", "--seed"]
        .map(String::from)
        .to_vec();
    words.push(seed.to_string());
    // The plan's flags are the sweep's (its `--era` words are the probe's): the front is
    // --front-url here, and the origin check is always off.
    let mut it = plan.plan.flags().into_iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "--transport" => {
                it.next();
            }
            "--no-origin-check" => {}
            _ => words.push(w),
        }
    }
    if let Some(url) = flags.front_url {
        words.extend(["--front-url".into(), url.into()]);
    }
    if flags.upstream_era != ServerEras::Both {
        words.extend(["--upstream-era".into(), flags.upstream_era.word().into()]);
    }
    if options.verify {
        words.push("--verify".into());
    }
    words.push("--".into());
    words.extend(flags.command.iter().cloned());
    words
        .iter()
        .map(|w| mcp_sim::lanes::live::check_proxy::shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `mcp-sim check-proxy --virtual`.
pub(crate) fn run(options: &VirtualBridgeOptions, flags: &BridgeFlags<'_>) -> ExitCode {
    let (plan, command) = match plan(options, flags) {
        Ok(p) => p,
        Err(e) => return fail("check-proxy", e),
    };
    match options.seeds {
        Some(seeds) => sweep(options, flags, &plan, &command, seeds),
        None => one_seed(options, flags, &plan, &command, flags.probe.seed),
    }
}

fn sweep(
    options: &VirtualBridgeOptions,
    flags: &BridgeFlags<'_>,
    plan: &BridgePlan,
    command: &PeerCommand,
    (a, b): (u64, u64),
) -> ExitCode {
    let start = Instant::now();
    let report_dir = &options.report_dir;
    let log_base = options.peer_log.as_deref();
    let mut peers = match start_peers(command, log_base, report_dir, options.jobs, (a, b)) {
        Ok(p) => p,
        Err(e) => return fail("check-proxy", e),
    };
    let natural = match calibrate_bridge(plan, &mut peers[0]) {
        Ok(n) => n,
        Err(e) => return fail("check-proxy", e),
    };
    if matches!(flags.format, Format::Text) {
        let what = format!("virtual intermediary {}", peers[0].runtime());
        let jobs = peers.len();
        println!(
            "{}",
            heading("check-proxy", (a, b), &what, command, jobs, options.verify)
        );
        println!("{}", calibration_line(&plan.plan, natural));
        println!(
            "intermediary's stderr: {}",
            peer_log_at(options.peer_log.as_deref(), report_dir, 0).display()
        );
    }
    let results = run_seeds(&mut peers, (a, b), |peer, seed| {
        judge_bridge_seed(plan, seed, natural, peer, options.verify)
    });
    let mut totals = Totals::empty(
        (a, b),
        (1, 1),
        format!("check-proxy --virtual {}", plan.plan.flags().join(" "))
            .trim_end()
            .to_string(),
        results.len() as u64,
        start.elapsed().as_millis() as u64,
    );
    for (seed, r) in &results {
        let v = match r {
            Ok(v) => v,
            Err(e) => return fail("check-proxy", format!("seed {seed}: {e}")),
        };
        let replay = replay_line(plan, options, flags, *seed);
        crate::args::report_judge_defects(&v.judged.verdict);
        add_run(&mut totals, *seed, v, &replay, report_dir);
    }
    print_totals(&totals, flags.format, "mcp-sim check-proxy --virtual");
    totals.exit().into()
}

fn one_seed(
    options: &VirtualBridgeOptions,
    flags: &BridgeFlags<'_>,
    plan: &BridgePlan,
    command: &PeerCommand,
    seed: u64,
) -> ExitCode {
    let report_dir = &options.report_dir;
    let log = peer_log_at(options.peer_log.as_deref(), report_dir, 0);
    let mut peer = match start_peer_logged(command, &log) {
        Ok(p) => p,
        Err(e) => return fail("check-proxy", e),
    };
    let natural = match calibrate_bridge(plan, &mut peer) {
        Ok(n) => n,
        Err(e) => return fail("check-proxy", e),
    };
    println!(
        "virtual intermediary {} ({})",
        peer.runtime(),
        command.words().join(" ")
    );
    println!("{}", calibration_line(&plan.plan, natural));
    let v = match judge_bridge_seed(plan, seed, natural, &mut peer, options.verify) {
        Ok(v) => v,
        Err(e) => return fail("check-proxy", e),
    };
    let replay = replay_line(plan, options, flags, seed);
    crate::args::report_judge_defects(&v.judged.verdict);
    let r = seed_run(seed, &v);
    let line = VirtualPlan::describe(&v.scenario);
    print!("{}", summary_text_with(&r, &replay, &line));
    println!(
        "upstream: {} tool calls reached the reference server",
        mcp_sim::virtual_bridge::calls_upstream(&v.judged.run.trace)
    );
    for (t, e) in &v.escapes {
        println!("escape at {t}: {e}");
    }
    if let Some(path) = flags.trace {
        if let Err(e) = std::fs::write(path, v.judged.run.trace.to_jsonl()) {
            return fail(
                "check-proxy",
                format!("cannot write {}: {e}", path.display()),
            );
        }
    }
    let clean = v.judged.verdict.is_clean() && v.judged.crash.is_none();
    finish_replay(
        &v.status,
        "no tools/call reached the upstream and ended with a result (check --tool and --args)",
        (clean, v.fails()),
        || write_report_with(report_dir, &r, &replay, &line),
    )
}
