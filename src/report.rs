//! Failure reports: the violated rules, the slice of the trace around them, and a Mermaid
//! `sequenceDiagram` of that slice (the form the MCP spec itself uses to explain races).

use std::fmt::Write as _;

use crate::oracle::{rule_info, Verdict};
use crate::trace::{EventKind, Hop, Side, Trace, TraceEvent, WireEvent};

/// Events shown before the first and after the last event a violation names.
const CONTEXT: usize = 6;

/// Indices of the events to show for `report`: the events each violation names, with some
/// context around them, in order.
pub fn slice(trace: &Trace, report: &Verdict) -> Vec<usize> {
    let mut keep = vec![false; trace.events.len()];
    for v in &report.violations {
        for &e in &v.events {
            let lo = e.saturating_sub(CONTEXT);
            let hi = (e + CONTEXT).min(trace.events.len().saturating_sub(1));
            for k in keep.iter_mut().take(hi + 1).skip(lo) {
                *k = true;
            }
        }
    }
    keep.iter()
        .enumerate()
        .filter(|(_, k)| **k)
        .map(|(i, _)| i)
        .collect()
}

/// The violations, one per line, with each rule's spec reference.
pub fn violations_text(report: &Verdict) -> String {
    let mut out = String::new();
    for v in &report.violations {
        let spec = rule_info(v.rule).map_or("", |r| r.spec_in(report.era_of(v)));
        let _ = writeln!(out, "  {v}  ({spec})");
    }
    out
}

