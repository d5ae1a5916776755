//! The local relay between the probe and a live HTTP server: an intermediary with the idle
//! timeout, buffering and gateway status of the simulation's proxy presets, on real sockets,
//! which also delays bytes and resets connections in the middle of a response as the probe's
//! seeded schedule says. The probe records the faults it planned as `fault` events
//! and the relay's cuts as closes by the proxy, reason `idle` or `reset`.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::gate::{FrontGate, GateRefusal};
use crate::lanes::http_serve::{connections_full, refusal_response, HttpLimits};
use crate::lanes::intermediary::{gateway_answer, head_end, ByteIntermediary, Expiry};
use crate::scenario::ProxyConfig;
use crate::trace::Side;
use crate::wire::origin::OriginPolicy;

/// The faults the relay applies to one connection, drawn by the probe when it posts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnFaults {
    /// Delay added to every chunk, each way, in ms.
    pub latency_ms: u64,
    /// Reset the connection once the first bytes of the response body have passed.
    pub reset: bool,
    /// Reset the connection this long after the request's first bytes arrived, if it is
    /// still open then (a scenario's stream reset at a planned moment of its call).
    pub reset_after_ms: Option<u64>,
}

/// Why the relay ended a connection, when it was its doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
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
pub(crate) struct Relayed {
    pub(crate) faults: BTreeMap<u16, ConnFaults>,
    pub(crate) cuts: BTreeMap<u16, Cut>,
}

/// The local relay between the probe and the server: an intermediary with an idle timeout
/// (a preset of the simulation's), added latency and resets.
#[derive(Debug, Clone, Copy, Default)]
pub struct RelayConfig {
    /// The intermediary whose idle timeout, buffering and gateway status the relay copies.
    pub proxy: Option<ProxyConfig>,
    /// Whether any post may carry [`ConnFaults`].
    pub faults: bool,
}

impl RelayConfig {
    pub(crate) fn wanted(&self) -> bool {
        self.proxy.is_some() || self.faults
    }
}

/// What a relayed connection shows of itself, for a recorder at both of its ends
/// (`mcp-sim record --http`): each chunk as it is read or written at either end, and how the
/// connection ended. The relay knows nothing of traces; the observer turns these into events.
pub(crate) trait RelayObserver: Send {
    /// The client sent `bytes` (read from the downstream connection).
    fn client_sent(&mut self, bytes: &[u8]);
    /// `bytes` reached the server (written upstream).
    fn server_read(&mut self, bytes: &[u8]);
    /// The server wrote `bytes` (read from upstream).
    fn server_wrote(&mut self, bytes: &[u8]);
    /// `bytes` reached the client (written downstream).
    fn client_got(&mut self, bytes: &[u8]);
    /// The connection ended by `by`'s doing, for `reason` if the intermediary cut it.
    fn gone(&mut self, by: Side, reason: Option<&str>);
    /// The front refused the connection's request `refusal.ordinal`; told before the bytes
    /// that carry it reach [`Self::client_sent`].
    fn refused(&mut self, refusal: &GateRefusal);
}

/// An observer, if the connection is recorded.
type Tap = Option<Box<dyn RelayObserver>>;

/// How a relayed connection ended.
enum RelayEnd {
    /// One side closed (or failed): close the other. `by_client`: the client's side ended.
    Closed { by_client: bool },
    /// The idle timeout expired: a bare cut, or the gateway's answer first.
    Idle(Expiry),
    /// The planned reset.
    Reset,
    /// The front gate refused a request ([`super::gate`]): answer it and close.
    Refused(GateRefusal),
}

/// One relayed connection: the intermediary of the simulation's proxy presets, on real
/// sockets.
///
/// What passes, what is held and how the idle clock ends the connection is the one
/// intermediary's ([`ByteIntermediary`]): the relay adds its I/O and the probe's faults. Latency delays each chunk by the post's `latency_ms`, each way,
/// in order; a reset sets `SO_LINGER` to zero and drops the client's connection once the first
/// body bytes have passed (or at the moment a scenario planned), so the client reads a
/// connection reset.
pub(crate) struct Relay {
    peer_port: u16,
    server: SocketAddr,
    proxy: Option<ProxyConfig>,
    relayed: Arc<Mutex<Relayed>>,
    front: Front,
    _admitted: Admitted,
}

/// The bounds and the `Host`/`Origin` policy of a relay's listener ([`super::gate`]), and
/// its connections open now.
#[derive(Debug, Clone, Default)]
pub(crate) struct Front {
    /// Which hosts and origins the listener serves.
    pub(crate) policy: OriginPolicy,
    /// Its HTTP bounds.
    pub(crate) limits: HttpLimits,
    open: Arc<AtomicUsize>,
}

