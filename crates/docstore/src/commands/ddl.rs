//! Collection, index and database commands: create, drop, dropDatabase, listCollections,
//! listDatabases, renameCollection, createIndexes, listIndexes, dropIndexes, dbStats, collStats
//! (and the `$collStats` stage, which reports the same figures).

use super::args::Args;
use super::crud::cursor_reply;
use super::Reply;
use crate::error::{Error, ErrorCode, Result};
use crate::index::IndexSpec;
use crate::query::Filter;
use crate::state::ServerState;
use bson::{doc, Bson, Document};
use std::sync::Arc;

/// `create` options docstore implements; the rest are refused by name.
const CREATE_UNSUPPORTED: &[&str] = &[
    "capped",
    "size",
    "max",
    "validator",
    "validationLevel",
    "validationAction",
    "viewOn",
    "pipeline",
    "timeseries",
    "expireAfterSeconds",
    "clusteredIndex",
    "changeStreamPreAndPostImages",
    "encryptedFields",
    "storageEngine",
    "indexOptionDefaults",
];

pub fn create(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    for opt in CREATE_UNSUPPORTED {
        if let Some(v) = args.get(opt) {
            if *opt == "capped" && v == &Bson::Boolean(false) {
                continue;
            }
            return Err(Error::not_supported(format!("create option '{opt}'")));
        }
    }
    args.allow_only(&["capped", "collation", "idIndex"])?;
    super::args::check_collation(args.get("collation"))?;
    let coll = args.collection()?;
    let lsn = state.catalog.create_collection(db, coll, Document::new())?;
    Ok(Reply::write(Document::new(), lsn))
}

pub fn drop(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&[])?;
    let coll = args.collection()?;
    let (indexes, lsn) = state.catalog.drop_collection(db, coll)?;
    // MongoDB 7.0 answers ok for a collection that does not exist, and otherwise says how many
    // indexes (the `_id` index included) the collection had.
    let mut reply = Document::new();
    if let Some(n) = indexes {
        reply.insert("nIndexesWas", n as i32);
        reply.insert("ns", format!("{db}.{coll}"));
    }
    Ok(Reply::write(reply, lsn))
}

pub fn drop_database(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&[])?;
    let lsn = state.catalog.drop_database(db)?;
    Ok(Reply::write(doc! { "dropped": db }, lsn))
}

pub fn list_collections(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["filter", "nameOnly", "authorizedCollections", "cursor"])?;
    let filter = match args.document("filter")? {
        Some(f) => Some(Filter::parse(f)?),
        None => None,
    };
    let name_only = args.bool("nameOnly", false)?;
    let batch_size = batch_size(args)?;
    let mut out = Vec::new();
    for (name, handle) in state.catalog.collections(db) {
        let entry = if name_only {
            doc! { "name": name, "type": "collection" }
        } else {
            let c = handle.read();
            doc! {
                "name": name,
                "type": "collection",
                "options": c.options.clone(),
                "info": { "readOnly": false },
                "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
            }
        };
        if filter.as_ref().is_none_or(|f| f.matches(&entry)) {
            out.push(entry);
        }
    }
    let ns = format!("{db}.$cmd.listCollections");
    let batch = state.cursors.first_batch(&ns, out, batch_size, false);
    Ok(Reply::read(cursor_reply(
        &ns,
        batch.cursor_id,
        "firstBatch",
        batch.documents,
    )))
}

fn batch_size(args: &Args<'_>) -> Result<Option<usize>> {
    match args.document("cursor")? {
        Some(c) => Args::new("cursor", c)
            .non_negative("batchSize")
            .map(|b| b.map(|b| b as usize)),
        None => Ok(None),
    }
}

pub fn list_databases(state: &Arc<ServerState>, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["filter", "nameOnly", "authorizedDatabases"])?;
    let filter = match args.document("filter")? {
        Some(f) => Some(Filter::parse(f)?),
        None => None,
    };
    let name_only = args.bool("nameOnly", false)?;
    let mut total = 0i64;
    let mut out = Vec::new();
    for name in state.catalog.database_names() {
        let size: i64 = state
            .catalog
            .collections(&name)
            .iter()
            .map(|(_, c)| c.read().data_size() as i64)
            .sum();
        total += size;
        let entry = if name_only {
            doc! { "name": name }
        } else {
            doc! { "name": name, "sizeOnDisk": size, "empty": size == 0 }
        };
        if filter.as_ref().is_none_or(|f| f.matches(&entry)) {
            out.push(entry);
        }
    }
    let mut reply = doc! { "databases": out };
    if !name_only {
        reply.insert("totalSize", total);
        reply.insert("totalSizeMb", total / (1024 * 1024));
    }
    Ok(Reply::read(reply))
}

