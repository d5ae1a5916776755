//! Real peers from other ecosystems, installed on first use into the build folder at pinned
//! versions, so that a fresh clone needs nothing installed by hand beyond the interpreters.
//!
//! - Python SDK: a virtual environment `<target>/peers/python-mcp-2.3.0/`, made with
//!   `python3 -m venv` and filled by `pip install -r tests/peers/python-requirements.txt`
//!   (`mcp==2.3.0`). Tests run the servers with that venv's python.
//! - Python SDK 1.x (legacy era only): `<target>/peers/python-mcp-1.30.0/`, the same way from
//!   `tests/peers/python1-requirements.txt` (`mcp==1.30.0`).
//! - TypeScript SDK v2: `<target>/peers/node-ts-sdk-2.4.0/`, where `tests/peers/ts/package.json`
//!   and `package-lock.json` (`@modelcontextprotocol/server` 2.4.0, `zod` 4.6.7) are copied and
//!   installed with `npm ci`; the scripts of `tests/peers/ts/` are copied beside them so
//!   that Node.js resolves the SDK from that folder's `node_modules`.
//! - TypeScript SDK v1 and `server-everything` (legacy era only):
//!   `<target>/peers/node-ts-sdk-v1-1.32.2/`, the same way from `tests/peers/ts-v1/`
//!   (`@modelcontextprotocol/sdk` 1.32.2, `@modelcontextprotocol/server-everything` 2026.8.31).
//!
//! - PyPI `mcp-proxy` 0.13.0 (an intermediary): `<target>/peers/python-mcp-proxy-0.13.0/`,
//!   a venv from `tests/peers/mcp-proxy-requirements.txt` (every package pinned).
//! - npm `mcp-proxy` 6.7.19 (an intermediary): `<target>/peers/node-mcp-proxy-npm-6.7.19/`,
//!   from `tests/peers/mcp-proxy-npm/`.
//! - FastMCP for TypeScript (`fastmcp` 4.20.16, on the TypeScript SDK v1, its HTTP front npm
//!   `mcp-proxy`): `<target>/peers/node-fastmcp-4.20.16/`, from `tests/peers/fastmcp/`.
//!
//! - The official conformance suite, `@modelcontextprotocol/conformance` 0.2.0-alpha.12, with
//!   the Node.js 22 it needs (npm `node` 22.23.3, whose install script fetches that
//!   platform's binary from the npm registry): `<target>/peers/node-conformance-0.2.0-alpha.12/`,
//!   from `tests/peers/conformance/`.
//!
//! - The official Go SDK (`github.com/modelcontextprotocol/go-sdk` v1.8.0) and mark3labs
//!   `mcp-go` v1.2.1: `<target>/peers/go-sdks-v1.8.0-v1.2.1/`, where the module of
//!   `tests/peers/go/` (its `go.mod` and committed `go.sum` pin both) is built with the
//!   machine's `go` (1.25 or later) into `bin/server` and `bin/client`; the modules come from
//!   the Go module proxy into `<target>/peers/go-mod/`, checked against `go.sum`, and the
//!   build cache is `<target>/peers/go-build/`. The server's test with the virtual-peer glue
//!   (`server/virtual_test.go`, on this repository's `sim/go/peer`, copied beside it and named
//!   in go.mod's `replace`) is built into `bin/virtual.test`.
//!
//! - The Java SDK (`io.modelcontextprotocol.sdk:mcp` 2.2.0, with an embedded Jetty 12 for its
//!   servlet transports): `<target>/peers/java-sdk-2.2.0/`, where the Maven project of
//!   `tests/peers/java/` (its `pom.xml` pins every dependency and plugin) is copied and built
//!   with the machine's `mvn` and Java 17 or later into `build/classes`, with the run-time class
//!   path in `build/classpath.txt`; the artifacts come from Maven Central into the local
//!   repository `<target>/peers/maven-repo/`.
//!
//! `<target>` is the build folder the test binaries were built into (`CARGO_TARGET_DIR` or
//! `target/`). Each install runs once, under an exclusive lock on `<target>/peers/NAME.lock`
//! (concurrent test threads and binaries wait for it), and ends by writing `NAME/.installed`,
//! a stamp naming what was installed: a stamp that does not match (another interpreter, an
//! edited requirements or lock file, an interrupted install) starts the install afresh. A
//! failed install fails the test with the command and its output.
//!
//! When an interpreter is missing (`python3`, or its `venv`/`ensurepip` modules; `node` 20 or
//! later, or `npm`; `go`; `java` 17 or later, or `mvn`), the test prints why and passes without
//! running, except when the environment has `CI=true`: then it fails. `MCP_SIM_SKIP_PYTHON=1`,
//! `MCP_SIM_SKIP_NODE=1`, `MCP_SIM_SKIP_GO=1` and `MCP_SIM_SKIP_JAVA=1` skip the tests of one
//! ecosystem on purpose.

