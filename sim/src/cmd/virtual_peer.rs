//! `sweep --virtual` and `replay --virtual`: a real program (the command after `--`) run by
//! seed under the virtual clock, through the library's virtual peers
//! (`mcp_sim::virtual_run`). This file reads the flags and prints; the runs are the library's.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use mcp_sim::exit::Exit;
use mcp_sim::lanes::live::check_proxy::shell_quote;
use mcp_sim::lanes::virtual_peer::{PeerCommand, ServiceModel, VirtualError, VirtualPeer};
use mcp_sim::model::Transport;
use mcp_sim::repro::EraChoice;
use mcp_sim::scenario::ProxyChoice;
use mcp_sim::sweep::report::{summary_text_with, write_report_with};
use mcp_sim::sweep::virtual_seeds::{self, Seeded};
use mcp_sim::sweep::{SeedRun, Totals};
use mcp_sim::virtual_run::{calibrate, judge_seed, Status, VirtualJudged, VirtualPlan};
use serde_json::Value;

use crate::args::{EraArg, Format, Overrides, TransportArg};

/// The flags of a virtual run (with `--virtual`); `--transport`, `--era` and `--proxy` are
/// the sweep's own.
#[derive(clap::Args, Clone)]
pub(crate) struct VirtualOptions {
    /// Run a real program (the command after `--`: `python server.py ARGS`) as the server,
    /// under the simulation's virtual clock; `--era` is then `auto` (the default), `modern`,
    /// `legacy` or a revision's date, as for `probe`.
    #[arg(long = "virtual", requires = "command")]
    pub(crate) on: bool,
    /// Run a real *client* program (the command after `--`: `python client.py ARGS`) under
    /// the simulation's virtual clock: whatever server it starts on stdio is the reference
    /// server (as `serve` runs it: both eras, or one with `--era modern|legacy`), each seed
    /// drawing the latency between them.
    #[arg(long = "virtual-client", requires = "command", conflicts_with = "on")]
    pub(crate) client: bool,
    /// With `--virtual-client`: the timeout policy the client declares (as `serve
    /// --client-policy`: a preset, or `timeout=MS[,reset][,max=MS]`, per method with `;`).
    #[arg(long, requires = "client")]
    pub(crate) client_policy: Option<String>,
    /// With `--virtual-client`: a run stops at this virtual instant, in ms (default 600000).
    #[arg(long, requires = "client")]
    pub(crate) bound_ms: Option<u64>,
    /// With `--virtual`: the tool to call (default `slow_op`).
    #[arg(long, requires = "on")]
    tool: Option<String>,
    /// With `--virtual`: the tool's arguments, a JSON object (default `{}`).
    #[arg(long, requires = "on")]
    args: Option<String>,
    /// With `--virtual`: calls per run (default 6).
    #[arg(long, requires = "on")]
    calls: Option<u32>,
    /// With `--virtual`: each call's idle timeout in ms, which valid progress restarts (default 5000).
    #[arg(long, requires = "on")]
    timeout_ms: Option<u64>,
    /// With `--virtual`: each call's hard maximum in ms (default 30000).
    #[arg(long, requires = "on")]
    max_total_ms: Option<u64>,
    /// With `--virtual`: percentage of calls the application cancels (default 34).
    #[arg(long, requires = "on")]
    cancel_percent: Option<u64>,
    /// With `--virtual`: cancels fall within this many ms of their call's start (default: a
    /// tenth to two fifths of a calibrated call).
    #[arg(long, requires = "on")]
    cancel_within_ms: Option<u64>,
    /// With `--virtual` or `--virtual-client`: one-way latency in ms, `A..B` (default: the
    /// seed's range).
    #[arg(long, requires = "command", value_parser = parse_ms_range)]
    pub(crate) latency_ms: Option<(u64, u64)>,
    /// With `--virtual --transport http`: percentage of calls whose stream is reset.
    #[arg(long, requires = "on")]
    reset_percent: Option<u64>,
    /// With `--virtual --transport stdio`: kill and restart the program this many times
    /// between calls.
    #[arg(long, requires = "on")]
    restarts: Option<u32>,
    /// With `--virtual`: give each input the program handles a seeded service time of this
    /// mean, in µs (its loop is busy that long: races a real machine runs into, by seed;
    /// CPython and Node.js programs, Node.js's in whole ms). Off by default.
    #[arg(long, requires = "on")]
    service_us: Option<u64>,
    /// With `--virtual`: draw at each input whether the program's timers due at its very
    /// instant fire before it (races by seed; CPython and Node.js programs). Off by default.
    #[arg(long, requires = "on")]
    shuffle_ties: bool,
    /// With `--virtual --transport http`: leave out the two POSTs with a foreign `Origin` and
    /// `Host` sent after each run (`origin-validated`), as the probe's `--no-origin-check`.
    #[arg(long, requires = "on")]
    no_origin_check: bool,
    /// With `--virtual` or `--virtual-client`: run each seed twice and report a pair whose
    /// traces differ as `not-replayable` (never a finding).
    #[arg(long, requires = "command")]
    pub(crate) verify: bool,
    /// With `--virtual` or `--virtual-client`: write the program's stderr here, one file per
    /// job with `.N` added (default: `virtual-peer.stderr` in the report folder).
    #[arg(long, requires = "command")]
    pub(crate) peer_log: Option<PathBuf>,
    /// The program to run virtually, after `--`.
    #[arg(last = true, num_args = 1..)]
    pub(crate) command: Vec<String>,
}

