//! The switches that make the reference peers faulty: the catalog of real SDK bugs.
//!
//! Each [`Mutant`] reproduces one documented bug (repository and issue in
//! [`MutantInfo::bug`]) as a small deviation of the reference client, server, intermediary
//! or the client's SSE framer; a [`MutantSet`] says which are on. They live with the model
//! because they are behaviours the peers can be told to have.
//!
//! # One table
//!
//! Everything known *about* a mutant is one entry of the `mutants!` table below: its name,
//! side, bug and summary, the rules expected to catch it, the peer faults it reacts to, whether
//! it needs HTTP headers or the shapes of long work, and the [`Conditions`] its hunt imposes on
//! a scenario. Each fact is a required field, in a fixed order, with no default: a mutant added
//! without one does not compile, where a `match` with a fallback arm elsewhere would have
//! given it a silent default. The hunt ([`crate::mutants`]) only reads the table, and applies
//! the named conditions to scenarios there, since the model knows no scenarios. What a mutant
//! *does* is not in the table: each peer asks `mutants.has(Mutant::X)` where the bug lives.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod conditions;
mod set;

pub use conditions::Conditions;
pub use set::MutantSet;

macro_rules! mutants {
    ($($variant:ident {
        name: $name:literal, side: $side:ident,
        bug: $bug:literal,
        summary: $summary:literal,
        expected_rules: [$($rule:literal),+], environment: [$($env:ident),*],
        needs_headers: $headers:literal, long_work: $long_work:literal, conditions: $conditions:expr,
    })*) => {
        /// A faulty behaviour.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum Mutant {
            $(#[doc = $summary] $variant,)*
        }

        /// Every mutant, in catalog order.
        pub const ALL: &[Mutant] = &[$(Mutant::$variant,)*];

        impl Mutant {
            /// The catalog entry: everything known about the mutant.
            pub fn info(self) -> MutantInfo {
                match self {
                    $(Mutant::$variant => MutantInfo {
                        name: $name,
                        side: MutantSide::$side,
                        bug: $bug,
                        summary: $summary,
                        expected_rules: &[$($rule),+],
                        environment: MutantSet::NONE $(.with(Mutant::$env))*,
                        needs_headers: $headers,
                        long_work: $long_work,
                        conditions: $conditions,
                    },)*
                }
            }
        }
    };
}

