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

use super::{connect_retrying, Linger};
use super::{
    now, record, spawn_guarded, SharedRef, PROXY_PORT, SERVER_HTTP_PORT, SERVER_STDIO_PORT,
};
use crate::lanes::client_driver::{ClientDriver, ClientOutput, EndedBy};
use crate::lanes::http_exchange::{self as http, ExchangeItem, PostTarget};
use crate::model::MutantSet;
use crate::model::{StreamId, Transport};
use crate::scenario::workload::{Crashes, Step, Workload};
use crate::scenario::{Scenario, ToolCalls};
use crate::time::Time;
use crate::trace::{EventKind, Side};
use crate::wire::http::Method;
use crate::wire::Message;

enum ClientInput {
    Bytes(u64, Vec<u8>),
    /// The stdio connection of this generation ended.
    PipeClosed(u64),
    /// What a POST's exchange yielded.
    Http(StreamId, ExchangeItem),
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
        ClientHost::new(scenario, tool_calls, shared).run().await;
        Ok(())
    });
}

/// The client host: the application's workload and the reference client's driver, between
/// the simulated sockets and the scenario's clock.
struct ClientHost {
    scenario: Scenario,
    /// What each planned call asks the server to do.
    tool_calls: ToolCalls,
    shared: SharedRef,
    driver: ClientDriver,
    tx: mpsc::UnboundedSender<ClientInput>,
    rx: mpsc::UnboundedReceiver<ClientInput>,
    stdin: Option<turmoil::net::tcp::OwnedWriteHalf>,
    /// Lines written while the stdio connection was down, sent once it is back.
    unsent: Vec<Vec<u8>>,
    /// Generation of the stdio connection; input of older ones is stale.
    conn_gen: u64,
    posts: BTreeMap<StreamId, tokio::task::JoinHandle<()>>,
    /// The application's calls and the resets at its host (the server's crashes are the
    /// simulation's own faults).
    workload: Workload,
}

impl ClientHost {
    fn new(scenario: Scenario, tool_calls: ToolCalls, shared: SharedRef) -> ClientHost {
        let (tx, rx) = mpsc::unbounded_channel();
        let workload = Workload::of(&scenario, Crashes::Left);
        ClientHost {
            driver: ClientDriver::for_scenario(&scenario, true),
            scenario,
            tool_calls,
            shared,
            tx,
            rx,
            stdin: None,
            unsent: Vec::new(),
            conn_gen: 0,
            posts: BTreeMap::new(),
            workload,
        }
    }

