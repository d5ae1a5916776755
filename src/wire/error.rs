//! Typed errors of the wire layer.
//!
//! Every rejection names a [`Rule`] (a stable kebab-case name that tools and tests match on),
//! the path of the offending field (`params.progressToken`, empty for the whole message) and a
//! human-readable detail. The JSON-RPC code a receiver would answer with is derived in exactly
//! one place, [`DecodeError::jsonrpc_code`].

use std::fmt;

use super::codes;
use super::era::{Era, LegacyRevision};
use super::RequestId;

/// A named wire rule that a message or frame broke.
///
/// The names are stable: they appear in `mcp-sim decode` verdicts and in tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// The bytes are not a single well-formed JSON text (docs/spec/mcp-2026-07-28.md §1.1, §10.5).
    JsonSyntax,
    /// A number is outside the range a finite `f64` can hold (serde_json refuses `1e400`).
    NumberOutOfRange,
    /// The message exceeds [`Limits::max_message_bytes`](super::Limits::max_message_bytes).
    MessageTooLarge,
    /// Objects and arrays nest deeper than [`Limits::max_depth`](super::Limits::max_depth).
    NestingTooDeep,
    /// A JSON array at the top level: batches do not exist in MCP 2026-07-28 (§1.1) and were
    /// removed in 2025-06-18; a 2025-03-26 batch is read with [`decode_frame`](super::decode_frame).
    Batch,
    /// The top-level JSON value is not an object.
    NotAnObject,
    /// `jsonrpc` is missing or is not the string `"2.0"` (§1.1).
    JsonrpcVersion,
    /// A member that this layer interprets appears twice in one object.
    DuplicateKey,
    /// A required member is absent.
    MissingField,
    /// A member has the wrong JSON type.
    WrongType,
    /// An id, token or `requestId` is `null` (§1.2: "MUST NOT be null").
    NullId,
    /// An id or token is a number with a fraction or exponent (§1.3).
    FractionalId,
    /// An integer id or token does not fit in a signed 64-bit integer (§1.3).
    IntegerOutOfRange,
    /// A `notifications/*` method carries an `id` (§1.2: notifications MUST NOT include an id).
    NotificationWithId,
    /// A message has both `result` and `error` (JSON-RPC 2.0; host policy in §1.2).
    ResultAndError,
    /// A message is neither a request, a notification nor a response.
    UnknownShape,
    /// `result.resultType` has a value the client does not recognise (§1.2: MUST be invalid).
    UnknownResultType,
    /// `result.resultType` is absent and the decoder was told to require it (servers MUST send it).
    MissingResultType,
    /// `params` is an array: positional params are not valid MCP (§1.2).
    PositionalParams,
    /// A request lacks `_meta` or one of its required keys (§1.5; answered with -32602).
    MissingMeta,
    /// A legacy request carries the modern `_meta` protocol keys (docs/spec/mcp-2025-11-25.md
    /// LA1: the version and capabilities were negotiated by `initialize`).
    ModernMetaInLegacy,
    /// A stdio line is empty (strict framing, Appendix B).
    BlankLine,
    /// A stdio line ends in CR LF (strict framing, Appendix B).
    CrLf,
    /// A stdio line or SSE line exceeds the configured maximum.
    LineTooLong,
    /// The stream ended inside a line or an event.
    Truncated,
}

