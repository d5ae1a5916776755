//! How long it takes to see PyPI mcp-proxy 0.13.0's race again (in client mode its own answer
//! to a cancel can overtake upstream progress already inside it, which it then passes on:
//! `progress-after-completion`), two ways:
//!
//! - **by repetition**: `mcp-sim check-proxy --seed S` for S = 0, 1, 2, … until a run breaks
//!   the rule, as one would without a simulation;
//! - **from the session**: the committed check-proxy recording of seed 3, where the race did not
//!   fire, `mcp-sim fit` into a scenario, `sweep --around` it (1 ms tick, cancels moved) for the
//!   nearest neighbour that breaks the rule, and `check-proxy --scenario --perturb-seed N`
//!   until that neighbour's prediction is confirmed live.
//!
//! - **virtually**: `mcp-sim check-proxy --virtual --service-us 100000` over ten seeds at a
//!   time until one breaks the rule, both hops virtual, then that seed's replay line once,
//!   which must show it again (`docs/virtual.md`, "Intermediaries").
//!
//! The figure is the ratio of the first two wall times; the virtual way's is printed beside
//! them (`RACE_VIRTUAL_ONLY=1` runs it alone, in seconds rather than minutes). Both are on the wall clock, so each is
//! repeated `RACE_REPEATS` times (default 3) and the medians compared; a repetition that does
//! not fire within `RACE_MAX_SEEDS` seeds (default 100) counts with its time so far, and the
//! ratio is then a lower bound ("at least").
//!
//! Needs mcp-proxy 0.13.0 in `target/peers/` (the intermediaries test installs it:
//! `cargo test -p mcp-sim-cli --test intermediaries pypi_mcp_proxy_client_mode`).
//! Run: `cargo bench -p mcp-sim-cli --bench race`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const MCP_SIM: &str = env!("CARGO_BIN_EXE_mcp-sim");
const RACE: &str = "progress-after-completion";
/// The most seeds the repetition tries before giving up (`RACE_MAX_SEEDS`).
fn max_seeds() -> u64 {
    std::env::var("RACE_MAX_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

fn proxy_command(proxy: &Path) -> Vec<String> {
    vec![
        proxy.display().to_string(),
        "--transport".into(),
        "streamablehttp".into(),
        "{upstream-url}".into(),
    ]
}

fn broke_race(stdout: &[u8]) -> bool {
    let v: Value = serde_json::from_slice(stdout).unwrap_or(Value::Null);
    v["violations"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x["rule"] == RACE))
}

/// `check-proxy` over seeds from `first` until one breaks the rule: (seeds run, wall time).
/// `Err` holds the wall time of the seeds tried in vain.
fn by_repetition(proxy: &Path, first: u64) -> Result<(u64, Duration), Duration> {
    let start = Instant::now();
    for (n, seed) in (first..first + max_seeds()).enumerate() {
        let out = Command::new(MCP_SIM)
            .args(["check-proxy", "--format", "json", "--seed"])
            .arg(seed.to_string())
            .args(["--era", "auto", "--calls", "4", "--cancel-percent", "100"])
            .arg("--")
            .args(proxy_command(proxy))
            .output()
            .expect("mcp-sim runs");
        if broke_race(&out.stdout) {
            return Ok((n as u64 + 1, start.elapsed()));
        }
    }
    Err(start.elapsed())
}

/// `check-proxy --virtual` ten seeds at a time from `first` until one breaks the rule, then
/// that seed alone again: (the seed, wall time to find it, wall time of its replay).
fn virtually(proxy: &Path, first: u64) -> Option<(u64, Duration, Duration)> {
    let python = proxy.parent()?.join("python");
    let command = [
        python.display().to_string(),
        "-m".into(),
        "mcp_proxy".into(),
        "--transport".into(),
        "streamablehttp".into(),
        "{upstream-url}".into(),
    ];
    let schedule = [
        "--calls",
        "4",
        "--cancel-percent",
        "100",
        "--service-us",
        "100000",
    ];
    let start = Instant::now();
    let mut from = first;
    while from < first + max_seeds() {
        let out = Command::new(MCP_SIM)
            .args([
                "check-proxy",
                "--virtual",
                "--format",
                "json",
                "--jobs",
                "2",
            ])
            .args(["--seeds", &format!("{from}..{}", from + 10)])
            .args(schedule)
            .arg("--")
            .args(&command)
            .output()
            .expect("mcp-sim runs");
        let v: Value = serde_json::from_slice(&out.stdout).expect("the sweep's JSON");
        let found = v["failing"].as_array().and_then(|f| {
            f.iter().find(|x| {
                x["rules"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|y| y == RACE))
            })
        });
        if let Some(f) = found {
            let seed = f["seed"].as_u64()?;
            let found_in = start.elapsed();
            let t = Instant::now();
            let again = Command::new(MCP_SIM)
                .args(["check-proxy", "--virtual", "--seed", &seed.to_string()])
                .args(schedule)
                .arg("--")
                .args(&command)
                .output()
                .expect("mcp-sim runs");
            let text = String::from_utf8_lossy(&again.stdout);
            let digest = f["digest"].as_str()?;
            assert!(
                text.contains(RACE) && text.contains(digest),
                "seed {seed} replays with digest {digest}:\n{text}"
            );
            return Some((seed, found_in, t.elapsed()));
        }
        from += 10;
    }
    None
}

