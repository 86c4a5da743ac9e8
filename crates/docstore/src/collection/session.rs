//! A write session: the only way commands change a collection. Every mutation goes through a
//! method here, which applies it to the collection in memory and records the matching journal
//! entry, so a command cannot change a document, an index or a whole collection without
//! persisting it. [`Catalog::write`](crate::catalog::Catalog::write) opens a session under the
//! collection's write lock and appends what it recorded to the journal when the command's
//! closure returns.
//!
//! Reads go through `Deref` to the [`Collection`]; there is deliberately no `DerefMut`.

use super::{Collection, StoredDoc};
use crate::error::Result;
use crate::index::{IndexSpec, RecordId};
use crate::storage::JournalOp;
use bson::{Bson, Document};
use std::ops::Deref;

/// A collection borrowed for writing, with the journal entries of the changes made so far.
pub(crate) struct WriteSession<'a> {
    coll: &'a mut Collection,
    ops: Vec<JournalOp>,
    /// `bypassDocumentValidation: true`: the collection's validator is not consulted.
    bypass_validation: bool,
}

impl Deref for WriteSession<'_> {
    type Target = Collection;

    fn deref(&self) -> &Collection {
        self.coll
    }
}

impl<'a> WriteSession<'a> {
    /// A session over `coll` with nothing recorded yet.
    pub(crate) fn new(coll: &'a mut Collection) -> WriteSession<'a> {
        WriteSession {
            coll,
            ops: Vec::new(),
            bypass_validation: false,
        }
    }

    /// Skip the collection's validator for the rest of this session
    /// (`bypassDocumentValidation: true`).
    pub(crate) fn bypass_validation(&mut self, bypass: bool) {
        self.bypass_validation = bypass;
    }

    /// The validator this session's writes must satisfy, if any.
    fn active_validator(&self) -> Option<&super::validation::Validator> {
        self.coll
            .validator()
            .filter(|v| !self.bypass_validation && !v.is_off())
    }

    /// A time-series collection's measurements must carry a date in the time field; unlike a
    /// validator, `bypassDocumentValidation` does not lift this (nor does it in mongod).
    fn check_measurement(&self, doc: &Document) -> Result<()> {
        match self.coll.timeseries() {
            Some(ts) => ts.check_measurement(doc).map(|_| ()),
            None => Ok(()),
        }
    }

    fn validate_insert(&self, doc: &Document) -> Result<()> {
        self.check_measurement(doc)?;
        match self.active_validator() {
            Some(v) => v.check_insert(&self.coll.namespace(), doc),
            None => Ok(()),
        }
    }

    fn validate_update(
        &self,
        record: RecordId,
        old: Option<&Document>,
        new: &Document,
    ) -> Result<()> {
        self.check_measurement(new)?;
        let Some(v) = self.active_validator() else {
            return Ok(());
        };
        let ns = self.coll.namespace();
        if !v.needs_old_document() {
            return v.check_update(&ns, new, new);
        }
        let decoded;
        let old = match old {
            Some(old) => old,
            None => {
                decoded = self
                    .coll
                    .get(record)
                    .ok_or_else(|| crate::error::Error::internal("a stored record vanished"))?
                    .to_document()?;
                &decoded
            }
        };
        v.check_update(&ns, old, new)
    }

    /// A capped collection over its limits loses its oldest documents until it fits
    /// (`convertToCapped`); each removal is journaled.
    pub(crate) fn enforce_cap(&mut self) {
        self.trim_capped(RecordId::MAX);
    }

    /// A capped collection over its limits loses its oldest documents (never `keep`, the one
    /// just inserted); each removal is journaled.
    fn trim_capped(&mut self, keep: RecordId) {
        let Some(cap) = self.coll.capped() else {
            return;
        };
        loop {
            let over = self.coll.data_size() > cap.max_bytes
                || cap.max_docs.is_some_and(|m| self.coll.len() as u64 > m);
            if !over {
                break;
            }
            let oldest = self.coll.records().next().map(|(rid, _)| rid);
            match oldest {
                Some(oldest) if oldest != keep => {
                    self.remove(oldest);
                }
                _ => break,
            }
        }
    }

    /// The journal entries of the changes made, in the order they were made.
    pub(crate) fn into_ops(self) -> Vec<JournalOp> {
        self.ops
    }

    fn put_op(&self, doc: StoredDoc) -> JournalOp {
        JournalOp::Put {
            db: self.coll.db.clone(),
            coll: self.coll.name.clone(),
            doc,
        }
    }

    /// Insert a document (already given its `_id`); journaled as a `Put`.
    pub(crate) fn insert(&mut self, doc: Document) -> Result<RecordId> {
        self.validate_insert(&doc)?;
        let record = self.coll.insert(doc)?;
        self.record_put(record)?;
        self.trim_capped(record);
        Ok(record)
    }

    /// [`Collection::insert_all_encoded`]: every document inserted and journaled, or (`None`)
    /// none.
    pub(crate) fn insert_all(
        &mut self,
        docs: &[Option<&Document>],
        stored: Vec<StoredDoc>,
    ) -> Result<Option<usize>> {
        // With a validator, a cap or a time field to check, documents go in one at a time (the caller's fallback), so
        // each is checked, or makes room, in turn.
        if self.active_validator().is_some()
            || self.coll.capped().is_some()
            || self.coll.timeseries().is_some()
        {
            return Ok(None);
        }
        let Some(records) = self.coll.insert_all_encoded(docs, stored) else {
            return Ok(None);
        };
        for record in &records {
            self.record_put(*record)?;
        }
        Ok(Some(records.len()))
    }

    /// Journal the document now stored at `record` (sharing its bytes).
    fn record_put(&mut self, record: RecordId) -> Result<()> {
        let stored = self
            .coll
            .get(record)
            .cloned()
            .ok_or_else(|| crate::error::Error::internal("a stored record vanished"))?;
        self.ops.push(self.put_op(stored));
        Ok(())
    }

    /// [`WriteSession::insert`] of a document encoded beforehand with
    /// [`Collection::encode_for_insert`](crate::collection::Collection::encode_for_insert).
    pub(crate) fn insert_encoded(&mut self, doc: &Document, stored: StoredDoc) -> Result<RecordId> {
        self.validate_insert(doc)?;
        let record = self.coll.insert_encoded(doc, stored)?;
        self.record_put(record)?;
        self.trim_capped(record);
        Ok(record)
    }

    /// [`WriteSession::insert_encoded`] of a document kept as the client sent it
    /// ([`StoredDoc::as_sent`], `_id` first): keyed from its bytes, decoded only for a
    /// validator or a time-series check, which read the whole document.
    pub(crate) fn insert_sent(&mut self, stored: StoredDoc) -> Result<RecordId> {
        if self.active_validator().is_some() || self.coll.timeseries().is_some() {
            let doc = stored.to_document()?;
            return self.insert_encoded(&doc, stored);
        }
        let record = self.coll.insert_stored(stored)?;
        self.record_put(record)?;
        self.trim_capped(record);
        Ok(record)
    }

    /// Replace the document at `record`; journaled as a `Put` of the new version.
    pub(crate) fn replace(&mut self, record: RecordId, new_doc: Document) -> Result<()> {
        self.validate_update(record, None, &new_doc)?;
        self.coll.replace(record, new_doc)?;
        self.record_put(record)
    }

    /// [`Collection::update_record`]; journaled as a `Put` of the new version.
    pub(crate) fn update_record(
        &mut self,
        record: RecordId,
        old_doc: &Document,
        new_doc: &Document,
        touched: Option<&[String]>,
    ) -> Result<()> {
        self.validate_update(record, Some(old_doc), new_doc)?;
        self.coll.update_record(record, old_doc, new_doc, touched)?;
        self.record_put(record)
    }

    /// Remove the document at `record`, if any; journaled as a `Delete` by `_id`.
    pub(crate) fn remove(&mut self, record: RecordId) -> Option<StoredDoc> {
        let doc = self.coll.remove(record)?;
        self.ops.push(JournalOp::Delete {
            db: self.coll.db.clone(),
            coll: self.coll.name.clone(),
            // Stored bytes were validated when stored: `_id` decodes.
            id: doc.id().unwrap_or(Bson::Null),
        });
        Some(doc)
    }

    /// Build a secondary index; journaled as a `CreateIndex`.
    pub(crate) fn create_index(&mut self, spec: IndexSpec) -> Result<()> {
        let document = spec.to_document();
        self.coll.create_index(spec)?;
        self.ops.push(JournalOp::CreateIndex {
            db: self.coll.db.clone(),
            coll: self.coll.name.clone(),
            spec: document,
        });
        Ok(())
    }

    /// Drop one index by name; journaled as a `DropIndex`.
    pub(crate) fn drop_index(&mut self, name: &str) -> Result<IndexSpec> {
        let spec = self.coll.drop_index(name)?;
        self.record_dropped_index(&spec.name);
        Ok(spec)
    }

    /// Drop every index but `_id`'s; each is journaled as a `DropIndex`.
    pub(crate) fn drop_all_indexes(&mut self) -> Vec<String> {
        let names = self.coll.drop_all_indexes();
        for name in &names {
            self.record_dropped_index(name);
        }
        names
    }

    /// Hide or unhide the index `name` (`collMod`); returns whether it was hidden before.
    /// Journaled, when it changes, as dropping the index and creating it again with the new
    /// spec: replay rebuilds it (the same entries), and the journal keeps its record kinds.
    pub(crate) fn set_index_hidden(&mut self, name: &str, hidden: bool) -> Result<bool> {
        let Some(index) = self.coll.indexes.iter_mut().find(|i| i.spec.name == name) else {
            return Err(crate::error::Error::new(
                crate::error::ErrorCode::IndexNotFound,
                format!("cannot find index {name}"),
            ));
        };
        let was = index.spec.hidden;
        if was != hidden {
            index.spec.hidden = hidden;
            let spec = index.spec.to_document();
            self.record_dropped_index(name);
            self.ops.push(JournalOp::CreateIndex {
                db: self.coll.db.clone(),
                coll: self.coll.name.clone(),
                spec,
            });
        }
        Ok(was)
    }

    fn record_dropped_index(&mut self, name: &str) {
        self.ops.push(JournalOp::DropIndex {
            db: self.coll.db.clone(),
            coll: self.coll.name.clone(),
            name: name.to_string(),
        });
    }

    /// Replace the collection's options (`collMod`); journaled as a `CreateCollection` of the
    /// existing collection, which replay applies to it in place, documents kept.
    pub(crate) fn set_options(&mut self, options: Document) {
        self.ops.push(JournalOp::CreateCollection {
            db: self.coll.db.clone(),
            coll: self.coll.name.clone(),
            options: options.clone(),
        });
        self.coll.set_options(options);
    }

    /// Swap in a whole new collection (`$out`): journaled as dropping and re-creating the
    /// collection with `fresh`'s options, then its indexes, then its documents in natural order.
    pub(crate) fn replace_contents(&mut self, fresh: Collection) {
        let (db, coll) = (self.coll.db.clone(), self.coll.name.clone());
        self.ops.push(JournalOp::DropCollection {
            db: db.clone(),
            coll: coll.clone(),
        });
        self.ops.push(JournalOp::CreateCollection {
            db: db.clone(),
            coll: coll.clone(),
            options: fresh.options.clone(),
        });
        for index in &fresh.indexes()[1..] {
            self.ops.push(JournalOp::CreateIndex {
                db: db.clone(),
                coll: coll.clone(),
                spec: index.spec.to_document(),
            });
        }
        for doc in fresh.all_documents() {
            self.ops.push(JournalOp::Put {
                db: db.clone(),
                coll: coll.clone(),
                doc: doc.clone(),
            });
        }
        *self.coll = fresh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn put(doc: Document) -> JournalOp {
        JournalOp::Put {
            db: "shop".into(),
            coll: "items".into(),
            doc: StoredDoc::from_document(&doc).unwrap(),
        }
    }

    #[test]
    fn every_change_is_recorded_and_failed_ones_are_not() {
        let mut coll = Collection::new("shop", "items", Document::new());
        let mut session = WriteSession::new(&mut coll);
        let a = session.insert(doc! { "_id": 1, "n": 1 }).unwrap();
        assert!(session.insert(doc! { "_id": 1, "n": 2 }).is_err());
        session.replace(a, doc! { "_id": 1, "n": 3 }).unwrap();
        let spec = IndexSpec::parse(&doc! { "key": { "n": 1 }, "name": "n_1" }).unwrap();
        session.create_index(spec.clone()).unwrap();
        session.drop_index("n_1").unwrap();
        assert!(session.drop_index("n_1").is_err());
        assert!(session.remove(a).is_some());
        assert!(session.remove(a).is_none());
        let ops = session.into_ops();
        assert_eq!(
            ops,
            vec![
                put(doc! { "_id": 1, "n": 1 }),
                put(doc! { "_id": 1, "n": 3 }),
                JournalOp::CreateIndex {
                    db: "shop".into(),
                    coll: "items".into(),
                    spec: spec.to_document(),
                },
                JournalOp::DropIndex {
                    db: "shop".into(),
                    coll: "items".into(),
                    name: "n_1".into(),
                },
                JournalOp::Delete {
                    db: "shop".into(),
                    coll: "items".into(),
                    id: Bson::Int32(1),
                },
            ]
        );
        assert_eq!(coll.all_documents().count(), 0);
    }

    #[test]
    fn replacing_the_contents_journals_a_rebuild_in_natural_order() {
        let mut coll = Collection::new("shop", "items", doc! { "validationLevel": "off" });
        coll.insert(doc! { "_id": 0 }).unwrap();
        let mut fresh = Collection::new("shop", "items", doc! { "validationLevel": "off" });
        let spec = IndexSpec::parse(&doc! { "key": { "n": 1 }, "name": "n_1" }).unwrap();
        fresh.create_index(spec.clone()).unwrap();
        fresh.insert(doc! { "_id": 2, "n": 1 }).unwrap();
        fresh.insert(doc! { "_id": 1, "n": 2 }).unwrap();
        let mut session = WriteSession::new(&mut coll);
        session.replace_contents(fresh);
        let ops = session.into_ops();
        assert_eq!(ops.len(), 5);
        assert_eq!(
            ops[0],
            JournalOp::DropCollection {
                db: "shop".into(),
                coll: "items".into()
            }
        );
        assert!(
            matches!(&ops[1], JournalOp::CreateCollection { options, .. }
            if options == &doc! { "validationLevel": "off" })
        );
        assert!(
            matches!(&ops[2], JournalOp::CreateIndex { spec: s, .. } if s == &spec.to_document())
        );
        assert_eq!(ops[3], put(doc! { "_id": 2, "n": 1 }));
        assert_eq!(ops[4], put(doc! { "_id": 1, "n": 2 }));
        assert_eq!(coll.all_documents().count(), 2);
    }
}
