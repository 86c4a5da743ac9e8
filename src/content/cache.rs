//! A short-lived cache of what the public content pages read: a page of a section's stream
//! (cards), a published post itself and the first page of its comments, a post's neighbours
//! (its "Newer" and "Older" links), a section's page anchors (the points numbered pages start
//! from), a tag page's nodes and products, and a feed's finished XML. Many visitors reading
//! the same page at once then cost one read of the database between them rather than one each.
//! Drafts, previews, the admin and the comment forms' posts never read it. What a page shows of
//! a cached value is rendered once and kept inside the value (`web::rendered`), so it goes
//! stale with it.
//!
//! # Staleness
//!
//! An entry is served for at most [`TTL`] (2 s) after its load started, measured on the
//! monotonic clock and on the site's clock ([`Db::now`], which tests step; a step back makes
//! every entry stale). Every write to a node or a comment through this process (reported in
//! [`crate::content::changes`] and `comments::changes`) makes every entry stale at once, so an
//! editor sees their own change, and a commenter their comment, on the next page; an entry that
//! also shows products (a tag page) is stale too after a product write through this process
//! (`catalog::changes`). Another instance's writes reach this one through nothing but time: a
//! content page is at most [`TTL`] older than the database. A scheduled post whose time comes
//! shows at once on its own page (the cached post is kept with its publication time, which
//! each view checks against the site's clock) and within [`TTL`] in the streams. A stale neighbour link leads at worst to a post since
//! renamed (its old address redirects), unpublished or deleted (a 404). With several instances on one database, each keeps its own
//! cache and each follows the others within that bound.
//!
//! Concurrent requests for a missing or stale entry share one load: the first starts it, the
//! others wait for its result. A failed load is not kept (the next request tries again).
//!
//! The cache lives in the [`Db`] handle (every clone shares it), so a second handle on the same
//! store — another instance — has its own. Each kind of value keeps at most
//! [`MAX_ENTRIES`] keys: when that is full the stale entries go, and if none was stale every
//! entry goes.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::DateTime;
use tokio::sync::OnceCell;

use crate::db::Db;

/// The longest an entry is served after its load started.
pub const TTL: Duration = Duration::from_secs(2);
/// Keys kept at most per kind of value.
pub(crate) const MAX_ENTRIES: usize = 2_000;

/// One key's value, loaded once by whoever comes first.
struct Entry<V> {
    value: OnceCell<Arc<V>>,
    /// When the entry was made (before its load started), on both clocks.
    made: Instant,
    made_at: DateTime,
    /// The change count ([`version`]) when it was made: another count means stale.
    version: u64,
}

impl<V> Entry<V> {
    fn fresh(&self, version: u64, now: Instant, now_at: DateTime) -> bool {
        let on_site_clock = now_at.timestamp_millis() - self.made_at.timestamp_millis();
        self.version == version
            && now.duration_since(self.made) < TTL
            && (0..TTL.as_millis() as i64).contains(&on_site_clock)
    }
}

/// The cached values of one kind, by key (a [`Db::extension`]).
pub(crate) struct Cache<K, V> {
    entries: Mutex<HashMap<K, Arc<Entry<V>>>>,
}

