//! Conditions an index's keys decide, and reads the keys cover: what MongoDB's `IXSCAN` stage
//! does with its `filter`, and its covered plans (`PROJECTION_COVERED`, no `FETCH`).
//!
//! An index scan yields `(key, record)` entries. A condition on a key field can be tested on
//! the key alone, before the document is read, when the key holds the field's value exactly:
//! - the index is a plain one (every field ascending or descending, not hashed, geo or text),
//!   of the simple collation (a collated index holds sort keys, not the strings);
//! - the field is not multikey (no document has an array on its path, so every key of a
//!   document holds its one value there). On a multikey field a key holds one element: a
//!   condition that any element satisfying it satisfies (equalities, `$in`, comparisons,
//!   `$regex`) is decided true by a key whose element passes, and left to the document
//!   otherwise (`category_path: id` within a category's bounds passes on every key);
//! - the value's type survives the encoding: a string, ObjectId, boolean or date. Numbers do
//!   not (1, 1.0 and `NumberLong(1)` encode alike), nor documents holding them; for those the
//!   document is read, as without this;
//! - a null key stands for a missing field as well as a null one: it decides only a condition
//!   that says the same of both (`{status: {$nin: ["draft"]}}` does, `$exists` does not).
//!
//! Conditions are those of the filter's top level and of its top-level `$and`s, each on one
//! path, with the operators of [`ALLOWED`]: tested with the filter matcher itself on a
//! document holding only the key's value, so they mean exactly what they mean on the whole
//! document. An entry a decided condition rejects is passed over without reading its
//! document. When the decided conditions are the whole filter, an entry that passes them all
//! is a match: a skipped one is counted without reading its document, and a returned one is
//! not matched again.
//!
//! A find whose projection includes only `_id` and at most one other path, each a key field
//! of such an index, whose filter the keys decide whole and whose order the index gives, is
//! answered from the keys ("covered") wherever the key's values are of a type the encoding
//! keeps exactly: not a number, not a string (a stored symbol reads back as a string), not null
//! (missing and null look alike). Other entries read their document. Documents are stored with `_id` first (as
//! inserts, replacements and upserts make them), so the covered document's field order, `_id`
//! then the other path, is the order the projection of the stored document has.

use super::{Collection, ExecStats, Hit, RawMatcher, StoredDoc};
use crate::error::Result;
use crate::index::{Index, RecordId};
use crate::keystring;
use crate::query::{Filter, Projection};
use bson::{Bson, Document};

/// The field operators a decided condition may use: their result depends on the value at the
/// path and nothing else, and on a string, ObjectId, boolean, date or null value it is the
/// same whichever BSON type of that bracket the document held (`$type` would not be).
const ALLOWED: [&str; 12] = [
    "$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists", "$regex", "$options",
    "$not",
];

/// The operators of a condition that an array satisfies as soon as one element does.
const EXISTENTIAL: [&str; 8] = [
    "$eq", "$in", "$gt", "$gte", "$lt", "$lte", "$regex", "$options",
];

/// Distinct key values whose verdict one condition remembers (a status field has a handful;
/// a unique field's values are not worth remembering, and stop being remembered past this).
const REMEMBERED: usize = 8;

/// Key type tags whose value decodes exactly (see the module documentation).
const NULL_TAG: u8 = 3;
const STRING_TAG: u8 = keystring::STRING_TAG;
const OBJECT_ID_TAG: u8 = 9;
const BOOLEAN_TAG: u8 = 10;
const DATE_TAG: u8 = 11;

/// What a key says of a document's match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// A decided condition is false: the document does not match.
    Fails,
    /// Every decided condition is true.
    Passes,
    /// Some condition cannot be told from this key: read the document.
    Unknown,
}

