//! The oracle: named, spec-referenced invariants checked over a [`Trace`].
//!
//! [`check`] is a pure function from a trace and an [`OracleConfig`] to a [`Verdict`]. Every
//! layer hands its traces to it: unit tests, property tests, fuzz targets, simulation sweeps
//! and recordings of real peers. The catalog is [`RULES`]; each rule has a stable name, a level
//! (MUST, SHOULD or host policy), the section of the spec digest it enforces (`docs/spec/mcp-2026-07-28.md`) and a one-line summary, and
//! each has hand-written traces that break it and traces that do not (`tests/oracle_rules.rs`).
//!
//! # Observation points
//!
//! A trace may hold both sides of a run (simulations) or only one (a black-box peer). Where a
//! rule needs a side that was not recorded, it uses the other side's view:
//!
//! - the server's sends are known from its `send` events, else from the client's `recv`
//!   events (each stdio pipe and each HTTP stream is ordered, so the order is the same);
//! - the moment the server learned of a cancellation is its `recv` of the stdio cancel or its
//!   `close` of the HTTP stream (what its transport saw, whether or not its handler noticed).
//!   When the server side was not recorded at all, it is the client's cancel (or the first
//!   close of the stream anywhere) plus [`OracleConfig::grace_ms`]. When the server side was
//!   recorded but holds no such event, the cancel never reached it (a partition, a crash) and
//!   nothing is demanded.
//!
//! The grace window also bounds how long work may go on after a cancellation was received
//! ("SHOULD stop work as soon as practical", host policy).
//!
//! A black-box stdio server gets two sharper tests of "nothing more after the cancel" (§3.3
//! item 6) than the grace window, both from the client's view alone:
//!
//! - **Barrier.** The client's pipe to the server is ordered, and so is the server's pipe
//!   back. When the client writes a request after its cancel and reads the answer, the server
//!   read the cancel before that request and wrote the answer after it: whatever the client
//!   reads for the cancelled request after that answer was written after the cancel was read.
//!   This is certain, whatever the timing; `mcp-sim probe` sends such a request (`tools/list`)
//!   right after every cancel.
//! - **An answer to the cancel.** A final response that arrives within
//!   [`CANCEL_REACTION_MS`] of the cancel, for a call that had run less than half as long as
//!   the shortest of its uncancelled identical siblings in the same trace, was caused by the
//!   cancel, not crossed with it (python-sdk #1419 answers every cancel with an error). The
//!   chance that a genuine crossing looks like this is bounded in the docs of the rule's
//!   function; the probe places its cancels inside the calls' measured duration so that the
//!   test applies.
//!
//! Messages between the cancel and the barrier's answer that are not such an early final
//! response (progress, or a result at the natural end of the work) are crossings: legal.

/// A rule's catalog name, checked against [`RULES`] at compile time: `rule!("cancel-on-timeout")`.
///
/// The rules flag violations through it, so the name a report prints is the text at the place
/// that flags it (`grep -rn cancel-on-timeout src/oracle` lands there), and a name that is not
/// in the catalog does not compile.
macro_rules! rule {
    ($name:literal) => {{
        const NAME: &str = $crate::oracle::catalog_name($name);
        NAME
    }};
}

mod causal;
pub mod coverage;
mod era;
pub mod hops;
pub(crate) mod index;
mod rules;

pub use era::{EraReading, EraSource};
pub use rules::CANCEL_REACTION_MS;

use std::fmt;

use crate::trace::{Hop, Trace};
use crate::wire::{self, DecodeOptions, Era};

/// How binding a rule is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// A MUST or MUST NOT of the spec or schema.
    Must,
    /// A SHOULD or SHOULD NOT.
    Should,
    /// Host policy: not in the spec, a rule good hosts and servers follow.
    Policy,
}

impl Level {
    /// `MUST`, `SHOULD` or `policy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
            Level::Policy => "policy",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whose fault a rule's violation is: a fixed role, or read from the violation's first event
/// (the message that broke the rule, or the one left unanswered). A two-hop trace of
/// `check-proxy` has mcp-sim's reference peers at both ends, so a one-hop violation whose
/// party is one of them is a defect of the judge, never a finding
/// ([`OracleConfig::reference_ends`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Party {
    /// The client (on the upstream hop, the intermediary).
    Client,
    /// The server (on the front hop, the intermediary).
    Server,
    /// Whoever wrote the message of the first event named.
    Sender,
    /// Whoever should have answered the message of the first event named (its receiver).
    Answerer,
    /// The intermediary, across its two hops.
    Intermediary,
}

