//! What the tests against real peers share: where the repository is, the peers themselves
//! (installed on first use, see [`peers`]), the probe's JSON verdict ([`probe`]), an
//! intermediary's ([`check_proxy`]) and clients run against `serve` ([`serve`]).

pub mod check_proxy;
pub mod peers;
pub mod probe;
pub mod serve;
pub mod virtual_sweep;

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The seeds each case against a real peer runs: `MCP_SIM_PEER_SEEDS` (`A..B` or a list,
/// default `1`).
#[allow(dead_code)]
pub fn peer_seeds() -> Vec<String> {
    let spec = std::env::var("MCP_SIM_PEER_SEEDS").unwrap_or_else(|_| "1".into());
    match spec.split_once("..") {
        Some((a, b)) => {
            let (a, b): (u64, u64) = (a.parse().expect("seed"), b.parse().expect("seed"));
            (a..b).map(|s| s.to_string()).collect()
        }
        None => spec.split(',').map(|s| s.trim().to_string()).collect(),
    }
}
