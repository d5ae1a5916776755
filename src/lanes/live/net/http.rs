//! The sockets of the Streamable HTTP probe.
//!
//! Every `ClientTransmit::Post` is a real HTTP/1.1 POST on its own connection, with the
//! headers the reference client computed (2026-07-28's Content-Type, Accept,
//! `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, or the legacy era's session and version
//! headers; see [`crate::lanes::http_exchange`]), and so is each legacy `GET` and `DELETE`; the response is streamed
//! back to the probe's event loop: a `text/event-stream` body through the SSE decoder, one
//! message per event, any other body as one message when it ends. Closing a stream aborts its
//! task, which drops the connection (the cancellation on HTTP). The tasks run on a tokio
//! runtime of their own thread.
//!
//! With a proxy preset, latency or resets the posts go through a local [`relay`](super::relay)
//! on 127.0.0.1 (an ephemeral port).

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::relay::{refuse_connection, ConnFaults, Front, Relay, RelayConfig, Relayed};
use crate::lanes::http_exchange::{self as http, ExchangeItem, PostTarget};
use crate::lanes::http_serve::HttpLimits;
use crate::lanes::live::Input;
use crate::model::{MutantSet, StreamId};
use crate::wire::http::Method;
use crate::wire::origin::OriginPolicy;
use crate::wire::Message;

/// Where a Streamable HTTP server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host[:port]` as written, for the Host header.
    pub authority: String,
    /// `host:port` to connect to.
    pub addr: String,
    /// The request target: path and query.
    pub path: String,
}

/// Parses `http://HOST[:PORT][/PATH]`. TLS is not spoken: `https` is refused.
pub fn parse_url(url: &str) -> Result<Endpoint, String> {
    let rest = match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "only http:// URLs are supported, not {scheme}:// (no TLS)"
            ))
        }
        None => return Err("the URL must start with http://".into()),
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
        return Err("the URL needs a host (and no user info)".into());
    }
    // The port follows the last colon, unless that colon is inside an IPv6 literal.
    let has_port = match authority.rfind(':') {
        Some(i) => !authority[i..].contains(']'),
        None => false,
    };
    let addr = if has_port {
        let port = &authority[authority.rfind(':').unwrap_or(0) + 1..];
        if port.parse::<u16>().is_err() {
            return Err(format!("bad port {port:?} in the URL"));
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

/// The runtime, the open posts and the optional relay.
pub struct Http {
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
            // The relay is a loopback listener like any of mcp-sim's: it serves loopback
            // names and the server's own authority (which the probe's requests name), within
            // the default bounds.
            let policy = OriginPolicy {
                allow_hosts: vec![endpoint.authority.clone()],
                ..OriginPolicy::default()
            };
            let front = Front::new(policy, HttpLimits::default());
            handle.spawn(async move {
                while let Ok((down, peer)) = listener.accept().await {
                    let Some(admitted) = front.admit() else {
                        tokio::spawn(refuse_connection(down, front.limits.max_connections, None));
                        continue;
                    };
                    let conn = Relay::new(
                        peer.port(),
                        server,
                        relay_config.proxy,
                        Arc::clone(&relayed),
                        front.clone(),
                        admitted,
                    );
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

    /// Sends a request of its own (a POST of `msg`, or the legacy era's `GET` or `DELETE`)
    /// with `headers`, through the relay with `faults`; its response arrives as `stream`.
    pub fn send(
        &mut self,
        stream: StreamId,
        method: Method,
        msg: Option<Message>,
        headers: BTreeMap<String, String>,
        faults: ConnFaults,
    ) {
        let task = self.handle.spawn(post(Post {
            target: self.target,
            endpoint: Arc::clone(&self.endpoint),
            stream,
            method,
            msg,
            headers,
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

struct Post {
    target: SocketAddr,
    endpoint: Arc<Endpoint>,
    stream: StreamId,
    method: Method,
    msg: Option<Message>,
    headers: BTreeMap<String, String>,
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
        method,
        msg,
        headers,
        faults,
        tx,
        relayed,
        connections,
        refused,
    } = p;
    let Ok(tcp) = tokio::net::TcpStream::connect(target).await else {
        refused.fetch_add(1, Ordering::Relaxed);
        let _ = tx.send(Input::Http {
            stream,
            item: ExchangeItem::Cut,
            by_relay: None,
        });
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
    http::exchange(
        tcp,
        to,
        http::Outgoing {
            method,
            msg: msg.as_ref(),
            headers,
        },
        MutantSet::NONE,
        |item| {
            // An end or a cut that our own relay caused is the proxy's; any other the server's.
            let by_relay = || {
                relayed
                    .lock()
                    .expect("relay state")
                    .cuts
                    .get(&local_port)
                    .copied()
            };
            let by_relay = match item {
                ExchangeItem::Ended | ExchangeItem::Cut => by_relay(),
                _ => None,
            };
            let _ = tx.send(Input::Http {
                stream,
                item,
                by_relay,
            });
        },
    )
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
        assert!(crate::lanes::http_exchange::is_event_stream(Some(
            "text/event-stream"
        )));
        assert!(crate::lanes::http_exchange::is_event_stream(Some(
            "Text/Event-Stream; charset=utf-8"
        )));
        assert!(!crate::lanes::http_exchange::is_event_stream(Some(
            "application/json"
        )));
        assert!(!crate::lanes::http_exchange::is_event_stream(None));
    }
}
