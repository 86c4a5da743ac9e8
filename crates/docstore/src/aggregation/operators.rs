//! The expression operators that are plain functions of their evaluated arguments: arithmetic,
//! comparison, strings, arrays, sets and type conversion, with MongoDB 7.0's null handling and
//! error codes.

use super::dates;
use super::expression::{fmt_double, fmt_value, nullish, type_of};
use crate::error::{Error, ErrorCode, Result};
use crate::value::{self, compare, is_truthy, values_equal, Arith, Number, Overflow};
use bson::{oid::ObjectId, Bson, Document};
use std::cmp::Ordering;

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

// ---------------------------------------------------------------------------------------------
// Arithmetic

fn add(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut total = Bson::Int32(0);
    let mut date: Option<i64> = None;
    for a in args {
        match a {
            v if nullish(v) => return null(),
            Some(Bson::DateTime(d)) => {
                if date.is_some() {
                    return Err(Error::location(
                        16612,
                        "only one date allowed in an $add expression",
                    ));
                }
                date = Some(d.timestamp_millis());
            }
            Some(v) if value::is_number(v) => {
                total = arith(value::add(&total, v, Overflow::WidenToDouble));
            }
            other => {
                return Err(Error::type_mismatch(format!(
                    "$add only supports numeric or date types, not {}",
                    type_of(other)
                )))
            }
        }
    }
    match date {
        Some(ms) => {
            let offset = Number::from_bson(&total).map(Number::as_f64).unwrap_or(0.0);
            let result = ms as f64 + offset.round();
            if !result.is_finite() || result.abs() >= 9.2e18 {
                return Err(Error::new(ErrorCode::Overflow, "date overflow"));
            }
            let exact = match Number::from_bson(&total).and_then(Number::as_i64_exact) {
                Some(i) => ms.checked_add(i),
                None => Some(result as i64),
            };
            match exact {
                Some(v) => some(Bson::DateTime(bson::DateTime::from_millis(v))),
                None => Err(Error::new(ErrorCode::Overflow, "date overflow")),
            }
        }
        None => some(total),
    }
}

fn subtract(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (l, r) = (&args[0], &args[1]);
    match (l, r) {
        (Some(a), Some(b)) if value::is_number(a) && value::is_number(b) => {
            some(arith(value::subtract(a, b, Overflow::WidenToDouble)))
        }
        _ if nullish(l) || nullish(r) => null(),
        (Some(Bson::DateTime(a)), Some(Bson::DateTime(b))) => some(Bson::Int64(
            a.timestamp_millis().wrapping_sub(b.timestamp_millis()),
        )),
        (Some(Bson::DateTime(a)), Some(b)) if value::is_number(b) => {
            let n = Number::from_bson(b).map(Number::as_f64).unwrap_or(0.0);
            let ms = a.timestamp_millis() as f64 - n.round();
            if !ms.is_finite() || ms.abs() >= 9.2e18 {
                return Err(Error::new(ErrorCode::Overflow, "date overflow"));
            }
            some(Bson::DateTime(bson::DateTime::from_millis(ms as i64)))
        }
        (Some(Bson::DateTime(_)), b) => Err(Error::type_mismatch(format!(
            "can't $subtract {} from Date",
            type_of(b)
        ))),
        _ => Err(Error::type_mismatch(format!(
            "can't $subtract {} from {}",
            type_of(r),
            type_of(l)
        ))),
    }
}

fn multiply(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut product = Bson::Int32(1);
    for a in args {
        match a {
            v if nullish(v) => return null(),
            Some(v) if value::is_number(v) => {
                product = arith(value::multiply(&product, v, Overflow::WidenToDouble));
            }
            other => {
                return Err(Error::type_mismatch(format!(
                    "$multiply only supports numeric types, not {}",
                    type_of(other)
                )))
            }
        }
    }
    some(product)
}

fn divide(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (l, r) = (&args[0], &args[1]);
    match (l, r) {
        (Some(a), Some(b)) if value::is_number(a) && value::is_number(b) => {
            let (x, y) = (num(a), num(b));
            if y == 0.0 {
                return Err(Error::bad_value("can't $divide by zero"));
            }
            if is_decimal(a) || is_decimal(b) {
                some(Bson::Decimal128(value::f64_to_decimal(x / y)))
            } else {
                some(Bson::Double(x / y))
            }
        }
        _ if nullish(l) || nullish(r) => null(),
        _ => Err(Error::type_mismatch(format!(
            "$divide only supports numeric types, not {} and {}",
            type_of(l),
            type_of(r)
        ))),
    }
}

fn num(v: &Bson) -> f64 {
    value::to_f64(v).unwrap_or(f64::NAN)
}

fn modulo(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (l, r) = (&args[0], &args[1]);
    match (l, r) {
        (Some(a), Some(b)) if value::is_number(a) && value::is_number(b) => {
            if num(b) == 0.0 {
                return Err(Error::location(16610, "can't $mod by zero"));
            }
            match (a, b) {
                (Bson::Decimal128(_), _) | (_, Bson::Decimal128(_)) => {
                    some(Bson::Decimal128(value::f64_to_decimal(num(a) % num(b))))
                }
                (Bson::Double(_), _) | (_, Bson::Double(_)) => some(Bson::Double(num(a) % num(b))),
                (Bson::Int32(x), Bson::Int32(y)) => {
                    some(Bson::Int32(x.checked_rem(*y).unwrap_or(0)))
                }
                _ => {
                    let x = Number::from_bson(a)
                        .and_then(Number::as_i64_exact)
                        .unwrap_or(0);
                    let y = Number::from_bson(b)
                        .and_then(Number::as_i64_exact)
                        .unwrap_or(1);
                    some(Bson::Int64(x.checked_rem(y).unwrap_or(0)))
                }
            }
        }
        _ if nullish(l) || nullish(r) => null(),
        _ => Err(Error::location(
            16611,
            format!(
                "$mod only supports numeric types, not {} and {}",
                type_of(l),
                type_of(r)
            ),
        )),
    }
}

/// The single numeric argument of `$abs`, `$floor` and friends; `None` for a nullish argument.
fn numeric_arg<'a>(name: &str, v: &'a Option<Bson>) -> Result<Option<&'a Bson>> {
    match v {
        v if nullish(v) => Ok(None),
        Some(b) if value::is_number(b) => Ok(Some(b)),
        other => Err(Error::location(
            28765,
            format!("{name} only supports numeric types, not {}", type_of(other)),
        )),
    }
}

fn abs(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let Some(v) = numeric_arg("$abs", &args[0])? else {
        return null();
    };
    match v {
        Bson::Int32(i) => some(match i.checked_abs() {
            Some(a) => Bson::Int32(a),
            None => Bson::Int64((*i as i64).abs()),
        }),
        Bson::Int64(i) => match i.checked_abs() {
            Some(a) => some(Bson::Int64(a)),
            None => Err(Error::location(28680, "can't take $abs of long long min")),
        },
        Bson::Decimal128(_) => some(Bson::Decimal128(value::f64_to_decimal(num(v).abs()))),
        _ => some(Bson::Double(num(v).abs())),
    }
}

fn float_op(name: &str, args: &[Option<Bson>], f: fn(f64) -> f64) -> Result<Option<Bson>> {
    let Some(v) = numeric_arg(name, &args[0])? else {
        return null();
    };
    match v {
        Bson::Int32(_) | Bson::Int64(_) => some(v.clone()),
        Bson::Decimal128(_) => some(Bson::Decimal128(value::f64_to_decimal(f(num(v))))),
        _ => some(Bson::Double(f(num(v)))),
    }
}

fn floor(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    float_op("$floor", args, f64::floor)
}

fn ceil(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    float_op("$ceil", args, f64::ceil)
}

fn math_op(
    name: &str,
    args: &[Option<Bson>],
    check: fn(f64) -> Option<&'static str>,
    f: fn(f64) -> f64,
) -> Result<Option<Bson>> {
    let Some(v) = numeric_arg(name, &args[0])? else {
        return null();
    };
    let x = num(v);
    if let Some(msg) = check(x) {
        return Err(Error::location(28766, format!("{name}'s argument {msg}")));
    }
    if is_decimal(v) {
        some(Bson::Decimal128(value::f64_to_decimal(f(x))))
    } else {
        some(Bson::Double(f(x)))
    }
}

fn sqrt(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    math_op(
        "$sqrt",
        args,
        |x| (x < 0.0).then_some("must be greater than or equal to 0"),
        f64::sqrt,
    )
}

fn exp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    math_op("$exp", args, |_| None, f64::exp)
}

fn ln(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    math_op(
        "$ln",
        args,
        |x| (x <= 0.0).then_some("must be a positive number"),
        f64::ln,
    )
}

fn log10(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    math_op(
        "$log10",
        args,
        |x| (x <= 0.0).then_some("must be a positive number"),
        f64::log10,
    )
}

