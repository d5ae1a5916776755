//! The front gate of mcp-sim's byte relays (`record --http` and the probe's relay): the
//! `Host`/`Origin` policy and the HTTP bounds of `serve --http`, applied to a connection the
//! relay passes on byte for byte.
//!
//! The relay does not parse HTTP to pass it on, so the gate parses the client's direction
//! (the tap's own HTTP/1.1 parser, [`Direction`]) and holds back what it has not judged yet:
//! an unfinished request head waits until it is whole, so a request the policy refuses never
//! reaches the server, not even in part. Bodies pass as they come, up to the bound. A request
//! refused for its `Host` or `Origin` is read to its end (not passed on), so that the answer
//! carries its id, as `serve`'s does. A refused request is answered by the relay itself ([`refusal_response`](crate::lanes::http_serve::refusal_response)) and the connection ends:
//! HTTP/1.1 answers in order, so nothing else on the connection was in flight.

#[cfg(test)]
use crate::lanes::http_serve::refusal_response;
use crate::lanes::http_serve::HttpLimits;
use crate::lanes::wiretap::{Direction, Piece};
use crate::wire::origin::{HostAndOrigin, OriginPolicy};
use crate::wire::RequestId;

/// A request the gate refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GateRefusal {
    /// The HTTP status of the answer (400, 403, 413 or 431).
    pub(crate) status: u16,
    /// Why, for the JSON-RPC error's message.
    pub(crate) why: String,
    /// Which request of the connection it was (0: the first), for the recorder.
    pub(crate) ordinal: u64,
    /// Its `Host` and `Origin`, recorded with a 403.
    pub(crate) sent: Option<HostAndOrigin>,
    /// The id of the request refused, when its body was read (a 403 waits for it).
    pub(crate) id: Option<RequestId>,
}

/// What the gate lets through of what the client sent.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Gated {
    /// The bytes to pass on to the server now, in order.
    pub(crate) pass: Vec<u8>,
    /// A refused request: answer it and end the connection once `pass` has gone on.
    pub(crate) refused: Option<GateRefusal>,
}

/// The gate of one connection.
pub(crate) struct FrontGate {
    policy: OriginPolicy,
    limits: HttpLimits,
    requests: Direction,
    /// What was read and not yet passed on, from offset `passed`.
    held: Vec<u8>,
    passed: u64,
    /// Request heads read so far.
    heads: u64,
    /// Body bytes of the request being read.
    body: u64,
    /// A request was refused: nothing more passes.
    closed: bool,
    /// A 403 waiting for the refused request's body, to answer with its id: the refusal, the
    /// offset of its head, and the body so far.
    refusing: Option<(GateRefusal, u64, Vec<u8>)>,
}

impl FrontGate {
    /// The gate of a connection to a listener with `policy` and `limits`.
    pub(crate) fn new(policy: OriginPolicy, limits: HttpLimits) -> FrontGate {
        FrontGate {
            policy,
            limits,
            // The gate bounds an unfinished head itself, at the front's own bound.
            requests: Direction::unbounded(),
            held: Vec::new(),
            passed: 0,
            heads: 0,
            body: 0,
            closed: false,
            refusing: None,
        }
    }

