//! Seeded runs of a real program under the virtual clock (feature `live`): the plan a seed
//! is drawn from, the calibration, and the judging of one seed, checked for determinism.
//!
//! A [`VirtualPlan`] holds the probe's schedule knobs (the tool and its arguments, how many
//! calls, the share cancelled and when, each call's timeout and hard maximum, the era, HTTP's
//! intermediary and resets, stdio's restarts); [`VirtualPlan::scenario`] draws one seed's
//! scenario from it: start times, which calls are cancelled and when, the latency range (the
//! seed's own unless the plan fixes one), the faults. The reference client then drives the
//! program through the in-memory lane ([`memory::run_virtual`]) and the oracle judges the
//! trace as it judges any other.
//!
//! Cancels fall where they mean something: between a tenth and two fifths of a call's natural
//! duration, which [`calibrate`] measures once (one call, nothing cancelled, no fault), as
//! the live probe does; being virtual, the measure is itself deterministic, so a replay draws
//! the same window.
//!
//! Determinism is checked, never assumed ([`judge_seed`] with `verify`): the seed runs twice,
//! each in a fresh process, and a pair whose traces differ is [`Status::NotReplayable`] at
//! its first differing event, never a finding; so is a run whose program escaped the shim
//! ([`Escape`]). A run that neither completed a call nor cancelled one exercised nothing and
//! says so ([`Status::Inconclusive`]).

use std::time::Duration;

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

use crate::lanes::live::serve::ServeConfig;
use crate::lanes::memory;
use crate::lanes::virtual_peer::{Escape, ServiceModel, VirtualError, VirtualPeer};
use crate::model::{Connect, Outcome, TimeoutPolicy, Transport, CALL_TAG};
use crate::oracle::OracleConfig;
use crate::run::{self, Judged};
use crate::scenario::{CallKind, Fault, Opening, PlannedCall, ProxyConfig, Scenario, ToolCalls};
use crate::time::Time;
use crate::trace::{EventKind, Side, Trace};
use crate::wire::Era;

/// The most calls a plan may schedule (as the probe).
pub const MAX_CALLS: u32 = 1000;

/// What a seed of a virtual sweep is drawn from.
#[derive(Debug, Clone, PartialEq)]
pub struct VirtualPlan {
    /// The transport the program serves.
    pub transport: Transport,
    /// How the reference client opens (auto: `server/discover`, then `initialize`).
    pub connect: Connect,
    /// The tool to call.
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// Calls per run: 1 to [`MAX_CALLS`].
    pub calls: u32,
    /// Each call's idle timeout in ms, which valid progress restarts.
    pub timeout_ms: u64,
    /// Each call's hard maximum in ms.
    pub max_total_ms: u64,
    /// The share of calls the application cancels, in percent.
    pub cancel_percent: u64,
    /// Cancels fall within this many ms of their call's start; `None`: from a tenth to two
    /// fifths of the calibrated duration of a call.
    pub cancel_within_ms: Option<u64>,
    /// One-way latency in ms, `(lo, hi)`; `None`: the seed's own range.
    pub latency_ms: Option<(u64, u64)>,
    /// HTTP: an idle-timeout intermediary before the program.
    pub proxy: Option<ProxyConfig>,
    /// HTTP: the share of calls whose stream is reset while it runs, in percent.
    pub reset_percent: u64,
    /// stdio: how many times the program is killed and restarted between calls.
    pub restarts: u32,
    /// HTTP: after the run, two POSTs with a foreign `Origin` and a foreign `Host`, which
    /// `origin-validated` judges, as the live probe sends them.
    pub origin_check: bool,
    /// A seeded service time and tie order for each input the program handles (races by
    /// seed, [`ServiceModel`]); `None`: none, the default.
    pub service: Option<ServiceModel>,
}

impl Default for VirtualPlan {
    /// The probe's defaults: six calls of `slow_op` with no arguments, a third cancelled,
    /// 5 s idle timeouts under a 30 s maximum, auto era, stdio, no faults.
    fn default() -> Self {
        VirtualPlan {
            transport: Transport::Stdio,
            connect: Connect::AUTO,
            tool: crate::model::SLOW_TOOL.into(),
            arguments: Map::new(),
            calls: 6,
            timeout_ms: 5000,
            max_total_ms: 30_000,
            cancel_percent: 34,
            cancel_within_ms: None,
            latency_ms: None,
            proxy: None,
            reset_percent: 0,
            restarts: 0,
            origin_check: true,
            service: None,
        }
    }
}

