//! The wire layer: MCP 2026-07-28 messages, a strict decoder, an encoder that never emits an
//! invalid message, and JSON limits.
//!
//! ```
//! use mcp_sim::wire::{decode, encode, Message, MessageKind};
//!
//! let line = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-7","progress":1}}"#;
//! let msg = decode(line).unwrap();
//! assert_eq!(msg.kind(), MessageKind::Progress);
//! assert_eq!(decode(encode(&msg).unwrap().as_bytes()).unwrap(), msg);
//!
//! let err = decode(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":null}}"#).unwrap_err();
//! assert_eq!((err.rule.as_str(), err.path.as_str()), ("null-id", "params.requestId"));
//! ```

mod batch;
mod decode;
mod encode;
mod era;
mod error;
pub mod http;
mod id;
pub mod json;
mod message;
pub mod origin;

pub use batch::{allows_batches, decode_frame, Frame};
pub use decode::{decode, decode_with, DecodeOptions};
pub use encode::{encode, encode_with, to_value};
pub use era::{Era, LegacyRevision, UnknownEra};
pub use error::{DecodeError, EncodeError, Rule};
pub use id::{ProgressToken, RequestId};
pub use json::Limits;
pub use message::*;

/// JSON-RPC and MCP error codes (docs/spec/mcp-2026-07-28.md §8).
pub mod codes {
    /// Invalid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid params, including missing required `_meta`.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// HTTP headers missing or different from the body.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a capability it did not declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The server does not support the request's protocol version.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// The implementation-defined server error the TypeScript SDK v1's HTTP transport answers
    /// a request outside a session with ("Bad Request: Server not initialized").
    pub const SERVER_NOT_INITIALIZED: i64 = -32000;
}
