//! The one intermediary, seen from its three lanes: the in-memory lane's open streams, the
//! turmoil lane's `proxy` host and the live relay each carry the same scripted exchange, and
//! each must give the client the same thing: the same cut, at the same time, with the same
//! gateway status or none, the same head and the same body before it.
//!
//! The table is preset × event stream or JSON × the server sent its head or not × the client
//! sent bytes late or not. Every preset's idle timeout is set to one second so that the live
//! relay can run on the wall clock; what a preset does otherwise is its own. The expected
//! column comes from `docs/spec/intermediaries.md` §1, not from the code.
//!
//! The script: the client opens the connection at 0 and sends its request head; its body
//! goes at once, or at 600 ms when the case has late client bytes. The server, when the case
//! has a head, writes its response head and a first part of the body at 100 ms, then nothing.
//! Nothing ever ends the response, so the intermediary's idle clock decides.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use super::intermediary::{Expiry, FromServer};
use super::live::net::relay::{Front, Relay, Relayed};
use super::memory::{OpenStreams, Piece};
use super::turmoil::{proxy, Shared, SharedRef, PROXY_PORT, SERVER_HTTP_PORT};
use crate::model::StreamId;
use crate::scenario::ProxyConfig;
use crate::time::Time;

const IDLE: Duration = Duration::from_millis(1_000);
const HEAD_AT: Duration = Duration::from_millis(100);
const CLIENT_LATE_AT: Duration = Duration::from_millis(600);

#[derive(Debug, Clone, Copy)]
struct Case {
    preset: ProxyConfig,
    event_stream: bool,
    head: bool,
    late_client_bytes: bool,
}

/// What the client saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// When the connection ended, from its start.
    cut_ms: u64,
    /// The gateway's own status, if it answered.
    gateway: Option<u16>,
    /// The server's response head reached the client.
    head: bool,
    /// The first part of the server's body reached the client.
    body: bool,
}

impl Case {
    fn config(&self) -> ProxyConfig {
        ProxyConfig {
            idle_timeout: IDLE,
            ..self.preset
        }
    }

    /// What §1 says the client sees.
    fn expected(&self) -> Seen {
        let p = self.preset;
        let server_last = if self.head { HEAD_AT } else { Duration::ZERO };
        let client_last = if self.late_client_bytes && p.idle_counts_client_bytes {
            CLIENT_LATE_AT
        } else {
            Duration::ZERO
        };
        Seen {
            cut_ms: (server_last.max(client_last) + IDLE).as_millis() as u64,
            gateway: if self.head { None } else { p.timeout_status },
            head: self.head,
            body: self.head && !(p.buffers_unless_told && self.event_stream),
        }
    }

    fn response(&self) -> Vec<u8> {
        if self.event_stream {
            let event = "data: {\"progress\":1}\n\n";
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                 transfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                event.len()
            )
            .into_bytes()
        } else {
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 40\r\n\r\n\
              {\"jsonrpc\":\"2.0\","
                .to_vec()
        }
    }
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for preset in [
        ProxyConfig::NGINX,
        ProxyConfig::ALB,
        ProxyConfig::CLOUDFLARE,
        ProxyConfig::custom(IDLE),
    ] {
        for event_stream in [true, false] {
            for head in [true, false] {
                for late_client_bytes in [true, false] {
                    out.push(Case {
                        preset,
                        event_stream,
                        head,
                        late_client_bytes,
                    });
                }
            }
        }
    }
    out
}

/// What the client read, and when the connection ended.
fn seen(got: &[u8], cut: Duration) -> Seen {
    let text = String::from_utf8_lossy(got);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok());
    Seen {
        cut_ms: cut.as_millis() as u64,
        gateway: status.filter(|s| *s != 200),
        head: status == Some(200),
        body: text.contains("data: {") || text.contains("{\"jsonrpc\""),
    }
}

/// The in-memory lane: its open streams, through the proxy, at the case's times.
fn memory(case: Case) -> Seen {
    let stream = StreamId(1);
    let at = |d: Duration| Time::ZERO + d;
    let mut open = OpenStreams::default();
    let mut pieces = Vec::new();
    open.open(stream, Some(case.config()), Time::ZERO);
    if !case.late_client_bytes {
        open.client_bytes(stream, Time::ZERO);
    }
    if case.head {
        let content_type = if case.event_stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let head = FromServer::Head {
            part: Piece::Status(200, Some(content_type), None),
            event_stream: case.event_stream,
            told_not_to_buffer: false,
        };
        let body = FromServer::Body(Piece::Body(case.response()));
        pieces.extend(open.server_sent(stream, at(HEAD_AT), head));
        pieces.extend(open.server_sent(stream, at(HEAD_AT), body));
    }
    if case.late_client_bytes {
        open.client_bytes(stream, at(CLIENT_LATE_AT));
    }
    let cut = open.deadline().expect("a proxy stream has a deadline");
    let expired = open.expired(cut);
    assert_eq!(expired.len(), 1, "{case:?}");
    if let Expiry::Answer(status) = expired[0].1 {
        pieces.extend(Piece::gateway_answer(status));
    }
    Seen {
        cut_ms: (cut - Time::ZERO).as_millis() as u64,
        gateway: pieces.iter().find_map(|p| match p {
            Piece::Status(s, _, _) if *s != 200 => Some(*s),
            _ => None,
        }),
        head: pieces.contains(&Piece::Status(
            200,
            Some(if case.event_stream {
                "text/event-stream"
            } else {
                "application/json"
            }),
            None,
        )),
        body: pieces.iter().any(|p| matches!(p, Piece::Body(_))),
    }
}

