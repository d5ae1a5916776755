//! The `server` host: the reference [`Server`] behind real sockets.
//!
//! stdio is one TCP stream of NDJSON lines (the client reconnects after a crash, as a host
//! restarts a subprocess). Streamable HTTP is hyper's HTTP/1.1 server: each POST's body is
//! decoded and handed to the model, whose first transmit for the stream decides the response
//! (an SSE stream, a JSON body, or 202). When hyper drops a response body or a pending
//! request before the server ended it, the client went away: the driver tells the model that
//! the stream closed, which is the cancellation.

use std::rc::Rc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::{
    backend, now, spawn_guarded, SharedRef, BACKEND_PORT, SERVER_HTTP_PORT, SERVER_STDIO_PORT,
    STREAM_HEADER,
};
use crate::lanes::http_serve::{serve_connection, HttpEvent, HttpLimits, Notify, Responder};
use crate::lanes::response_writer::ServerWrite;
use crate::lanes::server_driver::{ServerDriver, ServerOutput, ServerRecording};
use crate::model::server::Playback;
use crate::model::{Server, ServerConfig, StreamId, Transport};
use crate::scenario::Scenario;

/// What reaches the server host: stdio bytes and their end, HTTP events.
enum ServerInput {
    /// stdio bytes.
    Bytes(Vec<u8>),
    /// The stdio client went away.
    Eof,
    /// A POST, or a stream the client dropped.
    Http(HttpEvent),
}

pub(crate) fn host(
    sim: &mut turmoil::Sim<'_>,
    shared: &SharedRef,
    scenario: &Scenario,
    playback: Option<Playback>,
) {
    let shared = shared.clone();
    let config = scenario.server_config();
    let no_buffering = scenario.no_buffering_header;
    sim.host("server", move || {
        let shared = shared.clone();
        // A restarted server plays the recording from its start again.
        let playback = playback.clone();
        async move {
            shared.borrow_mut().server_jobs = 0;
            let backend = super::connect_retrying(
                ("backend", BACKEND_PORT),
                std::time::Duration::from_millis(10),
            )
            .await;
            let (tx, rx) = mpsc::unbounded_channel();
            let driver = ServerHost::new(
                config,
                playback,
                shared.clone(),
                backend,
                no_buffering,
                tx.clone(),
            );
            match config.transport {
                Transport::Stdio => {
                    let listener =
                        turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_STDIO_PORT)).await?;
                    let shared2 = shared.clone();
                    // One client at a time; each accepted stream is the subprocess's stdin/stdout.
                    let (stdout_tx, mut stdout_rx) =
                        mpsc::unbounded_channel::<turmoil::net::tcp::OwnedWriteHalf>();
                    spawn_guarded(&shared, async move {
                        while let Ok((stream, _)) = listener.accept().await {
                            let (mut read, write) = stream.into_split();
                            let _ = stdout_tx.send(write);
                            let tx = tx.clone();
                            spawn_guarded(&shared2, async move {
                                let mut buf = vec![0u8; 16 * 1024];
                                loop {
                                    match read.read(&mut buf).await {
                                        Ok(0) | Err(_) => break,
                                        Ok(n) => {
                                            let _ = tx.send(ServerInput::Bytes(buf[..n].to_vec()));
                                        }
                                    }
                                }
                                let _ = tx.send(ServerInput::Eof);
                            });
                        }
                    });
                    let first = stdout_rx.recv().await;
                    driver.run(rx, first, Some(stdout_rx)).await;
                }
                Transport::Http => {
                    let listener =
                        turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_HTTP_PORT)).await?;
                    let shared2 = shared.clone();
                    spawn_guarded(&shared, async move {
                        while let Ok((stream, _)) = listener.accept().await {
                            let tx = tx.clone();
                            let notify: Notify = Rc::new(move |e| {
                                let _ = tx.send(ServerInput::Http(e));
                            });
                            spawn_guarded(
                                &shared2,
                                serve_connection(
                                    stream,
                                    notify,
                                    stream_of_header,
                                    HttpLimits::default(),
                                ),
                            );
                        }
                    });
                    driver.run(rx, None, None).await;
                }
            }
            Ok(())
        }
    });
}

