//! The probe: drive a real MCP server, over stdio (a subprocess) or Streamable HTTP (a URL),
//! with a seeded schedule, and record what the client saw (`mcp-sim probe`).
//!
//! The probe starts the server as a subprocess and talks to it with the library's reference
//! [`Client`] over NDJSON on its stdin and stdout (spec §5.1), in real time: the model's clock is
//! the number of milliseconds since the probe started. Every call asks for progress and runs
//! under a timeout policy (an idle timeout that valid progress resets, under a hard maximum,
//! spec §4).
//!
//! # Phases
//!
//! 1. **Start-up check**: one `tools/list`, alone, allowed [`ProbeConfig::startup_timeout_ms`] (an
//!    interpreter's start-up is not what is judged). A server that exits or never answers is
//!    named (`server-exited`, `no-response`: see [`findings`]) instead of passing
//!    a run that exercised nothing.
//! 2. **Calibration**: two calls of the tool, one after the other, not cancelled: the shorter
//!    one's duration is the call's natural duration `D` (a first call may pay for warming up).
//! 3. **The schedule**, seeded (ChaCha8 from [`ProbeConfig::seed`]): overlapping calls; a share of them
//!    cancelled at a seeded offset. Without [`ProbeConfig::cancel_within_ms`] the offsets fall in
//!    `[D/10, 2D/5)`, so every cancel meets a call with more than half its work left: that is
//!    what lets the oracle tell a server that answers a cancel from one whose result merely
//!    crossed it (see `mcp_sim::oracle`, "An answer to the cancel").
//!
//! # Liveness checks and barriers
//!
//! Right after each cancel of a call, and after each call the client gave up on at its
//! timeout, the probe sends a cheap request: `ping` in the legacy era (every server must answer
//! it promptly), `tools/list` in 2026-07-28. It must be answered within
//! [`ProbeConfig::liveness_ms`]; a server that does not is named (`unresponsive-after-cancel`,
//! see [`findings`]): a cancel that wedged the server is the bug this check exists for
//! (amagi-mcp-probe checks the same way). A hung server hides the rest of the run, so the probe
//! then stops starting calls, unless [`ProbeConfig::restarts`] is set on stdio: it then kills
//! and restarts the server at once and goes on.
//!
//! On stdio the check is also a barrier. The pipes are ordered both ways, so once its answer
//! arrives, the server has certainly read the cancel, and anything for the cancelled call that
//! arrives after that answer was written after the server read the cancel: a
//! `response-after-cancel` with no timing assumption at all.
//!
//! # Faults
//!
//! Seeded like the schedule and recorded in the trace as `fault` events. stdio:
//! a share of the calls ([`ProbeConfig::stall_percent`]) see the probe stop reading the
//! server's stdout for a while (back-pressure: the server's writes wait in the pipe), and
//! [`ProbeConfig::restarts`] kills and restarts the server between calls (stdin closed, 2 s to exit, then killed; the
//! new process gets the start-up check). HTTP: see [`super::relay`].
//!
//! Everything the client observes is recorded as a trace (format v1, client side only): its
//! sends and receives, timer firings, outcomes, progress given to the application, faults and
//! closes. The oracle judges that trace; rules that need the server's view infer it with the
//! grace window and the barriers. The server's stderr is read and discarded (§5.1).
//!
//! The run ends once every call has an outcome and a drain window has passed (so messages that
//! arrive after a cancellation are seen), or at [`ProbeConfig::max_seconds`], when the calls still open are
//! cancelled and the drain window runs. Shutdown follows §5.1: close stdin, wait, then kill.
//! Over HTTP the server is not the probe's to stop: the run ends by dropping the connections
//! still open.
//!
//! The caller judges the [`ProbeRun`]'s trace with the oracle and [`findings`].

mod config;
pub mod findings;
pub(crate) mod rebinding;
mod workload;

pub use config::{
    ConfigError, ProbeConfig, ProbeError, Target, CALIBRATION_CALLS, LIVENESS_MS, MAX_CALLS,
    MAX_TOTAL_CEILING_MS,
};
pub use workload::window_of as cancel_window_of;
use workload::{cancel_window, schedule, Planned};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

