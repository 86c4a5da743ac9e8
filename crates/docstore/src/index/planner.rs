//! The query planner: picks an index scan with bounds when the filter constrains an index's
//! leading fields (or the index serves the sort), otherwise a collection scan.
//!
//! Bounds are always a superset of the matching documents: the caller re-checks every fetched
//! document against the full filter, so anything doubtful simply widens the scan.

use super::{Index, KeyBytes, RecordId};
use crate::error::{Error, Result};
use crate::keystring::{self, NUMBER_TAG, STRING_TAG};
use crate::value::{canonical_rank, compare_documents};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Bound;

/// The most key prefixes a scan expands `$in` lists into before it stops bounding later fields.
const MAX_POINT_COMBINATIONS: usize = 1_000;

/// An index entry: encoded key and record id.
type Entry = (KeyBytes, RecordId);

/// A contiguous range of encoded keys: `start <= key < end` (no `end`: to the last key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyRange {
    start: Vec<u8>,
    end: Option<Vec<u8>>,
}

impl KeyRange {
    fn full() -> KeyRange {
        KeyRange {
            start: Vec::new(),
            end: None,
        }
    }

    /// The range over `(key, record id)` entries, or `None` when it is empty.
    pub(super) fn btree_range(&self) -> Option<(Bound<Entry>, Bound<Entry>)> {
        if let Some(end) = &self.end {
            if self.start >= *end {
                return None;
            }
        }
        let start = Bound::Included((KeyBytes::from(self.start.as_slice()), RecordId::MIN));
        let end = match &self.end {
            Some(end) => Bound::Excluded((KeyBytes::from(end.as_slice()), RecordId::MIN)),
            None => Bound::Unbounded,
        };
        Some((start, end))
    }
}

/// Key ranges to scan; a superset of what matches (the filter is always re-checked).
#[derive(Debug, Clone)]
pub(crate) struct IndexBounds {
    /// Disjoint, in ascending key order.
    pub(super) ranges: Vec<KeyRange>,
    /// Per key field, the intervals as explain prints them (`[5, 5]`, `(3, inf.0]`).
    fields: Vec<(String, Vec<String>)>,
}

impl Default for IndexBounds {
    /// Every key.
    fn default() -> Self {
        IndexBounds {
            ranges: vec![KeyRange::full()],
            fields: Vec::new(),
        }
    }
}

impl IndexBounds {
    /// True when the bounds cover every key of the index.
    pub(crate) fn is_full(&self) -> bool {
        self.ranges == [KeyRange::full()]
    }

