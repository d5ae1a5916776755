//! The dual-era server's one era seam: which era each request is read and answered in, and
//! the state that exists only in a legacy connection.
//!
//! On stdio a connection is one client, so its first request decides: `initialize` opens the
//! legacy era, anything else the modern one, until the pipe closes. Over HTTP one process
//! serves any number of clients of either era, in any order, so every request decides for
//! itself, for as long as the server runs (docs/spec/mcp-2025-11-25.md §5,
//! docs/spec/mcp-2026-07-28.md §5.2):
//!
//! - a request naming a session (`Mcp-Session-Id`) is legacy, in that session's revision; a
//!   session this server did not issue, or ended, gets 404;
//! - an `initialize` is legacy and opens a session of its own, unless it is sent as a
//!   2026-07-28 request (that `MCP-Protocol-Version`), which names a removed method;
//! - a request whose `MCP-Protocol-Version` names a legacy revision is legacy, and without a
//!   session it is refused with 400 (it belongs to the session its `initialize` opened);
//! - anything else is 2026-07-28's: stateless, whatever sessions are open beside it.
//!
//! A legacy connection's own state (the revision negotiated, whether the client samples, the
//! resumable streams of an HTTP session) is a `LegacySession`, which exists only for one.
//! A legacy request's id is unique within its connection only, so the server books work under
//! a `JobKey`: the id and the scope it is unique in (the pipe, the session, or for a request
//! outside any session its own stream).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::resume::Resumable;
use super::server_transmit::ServerTransmit;
use super::{MutantSet, StreamId, Transport};
use crate::time::Time;
use crate::wire::{Era, LegacyRevision, Message, Request, RequestId};

/// A request as [`EraSeam::admit_request`] admitted it: the server dispatches on this, and
/// asks the era no more.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// A legacy `initialize`: it opens the legacy era (or is refused by a 2026-07-28-only
    /// server).
    Initialize(Request),
    /// `server/discover` to a server of the legacy era only, refused as such servers refuse it.
    DiscoverRefused(Request),
    /// A request of the legacy era.
    Legacy(Request),
    /// A request of 2026-07-28 (its `protocolVersion` still to be checked).
    Modern(Request),
}

/// The `retry` (ms) a legacy server's priming event asks a client to wait before it resumes
/// a broken stream.
pub const LEGACY_RETRY_MS: u64 = 1000;

/// The protocol eras a server speaks (docs/spec/mcp-2025-11-25.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ServerEras {
    /// Both, as the 2026 SDK servers do: the client's first request decides.
    #[default]
    Both,
    /// The legacy era only (the TypeScript SDK v1, the Python SDK 1.x): a `server/discover`
    /// is refused as they refuse it (on stdio -32601; over HTTP before `initialize` 400 with
    /// -32000 and a null id, as the TypeScript SDK v1 transport answers any request outside
    /// a session) or, with `ignores_discover`, never answered (fastmcp 3.x on `mcp` 1.x).
    LegacyOnly {
        /// `server/discover` gets no answer at all.
        ignores_discover: bool,
    },
    /// 2026-07-28 only: `initialize` is refused with -32022 naming the supported version
    /// (docs/spec/mcp-2026-07-28.md §10.1).
    ModernOnly,
}

impl ServerEras {
    /// The words `--era` (`serve`) and `--upstream-era` (`check-proxy`) take.
    pub const WORDS: [&'static str; 3] = ["auto", "modern", "legacy"];

    /// The word that asks for these eras: `auto` (both), `modern` or `legacy` (a legacy-only
    /// server that ignores `server/discover` has no word: it is a scenario's server only).
    pub fn word(self) -> &'static str {
        match self {
            ServerEras::Both => "auto",
            ServerEras::ModernOnly => "modern",
            ServerEras::LegacyOnly { .. } => "legacy",
        }
    }
}

impl std::str::FromStr for ServerEras {
    type Err = String;