/// One condition on one key field.
struct KeyCondition {
    /// The key field's position in the key.
    field: usize,
    path: String,
    /// `{path: condition}` parsed.
    filter: Filter,
    /// The field is multikey: a key holds one element, which can only show the condition true.
    element: bool,
    /// Verdicts of key values seen, by the field's encoded bytes.
    remembered: Vec<(Vec<u8>, Verdict)>,
}

impl KeyCondition {
    fn verdict(&mut self, part: &[u8], descending: bool) -> Verdict {
        if let Some((_, v)) = self.remembered.iter().find(|(bytes, _)| bytes == part) {
            return *v;
        }
        let v = self.judge(part, descending);
        if self.remembered.len() < REMEMBERED {
            self.remembered.push((part.to_vec(), v));
        }
        v
    }

    fn judge(&self, part: &[u8], descending: bool) -> Verdict {
        let tag = keystring::tag_of(part, descending);
        let Some(value) = keystring::decode_key(part, &[descending]).and_then(|mut v| v.pop())
        else {
            return Verdict::Unknown;
        };
        let passes = |doc: &Document| self.filter.matches(doc);
        if self.element {
            let exact = matches!(
                tag,
                Some(STRING_TAG | OBJECT_ID_TAG | BOOLEAN_TAG | DATE_TAG)
            );
            return if exact && passes(&nested(&self.path, value)) {
                Verdict::Passes
            } else {
                Verdict::Unknown
            };
        }
        match tag {
            Some(NULL_TAG) => {
                let missing = passes(&Document::new());
                if missing == passes(&nested(&self.path, Bson::Null)) {
                    verdict_of(missing)
                } else {
                    Verdict::Unknown
                }
            }
            Some(STRING_TAG | OBJECT_ID_TAG | BOOLEAN_TAG | DATE_TAG) => {
                verdict_of(passes(&nested(&self.path, value)))
            }
            _ => Verdict::Unknown,
        }
    }
}

fn verdict_of(matches: bool) -> Verdict {
    if matches {
        Verdict::Passes
    } else {
        Verdict::Fails
    }
}

/// `{a: {b: value}}` for the path `a.b`.
fn nested(path: &str, value: Bson) -> Document {
    let mut value = value;
    let mut parts: Vec<&str> = path.split('.').collect();
    let first = parts.remove(0);
    for part in parts.iter().rev() {
        let mut d = Document::new();
        d.insert(*part, value);
        value = Bson::Document(d);
    }
    let mut d = Document::new();
    d.insert(first, value);
    d
}

/// The paths a covered read returns, as key field positions.
struct Covering {
    /// `_id`'s key field, when the projection includes `_id`.
    id: Option<usize>,
    /// The other included path and its key field.
    other: Option<(String, usize)>,
}

/// The conditions of a filter one index's keys decide (see the module documentation).
pub(super) struct KeyFilter {
    /// Each key field's direction (`true`: descending), up to the last field read.
    directions: Vec<bool>,
    conditions: Vec<KeyCondition>,
    /// The filter holds nothing but `conditions`: an entry passing them all is a match.
    whole: bool,
    /// A condition is on a multikey field: a match's array position (for a positional
    /// projection) comes only from matching its document.
    on_elements: bool,
    /// The decided conditions, for explain's `IXSCAN` `filter`.
    described: Vec<Bson>,
    covering: Option<Covering>,
}