/// One entry of the rule catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleInfo {
    /// The stable name.
    pub name: &'static str,
    /// The level in the modern era (2026-07-28) under the strict profile; `None` where the
    /// rule does not apply in it.
    pub modern: Option<Level>,
    /// The level in the legacy era (2025-03-26 to 2025-11-25); `None` where it does not apply.
    pub legacy: Option<Level>,
    /// Whose fault a violation is.
    pub party: Party,
    /// Where the rule comes from in the modern era (sections of docs/spec/mcp-2026-07-28.md
    /// and its §9 invariants).
    pub spec: &'static str,
    /// Where it comes from in the legacy era (the invariants LA1-LE19 of
    /// docs/spec/mcp-2025-11-25.md).
    pub legacy_spec: &'static str,
    /// What the rule demands.
    pub summary: &'static str,
}

impl RuleInfo {
    /// The rule's level in `era`, `None` where it does not apply.
    pub fn level_in(&self, era: Era) -> Option<Level> {
        match era {
            Era::Modern => self.modern,
            Era::Legacy(_) => self.legacy,
        }
    }

    /// Its level in the modern era, or in the legacy era for a rule of that era only.
    pub fn level(&self) -> Level {
        self.modern
            .or(self.legacy)
            .expect("every rule applies in some era")
    }

    /// Whether it is an intermediary rule, judged across the two hops of a two-hop trace
    /// only ([`hops::ACROSS`]).
    pub fn spans_hops(&self) -> bool {
        hops::ACROSS.contains(&self.name)
    }

    /// Where it comes from in `era`.
    pub fn spec_in(&self, era: Era) -> &'static str {
        match era {
            Era::Modern => self.spec,
            Era::Legacy(_) => self.legacy_spec,
        }
    }
}

/// A catalog level: `No` where the rule does not apply in that era.
macro_rules! era_level {
    (No) => {
        None
    };
    ($level:ident) => {
        Some(Level::$level)
    };
}

