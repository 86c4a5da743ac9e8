//! Building several indexes over a loaded collection at once, one thread per index (up to the
//! machine's cores): start-up loads a snapshot's documents first and then builds their indexes
//! in parallel, instead of updating every index for every document on one core.

use super::Collection;
use crate::error::Result;
use crate::index::{Index, IndexSpec};

impl Collection {
    /// Build indexes for `specs` over the documents already stored, in parallel, and add them
    /// in the order given. Fails, adding none, on a duplicate key or an unindexable document
    /// (the first failing spec's error).
    pub fn create_indexes_parallel(&mut self, specs: Vec<IndexSpec>) -> Result<()> {
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
                                    for (record, doc) in docs {
                                        let keys = index.keys_for_stored(doc)?;
                                        index.check_unique(&keys, *record, ns)?;
                                        index.insert(&keys, *record);
                                    }
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
        self.indexes.extend(indexes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document};

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