pub fn rename_collection(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["to", "dropTarget", "stayTemp"])?;
    if db != "admin" {
        return Err(Error::new(
            ErrorCode::Location(13),
            "renameCollection may only be run against the admin database.",
        ));
    }
    let split = |ns: &str| -> Result<(String, String)> {
        match ns.split_once('.') {
            Some((d, c)) if !d.is_empty() && !c.is_empty() => Ok((d.to_string(), c.to_string())),
            _ => Err(Error::new(
                ErrorCode::InvalidNamespace,
                format!("Invalid namespace specified '{ns}'"),
            )),
        }
    };
    let (from_db, from) = split(args.collection()?)?;
    let to = args.string("to")?.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'renameCollection.to' is missing but a required field",
        )
    })?;
    let (to_db, to) = split(to)?;
    let drop_target = args.bool("dropTarget", false)?;
    let lsn = state
        .catalog
        .rename_collection(&from_db, &from, &to_db, &to, drop_target)?;
    Ok(Reply::write(Document::new(), lsn))
}

pub fn create_indexes(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["indexes", "commitQuorum", "ignoreUnknownIndexOptions"])?;
    let coll = args.collection()?;
    let raw = args.documents("indexes")?;
    if raw.is_empty() {
        return Err(Error::bad_value(
            "Must specify at least one index to create",
        ));
    }
    let specs: Vec<IndexSpec> = raw
        .iter()
        .map(|d| IndexSpec::parse(d))
        .collect::<Result<_>>()?;
    let existed = state.catalog.get(db, coll).is_some();
    let outcome = state.catalog.write(db, coll, true, |c| {
        let before = c.indexes().len();
        let mut result = Ok(());
        for spec in &specs {
            match existing_index(c.indexes().iter().map(|i| &i.spec), spec) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            if let Err(e) = c.create_index(spec.clone()) {
                result = Err(e);
                break;
            }
        }
        (result, before, c.indexes().len())
    })?;
    let outcome = outcome.ok_or_else(|| Error::internal("collection creation failed"))?;
    let (result, before, after) = outcome.value;
    result?;
    let mut reply = doc! {
        "numIndexesBefore": before as i32,
        "numIndexesAfter": after as i32,
        "createdCollectionAutomatically": !existed,
    };
    if before == after {
        reply.insert("note", "all indexes already exist");
    }
    Ok(Reply::write(reply, outcome.lsn))
}

/// Whether an identical index exists (then creating it is a no-op); conflicting definitions
/// under the same name or key are errors 85/86 as in MongoDB.
fn existing_index<'a>(
    mut existing: impl Iterator<Item = &'a IndexSpec>,
    spec: &IndexSpec,
) -> Result<bool> {
    existing.try_fold(false, |found, other| {
        Ok(found || spec.same_definition(other)?)
    })
}

pub fn list_indexes(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["cursor"])?;
    let coll = args.collection()?;
    let batch_size = batch_size(args)?;
    let Some(handle) = state.catalog.get(db, coll) else {
        return Err(Error::new(
            ErrorCode::NamespaceNotFound,
            format!("ns does not exist: {db}.{coll}"),
        ));
    };
    let specs: Vec<Document> = handle
        .read()
        .indexes()
        .iter()
        .map(|i| i.spec.to_document())
        .collect();
    let ns = format!("{db}.{coll}");
    let batch = state.cursors.first_batch(&ns, specs, batch_size, false);
    Ok(Reply::read(cursor_reply(
        &ns,
        batch.cursor_id,
        "firstBatch",
        batch.documents,
    )))
}

pub fn drop_indexes(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["index"])?;
    let coll = args.collection()?;
    let target = args.get("index").cloned().ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'dropIndexes.index' is missing but a required field",
        )
    })?;
    let outcome = state.catalog.write(db, coll, false, |c| {
        let was = c.indexes().len() as i32;
        let names: Result<Vec<String>> = match &target {
            Bson::String(s) if s == "*" => Ok(c.drop_all_indexes()),
            Bson::String(name) => c.drop_index(name).map(|s| vec![s.name]),
            Bson::Array(names) => {
                // Check all first so a bad name drops nothing.
                let wanted: Vec<&str> = names.iter().filter_map(|n| n.as_str()).collect();
                match wanted
                    .iter()
                    .find(|n| **n == "_id_" || !c.indexes().iter().any(|i| i.spec.name == **n))
                {
                    Some(&"_id_") => Err(Error::new(
                        ErrorCode::InvalidOptions,
                        "cannot drop _id index",
                    )),
                    Some(missing) => Err(Error::new(
                        ErrorCode::IndexNotFound,
                        format!("index not found with name [{missing}]"),
                    )),
                    None => wanted
                        .iter()
                        .map(|n| c.drop_index(n).map(|s| s.name))
                        .collect(),
                }
            }
            Bson::Document(key) => {
                let name = c
                    .indexes()
                    .iter()
                    .find(|i| &i.spec.key == key)
                    .map(|i| i.spec.name.clone());
                match name {
                    Some(name) => c.drop_index(&name).map(|s| vec![s.name]),
                    None => Err(Error::new(
                        ErrorCode::IndexNotFound,
                        format!("can't find index with key: {key}"),
                    )),
                }
            }
            other => Err(Error::type_mismatch(format!(
                "dropIndexes.index must be a string, array or object, got {other}"
            ))),
        };
        (names, was)
    })?;
    let Some(outcome) = outcome else {
        return Err(Error::new(
            ErrorCode::NamespaceNotFound,
            format!("ns not found {db}.{coll}"),
        ));
    };
    let (names, was) = outcome.value;
    names?;
    Ok(Reply::write(doc! { "nIndexesWas": was }, outcome.lsn))
}

