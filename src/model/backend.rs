//! The backend a tool calls: a stand-in for a database or queue whose ledger witnesses
//! whether cancellation reached past the protocol layer.
//!
//! A tool's work is a sequence of [`BackendCall::Work`] calls for its request, holding a
//! resource (think of a row lock) from the first call until [`BackendCall::Release`]. The
//! oracle reads the ledger as `work` and `release` trace events: work after a cancel was
//! received means the server did not stop; a resource never released is a leak.

use std::collections::BTreeMap;

use crate::time::Time;
use crate::wire::RequestId;

/// A call from the server to the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendCall {
    /// One unit of work for a request; the first one acquires its resource.
    Work {
        /// The request the work is for.
        request: RequestId,
        /// The 0-based step number.
        step: u32,
    },
    /// The request's resource is released (work finished or was abandoned).
    Release {
        /// The request.
        request: RequestId,
    },
}

impl BackendCall {
    /// The request the call is for.
    pub fn request(&self) -> &RequestId {
        match self {
            BackendCall::Work { request, .. } | BackendCall::Release { request } => request,
        }
    }
}

/// The backend's ledger: which requests hold a resource now, and what happened when.
#[derive(Debug, Clone, Default)]
pub struct Backend {
    held: BTreeMap<RequestId, Time>,
}

impl Backend {
    /// An idle backend.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies a call at `now`.
    pub fn handle_call(&mut self, now: Time, call: &BackendCall) {
        match call {
            BackendCall::Work { request, .. } => {
                self.held.entry(request.clone()).or_insert(now);
            }
            BackendCall::Release { request } => {
                self.held.remove(request);
            }
        }
    }

    /// Requests holding a resource, with the time they acquired it.
    pub fn held(&self) -> impl Iterator<Item = (&RequestId, Time)> {
        self.held.iter().map(|(r, t)| (r, *t))
    }

    /// How many requests hold a resource now.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// Releases everything held (the session that held it died), returning the requests in
    /// id order: each is a `release` in the ledger.
    pub fn release_all(&mut self) -> Vec<RequestId> {
        std::mem::take(&mut self.held).into_keys().collect()
    }
}
