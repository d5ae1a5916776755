//! `mcp-sim probe -- COMMAND ARGS...` / `mcp-sim probe --url URL`: drive a real MCP server
//! with a seeded schedule ([`mcp_sim::lanes::live::probe`]) and judge what it did.
//!
//! Exit codes: 0 clean and exercised, 1 a MUST violation or a server fault, 2 usage error or
//! the server cannot be started or reached, 3 inconclusive (see
//! [`mcp_sim::lanes::live::findings`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mcp_sim::exit::{Exit, FindingKind, Judged, RunEnd, Word};
use mcp_sim::lanes::live::findings::{self, Coverage, Finding};
use mcp_sim::lanes::live::interrupt::Interrupt;
use mcp_sim::lanes::live::probe::{
    self, ProbeConfig, ProbeError, ProbeRun, Target, CALIBRATION_CALLS,
};
use mcp_sim::model::Transport;
use mcp_sim::oracle::{self, OracleConfig, CANCEL_REACTION_MS};
use mcp_sim::report;
use mcp_sim::scenario::ProxyConfig;
use mcp_sim::trace::Trace;
use serde::Serialize;
use serde_json::Value;

use crate::args::{json_violations, oracle_config, Format, JsonViolation, ProfileArg};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub(crate) options: Options,
    /// Probe the Streamable HTTP server at this endpoint (`http://HOST:PORT/PATH`) instead of
    /// starting a command.
    #[arg(long, conflicts_with = "command")]
    url: Option<String>,
    /// Send a recorded client's calls instead of the seeded schedule (a trace of `record`,
    /// `serve`, `probe` or `check-proxy`): each request as recorded, with fresh ids and tokens,
    /// started at its recorded offset (or as long after the answer it followed), cancelled at
    /// its recorded offset from its actual start, under its recorded timeout policy. No
    /// calibration.
    #[arg(long, value_name = "RECORDING", conflicts_with = "scenario")]
    from: Option<std::path::PathBuf>,
    /// `--from` a two-hop recording: the hop whose client to re-send (`front` or `back`).
    #[arg(long, value_enum, requires = "from")]
    hop: Option<crate::args::HopArg>,
    /// `--from`: also compare the new run with the recording (`mcp-sim diff`), on stderr.
    #[arg(long, requires = "from")]
    diff: bool,
    /// The server command and its arguments (after `--`).
    #[arg(required_unless_present = "url", last = true, num_args = 1..)]
    command: Vec<String>,
}

