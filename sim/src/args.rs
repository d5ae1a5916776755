//! Flags and settings that several commands share: the lane, the overrides a replay line
//! carries, the oracle profile, the output format, seed ranges.

use std::fmt::Write as _;
use std::time::Duration;

use clap::ValueEnum;
use mcp_sim::lanes::live::serve::{HttpFront, HttpLimits};
use mcp_sim::lanes::Lane;
use mcp_sim::model::Transport;
use mcp_sim::mutants::Mutant;
use mcp_sim::oracle::{OracleConfig, Profile, Verdict};
use mcp_sim::repro::{EraChoice, Repro, DEFAULT_TICK};
use mcp_sim::scenario::ProxyChoice;
use mcp_sim::Era;
use serde::Serialize;

/// Which reading of the spec's ambiguous points to judge by.
#[derive(Clone, Copy, ValueEnum)]
pub enum ProfileArg {
    /// The binding pages' MUSTs, strictly increasing progress.
    Strict,
    /// Non-decreasing progress, SHOULD for messages after a cancel.
    Lenient,
}

/// Output format.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// Human-readable lines.
    Text,
    /// One JSON object.
    Json,
    /// JUnit XML: a test case per rule per run (see `mcp_sim::ci`).
    Junit,
    /// GitHub workflow annotations: `::error title=RULE::...` per violation.
    Github,
}

/// How the live commands (`serve`, `record`) judge what they recorded.
#[derive(clap::Args, Clone, Copy)]
pub struct Judging {
    /// Which reading of the spec's ambiguous points to judge by.
    #[arg(long, value_enum, default_value_t = ProfileArg::Strict)]
    pub profile: ProfileArg,
    /// Grace window in ms: for a cancel to reach the server after a deadline, for work to stop
    /// after a cancel, for inferring an unrecorded side's observations.
    #[arg(long, default_value_t = OracleConfig::default().grace_ms)]
    pub grace_ms: u64,
    /// What `--report` holds: the JSON verdict, JUnit XML (a test case per rule of the era
    /// spoken) or GitHub workflow annotations. Without `--report`, JUnit and annotations go
    /// to stdout over HTTP and to stderr over stdio (stdout carries the protocol there).
    #[arg(long, value_enum, default_value_t = ReportFormat::Json)]
    pub format: ReportFormat,
}

/// `--format` of `serve` and `record`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// The object `check-trace --format json` prints.
    Json,
    /// JUnit XML (see `mcp_sim::ci`).
    Junit,
    /// GitHub workflow annotations.
    Github,
}

impl Judging {
    /// The oracle settings.
    pub fn config(&self) -> OracleConfig {
        oracle_config(self.profile, self.grace_ms)
    }

    /// Writes the verdict of `run` in `--format` to `report` (or, for JUnit and annotations
    /// without a file, to stdout when `stdout_free`, else stderr); `exit_code` is the one the
    /// process exits with, and `extra` one more member of the JSON verdict. A file that
    /// cannot be written is said on stderr.
    pub fn write_report(
        &self,
        tool: &str,
        run: &mcp_sim::ci::CiRun<'_>,
        trace: &mcp_sim::trace::Trace,
        (report, stdout_free): (Option<&std::path::Path>, bool),
        exit_code: u8,
        extra: Option<(&str, serde_json::Value)>,
    ) {
        let text = match self.format {
            ReportFormat::Json => with_member(json_verdict(trace, run, exit_code), extra) + "\n",
            ReportFormat::Junit => {
                mcp_sim::ci::junit(&format!("mcp-sim {tool}"), std::slice::from_ref(run))
            }
            ReportFormat::Github => mcp_sim::ci::github(std::slice::from_ref(run)),
        };
        match report {
            Some(path) => {
                if let Err(e) = std::fs::write(path, text) {
                    eprintln!("mcp-sim {tool}: cannot write {}: {e}", path.display());
                }
            }
            None if self.format == ReportFormat::Json => {}
            None if stdout_free => print!("{text}"),
            // A closed stderr (a client that closed the pipe it gave) loses the text, not the run.
            None => {
                use std::io::Write as _;
                let _ = write!(std::io::stderr(), "{text}");
            }
        }
    }
}

