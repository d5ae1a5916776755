//! The mutation score: every mutant (a real SDK bug) is caught by the oracle within its seed
//! budget, and the unmutated reference is clean on the same seeds.

use mcp_sim::lanes::Lane;
use mcp_sim::mutants::{self, Mutant};

/// Seeds each mutant may take on the in-memory lane before it counts as surviving.
const BUDGET: u64 = 100;

#[test]
fn every_mutant_is_killed_and_the_reference_is_clean() {
    let mut problems = Vec::new();
    for &m in mutants::ALL.iter().filter(|m| !m.turmoil_only()) {
        let hunt = mutants::hunt(m, 0..BUDGET, Lane::Memory);
        match &hunt.kill {
            None => problems.push(format!(
                "{m} ({}) survived {BUDGET} seeds; off target: {:?}",
                m.info().bug,
                hunt.off_target
            )),
            Some(kill) => {
                if let Some(problem) = off_target_kill(m, &kill.rules) {
                    problems.push(problem);
                }
            }
        }
        for (seed, rules) in &hunt.reference_failures {
            problems.push(format!(
                "the reference fails seed {seed} while hunting {m}: {rules:?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A kill must come from a rule the catalog names for the mutant
/// ([`Mutant::expected_rules`]), not only from a host policy, a liveness check or a
/// neighbouring rule.
fn off_target_kill(m: Mutant, rules: &[&str]) -> Option<String> {
    let expected = m.expected_rules();
    (!rules.iter().any(|r| expected.contains(r)))
        .then(|| format!("{m} was killed by {rules:?}, none of its expected {expected:?}"))
}

#[test]
fn every_mutant_names_rules_of_the_catalog_as_the_ones_expected_to_catch_it() {
    for m in mutants::ALL {
        let expected = m.expected_rules();
        assert!(
            !expected.is_empty(),
            "{m} names no rule expected to catch it"
        );
        for r in expected {
            assert!(
                mcp_sim::oracle::rule_info(r).is_some() || *r == mcp_sim::run::CRASH,
                "{m} expects {r:?}, which is no rule of the catalog"
            );
        }
    }
}

#[test]
fn a_kill_by_a_rule_the_mutant_does_not_name_does_not_count() {
    // respond_after_cancel answers a cancelled request; on HTTP its first seed is flagged by
    // disconnect-is-cancel (its answer follows the closed stream), which is not its bug: the
    // hunt goes on to the seed where response-after-cancel catches it.
    let hunt = mutants::hunt(Mutant::RespondAfterCancel, 0..BUDGET, Lane::Memory);
    let kill = hunt.kill.expect("killed");
    assert!(kill.rules.contains(&"response-after-cancel"), "{kill:?}");
    assert!(
        hunt.off_target
            .iter()
            .any(|(_, rules)| rules.contains(&"disconnect-is-cancel")),
        "the off-target seed is kept: {:?}",
        hunt.off_target
    );
    assert!(kill.seed > hunt.off_target[0].0);
    assert!(off_target_kill(Mutant::RespondAfterCancel, &["disconnect-is-cancel"]).is_some());
}

#[test]
fn the_catalog_has_at_least_twenty_distinct_mutants_with_sources() {
    assert!(mutants::ALL.len() >= 20);
    let mut names: Vec<&str> = mutants::ALL.iter().map(|m| m.info().name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), mutants::ALL.len(), "mutant names are unique");
    for m in mutants::ALL {
        // An issue or pull request where one exists; otherwise the rule it breaks, named as
        // spec-derived.
        let bug = m.info().bug;
        assert!(
            bug.contains('#') || bug.contains("spec-derived: docs/spec/"),
            "{m} names its issue or pull request, or the spec it is derived from"
        );
        assert_eq!(Mutant::from_name(m.info().name), Some(*m));
    }
}

/// The same hunt through turmoil's sockets, hyper and proxies for mutants whose fault lives
/// in the transport: the HTTP disconnect, the SSE framer, the proxy's idle timer, and the
/// headers of a POST (which only this lane has; a gateway strips them).
#[test]
fn transport_mutants_are_killed_on_turmoil_too() {
    let transport_mutants = [
        Mutant::HandlerSurvivesDisconnect,
        Mutant::SseCrlfChunkSplit,
        Mutant::NoKeepalive,
        Mutant::CancelBlockedByPendingPost,
        Mutant::WriteAfterClosePanics,
        Mutant::ServesMismatchedHeaders,
        Mutant::HeaderMismatchInvalidRequest,
    ];
    for m in transport_mutants {
        let hunt = mutants::hunt(m, 0..20, Lane::turmoil());
        let kill = hunt
            .kill
            .as_ref()
            .unwrap_or_else(|| panic!("{m} survived 20 seeds on turmoil"));
        assert_eq!(off_target_kill(m, &kill.rules), None);
        assert!(
            hunt.reference_failures.is_empty(),
            "{:?}",
            hunt.reference_failures
        );
    }
}

/// The intermediary's mutants, through the reference bridge between client and server (two
/// hops): each is killed by a rule only its run breaks, and the reference bridge is clean.
#[test]
fn intermediary_mutants_are_killed_through_the_bridge() {
    let bridge: Vec<Mutant> = mutants::ALL
        .iter()
        .copied()
        .filter(|m| m.needs_intermediary())
        .collect();
    assert!(bridge.len() >= 5, "{bridge:?}");
    for m in bridge {
        let hunt = mutants::hunt(m, 0..20, Lane::turmoil());
        let kill = hunt
            .kill
            .unwrap_or_else(|| panic!("{m} survived 20 seeds on turmoil"));
        assert_eq!(off_target_kill(m, &kill.rules), None);
        assert!(
            kill.rules.iter().any(|r| mcp_sim::oracle::rule_info(r)
                .is_some_and(|i| i.spans_hops())
                || *r == mcp_sim::oracle::rule::PROGRESS_UNKNOWN_TOKEN),
            "{m} was killed by {:?}, none of them about the intermediary",
            kill.rules
        );
        assert!(
            hunt.reference_failures.is_empty(),
            "{:?}",
            hunt.reference_failures
        );
    }
}
