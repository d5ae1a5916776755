//! Judging an intermediary (a stdio↔HTTP bridge, a gateway, an era translator) between the
//! reference client and the reference server: `mcp-sim check-proxy`, callable from a library
//! user's own code as [`check_proxy`].
//!
//! In the intermediary's arguments `{upstream}` is the reference server's stdio command (an
//! argument that is exactly `{upstream}` becomes its separate words; inside a longer argument,
//! as in `--cmd={upstream}`, it becomes one shell-quoted command line), `{upstream-line}` that
//! command line as one argument (for a bridge that takes its server as one string: `--stdio
//! {upstream-line}`; the shell has already removed any quotes written around `{upstream}`),
//! `{upstream-url}` its Streamable HTTP endpoint
//! (`mcp-sim serve --http`, started here), and `{port}` a free local port, also in the front's
//! URL. Without a front URL the intermediary's front is its stdio, which the probe starts and
//! stops as it would a server; with one, the intermediary is started here, the front is probed
//! at that URL once it accepts connections, and the intermediary is stopped at the end
//! (SIGTERM, then SIGKILL).
//!
//! The reference server is the `mcp-sim` binary [`ProxyCheck::mcp_sim`] names, run as `serve
//! --trace-dir`: it records its own end ([`upstream_files`]: one trace per process, as an
//! intermediary may start its upstream more than once), on the probe's clock; each process,
//! and each HTTP session within one, is an upstream connection of its own, judged in its own
//! era ([`crate::trace::connections`]). The probe tags
//! each call's arguments with its number, which the reference server echoes, so each front
//! call pairs with the upstream request that carries it. Both hops go into one trace
//! ([`Trace::two_hop`]), judged by the one-hop rules per hop and the intermediary rules across
//! ([`crate::oracle::hops`]); a run in which no call reached the upstream is inconclusive
//! ([`NOTHING_REACHED_UPSTREAM`]).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::findings::Finding;
use super::interrupt::{
    kill_group, own_group, terminate, track, track_dir, untrack, untrack_dir, Interrupt,
};
use super::probe::{self, ProbeConfig, ProbeError, ProbeRun, Target};
use crate::model::ServerEras;
use crate::trace::connections::{numbered, sessions};
use crate::trace::{EventKind, Side, Trace};

/// How long the upstream servers get to write their traces once the intermediary is gone,
/// before they are told to stop (SIGTERM), and again after.
const UPSTREAM_WAIT: Duration = Duration::from_secs(10);

/// How long an intermediary started here gets to exit after SIGTERM before SIGKILL.
const STOP_WAIT: Duration = Duration::from_secs(3);

/// The finding of a run whose intermediary forwarded no call.
pub const NOTHING_REACHED_UPSTREAM: &str = "nothing-reached-upstream";

/// What to check.
#[derive(Debug, Clone)]
pub struct ProxyCheck {
    /// The intermediary's command and arguments, with `{upstream}` or `{upstream-url}` (once)
    /// and `{port}`.
    pub command: Vec<String>,
    /// The intermediary's Streamable HTTP front (`http://127.0.0.1:{port}/mcp`); `None`: its
    /// stdio.
    pub front_url: Option<String>,
    /// The eras the reference upstream serves.
    pub upstream_era: ServerEras,
    /// The `mcp-sim` binary that serves the reference upstream.
    pub mcp_sim: PathBuf,
    /// How the front is probed. Its target is the front, so [`check_proxy`] tags the calls,
    /// leaves the DNS-rebinding check off (the intermediary's own protection is `probe
    /// --url`'s to check) and sets the clock origin that both hops share.
    pub probe: ProbeConfig,
}

/// What the reference upstream saw.
#[derive(Debug, Clone)]
pub struct UpstreamSeen {
    /// Reference server processes the intermediary started.
    pub processes: usize,
    /// The upstream connections they served: a process each on stdio; on HTTP each legacy
    /// session, and the sessionless 2026-07-28 traffic ([`crate::trace::connections`]).
    pub connections: usize,
    /// Their events, merged in time order, each numbered with its connection (`conn`) where
    /// there are several.
    pub trace: Trace,
    /// The `tools/call` requests that reached them.
    pub calls: usize,
}

