//! A real server's stdio: its process, a thread reading its stdout (which can stall on
//! purpose, to apply back-pressure), a thread writing its stdin (so a server that stops
//! reading never blocks the caller's clock), and the §5.1 shutdown.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::lanes::live::interrupt::{kill_group, own_group, track, untrack};
use crate::lanes::live::Input;

/// How long a server may take to exit once its stdin closed, before it is killed.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The server process of a stdio probe and the threads around it. It leads a process group
/// of its own, so a kill reaches what it started (a launcher's server).
pub struct Process {
    child: Child,
    /// Lines for the writer thread; dropping it closes the server's stdin.
    pub stdin: Option<mpsc::Sender<Vec<u8>>>,
    /// Until when the stdout reader holds what it read (a stall).
    pub stall_until: Arc<Mutex<Option<Instant>>>,
}

impl Process {
    /// Starts `command` with piped stdio; its stdout arrives on the returned channel.
    pub fn spawn(
        command: &[String],
        write_errors: &Arc<AtomicUsize>,
    ) -> std::io::Result<(Process, Receiver<Input>)> {
        let mut child = own_group(Command::new(&command[0]).args(&command[1..]))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        track(child.id());
        let (tx, rx) = mpsc::channel();
        let stall_until = Arc::new(Mutex::new(None));
        let stdout = child.stdout.take().expect("stdout is piped");
        pump(
            stdout,
            move |i| tx.send(i).is_ok(),
            Arc::clone(&stall_until),
        );
        let stderr = child.stderr.take().expect("stderr is piped");
        pump(stderr, |_| true, Arc::new(Mutex::new(None)));
        let stdin = writer(
            child.stdin.take().expect("stdin is piped"),
            Arc::clone(write_errors),
        );
        Ok((
            Process {
                child,
                stdin: Some(stdin),
                stall_until,
            },
            rx,
        ))
    }

    /// Closes stdin, gives the server [`EXIT_GRACE`] to exit on EOF, then kills it (§5.1).
    /// Returns how it ended, for the report.
    pub fn stop(&mut self) -> String {
        self.stdin = None;
        let closed_at = Instant::now();
        while closed_at.elapsed() < EXIT_GRACE {
            if let Ok(Some(status)) = self.child.try_wait() {
                untrack(self.child.id());
                let after = closed_at.elapsed().as_millis();
                return format!("exited {after} ms after its stdin closed ({status})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
        untrack(self.child.id());
        format!(
            "still running {} s after its stdin closed: killed",
            EXIT_GRACE.as_secs()
        )
    }

    /// How the process ended, once it closed its stdout (waits briefly for the exit status).
    pub fn exit_status(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                untrack(self.child.id());
                return format!("exited ({status})");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        "closed its stdout".into()
    }
}

impl Drop for Process {
    /// A server still running when its process is dropped (a run that ended without
    /// [`Process::stop`]) is not left behind.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            kill_group(self.child.id());
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        untrack(self.child.id());
    }
}

/// Reads `from` in a thread, handing each chunk to `sink` as [`Input::Bytes`] and the end as
/// [`Input::Eof`]; `sink` returns false to stop reading. While `stall_until` lies ahead, what
/// was read waits: the writer's further writes fill the pipe (back-pressure).
pub fn pump(
    mut from: impl Read + Send + 'static,
    sink: impl Fn(Input) -> bool + Send + 'static,
    stall_until: Arc<Mutex<Option<Instant>>>,
) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let until = *stall_until.lock().expect("stall");
                    if let Some(until) = until {
                        std::thread::sleep(until.saturating_duration_since(Instant::now()));
                    }
                    if !sink(Input::Bytes(buf[..n].to_vec())) {
                        break;
                    }
                }
            }
        }
        sink(Input::Eof);
    });
}

/// Writes chunks to `out` in a thread, so a reader that stops reading never blocks the
/// caller's clock; `out` closes when the sender is dropped. Failed writes are counted.
pub fn writer(
    mut out: impl Write + Send + 'static,
    errors: Arc<AtomicUsize>,
) -> mpsc::Sender<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for chunk in rx {
            if out.write_all(&chunk).and_then(|()| out.flush()).is_err() {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    tx
}
