//! The `server` host running a user's server instead of the reference one.
//!
//! The harness hands the user's factory the server's end of the transport and records nothing
//! on its behalf: the server is a black box, seen only through what the client (and the
//! proxy) observe.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use super::{spawn_guarded, SharedRef, SERVER_HTTP_PORT, SERVER_STDIO_PORT};
use crate::model::Transport;
use crate::scenario::Scenario;

/// The server's end of the scenario's transport, handed to a [`ServerUnderTest::Custom`]
/// factory.
pub enum ServerIo {
    /// stdio: one accepted byte stream, the subprocess's stdin and stdout. Requests arrive as
    /// NDJSON lines; responses and notifications go back the same way. The factory is called
    /// once per connection (a server crash or a broken pipe starts a fresh "subprocess").
    /// `turmoil::net::TcpStream` implements tokio's `AsyncRead` and `AsyncWrite`, and splits
    /// with `into_split`.
    Stdio(turmoil::net::TcpStream),
    /// Streamable HTTP: the listener bound on the server's HTTP port. The factory is called
    /// once per server boot and should accept connections until it is dropped. The client
    /// POSTs every message on its own connection to `/mcp`, with no `Host` header.
    Http(turmoil::net::TcpListener),
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
    /// A user's server, run as a black box.
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
            match transport {
                Transport::Stdio => {
                    let listener =
                        turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_STDIO_PORT)).await?;
                    while let Ok((stream, _)) = listener.accept().await {
                        spawn_guarded(&shared, factory(ServerIo::Stdio(stream)));
                    }
                }
                Transport::Http => {
                    let listener =
                        turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_HTTP_PORT)).await?;
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
    use crate::harness::{run, run_with, HarnessOptions};
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

    /// A custom server leaves no server or backend events, and the run still settles.
    #[test]
    fn a_custom_server_is_a_black_box_and_the_run_settles() {
        let options = HarnessOptions::default();
        let server = ServerUnderTest::custom(refuser);
        for seed in 0..6 {
            let scenario = Scenario::from_seed(seed).with_transport(Transport::Stdio);
            let run = run_with(&scenario, &options, &server).expect("the run");
            assert!(run.complete, "seed {seed} did not settle");
            assert!(run
                .trace
                .events
                .iter()
                .all(|e| !matches!(e.side, Side::Server | Side::Backend)));
            assert!(run.trace.events.iter().any(|e| e.side == Side::Client));
        }
        // The reference path records both sides.
        let scenario = Scenario::from_seed(2).with_transport(Transport::Stdio);
        let reference = run(&scenario, &options).expect("the run");
        assert!(reference
            .trace
            .events
            .iter()
            .any(|e| e.side == Side::Server));
    }
}
