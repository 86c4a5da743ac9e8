//! Open cursors: results not yet returned, handed out in batches by `getMore`, closed by
//! `killCursors`, by exhaustion, or after sitting idle longer than the cursor timeout. A
//! tailable cursor (on a capped collection) stays open when it runs out, remembering the last
//! record it returned so that `getMore` can add the documents inserted since.

use crate::collection::bson_size;
use crate::error::{Error, ErrorCode, Result};
use bson::Document;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// First batches hold 101 documents unless the client asks otherwise (MongoDB's default).
pub(crate) const DEFAULT_FIRST_BATCH: usize = 101;
/// A batch never exceeds this many bytes (but always holds at least one document).
pub(crate) const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

struct OpenCursor {
    namespace: String,
    remaining: VecDeque<Document>,
    last_used: Instant,
    tail: Option<Tail>,
}

/// What a tailable cursor reads to continue: the documents after `last_record` in the
/// collection that match `filter`, projected.
#[derive(Debug, Clone)]
pub(crate) struct Tail {
    pub db: String,
    pub coll: String,
    pub filter: crate::query::Filter,
    pub projection: Option<crate::query::Projection>,
    pub last_record: crate::index::RecordId,
    /// `awaitData`: `getMore` waits a while for new documents before answering empty.
    pub await_data: bool,
}

pub(crate) struct CursorManager {
    /// The idle timeout in milliseconds (`setParameter` `cursorTimeoutMillis` changes it).
    timeout_ms: AtomicU64,
    next_id: AtomicI64,
    cursors: Mutex<HashMap<i64, OpenCursor>>,
}

/// One batch and the cursor id to continue with (0 when the cursor is exhausted).
pub(crate) struct Batch {
    pub documents: Vec<Document>,
    pub cursor_id: i64,
}

impl CursorManager {
    pub(crate) fn new(timeout: Duration) -> Self {
        // Random start so ids from different server runs do not collide in a client's eyes.
        let start = (rand::random::<u32>() as i64) << 20 | 1;
        CursorManager {
            timeout_ms: AtomicU64::new(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
            next_id: AtomicI64::new(start),
            cursors: Mutex::new(HashMap::new()),
        }
    }

    /// Whether no cursor is open (the tests check that finished cursors are closed).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.cursors.lock().is_empty()
    }

