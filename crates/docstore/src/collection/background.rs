//! Indexes built in the background after start-up.
//!
//! Loading a snapshot rebuilds every index from the documents, and at a million products the
//! text index alone holds more entries than the other indexes together. So start-up builds a
//! large collection's text index after the store starts answering: until it is ready it is
//! listed (and written into snapshots and backups) like any index, but it holds no entries,
//! writes give it no keys, and a `$text` query is refused with "text index required" and a
//! note that it is being built, as MongoDB refuses one while its text index build is in
//! progress. Nothing else can use a text index, so every other query runs exactly as before.
//!
//! The build takes a copy of the document pointers under the collection's write lock, keys
//! them with no lock held (on one thread, leaving the other cores to requests), and then,
//! under the write lock again, re-keys every record written since the copy and swaps the
//! finished index in. Like MongoDB's hybrid builds, the writes of that window are checked
//! against the index only then: a document the text index cannot take (a `language` it does
//! not know) is left out of it and logged.

use super::{Collection, StoredDoc};
use crate::index::{Index, IndexSpec, RecordId};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A collection as the catalog shares it.
type Shared = Arc<parking_lot::RwLock<Collection>>;

/// From this many documents, a text index read from a snapshot is built in the background.
const BACKGROUND_MIN: usize = 20_000;

/// Whether start-up builds `spec`'s index over `docs` documents in the background.
pub(super) fn in_background(spec: &IndexSpec, docs: usize) -> bool {
    spec.text.is_some() && !spec.unique && docs >= BACKGROUND_MIN
}

/// The documents a background build keys, as they were when it started.
pub(crate) struct BuildJob {
    ns: String,
    specs: Vec<IndexSpec>,
    docs: Vec<(RecordId, StoredDoc)>,
}

impl BuildJob {
    /// Build the indexes over the copied documents, on `threads` threads. An index that
    /// fails is logged and left out.
    fn run(&self, threads: usize) -> Vec<Index> {
        let mut indexes = Vec::new();
        for spec in &self.specs {
            match Index::new(spec.clone()) {
                Ok(index) => indexes.push(index),
                Err(e) => tracing::error!(ns = self.ns, index = spec.name, "{e}"),
            }
        }
        let docs: Vec<(RecordId, &StoredDoc)> = self.docs.iter().map(|(r, d)| (*r, d)).collect();
        let results = crate::index::build_all(&mut indexes, &docs, &self.ns, threads);
        indexes
            .into_iter()
            .zip(results)
            .filter_map(|(index, result)| match result {
                Ok(()) => Some(index),
                Err(e) => {
                    tracing::error!(
                        ns = self.ns,
                        index = index.spec.name,
                        "building the index after start-up failed, it stays unusable: {e}"
                    );
                    None
                }
            })
            .collect()
    }

    /// The document `record` held when the build started.
    fn before(&self, record: RecordId) -> Option<&StoredDoc> {
        self.docs
            .binary_search_by_key(&record, |(r, _)| *r)
            .ok()
            .map(|i| &self.docs[i].1)
    }
}

impl Collection {
    /// Remember that `record` changed, while a background build needs to know.
    pub(super) fn note_change(&mut self, record: RecordId) {
        if let Some(changed) = &mut self.changed {
            changed.insert(record);
        }
    }

    /// Whether any index is still being built in the background.
    pub(crate) fn has_building_indexes(&self) -> bool {
        self.indexes.iter().any(Index::is_building)
    }

    /// Start building the indexes still waiting: a copy of the document pointers, from which
    /// on every changed record is remembered for [`Collection::finish_background_build`].
    /// `None` when nothing waits or a build is already under way.
    pub(crate) fn start_background_build(&mut self) -> Option<BuildJob> {
        let specs: Vec<IndexSpec> = self
            .indexes
            .iter()
            .filter(|i| i.is_building())
            .map(|i| i.spec.clone())
            .collect();
        if specs.is_empty() || self.dropped || self.changed.is_some() {
            return None;
        }
        self.changed = Some(BTreeSet::new());
        Some(BuildJob {
            ns: self.namespace(),
            specs,
            docs: self.records().map(|(r, d)| (r, d.clone())).collect(),
        })
    }