impl KeyFilter {
    /// The conditions of `filter` that `index`'s keys decide, and the covering of
    /// `projection` when the keys answer it; `None` when the keys decide nothing.
    pub(super) fn new(
        index: &Index,
        filter: &Document,
        projection: Option<&Projection>,
    ) -> Option<KeyFilter> {
        let spec = &index.spec;
        let plain = spec.key.values().all(|v| match v {
            Bson::Int32(n) => *n == 1 || *n == -1,
            Bson::Int64(n) => *n == 1 || *n == -1,
            Bson::Double(n) => *n == 1.0 || *n == -1.0,
            _ => false,
        });
        if !plain || spec.collation.is_some() || index.is_building() || index.text().is_some() {
            return None;
        }
        let fields: Vec<(&str, bool)> = index.key_fields().collect();
        let position = |path: &str| {
            fields
                .iter()
                .position(|(p, _)| *p == path)
                .filter(|_| !has_positional_component(path))
        };
        let mut found = Vec::new();
        let mut whole = true;
        collect(filter, &mut found, &mut whole, 0);
        let mut conditions = Vec::new();
        let mut described = Vec::new();
        for (path, condition) in found {
            let field = position(&path).filter(|&field| {
                decidable(&condition, 0)
                    && (!index.is_multikey_field(field) || existential(&condition))
            });
            let parsed = field.and_then(|field| {
                let mut d = Document::new();
                d.insert(path.clone(), condition.clone());
                let filter = Filter::parse(&d).ok()?;
                Some((field, d, filter))
            });
            let Some((field, d, filter)) = parsed else {
                whole = false;
                continue;
            };
            described.push(Bson::Document(d));
            conditions.push(KeyCondition {
                field,
                path,
                filter,
                element: index.is_multikey_field(field),
                remembered: Vec::new(),
            });
        }
        let on_elements = conditions.iter().any(|c| c.element);
        // Covered only by an index multikey on no field: mongod also covers the fields an index
        // is not multikey on, docstore not yet (a key of a multikey index is one of several).
        let covering = projection
            .filter(|_| whole && !index.is_multikey())
            .and_then(|p| p.covered_paths())
            .and_then(|(id, others)| {
                let id = if id { Some(position("_id")?) } else { None };
                let other = match others.as_slice() {
                    [] => None,
                    [path] => Some((path.clone(), position(path)?)),
                    _ => return None,
                };
                Some(Covering { id, other })
            });
        if conditions.is_empty() && !whole {
            return None;
        }
        let last_read = conditions
            .iter()
            .map(|c| c.field)
            .chain(
                covering
                    .iter()
                    .flat_map(|c| c.id.into_iter().chain(c.other.as_ref().map(|o| o.1))),
            )
            .max();
        let directions = match last_read {
            Some(last) => fields[..=last].iter().map(|(_, d)| *d).collect(),
            None => Vec::new(),
        };
        Some(KeyFilter {
            directions,
            conditions,
            whole,
            on_elements,
            described,
            covering,
        })
    }

    /// Whether an entry that passes is a match without reading its document.
    pub(super) fn decides_whole_filter(&self) -> bool {
        self.whole
    }

    /// Whether a match found on the keys is still matched on its document when returned, for
    /// the array position a positional projection needs.
    fn needs_position(&self) -> bool {
        self.on_elements
    }

    /// The decided conditions as explain's `IXSCAN` stage shows its `filter`.
    pub(super) fn describe(&self) -> Option<Document> {
        match self.described.as_slice() {
            [] => None,
            [one] => one.as_document().cloned(),
            all => Some(bson::doc! { "$and": all.to_vec() }),
        }
    }

    /// Whether a matching entry's document comes from its key (see [`KeyFilter::cover`]).
    pub(super) fn covers(&self) -> bool {
        self.covering.is_some()
    }

    /// What `key` says of its document's match.
    pub(super) fn verdict(&mut self, key: &[u8]) -> Verdict {
        if self.conditions.is_empty() {
            return Verdict::Passes;
        }
        let Some(ends) = keystring::field_ends(key, &self.directions) else {
            return Verdict::Unknown;
        };
        let mut verdict = Verdict::Passes;
        for c in &mut self.conditions {
            let start = if c.field == 0 { 0 } else { ends[c.field - 1] };
            match c.verdict(&key[start..ends[c.field]], self.directions[c.field]) {
                Verdict::Fails => return Verdict::Fails,
                Verdict::Unknown => verdict = Verdict::Unknown,
                Verdict::Passes => {}
            }
        }
        verdict
    }