/// `json`, a JSON object, with one more member when there is one (`serve --from`'s playback
/// counts).
fn with_member(json: String, extra: Option<(&str, serde_json::Value)>) -> String {
    let Some((name, value)) = extra else {
        return json;
    };
    match serde_json::from_str::<serde_json::Value>(&json) {
        Ok(serde_json::Value::Object(mut object)) => {
            object.insert(name.into(), value);
            serde_json::Value::Object(object).to_string()
        }
        _ => json,
    }
}

/// The oracle settings of `--profile` and `--grace-ms`, shared by `check-trace` and `probe`.
pub(crate) fn oracle_config(profile: ProfileArg, grace_ms: u64) -> OracleConfig {
    OracleConfig {
        profile: match profile {
            ProfileArg::Strict => Profile::Strict,
            ProfileArg::Lenient => Profile::Lenient,
        },
        grace_ms,
        ..OracleConfig::default()
    }
}

/// `check-trace --format json`'s object: whether no MUST rule is broken, the number of events,
/// the violations. `serve --report` writes the same.
pub(crate) fn json_verdict(
    trace: &mcp_sim::trace::Trace,
    run: &mcp_sim::ci::CiRun<'_>,
    exit_code: u8,
) -> String {
    #[derive(Serialize)]
    struct JsonVerdict<'a> {
        ok: bool,
        exit_code: u8,
        #[serde(skip_serializing_if = "Option::is_none")]
        baseline: Option<JsonBaseline<'a>>,
        events: usize,
        era: &'static str,
        era_reading: String,
        violations: Vec<JsonViolation<'a>>,
        /// Why the run did not pass beyond its rules (a cut trace, nothing exercised).
        #[serde(skip_serializing_if = "Option::is_none")]
        inconclusive: Option<&'a str>,
    }
    let verdict = run.verdict;
    let out = JsonVerdict {
        ok: exit_code == 0,
        exit_code,
        baseline: run.baseline.as_ref().map(|(_, d)| JsonBaseline::of(d)),
        events: trace.events.len(),
        era: verdict.era.era.version(),
        era_reading: verdict.describe_era(),
        violations: json_violations(verdict),
        inconclusive: match &run.outcome {
            Some(mcp_sim::ci::RunOutcome::Inconclusive(why)) => Some(why),
            _ => None,
        },
    };
    serde_json::to_string(&out).expect("verdict serializes")
}

/// How a run compares with its baseline, as JSON: whether it agrees, the unlisted failing
/// findings and the listed ones that no longer occur.
#[derive(Serialize)]
pub(crate) struct JsonBaseline<'a> {
    agrees: bool,
    unexpected: &'a [String],
    stale: &'a [String],
}

impl<'a> JsonBaseline<'a> {
    pub(crate) fn of(d: &'a mcp_sim::ci::BaselineDiff) -> Self {
        JsonBaseline {
            agrees: d.is_clean(),
            unexpected: &d.unexpected,
            stale: &d.stale,
        }
    }
}

/// One violation as JSON: rule, level, where the spec says it (in the era judged), event
/// indices (decisive last), message.
#[derive(Serialize)]
pub(crate) struct JsonViolation<'a> {
    rule: &'a str,
    level: &'a str,
    spec: &'static str,
    events: &'a [usize],
    message: &'a str,
    /// In a two-hop trace, the hop a one-hop rule was broken on (`front`, `back`).
    #[serde(skip_serializing_if = "Option::is_none")]
    hop: Option<&'static str>,
    /// On an upstream hop of several connections, which one.
    #[serde(skip_serializing_if = "Option::is_none")]
    conn: Option<u32>,
}

