//! Two-hop traces: a client, an intermediary and an upstream server (a stdio↔HTTP bridge, a
//! gateway, an era translator), judged hop by hop and across the intermediary.
//!
//! The trace holds the client's end of the front hop and the server's end of the back hop
//! ([`crate::trace::Hop`]); the intermediary itself is a black box. Each hop is first judged
//! alone by every one-hop rule, in its own era: on the front the intermediary is the server, on
//! the back it is the client (its cancels, ids and handshake are judged there). Then the
//! intermediary rules ([`ACROSS`]) compare the two hops.
//!
//! # Which upstream request serves which front request
//!
//! The intermediary rewrites ids and progress tokens, so requests are paired by content: a
//! front `tools/call` and an upstream `tools/call` with the same params (`_meta` aside, where
//! tokens and protocol fields live) are one call, the earliest upstream request not yet paired
//! that arrived no earlier than the front one was sent. Calls with equal params pair in order
//! (an intermediary that forwards concurrently and out of order can make two identical calls
//! swap, which no rule here can tell apart: their answers are alike too); `mcp-sim
//! check-proxy` tags each call's arguments so that every pair is certain. A front request the
//! intermediary dropped with its front connection, unanswered, when the upstream had crashed
//! during that connection's life, pairs with nothing that arrived after the crash: a retry of
//! the same call is another request. Only `tools/call` is
//! paired: it is what runs long, reports progress and gets cancelled; the handshake, `ping`
//! and discovery are each hop's own.
//!
//! A complete run (the client's calls settled) makes the upstream hop complete too only when
//! the server saw every request it read end: an intermediary that answers a cancel itself
//! leaves the upstream working when the run stops, which is not the server's leak.
//!
//! Responses are compared by their `result` or `error` member, the result's `_meta` aside.
//! Times are compared, not event order: the two hops were recorded by two processes on one
//! clock, and events of different hops at the same millisecond have no order.

use super::index::Index;
use super::rules::intermediary;
use super::{check_hop, judged_config, OracleConfig, Verdict, Violation};
use crate::trace::{Hop, Trace};

/// The intermediary rules: they apply to two-hop traces only.
pub const ACROSS: &[&str] = &[
    rule!("cancel-forwarded"),
    rule!("cancel-answered-locally"),
    rule!("late-result-forwarded"),
    rule!("progress-forwarded"),
    rule!("request-id-mapping"),
    rule!("intermediary-timeout"),
];

/// Whether the server saw the end of every request it read on the upstream hop (its answer, or
/// the era's cancel). A run is complete when the client's calls settled, which says nothing of
/// the upstream when the intermediary answered or dropped a call without ending it there: such
/// a request still runs when the run stops, through no fault of the server's, and the
/// intermediary rules judge why (`cancel-forwarded`). The liveness checks then stay off on
/// the upstream hop.
fn upstream_settled(b: &Index<'_>) -> bool {
    b.requests
        .iter()
        .filter(|r| r.server_recv.is_some() && !r.is_listen())
        .all(|r| !r.responses.is_empty() || r.server_cancel_seen.is_some())
}

/// Judges a two-hop trace: each hop by the one-hop rules, then the intermediary rules.
pub(super) fn check(trace: &Trace, config: &OracleConfig) -> Verdict {
    let (front, front_origin) = trace.hop(Hop::Front);
    let (back, back_origin) = trace.hop(Hop::Back);
    // The era given applies to the front, which the user's client speaks; the upstream's is
    // read from its own hop (an era translator speaks the other one there).
    let upstream = OracleConfig {
        era: None,
        ..*config
    };
    let (front_era, front_config) = judged_config(&front, config);
    let (back_era, back_judged) = judged_config(&back, &upstream);
    let f = Index::build(&front, &front_config);
    let b = Index::build(&back, &back_judged);
    let back_config = OracleConfig {
        complete: config.complete && upstream_settled(&b),
        ..upstream
    };
    let front_verdict = check_hop(&front, config);
    let back_verdict = check_hop(&back, &back_config);
    let mut violations = Vec::new();
    for (verdict, origin, hop) in [
        (&front_verdict, &front_origin, Hop::Front),
        (&back_verdict, &back_origin, Hop::Back),
    ] {
        for v in &verdict.violations {
            violations.push(Violation {
                events: v.events.iter().map(|&e| origin[e]).collect(),
                hop: Some(hop),
                ..v.clone()
            });
        }
    }
    violations.extend(intermediary::across(
        &f,
        &b,
        &front_origin,
        &back_origin,
        config,
        trace.end(),
    ));
    violations.sort_by(|a, b| (a.events.last(), a.rule).cmp(&(b.events.last(), b.rule)));
    violations.dedup();
    Verdict {
        violations,
        era: front_era.reindexed(&front_origin),
        upstream_era: Some(back_era.reindexed(&back_origin)),
    }
}
