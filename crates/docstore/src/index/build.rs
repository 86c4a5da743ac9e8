//! Building many empty indexes over the same documents at once (start-up, `createIndexes`
//! with several specs): each document is decoded once, as far as any of the indexes reads it,
//! and every index's keys are worked out from that one decoded copy; then each index sorts its
//! (key, record) pairs and builds its tree from them in order.
//!
//! Building one index at a time decoded every document once per index (25 times for Bazaar's
//! products), which was most of start-up at a million documents.

use super::{Index, KeyBytes, KeyScratch, RecordId, PARALLEL_KEYS_MIN};
use crate::error::{Error, Result};
use crate::stored::{FieldTree, StoredDoc};
use crate::text::TermCache;
use bson::Document;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Documents keyed before the entry vectors are sized for the rest.
const SAMPLE: usize = 512;

/// One index's entries, or the first error keying a document gave (in record order).
type Keyed = std::result::Result<Vec<(KeyBytes, RecordId)>, Error>;

/// One index's entries from each slice of documents, in order, or the first error.
type Parts = Result<Vec<Vec<(KeyBytes, RecordId)>>>;

/// The paths any of `indexes` reads, or `None` when one of them may read any field.
fn fields_read(indexes: &[Index]) -> Option<FieldTree> {
    let mut all: Vec<&str> = Vec::new();
    for index in indexes {
        all.extend(index.reads.as_deref()?.iter().map(String::as_str));
    }
    Some(FieldTree::from_paths(all))
}

/// Every index's entries for `part` (documents in record order), in vectors with room for the
/// entries of `room_for` documents (at the rate of the first [`SAMPLE`]): the first slice's
/// vectors are sized for every document, so the other slices' entries are later moved into
/// them (see [`concat`]) rather than all into a new vector: one copy and one allocation fewer.
fn key_part(
    indexes: &[Index],
    fields: Option<&FieldTree>,
    part: &[(RecordId, &StoredDoc)],
    room_for: usize,
) -> Vec<Keyed> {
    let room_for = room_for.max(part.len());
    let mut out: Vec<Keyed> = indexes
        .iter()
        .map(|_| Ok(Vec::with_capacity(part.len().min(SAMPLE))))
        .collect();
    let mut terms = TermCache::default();
    let mut partial = Document::new();
    // Where each key is encoded before it is stored (see [`Index::append_keys`]).
    let mut scratch = KeyScratch::default();
    for (n, (rid, doc)) in part.iter().enumerate() {
        if n == SAMPLE {
            // Room for the rest at the rate seen so far, so the vectors are not copied as they
            // grow (the text index's holds tens of entries per document).
            for entries in out.iter_mut().flatten() {
                let expected = entries.len() * room_for / SAMPLE + entries.len() / 16;
                entries.reserve_exact(expected.saturating_sub(entries.len()));
            }
        }
        let decoded = match fields {
            Some(fields) => doc.select_tree_into(fields, &mut partial),
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
            if let Err(e) = index.append_keys(&partial, *rid, &mut terms, &mut scratch, entries) {
                *slot = Err(e);
            }
        }
    }
    out
}

/// The entries of `parts`, one after another: in the first part's vector when it has room for
/// all of them (as [`key_part`] sizes it), otherwise in a new one of exactly the size needed;
/// each part is freed once it is moved.
fn concat(parts: Vec<Vec<(KeyBytes, RecordId)>>) -> Vec<(KeyBytes, RecordId)> {
    let total = parts.iter().map(Vec::len).sum();
    let mut parts = parts.into_iter();
    let Some(first) = parts.next() else {
        return Vec::new();
    };
    let mut entries = if first.capacity() >= total {
        first
    } else {
        let mut entries = Vec::with_capacity(total);
        entries.extend(first);
        entries
    };
    for part in parts {
        entries.extend(part);
    }
    entries
}

