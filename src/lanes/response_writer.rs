//! The reference server's output as the bytes a lane writes, sans-IO: each [`ServerTransmit`]
//! becomes a stdio line, or the parts of an HTTP response (its head, its body's bytes, its
//! end). The server driver runs every transmit through it, so the in-memory lane, the turmoil
//! server host, the era bridge and `mcp-sim serve` write the same statuses, headers, SSE
//! framing and JSON bodies, and differ only in how the parts reach the wire (moved as values,
//! or handed to hyper).

use crate::framing::sse;
use crate::model::{ServerTransmit, SseStyle, StreamId};
use crate::wire::{self, ErrorResponse, Message};

/// The head of an HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResponseHead {
    /// The status code.
    pub(crate) status: u16,
    /// The `Content-Type` (a 202 has none).
    pub(crate) content_type: Option<&'static str>,
    /// The `Mcp-Session-Id` it issues (a legacy `initialize` over HTTP).
    pub(crate) session: Option<String>,
    /// It carries `X-Accel-Buffering: no` (an event stream of a server that sends it).
    pub(crate) told_not_to_buffer: bool,
}

impl ResponseHead {
    /// The `Content-Type` of an event stream.
    pub(crate) const EVENT_STREAM: &'static str = "text/event-stream";

    /// Whether the body is an event stream, written as the server goes (not one whole body).
    pub(crate) fn is_event_stream(&self) -> bool {
        self.content_type == Some(Self::EVENT_STREAM)
    }
}

/// One part of an HTTP response, in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResponsePart {
    /// The status line and headers; first.
    Head(ResponseHead),
    /// Bytes of the body: an SSE event, comment or priming event, or a JSON body whole.
    Body(Vec<u8>),
    /// The response is complete.
    End,
}

/// What to write for one transmit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerWrite {
    /// A stdio line, its newline included.
    Line(Vec<u8>),
    /// A part of `stream`'s response.
    Http(StreamId, ResponsePart),
}

/// Turns transmits into writes: SSE events in the server's [`SseStyle`], and an event
/// stream's head with `X-Accel-Buffering: no` when the server sends it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResponseWriter {
    style: SseStyle,
    no_buffering: bool,
}

impl ResponseWriter {
    /// A writer framing events in `style`, telling intermediaries not to buffer event streams
    /// when `no_buffering`.
    pub(crate) fn new(style: SseStyle, no_buffering: bool) -> Self {
        ResponseWriter {
            style,
            no_buffering,
        }
    }

    /// The writes of `t`, in order.
    pub(crate) fn write(&self, t: ServerTransmit, mut out: impl FnMut(ServerWrite)) {
        let mut part = |stream, part| out(ServerWrite::Http(stream, part));
        match t {
            ServerTransmit::Line(msg) => {
                if let Some(mut line) = encoded(&msg) {
                    line.push(b'\n');
                    out(ServerWrite::Line(line));
                }
            }
            ServerTransmit::SseStart { stream } => part(
                stream,
                ResponsePart::Head(ResponseHead {
                    status: 200,
                    content_type: Some(ResponseHead::EVENT_STREAM),
                    session: None,
                    told_not_to_buffer: self.no_buffering,
                }),
            ),
            ServerTransmit::SseEvent {
                stream,
                msg,
                event_id,
            } => {
                for piece in self.style.encode_with_id(&msg, event_id.as_deref()) {
                    part(stream, ResponsePart::Body(piece));
                }
            }
            ServerTransmit::SsePrime {
                stream,
                event_id,
                retry_ms,
            } => {
                let event = sse::encode_priming(&event_id, retry_ms).into_bytes();
                part(stream, ResponsePart::Body(event));
            }
            ServerTransmit::SseComment { stream } => {
                let comment = sse::encode_comment("keep-alive").into_bytes();
                part(stream, ResponsePart::Body(comment));
            }
            ServerTransmit::SseEnd { stream } => part(stream, ResponsePart::End),
            ServerTransmit::Json {
                stream,
                status,
                msg,
                session,
            } => {
                let head = ResponseHead {
                    status,
                    content_type: Some("application/json"),
                    session,
                    told_not_to_buffer: false,
                };
                part(stream, ResponsePart::Head(head));
                part(
                    stream,
                    ResponsePart::Body(encoded(&msg).unwrap_or_default()),
                );
                part(stream, ResponsePart::End);
            }
            ServerTransmit::Accepted { stream } => {
                let head = ResponseHead {
                    status: 202,
                    content_type: None,
                    session: None,
                    told_not_to_buffer: false,
                };
                part(stream, ResponsePart::Head(head));
                part(stream, ResponsePart::End);
            }
        }
    }
}

