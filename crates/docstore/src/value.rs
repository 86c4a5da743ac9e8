//! BSON value semantics shared by every layer: MongoDB's cross-type comparison order (with
//! the string order of the collation in force), type names and numbers, and numeric
//! arithmetic with MongoDB's type promotion rules.

use bson::{Bson, Decimal128, Document};
use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::sync::Arc;

/// An order on strings other than the bytewise one: a collation, which `crate::collation`
/// installs on the thread that runs a command for the length of that command, so that every
/// comparison the command makes (matching, sorting, grouping, updating) uses it.
pub(crate) trait StringOrder: Send + Sync {
    fn compare_strings(&self, a: &str, b: &str) -> Ordering;
}

thread_local! {
    /// Whether a string order is installed (tested first: the simple case reads one flag).
    static CUSTOM_ORDER: Cell<bool> = const { Cell::new(false) };
    static STRING_ORDER: RefCell<Option<Arc<dyn StringOrder>>> = const { RefCell::new(None) };
}

/// Install `order` on this thread (`None`: bytewise); returns the one it replaces.
pub(crate) fn set_string_order(
    order: Option<Arc<dyn StringOrder>>,
) -> Option<Arc<dyn StringOrder>> {
    CUSTOM_ORDER.with(|c| c.set(order.is_some()));
    STRING_ORDER.with(|o| std::mem::replace(&mut *o.borrow_mut(), order))
}

/// Whether a string order other than the bytewise one is installed on this thread.
pub(crate) fn has_string_order() -> bool {
    CUSTOM_ORDER.with(Cell::get)
}

/// Compare two strings under the order installed on this thread (bytewise when none is).
pub(crate) fn compare_strings(a: &str, b: &str) -> Ordering {
    if !has_string_order() {
        return a.as_bytes().cmp(b.as_bytes());
    }
    STRING_ORDER.with(|o| match &*o.borrow() {
        Some(order) => order.compare_strings(a, b),
        None => a.as_bytes().cmp(b.as_bytes()),
    })
}

/// Position of a value's type in MongoDB's comparison order. Numbers share one bracket, as do
/// strings and symbols.
pub fn canonical_rank(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 1,
        Bson::Undefined => 2,
        Bson::Null => 3,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 4,
        Bson::String(_) | Bson::Symbol(_) => 5,
        Bson::Document(_) => 6,
        Bson::Array(_) => 7,
        Bson::Binary(_) => 8,
        Bson::ObjectId(_) => 9,
        Bson::Boolean(_) => 10,
        Bson::DateTime(_) => 11,
        Bson::Timestamp(_) => 12,
        Bson::RegularExpression(_) => 13,
        Bson::DbPointer(_) => 14,
        Bson::JavaScriptCode(_) => 15,
        Bson::JavaScriptCodeWithScope(_) => 16,
        Bson::MaxKey => 17,
    }
}

/// Compare two values in MongoDB's total order (the order `sort` uses and that comparison
/// operators use within a type bracket). Strings compare under the collation in force on this
/// thread (`set_string_order`), bytewise when there is none.
pub fn compare(a: &Bson, b: &Bson) -> Ordering {
    let (ra, rb) = (canonical_rank(a), canonical_rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (Bson::String(x), Bson::String(y))
        | (Bson::String(x), Bson::Symbol(y))
        | (Bson::Symbol(x), Bson::String(y))
        | (Bson::Symbol(x), Bson::Symbol(y)) => compare_strings(x, y),
        (Bson::Document(x), Bson::Document(y)) => compare_documents(x, y),
        (Bson::Array(x), Bson::Array(y)) => compare_arrays(x, y),
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => x
            .pattern
            .cmp(&y.pattern)
            .then_with(|| x.options.cmp(&y.options)),
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.cmp(y),
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => x
            .code
            .cmp(&y.code)
            .then_with(|| compare_documents(&x.scope, &y.scope)),
        _ if ra == 4 => compare_numbers(a, b),
        // MinKey, MaxKey, Null, Undefined, DbPointer: all values of the type are equal.
        _ => Ordering::Equal,
    }
}

/// Equality as the query language sees it: same type bracket and equal by value
/// (so `1`, `NumberLong(1)` and `1.0` are equal).
pub fn values_equal(a: &Bson, b: &Bson) -> bool {
    compare(a, b) == Ordering::Equal
}

/// Field by field: the value's type bracket, then the field name, then the value.
pub(crate) fn compare_documents(a: &Document, b: &Document) -> Ordering {
    let mut ia = a.iter();
    let mut ib = b.iter();
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let ord = canonical_rank(va)
                    .cmp(&canonical_rank(vb))
                    .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
                    .then_with(|| compare(va, vb));
                if ord != Ordering::Equal {
                    return ord;
                }
            }
        }
    }
}

