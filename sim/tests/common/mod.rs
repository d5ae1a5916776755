//! What the tests against real peers share: where the repository is, and the peers themselves
//! (installed on first use, see [`peers`]).

pub mod peers;

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}