// Each test binary uses the peers it needs.
#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::repo;

/// The pinned Python SDK (PyPI `mcp`), as in `tests/peers/python-requirements.txt`.
pub const PYTHON_MCP_VERSION: &str = "2.3.0";
/// The pinned Python SDK 1.x, as in `tests/peers/python1-requirements.txt`.
pub const PYTHON_MCP_V1_VERSION: &str = "1.30.0";
/// The pinned TypeScript SDK (npm `@modelcontextprotocol/server`), as in
/// `tests/peers/ts/package.json`.
pub const TS_SDK_VERSION: &str = "2.4.0";
/// The pinned TypeScript SDK v1 (npm `@modelcontextprotocol/sdk`), as in
/// `tests/peers/ts-v1/package.json`.
pub const TS_SDK_V1_VERSION: &str = "1.32.2";
/// The pinned `@modelcontextprotocol/server-everything`, as in `tests/peers/ts-v1/package.json`.
pub const SERVER_EVERYTHING_VERSION: &str = "2026.8.31";

/// The pinned PyPI `mcp-proxy`, as in `tests/peers/mcp-proxy-requirements.txt`.
pub const PYPI_MCP_PROXY_VERSION: &str = "0.13.0";
/// The pinned npm `mcp-proxy`, as in `tests/peers/mcp-proxy-npm/package.json`.
pub const NPM_MCP_PROXY_VERSION: &str = "6.7.19";
/// The pinned `mcp-remote` (the stdio-to-remote-HTTP bridge desktop hosts use), as in
/// `tests/peers/mcp-remote/package.json`.
pub const MCP_REMOTE_VERSION: &str = "0.15.1";
/// The pinned `supergateway` (a stdio/HTTP gateway in both directions), as in
/// `tests/peers/supergateway/package.json`.
pub const SUPERGATEWAY_VERSION: &str = "4.0.0";
/// The pinned maturin (the Python package's build tool), as in
/// `tests/peers/maturin-requirements.txt`.
pub const MATURIN_VERSION: &str = "1.16.0";
/// The pinned pytest a user's fresh venv gets, as in
/// `tests/peers/packages/pytest-requirements.txt`.
pub const PYTEST_VERSION: &str = "9.2.0";
/// The pinned conformance suite, as in `tests/peers/conformance/package.json`.
pub const CONFORMANCE_VERSION: &str = "0.2.0-alpha.12";

/// The pinned official Go SDK, as in `tests/peers/go/go.mod`.
pub const GO_SDK_VERSION: &str = "v1.8.0";
/// The pinned mark3labs `mcp-go`, as in `tests/peers/go/go.mod`.
pub const MCP_GO_VERSION: &str = "v1.2.1";
/// The pinned Java SDK (Maven `io.modelcontextprotocol.sdk:mcp`), as in
/// `tests/peers/java/pom.xml`.
pub const JAVA_SDK_VERSION: &str = "2.2.0";
/// The pinned FastMCP for TypeScript (npm `fastmcp`), as in `tests/peers/fastmcp/package.json`.
pub const FASTMCP_VERSION: &str = "4.20.16";

const STAMP: &str = ".installed";

