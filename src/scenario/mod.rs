//! A scenario: every knob of one run as a plain value.
//!
//! [`Scenario::from_seed`] draws every knob from a seed with ChaCha8 (swarm testing: each seed
//! also decides which features are on: a proxy or none, keep-alives or none, faults or none,
//! as TigerBeetle's VOPR does), so a seed alone reproduces a run. Property tests build the
//! same type from the proptest strategies of [`strategies`] (feature `proptest`), so failures
//! shrink to a small scenario.

use crate::wire::Era;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Value};

use crate::model::{CallSpec, MutantSet};
use crate::model::{ResponseMode, ServerBehaviour, SseStyle, TimeoutPolicy, Transport};

/// An intermediary that cuts idle HTTP streams (presets and their sources:
/// `docs/spec/intermediaries.md` §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// The preset's name (`nginx`, `alb`, `cloudflare`, `custom`).
    #[serde(rename = "preset", deserialize_with = "preset_name")]
    pub name: PresetName,
    /// Idle time after which the stream is cut.
    #[serde(rename = "idle_ms", with = "crate::time::ms::positive")]
    pub idle_timeout: Duration,
    /// Buffers the whole response unless the upstream sent `X-Accel-Buffering: no` (nginx).
    pub buffers_unless_told: bool,
    /// Answers `524` when the upstream sent no response headers before the idle timeout
    /// (Cloudflare).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_status: Option<u16>,
    /// Bytes from the client restart the idle clock too (ALB counts payload bytes both ways;
    /// nginx's `proxy_read_timeout` and Cloudflare's timeout count only the upstream's).
    pub idle_counts_client_bytes: bool,
    /// Drops the `Mcp-Method` and `Mcp-Name` headers from the POST of every n-th stream: a
    /// gateway that forwards only the headers it knows (turmoil lane; the in-memory lane has
    /// no headers). The server must refuse those requests with 400 and -32020 (§5.2).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nonzero_count"
    )]
    pub strips_mcp_headers: Option<u64>,
}

/// The name of a preset. Spelt as an alias so that serde's derive, which takes a `&'static
/// str` field for one borrowed from the input, reads [`ProxyConfig`] from any input:
/// [`preset_name`] gives the name its `'static` life.
type PresetName = &'static str;

/// A preset's name as the `&'static str` [`ProxyConfig::name`] holds.
fn preset_name<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    let name = String::deserialize(d)?;
    let presets = [
        ProxyConfig::NGINX,
        ProxyConfig::ALB,
        ProxyConfig::CLOUDFLARE,
    ];
    presets
        .iter()
        .map(|p| p.name)
        .chain(["custom"])
        .find(|p| *p == name)
        .ok_or_else(|| {
            serde::de::Error::custom(format!("{name:?} is not nginx, alb, cloudflare or custom"))
        })
}

/// A count where 0 means none.
fn nonzero_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Option::<u64>::deserialize(d)?.filter(|n| *n > 0))
}

impl ProxyConfig {
    /// nginx `proxy_read_timeout` 60 s; response buffering on unless `X-Accel-Buffering: no`.
    pub const NGINX: ProxyConfig = ProxyConfig {
        name: "nginx",
        idle_timeout: Duration::from_secs(60),
        buffers_unless_told: true,
        timeout_status: Some(504),
        idle_counts_client_bytes: false,
        strips_mcp_headers: None,
    };
    /// AWS ALB: 60 s idle; payload bytes in either direction count.
    pub const ALB: ProxyConfig = ProxyConfig {
        name: "alb",
        idle_timeout: Duration::from_secs(60),
        buffers_unless_told: false,
        timeout_status: Some(504),
        idle_counts_client_bytes: true,
        strips_mcp_headers: None,
    };
    /// Cloudflare: 100 s, then HTTP 524.
    pub const CLOUDFLARE: ProxyConfig = ProxyConfig {
        name: "cloudflare",
        idle_timeout: Duration::from_secs(100),
        buffers_unless_told: false,
        timeout_status: Some(524),
        idle_counts_client_bytes: false,
        strips_mcp_headers: None,
    };

    /// A plain idle cutter with the given timeout.
    pub fn custom(idle_timeout: Duration) -> ProxyConfig {
        ProxyConfig {
            name: "custom",
            idle_timeout,
            buffers_unless_told: false,
            timeout_status: None,
            idle_counts_client_bytes: false,
            strips_mcp_headers: None,
        }
    }

    /// A preset by name: `nginx`, `alb`, `cloudflare`, `custom:SECONDS` or `custom:MSms`.
    pub fn preset(name: &str) -> Option<ProxyConfig> {
        match name {
            "nginx" => Some(Self::NGINX),
            "alb" => Some(Self::ALB),
            "cloudflare" => Some(Self::CLOUDFLARE),
            _ => {
                let value = name.strip_prefix("custom:")?;
                let idle = match value.strip_suffix("ms") {
                    Some(ms) => Duration::from_millis(ms.parse().ok()?),
                    None => Duration::from_secs(value.parse().ok()?),
                };
                (!idle.is_zero()).then(|| Self::custom(idle))
            }
        }
    }
}

