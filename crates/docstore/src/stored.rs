//! How a collection keeps its documents: as their BSON bytes, validated once when they enter
//! the store (encoded from a `Document`, read from a snapshot, or kept as an insert sent them),
//! in one shared allocation.
//!
//! A decoded `bson::Document` is an ordered hash map of owned `String` keys and `Bson` enums,
//! several times the size of its BSON encoding; the bytes are what a document costs on disk
//! plus one reference count. Readers decode only what they need: matching a filter or building
//! index keys decodes the top-level fields the filter or index reads ([`StoredDoc::select`]),
//! and only documents a command returns or changes are decoded in full
//! ([`StoredDoc::to_document`]).

use crate::bson_depth;
use crate::error::{Error, Result};
use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document};
use std::sync::Arc;

/// One stored document: valid BSON bytes shared between the collection, query results and
/// snapshot images (cloning copies a pointer).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredDoc(Arc<[u8]>);

impl StoredDoc {
    /// Encode `doc`. Fails for a document BSON cannot represent (a key holding a NUL), and for
    /// one nested deeper than every reader accepts (an update can nest a client's document
    /// under a long path): stored, it could not be recovered from the journal.
    pub fn from_document(doc: &Document) -> Result<StoredDoc> {
        if !bson_depth::within_limit(doc) {
            return Err(Error::new(
                crate::error::ErrorCode::Overflow,
                format!(
                    "cannot store a document nested more than {} levels deep",
                    bson_depth::MAX_BSON_DEPTH
                ),
            ));
        }
        // `bson::to_vec` is what `Document::to_writer` does before copying its buffer out:
        // called directly, the bytes are copied once (into the shared allocation), not twice.
        let bytes = bson::to_vec(doc)
            .map_err(|e| Error::bad_value(format!("cannot encode document as BSON: {e}")))?;
        Ok(StoredDoc(Arc::from(bytes)))
    }

    /// Take BSON bytes read from disk, checking every element (lengths, types, UTF-8 of keys
    /// and strings, nested documents) as fully as decoding would, and the nesting depth,
    /// without building anything (`bson_depth::check`).
    pub(crate) fn from_bytes(bytes: &[u8]) -> std::result::Result<StoredDoc, String> {
        let raw = RawDocument::from_bytes(bytes).map_err(|e| e.to_string())?;
        bson_depth::check(raw).map_err(|e| e.to_string())?;
        Ok(StoredDoc(Arc::from(bytes)))
    }

    /// Keep a document a client sent as the bytes it sent (already checked at the wire,
    /// [`bson_depth::check`]), when decoding and encoding it again gives exactly those bytes:
    /// then storing them is storing what the decoded path stores, without building a
    /// `Document` (which was most of the store's cost of the traffic log's inserts,
    /// docs/data-model.md). `None` for anything that would change on the way through a
    /// `Document`, or whose round trip was not worth proving for a hot path: a field name twice
    /// in one document (decoding keeps the last value), array keys other than `0, 1, 2 …`
    /// (decoding drops them), regular expressions (their options are sorted), old binary
    /// (subtype 2), and the deprecated or JavaScript types. The caller decodes those.
    pub(crate) fn as_sent(bytes: &Arc<[u8]>) -> Option<StoredDoc> {
        round_trips(bytes, false).then(|| StoredDoc(Arc::clone(bytes)))
    }

    /// Any bytes, unchecked (tests that write damaged snapshots).
    #[cfg(test)]
    pub(crate) fn from_raw_unchecked(bytes: Arc<[u8]>) -> StoredDoc {
        StoredDoc(bytes)
    }

    /// The encoded document.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Encoded size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
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
    pub(crate) fn select(&self, fields: Option<&[String]>) -> Result<Document> {
        let Some(fields) = fields else {
            return self.to_document();
        };
        let mut out = Document::new();
        self.select_into(fields, &mut out)?;
        Ok(out)
    }

    /// [`StoredDoc::select`] of `fields` into `out`, which is emptied first (and keeps its
    /// allocation, for a caller that selects from many documents in turn).
    pub(crate) fn select_into(&self, fields: &[String], out: &mut Document) -> Result<()> {
        out.clear();
        let whole = |key: &[u8]| fields.iter().any(|f| f.as_bytes() == key).then_some(None);
        select_from(&self.0, fields.len(), &whole, out)
    }

    /// [`StoredDoc::select_into`] of the parts `wanted` names: a field named with nothing
    /// under it is decoded whole, and an embedded document with fields named under it holds
    /// only those (anything else, an array included, is decoded whole). Following any of the
    /// tree's paths on the result finds what it finds on the whole document: index keys read
    /// from a product's `details` only its `genre`, `artist` …, not every track listing.
    pub(crate) fn select_tree_into(&self, wanted: &FieldTree, out: &mut Document) -> Result<()> {
        out.clear();
        select_from(&self.0, wanted.0.len(), &|key| wanted.find(key), out)
    }

