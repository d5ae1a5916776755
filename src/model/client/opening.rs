//! The opening of a connection: `server/discover` in the auto mode, the fallback to
//! `initialize`, the legacy handshake and the requests queued behind it (docs/spec/mcp-2025-11-25.md
//! lifecycle; 2026-07-28 §2).

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::Value;

use crate::model::mutant::Mutant;
use crate::model::policy::TimeoutReason;
use crate::model::{StreamId, Transport};
use crate::time::Time;
use crate::wire::{Cancelled, Era, Message, Notification, Request, RequestId, ResultResponse};

use super::conn::{Awaits, Conn, Handshake, LegacyConn};
use super::output::{ClientEvent, ClientTransmit, Outcome};
use super::Client;

impl Client {
    /// How long this client waits for the opening's answer: `None` for a discover under
    /// `discover_without_timeout`, which waits for ever (go-sdk's probe has no timer of its
    /// own but the caller's context).
    pub(super) fn opening_timeout(&self, awaits: Awaits) -> Option<Duration> {
        let untimed =
            awaits == Awaits::DiscoverResult && self.mutant(Mutant::DiscoverWithoutTimeout);
        (!untimed).then(|| awaits.timeout())
    }
}

impl Client {
    /// Opens a connection with `queued` waiting: the auto mode's `server/discover` while the
    /// era is undecided, the legacy handshake on a legacy connection (a modern one has
    /// nothing to open: what waited goes out).
    pub(super) fn start_opening(
        &mut self,
        now: Time,
        queued: VecDeque<(RequestId, ClientTransmit)>,
    ) {
        match self.conn {
            Conn::Undecided { .. } => self.start_discover(now, queued),
            Conn::Legacy(_) => self.start_handshake(now, queued),
            Conn::Modern => self.release(now, queued),
        }
    }

    /// Auto mode: sends `server/discover` (in the modern shape), with `queued` waiting.
    pub(super) fn start_discover(
        &mut self,
        now: Time,
        queued: VecDeque<(RequestId, ClientTransmit)>,
    ) {
        let id = RequestId::Number(self.next_id);
        self.next_id += 1;
        let discover = Request::new(id.clone(), "server/discover");
        let (stream, transmit) = self.addressed(discover.into());
        self.transmits.push_back(transmit);
        if let Some(opening) = self.conn.opening_mut() {
            *opening = Handshake::Awaiting {
                id,
                awaits: Awaits::DiscoverResult,
                sent: now,
                stream,
                broke: None,
                queued,
            };
        }
    }

    /// Auto mode: the server refused `server/discover` or kept silent. The client speaks
    /// the legacy era from now on: what waited takes the legacy shape and waits behind the
    /// handshake.
    pub(super) fn fall_back(
        &mut self,
        now: Time,
        mut queued: VecDeque<(RequestId, ClientTransmit)>,
    ) {
        let Conn::Undecided { fallback, .. } = self.conn else {
            return;
        };
        self.conn = Conn::Legacy(LegacyConn::new(fallback));
        for (_, transmit) in &mut queued {
            if let ClientTransmit::Line(Message::Request(r))
            | ClientTransmit::Post {
                msg: Message::Request(r),
                ..
            } = transmit
            {
                self.legacy_shape(r);
            }
        }
        self.start_handshake(now, queued);
    }

    /// Sends `initialize` (legacy era), with `queued` waiting behind it. It is never cancelled
    /// (LA3): after [`HANDSHAKE_TIMEOUT`] the client drops the connection and starts another;
    /// a pipe that breaks starts the next connection's handshake afresh.
    pub(super) fn start_handshake(
        &mut self,
        now: Time,
        queued: VecDeque<(RequestId, ClientTransmit)>,
    ) {
        let Some(era) = self.conn.legacy().map(LegacyConn::era) else {
            return self.release(now, queued);
        };
        let id = RequestId::Number(self.next_id);
        self.next_id += 1;
        let mut init = Request::new(id.clone(), "initialize");
        init.params.insert(
            "protocolVersion".into(),
            serde_json::Value::from(era.version()),
        );
        // It answers the server's sampling requests (the legacy era's requests to the client).
        init.params
            .insert("capabilities".into(), serde_json::json!({"sampling": {}}));
        init.params.insert(
            "clientInfo".into(),
            serde_json::json!({"name": "mcp-sim", "version": env!("CARGO_PKG_VERSION")}),
        );
        self.legacy_shape(&mut init);
        let (stream, transmit) = self.addressed(init.into());
        self.transmits.push_back(transmit);
        if let Some(opening) = self.conn.opening_mut() {
            *opening = Handshake::Awaiting {
                id,
                awaits: Awaits::InitializeResult,
                sent: now,
                stream,
                broke: None,
                queued,
            };
        }
    }

