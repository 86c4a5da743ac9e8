//! Small helpers the query, update and aggregation languages share: values printed the way
//! MongoDB prints them in error messages, the type name of a possibly missing value, and a
//! MongoDB regular expression turned into a `regex` crate source. This module is a leaf: it
//! depends on `bson` and `value` only, so the languages can all use it without importing one
//! another.

use crate::value;
use bson::{Bson, Document};

/// `null`, `undefined` or missing: the values most operators answer `null` for.
pub(crate) fn nullish(v: &Option<Bson>) -> bool {
    matches!(v, None | Some(Bson::Null) | Some(Bson::Undefined))
}

/// The type name MongoDB prints in messages, with "missing" for a missing value.
pub(crate) fn type_of(v: &Option<Bson>) -> &'static str {
    match v {
        None => "missing",
        Some(v) => value::type_name(v),
    }
}

/// A value as MongoDB prints it in error messages (`{ a: 1, b: "x" }`, `[ 1, 2 ]`).
pub(crate) fn fmt_value(v: &Bson) -> String {
    match v {
        Bson::Double(d) => fmt_double(*d),
        Bson::String(s) => format!("\"{s}\""),
        Bson::Document(d) => fmt_document(d),
        Bson::Array(items) => {
            if items.is_empty() {
                "[]".to_string()
            } else {
                let parts: Vec<String> = items.iter().map(fmt_value).collect();
                format!("[ {} ]", parts.join(", "))
            }
        }
        Bson::Boolean(b) => b.to_string(),
        Bson::Null => "null".to_string(),
        Bson::Undefined => "undefined".to_string(),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Decimal128(d) => d.to_string(),
        Bson::ObjectId(o) => format!("ObjectId('{o}')"),
        Bson::DateTime(d) => format!("new Date({})", d.timestamp_millis()),
        Bson::Timestamp(t) => format!("Timestamp({}, {})", t.time, t.increment),
        Bson::RegularExpression(r) => format!("/{}/{}", r.pattern, r.options),
        Bson::MinKey => "MinKey".to_string(),
        Bson::MaxKey => "MaxKey".to_string(),
        other => other.to_string(),
    }
}

pub(crate) fn fmt_document(d: &Document) -> String {
    if d.is_empty() {
        return "{}".to_string();
    }
    let parts: Vec<String> = d
        .iter()
        .map(|(k, v)| format!("{k}: {}", fmt_value(v)))
        .collect();
    format!("{{ {} }}", parts.join(", "))
}

/// Doubles the way MongoDB prints them: integral values without a fraction, huge and tiny ones in
/// exponent form.
pub(crate) fn fmt_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let abs = d.abs();
    if abs != 0.0 && !(1e-5..1e21).contains(&abs) {
        let s = format!("{d:e}");
        // Rust prints "1e21"; MongoDB prints "1e+21".
        if let Some((m, e)) = s.split_once('e') {
            if e.starts_with('-') {
                return format!("{m}e{e}");
            }
            return format!("{m}e+{e}");
        }
        return s;
    }
    format!("{d}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::bson;

    #[test]
    fn doubles_print_like_mongodb() {
        assert_eq!(fmt_double(2.5), "2.5");
        assert_eq!(fmt_double(10.0), "10");
        assert_eq!(fmt_double(1e30), "1e+30");
        assert_eq!(
            fmt_value(&bson!({ "a": [1, "x"], "b": {} })),
            "{ a: [ 1, \"x\" ], b: {} }"
        );
    }
}
