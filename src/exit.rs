//! How every run ends: the exit codes of every command, and the one policy that turns a judged
//! live run (the oracle's verdict, the command's own findings, an optional baseline) into its
//! word, its exit code and its CI outcome.
//!
//! | code | [`Exit`] | the run |
//! | --- | --- | --- |
//! | 0 | [`Exit::Pass`] | exercised what it was meant to, and nothing failed it |
//! | 1 | [`Exit::Broken`] | broke a MUST rule, or the judged peer is at fault (a server that exited or never answered), or a client broke the timeout policy it declares; under a baseline: the run disagrees with it |
//! | 2 | [`Exit::Usage`] | could not start: bad arguments or input, a peer that cannot be started or reached |
//! | 3 | [`Exit::Inconclusive`] | nothing wrong seen, but the run exercised nothing, a predicted rule was not reproduced, or a virtual run could not be held deterministic (`not-replayable`): never a pass |
//! | 4 | [`Exit::OwnFault`] | mcp-sim could not do its own part mid-run: the trace or the report could not be written (a full disk); the file is named |
//! | 130 | [`Exit::Interrupted`] | `probe` and `check-proxy`: SIGINT or SIGTERM ended the run early; what was recorded is judged and shown, and a MUST rule broken in it still exits 1 (`serve` and `record` end on a signal as their normal end) |
//!
//! A verdict is never vacuous. The oracle's rules judge only what happened, so a run in which
//! nothing happened is named by a [`Finding`] of the command (`nothing-exercised`,
//! `no-response`, ...), and [`RunEnd::decide`] weighs the findings with the rules, in one order
//! for `probe`, `check-proxy`, `serve` and `record`: a MUST rule, then a broken declared
//! policy, then a peer's fault, then an inconclusive finding. A sweep ends by its totals
//! (`sweep::Totals::exit`).

use serde::Serialize;

use crate::ci::{Baseline, BaselineDiff, RunOutcome};
use crate::oracle::{is_declared_policy_rule, Level, Verdict};

/// A command's exit code (see the module's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exit {
    /// 0: exercised, nothing failed it.
    Pass,
    /// 1: a MUST rule broken, a peer at fault, a declared policy broken, or a baseline
    /// disagreeing.
    Broken,
    /// 2: usage or input error; the run did not start.
    Usage,
    /// 3: inconclusive (nothing exercised, not reproduced, not replayable).
    Inconclusive,
    /// 4: mcp-sim's own fault mid-run: its trace or report could not be written.
    OwnFault,
    /// 130: ended early by SIGINT or SIGTERM (`probe`, `check-proxy`).
    Interrupted,
}

impl Exit {
    /// The process's exit code.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Pass => 0,
            Exit::Broken => 1,
            Exit::Usage => 2,
            Exit::Inconclusive => 3,
            Exit::OwnFault => 4,
            Exit::Interrupted => 130,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}

/// Whether a [`Finding`] fails the run or leaves it inconclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// The judged peer is at fault (it exited, never answered, stopped answering): exit 1.
    Fault,
    /// The run did not exercise what it was meant to: exit 3.
    Inconclusive,
    /// The run was ended early by a signal: exit 130, unless a MUST rule, a declared policy
    /// or a fault fails it.
    Interrupted,
}

impl FindingKind {
    /// `fault` or `inconclusive`, as the JSON verdict writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::Fault => "fault",
            FindingKind::Inconclusive => "inconclusive",
            FindingKind::Interrupted => "interrupted",
        }
    }
}

/// A command's finding beyond the oracle's rules (the probe's are tabled in
/// [`crate::lanes::live::findings`]).
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Its name: `server-exited`, `no-response`, `nothing-exercised`, `not-reproduced`...
    pub finding: &'static str,
    /// Whether it fails the run or leaves it inconclusive.
    pub kind: FindingKind,
    /// What happened, for people.
    pub message: String,
}

/// Which peer of a live run is judged: it decides whether a broken declared policy fails the
/// run (the declaration, `serve --client-policy`, is about the client under test).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// A real server before the reference client (`probe`).
    Server,
    /// A real client before the reference server (`serve`).
    Client,
    /// A real intermediary between the reference ends (`check-proxy`).
    Intermediary,
    /// A real host and a real server, recorded between them (`record`).
    Session,
}

/// The word a live run's verdict is said with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Word {
    /// Exercised, and no MUST rule broken.
    Clean,
    /// A MUST rule is broken.
    Violations,
    /// The client broke the timeout policy it declares.
    PolicyBroken,
    /// The judged peer is at fault (a [`FindingKind::Fault`] finding).
    ServerFault,
    /// Nothing wrong seen, but the run did not exercise what it was meant to.
    Inconclusive,
    /// Nothing wrong seen in what was recorded, but a signal ended the run early.
    Interrupted,
}

