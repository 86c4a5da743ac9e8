//! The `nodes` collection's reads and writes: publication, the public streams, the editor's
//! saves with their edit-version check, the admin list, and the indexes serving them. The node
//! documents themselves, without I/O, are in [`crate::content::model`].
//!
//! Every write here reports the change (`content::changes`), so the content caches of this
//! instance drop what they hold at once; other instances see it within their caches' bound.

use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use crate::content::changes;
use crate::content::model::{Author, Detail, Metadata, Node, NodeInput, NodeType};
use crate::content::revisions::{self, Retention};
use crate::content::ContentError;
use crate::db::{redirects, Db, DbError};
use crate::domain::{EditVersion, Slug};

pub const COLLECTION: &str = "nodes";

/// Indexes no query uses any more, dropped at start-up: `section_published` became
/// `section_published_id` (ties in a stream are ordered by `_id`), `tags` became
/// `tags_published` (a tag page reads only its newest nodes).
pub(crate) const RETIRED_INDEXES: [&str; 2] = ["section_published", "tags"];

pub(crate) fn indexes() -> Vec<IndexModel> {
    vec![
        // A node's URL; unique so two nodes of a section cannot share a slug.
        IndexModel::builder()
            .keys(doc! { "metadata.section": 1, "metadata.slug": 1 })
            .options(
                IndexOptions::builder()
                    .unique(true)
                    .name("section_slug".to_string())
                    .build(),
            )
            .build(),
        // Scheduled nodes whose time came, for [`go_live_due`]: not live (false or missing,
        // which indexes as null), by publication time.
        IndexModel::builder()
            .keys(doc! { "metadata.live": 1, "metadata.published": 1 })
            .options(
                IndexOptions::builder()
                    .name("live_published".to_string())
                    .build(),
            )
            .build(),
        // Section streams and feeds, newest first ([`newest_first`]), and a post's neighbours.
        IndexModel::builder()
            .keys(doc! { "metadata.section": 1, "metadata.published": -1, "_id": -1 })
            .options(
                IndexOptions::builder()
                    .name("section_published_id".to_string())
                    .build(),
            )
            .build(),
        // Tag pages and feeds, newest first (a bounded read of the newest in a tag), and the
        // sitemap's tags.
        IndexModel::builder()
            .keys(doc! { "metadata.tags": 1, "metadata.published": -1 })
            .options(
                IndexOptions::builder()
                    .name("tags_published".to_string())
                    .build(),
            )
            .build(),
        // Where a stored file is shown (the media library's "used by", deleting a file,
        // whether a file only drafts show is public).
        IndexModel::builder()
            .keys(doc! { "metadata.media": 1 })
            .options(
                IndexOptions::builder()
                    .name("media_used".to_string())
                    .build(),
            )
            .build(),
        // Finding the node that holds a photo file (orphan clean-up).
        IndexModel::builder()
            .keys(doc! { "metadata.detail.file_id": 1 })
            .options(
                IndexOptions::builder()
                    .name("photo_file".to_string())
                    .build(),
            )
            .build(),
    ]
}

/// For saves an editor is shown as done (create, edit, publish, tags, photo swaps): journaled
/// before the answer (`database.write_concern`).
pub(crate) fn durable(db: &Db) -> mongodb::Collection<Node> {
    db.durable(COLLECTION)
}

pub fn collection(db: &Db) -> mongodb::Collection<Node> {
    db.collection(COLLECTION)
}

/// The nodes a public visitor may see at `now`: every live node, and every scheduled one whose
/// time has come but that [`go_live_due`] has not marked yet (and nodes stored before the flag,
/// whose `published` is in the past). Drafts (`published: null`) match neither. Merge it into a
/// filter that bounds an index by its other fields (section, slug, tag).
pub fn visible_at(now: DateTime) -> Document {
    doc! { "$or": [
        { "metadata.live": true },
        { "metadata.published": { "$lte": now } },
    ] }
}

/// Whether a visitor may see `node` at `now`: the rule of [`visible_at`], checked on a node
/// already read (the content cache keeps published and scheduled nodes, and each view checks
/// its own time).
pub(crate) fn is_visible_at(node: &Node, now: DateTime) -> bool {
    node.metadata.live || node.metadata.published.is_some_and(|p| p <= now)
}

/// `filter` narrowed to what a visitor may see at `now` ([`visible_at`]).
fn visible(mut filter: Document, now: DateTime) -> Document {
    filter.extend(visible_at(now));
    filter
}

