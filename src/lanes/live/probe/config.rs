//! What a probe is asked: the server (`Target`), the schedule's knobs and bounds
//! (`ProbeConfig`, checked by `validate`), the era to speak, and how a probe fails to start.

use super::*;

/// The longest hard maximum a call may be given, in ms (one hour).
pub const MAX_TOTAL_CEILING_MS: u64 = 60 * 60 * 1000;
/// The most calls one probe makes.
pub const MAX_CALLS: u32 = 1000;
/// Calibration calls before the schedule.
pub const CALIBRATION_CALLS: usize = 2;
/// How long a liveness check may wait for its answer by default, in ms: wide, since a loaded
/// machine's interpreter must not look hung.
pub const LIVENESS_MS: u64 = 10_000;

/// The server a probe drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A command and its arguments, started with piped stdio (NDJSON, §5.1).
    Stdio(Vec<String>),
    /// A Streamable HTTP endpoint, `http://HOST[:PORT][/PATH]`.
    Http(String),
}

impl Target {
    /// The command line or the URL, for reports.
    pub fn label(&self) -> String {
        match self {
            Target::Stdio(command) => command.join(" "),
            Target::Http(url) => url.clone(),
        }
    }
}

/// Everything a probe does, apart from its target. [`Default`] is the command's defaults.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// Seed of the schedule (call start times, which calls are cancelled and when, faults).
    pub seed: u64,
    /// The tool to call.
    pub tool: String,
    /// The tool's arguments (a JSON object).
    pub arguments: Map<String, Value>,
    /// Scheduled `tools/call` requests, after the calibration calls: 1 to [`MAX_CALLS`].
    pub calls: u32,
    /// Each call's idle timeout in ms, which valid progress restarts.
    pub timeout_ms: u64,
    /// Each call's hard maximum in ms, whatever progress arrives: at most
    /// [`MAX_TOTAL_CEILING_MS`].
    pub max_total_ms: u64,
    /// Percentage of calls the application cancels, at a seeded offset after their start.
    pub cancel_percent: u64,
    /// Cancels fall within this many ms after their call's start; `None`: between a tenth and
    /// two fifths of the calibrated duration of a call.
    pub cancel_within_ms: Option<u64>,
    /// How long the start-up check may wait for the server's first answer, in ms.
    pub startup_timeout_ms: u64,
    /// Bound on the whole run in seconds; calls still open then are cancelled.
    pub max_seconds: u64,
    /// How long to keep reading after the last outcome, in ms (late messages after a cancel).
    pub drain_ms: u64,
    /// Print every trace event to stderr as it is recorded.
    pub verbose: bool,
    /// Write every trace event to this file as it is recorded.
    pub trace_file: Option<crate::lanes::live::TraceFile>,
    /// Raised to end the run early ([`crate::lanes::live::interrupt`]): the calls still open
    /// are cancelled and the run ends as at [`ProbeConfig::max_seconds`].
    pub interrupt: crate::lanes::live::interrupt::Interrupt,
    /// stdio: percentage of calls during which the probe stops reading the server's stdout.
    pub stall_percent: u64,
    /// stdio: how long a stall lasts, a range of ms.
    pub stall_ms: (u64, u64),
    /// stdio: kill and restart the server this many times, between calls; and, when it is
    /// set, restart a server that stopped answering after a cancel or a timeout (see the
    /// module docs) instead of ending the run.
    pub restarts: u32,
    /// How long the liveness check after a cancel or a timeout may wait for its answer, in ms.
    pub liveness_ms: u64,
    /// HTTP: relay through a local intermediary behaving like this preset.
    pub proxy: Option<ProxyConfig>,
    /// HTTP: delay every post's bytes, each way, by a seeded latency in this range of ms.
    pub latency_ms: Option<(u64, u64)>,
    /// HTTP: percentage of posts whose connection the relay resets mid-response.
    pub reset_percent: u64,
    /// How the probe opens: by default the SDKs' auto mode.
    pub connect: Connect,
    /// Give each call's arguments a `call` member, its 1-based number in the run, so that a
    /// run through an intermediary can pair each call with the upstream request that carries
    /// it (`mcp-sim check-proxy`; the reference server echoes it).
    pub tag_calls: bool,
    /// Stamp events with the ms since this moment instead of since the probe's start, so
    /// that a trace recorded by another process on the same clock lines up with this one.
    pub clock_origin: Option<std::time::SystemTime>,
    /// HTTP to a loopback URL: check the server's DNS-rebinding protection after the run:
    /// one request with a foreign `Origin`, one with a foreign `Host`, judged by
    /// `origin-validated`.
    pub origin_check: bool,
    /// Send a recorded client's calls instead of the seeded schedule (`probe --from`): no
    /// calibration, each call as recorded ([`crate::recording`]).
    pub from: Option<std::sync::Arc<crate::model::recorded::Recording>>,
    /// HTTP, with `from`: the relay resets the post of call `k` (its index in `from`) this
    /// many ms after it opened: a scenario's stream resets, per planned call.
    pub planned_resets: std::collections::BTreeMap<usize, u64>,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            seed: 0,
            tool: "slow_op".into(),
            arguments: Map::new(),
            calls: 6,
            timeout_ms: 5000,
            max_total_ms: 30_000,
            cancel_percent: 34,
            cancel_within_ms: None,
            startup_timeout_ms: 30_000,
            max_seconds: 60,
            drain_ms: 1500,
            verbose: false,
            trace_file: None,
            interrupt: Default::default(),
            stall_percent: 0,
            stall_ms: (200, 2000),
            restarts: 0,
            liveness_ms: LIVENESS_MS,
            proxy: None,
            latency_ms: None,
            reset_percent: 0,
            connect: Connect::AUTO,
            tag_calls: false,
            clock_origin: None,
            origin_check: true,
            from: None,
            planned_resets: std::collections::BTreeMap::new(),
        }
    }
}

