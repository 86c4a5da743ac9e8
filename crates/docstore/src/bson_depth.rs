//! The one check every path that takes BSON from outside goes through before anything recurses
//! over it: wire messages, dump files being restored, journal records and snapshots being
//! recovered, and documents about to be stored. It validates every element and refuses nesting
//! deeper than [`MAX_BSON_DEPTH`]; decoding (the driver's and ours) recurses once per level, so
//! without it a crafted document a few thousand levels deep overflows the stack and aborts the
//! process instead of being refused.

use bson::{Bson, Document, RawBsonRef, RawDocument};
use std::fmt;

/// Deepest nesting accepted anywhere (MongoDB's default `maxBSONDepth`): a document at the top
/// level is depth 1, each embedded document or array one more. The same limit on every path,
/// so whatever the wire lets a client store loads again from the journal, a snapshot or a dump.
pub(crate) const MAX_BSON_DEPTH: usize = 200;

/// Why BSON bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BsonError {
    /// Not valid BSON (a length, a type byte, a string that is not UTF-8 …).
    Invalid(String),
    /// Valid, but nested deeper than [`MAX_BSON_DEPTH`].
    TooDeep,
}

impl fmt::Display for BsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BsonError::Invalid(m) => f.write_str(m),
            BsonError::TooDeep => write!(
                f,
                "document nested more than {MAX_BSON_DEPTH} levels deep (the most MongoDB and \
                 docstore accept)"
            ),
        }
    }
}

fn invalid(e: bson::raw::Error) -> BsonError {
    BsonError::Invalid(e.to_string())
}

/// Check every element of `raw` (lengths, types, UTF-8 of keys and strings, embedded documents
/// and arrays, an array's own keys included) as fully as decoding would, and its depth, without
/// building anything. The walk stops one level past the limit, so its own recursion is bounded.
pub(crate) fn check(raw: &RawDocument) -> Result<(), BsonError> {
    check_at(raw, 1)
}

fn check_at(doc: &RawDocument, depth: usize) -> Result<(), BsonError> {
    if depth > MAX_BSON_DEPTH {
        return Err(BsonError::TooDeep);
    }
    for element in doc {
        let (_, value) = element.map_err(invalid)?;
        match value {
            RawBsonRef::Document(d) => check_at(d, depth + 1)?,
            // Walked as the document it is, so that its keys are checked too.
            RawBsonRef::Array(a) => check_at(
                RawDocument::from_bytes(a.as_bytes()).map_err(invalid)?,
                depth + 1,
            )?,
            RawBsonRef::JavaScriptCodeWithScope(c) => check_at(c.scope, depth + 1)?,
            _ => {}
        }
    }
    Ok(())
}

/// Decode exactly `bytes` as one document, after [`check`].
pub(crate) fn decode(bytes: &[u8]) -> Result<Document, BsonError> {
    decode_raw(RawDocument::from_bytes(bytes).map_err(invalid)?)
}

/// [`decode`] of a document already framed.
pub(crate) fn decode_raw(raw: &RawDocument) -> Result<Document, BsonError> {
    check(raw)?;
    Document::try_from(raw).map_err(invalid)
}

/// Whether a document built in memory (an update's result, say) stays within
/// [`MAX_BSON_DEPTH`], so that it can be stored and read back. Stops one level past the limit.
pub(crate) fn within_limit(doc: &Document) -> bool {
    fn doc_within(doc: &Document, depth: usize) -> bool {
        depth <= MAX_BSON_DEPTH && doc.values().all(|v| value_within(v, depth))
    }
    fn value_within(value: &Bson, depth: usize) -> bool {
        match value {
            Bson::Document(d) => doc_within(d, depth + 1),
            Bson::Array(items) => {
                depth < MAX_BSON_DEPTH && items.iter().all(|v| value_within(v, depth + 1))
            }
            Bson::JavaScriptCodeWithScope(c) => doc_within(&c.scope, depth + 1),
            _ => true,
        }
    }
    doc_within(doc, 1)
}

/// `depth` levels of `{a: …}` built as bytes directly (no recursion anywhere), so that a
/// depth far past what any recursive encoder survives can be tested.
#[cfg(test)]
pub(crate) fn nested_bytes(depth: usize) -> Vec<u8> {
    // Each level is: int32 length, 0x03 'a' 0x00, <inner>, 0x00. The innermost is {}.
    let mut lengths = vec![5usize; depth];
    for level in (0..depth.saturating_sub(1)).rev() {
        lengths[level] = lengths[level + 1] + 8;
    }
    let mut out = Vec::with_capacity(lengths[0]);
    for &len in &lengths[..depth - 1] {
        out.extend_from_slice(&(len as i32).to_le_bytes());
        out.extend_from_slice(&[0x03, b'a', 0]);
    }
    out.extend_from_slice(&[5, 0, 0, 0, 0]);
    out.extend(std::iter::repeat_n(0u8, depth - 1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn nested(depth: usize) -> Document {
        let mut d = doc! { "leaf": 1 };
        for _ in 1..depth {
            d = doc! { "a": d };
        }
        d
    }

    fn bytes_of(doc: &Document) -> Vec<u8> {
        let mut v = Vec::new();
        doc.to_writer(&mut v).unwrap();
        v
    }

    #[test]
    fn the_limit_itself_is_accepted_and_one_more_level_is_not() {
        assert_eq!(
            decode(&bytes_of(&nested(MAX_BSON_DEPTH))).unwrap(),
            nested(MAX_BSON_DEPTH)
        );
        assert_eq!(
            decode(&bytes_of(&nested(MAX_BSON_DEPTH + 1))),
            Err(BsonError::TooDeep)
        );
        assert!(within_limit(&nested(MAX_BSON_DEPTH)));
        assert!(!within_limit(&nested(MAX_BSON_DEPTH + 1)));
    }

    #[test]
    fn arrays_count_as_a_level() {
        let mut v = Bson::Int32(1);
        for _ in 0..MAX_BSON_DEPTH {
            v = Bson::Array(vec![v]);
        }
        let d = doc! { "a": v };
        assert_eq!(decode(&bytes_of(&d)), Err(BsonError::TooDeep));
        assert!(!within_limit(&d));
    }

    #[test]
    fn a_hundred_thousand_levels_are_refused_without_overflowing_the_stack() {
        let bytes = nested_bytes(100_000);
        assert!(
            RawDocument::from_bytes(&bytes).is_ok(),
            "the test builds valid framing"
        );
        assert_eq!(decode(&bytes), Err(BsonError::TooDeep));
        let shallow = nested_bytes(3);
        assert_eq!(decode(&shallow).unwrap(), doc! { "a": { "a": {} } });
    }

    #[test]
    fn invalid_bson_is_reported_as_invalid() {
        // Declares an int32 element (0x10) but ends before its value.
        let bad = [11u8, 0, 0, 0, 0x10, b'a', 0, 1, 0, 0, 0];
        assert!(matches!(decode(&bad), Err(BsonError::Invalid(_))));
        assert!(matches!(
            decode(&[5, 0, 0, 0, 1]),
            Err(BsonError::Invalid(_))
        ));
    }
}
