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

/// `create` options docstore refuses by name (the rest of MongoDB's are implemented below).
const CREATE_UNSUPPORTED: &[&str] = &[
    "viewOn",
    "pipeline",
    "clusteredIndex",
    "changeStreamPreAndPostImages",
    "encryptedFields",
    "storageEngine",
    "indexOptionDefaults",
];

/// The `create` options mongod takes alongside `timeseries` (its
/// `kAllowedCollectionCreationOptions`); any other is 72 InvalidOptions.
const TIMESERIES_COMPATIBLE: &[&str] = &[
    "timeseries",
    "expireAfterSeconds",
    "collation",
    "storageEngine",
    "indexOptionDefaults",
];

pub(crate) fn create(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    if args.get("timeseries").is_some() {
        return create_timeseries(state, db, args);
    }
    if args.get("expireAfterSeconds").is_some() && args.get("clusteredIndex").is_none() {
        return Err(Error::new(
            ErrorCode::InvalidOptions,
            "'expireAfterSeconds' is only supported on time-series collections or when the \
             'clusteredIndex' option is specified",
        ));
    }
    for opt in CREATE_UNSUPPORTED {
        if args.get(opt).is_some() {
            return Err(Error::not_supported(format!("create option '{opt}'")));
        }
    }
    args.allow_only(&[
        "capped",
        "size",
        "max",
        "validator",
        "validationLevel",
        "validationAction",
        "collation",
        "idIndex",
    ])?;
    let coll = args.collection()?;
    let options = create_options(args)?;
    let lsn = state.catalog.create_collection(db, coll, options)?;
    Ok(Reply::write(Document::new(), lsn))
}

/// `create` of a time-series collection: the `timeseries` option with mongod's defaults filled
/// in, `expireAfterSeconds` and a default collation; other options are refused as mongod
/// refuses them (72). Creating it again with the same options succeeds, as in mongod.
fn create_timeseries(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    use crate::collection::timeseries;
    let coll = args.collection()?;
    for (field, value) in args.cmd.iter().skip(1) {
        let compatible = TIMESERIES_COMPATIBLE.contains(&field.as_str())
            || super::args::is_generic_field(field)
            || (field == "capped" && value == &Bson::Boolean(false));
        if !compatible {
            return Err(Error::new(
                ErrorCode::InvalidOptions,
                format!("{db}.{coll}: 'timeseries' is not allowed with '{field}'"),
            ));
        }
    }
    for opt in ["storageEngine", "indexOptionDefaults"] {
        if args.get(opt).is_some() {
            return Err(Error::not_supported(format!("create option '{opt}'")));
        }
    }
    let spec = args
        .get("timeseries")
        .ok_or_else(|| Error::internal("create_timeseries without 'timeseries'"))?;
    let mut options = doc! { "timeseries": timeseries::parse_create(spec)? };
    if let Some(v) = args.get("expireAfterSeconds") {
        options.insert(
            "expireAfterSeconds",
            timeseries::parse_expire_after_seconds("create", v)?,
        );
    }
    if let Some(c) = crate::collation::parse(args.get("collation"))?.or_default(None) {
        options.insert("collation", c.spec().clone());
    }
    if let Some(existing) = state.catalog.get(db, coll) {
        if existing.read().options == options {
            return Ok(Reply::read(Document::new()));
        }
    }
    let lsn = state.catalog.create_collection(db, coll, options)?;
    Ok(Reply::write(Document::new(), lsn))
}

/// The options a `create` stores, as `listCollections` shows them: the capped limits as given,
/// a validator with its level and action (mongod fills in their defaults), and the default
/// collation resolved in full.
fn create_options(args: &Args<'_>) -> Result<Document> {
    use crate::collection::validation::{Capped, Validator};
    let mut options = Document::new();
    if args.get("capped") == Some(&Bson::Boolean(true)) {
        options.insert("capped", true);
        for field in ["size", "max"] {
            if let Some(v) = args.get(field) {
                options.insert(field, v.clone());
            }
        }
    } else if let Some(v) = args.get("capped") {
        if !matches!(v, Bson::Boolean(_)) {
            return Err(Error::type_mismatch(
                "BSON field 'create.capped' is the wrong type, expected type 'bool'",
            ));
        }
    }
    if let Some(v) = args.get("validator") {
        options.insert("validator", v.clone());
    }
    for (field, default) in [("validationLevel", "strict"), ("validationAction", "error")] {
        match args.get(field) {
            Some(v) => {
                options.insert(field, v.clone());
            }
            None if options.contains_key("validator") => {
                options.insert(field, default);
            }
            None => {}
        }
    }
    // The resolved collation becomes the collection's default (`{locale: "simple"}` is none).
    if let Some(c) = crate::collation::parse(args.get("collation"))?.or_default(None) {
        options.insert("collation", c.spec().clone());
    }
    Capped::from_options(&options)?;
    Validator::from_options(&options)?;
    Ok(options)
}

