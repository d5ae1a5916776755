//! A scenario as a file: every knob of one run in versioned JSON, with where each value came
//! from (`mcp-sim fit` writes one from a recording; `mcp-sim replay --scenario` and
//! `MCP_SIM_SCENARIO` run one).
//!
//! The file mirrors [`Scenario`] in plain JSON types (durations in whole ms, enums by name)
//! rather than deriving serde on the model's types: the model's types hold `&'static str`
//! preset names and bit sets, and the file is a format users keep and edit, so its shape is
//! decided here, once, and read strictly (unknown members, unknown names and values out of
//! bounds are errors naming the member). Together with its digest ([`Scenario::digest`]) and a
//! perturbation seed it names a run as a seed names one.
//!
//! Limits, checked on reading: at most [`MAX_CALLS`] calls and [`MAX_FAULTS`] faults, times
//! and durations under [`MAX_MS`], a file under [`MAX_FILE_BYTES`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CallKind, Fault, Opening, PlannedCall, ProxyConfig, Scenario};
use crate::model::{
    Mutant, MutantSet, ResponseMode, ServerBehaviour, SseStyle, TimeoutPolicy, Transport,
};
use crate::wire::Era;

/// The `format` member every scenario file carries.
pub const FORMAT: &str = "mcp-sim-scenario";
/// The version this build writes and reads.
pub const VERSION: u32 = 1;
/// At most this many calls.
pub const MAX_CALLS: usize = 10_000;
/// At most this many faults.
pub const MAX_FAULTS: usize = 1_000;
/// Times and durations are below this (about 11.5 days).
pub const MAX_MS: u64 = 1_000_000_000;
/// A scenario file is at most this long.
pub const MAX_FILE_BYTES: usize = 16 << 20;

/// Where a knob's value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct Provenance {
    /// `recorded`, `inferred` or `default`.
    pub source: Source,
    /// What it was read or inferred from, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

/// The three kinds of provenance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Read off the recording as it is.
    Recorded,
    /// Inferred from what the recording shows (the evidence says how).
    Inferred,
    /// Not in the recording: the scenarios' default.
    Default,
}

impl Provenance {
    /// Read off the recording.
    pub fn recorded(evidence: impl Into<String>) -> Provenance {
        Provenance {
            source: Source::Recorded,
            evidence: Some(evidence.into()),
        }
    }
    /// Inferred, from `evidence`.
    pub fn inferred(evidence: impl Into<String>) -> Provenance {
        Provenance {
            source: Source::Inferred,
            evidence: Some(evidence.into()),
        }
    }
    /// The default, because the recording does not show it.
    pub fn default_because(why: impl Into<String>) -> Provenance {
        Provenance {
            source: Source::Default,
            evidence: Some(why.into()),
        }
    }
}

/// What a live run sends for a call: the recorded tool and arguments (the simulation calls the
/// reference server's `slow_op` with the fitted work instead).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveCall {
    /// The method (`tools/call` for a tool).
    pub method: String,
    /// Its params without `_meta`.
    pub params: Value,
}

/// A violation of the recording and the mutants that reproduce it under the fitted scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Explained {
    /// The rule.
    pub rule: String,
    /// How many times the recording breaks it.
    pub count: usize,
    /// The mutants that reproduce it (empty: no model of this behaviour).
    pub mutants: Vec<String>,
    /// The reference peers break it under the scenario's timing alone (a race, no bug).
    #[serde(default)]
    pub by_reference: bool,
}

/// A scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioFile {
    /// The scenario.
    pub scenario: Scenario,
    /// Each knob's provenance, by its path in the file (`calls/2/cancel_after_ms`).
    pub provenance: BTreeMap<String, Provenance>,
    /// Per call, what a live run sends (empty: `slow_op` with the fitted work).
    pub live_calls: Vec<LiveCall>,
    /// The recording's violations and their models.
    pub explained: Vec<Explained>,
    /// The recording it was fitted from, for people.
    pub source: Option<String>,
}

/// Why a scenario file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioFileError {
    /// Where (a member's path, or the JSON's line and column).
    pub at: String,
    /// What is wrong there.
    pub why: String,
}

impl fmt::Display for ScenarioFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "scenario file: {}: {}", self.at, self.why)
    }
}

impl std::error::Error for ScenarioFileError {}

fn error(at: impl Into<String>, why: impl Into<String>) -> ScenarioFileError {
    ScenarioFileError {
        at: at.into(),
        why: why.into(),
    }
}

