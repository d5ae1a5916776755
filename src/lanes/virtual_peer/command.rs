//! The command of a virtual peer: which runtime, which program, and the shim between them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::shims;
use super::VirtualError;

/// The runtime a virtual peer runs in, each with its own shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// CPython: one zygote per job that forks a fresh child per run.
    Python,
    /// Node.js: a fresh process per run (Node.js cannot fork).
    Node,
    /// Go: a test of the server's module that calls `sim/go/peer`'s `Serve`, a fresh
    /// process (and synctest bubble) per run.
    Go,
}

/// A program to run as a virtual peer, as a user would start it, with the interpreter of
/// their own environment: `python server.py ARGS`, `python -m module ARGS` or
/// `node server.js ARGS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCommand {
    runtime: Runtime,
    interpreter: String,
    program: Vec<String>,
}

const EXPECTED: &str = "--virtual runs `python server.py ARGS`, `python -m package ARGS`, \
                        `node server.js ARGS` (the interpreter of the server's own environment), \
                        or a Go test that calls mcp-sim's peer.Serve: `go test PKG -run NAME` or \
                        a built `PKG.test -test.run NAME`";

impl PeerCommand {
    /// Reads `command` (the words after `--`): an interpreter, then a script and its
    /// arguments. Anything else is a [`VirtualError::Command`] that says what is expected.
    pub fn parse(command: &[String]) -> Result<PeerCommand, VirtualError> {
        let Some(interpreter) = command.first() else {
            return Err(VirtualError::Command(format!("no command: {EXPECTED}")));
        };
        let name = Path::new(interpreter)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        if is_python_name(name) {
            PeerCommand::python(command)
        } else if is_node_name(name) {
            PeerCommand::node(command)
        } else if name == "go" || name.ends_with(".test") {
            PeerCommand::go(command)
        } else {
            Err(VirtualError::Command(format!(
                "{interpreter:?} is not an interpreter mcp-sim has a shim for: {EXPECTED}"
            )))
        }
    }

    /// Reads a Python command: a Python interpreter (`python`, `python3`, `python3.12`, a
    /// virtual environment's `bin/python`), then a script and its arguments or `-m` and a
    /// module.
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
                "{interpreter:?} is not a Python interpreter: {EXPECTED}"
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
            Some("-m") => Ok(PeerCommand {
                runtime: Runtime::Python,
                interpreter: interpreter.clone(),
                program: program.to_vec(),
            }),
            Some(script) => {
                // `server.py:object` names the file before the colon.
                let file = match script.rsplit_once(':') {
                    Some((file, name)) if !name.contains('/') && file.ends_with(".py") => file,
                    _ => script,
                };
                existing(file)?;
                Ok(PeerCommand {
                    runtime: Runtime::Python,
                    interpreter: interpreter.clone(),
                    program: program.to_vec(),
                })
            }
        }
    }

    /// Reads a Node.js command: `node` (or a path to it), then a script (ES module or
    /// CommonJS) and its arguments.
    pub fn node(command: &[String]) -> Result<PeerCommand, VirtualError> {
        let Some((interpreter, program)) = command.split_first() else {
            return Err(VirtualError::Command(
                "no command: give the server as `node server.js ARGS`".into(),
            ));
        };
        match program.first().map(String::as_str) {
            None => Err(VirtualError::Command(
                "no program after `node`: give the server's script, `node server.js`".into(),
            )),
            Some(flag) if flag.starts_with('-') => Err(VirtualError::Command(format!(
                "node option {flag:?} is not supported: give the script first (`-e` code \
                 goes in a file)"
            ))),
            Some(script) => {
                existing(script)?;
                Ok(PeerCommand {
                    runtime: Runtime::Node,
                    interpreter: interpreter.clone(),
                    program: program.to_vec(),
                })
            }
        }
    }

    /// Reads a Go command: `go test [PKG] -run NAME` (built once with `go test -c` in the
    /// current folder) or a built test binary, `PKG.test -test.run NAME`. The test must call
    /// mcp-sim's `peer.Serve` (sim/go/peer).
    pub fn go(command: &[String]) -> Result<PeerCommand, VirtualError> {
        let usage = || {
            VirtualError::Command(
                "a Go server runs through a test that calls mcp-sim's peer.Serve: give \
                 `go test PKG -run NAME` or `PKG.test -test.run NAME`"
                    .into(),
            )
        };
        let words: Vec<&str> = command.iter().map(String::as_str).collect();
        let (interpreter, program) = match words.as_slice() {
            ["go", "test", rest @ ..] => {
                let (pkg, name) = match rest {
                    ["-run", name] => (".", *name),
                    [pkg, "-run", name] | ["-run", name, pkg] => (*pkg, *name),
                    _ => return Err(usage()),
                };
                ("go".to_string(), vec![pkg.to_string(), name.to_string()])
            }
            [binary, "-test.run", name] | [binary, "-run", name] if binary.ends_with(".test") => {
                existing(binary)?;
                (binary.to_string(), vec![name.to_string()])
            }
            _ => return Err(usage()),
        };
        Ok(PeerCommand {
            runtime: Runtime::Go,
            interpreter,
            program,
        })
    }

    /// Its runtime.
    pub fn runtime(&self) -> Runtime {
        self.runtime
    }

    /// Whether its shim takes a seeded service time and tie order per input
    /// ([`super::ServiceModel`]): CPython's and Node.js's do; Go's does not (a bubble runs
    /// ahead by itself).
    pub fn takes_service_time(&self) -> bool {
        self.runtime() != Runtime::Go
    }

    /// The command as the user gave it, for replay lines.
    pub fn words(&self) -> Vec<String> {
        if self.runtime == Runtime::Go {
            return match self.interpreter == "go" {
                true => ["go", "test", &self.program[0], "-run", &self.program[1]]
                    .map(String::from)
                    .to_vec(),
                false => [&self.interpreter, "-test.run", &self.program[0]]
                    .map(String::from)
                    .to_vec(),
            };
        }
        std::iter::once(self.interpreter.clone())
            .chain(self.program.iter().cloned())
            .collect()
    }

    /// Whether each run is a fresh process (no zygote to fork it from).
    pub(super) fn process_per_run(&self) -> bool {
        self.runtime != Runtime::Python
    }

    /// Starts the shim: the interpreter runs the shim, which runs the program. Python's hash
    /// seed is pinned (`PYTHONHASHSEED=0`): set and dict orders of strings are then the same
    /// in every run. A Go bubble runs on one processor (`GOMAXPROCS=1`): virtual time makes
    /// CPU free, so parallelism buys nothing, while goroutines woken at one instant on several
    /// processors race for real (mcp-go's progress and answer due together came out in either
    /// order on 2 to 11 of 60 seeds on two cores, on half of them on a larger machine; on one
    /// processor 0 of 180 on an idle machine, 1 to 3 of 60 under heavy load, which `--verify`
    /// shows). The program's stderr goes to `stderr`.
    pub(super) fn spawn_with(&self, stderr: Stdio) -> Result<Child, VirtualError> {
        let mut cmd = match self.runtime {
            Runtime::Python | Runtime::Node => {
                let shim: PathBuf = match self.runtime {
                    Runtime::Python => shims::python()?,
                    _ => shims::node()?,
                };
                let mut cmd = Command::new(&self.interpreter);
                cmd.arg(&shim).args(&self.program);
                cmd
            }
            Runtime::Go => {
                let (binary, name) = match self.interpreter == "go" {
                    true => (shims::go_test_binary(&self.program[0])?, &self.program[1]),
                    false => (PathBuf::from(&self.interpreter), &self.program[0]),
                };
                let mut cmd = Command::new(binary);
                cmd.arg(format!("-test.run=^{name}$"))
                    .env("MCP_SIM_VIRTUAL_PEER", "1")
                    .env("GOMAXPROCS", "1");
                cmd
            }
        };
        if self.runtime == Runtime::Python {
            cmd.env("PYTHONHASHSEED", "0");
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| VirtualError::Start(format!("{}: {e}", self.interpreter)))
    }
}

