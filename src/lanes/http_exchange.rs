//! One Streamable HTTP exchange: a client message POSTed on its own connection and the
//! response streamed back. Shared by the simulated client host and `mcp-sim probe --url`, so
//! both send the same headers and read responses the same way.
//!
//! Every POST has its own HTTP/1.1 connection, so dropping the future closes the connection,
//! which is how a 2026-07-28 client cancels the request (§3.2).

use std::pin::pin;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

/// The header carrying the simulation's stream id (the simulated server and proxy record it).
pub(crate) const STREAM_HEADER: &str = "x-mcp-sim-stream";
use crate::framing::sse::ClientSseFramer;
use crate::framing::sse::SseItem;
use crate::model::StreamId;
use crate::model::{Mutant, MutantSet};
use crate::wire::{self, Message};

/// What one exchange yields, in order: a status, then messages and comments, then the end or
/// a cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeItem {
    /// The response status and `Content-Type`.
    Status {
        /// The status code.
        status: u16,
        /// The `Content-Type`, if any.
        content_type: Option<String>,
    },
    /// One message's text: an SSE event's data, a JSON body, or a framing error's description.
    Message(Vec<u8>),
    /// An SSE comment (keep-alive).
    Comment,
    /// The response ended normally.
    Ended,
    /// The connection failed or was cut before the response ended.
    Cut,
}

/// Where to POST.
#[derive(Debug, Clone, Copy)]
pub struct PostTarget<'a> {
    /// The `Host` header (HTTP/1.1 requires it, RFC 9112 §3.2).
    pub host: &'a str,
    /// The endpoint's path.
    pub path: &'a str,
    /// Send the stream id in `x-mcp-sim-stream` (the simulated server records it).
    pub stream_header: Option<StreamId>,
}

/// Whether a `Content-Type` is `text/event-stream`, parameters aside.
pub fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|c| {
        c.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
    })
}

/// POSTs `msg` over `io` with the Streamable HTTP headers (`Accept`, `MCP-Protocol-Version`,
/// `Mcp-Method`, `Mcp-Name`) and hands every item of the response to `emit`. The SSE framer
/// carries `mutants` (the framer mutant).
pub async fn exchange<IO>(
    io: IO,
    target: PostTarget<'_>,
    msg: &Message,
    mutants: MutantSet,
    mut emit: impl FnMut(ExchangeItem),
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await
    else {
        return emit(ExchangeItem::Cut);
    };
    let mut request = hyper::Request::post(target.path).header("host", target.host);
    for (name, value) in wire::http::request_headers(msg) {
        request = request.header(name, value);
    }
    if let Some(stream) = target.stream_header {
        request = request.header(STREAM_HEADER, stream.0.to_string());
    }
    let body = wire::encode(msg).unwrap_or_default();
    let Ok(request) = request.body(Full::new(Bytes::from(body))) else {
        return emit(ExchangeItem::Cut);
    };
    let response = async {
        let Ok(response) = sender.send_request(request).await else {
            return emit(ExchangeItem::Cut);
        };
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let sse = is_event_stream(content_type.as_deref());
        emit(ExchangeItem::Status {
            status: response.status().as_u16(),
            content_type,
        });
        let mut body = response.into_body();
        let mut framer = ClientSseFramer::new(mutants.has(Mutant::SseCrlfChunkSplit));
        let mut json = Vec::new();
        loop {
            match body.frame().await {
                None => break,
                Some(Err(_)) => return emit(ExchangeItem::Cut),
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if !sse {
                        json.extend_from_slice(&data);
                        continue;
                    }
                    framer.push(&data);
                    while let Some(item) = framer.next_item() {
                        emit(match item {
                            Ok(SseItem::Event(e)) => ExchangeItem::Message(e.data.into_bytes()),
                            Ok(SseItem::Comment(_)) => ExchangeItem::Comment,
                            Err(e) => ExchangeItem::Message(e.to_string().into_bytes()),
                        });
                    }
                }
            }
        }
        if !json.is_empty() {
            emit(ExchangeItem::Message(json));
        }
        emit(ExchangeItem::Ended);
    };
    let mut response = pin!(response);
    let mut conn = pin!(conn);
    tokio::select! {
        biased;
        _ = &mut response => {}
        _ = &mut conn => response.await,
    }
}
