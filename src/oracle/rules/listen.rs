//! §7.1 `subscriptions/listen`: the acknowledgement comes first, every notification is tagged
//! and asked for, nothing but subscription traffic travels on it, and a stdio client re-opens
//! its subscriptions after the server restarted.

use serde_json::{Map, Value};

use super::Sink;

use crate::oracle::index::Index;
use crate::trace::{EventKind, Side};
use crate::wire::{
    Message, RequestId, ResultType, META_SUBSCRIPTION_ID, METHOD_SUBSCRIPTIONS_ACKNOWLEDGED,
};

pub(super) fn subscription_of(msg: &Message) -> Option<&serde_json::Value> {
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
                rule!("listen-ack-first"),
                vec![r.created, e],
                format!("the first message of subscription {id} is not its acknowledgement"),
            );
        }
    }
}

/// The notification methods that travel only on a subscription, with the filter field that
/// opts into each (§7.1; `taskIds` from the Tasks extension, §7.3).
const SUBSCRIPTION_METHODS: &[(&str, &str)] = &[
    ("notifications/tools/list_changed", "toolsListChanged"),
    ("notifications/prompts/list_changed", "promptsListChanged"),
    (
        "notifications/resources/list_changed",
        "resourcesListChanged",
    ),
    ("notifications/resources/updated", "resourceSubscriptions"),
    ("notifications/tasks", "taskIds"),
];

fn filter_key(method: &str) -> Option<&'static str> {
    SUBSCRIPTION_METHODS
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, k)| *k)
}

/// The listen request whose HTTP stream event `i` travelled on, if any.
fn listen_of_stream(ix: &Index<'_>, i: usize) -> Option<usize> {
    let r = ix.by_stream(ix.wire(i)?.stream?)?;
    ix.requests[r].is_listen().then_some(r)
}

/// The listen request a subscription id names, if any.
fn listen_named(ix: &Index<'_>, tag: &Value, i: usize) -> Option<usize> {
    let id = RequestId::from_json(tag)?;
    ix.by_id(&id, i).filter(|&r| ix.requests[r].is_listen())
}

/// `params.notifications` of listen request `r`.
fn filter_of<'a>(ix: &'a Index<'_>, r: usize) -> Option<&'a Map<String, Value>> {
    let (_, params) = ix.request_params(ix.requests[r].created)?;
    params.get("notifications")?.as_object()
}

/// Every notification of a subscription carries its id, and so does the result that ends it
/// (§7.1, §9 G53, G56).
pub(super) fn listen_tagged(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for &i in &ix.emissions {
        let Some(msg) = ix.msg(i) else { continue };
        let tag = subscription_of(msg);
        let on_stream = listen_of_stream(ix, i);
        let why = match msg {
            Message::Notification(n) => {
                let expected = on_stream.and_then(|r| ix.requests[r].id.as_ref());
                match (expected, tag) {
                    (Some(id), Some(t)) if *t != id.to_json() => {
                        format!("{} on subscription {id}'s stream is tagged {t}", n.method)
                    }
                    (Some(id), None) => {
                        format!(
                            "{} on subscription {id}'s stream carries no subscriptionId",
                            n.method
                        )
                    }
                    (None, None) if filter_key(&n.method).is_some() => format!(
                        "{} belongs to a subscription but carries no subscriptionId",
                        n.method
                    ),
                    (None, Some(t)) if listen_named(ix, t, i).is_none() => format!(
                        "{} is tagged {t}, which names no subscriptions/listen",
                        n.method
                    ),
                    _ => continue,
                }
            }
            Message::Result(res) => {
                let Some(r) = ix.by_id(&res.id, i).filter(|&r| ix.requests[r].is_listen()) else {
                    continue;
                };
                let id = ix.requests[r].id.as_ref().map(RequestId::to_json);
                if tag.cloned() != id {
                    format!(
                        "the result ending subscription {} does not carry its subscriptionId",
                        res.id
                    )
                } else if res.result_type.is_some_and(|t| t != ResultType::Complete) {
                    format!("the result ending subscription {} is not complete", res.id)
                } else {
                    continue;
                }
            }
            _ => continue,
        };
        s.flag(rule!("listen-tagged"), vec![i], why);
    }
}

