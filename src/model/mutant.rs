//! The switches that make the reference peers faulty: the catalog of real SDK bugs.
//!
//! Each [`Mutant`] reproduces one documented bug (repository and issue in
//! [`MutantInfo::bug`]) as a small deviation of the reference client, server, intermediary
//! or the client's SSE framer; a [`MutantSet`] set says which are on. They live with the model because they are
//! behaviours the peers can be told to have. The conditions each mutant needs to show, and the
//! hunt that scores the oracle against them, are in [`crate::mutants`].

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! mutants {
    ($($variant:ident = $name:literal, $side:ident, $bug:literal, $summary:literal;)*) => {
        /// A faulty behaviour.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum Mutant {
            $(#[doc = $summary] $variant,)*
        }

        /// Every mutant, in catalog order.
        pub const ALL: &[Mutant] = &[$(Mutant::$variant,)*];

        impl Mutant {
            /// The catalog entry.
            pub fn info(self) -> MutantInfo {
                match self {
                    $(Mutant::$variant => MutantInfo { name: $name, side: MutantSide::$side, bug: $bug, summary: $summary },)*
                }
            }
        }
    };
}

mutants! {
    RespondAfterCancel = "respond_after_cancel", Server, "python-sdk #1419, rust-sdk PR #957, go-sdk #1259",
        "the server stops the work on a cancel but still answers the cancelled request with an error";
    IgnoreCancel = "ignore_cancel", Server, "mark3labs/mcp-go #755, java-sdk #130",
        "the server ignores notifications/cancelled: the work runs on and the result is sent";
    HandlerSurvivesDisconnect = "handler_survives_disconnect", Server, "rust-sdk #857",
        "a closed HTTP stream does not cancel the handler: the tool runs to completion";
    CancelCompleteRacePanics = "cancel_complete_race_panics", Server, "python-sdk #2416",
        "a cancel for a request the server already answered crashes the server";
    WriteAfterClosePanics = "write_after_close_panics", Server, "python-sdk #1967",
        "a client disconnect during a running tool call crashes the server";
    CrashOnCancelNotification = "crash_on_cancel_notification", Server, "python-sdk #88",
        "any notifications/cancelled for a request the server does not know crashes it";
    ProgressAfterCompletion = "progress_after_completion", Server, "typescript-sdk #2580",
        "the server writes a last progress notification after the result";
    FlatProgress = "flat_progress", Server, "typescript-sdk #1001",
        "the server repeats the same progress value instead of increasing it";
    ForgedProgressToken = "forged_progress_token", Server, "twentyhq/twenty #24559",
        "the server invents its own token `tool-call-<id>` and sends progress even when none was asked for";
    ProgressMisrouted = "progress_misrouted", Server, "python-sdk #2001",
        "the server sends a request's progress on the most recently opened stream instead of its own";
    NoKeepalive = "no_keepalive", Server, "typescript-sdk #1211 (PR #2538), csharp-sdk #736",
        "the server sends neither SSE keep-alives nor progress, so idle-timeout proxies cut long calls";
    TimeoutWithoutCancel = "timeout_without_cancel", Client, "python-sdk #1458, #2507",
        "the client gives up on a timed-out request without cancelling it on the wire";
    LateResponseIsFatal = "late_response_is_fatal", Client, "claude-code #51073",
        "a response for a request the client already cancelled makes it drop the connection";
    StaleProgressIsError = "stale_progress_is_error", Client, "typescript-sdk #2580",
        "progress for a finished request is treated as a protocol error that drops the connection";
    AcceptNonIncreasingProgress = "accept_non_increasing_progress", Client, "typescript-sdk #1001 (PR #1982)",
        "the client resets its timer on progress that does not increase";
    MaxCapOnlyOnProgress = "max_cap_only_on_progress", Client, "typescript-sdk #2695",
        "the client checks its hard maximum only when progress arrives";
    ResetNotExtending = "reset_not_extending", Client, "typescript-sdk #2816",
        "progress re-arms the timer but the elapsed time still counts from the send, so nothing is extended";
    CapSlidesWithProgress = "cap_slides_with_progress", Client, "typescript-sdk #2816 (PR #2817)",
        "the hard maximum is measured from the last progress, so it slides and never caps";
    FixedTimeoutIgnoresProgress = "fixed_timeout_ignores_progress", Client, "claude-code #470, #58687",
        "the client advertises reset-on-progress but cuts the call at the fixed timeout";
    NoTimeout = "no_timeout", Client, "claude-code #69487",
        "the client enforces no timeout at all and waits for ever on a wedged call";
    ResetWithoutToken = "reset_without_token", Client, "opencode #28186, kotlin-sdk #220",
        "the client resets its timer on progress but never attaches a progressToken";
    TokenReuseCrosswire = "token_reuse_crosswire", Client, "kaeawc/auto-mobile #6539",
        "the client uses one progress token for every request, so progress crosses requests";
    RetryWithoutCancel = "retry_without_cancel", Client, "simonx1/ruby-mcp-client PR #178",
        "a timed-out call is retried under a new id without cancelling the first attempt";
    CancelBlockedByPendingPost = "cancel_blocked_by_pending_post", Client, "rust-sdk #1193 (PR #1194)",
        "an HTTP cancel waits until the POST's first SSE event arrives before it closes the stream";
    CancelPostedOverHttp = "cancel_posted_over_http", Client, "spec-derived: docs/spec/mcp-2026-07-28.md §3.2, §9 C24 (as go-sdk v1.8.0's HTTP client does, seen on the wire)",
        "in 2026-07-28 over HTTP the client closes a cancelled request's stream and POSTs notifications/cancelled for it too";
    DiscoverWithoutTimeout = "discover_without_timeout", Client, "go-sdk #1177 (v1.8.0: the probe waits on the caller's context)",
        "in auto mode the client waits on an unanswered server/discover for ever: no timer of its own falls back to initialize";
    TaskWithoutNegotiation = "task_without_negotiation", Server, "python-sdk PR #3005 (the per-request guard), go-sdk #755",
        "the server answers tool calls with a CreateTaskResult whether or not the request declared the Tasks extension";
    TaskProgressAfterCreate = "task_progress_after_create", Server, "typescript-sdk PR #2055, leehack/mcp_dart #127",
        "the server keeps the call's progress token alive for the task's life (the 2025-11-25 reading): progress follows the CreateTaskResult";
    TaskTerminalChanges = "task_terminal_changes", Server, "leehack/mcp_dart #128, python-sdk PR #3003",
        "tasks/cancel marks the task cancelled but the work runs on and overwrites the state with completed";
    CancelAckIsTask = "cancel_ack_is_task", Server, "leehack/mcp_dart #123",
        "tasks/cancel is answered with the task's fields (the 2025-11-25 CancelTaskResult) instead of an empty acknowledgement";
    UnknownTaskWorking = "unknown_task_working", Server, "oaslananka/kicad-mcp-pro #75",
        "a tasks/get for an unknown or expired task is answered as working instead of with -32602, so the client polls on";
    TaskCancelledOnDisconnect = "task_cancelled_on_disconnect", Server, "PrefectHQ/fastmcp #3758, modelcontextprotocol/servers #3193",
        "the server ties tasks to a connection: any closed stream or lost pipe cancels every working task";
    InputRequiredWithoutState = "input_required_without_state", Server, "conformance #439, #440",
        "the server answers input_required with neither inputRequests nor requestState";
    ProgressAfterInputRequired = "progress_after_input_required", Server, "typescript-sdk #2580 (progress after the final result), here after input_required (SEP-2322)",
        "the handler keeps reporting progress on the call's token after it answered input_required";
    ListenUntagged = "listen_untagged", Server, "conformance #351",
        "notifications on a subscription lack the subscriptionId tag";
    ListenUnfiltered = "listen_unfiltered", Server, "typescript-sdk PR #1948 (#1819), java-sdk #839",
        "the server sends list-changed notifications on a subscription that did not ask for them";
    ListenIgnoresCancel = "listen_ignores_cancel", Server, "mark3labs/mcp-go #755 (a cancel ignored), here for a subscription",
        "a stdio notifications/cancelled for a subscription is ignored: its notifications go on";
    AnswersNotifications = "answers_notifications", Server, "pzalutski-pixel/sharplens-mcp #6, zeenix/rust-analyzer-mcp #21",
        "a cancel the server cannot match to a running request is answered with -32601 and no id";
    CapabilitiesRemembered = "capabilities_remembered", Server, "csharp-sdk #1670 (PR #1685)",
        "the server keeps a request's capabilities in connection state: once one request declared the Tasks extension, later requests of the connection count as declaring it";
    ServesMismatchedHeaders = "serves_mismatched_headers", Server, "typescript-sdk #2108, csharp-sdk #1654, rust-sdk #852 (PR #853)",
        "the server never compares a POST's Mcp-Method and Mcp-Name headers with its body and serves whatever the body says";
    HeaderMismatchInvalidRequest = "header_mismatch_invalid_request", Server, "rust-sdk PR #1083",
        "a POST whose headers are missing or disagree with its body is refused with -32600 instead of -32020";
    CancelTaskWithNotification = "cancel_task_with_notification", Client, "leehack/mcp_dart #127 (PR #132)",
        "the client cancels a task with notifications/cancelled naming the call that created it, instead of tasks/cancel";
    TaskPollTooFast = "task_poll_too_fast", Client, "strands-agents/sdk-typescript #858, PrefectHQ/fastmcp #2666",
        "the client polls tasks/get every 200 ms whatever pollIntervalMs the server asked for";
    RequestStateDropped = "request_state_dropped", Client, "rust-sdk #1098",
        "the client's retry after input_required leaves out the requestState it was given";
    RetryReusesToken = "retry_reuses_token", Client, "kaeawc/auto-mobile #6539 (one token reused), here across an input_required retry",
        "the client's input_required retry carries the original request's progress token again";
    SseCrlfChunkSplit = "sse_crlf_chunk_split", Framer, "rexxars/eventsource-parser #17, vercel/ai PR #6200",
        "the client's SSE parser takes an LF that follows a CR in the next chunk as an empty line and splits the event";
    LegacyCancelAnswered = "legacy_cancel_answered", Server, "python-sdk #2480 (1.x, legacy era)",
        "a legacy server answers each cancelled request with the error {code: 0, message: \"Request cancelled\"}";
    CancelsInitialize = "cancels_initialize", Client, "typescript-sdk 1.x (a connect timeout on initialize); spec-derived: docs/spec/mcp-2025-11-25.md LA3",
        "a legacy client whose handshake timed out sends notifications/cancelled for initialize";
    LegacyDisconnectCancels = "legacy_disconnect_cancels", Server, "spec-derived: docs/spec/mcp-2025-11-25.md LC11 (the 2026-07-28 reading applied to a legacy session)",
        "a legacy server takes a broken response stream for a cancel and drops the request's work";
    ReplayOtherStream = "replay_other_stream", Server, "spec-derived: docs/spec/mcp-2025-11-25.md LE16",
        "a legacy server's resume replays the session's newest stream instead of the one Last-Event-ID names";
    EventIdsPerStream = "event_ids_per_stream", Server, "spec-derived: docs/spec/mcp-2025-11-25.md LE15 (ids counted per stream)",
        "a legacy server numbers SSE event ids per stream, so the same id appears on several streams of the session";
    ProgressOnGetStream = "progress_on_get_stream", Server, "spec-derived: docs/spec/mcp-2025-11-25.md LB8 (a GET stream carries nothing of a running request)",
        "a legacy server accepts the client's listening GET stream and writes every request's progress on it";
    DropsResumable = "drops_resumable", Client, "spec-derived: docs/spec/mcp-2025-11-25.md LE17 with LC11 (the server keeps the work and its events)",
        "a legacy client gives up a request whose stream broke although the server sent event ids, instead of resuming it";
    ResumesBeforeRetry = "resumes_before_retry", Client, "spec-derived: docs/spec/mcp-2025-11-25.md LE18",
        "a legacy client reconnects at once after a broken stream, ignoring the retry the server asked for";
    NoSessionId = "no_session_id", Client, "spec-derived: docs/spec/mcp-2025-11-25.md LA5",
        "a legacy client leaves Mcp-Session-Id off its requests after the initialize response issued one";
    LegacyIgnoresCancel = "legacy_ignores_cancel", Server, "spec-derived: docs/spec/mcp-2025-11-25.md LC10, as server-everything 2026.8.31 does (trigger-long-running-operation)",
        "a legacy server reads notifications/cancelled and goes on: the work and its progress continue to the end (only the result is dropped, by the SDK under it)";
    PingUnanswered = "ping_unanswered", Server, "spec-derived: docs/spec/mcp-2025-11-25.md LA4",
        "a legacy server reads a client's ping and never answers it";
    LegacyTimeoutSilent = "legacy_timeout_silent", Client, "python-sdk #2507, #1410 (1.x)",
        "a legacy client gives up a timed-out request without sending notifications/cancelled";
    BridgeAnswersCancel = "bridge_answers_cancel", Intermediary, "python-sdk #2480 (1.x), as PyPI mcp-proxy 0.13.0 answers for its upstream",
        "the intermediary answers a client's cancel itself with {code: 0, message: \"Request cancelled\"} and never passes it upstream";
    BridgeDropsCancel = "bridge_drops_cancel", Intermediary, "PrefectHQ/fastmcp #4124",
        "the intermediary does not pass a client's cancel upstream: the upstream's work runs on and its result reaches the client";
    BridgeDropsProgress = "bridge_drops_progress", Intermediary, "typescript-sdk #866 (JSON response mode), as PyPI mcp-proxy 0.13.0's HTTP front does",
        "the intermediary drops the upstream's progress notifications (a JSON-mode front)";
    BridgeCancelUnmapped = "bridge_cancel_unmapped", Intermediary, "lynnswap/XcodeMCPKit #210",
        "the intermediary passes a client's cancel upstream with the client's request id, not the upstream's";
    BridgeForwardsLateResult = "bridge_forwards_late_result", Intermediary, "spec-derived: docs/spec/mcp-2025-11-25.md LC12 (the intermediary sent the cancel upstream)",
        "the intermediary passes on a result the upstream sent after the client's cancel had reached it";
    BridgeRawProgressToken = "bridge_raw_progress_token", Intermediary, "spec-derived: docs/spec/mcp-2026-07-28.md §2.3 item 1",
        "the intermediary passes the upstream's progress on with the upstream's token, not the client's";
    BridgeCancelsEarly = "bridge_cancels_early", Intermediary, "spec-derived: docs/spec/mcp-2026-07-28.md §3.3 item 1 and §4 (an intermediary's own shorter timeout, never told to the client); supergateway 4.0.0 cancels another call upstream before the client cancels it",
        "the intermediary cancels an upstream call on its own at the call's first progress, as if its own shorter timeout had fired, and never tells the client, who waits on";
    BridgeIgnoresStreamClose = "bridge_ignores_stream_close", Intermediary, "spec-derived: docs/spec/mcp-2025-11-25.md LC11 with docs/spec/mcp-2026-07-28.md §3.2 (an era bridge; npm mcp-proxy 6.7.19 translates)",
        "an era bridge (2026-07-28 HTTP front, legacy stdio upstream) takes the client's closed request stream for nothing: the legacy upstream, for which a disconnect is not a cancel, is never sent notifications/cancelled";
}

