//! JSON-RPC batches: a frame that is a top-level array of messages.
//!
//! Revision 2025-03-26 allowed them (a POST body or a stdio line may hold several requests,
//! notifications or responses, and a batch of requests is answered by a batch of responses);
//! 2025-06-18 removed them and 2026-07-28 never had them (docs/spec/mcp-2025-11-25.md §7). So
//! [`decode_with`](super::decode_with) reads one message and refuses every array with
//! [`Rule::Batch`], naming the era's reason, and [`decode_frame`] is the reader for a frame
//! that may be a batch: in 2025-03-26 it decodes each member on its own, so one bad member
//! is that member's error and not the frame's.
//!
//! Limits: the frame as a whole is held to [`Limits`](super::Limits) (its size and depth), as
//! a single message is; an empty batch is invalid (JSON-RPC 2.0), and a member that is itself
//! an array is refused as a batch inside a batch.

use serde_json::value::RawValue;

use super::decode::{decode_with, DecodeOptions};
use super::era::{Era, LegacyRevision};
use super::error::{DecodeError, Rule, EMPTY_BATCH};
use super::json;
use super::Message;

/// One frame's content: a message, or the members of a batch, each decoded on its own.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A single message.
    Single(Message),
    /// A 2025-03-26 batch, in the order of its members.
    Batch(Vec<Result<Message, DecodeError>>),
}

/// Whether `era` allows batches: 2025-03-26 only.
pub fn allows_batches(era: Era) -> bool {
    era == Era::Legacy(LegacyRevision::V2025_03_26)
}

/// Decodes a frame that may be a batch. Anything but a top-level array decodes as
/// [`decode_with`] does; an array is a batch in 2025-03-26 and a [`Rule::Batch`] error in every
/// other era.
pub fn decode_frame(bytes: &[u8], opts: &DecodeOptions) -> Result<Frame, DecodeError> {
    if !allows_batches(opts.era) || !starts_an_array(bytes) {
        return decode_with(bytes, opts).map(Frame::Single);
    }
    json::check_limits(bytes, &opts.limits)?;
    let members: Vec<&RawValue> = serde_json::from_slice(bytes).map_err(|e| {
        let mut err = json::syntax_error(e);
        err.id = None;
        err
    })?;
    if members.is_empty() {
        return Err(DecodeError::new(Rule::Batch, "", EMPTY_BATCH));
    }
    let decoded = members
        .iter()
        .enumerate()
        .map(|(k, m)| {
            decode_with(m.get().as_bytes(), opts).map_err(|mut e| {
                e.path = if e.path.is_empty() {
                    format!("[{k}]")
                } else {
                    format!("[{k}].{}", e.path)
                };
                e
            })
        })
        .collect();
    Ok(Frame::Batch(decoded))
}

fn starts_an_array(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'[')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MessageKind;

    fn opts(era: Era) -> DecodeOptions {
        DecodeOptions {
            era,
            ..DecodeOptions::default()
        }
    }

    const V0326: Era = Era::Legacy(LegacyRevision::V2025_03_26);
    const BATCH: &[u8] = br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}}]"#;

    #[test]
    fn a_2025_03_26_batch_decodes_member_by_member() {
        let Frame::Batch(members) = decode_frame(BATCH, &opts(V0326)).unwrap() else {
            panic!("not a batch");
        };
        let kinds: Vec<_> = members.iter().map(|m| m.as_ref().unwrap().kind()).collect();
        assert_eq!(kinds, [MessageKind::Request, MessageKind::Cancelled]);
    }

    #[test]
    fn a_bad_member_is_that_members_error_with_its_position() {
        let text = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":null}},[]]"#;
        let Frame::Batch(members) = decode_frame(text, &opts(V0326)).unwrap() else {
            panic!("not a batch");
        };
        assert!(members[0].is_ok());
        let e = members[1].as_ref().unwrap_err();
        assert_eq!(
            (e.rule, e.path.as_str()),
            (Rule::NullId, "[1].params.requestId")
        );
        let e = members[2].as_ref().unwrap_err();
        assert_eq!((e.rule, e.path.as_str()), (Rule::Batch, "[2]"));
    }

    #[test]
    fn an_empty_batch_is_invalid() {
        let e = decode_frame(b" [ ] ", &opts(V0326)).unwrap_err();
        assert_eq!(e.rule, Rule::Batch);
        assert!(e.detail.contains("empty"), "{e}");
        let e = decode_with(b"[\n]", &opts(V0326)).unwrap_err();
        assert!(e.detail.contains("empty"), "{e}");
    }

    #[test]
    fn every_other_era_refuses_a_batch_and_says_why() {
        for (era, why) in [
            (Era::Modern, "2026-07-28 has no batches"),
            (Era::LEGACY, "removed in 2025-06-18"),
            (
                Era::Legacy(LegacyRevision::V2025_06_18),
                "removed in 2025-06-18",
            ),
        ] {
            let e = decode_frame(BATCH, &opts(era)).unwrap_err();
            assert_eq!(e.rule, Rule::Batch, "{era}");
            assert!(e.detail.contains(why), "{era}: {e}");
        }
    }

    #[test]
    fn a_batch_is_held_to_the_frame_limits() {
        let o = DecodeOptions {
            limits: crate::wire::Limits {
                max_message_bytes: 64,
                max_depth: 64,
            },
            ..opts(V0326)
        };
        let e = decode_frame(BATCH, &o).unwrap_err();
        assert_eq!(e.rule, Rule::MessageTooLarge);
        let e = decode_frame(b"[{\"jsonrpc\":", &opts(V0326)).unwrap_err();
        assert_eq!(e.rule, Rule::JsonSyntax);
    }

    #[test]
    fn a_single_message_is_a_single_frame_in_every_era() {
        let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        for era in [V0326, Era::LEGACY] {
            assert!(matches!(
                decode_frame(ping, &opts(era)),
                Ok(Frame::Single(_))
            ));
        }
    }
}
