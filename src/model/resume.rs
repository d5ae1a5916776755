//! The legacy era's resumable SSE streams, on the server's side (docs/spec/mcp-2025-11-25.md
//! §5, LB8, LE15-LE19).
//!
//! The server writes as if every stream stayed open: its jobs address the stream of the POST
//! that opened them (the *origin*). This layer stands between those writes and the wire. It
//! gives every event an id unique across the session (a counter, never reused), keeps each
//! origin's events in a log, and sends them on whichever wire stream carries the origin now:
//! the POST's own, or the `GET` that resumed it with `Last-Event-ID`. When a wire stream
//! breaks, its origin is *detached*: the work goes on (a disconnect is not a cancel, LC11), the
//! events wait in the log (and are written to the broken stream, so that the trace has the
//! server's record of them; the lane drops them), and the end of the response waits with them. A resume replays
//! exactly the origin's events after the one named, then carries what comes next.
//!
//! 2025-11-25 servers prime each POST's stream with an event that has an id and empty data
//! (and the `retry` the client should wait before reconnecting), so that a stream broken before
//! its first message can still be resumed; the earlier revisions do not.
//!
//! A log is dropped when its end reaches the client; a detached origin's log stays until it is
//! resumed and ended or the server forgets the session (a crash). At most [`MAX_LOGGED`] events
//! are kept per origin: a client away that long resumes from the oldest kept.

use std::collections::{BTreeMap, VecDeque};

use super::mutant::{Mutant, MutantSet};
use super::server_transmit::ServerTransmit;
use super::StreamId;
use crate::wire::Message;

/// The most events kept for one origin stream.
pub const MAX_LOGGED: usize = 4096;

#[derive(Debug, Clone, Default)]
struct Log {
    /// The events sent for the origin, with their ids, oldest first.
    events: VecDeque<(u64, Message)>,
    /// The wire stream carrying it now (`None`: detached, waiting for a resume).
    carrier: Option<StreamId>,
    /// The server ended the response.
    ended: bool,
    /// The ids this origin used (the faulty per-stream numbering counts here).
    count: u64,
}

/// How one origin's events reach the wire. See the module docs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resumable {
    next_event: u64,
    logs: BTreeMap<StreamId, Log>,
    /// Each open wire stream's origin.
    carried: BTreeMap<StreamId, StreamId>,
    /// The id of each origin's priming event.
    primed: BTreeMap<StreamId, u64>,
    /// Prime each new POST stream (2025-11-25).
    prime: bool,
    /// The `retry` sent with the priming event.
    retry_ms: Option<u64>,
    /// The faults of [`Mutant::EventIdsPerStream`] and [`Mutant::ReplayOtherStream`].
    mutants: MutantSet,
    out: VecDeque<ServerTransmit>,
}

impl Resumable {
    /// A layer that primes new streams (with `retry_ms`) when `prime`.
    pub(crate) fn new(prime: bool, retry_ms: Option<u64>, mutants: MutantSet) -> Self {
        Resumable {
            prime,
            retry_ms,
            mutants,
            ..Default::default()
        }
    }

    /// The next event id for `origin`'s stream: the session's counter (the faulty server
    /// counts per stream).
    fn event_id(&mut self, origin: StreamId) -> u64 {
        if self.mutants.has(Mutant::EventIdsPerStream) {
            if let Some(log) = self.logs.get_mut(&origin) {
                log.count += 1;
                return log.count;
            }
        }
        self.next_event += 1;
        self.next_event
    }

    /// [`Self::write`], numbering events from the counter `ids`, shared by every session of
    /// one server process, so that an event id names one event of the whole process.
    pub(crate) fn write_numbered(&mut self, t: ServerTransmit, ids: &mut u64) {
        self.next_event = *ids;
        self.write(t);
        *ids = self.next_event;
    }