/// Which intermediary a run puts on HTTP: the seed's own, none, or a fixed one. On stdio there
/// is never one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProxyChoice {
    /// The one the seed draws (or none, as it draws).
    #[default]
    FromSeed,
    /// None: the client talks to the server directly.
    Direct,
    /// This one on every HTTP run.
    Fixed(ProxyConfig),
    /// The reference MCP intermediary ([`crate::model::Bridge`]) between client and server,
    /// stdio on both hops ([`Scenario::with_bridge`]; the turmoil lane only).
    Bridge,
    /// The reference era bridge ([`crate::model::Bridge::era_bridge`]): a 2026-07-28
    /// Streamable HTTP front before a 2025-11-25 stdio upstream ([`Scenario::with_era_bridge`];
    /// the turmoil lane only).
    EraBridge,
}

impl ProxyChoice {
    /// `none`, `bridge`, or a preset's name ([`ProxyConfig::preset`]).
    pub fn parse(name: &str) -> Option<ProxyChoice> {
        match name {
            "none" => Some(ProxyChoice::Direct),
            "bridge" => Some(ProxyChoice::Bridge),
            "era-bridge" => Some(ProxyChoice::EraBridge),
            _ => ProxyConfig::preset(name).map(ProxyChoice::Fixed),
        }
    }

    /// `scenario` with this choice imposed.
    pub fn apply(self, scenario: Scenario) -> Scenario {
        match self {
            ProxyChoice::FromSeed => scenario,
            ProxyChoice::Direct => scenario.with_proxy(None),
            ProxyChoice::Fixed(p) => scenario.with_proxy(Some(p)),
            ProxyChoice::Bridge => scenario.with_bridge(),
            ProxyChoice::EraBridge => scenario.with_era_bridge(),
        }
    }
}

/// The name [`ProxyChoice::parse`] reads back: `seed`, `none`, `bridge`, `era-bridge`, a
/// preset's name, or
/// `custom:SECONDS` (`custom:MSms` below whole seconds).
impl fmt::Display for ProxyChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyChoice::FromSeed => f.write_str("seed"),
            ProxyChoice::Direct => f.write_str("none"),
            ProxyChoice::Bridge => f.write_str("bridge"),
            ProxyChoice::EraBridge => f.write_str("era-bridge"),
            ProxyChoice::Fixed(p) if p.name == "custom" => {
                let ms = p.idle_timeout.as_millis();
                if ms % 1000 == 0 {
                    write!(f, "custom:{}", ms / 1000)
                } else {
                    write!(f, "custom:{ms}ms")
                }
            }
            ProxyChoice::Fixed(p) => f.write_str(p.name),
        }
    }
}

/// What a planned call asks the server for (in files `{"tool": {"task": .., "input_rounds":
/// ..}}`, `"stale_task"` or `{"listen": {"tools_changed": ..}}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CallKind {
    /// A `tools/call`.
    Tool {
        /// Declare the Tasks extension, so the server may run it as a task (§7.3).
        task: bool,
        /// Rounds of input `slow_op` asks for before it works (`input_rounds`, §7.2).
        input_rounds: u32,
    },
    /// A `tasks/get` for a task the server never created ([`STALE_TASK`]): an application
    /// resuming a task it remembers from another server or an earlier life (§7.3: -32602).
    StaleTask,
    /// A `subscriptions/listen` (§7.1), open until the application cancels it.
    Listen {
        /// Ask for `toolsListChanged` (else for `promptsListChanged`, which the reference
        /// server never sends).
        tools_changed: bool,
    },
}

/// The task id a [`CallKind::StaleTask`] asks about.
pub const STALE_TASK: &str = "task-from-another-life";

impl CallKind {
    /// A plain tool call: no task, no input rounds.
    pub const TOOL: CallKind = CallKind::Tool {
        task: false,
        input_rounds: 0,
    };
}

impl Default for CallKind {
    /// [`CallKind::TOOL`].
    fn default() -> Self {
        CallKind::TOOL
    }
}

/// One call the client application makes.
///
/// `steps` and `step` are the arguments of the reference server's tool, `slow_op`; a server
/// with other tools gets its tool and arguments from [`ToolCalls`], and the rest of the
/// planned call (start, progress, policy, cancel, retry) stays as drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedCall {
    /// When the application starts it.
    #[serde(rename = "at_ms", with = "crate::time::ms")]
    pub at: Duration,
    /// Work steps at the server (`slow_op`'s `steps`).
    pub steps: u32,
    /// Duration of one step (`slow_op`'s `step_ms`).
    #[serde(rename = "step_ms", with = "crate::time::ms")]
    pub step: Duration,
    /// Ask for progress.
    pub progress: bool,
    /// The client's timeout policy for it.
    pub policy: TimeoutPolicy,
    /// The application cancels it this long after starting, if still outstanding.
    #[serde(
        rename = "cancel_after_ms",
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::time::ms::option"
    )]
    pub cancel_after: Option<Duration>,
    /// Safe to re-issue when lost.
    #[serde(default)]
    pub idempotent: bool,
    /// A tool call (maybe a task, maybe with input rounds) or a subscription.
    #[serde(default)]
    pub kind: CallKind,
    /// Legacy era: the tool asks the client for a `sampling/createMessage` while it works
    /// (the era's way to ask the client for something; 2026-07-28 has input rounds instead).
    #[serde(default)]
    pub sampling: bool,
}

