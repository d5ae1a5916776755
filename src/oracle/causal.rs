//! Same-instant events in causal order.
//!
//! Traces carry milliseconds, and recorders (and people writing traces by hand) put the events
//! of one millisecond in either order. Where the order of two lines of one side decides a
//! rule, the rules must not depend on it. Two cases need it:
//!
//! - a side writes something about a request (progress with its token, its answer) in the
//!   millisecond it read that request: the read came first, whatever the lines say (nothing
//!   can answer what it has not read);
//! - a side's close and a `lost` outcome of the same instant: the rule that pairs them looks
//!   over the whole instant (`Index::instant_end`).
//!
//! One pair is left in its recorded order on purpose: an answer written in the millisecond a
//! cancel of the same request was read. Either may have come first (a crossing, or an answer
//! to the cancel), nothing causal decides it, and the recorders write them in the order they
//! happened: a simulated reference server records its result before a cancel it read in the
//! same tick, a server that answers cancels records the read first.
//!
//! Other same-instant events keep their order. The oracle judges the
//! reordered copy and reports indices of the trace as given; a trace already in causal order
//! (every simulated one: each side records what it read before what it wrote in answer) is
//! judged as it is, without a copy.

use serde_json::Value;

use crate::trace::{EventKind, Trace};

/// The trace in causal order and, for each of its events, the index of that event in
/// `trace`; `None` when `trace` is in causal order already.
pub(super) fn reorder(trace: &Trace) -> Option<(Trace, Vec<usize>)> {
    let events = &trace.events;
    let misplaced = (1..events.len()).any(|j| goes_before(trace, j, j - 1));
    if !misplaced {
        return None;
    }
    let mut order: Vec<usize> = Vec::with_capacity(events.len());
    for j in 0..events.len() {
        // Back over the events of the same side, in this instant, that `j` goes before.
        let mut at = order.len();
        while at > 0 && goes_before(trace, j, order[at - 1]) {
            at -= 1;
        }
        order.insert(at, j);
    }
    let reordered = Trace {
        events: order.iter().map(|&i| events[i].clone()).collect(),
    };
    Some((reordered, order))
}

/// Whether event `a` goes before event `b`, both of one side at one instant: the read of a
/// request before what is written about it.
fn goes_before(trace: &Trace, a: usize, b: usize) -> bool {
    let (x, y) = (&trace.events[a], &trace.events[b]);
    if x.t != y.t || x.side != y.side {
        return false;
    }
    match (&x.kind, &y.kind) {
        (EventKind::Recv(r), EventKind::Send(w)) => match (&r.msg, &w.msg) {
            (Some(got), Some(sent)) => written_about(got, sent),
            _ => false,
        },
        _ => false,
    }
}

/// Whether `sent` answers (a result or an error) the request with `id`.
fn answers(sent: &Value, id: &Value) -> bool {
    sent.get("method").is_none() && sent.get("id") == Some(id)
}

/// Whether `sent` is about the request `got` carries: its answer, or its progress.
fn written_about(got: &Value, sent: &Value) -> bool {
    match got.get("method").and_then(Value::as_str) {
        None | Some("notifications/cancelled") => false,
        Some(_) => {
            let Some(id) = got.get("id") else {
                return false;
            };
            let token = got.pointer("/params/_meta/progressToken");
            let progress_for = sent.get("method").and_then(Value::as_str)
                == Some("notifications/progress")
                && token.is_some()
                && sent.pointer("/params/progressToken") == token;
            answers(sent, id) || progress_for
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(lines: &[&str]) -> Trace {
        Trace::from_jsonl(&lines.join("\n")).expect("a trace")
    }

    #[test]
    fn a_write_about_a_request_read_in_the_same_instant_goes_after_the_read() {
        let t = trace(&[
            r#"{"t":0,"side":"client","kind":"send","transport":"stdio","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}}}"#,
            r#"{"t":1,"side":"server","kind":"send","transport":"stdio","msg":{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}}"#,
            r#"{"t":1,"side":"server","kind":"recv","transport":"stdio","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}}}"#,
        ]);
        let (_, order) = reorder(&t).expect("out of causal order");
        assert_eq!(order, [0, 2, 1]);
    }

    #[test]
    fn unrelated_or_distinct_instants_keep_their_order() {
        let t = trace(&[
            r#"{"t":1,"side":"server","kind":"send","transport":"stdio","msg":{"jsonrpc":"2.0","id":2,"result":{}}}"#,
            r#"{"t":1,"side":"server","kind":"recv","transport":"stdio","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call"}}"#,
            r#"{"t":2,"side":"server","kind":"send","transport":"stdio","msg":{"jsonrpc":"2.0","id":3,"result":{}}}"#,
            r#"{"t":3,"side":"server","kind":"recv","transport":"stdio","msg":{"jsonrpc":"2.0","id":3,"method":"tools/call"}}"#,
        ]);
        assert!(reorder(&t).is_none());
    }
}
