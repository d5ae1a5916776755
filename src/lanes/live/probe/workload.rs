//! The probe's workload: the window cancels fall in, from the calibrated duration of a
//! call, and the seeded schedule of calls, cancels, stalls and faults drawn in it; or, under
//! `--from`, the recorded client's own calls ([`from_recording`]).

use super::*;
use crate::model::recorded::Recording;
use std::collections::BTreeMap;

/// One call of the schedule.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    /// When the application starts it, in ms after the schedule began.
    pub(super) start_ms: u64,
    /// When the application cancels it, in ms after its start.
    pub(super) cancel_after_ms: Option<u64>,
    /// A stall of the reader: when (ms after the call's start) and how long.
    pub(super) stall: Option<(u64, u64)>,
    /// Kill and restart the server before this call, once nothing is outstanding.
    pub(super) restart_before: bool,
    /// The request itself, when it is a recorded client's (else the configured tool).
    pub(super) request: Option<CallSpec>,
    /// Started once the answer to call `j` arrived, `ms` after it (a recorded client's call
    /// that followed that answer), instead of at `start_ms`.
    pub(super) after: Option<(usize, u64)>,
    /// HTTP: the relay resets this call's post this long after it opened (a scenario's
    /// stream reset, planned per call so that the same call meets it on every run).
    pub(super) reset_after_ms: Option<u64>,
}

/// The recorded client's calls as the schedule: each request as recorded (its params, whether
/// it asked for progress, its recorded timeout policy, else `policy`), started at its recorded
/// offset or, when it followed an answer, that long after the same answer arrives in this run;
/// cancelled at its recorded offset from its actual start; over HTTP, call `k`'s post reset
/// `resets[k]` ms after it opened. No stalls and no restarts.
pub(super) fn from_recording(
    recording: &Recording,
    policy: TimeoutPolicy,
    resets: &BTreeMap<usize, u64>,
) -> Vec<Planned> {
    recording
        .calls
        .iter()
        .enumerate()
        .map(|(k, c)| Planned {
            start_ms: c.start_ms,
            cancel_after_ms: c.cancel_after_ms,
            stall: None,
            restart_before: false,
            request: Some(CallSpec {
                method: c.method.clone(),
                params: c.params.clone(),
                progress: c.token.is_some(),
                policy: c.policy.unwrap_or(policy),
                idempotent: false,
                task: false,
            }),
            after: c.after,
            reset_after_ms: resets.get(&k).copied(),
        })
        .collect()
}

/// The window cancels fall in, in ms after their call's start, `[from, to)`.
pub(super) fn cancel_window(args: &ProbeConfig, natural_ms: Option<u64>) -> (u64, u64) {
    window_of(args.cancel_within_ms, natural_ms)
}

/// The window cancels fall in, `[from, to)` ms after their call's start: within
/// `cancel_within_ms` when it is given, else between a tenth and two fifths of a call's natural
/// duration `natural_ms`, else in the first second (the probe's, and a virtual sweep's).
pub fn window_of(cancel_within_ms: Option<u64>, natural_ms: Option<u64>) -> (u64, u64) {
    match (cancel_within_ms, natural_ms) {
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
                request: None,
                after: None,
                reset_after_ms: None,
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
