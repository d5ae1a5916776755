//! The strict decoder: bytes of one message to a typed [`Message`] or a typed [`DecodeError`].
//!
//! Order of checks: size and nesting limits, then one pass over the envelope (JSON syntax,
//! top-level shape, duplicate members), `jsonrpc`, then the kind-specific members. The first
//! broken rule is reported. Members the decoder interprets are kept as raw text in the first
//! pass and fully parsed when they are read; members it does not interpret are parsed and
//! dropped. Either way every byte of an accepted message was read as strictly as
//! [`json::parse_value`] reads it, so the decoder never accepts text that is not JSON.
//!
//! Most messages take a shortcut through the same checks: a first pass (`read_envelope`)
//! parses `jsonrpc`, `id` and `method` as they are met and, when they come before `params` as
//! they usually do, reads the params of a request or a progress notification straight into
//! their typed fields, with the checks of the kind. It gives up at the first thing it does not
//! expect, anything the order above would reject inside params included; the message is then
//! read again as described above, so the error is the same with or without the shortcut. The
//! envelope checks run on what either pass read.
//!
//! When the message looked like a request and its id could be read, the error carries the id
//! so that a server can answer it (docs/spec/mcp-2026-07-28.md §8); errors answered with -32700 never carry one.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::codes;
use super::error::{DecodeError, Rule};
use super::json::{self, pick, Limits, Picked, Scalar, Watch};
use super::message::*;
use super::{ProgressToken, RequestId};
use crate::wire::Era;

/// Strictness knobs for the points the spec leaves open (docs/spec/mcp-2026-07-28.md Appendix B) plus the limits.
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
    /// The era whose shapes to read. A legacy request's `params` and `_meta` are optional and
    /// `_meta` carries none of the modern keys (the version was negotiated by `initialize`);
    /// the request's [`RequestMeta::protocol_version`] is the era's revision.
    pub era: Era,
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
    let d = Decoder { opts };
    // The shortcut reads the envelope in one pass (a modern request's `_meta` with it; a
    // legacy request's params are left raw for the general path).
    let shortcut = read_envelope(bytes, d);
    let envelope = match shortcut {
        Some(envelope) => envelope,
        None => pick_envelope(bytes, opts.era)?,
    };
    d.message(envelope)
}

/// The members of the message object that the decoder interprets, as read by
/// [`read_envelope`] or [`pick_envelope`].
struct Envelope<'a> {
    jsonrpc: Option<Member<'a>>,
    id: Option<Member<'a>>,
    method: Option<Member<'a>>,
    params: Option<Params<'a>>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
    /// The first interpreted member that appeared twice.
    duplicate: Option<&'static str>,
}

/// An envelope member that is a scalar when valid: raw text still to be parsed, or already
/// parsed.
enum Member<'a> {
    Raw(&'a RawValue),
    Read(Scalar<'a>),
}

impl<'a> Member<'a> {
    fn read(self) -> Result<Scalar<'a>, DecodeError> {
        match self {
            Member::Raw(raw) => Scalar::from_raw(raw),
            Member::Read(s) => Ok(s),
        }
    }
}

/// The `params` member: raw text, or already read and checked by [`RequestParamsSeed`] or
/// [`ProgressSeed`].
enum Params<'a> {
    Raw(&'a RawValue),
    Request(Map<String, Value>, RequestMeta),
    Progress(Progress),
}

impl<'a> Params<'a> {
    /// The raw text of params that were not read ahead.
    ///
    /// Params are read ahead as a request's only after an `id` and a method outside
    /// `notifications/`, and as a progress notification's only after that method: a message
    /// that then decodes as another kind names its method twice, which is an error found before
    /// params are looked at. So this is never called on params read ahead.
    fn raw(self) -> &'a RawValue {
        match self {
            Params::Raw(raw) => raw,
            Params::Request(..) | Params::Progress(_) => {
                unreachable!("params read ahead for another kind of message")
            }
        }
    }
}

