//! The `proxy` host: an intermediary that cuts idle upstream connections (docs/spec/intermediaries.md §1).
//!
//! It relays bytes between one client connection and one server connection. The idle clock
//! restarts on every byte read from the server (nginx `proxy_read_timeout`; SSE comments
//! count, so a stream that stays silent is cut), and for ALB, whose idle timeout counts
//! payload bytes both ways, on every byte from the client too.
//! On expiry it drops both connections, or, if the server has not sent its response headers
//! yet and the preset has a gateway status (Cloudflare 524, nginx 504), answers the client
//! with that status first. A buffering proxy (nginx) holds the response body until it is
//! complete unless the server sent `X-Accel-Buffering: no`, so progress sent in the meantime
//! never reaches the client. A proxy that strips headers (`strips_mcp_headers`) holds each
//! request head until it is complete and forwards it without `Mcp-Method` and `Mcp-Name` on
//! every n-th stream, recording a `strip-headers` fault for it.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::stream_id;
use super::{record, spawn_guarded, SharedRef, PROXY_PORT, SERVER_HTTP_PORT};
use crate::lanes::intermediary::{
    chunked_body_ended, gateway_answer, head_end, holds_body, Expiry, IdleClock,
};
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
    let mut response: Vec<u8> = Vec::new();
    // Decided once the response head is complete: hold the body until it ends?
    let mut buffering: Option<bool> = None;
    let mut clock = IdleClock::new(config, tokio::time::Instant::now());
    let mut down_buf = vec![0u8; 16 * 1024];
    let mut up_buf = vec![0u8; 16 * 1024];
    loop {
        let idle_at = clock.deadline();
        tokio::select! {
            biased;
            n = up_read.read(&mut up_buf) => {
                let n = match n { Ok(0) | Err(_) => break, Ok(n) => n };
                clock.server_bytes(tokio::time::Instant::now());
                let bytes = &up_buf[..n];
                match buffering {
                    Some(false) => { if down_write.write_all(bytes).await.is_err() { break } }
                    _ => {
                        response.extend_from_slice(bytes);
                        if buffering.is_none() {
                            if let Some(end) = head_end(&response) {
                                buffering = Some(holds_body(&config, &response[..end]));
                                clock.head_complete();
                            }
                        }
                        let complete = chunked_body_ended(&response);
                        if buffering == Some(false) || (buffering == Some(true) && complete) {
                            if down_write.write_all(&response).await.is_err() { break }
                            response.clear();
                        }
                    }
                }
            }
            n = down_read.read(&mut down_buf) => {
                let n = match n { Ok(0) | Err(_) => break, Ok(n) => n };
                clock.client_bytes(tokio::time::Instant::now());
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
                if let Expiry::Answer(status) = clock.expiry() {
                    let _ = down_write.write_all(gateway_answer(status).as_bytes()).await;
                    // Let the answer leave before the connection goes.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                return;
            }
        }
    }
}
