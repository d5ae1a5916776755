//! A real *client* program under the virtual clock, against the reference server: the lane
//! of `sweep --virtual-client`.
//!
//! The client runs under its runtime's shim in the client role ([`VirtualPeer::spawn_client`]):
//! whatever server command it starts, the process it gets is this lane's, whose stdin is what
//! the client writes and whose stdout is what the reference server answers. The server is
//! `serve`'s (its behaviours, mutants and eras, [`crate::lanes::live::serve::server_config`]),
//! driven by the same sans-IO driver, and recorded from its end exactly as `serve` records a
//! real client: what it read as written, with the policy the client declares, and what it
//! wrote. So the oracle judges the client as `serve` judges it, on a virtual clock: its own
//! timeouts, retries and cancels fire at their virtual instants, in milliseconds of wall time.
//!
//! Between the two, a pipe with a seeded latency each way: every chunk one side writes
//! reaches the other after a latency drawn from the run's range, never before an earlier
//! chunk (a pipe keeps its order). At one instant the lane acts in a fixed order (what reaches
//! the server, the server's timers, what reaches the client, the client's timers), so a run is
//! a function of its seed as long as the client did not escape its shim.
//!
//! The run ends when the client program exits (its server's stdin closes with it, and what
//! the server had still to read is read), when both sides wait for nothing (a client that
//! waits forever), or at the time bound, which the result says.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::client_http::{ConnWrite, HttpServer};
use super::{Escape, Output, Report, VirtualError, VirtualPeer};
use crate::lanes::live::serve::{reference_driver, ServeConfig};
use crate::lanes::response_writer::ServerWrite;
use crate::lanes::server_driver::{ServerDriver, ServerOutput};
use crate::lanes::{RunResult, SimTrace};
use crate::model::Transport;
use crate::time::Time;

/// What a client run is made of (its seed apart).
#[derive(Debug, Clone)]
pub struct ClientLane {
    /// One-way latency of the pipe, each way: `(lo, hi)`.
    pub latency: (Duration, Duration),
    /// The reference server: its mutants, eras, keep-alive and the policy the client declares.
    pub serve: ServeConfig,
    /// The run stops here (virtual time) if the client has not ended by then.
    pub bound: Time,
}

/// How a client run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEnd {
    /// The program exited with this code.
    Exited(i32),
    /// Nothing was left to happen, yet the program had not exited (it waits for nothing).
    Idle,
    /// The time bound came first.
    Bound,
    /// The shim could not go on (a fatal escape).
    Stopped,
}

/// One run of a client program.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// The trace (the server's end) and counters.
    pub run: RunResult,
    /// What the client did that its shim could not hold deterministic, with when.
    pub escapes: Vec<(Time, Escape)>,
    /// How it ended.
    pub end: ClientEnd,
    /// The command lines of the server processes the client started, in order.
    pub spawned: Vec<Vec<String>>,
}

enum ToServer {
    Bytes(Vec<u8>),
    /// The client closed the server's stdin.
    Close,
    /// Bytes on a TCP connection.
    ConnBytes(u64, Vec<u8>),
    /// The client closed a TCP connection.
    ConnClose(u64),
}

enum ToClient {
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

impl ToClient {
    fn channel(&self) -> u64 {
        match self {
            ToClient::Bytes(_) | ToClient::Exit(_) => 0,
            ToClient::ConnBytes(c, _) | ToClient::ConnClose(c) => *c,
        }
    }
}

struct Lane<'a> {
    config: &'a ClientLane,
    peer: &'a mut VirtualPeer,
    rng: ChaCha8Rng,
    sink: SimTrace,
    /// The reference server while its process lives.
    server: Option<ServerDriver>,
    /// The reference server behind the client's TCP connections, once it opened one.
    http: Option<HttpServer>,
    /// The client's connections neither side has closed.
    open_conns: BTreeSet<u64>,
    /// The server's stdin is still open (the client has not closed it).
    stdin_open: bool,
    to_server: Pipe<ToServer>,
    to_client: Pipe<ToClient>,
    client_next: Option<Time>,
    client_exit: Option<i32>,
    escapes: Vec<(Time, Escape)>,
    fatal: bool,
    spawned: Vec<Vec<String>>,
}

/// Runs `peer`'s client program once, seeded from `seed`, against the lane's reference
/// server. An error is the shim's failure (it would not start, or broke its protocol), not
/// the program's.
pub fn run_client(
    config: &ClientLane,
    seed: u64,
    peer: &mut VirtualPeer,
) -> Result<ClientRun, VirtualError> {
    // The pipe's latencies have a stream of their own: the program's entropy is the seed's.
    let rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7069_7065_6c61_6e65);
    let first = peer.spawn_client(seed, Time::ZERO)?;
    let mut lane = Lane {
        config,
        peer,
        rng,
        sink: SimTrace::default(),
        server: None,
        http: None,
        open_conns: BTreeSet::new(),
        stdin_open: false,
        to_server: Pipe::new(),
        to_client: Pipe::new(),
        client_next: None,
        client_exit: None,
        escapes: Vec::new(),
        fatal: false,
        spawned: Vec::new(),
    };
    lane.absorb(first)?;
    let end = lane.run_loop()?;
    if lane.client_exit.is_none() {
        lane.peer.end()?;
    }
    let complete = lane
        .server
        .as_ref()
        .is_none_or(|d| d.server().active_jobs() == 0)
        && lane.http.as_ref().is_none_or(|h| !h.busy());
    let mut stats = lane.sink.stats;
    stats.sim_ms = lane.sink.now.as_millis();
    Ok(ClientRun {
        run: RunResult {
            trace: lane.sink.trace,
            complete,
            stats,
        },
        escapes: lane.escapes,
        end,
        spawned: lane.spawned,
    })
}

