//! Durability: an append-only, checksummed journal of logical operations with group commit, and
//! snapshots that let the journal be compacted. In-memory mode keeps nothing on disk.
//!
//! A data directory holds `journal-<n>.log` segments, `snapshot-<n>.db` files, optionally the
//! snapshots' kept indexes `indexes-<n>.db` (see [`kept`]) and a `LOCK` file. Snapshot `n` holds
//! everything journaled before segment `n`; recovery loads the newest intact snapshot (with its
//! kept indexes when they are intact) and replays segments `n, n+1, ...` on top. Writers only encode into a shared buffer;
//! one background thread writes and fsyncs that buffer every commit interval, or at once when a
//! `j: true` writer is waiting, and publishes the durable sequence number.

pub(crate) mod faults;
mod files;
mod group_commit;
pub(crate) mod journal;
pub(crate) mod kept;
pub(crate) mod private;
mod records;
pub(crate) mod recovery;
pub(crate) mod snapshot;

pub use crate::stored::StoredDoc;
pub(crate) use faults::DiskFaults;
use faults::FaultyFile;
use files::*;
use group_commit::{run_flusher, Shared, Writer};
pub(crate) use group_commit::{JournalFailure, JournalStatus};
use recovery::{choose_base, quarantine_snapshots_after, replay};

use bson::{Bson, Document};
use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tracing::{error, info, warn};

/// One logical change, journaled after it has been applied in memory.
#[derive(Debug, Clone, PartialEq)]
pub enum JournalOp {
    CreateCollection {
        db: String,
        coll: String,
        options: Document,
    },
    DropCollection {
        db: String,
        coll: String,
    },
    DropDatabase {
        db: String,
    },
    RenameCollection {
        db: String,
        from: String,
        to_db: String,
        to: String,
    },
    CreateIndex {
        db: String,
        coll: String,
        spec: Document,
    },
    DropIndex {
        db: String,
        coll: String,
        name: String,
    },
    /// Insert or replace the document with this `_id` (full post-image), as the collection
    /// stores it (journaling it copies no document).
    Put {
        db: String,
        coll: String,
        doc: StoredDoc,
    },
    Delete {
        db: String,
        coll: String,
        id: Bson,
    },
}

/// A collection as stored in a snapshot.
#[derive(Debug, Clone)]
pub struct CollectionImage {
    pub db: String,
    pub coll: String,
    pub options: Document,
    /// Index specs except `_id_`, in `IndexSpec::to_document` form.
    pub indexes: Vec<Document>,
    /// The documents, shared with the collection they were copied from (or read from disk).
    pub docs: Vec<crate::stored::StoredDoc>,
}

/// What start-up recovery found: the last snapshot, then journal operations to replay on top.
#[derive(Debug, Default)]
pub struct Recovered {
    pub collections: Vec<CollectionImage>,
    pub ops: Vec<JournalOp>,
    /// The snapshot's kept indexes (none when it has no intact kept-indexes file).
    pub(crate) kept: kept::Kept,
    /// The snapshot's token when it was read without usable kept indexes: the catalog writes
    /// them after start-up (see [`Storage::write_kept_indexes`]) for the next start.
    pub(crate) keep_for: Option<u64>,
}

impl JournalOp {
    /// The journal form of this operation, e.g. `{op: "put", db, coll, doc}`.
    pub fn to_document(&self) -> Document {
        journal::op_to_document(self)
    }

    /// Parse the journal form written by [`JournalOp::to_document`].
    pub fn from_document(doc: &Document) -> Result<JournalOp, String> {
        journal::op_from_document(doc)
    }
}

/// Storage errors are I/O or corruption that recovery could not repair.
pub(crate) type StorageResult<T> = std::io::Result<T>;

/// A data directory's open journal and the thread that commits it.
struct Disk {
    shared: Arc<Shared>,
    flusher: Option<JoinHandle<()>>,
    /// The size of the newest snapshot file (0 while there is none), which decides when the
    /// next one is due (`catalog::SnapshotTrigger`).
    snapshot_bytes: AtomicU64,
    /// Held (locked) for as long as the directory is open.
    _lock: File,
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.shared.pending.lock().shutdown = true;
        self.shared.wake.notify_one();
        if let Some(flusher) = self.flusher.take() {
            // The flusher makes a last commit before it exits.
            if flusher.join().is_err() {
                error!("journal flusher thread panicked");
            }
        }
    }
}

