//! The oracle's rule catalog, case by case.
//!
//! Every rule in [`RULES`] has hand-written traces in `tests/traces/`: `<rule>-violates[-N].jsonl`
//! breaks it, `<rule>-passes[-N].jsonl` is a near-identical run that does not. [`CASES`] says,
//! for each file, under which profile and liveness setting it is checked and exactly which rules
//! (with which level) the report must hold, so a change that adds a spurious violation fails
//! here as surely as one that loses a real one.
//!
//! Where a rule depends on the observation point, the files cover each one: both sides recorded
//! versus the client side only (a black-box server, judged with `grace_ms`), the server side
//! only (a black-box client), stdio versus Streamable HTTP, strict versus lenient, and
//! `complete` for the liveness checks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use mcp_sim::oracle::{self, rule, Level, OracleConfig, Profile, Verdict, RULES};
use mcp_sim::trace::{EventKind, Side, Trace};

const STRICT: Profile = Profile::Strict;
const LENIENT: Profile = Profile::Lenient;
const MUST: Level = Level::Must;
const SHOULD: Level = Level::Should;
const POLICY: Level = Level::Policy;

/// One check: a trace file, the profile, whether the run is complete (liveness checks on), the
/// intermediary's documented timeout (two-hop traces), and the exact set of (rule, level) the
/// report must contain.
struct Case {
    file: &'static str,
    profile: Profile,
    complete: bool,
    intermediary_timeout_ms: Option<u64>,
    expect: &'static [(&'static str, Level)],
}

const fn case(
    file: &'static str,
    profile: Profile,
    complete: bool,
    expect: &'static [(&'static str, Level)],
) -> Case {
    Case {
        file,
        profile,
        complete,
        intermediary_timeout_ms: None,
        expect,
    }
}

