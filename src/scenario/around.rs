//! Neighbours of a scenario: the same run with a few knobs moved, drawn from a perturbation
//! seed (`mcp-sim sweep --around`, `replay --scenario FILE --perturb-seed N`).
//!
//! A scenario fitted from a real session is one point; the failures its peer is capable of lie
//! near it: a cancel that lands a few ms later, across its call's result or just at one of its
//! progress notifications; a start shifted so two calls overlap; slower links; an idle-cutting
//! proxy in front; a stream reset or a crash near a recorded event; the other transport. [`neighbour`] draws a few such [`Change`]s from
//! ChaCha8 seeded with the perturbation seed alone, so `(scenario digest, perturbation seed)`
//! names a neighbour as a seed names a drawn scenario. Each change has a size normalised to its
//! knob's range, and a neighbour's distance is their sum: a sweep lists failing neighbours
//! nearest first.
//!
//! [`minimize`] shrinks a failing neighbour's changes to the fewest and smallest that still
//! break the rule (delta debugging over knob changes, then a bisection of each change's size
//! toward none), and [`Change::describe`] says the result in words.

use std::fmt;
use std::time::Duration;

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Fault, ProxyConfig, Scenario};
use crate::model::Transport;

/// Which knobs a sweep may move, and how far (`--perturb`).
#[derive(Debug, Clone, PartialEq)]
pub struct PerturbSpec {
    /// A cancel moves by up to this much either way (`cancel=±2s`); zero: never.
    pub cancel: Duration,
    /// A call's start moves by up to this much either way (`start=±500ms`); zero: never.
    pub start: Duration,
    /// Latency is scaled within this range (`latency=x0.25..x8`); `(1, 1)`: never.
    pub latency: (f64, f64),
    /// The idle-cutting proxies one may put in front (HTTP; `proxy=nginx|alb|cloudflare`).
    pub proxies: Vec<ProxyConfig>,
    /// Up to this many stream resets are added (`reset=0..2`).
    pub resets: u32,
    /// Up to this many server crashes are added (`crash=0..1`).
    pub crashes: u32,
    /// The transport may switch (`transport=stdio|http`).
    pub transport: bool,
}

impl Default for PerturbSpec {
    /// Cancels ±2 s, starts ±500 ms, latency ×0.25 to ×8, the three proxy presets, up to one
    /// reset and one crash; the transport kept.
    fn default() -> Self {
        PerturbSpec {
            cancel: Duration::from_secs(2),
            start: Duration::from_millis(500),
            latency: (0.25, 8.0),
            proxies: vec![
                ProxyConfig::NGINX,
                ProxyConfig::ALB,
                ProxyConfig::CLOUDFLARE,
            ],
            resets: 1,
            crashes: 1,
            transport: false,
        }
    }
}

/// Why a `--perturb` text is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerturbSpecError(pub String);

impl fmt::Display for PerturbSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--perturb: {}", self.0)
    }
}

impl std::error::Error for PerturbSpecError {}

fn span(text: &str) -> Option<Duration> {
    let text = text.trim_start_matches('±').trim_start_matches("+-");
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.parse().ok().map(Duration::from_millis);
    }
    let s: f64 = text.strip_suffix('s')?.parse().ok()?;
    (0.0..1e6)
        .contains(&s)
        .then(|| Duration::from_millis((s * 1000.0) as u64))
}

