//! The knobs of a fitted scenario that the wire shows beside the calls: transport, era and
//! opening, latency, an intermediary's idle cuts, injected faults, and the server's stream
//! habits (keep-alives, JSON or SSE answers, how often it sends progress).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::{ResponseMode, Transport};
use crate::oracle::{self, OracleConfig};
use crate::scenario::file::Provenance;
use crate::scenario::{knobs, Fault, Opening, ProxyConfig};
use crate::trace::{EventKind, Side, Trace, TransportName};
use crate::wire::Era;

/// A knob's value and its provenance.
pub(super) type Fitted<T> = (T, Provenance);

/// The transport of the first message.
pub(super) fn transport(trace: &Trace) -> Fitted<Transport> {
    let first = trace
        .events
        .iter()
        .enumerate()
        .find_map(|(i, e)| match &e.kind {
            EventKind::Send(w) | EventKind::Recv(w) => Some((i, w.transport)),
            _ => None,
        });
    match first {
        Some((i, TransportName::Http)) => (
            Transport::Http,
            Provenance::recorded(format!("line {}", i + 1)),
        ),
        Some((i, TransportName::Stdio)) => (
            Transport::Stdio,
            Provenance::recorded(format!("line {}", i + 1)),
        ),
        None => (
            Transport::Stdio,
            Provenance::default_because("no message in the recording"),
        ),
    }
}

/// The era the oracle reads, and how the client came to it.
pub(super) fn era_and_opening(trace: &Trace) -> (Fitted<Era>, Fitted<Opening>) {
    let verdict = oracle::check(trace, &OracleConfig::default());
    let era = (
        verdict.era.era,
        Provenance::recorded(verdict.describe_era()),
    );
    let requests: Vec<&serde_json::Value> = trace
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Send(w) if e.side == Side::Client => w.msg.as_ref(),
            EventKind::Recv(w) if e.side == Side::Server => w.msg.as_ref(),
            _ => None,
        })
        .filter(|m| m.get("method").is_some() && m.get("id").is_some())
        .collect();
    let discover = requests
        .first()
        .filter(|m| m["method"] == "server/discover");
    let opening = match discover {
        None => (
            Opening::Pinned,
            Provenance::recorded("the first request is not server/discover"),
        ),
        Some(d) => {
            let id = &d["id"];
            let answered = trace.events.iter().any(|e| match &e.kind {
                EventKind::Send(w) | EventKind::Recv(w) => w
                    .msg
                    .as_ref()
                    .is_some_and(|m| m.get("method").is_none() && &m["id"] == id),
                _ => false,
            });
            let silent = !answered && era.0.is_legacy();
            (
                Opening::Auto { silent },
                Provenance::recorded(match silent {
                    true => "server/discover first, never answered, then initialize",
                    false => "server/discover first",
                }),
            )
        }
    };
    (era, opening)
}

/// One-way latency from the messages both sides recorded: the least and the most any took.
pub(super) fn latency(trace: &Trace) -> Fitted<(Duration, Duration)> {
    // Each side's sends by message text, in order; a receipt takes the oldest matching send.
    let mut sent: BTreeMap<(Side, String), Vec<u64>> = BTreeMap::new();
    let mut delays = Vec::new();
    for e in &trace.events {
        match &e.kind {
            EventKind::Send(w) if matches!(e.side, Side::Client | Side::Server) => {
                if let Some(m) = &w.msg {
                    sent.entry((e.side, m.to_string())).or_default().push(e.t);
                }
            }
            EventKind::Recv(w) if matches!(e.side, Side::Client | Side::Server) => {
                let from = match e.side {
                    Side::Client => Side::Server,
                    _ => Side::Client,
                };
                let Some(m) = &w.msg else { continue };
                if let Some(times) = sent.get_mut(&(from, m.to_string())) {
                    if !times.is_empty() {
                        let t = times.remove(0);
                        delays.push(e.t.saturating_sub(t));
                    }
                }
            }
            _ => {}
        }
    }
    match (delays.iter().min(), delays.iter().max()) {
        (Some(&lo), Some(&hi)) => (
            (Duration::from_millis(lo), Duration::from_millis(hi)),
            Provenance::inferred(format!(
                "{} messages seen sent and read: {lo} to {hi} ms one way",
                delays.len()
            )),
        ),
        _ => {
            let (lo, hi) = knobs::LATENCIES_MS[0];
            (
                (Duration::from_millis(lo), Duration::from_millis(hi)),
                Provenance::default_because(
                    "only one side recorded: no message seen both sent and read",
                ),
            )
        }
    }
}