impl PlannedCall {
    /// Makes this a plain tool call, for peers without 2026-07-28's tasks, input rounds and
    /// subscriptions: a subscription or a task poll becomes a tool call under a host's usual
    /// policy (theirs have none, or the poll's).
    fn make_plain_tool_call(&mut self) {
        if !matches!(self.kind, CallKind::Tool { .. }) {
            self.policy = TimeoutPolicy::typescript_sdk();
            self.progress = true;
        }
        self.kind = CallKind::TOOL;
    }

    /// The arguments of `slow_op` for this call: `{"steps": steps, "step_ms": step}`, plus
    /// `input_rounds` when it asks for input.
    pub fn slow_op_arguments(&self) -> Value {
        let mut args = json!({"steps": self.steps, "step_ms": self.step.as_millis() as u64});
        if let CallKind::Tool {
            input_rounds: n @ 1..,
            ..
        } = self.kind
        {
            args["input_rounds"] = json!(n);
        }
        if self.sampling {
            args["sample"] = json!(true);
        }
        args
    }

    /// The request the client makes for this call: `tool` with `arguments`, under the call's
    /// policy, with or without a progress token, idempotent or not, declaring the Tasks
    /// extension when planned as a task; or the subscription it plans.
    pub fn call_spec(&self, tool: &str, arguments: Value) -> CallSpec {
        match self.kind {
            CallKind::Listen { tools_changed } => {
                let key = if tools_changed {
                    "toolsListChanged"
                } else {
                    "promptsListChanged"
                };
                let mut filter = serde_json::Map::new();
                filter.insert(key.into(), Value::Bool(true));
                CallSpec::listen(filter)
            }
            CallKind::StaleTask => CallSpec::task_get(STALE_TASK),
            CallKind::Tool { task, .. } => {
                let mut spec = CallSpec::tool(tool, arguments, self.policy);
                spec.progress = self.progress;
                spec.idempotent = self.idempotent;
                spec.task = task;
                spec
            }
        }
    }
}

/// Which tool the reference client calls for each of a scenario's planned calls, and with
/// which arguments.
///
/// The planned calls decide when each call starts, whether it asks for progress, its timeout
/// policy, when the application cancels it and whether it may be retried; `ToolCalls` decides
/// what it asks the server to do. The default is the reference server's one tool, `slow_op`,
/// with each planned call's [`PlannedCall::slow_op_arguments`]. A server under test with
/// other tools names its tool and gives the arguments: a list taken in turn
/// ([`ToolCalls::cycle`]) or a function of the call's index and the scenario's seed
/// ([`ToolCalls::from_fn`]). A function is not a plain value, so this is not part of the
/// [`Scenario`] (which replays from its seed alone): the harness options carry it
/// (`TurmoilOptions::tool_calls`). Either way the arguments depend on the index and the seed
/// only, so a seed still replays the same run. A retried call is sent with its arguments
/// again.
#[derive(Clone, Default)]
pub struct ToolCalls {
    calls: Calls,
}

#[derive(Clone, Default)]
enum Calls {
    #[default]
    SlowOp,
    Cycle {
        tool: String,
        arguments: Vec<Value>,
    },
    Computed {
        tool: String,
        arguments: ArgumentFn,
    },
}

type ArgumentFn = Arc<dyn Fn(usize, u64) -> Value + Send + Sync>;

impl ToolCalls {
    /// `slow_op` with each planned call's `{steps, step_ms}` (the default; the only tool the
    /// reference server knows).
    pub fn slow_op() -> ToolCalls {
        ToolCalls::default()
    }

    /// `tool` with the argument objects taken in turn: call `i` gets `arguments[i % len]`
    /// (`{}` when the list is empty).
    pub fn cycle(tool: impl Into<String>, arguments: impl IntoIterator<Item = Value>) -> ToolCalls {
        ToolCalls {
            calls: Calls::Cycle {
                tool: tool.into(),
                arguments: arguments.into_iter().collect(),
            },
        }
    }

    /// `tool` with the arguments `arguments(i, seed)` returns for call `i` (its index in
    /// [`Scenario::calls`]) of the scenario drawn from `seed`. The function must be
    /// deterministic for runs to replay.
    pub fn from_fn(
        tool: impl Into<String>,
        arguments: impl Fn(usize, u64) -> Value + Send + Sync + 'static,
    ) -> ToolCalls {
        ToolCalls {
            calls: Calls::Computed {
                tool: tool.into(),
                arguments: Arc::new(arguments),
            },
        }
    }

    /// The tool's name.
    pub fn tool(&self) -> &str {
        match &self.calls {
            Calls::SlowOp => crate::model::SLOW_TOOL,
            Calls::Cycle { tool, .. } | Calls::Computed { tool, .. } => tool,
        }
    }

    /// The arguments of call `index` (into [`Scenario::calls`]) of `scenario`.
    pub fn arguments(&self, scenario: &Scenario, index: usize) -> Value {
        match &self.calls {
            Calls::SlowOp => scenario
                .calls
                .get(index)
                .map_or_else(|| json!({}), PlannedCall::slow_op_arguments),
            Calls::Cycle { arguments, .. } if arguments.is_empty() => json!({}),
            Calls::Cycle { arguments, .. } => arguments[index % arguments.len()].clone(),
            Calls::Computed { arguments, .. } => arguments(index, scenario.seed),
        }
    }
}

