//! Secondary indexes: ordered key → record structures over an order-preserving encoding of BSON
//! values, with unique, sparse and partial variants, multikey expansion and the query planner.
//! STUB: replaced by the index module work.

pub mod keystring;
pub mod planner;

use crate::error::{Error, Result};
use bson::{doc, Bson, Document};

/// A document's position in its collection; also the natural (insertion) order.
pub type RecordId = u64;

/// An index definition as given to `createIndexes` and reported by `listIndexes`.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    pub name: String,
    /// Key pattern, e.g. `{ a: 1, b: -1 }`.
    pub key: Document,
    pub unique: bool,
    pub sparse: bool,
    pub partial_filter: Option<Document>,
    pub expire_after_seconds: Option<i64>,
}

impl IndexSpec {
    /// Parse one entry of `createIndexes.indexes` (validating options; unsupported kinds such as
    /// text or 2dsphere are errors naming the feature).
    pub fn parse(_spec: &Document) -> Result<IndexSpec> {
        Err(Error::not_supported("indexes"))
    }

    /// The `_id_` index every collection has.
    pub fn id_index() -> IndexSpec {
        IndexSpec {
            name: "_id_".into(),
            key: doc! { "_id": 1 },
            unique: true,
            sparse: false,
            partial_filter: None,
            expire_after_seconds: None,
        }
    }

    /// The form `listIndexes` returns (`v: 2`, `key`, `name`, options that are set).
    pub fn to_document(&self) -> Document {
        doc! { "v": 2, "key": self.key.clone(), "name": self.name.clone() }
    }
}

/// One index's entries.
#[derive(Debug, Clone)]
pub struct Index {
    pub spec: IndexSpec,
}

impl Index {
    pub fn new(spec: IndexSpec) -> Result<Index> {
        Ok(Index { spec })
    }

    /// Encoded keys a document contributes (several for multikey; none when sparse/partial
    /// excludes it). Errors on parallel arrays in a compound key (code 171).
    pub fn keys_for(&self, _doc: &Document) -> Result<Vec<Vec<u8>>> {
        Ok(Vec::new())
    }

    /// Duplicate-key check before inserting `keys` for record `rid` (E11000 error with
    /// `keyPattern`/`keyValue`; `ns` is `db.collection` for the message).
    pub fn check_unique(&self, _keys: &[Vec<u8>], _rid: RecordId, _ns: &str) -> Result<()> {
        Ok(())
    }

    pub fn insert(&mut self, _keys: &[Vec<u8>], _rid: RecordId) {}

    pub fn remove(&mut self, _keys: &[Vec<u8>], _rid: RecordId) {}

    /// Record ids whose keys fall within `bounds`, in key order (reversed when `reverse`),
    /// each at most once.
    pub fn scan<'a>(
        &'a self,
        _bounds: &'a planner::IndexBounds,
        _reverse: bool,
    ) -> Box<dyn Iterator<Item = RecordId> + 'a> {
        Box::new(std::iter::empty())
    }

    /// Record id of the document whose `_id` equals `id` (for the `_id_` index).
    pub fn lookup_exact(&self, _values: &[Bson]) -> Vec<RecordId> {
        Vec::new()
    }

    pub fn entry_count(&self) -> usize {
        0
    }

    pub fn is_multikey(&self) -> bool {
        false
    }
}