/// The general envelope reader: borrows the raw text of the interpreted members, which the
/// decoder parses one by one in the order of its checks. Reports JSON syntax and the shape of
/// the top-level value.
fn pick_envelope(bytes: &[u8], era: Era) -> Result<Envelope<'_>, DecodeError> {
    match pick(bytes, ENVELOPE).map_err(json::syntax_error)? {
        Picked::Object { values, duplicate } => {
            let [jsonrpc, id, method, params, result, error] = values;
            Ok(Envelope {
                jsonrpc: jsonrpc.map(Member::Raw),
                id: id.map(Member::Raw),
                method: method.map(Member::Raw),
                params: params.map(Params::Raw),
                result,
                error,
                duplicate,
            })
        }
        Picked::Array => Err(DecodeError::new(
            Rule::Batch,
            "",
            super::error::batch_refusal(era, bytes),
        )),
        Picked::Other(s) => Err(DecodeError::new(
            Rule::NotAnObject,
            "",
            format!("a message is a JSON object, not {}", s.type_name()),
        )),
    }
}

/// The one-pass envelope reader, for messages in the usual shape: `jsonrpc`, `id` and
/// `method` are parsed as they are met, and a request's `params` are read straight into the
/// request's fields when `id` and `method` precede them (see [`RequestParamsSeed`]).
///
/// It gives up (`None`) at the first thing it does not expect: text that is not UTF-8 or not
/// JSON, a top-level value that is not an object, or params read ahead that would not decode.
/// The decoder then starts over with [`pick_envelope`], which reports the error exactly as it
/// would have without this reader. So an envelope from here holds only values that the
/// general path would have parsed to the same result, and params read ahead that the general
/// path would have accepted and read to the same fields.
fn read_envelope<'a>(bytes: &'a [u8], d: Decoder<'_>) -> Option<Envelope<'a>> {
    let text = simdutf8::basic::from_utf8(bytes).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    let envelope = EnvelopeSeed(d).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(envelope)
}

struct EnvelopeSeed<'o>(Decoder<'o>);

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_> {
    type Value = Envelope<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_> {
    type Value = Envelope<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut scalars: [Option<Scalar<'de>>; 3] = [None, None, None];
        let mut params = None;
        let mut raws: [Option<&'de RawValue>; 2] = [None, None];
        let mut duplicate = None;
        while let Some(slot) = map.next_key_seed(json::KeySeed { keys: ENVELOPE })? {
            let Some(i) = slot else {
                map.next_value_seed(json::Validate)?;
                continue;
            };
            let seen = match i {
                0..=2 => scalars[i].replace(map.next_value()?).is_some(),
                3 => {
                    let p = match &scalars[2] {
                        Some(Scalar::Str(m)) if m == METHOD_PROGRESS => {
                            Params::Progress(map.next_value_seed(ProgressSeed(self.0))?)
                        }
                        Some(Scalar::Str(m))
                            if scalars[1].is_some()
                                && !m.starts_with("notifications/")
                                && !self.0.opts.era.is_legacy() =>
                        {
                            let (p, meta) = map.next_value_seed(RequestParamsSeed(self.0))?;
                            Params::Request(p, meta)
                        }
                        _ => Params::Raw(map.next_value()?),
                    };
                    params.replace(p).is_some()
                }
                _ => raws[i - 4].replace(map.next_value()?).is_some(),
            };
            if seen {
                duplicate.get_or_insert(ENVELOPE[i]);
            }
        }
        let [jsonrpc, id, method] = scalars.map(|s| s.map(Member::Read));
        let [result, error] = raws;
        Ok(Envelope {
            jsonrpc,
            id,
            method,
            params,
            result,
            error,
            duplicate,
        })
    }
}

/// Reads a request's `params` into the request's fields in one pass: the members other than
/// `_meta` into a map, `_meta` into a [`RequestMeta`]. It applies every check of the general
/// path ([`Decoder::request`]) and fails, sending the decoder back to that path, wherever that
/// path would report an error: params not an object, `_meta` or one of its interpreted keys
/// twice, `_meta` missing or not an object, a missing or mistyped protocol version or
/// capabilities, an invalid progress token.
struct RequestParamsSeed<'o>(Decoder<'o>);

impl<'de> DeserializeSeed<'de> for RequestParamsSeed<'_> {
    type Value = (Map<String, Value>, RequestMeta);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestParamsSeed<'_> {
    type Value = (Map<String, Value>, RequestMeta);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("request params")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut params = Map::new();
        let mut meta = None;
        while let Some(key) = map.next_key_seed(json::KeyCow)? {
            if key == "_meta" {
                let m = map.next_value_seed(RequestMetaSeed(self.0))?;
                if meta.replace(m).is_some() {
                    return Err(de::Error::custom("_meta appears twice"));
                }
            } else {
                params.insert(key.into_owned(), map.next_value_seed(json::ValueSeed)?);
            }
        }
        match meta {
            Some(meta) => Ok((params, meta)),
            None => Err(de::Error::custom("_meta is missing")),
        }
    }
}

