//! The `aggregate` command: pick the input documents (through an index when the pipeline starts
//! with `$match`), run the pipeline, return a cursor, or write the results with `$out`/`$merge`.

use super::args::Args;
use super::crud::{cursor_reply, prepare_for_insert};
use super::read_spec::ReadSpec;
use super::Reply;
use crate::aggregation::{
    AggregatedCollection, MergeSpec, Pipeline, PipelineContext, TerminalWrite, WhenMatched,
    WhenNotMatched,
};
use crate::catalog::{validate_namespace, Catalog};
use crate::collection::{Collection, QuerySpec};
use crate::error::{Error, ErrorCode, Result};
use crate::expression::Expression;
use crate::index::{IndexSpec, RecordId};
use crate::query::Filter;
use crate::state::ServerState;
use bson::{doc, Bson, Document};
use std::sync::Arc;

/// What an `aggregate` pipeline reads besides its input: other collections of the same
/// database (`$lookup`) and the aggregated collection's figures (`$collStats`).
struct DatabaseContext<'a> {
    state: &'a ServerState,
    db: &'a str,
    /// The collection the command names.
    collection: &'a str,
}

impl PipelineContext for DatabaseContext<'_> {
    fn collection_documents(&self, collection: &str) -> Result<Vec<Document>> {
        Ok(match self.state.catalog.get(self.db, collection) {
            Some(handle) => handle
                .read()
                .all_documents()
                .map(|d| d.to_document())
                .collect::<Result<_>>()?,
            None => Vec::new(),
        })
    }

    fn aggregated_collection(&self) -> Result<AggregatedCollection> {
        Ok(AggregatedCollection {
            namespace: format!("{}.{}", self.db, self.collection),
            host: super::admin::host(self.state),
            stats: self
                .state
                .catalog
                .get(self.db, self.collection)
                .map(|handle| handle.read().stats()),
        })
    }
}

/// The parsed command, shared with `explain`.
pub(crate) struct AggregateSpec {
    pub collection: String,
    pub pipeline: Pipeline,
    pub input: ReadSpec,
    pub batch_size: Option<usize>,
    /// The documents of a leading `$documents` stage (database-level `aggregate: 1`), which
    /// are the pipeline's input instead of a collection's.
    pub documents: Option<Vec<Document>>,
    /// A leading `$listLocalSessions` stage's argument: the sessions it lists are the input.
    pub list_sessions: Option<Bson>,
    /// The command's `collation` (the collection's default applies without one): in force for
    /// the whole pipeline, as mongod applies it to `$match`, `$sort`, `$group`, `$lookup`...
    pub collation: crate::collation::Requested,
}

impl AggregateSpec {
    /// The collation the pipeline runs under.
    pub(crate) fn collation_in_force(
        &self,
        state: &ServerState,
        db: &str,
    ) -> Option<Arc<crate::collation::Collation>> {
        let default = state
            .catalog
            .get(db, &self.collection)
            .and_then(|h| h.read().default_collation().cloned());
        self.collation.clone().or_default(default)
    }
}

/// The collection name a database-level aggregation reports in its cursor's namespace.
const COLLECTIONLESS: &str = "$cmd.aggregate";

