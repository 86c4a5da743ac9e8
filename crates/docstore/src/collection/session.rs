//! A write session: the only way commands change a collection. Every mutation goes through a
//! method here, which applies it to the collection in memory and records the matching journal
//! entry, so a command cannot change a document, an index or a whole collection without
//! persisting it. [`Catalog::write`](crate::catalog::Catalog::write) opens a session under the
//! collection's write lock and appends what it recorded to the journal when the command's
//! closure returns. A store kept only in memory has no journal: its sessions note that
//! something changed but build no entries.
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
    /// Whether changes are recorded as journal entries: not for a store kept only in memory,
    /// whose journal takes nothing ([`Storage::keeps_journal`]); building an entry per document
    /// (two names copied, the stored bytes looked up) was a share of a batch insert's cost.
    ///
    /// [`Storage::keeps_journal`]: crate::storage::Storage::keeps_journal
    journaled: bool,
    /// Whether anything changed (recorded or not).
    changed: bool,
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
    /// A session over `coll` with nothing recorded yet, recording journal entries.
    #[cfg(test)]
    pub(crate) fn new(coll: &'a mut Collection) -> WriteSession<'a> {
        WriteSession::journaling(coll, true)
    }

    /// A session over `coll` with nothing recorded yet; with `journaled` false the changes are
    /// only noted ([`WriteSession::into_changes`]), for a store without a journal.
    pub(crate) fn journaling(coll: &'a mut Collection, journaled: bool) -> WriteSession<'a> {
        WriteSession {
            coll,
            ops: Vec::new(),
            journaled,
            changed: false,
            bypass_validation: false,
        }
    }

    /// Note a change, and record its journal entry (made by `op` from the collection) when the
    /// session journals.
    fn journal(&mut self, op: impl FnOnce(&Collection) -> JournalOp) {
        self.changed = true;
        if self.journaled {
            let op = op(self.coll);
            self.ops.push(op);
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
    #[cfg(test)]
    pub(crate) fn into_ops(self) -> Vec<JournalOp> {
        self.ops
    }

    /// Whether anything changed, and the journal entries of the changes (none when the
    /// session does not journal).
    pub(crate) fn into_changes(self) -> (bool, Vec<JournalOp>) {
        (self.changed, self.ops)
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
        if self.journaled {
            self.ops.reserve(records.len());
        }
        for record in &records {
            self.record_put(*record)?;
        }
        Ok(Some(records.len()))
    }

    /// Journal the document now stored at `record` (sharing its bytes).
    fn record_put(&mut self, record: RecordId) -> Result<()> {
        self.changed = true;
        if !self.journaled {
            return Ok(());
        }
        let stored = self
            .coll
            .get(record)
            .cloned()
            .ok_or_else(|| crate::error::Error::internal("a stored record vanished"))?;
        self.ops.push(JournalOp::Put {
            db: self.coll.db.clone(),
            coll: self.coll.name.clone(),
            doc: stored,
        });
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
        self.journal(|c| JournalOp::Delete {
            db: c.db.clone(),
            coll: c.name.clone(),
            // Stored bytes were validated when stored: `_id` decodes.
            id: doc.id().unwrap_or(Bson::Null),
        });
        Some(doc)
    }

    /// Build a secondary index; journaled as a `CreateIndex`.
    pub(crate) fn create_index(&mut self, spec: IndexSpec) -> Result<()> {
        let document = spec.to_document();
        self.coll.create_index(spec)?;
        self.journal(|c| JournalOp::CreateIndex {
            db: c.db.clone(),
            coll: c.name.clone(),
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
            self.journal(|c| JournalOp::CreateIndex {
                db: c.db.clone(),
                coll: c.name.clone(),
                spec,
            });
        }
        Ok(was)
    }

    fn record_dropped_index(&mut self, name: &str) {
        self.journal(|c| JournalOp::DropIndex {
            db: c.db.clone(),
            coll: c.name.clone(),
            name: name.to_string(),
        });
    }

    /// Replace the collection's options (`collMod`); journaled as a `CreateCollection` of the
    /// existing collection, which replay applies to it in place, documents kept.
    pub(crate) fn set_options(&mut self, options: Document) {
        self.journal(|c| JournalOp::CreateCollection {
            db: c.db.clone(),
            coll: c.name.clone(),
            options: options.clone(),
        });
        self.coll.set_options(options);
    }

    /// Swap in a whole new collection (`$out`): journaled as dropping and re-creating the
    /// collection with `fresh`'s options, then its indexes, then its documents in natural order.
    pub(crate) fn replace_contents(&mut self, fresh: Collection) {
        self.changed = true;
        if !self.journaled {
            *self.coll = fresh;
            return;
        }
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
    fn a_session_without_a_journal_notes_changes_and_records_none() {
        let mut coll = Collection::new("shop", "items", Document::new());
        let session = WriteSession::journaling(&mut coll, false);
        assert_eq!(session.into_changes(), (false, Vec::new()));
        let mut session = WriteSession::journaling(&mut coll, false);
        assert!(session.insert(doc! { "_id": 1, "n": 1 }).is_ok());
        assert_eq!(session.into_changes(), (true, Vec::new()));
        let mut session = WriteSession::journaling(&mut coll, false);
        assert!(session.insert(doc! { "_id": 1, "n": 2 }).is_err());
        assert_eq!(session.into_changes(), (false, Vec::new()));
        let mut session = WriteSession::journaling(&mut coll, false);
        let stored = StoredDoc::from_document(&doc! { "_id": 2, "n": 2 }).unwrap();
        let doc = doc! { "_id": 3, "n": 3 };
        let encoded = StoredDoc::from_document(&doc).unwrap();
        assert_eq!(
            session
                .insert_all(&[None, Some(&doc)], vec![stored, encoded])
                .unwrap(),
            Some(2)
        );
        assert_eq!(session.into_changes(), (true, Vec::new()));
        let mut session = WriteSession::journaling(&mut coll, false);
        let first = coll_records(&session)[0];
        assert!(session.remove(first).is_some());
        assert_eq!(session.into_changes(), (true, Vec::new()));
        assert_eq!(coll.all_documents().count(), 2);
    }

    fn coll_records(session: &WriteSession<'_>) -> Vec<RecordId> {
        session.records().map(|(record, _)| record).collect()
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