impl fmt::Debug for ToolCalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let arguments = match &self.calls {
            Calls::SlowOp => "from the planned calls".to_string(),
            Calls::Cycle { arguments, .. } => format!("{} in turn", arguments.len()),
            Calls::Computed { .. } => "computed".to_string(),
        };
        f.debug_struct("ToolCalls")
            .field("tool", &self.tool())
            .field("arguments", &arguments)
            .finish()
    }
}

/// Something that goes wrong (in files `{"partition": {"at_ms": .., "duration_ms": ..}}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// HTTP: the connection carrying call `call`'s current stream is reset.
    ResetStream {
        /// When.
        #[serde(rename = "at_ms", with = "crate::time::ms")]
        at: Duration,
        /// Index into [`Scenario::calls`].
        call: usize,
    },
    /// The server process crashes and is restarted; stdio pipes break, HTTP streams reset.
    CrashServer {
        /// When.
        #[serde(rename = "at_ms", with = "crate::time::ms")]
        at: Duration,
    },
    /// The network stops delivering in both directions for a while, then heals (messages
    /// are delayed, not lost: a TCP stream recovers once the link is back).
    Partition {
        /// When.
        #[serde(rename = "at_ms", with = "crate::time::ms")]
        at: Duration,
        /// For how long.
        #[serde(rename = "duration_ms", with = "crate::time::ms")]
        duration: Duration,
    },
    /// The network drops everything in both directions for a while. TCP does not retransmit
    /// in the simulation, so every connection that lost a segment stays wedged after the
    /// repair: only timeouts detect it, as with a real half-open connection.
    Blackhole {
        /// When.
        #[serde(rename = "at_ms", with = "crate::time::ms")]
        at: Duration,
        /// For how long.
        #[serde(rename = "duration_ms", with = "crate::time::ms")]
        duration: Duration,
    },
}

/// Every knob of one run.
///
/// Its serde form is the `scenario` of a scenario file ([`file`](mod@file)), members in the
/// order of the fields: a knob is a field here or in the type it belongs to, with its
/// attributes there (durations in whole ms under a name ending `_ms`).
/// [`file::ScenarioFile::from_json`] reads it with the file's limits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The seed it was drawn from (also seeds message latencies).
    pub seed: u64,
    /// The transport.
    pub transport: Transport,
    /// The protocol era the client speaks (the reference server speaks both, as its first
    /// request decides; [`Scenario::in_era`]).
    pub era: Era,
    /// How the client comes to speak it.
    pub opening: Opening,
    /// One-way message latency range.
    #[serde(rename = "latency_ms", with = "crate::time::ms::range")]
    pub latency: (Duration, Duration),
    /// An idle-timeout proxy between client and server (HTTP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyConfig>,
    /// A reference intermediary ([`crate::model::Bridge`]) between client and server, on a
    /// host of its own: the turmoil lane only, and the trace has two hops. On stdio it is
    /// stdio on both hops (`Scenario::with_bridge`); on HTTP it is the era bridge, a 2026-07-28
    /// HTTP front before a 2025-11-25 stdio upstream (`Scenario::with_era_bridge`).
    #[serde(default)]
    pub bridge: bool,
    /// The server's behaviour.
    pub server: ServerBehaviour,
    /// Whether the server sends `X-Accel-Buffering: no` on SSE responses (SHOULD).
    #[serde(default)]
    pub no_buffering_header: bool,
    /// The application's tool calls.
    pub calls: Vec<PlannedCall>,
    /// Faults, in time order.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// Faulty behaviours of the peers (none: the reference peers).
    #[serde(default)]
    pub mutants: MutantSet,
}

/// How a scenario's client comes to speak the scenario's era (the dual-era SDKs' connect
/// modes, docs/spec/mcp-2025-11-25.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Opening {
    /// The client speaks the era from its first message.
    #[default]
    Pinned,
    /// The client is in auto mode: it opens with `server/discover`. In the modern era the
    /// dual-era server answers it; in the legacy era the server speaks only the legacy era
    /// and refuses it (`silent`: never answers it), and the client falls back to
    /// `initialize`.
    Auto {
        /// The legacy-only server ignores the probe.
        silent: bool,
    },
}

impl Opening {
    /// `pinned`, `auto` or `auto-silent`, as files name it.
    pub fn name(self) -> &'static str {
        match self {
            Opening::Pinned => "pinned",
            Opening::Auto { silent: false } => "auto",
            Opening::Auto { silent: true } => "auto-silent",
        }
    }
}

/// An opening is its [`Opening::name`] in files.
impl Serialize for Opening {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Opening {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Opening, D::Error> {
        let name = String::deserialize(d)?;
        [
            Opening::Pinned,
            Opening::Auto { silent: false },
            Opening::Auto { silent: true },
        ]
        .into_iter()
        .find(|o| o.name() == name)
        .ok_or_else(|| {
            serde::de::Error::custom(format!("{name:?} is not pinned, auto or auto-silent"))
        })
    }
}

/// Seeded choices.
struct Draw(ChaCha8Rng);

impl Draw {
    fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n.max(1)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }
    fn range_in(&mut self, (lo, hi): (u64, u64)) -> u64 {
        self.range(lo, hi)
    }
    fn ms_in(&mut self, (lo, hi): (u64, u64)) -> Duration {
        self.ms(lo, hi)
    }
}