/// The build folder's `peers/` folder.
pub fn peers_dir() -> PathBuf {
    // The binary sits in `<target>/<profile>/` (or `<target>/<triple>/<profile>/`).
    let bin = Path::new(env!("CARGO_BIN_EXE_mcp-sim"));
    let target = bin
        .parent()
        .and_then(Path::parent)
        .expect("the mcp-sim binary lies in a profile folder of the build folder");
    target.join("peers")
}

/// The venv python with the Python SDK installed, or `None` when the test is to be skipped
/// (the reason is printed; with `CI=true` it panics instead).
pub fn python_sdk() -> Option<PathBuf> {
    python_venv(
        "python-requirements.txt",
        ("mcp", PYTHON_MCP_VERSION),
        "import mcp.server.mcpserver, uvicorn",
    )
}

/// The venv python with the Python SDK 1.x installed (legacy era only), or `None` as for
/// [`python_sdk`].
pub fn python_sdk_v1() -> Option<PathBuf> {
    python_venv(
        "python1-requirements.txt",
        ("mcp", PYTHON_MCP_V1_VERSION),
        "import mcp.server.fastmcp, mcp.client.stdio",
    )
}

/// The folder of a venv with PyPI `mcp-proxy` installed (its `bin/mcp-proxy` the bridge), or
/// `None` as for [`python_sdk`].
pub fn python_mcp_proxy() -> Option<PathBuf> {
    let python = python_venv(
        "mcp-proxy-requirements.txt",
        ("mcp-proxy", PYPI_MCP_PROXY_VERSION),
        "import mcp_proxy",
    )?;
    Some(python.parent()?.join("mcp-proxy"))
}

/// The `mcp-proxy` command of npm `mcp-proxy`, or `None` as for [`node_ts_sdk`].
pub fn npm_mcp_proxy() -> Option<PathBuf> {
    let sdk = node_project(
        "mcp-proxy-npm",
        "npm mcp-proxy",
        "mcp-proxy",
        NPM_MCP_PROXY_VERSION,
    )?;
    Some(sdk.dir.join("node_modules").join(".bin").join("mcp-proxy"))
}

/// The pinned `mcp-remote`'s command, or `None` as for [`node_ts_sdk`].
pub fn mcp_remote() -> Option<PathBuf> {
    let project = node_project("mcp-remote", "mcp-remote", "mcp-remote", MCP_REMOTE_VERSION)?;
    Some(
        project
            .dir
            .join("node_modules")
            .join(".bin")
            .join("mcp-remote"),
    )
}

/// The pinned `supergateway`'s command, or `None` as for [`node_ts_sdk`].
pub fn supergateway() -> Option<PathBuf> {
    let project = node_project(
        "supergateway",
        "supergateway",
        "supergateway",
        SUPERGATEWAY_VERSION,
    )?;
    Some(
        project
            .dir
            .join("node_modules")
            .join(".bin")
            .join("supergateway"),
    )
}

/// The conformance suite: the Node.js 22 it runs on and its command, or `None` as for
/// [`node_ts_sdk`].
pub fn conformance_suite() -> Option<(PathBuf, PathBuf)> {
    let project = node_project(
        "conformance",
        "the MCP conformance suite",
        "@modelcontextprotocol/conformance",
        CONFORMANCE_VERSION,
    )?;
    let bin = project.dir.join("node_modules").join(".bin");
    let node = project.dir.join("node_modules/node/bin/node");
    Some((node, bin.join("conformance")))
}

/// The `maturin` command of a venv with the pinned maturin, or `None` as for [`python_sdk`].
pub fn maturin() -> Option<PathBuf> {
    let python = python_venv(
        "maturin-requirements.txt",
        ("maturin", MATURIN_VERSION),
        "import maturin",
    )?;
    Some(python.parent()?.join("maturin"))
}

/// Whether Python can make a venv with pip, else why not (a loud skip, or a failure under
/// `CI=true`, naming `what`).
pub fn python_for(what: &str) -> Option<PathBuf> {
    if skipped_on_purpose("MCP_SIM_SKIP_PYTHON", what) {
        return None;
    }
    match run(Command::new("python3").args(["-c", "import venv, ensurepip"])) {
        Ok(_) => Some(PathBuf::from("python3")),
        Err(e) => unavailable(what, &format!("python3 cannot make a venv with pip: {e}")),
    }
}

