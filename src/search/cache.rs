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
//! Visitors who ask for a search another visitor is running wait for that one's answer
//! ([`turn`]): at start-up or when a popular search expires, it runs once, not once per visitor
//! (who each took one of the few search slots and turned the rest away as busy).
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
pub(crate) const TTL: Duration = Duration::from_secs(2);
/// Pages of results kept at most.
pub(crate) const MAX_ENTRIES: usize = 1_000;

struct Entry {
    results: Arc<Results>,
    loaded: Instant,
    /// [`writes`] when the search started: another value means stale.
    products: u64,
}

/// Held while one visitor runs a (search, page).
type RunLock = Arc<tokio::sync::Mutex<()>>;

/// The cached pages of one [`Db`] handle (a [`Db::extension`]), by (search, page).
#[derive(Default)]
pub(crate) struct SearchCache {
    entries: Mutex<HashMap<(String, u64), Entry>>,
    /// One lock per (search, page) being run: visitors asking what another is already running
    /// wait for its answer instead of running it again (see [`turn`]).
    running: Mutex<HashMap<(String, u64), RunLock>>,
}

/// The turn of one visitor at a (search, page) no fresh entry answers: while held, visitors
/// asking the same wait in [`turn`]; dropped, the next of them finds the page cached.
pub(crate) struct Turn {
    cache: Arc<SearchCache>,
    key: (String, u64),
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.guard.take();
        let mut running = self.cache.running.lock().unwrap_or_else(|e| e.into_inner());
        // The map's own reference is the last one: nobody waits, the lock can go.
        if running
            .get(&self.key)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            running.remove(&self.key);
        }
    }
}

/// Wait until no other visitor runs the search `query` (already cleaned) for `page`, and take
/// the turn to run it: the caller asks [`cached`] again first (the visitor before may have
/// just kept the page), then runs it. So a popular search whose entry expired runs once, not
/// once per visitor who asked meanwhile (each taking a search slot).
pub(crate) async fn turn(db: &Db, query: &str, page: u64) -> Turn {
    of(db).turn((query.to_string(), page)).await
}

impl SearchCache {
    /// See [`turn`].
    async fn turn(self: Arc<Self>, key: (String, u64)) -> Turn {
        let lock = {
            let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(running.entry(key.clone()).or_default())
        };
        let guard = lock.lock_owned().await;
        Turn {
            cache: self,
            key,
            guard: Some(guard),
        }
    }
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
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }
}

/// Product and content writes through `db`'s handle so far.
fn writes(db: &Db) -> u64 {
    changes::of(db).seen().products + crate::content::changes::nodes_seen(db)
}

/// The cache kept with `db`.
pub(crate) fn of(db: &Db) -> Arc<SearchCache> {
    db.extension::<SearchCache>()
}

/// The fresh cached page for `query` (already cleaned) and `page`, if there is one.
pub fn cached(db: &Db, query: &str, page: u64) -> Option<Arc<Results>> {
    let products = writes(db);
    of(db).get(&(query.to_string(), page), products, Instant::now())
}

/// [`search::search`] of `query` (already cleaned) and `page`, kept for the next visitors.
/// Failures are not kept: the next visitor tries again.
pub(crate) async fn search(db: &Db, query: &str, page: u64) -> Result<Arc<Results>, DbError> {
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

    #[tokio::test]
    async fn a_search_being_run_makes_the_same_search_wait_and_others_not() {
        let cache = Arc::new(SearchCache::default());
        let take = |query: &str| Arc::clone(&cache).turn((query.to_string(), 1));
        let first = take("jazz").await;
        let waiting = tokio::spawn(take("jazz"));
        let other = tokio::time::timeout(Duration::from_secs(1), take("blues")).await;
        assert!(other.is_ok(), "another search does not wait");
        drop(other);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !waiting.is_finished(),
            "the same search waits for the first"
        );
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("its turn comes when the first is done")
            .expect("the task ran");
        drop(second);
        assert!(
            cache.running.lock().unwrap().is_empty(),
            "no lock is left behind"
        );
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
