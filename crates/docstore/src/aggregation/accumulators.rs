//! `$group`: the group key, the accumulators (`$sum $avg $min $max $first $last $push $addToSet
//! $count $mergeObjects`) and the grouping itself, keyed by MongoDB's value equality.

use crate::error::{Error, Result};
use crate::expression::operators::{merge_into, sum_numbers};
use crate::expression::{Expression, Scope};
use crate::value::{compare, f64_to_decimal, is_number, to_f64};
use bson::{Bson, Document};
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// A value ordered (and made equal) by MongoDB's comparison: `1`, `1.0` and `NumberLong(1)` are
/// one key.
#[derive(Debug, Clone)]
pub(crate) struct OrdBson(pub Bson);

impl PartialEq for OrdBson {
    fn eq(&self, other: &Self) -> bool {
        compare(&self.0, &other.0) == Ordering::Equal
    }
}

impl Eq for OrdBson {}

impl PartialOrd for OrdBson {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrdBson {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(&self.0, &other.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
    AddToSet,
    Count,
    MergeObjects,
}

/// Accumulators MongoDB has that docstore does not implement.
const UNSUPPORTED_ACCUMULATORS: &[&str] = &[
    "$accumulator",
    "$bottom",
    "$bottomN",
    "$firstN",
    "$lastN",
    "$maxN",
    "$minN",
    "$top",
    "$topN",
    "$stdDevPop",
    "$stdDevSamp",
    "$median",
    "$percentile",
];

#[derive(Debug, Clone)]
struct Accumulator {
    field: String,
    kind: Kind,
    arg: Expression,
}

#[derive(Debug, Clone)]
enum State {
    /// Running total with `$add`'s widening rules.
    Sum(Bson),
    Avg {
        total: Bson,
        count: usize,
    },
    Min(Option<Bson>),
    Max(Option<Bson>),
    First(Option<Bson>),
    Last(Bson),
    Push(Vec<Bson>),
    AddToSet(Vec<Bson>, Seen),
    Count(i64),
    Merge(Document),
}

/// The values an `$addToSet` has taken. While every value is a 32- or 64-bit integer they are
/// kept in a hash set of `i64` (equal under MongoDB's comparison exactly when equal as
/// integers): a report's distinct visitors are hundreds of thousands of `NumberLong`s, and a
/// search tree of `Bson` compared by type and value cost several times more per value. The
/// first value of any other type moves them into the ordered set, which compares across types.
#[derive(Debug, Clone)]
enum Seen {
    Integers(HashSet<i64>),
    Values(BTreeSet<OrdBson>),
}

impl Seen {
    /// Add `v`; whether it was new.
    fn insert(&mut self, v: &Bson) -> bool {
        let integer = match v {
            Bson::Int32(n) => Some(i64::from(*n)),
            Bson::Int64(n) => Some(*n),
            _ => None,
        };
        match (&mut *self, integer) {
            (Seen::Integers(set), Some(n)) => set.insert(n),
            (Seen::Integers(set), None) => {
                let values = set.drain().map(|n| OrdBson(Bson::Int64(n))).collect();
                *self = Seen::Values(values);
                self.insert(v)
            }
            (Seen::Values(set), _) => set.insert(OrdBson(v.clone())),
        }
    }
}

/// A parsed `$group` specification.
#[derive(Debug, Clone)]
pub(super) struct Group {
    id: Expression,
    accumulators: Vec<Accumulator>,
    /// The top-level fields of its input it reads (`None`: it may read any, see
    /// [`fields_read`]).
    fields: Option<Vec<String>>,
}

impl Group {
    pub(super) fn parse(spec: &Bson) -> Result<Group> {
        let Bson::Document(spec) = spec else {
            return Err(Error::location(
                15947,
                "a group's fields must be specified in an object",
            ));
        };
        let mut id = None;
        let mut accumulators = Vec::new();
        for (field, value) in spec {
            if field == "_id" {
                id = Some(Expression::parse(value)?);
                continue;
            }
            if field.starts_with('$') {
                return Err(Error::location(
                    40236,
                    format!("The field name '{field}' cannot be an operator name"),
                ));
            }
            if field.contains('.') {
                return Err(Error::location(
                    40235,
                    format!("The field name '{field}' cannot contain '.'"),
                ));
            }
            let Bson::Document(acc) = value else {
                return Err(Error::location(
                    40234,
                    format!("The field '{field}' must be an accumulator object"),
                ));
            };
            if acc.len() != 1 {
                return Err(Error::location(
                    40238,
                    format!("The field '{field}' must specify one accumulator"),
                ));
            }
            let (name, arg) = acc.iter().next().expect("one field");
            let kind = match name.as_str() {
                "$sum" => Kind::Sum,
                "$avg" => Kind::Avg,
                "$min" => Kind::Min,
                "$max" => Kind::Max,
                "$first" => Kind::First,
                "$last" => Kind::Last,
                "$push" => Kind::Push,
                "$addToSet" => Kind::AddToSet,
                "$count" => Kind::Count,
                "$mergeObjects" => Kind::MergeObjects,
                other if UNSUPPORTED_ACCUMULATORS.contains(&other) => {
                    return Err(Error::not_supported(format!("the {other} accumulator")))
                }
                other => {
                    return Err(Error::location(
                        15952,
                        format!("unknown group operator '{other}'"),
                    ))
                }
            };
            if kind == Kind::Count {
                if !matches!(arg, Bson::Document(d) if d.is_empty()) {
                    return Err(Error::location(
                        5533800,
                        "$count takes no arguments, i.e. $count:{}",
                    ));
                }
            } else if matches!(arg, Bson::Array(_)) {
                return Err(Error::location(
                    40237,
                    format!("The {name} accumulator is a unary operator"),
                ));
            }
            accumulators.push(Accumulator {
                field: field.clone(),
                kind,
                arg: Expression::parse(arg)?,
            });
        }
        let id =
            id.ok_or_else(|| Error::location(15955, "a group specification must include an _id"))?;
        let mut fields = Vec::new();
        let fields = fields_read(&Bson::Document(spec.clone()), &mut fields).then(|| {
            fields.sort();
            fields.dedup();
            fields
        });
        Ok(Group {
            id,
            accumulators,
            fields,
        })
    }

