//! Order-preserving byte encoding of BSON values: `encode(a) < encode(b)` exactly when MongoDB
//! orders `a` before `b`, and values MongoDB treats as equal (1, NumberLong(1), 1.0) encode to
//! the same bytes. Encodings are prefix-free, so compound keys are plain concatenations and a
//! descending field is the bitwise NOT of its encoding.
//!
//! Both regular index keys (`index`) and text index entries (`text`) are built from it, so it
//! sits below both rather than inside `index`.

use crate::value::{canonical_rank, decimal_to_f64};
use bson::spec::BinarySubtype;
use bson::{oid::ObjectId, Binary, Bson, Document, JavaScriptCodeWithScope, Regex, Timestamp};

/// Ends an embedded document or array; below every type tag so shorter sorts first.
const END: u8 = 0x00;

/// The tag byte that starts every value's encoding: its type bracket, so brackets sort apart.
pub(crate) fn type_tag(v: &Bson) -> u8 {
    canonical_rank(v)
}

/// Tag byte of the numeric bracket (for bracket-bounded index ranges).
pub(crate) const NUMBER_TAG: u8 = 4;
/// Tag byte of the string bracket.
pub(crate) const STRING_TAG: u8 = 5;

/// Append the encoding of `v` (tag and body) to `out`.
pub fn encode_value(v: &Bson, out: &mut Vec<u8>) {
    out.push(type_tag(v));
    encode_body(v, out);
}

/// The encoding of one value as a fresh buffer.
pub fn encode(v: &Bson) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(v, &mut out);
    out
}

/// Append the encoding of `v` as a descending key field (every byte inverted).
pub fn encode_value_descending(v: &Bson, out: &mut Vec<u8>) {
    let start = out.len();
    encode_value(v, out);
    invert(&mut out[start..]);
}

/// Flip every byte: reverses the order of prefix-free encodings.
pub(crate) fn invert(bytes: &mut [u8]) {
    for b in bytes {
        *b = !*b;
    }
}

