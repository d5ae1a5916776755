//! `mcp-sim probe --url URL`: the sockets of the Streamable HTTP probe.
//!
//! Every `ClientTransmit::Post` is a real HTTP/1.1 POST on its own connection, with the
//! headers of the simulated client (Host, Content-Type, Accept, `MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`); the response is streamed back to the probe's event loop: a
//! `text/event-stream` body through the SSE decoder, one message per event, any other body as
//! one message when it ends. Closing a stream aborts its task, which drops the connection (the
//! cancellation on HTTP). The tasks run on a tokio runtime of their own thread.
//!
//! With `--proxy-idle-ms N` the posts go through a local relay on 127.0.0.1 (an ephemeral
//! port) that cuts a connection after N ms without bytes from the server, as an intermediary's
//! idle timeout does; the probe records such a cut as a close by the proxy, reason `idle`.

use std::collections::{BTreeMap, HashSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use mcp_sim::harness::http::{self, ExchangeItem, PostTarget};
use mcp_sim::model::StreamId;
use mcp_sim::mutants::Mutants;
use mcp_sim::wire::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::probe::Input;

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

/// The runtime, the open posts and the optional idle-timeout relay.
pub(crate) struct Http {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    endpoint: Arc<Endpoint>,
    /// Where posts connect: the server, or the relay.
    target: SocketAddr,
    tx: mpsc::Sender<Input>,
    posts: BTreeMap<StreamId, tokio::task::JoinHandle<()>>,
    /// Local ports of the connections the relay cut for idleness.
    cuts: Arc<Mutex<HashSet<u16>>>,
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
        proxy_idle: Option<Duration>,
        tx: mpsc::Sender<Input>,
    ) -> Result<Http, String> {
        let server = reachable(&endpoint.addr)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime: {e}"))?;
        let handle = runtime.handle().clone();
        let cuts = Arc::new(Mutex::new(HashSet::new()));
        let mut proxy = None;
        if let Some(idle) = proxy_idle {
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
            let cuts = Arc::clone(&cuts);
            handle.spawn(async move {
                while let Ok((down, peer)) = listener.accept().await {
                    tokio::spawn(relay(down, peer.port(), server, idle, Arc::clone(&cuts)));
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
            cuts,
            proxy,
            connections: Arc::new(AtomicUsize::new(0)),
            refused: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Sends `msg` in a POST of its own; its response arrives as `stream`.
    pub fn post(&mut self, stream: StreamId, msg: Message) {
        let task = self.handle.spawn(post(Post {
            target: self.target,
            endpoint: Arc::clone(&self.endpoint),
            stream,
            msg,
            tx: self.tx.clone(),
            cuts: Arc::clone(&self.cuts),
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

/// Relays one connection to the server; cuts it after `idle` without bytes from the server.
async fn relay(
    down: tokio::net::TcpStream,
    peer_port: u16,
    server: SocketAddr,
    idle: Duration,
    cuts: Arc<Mutex<HashSet<u16>>>,
) {
    let Ok(up) = tokio::net::TcpStream::connect(server).await else {
        return;
    };
    let (mut down_read, mut down_write) = down.into_split();
    let (mut up_read, mut up_write) = up.into_split();
    let mut last = tokio::time::Instant::now();
    let mut down_buf = vec![0u8; 16 * 1024];
    let mut up_buf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            biased;
            n = up_read.read(&mut up_buf) => {
                let n = match n { Ok(0) | Err(_) => break, Ok(n) => n };
                last = tokio::time::Instant::now();
                if down_write.write_all(&up_buf[..n]).await.is_err() { break }
            }
            n = down_read.read(&mut down_buf) => {
                let n = match n { Ok(0) | Err(_) => break, Ok(n) => n };
                if up_write.write_all(&down_buf[..n]).await.is_err() { break }
            }
            _ = tokio::time::sleep_until(last + idle) => {
                // Known before the connections drop, so the post that sees the cut finds it.
                cuts.lock().expect("cut set").insert(peer_port);
                return;
            }
        }
    }
}

struct Post {
    target: SocketAddr,
    endpoint: Arc<Endpoint>,
    stream: StreamId,
    msg: Message,
    tx: mpsc::Sender<Input>,
    cuts: Arc<Mutex<HashSet<u16>>>,
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
        tx,
        cuts,
        connections,
        refused,
    } = p;
    let Ok(tcp) = tokio::net::TcpStream::connect(target).await else {
        refused.fetch_add(1, Ordering::Relaxed);
        let _ = tx.send(Input::Cut {
            stream,
            by_proxy: false,
        });
        return;
    };
    connections.fetch_add(1, Ordering::Relaxed);
    let local_port = tcp.local_addr().map(|a| a.port()).unwrap_or(0);
    let to = PostTarget {
        host: endpoint.authority.as_str(),
        path: endpoint.path.as_str(),
        stream_header: None,
    };
    http::exchange(tcp, to, &msg, Mutants::NONE, |item| {
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
            ExchangeItem::Ended => Input::Ended { stream },
            // A cut by our own idle relay is the proxy's; any other is the server's.
            ExchangeItem::Cut => {
                let by_proxy = cuts.lock().expect("cut set").contains(&local_port);
                Input::Cut { stream, by_proxy }
            }
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
