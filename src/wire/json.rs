//! The JSON layer under the message decoder: limits, a nesting pre-scan, member picking and
//! lenient scalar classification.
//!
//! Why this shape: the decoder must name the broken rule and field, which serde's derive
//! cannot do (its errors are strings). So objects are read with `pick`, which borrows the raw
//! text of a fixed set of members without allocating, and values are read as `Scalar`, which
//! accepts every JSON type; the checks that follow are plain Rust returning typed errors.
//! Members nobody interprets are still read in full (see [`validate`]), and the objects whose
//! members the decoder interprets are read in one pass that also spots duplicate members.
//!
//! Reading raw text first means reading it twice, so for messages in the usual shape the
//! decoder first tries one pass of its own, built from the same parts (the key readers, the
//! `Scalar` reader and the validating read): it classifies members as they are met and reads
//! the params it knows straight into typed fields. That pass only ever gives up, never
//! reports; the reading described above then runs and names the rule.
//!
//! Every `Value` built from input goes through `ValueSeed` and `MapSeed`, never through
//! `Value`'s own `Deserialize`, which gives one member name a meaning (see `ValueSeed`).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::error::{DecodeError, Rule};

/// Size and nesting limits applied before any parsing.
///
/// Exceeding a limit is a typed error ([`Rule::MessageTooLarge`], [`Rule::NestingTooDeep`]),
/// never a crash or an unbounded allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted message, in bytes (default 4 MiB). The stdio line limit is this plus
    /// the line terminator.
    pub max_message_bytes: usize,
    /// Deepest accepted nesting of objects and arrays, counting the message object itself as 1
    /// (default 64). Values above 127 are clamped, since serde_json refuses deeper input.
    pub max_depth: usize,
}

impl Limits {
    /// The default limits: 4 MiB and depth 64.
    pub const DEFAULT: Limits = Limits {
        max_message_bytes: 4 << 20,
        max_depth: 64,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// serde_json's own recursion limit; our depth check must stay below it.
const SERDE_JSON_MAX_DEPTH: usize = 127;

/// Checks the size and nesting limits without parsing.
///
/// First a count of the bracket bytes, which bounds the depth: text with no more of them than
/// the limit is within it. Otherwise the scan tracks strings and brackets, eight bytes at a
/// time where it can. Both run without parsing; malformed JSON is left for the parser to
/// report.
pub fn check_limits(bytes: &[u8], limits: &Limits) -> Result<(), DecodeError> {
    if bytes.len() > limits.max_message_bytes {
        return Err(DecodeError::new(
            Rule::MessageTooLarge,
            "",
            format!(
                "{} bytes exceed the limit of {}",
                bytes.len(),
                limits.max_message_bytes
            ),
        ));
    }
    let max_depth = limits.max_depth.min(SERDE_JSON_MAX_DEPTH);
    // Each level opens with a `[` or `{` byte, so text with no more of those than the limit
    // cannot nest deeper; counting them is branch-free and vectorises, the full scan is not.
    if openings_exceed(bytes, max_depth) && deepest(bytes) > max_depth {
        return Err(DecodeError::new(
            Rule::NestingTooDeep,
            "",
            format!("nesting exceeds the limit of {max_depth}"),
        ));
    }
    Ok(())
}

/// Whether more than `limit` bytes are `[` or `{` (setting bit 5 maps `[` to `{` and no other
/// byte to it); it stops at the first 128-byte block that passes the limit.
///
/// Eight bytes at a time with bit tricks and no comparison per byte: besides being fast, this
/// keeps the loop free of the per-byte comparison hooks a fuzzing build inserts. Each word adds
/// a 1 to the byte lane of each bracket it holds; every 16 words the lanes (16 at most each) are
/// summed with one multiplication, as `count_ones` has no instruction on baseline x86-64.
fn openings_exceed(bytes: &[u8], limit: usize) -> bool {
    let found = |w: &[u8]| equal(word(w) | (ONES * 0x20), b'{') >> 7;
    let sum = |lanes: u64| (lanes.wrapping_mul(ONES) >> 56) as usize;
    let mut blocks = bytes.chunks_exact(128);
    let mut n = 0;
    for block in &mut blocks {
        n += sum(block.chunks_exact(8).map(found).sum());
        if n > limit {
            return true;
        }
    }
    let mut words = blocks.remainder().chunks_exact(8);
    let lanes: u64 = (&mut words).map(found).sum();
    // The tail, padded with zero bytes, which are no bracket.
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    n + sum(lanes + found(&tail)) > limit
}

/// Eight bytes as a little-endian word.
fn word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("eight bytes"))
}

