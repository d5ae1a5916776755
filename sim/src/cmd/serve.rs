//! `mcp-sim serve [--http ADDR]`: the reference server as a process that a real client
//! launches (stdio) or connects to (Streamable HTTP), judging the client from the server's
//! end ([`mcp_sim::lanes::live::serve`]).
//!
//! The trace and the report are written when stdin closes (stdio), on SIGTERM or SIGINT, or
//! after `--max-seconds`; the text verdict goes to stderr, since stdout is the protocol's.
//! With `--from RECORDING` the server plays a recorded server back for the calls the recording
//! holds ([`mcp_sim::model::server::Playback`]): each message it sends is marked in the trace
//! as `recorded` (with the recording's line) or `extrapolated`, and the counts are printed.
//!
//! Exit codes: 0 clean and exercised; 1 a MUST rule or the declared policy broken; 2 usage or
//! cannot listen (or a recording that cannot be read); 3 inconclusive (no tool call reached
//! the server, or under `--from` no request matched a recorded call).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mcp_sim::ci::CiRun;
use mcp_sim::exit::{Exit, Finding, FindingKind, Judged, RunEnd, Word};
use mcp_sim::fit::confirm::{ServeConfirm, CROSSING, NOT_REPRODUCED};
use mcp_sim::lanes::live::check_proxy::upstream_files;
use mcp_sim::lanes::live::serve::{self, Listen, ServeConfig, Served, ServedCounts};
use mcp_sim::lanes::live::TraceFile;
use mcp_sim::model::mutant::MutantSide;
use mcp_sim::model::recorded::MatchMode;
use mcp_sim::model::server::{OnCancel, OnMiss, Playback};
use mcp_sim::model::{ClientPolicies, MutantSet};
use mcp_sim::mutants::Mutant;
use mcp_sim::oracle;
use mcp_sim::report;

use crate::args::Judging;

#[derive(clap::Args)]
pub struct Args {
    /// Play this recording back as the server (a trace of `record`, `serve`, `probe` or
    /// `check-proxy`): each call it holds answered as the recorded server answered it, at its
    /// recorded offsets, with this client's ids and tokens; the protocol itself (eras,
    /// handshake, sessions, streams) stays the reference server's.
    #[arg(long, value_name = "RECORDING")]
    from: Option<PathBuf>,
    /// `--from` a two-hop recording: the hop whose server to play (`front`: the
    /// intermediary's answers to its client; `back`: the upstream server's).
    #[arg(long, value_enum, requires = "from")]
    hop: Option<crate::args::HopArg>,
    /// `--from`: how a request finds its recorded call: `params` (method and params without
    /// `_meta`, repeats in recorded order), `strict` (the `_meta` too, less token and
    /// version) or `order` (the k-th request, the k-th call).
    #[arg(long = "match", value_enum, default_value_t = MatchArg::Params, requires = "from")]
    matching: MatchArg,
    /// `--from`: after a cancel, send what the recorded server sent after its own
    /// (`recorded`, bugs included) or stop as a correct server does (`correct`).
    #[arg(long, value_enum, default_value_t = OnCancelArg::Recorded, requires = "from")]
    on_cancel: OnCancelArg,
    /// `--from`: for what the recording does not hold (a request it has no call for, or an
    /// answer its client never waited for), answer -32603 naming it (`error`) or serve it as
    /// the reference server would (`reference`).
    #[arg(long, value_enum, default_value_t = OnMissArg::Error, requires = "from")]
    on_miss: OnMissArg,
    #[command(flatten)]
    scenario: crate::cmd::confirm::ServeScenarioOptions,
    /// Serve Streamable HTTP on this address (`127.0.0.1:8080`; port 0 picks a free one and
    /// prints it to stderr) instead of stdio.
    #[arg(long)]
    http: Option<String>,
    /// Switch on a server-side mutant of the catalog (repeatable; see `mcp-sim mutants`).
    #[arg(long)]
    mutant: Vec<String>,
    /// The timeout policy the client under test declares: a preset (`none`, `inspector`,
    /// `typescript-sdk`, `python-sdk`, `claude-code-stdio`, `claude-code-http`) and/or
    /// `timeout=MS[,reset][,max=MS]`, for every request, or per method:
    /// `tools/call:timeout=1000,reset` (a method or prefix, then the policy; several
    /// separated by `;`; a bare policy covers the requests no other names). Recorded as the
    /// policy of each request it covers, and checked on those only.
    #[arg(long, value_parser = ClientPolicies::from_spec)]
    client_policy: Option<ClientPolicies>,
    /// The eras to serve: `auto` (both, each request answered in the era it speaks:
    /// legacy sessions and 2026-07-28 requests side by side), `modern` (2026-07-28 only: `initialize` is refused) or `legacy` (the
    /// legacy era only: `server/discover` is refused, as the TypeScript SDK v1 does).
    #[arg(long, default_value = "auto", value_parser = crate::args::server_eras())]
    era: mcp_sim::model::ServerEras,
    #[command(flatten)]
    front: crate::args::FrontArgs,
    /// HTTP: close a connection that waits this many ms for its next request head (no
    /// request in flight, or a head unfinished).
    #[arg(long, default_value_t = serve::HttpLimits::default().idle_connection_ms, value_name = "MS")]
    idle_connection_ms: u64,
    /// HTTP: legacy sessions open at once; one more `initialize` is answered 503.
    #[arg(long, default_value_t = serve::MAX_SESSIONS)]
    max_sessions: u32,
    /// HTTP: streams one legacy session holds open at once; one more is answered 503.
    #[arg(long, default_value_t = serve::MAX_SESSION_STREAMS)]
    max_session_streams: u32,
    /// Write the trace (JSON Lines, format v1) here at the end.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write the verdict here at the end, in `--format` (by default the JSON `check-trace
    /// --format json` prints).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Stop after this many seconds.
    #[arg(long)]
    max_seconds: Option<u64>,
    /// Keep-alive comments on quiet SSE streams after this many ms.
    #[arg(long)]
    keepalive_ms: Option<u64>,
    #[command(flatten)]
    judging: Judging,
    /// Expected findings, one rule (or `nothing-exercised`, `not-reproduced`) per line, `#` comments: the exit
    /// code then fails only on a MUST rule or a broken declared policy the file does not
    /// list, or on a listed one that no longer occurs. Read before the server starts.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Print every trace event to stderr as it is recorded.
    #[arg(long)]
    verbose: bool,
    /// Count the trace's times from this moment (ms since the Unix epoch) instead of from
    /// the start: `check-proxy` joins this trace to its probe's on one clock.
    #[arg(long, hide = true)]
    clock_origin_unix_ms: Option<u64>,
    /// Write the trace into this folder as `upstream-PID.jsonl`, after marking the start
    /// there with `upstream-PID.started`: an intermediary may start its upstream more than
    /// once, and `check-proxy` waits for every one it started.
    #[arg(long, hide = true, conflicts_with = "trace")]
    trace_dir: Option<PathBuf>,
}

