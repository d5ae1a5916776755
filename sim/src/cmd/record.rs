//! `mcp-sim record -- SERVER ARGS...` / `mcp-sim record --http LISTEN --upstream URL`: a
//! transparent tap between a real host and its real server that records a two-sided trace
//! ([`mcp_sim::lanes::live::record`]) and judges it at the end.
//!
//! stdio: the host launches `mcp-sim record --trace FILE -- real-server ARGS...` in place of
//! the server; bytes pass unchanged, the server's stderr passes through, and the tap exits
//! with the server's exit status. HTTP: a reverse proxy that runs until SIGTERM, SIGINT or
//! `--max-seconds`, then exits 1 when a MUST rule is broken, else 0. The files are written
//! and a summary goes to stderr at the end.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mcp_sim::exit::{Exit, Judged, RunEnd};
use mcp_sim::lanes::live::http::parse_url;
use mcp_sim::lanes::live::record::{self, Recorded};
use mcp_sim::lanes::live::{TraceFile, TraceOut};
use mcp_sim::oracle;
use mcp_sim::report;
use mcp_sim::scenario::ProxyConfig;

use crate::args::Judging;

#[derive(clap::Args)]
pub struct Args {
    /// Write the two-sided trace (JSON Lines, format v1) here at the end.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write the verdict here at the end, in `--format` (by default the JSON `check-trace
    /// --format json` prints).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Be a Streamable HTTP reverse proxy listening here (`127.0.0.1:8080`; port 0 picks a
    /// free one and prints it to stderr) instead of a stdio tap.
    #[arg(long, requires = "upstream", conflicts_with = "command")]
    http: Option<String>,
    /// With `--http`: the server, `http://HOST:PORT` (any path the client uses is passed on).
    #[arg(long, requires = "http")]
    upstream: Option<String>,
    /// With `--http`: cut idle streams as this intermediary does: `nginx`, `alb`,
    /// `cloudflare`, `custom:SECONDS` or `custom:MSms`.
    #[arg(long, value_parser = parse_proxy, requires = "http")]
    proxy: Option<ProxyConfig>,
    #[command(flatten)]
    front: crate::args::FrontArgs,
    /// With `--http`: stop after this many seconds.
    #[arg(long, requires = "http")]
    max_seconds: Option<u64>,
    /// Expected findings, one rule per line (`#` comments): the verdict then fails only on a
    /// MUST rule the file does not list, or on a listed one that no longer occurs. It decides
    /// the exit code over HTTP; over stdio the tap exits as its server did, and the baseline's
    /// verdict is on stderr and, with `--format junit|github`, in the report.
    #[arg(long)]
    baseline: Option<PathBuf>,
    #[command(flatten)]
    judging: Judging,
    /// Print every trace event to stderr as it is recorded.
    #[arg(long)]
    verbose: bool,
    /// stdio: the server command and its arguments (after `--`).
    #[arg(last = true, num_args = 1.., required_unless_present = "http")]
    command: Vec<String>,
}

fn parse_proxy(s: &str) -> Result<ProxyConfig, String> {
    ProxyConfig::preset(s).ok_or_else(|| {
        format!("unknown proxy {s:?}: nginx, alb, cloudflare, custom:SECONDS or custom:MSms")
    })
}

fn usage(msg: &str) -> ExitCode {
    say!("mcp-sim record: {msg}");
    ExitCode::from(Exit::Usage)
}