    /// This document with only the top-level fields `keep` accepts, each copied as stored and
    /// in order: what a projection that keeps or leaves out whole top-level fields
    /// (`{carted: 0}`, `{title: 1}`) returns, without decoding the document.
    pub(crate) fn with_fields(&self, keep: impl Fn(&[u8]) -> bool) -> Result<StoredDoc> {
        let mut out = Vec::with_capacity(self.0.len());
        copy_kept(&self.0, &|key| keep(key).then_some(None), &mut out)?;
        Ok(StoredDoc(Arc::from(out)))
    }

    /// This document with only the parts `keep` names, copied as stored and in the document's
    /// order: what an inclusion projection of plain paths (`{slug: 1, "details.issue_date": 1}`)
    /// returns, without decoding the document. A field named with a subtree keeps, of an
    /// embedded document, the subtree's fields (an empty document when it has none of them),
    /// and is left out when it holds a scalar. `None` when such a field holds an array (the
    /// projection then reaches into each element): project the decoded document instead.
    pub(crate) fn with_tree(&self, keep: &FieldTree) -> Result<Option<StoredDoc>> {
        let mut out = Vec::with_capacity(self.0.len());
        Ok(copy_kept(&self.0, &|key| keep.find(key), &mut out)?.then(|| StoredDoc(Arc::from(out))))
    }

    /// This document without the parts `drop` names, the rest copied as stored and in order:
    /// what an exclusion projection of plain paths (`{"metadata.detail.text": 0}`) returns,
    /// without decoding the document. A field named with a subtree loses, of an embedded
    /// document, the subtree's fields (keeping the document, empty or not), and is kept whole
    /// when it holds a scalar. `None` when such a field holds an array (the projection then
    /// reaches into each element): project the decoded document instead.
    pub(crate) fn without_tree(&self, drop: &FieldTree) -> Result<Option<StoredDoc>> {
        let mut out = Vec::with_capacity(self.0.len());
        Ok(copy_without(&self.0, drop, &mut out)?.then(|| StoredDoc(Arc::from(out))))
    }

    /// The values of `count` top-level fields, read straight from the bytes without building a
    /// [`Document`]: `slot` tells which of them (`0..count`) a field name is, if any, and each
    /// is `None` when the document has no such field. `Ok(None)` as soon as one of them holds
    /// an array, which the caller handles the general way (index keys of an array are one per
    /// element). The walk stops once every one is found, as [`StoredDoc::select`] does: a
    /// stored document repeats no field name (see [`StoredDoc::as_sent`]).
    pub(crate) fn top_level_values(
        &self,
        count: usize,
        slot: impl Fn(&[u8]) -> Option<usize>,
    ) -> Result<Option<Vec<Option<Bson>>>> {
        let mut values = vec![None; count];
        let mut found = 0;
        if count == 0 {
            return Ok(Some(values));
        }
        for element in Elements::new(&self.0)? {
            let element = element?;
            let Some(i) = slot(element.key) else {
                continue;
            };
            if element.bytes[0] == 0x04 {
                return Ok(None);
            }
            let value = match element.decode_scalar() {
                Some(value) => value?,
                None => element.decode()?.1,
            };
            if values[i].replace(value).is_none() {
                found += 1;
                if found == count {
                    break;
                }
            }
        }
        Ok(Some(values))
    }

