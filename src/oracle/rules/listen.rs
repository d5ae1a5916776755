//! §7.1 `subscriptions/listen`: the acknowledgement comes first.

use super::Sink;

use crate::oracle::{rule, Level};
use crate::wire::{Message, META_SUBSCRIPTION_ID, METHOD_SUBSCRIPTIONS_ACKNOWLEDGED};

fn subscription_of(msg: &Message) -> Option<&serde_json::Value> {
    let meta = match msg {
        Message::Notification(n) => n.params.as_ref()?.get("_meta")?,
        Message::Progress(p) => return p.meta.as_ref()?.get(META_SUBSCRIPTION_ID),
        Message::Result(r) => r.result.get("_meta")?,
        _ => return None,
    };
    meta.get(META_SUBSCRIPTION_ID)
}

pub(super) fn listen_ack_first(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for r in ix.requests.iter().filter(|r| r.is_listen()) {
        let Some(id) = &r.id else { continue };
        let first = ix
            .emissions
            .iter()
            .copied()
            .filter(|&e| e > r.created)
            .find(|&e| {
                ix.msg(e)
                    .and_then(subscription_of)
                    .is_some_and(|v| *v == id.to_json())
            });
        let Some(e) = first else { continue };
        let is_ack = matches!(ix.msg(e), Some(Message::Notification(n)) if n.method == METHOD_SUBSCRIPTIONS_ACKNOWLEDGED);
        if !is_ack {
            s.flag(
                rule::LISTEN_ACK_FIRST,
                Level::Must,
                vec![r.created, e],
                format!("the first message of subscription {id} is not its acknowledgement"),
            );
        }
    }
}
