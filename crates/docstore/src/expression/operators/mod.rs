//! The expression operators that are plain functions of their evaluated arguments: arithmetic,
//! comparison, strings, arrays, sets and type conversion, with MongoDB 7.0's null handling and
//! error codes.

use super::dates;
use crate::error::{Error, ErrorCode, Result};
use crate::printing::{fmt_double, fmt_value, nullish, type_of};
use crate::value::{self, compare, is_truthy, values_equal, Arith, Number, Overflow};
use bson::{oid::ObjectId, Bson, Document};
use std::cmp::Ordering;

mod arithmetic;
mod arrays;
mod comparison;
mod sets;
mod strings;
#[cfg(test)]
mod tests;
mod types;

pub(crate) use arithmetic::*;
pub(crate) use arrays::*;
use comparison::*;
use sets::*;
pub(crate) use strings::*;
pub(crate) use types::*;

pub(crate) type OpFn = fn(&[Option<Bson>]) -> Result<Option<Bson>>;

/// How many arguments an operator accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arity {
    Exact(usize),
    AtLeast(usize),
    Range(usize, usize),
    Any,
}

/// The function and arity of a function-like operator.
pub(crate) fn lookup(name: &str) -> Option<(&'static str, OpFn, Arity)> {
    use Arity::*;
    let (n, f, a): (&'static str, OpFn, Arity) = match name {
        "$add" => ("$add", add, Any),
        "$subtract" => ("$subtract", subtract, Exact(2)),
        "$multiply" => ("$multiply", multiply, Any),
        "$divide" => ("$divide", divide, Exact(2)),
        "$mod" => ("$mod", modulo, Exact(2)),
        "$abs" => ("$abs", abs, Exact(1)),
        "$floor" => ("$floor", floor, Exact(1)),
        "$ceil" => ("$ceil", ceil, Exact(1)),
        "$round" => ("$round", round, Range(1, 2)),
        "$trunc" => ("$trunc", trunc, Range(1, 2)),
        "$sqrt" => ("$sqrt", sqrt, Exact(1)),
        "$pow" => ("$pow", pow, Exact(2)),
        "$exp" => ("$exp", exp, Exact(1)),
        "$ln" => ("$ln", ln, Exact(1)),
        "$log10" => ("$log10", log10, Exact(1)),
        "$sum" => ("$sum", sum, Any),
        "$avg" => ("$avg", avg, Any),
        "$min" => ("$min", min, Any),
        "$max" => ("$max", max, Any),
        "$eq" => ("$eq", eq, Exact(2)),
        "$ne" => ("$ne", ne, Exact(2)),
        "$gt" => ("$gt", gt, Exact(2)),
        "$gte" => ("$gte", gte, Exact(2)),
        "$lt" => ("$lt", lt, Exact(2)),
        "$lte" => ("$lte", lte, Exact(2)),
        "$cmp" => ("$cmp", cmp, Exact(2)),
        "$not" => ("$not", not, Exact(1)),
        "$concat" => ("$concat", concat, Any),
        "$toLower" => ("$toLower", to_lower, Exact(1)),
        "$toUpper" => ("$toUpper", to_upper, Exact(1)),
        "$substrCP" => ("$substrCP", substr_cp, Exact(3)),
        "$substrBytes" => ("$substrBytes", substr_bytes, Exact(3)),
        "$substr" => ("$substr", substr_bytes, Exact(3)),
        "$strLenCP" => ("$strLenCP", str_len_cp, Exact(1)),
        "$strLenBytes" => ("$strLenBytes", str_len_bytes, Exact(1)),
        "$split" => ("$split", split, Exact(2)),
        "$strcasecmp" => ("$strcasecmp", strcasecmp, Exact(2)),
        "$indexOfCP" => ("$indexOfCP", index_of_cp, Range(2, 4)),
        "$size" => ("$size", size, Exact(1)),
        "$arrayElemAt" => ("$arrayElemAt", array_elem_at, Exact(2)),
        "$first" => ("$first", first, Exact(1)),
        "$last" => ("$last", last, Exact(1)),
        "$in" => ("$in", in_array, Exact(2)),
        "$slice" => ("$slice", slice, Range(2, 3)),
        "$concatArrays" => ("$concatArrays", concat_arrays, Any),
        "$isArray" => ("$isArray", is_array, Exact(1)),
        "$reverseArray" => ("$reverseArray", reverse_array, Exact(1)),
        "$indexOfArray" => ("$indexOfArray", index_of_array, Range(2, 4)),
        "$range" => ("$range", range, Range(2, 3)),
        "$arrayToObject" => ("$arrayToObject", array_to_object, Exact(1)),
        "$objectToArray" => ("$objectToArray", object_to_array, Exact(1)),
        "$mergeObjects" => ("$mergeObjects", merge_objects, Any),
        "$setUnion" => ("$setUnion", set_union, Any),
        "$setIntersection" => ("$setIntersection", set_intersection, Any),
        "$setDifference" => ("$setDifference", set_difference, Exact(2)),
        "$setEquals" => ("$setEquals", set_equals, AtLeast(2)),
        "$setIsSubset" => ("$setIsSubset", set_is_subset, Exact(2)),
        "$anyElementTrue" => ("$anyElementTrue", any_element_true, Exact(1)),
        "$allElementsTrue" => ("$allElementsTrue", all_elements_true, Exact(1)),
        "$type" => ("$type", type_op, Exact(1)),
        "$isNumber" => ("$isNumber", is_number, Exact(1)),
        "$toString" => ("$toString", |a| convert_to(a, "string"), Exact(1)),
        "$toInt" => ("$toInt", |a| convert_to(a, "int"), Exact(1)),
        "$toLong" => ("$toLong", |a| convert_to(a, "long"), Exact(1)),
        "$toDouble" => ("$toDouble", |a| convert_to(a, "double"), Exact(1)),
        "$toDecimal" => ("$toDecimal", |a| convert_to(a, "decimal"), Exact(1)),
        "$toDate" => ("$toDate", |a| convert_to(a, "date"), Exact(1)),
        "$toBool" => ("$toBool", |a| convert_to(a, "bool"), Exact(1)),
        "$toObjectId" => ("$toObjectId", |a| convert_to(a, "objectId"), Exact(1)),
        _ => return None,
    };
    Some((n, f, a))
}

fn some(v: Bson) -> Result<Option<Bson>> {
    Ok(Some(v))
}

fn null() -> Result<Option<Bson>> {
    Ok(Some(Bson::Null))
}

/// Missing compares like `undefined` (below `null`) in aggregation comparisons.
fn comparable(v: &Option<Bson>) -> &Bson {
    v.as_ref().unwrap_or(&Bson::Undefined)
}

fn arith(r: Arith) -> Bson {
    match r {
        Arith::Value(v) => v,
        // Both operands are checked numeric before the call and overflow widens to double.
        Arith::NotNumeric | Arith::Overflowed => Bson::Null,
    }
}

fn is_decimal(v: &Bson) -> bool {
    matches!(v, Bson::Decimal128(_))
}
