//! Answering from index keys alone: a `count` whose filter the index bounds express exactly
//! counts keys without looking at a single document, and a query walking such an index skips
//! its `skip` first keys without fetching or matching their documents.
//!
//! "Exactly" is deliberately narrow: every condition of the filter is an equality on a scalar
//! (`{ f: v }` or `{ f: { $eq: v } }`, `v` a string, number, boolean, ObjectId or date), the
//! fields are the leading fields of a plain ascending/descending index (not sparse, not
//! partial, of the query's collation), and the planner chose that index with bounds from those
//! equalities. An empty filter
//! is answered by any such index scan with full bounds. Anything else (ranges, `$in`, nulls,
//! arrays, regular expressions, `$or`) goes the ordinary way, matching each document.

use super::{Collection, QuerySpec};
use crate::error::Result;
use crate::index::planner::Plan;
use crate::index::Index;
use bson::{Bson, Document};

/// The value of an exact scalar equality condition, or `None`.
fn scalar_equality(condition: &Bson) -> Option<&Bson> {
    let value = match condition {
        Bson::Document(d) if d.len() == 1 => d.get("$eq")?,
        Bson::Document(_) => return None,
        other => other,
    };
    match value {
        Bson::String(_)
        | Bson::Int32(_)
        | Bson::Int64(_)
        | Bson::Boolean(_)
        | Bson::ObjectId(_)
        | Bson::DateTime(_) => Some(value),
        Bson::Double(d) if d.is_finite() => Some(value),
        _ => None,
    }
}

/// True when `index`, scanned within bounds the planner built for `filter`, yields exactly the
/// documents matching `filter` (each once, as [`Index::scan`] deduplicates).
pub(crate) fn index_answers(index: &Index, filter: &Document, bounds_full: bool) -> bool {
    let spec = &index.spec;
    if spec.sparse || spec.partial_filter.is_some() {
        return false;
    }
    // An index of another collation than the query's gets no bounds from strings (a hinted
    // scan of it walks every key of the other fields' bounds), so its keys cannot tell.
    let collation = crate::collation::current();
    if !crate::collation::same(spec.collation.as_ref(), collation.as_ref()) {
        return false;
    }
    // Plain key patterns only (no text or other special index kinds).
    if !spec.key.values().all(|v| match v {
        Bson::Int32(n) => *n == 1 || *n == -1,
        Bson::Int64(n) => *n == 1 || *n == -1,
        Bson::Double(n) => *n == 1.0 || *n == -1.0,
        _ => false,
    }) {
        return false;
    }
    if filter.is_empty() {
        return bounds_full;
    }
    if bounds_full {
        return false;
    }
    let leading: Vec<&str> = index
        .key_fields()
        .take(filter.len())
        .map(|(path, _)| path)
        .collect();
    if leading.len() != filter.len() {
        return false;
    }
    filter.iter().all(|(field, condition)| {
        !field.starts_with('$')
            && leading.contains(&field.as_str())
            && scalar_equality(condition).is_some()
    })
}

impl Collection {
    /// The chosen plan's index when it answers `query`'s filter by itself.
    pub(super) fn answering_index(&self, plan: &Plan, filter: &Document) -> Option<&Index> {
        match plan {
            Plan::IndexScan { index, bounds, .. } => {
                let idx = self.indexes.get(*index)?;
                index_answers(idx, filter, bounds.is_full()).then_some(idx)
            }
            Plan::CollScan => None,
        }
    }

    /// How many documents match `query` (after its skip, up to its limit): from index keys
    /// when the index answers the filter, else by matching documents.
    pub(crate) fn count_matching(&self, query: &QuerySpec<'_>) -> Result<usize> {
        let plan = self.plan(query)?;
        if let (Plan::IndexScan { bounds, .. }, Some(index)) =
            (&plan, self.answering_index(&plan, query.filter_doc))
        {
            let total =
                crate::deadline::count(index.scan(bounds, false))?.saturating_sub(query.skip);
            return Ok(query.limit.map_or(total, |l| total.min(l)));
        }
        Ok(self.query(query)?.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Filter;
    use bson::doc;

    fn collection() -> Collection {
        let mut c = Collection::new("db", "products", Document::new());
        for spec in [
            doc! { "key": { "cat": 1, "date": -1, "_id": -1 }, "name": "cat_date" },
            doc! { "key": { "tags": 1 }, "name": "tags" },
            doc! { "key": { "kind": 1 }, "name": "kind_sparse", "sparse": true },
        ] {
            c.create_index(crate::index::IndexSpec::parse(&spec).unwrap())
                .unwrap();
        }
        for i in 0..50 {
            let mut d = doc! {
                "_id": i,
                "cat": ["a", if i % 2 == 0 { "b" } else { "c" }],
                "date": i * 10,
                "tags": if i % 5 == 0 { Bson::Array(vec!["x".into(), "x".into()]) } else { Bson::String("y".into()) },
            };
            if i % 3 == 0 {
                d.insert("kind", "k");
            }
            c.insert(d).unwrap();
        }
        c
    }

    fn count(c: &Collection, filter: Document, skip: usize, limit: Option<usize>) -> (usize, bool) {
        let parsed = Filter::parse(&filter).unwrap();
        let q = QuerySpec {
            skip,
            limit,
            ..QuerySpec::filter_only(&parsed, &filter)
        };
        let from_index = c.answering_index(&c.plan(&q).unwrap(), &filter).is_some();
        let n = c.count_matching(&q).unwrap();
        assert_eq!(n, c.query(&q).unwrap().0.len(), "{filter}");
        (n, from_index)
    }

    #[test]
    fn equality_on_a_leading_indexed_field_is_counted_from_keys() {
        let c = collection();
        assert_eq!(count(&c, doc! { "cat": "a" }, 0, None), (50, true));
        assert_eq!(count(&c, doc! { "cat": "b" }, 0, None), (25, true));
        assert_eq!(
            count(&c, doc! { "cat": { "$eq": "c" } }, 5, Some(10)),
            (10, true)
        );
        // A value repeated inside one document's array counts that document once.
        assert_eq!(count(&c, doc! { "tags": "x" }, 0, None), (10, true));
        assert_eq!(count(&c, doc! { "cat": "zzz" }, 0, None), (0, true));
    }

    #[test]
    fn other_filters_match_documents_and_agree() {
        let c = collection();
        // A range, a field off the index prefix, a sparse index, null and a regex.
        assert!(!count(&c, doc! { "cat": { "$gt": "a" } }, 0, None).1);
        assert!(!count(&c, doc! { "cat": "a", "tags": "y" }, 0, None).1);
        assert!(!count(&c, doc! { "kind": "k" }, 0, None).1);
        assert!(!count(&c, doc! { "cat": Bson::Null }, 0, None).1);
        assert!(!count(&c, doc! { "cat": { "$regex": "^a" } }, 0, None).1);
        assert_eq!(count(&c, doc! { "kind": "k" }, 0, None).0, 17);
    }
}