fn usage(msg: &str) -> ExitCode {
    say!("mcp-sim serve: {msg}");
    ExitCode::from(Exit::Usage)
}

fn mutants(names: &[String]) -> Result<MutantSet, String> {
    let mut set = MutantSet::NONE;
    for name in names {
        let m = Mutant::from_name(name).ok_or_else(|| format!("unknown mutant {name:?}"))?;
        if m.info().side != MutantSide::Server {
            return Err(format!(
                "{name} is a client-side mutant; serve runs the server"
            ));
        }
        set = set.with(m);
    }
    Ok(set)
}

/// What `serve --baseline` may list besides the rules.
const SERVE_FINDINGS: &[&str] = &["nothing-exercised", "nothing-matched", NOT_REPRODUCED];

/// `--match`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum MatchArg {
    /// Method and params without `_meta`.
    Params,
    /// The `_meta` too, less token and version.
    Strict,
    /// The k-th request, the k-th recorded call.
    Order,
}

/// `--on-cancel`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum OnCancelArg {
    /// What the recorded server sent after its cancel.
    Recorded,
    /// Nothing more, as a correct server.
    Correct,
}

/// `--on-miss`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum OnMissArg {
    /// -32603 naming what is missing.
    Error,
    /// The reference server's own answer.
    Reference,
}

/// The playback `--from` asks for: the recording read, or why it cannot be.
fn playback(args: &Args) -> Result<Option<Playback>, String> {
    let Some(path) = &args.from else {
        return Ok(None);
    };
    let (_, recording) = crate::args::read_recording(path, args.hop)?;
    Ok(Some(Playback {
        recording: std::sync::Arc::new(recording),
        matching: match args.matching {
            MatchArg::Params => MatchMode::Params,
            MatchArg::Strict => MatchMode::Strict,
            MatchArg::Order => MatchMode::Order,
        },
        on_cancel: match args.on_cancel {
            OnCancelArg::Recorded => OnCancel::Recorded,
            OnCancelArg::Correct => OnCancel::Correct,
        },
        on_miss: match args.on_miss {
            OnMissArg::Error => OnMiss::Error,
            OnMissArg::Reference => OnMiss::Reference,
        },
    }))
}

