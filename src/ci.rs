//! Results a CI system reads: JUnit XML (`--format junit`) and GitHub workflow annotations
//! (`--format github`).
//!
//! A *run* is one judged trace: a seed of a sweep, a probed server, a served client, a
//! recorded session, a checked file. In JUnit each run is a `<testsuite>` and each rule of the
//! catalog that applies in the run's era is a `<testcase>` of it (`classname` the run, `name`
//! the rule), so a CI dashboard counts the rules that held as well as those that broke. A MUST
//! violation is a `<failure>` whose text has every violation of the rule and the line that
//! replays the run; a SHOULD or policy violation leaves the case passing, its messages in
//! `<system-out>`; a run that could not be judged fairly (a verdict that exercised nothing, a
//! crash, a finding about the server) is one more case, `verdict`, failing or skipped as the
//! command's exit code says. In GitHub's format every violation is one annotation line,
//! `::error` for MUST, `::warning` for SHOULD, `::notice` for policy, titled with the rule.
//!
//! Both writers escape what they must (XML's five characters and the control characters XML
//! 1.0 forbids; GitHub's `%`, CR, LF and, in properties, `:` and `,`), so any message a peer
//! provoked stays one well-formed line or element.

use std::fmt::Write as _;

use crate::oracle::{Level, Verdict, RULES};

/// One judged trace, as CI sees it.
#[derive(Debug, Clone)]
pub struct CiRun<'a> {
    /// What was judged: `seed 17 (http)`, a server's command line, a file.
    pub name: String,
    /// The oracle's verdict.
    pub verdict: &'a Verdict,
    /// How to replay it, when it can be (a sweep's seed); attached to each failure.
    pub replay: Option<String>,
    /// Besides the rules: whether the run itself failed or was inconclusive, and why (a
    /// finding, a crash, nothing exercised). `None`: the rules say it all.
    pub outcome: Option<RunOutcome>,
    /// The run's baseline (`--baseline FILE`) and how the run compares with it: a MUST rule
    /// it lists does not fail the rule's case (nor make an `::error`), and the differences
    /// are one more case, `baseline`, failing when the run disagrees with it.
    pub baseline: Option<(&'a Baseline, BaselineDiff)>,
}

impl CiRun<'_> {
    /// Whether the baseline lists `name`.
    fn expected(&self, name: &str) -> bool {
        self.baseline
            .as_ref()
            .is_some_and(|(b, _)| b.expected.contains(name))
    }
}

/// What a run's command concluded beyond the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// It failed for a reason of its own (a crash, a server that exited or never answered).
    Failed(String),
    /// It could not conclude (nothing exercised).
    Inconclusive(String),
}

/// One JUnit `<testsuite>`: a run, or a whole sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suite {
    /// Its name (the run, or the sweep's setup).
    pub name: String,
    /// `name=value` properties (the era read, the seed range).
    pub properties: Vec<(String, String)>,
    /// Its cases, in order.
    pub cases: Vec<Case>,
}

/// One JUnit `<testcase>`: a rule (or the run's own verdict) in a suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// The rule's name, or `verdict`.
    pub name: String,
    /// How it went.
    pub result: CaseResult,
}

/// How one case went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseResult {
    /// It held.
    Passed,
    /// It held at the MUST level, with SHOULD or policy findings to show.
    PassedWithOutput(String),
    /// It failed: a one-line message and the whole text.
    Failed {
        /// The failure's `type` attribute (`MUST`, `verdict`).
        kind: String,
        /// The first message.
        message: String,
        /// Every message, and the replay line.
        text: String,
    },
    /// It could not be judged.
    Skipped(String),
}

/// One GitHub workflow annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    /// `error`, `warning` or `notice`.
    pub command: &'static str,
    /// The title (a rule's name).
    pub title: String,
    /// The message, any text.
    pub message: String,
}

/// The annotation command for a violation of `level`.
pub fn annotation_command(level: Level) -> &'static str {
    match level {
        Level::Must => "error",
        Level::Should => "warning",
        Level::Policy => "notice",
    }
}

