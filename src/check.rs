//! One call to check a user's server or client in their own `cargo test`.
//!
//! [`check_server`] runs the reference client against the user's server on the simulated
//! `server` host over a range of seeds and transports, each seed's scenario with its latency,
//! faults and intermediary (or the ones [`CheckOptions`] imposes), and judges every trace with
//! the oracle. [`check_client`] does the same for a user's client against the reference
//! server (stdio). The first run that breaks a MUST rule, crashes or does not settle is
//! returned as a [`CheckFailure`], whose `Display` is the whole report: the seed, each broken
//! rule with its level and spec section, the scenario, the line that reruns exactly that seed,
//! and a Mermaid sequence diagram of the violations.
//!
//! ```no_run
//! use mcp_sim::{check_server, CheckOptions, ServerIo, ServerUnderTest};
//!
//! #[test]
//! fn my_server_handles_cancellation() {
//!     let server = ServerUnderTest::custom(|io| async move {
//!         if let ServerIo::Stdio(stream) = io {
//!             let _ = stream; // my_server::serve(stream).await
//!         }
//!     });
//!     if let Err(failure) = check_server(&server, &CheckOptions::default()) {
//!         panic!("{failure}");
//!     }
//! }
//! ```
//!
//! The rerun line sets `MCP_SIM_SEED` and `MCP_SIM_TRANSPORT` (and `MCP_SIM_TICK_MS` for a
//! tick other than 10 ms): with them set, a check runs that one seed on that transport only,
//! so the user's own test replays the failure. A value that does not parse fails the check
//! with [`CheckError::Environment`] naming the variable ([`crate::repro`]), never a silent
//! default.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use crate::lanes::turmoil::{ClientUnderTest, ServerUnderTest, TurmoilOptions};
use crate::lanes::Lane;
use crate::model::{ClientPolicies, Outcome, Transport};
use crate::oracle::{self, Level, Violation};
use crate::report;
use crate::repro::{EraChoice, Repro, ReproEnv, ReproError};
use crate::run::{judge_with_client, judge_with_server, Judged};
use crate::scenario::{ProxyChoice, Scenario};
use crate::wire::Era;

/// Which runs a check makes.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The seeds (each draws latency, workload, faults, proxy and timeout policies).
    pub seeds: Range<u64>,
    /// The transports each seed runs on (a client check runs on stdio only).
    pub transports: Vec<Transport>,
    /// The intermediary of HTTP runs: each seed's own (the default), none, or a fixed one
    /// (`ProxyChoice::Fixed(ProxyConfig::CLOUDFLARE)`).
    pub proxy: ProxyChoice,
    /// Keep the seed's faults (crashes, partitions, resets); `false` runs without them.
    pub faults: bool,
    /// The turmoil lane: turmoil's tick and which tool the reference client calls with which
    /// arguments (`ToolCalls`).
    pub turmoil: TurmoilOptions,
    /// The eras the reference client speaks, each seed in each (default: 2026-07-28 only).
    /// A legacy run opens with `initialize`, as the legacy hosts do, and is judged by the
    /// legacy rules: on HTTP the client keeps the session the server issues, listens on a GET
    /// stream, resumes a broken stream from its last event id and initializes again after a
    /// 404.
    pub eras: Vec<Era>,
    /// `check_client` only: the timeout policies the client under test declares, per method
    /// (`ClientPolicies::from_spec("tools/call:timeout=1000,reset")`). The client is a black
    /// box, so what it promises is recorded on each request a policy covers and judged there
    /// (`declared-deadline`, `reset-needs-token`); `None` judges no deadline.
    pub client_policy: Option<ClientPolicies>,
}

impl Default for CheckOptions {
    /// Seeds 0 to 31 on both transports, with each seed's own faults and intermediary, the
    /// reference tool `slow_op`.
    fn default() -> Self {
        CheckOptions {
            seeds: 0..32,
            transports: vec![Transport::Stdio, Transport::Http],
            proxy: ProxyChoice::FromSeed,
            faults: true,
            turmoil: TurmoilOptions::default(),
            eras: vec![Era::Modern],
            client_policy: None,
        }
    }
}

/// One run of a check: a seed, on a transport, in an era.
type CheckRun = (u64, Transport, Era);