/// The scripted client: the request head at once, its body at once or late, then it reads
/// until the connection ends.
async fn client(conn: impl AsyncRead + AsyncWrite, case: Case, start: Instant) -> Seen {
    let (mut read, mut write) = tokio::io::split(conn);
    let writer = async move {
        let head = b"POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-length: 2\r\n\r\n";
        let _ = write.write_all(head).await;
        if case.late_client_bytes {
            tokio::time::sleep_until(start + CLIENT_LATE_AT).await;
        }
        let _ = write.write_all(b"{}").await;
        std::future::pending::<()>().await;
    };
    let reader = async move {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = read.read(&mut buf).await {
            got.extend_from_slice(&buf[..n]);
        }
        seen(&got, start.elapsed())
    };
    tokio::select! {
        seen = reader => seen,
        _ = writer => unreachable!("the writer never ends"),
    }
}

/// The scripted server: it reads whatever comes, and writes its head and a first part of the
/// body at 100 ms when the case has a head; it ends when its connection does.
async fn server(conn: impl AsyncRead + AsyncWrite, case: Case, start: Instant) {
    let (mut read, mut write) = tokio::io::split(conn);
    let writer = async move {
        if case.head {
            tokio::time::sleep_until(start + HEAD_AT).await;
            let _ = write.write_all(&case.response()).await;
        }
        std::future::pending::<()>().await;
    };
    let reader = async move {
        let mut buf = [0u8; 4096];
        while let Ok(1..) = read.read(&mut buf).await {}
    };
    tokio::select! {
        () = reader => {}
        _ = writer => {}
    }
}

/// The turmoil lane: its `proxy` host between the scripted peers, with no link latency.
fn turmoil(case: Case) -> Seen {
    let mut sim = turmoil::Builder::new()
        .tick_duration(Duration::from_millis(1))
        .simulation_duration(Duration::from_secs(30))
        .min_message_latency(Duration::ZERO)
        .max_message_latency(Duration::ZERO)
        .build();
    let shared: SharedRef = Rc::new(RefCell::new(Shared::default()));
    proxy::host(&mut sim, &shared, case.config());
    sim.host("server", move || async move {
        let start = Instant::now();
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_HTTP_PORT)).await?;
        loop {
            let (conn, _) = listener.accept().await?;
            server(conn, case, start).await;
        }
    });
    let out = Rc::new(RefCell::new(None));
    let put = out.clone();
    sim.client("client", async move {
        let start = Instant::now();
        let conn = turmoil::net::TcpStream::connect(("proxy", PROXY_PORT)).await?;
        *put.borrow_mut() = Some(client(conn, case, start).await);
        Ok(())
    });
    sim.run().expect("the table's simulation runs");
    let seen = out.borrow_mut().take();
    seen.expect("the client finished")
}

/// The live relay on loopback sockets and the wall clock, every case at once.
fn live(cases: &[Case]) -> Vec<Seen> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let runs = cases.iter().map(|&case| async move {
            let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let server_addr = upstream.local_addr().unwrap();
            let front = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let front_addr = front.local_addr().unwrap();
            let start = Instant::now();
            let server_side = async move {
                let (conn, _) = upstream.accept().await.unwrap();
                server(conn, case, start).await;
            };
            let relay_side = async move {
                let (down, peer) = front.accept().await.unwrap();
                let relayed = Arc::new(Mutex::new(Relayed::default()));
                let front = Front::default();
                let admitted = front.admit().expect("one connection");
                Relay::new(
                    peer.port(),
                    server_addr,
                    Some(case.config()),
                    relayed,
                    front,
                    admitted,
                )
                .run(down)
                .await;
            };
            let client_side = async move {
                let conn = tokio::net::TcpStream::connect(front_addr).await.unwrap();
                let _ = conn.set_nodelay(true);
                client(conn, case, start).await
            };
            let (seen, (), ()) = tokio::join!(client_side, relay_side, server_side);
            seen
        });
        futures_util::future::join_all(runs).await
    })
}

fn agree(lane: &str, case: Case, seen: Seen, slack_ms: u64) {
    let want = case.expected();
    let on_time = seen.cut_ms.abs_diff(want.cut_ms) <= slack_ms;
    let same = Seen {
        cut_ms: want.cut_ms,
        ..seen
    };
    assert!(
        on_time && same == want,
        "{lane}: {case:?}\n  saw      {seen:?}\n  expected {want:?} (cut within {slack_ms} ms)"
    );
}

#[test]
fn every_lane_gives_the_same_cut_status_and_timing_for_every_case_of_the_table() {
    let cases = cases();
    assert_eq!(cases.len(), 32);
    for &case in &cases {
        agree("memory", case, memory(case), 0);
        // A tick, and the millisecond the proxy host gives its answer to leave.
        agree("turmoil", case, turmoil(case), 3);
    }
    // The wall clock under a loaded machine: wide, but far below the 500 ms that separate
    // an idle cut restarted by the client's late bytes from one that is not.
    for (&case, seen) in cases.iter().zip(live(&cases)) {
        agree("live", case, seen, 200);
    }
}
