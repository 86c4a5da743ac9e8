//! One collection in memory: documents by record id (natural order), kept as BSON bytes (see
//! `stored`), its indexes kept in step with every write, and query execution (plan, scan,
//! filter, sort, skip, limit).

use crate::error::{Error, ErrorCode, Result};
use crate::index::planner::{self, Plan};
use crate::index::topk::{BestFirst as BestFirstWalk, RecordOrder, TermPostings};
use crate::index::{Index, IndexSpec, RecordId, TermRecords};
use crate::query::{Filter, SortSpec};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

mod background;
mod bulk;
mod count;
mod geo;
mod keyed;
mod session;
pub(crate) mod timeseries;
#[cfg(test)]
mod update_tests;
pub(crate) mod validation;
pub(crate) use crate::stored::StoredDoc;
pub(crate) use background::spawn_background_builds;
pub(crate) use bulk::{indexes_to_keep, kept_from_live};
pub(crate) use session::WriteSession;

/// Largest document MongoDB stores.
pub(crate) const MAX_DOCUMENT_SIZE: usize = 16 * 1024 * 1024;

pub(crate) struct Collection {
    pub db: String,
    pub name: String,
    pub options: Document,
    /// The default collation its options name (`None`: simple), parsed once.
    collation: Option<std::sync::Arc<crate::collation::Collation>>,
    docs: BTreeMap<RecordId, StoredDoc>,
    /// Sum of the documents' BSON sizes.
    data_bytes: u64,
    next_record: RecordId,
    /// `indexes[0]` is always `_id_`.
    indexes: Vec<Index>,
    /// Set when the collection is dropped, so a writer holding a stale handle starts over.
    pub dropped: bool,
    /// Records written since a background index build copied the documents (see
    /// `background`); `None` when no build is under way.
    changed: Option<BTreeSet<RecordId>>,
    /// The validator and capped limits `options` describe (kept in step by
    /// [`Collection::set_options`]).
    validator: Option<validation::Validator>,
    capped: Option<validation::Capped>,
    /// The time-series rules `options` describe, for a time-series collection.
    timeseries: Option<timeseries::TimeSeries>,
}

/// A query as the collection executes it.
pub(crate) struct QuerySpec<'a> {
    pub filter: &'a Filter,
    pub filter_doc: &'a Document,
    pub sort: Option<&'a SortSpec>,
    pub sort_doc: Option<&'a Document>,
    pub hint: Option<&'a Bson>,
    pub skip: usize,
    pub limit: Option<usize>,
    /// The find's projection, when its results are only returned projected: then the index
    /// keys may answer it without the documents (see `keyed`).
    pub projection: Option<&'a crate::query::Projection>,
}

#[cfg(test)]
impl<'a> QuerySpec<'a> {
    /// A query of `filter` alone: no sort, hint, skip or limit (tests).
    pub(crate) fn filter_only(filter: &'a Filter, filter_doc: &'a Document) -> QuerySpec<'a> {
        QuerySpec {
            filter,
            filter_doc,
            sort: None,
            sort_doc: None,
            hint: None,
            skip: 0,
            limit: None,
            projection: None,
        }
    }
}

/// One matching document with the array position its filter matched (for positional `$`).
pub(crate) struct Hit {
    pub record: RecordId,
    /// The stored document; [`StoredDoc::to_document`] decodes it.
    pub doc: StoredDoc,
    pub position: Option<usize>,
    /// The text score, for a query with `$text`.
    pub score: Option<f64>,
}

/// What a query did, for `explain`.
#[derive(Debug, Clone)]
pub(crate) struct ExecStats {
    pub winning_plan: Document,
    pub keys_examined: u64,
    pub docs_examined: u64,
    pub returned: u64,
}

impl Collection {
    pub(crate) fn new(db: &str, name: &str, options: Document) -> Collection {
        let collation = crate::collation::of_options(&options);
        let id_index = Self::id_index(collation.as_ref());
        let mut coll = Collection {
            db: db.to_string(),
            name: name.to_string(),
            collation,
            options: Document::new(),
            docs: BTreeMap::new(),
            data_bytes: 0,
            next_record: 1,
            indexes: vec![id_index],
            dropped: false,
            changed: None,
            validator: None,
            capped: None,
            timeseries: None,
        };
        coll.set_options(options);
        coll
    }

    /// Replace the options, and the validator, capped limits and default collation they
    /// describe. Options come from `create`/`collMod`, which parsed them already, or from
    /// storage, which holds only such options; should one not parse, it is logged and leaves
    /// that rule off rather than making the collection unreadable. The default collation
    /// changes only while the collection is empty (recovery replaying its creation; `collMod`
    /// cannot change it), and the `_id` index takes it, as in mongod.
    pub(crate) fn set_options(&mut self, options: Document) {
        self.collation = crate::collation::of_options(&options);
        if self.docs.is_empty() {
            self.indexes[0] = Self::id_index(self.collation.as_ref());
        }
        self.validator = validation::Validator::from_options(&options).unwrap_or_else(|e| {
            tracing::error!(ns = %self.namespace(), "stored validator does not parse: {e}");
            None
        });
        self.capped = validation::Capped::from_options(&options).unwrap_or_else(|e| {
            tracing::error!(ns = %self.namespace(), "stored capped options do not parse: {e}");
            None
        });
        self.timeseries = timeseries::TimeSeries::from_options(&options).unwrap_or_else(|e| {
            tracing::error!(ns = %self.namespace(), "stored time-series options do not parse: {e}");
            None
        });
        self.options = options;
    }

    /// The time-series rules, for a time-series collection.
    pub(crate) fn timeseries(&self) -> Option<&timeseries::TimeSeries> {
        self.timeseries.as_ref()
    }

    /// The collection's validator, if it has one.
    pub(crate) fn validator(&self) -> Option<&validation::Validator> {
        self.validator.as_ref()
    }

    /// The capped limits, for a capped collection.
    pub(crate) fn capped(&self) -> Option<validation::Capped> {
        self.capped
    }

    /// The collection's default collation (`None`: simple).
    pub(crate) fn default_collation(&self) -> Option<&std::sync::Arc<crate::collation::Collation>> {
        self.collation.as_ref()
    }

    /// The `_id_` index, which has the collection's default collation as in mongod.
    fn id_index(collation: Option<&std::sync::Arc<crate::collation::Collation>>) -> Index {
        let mut spec = IndexSpec::id_index();
        spec.collation = collation.cloned();
        Index::new(spec).expect("the _id index spec is valid")
    }

    pub(crate) fn namespace(&self) -> String {
        format!("{}.{}", self.db, self.name)
    }

    pub(crate) fn len(&self) -> usize {
        self.docs.len()
    }

    pub(crate) fn indexes(&self) -> &[Index] {
        &self.indexes
    }

    /// The indexes, for tests that damage them on purpose.
    #[cfg(test)]
    pub(crate) fn indexes_mut(&mut self) -> &mut [Index] {
        &mut self.indexes
    }

