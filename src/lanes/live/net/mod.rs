//! What the live tools share: a child process's pipes ([`stdio`]), posts to a live endpoint
//! ([`http`]), the local intermediary ([`relay`]) and its front gate (`gate`:
//! `Host`/`Origin` and the HTTP bounds) the wall-clock trace and the file it is written to as it goes ([`trace_file`]).

pub(crate) mod gate;
pub mod http;
pub mod relay;
pub mod stdio;
pub mod trace_file;
pub(crate) mod wall_trace;

pub use wall_trace::TraceOut;
