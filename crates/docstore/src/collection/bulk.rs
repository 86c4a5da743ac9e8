//! Building several indexes over a loaded collection at once, one thread per index (up to the
//! machine's cores): start-up loads a snapshot's documents first and then builds all their
//! indexes, `_id_` included, in parallel, each from its sorted keys, instead of updating every
//! index for every document on one core.

use super::{check_size, Collection, StoredDoc};
use crate::error::Result;
use crate::index::{Index, IndexSpec, RecordId};
use crate::storage::kept::KeptIndex;
use crate::storage::CollectionImage;
use bson::Document;
use std::collections::HashSet;

/// Keys of a batch for one index: per document, the keys it contributes.
type BatchKeys = Vec<Vec<Vec<u8>>>;

/// Index keys (documents × indexes) from which a batch insert works out and adds them on
/// several threads.
#[cfg(not(test))]
const PARALLEL_MIN_KEYS: usize = 50_000;
/// The unit tests' batches are small: every non-empty one goes through the threads, which the
/// insert command's (`tests/store`) do not.
#[cfg(test)]
const PARALLEL_MIN_KEYS: usize = 1;

/// How many threads work on `jobs` independent pieces of work.
fn threads_for(jobs: usize) -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(jobs.max(1))
}

impl Collection {
    /// A collection holding a snapshot's documents (in natural order) and its secondary
    /// indexes. The documents are taken as they are and every index is built afterwards; if
    /// that finds two documents with one `_id` (a snapshot never holds them, but replaying
    /// puts would keep the later one), the documents are loaded again one `put` at a time.
    ///
    /// With `background`, a large collection's text index is left to be built after start-up
    /// (see `background`): it is added empty, marked as being built.
    ///
    /// An index whose entries the snapshot kept (`kept`, see `storage::kept`) with the same
    /// definition is loaded from them instead of being built; kept entries that fail their
    /// checks are ignored and that index is built.
    pub(crate) fn load(
        db: &str,
        name: &str,
        options: Document,
        docs: Vec<StoredDoc>,
        specs: Vec<IndexSpec>,
        background: bool,
        kept: Vec<KeptIndex>,
    ) -> Result<Collection> {
        let mut coll = Collection::new(db, name, options.clone());
        for doc in &docs {
            check_size(doc.len())?;
        }
        coll.data_bytes = docs.iter().map(|d| d.len() as u64).sum();
        coll.next_record = docs.len() as u64 + 1;
        let docs_len = docs.len();
        coll.docs = (1..).zip(docs).collect();
        coll.indexes.clear();
        let mut all = Vec::with_capacity(specs.len() + 1);
        // The `_id_` index has the collection's default collation.
        let mut id_spec = IndexSpec::id_index();
        id_spec.collation = coll.collation.clone();
        all.push(id_spec);
        all.extend(specs.iter().cloned());
        let later =
            |spec: &IndexSpec| background && super::background::in_background(spec, docs_len);
        let now: Vec<IndexSpec> = all.iter().filter(|spec| !later(spec)).cloned().collect();
        let mut loaded = load_kept(&now, kept, docs_len as u64, &coll.namespace());
        let to_build: Vec<IndexSpec> = now
            .iter()
            .zip(&loaded)
            .filter(|(_, index)| index.is_none())
            .map(|(spec, _)| spec.clone())
            .collect();
        match coll.build_indexes(to_build) {
            Ok(built) => {
                // Back in the order given: loaded or built, the ones left for later empty.
                let mut built = built.into_iter();
                let mut loaded = loaded.iter_mut();
                for spec in all {
                    let index = if later(&spec) {
                        Index::new_building(spec)?
                    } else if let Some(index) = loaded.next().and_then(Option::take) {
                        index
                    } else {
                        built.next().ok_or_else(|| {
                            crate::error::Error::internal("index build lost an index")
                        })?
                    };
                    coll.indexes.push(index);
                }
                Ok(coll)
            }
            Err(_) => {
                let docs: Vec<StoredDoc> = std::mem::take(&mut coll.docs).into_values().collect();
                let mut coll = Collection::new(db, name, options);
                for doc in docs {
                    coll.put_stored(doc)?;
                }
                coll.create_indexes_parallel(specs)?;
                Ok(coll)
            }
        }
    }

