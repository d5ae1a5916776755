//! A live run's trace file, written as the run goes: each event is one line, written the
//! moment it is recorded, between a `begin` and an `end` line ([`crate::trace::frame`]).
//!
//! Why each event is written at once rather than buffered: a run killed at any moment
//! (SIGKILL, a crash, the machine going down) must leave every event it recorded up to the
//! last one, and a buffer would lose its contents. One write per event costs a system call;
//! `sim/benches/serve_load.rs` measures the load it adds. The file is opened before the run
//! starts, so a folder that cannot be written is a usage error before anything runs
//! ([`TraceFile::create`]); a write that fails mid-run (a full disk) stops the file there,
//! says so at once on stderr naming the file, and is reported again at the end
//! ([`TraceFile::finish`]): the run goes on, and is judged from what it holds in memory.
//!
//! A file may be written under a temporary name and moved to its own at the end
//! ([`TraceFile::create_renamed`]), for a reader that waits for the file to appear and must
//! never see it half written (the reference upstream of `check-proxy`).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::lanes::live::interrupt::abandoned;
use crate::trace::frame::{Begin, End, Frame, FORMAT};
use crate::trace::TraceEvent;

/// A trace file being written (a shared handle: the lane writes, the command finishes it).
#[derive(Clone)]
pub struct TraceFile(Arc<Mutex<Inner>>);

struct Inner {
    path: PathBuf,
    /// Where the file moves at the end, when it is written under another name.
    rename_to: Option<PathBuf>,
    /// `None` once finished or failed.
    file: Option<Box<dyn Write + Send>>,
    /// Events written.
    written: u64,
    /// The first write that failed.
    failed: Option<TraceFileError>,
    /// Reused for each line.
    line: Vec<u8>,
}

/// A trace file that could not be written: the file and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceFileError {
    /// The file.
    pub path: PathBuf,
    /// The operating system's reason.
    pub message: String,
    /// The events written before it failed.
    pub written: u64,
}

impl std::fmt::Display for TraceFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot write the trace {}: {} ({} events written before)",
            self.path.display(),
            self.message,
            self.written
        )
    }
}

impl std::error::Error for TraceFileError {}

impl std::fmt::Debug for TraceFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("TraceFile")
            .field("path", &inner.path)
            .field("written", &inner.written)
            .finish()
    }
}

impl TraceFile {
    /// Creates (or truncates) `path` and writes its `begin` line naming the recorder `by`
    /// (`mcp-sim serve`). An error names the file: the run must not start.
    pub fn create(path: &Path, by: &str) -> Result<TraceFile, TraceFileError> {
        Self::open(path.to_path_buf(), None, by)
    }

    /// As [`TraceFile::create`], writing to `part` and moving it to `path` once finished.
    pub fn create_renamed(part: &Path, path: &Path, by: &str) -> Result<TraceFile, TraceFileError> {
        Self::open(part.to_path_buf(), Some(path.to_path_buf()), by)
    }

    fn open(
        path: PathBuf,
        rename_to: Option<PathBuf>,
        by: &str,
    ) -> Result<TraceFile, TraceFileError> {
        let error = |e: std::io::Error| TraceFileError {
            path: path.clone(),
            message: e.to_string(),
            written: 0,
        };
        let file = File::create(&path).map_err(error)?;
        Self::over(Box::new(file), path.clone(), rename_to, by).map_err(error)
    }

