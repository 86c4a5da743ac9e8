//! Databases and collections in memory, and the journaling of every change to them.
//!
//! Locking: a write holds the checkpoint gate (shared) and its collection's lock (exclusive)
//! while it changes memory and appends to the journal, so the journal's order is the order of
//! changes. A snapshot takes the gate exclusively for the instant it needs to rotate the journal
//! and copy document pointers. Reads take only the collection's lock, shared.

use crate::collection::{Collection, WriteSession};
use crate::error::{Error, ErrorCode, Result};
use crate::index::IndexSpec;
use crate::storage::kept::KeptIndex;
use crate::storage::{CollectionImage, JournalOp, Recovered, Storage};
use bson::Document;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub(crate) type SharedCollection = Arc<RwLock<Collection>>;

type Namespaces = BTreeMap<String, BTreeMap<String, SharedCollection>>;

pub(crate) struct Catalog {
    storage: Arc<Storage>,
    databases: RwLock<Namespaces>,
    gate: RwLock<()>,
    snapshot_trigger: SnapshotTrigger,
    snapshot_running: Arc<AtomicBool>,
    snapshot_retry: Arc<Mutex<SnapshotRetry>>,
    /// A snapshot is taken at the next write whatever the journal's size: set after a start
    /// from a snapshot without kept indexes when the journal after it holds writes (see
    /// [`Catalog::recover`]), so that the next start neither builds the indexes nor replays
    /// that journal (an index created since the snapshot is built again at every replay).
    snapshot_wanted: Arc<AtomicBool>,
    /// Set by a shutdown that writes a snapshot of its own: the kept indexes of an earlier one,
    /// still being written in the background, are given up rather than waited for.
    kept_superseded: Arc<AtomicBool>,
}

/// When the journal has grown enough for a snapshot to compact it: past a fixed size, and past
/// a share of the last snapshot's size, so that snapshots (each a rewrite of the whole store)
/// cost at most a bounded multiple of the bytes the journal took, however large the store; but
/// always once it holds [`JOURNAL_CAP_BYTES`], so the journal a crash leaves to replay (one write
/// at a time) stays bounded for a store of any size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SnapshotTrigger {
    /// Never before the journal holds this many bytes (`Config::snapshot_threshold_bytes`).
    pub min_journal_bytes: u64,
    /// Nor before it holds this percentage of the last snapshot's size
    /// (`Config::snapshot_journal_percent`; 0: the fixed size alone).
    pub journal_percent: u64,
}

impl SnapshotTrigger {
    /// No snapshot ever (a catalog rebuilt in memory, as repair does).
    pub(crate) const NEVER: SnapshotTrigger = SnapshotTrigger {
        min_journal_bytes: u64::MAX,
        journal_percent: 0,
    };

    /// Whether a journal of `journal_bytes` since a snapshot of `snapshot_bytes` (0: none yet)
    /// is due to be compacted.
    pub(crate) fn due(&self, journal_bytes: u64, snapshot_bytes: u64) -> bool {
        journal_bytes >= self.min_journal_bytes
            && (journal_bytes >= JOURNAL_CAP_BYTES
                || u128::from(journal_bytes) * 100
                    >= u128::from(snapshot_bytes) * u128::from(self.journal_percent))
    }
}

/// The longest journal a snapshot waits for, whatever the last snapshot's size (1 GiB): past
/// it, a store larger than this is rewritten once per this many bytes of writes, and a restart
/// after a crash replays at most this much.
pub(crate) const JOURNAL_CAP_BYTES: u64 = 1 << 30;

/// After a failed snapshot (a full disk, say) the next attempt waits, doubling each time, rather
/// than coming with the very next write.
#[derive(Debug)]
struct SnapshotRetry {
    not_before: Option<std::time::Instant>,
    backoff: std::time::Duration,
    failures: u64,
}

const SNAPSHOT_RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
const SNAPSHOT_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(300);