    /// Insert `docs` (each with its `_id` first, as [`Collection::insert`] takes them) all at
    /// once, in order, with the indexes' keys worked out and added several indexes at a time.
    /// Only when every document would be inserted: if one cannot be encoded or keyed, or a key
    /// of a unique index is already stored or comes twice in the batch, nothing changes and
    /// `None` is returned, so the caller inserts one at a time and reports the failing document
    /// exactly as it would have. The result is the collection that inserting them one by one
    /// gives (same record ids, entries and multikey flags). The tests' entry point: the insert
    /// command encodes first and calls [`Collection::insert_all_encoded`].
    #[cfg(test)]
    pub(crate) fn insert_all(&mut self, docs: &[Document]) -> Option<Vec<RecordId>> {
        let mut stored = Vec::with_capacity(docs.len());
        for doc in docs {
            stored.push(super::encode_checked(doc).ok()?);
        }
        let docs: Vec<Option<&Document>> = docs.iter().map(Some).collect();
        self.insert_all_encoded(&docs, stored)
    }

    /// [`Collection::insert_all`] of `docs` already encoded as `stored` (in the same order) by
    /// [`Collection::encode_for_insert`]; a document given as `None` is keyed from its stored
    /// bytes (one the insert command kept as the client sent it).
    pub(crate) fn insert_all_encoded(
        &mut self,
        docs: &[Option<&Document>],
        stored: Vec<StoredDoc>,
    ) -> Option<Vec<RecordId>> {
        let multikey: Vec<bool> = self.indexes.iter().map(Index::is_multikey).collect();
        let records = self.insert_all_stored(docs, stored);
        if records.is_none() {
            for (index, was) in self.indexes.iter().zip(multikey) {
                index.reset_multikey(was);
            }
        }
        records
    }

    /// [`Collection::insert_all_encoded`] without undoing multikey flags on failure.
    fn insert_all_stored(
        &mut self,
        docs: &[Option<&Document>],
        stored: Vec<StoredDoc>,
    ) -> Option<Vec<RecordId>> {
        // Per index, every document's keys, the indexes shared out over the threads. A
        // batch too small to repay starting threads (a few per batch: the traffic log writes
        // one every few dozen milliseconds under load, each thread a fresh stack and heap
        // whose pages the kernel zeroes) is keyed on the caller's thread.
        let threads = if docs.len() * self.indexes.len() < PARALLEL_MIN_KEYS {
            1
        } else {
            threads_for(self.indexes.len())
        };
        let indexes = &self.indexes;
        let keyed: Vec<Option<BatchKeys>> =
            crate::index::on_threads((0..indexes.len()).collect(), threads, |i| {
                // Sized up front (collecting into an `Option` grows the vector by doubling).
                let mut keys: BatchKeys = Vec::with_capacity(docs.len());
                for (d, s) in docs.iter().zip(&stored) {
                    let keyed = match d {
                        Some(d) => indexes[i].keys_for(d),
                        None => indexes[i].keys_for_stored(s),
                    };
                    keys.push(keyed.ok()?);
                }
                Some(keys)
            });
        let mut all_keys = Vec::with_capacity(keyed.len());
        for keys in keyed {
            all_keys.push(keys?);
        }
        for (index, keys) in self.indexes.iter().zip(&all_keys) {
            if !index.spec.unique {
                continue;
            }
            let mut seen = HashSet::with_capacity(docs.len());
            for key in keys.iter().flatten() {
                if !seen.insert(key.as_slice()) || index.has_key(key) {
                    return None;
                }
            }
        }
        let first = self.next_record;
        let records: Vec<RecordId> = (first..first + docs.len() as u64).collect();
        for (record, doc) in records.iter().zip(stored) {
            self.data_bytes += doc.len() as u64;
            self.docs.insert(*record, doc);
        }
        self.next_record += docs.len() as u64;
        for record in &records {
            self.note_change(*record);
        }
        let mut work: Vec<Vec<(&mut Index, BatchKeys)>> =
            (0..threads).map(|_| Vec::new()).collect();
        for (n, pair) in self.indexes.iter_mut().zip(all_keys).enumerate() {
            work[n % threads].push(pair);
        }
        let records = &records;
        let add = move |share: Vec<(&mut Index, BatchKeys)>| {
            for (index, keys) in share {
                for (record, keys) in records.iter().zip(keys) {
                    index.insert(&keys, *record);
                }
            }
        };
        if threads == 1 {
            work.into_iter().for_each(add);
        } else {
            std::thread::scope(|scope| {
                for share in work {
                    scope.spawn(move || add(share));
                }
            });
        }
        Some(records.clone())
    }