/// Reads a request's `params._meta` for [`RequestParamsSeed`].
struct RequestMetaSeed<'o>(Decoder<'o>);

impl<'de> DeserializeSeed<'de> for RequestMetaSeed<'_> {
    type Value = RequestMeta;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestMetaSeed<'_> {
    type Value = RequestMeta;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("request _meta")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut protocol_version = None;
        let mut client_capabilities = None;
        let mut progress_token = None;
        let mut other = Map::new();
        while let Some(key) = map.next_key_seed(json::KeyCow)? {
            match &*key {
                META_PROTOCOL_VERSION => {
                    let v = map.next_value_seed(json::StrCow)?;
                    once(&mut protocol_version, protocol_version_of(&v))?
                }
                META_CLIENT_CAPABILITIES => once(
                    &mut client_capabilities,
                    map.next_value_seed(json::MapSeed)?,
                )?,
                META_PROGRESS_TOKEN => {
                    let s = map.next_value::<Scalar<'de>>()?;
                    let token = checked(self.0.token(&s, "params._meta.progressToken"))?;
                    once(&mut progress_token, token)?;
                }
                _ => {
                    let value = map.next_value_seed(json::ValueSeed)?;
                    other.insert(key.into_owned(), value);
                }
            }
        }
        match (protocol_version, client_capabilities) {
            (Some(protocol_version), Some(client_capabilities)) => Ok(RequestMeta {
                protocol_version,
                client_capabilities,
                progress_token,
                other,
                legacy: false,
            }),
            _ => Err(de::Error::custom("a required _meta member is missing")),
        }
    }
}

/// Reads `notifications/progress` params in one pass, with the checks of
/// [`Decoder::progress`]; it fails, sending the decoder back to the general path, wherever
/// that path would report an error.
struct ProgressSeed<'o>(Decoder<'o>);

impl<'de> DeserializeSeed<'de> for ProgressSeed<'_> {
    type Value = Progress;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ProgressSeed<'_> {
    type Value = Progress;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("progress params")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut token, mut progress, mut total, mut message, mut meta) =
            (None, None, None, None, None);
        while let Some(slot) = map.next_key_seed(json::KeySeed { keys: PROGRESS })? {
            match slot {
                Some(0) => {
                    let s = map.next_value::<Scalar<'de>>()?;
                    once(
                        &mut token,
                        checked(self.0.token(&s, "params.progressToken"))?,
                    )?;
                }
                Some(1) => {
                    let s = map.next_value::<Scalar<'de>>()?;
                    once(&mut progress, checked(finite(&s, "params.progress"))?)?;
                }
                Some(2) => {
                    let s = map.next_value::<Scalar<'de>>()?;
                    once(&mut total, checked(finite(&s, "params.total"))?)?;
                }
                Some(3) => once(&mut message, map.next_value::<String>()?)?,
                Some(_) => once(&mut meta, map.next_value_seed(json::MapSeed)?)?,
                None => map.next_value_seed(json::Validate)?,
            }
        }
        match (token, progress) {
            (Some(token), Some(progress)) => Ok(Progress {
                token,
                progress,
                total,
                message,
                meta,
            }),
            _ => Err(de::Error::custom("a required member is missing")),
        }
    }
}

