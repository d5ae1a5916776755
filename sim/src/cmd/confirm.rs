//! `probe --scenario FILE [--perturb-seed N]` and `check-proxy --scenario ...`: a scenario's
//! run, or one of its neighbours (`sweep --around`), sent to the real peer to confirm what the
//! simulation predicts ([`mcp_sim::fit::live`]). A real run is on the wall clock, so a
//! prediction gets up to `--attempts` runs: the first that breaks a predicted rule confirms
//! it; none that does is reported as not reproduced (inconclusive, exit 3), never as a pass;
//! a neighbour whose knobs the live tools cannot set is not executable live (exit 3).

use std::process::ExitCode;

use mcp_sim::fit::live::{self, LivePlan};
use mcp_sim::lanes::live::probe::{findings::Finding, ProbeConfig, ProbeEra};
use mcp_sim::lanes::Lane;
use mcp_sim::model::Transport;
use mcp_sim::oracle::{self, OracleConfig};
use mcp_sim::scenario::around::PerturbSpec;
use mcp_sim::scenario::file::ScenarioFile;
use mcp_sim::trace::Trace;
use mcp_sim::wire::Era;

use super::probe::Options;

/// The finding of a prediction no attempt showed.
pub(crate) const NOT_REPRODUCED: &str = "not-reproduced";
/// The finding of a neighbour the live tools cannot run.
pub(crate) const NOT_EXECUTABLE: &str = "not-executable-live";

/// A scenario's live plan and where it came from.
pub(crate) struct Confirm {
    pub(crate) plan: LivePlan,
    /// For the report: `FILE` or `FILE neighbour N`.
    pub(crate) what: String,
    pub(crate) attempts: u32,
}

/// `--scenario`'s plan against a target on `transport` (`tag`: number the tool calls, as
/// check-proxy pairs the hops by them); `Ok(None)` without `--scenario`; `Err` with the exit
/// code when the file is bad or the neighbour is not executable live (already reported).
pub(crate) fn prepare(
    options: &Options,
    transport: Transport,
    tag: bool,
) -> Result<Option<Confirm>, ExitCode> {
    let Some(path) = &options.scenario else {
        return Ok(None);
    };
    let bad = |e: String| {
        eprintln!("mcp-sim: {e}");
        ExitCode::from(2)
    };
    let spec = match options.perturb.as_deref().map(PerturbSpec::parse) {
        Some(Err(e)) => return Err(bad(format!("--perturb: {e}"))),
        Some(Ok(spec)) => spec,
        None => PerturbSpec::default(),
    };
    let file = ScenarioFile::read(path).map_err(|e| bad(e.to_string()))?;
    let what = match options.perturb_seed {
        Some(n) => format!("{} neighbour {n}", path.display()),
        None => path.display().to_string(),
    };
    // A two-hop scenario needs the intermediary, which only turmoil's lane has.
    let lane = if file.scenario.bridge {
        Lane::Turmoil {
            tick: mcp_sim::repro::DEFAULT_TICK,
        }
    } else {
        Lane::Memory
    };
    if let Some(n) = options.perturb_seed {
        eprintln!("{what}: {}", live::changes(&file, n, &spec).join("; "));
    }
    match live::plan(&file, options.perturb_seed, &spec, transport, tag, lane) {
        Ok(plan) => {
            for note in &plan.notes {
                eprintln!("{what}: {note}");
            }
            let predicted = match plan.expected.is_empty() {
                true => "nothing beyond the scenario's own verdict".to_string(),
                false => plan.expected.join(", "),
            };
            eprintln!("{what}: the simulation predicts {predicted}");
            Ok(Some(Confirm {
                plan,
                what,
                attempts: options.attempts.max(1),
            }))
        }
        Err(not) => {
            match options.format {
                crate::args::Format::Json => println!(
                    "{}",
                    serde_json::json!({
                        "scenario": what,
                        "verdict": "inconclusive",
                        "exit_code": 3,
                        "findings": [{
                            "finding": NOT_EXECUTABLE,
                            "kind": "inconclusive",
                            "message": not.to_string(),
                        }],
                    })
                ),
                _ => println!("{what}: {NOT_EXECUTABLE} (inconclusive): {not}"),
            }
            Err(ExitCode::from(3))
        }
    }
}

impl Confirm {
    /// Sets the plan on the probe's configuration: the calls, the era, and over HTTP the
    /// relay's latency and proxy.
    pub(crate) fn configure(&self, config: &mut ProbeConfig) {
        config.from = Some(std::sync::Arc::new(self.plan.recording.clone()));
        config.era = match (self.plan.auto, self.plan.era) {
            (true, _) => ProbeEra::Auto,
            (false, Era::Modern) => ProbeEra::Modern,
            (false, Era::Legacy(r)) => ProbeEra::Legacy(r),
        };
        if let Some(latency) = self.plan.latency_ms {
            config.latency_ms = Some(latency);
        }
        if let Some(proxy) = self.plan.proxy {
            config.proxy = Some(proxy);
        }
    }

    /// Runs `attempt` until a run breaks a predicted rule or the attempts are spent; returns
    /// the confirming run (else the last) and the finding to add when none confirmed.
    pub(crate) fn run<R>(
        &self,
        oracle: &OracleConfig,
        mut attempt: impl FnMut() -> Result<R, ExitCode>,
        trace_of: impl Fn(&R) -> &Trace,
    ) -> Result<(R, Option<Finding>), ExitCode> {
        let expected = &self.plan.expected;
        let tries = if expected.is_empty() {
            1
        } else {
            self.attempts
        };
        let mut k = 0;
        loop {
            k += 1;
            let run = attempt()?;
            let verdict = oracle::check(trace_of(&run), oracle);
            let rules: Vec<&str> = verdict.violations.iter().map(|v| v.rule).collect();
            let hit: Vec<&str> = expected
                .iter()
                .copied()
                .filter(|r| rules.contains(r))
                .collect();
            if !hit.is_empty() {
                eprintln!(
                    "{}: confirmed {} on attempt {k} of at most {tries}",
                    self.what,
                    hit.join(", ")
                );
                return Ok((run, None));
            }
            if expected.is_empty() {
                return Ok((run, None));
            }
            eprintln!(
                "{}: attempt {k} of {tries} did not break {}",
                self.what,
                expected.join(", ")
            );
            if k >= tries {
                let finding = Finding {
                    finding: NOT_REPRODUCED,
                    kind: "inconclusive",
                    message: format!(
                        "the simulation predicts {} for {}; not reproduced in {tries} attempt(s)",
                        expected.join(", "),
                        self.what
                    ),
                };
                return Ok((run, Some(finding)));
            }
        }
    }
}