impl ScenarioFile {
    /// A file holding `scenario` alone, every knob `default`-less (no provenance).
    pub fn of(scenario: Scenario) -> ScenarioFile {
        ScenarioFile {
            scenario,
            provenance: BTreeMap::new(),
            live_calls: Vec::new(),
            explained: Vec::new(),
            source: None,
        }
    }

    /// The file's JSON, pretty-printed, members in a fixed order.
    pub fn to_json(&self) -> String {
        let doc = FileDoc {
            format: FORMAT.into(),
            version: VERSION,
            digest: format!("{:016x}", self.scenario.digest()),
            source: self.source.clone(),
            scenario: ScenarioDoc::of(&self.scenario),
            provenance: self.provenance.clone(),
            live_calls: self.live_calls.clone(),
            explained: self.explained.clone(),
        };
        let mut text = serde_json::to_string_pretty(&doc).expect("a scenario serializes");
        text.push('\n');
        text
    }

    /// Reads a file, strictly.
    pub fn from_json(text: &str) -> Result<ScenarioFile, ScenarioFileError> {
        if text.len() > MAX_FILE_BYTES {
            return Err(error(
                "file",
                format!("{} bytes, over the limit of {MAX_FILE_BYTES}", text.len()),
            ));
        }
        let doc: FileDoc = serde_json::from_str(text).map_err(|e| {
            error(
                format!("line {} column {}", e.line(), e.column()),
                e.to_string(),
            )
        })?;
        if doc.format != FORMAT {
            return Err(error(
                "format",
                format!("{:?} is not {FORMAT:?}", doc.format),
            ));
        }
        if doc.version != VERSION {
            return Err(error(
                "version",
                format!("{} (this build reads version {VERSION})", doc.version),
            ));
        }
        let scenario = doc.scenario.to_scenario()?;
        // The digest is for people and tools; a file edited by hand may carry an old one.
        Ok(ScenarioFile {
            scenario,
            provenance: doc.provenance,
            live_calls: doc.live_calls,
            explained: doc.explained,
            source: doc.source,
        })
    }

    /// Reads the file at `path`.
    pub fn read(path: &std::path::Path) -> Result<ScenarioFile, ScenarioFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| error(path.display().to_string(), e.to_string()))?;
        Self::from_json(&text)
    }
}