/// The probe's schedule, faults and judging: shared with `check-proxy`, which drives an
/// intermediary's front with them.
#[derive(clap::Args)]
pub(crate) struct Options {
    /// Seed of the schedule (call start times, which calls are cancelled and when, faults).
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// The tool to call.
    #[arg(long, default_value = "slow_op")]
    tool: String,
    /// The tool's arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Number of scheduled `tools/call` requests (after the calibration call).
    #[arg(long, default_value_t = 6)]
    calls: u32,
    /// Idle timeout of each call in ms; valid progress restarts it.
    #[arg(long, default_value_t = 5000)]
    timeout_ms: u64,
    /// Hard maximum of each call in ms, whatever progress arrives.
    #[arg(long, default_value_t = 30_000)]
    max_total_ms: u64,
    /// Percentage of calls the application cancels, at a seeded offset after their start.
    #[arg(long, default_value_t = 34)]
    cancel_percent: u64,
    /// Cancellations fall within this many ms after their call's start. Default: between a
    /// tenth and two fifths of the calibrated duration of a call.
    #[arg(long)]
    cancel_within_ms: Option<u64>,
    /// How long the start-up check (`tools/list`) may wait for the server's first answer,
    /// in ms: an interpreter's start-up is not what the probe judges.
    #[arg(long, default_value_t = 30_000)]
    pub(crate) startup_timeout_ms: u64,
    /// Bound on the whole run in seconds; calls still open then are cancelled.
    #[arg(long, default_value_t = 60)]
    pub(crate) max_seconds: u64,
    /// The era to speak: `auto` (`server/discover`, falling back to `initialize` when the
    /// server refuses it or keeps silent 10 s, as the SDKs' auto mode does), `modern`,
    /// `legacy` (2025-11-25) or a revision's date.
    #[arg(long, default_value = "auto")]
    pub(crate) era: mcp_sim::Connect,
    /// Expected findings, one rule or probe finding (`no-response`, `server-exited`,
    /// `unresponsive-after-cancel`, `liveness-check-unanswered`, `nothing-exercised`) per line: the exit code then fails only on a MUST rule or a fault
    /// the file does not list, or on a listed one that no longer occurs.
    #[arg(long)]
    pub(crate) baseline: Option<PathBuf>,
    /// How long to keep reading after the last outcome, in ms (late messages after a cancel).
    #[arg(long, default_value_t = 1500)]
    drain_ms: u64,
    /// Write the trace (JSON Lines, format v1) to this file.
    #[arg(long)]
    pub(crate) trace: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) live_scenario: super::confirm::ScenarioOptions,
    #[arg(long, value_enum, default_value_t = ProfileArg::Strict)]
    pub(crate) profile: ProfileArg,
    /// Window for inferring the server's observations and for stopping work, in ms.
    #[arg(long, default_value_t = OracleConfig::default().grace_ms)]
    pub(crate) grace_ms: u64,
    /// Output: text lines, or one JSON object with the verdict, coverage, findings and
    /// violations.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    /// Print every trace event as it is recorded (to stderr).
    #[arg(long)]
    verbose: bool,
    /// With `--url`: relay through a local intermediary with the idle timeout, buffering and
    /// gateway status of a preset: `nginx`, `alb`, `cloudflare`, `custom:SECONDS` or
    /// `custom:MSms`.
    #[arg(long, value_parser = parse_proxy)]
    proxy: Option<ProxyConfig>,
    /// With `--url`: the relay's idle timeout in ms. Alone, a plain idle cutter (the same as
    /// `--proxy custom:MSms`); with `--proxy`, that preset with this timeout instead of its
    /// own (nginx's `proxy_read_timeout 10s`, say).
    #[arg(long)]
    proxy_idle_ms: Option<u64>,
    /// With `--url`: the relay delays every post's bytes, each way, by a seeded latency in
    /// this range of ms (`A..B`).
    #[arg(long, value_parser = parse_ms_range)]
    latency_ms: Option<(u64, u64)>,
    /// With `--url`: percentage of posts whose connection the relay resets in the middle of
    /// the response.
    #[arg(long, default_value_t = 0)]
    reset_percent: u64,
    /// stdio: percentage of calls during which the probe stops reading the server's stdout
    /// for a while (back-pressure).
    #[arg(long, default_value_t = 0)]
    stall_percent: u64,
    /// stdio: how long a stall lasts, a range of ms (`A..B`).
    #[arg(long, value_parser = parse_ms_range, default_value = "200..2000")]
    stall_ms: (u64, u64),
    /// stdio: kill and restart the server this many times, between calls; when set, a
    /// server that leaves a liveness check unanswered is restarted too and the run goes on.
    #[arg(long, default_value_t = 0)]
    restarts: u32,
    /// How long the liveness check after each cancel and each timeout (`ping` in the legacy
    /// era, `tools/list` in 2026-07-28) may wait for its answer, in ms.
    #[arg(long, default_value_t = probe::LIVENESS_MS)]
    liveness_ms: u64,
    /// HTTP to a loopback URL: do not check the server's DNS-rebinding protection (by
    /// default, after the run, one request with a foreign `Origin` and one with a foreign
    /// `Host`, judged by `origin-validated`).
    #[arg(long)]
    no_origin_check: bool,
}

fn parse_proxy(s: &str) -> Result<ProxyConfig, String> {
    ProxyConfig::preset(s).ok_or_else(|| {
        format!("unknown proxy {s:?}: nginx, alb, cloudflare, custom:SECONDS or custom:MSms")
    })
}

/// `A..B` in ms, `A <= B`.
fn parse_ms_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?} is not a range A..B"))?;
    let a: u64 = a
        .trim()
        .parse()
        .map_err(|_| format!("bad start in {s:?}"))?;
    let b: u64 = b.trim().parse().map_err(|_| format!("bad end in {s:?}"))?;
    if a > b {
        return Err(format!("empty range {s:?}"));
    }
    Ok((a, b))
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("mcp-sim probe: {msg}");
    ExitCode::from(Exit::Usage)
}

/// The library's configuration from the flags, for `target`; errors name the flag.
pub(crate) fn config(args: &Options, target: &Target) -> Result<ProbeConfig, String> {
    let config = options_config(args)?;
    config
        .validate(target)
        .map_err(|e| format!("--{}: {}", e.setting, e.message))?;
    Ok(config)
}

