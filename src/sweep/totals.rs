//! The totals of a sweep (or a shard of one): its `mcp-sim-sweep/1` JSON, the digest of every
//! run's trace that guards each refactoring, and the text, JUnit and GitHub forms.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::exit::Exit;
use crate::model::{Outcome, Transport};
use crate::oracle::Level;

/// What a run adds to a sweep's counts.
pub struct RunCounts<'a> {
    /// Simulated time in ms.
    pub sim_ms: u64,
    /// Requests sent.
    pub requests: u64,
    /// How they ended.
    pub outcomes: &'a BTreeMap<Outcome, u64>,
}

impl Totals {
    /// Counts one run: its share of the traces' digest, its time, requests and outcomes, and
    /// the era it spoke.
    pub fn count_run(
        &mut self,
        seed: u64,
        transport: Option<Transport>,
        digest: u64,
        counts: &RunCounts<'_>,
        spoke: &str,
    ) {
        self.traces ^= run_digest(seed, transport, digest);
        self.sim_ms += counts.sim_ms;
        self.requests += counts.requests;
        *self.eras.entry(spoke.to_string()).or_default() += 1;
        for (o, n) in counts.outcomes {
            *self.outcomes.entry(*o).or_default() += n;
        }
    }

    /// Counts the rules one run broke.
    pub fn count_rules(&mut self, rules: &[(&'static str, &'static str)]) {
        for (rule, level) in rules {
            self.violations
                .entry((*rule).to_string())
                .or_insert_with(|| RuleCount {
                    level: (*level).to_string(),
                    runs: 0,
                })
                .runs += 1;
        }
    }
}

/// The `format` member of a sweep's JSON output.
pub const TOTALS_FORMAT: &str = "mcp-sim-sweep/1";

/// What a sweep (or a shard of one) found: the summary and every failing run. `--format json`
/// prints it; `mcp-sim merge` adds shards up.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Totals {
    /// [`TOTALS_FORMAT`].
    pub format: String,
    /// The seed range `[A, B)`.
    pub seeds: (u64, u64),
    /// The shards covered, `(K, N)`.
    pub shards: Vec<(u64, u64)>,
    /// The lane and overrides, as the flags of a replay line: shards of one sweep agree.
    pub setup: String,
    /// Runs (seeds times transports times eras).
    pub runs: u64,
    /// Simulated time of all runs, in ms.
    pub sim_ms: u64,
    /// Wall time in ms (summed over merged shards).
    pub wall_ms: u64,
    /// Requests sent in all runs.
    pub requests: u64,
    /// How they ended.
    pub outcomes: BTreeMap<Outcome, u64>,
    /// Runs per era the client spoke (its revision).
    #[serde(default)]
    pub eras: BTreeMap<String, u64>,
    /// Runs per violated rule, with the rule's level.
    pub violations: BTreeMap<String, RuleCount>,
    /// Every run's trace at once: the XOR over the runs of [`run_digest`], so shards merge
    /// by XOR and two sweeps of the same range ran the same traces exactly when it agrees.
    #[serde(with = "hex_u64")]
    pub traces: u64,
    /// Every run that broke a MUST rule or crashed, in seed order.
    pub failing: Vec<FailingRun>,
    /// Virtual runs that cannot be trusted to replay (an escape, or two runs that differed):
    /// neither findings nor passes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_replayable: Vec<NotReplayableRun>,
    /// Virtual runs that exercised nothing (no call ended with a result or was cancelled).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inconclusive: u64,
}

impl Totals {
    /// The totals of a sweep of `runs` runs before any is counted.
    pub fn empty(
        seeds: (u64, u64),
        shard: (u64, u64),
        setup: String,
        runs: u64,
        wall_ms: u64,
    ) -> Totals {
        Totals {
            format: TOTALS_FORMAT.into(),
            seeds,
            shards: vec![shard],
            setup,
            runs,
            sim_ms: 0,
            wall_ms,
            requests: 0,
            outcomes: BTreeMap::new(),
            eras: BTreeMap::new(),
            violations: BTreeMap::new(),
            traces: 0,
            failing: Vec::new(),
            not_replayable: Vec::new(),
            inconclusive: 0,
        }
    }
}

