//! The `aggregate` command: pick the input documents (through an index when the pipeline starts
//! with `$match`), run the pipeline, return a cursor.

use super::args::{check_collation, Args};
use super::crud::{cursor_reply, ReadSpec};
use super::Reply;
use crate::aggregation::{Pipeline, PipelineContext};
use crate::catalog::Catalog;
use crate::error::{Error, ErrorCode, Result};
use crate::query::Filter;
use crate::state::ServerState;
use bson::{Bson, Document};
use std::sync::Arc;

/// Other collections of the same database, for `$lookup`.
struct DatabaseContext<'a> {
    catalog: &'a Catalog,
    db: &'a str,
}

impl PipelineContext for DatabaseContext<'_> {
    fn collection_documents(&self, collection: &str) -> Result<Vec<Document>> {
        Ok(match self.catalog.get(self.db, collection) {
            Some(handle) => handle
                .read()
                .all_documents()
                .map(|d| (**d).clone())
                .collect(),
            None => Vec::new(),
        })
    }
}

/// The parsed command, shared with `explain`.
pub struct AggregateSpec {
    pub collection: String,
    pub pipeline: Pipeline,
    pub input: ReadSpec,
    pub batch_size: Option<usize>,
}

pub fn parse(args: &Args<'_>, explain: bool) -> Result<AggregateSpec> {
    args.allow_only(&[
        "pipeline",
        "cursor",
        "explain",
        "allowDiskUse",
        "let",
        "hint",
        "collation",
        "bypassDocumentValidation",
    ])?;
    let collection = match args.get("aggregate") {
        Some(Bson::String(_)) => args.collection()?.to_string(),
        Some(Bson::Int32(1)) | Some(Bson::Int64(1)) | Some(Bson::Double(_)) => {
            return Err(Error::not_supported(
                "collection-less aggregation (aggregate: 1)",
            ))
        }
        _ => {
            return Err(args
                .collection()
                .err()
                .unwrap_or_else(|| Error::bad_value("bad collection")))
        }
    };
    check_collation(args.get("collation"))?;
    let stages = args.documents("pipeline")?;
    let stages: Vec<Document> = stages.into_iter().cloned().collect();
    let vars = args.document("let")?.cloned().unwrap_or_default();
    let pipeline = Pipeline::parse(&stages, &vars)?;
    let cursor = args.document("cursor")?;
    if cursor.is_none() && !explain && !args.bool("explain", false)? {
        return Err(Error::failed_to_parse(
            "The 'cursor' option is required, except for aggregate with the explain argument",
        ));
    }
    let batch_size = match cursor {
        Some(c) => Args::new("cursor", c)
            .non_negative("batchSize")?
            .map(|b| b as usize),
        None => None,
    };
    let filter_doc = pipeline.leading_match().cloned().unwrap_or_default();
    let filter = if filter_doc.is_empty() {
        Filter::parse(&filter_doc)?
    } else {
        Filter::parse_with_vars(&filter_doc, &vars)?
    };
    let hint = match args.get("hint") {
        None | Some(Bson::Null) => None,
        Some(h @ (Bson::String(_) | Bson::Document(_))) => Some(h.clone()),
        Some(other) => {
            return Err(Error::failed_to_parse(format!(
                "hint must be a string or an object, got {other}"
            )))
        }
    };
    Ok(AggregateSpec {
        collection,
        pipeline,
        input: ReadSpec {
            filter,
            filter_doc,
            sort: None,
            sort_doc: None,
            hint,
            skip: 0,
            limit: None,
        },
        batch_size,
    })
}

pub fn aggregate(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    if args.bool("explain", false)? {
        return super::explain::explain_aggregate(state, db, args);
    }
    let spec = parse(args, false)?;
    for stage in ["$out", "$merge"] {
        if spec.pipeline.has_stage(stage) {
            return Err(Error::new(
                ErrorCode::CommandNotSupported,
                format!("{stage} is not supported by docstore"),
            ));
        }
    }
    let input = match state.catalog.get(db, &spec.collection) {
        Some(handle) => {
            let c = handle.read();
            let (hits, _) = c.query(&spec.input.query_spec())?;
            hits.into_iter()
                .map(|h| Arc::unwrap_or_clone(h.doc))
                .collect()
        }
        None => Vec::new(),
    };
    let ctx = DatabaseContext {
        catalog: &state.catalog,
        db,
    };
    // The input was already selected by the leading `$match`; don't filter it twice.
    let results = spec.pipeline.without_leading_match().run(input, &ctx)?;
    let ns = format!("{db}.{}", spec.collection);
    let batch = state
        .cursors
        .first_batch(&ns, results, spec.batch_size, false);
    Ok(Reply::read(cursor_reply(
        &ns,
        batch.cursor_id,
        "firstBatch",
        batch.documents,
    )))
}