/// Runs `cmd`, panicking with the command and its output when it fails.
pub fn run_checked(cmd: &mut Command, step: &str) -> Output {
    run(cmd).unwrap_or_else(|e| panic!("{step} failed:\n{e}"))
}

/// A venv from `tests/peers/REQUIREMENTS_FILE`, which must pin `package==version`, in
/// `<target>/peers/python-PACKAGE-VERSION/`; its python.
fn python_venv(
    requirements_file: &str,
    (package, version): (&str, &str),
    import_check: &str,
) -> Option<PathBuf> {
    let what = if package == "mcp" {
        "Python SDK"
    } else {
        package
    };
    if skipped_on_purpose("MCP_SIM_SKIP_PYTHON", what) {
        return None;
    }
    let python = PathBuf::from("python3");
    // The interpreter, and the modules `python3 -m venv` needs to give the venv a pip.
    let identity = match run(Command::new(&python).args([
        "-c",
        "import sys, venv, ensurepip; print(sys.version.split()[0], sys.base_prefix)",
    ])) {
        Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        Err(RunError::NotFound(e)) => {
            return unavailable(
                what,
                &format!("{} cannot be run ({e}): install Python 3", python.display()),
            )
        }
        Err(RunError::Failed(report)) => {
            return unavailable(
                what,
                &format!(
                    "{} cannot make a virtual environment with pip (the venv and ensurepip \
                     modules are missing; on Debian and Ubuntu: `apt-get install python3-venv`)\n\
                     {report}",
                    python.display()
                ),
            )
        }
    };
    let requirements_path = repo().join("tests/peers").join(requirements_file);
    let requirements = fs::read_to_string(&requirements_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", requirements_path.display()));
    assert!(
        requirements
            .lines()
            .any(|l| l.trim() == format!("{package}=={version}")),
        "{} must pin {package}=={version}",
        requirements_path.display()
    );
    let dir = peers_dir().join(format!("python-{package}-{version}"));
    let venv_python = if cfg!(windows) {
        dir.join("Scripts").join("python.exe")
    } else {
        dir.join("bin").join("python")
    };
    let stamp = format!("python {identity}\n{}\n{requirements}", python.display());
    install_once(&dir, &stamp, |dir| {
        check(
            Command::new(&python).arg("-m").arg("venv").arg(dir),
            "making the virtual environment",
        );
        check(
            Command::new(&venv_python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--no-input",
                    "--disable-pip-version-check",
                ])
                .arg("-r")
                .arg(&requirements_path),
            "installing the Python SDK",
        );
        check(
            Command::new(&venv_python).args(["-c", import_check]),
            "importing the installed Python SDK",
        );
    });
    Some(venv_python)
}

/// The two programs of `tests/peers/go/`, built against both Go SDKs.
pub struct GoPeers {
    /// `server -sdk go-sdk|mcp-go [-http ADDR] [-stateless] [-propagate]`.
    pub server: PathBuf,
    /// `client -sdk go-sdk|mcp-go [-era auto|legacy] [-connect-timeout MS] PLAN ...`.
    pub client: PathBuf,
    /// The server's test binary with the virtual-peer glue (`server/virtual_test.go`, on
    /// `sim/go/peer`): `virtual.test -test.run TestMCPSimVirtual`, `MCP_SIM_SERVER` picking
    /// the SDK.
    pub virtual_test: PathBuf,
}

