//! The protocol era a peer speaks, and how a trace says which one it is.
//!
//! Two eras are in use. The **modern** era is revision 2026-07-28: no handshake, every request
//! carries its protocol version and capabilities in `_meta`, and on HTTP closing a request's
//! stream is its cancel. The **legacy** era is every revision from 2025-03-26 to 2025-11-25:
//! an `initialize` handshake fixes the version for the connection (or the HTTP session),
//! `ping` must be answered, cancels are `notifications/cancelled` on every transport and a
//! disconnect is not a cancel (`docs/spec/mcp-2025-11-25.md`). A peer is judged by the rules
//! of the revision it speaks, so the oracle reads the era from the trace before anything
//! else (`oracle::EraReading::of_trace`), and a caller that knows better says so.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::PROTOCOL_VERSION;

/// A revision of the legacy era.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LegacyRevision {
    /// 2025-03-26: Streamable HTTP and JSON-RPC batches; no protocol-version header.
    V2025_03_26,
    /// 2025-06-18: no batches; `MCP-Protocol-Version` on every HTTP request after initialize.
    V2025_06_18,
    /// 2025-11-25: the SSE priming event, `retry` before a reconnect, tasks.
    V2025_11_25,
}

impl LegacyRevision {
    /// Every legacy revision, oldest first.
    pub const ALL: [LegacyRevision; 3] = [
        LegacyRevision::V2025_03_26,
        LegacyRevision::V2025_06_18,
        LegacyRevision::V2025_11_25,
    ];

    /// The revision's date, as `protocolVersion` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            LegacyRevision::V2025_03_26 => "2025-03-26",
            LegacyRevision::V2025_06_18 => "2025-06-18",
            LegacyRevision::V2025_11_25 => "2025-11-25",
        }
    }
}

/// The protocol era of a peer, a connection or a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Era {
    /// A legacy revision, with the `initialize` handshake.
    Legacy(LegacyRevision),
    /// Revision 2026-07-28, the one mcp-sim speaks.
    #[default]
    Modern,
}

impl Era {
    /// The newest legacy revision, the one a legacy peer is assumed to speak when nothing says
    /// which.
    pub const LEGACY: Era = Era::Legacy(LegacyRevision::V2025_11_25);

    /// The era of a `protocolVersion` string, if it names a known revision.
    pub fn from_version(version: &str) -> Option<Era> {
        if version == PROTOCOL_VERSION {
            return Some(Era::Modern);
        }
        LegacyRevision::ALL
            .into_iter()
            .find(|r| r.as_str() == version)
            .map(Era::Legacy)
    }

    /// The revision's `protocolVersion` string.
    pub fn version(self) -> &'static str {
        match self {
            Era::Modern => PROTOCOL_VERSION,
            Era::Legacy(r) => r.as_str(),
        }
    }

    /// Whether this is a legacy revision.
    pub fn is_legacy(self) -> bool {
        matches!(self, Era::Legacy(_))
    }

    /// `modern` or `legacy`, the name of the era's rule column.
    pub fn family(self) -> &'static str {
        match self {
            Era::Modern => "modern",
            Era::Legacy(_) => "legacy",
        }
    }
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.family(), self.version())
    }
}

/// An era is its revision's `protocolVersion` string in files (`"2025-11-25"`).
impl Serialize for Era {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.version())
    }
}

impl<'de> Deserialize<'de> for Era {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Era, D::Error> {
        let version = String::deserialize(d)?;
        Era::from_version(&version).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{version:?} is not a revision (2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26)"
            ))
        })
    }
}

/// A string that names no era.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEra(pub String);

impl fmt::Display for UnknownEra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown era {:?}: expected modern, legacy, 2026-07-28, 2025-11-25, 2025-06-18 or 2025-03-26",
            self.0
        )
    }
}

impl std::error::Error for UnknownEra {}

impl FromStr for Era {
    type Err = UnknownEra;

    /// `modern`, `legacy` (2025-11-25) or a revision's date.
    fn from_str(s: &str) -> Result<Era, UnknownEra> {
        match s {
            "modern" => Ok(Era::Modern),
            "legacy" => Ok(Era::LEGACY),
            other => Era::from_version(other).ok_or_else(|| UnknownEra(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eras_parse_from_their_names_and_dates_and_refuse_anything_else() {
        assert_eq!("modern".parse(), Ok(Era::Modern));
        assert_eq!("2026-07-28".parse(), Ok(Era::Modern));
        assert_eq!("legacy".parse(), Ok(Era::LEGACY));
        assert_eq!(
            "2025-06-18".parse(),
            Ok(Era::Legacy(LegacyRevision::V2025_06_18))
        );
        let err = "2024-11-05".parse::<Era>().unwrap_err();
        assert!(err.to_string().contains("2024-11-05"), "{err}");
        assert_eq!(Era::LEGACY.to_string(), "legacy 2025-11-25");
    }
}