/// Says on stderr, for each violation the judge found against one of mcp-sim's own reference
/// peers, that it is a defect of mcp-sim's, not the intermediary's (see
/// `OracleConfig::reference_ends`); such lines never change the exit code.
pub(crate) fn report_judge_defects(verdict: &Verdict) {
    for v in &verdict.judge_defects {
        eprintln!(
            "mcp-sim: internal: the judge blamed a reference peer, which cannot be at fault \
             (a defect of mcp-sim's reading of this trace; please report it with the trace): {v}"
        );
    }
}

/// The judge's defects of `verdict` ([`report_judge_defects`]) as JSON values, for the
/// tests that hold them to none.
pub(crate) fn json_judge_defects(verdict: &Verdict) -> Vec<JsonViolation<'_>> {
    verdict
        .judge_defects
        .iter()
        .map(|v| JsonViolation {
            rule: v.rule,
            level: v.level.as_str(),
            spec: "",
            events: &v.events,
            message: &v.message,
            hop: v.hop.map(|h| h.as_str()),
            conn: v.conn,
        })
        .collect()
}

/// The violations of `verdict` as JSON values.
pub(crate) fn json_violations(verdict: &Verdict) -> Vec<JsonViolation<'_>> {
    verdict
        .violations
        .iter()
        .map(|v| JsonViolation {
            rule: v.rule,
            level: v.level.as_str(),
            spec: mcp_sim::oracle::rule_info(v.rule).map_or("", |r| {
                // A rule broken on the upstream hop is judged in its connection's era.
                r.spec_in(verdict.era_of(v))
            }),
            events: &v.events,
            message: &v.message,
            hop: v.hop.map(|h| h.as_str()),
            conn: v.conn,
        })
        .collect()
}

/// Which transport to run each seed on.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// As drawn from the seed.
    Seed,
    /// stdio only.
    Stdio,
    /// Streamable HTTP only.
    Http,
    /// Each seed on both.
    Both,
}

/// Which driver runs the scenario.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LaneArg {
    /// turmoil: simulated hosts, TCP, hyper, proxies, crashes (the full simulation).
    Turmoil,
    /// The in-memory discrete-event driver: the same model and oracle, about 50x faster.
    Memory,
}

/// The driver and its settings; part of every replay line.
#[derive(clap::Args, Clone)]
pub struct LaneOptions {
    /// Driver.
    #[arg(long, value_enum, default_value_t = LaneArg::Turmoil)]
    pub(crate) lane: LaneArg,
    /// turmoil tick in milliseconds.
    #[arg(long, default_value_t = DEFAULT_TICK.as_millis() as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) tick_ms: u64,
}

impl LaneOptions {
    pub(crate) fn lane(&self) -> Lane {
        match self.lane {
            LaneArg::Turmoil => Lane::Turmoil {
                tick: Duration::from_millis(self.tick_ms),
            },
            LaneArg::Memory => Lane::Memory,
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self.lane {
            LaneArg::Turmoil => format!("turmoil, {} ms tick", self.tick_ms),
            LaneArg::Memory => "in-memory driver".to_string(),
        }
    }

    pub(crate) fn flags(&self) -> String {
        let mut out = String::new();
        if self.lane == LaneArg::Memory {
            out.push_str(" --lane memory");
        }
        if self.tick_ms != DEFAULT_TICK.as_millis() as u64 {
            let _ = write!(out, " --tick-ms {}", self.tick_ms);
        }
        out
    }
}

/// Knobs that override what the seed draws; part of the replay line.
#[derive(clap::Args, Clone)]
pub struct Overrides {
    #[command(flatten)]
    pub(crate) lane: LaneOptions,
    /// Transport.
    #[arg(long, value_enum, default_value_t = TransportArg::Seed)]
    pub(crate) transport: TransportArg,
    /// Intermediary: an idle-timeout proxy on HTTP (nginx, alb, cloudflare, custom:SECONDS),
    /// none, `bridge` (the reference MCP intermediary, stdio on both hops, turmoil lane) or
    /// `era-bridge` (its 2026-07-28 HTTP front before a 2025-11-25 stdio upstream).
    #[arg(long)]
    pub(crate) proxy: Option<String>,
    /// Run a mutant (see `mcp-sim mutants`) instead of the reference peers.
    #[arg(long)]
    pub(crate) mutant: Option<String>,
    /// The era the client speaks: `seed` (drawn per seed: a third of the seeds speak a
    /// legacy revision), `modern` (2026-07-28), `legacy` (2025-11-25, or a revision's date)
    /// or `both` (each seed in the modern era and in 2025-11-25); the reference server speaks
    /// both.
    #[arg(long, default_value = "seed")]
    pub(crate) era: EraArg,
}

/// `--era`: one choice, or each seed in both eras.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EraArg {
    /// The seed's era or a fixed one.
    One(EraChoice),
    /// The modern era and 2025-11-25.
    Both,
    /// `server/discover` first, then `initialize`: a virtual run's client, as `probe`'s.
    Auto,
}