/// Arrays compared as values (not as sort keys): element by element, then by length.
pub(crate) fn compare_arrays(a: &[Bson], b: &[Bson]) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let ord = canonical_rank(x)
            .cmp(&canonical_rank(y))
            .then_with(|| compare(x, y));
        if ord != Ordering::Equal {
            return ord;
        }
    }
    a.len().cmp(&b.len())
}

/// A numeric value widened for comparison and arithmetic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    Int(i32),
    Long(i64),
    Double(f64),
    Decimal(f64),
}

impl Number {
    pub(crate) fn from_bson(v: &Bson) -> Option<Number> {
        match v {
            Bson::Int32(i) => Some(Number::Int(*i)),
            Bson::Int64(i) => Some(Number::Long(*i)),
            Bson::Double(d) => Some(Number::Double(*d)),
            Bson::Decimal128(d) => Some(Number::Decimal(decimal_to_f64(d))),
            _ => None,
        }
    }

    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Long(i) => i as f64,
            Number::Double(d) | Number::Decimal(d) => d,
        }
    }

    /// The value as an exact integer, if it is one (doubles only when integral and in range).
    pub(crate) fn as_i64_exact(self) -> Option<i64> {
        match self {
            Number::Int(i) => Some(i as i64),
            Number::Long(i) => Some(i),
            Number::Double(d) | Number::Decimal(d) => {
                if d.fract() == 0.0 && (-9.223372036854776e18..9.223372036854776e18).contains(&d) {
                    Some(d as i64)
                } else {
                    None
                }
            }
        }
    }
}

pub(crate) fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

/// The value as f64 when it is numeric.
pub(crate) fn to_f64(v: &Bson) -> Option<f64> {
    Number::from_bson(v).map(Number::as_f64)
}

fn compare_numbers(a: &Bson, b: &Bson) -> Ordering {
    let (Some(x), Some(y)) = (Number::from_bson(a), Number::from_bson(b)) else {
        return Ordering::Equal;
    };
    compare_number_values(x, y)
}

/// Numeric comparison across int32/int64/double (decimal128 via its nearest double).
/// NaN equals NaN and sorts below every other number, as in MongoDB.
pub(crate) fn compare_number_values(x: Number, y: Number) -> Ordering {
    use Number::*;
    match (x, y) {
        (Int(a), Int(b)) => a.cmp(&b),
        (Int(a), Long(b)) => (a as i64).cmp(&b),
        (Long(a), Int(b)) => a.cmp(&(b as i64)),
        (Long(a), Long(b)) => a.cmp(&b),
        (Int(a), Double(b) | Decimal(b)) => compare_i64_f64(a as i64, b),
        (Long(a), Double(b) | Decimal(b)) => compare_i64_f64(a, b),
        (Double(a) | Decimal(a), Int(b)) => compare_i64_f64(b as i64, a).reverse(),
        (Double(a) | Decimal(a), Long(b)) => compare_i64_f64(b, a).reverse(),
        (Double(a) | Decimal(a), Double(b) | Decimal(b)) => compare_f64(a, b),
    }
}