impl Front {
    /// The front of a listener with `policy` and `limits`.
    pub(crate) fn new(policy: OriginPolicy, limits: HttpLimits) -> Front {
        Front {
            policy,
            limits,
            open: Arc::default(),
        }
    }

    /// A new connection's place among the open ones, or `None` when `max_connections` are
    /// open (the connection is then refused with [`refuse_connection`]).
    pub(crate) fn admit(&self) -> Option<Admitted> {
        let max = self.limits.max_connections;
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Admitted(Arc::clone(&self.open)))
    }
}

/// An open connection of a [`Front`], counted until it is dropped.
pub(crate) struct Admitted(Arc<AtomicUsize>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection over the front's bound: answered 503 with a JSON-RPC error naming the bound
/// (told to `tap` too), then closed, without reading a request.
pub(crate) async fn refuse_connection(
    mut down: tokio::net::TcpStream,
    max: usize,
    tap: Option<&mut dyn RelayObserver>,
) {
    let answer = refusal_response(503, None, &connections_full(max));
    let _ = down.write_all(&answer).await;
    let _ = down.shutdown().await;
    if let Some(tap) = tap {
        tap.client_got(&answer);
    }
}

impl Relay {
    pub(crate) fn new(
        peer_port: u16,
        server: SocketAddr,
        proxy: Option<ProxyConfig>,
        relayed: Arc<Mutex<Relayed>>,
        front: Front,
        admitted: Admitted,
    ) -> Relay {
        Relay {
            peer_port,
            server,
            proxy,
            relayed,
            front,
            _admitted: admitted,
        }
    }

    pub(crate) async fn run(self, down: tokio::net::TcpStream) {
        let Ok(up) = tokio::net::TcpStream::connect(self.server).await else {
            return;
        };
        self.relay(down, up, None).await;
    }

    /// Like [`Relay::run`], telling `tap` what passes at both ends of the connection.
    pub(crate) async fn run_tapped(
        self,
        down: tokio::net::TcpStream,
        tap: impl RelayObserver + 'static,
    ) {
        let Ok(up) = tokio::net::TcpStream::connect(self.server).await else {
            return;
        };
        self.relay(down, up, Some(Box::new(tap))).await;
    }

    async fn relay(
        &self,
        mut down: tokio::net::TcpStream,
        mut up: tokio::net::TcpStream,
        mut tap: Tap,
    ) {
        // Every chunk goes on at once: Nagle's algorithm would hold small writes (an SSE
        // event, a request) for the peer's delayed acknowledgement, tens of ms.
        let _ = down.set_nodelay(true);
        let _ = up.set_nodelay(true);
        let end = self.pump(&mut down, &mut up, &mut tap).await;
        let cut = match end {
            RelayEnd::Closed { .. } | RelayEnd::Refused(_) => None,
            RelayEnd::Idle(_) => Some(Cut::Idle),
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
            RelayEnd::Idle(Expiry::Answer(status)) => {
                let answer = gateway_answer(status);
                let _ = down.write_all(answer.as_bytes()).await;
                let _ = down.shutdown().await;
                if let Some(tap) = &mut tap {
                    tap.client_got(answer.as_bytes());
                }
            }
            RelayEnd::Reset => {
                let _ = socket2::SockRef::from(&down).set_linger(Some(Duration::ZERO));
            }
            RelayEnd::Refused(ref refusal) => {
                let answer = refusal_response(refusal.status, refusal.id.clone(), &refusal.why);
                let _ = down.write_all(&answer).await;
                let _ = down.shutdown().await;
                if let Some(tap) = &mut tap {
                    tap.client_got(&answer);
                }
            }
            _ => {}
        }
        if let Some(tap) = &mut tap {
            match end {
                RelayEnd::Closed { by_client: true } => tap.gone(Side::Client, None),
                RelayEnd::Closed { by_client: false } => tap.gone(Side::Server, None),
                RelayEnd::Idle(_) => tap.gone(Side::Proxy, Some(Cut::Idle.reason())),
                RelayEnd::Reset => tap.gone(Side::Proxy, Some(Cut::Reset.reason())),
                RelayEnd::Refused(_) => tap.gone(Side::Proxy, Some("refused")),
            }
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
        tap: &mut Tap,
    ) -> RelayEnd {
        use tokio::time::Instant;
        let (mut down_read, mut down_write) = down.split();
        let (mut up_read, mut up_write) = up.split();
        // The post registers its faults before it writes the request, so they are known by
        // the time the first bytes from the client arrive.
        let mut faults: Option<ConnFaults> = None;
        // When a reset planned at a moment is due, from the request's first bytes.
        let mut reset_at: Option<Instant> = None;
        let mut gate = FrontGate::new(self.front.policy.clone(), self.front.limits);
        // The intermediary, when the relay copies a preset.
        let mut conn = self.proxy.map(|p| ByteIntermediary::new(p, Instant::now()));
        // Without one, the response bytes up to the end of the head, for the planned reset.
        let mut head: Vec<u8> = Vec::new();
        let mut head_len: Option<usize> = None;
        let mut delivered = 0usize;
        let mut to_down: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
        let mut to_up: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
        let mut up_open = true;
        let mut down_buf = vec![0u8; 16 * 1024];
        let mut up_buf = vec![0u8; 16 * 1024];
        loop {
            // What is due goes on now, not at the timer's next tick (tokio's timers round up
            // to the millisecond, which would add a millisecond to every undelayed chunk).
            let now = Instant::now();
            while to_up.front().is_some_and(|(at, _)| *at <= now) {
                let (_, bytes) = to_up.pop_front().expect("front exists");
                if up_write.write_all(&bytes).await.is_err() {
                    return RelayEnd::Closed { by_client: false };
                }
                if let Some(tap) = tap {
                    tap.server_read(&bytes);
                }
            }
            while to_down.front().is_some_and(|(at, _)| *at <= now) {
                let (_, bytes) = to_down.pop_front().expect("front exists");
                if down_write.write_all(&bytes).await.is_err() {
                    return RelayEnd::Closed { by_client: true };
                }
                if let Some(tap) = tap {
                    tap.client_got(&bytes);
                }
                delivered += bytes.len();
                let body_passed = head_len.is_some_and(|h| delivered > h);
                if body_passed && faults.is_some_and(|f| f.reset) {
                    return RelayEnd::Reset;
                }
            }
            let delay = Duration::from_millis(faults.map_or(0, |f| f.latency_ms));
            let far = Instant::now() + Duration::from_secs(24 * 3600);
            let next_due = [to_down.front(), to_up.front()]
                .into_iter()
                .flatten()
                .map(|(at, _)| *at)
                .min()
                .unwrap_or(far);
            let idle_at = conn.as_ref().map_or(far, |c| c.deadline());
            if !up_open && to_down.is_empty() {
                return RelayEnd::Closed { by_client: false };
            }
            tokio::select! {
                biased;
                // Wakes the loop for the next delayed chunk (delivered above).
                _ = tokio::time::sleep_until(next_due), if next_due < far => {}
                n = up_read.read(&mut up_buf), if up_open => {
                    let n = match n {
                        Ok(0) | Err(_) => {
                            up_open = false;
                            let rest = conn.as_mut().map(|c| c.server_closed()).unwrap_or_default();
                            if !rest.is_empty() {
                                to_down.push_back((Instant::now() + delay, rest));
                            }
                            continue;
                        }
                        Ok(n) => n,
                    };
                    let last = Instant::now();
                    let bytes = &up_buf[..n];
                    if let Some(tap) = tap {
                        tap.server_wrote(bytes);
                    }
                    let out = match &mut conn {
                        Some(c) => {
                            let out = c.server_sent(last, bytes);
                            head_len = c.head_len();
                            out
                        }
                        None => {
                            if head_len.is_none() {
                                head.extend_from_slice(bytes);
                                head_len = head_end(&head);
                            }
                            bytes.to_vec()
                        }
                    };
                    if !out.is_empty() {
                        to_down.push_back((last + delay, out));
                    }
                }
                n = down_read.read(&mut down_buf) => {
                    let n = match n { Ok(0) | Err(_) => return RelayEnd::Closed { by_client: true }, Ok(n) => n };
                    let gated = gate.client_sent(&down_buf[..n]);
                    if let Some(tap) = tap {
                        if let Some(refusal) = &gated.refused {
                            tap.refused(refusal);
                        }
                        tap.client_sent(&down_buf[..n]);
                    }
                    if let Some(refusal) = gated.refused {
                        // What came before the refused request goes on first, at once.
                        to_up.push_back((Instant::now(), gated.pass));
                        for (_, bytes) in to_up.drain(..) {
                            if !bytes.is_empty() && up_write.write_all(&bytes).await.is_ok() {
                                if let Some(tap) = tap {
                                    tap.server_read(&bytes);
                                }
                            }
                        }
                        return RelayEnd::Refused(refusal);
                    }
                    let f = *faults.get_or_insert_with(|| {
                        let f = self.faults();
                        reset_at = f.reset_after_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
                        f
                    });
                    if let Some(c) = &mut conn {
                        c.client_sent(Instant::now());
                    }
                    if !gated.pass.is_empty() {
                        let at = Instant::now() + Duration::from_millis(f.latency_ms);
                        to_up.push_back((at, gated.pass));
                    }
                }
                _ = tokio::time::sleep_until(reset_at.unwrap_or(far)), if reset_at.is_some() => {
                    return RelayEnd::Reset;
                }
                _ = tokio::time::sleep_until(idle_at), if conn.is_some() => {
                    return RelayEnd::Idle(conn.as_ref().map_or(Expiry::Cut, |c| c.expiry()));
                }
            }
        }
    }
}
