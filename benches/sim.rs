//! Simulation speed on the documented standard scenario (`Scenario::standard`): seeds per
//! second, time compression (simulated seconds per wall second) and the harness's overhead
//! over bare turmoil moving the same bytes at the same times through the same four hosts.
//! Also the in-memory lane (and, on stdio, its two protocol eras side by side) and the cost of
//! a finer tick. One thread; run with
//! `cargo bench --bench sim` (`MCP_SIM_BENCH_SEEDS` sets the seed count, default 200).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, UNIX_EPOCH};

use mcp_sim::lanes::memory;
use mcp_sim::lanes::turmoil::{self as turmoil_lane, TurmoilOptions};
use mcp_sim::scenario::Scenario;
use mcp_sim::trace::{EventKind, Side, Trace};
use mcp_sim::{Era, Transport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Figures {
    seeds: u64,
    wall: Duration,
    sim_ms: u64,
}

impl Figures {
    fn print(&self, name: &str) {
        let wall = self.wall.as_secs_f64();
        let per_seed = wall / self.seeds as f64;
        println!(
            "{name:<34} {:>8.1} seeds/s {:>8.0}x compression {:>7.1} ms/seed  10,000 seeds on 2 cores: {:.1} min",
            self.seeds as f64 / wall,
            self.sim_ms as f64 / 1000.0 / wall,
            per_seed * 1000.0,
            per_seed * 10_000.0 / 2.0 / 60.0,
        );
    }
}

fn harness_lane(seeds: u64, tick: Duration) -> (Figures, Vec<Trace>) {
    harness_lane_of(seeds, tick, Scenario::standard)
}

fn harness_lane_of(
    seeds: u64,
    tick: Duration,
    scenario: impl Fn(u64) -> Scenario,
) -> (Figures, Vec<Trace>) {
    let start = Instant::now();
    let mut sim_ms = 0;
    let mut traces = Vec::new();
    for seed in 0..seeds {
        let scenario = scenario(seed);
        let run = turmoil_lane::run(
            &scenario,
            &TurmoilOptions {
                tick,
                ..Default::default()
            },
        )
        .expect("the standard scenario runs");
        assert!(run.complete, "seed {seed} did not settle");
        sim_ms += run.stats.sim_ms;
        traces.push(run.trace);
    }
    (
        Figures {
            seeds,
            wall: start.elapsed(),
            sim_ms,
        },
        traces,
    )
}

fn memory_lane(seeds: u64) -> Figures {
    memory_lane_of(seeds, Scenario::standard)
}

/// The in-memory lane over `scenario(seed)` for each seed.
fn memory_lane_of(seeds: u64, scenario: impl Fn(u64) -> Scenario) -> Figures {
    let start = Instant::now();
    let mut sim_ms = 0;
    for seed in 0..seeds {
        sim_ms += memory::run(&scenario(seed)).stats.sim_ms;
    }
    Figures {
        seeds,
        wall: start.elapsed(),
        sim_ms,
    }
}

/// What bare turmoil has to move for one run: per stream, the request size and the response
/// pieces (time, size); the backend calls' times; the run's length.
/// One HTTP exchange to replay: request time, request size, response pieces (time, size).
type Exchange = (u64, usize, Vec<(u64, usize)>);

#[derive(Default, Clone)]
struct Schedule {
    streams: BTreeMap<u64, Exchange>,
    backend: Vec<u64>,
    end_ms: u64,
}

fn schedule(trace: &Trace) -> Schedule {
    let mut s = Schedule {
        end_ms: trace.end(),
        ..Schedule::default()
    };
    for e in &trace.events {
        match (&e.kind, e.side) {
            (EventKind::Send(w), Side::Client) => {
                if let (Some(stream), Some(msg)) = (w.stream, &w.msg) {
                    s.streams
                        .insert(stream, (e.t, msg.to_string().len() + 200, Vec::new()));
                }
            }
            (EventKind::Send(w), Side::Server) => {
                if let (Some(stream), Some(msg)) = (w.stream, &w.msg) {
                    if let Some(entry) = s.streams.get_mut(&stream) {
                        entry.2.push((e.t, msg.to_string().len() + 8));
                    }
                }
            }
            (
                EventKind::Comment {
                    stream: Some(stream),
                },
                Side::Server,
            ) => {
                if let Some(entry) = s.streams.get_mut(stream) {
                    entry.2.push((e.t, 14));
                }
            }
            (EventKind::Work { .. } | EventKind::Release { .. }, Side::Backend) => {
                s.backend.push(e.t)
            }
            _ => {}
        }
    }
    s
}

async fn sleep_to(ms: u64) {
    let now = turmoil::sim_elapsed().unwrap_or_default();
    tokio::time::sleep(Duration::from_millis(ms).saturating_sub(now)).await;
}

/// Bare turmoil: the same four hosts, tick and latency; the client writes each request at its
/// time through a relaying proxy, the server writes each response piece at its time, the
/// server sends the backend its calls. No MCP, no hyper, no model.
fn bare_run(seed: u64, tick: Duration, sched: Schedule) -> u64 {
    let scenario = Scenario::standard(seed);
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .epoch(UNIX_EPOCH)
        .tick_duration(tick)
        .simulation_duration(Duration::from_millis(sched.end_ms) + Duration::from_secs(60))
        .min_message_latency(scenario.latency.0)
        .max_message_latency(scenario.latency.1)
        .tcp_capacity(4096)
        .build();
    sim.host("backend", || async {
        let l = turmoil::net::TcpListener::bind("0.0.0.0:7000").await?;
        let (mut s, _) = l.accept().await?;
        let mut buf = [0u8; 4096];
        while s.read(&mut buf).await? > 0 {}
        Ok(())
    });
    let server_sched = sched.clone();
    sim.host("server", move || {
        let sched = server_sched.clone();
        async move {
            let mut backend = turmoil::net::TcpStream::connect("backend:7000").await?;
            let calls = sched.backend.clone();
            tokio::task::spawn_local(async move {
                for t in calls {
                    sleep_to(t).await;
                    let _ = backend.write_all(b"{\"work\":1}\n").await;
                }
            });
            let l = turmoil::net::TcpListener::bind("0.0.0.0:80").await?;
            loop {
                let (mut s, _) = l.accept().await?;
                let sched = sched.clone();
                tokio::task::spawn_local(async move {
                    let mut id = [0u8; 8];
                    if s.read_exact(&mut id).await.is_err() {
                        return;
                    }
                    let Some((_, size, pieces)) =
                        sched.streams.get(&u64::from_le_bytes(id)).cloned()
                    else {
                        return;
                    };
                    let mut request = vec![0u8; size];
                    let _ = s.read_exact(&mut request).await;
                    for (t, len) in pieces {
                        sleep_to(t).await;
                        if s.write_all(&vec![b'x'; len]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        }
    });
    sim.host("proxy", || async {
        let l = turmoil::net::TcpListener::bind("0.0.0.0:8080").await?;
        loop {
            let (down, _) = l.accept().await?;
            tokio::task::spawn_local(async move {
                let Ok(up) = turmoil::net::TcpStream::connect("server:80").await else {
                    return;
                };
                let (mut dr, mut dw) = down.into_split();
                let (mut ur, mut uw) = up.into_split();
                let a = async { tokio::io::copy(&mut dr, &mut uw).await };
                let b = async { tokio::io::copy(&mut ur, &mut dw).await };
                let _ = tokio::join!(a, b);
            });
        }
    });
    let client_sched = sched.clone();
    sim.client("client", async move {
        let mut tasks = Vec::new();
        for (&stream, &(t, size, _)) in &client_sched.streams {
            tasks.push(tokio::task::spawn_local(async move {
                sleep_to(t).await;
                let Ok(mut s) = turmoil::net::TcpStream::connect("proxy:8080").await else {
                    return;
                };
                let mut out = stream.to_le_bytes().to_vec();
                out.extend(std::iter::repeat_n(b'r', size));
                let _ = s.write_all(&out).await;
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
            }));
        }
        sleep_to(client_sched.end_ms).await;
        for t in tasks {
            t.abort();
        }
        Ok(())
    });
    sim.run().expect("bare run");
    sim.elapsed().as_millis() as u64
}

fn main() {
    let seeds: u64 = std::env::var("MCP_SIM_BENCH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let tick = TurmoilOptions::default().tick;
    println!("standard scenario: HTTP, 4 hosts, 8 x 90 s tool calls, ALB 60 s idle proxy, partition + reset; {seeds} seeds, one thread");

    let (harness_figures, traces) = harness_lane(seeds, tick);
    harness_figures.print("turmoil lane, 10 ms tick");

    let schedules: Vec<Schedule> = traces.iter().map(schedule).collect();
    let start = Instant::now();
    let mut bare_sim_ms = 0;
    for (seed, sched) in schedules.into_iter().enumerate() {
        bare_sim_ms += bare_run(seed as u64, tick, sched);
    }
    let bare = Figures {
        seeds,
        wall: start.elapsed(),
        sim_ms: bare_sim_ms,
    };
    bare.print("bare turmoil, same bytes, 10 ms");
    println!(
        "{:<34} {:>8.2}x wall time of bare turmoil for the same traffic",
        "turmoil lane overhead",
        harness_figures.wall.as_secs_f64() / bare.wall.as_secs_f64()
    );

    let fine = (seeds / 10).max(5);
    let (fine_figures, _) = harness_lane(fine, Duration::from_millis(1));
    fine_figures.print("turmoil lane, 1 ms tick");

    memory_lane(seeds * 10).print("in-memory lane");

    // The two eras on the same calls and faults, on each transport: the legacy client's
    // handshake, sessions and resumable streams cost no speed (the 2026-07-28 HTTP line is the
    // in-memory lane's above, and the turmoil lane's at the top).
    memory_lane_of(seeds * 10, |seed| {
        Scenario::standard(seed).in_era(Era::LEGACY)
    })
    .print("in-memory lane, HTTP, 2025-11-25");
    memory_lane_of(seeds * 10, |seed| {
        Scenario::standard(seed).with_transport(Transport::Stdio)
    })
    .print("in-memory lane, stdio, 2026-07-28");
    memory_lane_of(seeds * 10, |seed| {
        Scenario::standard(seed)
            .with_transport(Transport::Stdio)
            .in_era(Era::LEGACY)
    })
    .print("in-memory lane, stdio, 2025-11-25");
    harness_lane_of(seeds, tick, |seed| {
        Scenario::standard(seed).in_era(Era::LEGACY)
    })
    .0
    .print("turmoil lane, HTTP, 2025-11-25");
}
