//! The custom server's end of the transport, recorded where the server is.
//!
//! A [`ServerStream`] is the server's end of one connection with a tap on it: the bytes the
//! server reads and writes pass through unchanged, and the tap frames them as the reference
//! server's driver does (`lanes::wiretap`) and records what it sees as `Side::Server` events,
//! on the server host's clock, at the moment the server reads or writes them:
//!
//! - stdio: each NDJSON line read is a `recv`, each line written a `send` (the message, or
//!   `raw` text when it does not decode; a framing error's description when the line is
//!   broken); reading the end of the stream is the client's `close` of the pipe;
//! - Streamable HTTP: the HTTP/1.1 requests read and responses written are parsed as they
//!   flow; a request's body is a `recv` on its stream (the client's `x-mcp-sim-stream` id, so
//!   both sides name the stream alike), a response head a `status`, each SSE event's data a
//!   `send` and each SSE comment a `comment`, a JSON body one `send`, the end of an SSE body
//!   the server's `close` of the stream; reading the end of the connection (or failing to read
//!   or write it) while a response is still open is the client's `close` of that stream.
//!
//! The streams are `Send` (rmcp, for one, requires it), so they cannot hold the run's shared
//! state: they queue their events with the time they happened, and the harness merges the
//! queue into the trace before any other event is recorded, which keeps the order in which
//! things happened.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use turmoil::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::trace_time;
use crate::lanes::wiretap::Framing;
use crate::time::Time;
use crate::trace::EventKind;

/// Where taps queue what they observed: the server's events with their times.
pub(crate) type TapSender = mpsc::Sender<(Time, EventKind)>;

/// The queue of tapped events not yet in the trace.
pub(crate) struct TapQueue {
    tx: TapSender,
    rx: mpsc::Receiver<(Time, EventKind)>,
}

impl Default for TapQueue {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel();
        TapQueue { tx, rx }
    }
}

impl TapQueue {
    /// A sender for a new tap.
    pub fn sender(&self) -> TapSender {
        self.tx.clone()
    }

    /// The queued events, oldest first.
    pub fn drain(&self) -> impl Iterator<Item = (Time, EventKind)> + '_ {
        self.rx.try_iter()
    }
}

/// The byte stream handed to a custom server: its end of one connection (a
/// `turmoil::net::TcpStream`), recorded at the server host.
///
/// Everything the server reads and writes through it passes unchanged and is recorded as the
/// server's own observations (`Side::Server` events on the server host's clock), framed as
/// the reference server records its own: stdio NDJSON lines, or HTTP/1.1 requests and
/// responses (see [`ServerIo`](super::ServerIo)). It implements tokio's `AsyncRead` and
/// `AsyncWrite` and is `Send` and `Unpin`, so any server that takes a byte stream takes it;
/// [`into_split`](Self::into_split) gives owned halves for a reader task and a writer task
/// (`tokio::io::split` works as well). The recording sees what crosses the stream: a line the
/// server reads is recorded when the server takes the bytes off the stream, whether or not it
/// has acted on it yet, and a line it writes when the stream accepts the bytes.
#[derive(Debug)]
pub struct ServerStream {
    read: ServerReadHalf,
    write: ServerWriteHalf,
}

/// The reading half of a [`ServerStream`], from [`ServerStream::into_split`].
#[derive(Debug)]
pub struct ServerReadHalf {
    inner: OwnedReadHalf,
    tap: Tap,
}

/// The writing half of a [`ServerStream`], from [`ServerStream::into_split`]. Dropping it
/// closes the server's side of the connection, as dropping the stream does.
#[derive(Debug)]
pub struct ServerWriteHalf {
    inner: OwnedWriteHalf,
    tap: Tap,
}

/// The listener handed to a custom Streamable HTTP server: the server host's HTTP port.
///
/// Each accepted connection is a [`ServerStream`] that records the HTTP exchange at the server
/// host. Serve it with hyper (`hyper_util::rt::TokioIo::new(stream)`) or any HTTP/1.1 server
/// that takes a byte stream.
pub struct ServerListener {
    inner: turmoil::net::TcpListener,
    tx: TapSender,
}

impl ServerListener {
    pub(crate) fn new(inner: turmoil::net::TcpListener, tx: TapSender) -> ServerListener {
        ServerListener { inner, tx }
    }

    /// Waits for the next connection, as `turmoil::net::TcpListener::accept` does.
    pub async fn accept(&self) -> io::Result<(ServerStream, SocketAddr)> {
        let (stream, peer) = self.inner.accept().await?;
        let framing = Framing::http(None);
        Ok((ServerStream::new(stream, framing, self.tx.clone()), peer))
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

impl ServerStream {
    /// A stdio stream: NDJSON lines both ways.
    pub(crate) fn stdio(stream: turmoil::net::TcpStream, tx: TapSender) -> ServerStream {
        ServerStream::new(stream, Framing::stdio(), tx)
    }

    fn new(stream: turmoil::net::TcpStream, framing: Framing, tx: TapSender) -> ServerStream {
        let tap = Tap(Arc::new(Mutex::new(TapState { framing, tx })));
        let (read, write) = stream.into_split();
        ServerStream {
            read: ServerReadHalf {
                inner: read,
                tap: tap.clone(),
            },
            write: ServerWriteHalf { inner: write, tap },
        }
    }

    /// Splits the stream into a reading and a writing half, each recorded as the whole stream
    /// is (as `turmoil::net::TcpStream::into_split`).
    pub fn into_split(self) -> (ServerReadHalf, ServerWriteHalf) {
        (self.read, self.write)
    }
}

impl AsyncRead for ServerReadHalf {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let room = buf.remaining() > 0;
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        match &poll {
            Poll::Ready(Ok(())) => {
                let read = &buf.filled()[before..];
                if !read.is_empty() {
                    this.tap.observe(|f, out| f.read(read, out));
                } else if room {
                    this.tap.observe(Framing::client_gone);
                }
            }
            Poll::Ready(Err(_)) => this.tap.observe(Framing::client_gone),
            Poll::Pending => {}
        }
        poll
    }
}

impl AsyncWrite for ServerWriteHalf {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        match &poll {
            Poll::Ready(Ok(n)) => this.tap.observe(|f, out| f.wrote(&buf[..*n], out)),
            Poll::Ready(Err(_)) => this.tap.observe(Framing::client_gone),
            Poll::Pending => {}
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_shutdown(cx);
        if let Poll::Ready(Ok(())) = poll {
            this.tap.observe(Framing::write_end);
        }
        poll
    }
}

impl AsyncRead for ServerStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.read).poll_read(cx, buf)
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.write).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.write).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.write).poll_shutdown(cx)
    }
}

impl fmt::Debug for ServerListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerListener")
            .field("local_addr", &self.inner.local_addr().ok())
            .finish_non_exhaustive()
    }
}

/// The recording state of one connection, shared by its two halves.
#[derive(Clone)]
struct Tap(Arc<Mutex<TapState>>);

impl fmt::Debug for Tap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tap(..)")
    }
}

struct TapState {
    framing: Framing,
    tx: TapSender,
}

impl Tap {
    /// Runs `f` on the connection's framing and queues the events it produced, at the server
    /// host's time now.
    fn observe(&self, f: impl FnOnce(&mut Framing, &mut Vec<EventKind>)) {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        f(&mut state.framing, &mut out);
        if out.is_empty() {
            return;
        }
        let t = trace_time();
        for kind in out {
            let _ = state.tx.send((t, kind));
        }
    }
}