/// A finished check: the probe's run of the front, the upstream's side, and the trace of both
/// hops the oracle judges.
#[derive(Debug)]
pub struct ProxyChecked {
    /// The probe's run against the intermediary's front.
    pub run: ProbeRun,
    /// What the reference upstream saw.
    pub upstream: UpstreamSeen,
    /// Both hops in one trace ([`Trace::two_hop`]).
    pub judged: Trace,
    /// Findings beyond the probe's ([`NOTHING_REACHED_UPSTREAM`]).
    pub findings: Vec<Finding>,
}

/// Why a check could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyCheckError {
    /// The command or the configuration is refused (the message names what).
    Config(String),
    /// The intermediary or the upstream could not be started or reached.
    Unreachable(String),
}

impl std::fmt::Display for ProxyCheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyCheckError::Config(e) | ProxyCheckError::Unreachable(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for ProxyCheckError {}

/// Checks the intermediary `check` names: starts the reference upstream (for an HTTP
/// upstream) and the intermediary (for an HTTP front), probes the front, stops what it
/// started, and joins the two hops.
pub fn check_proxy(check: &ProxyCheck) -> Result<ProxyChecked, ProxyCheckError> {
    let joined = check.command.join(" ");
    let wants_stdio = names_stdio_upstream(&joined);
    let wants_http = joined.contains("{upstream-url}");
    if check.command.is_empty() || wants_stdio == wants_http {
        return Err(ProxyCheckError::Config(
            "the intermediary's arguments must name its upstream once: {upstream} (the \
             reference server's stdio command), {upstream-line} (that command as one \
             argument) or {upstream-url} (its HTTP endpoint)"
                .into(),
        ));
    }
    let unreachable = ProxyCheckError::Unreachable;
    let scratch = Scratch::new().map_err(unreachable)?;
    let origin = SystemTime::now();
    let origin_ms = origin
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut upstream = vec![
        check.mcp_sim.display().to_string(),
        "serve".into(),
        "--era".into(),
        check.upstream_era.word().into(),
        "--trace-dir".into(),
        scratch.dir.display().to_string(),
        "--clock-origin-unix-ms".into(),
        origin_ms.to_string(),
        "--max-seconds".into(),
        (check.probe.max_seconds + 120).to_string(),
    ];
    let port = free_port().map_err(unreachable)?;
    let mut http_upstream = None;
    let upstream_url = if wants_http {
        upstream.extend(["--http".into(), "127.0.0.1:0".into()]);
        let (child, url) = start_http_upstream(&upstream).map_err(unreachable)?;
        http_upstream = Some(child);
        url
    } else {
        String::new()
    };
    let command = expand(&check.command, &upstream, &upstream_url, port);
    let front_url = check
        .front_url
        .as_ref()
        .map(|u| u.replace("{port}", &port.to_string()));
    let target = match &front_url {
        Some(url) => Target::Http(url.clone()),
        None => Target::Stdio(command.clone()),
    };
    let mut config = check.probe.clone();
    config.tag_calls = true;
    config.origin_check = false;
    config.clock_origin = Some(origin);
    if let Err(e) = config.validate(&target) {
        stop(http_upstream.as_mut());
        return Err(ProxyCheckError::Config(format!(
            "--{}: {}",
            e.setting, e.message
        )));
    }
    let mut intermediary = None;
    if let Some(url) = &front_url {
        let started = start_intermediary(&command, &scratch.dir);
        let child = match started {
            Ok(child) => intermediary.insert(child),
            Err(e) => {
                stop(http_upstream.as_mut());
                return Err(unreachable(e));
            }
        };
        let wait = Duration::from_millis(config.startup_timeout_ms);
        if let Err(e) = wait_for_front(url, wait, Some(child), &config.interrupt) {
            stop(intermediary.as_mut());
            stop(http_upstream.as_mut());
            let tail = scratch.log_tail("intermediary.log");
            return Err(unreachable(format!("{e}{tail}")));
        }
    }
    let probed = probe::probe(&target, &config);
    stop(intermediary.as_mut());
    stop(http_upstream.as_mut());
    let run = match probed {
        Ok(run) => run,
        Err(ProbeError::Config(e)) => {
            return Err(ProxyCheckError::Config(format!(
                "--{}: {}",
                e.setting, e.message
            )))
        }
        Err(ProbeError::Unreachable(e)) => return Err(unreachable(e)),
    };
    let back = scratch.upstream_traces().map_err(unreachable)?;
    let judged = Trace::two_hop(&run.run.trace, &back.trace);
    let calls = upstream_calls(&back.trace);
    let mut findings = Vec::new();
    if calls == 0 {
        findings.push(Finding {
            finding: NOTHING_REACHED_UPSTREAM,
            kind: crate::exit::FindingKind::Inconclusive,
            message: format!(
                "no tools/call reached the reference upstream ({} process(es) started): the \
                 intermediary forwarded nothing, so nothing across it was judged",
                back.processes
            ),
        });
    }
    Ok(ProxyChecked {
        run,
        upstream: UpstreamSeen {
            processes: back.processes,
            connections: back.connections,
            trace: back.trace,
            calls,
        },
        judged,
        findings,
    })
}

/// `serve --trace-dir`: the marker a reference server writes at its start and the trace it
/// writes at its end, in `dir`, for process `pid`.
pub fn upstream_files(dir: &Path, pid: u32) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("upstream-{pid}.started")),
        dir.join(format!("upstream-{pid}.jsonl")),
    )
}