macro_rules! catalog {
    ($($ident:ident = $name:literal, $modern:ident, $legacy:ident, $party:ident, $spec:literal, $legacy_spec:literal, $summary:literal;)*) => {
        /// Stable rule names, as constants for matching.
        pub mod rule {
            $(#[doc = $summary] pub const $ident: &str = $name;)*
        }
        /// The rule catalog, in a fixed order.
        pub const RULES: &[RuleInfo] = &[
            $(RuleInfo {
                name: $name,
                modern: era_level!($modern),
                legacy: era_level!($legacy),
                party: Party::$party,
                spec: $spec,
                legacy_spec: $legacy_spec,
                summary: $summary,
            },)*
        ];
    };
}

catalog! {
    MESSAGE_SHAPE = "message-shape", Must, Must, Sender, "§1.1-1.2, §9 A1-A8", "LA1, §2: the era's shapes",
        "every message decodes strictly; clients send only requests and cancellations, servers never send requests, server results carry resultType";
    PROGRESS_TOKEN_TYPE = "progress-token-type", Must, Must, Sender, "§2.1, §9 B11", "LB7",
        "a progressToken is a string or an integer";
    PROGRESS_TOKEN_UNIQUE = "progress-token-unique", Must, Must, Client, "§2.1, §9 B12", "LB7",
        "no two outstanding requests of the client carry the same progressToken";
    PROGRESS_UNKNOWN_TOKEN = "progress-unknown-token", Must, Must, Server, "§2.3 item 1, §9 B14", "LB7",
        "progress names only a token of a request the server has received";
    PROGRESS_MONOTONIC = "progress-monotonic", Must, Must, Server, "§2.2, §9 B15", "LB7",
        "progress strictly increases per request (lenient profile: never decreases)";
    PROGRESS_AFTER_COMPLETION = "progress-after-completion", Must, Must, Server, "§2.3 item 5, §9 B16", "LB7",
        "no progress for a request after the server sent its final response";
    PROGRESS_STREAM = "progress-stream", Must, Should, Server, "§2.4, §9 B17-B18", "§5: a POST's SSE stream carries the requests and notifications that relate to its request",
        "on HTTP, progress travels only on its own request's stream (legacy era: never on another request's POST stream, SHOULD) and never carries a subscriptionId";
    RESPONSE_AFTER_CANCEL = "response-after-cancel", Must, Should, Server, "§3.3 item 6, §5.1, §9 C26", "LC10",
        "after the server received a stdio cancel it sends nothing more for that request (lenient profile: SHOULD)";
    DUPLICATE_RESPONSE = "duplicate-response", Must, Must, Sender, "§1.2, §9 E44", "JSON-RPC 2.0, as modern E44",
        "a request gets at most one response";
    SERVER_CANCEL_NOT_LISTEN = "server-cancel-not-listen", Must, No, Server, "§3.2, §9 C29", "",
        "a server sends notifications/cancelled only for an open subscriptions/listen request";
    CANCEL_UNKNOWN_REQUEST = "cancel-unknown-request", Must, Must, Client, "§3.3 item 1, §9 C22, C32", "LC9",
        "a client cancels only a request it sent and still believes in progress (not answered, not already cancelled)";
    CANCEL_ON_TIMEOUT = "cancel-on-timeout", Must, Should, Client, "§3.2, §4, §9 C23, D35", "LD14, LC11: the notification on every transport",
        "a client that abandons a request (timeout or cancel) cancels it on the wire: stdio notifications/cancelled (MUST), HTTP closing its stream (SHOULD)";
    CANCEL_OVER_HTTP = "cancel-over-http", Policy, No, Client, "§3.2, §9 C24", "",
        "in 2026-07-28 a client cancels over Streamable HTTP by closing the request's stream and POSTs no notifications/cancelled (the binding defines none from the client: \"not expected\")";
    TIMEOUT_MAXIMUM = "timeout-maximum", Should, Should, Client, "§4, §9 D34, D37", "LD14",
        "no request stays open past its hard maximum plus a tolerance, whatever progress arrives";
    TIMEOUT_DEADLINE = "timeout-deadline", Policy, Policy, Client, "§4, §9 D36", "LD14",
        "the client's timer honours the request's recorded policy: idle deadline from the send or the last valid progress, hard maximum from the send";
    DISCOVER_TIMEOUT = "discover-timeout", Should, Should, Client, "§4, §5.1 (the back-compat probe)", "the auto mode's fallback (digest §0)",
        "a client's server/discover that gets no answer is given up (a fallback, a cancel, the connection closed) within a reasonable time: OracleConfig::discover_timeout_ms";
    HTTP_REQUEST_HEADERS = "http-request-headers", Must, No, Client, "§5.2, §9 E41", "",
        "a request POST carries Accept with both media types, MCP-Protocol-Version equal to the body's protocolVersion, Mcp-Method equal to its method, and Mcp-Name where required";
    HTTP_STATUS = "http-status", Must, No, Server, "§5.2, §8, §9 E41-E43, I63", "",
        "answers come with their status: mismatched headers 400 with -32020, -32601 with 404, -32020/-32021/-32022 with 400, an accepted notification 202, a request's 200 as JSON or an event stream";
    ORIGIN_VALIDATED = "origin-validated", Must, Must, Server, "§5.2, §9 I63", "§5 (Streamable HTTP: servers MUST validate Origin)",
        "a local server refuses a request whose Origin or Host names another host (DNS rebinding), before serving it: 403 for a bad Origin in 2026-07-28, any 4xx in the legacy era and for a bad Host";
    DECLARED_DEADLINE = "declared-deadline", Policy, Policy, Client, "§4, §9 D35-D36", "LD14",
        "seen from the server, for a client whose timeout policy was declared: a request still running at its deadline (idle from receipt or the last progress sent, maximum from receipt) is cancelled on the wire within the grace window";
    LATE_RESPONSE_DELIVERED = "late-response-delivered", Should, Should, Client, "§3.3 item 5, §9 C27", "LC12",
        "after the client abandoned a request, no response or progress for it reaches the application";
    DISCONNECT_IS_CANCEL = "disconnect-is-cancel", Must, No, Server, "§3.2, §5.2, §9 C25", "",
        "on HTTP, after a request's stream closed the server sends nothing more for it and its work stops within the grace window";
    WORK_AFTER_CANCEL = "work-after-cancel", Should, Should, Server, "§3.3 items 3 and 6, §9 C26", "LC10: after the cancel notification, on every transport",
        "on stdio, the backend does no work for a request later than the grace window after the server received its cancel";
    RESOURCE_LEAK = "resource-leak", Should, Should, Server, "§3.3 item 3", "LC10",
        "a request that did backend work releases its resource once it ends";
    SINGLE_OUTCOME = "single-outcome", Policy, Policy, Client, "§3.3 item 7, §9 C28", "LC12",
        "the client application is told exactly one outcome per request (at most one; exactly one once the run is complete)";
    REQUEST_ID_UNIQUE = "request-id-unique", Must, Must, Client, "§1.2, §9 A9", "JSON-RPC 2.0, as modern A9",
        "a client never sends a request whose id equals an outstanding request's id";
    REQUEST_ID_REUSE = "request-id-reuse", Policy, Policy, Client, "§1.2, §6, §9 A9", "as modern A9",
        "a client never reuses a request id within a run, even after the first request ended";
    LISTEN_ACK_FIRST = "listen-ack-first", Must, No, Server, "§7.1, §9 G52", "",
        "the first server message tagged with a subscription id is its acknowledgement";
    RACE_NOT_GRACEFUL = "race-not-graceful", Must, Must, Client, "§3.3 item 7, §9 C28", "LC12",
        "the client copes with races: a late response or progress never makes it drop its connection, and it gives up a request as lost only when the server or an intermediary closed it";
    RESET_NEEDS_TOKEN = "reset-needs-token", Policy, Policy, Client, "§2.1, §4", "LB7, LD14",
        "a request whose timer resets on progress carries a progressToken (without one no progress can come)";
    IDLE_STREAM_CUT = "idle-stream-cut", Policy, Policy, Server, "§5.2 (keep-alives), intermediaries §1", "intermediaries §1",
        "no stream with an outstanding request stays silent until an intermediary's idle timeout cuts it";
    NOTIFICATION_ANSWERED = "notification-answered", Must, Must, Server, "§8, §9 A10", "JSON-RPC 2.0, as modern A10",
        "on stdio the server never answers a notification: no error without an id when everything the client wrote was readable";
    PROGRESS_TOKEN_REUSE = "progress-token-reuse", Policy, Policy, Client, "§2.1, §6, §9 F51", "as modern F51",
        "a client never reuses a progressToken within a run, even after the request that carried it ended (every retry gets a fresh one)";
    ERROR_CODE_RESERVED = "error-code-reserved", Must, No, Server, "§8, §9 I62", "",
        "a server never sends -32002, -32042 or an undefined code of -32020..-32099 (MUST NOT), and avoids the legacy -32000..-32019 (SHOULD NOT)";
    TASK_NOT_NEGOTIATED = "task-not-negotiated", Must, No, Server, "§7.3, §9 H58", "",
        "a CreateTaskResult answers only a tools/call that declared the Tasks extension in its own clientCapabilities";
    TASK_ACK = "task-ack", Must, No, Server, "§7.3, §9 H61", "",
        "tasks/cancel and tasks/update are acknowledged with an empty result of resultType complete";
    TASK_TERMINAL = "task-terminal", Must, No, Server, "§7.3, §9 H61", "",
        "a task reported completed, failed or cancelled never reports another status";
    TASK_UNKNOWN = "task-unknown", Must, No, Server, "§7.3, §8", "",
        "a tasks/get, tasks/cancel or tasks/update of a task never announced or past its ttlMs gets -32602, never a result";
    TASK_POLL_INTERVAL = "task-poll-interval", Should, No, Client, "§7.3, §9 H60", "",
        "a client polls one task with tasks/get no faster than the pollIntervalMs it was last given";
    TASK_CANCELLED_UNASKED = "task-cancelled-unasked", Should, No, Server, "§6, §7.3", "",
        "a task ends cancelled only after a tasks/cancel asked for it: a closed stream or a lost connection does not cancel a task";
    TASK_WORK_AFTER_CANCELLED = "task-work-after-cancelled", Should, No, Server, "§7.3, §3.3 item 3", "",
        "once a task was reported cancelled, its backend work stops within the grace window";
    CANCEL_TARGETS_TASK = "cancel-targets-task", Must, Must, Client, "§7.3, §9 C31", "LC13: 2025-11-25 only",
        "a client never sends notifications/cancelled for a task (or the call that became one); tasks are cancelled with tasks/cancel";
    INPUT_REQUIRED_SHAPE = "input-required-shape", Must, No, Server, "§7.2, §9 F50", "",
        "input_required answers only tools/call, prompts/get or resources/read, and carries inputRequests or requestState";
    INPUT_REQUIRED_RETRY = "input-required-retry", Must, No, Client, "§7.2, §9 F49", "",
        "the retry after input_required has a new id and echoes requestState exactly, or omits it when none was given";
    LISTEN_TAGGED = "listen-tagged", Must, No, Server, "§7.1, §9 G53, G56", "",
        "every notification of a subscription, and the result that ends it, carries its subscriptionId";
    LISTEN_FILTER = "listen-filter", Must, No, Server, "§7.1, §9 G53-G54", "",
        "a subscription carries only the notification types its filter asked for, never progress or notifications/message, and is acknowledged with no more than was asked";
    LISTEN_REOPENED = "listen-reopened", Must, No, Client, "§7.1, §9 G57", "",
        "on stdio, a client that goes on after the server's pipe broke re-opens, under a new id, every subscription it still wanted";
    WIRE_INTEGRITY = "wire-integrity", Must, Must, Server, "§5.1, §5.2, §9 E40, E44", "§5, §6: framing, as modern E40",
        "every message the client reads is one the server wrote intact: framing never splits or corrupts a message";
    INITIALIZE_FIRST = "initialize-first", No, Must, Sender, "", "LA1",
        "the first request of a connection is initialize, and its result carries protocolVersion, capabilities and serverInfo";
    REQUEST_BEFORE_INITIALIZED = "request-before-initialized", No, Should, Client, "", "LA2",
        "before the initialize result the client sends no request other than ping";
    INITIALIZE_CANCELLED = "initialize-cancelled", No, Must, Client, "", "LA3, LC9",
        "the client never cancels initialize (a handshake that timed out closes the connection instead)";
    PING_ANSWERED = "ping-answered", No, Must, Answerer, "", "LA4",
        "a ping is answered with an empty result: a ping the peer read and then answered a later request without answering is a breach in any trace, and once the run is complete every ping is answered";
    SESSION_ID_SENT = "session-id-sent", No, Must, Client, "", "LA5",
        "on HTTP, once the initialize response issued an Mcp-Session-Id, every later request carries it, and after a 404 the client initializes again before anything else";
    PROTOCOL_VERSION_HEADER = "protocol-version-header", No, Must, Client, "", "LA6",
        "on HTTP (2025-06-18 and later), every request after initialize carries MCP-Protocol-Version equal to the negotiated version";
    PROGRESS_ON_GET_STREAM = "progress-on-get-stream", No, Should, Server, "", "LB8",
        "progress for a request travels on its POST's stream, not on a GET stream the client opened to listen";
    DISCONNECT_TAKEN_AS_CANCEL = "disconnect-taken-as-cancel", No, Should, Server, "", "LC11",
        "on HTTP a closed stream is not a cancel: a server that saw no cancel does not drop the request (release it without answering) because its stream closed";
    EVENT_ID_UNIQUE = "event-id-unique", No, Must, Server, "", "LE15",
        "SSE event ids are unique across all streams of the session (a resumed stream's replay aside)";
    REPLAY_OTHER_STREAM = "replay-other-stream", No, Must, Server, "", "LE16",
        "a stream resumed with Last-Event-ID replays only messages of the stream that event came from";
    REPLAY_EXACTLY_ONCE = "replay-exactly-once", No, Must, Server, "", "LE17",
        "a resumed stream replays nothing at or before Last-Event-ID, and no event twice";
    RETRY_HONOURED = "retry-honoured", No, Must, Client, "", "LE18",
        "(2025-11-25) the client resumes a stream no sooner than the retry the server set on it after the stream broke";
    PRIMING_EVENT = "priming-event", No, Should, Server, "", "LE19",
        "(2025-11-25) each SSE response stream opens with a priming event (an event id, no data) before any message";
    RESUME_BROKEN_STREAM = "resume-broken-stream", No, Should, Client, "", "LE17, LC11 (derived)",
        "a client whose request's stream broke after an event id resumes it with Last-Event-ID before it gives the request up (the server keeps working: a disconnect is not a cancel)";
    CANCEL_FORWARDED = "cancel-forwarded", Must, Should, Intermediary, "§3.2, §5.1, §5.2, §9 C23-C25", "LC11, LD14",
        "an intermediary passes a front cancel (in 2026-07-28 over HTTP, the request's stream closing), or a front request it answered itself, on to the upstream request as the upstream era's cancel within the grace window: notifications/cancelled naming the upstream's id (stdio, and the legacy era everywhere: MUST on 2026-07-28 stdio, SHOULD in the legacy era), the upstream stream closed (2026-07-28 HTTP: SHOULD); closing the whole upstream connection (a child's input) ends every request on it";
    CANCEL_ANSWERED_LOCALLY = "cancel-answered-locally", Must, Should, Intermediary, "§3.3 items 3 and 6, §9 C26", "LC10",
        "an intermediary does not answer a front cancel itself: no final response reaches the front for a cancelled request unless the upstream sent that response";
    LATE_RESULT_FORWARDED = "late-result-forwarded", Must, Should, Intermediary, "§3.3 items 5 and 6, §9 C26-C27", "LC10, LC12",
        "a response the upstream sent after the front's cancel had reached it (or later than the grace window after the front's cancel) does not reach the front";
    PROGRESS_FORWARDED = "progress-forwarded", Should, Should, Intermediary, "§2.1, §2.3, §2.4", "LB7",
        "progress the upstream sent for a request reaches the front with the client's own token: every notification sent more than the grace window before the request ended on the front";
    REQUEST_ID_MAPPING = "request-id-mapping", Must, Must, Intermediary, "§1.2, §3.3 item 1, §9 A9, C22", "JSON-RPC 2.0, LC9",
        "an intermediary maps each response and cancel to its own request: the front's answer to a request is the upstream's answer to that request's upstream request, and an upstream request is cancelled only when its front request was cancelled or ended";
    INTERMEDIARY_TIMEOUT = "intermediary-timeout", Should, Should, Intermediary, "§4, §9 D34-D37", "LD14",
        "an intermediary ends a waiting front request as its documented request timeout says (`intermediary_timeout_ms`, `check-proxy --intermediary-timeout-ms`): it does not cut one the upstream still works on sooner than that timeout after the request was sent (nor at all when no timeout is documented), and with a timeout documented it does not leave one idle longer than the timeout plus the grace window after the request or its last progress";
}

/// `name` itself when it is in the catalog; a compile-time error (in const context) when not.
pub(crate) const fn catalog_name(name: &'static str) -> &'static str {
    let mut i = 0;
    while i < RULES.len() {
        if const_str_eq(RULES[i].name, name) {
            return name;
        }
        i += 1;
    }
    panic!("not a rule of the catalog")
}

const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Looks a rule up by name.
pub fn rule_info(name: &str) -> Option<&'static RuleInfo> {
    RULES.iter().find(|r| r.name == name)
}

/// Which reading of the spec's ambiguous points to judge by (docs/spec/mcp-2026-07-28.md Appendix B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// The binding pages' MUSTs and the spec's strict "MUST increase".
    Strict,
    /// The conformance suite's non-decreasing progress, and the pattern page's SHOULD for
    /// messages after a cancel.
    Lenient,
}

