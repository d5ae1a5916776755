//! Client timeout policies (docs/spec/mcp-2026-07-28.md §4) and presets of real hosts (docs/spec/intermediaries.md §2).
//!
//! A policy is `{timeout, reset_timeout_on_progress, max_total_timeout}`, the option names of
//! the TypeScript SDK and rmcp. The request's idle deadline is `timeout` after it was sent, or
//! after the last valid progress when resetting is on; the hard deadline is `max_total_timeout`
//! after it was sent, whatever progress arrives. "Valid" progress is progress the client
//! accepts: the request's own token, strictly increasing (docs/spec/mcp-2026-07-28.md §9 rule 36).

use std::time::Duration;

use crate::time::Time;

use super::Transport;

/// When a client gives up on a request (in files `{timeout_ms, reset_on_progress,
/// max_total_ms}`, `null` for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutPolicy {
    /// Time without a response (and, with resetting, without valid progress) before the
    /// client cancels. `None` means no timeout at all, which the spec advises against.
    #[serde(rename = "timeout_ms", default, with = "crate::time::ms::option")]
    pub timeout: Option<Duration>,
    /// Restart the idle clock on each valid progress notification (a MAY in §4).
    #[serde(rename = "reset_on_progress")]
    pub reset_timeout_on_progress: bool,
    /// The hard ceiling from the send, whatever progress arrives (a SHOULD in §4).
    #[serde(rename = "max_total_ms", default, with = "crate::time::ms::option")]
    pub max_total_timeout: Option<Duration>,
}

/// Why a client timed a request out.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutReason {
    /// The idle timeout: no response (nor valid progress, when resetting) for `timeout`.
    Idle,
    /// The hard maximum `max_total_timeout` since the request was sent.
    Maximum,
    /// A `subscriptions/listen` was not acknowledged in time (§9 D39: a listen is exempt from
    /// the response deadline but not from this one).
    Ack,
}

impl TimeoutReason {
    /// `idle` or `maximum`, as in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutReason::Idle => "idle",
            TimeoutReason::Maximum => "maximum",
            TimeoutReason::Ack => "ack",
        }
    }
}

impl TimeoutPolicy {
    /// No deadline at all (the policy of a `subscriptions/listen`, which waits for its
    /// acknowledgement only).
    pub const fn none() -> Self {
        TimeoutPolicy {
            timeout: None,
            reset_timeout_on_progress: false,
            max_total_timeout: None,
        }
    }

    /// A fixed timeout that progress does not extend.
    pub fn fixed(timeout: Duration) -> Self {
        TimeoutPolicy {
            timeout: Some(timeout),
            reset_timeout_on_progress: false,
            max_total_timeout: None,
        }
    }

    /// A timeout that progress resets, under a hard maximum.
    pub fn resetting(timeout: Duration, max_total: Duration) -> Self {
        TimeoutPolicy {
            timeout: Some(timeout),
            reset_timeout_on_progress: true,
            max_total_timeout: Some(max_total),
        }
    }

    /// MCP Inspector v1: 10 s, reset on progress, 60 s maximum.
    pub fn inspector_v1() -> Self {
        Self::resetting(Duration::from_secs(10), Duration::from_secs(60))
    }

    /// TypeScript SDK default: 60 s, not reset by progress.
    pub fn typescript_sdk() -> Self {
        Self::fixed(Duration::from_secs(60))
    }

    /// A host with an idle timeout that progress resets (5 minutes over HTTP, 30 over stdio)
    /// under a per-server wall-clock tool timeout that progress does not extend.
    pub fn host_idle(transport: Transport, wall_clock: Duration) -> Self {
        let idle = match transport {
            Transport::Http => Duration::from_secs(5 * 60),
            Transport::Stdio => Duration::from_secs(30 * 60),
        };
        Self::resetting(idle, wall_clock)
    }

