//! The mutant catalog: real SDK bugs as switchable faults of the reference peers.
//!
//! Each [`Mutant`] reproduces one documented bug (`docs/mutants.md`; repository and issue in
//! [`MutantInfo::bug`]) as a small deviation of the reference client, server or SSE framer.
//! A mutant is *killed* when the oracle flags a run of it that the reference passes: the
//! mutation score is the share of mutants killed, and a survivor means the oracle lacks a
//! rule. [`Mutant::adapt`] gives each mutant the conditions it needs to show (a transport, a
//! proxy, an SSE style), and [`Mutant::environment`] the peer faults it reacts to, which the
//! reference is judged under too, so that only the mutant's own behaviour can make the
//! difference.

use std::time::Duration;

pub use crate::model::mutant::{Mutant, MutantInfo, MutantSet, MutantSide, ALL};
use crate::model::Transport;
use crate::scenario::{CallKind, PlannedCall, ProxyConfig, Scenario};

impl Mutant {
    /// The rules expected to catch this mutant: those its bug breaks by definition. A hunt
    /// counts a kill only when one of them fires, so a mutant first flagged by a rule it was
    /// not written for (a host policy, a liveness check, a neighbouring rule) is hunted on
    /// until its own rule catches it ([`hunt`]). `crash` is the sweep's verdict on a panicked
    /// peer ([`crate::run::CRASH`]), the bug of the mutants that crash the server.
    pub fn expected_rules(self) -> &'static [&'static str] {
        match self {
            Mutant::RespondAfterCancel => &["response-after-cancel"],
            Mutant::IgnoreCancel => &["response-after-cancel", "work-after-cancel"],
            Mutant::HandlerSurvivesDisconnect => &["disconnect-is-cancel"],
            Mutant::CancelCompleteRacePanics => &["crash"],
            Mutant::WriteAfterClosePanics => &["crash"],
            Mutant::CrashOnCancelNotification => &["crash"],
            Mutant::ProgressAfterCompletion => &["progress-after-completion"],
            Mutant::FlatProgress => &["progress-monotonic"],
            Mutant::ForgedProgressToken => &["progress-unknown-token"],
            Mutant::ProgressMisrouted => &["progress-stream"],
            Mutant::NoKeepalive => &["idle-stream-cut"],
            Mutant::TimeoutWithoutCancel => &["cancel-on-timeout"],
            Mutant::LateResponseIsFatal => &["race-not-graceful"],
            Mutant::StaleProgressIsError => &["race-not-graceful"],
            Mutant::AcceptNonIncreasingProgress => &["timeout-deadline"],
            Mutant::MaxCapOnlyOnProgress => &["timeout-maximum", "timeout-deadline"],
            Mutant::ResetNotExtending => &["timeout-deadline"],
            Mutant::CapSlidesWithProgress => &["timeout-maximum", "timeout-deadline"],
            Mutant::FixedTimeoutIgnoresProgress => &["timeout-deadline"],
            Mutant::NoTimeout => &["timeout-deadline"],
            Mutant::ResetWithoutToken => &["reset-needs-token"],
            Mutant::TokenReuseCrosswire => &["progress-token-unique", "progress-token-reuse"],
            Mutant::RetryWithoutCancel => &["cancel-on-timeout"],
            Mutant::CancelBlockedByPendingPost => &["cancel-on-timeout"],
            Mutant::CancelPostedOverHttp => &["cancel-over-http"],
            Mutant::DiscoverWithoutTimeout => &["discover-timeout"],
            Mutant::TaskWithoutNegotiation => &["task-not-negotiated"],
            Mutant::TaskProgressAfterCreate => &["progress-after-completion"],
            Mutant::TaskTerminalChanges => &["task-work-after-cancelled"],
            Mutant::CancelAckIsTask => &["task-ack"],
            Mutant::UnknownTaskWorking => &["task-unknown"],
            Mutant::TaskCancelledOnDisconnect => &["task-cancelled-unasked"],
            Mutant::InputRequiredWithoutState => &["input-required-shape"],
            Mutant::ProgressAfterInputRequired => &["progress-after-completion"],
            Mutant::ListenUntagged => &["listen-tagged"],
            Mutant::ListenUnfiltered => &["listen-filter"],
            Mutant::ListenIgnoresCancel => &["response-after-cancel"],
            Mutant::AnswersNotifications => &["notification-answered"],
            Mutant::CapabilitiesRemembered => &["task-not-negotiated"],
            Mutant::ServesMismatchedHeaders => &["http-status"],
            Mutant::HeaderMismatchInvalidRequest => &["http-status"],
            Mutant::CancelTaskWithNotification => &["cancel-targets-task"],
            Mutant::TaskPollTooFast => &["task-poll-interval"],
            Mutant::RequestStateDropped => &["input-required-retry"],
            Mutant::RetryReusesToken => &["progress-token-reuse"],
            Mutant::SseCrlfChunkSplit => &["wire-integrity"],
            Mutant::LegacyCancelAnswered => &["response-after-cancel", "duplicate-response"],
            Mutant::CancelsInitialize => &["initialize-cancelled"],
            Mutant::LegacyDisconnectCancels => &["disconnect-taken-as-cancel"],
            Mutant::ReplayOtherStream => &["replay-other-stream"],
            Mutant::EventIdsPerStream => &["event-id-unique"],
            Mutant::ProgressOnGetStream => &["progress-on-get-stream"],
            Mutant::DropsResumable => &["resume-broken-stream"],
            Mutant::ResumesBeforeRetry => &["retry-honoured"],
            Mutant::NoSessionId => &["session-id-sent"],
            Mutant::LegacyIgnoresCancel => &["response-after-cancel", "work-after-cancel"],
            Mutant::PingUnanswered => &["ping-answered"],
            Mutant::LegacyTimeoutSilent => &["cancel-on-timeout"],
            Mutant::BridgeAnswersCancel => &["cancel-answered-locally"],
            Mutant::BridgeDropsCancel => &["cancel-forwarded"],
            Mutant::BridgeDropsProgress => &["progress-forwarded"],
            Mutant::BridgeCancelUnmapped => &["cancel-forwarded"],
            Mutant::BridgeForwardsLateResult => &["late-result-forwarded"],
            Mutant::BridgeRawProgressToken => &["progress-forwarded"],
            Mutant::BridgeIgnoresStreamClose => &["cancel-forwarded"],
            Mutant::BridgeCancelsEarly => &["request-id-mapping"],
        }
    }

    /// Faults of the peer that this mutant reacts to. They are applied to the reference run
    /// of the same seed as well.
    pub fn environment(self) -> MutantSet {
        match self {
            Mutant::AcceptNonIncreasingProgress => MutantSet::NONE.with(Mutant::FlatProgress),
            // A result after the cancel reached the upstream: an upstream that ignores it.
            Mutant::BridgeForwardsLateResult => MutantSet::NONE.with(Mutant::IgnoreCancel),
            _ => MutantSet::NONE,
        }
    }

    /// Whether the mutant shows only where HTTP headers exist: the turmoil lane (the in-memory
    /// lane moves messages, not POSTs).
    pub fn needs_headers(self) -> bool {
        matches!(
            self,
            Mutant::ServesMismatchedHeaders | Mutant::HeaderMismatchInvalidRequest
        )
    }

    /// Whether the mutant changes the reference intermediary, which stands on its own host in
    /// the turmoil lane only.
    pub fn needs_intermediary(self) -> bool {
        self.info().side == MutantSide::Intermediary
    }

    /// Whether the mutant can show only on the turmoil lane (headers, or the intermediary's
    /// host).
    pub fn turmoil_only(self) -> bool {
        self.needs_headers() || self.needs_intermediary()
    }

    /// Whether the mutant's bug lives in the shapes of long work (tasks, input rounds,
    /// subscriptions, §7); the others are hunted on the seed's plain tool calls
    /// ([`Scenario::calls_only`]).
    pub fn long_work(self) -> bool {
        matches!(
            self,
            Mutant::TaskWithoutNegotiation
                | Mutant::TaskProgressAfterCreate
                | Mutant::TaskTerminalChanges
                | Mutant::CancelAckIsTask
                | Mutant::UnknownTaskWorking
                | Mutant::TaskCancelledOnDisconnect
                | Mutant::InputRequiredWithoutState
                | Mutant::ProgressAfterInputRequired
                | Mutant::ListenUntagged
                | Mutant::ListenUnfiltered
                | Mutant::ListenIgnoresCancel
                | Mutant::CancelTaskWithNotification
                | Mutant::TaskPollTooFast
                | Mutant::RequestStateDropped
                | Mutant::RetryReusesToken
                | Mutant::CapabilitiesRemembered
        )
    }

    /// The conditions the mutant needs to show, applied to a seed's scenario.
    pub fn adapt(self, scenario: Scenario) -> Scenario {
        let s = match self {
            Mutant::HandlerSurvivesDisconnect
            | Mutant::WriteAfterClosePanics
            | Mutant::ProgressMisrouted
            | Mutant::CancelBlockedByPendingPost
            | Mutant::CancelPostedOverHttp
            | Mutant::SseCrlfChunkSplit => scenario.with_transport(Transport::Http),
            Mutant::NoKeepalive => {
                let mut s = scenario.with_transport(Transport::Http);
                s.proxy = Some(ProxyConfig::ALB);
                for c in &mut s.calls {
                    c.steps = c.steps.max(25);
                    c.step = c.step.max(Duration::from_secs(3));
                }
                s
            }
            Mutant::TaskWithoutNegotiation => scenario,
            // The legacy era's own bugs live in its peers (stdio).
            Mutant::LegacyCancelAnswered => scenario.in_era(crate::wire::Era::LEGACY),
            // A handshake that times out: from the first call on (the pipe is open by then),
            // the network holds everything for 40 s.
            Mutant::CancelsInitialize => {
                let mut s = scenario.in_era(crate::wire::Era::LEGACY);
                let first_call = s.calls.iter().map(|c| c.at).min().unwrap_or_default();
                s.faults = vec![crate::scenario::Fault::Partition {
                    at: first_call,
                    duration: Duration::from_secs(40),
                }];
                s
            }
            Mutant::LegacyTimeoutSilent => scenario.in_era(crate::wire::Era::LEGACY),
            // A client in auto mode before a legacy server that never answers its probe.
            Mutant::DiscoverWithoutTimeout => scenario
                .in_era(crate::wire::Era::LEGACY)
                .opening(crate::scenario::Opening::Auto { silent: true }),
            // Calls the application cancels while they report progress.
            Mutant::LegacyIgnoresCancel => {
                every_call(scenario.in_era(crate::wire::Era::LEGACY), |c| {
                    c.progress = true;
                    c.steps = c.steps.max(10);
                    c.cancel_after = Some(c.step * 3);
                })
            }
            // A quiet stretch long enough for the client's ping: calls with sparse progress.
            Mutant::PingUnanswered => {
                let mut s = scenario.in_era(crate::wire::Era::LEGACY);
                for c in &mut s.calls {
                    c.progress = false;
                    c.steps = c.steps.max(4);
                    c.step = c.step.max(Duration::from_secs(6));
                }
                s
            }
            // The legacy era's resumable streams: HTTP, event streams, and a reset in the
            // middle of the first call (the resume needs event ids it read before).
            Mutant::LegacyDisconnectCancels
            | Mutant::ReplayOtherStream
            | Mutant::EventIdsPerStream
            | Mutant::ProgressOnGetStream
            | Mutant::DropsResumable
            | Mutant::ResumesBeforeRetry
            | Mutant::NoSessionId => legacy_streams(scenario),
            Mutant::AnswersNotifications => scenario.with_transport(Transport::Stdio),
            // Through the reference intermediary: calls the application cancels while they
            // report progress (cancels), or that report progress to the end.
            Mutant::BridgeAnswersCancel
            | Mutant::BridgeDropsCancel
            | Mutant::BridgeCancelUnmapped
            | Mutant::BridgeForwardsLateResult => every_call(scenario.with_bridge(), |c| {
                c.progress = true;
                c.steps = c.steps.max(8);
                c.cancel_after = Some(c.step * 3);
            }),
            // Through the era bridge: calls the application cancels (a closed stream on its
            // 2026-07-28 front) while the legacy upstream still works.
            Mutant::BridgeIgnoresStreamClose => every_call(scenario.with_era_bridge(), |c| {
                c.progress = true;
                c.steps = c.steps.max(8);
                c.cancel_after = Some(c.step * 3);
            }),
            // Calls that report progress and that the application never cancels: the
            // upstream's cancel can only be the intermediary's own.
            Mutant::BridgeCancelsEarly => every_call(scenario.with_bridge(), |c| {
                c.progress = true;
                c.steps = c.steps.max(4);
                c.cancel_after = None;
            }),
            Mutant::BridgeDropsProgress | Mutant::BridgeRawProgressToken => {
                every_call(scenario.with_bridge(), |c| {
                    c.progress = true;
                    c.steps = c.steps.max(4);
                })
            }
            Mutant::ServesMismatchedHeaders | Mutant::HeaderMismatchInvalidRequest => {
                let mut s = scenario.with_transport(Transport::Http);
                s.proxy = Some(ProxyConfig {
                    strips_mcp_headers: Some(2),
                    ..ProxyConfig::ALB
                });
                s
            }
            Mutant::CapabilitiesRemembered => {
                let mut k = 0;
                every_call(scenario, |c| {
                    k += 1;
                    c.kind = CallKind::Tool {
                        task: k % 2 == 1,
                        input_rounds: 0,
                    };
                })
            }
            Mutant::TaskProgressAfterCreate | Mutant::TaskPollTooFast => {
                every_call(scenario, |c| {
                    c.kind = CallKind::Tool {
                        task: true,
                        input_rounds: 0,
                    };
                    c.progress = true;
                    c.steps = c.steps.max(5);
                })
            }
            Mutant::TaskTerminalChanges
            | Mutant::CancelAckIsTask
            | Mutant::CancelTaskWithNotification => every_call(scenario, |c| {
                c.kind = CallKind::Tool {
                    task: true,
                    input_rounds: 0,
                };
                c.steps = c.steps.max(10);
                c.cancel_after = Some(c.step * 3);
            }),
            Mutant::TaskCancelledOnDisconnect => {
                let s = scenario.with_transport(Transport::Http);
                let mut k = 0;
                every_call(s, |c| {
                    k += 1;
                    if k % 2 == 0 {
                        c.kind = CallKind::Tool {
                            task: true,
                            input_rounds: 0,
                        };
                        c.steps = c.steps.max(10);
                    } else {
                        c.kind = CallKind::TOOL;
                        c.cancel_after = Some(Duration::from_millis(500));
                    }
                })
            }
            Mutant::UnknownTaskWorking => {
                let mut s = scenario;
                if let Some(c) = s.calls.first_mut() {
                    c.kind = CallKind::StaleTask;
                    c.policy = crate::model::client::POLL_POLICY;
                }
                s
            }
            Mutant::InputRequiredWithoutState
            | Mutant::ProgressAfterInputRequired
            | Mutant::RequestStateDropped
            | Mutant::RetryReusesToken => every_call(scenario, |c| {
                c.kind = CallKind::Tool {
                    task: false,
                    input_rounds: 1,
                };
                c.progress = true;
            }),
            Mutant::ListenUntagged | Mutant::ListenUnfiltered | Mutant::ListenIgnoresCancel => {
                let mut s = scenario;
                if self == Mutant::ListenIgnoresCancel {
                    s = s.with_transport(Transport::Stdio);
                }
                if let Some(c) = s.calls.first_mut() {
                    c.kind = CallKind::Listen {
                        tools_changed: self != Mutant::ListenUnfiltered,
                    };
                    c.progress = false;
                    c.policy = crate::model::TimeoutPolicy::none();
                    c.cancel_after = Some(Duration::from_secs(50));
                }
                s
            }
            _ => scenario,
        };
        let mut s = s;
        if self == Mutant::SseCrlfChunkSplit {
            s.server.sse_style = crate::model::SseStyle::PrettyCrlfSplit;
        }
        s
    }
}

