//! The scenario's workload as a sans-IO schedule: what the application does (start a call,
//! cancel it) and what happens at its host (a stream reset, a server crash), each at its time.
//! A lane asks [`Workload::next_due`] when to wake and takes each step due with
//! [`Workload::poll`]; the in-memory lane, the turmoil lane's client host and the live probe
//! execute their schedules this way, so the simulation's lanes start, cancel and reset in the
//! same order and say the host is done on the same condition ([`Workload::host_done`]).
//!
//! Steps due at one instant come out in the order they were added: the calls in their order
//! (each call's start before its cancel), then the faults in theirs. That order decides which
//! of two same-instant events is recorded first, so it is part of a run's trace.
//!
//! The probe plans on the wall clock, where the server decides how long things take: its
//! cancels and stalls count from each call's actual start, so it adds them when the call
//! starts; a restart waits until nothing is outstanding ([`Workload::poll_if`]), and a restart
//! or a hung server's recovery pauses the application ([`Workload::postpone_starts`]). What the
//! probe does in reaction to an outcome (its calibration calls, each one after the last
//! answered, and the liveness check after a cancel or a timeout) is not planned, and stays in
//! the probe.

use std::collections::BTreeMap;

use super::{fault_time, Fault, Scenario};
use crate::time::Time;

/// One step of the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The application starts planned call `k`.
    Start(usize),
    /// The application cancels planned call `k`.
    Cancel(usize),
    /// The connection carrying planned call `k`'s current stream is reset.
    Reset(usize),
    /// The server crashes (fault `k` of the scenario) and restarts.
    Crash(usize),
    /// The host stops reading the server's output for a while during planned call `k` (the
    /// probe's back-pressure on stdio).
    Stall(usize),
    /// The host stops the server and starts it again before planned call `k` (the probe's).
    Restart(usize),
}

impl Step {
    /// Whether the application's host does it (a crash happens to the server, not the host).
    fn is_the_hosts(self) -> bool {
        !matches!(self, Step::Crash(_))
    }

    /// Whether it starts the application's next call (a start, or the restart before one):
    /// these keep their order, and move together when the application is paused.
    fn begins_a_call(self) -> bool {
        matches!(self, Step::Start(_) | Step::Restart(_))
    }
}

/// Whether a lane's workload carries the server's crashes (the turmoil lane crashes its
/// server host through the simulation's own fault schedule instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crashes {
    /// Crashes are steps of the workload.
    Included,
    /// Crashes are left to the lane.
    Left,
}

/// The steps still to take, by time and then by the order they were added.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    steps: BTreeMap<(Time, u64), Step>,
    added: u64,
    /// The host's steps not yet taken.
    host_left: usize,
}

impl Workload {
    /// The workload of `scenario`: its calls' starts and cancels, its stream resets, and (as
    /// `crashes` says) its server crashes. Partitions and blackholes are the network's.
    pub fn of(scenario: &Scenario, crashes: Crashes) -> Self {
        let mut w = Workload::default();
        for (k, call) in scenario.calls.iter().enumerate() {
            w.add(Time::ZERO + call.at, Step::Start(k));
            if let Some(after) = call.cancel_after {
                w.add(Time::ZERO + call.at + after, Step::Cancel(k));
            }
        }
        for (k, fault) in scenario.faults.iter().enumerate() {
            let at = Time::ZERO + fault_time(fault);
            match *fault {
                Fault::ResetStream { call, .. } => w.add(at, Step::Reset(call)),
                Fault::CrashServer { .. } if crashes == Crashes::Included => {
                    w.add(at, Step::Crash(k))
                }
                _ => {}
            }
        }
        w
    }

    /// Adds `step` at `at`, after every step already due then.
    pub fn add(&mut self, at: Time, step: Step) {
        self.added += 1;
        self.host_left += usize::from(step.is_the_hosts());
        self.steps.insert((at, self.added), step);
    }

    /// When the next step is due.
    pub fn next_due(&self) -> Option<Time> {
        self.steps.keys().next().map(|k| k.0)
    }

    /// The next step due at `now`, taken.
    pub fn poll(&mut self, now: Time) -> Option<Step> {
        self.poll_if(now, |_| true)
    }

    /// The next step due at `now` that is `ready`, taken. A start or restart that is not
    /// ready waits, and so does every start and restart after it (the application's calls
    /// keep their order); the other steps go on.
    pub fn poll_if(&mut self, now: Time, ready: impl Fn(Step) -> bool) -> Option<Step> {
        let key = self.next_ready(&ready).filter(|k| k.0 <= now)?;
        let step = self.steps.remove(&key)?;
        self.host_left -= usize::from(step.is_the_hosts());
        Some(step)
    }

    /// When the next step that is `ready` (as [`Workload::poll_if`] reads it) is due.
    pub fn next_due_if(&self, ready: impl Fn(Step) -> bool) -> Option<Time> {
        self.next_ready(&ready).map(|k| k.0)
    }

