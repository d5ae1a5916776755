//! `mcp-sim diff`: did cancellation, progress or timeouts behave differently between two runs?
//!
//! Two traces of any source (probe, serve, record, check-proxy, the simulation) are read into
//! their calls ([`calls`]), the calls of one aligned with the other's, and each aligned pair
//! compared by behaviour class, not by bytes: its outcome, whether and how a cancel was
//! answered, what the server still sent after it, its progress, its HTTP statuses and closes
//! (and, when asked, its answer's payload, volatile members left out). Then the verdicts: the
//! rules the new run newly breaks, the ones it no longer breaks, and the ones both break.
//!
//! **Alignment.** Calls pair by the probe's call tag when both runs tagged theirs (check-proxy
//! runs do); else by method, params without `_meta` and occurrence (the `k`-th identical call
//! with the `k`-th), which is the seeded schedule's own order when both runs are probes of one
//! seed; else by order, a pair only when the methods agree. A call without a partner is listed,
//! never guessed at; when fewer than 80 % of the base's calls pair, the runs are not comparable
//! ([`Diff::is_aligned`]), and `diff` exits 3.
//!
//! **Noise.** Real runs differ by timing. With repeated runs of the base (`--noise`), every
//! difference between the base and a repeat (a class of a call, a rule) is noise, and is not
//! reported as a change between the base and the new run; timing changes count only beyond
//! the tolerance and twice the spread the repeats show.
//!
//! **Exit codes** ([`Diff::exit`]): 0 no regression beyond noise, 1 a regression (a rule
//! newly broken at any level, an outcome changed, a timing change beyond tolerance, the server
//! asking for something else), 2 a trace that cannot be read (the command's), 3 unaligned.
//! Other classes that changed (a cancel now unanswered, a tail gone) are reported beside: the
//! rules say whether such a change is for the worse, so a fix does not fail the diff.

pub mod calls;
mod render;

use std::collections::{BTreeMap, BTreeSet};

pub use calls::{Call, Class, RunCalls};
pub use render::{github, json, junit, mermaid, text};

use crate::oracle::{self, Level, OracleConfig};
use crate::trace::Trace;

/// The share of calls that must pair for two runs to be compared.
pub const MIN_ALIGNED: f64 = 0.8;

/// How calls pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// By tag when both runs tagged every call, else by params and occurrence.
    Auto,
    /// By the probe's call tag.
    Tag,
    /// By method, params without `_meta`, and occurrence.
    Params,
    /// By order, where the methods agree.
    Order,
}

/// What `diff` compares and how.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// How calls pair.
    pub align: Align,
    /// Compare the payloads of answers too (volatile members left out).
    pub payloads: bool,
    /// A timing change smaller than this, in ms, is none.
    pub timing_tolerance_ms: u64,
    /// A timing change smaller than this share of the base's figure is none.
    pub timing_tolerance_share: f64,
    /// How the runs are judged (and how long after a cancel a message may be in flight).
    pub oracle: OracleConfig,
}

impl Default for DiffOptions {
    /// Auto alignment, no payloads, timing within 1 s or half the base's figure.
    fn default() -> Self {
        DiffOptions {
            align: Align::Auto,
            payloads: false,
            timing_tolerance_ms: 1000,
            timing_tolerance_share: 0.5,
            oracle: OracleConfig::default(),
        }
    }
}

/// One class of one aligned call that differs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClassChange {
    /// The class.
    pub class: Class,
    /// The base run's text.
    pub base: String,
    /// The new run's text.
    pub new: String,
    /// It also differs between the base and a repeat of it.
    pub noise: bool,
}

/// A timing figure of one aligned call that moved.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TimingChange {
    /// `duration` (start to end) or `progress gap` (mean gap between notifications).
    pub figure: &'static str,
    /// The base's ms.
    pub base_ms: u64,
    /// The new run's ms.
    pub new_ms: u64,
    /// The largest move the base's repeats showed, in ms.
    pub noise_ms: u64,
    /// Beyond tolerance and noise: a change.
    pub flagged: bool,
}

