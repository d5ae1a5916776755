//! A scenario as a file: every knob of one run in versioned JSON, with where each value came
//! from (`mcp-sim fit` writes one from a recording; `mcp-sim replay --scenario` and
//! `MCP_SIM_SCENARIO` run one).
//!
//! The file's `scenario` is [`Scenario`]'s own serde form: each member is a field of the
//! scenario or of the type it belongs to ([`super::PlannedCall`], [`super::ProxyConfig`],
//! [`super::Fault`], [`crate::model::ServerBehaviour`], [`crate::model::TimeoutPolicy`]),
//! named and bounded by the attributes on that field, so a new knob is one field with its
//! attributes. Durations are whole milliseconds under a name ending `_ms` (`cancel_after_ms`,
//! [`crate::time::ms`]): the unit of traces, and a number a person reads and edits without a
//! unit to parse. Enums are their names (`"http"`, `"pretty-crlf-split"`, an era's
//! `protocolVersion`), the mutants the list of theirs. The file is read strictly: an unknown
//! member, an unknown name or a value out of bounds is an error naming the member's path
//! (`scenario/calls/2/cancel_after_ms`). Together with its digest ([`Scenario::digest`]) and a
//! perturbation seed it names a run as a seed names one.
//!
//! Limits, checked on reading: at most [`MAX_CALLS`] calls and [`MAX_FAULTS`] faults, times
//! and durations under [`MAX_MS`], a file under [`MAX_FILE_BYTES`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Fault, Scenario};

/// The `format` member every scenario file carries.
pub const FORMAT: &str = "mcp-sim-scenario";
/// The version this build writes and reads.
pub const VERSION: u32 = 1;
/// At most this many calls.
pub const MAX_CALLS: usize = 10_000;
/// At most this many faults.
pub const MAX_FAULTS: usize = 1_000;
pub use crate::time::MAX_MS;
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

