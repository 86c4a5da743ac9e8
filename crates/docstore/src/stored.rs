//! How a collection keeps its documents: as their BSON bytes, validated once when they enter
//! the store (encoded from a `Document`, or read from a snapshot), in one shared allocation.
//!
//! A decoded `bson::Document` is an ordered hash map of owned `String` keys and `Bson` enums,
//! several times the size of its BSON encoding; the bytes are what a document costs on disk
//! plus one reference count. Readers decode only what they need: matching a filter or building
//! index keys decodes the top-level fields the filter or index reads ([`StoredDoc::select`]),
//! and only documents a command returns or changes are decoded in full
//! ([`StoredDoc::to_document`]).

use crate::error::{Error, Result};
use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document};
use std::sync::Arc;

/// One stored document: valid BSON bytes shared between the collection, query results and
/// snapshot images (cloning copies a pointer).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredDoc(Arc<[u8]>);

impl StoredDoc {
    /// Encode `doc`. Fails only for a document BSON cannot represent (a key holding a NUL).
    pub fn from_document(doc: &Document) -> Result<StoredDoc> {
        let mut bytes = Vec::new();
        doc.to_writer(&mut bytes)
            .map_err(|e| Error::bad_value(format!("cannot encode document as BSON: {e}")))?;
        Ok(StoredDoc(Arc::from(bytes)))
    }

    /// Take BSON bytes read from disk, checking every element (lengths, types, UTF-8 of keys
    /// and strings, nested documents) as fully as decoding would, without building anything.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<StoredDoc, String> {
        let raw = RawDocument::from_bytes(bytes).map_err(|e| e.to_string())?;
        validate_document(raw).map_err(|e| e.to_string())?;
        Ok(StoredDoc(Arc::from(bytes)))
    }

    /// Any bytes, unchecked (tests that write damaged snapshots).
    #[cfg(test)]
    pub(crate) fn from_raw_unchecked(bytes: Arc<[u8]>) -> StoredDoc {
        StoredDoc(bytes)
    }

    /// The encoded document.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Encoded size in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true: the smallest document is 5 bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn raw(&self) -> Result<&RawDocument> {
        RawDocument::from_bytes(&self.0[..]).map_err(corrupt)
    }

    /// The whole document.
    pub fn to_document(&self) -> Result<Document> {
        decode_document(self.raw()?).map_err(corrupt)
    }

    /// A document holding only the top-level fields named in `fields` (in stored order), or the
    /// whole document for `None`. Matching a filter, or extracting index keys, on it gives the
    /// same result as on the whole document when `fields` lists every top-level field they
    /// read.
    pub fn select(&self, fields: Option<&[String]>) -> Result<Document> {
        let Some(fields) = fields else {
            return self.to_document();
        };
        let mut out = Document::new();
        self.select_into(fields, &mut out)?;
        Ok(out)
    }

    /// [`StoredDoc::select`] of `fields` into `out`, which is emptied first (and keeps its
    /// allocation, for a caller that selects from many documents in turn).
    pub fn select_into(&self, fields: &[String], out: &mut Document) -> Result<()> {
        out.clear();
        if fields.is_empty() {
            return Ok(());
        }
        for element in self.raw()?.iter_elements() {
            let element = element.map_err(corrupt)?;
            if fields.iter().any(|f| f == element.key()) {
                let value = element.value().and_then(decode_value).map_err(corrupt)?;
                out.insert(element.key(), value);
                if out.len() == fields.len() {
                    break;
                }
            }
        }
        Ok(())
    }

    /// This document without the top-level fields named in `excluded`, every other field
    /// copied as stored and in order: what a projection that only leaves out top-level fields
    /// (`{carted: 0}`) returns, without decoding the document.
    pub fn without_fields(&self, excluded: &[&str]) -> Result<StoredDoc> {
        let mut out = bson::RawDocumentBuf::new();
        for element in self.raw()?.iter_elements() {
            let element = element.map_err(corrupt)?;
            if !excluded.contains(&element.key()) {
                out.append_ref(element.key(), element.value().map_err(corrupt)?);
            }
        }
        Ok(StoredDoc(Arc::from(out.into_bytes())))
    }

    /// One top-level field, decoded.
    pub fn get(&self, key: &str) -> Result<Option<Bson>> {
        match self.raw()?.get(key).map_err(corrupt)? {
            Some(value) => decode_value(value).map(Some).map_err(corrupt),
            None => Ok(None),
        }
    }

    /// The `_id` (null when there is none, which the store never allows).
    pub fn id(&self) -> Result<Bson> {
        Ok(self.get("_id")?.unwrap_or(Bson::Null))
    }
}

impl std::fmt::Display for StoredDoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_document() {
            Ok(doc) => write!(f, "{doc}"),
            Err(_) => write!(f, "<{} undecodable bytes>", self.0.len()),
        }
    }
}

impl std::fmt::Debug for StoredDoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Bytes that were valid BSON when stored no longer decode: memory was damaged or a bug wrote
/// them.
fn corrupt(e: bson::raw::Error) -> Error {
    Error::internal(format!("stored document does not decode: {e}"))
}

/// Decode one document straight from its bytes (the driver's conversion copies every nested
/// document into a buffer of its own first).
fn decode_document(raw: &RawDocument) -> bson::raw::Result<Document> {
    let mut out = Document::new();
    for element in raw {
        let (key, value) = element?;
        out.insert(key, decode_value(value)?);
    }
    Ok(out)
}

