//! The reproduction contract: which run a seed names, and the two lines that run it again.
//!
//! A failing run is reproduced from six knobs: the seed, the transport (or the seed's own),
//! the lane with its tick, the intermediary (or the seed's own), the mutant and the era. [`Repro`] holds
//! them; it builds the run's [`Scenario`] the way every sweep, replay, mutant hunt and check
//! does, and prints the two lines that rerun it with every knob the run used:
//!
//! - [`Repro::replay_line`]: `mcp-sim replay --seed N ...` from a clone;
//! - [`Repro::test_line`]: `MCP_SIM_SEED=N ... cargo test --test turmoil_sim replay_one_seed`,
//!   the same run from the crate's own tests.
//!
//! The environment half of the contract is read by [`ReproEnv::read`], strictly: a variable
//! that is set but does not parse is an error naming the variable and its value, never a
//! silent default (a mistyped replay line must not pass by running another seed).
//!
//! | variable | value |
//! | --- | --- |
//! | `MCP_SIM_SEED` | a seed, decimal `u64` |
//! | `MCP_SIM_TRANSPORT` | `stdio` or `http` |
//! | `MCP_SIM_TICK_MS` | turmoil's tick in ms, at least 1 (default 10; turmoil lane only) |
//! | `MCP_SIM_PROXY` | `nginx`, `alb`, `cloudflare`, `custom:SECONDS`, `custom:MSms` or `none` |
//! | `MCP_SIM_MUTANT` | a mutant's name (`mcp-sim mutants --list`) |
//! | `MCP_SIM_ERA` | `modern` (default), `legacy` or a legacy revision (`2025-06-18`) |

use std::fmt;
use std::time::Duration;

use crate::lanes::Lane;
use crate::model::{Mutant, Transport};
use crate::mutants;
use crate::run::{self, Judged};
use crate::scenario::{ProxyChoice, Scenario};
use crate::wire::Era;

/// The variable naming the seed.
pub const SEED_VAR: &str = "MCP_SIM_SEED";
/// The variable naming the transport.
pub const TRANSPORT_VAR: &str = "MCP_SIM_TRANSPORT";
/// The variable naming turmoil's tick in milliseconds.
pub const TICK_VAR: &str = "MCP_SIM_TICK_MS";
/// The variable naming the intermediary.
pub const PROXY_VAR: &str = "MCP_SIM_PROXY";
/// The variable naming the mutant.
pub const MUTANT_VAR: &str = "MCP_SIM_MUTANT";
/// The variable naming the era.
pub const ERA_VAR: &str = "MCP_SIM_ERA";

/// The variable naming a scenario file (`mcp-sim fit`'s output) to run instead of a seed.
pub const SCENARIO_VAR: &str = "MCP_SIM_SCENARIO";
/// The variable naming the perturbation seed of a scenario file's neighbour.
pub const PERTURB_VAR: &str = "MCP_SIM_PERTURB_SEED";
/// With [`SCENARIO_VAR`]: a behaviour of the peer assumed on top of the file's (a mutant's
/// name), as `sweep --around --hypotheses` names them.
pub const HYPOTHESIS_VAR: &str = "MCP_SIM_HYPOTHESIS";

/// turmoil's default tick, which the lines leave out.
pub const DEFAULT_TICK: Duration = Duration::from_millis(10);

/// One run, named by every knob that decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repro {
    /// The seed.
    pub seed: u64,
    /// The transport, or `None` for the one the seed draws.
    pub transport: Option<Transport>,
    /// The lane, with turmoil's tick.
    pub lane: Lane,
    /// The intermediary on HTTP.
    pub proxy: ProxyChoice,
    /// A mutant instead of the reference peers.
    pub mutant: Option<Mutant>,
    /// The era the client speaks: the seed's ([`Scenario::drawn_era`]; a mutant's, its own)
    /// or the one imposed ([`Scenario::in_era`]).
    pub era: EraChoice,
}

/// Which era a run's client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum EraChoice {
    /// The one the seed draws ([`Scenario::drawn_era`]); a mutant keeps the era its hunt
    /// gives it.
    #[default]
    FromSeed,
    /// This era, whatever the seed.
    Fixed(Era),
}