    /// `indexBounds` of explain: field → list of interval strings.
    pub(crate) fn to_document(&self) -> Document {
        let mut d = Document::new();
        for (field, intervals) in &self.fields {
            d.insert(
                field.clone(),
                intervals
                    .iter()
                    .map(|s| Bson::String(s.clone()))
                    .collect::<Vec<_>>(),
            );
        }
        d
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Plan {
    CollScan,
    IndexScan {
        /// Position of the chosen index in the slice given to [`plan`].
        index: usize,
        bounds: IndexBounds,
        reverse: bool,
        /// Documents come out in the requested sort order.
        provides_sort: bool,
    },
}

impl Plan {
    /// The explain `winningPlan` for this plan (`indexes` is the slice given to [`plan`]).
    pub(crate) fn describe(&self, indexes: &[&Index]) -> Document {
        match self {
            Plan::CollScan => doc! { "stage": "COLLSCAN", "direction": "forward" },
            Plan::IndexScan {
                index,
                bounds,
                reverse,
                ..
            } => {
                let Some(idx) = indexes.get(*index) else {
                    return doc! { "stage": "COLLSCAN", "direction": "forward" };
                };
                let spec = &idx.spec;
                doc! {
                    "stage": "FETCH",
                    "inputStage": {
                        "stage": "IXSCAN",
                        "keyPattern": spec.key.clone(),
                        "indexName": spec.name.clone(),
                        "isMultiKey": idx.is_multikey(),
                        "isUnique": spec.unique,
                        "isSparse": spec.sparse,
                        "isPartial": spec.partial_filter.is_some(),
                        "indexVersion": 2,
                        "direction": if *reverse { "backward" } else { "forward" },
                        "indexBounds": bounds.to_document(),
                    }
                }
            }
        }
    }
}

/// One end of an interval over a field's ascending encoding. `bytes` is a complete value
/// encoding, a bare type tag or a string prefix; the end covers, besides what it compares
/// against, every key that starts with `bytes` when inclusive (and none of them when not).
#[derive(Debug, Clone)]
struct Endpoint {
    bytes: Vec<u8>,
    inclusive: bool,
    /// What explain prints for this end, and whether it prints it as included.
    display: Bson,
    shown_inclusive: bool,
}

/// An interval of one field's values; `None` ends are unbounded.
#[derive(Debug, Clone)]
struct Interval {
    lo: Option<Endpoint>,
    hi: Option<Endpoint>,
    point: bool,
}

/// The smallest byte string above every string that starts with `bytes`.
fn successor(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = bytes.to_vec();
    while let Some(last) = out.pop() {
        if last != 0xFF {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

impl Interval {
    fn point(v: &Bson) -> Interval {
        let end = Endpoint {
            bytes: keystring::encode(v),
            inclusive: true,
            display: v.clone(),
            shown_inclusive: true,
        };
        Interval {
            lo: Some(end.clone()),
            hi: Some(end),
            point: true,
        }
    }

    /// Lowest key inside: keys `>= start`.
    fn start(&self) -> Option<Vec<u8>> {
        match &self.lo {
            None => Some(Vec::new()),
            Some(e) if e.inclusive => Some(e.bytes.clone()),
            Some(e) => successor(&e.bytes),
        }
    }

    /// Keys `< end`; `None` means no upper limit.
    fn end(&self) -> Option<Vec<u8>> {
        match &self.hi {
            None => None,
            Some(e) if e.inclusive => successor(&e.bytes),
            Some(e) => Some(e.bytes.clone()),
        }
    }

    fn contains_encoding(&self, bytes: &[u8]) -> bool {
        let Some(start) = self.start() else {
            return false;
        };
        bytes >= start.as_slice() && self.end().is_none_or(|end| bytes < end.as_slice())
    }

    fn intersect(&self, other: &Interval) -> Option<Interval> {
        if self.point {
            let bytes = &self.lo.as_ref()?.bytes;
            return other.contains_encoding(bytes).then(|| self.clone());
        }
        if other.point {
            return other.intersect(self);
        }
        let (a_start, b_start) = (self.start()?, other.start()?);
        let lo = if a_start >= b_start {
            self.lo.clone()
        } else {
            other.lo.clone()
        };
        let (a_end, b_end) = (self.end(), other.end());
        let a_tighter = match (&a_end, &b_end) {
            (Some(a), Some(b)) => a <= b,
            (Some(_), None) => true,
            _ => false,
        };
        let hi = if a_tighter {
            self.hi.clone()
        } else {
            other.hi.clone()
        };
        let result = Interval {
            lo,
            hi,
            point: false,
        };
        let start = result.start()?;
        match result.end() {
            Some(end) if start >= end => None,
            _ => Some(result),
        }
    }

    fn describe(&self, descending: bool) -> String {
        let side = |e: &Option<Endpoint>, unbounded: Bson| match e {
            Some(e) => (keystring::render(&e.display), e.shown_inclusive),
            None => (keystring::render(&unbounded), true),
        };
        let (lo, lo_inc) = side(&self.lo, Bson::MinKey);
        let (hi, hi_inc) = side(&self.hi, Bson::MaxKey);
        let ((first, first_inc), (second, second_inc)) = if descending {
            ((hi, hi_inc), (lo, lo_inc))
        } else {
            ((lo, lo_inc), (hi, hi_inc))
        };
        format!(
            "{}{first}, {second}{}",
            if first_inc { '[' } else { '(' },
            if second_inc { ']' } else { ')' }
        )
    }
}

/// Bracket-wide ends for ranges that run to the edge of a value's type, with the values
/// explain prints for them.
fn bracket_low(rank: u8) -> Endpoint {
    let display = match rank {
        NUMBER_TAG => Bson::Double(f64::NEG_INFINITY),
        STRING_TAG => Bson::String(String::new()),
        6 => Bson::Document(Document::new()),
        7 => Bson::Array(Vec::new()),
        10 => Bson::Boolean(false),
        11 => Bson::DateTime(bson::DateTime::from_millis(i64::MIN)),
        _ => Bson::MinKey,
    };
    Endpoint {
        bytes: vec![rank],
        inclusive: true,
        display,
        shown_inclusive: true,
    }
}

fn bracket_high(rank: u8) -> Endpoint {
    let (display, inclusive) = match rank {
        NUMBER_TAG => (Bson::Double(f64::INFINITY), true),
        STRING_TAG => (Bson::Document(Document::new()), false),
        6 => (Bson::Array(Vec::new()), false),
        10 => (Bson::Boolean(true), true),
        11 => (Bson::DateTime(bson::DateTime::from_millis(i64::MAX)), true),
        _ => (Bson::MaxKey, false),
    };
    // Everything below the next bracket's tag, whatever the printed end says.
    Endpoint {
        bytes: vec![rank + 1],
        inclusive: false,
        display,
        shown_inclusive: inclusive,
    }
}

/// One condition of the filter on one path, as the intervals its values must lie in.
#[derive(Debug, Clone)]
struct Constraint {
    intervals: Vec<Interval>,
    /// Equality with null: also true of documents that lack the field, which a sparse index
    /// does not hold.
    matches_missing: bool,
}

impl Constraint {
    fn points(mut values: Vec<Bson>) -> Constraint {
        let matches_missing = values.iter().any(|v| matches!(v, Bson::Null));
        if matches_missing {
            // Undefined keys come from empty arrays; keep them in range to stay a superset.
            values.push(Bson::Undefined);
        }
        let mut encoded: Vec<(Vec<u8>, Bson)> = values
            .into_iter()
            .map(|v| (keystring::encode(&v), v))
            .collect();
        encoded.sort_by(|a, b| a.0.cmp(&b.0));
        encoded.dedup_by(|a, b| a.0 == b.0);
        Constraint {
            intervals: encoded.iter().map(|(_, v)| Interval::point(v)).collect(),
            matches_missing,
        }
    }

    fn single(interval: Interval) -> Constraint {
        Constraint {
            intervals: vec![interval],
            matches_missing: false,
        }
    }

    fn intersect(&self, other: &Constraint) -> Constraint {
        let mut intervals: Vec<Interval> = self
            .intervals
            .iter()
            .flat_map(|a| other.intervals.iter().filter_map(move |b| a.intersect(b)))
            .collect();
        intervals.sort_by_key(Interval::start);
        Constraint {
            intervals,
            matches_missing: self.matches_missing && other.matches_missing,
        }
    }

    fn is_single_point(&self) -> bool {
        self.intervals.len() == 1 && self.intervals[0].point
    }

    fn all_points(&self) -> bool {
        self.intervals.iter().all(|i| i.point)
    }
}

/// How a filter's values bound an index, given the index's collation and the query's.
#[derive(Clone, Copy)]
enum Keying<'a> {
    /// The same collation: values as they are (simple), or strings as the collation's keys
    /// (and no regex bounds, since a regex compares the strings themselves).
    Same(Option<&'a crate::collation::Collation>),
    /// Different collations: only conditions whose values hold no string bound the index.
    StringFree,
}

impl Keying<'_> {
    /// The value as the index's keys hold it, or `None` when it cannot bound the index.
    fn key<'v>(&self, v: &'v Bson) -> Option<std::borrow::Cow<'v, Bson>> {
        use std::borrow::Cow;
        match self {
            Keying::Same(None) => Some(Cow::Borrowed(v)),
            Keying::Same(Some(c)) => Some(Cow::Owned(c.key_value(v))),
            Keying::StringFree => (!holds_string(v)).then_some(Cow::Borrowed(v)),
        }
    }

    fn allows_regex(&self) -> bool {
        matches!(self, Keying::Same(None))
    }
}

fn holds_string(v: &Bson) -> bool {
    match v {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Document(d) => d.values().any(holds_string),
        Bson::Array(items) => items.iter().any(holds_string),
        _ => false,
    }
}

/// Conditions per dotted path, from the filter's top level and its `$and` members.
fn collect_constraints(
    filter: &Document,
    keying: Keying<'_>,
    out: &mut HashMap<String, Vec<Constraint>>,
) {
    for (field, value) in filter {
        if field == "$and" {
            if let Bson::Array(members) = value {
                for member in members {
                    if let Bson::Document(d) = member {
                        collect_constraints(d, keying, out);
                    }
                }
            }
            continue;
        }
        // $or, $nor, $expr, $where, $text, $comment...: nothing to bound on.
        if field.starts_with('$') {
            continue;
        }
        let constraints = field_constraints(value, keying);
        if !constraints.is_empty() {
            out.entry(field.clone()).or_default().extend(constraints);
        }
    }
}

fn field_constraints(value: &Bson, keying: Keying<'_>) -> Vec<Constraint> {
    match value {
        Bson::Document(ops) if ops.keys().next().is_some_and(|k| k.starts_with('$')) => {
            let mut out = Vec::new();
            for (op, arg) in ops {
                let c = match op.as_str() {
                    "$eq" => keying.key(arg).and_then(|v| equality(&v)),
                    "$in" => keying.key(arg).and_then(|v| in_list(&v)),
                    "$gt" | "$gte" | "$lt" | "$lte" => keying.key(arg).and_then(|v| range(op, &v)),
                    "$regex" if !keying.allows_regex() => None,
                    "$regex" => {
                        let options = ops.get_str("$options").unwrap_or("");
                        match arg {
                            Bson::String(pattern) => regex(pattern, options, arg),
                            Bson::RegularExpression(r) if options.is_empty() => {
                                regex(&r.pattern, &r.options, arg)
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                };
                out.extend(c);
            }
            out
        }
        Bson::RegularExpression(_) if !keying.allows_regex() => Vec::new(),
        Bson::RegularExpression(r) => regex(&r.pattern, &r.options, value).into_iter().collect(),
        v => keying
            .key(v)
            .and_then(|v| equality(&v))
            .into_iter()
            .collect(),
    }
}

fn equality(v: &Bson) -> Option<Constraint> {
    match v {
        // Matches the whole array or any element equal to it; not worth bounding.
        Bson::Array(_) => None,
        v => Some(Constraint::points(vec![v.clone()])),
    }
}

fn in_list(arg: &Bson) -> Option<Constraint> {
    let Bson::Array(values) = arg else {
        return None;
    };
    if values
        .iter()
        .any(|v| matches!(v, Bson::Array(_) | Bson::RegularExpression(_)))
    {
        return None;
    }
    Some(Constraint::points(values.clone()))
}

/// Comparisons only match values of the operand's type bracket (`{$gt: 5}` is numbers above 5).
fn range(op: &str, arg: &Bson) -> Option<Constraint> {
    if matches!(
        arg,
        Bson::Null
            | Bson::Undefined
            | Bson::MinKey
            | Bson::MaxKey
            | Bson::Array(_)
            | Bson::RegularExpression(_)
    ) {
        return None;
    }
    let rank = canonical_rank(arg);
    let exact = |inclusive| Endpoint {
        bytes: keystring::encode(arg),
        inclusive,
        display: arg.clone(),
        shown_inclusive: inclusive,
    };
    // NaN compares specially; scanning all numbers is always enough.
    let nan = matches!(arg, Bson::Double(d) if d.is_nan());
    let (lo, hi) = match op {
        _ if nan => (bracket_low(rank), bracket_high(rank)),
        "$gt" => (exact(false), bracket_high(rank)),
        "$gte" => (exact(true), bracket_high(rank)),
        "$lt" => (bracket_low(rank), exact(false)),
        _ => (bracket_low(rank), exact(true)),
    };
    Some(Constraint::single(Interval {
        lo: Some(lo),
        hi: Some(hi),
        point: false,
    }))
}

/// A case-sensitive regex anchored with `^` and starting with literal characters scans the
/// strings with that prefix (plus regex values equal to the query's own regex).
fn regex(pattern: &str, options: &str, original: &Bson) -> Option<Constraint> {
    let prefix = literal_prefix(pattern, options)?;
    let mut bytes = vec![STRING_TAG];
    keystring::push_escaped(prefix.as_bytes(), &mut bytes);
    let hi_display = match prefix.chars().last() {
        Some(last) => {
            let mut s: String = prefix[..prefix.len() - last.len_utf8()].to_string();
            s.push(char::from_u32(last as u32 + 1).unwrap_or(last));
            Bson::String(s)
        }
        None => Bson::Document(Document::new()),
    };
    let strings = Interval {
        lo: Some(Endpoint {
            bytes: bytes.clone(),
            inclusive: true,
            display: Bson::String(prefix.clone()),
            shown_inclusive: true,
        }),
        hi: Some(Endpoint {
            bytes,
            inclusive: true,
            display: hi_display,
            shown_inclusive: false,
        }),
        point: false,
    };
    let regex_value = match original {
        Bson::String(p) => Bson::RegularExpression(bson::Regex {
            pattern: p.clone(),
            options: options.to_string(),
        }),
        other => other.clone(),
    };
    Some(Constraint {
        intervals: vec![strings, Interval::point(&regex_value)],
        matches_missing: false,
    })
}

fn literal_prefix(pattern: &str, options: &str) -> Option<String> {
    if !options.is_empty() || pattern.contains('|') {
        return None;
    }
    let body = pattern.strip_prefix('^')?;
    let mut prefix = String::new();
    let mut chars = body.chars().peekable();
    while let Some(&c) = chars.peek() {
        // A backslash before punctuation stands for that character (what `regex::escape` and
        // similar produce), as in MongoDB; before a letter or digit it is a class such as `\d`.
        if c == '\\' {
            let mut ahead = chars.clone();
            ahead.next();
            match ahead.next() {
                Some(escaped) if escaped.is_ascii_punctuation() => {
                    prefix.push(escaped);
                    chars = ahead;
                    continue;
                }
                _ => break,
            }
        }
        if "^$.|?*+()[]{}".contains(c) {
            // A quantifier makes the previous character optional.
            if "?*{".contains(c) {
                prefix.pop();
            }
            break;
        }
        prefix.push(c);
        chars.next();
    }
    Some(prefix)
}

/// How well one index fits the query. Its bounds are built only for the indexes a plan may
/// use ([`Candidate::bounds`]): most indexes of a collection score nothing for a given query,
/// and building key bounds allocates.
#[derive(Clone)]
struct Candidate {
    index: usize,
    leading_points: usize,
    has_range: bool,
    provides_sort: bool,
    reverse: bool,
    /// The conditions usable on each key field ([`field_constraints_for`]).
    per_field: Vec<Option<Constraint>>,
}

impl Candidate {
    fn score(&self) -> (usize, bool, bool) {
        (self.leading_points, self.has_range, self.provides_sort)
    }

    /// The key ranges this index scans (`indexes` is the slice the candidate was chosen from).
    fn bounds(&self, indexes: &[&Index]) -> IndexBounds {
        build_bounds(indexes[self.index], &self.per_field)
    }

    fn into_plan(self, bounds: IndexBounds) -> Plan {
        Plan::IndexScan {
            index: self.index,
            bounds,
            reverse: self.reverse,
            provides_sort: self.provides_sort,
        }
    }
}

fn has_positional_component(path: &str) -> bool {
    path.split('.')
        .any(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
}

/// The conditions usable on each key field of `idx` (None: unconstrained).
fn field_constraints_for(
    idx: &Index,
    constraints: &HashMap<String, Vec<Constraint>>,
) -> Vec<Option<Constraint>> {
    let multikey = idx.is_multikey();
    let mut seen_roots: Vec<&str> = Vec::new();
    idx.fields
        .iter()
        .map(|field| {
            let root = field.path.split('.').next().unwrap_or("");
            // Paths through the same array take values from one element per key, so with a
            // multikey index only the first of them can be bounded.
            let shares_array = multikey && seen_roots.contains(&root);
            seen_roots.push(root);
            if shares_array || has_positional_component(&field.path) {
                return None;
            }
            let list = constraints.get(&field.path)?;
            let mut usable = list
                .iter()
                .filter(|c| !(idx.spec.sparse && c.matches_missing));
            if field.hashed {
                return hashed_constraint(usable);
            }
            let first = usable.next()?.clone();
            if multikey {
                // Different elements may satisfy different conditions: keep only one.
                Some(first)
            } else {
                Some(usable.fold(first, |acc, c| acc.intersect(c)))
            }
        })
        .collect()
}

/// A hashed field answers equality only: the first condition made of points (`$eq`, `$in`)
/// becomes the points of their hashes (null also stands for a missing field). Ranges and
/// regexes leave the field unconstrained.
fn hashed_constraint<'a>(mut usable: impl Iterator<Item = &'a Constraint>) -> Option<Constraint> {
    let points = usable.find(|c| c.all_points() && !c.intervals.is_empty())?;
    let hashes: Vec<Bson> = points
        .intervals
        .iter()
        .filter_map(|i| i.lo.as_ref().map(|e| &e.display))
        .filter(|v| !matches!(v, Bson::Undefined))
        .map(|v| Bson::Int64(super::hashed::hash_value(v)))
        .collect();
    let mut c = Constraint::points(hashes);
    c.matches_missing = points.matches_missing;
    Some(c)
}

/// Turn per-field conditions into key ranges: leading point fields expand into key prefixes,
/// the next constrained field becomes the range, and later fields are left open.
fn build_bounds(idx: &Index, per_field: &[Option<Constraint>]) -> IndexBounds {
    let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
    let mut displays = Vec::new();
    let mut tail: Option<(Vec<Interval>, bool)> = None;
    let mut used = 0;
    for (field, condition) in idx.fields.iter().zip(per_field) {
        let Some(c) = condition else { break };
        used += 1;
        displays.push(
            c.intervals
                .iter()
                .map(|i| i.describe(field.descending))
                .collect::<Vec<_>>(),
        );
        if c.all_points() && prefixes.len() * c.intervals.len().max(1) <= MAX_POINT_COMBINATIONS {
            let mut points: Vec<Vec<u8>> = c
                .intervals
                .iter()
                .filter_map(|i| i.lo.as_ref().map(|e| e.bytes.clone()))
                .collect();
            if field.descending {
                points.iter_mut().for_each(|p| keystring::invert(p));
            }
            points.sort();
            prefixes = prefixes
                .iter()
                .flat_map(|p| {
                    points.iter().map(move |q| {
                        let mut k = p.clone();
                        k.extend_from_slice(q);
                        k
                    })
                })
                .collect();
            continue;
        }
        tail = Some((c.intervals.clone(), field.descending));
        break;
    }
    let mut fields = Vec::new();
    for (i, field) in idx.fields.iter().enumerate() {
        let intervals = if i < used {
            let mut d = displays[i].clone();
            if field.descending {
                d.reverse();
            }
            d
        } else if field.descending {
            vec!["[MaxKey, MinKey]".to_string()]
        } else {
            vec!["[MinKey, MaxKey]".to_string()]
        };
        fields.push((field.path.clone(), intervals));
    }
    let mut ranges = Vec::new();
    for prefix in &prefixes {
        match &tail {
            None => ranges.push(prefix_range(prefix)),
            Some((intervals, descending)) => {
                let mut ordered: Vec<(Option<Endpoint>, Option<Endpoint>)> = intervals
                    .iter()
                    .map(|i| {
                        if *descending {
                            let flip = |e: &Option<Endpoint>| {
                                e.clone().map(|mut e| {
                                    keystring::invert(&mut e.bytes);
                                    e
                                })
                            };
                            (flip(&i.hi), flip(&i.lo))
                        } else {
                            (i.lo.clone(), i.hi.clone())
                        }
                    })
                    .collect();
                if *descending {
                    ordered.reverse();
                }
                for (lo, hi) in ordered {
                    let with_prefix = |e: Option<Endpoint>| match e {
                        Some(mut e) => {
                            let mut b = prefix.clone();
                            b.extend_from_slice(&e.bytes);
                            e.bytes = b;
                            Some(e)
                        }
                        None if prefix.is_empty() => None,
                        None => Some(Endpoint {
                            bytes: prefix.clone(),
                            inclusive: true,
                            display: Bson::Null,
                            shown_inclusive: true,
                        }),
                    };
                    let interval = Interval {
                        lo: with_prefix(lo),
                        hi: with_prefix(hi),
                        point: false,
                    };
                    if let Some(start) = interval.start() {
                        let end = interval.end();
                        if end.as_ref().is_none_or(|e| start < *e) {
                            ranges.push(KeyRange { start, end });
                        }
                    }
                }
            }
        }
    }
    IndexBounds { ranges, fields }
}

/// Every key that starts with `prefix`.
fn prefix_range(prefix: &[u8]) -> KeyRange {
    KeyRange {
        start: prefix.to_vec(),
        end: if prefix.is_empty() {
            None
        } else {
            successor(prefix)
        },
    }
}

/// Whether walking the index in order (or reversed) yields documents in `sort` order.
/// Returns `Some(reverse)` when it does.
fn sort_order(idx: &Index, per_field: &[Option<Constraint>], sort: &Document) -> Option<bool> {
    // A multikey index lists a document once per array element. Walking it still yields the
    // sort order when no field is bounded by a range: within a single-point prefix, a
    // document's first appearance is at its least (ascending walk) or greatest (descending
    // walk) element, which is exactly the element MongoDB sorts an array by. A range would
    // hide elements outside it, so then the order is not guaranteed.
    // For the same reason a sort field must not be bounded at all: an array document matched
    // through one element still sorts by its least or greatest element.
    // Hash order is not value order.
    if idx.fields.iter().any(|f| f.hashed) {
        return None;
    }
    if idx.is_multikey() {
        let ranged = per_field
            .iter()
            .any(|c| c.as_ref().is_some_and(|c| !c.is_single_point()));
        let sort_field_bounded = idx
            .fields
            .iter()
            .zip(per_field)
            .any(|(f, c)| c.is_some() && sort.contains_key(&f.path));
        if ranged || sort_field_bounded {
            return None;
        }
    }
    let is_fixed = |path: &str| {
        idx.fields
            .iter()
            .zip(per_field)
            .any(|(f, c)| f.path == path && c.as_ref().is_some_and(Constraint::is_single_point))
    };
    let mut wanted = Vec::new();
    for (path, direction) in sort {
        let n = crate::value::to_f64(direction)?;
        if n == 0.0 || n.is_nan() {
            return None;
        }
        if !is_fixed(path) {
            wanted.push((path.as_str(), n < 0.0));
        }
    }
    let mut reverse = None;
    let mut next = 0;
    for (field, condition) in idx.fields.iter().zip(per_field) {
        if next == wanted.len() {
            break;
        }
        let (path, descending) = wanted[next];
        if field.path == path {
            let flipped = descending != field.descending;
            if *reverse.get_or_insert(flipped) != flipped {
                return None;
            }
            next += 1;
        } else if !condition.as_ref().is_some_and(Constraint::is_single_point) {
            return None;
        }
    }
    (next == wanted.len()).then(|| reverse.unwrap_or(false))
}

fn evaluate(
    position: usize,
    idx: &Index,
    constraints: &HashMap<String, Vec<Constraint>>,
    sort: Option<&Document>,
) -> Candidate {
    let per_field = field_constraints_for(idx, constraints);
    let mut leading_points = 0;
    let mut has_range = false;
    for c in &per_field {
        match c {
            Some(c) if c.all_points() => leading_points += 1,
            Some(_) => {
                has_range = true;
                break;
            }
            None => break,
        }
    }
    let order = sort
        .filter(|s| !s.is_empty())
        .and_then(|s| sort_order(idx, &per_field, s));
    Candidate {
        index: position,
        leading_points,
        has_range,
        provides_sort: order.is_some(),
        reverse: order.unwrap_or(false),
        per_field,
    }
}

/// Bounds over the dates at or before `cutoff` in a single-field index (the TTL monitor's
/// scan): other types are outside them.
pub(crate) fn dates_up_to(idx: &Index, cutoff: bson::DateTime) -> IndexBounds {
    build_bounds(idx, &[range("$lte", &Bson::DateTime(cutoff))])
}

fn unknown_hint() -> Error {
    Error::bad_value("hint provided does not correspond to an existing index")
}

/// Choose a plan. `hint` is the command's `hint` (index name or key pattern); an unknown hint
/// is error 2 "hint provided does not correspond to an existing index".
pub(crate) fn plan(
    filter: &Document,
    sort: Option<&Document>,
    indexes: &[&Index],
    hint: Option<&Bson>,
) -> Result<Plan> {
    plan_limited(filter, sort, indexes, hint, None)
}

/// Whether the planner weighs `idx` for `filter` unasked (without a hint): a sparse index may
/// lack matching documents, a partial one does when the query does not imply its filter, a
/// text or geo index answers only its own operators, and a hidden one is not considered at all.
fn weighed(idx: &Index, filter: &Document) -> bool {
    if idx.spec.sparse || idx.spec.hidden || idx.text().is_some() || idx.is_geo() {
        return false;
    }
    idx.spec
        .partial_filter
        .as_ref()
        .is_none_or(|partial| super::partial::query_implies(filter, partial))
}

/// The conditions of a query the planner weighs indexes by: the query's collation (the one in
/// force) and the bounds it gives an index of that collation; an index of another collation
/// gets only the string-free conditions, and cannot give the order of a sort (which may
/// compare strings).
struct Conditions {
    collation: Option<std::sync::Arc<crate::collation::Collation>>,
    constraints: HashMap<String, Vec<Constraint>>,
    /// Collected only when some index has another collation.
    string_free: HashMap<String, Vec<Constraint>>,
}

impl Conditions {
    fn of(filter: &Document, indexes: &[&Index]) -> Conditions {
        let collation = crate::collation::current();
        let mut constraints = HashMap::new();
        collect_constraints(filter, Keying::Same(collation.as_deref()), &mut constraints);
        let mut conditions = Conditions {
            collation,
            constraints,
            string_free: HashMap::new(),
        };
        if !indexes.iter().all(|idx| conditions.same_collation(idx)) {
            collect_constraints(filter, Keying::StringFree, &mut conditions.string_free);
        }
        conditions
    }

    /// Whether `idx` has the query's collation.
    fn same_collation(&self, idx: &Index) -> bool {
        crate::collation::same(idx.spec.collation.as_ref(), self.collation.as_ref())
    }
}

/// [`plan`] for a query that needs only the first `limit` documents (skip included) in sort
/// order. Then an index that walks the sort order can beat a more selective index that does
/// not: with `n` documents matching the selective index's bounds out of `total`, walking the
/// sort order visits about `limit * total / n` documents until it has `limit` matches, while
/// the selective index fetches and sorts all `n`. The sort walk is chosen when
/// `n * n > 4 * limit * total` (counting `n` only up to that threshold, so deciding costs at
/// most a few thousand key visits). This assumes matches are spread evenly along the sort
/// order; results are the same either way, only the work differs.
pub(crate) fn plan_limited(
    filter: &Document,
    sort: Option<&Document>,
    indexes: &[&Index],
    hint: Option<&Bson>,
    limit: Option<usize>,
) -> Result<Plan> {
    let conditions = Conditions::of(filter, indexes);
    let same = |idx: &Index| conditions.same_collation(idx);
    let (constraints, string_free) = (&conditions.constraints, &conditions.string_free);
    let for_index = |idx: &Index| {
        if same(idx) {
            (&constraints, true)
        } else {
            (&string_free, false)
        }
    };

    let hinted = match hint {
        None => None,
        Some(Bson::String(name)) => Some(
            indexes
                .iter()
                .position(|i| i.spec.name == *name && !i.spec.hidden)
                .ok_or_else(unknown_hint)?,
        ),
        Some(Bson::Document(pattern)) if pattern.is_empty() => None,
        Some(Bson::Document(pattern)) => {
            if pattern.contains_key("$natural") {
                return Ok(Plan::CollScan);
            }
            Some(
                indexes
                    .iter()
                    .position(|i| {
                        // A hidden index is invisible to hints, as in mongod.
                        !i.spec.hidden
                            && i.spec.key.keys().eq(pattern.keys())
                            && compare_documents(&i.spec.key, pattern) == Ordering::Equal
                    })
                    .ok_or_else(unknown_hint)?,
            )
        }
        Some(_) => return Err(unknown_hint()),
    };
    if let Some(position) = hinted {
        // A text index holds terms, not field values: only `$text` can use it.
        if indexes[position].text().is_some() {
            return Err(Error::bad_value(
                "hint provided does not correspond to an existing index: a text index can only \
                 answer a $text query",
            ));
        }
        // A geo index's key parts hold no values to bound: it is walked whole (the documents
        // with a location), each checked against the filter.
        if indexes[position].is_geo() {
            return Ok(geo_plan(position));
        }
        let (constraints, same) = for_index(indexes[position]);
        let c = evaluate(
            position,
            indexes[position],
            constraints,
            sort.filter(|_| same),
        );
        let bounds = c.bounds(indexes);
        return Ok(c.into_plan(bounds));
    }

    let mut best: Option<Candidate> = None;
    // The first index that serves the sort by walking all of its keys in order, with its
    // (full) bounds.
    let mut sort_walk: Option<(Candidate, IndexBounds)> = None;
    for (position, idx) in indexes.iter().enumerate() {
        if !weighed(idx, filter) {
            continue;
        }
        let (constraints, same) = for_index(idx);
        let c = evaluate(position, idx, constraints, sort.filter(|_| same));
        if c.score() == (0, false, false) {
            continue;
        }
        if c.provides_sort && sort_walk.is_none() {
            let bounds = c.bounds(indexes);
            if bounds.is_full() {
                sort_walk = Some((c.clone(), bounds));
            }
        }
        // An _id equality finds at most one document: nothing beats it.
        if idx.spec.name == "_id_" && c.leading_points > 0 {
            best = Some(c);
            break;
        }
        if best.as_ref().is_none_or(|b| c.score() > b.score()) {
            best = Some(c);
        }
    }
    let Some(best) = best else {
        // With nothing better, a `$geoWithin`/`$geoIntersects` on a geo index's field reads
        // only the documents that have a location, as mongod's geo index scan does.
        let geo_paths = geo_predicate_paths(filter);
        let geo = indexes.iter().position(|idx| {
            idx.spec.partial_filter.is_none()
                && idx
                    .geo_fields()
                    .any(|(path, _)| geo_paths.iter().any(|p| p == path))
        });
        return Ok(geo.map_or(Plan::CollScan, geo_plan));
    };
    let bounds = match &sort_walk {
        Some((walk, walk_bounds)) if walk.index == best.index => walk_bounds.clone(),
        _ => best.bounds(indexes),
    };
    if let (Some((walk, _)), Some(limit)) = (&sort_walk, limit) {
        if sort.is_some() && !best.provides_sort && best.index != walk.index {
            let total = indexes[walk.index].entry_count();
            let threshold = (4.0 * limit.max(1) as f64 * total as f64).sqrt() as usize + 1;
            let matching = indexes[best.index]
                .scan(&bounds, false)
                .take(threshold)
                .count();
            if matching >= threshold {
                let (walk, walk_bounds) = sort_walk.expect("matched above");
                return Ok(walk.into_plan(walk_bounds));
            }
        }
    }
    Ok(best.into_plan(bounds))
}

/// Whether [`plan`] would scan an index (any index) rather than the collection, told without
/// building key bounds or counting keys to choose between indexes: what a caller that only
/// needs that much (the server, deciding whether a find with a limit may run long) asks
/// before the find plans for itself.
pub(crate) fn scans_an_index(
    filter: &Document,
    sort: Option<&Document>,
    indexes: &[&Index],
    hint: Option<&Bson>,
) -> Result<bool> {
    if hint.is_some_and(|h| !matches!(h, Bson::Document(d) if d.is_empty())) {
        return Ok(matches!(
            plan(filter, sort, indexes, hint)?,
            Plan::IndexScan { .. }
        ));
    }
    let conditions = Conditions::of(filter, indexes);
    let same = |idx: &Index| conditions.same_collation(idx);
    let (constraints, string_free) = (&conditions.constraints, &conditions.string_free);
    for (position, idx) in indexes.iter().enumerate() {
        // The candidates `plan_limited` weighs, and only those.
        if !weighed(idx, filter) {
            continue;
        }
        let (constraints, sort) = if same(idx) {
            (&constraints, sort)
        } else {
            (&string_free, None)
        };
        if evaluate(position, idx, constraints, sort).score() != (0, false, false) {
            return Ok(true);
        }
    }
    let geo_paths = geo_predicate_paths(filter);
    Ok(indexes.iter().any(|idx| {
        idx.spec.partial_filter.is_none()
            && idx
                .geo_fields()
                .any(|(path, _)| geo_paths.iter().any(|p| p == path))
    }))
}

/// A walk of a whole geo index.
fn geo_plan(index: usize) -> Plan {
    Plan::IndexScan {
        index,
        bounds: IndexBounds::default(),
        reverse: false,
        provides_sort: false,
    }
}

/// The paths a filter tests with `$geoWithin`, `$within` or `$geoIntersects` for every result
/// (at the top level or in a top-level `$and`).
fn geo_predicate_paths(filter: &Document) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in filter {
        match value {
            Bson::Array(items) if key == "$and" => {
                for item in items {
                    if let Bson::Document(sub) = item {
                        out.extend(geo_predicate_paths(sub));
                    }
                }
            }
            Bson::Document(ops)
                if !key.starts_with('$')
                    && ["$geoWithin", "$within", "$geoIntersects"]
                        .iter()
                        .any(|op| ops.contains_key(*op)) =>
            {
                out.push(key.clone());
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::IndexSpec;
    use super::*;

    fn build(key: Document, name: &str, docs: &[Document]) -> Index {
        let mut idx =
            Index::new(IndexSpec::parse(&doc! { "key": key, "name": name }).unwrap()).unwrap();
        for (rid, d) in docs.iter().enumerate() {
            let keys = idx.keys_for(d).unwrap();
            idx.insert(&keys, rid as RecordId);
        }
        idx
    }

    fn numbers() -> Vec<Document> {
        vec![
            doc! { "a": 5, "b": "x" },
            doc! { "a": 1, "b": "y" },
            doc! { "a": "five", "b": "x" },
            doc! { "a": 3.5, "b": "z" },
            doc! { "b": "w" },
            doc! { "a": 9_i64, "b": "x" },
            doc! { "a": null, "b": "x" },
            doc! { "a": "fig", "b": "q" },
        ]
    }

    /// Run the plan on `idx` and return the record ids in scan order.
    fn run(filter: Document, sort: Option<Document>, idx: &Index) -> (Plan, Vec<RecordId>) {
        let p = plan(&filter, sort.as_ref(), &[idx], None).unwrap();
        let ids = match &p {
            Plan::IndexScan {
                bounds, reverse, ..
            } => idx.scan(bounds, *reverse).collect(),
            Plan::CollScan => Vec::new(),
        };
        (p, ids)
    }

    #[test]
    fn equality_scans_only_the_equal_key() {
        let idx = build(doc! { "a": 1 }, "a_1", &numbers());
        let (p, ids) = run(doc! { "a": 5.0 }, None, &idx);
        assert!(matches!(p, Plan::IndexScan { .. }));
        assert_eq!(ids, vec![0]);
        let (_, ids) = run(doc! { "a": { "$in": [9, "five", 7] } }, None, &idx);
        assert_eq!(ids, vec![5, 2]);
        // Null equality also finds documents without the field.
        let (_, ids) = run(doc! { "a": null }, None, &idx);
        assert_eq!(ids, vec![4, 6]);
    }

    #[test]
    fn ranges_stay_within_the_operand_type() {
        let idx = build(doc! { "a": 1 }, "a_1", &numbers());
        let (_, ids) = run(doc! { "a": { "$gt": 3.5 } }, None, &idx);
        assert_eq!(ids, vec![0, 5]);
        let (_, ids) = run(doc! { "a": { "$gte": 3.5, "$lt": 9 } }, None, &idx);
        assert_eq!(ids, vec![3, 0]);
        let (_, ids) = run(
            doc! { "$and": [{ "a": { "$lte": 5 } }, { "a": { "$gt": 1 } }] },
            None,
            &idx,
        );
        assert_eq!(ids, vec![3, 0]);
        let (_, ids) = run(doc! { "a": { "$lt": "g" } }, None, &idx);
        assert_eq!(ids, vec![7, 2]);
        let (_, ids) = run(doc! { "a": { "$gt": 100, "$lt": 0 } }, None, &idx);
        assert!(ids.is_empty());
    }

    #[test]
    fn anchored_regex_scans_the_prefix_range() {
        let idx = build(doc! { "a": 1 }, "a_1", &numbers());
        let (p, ids) = run(doc! { "a": { "$regex": "^fi" } }, None, &idx);
        assert!(matches!(p, Plan::IndexScan { .. }));
        assert_eq!(ids, vec![7, 2]);
        let (_, ids) = run(doc! { "a": { "$regex": "^fiv?" } }, None, &idx);
        assert_eq!(ids, vec![7, 2]);
        let (p, _) = run(
            doc! { "a": { "$regex": "^fi", "$options": "i" } },
            None,
            &idx,
        );
        assert!(matches!(p, Plan::CollScan));
        assert_eq!(literal_prefix("^ab|c", ""), None);
        assert_eq!(literal_prefix("^a.c", ""), Some("a".into()));
        assert_eq!(
            literal_prefix(r"^2026\.11:ab/2026\.12", ""),
            Some("2026.11:ab/2026.12".into())
        );
        assert_eq!(literal_prefix(r"^a\.?b", ""), Some("a".into()));
        assert_eq!(literal_prefix(r"^a\db", ""), Some("a".into()));
    }

    #[test]
    fn descending_and_compound_bounds_scan_in_key_order() {
        let idx = build(doc! { "b": 1, "a": -1 }, "b_1_a_-1", &numbers());
        let (p, ids) = run(doc! { "b": "x", "a": { "$gte": 1 } }, None, &idx);
        assert_eq!(ids, vec![5, 0]);
        let Plan::IndexScan { bounds, .. } = &p else {
            panic!("expected an index scan")
        };
        assert_eq!(
            bounds.to_document(),
            doc! { "b": ["[\"x\", \"x\"]"], "a": ["[inf.0, 1]"] }
        );
        let (_, ids) = run(doc! { "b": { "$in": ["x", "q"] } }, None, &idx);
        // q first, then the x entries by descending a: "five" (string), 9, 5, null.
        assert_eq!(ids, vec![7, 2, 5, 0, 6]);
        let bounds = match plan(&doc! { "b": "x" }, None, &[&idx], None).unwrap() {
            Plan::IndexScan { bounds, .. } => bounds,
            Plan::CollScan => panic!("expected an index scan"),
        };
        assert_eq!(
            idx.scan(&bounds, true).collect::<Vec<_>>(),
            vec![6, 0, 5, 2]
        );
    }

    #[test]
    fn an_index_serves_a_sort_after_its_equality_prefix() {
        let idx = build(doc! { "b": 1, "a": 1 }, "b_1_a_1", &numbers());
        let (p, ids) = run(doc! { "b": "x" }, Some(doc! { "a": -1 }), &idx);
        let Plan::IndexScan {
            provides_sort,
            reverse,
            ..
        } = p
        else {
            panic!("expected an index scan")
        };
        assert!(provides_sort && reverse);
        assert_eq!(ids, vec![2, 5, 0, 6]);
        // No condition at all: a full scan in sort order.
        let (p, ids) = run(doc! {}, Some(doc! { "b": 1, "a": 1 }), &idx);
        assert!(matches!(
            p,
            Plan::IndexScan {
                provides_sort: true,
                reverse: false,
                ..
            }
        ));
        assert_eq!(ids.len(), 8);
        // A sort the index cannot give.
        let (p, _) = run(doc! {}, Some(doc! { "a": 1 }), &idx);
        assert!(matches!(p, Plan::CollScan));
        let (p, _) = run(doc! { "b": "x" }, Some(doc! { "a": 1, "c": 1 }), &idx);
        assert!(matches!(
            p,
            Plan::IndexScan {
                provides_sort: false,
                ..
            }
        ));
    }

    #[test]
    fn multikey_indexes_bound_one_condition_and_never_provide_sort() {
        let docs = vec![doc! { "a": [3, 12] }, doc! { "a": [7] }, doc! { "a": 20 }];
        let idx = build(doc! { "a": 1 }, "a_1", &docs);
        assert!(idx.is_multikey());
        // [3, 12] matches {$gt: 5, $lt: 10} through different elements.
        let (_, ids) = run(
            doc! { "a": { "$gt": 5, "$lt": 10 } },
            Some(doc! { "a": 1 }),
            &idx,
        );
        assert_eq!(ids, vec![1, 0, 2]);
        let (p, _) = run(doc! { "a": { "$gt": 5 } }, Some(doc! { "a": 1 }), &idx);
        assert!(matches!(
            p,
            Plan::IndexScan {
                provides_sort: false,
                ..
            }
        ));
    }

    #[test]
    fn the_best_index_wins_and_id_equality_beats_everything() {
        let id = build(doc! { "_id": 1 }, "_id_", &[]);
        let a = build(doc! { "a": 1 }, "a_1", &[]);
        let ab = build(doc! { "a": 1, "b": 1 }, "a_1_b_1", &[]);
        let c = build(doc! { "c": 1 }, "c_1", &[]);
        let all = [&id, &a, &ab, &c];
        let chosen = |filter: Document, sort: Option<Document>| match plan(
            &filter,
            sort.as_ref(),
            &all,
            None,
        )
        .unwrap()
        {
            Plan::IndexScan { index, .. } => Some(all[index].spec.name.clone()),
            Plan::CollScan => None,
        };
        assert_eq!(
            chosen(doc! { "a": 1, "b": 2 }, None).as_deref(),
            Some("a_1_b_1")
        );
        assert_eq!(chosen(doc! { "a": 1 }, None).as_deref(), Some("a_1"));
        assert_eq!(
            chosen(doc! { "a": { "$gt": 1 }, "c": 3 }, None).as_deref(),
            Some("c_1")
        );
        assert_eq!(
            chosen(doc! { "a": 1, "_id": 4 }, None).as_deref(),
            Some("_id_")
        );
        assert_eq!(
            chosen(doc! { "a": 1 }, Some(doc! { "b": 1 })).as_deref(),
            Some("a_1_b_1")
        );
        assert_eq!(chosen(doc! { "d": 1 }, None), None);
        assert_eq!(chosen(doc! { "$or": [{ "a": 1 }, { "c": 1 }] }, None), None);
        assert_eq!(chosen(doc! { "a": [1, 2] }, None), None);
        assert_eq!(chosen(doc! { "a": { "$exists": true } }, None), None);
    }

    #[test]
    fn telling_whether_an_index_is_scanned_agrees_with_planning() {
        let id = build(doc! { "_id": 1 }, "_id_", &[]);
        let a = build(doc! { "a": 1 }, "a_1", &numbers());
        let ab = build(doc! { "a": 1, "b": 1 }, "a_1_b_1", &[]);
        let sparse_spec =
            IndexSpec::parse(&doc! { "key": { "c": 1 }, "name": "c_1", "sparse": true }).unwrap();
        let c = Index::new(sparse_spec).unwrap();
        let all = [&id, &a, &ab, &c];
        let filters = [
            doc! {},
            doc! { "a": 1 },
            doc! { "b": 2 },
            doc! { "c": 3 },
            doc! { "a": { "$nin": [1] } },
            doc! { "_id": 4 },
            doc! { "$or": [{ "a": 1 }, { "b": 1 }] },
        ];
        let sorts = [None, Some(doc! { "a": 1 }), Some(doc! { "b": -1 })];
        let hints = [
            None,
            Some(Bson::String("c_1".into())),
            Some(Bson::Document(doc! { "$natural": 1 })),
            Some(Bson::Document(doc! {})),
        ];
        for filter in &filters {
            for sort in &sorts {
                for hint in &hints {
                    let planned =
                        plan_limited(filter, sort.as_ref(), &all, hint.as_ref(), Some(5)).unwrap();
                    assert_eq!(
                        scans_an_index(filter, sort.as_ref(), &all, hint.as_ref()).unwrap(),
                        matches!(planned, Plan::IndexScan { .. }),
                        "{filter} {sort:?} {hint:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn hints_force_an_index_or_a_collection_scan() {
        let a = build(doc! { "a": 1 }, "a_1", &numbers());
        let sparse_spec =
            IndexSpec::parse(&doc! { "key": { "b": 1 }, "name": "b_1", "sparse": true }).unwrap();
        let b = Index::new(sparse_spec).unwrap();
        let all = [&a, &b];
        assert!(matches!(
            plan(&doc! { "b": "x" }, None, &all, None).unwrap(),
            Plan::CollScan
        ));
        let p = plan(
            &doc! { "b": "x" },
            None,
            &all,
            Some(&Bson::String("b_1".into())),
        )
        .unwrap();
        assert!(matches!(p, Plan::IndexScan { index: 1, .. }));
        let p = plan(
            &doc! { "b": "x" },
            None,
            &all,
            Some(&Bson::Document(doc! { "a": 1 })),
        )
        .unwrap();
        let Plan::IndexScan {
            index: 0, bounds, ..
        } = p
        else {
            panic!("expected a scan of a_1")
        };
        assert!(bounds.is_full());
        let p = plan(
            &doc! { "a": 1 },
            None,
            &all,
            Some(&Bson::Document(doc! { "$natural": 1 })),
        )
        .unwrap();
        assert!(matches!(p, Plan::CollScan));
        let err = plan(&doc! {}, None, &all, Some(&Bson::String("nope".into()))).unwrap_err();
        assert_eq!(err.code_number(), 2);
        assert_eq!(
            err.message,
            "hint provided does not correspond to an existing index"
        );
    }

    #[test]
    fn explain_describes_the_winning_plan() {
        let a = build(doc! { "a": 1 }, "a_1", &[]);
        let p = plan(&doc! { "a": { "$gt": 5 } }, None, &[&a], None).unwrap();
        let d = p.describe(&[&a]);
        assert_eq!(d.get_str("stage").unwrap(), "FETCH");
        let input = d.get_document("inputStage").unwrap();
        assert_eq!(input.get_str("stage").unwrap(), "IXSCAN");
        assert_eq!(input.get_str("indexName").unwrap(), "a_1");
        assert_eq!(input.get_document("keyPattern").unwrap(), &doc! { "a": 1 });
        assert_eq!(input.get_str("direction").unwrap(), "forward");
        assert_eq!(
            input.get_document("indexBounds").unwrap(),
            &doc! { "a": ["(5, inf.0]"] }
        );
        assert_eq!(
            Plan::CollScan.describe(&[&a]),
            doc! { "stage": "COLLSCAN", "direction": "forward" }
        );
    }
}

#[cfg(test)]
mod superset_tests {
    //! Randomised check that index bounds never lose a matching document, against a small
    //! reference matcher for the operators the planner bounds.
    use super::super::IndexSpec;
    use super::*;
    use crate::value::{compare, values_equal};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::HashSet;

    fn scalar(rng: &mut StdRng) -> Bson {
        match rng.gen_range(0..7) {
            0 => Bson::Int32(rng.gen_range(-3..4)),
            1 => Bson::Int64(rng.gen_range(-3..4)),
            2 => Bson::Double(rng.gen_range(-3..4) as f64 / 2.0),
            3 => Bson::String(["", "a", "ab", "abc", "b", "ba"][rng.gen_range(0..6)].into()),
            4 => Bson::Null,
            5 => Bson::Boolean(rng.gen()),
            _ => Bson::Document(doc! { "x": rng.gen_range(0..2) }),
        }
    }

    fn value(rng: &mut StdRng, arrays: bool) -> Option<Bson> {
        match rng.gen_range(0..10) {
            0 => None,
            1 | 2 if arrays => Some(Bson::Array(
                (0..rng.gen_range(0..3)).map(|_| scalar(rng)).collect(),
            )),
            _ => Some(scalar(rng)),
        }
    }

    fn condition(rng: &mut StdRng) -> Bson {
        let operand = scalar(rng);
        match rng.gen_range(0..8) {
            0 => operand,
            1 => Bson::Document(doc! { "$in": [scalar(rng), scalar(rng)] }),
            2 => Bson::Document(doc! { "$gt": operand }),
            3 => Bson::Document(doc! { "$gte": operand }),
            4 => Bson::Document(doc! { "$lt": operand }),
            5 => Bson::Document(doc! { "$lte": operand, "$gt": scalar(rng) }),
            6 => {
                let pattern = ["^a", "^ab", "^b?", "^"][rng.gen_range(0..4)];
                Bson::Document(doc! { "$regex": pattern })
            }
            _ => Bson::Document(doc! { "$eq": operand }),
        }
    }

    fn candidates(v: Option<&Bson>) -> Vec<Bson> {
        match v {
            None => vec![Bson::Null],
            Some(Bson::Array(items)) => {
                let mut c = items.clone();
                c.push(Bson::Array(items.clone()));
                c
            }
            Some(v) => vec![v.clone()],
        }
    }

    fn op_matches(v: Option<&Bson>, op: &str, arg: &Bson) -> bool {
        let cs = candidates(v);
        let cmp = |pred: fn(Ordering) -> bool| {
            cs.iter().any(|c| {
                canonical_rank(c) == canonical_rank(arg)
                    && !matches!(arg, Bson::Null)
                    && pred(compare(c, arg))
            })
        };
        match op {
            "$eq" => {
                cs.iter().any(|c| values_equal(c, arg))
                    || (matches!(arg, Bson::Null) && v.is_none())
            }
            "$in" => match arg {
                Bson::Array(items) => items.iter().any(|i| op_matches(v, "$eq", i)),
                _ => false,
            },
            "$gt" => cmp(|o| o == Ordering::Greater),
            "$gte" => cmp(|o| o != Ordering::Less),
            "$lt" => cmp(|o| o == Ordering::Less),
            "$lte" => cmp(|o| o != Ordering::Greater),
            "$regex" => {
                let prefix = arg.as_str().unwrap_or("").trim_start_matches('^');
                let prefix = prefix.trim_end_matches('?');
                let optional = arg.as_str().unwrap_or("").ends_with('?');
                cs.iter().any(|c| match c {
                    Bson::String(s) if optional => s.starts_with(&prefix[..prefix.len() - 1]),
                    Bson::String(s) => s.starts_with(prefix),
                    _ => false,
                })
            }
            _ => false,
        }
    }

    fn matches(d: &Document, filter: &Document) -> bool {
        filter.iter().all(|(field, cond)| {
            if field == "$and" {
                return cond.as_array().is_some_and(|members| {
                    members
                        .iter()
                        .all(|m| m.as_document().is_some_and(|m| matches(d, m)))
                });
            }
            let v = d.get(field);
            match cond {
                Bson::Document(ops) if ops.keys().next().is_some_and(|k| k.starts_with('$')) => {
                    ops.iter().all(|(op, arg)| op_matches(v, op, arg))
                }
                other => op_matches(v, "$eq", other),
            }
        })
    }

    fn check(arrays: bool, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let docs: Vec<Document> = (0..60)
            .map(|_| {
                let mut d = Document::new();
                for f in ["a", "b"] {
                    if let Some(v) = value(&mut rng, arrays && f == "a") {
                        d.insert(f, v);
                    }
                }
                d
            })
            .collect();
        let mut indexes = Vec::new();
        for (key, name) in [
            (doc! { "a": 1 }, "a_1"),
            (doc! { "a": -1, "b": 1 }, "a_-1_b_1"),
            (doc! { "b": 1, "a": -1 }, "b_1_a_-1"),
        ] {
            let mut idx =
                Index::new(IndexSpec::parse(&doc! { "key": key, "name": name }).unwrap()).unwrap();
            for (rid, d) in docs.iter().enumerate() {
                let keys = idx.keys_for(d).unwrap();
                idx.insert(&keys, rid as RecordId);
            }
            indexes.push(idx);
        }
        for _ in 0..400 {
            let mut filter = Document::new();
            match rng.gen_range(0..3) {
                0 => {
                    filter.insert("a", condition(&mut rng));
                }
                1 => {
                    filter.insert("a", condition(&mut rng));
                    filter.insert("b", condition(&mut rng));
                }
                _ => {
                    filter.insert(
                        "$and",
                        vec![
                            Bson::Document(doc! { "a": condition(&mut rng) }),
                            Bson::Document(doc! { "a": condition(&mut rng) }),
                        ],
                    );
                    filter.insert("b", condition(&mut rng));
                }
            }
            let expected: HashSet<RecordId> = docs
                .iter()
                .enumerate()
                .filter(|(_, d)| matches(d, &filter))
                .map(|(rid, _)| rid as RecordId)
                .collect();
            for (i, idx) in indexes.iter().enumerate() {
                let hint = Bson::String(idx.spec.name.clone());
                for sort in [None, Some(doc! { "a": 1 }), Some(doc! { "a": -1, "b": -1 })] {
                    let p = plan(&filter, sort.as_ref(), &[idx], Some(&hint)).unwrap();
                    let Plan::IndexScan {
                        index,
                        bounds,
                        reverse,
                        provides_sort,
                    } = p
                    else {
                        panic!("a hinted plan scans the index")
                    };
                    assert_eq!(index, 0);
                    let scanned: Vec<RecordId> = idx.scan(&bounds, reverse).collect();
                    let unique: HashSet<RecordId> = scanned.iter().copied().collect();
                    assert_eq!(unique.len(), scanned.len(), "each record once");
                    let missing: Vec<_> = expected.difference(&unique).collect();
                    assert!(
                        missing.is_empty(),
                        "index {i} filter {filter} lost {missing:?}: {:?}",
                        missing
                            .iter()
                            .map(|r| &docs[**r as usize])
                            .collect::<Vec<_>>()
                    );
                    if provides_sort {
                        let sort = sort.as_ref().expect("a sort was asked for");
                        let key = |rid: &RecordId| -> Vec<(Bson, bool)> {
                            sort.iter()
                                .map(|(f, dir)| {
                                    let v = docs[*rid as usize].get(f).cloned();
                                    (v.unwrap_or(Bson::Null), dir.as_i32() == Some(-1))
                                })
                                .collect()
                        };
                        let found: Vec<_> =
                            scanned.iter().filter(|r| expected.contains(r)).collect();
                        for w in found.windows(2) {
                            let (x, y) = (key(w[0]), key(w[1]));
                            let ord = x.iter().zip(&y).fold(Ordering::Equal, |acc, (p, q)| {
                                acc.then_with(|| {
                                    let o = compare(&p.0, &q.0);
                                    if p.1 {
                                        o.reverse()
                                    } else {
                                        o
                                    }
                                })
                            });
                            assert_ne!(ord, Ordering::Greater, "filter {filter} sort {sort}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn bounds_never_lose_a_matching_document_without_arrays() {
        for seed in 0..5 {
            check(false, seed);
        }
    }

    #[test]
    fn bounds_never_lose_a_matching_document_with_arrays() {
        for seed in 0..5 {
            check(true, seed);
        }
    }
}
