//! The update operators: validating each operator's argument when the update is parsed, and
//! applying one operator at one concrete path (every positional part already resolved).

use super::{format, path};
use crate::error::{Error, Result};
use crate::query::{ElementMatcher, Filter};
use crate::value::{self, Arith, Overflow};
use bson::{Bson, Document, Timestamp};
use std::cmp::Ordering;

/// The operator names mongod accepts in an update document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OpKind {
    Set,
    SetOnInsert,
    Unset,
    Inc,
    Mul,
    Min,
    Max,
    Rename,
    CurrentDate,
    Push,
    AddToSet,
    Pop,
    Pull,
    PullAll,
    Bit,
}

impl OpKind {
    pub(super) fn from_name(name: &str) -> Option<OpKind> {
        Some(match name {
            "$set" => OpKind::Set,
            "$setOnInsert" => OpKind::SetOnInsert,
            "$unset" => OpKind::Unset,
            "$inc" => OpKind::Inc,
            "$mul" => OpKind::Mul,
            "$min" => OpKind::Min,
            "$max" => OpKind::Max,
            "$rename" => OpKind::Rename,
            "$currentDate" => OpKind::CurrentDate,
            "$push" => OpKind::Push,
            "$addToSet" => OpKind::AddToSet,
            "$pop" => OpKind::Pop,
            "$pull" => OpKind::Pull,
            "$pullAll" => OpKind::PullAll,
            "$bit" => OpKind::Bit,
            _ => return None,
        })
    }
}

/// One parsed operator with its argument, ready to apply at a path.
#[derive(Debug, Clone)]
pub(super) enum Op {
    Set(Bson),
    SetOnInsert(Bson),
    Unset,
    Inc(Bson),
    Mul(Bson),
    Min(Bson),
    Max(Bson),
    CurrentDate {
        timestamp: bool,
    },
    /// Stored at the destination path; `from` is the source.
    Rename {
        from: Vec<String>,
        from_dotted: String,
    },
    Push(PushSpec),
    AddToSet(Vec<Bson>),
    Pop {
        first: bool,
    },
    Pull(PullMatcher),
    PullAll(Vec<Bson>),
    Bit(Vec<(BitOp, Bson)>),
}

#[derive(Debug, Clone)]
pub(super) struct PushSpec {
    values: Vec<Bson>,
    position: Option<i64>,
    sort: Option<PushSort>,
    slice: Option<i64>,
}

#[derive(Debug, Clone)]
enum PushSort {
    /// `$sort: 1` or `$sort: -1`: the elements themselves.
    Whole { descending: bool },
    /// `$sort: {field: 1, ...}`: dotted fields of the elements (missing counts as null).
    Fields(Vec<(Vec<String>, bool)>),
}

/// What `$pull` removes, chosen as mongod chooses it.
#[derive(Debug, Clone)]
pub(super) enum PullMatcher {
    /// A scalar or array: elements equal to it.
    Equal(Bson),
    /// A document of field conditions: embedded documents matching it as a query.
    Object(Filter),
    /// An operator document or regex: elements satisfying the condition.
    Condition(ElementMatcher),
}

