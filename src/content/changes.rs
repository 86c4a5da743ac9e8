//! What the content writers report and the content caches follow: a counter of node writes,
//! kept with the [`Db`] handle. A writer (`content::store`'s create, save, publish and delete,
//! `content::photos`' swap of a photo's file, the generator of load-test posts) bumps it after
//! its write; a cache
//! (`content::cache`) notes the counter when it starts a load and
//! serves the entry only while the counter is unchanged. So the writers know nothing of the caches, as with
//! `catalog::changes`.
//!
//! The counter belongs to one handle: another instance's writes reach this one's caches through
//! the caches' own expiry, not through it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::db::Db;

/// The node write counter of one [`Db`] handle (a [`Db::extension`]).
#[derive(Debug, Default)]
pub(crate) struct NodeChanges {
    nodes: AtomicU64,
}

/// Node writes through `db`'s handle so far.
pub(crate) fn nodes_seen(db: &Db) -> u64 {
    db.extension::<NodeChanges>().nodes.load(Ordering::SeqCst)
}

/// A node was created, edited, published, unpublished or deleted through this handle (called
/// after the write whether or not it landed: a failure may still have written).
pub(crate) fn nodes_changed(db: &Db) {
    db.extension::<NodeChanges>()
        .nodes
        .fetch_add(1, Ordering::SeqCst);
}
