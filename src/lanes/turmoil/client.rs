//! The `client` host: the workload and the reference [`Client`] behind real sockets.
//!
//! stdio: one TCP stream to the server carrying NDJSON lines; when it breaks (the server
//! crashed) the client reconnects, as a host restarts its subprocess, and the model loses the
//! in-flight requests. HTTP: every POST is a task that opens its own connection (through the
//! proxy if there is one), sends the message with the Streamable HTTP headers, and streams the
//! response back; closing a stream aborts its task, which drops the connection.
//!
//! The run ends when every planned call has ended and the client has lingered with the network
//! healed, so that late messages and late work still land in the trace.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::{
    now, record, spawn_guarded, SharedRef, PROXY_PORT, SERVER_HTTP_PORT, SERVER_STDIO_PORT,
};
use crate::framing::ndjson;
use crate::lanes::http_exchange::{self as http, ExchangeItem, PostTarget};
use crate::lanes::readers::StdioReader;
use crate::lanes::recorder::{self, observe, ClientNote};
use crate::model::MutantSet;
use crate::model::{Client, ClientEvent, ClientTransmit, StreamId, Transport};
use crate::scenario::{fault_end, Fault, Scenario, ToolCalls};
use crate::time::Time;
use crate::trace::{EventKind, Side};
use crate::wire::{Message, RequestId};

enum Input {
    Bytes(u64, Vec<u8>),
    /// The stdio connection of this generation ended.
    PipeClosed(u64),
    /// What a POST's exchange yielded.
    Http(StreamId, ExchangeItem),
}

#[derive(Debug, Clone, Copy)]
enum Work {
    Start(usize),
    Cancel(usize),
    Reset(usize),
}

pub(crate) fn host(
    sim: &mut turmoil::Sim<'_>,
    shared: &SharedRef,
    scenario: &Scenario,
    tool_calls: &ToolCalls,
) {
    let shared = shared.clone();
    let scenario = scenario.clone();
    let tool_calls = tool_calls.clone();
    sim.client("client", async move {
        Driver::new(scenario, tool_calls, shared).run().await;
        Ok(())
    });
}

struct Driver {
    scenario: Scenario,
    /// What each planned call asks the server to do.
    tool_calls: ToolCalls,
    shared: SharedRef,
    client: Client,
    tx: mpsc::UnboundedSender<Input>,
    rx: mpsc::UnboundedReceiver<Input>,
    stdin: Option<turmoil::net::tcp::OwnedWriteHalf>,
    /// Lines written while the stdio connection was down, sent once it is back.
    unsent: Vec<Vec<u8>>,
    /// Generation of the stdio connection; input of older ones is stale.
    conn_gen: u64,
    lines: StdioReader,
    posts: BTreeMap<StreamId, tokio::task::JoinHandle<()>>,
    agenda: BTreeMap<(Time, u64), Work>,
    call_ids: BTreeMap<usize, RequestId>,
    streams: BTreeMap<RequestId, StreamId>,
}

impl Driver {
    fn new(scenario: Scenario, tool_calls: ToolCalls, shared: SharedRef) -> Driver {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut agenda = BTreeMap::new();
        let mut seq = 0u64;
        let mut add = |at: Duration, w: Work| {
            seq += 1;
            agenda.insert((Time::ZERO + at, seq), w);
        };
        for (k, call) in scenario.calls.iter().enumerate() {
            add(call.at, Work::Start(k));
            if let Some(after) = call.cancel_after {
                add(call.at + after, Work::Cancel(k));
            }
        }
        for f in &scenario.faults {
            if let Fault::ResetStream { at, call } = *f {
                add(at, Work::Reset(call));
            }
        }
        Driver {
            client: Client::new(scenario.client_config()),
            scenario,
            tool_calls,
            shared,
            tx,
            rx,
            stdin: None,
            unsent: Vec::new(),
            conn_gen: 0,
            lines: StdioReader::default(),
            posts: BTreeMap::new(),
            agenda,
            call_ids: BTreeMap::new(),
            streams: BTreeMap::new(),
        }
    }