/// An aligned pair of calls.
#[derive(Debug, Clone)]
pub struct Pair {
    /// The base run's call (its index in [`RunCalls::calls`]).
    pub base: usize,
    /// The new run's.
    pub new: usize,
    /// The classes that differ.
    pub changes: Vec<ClassChange>,
    /// The timing figures that moved.
    pub timing: Vec<TimingChange>,
}

impl Pair {
    /// A class or a timing figure changed beyond noise and tolerance.
    pub fn changed(&self) -> bool {
        self.changes.iter().any(|c| !c.noise) || self.timing.iter().any(|t| t.flagged)
    }

    /// Its outcome changed, or a timing figure moved beyond tolerance: a regression by
    /// itself. Another class that changed is reported; whether it is for the worse, the
    /// rules say (an answered cancel breaks `response-after-cancel`, disordered progress
    /// `progress-monotonic`), so a fix is not taken for a regression.
    pub fn regressed(&self) -> bool {
        self.changes
            .iter()
            .any(|c| !c.noise && c.class == Class::Outcome)
            || self.timing.iter().any(|t| t.flagged)
    }
}

/// A rule in one verdict and not in the other, or in both.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuleChange {
    /// The rule.
    pub rule: &'static str,
    /// Its level as broken (the new run's, else the base's).
    #[serde(serialize_with = "level_name")]
    pub level: Level,
    /// Violations in the base run.
    pub base: usize,
    /// Violations in the new run.
    pub new: usize,
    /// It also comes and goes between the base and a repeat of it.
    pub noise: bool,
}

fn level_name<S: serde::Serializer>(level: &Level, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(level.as_str())
}

/// Two runs compared.
#[derive(Debug, Clone)]
pub struct Diff {
    /// How the calls paired.
    pub align: Align,
    /// The base run's calls.
    pub base: RunCalls,
    /// The new run's calls.
    pub new: RunCalls,
    /// The aligned pairs, in the base's order.
    pub pairs: Vec<Pair>,
    /// The base's calls without a partner.
    pub only_base: Vec<usize>,
    /// The new run's calls without a partner.
    pub only_new: Vec<usize>,
    /// Rules the new run breaks and the base does not.
    pub newly_broken: Vec<RuleChange>,
    /// Rules the base breaks and the new run does not.
    pub fixed: Vec<RuleChange>,
    /// Rules both break.
    pub still_broken: Vec<RuleChange>,
    /// The server's own requests, by method, where the runs differ: `(method, base, new)`.
    pub server_requests: Vec<(String, usize, usize)>,
    /// How many repeats of the base gave the noise floor.
    pub noise_runs: usize,
}

impl Diff {
    /// The share of the base's calls that paired; 0 when the base made none. The new run's
    /// calls without a partner (a probe's own start-up and liveness checks beside a recorded
    /// session's calls) are listed, and do not make the runs incomparable.
    pub fn aligned_share(&self) -> f64 {
        match self.base.calls.len() {
            0 => 0.0,
            n => self.pairs.len() as f64 / n as f64,
        }
    }

    /// Enough calls paired to compare the runs.
    pub fn is_aligned(&self) -> bool {
        self.aligned_share() >= MIN_ALIGNED
    }

    /// The pairs that changed beyond noise.
    pub fn changed_pairs(&self) -> impl Iterator<Item = &Pair> {
        self.pairs.iter().filter(|p| p.changed())
    }

    /// A regression: a rule newly broken beyond noise (at any level), a call's outcome
    /// changed, a timing change beyond tolerance, or the server asking for something it did
    /// not ask before (or no longer).
    pub fn is_regression(&self) -> bool {
        self.newly_broken.iter().any(|r| !r.noise)
            || self.pairs.iter().any(Pair::regressed)
            || !self.server_requests.is_empty()
    }

    /// 0 no regression beyond noise (fixes and the changes that break no rule are reported),
    /// 1 a regression, 3 not comparable (2, an unreadable trace, is the command's).
    pub fn exit(&self) -> crate::exit::Exit {
        use crate::exit::Exit;
        if !self.is_aligned() {
            Exit::Inconclusive
        } else if self.is_regression() {
            Exit::Broken
        } else {
            Exit::Pass
        }
    }
}

