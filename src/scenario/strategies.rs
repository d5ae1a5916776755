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

use super::knobs;
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

/// Durations in a range of the knob table, `(lo, hi)` ms.
fn ms((lo, hi): (u64, u64)) -> impl Strategy<Value = Duration> {
    (lo..=hi).prop_map(Duration::from_millis)
}

/// One of the knob table's values.
fn one_of<T: Copy + std::fmt::Debug + 'static>(values: &'static [T]) -> impl Strategy<Value = T> {
    proptest::sample::select(values)
}

/// `true` with the knob table's chance.
fn chance(percent: u64) -> impl Strategy<Value = bool> {
    (0..100u64).prop_map(move |x| x < percent)
}

/// stdio or Streamable HTTP.
pub fn arb_transport() -> impl Strategy<Value = Transport> {
    prop_oneof![Just(Transport::Stdio), Just(Transport::Http)]
}

/// Client timeout policies on `transport`: the host presets, fixed and resetting ones.
pub fn arb_policy_on(transport: Transport) -> impl Strategy<Value = TimeoutPolicy> {
    prop_oneof![
        Just(TimeoutPolicy::inspector_v1()),
        Just(TimeoutPolicy::typescript_sdk()),
        ms(knobs::HOST_IDLE_MS).prop_map(move |idle| TimeoutPolicy::host_idle(transport, idle)),
        ms(knobs::FIXED_TIMEOUT_MS).prop_map(TimeoutPolicy::fixed),
        (
            ms(knobs::RESETTING_TIMEOUT_MS),
            ms(knobs::RESETTING_MAXIMUM_MS)
        )
            .prop_map(|(t, m)| TimeoutPolicy::resetting(t, m)),
    ]
}

/// Client timeout policies, as on Streamable HTTP ([`arb_policy_on`]).
pub fn arb_policy() -> impl Strategy<Value = TimeoutPolicy> {
    arb_policy_on(Transport::Http)
}

/// No intermediary, a preset, or a custom idle timeout.
pub fn arb_proxy() -> impl Strategy<Value = Option<ProxyConfig>> {
    prop_oneof![
        Just(None),
        Just(Some(ProxyConfig::NGINX)),
        Just(Some(ProxyConfig::ALB)),
        Just(Some(ProxyConfig::CLOUDFLARE)),
        ms(knobs::CUSTOM_PROXY_IDLE_MS).prop_map(|d| Some(ProxyConfig::custom(d))),
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
        ms(knobs::CALL_START_MS),
        (knobs::STEPS.0 as u32)..=(knobs::STEPS.1 as u32),
        ms(knobs::STEP_MS),
        chance(knobs::PROGRESS_PERCENT),
        arb_policy(),
        proptest::option::weighted(
            knobs::CANCEL_PERCENT as f64 / 100.0,
            ms(knobs::CANCEL_AFTER_MS),
        ),
        chance(knobs::IDEMPOTENT_PERCENT),
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
                    sampling: false,
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
        (ms(knobs::FAULT_AT_MS), 0..calls.max(1))
            .prop_map(|(at, call)| Fault::ResetStream { at, call }),
        ms(knobs::FAULT_AT_MS).prop_map(|at| Fault::CrashServer { at }),
        (ms(knobs::FAULT_AT_MS), ms(knobs::PARTITION_MS))
            .prop_map(|(at, duration)| Fault::Partition { at, duration }),
        (ms(knobs::FAULT_AT_MS), ms(knobs::BLACKHOLE_MS))
            .prop_map(|(at, duration)| Fault::Blackhole { at, duration }),
    ]
}

/// A whole scenario, the same type `Scenario::from_seed` draws, so failures shrink.
pub fn arb_scenario() -> impl Strategy<Value = Scenario> {
    let draws = (
        any::<u64>(),
        arb_transport(),
        one_of(knobs::LATENCIES_MS),
        arb_proxy(),
        one_of(knobs::PROGRESS_INTERVALS_MS),
        one_of(knobs::KEEPALIVE_INTERVALS_MS),
        chance(knobs::SSE_PERCENT).prop_map(|sse| {
            if sse {
                ResponseMode::Sse
            } else {
                ResponseMode::Json
            }
        }),
        chance(knobs::NO_BUFFERING_HEADER_PERCENT),
        chance(knobs::PLAIN_SSE_PERCENT),
    );
    let calls = (knobs::CALLS.0 as usize)..=(knobs::CALLS.1 as usize);
    (draws, proptest::collection::vec(arb_call(), calls))
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
                (
                    seed,
                    transport,
                    (lo, hi),
                    proxy,
                    progress_ms,
                    keepalive_ms,
                    mode,
                    no_buffering,
                    plain_sse,
                ),
                calls,
                mut faults,
            )| {
                faults.sort_by_key(super::fault_time);
                let server = ServerBehaviour {
                    progress_min_interval: Duration::from_millis(progress_ms),
                    keepalive_interval: Some(Duration::from_millis(keepalive_ms)),
                    response_mode: mode,
                    sse_style: if plain_sse {
                        SseStyle::Plain
                    } else {
                        SseStyle::PrettyCrlfSplit
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
                    era: crate::wire::Era::Modern,
                    opening: super::Opening::Pinned,
                    bridge: false,
                };
                scenario.with_transport(transport)
            },
        )
}
