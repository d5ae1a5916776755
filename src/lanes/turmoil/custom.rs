//! A user's peer on a simulated host instead of the reference one.
//!
//! [`ServerUnderTest::Custom`] runs on the `server` host: the harness hands the user's factory
//! the server's end of the transport with a recording tap on it ([`ServerStream`],
//! [`ServerListener`]), so the trace holds what the server itself read and wrote, on its own
//! host's clock, next to what the client (and the proxy) observed. What the server does
//! inside stays a black box.
//!
//! [`ClientUnderTest::Custom`] runs on the `client` host against the reference server over
//! stdio: the harness hands the factory a stream connected to the server's stdio port and
//! records nothing on the client's behalf, so the trace holds the server's and the backend's
//! observations only.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use std::time::Duration;

use super::tap::{ServerListener, ServerStream};
use super::{connect_retrying, Linger};
use super::{now, spawn_guarded, SharedRef, SERVER_HTTP_PORT, SERVER_STDIO_PORT};
use crate::model::Transport;
use crate::scenario::Scenario;

/// The address of the reference server's stdio "subprocess" on the simulated network, for a
/// [`ClientUnderTest::Custom`] client that reconnects (`turmoil::net::TcpStream::connect`).
pub const SERVER_STDIO_ADDR: (&str, u16) = ("server", SERVER_STDIO_PORT);

/// The server's end of the scenario's transport, handed to a [`ServerUnderTest::Custom`]
/// factory. Both record what the server reads and writes as the server's own trace events.
pub enum ServerIo {
    /// stdio: one accepted byte stream, the subprocess's stdin and stdout. Requests arrive as
    /// NDJSON lines; responses and notifications go back the same way. The factory is called
    /// once per connection (a server crash or a broken pipe starts a fresh "subprocess").
    /// [`ServerStream`] implements tokio's `AsyncRead` and `AsyncWrite` (`Send`, `Unpin`), and
    /// splits with [`ServerStream::into_split`] or `tokio::io::split`. Each line the server
    /// reads is its `recv`, each line it writes its `send`, and reading the end of the stream
    /// its `close` of the pipe by the client.
    Stdio(ServerStream),
    /// Streamable HTTP: the listener bound on the server's HTTP port. The factory is called
    /// once per server boot and should accept connections until it is dropped. The client
    /// POSTs every message on its own connection to `/mcp`, with `Host: server` and its stream
    /// id in `x-mcp-sim-stream`. Each accepted [`ServerStream`] records the request body the
    /// server reads as its `recv` on that stream, the response's status, SSE events (`send`),
    /// comments, a JSON body (`send`) and the end of an SSE body (`close` by the server), and
    /// reading the end of the connection before the response ended as the client's `close`.
    Http(ServerListener),
}

/// The future a [`ServerFactory`] returns: it runs on the `server` host (single-threaded, so it
/// need not be `Send`).
pub type ServerFuture = Pin<Box<dyn Future<Output = ()>>>;

/// Builds the user's server for one [`ServerIo`].
pub type ServerFactory = Rc<dyn Fn(ServerIo) -> ServerFuture>;

/// Which server runs on the simulated `server` host.
#[derive(Clone, Default)]
pub enum ServerUnderTest {
    /// The crate's reference server (and its `backend` host), with both sides recorded.
    #[default]
    Reference,
    /// A user's server, recorded at its end of the transport (no `backend` host).
    Custom(ServerFactory),
}

impl ServerUnderTest {
    /// A custom server from a closure returning any future.
    pub fn custom<F, Fut>(factory: F) -> ServerUnderTest
    where
        F: Fn(ServerIo) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        ServerUnderTest::Custom(Rc::new(move |io| Box::pin(factory(io))))
    }
}

impl fmt::Debug for ServerIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerIo::Stdio(_) => f.write_str("Stdio(..)"),
            ServerIo::Http(_) => f.write_str("Http(..)"),
        }
    }
}

impl fmt::Debug for ServerUnderTest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerUnderTest::Reference => f.write_str("Reference"),
            ServerUnderTest::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// The future a [`ClientFactory`] returns: the whole client, run on the `client` host
