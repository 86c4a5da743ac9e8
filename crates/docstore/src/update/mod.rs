//! The update language: operator updates, replacements, upsert seeding, positional operators.
//! STUB: replaced by the update module work.

use crate::error::{Error, Result};
use bson::{Bson, Document};

/// What the update is applied in the context of.
#[derive(Debug, Clone, Default)]
pub struct ApplyContext {
    /// First array position matched by the query (for the positional `$`).
    pub matched_position: Option<usize>,
    /// The document is being inserted by an upsert (`$setOnInsert` applies).
    pub is_insert: bool,
    /// Time used by `$currentDate` (one value for a whole command).
    pub now: Option<bson::DateTime>,
}

/// A parsed update: operators, a replacement document, or (later) a pipeline.
#[derive(Debug, Clone)]
pub struct UpdateSpec {}

impl UpdateSpec {
    /// `update` is the `u`/`update` field of the command; `array_filters` its `arrayFilters`.
    pub fn parse(_update: &Bson, _array_filters: Option<&[Document]>) -> Result<UpdateSpec> {
        Err(Error::not_supported("updates"))
    }

    pub fn is_replacement(&self) -> bool {
        false
    }

    /// Apply in place; returns whether the document changed. On error `doc` is unchanged.
    pub fn apply(&self, _doc: &mut Document, _ctx: &ApplyContext) -> Result<bool> {
        Err(Error::not_supported("updates"))
    }

    /// The document an upsert inserts: equality fields of `filter` (including inside `$and`),
    /// then the update applied with `is_insert`, with `_id` generated when absent.
    pub fn upsert_document(&self, _filter: &Document, _ctx: &ApplyContext) -> Result<Document> {
        Err(Error::not_supported("upserts"))
    }
}