fn compare_f64(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // -0.0 == 0.0 under partial_cmp, as MongoDB wants.
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Exact comparison of an integer with a double, without losing precision above 2^53.
fn compare_i64_f64(i: i64, f: f64) -> Ordering {
    if f.is_nan() {
        return Ordering::Greater;
    }
    if f >= 9.223372036854776e18 {
        return Ordering::Less;
    }
    if f < -9.223372036854776e18 {
        return Ordering::Greater;
    }
    let t = f.trunc();
    let ti = t as i64;
    match i.cmp(&ti) {
        Ordering::Equal => {
            let frac = f - t;
            if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        other => other,
    }
}

/// Nearest double to a decimal128 value (BID encoding). docstore stores and compares decimals
/// but does arithmetic on them only through this approximation.
pub fn decimal_to_f64(d: &Decimal128) -> f64 {
    let bytes = d.bytes();
    let bits = u128::from_le_bytes(bytes);
    let negative = bits >> 127 == 1;
    let (exponent, coefficient) = if (bits >> 125) & 0b11 == 0b11 {
        match (bits >> 122) & 0b11111 {
            0b11110 => {
                return if negative {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
            0b11111 => return f64::NAN,
            // Non-canonical large coefficients are zero by definition.
            _ => (((bits >> 111) & 0x3fff) as i32, 0u128),
        }
    } else {
        (((bits >> 113) & 0x3fff) as i32, bits & ((1u128 << 113) - 1))
    };
    let value = scaled_to_f64(coefficient, exponent - 6176);
    if negative {
        -value
    } else {
        value
    }
}

/// The double nearest to `coefficient × 10^exponent`, correctly rounded so that equal decimals in
/// different scales (`0.3`, `0.30`) become the same double.
fn scaled_to_f64(coefficient: u128, exponent: i32) -> f64 {
    if coefficient == 0 {
        return 0.0;
    }
    // One exact operand pair, one rounding: exact when the coefficient and the power of ten
    // are both representable (below 2^53 and 10^22).
    if coefficient < 1 << 53 && exponent.abs() <= 22 {
        let power = 10f64.powi(exponent.abs());
        return if exponent >= 0 {
            coefficient as f64 * power
        } else {
            coefficient as f64 / power
        };
    }
    // Otherwise the standard library's correctly rounded decimal parser does it.
    format!("{coefficient}e{exponent}")
        .parse()
        .unwrap_or(f64::NAN)
}

/// The name MongoDB gives a value's type (`$type` in queries and aggregation).
pub(crate) fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}

/// The BSON type number of a value.
pub(crate) fn type_number(v: &Bson) -> i32 {
    match v {
        Bson::Double(_) => 1,
        Bson::String(_) => 2,
        Bson::Document(_) => 3,
        Bson::Array(_) => 4,
        Bson::Binary(_) => 5,
        Bson::Undefined => 6,
        Bson::ObjectId(_) => 7,
        Bson::Boolean(_) => 8,
        Bson::DateTime(_) => 9,
        Bson::Null => 10,
        Bson::RegularExpression(_) => 11,
        Bson::DbPointer(_) => 12,
        Bson::JavaScriptCode(_) => 13,
        Bson::Symbol(_) => 14,
        Bson::JavaScriptCodeWithScope(_) => 15,
        Bson::Int32(_) => 16,
        Bson::Timestamp(_) => 17,
        Bson::Int64(_) => 18,
        Bson::Decimal128(_) => 19,
        Bson::MinKey => -1,
        Bson::MaxKey => 127,
    }
}

/// Type number for a `$type` alias ("string", "number" is handled by the caller).
pub(crate) fn type_number_for_alias(alias: &str) -> Option<i32> {
    Some(match alias {
        "double" => 1,
        "string" => 2,
        "object" => 3,
        "array" => 4,
        "binData" => 5,
        "undefined" => 6,
        "objectId" => 7,
        "bool" => 8,
        "date" => 9,
        "null" => 10,
        "regex" => 11,
        "dbPointer" => 12,
        "javascript" => 13,
        "symbol" => 14,
        "javascriptWithScope" => 15,
        "int" => 16,
        "timestamp" => 17,
        "long" => 18,
        "decimal" => 19,
        "minKey" => -1,
        "maxKey" => 127,
        _ => return None,
    })
}

/// How integer overflow is handled by [`add`] and [`multiply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// int32 widens to int64, int64 widens to double (aggregation arithmetic).
    WidenToDouble,
    /// int32 widens to int64, int64 overflow is an error (update `$inc`/`$mul`).
    Fail,
}

/// Result of numeric arithmetic on BSON values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Arith {
    Value(Bson),
    /// One operand is not a number.
    NotNumeric,
    /// int64 overflow under [`Overflow::Fail`].
    Overflowed,
}

fn combine(
    a: &Bson,
    b: &Bson,
    overflow: Overflow,
    int_op: fn(i64, i64) -> Option<i64>,
    f_op: fn(f64, f64) -> f64,
) -> Arith {
    let (Some(x), Some(y)) = (Number::from_bson(a), Number::from_bson(b)) else {
        return Arith::NotNumeric;
    };
    use Number::*;
    match (x, y) {
        (Decimal(_), _) | (_, Decimal(_)) => Arith::Value(Bson::Decimal128(f64_to_decimal(f_op(
            x.as_f64(),
            y.as_f64(),
        )))),
        (Double(_), _) | (_, Double(_)) => Arith::Value(Bson::Double(f_op(x.as_f64(), y.as_f64()))),
        (Int(p), Int(q)) => match int_op(p as i64, q as i64) {
            Some(r) if r >= i32::MIN as i64 && r <= i32::MAX as i64 => {
                Arith::Value(Bson::Int32(r as i32))
            }
            Some(r) => Arith::Value(Bson::Int64(r)),
            None => unreachable_overflow(overflow, x, y, f_op),
        },
        _ => {
            let (p, q) = (x.as_i64_exact().unwrap_or(0), y.as_i64_exact().unwrap_or(0));
            match int_op(p, q) {
                Some(r) => Arith::Value(Bson::Int64(r)),
                None => unreachable_overflow(overflow, x, y, f_op),
            }
        }
    }
}

fn unreachable_overflow(
    overflow: Overflow,
    x: Number,
    y: Number,
    f_op: fn(f64, f64) -> f64,
) -> Arith {
    match overflow {
        Overflow::WidenToDouble => Arith::Value(Bson::Double(f_op(x.as_f64(), y.as_f64()))),
        Overflow::Fail => Arith::Overflowed,
    }
}

pub(crate) fn add(a: &Bson, b: &Bson, overflow: Overflow) -> Arith {
    combine(a, b, overflow, i64::checked_add, |x, y| x + y)
}

pub(crate) fn subtract(a: &Bson, b: &Bson, overflow: Overflow) -> Arith {
    combine(a, b, overflow, i64::checked_sub, |x, y| x - y)
}

pub(crate) fn multiply(a: &Bson, b: &Bson, overflow: Overflow) -> Arith {
    combine(a, b, overflow, i64::checked_mul, |x, y| x * y)
}

/// A double as decimal128 through its shortest decimal representation.
pub(crate) fn f64_to_decimal(f: f64) -> Decimal128 {
    let text = if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        format!("{f:e}")
    };
    text.parse::<Decimal128>()
        .unwrap_or_else(|_| "0".parse::<Decimal128>().expect("zero parses"))
}

