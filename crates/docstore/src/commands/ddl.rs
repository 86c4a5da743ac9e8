//! Collection, index and database commands: create, drop, dropDatabase, listCollections,
//! listDatabases, renameCollection, createIndexes, listIndexes, dropIndexes, dbStats, collStats
//! (whose figures the `$collStats` stage reports too, through `crate::stats`).

use super::args::Args;
use super::crud::cursor_reply;
use super::Reply;
use crate::error::{Error, ErrorCode, Result};
use crate::index::IndexSpec;
use crate::query::Filter;
use crate::state::ServerState;
use crate::stats::{scale_factor, storage_stats};
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
    let mut options = Document::new();
    // The resolved collation becomes the collection's default (`{locale: "simple"}` is none).
    if let Some(c) = crate::collation::parse(args.get("collation"))?.or_default(None) {
        options.insert("collation", c.spec().clone());
    }
    let coll = args.collection()?;
    let lsn = state.catalog.create_collection(db, coll, options)?;
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
                "idIndex": c.indexes()[0].spec.to_document(),
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
            let mut spec = spec.clone();
            if let Err(e) = spec.inherit_collation(c.default_collation()) {
                result = Err(e);
                break;
            }
            match existing_index(c.indexes().iter().map(|i| &i.spec), &spec) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            if let Err(e) = c.create_index(spec) {
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