/// A program's file must be there: a typo is a usage error, not a sweep of runs that never
/// started.
fn existing(file: &str) -> Result<(), VirtualError> {
    match Path::new(file).is_file() {
        true => Ok(()),
        false => Err(VirtualError::Command(format!("no such file: {file}"))),
    }
}

/// `python`, `python3`, `python3.12`, `pypy3`: names of Python interpreters.
fn is_python_name(name: &str) -> bool {
    let rest = name
        .strip_prefix("python")
        .or_else(|| name.strip_prefix("pypy"));
    rest.is_some_and(|r| r.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// `node`, `node20`, `nodejs`: names of Node.js.
fn is_node_name(name: &str) -> bool {
    let rest = name
        .strip_prefix("nodejs")
        .or_else(|| name.strip_prefix("node"));
    rest.is_some_and(|r| r.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn reads_python_and_node_commands() {
        // A file of this crate (unit tests run in its folder) stands for a program.
        let file = file!();
        let line = format!("/venv/bin/python3.12 {file} --stdio");
        let c = PeerCommand::parse(&words(&line)).unwrap();
        assert_eq!(c.words(), words(&line));
        assert_eq!(c.runtime(), Runtime::Python);
        assert!(PeerCommand::parse(&words("python -m my_server")).is_ok());
        let line = format!("/usr/bin/node {file} --http 3000");
        let n = PeerCommand::parse(&words(&line)).unwrap();
        assert_eq!(n.runtime(), Runtime::Node);
        assert_eq!(n.words(), words(&line));
        assert!(n.process_per_run());
        let err = PeerCommand::parse(&words("node no/such/server.js")).unwrap_err();
        assert!(err.to_string().contains("no such file"), "{err}");
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        for bad in [
            "ruby server.rb",
            "python",
            "python -m",
            "python -c pass",
            "python -u s.py",
            "node",
            "node -e 1",
            "node --inspect s.js",
            "",
        ] {
            let err = PeerCommand::parse(&words(bad)).unwrap_err();
            assert!(matches!(err, VirtualError::Command(_)), "{bad}: {err}");
        }
        let err = PeerCommand::parse(&words("ruby server.rb")).unwrap_err();
        assert!(err.to_string().contains("not an interpreter"), "{err}");
        let err = PeerCommand::python(&words("node server.js")).unwrap_err();
        assert!(
            err.to_string().contains("not a Python interpreter"),
            "{err}"
        );
    }
}
