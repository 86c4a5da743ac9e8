//! Sort specifications: several keys, dotted paths, MongoDB's cross-type order, arrays sorting by
//! their least (ascending) or greatest (descending) element.
//!
//! A document's key for one path is chosen among the values the path reaches: array elements are
//! candidates one by one, a missing field (also inside an array's documents) counts as null, and
//! an empty array counts as `undefined`, which sorts just before null.

use super::path::array_position;
use crate::error::{Error, Result};
use crate::value::compare;
use bson::{Bson, Document};
use std::cmp::Ordering;

#[derive(Debug, Clone)]
pub struct SortSpec {
    /// (dotted path, ascending?)
    pub keys: Vec<(String, bool)>,
}

static NULL: Bson = Bson::Null;
static UNDEFINED: Bson = Bson::Undefined;

impl SortSpec {
    /// Parse `{field: 1 | -1, ...}`. An empty spec parses (no keys); `$sort` stages reject it
    /// themselves, while `find` treats it as "no sort".
    pub fn parse(spec: &Document) -> Result<SortSpec> {
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
                    return Err(Error::not_supported("sorting by $meta"))
                }
                Bson::Document(_) => {
                    return Err(Error::location(
                        17312,
                        "$meta is the only expression supported by $sort right now",
                    ))
                }
                Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                    match crate::value::to_f64(value) {
                        Some(n) if n == 1.0 => true,
                        Some(n) if n == -1.0 => false,
                        _ => {
                            return Err(Error::location(
                                15975,
                                "$sort key ordering must be 1 (for ascending) or -1 (for \
                                 descending)",
                            ))
                        }
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

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        for (path, ascending) in &self.keys {
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

    /// The values a document sorts by, one per key; compare them with [`SortSpec::compare_keys`].
    /// Extracting keys once per document is cheaper than [`SortSpec::compare`] on large sorts.
    pub fn sort_key(&self, doc: &Document) -> Vec<Bson> {
        self.keys
            .iter()
            .map(|(path, ascending)| sort_value(doc, path, *ascending).clone())
            .collect()
    }

    pub fn compare_keys(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for ((x, y), (_, ascending)) in a.iter().zip(b.iter()).zip(self.keys.iter()) {
            let ord = compare(x, y);
            let ord = if *ascending { ord } else { ord.reverse() };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    }
}

/// The least (ascending) or greatest (descending) candidate value at `path`.
pub fn sort_value<'a>(doc: &'a Document, path: &str, ascending: bool) -> &'a Bson {
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
            Bson::Array(items) => items.iter().for_each(|item| f(item)),
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
