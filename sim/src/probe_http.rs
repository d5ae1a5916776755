//! `mcp-sim probe --url URL`: the sockets of the Streamable HTTP probe.
//!
//! Every `ClientTransmit::Post` is a real HTTP/1.1 POST on its own connection, with the
//! headers of the simulated client (Host, Content-Type, Accept, `MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`); the response is streamed back to the probe's event loop: a
//! `text/event-stream` body through the SSE decoder, one message per event, any other body as
//! one message when it ends. Closing a stream aborts its task, which drops the connection (the
//! cancellation on HTTP). The tasks run on a tokio runtime of their own thread.
//!
//! With `--proxy PRESET` (or `--proxy-idle-ms N`), `--latency-ms A..B` or `--reset-percent P`
//! the posts go through a local relay on 127.0.0.1 (an ephemeral port): an intermediary with
//! the idle timeout, buffering and gateway status of the simulation's proxy presets, which
//! also delays bytes and resets connections in the middle of a response as the probe's seeded
//! schedule says ([`Relay`]). The probe records the faults it planned as `fault` events and
//! the relay's cuts as closes by the proxy, reason `idle` or `reset`.

use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use mcp_sim::harness::http::{self, ExchangeItem, PostTarget};
use mcp_sim::model::StreamId;
use mcp_sim::mutants::Mutants;
use mcp_sim::scenario::ProxyConfig;
use mcp_sim::wire::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where the server is, from `--url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// `host[:port]` as written, for the Host header.
    pub authority: String,
    /// `host:port` to connect to.
    pub addr: String,
    /// The request target: path and query.
    pub path: String,
}

/// Parses `http://HOST[:PORT][/PATH]`. TLS is not spoken: `https` is refused.
pub(crate) fn parse_url(url: &str) -> Result<Endpoint, String> {
    let rest = match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "--url: only http:// is supported, not {scheme}:// (no TLS)"
            ))
        }
        None => return Err("--url must start with http://".into()),
    };
    let rest = rest.split('#').next().unwrap_or_default();
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    if authority.is_empty() || authority.contains('@') {
        return Err("--url needs a host (and no user info)".into());
    }
    // The port follows the last colon, unless that colon is inside an IPv6 literal.
    let has_port = match authority.rfind(':') {
        Some(i) => !authority[i..].contains(']'),
        None => false,
    };
    let addr = if has_port {
        let port = &authority[authority.rfind(':').unwrap_or(0) + 1..];
        if port.parse::<u16>().is_err() {
            return Err(format!("--url: bad port {port:?}"));
        }
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok(Endpoint {
        authority: authority.to_string(),
        addr,
        path,
    })
}

/// What the reader threads (stdio) and the POST tasks (HTTP) report.
pub(crate) enum Input {
    /// stdio: bytes from the server's stdout.
    Bytes(Vec<u8>),
    /// stdio: the server closed its stdout.
    Eof,
    /// HTTP: a response's status and content type.
    Status {
        stream: StreamId,
        status: u16,
        content_type: Option<String>,
    },
    /// HTTP: one message (an SSE event's data, or a JSON body).
    Message { stream: StreamId, bytes: Vec<u8> },
    /// HTTP: an SSE comment.
    Comment { stream: StreamId },
    /// HTTP: the response ended.
    Ended { stream: StreamId },
    /// HTTP: the connection ended before the response did (or could not be opened); `by` is
    /// the relay's cut, if it was one.
    Cut { stream: StreamId, by: Option<Cut> },
}

/// The faults the relay applies to one connection, drawn by the probe when it posts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ConnFaults {
    /// Delay added to every chunk, each way, in ms.
    pub latency_ms: u64,
    /// Reset the connection once the first bytes of the response body have passed.
    pub reset: bool,
}

/// Why the relay ended a connection, when it was its doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// The intermediary's idle timeout.
    Idle,
    /// A reset in the middle of the response.
    Reset,
}

impl Cut {
    /// The `reason` of the trace's `close` event.
    pub fn reason(self) -> &'static str {
        match self {
            Cut::Idle => "idle",
            Cut::Reset => "reset",
        }
    }
}

/// What the relay and the posts share, by the post's local port.
#[derive(Default)]
struct Relayed {
    faults: BTreeMap<u16, ConnFaults>,
    cuts: BTreeMap<u16, Cut>,
}

/// The local relay between the probe and the server: an intermediary with an idle timeout
/// (a preset of the simulation's), added latency and resets.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RelayConfig {
    /// The intermediary whose idle timeout, buffering and gateway status the relay copies.
    pub proxy: Option<ProxyConfig>,
    /// Whether any post may carry [`ConnFaults`].
    pub faults: bool,
}

impl RelayConfig {
    fn wanted(&self) -> bool {
        self.proxy.is_some() || self.faults
    }
}

