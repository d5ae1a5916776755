//! The `backend` host: receives the server's work and release calls over TCP and keeps the
//! ledger. A server process that dies drops its connection, and with it every resource its
//! session held (as a database does with a dead session's locks).

use std::collections::BTreeSet;

use tokio::io::{AsyncBufReadExt, BufReader};

use super::{record, spawn_guarded, SharedRef, BACKEND_PORT};
use crate::trace::{EventKind, Side};
use crate::wire::RequestId;

/// One call on the wire between server and backend: `{"work": id}` or `{"release": id}`.
pub(crate) fn encode_call(call: &crate::model::BackendCall) -> String {
    let line = match call {
        crate::model::BackendCall::Work { request, .. } => {
            serde_json::json!({ "work": request.to_json() })
        }
        crate::model::BackendCall::Release { request } => {
            serde_json::json!({ "release": request.to_json() })
        }
    };
    format!("{line}\n")
}

fn request_id(v: &serde_json::Value) -> Option<RequestId> {
    match v {
        serde_json::Value::String(s) => Some(RequestId::String(s.clone())),
        serde_json::Value::Number(n) => n.as_i64().map(RequestId::Number),
        _ => None,
    }
}

pub(crate) fn host(sim: &mut turmoil::Sim<'_>, shared: &SharedRef) {
    let shared = shared.clone();
    sim.host("backend", move || {
        let shared = shared.clone();
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", BACKEND_PORT)).await?;
            loop {
                let (stream, _) = listener.accept().await?;
                let shared2 = shared.clone();
                spawn_guarded(&shared, async move {
                    let mut held: BTreeSet<RequestId> = BTreeSet::new();
                    let mut lines = BufReader::new(stream).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let Ok(v) = crate::wire::json::value_from_str(&line) else {
                            continue;
                        };
                        if let Some(id) = v.get("work").and_then(request_id) {
                            if held.insert(id.clone()) {
                                shared2.borrow_mut().backend_held += 1;
                            }
                            record(&shared2, Side::Backend, EventKind::Work { request: id });
                        } else if let Some(id) = v.get("release").and_then(request_id) {
                            if held.remove(&id) {
                                shared2.borrow_mut().backend_held -= 1;
                            }
                            record(&shared2, Side::Backend, EventKind::Release { request: id });
                        }
                    }
                    // The server's session ended: whatever it held is released.
                    for id in held {
                        shared2.borrow_mut().backend_held -= 1;
                        record(&shared2, Side::Backend, EventKind::Release { request: id });
                    }
                });
            }
        }
    });
}
