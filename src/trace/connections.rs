//! An intermediary's upstream connections: a process it started, an HTTP session, or the
//! sessionless 2026-07-28 traffic of one endpoint.
//!
//! Each connection is judged on its own and in its own era: its request ids, tokens,
//! streams and handshake are its own, and an intermediary that opens a side session with
//! `initialize` and relays 2026-07-28 calls beside it speaks two eras upstream. The
//! recorders give each process its own trace; [`sessions`] splits one HTTP endpoint's
//! recording by session, [`numbered`] joins the connections into one upstream hop, and
//! [`Trace::connections`] takes them apart again for judging.
//!
//! # Which session an HTTP event belongs to
//!
//! A request that carries `Mcp-Session-Id` belongs to that session, and so do the events of
//! its stream; an `initialize` without one belongs to the session its response issues. A
//! request without the header belongs to the sessionless connection when it speaks 2026-07-28
//! (the `MCP-Protocol-Version` header or the body's `_meta` says so), when it cancels a request
//! that connection carried, or when no session was issued yet, and otherwise to the latest
//! session: a legacy client that forgot the header is
//! judged by its session's rules (`session-id-sent`), not moved out of their reach. Events
//! that name no stream (a fault, a note) go with the last connection that had an event, or
//! the first.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{EventKind, Hop, Trace, TraceEvent};
use crate::wire::http::SESSION_HEADER;
use crate::wire::{Era, META_PROTOCOL_VERSION};

/// One upstream connection of a two-hop trace's upstream hop, as a one-hop trace.
#[derive(Debug, Clone)]
pub struct Connection {
    /// Its number (`conn`), `None` where the upstream hop is one connection.
    pub conn: Option<u32>,
    /// Its events, without `hop` and `conn`.
    pub trace: Trace,
    /// Each event's index in the whole trace.
    pub origin: Vec<usize>,
}

impl Trace {
    /// The upstream hop's connections, in the order of their numbers (one, unnumbered, when
    /// no event names a connection). An upstream event without `conn` belongs to connection 1.
    pub fn connections(&self) -> Vec<Connection> {
        let mut by_conn: BTreeMap<Option<u32>, Connection> = BTreeMap::new();
        let numbered = self
            .events
            .iter()
            .any(|e| e.hop == Some(Hop::Back) && e.conn.is_some());
        for (i, e) in self.events.iter().enumerate() {
            if e.hop != Some(Hop::Back) {
                continue;
            }
            let conn = numbered.then(|| e.conn.unwrap_or(1));
            let c = by_conn.entry(conn).or_insert_with(|| Connection {
                conn,
                trace: Trace::default(),
                origin: Vec::new(),
            });
            c.trace.events.push(TraceEvent {
                hop: None,
                conn: None,
                ..e.clone()
            });
            c.origin.push(i);
        }
        if by_conn.is_empty() {
            by_conn.insert(
                None,
                Connection {
                    conn: None,
                    trace: Trace::default(),
                    origin: Vec::new(),
                },
            );
        }
        by_conn.into_values().collect()
    }
}

/// The upstream hop of several connections' recordings (each on the shared clock): merged in
/// time order, each connection's own order kept, each event numbered with its connection
/// (from 1, in the order the connections began) when there is more than one.
pub fn numbered(connections: Vec<Trace>) -> Trace {
    let mut conns: Vec<Trace> = connections
        .into_iter()
        .filter(|c| !c.events.is_empty())
        .collect();
    conns.sort_by_key(|c| c.events.first().map_or(0, |e| e.t));
    let several = conns.len() > 1;
    let mut events: Vec<TraceEvent> = Vec::new();
    for (k, c) in conns.into_iter().enumerate() {
        let conn = several.then_some(k as u32 + 1);
        events.extend(c.events.into_iter().map(|e| TraceEvent { conn, ..e }));
    }
    // Stable: at one instant the earlier connection first, each one's order kept.
    events.sort_by_key(|e| e.t);
    Trace { events }
}

/// The key of a connection within one HTTP endpoint's recording.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    /// 2026-07-28 requests (no sessions) and whatever came before any session.
    Sessionless,
    /// A legacy session.
    Session(String),
}

