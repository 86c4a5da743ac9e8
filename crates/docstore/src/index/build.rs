//! Building many empty indexes over the same documents at once (start-up, `createIndexes`
//! with several specs): each document is decoded once, as far as any of the indexes reads it,
//! and every index's keys are worked out from that one decoded copy; then each index sorts its
//! (key, record) pairs and builds its tree from them in order.
//!
//! Building one index at a time decoded every document once per index (25 times for Bazaar's
//! products), which was most of start-up at a million documents.

use super::{Index, KeyBytes, RecordId, PARALLEL_KEYS_MIN};
use crate::error::{Error, Result};
use crate::stored::StoredDoc;
use crate::text::TermCache;
use bson::Document;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One index's entries, or the first error keying a document gave (in record order).
type Keyed = std::result::Result<Vec<(KeyBytes, RecordId)>, Error>;

/// The top-level fields any of `indexes` reads, or `None` when one of them may read any field.
fn fields_read(indexes: &[Index]) -> Option<Vec<String>> {
    let mut all: Vec<String> = Vec::new();
    for index in indexes {
        for field in index.reads.as_deref()? {
            if !all.contains(field) {
                all.push(field.clone());
            }
        }
    }
    Some(all)
}

/// Every index's entries for `part` (documents in record order).
fn key_part(
    indexes: &[Index],
    fields: Option<&[String]>,
    part: &[(RecordId, &StoredDoc)],
) -> Vec<Keyed> {
    let mut out: Vec<Keyed> = indexes
        .iter()
        .map(|_| Ok(Vec::with_capacity(part.len())))
        .collect();
    let mut terms = TermCache::default();
    let mut partial = Document::new();
    for (rid, doc) in part {
        let decoded = match fields {
            Some(fields) => doc.select_into(fields, &mut partial),
            None => doc.to_document().map(|d| partial = d),
        };
        if let Err(e) = decoded {
            for slot in out.iter_mut().filter(|s| s.is_ok()) {
                *slot = Err(e.clone());
            }
            continue;
        }
        for (index, slot) in indexes.iter().zip(out.iter_mut()) {
            let Ok(entries) = slot else { continue };
            match index.keys_for_with(&partial, &mut terms) {
                Ok(keys) => {
                    entries.extend(keys.iter().map(|k| (KeyBytes::from(k.as_slice()), *rid)));
                }
                Err(e) => *slot = Err(e),
            }
        }
    }
    out
}

/// Build every index of `indexes` (all empty) over `docs`, in record order. The result holds,
/// per index, whether it was built; a failed one (a document it cannot index, or a duplicate
/// of a unique index) is left empty, with the error [`Index::build`] alone would give.
pub fn build_all(
    indexes: &mut [Index],
    docs: &[(RecordId, &StoredDoc)],
    ns: &str,
) -> Vec<Result<()>> {
    if indexes.is_empty() {
        return Vec::new();
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if docs.len() >= PARALLEL_KEYS_MIN {
        cores
    } else {
        1
    };
    let slice = docs.len().div_ceil(threads).max(1);
    let fields = fields_read(indexes);
    let shared: &[Index] = indexes;
    // Per slice of documents (in order), per index: its entries.
    let parts: Vec<Vec<Keyed>> = std::thread::scope(|scope| {
        let handles: Vec<_> = docs
            .chunks(slice)
            .map(|part| {
                let fields = fields.as_deref();
                scope.spawn(move || key_part(shared, fields, part))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    // Per index: the slices' entries joined, or the first slice's error.
    let mut per_index: Vec<Keyed> = (0..indexes.len()).map(|_| Ok(Vec::new())).collect();
    for part in parts {
        for (slot, keyed) in per_index.iter_mut().zip(part) {
            let Ok(entries) = slot else { continue };
            match keyed {
                Ok(more) if entries.is_empty() => *entries = more,
                Ok(mut more) => entries.append(&mut more),
                Err(e) => *slot = Err(e),
            }
        }
    }
    // Sort and build the trees, several indexes at a time, the largest first.
    let mut order: Vec<usize> = (0..indexes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(per_index[i].as_ref().map_or(0, Vec::len)));
    let mut jobs: Vec<Option<(&mut Index, Keyed)>> =
        indexes.iter_mut().zip(per_index).map(Some).collect();
    let queue: Vec<parking_lot::Mutex<Option<(&mut Index, Keyed)>>> = order
        .iter()
        .map(|&i| parking_lot::Mutex::new(jobs[i].take()))
        .collect();
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<Result<()>>> = (0..queue.len()).map(|_| None).collect();
    let done: Vec<(usize, Result<()>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..cores.min(queue.len()))
            .map(|_| {
                let queue = &queue;
                let next = &next;
                let order = &order;
                scope.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        let Some(job) = queue.get(n) else { break };
                        let Some((index, keyed)) = job.lock().take() else {
                            continue;
                        };
                        let result = keyed.and_then(|entries| index.finish_build(entries, ns));
                        done.push((order[n], result));
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    for (i, result) in done {
        results[i] = Some(result);
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::internal("index build did not run"))))
        .collect()
}
