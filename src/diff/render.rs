//! A [`Diff`] for people (one screen of text, a Mermaid diagram of the first divergence) and
//! for CI (JSON, JUnit, GitHub annotations).

use crate::exit::Exit;
use std::fmt::Write;

use serde_json::{json, Value};

use super::calls::Beat;
use super::{Call, Diff, Pair, RuleChange};
use crate::ci::{self, Annotation, Case, CaseResult, Suite};
use crate::trace::Side;

/// `call 3 (tools/call slow_op)`.
fn name(call: &Call, k: usize) -> String {
    format!("call {} ({})", k + 1, call.label())
}

fn rule_line(r: &RuleChange) -> String {
    let noise = if r.noise { ", noise" } else { "" };
    format!(
        "{} ({}): {} -> {} violation(s){noise}",
        r.rule,
        r.level.as_str(),
        r.base,
        r.new
    )
}

/// The changes of one pair, one line each.
fn pair_lines(d: &Diff, p: &Pair) -> Vec<String> {
    let call = &d.base.calls[p.base];
    let mut lines = Vec::new();
    for c in p.changes.iter().filter(|c| !c.noise) {
        lines.push(format!(
            "{}: {}: {} -> {}",
            name(call, p.base),
            c.class.as_str(),
            c.base,
            c.new
        ));
    }
    for t in p.timing.iter().filter(|t| t.flagged) {
        lines.push(format!(
            "{}: {}: {} ms -> {} ms (noise {} ms)",
            name(call, p.base),
            t.figure,
            t.base_ms,
            t.new_ms,
            t.noise_ms
        ));
    }
    lines
}

/// One screen: the alignment, the changed calls, the verdict delta, the verdict.
pub fn text(d: &Diff) -> String {
    let mut out = String::new();
    let changed: Vec<&Pair> = d.changed_pairs().collect();
    let _ = writeln!(
        out,
        "aligned: {} of {} base and {} new calls by {:?} ({:.0} %){}",
        d.pairs.len(),
        d.base.calls.len(),
        d.new.calls.len(),
        d.align,
        d.aligned_share() * 100.0,
        match d.noise_runs {
            0 => String::new(),
            n => format!("; noise floor from {n} repeat(s) of the base"),
        }
    );
    for &k in &d.only_base {
        let _ = writeln!(out, "  only in base: {}", name(&d.base.calls[k], k));
    }
    for &k in &d.only_new {
        let _ = writeln!(out, "  only in new:  {}", name(&d.new.calls[k], k));
    }
    let _ = writeln!(
        out,
        "changed: {} of {} aligned calls",
        changed.len(),
        d.pairs.len()
    );
    for p in &changed {
        for line in pair_lines(d, p) {
            let _ = writeln!(out, "  {line}");
        }
    }
    for (m, x, y) in &d.server_requests {
        let _ = writeln!(out, "  server requests {m}: {x} -> {y}");
    }
    for (title, rules) in [
        ("newly broken", &d.newly_broken),
        ("fixed", &d.fixed),
        ("still broken", &d.still_broken),
    ] {
        if rules.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{title}:");
        for r in rules {
            let _ = writeln!(out, "  {}", rule_line(r));
        }
    }
    let verdict = match d.exit() {
        Exit::Pass if d.changed_pairs().next().is_none() && d.fixed.is_empty() => {
            "no change beyond noise"
        }
        Exit::Pass => "changed, no regression",
        Exit::Broken => "regression",
        Exit::Usage | Exit::Inconclusive | Exit::OwnFault | Exit::Interrupted => {
            "not comparable: too few calls align"
        }
    };
    let _ = writeln!(out, "verdict: {verdict}");
    out
}