/// Append the escaped form of a string without its terminator: 0x00 becomes 0x00 0xFF so that
/// the terminator 0x00 0x00 sorts below any continuation.
pub(crate) fn push_escaped(s: &[u8], out: &mut Vec<u8>) {
    for &b in s {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
}

fn push_string(s: &str, out: &mut Vec<u8>) {
    push_escaped(s.as_bytes(), out);
    out.extend_from_slice(&[0, 0]);
}

fn push_document(d: &Document, out: &mut Vec<u8>) {
    // Field by field: the value's bracket, then the name, then the value (compare_documents).
    for (name, value) in d {
        out.push(type_tag(value));
        push_string(name, out);
        encode_body(value, out);
    }
    out.push(END);
}

fn encode_body(v: &Bson, out: &mut Vec<u8>) {
    match v {
        Bson::MinKey | Bson::MaxKey | Bson::Null | Bson::Undefined | Bson::DbPointer(_) => {}
        Bson::Int32(i) => push_integer(*i as i64, out),
        Bson::Int64(i) => push_integer(*i, out),
        Bson::Double(d) => push_double(*d, out),
        Bson::Decimal128(d) => push_double(decimal_to_f64(d), out),
        Bson::String(s) | Bson::Symbol(s) => push_string(s, out),
        Bson::Document(d) => push_document(d, out),
        Bson::Array(items) => {
            for item in items {
                encode_value(item, out);
            }
            out.push(END);
        }
        Bson::Binary(b) => {
            out.extend_from_slice(&(b.bytes.len() as u32).to_be_bytes());
            out.push(u8::from(b.subtype));
            out.extend_from_slice(&b.bytes);
        }
        Bson::ObjectId(id) => out.extend_from_slice(&id.bytes()),
        Bson::Boolean(b) => out.push(u8::from(*b)),
        Bson::DateTime(d) => out.extend_from_slice(&flip_sign(d.timestamp_millis())),
        Bson::Timestamp(t) => {
            out.extend_from_slice(&t.time.to_be_bytes());
            out.extend_from_slice(&t.increment.to_be_bytes());
        }
        Bson::RegularExpression(r) => {
            push_string(&r.pattern, out);
            push_string(&r.options, out);
        }
        Bson::JavaScriptCode(code) => push_string(code, out),
        Bson::JavaScriptCodeWithScope(c) => {
            push_string(&c.code, out);
            push_document(&c.scope, out);
        }
    }
}

fn flip_sign(i: i64) -> [u8; 8] {
    ((i as u64) ^ (1 << 63)).to_be_bytes()
}

/// NaN sorts below every other number.
const NUMBER_NAN: u8 = 0x00;
const NUMBER_VALUE: u8 = 0x01;
const CORRECTION_NEGATIVE: u8 = 0x7F;
const CORRECTION_NONE: u8 = 0x80;
const CORRECTION_POSITIVE: u8 = 0x81;

/// Numbers are the nearest double (order-preserving bits) followed by the exact distance of an
/// integer from that double. Rounding to nearest is monotonic, so a smaller double means a
/// smaller number, and equal doubles are told apart exactly by the correction.
fn push_integer(i: i64, out: &mut Vec<u8>) {
    let approx = i as f64;
    let diff = i as i128 - approx as i128;
    push_ordered_double(approx, out);
    push_correction(diff, out);
}

fn push_double(d: f64, out: &mut Vec<u8>) {
    if d.is_nan() {
        out.push(NUMBER_NAN);
        return;
    }
    push_ordered_double(d, out);
    out.push(CORRECTION_NONE);
}

fn push_ordered_double(d: f64, out: &mut Vec<u8>) {
    // -0 and 0 are the same number.
    let d = if d == 0.0 { 0.0 } else { d };
    let bits = d.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    out.push(NUMBER_VALUE);
    out.extend_from_slice(&ordered.to_be_bytes());
}

fn push_correction(diff: i128, out: &mut Vec<u8>) {
    // |diff| is at most half an ulp of a double near 2^63, i.e. 1024.
    match diff {
        0 => out.push(CORRECTION_NONE),
        d if d < 0 => {
            out.push(CORRECTION_NEGATIVE);
            out.extend_from_slice(&((d + 0x8000).clamp(0, 0x7FFF) as u16).to_be_bytes());
        }
        d => {
            out.push(CORRECTION_POSITIVE);
            out.extend_from_slice(&(d.clamp(0, 0xFFFF) as u16).to_be_bytes());
        }
    }
}

/// Split a compound key back into its values (for error messages). `descending[i]` says
/// whether field i was inverted. Numbers come back as the narrowest integer type that holds
/// them (the encoding does not keep the original numeric type); decimals come back as doubles.
pub fn decode_key(key: &[u8], descending: &[bool]) -> Option<Vec<Bson>> {
    let mut values = Vec::with_capacity(descending.len());
    let mut pos = 0;
    for &desc in descending {
        let rest = key.get(pos..)?;
        let mut reader = Reader {
            bytes: rest,
            pos: 0,
            invert: desc,
        };
        values.push(reader.value()?);
        pos += reader.pos;
    }
    (pos == key.len()).then_some(values)
}

/// Where each field of a compound key ends: `ends[i]` is the offset just past field `i`, so
/// field `i` is `key[ends[i - 1]..ends[i]]` (from 0 for the first). `None` when the key does
/// not hold `descending.len()` values.
pub(crate) fn field_ends(key: &[u8], descending: &[bool]) -> Option<Vec<usize>> {
    let mut ends = Vec::with_capacity(descending.len());
    let mut pos = 0;
    for &desc in descending {
        let mut reader = Reader {
            bytes: key.get(pos..)?,
            pos: 0,
            invert: desc,
        };
        reader.skip_value()?;
        pos += reader.pos;
        ends.push(pos);
    }
    Some(ends)
}

/// The type tag of the value whose encoding `bytes` starts with (`descending`: inverted).
pub(crate) fn tag_of(bytes: &[u8], descending: bool) -> Option<u8> {
    let b = *bytes.first()?;
    Some(if descending { !b } else { b })
}

/// Decode a single value's encoding.
pub fn decode(bytes: &[u8]) -> Option<Bson> {
    let values = decode_key(bytes, &[false])?;
    values.into_iter().next()
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    invert: bool,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(if self.invert { !b } else { b })
    }

    fn peek(&self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        Some(if self.invert { !b } else { b })
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut out = [0u8; N];
        for slot in out.iter_mut() {
            *slot = self.byte()?;
        }
        Some(out)
    }

    fn raw(&mut self, n: usize) -> Option<Vec<u8>> {
        (0..n).map(|_| self.byte()).collect()
    }

    fn string(&mut self) -> Option<String> {
        let mut raw = Vec::new();
        loop {
            let b = self.byte()?;
            if b == 0 {
                match self.byte()? {
                    0 => break,
                    0xFF => raw.push(0),
                    _ => return None,
                }
            } else {
                raw.push(b);
            }
        }
        String::from_utf8(raw).ok()
    }

    fn document(&mut self) -> Option<Document> {
        let mut d = Document::new();
        loop {
            let tag = self.byte()?;
            if tag == END {
                return Some(d);
            }
            let name = self.string()?;
            let value = self.body(tag)?;
            d.insert(name, value);
        }
    }

    fn value(&mut self) -> Option<Bson> {
        let tag = self.byte()?;
        self.body(tag)
    }

    /// Move past `n` bytes, if there are that many.
    fn advance(&mut self, n: usize) -> Option<()> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())?;
        self.pos = end;
        Some(())
    }

    /// Move past one value's encoding without building it (see [`field_ends`]): what
    /// [`Reader::value`] reads, not one byte more or less.
    fn skip_value(&mut self) -> Option<()> {
        let tag = self.byte()?;
        self.skip_body(tag)
    }

    fn skip_string(&mut self) -> Option<()> {
        loop {
            if self.byte()? == 0 {
                match self.byte()? {
                    0 => return Some(()),
                    0xFF => {}
                    _ => return None,
                }
            }
        }
    }

    fn skip_document(&mut self) -> Option<()> {
        loop {
            let tag = self.byte()?;
            if tag == END {
                return Some(());
            }
            self.skip_string()?;
            self.skip_body(tag)?;
        }
    }

    fn skip_body(&mut self, tag: u8) -> Option<()> {
        match tag {
            1 | 2 | 3 | 14 | 17 => Some(()),
            4 => match self.byte()? {
                NUMBER_NAN => Some(()),
                NUMBER_VALUE => {
                    self.advance(8)?;
                    match self.byte()? {
                        CORRECTION_NONE => Some(()),
                        CORRECTION_NEGATIVE | CORRECTION_POSITIVE => self.advance(2),
                        _ => None,
                    }
                }
                _ => None,
            },
            5 | 15 => self.skip_string(),
            6 => self.skip_document(),
            7 => {
                while self.peek()? != END {
                    self.skip_value()?;
                }
                self.byte().map(|_| ())
            }
            8 => {
                let len = u32::from_be_bytes(self.array::<4>()?) as usize;
                self.byte()?;
                self.advance(len)
            }
            9 => self.advance(12),
            10 => self.advance(1),
            11 | 12 => self.advance(8),
            13 => {
                self.skip_string()?;
                self.skip_string()
            }
            16 => {
                self.skip_string()?;
                self.skip_document()
            }
            _ => None,
        }
    }

    fn body(&mut self, tag: u8) -> Option<Bson> {
        Some(match tag {
            1 => Bson::MinKey,
            2 => Bson::Undefined,
            3 => Bson::Null,
            4 => self.number()?,
            5 => Bson::String(self.string()?),
            6 => Bson::Document(self.document()?),
            7 => {
                let mut items = Vec::new();
                while self.peek()? != END {
                    items.push(self.value()?);
                }
                self.byte()?;
                Bson::Array(items)
            }
            8 => {
                let len = u32::from_be_bytes(self.array::<4>()?) as usize;
                let subtype = BinarySubtype::from(self.byte()?);
                let bytes = self.raw(len)?;
                Bson::Binary(Binary { subtype, bytes })
            }
            9 => Bson::ObjectId(ObjectId::from_bytes(self.array::<12>()?)),
            10 => Bson::Boolean(self.byte()? != 0),
            11 => {
                let raw = u64::from_be_bytes(self.array::<8>()?) ^ (1 << 63);
                Bson::DateTime(bson::DateTime::from_millis(raw as i64))
            }
            12 => {
                let time = u32::from_be_bytes(self.array::<4>()?);
                let increment = u32::from_be_bytes(self.array::<4>()?);
                Bson::Timestamp(Timestamp { time, increment })
            }
            13 => {
                let pattern = self.string()?;
                let options = self.string()?;
                Bson::RegularExpression(Regex { pattern, options })
            }
            // A DBPointer cannot be rebuilt from its (empty) body; render it as null.
            14 => Bson::Null,
            15 => Bson::JavaScriptCode(self.string()?),
            16 => {
                let code = self.string()?;
                let scope = self.document()?;
                Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope { code, scope })
            }
            17 => Bson::MaxKey,
            _ => return None,
        })
    }

    fn number(&mut self) -> Option<Bson> {
        match self.byte()? {
            NUMBER_NAN => Some(Bson::Double(f64::NAN)),
            NUMBER_VALUE => {
                let ordered = u64::from_be_bytes(self.array::<8>()?);
                let bits = if ordered >> 63 == 1 {
                    ordered & !(1 << 63)
                } else {
                    !ordered
                };
                let d = f64::from_bits(bits);
                let diff: i128 = match self.byte()? {
                    CORRECTION_NONE => 0,
                    CORRECTION_NEGATIVE => u16::from_be_bytes(self.array::<2>()?) as i128 - 0x8000,
                    CORRECTION_POSITIVE => u16::from_be_bytes(self.array::<2>()?) as i128,
                    _ => return None,
                };
                Some(narrowest_number(d, diff))
            }
            _ => None,
        }
    }
}

