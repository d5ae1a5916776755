//! The `proxy` host: an intermediary that cuts idle upstream connections (docs/spec/intermediaries.md §1).
//!
//! It relays bytes between one client connection and one server connection; what passes,
//! what is held, when the idle clock runs out and whether that is a cut or a gateway answer
//! is [`ByteIntermediary`]'s to say (the one intermediary of every lane). A proxy that strips
//! headers (`strips_mcp_headers`) holds each request head until it is complete and forwards
//! it without `Mcp-Method` and `Mcp-Name` on every n-th stream, recording a `strip-headers`
//! fault for it.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::stream_id;
use super::{record, spawn_guarded, SharedRef, PROXY_PORT, SERVER_HTTP_PORT};
use crate::lanes::intermediary::{gateway_answer, head_end, ByteIntermediary, Expiry};
use crate::scenario::ProxyConfig;
use crate::trace::{EventKind, Side};

pub(crate) fn host(sim: &mut turmoil::Sim<'_>, shared: &SharedRef, config: ProxyConfig) {
    let shared = shared.clone();
    sim.host("proxy", move || {
        let shared = shared.clone();
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PROXY_PORT)).await?;
            loop {
                let (down, _) = listener.accept().await?;
                spawn_guarded(&shared, relay(down, config, shared.clone()));
            }
        }
    });
}

/// A request head without its `Mcp-Method` and `Mcp-Name` lines.
fn strip_mcp_headers(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    text.split_inclusive("\r\n")
        .filter(|line| {
            let lower = line.to_ascii_lowercase();
            !lower.starts_with("mcp-method:") && !lower.starts_with("mcp-name:")
        })
        .collect::<String>()
        .into_bytes()
}

async fn relay(down: turmoil::net::TcpStream, config: ProxyConfig, shared: SharedRef) {
    let Ok(up) = turmoil::net::TcpStream::connect(("server", SERVER_HTTP_PORT)).await else {
        return;
    };
    let (mut down_read, mut down_write) = down.into_split();
    let (mut up_read, mut up_write) = up.into_split();
    let mut request_head: Vec<u8> = Vec::new();
    let mut head_done = false;
    let mut stream: Option<u64> = None;
    let mut conn = ByteIntermediary::new(config, tokio::time::Instant::now());
    let mut down_buf = vec![0u8; 16 * 1024];
    let mut up_buf = vec![0u8; 16 * 1024];
    loop {
        let idle_at = conn.deadline();
        tokio::select! {
            biased;
            n = up_read.read(&mut up_buf) => {
                let n = match n {
                    Ok(0) | Err(_) => {
                        let _ = down_write.write_all(&conn.server_closed()).await;
                        break;
                    }
                    Ok(n) => n,
                };
                let out = conn.server_sent(tokio::time::Instant::now(), &up_buf[..n]);
                if !out.is_empty() && down_write.write_all(&out).await.is_err() { break }
            }
            n = down_read.read(&mut down_buf) => {
                let n = match n { Ok(0) | Err(_) => break, Ok(n) => n };
                conn.client_sent(tokio::time::Instant::now());
                if stream.is_some() || head_done {
                    if up_write.write_all(&down_buf[..n]).await.is_err() { break }
                    continue;
                }
                request_head.extend_from_slice(&down_buf[..n]);
                let Some(end) = head_end(&request_head) else {
                    if config.strips_mcp_headers.is_none()
                        && up_write.write_all(&down_buf[..n]).await.is_err()
                    {
                        break;
                    }
                    continue;
                };
                head_done = true;
                stream = stream_id(&request_head);
                let Some(every) = config.strips_mcp_headers else {
                    if up_write.write_all(&down_buf[..n]).await.is_err() { break }
                    continue;
                };
                let strip = stream.is_some_and(|s| s % every.max(1) == 0);
                let mut out = if strip {
                    record(&shared, Side::Proxy, EventKind::Fault { fault: "strip-headers".into(), stream, ms: None });
                    strip_mcp_headers(&request_head[..end])
                } else {
                    request_head[..end].to_vec()
                };
                out.extend_from_slice(&request_head[end..]);
                if up_write.write_all(&out).await.is_err() { break }
            }
            _ = tokio::time::sleep_until(idle_at) => {
                record(&shared, Side::Proxy, EventKind::Close { stream, by: Side::Proxy, reason: Some("idle".into()) });
                if let Expiry::Answer(status) = conn.expiry() {
                    let _ = down_write.write_all(gateway_answer(status).as_bytes()).await;
                    // Let the answer leave before the connection goes.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                return;
            }
        }
    }
}