fn pow(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (b, e) = (&args[0], &args[1]);
    if nullish(b) || nullish(e) {
        return null();
    }
    let (Some(base), Some(exp)) = (b, e) else {
        return null();
    };
    if !value::is_number(base) {
        return Err(Error::location(
            28762,
            format!("$pow's base must be numeric, not {}", type_of(b)),
        ));
    }
    if !value::is_number(exp) {
        return Err(Error::location(
            28763,
            format!("$pow's exponent must be numeric, not {}", type_of(e)),
        ));
    }
    let (x, y) = (num(base), num(exp));
    if x == 0.0 && y < 0.0 {
        return Err(Error::location(
            28764,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    if is_decimal(base) || is_decimal(exp) {
        return some(Bson::Decimal128(value::f64_to_decimal(x.powf(y))));
    }
    // Integral base and non-negative integral exponent stay integral when the result fits.
    if let (Some(bi), Some(ei)) = (
        Number::from_bson(base).filter(|n| !matches!(n, Number::Double(_))),
        Number::from_bson(exp).filter(|n| !matches!(n, Number::Double(_))),
    ) {
        let (bi, ei) = (
            bi.as_i64_exact().unwrap_or(0),
            ei.as_i64_exact().unwrap_or(0),
        );
        if ei >= 0 {
            let both_int = matches!(base, Bson::Int32(_)) && matches!(exp, Bson::Int32(_));
            if let Some(r) = u32::try_from(ei).ok().and_then(|e| bi.checked_pow(e)) {
                if both_int && i32::try_from(r).is_ok() {
                    return some(Bson::Int32(r as i32));
                }
                return some(Bson::Int64(r));
            }
        }
    }
    some(Bson::Double(x.powf(y)))
}

fn round(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    round_like("$round", args, true)
}

fn trunc(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    round_like("$trunc", args, false)
}

/// `$round` (half to even, on the value's decimal digits) and `$trunc`, with an optional
/// place in [-20, 100].
fn round_like(name: &str, args: &[Option<Bson>], half_even: bool) -> Result<Option<Bson>> {
    let place = match args.get(1) {
        None => 0,
        Some(p) if nullish(p) => return null(),
        Some(Some(p)) => {
            let n = Number::from_bson(p)
                .and_then(Number::as_i64_exact)
                .ok_or_else(|| {
                    Error::location(
                        51082,
                        format!(
                            "precision argument to  {name} must be a integral value, got: {}",
                            fmt_value(p)
                        ),
                    )
                })?;
            if !(-20..=100).contains(&n) {
                return Err(Error::location(
                    51083,
                    format!(
                        "cannot apply {name} with precision value {n} value must be in [-20, 100]"
                    ),
                ));
            }
            n as i32
        }
        Some(None) => return null(),
    };
    let v = match &args[0] {
        v if nullish(v) => return null(),
        Some(v) if value::is_number(v) => v,
        other => {
            return Err(Error::location(
                51081,
                format!("{name} only supports numeric types, not {}", type_of(other)),
            ))
        }
    };
    match v {
        Bson::Int32(_) | Bson::Int64(_) if place >= 0 => some(v.clone()),
        Bson::Int32(i) => some(
            i32::try_from(round_integer(*i as i64, place, half_even)).map_or_else(
                |_| Bson::Int64(round_integer(*i as i64, place, half_even)),
                Bson::Int32,
            ),
        ),
        Bson::Int64(i) => some(Bson::Int64(round_integer(*i, place, half_even))),
        Bson::Decimal128(_) => some(Bson::Decimal128(value::f64_to_decimal(
            round_decimal_digits(num(v), place, half_even),
        ))),
        _ => some(Bson::Double(round_decimal_digits(num(v), place, half_even))),
    }
}

fn round_integer(i: i64, place: i32, half_even: bool) -> i64 {
    let Some(factor) = 10i64.checked_pow(place.unsigned_abs()) else {
        return 0;
    };
    let q = i / factor;
    let r = i % factor;
    if !half_even {
        return q * factor;
    }
    let twice = (r.abs() as i128) * 2;
    let up = match twice.cmp(&(factor as i128)) {
        Ordering::Greater => true,
        Ordering::Less => false,
        Ordering::Equal => q % 2 != 0,
    };
    let q = if up { q + i.signum() } else { q };
    q.saturating_mul(factor)
}

/// Round through the value's 15 significant decimal digits, as MongoDB does by way of
/// Decimal128, so that 2.675 rounds to 2.68 rather than the binary 2.67.
fn round_decimal_digits(x: f64, place: i32, half_even: bool) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let text = format!("{:.14e}", x.abs());
    let Some((mantissa, exponent)) = text.split_once('e') else {
        return x;
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect();
    // Number of digits kept: those before the decimal point plus `place` after it.
    let keep = exponent + 1 + place;
    if keep >= digits.len() as i32 {
        return x;
    }
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    if keep < 0 {
        return 0.0 * sign;
    }
    let keep = keep as usize;
    let mut kept: Vec<u8> = digits[..keep].to_vec();
    if half_even {
        let first_dropped = digits[keep];
        let rest_nonzero = digits[keep + 1..].iter().any(|d| *d != 0);
        let last_kept_odd = kept.last().is_some_and(|d| d % 2 == 1);
        let up = first_dropped > 5 || (first_dropped == 5 && (rest_nonzero || last_kept_odd));
        if up {
            // Propagate the carry; a carry out of the first digit adds a leading 1.
            let mut i = kept.len();
            loop {
                if i == 0 {
                    kept.insert(0, 1);
                    return sign * assemble(&kept, exponent + 1, place);
                }
                i -= 1;
                if kept[i] == 9 {
                    kept[i] = 0;
                } else {
                    kept[i] += 1;
                    break;
                }
            }
        }
    }
    sign * assemble(&kept, exponent, place)
}

fn assemble(digits: &[u8], exponent: i32, place: i32) -> f64 {
    if digits.is_empty() {
        return 0.0;
    }
    let mantissa: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    // digits represent d0.d1d2... × 10^exponent, kept up to 10^-place.
    let scale = exponent - (digits.len() as i32 - 1);
    let _ = place;
    format!("{mantissa}e{scale}").parse().unwrap_or(0.0)
}

/// The operands of `$sum`/`$avg`/`$min`/`$max` as expressions: the elements of a single array
/// argument, or the arguments themselves.
fn operands(args: &[Option<Bson>]) -> Vec<Bson> {
    match args {
        [Some(Bson::Array(items))] => items.clone(),
        _ => args.iter().flatten().cloned().collect(),
    }
}

/// Sum of the numeric values, ignoring everything else (`$sum`'s rule).
pub(crate) fn sum_numbers<'a>(values: impl Iterator<Item = &'a Bson>) -> Bson {
    let mut total = Bson::Int32(0);
    for v in values {
        if value::is_number(v) {
            total = arith(value::add(&total, v, Overflow::WidenToDouble));
        }
    }
    total
}

/// Average of the numeric values, `null` when there are none.
pub(crate) fn average<'a>(values: impl Iterator<Item = &'a Bson>) -> Bson {
    let mut count = 0usize;
    let mut total = Bson::Int32(0);
    for v in values {
        if value::is_number(v) {
            count += 1;
            total = arith(value::add(&total, v, Overflow::WidenToDouble));
        }
    }
    if count == 0 {
        return Bson::Null;
    }
    let avg = num(&total) / count as f64;
    if is_decimal(&total) {
        Bson::Decimal128(value::f64_to_decimal(avg))
    } else {
        Bson::Double(avg)
    }
}

fn sum(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(sum_numbers(operands(args).iter()))
}

fn avg(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(average(operands(args).iter()))
}

fn extreme(args: &[Option<Bson>], want: Ordering) -> Result<Option<Bson>> {
    let mut best: Option<Bson> = None;
    for v in operands(args) {
        if matches!(v, Bson::Null | Bson::Undefined) {
            continue;
        }
        if best.as_ref().is_none_or(|b| compare(&v, b) == want) {
            best = Some(v);
        }
    }
    some(best.unwrap_or(Bson::Null))
}

fn min(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    extreme(args, Ordering::Less)
}

fn max(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    extreme(args, Ordering::Greater)
}

// ---------------------------------------------------------------------------------------------
// Comparison and boolean

fn ordering(args: &[Option<Bson>]) -> Ordering {
    compare(comparable(&args[0]), comparable(&args[1]))
}

fn eq(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) == Ordering::Equal))
}

fn ne(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) != Ordering::Equal))
}

fn gt(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) == Ordering::Greater))
}

fn gte(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) != Ordering::Less))
}

fn lt(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) == Ordering::Less))
}

fn lte(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(ordering(args) != Ordering::Greater))
}

fn cmp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Int32(match ordering(args) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }))
}

fn not(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(!args[0].as_ref().is_some_and(is_truthy)))
}

// ---------------------------------------------------------------------------------------------
// Strings