    /// `auto` (both eras: each client's first request decides), `modern` (2026-07-28 only)
    /// or `legacy` (the legacy era only, refusing `server/discover`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(ServerEras::Both),
            "modern" => Ok(ServerEras::ModernOnly),
            "legacy" => Ok(ServerEras::LegacyOnly {
                ignores_discover: false,
            }),
            other => Err(format!(
                "unknown eras {other:?}: {}",
                ServerEras::WORDS.join(", ")
            )),
        }
    }
}

/// The bounds on what legacy clients may hold open in one server process over HTTP (a
/// `serve --http` process runs for as long as its users like). Over a bound the request is
/// refused with 503 and a JSON-RPC error naming the bound, and nothing else is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SessionLimits {
    /// Live legacy sessions (`None`: no bound): at the bound one more `initialize` ends the
    /// idle session unused the longest, and is refused only when none is idle.
    pub max_sessions: Option<u32>,
    /// Streams open at once in one session, POSTs and GETs (`None`: no bound).
    pub max_session_streams: Option<u32>,
}

/// Where a request id is unique: the scope that, with the id, names one request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Scope {
    /// The stdio pipe: one client.
    Pipe,
    /// A legacy HTTP session, by its id.
    Session(String),
    /// A request outside any session (2026-07-28's, stateless): its own stream.
    Stream(StreamId),
}

/// One request the server works on: its id in its scope.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct JobKey {
    pub scope: Scope,
    pub id: RequestId,
}

/// Why an HTTP request is refused before it is served, and with which status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status: 404 for a session this server does not know, 400 for a legacy
    /// request without its session, 405 for a `GET` or `DELETE` outside a session.
    pub status: u16,
    /// What was wrong, for the JSON-RPC error's message.
    pub why: String,
}

/// How the server reads one HTTP request, decided from its head before its body is decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The era its body is read (and answered) in.
    pub era: Era,
    /// Set when the request is refused instead of served.
    pub refusal: Option<Refusal>,
}

/// The head of an HTTP request, as far as the era seam reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestHead<'a> {
    /// `Mcp-Session-Id`.
    pub session: Option<&'a str>,
    /// `MCP-Protocol-Version`.
    pub version: Option<&'a str>,
    /// The body's `method`, if it is a request or notification.
    pub method: Option<&'a str>,
}

/// The state of one legacy connection: a stdio pipe opened with `initialize`, or an HTTP
/// session.
#[derive(Debug, Clone)]
pub(crate) struct LegacySession {
    /// The revision negotiated.
    pub era: Era,
    /// The client declared the `sampling` capability.
    pub samples: bool,
    /// The session's resumable streams (HTTP only).
    pub resumable: Option<Resumable>,
    /// The client ended the session with a `DELETE`: it is refused from then on, and
    /// forgotten once nothing of it is in flight.
    pub ended: bool,
    /// Its streams not yet answered to the end.
    pub open: BTreeSet<StreamId>,
    /// When a stream was last bound to it, in the seam's count of binds: the session unused
    /// the longest has the lowest.
    pub used: u64,
}

/// A stream read in the legacy era, and its session if it has one.
#[derive(Debug, Clone)]
struct LegacyStream {
    era: Era,
    session: Option<String>,
}

/// Every era decision of the server. See the module docs.
#[derive(Debug, Clone)]
pub(crate) struct EraSeam {
    eras: ServerEras,
    limits: SessionLimits,
    transport: Transport,
    mutants: MutantSet,
    /// stdio: the pipe's era once its first request decided it.
    pipe: Option<Era>,
    /// stdio: the legacy connection, once `initialize` opened one.
    pipe_session: Option<LegacySession>,
    /// HTTP: the sessions issued and not yet forgotten, by id.
    sessions: BTreeMap<String, LegacySession>,
    /// HTTP: the streams read in the legacy era; every other stream is 2026-07-28's.
    legacy_streams: BTreeMap<StreamId, LegacyStream>,
    /// How many sessions this server issued.
    issued: u64,
    /// Streams bound to sessions so far ([`LegacySession::used`]).
    binds: u64,
    /// How many of the sessions kept have ended.
    ended: usize,
    /// The last event id any session's stream used (one count for the process).
    events: u64,
    /// Transmits past the resumable layer, for the wire.
    out: VecDeque<ServerTransmit>,
}

