//! The `bridge` host: the reference intermediary ([`Bridge`]) between the client and the
//! server, in one of two shapes.
//!
//! [`host`] is stdio on both hops (NDJSON over TCP, as a stdio↔stdio gateway is). Each
//! connection the client opens gets a connection of its own to the server and a fresh bridge,
//! as a gateway that starts one upstream per client does. When either side ends its connection
//! the bridge ends the other: a server crash reaches the client as its pipe breaking, and the
//! client's reconnect brings a new upstream.
//!
//! [`era_host`] is the era bridge ([`Bridge::era_bridge`]): hyper's HTTP/1.1 server on the
//! front, where the client speaks 2026-07-28 and each POST of a request gets an SSE stream,
//! and one stdio connection upstream, which the bridge opens with its own `initialize`. When
//! hyper drops a request's stream before its answer, the client closed it: that is the cancel
//! the bridge translates.
//!
//! The bridge records nothing itself: as with a real intermediary, the trace holds what the
//! client and the server saw, each on its hop.

use crate::lanes::response_writer::{ResponseWriter, ServerWrite};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use http_body_util::{Either, Full};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::server::stream_of_header;
use super::{spawn_guarded, SharedRef, SERVER_HTTP_PORT, SERVER_STDIO_PORT};
use crate::framing::ndjson::{LineDecoder, LineOptions};
use crate::lanes::http_serve::{serve_connection, HttpEvent, HttpLimits, Notify, Responder};
use crate::model::{Bridge, BridgeOut, Mutant, MutantSet, ServerTransmit, SseStyle, StreamId};
use crate::wire::http::Method;

/// What reaches the bridge's loop.
enum BridgeInput {
    Front(Vec<u8>),
    Back(Vec<u8>),
    /// One side ended its connection.
    Closed,
    /// The era bridge's front: a POST, or a stream the client dropped.
    Http(HttpEvent),
}

/// Lines that do not end in a newline, CR LF and blank lines are read: the peer's framing is
/// its own hop's to judge.
fn lenient() -> LineOptions {
    LineOptions {
        allow_crlf: true,
        allow_blank_lines: true,
        ..LineOptions::default()
    }
}

/// The stdio↔stdio bridge: one upstream connection and one fresh [`Bridge`] per client
/// connection.
pub(crate) fn host(sim: &mut turmoil::Sim<'_>, shared: &SharedRef, mutants: MutantSet) {
    let shared = shared.clone();
    sim.host("bridge", move || {
        let shared = shared.clone();
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_STDIO_PORT)).await?;
            // The bridge of the last pair of connections, which the next one goes on from.
            let last = Rc::new(RefCell::new(Bridge::new(mutants)));
            while let Ok((front, _)) = listener.accept().await {
                let back = connect_upstream().await;
                let queued = mutants.has(Mutant::BridgeAnswersCancel);
                spawn_guarded(
                    &shared,
                    relay(shared.clone(), front, back, last.clone(), queued),
                );
            }
            Ok(())
        }
    });
}

/// A stdio connection to the server, once it listens (it may be restarting).
async fn connect_upstream() -> turmoil::net::TcpStream {
    super::connect_retrying(
        ("server", SERVER_STDIO_PORT),
        std::time::Duration::from_millis(10),
    )
    .await
}

/// How long an upstream message spends inside a bridge that answers cancels itself before it
/// is written to the client ([`Mutant::BridgeAnswersCancel`]): PyPI mcp-proxy 0.13.0 passes
/// upstream messages on through a queue of its own while its answer to a cancel is written at
/// once, so a progress notification already on its way can follow that answer (the race its
/// check shows on some seeds). The reference bridge writes each message as it handles it.
pub(crate) const FORWARD_QUEUE: std::time::Duration = std::time::Duration::from_millis(2);