/// The Go peers built at their pinned versions, or `None` when the test is to be skipped (the
/// reason is printed; with `CI=true` it panics instead).
pub fn go_peers() -> Option<GoPeers> {
    let what = "Go SDKs";
    if skipped_on_purpose("MCP_SIM_SKIP_GO", what) {
        return None;
    }
    let go = PathBuf::from("go");
    let version = match run(Command::new(&go).args(["env", "GOVERSION"])) {
        Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        Err(e) => {
            return unavailable(
                what,
                &format!("go cannot be run: {e}; install Go 1.25 or later"),
            )
        }
    };
    let source = repo().join("tests/peers/go");
    let files = [
        "go.mod",
        "go.sum",
        "server/main.go",
        "server/virtual_test.go",
        "client/main.go",
    ];
    let texts = read_sources(&source, &files);
    // mcp-sim's virtual-peer package, which go.mod replaces by its folder in this repository.
    let peer_files = ["go.mod", "peer.go"];
    let peer_texts = read_sources(&repo().join("sim/go/peer"), &peer_files);
    for (module, version) in [
        ("github.com/modelcontextprotocol/go-sdk", GO_SDK_VERSION),
        ("github.com/mark3labs/mcp-go", MCP_GO_VERSION),
    ] {
        assert!(
            texts[0].contains(&format!("{module} {version}")),
            "tests/peers/go/go.mod must pin {module} {version}"
        );
    }
    let dir = peers_dir().join(format!("go-sdks-{GO_SDK_VERSION}-{MCP_GO_VERSION}"));
    let stamp = format!(
        "go {version}\n{}\n{}",
        texts.join("\n"),
        peer_texts.join("\n")
    );
    install_once(&dir, &stamp, |dir| {
        write_sources(&dir.join("src"), &files, &texts);
        write_sources(&dir.join("peer"), &peer_files, &peer_texts);
        fs::create_dir_all(dir.join("bin")).expect("create the bin folder");
        let go_in_src = |args: &[&str]| {
            let mut cmd = Command::new(&go);
            cmd.args(args)
                .current_dir(dir.join("src"))
                .env("GOMODCACHE", peers_dir().join("go-mod"))
                .env("GOCACHE", peers_dir().join("go-build"))
                .env("GOPATH", peers_dir().join("go-path"))
                // The committed go.sum decides; the machine's own Go, whatever go.mod asks.
                .env("GOFLAGS", "-mod=readonly -modcacherw -buildvcs=false")
                .env("GOTOOLCHAIN", "local")
                .env("CGO_ENABLED", "0");
            cmd
        };
        let replace = format!("-replace=mcpsim.test/peer={}", dir.join("peer").display());
        check(
            &mut go_in_src(&["mod", "edit", &replace]),
            "pointing go.mod at the virtual-peer package (go mod edit)",
        );
        let bin = dir.join("bin").display().to_string();
        check(
            &mut go_in_src(&["build", "-o", &bin, "./server", "./client"]),
            &format!("building against the {what} (go build)"),
        );
        let virtual_test = dir.join("bin").join("virtual.test").display().to_string();
        check(
            &mut go_in_src(&["test", "-c", "-o", &virtual_test, "./server"]),
            &format!("building the virtual-peer test against the {what} (go test -c)"),
        );
    });
    Some(GoPeers {
        server: dir.join("bin").join("server"),
        client: dir.join("bin").join("client"),
        virtual_test: dir.join("bin").join("virtual.test"),
    })
}

/// The Java programs of `tests/peers/java/`, built against the Java SDK.
pub struct JavaPeers {
    /// The `java` command.
    pub java: PathBuf,
    /// Their class path: the compiled classes, then the SDK and its dependencies.
    pub classpath: String,
}

impl JavaPeers {
    /// `java -cp CLASSPATH dev.mcpsim.peers.CLASS`: `SlowServer -stack modern|legacy [-http
    /// PORT] [-log FILE]` or `PlanClient -stack modern|legacy PLAN ...`.
    pub fn command(&self, class: &str) -> Command {
        let mut c = Command::new(&self.java);
        c.args(["-cp", &self.classpath])
            .arg(format!("dev.mcpsim.peers.{class}"));
        c
    }

    /// The same command as words, for `probe -- COMMAND`.
    pub fn argv(&self, class: &str) -> Vec<String> {
        vec![
            self.java.display().to_string(),
            "-cp".into(),
            self.classpath.clone(),
            format!("dev.mcpsim.peers.{class}"),
        ]
    }
}

