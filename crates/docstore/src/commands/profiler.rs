//! The database profiler, as mongod has it: `profile` sets a database's level (0 off, 1 slow
//! operations, 2 all), the global `slowms` and `sampleRate`, and a per-database `filter`; each
//! profiled operation becomes one document in `<db>.system.profile`, a 1 MiB capped collection
//! created on first use, so the profile keeps the latest operations and never grows.
//!
//! An entry has mongod's common fields: `op` (`query`, `getmore`, `insert`, `update`,
//! `remove`, `command`), `ns`, `command` (as the client sent it), `nreturned`, `ninserted`,
//! `nMatched`/`nModified`, `ndeleted`, `responseLength`, `millis`, `ts`, `client`, `user`,
//! `protocol`, and `ok`/`errCode`/`errName`/`errMsg` for a failure. mongod's execution
//! statistics (`keysExamined`, `docsExamined`, `planSummary`, locks) are not recorded: the
//! store does not measure them per operation (`explain` reports them).

use super::{args::Args, crud, ddl, Reply};
use crate::error::{Error, Result};
use crate::query::Filter;
use crate::state::ServerState;
use bson::{doc, Bson, Document};
use std::sync::Arc;
use std::time::Instant;

/// Where profiled operations go, in each database.
pub(crate) const PROFILE_COLLECTION: &str = "system.profile";
/// mongod's size for the profile collection it creates.
const PROFILE_BYTES: i64 = 1024 * 1024;

/// The `profile` command: reports the previous settings (`was`, `slowms`, `sampleRate`,
/// `filter` when one was set) and applies the new ones; level -1 only reports.
pub(crate) fn profile(state: &ServerState, cmd: &Document) -> Result<Document> {
    let db = cmd.get_str("$db").unwrap_or("admin").to_string();
    Args::new("profile", cmd).allow_only(&["slowms", "sampleRate", "filter"])?;
    let level = match cmd.get("profile") {
        Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))) => {
            crate::value::Number::from_bson(v)
                .and_then(|n| n.as_i64_exact())
                .ok_or_else(|| Error::bad_value(format!("Invalid profiling level: {v}")))?
        }
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'profile.profile' is the wrong type '{}', expected type 'int'",
                crate::value::type_name(other)
            )))
        }
        None => return Err(Error::failed_to_parse("profile requires a level")),
    };
    if !(-1..=2).contains(&level) {
        return Err(Error::bad_value(format!(
            "Invalid profiling level: {level}"
        )));
    }
    let slowms = match cmd.get("slowms") {
        None => None,
        Some(v) => Some(
            crate::value::Number::from_bson(v)
                .and_then(|n| n.as_i64_exact())
                .ok_or_else(|| {
                    Error::type_mismatch(format!(
                        "BSON field 'profile.slowms' is the wrong type '{}', expected type 'int'",
                        crate::value::type_name(v)
                    ))
                })?,
        ),
    };
    let sample_rate = match cmd.get("sampleRate") {
        None => None,
        Some(v) => {
            let rate = crate::value::to_f64(v).ok_or_else(|| {
                Error::type_mismatch(format!(
                    "BSON field 'profile.sampleRate' is the wrong type '{}', expected type 'double'",
                    crate::value::type_name(v)
                ))
            })?;
            if !(0.0..=1.0).contains(&rate) {
                return Err(Error::bad_value(
                    "'sampleRate' must be between 0.0 and 1.0 inclusive",
                ));
            }
            Some(rate)
        }
    };
    // `filter: "unset"` removes the database's filter, as in mongod.
    let filter = match cmd.get("filter") {
        None => None,
        Some(Bson::String(s)) if s == "unset" => Some(None),
        Some(Bson::Document(f)) => Some(Some((f.clone(), Filter::parse(f)?))),
        Some(other) => {
            return Err(Error::bad_value(format!(
                "Expected an object or the string 'unset' for 'filter', found {}",
                crate::value::type_name(other)
            )))
        }
    };
    let mut settings = state.profiler.lock();
    let old = settings.databases.get(&db).cloned().unwrap_or_default();
    let mut reply = doc! {
        "was": old.level,
        "slowms": settings.slowms,
        "sampleRate": settings.sample_rate,
    };
    if let Some((spec, _)) = &old.filter {
        reply.insert("filter", spec.clone());
        reply.insert(
            "note",
            "When a filter expression is set, slowms and sampleRate are not used for \
             profiling and slow-query log lines.",
        );
    }
    if let Some(ms) = slowms {
        settings.slowms = ms;
    }
    if let Some(rate) = sample_rate {
        settings.sample_rate = rate;
    }
    if level >= 0 || filter.is_some() {
        let entry = settings.databases.entry(db).or_default();
        if level >= 0 {
            entry.level = level as i32;
        }
        if let Some(filter) = filter {
            entry.filter = filter;
        }
    }
    settings
        .databases
        .retain(|_, p| p.level > 0 || p.filter.is_some());
    Ok(reply)
}

