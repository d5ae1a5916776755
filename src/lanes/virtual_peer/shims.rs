//! The shims, shipped inside the crate and written next to the system's temporary files on
//! first use, each in a folder named by its content so that builds of different versions
//! never share one. A folder is made under another name and renamed into place whole, so a
//! run never sees half of one, whichever of several concurrent runs comes first.
//!
//! The Go shim is a package of the server's own module (`sim/go/peer`), so a Go server's
//! test binary is built from the user's package (`go test -c`) and run as it is.
//!
//! The Node.js shim runs its program's clock on @sinonjs/fake-timers (pinned, with its lock
//! file): that folder is filled by `npm ci` on first use, from the npm registry. The npm
//! package of mcp-sim ships the shim with that dependency installed and names it in
//! `MCP_SIM_NODE_SHIM`, which is then used as it is.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::VirtualError;

/// The Python shim (the same file is `mcp_sim.virtual_peer` in the wheel).
const PYTHON_SHIM: &str = include_str!("../../../sim/python/mcp_sim/virtual_peer.py");
/// The Node.js shim (the same file is `virtual-peer.mjs` in the npm package).
const NODE_SHIM: &str = include_str!("../../../sim/npm/mcp-sim/virtual-peer.mjs");
/// What the Node.js shim needs beside it, pinned.
const NODE_PACKAGE: &str = include_str!("../../../sim/npm/shim/package.json");
const NODE_LOCK: &str = include_str!("../../../sim/npm/shim/package-lock.json");

/// The Python shim's file.
pub(super) fn python() -> Result<PathBuf, VirtualError> {
    let dir = folder("mcp-sim-shim", &[PYTHON_SHIM], |dir| {
        write(dir, "mcp_sim_virtual_peer.py", PYTHON_SHIM)
    })?;
    Ok(dir.join("mcp_sim_virtual_peer.py"))
}

/// The Node.js shim's file, with its dependencies installed beside it.
pub(super) fn node() -> Result<PathBuf, VirtualError> {
    if let Some(given) = std::env::var_os("MCP_SIM_NODE_SHIM") {
        let path = PathBuf::from(given);
        return match path.is_file() {
            true => Ok(path),
            false => Err(VirtualError::Start(format!(
                "MCP_SIM_NODE_SHIM names {}, which is not a file",
                path.display()
            ))),
        };
    }
    let dir = folder(
        "mcp-sim-node-shim",
        &[NODE_SHIM, NODE_PACKAGE, NODE_LOCK],
        |dir| {
            write(dir, "virtual-peer.mjs", NODE_SHIM)?;
            write(dir, "package.json", NODE_PACKAGE)?;
            write(dir, "package-lock.json", NODE_LOCK)?;
            npm_ci(dir)
        },
    )?;
    Ok(dir.join("virtual-peer.mjs"))
}

/// `npm ci` in `dir`, without the packages' scripts (the pinned ones have none to run).
fn npm_ci(dir: &Path) -> Result<(), VirtualError> {
    let out = Command::new("npm")
        .args([
            "ci",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ])
        .current_dir(dir)
        .output()
        .map_err(|e| {
            VirtualError::Start(format!(
                "the Node.js shim needs npm to install its fake timers: {e}"
            ))
        })?;
    if out.status.success() {
        return Ok(());
    }
    Err(VirtualError::Start(format!(
        "installing the Node.js shim's fake timers (npm ci in {}) failed ({}):\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim_end()
    )))
}

/// The folder `PREFIX-DIGEST` for `contents`, made by `fill` when it is not there yet.
fn folder(
    prefix: &str,
    contents: &[&str],
    fill: impl FnOnce(&Path) -> Result<(), VirtualError>,
) -> Result<PathBuf, VirtualError> {
    let digest = contents
        .iter()
        .flat_map(|c| c.bytes())
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    let tmp = std::env::temp_dir();
    let dir = tmp.join(format!("{prefix}-{digest:016x}"));
    if dir.is_dir() {
        return Ok(dir);
    }
    let fail = |e: std::io::Error| {
        VirtualError::Start(format!("writing the shim in {}: {e}", dir.display()))
    };
    let partial = tmp.join(format!(
        "{prefix}-{digest:016x}.partial-{}-{}",
        std::process::id(),
        unique()
    ));
    std::fs::create_dir_all(&partial).map_err(fail)?;
    if let Err(e) = fill(&partial) {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    if std::fs::rename(&partial, &dir).is_err() {
        // Another run put its folder in place first: the same content.
        let _ = std::fs::remove_dir_all(&partial);
        if !dir.is_dir() {
            return Err(fail(std::io::Error::other(
                "the folder could not be renamed",
            )));
        }
    }
    Ok(dir)
}

/// A number no other call in this process returns.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), VirtualError> {
    std::fs::write(dir.join(name), text)
        .map_err(|e| VirtualError::Start(format!("writing {}: {e}", dir.join(name).display())))
}

/// The test binary of the Go package `pkg` (in the current folder), built with `go test -c`
/// once per mcp-sim process and package; the Go build cache makes a later build quick.
pub(super) fn go_test_binary(pkg: &str) -> Result<PathBuf, VirtualError> {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(pkg) {
        return Ok(path.clone());
    }
    let dir = std::env::temp_dir().join(format!(
        "mcp-sim-go-peer-{}-{}",
        std::process::id(),
        unique()
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| VirtualError::Start(format!("making {}: {e}", dir.display())))?;
    let binary = dir.join("peer.test");
    let out = Command::new("go")
        .args(["test", "-c", "-o"])
        .arg(&binary)
        .arg(pkg)
        .output()
        .map_err(|e| VirtualError::Start(format!("go cannot be run: {e}")))?;
    if !out.status.success() || !binary.is_file() {
        return Err(VirtualError::Start(format!(
            "building the Go test (go test -c {pkg}) failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        )));
    }
    built.insert(pkg.to_string(), binary.clone());
    Ok(binary)
}
