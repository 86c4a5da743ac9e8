//! What the comment writers report and the pages' caches follow: a counter of comment writes,
//! kept with the [`Db`] handle, as `content::changes` counts node writes. Every write of
//! `comments::store` that changes what a discussion page shows bumps it after the write: a
//! comment posted, approved, hidden, marked spam, deleted, restored, edited by its author or
//! purged, a discussion's visible-comment counter moved, a discussion closed or reopened; so
//! does the erasure of an account, which renames its comments. The content cache
//! (`content::cache`) notes the counter when it starts a load and serves the entry only while
//! the counter is unchanged, so a commenter sees their comment on the next page they load.
//! The writers know nothing of the caches.
//!
//! One counter for every kind of discussion (products and nodes): comment writes are rare
//! next to page views, and a product's comment making the content pages reload once costs a
//! few finds.
//!
//! The counter belongs to one handle: another instance's writes reach this one's caches through
//! the caches' own expiry, not through it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::db::Db;

/// The comment write counter of one [`Db`] handle (a [`Db::extension`]).
#[derive(Debug, Default)]
pub(crate) struct CommentChanges {
    comments: AtomicU64,
}

/// Comment writes through `db`'s handle so far.
pub(crate) fn seen(db: &Db) -> u64 {
    db.extension::<CommentChanges>()
        .comments
        .load(Ordering::SeqCst)
}

/// A comment or a discussion's comment fields (count, closed) were written through this handle
/// (called after the write whether or not it landed: a failure may still have written).
pub(crate) fn comments_changed(db: &Db) {
    db.extension::<CommentChanges>()
        .comments
        .fetch_add(1, Ordering::SeqCst);
}
