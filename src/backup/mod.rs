//! Backups, restores and the move to MongoDB: `bazaar backup`, `bazaar restore`,
//! `bazaar migrate` and scheduled backups.
//!
//! A backup is a directory in mongodump's layout plus a manifest of counts and SHA-256 checksums
//! (docstore's `dump` module describes it). On the embedded store it is taken by the store itself
//! (the `createBackup` command) from one consistent point in time across all collections, while
//! the site keeps serving. On an external MongoDB it is read collection by collection through the
//! driver, which is only consistent when nothing writes meanwhile; use the cluster's own backups
//! there.

pub mod attach;
pub mod migrate;
mod private;
pub(crate) mod record;
pub mod rotation;
pub mod schedule;

use std::path::{Path, PathBuf};

use anyhow::Context;
use bson::{doc, Bson, Document, RawDocumentBuf};
use futures::TryStreamExt;
use sha2::{Digest, Sha256};

use crate::db::{Db, Store};
use crate::telemetry::progress::{Progress, Step};

/// What a finished, verified backup holds.
#[derive(Debug, Clone)]
pub struct BackupReport {
    pub dir: PathBuf,
    pub collections: u64,
    pub documents: u64,
    /// Bytes of document data.
    pub(crate) bytes: u64,
    /// The point in time the backup shows.
    pub(crate) taken_at: bson::DateTime,
}

impl BackupReport {
    pub(crate) fn summary(&self) -> String {
        format!(
            "Backup written to {} and verified: {} collections, {} documents, {} of data, as of {}.",
            self.dir.display(),
            self.collections,
            self.documents,
            human_bytes(self.bytes),
            self.taken_at
                .try_to_rfc3339_string()
                .unwrap_or_else(|_| self.taken_at.to_string())
        )
    }
}

/// `1234567` → `1.2 MB`.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "kB", "MB", "GB", "TB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Write a verified backup of the database into `dir` (new or empty), readable by its owner
/// only: `dir` is made 0700 before anything is written into it, so nobody else can reach the
/// files while they are written, and every file and directory in it ends 0600 / 0700.
pub async fn backup_to(db: &Db, dir: &Path) -> anyhow::Result<BackupReport> {
    backup_to_with_progress(db, dir, false).await
}

/// [`backup_to`], showing progress on standard error when `progress` (see [`Progress`]): the
/// documents read from an external MongoDB, or a spinner while the embedded store writes the
/// backup in one command.
pub(crate) async fn backup_to_with_progress(
    db: &Db,
    dir: &Path,
    progress: bool,
) -> anyhow::Result<BackupReport> {
    let dir = std::path::absolute(dir)
        .with_context(|| format!("cannot resolve the backup directory {}", dir.display()))?;
    prepare_private_dir(&dir)?;
    let report = write_backup(db, dir.clone(), progress).await?;
    private::restrict_tree(&dir).with_context(|| {
        format!(
            "the backup in {} was written, but its permissions could not be restricted to its \
             owner",
            dir.display()
        )
    })?;
    Ok(report)
}

/// Create `dir` owner-only, or make an existing empty one owner-only; a non-empty one is
/// refused and left as it is.
fn prepare_private_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                anyhow::bail!(
                    "the backup directory {} is not empty: choose a new directory",
                    dir.display()
                );
            }
            private::restrict_dir(dir)
                .with_context(|| format!("cannot make {} private", dir.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            private::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", dir.display())),
    }
}