pub fn run(args: &Args) -> ExitCode {
    // Read before the session, so that a bad file costs no recording.
    let baseline = match crate::args::read_baseline(args.baseline.as_deref(), mcp_sim::ci::is_rule)
    {
        Ok(b) => b,
        Err(e) => return usage(&e),
    };
    let trace_file = match crate::args::open_trace(args.trace.as_deref(), "mcp-sim record") {
        Ok(f) => f,
        Err(e) => return usage(&e),
    };
    let out = TraceOut {
        verbose: args.verbose,
        file: trace_file.clone(),
    };
    let stop = crate::signals::catch().stop;
    let recorded = match (&args.http, &args.upstream) {
        (Some(listen), Some(upstream)) => {
            let endpoint = match parse_url(upstream) {
                Ok(e) => e,
                Err(e) => return usage(&format!("--upstream: {e}")),
            };
            let upstream = match std::net::ToSocketAddrs::to_socket_addrs(&endpoint.addr)
                .ok()
                .and_then(|mut a| a.next())
            {
                Some(a) => a,
                None => return usage(&format!("--upstream: cannot resolve {}", endpoint.addr)),
            };
            let listener = match std::net::TcpListener::bind(listen) {
                Ok(l) => l,
                Err(e) => return usage(&format!("cannot listen on {listen}: {e}")),
            };
            if let Ok(a) = listener.local_addr() {
                say!("mcp-sim record: listening on http://{a}, passing on to {upstream}");
            }
            record::record_http(
                listener,
                upstream,
                &args.front.http_front(),
                args.proxy,
                stop,
                args.max_seconds.map(Duration::from_secs),
                out,
            )
        }
        _ => record::record_stdio(
            &args.command,
            std::io::stdin(),
            std::io::stdout(),
            stop,
            out,
        ),
    };
    match recorded {
        Ok(r) => finish(&r, args, baseline.as_ref(), trace_file.as_ref()),
        Err(e) => usage(&format!("cannot start: {e}")),
    }
}

fn finish(
    r: &Recorded,
    args: &Args,
    baseline: Option<&mcp_sim::ci::Baseline>,
    trace_file: Option<&TraceFile>,
) -> ExitCode {
    // The session is over: its trace is ended before the judging, which can take long.
    let reason = match (&args.http, r.exit) {
        (None, Some(status)) => format!("the server ended ({status})"),
        (None, None) => "the server was killed when the tap stopped".into(),
        (Some(_), _) => "the tap stopped".into(),
    };
    let written = crate::args::end_trace(trace_file, &reason);
    let trace = &r.run.trace;
    let config = args.judging.config();
    let verdict = oracle::check(trace, &config);
    let end = RunEnd::decide(&verdict, &[], baseline, Judged::Session);
    let diff = end.diff.clone();
    let name = match &args.upstream {
        Some(upstream) => format!("session with {upstream}"),
        None => format!("session with {}", args.command.join(" ")),
    };
    let run = mcp_sim::ci::CiRun {
        name,
        verdict: &verdict,
        replay: None,
        outcome: end.outcome.clone(),
        baseline: baseline.zip(diff.clone()),
    };
    // Over stdio the tap exits as its server did (a host sees its server's status through
    // it); over HTTP with the verdict.
    let exit_code = match (&args.http, r.exit) {
        (None, Some(status)) => status
            .code()
            .map_or(Exit::Broken.code(), |c| c.clamp(0, 255) as u8),
        (None, None) => Exit::Broken.code(),
        (Some(_), _) if !written => Exit::OwnFault.code(),
        (Some(_), _) => end.exit.code(),
    };
    let stdout_free = args.http.is_some();
    args.judging.write_report(
        "record",
        &run,
        trace,
        (args.report.as_deref(), stdout_free),
        exit_code,
        None,
    );
    say!(
        "record: {} events, {} messages ({} requests), {} bytes to the server, {} back{}",
        trace.events.len(),
        r.run.stats.messages,
        r.run.stats.requests,
        r.bytes_up,
        r.bytes_down,
        if r.connections > 0 {
            format!(", {} connections", r.connections)
        } else {
            String::new()
        }
    );
    say!("era: {}", verdict.describe_era());
    say!("violations: {}", verdict.violations.len());
    say_raw!("{}", report::violations_text(&verdict));
    if let Some(diff) = &diff {
        say_raw!("{}", diff.text());
        say!(
            "baseline: {}",
            if diff.is_clean() {
                "agrees"
            } else {
                "disagrees"
            }
        );
    }
    match (&args.http, r.exit) {
        (None, Some(status)) => say!("server: {status}"),
        (None, None) => say!("server: killed when the tap stopped"),
        (Some(_), _) => {}
    }
    ExitCode::from(exit_code)
}