impl PullMatcher {
    fn matches(&self, element: &Bson) -> bool {
        match self {
            PullMatcher::Equal(v) => value::values_equal(element, v),
            PullMatcher::Object(filter) => match element {
                Bson::Document(d) => filter.matches(d),
                _ => false,
            },
            PullMatcher::Condition(m) => m.matches(element),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) enum BitOp {
    And,
    Or,
    Xor,
}

/// Validates the argument of `kind` for the field `field` (not used for `$rename`).
pub(super) fn parse_argument(kind: OpKind, field: &str, arg: &Bson) -> Result<Op> {
    Ok(match kind {
        OpKind::Set => Op::Set(arg.clone()),
        OpKind::SetOnInsert => Op::SetOnInsert(arg.clone()),
        OpKind::Unset => Op::Unset,
        OpKind::Inc | OpKind::Mul => {
            if !value::is_number(arg) {
                let verb = if kind == OpKind::Inc {
                    "increment"
                } else {
                    "multiply"
                };
                return Err(Error::type_mismatch(format!(
                    "Cannot {verb} with non-numeric argument: {{{}}}",
                    format::element(field, arg)
                )));
            }
            if kind == OpKind::Inc {
                Op::Inc(arg.clone())
            } else {
                Op::Mul(arg.clone())
            }
        }
        OpKind::Min => Op::Min(arg.clone()),
        OpKind::Max => Op::Max(arg.clone()),
        OpKind::CurrentDate => parse_current_date(arg)?,
        OpKind::Push => Op::Push(parse_push(arg)?),
        OpKind::AddToSet => Op::AddToSet(parse_add_to_set(arg)?),
        OpKind::Pop => parse_pop(field, arg)?,
        OpKind::Pull => Op::Pull(parse_pull(arg)?),
        OpKind::PullAll => match arg {
            Bson::Array(items) => Op::PullAll(items.clone()),
            other => {
                return Err(Error::bad_value(format!(
                    "$pullAll requires an array argument but was given a {}",
                    value::type_name(other)
                )))
            }
        },
        OpKind::Bit => Op::Bit(parse_bit(arg)?),
        OpKind::Rename => {
            return Err(Error::internal(
                "$rename is parsed with its destination path",
            ));
        }
    })
}

fn parse_current_date(arg: &Bson) -> Result<Op> {
    match arg {
        Bson::Boolean(_) => Ok(Op::CurrentDate { timestamp: false }),
        Bson::Document(d) => {
            let mut found = None;
            for (k, v) in d {
                if k != "$type" {
                    return Err(Error::bad_value(format!(
                        "Unrecognized $currentDate option: {k}"
                    )));
                }
                match v {
                    Bson::String(s) if s == "date" => found = Some(false),
                    Bson::String(s) if s == "timestamp" => found = Some(true),
                    _ => {}
                }
            }
            match found {
                Some(timestamp) => Ok(Op::CurrentDate { timestamp }),
                None => Err(Error::bad_value(
                    "The '$type' string field is required to be 'date' or 'timestamp': \
                     {$currentDate: {field : {$type: 'date'}}}",
                )),
            }
        }
        other => Err(Error::bad_value(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type \
             expression ({{$type: 'timestamp/date'}}).",
            value::type_name(other)
        ))),
    }
}

/// An integral number (int, long, or a double/decimal with no fraction) as i64.
fn integer_value(v: &Bson) -> Option<i64> {
    value::Number::from_bson(v).and_then(value::Number::as_i64_exact)
}

fn parse_push(arg: &Bson) -> Result<PushSpec> {
    let Bson::Document(clauses) = arg else {
        return Ok(PushSpec::single(arg.clone()));
    };
    let Some(each) = clauses.get("$each") else {
        return Ok(PushSpec::single(arg.clone()));
    };
    if let Some(unknown) = clauses
        .keys()
        .find(|k| !matches!(k.as_str(), "$each" | "$slice" | "$sort" | "$position"))
    {
        return Err(Error::bad_value(format!(
            "Unrecognized clause in $push: {unknown}"
        )));
    }
    let Bson::Array(values) = each else {
        return Err(Error::bad_value(format!(
            "The argument to $each in $push must be an array but it was of type: {}",
            value::type_name(each)
        )));
    };
    let slice = match clauses.get("$slice") {
        None => None,
        Some(v) => Some(integer_value(v).ok_or_else(|| {
            Error::bad_value(format!(
                "The value for $slice must be an integer value but was given type: {}",
                value::type_name(v)
            ))
        })?),
    };
    let sort = match clauses.get("$sort") {
        None => None,
        Some(Bson::Document(pattern)) => Some(parse_sort_pattern(pattern)?),
        Some(v) if value::is_number(v) => match value::to_f64(v) {
            Some(d) if d == 1.0 || d == -1.0 => Some(PushSort::Whole {
                descending: d < 0.0,
            }),
            _ => {
                return Err(Error::bad_value(
                    "The $sort element value must be either 1 or -1",
                ))
            }
        },
        Some(_) => {
            return Err(Error::bad_value(
                "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to \
                 sort embedded fields",
            ))
        }
    };
    let position = match clauses.get("$position") {
        None => None,
        Some(v) => Some(integer_value(v).ok_or_else(|| {
            Error::bad_value(format!(
                "The value for $position must be an integer value, not of type: {}",
                value::type_name(v)
            ))
        })?),
    };
    Ok(PushSpec {
        values: values.clone(),
        position,
        sort,
        slice,
    })
}

fn parse_sort_pattern(pattern: &Document) -> Result<PushSort> {
    if pattern.is_empty() {
        return Err(Error::bad_value(
            "The $sort pattern is empty when it should be a set of fields.",
        ));
    }
    let mut fields = Vec::with_capacity(pattern.len());
    for (name, direction) in pattern {
        let order = value::to_f64(direction);
        let descending = if order == Some(1.0) {
            false
        } else if order == Some(-1.0) {
            true
        } else {
            return Err(Error::bad_value(
                "The $sort element value must be either 1 or -1",
            ));
        };
        if name.is_empty() {
            return Err(Error::bad_value("The $sort field cannot be empty"));
        }
        let parts: Vec<String> = name.split('.').map(str::to_string).collect();
        if parts.iter().any(String::is_empty) {
            return Err(Error::bad_value(format!(
                "The $sort field is a dotted field but has an empty part: {name}"
            )));
        }
        fields.push((parts, descending));
    }
    Ok(PushSort::Fields(fields))
}

fn parse_add_to_set(arg: &Bson) -> Result<Vec<Bson>> {
    let mut values = match arg {
        Bson::Document(d) if d.keys().next().map(String::as_str) == Some("$each") => {
            let Some(Bson::Array(items)) = d.get("$each") else {
                let found = d.get("$each").map(value::type_name).unwrap_or("missing");
                return Err(Error::type_mismatch(format!(
                    "The argument to $each in $addToSet must be an array but it was of type {found}"
                )));
            };
            if d.len() > 1 {
                return Err(Error::bad_value(format!(
                    "Found unexpected fields after $each in $addToSet: {}",
                    format::document(d)
                )));
            }
            items.clone()
        }
        other => vec![other.clone()],
    };
    // Duplicates inside $each are added once, in their first position.
    let mut unique: Vec<Bson> = Vec::with_capacity(values.len());
    for v in values.drain(..) {
        if !unique.iter().any(|u| value::values_equal(u, &v)) {
            unique.push(v);
        }
    }
    Ok(unique)
}

fn parse_pop(field: &str, arg: &Bson) -> Result<Op> {
    let Some(n) = value::to_f64(arg) else {
        return Err(Error::failed_to_parse(format!(
            "Expected a number in: {}",
            format::element(field, arg)
        )));
    };
    if n == 1.0 {
        Ok(Op::Pop { first: false })
    } else if n == -1.0 {
        Ok(Op::Pop { first: true })
    } else {
        Err(Error::failed_to_parse(format!(
            "$pop expects 1 or -1, found: {}",
            format::value_string(arg)
        )))
    }
}

/// Operators that take a field path, so that `{$pull: {a: {$gt: 1}}}` is a condition on the
/// value while `{$pull: {a: {b: 1}}}` matches embedded documents.
const PATH_KEYWORDS: &[&str] = &[
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$exists",
    "$type",
    "$regex",
    "$options",
    "$mod",
    "$all",
    "$elemMatch",
    "$size",
    "$not",
    "$bitsAllSet",
    "$bitsAllClear",
    "$bitsAnySet",
    "$bitsAnyClear",
    "$geoWithin",
    "$geoIntersects",
    "$within",
    "$near",
    "$nearSphere",
];

fn parse_pull(arg: &Bson) -> Result<PullMatcher> {
    match arg {
        Bson::Document(d) => {
            let first = d.keys().next().map(String::as_str).unwrap_or("");
            if PATH_KEYWORDS.contains(&first) {
                Ok(PullMatcher::Condition(ElementMatcher::parse(arg)?))
            } else {
                Ok(PullMatcher::Object(Filter::parse(d)?))
            }
        }
        Bson::RegularExpression(_) => Ok(PullMatcher::Condition(ElementMatcher::parse(arg)?)),
        other => Ok(PullMatcher::Equal(other.clone())),
    }
}

fn parse_bit(arg: &Bson) -> Result<Vec<(BitOp, Bson)>> {
    let Bson::Document(d) = arg else {
        return Err(Error::bad_value(format!(
            "The $bit modifier is not compatible with a {}. You must pass in an embedded \
             document: {{$bit: {{field: {{and/or/xor: #}}}}",
            value::type_name(arg)
        )));
    };
    let mut ops = Vec::with_capacity(d.len());
    for (name, operand) in d {
        let op = match name.as_str() {
            "and" => BitOp::And,
            "or" => BitOp::Or,
            "xor" => BitOp::Xor,
            _ => {
                return Err(Error::bad_value(format!(
                    "The $bit modifier only supports 'and', 'or', and 'xor', not '{name}' which \
                     is an unknown operator: {{{}}}",
                    format::element(name, operand)
                )))
            }
        };
        if !matches!(operand, Bson::Int32(_) | Bson::Int64(_)) {
            return Err(Error::bad_value(format!(
                "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not supported \
                 here: {{{}}}",
                value::type_name(operand),
                format::element(name, operand)
            )));
        }
        ops.push((op, operand.clone()));
    }
    if ops.is_empty() {
        return Err(Error::bad_value(
            "You must pass in at least one bitwise operation. The format is: {$bit: {field: \
             {and/or/xor: #}}",
        ));
    }
    Ok(ops)
}

impl PushSpec {
    fn single(value: Bson) -> PushSpec {
        PushSpec {
            values: vec![value],
            position: None,
            sort: None,
            slice: None,
        }
    }

