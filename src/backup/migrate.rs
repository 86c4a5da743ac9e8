//! `bazaar migrate --to mongodb://…`: copy the configured database (every collection, its
//! indexes, GridFS buckets, which are collections too) to another server through the driver.
//!
//! Each collection is copied in `_id` order with ordered inserts, so after an interruption the
//! target holds a prefix of the source's `_id` order; `--resume` checks that and continues after
//! it. The source must not change meanwhile (put the shop in maintenance). At the end every
//! collection's count, checksum and index names are compared on both sides.

use anyhow::{bail, Context};
use bson::{doc, Document, RawDocumentBuf};
use futures::TryStreamExt;
use mongodb::{Client, Database};
use std::collections::BTreeSet;

use super::{collection_checksum, collection_names, index_specs};
use crate::telemetry::progress::Progress;

/// What to do with a target database that already holds collections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetMode {
    /// Refuse a non-empty target.
    Fresh,
    /// Drop the target database first.
    Force,
    /// Continue an interrupted migrate.
    Resume,
}

#[derive(Debug, Clone)]
pub struct MigrateOptions {
    pub target_uri: String,
    pub mode: TargetMode,
    /// Documents per insert.
    pub batch: usize,
    /// Stop (resumably) after this many batches: to move a large shop in steps.
    pub max_batches: Option<u64>,
    /// Show progress on standard error (see [`Progress`]).
    pub progress: bool,
}

/// How a migrate ended.
#[derive(Debug, PartialEq, Eq)]
pub enum MigrateOutcome {
    /// Everything copied and verified.
    Complete { collections: usize, documents: u64 },
    /// Stopped after `max_batches`; run again with `--resume`.
    Paused { copied: u64, remaining: u64 },
}

/// The target database: the one the URI names, else the source's name.
pub(crate) async fn target_database(uri: &str, default_name: &str) -> anyhow::Result<Database> {
    let options = mongodb::options::ClientOptions::parse(uri)
        .await
        .context("the --to URI is not a valid MongoDB URI")?;
    let name = options
        .default_database
        .clone()
        .unwrap_or_else(|| default_name.to_string());
    let client = Client::with_options(options).context("cannot set up the target client")?;
    Ok(client.database(&name))
}

/// Copy `source` into the database `options.target_uri` names, then verify.
pub async fn migrate(
    source: &Database,
    options: &MigrateOptions,
) -> anyhow::Result<MigrateOutcome> {
    let target = target_database(&options.target_uri, source.name()).await?;
    let redacted = crate::config::redact_uri(&options.target_uri);
    target
        .run_command(doc! {"ping": 1})
        .await
        .with_context(|| format!("cannot reach the target {redacted}"))?;
    let names = collection_names(source).await?;
    let existing = collection_names(&target).await?;
    if !existing.is_empty() {
        match options.mode {
            TargetMode::Fresh => bail!(
                "the target database {} on {redacted} already holds collections ({}): add \
                 --resume to continue an interrupted migrate, or --force to drop that database \
                 and start over",
                target.name(),
                existing.join(", ")
            ),
            TargetMode::Force => target
                .drop()
                .await
                .with_context(|| format!("cannot drop the target database {}", target.name()))?,
            TargetMode::Resume => {
                let extra: Vec<_> = existing.iter().filter(|n| !names.contains(n)).collect();
                if !extra.is_empty() {
                    bail!(
                        "the target holds collections the source does not have ({extra:?}): it \
                         is not an interrupted copy of this database; use --force to start over"
                    );
                }
            }
        }
    }
    let mut counts = Vec::with_capacity(names.len());
    for name in &names {
        let n = source
            .collection::<Document>(name)
            .count_documents(doc! {})
            .await
            .with_context(|| format!("counting {name}"))?;
        counts.push(n);
    }
    let total: u64 = counts.iter().sum();
    let mut progress = if options.progress {
        Progress::counting(total, "documents")
    } else {
        Progress::hidden()
    };
    let mut batches = 0u64;
    for (name, &source_count) in names.iter().zip(&counts) {
        let already = copy_collection(
            source,
            &target,
            name,
            source_count,
            options,
            &mut batches,
            &mut progress,
        )
        .await?;
        if let Some(copied_now) = already {
            progress.finish();
            return Ok(MigrateOutcome::Paused {
                copied: copied_now,
                remaining: total.saturating_sub(copied_now),
            });
        }
    }
    progress.finish();
    verify(source, &target, &names).await?;
    Ok(MigrateOutcome::Complete {
        collections: names.len(),
        documents: total,
    })
}

