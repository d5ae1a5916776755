//! A sweep of a real program under the virtual clock: one shim per worker, each seed run on
//! whichever shim is free, every seed counted in [`Totals`] as a simulated one is, except that
//! a run the shim could not hold deterministic is listed as not replayable, never a finding
//! and never a pass.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::report::rule_levels;
use super::totals::{FailingRun, NotReplayableRun, RunCounts, Totals};
use crate::lanes::virtual_peer::{VirtualError, VirtualPeer};
use crate::model::Transport;
use crate::run::Judged;
use crate::virtual_run::Status;

/// Runs `judge` on every seed of `[a, b)`, one worker per peer, calling `on_run` after each
/// (a progress bar); the results in seed order.
pub fn run_seeds<T: Send>(
    peers: &mut [VirtualPeer],
    (a, b): (u64, u64),
    judge: impl Fn(&mut VirtualPeer, u64) -> Result<T, VirtualError> + Sync,
    on_run: &(dyn Fn() + Sync),
) -> Vec<(u64, Result<T, VirtualError>)> {
    let next = AtomicU64::new(a);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for peer in peers.iter_mut() {
            let (next, results, judge) = (&next, &results, &judge);
            scope.spawn(move || loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= b {
                    break;
                }
                let r = judge(peer, seed);
                results
                    .lock()
                    .expect("no worker panics holding it")
                    .push((seed, r));
                on_run();
            });
        }
    });
    let mut results = results.into_inner().expect("workers finished");
    results.sort_by_key(|(s, _)| *s);
    results
}

/// One judged seed of a virtual sweep, of a server, a client or an intermediary.
pub struct Seeded<'a> {
    /// The seed.
    pub seed: u64,
    /// The transport it ran on.
    pub transport: Transport,
    /// Its run and verdict.
    pub judged: &'a Judged,
    /// Whether it replayed, and exercised anything.
    pub status: &'a Status,
    /// It stands as a finding.
    pub fails: bool,
}

impl Totals {
    /// Counts a virtual run: its trace, time and outcomes always; a not-replayable one's
    /// reason instead of its rules (nothing it shows can be trusted); a finding's report,
    /// written by `write`, listed with `replay`.
    pub fn count_seeded(
        &mut self,
        v: &Seeded<'_>,
        replay: &str,
        write: impl FnOnce() -> std::io::Result<PathBuf>,
    ) {
        let trace = &v.judged.run.trace;
        let stats = &v.judged.run.stats;
        let counts = RunCounts {
            sim_ms: stats.sim_ms,
            requests: stats.requests,
            outcomes: &stats.outcomes,
        };
        let spoke = v.judged.verdict.era.era.version();
        let transport = Some(v.transport);
        self.count_run(v.seed, transport, trace.digest(), &counts, spoke);
        match v.status {
            Status::NotReplayable(why) => {
                self.not_replayable.push(NotReplayableRun {
                    seed: v.seed,
                    why: why.clone(),
                    replay: replay.into(),
                });
                return;
            }
            Status::Inconclusive => self.inconclusive += 1,
            Status::Judged => {}
        }
        let rules = rule_levels(v.judged);
        self.count_rules(&rules);
        if v.fails {
            self.failing.push(FailingRun {
                seed: v.seed,
                transport: transport.map(|t| t.to_string()),
                rules: rules.iter().map(|r| r.0.to_string()).collect(),
                replay: replay.into(),
                test: String::new(),
                digest: format!("{:016x}", trace.digest()),
                report: write().ok().map(|p| p.display().to_string()),
            });
        }
    }
}
