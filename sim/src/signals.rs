//! SIGINT and SIGTERM for the live commands: the first ends the run cleanly, a second ends the
//! process at once.
//!
//! The handler only counts signals and keeps the last one's number (atomics: async-signal-safe);
//! a watcher thread turns the first into the run's [`Interrupt`] (and `serve`'s and `record`'s
//! stop flag), so the run ends as documented in [`mcp_sim::lanes::live::interrupt`]: what it
//! started is stopped, its temporary folder removed, its trace ended and what it recorded
//! judged. A second signal means the user will not wait for that: the watcher kills every
//! process group the run started and removes its temporary folders
//! ([`interrupt::abandon`]), says so, and exits 130 without judging. The trace file keeps every
//! event written before (each is written as it happens) and has no end line, which
//! `check-trace` names as a cut.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use mcp_sim::exit::Exit;
use mcp_sim::lanes::live::interrupt::{self, Interrupt};

static COUNT: AtomicUsize = AtomicUsize::new(0);
static LAST: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    LAST.store(signal, Ordering::SeqCst);
    COUNT.fetch_add(1, Ordering::SeqCst);
}

/// The run's interrupt and stop flag, raised by the first SIGINT or SIGTERM.
pub(crate) struct Signals {
    /// Raised with the first signal's number.
    pub(crate) interrupt: Interrupt,
    /// Raised with it (`serve`, `record`).
    pub(crate) stop: Arc<AtomicBool>,
}

static INSTALL: Once = Once::new();

/// Installs the handlers (once) and starts the watcher.
pub(crate) fn catch() -> Signals {
    let signals = Signals {
        interrupt: Interrupt::new(),
        stop: Arc::new(AtomicBool::new(false)),
    };
    INSTALL.call_once(|| {
        #[cfg(unix)]
        // SAFETY: the handler only stores to atomics, which is async-signal-safe.
        unsafe {
            let handler = on_signal as extern "C" fn(libc::c_int);
            libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
            libc::signal(libc::SIGINT, handler as libc::sighandler_t);
        }
    });
    let (interrupt, stop) = (signals.interrupt.clone(), Arc::clone(&signals.stop));
    std::thread::spawn(move || loop {
        match COUNT.load(Ordering::SeqCst) {
            0 => {}
            1 => {
                interrupt.raise(LAST.load(Ordering::SeqCst));
                stop.store(true, Ordering::SeqCst);
            }
            _ => {
                let (groups, dirs) = interrupt::abandon();
                say!(
                    "mcp-sim: a second signal: stopped at once, nothing judged; killed {groups} \
                     process group(s) it started and removed {dirs} temporary folder(s)"
                );
                std::process::exit(Exit::Interrupted.code().into());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    });
    signals
}
