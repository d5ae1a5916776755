//! The in-memory lane's server: the model's, through its driver, or a virtual peer (a real
//! program under the lane's clock, feature `live`). The lane moves bytes and time the same way
//! for both; only what is behind these calls differs.

use super::response_writer::ServerWrite;
use super::server_driver::{ServerDriver, ServerOutput};
#[cfg(feature = "live")]
use super::virtual_peer::{VirtualServer, VirtualWrite};
use super::RunSink;
use crate::model::{Backend, Server, StreamId};
use crate::time::Time;
use crate::trace::{EventKind, Side};
use crate::wire::http::Method;
use std::collections::BTreeMap;

/// What the lane carries for its server.
pub(super) enum SimServerOutput {
    /// A write for the client (recorded already).
    Write(ServerWrite),
    /// The server's process ended by itself: its pipe breaks, its streams are cut.
    #[cfg_attr(not(feature = "live"), allow(dead_code))] // only a virtual server's ends
    Exited,
}

/// The server of an in-memory run (one value per run, made once: the variants' sizes do not
/// matter).
#[allow(clippy::large_enum_variant)]
pub(super) enum SimServer<'p> {
    /// The reference server (or a mutant), with its in-process backend.
    Model(ServerDriver),
    /// A real program under the lane's clock.
    #[cfg(feature = "live")]
    Virtual(VirtualServer<'p>),
    #[cfg(not(feature = "live"))]
    #[allow(dead_code)]
    Never(std::convert::Infallible, std::marker::PhantomData<&'p ()>),
}

impl SimServer<'_> {
    pub(super) fn poll_timeout(&self) -> Option<Time> {
        match self {
            SimServer::Model(d) => d.server().poll_timeout(),
            #[cfg(feature = "live")]
            SimServer::Virtual(v) => v.poll_timeout(),
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }

    /// Brings a server that runs ahead to the lane's next instant (a virtual peer whose
    /// shim cannot show its next timer); whether it wrote before it.
    pub(super) fn catch_up(&mut self, until: Time) -> bool {
        match self {
            // The model's server shows its next deadline: nothing to catch up.
            SimServer::Model(_) => {
                let _ = until;
                false
            }
            #[cfg(feature = "live")]
            SimServer::Virtual(v) => v.catch_up(until),
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }

    pub(super) fn timers(&mut self, now: Time) {
        match self {
            SimServer::Model(d) => d.timers(now),
            #[cfg(feature = "live")]
            SimServer::Virtual(v) => v.timers(now),
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }

    pub(super) fn stdio_bytes(&mut self, now: Time, bytes: &[u8], sink: &mut impl RunSink) {
        match self {
            SimServer::Model(d) => d.stdio_bytes(now, bytes, sink),
            #[cfg(feature = "live")]
            SimServer::Virtual(v) => v.stdio_bytes(now, bytes),
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }

    /// A POST's body, or a legacy `GET` or `DELETE`, on `stream`.
    pub(super) fn request(
        &mut self,
        now: Time,
        stream: StreamId,
        method: Method,
        body: &[u8],
        headers: Option<BTreeMap<String, String>>,
        sink: &mut impl RunSink,
    ) {
        match self {
            SimServer::Model(d) => match method {
                Method::Post => d.post(now, stream, body, headers, sink),
                m => d.open(now, stream, m, headers.unwrap_or_default(), sink),
            },
            #[cfg(feature = "live")]
            SimServer::Virtual(v) => {
                v.request(now, stream, method, body, headers.unwrap_or_default(), sink)
            }
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }

    pub(super) fn stream_closed(
        &mut self,
        now: Time,
        stream: StreamId,
        by: Side,
        sink: &mut impl RunSink,
    ) {
        match self {
            SimServer::Model(d) => d.stream_closed(now, stream, by, sink),
            #[cfg(feature = "live")]
            SimServer::Virtual(v) => v.stream_closed(now, stream, by, sink),
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }

    pub(super) fn input_closed(&mut self, now: Time, sink: &mut impl RunSink) {
        match self {
            SimServer::Model(d) => d.input_closed(now, sink),
            #[cfg(feature = "live")]
            SimServer::Virtual(v) => v.input_closed(now, sink),
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }

    /// The server process dies; `fresh` is the model's restarted server. The requests whose
    /// backend resources the dead process held are released and returned.
    pub(super) fn crash(&mut self, fresh: impl FnOnce() -> Server) -> Vec<crate::wire::RequestId> {
        match self {
            SimServer::Model(d) => {
                let released = d
                    .backend_mut()
                    .map(Backend::release_all)
                    .unwrap_or_default();
                d.restart(fresh());
                released
            }
            #[cfg(feature = "live")]
            SimServer::Virtual(v) => {
                v.kill();
                Vec::new()
            }
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }

    /// The next output, recorded.
    pub(super) fn poll_io(
        &mut self,
        now: Time,
        sink: &mut impl RunSink,
    ) -> Option<SimServerOutput> {
        match self {
            SimServer::Model(d) => loop {
                match d.poll_io(now, sink)? {
                    ServerOutput::Write(w) => return Some(SimServerOutput::Write(w)),
                    // The backend is in process: the driver keeps its ledger.
                    ServerOutput::Backend(_) => {}
                }
            },
            #[cfg(feature = "live")]
            SimServer::Virtual(v) => v.poll_io(now, sink).map(|w| match w {
                VirtualWrite::Write(w) => SimServerOutput::Write(w),
                VirtualWrite::Exited => SimServerOutput::Exited,
            }),
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }

    /// Nothing is running at the server: no job, no resource held. A virtual server's work is
    /// its own: only what the client still waits for says it is unsettled.
    pub(super) fn settled(&self) -> bool {
        match self {
            SimServer::Model(d) => d.server().active_jobs() == 0 && d.backend_held() == 0,
            #[cfg(feature = "live")]
            SimServer::Virtual(_) => true,
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }

    /// The run must stop (a virtual peer failed, or escaped beyond going on).
    pub(super) fn stopped(&self) -> bool {
        match self {
            SimServer::Model(_) => false,
            #[cfg(feature = "live")]
            SimServer::Virtual(v) => v.stopped(),
            #[cfg(not(feature = "live"))]
            SimServer::Never(n, _) => match *n {},
        }
    }
}

/// The close of the server's pipe (or of its process), as the lane records a crash.
pub(super) fn process_gone() -> EventKind {
    EventKind::Close {
        stream: None,
        by: Side::Server,
        reason: None,
    }
}