/// Whether an intermediary's arguments (joined) name the reference server's stdio command:
/// `{upstream}` or `{upstream-line}`.
pub(crate) fn names_stdio_upstream(joined: &str) -> bool {
    joined.contains("{upstream}") || joined.contains("{upstream-line}")
}

/// The intermediary's arguments with the placeholders filled in.
pub(crate) fn expand(command: &[String], upstream: &[String], url: &str, port: u16) -> Vec<String> {
    let line = upstream
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Vec::new();
    for arg in command {
        if arg == "{upstream}" {
            out.extend(upstream.iter().cloned());
            continue;
        }
        out.push(
            arg.replace("{upstream-url}", url)
                .replace("{upstream-line}", &line)
                .replace("{upstream}", &line)
                .replace("{port}", &port.to_string()),
        );
    }
    out
}

/// `word` as one word for a POSIX shell.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,{}".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A local port nobody listens on now.
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot find a free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

/// Starts `mcp-sim serve --http` and reads the endpoint it prints.
fn start_http_upstream(command: &[String]) -> Result<(Child, String), String> {
    let mut child = own_group(Command::new(&command[0]).args(&command[1..]))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the reference upstream: {e}"))?;
    track(child.id());
    let stderr = child.stderr.take().expect("piped");
    let mut lines = BufReader::new(stderr).lines();
    let url = lines.find_map(|l| {
        l.ok()?
            .strip_prefix("mcp-sim serve: listening on ")
            .map(str::to_owned)
    });
    // The rest of its stderr (its verdict at the end) is read and dropped, so it never
    // blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    match url {
        Some(url) => Ok((child, url)),
        None => {
            stop(Some(&mut child));
            Err("the reference upstream did not start listening".into())
        }
    }
}

/// Starts an intermediary whose front is HTTP, its output to `dir/intermediary.log`.
fn start_intermediary(command: &[String], dir: &Path) -> Result<Child, String> {
    let log = std::fs::File::create(dir.join("intermediary.log"))
        .map_err(|e| format!("cannot write the intermediary's log: {e}"))?;
    let err = log
        .try_clone()
        .map_err(|e| format!("cannot write the intermediary's log: {e}"))?;
    let child = own_group(Command::new(&command[0]).args(&command[1..]))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", command[0]))?;
    track(child.id());
    Ok(child)
}

/// Waits until the front's host and port accept a connection, or the intermediary exits.
fn wait_for_front(
    url: &str,
    wait: Duration,
    child: Option<&mut Child>,
    interrupt: &Interrupt,
) -> Result<(), String> {
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .ok_or_else(|| format!("--front-url {url:?} is not http://HOST:PORT/PATH"))?;
    let addr = std::net::ToSocketAddrs::to_socket_addrs(authority)
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("--front-url {url:?}: cannot resolve {authority}"))?;
    let started = Instant::now();
    let mut child = child;
    while started.elapsed() < wait {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if let Some(signal) = interrupt.raised() {
            return Err(format!(
                "{} while waiting for the intermediary's front",
                Interrupt::describe(signal)
            ));
        }
        if let Some(c) = child.as_deref_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(format!(
                    "the intermediary exited ({status}) before its front listened"
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "the intermediary's front {url} did not accept a connection within {} ms",
        wait.as_millis()
    ))
}

