//! The legacy era's own state of a connection, in one value that only a legacy connection
//! has (`Client::legacy` is `None` in 2026-07-28): the HTTP session and its streams, the
//! liveness `ping`, the server's own requests being answered. A client pinned to a legacy revision has it from the start; an auto-mode
//! client gets it when it falls back. The opening (`server/discover` or `initialize`) is not
//! in it: the auto mode's discover is a modern request.

use super::*;

/// The legacy era's own state of a connection.
#[derive(Debug, Clone)]
pub(super) struct LegacyConn {
    /// The HTTP session, once the initialize response issued one.
    pub(super) session: Option<String>,
    /// When a message from the server last arrived (the `ping` counts from it).
    pub(super) last_heard: Time,
    /// The `ping` in flight.
    pub(super) ping: Option<RequestId>,
    /// The session each HTTP stream not yet answered was opened in.
    pub(super) sent_in: BTreeMap<StreamId, Option<String>>,
    /// The server's own requests being worked on, with when each answer is due (a cancel
    /// from the server drops it unanswered).
    pub(super) answering: BTreeMap<RequestId, Time>,
    /// The server's requests seen so far: one replayed on a resumed stream is not answered
    /// twice.
    pub(super) asked: std::collections::BTreeSet<RequestId>,
}

impl Default for LegacyConn {
    /// A legacy connection before its handshake.
    fn default() -> Self {
        LegacyConn {
            session: None,
            last_heard: Time::ZERO,
            ping: None,
            sent_in: BTreeMap::new(),
            answering: BTreeMap::new(),
            asked: Default::default(),
        }
    }
}