fn narrowest_number(d: f64, diff: i128) -> Bson {
    let integral = d.is_finite() && d.fract() == 0.0 && d.abs() <= 9.3e18;
    if integral {
        let exact = d as i128 + diff;
        if let Ok(i) = i32::try_from(exact) {
            return Bson::Int32(i);
        }
        if let Ok(i) = i64::try_from(exact) {
            return Bson::Int64(i);
        }
    }
    Bson::Double(d)
}

/// Render a value the way MongoDB prints BSON in messages (`"x"`, `ObjectId('…')`, `{ a: 1 }`).
pub(crate) fn render(v: &Bson) -> String {
    let mut s = String::new();
    render_into(v, &mut s);
    s
}

/// Render a document the way MongoDB prints BSON in messages: `{ a: 1, b: "x" }`.
pub(crate) fn render_document(d: &Document) -> String {
    let mut s = String::new();
    render_doc_into(d, &mut s);
    s
}

fn render_doc_into(d: &Document, s: &mut String) {
    if d.is_empty() {
        s.push_str("{}");
        return;
    }
    s.push_str("{ ");
    for (i, (k, v)) in d.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(k);
        s.push_str(": ");
        render_into(v, s);
    }
    s.push_str(" }");
}

fn render_string(text: &str, s: &mut String) {
    s.push('"');
    for c in text.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c => s.push(c),
        }
    }
    s.push('"');
}