/// The whole diff as JSON.
pub fn json(d: &Diff) -> Value {
    let call = |c: &Call, k: usize| {
        json!({
            "call": k + 1,
            "method": c.method,
            "tool": c.tool,
            "at_ms": c.at_ms,
            "classes": c.classes.iter().map(|(k, v)| (k.as_str().to_owned(), Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
            "duration_ms": c.duration_ms,
        })
    };
    json!({
        "exit_code": d.exit().code(),
        "regression": d.is_regression(),
        "align": format!("{:?}", d.align).to_lowercase(),
        "aligned_share": d.aligned_share(),
        "noise_runs": d.noise_runs,
        "pairs": d.pairs.iter().map(|p| json!({
            "base": call(&d.base.calls[p.base], p.base),
            "new": call(&d.new.calls[p.new], p.new),
            "changed": p.changed(),
            "changes": p.changes,
            "timing": p.timing,
        })).collect::<Vec<_>>(),
        "only_base": d.only_base.iter().map(|&k| call(&d.base.calls[k], k)).collect::<Vec<_>>(),
        "only_new": d.only_new.iter().map(|&k| call(&d.new.calls[k], k)).collect::<Vec<_>>(),
        "newly_broken": d.newly_broken,
        "fixed": d.fixed,
        "still_broken": d.still_broken,
        "server_requests": d.server_requests.iter().map(|(m, x, y)| json!({"method": m, "base": x, "new": y})).collect::<Vec<_>>(),
    })
}

/// JUnit: a case per aligned call and per rule in either verdict.
pub fn junit(d: &Diff) -> String {
    let mut cases = Vec::new();
    for p in &d.pairs {
        let lines = pair_lines(d, p);
        let result = match lines.is_empty() {
            true => CaseResult::Passed,
            false => CaseResult::Failed {
                kind: "changed".into(),
                message: lines[0].clone(),
                text: lines.join("\n"),
            },
        };
        cases.push(Case {
            name: name(&d.base.calls[p.base], p.base),
            result,
        });
    }
    for r in d.newly_broken.iter().chain(&d.fixed).chain(&d.still_broken) {
        let newly = r.base == 0 && !r.noise;
        cases.push(Case {
            name: r.rule.to_owned(),
            result: match newly {
                true => CaseResult::Failed {
                    kind: r.level.as_str().to_owned(),
                    message: format!("newly broken: {}", rule_line(r)),
                    text: rule_line(r),
                },
                false => CaseResult::PassedWithOutput(rule_line(r)),
            },
        });
    }
    let suite = Suite {
        name: "diff".into(),
        properties: vec![
            ("aligned".into(), format!("{:.2}", d.aligned_share())),
            ("noise_runs".into(), d.noise_runs.to_string()),
        ],
        cases,
    };
    ci::junit_suites("mcp-sim diff", &[suite])
}

/// GitHub annotations: an error per newly broken rule and changed call, a notice per fix.
pub fn github(d: &Diff) -> String {
    let mut notes = Vec::new();
    for r in d.newly_broken.iter().filter(|r| !r.noise) {
        notes.push(Annotation {
            command: ci::annotation_command(r.level),
            title: r.rule.to_owned(),
            message: format!("newly broken: {}", rule_line(r)),
        });
    }
    for p in d.changed_pairs() {
        for line in pair_lines(d, p) {
            notes.push(Annotation {
                command: "error",
                title: "behaviour changed".into(),
                message: line,
            });
        }
    }
    for r in &d.fixed {
        notes.push(Annotation {
            command: "notice",
            title: r.rule.to_owned(),
            message: format!("fixed: {}", rule_line(r)),
        });
    }
    if d.exit() == Exit::Inconclusive {
        notes.push(Annotation {
            command: "error",
            title: "not comparable".into(),
            message: format!("only {:.0} % of the calls align", d.aligned_share() * 100.0),
        });
    }
    ci::github_lines(&notes)
}

/// The first changed call as a two-column Mermaid sequence diagram: the base run's client and
/// server on the left, the new run's on the right, each event at its offset from the call's
/// start; `None` when no call changed.
pub fn mermaid(d: &Diff) -> Option<String> {
    let p = d.changed_pairs().next()?;
    let (b, n) = (&d.base.calls[p.base], &d.new.calls[p.new]);
    let mut out = String::from("sequenceDiagram\n");
    out.push_str(
        "    box base\n    participant BC as client\n    participant BS as server\n    end\n",
    );
    out.push_str(
        "    box new\n    participant NC as client\n    participant NS as server\n    end\n",
    );
    let mut rows: Vec<(bool, &Beat)> = b
        .story
        .iter()
        .map(|beat| (false, beat))
        .chain(n.story.iter().map(|beat| (true, beat)))
        .collect();
    rows.sort_by_key(|(new, beat)| (beat.t, *new));
    for (new, beat) in rows {
        let (c, s) = if new { ("NC", "NS") } else { ("BC", "BS") };
        let what = format!("{} (+{}ms)", beat.what.replace([';', '#'], " "), beat.t);
        let line = match beat.arrow {
            Some(true) => format!("{c}->>{s}: {what}"),
            Some(false) => format!("{s}->>{c}: {what}"),
            None if beat.side == Side::Client => format!("Note over {c}: {what}"),
            None => format!("Note over {s}: {what}"),
        };
        let _ = writeln!(out, "    {line}");
    }
    for line in pair_lines(d, p) {
        let _ = writeln!(
            out,
            "    Note over BC,NS: {}",
            line.replace([';', '#'], " ")
        );
    }
    Some(out)
}
