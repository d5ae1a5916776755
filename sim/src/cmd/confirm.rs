//! The flags of `probe --scenario FILE [--perturb-seed N]`, `check-proxy --scenario ...` and
//! `serve --scenario ... [--attempt K]`, and how their plans are said: the confirmation itself
//! is [`mcp_sim::fit::confirm`]'s.

use std::path::PathBuf;
use std::process::ExitCode;

use mcp_sim::exit::Exit;
use mcp_sim::fit::confirm::{Confirm, ConfirmError, Pick, ServeConfirm, NOT_EXECUTABLE};
use mcp_sim::lanes::live::check_proxy::shell_quote;
use mcp_sim::model::Transport;

use crate::args::Format;

/// The flags that run a scenario live, shared by `probe` and `check-proxy`.
#[derive(clap::Args)]
pub(crate) struct ScenarioOptions {
    /// Run a scenario file's calls (`mcp-sim fit`'s output) instead of the seeded schedule,
    /// in its era, over HTTP with its latency and proxy, to confirm live what the simulation
    /// predicts (an HTTP stream reset goes with its call's post, at its planned moment in the
    /// call); a knob the live tools cannot set (a crash or partition at a moment, another
    /// transport) makes it `not-executable-live`.
    #[arg(long, value_name = "FILE")]
    pub(crate) scenario: Option<PathBuf>,
    /// With `--scenario`: run its neighbour drawn from this perturbation seed (as `sweep
    /// --around` lists them), and look for the rules it breaks in simulation that the
    /// scenario does not.
    #[arg(long, requires = "scenario")]
    pub(crate) perturb_seed: Option<u64>,
    /// With `--perturb-seed`: the knobs that may move, as `sweep --around --perturb` took them.
    #[arg(long, requires = "perturb_seed")]
    pub(crate) perturb: Option<String>,
    /// With `--scenario`: predict with this behaviour of the peer assumed (a hypothesis
    /// `sweep --around --hypotheses` printed), to confirm live whether the peer has it.
    #[arg(long, requires = "scenario", value_parser = crate::args::parse_mutant)]
    pub(crate) hypothesis: Option<mcp_sim::model::Mutant>,
    /// With `--scenario`: run up to this many times until a predicted rule breaks (the wall
    /// clock decides a race); none that does is `not-reproduced` (exit 3).
    #[arg(long, default_value_t = 10, requires = "scenario")]
    pub(crate) attempts: u32,
    /// With `--scenario`: attempt k moves every planned cancel by the k-th of 0, +1, -1, +2,
    /// -2, ... ms within this many ms either way (a race's window can be a millisecond wide,
    /// narrower than the fitted timing is exact); 0 sends the plan as it is every time.
    #[arg(long, default_value_t = 10, requires = "scenario")]
    pub(crate) cancel_scan_ms: u64,
}

impl ScenarioOptions {
    /// The flags that name the run again in a replay line (`None` without `--scenario`).
    pub(crate) fn flags(&self) -> Option<String> {
        let path = self.scenario.as_ref()?;
        let mut s = format!("--scenario {}", shell_quote(&path.display().to_string()));
        if let Some(n) = self.perturb_seed {
            s.push_str(&format!(" --perturb-seed {n}"));
        }
        if let Some(spec) = &self.perturb {
            s.push_str(&format!(" --perturb {}", shell_quote(spec)));
        }
        if let Some(m) = self.hypothesis {
            s.push_str(&format!(" --hypothesis {}", m.info().name));
        }
        Some(s)
    }
}

