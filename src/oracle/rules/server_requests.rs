//! The legacy era's other direction (docs/spec/mcp-2025-11-25.md LB7, LC9): a server may send
//! requests of its own (`sampling/createMessage`, `roots/list`, `elicitation/create`, `ping`),
//! ask for progress on them and cancel them, and the same rules hold as for the client's
//! requests: ids and tokens unique while outstanding, progress only for a request in flight,
//! strictly increasing and never after its answer, and a cancel only of a request the server
//! sent and still believes in progress (a cancel that crosses the client's answer on the
//! wire is no fault: only the server's receipt of the answer ends its belief). The client's requests are judged by the other rules;
//! these functions judge only the server's, under the same rule names.

use super::{sender, Sink};

use crate::oracle::Profile;
use crate::trace::{EventKind, Side};
use crate::wire::{Message, ProgressToken, RequestId};

/// A request the server sent.
struct ServerRequest {
    id: RequestId,
    token: Option<ProgressToken>,
    sent: usize,
    /// The client's first answer.
    answered: Option<usize>,
    /// The server's receipt of it, when the trace has the server's view.
    answer_received: Option<usize>,
    /// The server's first cancel of it.
    cancelled: Option<usize>,
}

impl ServerRequest {
    fn outstanding_at(&self, i: usize) -> bool {
        self.sent < i
            && [self.answered, self.cancelled]
                .into_iter()
                .flatten()
                .all(|e| e > i)
    }
}

fn server_requests(s: &Sink<'_, '_>) -> Vec<ServerRequest> {
    let ix = s.ix;
    let mut out: Vec<ServerRequest> = Vec::new();
    for i in 0..ix.trace.events.len() {
        match (sender(ix, i), ix.msg(i)) {
            // A request replayed on a resumed stream is the same request.
            (Some(Side::Server), Some(Message::Request(r))) if !ix.is_replay(i) => {
                out.push(ServerRequest {
                    id: r.id.clone(),
                    token: r.meta.progress_token.clone(),
                    sent: i,
                    answered: None,
                    answer_received: None,
                    cancelled: None,
                })
            }
            (Some(Side::Client), Some(m @ (Message::Result(_) | Message::Error(_)))) => {
                let Some(id) = m.id() else { continue };
                if let Some(r) = out
                    .iter_mut()
                    .find(|r| &r.id == id && r.answered.is_none() && r.cancelled.is_none())
                {
                    r.answered = Some(i);
                }
            }
            (Some(Side::Server), Some(Message::Cancelled(c))) if !ix.is_replay(i) => {
                if let Some(r) = out.iter_mut().rev().find(|r| r.id == c.request_id) {
                    r.cancelled.get_or_insert(i);
                }
            }
            _ => {}
        }
        // The server's own receipt of an answer, wherever the client was recorded.
        let event = &ix.trace.events[i];
        let received = event.side == Side::Server && matches!(event.kind, EventKind::Recv(_));
        if let (true, Some(m @ (Message::Result(_) | Message::Error(_)))) = (received, ix.msg(i)) {
            let id = m.id();
            if let Some(r) = out
                .iter_mut()
                .rev()
                .find(|r| Some(&r.id) == id && r.answer_received.is_none())
            {
                r.answer_received = Some(i);
            }
        }
    }
    out
}

/// Ids and tokens of the server's requests, the client's progress for them and the server's
/// cancels of them.
pub(super) fn server_requests_rules(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if !ix.era.is_legacy() {
        return;
    }
    let requests = server_requests(s);
    for (n, r) in requests.iter().enumerate() {
        for earlier in &requests[..n] {
            if earlier.id == r.id && earlier.outstanding_at(r.sent) {
                let msg = format!(
                    "the server reuses id {} while its request is outstanding",
                    r.id
                );
                s.flag(rule!("request-id-unique"), vec![earlier.sent, r.sent], msg);
            }
            if r.token.is_some() && earlier.token == r.token && earlier.outstanding_at(r.sent) {
                let msg = format!(
                    "the server's requests {} and {} carry the same progressToken while both are outstanding",
                    earlier.id, r.id
                );
                s.flag(
                    rule!("progress-token-unique"),
                    vec![earlier.sent, r.sent],
                    msg,
                );
            }
        }
    }
    let mut last_value: Vec<Option<(usize, f64)>> = vec![None; requests.len()];
    for i in 0..ix.trace.events.len() {
        match (sender(ix, i), ix.msg(i)) {
            (Some(Side::Client), Some(Message::Progress(p))) => {
                let Some(n) = requests
                    .iter()
                    .rposition(|r| r.sent < i && r.token.as_ref() == Some(&p.token))
                else {
                    let msg = format!(
                        "the client's progressToken {} belongs to no request the server sent",
                        p.token
                    );
                    s.flag(rule!("progress-unknown-token"), vec![i], msg);
                    continue;
                };
                let r = &requests[n];
                if let Some(done) = r.answered.filter(|&a| a < i) {
                    let msg = format!(
                        "the client sent progress for the server's request {} after answering it",
                        r.id
                    );
                    s.flag(rule!("progress-after-completion"), vec![done, i], msg);
                }
                if let Some((prev, value)) = last_value[n] {
                    let bad = match s.config.profile {
                        Profile::Strict => p.progress <= value,
                        Profile::Lenient => p.progress < value,
                    };
                    if bad {
                        let msg = format!(
                            "the client's progress {} after {value} for the server's request {} does not increase",
                            p.progress, r.id
                        );
                        s.flag(rule!("progress-monotonic"), vec![prev, i], msg);
                    }
                }
                last_value[n] = Some((i, p.progress));
            }
            // Each cancel once: a replay on a resumed stream is the same one.
            (Some(Side::Server), Some(Message::Cancelled(c))) if !ix.is_replay(i) => {
                let target = requests
                    .iter()
                    .rev()
                    .find(|r| r.sent < i && r.id == c.request_id);
                let problem = match target {
                    None => Some((
                        vec![i],
                        format!("cancel of {}, which the server never sent", c.request_id),
                    )),
                    // Only the server's own view tells a cancel after the answer arrived
                    // from one that crossed it (sent before the answer reached the server).
                    Some(r) => match (r.answer_received, r.cancelled) {
                        (Some(a), _) if a < i && ix.trace.events[i].side == Side::Server => Some((
                            vec![a, i],
                            format!(
                                "the server cancels {} after the client's answer reached it",
                                r.id
                            ),
                        )),
                        (_, Some(first)) if first < i => Some((
                            vec![first, i],
                            format!("the server's request {} was already cancelled", r.id),
                        )),
                        _ => None,
                    },
                };
                if let Some((events, msg)) = problem {
                    s.flag(rule!("cancel-unknown-request"), events, msg);
                }
            }
            _ => {}
        }
    }
}