use super::net::http::{self, Http};
use super::net::relay::{ConnFaults, RelayConfig};
use super::net::stdio::Process;
use super::net::wall_trace::WallTrace;
use super::{Cut, Input};
use crate::lanes::client_driver::{ClientDriver, ClientOutput, ClientRecording, EndedBy};
use crate::lanes::http_exchange::ExchangeItem;
use crate::lanes::recorder;
use crate::lanes::RunResult;
use crate::model::{CallSpec, Client, ClientConfig, Connect, Outcome, StreamId};
use crate::model::{TimeoutPolicy, Transport};
use crate::scenario::workload::{Step, Workload};
use crate::scenario::ProxyConfig;
use crate::time::Time;
use crate::trace::{EventKind, Side, FAULT_STALL};
use crate::wire::http::Method;
use crate::wire::{Era, RequestId};
use findings::{Hang, ServerEnd};

/// What a probe did: its run (the client-side trace) and what the report needs beyond it.
#[derive(Debug, Clone)]
pub struct ProbeRun {
    /// The trace, `complete` when every call ended and the drain window passed, and the
    /// counters.
    pub run: RunResult,
    /// The calibrated duration of one call, in ms, when a calibration call returned a result.
    pub natural_ms: Option<u64>,
    /// The window cancels were placed in, in ms after their call's start, `[from, to)`.
    pub cancel_window_ms: (u64, u64),
    /// Cancels the schedule planned.
    pub planned_cancels: usize,
    /// Calls of the tool started (calibration included).
    pub calls_started: usize,
    /// Calls planned (calibration included): the seeded schedule's, or a recorded client's
    /// under [`ProbeConfig::from`].
    pub calls_planned: usize,
    /// Progress notifications handed to the application.
    pub progress_delivered: usize,
    /// Writes to the server's stdin that failed.
    pub write_errors: usize,
    /// How the server or the connection ended, for people.
    pub ended: String,
    /// How the server ended, for the findings.
    pub end: ServerEnd,
    /// The signal that ended the run early ([`ProbeConfig::interrupt`]), if one did.
    pub interrupted: Option<i32>,
}

/// How the probe reaches the server.
enum Conn {
    Stdio(Box<Process>),
    Http(Box<Http>),
}

struct Probe {
    /// The reference client and its bookkeeping.
    driver: ClientDriver,
    /// The trace and counters, on the wall clock.
    rec: WallTrace,
    transport: Transport,
    conn: Conn,
    rx: Receiver<Input>,
    config: ProbeConfig,
    /// The server's command (stdio), to start it again.
    command: Vec<String>,
    /// The server closed its stdout before the probe was done (stdio).
    eof: Option<String>,
    write_errors: Arc<AtomicUsize>,
    /// Seeded draws of the per-post HTTP faults.
    fault_rng: ChaCha8Rng,
    /// Liveness checks waiting for their outcome: the check's id and what it followed.
    checks: Vec<(RequestId, String, u64)>,
    /// Checks the server left unanswered.
    hangs: Vec<Hang>,
    /// The call just started and the reset a scenario planned for its post, ms after it
    /// opens: set at its start, taken by the post that carries it.
    pending_reset: Option<(RequestId, u64)>,
    /// HTTP statuses read so far: 404s, any other, and how far the trace was read for them.
    statuses: StatusCount,
}

/// The HTTP statuses a probe read, for telling an endpoint that serves nothing (every POST
/// answered 404) from a server.
#[derive(Default)]
struct StatusCount {
    not_found: usize,
    other: usize,
    read: usize,
}

/// The longest the probe waits for input before it looks at its interrupt again.
const STOP_POLL: Duration = Duration::from_millis(100);

/// How many 404s, with no other status, mean that nothing serves MCP at the URL.
const NOTHING_SERVED_AFTER: usize = 3;

impl Probe {
    fn now(&self) -> Time {
        self.rec.now()
    }

    /// Whether the run was asked to end early.
    fn interrupted(&self) -> bool {
        self.config.interrupt.raised().is_some()
    }

    fn record(&mut self, kind: EventKind) {
        self.rec.push(Side::Client, kind);
    }

    /// The id a request has now (a lost idempotent request is re-issued under a new one).
    fn current(&self, id: &RequestId) -> RequestId {
        self.driver.current(id)
    }

    fn outcome(&self, id: &RequestId) -> Option<(Outcome, Time)> {
        self.driver.outcome(id)
    }

    /// Sends what the client queued and records what it told the application.
    fn flush(&mut self) {
        let now = self.now();
        while let Some(io) = self.driver.poll_io(now, &mut self.rec) {
            self.transmit(io);
        }
    }