    /// Parses a declared policy: a preset or `timeout=MS`, then settings that override it,
    /// comma-separated: `timeout=MS`, `reset`, `noreset`, `max=MS`, `nomax`.
    ///
    /// Presets: `none` (no timeout); `inspector` (10 s, reset, 60 s maximum); `typescript-sdk`
    /// (60 s, not reset, no maximum); `python-sdk` (no timeout: `read_timeout_seconds` is
    /// unset by default); `claude-code-stdio` and `claude-code-http` (an idle timeout of 30
    /// and 5 minutes that progress resets; the per-server wall-clock tool timeout has no
    /// documented default, so add it with `max=MS`).
    pub fn from_spec(spec: &str) -> Result<TimeoutPolicy, String> {
        let none = TimeoutPolicy {
            timeout: None,
            reset_timeout_on_progress: false,
            max_total_timeout: None,
        };
        let ms = |key: &str, v: &str| {
            v.parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .map(Duration::from_millis)
                .ok_or_else(|| format!("{key}= needs a positive number of ms, not {v:?}"))
        };
        let mut policy = none;
        for (k, part) in spec.split(',').map(str::trim).enumerate() {
            let preset = |p: TimeoutPolicy| if k == 0 { Ok(p) } else { Err(()) };
            let next = match part.split_once('=') {
                Some(("timeout", v)) => TimeoutPolicy {
                    timeout: Some(ms("timeout", v)?),
                    ..policy
                },
                Some(("max", v)) => TimeoutPolicy {
                    max_total_timeout: Some(ms("max", v)?),
                    ..policy
                },
                Some((key, _)) => return Err(format!("unknown setting {key:?} in {spec:?}")),
                None => match part {
                    "reset" => TimeoutPolicy {
                        reset_timeout_on_progress: true,
                        ..policy
                    },
                    "noreset" => TimeoutPolicy {
                        reset_timeout_on_progress: false,
                        ..policy
                    },
                    "nomax" => TimeoutPolicy {
                        max_total_timeout: None,
                        ..policy
                    },
                    name => {
                        let p = match name {
                            "none" | "python-sdk" => none,
                            "inspector" => Self::inspector_v1(),
                            "typescript-sdk" => Self::typescript_sdk(),
                            "claude-code-stdio" | "claude-code-http" => TimeoutPolicy {
                                timeout: Some(Duration::from_secs(if name.ends_with("stdio") {
                                    30 * 60
                                } else {
                                    5 * 60
                                })),
                                reset_timeout_on_progress: true,
                                max_total_timeout: None,
                            },
                            _ => return Err(format!(
                                "unknown policy {name:?}: a preset (none, inspector, typescript-sdk, python-sdk, claude-code-stdio, claude-code-http) or timeout=MS[,reset][,max=MS]"
                            )),
                        };
                        preset(p).map_err(|()| format!("a preset comes first in {spec:?}"))?
                    }
                },
            };
            policy = next;
        }
        if policy.reset_timeout_on_progress && policy.timeout.is_none() {
            return Err(format!("{spec:?}: reset needs a timeout"));
        }
        Ok(policy)
    }

    /// The longest a request can stay open under this policy, if bounded.
    pub fn hard_bound(&self) -> Option<Duration> {
        match (
            self.timeout,
            self.reset_timeout_on_progress,
            self.max_total_timeout,
        ) {
            (_, _, Some(max)) => Some(
                self.timeout
                    .filter(|_| !self.reset_timeout_on_progress)
                    .map_or(max, |t| t.min(max)),
            ),
            (Some(t), false, None) => Some(t),
            _ => None,
        }
    }

    /// The deadline of a request sent at `sent` whose last valid progress arrived at
    /// `last_progress`, with the reason it would fire for.
    pub fn deadline(
        &self,
        sent: Time,
        last_progress: Option<Time>,
    ) -> Option<(Time, TimeoutReason)> {
        let idle_from = match (self.reset_timeout_on_progress, last_progress) {
            (true, Some(p)) => p.max(sent),
            _ => sent,
        };
        let idle = self.timeout.map(|t| (idle_from + t, TimeoutReason::Idle));
        let max = self
            .max_total_timeout
            .map(|m| (sent + m, TimeoutReason::Maximum));
        match (idle, max) {
            (Some(i), Some(m)) => Some(if m.0 <= i.0 { m } else { i }),
            (i, m) => i.or(m),
        }
    }
}

#[cfg(test)]
mod spec_tests {
    use super::*;

    #[test]
    fn specs_and_presets() {
        let p = TimeoutPolicy::from_spec("timeout=1000,reset,max=2000").unwrap();
        assert_eq!(
            p,
            TimeoutPolicy::resetting(Duration::from_secs(1), Duration::from_secs(2))
        );
        assert_eq!(
            TimeoutPolicy::from_spec("typescript-sdk").unwrap(),
            TimeoutPolicy::typescript_sdk()
        );
        let cc = TimeoutPolicy::from_spec("claude-code-stdio,max=600000").unwrap();
        assert_eq!(cc.timeout, Some(Duration::from_secs(1800)));
        assert!(cc.reset_timeout_on_progress);
        assert_eq!(cc.max_total_timeout, Some(Duration::from_secs(600)));
        assert_eq!(
            TimeoutPolicy::from_spec("python-sdk").unwrap().timeout,
            None
        );
        for bad in [
            "timeout=0",
            "reset",
            "bogus",
            "timeout=5,inspector",
            "max=x",
            "speed=3",
        ] {
            assert!(TimeoutPolicy::from_spec(bad).is_err(), "{bad}");
        }
    }
}