/// The probe's configuration from its flags, before it is checked against a target.
pub(crate) fn options_config(args: &Options) -> Result<ProbeConfig, String> {
    let limits = mcp_sim::wire::Limits::DEFAULT;
    let arguments = match mcp_sim::wire::json::parse_value(args.args.as_bytes(), &limits) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err("--args must be a JSON object".into()),
        Err(e) => return Err(format!("--args is not JSON: {e}")),
    };
    if args.proxy_idle_ms == Some(0) {
        return Err("--proxy-idle-ms must be positive".into());
    }
    let proxy = match (args.proxy, args.proxy_idle_ms.map(Duration::from_millis)) {
        (Some(preset), Some(idle)) => Some(ProxyConfig {
            idle_timeout: idle,
            ..preset
        }),
        (Some(preset), None) => Some(preset),
        (None, idle) => idle.map(ProxyConfig::custom),
    };
    let config = ProbeConfig {
        seed: args.seed,
        tool: args.tool.clone(),
        arguments,
        calls: args.calls,
        timeout_ms: args.timeout_ms,
        max_total_ms: args.max_total_ms,
        cancel_percent: args.cancel_percent,
        cancel_within_ms: args.cancel_within_ms,
        startup_timeout_ms: args.startup_timeout_ms,
        max_seconds: args.max_seconds,
        drain_ms: args.drain_ms,
        verbose: args.verbose,
        stall_percent: args.stall_percent,
        stall_ms: args.stall_ms,
        restarts: args.restarts,
        liveness_ms: args.liveness_ms,
        proxy,
        latency_ms: args.latency_ms,
        reset_percent: args.reset_percent,
        connect: args.era,
        origin_check: !args.no_origin_check,
        ..ProbeConfig::default()
    };
    Ok(config)
}

/// The findings a baseline may list besides the rules.
pub(crate) const PROBE_FINDINGS: &[&str] = &[
    "no-response",
    "server-exited",
    "unresponsive-after-cancel",
    "liveness-check-unanswered",
    "nothing-exercised",
    "not-replayable",
    mcp_sim::fit::confirm::NOT_REPRODUCED,
];

/// `--from`: the recorded client's own findings, which re-sending its requests does not
/// repeat, as inconclusive findings (a re-send that does not meet them passes nothing).
fn not_replayable(trace: &mcp_sim::trace::Trace, hop: Option<crate::args::HopArg>) -> Vec<Finding> {
    let hop = hop.map(crate::args::HopArg::hop);
    let found = mcp_sim::recording::unrepeated_findings(trace, hop).unwrap_or_default();
    found
        .iter()
        .map(|f| {
            let why = match f.why {
                mcp_sim::recording::Unrepeated::Reaction => {
                    "a reaction to what the client read, which another server may never cause"
                }
                mcp_sim::recording::Unrepeated::Sent => {
                    "sent by the recorded client; the probe sends its requests correctly"
                }
            };
            Finding {
                finding: "not-replayable",
                kind: mcp_sim::exit::FindingKind::Inconclusive,
                message: format!(
                    "the recording's client broke {} ({} time(s)): {why}; re-sending its \
                     requests does not test it",
                    f.rule, f.count
                ),
            }
        })
        .collect()
}