/// JUnit XML of `suites` inside one `<testsuites>` named `tool`.
pub fn junit_suites(tool: &str, suites: &[Suite]) -> String {
    let mut body = String::new();
    let (mut tests, mut failures, mut skipped) = (0usize, 0usize, 0usize);
    for suite in suites {
        let mut cases = String::new();
        let (mut f, mut s) = (0usize, 0usize);
        for case in &suite.cases {
            let _ = write!(
                cases,
                "    <testcase classname=\"{}\" name=\"{}\"",
                xml(&suite.name),
                xml(&case.name)
            );
            match &case.result {
                CaseResult::Passed => cases.push_str("/>\n"),
                CaseResult::PassedWithOutput(text) => {
                    let _ = write!(
                        cases,
                        ">\n      <system-out>{}</system-out>\n    </testcase>\n",
                        xml(text)
                    );
                }
                CaseResult::Failed {
                    kind,
                    message,
                    text,
                } => {
                    f += 1;
                    let _ = write!(
                        cases,
                        ">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                        xml(kind),
                        xml(message),
                        xml(text)
                    );
                }
                CaseResult::Skipped(why) => {
                    s += 1;
                    let _ = write!(
                        cases,
                        ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                        xml(why)
                    );
                }
            }
        }
        let t = suite.cases.len();
        let _ = writeln!(
            body,
            "  <testsuite name=\"{}\" tests=\"{t}\" failures=\"{f}\" errors=\"0\" skipped=\"{s}\">",
            xml(&suite.name)
        );
        if !suite.properties.is_empty() {
            body.push_str("    <properties>\n");
            for (k, v) in &suite.properties {
                let _ = writeln!(
                    body,
                    "      <property name=\"{}\" value=\"{}\"/>",
                    xml(k),
                    xml(v)
                );
            }
            body.push_str("    </properties>\n");
        }
        body.push_str(&cases);
        body.push_str("  </testsuite>\n");
        tests += t;
        failures += f;
        skipped += s;
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">\n{body}</testsuites>\n",
        xml(tool)
    )
}

/// The suite of one judged run: a case per rule of its era, and `verdict` when the run has
/// an outcome of its own.
pub fn run_suite(run: &CiRun<'_>) -> Suite {
    let mut cases: Vec<Case> = run
        .verdict
        .rules()
        .map(|rule| {
            let broken: Vec<_> = run
                .verdict
                .violations
                .iter()
                .filter(|v| v.rule == rule.name)
                .collect();
            let text: Vec<String> = broken.iter().map(|v| v.to_string()).collect();
            let mut text = text.join("\n");
            let result = match broken.first() {
                None => CaseResult::Passed,
                Some(_) if run.expected(rule.name) => {
                    CaseResult::PassedWithOutput(format!("expected by the baseline:\n{text}"))
                }
                Some(first) if broken.iter().any(|v| v.level == Level::Must) => {
                    if let Some(replay) = &run.replay {
                        let _ = write!(text, "\nreplay: {replay}");
                    }
                    CaseResult::Failed {
                        kind: "MUST".into(),
                        message: first.message.clone(),
                        text,
                    }
                }
                Some(_) => CaseResult::PassedWithOutput(text),
            };
            Case {
                name: rule.name.into(),
                result,
            }
        })
        .collect();
    match &run.outcome {
        Some(RunOutcome::Failed(why)) => cases.push(Case {
            name: "verdict".into(),
            result: CaseResult::Failed {
                kind: "verdict".into(),
                message: why.clone(),
                text: why.clone(),
            },
        }),
        Some(RunOutcome::Inconclusive(why)) => cases.push(Case {
            name: "verdict".into(),
            result: CaseResult::Skipped(why.clone()),
        }),
        None => {}
    }
    if let Some((_, diff)) = &run.baseline {
        let result = if diff.is_clean() {
            CaseResult::Passed
        } else {
            let text = diff.text();
            CaseResult::Failed {
                kind: "baseline".into(),
                message: text.lines().next().unwrap_or_default().to_owned(),
                text,
            }
        };
        cases.push(Case {
            name: "baseline".into(),
            result,
        });
    }
    Suite {
        name: run.name.clone(),
        properties: vec![("era".into(), run.verdict.describe_era())],
        cases,
    }
}

