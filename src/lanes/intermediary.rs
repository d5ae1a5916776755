//! What the idle-timeout intermediaries of every lane (the in-memory lane's proxy, the turmoil
//! lane's `proxy` host, the live relay) decide alike about an exchange passing through them:
//! the idle clock ([`IdleClock`]: which bytes restart it, when it runs out, and whether that
//! is a bare cut or a gateway answer), and for the byte-level ones where a head ends, whether
//! nginx's buffering holds the body, when a chunked body has ended, and the answer's bytes.
//!
//! "The head went out", which decides between a 504/524 answer and a bare cut, means one
//! thing in every lane: the intermediary has the server's complete response head. After that
//! a gateway can no longer answer with a status of its own, whether or not it has passed the
//! head on yet.
//!
//! The presets' facts are in `docs/spec/intermediaries.md` §1.

use std::ops::Add;
use std::time::Duration;

use crate::scenario::ProxyConfig;

/// The idle clock of one connection through an intermediary, on the lane's own clock `T`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdleClock<T> {
    config: ProxyConfig,
    last: T,
    head_complete: bool,
}

/// What the intermediary does when the idle clock runs out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// Drop both ends.
    Cut,
    /// Answer the client with this status and an empty body, then drop both ends.
    Answer(u16),
}

impl<T: Copy + Add<Duration, Output = T>> IdleClock<T> {
    /// A connection through `config` that starts at `now`.
    pub(crate) fn new(config: ProxyConfig, now: T) -> Self {
        IdleClock {
            config,
            last: now,
            head_complete: false,
        }
    }

    /// Bytes from the server: the clock restarts.
    pub(crate) fn server_bytes(&mut self, now: T) {
        self.last = now;
    }

    /// Bytes from the client: the clock restarts where the preset counts them (ALB). The
    /// in-memory lane moves no request bytes through its proxy and does not call it yet.
    #[cfg_attr(not(any(feature = "turmoil", feature = "live")), allow(dead_code))]
    pub(crate) fn client_bytes(&mut self, now: T) {
        if self.config.idle_counts_client_bytes {
            self.last = now;
        }
    }

    /// The server's response head is complete at the intermediary.
    pub(crate) fn head_complete(&mut self) {
        self.head_complete = true;
    }

    /// When the clock runs out.
    pub(crate) fn deadline(&self) -> T {
        self.last + self.config.idle_timeout
    }

    /// What running out does: the preset's gateway answer while the head is not complete,
    /// else a bare cut.
    pub(crate) fn expiry(&self) -> Expiry {
        match self.config.timeout_status {
            Some(status) if !self.head_complete => Expiry::Answer(status),
            _ => Expiry::Cut,
        }
    }
}

#[cfg(any(feature = "turmoil", feature = "live"))]
/// The length of the head at the start of `bytes` (through its blank line), once complete.
pub(crate) fn head_end(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
}

#[cfg(any(feature = "turmoil", feature = "live"))]
/// Whether `config` holds the body of the response whose complete `head` this is until the
/// body ends: nginx buffers an event stream unless the server sent `X-Accel-Buffering: no`.
pub(crate) fn holds_body(config: &ProxyConfig, head: &[u8]) -> bool {
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let told = head.contains("x-accel-buffering: no");
    config.buffers_unless_told && head.contains("text/event-stream") && !told
}

#[cfg(any(feature = "turmoil", feature = "live"))]
/// Whether the chunked body read so far is complete: it ends in the zero-size chunk.
pub(crate) fn chunked_body_ended(body: &[u8]) -> bool {
    body.ends_with(b"0\r\n\r\n")
}

#[cfg(any(feature = "turmoil", feature = "live"))]
/// The gateway's answer to a client whose upstream went idle before sending a head
/// (`ProxyConfig::timeout_status`: 504 for nginx and ALB, 524 for Cloudflare).
pub(crate) fn gateway_answer(status: u16) -> String {
    format!("HTTP/1.1 {status} Gateway Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_clock_counts_client_bytes_only_for_alb_and_answers_only_before_the_head() {
        let ms = Duration::from_millis;
        for (preset, counts_client, status) in [
            (ProxyConfig::NGINX, false, Some(504)),
            (ProxyConfig::ALB, true, Some(504)),
            (ProxyConfig::CLOUDFLARE, false, Some(524)),
            (ProxyConfig::custom(ms(5_000)), false, None),
        ] {
            let start = crate::time::Time::ZERO;
            let mut clock = IdleClock::new(preset, start);
            clock.client_bytes(start + ms(1_000));
            let restarted = if counts_client { ms(1_000) } else { ms(0) };
            assert_eq!(clock.deadline(), start + restarted + preset.idle_timeout);
            clock.server_bytes(start + ms(2_000));
            assert_eq!(clock.deadline(), start + ms(2_000) + preset.idle_timeout);
            let before = status.map_or(Expiry::Cut, Expiry::Answer);
            assert_eq!(clock.expiry(), before, "{}", preset.name);
            clock.head_complete();
            assert_eq!(clock.expiry(), Expiry::Cut, "{}", preset.name);
        }
    }

    #[test]
    #[cfg(any(feature = "turmoil", feature = "live"))]
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
