//! Seeded runs of a real *client* program under the virtual clock (feature `live`): what a
//! seed decides, and the judging of one seed, checked for determinism.
//!
//! A client decides its own calls, timeouts and cancels; a seed decides the rest: the
//! latency of the pipe between the client and the reference server (the plan's range, or the
//! seed's own from the sweep's ranges), and with it when every message arrives, so the
//! client's timers race the server's answers at a different instant in each seed. The server
//! is `serve`'s ([`ClientPlan::serve`]: its mutants, its eras, the timeout policy the client
//! declares, recorded on every request it covers) and the oracle judges the client from the
//! server's end, as `serve` does.
//!
//! As for servers ([`crate::virtual_run`]), determinism is checked, never assumed: with
//! `verify` a seed runs twice and two runs that differ are [`Status::NotReplayable`], as is
//! a run whose program escaped its shim. A run in which no `tools/call` reached the server,
//! or none was answered or cancelled, exercised nothing and says so.

use std::time::Duration;

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::lanes::live::serve::ServeConfig;
use crate::lanes::virtual_peer::{
    run_client, ClientEnd, ClientLane, Escape, VirtualError, VirtualPeer,
};
use crate::oracle::{self, OracleConfig};
use crate::run::Judged;
use crate::scenario::knobs;
use crate::time::Time;
use crate::trace::{EventKind, Side, Trace};
use crate::virtual_run::{divergence, Status};
use crate::wire::{DecodeOptions, Message};

/// The longest a client run may take, in virtual ms, unless the plan says otherwise: ten
/// minutes, past every SDK's default request timeout.
pub const DEFAULT_BOUND_MS: u64 = 600_000;

/// What a seed of a virtual client sweep is drawn from.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    /// One-way latency in ms, `(lo, hi)`; `None`: the seed's own range.
    pub latency_ms: Option<(u64, u64)>,
    /// The reference server the client talks to, as `serve` runs it.
    pub serve: ServeConfig,
    /// How the oracle judges.
    pub oracle: OracleConfig,
    /// A run stops at this virtual instant, in ms.
    pub bound_ms: u64,
}

impl Default for ClientPlan {
    fn default() -> Self {
        ClientPlan {
            latency_ms: None,
            serve: ServeConfig::default(),
            oracle: OracleConfig::default(),
            bound_ms: DEFAULT_BOUND_MS,
        }
    }
}

impl ClientPlan {
    /// Checks the knobs; the error names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self
            .latency_ms
            .is_some_and(|(lo, hi)| lo > hi || hi > 60_000)
        {
            return Err("--latency-ms must be A..B with A <= B <= 60000".into());
        }
        if self.bound_ms == 0 {
            return Err("--bound-ms must be above 0".into());
        }
        Ok(())
    }

    /// The latency range of `seed`, in ms.
    pub fn latency(&self, seed: u64) -> (u64, u64) {
        self.latency_ms.unwrap_or_else(|| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            knobs::LATENCIES_MS[(rng.next_u64() % knobs::LATENCIES_MS.len() as u64) as usize]
        })
    }

    fn lane(&self, seed: u64) -> ClientLane {
        let (lo, hi) = self.latency(seed);
        ClientLane {
            latency: (Duration::from_millis(lo), Duration::from_millis(hi)),
            serve: self.serve.clone(),
            bound: Time::from_millis(self.bound_ms),
        }
    }
}

/// One seed of a virtual client sweep, judged.
#[derive(Debug, Clone)]
pub struct ClientJudged {
    /// The seed.
    pub seed: u64,
    /// Its latency range, in ms.
    pub latency_ms: (u64, u64),
    /// The run (the server's end) and its verdict.
    pub judged: Judged,
    /// How the client's run ended.
    pub end: ClientEnd,
    /// The command lines of the server processes it started.
    pub spawned: Vec<Vec<String>>,
    /// Its escapes, with the virtual time each was seen.
    pub escapes: Vec<(Time, Escape)>,
    /// How it stands.
    pub status: Status,
}

impl ClientJudged {
    /// The client broke a MUST rule (or the policy it declares) and stands as a finding; a
    /// run that is not replayable never does.
    pub fn fails(&self) -> bool {
        self.status == Status::Judged
            && (self.judged.fails() || self.judged.verdict.breaks_declared_policy())
    }

    /// The seed's knobs in one line, for reports.
    pub fn describe(&self) -> String {
        format!(
            "virtual client: latency={}..{}ms end={}",
            self.latency_ms.0,
            self.latency_ms.1,
            match &self.end {
                ClientEnd::Exited(code) => format!("exited({code})"),
                ClientEnd::Idle => "idle".into(),
                ClientEnd::Bound => "bound".into(),
                ClientEnd::Stopped => "stopped".into(),
            }
        )
    }
}

/// Runs and judges `seed` of `plan` with `peer`'s client program. With `verify`, the seed
/// runs twice and two runs that differ are [`Status::NotReplayable`].
pub fn judge_client_seed(
    plan: &ClientPlan,
    seed: u64,
    peer: &mut VirtualPeer,
    verify: bool,
) -> Result<ClientJudged, VirtualError> {
    let lane = plan.lane(seed);
    let first = run_client(&lane, seed, peer)?;
    let mut status = Status::Judged;
    if let Some((t, e)) = first.escapes.first() {
        status = Status::NotReplayable(format!("the program escaped the shim at {t}: {e}"));
    } else if verify {
        let second = run_client(&lane, seed, peer)?;
        if let Some(why) = divergence(&first.run.trace, &second.run.trace) {
            status = Status::NotReplayable(why);
        } else if let Some((t, e)) = second.escapes.first() {
            status = Status::NotReplayable(format!("the program escaped the shim at {t}: {e}"));
        }
    }
    // Judged from the server's end, a cancel or a close reaches it a latency after the client
    // sent it: the grace window covers the pipe's slowest message, as a bridge's upstream.
    let config = OracleConfig {
        grace_ms: plan.oracle.grace_ms.max(plan.latency(seed).1 + 200),
        ..plan.oracle
    };
    let verdict = oracle::check(&first.run.trace, &config);
    let judged = Judged {
        run: first.run,
        verdict,
        crash: None,
    };
    let found = judged.fails() || judged.verdict.breaks_declared_policy();
    if status == Status::Judged && !found && !exercised(&judged.run.trace) {
        status = Status::Inconclusive;
    }
    Ok(ClientJudged {
        seed,
        latency_ms: plan.latency(seed),
        judged,
        end: first.end,
        spawned: first.spawned,
        escapes: first.escapes,
        status,
    })
}

/// Whether a `tools/call` reached the server and was answered or cancelled (or, on
/// 2026-07-28 stdio, abandoned by the client closing the pipe).
fn exercised(trace: &Trace) -> bool {
    let era = crate::oracle::EraReading::of_trace(trace).era;
    let decode = DecodeOptions {
        era,
        ..DecodeOptions::default()
    };
    let mut calls = 0;
    let mut settled = 0;
    for e in trace.events.iter().filter(|e| e.side == Side::Server) {
        match &e.kind {
            EventKind::Recv(w) => match w.decode(&decode) {
                Ok(Message::Request(r)) if r.method == crate::wire::METHOD_TOOLS_CALL => calls += 1,
                Ok(Message::Cancelled(_)) => settled += 1,
                _ => {}
            },
            EventKind::Send(w) => {
                if let Ok(Message::Result(_)) = w.decode(&decode) {
                    settled += 1;
                }
            }
            _ => {}
        }
    }
    calls > 0 && settled > 0
}
