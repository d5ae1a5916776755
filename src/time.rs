//! Logical time. The model never reads a clock: every input carries `now`.
//!
//! [`Time`] counts milliseconds since the start of a run; simulated and recorded traces use the
//! same unit (`t` in trace format v1). Durations are [`std::time::Duration`], truncated to whole
//! milliseconds where they meet a `Time`, and written as whole milliseconds in files ([`ms`]).

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

/// Times and durations a scenario states are below this many milliseconds (about 11.5 days).
pub const MAX_MS: u64 = 1_000_000_000;

/// A [`Duration`] as whole milliseconds in serde formats, for `#[serde(with = "...")]`: the
/// number a person writes in a scenario file (`"cancel_after_ms": 1500`), read back below
/// [`MAX_MS`]. The submodules do the same for optional durations and ranges.
pub mod ms {
    use std::time::Duration;

    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::MAX_MS;

    /// Writes `d` in whole milliseconds (truncated).
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(millis(*d))
    }

    /// Reads whole milliseconds below [`MAX_MS`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        checked(u64::deserialize(d)?)
    }

    fn millis(d: Duration) -> u64 {
        d.as_millis() as u64
    }

    fn checked<E: Error>(ms: u64) -> Result<Duration, E> {
        match ms < MAX_MS {
            true => Ok(Duration::from_millis(ms)),
            false => Err(E::custom(format!("{ms} ms is over the limit of {MAX_MS}"))),
        }
    }

    /// An `Option<Duration>`: milliseconds, or `null` for `None`. A missing member reads as
    /// `None` only with `#[serde(default)]` beside the `with`.
    pub mod option {
        use super::*;

        /// Writes whole milliseconds, or `null`.
        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            d.map(millis).serialize(s)
        }

        /// Reads whole milliseconds below [`MAX_MS`], or `null`.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            Option::<u64>::deserialize(d)?.map(checked).transpose()
        }
    }

    /// An `Option<Duration>` where `None` means "never": as [`option`], and 0 ms reads as
    /// `None` too.
    pub mod zero_is_none {
        use super::*;

        pub use super::option::serialize;

        /// Reads whole milliseconds below [`MAX_MS`]; `null` and 0 are `None`.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            Ok(super::option::deserialize(d)?.filter(|d| !d.is_zero()))
        }
    }

    /// A duration that must not be zero: as [`ms`](crate::time::ms), and 0 ms is refused.
    pub mod positive {
        use super::*;

        pub use super::serialize;

        /// Reads whole milliseconds from 1 to below [`MAX_MS`].
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
            match super::deserialize(d)? {
                d if d.is_zero() => Err(D::Error::custom("0 ms, where it must be at least 1 ms")),
                d => Ok(d),
            }
        }
    }

    /// A range `(low, high)` as `[low_ms, high_ms]`, the low end not above the high end.
    pub mod range {
        use super::*;

        /// Writes `[low_ms, high_ms]`.
        pub fn serialize<S: Serializer>(r: &(Duration, Duration), s: S) -> Result<S::Ok, S::Error> {
            [millis(r.0), millis(r.1)].serialize(s)
        }

        /// Reads `[low_ms, high_ms]`, each below [`MAX_MS`], `low_ms` not above `high_ms`.
        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<(Duration, Duration), D::Error> {
            let [lo, hi] = <[u64; 2]>::deserialize(d)?;
            if lo > hi {
                return Err(D::Error::custom(format!(
                    "[{lo}, {hi}]: the low end is above the high end"
                )));
            }
            Ok((checked(lo)?, checked(hi)?))
        }
    }
}