fn decode_value(value: RawBsonRef<'_>) -> bson::raw::Result<Bson> {
    Ok(match value {
        RawBsonRef::Document(d) => Bson::Document(decode_document(d)?),
        RawBsonRef::Array(a) => {
            let mut items = Vec::new();
            for item in a {
                items.push(decode_value(item?)?);
            }
            Bson::Array(items)
        }
        other => Bson::try_from(other)?,
    })
}

fn validate_document(raw: &RawDocument) -> bson::raw::Result<()> {
    for element in raw {
        let (_, value) = element?;
        validate_value(value)?;
    }
    Ok(())
}

fn validate_value(value: RawBsonRef<'_>) -> bson::raw::Result<()> {
    match value {
        RawBsonRef::Document(d) => validate_document(d),
        RawBsonRef::Array(a) => {
            // The array's own keys are checked by walking it as a document.
            validate_document(RawDocument::from_bytes(a.as_bytes())?)
        }
        RawBsonRef::JavaScriptCodeWithScope(c) => validate_document(c.scope),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, spec::BinarySubtype, Binary, Regex, Timestamp};

    fn sample() -> Document {
        doc! {
            "_id": ObjectId::new(),
            "d": 1.5, "s": "héllo", "n": Bson::Null, "b": true, "i": 7, "l": 9i64,
            "dt": bson::DateTime::now(), "ts": Timestamp { time: 1, increment: 2 },
            "re": Regex { pattern: "a.*".into(), options: "i".into() },
            "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![1, 2, 3] },
            "dec": Bson::Decimal128("1.5".parse().unwrap()),
            "nested": { "a": [1, { "b": "c" }, []], "e": {} },
            "min": Bson::MinKey, "max": Bson::MaxKey, "u": Bson::Undefined,
            "js": Bson::JavaScriptCode("x()".into()),
            "nan": f64::NAN,
        }
    }

    #[test]
    fn a_document_round_trips_through_its_bytes() {
        let doc = sample();
        let stored = StoredDoc::from_document(&doc).unwrap();
        assert_eq!(stored.len(), bson::to_vec(&doc).unwrap().len());
        let back = stored.to_document().unwrap();
        // NaN is not equal to itself: compare the encodings, which also pins the key order.
        assert_eq!(bson::to_vec(&back).unwrap(), stored.as_bytes());
        assert_eq!(
            back.keys().collect::<Vec<_>>(),
            doc.keys().collect::<Vec<_>>()
        );
        assert_eq!(stored.id().unwrap(), doc.get("_id").unwrap().clone());
        let copy = StoredDoc::from_bytes(stored.as_bytes()).unwrap();
        assert_eq!(copy, stored);
    }

    #[test]
    fn leaving_out_top_level_fields_copies_the_rest_as_the_projection_would() {
        let doc = sample();
        let stored = StoredDoc::from_document(&doc).unwrap();
        for spec in [
            bson::doc! { "nested": 0 },
            bson::doc! { "_id": 0, "s": 0, "nan": 0 },
            bson::doc! { "absent": 0 },
        ] {
            let projection = crate::query::projection::Projection::parse(&spec).unwrap();
            let excluded = projection
                .top_level_exclusions()
                .expect("top-level exclusion");
            let projected = projection.apply_scored(&doc, None, None).unwrap();
            let copied = stored.without_fields(&excluded).unwrap();
            assert_eq!(
                copied.as_bytes(),
                bson::to_vec(&projected).unwrap(),
                "{spec}"
            );
        }
    }

    #[test]
    fn select_keeps_only_the_named_top_level_fields_in_stored_order() {
        let stored = StoredDoc::from_document(&doc! { "a": 1, "b": { "c": 2 }, "d": [3] }).unwrap();
        let fields = vec!["d".to_string(), "b".to_string(), "zz".to_string()];
        assert_eq!(
            stored.select(Some(&fields)).unwrap(),
            doc! { "b": { "c": 2 }, "d": [3] }
        );
        assert_eq!(stored.select(Some(&[])).unwrap(), doc! {});
        assert_eq!(stored.select(None).unwrap(), stored.to_document().unwrap());
        assert_eq!(
            stored.get("b").unwrap(),
            Some(Bson::Document(doc! { "c": 2 }))
        );
        assert_eq!(stored.get("x").unwrap(), None);
    }

    #[test]
    fn damaged_bytes_are_refused_wherever_the_damage_is() {
        let bytes = bson::to_vec(&doc! { "a": "text", "n": { "x": [1, "é"] } }).unwrap();
        assert!(StoredDoc::from_bytes(&bytes).is_ok());
        assert!(StoredDoc::from_bytes(&bytes[..bytes.len() - 1]).is_err());
        // Every single-byte change either still decodes (and then validates) or is refused.
        for i in 0..bytes.len() {
            for delta in [1u8, 0x80, 0xff] {
                let mut damaged = bytes.clone();
                damaged[i] = damaged[i].wrapping_add(delta);
                let decodes = bson::Document::from_reader(&damaged[..]).is_ok();
                let validates = StoredDoc::from_bytes(&damaged).is_ok();
                if validates {
                    assert!(decodes, "byte {i} + {delta} validated but does not decode");
                    let stored = StoredDoc::from_bytes(&damaged).unwrap();
                    assert!(stored.to_document().is_ok());
                }
            }
        }
    }
}
