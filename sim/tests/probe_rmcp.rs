//! `mcp-sim probe` against rmcp 3.x as a real stdio process (`examples/rmcp_stdio_server.rs`,
//! which `cargo test --workspace` builds): a correct server stays clean, its cancels meet
//! running calls, and the barriers and the start-up check are answered.

mod common;

use std::path::PathBuf;

/// The example binary, next to this test's own build output.
fn rmcp_server() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let server = profile_dir.join("examples/rmcp_stdio_server");
    assert!(
        server.exists(),
        "{} is missing: `cargo test --workspace` builds it (or `cargo build --example \
         rmcp_stdio_server`)",
        server.display()
    );
    server
}

#[test]
fn rmcp_over_stdio_is_clean_and_exercised() {
    let server = rmcp_server();
    for seed in ["1", "2"] {
        let (code, v) = common::probe::probe_json(
            &[
                "--seed",
                seed,
                "--calls",
                "6",
                "--args",
                r#"{"steps":5,"step_ms":150}"#,
                "--cancel-percent",
                "50",
                "--drain-ms",
                "600",
            ],
            &[&server.display().to_string()],
        );
        assert_eq!(code, 0, "seed {seed}: {v:#}");
        let c = &v["coverage"];
        assert!(c["cancels"].as_u64() > Some(0), "seed {seed}: {v:#}");
        assert_eq!(
            c["cancels"], c["cancels_met_running_work"],
            "seed {seed}: {v:#}"
        );
        assert_eq!(
            c["other_requests"], c["other_answered"],
            "seed {seed}: {v:#}"
        );
    }
}