/// An intermediary's idle cuts: the preset whose idle timeout fits the quiet time before the
/// cut (within 5 %), else a custom one. `None` when nothing was cut.
pub(super) fn proxy(trace: &Trace) -> Option<Fitted<ProxyConfig>> {
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    let mut idle = None;
    for e in &trace.events {
        match &e.kind {
            EventKind::Send(w) | EventKind::Recv(w) => {
                if let Some(s) = w.stream {
                    last.insert(s, e.t);
                }
            }
            EventKind::Comment { stream: Some(s) }
            | EventKind::Status {
                stream: Some(s), ..
            } => {
                last.insert(*s, e.t);
            }
            EventKind::Close {
                stream: Some(s),
                by: Side::Proxy,
                reason,
            } if reason.as_deref() == Some("idle") => {
                let quiet = e.t.saturating_sub(last.get(s).copied().unwrap_or(0));
                idle = Some(idle.map_or(quiet, |q: u64| q.min(quiet)));
            }
            _ => {}
        }
    }
    let quiet = idle?;
    let fits = |p: &ProxyConfig| {
        let t = p.idle_timeout.as_millis() as u64;
        quiet.abs_diff(t) <= t / 20
    };
    let preset = [
        ProxyConfig::NGINX,
        ProxyConfig::ALB,
        ProxyConfig::CLOUDFLARE,
    ]
    .into_iter()
    .find(fits);
    Some(match preset {
        Some(p) => (
            p,
            Provenance::inferred(format!("a stream cut idle after {quiet} ms: {}", p.name)),
        ),
        None => (
            ProxyConfig::custom(Duration::from_millis(quiet.max(1))),
            Provenance::inferred(format!(
                "a stream cut idle after {quiet} ms, no preset fits"
            )),
        ),
    })
}

/// The faults the recorder injected (`fault` events): a restart is a crash, a reset a stream
/// reset of the call on that stream. `calls` maps a stream to its call's index.
pub(super) fn faults(
    trace: &Trace,
    t0: u64,
    call_of_stream: impl Fn(u64) -> Option<usize>,
) -> (Vec<Fault>, Vec<String>) {
    let mut faults = Vec::new();
    let mut notes = Vec::new();
    for (i, e) in trace.events.iter().enumerate() {
        let EventKind::Fault { fault, stream, .. } = &e.kind else {
            continue;
        };
        let at = Duration::from_millis(e.t.saturating_sub(t0));
        match (fault.as_str(), stream.and_then(&call_of_stream)) {
            ("restart", _) => faults.push(Fault::CrashServer { at }),
            ("reset", Some(call)) => faults.push(Fault::ResetStream { at, call }),
            (other, _) => notes.push(format!("fault {other:?} at line {}: not modelled", i + 1)),
        }
    }
    (faults, notes)
}

/// The server's habits on its streams.
pub(super) struct Habits {
    pub(super) keepalive: Fitted<Option<Duration>>,
    pub(super) response_mode: Fitted<ResponseMode>,
    pub(super) progress_interval: Fitted<Duration>,
    pub(super) no_buffering_header: Fitted<bool>,
}