/// A subscription carries only what its filter asked for: no other notification types, never
/// progress or log messages, and an acknowledgement that grants no more than was asked (§7.1,
/// §9 G53, G54).
pub(super) fn listen_filter(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    for &i in &ix.emissions {
        let Some(msg) = ix.msg(i) else { continue };
        let Some(r) = listen_of_stream(ix, i)
            .or_else(|| subscription_of(msg).and_then(|t| listen_named(ix, t, i)))
        else {
            continue;
        };
        let empty = Map::new();
        let filter = filter_of(ix, r).unwrap_or(&empty);
        let id = ix.requests[r]
            .id
            .as_ref()
            .map_or_else(|| "?".to_string(), |id| id.to_string());
        let why = match msg {
            Message::Progress(_) => format!("progress on subscription {id}"),
            Message::Notification(n) if n.method == "notifications/message" => {
                format!("notifications/message on subscription {id}")
            }
            Message::Notification(n) if n.method == METHOD_SUBSCRIPTIONS_ACKNOWLEDGED => {
                let granted = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("notifications"))
                    .and_then(Value::as_object);
                let extra = granted.into_iter().flatten().find(|(k, v)| {
                    let asked = filter.get(k.as_str());
                    match v {
                        Value::Bool(true) => asked != Some(&Value::Bool(true)),
                        Value::Array(items) => items.iter().any(|x| {
                            !asked
                                .and_then(Value::as_array)
                                .is_some_and(|a| a.contains(x))
                        }),
                        _ => false,
                    }
                });
                match extra {
                    Some((k, _)) => format!(
                        "subscription {id} is acknowledged with {k}, which it did not ask for"
                    ),
                    None => continue,
                }
            }
            Message::Notification(n) => {
                let Some(key) = filter_key(&n.method) else {
                    continue;
                };
                let param = |name: &str| n.params.as_ref().and_then(|p| p.get(name)).cloned();
                let opted = match (key, filter.get(key)) {
                    ("resourceSubscriptions", Some(Value::Array(uris))) => {
                        param("uri").is_some_and(|u| uris.contains(&u))
                    }
                    ("taskIds", Some(Value::Array(ids))) => {
                        param("taskId").is_some_and(|t| ids.contains(&t))
                    }
                    (_, Some(v)) => *v == Value::Bool(true),
                    (_, None) => false,
                };
                if opted {
                    continue;
                }
                format!(
                    "{} on subscription {id}, whose filter did not ask for it",
                    n.method
                )
            }
            _ => continue,
        };
        s.flag(rule!("listen-filter"), vec![i], why);
    }
}

/// On stdio, after the server's pipe broke (a restart), the client re-opens every
/// subscription it still wanted, under a new id (§7.1, §9 G57). Judged when the client sent
/// anything after the break: it had reconnected.
pub(super) fn listen_reopened(s: &mut Sink<'_, '_>) {
    let ix = s.ix;
    if !ix.has(Side::Client) {
        return;
    }
    let breaks = ix.trace.events.iter().enumerate().filter(|(_, e)| {
        e.side == Side::Client
            && matches!(
                e.kind,
                EventKind::Close {
                    stream: None,
                    by: Side::Server,
                    ..
                }
            )
    });
    for (b, _) in breaks {
        let went_on = ix
            .requests
            .iter()
            .any(|r| r.client_send.is_some_and(|c| c > b));
        if !went_on {
            continue;
        }
        for (r, req) in ix.requests.iter().enumerate() {
            let open = req.is_listen()
                && req.transport == Some(crate::model::Transport::Stdio)
                && req.client_send.is_some_and(|c| c < b)
                && req.client_end().is_none_or(|e| e > b)
                && req.client_cancels.iter().all(|&c| c > b);
            if !open {
                continue;
            }
            let filter = filter_of(ix, r);
            let reopened = ix.requests.iter().enumerate().any(|(k, q)| {
                q.is_listen() && q.client_send.is_some_and(|c| c > b) && filter_of(ix, k) == filter
            });
            if !reopened {
                let id = req
                    .id
                    .as_ref()
                    .map_or_else(|| "?".into(), |i| i.to_string());
                let msg = format!("subscription {id} was lost with the server's pipe and never re-opened, though the client went on");
                s.flag(rule!("listen-reopened"), vec![req.created, b], msg);
            }
        }
    }
}