/// A two-hop case judged with the intermediary's documented timeout (strict, not complete).
const fn timed(
    file: &'static str,
    timeout_ms: u64,
    expect: &'static [(&'static str, Level)],
) -> Case {
    Case {
        intermediary_timeout_ms: Some(timeout_ms),
        ..case(file, STRICT, false, expect)
    }
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    // message-shape: a result without resultType (both sides), a server request (black-box
    // server), a client progress notification, a non-JSON line on stdout, a 403's body that
    // claims JSON-RPC but is not. Passing: a 403's body that is plain JSON, no JSON-RPC (the
    // spec lets an HTTP error's body be anything: it "MAY" be a JSON-RPC error).
    case("message-shape-violates.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    case("message-shape-violates-2.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    case("message-shape-violates-3.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    case("message-shape-violates-4.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    case("message-shape-violates-5.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    case("message-shape-passes.jsonl", STRICT, true, &[]),
    case("message-shape-passes-2.jsonl", STRICT, false, &[]),
    // Two hops, the upstream in two connections (`conn`): a legacy side session the
    // intermediary opened and never used, and its relayed 2026-07-28 call; each connection
    // is judged in its own era (one connection read as legacy would break the legacy shapes:
    // `an_upstream_connection_is_judged_in_its_own_era`).
    case("message-shape-passes-6.jsonl", STRICT, false, &[]),

    // progress-token-type: a boolean token on a request, a fractional token on progress.
    case("progress-token-type-violates.jsonl", STRICT, false, &[(rule::PROGRESS_TOKEN_TYPE, MUST)]),
    case("progress-token-type-passes.jsonl", STRICT, true, &[]),
    case("progress-token-type-violates-2.jsonl", STRICT, false, &[(rule::PROGRESS_TOKEN_TYPE, MUST)]),
    case("progress-token-type-passes-2.jsonl", STRICT, true, &[]),

    // progress-token-unique: the client's view, then the server's alone (black-box client). The
    // passing traces reuse the token after the first request ended: legal, but not what a
    // good host does (progress-token-reuse, policy).
    case("progress-token-unique-violates.jsonl", STRICT, false, &[(rule::PROGRESS_TOKEN_UNIQUE, MUST)]),
    case("progress-token-unique-passes.jsonl", STRICT, true, &[(rule::PROGRESS_TOKEN_REUSE, POLICY)]),
    case("progress-token-unique-violates-2.jsonl", STRICT, false, &[(rule::PROGRESS_TOKEN_UNIQUE, MUST)]),
    case("progress-token-unique-passes-2.jsonl", STRICT, true, &[(rule::PROGRESS_TOKEN_REUSE, POLICY)]),

    // progress-unknown-token: an invented token (both sides), progress for a request that did
    // not opt in (black-box server).
    case("progress-unknown-token-violates.jsonl", STRICT, false, &[(rule::PROGRESS_UNKNOWN_TOKEN, MUST)]),
    case("progress-unknown-token-passes.jsonl", STRICT, true, &[]),
    case("progress-unknown-token-violates-2.jsonl", STRICT, false, &[(rule::PROGRESS_UNKNOWN_TOKEN, MUST)]),
    case("progress-unknown-token-passes-2.jsonl", STRICT, true, &[]),
    // The server writes progress in the millisecond it reads the call, the progress line
    // first or second: read in causal order, it is the call's own token either way.
    case("progress-unknown-token-passes-3.jsonl", STRICT, false, &[]),
    case("progress-unknown-token-passes-4.jsonl", STRICT, false, &[]),

    // progress-monotonic: equal values break the strict profile only; a decrease breaks both.
    case("progress-monotonic-violates.jsonl", STRICT, false, &[(rule::PROGRESS_MONOTONIC, MUST)]),
    case("progress-monotonic-violates.jsonl", LENIENT, false, &[]),
    case("progress-monotonic-passes.jsonl", STRICT, true, &[]),
    case("progress-monotonic-passes.jsonl", LENIENT, true, &[]),
    case("progress-monotonic-violates-2.jsonl", STRICT, false, &[(rule::PROGRESS_MONOTONIC, MUST)]),
    case("progress-monotonic-violates-2.jsonl", LENIENT, false, &[(rule::PROGRESS_MONOTONIC, MUST)]),
    case("progress-monotonic-passes-2.jsonl", LENIENT, true, &[]),

    // progress-after-completion: after a result (stdio), after an InputRequiredResult, and on
    // an HTTP stream seen by the client alone.
    case("progress-after-completion-violates.jsonl", STRICT, false, &[(rule::PROGRESS_AFTER_COMPLETION, MUST)]),
    case("progress-after-completion-passes.jsonl", STRICT, true, &[]),
    case("progress-after-completion-violates-2.jsonl", STRICT, false, &[(rule::PROGRESS_AFTER_COMPLETION, MUST)]),
    case("progress-after-completion-violates-3.jsonl", STRICT, false, &[(rule::PROGRESS_AFTER_COMPLETION, MUST)]),
    case("progress-after-completion-passes-2.jsonl", STRICT, true, &[]),

    // progress-stream: on another request's HTTP stream; tagged with a subscriptionId (stdio).
    case("progress-stream-violates.jsonl", STRICT, false, &[(rule::PROGRESS_STREAM, MUST)]),
    case("progress-stream-passes.jsonl", STRICT, true, &[]),
    case("progress-stream-violates-2.jsonl", STRICT, false, &[(rule::PROGRESS_STREAM, MUST)]),
    case("progress-stream-passes-2.jsonl", STRICT, true, &[]),

    // response-after-cancel (stdio): MUST in strict, SHOULD in lenient; a result or progress
    // after the cancel, seen with both sides, the client side only (grace window) and the server
    // side only. The passing files are the graceful crossing in each of these views.
    case("response-after-cancel-violates.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, MUST)]),
    case("response-after-cancel-violates.jsonl", LENIENT, false, &[(rule::RESPONSE_AFTER_CANCEL, SHOULD)]),
    case("response-after-cancel-passes.jsonl", STRICT, true, &[]),
    case("response-after-cancel-passes.jsonl", LENIENT, true, &[]),
    case("response-after-cancel-violates-2.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, MUST)]),
    case("response-after-cancel-violates-2.jsonl", LENIENT, false, &[(rule::RESPONSE_AFTER_CANCEL, SHOULD)]),
    case("response-after-cancel-passes-2.jsonl", STRICT, true, &[]),
    case("response-after-cancel-violates-3.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, MUST)]),
    case("response-after-cancel-violates-4.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, MUST)]),
    case("response-after-cancel-passes-3.jsonl", STRICT, true, &[]),
    // Black-box stdio evidence sharper than the grace window: a message read after the answer
    // to a request written after the cancel (the barrier), versus one read before it; an
    // error 1 ms after the cancel, 500 ms into a call whose identical sibling took 3000 ms
    // (an answer to the cancel), versus a result near the natural end (a crossing) and one
    // with no sibling to compare with; a crossing the client read late during its own stall.
    case("response-after-cancel-violates-5.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, MUST)]),
    case("response-after-cancel-passes-4.jsonl", STRICT, true, &[]),
    case("response-after-cancel-violates-6.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, MUST)]),
    case("response-after-cancel-violates-6.jsonl", LENIENT, false, &[(rule::RESPONSE_AFTER_CANCEL, SHOULD)]),
    case("response-after-cancel-passes-5.jsonl", STRICT, true, &[]),
    case("response-after-cancel-passes-6.jsonl", STRICT, true, &[]),
    case("response-after-cancel-passes-7.jsonl", STRICT, true, &[]),

    // duplicate-response: stdio with both sides, HTTP seen by the client alone.
    case("duplicate-response-violates.jsonl", STRICT, false, &[(rule::DUPLICATE_RESPONSE, MUST)]),
    case("duplicate-response-passes.jsonl", STRICT, true, &[]),
    case("duplicate-response-violates-2.jsonl", STRICT, false, &[(rule::DUPLICATE_RESPONSE, MUST)]),
    case("duplicate-response-passes-2.jsonl", STRICT, true, &[]),

    // server-cancel-not-listen: a cancelled tools/call, a listen cancelled after its result,
    // an id the client never sent. Passing: the stdio teardown cancel, alone or before a result.
    case("server-cancel-not-listen-violates.jsonl", STRICT, false, &[(rule::SERVER_CANCEL_NOT_LISTEN, MUST)]),
    case("server-cancel-not-listen-passes.jsonl", STRICT, true, &[]),
    case("server-cancel-not-listen-violates-2.jsonl", STRICT, false, &[(rule::SERVER_CANCEL_NOT_LISTEN, MUST)]),
    case("server-cancel-not-listen-passes-2.jsonl", STRICT, true, &[]),
    case("server-cancel-not-listen-violates-3.jsonl", STRICT, false, &[(rule::SERVER_CANCEL_NOT_LISTEN, MUST)]),

    // cancel-unknown-request: an id never sent, a cancel after the response arrived, a second
    // cancel, an id never sent in the server's view alone. Passing: a cancel of a request in
    // progress, one crossing the response, one seen by the server alone.
    case("cancel-unknown-request-violates.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),
    case("cancel-unknown-request-passes.jsonl", STRICT, true, &[]),
    case("cancel-unknown-request-violates-2.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),
    case("cancel-unknown-request-passes-2.jsonl", STRICT, true, &[]),
    case("cancel-unknown-request-violates-3.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),
    case("cancel-unknown-request-violates-4.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),
    case("cancel-unknown-request-passes-3.jsonl", STRICT, true, &[]),

    // cancel-on-timeout: MUST on stdio (timer, application cancel), SHOULD on HTTP.
    case("cancel-on-timeout-violates.jsonl", STRICT, false, &[(rule::CANCEL_ON_TIMEOUT, MUST)]),
    case("cancel-on-timeout-passes.jsonl", STRICT, true, &[]),
    case("cancel-on-timeout-violates-2.jsonl", STRICT, false, &[(rule::CANCEL_ON_TIMEOUT, SHOULD)]),
    case("cancel-on-timeout-passes-2.jsonl", STRICT, true, &[]),
    case("cancel-on-timeout-violates-3.jsonl", STRICT, false, &[(rule::CANCEL_ON_TIMEOUT, MUST)]),
    // cancel-over-http: a timed-out call cancelled by closing its stream, and a
    // notifications/cancelled POSTed beside it (as go-sdk's client does); the close alone.
    // (Not a second cancel of an already cancelled request: the notification has no meaning
    // in this binding. In the legacy era the POST is the cancel: legacy/cancel-on-timeout-passes.)
    case("cancel-over-http-violates.jsonl", STRICT, false, &[(rule::CANCEL_OVER_HTTP, POLICY)]),
    case("cancel-over-http-passes.jsonl", STRICT, false, &[]),

    // discover-timeout: a server/discover nobody answers, waited on for 30 s until the client
    // closed; passing: its timer gives up at 10 s with a cancel.
    case("discover-timeout-violates.jsonl", STRICT, false, &[(rule::DISCOVER_TIMEOUT, SHOULD)]),
    case("discover-timeout-passes.jsonl", STRICT, false, &[]),

    // timeout-maximum: the host ceiling without a policy; a recorded maximum that progress kept
    // extending (the timer also missed its deadline). Passing: the maximum fires despite progress.
    case("timeout-maximum-violates.jsonl", STRICT, false, &[(rule::TIMEOUT_MAXIMUM, SHOULD)]),
    case("timeout-maximum-passes.jsonl", STRICT, true, &[]),
    case("timeout-maximum-violates-2.jsonl", STRICT, false, &[(rule::TIMEOUT_DEADLINE, POLICY), (rule::TIMEOUT_MAXIMUM, SHOULD)]),
    case("timeout-maximum-passes-2.jsonl", STRICT, true, &[]),

    // timeout-deadline: fired early; ignored reset-on-progress; reset on an SSE comment; reset
    // on progress without reset-on-progress (which also overruns the hard bound).
    case("timeout-deadline-violates.jsonl", STRICT, false, &[(rule::TIMEOUT_DEADLINE, POLICY)]),
    case("timeout-deadline-passes.jsonl", STRICT, true, &[]),
    case("timeout-deadline-violates-2.jsonl", STRICT, false, &[(rule::TIMEOUT_DEADLINE, POLICY)]),
    case("timeout-deadline-passes-2.jsonl", STRICT, true, &[]),
    case("timeout-deadline-violates-3.jsonl", STRICT, false, &[(rule::TIMEOUT_DEADLINE, POLICY)]),
    case("timeout-deadline-passes-3.jsonl", STRICT, true, &[]),
    case("timeout-deadline-violates-4.jsonl", STRICT, false, &[(rule::TIMEOUT_DEADLINE, POLICY), (rule::TIMEOUT_MAXIMUM, SHOULD)]),

    // late-response-delivered: a crossing result handed to the application after a timeout;
    // progress handed over after the outcome.
    case("late-response-delivered-violates.jsonl", STRICT, false, &[(rule::LATE_RESPONSE_DELIVERED, SHOULD)]),
    case("late-response-delivered-passes.jsonl", STRICT, true, &[]),
    case("late-response-delivered-violates-2.jsonl", STRICT, false, &[(rule::LATE_RESPONSE_DELIVERED, SHOULD)]),
    case("late-response-delivered-passes-2.jsonl", STRICT, true, &[]),

    // disconnect-is-cancel (HTTP): a result, or progress, after the server saw the client close
    // the stream; progress after a proxy cut it. Passing: the graceful crossing, both sides
    // recorded and client side only; a close the recorded server never saw (a partition).
    case("disconnect-is-cancel-violates.jsonl", STRICT, false, &[(rule::DISCONNECT_IS_CANCEL, MUST)]),
    case("disconnect-is-cancel-violates.jsonl", LENIENT, false, &[(rule::DISCONNECT_IS_CANCEL, MUST)]),
    case("disconnect-is-cancel-passes.jsonl", STRICT, true, &[]),
    case("disconnect-is-cancel-passes.jsonl", LENIENT, true, &[]),
    case("disconnect-is-cancel-violates-2.jsonl", STRICT, false, &[(rule::DISCONNECT_IS_CANCEL, MUST)]),
    case("disconnect-is-cancel-passes-2.jsonl", STRICT, true, &[]),
    case("disconnect-is-cancel-violates-3.jsonl", STRICT, false, &[(rule::DISCONNECT_IS_CANCEL, MUST)]),
    case("disconnect-is-cancel-passes-3.jsonl", STRICT, true, &[]),

    // Work after an HTTP close is disconnect-is-cancel (MUST): the server did not treat the
    // disconnect as a cancellation. Server recorded, and client only (grace window).
    case("disconnect-is-cancel-violates-4.jsonl", STRICT, false, &[(rule::DISCONNECT_IS_CANCEL, MUST)]),
    case("disconnect-is-cancel-passes-4.jsonl", STRICT, true, &[]),
    case("disconnect-is-cancel-violates-5.jsonl", STRICT, false, &[(rule::DISCONNECT_IS_CANCEL, MUST)]),

    // work-after-cancel: stdio, with the server recorded and with the server inferred from the
    // client's cancel plus the grace window.
    case("work-after-cancel-violates.jsonl", STRICT, false, &[(rule::WORK_AFTER_CANCEL, SHOULD)]),
    case("work-after-cancel-passes.jsonl", STRICT, true, &[]),
    case("work-after-cancel-violates-2.jsonl", STRICT, false, &[(rule::WORK_AFTER_CANCEL, SHOULD)]),

    // resource-leak: never released after the response; never released in a complete run of
    // a request that never ended (liveness: only with `complete`).
    case("resource-leak-violates.jsonl", STRICT, false, &[(rule::RESOURCE_LEAK, SHOULD)]),
    case("resource-leak-passes.jsonl", STRICT, true, &[]),
    case("resource-leak-violates-2.jsonl", STRICT, true, &[(rule::RESOURCE_LEAK, SHOULD)]),
    case("resource-leak-violates-2.jsonl", STRICT, false, &[]),
    // Two hops, complete: the intermediary answered the cancel itself, so the upstream still
    // works when the run stops; that is the intermediary's fault, not the server's leak. An
    // upstream request that did end and kept its resource still leaks.
    case("resource-leak-passes-2.jsonl", STRICT, true, &[(rule::CANCEL_FORWARDED, MUST), (rule::CANCEL_ANSWERED_LOCALLY, MUST)]),
    case("resource-leak-violates-3.jsonl", STRICT, true, &[(rule::RESOURCE_LEAK, SHOULD), (rule::CANCEL_FORWARDED, MUST), (rule::CANCEL_ANSWERED_LOCALLY, MUST)]),

    // single-outcome: two outcomes; none in a complete run (liveness: only with `complete`).
    case("single-outcome-violates.jsonl", STRICT, false, &[(rule::SINGLE_OUTCOME, POLICY)]),
    case("single-outcome-passes.jsonl", STRICT, true, &[]),
    case("single-outcome-violates-2.jsonl", STRICT, true, &[(rule::SINGLE_OUTCOME, POLICY)]),
    case("single-outcome-violates-2.jsonl", STRICT, false, &[]),

    // request-id-unique: both sides, then the server's view alone (black-box client).
    case("request-id-unique-violates.jsonl", STRICT, false, &[(rule::REQUEST_ID_UNIQUE, MUST)]),
    case("request-id-unique-passes.jsonl", STRICT, false, &[]),
    case("request-id-unique-violates-2.jsonl", STRICT, false, &[(rule::REQUEST_ID_UNIQUE, MUST)]),
    case("request-id-unique-passes-2.jsonl", STRICT, false, &[]),

    // request-id-reuse: after a response; after a timeout and cancel, with both sides and with
    // the client side only (the new request's response is not taken for the old one's).
    case("request-id-reuse-violates.jsonl", STRICT, false, &[(rule::REQUEST_ID_REUSE, POLICY)]),
    case("request-id-reuse-passes.jsonl", STRICT, true, &[]),
    case("request-id-reuse-violates-2.jsonl", STRICT, false, &[(rule::REQUEST_ID_REUSE, POLICY)]),
    case("request-id-reuse-passes-2.jsonl", STRICT, true, &[]),
    case("request-id-reuse-violates-3.jsonl", STRICT, false, &[(rule::REQUEST_ID_REUSE, POLICY)]),
    case("request-id-reuse-passes-3.jsonl", STRICT, true, &[]),

    // listen-ack-first: stdio with both sides, HTTP seen by the client. Passing on stdio with
    // another subscription's messages first.
    case("listen-ack-first-violates.jsonl", STRICT, false, &[(rule::LISTEN_ACK_FIRST, MUST)]),
    case("listen-ack-first-passes.jsonl", STRICT, true, &[]),
    case("listen-ack-first-violates-2.jsonl", STRICT, false, &[(rule::LISTEN_ACK_FIRST, MUST)]),
    case("listen-ack-first-passes-2.jsonl", STRICT, true, &[]),
    case("listen-ack-first-passes-3.jsonl", STRICT, true, &[]),

    // race-not-graceful: a stdio client drops the pipe on a late result that crossed its
    // timeout's cancel (and loses the other request in flight); an HTTP client closes its own
    // stream and calls the request lost; a crash explains the loss of a request on the old pipe
    // only, not of one sent after the reconnect (client side only). Passing: the late result
    // dropped quietly and the pipe closed to shut down once nothing is outstanding; lost after
    // the server crashed (stdio) or a proxy reset the stream (HTTP).
    case("race-not-graceful-violates.jsonl", STRICT, false, &[(rule::RACE_NOT_GRACEFUL, MUST)]),
    case("race-not-graceful-violates.jsonl", LENIENT, false, &[(rule::RACE_NOT_GRACEFUL, MUST)]),
    case("race-not-graceful-passes.jsonl", STRICT, true, &[]),
    case("race-not-graceful-violates-2.jsonl", STRICT, false, &[(rule::RACE_NOT_GRACEFUL, MUST)]),
    // The client closes its own stream and tells the application "lost" in one millisecond:
    // it gave the request up itself, no race.
    case("race-not-graceful-passes-5.jsonl", STRICT, false, &[]),
    case("race-not-graceful-passes-2.jsonl", STRICT, true, &[]),
    case("race-not-graceful-passes-3.jsonl", STRICT, true, &[]),
    case("race-not-graceful-violates-3.jsonl", STRICT, false, &[(rule::RACE_NOT_GRACEFUL, MUST)]),
    // Seen from the server (a real client against `mcp-sim serve`): the client drops the pipe
    // right after a late result, with another call still running; or it goes on.
    case("race-not-graceful-violates-4.jsonl", STRICT, false, &[(rule::RACE_NOT_GRACEFUL, MUST), (rule::RESPONSE_AFTER_CANCEL, MUST)]),
    case("race-not-graceful-passes-4.jsonl", LENIENT, false, &[(rule::RESPONSE_AFTER_CANCEL, SHOULD)]),

    // http-request-headers: Mcp-Method differs from the body (both sides; the server refuses it
    // properly); Accept without text/event-stream (the server's side only). http-status: a
    // mismatched request served anyway; -32601 with 400 (the client's side only); a
    // notification accepted with 200. Passes: right headers answered as JSON; 404, 202.
    case("http-request-headers-violates.jsonl", STRICT, false, &[(rule::HTTP_REQUEST_HEADERS, MUST)]),
    case("http-request-headers-violates-2.jsonl", STRICT, false, &[(rule::HTTP_REQUEST_HEADERS, MUST)]),
    case("http-request-headers-passes.jsonl", STRICT, false, &[]),
    case("http-status-violates.jsonl", STRICT, false, &[(rule::HTTP_REQUEST_HEADERS, MUST), (rule::HTTP_STATUS, MUST)]),
    case("http-status-violates-2.jsonl", STRICT, false, &[(rule::HTTP_STATUS, MUST)]),
    // (Their notification is a POSTed notifications/cancelled, the only one a 2026-07-28
    // client has, which that binding does not expect: cancel-over-http, policy.)
    case("http-status-violates-3.jsonl", STRICT, false, &[(rule::HTTP_STATUS, MUST), (rule::CANCEL_OVER_HTTP, POLICY)]),
    case("http-status-passes.jsonl", STRICT, false, &[(rule::CANCEL_OVER_HTTP, POLICY)]),
    // origin-validated: a loopback server serves a request with a foreign Origin; refuses it
    // with 400 where 2026-07-28 asks 403; refuses a foreign Origin with 403 and a foreign Host
    // with 421, and serves a browser client on another local port.
    case("origin-validated-violates.jsonl", STRICT, false, &[(rule::ORIGIN_VALIDATED, MUST)]),
    case("origin-validated-violates-2.jsonl", STRICT, false, &[(rule::ORIGIN_VALIDATED, MUST)]),
    case("origin-validated-passes.jsonl", STRICT, false, &[]),

    // declared-deadline, seen from the server: no cancel by the declared maximum (the server
    // works on and answers); the cancel only at the idle timeout, after a shorter maximum;
    // HTTP, the stream closed long after the idle timeout. Passes: the cancel at the maximum;
    // HTTP, the stream closed at the idle timeout.
    case("declared-deadline-violates.jsonl", STRICT, false, &[(rule::DECLARED_DEADLINE, POLICY)]),
    case("declared-deadline-violates-2.jsonl", STRICT, false, &[(rule::DECLARED_DEADLINE, POLICY)]),
    case("declared-deadline-violates-3.jsonl", STRICT, false, &[(rule::DECLARED_DEADLINE, POLICY)]),
    case("declared-deadline-passes.jsonl", STRICT, false, &[]),
    case("declared-deadline-passes-2.jsonl", STRICT, false, &[]),

    // reset-needs-token: reset-on-progress without a progressToken (stdio, both sides; HTTP
    // seen by the client, where the timer then fires at the send's idle deadline). Passing: the
    // same request with a token; one without a policy.
    case("reset-needs-token-violates.jsonl", STRICT, false, &[(rule::RESET_NEEDS_TOKEN, POLICY)]),
    case("reset-needs-token-passes.jsonl", STRICT, true, &[]),
    case("reset-needs-token-passes-2.jsonl", STRICT, true, &[]),
    case("reset-needs-token-violates-2.jsonl", STRICT, false, &[(rule::RESET_NEEDS_TOKEN, POLICY)]),
    // Seen from the server's end (`serve --client-policy timeout=1500,reset,max=5000`, legacy
    // stdio): the declared reset is impossible for a call that asks for no progress; the same
    // call with a token passes, and `initialize`, under the same declared policy, is not judged.
    case("reset-needs-token-violates-3.jsonl", STRICT, true, &[(rule::RESET_NEEDS_TOKEN, POLICY)]),
    case("reset-needs-token-passes-3.jsonl", STRICT, true, &[]),
    // The same client's next call asks for progress under the same declared reset: SDKs set
    // timeout and reset per call, so the first call was made with other options.
    case("reset-needs-token-passes-4.jsonl", STRICT, true, &[]),

    // idle-stream-cut: a proxy's idle timeout cuts a silent stream before its response (both
    // sides; a black-box server whose progress stopped, the cut reported by proxy and client).
    // Passing: an idle cut after the response; a proxy reset without a reason.
    case("idle-stream-cut-violates.jsonl", STRICT, true, &[(rule::IDLE_STREAM_CUT, POLICY)]),
    case("idle-stream-cut-passes.jsonl", STRICT, true, &[]),
    case("idle-stream-cut-passes-2.jsonl", STRICT, true, &[]),
    case("idle-stream-cut-violates-2.jsonl", STRICT, true, &[(rule::IDLE_STREAM_CUT, POLICY)]),
    // The server side is recorded but never received the request: nothing it could keep alive.
    case("idle-stream-cut-passes-3.jsonl", STRICT, true, &[]),

    // wire-integrity: a stdio line read split in two, an SSE event read truncated, where the
    // server wrote valid messages. Passing: the same channel read intact; a line the server
    // itself wrote invalid (message-shape instead).
    case("wire-integrity-violates.jsonl", STRICT, true, &[(rule::WIRE_INTEGRITY, MUST)]),
    case("wire-integrity-passes.jsonl", STRICT, true, &[]),
    case("wire-integrity-passes-2.jsonl", STRICT, true, &[(rule::MESSAGE_SHAPE, MUST)]),
    case("wire-integrity-violates-2.jsonl", STRICT, true, &[(rule::WIRE_INTEGRITY, MUST)]),

    // task-not-negotiated: a task for a call that did not declare the extension (both sides);
    // for a prompts/get that did (black-box server). Passing: a declared tools/call.
    case("task-not-negotiated-violates.jsonl", STRICT, false, &[(rule::TASK_NOT_NEGOTIATED, MUST)]),
    case("task-not-negotiated-violates-2.jsonl", STRICT, false, &[(rule::TASK_NOT_NEGOTIATED, MUST)]),
    case("task-not-negotiated-passes.jsonl", STRICT, false, &[]),

    // task-ack: tasks/cancel answered with the task's fields (both sides); tasks/update the
    // same (black-box server). Passing: the empty ack, then the cancelled status on tasks/get.
    case("task-ack-violates.jsonl", STRICT, false, &[(rule::TASK_ACK, MUST)]),
    case("task-ack-violates-2.jsonl", STRICT, false, &[(rule::TASK_ACK, MUST)]),
    case("task-ack-passes.jsonl", STRICT, false, &[]),

    // task-terminal: completed, then working. Passing: working, completed, completed.
    case("task-terminal-violates.jsonl", STRICT, false, &[(rule::TASK_TERMINAL, MUST)]),
    case("task-terminal-passes.jsonl", STRICT, false, &[]),

    // task-unknown: a never-announced task answered as working; a task polled past its ttlMs
    // answered with a result. Passing: -32602 for both, a poll within the ttl answered.
    case("task-unknown-violates.jsonl", STRICT, false, &[(rule::TASK_UNKNOWN, MUST)]),
    case("task-unknown-violates-2.jsonl", STRICT, false, &[(rule::TASK_UNKNOWN, MUST)]),
    case("task-unknown-passes.jsonl", STRICT, false, &[]),

    // task-poll-interval: polls 200 ms apart against a 2000 ms interval. Passing: 2100 ms.
    case("task-poll-interval-violates.jsonl", STRICT, false, &[(rule::TASK_POLL_INTERVAL, SHOULD)]),
    case("task-poll-interval-passes.jsonl", STRICT, false, &[]),

    // task-cancelled-unasked: a stream closed, the task reports cancelled with no tasks/cancel.
    // Passing: tasks/cancel first.
    case("task-cancelled-unasked-violates.jsonl", STRICT, false, &[(rule::TASK_CANCELLED_UNASKED, SHOULD)]),
    case("task-cancelled-unasked-passes.jsonl", STRICT, false, &[]),

    // task-work-after-cancelled: backend work 3 s after the task reported cancelled. Passing:
    // the resource released at the cancel.
    case("task-work-after-cancelled-violates.jsonl", STRICT, false, &[(rule::TASK_WORK_AFTER_CANCELLED, SHOULD)]),
    case("task-work-after-cancelled-passes.jsonl", STRICT, false, &[]),

    // cancel-targets-task: notifications/cancelled for the call that became a task, and for
    // the task's id. Passing: a cancel that crossed the CreateTaskResult, then tasks/cancel.
    case("cancel-targets-task-violates.jsonl", STRICT, false, &[(rule::CANCEL_TARGETS_TASK, MUST)]),
    case("cancel-targets-task-violates-2.jsonl", STRICT, false, &[(rule::CANCEL_TARGETS_TASK, MUST)]),
    case("cancel-targets-task-passes.jsonl", STRICT, false, &[]),

    // input-required-shape: neither inputRequests nor requestState (both sides); on tools/list
    // (black-box server). Passing: inputRequests alone.
    case("input-required-shape-violates.jsonl", STRICT, false, &[(rule::INPUT_REQUIRED_SHAPE, MUST)]),
    case("input-required-shape-violates-2.jsonl", STRICT, false, &[(rule::INPUT_REQUIRED_SHAPE, MUST)]),
    case("input-required-shape-passes.jsonl", STRICT, false, &[]),

    // input-required-retry: the state left out; the original id reused (also an id reuse);
    // the state changed. Passing: the state echoed, and a lost retry sent again with it; no
    // state given and none sent.
    case("input-required-retry-violates.jsonl", STRICT, false, &[(rule::INPUT_REQUIRED_RETRY, MUST)]),
    case("input-required-retry-violates-2.jsonl", STRICT, false, &[(rule::INPUT_REQUIRED_RETRY, MUST), (rule::REQUEST_ID_REUSE, POLICY)]),
    case("input-required-retry-violates-3.jsonl", STRICT, false, &[(rule::INPUT_REQUIRED_RETRY, MUST)]),
    case("input-required-retry-passes.jsonl", STRICT, false, &[]),
    case("input-required-retry-passes-2.jsonl", STRICT, false, &[]),
    // Two identical calls answered input_required and retried in the other order, each retry
    // echoing its own round's state (without matching the round by its state, the second
    // retry is read as changing the latest round's).
    case("input-required-retry-passes-3.jsonl", STRICT, false, &[]),

    // progress-token-reuse: a finished request's token on a later one. Passing: a fresh one.
    case("progress-token-reuse-violates.jsonl", STRICT, false, &[(rule::PROGRESS_TOKEN_REUSE, POLICY)]),
    case("progress-token-reuse-passes.jsonl", STRICT, false, &[]),

    // error-code-reserved: -32002 (MUST NOT); the legacy -32010 (SHOULD NOT, black-box server).
    // Passing: -32602 for a missing resource.
    case("error-code-reserved-violates.jsonl", STRICT, false, &[(rule::ERROR_CODE_RESERVED, MUST)]),
    case("error-code-reserved-violates-2.jsonl", STRICT, false, &[(rule::ERROR_CODE_RESERVED, SHOULD)]),
    case("error-code-reserved-passes.jsonl", STRICT, false, &[]),

    // listen-tagged: an untagged list_changed (stdio); a wrong tag on the listen's own stream
    // (HTTP); an ending result without the tag. Passing: all tagged.
    case("listen-tagged-violates.jsonl", STRICT, false, &[(rule::LISTEN_TAGGED, MUST)]),
    case("listen-tagged-violates-2.jsonl", STRICT, false, &[(rule::LISTEN_TAGGED, MUST)]),
    case("listen-tagged-violates-3.jsonl", STRICT, false, &[(rule::LISTEN_TAGGED, MUST)]),
    case("listen-tagged-passes.jsonl", STRICT, false, &[]),

    // listen-filter: a type not asked for; notifications/message on the subscription; an
    // acknowledgement granting more than was asked. Passing: what was asked, a subscribed URI.
    case("listen-filter-violates.jsonl", STRICT, false, &[(rule::LISTEN_FILTER, MUST)]),
    case("listen-filter-violates-2.jsonl", STRICT, false, &[(rule::LISTEN_FILTER, MUST)]),
    case("listen-filter-violates-3.jsonl", STRICT, false, &[(rule::LISTEN_FILTER, MUST)]),
    case("listen-filter-passes.jsonl", STRICT, false, &[]),

    // listen-reopened: the pipe broke, the client went on without its subscription. Passing:
    // it re-opened it under a new id first.
    case("listen-reopened-violates.jsonl", STRICT, false, &[(rule::LISTEN_REOPENED, MUST)]),
    case("listen-reopened-passes.jsonl", STRICT, false, &[]),

    // response-after-cancel for a subscription (§9 G55, stdio): a tagged notification after the
    // server received the cancel of the listen.
    case("response-after-cancel-violates-7.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, MUST)]),
    // The result written in the millisecond the cancel was read: nothing causal orders the
    // two, so the recorded order decides (the result first is a crossing; the read first, an
    // answer to the cancel).
    case("response-after-cancel-passes-8.jsonl", STRICT, false, &[]),
    case("response-after-cancel-violates-8.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, MUST)]),

    // notification-answered (stdio): an id-less error after a cancel that crossed the result
    // (both sides); after a cancel, seen by the client alone. Passing: an unreadable line
    // answered with -32700 without an id (the line itself breaks message-shape), the cancel
    // with nothing.
    case("notification-answered-violates.jsonl", STRICT, false, &[(rule::NOTIFICATION_ANSWERED, MUST)]),
    case("notification-answered-violates-2.jsonl", STRICT, false, &[(rule::NOTIFICATION_ANSWERED, MUST)]),
    case("notification-answered-passes.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),

    // progress-after-completion after a CreateTaskResult (§9 H59): the call's token is over.
    case("progress-after-completion-violates-4.jsonl", STRICT, false, &[(rule::PROGRESS_AFTER_COMPLETION, MUST)]),

    // The intermediary rules, over two-hop traces (the client's end of the front hop, the
    // server's end of the upstream hop; ids and tokens rewritten by the intermediary).
    // cancel-forwarded: the upstream runs on after the client's cancel (stdio upstream:
    // MUST); an era bridge whose 2026-07-28 HTTP front closes the stream and whose legacy
    // upstream never hears of it (SHOULD in the legacy era); both forwarded.
    case("cancel-forwarded-violates.jsonl", STRICT, false, &[(rule::CANCEL_FORWARDED, MUST)]),
    case("cancel-forwarded-passes.jsonl", STRICT, false, &[]),
    case("cancel-forwarded-violates-2.jsonl", STRICT, false, &[(rule::CANCEL_FORWARDED, SHOULD)]),
    case("cancel-forwarded-passes-2.jsonl", STRICT, false, &[]),
    // An upstream that crashed while the request ran took it along: nothing is left to
    // cancel (without that exception, passes-3 is flagged); a crash before the request
    // reached the upstream excuses nothing.
    case("cancel-forwarded-passes-3.jsonl", STRICT, false, &[]),
    case("cancel-forwarded-violates-3.jsonl", STRICT, false, &[(rule::CANCEL_FORWARDED, MUST)]),
    // cancel-answered-locally: an error the upstream never sent (PyPI mcp-proxy's code 0);
    // the upstream's own result crossing the cancel.
    case("cancel-answered-locally-violates.jsonl", STRICT, false, &[(rule::CANCEL_ANSWERED_LOCALLY, MUST)]),
    case("cancel-answered-locally-passes.jsonl", STRICT, false, &[]),
    // late-result-forwarded: the upstream answers after it got the cancel (its own fault, on
    // the upstream hop) and the intermediary passes that on (also the front's fault), or
    // drops it.
    case("late-result-forwarded-violates.jsonl", STRICT, false, &[(rule::LATE_RESULT_FORWARDED, MUST), (rule::RESPONSE_AFTER_CANCEL, MUST)]),
    case("late-result-forwarded-passes.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, MUST)]),
    // progress-forwarded: progress dropped (a JSON-mode front), progress passed on with the
    // client's token.
    case("progress-forwarded-violates.jsonl", STRICT, false, &[(rule::PROGRESS_FORWARDED, SHOULD)]),
    case("progress-forwarded-passes.jsonl", STRICT, false, &[]),
    // request-id-mapping: two answers swapped; a cancel forwarded under the other call's
    // upstream id (so the cancelled call is not told either); both mapped right.
    case("request-id-mapping-violates.jsonl", STRICT, false, &[(rule::REQUEST_ID_MAPPING, MUST)]),
    case("request-id-mapping-violates-2.jsonl", STRICT, false, &[(rule::REQUEST_ID_MAPPING, MUST), (rule::CANCEL_FORWARDED, MUST)]),
    case("request-id-mapping-passes.jsonl", STRICT, false, &[]),
    // The upstream cancelled before the client cancelled: the intermediary's own doing, or a
    // cancel meant for another request, even with the client's cancel following within the
    // grace window.
    case("request-id-mapping-violates-3.jsonl", STRICT, false, &[(rule::REQUEST_ID_MAPPING, MUST)]),
    // cancel-unknown-request on the upstream hop, the front as evidence: the intermediary
    // cancelled a call 1.5 s after it passed the call's answer on (the passing twin,
    // cancel-answered-locally-passes, relays a front cancel that crossed the answer).
    case("cancel-unknown-request-violates-6.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),
    // An upstream connection per request (`conn`), each numbering its requests from 1: the
    // client's cancel sent to the other call's child leaves its own call running and cancels
    // a call whose client still waits; sent to the right child, nothing is wrong.
    case("cancel-forwarded-violates-4.jsonl", STRICT, false, &[(rule::CANCEL_FORWARDED, MUST), (rule::REQUEST_ID_MAPPING, MUST)]),
    case("cancel-forwarded-passes-4.jsonl", STRICT, false, &[]),
    // The client's cancel closes the input of the child doing the work (a stateless gateway
    // that starts a process per request): the connection's end ends the request.
    case("cancel-forwarded-passes-5.jsonl", STRICT, false, &[]),
    // A 2026-07-28 HTTP upstream told by a POSTed notifications/cancelled while the call's
    // stream stays open: the stream's close is the cancel, so the call was never cancelled
    // (and the reference upstream, working on, is not at fault).
    case("cancel-forwarded-violates-5.jsonl", STRICT, false, &[(rule::CANCEL_FORWARDED, SHOULD), (rule::CANCEL_OVER_HTTP, POLICY)]),
    // intermediary-timeout, with a documented 3 s timeout: the call cut at 1.5 s (then
    // cancelled upstream, as it should be); a call left 6 s without a word; cut at 3.05 s;
    // a 6 s call whose progress, passed on every 2 s, keeps it from ever being idle that long;
    // the same call whose first progress comes only after 5 s (idle past the timeout before
    // any progress could restart it). Without a documented timeout: an HTTP front stream
    // closed under a running call.
    timed("intermediary-timeout-violates.jsonl", 3000, &[(rule::INTERMEDIARY_TIMEOUT, SHOULD)]),
    timed("intermediary-timeout-violates-2.jsonl", 3000, &[(rule::INTERMEDIARY_TIMEOUT, SHOULD)]),
    case("intermediary-timeout-violates-3.jsonl", STRICT, false, &[(rule::INTERMEDIARY_TIMEOUT, SHOULD)]),
    timed("intermediary-timeout-violates-4.jsonl", 3000, &[(rule::INTERMEDIARY_TIMEOUT, SHOULD)]),
    timed("intermediary-timeout-passes.jsonl", 3000, &[]),
    timed("intermediary-timeout-passes-2.jsonl", 3000, &[]),
];

fn traces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("traces")
}

fn load(file: &str) -> Trace {
    let path = traces_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    Trace::from_jsonl(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn config(profile: Profile, complete: bool) -> OracleConfig {
    OracleConfig {
        profile,
        complete,
        ..OracleConfig::default()
    }
}

/// The settings `case` is judged with.
fn case_config(case: &Case) -> OracleConfig {
    OracleConfig {
        intermediary_timeout_ms: case.intermediary_timeout_ms,
        ..config(case.profile, case.complete)
    }
}

fn run(case: &Case) -> Verdict {
    oracle::check(&load(case.file), &case_config(case))
}

fn reported(report: &Verdict) -> BTreeSet<(&'static str, Level)> {
    report
        .violations
        .iter()
        .map(|v| (v.rule, v.level))
        .collect()
}

fn describe(case: &Case) -> String {
    format!(
        "{} ({:?}, complete: {})",
        case.file, case.profile, case.complete
    )
}

/// The trace files on disk, sorted.
fn trace_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(traces_dir())
        .expect("tests/traces exists")
        .map(|e| {
            e.expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    files.sort();
    files
}

/// Splits `<rule>-violates[-N].jsonl` or `<rule>-passes[-N].jsonl` into the rule and whether
/// the file violates it.
fn parse_name(file: &str) -> Option<(&str, bool)> {
    let stem = file.strip_suffix(".jsonl")?;
    let numbered = |rest: &str| {
        rest.is_empty()
            || rest
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    for (marker, violates) in [("-violates", true), ("-passes", false)] {
        if let Some(at) = stem.rfind(marker) {
            if numbered(&stem[at + marker.len()..]) {
                return Some((&stem[..at], violates));
            }
        }
    }
    None
}

#[test]
fn every_case_reports_exactly_its_expected_rules() {
    let mut failures = Vec::new();
    for case in CASES {
        let report = run(case);
        let got = reported(&report);
        let want: BTreeSet<(&str, Level)> = case.expect.iter().copied().collect();
        if got != want {
            let lines: Vec<String> = report
                .violations
                .iter()
                .map(|v| format!("    {v}"))
                .collect();
            failures.push(format!(
                "{}: expected {want:?}, got {got:?}\n{}",
                describe(case),
                lines.join("\n")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A rule that no trace can make fail is a defect: each rule of the modern era has a
/// `-violates` file that triggers it under the settings the table gives that file (the legacy
/// era's are checked over `tests/traces/legacy/` below).
#[test]
fn every_rule_has_a_violating_trace_that_triggers_it() {
    let files = trace_files();
    let mut missing = Vec::new();
    for info in RULES.iter().filter(|r| r.modern.is_some()) {
        let violating: Vec<&String> = files
            .iter()
            .filter(|f| parse_name(f) == Some((info.name, true)))
            .collect();
        if violating.is_empty() {
            missing.push(format!(
                "{}: no {}-violates*.jsonl file",
                info.name, info.name
            ));
            continue;
        }
        let triggered = CASES
            .iter()
            .filter(|c| violating.iter().any(|f| f.as_str() == c.file))
            .any(|c| run(c).violates(info.name));
        if !triggered {
            missing.push(format!("{}: none of {violating:?} triggers it", info.name));
        }
    }
    assert!(
        missing.is_empty(),
        "rules no trace can break:\n{}",
        missing.join("\n")
    );
}

/// Each rule also has a near-identical `-passes` file whose report does not name it.
#[test]
fn every_rule_has_a_passing_trace() {
    let mut missing = Vec::new();
    for info in RULES.iter().filter(|r| r.modern.is_some()) {
        let passing: Vec<&Case> = CASES
            .iter()
            .filter(|c| parse_name(c.file) == Some((info.name, false)))
            .collect();
        if passing.is_empty() {
            missing.push(format!(
                "{}: no {}-passes*.jsonl case",
                info.name, info.name
            ));
        }
        for case in passing {
            if run(case).violates(info.name) {
                missing.push(format!("{}: {} breaks it", info.name, describe(case)));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The table and `tests/traces/` agree: every file is checked, every case's file exists and is
/// named after a rule of the catalog, and a `-violates` file is checked at least once with its
/// own rule expected.
#[test]
fn table_and_trace_directory_agree() {
    let files = trace_files();
    let mut problems = Vec::new();
    for file in &files {
        if !CASES.iter().any(|c| c.file == file) {
            problems.push(format!("{file} is not in CASES"));
        }
    }
    for case in CASES {
        if !files.iter().any(|f| f == case.file) {
            problems.push(format!("{} does not exist", case.file));
        }
        match parse_name(case.file) {
            Some((name, violates)) => {
                if oracle::rule_info(name).is_none() {
                    problems.push(format!("{}: {name} is not a rule", case.file));
                }
                let expects_own = case.expect.iter().any(|(r, _)| *r == name);
                if !violates && expects_own {
                    problems.push(format!(
                        "{}: a passing file expects its own rule",
                        describe(case)
                    ));
                }
                let own_expected_somewhere = CASES
                    .iter()
                    .any(|c| c.file == case.file && c.expect.iter().any(|(r, _)| *r == name));
                if violates && !own_expected_somewhere {
                    problems.push(format!("{}: never expected to break {name}", case.file));
                }
            }
            None => problems.push(format!(
                "{}: not named <rule>-violates[-N] or <rule>-passes[-N]",
                case.file
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A result and a cancellation cross on the wire. On stdio the server writes the result before
/// it reads the cancel, and the client drops the late result quietly; on HTTP the client closes
/// the stream while the result is in flight. Neither side is at fault, under either profile,
/// and the run is complete: the application was told `cancelled` and nothing else.
#[test]
fn graceful_crossing_passes_on_both_transports() {
    let kinds = |trace: &Trace, side: Side| -> Vec<String> {
        trace
            .events
            .iter()
            .filter(|e| e.side == side)
            .map(|e| match &e.kind {
                EventKind::Send(w) | EventKind::Recv(w) => {
                    let dir = if matches!(e.kind, EventKind::Send(_)) {
                        "send"
                    } else {
                        "recv"
                    };
                    let msg = w.msg.as_ref().expect("crossing traces hold JSON");
                    let what = if msg.get("result").is_some() {
                        "result".to_owned()
                    } else {
                        msg["method"].as_str().unwrap_or("?").to_owned()
                    };
                    format!("{dir} {what}")
                }
                EventKind::Close { .. } => "close".into(),
                EventKind::Outcome { outcome, .. } => format!("outcome {}", outcome.as_str()),
                EventKind::Status { .. } => "status".into(),
                other => format!("{other:?}"),
            })
            .collect()
    };

    let stdio = load("response-after-cancel-passes.jsonl");
    assert_eq!(
        kinds(&stdio, Side::Server),
        [
            "recv tools/call",
            "send result",
            "recv notifications/cancelled"
        ]
    );
    assert_eq!(
        kinds(&stdio, Side::Client),
        [
            "send tools/call",
            "outcome cancelled",
            "send notifications/cancelled",
            "recv result"
        ]
    );

    let http = load("disconnect-is-cancel-passes.jsonl");
    assert_eq!(
        kinds(&http, Side::Server),
        ["recv tools/call", "status", "send result", "close"]
    );
    assert_eq!(
        kinds(&http, Side::Client),
        ["send tools/call", "status", "outcome cancelled", "close"]
    );

    for file in [
        "response-after-cancel-passes.jsonl",
        "response-after-cancel-passes-2.jsonl",
        "disconnect-is-cancel-passes.jsonl",
        "disconnect-is-cancel-passes-2.jsonl",
    ] {
        for profile in [STRICT, LENIENT] {
            let report = oracle::check(&load(file), &config(profile, true));
            assert!(report.is_clean(), "{file} ({profile:?}):\n{report:?}");
        }
    }
}

#[test]
fn from_jsonl_rejects_bad_input_with_its_line_number() {
    const REQ: &str = r#"{"t":0,"side":"client","kind":"send","transport":"stdio","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow_op","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}}"#;
    let cases: &[(&str, String, usize, &str)] = &[
        ("bad JSON", format!("{REQ}\n{{\"t\":5,\"side\":\"client\",\n"), 2, ""),
        ("unknown kind", format!("{REQ}\n\n{{\"t\":5,\"side\":\"client\",\"kind\":\"sleep\"}}\n"), 3, "sleep"),
        (
            "t going backwards",
            format!("{REQ}\n{{\"t\":50,\"side\":\"client\",\"kind\":\"outcome\",\"request\":1,\"outcome\":\"result\"}}\n{{\"t\":40,\"side\":\"server\",\"kind\":\"release\",\"request\":1}}\n"),
            3,
            "back in time",
        ),
        (
            "send without msg or raw",
            format!("{REQ}\n{{\"t\":5,\"side\":\"server\",\"kind\":\"send\",\"transport\":\"stdio\"}}\n"),
            2,
            "msg or raw",
        ),
        ("negative t", "{\"t\":-1,\"side\":\"client\",\"kind\":\"comment\"}\n".into(), 1, "non-negative"),
        ("unknown side", "{\"t\":1,\"side\":\"browser\",\"kind\":\"comment\"}\n".into(), 1, "browser"),
    ];
    for (what, text, line, needle) in cases {
        let err = Trace::from_jsonl(text).expect_err(what);
        assert_eq!(err.line, *line, "{what}: {err}");
        assert!(err.message.contains(needle), "{what}: {err}");
    }
}

#[test]
fn from_jsonl_accepts_missing_sides_and_unknown_members() {
    // Client side only, blank lines, and members this version does not know, at the top level
    // and inside `policy`.
    let text = concat!(
        r#"{"t":0,"side":"client","kind":"send","transport":"stdio","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow_op","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}},"policy":{"timeout_ms":1000,"jitter_ms":5},"recorded_by":"wireshark"}"#,
        "\n\n",
        r#"{"t":12.5,"side":"client","kind":"recv","transport":"stdio","raw":"Server started","note":"banner"}"#,
        "\n",
        r#"{"t":40,"side":"client","kind":"recv","transport":"stdio","msg":{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}},"latency_ms":3}"#,
        "\n",
        r#"{"t":40,"side":"client","kind":"outcome","request":1,"outcome":"result","app":"cli"}"#,
        "\n",
    );
    let trace = Trace::from_jsonl(text).expect("accepted");
    assert_eq!(trace.events.len(), 4);
    assert!(trace.events.iter().all(|e| e.side == Side::Client));
    assert_eq!(trace.events[1].t, 12);
    // The banner line is the only problem the oracle sees.
    let report = oracle::check(&trace, &config(STRICT, true));
    assert_eq!(
        reported(&report),
        BTreeSet::from([(rule::MESSAGE_SHAPE, MUST)]),
        "{report:?}"
    );

    // Server and backend only.
    let text = concat!(
        r#"{"t":1,"side":"server","kind":"recv","transport":"http","stream":1,"msg":{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"slow_op","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}}"#,
        "\n",
        r#"{"t":2,"side":"backend","kind":"work","request":"a","lock":"db"}"#,
        "\n",
        r#"{"t":3,"side":"backend","kind":"release","request":"a"}"#,
        "\n",
        r#"{"t":4,"side":"server","kind":"send","transport":"http","stream":1,"msg":{"jsonrpc":"2.0","id":"a","result":{"resultType":"complete","content":[]}}}"#,
        "\n",
    );
    let trace = Trace::from_jsonl(text).expect("accepted");
    assert_eq!(trace.events.len(), 4);
    assert!(oracle::check(&trace, &config(STRICT, true)).is_clean());
}

/// A message holding serde_json's raw-value member name reads back as written (members in
/// the order the trace writer sorts them; serde_json's
/// own `Value` would read `{"$serde_json::private::RawValue":"1"}` as the number 1).
#[test]
fn from_jsonl_keeps_the_raw_value_member_name() {
    let text = concat!(
        r#"{"t":1,"side":"client","kind":"recv","transport":"stdio","msg":{"id":1,"jsonrpc":"2.0","result":{"content":[{"$serde_json::private::RawValue":"1"}]}}}"#,
        "\n",
    );
    let trace = Trace::from_jsonl(text).expect("accepted");
    assert_eq!(trace.to_jsonl(), text);
    let EventKind::Recv(w) = &trace.events[0].kind else {
        panic!("a receipt")
    };
    let msg = w.msg.as_ref().expect("a message");
    assert_eq!(
        msg["result"]["content"][0],
        serde_json::json!({"$serde_json::private::RawValue": "1"})
    );
    // A request id is a string or an integer, never an object, whatever its member's name.
    let bad = r#"{"t":1,"side":"client","kind":"outcome","request":{"$serde_json::private::RawValue":"1"},"outcome":"result"}"#;
    let err = Trace::from_jsonl(bad).expect_err("an object is no request id");
    assert_eq!(err.line, 1, "{err}");
}

/// The legacy era's cases: the traces of `tests/traces/legacy/`, each judged by the era it
/// speaks (its `initialize` exchange says legacy 2025-11-25).
#[rustfmt::skip]
const LEGACY_CASES: &[Case] = &[
    // message-shape: a correct exchange (initialize, initialized, a call with a progress token,
    // progress, a server's ping answered by the client, a cancel) passes; a legacy request with
    // the modern _meta keys, and a server that sends initialize, break it.
    case("message-shape-passes.jsonl", STRICT, false, &[]),
    case("message-shape-violates.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    case("message-shape-violates-2.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    // A dual-era client's modern probe (server/discover, refused) before it falls back to the
    // handshake: the trace is legacy from the handshake on (2025-06-18), and the probe breaks
    // no legacy rule.
    case("message-shape-passes-2.jsonl", STRICT, true, &[]),
    // The probe ignored by a silent legacy server, cancelled, and an initialize never
    // answered (seed 10 of the in-memory legacy stdio sweep): the probe does not make the
    // trace modern, so the handshake is no modern request without _meta.
    case("message-shape-passes-5.jsonl", STRICT, false, &[]),
    // 2025-03-26 batches: a batch of two calls, their progress and their results, each
    // member judged on its own (passes); the same batch in 2025-06-18, which removed them;
    // an empty batch; a batch whose cancel names a request never sent, reported at the batch.
    case("message-shape-passes-3.jsonl", STRICT, true, &[]),
    case("message-shape-violates-3.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    case("message-shape-violates-4.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    case("cancel-unknown-request-violates-4.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),
    // HTTP: a 404's text body (rmcp's "Not Found: Session not found") is no message in this
    // era, which asks no JSON-RPC body of a refused session; a text body on a 200 is one, and
    // not a valid one.
    case("message-shape-passes-4.jsonl", STRICT, false, &[]),
    case("message-shape-violates-5.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    // initialize-first: a result without serverInfo; a request first after the pipe broke.
    case("initialize-first-violates.jsonl", STRICT, false, &[(rule::INITIALIZE_FIRST, MUST)]),
    case("initialize-first-violates-2.jsonl", STRICT, false, &[(rule::INITIALIZE_FIRST, MUST)]),
    case("initialize-first-passes.jsonl", STRICT, false, &[]),
    // request-before-initialized: tools/list before the result; a ping before it is fine.
    case("request-before-initialized-violates.jsonl", STRICT, false, &[(rule::REQUEST_BEFORE_INITIALIZED, SHOULD)]),
    case("request-before-initialized-passes.jsonl", STRICT, false, &[]),
    // discover-timeout: an auto-mode client that falls back to initialize only 20 s after its
    // unanswered server/discover; passing: it cancels the probe and falls back at 10 s.
    case("discover-timeout-violates.jsonl", STRICT, false, &[(rule::DISCOVER_TIMEOUT, SHOULD)]),
    case("discover-timeout-passes.jsonl", STRICT, false, &[]),
    // initialize-cancelled: a timed-out handshake cancelled; closing the connection instead.
    case("initialize-cancelled-violates.jsonl", STRICT, false, &[(rule::INITIALIZE_CANCELLED, MUST)]),
    case("initialize-cancelled-passes.jsonl", STRICT, false, &[]),
    // ping-answered: the client answers the server's ping with an error; a complete run
    // leaves the client's ping unanswered; both answered with {}.
    case("ping-answered-violates.jsonl", STRICT, false, &[(rule::PING_ANSWERED, MUST)]),
    // In a trace not complete, the evidence that a ping was read and dropped: the server read
    // it, then read three calls and answered them (both ends recorded); the probe's end of a
    // stdio pipe on which the calls written after the ping were answered. Over HTTP the later
    // calls travel apart from the ping, so the client's end alone proves nothing; and a server
    // that answered only what it read before the ping is still at work on it.
    case("ping-answered-violates-3.jsonl", STRICT, false, &[(rule::PING_ANSWERED, MUST)]),
    case("ping-answered-violates-4.jsonl", STRICT, false, &[(rule::PING_ANSWERED, MUST)]),
    case("ping-answered-passes-2.jsonl", STRICT, false, &[]),
    case("ping-answered-passes-3.jsonl", STRICT, false, &[]),
    case("ping-answered-violates-2.jsonl", STRICT, true, &[(rule::PING_ANSWERED, MUST)]),
    case("ping-answered-passes.jsonl", STRICT, true, &[]),
    // The server's end alone (`serve`): a client that goes on calling seconds after the
    // server's ping left, never answering it; the same client answering it first; a call
    // that crossed the ping (within the grace window) proves nothing.
    case("ping-answered-violates-5.jsonl", STRICT, false, &[(rule::PING_ANSWERED, MUST)]),
    case("ping-answered-passes-4.jsonl", STRICT, false, &[]),
    case("ping-answered-passes-5.jsonl", STRICT, false, &[]),
    // response-after-cancel: a SHOULD in this era (LC10), under either profile.
    case("response-after-cancel-violates.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, SHOULD)]),
    case("response-after-cancel-passes.jsonl", STRICT, false, &[]),
    // cancel-on-timeout: no notification on stdio; on HTTP closing the stream alone is not a
    // cancel (and the server that goes on after it breaks nothing: a disconnect is not a
    // cancel here); the notification POSTed, answered 202, is.
    case("cancel-on-timeout-violates.jsonl", STRICT, false, &[(rule::CANCEL_ON_TIMEOUT, SHOULD)]),
    case("cancel-on-timeout-violates-2.jsonl", STRICT, false, &[(rule::CANCEL_ON_TIMEOUT, SHOULD)]),
    case("cancel-on-timeout-passes.jsonl", STRICT, false, &[]),
    // An auto-mode client's server/discover probe is a modern request in this trace too: over
    // HTTP, closing its stream when it times out is its cancel (passes, seed 2541 of the
    // in-memory legacy sweep); the same trace without the close breaks the rule.
    case("cancel-on-timeout-passes-2.jsonl", STRICT, false, &[]),
    case("cancel-on-timeout-violates-3.jsonl", STRICT, false, &[(rule::CANCEL_ON_TIMEOUT, SHOULD)]),
    // progress-token-type: a boolean progressToken on a legacy tools/call.
    case("progress-token-type-violates.jsonl", STRICT, false, &[(rule::PROGRESS_TOKEN_TYPE, MUST)]),
    // progress-token-type: a string token (the call refused with -32602 for another reason).
    case("progress-token-type-passes.jsonl", STRICT, true, &[]),
    // progress-token-unique: a second call carries the token of a call still outstanding.
    case("progress-token-unique-violates.jsonl", STRICT, false, &[(rule::PROGRESS_TOKEN_UNIQUE, MUST)]),
    // progress-token-unique: the token reused only after the first call ended (legal; policy reuse).
    case("progress-token-unique-passes.jsonl", STRICT, true, &[(rule::PROGRESS_TOKEN_REUSE, POLICY)]),
    // progress-unknown-token: progress for a token no request carried.
    case("progress-unknown-token-violates.jsonl", STRICT, false, &[(rule::PROGRESS_UNKNOWN_TOKEN, MUST)]),
    // progress-unknown-token: progress for the call's own token.
    case("progress-unknown-token-passes.jsonl", STRICT, true, &[]),
    // progress-monotonic: the same progress value twice (strict profile).
    case("progress-monotonic-violates.jsonl", STRICT, false, &[(rule::PROGRESS_MONOTONIC, MUST)]),
    // progress-monotonic: 1, 2, 2.5: strictly increasing.
    case("progress-monotonic-passes.jsonl", STRICT, true, &[]),
    // progress-after-completion: progress after the call's result (stdio).
    case("progress-after-completion-violates.jsonl", STRICT, false, &[(rule::PROGRESS_AFTER_COMPLETION, MUST)]),
    // progress-after-completion: the last progress before the result.
    case("progress-after-completion-passes.jsonl", STRICT, true, &[]),
    // duplicate-response: a result, then an error, for the same call.
    case("duplicate-response-violates.jsonl", STRICT, false, &[(rule::DUPLICATE_RESPONSE, MUST)]),
    // duplicate-response: one result.
    case("duplicate-response-passes.jsonl", STRICT, true, &[]),
    // cancel-unknown-request: notifications/cancelled for an id the client never sent.
    case("cancel-unknown-request-violates.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),
    // cancel-unknown-request: the cancel of a call in progress.
    case("cancel-unknown-request-passes.jsonl", STRICT, true, &[]),
    // timeout-maximum: no policy, answered after the 30-minute host ceiling (client side only).
    case("timeout-maximum-violates.jsonl", STRICT, false, &[(rule::TIMEOUT_MAXIMUM, SHOULD)]),
    // timeout-maximum: answered within the ceiling.
    case("timeout-maximum-passes.jsonl", STRICT, true, &[]),
    // timeout-deadline: the idle timer fired at 500 ms against a 1000 ms policy.
    case("timeout-deadline-violates.jsonl", STRICT, false, &[(rule::TIMEOUT_DEADLINE, POLICY)]),
    // timeout-deadline: fired at 1000 ms, cancelled with the notification.
    case("timeout-deadline-passes.jsonl", STRICT, true, &[]),
    // timeout-deadline (HTTP, memory lane seed 20): a proxy reset breaks the call's stream,
    // the client resumes it with Last-Event-ID, and the progress on the resumed stream keeps
    // resetting the idle timer until the result.
    case("timeout-deadline-passes-2.jsonl", STRICT, true, &[]),
    // timeout-deadline (memory lane seed 1697): the reset comes before the first progress, so
    // the resume starts from the stream's priming event id; its progress counts as well.
    case("timeout-deadline-passes-3.jsonl", STRICT, true, &[]),
    // declared-deadline (server side only): progress kept coming past the declared 2000 ms maximum, no cancel.
    case("declared-deadline-violates.jsonl", STRICT, false, &[(rule::DECLARED_DEADLINE, POLICY)]),
    // declared-deadline: the cancel notification reached the server at the declared maximum.
    case("declared-deadline-passes.jsonl", STRICT, false, &[]),
    // late-response-delivered: a result that crossed the timeout's cancel handed to the application.
    case("late-response-delivered-violates.jsonl", STRICT, false, &[(rule::LATE_RESPONSE_DELIVERED, SHOULD)]),
    // late-response-delivered: the crossing result dropped; the outcome stays timed_out.
    case("late-response-delivered-passes.jsonl", STRICT, true, &[]),
    // work-after-cancel: backend work 1.4 s after the server received the cancel notification.
    case("work-after-cancel-violates.jsonl", STRICT, false, &[(rule::WORK_AFTER_CANCEL, SHOULD)]),
    // work-after-cancel: the last work within the grace window, then released.
    case("work-after-cancel-passes.jsonl", STRICT, true, &[]),
    // resource-leak: backend work, a result, the resource never released.
    case("resource-leak-violates.jsonl", STRICT, false, &[(rule::RESOURCE_LEAK, SHOULD)]),
    // resource-leak: released before the result.
    case("resource-leak-passes.jsonl", STRICT, true, &[]),
    // single-outcome: result, then lost when the server closed the pipe.
    case("single-outcome-violates.jsonl", STRICT, false, &[(rule::SINGLE_OUTCOME, POLICY)]),
    // single-outcome: one outcome per request (initialize included), then the pipe closes.
    case("single-outcome-passes.jsonl", STRICT, true, &[]),
    // request-id-unique: resources/read sent under the id of a tools/call still outstanding.
    case("request-id-unique-violates.jsonl", STRICT, false, &[(rule::REQUEST_ID_UNIQUE, MUST)]),
    // request-id-unique: the two requests under ids 1 and 2 (the handshake used 0).
    case("request-id-unique-passes.jsonl", STRICT, false, &[]),
    // request-id-reuse: id 1 reused after its first call was answered.
    case("request-id-reuse-violates.jsonl", STRICT, false, &[(rule::REQUEST_ID_REUSE, POLICY)]),
    // request-id-reuse: a fresh id for the second call.
    case("request-id-reuse-passes.jsonl", STRICT, true, &[]),
    // race-not-graceful: the client drops the pipe on a late result that crossed its cancel, losing call 2.
    case("race-not-graceful-violates.jsonl", STRICT, false, &[(rule::RACE_NOT_GRACEFUL, MUST)]),
    // race-not-graceful: the late result dropped quietly; the pipe closed once nothing is outstanding.
    case("race-not-graceful-passes.jsonl", STRICT, true, &[]),
    // A legacy HTTP stream the server closed, and the call the client gave up as lost at the
    // same millisecond: the close explains the outcome in either order of the two lines.
    // origin-validated in the legacy era: an initialize with a foreign Host served (a session
    // issued); a foreign Origin refused with 400 and a foreign Host with 403 (any refusal).
    case("origin-validated-violates.jsonl", STRICT, false, &[(rule::ORIGIN_VALIDATED, MUST)]),
    case("origin-validated-passes.jsonl", STRICT, false, &[]),
    case("race-not-graceful-passes-5.jsonl", STRICT, false, &[]),
    case("race-not-graceful-passes-6.jsonl", STRICT, false, &[]),
    // reset-needs-token: reset-on-progress policy on a call without a progressToken.
    case("reset-needs-token-violates.jsonl", STRICT, false, &[(rule::RESET_NEEDS_TOKEN, POLICY)]),
    // reset-needs-token: the same call with a token, and progress for it.
    case("reset-needs-token-passes.jsonl", STRICT, true, &[]),
    // idle-stream-cut (HTTP): a proxy's 60 s idle timeout cuts the silent POST stream before the response.
    // The client gives the cut request up without resuming it from the priming event.
    case("idle-stream-cut-violates.jsonl", STRICT, true, &[(rule::IDLE_STREAM_CUT, POLICY), (rule::RESUME_BROKEN_STREAM, SHOULD)]),
    // idle-stream-cut (HTTP): the idle cut comes only after the response.
    case("idle-stream-cut-passes.jsonl", STRICT, true, &[]),
    // notification-answered: the server answers a cancel (crossing the result) with an id-less error.
    case("notification-answered-violates.jsonl", STRICT, false, &[(rule::NOTIFICATION_ANSWERED, MUST)]),
    // notification-answered: only an unreadable line gets an id-less -32700 (the line itself breaks message-shape); the cancel gets nothing.
    case("notification-answered-passes.jsonl", STRICT, false, &[(rule::MESSAGE_SHAPE, MUST)]),
    // progress-token-reuse: a finished call's token on the next call.
    case("progress-token-reuse-violates.jsonl", STRICT, false, &[(rule::PROGRESS_TOKEN_REUSE, POLICY)]),
    // progress-token-reuse: a fresh token for the next call.
    case("progress-token-reuse-passes.jsonl", STRICT, false, &[]),
    // wire-integrity: a progress line the server wrote whole is read split in two.
    case("wire-integrity-violates.jsonl", STRICT, true, &[(rule::WIRE_INTEGRITY, MUST)]),
    // wire-integrity: the same line read intact.
    case("wire-integrity-passes.jsonl", STRICT, true, &[]),
    // The legacy era's HTTP cancels and the server's own requests (found by converting the
    // modern traces): a cancel POSTed and then work, a result, progress after it; the client's
    // progress for a server request under an unknown token, after answering it, decreasing,
    // and a token shared by two outstanding server requests; a server's cancel of a request it
    // never sent or one already answered; a server id reused while outstanding.
    case("work-after-cancel-violates-2.jsonl", STRICT, false, &[(rule::WORK_AFTER_CANCEL, SHOULD)]),
    case("response-after-cancel-violates-2.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, SHOULD)]),
    case("response-after-cancel-violates-3.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, SHOULD)]),
    case("progress-unknown-token-violates-2.jsonl", STRICT, false, &[(rule::PROGRESS_UNKNOWN_TOKEN, MUST)]),
    case("progress-after-completion-violates-2.jsonl", STRICT, false, &[(rule::PROGRESS_AFTER_COMPLETION, MUST)]),
    case("progress-monotonic-violates-2.jsonl", STRICT, false, &[(rule::PROGRESS_MONOTONIC, MUST)]),
    case("progress-token-unique-violates-2.jsonl", STRICT, false, &[(rule::PROGRESS_TOKEN_UNIQUE, MUST)]),
    case("cancel-unknown-request-violates-2.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),
    case("cancel-unknown-request-violates-3.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),
    // The server's cancel of its own request crossing the client's answer on the wire (sent
    // before the answer reached it) is no fault.
    case("cancel-unknown-request-passes-3.jsonl", STRICT, false, &[]),
    // Its cancel replayed on the resumed stream after Last-Event-ID is the same cancel, not a
    // second one (seed 384 of the in-memory legacy HTTP sweep).
    case("cancel-unknown-request-passes-4.jsonl", STRICT, false, &[]),
    case("request-id-unique-violates-2.jsonl", STRICT, false, &[(rule::REQUEST_ID_UNIQUE, MUST)]),
    // session-id-sent: a request without the session's id; a request after a 404 before a new
    // initialize; passing: the id on every request, and a 404 followed by a new session.
    case("session-id-sent-violates.jsonl", STRICT, false, &[(rule::SESSION_ID_SENT, MUST)]),
    case("session-id-sent-violates-2.jsonl", STRICT, false, &[(rule::SESSION_ID_SENT, MUST)]),
    case("session-id-sent-passes.jsonl", STRICT, false, &[]),
    // protocol-version-header: another version; none at all; the negotiated one.
    case("protocol-version-header-violates.jsonl", STRICT, false, &[(rule::PROTOCOL_VERSION_HEADER, MUST)]),
    case("protocol-version-header-violates-2.jsonl", STRICT, false, &[(rule::PROTOCOL_VERSION_HEADER, MUST)]),
    case("protocol-version-header-passes.jsonl", STRICT, false, &[]),
    // progress-on-get-stream: a call's progress on the listening GET stream; on its POST's.
    case("progress-on-get-stream-violates.jsonl", STRICT, false, &[(rule::PROGRESS_ON_GET_STREAM, SHOULD)]),
    // progress-stream: a call's progress on the other call's POST stream; on its own.
    case("progress-stream-violates.jsonl", STRICT, false, &[(rule::PROGRESS_STREAM, SHOULD)]),
    case("progress-stream-passes.jsonl", STRICT, false, &[]),
    case("progress-on-get-stream-passes.jsonl", STRICT, false, &[]),
    // disconnect-taken-as-cancel: the backend releases the call as soon as its stream
    // closes; passing: the work goes on after the close and the result is written.
    case("disconnect-taken-as-cancel-violates.jsonl", STRICT, false, &[(rule::DISCONNECT_TAKEN_AS_CANCEL, SHOULD)]),
    case("disconnect-taken-as-cancel-passes.jsonl", STRICT, false, &[]),
    // event-id-unique: one id on two streams; per-stream ids.
    case("event-id-unique-violates.jsonl", STRICT, false, &[(rule::EVENT_ID_UNIQUE, MUST)]),
    case("event-id-unique-passes.jsonl", STRICT, false, &[]),
    // 2025-03-26 over HTTP: a batch of two calls answered by a batch of two results in one
    // SSE event with an id; the members share the event, not its id.
    case("event-id-unique-passes-2.jsonl", STRICT, true, &[]),
    // replay-other-stream: a resume of stream 3 replays stream 4's event, or stream 4's
    // request's response (which the client then holds twice); passing: stream 3's result.
    case("replay-other-stream-violates.jsonl", STRICT, false, &[(rule::REPLAY_OTHER_STREAM, MUST)]),
    case("replay-other-stream-violates-2.jsonl", STRICT, false, &[(rule::REPLAY_OTHER_STREAM, MUST), (rule::DUPLICATE_RESPONSE, MUST)]),
    case("replay-other-stream-passes.jsonl", STRICT, false, &[]),
    // A resume of stream 4 carries request 1's result (stream 3's): the client does not take
    // it there, times request 1 out and cancels it. Only the server's replay is a fault, not
    // the client's cancel (server-everything 2026.8.31 replays every stream's events on a
    // resume; the probe's client then cancelled, and was once named cancel-unknown-request).
    case("replay-other-stream-violates-3.jsonl", STRICT, false, &[(rule::REPLAY_OTHER_STREAM, MUST)]),
    // replay-exactly-once: the Last-Event-ID event itself replayed; an event replayed twice.
    case("replay-exactly-once-violates.jsonl", STRICT, false, &[(rule::REPLAY_EXACTLY_ONCE, MUST)]),
    case("replay-exactly-once-violates-2.jsonl", STRICT, false, &[(rule::REPLAY_EXACTLY_ONCE, MUST)]),
    case("replay-exactly-once-passes.jsonl", STRICT, false, &[]),
    // retry-honoured: a resume 400 ms after the break under retry 1000 ms; 1100 ms after it.
    case("retry-honoured-violates.jsonl", STRICT, false, &[(rule::RETRY_HONOURED, MUST)]),
    case("retry-honoured-passes.jsonl", STRICT, false, &[]),
    // priming-event: an SSE response whose first event is progress; one that primes first.
    case("priming-event-violates.jsonl", STRICT, false, &[(rule::PRIMING_EVENT, SHOULD)]),
    case("priming-event-passes.jsonl", STRICT, false, &[]),
    // resume-broken-stream: a stream broken after an event id, the request given up without a
    // resume; the same break resumed from that id and answered.
    case("resume-broken-stream-violates.jsonl", STRICT, false, &[(rule::RESUME_BROKEN_STREAM, SHOULD)]),
    case("resume-broken-stream-passes.jsonl", STRICT, false, &[]),
    // cancel-targets-task (2025-11-25, LC13): a task-augmented call answered with
    // {"task": {"taskId": …}}, then cancelled by notification; the task cancelled with tasks/cancel.
    case("cancel-targets-task-violates.jsonl", STRICT, false, &[(rule::CANCEL_TARGETS_TASK, MUST)]),
    case("cancel-targets-task-passes.jsonl", STRICT, true, &[]),
    // 2025-06-18 has no tasks: the same cancel is an ordinary cancel of an answered call.
    case("cancel-unknown-request-violates-5.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),

    // The intermediary rules with a legacy front and upstream (both stdio): the same runs as
    // the modern cases, at the legacy era's levels.
    case("cancel-forwarded-violates.jsonl", STRICT, false, &[(rule::CANCEL_FORWARDED, SHOULD)]),
    case("cancel-forwarded-passes.jsonl", STRICT, false, &[]),
    case("cancel-answered-locally-violates.jsonl", STRICT, false, &[(rule::CANCEL_ANSWERED_LOCALLY, SHOULD)]),
    case("cancel-answered-locally-passes.jsonl", STRICT, false, &[]),
    case("late-result-forwarded-violates.jsonl", STRICT, false, &[(rule::LATE_RESULT_FORWARDED, SHOULD), (rule::RESPONSE_AFTER_CANCEL, SHOULD)]),
    case("late-result-forwarded-passes.jsonl", STRICT, false, &[(rule::RESPONSE_AFTER_CANCEL, SHOULD)]),
    case("progress-forwarded-violates.jsonl", STRICT, false, &[(rule::PROGRESS_FORWARDED, SHOULD)]),
    case("progress-forwarded-passes.jsonl", STRICT, false, &[]),
    case("request-id-mapping-violates.jsonl", STRICT, false, &[(rule::REQUEST_ID_MAPPING, MUST)]),
    case("request-id-mapping-violates-2.jsonl", STRICT, false, &[(rule::REQUEST_ID_MAPPING, MUST), (rule::CANCEL_FORWARDED, SHOULD)]),
    case("request-id-mapping-passes.jsonl", STRICT, false, &[]),
    // The upstream cancelled before the client did; the same cancel passed on after it. A
    // cancel of a call whose answer the intermediary had passed on 1.5 s before.
    case("request-id-mapping-violates-3.jsonl", STRICT, false, &[(rule::REQUEST_ID_MAPPING, MUST)]),
    case("request-id-mapping-passes-2.jsonl", STRICT, false, &[]),
    case("cancel-unknown-request-violates-6.jsonl", STRICT, false, &[(rule::CANCEL_UNKNOWN_REQUEST, MUST)]),
    timed("intermediary-timeout-violates.jsonl", 3000, &[(rule::INTERMEDIARY_TIMEOUT, SHOULD)]),
    timed("intermediary-timeout-violates-2.jsonl", 3000, &[(rule::INTERMEDIARY_TIMEOUT, SHOULD)]),
    timed("intermediary-timeout-passes.jsonl", 3000, &[]),
    timed("intermediary-timeout-passes-2.jsonl", 3000, &[]),
];

/// The rules that apply in the legacy era and have no legacy traces yet. The list can only
/// shrink: a test fails when one of them gains its traces and is still listed.
const LEGACY_TRACES_PENDING: &[&str] = &[];

fn legacy_dir() -> PathBuf {
    traces_dir().join("legacy")
}

fn run_legacy(case: &Case) -> Verdict {
    let path = legacy_dir().join(case.file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let trace = Trace::from_jsonl(&text).unwrap_or_else(|e| panic!("legacy/{}: {e}", case.file));
    oracle::check(&trace, &case_config(case))
}

#[test]
fn every_legacy_case_is_judged_as_legacy_and_reports_exactly_its_expected_rules() {
    let mut failures = Vec::new();
    for case in LEGACY_CASES {
        let report = run_legacy(case);
        if !report.era.era.is_legacy() {
            failures.push(format!(
                "legacy/{}: judged as {}",
                case.file,
                report.era.describe()
            ));
        }
        let got = reported(&report);
        let want: BTreeSet<(&str, Level)> = case.expect.iter().copied().collect();
        if got != want {
            let lines: Vec<String> = report
                .violations
                .iter()
                .map(|v| format!("    {v}"))
                .collect();
            failures.push(format!(
                "legacy/{}: expected {want:?}, got {got:?}\n{}",
                describe(case),
                lines.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every rule that applies in the legacy era has a legacy trace that breaks it and one that
/// does not, or is named in [`LEGACY_TRACES_PENDING`]; every file of the folder is a case.
#[test]
fn every_legacy_rule_has_legacy_traces_or_is_pending() {
    let mut files: Vec<String> = std::fs::read_dir(legacy_dir())
        .expect("tests/traces/legacy exists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut problems = Vec::new();
    for file in &files {
        if !LEGACY_CASES.iter().any(|c| c.file == file) {
            problems.push(format!("legacy/{file} is not in LEGACY_CASES"));
        }
    }
    for info in RULES {
        let cases_of = |violates: bool| -> Vec<&Case> {
            LEGACY_CASES
                .iter()
                .filter(|c| parse_name(c.file) == Some((info.name, violates)))
                .collect()
        };
        let (violating, passing) = (cases_of(true), cases_of(false));
        let pending = LEGACY_TRACES_PENDING.contains(&info.name);
        match info.legacy {
            None if !violating.is_empty() || !passing.is_empty() || pending => {
                problems.push(format!(
                    "{}: not a legacy rule, yet has legacy traces or is pending",
                    info.name
                ));
            }
            None => {}
            Some(_) if pending && (!violating.is_empty() || !passing.is_empty()) => {
                problems.push(format!(
                    "{}: has legacy traces now; take it off the pending list",
                    info.name
                ));
            }
            Some(_) if pending => {}
            Some(_) => {
                if !violating.iter().any(|c| run_legacy(c).violates(info.name)) {
                    problems.push(format!("{}: no legacy trace breaks it", info.name));
                }
                if passing.is_empty() || passing.iter().any(|c| run_legacy(c).violates(info.name)) {
                    problems.push(format!("{}: no legacy trace passes it", info.name));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A modern trace judged as legacy (`check-trace --era legacy`) is not silently accepted: its
/// requests carry the modern `_meta` keys, which the legacy shapes do not allow, and there is
/// no handshake.
#[test]
fn a_modern_trace_judged_as_legacy_breaks_the_legacy_shapes() {
    let trace = load("cancel-on-timeout-passes.jsonl");
    let config = OracleConfig {
        era: Some(mcp_sim::Era::LEGACY),
        ..config(STRICT, false)
    };
    let verdict = oracle::check(&trace, &config);
    assert!(verdict.violates(rule::MESSAGE_SHAPE), "{verdict:?}");
    assert_eq!(
        oracle::check(&trace, &OracleConfig::default()).era.era,
        mcp_sim::Era::Modern
    );
}

/// `intermediary-timeout` judges by the timeout the intermediary documents: the call cut at
/// 3.05 s passes a documented 3 s timeout, and breaks a documented 10 s one or none at all.
#[test]
fn intermediary_timeout_is_judged_by_the_documented_timeout() {
    let trace = load("intermediary-timeout-passes.jsonl");
    for (timeout, flagged) in [(Some(3000), false), (Some(10_000), true), (None, true)] {
        let config = OracleConfig {
            intermediary_timeout_ms: timeout,
            ..config(STRICT, false)
        };
        let report = oracle::check(&trace, &config);
        let found = report
            .violations
            .iter()
            .any(|v| v.rule == rule::INTERMEDIARY_TIMEOUT);
        assert_eq!(
            found, flagged,
            "timeout {timeout:?}: {:?}",
            report.violations
        );
    }
}

/// A two-hop failure is drawn in three lanes (client, intermediary, server), with the front's
/// call, the upstream's own id for it and the violation; no lane stands empty.
#[test]
fn a_two_hop_failure_is_drawn_in_three_lanes() {
    let trace = load("cancel-forwarded-violates-2.jsonl");
    let verdict = oracle::check(&trace, &config(STRICT, false));
    let diagram =
        mcp_sim::report::mermaid(&trace, &verdict, &mcp_sim::report::slice(&trace, &verdict));
    let lanes: Vec<&str> = diagram
        .lines()
        .filter(|l| l.trim_start().starts_with("participant"))
        .collect();
    assert_eq!(
        lanes,
        [
            "    participant C as Client",
            "    participant I as Intermediary",
            "    participant S as Server",
        ],
        "{diagram}"
    );
    for line in [
        "C->>I: tools/call id=1 [s1]",
        "I->>S: tools/call id=101",
        "Note over C: stream s1 closed by client",
        "VIOLATION cancel-forwarded (SHOULD)",
    ] {
        assert!(diagram.contains(line), "{line} missing:\n{diagram}");
    }
}

/// An upstream hop of two connections is judged connection by connection, each in its own
/// era; the same events read as one connection are judged in the side session's legacy era
/// and break its shapes, the misreading `conn` exists to prevent.
#[test]
fn an_upstream_connection_is_judged_in_its_own_era() {
    let trace = load("message-shape-passes-6.jsonl");
    let verdict = oracle::check(&trace, &config(STRICT, false));
    assert!(verdict.is_clean(), "{:?}", verdict.violations);
    let eras: Vec<bool> = verdict
        .connection_eras
        .iter()
        .map(|e| e.era.is_legacy())
        .collect();
    assert_eq!(eras, [true, false], "{}", verdict.describe_era());
    assert!(!verdict.upstream_era.expect("two hops").era.is_legacy());
    let mut merged = trace.clone();
    for e in &mut merged.events {
        e.conn = None;
    }
    let misread = oracle::check(&merged, &config(STRICT, false));
    assert!(
        misread.violates(rule::MESSAGE_SHAPE),
        "{:?}",
        misread.violations
    );
}

/// With mcp-sim's reference peers at both ends (`check-proxy`), a one-hop violation against
/// either is the judge's misreading: kept apart in `judge_defects`, never a finding. Without
/// that setting (a simulated bridge whose ends may be mutants) it is a finding.
#[test]
fn a_violation_against_a_reference_peer_is_a_judge_defect_never_a_finding() {
    // The upstream answers after the cancel reached it (its fault, on the upstream hop); the
    // intermediary drops the answer.
    let trace = load("late-result-forwarded-passes.jsonl");
    let plain = oracle::check(&trace, &config(STRICT, false));
    let upstream: Vec<&str> = plain
        .violations
        .iter()
        .filter(|v| v.hop == Some(mcp_sim::trace::Hop::Back))
        .map(|v| v.rule)
        .collect();
    assert_eq!(
        upstream,
        [rule::RESPONSE_AFTER_CANCEL],
        "{:?}",
        plain.violations
    );
    assert!(plain.judge_defects.is_empty());
    let reference = OracleConfig {
        reference_ends: true,
        ..config(STRICT, false)
    };
    let judged = oracle::check(&trace, &reference);
    assert!(judged.is_clean(), "{:?}", judged.violations);
    let defects: Vec<&str> = judged.judge_defects.iter().map(|v| v.rule).collect();
    assert_eq!(defects, [rule::RESPONSE_AFTER_CANCEL]);
}