/// Nodes due to go live at `now`: not live (false, or missing on nodes stored before the flag)
/// and published at or before `now`. Served by the `live_published` index.
pub fn due_query(now: DateTime) -> Document {
    doc! {
        "metadata.live": { "$in": [false, Bson::Null] },
        "metadata.published": { "$lte": now },
    }
}

/// Mark live every node whose publication time has come: the background jobs run it, start-up
/// runs it (which also migrates nodes stored before the flag existed), and so does any read that
/// showed a node not yet marked. Idempotent, and safe for several instances at once: each update
/// re-checks the filter, so a node unpublished or rescheduled meanwhile is left alone. Returns
/// how many nodes went live.
pub async fn go_live_due(db: &Db) -> Result<u64, DbError> {
    let result = collection(db)
        .update_many(
            due_query(db.now()),
            doc! { "$set": { "metadata.live": true } },
        )
        .await?;
    Ok(result.modified_count)
}

/// Readers were just shown `nodes`: mark live any of them that is not yet, so that they stay
/// shown even if the clock steps back before the jobs run. A no-op (no write) when all are live.
pub(crate) async fn keep_shown(db: &Db, nodes: &[Node]) -> Result<(), DbError> {
    let ids: Vec<ObjectId> = nodes
        .iter()
        .filter(|n| !n.metadata.live)
        .map(|n| n.id)
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let mut filter = due_query(db.now());
    filter.insert("_id", doc! { "$in": ids });
    collection(db)
        .update_many(filter, doc! { "$set": { "metadata.live": true } })
        .await?;
    Ok(())
}

/// Create a node (a draft unless `published` is given) with a fresh nonce; live when
/// `published` is not in the future.
pub async fn create(
    db: &Db,
    input: NodeInput,
    published: Option<DateTime>,
    tags: Vec<String>,
) -> Result<Node, ContentError> {
    let now = db.now();
    let detail = input
        .detail
        .to_document()
        .map_err(|e| ContentError::Db(DbError::Other(e.into())))?;
    let node = Node {
        id: ObjectId::new(),
        metadata: Metadata {
            kind: input.detail.kind(),
            section: input.section,
            slug: input.slug,
            title: input.title,
            created: now,
            updated: now,
            updated_by: None,
            published,
            live: published.is_some_and(|p| p <= now),
            author: Author { name: input.author },
            tags,
            nonce: EditVersion::new(),
            locked: None,
            comment_count: 0,
            comments_closed: false,
            summary: Some(input.detail.summary()),
            media: Some(input.detail.media()),
            detail,
        },
    };
    let inserted = durable(db).insert_one(&node).await;
    changes::nodes_changed(db);
    inserted?;
    redirects::forget(db, &node.metadata.section, node.metadata.slug.as_str()).await?;
    Ok(node)
}

pub async fn by_id(db: &Db, id: ObjectId) -> Result<Option<Node>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": id }).await?)
}

/// The published node at `/{section}/{slug}` (drafts and scheduled nodes are not found).
pub(crate) async fn published_by_slug(
    db: &Db,
    section: &str,
    slug: &Slug,
) -> Result<Option<Node>, DbError> {
    let filter = doc! { "metadata.section": section, "metadata.slug": slug.as_str() };
    let node = collection(db).find_one(visible(filter, db.now())).await?;
    if let Some(node) = &node {
        keep_shown(db, std::slice::from_ref(node)).await?;
    }
    Ok(node)
}

/// The node at `/{section}/{slug}` unless it is a draft: published, or scheduled for later.
/// For the content cache, which keeps it and checks on each view whether its time has come
/// ([`is_visible_at`]); a draft's text never enters the cache.
pub(crate) async fn published_or_scheduled_by_slug(
    db: &Db,
    section: &str,
    slug: &Slug,
) -> Result<Option<Node>, DbError> {
    let filter = doc! {
        "metadata.section": section,
        "metadata.slug": slug.as_str(),
        "metadata.published": { "$ne": Bson::Null },
    };
    Ok(collection(db).find_one(filter).await?)
}

/// The newest `limit` published nodes of a section, whole (the feeds show their bodies).
pub(crate) async fn latest(db: &Db, section: &str, limit: i64) -> Result<Vec<Node>, DbError> {
    let filter = visible(doc! { "metadata.section": section }, db.now());
    let nodes: Vec<Node> = collection(db)
        .find(filter)
        .sort(newest_first())
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    keep_shown(db, &nodes).await?;
    Ok(nodes)
}

