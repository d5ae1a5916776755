//! A virtual HTTP server's check of DNS-rebinding protection (2026-07-28 §9 I63,
//! 2025-11-25 §5: servers MUST validate `Origin`), as the live probe makes it
//! (`crate::lanes::live::probe::rebinding`): after the run, two POSTs on streams of their own,
//! one with a foreign `Origin`, one with a foreign `Host`, each carrying the request a client
//! of the run's era opens with. The program's answer (status, and its JSON body) is recorded
//! on both sides and `origin-validated` judges it, so a virtual run gives the live verdict.
//!
//! A virtual server is local by construction (the program is reached in-process), so the
//! checks always apply. Each waits for its answer up to [`CHECK_BOUND`] of virtual time.

use std::time::Duration;

use crate::lanes::live::probe::rebinding::{checks, Answer};
use crate::lanes::response_writer::{ResponsePart, ServerWrite};
use crate::lanes::virtual_peer::{VirtualServer, VirtualWrite};
use crate::lanes::RunSink;
use crate::lanes::SimTrace;
use crate::model::StreamId;
use crate::trace::Side;
use crate::wire::http::Method;
use crate::wire::{self, Era};

/// How long a check waits for its answer, as the live probe's five seconds.
const CHECK_BOUND: Duration = Duration::from_secs(5);

/// The host the program is reached at in the checks that keep its own (the shims give the
/// program the host it bound when a request names none).
const OWN_HOST: &str = "127.0.0.1";

/// Runs both checks against `server`, from the run's clock on (which they move).
pub(super) fn check(server: &mut VirtualServer<'_>, era: Era, rec: &mut SimTrace) {
    // A program that ran ahead to the end of the run is met where its clock is.
    rec.now = rec.now.max(server.clock());
    for c in checks(era, OWN_HOST) {
        if server.stopped() {
            break;
        }
        rec.record(Side::Client, c.sent());
        // The program's own host is the one the shim gives a request that names none.
        let mut headers = c.headers.clone();
        if headers.get("host").map(String::as_str) == Some(OWN_HOST) {
            headers.remove("host");
        }
        let body = wire::encode(&c.msg).unwrap_or_default();
        let now = rec.now;
        server.request(now, c.stream, Method::Post, body.as_bytes(), headers, rec);
        let answer = await_answer(server, c.stream, rec);
        for e in c.answered(era, answer) {
            rec.record(Side::Client, e);
        }
        server.stream_closed(rec.now, c.stream, Side::Client, rec);
    }
}

/// Runs the program until `stream`'s response ends or the bound passes: its status, content
/// type and body, or `None` when no status came.
fn await_answer(
    server: &mut VirtualServer<'_>,
    stream: StreamId,
    rec: &mut SimTrace,
) -> Option<Answer> {
    let deadline = rec.now + CHECK_BOUND;
    let mut head: Option<(u16, Option<String>)> = None;
    let mut body = Vec::new();
    loop {
        while let Some(out) = server.poll_io(rec.now, rec) {
            match out {
                VirtualWrite::Write(ServerWrite::Http(s, part)) if s == stream => match part {
                    ResponsePart::Head(h) => {
                        head = Some((h.status, h.content_type.map(str::to_owned)));
                    }
                    ResponsePart::Body(bytes) => body.extend_from_slice(&bytes),
                    ResponsePart::End => return head.map(|(s, c)| (s, c, body)),
                },
                VirtualWrite::Exited => return head.map(|(s, c)| (s, c, body)),
                _ => {}
            }
        }
        match server.poll_timeout() {
            Some(t) if t <= deadline && !server.stopped() => {
                rec.now = t.max(rec.now);
                server.timers(rec.now);
            }
            // A shim that runs ahead is brought on to its next write, or the bound.
            _ if server.catch_up(deadline) => {}
            _ => return head.map(|(s, c)| (s, c, body)),
        }
    }
}