pub fn run(args: &Args) -> ExitCode {
    let target = match &args.url {
        Some(url) => Target::Http(url.clone()),
        None => Target::Stdio(args.command.clone()),
    };
    let options = &args.options;
    let mut config = match config(options, &target) {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let transport = match target {
        Target::Http(_) => Transport::Http,
        Target::Stdio(_) => Transport::Stdio,
    };
    let confirm =
        match super::confirm::prepare(&options.live_scenario, options.format, transport, false) {
            Ok(c) => c,
            Err(code) => return code,
        };
    if let Some(c) = &confirm {
        c.configure(&mut config);
    }
    let recorded = match &args.from {
        Some(path) => match crate::args::read_recording(path, args.hop) {
            Ok(r) => Some(r),
            Err(e) => return usage(&e),
        },
        None => None,
    };
    config.from = recorded
        .as_ref()
        .map(|(_, r)| std::sync::Arc::new(r.clone()));
    // Read before the run, so that a bad file costs no probe.
    let known = |n: &str| mcp_sim::ci::is_rule(n) || PROBE_FINDINGS.contains(&n);
    let baseline = match crate::args::read_baseline(options.baseline.as_deref(), known) {
        Ok(b) => b,
        Err(e) => return usage(&e),
    };
    // Written as the run goes, unless a scenario's confirmation may make several attempts
    // (then the trace of the attempt shown is written at the end).
    let trace_file = match (&confirm, &options.trace) {
        (None, Some(path)) => match crate::args::open_trace(Some(path), "mcp-sim probe") {
            Ok(f) => f,
            Err(e) => return usage(&e),
        },
        _ => None,
    };
    config.trace_file = trace_file.clone();
    config.interrupt = crate::signals::catch().interrupt;
    let label = target.label();
    let from = match (&args.from, options.live_scenario.flags()) {
        (Some(p), _) => format!("--from {} ", p.display()),
        (None, Some(flags)) => format!("{flags} "),
        (None, None) => String::new(),
    };
    let replay = replay_line(
        options,
        &match &args.url {
            Some(url) => format!("{from}--url {url}"),
            None => format!("{from}-- {label}"),
        },
    );
    let oracle = OracleConfig {
        complete: true,
        ..oracle_config(options.profile, options.grace_ms)
    };
    let attempt = |from| {
        let config = ProbeConfig {
            from: Some(from),
            ..config.clone()
        };
        attempt_probe(&target, &config)
    };
    let attempted = match &confirm {
        Some(c) => c.run(
            &oracle,
            attempt,
            |r| &r.run.trace,
            |line| eprintln!("{line}"),
        ),
        None => attempt_probe(&target, &config).map(|run| (run, None)),
    };
    let (run, unconfirmed) = match attempted {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let (true, Some((trace, _))) = (args.diff, &recorded) {
        let d = mcp_sim::diff::diff(trace, &run.run.trace, &[], &Default::default());
        eprint!("diff against the recording:\n{}", mcp_sim::diff::text(&d));
    }
    let mut extra = match &recorded {
        Some((trace, _)) => not_replayable(trace, args.hop),
        None => Vec::new(),
    };
    extra.extend(unconfirmed);
    finish(&Finish {
        run: &run,
        args: options,
        label: &label,
        replay,
        baseline: baseline.as_ref(),
        judged: None,
        intermediary_timeout_ms: None,
        extra,
        trace_file,
    })
}

/// One probe run, its errors as the command's exit codes.
fn attempt_probe(target: &Target, config: &ProbeConfig) -> Result<probe::ProbeRun, ExitCode> {
    match probe::probe(target, config) {
        Ok(run) => Ok(run),
        Err(ProbeError::Config(e)) => Err(usage(&format!("--{}: {}", e.setting, e.message))),
        Err(ProbeError::Unreachable(e)) => {
            eprintln!("mcp-sim probe: {e}");
            Err(ExitCode::from(Exit::Usage))
        }
    }
}

/// The probe's verdict as one JSON object (`--format json`).
#[derive(Serialize)]
struct JsonVerdict<'a> {
    /// The command or URL probed.
    target: &'a str,
    /// The schedule's seed.
    seed: u64,
    /// `clean`, `violations`, `server-fault` or `inconclusive`.
    verdict: &'static str,
    /// The process's exit code (with `--baseline`, the baseline's verdict).
    exit_code: u8,
    /// The command line that reruns this seed.
    replay: &'a str,
    /// With `--baseline`: how the run compares with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    baseline: Option<crate::args::JsonBaseline<'a>>,
    /// The calibrated duration of one call, in ms, when measured.
    natural_ms: Option<u64>,
    /// The window cancels were placed in, in ms after their call's start.
    cancel_window_ms: [u64; 2],
    /// The era asked for (`auto`, `modern`, a legacy revision).
    era_asked: String,
    /// The revision the session spoke, as the oracle read it from the trace.
    era: &'static str,
    /// Why the oracle read that era.
    era_reading: String,
    /// `check-proxy`: the revision the upstream hop spoke.
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_era: Option<&'static str>,
    coverage: &'a Coverage,
    findings: &'a [Finding],
    violations: Vec<JsonViolation<'a>>,
    /// `check-proxy`: violations the judge found against a reference peer (always empty
    /// unless mcp-sim misread the trace; never a finding).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    judge_defects: Vec<JsonViolation<'a>>,
    /// Where the trace was written.
    trace: Option<String>,
}

/// What [`finish`] judges and prints.
pub(crate) struct Finish<'a> {
    /// What the probe recorded.
    pub run: &'a ProbeRun,
    pub args: &'a Options,
    /// The command or URL probed, for people.
    pub label: &'a str,
    /// The line that reruns this seed.
    pub replay: String,
    pub baseline: Option<&'a mcp_sim::ci::Baseline>,
    /// `check-proxy`: the two-hop trace (the probe's front hop and the upstream's hop), judged
    /// and written instead of the probe's own.
    pub judged: Option<&'a Trace>,
    /// `check-proxy --intermediary-timeout-ms`.
    pub intermediary_timeout_ms: Option<u64>,
    /// Findings of the caller's own (`check-proxy`: nothing reached the upstream).
    pub extra: Vec<Finding>,
    /// The trace file the run wrote as it went, to end now; without one, `--trace` is
    /// written whole here.
    pub trace_file: Option<mcp_sim::lanes::live::TraceFile>,
}

