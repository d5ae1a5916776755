//! Virtual peers: real, unmodified server programs (and client programs: [`run_client`]) run
//! inside the simulation, under its virtual clock, through a shim in their own runtime
//! (feature `live`: they are real processes).
//!
//! The shim speaks the model's sans-IO contract across a pipe ([`VirtualPeer`]): mcp-sim
//! delivers bytes (or an HTTP request, or a close) at a virtual instant, the peer runs until
//! it is quiescent (every ready task has run, no worker thread is running, nothing is left
//! but timers and input), and mcp-sim reads back what it wrote, stamped with virtual time, and
//! its next timer deadline, which joins the in-memory lane's event queue exactly as the
//! model's `poll_timeout` does ([`crate::lanes::memory::run_virtual`]). The peer never reads
//! the wall clock: the shim owns its event loop and clock, seeds its entropy, runs its worker
//! threads one at a time while the clock stands still, and names whatever it could not hold
//! ([`Escape`]).
//!
//! Why a shim per runtime and not a whole-process tool: tools that intercept every syscall
//! (Shadow, Hermit) install only from source, and need options that give determinism up for
//! Node.js and CPython; rr needs hardware counters and has no virtual time; libfaketime only
//! offsets or scales the clock. A runtime's own event loop, by contrast, already knows when
//! it is idle and what its next timer is: that is all the contract needs.
//!
//! Why a zygote: an interpreter's start-up (CPython importing an MCP SDK: 0.6 to 1.4 s) is
//! paid once per [`VirtualPeer`]; each run forks a fresh child from it, so a seed costs a
//! fork and the run itself (tens of milliseconds), and no run sees another's state. Node.js
//! cannot fork: each of its runs is a fresh process (about 0.3 s of start-up with an MCP
//! SDK), which the shim starts only once seeded, so that no run sees another's state either.
//!
//! The runtimes are CPython and Node.js ([`PeerCommand::parse`]); the shims ship inside the
//! crate (and the wheel and the npm package) and are written to disk on first use.

mod client;
mod client_http;
mod command;
mod driver;
mod service;
mod shims;
mod upstream;

pub use client::{run_client, ClientEnd, ClientLane, ClientRun};
pub use command::{PeerCommand, Runtime};
pub(crate) use driver::{VirtualServer, VirtualWrite};
pub use service::ServiceModel;
pub(crate) use upstream::Upstream;

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::model::Transport;
use crate::time::Time;

/// What went wrong with a virtual peer (not with the program it runs: that is judged).
#[derive(Debug)]
pub enum VirtualError {
    /// The command is not one the shim can run (which runtime, which program).
    Command(String),
    /// The interpreter could not be started, or the shim could not be written.
    Start(String),
    /// The shim said something outside the control protocol, or went away mid-run.
    Protocol(String),
}

impl fmt::Display for VirtualError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VirtualError::Command(why) => write!(f, "cannot run this program virtually: {why}"),
            VirtualError::Start(why) => write!(f, "the virtual peer did not start: {why}"),
            VirtualError::Protocol(why) => write!(f, "the virtual peer broke its protocol: {why}"),
        }
    }
}

impl std::error::Error for VirtualError {}

/// Something the shim could not hold deterministic: a real socket, a subprocess, a thread of
/// the program's own, a worker thread that ran past its bound. A run with an escape is
/// `not-replayable`, never judged.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
pub struct Escape {
    /// What escaped.
    pub what: String,
    /// Where it happened (`file:line` in the program, or the shim's part).
    #[serde(rename = "where")]
    pub at: String,
}

impl fmt::Display for Escape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.what, self.at)
    }
}