impl PerturbSpec {
    /// Only the knobs `text` names: `cancel=±2s,start=±500ms,latency=x0.25..x8,
    /// proxy=nginx|alb|cloudflare,reset=0..2,crash=0..1,transport=stdio|http`.
    pub fn parse(text: &str) -> Result<PerturbSpec, PerturbSpecError> {
        let mut spec = PerturbSpec {
            cancel: Duration::ZERO,
            start: Duration::ZERO,
            latency: (1.0, 1.0),
            proxies: Vec::new(),
            resets: 0,
            crashes: 0,
            transport: false,
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (knob, value) = part
                .split_once('=')
                .ok_or_else(|| PerturbSpecError(format!("{part:?} is not KNOB=VALUE")))?;
            let bad = |what: &str| PerturbSpecError(format!("{knob}={value:?}: {what}"));
            let upto = |v: &str| -> Option<u32> {
                let hi = v.strip_prefix("0..").unwrap_or(v);
                hi.parse().ok().filter(|n| *n <= 16)
            };
            match knob {
                "cancel" => {
                    spec.cancel =
                        span(value).ok_or_else(|| bad("not a span such as ±2s or 300ms"))?
                }
                "start" => {
                    spec.start = span(value).ok_or_else(|| bad("not a span such as ±500ms"))?
                }
                "latency" => {
                    let (lo, hi) = value
                        .split_once("..")
                        .and_then(|(lo, hi)| {
                            let f = |x: &str| x.trim_start_matches('x').parse::<f64>().ok();
                            Some((f(lo)?, f(hi)?))
                        })
                        .filter(|(lo, hi)| *lo > 0.0 && lo <= hi && *hi <= 1000.0)
                        .ok_or_else(|| bad("not a range such as x0.25..x8"))?;
                    spec.latency = (lo, hi);
                }
                "proxy" => {
                    for name in value.split('|') {
                        let p = ProxyConfig::preset(name)
                            .ok_or_else(|| bad("not nginx, alb, cloudflare or custom:SECONDS"))?;
                        spec.proxies.push(p);
                    }
                }
                "reset" => {
                    spec.resets = upto(value).ok_or_else(|| bad("not a count such as 0..2"))?
                }
                "crash" => {
                    spec.crashes = upto(value).ok_or_else(|| bad("not a count such as 0..1"))?
                }
                "transport" => spec.transport = true,
                "era" if value == "keep" => {}
                _ => return Err(PerturbSpecError(format!("unknown knob {knob:?}"))),
            }
        }
        Ok(spec)
    }
}

/// One knob moved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// Call `call`'s cancel, `from` its offset (none: it was not cancelled) `to` another.
    Cancel {
        /// Index into [`Scenario::calls`].
        call: usize,
        /// The offset before.
        from: Option<Duration>,
        /// The offset after.
        to: Duration,
    },
    /// Call `call`'s timeout (a call its client's own timer gave up): the deadline moved
    /// `from` one offset `to` another, so that the timer's cancel moves as an application's
    /// cancel would.
    Deadline {
        /// Index into [`Scenario::calls`].
        call: usize,
        /// The timeout before.
        from: Duration,
        /// The timeout after.
        to: Duration,
    },
    /// Call `call` starts `by_ms` later (earlier when negative).
    Start {
        /// Index into [`Scenario::calls`].
        call: usize,
        /// The shift.
        by_ms: i64,
    },
    /// Every one-way latency scaled by `factor`.
    Latency {
        /// The factor.
        factor: f64,
    },
    /// An idle-cutting proxy in front (HTTP).
    Proxy(ProxyConfig),
    /// Call `call`'s stream reset `at` (HTTP; a crash on stdio).
    Reset {
        /// Index into [`Scenario::calls`].
        call: usize,
        /// When.
        at: Duration,
    },
    /// The server crashes `at`.
    Crash {
        /// When.
        at: Duration,
    },
    /// The other transport.
    Transport(Transport),
}

impl Change {
    /// The change's size, about 1 for a change across its knob's whole range.
    pub fn size(&self, spec: &PerturbSpec) -> f64 {
        let rel = |d: f64, range: Duration| d.abs() / (range.as_millis().max(1) as f64);
        match *self {
            Change::Cancel { from, to, .. } => {
                let from = from.map_or(
                    to.as_millis() as f64 + spec.cancel.as_millis() as f64,
                    |f| f.as_millis() as f64,
                );
                rel(to.as_millis() as f64 - from, spec.cancel).min(2.0)
            }
            Change::Deadline { from, to, .. } => {
                rel(to.as_millis() as f64 - from.as_millis() as f64, spec.cancel).min(2.0)
            }
            Change::Start { by_ms, .. } => rel(by_ms as f64, spec.start),
            Change::Latency { factor } => factor.log2().abs() / 3.0,
            Change::Proxy(_) | Change::Reset { .. } | Change::Crash { .. } => 1.0,
            Change::Transport(_) => 2.0,
        }
    }