impl<K, V> Default for Cache<K, V> {
    fn default() -> Self {
        Cache {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Clone, V> Cache<K, V> {
    /// The entry for `key` if it is fresh, else a new empty one in its place.
    fn entry(&self, key: &K, version: u64, now_at: DateTime) -> Arc<Entry<V>> {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = entries.get(key) {
            if found.fresh(version, now, now_at) {
                return Arc::clone(found);
            }
        }
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(key) {
            entries.retain(|_, e| e.fresh(version, now, now_at));
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        let made = Arc::new(Entry {
            value: OnceCell::new(),
            made: now,
            made_at: now_at,
            version,
        });
        entries.insert(key.clone(), Arc::clone(&made));
        made
    }

    /// Keys currently kept (stale ones included until they are replaced or swept).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }
}

/// What makes a cached content page stale when it changes: the node and comment writes
/// through this handle (a node shows its comments and their count, a stream card the count)
/// and, for pages that show products (`products: true`), the product writes. Each counter only
/// grows, so their sum changes whenever one of them does.
pub(crate) fn version(db: &Db, products: bool) -> u64 {
    let nodes =
        crate::content::changes::nodes_seen(db).wrapping_add(crate::comments::changes::seen(db));
    if products {
        nodes.wrapping_add(crate::catalog::changes::of(db).seen().products)
    } else {
        nodes
    }
}

/// The value for `key`: from the cache while fresh, else from `load` (one load shared by the
/// requests that ask meanwhile), kept for the next [`TTL`]. `products`: the value shows
/// products, so a product write makes it stale too.
pub(crate) async fn get_or_load<K, V, E, F>(
    db: &Db,
    key: K,
    products: bool,
    load: F,
) -> Result<Arc<V>, E>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    F: Future<Output = Result<V, E>>,
{
    let cache = db.extension::<Cache<K, V>>();
    // Read before the load runs: a write while it runs makes the entry stale.
    let entry = cache.entry(&key, version(db, products), db.now());
    if let Some(value) = entry.value.get() {
        crate::metrics::cache_lookup("content", true);
        return Ok(Arc::clone(value));
    }
    crate::metrics::cache_lookup("content", false);
    let value = entry
        .value
        .get_or_try_init(|| async {
            let value = load.await?;
            crate::metrics::cache_refresh("content");
            Ok(Arc::new(value))
        })
        .await?;
    Ok(Arc::clone(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(millis: i64) -> DateTime {
        DateTime::from_millis(millis)
    }

    #[test]
    fn an_entry_is_fresh_until_it_expires_on_either_clock_or_a_node_changes() {
        let cache = Cache::<u8, u8>::default();
        let made = cache.entry(&1, 7, at(10_000));
        let now = made.made;
        assert!(made.fresh(7, now, at(10_000)));
        assert!(!made.fresh(8, now, at(10_000)), "a node changed");
        assert!(!made.fresh(7, now + TTL, at(10_000)), "expired");
        assert!(!made.fresh(7, now, at(12_000)), "the site's clock moved on");
        assert!(
            !made.fresh(7, now, at(9_999)),
            "the site's clock stepped back"
        );
        // The same entry is handed out while fresh, a new one once stale.
        assert!(Arc::ptr_eq(&made, &cache.entry(&1, 7, at(10_000))));
        assert!(!Arc::ptr_eq(&made, &cache.entry(&1, 8, at(10_000))));
    }

    #[test]
    fn a_full_cache_drops_stale_entries_first_and_else_starts_over() {
        let cache = Cache::<usize, u8>::default();
        for n in 0..MAX_ENTRIES / 2 {
            cache.entry(&n, 1, at(0));
        }
        for n in MAX_ENTRIES / 2..MAX_ENTRIES {
            cache.entry(&n, 2, at(0));
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        cache.entry(&MAX_ENTRIES, 2, at(0));
        assert_eq!(cache.len(), MAX_ENTRIES - MAX_ENTRIES / 2 + 1);
        for n in 0..2 * MAX_ENTRIES {
            cache.entry(&n, 2, at(0));
        }
        assert!(cache.len() <= MAX_ENTRIES);
    }

    #[tokio::test]
    async fn concurrent_requests_share_one_load_and_a_failure_is_not_kept() {
        let cache = Cache::<u8, u8>::default();
        let entry = cache.entry(&1, 0, at(0));
        let failed: Result<&Arc<u8>, ()> = entry.value.get_or_try_init(|| async { Err(()) }).await;
        assert!(failed.is_err());
        let again = cache.entry(&1, 0, at(0));
        assert!(Arc::ptr_eq(&entry, &again), "still fresh, still empty");
        let loaded = again
            .value
            .get_or_try_init(|| async { Ok::<_, ()>(Arc::new(5)) })
            .await;
        assert_eq!(loaded.map(|v| **v), Ok(5));
        assert_eq!(entry.value.get().map(|v| **v), Some(5));
    }
}
