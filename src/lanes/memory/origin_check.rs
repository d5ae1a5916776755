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

use super::SimTrace;
use crate::lanes::live::probe::rebinding::{opening, FIRST_STREAM, FOREIGN_HOST};
use crate::lanes::response_writer::{ResponsePart, ServerWrite};
use crate::lanes::virtual_peer::{VirtualServer, VirtualWrite};
use crate::lanes::RunSink;
use crate::model::{Outcome, StreamId, Transport};
use crate::trace::{EventKind, Side, WireEvent};
use crate::wire::{self, Era, RequestId};

/// How long a check waits for its answer, as the live probe's five seconds.
const CHECK_BOUND: Duration = Duration::from_secs(5);

/// The host the program is reached at in the checks that keep its own (the shims give the
/// program the host it bound when a request names none).
const OWN_HOST: &str = "127.0.0.1";

/// Runs both checks against `server`, from the run's clock on (which they move).
pub(super) fn check(server: &mut VirtualServer<'_>, era: Era, rec: &mut SimTrace) {
    // A program that ran ahead to the end of the run is met where its clock is.
    rec.now = rec.now.max(server.clock());
    let cases = [
        (OWN_HOST.to_owned(), Some(format!("http://{FOREIGN_HOST}"))),
        (FOREIGN_HOST.to_owned(), None),
    ];
    for (k, (host, origin)) in cases.into_iter().enumerate() {
        if server.stopped() {
            break;
        }
        let stream = StreamId(FIRST_STREAM + k as u64);
        let msg = opening(era, k);
        let mut headers = wire::http::request_headers(&msg);
        if era.is_legacy() {
            headers.remove("mcp-method");
            headers.remove("mcp-protocol-version");
        }
        headers.insert("host".into(), host);
        if let Some(o) = origin {
            headers.insert("origin".into(), o);
        }
        let mut sent = WireEvent::message(Transport::Http, Some(stream), &msg);
        sent.headers = Some(headers.clone());
        rec.record(Side::Client, EventKind::Send(sent));
        let body = wire::encode(&msg).unwrap_or_default();
        // The program's own host is the one the shim gives a request that names none.
        if headers.get("host").map(String::as_str) == Some(OWN_HOST) {
            headers.remove("host");
        }
        let now = rec.now;
        server.request(
            now,
            stream,
            wire::http::Method::Post,
            body.as_bytes(),
            headers,
            rec,
        );
        let answer = await_answer(server, stream, rec);
        let id = msg.id().cloned().unwrap_or(RequestId::Number(0));
        record_answer(era, stream, id, answer, rec);
        server.stream_closed(rec.now, stream, Side::Client, rec);
    }
}

/// What came back on a check's stream.
#[derive(Default)]
struct Answer {
    status: Option<u16>,
    content_type: Option<String>,
    body: Vec<u8>,
}

/// Runs the program until `stream`'s response ends or the bound passes.
fn await_answer(server: &mut VirtualServer<'_>, stream: StreamId, rec: &mut SimTrace) -> Answer {
    let deadline = rec.now + CHECK_BOUND;
    let mut answer = Answer::default();
    loop {
        while let Some(out) = server.poll_io(rec.now, rec) {
            match out {
                VirtualWrite::Write(ServerWrite::Http(s, part)) if s == stream => match part {
                    ResponsePart::Head(head) => {
                        answer.status = Some(head.status);
                        answer.content_type = head.content_type.map(str::to_owned);
                    }
                    ResponsePart::Body(bytes) => answer.body.extend_from_slice(&bytes),
                    ResponsePart::End => return answer,
                },
                VirtualWrite::Exited => return answer,
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
            _ => return answer,
        }
    }
}

/// The client's side of a check's answer, as the live probe records it.
fn record_answer(
    era: Era,
    stream: StreamId,
    id: RequestId,
    answer: Answer,
    sink: &mut impl RunSink,
) {
    let Some(status) = answer.status else {
        sink.record(
            Side::Client,
            EventKind::Close {
                stream: Some(stream.0),
                by: Side::Server,
                reason: None,
            },
        );
        sink.record(
            Side::Client,
            EventKind::Outcome {
                request: id,
                outcome: Outcome::Lost,
            },
        );
        return;
    };
    sink.record(
        Side::Client,
        EventKind::Status {
            stream: Some(stream.0),
            status,
            content_type: answer.content_type.clone(),
            headers: None,
        },
    );
    let json = answer
        .content_type
        .as_deref()
        .is_some_and(|c| c.starts_with("application/json"));
    if json && !answer.body.is_empty() {
        let (w, _) = crate::lanes::recorder::observe_as_written_in(
            era,
            Transport::Http,
            Some(stream),
            &answer.body,
        );
        sink.record(Side::Client, EventKind::Recv(w));
    }
    let outcome = match status < 400 {
        true => Outcome::Result,
        false => Outcome::Error,
    };
    sink.record(
        Side::Client,
        EventKind::Outcome {
            request: id,
            outcome,
        },
    );
    sink.record(
        Side::Client,
        EventKind::Close {
            stream: Some(stream.0),
            by: Side::Client,
            reason: None,
        },
    );
}
