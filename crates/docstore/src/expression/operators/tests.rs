//! Tests of the expression operators, through whole expressions.

use crate::expression::Expression;
use bson::{bson, doc, Bson, Document};

fn eval_in(expr: Bson, root: Document) -> crate::error::Result<Option<Bson>> {
    Expression::parse(&expr)?.evaluate(&root, &doc! {})
}

fn ok(expr: Bson) -> Option<Bson> {
    eval_in(
        expr,
        doc! { "s": "Hello", "n": null, "xs": [1, 2, 3], "d": bson::DateTime::from_millis(1_000) },
    )
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
        err(bson!({ "$add": [bson::DateTime::from_millis(0), bson::DateTime::from_millis(0)] }))
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