impl Word {
    /// The word printed and written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Word::Clean => "clean",
            Word::Violations => "violations",
            Word::PolicyBroken => "policy-broken",
            Word::ServerFault => "server-fault",
            Word::Inconclusive => "inconclusive",
            Word::Interrupted => "interrupted",
        }
    }

    /// The exit code of this word when no baseline is given.
    pub fn exit(self) -> Exit {
        match self {
            Word::Clean => Exit::Pass,
            Word::Violations | Word::PolicyBroken | Word::ServerFault => Exit::Broken,
            Word::Inconclusive => Exit::Inconclusive,
            Word::Interrupted => Exit::Interrupted,
        }
    }
}

/// How a judged live run ends: its word, exit code, CI outcome and baseline comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnd {
    /// The verdict's word.
    pub word: Word,
    /// The exit code: the word's, or under a baseline the baseline's verdict.
    pub exit: Exit,
    /// What the run concluded beyond the rules, for CI (`None`: the rules say it all, or the
    /// baseline lists everything that would fail it).
    pub outcome: Option<RunOutcome>,
    /// The run against its baseline, when one is given.
    pub diff: Option<BaselineDiff>,
}

/// Why a client's declared policy counts as broken: a declared reset on progress that the
/// client's calls, asking for no progress, can never see is said apart.
fn policy_broken_why(verdict: &Verdict) -> &'static str {
    let impossible = verdict
        .violations
        .iter()
        .all(|v| v.level != Level::Policy || v.rule == crate::oracle::rule::RESET_NEEDS_TOKEN);
    if impossible {
        "the client's calls ask for no progress, so the reset on progress it declares \
         (--client-policy) cannot happen"
    } else {
        "the client broke the timeout policy it declares (--client-policy)"
    }
}

