//! Photos of photo nodes, in the GridFS bucket `assets` (see `crate::media`).
//!
//! An upload first takes the node's `metadata.locked` with one find-one-and-update (only when
//! it is free or older than [`LOCK_TIMEOUT_SECS`], so a crashed upload cannot block the node
//! for ever); a second upload meanwhile is refused. The new file is stored completely, then
//! the node is switched to it with one nonce-guarded update, and only then is the old file
//! deleted. So the node always points at a stored file: a crash after the upload leaves the
//! new file unreferenced, a crash after the switch leaves the old one; [`clean_orphans`]
//! removes such files.

use std::collections::HashSet;
use std::time::Duration;

use actix_web::web::Bytes;
use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};
use futures::{Stream, TryStreamExt};
use mongodb::options::ReturnDocument;

use crate::content::model::{self, Node};
use crate::db::{Db, DbError};
use crate::media::{self, StoredImage, UploadError};

/// An upload lock older than this is taken to belong to a crashed upload.
pub const LOCK_TIMEOUT_SECS: i64 = 5 * 60;
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
pub async fn take_lock(db: &Db, id: ObjectId) -> Result<Option<DateTime>, DbError> {
    let now = DateTime::now();
    let stale = DateTime::from_millis(now.timestamp_millis() - LOCK_TIMEOUT_SECS * 1000);
    let taken = model::collection(db)
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
pub async fn release_lock(db: &Db, id: ObjectId, taken: DateTime) -> Result<(), DbError> {
    model::collection(db)
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
    form_nonce: ObjectId,
    image: &StoredImage,
    filename: &str,
) -> Result<Option<ObjectId>, PhotoError> {
    let before = model::durable(db)
        .find_one_and_update(
            doc! { "_id": id, "metadata.nonce": form_nonce },
            doc! { "$set": {
                "metadata.detail.file_id": image.id,
                "metadata.detail.filename": filename,
                "metadata.detail.content_type": image.kind.mime(),
                "metadata.detail.width": i64::from(image.width),
                "metadata.detail.height": i64::from(image.height),
                "metadata.nonce": ObjectId::new(),
                "metadata.updated": DateTime::now(),
            } },
        )
        .return_document(ReturnDocument::Before)
        .await?
        .ok_or(PhotoError::Changed)?;
    Ok(before.photo_file())
}

/// Upload `body` as the photo of node `id` (first photo or replacement), under the node's
/// upload lock and the nonce its form was loaded with; `max_bytes` and `max_pixels` are the
/// configured upload limits (`media.max_upload_mb`, `media.max_image_megapixels`).
pub async fn upload<S, E>(
    db: &Db,
    id: ObjectId,
    form_nonce: ObjectId,
    filename: &str,
    body: S,
    (max_bytes, max_pixels): (usize, u64),
) -> Result<StoredImage, PhotoError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let Some(taken) = take_lock(db, id).await? else {
        return match model::by_id(db, id).await? {
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
    form_nonce: ObjectId,
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

/// Delete image files that nothing points at any more (no product photo, no photo node, not
/// the thumbnail of a kept file) and that are older than `older_than`. Returns how many
/// files went. This reads every file's entry once: it is a maintenance job, not a page.
pub async fn clean_orphans(db: &Db, older_than: Duration) -> Result<u64, DbError> {
    let cutoff = DateTime::from_millis(
        DateTime::now().timestamp_millis() - i64::try_from(older_than.as_millis()).unwrap_or(0),
    );
    let files: Vec<Document> = db
        .collection::<Document>(&format!("{}.files", media::BUCKET))
        .find(doc! {})
        .projection(doc! { "_id": 1, "uploadDate": 1, "metadata.thumbnail_of": 1 })
        .await?
        .try_collect()
        .await?;
    let products = db.collection::<Document>(crate::catalog::products::COLLECTION);
    let nodes = model::collection(db);
    let mut removed = 0;
    let mut kept: HashSet<ObjectId> = HashSet::new();
    let mut thumbnails = Vec::new();
    for file in &files {
        let Ok(id) = file.get_object_id("_id") else {
            continue;
        };
        if let Some(parent) = file
            .get_document("metadata")
            .ok()
            .and_then(|m| m.get_object_id("thumbnail_of").ok())
        {
            thumbnails.push((id, parent, file.get_datetime("uploadDate").ok().copied()));
            continue;
        }
        let referenced = products.count_documents(doc! { "photos": id }).await? > 0
            || nodes
                .count_documents(doc! { "metadata.detail.file_id": id })
                .await?
                > 0;
        let young = file
            .get_datetime("uploadDate")
            .map_or(true, |d| *d >= cutoff);
        if referenced || young {
            kept.insert(id);
        } else {
            removed += media::delete_file(db, id).await?;
        }
    }
    // Thumbnails whose image is gone (deleted above along with it, or lost earlier).
    for (id, parent, uploaded) in thumbnails {
        let young = uploaded.is_none_or(|d| d >= cutoff);
        if !kept.contains(&parent) && !young && !file_exists(db, parent).await? {
            removed += media::delete_file(db, id).await?;
        }
    }
    Ok(removed)
}

async fn file_exists(db: &Db, id: ObjectId) -> Result<bool, DbError> {
    Ok(media::bucket(db)
        .find_one(doc! { "_id": id })
        .await?
        .is_some())
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
