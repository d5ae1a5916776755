//! Confirming a prediction live: a scenario's run, or one of its neighbours (`sweep
//! --around`), sent to the real peer ([`super::live`]) until it shows what the simulation
//! predicts (`probe --scenario`, `check-proxy --scenario`, `serve --scenario`).
//!
//! A real run is on the wall clock, so a prediction gets up to `attempts` runs: the first run
//! that breaks a predicted rule confirms that rule, and the attempts go on until every
//! predicted rule is confirmed; one no run showed is [`NOT_REPRODUCED`] (inconclusive, exit
//! 3), never a pass. The fitted timing is only as exact as the recording's clock and the
//! simulation's tick, and a race's window can be a millisecond wide, so the attempts scan it:
//! attempt `k` moves every planned cancel by the `k`-th of 0, +1, −1, +2, … ms within
//! `scan_ms` ([`scan_offset`]). A neighbour whose knobs the live tools cannot set is
//! [`NOT_EXECUTABLE`] (exit 3).
//!
//! A client under `serve --scenario` is launched once per run (it launches `serve`, or
//! connects to it), so there a run is one attempt and the caller repeats it with its attempt
//! number ([`ServeConfirm`]).

use std::path::Path;
use std::sync::Arc;

use super::live::{self, LivePlan, NotExecutable, ServePlan};
use crate::exit::{Exit, Finding, FindingKind};
use crate::lanes::live::probe::ProbeConfig;
use crate::lanes::Lane;
use crate::model::recorded::Recording;
use crate::model::{Mutant, Transport};
use crate::oracle::{self, OracleConfig, Verdict};
use crate::scenario::around::PerturbSpec;
use crate::scenario::file::ScenarioFile;
use crate::trace::Trace;

/// The finding of a prediction no attempt showed.
pub const NOT_REPRODUCED: &str = "not-reproduced";
/// The finding of a neighbour the live tools cannot run.
pub const NOT_EXECUTABLE: &str = "not-executable-live";

/// How early a real client's cancel may come and still cross what the simulated server had
/// sent when it read the moved one (`serve --scenario`): the cancel scan's reach and a loaded
/// machine's timer.
pub const CROSSING: std::time::Duration = std::time::Duration::from_millis(50);

/// The step of the cancel scan, in ms.
const SCAN_STEP_MS: i64 = 1;

/// How far attempt `k` (1-based) moves every planned cancel: 0, +1, −1, +2, −2, … ms, within
/// `±scan_ms`, then over again.
pub fn scan_offset(k: u32, scan_ms: u64) -> i64 {
    let reach = scan_ms as i64 / SCAN_STEP_MS;
    let i = i64::from(k.max(1) - 1) % (2 * reach + 1);
    match i {
        0 => 0,
        i if i % 2 == 1 => SCAN_STEP_MS * (i + 1) / 2,
        i => -SCAN_STEP_MS * i / 2,
    }
}

/// Why a prediction cannot be sent to the live peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfirmError {
    /// The scenario file or the perturbation spec cannot be used (a usage error).
    Input(String),
    /// The neighbour has knobs the live tools cannot set (inconclusive).
    NotExecutable {
        /// The run's name (`FILE neighbour N ...`).
        what: String,
        /// Which knobs.
        why: NotExecutable,
        /// What the neighbour changes, in words (said before the verdict).
        notes: Vec<String>,
    },
}

impl ConfirmError {
    /// The command's exit code for it.
    pub fn exit(&self) -> Exit {
        match self {
            ConfirmError::Input(_) => Exit::Usage,
            ConfirmError::NotExecutable { .. } => Exit::Inconclusive,
        }
    }
}

impl std::fmt::Display for ConfirmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfirmError::Input(e) => f.write_str(e),
            ConfirmError::NotExecutable { what, why, .. } => {
                write!(f, "{what}: {NOT_EXECUTABLE} (inconclusive): {why}")
            }
        }
    }
}

impl std::error::Error for ConfirmError {}

/// Which scenario run to confirm: a file, perhaps one of its neighbours, perhaps with a
/// behaviour of the peer assumed.
#[derive(Debug, Clone, Copy)]
pub struct Pick<'a> {
    /// The scenario file (`mcp-sim fit`'s output).
    pub path: &'a Path,
    /// The knobs a neighbour may move (`sweep --around --perturb`'s spec).
    pub perturb: Option<&'a str>,
    /// The neighbour's perturbation seed (`None`: the scenario itself).
    pub perturb_seed: Option<u64>,
    /// A behaviour of the peer assumed (a hypothesis `sweep --around --hypotheses` printed).
    pub hypothesis: Option<Mutant>,
}

/// A picked scenario, read.
struct Picked {
    file: ScenarioFile,
    spec: PerturbSpec,
    /// For the report: `FILE [neighbour N] [if the ROLE behaves as M]`.
    what: String,
}