/// JUnit XML for `runs`, one `<testsuite>` each inside one `<testsuites>` named `tool`.
pub fn junit(tool: &str, runs: &[CiRun<'_>]) -> String {
    let suites: Vec<Suite> = runs.iter().map(run_suite).collect();
    junit_suites(tool, &suites)
}

/// The annotations of `runs`: one per violation (and per failed or inconclusive run).
pub fn run_annotations(runs: &[CiRun<'_>]) -> Vec<Annotation> {
    let mut out = Vec::new();
    for run in runs {
        for v in &run.verdict.violations {
            let mut message = format!("{}: {v}", run.name);
            let expected = run.expected(v.rule);
            if expected {
                message.push_str(" (expected by the baseline)");
            }
            if let (Level::Must, Some(replay)) = (v.level, &run.replay) {
                let _ = write!(message, "\nreplay: {replay}");
            }
            out.push(Annotation {
                command: match (v.level, expected) {
                    (Level::Must, true) => "warning",
                    (level, _) => annotation_command(level),
                },
                title: v.rule.into(),
                message,
            });
        }
        match &run.outcome {
            Some(RunOutcome::Failed(why)) => out.push(Annotation {
                command: "error",
                title: "verdict".into(),
                message: format!("{}: {why}", run.name),
            }),
            Some(RunOutcome::Inconclusive(why)) => out.push(Annotation {
                command: "warning",
                title: "inconclusive".into(),
                message: format!("{}: {why}", run.name),
            }),
            None => {}
        }
        if let Some((_, diff)) = &run.baseline {
            for line in diff.text().lines() {
                out.push(Annotation {
                    command: "error",
                    title: "baseline".into(),
                    message: format!("{}: {line}", run.name),
                });
            }
        }
    }
    out
}

/// GitHub workflow annotations for `runs`: one line per violation (and per failed or
/// inconclusive run), `::error` for MUST, `::warning` for SHOULD, `::notice` for policy.
pub fn github(runs: &[CiRun<'_>]) -> String {
    github_lines(&run_annotations(runs))
}

/// The workflow command lines of `annotations`, one line each.
pub fn github_lines(annotations: &[Annotation]) -> String {
    let mut out = String::new();
    for a in annotations {
        let _ = writeln!(
            out,
            "::{} title={}::{}",
            a.command,
            gh_property(&a.title),
            gh_data(&a.message)
        );
    }
    out
}

/// The most entries a baseline file may list (a guard on what is read).
pub const MAX_BASELINE_ENTRIES: usize = 1000;

/// Findings a team expects (`--baseline FILE`): a server with known bugs is adopted, and only
/// new ones fail. One rule name (or a probe finding such as `no-response`) per line; `#`
/// starts a comment; blank lines are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    /// The expected names.
    pub expected: std::collections::BTreeSet<String>,
}

/// A baseline file that cannot be used, naming the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineError {
    /// The 1-based line.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for BaselineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for BaselineError {}

/// How a run compares with its baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BaselineDiff {
    /// Failing findings the baseline does not list: they fail the run.
    pub unexpected: Vec<String>,
    /// Baseline entries that no longer occur: they fail the run too, so that a fixed bug
    /// is taken off the list (and cannot come back unseen).
    pub stale: Vec<String>,
}

impl BaselineDiff {
    /// Whether the run agrees with its baseline.
    pub fn is_clean(&self) -> bool {
        self.unexpected.is_empty() && self.stale.is_empty()
    }

    /// One line per difference, for people.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for u in &self.unexpected {
            let _ = writeln!(out, "baseline: unexpected {u} (not in the baseline)");
        }
        for s in &self.stale {
            let _ = writeln!(out, "baseline: stale {s} (listed, but it no longer occurs)");
        }
        out
    }
}

impl Baseline {
    /// Reads a baseline; `known` says which names may appear (the rules of the catalog, and
    /// the command's own findings). An unknown name is an error naming its line, so that a
    /// typo cannot silently expect nothing.
    pub fn parse(text: &str, known: impl Fn(&str) -> bool) -> Result<Baseline, BaselineError> {
        let mut expected = std::collections::BTreeSet::new();
        for (n, line) in text.lines().enumerate() {
            let name = line.split('#').next().unwrap_or_default().trim();
            if name.is_empty() {
                continue;
            }
            let err = |message: String| BaselineError {
                line: n + 1,
                message,
            };
            if !known(name) {
                return Err(err(format!("{name:?} is no rule or finding")));
            }
            if !expected.insert(name.to_owned()) {
                return Err(err(format!("{name} is listed twice")));
            }
            if expected.len() > MAX_BASELINE_ENTRIES {
                return Err(err(format!("more than {MAX_BASELINE_ENTRIES} entries")));
            }
        }
        Ok(Baseline { expected })
    }

