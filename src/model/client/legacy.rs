//! The legacy era's own state of a connection, in one value: what a 2026-07-28 connection
//! never uses (the handshake, the HTTP session and its streams, the liveness `ping`, the
//! server's own requests being answered). A modern connection keeps it at its start.

use super::*;

/// The legacy era's own state of a connection.
#[derive(Debug, Clone)]
pub(super) struct LegacyConn {
    /// The handshake on the current connection.
    pub(super) handshake: Handshake,
    /// The HTTP session, once the initialize response issued one.
    pub(super) session: Option<String>,
    /// When a message from the server last arrived (the `ping` counts from it).
    pub(super) last_heard: Time,
    /// The `ping` in flight.
    pub(super) ping: Option<RequestId>,
    /// The session each HTTP stream not yet answered was opened in.
    pub(super) sent_in: BTreeMap<StreamId, Option<String>>,
    /// Where the host stands with the HTTP session ([`Client::end_session`]).
    pub(super) ending: SessionEnd,
    /// The server's own requests being worked on, with when each answer is due (a cancel
    /// from the server drops it unanswered).
    pub(super) answering: BTreeMap<RequestId, Time>,
    /// The server's requests seen so far: one replayed on a resumed stream is not answered
    /// twice.
    pub(super) asked: std::collections::BTreeSet<RequestId>,
}

impl LegacyConn {
    /// The state of a new client: a modern client pinned to 2026-07-28 has no handshake to
    /// make; any other starts with it ahead.
    pub(super) fn new(config: &ClientConfig) -> Self {
        LegacyConn {
            handshake: match (config.era, config.auto) {
                (Era::Modern, None) => Handshake::Done,
                _ => Handshake::NotStarted,
            },
            session: None,
            last_heard: Time::ZERO,
            ping: None,
            sent_in: BTreeMap::new(),
            ending: SessionEnd::Open,
            answering: BTreeMap::new(),
            asked: Default::default(),
        }
    }
}
