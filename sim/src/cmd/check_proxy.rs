//! `mcp-sim check-proxy [--front-url URL] [the probe's options] -- INTERMEDIARY ARGS...`: judge
//! an intermediary (a stdio↔HTTP bridge, a gateway, an era translator) between the reference
//! client and the reference server. The check itself is the library's
//! ([`mcp_sim::lanes::live::check_proxy`], whose docs say how the placeholders `{upstream}`,
//! `{upstream-url}` and `{port}` expand and how both hops are joined); this command parses its
//! flags, runs it with this binary as the reference upstream, and prints. Exit codes, `--format`
//! and `--baseline` are the probe's; a run in which no call reached the upstream is
//! inconclusive (`nothing-reached-upstream`).

use std::process::ExitCode;

use mcp_sim::exit::Exit;
use mcp_sim::lanes::live::check_proxy::{
    check_proxy, shell_quote, ProxyCheck, ProxyCheckError, NOTHING_REACHED_UPSTREAM,
};
use mcp_sim::model::{ServerEras, Transport};
use mcp_sim::oracle::OracleConfig;

use super::probe::{finish, Finish, Options, PROBE_FINDINGS};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    options: Options,
    /// The intermediary's Streamable HTTP front (`http://127.0.0.1:{port}/mcp`); without it,
    /// the front is the intermediary's stdio.
    #[arg(long)]
    front_url: Option<String>,
    /// The eras the reference upstream serves: `auto` (both, as the SDK servers: the
    /// intermediary's first request decides), `modern` (2026-07-28 only) or `legacy`.
    #[arg(long, default_value = "auto", value_parser = crate::args::server_eras())]
    upstream_era: ServerEras,
    /// The intermediary's documented request timeout in ms (npm mcp-proxy's
    /// `--requestTimeout`): it must not cut a call sooner, and must end one idle that long.
    /// Without it, cutting a call the upstream still works on is a finding.
    #[arg(long)]
    intermediary_timeout_ms: Option<u64>,
    #[command(flatten)]
    virtual_bridge: super::virtual_bridge::VirtualBridgeOptions,
    /// The intermediary's command and arguments (after `--`), with `{upstream}`,
    /// `{upstream-url}` and `{port}`.
    #[arg(required = true, last = true, num_args = 1..)]
    command: Vec<String>,
}

/// `--virtual`: the intermediary under the virtual clock, by seed.
fn run_virtual(
    args: &Args,
    probe: mcp_sim::lanes::live::probe::ProbeConfig,
    baseline: bool,
) -> ExitCode {
    if baseline || args.options.live_scenario.flags().is_some() {
        return usage(
            "--virtual judges each seed on its own: --baseline and a live scenario's flags are \
             for a live check",
        );
    }
    if args.intermediary_timeout_ms.is_some() {
        return usage(
            "--intermediary-timeout-ms is for a live check (a virtual one judges without it)",
        );
    }
    let upstream_era = args.upstream_era;
    let flags = super::virtual_bridge::BridgeFlags {
        probe,
        front_url: args.front_url.as_deref(),
        upstream_era,
        format: args.options.format,
        trace: args.options.trace.as_deref(),
        command: &args.command,
    };
    super::virtual_bridge::run(&args.virtual_bridge, &flags)
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("mcp-sim check-proxy: {msg}");
    ExitCode::from(Exit::Usage)
}

pub fn run(args: &Args) -> ExitCode {
    let known = |n: &str| {
        mcp_sim::ci::is_rule(n) || PROBE_FINDINGS.contains(&n) || n == NOTHING_REACHED_UPSTREAM
    };
    let baseline = match crate::args::read_baseline(args.options.baseline.as_deref(), known) {
        Ok(b) => b,
        Err(e) => return usage(&e),
    };
    let mut probe = match super::probe::options_config(&args.options) {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    if args.virtual_bridge.on {
        return run_virtual(args, probe, baseline.is_some());
    }
    // The front the intermediary serves is the transport a scenario must run on.
    let front = match args.front_url {
        Some(_) => Transport::Http,
        None => Transport::Stdio,
    };
    let confirm = match super::confirm::prepare(
        &args.options.live_scenario,
        args.options.format,
        front,
        true,
    ) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(c) = &confirm {
        c.configure(&mut probe);
    }
    let mcp_sim = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return usage(&format!("cannot find mcp-sim itself: {e}")),
    };
    probe.interrupt = crate::signals::catch().interrupt;
    let check = ProxyCheck {
        command: args.command.clone(),
        front_url: args.front_url.clone(),
        upstream_era: args.upstream_era,
        mcp_sim,
        probe,
    };
    let once = |check: &ProxyCheck| match check_proxy(check) {
        Ok(checked) => Ok(checked),
        Err(ProxyCheckError::Config(e) | ProxyCheckError::Unreachable(e)) => Err(usage(&e)),
    };
    let attempt = |from| {
        let mut check = check.clone();
        check.probe.from = Some(from);
        once(&check)
    };
    let oracle = OracleConfig {
        complete: true,
        intermediary_timeout_ms: args.intermediary_timeout_ms,
        ..crate::args::oracle_config(args.options.profile, args.options.grace_ms)
    };
    let attempted = match &confirm {
        Some(c) => c.run(
            &oracle,
            attempt,
            |checked| &checked.judged,
            |line| eprintln!("{line}"),
        ),
        None => once(&check).map(|checked| (checked, None)),
    };
    let (mut checked, unconfirmed) = match attempted {
        Ok(r) => r,
        Err(code) => return code,
    };
    checked.findings.extend(unconfirmed);
    let up = &checked.upstream;
    eprintln!(
        "upstream: {} reference server process(es) started by the intermediary, {} \
         connection(s), {} events, {} tool calls reached it{}",
        up.processes,
        up.connections,
        up.trace.events.len(),
        up.calls,
        if up.connections > 1 {
            " (each connection judged on its own, in its own era)"
        } else {
            ""
        }
    );
    let front = match &args.front_url {
        Some(u) => format!("--front-url {} ", shell_quote(u)),
        None => String::new(),
    };
    let timeout = match args.intermediary_timeout_ms {
        Some(ms) => format!("--intermediary-timeout-ms {ms} "),
        None => String::new(),
    };
    let schedule = match args.options.live_scenario.flags() {
        Some(flags) => flags,
        None => format!("--seed {} --era {}", args.options.seed, args.options.era),
    };
    let replay = format!(
        "mcp-sim check-proxy {schedule} {timeout}{front}-- {}",
        args.command
            .iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    );
    finish(&Finish {
        run: &checked.run,
        args: &args.options,
        label: &args.command.join(" "),
        replay,
        baseline: baseline.as_ref(),
        judged: Some(&checked.judged),
        intermediary_timeout_ms: args.intermediary_timeout_ms,
        extra: checked.findings,
        trace_file: None,
    })
}