impl Pick<'_> {
    /// Reads the file (with the hypothesis on) and the perturbation spec; `role` names the
    /// peer in the run's name.
    fn read(&self, role: &str) -> Result<Picked, ConfirmError> {
        let spec = match self.perturb.map(PerturbSpec::parse) {
            Some(Err(e)) => return Err(ConfirmError::Input(format!("--perturb: {e}"))),
            Some(Ok(spec)) => spec,
            None => PerturbSpec::default(),
        };
        let mut file =
            ScenarioFile::read(self.path).map_err(|e| ConfirmError::Input(e.to_string()))?;
        file.scenario = super::neighbours::assuming(&file.scenario, self.hypothesis);
        let mut what = match self.perturb_seed {
            Some(n) => format!("{} neighbour {n}", self.path.display()),
            None => self.path.display().to_string(),
        };
        if let Some(m) = self.hypothesis {
            what.push_str(&format!(" if the {role} behaves as {}", m.info().name));
        }
        Ok(Picked { file, spec, what })
    }

    /// What the neighbour changes, in words, named by the run (none for the scenario
    /// itself).
    fn changes(&self, picked: &Picked) -> Vec<String> {
        self.perturb_seed
            .map(|n| {
                let changes = live::changes(&picked.file, n, &picked.spec).join("; ");
                format!("{}: {changes}", picked.what)
            })
            .into_iter()
            .collect()
    }
}

/// A scenario's live plan against a server or an intermediary, with its attempts.
#[derive(Debug, Clone)]
pub struct Confirm {
    /// The plan.
    pub plan: LivePlan,
    /// For the report: `FILE` or `FILE neighbour N`.
    pub what: String,
    /// Runs at most.
    pub attempts: u32,
    /// Attempts move every planned cancel within this many ms either way.
    pub scan_ms: u64,
    /// How the plan was made and what it predicts, one line each, for people.
    pub notes: Vec<String>,
}

impl Confirm {
    /// The plan of `pick` against a target on `transport` (`tag`: number the tool calls, as
    /// `check-proxy` pairs the hops by them). A two-hop scenario needs the intermediary,
    /// which only turmoil's lane has, at its finest tick (an intermediary's race is a matter
    /// of milliseconds); the others are predicted on the in-memory lane.
    pub fn prepare(
        pick: &Pick<'_>,
        transport: Transport,
        tag: bool,
        attempts: u32,
        scan_ms: u64,
    ) -> Result<Confirm, ConfirmError> {
        let picked = pick.read("peer")?;
        let lane = if picked.file.scenario.bridge {
            Lane::Turmoil {
                tick: std::time::Duration::from_millis(1),
            }
        } else {
            Lane::Memory
        };
        let plan = live::plan(
            &picked.file,
            pick.perturb_seed,
            &picked.spec,
            transport,
            tag,
            lane,
        );
        let mut notes = pick.changes(&picked);
        let plan = match plan {
            Ok(plan) => plan,
            Err(why) => {
                return Err(ConfirmError::NotExecutable {
                    what: picked.what,
                    why,
                    notes,
                })
            }
        };
        notes.extend(plan.notes.iter().map(|n| format!("{}: {n}", picked.what)));
        let predicted = match plan.expected.is_empty() {
            true => "nothing beyond the scenario's own verdict".to_string(),
            false => plan.expected.join(", "),
        };
        notes.push(format!(
            "{}: the simulation predicts {predicted}",
            picked.what
        ));
        Ok(Confirm {
            plan,
            what: picked.what,
            attempts: attempts.max(1),
            scan_ms,
            notes,
        })
    }

    /// Sets the plan on the probe's configuration: the calls (as attempt 1 sends them), the
    /// era, and over HTTP the relay's latency and proxy.
    pub fn configure(&self, config: &mut ProbeConfig) {
        config.from = Some(self.calls_of(1));
        config.connect = self.plan.connect;
        if let Some(latency) = self.plan.latency_ms {
            config.latency_ms = Some(latency);
        }
        if let Some(proxy) = self.plan.proxy {
            config.proxy = Some(proxy);
        }
        config.planned_resets = self.plan.resets.clone();
    }

    /// The calls attempt `k` sends: the plan's, every cancel moved by [`scan_offset`].
    pub fn calls_of(&self, k: u32) -> Arc<Recording> {
        let by = scan_offset(k, self.scan_ms);
        let mut recording = self.plan.recording.clone();
        for c in &mut recording.calls {
            if let Some(ms) = c.cancel_after_ms.as_mut() {
                *ms = (*ms as i64 + by).max(1) as u64;
            }
        }
        Arc::new(recording)
    }

