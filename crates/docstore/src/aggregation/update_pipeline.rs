//! The pipelines an update may hold (`u: [{$set: ...}]`, `$merge`'s `whenMatched`): valid
//! aggregations whose stages are all ones mongod allows inside an update. Running them on the
//! updated document is the update module's part.

use super::Pipeline;
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

impl Pipeline {
    /// Parse the `u` array: every element a document, the pipeline valid as an aggregation, then
    /// each stage one allowed in an update (code 72 naming it otherwise, as mongod does).
    pub(crate) fn parse_for_update(stages: &[Bson], vars: &Document) -> Result<Pipeline> {
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
}
