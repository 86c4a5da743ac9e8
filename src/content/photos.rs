//! Photos of photo nodes, in the GridFS bucket `assets` (see `crate::media`).
//!
//! An upload first takes the node's `metadata.locked` with one find-one-and-update (only when
//! it is free or older than [`LOCK_TIMEOUT_SECS`], so a crashed upload cannot block the node
//! for ever); a second upload meanwhile is refused. The new file is stored completely, then
//! the node is switched to it with one nonce-guarded update, and only then is the old file
//! deleted. So the node always points at a stored file: a crash after the upload leaves the
//! new file unreferenced, a crash after the switch leaves the old one; [`clean_orphans`]
//! removes such files.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use actix_web::web::Bytes;
use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};
use futures::{Stream, TryStreamExt};
use mongodb::options::ReturnDocument;

use crate::content::changes;
use crate::content::model::{self, Node};
use crate::content::store;
use crate::db::{Db, DbError};
use crate::domain::EditVersion;
use crate::media::{self, StoredImage, UploadError};

/// An upload lock older than this is taken to belong to a crashed upload.
pub(crate) const LOCK_TIMEOUT_SECS: i64 = 5 * 60;
/// Files younger than this are never called orphans: an upload may be between storing its
/// file and pointing a node or product at it.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(60 * 60);

#[derive(Debug, thiserror::Error)]
pub enum PhotoError {
    #[error("another upload to this photo is in progress; try again when it has finished")]
    Busy,
    #[error("the photo was changed by someone else since you opened it; nothing was replaced")]
    Changed,
    #[error("no such photo")]
    NotFound,
    #[error("{0}")]
    Upload(UploadError),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<mongodb::error::Error> for PhotoError {
    fn from(e: mongodb::error::Error) -> Self {
        PhotoError::Db(e.into())
    }
}

impl From<UploadError> for PhotoError {
    fn from(e: UploadError) -> Self {
        match e {
            UploadError::Db(db) => PhotoError::Db(db),
            other => PhotoError::Upload(other),
        }
    }
}

/// Take the upload lock of photo node `id`; `None` when it is held (or there is no such
/// photo node). Returns the lock's time, needed to release exactly this lock.
pub(crate) async fn take_lock(db: &Db, id: ObjectId) -> Result<Option<DateTime>, DbError> {
    let now = db.now();
    let stale = DateTime::from_millis(now.timestamp_millis() - LOCK_TIMEOUT_SECS * 1000);
    let taken = store::collection(db)
        .find_one_and_update(
            doc! {
                "_id": id,
                "metadata.type": "photo",
                "$or": [ { "metadata.locked": Bson::Null }, { "metadata.locked": { "$lt": stale } } ],
            },
            doc! { "$set": { "metadata.locked": now } },
        )
        .await?;
    Ok(taken.map(|_| now))
}

/// Release the lock taken at `taken` (a lock taken over after a timeout is left alone).
pub(crate) async fn release_lock(db: &Db, id: ObjectId, taken: DateTime) -> Result<(), DbError> {
    store::collection(db)
        .update_one(
            doc! { "_id": id, "metadata.locked": taken },
            doc! { "$set": { "metadata.locked": Bson::Null } },
        )
        .await?;
    Ok(())
}

/// Point node `id` at the stored image, if its nonce is still `form_nonce`; returns the file
/// it pointed at before (`Ok(None)` inside: it had none), or `Err(Changed)`.
pub async fn swap_file(
    db: &Db,
    id: ObjectId,
    form_nonce: EditVersion,
    image: &StoredImage,
    filename: &str,
) -> Result<Option<ObjectId>, PhotoError> {
    let before = store::durable(db)
        .find_one_and_update(
            doc! { "_id": id, "metadata.nonce": form_nonce },
            doc! { "$set": {
                "metadata.detail.file_id": image.id,
                "metadata.detail.filename": filename,
                "metadata.detail.content_type": image.kind.mime(),
                "metadata.detail.width": i64::from(image.width),
                "metadata.detail.height": i64::from(image.height),
                "metadata.media": [image.id],
                "metadata.nonce": EditVersion::new(),
                "metadata.updated": db.now(),
            } },
        )
        .return_document(ReturnDocument::Before)
        .await;
    changes::nodes_changed(db);
    let before = before?.ok_or(PhotoError::Changed)?;
    Ok(before.photo_file())
}

/// Upload `body` as the photo of node `id` (first photo or replacement), under the node's
/// upload lock and the nonce its form was loaded with; `max_bytes` and `max_pixels` are the
/// configured upload limits (`media.max_upload_mb`, `media.max_image_megapixels`).
pub(crate) async fn upload<S, E>(
    db: &Db,
    id: ObjectId,
    form_nonce: EditVersion,
    filename: &str,
    body: S,
    (max_bytes, max_pixels): (usize, u64),
) -> Result<StoredImage, PhotoError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let Some(taken) = take_lock(db, id).await? else {
        return match store::by_id(db, id).await? {
            Some(node) if node.metadata.kind == model::NodeType::Photo => Err(PhotoError::Busy),
            _ => Err(PhotoError::NotFound),
        };
    };
    let outcome = upload_locked(db, id, form_nonce, filename, body, (max_bytes, max_pixels)).await;
    if let Err(e) = release_lock(db, id, taken).await {
        // The lock times out by itself; the upload's own outcome stands.
        tracing::warn!(error = %e, "releasing a photo upload lock failed");
    }
    outcome
}