impl Totals {
    /// How the sweep ends: a failing run fails it; a run that could not be trusted (not
    /// replayable), or a sweep none of whose runs exercised anything, leaves it inconclusive.
    pub fn exit(&self) -> Exit {
        if !self.failing.is_empty() {
            Exit::Broken
        } else if !self.not_replayable.is_empty()
            || (self.runs > 0 && self.inconclusive == self.runs)
        {
            Exit::Inconclusive
        } else {
            Exit::Pass
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A virtual run that is not replayable, and why.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct NotReplayableRun {
    /// The seed.
    pub seed: u64,
    /// The escape, or where two runs of the seed parted.
    pub why: String,
    /// The `mcp-sim replay` line.
    pub replay: String,
}

/// One run's share of [`Totals::traces`]: its seed, transport and trace digest mixed into one
/// word (FNV-1a over the three), so that equal traces of different seeds do not cancel out.
pub fn run_digest(seed: u64, transport: Option<Transport>, digest: u64) -> u64 {
    let transport: u64 = match transport {
        None => 0,
        Some(Transport::Stdio) => 1,
        Some(Transport::Http) => 2,
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in [seed, transport, digest]
        .iter()
        .flat_map(|w| w.to_le_bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A `u64` as 16 hex digits in JSON (the digests' usual spelling).
pub(crate) mod hex_u64 {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the hex digits.
    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:016x}"))
    }

    /// Reads the hex digits.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        u64::from_str_radix(&text, 16).map_err(serde::de::Error::custom)
    }
}

/// Runs that broke one rule.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct RuleCount {
    /// The rule's level (`MUST`, `SHOULD`, `POLICY`).
    pub level: String,
    /// Runs that broke it.
    pub runs: u64,
}

/// One failing run and how to reproduce it.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct FailingRun {
    /// The seed.
    pub seed: u64,
    /// The transport imposed (`None`: the seed's).
    pub transport: Option<String>,
    /// The rules it broke (and `crash`).
    pub rules: Vec<String>,
    /// The `mcp-sim replay` line.
    pub replay: String,
    /// The `cargo test` line.
    pub test: String,
    /// The run's trace digest, which both lines reproduce.
    pub digest: String,
    /// The report folder, on the machine that ran it.
    pub report: Option<String>,
}

/// How many failing runs a CI report lists per rule (the JSON output has them all).
const CI_LISTED: usize = 50;

impl Totals {
    /// The sweep as one JUnit suite: a case per rule that applies in an era it ran (and one
    /// for crashes), a MUST rule failing with its failing runs' replay lines.
    pub fn junit(&self, tool: &str) -> String {
        use crate::ci::{junit_suites, Case, CaseResult, Suite};
        let eras: Vec<crate::Era> = self
            .eras
            .keys()
            .filter_map(|v| crate::Era::from_version(v))
            .collect();
        let mut names: Vec<&str> = crate::oracle::RULES
            .iter()
            .filter(|r| !r.spans_hops() && eras.iter().any(|&e| r.level_in(e).is_some()))
            .map(|r| r.name)
            .collect();
        // A crash, or a rule of an era none of the runs was read in, still gets its case.
        let extra: Vec<&str> = self
            .violations
            .keys()
            .map(String::as_str)
            .filter(|v| !names.contains(v))
            .collect();
        names.extend(extra);
        let cases = names
            .into_iter()
            .map(|name| {
                let result = match self.violations.get(name) {
                    None => CaseResult::Passed,
                    Some(count) if count.level == Level::Must.as_str() => {
                        let failing: Vec<&FailingRun> = self
                            .failing
                            .iter()
                            .filter(|f| f.rules.iter().any(|r| r == name))
                            .collect();
                        let mut text: Vec<String> = failing
                            .iter()
                            .take(CI_LISTED)
                            .map(|f| format!("seed {}: {}", f.seed, f.replay))
                            .collect();
                        if failing.len() > CI_LISTED {
                            text.push(format!("and {} more", failing.len() - CI_LISTED));
                        }
                        CaseResult::Failed {
                            kind: "MUST".into(),
                            message: format!("{} of {} runs break it", count.runs, self.runs),
                            text: text.join("\n"),
                        }
                    }
                    Some(count) => CaseResult::PassedWithOutput(format!(
                        "{} of {} runs break this {} rule",
                        count.runs, self.runs, count.level
                    )),
                };
                Case {
                    name: name.to_owned(),
                    result,
                }
            })
            .collect();
        let suite = Suite {
            name: format!("seeds {}..{} {}", self.seeds.0, self.seeds.1, self.setup),
            properties: vec![
                ("runs".into(), self.runs.to_string()),
                ("traces".into(), format!("{:016x}", self.traces)),
                (
                    "eras".into(),
                    self.eras
                        .iter()
                        .map(|(e, n)| format!("{e} {n}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
            ],
            cases,
        };
        junit_suites(tool, &[suite])
    }

    /// The sweep as GitHub annotations: one per broken rule, with the first failing runs'
    /// replay lines for a MUST rule.
    pub fn github(&self) -> String {
        use crate::ci::{github_lines, Annotation};
        let annotations: Vec<Annotation> = self
            .violations
            .iter()
            .map(|(rule, count)| {
                let level = match count.level.as_str() {
                    "MUST" => Level::Must,
                    "SHOULD" => Level::Should,
                    _ => Level::Policy,
                };
                let mut message = format!(
                    "{} of {} runs of seeds {}..{} break {} ({})",
                    count.runs, self.runs, self.seeds.0, self.seeds.1, rule, count.level
                );
                let listed = if level == Level::Must { 3 } else { 0 };
                for f in self
                    .failing
                    .iter()
                    .filter(|f| f.rules.iter().any(|r| r == rule))
                    .take(listed)
                {
                    let _ = write!(message, "\nreplay: {}", f.replay);
                }
                Annotation {
                    command: crate::ci::annotation_command(level),
                    title: rule.clone(),
                    message,
                }
            })
            .collect();
        github_lines(&annotations)
    }

    /// The text summary `mcp-sim sweep` prints after its header.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let wall = self.wall_ms as f64 / 1000.0;
        let _ = writeln!(out, "runs:        {}", self.runs);
        let _ = writeln!(
            out,
            "simulated:   {:.0} s ({:.1} h)",
            self.sim_ms as f64 / 1000.0,
            self.sim_ms as f64 / 3.6e6
        );
        let _ = writeln!(
            out,
            "wall:        {wall:.2} s ({:.0} runs/s)",
            self.runs as f64 / wall
        );
        let _ = writeln!(
            out,
            "compression: {:.0}x simulated seconds per wall second",
            self.sim_ms as f64 / 1000.0 / wall
        );
        let _ = writeln!(out, "requests:    {}", self.requests);
        let _ = writeln!(
            out,
            "traces:      {:016x} (digest of every run's trace)",
            self.traces
        );
        let outcome_text: Vec<String> = self
            .outcomes
            .iter()
            .map(|(o, n)| format!("{} {n}", o.as_str()))
            .collect();
        let _ = writeln!(out, "outcomes:    {}", outcome_text.join(", "));
        let era_text: Vec<String> = self
            .eras
            .iter()
            .rev()
            .map(|(e, n)| format!("{e} {n}"))
            .collect();
        if !era_text.is_empty() {
            let _ = writeln!(out, "eras:        {}", era_text.join(", "));
        }
        if self.violations.is_empty() {
            let _ = writeln!(out, "violations:  none");
        } else {
            let _ = writeln!(out, "violations (runs per rule):");
            for (rule, c) in &self.violations {
                let _ = writeln!(out, "  {rule:<28} {:<7} {}", c.level, c.runs);
            }
        }
        if self.inconclusive > 0 {
            let _ = writeln!(
                out,
                "inconclusive: {} runs exercised nothing (no tools/call ended with a result)",
                self.inconclusive
            );
        }
        for n in &self.not_replayable {
            let _ = writeln!(out, "NOT-REPLAYABLE seed {}: {}", n.seed, n.why);
            let _ = writeln!(out, "  replay: {}", n.replay);
        }
        for f in &self.failing {
            let _ = writeln!(out, "FAIL seed {}: {}", f.seed, f.rules.join(", "));
            if let Some(folder) = &f.report {
                let _ = writeln!(out, "  report: {folder}");
            }
            let _ = writeln!(out, "  digest: {}", f.digest);
            let _ = writeln!(out, "  replay: {}", f.replay);
            if !f.test.is_empty() {
                let _ = writeln!(out, "  test:   {}", f.test);
            }
        }
        if !self.failing.is_empty() {
            let _ = writeln!(
                out,
                "{} of {} runs violate a MUST rule",
                self.failing.len(),
                self.runs
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(runs: u64, failing: usize, not_replayable: usize, inconclusive: u64) -> Totals {
        let mut t = Totals::empty((0, runs), (1, 1), String::new(), runs, 0);
        let failed = FailingRun {
            seed: 0,
            transport: None,
            rules: vec!["response-after-cancel".into()],
            replay: String::new(),
            test: String::new(),
            digest: String::new(),
            report: None,
        };
        t.failing = vec![failed; failing];
        let untrusted = NotReplayableRun {
            seed: 0,
            why: "an escape".into(),
            replay: String::new(),
        };
        t.not_replayable = vec![untrusted; not_replayable];
        t.inconclusive = inconclusive;
        t
    }

    #[test]
    fn a_sweep_that_ran_nothing_it_could_trust_does_not_pass() {
        assert_eq!(totals(5, 1, 1, 5).exit(), Exit::Broken);
        assert_eq!(totals(5, 0, 1, 0).exit(), Exit::Inconclusive);
        assert_eq!(totals(5, 0, 0, 5).exit(), Exit::Inconclusive);
        assert_eq!(totals(5, 0, 0, 4).exit(), Exit::Pass);
        assert_eq!(totals(0, 0, 0, 0).exit(), Exit::Pass, "an empty shard");
    }
}