impl std::str::FromStr for EraArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "both" => Ok(EraArg::Both),
            "auto" => Ok(EraArg::Auto),
            other => other.parse().map(EraArg::One).map_err(|_| {
                format!("unknown era {other:?}: seed, both, modern, legacy or a revision's date (2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26)")
            }),
        }
    }
}

impl Overrides {
    /// Checks the names given on the command line.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.era == EraArg::Auto {
            return Err("--era auto is for --virtual runs (the reference client's era is drawn from the seed, or fixed)".into());
        }
        let proxy = self.proxy()?;
        if matches!(proxy, ProxyChoice::Bridge | ProxyChoice::EraBridge)
            && matches!(self.lane.lane(), mcp_sim::lanes::Lane::Memory)
        {
            return Err(format!(
                "--proxy {proxy}: the intermediary's host exists on the turmoil lane only"
            ));
        }
        if proxy == ProxyChoice::Bridge
            && matches!(self.transport, TransportArg::Http | TransportArg::Both)
        {
            return Err(
                "--proxy bridge: the bridge's hops are stdio; leave --transport out or give stdio"
                    .into(),
            );
        }
        if proxy == ProxyChoice::EraBridge {
            if matches!(self.transport, TransportArg::Stdio | TransportArg::Both) {
                return Err("--proxy era-bridge: its front is Streamable HTTP; leave --transport out or give http".into());
            }
            if !matches!(
                self.era,
                EraArg::One(EraChoice::FromSeed) | EraArg::One(EraChoice::Fixed(Era::Modern))
            ) {
                return Err("--proxy era-bridge: its front speaks 2026-07-28 and its upstream 2025-11-25; leave --era out or give modern".into());
            }
        }
        self.mutant()?;
        Ok(())
    }

    /// The eras each seed runs in.
    pub(crate) fn eras(&self) -> Vec<EraChoice> {
        match self.era {
            EraArg::One(e) => vec![e],
            EraArg::Auto => vec![EraChoice::FromSeed],
            EraArg::Both => vec![EraChoice::Fixed(Era::Modern), EraChoice::Fixed(Era::LEGACY)],
        }
    }

    pub(crate) fn transports(&self) -> Vec<Option<Transport>> {
        match self.transport {
            TransportArg::Seed => vec![None],
            TransportArg::Stdio => vec![Some(Transport::Stdio)],
            TransportArg::Http => vec![Some(Transport::Http)],
            TransportArg::Both => vec![Some(Transport::Stdio), Some(Transport::Http)],
        }
    }

    pub(crate) fn proxy(&self) -> Result<ProxyChoice, String> {
        match self.proxy.as_deref() {
            None => Ok(ProxyChoice::FromSeed),
            Some(name) => {
                ProxyChoice::parse(name).ok_or_else(|| format!("unknown proxy preset {name:?}"))
            }
        }
    }

    pub(crate) fn mutant(&self) -> Result<Option<Mutant>, String> {
        match self.mutant.as_deref() {
            None => Ok(None),
            Some(name) => Mutant::from_name(name)
                .map(Some)
                .ok_or_else(|| format!("unknown mutant {name:?}")),
        }
    }

    /// The run of `seed` on `transport` (`None`: the seed's) with these overrides; call
    /// [`Overrides::validate`] first (names that do not parse are left out here).
    pub(crate) fn repro(&self, seed: u64, transport: Option<Transport>, era: EraChoice) -> Repro {
        Repro {
            seed,
            transport,
            lane: self.lane.lane(),
            proxy: self.proxy().unwrap_or_default(),
            mutant: self.mutant().ok().flatten(),
            era,
        }
    }

    /// The lane and the overrides as flags (shards of one sweep must agree on them).
    pub(crate) fn setup(&self) -> String {
        let transport = self
            .transport
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
        let mut out = format!("--transport {transport}{}", self.lane.flags());
        if let Some(p) = &self.proxy {
            let _ = write!(out, " --proxy {p}");
        }
        if let Some(m) = &self.mutant {
            let _ = write!(out, " --mutant {m}");
        }
        match self.era {
            EraArg::One(EraChoice::FromSeed) => {}
            EraArg::One(EraChoice::Fixed(era)) => {
                let _ = write!(out, " --era {}", era.version());
            }
            EraArg::Both => out.push_str(" --era both"),
            EraArg::Auto => out.push_str(" --era auto"),
        }
        out
    }
}

