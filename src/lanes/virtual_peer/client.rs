//! A real *client* program under the virtual clock, against the reference server: the lane
//! of `sweep --virtual-client`.
//!
//! The client runs under its runtime's shim in the client role ([`VirtualPeer::spawn_client`]):
//! whatever server command it starts, and whatever URL it connects to, is this lane's
//! reference server ([`super::upstream`]), recorded from its end exactly as `serve` records a
//! real client. So the oracle judges the client as `serve` judges it, on a virtual clock: its
//! own timeouts, retries and cancels fire at their virtual instants, in milliseconds of wall
//! time.
//!
//! Between the two, a pipe and connections with a seeded latency each way. At one instant the
//! lane acts in a fixed order (what reaches the server, the server's timers, what reaches the
//! client, the client's timers), so a run is a function of its seed as long as the client did
//! not escape its shim.
//!
//! The run ends when the client program exits (its server's stdin closes with it, and what
//! the server had still to read is read), when both sides wait for nothing (a client that
//! waits forever), or at the time bound, which the result says.

use std::time::Duration;

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::upstream::Upstream;
use super::{Escape, Output, Report, VirtualError, VirtualPeer};
use crate::lanes::live::serve::ServeConfig;
use crate::lanes::RunResult;
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

struct Lane<'a> {
    bound: Time,
    peer: &'a mut VirtualPeer,
    /// The reference server, the pipe and connections to it, and the lane's clock.
    up: Upstream,
    client_next: Option<Time>,
    client_exit: Option<i32>,
    escapes: Vec<(Time, Escape)>,
    fatal: bool,
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
        bound: config.bound,
        peer,
        up: Upstream::new(config.serve.clone(), config.latency, rng),
        client_next: None,
        client_exit: None,
        escapes: Vec::new(),
        fatal: false,
    };
    lane.absorb(first)?;
    let end = lane.run_loop()?;
    if lane.client_exit.is_none() {
        lane.peer.end()?;
    }
    let complete = lane.up.settled();
    let mut sink = lane.up.sink;
    sink.stats.sim_ms = sink.now.as_millis();
    Ok(ClientRun {
        run: RunResult {
            trace: sink.trace,
            complete,
            stats: sink.stats,
        },
        escapes: lane.escapes,
        end,
        spawned: lane.up.spawned,
    })
}

impl Lane<'_> {
    fn run_loop(&mut self) -> Result<ClientEnd, VirtualError> {
        loop {
            if self.fatal {
                return Ok(ClientEnd::Stopped);
            }
            let alive = self.client_exit.is_none();
            let next = [
                self.up.server_due(),
                self.up.program_due().filter(|_| alive),
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
            if !alive && !self.up.server_bound() {
                return Ok(ClientEnd::Exited(self.client_exit.unwrap_or_default()));
            }
            if next > self.bound {
                return Ok(ClientEnd::Bound);
            }
            self.step(next.max(self.up.sink.now))?;
        }
    }

    /// Everything due at `now`, in the lane's fixed order.
    fn step(&mut self, now: Time) -> Result<(), VirtualError> {
        self.up.serve(now);
        while self.client_exit.is_none() && !self.fatal {
            let Some(item) = self.up.pop_for_program(now) else {
                break;
            };
            let report = Upstream::deliver(self.peer, now, item)?;
            self.absorb(report)?;
        }
        if self.client_exit.is_none() && !self.fatal && self.client_next.is_some_and(|t| t <= now) {
            let report = self.peer.advance(now)?;
            self.absorb(report)?;
        }
        Ok(())
    }

    /// A report of the client's shim: what it did towards its server goes down the pipe, its
    /// next timer is kept.
    fn absorb(&mut self, report: Report) -> Result<(), VirtualError> {
        for e in report.escapes {
            self.escapes.push((report.t, e));
        }
        self.fatal |= report.fatal;
        for (t, out) in report.out {
            match self.up.take(t, out) {
                // Its own stdout is its log.
                Ok(()) | Err(Output::Stdio(_) | Output::Read(_)) => {}
                Err(_) => {
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
            self.up.program_exited(report.t);
        }
        Ok(())
    }
}