async fn write_backup(db: &Db, dir: PathBuf, progress: bool) -> anyhow::Result<BackupReport> {
    match db.store() {
        Store::EmbeddedDirectory(_) | Store::EmbeddedMemory => {
            let step = progress
                .then(|| Step::start(&format!("writing the backup into {}", dir.display())));
            let reply = db
                .client()
                .database("admin")
                .run_command(doc! {"createBackup": 1, "backupDir": dir.to_string_lossy().as_ref()})
                .await
                .context("the embedded store could not write the backup")?;
            drop(step);
            let number = |key: &str| -> u64 {
                match reply.get(key) {
                    Some(Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
                    Some(Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
                    _ => 0,
                }
            };
            Ok(BackupReport {
                collections: number("collections"),
                documents: number("documents"),
                bytes: number("bytes"),
                taken_at: reply
                    .get_datetime("createdAt")
                    .copied()
                    .unwrap_or_else(|_| bson::DateTime::now()),
                dir,
            })
        }
        Store::External(_) => logical_backup(db, &dir, progress).await,
    }
}

/// A backup of an external MongoDB read through the driver, collection by collection.
async fn logical_backup(db: &Db, dir: &Path, progress: bool) -> anyhow::Result<BackupReport> {
    let taken_at = bson::DateTime::now();
    let database = db.database();
    let mut images = Vec::new();
    let names = collection_names(database).await?;
    let mut bar = if progress {
        // The bar's length from the collections' metadata: an estimate, exact once read.
        let mut total = 0;
        for name in &names {
            total += database
                .collection::<Document>(name)
                .estimated_document_count()
                .await
                .with_context(|| format!("counting {name}"))?;
        }
        Progress::counting(total, "documents")
    } else {
        Progress::hidden()
    };
    for name in names {
        bar.set_message(&name);
        let coll = database.collection::<Document>(&name);
        let docs: Vec<Document> = coll
            .find(doc! {})
            .sort(doc! {"_id": 1})
            .await
            .with_context(|| format!("reading {name}"))?
            .try_collect()
            .await
            .with_context(|| format!("reading {name}"))?;
        bar.inc(docs.len() as u64);
        let indexes = index_specs(database, &name).await?;
        let docs = docs
            .iter()
            .map(docstore::dump::StoredDoc::from_document)
            .collect::<Result<_, _>>()
            .with_context(|| format!("encoding a document of {name}"))?;
        images.push(docstore::dump::CollectionImage {
            db: database.name().to_string(),
            coll: name,
            options: Document::new(),
            indexes,
            docs,
        });
    }
    bar.finish();
    let target = dir.to_path_buf();
    let step = progress.then(|| Step::start("writing and verifying the backup's files"));
    let manifest = tokio::task::spawn_blocking(move || {
        docstore::dump::write_verified_dump(&target, &images, taken_at.timestamp_millis())
    })
    .await
    .context("the backup task failed")??;
    drop(step);
    Ok(BackupReport {
        dir: dir.to_path_buf(),
        collections: manifest.collections.len() as u64,
        documents: manifest.documents(),
        bytes: manifest.bytes(),
        taken_at,
    })
}

/// The database's collections (not views, not `system.*`), sorted.
pub async fn collection_names(database: &mongodb::Database) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = database
        .list_collections()
        .filter(doc! {"type": "collection"})
        .await
        .with_context(|| format!("listing the collections of {}", database.name()))?
        .try_collect::<Vec<_>>()
        .await
        .with_context(|| format!("listing the collections of {}", database.name()))?
        .into_iter()
        .map(|spec| spec.name)
        .filter(|name| !name.starts_with("system."))
        .collect();
    names.sort();
    Ok(names)
}

/// A collection's index specs except `_id_`, as `createIndexes` takes them.
pub async fn index_specs(
    database: &mongodb::Database,
    coll: &str,
) -> anyhow::Result<Vec<Document>> {
    let reply = database
        .run_command(doc! {"listIndexes": coll})
        .await
        .with_context(|| format!("listing the indexes of {coll}"))?;
    let batch = reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .cloned()
        .unwrap_or_default();
    let mut specs = Vec::new();
    for item in batch {
        if let Bson::Document(mut spec) = item {
            if spec.get_str("name") == Ok("_id_") {
                continue;
            }
            spec.remove("ns");
            spec.remove("v");
            specs.push(spec);
        }
    }
    Ok(specs)
}

/// SHA-256 over a collection's documents in `_id` order, as raw BSON: equal to the collection's
/// `bsonSha256` in a backup manifest, and comparable between any two servers.
pub async fn collection_checksum(
    database: &mongodb::Database,
    coll: &str,
) -> anyhow::Result<(u64, String)> {
    let mut cursor = database
        .collection::<RawDocumentBuf>(coll)
        .find(doc! {})
        .sort(doc! {"_id": 1})
        .await
        .with_context(|| format!("reading {coll}"))?;
    let mut hasher = Sha256::new();
    let mut count = 0u64;
    while let Some(raw) = cursor
        .try_next()
        .await
        .with_context(|| format!("reading {coll}"))?
    {
        hasher.update(raw.as_bytes());
        count += 1;
    }
    Ok((count, hex::encode(hasher.finalize())))
}

/// What [`restore_through_driver`] wrote.
#[derive(Debug)]
pub struct DriverRestoreReport {
    pub collections: usize,
    pub documents: u64,
    pub(crate) verified_manifest: bool,
    pub(crate) skipped: Vec<String>,
}

/// Restore a backup (or mongodump) into a MongoDB server through the driver: every file is
/// checked first; the databases it names must hold no collections unless `force`, which drops
/// them first. Documents go in with ordered batch inserts, then each collection's indexes.
pub async fn restore_through_driver(
    client: &mongodb::Client,
    dump_dir: &Path,
    force: bool,
) -> anyhow::Result<DriverRestoreReport> {
    restore_through_driver_with_progress(client, dump_dir, force, false).await
}

/// [`restore_through_driver`], with a bar of the documents written on standard error when
/// `progress` (see [`Progress`]).
pub(crate) async fn restore_through_driver_with_progress(
    client: &mongodb::Client,
    dump_dir: &Path,
    force: bool,
    progress: bool,
) -> anyhow::Result<DriverRestoreReport> {
    let dir = dump_dir.to_path_buf();
    let checking = progress.then(|| Step::start("reading and checking the backup's files"));
    let loaded = tokio::task::spawn_blocking(move || docstore::dump::load_dump(&dir))
        .await
        .context("the restore task failed")??;
    drop(checking);
    let mut databases: Vec<&str> = loaded.images.iter().map(|i| i.db.as_str()).collect();
    databases.sort_unstable();
    databases.dedup();
    for name in &databases {
        let database = client.database(name);
        let existing = collection_names(&database).await?;
        if !existing.is_empty() {
            if !force {
                anyhow::bail!(
                    "the database {name} already holds collections ({}): restore into an empty \
                     database, or add --force to drop it first",
                    existing.join(", ")
                );
            }
            database
                .drop()
                .await
                .with_context(|| format!("cannot drop the database {name}"))?;
        }
    }
    const BATCH: usize = 1000;
    let mut documents = 0;
    let mut bar = if progress {
        let total = loaded.images.iter().map(|i| i.docs.len() as u64).sum();
        Progress::counting(total, "documents")
    } else {
        Progress::hidden()
    };
    for image in &loaded.images {
        bar.set_message(&format!("{}.{}", image.db, image.coll));
        let database = client.database(&image.db);
        database
            .create_collection(&image.coll)
            .await
            .with_context(|| format!("cannot create {}.{}", image.db, image.coll))?;
        let coll = database.collection::<Document>(&image.coll);
        for chunk in image.docs.chunks(BATCH) {
            let batch = chunk
                .iter()
                .map(docstore::dump::StoredDoc::to_document)
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("reading {}.{}", image.db, image.coll))?;
            coll.insert_many(batch)
                .await
                .with_context(|| format!("writing {}.{}", image.db, image.coll))?;
            bar.inc(chunk.len() as u64);
        }
        documents += image.docs.len() as u64;
        if !image.indexes.is_empty() {
            let specs: Vec<Document> = image
                .indexes
                .iter()
                .cloned()
                .map(|mut spec| {
                    spec.remove("v");
                    spec
                })
                .collect();
            database
                .run_command(doc! {"createIndexes": &image.coll, "indexes": specs})
                .await
                .with_context(|| format!("creating the indexes of {}.{}", image.db, image.coll))?;
        }
    }
    bar.finish();
    Ok(DriverRestoreReport {
        collections: loaded.images.len(),
        documents,
        verified_manifest: loaded.manifest.is_some(),
        skipped: loaded.skipped,
    })
}

