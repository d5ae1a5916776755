//! The reference server a virtual program reaches as a client: the server process it starts
//! (whatever command it names) and whatever URL it connects to. Both the client lane
//! ([`super::run_client`]) and a virtual intermediary's upstream hop (the in-memory lane's
//! bridge, [`crate::lanes::memory::run_virtual_bridge`]) are made of it.
//!
//! The server is `serve`'s ([`crate::lanes::live::serve::server_config`]: its behaviours,
//! mutants and eras), driven by the same sans-IO driver, and recorded from its end exactly as
//! `serve` records a real client: what it read as written, with the policy the client
//! declares, and what it wrote.
//!
//! Between the program and the server, a pipe (stdio, channel 0) and one channel per TCP
//! connection, each way, with a seeded latency: every chunk one side writes reaches the other
//! after a latency drawn from the range, never before an earlier chunk on its channel (a pipe
//! and a connection keep their order). At one instant the server side acts first (what
//! reaches it, then its timers), then what reaches the program ([`Upstream::serve`],
//! [`Upstream::pop_for_program`]): a fixed order, so a run is a function of its seed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;

use super::client_http::{ConnWrite, HttpServer};
use super::{Output, Report, VirtualError, VirtualPeer};
use crate::lanes::live::serve::{reference_driver, ServeConfig};
use crate::lanes::response_writer::ServerWrite;
use crate::lanes::server_driver::{ServerDriver, ServerOutput};
use crate::lanes::SimTrace;
use crate::model::Transport;
use crate::time::Time;
use crate::trace::connections::{numbered, sessions};
use crate::trace::Trace;

enum ToServer {
    Bytes(Vec<u8>),
    /// The program closed the server's stdin.
    Close,
    /// Bytes on a TCP connection.
    ConnBytes(u64, Vec<u8>),
    /// The program closed a TCP connection.
    ConnClose(u64),
}

/// What reaches the program from its upstream.
pub(crate) enum ToProgram {
    /// Bytes on its server process's stdout.
    Bytes(Vec<u8>),
    /// The server process ended: its stdout closes, its exit is seen.
    Exit(i32),
    /// Bytes of a response on a TCP connection.
    ConnBytes(u64, Vec<u8>),
    /// The server closed a TCP connection.
    ConnClose(u64),
}

/// The pipe (stdio, channel 0) and the TCP connections (channel N) one way: what is in
/// flight, each piece with the instant it arrives; on one channel, in the order sent.
struct Pipe<T> {
    queue: BTreeMap<(Time, u64), T>,
    last: BTreeMap<u64, Time>,
    sent: u64,
}

impl<T> Pipe<T> {
    fn new() -> Self {
        Pipe {
            queue: BTreeMap::new(),
            last: BTreeMap::new(),
            sent: 0,
        }
    }
    /// `item`, sent on `channel` at `at`, arrives `latency` later but never before what was
    /// sent on it first.
    fn send(&mut self, channel: u64, at: Time, latency: Duration, item: T) {
        let last = self.last.get(&channel).copied().unwrap_or(Time::ZERO);
        let arrives = (at + latency).max(last);
        self.last.insert(channel, arrives);
        self.sent += 1;
        self.queue.insert((arrives, self.sent), item);
    }
    fn due(&self) -> Option<Time> {
        self.queue.keys().next().map(|(t, _)| *t)
    }
    fn pop_due(&mut self, now: Time) -> Option<T> {
        if self.due().is_some_and(|t| t <= now) {
            self.queue.pop_first().map(|(_, x)| x)
        } else {
            None
        }
    }
    /// Drops what is in flight on `channel` (its end went away).
    fn clear(&mut self, channel: u64, of: impl Fn(&T) -> u64) {
        self.queue.retain(|_, item| of(item) != channel);
        self.last.remove(&channel);
    }
}

impl ToServer {
    fn channel(&self) -> u64 {
        match self {
            ToServer::Bytes(_) | ToServer::Close => 0,
            ToServer::ConnBytes(c, _) | ToServer::ConnClose(c) => *c,
        }
    }
}

impl ToProgram {
    fn channel(&self) -> u64 {
        match self {
            ToProgram::Bytes(_) | ToProgram::Exit(_) => 0,
            ToProgram::ConnBytes(c, _) | ToProgram::ConnClose(c) => *c,
        }
    }
}

/// The reference server behind a virtual program, with the pipe and connections between them
/// and the recording of the server's end.
pub(crate) struct Upstream {
    latency: (Duration, Duration),
    serve: ServeConfig,
    rng: ChaCha8Rng,
    /// The server's end, recorded; its `now` is the lane's clock.
    pub(crate) sink: SimTrace,
    /// The reference server while its process lives.
    server: Option<ServerDriver>,
    /// The reference server behind the program's TCP connections, once it opened one.
    http: Option<HttpServer>,
    /// The program's connections neither side has closed.
    open_conns: BTreeSet<u64>,
    /// The server's stdin is still open (the program has not closed it).
    stdin_open: bool,
    to_server: Pipe<ToServer>,
    to_program: Pipe<ToProgram>,
    /// The command lines of the server processes the program started, in order.
    pub(crate) spawned: Vec<Vec<String>>,
    /// Where in the recording each server process began (an index of `sink`'s events).
    process_starts: Vec<usize>,
}

