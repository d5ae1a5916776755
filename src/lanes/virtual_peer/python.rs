//! The command of a virtual peer: which interpreter, which program, and the shim between them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::VirtualError;

/// The Python shim, shipped inside the crate (the same file is `mcp_sim.virtual_peer` in the
/// wheel).
const PYTHON_SHIM: &str = include_str!("../../../sim/python/mcp_sim/virtual_peer.py");

/// A program to run as a virtual peer: `python server.py ARGS` or `python -m module ARGS`, as
/// a user would start it, with the interpreter of their own environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCommand {
    interpreter: String,
    program: Vec<String>,
}

impl PeerCommand {
    /// Reads `command` (the words after `--`): a Python interpreter (`python`, `python3`,
    /// `python3.12`, a virtual environment's `bin/python`), then a script and its arguments or
    /// `-m` and a module. Anything else is a [`VirtualError::Command`] that says what is
    /// expected.
    pub fn python(command: &[String]) -> Result<PeerCommand, VirtualError> {
        let Some((interpreter, program)) = command.split_first() else {
            return Err(VirtualError::Command(
                "no command: give the server as `python server.py ARGS`".into(),
            ));
        };
        let name = Path::new(interpreter)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        if !is_python_name(name) {
            return Err(VirtualError::Command(format!(
                "{interpreter:?} is not a Python interpreter: --virtual runs Python servers, \
                 as `python server.py ARGS` or `python -m package ARGS` (the interpreter of \
                 the server's own environment)"
            )));
        }
        match program.first().map(String::as_str) {
            None => Err(VirtualError::Command(
                "no program after the interpreter: give `server.py` or `-m package`".into(),
            )),
            Some("-m") if program.len() < 2 => {
                Err(VirtualError::Command("`-m` needs a module name".into()))
            }
            Some("-c") => Err(VirtualError::Command(
                "`-c` code cannot be run virtually: put it in a file".into(),
            )),
            Some(flag) if flag.starts_with('-') && flag != "-m" => Err(VirtualError::Command(
                format!("interpreter option {flag:?} is not supported: give the script first"),
            )),
            Some(_) => Ok(PeerCommand {
                interpreter: interpreter.clone(),
                program: program.to_vec(),
            }),
        }
    }

    /// The command as the user gave it, for replay lines.
    pub fn words(&self) -> Vec<String> {
        std::iter::once(self.interpreter.clone())
            .chain(self.program.iter().cloned())
            .collect()
    }

    /// Starts the shim's zygote: the interpreter runs the shim, which runs the program. The
    /// hash seed is pinned (`PYTHONHASHSEED=0`): set and dict orders of strings are then the
    /// same in every run. The program's stderr goes to `stderr`.
    pub(super) fn spawn_with(&self, stderr: Stdio) -> Result<Child, VirtualError> {
        let shim = shim_file()?;
        Command::new(&self.interpreter)
            .arg(&shim)
            .args(&self.program)
            .env("PYTHONHASHSEED", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| VirtualError::Start(format!("{}: {e}", self.interpreter)))
    }
}

/// `python`, `python3`, `python3.12`, `pypy3`: names of Python interpreters.
fn is_python_name(name: &str) -> bool {
    let rest = name
        .strip_prefix("python")
        .or_else(|| name.strip_prefix("pypy"));
    rest.is_some_and(|r| r.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The shim written to a folder of its own, named by its content so that builds of different
/// versions never share one; written once, atomically (a rename), by whichever run comes first.
fn shim_file() -> Result<PathBuf, VirtualError> {
    let digest = PYTHON_SHIM.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let dir = std::env::temp_dir().join(format!("mcp-sim-shim-{digest:016x}"));
    let path = dir.join("mcp_sim_virtual_peer.py");
    if path.exists() {
        return Ok(path);
    }
    let fail = |e: std::io::Error| {
        VirtualError::Start(format!("writing the shim in {}: {e}", dir.display()))
    };
    std::fs::create_dir_all(&dir).map_err(fail)?;
    let partial = dir.join(format!("shim-{}.partial", std::process::id()));
    std::fs::write(&partial, PYTHON_SHIM).map_err(fail)?;
    std::fs::rename(&partial, &path).map_err(fail)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn reads_python_commands() {
        let c = PeerCommand::python(&words("/venv/bin/python3.12 server.py --stdio")).unwrap();
        assert_eq!(c.words(), words("/venv/bin/python3.12 server.py --stdio"));
        assert!(PeerCommand::python(&words("python -m my_server")).is_ok());
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        for bad in [
            "node server.js",
            "python",
            "python -m",
            "python -c pass",
            "python -u s.py",
            "",
        ] {
            let err = PeerCommand::python(&words(bad)).unwrap_err();
            assert!(matches!(err, VirtualError::Command(_)), "{bad}: {err}");
        }
        let err = PeerCommand::python(&words("node server.js")).unwrap_err();
        assert!(
            err.to_string().contains("not a Python interpreter"),
            "{err}"
        );
    }
}
