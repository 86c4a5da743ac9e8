//! The `comments` collection: its indexes, posting with slug-collision retries, the thread
//! queries and moderation, each keeping the discussion's visible-comment counter exact.

use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use crate::comments::slugs::{self, CommentPath};
use crate::comments::{Author, Comment, CommentStatus, Discussion, DiscussionKind};
use crate::db::{is_duplicate_key, Db, DbError};
use crate::web::meta::path_segment;

pub const COLLECTION: &str = "comments";

/// New random parts tried after the unique index refused one before posting gives up.
const POST_ATTEMPTS: usize = 8;

pub fn collection(db: &Db) -> mongodb::Collection<Comment> {
    db.collection(COLLECTION)
}

/// The indexes behind every comment query: a thread in order (and a sub-thread by slug
/// prefix), a discussion's comments by time, a permalink by slug (unique, which is also what
/// detects slug collisions), and the moderation list across discussions, all or by status.
pub fn indexes() -> Vec<IndexModel> {
    let plain = |keys: Document| IndexModel::builder().keys(keys).build();
    vec![
        plain(doc! { "discussion_id": 1, "full_slug": 1 }),
        plain(doc! { "discussion_id": 1, "posted": 1 }),
        IndexModel::builder()
            .keys(doc! { "discussion_id": 1, "slug": 1 })
            .options(IndexOptions::builder().unique(true).build())
            .build(),
        plain(doc! { "posted": -1 }),
        plain(doc! { "status": 1, "posted": -1 }),
        // The moderation policy's "approved before?" by email, else by name.
        plain(doc! { "email": 1, "status": 1 }),
        plain(doc! { "author.name": 1, "status": 1 }),
        // A signed-in customer's comments (their account page, export and erasure).
        plain(doc! { "account_id": 1, "posted": -1 }),
        // Deleted comments whose restore period is over, for the purge job.
        plain(doc! { "status": 1, "deleted_at": 1 }),
    ]
}

#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// The comment replied to is not (or no longer) open for replies.
    #[error("the comment replied to is gone")]
    ParentGone,
    #[error("no free slug after {POST_ATTEMPTS} attempts")]
    NoFreeSlug,
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<mongodb::error::Error> for PostError {
    fn from(e: mongodb::error::Error) -> Self {
        PostError::Db(e.into())
    }
}

/// How many times the fields a discussion keeps on the discussed document (its visible-comment
/// counter, its closed flag) were written through one [`Db`] handle (a [`Db::extension`]). The
/// pages that cache a discussed document (the catalog's product page) drop what they keep when
/// it moves, as the catalog's own writes are reported to them: comments sit below the catalog,
/// so they count, and the catalog follows.
#[derive(Debug, Default)]
struct DiscussionWrites(std::sync::atomic::AtomicU64);

/// The number of writes to discussions' counters and closed flags through `db` so far (see
/// [`DiscussionWrites`]).
pub(crate) fn discussion_writes(db: &Db) -> u64 {
    db.extension::<DiscussionWrites>()
        .0
        .load(std::sync::atomic::Ordering::SeqCst)
}