impl Upstream {
    /// The reference server `serve`, behind a pipe with a one-way `latency` range each way,
    /// drawn from `rng`.
    pub(crate) fn new(serve: ServeConfig, latency: (Duration, Duration), rng: ChaCha8Rng) -> Self {
        Upstream {
            latency,
            serve,
            rng,
            sink: SimTrace::default(),
            server: None,
            http: None,
            open_conns: BTreeSet::new(),
            stdin_open: false,
            to_server: Pipe::new(),
            to_program: Pipe::new(),
            spawned: Vec::new(),
            process_starts: Vec::new(),
        }
    }

    fn latency(&mut self) -> Duration {
        let (lo, hi) = (
            self.latency.0.as_millis() as u64,
            self.latency.1.as_millis() as u64,
        );
        Duration::from_millis(lo + self.rng.next_u64() % (hi.saturating_sub(lo) + 1))
    }

    /// The reference server's next timer.
    fn server_timer(&self) -> Option<Time> {
        let stdio = self.server.as_ref().and_then(|d| d.server().poll_timeout());
        let http = self.http.as_ref().and_then(HttpServer::poll_timeout);
        stdio.into_iter().chain(http).min()
    }

    /// When the server side next has something to do: a message reaches it, or its timer.
    pub(crate) fn server_due(&self) -> Option<Time> {
        self.to_server
            .due()
            .into_iter()
            .chain(self.server_timer())
            .min()
    }

    /// When something next reaches the program.
    pub(crate) fn program_due(&self) -> Option<Time> {
        self.to_program.due()
    }

    /// Something is still on its way to the server.
    pub(crate) fn server_bound(&self) -> bool {
        self.to_server.due().is_some()
    }

    /// The reference server has nothing left running: no job, no HTTP exchange.
    pub(crate) fn settled(&self) -> bool {
        self.server
            .as_ref()
            .is_none_or(|d| d.server().active_jobs() == 0)
            && self.http.as_ref().is_none_or(|h| !h.busy())
    }

    /// The server side at `now` (the lane's clock): what reached it, then its timers.
    pub(crate) fn serve(&mut self, now: Time) {
        self.sink.now = self.sink.now.max(now);
        let now = self.sink.now;
        while let Some(item) = self.to_server.pop_due(now) {
            self.server_input(item);
        }
        if self.server_timer().is_some_and(|t| t <= now) {
            if let Some(d) = self.server.as_mut() {
                d.timers(now);
            }
            self.flush();
            if let Some(h) = self.http.as_mut() {
                h.timers(now, &mut self.sink);
            }
            self.flush_http();
        }
    }

    /// The next thing that reaches the program by `now`.
    pub(crate) fn pop_for_program(&mut self, now: Time) -> Option<ToProgram> {
        let item = self.to_program.pop_due(now)?;
        if let ToProgram::ConnClose(conn) = item {
            self.open_conns.remove(&conn);
        }
        Some(item)
    }

    /// Hands `item` to the program at `now`; its shim's report.
    pub(crate) fn deliver(
        peer: &mut VirtualPeer,
        now: Time,
        item: ToProgram,
    ) -> Result<Report, VirtualError> {
        match item {
            ToProgram::Bytes(bytes) => peer.deliver_child(now, &bytes),
            ToProgram::Exit(code) => peer.exit(now, code),
            ToProgram::ConnBytes(conn, bytes) => peer.deliver_conn(now, conn, &bytes),
            ToProgram::ConnClose(conn) => peer.close_conn(now, conn),
        }
    }

    fn server_input(&mut self, item: ToServer) {
        let now = self.sink.now;
        if let ToServer::ConnBytes(..) | ToServer::ConnClose(_) = item {
            if let Some(http) = self.http.as_mut() {
                match item {
                    ToServer::ConnBytes(conn, bytes) => {
                        http.bytes(now, conn, &bytes, &mut self.sink)
                    }
                    ToServer::ConnClose(conn) => http.closed(now, conn, &mut self.sink),
                    _ => {}
                }
            }
            self.flush_http();
            return;
        }
        let Some(driver) = self.server.as_mut() else {
            return; // the process is gone: nobody reads its pipe
        };
        match item {
            ToServer::Bytes(bytes) => driver.stdio_bytes(now, &bytes, &mut self.sink),
            ToServer::ConnBytes(..) | ToServer::ConnClose(_) => {}
            ToServer::Close => {
                driver.input_closed(now, &mut self.sink);
                self.flush();
                // The reference server exits once its stdin ends (§5.1), after its last line.
                self.server = None;
                let latency = self.latency();
                self.to_program.send(0, now, latency, ToProgram::Exit(0));
                return;
            }
        }
        self.flush();
    }