/// `--era` of `serve` and `--upstream-era` of `check-proxy`: the words of
/// [`mcp_sim::model::ServerEras`], listed in the help.
pub(crate) fn server_eras(
) -> impl clap::builder::TypedValueParser<Value = mcp_sim::model::ServerEras> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(mcp_sim::model::ServerEras::WORDS)
        .map(|word| word.parse().expect("a listed word names eras"))
}

/// A seed range `A..B` (B excluded), or a single seed.
pub(crate) fn parse_range(s: &str) -> Result<(u64, u64), String> {
    match s.split_once("..") {
        Some((a, b)) => {
            let a = a.parse().map_err(|_| format!("bad range start in {s:?}"))?;
            let b = b.parse().map_err(|_| format!("bad range end in {s:?}"))?;
            if b <= a {
                return Err(format!("empty range {s:?}"));
            }
            Ok((a, b))
        }
        None => s
            .parse()
            .map(|a: u64| (a, a + 1))
            .map_err(|_| format!("expected A..B or a seed, got {s:?}")),
    }
}

/// Reads `--baseline FILE`, when given (see `mcp_sim::ci::Baseline`); `known` tells the names that may
/// appear. The error names the file and the line.
pub(crate) fn read_baseline(
    path: Option<&std::path::Path>,
    known: impl Fn(&str) -> bool,
) -> Result<Option<mcp_sim::ci::Baseline>, String> {
    path.map(|p| read_baseline_file(p, known)).transpose()
}

fn read_baseline_file(
    path: &std::path::Path,
    known: impl Fn(&str) -> bool,
) -> Result<mcp_sim::ci::Baseline, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--baseline: cannot read {}: {e}", path.display()))?;
    mcp_sim::ci::Baseline::parse(&text, known)
        .map_err(|e| format!("--baseline: {}: {e}", path.display()))
}

/// What an HTTP listener of mcp-sim serves (`serve --http`, `record --http`): its
/// `Host`/`Origin` policy and its bounds.
#[derive(clap::Args, Clone)]
pub struct FrontArgs {
    /// HTTP: also serve requests whose `Host` names HOST (repeatable). By default a
    /// loopback listener serves only loopback names (`localhost`, `127.0.0.1`, `[::1]`, any
    /// port) and another listener only its own address; anything else is refused with 403
    /// (DNS-rebinding protection).
    #[arg(long, value_name = "HOST")]
    allow_host: Vec<String>,
    /// HTTP: also serve requests whose `Origin` is ORIGIN (`scheme://host[:port]`,
    /// repeatable).
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// HTTP: the largest request body read, in bytes; a larger one is answered 413.
    #[arg(long, default_value_t = HttpLimits::default().max_body_bytes)]
    max_body_bytes: usize,
    /// HTTP: the largest header block read, in bytes (at least 8192); a larger one is
    /// answered 431.
    #[arg(long, default_value_t = HttpLimits::default().max_header_bytes)]
    max_header_bytes: usize,
    /// HTTP: connections open at once; one more is answered 503 and closed.
    #[arg(long, default_value_t = HttpLimits::default().max_connections)]
    max_connections: usize,
}