/// `A..B` in ms.
fn parse_ms_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?} is not a range A..B"))?;
    let a = a
        .trim()
        .parse()
        .map_err(|_| format!("bad start in {s:?}"))?;
    let b = b.trim().parse().map_err(|_| format!("bad end in {s:?}"))?;
    Ok((a, b))
}

/// The plan and the program from the flags; errors name the flag.
fn plan(
    options: &VirtualOptions,
    overrides: &Overrides,
) -> Result<(VirtualPlan, PeerCommand), String> {
    if overrides.mutant.is_some() {
        return Err("--mutant: a virtual run's server is the program, not a mutant".into());
    }
    let d = VirtualPlan::default();
    let transport = match overrides.transport {
        TransportArg::Seed | TransportArg::Stdio => Transport::Stdio,
        TransportArg::Http => Transport::Http,
        TransportArg::Both => {
            return Err("--transport: pick stdio or http for a virtual run".into())
        }
    };
    let connect = match overrides.era {
        EraArg::Auto | EraArg::One(EraChoice::FromSeed) => mcp_sim::Connect::AUTO,
        EraArg::One(EraChoice::Fixed(era)) => mcp_sim::Connect::Pinned(era),
        EraArg::Both => {
            return Err(
                "--era: pick one era for a virtual run (auto, modern, legacy or a date)".into(),
            )
        }
    };
    let proxy = match overrides.proxy()? {
        ProxyChoice::FromSeed | ProxyChoice::Direct => None,
        ProxyChoice::Fixed(p) => Some(p),
        other => {
            return Err(format!(
                "--proxy {other}: a virtual run takes an idle-timeout preset"
            ))
        }
    };
    let arguments = match options.args.as_deref() {
        None => d.arguments.clone(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err("--args must be a JSON object".into()),
            Err(e) => return Err(format!("--args is not JSON: {e}")),
        },
    };
    let plan = VirtualPlan {
        transport,
        connect,
        tool: options.tool.clone().unwrap_or(d.tool),
        arguments,
        calls: options.calls.unwrap_or(d.calls),
        timeout_ms: options.timeout_ms.unwrap_or(d.timeout_ms),
        max_total_ms: options.max_total_ms.unwrap_or(d.max_total_ms),
        cancel_percent: options.cancel_percent.unwrap_or(d.cancel_percent),
        cancel_within_ms: options.cancel_within_ms,
        latency_ms: options.latency_ms,
        proxy,
        reset_percent: options.reset_percent.unwrap_or(d.reset_percent),
        restarts: options.restarts.unwrap_or(d.restarts),
        origin_check: !options.no_origin_check,
        service: (options.service_us.is_some() || options.shuffle_ties).then(|| ServiceModel {
            mean_us: options.service_us.unwrap_or(0),
            shuffle_ties: options.shuffle_ties,
        }),
    };
    plan.validate()?;
    let command = PeerCommand::parse(&options.command).map_err(|e| e.to_string())?;
    if plan.service.is_some() && !command.takes_service_time() {
        return Err(
            "--service-us and --shuffle-ties: the CPython and Node.js shims take a service \
             time, a Go bubble does not (it runs ahead by itself)"
                .into(),
        );
    }
    Ok((plan, command))
}

/// The `mcp-sim replay` line of `seed`.
fn replay_line(plan: &VirtualPlan, command: &PeerCommand, seed: u64, verify: bool) -> String {
    replay_words("--virtual", seed, plan.flags(), verify, command)
}