async fn upload_locked<S, E>(
    db: &Db,
    id: ObjectId,
    form_nonce: EditVersion,
    filename: &str,
    body: S,
    (max_bytes, max_pixels): (usize, u64),
) -> Result<StoredImage, PhotoError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let stored = media::store_upload_limited(db, filename, body, max_bytes, max_pixels).await?;
    let old = match swap_file(db, id, form_nonce, &stored, filename).await {
        Ok(old) => old,
        Err(e) => {
            // The node still points at its old file; the new one is not needed.
            media::delete_file(db, stored.id).await?;
            return Err(e);
        }
    };
    if let Some(old) = old {
        media::delete_file(db, old).await?;
    }
    Ok(stored)
}

/// A stored file the clean-up would remove, as the admin is shown it before confirming.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OrphanFile {
    pub(crate) id: ObjectId,
    pub(crate) filename: String,
    /// Bytes of the file itself (its copies not counted).
    pub(crate) length: i64,
    pub(crate) uploaded: Option<DateTime>,
    /// Its thumbnail and display copy, removed with it.
    pub(crate) derivatives: Vec<ObjectId>,
    /// A copy whose original is already gone (left by an interrupted delete or upload).
    pub(crate) leftover_copy: bool,
}

/// Where a file id can be held: every collection whose documents may name a stored file, as
/// an ObjectId (product `photos`, a photo node's `metadata.detail.file_id`, a setting) or as a
/// `/media/{id}` link inside text (Markdown bodies, descriptions). The clean-up reads them all;
/// a new place that stores file ids must be added here.
const REFERRING_COLLECTIONS: [&str; 3] = [
    crate::catalog::products::COLLECTION,
    store::COLLECTION,
    crate::db::site::COLLECTION,
];

/// Collect into `found` the ids in `known` that `value` names, as an ObjectId anywhere in it or
/// as `/media/{24 hex digits}` inside a string.
fn collect_file_ids(value: &Bson, known: &HashSet<ObjectId>, found: &mut HashSet<ObjectId>) {
    match value {
        Bson::ObjectId(id) if known.contains(id) => {
            found.insert(*id);
        }
        Bson::String(text) => found.extend(
            media::refs::linked_ids(text)
                .into_iter()
                .filter(|id| known.contains(id)),
        ),
        Bson::Document(doc) => doc.values().for_each(|v| collect_file_ids(v, known, found)),
        Bson::Array(items) => items.iter().for_each(|v| collect_file_ids(v, known, found)),
        _ => {}
    }
}

