//! Durability: an append-only, checksummed journal of logical operations with group commit, and
//! snapshots that let the journal be compacted. In-memory mode keeps nothing on disk.
//! STUB: replaced by the storage module work.

pub mod journal;
pub mod snapshot;

use bson::{Bson, Document};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

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

/// Storage errors are I/O or corruption that recovery could not repair.
pub type StorageResult<T> = std::io::Result<T>;

/// The journal and snapshot files of one data directory, or nothing (in-memory).
pub struct Storage {}

impl Storage {
    pub fn in_memory() -> Storage {
        Storage {}
    }

    /// Open (creating) a data directory and recover its contents.
    pub fn open(_dir: &Path, _commit_interval: Duration) -> StorageResult<(Storage, Recovered)> {
        Ok((Storage {}, Recovered::default()))
    }

    /// Append operations (one group, written together); returns the sequence number to wait on.
    pub fn append(&self, _ops: &[JournalOp]) -> u64 {
        0
    }

    /// Wait until everything up to `lsn` is on disk (`j: true`); immediate in memory.
    pub async fn wait_durable(&self, _lsn: u64) {}

    /// Journal bytes written since the last snapshot.
    pub fn journal_bytes(&self) -> u64 {
        0
    }

    /// Start a new journal segment; the snapshot taken at this point covers everything before.
    /// Call with writes excluded. Returns a token for [`Storage::write_snapshot`].
    pub fn rotate(&self) -> StorageResult<u64> {
        Ok(0)
    }

    /// Write a snapshot of `collections` (state at the rotation `token`), then delete the journal
    /// segments it covers. Safe to run while new writes are appended.
    pub fn write_snapshot(
        &self,
        _token: u64,
        _collections: &[CollectionImage],
    ) -> StorageResult<()> {
        Ok(())
    }

    /// Flush and fsync everything appended so far (clean shutdown).
    pub fn flush(&self) -> StorageResult<()> {
        Ok(())
    }
}