    /// The change in words.
    pub fn describe(&self) -> String {
        let s = |d: Duration| format!("{:.2} s", d.as_secs_f64());
        match *self {
            Change::Cancel {
                call,
                from: Some(from),
                to,
            } => {
                format!(
                    "moving the cancel of call {} from {} to {}",
                    call + 1,
                    s(from),
                    s(to)
                )
            }
            Change::Cancel {
                call,
                from: None,
                to,
            } => {
                format!("cancelling call {} {} after its start", call + 1, s(to))
            }
            Change::Deadline { call, from, to } => format!(
                "moving the deadline of call {} (its client's timeout) from {} to {}",
                call + 1,
                s(from),
                s(to)
            ),
            Change::Start { call, by_ms } if by_ms >= 0 => {
                format!("starting call {} {by_ms} ms later", call + 1)
            }
            Change::Start { call, by_ms } => {
                format!("starting call {} {} ms earlier", call + 1, -by_ms)
            }
            Change::Latency { factor } => format!("scaling the latency by {factor:.2}"),
            Change::Proxy(p) => format!(
                "putting {} ({} s idle) in front",
                p.name,
                p.idle_timeout.as_secs()
            ),
            Change::Reset { call, at } => {
                format!("resetting call {}'s stream at {}", call + 1, s(at))
            }
            Change::Crash { at } => format!("crashing the server at {}", s(at)),
            Change::Transport(t) => format!("switching to {t}"),
        }
    }

    /// The same change, `fraction` (0 to 1) of the way from none to this one; `None` for a
    /// change that has no size between none and all.
    fn scaled(&self, fraction: f64) -> Option<Change> {
        let lerp = |a: f64, b: f64| a + (b - a) * fraction;
        match *self {
            Change::Cancel {
                call,
                from: Some(from),
                to,
            } => {
                let ms = lerp(from.as_millis() as f64, to.as_millis() as f64);
                Some(Change::Cancel {
                    call,
                    from: Some(from),
                    to: Duration::from_millis(ms.round() as u64),
                })
            }
            Change::Deadline { call, from, to } => {
                let ms = lerp(from.as_millis() as f64, to.as_millis() as f64);
                Some(Change::Deadline {
                    call,
                    from,
                    to: Duration::from_millis(ms.round() as u64),
                })
            }
            Change::Start { call, by_ms } => Some(Change::Start {
                call,
                by_ms: lerp(0.0, by_ms as f64).round() as i64,
            }),
            Change::Latency { factor } => Some(Change::Latency {
                factor: lerp(0.0, factor.log2()).exp2(),
            }),
            _ => None,
        }
    }
}

/// A neighbour: its scenario, the changes that made it, and how far it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Neighbour {
    /// The perturbation seed it was drawn from.
    pub perturb_seed: u64,
    /// The changes, in the order they were drawn.
    pub changes: Vec<Change>,
    /// The sum of the changes' sizes.
    pub distance: f64,
    /// The scenario with the changes applied.
    pub scenario: Scenario,
}

/// Where a call's work ends, in ms after its start, as the scenario plans it.
fn work_ms(s: &Scenario, call: usize) -> u64 {
    let c = &s.calls[call];
    u64::from(c.steps) * c.step.as_millis() as u64 + 2 * s.latency.1.as_millis() as u64
}

/// The deadline of the timer that gives call `call` up before its work ends, when that is how
/// it ends: no cancel of the application's, a timeout that progress does not reset, shorter
/// than the work. Moving such a cancel is moving the timeout (a real client's timer is its
/// own; what a live run can move is the server's answer toward it).
fn timer_deadline(s: &Scenario, call: usize) -> Option<Duration> {
    let c = &s.calls[call];
    let timeout = c.policy.timeout?;
    let fires = c.cancel_after.is_none()
        && !c.policy.reset_timeout_on_progress
        && (timeout.as_millis() as u64) < work_ms(s, call);
    fires.then_some(timeout)
}

