//! Dotted field paths: reading values through embedded documents and arrays.
//! STUB: replaced by the query module work.

use bson::{Bson, Document};

/// Values found along `path`, fanning out through arrays.
pub fn collect_values(_doc: &Document, _path: &str) -> Vec<Bson> {
    Vec::new()
}
