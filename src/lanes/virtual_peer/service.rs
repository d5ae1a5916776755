//! Races by seed: a seeded service time for each message a virtual peer handles, and a seeded
//! order for an input and the program's timers due at the same instant.
//!
//! Under the virtual clock, handling a message costs no time, so a window of a millisecond
//! between two of the program's steps is never hit: the races a real machine runs into do not
//! happen. With a [`ServiceModel`], each input's handling keeps the program's loop busy for a
//! drawn time (the clock moves while nothing else runs, as a real loop is busy parsing and
//! dispatching), so the timers due meanwhile fire late and the next inputs queue behind it:
//! each input goes with `"hold": true`, the shim reports the end of its service time as the
//! program's next instant, and the inputs that arrive before then reach the program before
//! its loop runs again, which then finds them all ready at once and interleaves their
//! handling, as a real loop's next select returns every input that came while it was busy
//! (CPython's shim; Node.js's runs each input to quiescence);
//! and at each input a coin decides whether the timers due at its very instant fire before it
//! or after it (without the coin, each runtime's own order: asyncio's input first, Node.js's
//! timers first). Both are drawn from the run's seed, so every
//! interleaving a sweep reaches is still one seed, replayed byte for byte.
//!
//! The distribution is integer arithmetic only, so that a seed draws the same costs on every
//! machine: with mean `M` µs, seven inputs in eight cost a uniform `0..=M`, one in eight a
//! uniform `M..=8M` (mean `7/8 * M/2 + 1/8 * 9M/2 = M`: mostly quick, with a tail of slow
//! ones, as measured service times are).
//!
//! Off by default: without it the control protocol carries neither field, and every digest is
//! what it was.

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

/// The seeded cost model of a virtual peer's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceModel {
    /// The mean service time of an input, in µs (0: none, only the order is drawn).
    pub mean_us: u64,
    /// Draw, at each input, whether the timers due at its instant fire first.
    pub shuffle_ties: bool,
}

/// A run's draws from a [`ServiceModel`].
#[derive(Debug, Clone)]
pub(crate) struct Service {
    model: ServiceModel,
    rng: ChaCha8Rng,
}

impl Service {
    /// The draws of the run seeded with `seed` (a stream of their own: the program's entropy
    /// is the seed's).
    pub(crate) fn new(model: ServiceModel, seed: u64) -> Service {
        Service {
            model,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x7365_7276_6963_6521),
        }
    }

    /// The next input's fields: `cost_us` when drawn above zero and `hold` with a service
    /// time, and with shuffled ties `ties`: `"timers"` (the timers due at its instant fire
    /// first) or `"input"`.
    pub(crate) fn stamp(&mut self, cmd: &mut Value) {
        let mean = self.model.mean_us;
        if mean > 0 {
            let slow = self.rng.next_u64() % 8 == 0;
            let (lo, hi) = if slow { (mean, 8 * mean) } else { (0, mean) };
            let cost = lo + self.rng.next_u64() % (hi - lo + 1);
            if cost > 0 {
                cmd["cost_us"] = cost.into();
            }
            cmd["hold"] = true.into();
        }
        if self.model.shuffle_ties {
            let first = if self.rng.next_u64() % 2 == 0 {
                "timers"
            } else {
                "input"
            };
            cmd["ties"] = first.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_is_the_model_s_and_the_draws_are_the_seed_s() {
        let model = ServiceModel {
            mean_us: 2000,
            shuffle_ties: true,
        };
        let draws = |seed| {
            let mut s = Service::new(model, seed);
            (0..20_000)
                .map(|_| {
                    let mut v = serde_json::json!({});
                    s.stamp(&mut v);
                    (v["cost_us"].as_u64().unwrap_or(0), v["ties"] == "timers")
                })
                .collect::<Vec<_>>()
        };
        let a = draws(7);
        assert_eq!(a, draws(7), "one seed, one sequence");
        assert_ne!(a, draws(8));
        let mean = a.iter().map(|d| d.0).sum::<u64>() / a.len() as u64;
        assert!((1900..2100).contains(&mean), "mean {mean}");
        assert!(a.iter().all(|d| d.0 <= 16_000));
        let first = a.iter().filter(|d| d.1).count();
        assert!(
            (9_500..10_500).contains(&first),
            "{first} of 20000 timers first"
        );
    }

    #[test]
    fn off_adds_nothing() {
        let mut s = Service::new(
            ServiceModel {
                mean_us: 0,
                shuffle_ties: false,
            },
            1,
        );
        let mut v = serde_json::json!({"op": "deliver"});
        s.stamp(&mut v);
        assert_eq!(v, serde_json::json!({"op": "deliver"}));
    }
}