impl Scenario {
    /// Draws every knob from `seed`. Calls last up to 90 s (30 steps of up to 3 s), up to 8
    /// run concurrently; some are subscriptions, tasks, calls that ask for input or polls of
    /// a task the server never had.
    pub fn from_seed(seed: u64) -> Scenario {
        Self::draw(seed, true).opening(Self::drawn_opening(seed))
    }

    /// The same scenario with the client coming to its era by `opening`.
    pub fn opening(mut self, opening: Opening) -> Scenario {
        self.opening = opening;
        self
    }

    /// How seed `seed`'s client comes to its era: auto mode for one seed in six (a silent
    /// legacy server for half of those), pinned otherwise. Drawn from the era's stream, after
    /// the era, so that the other draws stay as they were.
    pub fn drawn_opening(seed: u64) -> Opening {
        use rand_chacha::rand_core::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6572_615f_6d63_7000);
        rng.next_u32();
        match rng.next_u32() % 12 {
            0 => Opening::Auto { silent: false },
            1 => Opening::Auto { silent: true },
            _ => Opening::Pinned,
        }
    }

    /// The scenario of `seed` with plain tool calls only: every knob as [`Scenario::from_seed`]
    /// draws it, without the shapes of long work (§7). The mutants of plain calls are hunted
    /// on these, so that a subscription or a task never takes the place of the call their bug
    /// needs.
    pub fn calls_only(seed: u64) -> Scenario {
        Self::draw(seed, false)
    }

    fn draw(seed: u64, long_work: bool) -> Scenario {
        let mut d = Draw(ChaCha8Rng::seed_from_u64(seed));
        let transport = if d.chance(50) {
            Transport::Stdio
        } else {
            Transport::Http
        };
        let latency = d.pick(knobs::LATENCIES_MS);
        let latency = (
            Duration::from_millis(latency.0),
            Duration::from_millis(latency.1),
        );
        let proxy = match (transport, d.below(5)) {
            (Transport::Http, 0) => Some(ProxyConfig::NGINX),
            (Transport::Http, 1) => Some(ProxyConfig::ALB),
            (Transport::Http, 2) => Some(ProxyConfig::CLOUDFLARE),
            (Transport::Http, 3) => Some(ProxyConfig::custom(d.ms_in(knobs::CUSTOM_PROXY_IDLE_MS))),
            _ => None,
        };
        let server = ServerBehaviour {
            progress_min_interval: Duration::from_millis(d.pick(knobs::PROGRESS_INTERVALS_MS)),
            // The reference follows the advice to keep streams alive; `no_keepalive` does not.
            keepalive_interval: Some(Duration::from_millis(d.pick(knobs::KEEPALIVE_INTERVALS_MS))),
            response_mode: if d.chance(knobs::SSE_PERCENT) {
                ResponseMode::Sse
            } else {
                ResponseMode::Json
            },
            sse_style: if d.chance(knobs::PLAIN_SSE_PERCENT) {
                SseStyle::Plain
            } else {
                SseStyle::PrettyCrlfSplit
            },
            ..ServerBehaviour::default()
        };
        let no_buffering_header = d.chance(knobs::NO_BUFFERING_HEADER_PERCENT);
        let concurrency = d.range_in(knobs::CALLS) as usize;
        let calls = (0..concurrency)
            .map(|_| {
                let policy = match d.below(5) {
                    0 => TimeoutPolicy::inspector_v1(),
                    1 => TimeoutPolicy::typescript_sdk(),
                    2 => TimeoutPolicy::host_idle(transport, d.ms_in(knobs::HOST_IDLE_MS)),
                    3 => TimeoutPolicy::fixed(d.ms_in(knobs::FIXED_TIMEOUT_MS)),
                    _ => TimeoutPolicy::resetting(
                        d.ms_in(knobs::RESETTING_TIMEOUT_MS),
                        d.ms_in(knobs::RESETTING_MAXIMUM_MS),
                    ),
                };
                PlannedCall {
                    at: d.ms_in(knobs::CALL_START_MS),
                    steps: d.range_in(knobs::STEPS) as u32,
                    step: d.ms_in(knobs::STEP_MS),
                    progress: d.chance(knobs::PROGRESS_PERCENT),
                    policy,
                    cancel_after: d
                        .chance(knobs::CANCEL_PERCENT)
                        .then(|| d.ms_in(knobs::CANCEL_AFTER_MS)),
                    idempotent: d.chance(knobs::IDEMPOTENT_PERCENT),
                    kind: CallKind::TOOL,
                    sampling: false,
                }
            })
            .collect::<Vec<_>>();
        let mut faults = Vec::new();
        for _ in 0..d.pick(knobs::FAULT_COUNTS) {
            let at = d.ms_in(knobs::FAULT_AT_MS);
            faults.push(match d.below(4) {
                0 if transport == Transport::Http => Fault::ResetStream {
                    at,
                    call: d.below(calls.len() as u64) as usize,
                },
                0 | 1 => Fault::CrashServer { at },
                2 => Fault::Partition {
                    at,
                    duration: d.ms_in(knobs::PARTITION_MS),
                },
                _ => Fault::Blackhole {
                    at,
                    duration: d.ms_in(knobs::BLACKHOLE_MS),
                },
            });
        }
        faults.sort_by_key(fault_time);
        // The shapes of long work and a header-stripping gateway (one proxy in ten), drawn last
        // so that every knob above stays what it was for the seed: one call in eight is a
        // subscription the application ends after a while, about one in 28 polls a task the
        // server never had; of the tool calls one in five declares tasks and one in seven asks
        // for input.
        let mut proxy = proxy;
        if let Some(p) = proxy.as_mut().filter(|_| long_work && d.chance(10)) {
            p.strips_mcp_headers = Some(d.range(2, 4));
        }
        let mut calls = calls;
        for c in calls.iter_mut().filter(|_| long_work) {
            c.kind = if d.chance(12) {
                c.progress = false;
                c.policy = TimeoutPolicy::none();
                c.cancel_after = Some(d.ms(5_000, 120_000));
                CallKind::Listen {
                    tools_changed: d.chance(75),
                }
            } else if d.chance(4) {
                c.policy = crate::model::client::POLL_POLICY;
                CallKind::StaleTask
            } else {
                CallKind::Tool {
                    task: d.chance(20),
                    input_rounds: if d.chance(15) {
                        d.range(1, 3) as u32
                    } else {
                        0
                    },
                }
            };
        }
        Scenario {
            seed,
            transport,
            latency,
            proxy,
            server,
            no_buffering_header,
            calls,
            faults,
            mutants: MutantSet::NONE,
            era: Era::Modern,
            opening: Opening::Pinned,
            bridge: false,
        }
    }

    /// The server configuration this scenario runs.
    pub fn server_config(&self) -> crate::model::ServerConfig {
        let eras = match self.opening {
            Opening::Auto { silent } if self.era.is_legacy() => {
                crate::model::ServerEras::LegacyOnly {
                    ignores_discover: silent,
                }
            }
            _ => crate::model::ServerEras::Both,
        };
        crate::model::ServerConfig {
            // The era bridge's upstream is stdio (`Scenario::with_era_bridge`).
            transport: match self.bridge {
                true => Transport::Stdio,
                false => self.transport,
            },
            behaviour: self.server,
            mutants: self.mutants,
            eras,
            limits: crate::model::server::SessionLimits::default(),
        }
    }

    /// The client configuration this scenario runs.
    pub fn client_config(&self) -> crate::model::ClientConfig {
        crate::model::ClientConfig {
            mutants: self.mutants,
            connect: self.connect(),
            ..crate::model::ClientConfig::new(self.transport)
        }
    }

    /// How the client opens: pinned to [`Scenario::era`], or in auto mode falling back to
    /// it (to 2025-11-25 when the server speaks 2026-07-28).
    pub fn connect(&self) -> crate::model::Connect {
        use crate::model::Connect;
        match (self.opening, self.era) {
            (Opening::Pinned, era) => Connect::Pinned(era),
            (Opening::Auto { .. }, Era::Legacy(fallback)) => Connect::Auto { fallback },
            (Opening::Auto { .. }, Era::Modern) => Connect::AUTO,
        }
    }

    /// The documented standard scenario of the benchmarks: Streamable HTTP through an AWS ALB
    /// preset (60 s idle), 1-50 ms latency, 8 concurrent `slow_op` calls of 90 s (30 steps of
    /// 3 s) with progress every 5 s and keep-alives every 15 s, a host policy of 5 minutes idle
    /// under a 120 s maximum, one call cancelled by the user at 40 s, a 5 s partition at 30 s and
    /// a connection reset at 50 s. Four hosts: client, proxy, server, backend. The seed varies
    /// only the network's randomness.
    pub fn standard(seed: u64) -> Scenario {
        let calls = (0..8)
            .map(|k| PlannedCall {
                at: Duration::from_millis(500 * k as u64),
                steps: 30,
                step: Duration::from_secs(3),
                progress: true,
                policy: TimeoutPolicy::host_idle(Transport::Http, Duration::from_secs(120)),
                cancel_after: (k == 2).then_some(Duration::from_secs(40)),
                idempotent: k % 2 == 0,
                kind: CallKind::TOOL,
                sampling: false,
            })
            .collect();
        Scenario {
            seed,
            transport: Transport::Http,
            latency: (Duration::from_millis(1), Duration::from_millis(50)),
            proxy: Some(ProxyConfig::ALB),
            server: ServerBehaviour {
                progress_min_interval: Duration::from_secs(5),
                keepalive_interval: Some(Duration::from_secs(15)),
                ..ServerBehaviour::default()
            },
            no_buffering_header: true,
            calls,
            faults: vec![
                Fault::Partition {
                    at: Duration::from_secs(30),
                    duration: Duration::from_secs(5),
                },
                Fault::ResetStream {
                    at: Duration::from_secs(50),
                    call: 5,
                },
            ],
            mutants: MutantSet::NONE,
            era: Era::Modern,
            opening: Opening::Pinned,
            bridge: false,
        }
    }

    /// The same scenario on another transport. A proxy exists only on HTTP, and stream resets
    /// become server crashes on stdio.
    pub fn with_transport(mut self, transport: Transport) -> Scenario {
        self.transport = transport;
        if transport == Transport::Http {
            self.bridge = false;
        }
        if transport == Transport::Stdio {
            self.proxy = None;
            for f in &mut self.faults {
                if let Fault::ResetStream { at, .. } = *f {
                    *f = Fault::CrashServer { at };
                }
            }
        }
        self
    }

    /// The era seed `seed` speaks when the run leaves it to the seed: the legacy era for a
    /// third of the seeds (2025-11-25 for half of those, 2025-06-18 and 2025-03-26 for a
    /// quarter each), 2026-07-28 otherwise. Drawn from a stream of its own, so that the
    /// scenario's other draws are the same in both eras.
    pub fn drawn_era(seed: u64) -> Era {
        use rand_chacha::rand_core::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6572_615f_6d63_7000);
        match rng.next_u32() % 12 {
            0 | 1 => Era::Legacy(crate::wire::LegacyRevision::V2025_11_25),
            2 => Era::Legacy(crate::wire::LegacyRevision::V2025_06_18),
            3 => Era::Legacy(crate::wire::LegacyRevision::V2025_03_26),
            _ => Era::Modern,
        }
    }

    /// The same scenario in `era`. Its peers have
    /// none of 2026-07-28's tasks, input rounds or subscriptions: its calls become plain tool
    /// calls.
    pub fn in_era(mut self, era: Era) -> Scenario {
        self.era = era;
        if era.is_legacy() {
            for call in self.calls.iter_mut().filter(|c| c.kind != CallKind::TOOL) {
                // A call that asks for input asks by the legacy era's means: a sampling
                // request of the server's own.
                call.sampling = matches!(
                    call.kind,
                    CallKind::Tool {
                        input_rounds: 1..,
                        ..
                    }
                );
                call.make_plain_tool_call();
            }
        }
        self
    }

    /// The same scenario through the reference intermediary, on stdio (its hops are stdio).
    ///
    /// Its partitions and blackholes are dropped (crashes stay): a link that delays or loses
    /// what crosses it between the two recorded ends makes the intermediary's deadlines
    /// unknowable from outside, as they are for a real intermediary judged as a black box;
    /// the one-hop runs sweep those faults.
    pub fn with_bridge(self) -> Scenario {
        let mut s = self.with_transport(Transport::Stdio);
        s.bridge = true;
        s.faults
            .retain(|f| !matches!(f, Fault::Partition { .. } | Fault::Blackhole { .. }));
        s
    }

    /// The same scenario through the reference era bridge: the client speaks 2026-07-28 over
    /// Streamable HTTP to the bridge, which speaks 2025-11-25 to the server over stdio.
    ///
    /// Its calls become plain tool calls (a legacy upstream has no tasks, input rounds or
    /// subscriptions, and the bridge translates none of them), and it has no faults: besides
    /// the partitions and blackholes [`Scenario::with_bridge`] leaves out, a crash would end the
    /// bridge's one upstream session and a stream reset would be the bridge's own link to
    /// judge; the stdio bridge sweeps crashes. What is swept is the cancel translation itself:
    /// the client's cancels, timeouts and the link's latency.
    pub fn with_era_bridge(self) -> Scenario {
        let mut s = self.with_transport(Transport::Http);
        s.bridge = true;
        s.proxy = None;
        s.era = Era::Modern;
        s.opening = Opening::Pinned;
        s.faults.clear();
        for call in &mut s.calls {
            call.make_plain_tool_call();
            call.sampling = false;
        }
        s
    }

    /// Whether the client reaches the server through the era bridge.
    pub fn through_era_bridge(&self) -> bool {
        self.bridge && self.transport == Transport::Http
    }

    /// The same scenario behind another proxy (HTTP only; ignored on stdio).
    pub fn with_proxy(mut self, proxy: Option<ProxyConfig>) -> Scenario {
        if self.transport == Transport::Http {
            self.proxy = proxy;
        }
        self
    }

    /// How long after its start a run may last before it counts as not settling: the last
    /// planned start, cancel or fault, plus twice the loosest timeout, plus a minute. Every
    /// lane stops there.
    pub fn horizon(&self) -> Duration {
        let last_start = self
            .calls
            .iter()
            .map(|c| c.at + c.cancel_after.unwrap_or_default())
            .max()
            .unwrap_or_default();
        let last_fault = self.faults.iter().map(fault_time).max().unwrap_or_default();
        // A legacy handshake started for the last waiting request may outlast it by its own
        // timeout.
        let handshake = if self.era.is_legacy() {
            crate::model::client::HANDSHAKE_TIMEOUT
        } else {
            Duration::ZERO
        };
        // An auto-mode probe goes before it.
        let handshake = match self.opening {
            Opening::Auto { .. } => {
                crate::model::client::HANDSHAKE_TIMEOUT + crate::model::client::DISCOVER_TIMEOUT
            }
            Opening::Pinned => handshake,
        };
        last_start.max(last_fault) + self.max_request() * 2 + Duration::from_secs(60) + handshake
    }

    /// The longest a well-behaved client may keep any request open: the loosest hard bound
    /// of the calls' policies (the oracle's ceiling for this run).
    pub fn max_request(&self) -> Duration {
        // A task's polls and its cancel are requests of their own, under the poll policy.
        let polls = self
            .calls
            .iter()
            .any(|c| matches!(c.kind, CallKind::Tool { task: true, .. }))
            .then_some(crate::model::client::POLL_POLICY);
        // A legacy client's handshake is a request of its own, under its own timeout.
        let handshake = self
            .era
            .is_legacy()
            .then(|| TimeoutPolicy::fixed(crate::model::client::HANDSHAKE_TIMEOUT));
        // So is an auto-mode client's probe.
        let probe = matches!(self.opening, Opening::Auto { .. })
            .then(|| TimeoutPolicy::fixed(crate::model::client::DISCOVER_TIMEOUT));
        // An auto-mode client that falls back shakes hands even in a modern scenario.
        let handshake = handshake.or_else(|| {
            probe.map(|_| TimeoutPolicy::fixed(crate::model::client::HANDSHAKE_TIMEOUT))
        });
        self.calls
            .iter()
            .map(|c| c.policy)
            .chain(polls)
            .chain(handshake)
            .chain(probe)
            .filter_map(|p| p.hard_bound())
            .max()
            .unwrap_or(Duration::from_secs(30 * 60))
    }
}