    async fn run(mut self) {
        if self.scenario.transport == Transport::Stdio {
            self.connect_stdio().await;
        }
        loop {
            self.flush().await;
            if self.workload.is_empty() && self.driver.client().outstanding() == 0 {
                // The session's end (asked for with the host's last step) goes out in the
                // linger below.
                break;
            }
            let next = [
                self.workload.next_due(),
                self.driver.client().poll_timeout(),
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
        // Heal, then linger ([`Linger`]), still reading what arrives.
        let mut until = Linger::first_end(&self.scenario, now());
        loop {
            tokio::select! {
                biased;
                input = self.rx.recv() => {
                    if let Some(input) = input { self.input(input).await; }
                }
                _ = sleep_until(Some(until)) => {
                    if !Linger::server_busy(&self.shared) { break; }
                    until = now() + Linger::STEP;
                }
            }
            self.flush().await;
        }
        for (_, task) in std::mem::take(&mut self.posts) {
            task.abort();
        }
        let mut shared = self.shared.borrow_mut();
        shared.client_done = true;
        shared.client_outstanding = self.driver.client().outstanding();
    }

    fn tick(&mut self) {
        let t = now();
        while let Some(step) = self.workload.poll(t) {
            self.step(step);
            if self.workload.host_done() {
                self.driver.end_session();
            }
        }
        self.driver.timers(t);
    }

    fn step(&mut self, step: Step) {
        let t = now();
        match step {
            Step::Start(k) => {
                let call = self.scenario.calls[k];
                let args = self.tool_calls.arguments(&self.scenario, k);
                let spec = call.call_spec(self.tool_calls.tool(), args);
                self.driver.start_call(t, k, spec);
            }
            Step::Cancel(k) => self.driver.cancel_call(t, k),
            Step::Reset(k) => {
                let Some(stream) = self.driver.stream_of_call(k) else {
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
                    let cut = ExchangeItem::Cut;
                    self.driver
                        .response(t, stream, cut, EndedBy::proxy(None), &mut self.shared);
                }
            }
            // The simulation crashes the server host itself; a scenario's workload has no
            // stall or restart (they are the live probe's).
            Step::Crash(_) | Step::Stall(_) | Step::Restart(_) => {}
        }
    }

    async fn connect_stdio(&mut self) {
        // Through the intermediary when the scenario has one: it listens on the same port.
        let host = if self.scenario.bridge {
            "bridge"
        } else {
            "server"
        };
        let stream = connect_retrying((host, SERVER_STDIO_PORT), Duration::from_millis(50)).await;
        let (mut read, mut write) = stream.into_split();
        for line in std::mem::take(&mut self.unsent) {
            let _ = write.write_all(&line).await;
        }
        self.stdin = Some(write);
        self.driver.new_pipe();
        self.conn_gen += 1;
        let generation = self.conn_gen;
        let tx = self.tx.clone();
        spawn_guarded(&self.shared, async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let _ = tx.send(ClientInput::Bytes(generation, buf[..n].to_vec()));
                    }
                }
            }
            let _ = tx.send(ClientInput::PipeClosed(generation));
        });
    }

    async fn input(&mut self, input: ClientInput) {
        let t = now();
        match input {
            ClientInput::Bytes(generation, _) | ClientInput::PipeClosed(generation)
                if generation != self.conn_gen => {}
            ClientInput::Bytes(_, bytes) => {
                for item in self.driver.stdio_lines(&bytes) {
                    self.driver.read_line(t, item, &mut self.shared);
                }
            }
            ClientInput::PipeClosed(_) => {
                // The requests are lost the moment the pipe breaks; their retries are sent
                // then too and wait for the new connection.
                self.driver.pipe_closed(t, &mut self.shared);
                self.stdin = None;
                self.flush().await;
                self.connect_stdio().await;
            }
            ClientInput::Http(stream, item) => {
                let ended_by = match item {
                    // A connection cut behind a proxy was the proxy's doing.
                    ExchangeItem::Cut if self.scenario.proxy.is_some() => EndedBy::proxy(None),
                    _ => EndedBy::SERVER,
                };
                if matches!(item, ExchangeItem::Ended | ExchangeItem::Cut) {
                    self.posts.remove(&stream);
                }
                self.driver
                    .response(t, stream, item, ended_by, &mut self.shared);
            }
        }
    }

    async fn flush(&mut self) {
        // A dropped pipe is reconnected once everything due now is recorded: the connect may
        // wait out a partition, and what the client told its application happened now.
        let mut reconnect = false;
        while let Some(io) = self.driver.poll_io(now(), &mut self.shared) {
            if let ClientOutput::Disconnect = io {
                self.stdin = None;
                reconnect = true;
                continue;
            }
            self.transmit(io).await;
        }
        if reconnect {
            self.connect_stdio().await;
        }
        self.shared.borrow_mut().client_outstanding = self.driver.client().outstanding();
    }

    /// One exchange on a connection of its own: a POST of `msg`, or a `GET` or `DELETE`
    /// without one.
    fn open(
        &mut self,
        stream: StreamId,
        method: Method,
        msg: Option<Message>,
        headers: BTreeMap<String, String>,
    ) {
        let target = match self.scenario.proxy {
            Some(_) => ("proxy", PROXY_PORT),
            // The era bridge's front (`Scenario::with_era_bridge`).
            None if self.scenario.bridge => ("bridge", SERVER_HTTP_PORT),
            None => ("server", SERVER_HTTP_PORT),
        };
        let task = spawn_guarded(
            &self.shared,
            exchange(
                target,
                stream,
                method,
                msg,
                headers,
                self.tx.clone(),
                self.scenario.mutants,
            ),
        );
        self.posts.insert(stream, task);
    }

    async fn transmit(&mut self, io: ClientOutput) {
        match io {
            ClientOutput::Disconnect => unreachable!("flush reconnects"),
            ClientOutput::Line(line) => match self.stdin.as_mut() {
                Some(stdin) => {
                    let _ = stdin.write_all(&line).await;
                }
                None => self.unsent.push(line),
            },
            ClientOutput::Post {
                stream,
                msg,
                headers,
            } => self.open(stream, Method::Post, Some(msg), headers),
            ClientOutput::Open {
                stream,
                method,
                headers,
            } => self.open(stream, method, None, headers),
            ClientOutput::Close(stream) => {
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

/// One POST (or `GET` or `DELETE`) on its own connection, its response streamed back as
/// driver input.
async fn exchange(
    target: (&'static str, u16),
    stream: StreamId,
    method: Method,
    msg: Option<Message>,
    headers: BTreeMap<String, String>,
    tx: mpsc::UnboundedSender<ClientInput>,
    mutants: MutantSet,
) {
    let Ok(tcp) = turmoil::net::TcpStream::connect(target).await else {
        let _ = tx.send(ClientInput::Http(stream, ExchangeItem::Cut));
        return;
    };
    let to = PostTarget {
        host: "server",
        path: "/mcp",
        stream_header: Some(stream),
    };
    let outgoing = http::Outgoing {
        method,
        msg: msg.as_ref(),
        headers,
    };
    http::exchange(tcp, to, outgoing, mutants, |item| {
        let _ = tx.send(ClientInput::Http(stream, item));
    })
    .await;
}