fn concat(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut out = String::new();
    for a in args {
        match a {
            v if nullish(v) => return null(),
            Some(Bson::String(s)) => out.push_str(s),
            other => {
                return Err(Error::location(
                    16702,
                    format!("$concat only supports strings, not {}", type_of(other)),
                ))
            }
        }
    }
    some(Bson::String(out))
}

/// A value as a string the way `$toLower`, `$substr` and friends coerce it (`null` is "").
pub(crate) fn coerce_to_string(v: &Option<Bson>) -> Result<String> {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(String::new()),
        Some(Bson::String(s)) | Some(Bson::Symbol(s)) | Some(Bson::JavaScriptCode(s)) => {
            Ok(s.clone())
        }
        Some(Bson::Int32(i)) => Ok(i.to_string()),
        Some(Bson::Int64(i)) => Ok(i.to_string()),
        Some(Bson::Double(d)) => Ok(fmt_double(*d)),
        Some(Bson::Decimal128(d)) => Ok(d.to_string()),
        Some(Bson::DateTime(d)) => dates::format_default(d.timestamp_millis()),
        Some(Bson::Timestamp(t)) => Ok(format!("Timestamp({}, {})", t.time, t.increment)),
        other => Err(Error::location(
            16007,
            format!("can't convert from BSON type {} to String", type_of(other)),
        )),
    }
}

fn to_lower(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::String(
        coerce_to_string(&args[0])?.to_ascii_lowercase(),
    ))
}

fn to_upper(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::String(
        coerce_to_string(&args[0])?.to_ascii_uppercase(),
    ))
}

fn int32_arg(v: &Option<Bson>, name: &str, what: &str, codes: (i32, i32)) -> Result<i64> {
    let Some(b) = v.as_ref().filter(|b| value::is_number(b)) else {
        return Err(Error::location(
            codes.0,
            format!(
                "{name}: {what} must be a numeric type (is BSON type {})",
                type_of(v)
            ),
        ));
    };
    Number::from_bson(b)
        .and_then(Number::as_i64_exact)
        .filter(|n| i32::try_from(*n).is_ok())
        .ok_or_else(|| {
            Error::location(
                codes.1,
                format!(
                    "{name}: {what} cannot be represented as a 32-bit integral value: {}",
                    fmt_value(b)
                ),
            )
        })
}

fn substr_cp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let s = coerce_to_string(&args[0])?;
    let start = int32_arg(&args[1], "$substrCP", "starting index", (34450, 34451))?;
    let len = int32_arg(&args[2], "$substrCP", "length", (34452, 34453))?;
    if start < 0 {
        return Err(Error::location(
            34454,
            "$substrCP: the starting index must be nonnegative integer.",
        ));
    }
    if len < 0 {
        return Err(Error::location(
            34455,
            "$substrCP: length must be a nonnegative integer.",
        ));
    }
    some(Bson::String(
        s.chars().skip(start as usize).take(len as usize).collect(),
    ))
}

fn substr_bytes(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let s = coerce_to_string(&args[0])?;
    let to_i64 = |v: &Option<Bson>, code: i32, what: &str| -> Result<i64> {
        match v.as_ref().and_then(Number::from_bson) {
            Some(n) => Ok(n.as_f64() as i64),
            None => Err(Error::location(
                code,
                format!(
                    "$substrBytes: {what} must be a numeric type (is BSON type {})",
                    type_of(v)
                ),
            )),
        }
    };
    let start = to_i64(&args[1], 16034, "starting index")?;
    let len = to_i64(&args[2], 16035, "length")?;
    let bytes = s.as_bytes();
    if start < 0 || start as usize >= bytes.len() {
        return some(Bson::String(String::new()));
    }
    let start = start as usize;
    let end = if len < 0 {
        bytes.len()
    } else {
        start.saturating_add(len as usize).min(bytes.len())
    };
    if !s.is_char_boundary(start) {
        return Err(Error::location(
            28656,
            "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
        ));
    }
    if !s.is_char_boundary(end) {
        return Err(Error::location(
            28657,
            "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.",
        ));
    }
    some(Bson::String(s[start..end].to_string()))
}

fn str_len_cp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    match &args[0] {
        Some(Bson::String(s)) => some(Bson::Int32(s.chars().count() as i32)),
        other => Err(Error::location(
            34471,
            format!(
                "$strLenCP requires a string argument, found: {}",
                type_of(other)
            ),
        )),
    }
}

fn str_len_bytes(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    match &args[0] {
        Some(Bson::String(s)) => some(Bson::Int32(s.len() as i32)),
        other => Err(Error::location(
            34473,
            format!(
                "$strLenBytes requires a string argument, found: {}",
                type_of(other)
            ),
        )),
    }
}

fn split(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (input, sep) = (&args[0], &args[1]);
    if nullish(input) || nullish(sep) {
        return null();
    }
    let Some(Bson::String(s)) = input else {
        return Err(Error::location(
            40085,
            format!(
                "$split requires an expression that evaluates to a string as a first argument, \
                 found: {}",
                type_of(input)
            ),
        ));
    };
    let Some(Bson::String(d)) = sep else {
        return Err(Error::location(
            40086,
            format!(
                "$split requires an expression that evaluates to a string as a second \
                 argument, found: {}",
                type_of(sep)
            ),
        ));
    };
    if d.is_empty() {
        return Err(Error::location(
            40087,
            "$split requires a non-empty separator",
        ));
    }
    some(Bson::Array(
        s.split(d.as_str())
            .map(|p| Bson::String(p.to_string()))
            .collect(),
    ))
}

fn strcasecmp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let a = coerce_to_string(&args[0])?.to_ascii_lowercase();
    let b = coerce_to_string(&args[1])?.to_ascii_lowercase();
    some(Bson::Int32(match a.cmp(&b) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }))
}

fn index_of_cp(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let input = &args[0];
    if nullish(input) {
        return null();
    }
    let Some(Bson::String(s)) = input else {
        return Err(Error::location(
            40093,
            format!(
                "$indexOfCP requires a string as the first argument, found: {}",
                type_of(input)
            ),
        ));
    };
    let Some(Bson::String(needle)) = &args[1] else {
        return Err(Error::location(
            40094,
            format!(
                "$indexOfCP requires a string as the second argument, found: {}",
                type_of(&args[1])
            ),
        ));
    };
    let chars: Vec<char> = s.chars().collect();
    let needle: Vec<char> = needle.chars().collect();
    let bound = |i: usize, code: i32| -> Result<Option<usize>> {
        match args.get(i) {
            None => Ok(None),
            Some(v) => {
                let n = Number::from_bson(comparable(v))
                    .and_then(Number::as_i64_exact)
                    .ok_or_else(|| {
                        Error::location(
                            code,
                            format!(
                                "$indexOfCP requires an integral index, found {}",
                                type_of(v)
                            ),
                        )
                    })?;
                if n < 0 {
                    return Err(Error::location(
                        code + 1,
                        format!("$indexOfCP requires a nonnegative index, found: {n}"),
                    ));
                }
                Ok(Some(n as usize))
            }
        }
    };
    let start = bound(2, 40096)?.unwrap_or(0);
    let end = bound(3, 40096)?.unwrap_or(chars.len()).min(chars.len());
    let mut i = start;
    while i + needle.len() <= end {
        if chars[i..i + needle.len()] == needle[..] {
            return some(Bson::Int32(i as i32));
        }
        i += 1;
    }
    some(Bson::Int32(-1))
}

pub(crate) fn trim(
    name: &str,
    input: Option<Bson>,
    chars: Option<Option<Bson>>,
) -> Result<Option<Bson>> {
    if nullish(&input) {
        return null();
    }
    let Some(Bson::String(s)) = &input else {
        let shown = input.as_ref().map(fmt_value).unwrap_or_default();
        return Err(Error::location(
            50699,
            format!(
                "{name} requires its input to be a string, got {shown} (of type {}) instead.",
                type_of(&input)
            ),
        ));
    };
    let set: Vec<char> = match chars {
        None => vec![
            '\0', ' ', '\t', '\n', '\u{0B}', '\u{0C}', '\r', '\u{A0}', '\u{1680}', '\u{2000}',
            '\u{2001}', '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}', '\u{2006}', '\u{2007}',
            '\u{2008}', '\u{2009}', '\u{200A}', '\u{2028}', '\u{2029}', '\u{202F}', '\u{205F}',
            '\u{3000}',
        ],
        Some(c) if nullish(&c) => return null(),
        Some(Some(Bson::String(c))) => c.chars().collect(),
        Some(other) => {
            let shown = other.as_ref().map(fmt_value).unwrap_or_default();
            return Err(Error::location(
                50700,
                format!(
                    "{name} requires 'chars' to be a string, got {shown} (of type {}) instead.",
                    type_of(&other)
                ),
            ));
        }
    };
    let trimmed = match name {
        "$ltrim" => s.trim_start_matches(|c| set.contains(&c)),
        "$rtrim" => s.trim_end_matches(|c| set.contains(&c)),
        _ => s.trim_matches(|c| set.contains(&c)),
    };
    some(Bson::String(trimmed.to_string()))
}

