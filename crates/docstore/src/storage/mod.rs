//! Durability: an append-only, checksummed journal of logical operations with group commit, and
//! snapshots that let the journal be compacted. In-memory mode keeps nothing on disk.
//!
//! A data directory holds `journal-<n>.log` segments, `snapshot-<n>.db` files and a `LOCK` file.
//! Snapshot `n` holds everything journaled before segment `n`; recovery loads the newest intact
//! snapshot and replays segments `n, n+1, ...` on top. Writers only encode into a shared buffer;
//! one background thread writes and fsyncs that buffer every commit interval, or at once when a
//! `j: true` writer is waiting, and publishes the durable sequence number.

pub mod faults;
mod group_commit;
pub mod journal;
pub mod recovery;
pub mod snapshot;

pub use faults::DiskFaults;
use faults::FaultyFile;
use group_commit::{run_flusher, Shared, Writer};
pub use group_commit::{JournalFailure, JournalStatus};
use recovery::{choose_base, quarantine_snapshots_after, replay};

use bson::{Bson, Document};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
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
    /// Insert or replace the document with this `_id` (full post-image).
    Put {
        db: String,
        coll: String,
        doc: Document,
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
    pub docs: Vec<Arc<Document>>,
}

/// What start-up recovery found: the last snapshot, then journal operations to replay on top.
#[derive(Debug, Default)]
pub struct Recovered {
    pub collections: Vec<CollectionImage>,
    pub ops: Vec<JournalOp>,
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
pub type StorageResult<T> = std::io::Result<T>;

/// The first journal segment of a new data directory.
const FIRST_SEGMENT: u64 = 1;
/// A buffer that grew larger than this (a burst, or a stalled disk) is not kept for reuse.
const MAX_SPARE_CAPACITY: usize = 16 << 20;
const LOCK_FILE: &str = "LOCK";

fn segment_name(n: u64) -> String {
    format!("journal-{n:016}.log")
}

fn snapshot_name(n: u64) -> String {
    format!("snapshot-{n:016}.db")
}

fn snapshot_tmp_name(n: u64) -> String {
    format!("snapshot-{n:016}.tmp")
}

fn parse_number(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The storage files found in a data directory.
#[derive(Debug, Default)]
struct Listing {
    /// Segment number -> file size.
    segments: BTreeMap<u64, u64>,
    /// Snapshot tokens, ascending.
    snapshots: Vec<u64>,
    /// Snapshots whose writing never finished.
    tmp: Vec<PathBuf>,
}

fn list_dir(dir: &Path) -> io::Result<Listing> {
    let mut listing = Listing::default();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !entry.file_type()?.is_file() {
            continue;
        }
        if let Some(n) = parse_number(&name, "journal-", ".log") {
            listing.segments.insert(n, entry.metadata()?.len());
        } else if let Some(n) = parse_number(&name, "snapshot-", ".db") {
            listing.snapshots.push(n);
        } else if parse_number(&name, "snapshot-", ".tmp").is_some() {
            listing.tmp.push(entry.path());
        }
    }
    listing.snapshots.sort_unstable();
    Ok(listing)
}

/// Make created, renamed and deleted directory entries durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn create_segment(dir: &Path, n: u64) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(segment_name(n)))?;
    // The new name must survive a crash, or acknowledged `j: true` writes in it would vanish.
    sync_dir(dir)?;
    Ok(file)
}

/// Hold an exclusive lock on `LOCK` so that a second server cannot share the directory.
fn lock_dir(dir: &Path) -> io::Result<File> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let by = if holder.is_empty() {
                String::from("another process")
            } else {
                format!("another process (pid {holder})")
            };
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "data directory {} is in use by {by}: its {LOCK_FILE} file is locked",
                    dir.display()
                ),
            ));
        }
        Err(fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => {
            warn!(
                "cannot lock {} on this file system ({e}); make sure no other docstore uses {}",
                path.display(),
                dir.display()
            );
        }
        Err(fs::TryLockError::Error(e)) => return Err(e),
    }
    // The pid is only a hint for the message above; the lock itself is what excludes.
    file.set_len(0)?;
    file.write_all(std::process::id().to_string().as_bytes())?;
    Ok(file)
}

