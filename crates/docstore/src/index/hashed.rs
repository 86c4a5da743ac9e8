//! MongoDB's hash of a BSON value for hashed indexes (`{field: "hashed"}`): the first 8 bytes,
//! read little-endian, of an MD5 over the seed (0) and the value's canonical type and bytes,
//! numbers squashed to 64-bit integers first, so `2`, `2.5` and `NumberLong(2)` share a hash.
//! The same values as mongod's `BSONElementHasher::hash64`, so a hashed index here holds the
//! keys mongod would hold (and `explain` shows the same bounds).

use bson::{Bson, Document};
use md5::{Digest, Md5};

/// The hash of `value` as a hashed index stores it (missing fields are hashed as null).
pub(crate) fn hash_value(value: &Bson) -> i64 {
    let mut md5 = Md5::new();
    md5.update(0i32.to_le_bytes()); // the default hash seed
    add_element(&mut md5, None, value);
    let digest = md5.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first)
}

/// MongoDB's canonical type of a value (numbers share one, as do strings and symbols).
fn canonical_type(value: &Bson) -> i32 {
    match value {
        Bson::MinKey => -1,
        Bson::Undefined => 0,
        Bson::Null => 5,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 10,
        Bson::String(_) | Bson::Symbol(_) => 15,
        Bson::Document(_) => 20,
        Bson::Array(_) => 25,
        Bson::Binary(_) => 30,
        Bson::ObjectId(_) => 35,
        Bson::Boolean(_) => 40,
        Bson::DateTime(_) => 45,
        Bson::Timestamp(_) => 47,
        Bson::RegularExpression(_) => 50,
        Bson::DbPointer(_) => 55,
        Bson::JavaScriptCode(_) => 60,
        Bson::JavaScriptCodeWithScope(_) => 65,
        Bson::MaxKey => 127,
    }
}

/// A number as the 64-bit integer mongod hashes: truncated toward zero, saturating at the
/// int64 limits, NaN as 0.
fn squashed(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        // `as` truncates toward zero, saturates, and maps NaN to 0: mongod's rule.
        Bson::Double(d) => Some(*d as i64),
        Bson::Decimal128(_) => crate::value::to_f64(value).map(|d| d as i64),
        _ => None,
    }
}

/// The bytes of a value as BSON stores it after the field name.
fn value_bytes(value: &Bson) -> Vec<u8> {
    let mut doc = Document::new();
    doc.insert("x", value.clone());
    let mut bytes = Vec::new();
    if doc.to_writer(&mut bytes).is_err() {
        return Vec::new();
    }
    // int32 length, type byte, "x\0" ... trailing 0.
    bytes
        .get(4 + 1 + 2..bytes.len().saturating_sub(1))
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

fn add_element(md5: &mut Md5, name: Option<&str>, value: &Bson) {
    md5.update(canonical_type(value).to_le_bytes());
    if let Some(name) = name {
        md5.update(name.as_bytes());
        md5.update([0u8]);
    }
    match value {
        Bson::Document(d) => add_fields(md5, d.iter().map(|(k, v)| (k.clone(), v))),
        Bson::Array(items) => add_fields(
            md5,
            items.iter().enumerate().map(|(i, v)| (i.to_string(), v)),
        ),
        Bson::JavaScriptCodeWithScope(c) => {
            // The code string as BSON stores it (length, bytes, NUL), then the scope's fields.
            md5.update(((c.code.len() + 1) as i32).to_le_bytes());
            md5.update(c.code.as_bytes());
            md5.update([0u8]);
            add_fields(md5, c.scope.iter().map(|(k, v)| (k.clone(), v)));
        }
        v => match squashed(v) {
            Some(n) => md5.update(n.to_le_bytes()),
            None => md5.update(value_bytes(v)),
        },
    }
}

/// Each field of an embedded document or array, then the end-of-object marker (canonical type
/// 0, no name, no value).
fn add_fields<'a>(md5: &mut Md5, fields: impl Iterator<Item = (String, &'a Bson)>) {
    for (name, v) in fields {
        add_element(md5, Some(&name), v);
    }
    md5.update(0i32.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::hash_value;
    use bson::{bson, oid::ObjectId, Bson};

    /// Test vectors from mongod's own hasher tests (`hasher_test.cpp`).
    #[test]
    fn matches_mongods_test_vectors() {
        let cases: Vec<(Bson, i64)> = vec![
            (Bson::Int32(42), -944302157085130861),
            (Bson::Double(42.123), -944302157085130861),
            (Bson::Int64(42), -944302157085130861),
            (Bson::Int32(0), 4854801880128277513),
            (Bson::Double(f64::NAN), 4854801880128277513),
            (Bson::Int32(1), 5902408780260971510),
            (Bson::Double(-1.789), 1140205862565771219),
            (Bson::Double(f64::MAX), 921523596458303250),
            (Bson::Int64(i64::MIN), 4532067210535695462),
            (Bson::MinKey, 7961148599568647290),
            (Bson::MaxKey, 5504842513779440750),
            (Bson::Undefined, 40158834000849533),
            (Bson::Null, 2338878944348059895),
            (Bson::String("abc".into()), 8478485326885698097),
            (Bson::String(String::new()), 2049396243249673340),
            (
                bson!({ "a": "abc", "b": Bson::Int64(123) }),
                4771603801758380216,
            ),
            (bson!({}), 7980500913326740417),
            (bson!(["bar", "baz", "qux"]), -2938911267422831539),
            (bson!([]), 8849948234993459283),
            (
                Bson::ObjectId(ObjectId::parse_str("010203040506070809101112").unwrap()),
                -5588663249627035708,
            ),
            (Bson::Boolean(true), 6405873908747105701),
            (Bson::Boolean(false), 6289544573401934092),
            (
                Bson::DateTime(bson::DateTime::from_millis(0x5566778811223344)),
                4476222765095560467,
            ),
            (
                Bson::RegularExpression(bson::Regex {
                    pattern: "mongodb".into(),
                    options: String::new(),
                }),
                -7275792090268217043,
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(hash_value(&value), expected, "{value:?}");
        }
    }
}