impl VirtualPlan {
    /// Checks the knobs; the error names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.calls == 0 || self.calls > MAX_CALLS {
            return Err(format!("--calls must be 1 to {MAX_CALLS}"));
        }
        if self.timeout_ms == 0 || self.max_total_ms == 0 {
            return Err("--timeout-ms and --max-total-ms must be above 0".into());
        }
        if self.cancel_percent > 100 || self.reset_percent > 100 {
            return Err("--cancel-percent and --reset-percent are percentages (0 to 100)".into());
        }
        if self
            .latency_ms
            .is_some_and(|(lo, hi)| lo > hi || hi > 60_000)
        {
            return Err("--latency-ms must be A..B with A <= B <= 60000".into());
        }
        if self.transport == Transport::Stdio && (self.proxy.is_some() || self.reset_percent > 0) {
            return Err("--proxy and --reset-percent are for --transport http".into());
        }
        if self.transport == Transport::Http && self.restarts > 0 {
            return Err("--restarts is for --transport stdio".into());
        }
        if self.service.is_some_and(|s| s.mean_us > 60_000_000) {
            return Err("--service-us must be at most 60000000 (a minute)".into());
        }
        if self.restarts >= self.calls {
            return Err("--restarts must be below --calls (restarts go between calls)".into());
        }
        Ok(())
    }

    /// The tool and arguments of every call.
    pub fn tool_calls(&self) -> ToolCalls {
        ToolCalls::cycle(self.tool.clone(), [Value::Object(self.arguments.clone())])
    }

    /// The policy of every call.
    pub fn policy(&self) -> TimeoutPolicy {
        TimeoutPolicy::resetting(
            Duration::from_millis(self.timeout_ms),
            Duration::from_millis(self.max_total_ms),
        )
    }

    /// The window cancels fall in, in ms after their call's start, from a call's natural
    /// duration `natural_ms` when it is known.
    pub fn cancel_window(&self, natural_ms: Option<u64>) -> (u64, u64) {
        crate::lanes::live::probe::cancel_window_of(self.cancel_within_ms, natural_ms)
    }

    /// The scenario of `seed`, with cancels in the window of `natural_ms` (see
    /// [`VirtualPlan::cancel_window`]).
    pub fn scenario(&self, seed: u64, natural_ms: Option<u64>) -> Scenario {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7669_7274_7561_6c00);
        let mut below = |n: u64| rng.next_u64() % n.max(1);
        let window = self.cancel_window(natural_ms);
        let policy = self.policy();
        let mut at = 0;
        let mut calls: Vec<PlannedCall> = (0..self.calls)
            .map(|_| {
                at += below(400);
                let cancelled = below(100) < self.cancel_percent;
                let offset = window.0 + below(window.1 - window.0);
                PlannedCall {
                    at: Duration::from_millis(at),
                    steps: 0,
                    step: Duration::ZERO,
                    progress: true,
                    policy,
                    cancel_after: cancelled.then(|| Duration::from_millis(offset)),
                    idempotent: false,
                    kind: CallKind::TOOL,
                    sampling: false,
                }
            })
            .collect();
        let mut faults = Vec::new();
        for (k, call) in calls.iter().enumerate() {
            if below(100) < self.reset_percent {
                let at = call.at + Duration::from_millis(window.0 + below(window.1 - window.0));
                faults.push(Fault::ResetStream { at, call: k });
            }
        }
        let drawn = Scenario::from_seed(seed);
        let latency = match self.latency_ms {
            Some((lo, hi)) => (Duration::from_millis(lo), Duration::from_millis(hi)),
            None => drawn.latency,
        };
        let mut gaps: Vec<usize> = (1..calls.len()).collect();
        let mut restarts: Vec<usize> = (0..self.restarts.min(gaps.len() as u32))
            .map(|_| gaps.remove(below(gaps.len() as u64) as usize))
            .collect();
        restarts.sort_unstable();
        // A restart goes between calls, as the probe's does: once the calls before it have had
        // their natural time and the network's longest round trip, the program is killed, and
        // the calls after it start once the client has seen its pipe break.
        let busy = Duration::from_millis(natural_ms.unwrap_or(1000) + 200) + 2 * latency.1;
        for k in restarts {
            let crash = calls[..k].iter().map(|c| c.at).max().unwrap_or_default() + busy;
            // After the client has seen the pipe break (a host restarts its server knowing it).
            let resume = crash + 2 * latency.1 + Duration::from_millis(100);
            let shift = resume.saturating_sub(calls[k].at);
            for (j, call) in calls.iter_mut().enumerate().skip(k) {
                call.at += shift;
                for f in faults.iter_mut() {
                    if let Fault::ResetStream { at, call } = f {
                        if *call == j {
                            *at += shift;
                        }
                    }
                }
            }
            faults.push(Fault::CrashServer { at: crash });
        }
        faults.sort_by_key(crate::scenario::fault_time);
        let (era, opening) = match self.connect {
            Connect::Auto { .. } => (Era::Modern, Opening::Auto { silent: false }),
            Connect::Pinned(era) => (era, Opening::Pinned),
        };
        Scenario {
            seed,
            transport: self.transport,
            latency,
            proxy: self.proxy.filter(|_| self.transport == Transport::Http),
            calls,
            faults,
            mutants: Default::default(),
            era,
            opening,
            bridge: false,
            no_buffering_header: false,
            ..drawn
        }
    }

    /// A virtual run's scenario in one line: what the plan drew (the reference server's own
    /// knobs do not apply to a program).
    pub fn describe(s: &Scenario) -> String {
        let ms = |d: Duration| d.as_millis();
        let calls: Vec<String> = s
            .calls
            .iter()
            .map(|c| match c.cancel_after {
                Some(after) => format!("{}ms(cancel+{}ms)", ms(c.at), ms(after)),
                None => format!("{}ms", ms(c.at)),
            })
            .collect();
        let opening = match s.opening {
            Opening::Pinned => s.era.version().to_string(),
            Opening::Auto { .. } => "auto".into(),
        };
        format!(
            "seed={} transport={} era={opening} latency={}..{}ms proxy={} calls=[{}] faults={:?}",
            s.seed,
            s.transport,
            ms(s.latency.0),
            ms(s.latency.1),
            s.proxy.map_or("none", |p| p.name),
            calls.join(" "),
            s.faults
        )
    }

    /// The flags that set this plan on `mcp-sim sweep --virtual` and `replay --virtual`
    /// (those that differ from the defaults), for replay lines.
    pub fn flags(&self) -> Vec<String> {
        let d = VirtualPlan::default();
        let mut f = Vec::new();
        let mut push = |name: &str, value: String| {
            f.push(format!("--{name}"));
            f.push(value);
        };
        if self.transport != d.transport {
            push("transport", self.transport.to_string());
        }
        if self.connect != d.connect {
            push("era", self.connect.to_string());
        }
        if self.tool != d.tool {
            push("tool", self.tool.clone());
        }
        if self.arguments != d.arguments {
            push("args", Value::Object(self.arguments.clone()).to_string());
        }
        for (name, value, default) in [
            ("calls", u64::from(self.calls), u64::from(d.calls)),
            ("timeout-ms", self.timeout_ms, d.timeout_ms),
            ("max-total-ms", self.max_total_ms, d.max_total_ms),
            ("cancel-percent", self.cancel_percent, d.cancel_percent),
            ("reset-percent", self.reset_percent, d.reset_percent),
            ("restarts", u64::from(self.restarts), u64::from(d.restarts)),
        ] {
            if value != default {
                push(name, value.to_string());
            }
        }
        if let Some(w) = self.cancel_within_ms {
            push("cancel-within-ms", w.to_string());
        }
        if let Some((lo, hi)) = self.latency_ms {
            push("latency-ms", format!("{lo}..{hi}"));
        }
        if let Some(p) = self.proxy {
            push("proxy", crate::scenario::ProxyChoice::Fixed(p).to_string());
        }
        if !self.origin_check && self.transport == Transport::Http {
            f.push("--no-origin-check".into());
        }
        if let Some(service) = self.service {
            if service.mean_us > 0 {
                f.push("--service-us".into());
                f.push(service.mean_us.to_string());
            }
            if service.shuffle_ties {
                f.push("--shuffle-ties".into());
            }
        }
        f
    }
}