impl EraSeam {
    pub(crate) fn new(
        eras: ServerEras,
        limits: SessionLimits,
        transport: Transport,
        mutants: MutantSet,
    ) -> Self {
        EraSeam {
            eras,
            limits,
            transport,
            mutants,
            pipe: None,
            pipe_session: None,
            sessions: BTreeMap::new(),
            legacy_streams: BTreeMap::new(),
            issued: 0,
            binds: 0,
            ended: 0,
            events: 0,
            out: VecDeque::new(),
        }
    }

    fn legacy_only(&self) -> bool {
        matches!(self.eras, ServerEras::LegacyOnly { .. })
    }

    fn modern_only(&self) -> bool {
        self.eras == ServerEras::ModernOnly
    }

    /// The stdio pipe's era, once its first request decided it.
    pub(crate) fn pipe_era(&self) -> Option<Era> {
        self.pipe
    }

    /// The era a message on `stream` (`None`: the pipe) is answered in, as decided so far.
    pub(crate) fn era_on(&self, stream: Option<StreamId>) -> Era {
        match stream {
            None => self.pipe.unwrap_or(Era::Modern),
            Some(s) => self.legacy_streams.get(&s).map_or(Era::Modern, |l| l.era),
        }
    }

    /// Admits a request arriving on `stream` in the era it speaks, decided here once:
    /// `initialize` read in the legacy shape opens the legacy era; a legacy-only server
    /// refuses `server/discover`; anything else speaks the pipe's or the stream's era when
    /// decided, else the one it was read in, bounded by the eras the server speaks.
    pub(crate) fn admit_request(&mut self, stream: Option<StreamId>, r: Request) -> Admitted {
        if r.method == "initialize" && r.meta.legacy {
            return Admitted::Initialize(r);
        }
        if self.legacy_only() && r.method == "server/discover" {
            return Admitted::DiscoverRefused(r);
        }
        match self.request_era(stream, r.meta.legacy) {
            Era::Legacy(_) => Admitted::Legacy(r),
            Era::Modern => Admitted::Modern(r),
        }
    }

    /// The era of a request other than `initialize` arriving on `stream`: the pipe's or the
    /// stream's when decided, else the one the request was read in (`legacy`), bounded by
    /// the eras the server speaks.
    fn request_era(&mut self, stream: Option<StreamId>, legacy: bool) -> Era {
        let reads_legacy = (legacy || self.legacy_only()) && !self.modern_only();
        let asked = if reads_legacy {
            Era::LEGACY
        } else {
            Era::Modern
        };
        match stream {
            None => *self.pipe.get_or_insert(asked),
            Some(s) => match self.legacy_streams.get(&s) {
                Some(l) => l.era,
                None if reads_legacy => {
                    self.bind(s, asked, None);
                    asked
                }
                None => Era::Modern,
            },
        }
    }

    /// The scope a request id on `stream` is unique in.
    pub(crate) fn scope(&self, stream: Option<StreamId>) -> Scope {
        match stream {
            None => Scope::Pipe,
            Some(s) => match self.legacy_streams.get(&s).and_then(|l| l.session.clone()) {
                Some(id) => Scope::Session(id),
                None => Scope::Stream(s),
            },
        }
    }

    fn bind(&mut self, stream: StreamId, era: Era, session: Option<String>) {
        if let Some(s) = session.as_ref().and_then(|id| self.sessions.get_mut(id)) {
            self.binds += 1;
            s.open.insert(stream);
            s.used = self.binds;
        }
        self.legacy_streams
            .insert(stream, LegacyStream { era, session });
    }