/// One thing the peer wrote (or read), at a virtual instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Bytes on its stdout.
    Stdio(Vec<u8>),
    /// It read the next this many bytes of its stdin (in order with what it wrote).
    Read(usize),
    /// The head of its response on `stream`: status and headers (names in lower case).
    Head {
        /// The stream (the client's HTTP exchange).
        stream: u64,
        /// The status code.
        status: u16,
        /// The headers.
        headers: BTreeMap<String, String>,
    },
    /// A piece of a response's body.
    Body {
        /// The stream.
        stream: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// The response's end.
    End {
        /// The stream.
        stream: u64,
    },
    /// A client program started its server process (this command line): mcp-sim's reference
    /// server takes its place.
    Spawned(Vec<String>),
    /// Bytes a client program wrote on its server process's stdin.
    ChildStdio(Vec<u8>),
    /// A client program closed its server's stdin.
    Closed,
    /// A client program sent its server process this signal (it is gone at once).
    Killed(i32),
    /// A client program opened TCP connection `conn` (to whatever host and port: the lane's
    /// HTTP server takes it).
    Connect {
        /// The connection.
        conn: u64,
        /// The host it named.
        host: String,
        /// The port it named.
        port: u16,
    },
    /// Bytes a client program wrote on connection `conn`.
    ConnData {
        /// The connection.
        conn: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// A client program closed connection `conn`.
    ConnClosed {
        /// The connection.
        conn: u64,
    },
}

/// What the peer reported once quiescent.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Its virtual time.
    pub t: Time,
    /// What it wrote since the last report, in order, each with its virtual time.
    pub out: Vec<(Time, Output)>,
    /// Its next timer's deadline.
    pub next: Option<Time>,
    /// Escapes first seen since the last report.
    pub escapes: Vec<Escape>,
    /// The program ended with this exit code (its process is gone).
    pub exit: Option<i32>,
    /// An escape the run cannot go on after (a worker thread that never finished).
    pub fatal: bool,
}

#[derive(Deserialize)]
struct RawReport {
    #[serde(default)]
    t: u64,
    #[serde(default)]
    out: Vec<RawOutput>,
    next: Option<u64>,
    #[serde(default)]
    escapes: Vec<Escape>,
    exit: Option<i32>,
    #[serde(default)]
    fatal: bool,
    reaped: Option<i32>,
}

#[derive(Deserialize)]
struct RawOutput {
    t: u64,
    data: Option<String>,
    stream: Option<u64>,
    status: Option<u16>,
    headers: Option<BTreeMap<String, String>>,
    body: Option<String>,
    #[serde(default)]
    end: bool,
    read: Option<usize>,
    spawned: Option<Vec<String>>,
    #[serde(default)]
    closed: bool,
    killed: Option<i32>,
    #[serde(default)]
    child: bool,
    connect: Option<u64>,
    conn: Option<u64>,
    host: Option<String>,
    port: Option<u16>,
}

impl RawOutput {
    fn output(self) -> Result<(Time, Output), VirtualError> {
        let t = Time::from_millis(self.t);
        if let (Some(n), None, None) = (self.read, &self.data, self.stream) {
            return Ok((t, Output::Read(n)));
        }
        if let Some(conn) = self.connect {
            let host = self.host.unwrap_or_default();
            let port = self.port.unwrap_or_default();
            return Ok((t, Output::Connect { conn, host, port }));
        }
        if let Some(conn) = self.conn {
            return match (self.data, self.closed) {
                (Some(data), false) => Ok((
                    t,
                    Output::ConnData {
                        conn,
                        bytes: text_bytes(&data),
                    },
                )),
                (None, true) => Ok((t, Output::ConnClosed { conn })),
                _ => Err(VirtualError::Protocol(
                    "a connection's output of no known shape".into(),
                )),
            };
        }
        if let Some(argv) = self.spawned {
            return Ok((t, Output::Spawned(argv)));
        }
        if self.child {
            return match self.data {
                Some(data) => Ok((t, Output::ChildStdio(text_bytes(&data)))),
                None => Err(VirtualError::Protocol(
                    "a server process's output of no known shape".into(),
                )),
            };
        }
        if self.closed {
            return Ok((t, Output::Closed));
        }
        if let Some(signal) = self.killed {
            return Ok((t, Output::Killed(signal)));
        }
        let out = match (self.data, self.stream, self.status, self.body, self.end) {
            (Some(data), None, ..) => Output::Stdio(text_bytes(&data)),
            (None, Some(stream), Some(status), None, false) => Output::Head {
                stream,
                status,
                headers: self.headers.unwrap_or_default(),
            },
            (None, Some(stream), None, Some(body), false) => Output::Body {
                stream,
                bytes: text_bytes(&body),
            },
            (None, Some(stream), None, None, true) => Output::End { stream },
            _ => return Err(VirtualError::Protocol("an output of no known shape".into())),
        };
        Ok((t, out))
    }
}