/// Oracle settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OracleConfig {
    /// Strict or lenient.
    pub profile: Profile,
    /// Window, in ms, for inferring an unrecorded side's observation and for stopping work.
    pub grace_ms: u64,
    /// Tolerance, in ms, for client timers against their policy.
    pub timer_tolerance_ms: u64,
    /// Host-policy ceiling, in ms, for any request without a recorded tighter bound.
    pub max_request_ms: u64,
    /// The run ended with every request settled: apply the liveness checks (every request has
    /// an outcome, every resource is released).
    pub complete: bool,
    /// How to decode messages in the trace (its era is set from [`OracleConfig::era`] or the
    /// trace's own).
    pub decode: DecodeOptions,
    /// The era to judge by; `None` reads it from the trace ([`EraReading::of_trace`]).
    pub era: Option<Era>,
    /// Two-hop traces: the intermediary's documented request timeout, in ms, which
    /// `intermediary-timeout` holds it to; `None` when it documents none (it then may not cut
    /// a request the upstream still works on).
    pub intermediary_timeout_ms: Option<u64>,
    /// Host policy: how long, in ms, a client may wait on a `server/discover` that gets no
    /// answer before it gives up on it (`discover-timeout`). The spec asks only for "a
    /// reasonable timeout"; the default is the longest of the SDKs' auto modes (rmcp's and
    /// mcp-sim's own 10 s; mcp-go waits 5 s).
    pub discover_timeout_ms: u64,
    /// Two-hop traces whose client and upstream server are mcp-sim's own reference peers
    /// (`check-proxy`): the intermediary is the one under judgement, so a one-hop violation
    /// whose [`Party`] is the front's client or the upstream's server is a misreading of the
    /// judge's and goes to [`Verdict::judge_defects`], never among the findings. Off where a
    /// simulated bridge's ends may be mutants.
    pub reference_ends: bool,
}