    /// Whether one more session may open (see [`SessionLimits`]). At the bound the live
    /// session unused the longest with nothing in flight (no open stream, no work `busy`
    /// names, nothing a resume could still ask for) is ended and forgotten to make room, as a
    /// server may end a session at any time (its next request is answered 404, and its client
    /// opens a new one): clients that go away without a `DELETE` do not fill the server.
    /// Only when every session has something in flight is the request refused.
    pub(crate) fn session_refusal(&mut self, busy: impl Fn(&Scope) -> bool) -> Option<Refusal> {
        let max = self.limits.max_sessions?;
        let live = self.sessions.values().filter(|s| !s.ended).count();
        if live < max as usize {
            return None;
        }
        let idle = self
            .sessions
            .iter()
            .filter(|(id, s)| {
                !s.ended
                    && s.open.is_empty()
                    && !busy(&Scope::Session((*id).clone()))
                    && s.resumable.as_ref().is_none_or(Resumable::is_idle)
            })
            .min_by_key(|(_, s)| s.used)
            .map(|(id, _)| id.clone());
        if let Some(id) = idle {
            self.sessions.remove(&id);
            self.legacy_streams
                .retain(|_, l| l.session.as_ref() != Some(&id));
            return None;
        }
        Some(Refusal {
            status: 503,
            why: format!("Service Unavailable: {live} sessions are open, each with a request or stream in flight, the most this server keeps (--max-sessions)"),
        })
    }

    /// `initialize` on `stream` opened the legacy era in `era`: on stdio the pipe's; over
    /// HTTP a new session, whose id is returned (named by the process's start `started` and
    /// its count, so that a restarted server never issues an id it issued before).
    pub(crate) fn open_legacy(
        &mut self,
        stream: Option<StreamId>,
        era: Era,
        samples: bool,
        started: Time,
    ) -> Option<String> {
        let mut session = LegacySession {
            era,
            samples,
            resumable: None,
            ended: false,
            open: BTreeSet::new(),
            used: 0,
        };
        let Some(stream) = stream else {
            self.pipe = Some(era);
            self.pipe_session = Some(session);
            return None;
        };
        if let (Era::Legacy(revision), Transport::Http) = (era, self.transport) {
            let prime = revision >= LegacyRevision::V2025_11_25;
            session.resumable = Some(Resumable::new(prime, Some(LEGACY_RETRY_MS), self.mutants));
        }
        self.issued += 1;
        let id = format!("{}-{}", started.as_millis(), self.issued);
        self.sessions.insert(id.clone(), session);
        self.bind(stream, era, Some(id.clone()));
        Some(id)
    }

    /// The legacy connection a message on `stream` belongs to, if it has one.
    fn session_on(&self, stream: Option<StreamId>) -> Option<&LegacySession> {
        match stream {
            None => self.pipe_session.as_ref(),
            Some(s) => {
                let id = self.legacy_streams.get(&s)?.session.as_ref()?;
                self.sessions.get(id)
            }
        }
    }

    fn session_on_mut(&mut self, stream: StreamId) -> Option<&mut LegacySession> {
        let id = self.legacy_streams.get(&stream)?.session.as_ref()?;
        self.sessions.get_mut(id)
    }

    /// Whether the legacy client on `stream` declared the `sampling` capability.
    pub(crate) fn samples(&self, stream: Option<StreamId>) -> bool {
        self.session_on(stream).is_some_and(|s| s.samples)
    }

    /// Whether `stream` belongs to a live legacy session.
    pub(crate) fn in_session(&self, stream: StreamId) -> bool {
        self.session_on(Some(stream)).is_some_and(|s| !s.ended)
    }

    /// The resumable streams of `stream`'s session.
    pub(crate) fn resumable(&mut self, stream: StreamId) -> Option<&mut Resumable> {
        self.session_on_mut(stream)?.resumable.as_mut()
    }

