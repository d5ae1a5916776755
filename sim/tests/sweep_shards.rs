//! `mcp-sim sweep --shard K/N --format json` and `mcp-sim merge`: the shards of a range are
//! disjoint, and merged they give what one run over the whole range gives (wall time aside).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn mcp_sim(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-sim"))
        .args(args)
        .output()
        .expect("mcp-sim runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A sweep's JSON output, without what depends on the machine or on sharding.
fn comparable(json: &str) -> Value {
    let mut v: Value = serde_json::from_str(json.trim()).expect("one JSON object");
    let o = v.as_object_mut().expect("an object");
    o.remove("wall_ms");
    o.remove("shards");
    v
}

fn shards_merge_to_the_whole(name: &str, extra: &[&str], expect_code: i32) {
    let dir = std::env::temp_dir().join(format!("mcp-sim-shards-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Reports of failing runs go to the temporary folder too, the same for every shard, so the
    // merged entries name the folders the whole range names.
    let reports = dir.join("reports");
    let reports = reports.to_str().expect("a UTF-8 temporary folder");
    let base = [
        "sweep",
        "--seeds",
        "0..45",
        "--lane",
        "memory",
        "--format",
        "json",
        "--report-dir",
        reports,
    ];
    let mut whole_args = base.to_vec();
    whole_args.extend_from_slice(extra);
    let (code, whole) = mcp_sim(&whole_args);
    assert_eq!(code, expect_code, "{whole}");
    let mut files: Vec<PathBuf> = Vec::new();
    let mut seeds_seen = 0;
    for k in 1..=3 {
        let shard = format!("{k}/3");
        let mut args = whole_args.clone();
        args.extend_from_slice(&["--shard", &shard]);
        let (_, out) = mcp_sim(&args);
        seeds_seen += comparable(&out)["runs"].as_u64().expect("runs");
        let path = dir.join(format!("shard-{k}.json"));
        std::fs::write(&path, out).expect("write shard");
        files.push(path);
    }
    assert_eq!(seeds_seen, 45, "the shards cover the range once");
    let mut merge_args: Vec<String> = vec!["merge".into(), "--format".into(), "json".into()];
    merge_args.extend(files.iter().map(|p| p.display().to_string()));
    let merge_args: Vec<&str> = merge_args.iter().map(String::as_str).collect();
    let (code, merged) = mcp_sim(&merge_args);
    assert_eq!(code, expect_code, "{merged}");
    assert_eq!(comparable(&merged), comparable(&whole));

    // A missing shard is no summary of the range.
    let (code, _) = mcp_sim(&merge_args[..merge_args.len() - 1]);
    assert_eq!(code, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reference_shards_merge_to_the_whole_range() {
    shards_merge_to_the_whole("reference", &[], 0);
}

#[test]
fn failing_runs_and_their_replay_lines_survive_the_merge() {
    shards_merge_to_the_whole("mutant", &["--mutant", "respond_after_cancel"], 1);
}

#[test]
fn shards_of_different_sweeps_do_not_merge() {
    let dir = std::env::temp_dir().join(format!("mcp-sim-shards-x-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let a = dir.join("a.json");
    let b = dir.join("b.json");
    let (_, out) = mcp_sim(&[
        "sweep", "--seeds", "0..4", "--lane", "memory", "--format", "json", "--shard", "1/2",
    ]);
    std::fs::write(&a, out).expect("write");
    let (_, out) = mcp_sim(&[
        "sweep",
        "--seeds",
        "0..4",
        "--lane",
        "memory",
        "--transport",
        "stdio",
        "--format",
        "json",
        "--shard",
        "2/2",
    ]);
    std::fs::write(&b, out).expect("write");
    let (code, _) = mcp_sim(&["merge", &a.display().to_string(), &b.display().to_string()]);
    assert_eq!(code, 2);
    let (code, _) = mcp_sim(&["sweep", "--seeds", "0..4", "--shard", "3/2"]);
    assert_eq!(code, 2, "K above N is a usage error");
    let _ = std::fs::remove_dir_all(&dir);
}
