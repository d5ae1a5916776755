//! The Python and npm packages as a user installs them.
//!
//! The wheel is built from the checkout with the pinned maturin (`sim/pyproject.toml`), the npm
//! tarballs with `sim/npm/pack.mjs` from the binary that build left in the build folder (one
//! release build for both). The wheel goes into a fresh venv with the pinned pytest, the
//! tarballs into a fresh npm folder; then, with no Rust toolchain on `PATH`, the user's tests
//! of `tests/peers/packages/` run: pytest with the package's plugin and `node --test` with its
//! API. They probe the pinned Python SDK server and the TypeScript SDK server (its known
//! finding in a baseline), which pass, and the raw server that answers every cancel, which
//! fails with the rule, its level and the replay line in the failure's text.
//!
//! Python and Node.js are needed as for the other peer tests (`common::peers`: a loud skip
//! without them, a failure under `CI=true`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::peers;

/// What the builds produced.
struct Built {
    wheel: PathBuf,
    tarballs: Vec<PathBuf>,
}

fn packages_dir() -> PathBuf {
    peers::peers_dir()
        .parent()
        .expect("the build folder")
        .join("packages")
}

/// Builds the wheel and the tarballs once per test binary.
fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Option<Built>> = OnceLock::new();
    BUILT.get_or_init(build).as_ref()
}