fn at_line(e: &serde_json::Error) -> ScenarioFileError {
    error(
        format!("line {} column {}", e.line(), e.column()),
        e.to_string(),
    )
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
            scenario: self.scenario.clone(),
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
        let mut json = serde_json::Deserializer::from_str(text);
        let doc: FileDoc = serde_path_to_error::deserialize(&mut json).map_err(|e| {
            let at = member(e.path());
            match e.into_inner() {
                // A value the types refuse: its member.
                e if e.is_data() && !at.is_empty() => error(at, e.to_string()),
                // Not JSON, or not an object: where.
                e => at_line(&e),
            }
        })?;
        json.end().map_err(|e| at_line(&e))?;
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
        check(&doc.scenario)?;
        // The digest is for people and tools; a file edited by hand may carry an old one.
        Ok(ScenarioFile {
            scenario: doc.scenario,
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
        let text = serde_json::to_string(self).expect("a scenario serializes");
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
    scenario: Scenario,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    provenance: BTreeMap<String, Provenance>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    live_calls: Vec<LiveCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    explained: Vec<Explained>,
}

/// The member `path` names, as the file's paths are written (`scenario/calls/2/at_ms`).
fn member(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let names: Vec<String> = path
        .iter()
        .filter_map(|segment| match segment {
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Map { key } => Some(key.clone()),
            Segment::Enum { variant } => Some(variant.clone()),
            Segment::Unknown => None,
        })
        .collect();
    names.join("/")
}

/// What the types cannot say alone: the limits on the lists, and a reset's call exists.
fn check(s: &Scenario) -> Result<(), ScenarioFileError> {
    if s.calls.len() > MAX_CALLS {
        return Err(error(
            "scenario/calls",
            format!("{} calls, over the limit of {MAX_CALLS}", s.calls.len()),
        ));
    }
    if s.faults.len() > MAX_FAULTS {
        return Err(error(
            "scenario/faults",
            format!("{} faults, over the limit of {MAX_FAULTS}", s.faults.len()),
        ));
    }
    for (k, f) in s.faults.iter().enumerate() {
        if let Fault::ResetStream { call, .. } = *f {
            if call >= s.calls.len() {
                return Err(error(
                    format!("scenario/faults/{k}/reset_stream/call"),
                    format!("call {call} of {} calls", s.calls.len()),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::wire::Era;

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

    /// The digests of version 1's files, as they were when the file had a shape of its own:
    /// a change here is a change of the format.
    #[test]
    fn digests_stay_those_of_version_1() {
        use crate::wire::LegacyRevision;
        assert_eq!(Scenario::from_seed(3).digest(), 0x073c_c289_62f1_7a5b);
        assert_eq!(Scenario::calls_only(3).digest(), 0x511c_508a_8ef0_4131);
        let bridged = Scenario::calls_only(7).with_era_bridge();
        assert_eq!(bridged.digest(), 0x7ae8_2946_3557_0d48);
        let legacy = Scenario::from_seed(11).in_era(Era::Legacy(LegacyRevision::V2025_06_18));
        assert_eq!(legacy.digest(), 0x4212_111f_13b0_04b4);
    }

    /// The scenario's serde form is the file's `scenario`, from borrowed or owned input.
    #[test]
    fn the_scenario_member_is_the_scenarios_serde_form() {
        let s = Scenario::from_seed(5);
        let file: Value = serde_json::from_str(&ScenarioFile::of(s.clone()).to_json()).unwrap();
        assert_eq!(serde_json::to_value(&s).unwrap(), file["scenario"]);
        let owned: Scenario = serde_json::from_value(file["scenario"].clone()).unwrap();
        assert_eq!(owned, s);
    }

    /// Members with a default may be left out; 0 ms keep-alives are none.
    #[test]
    fn a_hand_written_file_leaves_the_defaults_out() {
        let text = r#"{
            "format": "mcp-sim-scenario",
            "version": 1,
            "scenario": {
                "seed": 1,
                "transport": "http",
                "era": "2025-03-26",
                "opening": "auto-silent",
                "latency_ms": [1, 5],
                "proxy": {"preset": "custom", "idle_ms": 2500, "buffers_unless_told": false,
                          "idle_counts_client_bytes": true, "strips_mcp_headers": 0},
                "server": {"progress_min_interval_ms": 1000, "keepalive_interval_ms": 0,
                           "response_mode": "json", "sse_style": "plain", "task_ttl_ms": 600000,
                           "poll_interval_ms": 2000},
                "calls": [{"at_ms": 0, "steps": 3, "step_ms": 100, "progress": true,
                           "policy": {"reset_on_progress": false}}],
                "mutants": ["ignore_cancel", "flat_progress", "ignore_cancel"]
            }
        }"#;
        let s = ScenarioFile::from_json(text).unwrap().scenario;
        assert_eq!(s.era, Era::Legacy(crate::wire::LegacyRevision::V2025_03_26));
        assert_eq!(s.opening, super::super::Opening::Auto { silent: true });
        let proxy = s.proxy.unwrap();
        assert_eq!((proxy.name, proxy.strips_mcp_headers), ("custom", None));
        assert_eq!(proxy.idle_timeout, Duration::from_millis(2500));
        assert_eq!(s.server.keepalive_interval, None);
        assert_eq!(s.server.listen_notify_interval, None);
        let call = s.calls[0];
        assert_eq!(call.kind, super::super::CallKind::TOOL);
        assert_eq!((call.policy.timeout, call.cancel_after), (None, None));
        assert!(!call.idempotent && !call.sampling && !s.bridge && !s.no_buffering_header);
        assert!(s.faults.is_empty());
        assert_eq!(s.mutants.to_string(), "ignore_cancel+flat_progress");
    }

    #[test]
    fn a_bad_file_is_refused_naming_the_member() {
        let good: Value =
            serde_json::from_str(&ScenarioFile::of(Scenario::from_seed(3)).to_json()).unwrap();
        let refused = |edit: &dyn Fn(&mut Value)| {
            let mut doc = good.clone();
            edit(&mut doc);
            ScenarioFile::from_json(&doc.to_string()).expect_err("refused")
        };
        let set = |pointer: &'static str, value: Value| {
            move |doc: &mut Value| *doc.pointer_mut(pointer).expect(pointer) = value.clone()
        };
        let big = serde_json::json!(MAX_MS);
        let reset = serde_json::json!([{"reset_stream": {"at_ms": 1, "call": 99}}]);
        let partition = serde_json::json!([{"partition": {"at_ms": 1, "duration_ms": MAX_MS}}]);
        let proxy = |preset: &str, idle_ms: u64| {
            serde_json::json!({"preset": preset, "idle_ms": idle_ms, "buffers_unless_told": false,
                               "idle_counts_client_bytes": false})
        };
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(Edit, &str, &str)> = vec![
            (
                Box::new(set("/scenario/transport", "pipe".into())),
                "scenario/transport",
                "unknown variant `pipe`, expected `stdio` or `http`",
            ),
            (
                Box::new(set("/format", "other".into())),
                "format",
                "\"other\" is not \"mcp-sim-scenario\"",
            ),
            (
                Box::new(set("/version", 9.into())),
                "version",
                "9 (this build reads version 1)",
            ),
            (
                Box::new(set("/scenario/opening", "xpinned".into())),
                "scenario/opening",
                "\"xpinned\" is not pinned, auto or auto-silent",
            ),
            (
                Box::new(|doc| doc["scenario"]["extra"] = 1.into()),
                "scenario/extra",
                "unknown field `extra`",
            ),
            (
                Box::new(|doc| doc["scenario"]["calls"][1]["policy"]["retries"] = 1.into()),
                "scenario/calls/1/policy/retries",
                "unknown field `retries`",
            ),
            (
                Box::new(set("/scenario/era", "1999-01-01".into())),
                "scenario/era",
                "\"1999-01-01\" is not a revision",
            ),
            (
                Box::new(|doc| doc["scenario"]["calls"][2]["cancel_after_ms"] = MAX_MS.into()),
                "scenario/calls/2/cancel_after_ms",
                "1000000000 ms is over the limit of 1000000000",
            ),
            (
                Box::new(set("/scenario/calls/1/policy/max_total_ms", big.clone())),
                "scenario/calls/1/policy/max_total_ms",
                "over the limit",
            ),
            (
                Box::new(set("/scenario/server/task_ttl_ms", big.clone())),
                "scenario/server/task_ttl_ms",
                "over the limit",
            ),
            (
                Box::new(set("/scenario/calls/0/kind/tool/input_rounds", (-1).into())),
                "scenario/calls/0/kind/tool/input_rounds",
                "invalid value: integer `-1`, expected u32",
            ),
            (
                Box::new(set("/scenario/calls/0/kind", "teleport".into())),
                "scenario/calls/0/kind",
                "unknown variant `teleport`",
            ),
            (
                Box::new(set("/scenario/latency_ms", serde_json::json!([400, 20]))),
                "scenario/latency_ms",
                "[400, 20]: the low end is above the high end",
            ),
            (
                Box::new(set("/scenario/server/sse_style", "fancy".into())),
                "scenario/server/sse_style",
                "unknown variant `fancy`, expected `plain` or `pretty-crlf-split`",
            ),
            (
                Box::new(move |doc| doc["scenario"]["proxy"] = proxy("haproxy", 1000)),
                "scenario/proxy/preset",
                "\"haproxy\" is not nginx, alb, cloudflare or custom",
            ),
            (
                Box::new(move |doc| doc["scenario"]["proxy"] = proxy("nginx", 0)),
                "scenario/proxy/idle_ms",
                "0 ms, where it must be at least 1 ms",
            ),
            (
                Box::new(move |doc| doc["scenario"]["faults"] = reset.clone()),
                "scenario/faults/0/reset_stream/call",
                "call 99 of 5 calls",
            ),
            (
                Box::new(move |doc| doc["scenario"]["faults"] = partition.clone()),
                "scenario/faults/0/partition/duration_ms",
                "over the limit",
            ),
            (
                Box::new(set("/scenario/mutants", serde_json::json!(["no_such"]))),
                "scenario/mutants/0",
                "\"no_such\" is no mutant (mcp-sim mutants --list)",
            ),
            (
                Box::new(|doc| {
                    let call = doc["scenario"]["calls"][0].clone();
                    doc["scenario"]["calls"] = vec![call; MAX_CALLS + 1].into();
                }),
                "scenario/calls",
                "10001 calls, over the limit of 10000",
            ),
        ];
        for (edit, at, why) in cases {
            let e = refused(&*edit);
            assert_eq!(e.at, at, "{e}");
            assert!(e.why.contains(why), "{e} (wanted {why})");
        }
        // Not a scenario file at all: where in the text.
        let text = good.to_string();
        for bad in [
            format!("{text} x"),
            text[..text.len() / 2].to_string(),
            "[]".into(),
        ] {
            let e = ScenarioFile::from_json(&bad).unwrap_err();
            assert!(e.at.starts_with("line "), "{e}");
        }
        let e = ScenarioFile::from_json(&" ".repeat(MAX_FILE_BYTES + 1)).unwrap_err();
        assert_eq!(e.at, "file", "{e}");
        // A duration the model holds but no file may state.
        let mut s = Scenario::from_seed(3);
        s.calls[0].at = Duration::from_millis(MAX_MS + 1);
        let e = ScenarioFile::from_json(&ScenarioFile::of(s).to_json()).unwrap_err();
        assert_eq!(e.at, "scenario/calls/0/at_ms", "{e}");
    }
}