/// Stops a process started here: SIGTERM, then SIGKILL to its process group after
/// [`STOP_WAIT`].
fn stop(child: Option<&mut Child>) {
    let Some(child) = child else { return };
    let pid = child.id();
    if !matches!(child.try_wait(), Ok(Some(_))) {
        terminate(pid);
        let until = Instant::now() + STOP_WAIT;
        while Instant::now() < until && matches!(child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(child.try_wait(), Ok(None)) {
            kill_group(pid);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    untrack(pid);
}

/// The `tools/call` requests that reached the upstream in a two-hop trace ([`Trace::two_hop`]).
pub fn calls_upstream(two_hop: &Trace) -> usize {
    upstream_calls(&two_hop.hop(crate::trace::Hop::Back).0)
}

/// The `tools/call` requests the upstream received.
fn upstream_calls(trace: &Trace) -> usize {
    trace
        .events
        .iter()
        .filter(|e| e.side == Side::Server)
        .filter(|e| match &e.kind {
            EventKind::Recv(w) => w
                .msg
                .as_ref()
                .and_then(|m| m.get("method"))
                .is_some_and(|m| m == "tools/call"),
            _ => false,
        })
        .count()
}

/// The folder the upstream servers write into, removed at the end.
struct Scratch {
    dir: PathBuf,
}

/// What the upstream servers recorded.
struct Upstream {
    /// Their events, merged in time order, each numbered with its connection where there are
    /// several ([`numbered`]).
    trace: Trace,
    processes: usize,
    connections: usize,
}

impl Scratch {
    fn new() -> Result<Scratch, String> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "mcp-sim-check-proxy-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        track_dir(dir.clone());
        Ok(Scratch { dir })
    }

    /// The pids of the upstream servers that marked their start here.
    fn started(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix("upstream-")?
                    .strip_suffix(".started")?
                    .parse()
                    .ok()
            })
            .collect();
        pids.sort_unstable();
        pids
    }

    /// Waits for every upstream server's trace (telling the slow ones to stop), and reads
    /// them.
    fn upstream_traces(&self) -> Result<Upstream, String> {
        let pids = self.started();
        let missing = |pids: &[u32]| -> Vec<u32> {
            pids.iter()
                .copied()
                .filter(|&p| !upstream_files(&self.dir, p).1.exists())
                .collect()
        };
        for round in 0..2 {
            let until = Instant::now() + UPSTREAM_WAIT;
            while !missing(&pids).is_empty() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50));
            }
            if round == 0 {
                missing(&pids).into_iter().for_each(terminate);
            }
        }
        if let Some(pid) = missing(&pids).first() {
            return Err(format!(
                "the reference upstream (pid {pid}) wrote no trace: the intermediary's upstream \
                 hop cannot be judged"
            ));
        }
        let mut connections = Vec::new();
        for &pid in &pids {
            let path = upstream_files(&self.dir, pid).1;
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let trace = Trace::from_jsonl(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            connections.extend(sessions(&trace));
        }
        let count = connections.iter().filter(|c| !c.events.is_empty()).count();
        Ok(Upstream {
            trace: numbered(connections),
            processes: pids.len(),
            connections: count,
        })
    }

    /// The last lines of a log in the folder, for an error message.
    fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(10)..].join("\n");
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its output ended:\n{tail}")
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        untrack_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_expand_into_words_a_command_line_an_url_and_a_port() {
        let up = vec![
            "/bin/mcp-sim".to_string(),
            "serve".into(),
            "--x".into(),
            "a b".into(),
        ];
        let cmd: Vec<String> = [
            "bridge",
            "--port",
            "{port}",
            "--",
            "{upstream}",
            "--cmd={upstream}",
            "{upstream-line}",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            expand(&cmd, &up, "", 4242),
            [
                "bridge",
                "--port",
                "4242",
                "--",
                "/bin/mcp-sim",
                "serve",
                "--x",
                "a b",
                "--cmd=/bin/mcp-sim serve --x 'a b'",
                "/bin/mcp-sim serve --x 'a b'"
            ]
        );
        let cmd = vec!["gw".to_string(), "--upstream={upstream-url}".into()];
        assert_eq!(
            expand(&cmd, &up, "http://127.0.0.1:9/mcp", 1),
            ["gw", "--upstream=http://127.0.0.1:9/mcp"]
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
