//! The sans-IO client and server under arbitrary messages, timers and closes; see
//! `mcp_sim::fuzzing::model_ops`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_sim::fuzzing::ModelOp;

mcp_sim::asan_defaults!();

fuzz_target!(|input: (bool, Vec<ModelOp>)| mcp_sim::fuzzing::model_ops(&input.1, input.0));
