//! Replays the committed fuzz inputs on stable: every file under `fuzz/seeds/<target>/` and
//! `fuzz/regressions/<target>/` goes through the same `mcp_sim::fuzzing` function that the
//! cargo-fuzz target calls. Structured targets build their input the way libfuzzer-sys does,
//! with `Unstructured::new(bytes)` and `arbitrary_take_rest`. `sse_differential`'s body is the
//! oracle in `common/sse_oracle.rs`, which the cargo-fuzz target includes the same way.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};

#[path = "common/sse_oracle.rs"]
mod sse_oracle;
use mcp_sim::fuzzing::{self, ArbMessage, ArbTrace, ChunkedInput, LiveOutput, ModelOp};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// Every regular file below `dir`, recursively (libFuzzer also reads corpus folders
/// recursively), sorted, skipping dot files.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'))
        {
            continue;
        }
        if path.is_dir() {
            files_under(&path, out);
        } else if path.is_file() {
            out.push(path);
        }
    }
}

/// The inputs of `target`: its seed folder must exist and hold files; its regression folder
/// is optional.
fn inputs(target: &str) -> Vec<PathBuf> {
    let seeds = fuzz_dir().join("seeds").join(target);
    assert!(seeds.is_dir(), "seed folder {} is missing", seeds.display());
    let mut files = Vec::new();
    files_under(&seeds, &mut files);
    assert!(
        !files.is_empty(),
        "seed folder {} holds no files",
        seeds.display()
    );
    let regressions = fuzz_dir().join("regressions").join(target);
    if regressions.is_dir() {
        files_under(&regressions, &mut files);
    }
    files
}

/// Runs `body` on every input of `target` and fails with the list of inputs that panicked.
fn replay(target: &str, body: impl Fn(&[u8])) {
    let files = inputs(target);
    let mut failed = Vec::new();
    for path in &files {
        let bytes =
            std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        if panic::catch_unwind(AssertUnwindSafe(|| body(&bytes))).is_err() {
            eprintln!("^ {target}: the panic above comes from {}", path.display());
            failed.push(path.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} of {} inputs panicked:\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
    eprintln!("{target}: {} inputs replayed", files.len());
}

/// What libfuzzer-sys does with a structured target's bytes. An input that `arbitrary`
/// refuses is skipped by the fuzzer, so it is skipped here as well.
fn structured<'a, T: Arbitrary<'a>>(bytes: &'a [u8], run: impl FnOnce(&T)) {
    if let Ok(input) = T::arbitrary_take_rest(Unstructured::new(bytes)) {
        run(&input);
    }
}

#[test]
fn decode_bytes_inputs() {
    replay("decode_bytes", fuzzing::decode_bytes);
}

#[test]
fn ndjson_chunks_inputs() {
    replay("ndjson_chunks", |b| {
        structured::<ChunkedInput>(b, fuzzing::ndjson_chunks)
    });
}

#[test]
fn sse_chunks_inputs() {
    replay("sse_chunks", |b| {
        structured::<ChunkedInput>(b, fuzzing::sse_chunks)
    });
}

#[test]
fn roundtrip_inputs() {
    replay("roundtrip", |b| {
        structured::<ArbMessage>(b, fuzzing::roundtrip)
    });
}

#[test]
fn trace_jsonl_inputs() {
    replay("trace_jsonl", fuzzing::trace_jsonl);
}

#[test]
fn trace_events_inputs() {
    replay("trace_events", |b| {
        structured::<ArbTrace>(b, fuzzing::trace_events)
    });
}

#[test]
fn model_ops_inputs() {
    replay("model_ops", |b| {
        structured::<(bool, Vec<ModelOp>)>(b, |(http, ops)| fuzzing::model_ops(ops, *http))
    });
}

#[test]
fn live_output_inputs() {
    replay("live_output", |b| {
        structured::<LiveOutput>(b, fuzzing::live_output)
    });
}

#[test]
fn sse_differential_inputs() {
    replay("sse_differential", |b| {
        structured::<ChunkedInput>(b, |input| {
            let chunks = fuzzing::split_at(&input.data, &input.cuts);
            if let Err(e) = sse_oracle::compare(&input.data, &chunks) {
                panic!("{e}");
            }
        })
    });
}

/// The spec examples and the JSONTestSuite copy are both present in the decode_bytes seeds.
#[test]
fn decode_bytes_seeds_cover_the_spec_and_json_test_suite() {
    let files = inputs("decode_bytes");
    let count = |prefix: &str| {
        files
            .iter()
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .count()
    };
    assert!(
        count("10.") >= 50,
        "spec §10 examples missing from fuzz/seeds/decode_bytes"
    );
    assert_eq!(
        count("y_") + count("n_") + count("i_"),
        318,
        "JSONTestSuite files missing"
    );
}

/// Each structured seed decodes into an input: a seed that `arbitrary` refuses tests nothing.
#[test]
fn structured_seeds_build_inputs() {
    for target in [
        "ndjson_chunks",
        "sse_chunks",
        "roundtrip",
        "trace_events",
        "model_ops",
        "live_output",
        "sse_differential",
    ] {
        let dir = fuzz_dir().join("seeds").join(target);
        let mut files = Vec::new();
        files_under(&dir, &mut files);
        for path in files {
            let bytes = std::fs::read(&path).expect("seed file");
            let u = Unstructured::new(&bytes);
            // A hand-written seed of the byte-stream targets carries a stream: one that
            // decodes to no bytes was written in another encoding than `arbitrary`'s.
            let hand_written = path.parent() == Some(dir.as_path());
            let ok = match target {
                "roundtrip" => ArbMessage::arbitrary_take_rest(u).is_ok(),
                "trace_events" => ArbTrace::arbitrary_take_rest(u).is_ok(),
                "model_ops" => <(bool, Vec<ModelOp>)>::arbitrary_take_rest(u).is_ok(),
                "live_output" => LiveOutput::arbitrary_take_rest(u)
                    .is_ok_and(|i| !hand_written || !i.data.is_empty()),
                _ => ChunkedInput::arbitrary_take_rest(u)
                    .is_ok_and(|i| !hand_written || !i.data.is_empty()),
            };
            assert!(ok, "{} does not build a {target} input", path.display());
        }
    }
}