/// Where the bridge writes to the client: straight to the connection, or, for a bridge that
/// answers cancels itself, through a writer task that upstream messages reach only after
/// [`FORWARD_QUEUE`].
enum FrontWriter {
    Direct(turmoil::net::tcp::OwnedWriteHalf),
    Queued {
        /// Written as soon as the writer task gets to it.
        now: mpsc::UnboundedSender<String>,
        /// Written [`FORWARD_QUEUE`] after it was handled.
        later: mpsc::UnboundedSender<(tokio::time::Instant, String)>,
    },
}

impl FrontWriter {
    fn queued(shared: &SharedRef, mut write: turmoil::net::tcp::OwnedWriteHalf) -> FrontWriter {
        let (now, mut lines) = mpsc::unbounded_channel::<String>();
        let (later, mut queue) = mpsc::unbounded_channel::<(tokio::time::Instant, String)>();
        let to_writer = now.clone();
        spawn_guarded(shared, async move {
            while let Some((due, text)) = queue.recv().await {
                tokio::time::sleep_until(due).await;
                let _ = to_writer.send(text);
            }
        });
        spawn_guarded(shared, async move {
            while let Some(text) = lines.recv().await {
                let _ = write.write_all(text.as_bytes()).await;
            }
            let _ = write.shutdown().await;
        });
        FrontWriter::Queued { now, later }
    }

    /// Writes `text`; `from_upstream` marks a message passed on from the server.
    async fn write(&mut self, text: &str, from_upstream: bool) {
        match self {
            FrontWriter::Direct(w) => {
                let _ = w.write_all(text.as_bytes()).await;
            }
            FrontWriter::Queued { later, .. } if from_upstream => {
                let due = tokio::time::Instant::now() + FORWARD_QUEUE;
                let _ = later.send((due, text.to_owned()));
            }
            FrontWriter::Queued { now, .. } => {
                let _ = now.send(text.to_owned());
            }
        }
    }

    async fn shutdown(self) {
        if let FrontWriter::Direct(mut w) = self {
            let _ = w.shutdown().await;
        }
        // A queued writer ends once its queue is drained and its senders are gone.
    }
}

/// Relays one client connection and its upstream connection through a fresh [`Bridge`];
/// `queued`: upstream messages reach the client through [`FORWARD_QUEUE`].
async fn relay(
    shared: SharedRef,
    front: turmoil::net::TcpStream,
    back: turmoil::net::TcpStream,
    last: Rc<RefCell<Bridge>>,
    queued: bool,
) {
    let (front_read, front_write) = front.into_split();
    let mut front_write = match queued {
        true => FrontWriter::queued(&shared, front_write),
        false => FrontWriter::Direct(front_write),
    };
    let (back_read, mut back_write) = back.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let readers = [
        spawn_guarded(
            &shared,
            read_into(front_read, tx.clone(), BridgeInput::Front),
        ),
        spawn_guarded(&shared, read_into(back_read, tx, BridgeInput::Back)),
    ];
    let mut bridge = Bridge::after(&last.borrow());
    let (mut from_front, mut from_back) =
        (LineDecoder::new(lenient()), LineDecoder::new(lenient()));
    while let Some(input) = rx.recv().await {
        let (decoder, front_side, bytes) = match input {
            BridgeInput::Front(b) => (&mut from_front, true, b),
            BridgeInput::Back(b) => (&mut from_back, false, b),
            BridgeInput::Closed | BridgeInput::Http(_) => break,
        };
        decoder.push(&bytes);
        while let Some(line) = decoder.next_line() {
            let Ok(line) = line else { continue };
            let text = String::from_utf8_lossy(&line.bytes).into_owned();
            // Lines for the client (`true`) or the upstream, as written.
            let outs: Vec<(bool, String)> = match crate::wire::json::value_from_str(&text) {
                Ok(msg) => {
                    let outs = if front_side {
                        bridge.from_front(msg)
                    } else {
                        bridge.from_back(msg)
                    };
                    outs.into_iter()
                        .map(|o| match o {
                            BridgeOut::Front(m) => (true, m.to_string()),
                            BridgeOut::Back(m) => (false, m.to_string()),
                        })
                        .collect()
                }
                // What is not JSON is passed on as it is: the peer's own fault to judge.
                Err(_) => vec![(!front_side, text)],
            };
            for (to_front, mut text) in outs {
                text.push('\n');
                if to_front {
                    front_write.write(&text, !front_side).await;
                } else {
                    let _ = back_write.write_all(text.as_bytes()).await;
                }
            }
        }
    }
    *last.borrow_mut() = Bridge::after(&bridge);
    for r in readers {
        r.abort();
    }
    front_write.shutdown().await;
    let _ = back_write.shutdown().await;
}