/// Stores a member's value, failing if the member was already seen.
fn once<T, E: de::Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
    match slot.replace(value) {
        None => Ok(()),
        Some(_) => Err(E::custom("member appears twice")),
    }
}

/// A check's error as a serde error, which makes the first pass give up.
fn checked<T, E: de::Error>(r: Result<T, DecodeError>) -> Result<T, E> {
    r.map_err(|e| E::custom(e.detail))
}

#[derive(Clone, Copy)]
struct Decoder<'o> {
    opts: &'o DecodeOptions,
}

impl Decoder<'_> {
    /// Everything after the envelope has been read, in the order of the checks.
    fn message(self, envelope: Envelope<'_>) -> Result<Message, DecodeError> {
        let Envelope {
            jsonrpc,
            id,
            method,
            params,
            result,
            error,
            duplicate,
        } = envelope;

        // The id is read early so that every later error on a request can carry it.
        let id_scalar = id.map(Member::read).transpose()?;
        let readable_id = match (&id_scalar, &method) {
            (Some(s), Some(_)) => self.id(s, "id").ok(),
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
        match jsonrpc.map(Member::read).transpose()? {
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
            let method = match method.read()? {
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
                    let id = self.id(&id, "id")?;
                    self.request(id.clone(), request_method_of(&method), params)
                        .map_err(|e| e.with_id(Some(id)))
                }
                None => self.notification(&method, params),
            };
        }

        // A response has no use for params, but they are still part of the JSON text.
        if let Some(p) = params {
            json::validate(p.raw().get().as_bytes())?;
        }
        match (result, error) {
            (Some(_), Some(_)) => Err(DecodeError::new(
                Rule::ResultAndError,
                "",
                "a response has result or error, never both",
            )),
            (Some(result), None) => {
                let id = match id_scalar {
                    Some(s) => self.id(&s, "id")?,
                    None => {
                        return Err(DecodeError::new(
                            Rule::MissingField,
                            "id",
                            "a result response needs the request's id",
                        ))
                    }
                };
                self.result(id, result)
            }
            (None, Some(error)) => {
                let id = match id_scalar {
                    None => None,
                    Some(Scalar::Null) if self.opts.allow_null_error_id => None,
                    Some(s) => Some(self.id(&s, "id")?),
                };
                self.error(id, error)
            }
            (None, None) => Err(DecodeError::new(
                Rule::UnknownShape,
                "",
                "neither a request or notification (method) nor a response (result or error)",
            )),
        }
    }

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
        method: Cow<'static, str>,
        params: Option<Params<'_>>,
    ) -> Result<Message, DecodeError> {
        let params = match params {
            Some(Params::Request(params, meta)) => {
                return Ok(Message::Request(Request {
                    id,
                    method,
                    meta,
                    params,
                }))
            }
            Some(p) => p.raw(),
            None if self.opts.era.is_legacy() => {
                return Ok(Message::Request(Request {
                    id,
                    method,
                    meta: self.legacy_meta(Map::new())?,
                    params: Map::new(),
                }))
            }
            None => {
                return Err(DecodeError::new(
                    Rule::MissingMeta,
                    "params",
                    "every request carries params._meta",
                ))
            }
        };
        let mut params = watched_object(params, "params", &REQUEST_PARAMS)?;
        if self.opts.era.is_legacy() {
            let meta = match params.remove("_meta") {
                Some(Value::Object(m)) => m,
                Some(other) => {
                    return Err(wrong_type(
                        "params._meta",
                        "an object",
                        &Scalar::from_value(&other),
                    ))
                }
                None => Map::new(),
            };
            let meta = self.legacy_meta(meta)?;
            return Ok(Message::Request(Request {
                id,
                method,
                meta,
                params,
            }));
        }
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

    /// `_meta.progressToken`, taken out of `meta` when present.
    fn meta_progress_token(
        &self,
        meta: &mut Map<String, Value>,
    ) -> Result<Option<ProgressToken>, DecodeError> {
        match meta.remove(META_PROGRESS_TOKEN) {
            Some(v) => Ok(Some(
                self.token(&Scalar::from_value(&v), "params._meta.progressToken")?,
            )),
            None => Ok(None),
        }
    }

    /// A legacy request's `_meta`: an optional progress token and anything else, but none of
    /// the modern protocol keys.
    fn legacy_meta(&self, mut meta: Map<String, Value>) -> Result<RequestMeta, DecodeError> {
        for key in [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES] {
            if meta.contains_key(key) {
                return Err(DecodeError::new(
                    Rule::ModernMetaInLegacy,
                    format!("params._meta.{key}"),
                    "a legacy request carries no modern _meta keys: initialize negotiated the version and capabilities",
                ));
            }
        }
        let progress_token = self.meta_progress_token(&mut meta)?;
        Ok(RequestMeta {
            protocol_version: Cow::Borrowed(self.opts.era.version()),
            client_capabilities: Map::new(),
            progress_token,
            other: meta,
            legacy: true,
        })
    }

    fn request_meta(&self, mut meta: Map<String, Value>) -> Result<RequestMeta, DecodeError> {
        let protocol_version = match meta.remove(META_PROTOCOL_VERSION) {
            Some(Value::String(v)) => protocol_version_of(&v),
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
        let progress_token = self.meta_progress_token(&mut meta)?;
        Ok(RequestMeta {
            protocol_version,
            client_capabilities,
            progress_token,
            other: meta,
            legacy: false,
        })
    }

    fn notification(
        &self,
        method: &str,
        params: Option<Params<'_>>,
    ) -> Result<Message, DecodeError> {
        match method {
            METHOD_PROGRESS => self.progress(params),
            METHOD_CANCELLED => self.cancelled(params.map(Params::raw)),
            _ => {
                let params = params.map(|p| object(p.raw(), "params")).transpose()?;
                Ok(Message::Notification(Notification {
                    method: method.to_owned(),
                    params,
                }))
            }
        }
    }

    fn progress(&self, params: Option<Params<'_>>) -> Result<Message, DecodeError> {
        if let Some(Params::Progress(p)) = params {
            return Ok(Message::Progress(p));
        }
        let params = params.map(Params::raw);
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
            .map(|d| json::value_from_str(d.get()).map_err(json::syntax_error))
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
    match json::value_from_str(raw.get()).map_err(json::syntax_error)? {
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
    finite(&Scalar::from_raw(raw)?, path)
}

fn finite(s: &Scalar<'_>, path: &str) -> Result<f64, DecodeError> {
    match s.as_number() {
        Some(n) if n.is_finite() => Ok(n),
        Some(_) => Err(DecodeError::new(
            Rule::NumberOutOfRange,
            path,
            "not a finite number",
        )),
        None => Err(wrong_type(path, "a number", s)),
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rand_chacha::rand_core::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// The decoder without the one-pass envelope reader.
    fn decode_general(bytes: &[u8], opts: &DecodeOptions) -> Result<Message, DecodeError> {
        let d = Decoder { opts };
        let decoded = json::check_limits(bytes, &opts.limits)
            .and_then(|()| pick_envelope(bytes, opts.era))
            .and_then(|envelope| d.message(envelope));
        decoded.map_err(|mut e| {
            if e.jsonrpc_code() == codes::PARSE_ERROR {
                e.id = None;
            }
            e
        })
    }

    fn option_sets() -> Vec<DecodeOptions> {
        let lenient = DecodeOptions {
            allow_null_error_id: true,
            allow_integral_float_ids: true,
            require_result_type: true,
            ..DecodeOptions::default()
        };
        let shallow = DecodeOptions {
            limits: Limits {
                max_message_bytes: 1 << 20,
                max_depth: 3,
            },
            ..DecodeOptions::default()
        };
        vec![DecodeOptions::default(), lenient, shallow]
    }

    fn assert_same(bytes: &[u8]) {
        for opts in option_sets() {
            assert_eq!(
                decode_with(bytes, &opts),
                decode_general(bytes, &opts),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    /// Picks one of `items`.
    fn one<'a>(rng: &mut ChaCha8Rng, items: &[&'a str]) -> &'a str {
        items[rng.next_u64() as usize % items.len()]
    }

    /// True with probability `percent` / 100.
    fn chance(rng: &mut ChaCha8Rng, percent: u64) -> bool {
        rng.next_u64() % 100 < percent
    }

    /// A valid value of a generated member.
    #[derive(Clone, Copy)]
    enum Good {
        Text(&'static str),
        Gen(fn(&mut ChaCha8Rng) -> String),
    }

    /// One member of a generated object: its key, a valid value and some invalid ones.
    type Spec = (&'static str, Good, &'static [&'static str]);

    /// An object that is mostly as `specs` describe: members are sometimes left out, given a
    /// bad value, repeated, joined by an unknown member or shuffled.
    fn object(rng: &mut ChaCha8Rng, specs: &[Spec]) -> String {
        fn member(rng: &mut ChaCha8Rng, (key, good, bad): Spec) -> String {
            let value = match good {
                _ if !bad.is_empty() && chance(rng, 15) => one(rng, bad).to_owned(),
                Good::Text(t) => t.to_owned(),
                Good::Gen(f) => f(rng),
            };
            format!("{key}:{value}")
        }
        let mut members = Vec::new();
        for &spec in specs {
            if chance(rng, 92) {
                members.push(member(rng, spec));
            }
        }
        if chance(rng, 8) && !specs.is_empty() {
            let spec = specs[rng.next_u64() as usize % specs.len()];
            let at = rng.next_u64() as usize % (members.len() + 1);
            let m = member(rng, spec);
            members.insert(at, m);
        }
        if chance(rng, 10) {
            let value = one(rng, &["1", r#"[{"y":[]}]"#, "1e400", r#""\udc00""#, "{}"]);
            let at = rng.next_u64() as usize % (members.len() + 1);
            members.insert(at, format!(r#""x":{value}"#));
        }
        if chance(rng, 15) {
            for i in (1..members.len()).rev() {
                members.swap(i, rng.next_u64() as usize % (i + 1));
            }
        }
        format!("{{{}}}", members.join(","))
    }

    const TOKEN_BAD: &[&str] = &[
        "null",
        "1.5",
        "1.0",
        "true",
        "[]",
        "{}",
        "1e400",
        "18446744073709551615",
        r#""\ud800""#,
    ];
    const SHAPES: &[&str] = &["[]", "3", "null", r#""p""#, "[1,{}]"];
    const NUMBER_BAD: &[&str] = &["null", r#""2""#, "1e400", "18446744073709551615", "[]"];

    fn token(rng: &mut ChaCha8Rng) -> String {
        one(rng, &[r#""p-7""#, "7", "-3", r#""p\"7""#]).to_owned()
    }

    fn number(rng: &mut ChaCha8Rng) -> String {
        one(rng, &["2.5", "3", "-1", "0"]).to_owned()
    }

    fn capabilities(rng: &mut ChaCha8Rng) -> String {
        one(rng, &["{}", r#"{"a":[1,{"b":2}]}"#]).to_owned()
    }

    fn meta(rng: &mut ChaCha8Rng) -> String {
        let token_key = one(rng, &[r#""progressToken""#, r#""progress\u0054oken""#]);
        object(
            rng,
            &[
                (
                    r#""io.modelcontextprotocol/protocolVersion""#,
                    Good::Text(r#""2026-07-28""#),
                    &["7", "null", "{}", r#""\ud800""#],
                ),
                (
                    r#""io.modelcontextprotocol/clientCapabilities""#,
                    Good::Gen(capabilities),
                    &["[]", "null", r#""c""#],
                ),
                (token_key, Good::Gen(token), TOKEN_BAD),
                (
                    r#""other""#,
                    Good::Text(r#"{"k":[true,false]}"#),
                    &["1e400"],
                ),
            ],
        )
    }

    fn request_params(rng: &mut ChaCha8Rng) -> String {
        let meta_key = one(rng, &[r#""_meta""#, r#""_meta""#, r#""\u005fmeta""#]);
        object(
            rng,
            &[
                (
                    r#""name""#,
                    Good::Text(r#""slow_op""#),
                    &["1e400", r#""\udc00""#],
                ),
                (
                    r#""arguments""#,
                    Good::Text(r#"{"steps":3,"p":"caf\u00e9"}"#),
                    &[],
                ),
                (meta_key, Good::Gen(meta), SHAPES),
            ],
        )
    }

    fn progress_params(rng: &mut ChaCha8Rng) -> String {
        object(
            rng,
            &[
                (r#""progressToken""#, Good::Gen(token), TOKEN_BAD),
                (r#""progress""#, Good::Gen(number), NUMBER_BAD),
                (r#""total""#, Good::Gen(number), NUMBER_BAD),
                (
                    r#""message""#,
                    Good::Text(r#""step \"2\"""#),
                    &["2", "null", r#""\ud800""#],
                ),
                (r#""_meta""#, Good::Text(r#"{"a":{"b":[]}}"#), SHAPES),
                (r#""extra""#, Good::Text("[1e300]"), &["1e400"]),
            ],
        )
    }

    fn message(rng: &mut ChaCha8Rng) -> String {
        let request = chance(rng, 50);
        let (method, mut params): (_, fn(&mut ChaCha8Rng) -> String) = if request {
            (r#""tools/call""#, request_params)
        } else {
            (r#""notifications/progress""#, progress_params)
        };
        if chance(rng, 10) {
            params = if request {
                progress_params
            } else {
                request_params
            };
        }
        let mut specs: Vec<Spec> = vec![(
            r#""jsonrpc""#,
            Good::Text(r#""2.0""#),
            &[r#""1.0""#, "2", "null"],
        )];
        if request || chance(rng, 5) {
            specs.push((
                r#""id""#,
                Good::Text("7"),
                &[
                    "null",
                    r#""a""#,
                    "1.5",
                    "1.0",
                    "18446744073709551615",
                    "[]",
                    r#""\ud800""#,
                ],
            ));
        }
        specs.push((
            r#""method""#,
            Good::Text(method),
            &[
                r#""notifications/cancelled""#,
                r#""notifications/x""#,
                r#""\u0074ools/call""#,
                "5",
                "null",
                r#""tools/call""#,
                r#""notifications/progress""#,
            ],
        ));
        specs.push((r#""params""#, Good::Gen(params), SHAPES));
        if chance(rng, 5) {
            specs.push((r#""result""#, Good::Text("{}"), &["1"]));
        }
        if chance(rng, 5) {
            specs.push((
                r#""error""#,
                Good::Text(r#"{"code":1,"message":"m"}"#),
                &["{}"],
            ));
        }
        object(rng, &specs)
    }

    #[test]
    fn one_pass_reader_agrees_with_general_path_on_generated_messages() {
        let mut rng = ChaCha8Rng::seed_from_u64(20260728);
        let mut requests = 0;
        let mut progress = 0;
        for _ in 0..30_000 {
            let text = message(&mut rng);
            assert_same(text.as_bytes());
            match decode(text.as_bytes()) {
                Ok(Message::Request(_)) => requests += 1,
                Ok(Message::Progress(_)) => progress += 1,
                _ => {}
            }
        }
        // The generator must reach the decodes the one-pass reader shortcuts.
        assert!(
            requests > 500 && progress > 500,
            "{requests} requests, {progress} progress"
        );
    }

    #[test]
    fn one_pass_reader_agrees_with_general_path_on_corpora() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = 0;
        let mut dirs = vec![
            root.join("fuzz/corpus/decode_bytes"),
            root.join("fuzz/seeds/decode_bytes"),
        ];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    assert_same(&std::fs::read(path).unwrap());
                    files += 1;
                }
            }
        }
        eprintln!("{files} corpus files");
    }
}