    /// Every document with its record id, in natural order (`validate`).
    pub(crate) fn records(&self) -> impl Iterator<Item = (RecordId, &StoredDoc)> {
        self.docs.iter().map(|(rid, doc)| (*rid, doc))
    }

    /// The documents after record `after`, in natural order (a tailable cursor's new ones).
    pub(crate) fn records_after(
        &self,
        after: RecordId,
    ) -> impl Iterator<Item = (RecordId, &StoredDoc)> {
        self.docs
            .range((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded))
            .map(|(rid, doc)| (*rid, doc))
    }

    /// Every document in natural order (snapshots, `$lookup`).
    pub(crate) fn all_documents(&self) -> impl Iterator<Item = &StoredDoc> {
        self.docs.values()
    }

    /// Data size in bytes: the sum of the documents' BSON sizes.
    pub(crate) fn data_size(&self) -> u64 {
        self.data_bytes
    }

    /// Record id of the document with this `_id`.
    pub(crate) fn find_by_id(&self, id: &Bson) -> Option<RecordId> {
        self.indexes[0]
            .lookup_exact(std::slice::from_ref(id))
            .into_iter()
            .next()
    }

    pub(crate) fn get(&self, record: RecordId) -> Option<&StoredDoc> {
        self.docs.get(&record)
    }

    /// Insert a document that already has its `_id` first. All indexes are checked before any
    /// is changed, so a duplicate key leaves the collection untouched.
    pub(crate) fn insert(&mut self, doc: Document) -> Result<RecordId> {
        let stored = encode_checked(&doc)?;
        self.insert_encoded(&doc, stored)
    }

    /// The part of [`Collection::insert`] that needs no collection: `doc` encoded and its
    /// size checked, so a writer can do it before taking the collection's lock.
    pub(crate) fn encode_for_insert(doc: &Document) -> Result<StoredDoc> {
        encode_checked(doc)
    }

    /// [`Collection::insert`] of `doc` already encoded as `stored` by
    /// [`Collection::encode_for_insert`].
    pub(crate) fn insert_encoded(&mut self, doc: &Document, stored: StoredDoc) -> Result<RecordId> {
        let mut all_keys = Vec::with_capacity(self.indexes.len());
        for index in &self.indexes {
            all_keys.push(index.keys_for(doc)?);
        }
        self.insert_with_keys(stored, all_keys)
    }

    /// Insert a document read from a snapshot (its bytes already validated), like
    /// [`Collection::insert`].
    pub(crate) fn insert_stored(&mut self, stored: StoredDoc) -> Result<RecordId> {
        check_size(stored.len())?;
        let mut all_keys = Vec::with_capacity(self.indexes.len());
        for index in &self.indexes {
            all_keys.push(index.keys_for_stored(&stored)?);
        }
        self.insert_with_keys(stored, all_keys)
    }

    fn insert_with_keys(
        &mut self,
        stored: StoredDoc,
        all_keys: Vec<Vec<Vec<u8>>>,
    ) -> Result<RecordId> {
        let record = self.next_record;
        let ns = self.namespace();
        for (index, keys) in self.indexes.iter().zip(&all_keys) {
            index.check_unique(keys, record, &ns)?;
        }
        for (index, keys) in self.indexes.iter_mut().zip(all_keys) {
            index.insert(&keys, record);
        }
        self.next_record += 1;
        self.data_bytes += stored.len() as u64;
        self.docs.insert(record, stored);
        self.note_change(record);
        Ok(record)
    }

    /// Replace the document at `record` with `new_doc`, keeping indexes consistent; on a
    /// duplicate key nothing changes.
    pub(crate) fn replace(&mut self, record: RecordId, new_doc: Document) -> Result<()> {
        self.replace_from(record, None, &new_doc, None)
    }

    /// [`Collection::replace`] after an update: `old_doc` is the version the update read (the
    /// one stored at `record`), and `touched` the paths it may have changed
    /// ([`crate::update::UpdateSpec::touched_paths`]). Indexes none of whose fields lie on a
    /// touched path are left alone without working out any key; the others get only the
    /// entries whose keys changed (MongoDB's old and new key sets, applied as a difference),
    /// so pushing one reservation onto an array of thousands adds one entry per index.
    pub(crate) fn update_record(
        &mut self,
        record: RecordId,
        old_doc: &Document,
        new_doc: &Document,
        touched: Option<&[String]>,
    ) -> Result<()> {
        self.replace_from(record, Some(old_doc), new_doc, touched)
    }

    fn replace_from(
        &mut self,
        record: RecordId,
        old_doc: Option<&Document>,
        new_doc: &Document,
        touched: Option<&[String]>,
    ) -> Result<()> {
        let stored = encode_checked(new_doc)?;
        let Some(old_stored) = self.docs.get(&record).cloned() else {
            return Err(Error::internal("record vanished during update"));
        };
        // Decoded in full only for a text index, which reads every string field.
        let mut old_full: Option<Document> = None;
        let ns = self.namespace();
        let mut changes = Vec::with_capacity(self.indexes.len());
        for (i, index) in self.indexes.iter().enumerate() {
            if index.is_building() || touched.is_some_and(|t| !index.reads_any_of(t)) {
                continue;
            }
            let old_keys = match (index.text(), old_doc) {
                (_, Some(old_doc)) => {
                    if index
                        .text()
                        .is_some_and(|text| text.same_input(old_doc, new_doc))
                        && index.spec.partial_filter.is_none()
                    {
                        continue;
                    }
                    index.keys_for(old_doc)?
                }
                (Some(text), None) => {
                    if old_full.is_none() {
                        old_full = Some(old_stored.to_document()?);
                    }
                    let old_doc = old_full.as_ref().expect("decoded just above");
                    if text.same_input(old_doc, new_doc) && index.spec.partial_filter.is_none() {
                        continue;
                    }
                    index.keys_for(old_doc)?
                }
                (None, None) => index.keys_for_stored(&old_stored)?,
            };
            let new_keys = index.keys_for(new_doc)?;
            if old_keys != new_keys {
                let (removed, added) = crate::index::key_difference(old_keys, new_keys);
                index.check_unique(&added, record, &ns)?;
                changes.push((i, removed, added));
            }
        }
        for (i, removed, added) in changes {
            self.indexes[i].remove(&removed, record);
            self.indexes[i].insert(&added, record);
        }
        self.data_bytes = self.data_bytes - old_stored.len() as u64 + stored.len() as u64;
        self.docs.insert(record, stored);
        self.note_change(record);
        Ok(())
    }

    /// Remove a document; returns it.
    pub(crate) fn remove(&mut self, record: RecordId) -> Option<StoredDoc> {
        let doc = self.docs.remove(&record)?;
        self.data_bytes -= doc.len() as u64;
        self.note_change(record);
        for index in &mut self.indexes {
            if let Ok(keys) = index.keys_for_stored(&doc) {
                index.remove(&keys, record);
            }
        }
        Some(doc)
    }

