//! `probe --scenario FILE [--perturb-seed N]` and `check-proxy --scenario ...`: a scenario's
//! run, or one of its neighbours (`sweep --around`), sent to the real peer to confirm what the
//! simulation predicts ([`mcp_sim::fit::live`]). A real run is on the wall clock, so a
//! prediction gets up to `--attempts` runs: the first run that breaks a predicted rule
//! confirms that rule, and the attempts go on until every predicted rule is confirmed; one no
//! run showed is reported as not reproduced (inconclusive, exit 3), never as a pass. The
//! fitted timing is only as exact as the recording's clock and the simulation's tick, and a
//! race's window can be a millisecond wide, so the attempts scan it: attempt `k` moves every
//! planned cancel by the `k`-th of 0, +1, −1, +2, … ms within `--cancel-scan-ms` (each run says
//! how far);
//! a neighbour whose knobs the live tools cannot set is not executable live (exit 3).
//!
//! `serve --scenario FILE [--perturb-seed N] [--attempt K]` is the same for a client's
//! session: the server plays the neighbour's simulated server to the real client
//! ([`live::serve_plan`]). The client is launched once per run (it launches `serve`, or
//! connects to it), so a run is one attempt and the caller repeats it with `--attempt`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use mcp_sim::fit::live::{self, LivePlan};
use mcp_sim::lanes::live::check_proxy::shell_quote;
use mcp_sim::lanes::live::probe::{findings::Finding, ProbeConfig};
use mcp_sim::lanes::Lane;
use mcp_sim::model::recorded::Recording;
use mcp_sim::model::Transport;
use mcp_sim::oracle::{self, OracleConfig};
use mcp_sim::scenario::around::PerturbSpec;
use mcp_sim::scenario::file::ScenarioFile;
use mcp_sim::trace::Trace;

use crate::args::Format;

/// The finding of a prediction no attempt showed.
pub(crate) const NOT_REPRODUCED: &str = "not-reproduced";
/// The finding of a neighbour the live tools cannot run.
pub(crate) const NOT_EXECUTABLE: &str = "not-executable-live";

/// The flags that run a scenario live, shared by `probe` and `check-proxy`.
#[derive(clap::Args)]
pub(crate) struct ScenarioOptions {
    /// Run a scenario file's calls (`mcp-sim fit`'s output) instead of the seeded schedule,
    /// in its era, over HTTP with its latency and proxy, to confirm live what the simulation
    /// predicts (an HTTP stream reset goes with its call's post, at its planned moment in the
    /// call); a knob the live tools cannot set (a crash or partition at a moment, another
    /// transport) makes it `not-executable-live`.
    #[arg(long, value_name = "FILE")]
    pub(crate) scenario: Option<PathBuf>,
    /// With `--scenario`: run its neighbour drawn from this perturbation seed (as `sweep
    /// --around` lists them), and look for the rules it breaks in simulation that the
    /// scenario does not.
    #[arg(long, requires = "scenario")]
    pub(crate) perturb_seed: Option<u64>,
    /// With `--perturb-seed`: the knobs that may move, as `sweep --around --perturb` took them.
    #[arg(long, requires = "perturb_seed")]
    pub(crate) perturb: Option<String>,
    /// With `--scenario`: predict with this behaviour of the peer assumed (a hypothesis
    /// `sweep --around --hypotheses` printed), to confirm live whether the peer has it.
    #[arg(long, requires = "scenario", value_parser = crate::args::parse_mutant)]
    pub(crate) hypothesis: Option<mcp_sim::model::Mutant>,
    /// With `--scenario`: run up to this many times until a predicted rule breaks (the wall
    /// clock decides a race); none that does is `not-reproduced` (exit 3).
    #[arg(long, default_value_t = 10, requires = "scenario")]
    pub(crate) attempts: u32,
    /// With `--scenario`: attempt k moves every planned cancel by the k-th of 0, +1, -1, +2,
    /// -2, ... ms within this many ms either way (a race's window can be a millisecond wide,
    /// narrower than the fitted timing is exact); 0 sends the plan as it is every time.
    #[arg(long, default_value_t = 10, requires = "scenario")]
    pub(crate) cancel_scan_ms: u64,
}

impl ScenarioOptions {
    /// The flags that name the run again in a replay line (`None` without `--scenario`).
    pub(crate) fn flags(&self) -> Option<String> {
        let path = self.scenario.as_ref()?;
        let mut s = format!("--scenario {}", shell_quote(&path.display().to_string()));
        if let Some(n) = self.perturb_seed {
            s.push_str(&format!(" --perturb-seed {n}"));
        }
        if let Some(spec) = &self.perturb {
            s.push_str(&format!(" --perturb {}", shell_quote(spec)));
        }
        if let Some(m) = self.hypothesis {
            s.push_str(&format!(" --hypothesis {}", m.info().name));
        }
        Some(s)
    }
}