impl SnapshotRetry {
    fn new() -> SnapshotRetry {
        SnapshotRetry {
            not_before: None,
            backoff: SNAPSHOT_RETRY_FIRST,
            failures: 0,
        }
    }

    fn may_start(&self, now: std::time::Instant) -> bool {
        self.not_before.is_none_or(|t| now >= t)
    }

    fn failed(&mut self, what: &str, e: &std::io::Error) {
        self.failures += 1;
        tracing::error!(
            retry_in_secs = self.backoff.as_secs(),
            failures = self.failures,
            "{what}: {e}; the previous snapshot and the journal are intact"
        );
        self.not_before = Some(std::time::Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(SNAPSHOT_RETRY_MAX);
    }

    fn succeeded(&mut self) {
        *self = SnapshotRetry::new();
    }
}

/// The result of a write: what the closure returned and the journal position to wait on for
/// `j: true`.
pub(crate) struct WriteOutcome<R> {
    pub value: R,
    pub lsn: u64,
}

impl Catalog {
    /// Rebuild memory from a recovered snapshot and journal.
    pub(crate) fn recover(
        storage: Arc<Storage>,
        recovered: Recovered,
        snapshot_trigger: SnapshotTrigger,
    ) -> Result<Catalog> {
        let catalog = Catalog {
            storage,
            databases: RwLock::new(BTreeMap::new()),
            gate: RwLock::new(()),
            snapshot_trigger,
            snapshot_running: Arc::new(AtomicBool::new(false)),
            snapshot_retry: Arc::new(Mutex::new(SnapshotRetry::new())),
            snapshot_wanted: Arc::new(AtomicBool::new(false)),
            kept_superseded: Arc::new(AtomicBool::new(false)),
        };
        {
            let mut dbs = catalog.databases.write();
            let started = std::time::Instant::now();
            // Collections with an index left to build once the store answers.
            let mut later = Vec::new();
            let mut kept = recovered.kept;
            // The snapshot's documents, to keep its indexes from once the store answers, when
            // it has none kept (pointers to the documents, not copies).
            let to_keep: Option<(u64, Vec<CollectionImage>)> = recovered
                .keep_for
                .map(|token| (token, recovered.collections.clone()));
            for image in recovered.collections {
                // Documents first, then every index built in parallel (start-up time at a
                // million documents).
                let specs = image
                    .indexes
                    .iter()
                    .map(IndexSpec::parse)
                    .collect::<Result<Vec<_>>>()?;
                let kept_indexes = kept.take(&image.db, &image.coll, image.docs.len() as u64);
                let coll = Collection::load(
                    &image.db,
                    &image.coll,
                    image.options,
                    image.docs,
                    specs,
                    true,
                    kept_indexes,
                )?;
                let handle = Arc::new(RwLock::new(coll));
                if handle.read().has_building_indexes() {
                    later.push(Arc::clone(&handle));
                }
                dbs.entry(image.db).or_default().insert(image.coll, handle);
            }
            let loaded = started.elapsed();
            let ops = recovered.ops.len();
            for op in recovered.ops {
                if let Err(e) = replay(&mut dbs, op) {
                    tracing::warn!("journal replay skipped an operation: {e}");
                }
            }
            tracing::info!(
                load_ms = loaded.as_millis() as u64,
                replay_ms = (started.elapsed() - loaded).as_millis() as u64,
                replayed_ops = ops,
                "collections loaded and journal replayed"
            );
            // Keeping the indexes waits for the background builds: both compete for the
            // cores with the first requests. If the journal after the snapshot holds writes
            // by then, a new snapshot (which keeps its indexes) is taken instead.
            // Keeping counts as a snapshot under way: none starts meanwhile, and a shutdown
            // waits for it (bounded) before the directory is released.
            let storage = Arc::clone(&catalog.storage);
            let wanted = Arc::clone(&catalog.snapshot_wanted);
            let running = Arc::clone(&catalog.snapshot_running);
            let superseded = catalog.kept_superseded();
            crate::collection::spawn_background_builds(
                later,
                to_keep.map(|(token, images)| -> Box<dyn FnOnce() + Send> {
                    Box::new(move || {
                        if storage.journal_bytes() != 0 {
                            wanted.store(true, Ordering::Release);
                        } else if !running.swap(true, Ordering::AcqRel) {
                            keep_indexes(&storage, token, &images, &superseded);
                            drop(storage);
                            drop(images);
                            running.store(false, Ordering::Release);
                        }
                    })
                }),
            );
        }
        Ok(catalog)
    }