/// Compares `new` with `base`; each of `noise` is another run of the base, whose differences
/// from it are noise.
pub fn diff(base: &Trace, new: &Trace, noise: &[Trace], options: &DiffOptions) -> Diff {
    let read = |t: &Trace| {
        let grace = options.oracle.grace_ms;
        oracle::with_index(t, &options.oracle, |ix, verdict| {
            calls::read(ix, verdict, grace, options.payloads)
        })
    };
    let (b, n) = (read(base), read(new));
    let align = match options.align {
        Align::Auto if all_tagged(&b) && all_tagged(&n) => Align::Tag,
        Align::Auto => Align::Params,
        other => other,
    };
    let floors: Vec<(RunCalls, Vec<(usize, usize)>)> = noise
        .iter()
        .map(|t| {
            let r = read(t);
            let pairs = pair(&b, &r, align);
            (r, pairs)
        })
        .collect();
    let pairs = pair(&b, &n, align);
    let paired_base: BTreeSet<usize> = pairs.iter().map(|p| p.0).collect();
    let paired_new: BTreeSet<usize> = pairs.iter().map(|p| p.1).collect();
    let compared: Vec<Pair> = pairs
        .iter()
        .map(|&(i, j)| compare(&b, &n, i, j, &floors, options))
        .collect();
    let verdict = |t: &Trace| oracle::check(t, &options.oracle);
    let base_verdict = verdict(base);
    let noise_rules: BTreeSet<&'static str> = noise
        .iter()
        .flat_map(|t| {
            let v = verdict(t);
            let (a, z) = (rule_counts(&base_verdict), rule_counts(&v));
            a.keys()
                .chain(z.keys())
                .filter(|r| a.contains_key(*r) != z.contains_key(*r))
                .copied()
                .collect::<Vec<_>>()
        })
        .collect();
    let (newly_broken, fixed, still_broken) =
        rule_delta(&base_verdict, &verdict(new), &noise_rules);
    let server_requests = server_request_delta(&b, &n);
    Diff {
        align,
        only_base: (0..b.calls.len())
            .filter(|i| !paired_base.contains(i))
            .collect(),
        only_new: (0..n.calls.len())
            .filter(|j| !paired_new.contains(j))
            .collect(),
        base: b,
        new: n,
        pairs: compared,
        newly_broken,
        fixed,
        still_broken,
        server_requests,
        noise_runs: noise.len(),
    }
}

fn all_tagged(run: &RunCalls) -> bool {
    let tools = run.calls.iter().filter(|c| c.method == "tools/call");
    let mut tools = tools.peekable();
    tools.peek().is_some() && tools.all(|c| c.tag.is_some())
}

/// The pairs `(base call, new call)` under `align` (never `Auto`).
fn pair(base: &RunCalls, new: &RunCalls, align: Align) -> Vec<(usize, usize)> {
    // Each call's key under the alignment, with its occurrence among calls of that key.
    let keys = |run: &RunCalls| -> Vec<(String, usize)> {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        run.calls
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let key = match (align, c.tag) {
                    (Align::Tag, Some(tag)) => format!("{} #{tag}", c.method),
                    (Align::Tag | Align::Params | Align::Auto, _) => {
                        format!("{} {}", c.method, c.shape)
                    }
                    (Align::Order, _) => format!("{k} {}", c.method),
                };
                let n = seen.entry(key.clone()).or_default();
                *n += 1;
                (key, *n)
            })
            .collect()
    };
    let theirs: BTreeMap<(String, usize), usize> = keys(new)
        .into_iter()
        .enumerate()
        .map(|(j, k)| (k, j))
        .collect();
    keys(base)
        .into_iter()
        .enumerate()
        .filter_map(|(i, k)| theirs.get(&k).map(|&j| (i, j)))
        .collect()
}

/// A timing figure of a call.
type Figure = fn(&Call) -> Option<u64>;

