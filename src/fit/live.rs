//! A scenario's run made live again (`probe --scenario`, `check-proxy --scenario`): the
//! neighbour a sweep found, sent to the real peer to confirm what the simulation predicted.
//!
//! The scenario's calls become a recorded client's calls ([`Recording`], which the probe sends
//! as `--from` sends a recording): each with the request the fitted session made (the file's
//! `live_calls`; `slow_op` with the planned steps when the file has none), started at its
//! planned offset, cancelled at its planned offset from its actual start, under its planned
//! policy, in start order. The wire's knobs the live tools can set are set: the era and the
//! opening, and over HTTP the relay's latency and idle-cutting proxy.
//!
//! A stream reset is planned per call, not per request in send order: the relay resets the
//! post of the call the scenario names, as long after the post opened as the reset came after
//! the call's planned start, so the same call meets the same reset on every run.
//!
//! What the live tools cannot do is said, not skipped: another fault placed at a time (a
//! crash, a partition: the probe restarts a server only between calls), a latency on stdio (a pipe's is its own), another transport than the
//! target's. Such a neighbour is *not executable live*; a run of something else would confirm
//! nothing.

use serde_json::{Map, Value};

use crate::lanes::Lane;
use crate::model::recorded::{RecordedCall, Recording};
use crate::model::{Transport, CALL_TAG};
use crate::run;
use crate::scenario::around::{self, Change, PerturbSpec};
use crate::scenario::file::ScenarioFile;
use crate::scenario::{Fault, ProxyConfig, Scenario};
use crate::trace::{EventKind, Side, Trace};
use crate::wire::ProgressToken;

/// A neighbour's schedule as the live tools run it.
#[derive(Debug, Clone)]
pub struct LivePlan {
    /// The calls, as a recorded client's.
    pub recording: Recording,
    /// How the client opens: its era, or auto mode and the revision it falls back to.
    pub connect: crate::model::Connect,
    /// HTTP: the relay's one-way latency range in ms, when the scenario has one.
    pub latency_ms: Option<(u64, u64)>,
    /// HTTP: the idle-cutting proxy the relay plays.
    pub proxy: Option<ProxyConfig>,
    /// HTTP: the relay resets the post of the plan's call `k` this many ms after it opened
    /// (the scenario's stream resets, per planned call).
    pub resets: std::collections::BTreeMap<usize, u64>,
    /// What the simulation predicts: the rules the neighbour breaks that the scenario does
    /// not (the scenario's own rules when no neighbour was asked for).
    pub expected: Vec<&'static str>,
    /// How the plan was made, for people.
    pub notes: Vec<String>,
}

/// Why a scenario cannot run against a live peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotExecutable {
    /// Each knob the live tools cannot set, in words.
    pub reasons: Vec<String>,
}

impl std::fmt::Display for NotExecutable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not executable live: {}", self.reasons.join("; "))
    }
}

