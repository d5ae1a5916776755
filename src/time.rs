//! Logical time. The model never reads a clock: every input carries `now`.
//!
//! [`Time`] counts milliseconds since the start of a run; simulated and recorded traces use the
//! same unit (`t` in trace format v1). Durations are [`std::time::Duration`], truncated to whole
//! milliseconds where they meet a `Time`.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in time: milliseconds since the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

impl Time {
    /// The start of the run.
    pub const ZERO: Time = Time(0);

    /// A time `ms` milliseconds after the start.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms)
    }

    /// Milliseconds since the start.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// The time elapsed since `earlier` (zero if `earlier` is later).
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        )
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    fn sub(self, earlier: Time) -> Duration {
        self.since(earlier)
    }
}

impl fmt::Display for Time {
    /// Seconds with millisecond precision: `12.345s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}s", self.0 / 1000, self.0 % 1000)
    }
}
