//! A small cache of a post's neighbours (the "Newer" and "Older" links of a post page), so a
//! post read by many visitors at once costs one find of itself rather than three finds.
//!
//! # Staleness
//!
//! An entry is keyed by the post's point in its stream (section, publication time, `_id`) and
//! served for at most [`TTL`] (2 s). Every write to a node through this process (creating,
//! editing, publishing, unpublishing, rescheduling, deleting: reported in
//! [`crate::content::changes`]) makes every entry stale at once, so an editor sees their own
//! change on the next page. Another instance's writes, and a scheduled post whose time comes,
//! reach this one through nothing but time: a post page shows
//! neighbours at most [`TTL`] older than the database (the bound the search cache has, see
//! `search::cache`). A stale neighbour link leads at worst to a post that was since renamed (its
//! old address redirects), unpublished or deleted (a 404), or skips a post published meanwhile.
//!
//! The cache lives in the [`Db`] handle (every clone shares it), so a second handle on the same
//! store — another instance — has its own. At most [`MAX_ENTRIES`] posts are kept: when it is
//! full the expired entries go, and if none had expired every entry goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::DateTime;

use crate::content::changes;
use crate::db::Db;

/// The longest a post's neighbours are served from the cache.
pub const TTL: Duration = Duration::from_secs(2);
/// Posts whose neighbours are kept at most.
pub(crate) const MAX_ENTRIES: usize = 10_000;

/// Where a post stands: its section and its point in the section's stream (publication time in
/// milliseconds, `_id`).
type Key = (String, i64, ObjectId);

struct Entry<V> {
    pair: Arc<V>,
    loaded: Instant,
    /// The node change counter when the load started: another value means stale.
    changes: u64,
}

/// The cached neighbours of one [`Db`] handle (a [`Db::extension`]); `V` is what the stream
/// reads of a post's neighbours (`content::stream` owns that type: it uses this cache).
pub(crate) struct NeighbourCache<V> {
    entries: Mutex<HashMap<Key, Entry<V>>>,
}

impl<V> Default for NeighbourCache<V> {
    fn default() -> Self {
        NeighbourCache {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<V> NeighbourCache<V> {
    fn get(&self, key: &Key, changes: u64, now: Instant) -> Option<Arc<V>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|e| e.changes == changes && now.duration_since(e.loaded) < TTL)
            .map(|e| Arc::clone(&e.pair))
    }

    fn put(&self, key: Key, entry: Entry<V>) {
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

    /// Posts currently kept (expired ones included until they are replaced or swept).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }
}

/// The neighbours of the post at (`published`, `id`) of `section`: from the cache when fresh,
/// else from `load`, kept for the next visitors. Failures are not kept.
pub(crate) async fn neighbours<V, F, E>(
    db: &Db,
    section: &str,
    published: DateTime,
    id: ObjectId,
    load: F,
) -> Result<V, E>
where
    V: Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Result<V, E>>,
{
    let cache = db.extension::<NeighbourCache<V>>();
    let key = (section.to_string(), published.timestamp_millis(), id);
    // Read before the load runs: a node write while it runs makes this entry stale.
    let changes = changes::nodes_seen(db);
    if let Some(pair) = cache.get(&key, changes, Instant::now()) {
        return Ok((*pair).clone());
    }
    let loaded = Instant::now();
    let pair = load.await?;
    cache.put(
        key,
        Entry {
            pair: Arc::new(pair.clone()),
            loaded,
            changes,
        },
    );
    Ok(pair)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pair = (Option<u8>, Option<u8>);

    fn entry(loaded: Instant, changes: u64) -> Entry<Pair> {
        Entry {
            pair: Arc::new((None, None)),
            loaded,
            changes,
        }
    }

    fn key(n: u64) -> Key {
        ("blog".to_string(), n as i64, ObjectId::new())
    }

    #[test]
    fn an_entry_is_served_until_it_expires_or_a_node_changes() {
        let cache = NeighbourCache::<Pair>::default();
        let key = key(1);
        let loaded = Instant::now();
        cache.put(key.clone(), entry(loaded, 7));
        assert!(cache.get(&key, 7, loaded).is_some());
        assert!(cache.get(&key, 8, loaded).is_none(), "a node changed");
        assert!(cache.get(&key, 7, loaded + TTL).is_none(), "expired");
        let other_post = ("blog".to_string(), 1, ObjectId::new());
        assert!(cache.get(&other_post, 7, loaded).is_none());
    }

    #[test]
    fn a_full_cache_drops_expired_entries_first_and_else_starts_over() {
        let cache = NeighbourCache::<Pair>::default();
        let old = Instant::now()
            .checked_sub(TTL * 2)
            .expect("a monotonic clock that far back");
        for n in 0..MAX_ENTRIES as u64 / 2 {
            cache.put(key(n), entry(old, 0));
        }
        for n in 0..MAX_ENTRIES as u64 - MAX_ENTRIES as u64 / 2 {
            cache.put(key(n), entry(Instant::now(), 0));
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        cache.put(key(0), entry(Instant::now(), 0));
        assert_eq!(cache.len(), MAX_ENTRIES - MAX_ENTRIES / 2 + 1);
        for n in 0..MAX_ENTRIES as u64 {
            cache.put(key(n), entry(Instant::now(), 0));
        }
        assert!(cache.len() <= MAX_ENTRIES);
    }
}