/// The live plan of `file`'s scenario or of its neighbour `perturb_seed` (drawn with `spec`),
/// against a target on `transport`, tagging each tool call with its number when `tag` (an
/// intermediary's check pairs the hops by it). `lane` runs the simulation that says what to
/// expect.
pub fn plan(
    file: &ScenarioFile,
    perturb_seed: Option<u64>,
    spec: &PerturbSpec,
    transport: Transport,
    tag: bool,
    lane: Lane,
) -> Result<LivePlan, NotExecutable> {
    let base = &file.scenario;
    let scenario = match perturb_seed {
        Some(seed) => around::neighbour(base, seed, spec).scenario,
        None => base.clone(),
    };
    let mut reasons = Vec::new();
    let mut notes = Vec::new();
    if scenario.transport != transport {
        reasons.push(format!(
            "the scenario runs on {}, the target on {transport}",
            scenario.transport
        ));
    }
    // A stream reset goes with its planned call (the relay resets that call's post at the
    // planned moment of the call, on every run); the other faults the live tools cannot place
    // at a moment.
    let mut resets = std::collections::BTreeMap::new();
    let rank = start_order(&scenario);
    for fault in &scenario.faults {
        match *fault {
            Fault::ResetStream { at, call } if transport == Transport::Http => {
                let start = scenario.calls[call].at;
                match at.checked_sub(start) {
                    Some(after) => {
                        resets.insert(rank[call], after.as_millis() as u64);
                    }
                    None => notes.push(format!(
                        "the reset at {} ms comes before call {} starts: nothing to reset",
                        at.as_millis(),
                        call + 1
                    )),
                }
            }
            _ => reasons.push(format!(
                "{fault:?}: the live tools reset an HTTP call's post at a moment of the call, \
                 and place no other fault at a moment"
            )),
        }
    }
    if transport == Transport::Stdio && scenario.latency != base.latency {
        reasons.push(format!(
            "a latency of {}..{} ms on stdio: a pipe's latency is its own",
            scenario.latency.0.as_millis(),
            scenario.latency.1.as_millis()
        ));
    }
    if !reasons.is_empty() {
        return Err(NotExecutable { reasons });
    }
    if file.live_calls.len() != scenario.calls.len() {
        notes.push(format!(
            "the file holds {} live request(s) for {} planned call(s): slow_op with the planned \
             steps stands for the calls without one",
            file.live_calls.len(),
            scenario.calls.len()
        ));
    }
    let base_rules = run::judge(base, lane).rules();
    let expected = match perturb_seed {
        Some(_) => run::judge(&scenario, lane)
            .rules()
            .into_iter()
            .filter(|r| !base_rules.contains(r))
            .collect(),
        None => base_rules,
    };
    let http = transport == Transport::Http;
    let latency_ms = (http && !scenario.latency.1.is_zero()).then_some((
        scenario.latency.0.as_millis() as u64,
        scenario.latency.1.as_millis() as u64,
    ));
    Ok(LivePlan {
        recording: recording_of(file, &scenario, tag),
        connect: scenario.connect(),
        latency_ms,
        proxy: scenario.proxy.filter(|_| http),
        resets,
        expected,
        notes,
    })
}

/// Each planned call's rank in start order: its index among the live plan's calls.
fn start_order(scenario: &Scenario) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scenario.calls.len()).collect();
    order.sort_by_key(|&k| (scenario.calls[k].at, k));
    let mut rank = vec![0; order.len()];
    for (n, &k) in order.iter().enumerate() {
        rank[k] = n;
    }
    rank
}

/// The scenario's calls as a recorded client's, in start order.
fn recording_of(file: &ScenarioFile, scenario: &Scenario, tag: bool) -> Recording {
    let mut order: Vec<usize> = (0..scenario.calls.len()).collect();
    order.sort_by_key(|&k| (scenario.calls[k].at, k));
    let calls = order
        .iter()
        .enumerate()
        .map(|(n, &k)| {
            let planned = &scenario.calls[k];
            let (method, mut params) = match file.live_calls.get(k) {
                Some(live) => (
                    live.method.clone(),
                    live.params.as_object().cloned().unwrap_or_default(),
                ),
                None => {
                    let mut params = Map::new();
                    params.insert("name".into(), Value::from(crate::model::SLOW_TOOL));
                    params.insert("arguments".into(), planned.slow_op_arguments());
                    ("tools/call".to_string(), params)
                }
            };
            if tag && method == "tools/call" {
                if let Some(Value::Object(args)) = params.get_mut("arguments") {
                    args.insert(CALL_TAG.into(), Value::from(n + 1));
                }
            }
            RecordedCall {
                method,
                params,
                meta: Map::new(),
                line: n + 1,
                id: None,
                token: planned
                    .progress
                    .then(|| ProgressToken::from(format!("p{}", n + 1))),
                start_ms: planned.at.as_millis() as u64,
                after: None,
                cancel_after_ms: planned.cancel_after.map(|d| d.as_millis() as u64),
                cancel_seen_ms: None,
                policy: Some(planned.policy),
                server: Vec::new(),
                before_cancel: 0,
            }
        })
        .collect();
    Recording {
        era: scenario.era,
        calls,
        server_side: false,
        initialize: None,
        discover: None,
    }
}