/// Reads a connection into the loop until it ends.
async fn read_into(
    mut read: turmoil::net::tcp::OwnedReadHalf,
    tx: mpsc::UnboundedSender<BridgeInput>,
    wrap: fn(Vec<u8>) -> BridgeInput,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let _ = tx.send(wrap(buf[..n].to_vec()));
            }
        }
    }
    let _ = tx.send(BridgeInput::Closed);
}

/// The era bridge: an HTTP front for every client connection, one stdio upstream.
pub(crate) fn era_host(sim: &mut turmoil::Sim<'_>, shared: &SharedRef, mutants: MutantSet) {
    let shared = shared.clone();
    sim.host("bridge", move || {
        let shared = shared.clone();
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_HTTP_PORT)).await?;
            let back = connect_upstream().await;
            let (back_read, back_write) = back.into_split();
            let (tx, rx) = mpsc::unbounded_channel();
            spawn_guarded(&shared, read_into(back_read, tx.clone(), BridgeInput::Back));
            let notify: Notify = Rc::new(move |e| {
                let _ = tx.send(BridgeInput::Http(e));
            });
            let front_notify = notify.clone();
            let shared2 = shared.clone();
            spawn_guarded(&shared, async move {
                while let Ok((stream, _)) = listener.accept().await {
                    spawn_guarded(
                        &shared2,
                        serve_connection(
                            stream,
                            front_notify.clone(),
                            stream_of_header,
                            HttpLimits::default(),
                        ),
                    );
                }
            });
            EraRelay::new(mutants, back_write, notify).run(rx).await;
            Ok(())
        }
    });
}

/// The era bridge's loop: the front's streams, the upstream connection, and the [`Bridge`].
struct EraRelay {
    bridge: Bridge,
    back: turmoil::net::tcp::OwnedWriteHalf,
    from_back: LineDecoder,
    http: Responder,
    /// Writes the front's responses as the reference server writes its own.
    writer: ResponseWriter,
    /// The client's request on each open stream: its id and progress token, by which what
    /// the bridge sends the front finds its stream (a handful are open at once).
    open: BTreeMap<StreamId, (Value, Option<Value>)>,
}

impl EraRelay {
    fn new(mutants: MutantSet, back: turmoil::net::tcp::OwnedWriteHalf, notify: Notify) -> Self {
        EraRelay {
            bridge: Bridge::era_bridge(mutants),
            back,
            from_back: LineDecoder::new(lenient()),
            http: Responder::new(notify),
            writer: ResponseWriter::new(SseStyle::Plain, false),
            open: BTreeMap::new(),
        }
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<BridgeInput>) {
        let opening = self.bridge.open_upstream();
        self.route(opening).await;
        while let Some(input) = rx.recv().await {
            let outs = match input {
                BridgeInput::Http(HttpEvent::Post(p)) => {
                    self.post(p.method, p.stream, &p.body, p.respond)
                }
                BridgeInput::Http(HttpEvent::Dropped(stream)) => self.dropped(stream),
                BridgeInput::Http(HttpEvent::ConnectionRefused) => Vec::new(),
                BridgeInput::Back(bytes) => {
                    self.from_back.push(&bytes);
                    let mut outs = Vec::new();
                    while let Some(line) = self.from_back.next_line() {
                        let Ok(line) = line else { continue };
                        let text = String::from_utf8_lossy(&line.bytes);
                        if let Ok(msg) = crate::wire::json::value_from_str(&text) {
                            outs.extend(self.bridge.from_back(msg));
                        }
                    }
                    outs
                }
                // The upstream went away (the run's end: this bridge is swept without crashes).
                BridgeInput::Closed => break,
                // The front is HTTP: no stdio bytes come from it.
                BridgeInput::Front(_) => Vec::new(),
            };
            self.route(outs).await;
        }
    }