    /// One top-level field, decoded.
    pub(crate) fn get(&self, key: &str) -> Result<Option<Bson>> {
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

/// A stored document's bytes are no longer what was stored: memory was damaged or a bug wrote
/// them.
fn damaged(what: &str) -> Error {
    Error::internal(format!("stored document does not decode: {what}"))
}

/// Paths into a document, as a tree of field names: what [`StoredDoc::select_tree_into`]
/// decodes. A field without a subtree is wanted whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldTree(Vec<(String, Option<FieldTree>)>);

impl FieldTree {
    /// The tree of dotted `paths` (`"details.genre"`; `"details"` wants all of it).
    pub(crate) fn from_paths<'a>(paths: impl IntoIterator<Item = &'a str>) -> FieldTree {
        let mut tree = FieldTree::default();
        for path in paths {
            tree.add(path);
        }
        tree
    }

    /// What the tree wants of the field `key` (see [`Wanted`]).
    fn find(&self, key: &[u8]) -> Option<Option<&FieldTree>> {
        self.0
            .iter()
            .find(|(name, _)| name.as_bytes() == key)
            .map(|(_, sub)| sub.as_ref())
    }

    fn add(&mut self, path: &str) {
        let (head, rest) = match path.split_once('.') {
            Some((head, rest)) => (head, Some(rest)),
            None => (path, None),
        };
        match self.0.iter_mut().find(|(name, _)| name == head) {
            None => {
                let sub = rest.map(|rest| FieldTree::from_paths([rest]));
                self.0.push((head.to_string(), sub));
            }
            Some((_, sub)) => match (sub.as_mut(), rest) {
                // Already wanted whole.
                (None, _) => {}
                (Some(_), None) => *sub = None,
                (Some(tree), Some(rest)) => tree.add(rest),
            },
        }
    }
}

/// What a selection wants of a field, by its key: `None` for nothing, `Some(None)` for all of
/// it, `Some(Some(tree))` for the parts `tree` names.
type Wanted<'w> = dyn Fn(&[u8]) -> Option<Option<&'w FieldTree>> + 'w;

/// The fields `wanted` accepts out of the document `bytes` (at most `count` of them), into
/// `out`: [`StoredDoc::select_into`] and [`StoredDoc::select_tree_into`].
fn select_from(bytes: &[u8], count: usize, wanted: &Wanted<'_>, out: &mut Document) -> Result<()> {
    if count == 0 {
        return Ok(());
    }
    for element in Elements::new(bytes)? {
        let element = element?;
        let Some(sub) = wanted(element.key) else {
            continue;
        };
        match sub {
            Some(sub) if element.bytes[0] == 0x03 => {
                let mut inner = Document::new();
                select_from(
                    element.value(),
                    sub.0.len(),
                    &|key| sub.find(key),
                    &mut inner,
                )?;
                out.insert(element.key_str()?, Bson::Document(inner));
            }
            _ => {
                let (key, value) = element.decode()?;
                out.insert(key, value);
            }
        }
        if out.len() == count {
            break;
        }
    }
    Ok(())
}

/// Append to `out` the document `bytes` with only the parts `keep` names (see
/// [`StoredDoc::with_tree`]); `false`, with `out` unfinished, when a field named with a
/// subtree holds an array.
fn copy_kept(bytes: &[u8], keep: &Wanted<'_>, out: &mut Vec<u8>) -> Result<bool> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    for element in Elements::new(bytes)? {
        let element = element?;
        match keep(element.key) {
            None => {}
            Some(None) => out.extend_from_slice(element.bytes),
            Some(Some(sub)) => match element.bytes[0] {
                0x03 => {
                    out.extend_from_slice(&element.bytes[..1 + element.key.len() + 1]);
                    if !copy_kept(element.value(), &|key| sub.find(key), out)? {
                        return Ok(false);
                    }
                }
                0x04 => return Ok(false),
                _ => {}
            },
        }
    }
    out.push(0);
    let len = i32::try_from(out.len() - start).map_err(|_| damaged("document too large"))?;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    Ok(true)
}

/// The document `bytes` without the parts `drop` names, into `out` ([`StoredDoc::without_tree`]);
/// `false` when a named subtree meets an array.
fn copy_without(bytes: &[u8], drop: &FieldTree, out: &mut Vec<u8>) -> Result<bool> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    for element in Elements::new(bytes)? {
        let element = element?;
        match drop.find(element.key) {
            None => out.extend_from_slice(element.bytes),
            Some(None) => {}
            Some(Some(sub)) => match element.bytes[0] {
                0x03 => {
                    out.extend_from_slice(&element.bytes[..1 + element.key.len() + 1]);
                    if !copy_without(element.value(), sub, out)? {
                        return Ok(false);
                    }
                }
                0x04 => return Ok(false),
                _ => out.extend_from_slice(element.bytes),
            },
        }
    }
    out.push(0);
    let len = i32::try_from(out.len() - start).map_err(|_| damaged("document too large"))?;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    Ok(true)
}

/// One top-level element of a stored document, found by lengths alone.
pub(crate) struct Element<'a> {
    /// The key's bytes (UTF-8 when the document was stored).
    key: &'a [u8],
    /// The whole element: type byte, key, NUL, value.
    bytes: &'a [u8],
}