/// A short label for a message event.
fn label(w: &WireEvent) -> String {
    let Some(msg) = &w.msg else {
        return format!(
            "raw {:?}",
            w.raw
                .as_deref()
                .unwrap_or("")
                .chars()
                .take(40)
                .collect::<String>()
        );
    };
    let id = msg
        .get("id")
        .map(|v| format!(" id={v}"))
        .unwrap_or_default();
    let params = msg.get("params");
    if let Some(method) = msg.get("method").and_then(|m| m.as_str()) {
        let detail = match method {
            "notifications/progress" => {
                let p = params
                    .and_then(|p| p.get("progress"))
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                let t = params
                    .and_then(|p| p.get("progressToken"))
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                format!(" {t} {p}")
            }
            "notifications/cancelled" => params
                .and_then(|p| p.get("requestId"))
                .map(|v| format!(" requestId={v}"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        format!("{method}{id}{detail}")
    } else if msg.get("error").is_some() {
        format!("error{id}")
    } else {
        format!("result{id}")
    }
}

fn participant(side: Side) -> &'static str {
    match side {
        Side::Client => "C",
        Side::Server => "S",
        Side::Proxy => "P",
        Side::Backend => "B",
    }
}

fn peer(side: Side) -> Side {
    match side {
        Side::Client => Side::Server,
        _ => Side::Client,
    }
}

/// Who observed event `e` and who is at the other end: in a two-hop trace the intermediary
/// (`I`) is the server of the front hop and the client of the back, and of several upstream
/// connections each server has its own lane (`S1`, `S2`, ...).
fn ends(e: &TraceEvent) -> (String, String) {
    let (me, other) = (participant(e.side), participant(peer(e.side)));
    let server = || e.conn.map_or_else(|| "S".to_owned(), |c| format!("S{c}"));
    match e.hop {
        None => (me.into(), other.into()),
        Some(Hop::Front) => match e.side {
            Side::Client => ("C".into(), "I".into()),
            _ => ("I".into(), "C".into()),
        },
        Some(Hop::Back) => match e.side {
            Side::Client => ("I".into(), server()),
            Side::Backend => ("B".into(), server()),
            Side::Server => (server(), "I".into()),
            _ => (me.into(), "I".into()),
        },
    }
}

/// One diagram line for an event, if it has one. Messages are drawn once, at the send, or at
/// the receipt when the sender's side was not recorded.
fn line(e: &TraceEvent, i: usize, sides_with_sends: &[(Option<Hop>, Side)]) -> Option<String> {
    let at = format!("{}ms #{i}", e.t);
    let (me, other) = ends(e);
    let server = e.conn.map_or_else(|| "S".to_owned(), |c| format!("S{c}"));
    Some(match &e.kind {
        EventKind::Send(w) => {
            let stream = w.stream.map(|s| format!(" [s{s}]")).unwrap_or_default();
            format!("{me}->>{other}: {}{stream} ({at})", label(w))
        }
        EventKind::Recv(w) if !sides_with_sends.contains(&(e.hop, peer(e.side))) => {
            format!("{other}->>{me}: {} ({at})", label(w))
        }
        EventKind::Recv(_) => return None,
        EventKind::Close { stream, by, .. } => {
            let what = stream.map_or("connection".to_string(), |s| format!("stream s{s}"));
            format!("Note over {me}: {what} closed by {} ({at})", by.as_str())
        }
        EventKind::Timeout { request, reason } => format!(
            "Note over C: timeout {} of {request} ({at})",
            reason.as_str()
        ),
        EventKind::Outcome { request, outcome } => format!(
            "Note over C: outcome {} for {request} ({at})",
            outcome.as_str()
        ),
        EventKind::Work { request } => format!("{server}->>B: work for {request} ({at})"),
        EventKind::Release { request } => format!("{server}->>B: release {request} ({at})"),
        EventKind::Comment { stream } => {
            format!("Note over {me}: keep-alive s{} ({at})", stream.unwrap_or(0))
        }
        EventKind::Status { stream, status, .. } => format!(
            "Note over {me}: HTTP {status} s{} ({at})",
            stream.unwrap_or(0)
        ),
        EventKind::Progress { request, progress } => {
            format!("Note over C: app sees progress {progress} for {request} ({at})")
        }
        EventKind::Open { stream, method, .. } => {
            format!("Note over {me}: {method} opens s{stream} ({at})")
        }
        EventKind::Sse {
            stream,
            event_id,
            retry_ms,
        } => {
            let id = event_id.as_deref().unwrap_or("-");
            let retry = retry_ms
                .map(|ms| format!(" retry {ms} ms"))
                .unwrap_or_default();
            format!("Note over {me}: SSE event id {id}{retry} s{stream} ({at})")
        }
        EventKind::Fault { fault, stream, ms } => {
            let on = stream.map_or(String::new(), |s| format!(" s{s}"));
            let len = ms.map_or(String::new(), |ms| format!(" {ms} ms"));
            format!("Note over {me}: injected {fault}{on}{len} ({at})")
        }
    })
}

/// The diagram's lanes, left to right: the client, the middle one if the trace has it (the
/// intermediary of a two-hop trace, or a simulated proxy), the server (one per upstream
/// connection where there are several), and the backend if its work was recorded. Declared up
/// front so that the order does not depend on which lane the slice happens to mention first;
/// a lane nothing happens on is left out.
fn lanes(trace: &Trace) -> Vec<(String, String)> {
    let mut lanes = vec![("C".to_owned(), "Client".to_owned())];
    if trace.is_two_hop() {
        lanes.push(("I".into(), "Intermediary".into()));
    } else if trace.events.iter().any(|e| e.side == Side::Proxy) {
        lanes.push(("P".into(), "Proxy".into()));
    }
    let mut conns: Vec<u32> = trace.events.iter().filter_map(|e| e.conn).collect();
    conns.sort_unstable();
    conns.dedup();
    if conns.is_empty() {
        lanes.push(("S".into(), "Server".into()));
    }
    for c in conns {
        lanes.push((format!("S{c}"), format!("Server connection {c}")));
    }
    let backend = |e: &TraceEvent| {
        e.side == Side::Backend
            || matches!(e.kind, EventKind::Work { .. } | EventKind::Release { .. })
    };
    if trace.events.iter().any(backend) {
        lanes.push(("B".into(), "Backend".into()));
    }
    lanes
}

/// A Mermaid `sequenceDiagram` of the given events, with each violation as a note at its
/// decisive event.
pub fn mermaid(trace: &Trace, report: &Verdict, events: &[usize]) -> String {
    let mut sides_with_sends: Vec<(Option<Hop>, Side)> = trace
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Send(_)))
        .map(|e| (e.hop, e.side))
        .collect();
    sides_with_sends.sort();
    sides_with_sends.dedup();
    let mut out = String::from("sequenceDiagram\n");
    let lanes = lanes(trace);
    // A violation's note spans the client and the rightmost server lane.
    let right = lanes
        .iter()
        .rev()
        .find(|(name, _)| name.starts_with('S'))
        .map_or("S", |(name, _)| name.as_str())
        .to_owned();
    for (name, lane) in &lanes {
        let _ = writeln!(out, "    participant {name} as {lane}");
    }
    for &i in events {
        if let Some(l) = line(&trace.events[i], i, &sides_with_sends) {
            let _ = writeln!(out, "    {}", l.replace(';', ","));
        }
        for v in report
            .violations
            .iter()
            .filter(|v| v.events.last() == Some(&i))
        {
            let _ = writeln!(
                out,
                "    Note over C,{right}: VIOLATION {} ({})",
                v.rule, v.level
            );
        }
    }
    out
}
