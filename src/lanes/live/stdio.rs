//! A real server's stdio: its process, a thread reading its stdout (which can stall on
//! purpose, to apply back-pressure), a thread writing its stdin (so a server that stops
//! reading never blocks the caller's clock), and the §5.1 shutdown.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Input;

/// How long a server may take to exit once its stdin closed, before it is killed.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The server process of a stdio probe and the threads around it.
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
        let mut child = Command::new(&command[0])
            .args(&command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let (tx, rx) = mpsc::channel();
        let stall_until = Arc::new(Mutex::new(None));
        let stdout = child.stdout.take().expect("stdout is piped");
        pump(stdout, Some(tx), Arc::clone(&stall_until));
        let stderr = child.stderr.take().expect("stderr is piped");
        pump(stderr, None, Arc::new(Mutex::new(None)));
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
                let after = closed_at.elapsed().as_millis();
                return format!("exited {after} ms after its stdin closed ({status})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
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
                return format!("exited ({status})");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        "closed its stdout".into()
    }
}

/// Reads `from` in a thread, forwarding chunks (or dropping them when `tx` is `None`). While
/// `stall_until` lies ahead, what was read waits: the server's further writes fill the pipe.
pub fn pump(
    mut from: impl Read + Send + 'static,
    tx: Option<mpsc::Sender<Input>>,
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
                    if let Some(tx) = &tx {
                        if tx.send(Input::Bytes(buf[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                }
            }
        }
        if let Some(tx) = tx {
            let _ = tx.send(Input::Eof);
        }
    });
}

/// Writes lines to the server's stdin in a thread, so a server that stops reading never blocks
/// the probe's clock; stdin closes when the sender is dropped (or the server is killed).
pub fn writer(mut stdin: ChildStdin, errors: Arc<AtomicUsize>) -> mpsc::Sender<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for line in rx {
            if stdin.write_all(&line).and_then(|()| stdin.flush()).is_err() {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    tx
}
