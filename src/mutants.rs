//! The mutant catalog: real SDK bugs as switchable faults of the reference peers.
//!
//! Each [`Mutant`] reproduces one documented bug (landscape.md part B; repository and issue in
//! [`MutantInfo::bug`]) as a small deviation of the reference client, server or SSE framer.
//! A mutant is *killed* when the oracle flags a run of it that the reference passes: the
//! mutation score is the share of mutants killed, and a survivor means the oracle lacks a
//! rule. [`Mutant::adapt`] gives each mutant the conditions it needs to show (a transport, a
//! proxy, an SSE style), and [`Mutant::environment`] the peer faults it reacts to, which the
//! reference is judged under too, so that only the mutant's own behaviour can make the
//! difference.

use std::fmt;
use std::time::Duration;

use crate::model::Transport;
use crate::scenario::{ProxyConfig, Scenario};

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
        "the server invents its own token tool-call-<id> and sends progress even when none was asked for";
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
    SseCrlfChunkSplit = "sse_crlf_chunk_split", Framer, "rexxars/eventsource-parser #17, vercel/ai PR #6200",
        "the client's SSE parser takes an LF that follows a CR in the next chunk as an empty line and splits the event";
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
}

impl MutantSide {
    /// `server`, `client` or `framer`.
    pub fn as_str(self) -> &'static str {
        match self {
            MutantSide::Server => "server",
            MutantSide::Client => "client",
            MutantSide::Framer => "framer",
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

    /// Faults of the peer that this mutant reacts to. They are applied to the reference run
    /// of the same seed as well.
    pub fn environment(self) -> Mutants {
        match self {
            Mutant::AcceptNonIncreasingProgress => Mutants::NONE.with(Mutant::FlatProgress),
            _ => Mutants::NONE,
        }
    }

    /// The conditions the mutant needs to show, applied to a seed's scenario.
    pub fn adapt(self, scenario: Scenario) -> Scenario {
        let s = match self {
            Mutant::HandlerSurvivesDisconnect
            | Mutant::WriteAfterClosePanics
            | Mutant::ProgressMisrouted
            | Mutant::CancelBlockedByPendingPost
            | Mutant::SseCrlfChunkSplit => scenario.with_transport(Transport::Http),
            Mutant::NoKeepalive => {
                let mut s = scenario.with_transport(Transport::Http);
                s.proxy = Some(ProxyConfig::ALB);
                for c in &mut s.calls {
                    c.steps = c.steps.max(25);
                    c.step = c.step.max(Duration::from_secs(3));
                }
                s
            }
            _ => scenario,
        };
        let mut s = s;
        if self == Mutant::SseCrlfChunkSplit {
            s.server.sse_style = crate::model::SseStyle::PrettyCrlfSplit;
        }
        s
    }
}

/// A set of mutants (the reference has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Mutants(u64);

impl Mutants {
    /// No mutant: the reference behaviour.
    pub const NONE: Mutants = Mutants(0);

    /// This set plus `m`.
    pub const fn with(self, m: Mutant) -> Mutants {
        Mutants(self.0 | 1 << m as u8)
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
    pub fn union(self, other: Mutants) -> Mutants {
        Mutants(self.0 | other.0)
    }

    /// The mutants in the set, in catalog order.
    pub fn iter(self) -> impl Iterator<Item = Mutant> {
        ALL.iter().copied().filter(move |m| self.has(*m))
    }
}

impl fmt::Display for Mutants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(|m| m.info().name).collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join("+"))
        }
    }
}

/// The client's SSE framer: the real decoder, or, under [`Mutant::SseCrlfChunkSplit`], the
/// same decoder with eventsource-parser #17's bug: when a chunk ends in CR and the next one
/// starts with LF, the LF is taken as an empty line, which dispatches the event early.
#[derive(Debug)]
pub struct ClientSseFramer {
    inner: crate::framing::sse::SseDecoder,
    crlf_bug: bool,
    last_was_cr: bool,
}

impl ClientSseFramer {
    /// A framer for a client running `mutants`.
    pub fn new(mutants: Mutants) -> Self {
        ClientSseFramer {
            inner: crate::framing::sse::SseDecoder::new(Default::default()),
            crlf_bug: mutants.has(Mutant::SseCrlfChunkSplit),
            last_was_cr: false,
        }
    }

    /// Appends a received chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.crlf_bug && self.last_was_cr && chunk.first() == Some(&b'\n') {
            // The correct decoder skips this LF as the end of the CR LF pair; an extra LF
            // makes it see the empty line the buggy parser sees.
            self.inner.push(b"\n");
        }
        if let Some(&last) = chunk.last() {
            self.last_was_cr = last == b'\r';
        }
        self.inner.push(chunk);
    }

    /// The next item, as [`SseDecoder::next_item`](crate::framing::sse::SseDecoder::next_item).
    pub fn next_item(
        &mut self,
    ) -> Option<Result<crate::framing::sse::SseItem, crate::framing::FrameError>> {
        self.inner.next_item()
    }
}

/// How a mutant was found out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    /// The first seed whose run the oracle flagged.
    pub seed: u64,
    /// Seeds run until then, that one included.
    pub seeds_run: u64,
    /// Rules the mutant's run broke and the reference's run of the same seed did not.
    pub rules: Vec<&'static str>,
}

/// The result of hunting one mutant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunt {
    /// The mutant.
    pub mutant: Mutant,
    /// How it was found out, if it was.
    pub kill: Option<Kill>,
    /// Seeds on which the unmutated reference broke a MUST rule, with the rules.
    pub reference_failures: Vec<(u64, Vec<&'static str>)>,
}

/// The scenario a mutant hunt runs for `seed`: the seed's scenario adapted to the mutant,
/// with `mutants` switched on.
pub fn hunt_scenario(m: Mutant, seed: u64, mutants: Mutants) -> Scenario {
    let mut s = m.adapt(Scenario::from_seed(seed));
    s.mutants = mutants;
    s
}

/// Runs seeds from `seeds` until the oracle flags the mutant, comparing each run with the
/// reference's run of the same seed (under the mutant's environment): the mutant is killed by
/// rules only its run breaks. Also checks that the unmutated reference is clean on every seed
/// run.
pub fn hunt(m: Mutant, seeds: std::ops::Range<u64>, lane: crate::run::Lane) -> Hunt {
    use crate::run::judge;
    let env = m.environment();
    let mut reference_failures = Vec::new();
    for (n, seed) in seeds.enumerate() {
        let baseline = judge(&hunt_scenario(m, seed, env), lane);
        let pure = if env.is_empty() {
            baseline.clone()
        } else {
            judge(&hunt_scenario(m, seed, Mutants::NONE), lane)
        };
        if pure.fails() {
            reference_failures.push((seed, pure.rules()));
        }
        let mutated = judge(&hunt_scenario(m, seed, env.with(m)), lane);
        let known = baseline.rules();
        let rules: Vec<&'static str> = mutated
            .rules()
            .into_iter()
            .filter(|r| !known.contains(r))
            .collect();
        if !rules.is_empty() {
            let kill = Kill {
                seed,
                seeds_run: n as u64 + 1,
                rules,
            };
            return Hunt {
                mutant: m,
                kill: Some(kill),
                reference_failures,
            };
        }
    }
    Hunt {
        mutant: m,
        kill: None,
        reference_failures,
    }
}
