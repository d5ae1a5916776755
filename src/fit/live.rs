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
//! What the live tools cannot do is said, not skipped: a fault placed at a time (a crash, a
//! stream reset, a partition: the probe injects faults between calls or per post, not at a
//! moment of a call), a latency on stdio (a pipe's is its own), another transport than the
//! target's. Such a neighbour is *not executable live*; a run of something else would confirm
//! nothing.

use serde_json::{Map, Value};

use crate::lanes::Lane;
use crate::model::recorded::{RecordedCall, Recording};
use crate::model::{Transport, CALL_TAG};
use crate::run;
use crate::scenario::around::{self, PerturbSpec};
use crate::scenario::file::ScenarioFile;
use crate::scenario::{Opening, ProxyConfig, Scenario};
use crate::wire::{Era, ProgressToken};

/// A neighbour's schedule as the live tools run it.
#[derive(Debug, Clone)]
pub struct LivePlan {
    /// The calls, as a recorded client's.
    pub recording: Recording,
    /// The era the client speaks.
    pub era: Era,
    /// Whether it opens with `server/discover` (auto mode).
    pub auto: bool,
    /// HTTP: the relay's one-way latency range in ms, when the scenario has one.
    pub latency_ms: Option<(u64, u64)>,
    /// HTTP: the idle-cutting proxy the relay plays.
    pub proxy: Option<ProxyConfig>,
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
    if scenario.transport != transport {
        reasons.push(format!(
            "the scenario runs on {}, the target on {transport}",
            scenario.transport
        ));
    }
    for fault in &scenario.faults {
        reasons.push(format!(
            "{fault:?}: the live tools inject faults between calls or per post, not at a moment"
        ));
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
    let mut notes = Vec::new();
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
        era: scenario.era,
        auto: matches!(scenario.opening, Opening::Auto { .. }),
        latency_ms,
        proxy: scenario.proxy.filter(|_| http),
        expected,
        notes,
    })
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

/// The changes that make neighbour `perturb_seed` of `file`'s scenario, in words.
pub fn changes(file: &ScenarioFile, perturb_seed: u64, spec: &PerturbSpec) -> Vec<String> {
    around::neighbour(&file.scenario, perturb_seed, spec)
        .changes
        .iter()
        .map(|c| c.describe())
        .collect()
}