    /// The server's writes, each sent down the pipe.
    fn flush(&mut self) {
        let now = self.sink.now;
        loop {
            let Some(driver) = self.server.as_mut() else {
                return;
            };
            let Some(out) = driver.poll_io(now, &mut self.sink) else {
                return;
            };
            if let ServerOutput::Write(ServerWrite::Line(line)) = out {
                let latency = self.latency();
                self.to_program
                    .send(0, now, latency, ToProgram::Bytes(line));
            }
        }
    }

    /// The HTTP server's writes, each sent down its connection.
    fn flush_http(&mut self) {
        let now = self.sink.now;
        while let Some((conn, write)) = self.http.as_mut().and_then(HttpServer::poll) {
            let latency = self.latency();
            let item = match write {
                ConnWrite::Bytes(bytes) => ToProgram::ConnBytes(conn, bytes),
                ConnWrite::Close => ToProgram::ConnClose(conn),
            };
            self.to_program.send(conn, now, latency, item);
        }
    }

    /// Takes what the program did towards its upstream at `at` (it started its server, wrote
    /// to it, opened, wrote on or closed a connection); anything else is handed back.
    pub(crate) fn take(&mut self, at: Time, out: Output) -> Result<(), Output> {
        let at = at.max(self.sink.now);
        match out {
            Output::Spawned(argv) => self.start_server(at, argv),
            Output::ChildStdio(bytes) => {
                if self.stdin_open {
                    let latency = self.latency();
                    self.to_server.send(0, at, latency, ToServer::Bytes(bytes));
                }
            }
            Output::Closed => {
                if self.stdin_open {
                    self.stdin_open = false;
                    let latency = self.latency();
                    self.to_server.send(0, at, latency, ToServer::Close);
                }
            }
            Output::Killed(_) => self.kill_server(),
            Output::Connect { conn, .. } => {
                self.open_conns.insert(conn);
                let serve = &self.serve;
                self.http
                    .get_or_insert_with(|| HttpServer::new(serve, Time::ZERO))
                    .connected(conn);
            }
            Output::ConnData { conn, bytes } => {
                let latency = self.latency();
                self.to_server
                    .send(conn, at, latency, ToServer::ConnBytes(conn, bytes));
            }
            Output::ConnClosed { conn } => {
                self.open_conns.remove(&conn);
                let latency = self.latency();
                self.to_server
                    .send(conn, at, latency, ToServer::ConnClose(conn));
            }
            other => return Err(other),
        }
        Ok(())
    }

    /// The program's process ended at `at`: its server's stdin and its connections close with
    /// it.
    pub(crate) fn program_exited(&mut self, at: Time) {
        if self.stdin_open {
            self.stdin_open = false;
            let latency = self.latency();
            self.to_server.send(0, at, latency, ToServer::Close);
        }
        for conn in std::mem::take(&mut self.open_conns) {
            let latency = self.latency();
            self.to_server
                .send(conn, at, latency, ToServer::ConnClose(conn));
        }
    }

    /// The server's end as upstream connections: one per server process the program started
    /// (one at a time), or of an HTTP endpoint one per session ([`sessions`]), numbered where
    /// there are several ([`numbered`]).
    pub(crate) fn recording(&self) -> Trace {
        let events = &self.sink.trace.events;
        let parts: Vec<Trace> = if self.process_starts.len() > 1 {
            let mut bounds = self.process_starts.clone();
            bounds[0] = 0;
            bounds.push(events.len());
            bounds
                .windows(2)
                .map(|w| Trace {
                    events: events[w[0]..w[1]].to_vec(),
                })
                .collect()
        } else {
            sessions(&self.sink.trace)
        };
        numbered(parts)
    }

    fn start_server(&mut self, at: Time, argv: Vec<String>) {
        self.process_starts.push(self.sink.trace.events.len());
        self.server = Some(reference_driver(Transport::Stdio, &self.serve, at));
        self.stdin_open = true;
        self.to_server.clear(0, ToServer::channel);
        self.to_program.clear(0, ToProgram::channel);
        self.spawned.push(argv);
    }

    /// The program killed its server: it reads and writes nothing more, and what was still
    /// in its pipe (a close among it) is lost with it.
    fn kill_server(&mut self) {
        if let Some(mut driver) = self.server.take() {
            driver.input_closed(self.sink.now, &mut self.sink);
        }
        self.stdin_open = false;
        self.to_server.clear(0, ToServer::channel);
        self.to_program.clear(0, ToProgram::channel);
    }
}