impl Default for OracleConfig {
    /// Strict; 1 s grace; 50 ms timer tolerance; 30 minutes ceiling (the longest real host
    /// idle timeout, stdio in docs/spec/intermediaries.md §2); 10 s for an unanswered
    /// `server/discover`; liveness checks off.
    fn default() -> Self {
        OracleConfig {
            profile: Profile::Strict,
            grace_ms: 1000,
            timer_tolerance_ms: 50,
            max_request_ms: 30 * 60 * 1000,
            complete: false,
            decode: DecodeOptions::default(),
            era: None,
            intermediary_timeout_ms: None,
            discover_timeout_ms: 10_000,
            reference_ends: false,
        }
    }
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule's name (see [`RULES`]).
    pub rule: &'static str,
    /// The level under the profile used.
    pub level: Level,
    /// The 0-based indices of the events involved, the decisive one last.
    pub events: Vec<usize>,
    /// Why, for people.
    pub message: String,
    /// In a two-hop trace, the hop a one-hop rule was broken on (`None`: a one-hop trace, or
    /// an intermediary rule, which spans both).
    pub hop: Option<Hop>,
    /// On the upstream hop of an intermediary with several upstream connections, which one
    /// (the trace's `conn`).
    pub conn: Option<u32>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let events: Vec<String> = self.events.iter().map(|e| format!("#{e}")).collect();
        let hop = match (self.hop, self.conn) {
            (Some(Hop::Front), _) => " (front hop)".to_owned(),
            (Some(Hop::Back), Some(c)) => format!(" (upstream hop, connection {c})"),
            (Some(Hop::Back), None) => " (upstream hop)".to_owned(),
            (None, _) => String::new(),
        };
        write!(
            f,
            "[{}] {}{hop} at {}: {}",
            self.level,
            self.rule,
            events.join(","),
            self.message
        )
    }
}

