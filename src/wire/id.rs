//! Request ids and progress tokens.
//!
//! Both are "string or integer" in MCP 2026-07-28 (docs/spec/mcp-2026-07-28.md §1.3). They are separate types so a
//! token can never be passed where an id is meant. The string `"1"` and the integer `1` are
//! different values (host policy in docs/spec/mcp-2026-07-28.md §1.3), which the derived `Eq`/`Ord` give for free.
//! Integers are `i64`: ids above `i64::MAX` are rejected by the decoder, as typed parsers do.

use std::fmt;

use serde_json::Value;

macro_rules! id_like {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[cfg_attr(feature = "fuzzing", derive(arbitrary::Arbitrary))]
        pub enum $name {
            /// An integer value (JSON number without fraction or exponent).
            Number(i64),
            /// A string value.
            String(String),
        }

        impl $name {
            /// The JSON value this id is written as.
            pub fn to_json(&self) -> Value {
                match self {
                    Self::Number(n) => Value::from(*n),
                    Self::String(s) => Value::from(s.as_str()),
                }
            }

            /// The id a JSON value names, if it is a string or an `i64` integer.
            pub fn from_json(v: &Value) -> Option<Self> {
                match v {
                    Value::String(s) => Some(Self::String(s.clone())),
                    Value::Number(n) => n.as_i64().map(Self::Number),
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            /// Written as JSON: `7` or `"req-a1"`, so the two kinds stay distinguishable.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    Self::Number(n) => write!(f, "{n}"),
                    Self::String(s) => write!(f, "{}", Value::from(s.as_str())),
                }
            }
        }

        impl From<i64> for $name {
            fn from(n: i64) -> Self {
                Self::Number(n)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::String(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self::String(s)
            }
        }
    };
}

id_like!(
    /// A JSON-RPC request id: a string or an integer, never `null` (docs/spec/mcp-2026-07-28.md §1.2).
    RequestId
);

id_like!(
    /// A `progressToken`: a string or an integer chosen by the client (docs/spec/mcp-2026-07-28.md §2.1).
    ProgressToken
);