/// The flags that play a client session's scenario with `serve` (`serve --scenario`).
#[derive(clap::Args)]
pub(crate) struct ServeScenarioOptions {
    /// Play the server's side of a scenario file's run (`mcp-sim fit` of a client's session)
    /// to the real client, to confirm live what the simulation predicts of the client; the
    /// client's requests find their calls by their params, and what the scenario does not
    /// hold is answered as the reference server would.
    #[arg(long, value_name = "FILE", conflicts_with = "from")]
    pub(crate) scenario: Option<PathBuf>,
    /// With `--scenario`: play its neighbour drawn from this perturbation seed (as `sweep
    /// --around` lists them): a cancel or deadline it moves moves the server's messages the
    /// other way, since the client's cancels are its own.
    #[arg(long, requires = "scenario")]
    pub(crate) perturb_seed: Option<u64>,
    /// With `--perturb-seed`: the knobs that may move, as `sweep --around --perturb` took them.
    #[arg(long, requires = "perturb_seed")]
    pub(crate) perturb: Option<String>,
    /// With `--scenario`: predict with this behaviour of the client assumed (a hypothesis
    /// `sweep --around --hypotheses client` printed).
    #[arg(long, requires = "scenario", value_parser = crate::args::parse_mutant)]
    pub(crate) hypothesis: Option<mcp_sim::model::Mutant>,
    /// With `--scenario`: which attempt of the cancel scan this run is (1, 2, ...): attempt k
    /// plays every cancelled call's messages as if its cancel moved by the k-th of 0, +1, -1,
    /// +2, ... ms (the client is launched once per run, so a caller repeats the run).
    #[arg(long, default_value_t = 1, requires = "scenario")]
    pub(crate) attempt: u32,
    /// With `--scenario`: the reach of the cancel scan, in ms either way.
    #[arg(long, default_value_t = 10, requires = "scenario")]
    pub(crate) cancel_scan_ms: u64,
}

/// How early a real client's cancel may come and still cross what the simulated server had
/// sent when it read the moved one (`serve --scenario`): the cancel scan's reach and a loaded
/// machine's timer.
pub(crate) const CROSSING: std::time::Duration = std::time::Duration::from_millis(50);

/// `serve --scenario`'s plan: what the server plays and what the run should show.
pub(crate) struct ServeConfirm {
    pub(crate) plan: live::ServePlan,
    /// For the report: `FILE` or `FILE neighbour N`, and the attempt.
    pub(crate) what: String,
}

impl ServeConfirm {
    /// The predicted rules the run broke, and those it did not.
    pub(crate) fn judge(
        &self,
        verdict: &mcp_sim::oracle::Verdict,
    ) -> (Vec<&'static str>, Vec<&'static str>) {
        self.plan
            .expected
            .iter()
            .partition(|r| verdict.violations.iter().any(|v| v.rule == **r))
    }
}

/// The scenario flags both kinds of confirmation share.
struct Picked<'a> {
    path: &'a std::path::Path,
    perturb: Option<&'a str>,
    perturb_seed: Option<u64>,
    hypothesis: Option<mcp_sim::model::Mutant>,
}

impl Picked<'_> {
    /// The file (with the hypothesis on), the perturbation spec, and the run's name for the
    /// report (`FILE [neighbour N] [if the ROLE behaves as M]`); `Err(2)` (reported) for a bad
    /// file or spec.
    fn read(&self, role: &str) -> Result<(ScenarioFile, PerturbSpec, String), ExitCode> {
        let bad = |e: String| {
            eprintln!("mcp-sim: {e}");
            ExitCode::from(2)
        };
        let spec = match self.perturb.map(PerturbSpec::parse) {
            Some(Err(e)) => return Err(bad(format!("--perturb: {e}"))),
            Some(Ok(spec)) => spec,
            None => PerturbSpec::default(),
        };
        let mut file = ScenarioFile::read(self.path).map_err(|e| bad(e.to_string()))?;
        file.scenario = mcp_sim::fit::neighbours::assuming(&file.scenario, self.hypothesis);
        let mut what = match self.perturb_seed {
            Some(n) => format!("{} neighbour {n}", self.path.display()),
            None => self.path.display().to_string(),
        };
        if let Some(m) = self.hypothesis {
            what.push_str(&format!(" if the {role} behaves as {}", m.info().name));
        }
        Ok((file, spec, what))
    }
}

