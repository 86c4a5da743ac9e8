//! Values rendered the way mongod's `BSONElement::toString()` renders them, because update error
//! messages embed values (`Cannot create field 'b' in element {a: 1}`) and clients compare them.

use bson::{Bson, Document};
use std::fmt::Write;

/// `name: value`, as mongod prints one element.
pub(super) fn element(name: &str, value: &Bson) -> String {
    format!("{name}: {}", value_string(value))
}

/// A whole document: `{ a: 1, b: "x" }`, or `{}` when empty.
pub(super) fn document(doc: &Document) -> String {
    if doc.is_empty() {
        return "{}".to_string();
    }
    let fields: Vec<String> = doc.iter().map(|(k, v)| element(k, v)).collect();
    format!("{{ {} }}", fields.join(", "))
}

/// One value without its field name.
pub(super) fn value_string(value: &Bson) -> String {
    match value {
        Bson::Double(d) => double_nice(*d),
        Bson::String(s) | Bson::Symbol(s) => format!("\"{s}\""),
        Bson::Document(d) => document(d),
        Bson::Array(items) => {
            if items.is_empty() {
                "[]".to_string()
            } else {
                let parts: Vec<String> = items.iter().map(value_string).collect();
                format!("[ {} ]", parts.join(", "))
            }
        }
        Bson::Binary(b) => {
            let mut hex = String::with_capacity(b.bytes.len() * 2);
            for byte in &b.bytes {
                let _ = write!(hex, "{byte:02X}");
            }
            format!("BinData({}, {hex})", u8::from(b.subtype))
        }
        Bson::Undefined => "undefined".to_string(),
        Bson::ObjectId(oid) => format!("ObjectId('{}')", oid.to_hex()),
        Bson::Boolean(b) => b.to_string(),
        Bson::DateTime(dt) => format!("new Date({})", dt.timestamp_millis()),
        Bson::Null => "null".to_string(),
        Bson::RegularExpression(re) => format!("/{}/{}", re.pattern, re.options),
        Bson::DbPointer(_) => "DBRef(...)".to_string(),
        Bson::JavaScriptCode(code) => code.clone(),
        Bson::JavaScriptCodeWithScope(c) => {
            format!("CodeWScope( {}, {})", c.code, document(&c.scope))
        }
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Timestamp(ts) => format!("Timestamp({}, {})", ts.time, ts.increment),
        Bson::Decimal128(d) => format!("NumberDecimal(\"{d}\")"),
        Bson::MinKey => "MinKey".to_string(),
        Bson::MaxKey => "MaxKey".to_string(),
    }
}

/// A number as mongod's SafeNum debug string, used in overflow messages.
pub(super) fn number_debug(value: &Bson) -> String {
    match value {
        Bson::Int32(i) => format!("(NumberInt){i}"),
        Bson::Int64(i) => format!("(NumberLong){i}"),
        Bson::Double(d) => format!("(NumberDouble){}", double_nice(*d)),
        Bson::Decimal128(d) => format!("(NumberDecimal){d}"),
        other => value_string(other),
    }
}

/// C's `%.16g`, followed by `.0` when the text has no '.', 'E' or 'N' (mongod's
/// `appendDoubleNice`), so `1.0` prints as `1.0` and `1.5` as `1.5`.
fn double_nice(d: f64) -> String {
    let mut text = format_g16(d);
    if !text.contains('.') && !text.contains('E') && !text.contains('N') {
        text.push_str(".0");
    }
    text
}

fn format_g16(d: f64) -> String {
    if d.is_nan() {
        return "nan".to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Scientific form with 16 significant digits gives the decimal exponent exactly.
    let sci = format!("{d:.15e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..16).contains(&exponent) {
        let mantissa = trim_fraction(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    } else {
        let decimals = (15 - exponent).max(0) as usize;
        trim_fraction(&format!("{d:.decimals$}")).to_string()
    }
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn doubles_print_like_mongod() {
        assert_eq!(value_string(&Bson::Double(1.0)), "1.0");
        assert_eq!(value_string(&Bson::Double(1.5)), "1.5");
        assert_eq!(value_string(&Bson::Double(0.1)), "0.1");
        assert_eq!(value_string(&Bson::Double(-2.25)), "-2.25");
        assert_eq!(value_string(&Bson::Double(1e20)), "1e+20.0");
    }

    #[test]
    fn documents_and_arrays_print_with_inner_spaces() {
        let d = doc! { "a": 1, "b": "x", "c": [1, { "d": true }], "e": {} , "f": [] };
        assert_eq!(
            document(&d),
            "{ a: 1, b: \"x\", c: [ 1, { d: true } ], e: {}, f: [] }"
        );
        assert_eq!(element("a", &Bson::Int32(1)), "a: 1");
    }
}
