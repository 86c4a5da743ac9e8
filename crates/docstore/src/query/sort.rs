//! Sort specifications: several keys, dotted paths, MongoDB's cross-type order, arrays sorting by
//! their least (ascending) or greatest (descending) element.
//! STUB: replaced by the query module work.

use crate::error::{Error, Result};
use bson::Document;
use std::cmp::Ordering;

#[derive(Debug, Clone)]
pub struct SortSpec {
    /// (dotted path, ascending?)
    pub keys: Vec<(String, bool)>,
}

impl SortSpec {
    pub fn parse(_spec: &Document) -> Result<SortSpec> {
        Err(Error::not_supported("sort"))
    }

    pub fn compare(&self, _a: &Document, _b: &Document) -> Ordering {
        Ordering::Equal
    }
}