    /// Return the first batch of `results`, keeping the rest under a new cursor id.
    pub(crate) fn first_batch(
        &self,
        namespace: &str,
        results: Vec<Document>,
        batch_size: Option<usize>,
        single_batch: bool,
    ) -> Batch {
        self.reap_idle();
        let mut remaining: VecDeque<Document> = results.into();
        let documents = take_batch(&mut remaining, batch_size.unwrap_or(DEFAULT_FIRST_BATCH));
        if remaining.is_empty() || single_batch {
            return Batch {
                documents,
                cursor_id: 0,
            };
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.cursors.lock().insert(
            id,
            OpenCursor {
                namespace: namespace.to_string(),
                remaining,
                last_used: Instant::now(),
                tail: None,
            },
        );
        Batch {
            documents,
            cursor_id: id,
        }
    }

    /// The first batch of a tailable cursor, which stays open after it even when `results`
    /// fit in it.
    pub(crate) fn first_tailable_batch(
        &self,
        namespace: &str,
        results: Vec<Document>,
        batch_size: Option<usize>,
        tail: Tail,
    ) -> Batch {
        self.reap_idle();
        let mut remaining: VecDeque<Document> = results.into();
        let documents = take_batch(&mut remaining, batch_size.unwrap_or(DEFAULT_FIRST_BATCH));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.cursors.lock().insert(
            id,
            OpenCursor {
                namespace: namespace.to_string(),
                remaining,
                last_used: Instant::now(),
                tail: Some(tail),
            },
        );
        Batch {
            documents,
            cursor_id: id,
        }
    }

    /// For a tailable cursor of `namespace` with nothing left to return: what it reads next.
    /// `None` for other cursors, and for a tailable one that still holds documents.
    pub(crate) fn tail_to_refill(&self, id: i64, namespace: &str) -> Option<Tail> {
        let cursors = self.cursors.lock();
        let cursor = cursors.get(&id)?;
        if cursor.namespace != namespace || !cursor.remaining.is_empty() {
            return None;
        }
        cursor.tail.clone()
    }

    /// Whether cursor `id` is a tailable `awaitData` one; `None` when no cursor `id` is open.
    pub(crate) fn awaits_data(&self, id: i64) -> Option<bool> {
        self.cursors
            .lock()
            .get(&id)
            .map(|cursor| cursor.tail.as_ref().is_some_and(|tail| tail.await_data))
    }

    /// Add documents read by a tailable cursor, up to `last_record`.
    pub(crate) fn refill(&self, id: i64, docs: Vec<Document>, last_record: crate::index::RecordId) {
        if let Some(cursor) = self.cursors.lock().get_mut(&id) {
            cursor.remaining.extend(docs);
            if let Some(tail) = &mut cursor.tail {
                tail.last_record = last_record;
            }
        }
    }

    /// `getMore`: the next batch of cursor `id`, which must belong to `namespace`.
    pub(crate) fn get_more(
        &self,
        id: i64,
        namespace: &str,
        batch_size: Option<usize>,
    ) -> Result<Batch> {
        self.reap_idle();
        let mut cursors = self.cursors.lock();
        let Some(cursor) = cursors.get_mut(&id) else {
            return Err(Error::new(
                ErrorCode::CursorNotFound,
                format!("cursor id {id} not found"),
            ));
        };
        if cursor.namespace != namespace {
            return Err(Error::location(
                13,
                format!(
                    "Requested getMore on namespace '{namespace}', but cursor belongs to a different namespace {}",
                    cursor.namespace
                ),
            ));
        }
        let documents = take_batch(&mut cursor.remaining, batch_size.unwrap_or(usize::MAX));
        cursor.last_used = Instant::now();
        let cursor_id = if cursor.remaining.is_empty() && cursor.tail.is_none() {
            cursors.remove(&id);
            0
        } else {
            id
        };
        Ok(Batch {
            documents,
            cursor_id,
        })
    }

    /// Close cursors; returns (killed, not found).
    pub(crate) fn kill(&self, ids: &[i64]) -> (Vec<i64>, Vec<i64>) {
        let mut cursors = self.cursors.lock();
        let (mut killed, mut missing) = (Vec::new(), Vec::new());
        for id in ids {
            if cursors.remove(id).is_some() {
                killed.push(*id);
            } else {
                missing.push(*id);
            }
        }
        (killed, missing)
    }

    /// Close cursors idle for longer than the timeout.
    pub(crate) fn reap_idle(&self) {
        let now = Instant::now();
        let timeout = self.timeout();
        self.cursors
            .lock()
            .retain(|_, c| now.duration_since(c.last_used) < timeout);
    }

    /// How long a cursor may sit idle before it is closed.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// Change the idle timeout (`setParameter` `cursorTimeoutMillis`).
    pub(crate) fn set_timeout(&self, timeout: Duration) {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.timeout_ms.store(ms, Ordering::Relaxed);
    }
}

fn take_batch(remaining: &mut VecDeque<Document>, max_docs: usize) -> Vec<Document> {
    let mut batch = Vec::new();
    let mut bytes = 0usize;
    while batch.len() < max_docs {
        let Some(next) = remaining.front() else { break };
        let size = bson_size(next);
        if !batch.is_empty() && bytes + size > MAX_BATCH_BYTES {
            break;
        }
        bytes += size;
        if let Some(doc) = remaining.pop_front() {
            batch.push(doc);
        }
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn docs(n: i32) -> Vec<Document> {
        (0..n).map(|i| doc! { "_id": i }).collect()
    }

    #[test]
    fn first_batch_defaults_to_101_and_get_more_returns_the_rest() {
        let m = CursorManager::new(Duration::from_secs(60));
        let b = m.first_batch("db.c", docs(250), None, false);
        assert_eq!(b.documents.len(), 101);
        assert_ne!(b.cursor_id, 0);
        let more = m.get_more(b.cursor_id, "db.c", Some(100)).unwrap();
        assert_eq!(more.documents.len(), 100);
        let last = m.get_more(b.cursor_id, "db.c", None).unwrap();
        assert_eq!(last.documents.len(), 49);
        assert_eq!(last.cursor_id, 0);
        assert!(m.get_more(b.cursor_id, "db.c", None).is_err());
    }

    #[test]
    fn single_batch_and_exhausted_results_close_the_cursor() {
        let m = CursorManager::new(Duration::from_secs(60));
        assert_eq!(m.first_batch("db.c", docs(5), None, false).cursor_id, 0);
        assert_eq!(
            m.first_batch("db.c", docs(500), Some(10), true).cursor_id,
            0
        );
        assert!(m.is_empty());
    }

    #[test]
    fn idle_cursors_are_reaped() {
        let m = CursorManager::new(Duration::from_millis(0));
        let b = m.first_batch("db.c", docs(200), Some(1), false);
        m.reap_idle();
        let err = m.get_more(b.cursor_id, "db.c", None).err().unwrap();
        assert_eq!(err.code, ErrorCode::CursorNotFound);
    }

    #[test]
    fn get_more_on_another_namespace_is_refused() {
        let m = CursorManager::new(Duration::from_secs(60));
        let b = m.first_batch("db.c", docs(200), Some(1), false);
        assert!(m.get_more(b.cursor_id, "db.other", None).is_err());
    }
}