/// The Java peers built at their pinned versions, or `None` when the test is to be skipped
/// (the reason is printed; with `CI=true` it panics instead).
pub fn java_sdk() -> Option<JavaPeers> {
    let what = "Java SDK";
    if skipped_on_purpose("MCP_SIM_SKIP_JAVA", what) {
        return None;
    }
    let java = PathBuf::from("java");
    // `java -version` writes to stderr: `openjdk version "17.0.15" 2025-04-15`.
    let java_version = match run(Command::new(&java).arg("-version")) {
        Ok(out) => String::from_utf8_lossy(&out.stderr)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
        Err(e) => {
            return unavailable(
                what,
                &format!("java cannot be run: {e}; install Java 17 or later"),
            )
        }
    };
    let major: u32 = java_version
        .split('"')
        .nth(1)
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 17 {
        return unavailable(
            what,
            &format!("java is {java_version:?}; the SDK needs Java 17 or later"),
        );
    }
    let mvn = PathBuf::from(if cfg!(windows) { "mvn.cmd" } else { "mvn" });
    let mvn_version = match run(Command::new(&mvn).args(["-B", "--version"])) {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
        Err(e) => return unavailable(what, &format!("mvn cannot be run: {e}; install Maven")),
    };
    let source = repo().join("tests/peers/java");
    let files = [
        "pom.xml",
        "src/main/java/dev/mcpsim/peers/SlowServer.java",
        "src/main/java/dev/mcpsim/peers/PlanClient.java",
    ];
    let texts = read_sources(&source, &files);
    assert!(
        texts[0].contains(&format!("<mcp.version>{JAVA_SDK_VERSION}</mcp.version>")),
        "tests/peers/java/pom.xml must pin io.modelcontextprotocol.sdk:mcp {JAVA_SDK_VERSION}"
    );
    let dir = peers_dir().join(format!("java-sdk-{JAVA_SDK_VERSION}"));
    let stamp = format!("{java_version}\n{mvn_version}\n{}", texts.join("\n"));
    install_once(&dir, &stamp, |dir| {
        write_sources(&dir.join("src"), &files, &texts);
        let mut build = Command::new(&mvn);
        build
            .args(["-B", "-q", "-f"])
            .arg(dir.join("src/pom.xml"))
            .arg(format!(
                "-Dmaven.repo.local={}",
                peers_dir().join("maven-repo").display()
            ))
            .arg(format!("-Dpeers.build={}", dir.join("build").display()))
            .arg("compile");
        check(
            &mut build,
            &format!("building against the {what} (mvn compile)"),
        );
    });
    let libs = fs::read_to_string(dir.join("build/classpath.txt"))
        .expect("the build wrote its class path");
    let separator = if cfg!(windows) { ";" } else { ":" };
    Some(JavaPeers {
        java,
        classpath: format!(
            "{}{separator}{}",
            dir.join("build/classes").display(),
            libs.trim()
        ),
    })
}

/// Node.js and the folder holding the TypeScript SDK and the server scripts of
/// `tests/peers/ts/`.
pub struct NodeSdk {
    /// The `node` command.
    pub node: PathBuf,
    /// `<target>/peers/node-ts-sdk-VERSION/`.
    pub dir: PathBuf,
}

/// Node.js with the TypeScript SDK installed, or `None` when the test is to be skipped (the
/// reason is printed; with `CI=true` it panics instead).
pub fn node_ts_sdk() -> Option<NodeSdk> {
    node_project(
        "ts",
        "TypeScript SDK",
        "@modelcontextprotocol/server",
        TS_SDK_VERSION,
    )
}

/// Node.js with the TypeScript SDK v1 and `server-everything` installed (legacy era only), or
/// `None` as for [`node_ts_sdk`].
pub fn node_ts_sdk_v1() -> Option<NodeSdk> {
    node_project(
        "ts-v1",
        "TypeScript SDK v1",
        "@modelcontextprotocol/sdk",
        TS_SDK_V1_VERSION,
    )
}

/// Node.js with FastMCP for TypeScript installed (`tests/peers/fastmcp/`), or `None` as for
/// [`node_ts_sdk`].
pub fn node_fastmcp() -> Option<NodeSdk> {
    node_project(
        "fastmcp",
        "FastMCP for TypeScript",
        "fastmcp",
        FASTMCP_VERSION,
    )
}