/// Build a `regex` for a MongoDB pattern and its options (`i m s x`).
pub(crate) fn build_regex(pattern: &str, options: &str, op: &str) -> Result<regex::Regex> {
    let full = crate::query::matcher::regex_source(pattern, options)
        .map_err(|c| Error::location(51108, format!("{op}: invalid flag in regex options: {c}")))?;
    regex::Regex::new(&full)
        .map_err(|e| Error::location(51111, format!("Invalid Regex in {op}: {e}")))
}

pub(crate) fn regex_match(
    input: Option<Bson>,
    regex: Option<Bson>,
    options: Option<Bson>,
) -> Result<Option<Bson>> {
    let options = match &options {
        None | Some(Bson::Null) | Some(Bson::Undefined) => None,
        Some(Bson::String(o)) => Some(o.clone()),
        Some(other) => {
            return Err(Error::location(
                51106,
                format!(
                    "$regexMatch needs 'options' to be of type string, found {}",
                    value::type_name(other)
                ),
            ))
        }
    };
    let (pattern, flags) = match &regex {
        r if nullish(r) => return some(Bson::Boolean(false)),
        Some(Bson::String(p)) => (p.clone(), options.unwrap_or_default()),
        Some(Bson::RegularExpression(r)) => {
            if options.is_some() && !r.options.is_empty() {
                return Err(Error::location(
                    51075,
                    "$regexMatch: regex option(s) specified in both 'regex' and 'option' fields",
                ));
            }
            (
                r.pattern.clone(),
                options.unwrap_or_else(|| r.options.clone()),
            )
        }
        _ => {
            return Err(Error::location(
                51105,
                "$regexMatch needs 'regex' to be of type string or regex",
            ))
        }
    };
    let text = match &input {
        i if nullish(i) => return some(Bson::Boolean(false)),
        Some(Bson::String(s)) => s,
        _ => {
            return Err(Error::location(
                51104,
                "$regexMatch needs 'input' to be of type string",
            ))
        }
    };
    let re = build_regex(&pattern, &flags, "$regexMatch")?;
    some(Bson::Boolean(re.is_match(text)))
}

pub(crate) fn replace(
    all: bool,
    input: Option<Bson>,
    find: Option<Bson>,
    replacement: Option<Bson>,
) -> Result<Option<Bson>> {
    let name = if all { "$replaceAll" } else { "$replaceOne" };
    let check = |v: &Option<Bson>, what: &str, code: i32| -> Result<()> {
        match v {
            v if nullish(v) => Ok(()),
            Some(Bson::String(_)) => Ok(()),
            Some(other) => Err(Error::location(
                code,
                format!(
                    "{name} requires that '{what}' be a string, found: {}",
                    fmt_value(other)
                ),
            )),
            None => Ok(()),
        }
    };
    check(&input, "input", 51746)?;
    check(&find, "find", 51745)?;
    check(&replacement, "replacement", 51744)?;
    match (input, find, replacement) {
        (Some(Bson::String(s)), Some(Bson::String(f)), Some(Bson::String(r))) => {
            some(Bson::String(if all {
                s.replace(&f, &r)
            } else {
                s.replacen(&f, &r, 1)
            }))
        }
        _ => null(),
    }
}

// ---------------------------------------------------------------------------------------------
// Arrays

fn size(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    match &args[0] {
        Some(Bson::Array(items)) => some(Bson::Int32(items.len() as i32)),
        other => Err(Error::location(
            17124,
            format!(
                "The argument to $size must be an array. Type of argument was: {}",
                type_of(other)
            ),
        )),
    }
}

fn array_elem_at(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (arr, idx) = (&args[0], &args[1]);
    if nullish(arr) || nullish(idx) {
        return null();
    }
    let Some(Bson::Array(items)) = arr else {
        return Err(Error::location(
            28689,
            format!(
                "$arrayElemAt's first argument must be an array, but is {}",
                type_of(arr)
            ),
        ));
    };
    let Some(i) = idx.as_ref().filter(|v| value::is_number(v)) else {
        return Err(Error::location(
            28690,
            format!(
                "$arrayElemAt's second argument must be a numeric value, but is {}",
                type_of(idx)
            ),
        ));
    };
    let i = Number::from_bson(i)
        .and_then(Number::as_i64_exact)
        .filter(|n| i32::try_from(*n).is_ok())
        .ok_or_else(|| {
            Error::location(
                28691,
                format!(
                    "$arrayElemAt's second argument must be representable as a 32-bit integer: {}",
                    fmt_value(i)
                ),
            )
        })?;
    Ok(element_at(items, i))
}

fn element_at(items: &[Bson], i: i64) -> Option<Bson> {
    let len = items.len() as i64;
    let pos = if i < 0 { len + i } else { i };
    if pos < 0 || pos >= len {
        return None;
    }
    items.get(pos as usize).cloned()
}

fn first_or_last(args: &[Option<Bson>], name: &str, last: bool) -> Result<Option<Bson>> {
    match &args[0] {
        None => Ok(None),
        Some(Bson::Null) | Some(Bson::Undefined) => null(),
        Some(Bson::Array(items)) => Ok(element_at(items, if last { -1 } else { 0 })),
        other => Err(Error::location(
            28689,
            format!(
                "{name}'s argument must be an array, but is {}",
                type_of(other)
            ),
        )),
    }
}

fn first(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    first_or_last(args, "$first", false)
}

fn last(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    first_or_last(args, "$last", true)
}

fn in_array(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let Some(Bson::Array(items)) = &args[1] else {
        return Err(Error::location(
            40081,
            format!(
                "$in requires an array as a second argument, found: {}",
                type_of(&args[1])
            ),
        ));
    };
    let needle = comparable(&args[0]);
    some(Bson::Boolean(items.iter().any(|v| values_equal(v, needle))))
}

fn slice(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    if args.iter().any(nullish) {
        return null();
    }
    let Some(Bson::Array(items)) = &args[0] else {
        return Err(Error::location(
            28724,
            format!(
                "First argument to $slice must be an array, but is of type: {}",
                type_of(&args[0])
            ),
        ));
    };
    let int_arg = |i: usize, codes: (i32, i32), which: &str| -> Result<i64> {
        let v = &args[i];
        let Some(b) = v.as_ref().filter(|b| value::is_number(b)) else {
            return Err(Error::location(
                codes.0,
                format!(
                    "{which} argument to $slice must be a numeric value, but was of type: {}",
                    type_of(v)
                ),
            ));
        };
        Number::from_bson(b)
            .and_then(Number::as_i64_exact)
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| {
                Error::location(
                    codes.1,
                    format!(
                        "{which} argument to $slice can't be represented as a 32-bit integer: {}",
                        fmt_value(b)
                    ),
                )
            })
    };
    let len = items.len() as i64;
    let (start, count) = if args.len() == 2 {
        let n = int_arg(1, (28725, 28726), "Second")?;
        if n >= 0 {
            (0, n)
        } else {
            ((len + n).max(0), -n)
        }
    } else {
        let pos = int_arg(1, (28725, 28726), "Second")?;
        let n = int_arg(2, (28727, 28728), "Third")?;
        if n <= 0 {
            return Err(Error::location(
                28729,
                format!("Third argument to $slice must be positive: {n}"),
            ));
        }
        let start = if pos < 0 {
            (len + pos).max(0)
        } else {
            pos.min(len)
        };
        (start, n)
    };
    let start = start as usize;
    let end = start.saturating_add(count as usize).min(items.len());
    some(Bson::Array(items[start..end].to_vec()))
}

fn concat_arrays(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut out = Vec::new();
    for a in args {
        match a {
            v if nullish(v) => return null(),
            Some(Bson::Array(items)) => out.extend(items.iter().cloned()),
            other => {
                return Err(Error::location(
                    28664,
                    format!("$concatArrays only supports arrays, not {}", type_of(other)),
                ))
            }
        }
    }
    some(Bson::Array(out))
}

fn is_array(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(matches!(args[0], Some(Bson::Array(_)))))
}

fn reverse_array(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    match &args[0] {
        v if nullish(v) => null(),
        Some(Bson::Array(items)) => some(Bson::Array(items.iter().rev().cloned().collect())),
        other => Err(Error::location(
            34435,
            format!(
                "The argument to $reverseArray must be an array, but was of type: {}",
                type_of(other)
            ),
        )),
    }
}