/// The order of every stream: newest first, ties (the same millisecond) by `_id`, so that
/// `(published, _id)` orders a section completely. Served by the `section_published_id` index.
pub fn newest_first() -> Document {
    doc! { "metadata.published": -1, "_id": -1 }
}

/// What a list shows of a node: everything but the body text (`metadata.detail.text`: a
/// page's or entry's Markdown, a quote's or a link's words), which `metadata.summary` stands
/// in for.
pub(crate) fn card_projection() -> Document {
    doc! { "metadata.detail.text": 0 }
}

/// Nodes stored before `metadata.summary` or `metadata.media` existed.
fn missing_derived() -> Document {
    doc! { "$or": [{ "metadata.summary": null }, { "metadata.media": null }] }
}

/// Whether some node still lacks `metadata.media` (stored before it existed, and not yet given
/// it by [`backfill_summaries`]): until none does, the media library cannot tell every file a
/// node shows. Reads the `metadata.media` index.
pub(crate) async fn media_backfill_pending(db: &Db) -> Result<bool, DbError> {
    Ok(db
        .collection::<Document>(COLLECTION)
        .find_one(doc! { "metadata.media": null })
        .projection(doc! { "_id": 1 })
        .await?
        .is_some())
}

/// Give every node stored before `metadata.summary` (or `metadata.media`) existed its summary
/// (and the files it shows); run in the background from start-up, `/readyz` waiting for it. Each
/// update names the nonce it read, so a node saved meanwhile (which set its own summary) is
/// left alone, and several instances starting at once write the same values. Returns how many
/// nodes were filled in.
pub async fn backfill_summaries(db: &Db) -> Result<u64, DbError> {
    let mut filled = 0;
    let raw = db.collection::<Document>(COLLECTION);
    let mut cursor = raw
        .find(missing_derived())
        .projection(doc! { "metadata.type": 1, "metadata.detail": 1, "metadata.nonce": 1 })
        .await?;
    while let Some(stored) = cursor.try_next().await? {
        let (Ok(id), Ok(metadata)) = (stored.get_object_id("_id"), stored.get_document("metadata"))
        else {
            continue;
        };
        let kind = metadata.get_str("type").ok().and_then(NodeType::parse);
        let (Some(kind), Ok(detail), Some(nonce)) =
            (kind, metadata.get_document("detail"), metadata.get("nonce"))
        else {
            continue;
        };
        let parsed = Detail::parse(kind, detail).ok();
        let summary = parsed.as_ref().map(Detail::summary).unwrap_or_default();
        let summary = bson::to_bson(&summary).map_err(|e| DbError::Other(e.into()))?;
        let media = parsed.as_ref().map(Detail::media).unwrap_or_default();
        let mut filter = missing_derived();
        filter.insert("_id", id);
        filter.insert("metadata.nonce", nonce);
        let result = raw
            .update_one(
                filter,
                doc! { "$set": { "metadata.summary": summary, "metadata.media": media } },
            )
            .await?;
        filled += result.modified_count;
    }
    Ok(filled)
}

/// Published nodes carrying `tag`, newest first, whole: the tag feeds show their bodies, and the
/// tag pages read them whole too, because projecting the body away cost the embedded store more
/// than sending it (measured: the tag page at 2.3% of the ceiling with the projection, 3.6%
/// without). Measured again once docstore copied an exclusion projection's bytes without
/// decoding them: with [`card_projection`] the tag page was no faster (4.0% against 3.9%, then
/// 2.4% against 2.9% of the ceiling, 1 000 posts, 2 cores), so it still reads them whole.
pub(crate) async fn published_with_tag(
    db: &Db,
    tag: &str,
    limit: i64,
) -> Result<Vec<Node>, DbError> {
    let nodes: Vec<Node> = collection(db)
        .find(visible(doc! { "metadata.tags": tag }, db.now()))
        .sort(doc! { "metadata.published": -1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    keep_shown(db, &nodes).await?;
    Ok(nodes)
}

/// Save an edit under the nonce the form was loaded with: one update that only matches while
/// the stored nonce is still that one, and that sets a new nonce. `Ok(false)`: someone saved
/// in between (or the node is gone).
///
/// A new slug keeps the old address working: `stored` is the node as the handler read it, and
/// when that is the version the form was loaded with, its slug is recorded as an old address
/// of the node (`db::redirects`) before the update. First, so that a crash between the two
/// loses no redirect: a record naming the node at the address it still holds is shadowed by
/// the node itself, and harmless if the update then does not land.
pub async fn save_with_nonce(
    db: &Db,
    stored: &Node,
    form_nonce: EditVersion,
    input: &NodeInput,
) -> Result<bool, ContentError> {
    save_edit(db, stored, form_nonce, input, &EditExtras::default()).await
}

/// What the one edit form changes besides the fields of [`NodeInput`], in the same update.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct EditExtras {
    /// The whole tag list; `None` keeps the stored one.
    pub tags: Option<Vec<String>>,
    /// `Some(when)`: publish at `when` (`None` inside: back to draft), with `metadata.live` as
    /// [`set_published`] sets it; `None` keeps the publication as stored.
    pub published: Option<Option<DateTime>>,
    /// Who saves (`metadata.updated_by`).
    pub(crate) by: Option<String>,
    /// How many revisions of the node to keep once this save's is written
    /// (`content.revisions_kept`).
    pub(crate) kept: Retention,
    /// A photo node's new file, uploaded with the form: it replaces the stored one in the
    /// same update (the caller deletes the replaced file once the save landed).
    pub(crate) photo: Option<NewPhoto>,
}

/// A stored image becoming a photo node's file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewPhoto {
    pub(crate) image: crate::media::StoredImage,
    pub filename: String,
}

