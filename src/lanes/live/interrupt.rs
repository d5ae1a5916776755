//! Stopping a live run early, cleanly: the interrupt a command raises on SIGINT or SIGTERM,
//! and the processes and folders a run must not leave behind.
//!
//! The command owns the signal handler (the library installs none); it raises an
//! [`Interrupt`] that the run's loops look at, as they look at their time bound. `probe` and
//! `check-proxy` then end as at their `--max-seconds`: the calls still open are cancelled (as a
//! client whose user gave up must), the drain window runs, the server is shut down as §5.1
//! says, what started here is stopped, the temporary folder is removed, and what was recorded
//! is judged, the run said to be interrupted. `serve` and `record` take a signal as their
//! normal end.
//!
//! Every process a live run starts is put in a process group of its own and registered here
//! ([`track`]) until it is reaped, with every temporary folder ([`track_dir`]): a second
//! signal, for someone who will not wait for that ending, kills every registered group and
//! removes every registered folder at once ([`abandon`]). A process group, because a peer is
//! often a launcher (`npx`, `uv run`) whose own child is the server.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A request to end a run early, with the signal that asked for it.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicI32>);

/// SIGINT's number.
pub const SIGINT: i32 = 2;
/// SIGTERM's number.
pub const SIGTERM: i32 = 15;

impl Interrupt {
    /// Not raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises it for `signal` (the first signal is kept).
    pub fn raise(&self, signal: i32) {
        let _ = self
            .0
            .compare_exchange(0, signal.max(1), Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The signal, once raised.
    pub fn raised(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// What people read: `interrupted by SIGINT`.
    pub fn describe(signal: i32) -> String {
        match signal {
            SIGINT => "interrupted by SIGINT".into(),
            SIGTERM => "interrupted by SIGTERM".into(),
            s => format!("interrupted by signal {s}"),
        }
    }
}

/// What a run started and has not cleaned up yet.
#[derive(Default)]
struct Registry {
    groups: BTreeSet<u32>,
    dirs: BTreeSet<PathBuf>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    groups: BTreeSet::new(),
    dirs: BTreeSet::new(),
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Registers process `pid`, the leader of its own process group, until [`untrack`].
pub fn track(pid: u32) {
    registry().groups.insert(pid);
}

/// Forgets process `pid` (reaped).
pub fn untrack(pid: u32) {
    registry().groups.remove(&pid);
}

/// Registers a temporary folder until [`untrack_dir`].
pub fn track_dir(dir: PathBuf) {
    registry().dirs.insert(dir);
}

/// Forgets a temporary folder (removed).
pub fn untrack_dir(dir: &std::path::Path) {
    registry().dirs.remove(dir);
}

/// Set once the run is abandoned: nothing more is written to its trace file (the process is
/// about to exit, and the run did not end).
static ABANDONED: AtomicBool = AtomicBool::new(false);

/// Whether the run was abandoned ([`abandon`]).
pub fn abandoned() -> bool {
    ABANDONED.load(Ordering::SeqCst)
}

/// Kills every registered process group (SIGKILL) and removes every registered folder, for a
/// run abandoned at once; returns how many groups and folders there were. From here on the
/// trace file takes no more lines: a run cut short must not look ended.
pub fn abandon() -> (usize, usize) {
    ABANDONED.store(true, Ordering::SeqCst);
    let mut r = registry();
    for &pid in &r.groups {
        signal_group(pid, SIGKILL);
    }
    for dir in &r.dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
    let counts = (r.groups.len(), r.dirs.len());
    r.groups.clear();
    r.dirs.clear();
    counts
}

const SIGKILL: i32 = 9;

/// Sends `signal` to the process group `pid` leads (and so to what it started in turn).
fn signal_group(pid: u32, signal: i32) {
    if let Ok(pid) = i32::try_from(pid) {
        if pid > 0 {
            send(-pid, signal);
        }
    }
}

/// Asks process `pid` to stop (SIGTERM), so that it writes what it recorded.
pub fn terminate(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        if pid > 0 {
            send(pid, SIGTERM);
        }
    }
}

/// kill(2): `signal` to process `pid` (a negative `pid` names a process group); nothing on
/// a platform without signals.
fn send(pid: i32, signal: i32) {
    #[cfg(unix)]
    {
        extern "C" {
            fn kill(pid: i32, sig: i32) -> i32;
        }
        // SAFETY: kill(2) takes a pid and a signal number and touches no memory of ours.
        unsafe {
            kill(pid, signal);
        }
    }
    #[cfg(not(unix))]
    let _ = (pid, signal);
}

/// Kills the process group `pid` leads (SIGKILL): the end of a shutdown that waited in vain.
pub fn kill_group(pid: u32) {
    signal_group(pid, SIGKILL);
}

/// Makes `command`'s process the leader of a new process group, so that [`kill_group`] and
/// [`abandon`] reach what it starts in turn.
pub fn own_group(command: &mut std::process::Command) -> &mut std::process::Command {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signal_is_kept() {
        let i = Interrupt::new();
        assert_eq!(i.raised(), None);
        i.raise(SIGTERM);
        i.clone().raise(SIGINT);
        assert_eq!(i.raised(), Some(SIGTERM));
        assert_eq!(Interrupt::describe(SIGTERM), "interrupted by SIGTERM");
    }
}
