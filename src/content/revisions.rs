//! The `revisions` collection: the history of a content node (stored fields only: the node's
//! shape is `content::model`'s, which builds a revision from a node and back). Every save through
//! [`store::save_edit`](crate::content::store::save_edit) keeps the version it replaced — its
//! editable fields (title, slug, tags, publication, detail), when it was saved and by whom — so
//! a bad save can be looked at, compared and undone (a restore is itself a save, and so itself
//! leaves a revision). Each node keeps only its newest [`Retention`] revisions; deleting a node
//! deletes them all.

use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;
use serde::{Deserialize, Serialize};

use crate::db::{Db, DbError};
use crate::domain::Slug;

pub const COLLECTION: &str = "revisions";

/// How many revisions of one node are kept (`content.revisions_kept`): always at least one, so
/// the version a save replaced can always be restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retention(usize);

impl Retention {
    /// The most any node keeps (the setting's upper bound).
    pub(crate) const MAX: usize = 1000;

    /// `kept` revisions, brought into `1..=MAX`.
    pub(crate) fn new(kept: usize) -> Retention {
        Retention(kept.clamp(1, Self::MAX))
    }

    pub(crate) fn get(self) -> usize {
        self.0
    }
}

impl Default for Retention {
    /// The shipped default of `content.revisions_kept`.
    fn default() -> Retention {
        Retention(50)
    }
}

/// One earlier version of a node, as it was before a save replaced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Revision {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    pub(crate) node_id: ObjectId,
    /// When this version was saved (the node's `metadata.updated` then).
    pub(crate) at: DateTime,
    /// Who saved this version (the node's `metadata.updated_by` then); `None` when the node
    /// did not record it (created, or not edited since the name was recorded).
    pub by: Option<String>,
    pub title: String,
    pub(crate) slug: Slug,
    pub(crate) tags: Vec<String>,
    pub(crate) published: Option<DateTime>,
    /// The type's own fields, shaped like `metadata.detail`. Lists leave it out (`#[serde
    /// default]` reads it as empty then).
    #[serde(default)]
    pub detail: Document,
}

impl Revision {
    /// `YYYY-MM-DD HH:MM:SS ZONE` in the site's time zone, for lists and headings.
    pub(crate) fn at_label(&self) -> String {
        let zone = crate::db::site::time_zone();
        format!(
            "{} {}",
            zone.format(self.at, "%Y-%m-%d %H:%M:%S"),
            zone.abbreviation(self.at)
        )
    }

    /// Who saved it, in words.
    pub(crate) fn by_label(&self) -> &str {
        self.by.as_deref().unwrap_or("unrecorded")
    }
}

pub(crate) fn indexes() -> Vec<IndexModel> {
    vec![
        // A node's revisions, newest first: the edit page's list, one revision's page (by
        // `_id` and node), the retention cut and the delete of a node's history.
        IndexModel::builder()
            .keys(doc! { "node_id": 1, "at": -1 })
            .options(IndexOptions::builder().name("node_at".to_string()).build())
            .build(),
    ]
}

fn collection(db: &Db) -> mongodb::Collection<Revision> {
    db.collection(COLLECTION)
}

/// The filter of every query on one node's revisions.
pub fn of_node(node_id: ObjectId) -> Document {
    doc! { "node_id": node_id }
}

/// The order of a node's revisions: newest first, as the `node_at` index holds them.
pub fn newest_first() -> Document {
    doc! { "at": -1 }
}

/// Keep `revision` (the version a save just replaced, built by `content::model`, which knows
/// the node's shape) then drop its node's revisions beyond the newest `kept`. Journaled like the
/// save it follows.
pub(crate) async fn record(db: &Db, revision: &Revision, kept: Retention) -> Result<(), DbError> {
    db.durable::<Revision>(COLLECTION)
        .insert_one(revision)
        .await?;
    prune(db, revision.node_id, kept).await
}

/// Delete the revisions of `node_id` older than its `kept`-th newest: one read of that one
/// revision's time through the index, one delete. Revisions saved in the same millisecond as
/// the cut are kept (a node may keep a few more than `kept` then, never fewer).
pub(crate) async fn prune(db: &Db, node_id: ObjectId, kept: Retention) -> Result<(), DbError> {
    let skip = u64::try_from(kept.get() - 1).unwrap_or(u64::MAX);
    let cut = db
        .collection::<Document>(COLLECTION)
        .find_one(of_node(node_id))
        .sort(newest_first())
        .skip(skip)
        .projection(doc! { "at": 1 })
        .await?;
    let Some(at) = cut.and_then(|c| c.get_datetime("at").ok().copied()) else {
        return Ok(());
    };
    collection(db)
        .delete_many(doc! { "node_id": node_id, "at": { "$lt": at } })
        .await?;
    Ok(())
}

/// The newest `limit` revisions of a node, without their detail (the list shows when, who and
/// the title).
pub async fn list(db: &Db, node_id: ObjectId, limit: i64) -> Result<Vec<Revision>, DbError> {
    Ok(collection(db)
        .find(of_node(node_id))
        .sort(newest_first())
        .projection(doc! { "detail": 0 })
        .limit(limit)
        .await?
        .try_collect()
        .await?)
}

/// Revision `id` of node `node_id`; `None` when there is none (or it is another node's).
pub async fn get(db: &Db, node_id: ObjectId, id: ObjectId) -> Result<Option<Revision>, DbError> {
    let mut filter = of_node(node_id);
    filter.insert("_id", id);
    Ok(collection(db).find_one(filter).await?)
}

/// Delete every revision of a node (the node is being deleted).
pub(crate) async fn delete_all(db: &Db, node_id: ObjectId) -> Result<u64, DbError> {
    Ok(collection(db)
        .delete_many(of_node(node_id))
        .await?
        .deleted_count)
}