impl CheckOptions {
    /// The default options over `seeds`.
    pub fn seeds(seeds: Range<u64>) -> Self {
        CheckOptions {
            seeds,
            ..CheckOptions::default()
        }
    }

    /// The runs to make, with the turmoil options they run under: `MCP_SIM_SEED`,
    /// `MCP_SIM_TRANSPORT` and `MCP_SIM_ERA` narrow them to one, `MCP_SIM_TICK_MS` sets the
    /// tick.
    fn runs(&self) -> Result<(Vec<CheckRun>, TurmoilOptions), ReproError> {
        let env = ReproEnv::read()?;
        let seeds: Vec<u64> = match env.seed {
            Some(s) => vec![s],
            None => self.seeds.clone().collect(),
        };
        let runs = seeds
            .into_iter()
            .flat_map(|s| self.transports.iter().map(move |t| (s, *t)))
            .filter(|(_, t)| env.transport.is_none_or(|want| want == *t))
            .flat_map(|(s, t)| self.eras.iter().map(move |e| (s, t, *e)))
            .filter(|(_, _, e)| match env.era {
                None | Some(EraChoice::FromSeed) => true,
                Some(EraChoice::Fixed(want)) => want == *e,
            })
            .collect();
        let mut turmoil = self.turmoil.clone();
        if let Some(tick) = env.tick {
            turmoil.tick = tick;
        }
        Ok((runs, turmoil))
    }

    fn scenario(&self, seed: u64, transport: Transport, era: Era) -> Scenario {
        let mut s = self
            .proxy
            .apply(Scenario::from_seed(seed).with_transport(transport))
            .in_era(era);
        if !self.faults {
            s.faults.clear();
        }
        s
    }
}

/// What a passing check ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckSummary {
    /// Runs made (seeds times transports).
    pub runs: usize,
    /// Requests the client sent.
    pub requests: u64,
    /// How they ended.
    pub outcomes: BTreeMap<Outcome, u64>,
    /// Runs with a SHOULD or policy finding, by rule: reported, not failed.
    pub findings: BTreeMap<&'static str, usize>,
}

/// The first run of a check that broke a MUST rule, crashed or did not settle.
#[derive(Debug, Clone)]
pub struct CheckFailure {
    /// Its seed.
    pub seed: u64,
    /// Its transport.
    pub transport: Transport,
    /// The era the reference client spoke.
    pub era: Era,
    /// The whole scenario.
    pub scenario: Scenario,
    /// The run and its verdict.
    pub judged: Judged,
    /// turmoil's tick.
    pub tick: std::time::Duration,
}

impl CheckFailure {
    /// The MUST violations.
    pub fn violations(&self) -> impl Iterator<Item = &Violation> {
        self.judged
            .verdict
            .violations
            .iter()
            .filter(|v| v.level == Level::Must)
    }

    /// The line that reruns this seed alone: the user's own test, with the seed in the
    /// environment.
    ///
    /// turmoil seeds tokio's scheduler only when tokio is built with `--cfg tokio_unstable`
    /// (this repository's `.cargo/config.toml` sets it): a crate built without it runs the
    /// same seed with another task order, so the line then sets `RUSTFLAGS` itself.
    pub fn rerun_line(&self) -> String {
        let repro = Repro {
            transport: Some(self.transport),
            era: EraChoice::Fixed(self.era),
            ..Repro::seed(self.seed, Lane::Turmoil { tick: self.tick })
        };
        format!(
            "{} {}cargo test <this test> -- --nocapture",
            repro.env_assignments(),
            rustflags_for_replay()
        )
    }
}