/// How long one uncancelled call of `plan` takes the program, in ms (from its start to its
/// result), measured once under the virtual clock with no fault; `None` when the call did not
/// end with a result (the cancel window then falls in the first second).
pub fn calibrate(plan: &VirtualPlan, peer: &mut VirtualPeer) -> Result<Option<u64>, VirtualError> {
    calibrate_in(Seat::Server, plan, peer)
}

/// Where the program sits in a run: in the server's place, or between the reference client
/// and the reference server it reaches ([`crate::virtual_bridge`]).
#[derive(Clone, Copy)]
pub(crate) enum Seat<'a> {
    /// The program is the server.
    Server,
    /// The program is an intermediary; its upstream is this reference server.
    Bridge(&'a ServeConfig),
}

impl Seat<'_> {
    /// The scenario of `seed`: a bridge's grace window and timer tolerance cover its
    /// upstream link, as the turmoil lane's bridge scenarios do.
    fn scenario(self, plan: &VirtualPlan, seed: u64, natural_ms: Option<u64>) -> Scenario {
        let mut scenario = plan.scenario(seed, natural_ms);
        scenario.bridge = matches!(self, Seat::Bridge(_));
        scenario
    }

    /// The calls: through an intermediary each carries its number ([`CALL_TAG`]), which the
    /// reference server echoes, so that every front call pairs with its upstream request.
    fn tool_calls(self, plan: &VirtualPlan) -> ToolCalls {
        match self {
            Seat::Server => plan.tool_calls(),
            Seat::Bridge(_) => {
                let arguments = plan.arguments.clone();
                ToolCalls::from_fn(plan.tool.clone(), move |i, _| {
                    let mut a = arguments.clone();
                    a.insert(CALL_TAG.into(), Value::from(i as u64));
                    Value::Object(a)
                })
            }
        }
    }

    /// The oracle's settings: through an intermediary both links carry the seed's latency, so
    /// a message that crosses it (a cancel from the client's end to the server's) may take
    /// twice the slowest one-way latency, which the grace window and the timer tolerance
    /// cover; and its ends are mcp-sim's reference peers ([`OracleConfig::reference_ends`]).
    fn oracle(self, scenario: &Scenario, config: OracleConfig) -> OracleConfig {
        match self {
            Seat::Server => config,
            Seat::Bridge(_) => {
                let one_way = scenario.latency.1.as_millis() as u64;
                OracleConfig {
                    grace_ms: config.grace_ms.max(2 * one_way + 200),
                    timer_tolerance_ms: config.timer_tolerance_ms.max(4 * one_way),
                    // mcp-sim's reference client and server at the ends: only the
                    // intermediary is judged.
                    reference_ends: true,
                    ..config
                }
            }
        }
    }

    fn run(
        self,
        scenario: &Scenario,
        tool_calls: &ToolCalls,
        peer: &mut VirtualPeer,
        origin_check: bool,
    ) -> Result<memory::VirtualRun, VirtualError> {
        match self {
            Seat::Server => memory::run_virtual(scenario, tool_calls, peer, origin_check),
            Seat::Bridge(upstream) => {
                memory::run_virtual_bridge(scenario, tool_calls, peer, upstream)
            }
        }
    }
}