/// The shim carries bytes as JSON text: UTF-8, a byte that is not UTF-8 arriving as U+FFFD
/// (the wire's messages are JSON, which is UTF-8).
fn text_bytes(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

/// The shim's process: the zygote (Python), or the process of one run (Node.js).
struct Process {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// A running shim: one interpreter (the zygote) that forks a fresh peer for each run, or, for
/// a runtime that cannot fork, a fresh process per run.
pub struct VirtualPeer {
    command: PeerCommand,
    /// Where the program's stderr goes (appended to by each process after the first).
    stderr_log: Option<PathBuf>,
    /// The zygote, or the current run's process; `None` between two runs of a runtime that
    /// starts a process per run.
    process: Option<Process>,
    /// The runtime's version, as the shim reported it.
    runtime: String,
    /// The shim cannot see its program's next timer: it runs ahead on `advance`, to its
    /// target or its program's first write before it (Go's bubbles).
    lookahead: bool,
    /// A run's child is alive.
    in_run: bool,
    /// The seeded service time of each input, if any ([`ServiceModel`]).
    service_model: Option<ServiceModel>,
    /// The current run's draws from it.
    service: Option<service::Service>,
}

impl fmt::Debug for VirtualPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VirtualPeer")
            .field("command", &self.command)
            .field("runtime", &self.runtime)
            .finish()
    }
}

impl VirtualPeer {
    /// Starts the shim for `command` and waits until it is ready for a run (a zygote has
    /// imported what the program imports). The program's stderr (its logs) goes to
    /// `stderr_log`, or is dropped with `None`; when the shim fails to start, the error
    /// quotes the log's end.
    pub fn start(
        command: &PeerCommand,
        stderr_log: Option<&Path>,
    ) -> Result<VirtualPeer, VirtualError> {
        if let Some(path) = stderr_log {
            std::fs::File::create(path).map_err(|e| {
                VirtualError::Start(format!("cannot write {}: {e}", path.display()))
            })?;
        }
        let mut peer = VirtualPeer {
            command: command.clone(),
            stderr_log: stderr_log.map(Path::to_path_buf),
            process: None,
            runtime: String::new(),
            lookahead: false,
            in_run: false,
            service_model: None,
            service: None,
        };
        peer.start_process()?;
        Ok(peer)
    }

