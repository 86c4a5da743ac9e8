//! Aggregation pipelines: stage parsing and execution, accumulators and expressions.
//! STUB: replaced by the aggregation module work.

pub mod expression;

use crate::error::{Error, Result};
use bson::Document;

/// Access a pipeline needs beyond its input: other collections of the same database.
pub trait PipelineContext {
    /// All documents of `collection` in the current database (empty if it does not exist).
    fn collection_documents(&self, collection: &str) -> Result<Vec<Document>>;
}

#[derive(Debug, Clone)]
pub struct Pipeline {}

impl Pipeline {
    /// Parse the `pipeline` array of an `aggregate` command; `vars` are its `let` variables.
    pub fn parse(_stages: &[Document], _vars: &Document) -> Result<Pipeline> {
        Err(Error::not_supported("aggregation"))
    }

    /// The filter of a leading `$match` stage, so the caller can select input through an index.
    pub fn leading_match(&self) -> Option<&Document> {
        None
    }

    /// Whether the pipeline contains the named stage anywhere at top level.
    pub fn has_stage(&self, _name: &str) -> bool {
        false
    }

    pub fn run(&self, _input: Vec<Document>, _ctx: &dyn PipelineContext) -> Result<Vec<Document>> {
        Err(Error::not_supported("aggregation"))
    }
}