    /// The client sent `bytes`: what of them (and of what was held) goes on, and a refusal.
    pub(crate) fn client_sent(&mut self, bytes: &[u8]) -> Gated {
        if self.closed {
            return Gated::default();
        }
        self.held.extend_from_slice(bytes);
        let mut pieces = Vec::new();
        self.requests.feed_requests(bytes, &mut pieces);
        for (at, piece) in pieces {
            if let Some((_, head_at, body)) = &mut self.refusing {
                // The refused request's body is read, not passed on, up to the bound.
                let head_at = *head_at;
                let over = match piece {
                    Piece::Data(data) => {
                        body.extend_from_slice(&data);
                        body.len() > self.limits.max_body_bytes
                    }
                    _ => true,
                };
                if over {
                    let (mut refusal, _, body) = self.refusing.take().expect("refusing");
                    refusal.id = request_id(&body);
                    return self.refuse(head_at, refusal);
                }
                continue;
            }
            match self.judge(piece) {
                Some(refusal) if refusal.status == 403 => {
                    self.refusing = Some((refusal, at, Vec::new()));
                }
                Some(refusal) => return self.refuse(at, refusal),
                None => {}
            }
        }
        if let Some((_, head_at, _)) = &self.refusing {
            // Nothing from the refused head on goes on.
            let upto = usize::try_from(*head_at - self.passed).unwrap_or(usize::MAX);
            let pass: Vec<u8> = self.held.drain(..upto.min(self.held.len())).collect();
            self.passed += pass.len() as u64;
            return Gated {
                pass,
                refused: None,
            };
        }
        let held_head = self.requests.pending();
        if !self.requests.in_body() && held_head > self.limits.max_header_bytes {
            let at = self.passed + (self.held.len() - held_head) as u64;
            let refusal = self.over_headers();
            return self.refuse(at, refusal);
        }
        // Everything parsed goes on; an unfinished head or chunk-size line waits.
        let upto = self.held.len() - held_head;
        self.passed += upto as u64;
        Gated {
            pass: self.held.drain(..upto).collect(),
            refused: None,
        }
    }

    /// Judges one piece of the client's direction: a refusal, or nothing.
    fn judge(&mut self, piece: Piece) -> Option<GateRefusal> {
        match piece {
            Piece::Head(head) => {
                let ordinal = self.heads;
                self.heads += 1;
                self.body = 0;
                if let Err(refusal) = self.policy.check_request(&head.sent) {
                    return Some(GateRefusal {
                        status: 403,
                        why: refusal.to_string(),
                        ordinal,
                        sent: Some(head.sent),
                        id: None,
                    });
                }
                if head.len > self.limits.max_header_bytes {
                    return Some(self.over_headers());
                }
                let limit = self.limits.max_body_bytes as u64;
                head.content_length
                    .is_some_and(|n| n > limit)
                    .then(|| self.over_body(ordinal))
            }
            Piece::Data(data) => {
                self.body += data.len() as u64;
                (self.body > self.limits.max_body_bytes as u64)
                    .then(|| self.over_body(self.heads.saturating_sub(1)))
            }
            Piece::End => None,
            Piece::Invalid(_) => Some(GateRefusal {
                status: 400,
                why: "Bad Request: the connection does not carry HTTP/1.1 requests".into(),
                ordinal: self.heads,
                sent: None,
                id: None,
            }),
        }
    }

    fn over_headers(&self) -> GateRefusal {
        GateRefusal {
            status: 431,
            why: format!(
                "Request Header Fields Too Large: the header block is over {} bytes (--max-header-bytes)",
                self.limits.max_header_bytes
            ),
            ordinal: self.heads.saturating_sub(1),
            sent: None,
            id: None,
        }
    }

    fn over_body(&self, ordinal: u64) -> GateRefusal {
        GateRefusal {
            status: 413,
            why: format!(
                "Payload Too Large: the request body is over {} bytes (--max-body-bytes)",
                self.limits.max_body_bytes
            ),
            ordinal,
            sent: None,
            id: None,
        }
    }

    /// Passes on what came before offset `at` and refuses the rest.
    fn refuse(&mut self, at: u64, refusal: GateRefusal) -> Gated {
        self.closed = true;
        let upto = usize::try_from(at.saturating_sub(self.passed))
            .unwrap_or(usize::MAX)
            .min(self.held.len());
        let pass = self.held.drain(..upto).collect();
        self.held.clear();
        Gated {
            pass,
            refused: Some(refusal),
        }
    }
}

