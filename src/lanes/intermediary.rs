//! One idle-timeout intermediary for every lane: the in-memory lane's proxy, the turmoil
//! lane's `proxy` host and the live relay each keep only their I/O (how bytes and time reach
//! it and leave it) and ask [`Intermediary`] what passes, what waits and when and how the
//! connection ends.
//!
//! It decides three things alike everywhere (the presets' facts are in
//! `docs/spec/intermediaries.md` §1):
//!
//! - **Which bytes restart the idle clock**: the server's always, the client's where the
//!   preset counts them (ALB counts payload both ways; nginx's `proxy_read_timeout` and
//!   Cloudflare's read timeout only the upstream's).
//! - **What is held**: nginx buffers the body of an event stream until it ends, unless the
//!   server sent `X-Accel-Buffering: no`. The head passes at once, as nginx sends the header
//!   before it starts buffering the body. When the server's side closes, what was held goes
//!   on (nginx passes on what it read); when the intermediary cuts, it is lost.
//! - **"The head went out"**, which decides between a 504/524 answer and a bare cut: the
//!   intermediary has the server's complete response head. After that a gateway can no longer
//!   answer with a status of its own.
//!
//! [`Intermediary`] is generic over the payload `P` (the memory lane's response pieces, the
//! byte lanes' chunks) and the lane's clock `T` (simulated [`crate::time::Time`], tokio's
//! `Instant`), so no lane converts times. [`ByteIntermediary`] is its HTTP/1.1 front end for
//! the byte lanes: it finds the end of the response head and of a chunked body.

use std::ops::Add;
use std::time::Duration;

use crate::scenario::ProxyConfig;

/// The idle clock of one connection through an intermediary, on the lane's own clock `T`.
#[derive(Debug, Clone, Copy)]
struct IdleClock<T> {
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
    fn new(config: ProxyConfig, now: T) -> Self {
        IdleClock {
            config,
            last: now,
            head_complete: false,
        }
    }

    fn deadline(&self) -> T {
        self.last + self.config.idle_timeout
    }

    fn expiry(&self) -> Expiry {
        match self.config.timeout_status {
            Some(status) if !self.head_complete => Expiry::Answer(status),
            _ => Expiry::Cut,
        }
    }
}

/// One part of a response as the server sends it into the intermediary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FromServer<P> {
    /// The complete response head.
    Head {
        /// The head itself, passed on at once.
        part: P,
        /// Its content type is `text/event-stream`.
        event_stream: bool,
        /// It carries `X-Accel-Buffering: no`.
        told_not_to_buffer: bool,
    },
    /// A part of the body that does not end it.
    Body(P),
    /// The part that ends the body (possibly empty, as a JSON body's end).
    End(P),
}

/// One connection (one HTTP exchange) through an idle-timeout intermediary, no I/O: bytes in
/// per direction with `now`, what passes to the client, the deadline, and on expiry a cut or
/// a gateway answer.
#[derive(Debug)]
pub(crate) struct Intermediary<P, T> {
    clock: IdleClock<T>,
    /// The body is held until it ends.
    holding: bool,
    held: Vec<P>,
}

impl<P, T: Copy + Add<Duration, Output = T>> Intermediary<P, T> {
    /// A connection through `config` that opens at `now`.
    pub(crate) fn new(config: ProxyConfig, now: T) -> Self {
        Intermediary {
            clock: IdleClock::new(config, now),
            holding: false,
            held: Vec::new(),
        }
    }

    /// Bytes from the client: the clock restarts where the preset counts them.
    pub(crate) fn client_sent(&mut self, now: T) {
        if self.clock.config.idle_counts_client_bytes {
            self.clock.last = now;
        }
    }

    /// Bytes from the server that are not a part yet (a head still incomplete): the clock
    /// restarts, nothing passes.
    pub(crate) fn server_bytes(&mut self, now: T) {
        self.clock.last = now;
    }

    /// The server sent `part`: the clock restarts, and `out` gets what goes to the client now
    /// (nothing while the body is held; everything held once it ends).
    pub(crate) fn server_sent(&mut self, now: T, part: FromServer<P>, out: &mut Vec<P>) {
        self.server_bytes(now);
        match part {
            FromServer::Head {
                part,
                event_stream,
                told_not_to_buffer,
            } => {
                self.clock.head_complete = true;
                self.holding =
                    self.clock.config.buffers_unless_told && event_stream && !told_not_to_buffer;
                out.push(part);
            }
            FromServer::Body(part) if self.holding => self.held.push(part),
            FromServer::Body(part) => out.push(part),
            FromServer::End(part) => {
                out.append(&mut self.held);
                out.push(part);
                self.holding = false;
            }
        }
    }

