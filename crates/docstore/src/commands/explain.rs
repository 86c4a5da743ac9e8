//! `explain` for find, count, distinct, aggregate, update and delete: which plan the query
//! uses (`IXSCAN` with its key pattern, or `COLLSCAN`) and how much it examined.

use super::args::Args;
use super::read_spec::ReadSpec;
use super::Reply;
use crate::collection::ExecStats;
use crate::error::{Error, Result};
use crate::query::Filter;
use crate::state::ServerState;
use bson::{doc, Bson, Document};
use std::sync::Arc;
use std::time::Instant;

pub(crate) fn explain(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["verbosity"])?;
    let inner = args.required_document("explain")?;
    let Some(name) = inner.keys().next().map(String::as_str) else {
        return Err(Error::failed_to_parse("explain needs a command"));
    };
    let inner_args = Args::new(name, inner);
    match name {
        "find" => {
            let read = read_spec_for(&inner_args, "filter", "sort", "skip", "limit")?;
            let collation = crate::collation::parse(inner_args.get("collation"))?;
            // The find's projection too: one the index keys answer is a covered read.
            let projection = super::crud::parse_projection(&inner_args, "projection")?;
            explain_projected(
                state,
                db,
                inner_args.collection()?,
                &read,
                collation,
                projection.as_ref(),
            )
        }
        "count" => {
            let read = read_spec_for(&inner_args, "query", "", "skip", "limit")?;
            let collation = crate::collation::parse(inner_args.get("collation"))?;
            explain_read(state, db, inner_args.collection()?, &read, collation)
        }
        "distinct" => {
            let read = read_spec_for(&inner_args, "query", "", "", "")?;
            let collation = crate::collation::parse(inner_args.get("collation"))?;
            explain_read(state, db, inner_args.collection()?, &read, collation)
        }
        "findAndModify" | "findandmodify" => {
            let read = read_spec_for(&inner_args, "query", "sort", "", "")?;
            let collation = crate::collation::parse(inner_args.get("collation"))?;
            explain_read(state, db, inner_args.collection()?, &read, collation)
        }
        "aggregate" => explain_aggregate(state, db, &inner_args),
        "update" | "delete" => {
            let field = if name == "update" {
                "updates"
            } else {
                "deletes"
            };
            let statements = inner_args.documents(field)?;
            let first = statements
                .first()
                .ok_or_else(|| Error::bad_value(format!("{name} needs at least one statement")))?;
            let read = read_spec_for(&Args::new("q", first), "q", "", "", "")?;
            let collation = crate::collation::parse(first.get("collation"))?;
            explain_read(state, db, inner_args.collection()?, &read, collation)
        }
        other => Err(Error::not_supported(format!("explain of '{other}'"))),
    }
}

fn read_spec_for(
    args: &Args<'_>,
    filter: &str,
    sort: &str,
    skip: &str,
    limit: &str,
) -> Result<ReadSpec> {
    let filter_doc = args.document(filter)?.cloned().unwrap_or_default();
    let given_sort = if sort.is_empty() {
        None
    } else {
        args.document(sort)?
    };
    let given_hint = args
        .get("hint")
        .filter(|h| !matches!(h, Bson::Null))
        .cloned();
    let (sort, sort_doc, hint) = super::read_spec::sort_and_hint(given_sort, given_hint)?;
    // The explained command's `let` variables, evaluated, for a filter's `$expr`.
    let filter_parsed = match args.let_vars()? {
        Some(vars) => Filter::parse_with_vars(&filter_doc, &vars)?,
        None => Filter::parse(&filter_doc)?,
    };
    Ok(ReadSpec {
        filter: filter_parsed,
        filter_doc,
        sort,
        sort_doc,
        hint,
        skip: if skip.is_empty() {
            0
        } else {
            args.non_negative(skip)?.unwrap_or(0) as usize
        },
        limit: if limit.is_empty() {
            None
        } else {
            args.i64(limit)?
                .map(|l| l.unsigned_abs() as usize)
                .filter(|l| *l > 0)
        },
    })
}

fn explain_read(
    state: &Arc<ServerState>,
    db: &str,
    coll: &str,
    read: &ReadSpec,
    collation: crate::collation::Requested,
) -> Result<Reply> {
    explain_projected(state, db, coll, read, collation, None)
}

/// [`explain_read`] of a read returning `projection` of its documents (a find's).
fn explain_projected(
    state: &Arc<ServerState>,
    db: &str,
    coll: &str,
    read: &ReadSpec,
    collation: crate::collation::Requested,
    projection: Option<&crate::query::projection::Projection>,
) -> Result<Reply> {
    let started = Instant::now();
    let stats = match state.catalog.get(db, coll) {
        Some(handle) => {
            let c = handle.read();
            let _collation =
                crate::collation::enter(collation.or_default(c.default_collation().cloned()));
            let mut query = read.query_spec();
            query.projection = projection;
            c.explain_query(&query)?.1
        }
        None => ExecStats {
            winning_plan: doc! { "stage": "EOF" },
            keys_examined: 0,
            docs_examined: 0,
            returned: 0,
        },
    };
    Ok(Reply::read(explain_reply(
        db,
        coll,
        &read.filter_doc,
        stats,
        started,
    )))
}

pub(crate) fn explain_aggregate(
    state: &Arc<ServerState>,
    db: &str,
    args: &Args<'_>,
) -> Result<Reply> {
    let spec = super::aggregate::parse(args, true)?;
    if spec.pipeline.ignores_input() {
        // No query plan to show: the pipeline reads no documents of the collection.
        return Err(Error::not_supported("explain of $collStats"));
    }
    if let Some(geo) = spec.pipeline.leading_geo_near() {
        let started = Instant::now();
        let stats = match state.catalog.get(db, &spec.collection) {
            Some(handle) => handle.read().geo_near(geo, true)?.1,
            None => return Err(crate::collection::geo_near_without_collection()),
        };
        return Ok(Reply::read(explain_reply(
            db,
            &spec.collection,
            &spec.input.filter_doc,
            stats,
            started,
        )));
    }
    let collation = spec.collation.clone();
    explain_read(state, db, &spec.collection, &spec.input, collation)
}

fn explain_reply(
    db: &str,
    coll: &str,
    filter: &Document,
    stats: ExecStats,
    started: Instant,
) -> Document {
    doc! {
        "explainVersion": "1",
        "queryPlanner": {
            "namespace": format!("{db}.{coll}"),
            "parsedQuery": filter.clone(),
            "winningPlan": stats.winning_plan.clone(),
            "rejectedPlans": [],
        },
        "executionStats": {
            "executionSuccess": true,
            "nReturned": stats.returned as i64,
            "executionTimeMillis": started.elapsed().as_millis() as i64,
            "totalKeysExamined": stats.keys_examined as i64,
            "totalDocsExamined": stats.docs_examined as i64,
            "executionStages": stats.winning_plan,
        },
        "serverInfo": { "host": "localhost", "version": "7.0.0", "gitVersion": "docstore" },
    }
}