/// Installs the npm project `tests/peers/FOLDER` (its manifest must pin `package` at
/// `version`) into `<target>/peers/node-ts-sdk[-FOLDER's suffix]-VERSION/`.
fn node_project(folder: &str, what: &str, package: &str, version: &str) -> Option<NodeSdk> {
    if skipped_on_purpose("MCP_SIM_SKIP_NODE", what) {
        return None;
    }
    let node = PathBuf::from("node");
    let node_version = match run(Command::new(&node).arg("--version")) {
        Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        Err(e) => {
            return unavailable(
                what,
                &format!("node cannot be run: {e}; install Node.js 20 or later"),
            )
        }
    };
    let major: u32 = node_version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 20 {
        return unavailable(
            what,
            &format!("node is {node_version}; the SDK needs Node.js 20 or later"),
        );
    }
    let npm = PathBuf::from(if cfg!(windows) { "npm.cmd" } else { "npm" });
    if let Err(e) = run(Command::new(&npm).arg("--version")) {
        return unavailable(what, &format!("npm cannot be run: {e}; install npm"));
    }
    let source = repo().join("tests/peers").join(folder);
    let read = |name: &str| {
        let path = source.join(name);
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    };
    let (manifest, lock) = (read("package.json"), read("package-lock.json"));
    assert!(
        manifest.contains(&format!("\"{package}\": \"{version}\"")),
        "tests/peers/{folder}/package.json must pin {package} {version}"
    );
    if folder == "ts-v1" {
        assert!(
            manifest.contains(&format!(
                "\"@modelcontextprotocol/server-everything\": \"{SERVER_EVERYTHING_VERSION}\""
            )),
            "tests/peers/ts-v1/package.json must pin server-everything {SERVER_EVERYTHING_VERSION}"
        );
    }
    let dir = match folder.strip_prefix("ts") {
        Some(suffix) => peers_dir().join(format!("node-ts-sdk{suffix}-{version}")),
        None => peers_dir().join(format!("node-{folder}-{version}")),
    };
    let stamp = format!("node {node_version}\n{manifest}\n{lock}");
    // Install scripts run only for the suite's Node.js 22 (npm `node` fetches its binary).
    let scripts = folder == "conformance";
    install_once(&dir, &stamp, |dir| {
        fs::write(dir.join("package.json"), &manifest).expect("write package.json");
        fs::write(dir.join("package-lock.json"), &lock).expect("write package-lock.json");
        let mut ci = Command::new(&npm);
        ci.args(["ci", "--no-audit", "--no-fund"]).current_dir(dir);
        if !scripts {
            ci.arg("--ignore-scripts");
        }
        check(&mut ci, &format!("installing {what} (npm ci)"));
    });
    // The server scripts go beside node_modules; a script is replaced (atomically) only when
    // its text changed, under the same lock as the install.
    let _lock = Lock::acquire(&lock_path(&dir));
    for entry in fs::read_dir(&source).expect("read the peer's folder") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|e| e == "mjs") {
            let name = path.file_name().expect("file name");
            let text = fs::read(&path).expect("read a server script");
            let dest = dir.join(name);
            if fs::read(&dest).ok().as_deref() != Some(&text[..]) {
                let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
                fs::write(&tmp, &text).expect("write a server script");
                fs::rename(&tmp, &dest).expect("move a server script into place");
            }
        }
    }
    Some(NodeSdk { node, dir })
}

/// Whether `CI=true` (or `1`) is set: missing interpreters then fail the test.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

fn skipped_on_purpose(var: &str, what: &str) -> bool {
    if std::env::var(var).is_ok_and(|v| v == "1") {
        loud(&format!("{var}=1: skipping a test against the {what}"));
        return true;
    }
    false
}

/// A missing interpreter: a loud skip, or a failure under CI.
fn unavailable<T>(what: &str, why: &str) -> Option<T> {
    let message = format!("cannot test against the {what}: {why}");
    if in_ci() {
        panic!("{message}\n(CI=true: a missing interpreter fails the test instead of skipping it)");
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_owned();
    loud(&format!(
        "SKIPPED {test}: {message} (it passes without running; with CI=true it fails)"
    ));
    None
}

/// Writes to the process's stderr directly: the test harness captures `eprintln!` of a
/// passing test, and a skip or a long install must be seen.
fn loud(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
    let _ = err.flush();
}

enum RunError {
    /// The program could not be started.
    NotFound(std::io::Error),
    /// It ran and failed: the command, its status and its output.
    Failed(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::NotFound(e) => write!(f, "{e}"),
            RunError::Failed(report) => write!(f, "{report}"),
        }
    }
}

