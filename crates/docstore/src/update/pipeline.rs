//! Aggregation-pipeline updates (`u: [{$set: ...}, ...]`), run on the one document being
//! updated with `_id` kept immutable. Parsing them (the stages mongod allows inside an update)
//! is `Pipeline::parse_for_update`, which `$merge` uses too.

use super::format;
use crate::aggregation::{AggregatedCollection, Pipeline, PipelineContext};
use crate::error::{Error, ErrorCode, Result};
use bson::Document;

/// An update pipeline has no other collections to read.
struct NoCollections;

impl PipelineContext for NoCollections {
    fn collection_documents(&self, _collection: &str) -> Result<Vec<Document>> {
        Ok(Vec::new())
    }

    fn aggregated_collection(&self) -> Result<AggregatedCollection> {
        // `parse` admits no `$collStats`, the only stage that asks.
        Err(Error::internal(
            "an update pipeline aggregates no collection",
        ))
    }
}

/// Run the pipeline on `doc`; the result replaces it, keeping the original `_id` (restored
/// first when the pipeline dropped it; error 66 when the pipeline changed it).
pub(super) fn apply(pipeline: &Pipeline, doc: &Document, now: bson::DateTime) -> Result<Document> {
    let out = run(pipeline, doc, now)?;
    let mut updated = Document::new();
    match (doc.get("_id"), out.get("_id")) {
        (Some(old), Some(new)) if !super::same_id(old, new) => {
            return Err(Error::new(
                ErrorCode::ImmutableField,
                format!(
                    "After applying the update, the (immutable) field '_id' was found to have \
                     been altered to {}",
                    format::element("_id", new)
                ),
            ));
        }
        (Some(old), None) => {
            updated.insert("_id", old.clone());
        }
        _ => {}
    }
    for (k, v) in out {
        updated.insert(k, v);
    }
    Ok(updated)
}

/// The document an upsert inserts: the pipeline run on the seed built from the query.
pub(super) fn run(pipeline: &Pipeline, doc: &Document, now: bson::DateTime) -> Result<Document> {
    let mut out = pipeline.run_at(vec![doc.clone()], &NoCollections, now)?;
    match (out.len(), out.pop()) {
        (1, Some(d)) => Ok(d),
        _ => Err(Error::internal(
            "an update pipeline must produce exactly one document",
        )),
    }
}
