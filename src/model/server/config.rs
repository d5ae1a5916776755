//! What configures the reference server: its tool, how it answers over HTTP, its
//! behaviour and its eras.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::mutant::MutantSet;
use crate::model::server_eras::{ServerEras, SessionLimits};
use crate::model::Transport;
use crate::wire::Message;

/// The name of the reference server's tool. Arguments: `steps` (default 3, at most
/// [`MAX_STEPS`]), `step_ms` (default 1000), `input_rounds` (default 0, at most
/// [`MAX_INPUT_ROUNDS`]: rounds of input asked for before the work starts, §7.2) and `task`
/// (`"required"`: the call must declare the Tasks extension, else -32021). A `call` argument
/// (any string or number) is echoed in the result's text, so that a run through an
/// intermediary can tell whose answer each is (`mcp-sim check-proxy` tags every call).
pub const SLOW_TOOL: &str = "slow_op";

/// The tool argument that numbers a run's calls (see [`SLOW_TOOL`]).
pub const CALL_TAG: &str = "call";

/// The largest `steps` the tool accepts.
pub const MAX_STEPS: u64 = 100_000;

/// The largest `input_rounds` the tool accepts.
pub const MAX_INPUT_ROUNDS: u64 = 16;

/// How the server answers a request over HTTP (`sse` or `json` in files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseMode {
    /// `text/event-stream`: progress and keep-alives can flow before the response.
    Sse,
    /// `application/json`: one object at the end; no progress can be delivered (§2.4).
    Json,
}

/// How SSE events are written on the wire. Every style is valid WHATWG event-stream; the
/// harder ones exercise the client's framer. In files, `plain` or `pretty-crlf-split`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SseStyle {
    /// Compact JSON on one `data:` line, LF line ends, one write per event.
    Plain,
    /// Pretty-printed JSON over several `data:` lines, CR LF line ends, each event written in
    /// two pieces split right after its first CR.
    PrettyCrlfSplit,
}

impl SseStyle {
    /// The bytes of one SSE event carrying `msg`, as the pieces the server writes.
    pub fn encode(self, msg: &Message) -> Vec<Vec<u8>> {
        self.encode_with_id(msg, None)
    }

    /// The bytes of one SSE event carrying `msg` with the `id` field `event_id` first, if any.
    pub fn encode_with_id(self, msg: &Message, event_id: Option<&str>) -> Vec<Vec<u8>> {
        match self {
            SseStyle::Plain => {
                let text = crate::wire::encode(msg).unwrap_or_default();
                let event = crate::framing::sse::encode_event(&text);
                let event = match event_id {
                    Some(id) => format!("id: {id}\n{event}"),
                    None => event,
                };
                vec![event.into_bytes()]
            }
            SseStyle::PrettyCrlfSplit => {
                let value = crate::wire::to_value(msg).unwrap_or_default();
                let text = serde_json::to_string_pretty(&value).unwrap_or_default();
                let mut out = String::new();
                if let Some(id) = event_id {
                    out.push_str("id: ");
                    out.push_str(id);
                    out.push_str("\r\n");
                }
                for line in text.lines() {
                    out.push_str("data: ");
                    out.push_str(line);
                    out.push_str("\r\n");
                }
                out.push_str("\r\n");
                let bytes = out.into_bytes();
                let cut = bytes
                    .iter()
                    .position(|b| *b == b'\r')
                    .map_or(bytes.len(), |p| p + 1);
                vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()]
            }
        }
    }
}

/// Behaviour knobs (a scenario file's `server`; durations in whole ms, `null` or 0 for never).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerBehaviour {
    /// At most one progress notification per token per this interval (SHOULD rate-limit).
    #[serde(rename = "progress_min_interval_ms", with = "crate::time::ms")]
    pub progress_min_interval: Duration,
    /// Send an SSE comment when a stream has been quiet this long (`None`: never).
    #[serde(
        rename = "keepalive_interval_ms",
        default,
        with = "crate::time::ms::zero_is_none"
    )]
    pub keepalive_interval: Option<Duration>,
    /// SSE or JSON responses over HTTP.
    pub response_mode: ResponseMode,
    /// How SSE events are written.
    pub sse_style: SseStyle,
    /// A task is forgotten this long after its creation (`ttlMs`, §7.3).
    #[serde(rename = "task_ttl_ms", with = "crate::time::ms")]
    pub task_ttl: Duration,
    /// The `pollIntervalMs` the server asks of clients polling a task.
    #[serde(rename = "poll_interval_ms", with = "crate::time::ms")]
    pub poll_interval: Duration,
    /// How often the tool list "changes" while a subscription asked to hear of it (`None`:
    /// never).
    #[serde(
        rename = "listen_notify_interval_ms",
        default,
        with = "crate::time::ms::zero_is_none"
    )]
    pub listen_notify_interval: Option<Duration>,
}

impl Default for ServerBehaviour {
    /// Progress at most every second, keep-alives after 15 s of quiet, plain SSE; ten-minute
    /// tasks polled every two seconds; a tool-list change every 20 s.
    fn default() -> Self {
        ServerBehaviour {
            progress_min_interval: Duration::from_secs(1),
            keepalive_interval: Some(Duration::from_secs(15)),
            response_mode: ResponseMode::Sse,
            sse_style: SseStyle::Plain,
            task_ttl: Duration::from_secs(600),
            poll_interval: Duration::from_secs(2),
            listen_notify_interval: Some(Duration::from_secs(20)),
        }
    }
}

/// Server configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerConfig {
    /// The transport.
    pub transport: Transport,
    /// Behaviour knobs.
    pub behaviour: ServerBehaviour,
    /// Faulty behaviours switched on (none for the reference server).
    pub mutants: MutantSet,
    /// The protocol eras it speaks.
    pub eras: ServerEras,
    /// Bounds on what legacy clients hold open over HTTP (none by default).
    pub limits: SessionLimits,
}

impl ServerConfig {
    /// The default behaviour on `transport`, in both eras.
    pub fn new(transport: Transport) -> Self {
        ServerConfig {
            transport,
            behaviour: ServerBehaviour::default(),
            mutants: MutantSet::NONE,
            eras: ServerEras::Both,
            limits: SessionLimits::default(),
        }
    }
}