/// Writes the trace, judges it, decides its end ([`RunEnd::decide`]) and prints the verdict;
/// returns the exit code.
pub(crate) fn finish(f: &Finish<'_>) -> ExitCode {
    let (run, args, label, baseline) = (f.run, f.args, f.label, f.baseline);
    let trace = f.judged.unwrap_or(&run.run.trace);
    let reason = match run.interrupted {
        Some(signal) => Interrupt::describe(signal),
        None => run.ended.clone(),
    };
    let written = match (&f.trace_file, &args.trace) {
        (Some(file), _) => crate::args::end_trace(Some(file), &reason),
        (None, Some(path)) => match std::fs::write(path, trace.to_jsonl()) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("mcp-sim: cannot write {}: {e} (exit 4)", path.display());
                false
            }
        },
        (None, None) => true,
    };
    // Every request must end: a server that went away leaves its calls open, and the oracle
    // says so.
    // Through `check-proxy` both ends are mcp-sim's reference peers: only the intermediary
    // is judged, and a finding against either end is the judge's defect, shown as such.
    // (An interrupted run demands them only if it settled before it ended.)
    let config = OracleConfig {
        complete: run.interrupted.is_none() || run.run.complete,
        intermediary_timeout_ms: f.intermediary_timeout_ms,
        reference_ends: f.judged.is_some(),
        ..oracle_config(args.profile, args.grace_ms)
    };
    let verdict = oracle::check(trace, &config);
    crate::args::report_judge_defects(&verdict);
    let coverage = findings::coverage(trace, &config, &findings::flagged_answers(&verdict));
    let mut found = findings::findings(&coverage, &run.end, &args.tool, run.planned_cancels, trace);
    found.extend(f.extra.iter().cloned());
    if let Some(signal) = run.interrupted {
        // What the run did not get to do is no finding: only what it saw go wrong stays.
        found.retain(|f| f.kind == FindingKind::Fault && f.finding != "no-response");
        found.push(Finding {
            finding: "interrupted",
            kind: FindingKind::Interrupted,
            message: format!(
                "{}: the run ended early, its open calls cancelled; what it recorded up to \
                 then is judged",
                Interrupt::describe(signal)
            ),
        });
    }
    let judged = match f.judged {
        Some(_) => Judged::Intermediary,
        None => Judged::Server,
    };
    let end = RunEnd::decide(&verdict, &found, baseline, judged);
    if let Some(diff) = &end.diff {
        eprint!("{}", diff.text());
    }
    let (word, exit_code, diff) = (end.word, end.exit.code(), end.diff.clone());
    let ci_run = || mcp_sim::ci::CiRun {
        name: label.to_owned(),
        verdict: &verdict,
        replay: Some(f.replay.clone()),
        outcome: end.outcome.clone(),
        baseline: baseline.zip(diff.clone()),
    };
    match args.format {
        Format::Junit => print!("{}", mcp_sim::ci::junit("mcp-sim probe", &[ci_run()])),
        Format::Github => print!("{}", mcp_sim::ci::github(&[ci_run()])),
        Format::Json => {
            let out = JsonVerdict {
                target: label,
                seed: args.seed,
                verdict: word.as_str(),
                exit_code,
                replay: &f.replay,
                baseline: diff.as_ref().map(crate::args::JsonBaseline::of),
                natural_ms: run.natural_ms,
                cancel_window_ms: [run.cancel_window_ms.0, run.cancel_window_ms.1],
                era_asked: args.era.to_string(),
                era: verdict.era.era.version(),
                era_reading: verdict.describe_era(),
                upstream_era: verdict.upstream_era.map(|e| e.era.version()),
                coverage: &coverage,
                findings: &found,
                violations: json_violations(&verdict),
                judge_defects: crate::args::json_judge_defects(&verdict),
                trace: args.trace.as_ref().map(|p| p.display().to_string()),
            };
            println!(
                "{}",
                serde_json::to_string(&out).expect("verdict serializes")
            );
        }
        Format::Text => print_text(&TextReport {
            args,
            label,
            run,
            trace,
            coverage: &coverage,
            findings: &found,
            verdict: &verdict,
            word,
            exit_code,
        }),
    }
    if written {
        end.exit.into()
    } else {
        ExitCode::from(Exit::OwnFault)
    }
}

