//! What the live tools share: a child process's pipes ([`stdio`]), posts to a live endpoint
//! ([`http`]), the local intermediary ([`relay`]) and the wall-clock trace.

pub mod http;
pub mod relay;
pub mod stdio;
pub(crate) mod wall_trace;