impl std::str::FromStr for EraChoice {
    type Err = crate::wire::UnknownEra;

    /// `seed`, or an era as [`Era`] reads it (`modern`, `legacy`, a revision's date).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "seed" => Ok(EraChoice::FromSeed),
            other => other.parse().map(EraChoice::Fixed),
        }
    }
}

impl fmt::Display for EraChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EraChoice::FromSeed => f.write_str("seed"),
            EraChoice::Fixed(era) => f.write_str(era.version()),
        }
    }
}

impl Repro {
    /// The reference peers on `seed` as drawn, on `lane`.
    pub fn seed(seed: u64, lane: Lane) -> Repro {
        Repro {
            seed,
            transport: None,
            lane,
            proxy: ProxyChoice::FromSeed,
            mutant: None,
            era: EraChoice::FromSeed,
        }
    }

    /// The scenario this run plays: the seed's (for a mutant, adapted to it as its hunt adapts
    /// it, [`mutants::hunt_scenario`]), with the transport and intermediary imposed.
    pub fn scenario(&self) -> Scenario {
        let mut s = match self.mutant {
            Some(m) => mutants::hunt_scenario(m, self.seed, m.environment().with(m)),
            None => Scenario::from_seed(self.seed),
        };
        if let Some(t) = self.transport {
            s = s.with_transport(t);
        }
        let s = self.proxy.apply(s);
        // The era bridge speaks 2026-07-28 on its front and 2025-11-25 upstream, whatever era.
        if s.through_era_bridge() {
            return s;
        }
        // The modern era is the scenarios' own; a mutant brings its own era.
        let era = match (self.era, self.mutant) {
            (EraChoice::Fixed(era), _) => era,
            (EraChoice::FromSeed, Some(_)) => return s,
            (EraChoice::FromSeed, None) => Scenario::drawn_era(self.seed),
        };
        match era {
            Era::Modern => s,
            era => s.in_era(era),
        }
    }

    /// Runs and judges it.
    pub fn judge(&self) -> Judged {
        run::judge(&self.scenario(), self.lane)
    }

    /// turmoil's tick when it is not the default.
    fn tick_ms(&self) -> Option<u128> {
        match self.lane {
            #[cfg(feature = "turmoil")]
            Lane::Turmoil { tick } if tick != DEFAULT_TICK => Some(tick.as_millis()),
            _ => None,
        }
    }

    /// Every knob but the seed that is not the default, as its command-line flag, its
    /// variable and its value, in the order both lines give them.
    fn knobs(&self) -> Vec<(&'static str, &'static str, String)> {
        let mut out = Vec::new();
        if let Some(ms) = self.tick_ms() {
            out.push(("--tick-ms", TICK_VAR, ms.to_string()));
        }
        if let Some(t) = self.transport {
            out.push(("--transport", TRANSPORT_VAR, t.to_string()));
        }
        if self.proxy != ProxyChoice::FromSeed {
            out.push(("--proxy", PROXY_VAR, self.proxy.to_string()));
        }
        if let Some(m) = self.mutant {
            out.push(("--mutant", MUTANT_VAR, m.to_string()));
        }
        if let EraChoice::Fixed(era) = self.era {
            out.push(("--era", ERA_VAR, era.version().to_string()));
        }
        out
    }

    /// The `mcp-sim replay` command that reruns it, from a clone.
    pub fn replay_line(&self) -> String {
        let mut line = format!(
            "cargo run --release -p mcp-sim-cli -- replay --seed {}",
            self.seed
        );
        if self.lane == Lane::Memory {
            line.push_str(" --lane memory");
        }
        for (flag, _, value) in self.knobs() {
            line.push_str(&format!(" {flag} {value}"));
        }
        line
    }

    /// The environment that names it to [`ReproEnv::read`]: `MCP_SIM_SEED=N` and every other
    /// knob that is not the default.
    pub fn env_assignments(&self) -> String {
        let mut out = format!("{SEED_VAR}={}", self.seed);
        for (_, var, value) in self.knobs() {
            out.push_str(&format!(" {var}={value}"));
        }
        out
    }

