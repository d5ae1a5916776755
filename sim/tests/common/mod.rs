//! What the tests against real peers share: where the repository is, the peers themselves
//! (installed on first use, see [`peers`]), the probe's JSON verdict ([`probe`]) and clients
//! run against `serve` ([`serve`]).

pub mod peers;
pub mod probe;
pub mod serve;

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}
