//! §5 Transports: streams cut by an intermediary's idle timeout, and framing that never
//! splits or corrupts a message.

use super::Sink;

use crate::trace::{EventKind, Side};

/// An intermediary cut a stream for idleness while its request was still outstanding.
pub(super) fn idle_stream_cut(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for (i, e) in ix.trace.events.iter().enumerate() {
        let EventKind::Close {
            stream: Some(st),
            reason: Some(reason),
            ..
        } = &e.kind
        else {
            continue;
        };
        if reason != "idle" {
            continue;
        }
        let Some(r) = ix
            .requests
            .iter()
            .rev()
            .find(|r| r.stream == Some(*st) && r.created < i)
        else {
            continue;
        };
        let answered =
            r.responses.iter().any(|&d| d < i) || r.client_response.is_some_and(|c| c < i);
        // A server that never received the request (the network lost it) cannot keep it alive.
        if ix.has(Side::Server) && r.server_recv.is_none_or(|recv| recv > i) {
            continue;
        }
        let first_report = r.closes.iter().find(|&&c| matches!(&ix.trace.events[c].kind, EventKind::Close { reason: Some(x), .. } if x == "idle")) == Some(&i);
        if !answered && first_report {
            s.flag(rule!("idle-stream-cut"), vec![r.created, i], format!("the stream of {} stayed silent until an intermediary cut it for idleness; send progress or keep-alives more often", s.name(r)));
        }
    }
}

/// The client read text that does not decode on a channel where the server wrote only valid
/// messages: the framing in between split or corrupted one.
pub(super) fn wire_integrity(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if !ix.has(Side::Server) || !ix.has(Side::Client) {
        return;
    }
    for (i, e) in ix.trace.events.iter().enumerate() {
        let (Side::Client, EventKind::Recv(w)) = (e.side, &e.kind) else {
            continue;
        };
        if !matches!(ix.msgs[i], Some(Err(_))) {
            continue;
        }
        let server_sent_valid = ix.trace.events[..i].iter().enumerate().any(|(j, x)| {
            matches!(&x.kind, EventKind::Send(sw) if x.side == Side::Server && sw.stream == w.stream && sw.transport == w.transport)
                && matches!(ix.msgs[j], Some(Ok(_)))
        });
        let server_sent_invalid = ix.trace.events[..i].iter().enumerate().any(|(j, x)| {
            matches!(&x.kind, EventKind::Send(sw) if x.side == Side::Server && sw.stream == w.stream && sw.transport == w.transport)
                && matches!(ix.msgs[j], Some(Err(_)))
        });
        if server_sent_valid && !server_sent_invalid {
            s.flag(rule!("wire-integrity"), vec![i], "the client read text the server never wrote: the framing split or corrupted a message".into());
        }
    }
}
