//! What the tests against real peers share: where the repository is, the peers themselves
//! (installed on first use, see [`peers`]) and the probe's JSON verdict ([`probe`]).

pub mod peers;
pub mod probe;

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}