/// The oracle's verdict on a trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Every violation, ordered by decisive event, then rule name.
    pub violations: Vec<Violation>,
    /// The era the trace was judged by, and why (in a two-hop trace, the front hop's).
    pub era: EraReading,
    /// In a two-hop trace, the era of the upstream hop, and why (of several upstream
    /// connections, the first that carried a `tools/call`).
    pub upstream_era: Option<EraReading>,
    /// Of an upstream hop of several connections, each one's era, connection 1 first.
    pub connection_eras: Vec<EraReading>,
    /// Violations the judge found against a reference peer ([`OracleConfig::reference_ends`]):
    /// a misreading of the trace by mcp-sim, reported as such and never a finding.
    pub judge_defects: Vec<Violation>,
}

/// Whether `rule` checks what a client declared about its timeouts (`--client-policy`).
pub fn is_declared_policy_rule(rule: &str) -> bool {
    [
        rule::DECLARED_DEADLINE,
        rule::TIMEOUT_DEADLINE,
        rule::RESET_NEEDS_TOKEN,
    ]
    .contains(&rule)
}

impl Verdict {
    /// Whether a MUST-level rule is broken.
    pub fn has_must(&self) -> bool {
        self.violations.iter().any(|v| v.level == Level::Must)
    }

    /// Whether a client broke the timeout policy it declared (a black-box client judged from
    /// the server's end: `serve`, `sweep --virtual-client`): its deadlines, or a declared reset
    /// on progress its own calls make impossible.
    pub fn breaks_declared_policy(&self) -> bool {
        self.violations
            .iter()
            .any(|v| v.level == Level::Policy && is_declared_policy_rule(v.rule))
    }