/// The flags that play a client session's scenario with `serve` (`serve --scenario`).
#[derive(clap::Args)]
pub(crate) struct ServeScenarioOptions {
    /// Play the server's side of a scenario file's run (`mcp-sim fit` of a client's session)
    /// to the real client, to confirm live what the simulation predicts of the client; the
    /// client's requests find their calls by their params, and what the scenario does not
    /// hold is answered as the reference server would.
    #[arg(long, value_name = "FILE", conflicts_with = "from")]
    pub(crate) scenario: Option<PathBuf>,
    /// With `--scenario`: play its neighbour drawn from this perturbation seed (as `sweep
    /// --around` lists them): a cancel or deadline it moves moves the server's messages the
    /// other way, since the client's cancels are its own.
    #[arg(long, requires = "scenario")]
    pub(crate) perturb_seed: Option<u64>,
    /// With `--perturb-seed`: the knobs that may move, as `sweep --around --perturb` took them.
    #[arg(long, requires = "perturb_seed")]
    pub(crate) perturb: Option<String>,
    /// With `--scenario`: predict with this behaviour of the client assumed (a hypothesis
    /// `sweep --around --hypotheses client` printed).
    #[arg(long, requires = "scenario", value_parser = crate::args::parse_mutant)]
    pub(crate) hypothesis: Option<mcp_sim::model::Mutant>,
    /// With `--scenario`: which attempt of the cancel scan this run is (1, 2, ...): attempt k
    /// plays every cancelled call's messages as if its cancel moved by the k-th of 0, +1, -1,
    /// +2, ... ms (the client is launched once per run, so a caller repeats the run).
    #[arg(long, default_value_t = 1, requires = "scenario")]
    pub(crate) attempt: u32,
    /// With `--scenario`: the reach of the cancel scan, in ms either way.
    #[arg(long, default_value_t = 10, requires = "scenario")]
    pub(crate) cancel_scan_ms: u64,
}

impl ScenarioOptions {
    /// The run `--scenario` picks (`None` without it).
    fn pick(&self) -> Option<Pick<'_>> {
        Some(Pick {
            path: self.scenario.as_deref()?,
            perturb: self.perturb.as_deref(),
            perturb_seed: self.perturb_seed,
            hypothesis: self.hypothesis,
        })
    }
}

/// `--scenario`'s plan against a target on `transport` (`tag`: number the tool calls, as
/// check-proxy pairs the hops by them), its notes said on stderr; `Ok(None)` without
/// `--scenario`; `Err` with the exit code when the file is bad or the neighbour is not
/// executable live (said in `format`).
pub(crate) fn prepare(
    options: &ScenarioOptions,
    format: Format,
    transport: Transport,
    tag: bool,
) -> Result<Option<Confirm>, ExitCode> {
    let Some(pick) = options.pick() else {
        return Ok(None);
    };
    let prepared = Confirm::prepare(
        &pick,
        transport,
        tag,
        options.attempts,
        options.cancel_scan_ms,
    );
    match prepared {
        Ok(confirm) => {
            for note in &confirm.notes {
                eprintln!("{note}");
            }
            Ok(Some(confirm))
        }
        Err(ConfirmError::NotExecutable { what, why, notes }) => {
            for note in &notes {
                eprintln!("{note}");
            }
            match format {
                Format::Json => println!(
                    "{}",
                    serde_json::json!({
                        "scenario": what,
                        "verdict": "inconclusive",
                        "exit_code": Exit::Inconclusive.code(),
                        "findings": [{
                            "finding": NOT_EXECUTABLE,
                            "kind": "inconclusive",
                            "message": why.to_string(),
                        }],
                    })
                ),
                _ => println!("{what}: {NOT_EXECUTABLE} (inconclusive): {why}"),
            }
            Err(Exit::Inconclusive.into())
        }
        Err(e) => {
            eprintln!("mcp-sim: {e}");
            Err(e.exit().into())
        }
    }
}

/// `serve --scenario`'s plan against a client on `transport`, its notes said on stderr;
/// `Ok(None)` without `--scenario`; `Err` with the exit code when the file is bad or the
/// neighbour is not executable live (said on stderr: stdout is the protocol's under stdio).
pub(crate) fn prepare_serve(
    options: &ServeScenarioOptions,
    transport: Transport,
) -> Result<Option<ServeConfirm>, ExitCode> {
    let Some(path) = &options.scenario else {
        return Ok(None);
    };
    let pick = Pick {
        path,
        perturb: options.perturb.as_deref(),
        perturb_seed: options.perturb_seed,
        hypothesis: options.hypothesis,
    };
    match ServeConfirm::prepare(&pick, transport, options.attempt, options.cancel_scan_ms) {
        Ok(confirm) => {
            for note in &confirm.notes {
                eprintln!("{note}");
            }
            Ok(Some(confirm))
        }
        Err(e) => {
            if let ConfirmError::NotExecutable { notes, .. } = &e {
                for note in notes {
                    eprintln!("{note}");
                }
                eprintln!("{e}");
            } else {
                eprintln!("mcp-sim: {e}");
            }
            Err(e.exit().into())
        }
    }
}