impl FrontArgs {
    /// The front these flags describe.
    pub fn http_front(&self) -> HttpFront {
        HttpFront {
            allow_hosts: self.allow_host.clone(),
            allow_origins: self.allow_origin.clone(),
            limits: HttpLimits {
                max_body_bytes: self.max_body_bytes,
                max_header_bytes: self.max_header_bytes,
                max_connections: self.max_connections,
                ..HttpLimits::default()
            },
        }
    }
}

/// `--hop` of the commands that play one hop of a two-hop recording.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum HopArg {
    /// The intermediary's front.
    Front,
    /// The upstream.
    Back,
}

impl HopArg {
    /// The trace's hop this names.
    pub fn hop(self) -> mcp_sim::trace::Hop {
        match self {
            HopArg::Front => mcp_sim::trace::Hop::Front,
            HopArg::Back => mcp_sim::trace::Hop::Back,
        }
    }
}

/// A recording (`--from`): the trace and its reading, or why it cannot be read.
pub fn read_recording(
    path: &std::path::Path,
    hop: Option<HopArg>,
) -> Result<(mcp_sim::trace::Trace, mcp_sim::recording::Recording), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--from: cannot read {}: {e}", path.display()))?;
    let trace = mcp_sim::trace::Trace::from_jsonl(&text)
        .map_err(|e| format!("--from {}: {e}", path.display()))?;
    let hop = hop.map(HopArg::hop);
    let recording = mcp_sim::recording::read(&trace, hop)
        .map_err(|e| format!("--from {}: {e}", path.display()))?;
    Ok((trace, recording))
}

/// A mutant's name (`mcp-sim mutants --list`).
pub(crate) fn parse_mutant(s: &str) -> Result<Mutant, String> {
    Mutant::from_name(s).ok_or_else(|| format!("unknown mutant {s:?} (mcp-sim mutants --list)"))
}

/// `server`, `client` or `intermediary`: the side of a real peer.
pub(crate) fn parse_side(s: &str) -> Result<mcp_sim::model::mutant::MutantSide, String> {
    use mcp_sim::model::mutant::MutantSide;
    match s.trim() {
        "server" => Ok(MutantSide::Server),
        "client" => Ok(MutantSide::Client),
        "intermediary" => Ok(MutantSide::Intermediary),
        other => Err(format!(
            "unknown side {other:?}: server, client or intermediary"
        )),
    }
}

/// `--trace FILE` of a live command, opened before the run so that a folder that cannot be
/// written stops it at once (exit 2); `by` names the recorder in the file's begin line.
pub(crate) fn open_trace(
    path: Option<&std::path::Path>,
    by: &str,
) -> Result<Option<mcp_sim::lanes::live::TraceFile>, String> {
    path.map(|p| mcp_sim::lanes::live::TraceFile::create(p, by))
        .transpose()
        .map_err(|e| e.to_string())
}

/// Ends a live command's trace file with `reason`; false (having said why, naming the file)
/// when it could not be written whole: the command then exits 4 ([`Exit::OwnFault`]), but
/// `record` on stdio, which exits as its server did.
///
/// [`Exit::OwnFault`]: mcp_sim::exit::Exit::OwnFault
pub(crate) fn end_trace(file: Option<&mcp_sim::lanes::live::TraceFile>, reason: &str) -> bool {
    match file.map(|f| f.finish(reason)) {
        Some(Err(e)) => {
            say!("mcp-sim: {e}: the trace is incomplete");
            false
        }
        _ => true,
    }
}
