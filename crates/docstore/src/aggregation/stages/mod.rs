//! The pipeline stages with more than a line of logic: `$unwind`, `$lookup`, `$graphLookup`,
//! `$bucket`, `$bucketAuto` and `$collStats` (one file each), `$replaceRoot`, `$sample`, the top-k sort, and the argument parsing of
//! `$skip`/`$limit`/`$count`.

use super::accumulators::{Group, OrdBson};
use super::{Pipeline, PipelineContext};
use crate::error::{Error, Result};
use crate::expression::{Expression, Scope};
use crate::printing::{fmt_document, fmt_double, fmt_value, type_of};
use crate::query::SortSpec;
use crate::value::{self, canonical_rank, compare, Number};
use bson::{Bson, Document};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};

mod bucket;
mod bucket_auto;
mod coll_stats;
mod graph_lookup;
mod lookup;
mod unwind;

pub(crate) use bucket::Bucket;
pub(crate) use bucket_auto::BucketAuto;
pub(crate) use coll_stats::CollStats;
pub(crate) use graph_lookup::GraphLookup;
pub(crate) use lookup::Lookup;
pub(crate) use unwind::Unwind;

/// How `parseIntegerElementToNonNegativeLong` prints the value it rejects (`$skip: 2.5`):
/// integral doubles keep a ".0".
fn element_string(name: &str, v: &Bson) -> String {
    let shown = match v {
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 1e15 => format!("{d:.1}"),
        Bson::Double(d) => fmt_double(*d),
        other => fmt_value(other),
    };
    format!("{name}: {shown}")
}

/// The argument of `$skip`/`$limit`: a whole, non-negative number of any numeric type.
pub(crate) fn parse_non_negative(v: &Bson, name: &str, code: i32) -> Result<u64> {
    let fail = |reason: String| {
        Error::location(code, format!("invalid argument to {name} stage: {reason}"))
    };
    let n = match v {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(_) | Bson::Decimal128(_) => {
            let d = value::to_f64(v).unwrap_or(f64::NAN);
            if d.is_nan() {
                return Err(fail(format!(
                    "Expected an integer, but found NaN in: {}",
                    element_string(name, v)
                )));
            }
            if !(-9.223372036854776e18..9.223372036854776e18).contains(&d) {
                return Err(fail(format!(
                    "Cannot represent as a 64-bit integer: {}",
                    element_string(name, v)
                )));
            }
            if d.fract() != 0.0 {
                return Err(fail(format!(
                    "Expected an integer: {}",
                    element_string(name, v)
                )));
            }
            d as i64
        }
        other => {
            return Err(fail(format!(
                "Expected a number in: {}",
                element_string(name, other)
            )))
        }
    };
    if n < 0 {
        return Err(fail(format!(
            "Expected a non-negative number in: {}",
            element_string(name, v)
        )));
    }
    Ok(n as u64)
}

pub(crate) fn parse_count(v: &Bson) -> Result<String> {
    let Bson::String(s) = v else {
        return Err(Error::location(
            40156,
            "the count field must be a non-empty string",
        ));
    };
    if s.is_empty() {
        return Err(Error::location(
            40157,
            "the count field must be a non-empty string",
        ));
    }
    if s.starts_with('$') {
        return Err(Error::location(
            40158,
            "the count field cannot be a $-prefixed path",
        ));
    }
    if s.contains('\0') {
        return Err(Error::location(
            40159,
            "the count field cannot contain a null byte",
        ));
    }
    if s.contains('.') {
        return Err(Error::location(40160, "the count field cannot contain '.'"));
    }
    Ok(s.clone())
}

/// A field path given as a string without the `$` (`includeArrayIndex`, `as`).
fn split_field_path(path: &str) -> Result<Vec<String>> {
    if path.is_empty() {
        return Err(Error::location(
            40352,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    path.split('.')
        .map(|p| {
            if p.is_empty() {
                Err(Error::location(
                    15998,
                    "FieldPath field names may not be empty strings.",
                ))
            } else if p.starts_with('$') {
                Err(Error::location(
                    16410,
                    "FieldPath field names may not start with '$'. Consider using $getField or \
                     $setField.",
                ))
            } else {
                Ok(p.to_string())
            }
        })
        .collect()
}

/// The value at a dotted path through embedded documents only (no array traversal).
fn get_nested<'a>(doc: &'a Document, path: &[String]) -> Option<&'a Bson> {
    let (first, rest) = path.split_first()?;
    let v = doc.get(first)?;
    if rest.is_empty() {
        return Some(v);
    }
    match v {
        Bson::Document(d) => get_nested(d, rest),
        _ => None,
    }
}

/// Set the value at a dotted path, creating (or replacing non-document) intermediate values.
pub(crate) fn set_nested(doc: &mut Document, path: &[String], value: Bson) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(first.clone(), value);
        return;
    }
    if !matches!(doc.get(first), Some(Bson::Document(_))) {
        doc.insert(first.clone(), Document::new());
    }
    if let Some(Bson::Document(child)) = doc.get_mut(first) {
        set_nested(child, rest, value);
    }
}