    /// Build indexes for `specs` over the documents already stored, in parallel, and add them
    /// in the order given. Fails, adding none, on a duplicate key or an unindexable document
    /// (the first failing spec's error).
    pub(crate) fn create_indexes_parallel(&mut self, specs: Vec<IndexSpec>) -> Result<()> {
        let indexes = self.build_indexes(specs)?;
        self.indexes.extend(indexes);
        Ok(())
    }

    /// [`Collection::create_index`] built the way a load builds its indexes: the documents
    /// keyed on every core, the keys sorted and the tree built at once, rather than each
    /// document's keys inserted in turn on one thread. Journal replay builds an index created
    /// since the snapshot this way (at 1 000 000 products, 0.8 s of a restart on one thread).
    /// Fails, adding nothing, as [`Collection::create_index`] does.
    pub(crate) fn create_index_parallel(&mut self, spec: IndexSpec) -> Result<()> {
        self.check_text_index_room(&spec)?;
        self.create_indexes_parallel(vec![spec])
    }

    /// Indexes for `specs` over the stored documents, built together (each document decoded
    /// once for all of them, see [`crate::index::build_all`]), in the order given; the first
    /// failing spec's error otherwise.
    fn build_indexes(&self, specs: Vec<IndexSpec>) -> Result<Vec<Index>> {
        let mut indexes = specs
            .into_iter()
            .map(Index::new)
            .collect::<Result<Vec<_>>>()?;
        let docs: Vec<(RecordId, &StoredDoc)> = self.docs.iter().map(|(r, d)| (*r, d)).collect();
        let threads = crate::index::cores();
        for result in crate::index::build_all(&mut indexes, &docs, &self.namespace(), threads) {
            result?;
        }
        Ok(indexes)
    }
}

/// Per spec of `specs`, its index loaded from the kept index of the same definition, or `None`
/// (none kept, or its entries fail their checks: see [`Index::from_kept`]). The entries are decoded and the trees built on every core.
fn load_kept(
    specs: &[IndexSpec],
    mut kept: Vec<KeptIndex>,
    records: u64,
    ns: &str,
) -> Vec<Option<Index>> {
    if kept.is_empty() {
        return specs.iter().map(|_| None).collect();
    }
    let started = std::time::Instant::now();
    // Per spec, the kept index of the same definition, if any.
    let jobs: Vec<Option<(IndexSpec, KeptIndex)>> = specs
        .iter()
        .map(|spec| {
            let definition = spec.to_document();
            let at = kept.iter().position(|k| k.spec == definition);
            at.map(|at| (spec.clone(), kept.swap_remove(at)))
        })
        .collect();
    let threads = threads_for(jobs.len());
    let loaded: Vec<Option<Index>> = crate::index::on_threads(jobs, threads, |job| {
        let (spec, kept) = job?;
        let name = spec.name.clone();
        let index = Index::from_kept(spec, &kept, records);
        if index.is_none() {
            tracing::warn!(ns, index = %name, "kept index entries are damaged; building it");
        }
        index
    });
    let count = loaded.iter().flatten().count();
    if count > 0 {
        tracing::info!(
            ns,
            indexes = count,
            entries = loaded
                .iter()
                .flatten()
                .map(Index::entry_count)
                .sum::<usize>(),
            ms = started.elapsed().as_millis() as u64,
            "indexes loaded from the snapshot's kept entries"
        );
    }
    loaded
}

/// The indexes a load of `image` builds (`_id_` first, then its specs in order), each built
/// over the image's documents numbered as a load numbers them, one at a time on one thread: a
/// snapshot keeps their entries (see `storage::kept`) from this, in the background. A spec that
/// cannot be parsed or built is skipped (a load builds it).
pub(crate) fn indexes_to_keep(image: &CollectionImage) -> impl FnMut() -> Option<KeptIndex> + '_ {
    let mut id_spec = IndexSpec::id_index();
    id_spec.collation = crate::collation::of_options(&image.options);
    let mut specs = std::iter::once(Some(id_spec))
        .chain(image.indexes.iter().map(|d| IndexSpec::parse(d).ok()))
        .flatten()
        .filter(|spec| spec.text.is_none());
    let docs: Vec<(RecordId, &StoredDoc)> = (1..).zip(&image.docs).collect();
    let ns = format!("{}.{}", image.db, image.coll);
    move || {
        for spec in specs.by_ref() {
            let Ok(index) = Index::new(spec) else {
                continue;
            };
            let mut one = [index];
            let built = crate::index::build_all(&mut one, &docs, &ns, 1);
            if matches!(built.first(), Some(Ok(()))) {
                let [index] = one;
                if let Some(kept) = index.to_kept(Some) {
                    return Some(kept);
                }
            }
        }
        None
    }
}