/// [`save_with_nonce`] with the tags, the publication and the editor's name in the same
/// nonce-guarded update, so a form's text and its status land together or not at all.
pub(crate) async fn save_edit(
    db: &Db,
    stored: &Node,
    form_nonce: EditVersion,
    input: &NodeInput,
    extras: &EditExtras,
) -> Result<bool, ContentError> {
    let id = stored.id;
    let renamed = stored.metadata.nonce == form_nonce && stored.metadata.slug != input.slug;
    if renamed {
        redirects::remember(
            db,
            &stored.metadata.section,
            stored.metadata.slug.as_str(),
            id,
        )
        .await?;
    }
    let detail = input
        .detail
        .to_document()
        .map_err(|e| ContentError::Db(DbError::Other(e.into())))?;
    // A photo's file changes only with a new upload (`extras.photo`), never from the text fields.
    let mut set = doc! {
        "metadata.slug": &input.slug,
        "metadata.title": &input.title,
        "metadata.author.name": &input.author,
        "metadata.updated": db.now(),
        "metadata.nonce": EditVersion::new(),
    };
    match &input.detail {
        Detail::Photo(p) => {
            set.insert("metadata.detail.caption", &p.caption);
            set.insert("metadata.detail.alt", &p.alt);
        }
        _ => {
            set.insert("metadata.detail", detail);
        }
    }
    let summary = bson::to_bson(&input.detail.summary())
        .map_err(|e| ContentError::Db(DbError::Other(e.into())))?;
    set.insert("metadata.summary", summary);
    // A photo's file is not in the form (see above): its `metadata.media` is the upload's.
    if !matches!(input.detail, Detail::Photo(_)) {
        set.insert("metadata.media", input.detail.media());
    }
    if let (Some(new), Detail::Photo(_)) = (&extras.photo, &input.detail) {
        let image = &new.image;
        set.insert("metadata.detail.file_id", image.id);
        set.insert("metadata.detail.filename", &new.filename);
        set.insert("metadata.detail.content_type", image.kind.mime());
        set.insert("metadata.detail.width", i64::from(image.width));
        set.insert("metadata.detail.height", i64::from(image.height));
        set.insert("metadata.media", vec![image.id]);
    }
    if let Some(tags) = &extras.tags {
        set.insert("metadata.tags", tags.clone());
    }
    if let Some(when) = extras.published {
        let now = db.now();
        set.insert("metadata.published", when);
        set.insert("metadata.live", when.is_some_and(|w| w <= now));
    }
    if let Some(by) = &extras.by {
        set.insert("metadata.updated_by", by.clone());
    }
    // The update hands back the document it replaced, so the revision written below is exactly
    // the version this save overwrote (whatever `stored` the caller read), and a save that lost
    // its race (retried by the editor's merge) leaves no revision of a version it never replaced.
    let replaced = durable(db)
        .find_one_and_update(
            doc! { "_id": id, "metadata.nonce": form_nonce },
            doc! { "$set": set },
        )
        .await;
    changes::nodes_changed(db);
    let replaced = replaced?;
    let Some(replaced) = replaced else {
        return Ok(false);
    };
    if renamed {
        redirects::forget(db, &stored.metadata.section, input.slug.as_str()).await?;
    }
    // Written after the save: a crash in between loses one revision, never the save. A failure
    // here is logged, not returned: the edit is saved, and an error page would only make the
    // editor save it again (into a conflict with their own save).
    if let Err(e) = revisions::record(db, &replaced.revision(), extras.kept).await {
        tracing::warn!(node = %id, error = %e, "the revision of a save could not be kept");
    }
    Ok(true)
}