pub(crate) fn parse(args: &Args<'_>, explain: bool) -> Result<AggregateSpec> {
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
    let collectionless = match args.get("aggregate") {
        Some(Bson::String(_)) => false,
        Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)))
            if crate::value::to_f64(v) == Some(1.0) =>
        {
            true
        }
        _ => {
            return Err(args
                .collection()
                .err()
                .unwrap_or_else(|| Error::bad_value("bad collection")))
        }
    };
    let collation = crate::collation::parse(args.get("collation"))?;
    let stages = args.documents("pipeline")?;
    let mut stages: Vec<Document> = stages.into_iter().cloned().collect();
    let vars = args.let_vars()?.unwrap_or_default();
    let mut list_sessions = None;
    let (collection, documents) = if collectionless {
        let first = stages.first().and_then(|s| s.keys().next()).cloned();
        if let Some(refusal) = first
            .as_deref()
            .and_then(|f| crate::support::refusal(crate::support::Kind::Stage, f))
        {
            // `$currentOp`, `$listLocalSessions`, `$changeStream` ... are collection-less
            // stages: refused by name, not blamed on a missing collection.
            return Err(refusal);
        }
        if first.as_deref() == Some("$listLocalSessions") {
            let stage = stages.remove(0);
            list_sessions = stage.get("$listLocalSessions").cloned();
            (COLLECTIONLESS.to_string(), Some(Vec::new()))
        } else if first.as_deref() != Some("$documents") {
            return Err(Error::new(
                ErrorCode::InvalidNamespace,
                format!(
                    "{{aggregate: 1}} is not valid for '{}'; a collection is required.",
                    first.unwrap_or_else(|| "an empty pipeline".into())
                ),
            ));
        } else {
            let stage = stages.remove(0);
            if stage.len() != 1 {
                return Err(Error::location(
                    40323,
                    "A pipeline stage specification object must contain exactly one field.",
                ));
            }
            let spec = stage.get("$documents").expect("checked above");
            (
                COLLECTIONLESS.to_string(),
                Some(documents_stage(spec, &vars)?),
            )
        }
    } else {
        if stages.first().is_some_and(|s| s.contains_key("$documents")) {
            return Err(Error::new(
                ErrorCode::InvalidNamespace,
                "$documents may only be run with a database-level aggregation ({aggregate: 1})",
            ));
        }
        (args.collection()?.to_string(), None)
    };
    super::args::check_api_strict_stages(args.cmd, &stages)?;
    let pipeline = Pipeline::parse(&stages, &vars)?;
    if !pipeline.leading_text_match()
        && stages
            .iter()
            .any(|s| crate::aggregation::uses_text_score(&Bson::Document(s.clone())))
    {
        return Err(crate::collection::text_score_unavailable());
    }
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
        list_sessions,
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
        documents,
        collation,
    })
}

/// `$listLocalSessions: {}` (this user's sessions), `{allUsers: true}` or `{users: [{user,
/// db}, ...]}`: the sessions this server has seen, newest use first (see `crate::sessions`).
fn list_local_sessions(state: &ServerState, spec: &Bson) -> Result<Vec<Document>> {
    let Bson::Document(spec) = spec else {
        return Err(Error::type_mismatch(
            "$listLocalSessions must take a nested object but found a different type",
        ));
    };
    let mut all = false;
    let mut users: Option<Vec<String>> = None;
    for (field, value) in spec {
        match (field.as_str(), value) {
            ("allUsers", Bson::Boolean(b)) => all = *b,
            ("users", Bson::Array(list)) => {
                let mut names = Vec::new();
                for u in list {
                    match u {
                        Bson::Document(d) => match (d.get_str("user"), d.get_str("db")) {
                            (Ok(user), Ok(db)) => names.push(format!("{user}@{db}")),
                            _ => {
                                return Err(Error::location(
                                    40414,
                                    "BSON field 'ListSessionsUser.user' is missing but a \
                                     required field",
                                ))
                            }
                        },
                        _ => return Err(Error::type_mismatch("users must be objects")),
                    }
                }
                users = Some(names);
            }
            (field, _) => {
                return Err(Error::location(
                    40415,
                    format!("BSON field '$listLocalSessions.{field}' is an unknown field."),
                ))
            }
        }
    }
    if all && users.is_some() {
        return Err(Error::bad_value(
            "$listLocalSessions may not specify both allUsers and users",
        ));
    }
    let current = match &state.auth {
        Some(u) => format!("{}@admin", u.name()),
        None => String::new(),
    };
    Ok(state.sessions.list(|user| {
        all || users
            .as_ref()
            .map_or(user == current, |names| names.iter().any(|n| n == user))
    }))
}

/// `$documents: <expression>`: evaluated once (no input document; `let` variables and `$$NOW`
/// are visible) to an array of documents.
fn documents_stage(spec: &Bson, vars: &Document) -> Result<Vec<Document>> {
    let value = Expression::parse(spec)?.evaluate(&Document::new(), vars)?;
    let Some(Bson::Array(items)) = value else {
        return Err(Error::location(
            5858203,
            "error during lookup: $documents field must be an array of documents",
        ));
    };
    items
        .into_iter()
        .map(|item| match item {
            Bson::Document(d) => Ok(d),
            other => Err(Error::location(
                40228,
                format!(
                    "'newRoot' expression must evaluate to an object, but resulting value was: \
                     {other}. Type of resulting value: '{}'.",
                    crate::value::type_name(&other)
                ),
            )),
        })
        .collect()
}