/// What a rerun line sets in `RUSTFLAGS`: nothing when this build has `tokio_unstable`, else
/// that flag (see [`CheckFailure::rerun_line`]).
fn rustflags_for_replay() -> &'static str {
    if cfg!(tokio_unstable) {
        ""
    } else {
        "RUSTFLAGS=\"--cfg tokio_unstable\" "
    }
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mcp-sim: seed {} on {}", self.seed, self.transport)?;
        if self.era.is_legacy() {
            write!(f, " ({})", self.era)?;
        }
        writeln!(f, " fails")?;
        if let Some(crash) = &self.judged.crash {
            writeln!(f, "  crash: {crash}")?;
        }
        for v in self.violations() {
            let era = self.judged.verdict.era.era;
            let spec = oracle::rule_info(v.rule).map_or("", |r| r.spec_in(era));
            writeln!(f, "  [{}] {} ({spec}): {}", v.level, v.rule, v.message)?;
        }
        writeln!(f, "scenario: {}", self.scenario)?;
        writeln!(f, "rerun:    {}", self.rerun_line())?;
        let trace = &self.judged.run.trace;
        let report = &self.judged.verdict;
        if !report.is_clean() {
            let events = report::slice(trace, report);
            writeln!(f, "{}", report::mermaid(trace, report, &events))?;
        }
        Ok(())
    }
}

impl std::error::Error for CheckFailure {}

/// Why a check did not pass.
#[derive(Debug, Clone)]
pub enum CheckError {
    /// A run broke a MUST rule, crashed or did not settle: the whole report.
    Failed(Box<CheckFailure>),
    /// A reproduction variable (`MCP_SIM_SEED`, ...) is set to something it cannot mean.
    Environment(ReproError),
    /// No run was made (no seeds, no transports, or `MCP_SIM_TRANSPORT` names one the check
    /// does not run): a check that exercised nothing does not pass.
    NothingRan,
}

impl CheckError {
    /// The failing run, if a run failed.
    pub fn failure(&self) -> Option<&CheckFailure> {
        match self {
            CheckError::Failed(f) => Some(f),
            CheckError::Environment(_) | CheckError::NothingRan => None,
        }
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Failed(failure) => failure.fmt(f),
            CheckError::Environment(e) => write!(f, "mcp-sim: {e}"),
            CheckError::NothingRan => {
                f.write_str("mcp-sim: the check made no run (no seeds or transports left to run)")
            }
        }
    }
}

impl std::error::Error for CheckError {}

/// Checks a user's server: every run of `options`, judged; the first failing one is the error.
pub fn check_server(
    server: &ServerUnderTest,
    options: &CheckOptions,
) -> Result<CheckSummary, CheckError> {
    check(options, &options.transports, |scenario, turmoil| {
        judge_with_server(scenario, turmoil, server)
    })
}

/// Checks a user's client against the reference server, over stdio.
pub fn check_client(
    client: &ClientUnderTest,
    options: &CheckOptions,
) -> Result<CheckSummary, CheckError> {
    check(options, &[Transport::Stdio], |scenario, turmoil| {
        judge_with_client(scenario, turmoil, client, options.client_policy.as_ref())
    })
}

fn check(
    options: &CheckOptions,
    transports: &[Transport],
    judge: impl Fn(&Scenario, &TurmoilOptions) -> Judged,
) -> Result<CheckSummary, CheckError> {
    let (runs, turmoil) = options.runs().map_err(CheckError::Environment)?;
    let mut summary = CheckSummary::default();
    for (seed, transport, era) in runs {
        if !transports.contains(&transport) {
            continue;
        }
        let scenario = options.scenario(seed, transport, era);
        let judged = judge(&scenario, &turmoil);
        if judged.fails() {
            return Err(CheckError::Failed(Box::new(CheckFailure {
                seed,
                transport,
                era,
                scenario,
                judged,
                tick: turmoil.tick,
            })));
        }
        summary.runs += 1;
        let stats = &judged.run.stats;
        summary.requests += stats.requests;
        for (o, n) in &stats.outcomes {
            *summary.outcomes.entry(*o).or_default() += n;
        }
        for r in judged.rules() {
            *summary.findings.entry(r).or_default() += 1;
        }
    }
    if summary.runs == 0 {
        return Err(CheckError::NothingRan);
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    /// A build without `tokio_unstable` (a user's crate without this repository's
    /// `.cargo/config.toml`) tells the rerun line to set it; this one has it.
    #[test]
    fn the_rerun_line_sets_tokio_unstable_only_when_the_build_lacks_it() {
        let prefix = super::rustflags_for_replay();
        assert_eq!(prefix.is_empty(), cfg!(tokio_unstable));
        if !prefix.is_empty() {
            assert_eq!(prefix, "RUSTFLAGS=\"--cfg tokio_unstable\" ");
        }
    }
}
