//! What the byte-level intermediaries (the turmoil lane's `proxy` host and the live relay)
//! decide alike about an HTTP/1.1 exchange passing through them: where a head ends, whether
//! nginx's buffering holds the body, when a chunked body has ended, and the gateway's answer
//! when the idle timeout strikes before the response head went out.
//!
//! The presets' facts are in `docs/spec/intermediaries.md` §1.

use crate::scenario::ProxyConfig;

/// The length of the head at the start of `bytes` (through its blank line), once complete.
pub(crate) fn head_end(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
}

/// Whether `config` holds the body of the response whose complete `head` this is until the
/// body ends: nginx buffers an event stream unless the server sent `X-Accel-Buffering: no`.
pub(crate) fn holds_body(config: &ProxyConfig, head: &[u8]) -> bool {
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let told = head.contains("x-accel-buffering: no");
    config.buffers_unless_told && head.contains("text/event-stream") && !told
}

/// Whether the chunked body read so far is complete: it ends in the zero-size chunk.
pub(crate) fn chunked_body_ended(body: &[u8]) -> bool {
    body.ends_with(b"0\r\n\r\n")
}

/// The gateway's answer to a client whose upstream went idle before sending a head
/// (`ProxyConfig::timeout_status`: 504 for nginx and ALB, 524 for Cloudflare).
pub(crate) fn gateway_answer(status: u16) -> String {
    format!("HTTP/1.1 {status} Gateway Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_holds_an_event_stream_unless_told_not_to() {
        let sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
        let told =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Accel-Buffering: no\r\n\r\n";
        let json = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n";
        assert!(holds_body(&ProxyConfig::NGINX, sse));
        assert!(!holds_body(&ProxyConfig::NGINX, told));
        assert!(!holds_body(&ProxyConfig::NGINX, json));
        assert!(!holds_body(&ProxyConfig::ALB, sse));
        assert_eq!(head_end(sse), Some(sse.len()));
        assert_eq!(head_end(&sse[..sse.len() - 1]), None);
        assert!(chunked_body_ended(b"5\r\nhello\r\n0\r\n\r\n"));
        assert!(!chunked_body_ended(b"5\r\nhello\r\n"));
    }
}
