//! The encoder: a typed [`Message`] to compact JSON that the strict decoder accepts.
//!
//! It refuses what would produce an invalid or ambiguous message instead of writing it: NaN and
//! infinities (serde_json would write `null`), free-form maps holding a key that the typed part
//! writes, method names that belong to another kind, and output beyond the limits. For every
//! message it accepts, `decode(encode(m)) == m`.
//!
//! Members are written in the conventional order (`jsonrpc`, `id`, `method`, `params`, ...),
//! and free-form maps in their own order, so equal messages give byte-identical output.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

use super::error::{EncodeError, Rule};
use super::json::{self, Limits};
use super::message::*;

/// Encodes with the default limits.
pub fn encode(msg: &Message) -> Result<String, EncodeError> {
    encode_with(msg, &Limits::DEFAULT)
}

/// Encodes, refusing output that breaks `limits`.
pub fn encode_with(msg: &Message, limits: &Limits) -> Result<String, EncodeError> {
    validate(msg)?;
    // Serializing our own types into a String cannot fail: every map key is a string.
    let text = serde_json::to_string(&Wire(msg)).expect("message serialization is infallible");
    json::check_limits(text.as_bytes(), limits).map_err(EncodeError::Limit)?;
    Ok(text)
}

fn validate(msg: &Message) -> Result<(), EncodeError> {
    match msg {
        Message::Request(r) => {
            if r.method.starts_with("notifications/") {
                return Err(EncodeError::ReservedMethod(r.method.to_string()));
            }
            reserved(&r.params, "params", &["_meta"])?;
            reserved(
                &r.meta.other,
                "params._meta",
                &[
                    META_PROTOCOL_VERSION,
                    META_CLIENT_CAPABILITIES,
                    META_PROGRESS_TOKEN,
                ],
            )
        }
        Message::Progress(p) => {
            finite(p.progress, "params.progress")?;
            p.total.map_or(Ok(()), |t| finite(t, "params.total"))
        }
        Message::Cancelled(_) => Ok(()),
        Message::Notification(n) => match n.method.as_str() {
            METHOD_PROGRESS | METHOD_CANCELLED => {
                Err(EncodeError::ReservedMethod(n.method.clone()))
            }
            _ => Ok(()),
        },
        Message::Result(r) => reserved(&r.result, "result", &["resultType"]),
        Message::Error(_) => Ok(()),
    }
}

fn finite(v: f64, path: &'static str) -> Result<(), EncodeError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(EncodeError::NonFinite { path })
    }
}

fn reserved(
    map: &Map<String, Value>,
    path: &'static str,
    keys: &[&str],
) -> Result<(), EncodeError> {
    match keys.iter().find(|k| map.contains_key(**k)) {
        Some(k) => Err(EncodeError::ReservedKey {
            path,
            key: (*k).to_owned(),
        }),
        None => Ok(()),
    }
}

/// Serialization of a validated message.
struct Wire<'a>(&'a Message);

impl Serialize for Wire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        match self.0 {
            Message::Request(r) => {
                m.serialize_entry("id", &r.id.to_json())?;
                m.serialize_entry("method", &r.method)?;
                m.serialize_entry("params", &RequestParams(r))?;
            }
            Message::Progress(p) => {
                m.serialize_entry("method", METHOD_PROGRESS)?;
                m.serialize_entry("params", &ProgressParams(p))?;
            }
            Message::Cancelled(c) => {
                m.serialize_entry("method", METHOD_CANCELLED)?;
                m.serialize_entry("params", &CancelledParams(c))?;
            }
            Message::Notification(n) => {
                m.serialize_entry("method", &n.method)?;
                if let Some(p) = &n.params {
                    m.serialize_entry("params", p)?;
                }
            }
            Message::Result(r) => {
                m.serialize_entry("id", &r.id.to_json())?;
                m.serialize_entry("result", &ResultBody(r))?;
            }
            Message::Error(e) => {
                if let Some(id) = &e.id {
                    m.serialize_entry("id", &id.to_json())?;
                }
                m.serialize_entry("error", &ErrorBody(&e.error))?;
            }
        }
        m.end()
    }
}

struct RequestParams<'a>(&'a Request);

impl Serialize for RequestParams<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut m = s.serialize_map(None)?;
        for (k, v) in &r.params {
            m.serialize_entry(k, v)?;
        }
        // A request of a legacy revision carries none of the modern keys, and `_meta` only
        // when it has something in it (the version was negotiated by `initialize`).
        if !r.meta.legacy {
            m.serialize_entry("_meta", &MetaBody(&r.meta))?;
        } else if r.meta.progress_token.is_some() || !r.meta.other.is_empty() {
            m.serialize_entry("_meta", &LegacyMetaBody(&r.meta))?;
        }
        m.end()
    }
}

struct MetaBody<'a>(&'a RequestMeta);

impl Serialize for MetaBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let meta = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry(META_PROTOCOL_VERSION, &meta.protocol_version)?;
        m.serialize_entry(META_CLIENT_CAPABILITIES, &meta.client_capabilities)?;
        if let Some(t) = &meta.progress_token {
            m.serialize_entry(META_PROGRESS_TOKEN, &t.to_json())?;
        }
        for (k, v) in &meta.other {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

struct LegacyMetaBody<'a>(&'a RequestMeta);

impl Serialize for LegacyMetaBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let meta = self.0;
        let mut m = s.serialize_map(None)?;
        if let Some(t) = &meta.progress_token {
            m.serialize_entry(META_PROGRESS_TOKEN, &t.to_json())?;
        }
        for (k, v) in &meta.other {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

struct ProgressParams<'a>(&'a Progress);

impl Serialize for ProgressParams<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("progressToken", &p.token.to_json())?;
        m.serialize_entry("progress", &p.progress)?;
        if let Some(t) = p.total {
            m.serialize_entry("total", &t)?;
        }
        if let Some(msg) = &p.message {
            m.serialize_entry("message", msg)?;
        }
        if let Some(meta) = &p.meta {
            m.serialize_entry("_meta", meta)?;
        }
        m.end()
    }
}

struct CancelledParams<'a>(&'a Cancelled);

impl Serialize for CancelledParams<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("requestId", &c.request_id.to_json())?;
        if let Some(r) = &c.reason {
            m.serialize_entry("reason", r)?;
        }
        if let Some(meta) = &c.meta {
            m.serialize_entry("_meta", meta)?;
        }
        m.end()
    }
}

struct ResultBody<'a>(&'a ResultResponse);

impl Serialize for ResultBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut m = s.serialize_map(None)?;
        if let Some(t) = r.result_type {
            m.serialize_entry("resultType", t.as_str())?;
        }
        for (k, v) in &r.result {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

struct ErrorBody<'a>(&'a ErrorObject);

impl Serialize for ErrorBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("code", &e.code)?;
        m.serialize_entry("message", &e.message)?;
        if let Some(d) = &e.data {
            m.serialize_entry("data", d)?;
        }
        m.end()
    }
}

/// Encodes a message to a JSON [`Value`] (for traces), with the same refusals as [`encode`].
pub fn to_value(msg: &Message) -> Result<Value, EncodeError> {
    validate(msg)?;
    serde_json::to_value(Wire(msg)).map_err(|e| {
        EncodeError::Limit(super::DecodeError::new(Rule::JsonSyntax, "", e.to_string()))
    })
}
