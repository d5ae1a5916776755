//! The strict decoder: bytes of one message to a typed [`Message`] or a typed [`DecodeError`].
//!
//! Order of checks: size and nesting limits, then one pass over the envelope (JSON syntax,
//! top-level shape, duplicate members), `jsonrpc`, then the kind-specific members. The first
//! broken rule is reported. Members the decoder interprets are kept as raw text in the first
//! pass and fully parsed when they are read; members it does not interpret are parsed and
//! dropped. Either way every byte of an accepted message was read as strictly as
//! [`json::parse_value`] reads it, so the decoder never accepts text that is not JSON.
//!
//! When the message looked like a request and its id could be read, the error carries the id
//! so that a server can answer it (digest §8); errors answered with -32700 never carry one.

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::codes;
use super::error::{DecodeError, Rule};
use super::json::{self, pick, Limits, Picked, Scalar, Watch};
use super::message::*;
use super::{ProgressToken, RequestId};

/// Strictness knobs for the points the spec leaves open (digest Appendix B) plus the limits.
///
/// The default is strict: the 2026-07-28 schema as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodeOptions {
    /// Size and nesting limits.
    pub limits: Limits,
    /// Accept `"id": null` on error responses, as base JSON-RPC 2.0 writes it (Appendix B.5);
    /// it decodes as an absent id.
    pub allow_null_error_id: bool,
    /// Accept integer-valued floats such as `1.0` as ids and tokens (Appendix B.6); JSON
    /// Schema 2020-12 counts them as integers, typed parsers do not.
    pub allow_integral_float_ids: bool,
    /// Reject results without `resultType`. Servers MUST send it, but clients MUST accept its
    /// absence as `complete` (§1.2), so this is off by default.
    pub require_result_type: bool,
}

const ENVELOPE: &[&str] = &["jsonrpc", "id", "method", "params", "result", "error"];
const PROGRESS: &[&str] = &["progressToken", "progress", "total", "message", "_meta"];
const CANCELLED: &[&str] = &["requestId", "reason", "_meta"];
const ERROR: &[&str] = &["code", "message", "data"];
/// Request params: `_meta` once, and its three interpreted keys once each.
static REQUEST_PARAMS: Watch = Watch {
    keys: &["_meta"],
    nested: Some(("_meta", &REQUEST_META)),
};
static REQUEST_META: Watch = Watch {
    keys: &[
        META_PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES,
        META_PROGRESS_TOKEN,
    ],
    nested: None,
};
/// A result: `resultType` once.
static RESULT: Watch = Watch {
    keys: &["resultType"],
    nested: None,
};

/// Decodes one message with the default (strict) options.
pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    decode_with(bytes, &DecodeOptions::default())
}

/// Decodes one message.
pub fn decode_with(bytes: &[u8], opts: &DecodeOptions) -> Result<Message, DecodeError> {
    decode_message(bytes, opts).map_err(|mut e| {
        // Text that is not JSON has no id one can trust: -32700 goes without one (§8).
        if e.jsonrpc_code() == codes::PARSE_ERROR {
            e.id = None;
        }
        e
    })
}