fn run(cmd: &mut Command) -> Result<Output, RunError> {
    let line = format!("{cmd:?}");
    let out = cmd.output().map_err(RunError::NotFound)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(RunError::Failed(format!(
            "$ {line}\nexit: {}\n--- stdout:\n{}--- stderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// Runs an install step; a failure panics with the command and its output.
fn check(cmd: &mut Command, step: &str) {
    if let Err(e) = run(cmd) {
        panic!("peer install failed while {step}:\n{e}");
    }
}

fn lock_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().expect("peer folder name").to_os_string();
    name.push(".lock");
    dir.with_file_name(name)
}

/// A peer's committed sources (`files` under `source`), read whole: their text goes into the
/// install's stamp, so that a change to any of them rebuilds the peer.
fn read_sources(source: &Path, files: &[&str]) -> Vec<String> {
    files
        .iter()
        .map(|f| {
            let path = source.join(f);
            fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        })
        .collect()
}

/// The sources [`read_sources`] read, written under `dir` at their relative paths.
fn write_sources(dir: &Path, files: &[&str], texts: &[String]) {
    for (f, text) in files.iter().zip(texts) {
        let path = dir.join(f);
        fs::create_dir_all(path.parent().expect("a folder")).expect("create a source folder");
        fs::write(&path, text).expect("write a source file");
    }
}

/// Runs `install` into an emptied `dir` unless `dir/.installed` holds `stamp`, under the
/// folder's lock; writes the stamp once `install` returned.
fn install_once(dir: &Path, stamp: &str, install: impl FnOnce(&Path)) {
    let stamp_path = dir.join(STAMP);
    let installed = || fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp);
    if installed() {
        return;
    }
    fs::create_dir_all(dir.parent().expect("peers folder")).expect("create the peers folder");
    let _lock = Lock::acquire(&lock_path(dir));
    if installed() {
        return; // another thread or process installed it while this one waited
    }
    loud(&format!(
        "installing a test peer into {} (once; later runs reuse it)",
        dir.display()
    ));
    if dir.exists() {
        fs::remove_dir_all(dir).unwrap_or_else(|e| panic!("cannot remove {}: {e}", dir.display()));
    }
    fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    install(dir);
    let tmp = dir.join(".installed.tmp");
    let mut file = fs::File::create(&tmp).expect("create the stamp");
    file.write_all(stamp.as_bytes()).expect("write the stamp");
    file.sync_all().expect("sync the stamp");
    fs::rename(&tmp, &stamp_path).expect("move the stamp into place");
}

/// An exclusive advisory lock on a file (`flock`), released when dropped or when the process
/// dies, so an interrupted install never leaves a stale lock behind. (Off Unix no lock is
/// taken: concurrent first runs could then install twice.)
struct Lock {
    _file: fs::File,
}

impl Lock {
    fn acquire(path: &Path) -> Lock {
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("cannot open the lock file {}: {e}", path.display()));
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            loop {
                // SAFETY: flock on a descriptor this function owns; no memory is involved.
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                    break;
                }
                let e = std::io::Error::last_os_error();
                assert!(
                    e.kind() == std::io::ErrorKind::Interrupted,
                    "cannot lock {}: {e}",
                    path.display()
                );
            }
        }
        Lock { _file: file }
    }
}

/// The TypeScript SDK v1 test client (`tests/peers/ts-v1/ts_v1_client.mjs`) with its `plan`; the
/// server's command follows (`-- CMD ...`).
#[allow(dead_code)] // not every test binary that has `common` uses it
pub fn ts_v1_client(sdk: &NodeSdk, plan: &str) -> Command {
    let mut c = Command::new(&sdk.node);
    c.arg(sdk.dir.join("ts_v1_client.mjs")).arg(plan);
    c
}