/// How wide the window around a call's planned event is that a cancel drawn at the event
/// falls in, in ms (three quarters before it, the rest after).
const EVENT_WINDOW_MS: u64 = 40;

/// A message's typical time there and back, in ms: two one-way latencies, four through an
/// intermediary.
fn round_trip_ms(s: &Scenario) -> u64 {
    let one_way = (s.latency.0.as_millis() as u64 + s.latency.1.as_millis() as u64) / 2;
    one_way * if s.bridge { 4 } else { 2 }
}

/// Draws the neighbour of `base` that `perturb_seed` names: one to three changes.
pub fn neighbour(base: &Scenario, perturb_seed: u64, spec: &PerturbSpec) -> Neighbour {
    let mut rng = ChaCha8Rng::seed_from_u64(perturb_seed ^ 0x6172_6f75_6e64_0000);
    let mut below = |n: u64| rng.next_u64() % n.max(1);
    let mut kinds: Vec<u8> = Vec::new();
    let calls = base.calls.len() as u64;
    if !spec.cancel.is_zero() && calls > 0 {
        kinds.extend([0, 0, 0]); // cancels weigh most: they are what races
    }
    if !spec.start.is_zero() && calls > 1 {
        kinds.push(1);
    }
    if spec.latency != (1.0, 1.0) {
        kinds.push(2);
    }
    if !spec.proxies.is_empty() && base.transport == Transport::Http {
        kinds.push(3);
    }
    if spec.resets > 0 && calls > 0 {
        kinds.push(4);
    }
    if spec.crashes > 0 {
        kinds.push(5);
    }
    if spec.transport && !base.bridge {
        kinds.push(6);
    }
    let mut changes = Vec::new();
    if !kinds.is_empty() {
        let n = 1 + below(3);
        let (mut resets, mut crashes) = (0, 0);
        for _ in 0..n {
            let kind = kinds[below(kinds.len() as u64) as usize];
            let change = match kind {
                0 => {
                    let call = below(calls) as usize;
                    let range = spec.cancel.as_millis() as u64;
                    let from = base.calls[call].cancel_after;
                    let deadline = timer_deadline(base, call);
                    // Toward or across the call's result: around the old offset (the cancel's,
                    // or the deadline of the timer that gave the call up), or around where the
                    // work ends for a call that was not cancelled.
                    let centre = match (from, deadline) {
                        (Some(f), _) | (None, Some(f)) => f.as_millis() as u64,
                        (None, None) => work_ms(base, call),
                    };
                    let steps = u64::from(base.calls[call].steps);
                    // Or just before one of the call's planned events as the client would see
                    // it (a progress notification or the result): a cancel then races what is
                    // already on its way, and a window of a few ms is all a race has.
                    let to = if steps > 0 && below(2) == 0 {
                        let event = (1 + below(steps)) * base.calls[call].step.as_millis() as u64
                            + round_trip_ms(base);
                        (event + below(EVENT_WINDOW_MS + 1)).saturating_sub(EVENT_WINDOW_MS * 3 / 4)
                    } else {
                        centre.saturating_sub(range) + below(2 * range + 1)
                    };
                    let to = Duration::from_millis(to);
                    match deadline {
                        Some(from) => Change::Deadline { call, from, to },
                        None => Change::Cancel { call, from, to },
                    }
                }
                1 => {
                    let range = spec.start.as_millis() as i64;
                    let by_ms = below(2 * range as u64 + 1) as i64 - range;
                    Change::Start {
                        call: below(calls) as usize,
                        by_ms,
                    }
                }
                2 => {
                    let (lo, hi) = (spec.latency.0.log2(), spec.latency.1.log2());
                    let u = below(1_000_001) as f64 / 1_000_000.0;
                    Change::Latency {
                        factor: (lo + (hi - lo) * u).exp2(),
                    }
                }
                3 => Change::Proxy(spec.proxies[below(spec.proxies.len() as u64) as usize]),
                4 if resets < spec.resets => {
                    resets += 1;
                    let call = below(calls) as usize;
                    let start = base.calls[call].at.as_millis() as u64;
                    let at = start + below(work_ms(base, call).max(1));
                    Change::Reset {
                        call,
                        at: Duration::from_millis(at),
                    }
                }
                5 if crashes < spec.crashes => {
                    crashes += 1;
                    let end = (0..base.calls.len())
                        .map(|k| base.calls[k].at.as_millis() as u64 + work_ms(base, k))
                        .max()
                        .unwrap_or(1000);
                    Change::Crash {
                        at: Duration::from_millis(below(end.max(1))),
                    }
                }
                6 => Change::Transport(match base.transport {
                    Transport::Stdio => Transport::Http,
                    Transport::Http => Transport::Stdio,
                }),
                _ => continue,
            };
            // One change per knob and call: a later draw of the same replaces none.
            if !changes.iter().any(|c: &Change| same_knob(c, &change)) {
                changes.push(change);
            }
        }
    }
    let distance = changes.iter().map(|c| c.size(spec)).sum();
    Neighbour {
        perturb_seed,
        scenario: apply(base, &changes),
        changes,
        distance,
    }
}