/// `collMod`: change a collection's validator, validation level and action, or a capped
/// collection's `cappedSize`/`cappedMax` (MongoDB 6.0+), or a time-series collection's
/// `expireAfterSeconds` and granularity; other changes are refused by name.
pub(crate) fn coll_mod(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    use crate::collection::validation::{parse_action, parse_level, Capped, Validator};
    let coll = args.collection()?;
    let is_timeseries = state
        .catalog
        .get(db, coll)
        .is_some_and(|c| c.read().timeseries().is_some());
    if is_timeseries {
        return coll_mod_timeseries(state, db, coll, args);
    }
    if args.get("timeseries").is_some() {
        return Err(Error::new(
            ErrorCode::InvalidOptions,
            "option only supported on a time-series collection: timeseries",
        ));
    }
    for opt in [
        "index",
        "viewOn",
        "pipeline",
        "expireAfterSeconds",
        "changeStreamPreAndPostImages",
        "clusteredIndex",
        "dryRun",
    ] {
        if args.get(opt).is_some() {
            return Err(Error::not_supported(format!("collMod option '{opt}'")));
        }
    }
    args.allow_only(&[
        "validator",
        "validationLevel",
        "validationAction",
        "cappedSize",
        "cappedMax",
    ])?;
    // Each given option parses alone first, so a bad one is refused before anything changes.
    if let Some(v) = args.get("validator") {
        crate::collection::validation::parse_validator_filter(v)?;
    }
    if let Some(v) = args.get("validationLevel") {
        parse_level(v)?;
    }
    if let Some(v) = args.get("validationAction") {
        parse_action(v)?;
    }
    let outcome = state.catalog.write(db, coll, false, |c| {
        let mut options = c.options.clone();
        for field in ["validator", "validationLevel", "validationAction"] {
            if let Some(v) = args.get(field) {
                options.insert(field, v.clone());
            }
        }
        if options.contains_key("validator") {
            for (field, default) in [("validationLevel", "strict"), ("validationAction", "error")] {
                if !options.contains_key(field) {
                    options.insert(field, default);
                }
            }
        }
        for (field, stored) in [("cappedSize", "size"), ("cappedMax", "max")] {
            let Some(v) = args.get(field) else { continue };
            if c.capped().is_none() {
                return Err(Error::new(
                    ErrorCode::InvalidOptions,
                    format!("'{field}' can only be set on a capped collection"),
                ));
            }
            options.insert(stored, v.clone());
        }
        Capped::from_options(&options)?;
        Validator::from_options(&options)?;
        c.set_options(options);
        Ok(())
    })?;
    match outcome {
        Some(o) => o.value.map(|()| Reply::write(Document::new(), o.lsn)),
        None => Err(Error::new(
            ErrorCode::NamespaceNotFound,
            format!("ns does not exist: {db}.{coll}"),
        )),
    }
}

