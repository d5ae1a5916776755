//! The values and ranges every knob of a scenario is drawn from: one table for
//! [`Scenario::from_seed`](super::Scenario::from_seed) and the proptest strategies
//! ([`super::strategies`]), so a seed sweep and a property test explore the same space.
//!
//! Ranges are `(lo, hi)` in milliseconds, both ends included; percentages are the chance of
//! the first choice. Changing a value changes what every seed draws: the sweep counts and
//! trace digests of `mcp-sim sweep` move with it.

/// Network latency bands, `(lo, hi)` ms per delivery.
pub const LATENCIES_MS: &[(u64, u64)] = &[(0, 2), (1, 20), (10, 100), (20, 400), (50, 2_000)];
/// Idle timeout of a custom intermediary.
pub const CUSTOM_PROXY_IDLE_MS: (u64, u64) = (5_000, 30_000);
/// The server's minimum interval between progress notifications.
pub const PROGRESS_INTERVALS_MS: &[u64] = &[0, 500, 1_000, 5_000, 15_000];
/// The server's keep-alive interval on SSE streams.
pub const KEEPALIVE_INTERVALS_MS: &[u64] = &[5_000, 15_000, 30_000];
/// Chance that the server answers with an SSE stream (else one JSON body).
pub const SSE_PERCENT: u64 = 85;
/// Chance that its SSE is plain (else pretty-printed with CRLFs split across chunks).
pub const PLAIN_SSE_PERCENT: u64 = 80;
/// Chance that the server sends `X-Accel-Buffering: no`.
pub const NO_BUFFERING_HEADER_PERCENT: u64 = 90;
/// Concurrent planned calls, both ends included.
pub const CALLS: (u64, u64) = (1, 8);
/// When a call starts.
pub const CALL_START_MS: (u64, u64) = (0, 20_000);
/// Steps of a call's work, both ends included.
pub const STEPS: (u64, u64) = (0, 30);
/// One step of work.
pub const STEP_MS: (u64, u64) = (50, 3_000);
/// Chance that a call asks for progress.
pub const PROGRESS_PERCENT: u64 = 80;
/// Chance that the application cancels a call.
pub const CANCEL_PERCENT: u64 = 30;
/// When, after its start, the application cancels it.
pub const CANCEL_AFTER_MS: (u64, u64) = (0, 60_000);
/// Chance that a call may be retried.
pub const IDEMPOTENT_PERCENT: u64 = 50;
/// The wall-clock tool timeout of the host preset (`TimeoutPolicy::host_idle`).
pub const HOST_IDLE_MS: (u64, u64) = (30_000, 120_000);
/// A fixed timeout that progress does not extend.
pub const FIXED_TIMEOUT_MS: (u64, u64) = (2_000, 100_000);
/// A timeout that progress resets...
pub const RESETTING_TIMEOUT_MS: (u64, u64) = (2_000, 20_000);
/// ...under a hard maximum.
pub const RESETTING_MAXIMUM_MS: (u64, u64) = (20_000, 120_000);
/// How many faults a run has, picked uniformly from this list.
pub const FAULT_COUNTS: &[u64] = &[0, 0, 1, 2];
/// When a fault strikes.
pub const FAULT_AT_MS: (u64, u64) = (0, 60_000);
/// How long a partition lasts.
pub const PARTITION_MS: (u64, u64) = (100, 30_000);
/// How long a blackhole lasts.
pub const BLACKHOLE_MS: (u64, u64) = (100, 10_000);