/// A data directory's open journal and the thread that commits it.
struct Disk {
    shared: Arc<Shared>,
    flusher: Option<JoinHandle<()>>,
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

fn data_loss(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// The segment new appends go to: the last one if recovery left it empty (so that restarts do
/// not pile up empty files), else a new one after it.
fn new_segment_after_recovery(
    dir: &Path,
    listing: &Listing,
    token: u64,
) -> io::Result<(u64, File)> {
    if let Some(&last) = listing.segments.keys().next_back() {
        let path = dir.join(segment_name(last));
        if last >= token && fs::metadata(&path)?.len() == 0 {
            return Ok((last, OpenOptions::new().write(true).open(&path)?));
        }
        let next = (last + 1).max(token);
        return Ok((next, create_segment(dir, next)?));
    }
    let segment = token.max(FIRST_SEGMENT);
    Ok((segment, create_segment(dir, segment)?))
}

/// Delete snapshots and segments that the snapshot `token` makes obsolete.
fn delete_obsolete(dir: &Path, token: u64) -> io::Result<()> {
    let listing = list_dir(dir)?;
    let mut deleted = false;
    let obsolete_segments = listing
        .segments
        .range(..token)
        .map(|(&n, _)| segment_name(n));
    let obsolete_snapshots = listing
        .snapshots
        .iter()
        .filter(|&&n| n < token)
        .map(|&n| snapshot_name(n));
    for name in obsolete_segments.chain(obsolete_snapshots) {
        match fs::remove_file(dir.join(&name)) {
            Ok(()) => deleted = true,
            Err(e) => warn!("cannot delete obsolete {name}: {e}"),
        }
    }
    if deleted {
        sync_dir(dir)?;
    }
    Ok(())
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
        fs::create_dir_all(dir)?;
        let lock = lock_dir(dir)?;
        let listing = list_dir(dir)?;
        for tmp in &listing.tmp {
            warn!("removing unfinished snapshot {}", tmp.display());
            if let Err(e) = fs::remove_file(tmp) {
                warn!("cannot remove {}: {e}", tmp.display());
            }
        }
        let base = choose_base(dir, &listing)?;
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
                _lock: lock,
            }),
            memory_lsn: AtomicU64::new(0),
        };
        let recovered = Recovered {
            collections: base.collections,
            ops,
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
        fs::rename(&tmp, dir.join(snapshot_name(token)))?;
        sync_dir(dir)?;
        delete_obsolete(dir, token)
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
mod tests {
    use super::*;
    use bson::doc;
    use std::time::Instant;

    const FAST: Duration = Duration::from_millis(10);

    fn put(i: i32) -> JournalOp {
        JournalOp::Put {
            db: "shop".into(),
            coll: "items".into(),
            doc: doc! {"_id": i, "name": format!("item {i}")},
        }
    }

    fn segments(dir: &Path) -> Vec<u64> {
        list_dir(dir).unwrap().segments.keys().copied().collect()
    }

    fn open(dir: &Path) -> (Storage, Recovered) {
        Storage::open(dir, FAST).unwrap()
    }

    /// Append three groups, flush, close; returns the path of the segment that holds them.
    fn write_three_groups(dir: &Path) -> PathBuf {
        let (s, _) = open(dir);
        s.append(&[put(1)]);
        s.append(&[put(2), put(3)]);
        s.append(&[put(4)]);
        s.flush().unwrap();
        let seg = *segments(dir).last().unwrap();
        dir.join(segment_name(seg))
    }

    #[test]
    fn appended_ops_come_back_in_order_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, rec) = open(dir.path());
            assert!(rec.ops.is_empty() && rec.collections.is_empty());
            let ops = [
                JournalOp::CreateCollection {
                    db: "shop".into(),
                    coll: "items".into(),
                    options: doc! {},
                },
                put(1),
                JournalOp::Delete {
                    db: "shop".into(),
                    coll: "items".into(),
                    id: Bson::Int32(1),
                },
            ];
            assert_eq!(s.append(&ops[..1]), 1);
            assert_eq!(s.append(&ops[1..]), 2);
            s.flush().unwrap();
        }
        let (_s, rec) = open(dir.path());
        assert_eq!(rec.ops.len(), 3);
        assert!(matches!(rec.ops[0], JournalOp::CreateCollection { .. }));
        assert_eq!(rec.ops[1], put(1));
        assert!(matches!(rec.ops[2], JournalOp::Delete { .. }));
    }

    #[test]
    fn dropping_the_storage_flushes_what_was_appended() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, _) = Storage::open(dir.path(), Duration::from_secs(3600)).unwrap();
            s.append(&[put(1)]);
            s.append(&[put(2)]);
        }
        let (_s, rec) = open(dir.path());
        assert_eq!(rec.ops, vec![put(1), put(2)]);
    }

    #[test]
    fn restarting_without_writes_does_not_pile_up_segments() {
        let dir = tempfile::tempdir().unwrap();
        write_three_groups(dir.path());
        for _ in 0..3 {
            drop(open(dir.path()));
        }
        assert_eq!(segments(dir.path()).len(), 2);
        let (_s, rec) = open(dir.path());
        assert_eq!(rec.ops.len(), 4);
    }

    #[test]
    fn a_truncated_last_record_is_dropped_and_earlier_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let seg = write_three_groups(dir.path());
        let len = fs::metadata(&seg).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(len - 5)
            .unwrap();
        {
            let (s, rec) = open(dir.path());
            assert_eq!(rec.ops, vec![put(1), put(2), put(3)]);
            // The torn bytes are cut off, so the file ends at the last good record.
            let last_record = 8 + {
                let mut b = Vec::new();
                journal::encode_group(&[put(4)], &mut b).unwrap();
                b.len() as u64
            };
            assert_eq!(fs::metadata(&seg).unwrap().len(), len - last_record);
            // ... and kept in a quarantine file beside it.
            let offset = len - last_record;
            let aside =
                seg.with_file_name(recovery::torn_tail_name(FIRST_SEGMENT, offset as usize));
            assert_eq!(fs::metadata(aside).unwrap().len(), last_record - 5);
            s.append(&[put(5)]);
        }
        let (_s, rec) = open(dir.path());
        assert_eq!(rec.ops, vec![put(1), put(2), put(3), put(5)]);
    }

    #[test]
    fn a_record_cut_inside_its_header_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let seg = write_three_groups(dir.path());
        let mut bytes = fs::read(&seg).unwrap();
        bytes.extend_from_slice(&[7, 0, 0]);
        fs::write(&seg, &bytes).unwrap();
        let (_s, rec) = open(dir.path());
        assert_eq!(rec.ops.len(), 4);
        assert_eq!(fs::metadata(&seg).unwrap().len(), bytes.len() as u64 - 3);
    }

    #[test]
    fn a_bad_checksum_in_the_complete_last_record_refuses_to_start() {
        // A whole record that fails its checksum was written in full, so it may have been
        // acknowledged: dropping it would lose a write silently.
        let dir = tempfile::tempdir().unwrap();
        let seg = write_three_groups(dir.path());
        let mut bytes = fs::read(&seg).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 0xff;
        fs::write(&seg, &bytes).unwrap();
        let err = Storage::open(dir.path(), FAST).unwrap_err();
        assert!(recovery::damage(&err).is_some(), "{err}");
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
        assert_eq!(fs::read(&seg).unwrap(), bytes);
    }

    #[test]
    fn damage_followed_by_more_journal_refuses_to_start() {
        let dir = tempfile::tempdir().unwrap();
        let seg = write_three_groups(dir.path());
        {
            let (s, _) = open(dir.path());
            s.append(&[put(9)]);
        }
        let mut bytes = fs::read(&seg).unwrap();
        bytes[12] ^= 0xff;
        fs::write(&seg, &bytes).unwrap();
        let err = Storage::open(dir.path(), FAST).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("damaged at byte 0"), "{err}");
        assert!(err.to_string().contains("--repair"), "{err}");
        // Nothing was truncated: the data is still there for a person to rescue.
        assert_eq!(fs::read(&seg).unwrap(), bytes);
    }

    #[test]
    fn a_snapshot_plus_later_ops_is_recovered_and_old_segments_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let token;
        {
            let (s, _) = open(dir.path());
            s.append(&[put(1)]);
            s.append(&[put(2)]);
            token = s.rotate().unwrap();
            assert_eq!(s.journal_bytes(), 0);
            let image = CollectionImage {
                db: "shop".into(),
                coll: "items".into(),
                options: doc! {},
                indexes: vec![doc! {"v": 2, "key": {"name": 1}, "name": "name_1"}],
                docs: vec![
                    Arc::new(doc! {"_id": 1, "name": "item 1"}),
                    Arc::new(doc! {"_id": 2, "name": "item 2"}),
                ],
            };
            // Appends may continue while the snapshot is written.
            s.append(&[put(3)]);
            s.write_snapshot(token, &[image]).unwrap();
            s.append(&[put(4)]);
            assert!(segments(dir.path()).iter().all(|&n| n >= token));
        }
        let listing = list_dir(dir.path()).unwrap();
        assert_eq!(listing.snapshots, vec![token]);
        let (_s, rec) = open(dir.path());
        assert_eq!(rec.collections.len(), 1);
        assert_eq!(rec.collections[0].docs.len(), 2);
        assert_eq!(rec.collections[0].indexes.len(), 1);
        assert_eq!(rec.ops, vec![put(3), put(4)]);
    }

    #[test]
    fn a_second_snapshot_deletes_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = open(dir.path());
        let first = s.rotate().unwrap();
        s.write_snapshot(first, &[]).unwrap();
        s.append(&[put(1)]);
        let second = s.rotate().unwrap();
        assert!(second > first);
        s.write_snapshot(second, &[]).unwrap();
        let listing = list_dir(dir.path()).unwrap();
        assert_eq!(listing.snapshots, vec![second]);
        assert_eq!(segments(dir.path()), vec![second]);
    }

    #[test]
    fn a_token_from_the_future_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = open(dir.path());
        let err = s.write_snapshot(1000, &[]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(segments(dir.path()).len(), 1);
    }

    #[test]
    fn a_large_snapshot_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let docs: Vec<Arc<Document>> = (0..20_000)
            .map(|i| {
                Arc::new(doc! {
                    "_id": i,
                    "title": format!("product number {i}"),
                    "price": f64::from(i) * 1.25,
                    "tags": ["a", "b", {"nested": i}],
                })
            })
            .collect();
        {
            let (s, _) = open(dir.path());
            let token = s.rotate().unwrap();
            let images = vec![
                CollectionImage {
                    db: "shop".into(),
                    coll: "products".into(),
                    options: doc! {"validator": {"price": {"$gte": 0}}},
                    indexes: vec![],
                    docs: docs.clone(),
                },
                CollectionImage {
                    db: "shop".into(),
                    coll: "empty".into(),
                    options: doc! {},
                    indexes: vec![],
                    docs: vec![],
                },
            ];
            s.write_snapshot(token, &images).unwrap();
        }
        let (_s, rec) = open(dir.path());
        assert_eq!(rec.collections.len(), 2);
        let products = &rec.collections[0];
        assert_eq!(products.coll, "products");
        assert_eq!(products.options, doc! {"validator": {"price": {"$gte": 0}}});
        assert_eq!(products.docs, docs);
        assert!(rec.collections[1].docs.is_empty());
    }

    #[test]
    fn a_stray_tmp_snapshot_is_ignored_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        write_three_groups(dir.path());
        let tmp = dir.path().join(snapshot_tmp_name(99));
        fs::write(&tmp, b"half a snapshot").unwrap();
        let (_s, rec) = open(dir.path());
        assert_eq!(rec.ops.len(), 4);
        assert!(rec.collections.is_empty());
        assert!(!tmp.exists());
    }

    fn snapshot_then_more(dir: &Path) -> u64 {
        let (s, _) = open(dir);
        s.append(&[put(1)]);
        let token = s.rotate().unwrap();
        let image = CollectionImage {
            db: "shop".into(),
            coll: "items".into(),
            options: doc! {},
            indexes: vec![],
            docs: vec![Arc::new(doc! {"_id": 1, "name": "item 1"})],
        };
        s.write_snapshot(token, &[image]).unwrap();
        s.append(&[put(2)]);
        token
    }

    #[test]
    fn a_corrupt_newest_snapshot_falls_back_to_an_older_one_when_its_journal_remains() {
        let dir = tempfile::tempdir().unwrap();
        let token = snapshot_then_more(dir.path());
        let newer = *segments(dir.path()).last().unwrap() + 1;
        fs::write(dir.path().join(snapshot_name(newer)), b"garbage").unwrap();
        {
            let (_s, rec) = open(dir.path());
            assert_eq!(rec.collections.len(), 1);
            assert_eq!(rec.ops, vec![put(2)]);
        }
        // The unusable snapshot is moved aside, and the good one stays.
        let listing = list_dir(dir.path()).unwrap();
        assert_eq!(listing.snapshots, vec![token]);
    }

    #[test]
    fn a_corrupt_snapshot_without_the_journal_to_rebuild_it_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let token = snapshot_then_more(dir.path());
        let path = dir.path().join(snapshot_name(token));
        let mut bytes = fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x10;
        fs::write(&path, &bytes).unwrap();
        let err = Storage::open(dir.path(), FAST).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("backup"), "{err}");
        assert!(recovery::damage(&err).is_some(), "{err}");
    }

    #[test]
    fn a_missing_journal_segment_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        write_three_groups(dir.path());
        {
            let (s, _) = open(dir.path());
            s.append(&[put(5)]);
        }
        fs::remove_file(dir.path().join(segment_name(FIRST_SEGMENT))).unwrap();
        let err = Storage::open(dir.path(), FAST).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[test]
    fn a_second_open_of_the_same_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = open(dir.path());
        let err = Storage::open(dir.path(), FAST).unwrap_err();
        assert!(err.to_string().contains("in use"), "{err}");
        drop(s);
        assert!(Storage::open(dir.path(), FAST).is_ok());
    }

    #[test]
    fn journal_bytes_count_appends_and_replayed_segments() {
        let dir = tempfile::tempdir().unwrap();
        let appended;
        {
            let (s, _) = open(dir.path());
            assert_eq!(s.journal_bytes(), 0);
            s.append(&[put(1)]);
            s.append(&[put(2)]);
            appended = s.journal_bytes();
            assert!(appended > 0);
        }
        let (s, _) = open(dir.path());
        assert_eq!(s.journal_bytes(), appended);
        s.rotate().unwrap();
        assert_eq!(s.journal_bytes(), 0);
    }

    #[test]
    fn in_memory_storage_numbers_appends_and_is_always_durable() {
        let s = Storage::in_memory();
        let a = s.append(&[put(1)]);
        let b = s.append(&[put(2)]);
        assert!(b > a);
        assert_eq!(s.journal_bytes(), 0);
        assert_eq!(s.rotate().unwrap(), 0);
        s.write_snapshot(0, &[]).unwrap();
        s.flush().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(s.wait_durable(b)).unwrap();
    }

    #[tokio::test]
    async fn wait_durable_returns_after_a_prompt_group_commit() {
        let dir = tempfile::tempdir().unwrap();
        // A commit interval far longer than the test: only the waiter's nudge can commit.
        let (s, _) = Storage::open(dir.path(), Duration::from_secs(3600)).unwrap();
        let lsn = s.append(&[put(1)]);
        assert!(s.durable_lsn() < lsn);
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(10), s.wait_durable(lsn))
            .await
            .unwrap()
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(s.durable_lsn() >= lsn);
        let seg = dir
            .path()
            .join(segment_name(*segments(dir.path()).last().unwrap()));
        assert!(fs::metadata(seg).unwrap().len() > 0);
        // Already durable: returns at once.
        s.wait_durable(lsn).await.unwrap();
    }

    #[test]
    fn the_flusher_commits_on_its_own_every_interval() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = open(dir.path());
        let lsn = s.append(&[put(1)]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.durable_lsn() < lsn {
            assert!(Instant::now() < deadline, "group commit never happened");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn concurrent_appenders_keep_their_own_order() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, _) = open(dir.path());
            std::thread::scope(|scope| {
                for t in 0..8 {
                    let s = &s;
                    scope.spawn(move || {
                        for i in 0..200 {
                            s.append(&[put(t * 1000 + i)]);
                        }
                    });
                }
            });
        }
        let (_s, rec) = open(dir.path());
        assert_eq!(rec.ops.len(), 1600);
        let mut last = [-1i32; 8];
        for op in &rec.ops {
            let JournalOp::Put { doc, .. } = op else {
                panic!("unexpected op {op:?}");
            };
            let id = doc.get_i32("_id").unwrap();
            let (t, i) = ((id / 1000) as usize, id % 1000);
            assert!(i > last[t], "thread {t} ops out of order");
            last[t] = i;
        }
    }
}