/// A configuration the probe refuses, naming the setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The setting (as the command spells its flag, without dashes).
    pub setting: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.setting, self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ProbeConfig {
    /// Checks every limit; the probe runs only a configuration that passes.
    pub fn validate(&self, target: &Target) -> Result<(), ConfigError> {
        let err = |setting, message: String| Err(ConfigError { setting, message });
        if self.calls == 0 || self.calls > MAX_CALLS {
            return err("calls", format!("must be between 1 and {MAX_CALLS}"));
        }
        if self.timeout_ms == 0 {
            return err("timeout-ms", "must be positive".into());
        }
        if self.max_total_ms == 0 || self.max_total_ms > MAX_TOTAL_CEILING_MS {
            return err(
                "max-total-ms",
                format!("must be between 1 and {MAX_TOTAL_CEILING_MS}"),
            );
        }
        if self.liveness_ms == 0 {
            return err("liveness-ms", "must be positive".into());
        }
        if self.startup_timeout_ms == 0 {
            return err("startup-timeout-ms", "must be positive".into());
        }
        if self.max_seconds == 0 {
            return err("max-seconds", "must be positive".into());
        }
        if self.cancel_percent > 100 {
            return err("cancel-percent", "must be at most 100".into());
        }
        if self.cancel_within_ms == Some(0) {
            return err("cancel-within-ms", "must be positive".into());
        }
        if self.stall_percent > 100 || self.reset_percent > 100 {
            return err(
                "stall-percent",
                "percentages must be at most 100 (stall-percent, reset-percent)".into(),
            );
        }
        if self.stall_ms.0 > self.stall_ms.1 {
            return err("stall-ms", "empty range".into());
        }
        if self.latency_ms.is_some_and(|(a, b)| a > b) {
            return err("latency-ms", "empty range".into());
        }
        if self.restarts >= self.calls {
            return err(
                "restarts",
                "must be fewer than calls (a restart goes between calls)".into(),
            );
        }
        let http_only = self.proxy.is_some()
            || self.latency_ms.is_some()
            || self.reset_percent > 0
            || !self.planned_resets.is_empty();
        let stdio_only = self.stall_percent > 0 || self.restarts > 0;
        match target {
            Target::Stdio(command) if command.is_empty() => {
                err("command", "the server command is missing".into())
            }
            Target::Stdio(_) if http_only => err(
                "proxy",
                "the proxy, latency and reset faults need an HTTP server (--url)".into(),
            ),
            Target::Http(_) if stdio_only => err(
                "stall-percent",
                "stalls and restarts need a stdio server (a command)".into(),
            ),
            Target::Http(url) => http::parse_url(url)
                .map(|_| ())
                .map_err(|message| ConfigError {
                    setting: "url",
                    message,
                }),
            Target::Stdio(_) => Ok(()),
        }
    }

    /// The policy every call runs under: an idle timeout reset by progress, under a hard
    /// maximum.
    pub fn policy(&self) -> TimeoutPolicy {
        TimeoutPolicy::resetting(
            Duration::from_millis(self.timeout_ms),
            Duration::from_millis(self.max_total_ms),
        )
    }
}

/// Why a probe could not run at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeError {
    /// The configuration is refused.
    Config(ConfigError),
    /// The command could not be started, or the URL not reached.
    Unreachable(String),
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::Config(e) => e.fmt(f),
            ProbeError::Unreachable(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for ProbeError {}
