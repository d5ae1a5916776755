//! `mcp-sim serve --from`: a real server's recorded session played back to real clients.
//!
//! The TypeScript SDK v1 1.32.2 client's session with the Python SDK 1.30.0 server is recorded
//! with `mcp-sim record` (stdio, legacy era: three calls, the second given up on at the
//! client's 1.5 s timeout and cancelled, and that server answers the cancel with code 0,
//! python-sdk #2480). The recording is then the server for:
//!
//! - the same client: the same outcomes, the recorded server's answer to the cancel played back
//!   (`response-after-cancel`, its bug) with `--on-cancel recorded`, and gone with `correct`;
//! - the Python SDK 1.30.0 client with the same calls: nothing the mock caused, its own pinned
//!   finding (`declared-deadline`: it sends no cancel at its timeout); its `tools/list`, which
//!   the recorded session never made, answered by the reference (`--on-miss reference`);
//! - a request the recording does not hold: answered -32603, naming the closest recorded call
//!   and where it differs.

mod common;

use std::path::Path;
use std::process::Command;

use common::peers::{node_ts_sdk_v1, python_sdk_v1, ts_v1_client, NodeSdk};
use common::repo;
use common::serve::*;
use mcp_sim::trace::{EventKind, Origin, Side};

/// Three calls, the second given up on at 1.5 s (as `legacy_peers.rs`'s plan).
const TS_PLAN: &str = r#"[{"steps":3,"step_ms":100,"options":{"timeout":1500}},{"steps":25,"step_ms":200,"options":{"timeout":1500}},{"steps":2,"step_ms":100,"options":{"timeout":1500}}]"#;
/// The first two calls for the Python SDK 1.30.0 client, and a last one the recording does not
/// hold, long enough (3 s) that the session is still open past the second call's deadline and
/// the grace window (as `legacy_peers.rs`'s plan).
const PY1_PLAN: &str = r#"[{"steps":3,"step_ms":100,"timeout_ms":1500},{"steps":25,"step_ms":200,"timeout_ms":1500},{"steps":15,"step_ms":200,"timeout_ms":10000}]"#;

/// Records the TS SDK v1 client's session with the Python SDK 1.30.0 server into `dir`.
fn record(sdk: &NodeSdk, py: &Path, dir: &Path) -> std::path::PathBuf {
    let trace = dir.join("recording.jsonl");
    let out = ts_v1_client(sdk, TS_PLAN)
        .args(["--", MCP_SIM, "record", "--trace"])
        .arg(&trace)
        .arg("--")
        .arg(py)
        .arg(repo().join("tests/peers/python1/slow_server.py"))
        .output()
        .expect("the client runs");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    read_when_written(&trace);
    trace
}

/// The server's sends of the case, by origin: (recorded, extrapolated).
fn origins(case: &Case) -> (usize, usize) {
    let mut n = (0, 0);
    for e in &case.trace.events {
        if let (Side::Server, EventKind::Send(w)) = (e.side, &e.kind) {
            match w.origin {
                Some(Origin::Recorded { .. }) => n.0 += 1,
                Some(Origin::Extrapolated) => n.1 += 1,
                None => {}
            }
        }
    }
    n
}