    /// The projected document of a matching entry, from its key alone; `None` when a value
    /// it needs is not kept exactly by the key (then the document is read and projected).
    pub(super) fn cover(&self, key: &[u8]) -> Option<StoredDoc> {
        let covering = self.covering.as_ref()?;
        let ends = keystring::field_ends(key, &self.directions)?;
        let value = |field: usize| -> Option<Bson> {
            let start = if field == 0 { 0 } else { ends[field - 1] };
            let part = &key[start..ends[field]];
            let descending = self.directions[field];
            match keystring::tag_of(part, descending)? {
                OBJECT_ID_TAG | BOOLEAN_TAG | DATE_TAG => {
                    keystring::decode_key(part, &[descending])?.pop()
                }
                _ => None,
            }
        };
        let mut doc = Document::new();
        if let Some(field) = covering.id {
            doc.insert("_id", value(field)?);
        }
        if let Some((path, field)) = &covering.other {
            doc.extend(nested(path, value(*field)?));
        }
        StoredDoc::from_document(&doc).ok()
    }
}

fn has_positional_component(path: &str) -> bool {
    path.split('.')
        .any(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
}

/// The per-path conditions of `filter` (its top level and top-level `$and`s); `whole` is
/// cleared when anything else is there (`$or`, `$expr`, `$text`...).
fn collect(filter: &Document, out: &mut Vec<(String, Bson)>, whole: &mut bool, depth: usize) {
    for (key, value) in filter {
        match (key.as_str(), value) {
            ("$and", Bson::Array(members)) if depth < crate::wire::MAX_BSON_DEPTH => {
                for member in members {
                    match member {
                        Bson::Document(d) => collect(d, out, whole, depth + 1),
                        _ => *whole = false,
                    }
                }
            }
            ("$comment", _) => {}
            (k, _) if k.starts_with('$') => *whole = false,
            (path, condition) => out.push((path.to_string(), condition.clone())),
        }
    }
}

/// Whether a condition uses only [`ALLOWED`] operators (an equality with a value, or an
/// operator document).
fn decidable(condition: &Bson, depth: usize) -> bool {
    match condition {
        Bson::Document(ops) if ops.keys().next().is_some_and(|k| k.starts_with('$')) => {
            ops.iter().all(|(op, arg)| {
                ALLOWED.contains(&op.as_str())
                    && (op != "$not"
                        || matches!(arg, Bson::RegularExpression(_))
                        || (depth < 8 && decidable(arg, depth + 1)))
            })
        }
        _ => true,
    }
}

/// Whether an array satisfies `condition` as soon as one element does: an equality with a
/// value, or operators of [`EXISTENTIAL`] only.
fn existential(condition: &Bson) -> bool {
    match condition {
        Bson::Document(ops) if ops.keys().next().is_some_and(|k| k.starts_with('$')) => {
            ops.keys().all(|op| EXISTENTIAL.contains(&op.as_str()))
        }
        Bson::Null | Bson::Array(_) => false,
        _ => true,
    }
}

/// The state of one scan through [`Collection::scan_keyed`].
pub(super) struct KeyedScan<'a> {
    pub key_filter: KeyFilter,
    pub matcher: RawMatcher<'a>,
    /// Matches still to pass over (the query's skip).
    pub to_pass: usize,
    /// Stop once this many hits are collected.
    pub stop_after: Option<usize>,
}