/// Writes the profile entry of a command that ran on `db` (started at `started`, answered
/// `outcome`), when that database's settings profile it. Never fails the command: a profile
/// entry that cannot be written is logged and dropped.
pub(crate) fn record(
    state: &Arc<ServerState>,
    conn: &crate::state::ConnectionInfo,
    db: &str,
    name: &str,
    cmd: &Document,
    started: Instant,
    outcome: &Result<Reply>,
) {
    let Some(settings) = state.profiler.settings_for(db) else {
        return;
    };
    let collection = cmd.get_str(name).ok();
    if collection == Some(PROFILE_COLLECTION) {
        return;
    }
    let millis = started.elapsed().as_millis() as i64;
    let entry = entry(conn, db, name, cmd, millis, outcome);
    let profiled = match (&settings.filter, settings.level) {
        (_, 2) => true,
        (Some((_, filter)), _) => filter.matches(&entry),
        (None, 1) => millis >= settings.slowms && rand::random::<f64>() < settings.sample_rate,
        _ => false,
    };
    if !profiled {
        return;
    }
    if let Err(e) = write(state, db, entry) {
        tracing::warn!(db, "cannot write a profile entry: {e}");
    }
}

fn write(state: &Arc<ServerState>, db: &str, entry: Document) -> Result<()> {
    if state.catalog.get(db, PROFILE_COLLECTION).is_none() {
        let create = doc! {
            "create": PROFILE_COLLECTION, "capped": true, "size": PROFILE_BYTES, "$db": db,
        };
        match ddl::create(state, db, &Args::new("create", &create)) {
            Ok(_) => {}
            // Another connection created it first.
            Err(e) if e.code_number() == 48 => {}
            Err(e) => return Err(e),
        }
    }
    let insert = doc! { "insert": PROFILE_COLLECTION, "documents": [entry], "$db": db };
    crud::insert(state, db, &Args::new("insert", &insert)).map(|_| ())
}

/// mongod's `op` of a command.
fn op_of(name: &str) -> &'static str {
    match name {
        "find" => "query",
        "getMore" => "getmore",
        "insert" => "insert",
        "update" => "update",
        "delete" => "remove",
        _ => "command",
    }
}

fn entry(
    conn: &crate::state::ConnectionInfo,
    db: &str,
    name: &str,
    cmd: &Document,
    millis: i64,
    outcome: &Result<Reply>,
) -> Document {
    let collection = match name {
        "getMore" => cmd.get_str("collection").ok(),
        _ => cmd.get_str(name).ok(),
    };
    let ns = format!("{db}.{}", collection.unwrap_or("$cmd"));
    let mut entry = doc! { "op": op_of(name), "ns": ns, "command": cmd.clone() };
    match outcome {
        Ok(reply) => {
            let (body, length) = match reply.encoded.as_deref() {
                Some(bytes) => (
                    Document::from_reader(bytes).unwrap_or_default(),
                    bytes.len() as i64,
                ),
                None => (
                    reply.doc.clone(),
                    bson::to_vec(&reply.doc).map_or(0, |b| b.len() as i64),
                ),
            };
            let batch = body.get_document("cursor").ok().and_then(|c| {
                c.get_array("firstBatch")
                    .or_else(|_| c.get_array("nextBatch"))
                    .ok()
            });
            let n = body
                .get("n")
                .and_then(crate::value::to_f64)
                .map(|n| n as i64);
            match name {
                "insert" => {
                    entry.insert("ninserted", n.unwrap_or(0));
                }
                "delete" => {
                    entry.insert("ndeleted", n.unwrap_or(0));
                }
                "update" => {
                    entry.insert("nMatched", n.unwrap_or(0));
                    entry.insert("nModified", body.get_i32("nModified").unwrap_or(0));
                }
                _ => {}
            }
            if let Some(batch) = batch {
                entry.insert("nreturned", batch.len() as i32);
            } else if name == "findAndModify" || name == "findandmodify" {
                let found = !matches!(body.get("value"), None | Some(Bson::Null));
                entry.insert("nreturned", i32::from(found));
            }
            entry.insert("ok", 1.0);
            entry.insert("responseLength", length);
        }
        Err(e) => {
            entry.insert("ok", 0.0);
            entry.insert("errMsg", e.message.clone());
            entry.insert("errName", e.code.name());
            entry.insert("errCode", e.code_number());
        }
    }
    entry.insert("protocol", "op_msg");
    entry.insert("millis", millis);
    entry.insert("ts", bson::DateTime::now());
    let client = conn
        .peer
        .map_or_else(|| "127.0.0.1".to_string(), |p| p.ip().to_string());
    entry.insert("client", client);
    let user = conn.auth.lock().user().map(str::to_string);
    let (user, all_users) = match user {
        Some(u) => (
            format!("{u}@admin"),
            vec![Bson::Document(doc! { "user": u, "db": "admin" })],
        ),
        None => (String::new(), vec![]),
    };
    entry.insert("allUsers", all_users);
    entry.insert("user", user);
    entry
}
