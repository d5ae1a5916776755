//! What each of the [`Conditions`] does to a seed's scenario.

use std::time::Duration;

use crate::model::mutant::Conditions;
use crate::model::{ResponseMode, SseStyle, TimeoutPolicy, Transport};
use crate::scenario::{CallKind, Fault, Opening, PlannedCall, ProxyConfig, Scenario};
use crate::wire::Era;

impl Conditions {
    /// `scenario` under these conditions.
    pub fn apply(self, scenario: Scenario) -> Scenario {
        match self {
            Conditions::AsDrawn => scenario,
            Conditions::Http => scenario.with_transport(Transport::Http),
            Conditions::CrlfSplitSse => {
                let mut s = scenario.with_transport(Transport::Http);
                s.server.sse_style = SseStyle::PrettyCrlfSplit;
                s
            }
            Conditions::IdleTimeoutProxy => {
                let mut s = scenario.with_transport(Transport::Http);
                s.proxy = Some(ProxyConfig::ALB);
                for c in &mut s.calls {
                    c.steps = c.steps.max(25);
                    c.step = c.step.max(Duration::from_secs(3));
                }
                s
            }
            Conditions::HeaderStrippingProxy => {
                let mut s = scenario.with_transport(Transport::Http);
                s.proxy = Some(ProxyConfig {
                    strips_mcp_headers: Some(2),
                    ..ProxyConfig::ALB
                });
                s
            }
            Conditions::Stdio => scenario.with_transport(Transport::Stdio),
            Conditions::Legacy => scenario.in_era(Era::LEGACY),
            Conditions::LegacyHandshakeTimeout => {
                // The pipe is open by the first call.
                let mut s = scenario.in_era(Era::LEGACY);
                let first_call = s.calls.iter().map(|c| c.at).min().unwrap_or_default();
                s.faults = vec![Fault::Partition {
                    at: first_call,
                    duration: Duration::from_secs(40),
                }];
                s
            }
            Conditions::LegacySilentProbe => scenario
                .in_era(Era::LEGACY)
                .opening(Opening::Auto { silent: true }),
            Conditions::LegacyCancelledProgress => every_call(scenario.in_era(Era::LEGACY), |c| {
                c.progress = true;
                c.steps = c.steps.max(10);
                c.cancel_after = Some(c.step * 3);
            }),
            Conditions::LegacyQuietCalls => {
                let mut s = scenario.in_era(Era::LEGACY);
                for c in &mut s.calls {
                    c.progress = false;
                    c.steps = c.steps.max(4);
                    c.step = c.step.max(Duration::from_secs(6));
                }
                s
            }
            Conditions::LegacyStreams => legacy_streams(scenario),
            Conditions::BridgeCancels => every_call(scenario.with_bridge(), cancelled_progress),
            Conditions::EraBridgeCancels => {
                every_call(scenario.with_era_bridge(), cancelled_progress)
            }
            Conditions::BridgeUncancelledProgress => every_call(scenario.with_bridge(), |c| {
                c.progress = true;
                c.steps = c.steps.max(4);
                c.cancel_after = None;
            }),
            Conditions::BridgeProgress => every_call(scenario.with_bridge(), |c| {
                c.progress = true;
                c.steps = c.steps.max(4);
            }),
            Conditions::AlternateTasks => {
                let mut k = 0;
                every_call(scenario, |c| {
                    k += 1;
                    c.kind = task(k % 2 == 1);
                })
            }
            Conditions::TaskProgress => every_call(scenario, |c| {
                c.kind = task(true);
                c.progress = true;
                c.steps = c.steps.max(5);
            }),
            Conditions::CancelledTasks => every_call(scenario, |c| {
                c.kind = task(true);
                c.steps = c.steps.max(10);
                c.cancel_after = Some(c.step * 3);
            }),
            Conditions::TasksBesideCancelledCalls => {
                let mut k = 0;
                every_call(scenario.with_transport(Transport::Http), |c| {
                    k += 1;
                    if k % 2 == 0 {
                        c.kind = task(true);
                        c.steps = c.steps.max(10);
                    } else {
                        c.kind = CallKind::TOOL;
                        c.cancel_after = Some(Duration::from_millis(500));
                    }
                })
            }
            Conditions::StaleTask => {
                let mut s = scenario;
                if let Some(c) = s.calls.first_mut() {
                    c.kind = CallKind::StaleTask;
                    c.policy = crate::model::client::POLL_POLICY;
                }
                s
            }
            Conditions::InputRound => every_call(scenario, |c| {
                c.kind = CallKind::Tool {
                    task: false,
                    input_rounds: 1,
                };
                c.progress = true;
            }),
            Conditions::ToolsSubscription => subscription(scenario, true),
            Conditions::PromptsSubscription => subscription(scenario, false),
            Conditions::StdioToolsSubscription => {
                subscription(scenario.with_transport(Transport::Stdio), true)
            }
        }
    }
}

/// A tool call, a task or not, without input rounds.
fn task(task: bool) -> CallKind {
    CallKind::Tool {
        task,
        input_rounds: 0,
    }
}

/// A call the application cancels while it reports progress, long enough to be cancelled.
fn cancelled_progress(c: &mut PlannedCall) {
    c.progress = true;
    c.steps = c.steps.max(8);
    c.cancel_after = Some(c.step * 3);
}

/// The scenario with its first call a subscription, to tool-list changes or to prompt-list
/// changes, that the application cancels after 50 s.
fn subscription(mut s: Scenario, tools_changed: bool) -> Scenario {
    if let Some(c) = s.calls.first_mut() {
        c.kind = CallKind::Listen { tools_changed };
        c.progress = false;
        c.policy = TimeoutPolicy::none();
        c.cancel_after = Some(Duration::from_secs(50));
    }
    s
}

/// A seed's scenario for the legacy era's HTTP streams: event streams with progress, the
/// calls long enough to overlap, and the first call's stream reset after a few steps (the
/// resume needs event ids it read before).
fn legacy_streams(scenario: Scenario) -> Scenario {
    let mut s = scenario.in_era(Era::LEGACY).with_transport(Transport::Http);
    s.server.response_mode = ResponseMode::Sse;
    for c in &mut s.calls {
        c.progress = true;
        c.steps = c.steps.max(8);
        c.cancel_after = None;
    }
    if let Some(first) = s.calls.first() {
        let at = first.at + first.step * 3 + Duration::from_millis(500);
        s.faults = vec![Fault::ResetStream { at, call: 0 }];
    }
    s
}

/// The scenario with `f` applied to every planned call that is not a subscription.
fn every_call(mut s: Scenario, mut f: impl FnMut(&mut PlannedCall)) -> Scenario {
    for c in s
        .calls
        .iter_mut()
        .filter(|c| !matches!(c.kind, CallKind::Listen { .. }))
    {
        f(c);
    }
    s
}