    /// HTTP: reads a `POST`'s head (see the module docs); the stream is bound to what it
    /// names.
    pub(crate) fn admit_post(&mut self, stream: StreamId, head: RequestHead<'_>) -> Admission {
        if let Some(id) = head.session {
            return self.admit_in_session(stream, id);
        }
        let legacy_version = head
            .version
            .and_then(Era::from_version)
            .filter(|e| e.is_legacy());
        let admit = |era| Admission { era, refusal: None };
        let modern_version = head.version == Some(crate::wire::PROTOCOL_VERSION);
        if head.method == Some("initialize") && !modern_version {
            // Read in the legacy era; a 2026-07-28-only server refuses it with -32022. One
            // sent as a 2026-07-28 request names a method that revision removed (404).
            return admit(legacy_version.unwrap_or(Era::LEGACY));
        }
        if self.modern_only() {
            return admit(Era::Modern);
        }
        if self.legacy_only() && self.sessions.is_empty() {
            // Before any `initialize` the legacy-only server reads the request as it comes
            // and refuses or answers it in the model (see `ServerEras::LegacyOnly`).
            return admit(Era::Modern);
        }
        match legacy_version {
            Some(era) => self.missing_session(stream, era),
            None if self.legacy_only() => self.missing_session(stream, Era::LEGACY),
            None => admit(Era::Modern),
        }
    }

    fn missing_session(&mut self, stream: StreamId, era: Era) -> Admission {
        self.bind(stream, era, None);
        Admission {
            era,
            refusal: Some(Refusal {
                status: 400,
                why: format!(
                    "Bad Request: a {} request needs the Mcp-Session-Id its initialize issued",
                    era.version()
                ),
            }),
        }
    }

    fn admit_in_session(&mut self, stream: StreamId, id: &str) -> Admission {
        let full = self.limits.max_session_streams;
        match self.sessions.get(id).filter(|s| !s.ended) {
            Some(session) if full.is_some_and(|m| session.open.len() >= m as usize) => {
                let era = session.era;
                Admission {
                    era,
                    refusal: Some(Refusal {
                        status: 503,
                        why: format!(
                            "Service Unavailable: session {id} has {} streams open, the most one session may hold (--max-session-streams)",
                            session.open.len()
                        ),
                    }),
                }
            }
            Some(session) => {
                let era = session.era;
                self.bind(stream, era, Some(id.to_owned()));
                Admission { era, refusal: None }
            }
            None => {
                self.bind(stream, Era::LEGACY, None);
                Admission {
                    era: Era::LEGACY,
                    refusal: Some(Refusal {
                        status: 404,
                        why: format!("session {id} not found"),
                    }),
                }
            }
        }
    }

    /// HTTP: reads the head of a `GET` or `DELETE`: served in a live session only
    /// (2026-07-28 serves POSTs only, §9 E46).
    pub(crate) fn admit_open(
        &mut self,
        stream: StreamId,
        session: Option<&str>,
    ) -> Option<Refusal> {
        match session {
            Some(id) => self.admit_in_session(stream, id).refusal,
            None => Some(Refusal {
                status: 405,
                why: "only POST is served outside a session".into(),
            }),
        }
    }

    /// The `DELETE` on `stream` ended its session.
    pub(crate) fn end_session(&mut self, stream: StreamId) {
        if let Some(session) = self.session_on_mut(stream).filter(|s| !s.ended) {
            session.ended = true;
            self.ended += 1;
        }
    }

    /// Forgets the ended sessions with nothing in flight (`busy` says which scopes still
    /// have work), and their streams. Called only when no transmit waits to be written.
    pub(crate) fn reap(&mut self, busy: impl Fn(&Scope) -> bool) {
        let gone: Vec<String> = self
            .sessions
            .iter()
            .filter(|(id, s)| {
                s.ended
                    && !busy(&Scope::Session((*id).clone()))
                    && s.resumable.as_ref().is_none_or(Resumable::is_idle)
            })
            .map(|(id, _)| id.clone())
            .collect();
        if gone.is_empty() {
            return;
        }
        for id in &gone {
            self.sessions.remove(id);
        }
        self.ended -= gone.len();
        self.legacy_streams
            .retain(|_, l| l.session.as_ref().is_none_or(|s| !gone.contains(s)));
    }