    /// The top-level fields of its input documents it reads, when known: a caller may give it
    /// documents holding only those (the rest would not change its groups).
    pub(super) fn fields(&self) -> Option<&[String]> {
        self.fields.as_deref()
    }

    /// A `$group` stage built in code (for `$count`, `$sortByCount` and `$bucket`).
    pub(crate) fn count_by(id: Expression, field: &str) -> Group {
        Group {
            id,
            accumulators: vec![Accumulator {
                field: field.to_string(),
                kind: Kind::Sum,
                arg: Expression::Literal(Bson::Int32(1)),
            }],
            fields: None,
        }
    }

    /// Whether the groups depend on nothing but how many documents come in: a constant `_id`
    /// and only `$sum`s of constants or `$count`s (the driver's `count_documents` sends
    /// `{$group: {_id: 1, n: {$sum: 1}}}`). Such a stage may be given placeholder documents.
    pub(super) fn only_counts(&self) -> bool {
        matches!(self.id, Expression::Literal(_))
            && self.accumulators.iter().all(|a| match a.kind {
                Kind::Count => true,
                Kind::Sum => matches!(&a.arg, Expression::Literal(v) if crate::value::is_number(v)),
                _ => false,
            })
    }

    /// Group `input`; groups come out in the order their first document came in.
    pub(crate) fn run(&self, input: &[Document], vars: &Document) -> Result<Vec<Document>> {
        self.run_over(input.iter().map(Ok), vars)
    }

    /// [`Group::run`] over documents given one at a time, each dropped once counted: a
    /// report's million matches are never all held decoded at once.
    pub(crate) fn run_over<D: Borrow<Document>>(
        &self,
        input: impl IntoIterator<Item = Result<D>>,
        vars: &Document,
    ) -> Result<Vec<Document>> {
        self.grouped(input, vars, |scope| {
            Ok(self.id.eval(scope)?.unwrap_or(Bson::Null))
        })
    }

    /// Group by a key computed by `key_of` instead of the `_id` expression.
    pub(crate) fn run_keyed(
        &self,
        input: &[Document],
        vars: &Document,
        key_of: impl Fn(&Scope) -> Result<Bson>,
    ) -> Result<Vec<Document>> {
        self.grouped(input.iter().map(Ok), vars, key_of)
    }