mutants! {
    RespondAfterCancel {
        name: "respond_after_cancel", side: Server,
        bug: "python-sdk #1419, rust-sdk PR #957, go-sdk #1259",
        summary: "the server stops the work on a cancel but still answers the cancelled request with an error",
        expected_rules: ["response-after-cancel"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    IgnoreCancel {
        name: "ignore_cancel", side: Server,
        bug: "mark3labs/mcp-go #755, java-sdk #130",
        summary: "the server ignores notifications/cancelled: the work runs on and the result is sent",
        expected_rules: ["response-after-cancel", "work-after-cancel"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    HandlerSurvivesDisconnect {
        name: "handler_survives_disconnect", side: Server,
        bug: "rust-sdk #857",
        summary: "a closed HTTP stream does not cancel the handler: the tool runs to completion",
        expected_rules: ["disconnect-is-cancel"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::Http,
    }
    CancelCompleteRacePanics {
        name: "cancel_complete_race_panics", side: Server,
        bug: "python-sdk #2416",
        summary: "a cancel for a request the server already answered crashes the server",
        expected_rules: ["crash"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    WriteAfterClosePanics {
        name: "write_after_close_panics", side: Server,
        bug: "python-sdk #1967",
        summary: "a client disconnect during a running tool call crashes the server",
        expected_rules: ["crash"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::Http,
    }
    CrashOnCancelNotification {
        name: "crash_on_cancel_notification", side: Server,
        bug: "python-sdk #88",
        summary: "any notifications/cancelled for a request the server does not know crashes it",
        expected_rules: ["crash"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    ProgressAfterCompletion {
        name: "progress_after_completion", side: Server,
        bug: "typescript-sdk #2580",
        summary: "the server writes a last progress notification after the result",
        expected_rules: ["progress-after-completion"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    FlatProgress {
        name: "flat_progress", side: Server,
        bug: "typescript-sdk #1001",
        summary: "the server repeats the same progress value instead of increasing it",
        expected_rules: ["progress-monotonic"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    ForgedProgressToken {
        name: "forged_progress_token", side: Server,
        bug: "twentyhq/twenty #24559",
        summary: "the server invents its own token `tool-call-<id>` and sends progress even when none was asked for",
        expected_rules: ["progress-unknown-token"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    ProgressMisrouted {
        name: "progress_misrouted", side: Server,
        bug: "python-sdk #2001",
        summary: "the server sends a request's progress on the most recently opened stream instead of its own",
        expected_rules: ["progress-stream"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::Http,
    }
    NoKeepalive {
        name: "no_keepalive", side: Server,
        bug: "typescript-sdk #1211 (PR #2538), csharp-sdk #736",
        summary: "the server sends neither SSE keep-alives nor progress, so idle-timeout proxies cut long calls",
        expected_rules: ["idle-stream-cut"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::IdleTimeoutProxy,
    }
    TimeoutWithoutCancel {
        name: "timeout_without_cancel", side: Client,
        bug: "python-sdk #1458, #2507",
        summary: "the client gives up on a timed-out request without cancelling it on the wire",
        expected_rules: ["cancel-on-timeout"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    LateResponseIsFatal {
        name: "late_response_is_fatal", side: Client,
        bug: "claude-code #51073",
        summary: "a response for a request the client already cancelled makes it drop the connection",
        expected_rules: ["race-not-graceful"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    StaleProgressIsError {
        name: "stale_progress_is_error", side: Client,
        bug: "typescript-sdk #2580",
        summary: "progress for a finished request is treated as a protocol error that drops the connection",
        expected_rules: ["race-not-graceful"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    AcceptNonIncreasingProgress {
        name: "accept_non_increasing_progress", side: Client,
        bug: "typescript-sdk #1001 (PR #1982)",
        summary: "the client resets its timer on progress that does not increase",
        expected_rules: ["timeout-deadline"], environment: [FlatProgress],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    MaxCapOnlyOnProgress {
        name: "max_cap_only_on_progress", side: Client,
        bug: "typescript-sdk #2695",
        summary: "the client checks its hard maximum only when progress arrives",
        expected_rules: ["timeout-maximum", "timeout-deadline"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    ResetNotExtending {
        name: "reset_not_extending", side: Client,
        bug: "typescript-sdk #2816",
        summary: "progress re-arms the timer but the elapsed time still counts from the send, so nothing is extended",
        expected_rules: ["timeout-deadline"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    CapSlidesWithProgress {
        name: "cap_slides_with_progress", side: Client,
        bug: "typescript-sdk #2816 (PR #2817)",
        summary: "the hard maximum is measured from the last progress, so it slides and never caps",
        expected_rules: ["timeout-maximum", "timeout-deadline"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    FixedTimeoutIgnoresProgress {
        name: "fixed_timeout_ignores_progress", side: Client,
        bug: "claude-code #470, #58687",
        summary: "the client advertises reset-on-progress but cuts the call at the fixed timeout",
        expected_rules: ["timeout-deadline"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    NoTimeout {
        name: "no_timeout", side: Client,
        bug: "claude-code #69487",
        summary: "the client enforces no timeout at all and waits for ever on a wedged call",
        expected_rules: ["timeout-deadline"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    ResetWithoutToken {
        name: "reset_without_token", side: Client,
        bug: "opencode #28186, kotlin-sdk #220",
        summary: "the client resets its timer on progress but never attaches a progressToken",
        expected_rules: ["reset-needs-token"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    TokenReuseCrosswire {
        name: "token_reuse_crosswire", side: Client,
        bug: "kaeawc/auto-mobile #6539",
        summary: "the client uses one progress token for every request, so progress crosses requests",
        expected_rules: ["progress-token-unique", "progress-token-reuse"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    RetryWithoutCancel {
        name: "retry_without_cancel", side: Client,
        bug: "simonx1/ruby-mcp-client PR #178",
        summary: "a timed-out call is retried under a new id without cancelling the first attempt",
        expected_rules: ["cancel-on-timeout"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::AsDrawn,
    }
    CancelBlockedByPendingPost {
        name: "cancel_blocked_by_pending_post", side: Client,
        bug: "rust-sdk #1193 (PR #1194)",
        summary: "an HTTP cancel waits until the POST's first SSE event arrives before it closes the stream",
        expected_rules: ["cancel-on-timeout"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::Http,
    }
    CancelPostedOverHttp {
        name: "cancel_posted_over_http", side: Client,
        bug: "spec-derived: docs/spec/mcp-2026-07-28.md §3.2, §9 C24 (as go-sdk v1.8.0's HTTP client does, seen on the wire)",
        summary: "in 2026-07-28 over HTTP the client closes a cancelled request's stream and POSTs notifications/cancelled for it too",
        expected_rules: ["cancel-over-http"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::Http,
    }
    DiscoverWithoutTimeout {
        name: "discover_without_timeout", side: Client,
        bug: "go-sdk #1177 (v1.8.0: the probe waits on the caller's context)",
        summary: "in auto mode the client waits on an unanswered server/discover for ever: no timer of its own falls back to initialize",
        expected_rules: ["discover-timeout"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacySilentProbe,
    }
    TaskWithoutNegotiation {
        name: "task_without_negotiation", side: Server,
        bug: "python-sdk PR #3005 (the per-request guard), go-sdk #755",
        summary: "the server answers tool calls with a CreateTaskResult whether or not the request declared the Tasks extension",
        expected_rules: ["task-not-negotiated"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::AsDrawn,
    }
    TaskProgressAfterCreate {
        name: "task_progress_after_create", side: Server,
        bug: "typescript-sdk PR #2055, leehack/mcp_dart #127",
        summary: "the server keeps the call's progress token alive for the task's life (the 2025-11-25 reading): progress follows the CreateTaskResult",
        expected_rules: ["progress-after-completion"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::TaskProgress,
    }
    TaskTerminalChanges {
        name: "task_terminal_changes", side: Server,
        bug: "leehack/mcp_dart #128, python-sdk PR #3003",
        summary: "tasks/cancel marks the task cancelled but the work runs on and overwrites the state with completed",
        expected_rules: ["task-work-after-cancelled"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::CancelledTasks,
    }
    CancelAckIsTask {
        name: "cancel_ack_is_task", side: Server,
        bug: "leehack/mcp_dart #123",
        summary: "tasks/cancel is answered with the task's fields (the 2025-11-25 CancelTaskResult) instead of an empty acknowledgement",
        expected_rules: ["task-ack"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::CancelledTasks,
    }
    UnknownTaskWorking {
        name: "unknown_task_working", side: Server,
        bug: "oaslananka/kicad-mcp-pro #75",
        summary: "a tasks/get for an unknown or expired task is answered as working instead of with -32602, so the client polls on",
        expected_rules: ["task-unknown"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::StaleTask,
    }
    TaskCancelledOnDisconnect {
        name: "task_cancelled_on_disconnect", side: Server,
        bug: "PrefectHQ/fastmcp #3758, modelcontextprotocol/servers #3193",
        summary: "the server ties tasks to a connection: any closed stream or lost pipe cancels every working task",
        expected_rules: ["task-cancelled-unasked"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::TasksBesideCancelledCalls,
    }
    InputRequiredWithoutState {
        name: "input_required_without_state", side: Server,
        bug: "conformance #439, #440",
        summary: "the server answers input_required with neither inputRequests nor requestState",
        expected_rules: ["input-required-shape"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::InputRound,
    }
    ProgressAfterInputRequired {
        name: "progress_after_input_required", side: Server,
        bug: "typescript-sdk #2580 (progress after the final result), here after input_required (SEP-2322)",
        summary: "the handler keeps reporting progress on the call's token after it answered input_required",
        expected_rules: ["progress-after-completion"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::InputRound,
    }
    ListenUntagged {
        name: "listen_untagged", side: Server,
        bug: "conformance #351",
        summary: "notifications on a subscription lack the subscriptionId tag",
        expected_rules: ["listen-tagged"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::ToolsSubscription,
    }
    ListenUnfiltered {
        name: "listen_unfiltered", side: Server,
        bug: "typescript-sdk PR #1948 (#1819), java-sdk #839",
        summary: "the server sends list-changed notifications on a subscription that did not ask for them",
        expected_rules: ["listen-filter"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::PromptsSubscription,
    }
    ListenIgnoresCancel {
        name: "listen_ignores_cancel", side: Server,
        bug: "mark3labs/mcp-go #755 (a cancel ignored), here for a subscription",
        summary: "a stdio notifications/cancelled for a subscription is ignored: its notifications go on",
        expected_rules: ["response-after-cancel"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::StdioToolsSubscription,
    }
    AnswersNotifications {
        name: "answers_notifications", side: Server,
        bug: "pzalutski-pixel/sharplens-mcp #6, zeenix/rust-analyzer-mcp #21",
        summary: "a cancel the server cannot match to a running request is answered with -32601 and no id",
        expected_rules: ["notification-answered"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::Stdio,
    }
    CapabilitiesRemembered {
        name: "capabilities_remembered", side: Server,
        bug: "csharp-sdk #1670 (PR #1685)",
        summary: "the server keeps a request's capabilities in connection state: once one request declared the Tasks extension, later requests of the connection count as declaring it",
        expected_rules: ["task-not-negotiated"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::AlternateTasks,
    }
    ServesMismatchedHeaders {
        name: "serves_mismatched_headers", side: Server,
        bug: "typescript-sdk #2108, csharp-sdk #1654, rust-sdk #852 (PR #853)",
        summary: "the server never compares a POST's Mcp-Method and Mcp-Name headers with its body and serves whatever the body says",
        expected_rules: ["http-status"], environment: [],
        needs_headers: true, long_work: false, conditions: Conditions::HeaderStrippingProxy,
    }
    HeaderMismatchInvalidRequest {
        name: "header_mismatch_invalid_request", side: Server,
        bug: "rust-sdk PR #1083",
        summary: "a POST whose headers are missing or disagree with its body is refused with -32600 instead of -32020",
        expected_rules: ["http-status"], environment: [],
        needs_headers: true, long_work: false, conditions: Conditions::HeaderStrippingProxy,
    }
    CancelTaskWithNotification {
        name: "cancel_task_with_notification", side: Client,
        bug: "leehack/mcp_dart #127 (PR #132)",
        summary: "the client cancels a task with notifications/cancelled naming the call that created it, instead of tasks/cancel",
        expected_rules: ["cancel-targets-task"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::CancelledTasks,
    }
    TaskPollTooFast {
        name: "task_poll_too_fast", side: Client,
        bug: "strands-agents/sdk-typescript #858, PrefectHQ/fastmcp #2666",
        summary: "the client polls tasks/get every 200 ms whatever pollIntervalMs the server asked for",
        expected_rules: ["task-poll-interval"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::TaskProgress,
    }
    RequestStateDropped {
        name: "request_state_dropped", side: Client,
        bug: "rust-sdk #1098",
        summary: "the client's retry after input_required leaves out the requestState it was given",
        expected_rules: ["input-required-retry"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::InputRound,
    }
    RetryReusesToken {
        name: "retry_reuses_token", side: Client,
        bug: "kaeawc/auto-mobile #6539 (one token reused), here across an input_required retry",
        summary: "the client's input_required retry carries the original request's progress token again",
        expected_rules: ["progress-token-reuse"], environment: [],
        needs_headers: false, long_work: true, conditions: Conditions::InputRound,
    }
    SseCrlfChunkSplit {
        name: "sse_crlf_chunk_split", side: Framer,
        bug: "rexxars/eventsource-parser #17, vercel/ai PR #6200",
        summary: "the client's SSE parser takes an LF that follows a CR in the next chunk as an empty line and splits the event",
        expected_rules: ["wire-integrity"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::CrlfSplitSse,
    }
    LegacyCancelAnswered {
        name: "legacy_cancel_answered", side: Server,
        bug: "python-sdk #2480 (1.x, legacy era)",
        summary: "a legacy server answers each cancelled request with the error {code: 0, message: \"Request cancelled\"}",
        expected_rules: ["response-after-cancel", "duplicate-response"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::Legacy,
    }
    CancelsInitialize {
        name: "cancels_initialize", side: Client,
        bug: "typescript-sdk 1.x (a connect timeout on initialize); spec-derived: docs/spec/mcp-2025-11-25.md LA3",
        summary: "a legacy client whose handshake timed out sends notifications/cancelled for initialize",
        expected_rules: ["initialize-cancelled"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacyHandshakeTimeout,
    }
    LegacyDisconnectCancels {
        name: "legacy_disconnect_cancels", side: Server,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LC11 (the 2026-07-28 reading applied to a legacy session)",
        summary: "a legacy server takes a broken response stream for a cancel and drops the request's work",
        expected_rules: ["disconnect-taken-as-cancel"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacyStreams,
    }
    ReplayOtherStream {
        name: "replay_other_stream", side: Server,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LE16",
        summary: "a legacy server's resume replays the session's newest stream instead of the one Last-Event-ID names",
        expected_rules: ["replay-other-stream"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacyStreams,
    }
    EventIdsPerStream {
        name: "event_ids_per_stream", side: Server,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LE15 (ids counted per stream)",
        summary: "a legacy server numbers SSE event ids per stream, so the same id appears on several streams of the session",
        expected_rules: ["event-id-unique"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacyStreams,
    }
    ProgressOnGetStream {
        name: "progress_on_get_stream", side: Server,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LB8 (a GET stream carries nothing of a running request)",
        summary: "a legacy server accepts the client's listening GET stream and writes every request's progress on it",
        expected_rules: ["progress-on-get-stream"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacyStreams,
    }
    DropsResumable {
        name: "drops_resumable", side: Client,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LE17 with LC11 (the server keeps the work and its events)",
        summary: "a legacy client gives up a request whose stream broke although the server sent event ids, instead of resuming it",
        expected_rules: ["resume-broken-stream"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacyStreams,
    }
    ResumesBeforeRetry {
        name: "resumes_before_retry", side: Client,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LE18",
        summary: "a legacy client reconnects at once after a broken stream, ignoring the retry the server asked for",
        expected_rules: ["retry-honoured"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacyStreams,
    }
    NoSessionId {
        name: "no_session_id", side: Client,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LA5",
        summary: "a legacy client leaves Mcp-Session-Id off its requests after the initialize response issued one",
        expected_rules: ["session-id-sent"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacyStreams,
    }
    LegacyIgnoresCancel {
        name: "legacy_ignores_cancel", side: Server,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LC10, as server-everything 2026.8.31 does (trigger-long-running-operation)",
        summary: "a legacy server reads notifications/cancelled and goes on: the work and its progress continue to the end (only the result is dropped, by the SDK under it)",
        expected_rules: ["response-after-cancel", "work-after-cancel"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacyCancelledProgress,
    }
    PingUnanswered {
        name: "ping_unanswered", side: Server,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LA4",
        summary: "a legacy server reads a client's ping and never answers it",
        expected_rules: ["ping-answered"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::LegacyQuietCalls,
    }
    LegacyTimeoutSilent {
        name: "legacy_timeout_silent", side: Client,
        bug: "python-sdk #2507, #1410 (1.x)",
        summary: "a legacy client gives up a timed-out request without sending notifications/cancelled",
        expected_rules: ["cancel-on-timeout"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::Legacy,
    }
    BridgeAnswersCancel {
        name: "bridge_answers_cancel", side: Intermediary,
        bug: "python-sdk #2480 (1.x), as PyPI mcp-proxy 0.13.0 answers for its upstream",
        summary: "the intermediary answers a client's cancel itself with {code: 0, message: \"Request cancelled\"} and never passes it upstream",
        expected_rules: ["cancel-answered-locally"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::BridgeCancels,
    }
    BridgeDropsCancel {
        name: "bridge_drops_cancel", side: Intermediary,
        bug: "PrefectHQ/fastmcp #4124",
        summary: "the intermediary does not pass a client's cancel upstream: the upstream's work runs on and its result reaches the client",
        expected_rules: ["cancel-forwarded"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::BridgeCancels,
    }
    BridgeDropsProgress {
        name: "bridge_drops_progress", side: Intermediary,
        bug: "typescript-sdk #866 (JSON response mode), as PyPI mcp-proxy 0.13.0's HTTP front does",
        summary: "the intermediary drops the upstream's progress notifications (a JSON-mode front)",
        expected_rules: ["progress-forwarded"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::BridgeProgress,
    }
    BridgeCancelUnmapped {
        name: "bridge_cancel_unmapped", side: Intermediary,
        bug: "lynnswap/XcodeMCPKit #210",
        summary: "the intermediary passes a client's cancel upstream with the client's request id, not the upstream's",
        expected_rules: ["cancel-forwarded"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::BridgeCancels,
    }
    BridgeForwardsLateResult {
        name: "bridge_forwards_late_result", side: Intermediary,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LC12 (the intermediary sent the cancel upstream)",
        summary: "the intermediary passes on a result the upstream sent after the client's cancel had reached it",
        expected_rules: ["late-result-forwarded"], environment: [IgnoreCancel],
        needs_headers: false, long_work: false, conditions: Conditions::BridgeCancels,
    }
    BridgeRawProgressToken {
        name: "bridge_raw_progress_token", side: Intermediary,
        bug: "spec-derived: docs/spec/mcp-2026-07-28.md §2.3 item 1",
        summary: "the intermediary passes the upstream's progress on with the upstream's token, not the client's",
        expected_rules: ["progress-forwarded"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::BridgeProgress,
    }
    BridgeCancelsEarly {
        name: "bridge_cancels_early", side: Intermediary,
        bug: "spec-derived: docs/spec/mcp-2026-07-28.md §3.3 item 1 and §4 (an intermediary's own shorter timeout, never told to the client); supergateway 4.0.0 cancels another call upstream before the client cancels it",
        summary: "the intermediary cancels an upstream call on its own at the call's first progress, as if its own shorter timeout had fired, and never tells the client, who waits on",
        expected_rules: ["request-id-mapping"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::BridgeUncancelledProgress,
    }
    BridgeIgnoresStreamClose {
        name: "bridge_ignores_stream_close", side: Intermediary,
        bug: "spec-derived: docs/spec/mcp-2025-11-25.md LC11 with docs/spec/mcp-2026-07-28.md §3.2 (an era bridge; npm mcp-proxy 6.7.19 translates)",
        summary: "an era bridge (2026-07-28 HTTP front, legacy stdio upstream) takes the client's closed request stream for nothing: the legacy upstream, for which a disconnect is not a cancel, is never sent notifications/cancelled",
        expected_rules: ["cancel-forwarded"], environment: [],
        needs_headers: false, long_work: false, conditions: Conditions::EraBridgeCancels,
    }
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

/// A catalog entry: one row of the `mutants!` table, every field required there.
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
    /// The rules its bug breaks by definition, one at least ([`Mutant::expected_rules`]).
    pub expected_rules: &'static [&'static str],
    /// Faults of the peer it reacts to, applied to the reference's run too.
    pub environment: MutantSet,
    /// Whether it shows only where POSTs carry HTTP headers (the turmoil lane).
    pub needs_headers: bool,
    /// Whether its bug lives in the shapes of long work (tasks, input rounds, subscriptions).
    pub long_work: bool,
    /// What its hunt imposes on each seed's scenario.
    pub conditions: Conditions,
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
