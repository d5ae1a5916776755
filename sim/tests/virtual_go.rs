//! Real Go servers inside the simulation: the go-sdk v1.8.0 server of `tests/peers/go/server`
//! runs under the virtual clock through its test glue (`server/virtual_test.go`, on
//! `sim/go/peer`: a testing/synctest bubble per run). It must give its live baselines in both
//! eras on stdio with the same digests on every run, each run checked twice (`--verify`), and
//! a failing seed's replay must reprint its digest. Over Streamable HTTP (each request a call
//! of the SDK's handler in the bubble) go-sdk's stateless handler and mcp-go's give their live
//! verdicts in 2026-07-28. mcp-go v1.2.1 cannot serve stdio in a bubble (its stdio session is
//! a package-level value made outside it): it must come out `not-replayable`, naming why,
//! never a verdict.
//!
//! The Go peers install themselves on first use (`common::peers`); without `go` the tests
//! skip, or fail under `CI=true`.

mod common;

use common::peers::go_peers;
use common::virtual_sweep::{
    assert_all_judged, assert_caught_and_replayed, baseline, rules, sweep,
};

const SLOW: &str = r#"{"steps":5,"step_ms":1000}"#;

#[test]
fn go_sdk_server_gives_its_live_baselines_in_both_eras_and_replays() {
    let Some(peers) = go_peers() else { return };
    let test = peers.virtual_test.display().to_string();
    let server = [test.as_str(), "-test.run", "TestMCPSimVirtual"];
    let flags = ["--seeds", "0..40", "--args", SLOW, "--verify"];
    let (code, first) = sweep(&flags, &server, &[]);
    assert_eq!(code, 1, "a MUST in 2026-07-28: {first:#}");
    assert_eq!(
        rules(&first),
        baseline("go-sdk-server-stdio-modern.txt"),
        "{first:#}"
    );
    assert_eq!(first["eras"]["2026-07-28"], 40, "{first:#}");
    assert!(first.get("not_replayable").is_none(), "{first:#}");
    let (_, second) = sweep(&flags, &server, &[]);
    assert_eq!(first["traces"], second["traces"], "the same digests");
    assert_caught_and_replayed(&first, "response-after-cancel");
    let legacy = [
        "--seeds", "0..20", "--args", SLOW, "--era", "legacy", "--verify",
    ];
    let (code, totals) = sweep(&legacy, &server, &[]);
    assert_eq!(code, 0, "a SHOULD in the legacy era: {totals:#}");
    assert_eq!(
        rules(&totals),
        baseline("go-sdk-server-stdio-legacy.txt"),
        "{totals:#}"
    );
    assert_all_judged(&totals);
}

#[test]
fn go_sdk_and_mcp_go_http_servers_give_their_live_baselines_in_2026_07_28() {
    let Some(peers) = go_peers() else { return };
    let test = peers.virtual_test.display().to_string();
    let server = [test.as_str(), "-test.run", "TestMCPSimVirtual"];
    let flags = [
        "--transport",
        "http",
        "--seeds",
        "0..12",
        "--args",
        SLOW,
        "--verify",
    ];
    for (sdk, options, baseline_file) in [
        (
            "go-sdk",
            "stateless",
            "go-sdk-server-http-stateless-modern.txt",
        ),
        ("mcp-go", "", "mcp-go-server-http-modern.txt"),
    ] {
        let env = [("MCP_SIM_SERVER", sdk), ("MCP_SIM_HTTP_OPTIONS", options)];
        let (code, totals) = sweep(&flags, &server, &env);
        assert_eq!(rules(&totals), baseline(baseline_file), "{sdk}: {totals:#}");
        assert_eq!(totals["eras"]["2026-07-28"], 12, "{sdk}: {totals:#}");
        let unreplayable = totals["not_replayable"].as_array().map_or(0, Vec::len);
        if sdk == "go-sdk" {
            assert_eq!(code, 1, "{sdk}: {totals:#}");
            assert_eq!(unreplayable, 0, "{sdk}: {totals:#}");
        } else {
            // mcp-go queues its progress apart from its answer, so both fall due at one instant
            // on the last step, in two goroutines. On one processor (the shim's `GOMAXPROCS=1`)
            // they almost always wake in one order: 0 of 180 seeds differed on an idle machine,
            // 1 to 3 of 60 under a load of 7 on two cores (on several processors, half the
            // seeds differed). Running each seed twice shows such a seed: its live race, never
            // a verdict here.
            assert!(code == 1 || code == 3, "{sdk}: {totals:#}");
            assert!(unreplayable < 6, "{sdk}: most runs hold: {totals:#}");
            for run in totals["not_replayable"].as_array().into_iter().flatten() {
                let why = run["why"].as_str().unwrap_or_default();
                assert!(why.contains("two runs of the seed differ"), "{why}");
            }
        }
    }
}

#[test]
fn mcp_go_cannot_settle_in_a_bubble_and_says_so() {
    let Some(peers) = go_peers() else { return };
    let test = peers.virtual_test.display().to_string();
    let server = [test.as_str(), "-test.run", "TestMCPSimVirtual"];
    let env = [
        ("MCP_SIM_SERVER", "mcp-go"),
        ("MCP_SIM_THREAD_BOUND_S", "1"),
    ];
    let (code, totals) = sweep(&["--seeds", "0..2", "--args", SLOW], &server, &env);
    assert_eq!(code, 3, "not-replayable, never a verdict: {totals:#}");
    assert!(rules(&totals).is_empty(), "{totals:#}");
    let runs = totals["not_replayable"].as_array().expect("not_replayable");
    assert_eq!(runs.len(), 2, "{totals:#}");
    for run in runs {
        let why = run["why"].as_str().unwrap_or_default();
        assert!(why.contains("did not settle"), "{why}");
    }
}

#[test]
fn go_commands_are_read_strictly() {
    for (args, says) in [
        (vec!["go", "run", "."], "peer.Serve"),
        (vec!["go", "test", "./server"], "peer.Serve"),
        (vec!["no/such.test", "-test.run", "X"], "no such file"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
            .args(["sweep", "--virtual", "--"])
            .args(&args)
            .output()
            .expect("mcp-sim runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn go_test_commands_are_built_and_run_as_their_binaries() {
    let Some(peers) = go_peers() else { return };
    let test = peers.virtual_test.display().to_string();
    let dir = peers
        .virtual_test
        .parent()
        .and_then(|b| b.parent())
        .expect("the install folder");
    let peers_dir = dir.parent().expect("the peers folder");
    let flags = ["--seeds", "0..4", "--args", SLOW];
    let (_, built) = sweep(&flags, &[&test, "-test.run", "TestMCPSimVirtual"], &[]);
    // `go test PKG -run NAME` from the module's folder, with the install's Go settings.
    let report = std::env::temp_dir().join(format!("mcp-sim-go-test-{}", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(["sweep", "--virtual", "--format", "json", "--report-dir"])
        .arg(&report)
        .args(flags)
        .args(["--", "go", "test", "./server", "-run", "TestMCPSimVirtual"])
        .current_dir(dir.join("src"))
        .env("GOMODCACHE", peers_dir.join("go-mod"))
        .env("GOCACHE", peers_dir.join("go-build"))
        .env("GOPATH", peers_dir.join("go-path"))
        .env("GOFLAGS", "-mod=readonly -modcacherw -buildvcs=false")
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .output()
        .expect("mcp-sim runs");
    let totals: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    assert_eq!(totals["traces"], built["traces"], "{totals:#}");
    let _ = std::fs::remove_dir_all(&report);
}