/// The runtime, the open posts and the optional relay.
pub(crate) struct Http {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    endpoint: Arc<Endpoint>,
    /// Where posts connect: the server, or the relay.
    target: SocketAddr,
    tx: mpsc::Sender<Input>,
    posts: BTreeMap<StreamId, tokio::task::JoinHandle<()>>,
    relayed: Arc<Mutex<Relayed>>,
    /// The relay's address, when there is one.
    pub proxy: Option<SocketAddr>,
    /// Connections opened to the server (or the relay).
    pub connections: Arc<AtomicUsize>,
    /// Connections that could not be opened.
    pub refused: Arc<AtomicUsize>,
}

impl Http {
    /// Checks that the server accepts connections, starts the runtime and the relay.
    pub fn start(
        endpoint: Endpoint,
        relay_config: RelayConfig,
        tx: mpsc::Sender<Input>,
    ) -> Result<Http, String> {
        let server = reachable(&endpoint.addr)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime: {e}"))?;
        let handle = runtime.handle().clone();
        let relayed = Arc::new(Mutex::new(Relayed::default()));
        let mut proxy = None;
        if relay_config.wanted() {
            let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|e| format!("cannot start the proxy: {e}"))?;
            proxy = Some(
                listener
                    .local_addr()
                    .map_err(|e| format!("cannot start the proxy: {e}"))?,
            );
            let _entered = handle.enter();
            let listener = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| format!("cannot start the proxy: {e}"))?;
            let relayed = Arc::clone(&relayed);
            handle.spawn(async move {
                while let Ok((down, peer)) = listener.accept().await {
                    let conn = Relay {
                        peer_port: peer.port(),
                        server,
                        proxy: relay_config.proxy,
                        relayed: Arc::clone(&relayed),
                    };
                    tokio::spawn(conn.run(down));
                }
            });
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            runtime.block_on(async {
                let _ = stopped.await;
            });
        });
        Ok(Http {
            handle,
            stop: Some(stop),
            thread: Some(thread),
            endpoint: Arc::new(endpoint),
            target: proxy.unwrap_or(server),
            tx,
            posts: BTreeMap::new(),
            relayed,
            proxy,
            connections: Arc::new(AtomicUsize::new(0)),
            refused: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Sends `msg` in a POST of its own, through the relay with `faults`; its response arrives
    /// as `stream`.
    pub fn post(&mut self, stream: StreamId, msg: Message, faults: ConnFaults) {
        let task = self.handle.spawn(post(Post {
            target: self.target,
            endpoint: Arc::clone(&self.endpoint),
            stream,
            msg,
            faults,
            tx: self.tx.clone(),
            relayed: Arc::clone(&self.relayed),
            connections: Arc::clone(&self.connections),
            refused: Arc::clone(&self.refused),
        }));
        self.posts.insert(stream, task);
    }

    /// Drops `stream`'s connection; whether it was still open.
    pub fn close(&mut self, stream: StreamId) -> bool {
        match self.posts.remove(&stream) {
            Some(task) => {
                task.abort();
                true
            }
            None => false,
        }
    }

    /// Forgets a stream whose response ended; whether it was still open.
    pub fn ended(&mut self, stream: StreamId) -> bool {
        self.posts.remove(&stream).is_some()
    }

    /// The streams still open.
    pub fn open(&self) -> Vec<StreamId> {
        self.posts.keys().copied().collect()
    }

    /// Aborts every post and stops the runtime.
    pub fn shutdown(&mut self) {
        for (_, task) in std::mem::take(&mut self.posts) {
            task.abort();
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The server's address, once a connection to it succeeds (within 5 s).
fn reachable(addr: &str) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {addr}: {e}"))?
        .collect();
    let mut last = format!("{addr} resolves to no address");
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, Duration::from_secs(5)) {
            Ok(_) => return Ok(a),
            Err(e) => last = format!("cannot connect to {a}: {e}"),
        }
    }
    Err(last)
}

fn head_end(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
}

/// How a relayed connection ended.
enum RelayEnd {
    /// One side closed (or failed): close the other.
    Closed,
    /// The idle timeout expired; whether the response head had reached the client.
    Idle { head_sent: bool },
    /// The planned reset.
    Reset,
}

/// One relayed connection: the intermediary of the simulation's proxy presets, on real
/// sockets.
///
/// The idle clock restarts on every byte from the server, and with ALB on every byte from
/// the client too (`ProxyConfig::idle_counts_client_bytes`). When it expires the relay drops
/// both connections, or, when the response head has not reached the client yet and the preset
/// has a gateway status (nginx and ALB 504, Cloudflare 524), answers with that status and an
/// empty body first. nginx holds a `text/event-stream` body until it ends unless the server
/// sent `X-Accel-Buffering: no`. Latency delays each chunk by the post's `latency_ms`, each way,
/// in order; a reset sets `SO_LINGER` to zero and drops the client's connection once the first
/// body bytes have passed, so the client reads a connection reset.
struct Relay {
    peer_port: u16,
    server: SocketAddr,
    proxy: Option<ProxyConfig>,
    relayed: Arc<Mutex<Relayed>>,
}

impl Relay {
    async fn run(self, mut down: tokio::net::TcpStream) {
        let Ok(mut up) = tokio::net::TcpStream::connect(self.server).await else {
            return;
        };
        let end = self.pump(&mut down, &mut up).await;
        let cut = match end {
            RelayEnd::Closed => None,
            RelayEnd::Idle { .. } => Some(Cut::Idle),
            RelayEnd::Reset => Some(Cut::Reset),
        };
        if let Some(cut) = cut {
            // Known before the connection drops, so the post that sees the cut finds it.
            self.relayed
                .lock()
                .expect("relay state")
                .cuts
                .insert(self.peer_port, cut);
        }
        match end {
            RelayEnd::Idle { head_sent: false } => {
                if let Some(status) = self.proxy.and_then(|p| p.timeout_status) {
                    let answer = format!(
                        "HTTP/1.1 {status} Gateway Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    );
                    let _ = down.write_all(answer.as_bytes()).await;
                    let _ = down.shutdown().await;
                }
            }
            RelayEnd::Reset => {
                let _ = socket2::SockRef::from(&down).set_linger(Some(Duration::ZERO));
            }
            _ => {}
        }
    }

    fn faults(&self) -> ConnFaults {
        let relayed = self.relayed.lock().expect("relay state");
        relayed
            .faults
            .get(&self.peer_port)
            .copied()
            .unwrap_or_default()
    }

    async fn pump(
        &self,
        down: &mut tokio::net::TcpStream,
        up: &mut tokio::net::TcpStream,
    ) -> RelayEnd {
        use tokio::time::Instant;
        let (mut down_read, mut down_write) = down.split();
        let (mut up_read, mut up_write) = up.split();
        // The post registers its faults before it writes the request, so they are known by
        // the time the first bytes from the client arrive.
        let mut faults: Option<ConnFaults> = None;
        let idle = self.proxy.map(|p| p.idle_timeout);
        let client_bytes_count = self.proxy.is_some_and(|p| p.idle_counts_client_bytes);
        let buffers = self.proxy.is_some_and(|p| p.buffers_unless_told);
        let mut last = Instant::now();
        // Response bytes read so far up to the end of the head, then whether to hold the body.
        let mut head: Vec<u8> = Vec::new();
        let mut head_len: Option<usize> = None;
        let mut holding = false;
        let mut held: Vec<u8> = Vec::new();
        let mut delivered = 0usize;
        let mut to_down: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
        let mut to_up: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
        let mut up_open = true;
        let mut down_buf = vec![0u8; 16 * 1024];
        let mut up_buf = vec![0u8; 16 * 1024];
        loop {
            let delay = Duration::from_millis(faults.map_or(0, |f| f.latency_ms));
            let far = Instant::now() + Duration::from_secs(24 * 3600);
            let next_due = [to_down.front(), to_up.front()]
                .into_iter()
                .flatten()
                .map(|(at, _)| *at)
                .min()
                .unwrap_or(far);
            let idle_at = idle.map_or(far, |d| last + d);
            if !up_open && to_down.is_empty() {
                return RelayEnd::Closed;
            }
            tokio::select! {
                biased;
                _ = tokio::time::sleep_until(next_due), if next_due < far => {
                    let now = Instant::now();
                    while to_up.front().is_some_and(|(at, _)| *at <= now) {
                        let (_, bytes) = to_up.pop_front().expect("front exists");
                        if up_write.write_all(&bytes).await.is_err() {
                            return RelayEnd::Closed;
                        }
                    }
                    while to_down.front().is_some_and(|(at, _)| *at <= now) {
                        let (_, bytes) = to_down.pop_front().expect("front exists");
                        if down_write.write_all(&bytes).await.is_err() {
                            return RelayEnd::Closed;
                        }
                        delivered += bytes.len();
                        let body_passed = head_len.is_some_and(|h| delivered > h);
                        if body_passed && faults.is_some_and(|f| f.reset) {
                            return RelayEnd::Reset;
                        }
                    }
                }
                n = up_read.read(&mut up_buf), if up_open => {
                    let n = match n {
                        Ok(0) | Err(_) => {
                            up_open = false;
                            if !held.is_empty() {
                                to_down.push_back((Instant::now() + delay, std::mem::take(&mut held)));
                            }
                            continue;
                        }
                        Ok(n) => n,
                    };
                    last = Instant::now();
                    let bytes = up_buf[..n].to_vec();
                    if head_len.is_none() {
                        head.extend_from_slice(&bytes);
                        if let Some(end) = head_end(&head) {
                            head_len = Some(end);
                            let text = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
                            let told = text.contains("x-accel-buffering: no");
                            holding = buffers && text.contains("text/event-stream") && !told;
                            if holding {
                                // The head passes; the body waits for its end.
                                to_down.push_back((last + delay, head[..end].to_vec()));
                                held.extend_from_slice(&head[end..]);
                                continue;
                            }
                        }
                    } else if holding {
                        held.extend_from_slice(&bytes);
                        // A complete chunked body ends in a zero-size chunk.
                        if held.ends_with(b"0\r\n\r\n") {
                            to_down.push_back((last + delay, std::mem::take(&mut held)));
                        }
                        continue;
                    }
                    to_down.push_back((last + delay, bytes));
                }
                n = down_read.read(&mut down_buf) => {
                    let n = match n { Ok(0) | Err(_) => return RelayEnd::Closed, Ok(n) => n };
                    let f = *faults.get_or_insert_with(|| self.faults());
                    if client_bytes_count {
                        last = Instant::now();
                    }
                    let at = Instant::now() + Duration::from_millis(f.latency_ms);
                    to_up.push_back((at, down_buf[..n].to_vec()));
                }
                _ = tokio::time::sleep_until(idle_at), if idle.is_some() => {
                    return RelayEnd::Idle { head_sent: head_len.is_some_and(|h| delivered >= h) };
                }
            }
        }
    }
}

struct Post {
    target: SocketAddr,
    endpoint: Arc<Endpoint>,
    stream: StreamId,
    msg: Message,
    faults: ConnFaults,
    tx: mpsc::Sender<Input>,
    relayed: Arc<Mutex<Relayed>>,
    connections: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
}

/// One POST on its own connection, its response streamed back as probe input.
async fn post(p: Post) {
    let Post {
        target,
        endpoint,
        stream,
        msg,
        faults,
        tx,
        relayed,
        connections,
        refused,
    } = p;
    let Ok(tcp) = tokio::net::TcpStream::connect(target).await else {
        refused.fetch_add(1, Ordering::Relaxed);
        let _ = tx.send(Input::Cut { stream, by: None });
        return;
    };
    connections.fetch_add(1, Ordering::Relaxed);
    let local_port = tcp.local_addr().map(|a| a.port()).unwrap_or(0);
    relayed
        .lock()
        .expect("relay state")
        .faults
        .insert(local_port, faults);
    let to = PostTarget {
        host: endpoint.authority.as_str(),
        path: endpoint.path.as_str(),
        stream_header: None,
    };
    http::exchange(tcp, to, &msg, Mutants::NONE, |item| {
        // An end or a cut that our own relay caused is the proxy's; any other the server's.
        let by_relay = || {
            relayed
                .lock()
                .expect("relay state")
                .cuts
                .get(&local_port)
                .copied()
        };
        let _ = tx.send(match item {
            ExchangeItem::Status {
                status,
                content_type,
            } => Input::Status {
                stream,
                status,
                content_type,
            },
            ExchangeItem::Message(bytes) => Input::Message { stream, bytes },
            ExchangeItem::Comment => Input::Comment { stream },
            ExchangeItem::Ended => match by_relay() {
                None => Input::Ended { stream },
                by => Input::Cut { stream, by },
            },
            ExchangeItem::Cut => Input::Cut {
                stream,
                by: by_relay(),
            },
        });
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let e = parse_url("http://127.0.0.1:8123/mcp").expect("parses");
        assert_eq!(e.authority, "127.0.0.1:8123");
        assert_eq!(e.addr, "127.0.0.1:8123");
        assert_eq!(e.path, "/mcp");
        let e = parse_url("http://localhost").expect("parses");
        assert_eq!((e.addr.as_str(), e.path.as_str()), ("localhost:80", "/"));
        let e = parse_url("http://[::1]:9000/a?b=1").expect("parses");
        assert_eq!((e.addr.as_str(), e.path.as_str()), ("[::1]:9000", "/a?b=1"));
        assert_eq!(parse_url("http://[::1]/").expect("parses").addr, "[::1]:80");
        assert!(parse_url("https://example.com/mcp").is_err());
        assert!(parse_url("127.0.0.1:80/mcp").is_err());
        assert!(parse_url("http://h:x/").is_err());
        assert!(parse_url("http:///mcp").is_err());
    }

    #[test]
    fn sse_media_type() {
        assert!(http::is_event_stream(Some("text/event-stream")));
        assert!(http::is_event_stream(Some(
            "Text/Event-Stream; charset=utf-8"
        )));
        assert!(!http::is_event_stream(Some("application/json")));
        assert!(!http::is_event_stream(None));
    }
}