pub fn db_stats(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["scale", "freeStorage"])?;
    let scale = scale_factor(args.get("scale"), "dbStats.scale")?;
    let (mut objects, mut data, mut indexes, mut index_size) = (0i64, 0i64, 0i64, 0i64);
    let colls = state.catalog.collections(db);
    for (_, handle) in &colls {
        let s = handle.read().stats();
        objects += s.get_i64("count").unwrap_or(0);
        data += s.get_i64("size").unwrap_or(0);
        indexes += s.get_i32("nindexes").unwrap_or(0) as i64;
        index_size += s.get_i64("totalIndexSize").unwrap_or(0);
    }
    Ok(Reply::read(doc! {
        "db": db,
        "collections": colls.len() as i64,
        "views": 0i64,
        "objects": objects,
        "avgObjSize": if objects > 0 { data as f64 / objects as f64 } else { 0.0 },
        "dataSize": (data / scale) as f64,
        "storageSize": (data / scale) as f64,
        "indexes": indexes,
        "indexSize": (index_size / scale) as f64,
        "totalSize": ((data + index_size) / scale) as f64,
        "scaleFactor": scale,
    }))
}

pub fn coll_stats(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["scale"])?;
    let coll = args.collection()?;
    let scale = scale_factor(args.get("scale"), "collStats.scale")?;
    match state.catalog.get(db, coll) {
        Some(handle) => {
            let mut reply = doc! { "ns": format!("{db}.{coll}") };
            reply.extend(storage_stats(&handle.read().stats(), scale));
            Ok(Reply::read(reply))
        }
        None => Err(Error::new(
            ErrorCode::NamespaceNotFound,
            format!("Collection [{db}.{coll}] not found."),
        )),
    }
}

/// `scale` of collStats and `$collStats.storageStats`: a number of at least 1 (default 1).
fn scale_factor(value: Option<&Bson>, field: &str) -> Result<i64> {
    let scale = match value {
        None => return Ok(1),
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        // MongoDB truncates a fractional scale.
        Some(Bson::Double(d)) if d.is_finite() => *d as i64,
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field '{field}' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                crate::value::type_name(other)
            )))
        }
    };
    if scale < 1 {
        return Err(Error::location(
            51024,
            format!("BSON field 'scale' value must be >= 1, actual value '{scale}'"),
        ));
    }
    Ok(scale)
}

/// The storage figures MongoDB 7.0 reports for a collection (`collStats` and
/// `$collStats.storageStats`), sizes divided by `scale` as MongoDB does (integer division;
/// `avgObjSize` is never scaled). `stats` is `Collection::stats`.
fn storage_stats(stats: &Document, scale: i64) -> Document {
    // MongoDB sends each figure as an int32 while it fits, as an int64 beyond.
    let int = super::admin::int_or_long;
    let figure = |name: &str| stats.get_i64(name).unwrap_or(0);
    let mut index_sizes = Document::new();
    if let Ok(sizes) = stats.get_document("indexSizes") {
        for (name, bytes) in sizes {
            let bytes = match bytes {
                Bson::Int64(n) => *n,
                Bson::Int32(n) => i64::from(*n),
                _ => 0,
            };
            index_sizes.insert(name.clone(), int(bytes / scale));
        }
    }
    doc! {
        "size": int(figure("size") / scale),
        "count": int(figure("count")),
        "avgObjSize": int(figure("avgObjSize")),
        "numOrphanDocs": 0,
        "storageSize": int(figure("storageSize") / scale),
        "freeStorageSize": 0,
        "capped": false,
        "nindexes": stats.get_i32("nindexes").unwrap_or(0),
        "indexBuilds": [],
        "totalIndexSize": int(figure("totalIndexSize") / scale),
        "totalSize": int(figure("totalSize") / scale),
        "indexSizes": index_sizes,
        "scaleFactor": int(scale),
    }
}