/// A 1 in every byte of a word.
const ONES: u64 = 0x0101_0101_0101_0101;
/// The high bit of every byte of a word.
const HIGH: u64 = ONES * 0x80;

/// The high bit of each byte of `w` that equals `c`, and no other bit.
fn equal(w: u64, c: u8) -> u64 {
    let v = w ^ (ONES * u64::from(c));
    // A byte's low seven bits plus 0x7f reach the high bit unless they are all zero; no
    // carry crosses into the next byte.
    !(((v & !HIGH) + !HIGH) | v) & HIGH
}

/// The deepest nesting of `[` and `{` outside strings, where a `]` or `}` closes one level (if
/// any is open) and a backslash in a string hides the byte after it.
///
/// Eight bytes are looked at at once: a word without backslashes is classified with bit
/// tricks (which bytes lie inside strings, which may be brackets), and only the bytes that may
/// be brackets outside strings are looked at one by one. Words with a backslash, and the last
/// few bytes, go byte by byte.
fn deepest(bytes: &[u8]) -> usize {
    /// The high bit of every zero byte of `v`, and possibly of a 0x01 byte above a zero byte.
    fn zeros(v: u64) -> u64 {
        v.wrapping_sub(ONES) & !v & HIGH
    }

    let mut scan = Scan::default();
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        if scan.escaped || zeros(w ^ (ONES * u64::from(b'\\'))) != 0 {
            word.iter().for_each(|&b| scan.byte(b));
            continue;
        }
        // Byte i of `count` is the number of quotes at or before byte i (at most eight, so
        // nothing carries into the next byte); an odd count means inside a string, flipped if
        // a string was open before the word. Opening quotes count as inside, closing ones as
        // outside.
        let count = (equal(w, b'"') >> 7).wrapping_mul(ONES);
        let odd = (count << 7) & HIGH;
        let inside = odd ^ scan.string;
        // An odd number of quotes in the word flips the state for the next one.
        scan.string ^= ((odd as i64 >> 63) as u64) & HIGH;
        // `[`, `]`, `{` and `}` are the bytes that agree with 0x59 outside the bits 0x26, with
        // `Y`, `_`, `y` and DEL, which JSON has only inside strings: every bracket is found, and
        // each byte found is looked at.
        let mut found = zeros((w & (ONES * 0xd9)) ^ (ONES * 0x59)) & !inside;
        while found != 0 {
            // Setting bit 5 maps `[` to `{` and `]` to `}`, and no other byte to either.
            let b = (w >> (found.trailing_zeros() - 7)) as u8 | 0x20;
            if b == b'{' {
                scan.open();
            } else if b == b'}' {
                scan.close();
            }
            found &= found - 1;
        }
    }
    words.remainder().iter().for_each(|&b| scan.byte(b));
    scan.deepest
}

/// The state of [`deepest`] between bytes.
#[derive(Default)]
struct Scan {
    depth: usize,
    deepest: usize,
    /// 0, or every byte's high bit inside a string (the form the word loop uses).
    string: u64,
    /// The previous byte was a backslash in a string.
    escaped: bool,
}

impl Scan {
    fn byte(&mut self, b: u8) {
        if self.escaped {
            self.escaped = false;
        } else if self.string != 0 {
            match b {
                b'\\' => self.escaped = true,
                b'"' => self.string = 0,
                _ => {}
            }
        } else {
            match b {
                b'"' => self.string = HIGH,
                b'[' | b'{' => self.open(),
                b']' | b'}' => self.close(),
                _ => {}
            }
        }
    }

    fn open(&mut self) {
        self.depth += 1;
        self.deepest = self.deepest.max(self.depth);
    }

    fn close(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }
}