    /// Swap in the indexes built from `job`'s copy, once brought up to date with the records
    /// changed since. An index dropped meanwhile (or replaced by one built at once) is left
    /// out. Returns how many indexes became ready.
    pub(crate) fn finish_background_build(&mut self, job: &BuildJob, built: Vec<Index>) -> usize {
        let changed = self.changed.take().unwrap_or_default();
        let ns = self.namespace();
        let mut ready = 0;
        for mut index in built {
            let Some(slot) = self
                .indexes
                .iter()
                .position(|i| i.is_building() && i.spec.name == index.spec.name)
            else {
                continue;
            };
            for &record in &changed {
                if let Some(old) = job.before(record) {
                    match index.keys_for_stored(old) {
                        Ok(keys) => index.remove(&keys, record),
                        Err(e) => tracing::error!(ns, index = index.spec.name, "{e}"),
                    }
                }
                if let Some(new) = self.docs.get(&record) {
                    match index.keys_for_stored(new) {
                        Ok(keys) => index.insert(&keys, record),
                        Err(e) => tracing::error!(
                            ns,
                            index = index.spec.name,
                            "a document written while the index was built cannot be indexed \
                             and is left out of it: {e}"
                        ),
                    }
                }
            }
            self.indexes[slot] = index;
            ready += 1;
        }
        ready
    }
}

/// Build, one collection after another on a thread of their own, every index the recovered
/// `collections` left for the background.
///
/// `then`, if given, runs on the same thread once the builds are done (keeping a snapshot's
/// indexes, see `Catalog::recover`); it is skipped if the thread cannot be started.
pub(crate) fn spawn_background_builds(
    collections: Vec<Shared>,
    then: Option<Box<dyn FnOnce() + Send>>,
) {
    if collections.is_empty() && then.is_none() {
        return;
    }
    let copy = collections.clone();
    let spawned = std::thread::Builder::new()
        .name("docstore-index-build".into())
        .spawn(move || {
            build_each(copy, 1);
            if let Some(then) = then {
                then();
            }
        });
    if let Err(e) = spawned {
        // Without the thread the indexes would never become usable: build them now.
        tracing::warn!("cannot start a thread for the index build, building now: {e}");
        build_each(collections, crate::index::cores());
    }
}