    /// The `cargo test` command that reruns it from a clone: the `replay_one_seed` test of the
    /// lane's test file (`turmoil_sim` or `simulation`), with [`Repro::env_assignments`].
    pub fn test_line(&self) -> String {
        let test = match self.lane {
            Lane::Memory => "simulation",
            #[cfg(feature = "turmoil")]
            Lane::Turmoil { .. } => "turmoil_sim",
        };
        format!(
            "{} cargo test --test {test} replay_one_seed -- --nocapture",
            self.env_assignments()
        )
    }
}

/// What the environment says of a run to reproduce; each field `None` when its variable is
/// not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReproEnv {
    /// `MCP_SIM_SEED`.
    pub seed: Option<u64>,
    /// `MCP_SIM_TRANSPORT`.
    pub transport: Option<Transport>,
    /// `MCP_SIM_TICK_MS`.
    pub tick: Option<Duration>,
    /// `MCP_SIM_PROXY`.
    pub proxy: Option<ProxyChoice>,
    /// `MCP_SIM_MUTANT`.
    pub mutant: Option<Mutant>,
    /// `MCP_SIM_ERA`.
    pub era: Option<EraChoice>,
}

impl ReproEnv {
    /// Reads the process environment.
    pub fn read() -> Result<ReproEnv, ReproError> {
        Self::read_from(|name| match std::env::var(name) {
            Ok(v) => Ok(Some(v)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(ReproError {
                var: name,
                value: "(not UTF-8)".into(),
                expected: "UTF-8 text",
            }),
        })
    }

    /// Reads the variables through `get` (the environment, or a table in a test).
    pub fn read_from(
        get: impl Fn(&'static str) -> Result<Option<String>, ReproError>,
    ) -> Result<ReproEnv, ReproError> {
        fn parse<T>(
            get: &impl Fn(&'static str) -> Result<Option<String>, ReproError>,
            var: &'static str,
            expected: &'static str,
            f: impl Fn(&str) -> Option<T>,
        ) -> Result<Option<T>, ReproError> {
            match get(var)? {
                None => Ok(None),
                Some(value) => match f(value.trim()) {
                    Some(v) => Ok(Some(v)),
                    None => Err(ReproError {
                        var,
                        value,
                        expected,
                    }),
                },
            }
        }
        Ok(ReproEnv {
            seed: parse(&get, SEED_VAR, "a seed (a decimal u64)", |v| v.parse().ok())?,
            transport: parse(&get, TRANSPORT_VAR, "stdio or http", |v| match v {
                "stdio" => Some(Transport::Stdio),
                "http" => Some(Transport::Http),
                _ => None,
            })?,
            tick: parse(&get, TICK_VAR, "a tick in ms, at least 1", |v| {
                v.parse::<u64>()
                    .ok()
                    .filter(|ms| *ms > 0)
                    .map(Duration::from_millis)
            })?,
            proxy: parse(
                &get,
                PROXY_VAR,
                "nginx, alb, cloudflare, custom:SECONDS, custom:MSms, none or bridge",
                ProxyChoice::parse,
            )?,
            mutant: parse(&get, MUTANT_VAR, "a mutant's name", Mutant::from_name)?,
            era: parse(
                &get,
                ERA_VAR,
                "seed, modern, legacy, 2026-07-28, 2025-11-25, 2025-06-18 or 2025-03-26",
                |v| v.parse().ok(),
            )?,
        })
    }

    /// The run it names on `lane` (seed 0 when `MCP_SIM_SEED` is not set); the tick, when
    /// set, replaces `lane`'s. A tick given for the in-memory lane, which has none, is an
    /// error.
    pub fn repro(&self, lane: Lane) -> Result<Repro, ReproError> {
        let lane = match (lane, self.tick) {
            (lane, None) => lane,
            #[cfg(feature = "turmoil")]
            (Lane::Turmoil { .. }, Some(tick)) => Lane::Turmoil { tick },
            (Lane::Memory, Some(tick)) => {
                return Err(ReproError {
                    var: TICK_VAR,
                    value: tick.as_millis().to_string(),
                    expected: "no tick: the in-memory lane has none",
                })
            }
        };
        Ok(Repro {
            seed: self.seed.unwrap_or(0),
            transport: self.transport,
            lane,
            proxy: self.proxy.unwrap_or(ProxyChoice::FromSeed),
            mutant: self.mutant,
            era: self.era.unwrap_or_default(),
        })
    }
}

/// A run named by a scenario file, or by one of its neighbours: the seed of a real session,
/// once fitted (`mcp-sim fit`). Its two lines are `mcp-sim replay --scenario FILE
/// [--perturb-seed N]` and `MCP_SIM_SCENARIO=FILE [MCP_SIM_PERTURB_SEED=N] cargo test ...
/// replay_one_seed`.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRepro {
    /// The scenario file.
    pub path: std::path::PathBuf,
    /// The neighbour's perturbation seed ([`crate::scenario::around`]), if one.
    pub perturb_seed: Option<u64>,
    /// What may move in the neighbour.
    pub perturb: crate::scenario::around::PerturbSpec,
    /// A behaviour of the peer assumed on top of the file's (`sweep --around --hypotheses`).
    pub hypothesis: Option<crate::model::Mutant>,
    /// The lane.
    pub lane: Lane,
}

impl FileRepro {
    /// The scenario the file holds, or its neighbour; with the file's digest.
    pub fn scenario(&self) -> Result<(Scenario, u64), crate::scenario::file::ScenarioFileError> {
        let file = crate::scenario::file::ScenarioFile::read(&self.path)?;
        let digest = file.scenario.digest();
        let base = crate::fit::neighbours::assuming(&file.scenario, self.hypothesis);
        Ok(match self.perturb_seed {
            Some(seed) => (
                crate::scenario::around::neighbour(&base, seed, &self.perturb).scenario,
                digest,
            ),
            None => (base, digest),
        })
    }

    /// The `mcp-sim replay` command that reruns it.
    pub fn replay_line(&self) -> String {
        let mut line = format!(
            "cargo run --release -p mcp-sim-cli -- replay --scenario {}",
            self.path.display()
        );
        if let Some(n) = self.perturb_seed {
            line.push_str(&format!(" --perturb-seed {n}"));
        }
        if let Some(m) = self.hypothesis {
            line.push_str(&format!(" --hypothesis {}", m.info().name));
        }
        match self.lane {
            Lane::Memory => line.push_str(" --lane memory"),
            #[cfg(feature = "turmoil")]
            Lane::Turmoil { tick } if tick != DEFAULT_TICK => {
                line.push_str(&format!(" --tick-ms {}", tick.as_millis()))
            }
            #[cfg(feature = "turmoil")]
            Lane::Turmoil { .. } => {}
        }
        line
    }

    /// The `cargo test` command that reruns it (with the default perturbation knobs).
    pub fn test_line(&self) -> String {
        let test = match self.lane {
            Lane::Memory => "simulation",
            #[cfg(feature = "turmoil")]
            Lane::Turmoil { .. } => "turmoil_sim",
        };
        let mut env = format!("{SCENARIO_VAR}={}", self.path.display());
        if let Some(n) = self.perturb_seed {
            env.push_str(&format!(" {PERTURB_VAR}={n}"));
        }
        if let Some(m) = self.hypothesis {
            env.push_str(&format!(" {HYPOTHESIS_VAR}={}", m.info().name));
        }
        format!("{env} cargo test --test {test} replay_one_seed -- --nocapture")
    }

    /// The run `MCP_SIM_SCENARIO` and `MCP_SIM_PERTURB_SEED` name on `lane`, if the first is
    /// set.
    pub fn from_env(lane: Lane) -> Result<Option<FileRepro>, ReproError> {
        let Some(path) = std::env::var_os(SCENARIO_VAR) else {
            return Ok(None);
        };
        let perturb_seed = match std::env::var(PERTURB_VAR) {
            Ok(v) => Some(v.trim().parse().map_err(|_| ReproError {
                var: PERTURB_VAR,
                value: v,
                expected: "a perturbation seed (a decimal u64)",
            })?),
            Err(_) => None,
        };
        let hypothesis = match std::env::var(HYPOTHESIS_VAR) {
            Ok(v) => Some(crate::model::Mutant::from_name(v.trim()).ok_or(ReproError {
                var: HYPOTHESIS_VAR,
                value: v,
                expected: "a mutant's name (mcp-sim mutants --list)",
            })?),
            Err(_) => None,
        };
        Ok(Some(FileRepro {
            path: path.into(),
            perturb_seed,
            perturb: Default::default(),
            hypothesis,
            lane,
        }))
    }
}

/// A reproduction variable that is set to something it cannot mean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReproError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What it should have been.
    pub expected: &'static str,
}

impl fmt::Display for ReproError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?} cannot be reproduced: expected {}",
            self.var, self.value, self.expected
        )
    }
}

