//! Seeded runs of a real *intermediary* (a stdio↔HTTP bridge, a gateway) under the virtual
//! clock, with both of its hops virtual (feature `live`): `mcp-sim check-proxy --virtual`.
//!
//! The program runs under its runtime's shim in the bridge role: its front (stdio, or its
//! HTTP app) is driven by the reference client as a virtual server's is, with the seed's
//! schedule, latency and faults ([`VirtualPlan`]); whatever server process it starts and
//! whatever URL it connects to is the reference server, as `serve` runs it
//! ([`BridgePlan::upstream`]), behind a link with the seed's latency each way. Both hops are
//! recorded on the one virtual clock and joined as `check-proxy` joins a live intermediary's
//! ([`crate::trace::Trace::two_hop`]): the client's end of the front, the server's end of
//! the upstream, judged hop by hop and across ([`crate::oracle::hops`]), with a grace window
//! that covers both links' latency (a cancel crosses both). Each call carries
//! its number, which the reference server echoes, so every front call pairs with its
//! upstream request.
//!
//! A seed is drawn, run, checked for determinism and judged as a virtual server's is
//! ([`crate::virtual_run`]): two runs that differ, or a program that escaped its shim, are
//! `not-replayable`, never a finding; a run in which no call reached the upstream, or none
//! ended with a result, is inconclusive. With a seeded service time and tie order
//! ([`crate::lanes::virtual_peer::ServiceModel`]) the races inside the intermediary (its
//! answer to a cancel against a progress notification already on its way) fall differently
//! in each seed, and each is still one seed.

pub use crate::lanes::live::check_proxy::calls_upstream;
use crate::lanes::live::check_proxy::expand;
use crate::lanes::live::serve::ServeConfig;
use crate::lanes::virtual_peer::{VirtualError, VirtualPeer};
use crate::model::ServerEras;
use crate::virtual_run::{calibrate_in, judge_in, Seat, VirtualJudged, VirtualPlan};

/// What `{upstream}` becomes in a virtual intermediary's arguments: a command it may start
/// (the shim gives it the reference server whatever it names; nothing is run).
pub const UPSTREAM_COMMAND: [&str; 2] = ["mcp-sim", "serve"];

/// What `{port}` becomes: a virtual program binds nothing, so any port serves.
pub const FRONT_PORT: u16 = 8930;

/// What `{upstream-url}` becomes: whatever host and port a virtual program connects to is
/// the reference server, so this one names no real service.
pub const UPSTREAM_URL: &str = "http://127.0.0.1:8931/mcp";

/// What a seed of a virtual intermediary sweep is drawn from.
#[derive(Debug, Clone)]
pub struct BridgePlan {
    /// The front's schedule: the calls, cancels, latency, faults and service time.
    pub plan: VirtualPlan,
    /// The eras the reference upstream serves.
    pub upstream: ServerEras,
}

impl BridgePlan {
    /// The reference upstream, as `serve --era` runs it.
    pub fn serve(&self) -> ServeConfig {
        ServeConfig {
            eras: self.upstream,
            ..ServeConfig::default()
        }
    }
}

/// The intermediary's arguments with `{upstream}`, `{upstream-url}` and `{port}` filled in
/// for a virtual run ([`UPSTREAM_COMMAND`], [`UPSTREAM_URL`], [`FRONT_PORT`]); an error when
/// they name no upstream, or both.
pub fn expand_virtual(command: &[String]) -> Result<Vec<String>, String> {
    let joined = command.join(" ");
    let stdio = crate::lanes::live::check_proxy::names_stdio_upstream(&joined);
    if stdio == joined.contains("{upstream-url}") {
        return Err(
            "the intermediary's arguments must name its upstream once: {upstream} (a server \
             command it starts) or {upstream-url} (a Streamable HTTP endpoint it connects to)"
                .into(),
        );
    }
    let upstream: Vec<String> = UPSTREAM_COMMAND.iter().map(|w| w.to_string()).collect();
    Ok(expand(command, &upstream, UPSTREAM_URL, FRONT_PORT))
}

/// How long one uncancelled call takes through the intermediary, in ms, measured once under
/// the virtual clock with no fault (as [`crate::virtual_run::calibrate`]).
pub fn calibrate_bridge(
    plan: &BridgePlan,
    peer: &mut VirtualPeer,
) -> Result<Option<u64>, VirtualError> {
    calibrate_in(Seat::Bridge(&plan.serve()), &plan.plan, peer)
}

/// Runs and judges `seed` of `plan` with `peer`'s intermediary program. With `verify`, the
/// seed runs twice and two runs that differ are not replayable.
pub fn judge_bridge_seed(
    plan: &BridgePlan,
    seed: u64,
    natural_ms: Option<u64>,
    peer: &mut VirtualPeer,
    verify: bool,
) -> Result<VirtualJudged, VirtualError> {
    let serve = plan.serve();
    judge_in(
        Seat::Bridge(&serve),
        &plan.plan,
        seed,
        natural_ms,
        peer,
        verify,
    )
}