    /// Whether an ended session waits to be forgotten.
    pub(crate) fn has_ended_sessions(&self) -> bool {
        self.ended > 0
    }

    /// The stdio client closed the pipe: the next connection decides its own era.
    pub(crate) fn pipe_closed(&mut self) {
        self.pipe = None;
        self.pipe_session = None;
    }

    /// One transmit of the server on its way to the wire: a legacy result loses its
    /// `resultType`, and a legacy session's stream goes through its resumable layer.
    pub(crate) fn write(&mut self, mut t: ServerTransmit) {
        let stream = t.stream();
        if self.era_on(stream).is_legacy() {
            if let ServerTransmit::Line(Message::Result(r))
            | ServerTransmit::SseEvent {
                msg: Message::Result(r),
                ..
            }
            | ServerTransmit::Json {
                msg: Message::Result(r),
                ..
            } = &mut t
            {
                r.result_type = None;
            }
        }
        let final_modern = matches!(
            t,
            ServerTransmit::Json { .. }
                | ServerTransmit::Accepted { .. }
                | ServerTransmit::SseEnd { .. }
        ) && stream.is_some_and(|s| self.session_on(Some(s)).is_none());
        let before = self.out.len();
        let (out, events) = (&mut self.out, &mut self.events);
        let resumable = match stream {
            Some(s) => {
                let session = self.legacy_streams.get(&s).and_then(|l| l.session.as_ref());
                session
                    .and_then(|id| self.sessions.get_mut(id))
                    .and_then(|l| l.resumable.as_mut())
            }
            None => None,
        };
        match resumable {
            Some(r) => {
                r.write_numbered(t, events);
                while let Some(t) = r.pop() {
                    out.push_back(t);
                }
            }
            None => out.push_back(t),
        }
        // A stream outside a session is over with its one answer.
        if let (true, Some(s)) = (final_modern, stream) {
            self.legacy_streams.remove(&s);
        }
        self.close_ended_streams(before);
    }

    /// Takes the streams whose answer ended (in what went out from `from` on) out of their
    /// sessions' open sets.
    fn close_ended_streams(&mut self, from: usize) {
        for t in self.out.range(from..) {
            let (ServerTransmit::Json { stream, .. }
            | ServerTransmit::Accepted { stream }
            | ServerTransmit::SseEnd { stream }) = t
            else {
                continue;
            };
            let id = self
                .legacy_streams
                .get(stream)
                .and_then(|l| l.session.as_ref());
            if let Some(session) = id.and_then(|id| self.sessions.get_mut(id)) {
                session.open.remove(stream);
            }
        }
    }

    /// A stream broke or closed: it is open in its session no more.
    pub(crate) fn stream_gone(&mut self, stream: StreamId) {
        if let Some(session) = self.session_on_mut(stream) {
            session.open.remove(&stream);
        }
    }

    /// What a resume on `stream` queued in its session's layer, moved out for the wire.
    pub(crate) fn flush(&mut self, stream: StreamId) {
        if let Some(r) = self.resumable(stream) {
            let mut moved = VecDeque::new();
            while let Some(t) = r.pop() {
                moved.push_back(t);
            }
            let before = self.out.len();
            self.out.extend(moved);
            self.close_ended_streams(before);
        }
    }

    /// The next transmit for the wire.
    pub(crate) fn pop(&mut self) -> Option<ServerTransmit> {
        self.out.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::ServerEras;

    #[test]
    fn each_word_names_the_eras_that_give_it_back_and_others_are_refused() {
        for word in ServerEras::WORDS {
            let eras: ServerEras = word.parse().expect("a listed word");
            assert_eq!(eras.word(), word);
        }
        assert_eq!("auto".parse(), Ok(ServerEras::Both));
        let err = "both".parse::<ServerEras>().unwrap_err();
        assert!(err.contains("auto, modern, legacy"), "{err}");
    }
}
