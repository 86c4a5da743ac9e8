//! A small cache of search results, so a popular search repeated by many visitors at once runs
//! once every [`TTL`] instead of once per visitor.
//!
//! # Staleness
//!
//! A page of results is kept for at most [`TTL`] (2 s). Product and content writes through
//! this process drop every entry at once (the writers report them in
//! [`crate::catalog::changes`] and [`crate::content::changes`], as for the catalog cache), so
//! an admin who edits a product or a post and searches for it sees the edit. Another
//! instance's writes reach this one through nothing but time: they show up within [`TTL`],
//! which also bounds how late a post becomes searchable after its publication time. The expiry is kept shorter than the catalog cache's because a
//! search answered from here after the database went away would hide the outage from the
//! visitor for that long.
//!
//! The cache lives in the [`Db`] handle (every clone shares it), so a second handle on the same
//! store — another instance — has its own. At most [`MAX_ENTRIES`] pages are kept: when it is
//! full the expired entries go, and if none had expired every entry goes (a flood of distinct
//! searches then costs what it cost without the cache).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::catalog::changes;
use crate::db::{Db, DbError};
use crate::search::{self, Results};

/// The longest a page of results is served from the cache.
pub const TTL: Duration = Duration::from_secs(2);
/// Pages of results kept at most.
pub const MAX_ENTRIES: usize = 1_000;

struct Entry {
    results: Arc<Results>,
    loaded: Instant,
    /// [`writes`] when the search started: another value means stale.
    products: u64,
}

/// The cached pages of one [`Db`] handle (a [`Db::extension`]), by (search, page).
#[derive(Default)]
pub struct SearchCache {
    entries: Mutex<HashMap<(String, u64), Entry>>,
}

impl SearchCache {
    /// The fresh entry for `key`, if any.
    fn get(&self, key: &(String, u64), products: u64, now: Instant) -> Option<Arc<Results>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|e| e.products == products && now.duration_since(e.loaded) < TTL)
            .map(|e| Arc::clone(&e.results))
    }

    fn put(&self, key: (String, u64), entry: Entry) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            let now = Instant::now();
            entries.retain(|_, e| now.duration_since(e.loaded) < TTL);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, entry);
    }

    /// Pages currently kept (expired ones included until they are replaced or swept).
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    /// Whether no page is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Product and content writes through `db`'s handle so far.
fn writes(db: &Db) -> u64 {
    changes::of(db).seen().products + crate::content::changes::nodes_seen(db)
}

/// The cache kept with `db`.
pub fn of(db: &Db) -> Arc<SearchCache> {
    db.extension::<SearchCache>()
}

/// The fresh cached page for `query` (already cleaned) and `page`, if there is one.
pub fn cached(db: &Db, query: &str, page: u64) -> Option<Arc<Results>> {
    let products = writes(db);
    of(db).get(&(query.to_string(), page), products, Instant::now())
}

/// [`search::search`] of `query` (already cleaned) and `page`, kept for the next visitors.
/// Failures are not kept: the next visitor tries again.
pub async fn search(db: &Db, query: &str, page: u64) -> Result<Arc<Results>, DbError> {
    // Read before the search runs: a product write while it runs makes this entry stale.
    let products = writes(db);
    let loaded = Instant::now();
    let results = Arc::new(search::search(db, query, page).await?);
    of(db).put(
        (query.to_string(), page),
        Entry {
            results: Arc::clone(&results),
            loaded,
            products,
        },
    );
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results() -> Arc<Results> {
        Arc::new(Results {
            hits: Vec::new(),
            page: 1,
            has_next: false,
            total: 0,
            more: false,
            suggestion: None,
        })
    }

    fn entry(loaded: Instant, products: u64) -> Entry {
        Entry {
            results: results(),
            loaded,
            products,
        }
    }

    #[test]
    fn an_entry_is_served_until_it_expires_or_a_product_changes() {
        let cache = SearchCache::default();
        let key = ("jazz".to_string(), 1);
        let loaded = Instant::now();
        cache.put(key.clone(), entry(loaded, 7));
        assert!(cache.get(&key, 7, loaded).is_some());
        assert!(cache.get(&key, 8, loaded).is_none(), "a product changed");
        assert!(cache.get(&key, 7, loaded + TTL).is_none(), "expired");
        assert!(cache.get(&("jazz".to_string(), 2), 7, loaded).is_none());
    }

    #[test]
    fn a_full_cache_drops_expired_entries_first_and_else_starts_over() {
        let cache = SearchCache::default();
        let old = Instant::now()
            .checked_sub(TTL * 2)
            .expect("a monotonic clock that far back");
        for n in 0..MAX_ENTRIES as u64 / 2 {
            cache.put((format!("old {n}"), 1), entry(old, 0));
        }
        for n in 0..MAX_ENTRIES as u64 - MAX_ENTRIES as u64 / 2 {
            cache.put((format!("new {n}"), 1), entry(Instant::now(), 0));
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        cache.put(("one more".to_string(), 1), entry(Instant::now(), 0));
        assert_eq!(cache.len(), MAX_ENTRIES - MAX_ENTRIES / 2 + 1);
        for n in 0..MAX_ENTRIES {
            cache.put((format!("more {n}"), 1), entry(Instant::now(), 0));
        }
        assert!(cache.len() <= MAX_ENTRIES);
    }
}