/// A seed's scenario for the legacy era's HTTP streams: event streams with progress, the
/// calls long enough to overlap, and the first call's stream reset after a few steps.
fn legacy_streams(scenario: Scenario) -> Scenario {
    let mut s = scenario
        .in_era(crate::wire::Era::LEGACY)
        .with_transport(Transport::Http);
    s.server.response_mode = crate::model::ResponseMode::Sse;
    for c in &mut s.calls {
        c.progress = true;
        c.steps = c.steps.max(8);
        c.cancel_after = None;
    }
    if let Some(first) = s.calls.first() {
        let at = first.at + first.step * 3 + Duration::from_millis(500);
        s.faults = vec![crate::scenario::Fault::ResetStream { at, call: 0 }];
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

/// How a mutant was found out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    /// The first seed whose run the oracle flagged.
    pub seed: u64,
    /// Seeds run until then, that one included.
    pub seeds_run: u64,
    /// Rules the mutant's run broke and the reference's run of the same seed did not; one
    /// of them at least is among [`Mutant::expected_rules`].
    pub rules: Vec<&'static str>,
}

/// The result of hunting one mutant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunt {
    /// The mutant.
    pub mutant: Mutant,
    /// How it was found out, if it was.
    pub kill: Option<Kill>,
    /// Seeds on which the unmutated reference broke a MUST rule, with the rules.
    pub reference_failures: Vec<(u64, Vec<&'static str>)>,
    /// Seeds before the kill on which only rules the mutant is not expected to break told
    /// its run from the reference's, with those rules: flagged, but not for its own bug.
    pub off_target: Vec<(u64, Vec<&'static str>)>,
}

/// The scenario a mutant hunt runs for `seed`: the seed's scenario adapted to the mutant,
/// with `mutants` switched on.
pub fn hunt_scenario(m: Mutant, seed: u64, mutants: MutantSet) -> Scenario {
    let base = if m.long_work() {
        Scenario::from_seed(seed)
    } else {
        Scenario::calls_only(seed)
    };
    let mut s = m.adapt(base);
    s.mutants = mutants;
    s
}

/// Runs seeds from `seeds` until the oracle flags the mutant by one of its
/// [expected rules](Mutant::expected_rules), comparing each run with the reference's run of
/// the same seed (under the mutant's environment): the mutant is killed by rules only its run
/// breaks, one of them expected; a seed flagged by other rules alone is kept in
/// [`Hunt::off_target`] and the hunt goes on. Also checks that the unmutated reference is
/// clean on every seed run.
pub fn hunt(m: Mutant, seeds: std::ops::Range<u64>, lane: crate::lanes::Lane) -> Hunt {
    use crate::run::judge;
    let env = m.environment();
    let mut reference_failures = Vec::new();
    let mut off_target = Vec::new();
    let expected = m.expected_rules();
    for (n, seed) in seeds.enumerate() {
        let baseline = judge(&hunt_scenario(m, seed, env), lane);
        let pure = if env.is_empty() {
            baseline.clone()
        } else {
            judge(&hunt_scenario(m, seed, MutantSet::NONE), lane)
        };
        if pure.fails() {
            reference_failures.push((seed, pure.rules()));
        }
        let mutated = judge(&hunt_scenario(m, seed, env.with(m)), lane);
        let known = baseline.rules();
        let rules: Vec<&'static str> = mutated
            .rules()
            .into_iter()
            .filter(|r| !known.contains(r))
            .collect();
        if !rules.is_empty() && !rules.iter().any(|r| expected.contains(r)) {
            off_target.push((seed, rules));
            continue;
        }
        if !rules.is_empty() {
            let kill = Kill {
                seed,
                seeds_run: n as u64 + 1,
                rules,
            };
            return Hunt {
                mutant: m,
                kill: Some(kill),
                reference_failures,
                off_target,
            };
        }
    }
    Hunt {
        mutant: m,
        kill: None,
        reference_failures,
        off_target,
    }
}
