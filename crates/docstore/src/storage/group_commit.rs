//! The journal's writer side: writers encode into a shared buffer, one background thread writes
//! and fsyncs that buffer every commit interval (or at once when a `j: true` writer waits), and
//! publishes how far the journal is durable.
//!
//! Many `j: true` writers share one fsync: each appends, marks the buffer urgent and waits; the
//! flusher takes everything appended so far in one batch, so writers that arrive while an fsync
//! runs are all carried by the next one.
//!
//! When the journal cannot be written (disk full, I/O error, read-only file system) the store
//! stops taking writes at once: [`Shared::check_writable`] fails, so commands refuse writes before
//! changing anything, and writers already waiting for `j: true` are told it failed. The batch that
//! failed stays queued, in order, and is retried every commit interval; the first retry that
//! succeeds makes the store writable again. So the writes acknowledged but not yet on disk are at
//! most those of the one commit interval before the failure.

use super::faults::{DiskFaults, FaultyFile};
use super::{segment_name, MAX_SPARE_CAPACITY};
use crate::error::{Error, ErrorCode};
use parking_lot::{Condvar, Mutex};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;
use tracing::{error, warn};

/// While writes are refused, the log says so again this often (not on every retry).
const REMIND_EVERY: Duration = Duration::from_secs(30);

/// Appended records that the flusher has not yet taken.
pub(super) struct Pending {
    pub(super) bytes: Vec<u8>,
    /// Sequence number of the last append group in `bytes` (or already taken).
    pub(super) last_lsn: u64,
    /// Someone waits in `wait_durable`: commit now rather than at the next tick.
    pub(super) urgent: bool,
    pub(super) shutdown: bool,
}

/// The open journal segment. Taking the pending buffer happens under this lock, so batches
/// reach the file in append order even when the flusher, `flush` and `rotate` race.
pub(super) struct Writer {
    pub(super) file: FaultyFile,
    pub(super) segment: u64,
    /// Bytes of the segment known to be written and synced.
    pub(super) len: u64,
    /// A batch whose write failed: it is written again, before anything newer, at the next commit.
    pub(super) failed: Vec<u8>,
    /// An emptied buffer kept to swap in for the pending one, to reuse its capacity.
    pub(super) spare: Vec<u8>,
}

impl Writer {
    fn write_batch(&mut self, batch: &[u8]) -> io::Result<()> {
        let len = self.len;
        let file = &mut self.file;
        // After a failed attempt the file may hold part of a batch: overwrite it.
        let result = file
            .write_all_at(len, batch)
            .and_then(|()| file.sync_data());
        match result {
            Ok(()) => {
                self.len += batch.len() as u64;
                Ok(())
            }
            Err(e) => {
                // Give the partial batch's space back, so that the retry starts clean.
                let _ = self.file.set_len(self.len);
                Err(e)
            }
        }
    }
}

/// Why the journal cannot be written right now, as commands and `serverStatus` report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalFailure {
    /// The disk (or the user's quota) is full, rather than failing or read-only.
    pub out_of_space: bool,
    /// What failed, for people: the journal file and the OS error.
    pub message: String,
    /// When the journal first failed to be written.
    pub since: SystemTime,
    /// Failed attempts to write it so far.
    pub attempts: u64,
}

/// A write refused (or not confirmed durable) because the journal cannot be written. Here
/// rather than in `error`, which stays below storage.
impl From<&JournalFailure> for Error {
    fn from(failure: &JournalFailure) -> Error {
        let code = if failure.out_of_space {
            ErrorCode::OutOfDiskSpace
        } else {
            ErrorCode::LogWriteFailed
        };
        Error::new(code, failure.message.clone())
    }
}

impl JournalFailure {
    fn from_io(e: &io::Error, path: &str, since: SystemTime, attempts: u64) -> JournalFailure {
        let out_of_space = matches!(
            e.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        );
        let what = if out_of_space {
            "the disk is full"
        } else {
            "the disk failed"
        };
        JournalFailure {
            out_of_space,
            message: format!(
                "docstore refuses writes: {what} and the journal {path} cannot be written ({e}); \
                 writes resume once it can be"
            ),
            since,
            attempts,
        }
    }
}

/// What `wait_durable` watches: how far the journal is on disk, and whether it is failing.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Durability {
    pub(super) lsn: u64,
    pub(super) failing: bool,
}

/// The failure in progress, with what the rate-limited log needs.
struct Failing {
    report: JournalFailure,
    started: Instant,
    last_logged: Instant,
}