fn index_of_array(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let items = match &args[0] {
        v if nullish(v) => return null(),
        Some(Bson::Array(items)) => items,
        other => {
            return Err(Error::location(
                40090,
                format!(
                    "$indexOfArray requires an array as a first argument, found: {}",
                    type_of(other)
                ),
            ))
        }
    };
    let index = |i: usize| -> Result<Option<usize>> {
        match args.get(i) {
            None => Ok(None),
            Some(v) => {
                let n = v
                    .as_ref()
                    .and_then(Number::from_bson)
                    .and_then(Number::as_i64_exact)
                    .ok_or_else(|| {
                        Error::location(
                            40096,
                            format!(
                                "$indexOfArray requires an integral starting index, found a \
                                 value of type: {}",
                                type_of(v)
                            ),
                        )
                    })?;
                if n < 0 {
                    return Err(Error::location(
                        40097,
                        format!("$indexOfArray requires a nonnegative starting index, found: {n}"),
                    ));
                }
                Ok(Some(n as usize))
            }
        }
    };
    let start = index(2)?.unwrap_or(0);
    let end = index(3)?.unwrap_or(items.len()).min(items.len());
    let needle = comparable(&args[1]);
    for (i, item) in items.iter().enumerate().take(end).skip(start) {
        if values_equal(item, needle) {
            return some(Bson::Int32(i as i32));
        }
    }
    some(Bson::Int32(-1))
}

fn range(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let int = |i: usize, what: &str, codes: (i32, i32)| -> Result<i64> {
        let v = &args[i];
        let Some(b) = v.as_ref().filter(|b| value::is_number(b)) else {
            return Err(Error::location(
                codes.0,
                format!(
                    "$range requires a numeric {what}, found value of type: {}",
                    type_of(v)
                ),
            ));
        };
        Number::from_bson(b)
            .and_then(Number::as_i64_exact)
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| {
                Error::location(
                    codes.1,
                    format!(
                        "$range requires a {what} that can be represented as a 32-bit integer, \
                         found value: {}",
                        fmt_value(b)
                    ),
                )
            })
    };
    let start = int(0, "starting value", (34443, 34444))?;
    let end = int(1, "ending value", (34445, 34446))?;
    let step = if args.len() == 3 {
        int(2, "step value", (34447, 34448))?
    } else {
        1
    };
    if step == 0 {
        return Err(Error::location(
            34449,
            "$range requires a non-zero step value",
        ));
    }
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < end) || (step < 0 && i > end) {
        out.push(Bson::Int32(i as i32));
        i += step;
    }
    some(Bson::Array(out))
}

fn array_to_object(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let items = match &args[0] {
        v if nullish(v) => return null(),
        Some(Bson::Array(items)) => items,
        other => {
            return Err(Error::location(
                40386,
                format!(
                    "$arrayToObject requires an array input, found: {}",
                    type_of(other)
                ),
            ))
        }
    };
    let mut out = Document::new();
    for item in items {
        let (k, v) = match item {
            Bson::Array(pair) if pair.len() == 2 => match &pair[0] {
                Bson::String(k) => (k.clone(), pair[1].clone()),
                other => {
                    return Err(Error::location(
                        40395,
                        format!(
                            "$arrayToObject requires an array of key-value pairs, where the key \
                             must be of type string. Found key type: {}",
                            value::type_name(other)
                        ),
                    ))
                }
            },
            Bson::Document(d) if d.len() == 2 => match (d.get("k"), d.get("v")) {
                (Some(Bson::String(k)), Some(v)) => (k.clone(), v.clone()),
                _ => {
                    return Err(Error::location(
                        40393,
                        "$arrayToObject requires an object with keys 'k' and 'v'.",
                    ))
                }
            },
            _ => {
                return Err(Error::location(
                    40398,
                    "Unrecognised input type format for $arrayToObject",
                ))
            }
        };
        out.insert(k, v);
    }
    some(Bson::Document(out))
}

fn object_to_array(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    match &args[0] {
        v if nullish(v) => null(),
        Some(Bson::Document(d)) => some(Bson::Array(
            d.iter()
                .map(|(k, v)| Bson::Document(bson::doc! { "k": k.clone(), "v": v.clone() }))
                .collect(),
        )),
        other => Err(Error::location(
            40390,
            format!(
                "$objectToArray requires a document input, found: {}",
                type_of(other)
            ),
        )),
    }
}

/// Merge documents left to right; `null` and missing inputs are skipped.
pub(crate) fn merge_into(out: &mut Document, v: &Option<Bson>) -> Result<()> {
    match v {
        v if nullish(v) => Ok(()),
        Some(Bson::Document(d)) => {
            for (k, val) in d {
                out.insert(k.clone(), val.clone());
            }
            Ok(())
        }
        other => Err(Error::location(
            40400,
            format!(
                "$mergeObjects requires object inputs, but input {} is of type {}",
                other.as_ref().map(fmt_value).unwrap_or_default(),
                type_of(other)
            ),
        )),
    }
}

fn merge_objects(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut out = Document::new();
    for a in args {
        merge_into(&mut out, a)?;
    }
    some(Bson::Document(out))
}

// ---------------------------------------------------------------------------------------------
// Sets

fn push_distinct(set: &mut Vec<Bson>, v: &Bson) {
    if !set.iter().any(|x| values_equal(x, v)) {
        set.push(v.clone());
    }
}

fn set_operands<'a>(
    name: &str,
    args: &'a [Option<Bson>],
    code: i32,
) -> Result<Option<Vec<&'a Vec<Bson>>>> {
    let mut out = Vec::new();
    for a in args {
        match a {
            v if nullish(v) => return Ok(None),
            Some(Bson::Array(items)) => out.push(items),
            other => {
                return Err(Error::location(
                    code,
                    format!(
                        "All operands of {name} must be arrays. One argument is of type: {}",
                        type_of(other)
                    ),
                ))
            }
        }
    }
    Ok(Some(out))
}

fn set_union(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let Some(arrays) = set_operands("$setUnion", args, 17043)? else {
        return null();
    };
    let mut out = Vec::new();
    for items in arrays {
        for v in items {
            push_distinct(&mut out, v);
        }
    }
    some(Bson::Array(out))
}

fn set_intersection(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let Some(arrays) = set_operands("$setIntersection", args, 17047)? else {
        return null();
    };
    let Some((first, rest)) = arrays.split_first() else {
        return some(Bson::Array(vec![]));
    };
    let mut out = Vec::new();
    for v in first.iter() {
        if rest.iter().all(|a| a.iter().any(|x| values_equal(x, v))) {
            push_distinct(&mut out, v);
        }
    }
    some(Bson::Array(out))
}

fn set_difference(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let (a, b) = (&args[0], &args[1]);
    if nullish(a) || nullish(b) {
        return null();
    }
    let Some(Bson::Array(left)) = a else {
        return Err(Error::location(
            17048,
            format!(
                "both operands of $setDifference must be arrays. First argument is of type: {}",
                type_of(a)
            ),
        ));
    };
    let Some(Bson::Array(right)) = b else {
        return Err(Error::location(
            17049,
            format!(
                "both operands of $setDifference must be arrays. Second argument is of type: {}",
                type_of(b)
            ),
        ));
    };
    let mut out = Vec::new();
    for v in left {
        if !right.iter().any(|x| values_equal(x, v)) {
            push_distinct(&mut out, v);
        }
    }
    some(Bson::Array(out))
}

fn set_equals(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let mut arrays = Vec::new();
    for a in args {
        match a {
            Some(Bson::Array(items)) => arrays.push(items),
            other => {
                return Err(Error::location(
                    17044,
                    format!(
                        "All operands of $setEquals must be arrays. One argument is of type: {}",
                        type_of(other)
                    ),
                ))
            }
        }
    }
    let contains_all =
        |a: &Vec<Bson>, b: &Vec<Bson>| a.iter().all(|v| b.iter().any(|x| values_equal(x, v)));
    let first = arrays[0];
    some(Bson::Boolean(
        arrays
            .iter()
            .all(|a| contains_all(first, a) && contains_all(a, first)),
    ))
}

fn set_is_subset(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    let Some(Bson::Array(left)) = &args[0] else {
        return Err(Error::location(
            17046,
            format!(
                "both operands of $setIsSubset must be arrays. First argument is of type: {}",
                type_of(&args[0])
            ),
        ));
    };
    let Some(Bson::Array(right)) = &args[1] else {
        return Err(Error::location(
            17042,
            format!(
                "both operands of $setIsSubset must be arrays. Second argument is of type: {}",
                type_of(&args[1])
            ),
        ));
    };
    some(Bson::Boolean(
        left.iter()
            .all(|v| right.iter().any(|x| values_equal(x, v))),
    ))
}

fn element_truth(args: &[Option<Bson>], name: &str, any: bool) -> Result<Option<Bson>> {
    let Some(Bson::Array(items)) = &args[0] else {
        return Err(Error::location(
            17041,
            format!(
                "{name}'s argument must be an array, but is {}",
                type_of(&args[0])
            ),
        ));
    };
    some(Bson::Boolean(if any {
        items.iter().any(is_truthy)
    } else {
        items.iter().all(is_truthy)
    }))
}

fn any_element_true(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    element_truth(args, "$anyElementTrue", true)
}