/// Which component a mutant changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutantSide {
    /// The MCP server.
    Server,
    /// The MCP client.
    Client,
    /// The client's SSE framer.
    Framer,
    /// The reference intermediary between client and server ([`crate::model::Bridge`]).
    Intermediary,
}

impl MutantSide {
    /// `server`, `client`, `framer` or `intermediary`.
    pub fn as_str(self) -> &'static str {
        match self {
            MutantSide::Server => "server",
            MutantSide::Client => "client",
            MutantSide::Framer => "framer",
            MutantSide::Intermediary => "intermediary",
        }
    }
}

/// A catalog entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MutantInfo {
    /// The mutant's name.
    pub name: &'static str,
    /// What it changes.
    pub side: MutantSide,
    /// The real bug it reproduces: repository and issue or pull request.
    pub bug: &'static str,
    /// The faulty behaviour.
    pub summary: &'static str,
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.info().name)
    }
}

impl Mutant {
    /// Looks a mutant up by name.
    pub fn from_name(name: &str) -> Option<Mutant> {
        ALL.iter().copied().find(|m| m.info().name == name)
    }
}

/// A mutant is its name in files (`"ignore_cancel"`).
impl Serialize for Mutant {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.info().name)
    }
}

impl<'de> Deserialize<'de> for Mutant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Mutant, D::Error> {
        let name = String::deserialize(d)?;
        Mutant::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!("{name:?} is no mutant (mcp-sim mutants --list)"))
        })
    }
}

