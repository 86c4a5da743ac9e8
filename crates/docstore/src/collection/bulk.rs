//! Building several indexes over a loaded collection at once, one thread per index (up to the
//! machine's cores): start-up loads a snapshot's documents first and then builds all their
//! indexes, `_id_` included, in parallel, each from its sorted keys, instead of updating every
//! index for every document on one core.

use super::{check_size, Collection, StoredDoc};
use crate::error::Result;
use crate::index::{Index, IndexSpec};
use bson::Document;

impl Collection {
    /// A collection holding a snapshot's documents (in natural order) and its secondary
    /// indexes. The documents are taken as they are and every index is built afterwards; if
    /// that finds two documents with one `_id` (a snapshot never holds them, but replaying
    /// puts would keep the later one), the documents are loaded again one `put` at a time.
    pub fn load(
        db: &str,
        name: &str,
        options: Document,
        docs: Vec<StoredDoc>,
        specs: Vec<IndexSpec>,
    ) -> Result<Collection> {
        let mut coll = Collection::new(db, name, options.clone());
        for doc in &docs {
            check_size(doc.len())?;
        }
        coll.data_bytes = docs.iter().map(|d| d.len() as u64).sum();
        coll.next_record = docs.len() as u64 + 1;
        coll.docs = (1..).zip(docs).collect();
        coll.indexes.clear();
        let mut all = Vec::with_capacity(specs.len() + 1);
        all.push(IndexSpec::id_index());
        all.extend(specs.iter().cloned());
        match coll.build_indexes(all) {
            Ok(indexes) => {
                coll.indexes = indexes;
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

    /// Build indexes for `specs` over the documents already stored, in parallel, and add them
    /// in the order given. Fails, adding none, on a duplicate key or an unindexable document
    /// (the first failing spec's error).
    pub fn create_indexes_parallel(&mut self, specs: Vec<IndexSpec>) -> Result<()> {
        let indexes = self.build_indexes(specs)?;
        self.indexes.extend(indexes);
        Ok(())
    }

    /// Indexes for `specs` over the stored documents, built in parallel, in the order given.
    fn build_indexes(&self, specs: Vec<IndexSpec>) -> Result<Vec<Index>> {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(specs.len().max(1));
        let ns = self.namespace();
        let docs = &self.docs;
        let mut pending: Vec<(usize, IndexSpec)> = specs.into_iter().enumerate().collect();
        let mut built: Vec<(usize, Result<Index>)> = Vec::with_capacity(pending.len());
        // Each thread takes every `threads`-th spec.
        let mut shares: Vec<Vec<(usize, IndexSpec)>> = (0..threads).map(|_| Vec::new()).collect();
        for (n, item) in pending.drain(..).enumerate() {
            shares[n % threads].push(item);
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = shares
                .into_iter()
                .map(|share| {
                    let ns = &ns;
                    scope.spawn(move || {
                        share
                            .into_iter()
                            .map(|(position, spec)| {
                                let build = || -> Result<Index> {
                                    let mut index = Index::new(spec)?;
                                    index.build(docs.iter().map(|(r, d)| (*r, d)), ns)?;
                                    Ok(index)
                                };
                                (position, build())
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for handle in handles {
                match handle.join() {
                    Ok(results) => built.extend(results),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        });
        built.sort_by_key(|(position, _)| *position);
        let mut indexes = Vec::with_capacity(built.len());
        for (_, index) in built {
            indexes.push(index?);
        }
        Ok(indexes)
    }
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

    #[test]
    fn loading_a_snapshot_builds_the_same_indexes_as_inserting_one_by_one() {
        let specs = || {
            vec![
                IndexSpec::parse(&doc! { "key": { "a": 1 }, "name": "a" }).unwrap(),
                IndexSpec::parse(&doc! { "key": { "tags": 1, "_id": -1 }, "name": "t" }).unwrap(),
                IndexSpec::parse(
                    &doc! { "key": { "u": 1 }, "name": "u", "unique": true, "sparse": true },
                )
                .unwrap(),
            ]
        };
        let docs: Vec<Document> = (0..300)
            .map(|i| {
                let mut d = doc! { "_id": i, "a": i % 7, "tags": [i % 3, "x", i % 3] };
                if i % 10 == 0 {
                    d.insert("u", i);
                }
                d
            })
            .collect();
        let mut one_by_one = Collection::new("db", "c", Document::new());
        for spec in specs() {
            one_by_one.create_index(spec).unwrap();
        }
        for d in &docs {
            one_by_one.insert(d.clone()).unwrap();
        }
        let stored = docs
            .iter()
            .map(|d| StoredDoc::from_document(d).unwrap())
            .collect();
        let loaded = Collection::load("db", "c", Document::new(), stored, specs()).unwrap();
        assert_eq!(entries(&loaded), entries(&one_by_one));
        assert_eq!(loaded.len(), 300);
        assert_eq!(loaded.data_size(), one_by_one.data_size());
        let id = loaded.find_by_id(&bson::Bson::Int32(42)).unwrap();
        assert_eq!(loaded.get(id).unwrap().to_document().unwrap(), docs[42]);
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
        let loaded = Collection::load("db", "c", Document::new(), stored, Vec::new()).unwrap();
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
        assert!(Collection::load("db", "c", Document::new(), stored, vec![unique]).is_err());
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
}