impl Collection {
    /// [`Collection::execute_plan`]'s scan over index entries whose keys decide some of the
    /// filter (see the module documentation): each entry's key is tested first, and its
    /// document read only when the key cannot tell, or to return it when no covering does.
    pub(super) fn scan_keyed<'k>(
        &self,
        entries: impl Iterator<Item = (&'k [u8], RecordId)>,
        scan: &mut KeyedScan<'_>,
        stats: &mut ExecStats,
        hits: &mut Vec<Hit>,
    ) -> Result<()> {
        let whole = scan.key_filter.decides_whole_filter();
        let mut clock = crate::deadline::Ticker::start();
        for (key, record) in entries {
            clock.tick()?;
            stats.keys_examined += 1;
            let verdict = scan.key_filter.verdict(key);
            if verdict == Verdict::Fails {
                continue;
            }
            let known = whole && verdict == Verdict::Passes;
            if known && scan.to_pass > 0 {
                scan.to_pass -= 1;
                continue;
            }
            let covered = if known {
                scan.key_filter.cover(key)
            } else {
                None
            };
            let (doc, position) = match covered {
                Some(doc) => (doc, None),
                None => {
                    let Some(doc) = self.docs.get(&record) else {
                        continue;
                    };
                    stats.docs_examined += 1;
                    let position = if known && !scan.key_filter.needs_position() {
                        // No array on the decided paths: no position to report.
                        None
                    } else {
                        match scan.matcher.matches(doc)? {
                            Some(position) => position,
                            None => continue,
                        }
                    };
                    if scan.to_pass > 0 {
                        scan.to_pass -= 1;
                        continue;
                    }
                    (doc.clone(), position)
                }
            };
            hits.push(Hit {
                record,
                doc,
                position,
                score: None,
            });
            if scan.stop_after.is_some_and(|n| hits.len() >= n) {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The key-decided and covered scans against the plain one (a collection scan with an
    //! in-memory sort) over the same queries: the same documents, in the same order, projected
    //! alike.
    use super::*;
    use crate::collection::QuerySpec;
    use crate::index::IndexSpec;
    use crate::query::SortSpec;
    use bson::oid::ObjectId;
    use bson::{doc, DateTime};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const STATUSES: [&str; 4] = ["active", "draft", "archived", "Draft"];

    fn status(rng: &mut StdRng) -> Option<Bson> {
        match rng.gen_range(0..10) {
            0 => None,
            1 => Some(Bson::Null),
            2 => Some(Bson::Boolean(true)),
            3 => Some(Bson::Int32(3)),
            _ => Some(Bson::String(STATUSES[rng.gen_range(0..4)].into())),
        }
    }

    fn date(rng: &mut StdRng) -> Option<Bson> {
        match rng.gen_range(0..12) {
            0 => None,
            1 => Some(Bson::Null),
            2 => Some(Bson::Int64(rng.gen_range(0..5))),
            3 => Some(Bson::Double(2.0)),
            _ => Some(Bson::DateTime(DateTime::from_millis(
                rng.gen_range(0..20) * 1_000,
            ))),
        }
    }

    fn product(rng: &mut StdRng, n: u8) -> Document {
        let mut d = doc! { "_id": ObjectId::from_bytes([n; 12]) };
        let mut details = Document::new();
        if let Some(v) = date(rng) {
            details.insert("issue_date", v);
        }
        match rng.gen_range(0..10) {
            0 => {}
            1 => {
                d.insert("details", 5);
            }
            _ => {
                d.insert("details", details);
            }
        }
        if let Some(v) = status(rng) {
            d.insert("status", v);
        }
        d.insert("title", format!("t{n}"));
        d
    }

    fn filter(rng: &mut StdRng) -> Document {
        let cut = Bson::DateTime(DateTime::from_millis(rng.gen_range(0..20) * 1_000));
        let on_sale = doc! { "status": { "$nin": ["draft", "archived"] } };
        match rng.gen_range(0..14) {
            0 => on_sale,
            1 => doc! { "status": "draft" },
            2 => doc! { "status": null },
            3 => doc! { "status": { "$exists": false } },
            4 => doc! { "status": { "$ne": null } },
            5 => doc! { "status": { "$in": ["active", null] } },
            6 => doc! { "status": { "$regex": "^a" } },
            7 => doc! { "status": { "$not": { "$eq": "draft" } } },
            8 => doc! { "$and": [on_sale, { "details.issue_date": { "$lt": cut } }] },
            9 => doc! { "$and": [
                on_sale,
                { "details.issue_date": cut, "_id": { "$lt": ObjectId::from_bytes([30; 12]) } },
            ] },
            10 => doc! { "status": { "$gt": "b" }, "title": { "$ne": "t3" } },
            11 => doc! { "$or": [{ "status": "active" }, { "title": "t4" }] },
            12 => doc! { "details.issue_date": { "$gte": cut } },
            _ => doc! {},
        }
    }

    fn projection(rng: &mut StdRng) -> Option<Document> {
        match rng.gen_range(0..6) {
            0 => None,
            1 => Some(doc! { "details.issue_date": 1, "_id": 1 }),
            2 => Some(doc! { "details.issue_date": 1, "_id": 0 }),
            3 => Some(doc! { "_id": 1 }),
            4 => Some(doc! { "status": 1 }),
            _ => Some(doc! { "title": 1, "details.issue_date": 1 }),
        }
    }

    /// The query's documents, projected, and what it did.
    fn run(
        c: &Collection,
        filter: &Document,
        hint: Bson,
        skip: usize,
        limit: Option<usize>,
        projection: Option<&Document>,
    ) -> (Vec<Document>, ExecStats) {
        let parsed = Filter::parse(filter).unwrap();
        let sort_doc = doc! { "details.issue_date": -1, "_id": -1 };
        let sort = SortSpec::parse(&sort_doc).unwrap();
        let projection = projection.map(|p| Projection::parse(p).unwrap());
        let query = QuerySpec {
            sort: Some(&sort),
            sort_doc: Some(&sort_doc),
            hint: Some(&hint),
            skip,
            limit,
            projection: projection.as_ref(),
            ..QuerySpec::filter_only(&parsed, filter)
        };
        let (hits, stats) = c.explain_query(&query).unwrap();
        let docs = hits
            .iter()
            .map(|hit| {
                let doc = hit.doc.to_document().unwrap();
                // A projection's error (`.$` on a document without the array) stands as a
                // document naming it, to compare too.
                match &projection {
                    Some(p) => p
                        .apply(&doc, hit.position)
                        .unwrap_or_else(|e| doc! { "error": e.message }),
                    None => doc,
                }
            })
            .collect();
        (docs, stats)
    }

    fn collection(rng: &mut StdRng) -> Collection {
        let mut c = Collection::new("db", "products", Document::new());
        let spec = doc! {
            "key": { "details.issue_date": -1, "_id": -1, "status": 1 },
            "name": "newest",
        };
        c.create_index(IndexSpec::parse(&spec).unwrap()).unwrap();
        for n in 0..60 {
            c.insert(product(rng, n)).unwrap();
        }
        c
    }

    fn compare_with_plain(c: &mut Collection, rng: &mut StdRng, rounds: usize) {
        for _ in 0..rounds {
            // Statuses change between queries.
            let n: u8 = rng.gen_range(0..60);
            let id = Bson::ObjectId(ObjectId::from_bytes([n; 12]));
            let record = c.find_by_id(&id).unwrap();
            let mut changed = c.get(record).unwrap().to_document().unwrap();
            match status(rng) {
                Some(s) => changed.insert("status", s),
                None => changed.remove("status"),
            };
            c.replace(record, changed).unwrap();

            let filter = filter(rng);
            let projection = projection(rng);
            let skip = rng.gen_range(0..30);
            let limit = [None, Some(1), Some(5), Some(12)][rng.gen_range(0..4)];
            let (keyed, _) = run(
                c,
                &filter,
                Bson::String("newest".into()),
                skip,
                limit,
                projection.as_ref(),
            );
            let (plain, _) = run(
                c,
                &filter,
                Bson::Document(doc! { "$natural": 1 }),
                skip,
                limit,
                projection.as_ref(),
            );
            assert_eq!(
                keyed, plain,
                "filter {filter} skip {skip} limit {limit:?} projection {projection:?}"
            );
        }
    }

    #[test]
    fn key_decided_and_covered_reads_return_what_reading_every_document_does() {
        for seed in 0..6 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut c = collection(&mut rng);
            compare_with_plain(&mut c, &mut rng, 150);
        }
    }

    #[test]
    fn under_a_case_insensitive_collation_keys_decide_as_the_documents_do() {
        let requested = crate::collation::parse(Some(&Bson::Document(
            doc! { "locale": "en", "strength": 2 },
        )))
        .unwrap();
        let _collation = crate::collation::enter(requested.or_default(None));
        for seed in 10..13 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut c = collection(&mut rng);
            compare_with_plain(&mut c, &mut rng, 100);
        }
    }

    #[test]
    fn a_multikey_index_decides_only_its_other_fields_and_still_agrees() {
        let mut rng = StdRng::seed_from_u64(20);
        let mut c = collection(&mut rng);
        c.insert(doc! { "_id": ObjectId::from_bytes([200; 12]), "status": ["draft", "active"] })
            .unwrap();
        let index = &c.indexes()[1];
        assert!(index.is_multikey());
        // A negation on a multikey field is not told by one element.
        let not_draft = doc! { "status": { "$nin": ["draft"] } };
        assert!(KeyFilter::new(index, &not_draft, None).is_none());
        compare_with_plain(&mut c, &mut rng, 100);
    }

    #[test]
    fn on_a_multikey_field_an_element_decides_only_a_match() {
        for seed in 30..34 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut c = Collection::new("db", "products", Document::new());
            let spec = doc! {
                "key": { "cats": 1, "details.issue_date": -1, "_id": -1, "status": 1 },
                "name": "newest",
            };
            c.create_index(IndexSpec::parse(&spec).unwrap()).unwrap();
            for n in 0..60 {
                let mut d = product(&mut rng, n);
                let cats: Vec<Bson> = (0..rng.gen_range(0..4))
                    .map(|_| Bson::String(["a", "b", "c"][rng.gen_range(0..3)].into()))
                    .collect();
                match rng.gen_range(0..6) {
                    0 => {}
                    1 => {
                        d.insert("cats", "a");
                    }
                    _ => {
                        d.insert("cats", cats);
                    }
                }
                c.insert(d).unwrap();
            }
            let index = &c.indexes()[1];
            assert!(index.is_multikey_field(0) && !index.is_multikey_field(3));
            let on_sale = doc! { "status": { "$nin": ["draft", "archived"] } };
            for _ in 0..100 {
                let cat = ["a", "b", "c"][rng.gen_range(0..3)];
                let filter = match rng.gen_range(0..5) {
                    0 => doc! { "cats": cat, "status": { "$nin": ["draft", "archived"] } },
                    1 => doc! { "cats": { "$in": [cat, "b"] }, "status": "active" },
                    2 => doc! { "$and": [{ "cats": cat }, on_sale.clone()] },
                    3 => doc! { "cats": { "$ne": cat } },
                    _ => doc! { "cats": { "$gte": cat }, "status": null },
                };
                let projection = match rng.gen_range(0..3) {
                    0 => None,
                    1 => Some(doc! { "cats.$": 1 }),
                    _ => Some(doc! { "details.issue_date": 1, "_id": 1 }),
                };
                let skip = rng.gen_range(0..20);
                let limit = [None, Some(3), Some(12)][rng.gen_range(0..3)];
                // The positional projection needs the array the filter names matched.
                if projection
                    .as_ref()
                    .is_some_and(|p| p.contains_key("cats.$"))
                    && !filter.contains_key("cats")
                {
                    continue;
                }
                let (keyed, stats) = run(
                    &c,
                    &filter,
                    Bson::String("newest".into()),
                    skip,
                    limit,
                    projection.as_ref(),
                );
                assert_ne!(
                    stats.winning_plan.get_str("stage").unwrap(),
                    "PROJECTION_COVERED"
                );
                let (plain, _) = run(
                    &c,
                    &filter,
                    Bson::Document(doc! { "$natural": 1 }),
                    skip,
                    limit,
                    projection.as_ref(),
                );
                assert_eq!(keyed, plain, "filter {filter} skip {skip} limit {limit:?}");
            }
        }
    }

    #[test]
    fn a_collated_index_decides_nothing() {
        let mut c = Collection::new("db", "products", Document::new());
        let spec = doc! {
            "key": { "status": 1 },
            "name": "status",
            "collation": { "locale": "en", "strength": 2 },
        };
        c.create_index(IndexSpec::parse(&spec).unwrap()).unwrap();
        assert!(KeyFilter::new(&c.indexes()[1], &doc! { "status": "draft" }, None).is_none());
    }

    /// Products with a status, newest first by `_id`: every third one a draft.
    fn catalog() -> Collection {
        let mut c = Collection::new("db", "products", Document::new());
        let spec = doc! {
            "key": { "details.issue_date": -1, "_id": -1, "status": 1 },
            "name": "newest",
        };
        c.create_index(IndexSpec::parse(&spec).unwrap()).unwrap();
        for n in 0..90u8 {
            let mut d = doc! {
                "_id": ObjectId::from_bytes([n; 12]),
                "details": { "issue_date": DateTime::from_millis(i64::from(n) * 1_000) },
            };
            if n % 3 == 0 {
                d.insert("status", "draft");
            } else if n % 3 == 1 {
                d.insert("status", "active");
            }
            c.insert(d).unwrap();
        }
        c
    }

    #[test]
    fn skipped_and_rejected_entries_read_no_document() {
        let c = catalog();
        let on_sale = doc! { "status": { "$nin": ["draft", "archived"] } };
        let (docs, stats) = run(
            &c,
            &on_sale,
            Bson::String("newest".into()),
            24,
            Some(12),
            None,
        );
        assert_eq!(docs.len(), 12);
        // 53 entries walked to the 36th match (every third a draft): only the twelve returned
        // are read.
        assert_eq!(stats.keys_examined, 53);
        assert_eq!(stats.docs_examined, 12);
        let input = stats.winning_plan.get_document("inputStage").unwrap();
        assert_eq!(stats.winning_plan.get_str("stage").unwrap(), "FETCH");
        assert_eq!(input.get_document("filter").unwrap(), &on_sale);
    }

    #[test]
    fn a_covered_read_reads_no_document_and_says_so() {
        let c = catalog();
        let on_sale = doc! { "status": { "$nin": ["draft", "archived"] } };
        let projection = doc! { "details.issue_date": 1, "_id": 1 };
        let (docs, stats) = run(
            &c,
            &on_sale,
            Bson::String("newest".into()),
            0,
            Some(40),
            Some(&projection),
        );
        assert_eq!(docs.len(), 40);
        assert_eq!(stats.docs_examined, 0);
        assert_eq!(
            docs[0],
            doc! {
                "_id": ObjectId::from_bytes([89; 12]),
                "details": { "issue_date": DateTime::from_millis(89_000) },
            }
        );
        assert_eq!(
            stats.winning_plan.get_str("stage").unwrap(),
            "PROJECTION_COVERED"
        );
        // A number in the key does not say its type: those documents are read.
        let mut c = catalog();
        let id = Bson::ObjectId(ObjectId::from_bytes([88; 12]));
        let record = c.find_by_id(&id).unwrap();
        c.replace(
            record,
            doc! { "_id": id.clone(), "details": { "issue_date": 7.5 } },
        )
        .unwrap();
        let (docs, stats) = run(
            &c,
            &on_sale,
            Bson::String("newest".into()),
            0,
            None,
            Some(&projection),
        );
        assert_eq!((docs.len(), stats.docs_examined), (60, 1));
        // Numbers sort below dates: last, newest first.
        assert_eq!(
            docs.last().unwrap(),
            &doc! { "_id": id, "details": { "issue_date": 7.5 } }
        );
    }
}
