//! Find projections: inclusion/exclusion, dotted paths, `$slice`, `$elemMatch`, positional `.$`.
//! STUB: replaced by the query module work.

use crate::error::{Error, Result};
use bson::Document;

#[derive(Debug, Clone)]
pub struct Projection {}

impl Projection {
    pub fn parse(_spec: &Document) -> Result<Projection> {
        Err(Error::not_supported("projection"))
    }

    /// Apply to one document; `matched_position` serves the positional `.$` projection.
    pub fn apply(&self, doc: &Document, _matched_position: Option<usize>) -> Result<Document> {
        Ok(doc.clone())
    }
}
