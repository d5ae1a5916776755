//! What a reader follows must lead somewhere: every reference in the repository's docs, module
//! docs and rule catalog resolves to a file or section inside the repository, the rule names a
//! report prints are found where the code flags them, and the coverage table names only rules
//! and traces that exist.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use mcp_sim::oracle::coverage::INVARIANTS;
use mcp_sim::oracle::RULES;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's own text files: docs, sources, tests, build and CI files (build output,
/// fuzz corpora and installed peers left out).
fn text_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !matches!(
                    name,
                    "target" | "node_modules" | "corpus" | "artifacts" | "coverage" | "logs"
                ) && !name.starts_with('.')
                {
                    walk(&path, out);
                }
            } else if [".rs", ".md", ".toml", ".py", ".ts", ".sh"]
                .iter()
                .any(|ext| name.ends_with(ext))
                || name == "run"
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for top in [
        "README.md",
        "Cargo.toml",
        "src",
        "sim",
        "tests",
        "docs",
        "fuzz",
        "examples",
        "benches",
        ".ci",
        ".cargo",
    ] {
        let path = root().join(top);
        if path.is_dir() {
            walk(&path, &mut out);
        } else if path.is_file() {
            out.push(path);
        }
    }
    out
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Documents that live outside the repository; no reader of a clone can follow them.
/// (The first two are spelt in halves, so that this file does not name them itself.)
const OUTSIDE: &[&str] = &[
    concat!("..", "/shared"),
    concat!("shared", "/data"),
    "design.md",
    "landscape.md",
    "landscape part",
    "landscape B",
    "requirements digest",
];