impl std::error::Error for ReproError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::ProxyConfig;

    fn env_of(assignments: &str) -> Result<ReproEnv, ReproError> {
        let table: Vec<(String, String)> = assignments
            .split_whitespace()
            .filter_map(|a| a.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        ReproEnv::read_from(|name| {
            Ok(table
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone()))
        })
    }

    #[test]
    fn printed_assignments_read_back_as_the_same_run() {
        let runs = [
            Repro::seed(7, Lane::Memory),
            Repro {
                transport: Some(Transport::Http),
                proxy: ProxyChoice::Fixed(ProxyConfig::custom(Duration::from_millis(7_500))),
                mutant: Mutant::from_name("ignore_cancel"),
                ..Repro::seed(u64::MAX, Lane::Memory)
            },
            #[cfg(feature = "turmoil")]
            Repro {
                transport: Some(Transport::Stdio),
                proxy: ProxyChoice::Direct,
                ..Repro::seed(
                    3,
                    Lane::Turmoil {
                        tick: Duration::from_millis(1),
                    },
                )
            },
            #[cfg(feature = "turmoil")]
            Repro {
                proxy: ProxyChoice::Fixed(ProxyConfig::CLOUDFLARE),
                ..Repro::seed(3, Lane::turmoil())
            },
        ];
        for run in runs {
            let env = env_of(&run.env_assignments()).expect("the printed line parses");
            let lane = match run.lane {
                Lane::Memory => Lane::Memory,
                #[cfg(feature = "turmoil")]
                Lane::Turmoil { .. } => Lane::turmoil(),
            };
            assert_eq!(env.repro(lane), Ok(run), "{}", run.env_assignments());
        }
    }

    #[test]
    fn a_value_that_does_not_parse_is_an_error_naming_it() {
        for (line, var) in [
            ("MCP_SIM_SEED=12x", SEED_VAR),
            ("MCP_SIM_SEED=-1", SEED_VAR),
            ("MCP_SIM_TRANSPORT=stdoi", TRANSPORT_VAR),
            ("MCP_SIM_TICK_MS=0", TICK_VAR),
            ("MCP_SIM_PROXY=haproxy", PROXY_VAR),
            ("MCP_SIM_MUTANT=nope", MUTANT_VAR),
        ] {
            let e = env_of(line).expect_err(line);
            assert_eq!(e.var, var);
            let value = line.split_once('=').unwrap().1;
            assert!(e.to_string().contains(&format!("{var}={value:?}")), "{e}");
        }
        let tick = env_of("MCP_SIM_TICK_MS=5").unwrap().repro(Lane::Memory);
        assert_eq!(
            tick.unwrap_err().var,
            TICK_VAR,
            "the in-memory lane has no tick"
        );
    }

    #[test]
    fn nothing_set_is_seed_zero_as_drawn() {
        let env = env_of("").unwrap();
        assert_eq!(env, ReproEnv::default());
        assert_eq!(env.repro(Lane::Memory), Ok(Repro::seed(0, Lane::Memory)));
    }

    #[test]
    fn the_lines_carry_every_knob() {
        let run = Repro {
            transport: Some(Transport::Http),
            proxy: ProxyChoice::parse("nginx").unwrap(),
            mutant: Mutant::from_name("no_keepalive"),
            ..Repro::seed(9, Lane::Memory)
        };
        assert_eq!(
            run.replay_line(),
            "cargo run --release -p mcp-sim-cli -- replay --seed 9 --lane memory --transport http --proxy nginx --mutant no_keepalive"
        );
        assert_eq!(
            run.test_line(),
            "MCP_SIM_SEED=9 MCP_SIM_TRANSPORT=http MCP_SIM_PROXY=nginx MCP_SIM_MUTANT=no_keepalive cargo test --test simulation replay_one_seed -- --nocapture"
        );
    }
}