/// The client's stream id, from the header the simulated client sends.
pub(super) fn stream_of_header(req: &hyper::Request<hyper::body::Incoming>) -> StreamId {
    req.headers()
        .get(STREAM_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .map(StreamId)
        .unwrap_or(StreamId(0))
}

/// The server host: its driver between the simulated sockets and the backend host.
struct ServerHost {
    driver: ServerDriver,
    shared: SharedRef,
    backend: turmoil::net::TcpStream,
    stdout: Option<turmoil::net::tcp::OwnedWriteHalf>,
    /// HTTP: responses and SSE bodies.
    http: Responder,
}

impl ServerHost {
    fn new(
        config: ServerConfig,
        playback: Option<Playback>,
        shared: SharedRef,
        backend: turmoil::net::TcpStream,
        no_buffering: bool,
        tx: mpsc::UnboundedSender<ServerInput>,
    ) -> ServerHost {
        let notify: Notify = Rc::new(move |e| {
            let _ = tx.send(ServerInput::Http(e));
        });
        let server = Server::new(config).started_at(super::now());
        let server = match playback {
            Some(p) => server.playing(p),
            None => server,
        };
        ServerHost {
            http: Responder::new(notify),
            driver: ServerDriver::new(server, None, ServerRecording::default(), no_buffering),
            shared,
            backend,
            stdout: None,
        }
    }

    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<ServerInput>,
        stdout: Option<turmoil::net::tcp::OwnedWriteHalf>,
        mut more_stdout: Option<mpsc::UnboundedReceiver<turmoil::net::tcp::OwnedWriteHalf>>,
    ) {
        self.stdout = stdout;
        loop {
            let deadline = self.driver.server().poll_timeout();
            let sleep = async {
                match deadline {
                    Some(t) => {
                        tokio::time::sleep(std::time::Duration::from_millis(
                            t.as_millis().saturating_sub(now().as_millis()),
                        ))
                        .await
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                input = rx.recv() => {
                    let Some(input) = input else { return };
                    self.input(input, &mut more_stdout).await;
                }
                _ = sleep => self.driver.timers(now()),
            }
            self.flush().await;
        }
    }

    async fn input(
        &mut self,
        input: ServerInput,
        more_stdout: &mut Option<mpsc::UnboundedReceiver<turmoil::net::tcp::OwnedWriteHalf>>,
    ) {
        let t = now();
        match input {
            ServerInput::Bytes(bytes) => self.driver.stdio_bytes(t, &bytes, &mut self.shared),
            ServerInput::Eof => {
                self.driver.input_closed(t, &mut self.shared);
                // Wait for the client to reconnect.
                self.stdout = match more_stdout {
                    Some(rx) => rx.recv().await,
                    None => None,
                };
            }
            ServerInput::Http(event) => {
                let (driver, shared) = (&mut self.driver, &mut self.shared);
                driver.http_event(t, event, &mut self.http, shared);
            }
        }
    }

    /// Writes every transmit and backend call of the model.
    async fn flush(&mut self) {
        while let Some(io) = self.driver.poll_io(now(), &mut self.shared) {
            match io {
                ServerOutput::Write(ServerWrite::Line(line)) => {
                    if let Some(out) = self.stdout.as_mut() {
                        let _ = out.write_all(&line).await;
                    }
                }
                ServerOutput::Write(ServerWrite::Http(stream, part)) => {
                    self.http.write(stream, part)
                }
                ServerOutput::Backend(call) => {
                    let _ = self
                        .backend
                        .write_all(backend::encode_call(&call).as_bytes())
                        .await;
                }
            }
        }
        self.shared.borrow_mut().server_jobs = self.driver.server().active_jobs();
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::lanes::turmoil::Shared;

    /// One POST on a connection of its own to the `server` host: status, head and body.
    async fn post(stream: u64, headers: &str, body: &str) -> (u16, String, String) {
        // The server listens once it has reached its backend.
        let mut conn =
            super::super::connect_retrying(("server", SERVER_HTTP_PORT), Duration::from_millis(10))
                .await;
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: server\r\n{STREAM_HEADER}: {stream}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(request.as_bytes()).await.expect("write");
        let mut answer = Vec::new();
        let _ = conn.read_to_end(&mut answer).await;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, head.to_ascii_lowercase(), body.to_owned())
    }

    fn modern(id: i64, method: &str) -> (String, String) {
        let headers = format!("mcp-protocol-version: 2026-07-28\r\nmcp-method: {method}\r\n");
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        );
        (headers, body)
    }

    /// The dual-era server of the simulation answers each request in the era it speaks, as
    /// `serve --http` does: a legacy session and 2026-07-28 requests interleaved on one
    /// server, the same ids in both, neither refused for what the other did.
    #[test]
    fn the_simulated_server_answers_a_legacy_and_a_modern_client_interleaved() {
        let shared: SharedRef = Rc::new(RefCell::new(Shared::default()));
        let scenario = Scenario::from_seed(3).with_transport(Transport::Http);
        assert_eq!(
            scenario.server_config().eras,
            crate::model::ServerEras::Both
        );
        let mut sim = turmoil::Builder::new()
            .rng_seed(3)
            .epoch(UNIX_EPOCH)
            .simulation_duration(Duration::from_secs(60))
            .build();
        backend::host(&mut sim, &shared);
        host(&mut sim, &shared, &scenario, None);
        sim.client("client", async move {
            // A modern request first, then the legacy handshake, then both side by side.
            let (h, b) = modern(1, "tools/list");
            let (status, _, body) = post(1, &h, &b).await;
            assert_eq!(status, 200, "{body}");
            assert!(body.contains(r#""tools""#), "{body}");
            let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
            let (status, head, body) = post(2, "", init).await;
            assert_eq!(status, 200, "{body}");
            let session = head
                .lines()
                .find_map(|l| l.strip_prefix("mcp-session-id:"))
                .expect("a session id")
                .trim()
                .to_owned();
            let legacy = format!("mcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n");
            let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
            let (status, _, body) = post(3, &legacy, initialized).await;
            assert_eq!(status, 202, "{body}");
            let (mh, mb) = modern(2, "tools/list");
            let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
            let ping = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
            let ((s1, _, b1), (s2, _, b2), (s3, _, b3), (s4, _, b4)) = tokio::join!(
                post(4, &mh, &mb),
                post(5, &legacy, list),
                post(6, &legacy, ping),
                post(7, &mh, &mb),
            );
            for (status, body) in [(s1, &b1), (s2, &b2), (s3, &b3), (s4, &b4)] {
                assert_eq!(status, 200, "{body}");
                assert!(body.contains(r#""result""#), "{body}");
            }
            assert!(b2.contains(r#""tools""#) && b1.contains(r#""tools""#));
            // A legacy request without its session is refused; a modern one never is.
            let (status, _, body) = post(8, "mcp-protocol-version: 2025-11-25\r\n", list).await;
            assert_eq!(status, 400, "{body}");
            Ok(())
        });
        sim.run().expect("the run");
        assert_eq!(shared.borrow().failure, None);
    }
}