/// The journal and snapshot files of one data directory, or nothing (in-memory).
///
/// If writing the journal fails (disk full, I/O error, read-only file system), the store refuses
/// writes until it can write the journal again: see the `group_commit` module.
pub struct Storage {
    disk: Option<Disk>,
    /// Sequence numbers of in-memory mode.
    memory_lsn: AtomicU64,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.disk {
            Some(disk) => f
                .debug_struct("Storage")
                .field("dir", &disk.shared.dir)
                .finish(),
            None => f.write_str("Storage(in-memory)"),
        }
    }
}

/// The state recovery starts from: a snapshot (or nothing) and the first segment to replay.
struct Base {
    token: u64,
    collections: Vec<CollectionImage>,
    /// The newest snapshot was used, so older files are obsolete.
    newest: bool,
}

/// The kept indexes of the snapshot recovery starts from, and that snapshot's token when it
/// has none that can be used (so they are written after start-up). A damaged or mismatched
/// file is only warned about: the indexes are then built from the documents.
fn read_kept(dir: &Path, base: &Base) -> (kept::Kept, Option<u64>) {
    let snapshot = dir.join(snapshot_name(base.token));
    let Ok(meta) = fs::metadata(&snapshot) else {
        // Recovery started from the journal alone.
        return (kept::Kept::default(), None);
    };
    let path = dir.join(kept_name(base.token));
    match kept::read_file(&path, base.token, meta.len()) {
        Ok(kept) => (kept, None),
        Err(e) => {
            if e.kind() != io::ErrorKind::NotFound {
                warn!("building the indexes from the documents: {e}");
            }
            (kept::Kept::default(), Some(base.token))
        }
    }
}

