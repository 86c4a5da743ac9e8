//! What the catalog's writers report and its caches follow: one counter per kind of change
//! (products, categories, the site settings), kept with the [`Db`] handle. A writer
//! (`catalog::products`, `catalog::categories`, the demo data, seeding) bumps the counter after
//! its write; the cache (`catalog::cache`) compares the counters with the ones it last saw each
//! time it is read and drops what a change made stale. So the writers know nothing of the
//! cache: they report, it follows.
//!
//! Like the cache, the counters belong to one handle: another instance's writes reach this one's
//! cache through the cache's own expiry, not through these.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::db::Db;

/// How long a reader of the catalog may serve what it loaded before it catches up: a cache
/// entry is reloaded in the background after this (`catalog::cache`), and a listing's anchors
/// are walked again no more often (`catalog::anchors`). Here, below both, so neither depends on
/// the other for it.
pub(crate) const TTL: std::time::Duration = std::time::Duration::from_secs(4);

/// The change counters of one [`Db`] handle (a [`Db::extension`]).
#[derive(Debug, Default)]
pub(crate) struct CatalogChanges {
    products: AtomicU64,
    categories: AtomicU64,
    site: AtomicU64,
}

/// The counters as read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) products: u64,
    pub(crate) categories: u64,
    pub(crate) site: u64,
}

impl CatalogChanges {
    pub(crate) fn seen(&self) -> Seen {
        Seen {
            products: self.products.load(Ordering::SeqCst),
            categories: self.categories.load(Ordering::SeqCst),
            site: self.site.load(Ordering::SeqCst),
        }
    }
}

/// The counters kept with `db`.
pub(crate) fn of(db: &Db) -> Arc<CatalogChanges> {
    db.extension::<CatalogChanges>()
}

/// Products were added, edited, deleted or restocked through this handle.
pub fn products_changed(db: &Db) {
    of(db).products.fetch_add(1, Ordering::SeqCst);
}

/// Categories were added, renamed, moved or deleted through this handle.
pub(crate) fn categories_changed(db: &Db) {
    of(db).categories.fetch_add(1, Ordering::SeqCst);
}

/// The site settings were stored through this handle.
pub fn site_changed(db: &Db) {
    of(db).site.fetch_add(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_report_moves_only_its_own_counter() {
        let changes = CatalogChanges::default();
        let before = changes.seen();
        changes.products.fetch_add(1, Ordering::SeqCst);
        let after = changes.seen();
        assert_eq!(after.products, before.products + 1);
        assert_eq!(
            (after.categories, after.site),
            (before.categories, before.site)
        );
    }
}