pub(crate) fn calibrate_in(
    seat: Seat<'_>,
    plan: &VirtualPlan,
    peer: &mut VirtualPeer,
) -> Result<Option<u64>, VirtualError> {
    let once = VirtualPlan {
        calls: 1,
        cancel_percent: 0,
        reset_percent: 0,
        restarts: 0,
        origin_check: false,
        ..plan.clone()
    };
    let scenario = seat.scenario(&once, 0, None);
    peer.set_service(plan.service);
    let run = seat.run(&scenario, &seat.tool_calls(&once), peer, false)?;
    if !run.escapes.is_empty() {
        return Ok(None);
    }
    let start = scenario.calls[0].at.as_millis() as u64;
    Ok(run
        .run
        .trace
        .events
        .iter()
        .filter(|e| {
            e.side == Side::Client
                && matches!(
                    e.kind,
                    EventKind::Outcome {
                        outcome: Outcome::Result,
                        ..
                    }
                )
        })
        .map(|e| e.t.saturating_sub(start))
        .max())
}

/// How a virtual run stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Judged: its verdict stands (and a second run gave the same trace, when verified).
    Judged,
    /// It cannot be trusted to replay: the program escaped the shim, or two runs of the seed
    /// differed. Never a finding, never a pass.
    NotReplayable(String),
    /// It exercised nothing: no `tools/call` ended with a result (through an intermediary:
    /// none reached the upstream, or none ended with a result or a cancel).
    Inconclusive,
}

/// One seed of a virtual sweep, judged.
#[derive(Debug, Clone)]
pub struct VirtualJudged {
    /// The scenario it ran.
    pub scenario: Scenario,
    /// The run and its verdict.
    pub judged: Judged,
    /// Its escapes, with the virtual time each was seen.
    pub escapes: Vec<(Time, Escape)>,
    /// How it stands.
    pub status: Status,
}