    /// Whether nothing at all is broken.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// The rules this verdict judged by: those of its era (one hop), or of either hop's era and
    /// the intermediary rules (two hops).
    pub fn rules(&self) -> impl Iterator<Item = &'static RuleInfo> + '_ {
        RULES.iter().filter(move |r| match self.upstream_era {
            None => !r.spans_hops() && r.level_in(self.era.era).is_some(),
            Some(up) => {
                r.spans_hops()
                    || r.level_in(self.era.era).is_some()
                    || r.level_in(up.era).is_some()
                    || self
                        .connection_eras
                        .iter()
                        .any(|c| r.level_in(c.era).is_some())
            }
        })
    }

    /// The era a violation was judged in: the upstream's for a rule broken on the upstream
    /// hop and for `cancel-forwarded` (the upstream era says what a cancel is), else the
    /// front's (a one-hop trace's own).
    pub fn era_of(&self, v: &Violation) -> Era {
        let conn = v
            .conn
            .and_then(|c| self.connection_eras.get(c as usize - 1));
        match (self.upstream_era, conn) {
            (Some(_), Some(c)) if v.hop == Some(Hop::Back) => c.era,
            (Some(up), _) if v.hop == Some(Hop::Back) || v.rule == rule::CANCEL_FORWARDED => up.era,
            _ => self.era.era,
        }
    }