/// A client session's neighbour as `serve --scenario` plays it to the real client.
#[derive(Debug, Clone)]
pub struct ServePlan {
    /// The server's side of the neighbour's simulated run, for the playback: each call with
    /// the request the session's client made, so that the real client's requests find theirs,
    /// and its messages timed so that the client's own cancel meets them as the moved one did.
    pub recording: Recording,
    /// The client rules the simulation predicts the neighbour breaks that the scenario does not
    /// (the scenario's own client rules when no neighbour was asked for): what the server
    /// plays is its own doing, and confirms nothing about the client.
    pub expected: Vec<&'static str>,
    /// How the plan was made, for people.
    pub notes: Vec<String>,
}

/// The plan of `file`'s scenario or of its neighbour `perturb_seed`, played by `serve` to the
/// real client on `transport`, attempt `k` of the cancel scan moving the played messages by
/// `-scan_ms` (a cancel `d` ms later meets what was sent `d` ms earlier).
///
/// The real client's cancels are its own: its timer, its application. A neighbour that moves
/// one moves, in the live run, the server's messages the other way by as much (the cancel's
/// move seen from the server), so that the cancel meets the call where the moved cancel met it
/// in the simulation; the messages a shift would place before the request's receipt go out on
/// its receipt, in order. What the server cannot move is not executable live: a cancel added
/// to a call the client let run, a start, a latency or a proxy (the client's and the wire's),
/// a fault at a moment, another transport.
pub fn serve_plan(
    file: &ScenarioFile,
    perturb_seed: Option<u64>,
    spec: &PerturbSpec,
    transport: Transport,
    scan_ms: i64,
    lane: Lane,
) -> Result<ServePlan, NotExecutable> {
    let base = &file.scenario;
    let neighbour = match perturb_seed {
        Some(seed) => around::neighbour(base, seed, spec),
        None => around::Neighbour {
            perturb_seed: 0,
            changes: Vec::new(),
            distance: 0.0,
            scenario: base.clone(),
        },
    };
    let mut reasons = Vec::new();
    if base.transport != transport {
        reasons.push(format!(
            "the scenario runs on {}, the client on {transport}",
            base.transport
        ));
    }
    if base.bridge {
        reasons.push("an intermediary's session: serve plays a server to a client".into());
    }
    let mut shifts = vec![0i64; base.calls.len()];
    for change in &neighbour.changes {
        match *change {
            Change::Cancel {
                call,
                from: Some(from),
                to,
            }
            | Change::Deadline { call, from, to } => {
                shifts[call] = from.as_millis() as i64 - to.as_millis() as i64;
            }
            other => reasons.push(format!(
                "{}: the client under test decides it, not the server",
                other.describe()
            )),
        }
    }
    if !reasons.is_empty() {
        return Err(NotExecutable { reasons });
    }
    let scenario = &neighbour.scenario;
    let judged = run::judge(scenario, lane);
    let clients = |j: &run::Judged| -> Vec<&'static str> {
        let mut rules: Vec<&'static str> = j
            .verdict
            .violations
            .iter()
            .filter(|v| v.events.last().is_some_and(|&e| by_client(&j.run.trace, e)))
            .map(|v| v.rule)
            .collect();
        rules.sort_unstable();
        rules.dedup();
        rules
    };
    let expected = match perturb_seed {
        Some(_) => {
            let base_rules = run::judge(base, lane).rules();
            clients(&judged)
                .into_iter()
                .filter(|r| !base_rules.contains(r))
                .collect()
        }
        None => clients(&judged),
    };
    let mut recording =
        crate::recording::read(&judged.run.trace, None).map_err(|e| NotExecutable {
            reasons: vec![format!("the simulated run holds no call to play: {e}")],
        })?;
    // The planned calls in start order are the run's calls in send order.
    let mut order: Vec<usize> = (0..scenario.calls.len()).collect();
    order.sort_by_key(|&k| (scenario.calls[k].at, k));
    let mut notes = Vec::new();
    let tool_calls: Vec<usize> = (0..recording.calls.len())
        .filter(|&j| recording.calls[j].method == crate::wire::METHOD_TOOLS_CALL)
        .collect();
    if tool_calls.len() != order.len() {
        notes.push(format!(
            "the simulated run made {} tool call(s) for {} planned",
            tool_calls.len(),
            order.len()
        ));
    }
    for (&j, &k) in tool_calls.iter().zip(&order) {
        let call = &mut recording.calls[j];
        if let Some(live) = file.live_calls.get(k) {
            call.method = live.method.clone();
            call.params = live.params.as_object().cloned().unwrap_or_default();
            call.params.remove("_meta");
        }
        let cancelled = call.cancel_seen_ms.is_some();
        let by = shifts[k] - if cancelled { scan_ms } else { 0 };
        if by != 0 {
            shift(call, by);
        }
    }
    Ok(ServePlan {
        recording,
        expected,
        notes,
    })
}