fn compare(
    base: &RunCalls,
    new: &RunCalls,
    i: usize,
    j: usize,
    floors: &[(RunCalls, Vec<(usize, usize)>)],
    options: &DiffOptions,
) -> Pair {
    let (b, n) = (&base.calls[i], &new.calls[j]);
    // The base call's partner in each repeat of the base.
    let repeats: Vec<&Call> = floors
        .iter()
        .filter_map(|(run, pairs)| {
            let &(_, k) = pairs.iter().find(|p| p.0 == i)?;
            Some(&run.calls[k])
        })
        .collect();
    let changes = Class::ALL
        .into_iter()
        .filter_map(|class| {
            let (x, y) = (b.class(class)?, n.class(class)?);
            (x != y).then(|| ClassChange {
                class,
                base: x.to_owned(),
                new: y.to_owned(),
                noise: repeats.iter().any(|r| r.class(class) != Some(x)),
            })
        })
        .collect();
    let figures: [(&'static str, Figure); 2] = [
        ("duration", |c| c.duration_ms),
        ("progress gap", |c| c.progress_gap_ms),
    ];
    let timing = figures
        .into_iter()
        .filter_map(|(figure, of)| {
            let (x, y) = (of(b)?, of(n)?);
            let noise_ms = repeats
                .iter()
                .filter_map(|r| of(r))
                .map(|r| r.abs_diff(x))
                .max()
                .unwrap_or(0);
            let tolerance = options
                .timing_tolerance_ms
                .max((x as f64 * options.timing_tolerance_share) as u64)
                .max(2 * noise_ms);
            (x != y).then(|| TimingChange {
                figure,
                base_ms: x,
                new_ms: y,
                noise_ms,
                flagged: x.abs_diff(y) > tolerance,
            })
        })
        .collect();
    Pair {
        base: i,
        new: j,
        changes,
        timing,
    }
}

/// Each rule a verdict breaks, with its level and count.
fn rule_counts(v: &oracle::Verdict) -> BTreeMap<&'static str, (Level, usize)> {
    let mut counts: BTreeMap<&'static str, (Level, usize)> = BTreeMap::new();
    for violation in &v.violations {
        let entry = counts.entry(violation.rule).or_insert((violation.level, 0));
        entry.0 = entry.0.min(violation.level);
        entry.1 += 1;
    }
    counts
}

type Delta = (Vec<RuleChange>, Vec<RuleChange>, Vec<RuleChange>);

fn rule_delta(
    base: &oracle::Verdict,
    new: &oracle::Verdict,
    noise: &BTreeSet<&'static str>,
) -> Delta {
    let (b, n) = (rule_counts(base), rule_counts(new));
    let (mut newly, mut fixed, mut still) = (Vec::new(), Vec::new(), Vec::new());
    for rule in b.keys().chain(n.keys()).collect::<BTreeSet<_>>() {
        let (bl, bc) = b.get(rule).copied().unwrap_or((Level::Policy, 0));
        let (nl, nc) = n.get(rule).copied().unwrap_or((Level::Policy, 0));
        let change = RuleChange {
            rule,
            level: if nc > 0 { nl } else { bl },
            base: bc,
            new: nc,
            noise: noise.contains(rule),
        };
        match (bc > 0, nc > 0) {
            (false, true) => newly.push(change),
            (true, false) => fixed.push(change),
            _ => still.push(change),
        }
    }
    (newly, fixed, still)
}

fn server_request_delta(base: &RunCalls, new: &RunCalls) -> Vec<(String, usize, usize)> {
    let (b, n): (BTreeMap<_, _>, BTreeMap<_, _>) = (
        base.server_requests.iter().cloned().collect(),
        new.server_requests.iter().cloned().collect(),
    );
    b.keys()
        .chain(n.keys())
        .collect::<BTreeSet<&String>>()
        .into_iter()
        .filter_map(|m| {
            let (x, y) = (
                b.get(m).copied().unwrap_or(0),
                n.get(m).copied().unwrap_or(0),
            );
            // Whether the server asks at all is behaviour; how often follows the timing.
            ((x == 0) != (y == 0)).then(|| (m.clone(), x, y))
        })
        .collect()
}