fn all_elements_true(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    element_truth(args, "$allElementsTrue", false)
}

// ---------------------------------------------------------------------------------------------
// Types and conversion

fn type_op(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::String(type_of(&args[0]).to_string()))
}

fn is_number(args: &[Option<Bson>]) -> Result<Option<Bson>> {
    some(Bson::Boolean(
        args[0].as_ref().is_some_and(value::is_number),
    ))
}

fn convert_to(args: &[Option<Bson>], target: &str) -> Result<Option<Bson>> {
    if nullish(&args[0]) {
        return null();
    }
    convert(args[0].clone(), Some(Bson::String(target.to_string())))
}

fn conversion_failure(msg: String) -> Error {
    Error::new(
        ErrorCode::ConversionFailure,
        format!("{msg} in $convert with no onError value"),
    )
}

fn unsupported_conversion(from: &Bson, to: &str) -> Error {
    conversion_failure(format!(
        "Unsupported conversion from {} to {to}",
        value::type_name(from)
    ))
}

/// `$convert` of a non-null `input` to the type named (or numbered) by `to`.
pub(crate) fn convert(input: Option<Bson>, to: Option<Bson>) -> Result<Option<Bson>> {
    let target: String = match &to {
        t if nullish(t) => return null(),
        Some(Bson::String(s)) => s.clone(),
        Some(n) if value::is_number(n) => {
            let code = Number::from_bson(n)
                .and_then(Number::as_i64_exact)
                .unwrap_or(0);
            match code {
                1 => "double",
                2 => "string",
                7 => "objectId",
                8 => "bool",
                9 => "date",
                16 => "int",
                18 => "long",
                19 => "decimal",
                _ => {
                    return Err(Error::bad_value(format!(
                        "In $convert, numeric 'to' argument is not a valid type: {code}"
                    )))
                }
            }
            .to_string()
        }
        Some(other) => {
            return Err(Error::failed_to_parse(format!(
                "$convert's 'to' argument must be a string or number, but is {}",
                value::type_name(other)
            )))
        }
        None => return null(),
    };
    let Some(v) = input else {
        return null();
    };
    if matches!(v, Bson::Null | Bson::Undefined) {
        return null();
    }
    let out = match target.as_str() {
        "double" => Bson::Double(match &v {
            Bson::Boolean(b) => f64::from(u8::from(*b)),
            Bson::DateTime(d) => d.timestamp_millis() as f64,
            Bson::String(s) => parse_double(s)?,
            n if value::is_number(n) => num(n),
            other => return Err(unsupported_conversion(other, "double")),
        }),
        "int" | "long" => {
            let long = target == "long";
            let i: i64 = match &v {
                Bson::Boolean(b) => i64::from(*b),
                Bson::Int32(i) => *i as i64,
                Bson::Int64(i) => *i,
                Bson::DateTime(d) if long => d.timestamp_millis(),
                Bson::Double(_) | Bson::Decimal128(_) => {
                    let d = num(&v);
                    if d.is_nan() {
                        return Err(conversion_failure(
                            "Attempt to convert NaN value to integer type".to_string(),
                        ));
                    }
                    let t = d.trunc();
                    let fits = if long {
                        (-9.223372036854776e18..9.223372036854776e18).contains(&t)
                    } else {
                        (i32::MIN as f64..=i32::MAX as f64).contains(&t)
                    };
                    if !fits {
                        return Err(conversion_failure(format!(
                            "Conversion would overflow target type: {}",
                            fmt_value(&v)
                        )));
                    }
                    t as i64
                }
                Bson::String(s) => {
                    let parsed: std::result::Result<i64, _> = s.parse();
                    match parsed {
                        Ok(i) => i,
                        Err(_) => {
                            return Err(conversion_failure(format!(
                                "Failed to parse number '{s}': Did not consume whole string."
                            )))
                        }
                    }
                }
                other => return Err(unsupported_conversion(other, &target)),
            };
            if long {
                Bson::Int64(i)
            } else {
                match i32::try_from(i) {
                    Ok(x) => Bson::Int32(x),
                    Err(_) => {
                        return Err(conversion_failure(format!(
                            "Conversion would overflow target type: {}",
                            fmt_value(&v)
                        )))
                    }
                }
            }
        }
        "decimal" => match &v {
            Bson::Boolean(b) => Bson::Decimal128(value::f64_to_decimal(f64::from(u8::from(*b)))),
            Bson::String(s) => match s.parse::<bson::Decimal128>() {
                Ok(d) => Bson::Decimal128(d),
                Err(_) => return Err(conversion_failure(format!("Failed to parse number '{s}'"))),
            },
            Bson::Decimal128(_) => v.clone(),
            Bson::Int32(i) => Bson::Decimal128(
                i.to_string()
                    .parse()
                    .unwrap_or_else(|_| value::f64_to_decimal(*i as f64)),
            ),
            Bson::Int64(i) => Bson::Decimal128(
                i.to_string()
                    .parse()
                    .unwrap_or_else(|_| value::f64_to_decimal(*i as f64)),
            ),
            Bson::Double(d) => Bson::Decimal128(value::f64_to_decimal(*d)),
            Bson::DateTime(d) => {
                Bson::Decimal128(value::f64_to_decimal(d.timestamp_millis() as f64))
            }
            other => return Err(unsupported_conversion(other, "decimal")),
        },
        "string" => Bson::String(match &v {
            Bson::Boolean(b) => b.to_string(),
            Bson::ObjectId(o) => o.to_hex(),
            Bson::String(_)
            | Bson::Int32(_)
            | Bson::Int64(_)
            | Bson::Double(_)
            | Bson::Decimal128(_)
            | Bson::DateTime(_) => coerce_to_string(&Some(v.clone()))?,
            other => return Err(unsupported_conversion(other, "string")),
        }),
        "bool" => Bson::Boolean(match &v {
            Bson::Boolean(b) => *b,
            n if value::is_number(n) => is_truthy(n),
            Bson::MinKey | Bson::MaxKey => {
                return Err(unsupported_conversion(&v, "bool"));
            }
            _ => true,
        }),
        "date" => Bson::DateTime(match &v {
            Bson::DateTime(d) => *d,
            Bson::Int64(i) => bson::DateTime::from_millis(*i),
            Bson::Double(_) | Bson::Decimal128(_) => {
                let d = num(&v);
                if !d.is_finite() || d.abs() >= 9.2e18 {
                    return Err(conversion_failure(format!(
                        "Conversion would overflow target type: {}",
                        fmt_value(&v)
                    )));
                }
                bson::DateTime::from_millis(d.trunc() as i64)
            }
            Bson::String(s) => match dates::parse_date_string(s) {
                Some(ms) => bson::DateTime::from_millis(ms),
                None => {
                    return Err(conversion_failure(format!(
                        "Error parsing date string '{s}'"
                    )))
                }
            },
            Bson::ObjectId(o) => bson::DateTime::from_millis(o.timestamp().timestamp_millis()),
            Bson::Timestamp(t) => bson::DateTime::from_millis(t.time as i64 * 1000),
            other => return Err(unsupported_conversion(other, "date")),
        }),
        "objectId" => match &v {
            Bson::ObjectId(_) => v.clone(),
            Bson::String(s) => match ObjectId::parse_str(s) {
                Ok(o) => Bson::ObjectId(o),
                Err(_) => {
                    return Err(conversion_failure(format!(
                        "Failed to parse objectId '{s}': Invalid string length for parsing to \
                         OID, expected 24 but found {}",
                        s.len()
                    )))
                }
            },
            other => return Err(unsupported_conversion(other, "objectId")),
        },
        other => {
            return Err(Error::bad_value(format!("Unknown type name: {other}")));
        }
    };
    some(out)
}