/// `msg`'s text. A message that does not encode (one over the encoder's size bound) is
/// replaced, when it answers a request, by an internal error naming why, so that the request
/// is still answered; any other is not written (`None`).
fn encoded(msg: &Message) -> Option<Vec<u8>> {
    match wire::encode(msg) {
        Ok(text) => Some(text.into_bytes()),
        Err(e) if msg.is_response() => {
            let why = format!("Internal error: the response could not be encoded: {e}");
            let error = ErrorResponse::new(msg.id().cloned(), wire::codes::INTERNAL_ERROR, why);
            wire::encode(&error.into()).ok().map(String::into_bytes)
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ResultResponse;

    fn writes(t: ServerTransmit) -> Vec<ServerWrite> {
        let mut out = Vec::new();
        ResponseWriter::new(SseStyle::Plain, true).write(t, |w| out.push(w));
        out
    }

    #[test]
    fn a_json_answer_is_a_head_a_whole_body_and_the_end() {
        let stream = StreamId(3);
        let msg: Message = ResultResponse::complete(1).into();
        let w = writes(ServerTransmit::Json {
            stream,
            status: 200,
            msg: msg.clone(),
            session: Some("s1".into()),
        });
        assert_eq!(w.len(), 3);
        let ServerWrite::Http(_, ResponsePart::Head(head)) = &w[0] else {
            panic!("a head first: {w:?}")
        };
        assert_eq!(head.content_type, Some("application/json"));
        assert_eq!(head.session.as_deref(), Some("s1"));
        assert!(!head.is_event_stream() && !head.told_not_to_buffer);
        let body = wire::encode(&msg).unwrap().into_bytes();
        assert_eq!(w[1], ServerWrite::Http(stream, ResponsePart::Body(body)));
        assert_eq!(w[2], ServerWrite::Http(stream, ResponsePart::End));
    }

    #[test]
    fn an_event_stream_head_says_not_to_buffer_and_a_202_has_no_content_type() {
        let w = writes(ServerTransmit::SseStart {
            stream: StreamId(1),
        });
        let [ServerWrite::Http(_, ResponsePart::Head(head))] = &w[..] else {
            panic!("{w:?}")
        };
        assert!(head.is_event_stream() && head.told_not_to_buffer && head.status == 200);
        let w = writes(ServerTransmit::Accepted {
            stream: StreamId(2),
        });
        let ServerWrite::Http(_, ResponsePart::Head(head)) = &w[0] else {
            panic!("{w:?}")
        };
        assert_eq!((head.status, head.content_type), (202, None));
        assert_eq!(w[1], ServerWrite::Http(StreamId(2), ResponsePart::End));
    }

    #[test]
    fn an_answer_that_does_not_encode_is_an_internal_error_for_its_request() {
        let big = "x".repeat(wire::Limits::DEFAULT.max_message_bytes + 1);
        let mut result = ResultResponse::complete(7);
        result.result.insert("text".into(), big.into());
        let msg: Message = result.into();
        let w = writes(ServerTransmit::Line(msg));
        let [ServerWrite::Line(line)] = &w[..] else {
            panic!("one line: {w:?}")
        };
        let text = String::from_utf8(line.clone()).unwrap();
        assert!(text.ends_with('\n'), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], wire::codes::INTERNAL_ERROR);
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not be encoded"));
    }
}