/// When a fault happens.
pub fn fault_time(f: &Fault) -> Duration {
    match *f {
        Fault::ResetStream { at, .. }
        | Fault::CrashServer { at }
        | Fault::Partition { at, .. }
        | Fault::Blackhole { at, .. } => at,
    }
}

/// When a fault is over (a partition heals; crashes and resets are instantaneous).
pub fn fault_end(f: &Fault) -> Duration {
    match *f {
        Fault::Partition { at, duration } | Fault::Blackhole { at, duration } => at + duration,
        _ => fault_time(f),
    }
}

impl fmt::Display for Scenario {
    /// One line with every knob that matters for reading a failure.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed={} transport={} latency={}..{}ms proxy={} progress_every={}ms keepalive={} mode={:?} sse={:?} calls={} faults={:?} mutants={}",
            self.seed,
            self.transport,
            self.latency.0.as_millis(),
            self.latency.1.as_millis(),
            self.proxy.map_or("none".to_string(), |p| {
                let strip = p.strips_mcp_headers.map_or(String::new(), |n| format!(", strips Mcp headers of 1 in {n}"));
                format!("{}({}s{strip})", p.name, p.idle_timeout.as_secs())
            }),
            self.server.progress_min_interval.as_millis(),
            self.server.keepalive_interval.map_or("off".to_string(), |k| format!("{}ms", k.as_millis())),
            self.server.response_mode,
            self.server.sse_style,
            self.calls.len(),
            self.faults,
            self.mutants,
        )?;
        if self.era.is_legacy() {
            write!(f, " era={}", self.era)?;
        }
        match self.opening {
            Opening::Pinned => {}
            Opening::Auto { silent: false } => write!(f, " opening=auto")?,
            Opening::Auto { silent: true } => write!(f, " opening=auto(silent server)")?,
        }
        if self.through_era_bridge() {
            write!(f, " intermediary=era-bridge")?;
        } else if self.bridge {
            write!(f, " intermediary=bridge")?;
        }
        Ok(())
    }
}