/// One HTTP endpoint's server-end recording split by session (see the module docs), each
/// connection in the order of its first event; a stdio recording, or one of a single
/// connection, as it is.
pub fn sessions(trace: &Trace) -> Vec<Trace> {
    let mut stream_key: BTreeMap<u64, Key> = BTreeMap::new();
    let mut latest_session: Option<String> = None;
    // The ids of the requests the sessionless connection carried.
    let mut sessionless_ids: std::collections::BTreeSet<String> = Default::default();
    // The first pass decides each stream's key: its request's session, or for an
    // `initialize` without one, the session its response issues.
    for e in &trace.events {
        match &e.kind {
            EventKind::Recv(w) => {
                let Some(stream) = w.stream else { continue };
                let header = w
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(SESSION_HEADER).cloned());
                let key = match header {
                    Some(id) => {
                        latest_session = Some(id.clone());
                        Key::Session(id)
                    }
                    None if speaks_modern(w) => Key::Sessionless,
                    None if cancels_one_of(w.msg.as_ref(), &sessionless_ids) => Key::Sessionless,
                    None => match &latest_session {
                        Some(id) if !is_initialize(w.msg.as_ref()) => Key::Session(id.clone()),
                        _ => Key::Sessionless,
                    },
                };
                if key == Key::Sessionless {
                    if let Some(id) = w.msg.as_ref().and_then(|m| m.get("id")) {
                        sessionless_ids.insert(id.to_string());
                    }
                }
                stream_key.entry(stream).or_insert(key);
            }
            EventKind::Open {
                stream, headers, ..
            } => {
                let key = headers
                    .as_ref()
                    .and_then(|h| h.get(SESSION_HEADER).cloned())
                    .map_or(Key::Sessionless, Key::Session);
                stream_key.entry(*stream).or_insert(key);
            }
            EventKind::Status {
                stream: Some(stream),
                headers: Some(h),
                ..
            } => {
                if let Some(id) = h.get(SESSION_HEADER) {
                    if stream_key.get(stream) == Some(&Key::Sessionless) {
                        stream_key.insert(*stream, Key::Session(id.clone()));
                        latest_session = Some(id.clone());
                    }
                }
            }
            _ => {}
        }
    }
    let distinct: std::collections::BTreeSet<&Key> = stream_key.values().collect();
    if distinct.len() < 2 {
        return vec![trace.clone()];
    }
    let mut order: Vec<Key> = Vec::new();
    let mut parts: BTreeMap<Key, Trace> = BTreeMap::new();
    let mut last: Option<Key> = None;
    for e in &trace.events {
        let key = stream_of(&e.kind)
            .and_then(|s| stream_key.get(&s).cloned())
            .or_else(|| last.clone())
            .unwrap_or(Key::Sessionless);
        if !order.contains(&key) {
            order.push(key.clone());
        }
        parts.entry(key.clone()).or_default().events.push(e.clone());
        last = Some(key);
    }
    order.into_iter().filter_map(|k| parts.remove(&k)).collect()
}

/// The HTTP stream an event names, if any.
fn stream_of(kind: &EventKind) -> Option<u64> {
    match kind {
        EventKind::Send(w) | EventKind::Recv(w) => w.stream,
        EventKind::Close { stream, .. }
        | EventKind::Comment { stream }
        | EventKind::Status { stream, .. }
        | EventKind::Fault { stream, .. } => *stream,
        EventKind::Open { stream, .. } | EventKind::Sse { stream, .. } => Some(*stream),
        _ => None,
    }
}

/// Whether a request speaks 2026-07-28: its `MCP-Protocol-Version` header names a modern
/// version, or its body's `_meta` carries the protocol version.
fn speaks_modern(w: &super::WireEvent) -> bool {
    let header = w
        .headers
        .as_ref()
        .and_then(|h| h.get("mcp-protocol-version"))
        .and_then(|v| Era::from_version(v));
    let meta = w
        .msg
        .as_ref()
        .and_then(|m| m.get("params"))
        .and_then(|p| p.get("_meta"))
        .is_some_and(|m| m.get(META_PROTOCOL_VERSION).is_some());
    header == Some(Era::Modern) || meta
}

