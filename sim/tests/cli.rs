//! The `mcp-sim` command end to end: exit codes, verdict formats, replay lines.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn mcp_sim(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcp-sim starts");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin)
        .expect("stdin takes the input");
    child.wait_with_output().expect("mcp-sim finishes")
}

fn traces() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/traces")
}

#[test]
fn decode_prints_one_verdict_per_line() {
    let input = concat!(
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":1}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":null}}"#,
        "\n\n",
    );
    let out = mcp_sim(&["decode"], input.as_bytes());
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        serde_json::json!({"line": 1, "ok": true, "kind": "progress"})
    );
    assert_eq!(lines[1]["error"]["rule"], "null-id");
    assert_eq!(lines[1]["error"]["path"], "params.requestId");
    assert_eq!(lines[2]["error"]["rule"], "blank-line");
    let lenient = mcp_sim(&["decode", "--allow-blank-lines"], input.as_bytes());
    assert_eq!(
        String::from_utf8(lenient.stdout).unwrap().lines().count(),
        2
    );
}

#[test]
fn decode_rejects_bad_usage_with_exit_2() {
    assert_eq!(
        mcp_sim(&["decode", "--no-such-flag"], b"").status.code(),
        Some(2)
    );
}

#[test]
fn check_trace_exit_codes_and_json() {
    let bad = traces().join("response-after-cancel-violates.jsonl");
    let out = mcp_sim(
        &["check-trace", bad.to_str().unwrap(), "--format", "json"],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert!(v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["rule"] == "response-after-cancel"));

    let lenient = mcp_sim(
        &["check-trace", bad.to_str().unwrap(), "--profile", "lenient"],
        b"",
    );
    assert_eq!(
        lenient.status.code(),
        Some(0),
        "SHOULD-level only under the lenient profile"
    );

    let good = traces().join("response-after-cancel-passes.jsonl");
    assert_eq!(
        mcp_sim(&["check-trace", good.to_str().unwrap()], b"")
            .status
            .code(),
        Some(0)
    );

    let unreadable = mcp_sim(
        &["check-trace", "-"],
        b"{\"t\":0,\"side\":\"client\",\"kind\":\"nope\"}\n",
    );
    assert_eq!(unreadable.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unreadable.stderr).contains("line 1"));
}

#[test]
fn sweep_and_replay_agree() {
    let dir = std::env::temp_dir().join("mcp-sim-cli-test-reports");
    let sweep = mcp_sim(
        &[
            "sweep",
            "--seeds",
            "0..4",
            "--transport",
            "both",
            "--report-dir",
            dir.to_str().unwrap(),
        ],
        b"",
    );
    let text = String::from_utf8(sweep.stdout).unwrap();
    assert_eq!(sweep.status.code(), Some(0), "{text}");
    assert!(text.contains("runs:        8"), "{text}");
    assert!(text.contains("violations:  none"), "{text}");
    let a = mcp_sim(&["replay", "--seed", "3", "--lane", "memory"], b"");
    let b = mcp_sim(&["replay", "--seed", "3", "--lane", "memory"], b"");
    assert_eq!(a.status.code(), Some(0));
    let digest = |o: &Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find(|l| l.contains("digest"))
            .map(str::to_owned)
    };
    assert!(digest(&a).is_some());
    assert_eq!(digest(&a), digest(&b), "a replay gives the identical trace");
}

#[test]
fn the_readme_lists_every_rule_and_every_mutant() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"),
    )
    .unwrap();
    for r in mcp_sim::oracle::RULES {
        assert!(
            readme.contains(&format!("`{}`", r.name)),
            "README lacks rule {}",
            r.name
        );
    }
    for m in mcp_sim::mutants::ALL {
        assert!(
            readme.contains(&format!("`{}`", m.info().name)),
            "README lacks mutant {m}"
        );
    }
}

#[test]
fn mutants_command_reports_the_score() {
    let out = mcp_sim(
        &[
            "mutants",
            "--seeds",
            "50",
            "--lane",
            "memory",
            "--only",
            "flat_progress,no_timeout",
        ],
        b"",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("mutation score: 2/2 killed"), "{text}");
    assert!(text.contains("progress-monotonic"), "{text}");
    let unknown = mcp_sim(&["mutants", "--only", "nope"], b"");
    assert_eq!(unknown.status.code(), Some(2));
}
