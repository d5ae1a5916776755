//! The legacy era's own server work (docs/spec/mcp-2025-11-25.md): the `initialize`
//! handshake, refusals of what a session cannot serve, the resumable `GET` stream and the
//! session's `DELETE`, `server/discover` refused by a legacy-only server, sampling asked of the
//! client, and ended sessions reaped.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::model::mutant::Mutant;
use crate::model::server_eras::{JobKey, Scope, ServerEras};
use crate::model::server_transmit::ServerTransmit;
use crate::model::StreamId;
use crate::time::Time;
use crate::wire::{
    codes, Era, ErrorResponse, Message, Request, RequestId, ResultResponse, PROTOCOL_VERSION,
};

use super::{Job, Server};

/// How long the server waits for the client's answer to its `sampling/createMessage` before
/// it cancels the request.
pub const SAMPLING_TIMEOUT: Duration = Duration::from_secs(20);

impl Server {
    /// A response from the client: in the legacy era the answer to a request of the
    /// server's own (a POST of its own over HTTP, answered 202); 2026-07-28 clients send none.
    pub(super) fn handle_answer(&mut self, stream: Option<StreamId>, msg: Message) {
        if self.legacy_on(stream) {
            if let Some(id) = msg.id() {
                self.playback_answered(id);
                for job in self.jobs.values_mut() {
                    if job.sampling.as_ref().is_some_and(|(s, _)| s == id) {
                        job.sampling = None;
                    }
                }
            }
            if let Some(s) = stream {
                self.transmits
                    .push_back(ServerTransmit::Accepted { stream: s });
            }
            return;
        }
        if let Some(s) = stream {
            let e = ErrorResponse::new(
                None,
                codes::INVALID_REQUEST,
                "clients do not send responses",
            );
            self.transmits.push_back(ServerTransmit::Json {
                stream: s,
                status: 400,
                msg: e.into(),
                session: None,
            });
        }
    }

    /// A fresh id for a request of the server's own, named by the process's start too, so
    /// that a restarted server never reuses one.
    pub(super) fn own_request_id(&mut self) -> RequestId {
        self.own_requests += 1;
        RequestId::String(format!(
            "s-{}-{}",
            self.started.as_millis(),
            self.own_requests
        ))
    }

    /// Legacy era: asks the client for a `sampling/createMessage` on the call's stream (on
    /// stdio, the pipe); its id and when the server gives up on it.
    pub(super) fn ask_to_sample(
        &mut self,
        now: Time,
        stream: Option<StreamId>,
    ) -> (RequestId, Time) {
        let id = self.own_request_id();
        let mut r = Request::new(id.clone(), "sampling/createMessage");
        r.meta.legacy = true;
        r.params.insert(
            "messages".into(),
            json!([{"role": "user", "content": {"type": "text", "text": "Summarise the step."}}]),
        );
        r.params.insert("maxTokens".into(), json!(16));
        self.send(stream, r.into());
        (id, now + SAMPLING_TIMEOUT)
    }

    /// Cancels the server's own request of `job`, if one is outstanding: the notification
    /// goes where the request went (docs/spec/mcp-2025-11-25.md LC9).
    pub(super) fn cancel_sampling(&mut self, job: &mut Job, reason: &str) {
        let Some((id, _)) = job.sampling.take() else {
            return;
        };
        let writable = job.stream.is_none_or(|s| self.open_sse.contains(&s));
        if writable {
            let mut c = crate::wire::Cancelled::new(id);
            c.reason = Some(reason.to_owned());
            self.send(job.stream, c.into());
        }
    }

    /// The legacy handshake: the version the client asked for when it is a legacy one, else
    /// the newest legacy revision (version negotiation, docs/spec/mcp-2025-11-25.md §2).
    pub(super) fn initialize(&mut self, stream: Option<StreamId>, r: Request) {
        if self.config.eras == ServerEras::ModernOnly {
            let mut e = ErrorResponse::new(
                Some(r.id),
                codes::UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version: this server speaks 2026-07-28 only",
            );
            let asked = r.params.get("protocolVersion").cloned();
            e.error.data = Some(json!({"supported": [PROTOCOL_VERSION], "requested": asked}));
            return self.respond(stream, e.into(), 400);
        }
        let refusal = match stream {
            Some(_) => self.seam.session_refusal(busy(&self.jobs, &self.listens)),
            None => None,
        };
        if let Some(refusal) = refusal {
            let e = ErrorResponse::new(Some(r.id), codes::INVALID_REQUEST, refusal.why);
            return self.respond(stream, e.into(), refusal.status);
        }
        let asked = r.params.get("protocolVersion").and_then(Value::as_str);
        let era = asked
            .and_then(Era::from_version)
            .filter(|e| e.is_legacy())
            .unwrap_or(Era::LEGACY);
        let samples = r
            .params
            .get("capabilities")
            .and_then(|c| c.get("sampling"))
            .is_some();
        let session = self.seam.open_legacy(stream, era, samples, self.started);
        let mut res = ResultResponse::complete(r.id);
        res.result_type = None;
        res.result
            .insert("protocolVersion".into(), json!(era.version()));
        res.result
            .insert("capabilities".into(), json!({"tools": {}}));
        res.result.insert(
            "serverInfo".into(),
            json!({"name": "mcp-sim-server", "version": env!("CARGO_PKG_VERSION")}),
        );
        // A recorded server played back introduces itself as it did: its capabilities, name
        // and instructions (a client decides what to ask by them).
        self.recorded_introduction(&mut res.result);
        self.respond(stream, res.into(), 200);
        if let Some(ServerTransmit::Json {
            session: header, ..
        }) = self.transmits.back_mut()
        {
            *header = session;
        }
    }