fn decode_message(bytes: &[u8], opts: &DecodeOptions) -> Result<Message, DecodeError> {
    json::check_limits(bytes, &opts.limits)?;
    let (values, duplicate) = match pick(bytes, ENVELOPE).map_err(json::syntax_error)? {
        Picked::Object { values, duplicate } => (values, duplicate),
        Picked::Array => {
            return Err(DecodeError::new(
                Rule::Batch,
                "",
                "a JSON array (batch) is not an MCP message",
            ))
        }
        Picked::Other(s) => {
            return Err(DecodeError::new(
                Rule::NotAnObject,
                "",
                format!("a message is a JSON object, not {}", s.type_name()),
            ))
        }
    };
    let [jsonrpc, id, method, params, result, error] = [0, 1, 2, 3, 4, 5].map(|i| values[i]);
    let d = Decoder { opts };

    // The id is read early so that every later error on a request can carry it.
    let id_scalar = id.map(Scalar::from_raw).transpose()?;
    let readable_id = match (&id_scalar, method) {
        (Some(s), Some(_)) => d.id(s, "id").ok(),
        _ => None,
    };
    let fail = |e: DecodeError| Err(e.with_id(readable_id.clone()));

    if let Some(key) = duplicate {
        return fail(DecodeError::new(
            Rule::DuplicateKey,
            key,
            format!("member {key:?} appears more than once"),
        ));
    }
    match jsonrpc.map(Scalar::from_raw).transpose()? {
        Some(Scalar::Str(v)) if v == "2.0" => {}
        Some(other) => {
            return fail(DecodeError::new(
                Rule::JsonrpcVersion,
                "jsonrpc",
                format!("expected \"2.0\", found {}", describe(&other)),
            ))
        }
        None => return fail(DecodeError::new(Rule::JsonrpcVersion, "jsonrpc", "missing")),
    }

    if let Some(method) = method {
        let method = match Scalar::from_raw(method)? {
            Scalar::Str(m) => m,
            other => return fail(wrong_type("method", "a string", &other)),
        };
        if result.is_some() || error.is_some() {
            return fail(DecodeError::new(
                Rule::UnknownShape,
                "",
                "a message with a method cannot carry result or error",
            ));
        }
        return match id_scalar {
            Some(id) => {
                if method.starts_with("notifications/") {
                    return fail(DecodeError::new(
                        Rule::NotificationWithId,
                        "id",
                        format!("{method} is a notification and MUST NOT carry an id"),
                    ));
                }
                let id = d.id(&id, "id")?;
                d.request(id.clone(), method.into_owned(), params)
                    .map_err(|e| e.with_id(Some(id)))
            }
            None => d.notification(&method, params),
        };
    }

    // A response has no use for params, but they are still part of the JSON text.
    if let Some(p) = params {
        json::validate(p.get().as_bytes())?;
    }
    match (result, error) {
        (Some(_), Some(_)) => Err(DecodeError::new(
            Rule::ResultAndError,
            "",
            "a response has result or error, never both",
        )),
        (Some(result), None) => {
            let id = match id_scalar {
                Some(s) => d.id(&s, "id")?,
                None => {
                    return Err(DecodeError::new(
                        Rule::MissingField,
                        "id",
                        "a result response needs the request's id",
                    ))
                }
            };
            d.result(id, result)
        }
        (None, Some(error)) => {
            let id = match id_scalar {
                None => None,
                Some(Scalar::Null) if opts.allow_null_error_id => None,
                Some(s) => Some(d.id(&s, "id")?),
            };
            d.error(id, error)
        }
        (None, None) => Err(DecodeError::new(
            Rule::UnknownShape,
            "",
            "neither a request or notification (method) nor a response (result or error)",
        )),
    }
}

struct Decoder<'o> {
    opts: &'o DecodeOptions,
}