/// A set of mutants (the reference has none), one bit per mutant: room for 128.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MutantSet(u128);

const _: () = assert!(ALL.len() <= 128, "MutantSet has one bit per mutant");

impl MutantSet {
    /// No mutant: the reference behaviour.
    pub const NONE: MutantSet = MutantSet(0);

    /// This set plus `m`.
    pub const fn with(self, m: Mutant) -> MutantSet {
        MutantSet(self.0 | 1 << m as u8)
    }

    /// Whether `m` is in the set.
    pub fn has(self, m: Mutant) -> bool {
        self.0 & (1 << m as u8) != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The union of two sets.
    pub fn union(self, other: MutantSet) -> MutantSet {
        MutantSet(self.0 | other.0)
    }

    /// The mutants in the set, in catalog order.
    pub fn iter(self) -> impl Iterator<Item = Mutant> {
        ALL.iter().copied().filter(move |m| self.has(*m))
    }
}

/// A set is the list of its mutants' names in files, in catalog order (`[]` for none).
impl Serialize for MutantSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for MutantSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MutantSet, D::Error> {
        let list = Vec::<Mutant>::deserialize(d)?;
        Ok(list.into_iter().fold(MutantSet::NONE, MutantSet::with))
    }
}

impl fmt::Display for MutantSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(|m| m.info().name).collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join("+"))
        }
    }
}