    fn apply(&self, items: &mut Vec<Bson>) {
        if !self.values.is_empty() {
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = match self.position {
                None => len,
                Some(p) if p >= len => len,
                Some(p) if p >= 0 => p,
                // Negative positions count back from the end; too far back means the front.
                Some(p) => len.saturating_add(p).max(0),
            };
            let at = usize::try_from(at).unwrap_or(items.len()).min(items.len());
            items.splice(at..at, self.values.iter().cloned());
        }
        if let Some(sort) = &self.sort {
            items.sort_by(|a, b| sort.compare(a, b));
        }
        if let Some(slice) = self.slice {
            let keep = usize::try_from(slice.unsigned_abs()).unwrap_or(usize::MAX);
            if items.len() > keep {
                if slice >= 0 {
                    items.truncate(keep);
                } else {
                    items.drain(..items.len() - keep);
                }
            }
        }
    }
}

impl PushSort {
    fn compare(&self, a: &Bson, b: &Bson) -> Ordering {
        match self {
            PushSort::Whole { descending } => {
                let ord = value::compare(a, b);
                if *descending {
                    ord.reverse()
                } else {
                    ord
                }
            }
            PushSort::Fields(fields) => {
                for (field, descending) in fields {
                    let ka = sort_key(a, field);
                    let kb = sort_key(b, field);
                    let ord = value::compare(ka, kb);
                    let ord = if *descending { ord.reverse() } else { ord };
                    if ord != Ordering::Equal {
                        return ord;
                    }
                }
                Ordering::Equal
            }
        }
    }
}

/// The value of `field` in an element for `$push`'s `$sort`; non-documents and missing fields
/// sort as null.
fn sort_key<'a>(element: &'a Bson, field: &[String]) -> &'a Bson {
    const NULL: &Bson = &Bson::Null;
    match element {
        Bson::Document(_) => path::get(element, field).unwrap_or(NULL),
        _ => NULL,
    }
}