    /// Compares the findings of a run: `failing` (what would fail it: MUST violations,
    /// faults) and `seen` (everything that occurred, at any level).
    pub fn compare<'a>(
        &self,
        failing: impl IntoIterator<Item = &'a str>,
        seen: impl IntoIterator<Item = &'a str>,
    ) -> BaselineDiff {
        let seen: std::collections::BTreeSet<&str> = seen.into_iter().collect();
        let mut unexpected: Vec<String> = failing
            .into_iter()
            .filter(|f| !self.expected.contains(*f))
            .map(str::to_owned)
            .collect();
        unexpected.sort();
        unexpected.dedup();
        let stale = self
            .expected
            .iter()
            .filter(|e| !seen.contains(e.as_str()))
            .cloned()
            .collect();
        BaselineDiff { unexpected, stale }
    }
}

impl Baseline {
    /// Compares a judged run: its MUST violations and the command's own `faults` (a probe's
    /// `no-response`, say) would fail it; every violation at any level, the faults and the
    /// `other` findings (an inconclusive run's) occurred.
    pub fn compare_verdict(
        &self,
        verdict: &Verdict,
        faults: &[&str],
        other: &[&str],
    ) -> BaselineDiff {
        let failing = verdict
            .violations
            .iter()
            .filter(|v| v.level == Level::Must)
            .map(|v| v.rule)
            .chain(faults.iter().copied());
        let seen = verdict
            .violations
            .iter()
            .map(|v| v.rule)
            .chain(faults.iter().copied())
            .chain(other.iter().copied());
        self.compare(failing, seen)
    }
}

/// Whether `name` is a rule of the catalog.
pub fn is_rule(name: &str) -> bool {
    RULES.iter().any(|r| r.name == name)
}