fn data_loss(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl Storage {
    pub fn in_memory() -> Storage {
        Storage {
            disk: None,
            memory_lsn: AtomicU64::new(0),
        }
    }

    /// Open (creating) a data directory and recover its contents.
    pub fn open(dir: &Path, commit_interval: Duration) -> StorageResult<(Storage, Recovered)> {
        Storage::open_with_faults(dir, commit_interval, None)
    }

    /// [`Storage::open`], with the journal and snapshots written through `faults` (tests).
    pub fn open_with_faults(
        dir: &Path,
        commit_interval: Duration,
        faults: Option<DiskFaults>,
    ) -> StorageResult<(Storage, Recovered)> {
        prepare_private_dir(dir)?;
        let lock = lock_dir(dir)?;
        let listing = list_dir(dir)?;
        for tmp in &listing.tmp {
            warn!("removing unfinished snapshot {}", tmp.display());
            if let Err(e) = fs::remove_file(tmp) {
                warn!("cannot remove {}: {e}", tmp.display());
            }
        }
        let started = std::time::Instant::now();
        let base = choose_base(dir, &listing)?;
        let read = started.elapsed();
        let kept_started = std::time::Instant::now();
        let (kept, keep_for) = read_kept(dir, &base);
        let kept_read = kept_started.elapsed();
        let (ops, journal_bytes) = replay(dir, &listing, base.token)?;
        quarantine_snapshots_after(dir, &listing, &base);
        if base.newest && base.token > FIRST_SEGMENT {
            // Finish a clean-up that a crash interrupted.
            delete_obsolete(dir, base.token)?;
        }
        let (segment, file) = new_segment_after_recovery(dir, &listing, base.token)?;
        info!(
            dir = %dir.display(),
            snapshot = base.token,
            collections = base.collections.len(),
            replayed_ops = ops.len(),
            snapshot_ms = read.as_millis() as u64,
            kept_indexes = kept.len(),
            kept_indexes_ms = kept_read.as_millis() as u64,
            journal_ms = (started.elapsed() - read - kept_read).as_millis() as u64,
            "recovered data directory"
        );

        let file = FaultyFile::new(file, faults.clone())?;
        let writer = Writer {
            file,
            segment,
            len: 0,
            failed: Vec::new(),
            spare: Vec::new(),
        };
        let shared = Arc::new(Shared::new(
            dir.to_path_buf(),
            commit_interval,
            writer,
            journal_bytes,
            faults,
        ));
        // The snapshot this start read: its file's time is when it was written.
        let base_file = fs::metadata(dir.join(snapshot_name(base.token))).ok();
        *shared.last_snapshot.lock() = base_file.as_ref().and_then(|m| m.modified().ok());
        let snapshot_bytes = base_file.map_or(0, |m| m.len());
        let flusher = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("docstore-journal".into())
                .spawn(move || run_flusher(shared))?
        };
        let storage = Storage {
            disk: Some(Disk {
                shared,
                flusher: Some(flusher),
                snapshot_bytes: AtomicU64::new(snapshot_bytes),
                _lock: lock,
            }),
            memory_lsn: AtomicU64::new(0),
        };
        let recovered = Recovered {
            collections: base.collections,
            ops,
            kept,
            keep_for,
        };
        Ok((storage, recovered))
    }

    /// Append operations (one group, written together); returns the sequence number to wait on.
    /// Never does I/O: the group is encoded and queued for the next group commit. An operation
    /// that cannot be encoded is logged and left out of the journal (see [`Storage::try_append`]).
    pub fn append(&self, ops: &[JournalOp]) -> u64 {
        match self.try_append(ops) {
            Ok(lsn) => lsn,
            Err(e) => {
                error!("cannot journal a write, it will not survive a restart: {e}");
                self.last_lsn()
            }
        }
    }

    /// Whether writes are journaled: `false` in memory, where [`Storage::append`] keeps none of
    /// the operations it is given (it only counts), so writers need not build them.
    pub fn keeps_journal(&self) -> bool {
        self.disk.is_some()
    }

    /// Like [`Storage::append`], but reports an operation that cannot be encoded as BSON.
    pub fn try_append(&self, ops: &[JournalOp]) -> StorageResult<u64> {
        let Some(disk) = &self.disk else {
            return Ok(self.memory_lsn.fetch_add(1, Ordering::Relaxed) + 1);
        };
        if ops.is_empty() {
            return Ok(self.last_lsn());
        }
        // Encode outside the lock so concurrent writers only contend for a memcpy.
        let mut record = Vec::with_capacity(512);
        record.extend_from_slice(&[0; journal::RECORD_HEADER_LEN]);
        journal::encode_group(ops, &mut record)?;
        let header = journal::record_header(&record[journal::RECORD_HEADER_LEN..])?;
        record[..journal::RECORD_HEADER_LEN].copy_from_slice(&header);
        Ok(disk.shared.append_record(&record))
    }

    /// `Err` while the journal cannot be written (disk full, I/O error): callers refuse the write
    /// before changing anything. Always `Ok` in memory.
    pub fn check_writable(&self) -> Result<(), JournalFailure> {
        match &self.disk {
            Some(disk) => disk.shared.check_writable(),
            None => Ok(()),
        }
    }

    /// The journal writer's state for `serverStatus`; `None` in memory.
    pub fn journal_status(&self) -> Option<JournalStatus> {
        self.disk.as_ref().map(|disk| disk.shared.status())
    }

    /// The sequence number of the last append group.
    pub fn last_lsn(&self) -> u64 {
        match &self.disk {
            Some(disk) => disk.shared.pending.lock().last_lsn,
            None => self.memory_lsn.load(Ordering::Relaxed),
        }
    }

    /// The highest sequence number known to be on disk (everything in memory mode).
    pub fn durable_lsn(&self) -> u64 {
        match &self.disk {
            Some(disk) => disk.shared.durable.borrow().lsn,
            None => self.memory_lsn.load(Ordering::Relaxed),
        }
    }

    /// Wait until everything up to `lsn` is on disk (`j: true`); immediate in memory. Fails, at
    /// once, when the journal cannot be written: the write stays applied in memory and queued,
    /// and reaches the disk if a retry succeeds, but nobody can promise that it will.
    pub async fn wait_durable(&self, lsn: u64) -> Result<(), JournalFailure> {
        match &self.disk {
            Some(disk) => disk.shared.wait_durable(lsn).await,
            None => Ok(()),
        }
    }

    /// Journal bytes written since the last snapshot.
    pub fn journal_bytes(&self) -> u64 {
        match &self.disk {
            Some(disk) => disk.shared.journal_bytes.load(Ordering::Relaxed),
            None => 0,
        }
    }

    /// The size of the newest snapshot file: the one recovery started from, or the last one
    /// written since (0 when there is none, and in memory).
    pub fn snapshot_bytes(&self) -> u64 {
        match &self.disk {
            Some(disk) => disk.snapshot_bytes.load(Ordering::Relaxed),
            None => 0,
        }
    }

    /// Start a new journal segment; the snapshot taken at this point covers everything before.
    /// Call with writes excluded. Returns a token for [`Storage::write_snapshot`].
    pub fn rotate(&self) -> StorageResult<u64> {
        let Some(disk) = &self.disk else {
            return Ok(0);
        };
        let shared = &disk.shared;
        let mut w = shared.writer.lock();
        shared.commit_locked(&mut w)?;
        let next = w.segment + 1;
        w.file = FaultyFile::new(create_segment(&shared.dir, next)?, shared.faults.clone())?;
        w.segment = next;
        w.len = 0;
        shared.journal_bytes.store(0, Ordering::Relaxed);
        Ok(next)
    }

    /// Write a snapshot of `collections` (state at the rotation `token`), then delete the journal
    /// segments it covers. Safe to run while new writes are appended.
    pub fn write_snapshot(&self, token: u64, collections: &[CollectionImage]) -> StorageResult<()> {
        let Some(disk) = &self.disk else {
            return Ok(());
        };
        let shared = &disk.shared;
        let _one_at_a_time = shared.snapshot_lock.lock();
        let current = shared.writer.lock().segment;
        if token == 0 || token > current {
            // Deleting segments below a token from the future would delete live journal.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("snapshot token {token} was not returned by rotate (segment {current})"),
            ));
        }
        let dir = &shared.dir;
        let tmp = dir.join(snapshot_tmp_name(token));
        if let Err(e) = snapshot::write_file(&tmp, token, collections, shared.faults.clone()) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        let written = fs::metadata(&tmp)?.len();
        // Kept indexes of an earlier snapshot with this token (one set aside as unusable) do
        // not belong to this one.
        match fs::remove_file(dir.join(kept_name(token))) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        fs::rename(&tmp, dir.join(snapshot_name(token)))?;
        sync_dir(dir)?;
        *shared.last_snapshot.lock() = Some(std::time::SystemTime::now());
        disk.snapshot_bytes.store(written, Ordering::Relaxed);
        delete_obsolete(dir, token)
    }

    /// Write the kept indexes of snapshot `token` beside it (see [`kept`]), so that the next
    /// start loads those indexes instead of building them. Nothing is written when that
    /// snapshot is no longer the newest (a later one made it obsolete), and the write is given
    /// up (`ErrorKind::Interrupted`, no file left) once `stop` says so, asked before each
    /// index. Runs in the background after a snapshot and after a start-up from a snapshot
    /// without them, and at a clean shutdown after its snapshot.
    pub(crate) fn write_kept_indexes(
        &self,
        token: u64,
        collections: Vec<kept::CollectionIndexes<'_>>,
        stop: &dyn Fn() -> bool,
    ) -> StorageResult<()> {
        let Some(disk) = &self.disk else {
            return Ok(());
        };
        let shared = &disk.shared;
        // One snapshot file at a time: a snapshot written meanwhile would delete this one's.
        let _one_at_a_time = shared.snapshot_lock.lock();
        let dir = &shared.dir;
        let listing = list_dir(dir)?;
        if listing.snapshots.last() != Some(&token) {
            return Ok(());
        }
        let snapshot_bytes = fs::metadata(dir.join(snapshot_name(token)))?.len();
        let tmp = dir.join(kept_tmp_name(token));
        let started = std::time::Instant::now();
        if let Err(e) = kept::write_file(
            &tmp,
            token,
            snapshot_bytes,
            collections,
            shared.faults.clone(),
            stop,
        ) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fs::rename(&tmp, dir.join(kept_name(token)))?;
        sync_dir(dir)?;
        info!(
            snapshot = token,
            bytes = fs::metadata(dir.join(kept_name(token))).map_or(0, |m| m.len()),
            ms = started.elapsed().as_millis() as u64,
            "kept the snapshot's indexes"
        );
        Ok(())
    }

    /// Flush and fsync everything appended so far (clean shutdown).
    pub fn flush(&self) -> StorageResult<()> {
        match &self.disk {
            Some(disk) => disk.shared.commit(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