fn remove_nested(doc: &mut Document, path: &[String]) {
    match path {
        [] => {}
        [last] => {
            doc.remove(last);
        }
        [first, rest @ ..] => {
            if let Some(Bson::Document(child)) = doc.get_mut(first) {
                remove_nested(child, rest);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// $replaceRoot / $replaceWith

pub(crate) fn parse_replace_root(spec: &Bson) -> Result<Expression> {
    let Bson::Document(d) = spec else {
        return Err(Error::type_mismatch(format!(
            "BSON field '$replaceRoot' is the wrong type '{}', expected type 'object'",
            value::type_name(spec)
        )));
    };
    let mut new_root = None;
    for (k, v) in d {
        if k == "newRoot" {
            new_root = Some(Expression::parse(v)?);
        } else {
            return Err(Error::location(
                40415,
                format!("BSON field '$replaceRoot.{k}' is an unknown field."),
            ));
        }
    }
    new_root.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field '$replaceRoot.newRoot' is missing but a required field",
        )
    })
}

pub(crate) fn replace_root(
    expr: &Expression,
    with: bool,
    doc: &Document,
    vars: &Document,
) -> Result<Document> {
    let v = expr.eval(&Scope::new(doc, vars))?;
    match v {
        Some(Bson::Document(d)) => Ok(d),
        other => {
            let what = if with {
                "'replacement document'"
            } else {
                "'newRoot' expression"
            };
            let shown = other.as_ref().map_or("MISSING".to_string(), fmt_value);
            Err(Error::location(
                40228,
                format!(
                    "{what} must evaluate to an object, but resulting value was: {shown}. Type \
                     of resulting value: '{}'. Input document: {}",
                    type_of(&other),
                    fmt_document(doc)
                ),
            ))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// $sortByCount, $sample

pub(crate) fn parse_sort_by_count(spec: &Bson) -> Result<Expression> {
    match spec {
        Bson::String(s) if s.starts_with('$') => Expression::parse(spec),
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
            Expression::parse(spec)
        }
        _ => Err(Error::location(
            40147,
            "the sortByCount field must be defined as a $-prefixed path or an expression",
        )),
    }
}

pub(crate) fn parse_sample(spec: &Bson) -> Result<usize> {
    let Bson::Document(d) = spec else {
        return Err(Error::location(
            28745,
            "the $sample stage specification must be an object",
        ));
    };
    let mut size = None;
    for (k, v) in d {
        if k != "size" {
            return Err(Error::location(
                28748,
                format!("unrecognized option to $sample: {k}"),
            ));
        }
        let n = Number::from_bson(v)
            .ok_or_else(|| Error::location(28746, "size argument to $sample must be a number"))?;
        let n = n.as_f64();
        if n < 0.0 {
            return Err(Error::location(
                28747,
                "size argument to $sample must not be negative",
            ));
        }
        size = Some(n as usize);
    }
    size.ok_or_else(|| Error::location(28749, "$sample stage must specify a size"))
}

pub(crate) fn sample(docs: Vec<Document>, n: usize) -> Vec<Document> {
    use rand::seq::SliceRandom;
    let mut docs = docs;
    let mut rng = rand::thread_rng();
    docs.shuffle(&mut rng);
    docs.truncate(n);
    docs
}

// ---------------------------------------------------------------------------------------------
// Top-k sort

/// A document in a bounded heap: ordered by the sort, then by arrival so ties stay stable.
struct Ranked<'a> {
    doc: Document,
    arrival: usize,
    spec: &'a SortSpec,
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked<'_> {}

impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.spec
            .compare(&self.doc, &other.doc)
            .then(self.arrival.cmp(&other.arrival))
    }
}

/// The first `k` documents in sort order, keeping at most `k` in memory besides the input.
pub(crate) fn top_k(docs: Vec<Document>, spec: &SortSpec, k: u64) -> Vec<Document> {
    let k = usize::try_from(k).unwrap_or(usize::MAX);
    if k >= docs.len() {
        let mut docs = docs;
        docs.sort_by(|a, b| spec.compare(a, b));
        return docs;
    }
    if k == 0 {
        return Vec::new();
    }
    let mut heap: BinaryHeap<Ranked> = BinaryHeap::with_capacity(k + 1);
    for (arrival, doc) in docs.into_iter().enumerate() {
        heap.push(Ranked { doc, arrival, spec });
        if heap.len() > k {
            heap.pop();
        }
    }
    heap.into_sorted_vec().into_iter().map(|r| r.doc).collect()
}