impl Decoder<'_> {
    /// A request id or progress token: string or integer, never null or fractional.
    fn id_like<T: From<i64> + From<String>>(
        &self,
        s: &Scalar<'_>,
        path: &str,
    ) -> Result<T, DecodeError> {
        match s {
            Scalar::Int(i) => Ok(T::from(*i)),
            Scalar::Str(v) => Ok(T::from(v.to_string())),
            Scalar::Null => Err(DecodeError::new(
                Rule::NullId,
                path,
                "MUST be a string or an integer, not null",
            )),
            Scalar::UInt(u) => Err(DecodeError::new(
                Rule::IntegerOutOfRange,
                path,
                format!("{u} does not fit a signed 64-bit integer"),
            )),
            Scalar::Float(f) => {
                let integral = f.fract() == 0.0;
                // 2^63, exact as f64. Symmetric on purpose: -9223372036854775809 arrives here
                // rounded to -2^63, so -2^63 itself cannot be told apart from an overflow.
                let two_pow_63 = -(i64::MIN as f64);
                if integral && f.abs() >= two_pow_63 {
                    Err(DecodeError::new(
                        Rule::IntegerOutOfRange,
                        path,
                        format!("{f} does not fit a signed 64-bit integer"),
                    ))
                } else if integral && self.opts.allow_integral_float_ids {
                    Ok(T::from(*f as i64))
                } else {
                    Err(DecodeError::new(
                        Rule::FractionalId,
                        path,
                        format!(
                            "{f} is written as a fraction; ids and tokens are integers or strings"
                        ),
                    ))
                }
            }
            other => Err(wrong_type(path, "a string or an integer", other)),
        }
    }

    fn id(&self, s: &Scalar<'_>, path: &str) -> Result<RequestId, DecodeError> {
        self.id_like(s, path)
    }

    fn token(&self, s: &Scalar<'_>, path: &str) -> Result<ProgressToken, DecodeError> {
        self.id_like(s, path)
    }

    fn request(
        &self,
        id: RequestId,
        method: String,
        params: Option<&RawValue>,
    ) -> Result<Message, DecodeError> {
        let Some(params) = params else {
            return Err(DecodeError::new(
                Rule::MissingMeta,
                "params",
                "every request carries params._meta",
            ));
        };
        let mut params = watched_object(params, "params", &REQUEST_PARAMS)?;
        let meta = match params.remove("_meta") {
            Some(Value::Object(m)) => m,
            Some(other) => {
                return Err(wrong_type(
                    "params._meta",
                    "an object",
                    &Scalar::from_value(&other),
                ))
            }
            None => {
                return Err(DecodeError::new(
                    Rule::MissingMeta,
                    "params._meta",
                    "every request carries _meta",
                ))
            }
        };
        let meta = self.request_meta(meta)?;
        Ok(Message::Request(Request {
            id,
            method,
            meta,
            params,
        }))
    }

    fn request_meta(&self, mut meta: Map<String, Value>) -> Result<RequestMeta, DecodeError> {
        let protocol_version = match meta.remove(META_PROTOCOL_VERSION) {
            Some(Value::String(v)) => v,
            Some(other) => {
                return Err(wrong_type(
                    &format!("params._meta.{META_PROTOCOL_VERSION}"),
                    "a string",
                    &Scalar::from_value(&other),
                ))
            }
            None => {
                return Err(DecodeError::new(
                    Rule::MissingMeta,
                    format!("params._meta.{META_PROTOCOL_VERSION}"),
                    "every request carries its protocol version",
                ))
            }
        };
        let client_capabilities = match meta.remove(META_CLIENT_CAPABILITIES) {
            Some(Value::Object(c)) => c,
            Some(other) => {
                return Err(wrong_type(
                    &format!("params._meta.{META_CLIENT_CAPABILITIES}"),
                    "an object",
                    &Scalar::from_value(&other),
                ))
            }
            None => {
                return Err(DecodeError::new(
                    Rule::MissingMeta,
                    format!("params._meta.{META_CLIENT_CAPABILITIES}"),
                    "every request carries its client capabilities",
                ))
            }
        };
        let progress_token = match meta.remove(META_PROGRESS_TOKEN) {
            Some(v) => Some(self.token(&Scalar::from_value(&v), "params._meta.progressToken")?),
            None => None,
        };
        Ok(RequestMeta {
            protocol_version,
            client_capabilities,
            progress_token,
            other: meta,
        })
    }

    fn notification(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Message, DecodeError> {
        match method {
            METHOD_PROGRESS => self.progress(params),
            METHOD_CANCELLED => self.cancelled(params),
            _ => {
                let params = params.map(|p| object(p, "params")).transpose()?;
                Ok(Message::Notification(Notification {
                    method: method.to_owned(),
                    params,
                }))
            }
        }
    }

    fn progress(&self, params: Option<&RawValue>) -> Result<Message, DecodeError> {
        let [token, progress, total, message, meta, _] = picked_params(params, PROGRESS)?;
        let token = match token {
            Some(t) => self.token(&Scalar::from_raw(t)?, "params.progressToken")?,
            None => return Err(missing("params.progressToken")),
        };
        let progress = match progress {
            Some(p) => number(p, "params.progress")?,
            None => return Err(missing("params.progress")),
        };
        let total = total.map(|t| number(t, "params.total")).transpose()?;
        let message = message.map(|m| string(m, "params.message")).transpose()?;
        let meta = meta.map(|m| object(m, "params._meta")).transpose()?;
        Ok(Message::Progress(Progress {
            token,
            progress,
            total,
            message,
            meta,
        }))
    }

    fn cancelled(&self, params: Option<&RawValue>) -> Result<Message, DecodeError> {
        let [request_id, reason, meta, ..] = picked_params(params, CANCELLED)?;
        let request_id = match request_id {
            Some(r) => self.id(&Scalar::from_raw(r)?, "params.requestId")?,
            None => return Err(missing("params.requestId")),
        };
        let reason = reason.map(|r| string(r, "params.reason")).transpose()?;
        let meta = meta.map(|m| object(m, "params._meta")).transpose()?;
        Ok(Message::Cancelled(Cancelled {
            request_id,
            reason,
            meta,
        }))
    }

    fn result(&self, id: RequestId, raw: &RawValue) -> Result<Message, DecodeError> {
        let mut result = watched_object(raw, "result", &RESULT)?;
        let result_type = match result.remove("resultType") {
            Some(Value::String(t)) => match ResultType::parse(&t) {
                Some(t) => Some(t),
                None => {
                    return Err(DecodeError::new(
                        Rule::UnknownResultType,
                        "result.resultType",
                        format!("{t:?} is not a recognised result type"),
                    ))
                }
            },
            Some(other) => {
                return Err(wrong_type(
                    "result.resultType",
                    "a string",
                    &Scalar::from_value(&other),
                ))
            }
            None if self.opts.require_result_type => {
                return Err(DecodeError::new(
                    Rule::MissingResultType,
                    "result.resultType",
                    "servers MUST send resultType",
                ))
            }
            None => None,
        };
        Ok(Message::Result(ResultResponse {
            id,
            result_type,
            result,
        }))
    }

    fn error(&self, id: Option<RequestId>, error: &RawValue) -> Result<Message, DecodeError> {
        let fields = match pick(error.get().as_bytes(), ERROR).map_err(json::syntax_error)? {
            Picked::Object {
                values,
                duplicate: None,
            } => values,
            Picked::Object {
                duplicate: Some(k), ..
            } => {
                return Err(DecodeError::new(
                    Rule::DuplicateKey,
                    format!("error.{k}"),
                    "member appears more than once",
                ))
            }
            Picked::Array => return Err(wrong_type("error", "an object", &Scalar::Array)),
            Picked::Other(s) => return Err(wrong_type("error", "an object", &s)),
        };
        let [code, message, data, ..] = fields;
        let code = match code.map(Scalar::from_raw).transpose()? {
            Some(Scalar::Int(c)) => c,
            Some(Scalar::UInt(u)) => {
                return Err(DecodeError::new(
                    Rule::IntegerOutOfRange,
                    "error.code",
                    format!("{u} does not fit a signed 64-bit integer"),
                ))
            }
            Some(other) => return Err(wrong_type("error.code", "an integer", &other)),
            None => return Err(missing("error.code")),
        };
        let message = match message {
            Some(m) => string(m, "error.message")?,
            None => return Err(missing("error.message")),
        };
        let data = data
            .map(|d| serde_json::from_str::<Value>(d.get()).map_err(json::syntax_error))
            .transpose()?;
        Ok(Message::Error(ErrorResponse {
            id,
            error: ErrorObject {
                code,
                message,
                data,
            },
        }))
    }
}