/// `mcp-sim replay --seed S MODE FLAGS [--verify] -- COMMAND`, quoted for a shell.
pub(crate) fn replay_words(
    mode: &str,
    seed: u64,
    flags: Vec<String>,
    verify: bool,
    command: &PeerCommand,
) -> String {
    let mut words: Vec<String> = vec![
        "mcp-sim".into(),
        "replay".into(),
        "--seed".into(),
        seed.to_string(),
        mode.into(),
    ];
    words.extend(flags);
    if verify {
        words.push("--verify".into());
    }
    words.push("--".into());
    words.extend(command.words());
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The program's stderr log of job `k`: `--peer-log` or the report folder's
/// `virtual-peer.stderr`, with `.k` added.
pub(crate) fn peer_log(options: &VirtualOptions, report_dir: &Path, k: usize) -> PathBuf {
    peer_log_at(options.peer_log.as_deref(), report_dir, k)
}

/// The stderr log of job `k`: `base`, or the report folder's `virtual-peer.stderr`, with `.k`
/// added.
pub(crate) fn peer_log_at(base: Option<&Path>, report_dir: &Path, k: usize) -> PathBuf {
    let base = match base {
        Some(p) => p.to_path_buf(),
        None => report_dir.join("virtual-peer.stderr"),
    };
    let mut name = base.into_os_string();
    name.push(format!(".{k}"));
    PathBuf::from(name)
}

pub(crate) fn start_peer(
    options: &VirtualOptions,
    command: &PeerCommand,
    report_dir: &Path,
    k: usize,
) -> Result<VirtualPeer, VirtualError> {
    start_peer_logged(command, &peer_log(options, report_dir, k))
}

/// Starts the shim for `command`, its program's stderr into `log`.
pub(crate) fn start_peer_logged(
    command: &PeerCommand,
    log: &Path,
) -> Result<VirtualPeer, VirtualError> {
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| VirtualError::Start(format!("cannot make {}: {e}", dir.display())))?;
    }
    VirtualPeer::start(command, Some(log))
}

pub(crate) fn fail(cmd: &str, e: impl std::fmt::Display) -> ExitCode {
    eprintln!("mcp-sim {cmd}: {e}");
    ExitCode::from(Exit::Usage)
}

/// `mcp-sim sweep --virtual`.
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
    let natural = match calibrate(&plan, &mut peers[0]) {
        Ok(n) => n,
        Err(e) => return fail("sweep", e),
    };
    if matches!(format, Format::Text) {
        let what = format!("virtual {}", peers[0].runtime());
        println!(
            "{}",
            heading("sweep", seeds, &what, &command, peers.len(), options.verify)
        );
        println!("{}", calibration_line(&plan, natural));
        println!(
            "program's stderr: {}",
            peer_log(options, report_dir, 0).display()
        );
    }
    let results = run_seeds(&mut peers, seeds, |peer, seed| {
        judge_seed(&plan, seed, natural, peer, options.verify)
    });
    let setup = format!("--virtual {}", plan.flags().join(" "));
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
        let replay = replay_line(&plan, &command, *seed, options.verify);
        add_run(&mut totals, *seed, v, &replay, report_dir);
    }
    print_totals(&totals, format, "mcp-sim sweep --virtual");
    totals.exit().into()
}

/// One shim per job (no more jobs than seeds), each program's stderr in its own log.
pub(crate) fn start_peers(
    command: &PeerCommand,
    log_base: Option<&Path>,
    report_dir: &Path,
    jobs: usize,
    (a, b): (u64, u64),
) -> Result<Vec<VirtualPeer>, VirtualError> {
    let jobs = jobs.max(1).min(b.saturating_sub(a).max(1) as usize);
    (0..jobs)
        .map(|k| start_peer_logged(command, &peer_log_at(log_base, report_dir, k)))
        .collect()
}

/// A sweep's first line: `CMD: seeds A..B, N runs, WHAT (COMMAND), J job(s)`.
pub(crate) fn heading(
    cmd: &str,
    (a, b): (u64, u64),
    what: &str,
    command: &PeerCommand,
    jobs: usize,
    verify: bool,
) -> String {
    format!(
        "{cmd}: seeds {a}..{b}, {} runs, {what} ({}), {jobs} job(s){}",
        b.saturating_sub(a),
        command.words().join(" "),
        if verify { ", each run twice" } else { "" }
    )
}