    /// One write of the server: what goes on the wire now is queued for [`Self::pop`].
    fn write(&mut self, t: ServerTransmit) {
        match t {
            ServerTransmit::SseStart { stream } => {
                self.logs.insert(
                    stream,
                    Log {
                        carrier: Some(stream),
                        ..Log::default()
                    },
                );
                self.carried.insert(stream, stream);
                self.out.push_back(ServerTransmit::SseStart { stream });
                if self.prime {
                    let id = self.event_id(stream);
                    self.out.push_back(ServerTransmit::SsePrime {
                        stream,
                        event_id: id.to_string(),
                        retry_ms: self.retry_ms,
                    });
                    self.primed.insert(stream, id);
                }
            }
            ServerTransmit::SseEvent { stream, msg, .. } => {
                let id = self.event_id(stream);
                let Some(log) = self.logs.get_mut(&stream) else {
                    return;
                };
                // A detached origin's event is still written, to its own (broken) stream: it
                // is on the server's record, and the lane drops the bytes of a closed stream.
                self.out.push_back(ServerTransmit::SseEvent {
                    stream: log.carrier.unwrap_or(stream),
                    msg: msg.clone(),
                    event_id: Some(id.to_string()),
                });
                if log.events.len() == MAX_LOGGED {
                    log.events.pop_front();
                }
                log.events.push_back((id, msg));
            }
            ServerTransmit::SseComment { stream } => {
                if let Some(carrier) = self.logs.get(&stream).and_then(|l| l.carrier) {
                    self.out
                        .push_back(ServerTransmit::SseComment { stream: carrier });
                }
            }
            ServerTransmit::SseEnd { stream } => {
                let Some(log) = self.logs.get_mut(&stream) else {
                    return;
                };
                log.ended = true;
                if let Some(carrier) = log.carrier {
                    self.out
                        .push_back(ServerTransmit::SseEnd { stream: carrier });
                    self.carried.remove(&carrier);
                    self.drop_log(stream);
                }
            }
            other => self.out.push_back(other),
        }
    }

    /// The next transmit for the wire.
    pub(crate) fn pop(&mut self) -> Option<ServerTransmit> {
        self.out.pop_front()
    }

    /// The wire stream `wire` broke. Whether it carried an unfinished origin, which is now
    /// detached (its work goes on; its events wait for a resume).
    pub(crate) fn broke(&mut self, wire: StreamId) -> bool {
        let Some(origin) = self.carried.remove(&wire) else {
            return false;
        };
        match self.logs.get_mut(&origin) {
            Some(log) if log.carrier == Some(wire) => {
                log.carrier = None;
                true
            }
            _ => false,
        }
    }

    /// A `GET` on `wire` with `Last-Event-ID: last`: the origin that event was sent for
    /// resumes on `wire`, with every event after it replayed (and its end, if it came). `None`
    /// when no kept origin sent that event id (the caller refuses the `GET`).
    pub(crate) fn resume(&mut self, wire: StreamId, last: &str) -> Option<()> {
        let last: u64 = last.parse().ok()?;
        let origin = self.origin_of(last)?;
        // The faulty server resumes the session's newest stream, whichever was named.
        let origin = match self.logs.keys().next_back() {
            Some(&newest) if self.mutants.has(Mutant::ReplayOtherStream) => newest,
            _ => origin,
        };
        let log = self.logs.get_mut(&origin)?;
        // A stream resumed twice moves: the older carrier is left to the client to drop.
        if let Some(old) = log.carrier.replace(wire) {
            self.carried.remove(&old);
        }
        self.carried.insert(wire, origin);
        self.out
            .push_back(ServerTransmit::SseStart { stream: wire });
        for (id, msg) in log.events.iter().filter(|(id, _)| *id > last) {
            self.out.push_back(ServerTransmit::SseEvent {
                stream: wire,
                msg: msg.clone(),
                event_id: Some(id.to_string()),
            });
        }
        if log.ended {
            self.out.push_back(ServerTransmit::SseEnd { stream: wire });
            self.carried.remove(&wire);
            self.drop_log(origin);
        }
        Some(())
    }

    /// Nothing is kept: no stream's events wait for their end or a resume.
    pub(crate) fn is_idle(&self) -> bool {
        self.logs.is_empty()
    }

    fn drop_log(&mut self, origin: StreamId) {
        self.logs.remove(&origin);
        self.primed.remove(&origin);
    }

    /// The origin whose stream carried event `id`: the one whose logged events span it (a
    /// priming event's id is below the first message's and above the previous origin's).
    fn origin_of(&self, id: u64) -> Option<StreamId> {
        self.logs
            .iter()
            .find(|(origin, log)| {
                log.events.iter().any(|(e, _)| *e == id) || self.primed.get(origin) == Some(&id)
            })
            .map(|(origin, _)| *origin)
    }
}