    /// The server's side of the connection ended: what the client still gets (the held
    /// body; nginx passes on what it read when its upstream closes). The intermediary's own
    /// cut, on the other hand, loses what it held.
    pub(crate) fn server_closed(&mut self) -> Vec<P> {
        self.holding = false;
        std::mem::take(&mut self.held)
    }

    /// When the idle clock runs out.
    pub(crate) fn deadline(&self) -> T {
        self.clock.deadline()
    }

    /// What running out does: the preset's gateway answer while the head is not complete,
    /// else a bare cut.
    pub(crate) fn expiry(&self) -> Expiry {
        self.clock.expiry()
    }
}

#[cfg(any(feature = "turmoil", feature = "live"))]
pub(crate) use bytes::{gateway_answer, head_end, ByteIntermediary};

#[cfg(any(feature = "turmoil", feature = "live"))]
mod bytes {
    use super::*;

    /// The HTTP/1.1 front end of an [`Intermediary`] for the byte lanes: the response head is
    /// read whole before anything passes (so no part of it goes out twice), and a held body
    /// ends with the zero-size chunk.
    #[derive(Debug)]
    pub(crate) struct ByteIntermediary<T> {
        core: Intermediary<Vec<u8>, T>,
        /// Response bytes read so far, while the head is incomplete.
        head: Vec<u8>,
        /// The length of the complete head, once read.
        head_len: Option<usize>,
        /// The last bytes of the body, to see the zero-size chunk across reads.
        tail: Vec<u8>,
    }

    impl<T: Copy + Add<Duration, Output = T>> ByteIntermediary<T> {
        /// A connection through `config` that opens at `now`.
        pub(crate) fn new(config: ProxyConfig, now: T) -> Self {
            ByteIntermediary {
                core: Intermediary::new(config, now),
                head: Vec::new(),
                head_len: None,
                tail: Vec::new(),
            }
        }

        /// Bytes from the client: the clock restarts where the preset counts them.
        pub(crate) fn client_sent(&mut self, now: T) {
            self.core.client_sent(now);
        }

        /// Bytes read from the server: what to write to the client now, as one write (empty
        /// while the head is incomplete or the body held).
        pub(crate) fn server_sent(&mut self, now: T, bytes: &[u8]) -> Vec<u8> {
            let mut out = Vec::new();
            let body = match self.head_len {
                Some(_) => bytes,
                None => {
                    self.head.extend_from_slice(bytes);
                    let Some(end) = head_end(&self.head) else {
                        self.core.server_bytes(now);
                        return Vec::new();
                    };
                    self.head_len = Some(end);
                    let head = std::mem::take(&mut self.head);
                    let (event_stream, told_not_to_buffer) = head_flags(&head[..end]);
                    self.core.server_sent(
                        now,
                        FromServer::Head {
                            part: head[..end].to_vec(),
                            event_stream,
                            told_not_to_buffer,
                        },
                        &mut out,
                    );
                    let rest = head[end..].to_vec();
                    return self.body(now, &rest, out);
                }
            };
            self.body(now, body, out)
        }

        fn body(&mut self, now: T, bytes: &[u8], mut out: Vec<Vec<u8>>) -> Vec<u8> {
            if !bytes.is_empty() {
                self.tail.extend_from_slice(bytes);
                let keep = self.tail.len().saturating_sub(END_CHUNK.len());
                self.tail.drain(..keep);
                let part = bytes.to_vec();
                let part = if self.tail.ends_with(END_CHUNK) {
                    FromServer::End(part)
                } else {
                    FromServer::Body(part)
                };
                self.core.server_sent(now, part, &mut out);
            }
            out.concat()
        }

        /// The server's side ended: what the client still gets (see
        /// [`Intermediary::server_closed`]).
        pub(crate) fn server_closed(&mut self) -> Vec<u8> {
            self.core.server_closed().concat()
        }

        /// The length of the response head, once complete.
        pub(crate) fn head_len(&self) -> Option<usize> {
            self.head_len
        }

        /// When the idle clock runs out.
        pub(crate) fn deadline(&self) -> T {
            self.core.deadline()
        }

        /// What running out does (see [`Intermediary::expiry`]).
        pub(crate) fn expiry(&self) -> Expiry {
            self.core.expiry()
        }
    }

    /// The zero-size chunk that ends a chunked body.
    const END_CHUNK: &[u8] = b"0\r\n\r\n";