/// Reads one whole JSON text exactly as [`parse_value`] does, building nothing: every string
/// is unescaped and checked (UTF-8, surrogate pairs), every number converted, and nothing may
/// follow the value.
///
/// The same seed is how the decoder reads the members it does not interpret: skipping them
/// (as `IgnoredAny` does) would let through bytes that are not UTF-8, lone surrogate escapes
/// and numbers beyond `f64`, which [`parse_value`] rejects (docs/spec/mcp-2026-07-28.md §1.1: messages MUST be
/// UTF-8 JSON).
pub fn validate(bytes: &[u8]) -> Result<(), DecodeError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Validate
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(syntax_error)
}

/// A seed that reads any JSON value completely and keeps nothing.
pub(crate) struct Validate;

impl<'de> DeserializeSeed<'de> for Validate {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Validate {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Validate)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Validate)?.is_some() {
            map.next_value_seed(Validate)?;
        }
        Ok(())
    }
}

/// Parses any JSON text into a [`Value`] under the given limits.
///
/// This is the generic JSON layer (it accepts scalars and arrays at the top level); it is what
/// the JSONTestSuite checks.
pub fn parse_value(bytes: &[u8], limits: &Limits) -> Result<Value, DecodeError> {
    check_limits(bytes, limits)?;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    ValueSeed
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(syntax_error)
}

/// Maps a serde_json error on raw input to a typed error.
pub(crate) fn syntax_error(e: serde_json::Error) -> DecodeError {
    let text = e.to_string();
    let rule = if text.contains("number out of range") {
        Rule::NumberOutOfRange
    } else if text.contains("recursion limit") {
        Rule::NestingTooDeep
    } else {
        Rule::JsonSyntax
    };
    DecodeError::new(rule, "", text)
}

/// Any JSON value, classified but not validated. Containers are skipped, not kept.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar<'a> {
    Null,
    Bool(bool),
    /// A negative integer, or any integer that fits `i64`.
    Int(i64),
    /// A non-negative integer above `i64::MAX`.
    UInt(u64),
    /// A number with a fraction or exponent, or an integer too large for `u64`.
    Float(f64),
    Str(Cow<'a, str>),
    Array,
    Object,
}

