//! Two-hop traces: a client, an intermediary and an upstream server (a stdio↔HTTP bridge, a
//! gateway, an era translator), judged hop by hop and across the intermediary.
//!
//! The trace holds the client's end of the front hop and the server's end of the back hop
//! ([`crate::trace::Hop`]); the intermediary itself is a black box. Each hop is first judged
//! alone by every one-hop rule, in its own era: on the front the intermediary is the server, on
//! the back it is the client (its cancels, ids and handshake are judged there). The back hop
//! is judged connection by connection ([`crate::trace::connections`]): an intermediary that
//! starts a process per request, or opens a side session beside the traffic it relays, has
//! one upstream connection each, with its own ids and its own era. Then the intermediary rules
//! ([`ACROSS`]) compare the front with every connection.
//!
//! # Who is judged
//!
//! With mcp-sim's reference peers at both ends (`check-proxy`,
//! [`OracleConfig::reference_ends`]) only the intermediary can be at fault: a one-hop
//! violation whose [`super::Party`] is the front's client or the upstream's server is the
//! judge's misreading of the trace, reported apart as [`Verdict::judge_defects`] and never
//! among the findings. (The simulated bridges of the turmoil and memory lanes may have mutant
//! ends, so there every violation stands.)
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

use super::era::EraReading;
use super::index::Index;
use super::rules::intermediary::{self, BackConn};
use super::{check_hop, judged_config, OracleConfig, Party, Verdict, Violation};
use crate::trace::{EventKind, Hop, Side, Trace};
use crate::wire::METHOD_TOOLS_CALL;

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

/// The side a one-hop violation blames on its hop ([`Party`]), read from `hop`'s events
/// (the violation's own indices); `None` for the intermediary rules.
pub(super) fn blamed(v: &Violation, hop: &Trace) -> Option<Side> {
    let info = super::rule_info(v.rule)?;
    let other = |s: Side| match s {
        Side::Client => Some(Side::Server),
        Side::Server => Some(Side::Client),
        _ => None,
    };
    let sender = || {
        let e = hop.events.get(*v.events.first()?)?;
        match e.kind {
            EventKind::Send(_) => Some(e.side),
            EventKind::Recv(_) => other(e.side),
            _ => Some(e.side),
        }
    };
    match info.party {
        Party::Client => Some(Side::Client),
        Party::Server => Some(Side::Server),
        Party::Sender => sender(),
        Party::Answerer => sender().and_then(other),
        Party::Intermediary => None,
    }
}

/// Whether the upstream connection `ix` carried a `tools/call`.
fn carries_calls(ix: &Index<'_>) -> bool {
    ix.requests.iter().any(|r| r.method == METHOD_TOOLS_CALL)
}

/// Judges a two-hop trace: the front hop and each upstream connection by the one-hop rules,
/// each in its own era, then the intermediary rules.
pub(super) fn check(trace: &Trace, config: &OracleConfig) -> Verdict {
    let (front, front_origin) = trace.hop(Hop::Front);
    // The era given applies to the front, which the user's client speaks; each upstream
    // connection's is read from its own events (an era translator speaks the other one
    // there, and a side session speaks its own).
    let upstream = OracleConfig {
        era: None,
        ..*config
    };
    let (front_era, front_config) = judged_config(&front, config);
    let f = Index::build(&front, &front_config);
    let conns = trace.connections();
    let judged: Vec<(EraReading, OracleConfig)> = conns
        .iter()
        .map(|c| judged_config(&c.trace, &upstream))
        .collect();
    let indices: Vec<Index<'_>> = conns
        .iter()
        .zip(&judged)
        .map(|(c, (_, cfg))| Index::build(&c.trace, cfg))
        .collect();
    let mut violations = Vec::new();
    let mut judge_defects = Vec::new();
    let mut place = |verdict: Verdict,
                     hop_trace: &Trace,
                     origin: &[usize],
                     hop: Hop,
                     conn: Option<u32>,
                     reference: Side| {
        for v in verdict.violations {
            let defect = config.reference_ends && blamed(&v, hop_trace) == Some(reference);
            let placed = Violation {
                events: v.events.iter().map(|&e| origin[e]).collect(),
                message: super::renumbered(&v.message, origin),
                hop: Some(hop),
                conn,
                ..v
            };
            match defect {
                true => judge_defects.push(placed),
                false => violations.push(placed),
            }
        }
    };
    place(
        check_hop(&front, config),
        &front,
        &front_origin,
        Hop::Front,
        None,
        Side::Client,
    );
    for (c, ix) in conns.iter().zip(&indices) {
        let back_config = OracleConfig {
            complete: config.complete && upstream_settled(ix),
            ..upstream
        };
        place(
            check_hop(&c.trace, &back_config),
            &c.trace,
            &c.origin,
            Hop::Back,
            c.conn,
            Side::Server,
        );
    }
    let backs: Vec<BackConn<'_, '_>> = conns
        .iter()
        .zip(&indices)
        .map(|(c, ix)| BackConn {
            ix,
            origin: &c.origin,
            conn: c.conn,
        })
        .collect();
    violations.extend(intermediary::across(
        &f,
        &backs,
        &front_origin,
        config,
        trace.end(),
    ));
    let order = |v: &mut Vec<Violation>| {
        v.sort_by(|a, b| (a.events.last(), a.rule).cmp(&(b.events.last(), b.rule)));
        v.dedup();
    };
    order(&mut violations);
    order(&mut judge_defects);
    let eras: Vec<EraReading> = judged
        .iter()
        .zip(&conns)
        .map(|((era, _), c)| era.reindexed(&c.origin))
        .collect();
    let main = indices.iter().position(carries_calls).unwrap_or(0);
    Verdict {
        violations,
        era: front_era.reindexed(&front_origin),
        upstream_era: Some(eras[main]),
        connection_eras: if eras.len() > 1 { eras } else { Vec::new() },
        judge_defects,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn event_references_in_messages_follow_the_whole_trace() {
        assert_eq!(
            crate::oracle::renumbered("at #1 and #0, not #9, # or #x", &[4, 7]),
            "at #7 and #4, not #9, # or #x"
        );
    }
}
