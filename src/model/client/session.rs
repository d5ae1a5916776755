//! The legacy era's HTTP session: the session id, the headers each request carries, a
//! broken stream resumed from its last event id (docs/spec/mcp-2025-11-25.md §5, LB8, LE18) and
//! the session's end (`DELETE`).

use std::time::Duration;

use crate::model::mutant::Mutant;
use crate::model::{StreamId, Transport};
use crate::time::Time;
use crate::wire::{LegacyRevision, Message, RequestId};

use super::conn::{Awaits, Handshake, LegacyConn};
use super::output::{ClientEvent, ClientTransmit, Outcome};
use super::Client;

/// How long a legacy client waits before it resumes a broken stream when the server set no
/// `retry` (the TypeScript SDK's initial reconnection delay).
pub const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// How many times a legacy client resumes one request's stream before it gives it up.
pub const MAX_RESUMES: u32 = 3;

/// How a legacy request's broken stream is resumed (docs/spec/mcp-2025-11-25.md §5, LB8,
/// LE18): from the last event id it received, after the `retry` the server asked for.
#[derive(Debug, Clone, Default)]
pub(super) struct Resume {
    pub(super) last_event_id: Option<String>,
    pub(super) retry: Option<Duration>,
    /// When the `GET` goes out (the stream broke and the client waits `retry`).
    pub(super) at: Option<Time>,
    /// Resumes spent.
    pub(super) spent: u32,
    /// The server answered 404 for the session it was sent in: its error body is not the
    /// request's outcome; the request is lost when the stream ends.
    pub(super) expired: bool,
    /// The session the request went out in (a stream of another session cannot be resumed,
    /// nor its request cancelled, in this one).
    pub(super) session: Option<String>,
}

/// The host's word on the legacy HTTP session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SessionEnd {
    /// The host may start more requests.
    Open,
    /// The host is done: the `DELETE` goes out once nothing is outstanding and every POST
    /// has its answer (sent any earlier, it would end the session under a cancel or a
    /// request the server has not read yet).
    Wanted,
    /// The `DELETE` went out; a new request starts a new session.
    Sent,
}

impl Client {
    /// HTTP, legacy era: an SSE event on `stream` had the id `event_id`, with `retry_ms` the
    /// reconnection time in force. Its request resumes from there if the stream breaks.
    pub fn handle_event_id(&mut self, stream: StreamId, event_id: &str, retry_ms: Option<u64>) {
        let Some(p) = self
            .by_stream
            .get(&stream)
            .and_then(|id| self.pending.get_mut(id))
        else {
            return;
        };
        p.resume.last_event_id = Some(event_id.to_owned());
        if let Some(ms) = retry_ms {
            p.resume.retry = Some(Duration::from_millis(ms));
        }
    }

    /// HTTP: the response on `stream` came with `status`. In the legacy era an error status
    /// ends any hope of resuming its request, and a 404 to a request sent in the current
    /// session means the server forgot the session: the client initializes a new one, and the
    /// request is lost (and re-issued in the new session if it may be, LA5).
    pub fn handle_status(&mut self, now: Time, stream: StreamId, status: u16) {
        if status >= 400 && self.discover_refused(now, stream) {
            return;
        }
        let sent_in = self
            .conn
            .legacy_mut()
            .and_then(|l| l.sent_in.remove(&stream));
        if status < 400 || self.legacy_http().is_none() {
            return;
        }
        let id = self.by_stream.get(&stream).cloned();
        if let Some(p) = id.as_ref().and_then(|id| self.pending.get_mut(id)) {
            p.resume.last_event_id = None;
        }
        let session = self.session().map(str::to_owned);
        let expired = status == 404 && session.is_some() && sent_in == Some(session);
        if let (true, Some(legacy)) = (expired, self.conn.legacy_mut()) {
            legacy.session = None;
            // The server that asked forgot the session: its requests have no one to answer.
            legacy.answering.clear();
            if legacy.opened() {
                legacy.handshake = Handshake::NotStarted;
            }
            if let Some(p) = id.and_then(|id| self.pending.get_mut(&id)) {
                p.resume.expired = true;
            }
            // A stream of the forgotten session cannot be resumed in a new one.
            let waiting: Vec<RequestId> = self
                .pending
                .iter()
                .filter(|(_, p)| p.resume.at.is_some())
                .map(|(id, _)| id.clone())
                .collect();
            for id in waiting {
                self.lose(now, &id);
            }
        }
    }

    /// Auto mode over HTTP: an error status on the `server/discover` stream refuses it,
    /// whatever its body (the TypeScript SDK v1 answers 400 with a null id). Whether it did.
    pub(super) fn discover_refused(&mut self, now: Time, stream: StreamId) -> bool {
        let Handshake::Awaiting {
            id,
            awaits: Awaits::DiscoverResult,
            stream: Some(s),
            ..
        } = self.conn.opening()
        else {
            return false;
        };
        if *s != stream {
            return false;
        }
        let id = id.clone();
        let queued = self.end_handshake(Handshake::NotStarted);
        self.events.push_back(ClientEvent::Outcome {
            request: id,
            outcome: Outcome::Error,
        });
        self.fall_back(now, queued);
        true
    }