pub fn run(args: &Args) -> ExitCode {
    let mutants = match mutants(&args.mutant) {
        Ok(m) => m,
        Err(e) => return usage(&e),
    };
    let transport = match args.http {
        Some(_) => mcp_sim::model::Transport::Http,
        None => mcp_sim::model::Transport::Stdio,
    };
    let confirm = match crate::cmd::confirm::prepare_serve(&args.scenario, transport) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let playback = match (&confirm, playback(args)) {
        (Some(c), _) => Some(Playback {
            recording: std::sync::Arc::new(c.plan.recording.clone()),
            matching: MatchMode::Params,
            on_cancel: OnCancel::AsPlanned(CROSSING),
            on_miss: OnMiss::Reference,
        }),
        (None, Ok(p)) => p,
        (None, Err(e)) => return usage(&e),
    };
    let known = |name: &str| mcp_sim::ci::is_rule(name) || SERVE_FINDINGS.contains(&name);
    let baseline = match crate::args::read_baseline(args.baseline.as_deref(), known) {
        Ok(b) => b,
        Err(e) => return usage(&e),
    };
    let config = ServeConfig {
        trace_file: None,
        mutants,
        playback,
        http: {
            let mut front = args.front.http_front();
            front.limits.idle_connection_ms = args.idle_connection_ms;
            front
        },
        session_limits: mcp_sim::model::SessionLimits {
            max_sessions: Some(args.max_sessions),
            max_session_streams: Some(args.max_session_streams),
        },
        client_policy: args.client_policy.clone(),
        max_seconds: args.max_seconds,
        verbose: args.verbose,
        keepalive: args.keepalive_ms.map(Duration::from_millis),
        clock_origin: args
            .clock_origin_unix_ms
            .map(|ms| std::time::UNIX_EPOCH + Duration::from_millis(ms)),
        eras: args.era,
    };
    let listen = match &args.http {
        Some(addr) => match std::net::TcpListener::bind(addr) {
            Ok(l) => {
                if let Ok(a) = l.local_addr() {
                    say!("mcp-sim serve: listening on http://{a}/mcp");
                }
                Listen::Http(l)
            }
            Err(e) => return usage(&format!("cannot listen on {addr}: {e}")),
        },
        None => Listen::Stdio {
            input: Box::new(std::io::stdin()),
            output: Box::new(std::io::stdout()),
        },
    };
    // The trace is written as the run goes, opened now so that a folder that cannot be
    // written stops the run before it starts. Under `--trace-dir` it is written under a
    // temporary name and moved to its own at the end: `check-proxy` waits for that name.
    let opened = match &args.trace_dir {
        Some(dir) => {
            let (started, path) = upstream_files(dir, std::process::id());
            if let Err(e) = std::fs::write(&started, b"") {
                return usage(&format!("cannot write {}: {e}", started.display()));
            }
            TraceFile::create_renamed(&path.with_extension("part"), &path, "mcp-sim serve")
                .map(Some)
                .map_err(|e| e.to_string())
        }
        None => crate::args::open_trace(args.trace.as_deref(), "mcp-sim serve"),
    };
    let config = ServeConfig {
        trace_file: match opened {
            Ok(f) => f,
            Err(e) => return usage(&e),
        },
        ..config
    };
    let served = match serve::serve(listen, &config, crate::signals::catch().stop) {
        Ok(s) => s,
        Err(e) => return usage(&format!("cannot start: {e}")),
    };
    finish(
        &served,
        args,
        baseline.as_ref(),
        confirm.as_ref(),
        config.trace_file.as_ref(),
    )
}

