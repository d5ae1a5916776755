//! The `backend` host: receives the server's work and release calls over TCP and keeps the
//! ledger. A server process that dies drops its connection, and with it every resource its
//! session held (as a database does with a dead session's locks).

use tokio::io::{AsyncBufReadExt, BufReader};

use super::{record, spawn_guarded, SharedRef, BACKEND_PORT};
use crate::model::{Backend, BackendCall};
use crate::trace::{EventKind, Side};
use crate::wire::RequestId;

/// One call on the wire between server and backend: `{"work": id}` or `{"release": id}`.
pub(crate) fn encode_call(call: &BackendCall) -> String {
    let line = match call {
        BackendCall::Work { request, .. } => serde_json::json!({ "work": request.to_json() }),
        BackendCall::Release { request } => serde_json::json!({ "release": request.to_json() }),
    };
    format!("{line}\n")
}

/// A line of [`encode_call`] read back (the step is not sent: the ledger does not need it).
fn decode_call(line: &str) -> Option<BackendCall> {
    let v = crate::wire::json::value_from_str(line).ok()?;
    if let Some(request) = v.get("work").and_then(RequestId::from_json) {
        Some(BackendCall::Work { request, step: 0 })
    } else {
        let request = v.get("release").and_then(RequestId::from_json)?;
        Some(BackendCall::Release { request })
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
                    // One ledger per session: the model's, as the other lanes keep it.
                    let mut ledger = Backend::new();
                    let mut lines = BufReader::new(stream).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let Some(call) = decode_call(&line) else {
                            continue;
                        };
                        let before = ledger.held_count();
                        ledger.handle_call(super::now(), &call);
                        let mut shared = shared2.borrow_mut();
                        shared.backend_held = shared.backend_held + ledger.held_count() - before;
                        drop(shared);
                        let kind = match call {
                            BackendCall::Work { request, .. } => EventKind::Work { request },
                            BackendCall::Release { request } => EventKind::Release { request },
                        };
                        record(&shared2, Side::Backend, kind);
                    }
                    // The server's session ended: whatever it held is released.
                    for request in ledger.release_all() {
                        shared2.borrow_mut().backend_held -= 1;
                        record(&shared2, Side::Backend, EventKind::Release { request });
                    }
                });
            }
        }
    });
}
