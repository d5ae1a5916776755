//! One file per command: each parses its flags, calls the library and prints.

pub mod around;
pub mod check_proxy;
pub mod check_trace;
pub mod confirm;
pub mod decode;
pub mod diff;
pub mod fit;
pub mod merge;
pub mod mutants;
pub mod probe;
pub mod record;
pub mod replay;
pub mod rules;
pub mod serve;
pub mod sweep;
pub mod virtual_bridge;
pub mod virtual_client;
pub mod virtual_peer;