    /// HTTP: the request (`id`, if it had one) or `GET` on `stream` is refused with `status`
    /// and -32600: the legacy era's unknown or missing session, or a `GET` with nothing to
    /// resume.
    pub fn refuse(&mut self, stream: StreamId, id: Option<RequestId>, status: u16, why: &str) {
        let e = ErrorResponse::new(id, codes::INVALID_REQUEST, why);
        self.transmits.push_back(ServerTransmit::Json {
            stream,
            status,
            msg: e.into(),
            session: None,
        });
    }

    /// HTTP, legacy era: a `GET` opened `stream`, resuming after `last_event_id` when it has
    /// one. A resume replays what the broken stream missed and carries the rest of it; a
    /// `GET` that resumes nothing this server kept is answered 404, and one without
    /// `Last-Event-ID` 405 (the reference server offers no stream of its own).
    pub fn handle_get(&mut self, _now: Time, stream: StreamId, last_event_id: Option<&str>) {
        let listens = self.mutant(Mutant::ProgressOnGetStream);
        let resumed = match (self.seam.resumable(stream), last_event_id) {
            (Some(r), Some(last)) => {
                let resumed = r.resume(stream, last).is_some();
                self.seam.flush(stream);
                resumed
            }
            // The faulty server keeps a listening stream, and writes progress to it.
            (Some(_), None) if listens => {
                self.listening = Some(stream);
                self.sse_start(stream);
                true
            }
            _ => false,
        };
        if !resumed {
            let (status, why) = match last_event_id {
                Some(last) => (404, format!("no stream to resume after event {last}")),
                None => (405, "this server offers no GET stream".to_owned()),
            };
            self.refuse(stream, None, status, &why);
        }
    }

    /// HTTP, legacy era: the client ended its session with a `DELETE` on `stream` (its
    /// session id checked by the lane). The session is forgotten, so a later request in it
    /// is answered 404 (docs/spec/mcp-2025-11-25.md §5); a listening stream ends with it.
    /// Work in flight goes on: its streams are open and each still ends with its response.
    pub fn handle_delete(&mut self, _now: Time, stream: StreamId) {
        self.seam.end_session(stream);
        if let Some(listening) = self.listening.take() {
            self.transmits
                .push_back(ServerTransmit::SseEnd { stream: listening });
        }
        self.transmits
            .push_back(ServerTransmit::Accepted { stream });
    }

    /// A legacy-only server's answer to `server/discover` (see [`ServerEras::LegacyOnly`]).
    pub(super) fn refuse_discover(&mut self, stream: Option<StreamId>, r: Request) {
        if let ServerEras::LegacyOnly {
            ignores_discover: true,
        } = self.config.eras
        {
            return;
        }
        match stream {
            Some(stream) if !self.seam.in_session(stream) => {
                let e = ErrorResponse::new(
                    None,
                    codes::SERVER_NOT_INITIALIZED,
                    "Bad Request: Server not initialized",
                );
                self.transmits.push_back(ServerTransmit::Json {
                    stream,
                    status: 400,
                    msg: e.into(),
                    session: None,
                });
            }
            _ => {
                let e = ErrorResponse::new(Some(r.id), codes::METHOD_NOT_FOUND, "Method not found");
                self.respond(stream, e.into(), 200);
            }
        }
    }

    /// Forgets the ended sessions that have nothing in flight any more; only once every
    /// transmit is written, since a session's streams are read in its era until then.
    pub(super) fn reap_sessions(&mut self) {
        if self.seam.has_ended_sessions() {
            self.seam.reap(busy(&self.jobs, &self.listens));
        }
    }
}

/// Whether a scope has work in flight: a job or a listen of it.
fn busy<'a, J, L>(
    jobs: &'a BTreeMap<JobKey, J>,
    listens: &'a BTreeMap<JobKey, L>,
) -> impl Fn(&Scope) -> bool + 'a {
    move |scope| jobs.keys().chain(listens.keys()).any(|k| &k.scope == scope)
}