fn parse_double(s: &str) -> Result<f64> {
    let t = s.trim();
    let lowered = t.to_ascii_lowercase();
    let special = match lowered.as_str() {
        "nan" => Some(f64::NAN),
        "infinity" | "inf" => Some(f64::INFINITY),
        "-infinity" | "-inf" => Some(f64::NEG_INFINITY),
        _ => None,
    };
    if let Some(x) = special {
        return Ok(x);
    }
    if t.len() != s.len() || t.is_empty() {
        return Err(conversion_failure(format!(
            "Failed to parse number '{s}': Did not consume whole string."
        )));
    }
    t.parse::<f64>().map_err(|_| {
        conversion_failure(format!(
            "Failed to parse number '{s}': Did not consume whole string."
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::super::expression::Expression;
    use bson::{bson, doc, Bson, Document};

    fn eval_in(expr: Bson, root: Document) -> crate::error::Result<Option<Bson>> {
        Expression::parse(&expr)?.evaluate(&root, &doc! {})
    }

    fn ok(expr: Bson) -> Option<Bson> {
        eval_in(expr, doc! { "s": "Hello", "n": null, "xs": [1, 2, 3], "d": bson::DateTime::from_millis(1_000) })
            .unwrap_or_else(|e| panic!("evaluation failed: {e}"))
    }

    fn err(expr: Bson) -> crate::error::Error {
        match eval_in(expr, doc! {}) {
            Err(e) => e,
            Ok(v) => panic!("expected an error, got {v:?}"),
        }
    }

    #[test]
    fn add_widens_integers_and_propagates_null() {
        assert_eq!(ok(bson!({ "$add": [1, 2, 3] })), Some(Bson::Int32(6)));
        assert_eq!(ok(bson!({ "$add": [1, 2.5] })), Some(Bson::Double(3.5)));
        assert_eq!(
            ok(bson!({ "$add": [i32::MAX, 1] })),
            Some(Bson::Int64(i32::MAX as i64 + 1))
        );
        assert_eq!(
            ok(bson!({ "$add": [i64::MAX, 1i64] })),
            Some(Bson::Double(i64::MAX as f64 + 1.0))
        );
        assert_eq!(ok(bson!({ "$add": [1, null] })), Some(Bson::Null));
        assert_eq!(ok(bson!({ "$add": [1, "$missing"] })), Some(Bson::Null));
        assert_eq!(ok(bson!({ "$add": [] })), Some(Bson::Int32(0)));
    }

    #[test]
    fn add_with_a_date_adds_milliseconds() {
        assert_eq!(
            ok(bson!({ "$add": ["$d", 500] })),
            Some(Bson::DateTime(bson::DateTime::from_millis(1_500)))
        );
        assert_eq!(
            err(
                bson!({ "$add": [bson::DateTime::from_millis(0), bson::DateTime::from_millis(0)] })
            )
            .code_number(),
            16612
        );
    }

    #[test]
    fn add_of_a_string_is_a_type_mismatch_naming_the_type() {
        let e = err(bson!({ "$add": [1, "x"] }));
        assert_eq!(e.code_number(), 14);
        assert_eq!(
            e.message,
            "$add only supports numeric or date types, not string"
        );
    }

    #[test]
    fn subtract_handles_numbers_and_dates() {
        assert_eq!(ok(bson!({ "$subtract": [10, 4] })), Some(Bson::Int32(6)));
        let a = bson::DateTime::from_millis(5_000);
        let b = bson::DateTime::from_millis(2_000);
        assert_eq!(ok(bson!({ "$subtract": [a, b] })), Some(Bson::Int64(3_000)));
        assert_eq!(
            ok(bson!({ "$subtract": [a, 1000] })),
            Some(Bson::DateTime(bson::DateTime::from_millis(4_000)))
        );
        assert_eq!(ok(bson!({ "$subtract": [null, 1] })), Some(Bson::Null));
        let e = err(bson!({ "$subtract": ["a", 1] }));
        assert_eq!(e.code_number(), 14);
        assert_eq!(e.message, "can't $subtract int from string");
        assert_eq!(err(bson!({ "$subtract": [1] })).code_number(), 16020);
    }

    #[test]
    fn multiply_and_divide_follow_mongodb_types_and_errors() {
        assert_eq!(ok(bson!({ "$multiply": [2, 3, 4] })), Some(Bson::Int32(24)));
        assert_eq!(
            ok(bson!({ "$multiply": [2, 1.5] })),
            Some(Bson::Double(3.0))
        );
        assert_eq!(
            err(bson!({ "$multiply": [2, "x"] })).message,
            "$multiply only supports numeric types, not string"
        );
        assert_eq!(ok(bson!({ "$divide": [7, 2] })), Some(Bson::Double(3.5)));
        assert_eq!(ok(bson!({ "$divide": [6, 3] })), Some(Bson::Double(2.0)));
        let e = err(bson!({ "$divide": [1, 0] }));
        assert_eq!(e.message, "can't $divide by zero");
        assert_eq!(e.code_number(), 2);
        assert_eq!(
            err(bson!({ "$divide": ["a", 1] })).message,
            "$divide only supports numeric types, not string and int"
        );
        assert_eq!(ok(bson!({ "$divide": [null, 0] })), Some(Bson::Null));
    }

    #[test]
    fn mod_abs_floor_ceil() {
        assert_eq!(ok(bson!({ "$mod": [7, 3] })), Some(Bson::Int32(1)));
        assert_eq!(ok(bson!({ "$mod": [-7, 3] })), Some(Bson::Int32(-1)));
        assert_eq!(ok(bson!({ "$mod": [7.5, 2] })), Some(Bson::Double(1.5)));
        assert_eq!(err(bson!({ "$mod": [1, 0] })).code_number(), 16610);
        assert_eq!(err(bson!({ "$mod": ["a", 1] })).code_number(), 16611);
        assert_eq!(ok(bson!({ "$abs": -5 })), Some(Bson::Int32(5)));
        assert_eq!(
            ok(bson!({ "$abs": i32::MIN })),
            Some(Bson::Int64(2_147_483_648))
        );
        assert_eq!(ok(bson!({ "$abs": null })), Some(Bson::Null));
        assert_eq!(err(bson!({ "$abs": "x" })).code_number(), 28765);
        assert_eq!(ok(bson!({ "$floor": -1.5 })), Some(Bson::Double(-2.0)));
        assert_eq!(ok(bson!({ "$ceil": 1.2 })), Some(Bson::Double(2.0)));
        assert_eq!(ok(bson!({ "$ceil": 3 })), Some(Bson::Int32(3)));
    }

    #[test]
    fn round_uses_half_to_even_on_decimal_digits() {
        assert_eq!(ok(bson!({ "$round": [10.5, 0] })), Some(Bson::Double(10.0)));
        assert_eq!(ok(bson!({ "$round": [11.5, 0] })), Some(Bson::Double(12.0)));
        assert_eq!(
            ok(bson!({ "$round": [2.675, 2] })),
            Some(Bson::Double(2.68))
        );
        assert_eq!(ok(bson!({ "$round": [-2.5] })), Some(Bson::Double(-2.0)));
        assert_eq!(ok(bson!({ "$round": [1234, -2] })), Some(Bson::Int32(1200)));
        assert_eq!(ok(bson!({ "$round": [1250, -2] })), Some(Bson::Int32(1200)));
        assert_eq!(ok(bson!({ "$round": [9.99, 1] })), Some(Bson::Double(10.0)));
        assert_eq!(
            ok(bson!({ "$trunc": [2.679, 2] })),
            Some(Bson::Double(2.67))
        );
        assert_eq!(ok(bson!({ "$round": [0.4, 0] })), Some(Bson::Double(0.0)));
    }

    #[test]
    fn comparisons_use_the_cross_type_order_and_missing_is_below_null() {
        assert_eq!(ok(bson!({ "$eq": [1, 1.0] })), Some(Bson::Boolean(true)));
        assert_eq!(ok(bson!({ "$gt": ["a", 5] })), Some(Bson::Boolean(true)));
        assert_eq!(
            ok(bson!({ "$eq": ["$missing", null] })),
            Some(Bson::Boolean(false))
        );
        assert_eq!(
            ok(bson!({ "$lt": ["$missing", null] })),
            Some(Bson::Boolean(true))
        );
        assert_eq!(ok(bson!({ "$cmp": [1, 2] })), Some(Bson::Int32(-1)));
        assert_eq!(ok(bson!({ "$cmp": ["b", "a"] })), Some(Bson::Int32(1)));
        assert_eq!(ok(bson!({ "$ne": [1, 2] })), Some(Bson::Boolean(true)));
        assert_eq!(ok(bson!({ "$lte": [2, 2] })), Some(Bson::Boolean(true)));
        assert_eq!(ok(bson!({ "$gte": [1, 2] })), Some(Bson::Boolean(false)));
    }

    #[test]
    fn sum_avg_min_max_as_expressions() {
        assert_eq!(ok(bson!({ "$sum": "$xs" })), Some(Bson::Int32(6)));
        assert_eq!(
            ok(bson!({ "$sum": [1, "a", 2.5] })),
            Some(Bson::Double(3.5))
        );
        assert_eq!(ok(bson!({ "$avg": "$xs" })), Some(Bson::Double(2.0)));
        assert_eq!(ok(bson!({ "$avg": ["a"] })), Some(Bson::Null));
        assert_eq!(ok(bson!({ "$max": "$xs" })), Some(Bson::Int32(3)));
        assert_eq!(ok(bson!({ "$min": [5, null, 2] })), Some(Bson::Int32(2)));
    }

    #[test]
    fn string_operators() {
        assert_eq!(
            ok(bson!({ "$concat": ["$s", " ", "world"] })),
            Some(bson!("Hello world"))
        );
        assert_eq!(ok(bson!({ "$concat": ["$s", "$n"] })), Some(Bson::Null));
        assert_eq!(err(bson!({ "$concat": ["a", 1] })).code_number(), 16702);
        assert_eq!(ok(bson!({ "$toLower": "$s" })), Some(bson!("hello")));
        assert_eq!(ok(bson!({ "$toUpper": "$n" })), Some(bson!("")));
        assert_eq!(ok(bson!({ "$toUpper": 12 })), Some(bson!("12")));
        assert_eq!(
            ok(bson!({ "$substrCP": ["héllo", 1, 3] })),
            Some(bson!("éll"))
        );
        assert_eq!(
            err(bson!({ "$substrCP": ["abc", -1, 1] })).code_number(),
            34454
        );
        assert_eq!(ok(bson!({ "$strLenCP": "héllo" })), Some(Bson::Int32(5)));
        assert_eq!(err(bson!({ "$strLenCP": 5 })).code_number(), 34471);
        assert_eq!(
            ok(bson!({ "$split": ["a,b,,c", ","] })),
            Some(bson!(["a", "b", "", "c"]))
        );
        assert_eq!(ok(bson!({ "$split": ["$n", ","] })), Some(Bson::Null));
        assert_eq!(err(bson!({ "$split": ["a", ""] })).code_number(), 40087);
        assert_eq!(
            ok(bson!({ "$trim": { "input": "  hi \n" } })),
            Some(bson!("hi"))
        );
        assert_eq!(
            ok(bson!({ "$ltrim": { "input": "xxhixx", "chars": "x" } })),
            Some(bson!("hixx"))
        );
        assert_eq!(
            ok(bson!({ "$rtrim": { "input": "xxhixx", "chars": "x" } })),
            Some(bson!("xxhi"))
        );
        assert_eq!(err(bson!({ "$trim": { "input": 1 } })).code_number(), 50699);
        assert_eq!(
            ok(bson!({ "$regexMatch": { "input": "Hello", "regex": "^h", "options": "i" } })),
            Some(Bson::Boolean(true))
        );
        assert_eq!(
            ok(bson!({ "$regexMatch": { "input": "$n", "regex": "x" } })),
            Some(Bson::Boolean(false))
        );
        assert_eq!(
            ok(bson!({ "$replaceAll": { "input": "a-b-c", "find": "-", "replacement": "+" } })),
            Some(bson!("a+b+c"))
        );
        assert_eq!(
            ok(bson!({ "$replaceOne": { "input": "a-b-c", "find": "-", "replacement": "+" } })),
            Some(bson!("a+b-c"))
        );
        assert_eq!(
            ok(bson!({ "$indexOfCP": ["héllo", "l"] })),
            Some(Bson::Int32(2))
        );
    }

    #[test]
    fn array_operators() {
        assert_eq!(ok(bson!({ "$size": "$xs" })), Some(Bson::Int32(3)));
        let e = err(bson!({ "$size": "$nope" }));
        assert_eq!(e.code_number(), 17124);
        assert_eq!(
            e.message,
            "The argument to $size must be an array. Type of argument was: missing"
        );
        assert_eq!(
            ok(bson!({ "$arrayElemAt": ["$xs", -1] })),
            Some(Bson::Int32(3))
        );
        assert_eq!(ok(bson!({ "$arrayElemAt": ["$xs", 5] })), None);
        assert_eq!(err(bson!({ "$arrayElemAt": [1, 0] })).code_number(), 28689);
        assert_eq!(ok(bson!({ "$first": "$xs" })), Some(Bson::Int32(1)));
        assert_eq!(ok(bson!({ "$last": "$xs" })), Some(Bson::Int32(3)));
        assert_eq!(
            ok(bson!({ "$in": [2.0, "$xs"] })),
            Some(Bson::Boolean(true))
        );
        assert_eq!(err(bson!({ "$in": [1, "$nope"] })).code_number(), 40081);
        assert_eq!(ok(bson!({ "$slice": ["$xs", 2] })), Some(bson!([1, 2])));
        assert_eq!(ok(bson!({ "$slice": ["$xs", -2] })), Some(bson!([2, 3])));
        assert_eq!(ok(bson!({ "$slice": ["$xs", 1, 1] })), Some(bson!([2])));
        assert_eq!(
            ok(bson!({ "$concatArrays": ["$xs", [4]] })),
            Some(bson!([1, 2, 3, 4]))
        );
        assert_eq!(
            ok(bson!({ "$concatArrays": ["$xs", "$n"] })),
            Some(Bson::Null)
        );
        assert_eq!(
            ok(bson!({ "$isArray": ["$xs"] })),
            Some(Bson::Boolean(true))
        );
        assert_eq!(
            ok(bson!({ "$isArray": ["$s"] })),
            Some(Bson::Boolean(false))
        );
        assert_eq!(
            ok(bson!({ "$reverseArray": "$xs" })),
            Some(bson!([3, 2, 1]))
        );
        assert_eq!(
            ok(bson!({ "$indexOfArray": ["$xs", 2] })),
            Some(Bson::Int32(1))
        );
        assert_eq!(ok(bson!({ "$range": [0, 6, 2] })), Some(bson!([0, 2, 4])));
        assert_eq!(
            ok(bson!({ "$arrayToObject": [[["a", 1], ["b", 2]]] })),
            Some(bson!({ "a": 1, "b": 2 }))
        );
        assert_eq!(
            ok(bson!({ "$objectToArray": { "$literal": { "a": 1 } } })),
            Some(bson!([{ "k": "a", "v": 1 }]))
        );
        assert_eq!(
            ok(bson!({ "$mergeObjects": [{ "a": 1 }, null, { "a": 2, "b": 3 }] })),
            Some(bson!({ "a": 2, "b": 3 }))
        );
    }

    #[test]
    fn set_operators() {
        assert_eq!(
            ok(bson!({ "$setUnion": [[1, 2, 2], [2, 3]] })),
            Some(bson!([1, 2, 3]))
        );
        assert_eq!(
            ok(bson!({ "$setIntersection": [[1, 2, 3], [2, 3, 4]] })),
            Some(bson!([2, 3]))
        );
        assert_eq!(
            ok(bson!({ "$setDifference": [[1, 2, 3], [2]] })),
            Some(bson!([1, 3]))
        );
        assert_eq!(
            ok(bson!({ "$setEquals": [[1, 2], [2, 1, 1]] })),
            Some(Bson::Boolean(true))
        );
        assert_eq!(
            ok(bson!({ "$setIsSubset": [[1], [1, 2]] })),
            Some(Bson::Boolean(true))
        );
        assert_eq!(ok(bson!({ "$setUnion": [[1], "$n"] })), Some(Bson::Null));
        assert_eq!(err(bson!({ "$setUnion": [[1], 2] })).code_number(), 17043);
        assert_eq!(
            ok(bson!({ "$anyElementTrue": [[0, false, 1]] })),
            Some(Bson::Boolean(true))
        );
        assert_eq!(
            ok(bson!({ "$allElementsTrue": [[1, 0]] })),
            Some(Bson::Boolean(false))
        );
    }

    #[test]
    fn conversions() {
        assert_eq!(ok(bson!({ "$type": "$nope" })), Some(bson!("missing")));
        assert_eq!(ok(bson!({ "$type": "$xs" })), Some(bson!("array")));
        assert_eq!(ok(bson!({ "$toString": 1.5 })), Some(bson!("1.5")));
        assert_eq!(ok(bson!({ "$toString": 10.0 })), Some(bson!("10")));
        assert_eq!(
            ok(bson!({ "$toString": "$d" })),
            Some(bson!("1970-01-01T00:00:01.000Z"))
        );
        assert_eq!(ok(bson!({ "$toInt": "42" })), Some(Bson::Int32(42)));
        assert_eq!(ok(bson!({ "$toInt": 4.9 })), Some(Bson::Int32(4)));
        assert_eq!(ok(bson!({ "$toLong": "$d" })), Some(Bson::Int64(1000)));
        assert_eq!(ok(bson!({ "$toDouble": "2.5" })), Some(Bson::Double(2.5)));
        assert_eq!(ok(bson!({ "$toBool": 0 })), Some(Bson::Boolean(false)));
        assert_eq!(ok(bson!({ "$toInt": "$n" })), Some(Bson::Null));
        assert_eq!(
            ok(bson!({ "$toDate": "2021-03-04T05:06:07.089Z" })),
            Some(Bson::DateTime(bson::DateTime::from_millis(
                1_614_834_367_089
            )))
        );
        assert_eq!(
            ok(bson!({ "$toDate": 86_400_000i64 })),
            Some(Bson::DateTime(bson::DateTime::from_millis(86_400_000)))
        );
        assert_eq!(err(bson!({ "$toInt": "abc" })).code_number(), 241);
        assert_eq!(
            ok(bson!({ "$convert": { "input": "abc", "to": "int", "onError": -1 } })),
            Some(Bson::Int32(-1))
        );
        assert_eq!(
            ok(bson!({ "$convert": { "input": "$n", "to": "int", "onNull": 0 } })),
            Some(Bson::Int32(0))
        );
        assert_eq!(
            ok(bson!({ "$convert": { "input": "7", "to": 18 } })),
            Some(Bson::Int64(7))
        );
    }
}