fn build() -> Option<Built> {
    let maturin = peers::maturin()?;
    peers::node_ts_sdk()?; // Node.js 20 and npm, or a loud skip
    let out = packages_dir();
    let wheels = out.join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    peers::run_checked(
        Command::new(&maturin)
            .args(["build", "--release", "--quiet", "-m"])
            .arg(common::repo().join("sim/Cargo.toml"))
            .arg("-o")
            .arg(&wheels),
        "building the wheel (maturin build)",
    );
    let wheel = std::fs::read_dir(&wheels)
        .expect("the wheel folder")
        .map(|e| e.expect("an entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("maturin built a wheel");
    // maturin's cargo build left the binary it put in the wheel in the build folder.
    let binary = peers::peers_dir()
        .parent()
        .expect("the build folder")
        .join("release/mcp-sim");
    let packed = peers::run_checked(
        Command::new("node")
            .arg(common::repo().join("sim/npm/pack.mjs"))
            .arg(&binary)
            .arg(out.join("npm")),
        "packing the npm tarballs",
    );
    let tarballs = String::from_utf8_lossy(&packed.stdout)
        .lines()
        .map(PathBuf::from)
        .collect::<Vec<_>>();
    assert_eq!(tarballs.len(), 2, "the main package and this platform's");
    for t in std::iter::once(&wheel).chain(&tarballs) {
        let size = std::fs::metadata(t).map(|m| m.len()).unwrap_or(0);
        eprintln!("built {} ({} KiB)", t.display(), size >> 10);
    }
    Some(Built { wheel, tarballs })
}

/// `PATH` without any folder that holds a Rust toolchain, with `first` in front.
fn path_without_rust(first: &[&Path]) -> String {
    let rust = |dir: &Path| dir.join("cargo").exists() || dir.join("rustc").exists();
    let current = std::env::var_os("PATH").unwrap_or_default();
    let kept = std::env::split_paths(&current).filter(|d| !rust(d));
    let all: Vec<PathBuf> = first.iter().map(|p| p.to_path_buf()).chain(kept).collect();
    let path = std::env::join_paths(&all).expect("a PATH");
    let path = path.to_string_lossy().into_owned();
    for dir in std::env::split_paths(&path) {
        assert!(!rust(&dir), "{} holds a Rust toolchain", dir.display());
    }
    path
}

/// The absolute path of `program` on `PATH`.
fn which(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

/// The servers, flags and baselines the user's tests read, as environment variables.
fn test_env(scratch: &Path) -> Option<Vec<(&'static str, String)>> {
    let python_sdk = peers::python_sdk()?;
    let ts = peers::node_ts_sdk()?;
    let repo = common::repo();
    let servers = serde_json::json!({
        "python-sdk": [&python_sdk, repo.join("tests/peers/python_slow_server.py")],
        "typescript-sdk": [which("node"), ts.dir.join("ts_slow_server.mjs")],
        "answer-cancel": [which("python3"), repo.join("tests/peers/raw_stdio_server.py"), "answer-cancel"],
        "swallow-cancel": [&python_sdk, repo.join("tests/peers/python_mutants/swallow_cancel_server.py")],
    });
    // Calls of about 1.2 s, half of them cancelled; wide timeouts for a loaded machine (the
    // SDK servers import for a second or more before they answer).
    let flags = serde_json::json!([
        "--tool",
        "slow_op",
        "--calls",
        "4",
        "--args",
        r#"{"steps":6,"step_ms":200}"#,
        "--cancel-percent",
        "50",
        "--timeout-ms",
        "20000",
        "--max-total-ms",
        "30000",
        "--max-seconds",
        "45",
        "--drain-ms",
        "1200",
    ]);
    // The TypeScript SDK's known finding (`sim/tests/probe_typescript.rs`).
    let baseline = scratch.join("typescript-sdk.baseline");
    std::fs::write(&baseline, "response-after-cancel\n").expect("write the baseline");
    let baselines = serde_json::json!({ "typescript-sdk": baseline });
    Some(vec![
        ("MCP_SIM_TEST_SERVERS", servers.to_string()),
        ("MCP_SIM_TEST_FLAGS", flags.to_string()),
        ("MCP_SIM_TEST_BASELINES", baselines.to_string()),
    ])
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What a failure on the answer-cancel server must show: the rule with its level and the
/// replay line.
fn assert_names_the_fault(output: &str) {
    assert!(
        output.contains("] response-after-cancel: ")
            && ["[MUST]", "[SHOULD]"]
                .iter()
                .any(|l| output.contains(&format!("{l} response-after-cancel"))),
        "the rule and its level:\n{output}"
    );
    assert!(
        output.contains("replay: mcp-sim probe --seed "),
        "the replay line:\n{output}"
    );
}

#[test]
fn pytest_from_a_fresh_venv_passes_clean_servers_and_fails_a_faulty_one() {
    let Some(built) = built() else { return };
    let scratch = packages_dir().join("pytest");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch");
    let Some(env) = test_env(&scratch) else {
        return;
    };
    let venv = scratch.join("venv");
    let python = peers::python_for("the Python package").expect("python3");
    peers::run_checked(
        Command::new(python).args(["-m", "venv"]).arg(&venv),
        "making a fresh venv",
    );
    let bin = venv.join("bin");
    peers::run_checked(
        Command::new(bin.join("pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(common::repo().join("tests/peers/packages/pytest-requirements.txt"))
            .arg(&built.wheel),
        "installing the wheel and pytest into the fresh venv",
    );
    let path = path_without_rust(&[&bin]);
    let tests = common::repo().join("tests/peers/packages");
    let pytest = |file: &str, extra: &[&str]| {
        Command::new(bin.join("pytest"))
            .args(["-p", "no:cacheprovider", "-q", "--rootdir"])
            .arg(&tests)
            .arg(tests.join(file))
            .args(extra)
            .env("PATH", &path)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(&scratch)
            .output()
            .expect("pytest runs")
    };
    // The command is there, without Rust.
    let version = Command::new(bin.join("mcp-sim"))
        .arg("--version")
        .env("PATH", &path)
        .output()
        .expect("the wheel's mcp-sim runs");
    assert!(text(&version).starts_with("mcp-sim "), "{}", text(&version));

    let clean = pytest("test_clean.py", &[]);
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean));
    assert!(text(&clean).contains("6 passed"), "{}", text(&clean));

    let flagged = pytest("test_flagged.py", &["--mcp-sim-seeds", "1..3"]);
    let output = text(&flagged);
    assert_eq!(flagged.status.code(), Some(1), "{output}");
    assert!(output.contains("2 of 2 mcp-sim runs failed"), "{output}");
    assert_names_the_fault(&output);
    // The virtual sweep of the swallow-cancel server over the same seeds.
    assert!(output.contains("2 failed"), "{output}");
    assert!(
        output.contains("mcp-sim sweep --virtual did not pass")
            && output.contains("response-after-cancel")
            && output.contains("replay: mcp-sim replay --seed "),
        "the virtual sweep's rule and replay lines:\n{output}"
    );
    eprintln!("--- pytest on the answer-cancel server:\n{output}");
}

#[test]
fn node_test_from_a_fresh_folder_passes_clean_servers_and_fails_a_faulty_one() {
    let Some(built) = built() else { return };
    let scratch = packages_dir().join("node-test");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch");
    let Some(env) = test_env(&scratch) else {
        return;
    };
    let app = scratch.join("app");
    std::fs::create_dir_all(&app).expect("the user's folder");
    std::fs::write(
        app.join("package.json"),
        r#"{"name":"app","version":"1.0.0","private":true,"type":"module"}"#,
    )
    .expect("package.json");
    peers::run_checked(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent"])
            .args(&built.tarballs)
            .current_dir(&app),
        "installing the npm tarballs into a fresh folder",
    );
    for file in ["clean.test.mjs", "flagged.test.mjs"] {
        std::fs::copy(
            common::repo().join("tests/peers/packages").join(file),
            app.join(file),
        )
        .expect("copy a test file");
    }
    let node_dir = which("node").parent().expect("node's folder").to_path_buf();
    let path = path_without_rust(&[&app.join("node_modules/.bin"), &node_dir]);
    let node_test = |file: &str| {
        Command::new(which("node"))
            .args(["--test", "--test-reporter=spec", file])
            .env("PATH", &path)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(&app)
            .output()
            .expect("node --test runs")
    };
    // `npx mcp-sim` is the command, without Rust.
    let version = Command::new(which("npx"))
        .args(["--no-install", "mcp-sim", "--version"])
        .env("PATH", &path)
        .current_dir(&app)
        .output()
        .expect("npx runs");
    assert!(text(&version).contains("mcp-sim "), "{}", text(&version));

    let clean = node_test("clean.test.mjs");
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean));
    assert!(text(&clean).contains("pass 4"), "{}", text(&clean));

    let flagged = node_test("flagged.test.mjs");
    let output = text(&flagged);
    assert_eq!(flagged.status.code(), Some(1), "{output}");
    assert!(output.contains("fail 1"), "{output}");
    assert_names_the_fault(&output);
    eprintln!("--- node --test on the answer-cancel server:\n{output}");
}

/// The action's inputs and the variables its step passes them in, read from `action.yml`.
fn action_inputs() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(common::repo().join("action.yml")).expect("action.yml");
    text.lines()
        .filter_map(|l| {
            let (var, value) = l.trim().split_once(": ")?;
            let input = value
                .strip_prefix("${{ inputs.")?
                .strip_suffix(" }}")?
                .to_owned();
            Some((var.to_owned(), input))
        })
        .collect()
}

#[test]
fn the_action_installs_each_package_and_prints_annotations() {
    let Some(built) = built() else { return };
    let inputs = action_inputs();
    let script = common::repo().join("sim/action/probe.sh");
    let steps = std::fs::read_to_string(&script).expect("the action's steps");
    assert!(inputs.len() >= 8, "{inputs:?}");
    for (var, input) in &inputs {
        assert_eq!(var, &format!("MCP_SIM_{}", input.to_ascii_uppercase()));
        assert!(steps.contains(var.as_str()), "probe.sh reads {var}");
    }
    let scratch = packages_dir().join("action");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch");
    let baseline = scratch.join("baseline");
    std::fs::write(&baseline, "response-after-cancel\n").expect("baseline");
    let node_dir = which("node").parent().expect("node's folder").to_path_buf();
    let path = path_without_rust(&[&node_dir]);
    let tarballs: Vec<String> = built
        .tarballs
        .iter()
        .map(|t| t.display().to_string())
        .collect();
    let raw = common::repo().join("tests/peers/raw_stdio_server.py");
    for (install, package) in [
        ("pip", built.wheel.display().to_string()),
        ("npm", tarballs.join(" ")),
    ] {
        let run = |baseline: &str| {
            let temp = scratch.join(format!("{install}-{}", !baseline.is_empty()));
            std::fs::create_dir_all(&temp).expect("runner temp");
            Command::new("bash")
                .arg(&script)
                .env("PATH", &path)
                .env("RUNNER_TEMP", &temp)
                .env("MCP_SIM_INSTALL", install)
                .env("MCP_SIM_PACKAGE", &package)
                .env("MCP_SIM_SEED", "1")
                .env("MCP_SIM_ERA", "auto")
                .env("MCP_SIM_COMMAND", format!("{} {} answer-cancel", which("python3").display(), raw.display()))
                .env("MCP_SIM_URL", "")
                .env("MCP_SIM_BASELINE", baseline)
                .env(
                    "MCP_SIM_ARGS",
                    r#"--calls 4 --args {"steps":6,"step_ms":200} --cancel-percent 50 --drain-ms 800"#,
                )
                .output()
                .expect("the action's steps run")
        };
        let failed = run("");
        let output = text(&failed);
        assert_eq!(failed.status.code(), Some(1), "{install}: {output}");
        let stdout = String::from_utf8_lossy(&failed.stdout);
        let errors: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("::error title=response-after-cancel::"))
            .collect();
        assert!(!errors.is_empty(), "{install}: annotations:\n{output}");
        assert!(
            errors
                .iter()
                .all(|l| l.contains("[MUST]") && l.contains("%0Areplay: mcp-sim probe --seed 1")),
            "{install}: each annotation names the level and the replay:\n{output}"
        );
        let expected = run(&baseline.display().to_string());
        let output = text(&expected);
        assert_eq!(expected.status.code(), Some(0), "{install}: {output}");
        assert!(
            output.contains("::warning title=response-after-cancel::")
                && output.contains("(expected by the baseline)")
                && !output.contains("::error"),
            "{install}: with the baseline the finding is expected, not failed:\n{output}"
        );
    }
}

/// The npm packages carry the crate's version (the wheel takes it from `Cargo.toml` itself),
/// and the main package names a platform package for each binary it knows.
#[test]
fn the_packages_carry_the_crate_version() {
    let cargo = std::fs::read_to_string(common::repo().join("sim/Cargo.toml")).expect("Cargo.toml");
    let version = cargo
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the crate's version");
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo().join("sim/npm/mcp-sim/package.json"))
            .expect("package.json"),
    )
    .expect("JSON");
    assert_eq!(manifest["version"], version);
    let optional = manifest["optionalDependencies"]
        .as_object()
        .expect("optionalDependencies");
    let index =
        std::fs::read_to_string(common::repo().join("sim/npm/mcp-sim/index.js")).expect("index.js");
    for (name, v) in optional {
        assert_eq!(v, version, "{name}");
        assert!(
            index.contains(&format!("\"{name}\"")),
            "index.js resolves {name}"
        );
    }
    let pyproject =
        std::fs::read_to_string(common::repo().join("sim/pyproject.toml")).expect("pyproject");
    assert!(
        pyproject.contains("dynamic = [\"version\"]") && pyproject.contains("bindings = \"bin\"")
    );
}