    async fn run(mut self) {
        if self.scenario.transport == Transport::Stdio {
            self.connect_stdio().await;
        }
        loop {
            self.flush().await;
            if self.agenda.is_empty() && self.client.outstanding() == 0 {
                break;
            }
            let next = [
                self.agenda.keys().next().map(|k| k.0),
                self.client.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            tokio::select! {
                biased;
                input = self.rx.recv() => {
                    if let Some(input) = input { self.input(input).await; }
                }
                _ = sleep_until(next) => self.tick(),
            }
        }
        // Heal, then linger: every fault is over, and late messages and late work still land
        // in the trace. Work the server still runs (a cancel lost on a wedged connection)
        // must finish too; the horizon bounds the wait.
        let (_, hi) = self.scenario.latency;
        let healed = self
            .scenario
            .faults
            .iter()
            .map(fault_end)
            .max()
            .map_or(Time::ZERO, |d| Time::ZERO + d);
        let mut until = now().max(healed) + hi * 2 + Duration::from_secs(2);
        loop {
            tokio::select! {
                biased;
                input = self.rx.recv() => {
                    if let Some(input) = input { self.input(input).await; }
                }
                _ = sleep_until(Some(until)) => {
                    let busy = { let s = self.shared.borrow(); s.server_jobs > 0 || s.backend_held > 0 };
                    if !busy { break; }
                    until = now() + Duration::from_millis(100);
                }
            }
            self.flush().await;
        }
        for (_, task) in std::mem::take(&mut self.posts) {
            task.abort();
        }
        let mut shared = self.shared.borrow_mut();
        shared.client_done = true;
        shared.client_outstanding = self.client.outstanding();
    }

    fn tick(&mut self) {
        let t = now();
        while let Some((&key, &work)) = self.agenda.iter().next().filter(|(k, _)| k.0 <= t) {
            self.agenda.remove(&key);
            self.work(work);
        }
        self.client.handle_timeout(t);
    }

    fn work(&mut self, work: Work) {
        let t = now();
        match work {
            Work::Start(k) => {
                let call = self.scenario.calls[k];
                let args = self.tool_calls.arguments(&self.scenario, k);
                let spec = call.call_spec(self.tool_calls.tool(), args);
                let id = self.client.start_request(t, spec);
                self.call_ids.insert(k, id);
            }
            Work::Cancel(k) => {
                if let Some(id) = self.call_ids.get(&k) {
                    let _ = self.client.cancel(t, id);
                }
            }
            Work::Reset(k) => {
                let Some(stream) = self
                    .call_ids
                    .get(&k)
                    .and_then(|id| self.streams.get(id))
                    .copied()
                else {
                    return;
                };
                if let Some(task) = self.posts.remove(&stream) {
                    task.abort();
                    record(
                        &self.shared,
                        Side::Proxy,
                        EventKind::Close {
                            stream: Some(stream.0),
                            by: Side::Proxy,
                            reason: None,
                        },
                    );
                    record(
                        &self.shared,
                        Side::Client,
                        EventKind::Close {
                            stream: Some(stream.0),
                            by: Side::Proxy,
                            reason: None,
                        },
                    );
                    self.client.handle_stream_closed(t, stream);
                }
            }
        }
    }

    async fn connect_stdio(&mut self) {
        let stream = loop {
            match turmoil::net::TcpStream::connect(("server", SERVER_STDIO_PORT)).await {
                Ok(s) => break s,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let (mut read, mut write) = stream.into_split();
        for line in std::mem::take(&mut self.unsent) {
            let _ = write.write_all(&line).await;
        }
        self.stdin = Some(write);
        self.lines = StdioReader::default();
        self.conn_gen += 1;
        let generation = self.conn_gen;
        let tx = self.tx.clone();
        spawn_guarded(&self.shared, async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let _ = tx.send(Input::Bytes(generation, buf[..n].to_vec()));
                    }
                }
            }
            let _ = tx.send(Input::PipeClosed(generation));
        });
    }

    async fn input(&mut self, input: Input) {
        let t = now();
        match input {
            Input::Bytes(generation, _) | Input::PipeClosed(generation)
                if generation != self.conn_gen => {}
            Input::Bytes(_, bytes) => {
                for item in self.lines.push(&bytes) {
                    match item {
                        Ok(line) => self.receive(None, &line),
                        Err(w) => record(&self.shared, Side::Client, EventKind::Recv(w)),
                    }
                }
            }
            Input::PipeClosed(_) => {
                if let Some(w) = self.lines.finish() {
                    record(&self.shared, Side::Client, EventKind::Recv(w));
                }
                record(
                    &self.shared,
                    Side::Client,
                    EventKind::Close {
                        stream: None,
                        by: Side::Server,
                        reason: None,
                    },
                );
                // The requests are lost the moment the pipe breaks; their retries are sent
                // then too and wait for the new connection.
                self.stdin = None;
                self.client.handle_disconnect(t);
                self.flush().await;
                self.connect_stdio().await;
            }
            Input::Http(
                stream,
                ExchangeItem::Status {
                    status,
                    content_type,
                },
            ) => {
                record(
                    &self.shared,
                    Side::Client,
                    EventKind::Status {
                        stream: Some(stream.0),
                        status,
                        content_type,
                    },
                );
            }
            Input::Http(stream, ExchangeItem::Message(bytes)) => self.receive(Some(stream), &bytes),
            Input::Http(stream, ExchangeItem::Comment) => record(
                &self.shared,
                Side::Client,
                EventKind::Comment {
                    stream: Some(stream.0),
                },
            ),
            Input::Http(stream, ExchangeItem::Ended) => {
                if self.posts.remove(&stream).is_some() {
                    record(
                        &self.shared,
                        Side::Client,
                        EventKind::Close {
                            stream: Some(stream.0),
                            by: Side::Server,
                            reason: None,
                        },
                    );
                    self.client.handle_stream_closed(t, stream);
                }
            }
            Input::Http(stream, ExchangeItem::Cut) => {
                if self.posts.remove(&stream).is_some() {
                    let by = if self.scenario.proxy.is_some() {
                        Side::Proxy
                    } else {
                        Side::Server
                    };
                    record(
                        &self.shared,
                        Side::Client,
                        EventKind::Close {
                            stream: Some(stream.0),
                            by,
                            reason: None,
                        },
                    );
                    self.client.handle_stream_closed(t, stream);
                }
            }
        }
    }

    fn receive(&mut self, stream: Option<StreamId>, bytes: &[u8]) {
        let (w, decoded) = observe(self.scenario.transport, stream, bytes);
        record(&self.shared, Side::Client, EventKind::Recv(w));
        if let Ok(msg) = decoded {
            self.client.handle_message(now(), stream, msg);
        }
    }

    async fn flush(&mut self) {
        loop {
            let mut busy = false;
            while let Some(t) = self.client.poll_transmit() {
                busy = true;
                self.transmit(t).await;
            }
            while let Some(e) = self.client.poll_event() {
                busy = true;
                self.event(e);
            }
            if !busy {
                break;
            }
        }
        self.shared.borrow_mut().client_outstanding = self.client.outstanding();
    }

    fn event(&mut self, e: ClientEvent) {
        match recorder::client_event(e) {
            ClientNote::Record(kind) => {
                if let EventKind::Outcome { outcome, .. } = kind {
                    *self
                        .shared
                        .borrow_mut()
                        .stats
                        .outcomes
                        .entry(outcome)
                        .or_default() += 1;
                }
                record(&self.shared, Side::Client, kind);
            }
            ClientNote::Retried { lost, new } => {
                if let Some((&k, _)) = self.call_ids.iter().find(|(_, id)| **id == lost) {
                    self.call_ids.insert(k, new);
                }
            }
        }
    }

    fn record_send(&mut self, stream: Option<StreamId>, msg: &Message) {
        {
            let mut shared = self.shared.borrow_mut();
            shared.stats.messages += 1;
            if matches!(msg, Message::Request(_)) {
                shared.stats.requests += 1;
            }
        }
        let kind = match stream {
            Some(s) => recorder::client_post(&self.client, s, msg),
            None => recorder::client_send(&self.client, self.scenario.transport, stream, msg),
        };
        record(&self.shared, Side::Client, kind);
    }

    async fn transmit(&mut self, t: ClientTransmit) {
        match t {
            ClientTransmit::Disconnect => {
                record(
                    &self.shared,
                    Side::Client,
                    EventKind::Close {
                        stream: None,
                        by: Side::Client,
                        reason: None,
                    },
                );
                self.stdin = None;
                self.connect_stdio().await;
            }
            ClientTransmit::Line(msg) => {
                self.record_send(None, &msg);
                if let Ok(line) = ndjson::encode_line(&msg) {
                    match self.stdin.as_mut() {
                        Some(stdin) => {
                            let _ = stdin.write_all(&line).await;
                        }
                        None => self.unsent.push(line),
                    }
                }
            }
            ClientTransmit::Post { stream, msg } => {
                self.record_send(Some(stream), &msg);
                if let Some(id) = msg.id() {
                    self.streams.insert(id.clone(), stream);
                }
                let target = match self.scenario.proxy {
                    Some(_) => ("proxy", PROXY_PORT),
                    None => ("server", SERVER_HTTP_PORT),
                };
                let task = spawn_guarded(
                    &self.shared,
                    post(target, stream, msg, self.tx.clone(), self.scenario.mutants),
                );
                self.posts.insert(stream, task);
            }
            ClientTransmit::Close { stream } => {
                record(
                    &self.shared,
                    Side::Client,
                    EventKind::Close {
                        stream: Some(stream.0),
                        by: Side::Client,
                        reason: None,
                    },
                );
                if let Some(task) = self.posts.remove(&stream) {
                    task.abort();
                }
            }
        }
    }
}

async fn sleep_until(t: Option<Time>) {
    match t {
        Some(t) => {
            tokio::time::sleep(Duration::from_millis(
                t.as_millis().saturating_sub(now().as_millis()),
            ))
            .await
        }
        None => std::future::pending().await,
    }
}

/// One POST on its own connection, its response streamed back as driver input.
async fn post(
    target: (&'static str, u16),
    stream: StreamId,
    msg: Message,
    tx: mpsc::UnboundedSender<Input>,
    mutants: MutantSet,
) {
    let Ok(tcp) = turmoil::net::TcpStream::connect(target).await else {
        let _ = tx.send(Input::Http(stream, ExchangeItem::Cut));
        return;
    };
    let to = PostTarget {
        host: "server",
        path: "/mcp",
        stream_header: Some(stream),
    };
    http::exchange(tcp, to, &msg, mutants, |item| {
        let _ = tx.send(Input::Http(stream, item));
    })
    .await;
}