#[test]
fn nothing_cites_a_document_outside_the_repository() {
    let this = file!().replace('\\', "/");
    let mut bad = Vec::new();
    for path in text_files() {
        if rel(&path).replace('\\', "/") == this {
            continue;
        }
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            for word in OUTSIDE {
                if line.contains(word) {
                    bad.push(format!("{}:{}: {word}: {line}", rel(&path), n + 1));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Every path of a Markdown page under `docs/` or of a Rust file under one of the repository's
/// folders, named anywhere, exists; so does every relative Markdown link of the README and the
/// docs pages.
#[test]
fn every_named_path_and_markdown_link_resolves() {
    const FOLDERS: [&str; 7] = [
        "docs/",
        "src/",
        "tests/",
        "sim/",
        "fuzz/",
        "benches/",
        "examples/",
    ];
    let mut bad = Vec::new();
    for path in text_files() {
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        // A fenced block is the reader's code (a test file of their own), and a spec digest
        // cites the files of other repositories.
        let prose = if path.extension().is_some_and(|e| e == "md") {
            outside_fences(&text)
        } else {
            text.clone()
        };
        let cites_others = rel(&path).starts_with("docs/spec/");
        for folder in FOLDERS {
            let mut rest = prose.as_str();
            while let Some(at) = rest.find(folder) {
                let tail = &rest[at..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
                    .unwrap_or(tail.len());
                let named = tail[..end].trim_end_matches(['.', '/']);
                let before = rest[..at].chars().last();
                let part_of_a_longer_path =
                    before.is_some_and(|c| c.is_ascii_alphanumeric() || "_-/.".contains(c));
                let a_file = named.ends_with(".md") || (named.ends_with(".rs") && !cites_others);
                let here = path.parent().expect("a folder").join(named);
                let exists = root().join(named).exists() || here.exists();
                if a_file && !part_of_a_longer_path && !exists {
                    bad.push(format!("{}: names {named}", rel(&path)));
                }
                rest = &tail[end.max(1)..];
            }
        }
        if path.extension().is_some_and(|e| e == "md") {
            for target in markdown_links(&text) {
                if target.contains("://")
                    || target.starts_with('#')
                    || target.starts_with("mailto:")
                {
                    continue;
                }
                let file = target.split('#').next().unwrap_or("");
                let resolved = path.parent().expect("a folder").join(file);
                if !resolved.exists() {
                    bad.push(format!("{}: links {target}", rel(&path)));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// `text` without its fenced code blocks.
fn outside_fences(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The targets of `[text](target)` links.
fn markdown_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let tail = &rest[at + 2..];
        match tail.find(')') {
            Some(end) if !tail[..end].contains(char::is_whitespace) => {
                out.push(tail[..end].to_owned());
                rest = &tail[end..];
            }
            _ => rest = tail,
        }
    }
    out
}

/// The section numbers (`3.3`, `10.5`) and invariant ids (`C26`) of the modern digest.
fn digest_anchors() -> (BTreeSet<String>, BTreeSet<String>) {
    let text = fs::read_to_string(root().join("docs/spec/mcp-2026-07-28.md")).expect("the digest");
    let mut sections = BTreeSet::new();
    let mut ids = BTreeSet::new();
    let mut in_invariants = false;
    for line in text.lines() {
        if let Some(h) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        {
            let number = h
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_end_matches('.');
            sections.insert(number.to_owned());
            if line.starts_with("## ") {
                in_invariants = number == "9";
            }
        }
        // §9 lists each invariant as `- **C26.** ...`.
        if let Some(item) = line.strip_prefix("- **").filter(|_| in_invariants) {
            let id: String = item
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let is_id = id.len() > 1
                && id.starts_with(|c: char| c.is_ascii_uppercase())
                && id[1..].chars().all(|c| c.is_ascii_digit());
            if is_id {
                ids.insert(id);
            }
        }
    }
    (sections, ids)
}

/// Each rule's `spec` names sections and §9 invariants that the digest in `docs/spec/` has.
#[test]
fn every_rule_cites_sections_and_invariants_the_digest_has() {
    let (sections, ids) = digest_anchors();
    assert!(
        sections.contains("3.3") && ids.contains("C26"),
        "{sections:?} {ids:?}"
    );
    let mut bad = Vec::new();
    for r in RULES {
        for part in r.spec.split(", ") {
            let part = part.trim();
            if let Some(inv) = part.strip_prefix("§9 ") {
                for id in inv.split(['-', ' ']).filter(|w| !w.is_empty()) {
                    let id = if id.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                        // `E41-43` spells the second id without its letter.
                        format!("{}{id}", &inv[..1])
                    } else {
                        id.to_owned()
                    };
                    if !ids.contains(&id) {
                        bad.push(format!("{}: §9 {id}", r.name));
                    }
                }
            } else if let Some(sec) = part.strip_prefix('§') {
                let number: String = sec
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let first = number.trim_end_matches('.');
                if !sections.contains(first) {
                    bad.push(format!("{}: §{first}", r.name));
                }
            } else if part.starts_with(|c: char| c.is_ascii_uppercase()) {
                // A bare invariant id continuing a §9 list (`§9 C22, C32`).
                if !ids.contains(part) {
                    bad.push(format!("{}: {part}", r.name));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Each rule states its source in every era it applies to, and its legacy column cites only
/// invariants the legacy digest has (`LA1` to `LE19`).
#[test]
fn every_rule_cites_its_source_in_each_of_its_eras() {
    let digest =
        fs::read_to_string(root().join("docs/spec/mcp-2025-11-25.md")).expect("the legacy digest");
    let mut bad = Vec::new();
    for r in RULES {
        if r.modern.is_some() == r.spec.is_empty() {
            bad.push(format!(
                "{}: a modern level needs a modern source, and only then",
                r.name
            ));
        }
        if r.legacy.is_some() == r.legacy_spec.is_empty() {
            bad.push(format!(
                "{}: a legacy level needs a legacy source, and only then",
                r.name
            ));
        }
        for word in r.legacy_spec.split(|c: char| !c.is_ascii_alphanumeric()) {
            let cited = word.len() > 2
                && word.starts_with('L')
                && word[1..2].chars().all(|c| ('A'..='E').contains(&c))
                && word[2..].chars().all(|c| c.is_ascii_digit());
            if cited && !digest.contains(&format!("**{word}.**")) {
                bad.push(format!("{}: {word} is not in the legacy digest", r.name));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A rule name taken from a report finds the place that flags it:
/// `grep -rn RULE src/oracle/rules` lands on a `rule!("RULE")`.
#[test]
fn every_rule_is_flagged_under_its_own_name() {
    let dir = root().join("src/oracle/rules");
    let mut code = String::new();
    for entry in fs::read_dir(&dir).expect("the rules folder").flatten() {
        code.push_str(&fs::read_to_string(entry.path()).expect("a rule file"));
    }
    let missing: Vec<&str> = RULES
        .iter()
        .map(|r| r.name)
        .filter(|name| !code.contains(&format!("rule!(\"{name}\")")))
        .collect();
    assert!(
        missing.is_empty(),
        "flagged under no rule!(..): {missing:?}"
    );
}

/// The coverage table names rules of the catalog and traces that exist, and covers each
/// invariant of the digest's §9 once, in order.
#[test]
fn the_coverage_table_names_real_rules_and_traces() {
    let (_, ids) = digest_anchors();
    let table: Vec<&str> = INVARIANTS.iter().map(|i| i.id).collect();
    let digest: Vec<&str> = ids.iter().map(String::as_str).collect();
    let number = |id: &str| id[1..].parse::<u32>().expect("a numbered id");
    let mut in_order = digest.clone();
    in_order.sort_by_key(|id| number(id));
    assert_eq!(table, in_order, "one row per invariant of §9, in order");
    let traces = root().join("tests/traces");
    let mut bad = Vec::new();
    for inv in INVARIANTS {
        for rule in inv.rules {
            if !RULES.iter().any(|r| r.name == *rule) {
                bad.push(format!("{}: rule {rule}", inv.id));
            }
        }
        // `rule-violates-2` names a trace; `-violates-3` another of the last rule named.
        let mut last_rule = String::new();
        for word in inv.evidence.split('`').skip(1).step_by(2) {
            let name = if let Some(suffix) = word.strip_prefix('-') {
                format!("{last_rule}-{suffix}")
            } else {
                word.to_owned()
            };
            if let Some(at) = name.find("-violates") {
                last_rule = name[..at].to_owned();
                if !traces.join(format!("{name}.jsonl")).exists() {
                    bad.push(format!("{}: trace {name}", inv.id));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The README's counts of rules and mutants are the catalogs' (it says "**59 rules**").
#[test]
fn the_readme_counts_the_catalogs() {
    let readme = fs::read_to_string(root().join("README.md")).expect("the README");
    let count = |what: &str| -> Option<usize> {
        let end = readme.find(&format!(" {what}**"))?;
        let start = readme[..end].rfind("**")? + 2;
        readme[start..end].parse().ok()
    };
    assert_eq!(count("rules"), Some(RULES.len()), "README's rule count");
    assert_eq!(
        count("mutants"),
        Some(mcp_sim::model::mutant::ALL.len()),
        "README's mutant count"
    );
}
