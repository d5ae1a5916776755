//! The JSONTestSuite parsing corpus (`test_parsing/`) against the generic JSON layer.
//!
//! - `y_*`: must be accepted by [`parse_value`] with the default limits;
//! - `n_*`: must be rejected;
//! - `i_*`: implementation-defined; either verdict is fine, a panic is not.
//!
//! Every file also goes through the message decoder, which must not panic (most files are not
//! MCP messages, so the verdict itself is not checked there).
//!
//! The corpus is committed once, as part of the `decode_bytes` fuzz seeds:
//! `fuzz/seeds/decode_bytes/JSONTestSuite/` holds the 318 files of the suite's `test_parsing/`
//! (nst/JSONTestSuite, commit 1ef36fa, MIT licence in the same folder). The test counts them,
//! so a missing or extra file fails it.

use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;

use mcp_sim::wire::json::parse_value;
use mcp_sim::wire::{decode, Limits};

/// Files of each kind in the suite's `test_parsing/` at commit 1ef36fa.
const Y_FILES: usize = 95;
const N_FILES: usize = 188;
const I_FILES: usize = 35;

fn suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/decode_bytes/JSONTestSuite")
}

/// `(file name, bytes)` of every file in the corpus, sorted by name.
fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = suite_dir();
    assert!(
        dir.is_dir(),
        "the JSONTestSuite corpus is missing: {} is not a folder (it is committed in the \
         repository; restore it with `git checkout -- fuzz/seeds/decode_bytes/JSONTestSuite`)",
        dir.display()
    );
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("directory entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .expect("UTF-8 file name")
                .to_owned();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {name}: {e}"));
            (name, bytes)
        })
        .filter(|(name, _)| name.ends_with(".json"))
        .collect();
    files.sort();
    files
}

#[test]
fn json_test_suite() {
    let limits = Limits::default();
    let (mut yes, mut no, mut impl_defined) = (0usize, 0usize, 0usize);
    let mut failures = Vec::new();

    for (name, bytes) in corpus() {
        let verdict = panic::catch_unwind(AssertUnwindSafe(|| parse_value(&bytes, &limits)));
        let decoded = panic::catch_unwind(AssertUnwindSafe(|| decode(&bytes).is_ok()));
        if decoded.is_err() {
            failures.push(format!("{name}: decode panicked"));
        }
        let verdict = match verdict {
            Ok(v) => v,
            Err(_) => {
                failures.push(format!("{name}: parse_value panicked"));
                continue;
            }
        };
        match &name[..2] {
            "y_" => {
                yes += 1;
                if let Err(e) = verdict {
                    failures.push(format!("{name}: must be accepted, got {e}"));
                }
            }
            "n_" => {
                no += 1;
                if let Ok(v) = verdict {
                    failures.push(format!("{name}: must be rejected, got {v}"));
                }
            }
            "i_" => impl_defined += 1,
            _ => failures.push(format!("{name}: not a y_, n_ or i_ file")),
        }
    }

    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert_eq!(
        (yes, no, impl_defined),
        (Y_FILES, N_FILES, I_FILES),
        "expected {Y_FILES} y_, {N_FILES} n_ and {I_FILES} i_ files in {}",
        suite_dir().display()
    );
    eprintln!("JSONTestSuite: {yes} y_, {no} n_, {impl_defined} i_ files");
}

/// Each corpus file placed as a member value of an otherwise valid message, in members the
/// decoder interprets and in members it only skips: the decoder accepts the result only if
/// the generic JSON layer does. Skipped members must be read as strictly as the rest.
#[test]
fn json_test_suite_inside_messages() {
    const PLACES: &[(&str, &str)] = &[
        (
            r#"{"jsonrpc":"2.0","method":"notifications/x","extra":"#,
            "}",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"#,
            "}}",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"extra":"#,
            "}}",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"_meta":{"a":"#,
            "}}}",
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"extra":"#,
            "}}",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"arguments":"#,
            "}}",
        ),
        (r#"{"jsonrpc":"2.0","id":1,"result":{"content":"#, "}}"),
        (r#"{"jsonrpc":"2.0","id":1,"result":{},"params":"#, "}"),
        (r#"{"jsonrpc":"2.0","id":1,"result":{},"extra":"#, "}"),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":"#,
            "}}",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","extra":"#,
            "}}",
        ),
    ];
    let limits = Limits::default();
    let mut checked = 0usize;
    let mut failures = Vec::new();
    for (name, bytes) in corpus() {
        for (before, after) in PLACES {
            let text = [before.as_bytes(), &bytes, after.as_bytes()].concat();
            let json_ok = parse_value(&text, &limits).is_ok();
            let decoded = panic::catch_unwind(AssertUnwindSafe(|| decode(&text)));
            match decoded {
                Err(_) => failures.push(format!("{name} in {before}...: decode panicked")),
                Ok(Ok(_)) if !json_ok => failures.push(format!(
                    "{name} in {before}...: decoded, but is not JSON: {}",
                    String::from_utf8_lossy(&text)
                )),
                Ok(_) => {}
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert_eq!(checked, (Y_FILES + N_FILES + I_FILES) * PLACES.len());
}

/// The implementation-defined cases whose verdict this crate chose, pinned so that a change
/// of serde_json or of the limits is noticed.
#[test]
fn json_test_suite_implementation_defined_verdicts() {
    let limits = Limits::default();
    let files = corpus();
    let verdict = |name: &str| {
        let (_, bytes) = files
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} is missing from {}", suite_dir().display()));
        parse_value(bytes, &limits).map_err(|e| e.rule.as_str())
    };
    // Numbers beyond f64: rejected as out of range, never turned into infinity.
    for name in [
        "i_number_huge_exp.json",
        "i_number_real_neg_overflow.json",
        "i_number_real_pos_overflow.json",
    ] {
        assert_eq!(
            verdict(name).map(|_| ()),
            Err("number-out-of-range"),
            "{name}"
        );
    }
    // Deep nesting: over the default depth limit of 64.
    assert_eq!(
        verdict("i_structure_500_nested_arrays.json").map(|_| ()),
        Err("nesting-too-deep")
    );
    // Invalid UTF-8 is rejected: MCP messages MUST be UTF-8 (docs/spec/mcp-2026-07-28.md §1.1).
    for name in [
        "i_string_invalid_utf-8.json",
        "i_string_iso_latin_1.json",
        "i_string_UTF-8_invalid_sequence.json",
    ] {
        assert!(verdict(name).is_err(), "{name}");
    }
}
