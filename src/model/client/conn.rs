//! The client's connection, which carries its era. The era is decided once and the type
//! holds it after (as rustls decides the version in `ExpectServerHello` and lets the state
//! types carry it): a client pinned to an era starts decided; in auto mode it is
//! [`Conn::Undecided`] until `server/discover` is answered ([`Conn::Modern`]) or refused or
//! left unanswered ([`Conn::Legacy`], with the fallback revision). Only a legacy connection
//! has the legacy era's state ([`LegacyConn`]): what no 2026-07-28 connection has cannot be
//! reached from one.
//!
//! The opening of a connection ([`Handshake`], what it [`Awaits`] and for how long) lives in
//! the variant it belongs to: the discover of an undecided connection, the `initialize` of a
//! legacy one (a new one on every new connection). A modern connection has nothing to open.
//! What the client does to open one is in `opening`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use super::output::ClientTransmit;
use super::StreamId;
use crate::time::Time;
use crate::wire::{Era, LegacyRevision, RequestId};

/// How a client opens its connections: pinned to an era, or in auto mode, the dual-era SDKs'
/// default or option (Python `mcp` 2.x, fastmcp, rmcp's `Auto`): the first request waits
/// behind a `server/discover`; a result keeps the modern era, and a refusal (any error) or
/// [`DISCOVER_TIMEOUT`] of silence falls back to the handshake of `fallback`
/// (docs/spec/mcp-2025-11-25.md §1). The era so decided holds for the client's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connect {
    /// This era from the first message: a legacy client opens every connection with
    /// `initialize`, holds its requests until the result, then sends
    /// `notifications/initialized`; its requests carry no modern `_meta` keys
    /// (docs/spec/mcp-2025-11-25.md §2).
    Pinned(Era),
    /// `server/discover` first, falling back to `fallback`'s handshake.
    Auto {
        /// The legacy revision the client falls back to.
        fallback: LegacyRevision,
    },
}

impl Connect {
    /// The dual-era SDKs' auto mode, falling back to 2025-11-25.
    pub const AUTO: Connect = Connect::Auto {
        fallback: LegacyRevision::V2025_11_25,
    };

    /// Whether it opens with `server/discover`.
    pub fn is_auto(self) -> bool {
        matches!(self, Connect::Auto { .. })
    }
}

impl std::str::FromStr for Connect {
    type Err = String;

    /// `auto`, `modern`, `legacy` (2025-11-25) or a revision's date.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Connect::AUTO),
            "modern" => Ok(Connect::Pinned(Era::Modern)),
            "legacy" => Ok(Connect::Pinned(Era::LEGACY)),
            date => Era::from_version(date).map(Connect::Pinned).ok_or_else(|| {
                format!(
                    "unknown era {date:?}: auto, modern, legacy or a revision's date \
                     (2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26)"
                )
            }),
        }
    }
}

impl std::fmt::Display for Connect {
    /// The word its `FromStr` reads back (`--era`'s): `auto`, `modern`, or a legacy
    /// revision's date.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Connect::Pinned(Era::Modern) => f.write_str("modern"),
            Connect::Pinned(era) => f.write_str(era.version()),
            Connect::Auto { .. } => f.write_str("auto"),
        }
    }
}

/// The client's connection and the era it carries.
#[derive(Debug, Clone)]
pub(super) enum Conn {
    /// Auto mode before the server told its era; requests take the modern shape and wait
    /// behind `discover`.
    Undecided {
        /// The revision a refusal falls back to.
        fallback: LegacyRevision,
        /// Where the `server/discover` stands.
        discover: Handshake,
    },
    /// 2026-07-28: nothing to open, no session.
    Modern,
    /// A legacy revision, with its connection's own state.
    Legacy(LegacyConn),
}

/// Every opening of a modern connection is done.
static OPENED: Handshake = Handshake::Done;

impl Conn {
    /// The connection a client configured with `connect` starts with.
    pub(super) fn new(connect: Connect) -> Conn {
        match connect {
            Connect::Pinned(Era::Modern) => Conn::Modern,
            Connect::Pinned(Era::Legacy(revision)) => Conn::Legacy(LegacyConn::new(revision)),
            Connect::Auto { fallback } => Conn::Undecided {
                fallback,
                discover: Handshake::NotStarted,
            },
        }
    }

