//! Running and judging one scenario on either lane: the one function that sweeps, replays,
//! mutant hunts and tests share.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

use crate::lanes::{memory, panic_text, Lane, RunResult};
use crate::oracle::{self, Level, OracleConfig, Verdict, Violation};
use crate::scenario::Scenario;

/// A run and its verdict.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The run (an empty trace if it crashed).
    pub run: RunResult,
    /// The oracle's verdict, plus a `liveness` violation if the run did not settle.
    pub verdict: Verdict,
    /// A peer or the harness panicked: the run itself failed.
    pub crash: Option<String>,
}

impl Judged {
    /// Whether the run failed at MUST level (a MUST rule, a crash, or no liveness).
    pub fn fails(&self) -> bool {
        self.crash.is_some() || self.verdict.has_must()
    }

    /// Names of the violated rules (and `crash`), sorted, without repeats.
    pub fn rules(&self) -> Vec<&'static str> {
        let mut rules: Vec<&'static str> = self.verdict.violations.iter().map(|v| v.rule).collect();
        if self.crash.is_some() {
            rules.push(CRASH);
        }
        rules.sort_unstable();
        rules.dedup();
        rules
    }
}

/// The name under which a run whose peer or harness panicked is counted with the rules.
pub const CRASH: &str = "crash";

/// The name of the liveness check added when a run does not settle.
pub const LIVENESS: &str = "liveness";

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The first panic message seen while quiet (a runtime may re-raise it in other words).
    static FIRST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Panics of the peers are results here, not noise: keep them off stderr while judging.
fn quiet_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(|q| q.get()) {
                let text = panic_text(info.payload());
                FIRST_PANIC.with(|f| f.borrow_mut().get_or_insert(text).clone());
            } else {
                default(info);
            }
        }));
    });
}

/// Runs `scenario` on `lane` and judges the trace. A panic of a peer is caught and reported
/// as a crash; a run that does not settle after its faults healed gets a `liveness`
/// violation.
pub fn judge(scenario: &Scenario, lane: Lane) -> Judged {
    judge_by(scenario, || match lane {
        #[cfg(feature = "turmoil")]
        Lane::Turmoil { tick } => {
            let options = crate::lanes::turmoil::TurmoilOptions {
                tick,
                ..Default::default()
            };
            crate::lanes::turmoil::run(scenario, &options).map_err(|e| e.to_string())
        }
        Lane::Memory => Ok(memory::run(scenario)),
    })
}

/// Runs `scenario` on turmoil with `server` on the `server` host and judges the trace, as
/// [`judge`] does. With a [`ServerUnderTest::Custom`](crate::lanes::turmoil::ServerUnderTest) server
/// the trace holds the client's side and what the server read and wrote at its end of the
/// transport, so the oracle judges the server by its own observations.
#[cfg(feature = "turmoil")]
pub fn judge_with_server(
    scenario: &Scenario,
    options: &crate::lanes::turmoil::TurmoilOptions,
    server: &crate::lanes::turmoil::ServerUnderTest,
) -> Judged {
    judge_by(scenario, || {
        crate::lanes::turmoil::run_with_server(scenario, options, server).map_err(|e| e.to_string())
    })
}

/// Runs the reference server under `scenario` with `client` on the `client` host and judges
/// the trace, as [`judge`] does (see [`crate::lanes::turmoil::run_with_client`]). The client
/// is a black box: the timeout policies it `declared`, if any, are recorded on the requests
/// they cover before the trace is judged (`declared-deadline`, `reset-needs-token`).
#[cfg(feature = "turmoil")]
pub fn judge_with_client(
    scenario: &Scenario,
    options: &crate::lanes::turmoil::TurmoilOptions,
    client: &crate::lanes::turmoil::ClientUnderTest,
    declared: Option<&crate::model::ClientPolicies>,
) -> Judged {
    judge_by(scenario, || {
        let mut run = crate::lanes::turmoil::run_with_client(scenario, options, client)
            .map_err(|e| e.to_string())?;
        if let Some(declared) = declared {
            run.trace.declare_client_policies(declared);
        }
        Ok(run)
    })
}

/// Judges `run`, made elsewhere (a virtual peer's, [`crate::lanes::memory::run_virtual`]), as
/// [`judge`] judges its own: the oracle, and `liveness` for a run that did not settle.
pub fn judge_run(scenario: &Scenario, run: RunResult) -> Judged {
    judge_by(scenario, || Ok(run))
}

/// [`judge_run`] with the oracle's settings for the run adjusted by `adjust` (a lane whose
/// links the scenario does not describe whole widens its grace window).
#[cfg(feature = "live")]
pub(crate) fn judge_run_adjusted(
    scenario: &Scenario,
    run: RunResult,
    adjust: impl FnOnce(OracleConfig) -> OracleConfig,
) -> Judged {
    judge_by_adjusted(scenario, || Ok(run), adjust)
}

fn judge_by(scenario: &Scenario, run: impl FnOnce() -> Result<RunResult, String>) -> Judged {
    judge_by_adjusted(scenario, run, |c| c)
}

fn judge_by_adjusted(
    scenario: &Scenario,
    run: impl FnOnce() -> Result<RunResult, String>,
    adjust: impl FnOnce(OracleConfig) -> OracleConfig,
) -> Judged {
    quiet_panics();
    QUIET.with(|q| q.set(true));
    FIRST_PANIC.with(|f| f.borrow_mut().take());
    let outcome = catch_unwind(AssertUnwindSafe(run));
    QUIET.with(|q| q.set(false));
    let first = FIRST_PANIC.with(|f| f.borrow_mut().take());
    let (run, crash) = match outcome {
        Ok(Ok(run)) => (run, None),
        Ok(Err(e)) => (empty(), Some(first.unwrap_or(e))),
        Err(p) => (
            empty(),
            Some(first.unwrap_or_else(|| panic_text(p.as_ref()))),
        ),
    };
    let mut verdict = oracle::check(&run.trace, &adjust(run.oracle_config(scenario)));
    if !run.complete && crash.is_none() {
        verdict.violations.push(Violation {
            rule: LIVENESS,
            level: Level::Must,
            events: vec![run.trace.events.len().saturating_sub(1)],
            message: "the run did not settle after the faults healed: a request, a job or a resource is still open".into(),
            hop: None,
            conn: None,
        });
    }
    Judged {
        run,
        verdict,
        crash,
    }
}

fn empty() -> RunResult {
    RunResult {
        trace: Default::default(),
        complete: false,
        stats: Default::default(),
    }
}