    /// Runs `attempt` until every predicted rule has broken in some run, or the attempts are
    /// spent, saying each attempt's result through `say`; returns the run that confirmed the
    /// last of them (else the last run) and the finding for the predictions no run showed.
    /// An attempt's error ends the confirmation with it.
    pub fn run<R, E>(
        &self,
        oracle: &OracleConfig,
        mut attempt: impl FnMut(Arc<Recording>) -> Result<R, E>,
        trace_of: impl Fn(&R) -> &Trace,
        mut say: impl FnMut(&str),
    ) -> Result<(R, Option<Finding>), E> {
        let expected = &self.plan.expected;
        let tries = if expected.is_empty() {
            1
        } else {
            self.attempts
        };
        let mut missing: Vec<&str> = expected.clone();
        let mut kept: Option<R> = None;
        for k in 1..=tries {
            let run = attempt(self.calls_of(k))?;
            let moved = match scan_offset(k, self.scan_ms) {
                0 => String::new(),
                by => format!(" (cancels moved {by:+} ms)"),
            };
            let verdict = oracle::check(trace_of(&run), oracle);
            let hit: Vec<&str> = missing
                .iter()
                .copied()
                .filter(|r| verdict.violations.iter().any(|v| v.rule == *r))
                .collect();
            if hit.is_empty() {
                if !expected.is_empty() {
                    say(&format!(
                        "{}: attempt {k} of {tries}{moved} did not break {}",
                        self.what,
                        missing.join(", ")
                    ));
                }
                if missing.len() == expected.len() {
                    kept = Some(run); // nothing confirmed yet: the latest run stands
                }
            } else {
                say(&format!(
                    "{}: confirmed {} on attempt {k} of at most {tries}{moved}",
                    self.what,
                    hit.join(", ")
                ));
                missing.retain(|r| !hit.contains(r));
                kept = Some(run);
            }
            if missing.is_empty() {
                break;
            }
        }
        let run = kept.expect("at least one attempt ran");
        let finding = (!missing.is_empty()).then(|| Finding {
            finding: NOT_REPRODUCED,
            kind: FindingKind::Inconclusive,
            message: format!(
                "the simulation predicts {} for {}; not reproduced in {tries} attempt(s)",
                missing.join(", "),
                self.what
            ),
        });
        Ok((run, finding))
    }
}

/// `serve --scenario`'s plan: what the server plays to the real client, and what the run
/// should show.
#[derive(Debug, Clone)]
pub struct ServeConfirm {
    /// The plan.
    pub plan: ServePlan,
    /// For the report: `FILE` or `FILE neighbour N`, and the attempt.
    pub what: String,
    /// How the plan was made and what it predicts, one line each, for people.
    pub notes: Vec<String>,
}

impl ServeConfirm {
    /// The plan of `pick` against a client on `transport`, for attempt `attempt` of a cancel
    /// scan reaching `scan_ms` either way: the attempt plays every cancelled call's messages
    /// as if its cancel moved by [`scan_offset`].
    pub fn prepare(
        pick: &Pick<'_>,
        transport: Transport,
        attempt: u32,
        scan_ms: u64,
    ) -> Result<ServeConfirm, ConfirmError> {
        let picked = pick.read("client")?;
        let mut notes = pick.changes(&picked);
        let attempt = attempt.max(1);
        let by = scan_offset(attempt, scan_ms);
        let what = format!(
            "{}{}",
            picked.what,
            match by {
                0 => format!(", attempt {attempt}"),
                by => format!(", attempt {attempt} (cancels moved {by:+} ms)"),
            }
        );
        let plan = live::serve_plan(
            &picked.file,
            pick.perturb_seed,
            &picked.spec,
            transport,
            by,
            Lane::Memory,
        );
        let plan = match plan {
            Ok(plan) => plan,
            Err(why) => return Err(ConfirmError::NotExecutable { what, why, notes }),
        };
        notes.extend(plan.notes.iter().map(|n| format!("{what}: {n}")));
        let predicted = match plan.expected.is_empty() {
            true => "no rule of the client's".to_string(),
            false => plan.expected.join(", "),
        };
        notes.push(format!("{what}: the simulation predicts {predicted}"));
        Ok(ServeConfirm { plan, what, notes })
    }

    /// The predicted rules the run broke, and those it did not.
    pub fn judge(&self, verdict: &Verdict) -> (Vec<&'static str>, Vec<&'static str>) {
        self.plan
            .expected
            .iter()
            .partition(|r| verdict.violations.iter().any(|v| v.rule == **r))
    }
}

#[cfg(test)]
mod tests {
    use super::scan_offset;

    #[test]
    fn the_scan_goes_out_both_ways_and_starts_over() {
        let offsets: Vec<i64> = (1..=7).map(|k| scan_offset(k, 4)).collect();
        assert_eq!(offsets, [0, 1, -1, 2, -2, 3, -3]);
        assert_eq!(scan_offset(10, 4), 0);
        assert!((1..=50).all(|k| scan_offset(k, 0) == 0));
        assert!((1..=50).all(|k| scan_offset(k, 20).abs() <= 20));
    }
}