/// Text for an XML attribute or element: the five special characters escaped, and the
/// control characters XML 1.0 cannot carry at all replaced by U+FFFD.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A workflow command's message: `%`, CR and LF escaped (GitHub's toolkit encoding).
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: as [`gh_data`], and `:` and `,` too.
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::{EraReading, Violation};

    fn verdict(violations: Vec<Violation>) -> Verdict {
        Verdict {
            violations,
            era: EraReading::default(),
            upstream_era: None,
            ..Verdict::default()
        }
    }

    fn must(rule: &'static str, message: &str) -> Violation {
        Violation {
            rule,
            level: Level::Must,
            events: vec![3],
            message: message.into(),
            hop: None,
            conn: None,
        }
    }

    #[test]
    fn junit_has_one_case_per_rule_of_the_era_and_fails_the_broken_one() {
        let v = verdict(vec![must(
            "response-after-cancel",
            "a <late> \"answer\" & more",
        )]);
        let runs = [CiRun {
            name: "seed 7".into(),
            verdict: &v,
            replay: Some("mcp-sim replay --seed 7".into()),
            outcome: None,
            baseline: None,
        }];
        let x = junit("mcp-sim sweep", &runs);
        let modern_rules = RULES
            .iter()
            .filter(|r| r.modern.is_some() && !r.spans_hops())
            .count();
        assert_eq!(x.matches("<testcase ").count(), modern_rules, "{x}");
        assert_eq!(x.matches("<failure ").count(), 1, "{x}");
        assert!(x.contains("failures=\"1\""), "{x}");
        assert!(
            x.contains("a &lt;late&gt; &quot;answer&quot; &amp; more"),
            "{x}"
        );
        assert!(x.contains("replay: mcp-sim replay --seed 7"), "{x}");
        assert!(!x.contains("<late>"), "{x}");
    }

    #[test]
    fn a_should_passes_in_junit_and_warns_in_github_an_inconclusive_run_is_skipped() {
        let v = verdict(vec![Violation {
            level: Level::Should,
            ..must("cancel-on-timeout", "no cancel")
        }]);
        let runs = [CiRun {
            name: "server".into(),
            verdict: &v,
            replay: None,
            outcome: Some(RunOutcome::Inconclusive("nothing exercised".into())),
            baseline: None,
        }];
        let x = junit("mcp-sim probe", &runs);
        assert_eq!(x.matches("<failure ").count(), 0, "{x}");
        assert!(x.contains("<system-out>"), "{x}");
        assert!(
            x.contains("<skipped message=\"nothing exercised\"/>"),
            "{x}"
        );
        let g = github(&runs);
        assert_eq!(
            g,
            "::warning title=cancel-on-timeout::server: [SHOULD] cancel-on-timeout at #3: no cancel\n\
             ::warning title=inconclusive::server: nothing exercised\n"
        );
    }

    #[test]
    fn github_lines_stay_one_line_whatever_the_message() {
        let v = verdict(vec![must("message-shape", "100% bad\r\nline two")]);
        let runs = [CiRun {
            name: "a:b,c".into(),
            verdict: &v,
            replay: Some("replay it".into()),
            outcome: None,
            baseline: None,
        }];
        let g = github(&runs);
        assert_eq!(g.lines().count(), 1, "{g}");
        assert!(g.starts_with("::error title=message-shape::a:b,c: "), "{g}");
        assert!(
            g.contains("100%25 bad%0D%0Aline two%0Areplay: replay it"),
            "{g}"
        );
        assert_eq!(gh_property("a:b,c%"), "a%3Ab%2Cc%25");
    }

    #[test]
    fn a_baseline_fails_on_new_findings_and_on_stale_entries_and_names_bad_lines() {
        let b = Baseline::parse(
            "# known\nresponse-after-cancel\n\ncancel-on-timeout # SHOULD\n",
            is_rule,
        )
        .unwrap();
        assert_eq!(b.expected.len(), 2);
        let same = b.compare(
            ["response-after-cancel"],
            ["response-after-cancel", "cancel-on-timeout"],
        );
        assert!(same.is_clean(), "{same:?}");
        let new = b.compare(
            ["response-after-cancel", "message-shape"],
            [
                "response-after-cancel",
                "cancel-on-timeout",
                "message-shape",
            ],
        );
        assert_eq!(new.unexpected, vec!["message-shape".to_string()]);
        let fixed = b.compare(["response-after-cancel"], ["response-after-cancel"]);
        assert_eq!(fixed.stale, vec!["cancel-on-timeout".to_string()]);
        let typo = Baseline::parse("response-after-cancle\n", is_rule).unwrap_err();
        assert_eq!(typo.line, 1);
        assert!(typo.message.contains("response-after-cancle"));
        let twice = Baseline::parse("message-shape\nmessage-shape\n", is_rule).unwrap_err();
        assert_eq!(twice.line, 2);
    }

    #[test]
    fn a_listed_must_passes_in_junit_and_only_warns_and_a_stale_entry_fails() {
        let v = verdict(vec![must("response-after-cancel", "late answer")]);
        let b = Baseline::parse("response-after-cancel\nmessage-shape\n", is_rule).unwrap();
        let diff = b.compare(["response-after-cancel"], ["response-after-cancel"]);
        assert_eq!(diff.stale, vec!["message-shape".to_string()]);
        let runs = [CiRun {
            name: "server".into(),
            verdict: &v,
            replay: None,
            outcome: None,
            baseline: Some((&b, diff)),
        }];
        let x = junit("mcp-sim probe", &runs);
        // Only the baseline case fails: the listed rule's case passes with its text.
        assert_eq!(x.matches("<failure ").count(), 1, "{x}");
        assert!(x.contains("type=\"baseline\""), "{x}");
        assert!(x.contains("expected by the baseline"), "{x}");
        let g = github(&runs);
        assert!(
            g.starts_with("::warning title=response-after-cancel::"),
            "{g}"
        );
        assert!(
            g.contains("::error title=baseline::server: baseline: stale message-shape"),
            "{g}"
        );
        // Without the stale entry, nothing fails.
        let b = Baseline::parse("response-after-cancel\n", is_rule).unwrap();
        let diff = b.compare(["response-after-cancel"], ["response-after-cancel"]);
        let runs = [CiRun {
            baseline: Some((&b, diff)),
            ..runs[0].clone()
        }];
        assert_eq!(
            junit("mcp-sim probe", &runs).matches("<failure ").count(),
            0
        );
    }

    #[test]
    fn xml_drops_the_control_characters_it_cannot_carry() {
        assert_eq!(xml("a\u{1}b\tc"), "a\u{FFFD}b\tc");
    }
}
