//! The reference intermediary: a message-level bridge between one client connection and one
//! upstream connection, as stdio↔stdio gateways and the bridges of `mcp-proxy` are, sans-IO.
//!
//! It owns no handshake and speaks no era of its own: every request is passed on under an id
//! of the upstream hop's (its own counter, so two clients' ids never meet upstream), with its
//! `progressToken` replaced by that id, and every answer, progress notification and
//! subscription tag is mapped back. The server's own requests (a legacy `ping`, sampling) are
//! mapped the other way. What a faithful intermediary must do about cancellation:
//!
//! - a client's `notifications/cancelled` goes upstream naming the upstream id, and the
//!   request is remembered as cancelled: whatever the upstream still sends for it (a result
//!   that crossed the cancel, late progress) is dropped, so the client's side sees nothing
//!   after its cancel but crossings of the front hop itself;
//! - a cancel it cannot map (a request already answered) is dropped, as an invalid cancel
//!   SHOULD be ignored.
//!
//! The intermediary mutants ([`Mutant`], side `intermediary`) bend exactly these rules. Both
//! hops are JSON values, not typed messages: the bridge rewrites ids and tokens and passes
//! everything else untouched, whatever the era, as real bridges do.
//!
//! # The era bridge
//!
//! [`Bridge::era_bridge`] is the other shape real bridges take (npm `mcp-proxy`): a 2026-07-28
//! Streamable HTTP front before a legacy (2025-11-25) stdio upstream. It owns the upstream's
//! handshake ([`Bridge::open_upstream`]; client requests wait for it), answers the upstream's
//! `ping` itself (the front's era has none), leaves the front's protocol fields
//! (`io.modelcontextprotocol/*` in `_meta`) off upstream requests and gives upstream results the
//! `resultType` the front's era requires. Above all it translates the cancel: on the front a
//! closed request stream is the cancel, upstream a disconnect is not one, so the bridge sends
//! `notifications/cancelled` ([`Bridge::front_stream_closed`]).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::mutant::{Mutant, MutantSet};
use crate::wire::META_SUBSCRIPTION_ID;

/// The prefix of the 2026-07-28 protocol fields in `_meta`, which a legacy upstream does not
/// take.
const PROTOCOL_META_PREFIX: &str = "io.modelcontextprotocol/";

/// The first id the bridge gives a request upstream.
pub const FIRST_UPSTREAM_ID: i64 = 101;

/// The id of an era bridge's own `initialize` upstream (a string: no client id maps to it).
const HANDSHAKE_ID: &str = "bridge-initialize";

/// The revision an era bridge speaks upstream.
const UPSTREAM_REVISION: &str = "2025-11-25";

/// Where a message the bridge emits goes.
#[derive(Debug, Clone, PartialEq)]
pub enum BridgeOut {
    /// To the client.
    Front(Value),
    /// To the upstream server.
    Back(Value),
}

/// A client request passed upstream and not yet answered there.
#[derive(Debug, Clone)]
struct Upstream {
    front_id: Value,
    front_token: Option<Value>,
    cancelled: bool,
}

/// The bridge's state for one pair of connections.
#[derive(Debug, Clone, Default)]
pub struct Bridge {
    mutants: MutantSet,
    /// The last upstream id given to a client request.
    last_back_id: i64,
    /// The last front id given to a server request.
    last_front_id: i64,
    /// Client requests by their upstream id.
    up: BTreeMap<i64, Upstream>,
    /// Upstream ids by the client's id (its JSON text).
    up_by_front: BTreeMap<String, i64>,
    /// Server requests: the server's id by the id the client was given.
    down: BTreeMap<i64, Value>,
    /// The id the client was given by the server's id (its JSON text).
    down_by_back: BTreeMap<String, i64>,
    /// An era bridge: 2026-07-28 front, legacy upstream ([`Bridge::era_bridge`]).
    translates: bool,
    /// An era bridge's upstream answered its `initialize`.
    upstream_ready: bool,
    /// Client messages that wait for the upstream's handshake, in order.
    waiting: Vec<Value>,
}

