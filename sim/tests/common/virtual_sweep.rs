//! What the virtual-peer tests share: `mcp-sim sweep --virtual` run and read, the baselines
//! of the live verdicts, and a failing seed's replay line run again.

// Only the virtual-peer tests use these.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

/// `mcp-sim sweep --virtual` with `flags`, then `--` and `command`: its exit code and JSON.
pub fn sweep(flags: &[&str], command: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    sweep_as("--virtual", flags, command, env)
}

/// `mcp-sim sweep --virtual-client` (a real client program), as [`sweep`].
pub fn sweep_client(flags: &[&str], command: &[&str]) -> (i32, Value) {
    sweep_as("--virtual-client", flags, command, &[])
}

fn sweep_as(mode: &str, flags: &[&str], command: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    sweep_with(&["sweep", mode], flags, command, env)
}

/// `mcp-sim WORDS --format json --jobs 2` with `flags`, then `--` and `command` (a sweep of
/// `sweep` or `check-proxy --virtual`): its exit code and JSON.
pub fn sweep_with(
    words: &[&str],
    flags: &[&str],
    command: &[&str],
    env: &[(&str, &str)],
) -> (i32, Value) {
    let dir = std::env::temp_dir().join(format!("mcp-sim-virtual-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(words)
        .args(["--format", "json", "--jobs", "2"])
        .arg("--report-dir")
        .arg(&dir)
        .args(flags)
        .arg("--")
        .args(command)
        .envs(env.iter().copied())
        .output()
        .expect("mcp-sim runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A virtual bridge's ends are mcp-sim's reference peers: the judge never blames them.
    assert!(
        !stderr.contains("internal: the judge blamed a reference peer"),
        "{stderr}"
    );
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not the sweep's JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exited"), json)
}

/// The rules a sweep found broken.
pub fn rules(totals: &Value) -> BTreeSet<String> {
    totals["violations"]
        .as_object()
        .expect("violations")
        .keys()
        .cloned()
        .collect()
}

/// The rules a live baseline file pins (one per line, `#` comments).
pub fn baseline(name: &str) -> BTreeSet<String> {
    let path = super::repo().join("tests/baselines").join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// Every run replays, and most exercised the tool (a run whose every call was cancelled
/// before its result exercised nothing, and says so).
pub fn assert_all_judged(totals: &Value) {
    assert!(
        totals.get("not_replayable").is_none(),
        "every run replays: {totals:#}"
    );
    let inconclusive = totals.get("inconclusive").and_then(Value::as_u64);
    let runs = totals["runs"].as_u64().expect("runs");
    assert!(inconclusive.unwrap_or(0) * 4 < runs, "{totals:#}");
}

/// The first failing run of a sweep for `rule`, replayed: the same digest.
pub fn assert_caught_and_replayed(totals: &Value, rule: &str) {
    let failing = totals["failing"].as_array().expect("failing");
    let first = failing
        .iter()
        .find(|f| f["rules"].as_array().unwrap().iter().any(|r| r == rule))
        .unwrap_or_else(|| panic!("{rule} caught on some seed: {totals:#}"));
    let line = first["replay"].as_str().expect("a replay line");
    let words = shell_words(line);
    assert_eq!(&words[..2], ["mcp-sim", "replay"], "{line}");
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(&words[1..])
        .output()
        .expect("replay runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let digest = first["digest"].as_str().expect("a digest");
    assert!(
        stdout.contains(&format!("digest {digest}")),
        "the replay reprints {digest}:\n{stdout}"
    );
    assert!(stdout.contains(rule), "{stdout}");
}

/// The words of a replay line (single quotes as `shell_quote` writes them).
pub fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let (mut word, mut quoted, mut any) = (String::new(), false, false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            '\\' if !quoted => {
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            ' ' if !quoted => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}