/// The timeout policies a black-box client declares, per method: `serve --client-policy` and
/// `check-trace --client-policy`. The TypeScript SDKs take timeout options per call (a host
/// times its `tools/call` and lists its tools with the defaults), so one policy for every
/// request would judge requests the declaration never meant.
///
/// Written `[METHOD:]POLICY[;[METHOD:]POLICY...]`: `METHOD` is a method or a prefix of one
/// (`tools/call`, `tools/`), `POLICY` as [`TimeoutPolicy::from_spec`]; a policy without a
/// method covers every request no other entry covers. A request's policy is that of the
/// longest prefix that matches its method; a request no entry covers has none, and the rules
/// of a declared policy (`declared-deadline`, `reset-needs-token`) do not judge it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientPolicies {
    /// `(method prefix, policy)`, the prefix empty for the catch-all.
    entries: Vec<(String, TimeoutPolicy)>,
}

impl ClientPolicies {
    /// One policy for every request.
    pub fn every_request(policy: TimeoutPolicy) -> Self {
        ClientPolicies {
            entries: vec![(String::new(), policy)],
        }
    }

    /// Parses `[METHOD:]POLICY[;...]` (see the type's docs); an error names the part at fault.
    pub fn from_spec(spec: &str) -> Result<ClientPolicies, String> {
        let mut entries: Vec<(String, TimeoutPolicy)> = Vec::new();
        for part in spec.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            // A method has a `/`; a policy's own settings never do.
            let (method, policy) = match part.split_once(':') {
                Some((m, p)) if m.contains('/') => (m.trim(), p.trim()),
                _ => ("", part),
            };
            if method.chars().any(char::is_whitespace) {
                return Err(format!("{method:?} is not a method in {spec:?}"));
            }
            if entries.iter().any(|(m, _)| m == method) {
                let who = if method.is_empty() {
                    "every request"
                } else {
                    method
                };
                return Err(format!("{who} has two policies in {spec:?}"));
            }
            entries.push((method.to_owned(), TimeoutPolicy::from_spec(policy)?));
        }
        if entries.is_empty() {
            return Err("an empty policy: give a preset or timeout=MS".into());
        }
        Ok(ClientPolicies { entries })
    }

    /// The policy covering a request of `method`, if one does.
    pub fn for_method(&self, method: &str) -> Option<TimeoutPolicy> {
        self.entries
            .iter()
            .filter(|(prefix, _)| method.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, p)| *p)
    }

    /// Every entry: its method prefix (`None`: every other request) and policy.
    pub fn entries(&self) -> impl Iterator<Item = (Option<&str>, TimeoutPolicy)> {
        self.entries
            .iter()
            .map(|(m, p)| ((!m.is_empty()).then_some(m.as_str()), *p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_per_method_covers_only_its_methods() {
        let p = ClientPolicies::from_spec("tools/call:timeout=1000,reset").unwrap();
        let call = p.for_method("tools/call").unwrap();
        assert_eq!(call.timeout, Some(Duration::from_millis(1000)));
        assert!(call.reset_timeout_on_progress);
        assert_eq!(p.for_method("tools/list"), None);
        let q =
            ClientPolicies::from_spec("tools/:timeout=5000; tools/call:inspector; none").unwrap();
        assert_eq!(
            q.for_method("tools/call"),
            Some(TimeoutPolicy::inspector_v1())
        );
        assert_eq!(
            q.for_method("tools/list").unwrap().timeout,
            Some(Duration::from_secs(5))
        );
        assert_eq!(q.for_method("ping"), Some(TimeoutPolicy::none()));
        let bare = ClientPolicies::from_spec("timeout=1000,reset").unwrap();
        assert!(
            bare.for_method("anything").is_some(),
            "a bare policy covers every request"
        );
    }

    #[test]
    fn a_bad_per_method_policy_is_refused_naming_the_part() {
        for (spec, says) in [
            ("tools/call:timeout=x", "timeout="),
            ("tools/call:none;tools/call:inspector", "two policies"),
            ("", "empty"),
            ("tools/call:reset", "reset needs a timeout"),
        ] {
            let e = ClientPolicies::from_spec(spec).unwrap_err();
            assert!(e.contains(says), "{spec:?}: {e}");
        }
    }
}