    fn next_ready(&self, ready: &impl Fn(Step) -> bool) -> Option<(Time, u64)> {
        let mut calls_wait = false;
        for (&key, &step) in &self.steps {
            if step.begins_a_call() {
                calls_wait |= !ready(step);
                if calls_wait {
                    continue;
                }
            } else if !ready(step) {
                continue;
            }
            return Some(key);
        }
        None
    }

    /// The application was paused for `by` (a restart, or the recovery of a hung server):
    /// every start and restart still ahead moves `by` later, in the same order.
    pub fn postpone_starts(&mut self, by: std::time::Duration) {
        let moved: Vec<_> = self
            .steps
            .iter()
            .filter(|(_, s)| s.begins_a_call())
            .map(|(&k, &s)| (k, s))
            .collect();
        for ((at, seq), step) in moved {
            self.steps.remove(&(at, seq));
            self.steps.insert((at + by, seq), step);
        }
    }

    /// The application starts no more calls: every start and restart still ahead is dropped.
    pub fn drop_starts(&mut self) {
        let dropped = self.steps.len();
        self.steps.retain(|_, s| !s.begins_a_call());
        self.host_left -= dropped - self.steps.len();
    }

    /// The host has taken every step of its own: the application is done and its client may
    /// end the session (its `DELETE` waits until nothing is outstanding).
    pub fn host_done(&self) -> bool {
        self.host_left == 0
    }

    /// No step is left at all.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn steps_come_out_by_time_then_in_the_order_added_and_crashes_are_not_the_hosts() {
        let mut w = Workload::default();
        let t = |ms| Time::from_millis(ms);
        w.add(t(10), Step::Cancel(0));
        w.add(t(5), Step::Start(0));
        w.add(t(10), Step::Crash(1));
        w.add(t(10), Step::Reset(0));
        assert_eq!(w.next_due(), Some(t(5)));
        assert_eq!(w.poll(t(4)), None);
        assert_eq!(w.poll(t(5)), Some(Step::Start(0)));
        assert_eq!(w.poll(t(9)), None);
        assert_eq!(w.poll(t(10)), Some(Step::Cancel(0)));
        assert_eq!(w.poll(t(10)), Some(Step::Crash(1)));
        assert!(!w.host_done(), "the reset is still the host's to do");
        assert_eq!(w.poll(t(10)), Some(Step::Reset(0)));
        assert!(w.host_done() && w.is_empty());
    }

    #[test]
    fn a_scenario_gives_its_calls_then_its_faults_and_leaves_crashes_when_told() {
        let mut s = Scenario::from_seed(0);
        s.calls.truncate(1);
        s.calls[0].at = Duration::from_millis(1);
        s.calls[0].cancel_after = Some(Duration::from_millis(2));
        s.faults = vec![
            Fault::CrashServer {
                at: Duration::from_millis(3),
            },
            Fault::ResetStream {
                at: Duration::from_millis(3),
                call: 0,
            },
        ];
        let drain = |mut w: Workload| {
            std::iter::from_fn(move || w.poll(Time::from_millis(100))).collect::<Vec<_>>()
        };
        let all = drain(Workload::of(&s, Crashes::Included));
        let expected = [
            Step::Start(0),
            Step::Cancel(0),
            Step::Crash(0),
            Step::Reset(0),
        ];
        assert_eq!(all, expected);
        let without = drain(Workload::of(&s, Crashes::Left));
        assert_eq!(without, [Step::Start(0), Step::Cancel(0), Step::Reset(0)]);
    }

    #[test]
    fn a_start_that_waits_holds_back_later_starts_but_not_cancels() {
        let t = |ms| Time::from_millis(ms);
        let mut w = Workload::default();
        w.add(t(0), Step::Start(0));
        w.add(t(10), Step::Restart(1));
        w.add(t(10), Step::Start(1));
        w.add(t(12), Step::Start(2));
        w.add(t(15), Step::Cancel(0));
        let busy = |s: Step| !matches!(s, Step::Restart(_));
        assert_eq!(w.poll_if(t(20), busy), Some(Step::Start(0)));
        assert_eq!(
            w.next_due_if(busy),
            Some(t(15)),
            "the restart waits, the cancel does not"
        );
        assert_eq!(w.poll_if(t(20), busy), Some(Step::Cancel(0)));
        assert_eq!(w.poll_if(t(20), busy), None);
        // The restart took 100 ms: what was to start moves with it, in order.
        w.postpone_starts(Duration::from_millis(100));
        assert_eq!(w.next_due(), Some(t(110)));
        assert_eq!(w.poll(t(111)), Some(Step::Restart(1)));
        assert_eq!(w.poll(t(111)), Some(Step::Start(1)));
        assert_eq!(w.poll(t(111)), None);
        w.drop_starts();
        assert!(w.is_empty() && w.host_done());
    }
}