/// Runs `judge` on every seed of `seeds`, one worker per peer, with a progress bar; the
/// results in seed order.
pub(crate) fn run_seeds<T: Send>(
    peers: &mut [VirtualPeer],
    seeds: (u64, u64),
    judge: impl Fn(&mut VirtualPeer, u64) -> Result<T, VirtualError> + Sync,
) -> Vec<(u64, Result<T, VirtualError>)> {
    let bar = ProgressBar::new(seeds.1.saturating_sub(seeds.0));
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {per_sec} eta {eta}")
            .expect("valid template"),
    );
    let results = virtual_seeds::run_seeds(peers, seeds, judge, &|| bar.inc(1));
    bar.finish_and_clear();
    results
}

/// Prints a sweep's totals in `format` (`title` names the JUnit suite).
pub(crate) fn print_totals(totals: &Totals, format: Format, title: &str) {
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string(totals).expect("totals serialize")
        ),
        Format::Text => print!("{}", totals.text()),
        Format::Junit => print!("{}", totals.junit(title)),
        Format::Github => print!("{}", totals.github()),
    }
}

pub(crate) fn calibration_line(plan: &VirtualPlan, natural: Option<u64>) -> String {
    let (lo, hi) = plan.cancel_window(natural);
    match natural {
        Some(ms) => format!("calibration: a call takes {ms} ms; cancels fall {lo}..{hi} ms after their call's start"),
        None => format!("calibration: no call ended with a result; cancels fall {lo}..{hi} ms after their call's start"),
    }
}

/// Adds one run to the totals: a judged one's counts and verdict, a not-replayable one's
/// reason (its violations are not counted: nothing it shows can be trusted).
pub(crate) fn add_run(
    totals: &mut Totals,
    seed: u64,
    v: &VirtualJudged,
    replay: &str,
    report_dir: &Path,
) {
    let r = seed_run(seed, v);
    let line = VirtualPlan::describe(&v.scenario);
    let seeded = Seeded {
        seed,
        transport: v.scenario.transport,
        judged: &v.judged,
        status: &v.status,
        fails: v.fails(),
    };
    totals.count_seeded(&seeded, replay, || {
        write_report_with(report_dir, &r, replay, &line)
    });
}

pub(crate) fn seed_run(seed: u64, v: &VirtualJudged) -> SeedRun {
    SeedRun {
        seed,
        transport: Some(v.scenario.transport),
        era: EraChoice::Fixed(v.scenario.era),
        scenario: v.scenario.clone(),
        judged: v.judged.clone(),
    }
}

/// `mcp-sim replay --seed S --virtual`: the seed's run again, its digest, its verdict.
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
    let natural = match calibrate(&plan, &mut peer) {
        Ok(n) => n,
        Err(e) => return fail("replay", e),
    };
    println!("virtual {} ({})", peer.runtime(), command.words().join(" "));
    println!("{}", calibration_line(&plan, natural));
    let v = match judge_seed(&plan, seed, natural, &mut peer, options.verify) {
        Ok(v) => v,
        Err(e) => return fail("replay", e),
    };
    let replay = replay_line(&plan, &command, seed, options.verify);
    let r = seed_run(seed, &v);
    let line = VirtualPlan::describe(&v.scenario);
    print!("{}", summary_text_with(&r, &replay, &line));
    for (t, e) in &v.escapes {
        println!("escape at {t}: {e}");
    }
    if print_trace {
        print!("{}", v.judged.run.trace.to_jsonl());
    }
    let clean = v.judged.verdict.is_clean() && v.judged.crash.is_none();
    finish_replay(
        &v.status,
        "no tools/call ended with a result (check --tool and --args)",
        (clean, v.fails()),
        || write_report_with(report_dir, &r, &replay, &line),
    )
}

/// A replay's last lines and exit code: 3 when not replayable or nothing was exercised
/// (`inconclusive` says why); else a verdict that is not `clean` gets its report (written by
/// `write`) and one that `fails` exits 1.
pub(crate) fn finish_replay(
    status: &Status,
    inconclusive: &str,
    (clean, fails): (bool, bool),
    write: impl FnOnce() -> std::io::Result<PathBuf>,
) -> ExitCode {
    match status {
        Status::NotReplayable(why) => {
            println!("not-replayable: {why}");
            ExitCode::from(Exit::Inconclusive)
        }
        Status::Inconclusive => {
            println!("inconclusive: {inconclusive}");
            ExitCode::from(Exit::Inconclusive)
        }
        Status::Judged => {
            if !clean {
                match write() {
                    Ok(folder) => println!("report written to {}", folder.display()),
                    Err(e) => eprintln!("mcp-sim replay: cannot write the report: {e}"),
                }
            }
            if fails {
                ExitCode::from(Exit::Broken)
            } else {
                ExitCode::from(Exit::Pass)
            }
        }
    }
}
