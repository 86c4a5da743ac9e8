//! Sort specifications: several keys, dotted paths, MongoDB's cross-type order, arrays sorting by
//! their least (ascending) or greatest (descending) element.
//!
//! A document's key for one path is chosen among the values the path reaches: array elements are
//! candidates one by one, a missing field (also inside an array's documents) counts as null, and
//! an empty array counts as `undefined`, which sorts just before null.

use crate::error::{Error, Result};
use crate::path::array_position;
use crate::value::compare;
use bson::{Bson, Document};
use std::cmp::Ordering;

#[derive(Debug, Clone)]
pub(crate) struct SortSpec {
    /// (dotted path, ascending?)
    pub keys: Vec<(String, bool)>,
}

static NULL: Bson = Bson::Null;

/// `$meta` names MongoDB knows besides `textScore` (docstore has none of their data).
const META_NAMES: &[&str] = &[
    "randVal",
    "searchScore",
    "searchHighlights",
    "searchScoreDetails",
    "indexKey",
    "recordId",
    "sortKey",
    "geoNearDistance",
    "geoNearPoint",
    "vectorSearchScore",
];
static UNDEFINED: Bson = Bson::Undefined;

impl SortSpec {
    /// Parse `{field: 1 | -1, ...}`. An empty spec parses (no keys); `$sort` stages reject it
    /// themselves, while `find` treats it as "no sort".
    pub(crate) fn parse(spec: &Document) -> Result<SortSpec> {
        let mut keys = Vec::with_capacity(spec.len());
        for (path, value) in spec {
            if path.is_empty() {
                return Err(Error::location(
                    40352,
                    "FieldPath cannot be constructed with empty string",
                ));
            }
            if path.split('.').any(str::is_empty) {
                return Err(Error::location(
                    15998,
                    "FieldPath field names may not be empty strings.",
                ));
            }
            if path.starts_with('$') {
                return Err(Error::location(
                    16410,
                    "FieldPath field names may not start with '$'.",
                ));
            }
            let ascending = match value {
                Bson::Document(d) if d.contains_key("$meta") => {
                    match d.get("$meta") {
                        Some(Bson::String(m)) if m == "textScore" && d.len() == 1 => {
                            // Highest score first, always.
                            keys.push((crate::text::SCORE_FIELD.to_string(), false));
                            continue;
                        }
                        Some(Bson::String(m))
                            if d.len() == 1 && META_NAMES.contains(&m.as_str()) =>
                        {
                            return Err(Error::not_supported(format!("sorting by $meta: {m}")))
                        }
                        Some(other) if d.len() == 1 => {
                            return Err(Error::location(
                                17308,
                                format!("Unsupported argument to $meta: {other}"),
                            ))
                        }
                        _ => {
                            return Err(Error::location(
                                17312,
                                "$meta is the only expression supported by $sort right now",
                            ))
                        }
                    }
                }
                Bson::Document(_) => {
                    return Err(Error::location(
                        17312,
                        "$meta is the only expression supported by $sort right now",
                    ))
                }
                Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                    let direction = crate::value::to_f64(value);
                    if direction == Some(1.0) {
                        true
                    } else if direction == Some(-1.0) {
                        false
                    } else {
                        return Err(Error::location(
                            15975,
                            "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                        ));
                    }
                }
                other => {
                    return Err(Error::location(
                        15974,
                        format!("Illegal key in $sort specification: {path}: {other}"),
                    ))
                }
            };
            keys.push((path.clone(), ascending));
        }
        Ok(SortSpec { keys })
    }

    /// Whether a key is `{$meta: "textScore"}`.
    pub(crate) fn uses_text_score(&self) -> bool {
        self.keys
            .iter()
            .any(|(path, _)| path == crate::text::SCORE_FIELD)
    }

    pub(crate) fn compare(&self, a: &Document, b: &Document) -> Ordering {
        self.compare_scored(a, None, b, None)
    }

    /// [`SortSpec::compare`] with the documents' text scores given beside them (a document
    /// inside a pipeline carries its score in a hidden field instead).
    pub(crate) fn compare_scored(
        &self,
        a: &Document,
        a_score: Option<f64>,
        b: &Document,
        b_score: Option<f64>,
    ) -> Ordering {
        for (path, ascending) in &self.keys {
            if path == crate::text::SCORE_FIELD && (a_score.is_some() || b_score.is_some()) {
                let ord = a_score
                    .unwrap_or(0.0)
                    .total_cmp(&b_score.unwrap_or(0.0))
                    .reverse();
                if ord != Ordering::Equal {
                    return ord;
                }
                continue;
            }
            let ka = sort_value(a, path, *ascending);
            let kb = sort_value(b, path, *ascending);
            let ord = compare(ka, kb);
            let ord = if *ascending { ord } else { ord.reverse() };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    }
}

/// The least (ascending) or greatest (descending) candidate value at `path`.
pub(crate) fn sort_value<'a>(doc: &'a Document, path: &str, ascending: bool) -> &'a Bson {
    let mut best: Option<&'a Bson> = None;
    candidates_in_document(doc, path, &mut |candidate| {
        let better = match best {
            None => true,
            Some(current) => {
                let ord = compare(candidate, current);
                if ascending {
                    ord == Ordering::Less
                } else {
                    ord == Ordering::Greater
                }
            }
        };
        if better {
            best = Some(candidate);
        }
    });
    best.unwrap_or(&NULL)
}