fn build_each(collections: Vec<Shared>, threads: usize) {
    for handle in collections {
        let Some(job) = handle.write().start_background_build() else {
            continue;
        };
        let started = std::time::Instant::now();
        let built = job.run(threads);
        let ready = handle.write().finish_background_build(&job, built);
        tracing::info!(
            ns = job.ns,
            indexes = ready,
            documents = job.docs.len(),
            build_ms = started.elapsed().as_millis() as u64,
            "indexes built in the background are ready"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collection::QuerySpec;
    use crate::error::ErrorCode;
    use crate::query::Filter;
    use bson::{doc, Bson, Document};

    const WORDS: [&str; 5] = ["river", "mountain", "lantern", "harbour", "meadow"];

    fn specs() -> Vec<IndexSpec> {
        vec![
            IndexSpec::parse(&doc! { "key": { "n": 1 }, "name": "n_1" }).unwrap(),
            IndexSpec::parse(&doc! { "key": { "body": "text" }, "name": "body_text" }).unwrap(),
        ]
    }

    fn loaded(background: bool) -> Collection {
        let docs = (0..BACKGROUND_MIN as i32)
            .map(|i| {
                let body = format!("{} {}", WORDS[i as usize % 5], WORDS[i as usize % 3]);
                StoredDoc::from_document(&doc! { "_id": i, "n": i, "body": body }).unwrap()
            })
            .collect();
        Collection::load(
            "db",
            "c",
            Document::new(),
            docs,
            specs(),
            background,
            Vec::new(),
        )
        .unwrap()
    }

    fn search(c: &Collection, words: &str) -> crate::error::Result<usize> {
        let filter = doc! { "$text": { "$search": words } };
        let parsed = Filter::parse(&filter).unwrap();
        c.query(&QuerySpec::filter_only(&parsed, &filter))
            .map(|(hits, _)| hits.len())
    }

    /// Every (key, record) a fresh build of `name` over the collection's documents holds.
    fn expected_entries(c: &Collection, name: &str) -> Vec<(Vec<u8>, RecordId)> {
        let spec = specs().into_iter().find(|s| s.name == name).unwrap();
        let index = Index::new(spec).unwrap();
        let mut entries: Vec<(Vec<u8>, RecordId)> = c
            .records()
            .flat_map(|(rid, doc)| {
                let keys = index.keys_for_stored(doc).unwrap();
                keys.into_iter().map(move |k| (k, rid))
            })
            .collect();
        entries.sort();
        entries.dedup();
        entries
    }

    fn entries(c: &Collection, name: &str) -> Vec<(Vec<u8>, RecordId)> {
        let index = c.indexes().iter().find(|i| i.spec.name == name).unwrap();
        index.entries().map(|(k, r)| (k.to_vec(), r)).collect()
    }

    #[test]
    fn a_large_text_index_is_built_after_loading_and_takes_the_writes_made_meanwhile() {
        let mut c = loaded(true);
        assert!(c.has_building_indexes());
        // Listed like any index; only the text index waits.
        let names: Vec<&str> = c.indexes().iter().map(|i| i.spec.name.as_str()).collect();
        assert_eq!(names, ["_id_", "n_1", "body_text"]);
        assert!(!c.indexes()[1].is_building());
        let err = search(&c, "river").unwrap_err();
        assert_eq!(err.code, ErrorCode::IndexNotFound);
        assert!(
            err.message.contains("text index required"),
            "{}",
            err.message
        );
        assert!(err.message.contains("still being built"), "{}", err.message);
        // A write before the build starts is in its copy.
        c.insert(doc! { "_id": -1, "n": -1, "body": "lantern early" })
            .unwrap();

        let job = c.start_background_build().unwrap();
        assert!(c.start_background_build().is_none(), "one build at a time");
        let built = job.run(2);
        // Writes while the build runs: an insert, a change of words, a removal.
        c.insert(doc! { "_id": -2, "n": -2, "body": "harbour late" })
            .unwrap();
        let changed = c.find_by_id(&Bson::Int32(5)).unwrap();
        c.replace(changed, doc! { "_id": 5, "n": 5, "body": "zeppelin" })
            .unwrap();
        let removed = c.find_by_id(&Bson::Int32(7)).unwrap();
        c.remove(removed).unwrap();
        // Queries not needing the text index ran all along.
        assert_eq!(c.len(), BACKGROUND_MIN + 1);

        assert_eq!(c.finish_background_build(&job, built), 1);
        assert!(!c.has_building_indexes());
        assert_eq!(entries(&c, "body_text"), expected_entries(&c, "body_text"));
        assert_eq!(entries(&c, "n_1"), expected_entries(&c, "n_1"));
        assert_eq!(search(&c, "zeppelin").unwrap(), 1);
        assert_eq!(search(&c, "early late").unwrap(), 2);
        // Loading without the background builds the same index at once.
        assert!(!loaded(false).has_building_indexes());
    }

    #[test]
    fn an_index_dropped_during_its_build_stays_dropped() {
        let mut c = loaded(true);
        let job = c.start_background_build().unwrap();
        let built = job.run(1);
        c.drop_index("body_text").unwrap();
        assert_eq!(c.finish_background_build(&job, built), 0);
        let names: Vec<&str> = c.indexes().iter().map(|i| i.spec.name.as_str()).collect();
        assert_eq!(names, ["_id_", "n_1"]);
    }

    #[test]
    fn small_collections_build_every_index_at_once() {
        let docs = vec![StoredDoc::from_document(&doc! { "_id": 1, "body": "river" }).unwrap()];
        let c =
            Collection::load("db", "c", Document::new(), docs, specs(), true, Vec::new()).unwrap();
        assert!(!c.has_building_indexes());
        assert_eq!(search(&c, "river").unwrap(), 1);
    }
}