/// `collMod` of a time-series collection: `expireAfterSeconds` (a number of seconds, or "off"
/// to stop expiry) and `timeseries: {granularity}` growing coarser; the options mongod refuses
/// on a time-series collection are refused with its 72, the rest it takes by name (115).
fn coll_mod_timeseries(
    state: &Arc<ServerState>,
    db: &str,
    coll: &str,
    args: &Args<'_>,
) -> Result<Reply> {
    use crate::collection::timeseries;
    for (field, _) in args.cmd.iter().skip(1) {
        match field.as_str() {
            "expireAfterSeconds" | "timeseries" => {}
            "validator" | "validationLevel" | "validationAction" | "cappedSize" | "cappedMax"
            | "viewOn" | "pipeline" | "clusteredIndex" => {
                return Err(Error::new(
                    ErrorCode::InvalidOptions,
                    format!("option not supported on a time-series collection: {field}"),
                ))
            }
            "changeStreamPreAndPostImages" | "dryRun" => {
                return Err(Error::not_supported(format!("collMod option '{field}'")))
            }
            f if super::args::is_generic_field(f) => {}
            other => {
                return Err(Error::location(
                    40415,
                    format!("BSON field 'collMod.{other}' is an unknown field."),
                ))
            }
        }
    }
    // `Some(None)`: expiry turned off.
    let expire = match args.get("expireAfterSeconds") {
        None => None,
        Some(Bson::String(s)) if s == "off" => Some(None),
        Some(Bson::String(s)) => {
            return Err(Error::new(
                ErrorCode::InvalidOptions,
                format!("Invalid string value for the 'clusteredIndex::expireAfterSeconds' option. Got: '{s}'. Accepted value is 'off'"),
            ))
        }
        Some(v) => Some(Some(timeseries::parse_expire_after_seconds("collMod", v)?)),
    };
    let outcome = state.catalog.write(db, coll, false, |c| {
        let mut options = c.options.clone();
        if let Some(change) = args.get("timeseries") {
            let stored = match options.get("timeseries") {
                Some(Bson::Document(d)) => d.clone(),
                _ => return Err(Error::internal("a time-series collection lost its options")),
            };
            options.insert("timeseries", timeseries::modify(&stored, change)?);
        }
        match expire {
            Some(Some(secs)) => {
                options.insert("expireAfterSeconds", secs);
            }
            Some(None) => {
                options.remove("expireAfterSeconds");
            }
            None => {}
        }
        if options != c.options {
            c.set_options(options);
        }
        Ok(())
    })?;
    match outcome {
        Some(o) => o.value.map(|()| Reply::write(Document::new(), o.lsn)),
        None => Err(Error::new(
            ErrorCode::NamespaceNotFound,
            format!("ns does not exist: {db}.{coll}"),
        )),
    }
}

/// The `size` (and optional `max`) of `convertToCapped`/`cloneCollectionAsCapped`, as the
/// options of the capped collection they make.
fn capped_options(args: &Args<'_>) -> Result<Document> {
    let Some(size) = args.get("size") else {
        return Err(Error::location(
            40414,
            format!(
                "BSON field '{}.size' is missing but a required field",
                args_name(args)
            ),
        ));
    };
    let mut options = doc! { "capped": true, "size": size.clone() };
    if let Some(max) = args.get("max") {
        options.insert("max", max.clone());
    }
    crate::collection::validation::Capped::from_options(&options)?;
    Ok(options)
}

fn args_name(args: &Args<'_>) -> &'static str {
    if args.get("convertToCapped").is_some() {
        "convertToCapped"
    } else {
        "cloneCollectionAsCapped"
    }
}

/// `convertToCapped`: the collection becomes capped in place, keeping its newest documents
/// that fit; as in MongoDB, its indexes other than `_id`'s are dropped.
pub(crate) fn convert_to_capped(
    state: &Arc<ServerState>,
    db: &str,
    args: &Args<'_>,
) -> Result<Reply> {
    args.allow_only(&["size", "max"])?;
    let coll = args.collection()?;
    let options = capped_options(args)?;
    let outcome = state.catalog.write(db, coll, false, |c| {
        let mut kept = c.options.clone();
        kept.remove("capped");
        kept.remove("size");
        kept.remove("max");
        let mut merged = options.clone();
        merged.extend(kept);
        c.drop_all_indexes();
        c.set_options(merged);
        c.enforce_cap();
    })?;
    match outcome {
        Some(o) => Ok(Reply::write(Document::new(), o.lsn)),
        None => Err(Error::new(
            ErrorCode::NamespaceNotFound,
            format!("source collection {db}.{coll} does not exist"),
        )),
    }
}

/// `cloneCollectionAsCapped`: a new capped collection `toCollection` holding the source's
/// documents in natural order, the oldest dropped as the cap requires.
pub(crate) fn clone_collection_as_capped(
    state: &Arc<ServerState>,
    db: &str,
    args: &Args<'_>,
) -> Result<Reply> {
    args.allow_only(&["toCollection", "size", "max"])?;
    let from = args.collection()?;
    let to = args.string("toCollection")?.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'cloneCollectionAsCapped.toCollection' is missing but a required field",
        )
    })?;
    let options = capped_options(args)?;
    let Some(source) = state.catalog.get(db, from) else {
        return Err(Error::new(
            ErrorCode::NamespaceNotFound,
            format!("source collection {db}.{from} does not exist"),
        ));
    };
    let docs: Vec<Document> = source
        .read()
        .all_documents()
        .map(|d| d.to_document())
        .collect::<Result<_>>()?;
    state.catalog.create_collection(db, to, options)?;
    let outcome = state.catalog.write(db, to, false, |c| {
        for doc in docs {
            c.insert(doc)?;
        }
        Ok(())
    })?;
    match outcome {
        Some(o) => o.value.map(|()| Reply::write(Document::new(), o.lsn)),
        None => Err(Error::internal(
            "the capped copy vanished while it was filled",
        )),
    }
}