fn candidates_in_document<'a>(doc: &'a Document, path: &str, f: &mut dyn FnMut(&'a Bson)) {
    let (head, rest) = match path.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (path, None),
    };
    match doc.get(head) {
        None => f(&NULL),
        Some(value) => candidates_in_value(value, rest, f),
    }
}

fn candidates_in_value<'a>(value: &'a Bson, rest: Option<&str>, f: &mut dyn FnMut(&'a Bson)) {
    let Some(rest) = rest else {
        match value {
            Bson::Array(items) if items.is_empty() => f(&UNDEFINED),
            Bson::Array(items) => items.iter().for_each(f),
            other => f(other),
        }
        return;
    };
    match value {
        Bson::Document(d) => candidates_in_document(d, rest, f),
        Bson::Array(items) => {
            let head = rest.split_once('.').map_or(rest, |(head, _)| head);
            if let Some(i) = array_position(head) {
                let tail = rest.split_once('.').map(|(_, tail)| tail);
                match items.get(i) {
                    Some(item) => candidates_in_value(item, tail, f),
                    None => f(&NULL),
                }
                return;
            }
            if items.is_empty() {
                f(&NULL);
            }
            for item in items {
                match item {
                    Bson::Document(d) => candidates_in_document(d, rest, f),
                    _ => f(&NULL),
                }
            }
        }
        _ => f(&NULL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use bson::doc;

    fn sorted(spec: Document, docs: Vec<Document>) -> Vec<i32> {
        let spec = SortSpec::parse(&spec).unwrap();
        let mut docs = docs;
        docs.sort_by(|a, b| spec.compare(a, b));
        docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
    }

    #[test]
    fn parse_accepts_any_numeric_one_or_minus_one() {
        let spec = SortSpec::parse(&doc! {"a": 1, "b": -1_i64, "c": 1.0, "d": -1.0}).unwrap();
        assert_eq!(
            spec.keys,
            vec![
                ("a".to_string(), true),
                ("b".to_string(), false),
                ("c".to_string(), true),
                ("d".to_string(), false)
            ]
        );
        assert!(SortSpec::parse(&doc! {}).unwrap().keys.is_empty());
    }

    #[test]
    fn parse_rejects_other_orderings() {
        let e = SortSpec::parse(&doc! {"a": 2}).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location(15975));
        assert_eq!(
            e.message,
            "$sort key ordering must be 1 (for ascending) or -1 (for descending)"
        );
        assert_eq!(
            SortSpec::parse(&doc! {"a": 0}).unwrap_err().code,
            ErrorCode::Location(15975)
        );
        assert_eq!(
            SortSpec::parse(&doc! {"a": "asc"}).unwrap_err().code,
            ErrorCode::Location(15974)
        );
        let meta = SortSpec::parse(&doc! {"a": {"$meta": "textScore"}, "b": 1}).unwrap();
        assert!(meta.uses_text_score());
        assert_eq!(
            SortSpec::parse(&doc! {"a": {"$meta": "bogus"}})
                .unwrap_err()
                .code,
            ErrorCode::Location(17308)
        );
    }

    #[test]
    fn several_keys_break_ties_in_order() {
        let docs = vec![
            doc! {"_id": 1, "a": 1, "b": 1},
            doc! {"_id": 2, "a": 2, "b": 0},
            doc! {"_id": 3, "a": 1, "b": 5},
        ];
        assert_eq!(sorted(doc! {"a": 1, "b": -1}, docs.clone()), vec![3, 1, 2]);
        assert_eq!(sorted(doc! {"a": -1, "b": 1}, docs), vec![2, 1, 3]);
    }

    #[test]
    fn values_of_different_types_sort_in_mongodb_order() {
        let docs = vec![
            doc! {"_id": 1, "a": "str"},
            doc! {"_id": 2, "a": 10_i64},
            doc! {"_id": 3},
            doc! {"_id": 4, "a": {"x": 1}},
            doc! {"_id": 5, "a": 2.5},
            doc! {"_id": 6, "a": true},
            doc! {"_id": 7, "a": Bson::MinKey},
        ];
        assert_eq!(
            sorted(doc! {"a": 1}, docs.clone()),
            vec![7, 3, 5, 2, 1, 4, 6]
        );
        assert_eq!(sorted(doc! {"a": -1}, docs), vec![6, 4, 1, 2, 5, 3, 7]);
    }

    #[test]
    fn missing_sorts_as_null_and_keeps_input_order() {
        let docs = vec![
            doc! {"_id": 1, "a": null},
            doc! {"_id": 2},
            doc! {"_id": 3, "a": null},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs), vec![1, 2, 3]);
    }

    #[test]
    fn arrays_sort_by_least_element_ascending_and_greatest_descending() {
        let docs = vec![
            doc! {"_id": 1, "a": [1, 9]},
            doc! {"_id": 2, "a": 5},
            doc! {"_id": 3, "a": [3, 4]},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs.clone()), vec![1, 3, 2]);
        assert_eq!(sorted(doc! {"a": -1}, docs), vec![1, 2, 3]);
    }

    #[test]
    fn empty_arrays_sort_before_null() {
        let docs = vec![
            doc! {"_id": 1, "a": null},
            doc! {"_id": 2, "a": []},
            doc! {"_id": 3, "a": 1},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs.clone()), vec![2, 1, 3]);
        assert_eq!(sorted(doc! {"a": -1}, docs), vec![3, 1, 2]);
    }

    #[test]
    fn dotted_paths_reach_through_arrays_of_documents() {
        let docs = vec![
            doc! {"_id": 1, "items": [{"p": 5}, {"p": 1}]},
            doc! {"_id": 2, "items": [{"p": 3}]},
            doc! {"_id": 3, "items": {"p": 2}},
        ];
        assert_eq!(sorted(doc! {"items.p": 1}, docs.clone()), vec![1, 3, 2]);
        assert_eq!(sorted(doc! {"items.p": -1}, docs), vec![1, 2, 3]);
        // An element without the field counts as null.
        let docs = vec![
            doc! {"_id": 1, "items": [{"p": 5}, {}]},
            doc! {"_id": 2, "items": [{"p": 3}]},
        ];
        assert_eq!(sorted(doc! {"items.p": 1}, docs), vec![1, 2]);
    }

    #[test]
    fn numeric_path_parts_sort_by_array_position() {
        let docs = vec![doc! {"_id": 1, "a": [5, 0]}, doc! {"_id": 2, "a": [3, 9]}];
        assert_eq!(sorted(doc! {"a.0": 1}, docs.clone()), vec![2, 1]);
        assert_eq!(sorted(doc! {"a.1": 1}, docs), vec![1, 2]);
    }

    #[test]
    fn numbers_compare_across_types_when_sorting() {
        let docs = vec![
            doc! {"_id": 1, "a": 3.5},
            doc! {"_id": 2, "a": 2_i64},
            doc! {"_id": 3, "a": 3},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs), vec![2, 3, 1]);
    }
}