/// Truthiness in the aggregation language: false, null, missing, undefined and numeric zero are
/// false; everything else (including empty strings and arrays) is true.
pub(crate) fn is_truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(d) => *d != 0.0,
        Bson::Decimal128(d) => decimal_to_f64(d) != 0.0,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId};

    #[test]
    fn numbers_compare_by_value_across_types() {
        assert!(values_equal(&Bson::Int32(1), &Bson::Int64(1)));
        assert!(values_equal(&Bson::Int32(1), &Bson::Double(1.0)));
        assert_eq!(
            compare(&Bson::Int64(2), &Bson::Double(1.5)),
            Ordering::Greater
        );
        assert_eq!(
            compare(
                &Bson::Int64(9_007_199_254_740_993),
                &Bson::Double(9_007_199_254_740_992.0)
            ),
            Ordering::Greater
        );
        assert_eq!(
            compare(&Bson::Double(f64::NAN), &Bson::Int32(i32::MIN)),
            Ordering::Less
        );
        assert!(values_equal(
            &Bson::Double(f64::NAN),
            &Bson::Double(f64::NAN)
        ));
        assert!(values_equal(&Bson::Double(-0.0), &Bson::Int32(0)));
    }

    #[test]
    fn type_brackets_follow_mongodb_order() {
        let ordered = [
            Bson::MinKey,
            Bson::Null,
            Bson::Int32(5),
            Bson::String("a".into()),
            Bson::Document(doc! {}),
            Bson::Array(vec![]),
            Bson::ObjectId(ObjectId::new()),
            Bson::Boolean(false),
            Bson::DateTime(bson::DateTime::from_millis(0)),
            Bson::MaxKey,
        ];
        for w in ordered.windows(2) {
            assert_eq!(
                compare(&w[0], &w[1]),
                Ordering::Less,
                "{:?} < {:?}",
                w[0],
                w[1]
            );
        }
    }

    #[test]
    fn documents_compare_field_by_field() {
        assert_eq!(
            compare_documents(&doc! {"a": 1, "b": 2}, &doc! {"a": 1, "b": 3}),
            Ordering::Less
        );
        assert_eq!(
            compare_documents(&doc! {"a": 1}, &doc! {"a": 1, "b": 0}),
            Ordering::Less
        );
        // Type bracket of the value before the field name.
        assert_eq!(
            compare_documents(&doc! {"b": 1}, &doc! {"a": "x"}),
            Ordering::Less
        );
    }

    #[test]
    fn arithmetic_widens_like_mongodb() {
        assert_eq!(
            add(&Bson::Int32(i32::MAX), &Bson::Int32(1), Overflow::Fail),
            Arith::Value(Bson::Int64(i32::MAX as i64 + 1))
        );
        assert_eq!(
            add(&Bson::Int64(i64::MAX), &Bson::Int32(1), Overflow::Fail),
            Arith::Overflowed
        );
        assert!(matches!(
            add(
                &Bson::Int64(i64::MAX),
                &Bson::Int32(1),
                Overflow::WidenToDouble
            ),
            Arith::Value(Bson::Double(_))
        ));
        assert_eq!(
            multiply(&Bson::Int32(3), &Bson::Double(0.5), Overflow::Fail),
            Arith::Value(Bson::Double(1.5))
        );
        assert_eq!(
            add(&Bson::String("x".into()), &Bson::Int32(1), Overflow::Fail),
            Arith::NotNumeric
        );
    }

    #[test]
    fn decimal_converts_to_nearest_double() {
        let d: Decimal128 = "12.5".parse().unwrap();
        assert_eq!(decimal_to_f64(&d), 12.5);
        let n: Decimal128 = "-3".parse().unwrap();
        assert_eq!(decimal_to_f64(&n), -3.0);
        assert!(values_equal(&Bson::Decimal128(d), &Bson::Double(12.5)));
    }
}