/// Moves the messages `call`'s server sent before it read the cancel by `by_ms` (none before
/// the request's receipt), and the cancel's receipt with them.
fn shift(call: &mut RecordedCall, by_ms: i64) {
    let mut at = 0i64;
    let mut moved_at = 0i64;
    for e in call.server.iter_mut().take(call.before_cancel) {
        at += e.offset_ms as i64;
        let moved = (at + by_ms).max(moved_at).max(0);
        e.offset_ms = (moved - moved_at) as u64;
        moved_at = moved;
    }
    if let Some(seen) = call.cancel_seen_ms.as_mut() {
        *seen = (*seen as i64 + by_ms).max(moved_at).max(0) as u64;
    }
}

/// Whether trace event `e` is the client's doing: what it sent, closed or decided.
fn by_client(trace: &Trace, e: usize) -> bool {
    let Some(event) = trace.events.get(e) else {
        return false;
    };
    match (&event.kind, event.side) {
        (EventKind::Close { by, .. }, _) => *by == Side::Client,
        (EventKind::Recv(_), side) => side == Side::Server,
        (_, side) => side == Side::Client,
    }
}

/// The changes that make neighbour `perturb_seed` of `file`'s scenario, in words.
pub fn changes(file: &ScenarioFile, perturb_seed: u64, spec: &PerturbSpec) -> Vec<String> {
    around::neighbour(&file.scenario, perturb_seed, spec)
        .changes
        .iter()
        .map(|c| c.describe())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::recorded::{Cause, Emission};

    fn call(offsets: &[u64], before_cancel: usize, seen: u64) -> RecordedCall {
        let server = offsets
            .iter()
            .enumerate()
            .map(|(k, &offset_ms)| Emission {
                msg: Value::Null,
                line: k + 1,
                cause: match k {
                    0 => Cause::Receipt,
                    k if k == before_cancel => Cause::Cancel,
                    _ => Cause::Previous,
                },
                offset_ms,
                is_answer: false,
            })
            .collect();
        RecordedCall {
            method: "tools/call".into(),
            params: Map::new(),
            meta: Map::new(),
            line: 1,
            id: None,
            token: None,
            start_ms: 0,
            after: None,
            cancel_after_ms: None,
            cancel_seen_ms: Some(seen),
            policy: None,
            server,
            before_cancel,
        }
    }

    fn offsets(c: &RecordedCall) -> Vec<u64> {
        c.server.iter().map(|e| e.offset_ms).collect()
    }

    #[test]
    fn a_shift_moves_what_came_before_the_cancel_and_keeps_its_order() {
        // At 200, 400, 600 ms, read the cancel at 650, then 10 ms after it.
        let mut c = call(&[200, 200, 200, 10], 3, 650);
        shift(&mut c, -300);
        // At 0 (clamped, not before the receipt), 100, 300; the cancel at 350; the tail as it was.
        assert_eq!(offsets(&c), [0, 100, 200, 10]);
        assert_eq!(c.cancel_seen_ms, Some(350));
        let mut c = call(&[200, 200, 200, 10], 3, 650);
        shift(&mut c, 50);
        assert_eq!(offsets(&c), [250, 200, 200, 10]);
        assert_eq!(c.cancel_seen_ms, Some(700));
        // Everything before the receipt: all at once on it, the cancel after them.
        let mut c = call(&[200, 200], 2, 500);
        shift(&mut c, -1000);
        assert_eq!(offsets(&c), [0, 0]);
        assert_eq!(c.cancel_seen_ms, Some(0));
    }
}