impl<'a> Element<'a> {
    /// The value's bytes (for an embedded document or an array, the document).
    pub(crate) fn value(&self) -> &'a [u8] {
        &self.bytes[1 + self.key.len() + 1..]
    }

    /// The key's bytes (UTF-8, checked when the document was stored).
    pub(crate) fn key(&self) -> &'a [u8] {
        self.key
    }

    /// The BSON type byte (`0x02` a string, `0x03` an embedded document, `0x04` an array…).
    pub(crate) fn kind(&self) -> u8 {
        self.bytes[0]
    }

    /// A string value's bytes without its length and terminator, `None` for any other type
    /// or a damaged length. The bytes are UTF-8 when the document was stored; they are not
    /// checked again here.
    pub(crate) fn string_bytes(&self) -> Option<&'a [u8]> {
        if self.kind() != 0x02 {
            return None;
        }
        let value = self.value();
        let len = read_len(value, 0).ok()?;
        value
            .get(4..)
            .filter(|rest| len >= 1 && rest.len() == len && rest[len - 1] == 0)
            .map(|rest| &rest[..len - 1])
    }

    /// The value read straight from its bytes when it is one of the common scalars (a
    /// string, number, date, ObjectId, boolean or null), which filters and index keys read
    /// most: no one-element document is built for the driver to parse. `None` for other
    /// types. The checks are the driver's: a string's length and terminator, UTF-8, a
    /// boolean's byte.
    fn decode_scalar(&self) -> Option<Result<Bson>> {
        let value = self.value();
        let fixed = |n: usize| -> Result<&[u8]> {
            value
                .get(..n)
                .filter(|_| value.len() == n)
                .ok_or_else(|| damaged("bad value length"))
        };
        let eight = |v: &[u8]| -> [u8; 8] {
            let mut b = [0u8; 8];
            b.copy_from_slice(v);
            b
        };
        Some(match self.bytes[0] {
            0x01 => fixed(8).map(|v| Bson::Double(f64::from_le_bytes(eight(v)))),
            0x02 => (|| {
                let len = read_len(value, 0)?;
                let text = value
                    .get(4..)
                    .filter(|rest| len >= 1 && rest.len() == len && rest[len - 1] == 0)
                    .ok_or_else(|| damaged("bad string length"))?;
                let text = std::str::from_utf8(&text[..len - 1])
                    .map_err(|_| damaged("string is not UTF-8"))?;
                Ok(Bson::String(text.to_string()))
            })(),
            0x07 => fixed(12).map(|v| {
                let mut id = [0u8; 12];
                id.copy_from_slice(v);
                Bson::ObjectId(bson::oid::ObjectId::from_bytes(id))
            }),
            0x08 => fixed(1).and_then(|v| match v[0] {
                0 => Ok(Bson::Boolean(false)),
                1 => Ok(Bson::Boolean(true)),
                _ => Err(damaged("bad boolean")),
            }),
            0x09 => fixed(8)
                .map(|v| Bson::DateTime(bson::DateTime::from_millis(i64::from_le_bytes(eight(v))))),
            0x0A => fixed(0).map(|_| Bson::Null),
            0x10 => fixed(4).map(|v| {
                let mut b = [0u8; 4];
                b.copy_from_slice(v);
                Bson::Int32(i32::from_le_bytes(b))
            }),
            0x12 => fixed(8).map(|v| Bson::Int64(i64::from_le_bytes(eight(v)))),
            _ => return None,
        })
    }

    /// The key (UTF-8 when the document was stored; checked again).
    fn key_str(&self) -> Result<String> {
        std::str::from_utf8(self.key)
            .map(str::to_string)
            .map_err(|_| damaged("key is not UTF-8"))
    }

    /// An array of common scalars (a product's category path of ObjectIds, a list of tags)
    /// read element by element as [`Element::decode_scalar`] reads one value, with its checks:
    /// a filter on such a field reads it for every candidate, and the driver's decoding built
    /// and parsed a one-element document for it each time. `None` when the value is not an
    /// array or holds anything else (a document, another array, a rarer type): the caller then
    /// decodes it through the driver, as it does when an element's key is not UTF-8 (the driver
    /// refuses that; the keys' digits themselves are not checked, as decoding ignores them).
    fn decode_scalar_array(&self) -> Option<Result<Bson>> {
        if self.bytes[0] != 0x04 {
            return None;
        }
        let elements = match Elements::new(self.value()) {
            Ok(elements) => elements,
            Err(e) => return Some(Err(e)),
        };
        let mut items = Vec::new();
        for element in elements {
            // An element's key that is not UTF-8 (damaged bytes): the driver's decoding refuses
            // it, so it decides.
            if element
                .as_ref()
                .is_ok_and(|e| std::str::from_utf8(e.key).is_err())
            {
                return None;
            }
            match element.map(|e| e.decode_scalar()) {
                Ok(Some(Ok(value))) => items.push(value),
                Ok(None) => return None,
                Ok(Some(Err(e))) | Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(Bson::Array(items)))
    }

    /// The key and value, decoded: a common scalar (or an array of them) straight from its
    /// bytes, anything else through a one-element document (the bytes are checked as the
    /// driver would check them).
    fn decode(&self) -> Result<(String, Bson)> {
        if let Some(value) = self.decode_scalar() {
            return Ok((self.key_str()?, value?));
        }
        if let Some(items) = self.decode_scalar_array() {
            return Ok((self.key_str()?, items?));
        }
        let len = self.bytes.len() + 5;
        let mut one = Vec::with_capacity(len);
        one.extend_from_slice(&(len as i32).to_le_bytes());
        one.extend_from_slice(self.bytes);
        one.push(0);
        let raw = RawDocument::from_bytes(&one).map_err(corrupt)?;
        let (key, value) = raw
            .into_iter()
            .next()
            .ok_or_else(|| damaged("empty element"))?
            .map_err(corrupt)?;
        Ok((key.to_string(), decode_value(value).map_err(corrupt)?))
    }
}

/// The top-level elements of a stored document, walked by reading each element's type and
/// length and skipping its value, without checking or decoding what they hold (that was done
/// when the document was stored). Filter matching and projections touch a few top-level fields
/// of many documents; the driver's iterator validates every key and value it passes, which
/// cost most of a listing query's time. Lengths are still bounds-checked: damaged bytes give an
/// error, never a panic or a read past the document.
///
/// Other modules walk embedded documents and arrays with it too (a phrase looked for in a
/// text index's strings, `text::TextIndex::visit_stored_strings`): [`Elements::new`] takes
/// any document's bytes, an element's [`Element::value`] included.
pub(crate) struct Elements<'a> {
    bytes: &'a [u8],
    at: usize,
    end: usize,
}