/// Copy one collection (resuming after what the target has); `Some(total copied)` when the
/// batch limit stopped the run.
async fn copy_collection(
    source: &Database,
    target: &Database,
    name: &str,
    source_count: u64,
    options: &MigrateOptions,
    batches: &mut u64,
    progress: &mut Progress,
) -> anyhow::Result<Option<u64>> {
    let source_coll = source.collection::<RawDocumentBuf>(name);
    let target_coll = target.collection::<RawDocumentBuf>(name);
    if !collection_names(target).await?.iter().any(|n| n == name) {
        target
            .create_collection(name)
            .await
            .with_context(|| format!("cannot create {name} on the target"))?;
    }
    let present = target_coll
        .count_documents(doc! {})
        .await
        .with_context(|| format!("counting {name} on the target"))?;
    if present > source_count {
        bail!("the target's {name} holds more documents ({present}) than the source's ({source_count}); use --force to start over");
    }
    if present > 0 {
        check_prefix(source, target, name, present).await?;
    }
    progress.set_message(name);
    progress.inc(present);
    if present < source_count {
        let mut cursor = source_coll
            .find(doc! {})
            .sort(doc! {"_id": 1})
            .skip(present)
            .batch_size(options.batch.min(u32::MAX as usize) as u32)
            .await
            .with_context(|| format!("reading {name}"))?;
        let mut batch = Vec::with_capacity(options.batch);
        loop {
            let next = cursor
                .try_next()
                .await
                .with_context(|| format!("reading {name}"))?;
            let done = next.is_none();
            if let Some(doc) = next {
                batch.push(doc);
            }
            if batch.len() >= options.batch || (done && !batch.is_empty()) {
                if options.max_batches.is_some_and(|max| *batches >= max) {
                    return Ok(Some(progress.position()));
                }
                let n = batch.len() as u64;
                target_coll
                    .insert_many(std::mem::take(&mut batch))
                    .await
                    .with_context(|| format!("writing {name} on the target"))?;
                *batches += 1;
                progress.inc(n);
            }
            if done {
                break;
            }
        }
    }
    let specs = index_specs(source, name).await?;
    if !specs.is_empty() {
        target
            .run_command(doc! {"createIndexes": name, "indexes": specs})
            .await
            .with_context(|| format!("cannot create the indexes of {name} on the target"))?;
    }
    Ok(None)
}

/// The target's `present` documents must be exactly the source's first ones in `_id` order.
async fn check_prefix(
    source: &Database,
    target: &Database,
    name: &str,
    present: u64,
) -> anyhow::Result<()> {
    let last_id = |db: &Database, skip: u64, order: i32| {
        let coll = db.collection::<Document>(name);
        async move {
            coll.find_one(doc! {})
                .sort(doc! {"_id": order})
                .skip(skip)
                .projection(doc! {"_id": 1})
                .await
                .map(|d| d.and_then(|d| d.get("_id").cloned()))
        }
    };
    let source_id = last_id(source, present - 1, 1)
        .await
        .with_context(|| format!("reading {name}"))?;
    let target_id = last_id(target, 0, -1)
        .await
        .with_context(|| format!("reading {name} on the target"))?;
    if source_id.is_none() || source_id != target_id {
        bail!(
            "the target's {name} is not an interrupted copy of the source's (the source changed \
             since, or something else wrote to the target): use --force to start over"
        );
    }
    Ok(())
}

/// Counts, checksums and index names of every collection, side by side.
async fn verify(source: &Database, target: &Database, names: &[String]) -> anyhow::Result<()> {
    let target_names = collection_names(target).await?;
    if target_names != names {
        bail!("verification failed: the target's collections are {target_names:?}, the source's {names:?}");
    }
    for name in names {
        let (source_count, source_sum) = collection_checksum(source, name).await?;
        let (target_count, target_sum) = collection_checksum(target, name).await?;
        if source_count != target_count {
            bail!("verification failed: {name} holds {source_count} documents in the source, {target_count} in the target");
        }
        if source_sum != target_sum {
            bail!("verification failed: {name} has the same count ({source_count}) but different contents (SHA-256 {source_sum} vs {target_sum}); did the source change during the migrate?");
        }
        let index_names = |specs: Vec<Document>| -> BTreeSet<String> {
            specs
                .iter()
                .filter_map(|s| s.get_str("name").ok().map(str::to_string))
                .collect()
        };
        let source_indexes = index_names(index_specs(source, name).await?);
        let target_indexes = index_names(index_specs(target, name).await?);
        if source_indexes != target_indexes {
            bail!("verification failed: {name} has indexes {source_indexes:?} in the source, {target_indexes:?} in the target");
        }
    }
    Ok(())
}
