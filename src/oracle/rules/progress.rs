//! §2 Progress: token types and uniqueness, known tokens, strictly increasing values, nothing
//! after completion, the right stream; a resetting timer needs a token.

use super::Sink;
use crate::model::Transport;
use crate::oracle::index::Req;
use crate::oracle::Profile;
use crate::trace::Side;
use crate::wire::{Era, Message, META_SUBSCRIPTION_ID};

pub(super) fn progress(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    let mut last: Vec<Option<(usize, f64)>> = vec![None; ix.requests.len()];
    for &i in &ix.emissions {
        let Some(Message::Progress(p)) = ix.msg(i) else {
            continue;
        };
        if ix.is_replay(i) {
            continue; // the same event again, on a resumed stream
        }
        if p.meta
            .as_ref()
            .is_some_and(|m| m.contains_key(META_SUBSCRIPTION_ID))
        {
            s.flag(
                rule!("progress-stream"),
                vec![i],
                "progress never carries a subscriptionId".into(),
            );
        }
        let received =
            |r: &Req| !ix.has(Side::Server) || r.server_recv.is_some_and(|recv| recv < i);
        let Some(r) = ix
            .by_token(&p.token, i)
            .filter(|r| received(&ix.requests[*r]))
        else {
            s.flag(
                rule!("progress-unknown-token"),
                vec![i],
                format!(
                    "progressToken {} belongs to no request the server received",
                    p.token
                ),
            );
            continue;
        };
        let req = &ix.requests[r];
        if let Some(&done) = req.responses.iter().find(|&&d| d < i) {
            s.flag(
                rule!("progress-after-completion"),
                vec![done, i],
                format!("progress for {} after its final response", s.name(req)),
            );
        }
        if req.transport == Some(Transport::Http) {
            let stream = ix
                .wire(i)
                .and_then(|w| w.stream)
                .map(|st| ix.origin_stream(st));
            // In the legacy era a GET stream is `progress-on-get-stream`'s; another
            // request's POST stream is this rule's there too, at that era's SHOULD.
            let elsewhere = match ix.era {
                Era::Modern => true,
                Era::Legacy(_) => stream.and_then(|st| ix.by_stream(st)).is_some(),
            };
            if elsewhere && stream.is_some() && req.stream.is_some() && stream != req.stream {
                let on = |st: Option<u64>| st.map_or_else(|| "?".to_owned(), |n| format!("s{n}"));
                let msg = format!(
                    "progress for {} on stream {}, not on its own stream {}",
                    s.name(req),
                    on(stream),
                    on(req.stream)
                );
                s.flag(rule!("progress-stream"), vec![req.created, i], msg);
            }
        }
        if let Some((prev_i, prev)) = last[r] {
            let broken = match s.config.profile {
                Profile::Strict => p.progress <= prev,
                Profile::Lenient => p.progress < prev,
            };
            if broken {
                let msg = format!(
                    "progress {} after {} for {} does not increase",
                    p.progress,
                    prev,
                    s.name(req)
                );
                s.flag(rule!("progress-monotonic"), vec![prev_i, i], msg);
            }
        }
        last[r] = Some((i, p.progress));
    }
}

pub(super) fn reset_needs_token(s: &mut Sink<'_, '_>, r: &Req) {
    // Seen from the server's end (`serve`), the policy is the one the client declares for a
    // method; only a tool call is one it can be meant to reset on progress. SDKs set timeout
    // and reset per call (the TypeScript SDKs' request options), so a declared reset covers
    // the calls made with it: when some covered call asks for progress, one that asks for none
    // was made with other options. Only a client none of whose covered calls asks for progress
    // breaks its declaration, named at its first call.
    let ix = s.ix;
    let sent = match (r.client_send, r.server_recv) {
        (Some(sent), _) => sent,
        (None, Some(recv)) if r.method == crate::wire::METHOD_TOOLS_CALL => {
            let resets = |q: &Req| {
                q.method == r.method
                    && q.server_recv.is_some()
                    && q.policy.is_some_and(|p| p.reset_timeout_on_progress)
            };
            let mut covered = ix.requests.iter().filter(|q| resets(q));
            let first = covered.clone().next().map(|q| q.created);
            if covered.any(|q| q.token.is_some()) || first != Some(r.created) {
                return;
            }
            recv
        }
        _ => return,
    };
    let Some(policy) = r.policy else {
        return;
    };
    if policy.reset_timeout_on_progress && r.token.is_none() {
        s.flag(
            rule!("reset-needs-token"),
            vec![sent],
            match r.client_send {
                Some(_) => format!(
                    "{} resets its timer on progress but asks for none",
                    s.name(r)
                ),
                None => format!(
                    "the declared policy resets {}'s timer on progress, but none of the calls it \
                     covers asks for progress ({} is the first)",
                    r.method,
                    s.name(r)
                ),
            },
        );
    }
}