    /// The length of the head at the start of `bytes` (through its blank line), once complete.
    pub(crate) fn head_end(bytes: &[u8]) -> Option<usize> {
        bytes
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|p| p + 4)
    }

    /// Whether a complete response head announces an event stream, and whether it carries
    /// `X-Accel-Buffering: no`.
    fn head_flags(head: &[u8]) -> (bool, bool) {
        let head = String::from_utf8_lossy(head).to_ascii_lowercase();
        let mut event_stream = false;
        let mut told = false;
        for line in head.split("\r\n") {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            match (name.trim(), value.trim()) {
                ("content-type", v) => event_stream = v.starts_with("text/event-stream"),
                ("x-accel-buffering", "no") => told = true,
                _ => {}
            }
        }
        (event_stream, told)
    }

    /// The gateway's answer to a client whose upstream went idle before sending a head
    /// (`ProxyConfig::timeout_status`: 504 for nginx and ALB, 524 for Cloudflare).
    pub(crate) fn gateway_answer(status: u16) -> String {
        format!(
            "HTTP/1.1 {status} Gateway Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_idle_clock_counts_client_bytes_only_for_alb_and_answers_only_before_the_head() {
        for (preset, counts_client, status) in [
            (ProxyConfig::NGINX, false, Some(504)),
            (ProxyConfig::ALB, true, Some(504)),
            (ProxyConfig::CLOUDFLARE, false, Some(524)),
            (ProxyConfig::custom(ms(5_000)), false, None),
        ] {
            let start = Time::ZERO;
            let mut conn = Intermediary::<(), Time>::new(preset, start);
            conn.client_sent(start + ms(1_000));
            let restarted = if counts_client { ms(1_000) } else { ms(0) };
            assert_eq!(conn.deadline(), start + restarted + preset.idle_timeout);
            conn.server_bytes(start + ms(2_000));
            assert_eq!(conn.deadline(), start + ms(2_000) + preset.idle_timeout);
            let before = status.map_or(Expiry::Cut, Expiry::Answer);
            assert_eq!(conn.expiry(), before, "{}", preset.name);
            let head = FromServer::Head {
                part: (),
                event_stream: true,
                told_not_to_buffer: false,
            };
            conn.server_sent(start + ms(3_000), head, &mut Vec::new());
            assert_eq!(conn.expiry(), Expiry::Cut, "{}", preset.name);
        }
    }

    #[test]
    fn nginx_passes_the_head_and_holds_an_event_streams_body_until_it_ends() {
        let mut conn = Intermediary::new(ProxyConfig::NGINX, Time::ZERO);
        let mut out = Vec::new();
        let head = FromServer::Head {
            part: "head",
            event_stream: true,
            told_not_to_buffer: false,
        };
        conn.server_sent(Time::ZERO, head, &mut out);
        conn.server_sent(Time::ZERO, FromServer::Body("progress"), &mut out);
        assert_eq!(out, ["head"]);
        conn.server_sent(Time::ZERO, FromServer::End("result"), &mut out);
        assert_eq!(out, ["head", "progress", "result"]);
        for (event_stream, told_not_to_buffer) in [(true, true), (false, false)] {
            let mut conn = Intermediary::new(ProxyConfig::NGINX, Time::ZERO);
            let mut out = Vec::new();
            let head = FromServer::Head {
                part: "head",
                event_stream,
                told_not_to_buffer,
            };
            conn.server_sent(Time::ZERO, head, &mut out);
            conn.server_sent(Time::ZERO, FromServer::Body("progress"), &mut out);
            assert_eq!(out, ["head", "progress"]);
        }
    }

    #[test]
    #[cfg(any(feature = "turmoil", feature = "live"))]
    fn the_byte_front_end_reads_the_head_whole_and_sees_the_zero_size_chunk_across_reads() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
        let mut conn = ByteIntermediary::new(ProxyConfig::NGINX, Time::ZERO);
        assert_eq!(conn.server_sent(Time::ZERO, &head[..10]), b"");
        let mut rest = head[10..].to_vec();
        rest.extend_from_slice(b"5\r\nhello\r\n");
        assert_eq!(conn.server_sent(Time::ZERO, &rest), head);
        assert_eq!(conn.head_len(), Some(head.len()));
        assert_eq!(conn.server_sent(Time::ZERO, b"0\r\n"), b"");
        assert_eq!(
            conn.server_sent(Time::ZERO, b"\r\n"),
            b"5\r\nhello\r\n0\r\n\r\n"
        );

        let told =
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-accel-buffering: no\r\n\r\n";
        let mut conn = ByteIntermediary::new(ProxyConfig::NGINX, Time::ZERO);
        let mut bytes = told.to_vec();
        bytes.extend_from_slice(b"5\r\nhello\r\n");
        assert_eq!(conn.server_sent(Time::ZERO, &bytes), bytes);
        assert_eq!(head_end(told), Some(told.len()));
        assert_eq!(head_end(&told[..told.len() - 1]), None);
    }
}