    /// Starts the shim's process and reads its greeting.
    fn start_process(&mut self) -> Result<(), VirtualError> {
        let stderr = match &self.stderr_log {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(path)
                    .map_err(|e| {
                        VirtualError::Start(format!("cannot write {}: {e}", path.display()))
                    })?,
            ),
            None => Stdio::null(),
        };
        let mut child = self.command.spawn_with(stderr)?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        self.process = Some(Process {
            child,
            stdin,
            stdout,
        });
        let hello = self.read_value().map_err(|e| {
            let log = self
                .stderr_log
                .as_ref()
                .and_then(|p| std::fs::read_to_string(p).ok())
                .map(|text| tail(&text, 20))
                .unwrap_or_default();
            VirtualError::Start(format!("{e}{log}"))
        })?;
        self.runtime = runtime_of(&hello)?;
        self.lookahead = hello.get("lookahead") == Some(&Value::Bool(true));
        Ok(())
    }

    /// The command it runs.
    pub fn command(&self) -> &PeerCommand {
        &self.command
    }

    /// Whether the shim runs ahead on [`VirtualPeer::advance`] (to its target, or to its
    /// program's first write before it) instead of reporting its next timer: the lane then
    /// advances it to each of its own instants before acting at it.
    pub fn lookahead(&self) -> bool {
        self.lookahead
    }

    /// Gives each input of the runs to come a seeded service time and tie order (`None`:
    /// none, the default). The shim must take them: CPython's does
    /// ([`PeerCommand::takes_service_time`]).
    pub fn set_service(&mut self, model: Option<ServiceModel>) {
        self.service_model = model;
    }

    /// The runtime and its version (`CPython 3.11.7`).
    pub fn runtime(&self) -> &str {
        &self.runtime
    }

    /// Starts a fresh run of the program at virtual time `t`, its entropy seeded from `seed`;
    /// returns its first report (the program idle, waiting for input). A run still going is
    /// ended first.
    pub fn spawn(
        &mut self,
        seed: u64,
        t: Time,
        transport: Transport,
    ) -> Result<Report, VirtualError> {
        self.spawn_as(seed, t, transport, "server")
    }

    /// Starts a fresh run of a *client* program at `t`, seeded from `seed`: the server process
    /// it starts is the lane's (its stdin is [`Output::ChildStdio`], its stdout
    /// [`VirtualPeer::deliver_child`], its end [`VirtualPeer::exit`]).
    pub fn spawn_client(&mut self, seed: u64, t: Time) -> Result<Report, VirtualError> {
        self.spawn_as(seed, t, Transport::Stdio, "client")
    }

    /// Starts a fresh run of an *intermediary* program at `t`, seeded from `seed`: its front
    /// is served on `transport` as a server's is, and the server process it starts and the
    /// connections it opens are the lane's, as a client's are.
    pub fn spawn_bridge(
        &mut self,
        seed: u64,
        t: Time,
        transport: Transport,
    ) -> Result<Report, VirtualError> {
        self.spawn_as(seed, t, transport, "bridge")
    }

    fn spawn_as(
        &mut self,
        seed: u64,
        t: Time,
        transport: Transport,
        role: &str,
    ) -> Result<Report, VirtualError> {
        self.end()?;
        if self.process.is_none() {
            self.start_process()?;
        }
        self.send(json!({
            "op": "spawn", "seed": seed, "t": t.as_millis(),
            "transport": transport.to_string(), "role": role,
        }))?;
        self.service = self.service_model.map(|m| service::Service::new(m, seed));
        self.in_run = true;
        self.report()
    }

    /// Bytes from the server on a client program's connection `conn` at `t`.
    pub fn deliver_conn(
        &mut self,
        t: Time,
        conn: u64,
        bytes: &[u8],
    ) -> Result<Report, VirtualError> {
        let data = String::from_utf8_lossy(bytes);
        self.input_op(json!({"op": "deliver", "t": t.as_millis(), "conn": conn, "data": data}))
    }

    /// The server closed a client program's connection `conn` at `t`.
    pub fn close_conn(&mut self, t: Time, conn: u64) -> Result<Report, VirtualError> {
        self.input_op(json!({"op": "close", "t": t.as_millis(), "conn": conn}))
    }

    /// Bytes on the stdout of a client program's server process at `t`.
    pub fn deliver_child(&mut self, t: Time, bytes: &[u8]) -> Result<Report, VirtualError> {
        let data = String::from_utf8_lossy(bytes);
        self.input_op(json!({"op": "deliver", "t": t.as_millis(), "child": true, "data": data}))
    }

    /// A client program's server process ended at `t` with `code`: its pipes close and its
    /// exit is seen.
    pub fn exit(&mut self, t: Time, code: i32) -> Result<Report, VirtualError> {
        self.command_op(json!({"op": "exit", "t": t.as_millis(), "code": code}))
    }

    /// Bytes on the program's stdin at `t`.
    pub fn deliver(&mut self, t: Time, bytes: &[u8]) -> Result<Report, VirtualError> {
        let data = String::from_utf8_lossy(bytes);
        self.input_op(json!({"op": "deliver", "t": t.as_millis(), "data": data}))
    }

    /// The program's stdin ends at `t`.
    pub fn close(&mut self, t: Time) -> Result<Report, VirtualError> {
        self.input_op(json!({"op": "close", "t": t.as_millis()}))
    }

    /// An input: with a service model, its seeded service time and tie order go with it.
    fn input_op(&mut self, mut cmd: Value) -> Result<Report, VirtualError> {
        if let Some(service) = self.service.as_mut() {
            service.stamp(&mut cmd);
        }
        self.command_op(cmd)
    }

    /// The clock moves to `t`: the timers due by then fire.
    pub fn advance(&mut self, t: Time) -> Result<Report, VirtualError> {
        self.command_op(json!({"op": "advance", "t": t.as_millis()}))
    }

    /// An HTTP request on `stream` at `t`, handed to the program's ASGI application.
    pub fn request(
        &mut self,
        t: Time,
        stream: u64,
        method: &str,
        headers: &BTreeMap<String, String>,
        body: &[u8],
    ) -> Result<Report, VirtualError> {
        let body = String::from_utf8_lossy(body);
        self.input_op(json!({
            "op": "request", "t": t.as_millis(), "stream": stream, "method": method,
            "path": "/mcp", "headers": headers, "body": body,
        }))
    }

    /// The client went away from `stream` at `t`.
    pub fn disconnect(&mut self, t: Time, stream: u64) -> Result<Report, VirtualError> {
        self.input_op(json!({"op": "disconnect", "t": t.as_millis(), "stream": stream}))
    }

    /// Ends the current run, if any: its process exits without another report.
    pub fn end(&mut self) -> Result<(), VirtualError> {
        if !self.in_run {
            return Ok(());
        }
        self.send(json!({"op": "end"}))?;
        self.reaped()?;
        Ok(())
    }

    /// Waits for the run's process to end; its exit status.
    fn reaped(&mut self) -> Result<i32, VirtualError> {
        self.in_run = false;
        if self.command.process_per_run() {
            let mut process = self.process.take().expect("a run's process");
            drop(process.stdin);
            let status = process
                .child
                .wait()
                .map_err(|e| VirtualError::Protocol(format!("waiting for the peer: {e}")))?;
            return Ok(exit_code(status));
        }
        loop {
            let v = self.read_value()?;
            if let Some(status) = v.get("reaped").and_then(Value::as_i64) {
                return Ok(status as i32);
            }
        }
    }

    fn command_op(&mut self, cmd: Value) -> Result<Report, VirtualError> {
        if !self.in_run {
            return Err(VirtualError::Protocol(format!(
                "{} with no run going",
                cmd["op"]
            )));
        }
        self.send(cmd)?;
        self.report()
    }

    fn send(&mut self, cmd: Value) -> Result<(), VirtualError> {
        let mut line = cmd.to_string();
        line.push('\n');
        let Some(process) = self.process.as_mut() else {
            return Err(VirtualError::Protocol("no process to send to".into()));
        };
        process
            .stdin
            .write_all(line.as_bytes())
            .and_then(|()| process.stdin.flush())
            .map_err(|e| VirtualError::Protocol(format!("the shim's pipe: {e}")))
    }

    fn read_value(&mut self) -> Result<Value, VirtualError> {
        let mut line = String::new();
        let Some(process) = self.process.as_mut() else {
            return Err(VirtualError::Protocol("no process to read from".into()));
        };
        let n = process
            .stdout
            .read_line(&mut line)
            .map_err(|e| VirtualError::Protocol(format!("the shim's pipe: {e}")))?;
        if n == 0 {
            let status = process.child.try_wait().ok().flatten();
            return Err(VirtualError::Protocol(match status {
                Some(s) => format!("the shim exited ({s})"),
                None => "the shim closed its pipe".into(),
            }));
        }
        serde_json::from_str(&line)
            .map_err(|e| VirtualError::Protocol(format!("{e} in {:?}", line.trim_end())))
    }

    /// The next report of the run. When the program's process is gone (it exited, or died),
    /// the report says so and the run is over.
    fn report(&mut self) -> Result<Report, VirtualError> {
        let value = match self.read_value() {
            // A run's own process that died without a last report (killed, or ended below
            // its runtime) ends its run as a zygote's child does.
            Err(_) if self.command.process_per_run() && self.process.is_some() => {
                let status = self.reaped()?;
                return Ok(Report {
                    exit: Some(status),
                    ..Report::default()
                });
            }
            other => other?,
        };
        let raw: RawReport = serde_json::from_value(value)
            .map_err(|e| VirtualError::Protocol(format!("a report: {e}")))?;
        if let Some(status) = raw.reaped {
            // Died without a last report (killed, or exited below Python).
            self.in_run = false;
            return Ok(Report {
                exit: Some(status),
                ..Report::default()
            });
        }
        let mut report = Report {
            t: Time::from_millis(raw.t),
            out: raw
                .out
                .into_iter()
                .map(RawOutput::output)
                .collect::<Result<_, _>>()?,
            next: raw.next.map(Time::from_millis),
            escapes: raw.escapes,
            exit: raw.exit,
            fatal: raw.fatal,
        };
        if report.exit.is_some() || report.fatal {
            // The process ends after this report; the zygote (or its own exit) says how.
            let status = self.reaped()?;
            report.exit.get_or_insert(status);
        }
        Ok(report)
    }
}

