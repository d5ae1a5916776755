//! What the tests against the Python SDK share: where the repository is, and whether the SDK
//! is there to test against.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Whether a test against the Python SDK should run: false when `MCP_SIM_SKIP_PYTHON=1`;
/// otherwise it panics, naming the install command, unless python3 can import `modules`
/// (comma-separated, as in a Python `import` statement).
pub fn python_sdk_ready(modules: &str) -> bool {
    if std::env::var("MCP_SIM_SKIP_PYTHON").is_ok_and(|v| v == "1") {
        eprintln!("MCP_SIM_SKIP_PYTHON=1: skipping a test against the Python SDK");
        return false;
    }
    let check = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output();
    match check {
        Ok(out) if out.status.success() => true,
        Ok(out) => panic!(
            "python3 cannot import {modules}: run `python3 -m pip install mcp==2.3.0` \
             (or set MCP_SIM_SKIP_PYTHON=1 to skip)\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "python3 cannot be run ({e}): install Python 3 and `python3 -m pip install mcp==2.3.0` \
             (or set MCP_SIM_SKIP_PYTHON=1 to skip)"
        ),
    }
}