    pub(crate) fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    /// Refuse a write, before it changes anything, while the journal cannot be written: an
    /// acknowledged write must be one the journal can still take.
    fn check_writable(&self) -> Result<()> {
        self.storage
            .check_writable()
            .map_err(|failure| Error::from(&failure))
    }

    pub(crate) fn get(&self, db: &str, coll: &str) -> Option<SharedCollection> {
        self.databases.read().get(db)?.get(coll).cloned()
    }

    /// Databases that hold at least one collection.
    pub(crate) fn database_names(&self) -> Vec<String> {
        self.databases
            .read()
            .iter()
            .filter(|(_, colls)| !colls.is_empty())
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub(crate) fn collections(&self, db: &str) -> Vec<(String, SharedCollection)> {
        self.databases
            .read()
            .get(db)
            .map(|colls| {
                colls
                    .iter()
                    .map(|(n, c)| (n.clone(), Arc::clone(c)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Run `f` on a collection under its write lock, through a [`WriteSession`] that records a
    /// journal entry for every change `f` makes (on a store with a journal; a store kept in
    /// memory only notes that something changed), and journal those entries.
    /// With `create`, a missing collection is created first; without, `None` is returned.
    pub(crate) fn write<R>(
        &self,
        db: &str,
        coll: &str,
        create: bool,
        f: impl FnOnce(&mut WriteSession<'_>) -> R,
    ) -> Result<Option<WriteOutcome<R>>> {
        let outcome = {
            let _gate = self.gate.read();
            let handle = loop {
                let handle = match self.get(db, coll) {
                    Some(h) => h,
                    None if create => self.create_locked(db, coll, Document::new(), false)?.0,
                    None => return Ok(None),
                };
                if !handle.read().dropped {
                    break handle;
                }
            };
            let mut guard = handle.write();
            if guard.dropped {
                // Dropped between our lookup and lock: the write behaves as if it came after.
                drop(guard);
                return self.write(db, coll, create, f);
            }
            self.check_writable()?;
            let mut session = WriteSession::journaling(&mut guard, self.storage.keeps_journal());
            let value = f(&mut session);
            let (changed, ops) = session.into_changes();
            let lsn = if changed {
                self.storage.append(&ops)
            } else {
                0
            };
            WriteOutcome { value, lsn }
        };
        self.maybe_snapshot();
        Ok(Some(outcome))
    }

    /// The TTL monitor's pass: in every collection with a TTL index, delete (under the
    /// collection's write lock, journaled like any delete) the documents whose indexed date
    /// plus `expireAfterSeconds` is at or before `now`, and likewise in every time-series
    /// collection with `expireAfterSeconds` the measurements whose time field is that old.
    /// Returns how many were deleted.
    pub(crate) fn expire_ttl_documents(&self, now: bson::DateTime) -> usize {
        let targets: Vec<(String, String)> = {
            let dbs = self.databases.read();
            dbs.iter()
                .flat_map(|(db, colls)| {
                    colls
                        .iter()
                        .filter(|(_, handle)| {
                            let c = handle.read();
                            c.indexes().iter().any(|i| i.is_ttl())
                                || c.timeseries()
                                    .is_some_and(|ts| ts.expire_after_seconds.is_some())
                        })
                        .map(move |(name, _)| (db.clone(), name.clone()))
                })
                .collect()
        };
        let mut deleted = 0;
        for (db, coll) in targets {
            let outcome = self.write(&db, &coll, false, |c| {
                let mut expired: std::collections::BTreeSet<_> = c
                    .indexes()
                    .iter()
                    .flat_map(|i| i.expired_records(now))
                    .collect();
                // A time-series collection's `expireAfterSeconds` applies to its time field
                // (there is no index on it to scan: every measurement is read).
                if let Some(ts) = c.timeseries() {
                    expired.extend(
                        c.records()
                            .filter(|(_, doc)| ts.expired(doc, now))
                            .map(|(record, _)| record),
                    );
                }
                expired
                    .into_iter()
                    .filter(|&record| c.remove(record).is_some())
                    .count()
            });
            match outcome {
                Ok(Some(o)) => deleted += o.value,
                Ok(None) => {}
                Err(e) => tracing::warn!("TTL monitor skipped {db}.{coll}: {e}"),
            }
        }
        deleted
    }

    /// Explicit `create`: error 48 if the collection exists.
    pub(crate) fn create_collection(&self, db: &str, coll: &str, options: Document) -> Result<u64> {
        let _gate = self.gate.read();
        self.create_locked(db, coll, options, true)
            .map(|(_, lsn)| lsn)
    }

    /// Create under the gate; returns the handle and the journal position of the creation.
    fn create_locked(
        &self,
        db: &str,
        coll: &str,
        options: Document,
        explicit: bool,
    ) -> Result<(SharedCollection, u64)> {
        validate_namespace(db, coll)?;
        let mut dbs = self.databases.write();
        let colls = dbs.entry(db.to_string()).or_default();
        if let Some(existing) = colls.get(coll) {
            if explicit {
                return Err(Error::new(
                    ErrorCode::NamespaceExists,
                    format!("Collection {db}.{coll} already exists."),
                ));
            }
            return Ok((Arc::clone(existing), 0));
        }
        self.check_writable()?;
        let handle = Arc::new(RwLock::new(Collection::new(db, coll, options.clone())));
        colls.insert(coll.to_string(), Arc::clone(&handle));
        let lsn = self.storage.append(&[JournalOp::CreateCollection {
            db: db.to_string(),
            coll: coll.to_string(),
            options,
        }]);
        Ok((handle, lsn))
    }

    /// Drop a collection; `false` when it did not exist.
    /// Drop a collection: how many indexes it had (`None` when it did not exist) and the
    /// journal position of the drop.
    pub(crate) fn drop_collection(&self, db: &str, coll: &str) -> Result<(Option<usize>, u64)> {
        let _gate = self.gate.read();
        self.check_writable()?;
        let removed = {
            let mut dbs = self.databases.write();
            let removed = dbs.get_mut(db).and_then(|colls| colls.remove(coll));
            if dbs.get(db).is_some_and(|c| c.is_empty()) {
                dbs.remove(db);
            }
            removed
        };
        let Some(handle) = removed else {
            return Ok((None, 0));
        };
        let mut guard = handle.write();
        guard.dropped = true;
        let indexes = guard.indexes().len();
        let lsn = self.storage.append(&[JournalOp::DropCollection {
            db: db.to_string(),
            coll: coll.to_string(),
        }]);
        Ok((Some(indexes), lsn))
    }

    pub(crate) fn drop_database(&self, db: &str) -> Result<u64> {
        let _gate = self.gate.read();
        self.check_writable()?;
        let removed = self.databases.write().remove(db);
        let Some(colls) = removed else {
            return Ok(0);
        };
        for handle in colls.values() {
            handle.write().dropped = true;
        }
        Ok(self
            .storage
            .append(&[JournalOp::DropDatabase { db: db.to_string() }]))
    }

    /// `renameCollection` within or across databases.
    pub(crate) fn rename_collection(
        &self,
        db: &str,
        from: &str,
        to_db: &str,
        to: &str,
        drop_target: bool,
    ) -> Result<u64> {
        validate_namespace(to_db, to)?;
        let _gate = self.gate.read();
        self.check_writable()?;
        let mut dbs = self.databases.write();
        let Some(source) = dbs.get(db).and_then(|c| c.get(from)).cloned() else {
            return Err(Error::new(
                ErrorCode::NamespaceNotFound,
                "source namespace does not exist",
            ));
        };
        if db == to_db && from == to {
            return Err(Error::new(
                ErrorCode::IllegalOperation,
                "Can't rename a collection to itself",
            ));
        }
        let mut ops = Vec::new();
        if let Some(target) = dbs.get(to_db).and_then(|c| c.get(to)).cloned() {
            if !drop_target {
                return Err(Error::new(
                    ErrorCode::NamespaceExists,
                    "target namespace exists",
                ));
            }
            target.write().dropped = true;
            if let Some(colls) = dbs.get_mut(to_db) {
                colls.remove(to);
            }
            ops.push(JournalOp::DropCollection {
                db: to_db.to_string(),
                coll: to.to_string(),
            });
        }
        if let Some(colls) = dbs.get_mut(db) {
            colls.remove(from);
            if colls.is_empty() {
                dbs.remove(db);
            }
        }
        {
            let mut guard = source.write();
            guard.db = to_db.to_string();
            guard.name = to.to_string();
        }
        dbs.entry(to_db.to_string())
            .or_default()
            .insert(to.to_string(), source);
        ops.push(JournalOp::RenameCollection {
            db: db.to_string(),
            from: from.to_string(),
            to_db: to_db.to_string(),
            to: to.to_string(),
        });
        Ok(self.storage.append(&ops))
    }

    /// Take a snapshot once the journal has grown past the threshold and, for a large store,
    /// past a share of the last snapshot's size (see [`SnapshotTrigger`]), or when one is
    /// wanted to keep the indexes (`snapshot_wanted`).
    fn maybe_snapshot(&self) {
        if !self.snapshot_wanted.load(Ordering::Acquire)
            && !self
                .snapshot_trigger
                .due(self.storage.journal_bytes(), self.storage.snapshot_bytes())
        {
            return;
        }
        if !self
            .snapshot_retry
            .lock()
            .may_start(std::time::Instant::now())
        {
            return;
        }
        if self.snapshot_running.swap(true, Ordering::AcqRel) {
            return;
        }
        match self.start_snapshot() {
            Ok(()) => self.snapshot_wanted.store(false, Ordering::Release),
            Err(e) => {
                self.snapshot_retry
                    .lock()
                    .failed("snapshot failed to start", &e);
                self.snapshot_running.store(false, Ordering::Release);
            }
        }
    }

    fn start_snapshot(&self) -> std::io::Result<()> {
        let (token, images) = {
            let _gate = self.gate.write();
            let token = self.storage.rotate()?;
            (token, self.images())
        };
        let storage = Arc::clone(&self.storage);
        let running = Arc::clone(&self.snapshot_running);
        let retry = Arc::clone(&self.snapshot_retry);
        let superseded = self.kept_superseded();
        std::thread::Builder::new()
            .name("docstore-snapshot".into())
            .spawn(move || {
                match storage.write_snapshot(token, &images) {
                    Ok(()) => {
                        retry.lock().succeeded();
                        keep_indexes(&storage, token, &images, &superseded);
                    }
                    Err(e) => retry.lock().failed(&format!("snapshot {token} failed"), &e),
                }
                // Let go of the storage (and its directory lock) before reporting completion,
                // so a shutdown that waits for the snapshot can reopen the directory at once.
                drop(storage);
                drop(images);
                running.store(false, Ordering::Release);
            })?;
        Ok(())
    }

    /// A point-in-time copy of every collection, consistent across collections (a backup): writes
    /// are held back only while document pointers are copied, and reads do not wait at all.
    pub(crate) fn consistent_images(&self) -> Vec<CollectionImage> {
        let _gate = self.gate.write();
        self.images()
    }

    /// Point-in-time copies (document pointers only) of every collection.
    pub(crate) fn images(&self) -> Vec<CollectionImage> {
        let dbs = self.databases.read();
        let mut images = Vec::new();
        for (db, colls) in dbs.iter() {
            for (name, handle) in colls {
                let c = handle.read();
                images.push(CollectionImage {
                    db: db.clone(),
                    coll: name.clone(),
                    options: c.options.clone(),
                    indexes: c.indexes()[1..]
                        .iter()
                        .map(|i| i.spec.to_document())
                        .collect(),
                    docs: c.all_documents().cloned().collect(),
                });
            }
        }
        images
    }

    /// Every collection's kept indexes read from its live indexes (see
    /// `collection::kept_from_live`), with its database, name and document count; only while
    /// the gate holds every write back.
    fn live_kept_indexes(&self) -> Vec<(String, String, u64, Vec<KeptIndex>)> {
        let dbs = self.databases.read();
        let mut kept = Vec::new();
        for (db, colls) in dbs.iter() {
            for (name, handle) in colls {
                let c = handle.read();
                let docs = c.len() as u64;
                kept.push((
                    db.clone(),
                    name.clone(),
                    docs,
                    crate::collection::kept_from_live(&c),
                ));
            }
        }
        kept
    }

    /// Whether the kept indexes being written now are not worth finishing (see
    /// [`keep_indexes`]): a newer snapshot is due (during a bulk load, each snapshot's would be
    /// obsolete soon after and hold the next snapshot back meanwhile), or a shutdown is about
    /// to write one of its own.
    fn kept_superseded(&self) -> impl Fn() -> bool + Send + 'static {
        let storage = Arc::clone(&self.storage);
        let trigger = self.snapshot_trigger;
        let superseded = Arc::clone(&self.kept_superseded);
        move || {
            superseded.load(Ordering::Acquire)
                || trigger.due(storage.journal_bytes(), storage.snapshot_bytes())
        }
    }

    /// Write everything journaled so far to disk (clean shutdown), after waiting (bounded) for
    /// a snapshot in progress so that it completes and releases the data directory.
    pub(crate) fn flush(&self) {
        let snapshot_at_shutdown = |journal_bytes: u64| {
            journal_bytes >= self.snapshot_trigger.min_journal_bytes / SHUTDOWN_SNAPSHOT_FRACTION
        };
        if snapshot_at_shutdown(self.storage.journal_bytes()) {
            // This shutdown keeps its own snapshot's indexes: an earlier snapshot's, still
            // being written, would be obsolete at once.
            self.kept_superseded.store(true, Ordering::Release);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while self.snapshot_running.load(Ordering::Acquire) && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // A long journal since the last snapshot would be replayed one write at a time at the
        // next start (tens of seconds after a bulk load); a snapshot written now lets that
        // start load the documents as they are and build the indexes in parallel instead.
        if snapshot_at_shutdown(self.storage.journal_bytes())
            && !self.snapshot_running.swap(true, Ordering::AcqRel)
        {
            // Its indexes are kept too, read from the live ones (no write can change them under
            // the gate), so that the next start loads them instead of building them.
            let rotated = {
                let _gate = self.gate.write();
                self.storage.rotate().map(|token| {
                    let started = std::time::Instant::now();
                    let kept = self.live_kept_indexes();
                    tracing::info!(
                        snapshot = token,
                        ms = started.elapsed().as_millis() as u64,
                        "read the live indexes to keep with the shutdown snapshot"
                    );
                    (token, self.images(), kept)
                })
            };
            let written = rotated.and_then(|(token, images, kept)| {
                self.storage.write_snapshot(token, &images)?;
                Ok((token, kept))
            });
            match written {
                Ok((token, mut kept)) => {
                    let collections = kept
                        .iter_mut()
                        .map(|(db, coll, docs, indexes)| {
                            let mut indexes = std::mem::take(indexes).into_iter();
                            crate::storage::kept::CollectionIndexes {
                                db: db.as_str(),
                                coll: coll.as_str(),
                                docs: *docs,
                                next_index: Box::new(move || indexes.next()),
                            }
                        })
                        .collect();
                    if let Err(e) = self
                        .storage
                        .write_kept_indexes(token, collections, &|| false)
                    {
                        tracing::warn!(
                            "cannot keep snapshot {token}'s indexes (the next start builds them): {e}"
                        );
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        "snapshot at shutdown failed (the journal keeps every write): {e}"
                    )
                }
            }
            self.snapshot_running.store(false, Ordering::Release);
        }
        if let Err(e) = self.storage.flush() {
            tracing::error!("journal flush failed: {e}");
        }
    }
}

/// Write the kept indexes of snapshot `token`, whose collections are `images` (see
/// `storage::kept`): built again from the documents, one index at a time on this thread, given
/// up once `superseded` says a newer snapshot makes them not worth finishing. A failure is only
/// logged: the next start then builds those indexes from the documents.
fn keep_indexes(
    storage: &Storage,
    token: u64,
    images: &[CollectionImage],
    superseded: &dyn Fn() -> bool,
) {
    let collections = images
        .iter()
        .map(|image| crate::storage::kept::CollectionIndexes {
            db: &image.db,
            coll: &image.coll,
            docs: image.docs.len() as u64,
            next_index: Box::new(crate::collection::indexes_to_keep(image)),
        })
        .collect();
    match storage.write_kept_indexes(token, collections, superseded) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
            tracing::info!("snapshot {token}'s indexes not kept: {e}");
        }
        Err(e) => {
            tracing::warn!(
                "cannot keep snapshot {token}'s indexes (the next start builds them): {e}"
            )
        }
    }
}

/// A clean shutdown writes a snapshot when the journal holds at least this fraction of the
/// snapshot threshold (see [`Catalog::flush`]); a shorter one replays in well under a second.
const SHUTDOWN_SNAPSHOT_FRACTION: u64 = 8;

/// Apply one journaled operation during recovery.
fn replay(dbs: &mut Namespaces, op: JournalOp) -> Result<()> {
    fn coll<'a>(dbs: &'a mut Namespaces, db: &str, name: &str) -> &'a SharedCollection {
        dbs.entry(db.to_string())
            .or_default()
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(RwLock::new(Collection::new(db, name, Document::new()))))
    }
    match op {
        JournalOp::CreateCollection {
            db,
            coll: name,
            options,
        } => {
            coll(dbs, &db, &name).write().set_options(options);
        }
        JournalOp::DropCollection { db, coll } => {
            if let Some(colls) = dbs.get_mut(&db) {
                colls.remove(&coll);
            }
        }
        JournalOp::DropDatabase { db } => {
            dbs.remove(&db);
        }
        JournalOp::RenameCollection {
            db,
            from,
            to_db,
            to,
        } => {
            let source = dbs.get_mut(&db).and_then(|c| c.remove(&from));
            if let Some(source) = source {
                {
                    let mut g = source.write();
                    g.db = to_db.clone();
                    g.name = to.clone();
                }
                dbs.entry(to_db).or_default().insert(to, source);
            }
        }
        JournalOp::CreateIndex {
            db,
            coll: name,
            spec,
        } => {
            let spec = IndexSpec::parse(&spec)?;
            // Built on every core: a restart replays an index created since the snapshot.
            coll(dbs, &db, &name).write().create_index_parallel(spec)?;
        }
        JournalOp::DropIndex {
            db,
            coll: name,
            name: index,
        } => {
            coll(dbs, &db, &name).write().drop_index(&index)?;
        }
        JournalOp::Put {
            db,
            coll: name,
            doc,
        } => {
            coll(dbs, &db, &name).write().put_stored(doc)?;
        }
        JournalOp::Delete { db, coll: name, id } => {
            let handle = coll(dbs, &db, &name);
            let mut g = handle.write();
            if let Some(record) = g.find_by_id(&id) {
                g.remove(record);
            }
        }
    }
    dbs.retain(|_, colls| !colls.is_empty());
    Ok(())
}

/// MongoDB's naming rules for databases and collections.
pub(crate) fn validate_namespace(db: &str, coll: &str) -> Result<()> {
    validate_db_name(db)?;
    if coll.is_empty() || coll.contains('\0') || coll.starts_with('.') || coll.contains('$') {
        return Err(Error::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid collection name: {coll}"),
        ));
    }
    if db.len() + 1 + coll.len() > 255 {
        return Err(Error::new(
            ErrorCode::InvalidNamespace,
            format!("Fully qualified namespace is too long. Namespace: {db}.{coll} Max: 255"),
        ));
    }
    Ok(())
}

pub(crate) fn validate_db_name(db: &str) -> Result<()> {
    if db.is_empty() || db.len() >= 64 || db.chars().any(|c| "/\\. \"$\0".contains(c)) {
        return Err(Error::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid database name: '{db}'"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_failed_snapshot_waits_before_the_next_attempt_doubling_up_to_five_minutes() {
        let mut retry = SnapshotRetry::new();
        let now = Instant::now();
        assert!(retry.may_start(now));
        let full = std::io::Error::from_raw_os_error(28);
        let mut expected = Duration::from_secs(1);
        for _ in 0..12 {
            let before = Instant::now();
            retry.failed("snapshot failed", &full);
            let not_before = retry.not_before.unwrap();
            assert!(!retry.may_start(before));
            assert!(not_before >= before + expected);
            assert!(retry.may_start(not_before));
            expected = (expected * 2).min(Duration::from_secs(300));
        }
        assert_eq!(retry.backoff, Duration::from_secs(300));
        retry.succeeded();
        assert!(retry.may_start(now));
        assert_eq!(retry.backoff, Duration::from_secs(1));
    }

    #[test]
    fn a_snapshot_is_due_past_the_threshold_and_past_the_share_of_the_last_snapshot() {
        let trigger = SnapshotTrigger {
            min_journal_bytes: 1_000,
            journal_percent: 100,
        };
        // No snapshot yet, or a small one: the fixed threshold decides.
        assert!(!trigger.due(999, 0));
        assert!(trigger.due(1_000, 0));
        assert!(trigger.due(1_000, 800));
        // A store larger than the threshold waits for a journal as large as its snapshot.
        assert!(!trigger.due(1_000, 5_000));
        assert!(!trigger.due(4_999, 5_000));
        assert!(trigger.due(5_000, 5_000));
        let half = SnapshotTrigger {
            journal_percent: 50,
            ..trigger
        };
        assert!(!half.due(2_499, 5_000));
        assert!(half.due(2_500, 5_000));
        let fixed = SnapshotTrigger {
            journal_percent: 0,
            ..trigger
        };
        assert!(fixed.due(1_000, u64::MAX));
        assert!(!SnapshotTrigger::NEVER.due(u64::MAX - 1, 0));
        // A store larger than the cap waits for the cap, not for its own size; sizes near the
        // top of the range neither overflow nor wrap round.
        assert!(!trigger.due(JOURNAL_CAP_BYTES - 1, u64::MAX));
        assert!(trigger.due(JOURNAL_CAP_BYTES, u64::MAX));
        assert!(trigger.due(u64::MAX, u64::MAX));
    }
}