impl Rule {
    /// The stable kebab-case name of the rule.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::JsonSyntax => "json-syntax",
            Rule::NumberOutOfRange => "number-out-of-range",
            Rule::MessageTooLarge => "message-too-large",
            Rule::NestingTooDeep => "nesting-too-deep",
            Rule::Batch => "batch",
            Rule::NotAnObject => "not-an-object",
            Rule::JsonrpcVersion => "jsonrpc-version",
            Rule::DuplicateKey => "duplicate-key",
            Rule::MissingField => "missing-field",
            Rule::WrongType => "wrong-type",
            Rule::NullId => "null-id",
            Rule::FractionalId => "fractional-id",
            Rule::IntegerOutOfRange => "integer-out-of-range",
            Rule::NotificationWithId => "notification-with-id",
            Rule::ResultAndError => "result-and-error",
            Rule::UnknownShape => "unknown-shape",
            Rule::UnknownResultType => "unknown-result-type",
            Rule::MissingResultType => "missing-result-type",
            Rule::PositionalParams => "positional-params",
            Rule::MissingMeta => "missing-meta",
            Rule::ModernMetaInLegacy => "modern-meta-in-legacy",
            Rule::BlankLine => "blank-line",
            Rule::CrLf => "crlf",
            Rule::LineTooLong => "line-too-long",
            Rule::Truncated => "truncated",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The detail of an empty batch's error (JSON-RPC 2.0 calls it an invalid request).
pub(super) const EMPTY_BATCH: &str = "an empty batch is an invalid request (JSON-RPC 2.0)";

/// Why the array `bytes` is not a message, in `era`.
pub(super) fn batch_refusal(era: Era, bytes: &[u8]) -> &'static str {
    let empty = bytes
        .iter()
        .filter(|b| !b.is_ascii_whitespace())
        .take(3)
        .eq(b"[]".iter());
    match era {
        Era::Legacy(LegacyRevision::V2025_03_26) if empty => EMPTY_BATCH,
        Era::Modern => "a JSON array (batch) is not an MCP message: 2026-07-28 has no batches",
        Era::Legacy(LegacyRevision::V2025_03_26) => {
            "a JSON array (batch) is not one message: a 2025-03-26 batch is read member by member, and a member is never a batch"
        }
        Era::Legacy(_) => {
            "a JSON array (batch) is not an MCP message: batches were removed in 2025-06-18"
        }
    }
}

/// Why a byte string is not a valid MCP 2026-07-28 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The rule that was broken.
    pub rule: Rule,
    /// Dotted path of the offending member (`params._meta.progressToken`); empty for the whole
    /// message.
    pub path: String,
    /// What exactly was wrong, for people.
    pub detail: String,
    /// The request id, when the message looked like a request and its id could be read. A
    /// receiver answers such a request with an error carrying this id.
    pub id: Option<RequestId>,
}

impl DecodeError {
    pub(crate) fn new(rule: Rule, path: impl Into<String>, detail: impl Into<String>) -> Self {
        DecodeError {
            rule,
            path: path.into(),
            detail: detail.into(),
            id: None,
        }
    }

    pub(crate) fn with_id(mut self, id: Option<RequestId>) -> Self {
        self.id = id;
        self
    }

    /// The JSON-RPC error code a receiver answers with, if it answers at all (docs/spec/mcp-2026-07-28.md §8):
    /// -32700 for unreadable JSON, -32602 for bad request params, -32601 for a request whose
    /// method is a notification's (no request has that method; §10.3 item 7), -32600 otherwise.
    ///
    /// Only requests are answered; a broken notification is never answered (§8).
    pub fn jsonrpc_code(&self) -> i64 {
        match self.rule {
            Rule::JsonSyntax
            | Rule::NumberOutOfRange
            | Rule::MessageTooLarge
            | Rule::NestingTooDeep
            | Rule::BlankLine
            | Rule::CrLf
            | Rule::LineTooLong
            | Rule::Truncated => codes::PARSE_ERROR,
            Rule::MissingMeta | Rule::ModernMetaInLegacy => codes::INVALID_PARAMS,
            Rule::NotificationWithId => codes::METHOD_NOT_FOUND,
            _ if self.path.starts_with("params") => codes::INVALID_PARAMS,
            _ => codes::INVALID_REQUEST,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.rule, self.detail)
        } else {
            write!(f, "{} at {}: {}", self.rule, self.path, self.detail)
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why a message cannot be encoded without producing an invalid or ambiguous wire message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// A number field is NaN or infinite; JSON cannot carry it (serde_json would write `null`).
    NonFinite {
        /// The field, e.g. `params.progress`.
        path: &'static str,
    },
    /// A free-form map holds a key that the typed part of the message already writes
    /// (`_meta` in request params, `resultType` in a result, ...).
    ReservedKey {
        /// The path of the map.
        path: &'static str,
        /// The key that collides.
        key: String,
    },
    /// The method name belongs to another message kind: `notifications/progress` and
    /// `notifications/cancelled` have typed variants, and requests may not use the
    /// `notifications/` prefix.
    ReservedMethod(String),
    /// The encoded message would break the decoder's limits.
    Limit(DecodeError),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::NonFinite { path } => write!(f, "{path} is not a finite number"),
            EncodeError::ReservedKey { path, key } => {
                write!(f, "{path} holds the reserved key {key:?}")
            }
            EncodeError::ReservedMethod(m) => {
                write!(f, "method {m:?} is reserved for another message kind")
            }
            EncodeError::Limit(e) => write!(f, "encoded message breaks a limit: {e}"),
        }
    }
}

impl std::error::Error for EncodeError {}
