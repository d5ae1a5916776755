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
    // A command that refuses its flags exits before it reads: its closed pipe is no failure.
    let written = child.stdin.take().expect("piped").write_all(stdin);
    if let Err(e) = written {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "stdin takes the input: {e}"
        );
    }
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

/// A 2025-03-26 batch gets one verdict per member; every later era refuses the line whole.
#[test]
fn decode_reads_a_2025_03_26_batch_member_by_member() {
    let input = concat!(
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":null}}]"#,
        "\n",
    );
    let verdicts = |era: &str| -> Vec<serde_json::Value> {
        let out = mcp_sim(&["decode", "--era", era], input.as_bytes());
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let batch = verdicts("2025-03-26");
    assert_eq!(
        batch[0],
        serde_json::json!({"line": 1, "member": 0, "ok": true, "kind": "request"})
    );
    assert_eq!(batch[1]["member"], 1);
    assert_eq!(batch[1]["error"]["path"], "[1].params.requestId");
    let refused = verdicts("2025-06-18");
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["error"]["rule"], "batch");
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

/// A trace is judged by the era it speaks, and says so; `--era` overrides the reading, and an
/// era that does not exist is refused with its name.
#[test]
fn check_trace_reads_the_era_and_takes_it_from_the_command_line() {
    let legacy = traces().join("legacy").join("message-shape-passes.jsonl");
    let legacy = legacy.to_str().unwrap();
    let out = mcp_sim(&["check-trace", legacy, "--format", "json"], b"");
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["era"], "2025-11-25");
    assert!(v["era_reading"]
        .as_str()
        .unwrap()
        .contains("initialize exchange at #0"));
    let text = mcp_sim(&["check-trace", legacy], b"");
    assert!(String::from_utf8_lossy(&text.stdout).contains("era: legacy 2025-11-25"));

    // Judged as 2026-07-28, the same handshake breaks the modern shapes.
    let modern = mcp_sim(&["check-trace", legacy, "--era", "modern"], b"");
    assert_eq!(modern.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&modern.stdout).contains("missing-meta"));

    let unknown = mcp_sim(&["check-trace", legacy, "--era", "2024-11-05"], b"");
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("2024-11-05"));
}

/// `--era legacy` sweeps the legacy client clean and names the era in its lines, on stdio and
/// on Streamable HTTP.
#[test]
fn a_legacy_sweep_runs_on_both_transports() {
    let out = mcp_sim(
        &[
            "sweep", "--lane", "memory", "--era", "legacy", "--seeds", "0..50", "--format", "json",
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runs"], 50);
    assert!(
        v["setup"].as_str().unwrap().contains("--era 2025-11-25"),
        "{v}"
    );
    let http = mcp_sim(
        &[
            "sweep",
            "--lane",
            "memory",
            "--era",
            "legacy",
            "--transport",
            "http",
            "--seeds",
            "0..5",
        ],
        b"",
    );
    assert_eq!(
        http.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&http.stderr)
    );
    assert!(String::from_utf8_lossy(&http.stdout).contains("runs:        5"));
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

/// `docs/rules.md` and `docs/mutants.md` are the output of `mcp-sim rules` and `mcp-sim
/// mutants --list`: regenerate them with those commands when the catalog changes.
#[test]
fn the_catalog_pages_are_the_commands_output() {
    for (args, page) in [
        (&["rules"][..], "rules.md"),
        (&["mutants", "--list"][..], "mutants.md"),
    ] {
        let out = mcp_sim(args, b"");
        assert_eq!(out.status.code(), Some(0));
        let path = workspace().join("docs").join(page);
        let committed =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let printed = String::from_utf8(out.stdout).unwrap();
        assert!(
            committed == printed,
            "docs/{page} is not what `mcp-sim {}` prints: run `cargo run -p mcp-sim-cli -- {} > docs/{page}`",
            args.join(" "),
            args.join(" ")
        );
    }
    let rules = std::fs::read_to_string(workspace().join("docs/rules.md")).unwrap();
    for r in mcp_sim::oracle::RULES {
        assert!(rules.contains(&format!("`{}`", r.name)), "{}", r.name);
    }
    let mutants = std::fs::read_to_string(workspace().join("docs/mutants.md")).unwrap();
    for m in mcp_sim::mutants::ALL {
        assert!(mutants.contains(&format!("`{}`", m.info().name)), "{m}");
    }
}

fn workspace() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("sim/ lies in the workspace")
        .to_path_buf()
}

/// A printed command line's leading `VAR=value` words, and the rest.
fn split_env(line: &str) -> (Vec<(String, String)>, Vec<&str>) {
    let mut words = line.split_whitespace().peekable();
    let mut env = Vec::new();
    while let Some(w) = words.peek() {
        match w.split_once('=') {
            Some((var, value)) if var.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
                env.push((var.to_owned(), value.to_owned()));
                words.next();
            }
            _ => break,
        }
    }
    (env, words.collect())
}