/// A double as MongoDB prints it: integral values keep a `.0`, infinities are `inf.0`.
pub(crate) fn render_double(d: f64) -> String {
    if d.is_nan() {
        "nan.0".into()
    } else if d.is_infinite() {
        if d > 0.0 { "inf.0" } else { "-inf.0" }.into()
    } else if d.fract() == 0.0 && d.abs() < 1e15 {
        format!("{d:.1}")
    } else {
        format!("{d}")
    }
}

fn render_into(v: &Bson, s: &mut String) {
    use std::fmt::Write;
    match v {
        Bson::Double(d) => s.push_str(&render_double(*d)),
        Bson::Int32(i) => {
            let _ = write!(s, "{i}");
        }
        Bson::Int64(i) => {
            let _ = write!(s, "{i}");
        }
        Bson::Decimal128(d) => {
            let _ = write!(s, "NumberDecimal(\"{d}\")");
        }
        Bson::String(t) | Bson::Symbol(t) => render_string(t, s),
        Bson::Document(d) => render_doc_into(d, s),
        Bson::Array(items) => {
            if items.is_empty() {
                s.push_str("[]");
                return;
            }
            s.push_str("[ ");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                render_into(item, s);
            }
            s.push_str(" ]");
        }
        Bson::ObjectId(id) => {
            let _ = write!(s, "ObjectId('{}')", id.to_hex());
        }
        Bson::Boolean(b) => {
            let _ = write!(s, "{b}");
        }
        Bson::DateTime(d) => {
            let _ = write!(s, "new Date({})", d.timestamp_millis());
        }
        Bson::Null => s.push_str("null"),
        Bson::Undefined => s.push_str("undefined"),
        Bson::MinKey => s.push_str("MinKey"),
        Bson::MaxKey => s.push_str("MaxKey"),
        Bson::Timestamp(t) => {
            let _ = write!(s, "Timestamp({}, {})", t.time, t.increment);
        }
        Bson::RegularExpression(r) => {
            let _ = write!(s, "/{}/{}", r.pattern, r.options);
        }
        Bson::Binary(b) => {
            let _ = write!(s, "BinData({}, {})", u8::from(b.subtype), hex(&b.bytes));
        }
        Bson::JavaScriptCode(code) => {
            let _ = write!(s, "function: {code}");
        }
        Bson::JavaScriptCodeWithScope(c) => {
            let _ = write!(s, "function: {}", c.code);
        }
        Bson::DbPointer(_) => s.push_str("DBRef()"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::compare;
    use bson::{doc, Decimal128};
    use std::cmp::Ordering;

    fn sample_values() -> Vec<Bson> {
        let oid = |n: u8| Bson::ObjectId(ObjectId::from_bytes([n; 12]));
        vec![
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Double(f64::NEG_INFINITY),
            Bson::Int64(i64::MIN),
            Bson::Double(-1e300),
            Bson::Int32(i32::MIN),
            Bson::Int32(-5),
            Bson::Double(-4.5),
            Bson::Double(-0.0),
            Bson::Int32(0),
            Bson::Double(1e-300),
            Bson::Double(0.5),
            Bson::Int32(1),
            Bson::Int64(1),
            Bson::Double(1.0),
            Bson::Decimal128("1".parse::<Decimal128>().unwrap()),
            Bson::Double(1.5),
            Bson::Decimal128("2.5".parse::<Decimal128>().unwrap()),
            Bson::Int32(i32::MAX),
            Bson::Int64(9_007_199_254_740_991),
            Bson::Double(9_007_199_254_740_992.0),
            Bson::Int64(9_007_199_254_740_992),
            Bson::Int64(9_007_199_254_740_993),
            Bson::Double(9_007_199_254_740_994.0),
            Bson::Int64(9_007_199_254_740_995),
            Bson::Int64(i64::MAX - 1),
            Bson::Int64(i64::MAX),
            Bson::Double(9.223_372_036_854_776e18),
            Bson::Double(1e300),
            Bson::Double(f64::INFINITY),
            Bson::String(String::new()),
            Bson::String("\u{0}".into()),
            Bson::String("\u{0}a".into()),
            Bson::String("a".into()),
            Bson::Symbol("a".into()),
            Bson::String("a\u{0}".into()),
            Bson::String("a\u{0}b".into()),
            Bson::String("ab".into()),
            Bson::String("b".into()),
            Bson::String("é".into()),
            Bson::Document(doc! {}),
            Bson::Document(doc! { "a": Bson::Null }),
            Bson::Document(doc! { "b": 1 }),
            Bson::Document(doc! { "a": 1 }),
            Bson::Document(doc! { "a": 1.0 }),
            Bson::Document(doc! { "a": 1, "b": 2 }),
            Bson::Document(doc! { "a": 2 }),
            Bson::Document(doc! { "a": "x" }),
            Bson::Document(doc! { "a": { "b": [1, 2] } }),
            Bson::Array(vec![]),
            Bson::Array(vec![Bson::Null]),
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)]),
            Bson::Array(vec![Bson::Int32(1), Bson::String("a".into())]),
            Bson::Array(vec![Bson::Int32(2)]),
            Bson::Array(vec![Bson::String("a".into())]),
            Bson::Array(vec![Bson::Array(vec![])]),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![9, 9],
            }),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![1, 2, 3],
            }),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Uuid,
                bytes: vec![0, 0, 0],
            }),
            oid(0),
            oid(1),
            oid(255),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(bson::DateTime::from_millis(-1_000)),
            Bson::DateTime(bson::DateTime::from_millis(0)),
            Bson::DateTime(bson::DateTime::from_millis(1_700_000_000_000)),
            Bson::Timestamp(Timestamp {
                time: 1,
                increment: 5,
            }),
            Bson::Timestamp(Timestamp {
                time: 2,
                increment: 0,
            }),
            Bson::RegularExpression(Regex {
                pattern: "a".into(),
                options: "".into(),
            }),
            Bson::RegularExpression(Regex {
                pattern: "a".into(),
                options: "i".into(),
            }),
            Bson::RegularExpression(Regex {
                pattern: "b".into(),
                options: "".into(),
            }),
            Bson::JavaScriptCode("f()".into()),
            Bson::JavaScriptCode("g()".into()),
            Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
                code: "f()".into(),
                scope: doc! { "x": 1 },
            }),
            Bson::MaxKey,
        ]
    }

    #[test]
    fn byte_order_matches_mongodb_value_order_for_every_pair() {
        let values = sample_values();
        for a in &values {
            for b in &values {
                let expected = compare(a, b);
                let actual = encode(a).cmp(&encode(b));
                assert_eq!(actual, expected, "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn descending_encoding_reverses_order_for_every_pair() {
        let values = sample_values();
        let desc = |v: &Bson| {
            let mut out = Vec::new();
            encode_value_descending(v, &mut out);
            out
        };
        for a in &values {
            for b in &values {
                assert_eq!(
                    desc(a).cmp(&desc(b)),
                    compare(a, b).reverse(),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }

    #[test]
    fn compound_keys_order_field_by_field() {
        let values = sample_values();
        let key = |x: &Bson, y: &Bson| {
            let mut out = Vec::new();
            encode_value(x, &mut out);
            encode_value_descending(y, &mut out);
            out
        };
        for a in values.iter().step_by(3) {
            for b in values.iter().step_by(2) {
                for c in values.iter().step_by(5) {
                    for d in values.iter().step_by(7) {
                        let expected = compare(a, c).then_with(|| compare(b, d).reverse());
                        assert_eq!(key(a, b).cmp(&key(c, d)), expected);
                    }
                }
            }
        }
    }

    #[test]
    fn equal_numbers_of_different_types_share_one_key() {
        assert_eq!(encode(&Bson::Int32(1)), encode(&Bson::Int64(1)));
        assert_eq!(encode(&Bson::Int32(1)), encode(&Bson::Double(1.0)));
        assert_eq!(encode(&Bson::Double(-0.0)), encode(&Bson::Int32(0)));
        assert_ne!(
            encode(&Bson::Int64(9_007_199_254_740_993)),
            encode(&Bson::Double(9_007_199_254_740_992.0))
        );
        assert_eq!(
            encode(&Bson::Int64(9_007_199_254_740_992)),
            encode(&Bson::Double(9_007_199_254_740_992.0))
        );
    }

    #[test]
    fn keys_decode_back_to_their_values() {
        for v in sample_values() {
            let decoded = decode(&encode(&v)).expect("decodes");
            assert_eq!(
                compare(&decoded, &v),
                Ordering::Equal,
                "{v:?} -> {decoded:?}"
            );
        }
        let mut key = Vec::new();
        encode_value(&Bson::String("x".into()), &mut key);
        encode_value_descending(&Bson::Int64(9_007_199_254_740_993), &mut key);
        assert_eq!(
            decode_key(&key, &[false, true]),
            Some(vec![
                Bson::String("x".into()),
                Bson::Int64(9_007_199_254_740_993)
            ])
        );
        assert_eq!(decode_key(&key, &[false]), None);
    }

    #[test]
    fn rendering_follows_the_mongodb_shell_style() {
        let oid = ObjectId::from_bytes([0xab; 12]);
        let d = doc! { "name": "x\"y", "n": 1, "f": 1.5, "g": 2.0, "id": oid, "arr": [1, "a"], "e": {} };
        assert_eq!(
            render_document(&d),
            "{ name: \"x\\\"y\", n: 1, f: 1.5, g: 2.0, id: ObjectId('abababababababababababab'), arr: [ 1, \"a\" ], e: {} }"
        );
    }
}

#[cfg(test)]
mod field_ends_tests {
    use super::*;
    use bson::doc;

    #[test]
    fn field_ends_skip_exactly_what_decoding_reads() {
        let values = vec![
            Bson::MinKey,
            Bson::MaxKey,
            Bson::Null,
            Bson::Undefined,
            Bson::Int32(-7),
            Bson::Int64(i64::MAX),
            Bson::Double(2.5),
            Bson::Double(f64::NAN),
            Bson::Double(9_007_199_254_740_993.0),
            Bson::Int64(9_007_199_254_740_993),
            Bson::Int64(-9_007_199_254_740_993),
            Bson::String("a\0b".into()),
            Bson::String(String::new()),
            Bson::Document(doc! { "x": [1, "y", { "z": null }], "w": true }),
            Bson::Array(vec![]),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![0, 1, 2],
            }),
            Bson::ObjectId(ObjectId::from_bytes([7; 12])),
            Bson::Boolean(false),
            Bson::DateTime(bson::DateTime::from_millis(-5)),
            Bson::Timestamp(Timestamp {
                time: 1,
                increment: 2,
            }),
            Bson::RegularExpression(Regex {
                pattern: "^a".into(),
                options: "i".into(),
            }),
            Bson::JavaScriptCode("f()".into()),
            Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
                code: "g()".into(),
                scope: doc! { "k": 1 },
            }),
        ];
        for (i, a) in values.iter().enumerate() {
            let b = &values[(i * 7 + 3) % values.len()];
            for descending in [[false, true], [true, false], [false, false], [true, true]] {
                let mut key = Vec::new();
                for (value, &desc) in [a, b].into_iter().zip(&descending) {
                    if desc {
                        encode_value_descending(value, &mut key);
                    } else {
                        encode_value(value, &mut key);
                    }
                }
                let first = if descending[0] {
                    let mut one = Vec::new();
                    encode_value_descending(a, &mut one);
                    one.len()
                } else {
                    encode(a).len()
                };
                assert_eq!(
                    field_ends(&key, &descending),
                    Some(vec![first, key.len()]),
                    "{a} {b} {descending:?}"
                );
                assert!(field_ends(&key[..key.len() - 1], &descending).is_none());
            }
        }
    }
}