/// (single-threaded, so it need not be `Send`). The run ends when it returns.
pub type ClientFuture = Pin<Box<dyn Future<Output = ()>>>;

/// Builds the user's client for a stream connected to the server's stdio port.
pub type ClientFactory = Rc<dyn Fn(turmoil::net::TcpStream) -> ClientFuture>;

/// Which client runs on the simulated `client` host.
#[derive(Clone, Default)]
pub enum ClientUnderTest {
    /// The crate's reference client and the scenario's workload, recorded.
    #[default]
    Reference,
    /// A user's client, run as a black box over stdio.
    Custom(ClientFactory),
}

impl ClientUnderTest {
    /// A custom client from a closure returning any future.
    ///
    /// The closure is called once, with a `turmoil::net::TcpStream` connected to the reference
    /// server's stdio port ([`SERVER_STDIO_ADDR`]): NDJSON lines both ways, the subprocess's
    /// stdin and stdout. After a server crash the stream reads EOF; reconnecting is the
    /// client's business.
    pub fn custom<F, Fut>(factory: F) -> ClientUnderTest
    where
        F: Fn(turmoil::net::TcpStream) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        ClientUnderTest::Custom(Rc::new(move |stream| Box::pin(factory(stream))))
    }
}

impl fmt::Debug for ClientUnderTest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientUnderTest::Reference => f.write_str("Reference"),
            ClientUnderTest::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// The `client` host running a user's client: connect, run the client to its end, then linger
/// with the network healed until the server's work is over, so that late server work lands in
/// the trace.
pub(crate) fn client_host(
    sim: &mut turmoil::Sim<'_>,
    shared: &SharedRef,
    scenario: &Scenario,
    factory: &ClientFactory,
) {
    let shared = shared.clone();
    let factory = factory.clone();
    let scenario = scenario.clone();
    sim.client("client", async move {
        let stream = connect_retrying(SERVER_STDIO_ADDR, Duration::from_millis(10)).await;
        let _ = spawn_guarded(&shared, factory(stream)).await;
        let mut until = Linger::first_end(&scenario, now());
        loop {
            let wait = until.as_millis().saturating_sub(now().as_millis());
            tokio::time::sleep(Duration::from_millis(wait)).await;
            if !Linger::server_busy(&shared) {
                break;
            }
            until = now() + Linger::STEP;
        }
        shared.borrow_mut().client_done = true;
        Ok(())
    });
}