/// A snapshot of the writer's state for `serverStatus`.
#[derive(Debug, Clone)]
pub struct JournalStatus {
    pub failure: Option<JournalFailure>,
    /// Successful group commits (write + fsync) since the store opened.
    pub commits: u64,
    /// Acknowledged bytes not yet written to disk.
    pub pending_bytes: u64,
    pub durable_lsn: u64,
    pub last_lsn: u64,
    /// Journal bytes written since the last snapshot.
    pub journal_bytes: u64,
    /// Time spent writing and fsyncing group commits since the store opened.
    pub commit_time: Duration,
    /// When the newest snapshot was written by this process (`None` before the first).
    pub last_snapshot: Option<SystemTime>,
}

pub(super) struct Shared {
    pub(super) dir: PathBuf,
    pub(super) commit_interval: Duration,
    pub(super) pending: Mutex<Pending>,
    pub(super) wake: Condvar,
    pub(super) writer: Mutex<Writer>,
    pub(super) durable: watch::Sender<Durability>,
    pub(super) journal_bytes: AtomicU64,
    /// Snapshots are written one at a time, so their clean-ups never race.
    pub(super) snapshot_lock: Mutex<()>,
    /// False from the first failed commit until one succeeds: writes are refused.
    writable: AtomicBool,
    failing: Mutex<Option<Failing>>,
    commits: AtomicU64,
    /// Nanoseconds spent in successful group commits (write + fsync).
    commit_nanos: AtomicU64,
    pub(super) last_snapshot: Mutex<Option<SystemTime>>,
    appended_total: AtomicU64,
    written_total: AtomicU64,
    pub(super) faults: Option<DiskFaults>,
}

impl Shared {
    pub(super) fn new(
        dir: PathBuf,
        commit_interval: Duration,
        writer: Writer,
        journal_bytes: u64,
        faults: Option<DiskFaults>,
    ) -> Shared {
        let (durable, _) = watch::channel(Durability::default());
        Shared {
            dir,
            commit_interval,
            pending: Mutex::new(Pending {
                bytes: Vec::new(),
                last_lsn: 0,
                urgent: false,
                shutdown: false,
            }),
            wake: Condvar::new(),
            writer: Mutex::new(writer),
            durable,
            journal_bytes: AtomicU64::new(journal_bytes),
            snapshot_lock: Mutex::new(()),
            writable: AtomicBool::new(true),
            failing: Mutex::new(None),
            commits: AtomicU64::new(0),
            commit_nanos: AtomicU64::new(0),
            last_snapshot: Mutex::new(None),
            appended_total: AtomicU64::new(0),
            written_total: AtomicU64::new(0),
            faults,
        }
    }

    /// Queue one framed record; returns its sequence number.
    pub(super) fn append_record(&self, record: &[u8]) -> u64 {
        self.journal_bytes
            .fetch_add(record.len() as u64, Ordering::Relaxed);
        self.appended_total
            .fetch_add(record.len() as u64, Ordering::Relaxed);
        let mut p = self.pending.lock();
        p.bytes.extend_from_slice(record);
        p.last_lsn += 1;
        p.last_lsn
    }

    /// `Err` while the journal cannot be written: the caller must not change anything.
    pub(super) fn check_writable(&self) -> Result<(), JournalFailure> {
        if self.writable.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.failure() {
            Some(f) => Err(f),
            // Healed between the two loads.
            None => Ok(()),
        }
    }

    pub(super) fn failure(&self) -> Option<JournalFailure> {
        self.failing.lock().as_ref().map(|f| f.report.clone())
    }

    pub(super) fn status(&self) -> JournalStatus {
        let appended = self.appended_total.load(Ordering::Relaxed);
        let written = self.written_total.load(Ordering::Relaxed);
        JournalStatus {
            failure: self.failure(),
            commits: self.commits.load(Ordering::Relaxed),
            pending_bytes: appended.saturating_sub(written),
            durable_lsn: self.durable.borrow().lsn,
            last_lsn: self.pending.lock().last_lsn,
            journal_bytes: self.journal_bytes.load(Ordering::Relaxed),
            commit_time: Duration::from_nanos(self.commit_nanos.load(Ordering::Relaxed)),
            last_snapshot: *self.last_snapshot.lock(),
        }
    }

