//! What the catalog's writers report and its caches follow: one counter per kind of change
//! (products, categories, the site settings), kept with the [`Db`] handle. A writer
//! (`catalog::products`, `catalog::categories`, the demo data, seeding) bumps the counter after
//! its write; the cache (`catalog::cache`) compares the counters with the ones it last saw each
//! time it is read and drops what a change made stale. So the writers know nothing of the
//! cache: they report, it follows.
//!
//! Stock moves (a cart's add or removal, a checkout, an expired cart's units coming back) are
//! reported one product at a time, by SKU, as they are far more frequent than other changes:
//! the product page's cache (`catalog::product_cache`) drops only the product moved, so a flash
//! sale's constant moves of one product leave the other products' pages cached. The last
//! [`RECENT_MOVES`] are kept; a reader that fell further behind drops everything.
//!
//! Like the cache, the counters belong to one handle: another instance's writes reach this one's
//! cache through the cache's own expiry, not through these.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::db::Db;
use crate::domain::Sku;

/// How long a reader of the catalog may serve what it loaded before it catches up: a cache
/// entry is reloaded in the background after this (`catalog::cache`), and a listing's anchors
/// are walked again no more often (`catalog::anchors`). Here, below both, so neither depends on
/// the other for it.
pub(crate) const TTL: std::time::Duration = std::time::Duration::from_secs(4);

/// How many of the latest stock moves are kept with their SKU (see the module documentation).
const RECENT_MOVES: usize = 256;

/// The change counters of one [`Db`] handle (a [`Db::extension`]).
#[derive(Debug, Default)]
pub(crate) struct CatalogChanges {
    products: AtomicU64,
    categories: AtomicU64,
    site: AtomicU64,
    /// Stock moves reported so far; the latest ones, numbered, in `moved`.
    stock: AtomicU64,
    moved: Mutex<VecDeque<(u64, Sku)>>,
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

/// What stock moves were reported after a given one (see [`CatalogChanges::moved_since`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Moved {
    /// The SKUs moved (repeated as often as they were), all of them.
    These(Vec<Sku>),
    /// More than [`RECENT_MOVES`] moves: which products they moved is no longer known.
    TooMany,
}

impl Moved {
    /// Whether `sku` may have moved.
    pub(crate) fn includes(&self, sku: &Sku) -> bool {
        match self {
            Moved::These(skus) => skus.contains(sku),
            Moved::TooMany => true,
        }
    }
}

impl CatalogChanges {
    /// The number of stock moves reported so far.
    pub(crate) fn stock_moves(&self) -> u64 {
        self.stock.load(Ordering::SeqCst)
    }

    /// The stock moves reported after the first `seen`, and how many there are in all now.
    pub(crate) fn moved_since(&self, seen: u64) -> (Moved, u64) {
        // The common case, nothing moved, takes no lock.
        let now = self.stock_moves();
        if now == seen {
            return (Moved::These(Vec::new()), now);
        }
        let Ok(moved) = self.moved.lock() else {
            return (Moved::TooMany, now);
        };
        // Read again under the lock, which every report holds while it counts.
        let now = self.stock_moves();
        let reaches_back = moved.front().is_some_and(|(n, _)| *n <= seen + 1);
        if !reaches_back {
            return (Moved::TooMany, now);
        }
        let skus = moved
            .iter()
            .filter(|(n, _)| *n > seen)
            .map(|(_, sku)| sku.clone())
            .collect();
        (Moved::These(skus), now)
    }

    fn stock_moved(&self, sku: &Sku) {
        let Ok(mut moved) = self.moved.lock() else {
            // A poisoned log cannot say which product moved: it says "too many" to every
            // reader behind it, since the counter still grows.
            self.stock.fetch_add(1, Ordering::SeqCst);
            return;
        };
        let n = self.stock.load(Ordering::SeqCst) + 1;
        moved.push_back((n, sku.clone()));
        if moved.len() > RECENT_MOVES {
            moved.pop_front();
        }
        self.stock.store(n, Ordering::SeqCst);
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

/// The stock counters (`qty`, `reserved`, `sold`) of the product `sku` were written through this
/// handle (`crate::stock`): reported after the write.
pub fn stock_moved(db: &Db, sku: &Sku) {
    of(db).stock_moved(sku);
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

    fn sku(s: &str) -> Sku {
        Sku::parse(s).expect("a valid SKU")
    }

    #[test]
    fn stock_moves_are_told_by_sku_until_too_many_to_tell() {
        let changes = CatalogChanges::default();
        assert_eq!(changes.moved_since(0), (Moved::These(Vec::new()), 0));
        changes.stock_moved(&sku("a-1"));
        changes.stock_moved(&sku("b-2"));
        let (moved, now) = changes.moved_since(1);
        assert_eq!((moved.clone(), now), (Moved::These(vec![sku("b-2")]), 2));
        assert!(moved.includes(&sku("b-2")) && !moved.includes(&sku("a-1")));
        assert_eq!(changes.seen(), Seen::default(), "no other counter moves");
        for _ in 0..RECENT_MOVES {
            changes.stock_moved(&sku("c-3"));
        }
        let (moved, now) = changes.moved_since(1);
        assert_eq!(moved, Moved::TooMany, "move 2 is no longer kept");
        assert!(moved.includes(&sku("a-1")));
        assert_eq!(now, 2 + RECENT_MOVES as u64);
        let (moved, _) = changes.moved_since(3);
        assert_eq!(moved, Moved::These(vec![sku("c-3"); RECENT_MOVES - 1]));
    }
}