impl Bridge {
    /// A bridge with these intermediary mutants switched on. Its upstream ids count from
    /// [`FIRST_UPSTREAM_ID`], as a gateway's own numbering does, so that an id passed on
    /// unmapped names no request of the upstream's.
    pub fn new(mutants: MutantSet) -> Bridge {
        Bridge {
            mutants,
            last_back_id: FIRST_UPSTREAM_ID - 1,
            ..Bridge::default()
        }
    }

    /// An era bridge with these mutants: a 2026-07-28 front before a legacy upstream, which
    /// it opens itself ([`Bridge::open_upstream`]).
    pub fn era_bridge(mutants: MutantSet) -> Bridge {
        Bridge {
            translates: true,
            ..Bridge::new(mutants)
        }
    }

    /// What goes upstream first: an era bridge's `initialize` (the front's era has no
    /// handshake); nothing for a bridge of one era, which passes the client's own on.
    pub fn open_upstream(&mut self) -> Vec<BridgeOut> {
        if !self.translates {
            return Vec::new();
        }
        vec![BridgeOut::Back(json!({
            "jsonrpc": "2.0",
            "id": HANDSHAKE_ID,
            "method": "initialize",
            "params": {
                "protocolVersion": UPSTREAM_REVISION,
                "capabilities": {},
                "clientInfo": {"name": "mcp-sim-era-bridge", "version": env!("CARGO_PKG_VERSION")},
            },
        }))]
    }