    /// HTTP, legacy era: the initialize response issued the session `id`; every later request
    /// carries it (LA5).
    pub fn handle_session(&mut self, id: &str) {
        if let Some(legacy) = self.conn.legacy_mut() {
            legacy.session = Some(id.to_owned());
        }
    }

    /// The legacy era's HTTP session, once issued.
    pub fn session(&self) -> Option<&str> {
        self.conn.legacy()?.session.as_deref()
    }

    /// The headers of the POST carrying `msg` (names in lower case): 2026-07-28's
    /// (`wire::http::request_headers`), or in the legacy era `Accept`, `Content-Type`, the
    /// session id once issued and, after the handshake, the negotiated `MCP-Protocol-Version`
    /// (2025-06-18 and later).
    pub fn post_headers(&self, msg: &Message) -> std::collections::BTreeMap<String, String> {
        if self.conn.legacy().is_none() {
            return crate::wire::http::request_headers(msg);
        }
        let mut h = self.legacy_headers();
        h.insert("content-type".into(), "application/json".into());
        h.insert("accept".into(), crate::wire::http::ACCEPT.into());
        h
    }

    /// The headers of a legacy `GET` (a resume after `last_event_id`, or the session's own
    /// stream).
    pub fn get_headers(
        &self,
        last_event_id: Option<&str>,
    ) -> std::collections::BTreeMap<String, String> {
        let mut h = self.legacy_headers();
        h.insert("accept".into(), "text/event-stream".into());
        if let Some(id) = last_event_id {
            h.insert("last-event-id".into(), id.to_owned());
        }
        h
    }

    /// The headers of the session's `DELETE`: its id and the negotiated version.
    pub fn delete_headers(&self) -> std::collections::BTreeMap<String, String> {
        self.legacy_headers()
    }

    pub(super) fn legacy_headers(&self) -> std::collections::BTreeMap<String, String> {
        let mut h = std::collections::BTreeMap::new();
        if let (Some(id), false) = (self.session(), self.mutant(Mutant::NoSessionId)) {
            h.insert("mcp-session-id".into(), id.to_owned());
        }
        let versioned = self
            .conn
            .legacy()
            .filter(|l| l.revision >= LegacyRevision::V2025_06_18 && l.opened());
        if let Some(legacy) = versioned {
            h.insert("mcp-protocol-version".into(), legacy.era().version().into());
        }
        h
    }

    /// Whether it speaks the legacy era over HTTP (a session, resumable streams).
    /// The legacy connection when it runs over HTTP, where it has sessions and resumable
    /// streams (a stdio pipe has neither).
    pub(super) fn legacy_http(&self) -> Option<&LegacyConn> {
        self.conn
            .legacy()
            .filter(|_| self.config.transport == Transport::Http)
    }

    /// Legacy requests whose `retry` wait is over: each resumes on a new `GET`.
    pub(super) fn resume_timers(&mut self, now: Time) {
        let due: Vec<RequestId> = self
            .pending
            .iter()
            .filter(|(_, p)| p.resume.at.is_some_and(|at| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let stream = StreamId(self.next_stream);
            self.next_stream += 1;
            let Some(p) = self.pending.get_mut(&id) else {
                continue;
            };
            p.resume.at = None;
            p.resume.spent += 1;
            p.stream = Some(stream);
            let last_event_id = p.resume.last_event_id.clone();
            self.by_stream.insert(stream, id);
            self.transmits.push_back(ClientTransmit::Get {
                stream,
                last_event_id,
            });
        }
    }

    /// The host is done: over legacy HTTP the client ends its session with a `DELETE` once
    /// nothing is outstanding and every POST has its answer (nothing elsewhere; a trace
    /// cannot tell when a host is done, so no rule asks for it).
    pub fn end_session(&mut self) {
        if self.session_end == SessionEnd::Open {
            self.session_end = SessionEnd::Wanted;
        }
    }

    /// The session's `DELETE`, if it is due now.
    pub(super) fn session_delete(&mut self) -> Option<ClientTransmit> {
        let legacy = self.legacy_http()?;
        let idle = self.pending.is_empty()
            && legacy.answering.is_empty()
            && self.tasks.is_empty()
            && legacy.sent_in.is_empty()
            && self.transmits.is_empty();
        let due = self.session_end == SessionEnd::Wanted
            && legacy.session.is_some()
            && legacy.opened()
            && idle;
        if !due {
            return None;
        }
        self.session_end = SessionEnd::Sent;
        let stream = StreamId(self.next_stream);
        self.next_stream += 1;
        Some(ClientTransmit::Delete { stream })
    }
}