/// `aggregate` without `explain: true` (which the dispatcher sends to `explain`).
pub(crate) fn aggregate(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    let mut spec = parse(args, false)?;
    if let Some(sessions) = &spec.list_sessions {
        spec.documents = Some(list_local_sessions(state, sessions)?);
    }
    let _collation = crate::collation::enter(spec.collation_in_force(state, db));
    let ctx = DatabaseContext {
        state,
        db,
        collection: &spec.collection,
    };
    let mut results = match &spec.documents {
        // `$documents` input: the whole pipeline runs over it, its leading `$match` included.
        Some(docs) => spec.pipeline.run(docs.clone(), &ctx)?,
        // `$collStats` first: the collection's documents are not the input.
        None if spec.pipeline.ignores_input() => spec.pipeline.run(Vec::new(), &ctx)?,
        None => collection_results(state, db, &spec, &ctx)?,
    };
    for d in &mut results {
        crate::text::strip_score(d);
    }
    let ns = format!("{db}.{}", spec.collection);
    if let Some(terminal) = spec.pipeline.terminal_write() {
        let target = terminal.target();
        let target_db = target.db.as_deref().unwrap_or(db);
        validate_namespace(target_db, &target.coll)?;
        let bypass = args.bool("bypassDocumentValidation", false)?;
        let lsn = match terminal {
            TerminalWrite::Out(_) => {
                write_out(&state.catalog, target_db, &target.coll, results, bypass)?
            }
            TerminalWrite::Merge(m) => write_merge(&state.catalog, target_db, m, results, bypass)?,
        };
        return Ok(Reply::write(
            cursor_reply(&ns, 0, "firstBatch", Vec::new()),
            lsn,
        ));
    }
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

/// The pipeline's results over a collection, its leading `$match` answered by the planner.
fn collection_results(
    state: &Arc<ServerState>,
    db: &str,
    spec: &AggregateSpec,
    ctx: &DatabaseContext<'_>,
) -> Result<Vec<Document>> {
    if let Some(geo) = spec.pipeline.leading_geo_near() {
        let input = match state.catalog.get(db, &spec.collection) {
            Some(handle) => handle.read().geo_near(geo, false)?.0,
            None => return Err(crate::collection::geo_near_without_collection()),
        };
        return spec.pipeline.without_leading_match().run(input, ctx);
    }
    let hits = match state.catalog.get(db, &spec.collection) {
        Some(handle) => {
            let c = handle.read();
            let counting = spec.pipeline.only_counts_after_match();
            let mut query = spec.input.query_spec();
            if counting {
                // A capped count (`count_documents` with a `limit`) stops matching at the cap.
                query.limit = spec.pipeline.used_after_match();
            }
            let (hits, _) = c.query(&query)?;
            if counting {
                // A count: the stages after the match see how many documents come, never what
                // they hold, so decoding every match (a common word's hundreds of thousands of
                // posts, bodies and all) would be wasted.
                let input = vec![Document::new(); hits.len()];
                drop(c);
                return spec.pipeline.without_leading_match().run(input, ctx);
            }
            hits
        }
        None => Vec::new(),
    };
    // Decoded outside the collection's lock (the hits share the stored bytes).
    let decode = |h: crate::collection::Hit, fields: Option<&[String]>| {
        let mut d = h.doc.select(fields)?;
        if let Some(score) = h.score {
            d.insert(crate::text::SCORE_FIELD, score);
        }
        Ok(d)
    };
    if let Some(fields) = spec.pipeline.fields_after_match() {
        // A `$group` after the match reads a few fields of each document (a report's time,
        // kind and visitor of a million events): only those are decoded, and each match is
        // grouped as it is decoded.
        let matches = hits.into_iter().map(|h| decode(h, Some(fields)));
        return spec.pipeline.run_after_match(matches, ctx);
    }
    let input = hits
        .into_iter()
        .map(|h| decode(h, None))
        .collect::<Result<Vec<Document>>>()?;
    // The input was already selected by the leading `$match`; don't filter it twice.
    spec.pipeline.without_leading_match().run(input, ctx)
}

/// A collection holding `docs` under the given indexes, or the error inserting them (or, unless
/// `bypass`, the target's validator) raised.
fn build_collection(
    db: &str,
    coll: &str,
    options: Document,
    indexes: &[IndexSpec],
    docs: &[Document],
    bypass: bool,
) -> Result<Collection> {
    let mut fresh = Collection::new(db, coll, options);
    if fresh.capped().is_some() {
        return Err(Error::location(
            17152,
            format!("namespace '{db}.{coll}' is capped so it can't be used for $out"),
        ));
    }
    if fresh.timeseries().is_some() {
        // As the `$out` stage's own `timeseries` option is (see `aggregation::terminal`).
        return Err(Error::not_supported("$out to a time series collection"));
    }
    for spec in indexes {
        fresh.create_index(spec.clone())?;
    }
    let validator = fresh
        .validator()
        .filter(|v| !bypass && !v.is_off())
        .cloned();
    let ns = fresh.namespace();
    for doc in docs {
        if let Some(v) = &validator {
            v.check_insert(&ns, doc)?;
        }
        fresh.insert(doc.clone())?;
    }
    Ok(fresh)
}

/// `$out`: replace the target's documents with `results` in one step under its write lock,
/// keeping its options and indexes; on any error (a duplicate key, say) it is left untouched.
fn write_out(
    catalog: &Catalog,
    db: &str,
    coll: &str,
    results: Vec<Document>,
    bypass: bool,
) -> Result<u64> {
    let docs: Vec<Document> = results
        .iter()
        .map(prepare_for_insert)
        .collect::<Result<_>>()?;
    // Build outside the lock first, so a failing $out neither blocks writers nor creates the
    // target; under the lock the build is reused unless the target's indexes changed meanwhile.
    let (options, indexes) = match catalog.get(db, coll) {
        Some(handle) => {
            let c = handle.read();
            let specs: Vec<IndexSpec> = c.indexes()[1..].iter().map(|i| i.spec.clone()).collect();
            (c.options.clone(), specs)
        }
        None => (Document::new(), Vec::new()),
    };
    let prepared = build_collection(db, coll, options.clone(), &indexes, &docs, bypass)?;
    let outcome = catalog.write(db, coll, true, |c| {
        let current: Vec<IndexSpec> = c.indexes()[1..].iter().map(|i| i.spec.clone()).collect();
        let fresh = if current == indexes && c.options == options {
            Ok(prepared)
        } else {
            build_collection(db, coll, c.options.clone(), &current, &docs, bypass)
        };
        fresh.map(|fresh| c.replace_contents(fresh))
    })?;
    match outcome {
        Some(o) => o.value.map(|()| o.lsn),
        None => Err(Error::internal("$out target could not be created")),
    }
}

/// The value at a dotted path through embedded documents (arrays are not traversed).
fn value_at<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let mut parts = path.split('.');
    let mut current = doc.get(parts.next()?)?;
    for part in parts {
        match current {
            Bson::Document(d) => current = d.get(part)?,
            _ => return None,
        }
    }
    Some(current)
}