pub mod around;
pub mod file;
pub mod knobs;
#[cfg(feature = "proptest")]
pub mod strategies;
pub mod workload;

#[cfg(test)]
mod tests {
    use super::*;

    /// The default asks the reference server's `slow_op` for each planned call's steps.
    #[test]
    fn tool_calls_default_to_slow_op_with_the_planned_steps() {
        let scenario = Scenario::from_seed(3);
        let calls = ToolCalls::default();
        assert_eq!(calls.tool(), crate::model::SLOW_TOOL);
        for (k, call) in scenario.calls.iter().enumerate() {
            let args = calls.arguments(&scenario, k);
            assert_eq!(args["steps"], call.steps);
            assert_eq!(args["step_ms"], call.step.as_millis() as u64);
        }
    }

    /// A list is taken in turn; a function gets the call's index and the scenario's seed.
    #[test]
    fn tool_calls_of_another_tool() {
        let scenario = Scenario::from_seed(9);
        let list = ToolCalls::cycle("index_repo", [json!({"files": 1}), json!({"files": 2})]);
        assert_eq!(list.tool(), "index_repo");
        let files: Vec<Value> = (0..5)
            .map(|i| list.arguments(&scenario, i)["files"].clone())
            .collect();
        assert_eq!(files, [1, 2, 1, 2, 1]);
        assert_eq!(ToolCalls::cycle("t", []).arguments(&scenario, 4), json!({}));
        let computed = ToolCalls::from_fn("index_repo", |i, seed| json!({"i": i, "seed": seed}));
        assert_eq!(computed.arguments(&scenario, 6), json!({"i": 6, "seed": 9}));
        assert!(format!("{computed:?}").contains("index_repo"));
    }
}
