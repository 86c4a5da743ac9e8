//! The query language: a filter document parsed once into a tree, then matched against documents.
//! STUB: replaced by the query module work.

use crate::error::{Error, Result};
use bson::{Bson, Document};

/// A parsed query filter.
#[derive(Debug, Clone)]
pub struct Filter {}

impl Filter {
    /// Parse and validate a filter (unknown operators are errors, as in MongoDB).
    pub fn parse(_filter: &Document) -> Result<Filter> {
        Err(Error::not_supported("query filters"))
    }

    /// Parse with `let` variables available to `$expr` as `$$name`.
    pub fn parse_with_vars(filter: &Document, _vars: &Document) -> Result<Filter> {
        Self::parse(filter)
    }

    pub fn matches(&self, _doc: &Document) -> bool {
        false
    }

    /// `None` when the document does not match; otherwise the first array position matched by
    /// the filter (what the positional `$` operator refers to), if any.
    pub fn matches_with_position(&self, _doc: &Document) -> Option<Option<usize>> {
        None
    }
}

/// A condition on one value: `$elemMatch` bodies, `$pull` conditions, `arrayFilters`.
#[derive(Debug, Clone)]
pub struct ElementMatcher {}

impl ElementMatcher {
    pub fn parse(_condition: &Bson) -> Result<ElementMatcher> {
        Err(Error::not_supported("element conditions"))
    }

    pub fn matches(&self, _value: &Bson) -> bool {
        false
    }
}