pub(crate) fn host(
    sim: &mut turmoil::Sim<'_>,
    shared: &SharedRef,
    scenario: &Scenario,
    factory: &ServerFactory,
) {
    let shared = shared.clone();
    let factory = factory.clone();
    let transport = scenario.transport;
    sim.host("server", move || {
        let shared = shared.clone();
        let factory = factory.clone();
        async move {
            let tap = shared.borrow().taps.sender();
            match transport {
                Transport::Stdio => {
                    let listener =
                        turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_STDIO_PORT)).await?;
                    while let Ok((stream, _)) = listener.accept().await {
                        let stream = ServerStream::stdio(stream, tap.clone());
                        spawn_guarded(&shared, factory(ServerIo::Stdio(stream)));
                    }
                }
                Transport::Http => {
                    let listener =
                        turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_HTTP_PORT)).await?;
                    let listener = ServerListener::new(listener, tap);
                    spawn_guarded(&shared, factory(ServerIo::Http(listener))).await?;
                }
            }
            Ok(())
        }
    });
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;
    use crate::lanes::turmoil::{run_with_client, run_with_server, TurmoilOptions};
    use crate::trace::Side;

    /// A server that answers every request with "method not found".
    async fn refuser(io: ServerIo) {
        let ServerIo::Stdio(stream) = io else { return };
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if let Some(id) = v.get("id") {
                let e = serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "no"}});
                if write.write_all(format!("{e}\n").as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    }

    /// A client that discovers, calls `slow_op` twice with a progress token, cancels the
    /// second, waits for the first's result and returns.
    async fn raw_client(stream: turmoil::net::TcpStream) {
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        let meta = serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}});
        let send = |v: serde_json::Value| format!("{v}\n").into_bytes();
        let discover = send(serde_json::json!({"jsonrpc": "2.0", "id": 1,
            "method": "server/discover", "params": {"_meta": meta}}));
        let _ = write.write_all(&discover).await;
        for id in [2, 3] {
            let mut m = meta.clone();
            m["progressToken"] = serde_json::json!(id);
            let call = send(
                serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "slow_op", "arguments": {"steps": 3, "step_ms": 300},
                "_meta": m}}),
            );
            let _ = write.write_all(&call).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        let cancel = send(serde_json::json!({"jsonrpc": "2.0",
            "method": "notifications/cancelled", "params": {"requestId": 3}}));
        let _ = write.write_all(&cancel).await;
        while let Ok(Some(line)) = lines.next_line().await {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if v.get("id") == Some(&serde_json::json!(2)) {
                return;
            }
        }
    }

    /// A custom client leaves no client events; the server and backend are recorded, the run
    /// settles, and the oracle finds nothing.
    #[test]
    fn a_custom_client_is_a_black_box_and_the_run_settles() {
        let options = TurmoilOptions::default();
        let client = ClientUnderTest::custom(raw_client);
        for seed in [1, 3] {
            let scenario = Scenario::from_seed(seed);
            let run = run_with_client(&scenario, &options, &client).expect("the run");
            assert!(run.complete, "seed {seed} did not settle");
            let events = &run.trace.events;
            assert!(events.iter().all(|e| e.side != Side::Client));
            assert!(events.iter().any(|e| e.side == Side::Server));
            assert!(events.iter().any(|e| e.side == Side::Backend));
            let text = run.trace.to_jsonl();
            assert!(text.contains("notifications/progress"), "seed {seed}");
            assert!(text.contains("notifications/cancelled"), "seed {seed}");
            let report = crate::oracle::check(&run.trace, &run.oracle_config(&scenario));
            assert!(report.violations.is_empty(), "seed {seed}: {report:?}");
        }
    }

    /// The messages `side` sent (`sending`) or received, in its order.
    fn messages(run: &crate::lanes::RunResult, side: Side, sending: bool) -> Vec<String> {
        use crate::trace::EventKind;
        run.trace
            .events
            .iter()
            .filter(|e| e.side == side)
            .filter_map(|e| match (&e.kind, sending) {
                (EventKind::Send(w), true) | (EventKind::Recv(w), false) => {
                    w.msg.as_ref().map(|m| m.to_string())
                }
                _ => None,
            })
            .collect()
    }

    /// Whether `part` is `whole` with some items left out, in the same order.
    fn is_subsequence(part: &[String], whole: &[String]) -> bool {
        let mut rest = whole.iter();
        part.iter().all(|p| rest.any(|w| w == p))
    }

    /// A custom server is recorded at its end: it read what the client sent (less what the
    /// faults lost) and the client read what it wrote, in order; no backend runs, and the run
    /// settles.
    #[test]
    fn a_custom_server_is_recorded_at_its_end_and_the_run_settles() {
        let options = TurmoilOptions::default();
        let server = ServerUnderTest::custom(refuser);
        for seed in 0..6 {
            let scenario = Scenario::from_seed(seed).with_transport(Transport::Stdio);
            let run = run_with_server(&scenario, &options, &server).expect("the run");
            assert!(run.complete, "seed {seed} did not settle");
            assert!(run.trace.events.iter().all(|e| e.side != Side::Backend));
            let client_sent = messages(&run, Side::Client, true);
            let server_read = messages(&run, Side::Server, false);
            let server_sent = messages(&run, Side::Server, true);
            let client_read = messages(&run, Side::Client, false);
            assert!(
                !server_read.is_empty() && !server_sent.is_empty(),
                "seed {seed}"
            );
            assert!(is_subsequence(&server_read, &client_sent), "seed {seed}");
            assert!(is_subsequence(&client_read, &server_sent), "seed {seed}");
            // The refuser answers every request it read, and nothing else.
            let requests = server_read.iter().filter(|m| m.contains("\"id\"")).count();
            assert_eq!(requests, server_sent.len(), "seed {seed}");
        }
    }
}