/// Counts a write to a discussion's counter or closed flag, after it is made.
fn discussion_written(db: &Db) {
    db.extension::<DiscussionWrites>()
        .0
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// Add `delta` to the discussion's visible-comment counter (an atomic `$inc`, so concurrent
/// posts and moderation never lose an update).
pub async fn adjust_count(
    db: &Db,
    kind: DiscussionKind,
    discussion_id: ObjectId,
    delta: i64,
) -> Result<(), DbError> {
    let (collection, field) = kind.counter();
    let written = db
        .collection::<Document>(collection)
        .update_one(
            doc! { "_id": discussion_id },
            doc! { "$inc": { field: delta } },
        )
        .await;
    discussion_written(db);
    written?;
    Ok(())
}

/// Like [`adjust_count`] when only the discussion's id is at hand (moderation): the counter of
/// whichever kind of document has that id. ObjectIds are unique across collections.
pub(crate) async fn adjust_count_by_id(
    db: &Db,
    discussion_id: ObjectId,
    delta: i64,
) -> Result<(), DbError> {
    for kind in DiscussionKind::ALL {
        let (collection, field) = kind.counter();
        let updated = db
            .collection::<Document>(collection)
            .update_one(
                doc! { "_id": discussion_id },
                doc! { "$inc": { field: delta } },
            )
            .await;
        discussion_written(db);
        if updated?.matched_count > 0 {
            return Ok(());
        }
    }
    tracing::warn!(%discussion_id, "a moderated comment's discussion no longer exists");
    Ok(())
}

/// The filter and sort that find the last comment in thread order among `parent`'s replies (the
/// discussion's top-level comments without a parent) and their sub-threads, whose full slug
/// leads with the latest sibling's stamp. Served by the `discussion_id, full_slug` index walked
/// backwards; for `explain` in tests.
pub fn last_sibling_query(
    discussion_id: ObjectId,
    parent: Option<&Comment>,
) -> (Document, Document) {
    let filter = match parent {
        Some(p) => below(discussion_id, &p.full_slug),
        None => doc! { "discussion_id": discussion_id },
    };
    (filter, doc! { "full_slug": -1 })
}

/// When the latest of the comments a new one would sit beside was stamped (see
/// [`last_sibling_query`]); `None` for the first, or for a full slug that does not parse.
async fn latest_sibling_stamp(
    db: &Db,
    discussion_id: ObjectId,
    parent: Option<&Comment>,
) -> Result<Option<DateTime>, DbError> {
    let (filter, sort) = last_sibling_query(discussion_id, parent);
    let last = db
        .collection::<Document>(COLLECTION)
        .find_one(filter)
        .sort(sort)
        .projection(doc! { "_id": 0, "full_slug": 1 })
        .await?;
    let Some(full_slug) = last.as_ref().and_then(|d| d.get_str("full_slug").ok()) else {
        return Ok(None);
    };
    let own_levels = match parent {
        Some(p) => full_slug
            .strip_prefix(p.full_slug.as_str())
            .and_then(|rest| rest.strip_prefix('/')),
        None => Some(full_slug),
    };
    Ok(own_levels.and_then(slugs::leading_stamp))
}

/// What a commenter submitted, checked and cleaned, for [`post`].
#[derive(Debug, Clone, Default)]
pub struct NewComment {
    pub name: String,
    pub text: String,
    pub email: Option<String>,
    pub notify: bool,
    pub staff: bool,
    /// Held by the moderation policy: stored `pending`, not counted.
    pub held: bool,
    /// The signed-in commenter's account (`identity::signed_in`).
    pub account_id: Option<ObjectId>,
    /// Signed with that account's own display name.
    pub verified: bool,
}

/// Store a comment (a reply when `parent` is given) and count it. A reply's slug and full slug
/// extend its parent's. When another comment took the same slug (unique index, error 11000)
/// the post retries with a new random part, so no comment is lost to a collision.
///
/// The full slug's stamp is [`slugs::next_stamp`] of now and the latest sibling's stamp, read
/// just before the insert: thread order is posting order even after the clock stepped back.
/// `posted` keeps the clock's reading (what the page shows as the time).
pub async fn post(
    db: &Db,
    discussion: &Discussion,
    parent: Option<&Comment>,
    new: &NewComment,
) -> Result<Comment, PostError> {
    for _ in 0..POST_ATTEMPTS {
        let part = slugs::next_part(discussion.id);
        let posted = db.now();
        let latest = latest_sibling_stamp(db, discussion.id, parent).await?;
        let timed = format!("{}:{part}", slugs::stamp(slugs::next_stamp(posted, latest)));
        let (slug, full_slug) = match parent {
            Some(p) => (p.slug.child(&part), format!("{}/{timed}", p.full_slug)),
            None => (CommentPath::top_level(part), timed),
        };
        let comment = Comment {
            id: ObjectId::new(),
            discussion_id: discussion.id,
            parent_id: parent.map(|p| p.id),
            slug,
            full_slug,
            posted,
            author: Author {
                name: new.name.clone(),
            },
            text: new.text.clone(),
            status: if new.held {
                CommentStatus::Pending
            } else {
                CommentStatus::Visible
            },
            staff: new.staff,
            email: new.email.clone(),
            notify: new.notify && new.email.is_some(),
            deleted_at: None,
            deleted_from: None,
            account_id: new.account_id,
            verified: new.verified && new.account_id.is_some(),
        };
        // Journaled before the commenter sees it posted (`database.write_concern`).
        match db.durable::<Comment>(COLLECTION).insert_one(&comment).await {
            Ok(_) => {}
            Err(e) if is_duplicate_key(&e) => {
                tracing::debug!(slug = %comment.slug, "comment slug taken; retrying");
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        if let Some(parent) = parent {
            // A moderator may have deleted the parent since it was loaded. Deleting marks it
            // first and then looks for replies, so either that look sees this reply (and the
            // parent stays as "[deleted]") or this check sees the mark and the reply is
            // withdrawn: never a reply hanging from nothing.
            let open = collection(db)
                .count_documents(doc! { "_id": parent.id, "status": "visible" })
                .await?;
            if open == 0 {
                collection(db)
                    .delete_one(doc! { "_id": comment.id })
                    .await?;
                return Err(PostError::ParentGone);
            }
        }
        if !new.held {
            adjust_count(db, discussion.kind, discussion.id, 1).await?;
        }
        return Ok(comment);
    }
    Err(PostError::NoFreeSlug)
}

/// The filter counting the comments (any status) at or before `full_slug` in a discussion's
/// thread order: a range on the `discussion_id, full_slug` index. For `explain` in tests.
pub fn up_to_query(discussion_id: ObjectId, full_slug: &str) -> Document {
    doc! { "discussion_id": discussion_id, "full_slug": { "$lte": full_slug } }
}

/// Whether the comment with `full_slug` is on the first page of its discussion (pages of
/// `page_size` comments of any status, as [`crate::comments::thread::page`] reads them). Counts
/// at most `page_size + 1` index entries.
pub(crate) async fn on_first_page(
    db: &Db,
    discussion_id: ObjectId,
    full_slug: &str,
    page_size: usize,
) -> Result<bool, DbError> {
    let limit = page_size as u64 + 1;
    let n = collection(db)
        .count_documents(up_to_query(discussion_id, full_slug))
        .limit(limit)
        .await?;
    Ok(n <= page_size as u64)
}

/// The comment with permalink `slug` in a discussion (any status).
pub async fn by_slug(
    db: &Db,
    discussion_id: ObjectId,
    slug: &CommentPath,
) -> Result<Option<Comment>, DbError> {
    Ok(collection(db)
        .find_one(doc! { "discussion_id": discussion_id, "slug": slug.as_str() })
        .await?)
}

pub async fn by_id(db: &Db, id: ObjectId) -> Result<Option<Comment>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": id }).await?)
}

/// The filter for the comments strictly below `full_slug` in its thread: a prefix regex on the
/// full slug, escaped, so the index scans just that sub-thread's range.
pub fn below(discussion_id: ObjectId, full_slug: &str) -> Document {
    let pattern = format!("^{}/", regex::escape(full_slug));
    doc! { "discussion_id": discussion_id, "full_slug": { "$regex": pattern } }
}

/// Up to `limit` comments of `filter` in thread order, starting after `after` (a full slug)
/// when given: a range on the index rather than a skip, so a deep page costs what the first
/// one does.
pub(crate) async fn in_thread_order(
    db: &Db,
    mut filter: Document,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<Comment>, DbError> {
    if let Some(after) = after {
        match filter.get_document_mut("full_slug") {
            Ok(cond) => {
                cond.insert("$gt", after);
            }
            Err(_) => {
                filter.insert("full_slug", doc! { "$gt": after });
            }
        }
    }
    let found = collection(db)
        .find(filter)
        .sort(doc! { "full_slug": 1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    Ok(found)
}

/// Up to `limit` comments of a discussion just before `before` in thread order, returned in
/// thread order (the "previous page").
pub(crate) async fn before_in_thread_order(
    db: &Db,
    discussion_id: ObjectId,
    before: &str,
    limit: i64,
) -> Result<Vec<Comment>, DbError> {
    let mut found: Vec<Comment> = collection(db)
        .find(doc! { "discussion_id": discussion_id, "full_slug": { "$lt": before } })
        .sort(doc! { "full_slug": -1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    found.reverse();
    Ok(found)
}

/// True when any comment replies to the comment with `full_slug` (at any depth).
pub(crate) async fn has_replies(
    db: &Db,
    discussion_id: ObjectId,
    full_slug: &str,
) -> Result<bool, DbError> {
    Ok(collection(db)
        .find_one(below(discussion_id, full_slug))
        .await?
        .is_some())
}

/// The moderation list's filter: one status or all, one discussion or all.
fn list_filter(status: Option<CommentStatus>, discussion_id: Option<ObjectId>) -> Document {
    let mut filter = Document::new();
    if let Some(status) = status {
        filter.insert("status", status.as_str());
    }
    if let Some(id) = discussion_id {
        filter.insert("discussion_id", id);
    }
    filter
}

/// The newest comments, across discussions or in one, of one status or all (moderation).
pub(crate) async fn newest(
    db: &Db,
    status: Option<CommentStatus>,
    discussion_id: Option<ObjectId>,
    limit: i64,
) -> Result<Vec<Comment>, DbError> {
    let filter = list_filter(status, discussion_id);
    Ok(collection(db)
        .find(filter)
        .sort(doc! { "posted": -1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?)
}

/// Comments a moderation search reads at most: the newest of the status (and discussion), by the
/// same index as [`newest`], so a search costs a bounded scan however many comments there are.
pub(crate) const SEARCH_SCAN: i64 = 5_000;

/// The newest comments (as [`newest`] filters them) whose author's name or text contains
/// `needle` (ignoring case), up to `limit`, found among the newest [`SEARCH_SCAN`].
pub(crate) async fn search_newest(
    db: &Db,
    status: Option<CommentStatus>,
    discussion_id: Option<ObjectId>,
    needle: &str,
    limit: usize,
) -> Result<Vec<Comment>, DbError> {
    let needle = needle.to_lowercase();
    let filter = list_filter(status, discussion_id);
    let mut cursor = collection(db)
        .find(filter)
        .sort(doc! { "posted": -1 })
        .limit(SEARCH_SCAN)
        .await?;
    let mut found = Vec::new();
    while let Some(comment) = cursor.try_next().await? {
        if comment.author.name.to_lowercase().contains(&needle)
            || comment.text.to_lowercase().contains(&needle)
        {
            found.push(comment);
            if found.len() >= limit {
                break;
            }
        }
    }
    Ok(found)
}

/// What a moderation action did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moderated {
    Done,
    /// The comment was already in the requested state (or gone).
    Unchanged,
}

/// Move a comment from `from` to `to` status, adjusting the counter when it stops or starts
/// being visible. The status condition makes the change happen once even when two
/// moderators click at the same time, so the counter moves once too.
async fn change_status(
    db: &Db,
    id: ObjectId,
    from: CommentStatus,
    to: CommentStatus,
) -> Result<Option<Comment>, DbError> {
    let before = collection(db)
        .find_one_and_update(
            doc! { "_id": id, "status": from.as_str() },
            doc! { "$set": { "status": to.as_str() } },
        )
        .await?;
    if let Some(c) = &before {
        let delta = match (from, to) {
            (CommentStatus::Visible, _) => -1,
            (_, CommentStatus::Visible) => 1,
            _ => 0,
        };
        if delta != 0 {
            adjust_count_by_id(db, c.discussion_id, delta).await?;
        }
    }
    Ok(before)
}

pub(crate) async fn hide(db: &Db, id: ObjectId) -> Result<Moderated, DbError> {
    let changed = change_status(db, id, CommentStatus::Visible, CommentStatus::Hidden).await?;
    Ok(if changed.is_some() {
        Moderated::Done
    } else {
        Moderated::Unchanged
    })
}

/// Approve a held comment: it goes live (and is counted). Returns the comment as it was.
pub(crate) async fn approve(db: &Db, id: ObjectId) -> Result<Option<Comment>, DbError> {
    change_status(db, id, CommentStatus::Pending, CommentStatus::Visible).await
}

/// Mark a held, visible or hidden comment as spam: never shown again.
pub(crate) async fn mark_spam(db: &Db, id: ObjectId) -> Result<Moderated, DbError> {
    for from in [
        CommentStatus::Pending,
        CommentStatus::Visible,
        CommentStatus::Hidden,
    ] {
        if change_status(db, id, from, CommentStatus::Spam)
            .await?
            .is_some()
        {
            return Ok(Moderated::Done);
        }
    }
    Ok(Moderated::Unchanged)
}

pub(crate) async fn unhide(db: &Db, id: ObjectId) -> Result<Moderated, DbError> {
    let changed = change_status(db, id, CommentStatus::Hidden, CommentStatus::Visible).await?;
    Ok(if changed.is_some() {
        Moderated::Done
    } else {
        Moderated::Unchanged
    })
}

/// Delete a comment: marked "deleted" with the time and the status it had, in one conditional
/// write (so two moderators clicking at once delete, and uncount, once). Readers see it as
/// hidden ("\[deleted\]" while replies hang from it); its text is kept so [`restore`] can bring it
/// back until [`purge_deleted`] wipes it after `comments.restore_days`.
pub(crate) async fn delete(db: &Db, id: ObjectId) -> Result<Moderated, DbError> {
    let now = db.now();
    for from in [
        CommentStatus::Visible,
        CommentStatus::Hidden,
        CommentStatus::Pending,
        CommentStatus::Spam,
    ] {
        let before = collection(db)
            .find_one_and_update(
                doc! { "_id": id, "status": from.as_str() },
                doc! { "$set": {
                    "status": CommentStatus::Deleted.as_str(),
                    "deleted_at": now,
                    "deleted_from": from.as_str(),
                } },
            )
            .await?;
        if let Some(c) = before {
            if from == CommentStatus::Visible {
                adjust_count_by_id(db, c.discussion_id, -1).await?;
            }
            return Ok(Moderated::Done);
        }
    }
    Ok(Moderated::Unchanged)
}

/// The newest `limit` comments posted by `account` (signed in), any status but deleted.
pub(crate) async fn by_account(
    db: &Db,
    account: ObjectId,
    limit: i64,
) -> Result<Vec<Comment>, DbError> {
    Ok(collection(db)
        .find(doc! { "account_id": account, "status": { "$ne": CommentStatus::Deleted.as_str() } })
        .sort(doc! { "account_id": 1, "posted": -1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?)
}

/// Replace the text of `account`'s comment `id` if it was posted at or after `not_before` and
/// is visible or pending: one conditional update, so a late or someone else's edit changes
/// nothing. False when nothing matched.
pub(crate) async fn edit_own(
    db: &Db,
    id: ObjectId,
    account: ObjectId,
    not_before: DateTime,
    text: &str,
) -> Result<bool, DbError> {
    let done = db
        .durable::<Comment>(COLLECTION)
        .update_one(
            doc! {
                "_id": id,
                "account_id": account,
                "posted": { "$gte": not_before },
                "status": { "$in": [CommentStatus::Visible.as_str(), CommentStatus::Pending.as_str()] },
            },
            doc! { "$set": { "text": text } },
        )
        .await?;
    Ok(done.matched_count == 1)
}

/// The earliest deletion time still restorable with `restore_days`.
fn restore_cutoff(db: &Db, restore_days: u32) -> DateTime {
    DateTime::from_millis(
        db.now()
            .timestamp_millis()
            .saturating_sub(i64::from(restore_days) * 86_400_000),
    )
}

/// Undo a [`delete`] made less than `restore_days` ago: the comment gets back the status it had
/// (and is counted again if that was visible). Conditional on the comment still being deleted
/// from that status within the period, so a double click or a racing purge changes nothing.
pub(crate) async fn restore(
    db: &Db,
    id: ObjectId,
    restore_days: u32,
) -> Result<Moderated, DbError> {
    let Some(comment) = by_id(db, id).await? else {
        return Ok(Moderated::Unchanged);
    };
    let (CommentStatus::Deleted, Some(from), Some(_)) =
        (comment.status, comment.deleted_from, comment.deleted_at)
    else {
        return Ok(Moderated::Unchanged);
    };
    let result = collection(db)
        .update_one(
            doc! {
                "_id": id,
                "status": CommentStatus::Deleted.as_str(),
                "deleted_from": from.as_str(),
                "deleted_at": { "$gte": restore_cutoff(db, restore_days) },
            },
            doc! {
                "$set": { "status": from.as_str() },
                "$unset": { "deleted_at": "", "deleted_from": "" },
            },
        )
        .await?;
    if result.modified_count == 0 {
        return Ok(Moderated::Unchanged);
    }
    if from == CommentStatus::Visible {
        adjust_count_by_id(db, comment.discussion_id, 1).await?;
    }
    Ok(Moderated::Done)
}

/// The filter of [`purge_deleted`]: comments deleted before `cutoff`. For `explain` in tests.
pub fn purge_query(cutoff: DateTime) -> Document {
    doc! { "status": CommentStatus::Deleted.as_str(), "deleted_at": { "$lt": cutoff } }
}

/// Comments one run of [`purge_deleted`] takes at most.
const PURGE_BATCH: i64 = 500;

/// Delete for good the comments deleted more than `restore_days` ago: text, name and email
/// wiped (kept as "\[deleted\]" while replies hang from it), removed when nothing replies. Each
/// comment is taken with a conditional write on its deletion time, so instances running this at
/// once, or a restore racing it, act once. Returns how many were purged (at most a batch a run).
pub async fn purge_deleted(db: &Db, restore_days: u32) -> Result<u64, DbError> {
    let due: Vec<Comment> = collection(db)
        .find(purge_query(restore_cutoff(db, restore_days)))
        .limit(PURGE_BATCH)
        .await?
        .try_collect()
        .await?;
    let mut purged = 0;
    for comment in due {
        let Some(deleted_at) = comment.deleted_at else {
            continue;
        };
        let taken = collection(db)
            .update_one(
                doc! { "_id": comment.id, "status": "deleted", "deleted_at": deleted_at },
                doc! {
                    "$set": { "text": "", "author.name": "" },
                    "$unset": { "deleted_at": "", "deleted_from": "", "email": "" },
                },
            )
            .await?;
        if taken.modified_count > 0 {
            purged += 1;
            remove_if_unanswered(db, comment).await?;
        }
    }
    Ok(purged)
}

/// Remove a purged comment that nothing replies to, then its purged parent if that was its
/// last reply, and so on up the thread. A parent deleted but still restorable stays.
async fn remove_if_unanswered(db: &Db, mut comment: Comment) -> Result<(), DbError> {
    let purged = |id: ObjectId| {
        doc! { "_id": id, "status": "deleted", "deleted_at": { "$exists": false } }
    };
    loop {
        if has_replies(db, comment.discussion_id, &comment.full_slug).await? {
            return Ok(());
        }
        collection(db).delete_one(purged(comment.id)).await?;
        let Some(parent_id) = comment.parent_id else {
            return Ok(());
        };
        match collection(db).find_one(purged(parent_id)).await? {
            Some(parent) => comment = parent,
            None => return Ok(()),
        }
    }
}

/// Where a discussion is, for links from moderation screens.
#[derive(Debug, Clone)]
pub struct DiscussionLink {
    pub(crate) title: String,
    pub base_url: String,
    pub(crate) kind: DiscussionKind,
}

impl DiscussionLink {
    /// The discussion as a page builds it, for posting into it from elsewhere (the admin).
    pub(crate) fn discussion(&self, id: ObjectId) -> Discussion {
        Discussion {
            id,
            kind: self.kind,
            title: self.title.clone(),
            base_url: self.base_url.clone(),
            // Staff may still reply where readers no longer can.
            closed: false,
            opened: None,
        }
    }
}

/// Whether the owner closed discussion `id` to new comments: `None` when no product or node has
/// that id. Found by `_id`, products first.
pub(crate) async fn closed_by_owner(db: &Db, id: ObjectId) -> Result<Option<bool>, DbError> {
    for kind in DiscussionKind::ALL {
        let found = db
            .collection::<Document>(kind.collection())
            .find_one(doc! { "_id": id })
            .projection(doc! { kind.closed_field(): 1 })
            .await?;
        if let Some(found) = found {
            let closed = match kind {
                DiscussionKind::Product => found.get_bool("comments_closed"),
                DiscussionKind::Node => found
                    .get_document("metadata")
                    .and_then(|m| m.get_bool("comments_closed")),
            };
            return Ok(Some(closed.unwrap_or(false)));
        }
    }
    Ok(None)
}

/// Close (or reopen) discussion `id` to new comments: one write by `_id` per kind until one
/// matches; `false` when no product or node has that id.
pub(crate) async fn set_closed(db: &Db, id: ObjectId, closed: bool) -> Result<bool, DbError> {
    for kind in DiscussionKind::ALL {
        let result = db
            .collection::<Document>(kind.collection())
            .update_one(
                doc! { "_id": id },
                doc! { "$set": { kind.closed_field(): closed } },
            )
            .await;
        discussion_written(db);
        if result?.matched_count > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The discussions with these ids, whatever their kind, each found by `_id` (one query per
/// kind).
pub async fn discussion_links(
    db: &Db,
    ids: &[ObjectId],
) -> Result<std::collections::HashMap<ObjectId, DiscussionLink>, DbError> {
    let mut links = std::collections::HashMap::new();
    if ids.is_empty() {
        return Ok(links);
    }
    let products: Vec<Document> = db
        .collection::<Document>(DiscussionKind::Product.collection())
        .find(doc! { "_id": { "$in": ids } })
        .projection(doc! { "title": 1, "slug": 1 })
        .await?
        .try_collect()
        .await?;
    for p in products {
        if let (Ok(id), Ok(title), Ok(slug)) = (
            p.get_object_id("_id"),
            p.get_str("title"),
            p.get_str("slug"),
        ) {
            links.insert(
                id,
                DiscussionLink {
                    title: title.to_string(),
                    base_url: format!("/products/{}", path_segment(slug)),
                    kind: DiscussionKind::Product,
                },
            );
        }
    }
    if links.len() < ids.len() {
        let nodes: Vec<Document> = db
            .collection::<Document>(DiscussionKind::Node.collection())
            .find(doc! { "_id": { "$in": ids } })
            .projection(doc! { "metadata.title": 1, "metadata.section": 1, "metadata.slug": 1 })
            .await?
            .try_collect()
            .await?;
        for n in nodes {
            let Ok(meta) = n.get_document("metadata") else {
                continue;
            };
            if let (Ok(id), Ok(section), Ok(slug)) = (
                n.get_object_id("_id"),
                meta.get_str("section"),
                meta.get_str("slug"),
            ) {
                links.insert(
                    id,
                    DiscussionLink {
                        title: meta.get_str("title").unwrap_or(slug).to_string(),
                        base_url: format!("/{section}/{}", path_segment(slug)),
                        kind: DiscussionKind::Node,
                    },
                );
            }
        }
    }
    Ok(links)
}

/// How many comments have `status` (all when `None`), in one discussion or all, for the
/// moderation list's heading.
pub(crate) async fn count(
    db: &Db,
    status: Option<CommentStatus>,
    discussion_id: Option<ObjectId>,
) -> Result<u64, DbError> {
    Ok(collection(db)
        .count_documents(list_filter(status, discussion_id))
        .await?)
}