    /// Insert, or replace the document with the same `_id` (journal replay, snapshots).
    pub(crate) fn put_stored(&mut self, stored: StoredDoc) -> Result<()> {
        match self.find_by_id(&stored.id()?) {
            Some(record) => self.replace(record, stored.to_document()?),
            None => self.insert_stored(stored).map(|_| ()),
        }
    }

    /// Build a new index over the existing documents. Fails (leaving nothing behind) on a
    /// duplicate key or an unindexable document.
    pub(crate) fn create_index(&mut self, spec: IndexSpec) -> Result<()> {
        self.check_text_index_room(&spec)?;
        let mut index = Index::new(spec)?;
        let ns = self.namespace();
        for (record, doc) in &self.docs {
            let keys = index.keys_for_stored(doc)?;
            index.check_unique(&keys, *record, &ns)?;
            index.insert(&keys, *record);
        }
        self.indexes.push(index);
        Ok(())
    }

    /// Refuse a second text index: a collection has at most one.
    fn check_text_index_room(&self, spec: &IndexSpec) -> Result<()> {
        if spec.text.is_some() {
            if let Some((_, existing)) = self.text_index() {
                return Err(Error::new(
                    ErrorCode::IndexOptionsConflict,
                    format!(
                        "only one text index per collection allowed, found existing text index \
                         \"{}\"",
                        existing.spec.name
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn drop_index(&mut self, name: &str) -> Result<IndexSpec> {
        if name == "_id_" {
            return Err(Error::new(
                ErrorCode::InvalidOptions,
                "cannot drop _id index",
            ));
        }
        match self.indexes.iter().position(|i| i.spec.name == name) {
            Some(pos) => Ok(self.indexes.remove(pos).spec),
            None => Err(Error::new(
                ErrorCode::IndexNotFound,
                format!("index not found with name [{name}]"),
            )),
        }
    }

    /// Drop every index but `_id_`; returns their names.
    pub(crate) fn drop_all_indexes(&mut self) -> Vec<String> {
        self.indexes.drain(1..).map(|i| i.spec.name).collect()
    }

    /// Whether the planner would answer a find of `filter` (raw, as the command carries it) by
    /// reading every document: a collection scan, or a walk of a whole index without a limit.
    /// A filter the planner cannot read is not: the find itself answers it with an error.
    pub(crate) fn find_reads_everything(
        &self,
        filter: &Document,
        sort: Option<&Document>,
        hint: Option<&Bson>,
        limit: Option<usize>,
    ) -> bool {
        let refs: Vec<&Index> = self.indexes.iter().collect();
        if limit.is_some() {
            // With a limit only a collection scan reads everything: whether the planner picks
            // an index is enough, without choosing which (the find plans for itself).
            return planner::scans_an_index(filter, sort, &refs, hint).is_ok_and(|index| !index);
        }
        match planner::plan(filter, sort, &refs, hint) {
            Ok(Plan::CollScan) => true,
            Ok(Plan::IndexScan { bounds, .. }) => bounds.is_full(),
            Err(_) => false,
        }
    }

    pub(crate) fn plan(&self, query: &QuerySpec<'_>) -> Result<Plan> {
        let refs: Vec<&Index> = self.indexes.iter().collect();
        let wanted = query.limit.map(|l| l.saturating_add(query.skip));
        planner::plan_limited(query.filter_doc, query.sort_doc, &refs, query.hint, wanted)
    }

    /// Run a query: candidates from the chosen plan, each re-checked against the full filter,
    /// then sorted (unless the index provides the order), skipped and limited.
    pub(crate) fn query(&self, query: &QuerySpec<'_>) -> Result<(Vec<Hit>, ExecStats)> {
        self.execute(query, false)
    }

    /// Like [`Collection::query`], with the winning plan described for `explain`.
    pub(crate) fn explain_query(&self, query: &QuerySpec<'_>) -> Result<(Vec<Hit>, ExecStats)> {
        self.execute(query, true)
    }

    /// The collection's text index and its position among the indexes.
    pub(crate) fn text_index(&self) -> Option<(usize, &Index)> {
        self.indexes
            .iter()
            .enumerate()
            .find(|(_, i)| i.text().is_some())
    }

    fn execute(&self, query: &QuerySpec<'_>, explain: bool) -> Result<(Vec<Hit>, ExecStats)> {
        if let Some((path, near)) = query.filter.near() {
            return self.execute_near(query, explain, path, near);
        }
        let sort_uses_score = query.sort.is_some_and(|s| s.uses_text_score());
        let text = query.filter.text();
        if sort_uses_score && text.is_none() {
            return Err(text_score_unavailable());
        }
        let mut bound_text = None;
        if let Some((filter, top_level)) = text {
            let Some((_, index)) = self.text_index().filter(|(_, i)| !i.spec.hidden) else {
                return Err(Error::new(
                    ErrorCode::IndexNotFound,
                    "text index required for $text query",
                ));
            };
            if index.is_building() {
                return Err(Error::new(
                    ErrorCode::IndexNotFound,
                    format!(
                        "text index required for $text query (the text index \"{}\" is still \
                         being built after start-up; try again in a few seconds)",
                        index.spec.name
                    ),
                ));
            }
            let definition = index.text().expect("a text index has its definition");
            let bound = filter.bind(definition);
            if top_level {
                return self.execute_text(query, explain, index, &bound);
            }
            self.check_or_branches_indexed(query.filter_doc)?;
            bound_text = Some(bound);
        }
        let (mut hits, stats) = self.execute_plan(query, explain)?;
        if let Some(bound) = bound_text {
            for hit in &mut hits {
                let doc = hit.doc.to_document()?;
                hit.score = Some(if bound.matches(&doc) {
                    bound.score(&doc)
                } else {
                    0.0
                });
            }
        }
        Ok((hits, stats))
    }

    /// `$text` inside an `$or` is allowed only when every other branch can use an index (mongod
    /// answers such a query by unioning index scans).
    fn check_or_branches_indexed(&self, filter_doc: &Document) -> Result<()> {
        let refs: Vec<&Index> = self.indexes.iter().collect();
        let mut ors = Vec::new();
        collect_text_ors(filter_doc, &mut ors);
        for branches in ors {
            for branch in branches {
                let Bson::Document(branch) = branch else {
                    continue;
                };
                if branch.contains_key("$text") {
                    continue;
                }
                if matches!(planner::plan(branch, None, &refs, None)?, Plan::CollScan) {
                    return Err(Error::location(
                        291,
                        format!(
                            "error processing query: ns={} planner returned error :: caused \
                             by :: Failed to produce a solution for TEXT under OR - other \
                             non-TEXT clauses under OR have to be indexed as well.",
                            self.namespace()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A query whose `$text` applies to every result: the text index gives the candidates
    /// (the union of the records holding any query term under the equality prefix), the full
    /// filter re-checks each (negations, phrases, other conditions), and each hit is scored.
    fn execute_text(
        &self,
        query: &QuerySpec<'_>,
        explain: bool,
        index: &Index,
        bound: &crate::text::search::BoundText,
    ) -> Result<(Vec<Hit>, ExecStats)> {
        let started = std::time::Instant::now();
        let definition = &bound.index;
        let mut prefix_values = Vec::with_capacity(definition.prefix.len());
        let mut prefix_doc = Document::new();
        for path in &definition.prefix {
            match equality_on(query.filter_doc, path) {
                Some(value) => {
                    prefix_doc.insert(path.clone(), value.clone());
                    prefix_values.push(value);
                }
                None => {
                    return Err(Error::location(
                        291,
                        format!(
                            "error processing query: ns={} planner returned error :: caused \
                             by :: failed to use text index to satisfy $text query (if text \
                             index is compound, are equality predicates given for all prefix \
                             fields?)",
                            self.namespace()
                        ),
                    ))
                }
            }
        }
        let mut stats = ExecStats {
            winning_plan: Document::new(),
            keys_examined: 0,
            docs_examined: 0,
            returned: 0,
        };
        // Each query term's postings, record → score bits, as the index holds them (copied only
        // from an index that holds pairs). A record's score is the sum of its terms' scores,
        // added in the order of `index_terms` (as `BoundText::score` adds them): both walks
        // below (see `index::topk`) sum them so.
        let postings_of = |term: &str| -> std::borrow::Cow<'_, TermRecords> {
            match index.text_records(&prefix_values, term) {
                Some(Some(records)) => std::borrow::Cow::Borrowed(records),
                Some(None) => std::borrow::Cow::Owned(TermRecords::default()),
                None => std::borrow::Cow::Owned(
                    index
                        .text_scores(&prefix_values, term)
                        .into_iter()
                        .map(|(record, score)| (record, score.to_bits()))
                        .collect(),
                ),
            }
        };
        let term_postings: Vec<(&str, std::borrow::Cow<'_, TermRecords>)> = bound
            .index_terms
            .iter()
            .map(|term| (term.as_str(), postings_of(term)))
            .filter(|(_, records)| !records.is_empty())
            .collect();
        let rest_doc: Document = query
            .filter_doc
            .iter()
            .filter(|(key, _)| key.as_str() != "$text")
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let rest = Filter::parse(&rest_doc)?;
        // When the index's terms are the query's (default sensitivity), the postings decide
        // the terms: holding one is being a candidate, and holding a negated term drops a
        // candidate (looked up in that term's postings as the walk meets it). Only phrases
        // need a candidate's text, and only its indexed strings folded, never tokenized and
        // stemmed again.
        let postings_decide = bound.postings_decide_terms() && rest.text().is_none();
        let negated: Vec<std::borrow::Cow<'_, TermRecords>> = if postings_decide {
            bound
                .query
                .negated_terms
                .iter()
                .map(|term| postings_of(term))
                .collect()
        } else {
            Vec::new()
        };
        // Candidates are asked about in record order (a tie group, the record-order walk), so
        // each negated term's postings are read forward, a block decoded once for all the
        // candidates in it: the set difference of the postings, not a search per candidate.
        let mut negated_readers: Vec<_> = negated.iter().map(|n| n.reader()).collect();
        let mut excluded =
            |record: RecordId| negated_readers.iter_mut().any(|n| n.get(record).is_some());
        let text_fields = definition.top_level_fields();
        let mut rest_matcher = RawMatcher::new(&rest);
        let mut check = |stored: &StoredDoc| -> Result<Option<Option<usize>>> {
            if !postings_decide {
                let doc = stored.to_document()?;
                return query.filter.try_matches_with_position(&doc);
            }
            // The phrases first, from the stored bytes of the indexed strings: they turn most
            // phrase candidates away, before the other conditions decode anything.
            let phrases = bound.phrases_match_stored(stored);
            if phrases == Some(false) {
                return Ok(None);
            }
            let Some(position) = rest_matcher.matches(stored)? else {
                return Ok(None);
            };
            if phrases.is_none() && !bound.phrases_match(&stored.select(text_fields.as_deref())?) {
                return Ok(None);
            }
            Ok(Some(position))
        };
        // Sorted by score first with a limit, only the best candidates are looked at: walked
        // best first, the walk stops once `skip + limit` matched and the next candidate scores
        // below the last of them (equal scores go on: a later sort key may order them first).
        let wanted = query.limit.map(|l| l.saturating_add(query.skip));
        let best_first = wanted.filter(|&w| w > 0).filter(|_| {
            query
                .sort
                .and_then(|s| s.keys.first())
                .is_some_and(|(path, _)| path == crate::text::SCORE_FIELD)
        });
        let mut hits = Vec::new();
        let mut docs_examined = 0;
        let mut clock = crate::deadline::Ticker::start();
        let mut examine = |record: RecordId, score: f64, hits: &mut Vec<Hit>| -> Result<()> {
            clock.tick()?;
            let Some(stored) = self.docs.get(&record) else {
                return Ok(());
            };
            docs_examined += 1;
            if let Some(position) = check(stored)? {
                hits.push(Hit {
                    record,
                    doc: stored.clone(),
                    position,
                    score: Some(score),
                });
            }
            Ok(())
        };
        match (best_first, query.sort) {
            (Some(wanted), Some(sort)) => {
                // Best first without scoring every candidate: the threshold walk over the
                // terms' postings in score order hands out each score's records only once no
                // record not yet met can score as high (a page of a common word reads about a
                // page of postings, not the third of a million that hold it).
                let terms: Vec<TermPostings<'_>> = term_postings
                    .iter()
                    .map(|(term, records)| TermPostings {
                        records: &**records,
                        by_score: index
                            .text_by_score(&prefix_values, term)
                            .unwrap_or_else(|| crate::index::topk::impact_order(&**records)),
                    })
                    .collect();
                let mut walk = BestFirstWalk::new(terms);
                let fields = sort_fields(sort);
                // The `_id` index, when the sort after the score is `_id` alone and neither
                // the index nor the query compares under a collation (its key order is then
                // the sort's).
                let id_order = match sort.keys.as_slice() {
                    [_, (path, ascending)] if path == "_id" && !crate::collation::active() => self
                        .indexes
                        .iter()
                        .find(|i| i.spec.name == "_id_" && i.spec.collation.is_none())
                        .map(|i| (i, *ascending)),
                    _ => None,
                };
                // Postings of the negated terms: at most this many records of a group are
                // excluded.
                let negated_postings: usize = negated.iter().map(|n| n.len()).sum();
                while hits.len() < wanted {
                    let Some((score, mut group)) = walk.next_group() else {
                        break;
                    };
                    // A huge tie (a template's ten thousand editions) ordered by `_id` alone
                    // after the score: the `_id` index gives that order, and walking it until
                    // the page is full reads about `needed × documents / tied` entries instead
                    // of every tied record's `_id`, when that is far fewer.
                    let needed = wanted - hits.len();
                    let walk_by_id = |tied: usize| {
                        id_order.is_some()
                            && tied >= TIE_WALK_FROM
                            && needed.saturating_mul(self.docs.len()).saturating_mul(4)
                                < tied.saturating_mul(tied)
                    };
                    // The negated terms are looked up for the records the `_id` walk meets
                    // only (a few pages' worth, not the whole tie), when they cannot exclude
                    // more than half of the group: the walk then reads at most twice the
                    // entries it would after excluding first. Otherwise (or without that
                    // walk) the excluded records leave the group first.
                    let exclude_as_met = walk_by_id(group.len())
                        && negated_postings.saturating_mul(2) <= group.len();
                    if !exclude_as_met {
                        group.retain(|record| !excluded(*record));
                    }
                    if walk_by_id(group.len()) {
                        if let Some((id_index, ascending)) = id_order.as_ref() {
                            // The walk hands out a group in record order: membership is a
                            // binary search, where a set of the tied records (hashing tens of
                            // thousands per search) was the walk's largest cost.
                            let members = &group;
                            let mut left = members.len();
                            let mut id_clock = crate::deadline::Ticker::start();
                            for record in id_index.records_in_key_order(!*ascending) {
                                id_clock.tick()?;
                                if hits.len() >= wanted || left == 0 {
                                    break;
                                }
                                if members.binary_search(&record).is_ok() {
                                    left -= 1;
                                    if exclude_as_met && excluded(record) {
                                        continue;
                                    }
                                    examine(record, score, &mut hits)?;
                                }
                            }
                            continue;
                        }
                    }
                    // Every candidate tied at this score (in record order): thousands when
                    // many documents hold the same text (a product's editions, generated
                    // posts). They are put in the order of the later sort keys, reading only
                    // those fields, and checked in that order until the page is full, instead
                    // of all being checked (a phrase folding each one's text) and sorted
                    // afterwards.
                    if group.len() > 1 && sort.keys.len() > 1 {
                        let mut keyed: Vec<(usize, Document, RecordId)> =
                            Vec::with_capacity(group.len());
                        for (i, record) in group.iter().enumerate() {
                            if let Some(stored) = self.docs.get(record) {
                                keyed.push((i, stored.select(Some(&fields))?, *record));
                            }
                        }
                        keyed.sort_unstable_by(|a, b| {
                            sort.compare_scored(&a.1, Some(score), &b.1, Some(score))
                                .then(a.0.cmp(&b.0))
                        });
                        group = keyed.into_iter().map(|(_, _, record)| record).collect();
                    }
                    for record in group {
                        if hits.len() >= wanted {
                            break;
                        }
                        examine(record, score, &mut hits)?;
                    }
                }
                stats.keys_examined += walk.postings_read;
            }
            _ => {
                // In record order, as every other query's candidates go: the terms' postings
                // merged. Unsorted with a limit (a capped count), the first `skip + limit`
                // matches are all that is kept: the walk stops there.
                let records: Vec<&TermRecords> = term_postings
                    .iter()
                    .map(|(_, records)| &**records)
                    .collect();
                let mut walk = RecordOrder::new(&records);
                let enough = wanted.filter(|_| query.sort.is_none_or(|s| s.keys.is_empty()));
                // Records a negated term excludes are passed over without `examine`: the walk
                // looks at the clock itself.
                let mut walk_clock = crate::deadline::Ticker::start();
                for (record, score) in walk.by_ref() {
                    walk_clock.tick()?;
                    if enough.is_some_and(|enough| hits.len() >= enough) {
                        break;
                    }
                    if excluded(record) {
                        continue;
                    }
                    examine(record, score, &mut hits)?;
                }
                stats.keys_examined += walk.postings_read;
            }
        }
        stats.docs_examined += docs_examined;
        // What the query read and how long it took, for profiling searches at scale
        // (`RUST_LOG=docstore::collection=debug`): the counts explain gives, without an explain.
        tracing::debug!(
            namespace = %self.namespace(),
            search = %bound.query.to_document(),
            sorted = best_first.is_some(),
            keys_examined = stats.keys_examined,
            docs_examined = stats.docs_examined,
            matched = hits.len(),
            micros = started.elapsed().as_micros() as u64,
            "$text query"
        );
        if explain {
            stats.winning_plan = crate::text::describe_plan(
                &index.spec.name,
                &index.spec.key,
                &prefix_doc,
                bound.query.to_document(),
                bound.index_terms.len(),
            );
        }
        if let Some(sort) = query.sort.filter(|s| !s.keys.is_empty()) {
            if explain {
                let input = std::mem::take(&mut stats.winning_plan);
                stats.winning_plan = doc! {
                    "stage": "SORT",
                    "sortPattern": query.sort_doc.cloned().unwrap_or_default(),
                    "inputStage": input,
                };
            }
            crate::deadline::check()?;
            sort_hits(
                &mut hits,
                sort,
                query.limit.map(|l| l.saturating_add(query.skip)),
            )?;
            crate::deadline::check()?;
        }
        let hits: Vec<Hit> = match query.limit {
            Some(limit) => hits.into_iter().skip(query.skip).take(limit).collect(),
            None => hits.into_iter().skip(query.skip).collect(),
        };
        stats.returned = hits.len() as u64;
        Ok((hits, stats))
    }

    fn execute_plan(&self, query: &QuerySpec<'_>, explain: bool) -> Result<(Vec<Hit>, ExecStats)> {
        let plan = self.plan(query)?;
        let winning_plan = if explain {
            let refs: Vec<&Index> = self.indexes.iter().collect();
            let mut described = plan.describe(&refs);
            if matches!(plan, Plan::CollScan) && natural_backward(query.hint) {
                described.insert("direction", "backward");
            }
            described
        } else {
            Document::new()
        };
        let mut stats = ExecStats {
            winning_plan,
            keys_examined: 0,
            docs_examined: 0,
            returned: 0,
        };
        let sort = query.sort.filter(|s| !s.keys.is_empty());
        let sorted_by_plan = matches!(
            plan,
            Plan::IndexScan {
                provides_sort: true,
                ..
            }
        );
        let mut hits = Vec::new();
        let needs_sort = sort.is_some() && !sorted_by_plan;
        // When the index alone answers the filter and gives the order, the skipped keys need
        // no document fetched or matched (see `count.rs`).
        let mut skip = query.skip;
        let mut pre_skip = 0;
        if skip > 0 && !needs_sort && self.answering_index(&plan, query.filter_doc).is_some() {
            stats.keys_examined += skip as u64;
            pre_skip = std::mem::take(&mut skip);
        }
        // Without an in-memory sort, matches in the scan's order: the first `skip` of them are
        // only counted, and the scan stops as soon as `limit` more matched.
        let (stop_after, to_pass) = if needs_sort {
            (None, 0)
        } else {
            (query.limit, std::mem::take(&mut skip))
        };
        let matcher = RawMatcher::new(query.filter);
        // An index whose keys decide conditions of the filter: each entry's key is tested
        // before its document is read (see `keyed`).
        let keyed = match &plan {
            Plan::IndexScan {
                index,
                bounds,
                reverse,
                ..
            } => {
                let idx = &self.indexes[*index];
                // A covered document holds only the projected fields: not for a sort to read.
                let projection = query.projection.filter(|_| !needs_sort);
                keyed::KeyFilter::new(idx, query.filter_doc, projection)
                    .and_then(|kf| Some((kf, idx.scan_keys(bounds, *reverse)?)))
            }
            Plan::CollScan => None,
        };
        if let Some((key_filter, entries)) = keyed {
            let read_before = stats.docs_examined;
            let mut scan = keyed::KeyedScan {
                key_filter,
                matcher,
                to_pass,
                stop_after,
            };
            let mut entries = entries;
            crate::deadline::skip(&mut entries, pre_skip)?;
            self.scan_keyed(entries, &mut scan, &mut stats, &mut hits)?;
            if explain {
                let read_none = stats.docs_examined == read_before;
                describe_key_filter(&mut stats.winning_plan, &scan.key_filter, read_none);
            }
        } else {
            self.scan_records(
                &plan, query.hint, pre_skip, matcher, to_pass, stop_after, &mut stats, &mut hits,
            )?;
        }
        if needs_sort {
            if explain {
                let input = std::mem::take(&mut stats.winning_plan);
                stats.winning_plan = doc! {
                    "stage": "SORT",
                    "sortPattern": query.sort_doc.cloned().unwrap_or_default(),
                    "inputStage": input,
                };
            }
            if let Some(sort) = sort {
                // A sort is not interrupted midway: the time limit is looked at around it.
                crate::deadline::check()?;
                sort_hits(
                    &mut hits,
                    sort,
                    query.limit.map(|l| l.saturating_add(query.skip)),
                )?;
                crate::deadline::check()?;
            }
        }
        let hits: Vec<Hit> = match query.limit {
            Some(limit) => hits.into_iter().skip(skip).take(limit).collect(),
            None => hits.into_iter().skip(skip).collect(),
        };
        stats.returned = hits.len() as u64;
        Ok((hits, stats))
    }

    /// [`Collection::execute_plan`]'s scan of record ids: each document read and matched, the
    /// first `to_pass` matches passed over, and the scan ended at `stop_after` hits.
    #[allow(clippy::too_many_arguments)]
    fn scan_records(
        &self,
        plan: &Plan,
        hint: Option<&Bson>,
        pre_skip: usize,
        mut matcher: RawMatcher<'_>,
        mut to_pass: usize,
        stop_after: Option<usize>,
        stats: &mut ExecStats,
        hits: &mut Vec<Hit>,
    ) -> Result<()> {
        let candidates: Box<dyn Iterator<Item = RecordId> + '_> = match plan {
            // `hint: {$natural: -1}` (or that sort) walks natural order backwards.
            Plan::CollScan if natural_backward(hint) => Box::new(self.docs.keys().rev().copied()),
            Plan::CollScan => Box::new(self.docs.keys().copied()),
            Plan::IndexScan {
                index,
                bounds,
                reverse,
                ..
            } => self.indexes[*index].scan(bounds, *reverse),
        };
        let counts_keys = !matches!(plan, Plan::CollScan);
        let mut candidates = candidates;
        crate::deadline::skip(&mut candidates, pre_skip)?;
        let mut clock = crate::deadline::Ticker::start();
        for record in candidates {
            clock.tick()?;
            if counts_keys {
                stats.keys_examined += 1;
            }
            let Some(doc) = self.docs.get(&record) else {
                continue;
            };
            stats.docs_examined += 1;
            if let Some(position) = matcher.matches(doc)? {
                if to_pass > 0 {
                    to_pass -= 1;
                    continue;
                }
                hits.push(Hit {
                    record,
                    doc: doc.clone(),
                    position,
                    score: None,
                });
                if stop_after.is_some_and(|n| hits.len() >= n) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// `collStats`-style figures.
    pub(crate) fn stats(&self) -> Document {
        let size = self.data_size() as i64;
        let count = self.docs.len() as i64;
        let mut index_sizes = Document::new();
        let mut total_index = 0i64;
        for index in &self.indexes {
            let bytes = index.entry_bytes() as i64;
            total_index += bytes;
            index_sizes.insert(index.spec.name.clone(), bytes);
        }
        let mut stats = doc! {
            "ns": self.namespace(),
            "count": count,
            "size": size,
            "avgObjSize": if count > 0 { size / count } else { 0 },
            "storageSize": size,
            "nindexes": self.indexes.len() as i32,
            "totalIndexSize": total_index,
            "totalSize": size + total_index,
            "indexSizes": index_sizes,
        };
        if let Some(cap) = self.capped {
            stats.insert("capped", true);
            stats.insert("max", cap.max_docs.map_or(0, |m| m as i64));
            stats.insert("maxSize", cap.max_bytes as i64);
        }
        stats
    }
}

/// mongod's error for `$geoNear` over a collection that does not exist (it has no index).
pub(crate) fn geo_near_without_collection() -> Error {
    Error::new(
        ErrorCode::IndexNotFound,
        "$geoNear requires a 2d or 2dsphere index, but none were found",
    )
}

/// The explain of a plan whose index keys decide conditions (see `keyed`): its `IXSCAN`
/// shows them as its `filter`, and a covered read that read no document (`read_none`: every
/// value came from a key) has `PROJECTION_COVERED` over the `IXSCAN` in place of `FETCH`; one
/// that had to read documents (values no key gives back, such as strings) keeps its `FETCH`.
fn describe_key_filter(
    winning_plan: &mut Document,
    key_filter: &keyed::KeyFilter,
    read_none: bool,
) {
    if winning_plan.get_str("stage") != Ok("FETCH") {
        return;
    }
    let Ok(mut ixscan) = winning_plan.get_document("inputStage").cloned() else {
        return;
    };
    if let Some(filter) = key_filter.describe() {
        ixscan.insert("filter", filter);
    }
    *winning_plan = if key_filter.covers() && read_none {
        doc! { "stage": "PROJECTION_COVERED", "inputStage": ixscan }
    } else {
        doc! { "stage": "FETCH", "inputStage": ixscan }
    };
}

/// Whether a hint asks for natural order backwards (`{$natural: -1}`).
fn natural_backward(hint: Option<&Bson>) -> bool {
    matches!(hint, Some(Bson::Document(h))
        if h.get("$natural").and_then(crate::value::to_f64).is_some_and(|d| d < 0.0))
}

/// MongoDB's error for `{$meta: "textScore"}` in a query without `$text`.
pub(crate) fn text_score_unavailable() -> Error {
    Error::location(
        40218,
        "query requires text score metadata, but it is not available",
    )
}

/// The value a filter fixes `path` to by equality (`{path: v}` or `{path: {$eq: v}}`, at the
/// top level or in a top-level `$and`), for a text index's prefix.
fn equality_on<'a>(filter: &'a Document, path: &str) -> Option<&'a Bson> {
    for (key, value) in filter {
        if key == path {
            match value {
                Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                    if d.len() == 1 {
                        if let Some(v) = d.get("$eq") {
                            return Some(v);
                        }
                    }
                }
                Bson::Array(_) | Bson::RegularExpression(_) => {}
                other => return Some(other),
            }
        } else if key == "$and" {
            if let Bson::Array(items) = value {
                for item in items {
                    if let Bson::Document(sub) = item {
                        if let Some(v) = equality_on(sub, path) {
                            return Some(v);
                        }
                    }
                }
            }
        }
    }
    None
}

/// The branches of every `$or` (at the top level or in top-level `$and`s) that holds `$text`.
fn collect_text_ors<'a>(filter: &'a Document, out: &mut Vec<&'a [Bson]>) {
    for (key, value) in filter {
        let Bson::Array(items) = value else { continue };
        match key.as_str() {
            "$or" => {
                let has_text = items
                    .iter()
                    .any(|b| matches!(b, Bson::Document(d) if d.contains_key("$text")));
                if has_text {
                    out.push(items);
                }
                for item in items {
                    if let Bson::Document(sub) = item {
                        collect_text_ors(sub, out);
                    }
                }
            }
            "$and" => {
                for item in items {
                    if let Bson::Document(sub) = item {
                        collect_text_ors(sub, out);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A filter applied to stored documents: each is decoded only as far as the filter reads it
/// (the paths its conditions name, see [`Filter::paths`]), and not at all for the empty
/// filter. A post's `metadata.published` is decoded without the post's body beside it in
/// `metadata`, which decoding the whole top-level field cost.
struct RawMatcher<'a> {
    filter: &'a Filter,
    everything: bool,
    paths: Option<crate::stored::FieldTree>,
    /// The partial document of the last candidate, refilled for the next one: a scan that
    /// matches thousands of documents allocates one map (and seeds one hasher), not one each.
    partial: Document,
}

impl<'a> RawMatcher<'a> {
    fn new(filter: &'a Filter) -> RawMatcher<'a> {
        RawMatcher {
            filter,
            everything: filter.matches_everything(),
            paths: filter.paths().map(crate::stored::FieldTree::from_paths),
            partial: Document::new(),
        }
    }

    /// [`Filter::try_matches_with_position`] on the stored document.
    fn matches(&mut self, doc: &StoredDoc) -> Result<Option<Option<usize>>> {
        if self.everything {
            return Ok(Some(None));
        }
        match &self.paths {
            Some(paths) => {
                doc.select_tree_into(paths, &mut self.partial)?;
                self.filter.try_matches_with_position(&self.partial)
            }
            None => self.filter.try_matches_with_position(&doc.to_document()?),
        }
    }
}

/// Records tied at one score from which a page sorted by `_id` after the score may walk the
/// `_id` index instead of sorting the tied records (see `Collection::execute_text`).
const TIE_WALK_FROM: usize = 2_048;

/// The top-level fields a sort reads.
fn sort_fields(sort: &SortSpec) -> Vec<String> {
    let mut fields: Vec<String> = Vec::new();
    for (path, _) in &sort.keys {
        let head = path.split('.').next().unwrap_or_default();
        if !fields.iter().any(|f| f == head) {
            fields.push(head.to_string());
        }
    }
    fields
}

/// Stable sort of hits (ties keep scan order); with `keep`, only the first `keep` are needed.
/// Each hit's sort fields are decoded once, before sorting.
fn sort_hits(hits: &mut Vec<Hit>, sort: &SortSpec, keep: Option<usize>) -> Result<()> {
    let fields = sort_fields(sort);
    let cmp = |a: &(usize, Document, Hit), b: &(usize, Document, Hit)| -> Ordering {
        sort.compare_scored(&a.1, a.2.score, &b.1, b.2.score)
            .then(a.0.cmp(&b.0))
    };
    let mut indexed: Vec<(usize, Document, Hit)> = Vec::with_capacity(hits.len());
    for (i, hit) in hits.drain(..).enumerate() {
        indexed.push((i, hit.doc.select(Some(&fields))?, hit));
    }
    match keep {
        Some(k) if k < indexed.len() => {
            if k == 0 {
                indexed.clear();
            } else {
                indexed.select_nth_unstable_by(k - 1, cmp);
                indexed.truncate(k);
                indexed.sort_unstable_by(cmp);
            }
        }
        _ => indexed.sort_unstable_by(cmp),
    }
    hits.extend(indexed.into_iter().map(|(_, _, h)| h));
    Ok(())
}

/// The encoded BSON size of a document, computed without encoding it.
pub(crate) fn bson_size(doc: &Document) -> usize {
    // length prefix + elements + terminating NUL
    4 + doc
        .iter()
        .map(|(k, v)| element_size(k.len(), v))
        .sum::<usize>()
        + 1
}

fn element_size(key_len: usize, value: &Bson) -> usize {
    // type byte + key cstring + value
    1 + key_len + 1 + value_size(value)
}

fn value_size(value: &Bson) -> usize {
    let string = |s: &str| 4 + s.len() + 1;
    match value {
        Bson::Double(_) | Bson::DateTime(_) | Bson::Timestamp(_) | Bson::Int64(_) => 8,
        Bson::String(s) | Bson::JavaScriptCode(s) | Bson::Symbol(s) => string(s),
        Bson::Document(d) => bson_size(d),
        Bson::Array(items) => {
            let elements: usize = items
                .iter()
                .enumerate()
                .map(|(i, v)| element_size(decimal_digits(i), v))
                .sum();
            4 + elements + 1
        }
        Bson::Binary(b) => {
            // The old binary subtype 2 carries a second length inside the payload.
            let old = if u8::from(b.subtype) == 2 { 4 } else { 0 };
            4 + 1 + old + b.bytes.len()
        }
        Bson::ObjectId(_) => 12,
        Bson::Boolean(_) => 1,
        Bson::Null | Bson::Undefined | Bson::MinKey | Bson::MaxKey => 0,
        Bson::RegularExpression(r) => r.pattern.len() + 1 + r.options.len() + 1,
        Bson::JavaScriptCodeWithScope(c) => 4 + string(&c.code) + bson_size(&c.scope),
        Bson::Int32(_) => 4,
        Bson::Decimal128(_) => 16,
        // Namespace string + ObjectId; the driver's type hides the parts, so encode it.
        Bson::DbPointer(_) => {
            let mut buf = Vec::new();
            let wrapped = doc! { "p": value.clone() };
            match wrapped.to_writer(&mut buf) {
                Ok(()) => buf.len().saturating_sub(4 + 1 + 2 + 1),
                Err(_) => 0,
            }
        }
    }
}

fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// The stored form of `doc`, refused when over the BSON size limit (checked before encoding,
/// so an oversized document is never copied).
fn encode_checked(doc: &Document) -> Result<StoredDoc> {
    check_size(bson_size(doc))?;
    StoredDoc::from_document(doc)
}

pub(crate) fn check_size(size: usize) -> Result<()> {
    if size > MAX_DOCUMENT_SIZE {
        return Err(Error::new(
            ErrorCode::BSONObjectTooLarge,
            format!(
                "object to insert too large. size in bytes: {size}, max size: {MAX_DOCUMENT_SIZE}"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{oid::ObjectId, spec::BinarySubtype, Binary, Regex, Timestamp};

    /// `$text` results come from the scores the index keys hold, and without phrases or
    /// negations only the rest of the filter is checked: both must agree with matching and
    /// scoring every document from its text.
    #[test]
    fn text_results_and_scores_from_the_index_agree_with_reading_every_document() {
        let mut c = Collection::new("db", "c", Document::new());
        c.create_index(
            IndexSpec::parse(&doc! {
                "key": { "title": "text", "body": "text" },
                "name": "t",
                "weights": { "title": 5 },
            })
            .unwrap(),
        )
        .unwrap();
        let words = [
            "river", "Rivers", "lantern", "café", "cafe", "the", "meadow", "blue",
        ];
        for i in 0..120usize {
            let title = format!("{} {}", words[i % 8], words[(i / 8) % 8]);
            let body: Vec<&str> = (0..(i % 5)).map(|k| words[(i + k * 3) % 8]).collect();
            c.insert(doc! {
                "_id": i as i32, "title": title, "body": body.join(" "), "on": i % 3 != 0,
            })
            .unwrap();
        }
        let searches = [
            doc! { "$search": "river" },
            doc! { "$search": "river lantern" },
            doc! { "$search": "cafe -blue" },
            doc! { "$search": "\"river lantern\"" },
            doc! { "$search": "Rivers", "$caseSensitive": true },
            doc! { "$search": "café", "$diacriticSensitive": true },
            doc! { "$search": "the" },
        ];
        for search in searches {
            for rest in [doc! {}, doc! { "on": true }] {
                let mut filter = doc! { "$text": search.clone() };
                filter.extend(rest);
                let parsed = Filter::parse(&filter).unwrap();
                let (hits, _) = c.query(&QuerySpec::filter_only(&parsed, &filter)).unwrap();
                let got: Vec<(RecordId, f64)> =
                    hits.iter().map(|h| (h.record, h.score.unwrap())).collect();
                let bound = parsed.text().unwrap().0.bound().unwrap().clone();
                let expected: Vec<(RecordId, f64)> = c
                    .records()
                    .filter_map(|(record, stored)| {
                        let doc = stored.to_document().unwrap();
                        parsed.matches(&doc).then(|| (record, bound.score(&doc)))
                    })
                    .collect();
                assert_eq!(got, expected, "{filter}");
                let stop_words_only = search.get_str("$search") == Ok("the");
                assert_eq!(expected.is_empty(), stop_words_only, "{filter}");
            }
        }
    }

    #[test]
    fn matching_the_fields_a_filter_reads_agrees_with_matching_the_whole_document() {
        let docs = [
            doc! { "_id": 1, "a": 5, "b": { "c": [1, 2, { "d": "x" }] }, "tags": ["p", "q"] },
            doc! { "_id": 2, "a": [4, 6], "b": null, "z": 1 },
            doc! { "_id": 3, "b": { "c": 3 }, "tags": [] },
            doc! { "_id": 4, "a": "5", "arr": [{ "k": 1, "v": 2 }, { "k": 2, "v": 9 }] },
            doc! { "_id": 5, "m": { "live": true, "when": 3, "body": { "text": "long" } } },
            doc! { "_id": 6, "m": { "when": 9, "body": "short" }, "b": { "c": 3, "e": 1 } },
            doc! { "_id": 7, "m": [{ "live": false }, { "when": 1 }], "b": { "e": 1, "c": 3 } },
        ];
        let filters = [
            doc! {},
            doc! { "a": 5 },
            doc! { "a": { "$gt": 4, "$lt": 7 } },
            doc! { "b.c": 2 },
            doc! { "b.c.d": "x" },
            doc! { "b.c.2.d": { "$exists": true } },
            doc! { "a": { "$exists": false } },
            doc! { "$or": [{ "z": 1 }, { "tags": "q" }] },
            doc! { "$nor": [{ "a": 5 }], "tags": { "$size": 0 } },
            doc! { "a": { "$not": { "$type": "string" } } },
            doc! { "arr": { "$elemMatch": { "k": 2, "v": { "$gt": 3 } } } },
            doc! { "arr.k": 2 },
            doc! { "$expr": { "$eq": ["$a", 5] } },
            doc! { "$and": [{ "a": { "$in": [6, "5"] } }, { "_id": { "$gte": 2 } }] },
            // Paths into embedded documents: only the named fields are decoded, unless a
            // condition reads the whole document (equality, $type, $exists) or meets an array.
            doc! { "$or": [{ "m.live": true }, { "m.when": { "$lte": 3 } }] },
            doc! { "m.body.text": "long" },
            doc! { "m.body": "short", "m.when": { "$gt": 5 } },
            doc! { "b": { "c": 3, "e": 1 }, "b.c": 3 },
            doc! { "b.c": 3, "b": { "$type": "object" } },
            doc! { "m.when": { "$exists": true }, "m.live": { "$exists": false } },
            doc! { "m": { "$elemMatch": { "when": 1 } }, "m.live": false },
        ];
        for filter_doc in &filters {
            let filter = Filter::parse(filter_doc).unwrap();
            let mut matcher = RawMatcher::new(&filter);
            for doc in &docs {
                let stored = StoredDoc::from_document(doc).unwrap();
                assert_eq!(
                    matcher.matches(&stored).unwrap(),
                    filter.try_matches_with_position(doc).unwrap(),
                    "{filter_doc} on {doc}"
                );
            }
        }
    }

    #[test]
    fn computed_bson_size_equals_the_encoded_length() {
        let mut big_array = Vec::new();
        for i in 0..123 {
            big_array.push(Bson::Int32(i));
        }
        let doc = doc! {
            "_id": ObjectId::new(),
            "d": 1.5, "s": "héllo", "n": Bson::Null, "b": true, "i": 7, "l": 9i64,
            "dt": bson::DateTime::now(), "ts": Timestamp { time: 1, increment: 2 },
            "re": Regex { pattern: "a.*".into(), options: "i".into() },
            "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![1, 2, 3] },
            "dec": Bson::Decimal128("1.5".parse().unwrap()),
            "nested": { "a": [1, { "b": "c" }, []], "e": {} },
            "many": big_array,
            "min": Bson::MinKey, "max": Bson::MaxKey, "u": Bson::Undefined,
            "js": Bson::JavaScriptCode("x()".into()),
        };
        let mut buf = Vec::new();
        doc.to_writer(&mut buf).unwrap();
        assert_eq!(bson_size(&doc), buf.len());
    }
}