    /// A trace file writing to `file`, which stands for `path`.
    fn over(
        mut file: Box<dyn Write + Send>,
        path: PathBuf,
        rename_to: Option<PathBuf>,
        by: &str,
    ) -> std::io::Result<TraceFile> {
        let begin = Frame::Begin(Begin {
            format: FORMAT,
            by: by.into(),
        });
        writeln!(file, "{}", begin.line())?;
        Ok(TraceFile(Arc::new(Mutex::new(Inner {
            path,
            rename_to,
            file: Some(file),
            written: 0,
            failed: None,
            line: Vec::with_capacity(512),
        }))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `event` as one line, in one write. After a failed write nothing more is written
    /// (the file stays valid up to its last whole line), and the failure is said once, now.
    pub fn write(&self, event: &TraceEvent) {
        let mut inner = self.lock();
        if abandoned() {
            return;
        }
        let Inner {
            file,
            line,
            written,
            ..
        } = &mut *inner;
        let Some(f) = file else { return };
        line.clear();
        serde_json::to_writer(&mut *line, event).expect("trace events serialize");
        line.push(b'\n');
        match f.write_all(line) {
            Ok(()) => *written += 1,
            Err(e) => inner.fail(&e),
        }
    }

    /// The write that failed, if one did.
    pub fn failed(&self) -> Option<TraceFileError> {
        self.lock().failed.clone()
    }

    /// The file being written (its temporary name, for one written under another).
    pub fn path(&self) -> PathBuf {
        self.lock().path.clone()
    }

    /// Ends the file: the `end` line with `reason` and the count, flushed to disk, then moved
    /// to its own name if it has one. Nothing is written after. The error of a write that
    /// failed, now or during the run, names the file; a finished file finishes again as a
    /// no-op.
    pub fn finish(&self, reason: &str) -> Result<(), TraceFileError> {
        let mut inner = self.lock();
        if abandoned() {
            return Ok(());
        }
        if let Some(mut f) = inner.file.take() {
            let end = Frame::End(End {
                events: inner.written,
                reason: reason.into(),
            });
            let done = writeln!(f, "{}", end.line()).and_then(|()| f.flush());
            drop(f);
            let moved = done.and_then(|()| match &inner.rename_to {
                Some(to) => std::fs::rename(&inner.path, to),
                None => Ok(()),
            });
            if let Err(e) = moved {
                inner.fail(&e);
            }
        }
        match &inner.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

impl Inner {
    fn fail(&mut self, e: &std::io::Error) {
        self.file = None;
        let error = TraceFileError {
            path: self.path.clone(),
            message: e.to_string(),
            written: self.written,
        };
        eprintln!("mcp-sim: {error}; the run goes on, judged from memory");
        self.failed.get_or_insert(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;
    use crate::trace::{EventKind, Side, Trace};

    fn event(t: u64) -> TraceEvent {
        let mut trace = Trace::new();
        trace.push(
            Time::from_millis(t),
            Side::Server,
            EventKind::Comment { stream: None },
        );
        trace.events.remove(0)
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-sim-trace-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch");
        dir.join(name)
    }

    #[test]
    fn each_event_is_on_disk_once_written_and_the_end_line_closes_the_file() {
        let path = scratch("whole.jsonl");
        let file = TraceFile::create(&path, "mcp-sim serve").expect("creates");
        file.write(&event(1));
        file.write(&event(2));
        // Before the end: a reader finds both events, and a cut.
        let text = std::fs::read_to_string(&path).expect("reads");
        let r = Trace::read_jsonl(&text).expect("valid");
        assert_eq!(r.trace.events.len(), 2);
        assert!(matches!(
            r.cut,
            Some(crate::trace::frame::Cut::NoEnd { .. })
        ));
        file.finish("stopped by a signal").expect("finishes");
        file.write(&event(3)); // after the end: nothing
        let text = std::fs::read_to_string(&path).expect("reads");
        let r = Trace::read_jsonl(&text).expect("valid");
        assert_eq!((r.trace.events.len(), r.cut), (2, None));
        assert_eq!(r.end.expect("end").reason, "stopped by a signal");
    }

    #[test]
    fn a_folder_that_cannot_be_written_is_an_error_naming_the_file() {
        let path = scratch("no-such-folder").join("t.jsonl");
        let e = TraceFile::create(&path, "mcp-sim probe").unwrap_err();
        assert_eq!(e.path, path);
        assert!(e.to_string().contains("no-such-folder"), "{e}");
    }

    /// A disk that fills after `room` bytes.
    struct Filling {
        room: usize,
        kept: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Filling {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if buf.len() > self.room {
                return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
            }
            self.room -= buf.len();
            self.kept.lock().expect("kept").extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_write_that_fails_mid_run_stops_the_file_at_its_last_whole_line_and_names_it() {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let disk = Filling {
            room: 150,
            kept: Arc::clone(&kept),
        };
        let path = PathBuf::from("/full/disk.jsonl");
        let file = TraceFile::over(Box::new(disk), path.clone(), None, "mcp-sim serve")
            .expect("the begin line fits");
        for t in 0..10 {
            file.write(&event(t));
        }
        let e = file.failed().expect("failed");
        assert_eq!(e.path, path);
        let written = e.written;
        assert!((1..10).contains(&written), "{written}");
        assert_eq!(file.finish("end").unwrap_err(), e);
        assert!(e.to_string().contains("/full/disk.jsonl"), "{e}");
        // What reached the disk reads up to its last whole line, named as a cut.
        let text = String::from_utf8(kept.lock().expect("kept").clone()).expect("utf-8");
        let r = Trace::read_jsonl(&text).expect("valid");
        assert_eq!(r.trace.events.len() as u64, written);
        assert!(r.cut.is_some());
    }

    #[test]
    fn a_renamed_file_appears_under_its_name_only_when_finished() {
        let (part, path) = (scratch("up.part"), scratch("up.jsonl"));
        let _ = std::fs::remove_file(&path);
        let file = TraceFile::create_renamed(&part, &path, "mcp-sim serve").expect("creates");
        file.write(&event(1));
        assert!(!path.exists());
        file.finish("the client closed stdin").expect("finishes");
        assert!(path.exists() && !part.exists());
        let r = Trace::read_jsonl(&std::fs::read_to_string(&path).expect("reads")).expect("ok");
        assert_eq!((r.trace.events.len(), r.cut), (1, None));
    }
}
