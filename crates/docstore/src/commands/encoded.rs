//! Replies written as BSON straight from stored bytes: a find whose results fit in its first
//! batch answers `{cursor: {firstBatch: [...], id: 0, ns}, ok: 1.0}` with each document copied
//! as stored (or as its projection encoded), instead of decoding every document into a
//! `bson::Document` only to encode it again for the wire.

use crate::cursor::{DEFAULT_FIRST_BATCH, MAX_BATCH_BYTES};
use crate::stored::StoredDoc;

const DOUBLE: u8 = 0x01;
const STRING: u8 = 0x02;
const DOCUMENT: u8 = 0x03;
const ARRAY: u8 = 0x04;
const INT64: u8 = 0x12;

/// Whether `docs` all go in a first batch of at most `batch_size` documents (the cursor
/// manager's rule: a batch stops at the count, or before passing the byte cap unless empty),
/// so the cursor is exhausted by it and no cursor stays open.
pub(crate) fn fit_one_batch(docs: &[StoredDoc], batch_size: Option<usize>) -> bool {
    docs.len() <= batch_size.unwrap_or(DEFAULT_FIRST_BATCH)
        && (docs.len() <= 1 || docs.iter().map(StoredDoc::len).sum::<usize>() <= MAX_BATCH_BYTES)
}

/// `{cursor: {firstBatch: docs, id: 0i64, ns}, ok: 1.0}` encoded: the complete reply to a
/// find (or any cursor command) answered in one batch.
pub(crate) fn exhausted_cursor_reply(ns: &str, docs: &[StoredDoc]) -> Vec<u8> {
    let payload: usize = docs.iter().map(|d| d.len() + 8).sum();
    let mut out = Vec::with_capacity(64 + ns.len() + payload);
    let reply = begin(&mut out);
    key(&mut out, DOCUMENT, "cursor");
    let cursor = begin(&mut out);
    key(&mut out, ARRAY, "firstBatch");
    let batch = begin(&mut out);
    let mut index = String::new();
    for (i, doc) in docs.iter().enumerate() {
        use std::fmt::Write;
        index.clear();
        let _ = write!(index, "{i}");
        key(&mut out, DOCUMENT, &index);
        out.extend_from_slice(doc.as_bytes());
    }
    end(&mut out, batch);
    key(&mut out, INT64, "id");
    out.extend_from_slice(&0i64.to_le_bytes());
    key(&mut out, STRING, "ns");
    let len = i32::try_from(ns.len() + 1).unwrap_or(i32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(ns.as_bytes());
    out.push(0);
    end(&mut out, cursor);
    key(&mut out, DOUBLE, "ok");
    out.extend_from_slice(&1.0f64.to_le_bytes());
    end(&mut out, reply);
    out
}

/// Start a document: a length placeholder, filled in by [`end`].
fn begin(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    at
}

fn end(out: &mut Vec<u8>, at: usize) {
    out.push(0);
    let len = i32::try_from(out.len() - at).unwrap_or(i32::MAX);
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// An element's type byte and key (names here are constants or digits: no NUL).
fn key(out: &mut Vec<u8>, element_type: u8, name: &str) {
    out.push(element_type);
    out.extend_from_slice(name.as_bytes());
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, Document};

    fn stored(d: Document) -> StoredDoc {
        StoredDoc::from_document(&d).unwrap()
    }

    #[test]
    fn the_reply_is_the_bytes_of_the_same_document_built_as_a_document() {
        for docs in [
            vec![],
            vec![doc! { "_id": ObjectId::new(), "a": [1, { "b": "c" }], "s": "é" }],
            (0..12)
                .map(|i| doc! { "_id": i, "n": { "x": i } })
                .collect(),
        ] {
            let raw: Vec<StoredDoc> = docs.iter().cloned().map(stored).collect();
            let expected = doc! {
                "cursor": { "firstBatch": docs, "id": 0i64, "ns": "shop.products" },
                "ok": 1.0,
            };
            let bytes = exhausted_cursor_reply("shop.products", &raw);
            assert_eq!(bytes, bson::to_vec(&expected).unwrap());
            assert_eq!(Document::from_reader(&bytes[..]).unwrap(), expected);
        }
    }

    #[test]
    fn one_batch_holds_up_to_the_batch_size_and_the_byte_cap() {
        let small: Vec<StoredDoc> = (0..3).map(|i| stored(doc! { "_id": i })).collect();
        assert!(fit_one_batch(&small, None));
        assert!(fit_one_batch(&small, Some(3)));
        assert!(!fit_one_batch(&small, Some(2)));
        assert!(!fit_one_batch(&small, Some(0)));
        assert!(fit_one_batch(&[], Some(0)));
        let many: Vec<StoredDoc> = (0..=DEFAULT_FIRST_BATCH as i32)
            .map(|i| stored(doc! { "_id": i }))
            .collect();
        assert!(!fit_one_batch(&many, None));
        // Over the byte cap: one document alone still makes a batch, two do not.
        let big = stored(doc! { "_id": 1, "s": "x".repeat(MAX_BATCH_BYTES / 2 + 1) });
        assert!(fit_one_batch(std::slice::from_ref(&big), None));
        assert!(!fit_one_batch(&[big.clone(), big], None));
    }
}
