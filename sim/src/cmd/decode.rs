//! `mcp-sim decode`: one verdict per stdin line.
//!
//! ```text
//! {"line":1,"ok":true,"kind":"progress"}
//! {"line":2,"ok":false,"error":{"rule":"null-id","path":"params.requestId","message":"..."}}
//! ```
//!
//! With `--era 2025-03-26` a line may be a batch: one verdict per member, each with its
//! `"member"` position (`{"line":3,"member":0,"ok":true,"kind":"request"}`).

use std::io::{self, BufWriter, Read, Write};
use std::process::ExitCode;

use mcp_sim::exit::Exit;
use mcp_sim::framing::ndjson::{LineDecoder, LineOptions};
use mcp_sim::framing::FrameError;
use mcp_sim::wire::{self, DecodeError, DecodeOptions, Frame, Limits, Message};
use mcp_sim::Era;
use serde::Serialize;

/// Strictness knobs; the default is the 2026-07-28 schema as written.
#[derive(clap::Args)]
pub struct Args {
    /// Accept `"id": null` on error responses (base JSON-RPC 2.0).
    #[arg(long)]
    allow_null_error_id: bool,
    /// Accept integer-valued floats such as `1.0` as ids and tokens.
    #[arg(long)]
    allow_integral_float_ids: bool,
    /// Reject results without `resultType` (what a server MUST send).
    #[arg(long)]
    require_result_type: bool,
    /// Read the shapes of this era: `modern` (2026-07-28) or `legacy` (a request's `_meta` is
    /// optional and carries no modern keys), or a revision's date.
    #[arg(long, default_value = "modern")]
    era: Era,
    /// Strip CR before LF instead of rejecting the line.
    #[arg(long)]
    allow_crlf: bool,
    /// Skip blank lines instead of rejecting them.
    #[arg(long)]
    allow_blank_lines: bool,
    /// Largest accepted message in bytes.
    #[arg(long, default_value_t = Limits::DEFAULT.max_message_bytes)]
    max_message_bytes: usize,
    /// Deepest accepted nesting of objects and arrays.
    #[arg(long, default_value_t = Limits::DEFAULT.max_depth)]
    max_depth: usize,
}

pub fn run(args: &Args) -> ExitCode {
    let limits = Limits {
        max_message_bytes: args.max_message_bytes,
        max_depth: args.max_depth,
    };
    let opts = DecodeOptions {
        limits,
        allow_null_error_id: args.allow_null_error_id,
        allow_integral_float_ids: args.allow_integral_float_ids,
        require_result_type: args.require_result_type,
        era: args.era,
    };
    let mut lines = LineDecoder::new(LineOptions {
        max_line_bytes: limits.max_message_bytes,
        allow_crlf: args.allow_crlf,
        allow_blank_lines: args.allow_blank_lines,
    });
    let mut out = BufWriter::new(io::stdout().lock());
    let mut stdin = io::stdin().lock();
    let mut chunk = vec![0u8; 64 * 1024];
    let result = (|| -> io::Result<()> {
        loop {
            let n = stdin.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            lines.push(&chunk[..n]);
            while let Some(item) = lines.next_line() {
                match item {
                    Ok(line) => match wire::decode_frame(&line.bytes, &opts) {
                        Ok(Frame::Single(msg)) => {
                            write_verdict(&mut out, &Verdict::ok(line.number, None, &msg))?
                        }
                        // A 2025-03-26 batch: one verdict per member, in order.
                        Ok(Frame::Batch(members)) => {
                            for (k, member) in members.iter().enumerate() {
                                let verdict = match member {
                                    Ok(msg) => Verdict::ok(line.number, Some(k), msg),
                                    Err(e) => decode_error(line.number, Some(k), e),
                                };
                                write_verdict(&mut out, &verdict)?;
                            }
                        }
                        Err(e) => write_verdict(&mut out, &decode_error(line.number, None, &e))?,
                    },
                    Err(e) => write_verdict(&mut out, &frame_error(&e))?,
                }
            }
        }
        if let Some(e) = lines.finish() {
            writeln!(out, "{}", serde_json::to_string(&frame_error(&e))?)?;
        }
        out.flush()
    })();
    match result {
        Ok(()) => ExitCode::from(Exit::Pass),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::from(Exit::Pass),
        Err(e) => {
            eprintln!("mcp-sim decode: {e}");
            ExitCode::from(Exit::Usage)
        }
    }
}

fn write_verdict(out: &mut impl Write, verdict: &Verdict<'_>) -> io::Result<()> {
    writeln!(out, "{}", serde_json::to_string(verdict)?)
}

/// One output line; fields in the documented order.
#[derive(Serialize)]
struct Verdict<'a> {
    line: u64,
    /// The member's position, for a member of a 2025-03-26 batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    member: Option<usize>,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<VerdictError<'a>>,
}

#[derive(Serialize)]
struct VerdictError<'a> {
    rule: &'static str,
    path: &'a str,
    message: &'a str,
}

impl Verdict<'_> {
    fn ok(line: u64, member: Option<usize>, msg: &Message) -> Self {
        Verdict {
            line,
            member,
            ok: true,
            kind: Some(msg.kind().as_str()),
            error: None,
        }
    }
}

fn decode_error(line: u64, member: Option<usize>, e: &DecodeError) -> Verdict<'_> {
    let error = VerdictError {
        rule: e.rule.as_str(),
        path: &e.path,
        message: &e.detail,
    };
    Verdict {
        line,
        member,
        ok: false,
        kind: None,
        error: Some(error),
    }
}

fn frame_error(e: &FrameError) -> Verdict<'_> {
    let error = VerdictError {
        rule: e.rule.as_str(),
        path: "",
        message: &e.detail,
    };
    Verdict {
        line: e.line,
        member: None,
        ok: false,
        kind: None,
        error: Some(error),
    }
}