/// Publish at `when` (now or later) or unpublish (`None`). A time not after now makes the node
/// live at once; a later one (rescheduling a live node too) or none takes it off the site until
/// [`go_live_due`] finds it due. Not nonce-guarded: the admin editor publishes through
/// [`save_edit`] (with its text, in one update); this is for callers that hold no form.
pub async fn set_published(db: &Db, id: ObjectId, when: Option<DateTime>) -> Result<bool, DbError> {
    let now = db.now();
    let live = when.is_some_and(|w| w <= now);
    let result = durable(db)
        .update_one(
            doc! { "_id": id },
            doc! { "$set": {
                "metadata.published": when,
                "metadata.live": live,
                "metadata.updated": now,
            } },
        )
        .await;
    changes::nodes_changed(db);
    Ok(result?.matched_count == 1)
}

/// Admin list: a section's nodes, optionally of one type and with titles containing `search`.
pub struct AdminQuery<'a> {
    pub section: &'a str,
    pub kind: Option<NodeType>,
    pub search: &'a str,
    /// `updated`, `title` or `published`.
    pub sort: &'a str,
    pub skip: u64,
    pub limit: i64,
}

pub fn admin_filter(q: &AdminQuery<'_>) -> Document {
    let mut filter = doc! { "metadata.section": q.section };
    if let Some(kind) = q.kind {
        filter.insert("metadata.type", kind.as_str());
    }
    if !q.search.is_empty() {
        filter.insert(
            "metadata.title",
            doc! { "$regex": regex::escape(q.search), "$options": "i" },
        );
    }
    filter
}

pub fn admin_sort(sort: &str) -> Document {
    match sort {
        "title" => doc! { "metadata.title": 1, "_id": 1 },
        "published" => doc! { "metadata.published": -1, "_id": -1 },
        _ => doc! { "metadata.updated": -1, "_id": -1 },
    }
}

/// [`admin_filter`] with the search as a full-text query (titles, tags, text, captions,
/// sources) instead of a title substring.
pub(crate) fn admin_text_filter(q: &AdminQuery<'_>) -> Document {
    let mut filter = crate::db::text_filter(q.search);
    filter.insert("metadata.section", q.section);
    if let Some(kind) = q.kind {
        filter.insert("metadata.type", kind.as_str());
    }
    filter
}

/// The admin list: titles containing the search; when none does, the full-text matches.
pub(crate) async fn admin_list(db: &Db, q: &AdminQuery<'_>) -> Result<(Vec<Node>, u64), DbError> {
    let mut filter = admin_filter(q);
    let mut total = collection(db).count_documents(filter.clone()).await?;
    if total == 0 && !q.search.trim().is_empty() {
        filter = admin_text_filter(q);
        total = collection(db).count_documents(filter.clone()).await?;
    }
    let nodes = collection(db)
        .find(filter)
        .sort(admin_sort(q.sort))
        .skip(q.skip)
        .limit(q.limit)
        .await?
        .try_collect()
        .await?;
    Ok((nodes, total))
}

/// Delete a node, its old addresses and its revisions; returns it as it was (its photo file is the caller's
/// to remove).
pub async fn delete(db: &Db, id: ObjectId) -> Result<Option<Node>, DbError> {
    let node = collection(db).find_one_and_delete(doc! { "_id": id }).await;
    changes::nodes_changed(db);
    let node = node?;
    if node.is_some() {
        redirects::forget_target(db, id).await?;
        revisions::delete_all(db, id).await?;
    }
    Ok(node)
}

/// Where a visitor asking for `/{section}/{slug}` should go when no published node is there:
/// the address now of the published node that was renamed away from it. `None` when nothing
/// was, or when that node is gone or not published.
pub(crate) async fn moved_to(
    db: &Db,
    section: &str,
    slug: &str,
) -> Result<Option<String>, DbError> {
    let Some(target) = redirects::target(db, section, slug).await? else {
        return Ok(None);
    };
    let filter = visible(doc! { "_id": target }, db.now());
    let node = collection(db).find_one(filter).await?;
    Ok(node
        .filter(|n| n.metadata.section == section)
        .map(|n| n.url()))
}