#[test]
fn a_recorded_python_sdk_1_server_played_back_to_real_clients() {
    let (Some(sdk), Some(py)) = (node_ts_sdk_v1(), python_sdk_v1()) else {
        return;
    };
    let dir = scratch("serve-from-record");
    let recording = record(&sdk, &py, &dir);
    let from = recording.display().to_string();

    // The same client, the recorded server's answer to the cancel played back.
    let dir = scratch("serve-from-ts-recorded");
    let args = ["--from", from.as_str(), "--on-cancel", "recorded"];
    let case = against_stdio_serve(ts_v1_client(&sdk, TS_PLAN), &dir, "timeout=1500", &args);
    assert_eq!(case.report["era"], "2025-11-25", "{}", case.describe());
    assert_eq!(
        case.outcome_names(),
        ["result", "timeout", "result"],
        "{}",
        case.describe()
    );
    assert_eq!(
        case.rules(),
        ["response-after-cancel"],
        "{}",
        case.describe()
    );
    let (recorded, extrapolated) = origins(&case);
    assert!(recorded >= 3 && extrapolated == 0, "{}", case.describe());
    // Counted in the verdict: the three calls matched, every message sent as recorded.
    let counts = &case.report["playback"];
    assert_eq!(counts["matched"], 3, "{}", case.describe());
    assert_eq!(counts["missed"], 0, "{}", case.describe());
    assert_eq!(counts["recorded"], recorded, "{}", case.describe());
    assert_eq!(counts["extrapolated"], 0, "{}", case.describe());

    // Stopping at the cancel, as a correct server does: the bug is gone.
    let dir = scratch("serve-from-ts-correct");
    let args = ["--from", from.as_str(), "--on-cancel", "correct"];
    let case = against_stdio_serve(ts_v1_client(&sdk, TS_PLAN), &dir, "timeout=1500", &args);
    assert_eq!(
        case.outcome_names(),
        ["result", "timeout", "result"],
        "{}",
        case.describe()
    );
    assert!(case.rules().is_empty(), "{}", case.describe());

    // Another client with two of the calls, which also lists the tools to check the results'
    // structure, and then makes a call the recording does not hold: both left to the
    // reference server (`--on-miss reference`, their answers marked extrapolated). Only the
    // client's own finding.
    let dir = scratch("serve-from-py1");
    let mut client = Command::new(&py);
    client
        .arg(repo().join("tests/peers/python1/client.py"))
        .arg(PY1_PLAN);
    let args = ["--from", from.as_str(), "--on-miss", "reference"];
    let case = against_stdio_serve(client, &dir, "timeout=1500", &args);
    assert_eq!(
        case.outcome_names(),
        ["result", "timeout", "result"],
        "{}",
        case.describe()
    );
    assert_eq!(case.rules(), ["declared-deadline"], "{}", case.describe());
    let (recorded, extrapolated) = origins(&case);
    assert!(recorded >= 3 && extrapolated >= 1, "{}", case.describe());

    // A call the recording does not hold.
    let dir = scratch("serve-from-miss");
    let plan = r#"[{"steps":4,"step_ms":100,"options":{"timeout":1500}}]"#;
    let case = against_stdio_serve(
        ts_v1_client(&sdk, plan),
        &dir,
        "timeout=1500",
        &["--from", &from],
    );
    let answered = case
        .trace
        .events
        .iter()
        .find_map(|e| match (&e.side, &e.kind) {
            (Side::Server, EventKind::Send(w)) => w
                .msg
                .as_ref()
                .and_then(|m| m["error"]["message"].as_str().map(str::to_owned)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("an error answer: {}", case.describe()));
    assert!(
        answered.contains("differs at /arguments/steps"),
        "{answered}"
    );
}

/// The committed recording of the same session (`tests/recordings/`) served over Streamable
/// HTTP (`serve --from --http`) to the TS SDK v1 client's HTTP transport: the recorded
/// server's answer to the cancel goes out on the call's stream after the cancel's POST with
/// `recorded`, and not with `correct`.
#[test]
fn a_recording_served_over_http() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let from = repo().join("tests/recordings/python-sdk-1.30.0-stdio.jsonl");
    let from = from.display().to_string();
    for (on_cancel, rules) in [
        ("recorded", &["response-after-cancel"][..]),
        ("correct", &[]),
    ] {
        let dir = scratch(&format!("serve-from-http-{on_cancel}"));
        let mut args = serve_args(&dir, "timeout=1500");
        args.extend(
            [
                "--http",
                "127.0.0.1:0",
                "--from",
                &from,
                "--on-cancel",
                on_cancel,
            ]
            .map(String::from),
        );
        let (case, _) = against_listening(&args, "", ts_v1_client(&sdk, TS_PLAN), &dir);
        assert_eq!(case.report["era"], "2025-11-25", "{}", case.describe());
        assert_eq!(
            case.outcome_names(),
            ["result", "timeout", "result"],
            "{}",
            case.describe()
        );
        assert_eq!(case.rules(), rules, "{on_cancel}: {}", case.describe());
        assert_eq!(case.report["playback"]["matched"], 3, "{}", case.describe());
        let (recorded, extrapolated) = origins(&case);
        assert!(recorded >= 3 && extrapolated == 0, "{}", case.describe());
    }
}

/// The bug no record-and-replay tool shows, live: a client that drops its connection on an
/// answer to a request it cancelled (`tests/peers/dropping_client.mjs`, as claude-code
/// #51073) meets the recorded Python SDK 1.30.0 server's code-0 answer to its cancel with
/// `--on-cancel recorded`, and is caught (`race-not-graceful`: it dropped the call still
/// running); with `correct` the same client is clean.
#[test]
fn a_client_that_drops_its_connection_on_a_late_answer() {
    let Some(sdk) = node_ts_sdk_v1() else { return };
    let from = repo().join("tests/recordings/python-sdk-1.30.0-stdio.jsonl");
    let from = from.display().to_string();
    let client = || {
        let mut c = Command::new(&sdk.node);
        c.arg(repo().join("tests/peers/dropping_client.mjs"));
        c
    };
    for (on_cancel, rules, last) in [
        (
            "recorded",
            &["race-not-graceful", "response-after-cancel"][..],
            "dropped",
        ),
        ("correct", &[], "result"),
    ] {
        let dir = scratch(&format!("serve-from-dropping-{on_cancel}"));
        let args = ["--from", from.as_str(), "--on-cancel", on_cancel];
        let case = against_stdio_serve(client(), &dir, "timeout=1500", &args);
        assert_eq!(case.rules(), rules, "{on_cancel}: {}", case.describe());
        assert_eq!(
            case.outcome_names(),
            ["result", "cancelled", last],
            "{on_cancel}: {}",
            case.describe()
        );
    }
}
