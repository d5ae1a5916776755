//! A sweep: a range of seeds, each run in every transport and era asked for, judged, and
//! added up into [`Totals`], whose `traces` digest names every trace of the sweep at once.
//!
//! The sweep's shape lives here, in the library, as a run's does ([`crate::run::judge`]): the
//! command only parses its flags into a [`Sweep`], shows progress and prints the totals. Seeds
//! are independent, so `jobs` threads take them in turn; the totals are counted in seed order
//! after all have run, so they (and the digest) do not depend on the number of threads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::model::{Outcome, Transport};
use crate::repro::{EraChoice, Repro};
use crate::run;

pub mod report;
pub mod totals;
#[cfg(feature = "live")]
pub mod virtual_seeds;

pub use report::SeedRun;
pub use totals::{
    run_digest, FailingRun, NotReplayableRun, RuleCount, RunCounts, Totals, TOTALS_FORMAT,
};

/// What a sweep runs: every seed of `seeds` (of shard `shard`), in each of `transports` and
/// `eras`, with the lane, intermediary and mutant of `base`.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The seed range `[A, B)`.
    pub seeds: (u64, u64),
    /// Shard `(K, N)`: the seeds `s` with `(s - A) mod N = K - 1` (`(1, 1)`: all).
    pub shard: (u64, u64),
    /// The transports each seed runs on (`None`: the seed's own).
    pub transports: Vec<Option<Transport>>,
    /// The eras each seed runs in.
    pub eras: Vec<EraChoice>,
    /// The lane, intermediary and mutant of every run (its seed, transport and era are set
    /// per run).
    pub base: Repro,
    /// The lane and overrides as the flags of a replay line (shards of one sweep agree).
    pub setup: String,
    /// Where each failing run's report folder is written.
    pub report_dir: PathBuf,
    /// Worker threads (the results do not depend on them).
    pub jobs: usize,
}

impl Sweep {
    /// The runs, in order: `(seed, transport, era)`.
    pub fn runs(&self) -> Vec<(u64, Option<Transport>, EraChoice)> {
        let ((a, b), (k, n)) = (self.seeds, self.shard);
        (a..b)
            .filter(|s| (s - a) % n == k - 1)
            .flat_map(|s| self.transports.iter().map(move |t| (s, *t)))
            .flat_map(|(s, t)| self.eras.iter().map(move |e| (s, t, *e)))
            .collect()
    }

    /// The run of `seed` on `transport` in `era`, with the sweep's lane and overrides.
    pub fn repro(&self, seed: u64, transport: Option<Transport>, era: EraChoice) -> Repro {
        Repro {
            seed,
            transport,
            era,
            ..self.base
        }
    }

    /// Runs and judges every run, calling `on_run` after each (a progress bar), and adds
    /// them up.
    pub fn run(&self, on_run: &(dyn Fn() + Sync)) -> Totals {
        let runs = self.runs();
        let start = Instant::now();
        let next = AtomicU64::new(0);
        let results: Mutex<Vec<Summary>> = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..self.jobs.max(1) {
                scope.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(&(seed, transport, era)) = runs.get(k) else {
                        break;
                    };
                    let repro = self.repro(seed, transport, era);
                    let s = Summary::of(&run_seed(&repro), &repro, &self.report_dir);
                    results
                        .lock()
                        .expect("no worker panics while holding the lock")
                        .push(s);
                    on_run();
                });
            }
        });
        let wall = start.elapsed();
        let mut results = results.into_inner().expect("workers finished");
        results.sort_by_key(|s| (s.seed, s.transport, s.era));
        let mut totals = Totals::empty(
            self.seeds,
            self.shard,
            self.setup.clone(),
            results.len() as u64,
            wall.as_millis() as u64,
        );
        for s in &results {
            s.count(&mut totals);
        }
        totals
    }
}

/// Runs and judges one run.
pub fn run_seed(repro: &Repro) -> SeedRun {
    let scenario = repro.scenario();
    let judged = run::judge(&scenario, repro.lane);
    SeedRun {
        seed: repro.seed,
        transport: repro.transport,
        era: repro.era,
        scenario,
        judged,
    }
}

/// What a sweep keeps of one run.
struct Summary {
    seed: u64,
    transport: Option<Transport>,
    era: EraChoice,
    /// The era the run's client spoke (the oracle's reading of the trace).
    spoke: &'static str,
    sim_ms: u64,
    requests: u64,
    outcomes: BTreeMap<Outcome, u64>,
    rules: Vec<(&'static str, &'static str)>,
    fails: bool,
    /// The run's trace digest.
    digest: u64,
    replay: String,
    test_line: String,
    report: Option<PathBuf>,
}

impl Summary {
    fn of(r: &SeedRun, repro: &Repro, report_dir: &Path) -> Summary {
        let replay = repro.replay_line();
        let rules = report::rule_levels(&r.judged);
        let fails = r.judged.fails();
        let report = if fails {
            report::write_report(report_dir, r, &replay).ok()
        } else {
            None
        };
        let stats = &r.judged.run.stats;
        Summary {
            seed: r.seed,
            transport: r.transport,
            era: r.era,
            // As the oracle read it from the trace: an auto-mode client may have fallen back.
            spoke: match r.judged.crash {
                Some(_) => r.scenario.era.version(),
                None => r.judged.verdict.era.era.version(),
            },
            sim_ms: stats.sim_ms,
            requests: stats.requests,
            outcomes: stats.outcomes.clone(),
            rules,
            fails,
            digest: r.judged.run.trace.digest(),
            test_line: repro.test_line(),
            replay,
            report,
        }
    }

    /// Adds the run to `totals`.
    fn count(&self, totals: &mut Totals) {
        let counts = RunCounts {
            sim_ms: self.sim_ms,
            requests: self.requests,
            outcomes: &self.outcomes,
        };
        totals.count_run(self.seed, self.transport, self.digest, &counts, self.spoke);
        totals.count_rules(&self.rules);
        if self.fails {
            totals.failing.push(FailingRun {
                seed: self.seed,
                transport: self.transport.map(|t| t.to_string()),
                rules: self.rules.iter().map(|r| r.0.to_string()).collect(),
                replay: self.replay.clone(),
                test: self.test_line.clone(),
                digest: format!("{:016x}", self.digest),
                report: self.report.as_ref().map(|p| p.display().to_string()),
            });
        }
    }
}