/// What a snapshot of `c` taken now keeps of its indexes, read from its live indexes instead of
/// built again from the documents (see [`indexes_to_keep`]); only for a snapshot taken while no
/// write can change `c` (the shutdown snapshot, under the catalog's gate). A load numbers a
/// snapshot's documents 1, 2, … in record order, so each entry's record id becomes its
/// document's position. Text indexes and indexes still being built are left out (a start
/// builds them).
pub(crate) fn kept_from_live(c: &Collection) -> Vec<KeptIndex> {
    let records: Vec<RecordId> = c.docs.keys().copied().collect();
    let dense = records
        .last()
        .is_none_or(|&last| last == records.len() as RecordId);
    let position = |rid: RecordId| {
        if dense {
            (1..=records.len() as RecordId)
                .contains(&rid)
                .then_some(rid)
        } else {
            records
                .binary_search(&rid)
                .ok()
                .map(|at| at as RecordId + 1)
        }
    };
    c.indexes()
        .iter()
        .filter_map(|index| index.to_kept(position))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document};

    /// Per index: its name, its (key, record) entries and whether it is multikey.
    type IndexContents = (String, Vec<(Vec<u8>, u64)>, bool);

    fn entries(c: &Collection) -> Vec<IndexContents> {
        c.indexes()
            .iter()
            .map(|i| {
                let keys = i.entries().map(|(k, r)| (k.to_vec(), r)).collect();
                (i.spec.name.clone(), keys, i.is_multikey())
            })
            .collect()
    }

    /// A plain index, a compound one over an array field, and a unique sparse one.
    fn plain_and_unique_indexes() -> Vec<IndexSpec> {
        vec![
            IndexSpec::parse(&doc! { "key": { "a": 1 }, "name": "a" }).unwrap(),
            IndexSpec::parse(&doc! { "key": { "tags": 1, "_id": -1 }, "name": "t" }).unwrap(),
            IndexSpec::parse(
                &doc! { "key": { "u": 1 }, "name": "u", "unique": true, "sparse": true },
            )
            .unwrap(),
        ]
    }

    #[test]
    fn loading_a_snapshot_builds_the_same_indexes_as_inserting_one_by_one() {
        let specs = plain_and_unique_indexes;
        let docs: Vec<Document> = (0..300)
            .map(|i| {
                let mut d = doc! { "_id": i, "a": i % 7, "tags": [i % 3, "x", i % 3] };
                if i % 10 == 0 {
                    d.insert("u", i);
                }
                d
            })
            .collect();
        let (loaded, one_by_one) = loaded_and_inserted(specs, &docs);
        assert_eq!(entries(&loaded), entries(&one_by_one));
        assert_eq!(loaded.len(), 300);
        assert_eq!(loaded.data_size(), one_by_one.data_size());
        let id = loaded.find_by_id(&bson::Bson::Int32(42)).unwrap();
        assert_eq!(loaded.get(id).unwrap().to_document().unwrap(), docs[42]);
    }

    /// The same documents loaded as a snapshot with `specs` indexes, and inserted one at a
    /// time into a collection given those indexes first.
    fn loaded_and_inserted(
        specs: impl Fn() -> Vec<IndexSpec>,
        docs: &[Document],
    ) -> (Collection, Collection) {
        let mut one_by_one = Collection::new("db", "c", Document::new());
        for spec in specs() {
            one_by_one.create_index(spec).unwrap();
        }
        for d in docs {
            one_by_one.insert(d.clone()).unwrap();
        }
        let stored = docs
            .iter()
            .map(|d| StoredDoc::from_document(d).unwrap())
            .collect();
        let loaded = Collection::load(
            "db",
            "c",
            Document::new(),
            stored,
            specs(),
            false,
            Vec::new(),
        )
        .unwrap();
        (loaded, one_by_one)
    }

    #[test]
    fn a_large_snapshot_keyed_on_several_threads_builds_the_same_text_and_plain_indexes() {
        let specs = || {
            vec![
                IndexSpec::parse(&doc! {
                    "key": { "kind": 1, "title": "text", "about.body": "text" },
                    "name": "words",
                    "weights": { "title": 5 },
                })
                .unwrap(),
                IndexSpec::parse(&doc! { "key": { "n": -1, "_id": 1 }, "name": "n" }).unwrap(),
            ]
        };
        // Enough documents for the keys to be worked out in slices.
        let docs: Vec<Document> = (0..25_000)
            .map(|i| {
                let mut d = doc! {
                    "_id": i,
                    "kind": i % 3,
                    "n": i % 101,
                    "title": format!("Running edition {i} of the blue notes"),
                    "about": { "body": "Recorded in one day, played by everyone" },
                    "other": "ignored words here",
                };
                if i % 4 == 0 {
                    d.insert("language", "spanish");
                }
                d
            })
            .collect();
        let (loaded, one_by_one) = loaded_and_inserted(specs, &docs);
        assert_eq!(entries(&loaded), entries(&one_by_one));
    }

    #[test]
    fn a_batch_inserted_at_once_equals_inserting_one_by_one() {
        let specs = || {
            let mut specs = plain_and_unique_indexes();
            specs
                .push(IndexSpec::parse(&doc! { "key": { "words": "text" }, "name": "w" }).unwrap());
            specs
        };
        let docs: Vec<Document> = (0..300)
            .map(|i| {
                let mut d = doc! { "_id": i, "a": i % 7, "words": format!("edition {i} of blue") };
                if i >= 100 {
                    d.insert("tags", vec![bson::Bson::Int32(i % 3), "x".into()]);
                }
                if i % 10 == 0 {
                    d.insert("u", i);
                }
                d
            })
            .collect();
        let mut one_by_one = Collection::new("db", "c", Document::new());
        let mut at_once = Collection::new("db", "c", Document::new());
        for spec in specs() {
            one_by_one.create_index(spec.clone()).unwrap();
            at_once.create_index(spec).unwrap();
        }
        for d in &docs {
            one_by_one.insert(d.clone()).unwrap();
        }
        // Two batches: the second goes into indexes that already hold entries.
        assert_eq!(at_once.insert_all(&docs[..100]).unwrap().len(), 100);
        assert!(!at_once.indexes()[2].is_multikey(), "no arrays yet");
        let records = at_once.insert_all(&docs[100..]).unwrap();
        assert_eq!(records, (101..=300).collect::<Vec<u64>>());
        assert_eq!(entries(&at_once), entries(&one_by_one));
        assert_eq!(at_once.len(), 300);
        assert_eq!(at_once.data_size(), one_by_one.data_size());
        let id = at_once.find_by_id(&bson::Bson::Int32(142)).unwrap();
        assert_eq!(at_once.get(id).unwrap().to_document().unwrap(), docs[142]);
    }

    #[test]
    fn a_batch_that_would_break_a_unique_index_changes_nothing() {
        let unique =
            IndexSpec::parse(&doc! { "key": { "u": 1 }, "name": "u", "unique": true }).unwrap();
        let tags = IndexSpec::parse(&doc! { "key": { "tags": 1 }, "name": "t" }).unwrap();
        let mut c = Collection::new("db", "c", Document::new());
        c.create_index(unique).unwrap();
        c.create_index(tags).unwrap();
        c.insert(doc! { "_id": 0, "u": 0 }).unwrap();
        let before = entries(&c);
        for batch in [
            // A key already stored, in the `_id` index and in a secondary one.
            vec![
                doc! { "_id": 1, "u": 1, "tags": [1, 2] },
                doc! { "_id": 0, "u": 2 },
            ],
            vec![
                doc! { "_id": 1, "u": 1, "tags": [1, 2] },
                doc! { "_id": 2, "u": 0 },
            ],
            // The same key twice within the batch.
            vec![
                doc! { "_id": 1, "u": 1, "tags": [1, 2] },
                doc! { "_id": 2, "u": 1 },
            ],
            vec![
                doc! { "_id": 1, "u": 1, "tags": [1, 2] },
                doc! { "_id": 1, "u": 3 },
            ],
        ] {
            assert!(c.insert_all(&batch).is_none(), "{batch:?}");
            assert_eq!(
                entries(&c),
                before,
                "nothing changed, multikey flags included"
            );
            assert_eq!(c.len(), 1);
        }
    }

    /// The documents of the snapshot test above, as stored, and an image of them with
    /// `plain_and_unique_indexes`.
    fn image_of_300() -> CollectionImage {
        image_of(
            (0..300)
                .map(|i| {
                    let mut d = doc! { "_id": i, "a": i % 7, "tags": [i % 3, "x", i % 3] };
                    if i % 10 == 0 {
                        d.insert("u", i);
                    }
                    StoredDoc::from_document(&d).unwrap()
                })
                .collect(),
        )
    }

    /// An image of `docs` in `db.c` with `plain_and_unique_indexes`.
    fn image_of(docs: Vec<StoredDoc>) -> CollectionImage {
        CollectionImage {
            db: "db".into(),
            coll: "c".into(),
            options: Document::new(),
            indexes: plain_and_unique_indexes()
                .iter()
                .map(IndexSpec::to_document)
                .collect(),
            docs,
        }
    }

    fn load_image(image: &CollectionImage, kept: Vec<KeptIndex>) -> Collection {
        let specs = plain_and_unique_indexes();
        Collection::load(
            "db",
            "c",
            Document::new(),
            image.docs.clone(),
            specs,
            false,
            kept,
        )
        .unwrap()
    }

    /// The kept form of `index` with its entries replaced by `entries` and its definition by
    /// `spec`.
    fn kept_with(spec: Document, index: &Index, entries: &[(Vec<u8>, u64)]) -> KeptIndex {
        KeptIndex::new(
            spec,
            index.is_multikey(),
            index.multikey_fields(),
            entries.len() as u64,
            entries.iter().map(|(k, rid)| (k.as_slice(), *rid)),
        )
    }

    #[test]
    fn a_load_from_kept_entries_gives_the_indexes_a_build_gives() {
        let image = image_of_300();
        let mut next = indexes_to_keep(&image);
        let kept: Vec<KeptIndex> = std::iter::from_fn(&mut next).collect();
        assert_eq!(kept.len(), 4, "_id_ and the three others");
        let built = load_image(&image, Vec::new());
        let loaded = load_image(&image, kept);
        assert_eq!(entries(&loaded), entries(&built));
        for (a, b) in loaded.indexes().iter().zip(built.indexes()) {
            assert_eq!(a.multikey_fields(), b.multikey_fields(), "{}", a.spec.name);
        }
        assert!(loaded.indexes()[2].is_multikey_field(0), "tags is multikey");
        assert!(!loaded.indexes()[2].is_multikey_field(1), "_id is not");
    }

    /// The live indexes of a collection with gaps in its record ids (deletes) and documents
    /// changed since they were inserted give the kept entries a build over its snapshot image
    /// gives, and a load from them gives the indexes a build gives; with no gaps too.
    #[test]
    fn kept_from_live_indexes_are_those_a_build_over_the_image_keeps() {
        let mut c = Collection::new("db", "c", Document::new());
        for spec in plain_and_unique_indexes() {
            c.create_index(spec).unwrap();
        }
        for i in 0..300 {
            let mut d = doc! { "_id": i, "a": i % 7, "tags": [i % 3, "x", i % 3] };
            if i % 10 == 0 {
                d.insert("u", i);
            }
            c.insert(d).unwrap();
        }
        let kept_of = |c: &Collection| -> Vec<IndexContents> {
            let image = image_of(c.all_documents().cloned().collect());
            let kept: Vec<KeptIndex> = std::iter::from_fn(indexes_to_keep(&image)).collect();
            assert!(kept_from_live(c) == kept, "the same kept entries");
            let built = load_image(&image, Vec::new());
            let from_live = load_image(&image, kept_from_live(c));
            assert_eq!(entries(&from_live), entries(&built));
            entries(&from_live)
        };
        let dense = kept_of(&c);
        assert_eq!(dense[0].1.len(), 300);

        let gaps: Vec<RecordId> = c
            .records()
            .map(|(rid, _)| rid)
            .filter(|r| r % 3 == 0)
            .collect();
        for rid in gaps {
            c.remove(rid);
        }
        let rid = c.find_by_id(&bson::Bson::Int32(1)).unwrap();
        c.replace(rid, doc! { "_id": 1, "a": 100, "tags": ["changed"] })
            .unwrap();
        c.insert(doc! { "_id": 1000, "a": 1, "u": 1000 }).unwrap();
        let with_gaps = kept_of(&c);
        assert_eq!(with_gaps[0].1.len(), 201, "300 - 100 deleted + 1 inserted");
        assert_eq!(kept_from_live(&c).len(), 4, "_id_ and the three others");
    }

    #[test]
    fn kept_entries_are_used_only_for_the_same_definition_and_when_well_formed() {
        let image = image_of_300();
        let built = load_image(&image, Vec::new());
        let a = &built.indexes()[1];
        assert_eq!(a.spec.name, "a");
        let all: Vec<(Vec<u8>, u64)> = a.entries().collect();
        let definition = a.spec.to_document();
        let a_of = |c: &Collection| c.indexes()[1].entries().collect::<Vec<_>>();

        // Well formed, same definition: loaded as kept (one entry left out shows it).
        let loaded = load_image(&image, vec![kept_with(definition.clone(), a, &all[1..])]);
        assert_eq!(a_of(&loaded), all[1..].to_vec());

        // Another definition (the index was dropped and made again differently): built.
        let mut other = definition.clone();
        other.insert("sparse", true);
        let loaded = load_image(&image, vec![kept_with(other, a, &all[1..])]);
        assert_eq!(a_of(&loaded), all);

        // Out of order, a record the collection does not have, a duplicate of a unique
        // index: built.
        let mut reversed = all.clone();
        reversed.reverse();
        let mut beyond = all.clone();
        beyond.last_mut().unwrap().1 = 301;
        for bad in [reversed, beyond] {
            let loaded = load_image(&image, vec![kept_with(definition.clone(), a, &bad)]);
            assert_eq!(a_of(&loaded), all);
        }
        let u = &built.indexes()[3];
        assert!(u.spec.unique);
        let mut twice: Vec<(Vec<u8>, u64)> = u.entries().collect();
        twice.insert(1, (twice[0].0.clone(), twice[0].1 + 1));
        let loaded = load_image(&image, vec![kept_with(u.spec.to_document(), u, &twice)]);
        assert_eq!(entries(&loaded), entries(&built));
    }

    #[test]
    fn loading_two_documents_with_one_id_keeps_the_later_like_replayed_puts() {
        let stored = [
            doc! { "_id": 1, "v": "old" },
            doc! { "_id": 2 },
            doc! { "_id": 1, "v": "new" },
        ]
        .iter()
        .map(|d| StoredDoc::from_document(d).unwrap())
        .collect();
        let loaded = Collection::load(
            "db",
            "c",
            Document::new(),
            stored,
            Vec::new(),
            false,
            Vec::new(),
        )
        .unwrap();
        assert_eq!(loaded.len(), 2);
        let id = loaded.find_by_id(&bson::Bson::Int32(1)).unwrap();
        assert_eq!(
            loaded.get(id).unwrap().to_document().unwrap(),
            doc! { "_id": 1, "v": "new" }
        );
        // A unique secondary index that the documents violate still fails the load.
        let stored = [doc! { "_id": 1, "u": 5 }, doc! { "_id": 2, "u": 5 }]
            .iter()
            .map(|d| StoredDoc::from_document(d).unwrap())
            .collect();
        let unique =
            IndexSpec::parse(&doc! { "key": { "u": 1 }, "name": "u", "unique": true }).unwrap();
        assert!(Collection::load(
            "db",
            "c",
            Document::new(),
            stored,
            vec![unique],
            false,
            Vec::new()
        )
        .is_err());
    }

    #[test]
    fn parallel_builds_equal_one_at_a_time_and_refuse_duplicates() {
        let specs = || {
            vec![
                IndexSpec::parse(&doc! { "key": { "a": 1 }, "name": "a" }).unwrap(),
                IndexSpec::parse(&doc! { "key": { "b": -1, "_id": 1 }, "name": "b" }).unwrap(),
                IndexSpec::parse(&doc! { "key": { "tags": 1 }, "name": "tags" }).unwrap(),
            ]
        };
        let fill = |c: &mut Collection| {
            for i in 0..200 {
                c.insert(doc! { "_id": i, "a": i % 7, "b": format!("x{i}"), "tags": [i % 3, 9] })
                    .unwrap();
            }
        };
        let mut serial = Collection::new("db", "c", Document::new());
        for spec in specs() {
            serial.create_index(spec).unwrap();
        }
        fill(&mut serial);
        let mut parallel = Collection::new("db", "c", Document::new());
        fill(&mut parallel);
        parallel.create_indexes_parallel(specs()).unwrap();
        let names = |c: &Collection| {
            c.indexes()
                .iter()
                .map(|i| i.spec.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&serial), names(&parallel));
        for (s, p) in serial.indexes().iter().zip(parallel.indexes()) {
            assert_eq!(s.entry_count(), p.entry_count(), "{}", s.spec.name);
            assert_eq!(s.is_multikey(), p.is_multikey(), "{}", s.spec.name);
        }
        let unique =
            IndexSpec::parse(&doc! { "key": { "a": 1 }, "name": "a_u", "unique": true }).unwrap();
        assert!(parallel.create_indexes_parallel(vec![unique]).is_err());
        assert_eq!(parallel.indexes().len(), 4, "nothing added on failure");
    }

    #[test]
    fn building_several_indexes_at_once_reports_the_first_failing_spec_and_adds_none() {
        // Enough documents for the keys to be worked out on several threads.
        let mut c = Collection::new("db", "c", Document::new());
        let docs: Vec<Document> = (0..25_000)
            .map(|i| {
                let mut d = doc! { "_id": i, "a": i % 7, "u": i, "tags": [i % 3, "x"] };
                if i == 24_000 {
                    d.insert("arr", vec![1, 2]);
                }
                d
            })
            .collect();
        assert!(c.insert_all(&docs).is_some());
        let spec = |d: Document| IndexSpec::parse(&d).unwrap();
        let parallel_arrays = spec(doc! { "key": { "tags": 1, "arr": 1 }, "name": "pa" });
        let unique_dup = spec(doc! { "key": { "a": 1 }, "name": "a_u", "unique": true });
        let fine = spec(doc! { "key": { "u": 1 }, "name": "u", "unique": true });
        let err = c
            .create_indexes_parallel(vec![
                fine.clone(),
                unique_dup.clone(),
                parallel_arrays.clone(),
            ])
            .unwrap_err();
        assert_eq!(err.code, crate::error::ErrorCode::DuplicateKey, "{err:?}");
        let err = c
            .create_indexes_parallel(vec![fine.clone(), parallel_arrays, unique_dup])
            .unwrap_err();
        assert_eq!(
            err.code,
            crate::error::ErrorCode::CannotIndexParallelArrays,
            "{err:?}"
        );
        assert_eq!(c.indexes().len(), 1, "nothing added on failure");
        // The same unique index built alone over the same documents succeeds and enforces.
        c.create_indexes_parallel(vec![fine]).unwrap();
        assert_eq!(c.indexes()[1].entry_count(), 25_000);
        assert!(c.insert(doc! { "_id": -1, "u": 5 }).is_err());
    }

    #[test]
    fn one_index_built_in_parallel_equals_create_index_and_fails_like_it() {
        // Enough documents for the keys to be worked out on several threads; a sparse field
        // (as journal replay's `carted_1`) and an array field.
        let docs: Vec<Document> = (0..25_000)
            .map(|i| {
                let mut d = doc! { "_id": i, "a": i % 7, "tags": [i % 3, "x"], "t": "a b" };
                if i % 100 == 0 {
                    d.insert("carted", i);
                }
                d
            })
            .collect();
        let filled = || {
            let mut c = Collection::new("db", "c", Document::new());
            assert!(c.insert_all(&docs).is_some());
            c
        };
        let spec = |d: Document| IndexSpec::parse(&d).unwrap();
        let (mut serial, mut parallel) = (filled(), filled());
        for made in [
            spec(doc! { "key": { "carted": 1 }, "name": "carted_1", "sparse": true }),
            spec(doc! { "key": { "tags": 1, "a": -1 }, "name": "tags_a" }),
            spec(doc! { "key": { "t": "text" }, "name": "t_text" }),
        ] {
            serial.create_index(made.clone()).unwrap();
            parallel.create_index_parallel(made).unwrap();
        }
        assert_eq!(entries(&parallel), entries(&serial));
        assert_eq!(parallel.indexes()[1].entry_count(), 250, "sparse");
        // A duplicate of a unique index and a second text index fail with the same error,
        // adding nothing.
        for refused in [
            spec(doc! { "key": { "a": 1 }, "name": "a_u", "unique": true }),
            spec(doc! { "key": { "a": "text" }, "name": "a_text" }),
        ] {
            let expected = serial.create_index(refused.clone()).unwrap_err();
            let got = parallel.create_index_parallel(refused).unwrap_err();
            assert_eq!((got.code, got.message), (expected.code, expected.message));
        }
        assert_eq!(
            entries(&parallel),
            entries(&serial),
            "nothing added on failure"
        );
    }
}