impl RunEnd {
    /// Weighs the oracle's `verdict` and the command's `findings` (see the module docs), then
    /// the `baseline` when given: its verdict is then the exit code (what would fail the run
    /// fails it only when the baseline does not list it, and a listed name that no longer
    /// occurs fails it too), except that a run that exercised nothing stays inconclusive
    /// unless the baseline lists that too.
    pub fn decide(
        verdict: &Verdict,
        findings: &[Finding],
        baseline: Option<&Baseline>,
        judged: Judged,
    ) -> RunEnd {
        // The declared policy's broken rules, when the judged peer is the client declaring it.
        let declared: Vec<&'static str> = verdict
            .violations
            .iter()
            .filter(|v| judged == Judged::Client && v.level == Level::Policy)
            .filter(|v| is_declared_policy_rule(v.rule))
            .map(|v| v.rule)
            .collect();
        let of = |kind: FindingKind| findings.iter().filter(move |f| f.kind == kind);
        let word = if verdict.has_must() {
            Word::Violations
        } else if !declared.is_empty() {
            Word::PolicyBroken
        } else if of(FindingKind::Fault).next().is_some() {
            Word::ServerFault
        } else if of(FindingKind::Interrupted).next().is_some() {
            Word::Interrupted
        } else if of(FindingKind::Inconclusive).next().is_some() {
            Word::Inconclusive
        } else {
            Word::Clean
        };
        let listed = |name: &str| baseline.is_some_and(|b| b.expected.contains(name));
        let said = |f: &Finding| {
            let expected = if listed(f.finding) {
                ", expected by the baseline"
            } else {
                ""
            };
            format!(
                "{} ({}{expected}): {}",
                f.finding,
                f.kind.as_str(),
                f.message
            )
        };
        let text = findings.iter().map(said).collect::<Vec<_>>().join("; ");
        let outcome = match word {
            Word::PolicyBroken => Some(RunOutcome::Failed(policy_broken_why(verdict).into())),
            Word::ServerFault => Some(RunOutcome::Failed(text)),
            Word::Inconclusive | Word::Interrupted => Some(RunOutcome::Inconclusive(text)),
            Word::Clean | Word::Violations => None,
        };
        let Some(baseline) = baseline else {
            return RunEnd {
                word,
                exit: word.exit(),
                outcome,
                diff: None,
            };
        };
        let failing = verdict
            .violations
            .iter()
            .filter(|v| v.level == Level::Must)
            .map(|v| v.rule)
            .chain(declared.iter().copied())
            .chain(of(FindingKind::Fault).map(|f| f.finding));
        let seen = verdict
            .violations
            .iter()
            .map(|v| v.rule)
            .chain(findings.iter().map(|f| f.finding));
        let diff = baseline.compare(failing, seen);
        let unlisted_inconclusive = of(FindingKind::Inconclusive).any(|f| !listed(f.finding));
        let exit = if !diff.is_clean() {
            Exit::Broken
        } else if of(FindingKind::Interrupted).next().is_some() {
            Exit::Interrupted
        } else if unlisted_inconclusive {
            Exit::Inconclusive
        } else {
            Exit::Pass
        };
        // Findings (and a declared policy's rules) the baseline lists are shown, not failed.
        let all_listed =
            findings.iter().all(|f| listed(f.finding)) && declared.iter().all(|r| listed(r));
        let outcome = outcome.filter(|_| !all_listed);
        RunEnd {
            word,
            exit,
            outcome,
            diff: Some(diff),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::Violation;

    fn finding(name: &'static str, kind: FindingKind) -> Finding {
        Finding {
            finding: name,
            kind,
            message: "m".into(),
        }
    }

    fn verdict_with(rules: &[(&'static str, Level)]) -> Verdict {
        let mut v = Verdict::default();
        for &(rule, level) in rules {
            v.violations.push(Violation {
                rule,
                level,
                events: vec![0],
                message: String::new(),
                hop: None,
                conn: None,
            });
        }
        v
    }

    #[test]
    fn the_order_is_must_then_policy_then_fault_then_inconclusive() {
        let fault = finding("no-response", FindingKind::Fault);
        let none = finding("nothing-exercised", FindingKind::Inconclusive);
        let must = verdict_with(&[("response-after-cancel", Level::Must)]);
        let policy = verdict_with(&[("timeout-deadline", Level::Policy)]);
        let clean = Verdict::default();
        let word = |v: &Verdict, f: &[Finding], j| RunEnd::decide(v, f, None, j).word;
        assert_eq!(
            word(&must, std::slice::from_ref(&fault), Judged::Server),
            Word::Violations
        );
        assert_eq!(
            word(&policy, std::slice::from_ref(&fault), Judged::Client),
            Word::PolicyBroken
        );
        assert_eq!(
            word(&policy, std::slice::from_ref(&fault), Judged::Server),
            Word::ServerFault
        );
        assert_eq!(word(&policy, &[], Judged::Session), Word::Clean);
        assert_eq!(
            word(&clean, &[none.clone(), fault], Judged::Server),
            Word::ServerFault
        );
        assert_eq!(word(&clean, &[none], Judged::Server), Word::Inconclusive);
        assert_eq!(word(&clean, &[], Judged::Server), Word::Clean);
        let exits: Vec<u8> = [Word::Clean, Word::Violations, Word::Inconclusive]
            .iter()
            .map(|w| w.exit().code())
            .collect();
        assert_eq!(exits, [0, 1, 3]);
    }

    #[test]
    fn a_baseline_decides_the_exit_but_not_an_unlisted_inconclusive_run() {
        let baseline = |names: &[&str]| Baseline {
            expected: names.iter().map(|s| s.to_string()).collect(),
        };
        let must = verdict_with(&[("response-after-cancel", Level::Must)]);
        let listed = baseline(&["response-after-cancel"]);
        let end = RunEnd::decide(&must, &[], Some(&listed), Judged::Server);
        assert_eq!((end.word, end.exit), (Word::Violations, Exit::Pass));
        let end = RunEnd::decide(&Verdict::default(), &[], Some(&listed), Judged::Server);
        assert_eq!(end.exit, Exit::Broken, "a stale entry fails the run");
        let none = [finding("nothing-exercised", FindingKind::Inconclusive)];
        let end = RunEnd::decide(
            &Verdict::default(),
            &none,
            Some(&baseline(&[])),
            Judged::Client,
        );
        assert_eq!(end.exit, Exit::Inconclusive);
        assert!(matches!(end.outcome, Some(RunOutcome::Inconclusive(_))));
        let end = RunEnd::decide(
            &Verdict::default(),
            &none,
            Some(&baseline(&["nothing-exercised"])),
            Judged::Client,
        );
        assert_eq!((end.exit, end.outcome), (Exit::Pass, None));
        let policy = verdict_with(&[("timeout-deadline", Level::Policy)]);
        let end = RunEnd::decide(&policy, &[], Some(&baseline(&[])), Judged::Client);
        assert_eq!(
            end.exit,
            Exit::Broken,
            "a declared policy fails a judged client"
        );
        let end = RunEnd::decide(&policy, &[], Some(&baseline(&[])), Judged::Session);
        assert_eq!(end.exit, Exit::Pass);
    }

    #[test]
    fn an_interrupted_run_exits_130_unless_what_it_recorded_fails_it() {
        let stop = finding("interrupted", FindingKind::Interrupted);
        let none = finding("nothing-exercised", FindingKind::Inconclusive);
        let fault = finding("server-exited", FindingKind::Fault);
        let must = verdict_with(&[("response-after-cancel", Level::Must)]);
        let clean = Verdict::default();
        let end = |v: &Verdict, f: &[Finding], b: Option<&Baseline>| {
            let e = RunEnd::decide(v, f, b, Judged::Server);
            (e.word, e.exit.code())
        };
        let both = [stop.clone(), none];
        assert_eq!(end(&clean, &both, None), (Word::Interrupted, 130));
        assert_eq!(end(&must, &both, None), (Word::Violations, 1));
        assert_eq!(
            end(&clean, &[stop.clone(), fault], None),
            (Word::ServerFault, 1)
        );
        // A baseline that lists every finding still leaves an interrupted run interrupted.
        let listed = Baseline {
            expected: ["response-after-cancel".to_string()].into_iter().collect(),
        };
        assert_eq!(
            end(&must, std::slice::from_ref(&stop), Some(&listed)).1,
            130
        );
        assert_eq!(Exit::OwnFault.code(), 4);
    }
}