/// `serve --scenario`'s plan against a client on `transport`; `Ok(None)` without
/// `--scenario`; `Err` with the exit code when the file is bad or the neighbour is not
/// executable live (already reported).
pub(crate) fn prepare_serve(
    options: &ServeScenarioOptions,
    transport: Transport,
) -> Result<Option<ServeConfirm>, ExitCode> {
    let Some(path) = &options.scenario else {
        return Ok(None);
    };
    let picked = Picked {
        path,
        perturb: options.perturb.as_deref(),
        perturb_seed: options.perturb_seed,
        hypothesis: options.hypothesis,
    };
    let (file, spec, mut what) = picked.read("client")?;
    if let Some(n) = options.perturb_seed {
        eprintln!("{what}: {}", live::changes(&file, n, &spec).join("; "));
    }
    let attempt = options.attempt.max(1);
    let by = scan_offset(attempt, options.cancel_scan_ms);
    what.push_str(&match by {
        0 => format!(", attempt {attempt}"),
        by => format!(", attempt {attempt} (cancels moved {by:+} ms)"),
    });
    match live::serve_plan(
        &file,
        options.perturb_seed,
        &spec,
        transport,
        by,
        Lane::Memory,
    ) {
        Ok(plan) => {
            for note in &plan.notes {
                eprintln!("{what}: {note}");
            }
            let predicted = match plan.expected.is_empty() {
                true => "no rule of the client's".to_string(),
                false => plan.expected.join(", "),
            };
            eprintln!("{what}: the simulation predicts {predicted}");
            Ok(Some(ServeConfirm { plan, what }))
        }
        Err(not) => {
            // stdout is the protocol's under stdio: the finding goes to stderr.
            eprintln!("{what}: {NOT_EXECUTABLE} (inconclusive): {not}");
            Err(ExitCode::from(3))
        }
    }
}

/// A scenario's live plan and where it came from.
pub(crate) struct Confirm {
    pub(crate) plan: LivePlan,
    /// For the report: `FILE` or `FILE neighbour N`.
    pub(crate) what: String,
    pub(crate) attempts: u32,
    /// Attempts move every planned cancel within this many ms either way.
    pub(crate) scan_ms: u64,
}

/// The step of the cancel scan, in ms.
const SCAN_STEP_MS: i64 = 1;

/// How far attempt `k` (1-based) moves every planned cancel: 0, +1, −1, +2, −2, … ms, within
/// `±scan_ms`, then over again.
pub(crate) fn scan_offset(k: u32, scan_ms: u64) -> i64 {
    let reach = scan_ms as i64 / SCAN_STEP_MS;
    let i = i64::from(k.max(1) - 1) % (2 * reach + 1);
    match i {
        0 => 0,
        i if i % 2 == 1 => SCAN_STEP_MS * (i + 1) / 2,
        i => -SCAN_STEP_MS * i / 2,
    }
}

/// `--scenario`'s plan against a target on `transport` (`tag`: number the tool calls, as
/// check-proxy pairs the hops by them); `Ok(None)` without `--scenario`; `Err` with the exit
/// code when the file is bad or the neighbour is not executable live (already reported).
pub(crate) fn prepare(
    options: &ScenarioOptions,
    format: Format,
    transport: Transport,
    tag: bool,
) -> Result<Option<Confirm>, ExitCode> {
    let Some(path) = &options.scenario else {
        return Ok(None);
    };
    let picked = Picked {
        path,
        perturb: options.perturb.as_deref(),
        perturb_seed: options.perturb_seed,
        hypothesis: options.hypothesis,
    };
    let (file, spec, what) = picked.read("peer")?;
    // A two-hop scenario needs the intermediary, which only turmoil's lane has; its finest
    // tick, since an intermediary's race is a matter of milliseconds.
    let lane = if file.scenario.bridge {
        Lane::Turmoil {
            tick: std::time::Duration::from_millis(1),
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
                scan_ms: options.cancel_scan_ms,
            }))
        }
        Err(not) => {
            match format {
                Format::Json => println!(
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
    /// Sets the plan on the probe's configuration: the calls (as attempt 1 sends them), the
    /// era, and over HTTP the relay's latency and proxy.
    pub(crate) fn configure(&self, config: &mut ProbeConfig) {
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
    pub(crate) fn calls_of(&self, k: u32) -> Arc<Recording> {
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
    /// spent; returns the run that confirmed the last of them (else the last run) and the
    /// finding for the predictions no run showed.
    pub(crate) fn run<R>(
        &self,
        oracle: &OracleConfig,
        mut attempt: impl FnMut(Arc<Recording>) -> Result<R, ExitCode>,
        trace_of: impl Fn(&R) -> &Trace,
    ) -> Result<(R, Option<Finding>), ExitCode> {
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
                    eprintln!(
                        "{}: attempt {k} of {tries}{moved} did not break {}",
                        self.what,
                        missing.join(", ")
                    );
                }
                if missing.len() == expected.len() {
                    kept = Some(run); // nothing confirmed yet: the latest run stands
                }
            } else {
                eprintln!(
                    "{}: confirmed {} on attempt {k} of at most {tries}{moved}",
                    self.what,
                    hit.join(", ")
                );
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
            kind: "inconclusive",
            message: format!(
                "the simulation predicts {} for {}; not reproduced in {tries} attempt(s)",
                missing.join(", "),
                self.what
            ),
        });
        Ok((run, finding))
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
