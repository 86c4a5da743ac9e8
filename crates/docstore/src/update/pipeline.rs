//! Aggregation-pipeline updates (`u: [{$set: ...}, ...]`): the stages mongod allows inside an
//! update, run on the one document being updated, with `_id` kept immutable.

use super::format;
use crate::aggregation::{AggregatedCollection, Pipeline, PipelineContext};
use crate::error::{Error, ErrorCode, Result};
use crate::value;
use bson::{Bson, Document};

/// Stages whose `isAllowedWithinUpdatePipeline` constraint is true in mongod 7.0.
const ALLOWED: &[&str] = &[
    "$addFields",
    "$set",
    "$project",
    "$unset",
    "$replaceRoot",
    "$replaceWith",
];

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

/// Parse the `u` array: every element a document, the pipeline valid as an aggregation, then
/// each stage one allowed in an update (code 72 naming it otherwise, as mongod does).
pub fn parse(stages: &[Bson], vars: &Document) -> Result<Pipeline> {
    let mut docs = Vec::with_capacity(stages.len());
    for stage in stages {
        match stage {
            Bson::Document(d) => docs.push(d.clone()),
            other => {
                return Err(Error::type_mismatch(format!(
                    "Each element of the 'pipeline' array must be an object, but found {}",
                    value::type_name(other)
                )))
            }
        }
    }
    let pipeline = Pipeline::parse(&docs, vars)?;
    if let Some(terminal) = pipeline.terminal_write() {
        return Err(Error::new(
            ErrorCode::InvalidOptions,
            format!(
                "{} is not allowed to be used within an update",
                terminal.stage_name()
            ),
        ));
    }
    for name in pipeline.stage_names() {
        if !ALLOWED.contains(&name.as_str()) {
            // Stages that desugar into a `$group` are reported under that name.
            let shown = match name.as_str() {
                "$count" | "$sortByCount" | "$bucket" => "$group",
                other => other,
            };
            return Err(Error::new(
                ErrorCode::InvalidOptions,
                format!("{shown} is not allowed to be used within an update"),
            ));
        }
    }
    Ok(pipeline)
}

/// Run the pipeline on `doc`; the result replaces it, keeping the original `_id` (restored
/// first when the pipeline dropped it; error 66 when the pipeline changed it).
pub fn apply(pipeline: &Pipeline, doc: &Document, now: bson::DateTime) -> Result<Document> {
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
pub fn run(pipeline: &Pipeline, doc: &Document, now: bson::DateTime) -> Result<Document> {
    let mut out = pipeline.run_at(vec![doc.clone()], &NoCollections, now)?;
    match (out.len(), out.pop()) {
        (1, Some(d)) => Ok(d),
        _ => Err(Error::internal(
            "an update pipeline must produce exactly one document",
        )),
    }
}