fn same_knob(a: &Change, b: &Change) -> bool {
    use Change::*;
    match (a, b) {
        (Cancel { call: x, .. } | Deadline { call: x, .. }, Cancel { call: y, .. })
        | (Cancel { call: x, .. } | Deadline { call: x, .. }, Deadline { call: y, .. })
        | (Start { call: x, .. }, Start { call: y, .. }) => x == y,
        (Latency { .. }, Latency { .. }) | (Proxy(_), Proxy(_)) | (Transport(_), Transport(_)) => {
            true
        }
        _ => false,
    }
}

/// `base` with `changes` applied.
pub fn apply(base: &Scenario, changes: &[Change]) -> Scenario {
    let mut s = base.clone();
    for change in changes {
        match *change {
            Change::Cancel { call, to, .. } => s.calls[call].cancel_after = Some(to),
            Change::Deadline { call, to, .. } => s.calls[call].policy.timeout = Some(to),
            Change::Start { call, by_ms } => {
                let at = s.calls[call].at.as_millis() as i64 + by_ms;
                s.calls[call].at = Duration::from_millis(at.max(0) as u64);
            }
            Change::Latency { factor } => {
                let scale = |d: Duration| {
                    Duration::from_millis((d.as_millis() as f64 * factor).round() as u64)
                };
                s.latency = (
                    scale(s.latency.0),
                    scale(s.latency.1).max(scale(s.latency.0)),
                );
            }
            Change::Proxy(p) => s = s.with_proxy(Some(p)),
            Change::Reset { call, at } => s.faults.push(match s.transport {
                Transport::Http => Fault::ResetStream { at, call },
                Transport::Stdio => Fault::CrashServer { at },
            }),
            Change::Crash { at } => s.faults.push(Fault::CrashServer { at }),
            Change::Transport(t) => s = s.with_transport(t),
        }
    }
    s.faults.sort_by_key(fault_time);
    s
}

fn fault_time(f: &Fault) -> Duration {
    match *f {
        Fault::ResetStream { at, .. }
        | Fault::CrashServer { at }
        | Fault::Partition { at, .. }
        | Fault::Blackhole { at, .. } => at,
    }
}