impl VirtualJudged {
    /// The run broke a MUST rule and stands as a finding (a run that is not replayable never
    /// does).
    pub fn fails(&self) -> bool {
        self.status == Status::Judged && self.judged.fails()
    }
}

/// Runs and judges `seed` of `plan` (cancels in the window of `natural_ms`). With `verify`,
/// the seed runs twice and two runs that differ are [`Status::NotReplayable`].
pub fn judge_seed(
    plan: &VirtualPlan,
    seed: u64,
    natural_ms: Option<u64>,
    peer: &mut VirtualPeer,
    verify: bool,
) -> Result<VirtualJudged, VirtualError> {
    judge_in(Seat::Server, plan, seed, natural_ms, peer, verify)
}

pub(crate) fn judge_in(
    seat: Seat<'_>,
    plan: &VirtualPlan,
    seed: u64,
    natural_ms: Option<u64>,
    peer: &mut VirtualPeer,
    verify: bool,
) -> Result<VirtualJudged, VirtualError> {
    let scenario = seat.scenario(plan, seed, natural_ms);
    let tool_calls = seat.tool_calls(plan);
    peer.set_service(plan.service);
    let first = seat.run(&scenario, &tool_calls, peer, plan.origin_check)?;
    let mut status = Status::Judged;
    if let Some((t, e)) = first.escapes.first() {
        status = Status::NotReplayable(format!("the program escaped the shim at {t}: {e}"));
    } else if verify {
        let second = seat.run(&scenario, &tool_calls, peer, plan.origin_check)?;
        if let Some(why) = divergence(&first.run.trace, &second.run.trace) {
            status = Status::NotReplayable(why);
        } else if let Some((t, e)) = second.escapes.first() {
            status = Status::NotReplayable(format!("the program escaped the shim at {t}: {e}"));
        }
    }
    let escapes = first.escapes;
    let judged = run::judge_run_adjusted(&scenario, first.run, |c| seat.oracle(&scenario, c));
    // A MUST rule broken stands even in a run that exercised little.
    let exercised = match seat {
        Seat::Server => exercised(&judged, &[Outcome::Result]),
        // Through an intermediary a call cancelled once it reached the upstream exercised the
        // cancel's path across it, which is what such a sweep is for.
        Seat::Bridge(_) => {
            crate::lanes::live::check_proxy::calls_upstream(&judged.run.trace) > 0
                && exercised(&judged, &[Outcome::Result, Outcome::Cancelled])
        }
    };
    if status == Status::Judged && !judged.fails() && !exercised {
        status = Status::Inconclusive;
    }
    Ok(VirtualJudged {
        scenario,
        judged,
        escapes,
        status,
    })
}

/// Where two traces of one seed part, in words; `None` when they are the same byte for byte.
pub fn divergence(a: &Trace, b: &Trace) -> Option<String> {
    if a.digest() == b.digest() && a.events.len() == b.events.len() {
        return None;
    }
    let line = |t: &Trace, i: usize| {
        t.events
            .get(i)
            .map(|e| serde_json::to_string(e).expect("events serialize"))
            .unwrap_or_else(|| "(the trace had ended)".into())
    };
    let i = (0..a.events.len().max(b.events.len()))
        .find(|&i| line(a, i) != line(b, i))
        .unwrap_or(0);
    Some(format!(
        "two runs of the seed differ from event #{i}: {} against {}",
        line(a, i),
        line(b, i)
    ))
}

/// Whether a `tools/call` of the run ended with one of `outcomes` (the probe's test, with a
/// result: a run whose every call failed, or never got an answer, exercised nothing).
fn exercised(judged: &Judged, outcomes: &[Outcome]) -> bool {
    let events = &judged.run.trace.events;
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| e.side == Side::Client)
        .filter_map(|e| match &e.kind {
            EventKind::Send(w) => w.msg.as_ref(),
            _ => None,
        })
        .filter(|m| m.get("method").and_then(Value::as_str) == Some("tools/call"))
        .filter_map(|m| m.get("id"))
        .collect();
    events.iter().any(|e| match &e.kind {
        EventKind::Outcome { request, outcome } if e.side == Side::Client => {
            outcomes.contains(outcome) && calls.contains(&&request.to_json())
        }
        _ => false,
    })
}