    /// Wait until everything up to `lsn` is on disk, or the journal fails.
    pub(super) async fn wait_durable(&self, lsn: u64) -> Result<(), JournalFailure> {
        let mut durable = self.durable.subscribe();
        if durable.borrow().lsn >= lsn {
            return Ok(());
        }
        self.pending.lock().urgent = true;
        self.wake.notify_one();
        let reached = match durable.wait_for(|d| d.lsn >= lsn || d.failing).await {
            Ok(d) => d.lsn >= lsn,
            // The storage is being dropped: nobody will make it durable any more.
            Err(_) => false,
        };
        if reached {
            return Ok(());
        }
        Err(self.failure().unwrap_or_else(|| JournalFailure {
            out_of_space: false,
            message: "docstore is shutting down and could not confirm the journal write".into(),
            since: SystemTime::now(),
            attempts: 0,
        }))
    }

    pub(super) fn commit(&self) -> io::Result<()> {
        let mut w = self.writer.lock();
        self.commit_locked(&mut w)
    }

    /// Write and fsync everything appended so far, then publish it as durable.
    pub(super) fn commit_locked(&self, w: &mut Writer) -> io::Result<()> {
        let spare = std::mem::take(&mut w.spare);
        let (mut batch, lsn) = {
            let mut p = self.pending.lock();
            p.urgent = false;
            (std::mem::replace(&mut p.bytes, spare), p.last_lsn)
        };
        if !w.failed.is_empty() {
            let mut retry = std::mem::take(&mut w.failed);
            retry.extend_from_slice(&batch);
            batch = retry;
        }
        if !batch.is_empty() {
            let started = std::time::Instant::now();
            if let Err(e) = w.write_batch(&batch) {
                let path = self.dir.join(segment_name(w.segment));
                self.note_failure(&e, &path.display().to_string(), batch.len());
                w.failed = batch;
                return Err(e);
            }
            self.commits.fetch_add(1, Ordering::Relaxed);
            let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.commit_nanos.fetch_add(took, Ordering::Relaxed);
            self.written_total
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
        }
        batch.clear();
        if batch.capacity() <= MAX_SPARE_CAPACITY {
            w.spare = batch;
        }
        let healed = self.failing.lock().take();
        self.durable.send_if_modified(|d| {
            let changed = lsn > d.lsn || d.failing;
            d.lsn = d.lsn.max(lsn);
            d.failing = false;
            changed
        });
        if let Some(f) = healed {
            self.writable.store(true, Ordering::Release);
            warn!(
                failed_for_secs = f.started.elapsed().as_secs(),
                attempts = f.report.attempts,
                "the journal can be written again: the writes that waited are on disk and \
                 writes are accepted again"
            );
        }
        Ok(())
    }

    /// Refuse writes from now on, wake `j: true` waiters, and log (once, then periodically).
    fn note_failure(&self, e: &io::Error, path: &str, pending: usize) {
        let now = Instant::now();
        let mut failing = self.failing.lock();
        match failing.as_mut() {
            None => {
                let report = JournalFailure::from_io(e, path, SystemTime::now(), 1);
                error!(
                    pending_bytes = pending,
                    "{}; retrying every {:?}", report.message, self.commit_interval
                );
                *failing = Some(Failing {
                    report,
                    started: now,
                    last_logged: now,
                });
            }
            Some(f) => {
                let attempts = f.report.attempts + 1;
                let report = JournalFailure::from_io(e, path, f.report.since, attempts);
                let changed = report.out_of_space != f.report.out_of_space;
                if changed || now.duration_since(f.last_logged) >= REMIND_EVERY {
                    error!(
                        pending_bytes = pending,
                        attempts,
                        failing_for_secs = f.started.elapsed().as_secs(),
                        "still refusing writes: {}",
                        report.message
                    );
                    f.last_logged = now;
                }
                f.report = report;
            }
        }
        self.writable.store(false, Ordering::Release);
        drop(failing);
        self.durable.send_if_modified(|d| {
            let changed = !d.failing;
            d.failing = true;
            changed
        });
    }
}