/// Picks members of a notification's `params`, which must be present and an object.
fn picked_params<'a>(
    params: Option<&'a RawValue>,
    keys: &'static [&'static str],
) -> Result<[Option<&'a RawValue>; json::MAX_PICK], DecodeError> {
    let Some(params) = params else {
        return Err(missing("params"));
    };
    match pick(params.get().as_bytes(), keys).map_err(json::syntax_error)? {
        Picked::Object {
            values,
            duplicate: None,
        } => Ok(values),
        Picked::Object {
            duplicate: Some(k), ..
        } => Err(DecodeError::new(
            Rule::DuplicateKey,
            format!("params.{k}"),
            "member appears more than once",
        )),
        Picked::Array => Err(DecodeError::new(
            Rule::PositionalParams,
            "params",
            "params is an object, never an array",
        )),
        Picked::Other(s) => Err(wrong_type("params", "an object", &s)),
    }
}

/// Like [`object`], and fails with [`Rule::DuplicateKey`] when a watched key appears twice.
fn watched_object(
    raw: &RawValue,
    path: &str,
    watch: &'static Watch,
) -> Result<Map<String, Value>, DecodeError> {
    match json::parse_watched(raw.get(), watch).map_err(json::syntax_error)? {
        (Value::Object(_), Some(key)) => Err(DecodeError::new(
            Rule::DuplicateKey,
            format!("{path}.{key}"),
            "member appears more than once",
        )),
        (Value::Object(m), None) => Ok(m),
        (other, _) => not_an_object(other, path),
    }
}

fn object(raw: &RawValue, path: &str) -> Result<Map<String, Value>, DecodeError> {
    match serde_json::from_str::<Value>(raw.get()).map_err(json::syntax_error)? {
        Value::Object(m) => Ok(m),
        other => not_an_object(other, path),
    }
}

/// The error for a value at `path` that should have been an object.
fn not_an_object<T>(value: Value, path: &str) -> Result<T, DecodeError> {
    match value {
        Value::Array(_) if path == "params" => Err(DecodeError::new(
            Rule::PositionalParams,
            path,
            "params is an object, never an array",
        )),
        other => Err(wrong_type(path, "an object", &Scalar::from_value(&other))),
    }
}

fn number(raw: &RawValue, path: &str) -> Result<f64, DecodeError> {
    let s = Scalar::from_raw(raw)?;
    match s.as_number() {
        Some(n) if n.is_finite() => Ok(n),
        Some(_) => Err(DecodeError::new(
            Rule::NumberOutOfRange,
            path,
            "not a finite number",
        )),
        None => Err(wrong_type(path, "a number", &s)),
    }
}

fn string(raw: &RawValue, path: &str) -> Result<String, DecodeError> {
    match Scalar::from_raw(raw)? {
        Scalar::Str(s) => Ok(s.into_owned()),
        other => Err(wrong_type(path, "a string", &other)),
    }
}

fn missing(path: &str) -> DecodeError {
    DecodeError::new(Rule::MissingField, path, "required member is missing")
}

fn wrong_type(path: &str, expected: &str, found: &Scalar<'_>) -> DecodeError {
    DecodeError::new(
        Rule::WrongType,
        path,
        format!("expected {expected}, found {}", found.type_name()),
    )
}

fn describe(s: &Scalar<'_>) -> Cow<'static, str> {
    match s {
        Scalar::Str(v) => Cow::Owned(format!("the string {:?}", v)),
        other => Cow::Borrowed(other.type_name()),
    }
}