/// True for an `aggregate` on a collection whose pipeline opens with `$collStats` (what mongosh's
/// `db.coll.stats()`, `dataSize()`, `totalIndexSize()` ... send). docstore answers that stage
/// from the catalog here; the aggregation engine runs the stages after it.
pub fn starts_with_coll_stats(cmd: &Document) -> bool {
    let first_stage = match cmd.get("pipeline") {
        Some(Bson::Array(stages)) => stages.first(),
        _ => None,
    };
    matches!(cmd.get("aggregate"), Some(Bson::String(_)))
        && !cmd.contains_key("explain")
        && matches!(first_stage, Some(Bson::Document(stage))
            if stage.len() == 1 && stage.contains_key("$collStats"))
}

/// `aggregate` with a leading `$collStats`: one document about the collection (`storageStats`
/// and `count` as MongoDB 7.0 reports them), then the rest of the pipeline over it. docstore
/// keeps no latency or query-execution counters, so `latencyStats` and `queryExecStats` are
/// refused rather than answered with made-up zeros.
pub fn coll_stats_aggregate(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&[
        "pipeline",
        "cursor",
        "allowDiskUse",
        "let",
        "hint",
        "collation",
        "bypassDocumentValidation",
    ])?;
    let coll = args.collection()?;
    let stages: Vec<Document> = args.documents("pipeline")?.into_iter().cloned().collect();
    let Some((first, rest)) = stages.split_first() else {
        return Err(Error::failed_to_parse("empty pipeline"));
    };
    let spec = match first.get("$collStats") {
        Some(Bson::Document(spec)) => spec,
        other => {
            return Err(Error::location(
                5447000,
                format!(
                    "$collStats must take a nested object but found: $collStats: {}",
                    other.map_or_else(String::new, |v| v.to_string())
                ),
            ))
        }
    };
    let cursor = args.document("cursor")?.ok_or_else(|| {
        Error::failed_to_parse(
            "The 'cursor' option is required, except for aggregate with the explain argument",
        )
    })?;
    let batch_size = Args::new("cursor", cursor)
        .non_negative("batchSize")?
        .map(|b| b as usize);
    let vars = args.let_vars()?.unwrap_or_default();
    let ns = format!("{db}.{coll}");
    let handle = state.catalog.get(db, coll);
    let missing = |what: &str| {
        Error::new(
            ErrorCode::NamespaceNotFound,
            format!(
                "Unable to retrieve {what} in $collStats stage :: caused by :: Collection [{ns}] not found."
            ),
        )
    };
    let mut out = doc! {
        "ns": ns.clone(),
        "host": super::admin::host(state),
        "localTime": bson::DateTime::now(),
    };
    for (field, value) in spec {
        match field.as_str() {
            "storageStats" => {
                let Bson::Document(options) = value else {
                    return Err(Error::type_mismatch(format!(
                        "BSON field '$collStats.storageStats' is the wrong type '{}', expected type 'object'",
                        crate::value::type_name(value)
                    )));
                };
                Args::new("$collStats.storageStats", options).allow_only(&[
                    "scale",
                    "verbose",
                    "waitForLock",
                    "numericOnly",
                ])?;
                let scale = scale_factor(options.get("scale"), "$collStats.storageStats.scale")?;
                let handle = handle.as_ref().ok_or_else(|| missing("storageStats"))?;
                out.insert("storageStats", storage_stats(&handle.read().stats(), scale));
            }
            "count" => {
                let handle = handle.as_ref().ok_or_else(|| missing("count"))?;
                let count = handle.read().stats().get_i64("count").unwrap_or(0);
                out.insert("count", super::admin::int_or_long(count));
            }
            "latencyStats" | "queryExecStats" => {
                return Err(Error::not_supported(format!("$collStats {field}")))
            }
            other => {
                return Err(Error::location(
                    40415,
                    format!("BSON field '$collStats.{other}' is an unknown field."),
                ))
            }
        }
    }
    let ctx = super::aggregate::DatabaseContext {
        catalog: &state.catalog,
        db,
    };
    let pipeline = crate::aggregation::Pipeline::parse(rest, &vars)?;
    for stage in ["$out", "$merge"] {
        if pipeline.has_stage(stage) {
            return Err(Error::not_supported(format!("{stage} after $collStats")));
        }
    }
    let results = pipeline.run(vec![out], &ctx)?;
    let batch = state.cursors.first_batch(&ns, results, batch_size, false);
    Ok(Reply::read(cursor_reply(
        &ns,
        batch.cursor_id,
        "firstBatch",
        batch.documents,
    )))
}
