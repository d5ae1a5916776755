//! What the live tools share: a child process's pipes ([`stdio`]), posts to a live endpoint
//! ([`http`]), the local intermediary ([`relay`]) and its front gate (`gate`:
//! `Host`/`Origin` and the HTTP bounds) and the wall-clock trace.

pub(crate) mod gate;
pub mod http;
pub mod relay;
pub mod stdio;
pub(crate) mod wall_trace;