/// Build every index of `indexes` (all empty) over `docs`, in record order, on up to `threads`
/// threads. The result holds,
/// per index, whether it was built; a failed one (a document it cannot index, or a duplicate
/// of a unique index) is left empty, with the error building it alone would give.
pub(crate) fn build_all(
    indexes: &mut [Index],
    docs: &[(RecordId, &StoredDoc)],
    ns: &str,
    cores: usize,
) -> Vec<Result<()>> {
    if indexes.is_empty() {
        return Vec::new();
    }
    let cores = cores.max(1);
    let threads = if docs.len() >= PARALLEL_KEYS_MIN {
        cores
    } else {
        1
    };
    let slice = docs.len().div_ceil(threads).max(1);
    let fields = fields_read(indexes);
    let started = std::time::Instant::now();
    let shared: &[Index] = indexes;
    // Per slice of documents (in order), per index: its entries.
    let parts: Vec<Vec<Keyed>> = std::thread::scope(|scope| {
        let handles: Vec<_> = docs
            .chunks(slice)
            .enumerate()
            .map(|(n, part)| {
                let fields = fields.as_ref();
                let room_for = if n == 0 { docs.len() } else { part.len() };
                scope.spawn(move || key_part(shared, fields, part, room_for))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    // Per index: the slices' entries, or the first slice's error.
    let mut per_index: Vec<Parts> = (0..indexes.len()).map(|_| Ok(Vec::new())).collect();
    for part in parts {
        for (slot, keyed) in per_index.iter_mut().zip(part) {
            let Ok(parts) = slot else { continue };
            match keyed {
                Ok(more) => parts.push(more),
                Err(e) => *slot = Err(e),
            }
        }
    }
    let keyed = started.elapsed();
    let size = |k: &Parts| {
        k.as_ref()
            .map_or(0, |parts| parts.iter().map(Vec::len).sum())
    };
    let entries: usize = per_index.iter().map(size).sum();
    // Sort and build the trees, several indexes at a time, the largest first.
    let mut order: Vec<usize> = (0..indexes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(size(&per_index[i])));
    let mut jobs: Vec<Option<(&mut Index, Parts)>> =
        indexes.iter_mut().zip(per_index).map(Some).collect();
    let queue: Vec<(&mut Index, Parts)> = order.iter().filter_map(|&i| jobs[i].take()).collect();
    let large = docs.len() >= PARALLEL_KEYS_MIN;
    let mut results: Vec<Option<Result<()>>> = (0..queue.len()).map(|_| None).collect();
    let done = on_threads(queue, cores, |(index, keyed)| {
        let began = std::time::Instant::now();
        let result = keyed.and_then(|parts| index.finish_build(concat(parts), ns));
        // Which index a slow start-up waits for (issue 37's measurements).
        if large {
            tracing::debug!(
                ns,
                index = %index.spec.name,
                entries = index.entry_count(),
                built_ms = began.elapsed().as_millis() as u64,
                "index sorted and built"
            );
        }
        result
    });
    for (n, result) in done.into_iter().enumerate() {
        results[order[n]] = Some(result);
    }
    if large {
        tracing::info!(
            ns,
            documents = docs.len(),
            indexes = indexes.len(),
            entries,
            keyed_ms = keyed.as_millis() as u64,
            built_ms = (started.elapsed() - keyed).as_millis() as u64,
            "indexes built"
        );
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::internal("index build did not run"))))
        .collect()
}

/// `work` done on each of `jobs` by up to `threads` threads, each taking the next job not yet
/// taken (so a few long jobs and many short ones share the cores); the results in the jobs'
/// order. A panic in `work` is raised again here. With one thread (or one job) the jobs run
/// on the caller's thread: starting a thread is not free (a fresh stack whose pages the kernel
/// zeroes), which a small batch of work would not repay.
pub(crate) fn on_threads<T: Send, R: Send>(
    jobs: Vec<T>,
    threads: usize,
    work: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let count = jobs.len();
    if threads <= 1 || count <= 1 {
        return jobs.into_iter().map(work).collect();
    }
    let queue: Vec<parking_lot::Mutex<Option<T>>> = jobs
        .into_iter()
        .map(|job| parking_lot::Mutex::new(Some(job)))
        .collect();
    let next = AtomicUsize::new(0);
    let take_jobs = || {
        let mut done = Vec::new();
        loop {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let Some(job) = queue.get(n) else { break };
            if let Some(job) = job.lock().take() {
                done.push((n, work(job)));
            }
        }
        done
    };
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads.clamp(1, count.max(1)))
            .map(|_| scope.spawn(take_jobs))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(n, _)| *n);
    done.into_iter().map(|(_, result)| result).collect()
}

#[cfg(test)]
mod tests {
    use super::on_threads;

    #[test]
    fn on_threads_does_every_job_once_and_answers_in_the_jobs_order() {
        for threads in [0, 1, 2, 8] {
            let jobs: Vec<u64> = (0..100).collect();
            let squares = on_threads(jobs, threads, |n| n * n);
            let want: Vec<u64> = (0..100).map(|n| n * n).collect();
            assert_eq!(squares, want, "{threads} threads");
        }
        assert!(on_threads(Vec::<u8>::new(), 4, |n| n).is_empty());
    }
}