/// fit + sweep --around + confirmation: (attempts live, wall time of each step); `Err` holds
/// the wall time spent without a confirmation.
fn from_the_session(proxy: &Path, dir: &Path) -> Result<(u64, [Duration; 3]), Duration> {
    let start = Instant::now();
    tried(proxy, dir).ok_or_else(|| start.elapsed())
}

fn tried(proxy: &Path, dir: &Path) -> Option<(u64, [Duration; 3])> {
    let recording = repo().join("tests/recordings/pypi-mcp-proxy-0.13.0-client-mode-seed3.jsonl");
    let scenario = dir.join("scenario.json");
    let t = Instant::now();
    let fit = Command::new(MCP_SIM)
        .arg("fit")
        .arg(&recording)
        .arg("-o")
        .arg(&scenario)
        .output()
        .expect("mcp-sim fit runs");
    assert!(
        fit.status.success(),
        "{}",
        String::from_utf8_lossy(&fit.stderr)
    );
    let fitted = t.elapsed();
    let t = Instant::now();
    let sweep = Command::new(MCP_SIM)
        .args(["sweep", "--around"])
        .arg(&scenario)
        .args(["--seeds", "0..1000", "--jobs", "2", "--tick-ms", "1"])
        .args(["--perturb", "cancel=±2s", "--format", "json"])
        .output()
        .expect("mcp-sim sweep runs");
    let v: Value = serde_json::from_slice(&sweep.stdout).expect("sweep's JSON");
    let nearest = v["found"].as_array()?.iter().find(|f| {
        f["rules"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == RACE))
    })?;
    let seed = nearest["perturb_seed"].as_u64()?;
    let swept = t.elapsed();
    eprintln!(
        "  nearest neighbour: perturb seed {seed}: {}",
        nearest["changes"]
    );
    let t = Instant::now();
    let confirm = Command::new(MCP_SIM)
        .args(["check-proxy", "--scenario"])
        .arg(&scenario)
        .args([
            "--perturb-seed",
            &seed.to_string(),
            "--perturb",
            "cancel=±2s",
        ])
        .args(["--attempts", "41", "--cancel-scan-ms", "20"])
        .arg("--")
        .args(proxy_command(proxy))
        .output()
        .expect("mcp-sim check-proxy runs");
    let stderr = String::from_utf8_lossy(&confirm.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains(&format!("confirmed {RACE}")))?;
    let attempt: u64 = line
        .split("on attempt ")
        .nth(1)?
        .split(' ')
        .next()?
        .parse()
        .ok()?;
    eprintln!("  {line}");
    Some((attempt, [fitted, swept, t.elapsed()]))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let proxy = repo().join("target/peers/python-mcp-proxy-0.13.0/bin/mcp-proxy");
    if !proxy.exists() {
        eprintln!("race bench: SKIPPED: {} is not installed", proxy.display());
        return;
    }
    let repeats: u64 = std::env::var("RACE_REPEATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let virtual_wall = match virtually(&proxy, 0) {
        Some((seed, found, replay)) => {
            println!(
                "virtually: fired on seed {seed} after {:.1} s; its replay showed it again in {:.1} s",
                found.as_secs_f64(),
                replay.as_secs_f64()
            );
            Some(found)
        }
        None => {
            println!("virtually: not fired in seeds 0..{}", max_seeds());
            None
        }
    };
    if std::env::var_os("RACE_VIRTUAL_ONLY").is_some() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("mcp-sim-race-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let (mut live, mut bridged) = (Vec::new(), Vec::new());
    let mut unconfirmed = Vec::new();
    // A repetition that never fired bounds its time from below.
    let mut at_least = false;
    let mut first = 0;
    for r in 1..=repeats {
        match by_repetition(&proxy, first) {
            Ok((seeds, wall)) => {
                println!(
                    "repetition {r}: seeds {first}..{}: fired after {seeds} run(s), {:.1} s",
                    first + seeds,
                    wall.as_secs_f64()
                );
                first += seeds;
                live.push(wall);
            }
            Err(wall) => {
                println!(
                    "repetition {r}: not fired in seeds {first}..{}, {:.1} s",
                    first + max_seeds(),
                    wall.as_secs_f64()
                );
                first += max_seeds();
                at_least = true;
                live.push(wall);
            }
        }
        match from_the_session(&proxy, &dir) {
            Ok((attempts, [fit, sweep, confirm])) => {
                let total = fit + sweep + confirm;
                println!(
                    "from the session {r}: fit {:.2} s, sweep --around {:.1} s, confirmed on attempt {attempts} in {:.1} s: {:.1} s",
                    fit.as_secs_f64(),
                    sweep.as_secs_f64(),
                    confirm.as_secs_f64(),
                    total.as_secs_f64()
                );
                bridged.push(total);
            }
            Err(wall) => {
                println!(
                    "from the session {r}: not confirmed, {:.1} s",
                    wall.as_secs_f64()
                );
                unconfirmed.push(wall);
            }
        }
    }
    let bound = if at_least { "at least " } else { "" };
    let a = median(live);
    if let Some(v) = virtual_wall {
        println!(
            "virtually {:.1} s against by repetition {bound}{:.1} s: a ratio of {bound}{:.0}",
            v.as_secs_f64(),
            a.as_secs_f64(),
            a.as_secs_f64() / v.as_secs_f64()
        );
        if bridged.is_empty() {
            let u = median(unconfirmed);
            println!(
                "virtually against from the session (not confirmed in {:.1} s): a ratio of at least {:.0}",
                u.as_secs_f64(),
                u.as_secs_f64() / v.as_secs_f64()
            );
        }
    }
    if bridged.is_empty() {
        println!("ratio of the live ways: not measured (the neighbour was never confirmed)");
        return;
    }
    let b = median(bridged);
    if let Some(v) = virtual_wall {
        println!(
            "virtually against from the session: a ratio of {:.0}",
            b.as_secs_f64() / v.as_secs_f64()
        );
    }
    println!(
        "median: by repetition {bound}{:.1} s, from the session {:.1} s; ratio {bound}{:.1}",
        a.as_secs_f64(),
        b.as_secs_f64(),
        a.as_secs_f64() / b.as_secs_f64()
    );
}