/// The id of the JSON-RPC request `body` carries, if it is one.
fn request_id(body: &[u8]) -> Option<RequestId> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    RequestId::from_json(v.get("id")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> FrontGate {
        let limits = HttpLimits {
            max_body_bytes: 100,
            max_header_bytes: 200,
            ..HttpLimits::default()
        };
        FrontGate::new(OriginPolicy::default(), limits)
    }

    fn post(host: &str, extra: &str, body: &str) -> String {
        format!(
            "POST /mcp HTTP/1.1\r\nhost: {host}\r\n{extra}content-length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    /// Feeds `bytes` in pieces of `size`, returning what passed and the refusal.
    fn feed(gate: &mut FrontGate, bytes: &[u8], size: usize) -> (Vec<u8>, Option<GateRefusal>) {
        let mut passed = Vec::new();
        for part in bytes.chunks(size) {
            let out = gate.client_sent(part);
            passed.extend(out.pass);
            if out.refused.is_some() {
                return (passed, out.refused);
            }
        }
        (passed, None)
    }

    #[test]
    fn loopback_requests_pass_whole_in_any_chunking() {
        let two = post("127.0.0.1:9", "", "{}")
            + &post("localhost", "origin: http://localhost:3000\r\n", "[1]");
        for size in [1, 2, 7, 64, 4096] {
            let (passed, refused) = feed(&mut gate(), two.as_bytes(), size);
            assert_eq!(refused, None, "size {size}");
            assert_eq!(passed, two.as_bytes(), "size {size}");
        }
    }

    #[test]
    fn a_foreign_host_or_origin_is_refused_before_any_of_its_bytes_pass() {
        let good = post("127.0.0.1:9", "", "{}");
        for bad in [
            post("evil.example", "", r#"{"id":7}"#),
            post(
                "127.0.0.1:9",
                "origin: http://evil.example\r\n",
                r#"{"id":7}"#,
            ),
        ] {
            for size in [1, 5, 4096] {
                let (passed, refused) = feed(&mut gate(), (good.clone() + &bad).as_bytes(), size);
                let refused = refused.expect("refused");
                assert_eq!(refused.status, 403);
                assert_eq!(refused.ordinal, 1);
                assert!(refused.why.contains("evil.example"), "{}", refused.why);
                assert_eq!(
                    refused.id,
                    Some(RequestId::Number(7)),
                    "answered with its id"
                );
                assert_eq!(passed, good.as_bytes(), "size {size}");
            }
        }
    }

    #[test]
    fn bounds_give_413_and_431() {
        let big = post("localhost", "", &"x".repeat(101));
        let (_, refused) = feed(&mut gate(), big.as_bytes(), 4096);
        assert_eq!(refused.map(|r| r.status), Some(413));
        let chunked =
            "POST / HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: chunked\r\n\r\n50\r\n"
                .to_owned()
                + &"x".repeat(80)
                + "\r\n50\r\n"
                + &"x".repeat(80);
        let (_, refused) = feed(&mut gate(), chunked.as_bytes(), 16);
        assert_eq!(refused.map(|r| r.status), Some(413));
        let long = post(
            "localhost",
            &format!("x-long: {}\r\n", "y".repeat(300)),
            "{}",
        );
        for size in [1, 4096] {
            let (passed, refused) = feed(&mut gate(), long.as_bytes(), size);
            assert_eq!(refused.map(|r| r.status), Some(431), "size {size}");
            assert!(passed.is_empty());
        }
        let (_, refused) = feed(&mut gate(), b"\x16\x03\x01 not http\r\n\r\n", 4096);
        assert_eq!(refused.map(|r| r.status), Some(400));
    }

    #[test]
    fn a_refusal_is_an_http_response_with_a_json_rpc_error() {
        let answer = String::from_utf8(refusal_response(403, None, "Forbidden: Host")).unwrap();
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"));
        let body = answer.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], -32600);
        assert!(answer.contains(&format!("content-length: {}\r\n", body.len())));
    }
}