/// The probe's command line again with this seed and era and `target` (`--url URL` or `--
/// COMMAND`), for a failure's text (the other flags as the user gave them are in the CI job).
fn replay_line(args: &Options, target: &str) -> String {
    format!(
        "mcp-sim probe --seed {} --era {} {target}",
        args.seed, args.era
    )
}

struct TextReport<'a> {
    args: &'a Options,
    label: &'a str,
    run: &'a ProbeRun,
    trace: &'a Trace,
    coverage: &'a Coverage,
    findings: &'a [Finding],
    verdict: &'a oracle::Verdict,
    word: Word,
    /// The exit code (the baseline's verdict, when there is one).
    exit_code: u8,
}

fn print_text(r: &TextReport<'_>) {
    let (args, c, run) = (r.args, r.coverage, r.run);
    let planned_cancels = run.planned_cancels;
    if run.calls_planned == args.calls as usize + CALIBRATION_CALLS {
        println!(
            "probe: {} (seed {}, {CALIBRATION_CALLS} calibration calls and {} calls of {}, {} \
             planned cancels)",
            r.label, args.seed, args.calls, args.tool, planned_cancels
        );
    } else {
        println!(
            "probe: {} (a recorded client's {} calls, {} planned cancels)",
            r.label, run.calls_planned, planned_cancels
        );
    }
    println!(
        "policy: idle {} ms reset by progress, hard maximum {} ms",
        args.timeout_ms, args.max_total_ms
    );
    println!(
        "era: asked {}, spoke {}",
        args.era,
        r.verdict.describe_era()
    );
    let width = run.cancel_window_ms.1 - run.cancel_window_ms.0;
    match run.natural_ms {
        Some(d) => println!(
            "calibration: the shorter call took {d} ms; cancels fall {}..{} ms into their call. A final \
             response within {CANCEL_REACTION_MS} ms of a cancel, before half the shortest \
             uncancelled call's duration, answers the cancel: for a crossing to look like that \
             the call must end that early and in those {CANCEL_REACTION_MS} ms (at most {:.0} % \
             per cancel for the second alone)",
            run.cancel_window_ms.0,
            run.cancel_window_ms.1,
            (100.0 * CANCEL_REACTION_MS as f64 / width as f64).min(100.0)
        ),
        None => println!("calibration: no result, so the natural duration of a call is unknown"),
    }
    let outcome_text: Vec<String> = run
        .run
        .stats
        .outcomes
        .iter()
        .map(|(o, n)| format!("{} {n}", o.as_str()))
        .collect();
    println!(
        "wall: {:.2} s, {} events, {} progress delivered, outcomes (all requests): {}",
        r.trace.end() as f64 / 1000.0,
        r.trace.events.len(),
        run.progress_delivered,
        if outcome_text.is_empty() {
            "none".to_string()
        } else {
            outcome_text.join(", ")
        }
    );
    println!(
        "coverage: {} of {} calls started; {} answered ({} results, {} errors); {} cancels, {} \
         met running work, {} crossings; {} progress received; {} timeouts; {} of {} other \
         requests answered",
        run.calls_started,
        run.calls_planned,
        c.calls_answered,
        c.results,
        c.errors,
        c.cancels,
        c.cancels_met_running_work,
        c.crossings,
        c.progress_received,
        c.timeouts,
        c.other_answered,
        c.other_requests
    );
    if !c.faults.is_empty() {
        let faults: Vec<String> = c.faults.iter().map(|(f, n)| format!("{f} {n}")).collect();
        println!("faults injected: {}", faults.join(", "));
    }
    println!("{}", run.ended);
    if run.write_errors > 0 {
        println!(
            "writes to the server's stdin that failed: {}",
            run.write_errors
        );
    }
    if let Some(path) = &args.trace {
        println!("trace: {}", path.display());
    }
    for f in r.findings {
        println!(
            "finding: {} ({}): {}",
            f.finding,
            f.kind.as_str(),
            f.message
        );
    }
    println!("violations: {}", r.verdict.violations.len());
    print!("{}", report::violations_text(r.verdict));
    println!("verdict: {} (exit {})", r.word.as_str(), r.exit_code);
}