/// Restore the backup in `dump_dir` as the embedded store's whole data directory (Bazaar must
/// be stopped). See [`docstore::dump::restore_into_directory`].
pub async fn restore_embedded(
    dump_dir: &Path,
    data_dir: &Path,
    force: bool,
) -> anyhow::Result<docstore::dump::RestoreReport> {
    let (dump, data) = (dump_dir.to_path_buf(), data_dir.to_path_buf());
    let report = tokio::task::spawn_blocking(move || {
        docstore::dump::restore_into_directory(&dump, &data, force)
    })
    .await
    .context("the restore task failed")??;
    // The restored data is as private as the backup it came from; the old data moved aside is
    // a full copy of the shop too. (Files inside keep their modes: a 0700 directory already
    // keeps everyone else out.)
    if let Err(e) = private::restrict_dir(data_dir) {
        tracing::warn!(
            "restored, but cannot make {} private: {e}",
            data_dir.display()
        );
    }
    if let Some(aside) = &report.previous_moved_to {
        if let Err(e) = private::restrict_dir(aside) {
            tracing::warn!("cannot make {} private: {e}", aside.display());
        }
        // Bazaar keeps its generated session key beside the store: carry it over so that
        // shoppers' and admins' sessions survive the restore.
        let key = aside.join(SESSION_KEY_FILE);
        if key.is_file() {
            if let Err(e) = std::fs::copy(&key, data_dir.join(SESSION_KEY_FILE)) {
                tracing::warn!("cannot carry {} over: {e}", key.display());
            }
        }
    }
    Ok(report)
}

/// The session key file Bazaar generates in `database.path` (see `web::session`).
const SESSION_KEY_FILE: &str = "session.key";
