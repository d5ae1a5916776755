//! proptest strategies for scenarios and their parts (feature `proptest`, on by default): they
//! build the same [`Scenario`] type that [`Scenario::from_seed`] draws, so a user's property
//! test sweeps its own server over workloads, faults, proxies and timeout policies, and a
//! failing case shrinks to a small scenario.
//!
//! ```no_run
//! use mcp_sim::scenario::strategies::{arb_scenario, config};
//! use proptest::prelude::*;
//!
//! proptest! {
//!     #![proptest_config(config("proptest-regressions/my_server.txt", 64))]
//!     #[test]
//!     fn my_server_is_clean(scenario in arb_scenario()) {
//!         let _ = scenario; // run it with mcp_sim::run::judge_with_server and your server
//!     }
//! }
//! ```

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

use super::{CallKind, Fault, PlannedCall, ProxyConfig, Scenario};
use crate::model::{MutantSet, ResponseMode, ServerBehaviour, SseStyle, TimeoutPolicy, Transport};

/// A proptest configuration that keeps its regressions in the top-level
/// `proptest-regressions/` folder. `PROPTEST_CASES` overrides `cases`.
pub fn config(file: &'static str, cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(file))),
        ..Config::default()
    }
}

/// Durations from `lo` to `hi` ms.
fn ms(lo: u64, hi: u64) -> impl Strategy<Value = Duration> {
    (lo..=hi).prop_map(Duration::from_millis)
}

/// stdio or Streamable HTTP.
pub fn arb_transport() -> impl Strategy<Value = Transport> {
    prop_oneof![Just(Transport::Stdio), Just(Transport::Http)]
}

/// Client timeout policies: the host presets, fixed and resetting ones.
pub fn arb_policy() -> impl Strategy<Value = TimeoutPolicy> {
    prop_oneof![
        Just(TimeoutPolicy::inspector_v1()),
        Just(TimeoutPolicy::typescript_sdk()),
        ms(1_000, 100_000).prop_map(TimeoutPolicy::fixed),
        (ms(1_000, 20_000), ms(20_000, 120_000)).prop_map(|(t, m)| TimeoutPolicy::resetting(t, m)),
    ]
}

/// No intermediary, a preset, or a custom idle timeout.
pub fn arb_proxy() -> impl Strategy<Value = Option<ProxyConfig>> {
    prop_oneof![
        Just(None),
        Just(Some(ProxyConfig::NGINX)),
        Just(Some(ProxyConfig::ALB)),
        Just(Some(ProxyConfig::CLOUDFLARE)),
        ms(2_000, 30_000).prop_map(|d| Some(ProxyConfig::custom(d))),
    ]
}

/// What a planned call asks for, shrinking towards a plain tool call: a task, input rounds, a
/// subscription or a poll of a task the server never had.
pub fn arb_kind() -> impl Strategy<Value = CallKind> {
    prop_oneof![
        6 => Just(CallKind::TOOL),
        2 => (any::<bool>(), 0u32..3)
            .prop_map(|(task, input_rounds)| CallKind::Tool { task, input_rounds }),
        1 => any::<bool>().prop_map(|tools_changed| CallKind::Listen { tools_changed }),
        1 => Just(CallKind::StaleTask),
    ]
}

/// One planned call: start, work, progress, policy, cancellation, idempotency and kind. A
/// subscription always ends (the application cancels it), or the run could not settle.
pub fn arb_call() -> impl Strategy<Value = PlannedCall> {
    (
        ms(0, 20_000),
        0u32..30,
        ms(10, 3_000),
        any::<bool>(),
        arb_policy(),
        proptest::option::of(ms(0, 60_000)),
        any::<bool>(),
        arb_kind(),
    )
        .prop_map(
            |(at, steps, step, progress, policy, cancel_after, idempotent, kind)| {
                let mut call = PlannedCall {
                    at,
                    steps,
                    step,
                    progress,
                    policy,
                    cancel_after,
                    idempotent,
                    kind,
                };
                match kind {
                    CallKind::Listen { .. } => {
                        call.policy = TimeoutPolicy::none();
                        call.cancel_after = Some(cancel_after.unwrap_or(step * 10));
                    }
                    CallKind::StaleTask => call.policy = crate::model::client::POLL_POLICY,
                    CallKind::Tool { .. } => {}
                }
                call
            },
        )
}

/// A fault among `calls` planned calls: a stream reset, a crash, a partition, a blackhole.
pub fn arb_fault(calls: usize) -> impl Strategy<Value = Fault> {
    prop_oneof![
        (ms(0, 60_000), 0..calls.max(1)).prop_map(|(at, call)| Fault::ResetStream { at, call }),
        ms(0, 60_000).prop_map(|at| Fault::CrashServer { at }),
        (ms(0, 60_000), ms(10, 30_000))
            .prop_map(|(at, duration)| Fault::Partition { at, duration }),
        (ms(0, 60_000), ms(10, 10_000))
            .prop_map(|(at, duration)| Fault::Blackhole { at, duration }),
    ]
}

/// A whole scenario, the same type `Scenario::from_seed` draws, so failures shrink.
pub fn arb_scenario() -> impl Strategy<Value = Scenario> {
    let knobs = (
        any::<u64>(),
        arb_transport(),
        prop_oneof![
            Just((0, 1)),
            Just((1, 20)),
            Just((10, 200)),
            Just((50, 2_000))
        ],
        arb_proxy(),
        prop_oneof![Just(0u64), Just(500), Just(5_000)],
        prop_oneof![Just(1_000u64), Just(15_000), Just(30_000)],
        prop_oneof![4 => Just(ResponseMode::Sse), 1 => Just(ResponseMode::Json)],
        any::<bool>(),
    );
    (knobs, proptest::collection::vec(arb_call(), 1..=8))
        .prop_flat_map(|(k, calls)| {
            let n = calls.len();
            (
                Just(k),
                Just(calls),
                proptest::collection::vec(arb_fault(n), 0..=2),
            )
        })
        .prop_map(
            |(
                (seed, transport, (lo, hi), proxy, progress_ms, keepalive_ms, mode, no_buffering),
                calls,
                mut faults,
            )| {
                faults.sort_by_key(super::fault_time);
                let server = ServerBehaviour {
                    progress_min_interval: Duration::from_millis(progress_ms),
                    keepalive_interval: Some(Duration::from_millis(keepalive_ms)),
                    response_mode: mode,
                    sse_style: if seed % 4 == 0 {
                        SseStyle::PrettyCrlfSplit
                    } else {
                        SseStyle::Plain
                    },
                    ..ServerBehaviour::default()
                };
                let scenario = Scenario {
                    seed,
                    transport: Transport::Http,
                    latency: (Duration::from_millis(lo), Duration::from_millis(hi)),
                    proxy,
                    server,
                    no_buffering_header: no_buffering,
                    calls,
                    faults,
                    mutants: MutantSet::NONE,
                };
                scenario.with_transport(transport)
            },
        )
}
