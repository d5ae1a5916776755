//! The conditions a mutant needs to show, by name.

/// What a mutant's hunt imposes on each seed's scenario so that the bug can show: a transport,
/// an era, an intermediary or proxy, the shape of the calls. Named here, in each mutant's
/// catalog entry; what each does to a scenario is [`Conditions::apply`], in [`crate::mutants`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conditions {
    /// The seed's scenario as drawn.
    AsDrawn,
    /// Over HTTP.
    Http,
    /// Over HTTP, the server writing pretty SSE events whose CRLF line ends are split across
    /// chunks.
    CrlfSplitSse,
    /// Over HTTP behind an idle-timeout proxy (an ALB), the calls long and slow to report.
    IdleTimeoutProxy,
    /// Over HTTP behind a gateway that strips the `Mcp-*` headers from a POST.
    HeaderStrippingProxy,
    /// Over stdio.
    Stdio,
    /// In the legacy era (2025-11-25), whose own bugs live in its peers (stdio).
    Legacy,
    /// In the legacy era, a handshake that times out: from the first call on, the network holds
    /// everything for 40 s.
    LegacyHandshakeTimeout,
    /// In the legacy era, a client in auto mode before a server that never answers its probe.
    LegacySilentProbe,
    /// In the legacy era, calls the application cancels while they report progress.
    LegacyCancelledProgress,
    /// In the legacy era, calls with sparse progress: quiet stretches long enough for the
    /// client's ping.
    LegacyQuietCalls,
    /// The legacy era's resumable HTTP streams: event streams with progress, the calls long
    /// enough to overlap, and the first call's stream reset after a few steps.
    LegacyStreams,
    /// Through the reference intermediary, calls the application cancels while they report
    /// progress.
    BridgeCancels,
    /// Through the era bridge, calls the application cancels (a closed stream on its 2026-07-28
    /// front) while the legacy upstream still works.
    EraBridgeCancels,
    /// Through the reference intermediary, calls that report progress and that the application
    /// never cancels: an upstream cancel can only be the intermediary's own.
    BridgeUncancelledProgress,
    /// Through the reference intermediary, calls that report progress.
    BridgeProgress,
    /// Every other call a task (declaring the Tasks extension), the others plain tool calls.
    AlternateTasks,
    /// Every call a task that reports progress.
    TaskProgress,
    /// Every call a long task the application cancels.
    CancelledTasks,
    /// Over HTTP, every second call a long task and the others plain tool calls the
    /// application cancels after 500 ms.
    TasksBesideCancelledCalls,
    /// The first call a `tasks/get` for a task the server never created, under a poll policy.
    StaleTask,
    /// Every call answered with one `input_required` round, reporting progress.
    InputRound,
    /// The first call a subscription to `toolsListChanged`, cancelled after 50 s.
    ToolsSubscription,
    /// The first call a subscription to `promptsListChanged` (which the reference server never
    /// sends), cancelled after 50 s.
    PromptsSubscription,
    /// Over stdio, the first call a subscription to `toolsListChanged`, cancelled after 50 s.
    StdioToolsSubscription,
}