/// The last `n` lines of `text`, indented under a heading, for an error message.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    let mut out = String::from("\nthe program's stderr ends with:");
    for line in &lines[from..] {
        out.push_str("\n  ");
        out.push_str(line);
    }
    out
}

impl Drop for VirtualPeer {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
    }
}

/// The runtime named by a shim's greeting: `{"python": VERSION, "fixed_addresses": B}` or
/// `{"node": VERSION}` or `{"go": VERSION, "lookahead": true}`.
fn runtime_of(hello: &Value) -> Result<String, VirtualError> {
    if let Some(version) = hello.get("node").and_then(Value::as_str) {
        return Ok(format!("Node.js {version}"));
    }
    if let Some(version) = hello.get("go").and_then(Value::as_str) {
        return Ok(format!("Go {}", version.trim_start_matches("go")));
    }
    let version = hello
        .get("python")
        .and_then(Value::as_str)
        .ok_or_else(|| VirtualError::Start(format!("an unexpected greeting: {hello}")))?;
    // Without fixed addresses, objects hashed by identity may be ordered differently in
    // another zygote (a later replay), though never in two runs of one.
    Ok(
        match hello.get("fixed_addresses") == Some(&Value::Bool(true)) {
            true => format!("CPython {version}"),
            false => format!("CPython {version}, address randomization on"),
        },
    )
}

/// A process's exit code, or 128 + the signal that ended it.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return 128 + signal;
        }
    }
    status.code().unwrap_or(-1)
}