pub(super) fn run_flusher(shared: Arc<Shared>) {
    loop {
        let shutdown = {
            let mut p = shared.pending.lock();
            if !p.urgent && !p.shutdown {
                shared.wake.wait_for(&mut p, shared.commit_interval);
            }
            p.shutdown
        };
        // Failures were logged and the failed batch is kept; it is retried at the next tick.
        let _ = shared.commit();
        if shutdown {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::faults::{DiskFaults, EIO, EROFS};
    use super::super::{list_dir, CollectionImage, JournalOp, Recovered, Storage};
    use bson::doc;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// Long enough that only explicit flushes and `j: true` waiters commit.
    const NEVER: Duration = Duration::from_secs(3600);
    const FAST: Duration = Duration::from_millis(10);

    fn put(i: i32) -> JournalOp {
        JournalOp::Put {
            db: "shop".into(),
            coll: "items".into(),
            doc: crate::stored::StoredDoc::from_document(
                &doc! {"_id": i, "name": format!("item {i}")},
            )
            .unwrap(),
        }
    }

    fn open_faulty(dir: &Path, interval: Duration) -> (Storage, DiskFaults) {
        let faults = DiskFaults::new();
        let (s, _) = Storage::open_with_faults(dir, interval, Some(faults.clone())).unwrap();
        (s, faults)
    }

    fn reopen(dir: &Path) -> Recovered {
        Storage::open(dir, FAST).unwrap().1
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn a_full_disk_refuses_writes_fails_waiters_and_resumes_in_order_when_space_returns() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, faults) = open_faulty(dir.path(), NEVER);
            s.append(&[put(1)]);
            s.flush().unwrap();
            assert!(s.check_writable().is_ok());

            faults.fill_after(0);
            // Accepted before anyone knew the disk was full: the one interval's worth at risk.
            let second = s.append(&[put(2)]);
            let err = s.flush().unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::StorageFull);
            let failure = s.check_writable().unwrap_err();
            assert!(failure.out_of_space);
            assert!(
                failure.message.contains("disk is full"),
                "{}",
                failure.message
            );
            assert!(
                s.durable_lsn() < second,
                "a failed write was reported durable"
            );
            // A `j: true` waiter gets an answer, and it is a refusal, not a hang.
            let waited = runtime().block_on(async {
                tokio::time::timeout(Duration::from_secs(5), s.wait_durable(second)).await
            });
            let refused = waited.expect("the waiter was answered").unwrap_err();
            assert_eq!(refused.message, failure.message);
            let status = s.journal_status().unwrap();
            let attempts = status.failure.expect("the failure is reported").attempts;
            assert!(status.pending_bytes > 0);
            // Retries keep failing, and keep the bytes, while the disk stays full.
            assert!(s.flush().is_err());
            // At least this flush's attempt is counted (the committer thread may have retried
            // too, so more is fine; fewer would mean a retry went unreported).
            let after = s.journal_status().unwrap().failure.unwrap().attempts;
            assert!(after > attempts, "attempts {attempts} -> {after}");

            faults.heal();
            s.flush().unwrap();
            assert!(s.check_writable().is_ok());
            assert!(s.durable_lsn() >= second);
            assert_eq!(s.journal_status().unwrap().pending_bytes, 0);
            let third = s.append(&[put(3)]);
            runtime().block_on(s.wait_durable(third)).unwrap();
        }
        assert_eq!(reopen(dir.path()).ops, vec![put(1), put(2), put(3)]);
    }

    #[test]
    fn the_flusher_alone_notices_a_full_disk_within_an_interval_and_resumes_when_space_returns() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, faults) = open_faulty(dir.path(), FAST);
            faults.fill_after(40);
            for i in 0..10 {
                s.append(&[put(i)]);
            }
            wait_until("writes are refused", || s.check_writable().is_err());
            let lsn = s.last_lsn();
            assert!(runtime().block_on(s.wait_durable(lsn)).is_err());
            faults.heal();
            wait_until("writes are accepted again", || s.check_writable().is_ok());
            assert!(s.durable_lsn() >= lsn);
        }
        assert_eq!(reopen(dir.path()).ops, (0..10).map(put).collect::<Vec<_>>());
    }

    #[test]
    fn an_io_error_or_a_read_only_disk_is_not_reported_as_a_full_disk() {
        for errno in [EIO, EROFS] {
            let dir = tempfile::tempdir().unwrap();
            let (s, faults) = open_faulty(dir.path(), NEVER);
            faults.fail_with(errno);
            s.append(&[put(1)]);
            assert!(s.flush().is_err());
            let failure = s.check_writable().unwrap_err();
            assert!(!failure.out_of_space, "errno {errno}");
            assert!(
                failure.message.contains("disk failed"),
                "{}",
                failure.message
            );
        }
    }

    #[test]
    fn a_crash_while_the_disk_is_full_recovers_exactly_what_reached_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, faults) = open_faulty(dir.path(), NEVER);
            let rt = runtime();
            // `j: true` writes: acknowledged only once on disk.
            for i in 0..5 {
                let lsn = s.append(&[put(i)]);
                rt.block_on(s.wait_durable(lsn)).unwrap();
            }
            faults.fill_after(30);
            let lsn = s.append(&[put(5)]);
            assert!(rt.block_on(s.wait_durable(lsn)).is_err());
            // Dropped with the disk still full: its last commit fails too, so nothing more
            // reaches the disk, as when the process is killed.
        }
        assert_eq!(reopen(dir.path()).ops, (0..5).map(put).collect::<Vec<_>>());
    }

    #[test]
    fn a_snapshot_that_runs_out_of_space_leaves_the_previous_snapshot_and_journal_intact() {
        let dir = tempfile::tempdir().unwrap();
        let image = |n: i32| CollectionImage {
            db: "shop".into(),
            coll: "items".into(),
            options: doc! {},
            indexes: vec![],
            docs: (0..n)
                .map(|i| {
                    crate::stored::StoredDoc::from_document(
                        &doc! {"_id": i, "name": format!("item {i}")},
                    )
                    .unwrap()
                })
                .collect(),
        };
        let first;
        {
            let (s, faults) = open_faulty(dir.path(), NEVER);
            s.append(&[put(1)]);
            first = s.rotate().unwrap();
            s.write_snapshot(first, &[image(1)]).unwrap();
            s.append(&[put(2)]);
            let second = s.rotate().unwrap();
            faults.fill_after(100);
            let err = s.write_snapshot(second, &[image(500)]).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::StorageFull);
            faults.heal();
            s.append(&[put(3)]);
        }
        let listing = list_dir(dir.path()).unwrap();
        assert_eq!(listing.snapshots, vec![first]);
        assert!(
            listing.tmp.is_empty(),
            "the half-written snapshot was left behind"
        );
        let rec = reopen(dir.path());
        assert_eq!(rec.collections.len(), 1);
        assert_eq!(rec.collections[0].docs.len(), 1);
        assert_eq!(rec.ops, vec![put(2), put(3)]);
    }

    #[test]
    fn many_concurrent_j_true_writers_share_one_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let (s, faults) = open_faulty(dir.path(), NEVER);
        // A slow disk: every writer that arrives during an fsync must ride on the next one.
        faults.slow_sync(Duration::from_millis(20));
        let s = Arc::new(s);
        let writers = 64;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let tasks: Vec<_> = (0..writers)
                .map(|i| {
                    let s = Arc::clone(&s);
                    tokio::spawn(async move {
                        let lsn = s.append(&[put(i)]);
                        s.wait_durable(lsn).await.unwrap();
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        let commits = s.journal_status().unwrap().commits;
        assert!(commits >= 1);
        assert!(
            commits <= 8,
            "{writers} j:true writers needed {commits} fsyncs: waiters are not grouped"
        );
    }

    /// A tmpfs of a few MB, mounted for one test; unmounted when dropped.
    struct SmallDisk {
        dir: tempfile::TempDir,
    }

    impl SmallDisk {
        fn mount(size: &str) -> Result<SmallDisk, String> {
            let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
            let out = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(dir.path())
                .output()
                .map_err(|e| format!("cannot run mount: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "mount -t tmpfs failed (needs root): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(SmallDisk { dir })
        }
    }

    impl Drop for SmallDisk {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg(self.dir.path())
                .status();
        }
    }

    #[test]
    fn a_real_full_file_system_refuses_writes_and_resumes_when_space_is_freed() {
        let disk = match SmallDisk::mount("2m") {
            Ok(disk) => disk,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        let data = disk.dir.path().join("data");
        let ballast = disk.dir.path().join("ballast");
        std::fs::write(&ballast, vec![0u8; 512 * 1024]).unwrap();
        let big = |i: i32| JournalOp::Put {
            db: "shop".into(),
            coll: "items".into(),
            doc: crate::stored::StoredDoc::from_document(
                &doc! {"_id": i, "pad": "x".repeat(16 * 1024)},
            )
            .unwrap(),
        };
        let mut acknowledged = Vec::new();
        {
            let (s, _) = Storage::open(&data, NEVER).unwrap();
            let rt = runtime();
            for i in 0.. {
                assert!(i < 1000, "a 2 MB file system never filled up");
                if s.check_writable().is_err() {
                    break;
                }
                let lsn = s.append(&[big(i)]);
                if rt.block_on(s.wait_durable(lsn)).is_ok() {
                    acknowledged.push(big(i));
                }
            }
            assert!(s.check_writable().unwrap_err().out_of_space);
            std::fs::remove_file(&ballast).unwrap();
            s.flush().unwrap();
            assert!(s.check_writable().is_ok());
            let lsn = s.append(&[big(5000)]);
            rt.block_on(s.wait_durable(lsn)).unwrap();
        }
        let ops = Storage::open(&data, FAST).unwrap().1.ops;
        assert_eq!(ops[..acknowledged.len()], acknowledged[..]);
        // The refused write was kept in order and written once space returned; then the next.
        assert_eq!(ops.len(), acknowledged.len() + 2);
        assert_eq!(ops.last(), Some(&big(5000)));
    }
}
