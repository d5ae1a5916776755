//! The mutant catalog: real SDK bugs as switchable faults of the reference peers.
//!
//! Each [`Mutant`] reproduces one documented bug (`docs/mutants.md`; repository and issue in
//! [`MutantInfo::bug`]) as a small deviation of the reference client, server or SSE framer.
//! A mutant is *killed* when the oracle flags a run of it that the reference passes: the
//! mutation score is the share of mutants killed, and a survivor means the oracle lacks a
//! rule. [`Mutant::adapt`] gives each mutant the conditions it needs to show (a transport, a
//! proxy, an SSE style), and [`Mutant::environment`] the peer faults it reacts to, which the
//! reference is judged under too, so that only the mutant's own behaviour can make the
//! difference. Every such fact is a required field of the mutant's one entry in the catalog
//! table (`src/model/mutant.rs`); the methods here read it, and [`Conditions::apply`] turns
//! the conditions an entry names into changes to a scenario.

pub use crate::model::mutant::{Conditions, Mutant, MutantInfo, MutantSet, MutantSide, ALL};
use crate::scenario::Scenario;

mod conditions;

impl Mutant {
    /// The rules expected to catch this mutant: those its bug breaks by definition. A hunt
    /// counts a kill only when one of them fires, so a mutant first flagged by a rule it was
    /// not written for (a host policy, a liveness check, a neighbouring rule) is hunted on
    /// until its own rule catches it ([`hunt`]). `crash` is the sweep's verdict on a panicked
    /// peer ([`crate::run::CRASH`]), the bug of the mutants that crash the server.
    pub fn expected_rules(self) -> &'static [&'static str] {
        self.info().expected_rules
    }

    /// Faults of the peer that this mutant reacts to. They are applied to the reference run
    /// of the same seed as well.
    pub fn environment(self) -> MutantSet {
        self.info().environment
    }

    /// Whether the mutant shows only where HTTP headers exist: the turmoil lane (the in-memory
    /// lane moves messages, not POSTs).
    pub fn needs_headers(self) -> bool {
        self.info().needs_headers
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
        self.info().long_work
    }

    /// The conditions the mutant needs to show, applied to a seed's scenario.
    pub fn adapt(self, scenario: Scenario) -> Scenario {
        self.info().conditions.apply(scenario)
    }
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