impl Scalar<'_> {
    /// The JSON type name, for error details.
    pub fn type_name(&self) -> &'static str {
        match self {
            Scalar::Null => "null",
            Scalar::Bool(_) => "boolean",
            Scalar::Int(_) | Scalar::UInt(_) => "integer",
            Scalar::Float(_) => "number",
            Scalar::Str(_) => "string",
            Scalar::Array => "array",
            Scalar::Object => "object",
        }
    }

    /// Classifies a parsed [`Value`].
    pub fn from_value(v: &Value) -> Scalar<'_> {
        match v {
            Value::Null => Scalar::Null,
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Scalar::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Scalar::UInt(u)
                } else {
                    Scalar::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => Scalar::Str(Cow::Borrowed(s)),
            Value::Array(_) => Scalar::Array,
            Value::Object(_) => Scalar::Object,
        }
    }

    /// Parses one raw JSON value. Capturing raw text only skips over it, so this is where its
    /// strings are unescaped and checked and its numbers converted: a number beyond `f64` or a
    /// lone surrogate escape is an error here, as in [`parse_value`].
    pub fn from_raw(raw: &RawValue) -> Result<Scalar<'_>, DecodeError> {
        serde_json::from_str(raw.get()).map_err(syntax_error)
    }

    /// The value as a finite `f64`, if it is a number.
    pub fn as_number(&self) -> Option<f64> {
        match *self {
            Scalar::Int(i) => Some(i as f64),
            Scalar::UInt(u) => Some(u as f64),
            Scalar::Float(f) => Some(f),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> de::Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Scalar::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(v).map_or(Scalar::UInt(v), Scalar::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Scalar::Float(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element_seed(Validate)?.is_some() {}
        Ok(Scalar::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_key_seed(Validate)?.is_some() {
            map.next_value_seed(Validate)?;
        }
        Ok(Scalar::Object)
    }
}

/// Largest number of members [`pick`] can select.
pub(crate) const MAX_PICK: usize = 6;

/// The raw text of selected members of one JSON object.
#[derive(Debug)]
pub(crate) enum Picked<'a> {
    /// The value was an object; `values[i]` is the member named `keys[i]`, if present.
    Object {
        values: [Option<&'a RawValue>; MAX_PICK],
        /// The first selected key that appeared twice.
        duplicate: Option<&'static str>,
    },
    /// The value was an array (elements skipped).
    Array,
    /// The value was neither object nor array; its classification.
    Other(Scalar<'a>),
}

/// Reads `input` (one JSON value) and borrows the raw text of the members named in `keys`.
/// Other members are skipped without allocating.
pub(crate) fn pick<'a>(
    input: &'a [u8],
    keys: &'static [&'static str],
) -> Result<Picked<'a>, serde_json::Error> {
    debug_assert!(keys.len() <= MAX_PICK);
    let mut de = serde_json::Deserializer::from_slice(input);
    let picked = PickSeed { keys }.deserialize(&mut de)?;
    de.end()?;
    Ok(picked)
}

struct PickSeed {
    keys: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for PickSeed {
    type Value = Picked<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PickSeed {
    type Value = Picked<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut values = [None; MAX_PICK];
        let mut duplicate = None;
        while let Some(slot) = map.next_key_seed(KeySeed { keys: self.keys })? {
            match slot {
                Some(i) => {
                    let raw: &'de RawValue = map.next_value()?;
                    if values[i].is_some() {
                        duplicate.get_or_insert(self.keys[i]);
                    }
                    values[i] = Some(raw);
                }
                None => map.next_value_seed(Validate)?,
            }
        }
        Ok(Picked::Object { values, duplicate })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        ScalarVisitor.visit_seq(seq).map(|_| Picked::Array)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Picked::Other(Scalar::Null))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Picked::Other(Scalar::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Picked::Other(Scalar::Int(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Picked::Other(Scalar::UInt(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Picked::Other(Scalar::Float(v)))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Picked::Other(Scalar::Str(Cow::Borrowed(""))))
    }
}

/// Maps an object key to its index in `keys` without allocating (escaped keys are compared
/// after unescaping, as serde_json hands them over).
pub(crate) struct KeySeed {
    pub keys: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.keys.iter().position(|k| *k == v))
    }
}

/// Reads an object key, borrowing it from the input unless it holds escapes.
pub(crate) struct KeyCow;

/// Reads a string value the way [`KeyCow`] reads a key.
pub(crate) use KeyCow as StrCow;

impl<'de> DeserializeSeed<'de> for KeyCow {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyCow {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// Which keys of an object [`parse_watched`] watches for duplicates.
#[derive(Debug)]
pub(crate) struct Watch {
    /// Keys that must not appear twice in the object.
    pub keys: &'static [&'static str],
    /// A member whose value, when it is an object, is watched in turn.
    pub nested: Option<(&'static str, &'static Watch)>,
}

/// Reads one JSON value into a [`Value`] as `Value`'s own `Deserialize` does, except that no
/// member name is special.
///
/// Why not `Value`'s own: with serde_json's `raw_value` feature (which the decoder needs to
/// borrow members unparsed), `Value` reads an object whose first member is named
/// `$serde_json::private::RawValue` as the JSON text held in that member's string:
/// `{"$serde_json::private::RawValue":"1"}` would become the number 1, and any other value an
/// error. That object is valid JSON and the name an ordinary one, so every `Value` the decoder
/// builds goes through here.
pub(crate) struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        ValueSeed.deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // serde_json never hands over a non-finite number; `from` would make it null.
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(ValueSeed)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        MapSeed.visit_map(map).map(Value::Object)
    }
}

/// Parses one whole JSON text into a [`Value`] through [`ValueSeed`].
pub(crate) fn value_from_str(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = ValueSeed.deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// An optional [`Value`] through [`ValueSeed`], for serde's `deserialize_with`: `null` is
/// `None`, as it is for `Option<Value>`.
pub(crate) fn optional_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    ValueSeed
        .deserialize(d)
        .map(|v| (!v.is_null()).then_some(v))
}

/// Reads a JSON object into a [`Map`], its values through [`ValueSeed`].
pub(crate) struct MapSeed;

impl<'de> DeserializeSeed<'de> for MapSeed {
    type Value = Map<String, Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MapSeed {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            out.insert(key, map.next_value_seed(ValueSeed)?);
        }
        Ok(out)
    }
}