fn finish(
    served: &Served,
    args: &Args,
    baseline: Option<&mcp_sim::ci::Baseline>,
    confirm: Option<&ServeConfirm>,
    trace_file: Option<&TraceFile>,
) -> ExitCode {
    // The run is over: its trace is ended before the judging, which can take long.
    let written = crate::args::end_trace(trace_file, &served.end.describe());
    let trace = &served.run.trace;
    let config = args.judging.config();
    let verdict = oracle::check(trace, &config);
    let ServedCounts {
        calls,
        results,
        progress,
        cancels,
    } = ServedCounts::of(trace, verdict.era.era, &config.decode);
    say!(
        "serve: ended because {}; {} events, {} requests received, {} tool calls, {} results and {} progress sent, {} cancels seen (notifications, and in 2026-07-28 stream closes){}",
        served.end.describe(),
        trace.events.len(),
        served.run.stats.requests,
        calls,
        results,
        progress,
        cancels,
        if served.connections > 0 {
            format!(", {} connections", served.connections)
        } else {
            String::new()
        }
    );
    say!("era: {}", verdict.describe_era());
    if served.connections > 1 {
        // Said until each client is judged apart: the verdict's rules across requests
        // (request-id-unique, the era an initialize sets) read every connection as one client.
        say!(
            "note: {} HTTP connections were judged as one client: serve cannot yet tell the \
             clients of several connections apart, so a rule across requests \
             (request-id-unique, the era read from an initialize) may join two clients' \
             requests; run one client per serve for an exact verdict",
            served.connections
        );
    }
    if let Some(p) = &served.playback {
        say!(
            "playback: {} requests matched a recorded call, {} did not; messages sent: {} \
             recorded, {} extrapolated; {} recorded messages not sent; {} requests of the \
             recorded server's own sent, {} answered",
            p.matched,
            p.missed,
            p.recorded,
            p.extrapolated,
            p.dropped,
            p.own_requests,
            p.own_answered
        );
    }
    let matched_nothing = served.playback.is_some_and(|p| p.matched == 0);
    match &args.client_policy {
        Some(declared) => {
            for (method, p) in declared.entries() {
                say!(
                    "declared client policy for {}: {}",
                    method.unwrap_or("every request"),
                    serde_json::to_string(&mcp_sim::trace::PolicyRecord::from(p))
                        .expect("policy serializes")
                );
            }
        }
        None => say!("declared client policy: none given, so deadlines are not judged"),
    }
    say!("violations: {}", verdict.violations.len());
    say_raw!("{}", report::violations_text(&verdict));
    // Under `--scenario`, a predicted rule of the client's that the run did not show is not
    // a pass: the run is inconclusive unless something fails it anyway.
    let (confirmed, missing) = confirm.map(|c| c.judge(&verdict)).unwrap_or_default();
    if let Some(c) = confirm {
        if !confirmed.is_empty() {
            say!("{}: confirmed {}", c.what, confirmed.join(", "));
        }
    }
    // Under `--scenario`, a predicted rule of the client's that the run did not show is not
    // a pass; nor is a run in which no call reached the server, or, under `--from`, no
    // request matched the recording. The first of these that holds is the run's finding.
    let inconclusive = |finding, message: String| Finding {
        finding,
        kind: FindingKind::Inconclusive,
        message,
    };
    let finding = if let Some(c) = confirm.filter(|_| !missing.is_empty()) {
        Some(inconclusive(
            NOT_REPRODUCED,
            format!(
                "the simulation predicts {} for {}; this run did not break it",
                missing.join(", "),
                c.what
            ),
        ))
    } else if calls == 0 {
        Some(inconclusive(
            "nothing-exercised",
            "no tools/call reached the server".into(),
        ))
    } else if matched_nothing {
        Some(inconclusive(
            "nothing-matched",
            "no request matched a call of the recording".into(),
        ))
    } else {
        None
    };
    let findings: Vec<Finding> = finding.into_iter().collect();
    let end = RunEnd::decide(&verdict, &findings, baseline, Judged::Client);
    if end.word == Word::Inconclusive {
        for f in &findings {
            say!("finding: {}: {} (inconclusive)", f.finding, f.message);
        }
    }
    let (word, outcome, diff) = (end.word.as_str(), end.outcome, end.diff);
    let code = if written { end.exit } else { Exit::OwnFault };
    if let Some(d) = &diff {
        say_raw!("{}", d.text());
    }
    let run = CiRun {
        name: format!("client ({})", served.end.describe()),
        verdict: &verdict,
        replay: None,
        outcome,
        baseline: baseline.zip(diff.clone()),
    };
    let stdout_free = args.http.is_some();
    // Under `--from`, how the playback went is part of the verdict.
    let playback = served.playback.map(|p| {
        let counts = serde_json::json!({
            "matched": p.matched,
            "missed": p.missed,
            "recorded": p.recorded,
            "extrapolated": p.extrapolated,
            "not_sent": p.dropped,
            "own_requests": p.own_requests,
            "own_answered": p.own_answered,
        });
        let counts = match confirm {
            Some(c) => with_scenario(counts, c, &confirmed, &missing),
            None => counts,
        };
        ("playback", counts)
    });
    args.judging.write_report(
        "serve",
        &run,
        trace,
        (args.report.as_deref(), stdout_free),
        code.code(),
        playback,
    );
    say!("verdict: {word} (exit {})", code.code());
    code.into()
}

/// The playback counts with `--scenario`'s prediction and what the run showed of it.
fn with_scenario(
    mut counts: serde_json::Value,
    c: &ServeConfirm,
    confirmed: &[&str],
    missing: &[&str],
) -> serde_json::Value {
    counts["scenario"] = serde_json::json!({
        "what": c.what,
        "predicted": c.plan.expected,
        "confirmed": confirmed,
        "not_reproduced": missing,
    });
    counts
}