impl<'a> Elements<'a> {
    /// The elements of the document (or array) `bytes`; an error when its length or
    /// terminator is wrong.
    pub(crate) fn new(bytes: &'a [u8]) -> Result<Elements<'a>> {
        let declared = read_len(bytes, 0)?;
        if bytes.len() < 5 || declared != bytes.len() || bytes[bytes.len() - 1] != 0 {
            return Err(damaged("bad document length"));
        }
        Ok(Elements {
            bytes,
            at: 4,
            end: bytes.len() - 1,
        })
    }

    /// The length of the value starting at `at` whose type is `kind`.
    fn value_len(&self, kind: u8, at: usize) -> Result<usize> {
        let cstring = |from: usize| -> Result<usize> {
            self.bytes
                .get(from..self.end)
                .and_then(|rest| rest.iter().position(|&b| b == 0))
                .map(|n| n + 1)
                .ok_or_else(|| damaged("unterminated string"))
        };
        Ok(match kind {
            0x06 | 0x0A | 0x7F | 0xFF => 0,
            0x08 => 1,
            0x10 => 4,
            0x01 | 0x09 | 0x11 | 0x12 => 8,
            0x07 => 12,
            0x13 => 16,
            // String, JavaScript code, symbol: length-prefixed.
            0x02 | 0x0D | 0x0E => 4 + read_len(self.bytes, at)?,
            // Document, array, code with scope: the length counts itself.
            0x03 | 0x04 | 0x0F => read_len(self.bytes, at)?,
            // Binary: length, subtype, bytes.
            0x05 => 5 + read_len(self.bytes, at)?,
            // Regular expression: pattern and options, two C strings.
            0x0B => {
                let pattern = cstring(at)?;
                pattern + cstring(at + pattern)?
            }
            // DBPointer: a string then an ObjectId.
            0x0C => 4 + read_len(self.bytes, at)? + 12,
            _ => return Err(damaged("unknown element type")),
        })
    }
}

impl<'a> Iterator for Elements<'a> {
    type Item = Result<Element<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.end {
            return None;
        }
        let start = self.at;
        let kind = self.bytes[start];
        let step = (|| {
            let key_len = self.bytes[start + 1..self.end]
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(|| damaged("unterminated key"))?;
            let value = start + 1 + key_len + 1;
            let end = value
                .checked_add(self.value_len(kind, value)?)
                .filter(|&end| end <= self.end)
                .ok_or_else(|| damaged("element runs past the document"))?;
            Ok((start + 1 + key_len, end))
        })();
        match step {
            Ok((key_end, end)) => {
                self.at = end;
                Some(Ok(Element {
                    key: &self.bytes[start + 1..key_end],
                    bytes: &self.bytes[start..end],
                }))
            }
            Err(e) => {
                self.at = self.end;
                Some(Err(e))
            }
        }
    }
}

/// Whether the document in `bytes` (an array's elements when `array`) comes back byte for byte
/// from a trip through `Document` (see [`StoredDoc::as_sent`]). The bytes were checked at the
/// wire (lengths, UTF-8, values, nesting), so this walk only reads each element's type and key
/// ([`Elements`]) rather than parsing every value again as the bson crate's iterator does, and
/// its recursion is bounded.
fn round_trips(bytes: &[u8], array: bool) -> bool {
    /// Documents with more fields than this have their names checked for repeats by sorting
    /// rather than pairwise.
    const PAIRWISE: usize = 32;
    let Ok(elements) = Elements::new(bytes) else {
        return false;
    };
    // The names seen so far: the first `PAIRWISE` without allocating, all of them in `many`
    // once there are more.
    let mut few: [&[u8]; PAIRWISE] = [&[]; PAIRWISE];
    let mut many: Vec<&[u8]> = Vec::new();
    let mut count = 0;
    for (i, element) in elements.enumerate() {
        let Ok(element) = element else {
            return false;
        };
        let key = element.key;
        if array {
            // Canonical array keys: the index in decimal digits only (`parse` would also take
            // a leading `+`), no leading zero.
            let canonical = key.iter().all(u8::is_ascii_digit)
                && std::str::from_utf8(key)
                    .ok()
                    .and_then(|k| k.parse::<usize>().ok())
                    == Some(i)
                && (key.len() == 1 || key[0] != b'0');
            if !canonical {
                return false;
            }
        } else {
            if count < PAIRWISE {
                few[count] = key;
            } else {
                if many.is_empty() {
                    many.extend_from_slice(&few);
                }
                many.push(key);
            }
            count += 1;
        }
        let plain = match element.bytes[0] {
            0x03 => round_trips(element.value(), false),
            0x04 => round_trips(element.value(), true),
            // Binary: its length, then the subtype; old binary (2) is rewritten by decoding.
            0x05 => element
                .value()
                .get(4)
                .is_some_and(|&subtype| subtype != 0x02),
            // Double, string, ObjectId, boolean, date, null, int32, timestamp, int64,
            // decimal128, max key, min key.
            0x01 | 0x02 | 0x07 | 0x08 | 0x09 | 0x0A | 0x10 | 0x11 | 0x12 | 0x13 | 0x7F | 0xFF => {
                true
            }
            // Undefined, regular expression, DBPointer, JavaScript (with or without scope),
            // symbol.
            _ => false,
        };
        if !plain {
            return false;
        }
    }
    if count <= PAIRWISE {
        let names = &few[..count];
        names
            .iter()
            .enumerate()
            .all(|(i, name)| !names[..i].contains(name))
    } else {
        many.sort_unstable();
        many.windows(2).all(|w| w[0] != w[1])
    }
}