    /// The handshake's deadline passed: its timeout and outcome, the connection dropped, and
    /// a new handshake with the same requests waiting.
    pub(super) fn handshake_timer(&mut self, now: Time) {
        let Handshake::Awaiting {
            id,
            awaits,
            sent,
            stream,
            broke,
            ..
        } = self.conn.opening()
        else {
            return;
        };
        if let Some(at) = *broke {
            if now < at {
                return;
            }
            let queued = self.end_handshake(Handshake::NotStarted);
            if !queued.is_empty() {
                self.start_opening(now, queued);
            }
            return;
        }
        let (awaits, stream, sent) = (*awaits, *stream, *sent);
        if self
            .opening_timeout(awaits)
            .is_none_or(|timeout| now < sent + timeout)
        {
            return;
        }
        let id = id.clone();
        let queued = self.end_handshake(Handshake::NotStarted);
        self.events.push_back(ClientEvent::Timeout {
            request: id.clone(),
            reason: TimeoutReason::Idle,
        });
        let id_for_cancel = id.clone();
        self.events.push_back(ClientEvent::Outcome {
            request: id,
            outcome: Outcome::TimedOut,
        });
        if awaits == Awaits::DiscoverResult {
            // An ordinary modern request given up: cancelled as the modern era cancels (the
            // notification on stdio, the stream's close on HTTP), then the fallback.
            match stream {
                Some(stream) => self.transmits.push_back(ClientTransmit::Close { stream }),
                None => {
                    let mut cancel = Cancelled::new(id_for_cancel);
                    cancel.reason = Some("server/discover unanswered: falling back".into());
                    self.transmits
                        .push_back(ClientTransmit::Line(cancel.into()));
                }
            }
            return self.fall_back(now, queued);
        }
        if self.mutant(Mutant::CancelsInitialize) {
            let mut cancel = Cancelled::new(id_for_cancel);
            cancel.reason = Some("initialize timed out".into());
            let (_, transmit) = self.addressed(cancel.into());
            self.transmits.push_back(transmit);
        }
        if self.config.transport == Transport::Stdio {
            self.transmits.push_back(ClientTransmit::Disconnect);
        }
        // Another connection only for requests still waiting; the next request otherwise.
        if !queued.is_empty() {
            self.start_handshake(now, queued);
        }
    }

    /// Ends the waiting handshake (the client's state becomes `next`) and returns what waited
    /// behind it.
    pub(super) fn end_handshake(
        &mut self,
        next: Handshake,
    ) -> VecDeque<(RequestId, ClientTransmit)> {
        match self.conn.opening_mut().map(|o| std::mem::replace(o, next)) {
            Some(Handshake::Awaiting { queued, .. }) => queued,
            _ => VecDeque::new(),
        }
    }

    /// The answer to `initialize`: the handshake's outcome; on a result the client sends
    /// `notifications/initialized` and then what waited, in order; on an error what waited
    /// fails with it. Whether `id` was the handshake's.
    pub(super) fn handshake_answered(&mut self, now: Time, id: &RequestId, ok: bool) -> bool {
        let Handshake::Awaiting {
            id: init, awaits, ..
        } = self.conn.opening()
        else {
            return false;
        };
        if init != id {
            return false;
        }
        let discover = *awaits == Awaits::DiscoverResult;
        let queued = self.end_handshake(Handshake::Done);
        self.events.push_back(ClientEvent::Outcome {
            request: id.clone(),
            outcome: if ok { Outcome::Result } else { Outcome::Error },
        });
        if discover && !ok {
            self.fall_back(now, queued);
        } else if discover {
            self.conn = Conn::Modern;
            self.release(now, queued);
        } else if ok {
            let initialized = Notification {
                method: "notifications/initialized".into(),
                params: None,
            };
            let (_, transmit) = self.addressed(initialized.into());
            self.transmits.push_back(transmit);
            // Over HTTP the client offers the server a stream of its own (a server without
            // one answers 405).
            if self.legacy_http().is_some() {
                let stream = StreamId(self.next_stream);
                self.next_stream += 1;
                self.transmits.push_back(ClientTransmit::Get {
                    stream,
                    last_event_id: None,
                });
            }
            self.release(now, queued);
        } else {
            for (queued_id, _) in queued {
                if self.finish(&queued_id).is_some() {
                    self.events.push_back(ClientEvent::Outcome {
                        request: queued_id,
                        outcome: Outcome::Error,
                    });
                }
            }
            if let Some(opening) = self.conn.opening_mut() {
                *opening = Handshake::NotStarted;
            }
        }
        true
    }

    /// Whether `id` is the auto mode's `server/discover`, still awaited.
    pub(super) fn opening_discover(&self, id: &RequestId) -> bool {
        matches!(
            self.conn.opening(),
            Handshake::Awaiting { id: d, awaits: Awaits::DiscoverResult, .. } if d == id
        )
    }

    /// What waited behind the opening goes on the wire now, and its timers count from now.
    pub(super) fn release(&mut self, now: Time, queued: VecDeque<(RequestId, ClientTransmit)>) {
        for (queued_id, transmit) in queued {
            if let Some(p) = self.pending.get_mut(&queued_id) {
                p.sent = now;
            }
            self.transmits.push_back(transmit);
        }
    }

    /// Whether `id` still waits behind the handshake (never sent): then giving up on it sends
    /// nothing, and it leaves the queue.
    pub(super) fn unqueue(&mut self, id: &RequestId) -> bool {
        let Some(Handshake::Awaiting { queued, .. }) = self.conn.opening_mut() else {
            return false;
        };
        let before = queued.len();
        queued.retain(|(q, _)| q != id);
        queued.len() != before
    }

    /// A new connection (legacy era): its first request starts a new handshake. What waited
    /// behind the old one is outstanding and is lost (or retried) with the connection.
    pub(super) fn reset_handshake(&mut self) {
        // A modern connection has no handshake (once auto mode's discovery is done).
        let Some(opening) = self.conn.opening_mut() else {
            return;
        };
        if let Handshake::Awaiting {
            id, broke: None, ..
        } = std::mem::replace(opening, Handshake::NotStarted)
        {
            // The handshake went with its connection (one whose stream broke was already
            // reported lost).
            self.events.push_back(ClientEvent::Outcome {
                request: id,
                outcome: Outcome::Lost,
            });
        }
    }
}

/// Whether a discover result offers `era`'s version: its `supportedVersions` names it, or it
/// has none to say otherwise.
pub(super) fn offers(r: &ResultResponse, era: &Era) -> bool {
    match r.result.get("supportedVersions").and_then(Value::as_array) {
        Some(versions) => versions.iter().any(|v| v.as_str() == Some(era.version())),
        None => true,
    }
}