    fn grouped<D: Borrow<Document>>(
        &self,
        input: impl IntoIterator<Item = Result<D>>,
        vars: &Document,
        key_of: impl Fn(&Scope) -> Result<Bson>,
    ) -> Result<Vec<Document>> {
        let mut index: BTreeMap<OrdBson, usize> = BTreeMap::new();
        let mut groups: Vec<(Bson, Vec<State>)> = Vec::new();
        for doc in input {
            let doc = doc?;
            let scope = Scope::new(doc.borrow(), vars);
            let key = OrdBson(key_of(&scope)?);
            let slot = match index.get(&key) {
                Some(i) => *i,
                None => {
                    groups.push((
                        key.0.clone(),
                        self.accumulators.iter().map(initial).collect(),
                    ));
                    index.insert(key, groups.len() - 1);
                    groups.len() - 1
                }
            };
            let states = &mut groups[slot].1;
            for (acc, state) in self.accumulators.iter().zip(states.iter_mut()) {
                let v = acc.arg.eval(&scope)?;
                accumulate(state, v)?;
            }
        }
        Ok(groups
            .into_iter()
            .map(|(key, states)| {
                let mut out = Document::new();
                out.insert("_id", key);
                for (acc, state) in self.accumulators.iter().zip(states) {
                    out.insert(acc.field.clone(), finish(state));
                }
                out
            })
            .collect())
    }
}

fn initial(acc: &Accumulator) -> State {
    match acc.kind {
        Kind::Sum => State::Sum(Bson::Int32(0)),
        Kind::Avg => State::Avg {
            total: Bson::Int32(0),
            count: 0,
        },
        Kind::Min => State::Min(None),
        Kind::Max => State::Max(None),
        Kind::First => State::First(None),
        Kind::Last => State::Last(Bson::Null),
        Kind::Push => State::Push(Vec::new()),
        Kind::AddToSet => State::AddToSet(Vec::new(), Seen::Integers(HashSet::new())),
        Kind::Count => State::Count(0),
        Kind::MergeObjects => State::Merge(Document::new()),
    }
}

fn accumulate(state: &mut State, v: Option<Bson>) -> Result<()> {
    match state {
        // Non-numeric values (including arrays) are ignored by `$sum` and `$avg`.
        State::Sum(total) => {
            if let Some(v) = v.filter(is_number) {
                *total = sum_numbers([&*total, &v].into_iter());
            }
        }
        State::Avg { total, count } => {
            if let Some(v) = v.filter(is_number) {
                *total = sum_numbers([&*total, &v].into_iter());
                *count += 1;
            }
        }
        State::Min(best) => update_extreme(best, v, Ordering::Less),
        State::Max(best) => update_extreme(best, v, Ordering::Greater),
        State::First(first) => {
            if first.is_none() {
                *first = Some(v.unwrap_or(Bson::Null));
            }
        }
        State::Last(last) => *last = v.unwrap_or(Bson::Null),
        State::Push(items) => {
            if let Some(v) = v {
                items.push(v);
            }
        }
        State::AddToSet(items, seen) => {
            if let Some(v) = v {
                if seen.insert(&v) {
                    items.push(v);
                }
            }
        }
        State::Count(n) => *n += 1,
        State::Merge(out) => merge_into(out, &v)?,
    }
    Ok(())
}

/// Push onto `out` the top-level field of every field path (`"$a.b"` reads `a`) in an
/// expression's specification, as written; `false` when it may read fields no path names: the
/// whole document (`$$ROOT`, `$$CURRENT`), a field named by a literal (`$getField`,
/// `$setField`, `$unsetField`) or the text score (`$meta`). Strings inside `$literal` are
/// taken as paths too: naming a field too many only costs its decoding.
pub(super) fn fields_read(spec: &Bson, out: &mut Vec<String>) -> bool {
    match spec {
        Bson::String(s) => {
            if let Some(var) = s.strip_prefix("$$") {
                let name = var.split('.').next().unwrap_or_default();
                !matches!(name, "ROOT" | "CURRENT")
            } else if let Some(path) = s.strip_prefix('$') {
                out.push(path.split('.').next().unwrap_or_default().to_string());
                true
            } else {
                true
            }
        }
        Bson::Array(items) => items.iter().all(|v| fields_read(v, out)),
        Bson::Document(d) => d.iter().all(|(k, v)| {
            !matches!(
                k.as_str(),
                "$getField" | "$setField" | "$unsetField" | "$meta"
            ) && fields_read(v, out)
        }),
        _ => true,
    }
}

/// `$min`/`$max` skip null, undefined and missing values.
fn update_extreme(best: &mut Option<Bson>, v: Option<Bson>, want: Ordering) {
    if let Some(v) = v.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) {
        if best.as_ref().is_none_or(|b| compare(&v, b) == want) {
            *best = Some(v);
        }
    }
}

fn finish(state: State) -> Bson {
    match state {
        State::Sum(total) => total,
        State::Avg { total, count } => {
            if count == 0 {
                Bson::Null
            } else {
                let avg = to_f64(&total).unwrap_or(f64::NAN) / count as f64;
                if matches!(total, Bson::Decimal128(_)) {
                    Bson::Decimal128(f64_to_decimal(avg))
                } else {
                    Bson::Double(avg)
                }
            }
        }
        State::Min(v) | State::Max(v) => v.unwrap_or(Bson::Null),
        State::First(v) => v.unwrap_or(Bson::Null),
        State::Last(v) => v,
        State::Push(items) | State::AddToSet(items, _) => Bson::Array(items),
        State::Count(n) => i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32),
        State::Merge(d) => Bson::Document(d),
    }
}