    /// The era it speaks now (2026-07-28 while undecided).
    pub(super) fn era(&self) -> Era {
        match self {
            Conn::Undecided { .. } | Conn::Modern => Era::Modern,
            Conn::Legacy(legacy) => Era::Legacy(legacy.revision),
        }
    }

    /// Where the opening of the current connection stands.
    pub(super) fn opening(&self) -> &Handshake {
        match self {
            Conn::Undecided { discover, .. } => discover,
            Conn::Modern => &OPENED,
            Conn::Legacy(legacy) => &legacy.handshake,
        }
    }

    /// The opening of the current connection, where there is one to make.
    pub(super) fn opening_mut(&mut self) -> Option<&mut Handshake> {
        match self {
            Conn::Undecided { discover, .. } => Some(discover),
            Conn::Modern => None,
            Conn::Legacy(legacy) => Some(&mut legacy.handshake),
        }
    }

    /// The legacy connection's own state.
    pub(super) fn legacy(&self) -> Option<&LegacyConn> {
        match self {
            Conn::Legacy(legacy) => Some(legacy),
            _ => None,
        }
    }

    /// The legacy connection's own state, to change.
    pub(super) fn legacy_mut(&mut self) -> Option<&mut LegacyConn> {
        match self {
            Conn::Legacy(legacy) => Some(legacy),
            _ => None,
        }
    }
}

/// The legacy era's own state of a connection: its revision and handshake, the HTTP session
/// and its streams, the liveness `ping`, the server's own requests being answered.
#[derive(Debug, Clone)]
pub(super) struct LegacyConn {
    /// The revision it speaks.
    pub(super) revision: LegacyRevision,
    /// Where the `initialize` of the current connection stands.
    pub(super) handshake: Handshake,
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
    pub(super) asked: BTreeSet<RequestId>,
}

impl LegacyConn {
    /// A legacy connection of `revision` before its handshake.
    pub(super) fn new(revision: LegacyRevision) -> Self {
        LegacyConn {
            revision,
            handshake: Handshake::NotStarted,
            session: None,
            last_heard: Time::ZERO,
            ping: None,
            sent_in: BTreeMap::new(),
            answering: BTreeMap::new(),
            asked: BTreeSet::new(),
        }
    }

    /// The era it speaks.
    pub(super) fn era(&self) -> Era {
        Era::Legacy(self.revision)
    }

    /// Whether its handshake is done on the current connection.
    pub(super) fn opened(&self) -> bool {
        matches!(self.handshake, Handshake::Done)
    }
}

/// How long a client in auto mode waits for the `server/discover` answer before it falls back
/// to the legacy handshake (rmcp's `Auto` waits 10 s: fastmcp 3.x on `mcp` 1.x ignores the
/// request, MayDay-wpf/snow-app PR #56).
pub const DISCOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a legacy client waits for the initialize result before it gives the connection
/// up and opens another (it never cancels `initialize`, LA3).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// What an opening request awaits: each has its own timeout, and a different end when it
/// fails (a discover that fails falls back to the legacy handshake; an `initialize` that fails
/// fails the requests behind it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Awaits {
    /// The auto mode's `server/discover`, sent in the modern shape.
    DiscoverResult,
    /// The legacy `initialize`.
    InitializeResult,
}

impl Awaits {
    /// How long the client waits for it.
    pub(super) fn timeout(self) -> Duration {
        match self {
            Awaits::DiscoverResult => DISCOVER_TIMEOUT,
            Awaits::InitializeResult => HANDSHAKE_TIMEOUT,
        }
    }
}

/// Where the opening of the current connection stands.
#[derive(Debug, Clone, Default)]
pub(super) enum Handshake {
    /// Nothing sent yet: the first request starts it.
    #[default]
    NotStarted,
    /// The opening request `id` is out since `sent` and awaits its answer (`awaits`); the
    /// requests behind it wait, in order.
    Awaiting {
        id: RequestId,
        awaits: Awaits,
        sent: Time,
        /// The HTTP stream it went out on.
        stream: Option<StreamId>,
        /// Its stream broke before the answer: a new handshake starts then.
        broke: Option<Time>,
        queued: VecDeque<(RequestId, ClientTransmit)>,
    },
    /// The result arrived (and every modern connection is here from the start).
    Done,
}