    /// The era read, and why: for a two-hop trace, each hop's.
    pub fn describe_era(&self) -> String {
        match self.upstream_era {
            None => self.era.describe(),
            Some(up) if self.connection_eras.len() < 2 => {
                format!("front {}, upstream {}", self.era.describe(), up.describe())
            }
            Some(_) => {
                let conns: Vec<String> = self
                    .connection_eras
                    .iter()
                    .enumerate()
                    .map(|(k, e)| format!("connection {} {}", k + 1, e.describe()))
                    .collect();
                format!(
                    "front {}, upstream {}",
                    self.era.describe(),
                    conns.join("; ")
                )
            }
        }
    }

    /// Whether `rule` is among the violations.
    pub fn violates(&self, rule: &str) -> bool {
        self.violations.iter().any(|v| v.rule == rule)
    }
}

/// Checks every rule over `trace`: a one-hop trace as it is, a two-hop trace hop by hop and
/// across its intermediary ([`hops`]).
pub fn check(trace: &Trace, config: &OracleConfig) -> Verdict {
    // Same-instant events in causal order (`causal`); indices reported as given.
    let Some((ordered, given)) = causal::reorder(trace) else {
        return check_ordered(trace, config);
    };
    let mut verdict = check_ordered(&ordered, config);
    for v in verdict
        .violations
        .iter_mut()
        .chain(verdict.judge_defects.iter_mut())
    {
        for e in &mut v.events {
            *e = given[*e];
        }
        v.message = renumbered(&v.message, &given);
    }
    verdict
        .violations
        .sort_by(|a, b| (a.events.last(), a.rule).cmp(&(b.events.last(), b.rule)));
    verdict
}

/// `message` with every event reference `#N` in it read through `origin` (the index in the
/// whole trace of each event of the part judged), so that a message names events as the
/// violation's `events` and the event list do.
pub(crate) fn renumbered(message: &str, origin: &[usize]) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find('#') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits]
            .parse::<usize>()
            .ok()
            .and_then(|n| origin.get(n))
        {
            Some(n) => out.push_str(&n.to_string()),
            None => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

/// Runs `f` over the request index of `trace` as the rules read it, with the one-hop verdict
/// over the same events: same-instant events in causal order, the era judged, and of a
/// two-hop trace its front hop (the client's side of the intermediary). For comparing two runs
/// by what the rules see ([`crate::diff`]); event indices, the index's and the verdict's, are
/// the index's own.
pub(crate) fn with_index<R>(
    trace: &Trace,
    config: &OracleConfig,
    f: impl FnOnce(&index::Index<'_>, &Verdict) -> R,
) -> R {
    let front = trace.is_two_hop().then(|| trace.hop(Hop::Front).0);
    let trace = front.as_ref().unwrap_or(trace);
    let ordered = causal::reorder(trace).map(|(t, _)| t);
    let trace = ordered.as_ref().unwrap_or(trace);
    let verdict = check_hop(trace, config);
    let (_, config) = judged_config(trace, config);
    f(&index::Index::build(trace, &config), &verdict)
}

fn check_ordered(trace: &Trace, config: &OracleConfig) -> Verdict {
    if trace.is_two_hop() {
        return hops::check(trace, config);
    }
    check_hop(trace, config)
}

/// The era `trace` is judged by (`config`'s, else its own) and the settings that decode it.
fn judged_config(trace: &Trace, config: &OracleConfig) -> (EraReading, OracleConfig) {
    let era = match config.era {
        Some(era) => EraReading {
            era,
            source: EraSource::Given,
        },
        None => EraReading::of_trace(trace),
    };
    let config = OracleConfig {
        decode: DecodeOptions {
            era: era.era,
            ..config.decode
        },
        ..*config
    };
    (era, config)
}

/// Checks the one-hop rules over `trace`, whatever hops its events name.
fn check_hop(trace: &Trace, config: &OracleConfig) -> Verdict {
    let (era, config) = judged_config(trace, config);
    let config = &config;
    // A 2025-03-26 batch is judged member by member and reported at its own event.
    let unbatched = if wire::allows_batches(era.era) {
        trace.unbatched()
    } else {
        None
    };
    let (trace, origin) = match &unbatched {
        Some((t, origin)) => (t, Some(origin)),
        None => (trace, None),
    };
    let index = index::Index::build(trace, config);
    let mut violations = rules::check_all(&index, config);
    if let Some(origin) = origin {
        for v in &mut violations {
            for e in &mut v.events {
                *e = origin[*e];
            }
            v.events.dedup();
        }
    }
    violations.sort_by(|a, b| (a.events.last(), a.rule).cmp(&(b.events.last(), b.rule)));
    violations.dedup();
    Verdict {
        violations,
        era,
        upstream_era: None,
        connection_eras: Vec::new(),
        judge_defects: Vec::new(),
    }
}
