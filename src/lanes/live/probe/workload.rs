//! The probe's workload: the window cancels fall in, from the calibrated duration of a
//! call, and the seeded schedule of calls, cancels, stalls and faults drawn in it.

use super::*;

/// One call of the schedule.
#[derive(Debug, Clone, Copy)]
pub(super) struct Planned {
    /// When the application starts it, in ms after the schedule began.
    pub(super) start_ms: u64,
    /// When the application cancels it, in ms after its start.
    pub(super) cancel_after_ms: Option<u64>,
    /// A stall of the reader: when (ms after the call's start) and how long.
    pub(super) stall: Option<(u64, u64)>,
    /// Kill and restart the server before this call, once nothing is outstanding.
    pub(super) restart_before: bool,
}

/// The window cancels fall in, in ms after their call's start, `[from, to)`.
pub(super) fn cancel_window(args: &ProbeConfig, natural_ms: Option<u64>) -> (u64, u64) {
    match (args.cancel_within_ms, natural_ms) {
        (Some(w), _) => (0, w.max(1)),
        (None, Some(d)) => (d / 10, (2 * d / 5).max(d / 10 + 1)),
        (None, None) => (0, 1000),
    }
}

/// Draws the schedule: starts spread so calls overlap, some cancelled while they run, faults.
pub(super) fn schedule(args: &ProbeConfig, window: (u64, u64)) -> Vec<Planned> {
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut below = |n: u64| rng.next_u64() % n.max(1);
    let mut at = 0;
    let mut plan: Vec<Planned> = (0..args.calls)
        .map(|_| {
            at += below(400);
            let cancelled = below(100) < args.cancel_percent;
            let offset = window.0 + below(window.1 - window.0);
            let stalled = below(100) < args.stall_percent;
            let stall = (
                below(window.1.max(1)),
                args.stall_ms.0 + below(args.stall_ms.1 - args.stall_ms.0 + 1),
            );
            Planned {
                start_ms: at,
                cancel_after_ms: cancelled.then_some(offset),
                stall: stalled.then_some(stall),
                restart_before: false,
            }
        })
        .collect();
    // Restarts go before distinct calls other than the first.
    let mut gaps: Vec<usize> = (1..plan.len()).collect();
    for _ in 0..args.restarts {
        let k = gaps.remove(below(gaps.len() as u64) as usize);
        plan[k].restart_before = true;
    }
    plan
}