impl Lane<'_> {
    fn latency(&mut self) -> Duration {
        let (lo, hi) = (
            self.config.latency.0.as_millis() as u64,
            self.config.latency.1.as_millis() as u64,
        );
        Duration::from_millis(lo + self.rng.next_u64() % (hi.saturating_sub(lo) + 1))
    }

    fn server_timer(&self) -> Option<Time> {
        let stdio = self.server.as_ref().and_then(|d| d.server().poll_timeout());
        let http = self.http.as_ref().and_then(HttpServer::poll_timeout);
        stdio.into_iter().chain(http).min()
    }

    fn run_loop(&mut self) -> Result<ClientEnd, VirtualError> {
        loop {
            if self.fatal {
                return Ok(ClientEnd::Stopped);
            }
            let alive = self.client_exit.is_none();
            let next = [
                self.to_server.due(),
                self.server_timer(),
                self.to_client.due().filter(|_| alive),
                self.client_next.filter(|_| alive),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else {
                return Ok(match self.client_exit {
                    Some(code) => ClientEnd::Exited(code),
                    None => ClientEnd::Idle,
                });
            };
            // Once the client is gone, the server's own timers alone do not keep the run.
            if !alive && self.to_server.due().is_none() {
                return Ok(ClientEnd::Exited(self.client_exit.unwrap_or_default()));
            }
            if next > self.config.bound {
                return Ok(ClientEnd::Bound);
            }
            self.sink.now = self.sink.now.max(next);
            self.step()?;
        }
    }

    /// Everything due at the lane's `now`, in the lane's fixed order.
    fn step(&mut self) -> Result<(), VirtualError> {
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
        while self.client_exit.is_none() && !self.fatal {
            let Some(item) = self.to_client.pop_due(now) else {
                break;
            };
            let report = match item {
                ToClient::Bytes(bytes) => self.peer.deliver(now, &bytes)?,
                ToClient::Exit(code) => self.peer.exit(now, code)?,
                ToClient::ConnBytes(conn, bytes) => self.peer.deliver_conn(now, conn, &bytes)?,
                ToClient::ConnClose(conn) => {
                    self.open_conns.remove(&conn);
                    self.peer.close_conn(now, conn)?
                }
            };
            self.absorb(report)?;
        }
        if self.client_exit.is_none() && !self.fatal && self.client_next.is_some_and(|t| t <= now) {
            let report = self.peer.advance(now)?;
            self.absorb(report)?;
        }
        Ok(())
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
                self.to_client.send(0, now, latency, ToClient::Exit(0));
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
                self.to_client.send(0, now, latency, ToClient::Bytes(line));
            }
        }
    }

    /// The HTTP server's writes, each sent down its connection.
    fn flush_http(&mut self) {
        let now = self.sink.now;
        while let Some((conn, write)) = self.http.as_mut().and_then(HttpServer::poll) {
            let latency = self.latency();
            let item = match write {
                ConnWrite::Bytes(bytes) => ToClient::ConnBytes(conn, bytes),
                ConnWrite::Close => ToClient::ConnClose(conn),
            };
            self.to_client.send(conn, now, latency, item);
        }
    }

    /// A report of the client's shim: what it wrote goes down the pipe, a server it started
    /// starts, its next timer is kept.
    fn absorb(&mut self, report: Report) -> Result<(), VirtualError> {
        for e in report.escapes {
            self.escapes.push((report.t, e));
        }
        self.fatal |= report.fatal;
        for (t, out) in report.out {
            let at = t.max(self.sink.now);
            match out {
                Output::Spawned(argv) => self.start_server(at, argv),
                Output::Stdio(bytes) if self.stdin_open => {
                    let latency = self.latency();
                    self.to_server.send(0, at, latency, ToServer::Bytes(bytes));
                }
                Output::Closed if self.stdin_open => {
                    self.stdin_open = false;
                    let latency = self.latency();
                    self.to_server.send(0, at, latency, ToServer::Close);
                }
                Output::Killed(_) => self.kill_server(),
                Output::Connect { conn, .. } => {
                    self.open_conns.insert(conn);
                    let serve = &self.config.serve;
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
                Output::Stdio(_) | Output::Closed | Output::Read(_) => {}
                Output::Head { .. } | Output::Body { .. } | Output::End { .. } => {
                    return Err(VirtualError::Protocol(
                        "a client program's shim reported an HTTP response".into(),
                    ))
                }
            }
        }
        self.client_next = report.next;
        if let Some(code) = report.exit {
            self.client_exit = Some(code);
            // Its pipes and connections close with it.
            if self.stdin_open {
                self.stdin_open = false;
                let latency = self.latency();
                self.to_server.send(0, report.t, latency, ToServer::Close);
            }
            for conn in std::mem::take(&mut self.open_conns) {
                let latency = self.latency();
                self.to_server
                    .send(conn, report.t, latency, ToServer::ConnClose(conn));
            }
        }
        Ok(())
    }

    fn start_server(&mut self, at: Time, argv: Vec<String>) {
        self.server = Some(reference_driver(Transport::Stdio, &self.config.serve, at));
        self.stdin_open = true;
        self.to_server.clear(0, ToServer::channel);
        self.to_client.clear(0, ToClient::channel);
        self.spawned.push(argv);
    }

    /// The client killed its server: it reads and writes nothing more, and what was still in
    /// its pipe (a close among it) is lost with it.
    fn kill_server(&mut self) {
        if let Some(mut driver) = self.server.take() {
            driver.input_closed(self.sink.now, &mut self.sink);
        }
        self.stdin_open = false;
        self.to_server.clear(0, ToServer::channel);
        self.to_client.clear(0, ToClient::channel);
    }
}