/// Parses one JSON value into a [`Value`] in a single pass, like `serde_json::from_str`, and
/// also returns the dotted path (relative to the value) of the first watched key that appears
/// twice. A map keeps the last of duplicate members, so a receiver that reads the first would
/// see another message: duplicates of the members the decoder interprets are errors.
pub(crate) fn parse_watched(
    text: &str,
    watch: &'static Watch,
) -> Result<(Value, Option<String>), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = WatchSeed(watch).deserialize(&mut de)?;
    de.end()?;
    Ok(parsed)
}

struct WatchSeed(&'static Watch);

impl<'de> DeserializeSeed<'de> for WatchSeed {
    type Value = (Value, Option<String>);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for WatchSeed {
    type Value = (Value, Option<String>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok((Value::Null, None))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok((Value::Bool(v), None))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok((Value::from(v), None))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok((Value::from(v), None))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        // serde_json never hands over a non-finite number; `from` would make it null.
        Ok((Value::from(v), None))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok((Value::from(v), None))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok((Value::String(v), None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(ValueSeed)? {
            items.push(v);
        }
        Ok((Value::Array(items), None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::new();
        let mut duplicate = None;
        while let Some(key) = map.next_key::<String>()? {
            let value = match self.0.nested {
                Some((name, inner)) if key == name => {
                    let (v, d) = map.next_value_seed(WatchSeed(inner))?;
                    if duplicate.is_none() {
                        duplicate = d.map(|d| format!("{key}.{d}"));
                    }
                    v
                }
                _ => map.next_value_seed(ValueSeed)?,
            };
            if duplicate.is_none() && self.0.keys.contains(&key.as_str()) && out.contains_key(&key)
            {
                duplicate = Some(key.clone());
            }
            out.insert(key, value);
        }
        Ok((Value::Object(out), duplicate))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{deepest, openings_exceed};

    /// How many bytes are `[` or `{`, by [`openings_exceed`].
    fn openings(bytes: &[u8]) -> usize {
        (0..=bytes.len())
            .find(|&limit| !openings_exceed(bytes, limit))
            .expect("no more openings than bytes")
    }

    /// Runs of one bracket fill the byte lanes of the count to their maximum, in whole blocks,
    /// in the words after them and in the tail.
    #[test]
    fn openings_counts_full_lanes() {
        for b in [b'[', b'{'] {
            for len in 0..=300 {
                let bytes = vec![b; len];
                assert_eq!(openings(&bytes), len, "{len} times {}", b as char);
            }
        }
    }

    /// The nesting scan one byte at a time, as plainly as it can be written.
    fn deepest_bytewise(bytes: &[u8]) -> usize {
        let (mut depth, mut deepest, mut i) = (0usize, 0, 0);
        while i < bytes.len() {
            match bytes[i] {
                b'"' => {
                    i += 1;
                    while i < bytes.len() {
                        match bytes[i] {
                            b'\\' => i += 2,
                            b'"' => break,
                            _ => i += 1,
                        }
                    }
                }
                b'[' | b'{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            i += 1;
        }
        deepest
    }

    #[test]
    fn deepest_examples() {
        for (text, depth) in [
            (&br#""#[..], 0),
            (br#"{"a":[1,{"b":"]]}[{"}]}"#, 3),
            (br#"{"a\"[":["\\",[[]]],"z":"\u005b"}"#, 4),
            (br#"]]]][["#, 2),
            (br#""unterminated [[[ \"#, 0),
            (br#"{"k":"x\\\"{{{{{{{{{{"}"#, 1),
        ] {
            assert_eq!(deepest(text), depth, "{}", String::from_utf8_lossy(text));
            assert_eq!(deepest_bytewise(text), depth);
        }
    }

    proptest! {
        #[test]
        fn deepest_matches_bytewise_scan(
            bytes in proptest::collection::vec(
                prop_oneof![
                    Just(b'"'), Just(b'\\'), Just(b'['), Just(b']'), Just(b'{'), Just(b'}'),
                    Just(b'a'), Just(0xdb), Just(0xfd), any::<u8>(),
                ],
                0..200,
            )
        ) {
            prop_assert_eq!(deepest(&bytes), deepest_bytewise(&bytes));
            let brackets = bytes.iter().filter(|&&b| b == b'[' || b == b'{').count();
            prop_assert_eq!(openings(&bytes), brackets);
            // The cheap count bounds the depth, which is what lets it skip the scan.
            prop_assert!(deepest(&bytes) <= brackets);
        }
    }
}