/// `on` must be `_id` or the fields of a unique, non-partial index of the target.
fn check_merge_on(catalog: &Catalog, db: &str, spec: &MergeSpec) -> Result<()> {
    if spec.on == ["_id"] {
        return Ok(());
    }
    let supported = catalog.get(db, &spec.into.coll).is_some_and(|handle| {
        handle.read().indexes().iter().any(|i| {
            i.spec.unique
                && i.spec.partial_filter.is_none()
                && i.spec.key.len() == spec.on.len()
                && spec.on.iter().all(|f| i.spec.key.contains_key(f))
        })
    });
    if supported {
        Ok(())
    } else {
        Err(Error::location(
            51183,
            "Cannot find index to verify that join fields will be unique",
        ))
    }
}

fn id_changed() -> Error {
    Error::new(
        ErrorCode::ImmutableField,
        "$merge failed to update the matching document, did you attempt to modify the _id or the \
         shard key? :: caused by :: Performing an update on the path '_id' would modify the \
         immutable field '_id'",
    )
}

/// The target document matching `doc` on the `on` fields.
fn find_match(c: &Collection, spec: &MergeSpec, doc: &Document) -> Result<Option<RecordId>> {
    let mut filter_doc = Document::new();
    for field in &spec.on {
        match value_at(doc, field) {
            None | Some(Bson::Null | Bson::Undefined | Bson::Array(_)) => {
                return Err(Error::location(
                    51132,
                    format!(
                        "$merge write error: 'on' field '{field}' cannot be missing, null, \
                         undefined or an array"
                    ),
                ))
            }
            Some(v) => {
                filter_doc.insert(field.clone(), doc! { "$eq": v.clone() });
            }
        }
    }
    if spec.on == ["_id"] {
        return Ok(doc.get("_id").and_then(|id| c.find_by_id(id)));
    }
    let filter = Filter::parse(&filter_doc)?;
    let (hits, _) = c.query(&QuerySpec {
        filter: &filter,
        filter_doc: &filter_doc,
        sort: None,
        sort_doc: None,
        hint: None,
        skip: 0,
        limit: Some(1),
        projection: None,
    })?;
    Ok(hits.first().map(|h| h.record))
}