    fn transmit(&mut self, io: ClientOutput) {
        match io {
            ClientOutput::Line(line) => {
                let queued = match &self.conn {
                    Conn::Stdio(p) => p.stdin.as_ref().is_some_and(|s| s.send(line).is_ok()),
                    Conn::Http(_) => false,
                };
                if !queued {
                    self.write_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            ClientOutput::Post {
                stream,
                msg,
                headers,
            } => {
                let carries = match &msg {
                    crate::wire::Message::Request(r) => Some(r.id.clone()),
                    _ => None,
                };
                let faults = self.draw_faults(stream, carries.as_ref());
                if let Conn::Http(http) = &mut self.conn {
                    http.send(stream, Method::Post, Some(msg), headers, faults);
                }
            }
            // The legacy era's `GET` (a listening or resumed stream) and `DELETE`.
            ClientOutput::Open {
                stream,
                method,
                headers,
            } => {
                if let Conn::Http(http) = &mut self.conn {
                    http.send(stream, method, None, headers, ConnFaults::default());
                }
            }
            ClientOutput::Close(stream) => {
                if let Conn::Http(http) = &mut self.conn {
                    http.close(stream);
                }
            }
            // The reference client never drops the pipe.
            ClientOutput::Disconnect => {
                if let Conn::Stdio(p) = &mut self.conn {
                    p.stdin = None;
                }
            }
        }
    }

    /// The relay's faults for a new post, drawn from the seed and recorded.
    fn draw_faults(&mut self, stream: StreamId, carries: Option<&RequestId>) -> ConnFaults {
        let latency_ms = self
            .config
            .latency_ms
            .map_or(0, |(a, b)| a + self.fault_rng.next_u64() % (b - a + 1));
        let reset = self.fault_rng.next_u64() % 100 < self.config.reset_percent;
        if latency_ms > 0 {
            self.record(EventKind::Fault {
                fault: "latency".into(),
                stream: Some(stream.0),
                ms: Some(latency_ms),
            });
        }
        if reset {
            self.record(EventKind::Fault {
                fault: "reset".into(),
                stream: Some(stream.0),
                ms: None,
            });
        }
        // A scenario's reset of this post's call at a planned moment.
        let planned = self
            .pending_reset
            .take_if(|(id, _)| carries.is_some_and(|c| c == id))
            .map(|(_, ms)| ms);
        if let Some(ms) = planned {
            self.record(EventKind::Fault {
                fault: "reset".into(),
                stream: Some(stream.0),
                ms: Some(ms),
            });
        }
        ConnFaults {
            latency_ms,
            reset,
            reset_after_ms: planned,
        }
    }

    /// Bytes from the server's stdout: split into lines, record each, hand messages over.
    fn bytes(&mut self, bytes: &[u8]) {
        for line in self.driver.stdio_lines(bytes) {
            let now = self.now();
            self.driver.read_line(now, line, &mut self.rec);
            self.flush();
        }
    }

    /// Input from an HTTP response; its end is the relay's when the relay cut it.
    fn http_input(&mut self, stream: StreamId, item: ExchangeItem, by_relay: Option<Cut>) {
        let ended = matches!(item, ExchangeItem::Ended | ExchangeItem::Cut);
        if ended {
            if let Conn::Http(http) = &mut self.conn {
                http.ended(stream);
            }
        }
        let ended_by = match by_relay {
            Some(cut) => EndedBy::proxy(Some(cut.reason().into())),
            None => EndedBy::SERVER,
        };
        let now = self.now();
        self.driver
            .response(now, stream, item, ended_by, &mut self.rec);
        self.flush();
    }

    /// The server closed its stdout.
    fn eof(&mut self) {
        let now = self.now();
        self.driver.pipe_closed(now, &mut self.rec);
        let how = match &mut self.conn {
            Conn::Stdio(p) => {
                p.stdin = None;
                p.exit_status()
            }
            Conn::Http(_) => "closed".into(),
        };
        self.eof = Some(how);
        self.flush();
    }

    /// Fires the client's due timers.
    fn timers(&mut self) {
        let now = self.now();
        if self
            .driver
            .client()
            .poll_timeout()
            .is_some_and(|t| t <= now)
        {
            self.driver.timers(now);
            self.flush();
        }
    }

    /// Waits for input until `until` (or the client's next timer) and handles it. Returns
    /// false once the server closed its stdout.
    /// Whether every HTTP request so far was answered 404, at least
    /// [`NOTHING_SERVED_AFTER`] times: the URL serves no MCP endpoint (a wrong path or port),
    /// and waiting on would only retry the handshake until the start-up timeout.
    fn nothing_served(&mut self) -> bool {
        let events = &self.rec.trace.events;
        for e in &events[self.statuses.read..] {
            if let EventKind::Status { status, .. } = e.kind {
                match status {
                    404 => self.statuses.not_found += 1,
                    _ => self.statuses.other += 1,
                }
            }
        }
        self.statuses.read = events.len();
        self.statuses.other == 0 && self.statuses.not_found >= NOTHING_SERVED_AFTER
    }

    fn wait(&mut self, until: Time) -> bool {
        if self.transport == Transport::Http && self.nothing_served() {
            return false;
        }
        let now = self.now();
        let until = self
            .driver
            .client()
            .poll_timeout()
            .map_or(until, |t| t.min(until));
        // Never longer than STOP_POLL, so that an interrupt is seen.
        let wait =
            Duration::from_millis(until.as_millis().saturating_sub(now.as_millis())).min(STOP_POLL);
        match self.rx.recv_timeout(wait) {
            Ok(Input::Bytes(b)) => self.bytes(&b),
            Ok(Input::Eof) | Err(RecvTimeoutError::Disconnected) => {
                self.eof();
                return false;
            }
            Ok(Input::Http {
                stream,
                item,
                by_relay,
            }) => self.http_input(stream, item, by_relay),
            Err(RecvTimeoutError::Timeout) => {}
        }
        self.timers();
        true
    }

    /// Starts `spec` and runs until it has an outcome; false when the server went away or
    /// `hard_end` passed first.
    fn alone(&mut self, spec: CallSpec, hard_end: Time) -> Option<RequestId> {
        let now = self.now();
        let id = self.driver.start_request(now, spec);
        self.flush();
        loop {
            if self.outcome(&id).is_some() {
                return Some(id);
            }
            if self.interrupted() {
                // A client whose user gave up cancels what it still waits for.
                let now = self.now();
                self.driver.cancel(now, &id);
                self.flush();
                return None;
            }
            if self.now() >= hard_end || !self.wait(hard_end) {
                return None;
            }
        }
    }

    /// Closes the server's stdin and stops the process (§5.1: close, wait, kill), recording
    /// the close; returns how it ended.
    fn stop_server(&mut self) -> String {
        self.record(EventKind::Close {
            stream: None,
            by: Side::Client,
            reason: None,
        });
        match &mut self.conn {
            Conn::Stdio(process) => process.stop(),
            Conn::Http(_) => String::new(),
        }
    }

    /// Kills the server and starts it again (stdio), then waits for its start-up check.
    fn restart(&mut self, command: &[String], startup: &TimeoutPolicy, hard_end: Time) -> bool {
        self.record(EventKind::Fault {
            fault: "restart".into(),
            stream: None,
            ms: None,
        });
        self.stop_server();
        let (new, rx) = match Process::spawn(command, &self.write_errors) {
            Ok(p) => p,
            Err(e) => {
                self.eof = Some(format!("could not be started again ({e})"));
                return false;
            }
        };
        self.conn = Conn::Stdio(Box::new(new));
        self.rx = rx;
        self.driver.new_pipe();
        let now = self.now();
        self.driver.server_restarted(now);
        self.flush();
        self.startup_check(startup, hard_end)
    }

    /// The start-up check: one `tools/list`, alone; true when the server answered it (a
    /// result or an error), false when it left it unanswered, went away or `hard_end` came.
    fn startup_check(&mut self, startup: &TimeoutPolicy, hard_end: Time) -> bool {
        self.alone(list_tools(startup), hard_end)
            .and_then(|id| self.outcome(&id))
            .is_some_and(|(outcome, _)| matches!(outcome, Outcome::Result | Outcome::Error))
    }

    /// Stops reading the server's stdout for `ms` (stdio), and records it.
    fn stall(&mut self, ms: u64) {
        if let Conn::Stdio(p) = &self.conn {
            *p.stall_until.lock().expect("stall") =
                Some(Instant::now() + Duration::from_millis(ms));
            self.record(EventKind::Fault {
                fault: FAULT_STALL.into(),
                stream: None,
                ms: Some(ms),
            });
        }
    }
}

impl Probe {
    /// The run's result: the trace and what the report needs.
    fn finish(self, run: RunSummary, ended: String, mut end: ServerEnd) -> ProbeRun {
        let from = self.config.from.is_some();
        end.hangs = self.hangs;
        let mut stats = self.rec.stats;
        stats.sim_ms = self.rec.trace.end();
        ProbeRun {
            interrupted: self.config.interrupt.raised(),
            run: RunResult {
                trace: self.rec.trace,
                complete: run.settled,
                stats,
            },
            natural_ms: run.natural_ms,
            cancel_window_ms: run.window,
            planned_cancels: run
                .plan
                .iter()
                .filter(|p| p.cancel_after_ms.is_some())
                .count(),
            calls_started: run.started,
            calls_planned: run.plan.len() + if from { 0 } else { CALIBRATION_CALLS },
            progress_delivered: self.driver.progress_told(),
            write_errors: self.write_errors.load(Ordering::Relaxed),
            ended,
            end,
        }
    }
}

/// `tools/list`: the start-up check and the barrier after a stdio cancel.
fn list_tools(policy: &TimeoutPolicy) -> CallSpec {
    CallSpec {
        method: "tools/list".into(),
        params: Map::new(),
        progress: false,
        policy: *policy,
        idempotent: false,
        task: false,
    }
}

/// `ping`: the legacy era's liveness check.
fn ping(policy: &TimeoutPolicy) -> CallSpec {
    CallSpec {
        method: "ping".into(),
        ..list_tools(policy)
    }
}

impl Probe {
    /// Sends the liveness check that follows `what` (a cancel or a timeout of a call).
    fn check_liveness(&mut self, what: String) {
        let policy = TimeoutPolicy::fixed(Duration::from_millis(self.config.liveness_ms));
        let check = match self.driver.client().era() {
            Era::Legacy(_) => ping(&policy),
            Era::Modern => list_tools(&policy),
        };
        let now = self.now();
        let id = self.driver.start_request(now, check);
        self.checks.push((id, what, now.as_millis()));
        self.flush();
    }

    /// A check went unanswered (`hangs[k]`): restarts the server when restarts are allowed
    /// (stdio with `--restarts`). False when the run cannot go on: no restart allowed, or the
    /// restart failed (then `eof` says why).
    fn after_hang(
        &mut self,
        k: usize,
        command: &[String],
        startup: &TimeoutPolicy,
        hard_end: Time,
    ) -> bool {
        if self.transport != Transport::Stdio || self.config.restarts == 0 {
            return false;
        }
        let restarted = self.restart(command, startup, hard_end);
        self.hangs[k].restarted = restarted;
        restarted
    }

    /// Records every check found unanswered since the last call as a hang, and returns the
    /// first of them. Checks that got any other outcome are done with.
    fn new_hang(&mut self) -> Option<usize> {
        let mut first = None;
        let checks = std::mem::take(&mut self.checks);
        for (id, what, sent_ms) in checks {
            let current = self.current(&id);
            match self.outcome(&current) {
                None => self.checks.push((id, what, sent_ms)),
                Some((Outcome::TimedOut, at)) => {
                    self.hangs.push(Hang {
                        after: what,
                        sent_ms,
                        at_ms: at.as_millis(),
                        restarted: false,
                        check: current,
                    });
                    first.get_or_insert(self.hangs.len() - 1);
                }
                Some(_) => {}
            }
        }
        first
    }
}

/// What the run did, for the report.
struct RunSummary {
    plan: Vec<Planned>,
    natural_ms: Option<u64>,
    window: (u64, u64),
    started: usize,
    /// Every call ended and the drain window passed.
    settled: bool,
}

/// The three phases. Returns early when the server goes away.
fn drive(probe: &mut Probe) -> RunSummary {
    let args = probe.config.clone();
    let args = &args;
    let policy = &args.policy();
    let command = probe.command.clone();
    let hard_end = Time::from_millis(args.max_seconds.saturating_mul(1000));
    let mut summary = RunSummary {
        plan: Vec::new(),
        natural_ms: None,
        window: cancel_window(args, None),
        started: 0,
        settled: false,
    };
    // 1. The start-up check.
    let startup = TimeoutPolicy::fixed(Duration::from_millis(args.startup_timeout_ms));
    // A server that leaves it unanswered is not probed further (`no-response`).
    if !probe.startup_check(&startup, hard_end) {
        return summary;
    }
    // Under `--from` the recorded client's calls are the schedule: no calibration.
    if let Some(recording) = args.from.clone() {
        summary.plan = workload::from_recording(&recording, *policy, &args.planned_resets);
        run_schedule(probe, &mut summary, &startup, hard_end);
        return summary;
    }
    // 2. Calibration: the shorter of two calls (a first call may pay for warming up).
    for _ in 0..CALIBRATION_CALLS {
        let began = probe.now();
        let spec = CallSpec::tool(&args.tool, arguments(args, summary.started + 1), *policy);
        let Some(id) = probe.alone(spec, hard_end) else {
            return summary;
        };
        summary.started += 1;
        match probe.outcome(&id) {
            Some((Outcome::Result, at)) => {
                let took = at.as_millis() - began.as_millis();
                summary.natural_ms = Some(summary.natural_ms.map_or(took, |d| d.min(took)));
            }
            Some((Outcome::TimedOut, _)) => {
                let what = format!("the timeout of calibration call {}", summary.started);
                probe.check_liveness(what);
                while !probe.checks.is_empty()
                    && probe.now() < hard_end
                    && !probe.interrupted()
                    && probe.wait(hard_end)
                {
                    if let Some(k) = probe.new_hang() {
                        if !probe.after_hang(k, &command, &startup, hard_end) {
                            return summary;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    summary.window = cancel_window(args, summary.natural_ms);
    summary.plan = schedule(args, summary.window);
    // 3. The schedule.
    run_schedule(probe, &mut summary, &startup, hard_end);
    summary
}

/// One started call of the schedule.
struct CallState {
    /// The id it was started under ([`Probe::current`] follows a re-issue).
    id: RequestId,
    /// A liveness check followed it (after its cancel or its timeout).
    checked: bool,
}

/// Phase 3: the seeded schedule, executed as a [`Workload`]: the calls start at their planned
/// offsets (a restart before one waits until nothing is outstanding), and each call's cancel
/// and stall are added when it starts, since their offsets run from its actual start. A
/// restart, or the recovery of a hung server, pauses the application: the starts still ahead
/// move later by as long. At the run's bound (or once the server hung for good) the calls
/// still open are cancelled and no more start; the run ends when every call has an outcome and
/// the drain window passed.
fn run_schedule(
    probe: &mut Probe,
    summary: &mut RunSummary,
    startup: &TimeoutPolicy,
    mut hard_end: Time,
) {
    let args = probe.config.clone();
    let args = &args;
    let policy = args.policy();
    let command = probe.command.clone();
    let plan = summary.plan.clone();
    let base = probe.now();
    let mut work = Workload::default();
    // Calls that start once an earlier call's answer arrives, not yet placed.
    let mut following: Vec<usize> = Vec::new();
    for (k, p) in plan.iter().enumerate() {
        if p.after.is_some() {
            following.push(k);
            continue;
        }
        let at = base + Duration::from_millis(p.start_ms);
        if p.restart_before {
            work.add(at, Step::Restart(k));
        }
        work.add(at, Step::Start(k));
    }
    // The calls started, by their index in the plan (a call that follows an answer may start
    // after a later one).
    let mut calls: std::collections::BTreeMap<usize, CallState> = Default::default();
    let mut settled_at: Option<Time> = None;
    let mut gave_up = false;
    // The server left a liveness check unanswered and is not to be restarted.
    let mut hung = false;
    loop {
        if let Some(k) = probe.new_hang() {
            let before = probe.now();
            if probe.after_hang(k, &command, startup, hard_end) {
                work.postpone_starts(probe.now() - before);
            } else if probe.eof.is_some() {
                return; // the restart failed
            } else {
                hung = true;
            }
        }
        // A call that followed an answer starts as long after the same answer in this run.
        following.retain(|&k| {
            let Some((j, ms)) = plan[k].after else {
                return false;
            };
            let answered = calls
                .get(&j)
                .and_then(|c| probe.outcome(&probe.current(&c.id)));
            match answered {
                Some((_, at)) if !gave_up => {
                    work.add(at + Duration::from_millis(ms), Step::Start(k));
                    false
                }
                _ => true,
            }
        });
        // The steps due; a restart waits until nothing is outstanding.
        loop {
            let idle = probe.driver.client().outstanding() == 0;
            let ready = |s: Step| idle || !matches!(s, Step::Restart(_));
            let Some(step) = work.poll_if(probe.now(), ready) else {
                break;
            };
            let now = probe.now();
            match step {
                Step::Restart(_) => {
                    if !probe.restart(&command, startup, hard_end) {
                        return;
                    }
                    work.postpone_starts(probe.now() - now);
                }
                Step::Start(k) => {
                    let spec = plan[k].request.clone().unwrap_or_else(|| {
                        CallSpec::tool(&args.tool, arguments(args, summary.started + 1), policy)
                    });
                    let id = probe.driver.start_request(now, spec);
                    probe.pending_reset = plan[k].reset_after_ms.map(|ms| (id.clone(), ms));
                    calls.insert(k, CallState { id, checked: false });
                    summary.started += 1;
                    if let Some(after) = plan[k].cancel_after_ms {
                        work.add(now + Duration::from_millis(after), Step::Cancel(k));
                    }
                    if let Some((offset, _)) = plan[k].stall {
                        work.add(now + Duration::from_millis(offset), Step::Stall(k));
                    }
                    probe.flush();
                }
                // Due once, whether or not the call is still open then. A cancel is followed
                // by a liveness check (on stdio, also a barrier).
                Step::Cancel(k) => {
                    let Some(call) = calls.get_mut(&k) else {
                        continue;
                    };
                    let id = probe.driver.current(&call.id);
                    if probe.driver.client().is_outstanding(&id) {
                        call.checked |= !hung;
                        probe.driver.cancel(now, &id);
                        probe.flush();
                        if !hung {
                            probe.check_liveness(format!("the cancel of call {}", k + 1));
                        }
                    }
                }
                Step::Stall(k) => {
                    if let Some((_, ms)) = plan[k].stall {
                        probe.stall(ms);
                    }
                }
                // The probe plans neither at a moment of the schedule: a scenario's stream
                // reset goes with its call's post ([`Planned::reset_after_ms`]).
                Step::Reset(_) | Step::Crash(_) => {}
            }
        }
        // A call the client gave up on at its timeout is followed by a liveness check.
        for (&k, call) in calls.iter_mut() {
            let id = probe.driver.current(&call.id);
            if !call.checked && !hung && matches!(probe.outcome(&id), Some((Outcome::TimedOut, _)))
            {
                call.checked = true;
                probe.check_liveness(format!("the timeout of call {}", k + 1));
            }
        }
        probe.timers();
        // The run's bound, or an interrupt, which brings the bound to now: cancel whatever is
        // still open, and start nothing more.
        let now = probe.now();
        if probe.interrupted() && now < hard_end {
            hard_end = now;
        }
        if (now >= hard_end || hung) && !gave_up {
            gave_up = true;
            work.drop_starts();
            let open: Vec<RequestId> = calls
                .values()
                .map(|c| probe.current(&c.id))
                .filter(|id| probe.driver.client().is_outstanding(id))
                .collect();
            for id in open {
                probe.driver.cancel(now, &id);
            }
            probe.flush();
        }
        let all_started = calls.len() == plan.len() || gave_up;
        if all_started && probe.driver.client().outstanding() == 0 {
            let at = *settled_at.get_or_insert(now);
            if now.as_millis() >= at.as_millis() + args.drain_ms {
                summary.settled = true;
                return;
            }
        }
        // Sleep until the next step, or until the server writes.
        let idle = probe.driver.client().outstanding() == 0;
        let next = work.next_due_if(|s| idle || !matches!(s, Step::Restart(_)));
        let drained = settled_at.map(|at| at + Duration::from_millis(args.drain_ms));
        let wake = [Some(hard_end), next, drained].into_iter().flatten().min();
        if !probe.wait(wake.unwrap_or(hard_end)) {
            return;
        }
        if gave_up && probe.now().as_millis() > hard_end.as_millis() + 10_000 {
            return; // outcomes never settle: should not happen, but bound the run
        }
    }
}

/// The arguments of call `n` (1-based), tagged when asked.
fn arguments(args: &ProbeConfig, n: usize) -> Value {
    let mut a = args.arguments.clone();
    if args.tag_calls {
        a.insert(crate::model::CALL_TAG.into(), Value::from(n));
    }
    Value::Object(a)
}

/// Runs a probe against `target` and returns what it recorded. Blocks for the run's wall-clock
/// length (at most [`ProbeConfig::max_seconds`] plus the drain window and shutdown).
pub fn probe(target: &Target, config: &ProbeConfig) -> Result<ProbeRun, ProbeError> {
    config.validate(target).map_err(ProbeError::Config)?;
    match target {
        Target::Stdio(command) => probe_stdio(command, config),
        Target::Http(url) => probe_http(url, config),
    }
}

fn new_probe(transport: Transport, conn: Conn, rx: Receiver<Input>, config: &ProbeConfig) -> Probe {
    Probe {
        driver: ClientDriver::new(
            Client::new(ClientConfig {
                connect: config.connect,
                ..ClientConfig::new(transport)
            }),
            transport,
            ClientRecording {
                as_written: true,
                post_headers: true,
            },
        ),
        rec: WallTrace::new(
            super::TraceOut {
                verbose: config.verbose,
                file: config.trace_file.clone(),
            },
            config.clock_origin,
        ),
        transport,
        conn,
        rx,
        config: config.clone(),
        command: Vec::new(),
        eof: None,
        write_errors: Arc::new(AtomicUsize::new(0)),
        fault_rng: ChaCha8Rng::seed_from_u64(config.seed ^ 0x6661_756c_7473),
        checks: Vec::new(),
        hangs: Vec::new(),
        pending_reset: None,
        statuses: StatusCount::default(),
    }
}

/// The host is done: a legacy session ends with its `DELETE` (sent once every POST has its
/// answer), whose answer is awaited for up to [`SESSION_END_MS`].
fn end_session(probe: &mut Probe) {
    let Conn::Http(http) = &probe.conn else {
        return;
    };
    let before = http.open();
    probe.driver.end_session();
    probe.flush();
    let deadline = Time::from_millis(probe.now().as_millis() + SESSION_END_MS);
    loop {
        let Conn::Http(http) = &probe.conn else {
            return;
        };
        let waiting = http.open().iter().any(|s| !before.contains(s));
        if !waiting || probe.now() >= deadline || !probe.wait(deadline) {
            return;
        }
    }
}

/// How long the probe waits for the answer to its session's `DELETE`, in ms.
pub const SESSION_END_MS: u64 = 2000;

fn probe_http(url: &str, config: &ProbeConfig) -> Result<ProbeRun, ProbeError> {
    let endpoint = http::parse_url(url).map_err(|message| {
        ProbeError::Config(ConfigError {
            setting: "url",
            message,
        })
    })?;
    let relay = RelayConfig {
        proxy: config.proxy,
        faults: config.latency_ms.is_some()
            || config.reset_percent > 0
            || !config.planned_resets.is_empty(),
    };
    let (tx, rx) = mpsc::channel();
    let rebinding =
        (config.origin_check && rebinding::applies(&endpoint)).then(|| endpoint.clone());
    let http = Http::start(endpoint, relay, tx)
        .map_err(|e| ProbeError::Unreachable(format!("{url}: {e}")))?;
    let mut probe = new_probe(Transport::Http, Conn::Http(Box::new(http)), rx, config);
    let run = drive(&mut probe);
    if probe.nothing_served() {
        if let Conn::Http(http) = &mut probe.conn {
            http.shutdown();
        }
        return Err(ProbeError::Unreachable(format!(
            "{url} cannot be reached as an MCP endpoint: its first {} requests were all answered \
             404 Not Found and nothing else (check the path and the port)",
            probe.statuses.not_found
        )));
    }
    end_session(&mut probe);
    if let Some(endpoint) = rebinding.as_ref().filter(|_| !probe.interrupted()) {
        rebinding::check(&mut probe, endpoint);
    }
    // The streams still open are the client's to drop.
    let Conn::Http(http) = &mut probe.conn else {
        unreachable!("the HTTP probe keeps its connection");
    };
    let open = http.open();
    http.shutdown();
    let connections = http.connections.load(Ordering::Relaxed);
    let refused = http.refused.load(Ordering::Relaxed);
    let mut ended = format!("server: {connections} connections, {refused} refused");
    if let (Some(addr), Some(p)) = (http.proxy, config.proxy) {
        ended.push_str(&format!(
            "; through the {} relay on {addr} (idle timeout {} ms)",
            p.name,
            p.idle_timeout.as_millis()
        ));
    }
    for stream in open {
        probe.record(recorder::close(Some(stream), Side::Client, None));
    }
    let end = ServerEnd {
        exited_early: None,
        refused,
        hangs: Vec::new(),
    };
    Ok(probe.finish(run, ended, end))
}

fn probe_stdio(command: &[String], config: &ProbeConfig) -> Result<ProbeRun, ProbeError> {
    let write_errors = Arc::new(AtomicUsize::new(0));
    let (process, rx) = Process::spawn(command, &write_errors)
        .map_err(|e| ProbeError::Unreachable(format!("cannot start {}: {e}", command.join(" "))))?;
    let mut probe = new_probe(Transport::Stdio, Conn::Stdio(Box::new(process)), rx, config);
    probe.write_errors = write_errors;
    probe.command = command.to_vec();
    let run = drive(&mut probe);
    let ended = match &probe.eof {
        Some(how) => format!("server: {how}"),
        None => format!("server: {}", probe.stop_server()),
    };
    let end = ServerEnd {
        exited_early: probe.eof.clone(),
        refused: 0,
        hangs: Vec::new(),
    };
    Ok(probe.finish(run, ended, end))
}