/// The stored files nothing refers to any more and that are older than `older_than`, each with
/// the copies that go with it, oldest first. A thumbnail or display copy is never an orphan
/// while its original exists: it belongs to it, and a reference to a copy (a Markdown body
/// linking `/media/{id}/display`'s file directly) keeps the original. This reads every stored
/// file's entry and every document of `REFERRING_COLLECTIONS` once: a maintenance job, not a
/// page.
pub(crate) async fn find_orphans(
    db: &Db,
    older_than: Duration,
) -> Result<Vec<OrphanFile>, DbError> {
    let cutoff = crate::clock::before(db.now(), older_than);
    let files: Vec<Document> = db
        .collection::<Document>(media::FILES)
        .find(doc! {})
        .projection(doc! { "_id": 1, "filename": 1, "length": 1, "uploadDate": 1, "metadata": 1 })
        .await?
        .try_collect()
        .await?;
    let known: HashSet<ObjectId> = files
        .iter()
        .filter_map(|f| f.get_object_id("_id").ok())
        .collect();
    let mut referenced = HashSet::new();
    for collection in REFERRING_COLLECTIONS {
        let mut cursor = db.collection::<Document>(collection).find(doc! {}).await?;
        while let Some(document) = cursor.try_next().await? {
            collect_file_ids(&Bson::Document(document), &known, &mut referenced);
        }
    }
    // Copies by original, from both directions (an upload interrupted between storing a copy
    // and naming it on the original leaves only the copy's link back).
    let mut copies: HashMap<ObjectId, HashSet<ObjectId>> = HashMap::new();
    let mut original_of: HashMap<ObjectId, ObjectId> = HashMap::new();
    for file in &files {
        let Ok(id) = file.get_object_id("_id") else {
            continue;
        };
        if let Some(original) = media::original_named_in(file) {
            copies.entry(original).or_default().insert(id);
            original_of.insert(id, original);
        }
        for copy in media::derivatives_named_in(file) {
            copies.entry(id).or_default().insert(copy);
        }
    }
    // A reference to a copy keeps its original (and so the copy).
    let kept: HashSet<ObjectId> = referenced
        .iter()
        .map(|id| original_of.get(id).copied().unwrap_or(*id))
        .collect();
    let mut orphans = Vec::new();
    for file in &files {
        let Ok(id) = file.get_object_id("_id") else {
            continue;
        };
        let uploaded = file.get_datetime("uploadDate").ok().copied();
        if uploaded.is_none_or(|d| d >= cutoff) {
            // Too recent: an upload may be between storing its file and pointing at it.
            continue;
        }
        let leftover_copy = match media::original_named_in(file) {
            // A copy goes with its original, never on its own while that exists.
            Some(original) if known.contains(&original) => continue,
            Some(_) => true,
            None => false,
        };
        if kept.contains(&id) {
            continue;
        }
        let mut derivatives: Vec<ObjectId> = copies
            .get(&id)
            .map(|c| c.iter().copied().filter(|c| known.contains(c)).collect())
            .unwrap_or_default();
        derivatives.sort();
        orphans.push(OrphanFile {
            id,
            filename: file.get_str("filename").unwrap_or("").to_string(),
            length: match file.get("length") {
                Some(Bson::Int64(n)) => *n,
                Some(Bson::Int32(n)) => i64::from(*n),
                _ => 0,
            },
            uploaded,
            derivatives,
            leftover_copy,
        });
    }
    orphans.sort_by_key(|o| (o.uploaded, o.id));
    Ok(orphans)
}

/// Delete the orphans among `chosen` (the files an admin confirmed from the list
/// [`find_orphans`] showed), each with its copies; a file that is no longer an orphan (linked
/// since the list was shown) is kept. Returns how many files were deleted, copies included.
pub(crate) async fn remove_orphans(
    db: &Db,
    older_than: Duration,
    chosen: &HashSet<ObjectId>,
) -> Result<u64, DbError> {
    let mut removed = 0;
    for orphan in find_orphans(db, older_than).await? {
        if chosen.contains(&orphan.id) {
            removed +=
                media::delete_files(db, std::iter::once(orphan.id).chain(orphan.derivatives))
                    .await?;
        }
    }
    Ok(removed)
}

/// Delete every orphan [`find_orphans`] finds, with its copies. Returns how many files went.
pub async fn clean_orphans(db: &Db, older_than: Duration) -> Result<u64, DbError> {
    let mut removed = 0;
    for orphan in find_orphans(db, older_than).await? {
        removed +=
            media::delete_files(db, std::iter::once(orphan.id).chain(orphan.derivatives)).await?;
    }
    Ok(removed)
}

/// True when `node` is a photo whose file is stored (or that has none yet).
pub async fn file_resolves(db: &Db, node: &Node) -> Result<bool, DbError> {
    match node.photo_file() {
        None => Ok(true),
        Some(id) => Ok(media::bucket(db)
            .find_one(doc! { "_id": id })
            .await?
            .is_some()),
    }
}