impl Scenario {
    /// A digest of every knob (FNV-1a over the scenario's canonical JSON): with a perturbation
    /// seed, the name of a run fitted from a real session.
    pub fn digest(&self) -> u64 {
        let text = serde_json::to_string(&ScenarioDoc::of(self)).expect("a scenario serializes");
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    format: String,
    version: u32,
    /// Written for people; not checked on reading.
    #[serde(default)]
    digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    scenario: ScenarioDoc,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    provenance: BTreeMap<String, Provenance>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    live_calls: Vec<LiveCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    explained: Vec<Explained>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioDoc {
    seed: u64,
    transport: String,
    era: String,
    opening: String,
    latency_ms: [u64; 2],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    proxy: Option<ProxyDoc>,
    #[serde(default)]
    bridge: bool,
    server: ServerDoc,
    #[serde(default)]
    no_buffering_header: bool,
    calls: Vec<CallDoc>,
    #[serde(default)]
    faults: Vec<FaultDoc>,
    #[serde(default)]
    mutants: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProxyDoc {
    preset: String,
    idle_ms: u64,
    buffers_unless_told: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_status: Option<u16>,
    idle_counts_client_bytes: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    strips_mcp_headers: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerDoc {
    progress_min_interval_ms: u64,
    keepalive_interval_ms: Option<u64>,
    response_mode: String,
    sse_style: String,
    task_ttl_ms: u64,
    poll_interval_ms: u64,
    listen_notify_interval_ms: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyDoc {
    timeout_ms: Option<u64>,
    reset_on_progress: bool,
    max_total_ms: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallDoc {
    at_ms: u64,
    steps: u32,
    step_ms: u64,
    progress: bool,
    policy: PolicyDoc,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cancel_after_ms: Option<u64>,
    #[serde(default)]
    idempotent: bool,
    #[serde(default = "plain_tool")]
    kind: KindDoc,
    #[serde(default)]
    sampling: bool,
}

fn plain_tool() -> KindDoc {
    KindDoc::Tool {
        task: false,
        input_rounds: 0,
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum KindDoc {
    Tool { task: bool, input_rounds: u32 },
    StaleTask,
    Listen { tools_changed: bool },
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum FaultDoc {
    ResetStream { at_ms: u64, call: usize },
    CrashServer { at_ms: u64 },
    Partition { at_ms: u64, duration_ms: u64 },
    Blackhole { at_ms: u64, duration_ms: u64 },
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn dur(at: &str, v: u64) -> Result<Duration, ScenarioFileError> {
    match v < MAX_MS {
        true => Ok(Duration::from_millis(v)),
        false => Err(error(at, format!("{v} ms is over the limit of {MAX_MS}"))),
    }
}

fn opt_dur(at: &str, v: Option<u64>) -> Result<Option<Duration>, ScenarioFileError> {
    v.map(|v| dur(at, v)).transpose()
}

impl ScenarioDoc {
    fn of(s: &Scenario) -> ScenarioDoc {
        let b = &s.server;
        ScenarioDoc {
            seed: s.seed,
            transport: s.transport.as_str().into(),
            era: s.era.version().into(),
            opening: match s.opening {
                Opening::Pinned => "pinned",
                Opening::Auto { silent: false } => "auto",
                Opening::Auto { silent: true } => "auto-silent",
            }
            .into(),
            latency_ms: [ms(s.latency.0), ms(s.latency.1)],
            proxy: s.proxy.map(|p| ProxyDoc {
                preset: p.name.into(),
                idle_ms: ms(p.idle_timeout),
                buffers_unless_told: p.buffers_unless_told,
                timeout_status: p.timeout_status,
                idle_counts_client_bytes: p.idle_counts_client_bytes,
                strips_mcp_headers: p.strips_mcp_headers,
            }),
            bridge: s.bridge,
            server: ServerDoc {
                progress_min_interval_ms: ms(b.progress_min_interval),
                keepalive_interval_ms: b.keepalive_interval.map(ms),
                response_mode: match b.response_mode {
                    ResponseMode::Sse => "sse",
                    ResponseMode::Json => "json",
                }
                .into(),
                sse_style: match b.sse_style {
                    SseStyle::Plain => "plain",
                    SseStyle::PrettyCrlfSplit => "pretty-crlf-split",
                }
                .into(),
                task_ttl_ms: ms(b.task_ttl),
                poll_interval_ms: ms(b.poll_interval),
                listen_notify_interval_ms: b.listen_notify_interval.map(ms),
            },
            no_buffering_header: s.no_buffering_header,
            calls: s.calls.iter().map(CallDoc::of).collect(),
            faults: s
                .faults
                .iter()
                .map(|f| match *f {
                    Fault::ResetStream { at, call } => FaultDoc::ResetStream {
                        at_ms: ms(at),
                        call,
                    },
                    Fault::CrashServer { at } => FaultDoc::CrashServer { at_ms: ms(at) },
                    Fault::Partition { at, duration } => FaultDoc::Partition {
                        at_ms: ms(at),
                        duration_ms: ms(duration),
                    },
                    Fault::Blackhole { at, duration } => FaultDoc::Blackhole {
                        at_ms: ms(at),
                        duration_ms: ms(duration),
                    },
                })
                .collect(),
            mutants: s.mutants.iter().map(|m| m.to_string()).collect(),
        }
    }

    fn to_scenario(&self) -> Result<Scenario, ScenarioFileError> {
        let transport = match self.transport.as_str() {
            "stdio" => Transport::Stdio,
            "http" => Transport::Http,
            other => {
                return Err(error(
                    "scenario/transport",
                    format!("{other:?} is not stdio or http"),
                ))
            }
        };
        let era = Era::from_version(&self.era).ok_or_else(|| {
            error(
                "scenario/era",
                format!(
                    "{:?} is not a revision (2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26)",
                    self.era
                ),
            )
        })?;
        let opening = match self.opening.as_str() {
            "pinned" => Opening::Pinned,
            "auto" => Opening::Auto { silent: false },
            "auto-silent" => Opening::Auto { silent: true },
            other => {
                return Err(error(
                    "scenario/opening",
                    format!("{other:?} is not pinned, auto or auto-silent"),
                ))
            }
        };
        let [lo, hi] = self.latency_ms;
        if lo > hi {
            return Err(error(
                "scenario/latency_ms",
                format!("[{lo}, {hi}]: the low end is above the high end"),
            ));
        }
        let latency = (
            dur("scenario/latency_ms", lo)?,
            dur("scenario/latency_ms", hi)?,
        );
        let proxy = self.proxy.as_ref().map(ProxyDoc::to_config).transpose()?;
        let server = self.server.to_behaviour()?;
        if self.calls.len() > MAX_CALLS {
            return Err(error(
                "scenario/calls",
                format!("{} calls, over the limit of {MAX_CALLS}", self.calls.len()),
            ));
        }
        let calls = self
            .calls
            .iter()
            .enumerate()
            .map(|(k, c)| c.to_call(&format!("scenario/calls/{k}")))
            .collect::<Result<Vec<_>, _>>()?;
        if self.faults.len() > MAX_FAULTS {
            return Err(error(
                "scenario/faults",
                format!(
                    "{} faults, over the limit of {MAX_FAULTS}",
                    self.faults.len()
                ),
            ));
        }
        let mut faults = Vec::new();
        for (k, f) in self.faults.iter().enumerate() {
            let at = format!("scenario/faults/{k}");
            faults.push(match *f {
                FaultDoc::ResetStream { at_ms, call } => {
                    if call >= calls.len() {
                        return Err(error(at, format!("call {call} of {} calls", calls.len())));
                    }
                    Fault::ResetStream {
                        at: dur(&at, at_ms)?,
                        call,
                    }
                }
                FaultDoc::CrashServer { at_ms } => Fault::CrashServer {
                    at: dur(&at, at_ms)?,
                },
                FaultDoc::Partition { at_ms, duration_ms } => Fault::Partition {
                    at: dur(&at, at_ms)?,
                    duration: dur(&at, duration_ms)?,
                },
                FaultDoc::Blackhole { at_ms, duration_ms } => Fault::Blackhole {
                    at: dur(&at, at_ms)?,
                    duration: dur(&at, duration_ms)?,
                },
            });
        }
        let mut mutants = MutantSet::NONE;
        for (k, name) in self.mutants.iter().enumerate() {
            let m = Mutant::from_name(name).ok_or_else(|| {
                error(
                    format!("scenario/mutants/{k}"),
                    format!("{name:?} is no mutant (mcp-sim mutants --list)"),
                )
            })?;
            mutants = mutants.with(m);
        }
        Ok(Scenario {
            seed: self.seed,
            transport,
            latency,
            proxy,
            server,
            no_buffering_header: self.no_buffering_header,
            calls,
            faults,
            mutants,
            era,
            opening,
            bridge: self.bridge,
        })
    }
}

impl ProxyDoc {
    fn to_config(&self) -> Result<ProxyConfig, ScenarioFileError> {
        let name = match self.preset.as_str() {
            "nginx" => ProxyConfig::NGINX.name,
            "alb" => ProxyConfig::ALB.name,
            "cloudflare" => ProxyConfig::CLOUDFLARE.name,
            "custom" => "custom",
            other => {
                return Err(error(
                    "scenario/proxy/preset",
                    format!("{other:?} is not nginx, alb, cloudflare or custom"),
                ))
            }
        };
        if self.idle_ms == 0 {
            return Err(error("scenario/proxy/idle_ms", "an idle timeout of 0 ms"));
        }
        Ok(ProxyConfig {
            name,
            idle_timeout: dur("scenario/proxy/idle_ms", self.idle_ms)?,
            buffers_unless_told: self.buffers_unless_told,
            timeout_status: self.timeout_status,
            idle_counts_client_bytes: self.idle_counts_client_bytes,
            strips_mcp_headers: self.strips_mcp_headers.filter(|n| *n > 0),
        })
    }
}

impl ServerDoc {
    fn to_behaviour(&self) -> Result<ServerBehaviour, ScenarioFileError> {
        let at = "scenario/server";
        Ok(ServerBehaviour {
            progress_min_interval: dur(at, self.progress_min_interval_ms)?,
            keepalive_interval: opt_dur(at, self.keepalive_interval_ms)?.filter(|d| !d.is_zero()),
            response_mode: match self.response_mode.as_str() {
                "sse" => ResponseMode::Sse,
                "json" => ResponseMode::Json,
                other => {
                    return Err(error(
                        "scenario/server/response_mode",
                        format!("{other:?} is not sse or json"),
                    ))
                }
            },
            sse_style: match self.sse_style.as_str() {
                "plain" => SseStyle::Plain,
                "pretty-crlf-split" => SseStyle::PrettyCrlfSplit,
                other => {
                    return Err(error(
                        "scenario/server/sse_style",
                        format!("{other:?} is not plain or pretty-crlf-split"),
                    ))
                }
            },
            task_ttl: dur(at, self.task_ttl_ms)?,
            poll_interval: dur(at, self.poll_interval_ms)?,
            listen_notify_interval: opt_dur(at, self.listen_notify_interval_ms)?
                .filter(|d| !d.is_zero()),
        })
    }
}

impl CallDoc {
    fn of(c: &PlannedCall) -> CallDoc {
        CallDoc {
            at_ms: ms(c.at),
            steps: c.steps,
            step_ms: ms(c.step),
            progress: c.progress,
            policy: PolicyDoc {
                timeout_ms: c.policy.timeout.map(ms),
                reset_on_progress: c.policy.reset_timeout_on_progress,
                max_total_ms: c.policy.max_total_timeout.map(ms),
            },
            cancel_after_ms: c.cancel_after.map(ms),
            idempotent: c.idempotent,
            kind: match c.kind {
                CallKind::Tool { task, input_rounds } => KindDoc::Tool { task, input_rounds },
                CallKind::StaleTask => KindDoc::StaleTask,
                CallKind::Listen { tools_changed } => KindDoc::Listen { tools_changed },
            },
            sampling: c.sampling,
        }
    }

    fn to_call(&self, at: &str) -> Result<PlannedCall, ScenarioFileError> {
        Ok(PlannedCall {
            at: dur(at, self.at_ms)?,
            steps: self.steps,
            step: dur(at, self.step_ms)?,
            progress: self.progress,
            policy: TimeoutPolicy {
                timeout: opt_dur(at, self.policy.timeout_ms)?,
                reset_timeout_on_progress: self.policy.reset_on_progress,
                max_total_timeout: opt_dur(at, self.policy.max_total_ms)?,
            },
            cancel_after: opt_dur(at, self.cancel_after_ms)?,
            idempotent: self.idempotent,
            kind: match self.kind {
                KindDoc::Tool { task, input_rounds } => CallKind::Tool { task, input_rounds },
                KindDoc::StaleTask => CallKind::StaleTask,
                KindDoc::Listen { tools_changed } => CallKind::Listen { tools_changed },
            },
            sampling: self.sampling,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_drawn_scenario_reads_back_as_it_was_written() {
        for seed in 0..500 {
            for s in [
                Scenario::from_seed(seed),
                Scenario::from_seed(seed).in_era(Era::LEGACY),
                Scenario::calls_only(seed).with_era_bridge(),
            ] {
                let text = ScenarioFile::of(s.clone()).to_json();
                let back = ScenarioFile::from_json(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
                assert_eq!(back.scenario, s, "seed {seed}");
                assert_eq!(back.scenario.digest(), s.digest());
            }
        }
    }

    #[test]
    fn a_bad_file_is_refused_naming_the_member() {
        let good = ScenarioFile::of(Scenario::from_seed(3)).to_json();
        let cases = [
            (
                good.replace("\"stdio\"", "\"pipe\"")
                    .replace("\"http\"", "\"pipe\""),
                "scenario/transport",
            ),
            (
                good.replace("\"format\": \"mcp-sim-scenario\"", "\"format\": \"other\""),
                "format",
            ),
            (good.replace("\"version\": 1", "\"version\": 9"), "version"),
            (
                good.replace("\"opening\": \"", "\"opening\": \"x"),
                "scenario/opening",
            ),
            (
                good.replace("\"seed\": 3", "\"seed\": 3, \"extra\": 1"),
                "line",
            ),
            (
                good.replace("\"era\": \"", "\"era\": \"1999-"),
                "scenario/era",
            ),
        ];
        for (text, at) in cases {
            let e = ScenarioFile::from_json(&text).expect_err("refused");
            assert!(e.at.starts_with(at), "{e} (wanted {at})");
        }
        let mut s = Scenario::from_seed(3);
        s.calls[0].at = Duration::from_millis(MAX_MS + 1);
        let e = ScenarioFile::from_json(&ScenarioFile::of(s).to_json()).unwrap_err();
        assert_eq!(e.at, "scenario/calls/0", "{e}");
        let mut s = Scenario::calls_only(3);
        s.mutants = MutantSet::NONE;
        let text = ScenarioFile::of(s)
            .to_json()
            .replace("\"mutants\": []", "\"mutants\": [\"no_such\"]");
        let e = ScenarioFile::from_json(&text).unwrap_err();
        assert_eq!(e.at, "scenario/mutants/0", "{e}");
    }
}