/// Runs a printed `cargo run --release -p mcp-sim-cli -- ...` line with this build's
/// `mcp-sim`, the leading `VAR=value` words in its environment, from the workspace's root
/// (where a user pastes it).
fn run_line(line: &str) -> Output {
    let (env, words) = split_env(line);
    let replay_prefix = ["cargo", "run", "--release", "-p", "mcp-sim-cli", "--"];
    assert!(
        words.starts_with(&replay_prefix),
        "not a replay line: {line}"
    );
    Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(&words[replay_prefix.len()..])
        .envs(env)
        .current_dir(workspace())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// What a printed `cargo test --test FILE replay_one_seed -- --nocapture` line runs, done in
/// this process: `FILE`'s `replay_one_seed` reads the line's variables
/// ([`mcp_sim::repro::ReproEnv`]) and judges that run on its lane (`tests/common/mod.rs`,
/// `replay_from_env`), without a nested `cargo test`. The digest and rules of the run, or the
/// error naming a variable that does not parse.
fn run_test_line(line: &str) -> Result<(String, Vec<&'static str>), String> {
    let (env, words) = split_env(line);
    let file = match words.as_slice() {
        ["cargo", "test", "--test", file, "replay_one_seed", "--", "--nocapture"] => *file,
        _ => panic!("not a test line: {line}"),
    };
    let source = std::fs::read_to_string(workspace().join("tests").join(format!("{file}.rs")))
        .unwrap_or_else(|e| panic!("{line}: tests/{file}.rs: {e}"));
    let lane = if source.contains("replay_from_env(Lane::turmoil())") {
        mcp_sim::lanes::Lane::turmoil()
    } else if source.contains("replay_from_env(Lane::Memory)") {
        mcp_sim::lanes::Lane::Memory
    } else {
        panic!("{line}: tests/{file}.rs has no replay_one_seed");
    };
    let vars: std::collections::BTreeMap<String, String> = env.into_iter().collect();
    let repro = mcp_sim::repro::ReproEnv::read_from(|name| Ok(vars.get(name).cloned()))
        .and_then(|e| e.repro(lane))
        .map_err(|e| e.to_string())?;
    let judged = mcp_sim::run::judge(&repro.scenario(), repro.lane);
    Ok((
        format!("{:016x}", judged.run.trace.digest()),
        judged.rules(),
    ))
}

/// The lines a failing sweep prints reproduce its failure: a mutant at a 1 ms tick, the
/// `mcp-sim replay` line and the `cargo test` line each give the same rules and the same trace
/// digest as the sweep's run.
#[test]
fn printed_replay_and_test_lines_reproduce_the_failure() {
    let dir = std::env::temp_dir().join(format!("mcp-sim-repro-{}", std::process::id()));
    let sweep = mcp_sim(
        &[
            "sweep",
            "--seeds",
            "0..2",
            "--tick-ms",
            "1",
            "--mutant",
            "respond_after_cancel",
            "--format",
            "json",
            "--report-dir",
            dir.to_str().unwrap(),
        ],
        b"",
    );
    let text = String::from_utf8(sweep.stdout).unwrap();
    assert_eq!(sweep.status.code(), Some(1), "{text}");
    let totals: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON object");
    let failing = &totals["failing"][0];
    let digest = failing["digest"].as_str().expect("a digest").to_owned();
    let rules: Vec<String> = failing["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    assert!(
        rules
            .iter()
            .any(|r| r == "disconnect-is-cancel" || r == "response-after-cancel"),
        "{rules:?}"
    );
    let replay = failing["replay"].as_str().unwrap();
    let test = failing["test"].as_str().unwrap();
    for knob in ["--tick-ms 1", "--mutant respond_after_cancel"] {
        assert!(replay.contains(knob), "{replay}");
    }
    for knob in ["MCP_SIM_TICK_MS=1", "MCP_SIM_MUTANT=respond_after_cancel"] {
        assert!(test.contains(knob), "{test}");
    }
    let out = run_line(replay);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // `mcp-sim replay` exits 1 on a failing run.
    assert_eq!(out.status.code(), Some(1), "{replay}\n{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("digest {digest}")),
        "{replay}: not the sweep's trace {digest}\n{stdout}\n{stderr}"
    );
    for rule in &rules {
        assert!(
            stdout.contains(rule.as_str()),
            "{replay}: {rule} missing\n{stdout}"
        );
    }
    let (test_digest, test_rules) = run_test_line(test).expect("the test line reads");
    assert_eq!(test_digest, digest, "{test}: not the sweep's trace");
    for rule in &rules {
        assert!(
            test_rules.contains(&rule.as_str()),
            "{test}: {rule} missing: {test_rules:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reproduction variable that does not parse fails the replay test, naming it; it never
/// replays another seed.
#[test]
fn a_mistyped_test_line_fails_naming_the_variable() {
    for (var, value) in [
        ("MCP_SIM_SEED", "12x"),
        ("MCP_SIM_TRANSPORT", "stdoi"),
        ("MCP_SIM_TICK_MS", "0"),
        ("MCP_SIM_MUTANT", "no_such_mutant"),
    ] {
        let line =
            format!("{var}={value} cargo test --test simulation replay_one_seed -- --nocapture");
        let err = run_test_line(&line).expect_err("a mistyped variable replays nothing");
        assert!(err.contains(&format!("{var}=\"{value}\"")), "{line}: {err}");
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

/// The two CI formats (`mcp_sim::ci`): JUnit XML with a case per rule of the trace's era, the
/// broken MUST rule failing with its message; GitHub annotations, one line per violation. The
/// exit code is the command's, whatever the format. The XML is checked for the structure a CI
/// reader needs (one `testsuites`, balanced cases, escaped text), not by a schema.
#[test]
fn check_trace_and_sweep_print_junit_and_github_annotations() {
    let broken = traces().join("cancel-on-timeout-violates.jsonl");
    let broken = broken.to_str().unwrap();
    let junit = mcp_sim(&["check-trace", broken, "--format", "junit"], b"");
    assert_eq!(junit.status.code(), Some(1));
    let xml = String::from_utf8_lossy(&junit.stdout);
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert_eq!(xml.matches("<testsuites ").count(), 1, "{xml}");
    let modern_rules = mcp_sim::oracle::RULES
        .iter()
        .filter(|r| r.modern.is_some() && !r.spans_hops())
        .count();
    assert_eq!(xml.matches("<testcase ").count(), modern_rules, "{xml}");
    assert_eq!(
        xml.matches("<failure ").count(),
        xml.matches("</failure>").count()
    );
    assert!(
        xml.contains("name=\"cancel-on-timeout\">\n      <failure type=\"MUST\""),
        "{xml}"
    );
    assert!(xml.contains("failures=\"1\""), "{xml}");

    let github = mcp_sim(&["check-trace", broken, "--format", "github"], b"");
    assert_eq!(github.status.code(), Some(1));
    let lines = String::from_utf8_lossy(&github.stdout);
    assert_eq!(lines.lines().count(), 1, "{lines}");
    assert!(
        lines.starts_with("::error title=cancel-on-timeout::"),
        "{lines}"
    );

    // A sweep: one suite, a MUST rule failing with the failing seeds' replay lines.
    let sweep = mcp_sim(
        &[
            "sweep",
            "--lane",
            "memory",
            "--mutant",
            "respond_after_cancel",
            "--seeds",
            "0..30",
            "--format",
            "junit",
        ],
        b"",
    );
    assert_eq!(sweep.status.code(), Some(1));
    let xml = String::from_utf8_lossy(&sweep.stdout);
    assert_eq!(xml.matches("<testsuite ").count(), 1, "{xml}");
    assert!(xml.contains("<failure type=\"MUST\""), "{xml}");
    assert!(
        xml.contains("replay --seed") && xml.contains("--mutant respond_after_cancel"),
        "{xml}"
    );
    let clean = mcp_sim(
        &[
            "sweep", "--lane", "memory", "--seeds", "0..20", "--format", "github",
        ],
        b"",
    );
    assert_eq!(clean.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&clean.stdout).contains("::error"));
}

/// `--baseline FILE`: a listed MUST rule no longer fails the run, a listed rule that no longer
/// occurs does (stale), a rule not listed still does, and a name that is no rule is refused
/// with its line before anything is judged.
#[test]
fn check_trace_baselines_fail_on_new_and_on_stale_findings() {
    let dir = std::env::temp_dir().join(format!("mcp-sim-baseline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let broken = traces().join("cancel-on-timeout-violates.jsonl");
    let broken = broken.to_str().unwrap();
    let run = |baseline: &str| mcp_sim(&["check-trace", broken, "--baseline", baseline], b"");
    let known = file("known", "# adopted with its known bug\ncancel-on-timeout\n");
    assert_eq!(run(&known).status.code(), Some(0));
    let stale = file("stale", "cancel-on-timeout\nmessage-shape\n");
    let out = run(&stale);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stale message-shape"));
    let other = file("other", "message-shape\n");
    let out = run(&other);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unexpected cancel-on-timeout"));
    let typo = file("typo", "\ncancel-on-timeut\n");
    let out = run(&typo);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"));
}

/// `record --baseline` reads its file before it starts anything: a typo is refused with its
/// line (exit 2), and the server is never started.
#[test]
fn record_refuses_a_bad_baseline_before_starting_the_server() {
    let dir = std::env::temp_dir().join(format!("mcp-sim-rec-baseline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let typo = dir.join("typo");
    std::fs::write(&typo, "initialize-canceled\n").unwrap();
    let marker = dir.join("started");
    let started = format!("open({:?}, 'w')", marker.display().to_string());
    let out = mcp_sim(
        &[
            "record",
            "--baseline",
            typo.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            &started,
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 1") && stderr.contains("initialize-canceled"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the server was started");
}

/// `serve --format junit` over stdio keeps stdout for the protocol: the JUnit report goes to
/// stderr, and a session with no `tools/call` is a skipped `verdict` case (exit 3).
#[test]
fn serve_junit_over_stdio_goes_to_stderr_and_names_an_empty_session() {
    let out = mcp_sim(&["serve", "--format", "junit"], b"");
    assert_eq!(out.status.code(), Some(3));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("<testsuites name=\"mcp-sim serve\""),
        "{stderr}"
    );
    assert!(stderr.contains("name=\"verdict\""), "{stderr}");
    assert!(
        stderr.contains("<skipped message=\"nothing-exercised"),
        "{stderr}"
    );
}

/// A TypeScript host times its calls (`callTool(..., {timeout: 1000, resetTimeoutOnProgress:
/// true})`) and lists its tools with the defaults. Declared for every request, the policy
/// makes `tools/list` (which asks for no progress) a `reset-needs-token` finding; declared for
/// `tools/call` only, the same trace is clean, and `check-trace --format json` says the exit
/// code it exits with.
#[test]
fn check_trace_applies_a_declared_policy_to_the_methods_it_names() {
    let meta = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}"#;
    let trace = format!(
        concat!(
            r#"{{"t":0,"side":"client","kind":"send","transport":"stdio","msg":{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"_meta":{{{m}}}}}}}}}"#,
            "\n",
            r#"{{"t":5,"side":"client","kind":"recv","transport":"stdio","msg":{{"jsonrpc":"2.0","id":1,"result":{{"resultType":"complete","tools":[]}}}}}}"#,
            "\n",
            r#"{{"t":5,"side":"client","kind":"outcome","request":1,"outcome":"result"}}"#,
            "\n",
            r#"{{"t":10,"side":"client","kind":"send","transport":"stdio","msg":{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"slow_op","arguments":{{}},"_meta":{{{m},"progressToken":"p"}}}}}}}}"#,
            "\n",
            r#"{{"t":300,"side":"client","kind":"recv","transport":"stdio","msg":{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"p","progress":1}}}}}}"#,
            "\n",
            r#"{{"t":600,"side":"client","kind":"recv","transport":"stdio","msg":{{"jsonrpc":"2.0","id":2,"result":{{"resultType":"complete","content":[]}}}}}}"#,
            "\n",
            r#"{{"t":600,"side":"client","kind":"outcome","request":2,"outcome":"result"}}"#,
            "\n",
        ),
        m = meta
    );
    let rules = |policy: &str| -> (i32, Vec<String>, serde_json::Value) {
        let out = mcp_sim(
            &[
                "check-trace",
                "-",
                "--format",
                "json",
                "--client-policy",
                policy,
            ],
            trace.as_bytes(),
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON verdict");
        let rules = v["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .map(|x| x["rule"].as_str().unwrap_or("?").to_owned())
            .collect();
        (out.status.code().unwrap_or(-1), rules, v)
    };
    let (code, every, v) = rules("timeout=1000,reset");
    assert_eq!(every, ["reset-needs-token"], "{v:#}");
    assert_eq!(
        (code, v["exit_code"].as_i64()),
        (0, Some(0)),
        "a policy finding fails nothing"
    );
    let (code, per_method, v) = rules("tools/call:timeout=1000,reset");
    assert!(per_method.is_empty(), "{v:#}");
    assert_eq!(v["exit_code"], code as i64);
    let bad = mcp_sim(
        &[
            "check-trace",
            "-",
            "--client-policy",
            "tools/call:timeout=x",
        ],
        trace.as_bytes(),
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("timeout="));
}

/// Under a baseline the JSON verdict says what the exit code says: a listed MUST rule is
/// expected (exit 0, `ok`), a stale entry is the failure (exit 1), and `serve` reads its
/// baseline before it starts (an unknown name is a usage error).
#[test]
fn one_verdict_per_run_under_a_baseline() {
    let dir = std::env::temp_dir().join(format!("mcp-sim-baseline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let trace = traces().join("response-after-cancel-violates.jsonl");
    let trace = trace.display().to_string();
    let judge = |listed: &str| {
        let file = dir.join("baseline.txt");
        std::fs::write(&file, listed).expect("write the baseline");
        let file = file.display().to_string();
        let out = mcp_sim(
            &[
                "check-trace",
                &trace,
                "--format",
                "json",
                "--baseline",
                &file,
            ],
            b"",
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON verdict");
        (out.status.code().unwrap_or(-1), v)
    };
    let (code, v) = judge("response-after-cancel\n");
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(
        (v["exit_code"].as_i64(), v["ok"].as_bool()),
        (Some(0), Some(true)),
        "{v:#}"
    );
    assert_eq!(v["baseline"]["agrees"], true, "{v:#}");
    let (code, v) = judge("response-after-cancel\nprogress-monotonic\n");
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(
        (v["exit_code"].as_i64(), v["ok"].as_bool()),
        (Some(1), Some(false)),
        "{v:#}"
    );
    assert_eq!(v["baseline"]["stale"][0], "progress-monotonic", "{v:#}");
    let file = dir.join("bad.txt");
    std::fs::write(&file, "no-such-rule\n").expect("write the baseline");
    let out = mcp_sim(&["serve", "--baseline", &file.display().to_string()], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-rule"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The README's claims about the commands: the ones it says take `--format junit|github` and
/// `--baseline` take them, and no other command does.
#[test]
fn the_readme_names_the_commands_that_take_format_and_baseline() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("the README");
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    // The commands named in backticks between `from` and `to`.
    let named = |from: &str, to: &str| -> std::collections::BTreeSet<String> {
        let start = flat
            .find(from)
            .unwrap_or_else(|| panic!("the README says {from:?}"));
        let end = start + flat[start..].find(to).expect("the end of the list");
        flat[start..end]
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| !w.starts_with('-'))
            .map(str::to_owned)
            .collect()
    };
    let formats = named("`--format github` (annotations) on", "(the last two");
    let baselines = named("`--baseline FILE` (on", ") fails only");
    let help = String::from_utf8(mcp_sim(&["--help"], b"").stdout).expect("utf-8");
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 10, "{help}");
    for command in commands {
        let out = String::from_utf8(mcp_sim(&[command, "--help"], b"").stdout).expect("utf-8");
        let takes_format =
            out.contains("--format") && out.contains("junit") && out.contains("github");
        assert_eq!(
            takes_format,
            formats.contains(command),
            "{command}: the README's list of commands with --format junit|github ({formats:?})"
        );
        assert_eq!(
            out.contains("--baseline"),
            baselines.contains(command),
            "{command}: the README's list of commands with --baseline ({baselines:?})"
        );
    }
}

/// `diff` over two hand-written traces of one call: the result that crossed the cancel
/// against one written after the server read it. Its exit codes: 1 for the regression, 0 the
/// other way round (a fix) and for a trace against itself, 2 for an unreadable trace, 3 when
/// the calls do not pair; and each format.
#[test]
fn diff_names_the_answered_cancel_and_exits_by_what_changed() {
    let passes = traces().join("response-after-cancel-passes.jsonl");
    let violates = traces().join("response-after-cancel-violates.jsonl");
    let (p, v) = (passes.to_str().unwrap(), violates.to_str().unwrap());
    let out = mcp_sim(&["diff", p, v, "--mermaid"], b"");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "cancel: cancelled, crossed by its result -> cancelled, answered with result"
        ),
        "{text}"
    );
    assert!(
        text.contains("response-after-cancel (MUST): 0 -> 1"),
        "{text}"
    );
    assert!(
        text.contains("sequenceDiagram") && text.contains("box new"),
        "{text}"
    );

    let back = mcp_sim(&["diff", v, p, "--format", "json"], b"");
    let json: serde_json::Value = serde_json::from_slice(&back.stdout).unwrap();
    assert_eq!(back.status.code(), Some(0), "a fix: {json:#}");
    assert_eq!(json["fixed"][0]["rule"], "response-after-cancel");
    assert_eq!(mcp_sim(&["diff", p, p], b"").status.code(), Some(0));

    let junit = mcp_sim(&["diff", p, v, "--format", "junit"], b"");
    assert!(String::from_utf8_lossy(&junit.stdout).contains("<failure"));
    let github = mcp_sim(&["diff", p, v, "--format", "github"], b"");
    assert!(String::from_utf8_lossy(&github.stdout)
        .contains("::error title=response-after-cancel::newly broken"));

    let missing = mcp_sim(&["diff", p, "no-such.jsonl"], b"");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no-such.jsonl"));
    let other = traces().join("error-code-reserved-passes.jsonl");
    let unaligned = mcp_sim(
        &["diff", p, other.to_str().unwrap(), "--align", "order"],
        b"",
    );
    let text = String::from_utf8_lossy(&unaligned.stdout);
    assert_eq!(unaligned.status.code(), Some(3), "{text}");
}