/// A little-endian length at `at`, which must not be negative.
fn read_len(bytes: &[u8], at: usize) -> Result<usize> {
    let four: [u8; 4] = bytes
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| damaged("truncated length"))?;
    usize::try_from(i32::from_le_bytes(four)).map_err(|_| damaged("negative length"))
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
    fn a_sent_document_is_kept_as_sent_only_when_decoding_would_store_the_same_bytes() {
        let plain = doc! {
            "_id": ObjectId::new(), "at": bson::DateTime::now(), "kind": "view", "n": 1.5,
            "i": 7, "l": 9i64, "ok": true, "none": Bson::Null,
            "dec": Bson::Decimal128("1.5".parse().unwrap()),
            "ts": Timestamp { time: 1, increment: 2 },
            "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "nested": { "a": [1, { "b": "c" }, []], "e": {} },
            "min": Bson::MinKey, "max": Bson::MaxKey, "nan": f64::NAN,
        };
        let bytes: Arc<[u8]> = Arc::from(bson::to_vec(&plain).unwrap());
        let kept = StoredDoc::as_sent(&bytes).expect("plain values are kept as sent");
        let decoded = kept.to_document().unwrap();
        assert_eq!(bson::to_vec(&decoded).unwrap(), kept.as_bytes());
        for odd in [
            doc! { "_id": 1, "re": Regex { pattern: "a".into(), options: "mi".into() } },
            doc! { "_id": 1, "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![1] } },
            doc! { "_id": 1, "u": Bson::Undefined },
            doc! { "_id": 1, "js": Bson::JavaScriptCode("x()".into()) },
        ] {
            let bytes: Arc<[u8]> = Arc::from(bson::to_vec(&odd).unwrap());
            assert!(StoredDoc::as_sent(&bytes).is_none(), "{odd}");
        }
        // Built by hand, as a client could send them: what `Document` cannot hold.
        let repeated = raw_document(&[
            (0x10, "a", &1i32.to_le_bytes()),
            (0x10, "a", &2i32.to_le_bytes()),
        ]);
        assert!(StoredDoc::as_sent(&repeated).is_none());
        let nested_repeat = raw_document(&[(0x03, "d", &repeated[..])]);
        assert!(StoredDoc::as_sent(&nested_repeat).is_none());
        let array_keys = raw_document(&[(0x10, "x", &1i32.to_le_bytes())]);
        let array = raw_document(&[(0x04, "a", &array_keys[..])]);
        assert!(StoredDoc::as_sent(&array).is_none());
        for keys in [["+0", "+1"], ["0", "01"], ["1", "0"]] {
            let elements = raw_document(&[
                (0x10, keys[0], &1i32.to_le_bytes()),
                (0x10, keys[1], &2i32.to_le_bytes()),
            ]);
            let array = raw_document(&[(0x04, "a", &elements[..])]);
            assert!(StoredDoc::as_sent(&array).is_none(), "{keys:?}");
        }
        let canonical = raw_document(&[
            (0x10, "0", &1i32.to_le_bytes()),
            (0x10, "1", &2i32.to_le_bytes()),
        ]);
        let array = raw_document(&[(0x04, "a", &canonical[..])]);
        assert!(StoredDoc::as_sent(&array).is_some());
        let many: Vec<String> = (0..40).map(|i| format!("f{}", i % 39)).collect();
        let fields: Vec<(u8, &str, &[u8])> =
            many.iter().map(|k| (0x0A, k.as_str(), &[][..])).collect();
        assert!(StoredDoc::as_sent(&raw_document(&fields)).is_none());
        let distinct: Vec<String> = (0..40).map(|i| format!("f{i}")).collect();
        let fields: Vec<(u8, &str, &[u8])> = distinct
            .iter()
            .map(|k| (0x0A, k.as_str(), &[][..]))
            .collect();
        assert!(StoredDoc::as_sent(&raw_document(&fields)).is_some());
    }

    /// A BSON document of `(type, name, value bytes)` elements, written without `Document`.
    fn raw_document(elements: &[(u8, &str, &[u8])]) -> Arc<[u8]> {
        let mut body = Vec::new();
        for (kind, name, value) in elements {
            body.push(*kind);
            body.extend_from_slice(name.as_bytes());
            body.push(0);
            body.extend_from_slice(value);
        }
        let mut out = ((body.len() + 5) as i32).to_le_bytes().to_vec();
        out.extend(body);
        out.push(0);
        Arc::from(out)
    }

    #[test]
    fn a_field_tree_selects_embedded_fields_and_keeps_arrays_and_values_whole() {
        let doc = bson::doc! {
            "_id": 1,
            "details": { "genre": ["Jazz"], "tracks": ["a", "b"], "issue": { "y": 1, "m": 2 } },
            "carted": [{ "cart": 1, "qty": 2 }, 3],
            "title": "Night",
            "price": { "list": 5 },
        };
        let stored = StoredDoc::from_document(&doc).unwrap();
        let tree = FieldTree::from_paths([
            "details.genre",
            "details.issue.y",
            "carted.cart",
            "title.x",
            "price.list",
            "price",
            "absent.field",
        ]);
        let mut out = Document::new();
        stored.select_tree_into(&tree, &mut out).unwrap();
        assert_eq!(
            out,
            bson::doc! {
                "details": { "genre": ["Jazz"], "issue": { "y": 1 } },
                "carted": [{ "cart": 1, "qty": 2 }, 3],
                "title": "Night",
                "price": { "list": 5 },
            }
        );
        // A path named whole wins over a path below it, in either order.
        assert_eq!(
            FieldTree::from_paths(["a.b", "a"]),
            FieldTree::from_paths(["a", "a.b"])
        );
    }

    #[test]
    fn keeping_or_leaving_out_top_level_fields_copies_what_the_projection_would_return() {
        let doc = sample();
        let stored = StoredDoc::from_document(&doc).unwrap();
        for spec in [
            bson::doc! { "nested": 0 },
            bson::doc! { "_id": 0, "s": 0, "nan": 0 },
            bson::doc! { "absent": 0 },
            bson::doc! { "nested": 1, "s": 1, "nan": 1 },
            bson::doc! { "_id": 0, "dec": 1, "re": 1, "absent": 1 },
            bson::doc! { "_id": 1 },
        ] {
            let projection = crate::query::projection::Projection::parse(&spec).unwrap();
            let fields = projection
                .whole_top_level_fields()
                .expect("whole top-level fields");
            let projected = projection.apply_scored(&doc, None, None).unwrap();
            let copied = stored.with_fields(|key| fields.keeps(key)).unwrap();
            assert_eq!(
                copied.as_bytes(),
                bson::to_vec(&projected).unwrap(),
                "{spec}"
            );
        }
    }

    #[test]
    fn copying_included_paths_gives_what_the_projection_would_return() {
        let doc = bson::doc! {
            "_id": 1,
            "details": { "issue_date": 2001, "tracks": ["a", "b"], "label": { "name": "X", "y": 1 } },
            "title": "Night",
            "qty": 3,
            "empty": {},
        };
        let stored = StoredDoc::from_document(&doc).unwrap();
        for spec in [
            bson::doc! { "details.issue_date": 1, "title": 1 },
            bson::doc! { "_id": 0, "details.label.name": 1, "details.tracks": 1 },
            bson::doc! { "details": { "absent": 1 }, "qty": 1 },
            // Below a scalar there is nothing to keep: the field is left out.
            bson::doc! { "title.x": 1, "qty.y": 1 },
            bson::doc! { "empty.a": 1, "absent.b": 1 },
            bson::doc! { "details": 1, "title": 1 },
        ] {
            let projection = crate::query::projection::Projection::parse(&spec).unwrap();
            let paths = projection.included_paths().expect("plain inclusions");
            let projected = projection.apply_scored(&doc, None, None).unwrap();
            let copied = stored
                .with_tree(&paths)
                .unwrap()
                .expect("no array on the way");
            assert_eq!(
                copied.as_bytes(),
                bson::to_vec(&projected).unwrap(),
                "{spec}"
            );
        }
        // A path into an array reaches into each element: left to the decoded projection.
        let projection =
            crate::query::projection::Projection::parse(&bson::doc! { "details.tracks.x": 1 })
                .unwrap();
        let paths = projection.included_paths().expect("plain inclusions");
        assert_eq!(stored.with_tree(&paths).unwrap(), None);
        // Anything but plain inclusions is not a tree of paths.
        for spec in [
            bson::doc! { "title": 0 },
            bson::doc! { "details.tracks": { "$slice": 1 } },
            bson::doc! { "details.tracks.$": 1 },
            bson::doc! {},
        ] {
            let projection = crate::query::projection::Projection::parse(&spec).unwrap();
            assert_eq!(projection.included_paths(), None, "{spec}");
        }
    }

    #[test]
    fn copying_without_excluded_paths_gives_what_the_projection_would_return() {
        let doc = bson::doc! {
            "_id": 1,
            "metadata": { "detail": { "text": "long body", "format": "md" }, "summary": "s" },
            "title": "Night",
            "qty": 3,
            "empty": {},
        };
        let stored = StoredDoc::from_document(&doc).unwrap();
        for spec in [
            bson::doc! { "metadata.detail.text": 0 },
            bson::doc! { "metadata.detail.text": 0, "metadata.detail.format": 0, "qty": 0 },
            bson::doc! { "metadata": { "summary": 0 }, "_id": 0 },
            // Below a scalar there is nothing to leave out: the field is kept.
            bson::doc! { "title.x": 0, "qty.y": 0 },
            bson::doc! { "empty.a": 0, "absent.b": 0 },
            bson::doc! { "metadata": 0 },
        ] {
            let projection = crate::query::projection::Projection::parse(&spec).unwrap();
            let paths = projection.excluded_paths().expect("plain exclusions");
            let projected = projection.apply_scored(&doc, None, None).unwrap();
            let copied = stored
                .without_tree(&paths)
                .unwrap()
                .expect("no array on the way");
            assert_eq!(
                copied.as_bytes(),
                bson::to_vec(&projected).unwrap(),
                "{spec}"
            );
        }
        let with_array = StoredDoc::from_document(&bson::doc! { "a": [{ "b": 1 }] }).unwrap();
        let projection =
            crate::query::projection::Projection::parse(&bson::doc! { "a.b": 0 }).unwrap();
        let paths = projection.excluded_paths().expect("plain exclusions");
        assert_eq!(with_array.without_tree(&paths).unwrap(), None);
        for spec in [
            bson::doc! { "title": 1 },
            bson::doc! { "a": { "$slice": 1 } },
            bson::doc! {},
        ] {
            let projection = crate::query::projection::Projection::parse(&spec).unwrap();
            assert_eq!(projection.excluded_paths(), None, "{spec}");
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
    fn arrays_of_scalars_are_read_from_their_bytes_as_decoding_reads_them() {
        let doc = doc! {
            "path": [ObjectId::from_bytes([1; 12]), ObjectId::from_bytes([2; 12])],
            "mixed": [1, 2i64, 2.5, "é", true, Bson::Null, bson::DateTime::from_millis(-5)],
            "empty": [],
            // Not all scalars: decoded by the driver, with the same result.
            "nested": [1, [2, 3], { "a": 4 }],
            "rare": [Bson::Decimal128("1.5".parse().unwrap()), Bson::MinKey],
            "nan": [f64::NAN, -0.0],
        };
        let stored = StoredDoc::from_document(&doc).unwrap();
        for key in doc.keys() {
            let element = Elements::new(stored.as_bytes())
                .unwrap()
                .map(Result::unwrap)
                .find(|e| e.key == key.as_bytes())
                .unwrap();
            let fast = element.decode_scalar_array();
            assert_eq!(
                fast.is_some(),
                !matches!(key.as_str(), "nested" | "rare"),
                "{key}"
            );
            let picked = stored.select(Some(std::slice::from_ref(key))).unwrap();
            // Compare encodings: NaN is not equal to itself.
            assert_eq!(
                bson::to_vec(&picked).unwrap(),
                bson::to_vec(&doc! { key.clone(): doc.get(key).unwrap().clone() }).unwrap(),
                "{key}"
            );
        }
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

    #[test]
    fn the_element_walk_finds_every_field_of_every_type_as_decoding_does() {
        let doc = sample();
        let stored = StoredDoc::from_document(&doc).unwrap();
        let keys: Vec<String> = Elements::new(stored.as_bytes())
            .unwrap()
            .map(|e| String::from_utf8(e.unwrap().key.to_vec()).unwrap())
            .collect();
        assert_eq!(keys, doc.keys().cloned().collect::<Vec<_>>());
        for key in doc.keys() {
            let picked = stored.select(Some(std::slice::from_ref(key))).unwrap();
            // Compare encodings: NaN is not equal to itself.
            assert_eq!(
                bson::to_vec(&picked).unwrap(),
                bson::to_vec(&doc! { key.clone(): doc.get(key).unwrap().clone() }).unwrap(),
                "{key}"
            );
        }
        let everything: Vec<&str> = doc.keys().map(String::as_str).collect();
        assert_eq!(
            stored
                .with_fields(|key| !everything.iter().any(|k| k.as_bytes() == key))
                .unwrap()
                .as_bytes(),
            bson::to_vec(&doc! {}).unwrap()
        );
    }

    #[test]
    fn walking_damaged_bytes_gives_errors_never_a_panic_or_a_wrong_answer() {
        let bytes = bson::to_vec(&doc! {
            "a": "text", "re": Regex { pattern: "x".into(), options: "".into() },
            "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2] },
            "n": { "x": [1, "é"] }, "z": 1.5,
            "tags": ["é", 2, ObjectId::from_bytes([7; 12]), true, Bson::Null],
        })
        .unwrap();
        let fields: Vec<String> = ["a", "re", "bin", "n", "z", "tags"]
            .map(String::from)
            .to_vec();
        for i in 0..bytes.len() {
            for delta in [1u8, 0x80, 0xff] {
                let mut damaged = bytes.clone();
                damaged[i] = damaged[i].wrapping_add(delta);
                // Bypass the check made on storing, as memory damage would.
                let stored = StoredDoc(Arc::from(damaged.clone()));
                let selected = stored.select(Some(&fields));
                let copied = stored.with_fields(|key| key != b"z");
                if let Ok(valid) = StoredDoc::from_bytes(&damaged) {
                    let whole = valid.to_document().unwrap();
                    let named: Document = whole
                        .iter()
                        .filter(|(k, _)| fields.contains(k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_eq!(selected.unwrap(), named, "byte {i} + {delta}");
                    let mut rest = whole.clone();
                    rest.remove("z");
                    assert_eq!(
                        copied.unwrap().to_document().unwrap(),
                        rest,
                        "byte {i} + {delta}"
                    );
                }
            }
        }
        assert!(StoredDoc(Arc::from(&bytes[..3]))
            .select(Some(&fields))
            .is_err());
    }
}