/// Whether `msg` is a `notifications/cancelled` naming one of `ids` (JSON text).
fn cancels_one_of(msg: Option<&Value>, ids: &std::collections::BTreeSet<String>) -> bool {
    let Some(msg) = msg else { return false };
    msg.get("method") == Some(&Value::from("notifications/cancelled"))
        && msg
            .get("params")
            .and_then(|p| p.get("requestId"))
            .is_some_and(|id| ids.contains(&id.to_string()))
}

fn is_initialize(msg: Option<&Value>) -> bool {
    msg.and_then(|m| m.get("method")) == Some(&Value::from("initialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Trace {
        Trace::from_jsonl(text).expect("valid trace")
    }

    #[test]
    fn a_side_session_and_sessionless_modern_calls_are_two_connections() {
        let t = parse(concat!(
            r#"{"t":0,"side":"server","kind":"recv","transport":"http","stream":1,"msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}}"#,
            "\n",
            r#"{"t":1,"side":"server","kind":"status","stream":1,"status":200,"content_type":"application/json","headers":{"mcp-session-id":"s1"}}"#,
            "\n",
            r#"{"t":5,"side":"server","kind":"recv","transport":"http","stream":2,"msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}}"#,
            "\n",
            r#"{"t":6,"side":"server","kind":"recv","transport":"http","stream":3,"headers":{"mcp-session-id":"s1"},"msg":{"jsonrpc":"2.0","method":"notifications/initialized"}}"#,
            "\n",
        ));
        let parts = sessions(&t);
        assert_eq!(parts.len(), 2);
        assert_eq!(
            parts[0].events.len(),
            3,
            "the session: initialize, its status, initialized"
        );
        assert_eq!(parts[1].events.len(), 1, "the modern call");
        let joined = numbered(parts);
        let conns: Vec<Option<u32>> = joined.events.iter().map(|e| e.conn).collect();
        assert_eq!(conns, [Some(1), Some(1), Some(2), Some(1)]);
    }

    #[test]
    fn a_cancel_without_a_session_follows_the_sessionless_request_it_names() {
        // A bridge holds a legacy session and relays 2026-07-28 calls beside it; its POSTed
        // cancel carries neither a session nor a protocol version, and names a relayed call.
        let t = parse(concat!(
            r#"{"t":0,"side":"server","kind":"recv","transport":"http","stream":1,"msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}}"#,
            "\n",
            r#"{"t":1,"side":"server","kind":"status","stream":1,"status":200,"headers":{"mcp-session-id":"s1"}}"#,
            "\n",
            r#"{"t":5,"side":"server","kind":"recv","transport":"http","stream":2,"headers":{"mcp-protocol-version":"2026-07-28"},"msg":{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x"}}}"#,
            "\n",
            r#"{"t":9,"side":"server","kind":"recv","transport":"http","stream":3,"msg":{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}}"#,
            "\n",
            r#"{"t":9,"side":"server","kind":"recv","transport":"http","stream":4,"msg":{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}}"#,
            "\n",
        ));
        let parts = sessions(&t);
        assert_eq!(parts.len(), 2);
        assert_eq!(
            parts[0].events.len(),
            3,
            "the session, and the cancel naming no call of the other"
        );
        assert_eq!(parts[1].events.len(), 2, "the relayed call and its cancel");
    }

    #[test]
    fn one_connection_is_left_unnumbered() {
        let t = parse(
            r#"{"t":0,"side":"server","kind":"recv","transport":"stdio","msg":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#,
        );
        assert_eq!(sessions(&t).len(), 1);
        assert!(numbered(vec![t]).events.iter().all(|e| e.conn.is_none()));
    }

    #[test]
    fn a_connection_number_outside_the_upstream_hop_is_refused() {
        let bad = r#"{"t":0,"side":"client","hop":"front","conn":2,"kind":"comment"}"#;
        let e = Trace::from_jsonl(bad).expect_err("refused");
        assert!(e.message.contains("upstream hop"), "{e}");
        let zero = r#"{"t":0,"side":"server","hop":"back","conn":0,"kind":"comment"}"#;
        assert!(Trace::from_jsonl(zero).is_err());
    }
}
