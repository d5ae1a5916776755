//! How a trace says which protocol era it speaks (see [`Era`]): its `initialize` exchange, or
//! the modern `_meta` protocol version, read before anything else is judged.

use serde_json::Value;

use crate::trace::{EventKind, Side, Trace};
use crate::wire::{Era, META_PROTOCOL_VERSION};

/// How the era of a trace was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraSource {
    /// The caller said so (`check-trace --era`, `OracleConfig::era`).
    Given,
    /// The `initialize` exchange at this event: the version its result negotiated, else the
    /// one its request asked for.
    Initialize(usize),
    /// A request at this event carries the modern `_meta` protocol version.
    ModernMeta(usize),
    /// Nothing in the trace says: no `initialize`, no modern `_meta`.
    Assumed,
}

/// The era a trace is judged by, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EraReading {
    /// The era.
    pub era: Era,
    /// Why.
    pub source: EraSource,
}

impl Default for EraReading {
    /// Modern, assumed.
    fn default() -> Self {
        EraReading {
            era: Era::Modern,
            source: EraSource::Assumed,
        }
    }
}

impl EraReading {
    /// The era `trace` speaks, read from its messages. An `initialize` whose result negotiated
    /// a legacy version decides, wherever it comes: a dual-era client that probed with a
    /// modern request and fell back to the handshake speaks the legacy era from then on, and
    /// no modern peer sends `initialize`. Otherwise the first `initialize` request (legacy) or
    /// the first request with the modern `_meta` protocol version, whichever comes first (a
    /// `server/discover` followed by an `initialize` is such a client's probe and does not
    /// count). A
    /// trace with neither is assumed modern, and says so.
    pub fn of_trace(trace: &Trace) -> EraReading {
        // A two-hop trace speaks its front's era (the upstream's is read by the oracle's
        // judgement of that hop).
        if trace.is_two_hop() {
            let (front, origin) = trace.hop(crate::trace::Hop::Front);
            return EraReading::of_trace(&front).reindexed(&origin);
        }
        if let Some(reading) = negotiated_handshake(trace) {
            return reading;
        }
        for (i, event) in trace.events.iter().enumerate() {
            let (EventKind::Send(w) | EventKind::Recv(w)) = &event.kind else {
                continue;
            };
            let Some(msg) = w.msg.as_ref() else { continue };
            let Some(method) = msg.get("method").and_then(Value::as_str) else {
                continue;
            };
            if msg.get("id").is_none() {
                continue;
            }
            let params = msg.get("params");
            if method == "initialize" {
                let asked = params
                    .and_then(|p| p.get("protocolVersion"))
                    .and_then(Value::as_str);
                let agreed = negotiated(trace, i, msg.get("id"));
                let era = agreed
                    .or(asked)
                    .and_then(Era::from_version)
                    .filter(|e| e.is_legacy())
                    .unwrap_or(Era::LEGACY);
                return EraReading {
                    era,
                    source: EraSource::Initialize(i),
                };
            }
            let modern = params
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get(META_PROTOCOL_VERSION))
                .is_some();
            // The probe of an auto-mode client that went on to `initialize` does not decide:
            // the client fell back (no modern peer sends `initialize`).
            if modern && method == "server/discover" && initialize_after(trace, i) {
                continue;
            }
            if modern {
                return EraReading {
                    era: Era::Modern,
                    source: EraSource::ModernMeta(i),
                };
            }
        }
        EraReading {
            era: Era::Modern,
            source: EraSource::Assumed,
        }
    }

    /// This reading with the event it names given as `origin[i]`: the index in the whole
    /// trace of an event of one hop.
    pub(crate) fn reindexed(self, origin: &[usize]) -> EraReading {
        let source = match self.source {
            EraSource::Initialize(i) => EraSource::Initialize(origin[i]),
            EraSource::ModernMeta(i) => EraSource::ModernMeta(origin[i]),
            other => other,
        };
        EraReading { source, ..self }
    }

    /// What the verdict says about the era: `legacy 2025-11-25 (the initialize exchange at
    /// #0)`.
    pub fn describe(&self) -> String {
        let why = match self.source {
            EraSource::Given => "given".to_owned(),
            EraSource::Initialize(i) => format!("the initialize exchange at #{i}"),
            EraSource::ModernMeta(i) => format!("the _meta protocol version at #{i}"),
            EraSource::Assumed => {
                "assumed: no initialize and no _meta protocol version in the trace".to_owned()
            }
        };
        format!("{} ({why})", self.era)
    }
}

/// Whether an `initialize` request comes after event `i`.
fn initialize_after(trace: &Trace, i: usize) -> bool {
    trace.events[i + 1..].iter().any(|event| {
        let (EventKind::Send(w) | EventKind::Recv(w)) = &event.kind else {
            return false;
        };
        let method = w.msg.as_ref().and_then(|m| m.get("method"));
        method.and_then(Value::as_str) == Some("initialize")
    })
}

/// The first `initialize` request whose result negotiated a legacy version.
fn negotiated_handshake(trace: &Trace) -> Option<EraReading> {
    trace.events.iter().enumerate().find_map(|(i, event)| {
        let (EventKind::Send(w) | EventKind::Recv(w)) = &event.kind else {
            return None;
        };
        let msg = w.msg.as_ref()?;
        if msg.get("method").and_then(Value::as_str) != Some("initialize") {
            return None;
        }
        let era = negotiated(trace, i, msg.get("id")).and_then(Era::from_version)?;
        era.is_legacy().then_some(EraReading {
            era,
            source: EraSource::Initialize(i),
        })
    })
}

/// The `protocolVersion` of the result answering the `initialize` with `id` sent at event
/// `from`, in the server's view first (its send, else the client's receipt).
fn negotiated<'t>(trace: &'t Trace, from: usize, id: Option<&Value>) -> Option<&'t str> {
    let id = id?;
    let mut found = None;
    for event in &trace.events[from..] {
        let (EventKind::Send(w) | EventKind::Recv(w)) = &event.kind else {
            continue;
        };
        let Some(msg) = w.msg.as_ref() else { continue };
        let from_server = matches!(
            (&event.kind, event.side),
            (EventKind::Send(_), Side::Server) | (EventKind::Recv(_), Side::Client)
        );
        if !from_server || msg.get("id") != Some(id) || msg.get("method").is_some() {
            continue;
        }
        let version = msg
            .get("result")
            .and_then(|r| r.get("protocolVersion"))
            .and_then(Value::as_str);
        if version.is_some() {
            found = version;
            break;
        }
    }
    found
}