pub(crate) fn drop(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
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

pub(crate) fn drop_database(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&[])?;
    let lsn = state.catalog.drop_database(db)?;
    Ok(Reply::write(doc! { "dropped": db }, lsn))
}

pub(crate) fn list_collections(
    state: &Arc<ServerState>,
    db: &str,
    args: &Args<'_>,
) -> Result<Reply> {
    args.allow_only(&["filter", "nameOnly", "authorizedCollections", "cursor"])?;
    let filter = match args.document("filter")? {
        Some(f) => Some(Filter::parse(f)?),
        None => None,
    };
    let name_only = args.bool("nameOnly", false)?;
    let batch_size = batch_size(args)?;
    let mut out = Vec::new();
    for (name, handle) in state.catalog.collections(db) {
        let c = handle.read();
        // A time-series collection is listed as mongod lists one (`type: "timeseries"`, no
        // `idIndex`: mongod's is a view over its buckets), but has no `system.buckets.*`.
        let kind = if c.timeseries().is_some() {
            "timeseries"
        } else {
            "collection"
        };
        let entry = if name_only {
            doc! { "name": name, "type": kind }
        } else if c.timeseries().is_some() {
            doc! {
                "name": name,
                "type": kind,
                "options": c.options.clone(),
                "info": { "readOnly": false },
            }
        } else {
            doc! {
                "name": name,
                "type": kind,
                "options": c.options.clone(),
                "info": { "readOnly": false },
                "idIndex": c.indexes()[0].spec.to_document(),
            }
        };
        std::mem::drop(c);
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

pub(crate) fn list_databases(state: &Arc<ServerState>, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["filter", "nameOnly", "authorizedDatabases"])?;
    let filter = match args.document("filter")? {
        Some(f) => Some(Filter::parse(f)?),
        None => None,
    };
    let name_only = args.bool("nameOnly", false)?;
    let mut total = 0i64;
    let mut out = Vec::new();
    // A mongod always has `admin`, `config` and `local`, and lists them; docstore keeps nothing
    // of its own in them, so they are listed empty unless clients stored something there.
    let mut names = state.catalog.database_names();
    names.extend(["admin", "config", "local"].map(String::from));
    names.sort();
    names.dedup();
    for name in names {
        let size: i64 = state
            .catalog
            .collections(&name)
            .iter()
            .map(|(_, c)| c.read().data_size() as i64)
            .sum();
        let entry = if name_only {
            doc! { "name": name }
        } else {
            doc! { "name": name, "sizeOnDisk": size, "empty": size == 0 }
        };
        // As in mongod, `totalSize` counts only the databases the filter lets through.
        if filter.as_ref().is_none_or(|f| f.matches(&entry)) {
            total += size;
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

pub(crate) fn rename_collection(
    state: &Arc<ServerState>,
    db: &str,
    args: &Args<'_>,
) -> Result<Reply> {
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

pub(crate) fn create_indexes(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
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

pub(crate) fn list_indexes(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
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

pub(crate) fn drop_indexes(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
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

pub(crate) fn db_stats(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
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

pub(crate) fn coll_stats(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
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