/// Shrinks `changes` to the fewest, then the smallest, that still make `fails` true of the
/// scenario: first drops each change the failure does not need (until no single one can go),
/// then bisects each remaining change's size toward none (8 steps). `fails` is called about
/// `changes.len()² + 8 · changes.len()` times at most.
pub fn minimize(
    base: &Scenario,
    changes: &[Change],
    mut fails: impl FnMut(&Scenario) -> bool,
) -> Vec<Change> {
    let mut kept = changes.to_vec();
    let mut k = 0;
    while k < kept.len() {
        let mut without = kept.clone();
        without.remove(k);
        if !without.is_empty() && fails(&apply(base, &without)) {
            kept = without;
            k = 0;
        } else {
            k += 1;
        }
    }
    for k in 0..kept.len() {
        let (mut lo, mut hi) = (0.0, 1.0);
        if kept[k].scaled(1.0).is_none() {
            continue;
        }
        let full = kept[k];
        for _ in 0..8 {
            let mid = (lo + hi) / 2.0;
            let mut trial = kept.clone();
            trial[k] = full.scaled(mid).expect("a scalable change");
            if fails(&apply(base, &trial)) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        kept[k] = full.scaled(hi).expect("a scalable change");
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TimeoutPolicy;

    #[test]
    fn the_same_seed_draws_the_same_neighbour_and_others_differ() {
        let base = Scenario::calls_only(7).with_transport(Transport::Http);
        let spec = PerturbSpec::default();
        let a = neighbour(&base, 417, &spec);
        assert_eq!(a, neighbour(&base, 417, &spec));
        assert!(!a.changes.is_empty() && a.distance > 0.0, "{a:?}");
        let distinct = (0..50)
            .map(|s| format!("{:?}", neighbour(&base, s, &spec).changes))
            .collect::<std::collections::BTreeSet<_>>();
        assert!(distinct.len() > 40, "{}", distinct.len());
    }

    #[test]
    fn a_spec_names_only_its_knobs_and_bad_ones_are_refused() {
        let spec =
            PerturbSpec::parse("cancel=±2s,latency=x0.5..x4,proxy=nginx|alb,reset=0..2").unwrap();
        assert_eq!(spec.cancel, Duration::from_secs(2));
        assert_eq!(spec.start, Duration::ZERO);
        assert_eq!((spec.proxies.len(), spec.resets, spec.crashes), (2, 2, 0));
        for bad in [
            "cancel",
            "cancel=soon",
            "latency=x4..x1",
            "proxy=squid",
            "warp=1",
        ] {
            assert!(PerturbSpec::parse(bad).is_err(), "{bad}");
        }
        let only_cancels = PerturbSpec::parse("cancel=300ms").unwrap();
        let base = Scenario::calls_only(7);
        for seed in 0..100 {
            let n = neighbour(&base, seed, &only_cancels);
            assert!(
                n.changes.iter().all(|c| matches!(c, Change::Cancel { .. })),
                "{n:?}"
            );
        }
    }

    #[test]
    fn a_call_its_timer_gave_up_has_its_deadline_moved_not_a_cancel_added() {
        let mut base = Scenario::calls_only(7);
        for c in &mut base.calls {
            c.cancel_after = None;
            c.policy = TimeoutPolicy::fixed(Duration::from_millis(1));
        }
        let spec = PerturbSpec::parse("cancel=300ms").unwrap();
        let mut deadlines = 0;
        for seed in 0..100 {
            let n = neighbour(&base, seed, &spec);
            for c in &n.changes {
                let Change::Deadline { call, from, to } = *c else {
                    panic!("{c:?}");
                };
                assert_eq!(from, Duration::from_millis(1));
                assert_eq!(n.scenario.calls[call].policy.timeout, Some(to));
                assert_eq!(n.scenario.calls[call].cancel_after, None);
                deadlines += 1;
            }
        }
        assert!(deadlines > 100, "{deadlines}");
    }

    #[test]
    fn minimize_keeps_what_the_failure_needs_at_its_smallest() {
        let base = Scenario::calls_only(7);
        let changes = [
            Change::Latency { factor: 4.0 },
            Change::Cancel {
                call: 0,
                from: Some(Duration::from_millis(1000)),
                to: Duration::from_millis(3000),
            },
        ];
        // "Fails" when call 0's cancel is at 2 s or later, whatever the latency.
        let fails = |s: &Scenario| s.calls[0].cancel_after >= Some(Duration::from_millis(2000));
        let kept = minimize(&base, &changes, fails);
        let [Change::Cancel { to, .. }] = kept[..] else {
            panic!("{kept:?}")
        };
        assert!((2000..2020).contains(&(to.as_millis() as u64)), "{to:?}");
    }
}
