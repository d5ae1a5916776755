//! One Streamable HTTP exchange: a client message POSTed on its own connection and the
//! response streamed back. Shared by the simulated client host and `mcp-sim probe --url`, so
//! both send the same headers and read responses the same way.
//!
//! Every POST has its own HTTP/1.1 connection, so dropping the future closes the connection,
//! which is how a 2026-07-28 client cancels the request (§3.2).

use std::collections::BTreeMap;
use std::pin::pin;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use super::readers::ResponseReader;
pub use super::readers::{is_event_stream, ExchangeItem};
use crate::model::StreamId;
use crate::model::{Mutant, MutantSet};
use crate::wire::http::Method;
use crate::wire::{self, Message};

/// The header carrying the simulation's stream id (the simulated server and proxy record it).
pub(crate) const STREAM_HEADER: &str = "x-mcp-sim-stream";

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

/// What one exchange sends: a POST of `msg`, or (legacy era) a `GET` or `DELETE` without one,
/// with `headers`.
#[derive(Debug, Clone)]
pub struct Outgoing<'a> {
    /// The method; a `POST` needs `msg`.
    pub method: Method,
    /// The POSTed message.
    pub msg: Option<&'a Message>,
    /// The request's headers, names in lower case.
    pub headers: BTreeMap<String, String>,
}

impl<'a> Outgoing<'a> {
    /// A POST of `msg` with the 2026-07-28 headers (`wire::http::request_headers`).
    pub fn post(msg: &'a Message) -> Self {
        Outgoing {
            method: Method::Post,
            msg: Some(msg),
            headers: wire::http::request_headers(msg),
        }
    }
}

/// Sends `outgoing` over `io` (a POST with the Streamable HTTP headers it names, or a `GET` or
/// `DELETE`)
/// and hands every item of the response to `emit`. The SSE framer carries `mutants` (the
/// framer mutant).
pub async fn exchange<IO>(
    io: IO,
    target: PostTarget<'_>,
    outgoing: Outgoing<'_>,
    mutants: MutantSet,
    mut emit: impl FnMut(ExchangeItem),
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await
    else {
        return emit(ExchangeItem::Cut);
    };
    let builder = match outgoing.method {
        Method::Post => hyper::Request::post(target.path),
        Method::Get => hyper::Request::get(target.path),
        Method::Delete => hyper::Request::delete(target.path),
    };
    let mut request = builder.header("host", target.host);
    for (name, value) in &outgoing.headers {
        request = request.header(name, value);
    }
    if let Some(stream) = target.stream_header {
        request = request.header(STREAM_HEADER, stream.0.to_string());
    }
    let body = outgoing
        .msg
        .map(|m| wire::encode(m).unwrap_or_default())
        .unwrap_or_default();
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
        let mut reader = ResponseReader::new(
            content_type.as_deref(),
            mutants.has(Mutant::SseCrlfChunkSplit),
        );
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        emit(ExchangeItem::Status {
            status: response.status().as_u16(),
            content_type,
            session,
        });
        let mut body = response.into_body();
        loop {
            match body.frame().await {
                None => break,
                Some(Err(_)) => return emit(ExchangeItem::Cut),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        reader.push(&data, &mut emit);
                    }
                }
            }
        }
        reader.finish(&mut emit);
    };
    let mut response = pin!(response);
    let mut conn = pin!(conn);
    tokio::select! {
        biased;
        _ = &mut response => {}
        _ = &mut conn => response.await,
    }
}