pub(super) fn habits(trace: &Trace, transport: Transport) -> Habits {
    let defaults = crate::model::ServerBehaviour::default();
    // Keep-alives: the shortest quiet before a comment on a stream.
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    let mut quiet_before_comment: Option<u64> = None;
    let mut json = 0;
    let mut sse = 0;
    let mut no_buffering = None;
    // Progress: the shortest gap between two notifications of one token.
    let mut progress_last: BTreeMap<String, u64> = BTreeMap::new();
    let mut progress_gap: Option<u64> = None;
    let server_view = trace.events.iter().any(|e| e.side == Side::Server);
    for e in &trace.events {
        let writer = match server_view {
            true => e.side == Side::Server,
            false => e.side == Side::Client,
        };
        match &e.kind {
            EventKind::Send(w) | EventKind::Recv(w) if writer => {
                if let Some(s) = w.stream {
                    last.insert(s, e.t);
                }
                let progress = w
                    .msg
                    .as_ref()
                    .filter(|m| m["method"] == "notifications/progress");
                if let Some(token) = progress.map(|m| m["params"]["progressToken"].to_string()) {
                    if let Some(prev) = progress_last.insert(token, e.t) {
                        let gap = e.t - prev.min(e.t);
                        progress_gap = Some(progress_gap.map_or(gap, |g| g.min(gap)));
                    }
                }
            }
            EventKind::Comment { stream: Some(s) } if writer => {
                if let Some(prev) = last.insert(*s, e.t) {
                    let quiet = e.t.saturating_sub(prev);
                    quiet_before_comment =
                        Some(quiet_before_comment.map_or(quiet, |q| q.min(quiet)));
                }
            }
            EventKind::Status {
                content_type,
                headers,
                ..
            } if writer || !server_view => {
                match content_type.as_deref() {
                    Some(ct) if ct.starts_with("application/json") => json += 1,
                    Some(ct) if ct.starts_with("text/event-stream") => sse += 1,
                    _ => {}
                }
                if let Some(h) = headers {
                    let told = h.get("x-accel-buffering").is_some_and(|v| v == "no");
                    no_buffering = Some(no_buffering.unwrap_or(false) || told);
                }
            }
            _ => {}
        }
    }
    let keepalive = match quiet_before_comment {
        Some(q) => (
            Some(Duration::from_millis(q)),
            Provenance::inferred(format!("a keep-alive after {q} ms of quiet")),
        ),
        None => (
            defaults.keepalive_interval,
            Provenance::default_because("no keep-alive seen"),
        ),
    };
    let response_mode = match (transport, json, sse) {
        (Transport::Http, j, s) if j > s => (
            ResponseMode::Json,
            Provenance::recorded(format!("{j} JSON answers, {s} SSE")),
        ),
        (Transport::Http, j, s) if s > 0 => (
            ResponseMode::Sse,
            Provenance::recorded(format!("{s} SSE answers, {j} JSON")),
        ),
        _ => (
            defaults.response_mode,
            Provenance::default_because("no HTTP answer with a content type"),
        ),
    };
    let progress_interval = match progress_gap {
        Some(gap) => {
            let fit = knobs::PROGRESS_INTERVALS_MS
                .iter()
                .copied()
                .filter(|&i| i <= gap)
                .max()
                .unwrap_or(0);
            (
                Duration::from_millis(fit),
                Provenance::inferred(format!(
                    "progress of one request at least {gap} ms apart: the largest interval of \
                     the scenarios' that allows it"
                )),
            )
        }
        None => (
            defaults.progress_min_interval,
            Provenance::default_because("no two progress notifications of one request"),
        ),
    };
    let no_buffering_header = match no_buffering {
        Some(b) => (b, Provenance::recorded("the answers' headers")),
        None => (
            true,
            Provenance::default_because("no response headers recorded"),
        ),
    };
    Habits {
        keepalive,
        response_mode,
        progress_interval,
        no_buffering_header,
    }
}