/// The document replacing `existing` for one result, or `None` to leave it as it is.
fn merged_document(
    spec: &MergeSpec,
    existing: &Document,
    doc: &Document,
    now: bson::DateTime,
) -> Result<Option<Document>> {
    let same_id = |new: Option<&Bson>| -> Result<()> {
        match (existing.get("_id"), new) {
            (Some(old), Some(new))
                if crate::value::compare(old, new) != std::cmp::Ordering::Equal =>
            {
                Err(id_changed())
            }
            _ => Ok(()),
        }
    };
    Ok(match &spec.when_matched {
        WhenMatched::KeepExisting => None,
        // Handled by the caller as an insert, which reports the duplicate key.
        WhenMatched::Fail => None,
        WhenMatched::Replace => {
            same_id(doc.get("_id"))?;
            let mut out = Document::new();
            if let Some(id) = existing.get("_id") {
                out.insert("_id", id.clone());
            }
            for (k, v) in doc {
                if k != "_id" {
                    out.insert(k.clone(), v.clone());
                }
            }
            Some(out)
        }
        WhenMatched::Merge => {
            same_id(doc.get("_id"))?;
            let mut out = existing.clone();
            for (k, v) in doc {
                if k != "_id" {
                    out.insert(k.clone(), v.clone());
                }
            }
            Some(out)
        }
        WhenMatched::Pipeline(pipeline) => {
            let mut values = Document::new();
            for (name, expr) in &spec.vars {
                let value = Expression::parse(expr)?
                    .evaluate(doc, &Document::new())?
                    .unwrap_or(Bson::Null);
                values.insert(name.clone(), value);
            }
            let updated =
                crate::update::apply_update_pipeline(&pipeline.with_vars(&values), existing, now)
                    .map_err(|e| match e.code {
                    ErrorCode::ImmutableField => id_changed(),
                    _ => e,
                })?;
            Some(updated)
        }
    })
}

/// `$merge`: each result is matched against the target on `on` and replaced, merged, kept,
/// updated by a pipeline, inserted or discarded as the modes say. Like MongoDB, results are
/// written one by one: an error stops the stage with the earlier writes kept.
fn write_merge(
    catalog: &Catalog,
    db: &str,
    spec: &MergeSpec,
    results: Vec<Document>,
    bypass: bool,
) -> Result<u64> {
    check_merge_on(catalog, db, spec)?;
    let into_timeseries = catalog
        .get(db, &spec.into.coll)
        .is_some_and(|c| c.read().timeseries().is_some());
    if into_timeseries {
        // MongoDB documents a time-series collection as no `$merge` target.
        return Err(Error::not_supported("$merge into a time series collection"));
    }
    let now = bson::DateTime::now();
    let outcome = catalog.write(db, &spec.into.coll, true, |c| {
        c.bypass_validation(bypass);
        let mut result = Ok(());
        for doc in &results {
            let step = (|| -> Result<Option<Document>> {
                // Matching on `_id`, a result without one gets one (it then matches nothing);
                // on other fields it keeps the target's `_id` or gets one when inserted.
                let doc = if doc.contains_key("_id") || spec.on != ["_id"] {
                    doc.clone()
                } else {
                    prepare_for_insert(doc)?
                };
                match find_match(c, spec, &doc)? {
                    Some(record) if !matches!(spec.when_matched, WhenMatched::Fail) => {
                        let existing = c
                            .get(record)
                            .ok_or_else(|| Error::internal("matched record vanished"))?
                            .to_document()?;
                        match merged_document(spec, &existing, &doc, now)? {
                            Some(new) if !crate::update::same_document(&new, &existing) => {
                                c.replace(record, new.clone())?;
                                Ok(Some(new))
                            }
                            _ => Ok(None),
                        }
                    }
                    Some(_) => {
                        let doc = prepare_for_insert(&doc)?;
                        c.insert(doc.clone())?;
                        Ok(Some(doc))
                    }
                    None => match spec.when_not_matched {
                        WhenNotMatched::Discard => Ok(None),
                        WhenNotMatched::Fail => Err(Error::location(
                            13113,
                            "$merge could not find a matching document in the target collection \
                             for at least one document in the source collection",
                        )),
                        WhenNotMatched::Insert => {
                            let doc = prepare_for_insert(&doc)?;
                            c.insert(doc.clone())?;
                            Ok(Some(doc))
                        }
                    },
                }
            })();
            if let Err(e) = step {
                result = Err(e);
                break;
            }
        }
        result
    })?;
    match outcome {
        Some(o) => o.value.map(|()| o.lsn),
        None => Err(Error::internal("$merge target could not be created")),
    }
}