    /// The client closed the stream of its request `front_id` (a 2026-07-28 HTTP front): that
    /// is its cancel, which an era bridge passes upstream as the legacy era's
    /// `notifications/cancelled`. A bridge of one era has no streams of its own to see closed.
    pub fn front_stream_closed(&mut self, front_id: &Value) -> Vec<BridgeOut> {
        if !self.translates {
            return Vec::new();
        }
        // Not sent upstream yet: it never will be.
        let before = self.waiting.len();
        self.waiting.retain(|m| m.get("id") != Some(front_id));
        if self.waiting.len() != before {
            return Vec::new();
        }
        let Some(&back) = self.up_by_front.get(&front_id.to_string()) else {
            return Vec::new();
        };
        let Some(entry) = self.up.get_mut(&back) else {
            return Vec::new();
        };
        if entry.cancelled || self.mutants.has(Mutant::BridgeIgnoresStreamClose) {
            return Vec::new();
        }
        entry.cancelled = true;
        vec![BridgeOut::Back(json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": back, "reason": "the client closed the request's stream"},
        }))]
    }

    /// A bridge for a new pair of connections that goes on numbering where `previous` (the
    /// bridge of the pair before, whose upstream went away) stopped: ids on each hop stay
    /// unique over the run, as a gateway that restarts its upstream keeps counting.
    pub fn after(previous: &Bridge) -> Bridge {
        Bridge {
            mutants: previous.mutants,
            last_back_id: previous.last_back_id,
            last_front_id: previous.last_front_id,
            translates: previous.translates,
            ..Bridge::default()
        }
    }

    /// Client requests passed upstream and not answered there yet.
    pub fn outstanding(&self) -> usize {
        self.up.len()
    }

    /// What the bridge does with a message from the client.
    pub fn from_front(&mut self, mut msg: Value) -> Vec<BridgeOut> {
        if self.translates && !self.upstream_ready {
            self.waiting.push(msg);
            return Vec::new();
        }
        let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
        let id = msg.get("id").cloned();
        match (method.as_deref(), id) {
            (Some(_), Some(front_id)) => {
                self.last_back_id += 1;
                let back = self.last_back_id;
                let translates = self.translates;
                let token = msg
                    .pointer_mut("/params/_meta")
                    .and_then(Value::as_object_mut)
                    .and_then(|meta| {
                        if translates {
                            meta.retain(|k, _| !k.starts_with(PROTOCOL_META_PREFIX));
                        }
                        let t = meta.remove("progressToken")?;
                        meta.insert("progressToken".into(), json!(back));
                        Some(t)
                    });
                msg["id"] = json!(back);
                self.up_by_front.insert(front_id.to_string(), back);
                self.up.insert(
                    back,
                    Upstream {
                        front_id,
                        front_token: token,
                        cancelled: false,
                    },
                );
                vec![BridgeOut::Back(msg)]
            }
            (Some("notifications/cancelled"), None) => self.front_cancel(msg),
            (Some(_), None) => vec![BridgeOut::Back(msg)],
            (None, Some(front_id)) => {
                // The client's answer to a server request.
                let Some(back_id) = front_id.as_i64().and_then(|k| self.down.remove(&k)) else {
                    return Vec::new();
                };
                self.down_by_back.remove(&back_id.to_string());
                msg["id"] = back_id;
                vec![BridgeOut::Back(msg)]
            }
            (None, None) => Vec::new(),
        }
    }

    fn front_cancel(&mut self, mut msg: Value) -> Vec<BridgeOut> {
        let Some(front_id) = msg.pointer("/params/requestId").cloned() else {
            return Vec::new();
        };
        let Some(&back) = self.up_by_front.get(&front_id.to_string()) else {
            return Vec::new();
        };
        let Some(entry) = self.up.get_mut(&back) else {
            return Vec::new();
        };
        if entry.cancelled {
            return Vec::new();
        }
        if self.mutants.has(Mutant::BridgeAnswersCancel) {
            entry.cancelled = true;
            return vec![BridgeOut::Front(json!({
                "jsonrpc": "2.0",
                "id": front_id,
                "error": {"code": 0, "message": "Request cancelled"},
            }))];
        }
        if self.mutants.has(Mutant::BridgeDropsCancel) {
            return Vec::new();
        }
        entry.cancelled = true;
        if !self.mutants.has(Mutant::BridgeCancelUnmapped) {
            msg["params"]["requestId"] = json!(back);
        }
        vec![BridgeOut::Back(msg)]
    }

    /// What the bridge does with a message from the upstream server.
    pub fn from_back(&mut self, mut msg: Value) -> Vec<BridgeOut> {
        let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
        let id = msg.get("id").cloned();
        if self.translates {
            if let Some(out) = self.translate_from_back(method.as_deref(), id.as_ref(), &mut msg) {
                return out;
            }
        }
        if self.tag_for_front(&mut msg) {
            // A subscription's message after the client cancelled it (one that crossed the
            // cancel upstream): the client asked for nothing more.
            return Vec::new();
        }
        match (method.as_deref(), id) {
            (Some(_), Some(back_id)) => {
                self.last_front_id += 1;
                let front = self.last_front_id;
                self.down_by_back.insert(back_id.to_string(), front);
                self.down.insert(front, back_id);
                msg["id"] = json!(front);
                vec![BridgeOut::Front(msg)]
            }
            (Some("notifications/progress"), None) => self.back_progress(msg),
            (Some("notifications/cancelled"), None) => {
                // The server cancels a request of its own (or ends a subscription, whose id
                // the tagging above already mapped).
                let named = msg.pointer("/params/requestId").map(Value::to_string);
                if let Some(&front) = named.and_then(|k| self.down_by_back.get(&k)) {
                    msg["params"]["requestId"] = json!(front);
                } else if let Some(front) = self.front_id_of(msg.pointer("/params/requestId")) {
                    msg["params"]["requestId"] = front;
                } else {
                    // A request the client already answered (or never had): nothing to cancel.
                    return Vec::new();
                }
                vec![BridgeOut::Front(msg)]
            }
            (Some(_), None) => vec![BridgeOut::Front(msg)],
            (None, Some(back_id)) => {
                let Some(back) = back_id.as_i64() else {
                    return Vec::new();
                };
                let Some(entry) = self.up.remove(&back) else {
                    return Vec::new();
                };
                self.up_by_front.remove(&entry.front_id.to_string());
                if entry.cancelled && !self.mutants.has(Mutant::BridgeForwardsLateResult) {
                    return Vec::new();
                }
                msg["id"] = entry.front_id;
                vec![BridgeOut::Front(msg)]
            }
            (None, None) => Vec::new(),
        }
    }

    /// An era bridge's own part of the upstream's messages: the handshake's answer (then the
    /// waiting client messages go), `ping` (answered here), and the `resultType` of results.
    /// `None` when the message goes on as a bridge of one era passes it.
    fn translate_from_back(
        &mut self,
        method: Option<&str>,
        id: Option<&Value>,
        msg: &mut Value,
    ) -> Option<Vec<BridgeOut>> {
        match (method, id) {
            (None, Some(id)) if id == HANDSHAKE_ID => {
                self.upstream_ready = true;
                let mut out = vec![BridgeOut::Back(json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/initialized",
                }))];
                for waiting in std::mem::take(&mut self.waiting) {
                    out.extend(self.from_front(waiting));
                }
                Some(out)
            }
            (Some("ping"), Some(id)) => Some(vec![BridgeOut::Back(
                json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            )]),
            (None, Some(_)) => {
                if let Some(result) = msg.get_mut("result").and_then(Value::as_object_mut) {
                    result
                        .entry("resultType")
                        .or_insert_with(|| json!("complete"));
                }
                None
            }
            _ => None,
        }
    }

    fn back_progress(&mut self, mut msg: Value) -> Vec<BridgeOut> {
        if self.mutants.has(Mutant::BridgeDropsProgress) {
            return Vec::new();
        }
        let Some(back) = msg.pointer("/params/progressToken").and_then(Value::as_i64) else {
            return Vec::new();
        };
        let Some(entry) = self.up.get(&back) else {
            return Vec::new();
        };
        let Some(token) = entry.front_token.clone() else {
            return Vec::new();
        };
        if entry.cancelled {
            return Vec::new();
        }
        if !self.mutants.has(Mutant::BridgeRawProgressToken) {
            msg["params"]["progressToken"] = token;
        }
        if self.mutants.has(Mutant::BridgeCancelsEarly) {
            // Its own timer, as it were: the call is cancelled upstream, the client not told.
            if let Some(entry) = self.up.get_mut(&back) {
                entry.cancelled = true;
            }
            let cancel = json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": back, "reason": "timed out"},
            });
            return vec![BridgeOut::Front(msg), BridgeOut::Back(cancel)];
        }
        vec![BridgeOut::Front(msg)]
    }

    /// The client's id of the client request the upstream knows as `back`.
    fn front_id_of(&self, back: Option<&Value>) -> Option<Value> {
        let k = back?.as_i64()?;
        self.up.get(&k).map(|e| e.front_id.clone())
    }

    /// A subscription tag names the listen request by its upstream id: the client knows it by
    /// its own (in a notification's `_meta`, or in the result that ends the subscription).
    /// Returns whether the tag names a subscription the client cancelled.
    fn tag_for_front(&self, msg: &mut Value) -> bool {
        let mut cancelled = false;
        for pointer in ["/params/_meta", "/result/_meta"] {
            let Some(meta) = msg.pointer_mut(pointer).and_then(Value::as_object_mut) else {
                continue;
            };
            let Some(k) = meta.get(META_SUBSCRIPTION_ID).and_then(Value::as_i64) else {
                continue;
            };
            if let Some(entry) = self.up.get(&k) {
                cancelled |= entry.cancelled;
                meta.insert(META_SUBSCRIPTION_ID.into(), entry.front_id.clone());
            }
        }
        cancelled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: Value, token: Option<&str>) -> Value {
        let mut meta = serde_json::Map::new();
        if let Some(t) = token {
            meta.insert("progressToken".into(), json!(t));
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "slow_op", "arguments": {}, "_meta": meta}})
    }

    fn back(out: Vec<BridgeOut>) -> Value {
        match out.as_slice() {
            [BridgeOut::Back(v)] => v.clone(),
            other => panic!("expected one message upstream, got {other:?}"),
        }
    }

    fn front(out: Vec<BridgeOut>) -> Value {
        match out.as_slice() {
            [BridgeOut::Front(v)] => v.clone(),
            other => panic!("expected one message to the client, got {other:?}"),
        }
    }

    #[test]
    fn ids_and_tokens_are_rewritten_upstream_and_restored_for_the_client() {
        let mut b = Bridge::new(MutantSet::NONE);
        let up = back(b.from_front(call(json!("a"), Some("tok"))));
        assert_eq!(up["id"], json!(101));
        assert_eq!(up["params"]["_meta"]["progressToken"], json!(101));
        let p = front(
            b.from_back(json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 101, "progress": 1}})),
        );
        assert_eq!(p["params"]["progressToken"], json!("tok"));
        let r = front(b.from_back(json!({"jsonrpc": "2.0", "id": 101, "result": {}})));
        assert_eq!(r["id"], json!("a"));
        assert_eq!(b.outstanding(), 0);
    }

    #[test]
    fn a_cancel_goes_upstream_mapped_and_what_follows_it_is_dropped() {
        let mut b = Bridge::new(MutantSet::NONE);
        b.from_front(call(json!(7), Some("t")));
        let c = back(b.from_front(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7}}),
        ));
        assert_eq!(c["params"]["requestId"], json!(101));
        let late = b.from_back(json!({"jsonrpc": "2.0", "id": 101, "result": {}}));
        assert!(late.is_empty());
        // A second cancel of the same request, and one of an unknown request, go nowhere.
        let again = b.from_front(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7}}),
        );
        assert!(again.is_empty());
    }

    #[test]
    fn the_mutants_bend_the_cancel_and_the_progress() {
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7}});
        let mut b = Bridge::new(MutantSet::NONE.with(Mutant::BridgeAnswersCancel));
        b.from_front(call(json!(7), None));
        assert_eq!(
            front(b.from_front(cancel.clone()))["error"]["code"],
            json!(0)
        );
        let mut b = Bridge::new(MutantSet::NONE.with(Mutant::BridgeCancelUnmapped));
        b.from_front(call(json!(7), None));
        assert_eq!(back(b.from_front(cancel))["params"]["requestId"], json!(7));
        let mut b = Bridge::new(MutantSet::NONE.with(Mutant::BridgeRawProgressToken));
        b.from_front(call(json!(7), Some("t")));
        let p = front(
            b.from_back(json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 101, "progress": 1}})),
        );
        assert_eq!(p["params"]["progressToken"], json!(101));
    }

    #[test]
    fn an_era_bridge_opens_the_upstream_and_turns_a_closed_stream_into_a_legacy_cancel() {
        let mut b = Bridge::era_bridge(MutantSet::NONE);
        let mut modern = call(json!(1), Some("t"));
        modern["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
        assert!(
            b.from_front(modern).is_empty(),
            "the call waits for the handshake"
        );
        let init = back(b.open_upstream());
        assert_eq!(init["method"], json!("initialize"));
        assert_eq!(init["params"]["protocolVersion"], json!("2025-11-25"));
        let out = b.from_back(json!({"jsonrpc": "2.0", "id": init["id"], "result": {}}));
        let [BridgeOut::Back(initialized), BridgeOut::Back(up)] = out.as_slice() else {
            panic!("expected initialized and the call upstream, got {out:?}");
        };
        assert_eq!(initialized["method"], json!("notifications/initialized"));
        assert_eq!(up["id"], json!(101));
        assert_eq!(up["params"]["_meta"], json!({"progressToken": 101}));
        let pong = back(b.from_back(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"})));
        assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 5, "result": {}}));
        let cancel = back(b.front_stream_closed(&json!(1)));
        assert_eq!(cancel["method"], json!("notifications/cancelled"));
        assert_eq!(cancel["params"]["requestId"], json!(101));
        assert!(b.front_stream_closed(&json!(1)).is_empty(), "one cancel");
        assert!(b
            .from_back(json!({"jsonrpc": "2.0", "id": 101, "result": {}}))
            .is_empty());
        // A result that goes to the front gets the front era's resultType.
        b.from_front(call(json!(2), None));
        let r = front(b.from_back(json!({"jsonrpc": "2.0", "id": 102, "result": {"content": []}})));
        assert_eq!(r["result"]["resultType"], json!("complete"));
        // A bridge of one era sees no streams; the mutant does not translate the close.
        assert!(Bridge::new(MutantSet::NONE)
            .front_stream_closed(&json!(1))
            .is_empty());
        let mut b = Bridge::era_bridge(MutantSet::NONE.with(Mutant::BridgeIgnoresStreamClose));
        b.open_upstream();
        b.from_back(json!({"jsonrpc": "2.0", "id": "bridge-initialize", "result": {}}));
        b.from_front(call(json!(1), None));
        assert!(b.front_stream_closed(&json!(1)).is_empty());
    }

    #[test]
    fn a_server_request_is_mapped_the_other_way() {
        let mut b = Bridge::new(MutantSet::NONE);
        let ping = front(b.from_back(json!({"jsonrpc": "2.0", "id": "s1", "method": "ping"})));
        assert_eq!(ping["id"], json!(1));
        let pong = back(b.from_front(json!({"jsonrpc": "2.0", "id": 1, "result": {}})));
        assert_eq!(pong["id"], json!("s1"));
    }
}