    /// A POST on the front: a request gets an SSE stream, anything else 202 (2026-07-28 has no
    /// other method on the endpoint, and no client notifications over HTTP; one passes on).
    fn post(
        &mut self,
        method: Option<Method>,
        stream: StreamId,
        body: &[u8],
        respond: tokio::sync::oneshot::Sender<crate::lanes::http_serve::HttpResponse>,
    ) -> Vec<BridgeOut> {
        let msg = (method == Some(Method::Post))
            .then(|| crate::wire::json::value_from_str(&String::from_utf8_lossy(body)).ok())
            .flatten();
        let Some(msg) = msg else {
            let mut refused = hyper::Response::new(Either::Right(Full::new(Bytes::new())));
            *refused.status_mut() = hyper::StatusCode::BAD_REQUEST;
            let _ = respond.send(refused);
            return Vec::new();
        };
        self.http.post(stream, respond);
        match (msg.get("method"), msg.get("id")) {
            (Some(_), Some(id)) => {
                let token = msg.pointer("/params/_meta/progressToken").cloned();
                self.open.insert(stream, (id.clone(), token));
                self.transmit(ServerTransmit::SseStart { stream });
            }
            _ => self.transmit(ServerTransmit::Accepted { stream }),
        }
        self.bridge.from_front(msg)
    }

    /// hyper dropped `stream`: if its request was still open, the client closed it.
    fn dropped(&mut self, stream: StreamId) -> Vec<BridgeOut> {
        if !self.http.dropped(stream) {
            return Vec::new();
        }
        match self.open.remove(&stream) {
            Some((id, _)) => self.bridge.front_stream_closed(&id),
            None => Vec::new(),
        }
    }

    /// Sends what the bridge emitted: upstream as lines, to the front as events on the stream
    /// of the request each belongs to (a result ends it). What belongs to no open stream has
    /// nowhere to go on a 2026-07-28 front and is dropped.
    async fn route(&mut self, outs: Vec<BridgeOut>) {
        for out in outs {
            match out {
                BridgeOut::Back(msg) => {
                    let mut line = msg.to_string();
                    line.push('\n');
                    let _ = self.back.write_all(line.as_bytes()).await;
                }
                BridgeOut::Front(msg) => self.send_to_front(&msg),
            }
        }
    }

    fn send_to_front(&mut self, msg: &Value) {
        let is_response = msg.get("method").is_none();
        let belongs = |(id, token): &(Value, Option<Value>)| match is_response {
            true => msg.get("id") == Some(id),
            false => token.is_some() && msg.pointer("/params/progressToken") == token.as_ref(),
        };
        let Some(stream) = self.open.iter().find(|(_, r)| belongs(r)).map(|(s, _)| *s) else {
            return;
        };
        let Ok(decoded) = crate::wire::decode(msg.to_string().as_bytes()) else {
            return;
        };
        self.transmit(ServerTransmit::SseEvent {
            stream,
            msg: decoded,
            event_id: None,
        });
        if is_response {
            self.open.remove(&stream);
            self.transmit(ServerTransmit::SseEnd { stream });
        }
    }

    /// Writes `t` to the front (an HTTP response's part; the front has no stdio).
    fn transmit(&mut self, t: ServerTransmit) {
        let http = &mut self.http;
        self.writer.write(t, |w| {
            if let ServerWrite::Http(stream, part) = w {
                http.write(stream, part);
            }
        });
    }
}