/// What an operator needs to know about the document being updated.
pub(super) struct Env {
    /// `_id: <value>` of the document (or `no id`), for error messages.
    pub id: String,
    pub now: bson::DateTime,
}

/// Applies `op` at the concrete `path` of `root`.
pub(super) fn apply(root: &mut Bson, path_parts: &[String], op: &Op, env: &Env) -> Result<()> {
    let depth = path::existing_depth(root, path_parts);
    if depth < path_parts.len() {
        return match new_value(op, env)? {
            Some(v) => path::create(root, path_parts, depth, v),
            None => Ok(()),
        };
    }
    if let Op::Unset = op {
        return unset(root, path_parts);
    }
    let Some(target) = path::get_mut(root, path_parts) else {
        return Err(Error::internal("update target vanished"));
    };
    update_existing(target, path_parts, op, env)
}

fn unset(root: &mut Bson, path_parts: &[String]) -> Result<()> {
    let Some((last, parent_path)) = path_parts.split_last() else {
        return Ok(());
    };
    match path::get_mut(root, parent_path) {
        Some(Bson::Document(d)) => {
            d.remove(last);
        }
        // Unsetting an array element leaves a null in its place, so positions do not shift.
        Some(Bson::Array(items)) => {
            if let Some(slot) = path::parse_index(last).and_then(|i| items.get_mut(i)) {
                *slot = Bson::Null;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The value an operator creates when its path does not exist, or `None` when it does nothing.
fn new_value(op: &Op, env: &Env) -> Result<Option<Bson>> {
    Ok(match op {
        Op::Set(v) | Op::SetOnInsert(v) | Op::Min(v) | Op::Max(v) | Op::Inc(v) => Some(v.clone()),
        // $mul on a missing field stores a zero of the multiplier's type.
        Op::Mul(v) => match value::multiply(v, &Bson::Int32(0), Overflow::Fail) {
            Arith::Value(zero) => Some(zero),
            _ => Some(Bson::Int32(0)),
        },
        Op::CurrentDate { timestamp } => Some(current_date(*timestamp, env)),
        Op::Push(spec) => {
            let mut items = Vec::new();
            spec.apply(&mut items);
            Some(Bson::Array(items))
        }
        Op::AddToSet(values) => Some(Bson::Array(values.clone())),
        Op::Bit(ops) => Some(apply_bits(&Bson::Int32(0), ops)),
        Op::Unset | Op::Pop { .. } | Op::Pull(_) | Op::PullAll(_) | Op::Rename { .. } => None,
    })
}

fn current_date(timestamp: bool, env: &Env) -> Bson {
    if timestamp {
        let secs = env.now.timestamp_millis().div_euclid(1000);
        Bson::Timestamp(Timestamp {
            time: u32::try_from(secs).unwrap_or(0),
            increment: 1,
        })
    } else {
        Bson::DateTime(env.now)
    }
}

fn last_name(path_parts: &[String]) -> &str {
    path_parts.last().map(String::as_str).unwrap_or("")
}

fn update_existing(target: &mut Bson, path_parts: &[String], op: &Op, env: &Env) -> Result<()> {
    match op {
        Op::Set(v) | Op::SetOnInsert(v) => *target = v.clone(),
        Op::Unset | Op::Rename { .. } => {}
        Op::Inc(arg) | Op::Mul(arg) => {
            let name = if matches!(op, Op::Inc(_)) {
                "$inc"
            } else {
                "$mul"
            };
            if !value::is_number(target) {
                return Err(Error::type_mismatch(format!(
                    "Cannot apply {name} to a value of non-numeric type. {{{}}} has the field \
                     '{}' of non-numeric type {}",
                    env.id,
                    last_name(path_parts),
                    value::type_name(target)
                )));
            }
            let result = if matches!(op, Op::Inc(_)) {
                value::add(target, arg, Overflow::Fail)
            } else {
                value::multiply(target, arg, Overflow::Fail)
            };
            match result {
                Arith::Value(v) => *target = v,
                _ => {
                    return Err(Error::bad_value(format!(
                        "Failed to apply {name} operations to current value ({}) for document \
                         {{{}}}",
                        format::number_debug(target),
                        env.id
                    )))
                }
            }
        }
        Op::Min(v) => {
            if value::compare(v, target) == Ordering::Less {
                *target = v.clone();
            }
        }
        Op::Max(v) => {
            if value::compare(v, target) == Ordering::Greater {
                *target = v.clone();
            }
        }
        Op::CurrentDate { timestamp } => *target = current_date(*timestamp, env),
        Op::Push(spec) => match target {
            Bson::Array(items) => spec.apply(items),
            other => {
                return Err(Error::bad_value(format!(
                    "The field '{}' must be an array but is of type {} in document {{{}}}",
                    path_parts.join("."),
                    value::type_name(other),
                    env.id
                )))
            }
        },
        Op::AddToSet(values) => match target {
            Bson::Array(items) => {
                for v in values {
                    if !items.iter().any(|e| value::values_equal(e, v)) {
                        items.push(v.clone());
                    }
                }
            }
            other => {
                return Err(Error::bad_value(format!(
                    "Cannot apply $addToSet to non-array field. Field named '{}' has non-array \
                     type {}",
                    last_name(path_parts),
                    value::type_name(other)
                )))
            }
        },
        Op::Pop { first } => match target {
            Bson::Array(items) => {
                if *first {
                    if !items.is_empty() {
                        items.remove(0);
                    }
                } else {
                    items.pop();
                }
            }
            other => {
                return Err(Error::type_mismatch(format!(
                    "Path '{}' contains an element of non-array type '{}'",
                    path_parts.join("."),
                    value::type_name(other)
                )))
            }
        },
        Op::Pull(matcher) => match target {
            Bson::Array(items) => items.retain(|e| !matcher.matches(e)),
            _ => return Err(Error::bad_value("Cannot apply $pull to a non-array value")),
        },
        Op::PullAll(values) => match target {
            Bson::Array(items) => {
                items.retain(|e| !values.iter().any(|v| value::values_equal(e, v)))
            }
            _ => {
                return Err(Error::bad_value(
                    "Cannot apply $pullAll to a non-array value",
                ))
            }
        },
        Op::Bit(ops) => {
            if !matches!(target, Bson::Int32(_) | Bson::Int64(_)) {
                return Err(Error::bad_value(format!(
                    "Cannot apply $bit to a value of non-integral type.{} has the field {} of \
                     non-integer type {}",
                    env.id,
                    last_name(path_parts),
                    value::type_name(target)
                )));
            }
            *target = apply_bits(target, ops);
        }
    }
    Ok(())
}

fn apply_bits(start: &Bson, ops: &[(BitOp, Bson)]) -> Bson {
    fn combine(op: BitOp, a: i64, b: i64) -> i64 {
        match op {
            BitOp::And => a & b,
            BitOp::Or => a | b,
            BitOp::Xor => a ^ b,
        }
    }
    let mut current = start.clone();
    for (op, operand) in ops {
        current = match (&current, operand) {
            (Bson::Int32(a), Bson::Int32(b)) => {
                // Bitwise results of two int32 values always fit in an int32.
                Bson::Int32(combine(*op, i64::from(*a), i64::from(*b)) as i32)
            }
            (Bson::Int32(a), Bson::Int64(b)) => Bson::Int64(combine(*op, i64::from(*a), *b)),
            (Bson::Int64(a), Bson::Int32(b)) => Bson::Int64(combine(*op, *a, i64::from(*b))),
            (Bson::Int64(a), Bson::Int64(b)) => Bson::Int64(combine(*op, *a, *b)),
            _ => current,
        };
    }
    current
}

/// Whether two values are the same bytes: same types, same field order, same bits. A `$set` to an
/// identical value is not a modification, but `1` to `1.0` is.
pub(super) fn identical(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Double(x), Bson::Double(y)) => x.to_bits() == y.to_bits(),
        (Bson::Document(x), Bson::Document(y)) => identical_documents(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| identical(p, q))
        }
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => {
            x.code == y.code && identical_documents(&x.scope, &y.scope)
        }
        _ => a == b,
    }
}

pub(super) fn identical_documents(a: &Document, b: &Document) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && identical(va, vb))
}
