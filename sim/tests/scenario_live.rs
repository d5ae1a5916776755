//! A fitted session's scenario in both halves: `sweep --around` searches its neighbours in
//! simulation, and `probe --scenario` runs the scenario against a live server to confirm what
//! the simulation predicts. The recording is a probe of the raw stdio server that answers
//! every cancel (`tests/recordings/raw-answer-cancel-probe-seed1.jsonl`); its fitted scenario
//! predicts `response-after-cancel`. Against that server the prediction is confirmed on the
//! first attempt (the answer comes at once, whatever the wall clock does); against the correct
//! server it is not reproduced, which is inconclusive (exit 3), never a pass; against a target
//! on the other transport it is not executable live, before anything runs.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::repo;
use common::serve::scratch;
use serde_json::Value;

fn mcp_sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(args)
        .output()
        .expect("mcp-sim runs")
}

/// `mcp-sim fit` of the committed recording into `dir`.
fn fitted(dir: &Path) -> PathBuf {
    let recording = repo().join("tests/recordings/raw-answer-cancel-probe-seed1.jsonl");
    let file = dir.join("scenario.json");
    let out = mcp_sim(&[
        "fit",
        &recording.display().to_string(),
        "-o",
        &file.display().to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    file
}

fn raw_server(mode: &str) -> Vec<String> {
    let script = repo().join("tests/peers/raw_stdio_server.py");
    vec!["python3".into(), script.display().to_string(), mode.into()]
}

/// `probe --scenario FILE --attempts 3 --format json -- SERVER`: exit code, verdict, stderr.
fn probe_scenario(file: &Path, server: &[String]) -> (i32, Value, String) {
    let mut args = vec![
        "probe".to_string(),
        "--scenario".into(),
        file.display().to_string(),
        "--attempts".into(),
        "3".into(),
        "--format".into(),
        "json".into(),
        "--".into(),
    ];
    args.extend(server.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = mcp_sim(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), v, stderr)
}

fn findings(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["finding"].as_str().map(String::from))
        .collect()
}

#[test]
fn a_fitted_prediction_is_confirmed_live_or_said_not_reproduced() {
    let dir = scratch("scenario-live");
    let file = fitted(&dir);
    let (code, v, stderr) = probe_scenario(&file, &raw_server("answer-cancel"));
    assert_eq!(code, 1, "{v:#}\n{stderr}");
    assert!(
        stderr.contains("the simulation predicts response-after-cancel"),
        "{stderr}"
    );
    assert!(
        stderr.contains("confirmed response-after-cancel on attempt 1"),
        "{stderr}"
    );
    assert!(
        !findings(&v).contains(&"not-reproduced".to_string()),
        "{v:#}"
    );
    let (code, v, stderr) = probe_scenario(&file, &raw_server("correct"));
    assert_eq!(code, 3, "{v:#}\n{stderr}");
    assert_eq!(v["verdict"], "inconclusive", "{v:#}");
    assert!(
        findings(&v).contains(&"not-reproduced".to_string()),
        "{v:#}"
    );
    assert!(stderr.contains("attempt 3 of 3 did not break"), "{stderr}");
}

#[test]
fn a_scenario_on_another_transport_is_not_executable_live() {
    let dir = scratch("scenario-not-live");
    let file = fitted(&dir);
    // Nothing listens there: the plan is refused before any connection.
    let out = mcp_sim(&[
        "probe",
        "--scenario",
        &file.display().to_string(),
        "--format",
        "json",
        "--url",
        "http://127.0.0.1:9/mcp",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["findings"][0]["finding"], "not-executable-live", "{v:#}");
    assert!(v["findings"][0]["message"]
        .as_str()
        .unwrap()
        .contains("the scenario runs on stdio, the target on http"));
}

#[test]
fn sweep_around_lists_failing_neighbours_and_exits_by_them() {
    let dir = scratch("sweep-around");
    let file = fitted(&dir);
    let path = file.display().to_string();
    // Neighbours that only stretch the latency of a stdio session break nothing new.
    let out = mcp_sim(&[
        "sweep",
        "--around",
        &path,
        "--seeds",
        "0..50",
        "--lane",
        "memory",
        "--perturb",
        "latency=x0.5..x2",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("no neighbour breaks a rule the scenario does not"),
        "{text}"
    );
    assert!(
        text.contains("the scenario itself breaks: response-after-cancel"),
        "{text}"
    );
    // A bad knob is a usage error naming it.
    let out = mcp_sim(&["sweep", "--around", &path, "--perturb", "cancel=soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cancel"));
    // The same search in JSON: every neighbour run is counted.
    let out = mcp_sim(&[
        "sweep", "--around", &path, "--seeds", "0..40", "--lane", "memory", "--format", "json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["runs"], 40);
    let found = v["found"].as_array().unwrap();
    assert_eq!(
        out.status.code(),
        Some(if found.is_empty() { 0 } else { 1 })
    );
    for f in found {
        assert!(
            f["replay"].as_str().unwrap().contains("--perturb-seed"),
            "{f:#}"
        );
    }
}
