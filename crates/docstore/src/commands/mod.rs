//! Command dispatch: find the command by its first field, check the options every command
//! shares, run it, wait for the journal when the write concern asks, and shape the reply.

pub(crate) mod admin;
pub(crate) mod aggregate;
pub(crate) mod args;
pub(crate) mod backup;
pub(crate) mod coll_mod;
pub(crate) mod crud;
pub(crate) mod ddl;
pub(crate) mod encoded;
pub(crate) mod explain;
pub(crate) mod find_options;
pub(crate) mod profiler;
pub(crate) mod read_spec;
pub(crate) mod validate;

use crate::error::{Error, ErrorCode, Result};
use crate::state::{ConnectionInfo, ServerState};
use args::Args;
use bson::{Bson, Document};
use std::sync::Arc;

/// A command's reply and, for writes, the journal position `j: true` waits for.
pub(crate) struct Reply {
    pub doc: Document,
    pub lsn: u64,
    /// The whole reply already encoded (`ok: 1` included), used instead of `doc`: a read
    /// answered from stored bytes ([`encoded`]).
    encoded: Option<Vec<u8>>,
}

impl Reply {
    pub(crate) fn read(doc: Document) -> Reply {
        Reply {
            doc,
            lsn: 0,
            encoded: None,
        }
    }

    pub(crate) fn write(doc: Document, lsn: u64) -> Reply {
        Reply {
            doc,
            lsn,
            encoded: None,
        }
    }

    /// A read's complete reply as BSON bytes, `ok: 1` included.
    pub(crate) fn encoded_read(bytes: Vec<u8>) -> Reply {
        Reply {
            doc: Document::new(),
            lsn: 0,
            encoded: Some(bytes),
        }
    }
}

/// What a command answers: a document, or the reply already encoded as BSON.
pub(crate) enum Answer {
    Document(Document),
    Encoded(Vec<u8>),
}

impl Answer {
    /// The answer as a document (an encoded one decoded; bytes this module built always
    /// decode, anything else becomes an InternalError reply).
    pub(crate) fn into_document(self) -> Document {
        match self {
            Answer::Document(doc) => doc,
            Answer::Encoded(bytes) => Document::from_reader(&bytes[..]).unwrap_or_else(|e| {
                Error::internal(format!("cannot decode an encoded reply: {e}")).to_command_reply()
            }),
        }
    }
}

/// Run one command document (OP_MSG body with document sequences merged, or a legacy OP_QUERY
/// command with `$db` added) and return the reply: `ok: 1` or MongoDB's error shape.
/// `documents` is an insert's document sequence kept as sent ([`crate::wire::OpMsg::documents`]).
pub(crate) async fn dispatch(
    state: &Arc<ServerState>,
    conn: &ConnectionInfo,
    mut cmd: Document,
    documents: Option<Vec<Arc<[u8]>>>,
) -> Answer {
    let documents = match documents {
        // The profiler records a command as the client sent it, documents included: on a
        // database it may profile, they are decoded into the command as before.
        Some(sent) if profiles(state, &cmd) => {
            let mut decoded = Vec::with_capacity(sent.len());
            for bytes in &sent {
                match crate::bson_depth::decode(bytes) {
                    Ok(doc) => decoded.push(Bson::Document(doc)),
                    Err(e) => {
                        return Answer::Document(
                            Error::internal(format!("a checked document does not decode: {e}"))
                                .to_command_reply(),
                        )
                    }
                }
            }
            cmd.insert("documents", decoded);
            None
        }
        other => other,
    };
    match run(state, conn, &cmd, documents.as_deref()).await {
        Ok(Answer::Document(mut reply)) => {
            if !reply.contains_key("ok") {
                reply.insert("ok", 1.0);
            }
            Answer::Document(reply)
        }
        Ok(encoded) => encoded,
        Err(e) => Answer::Document(e.to_command_reply()),
    }
}

/// Whether the profiler may record commands on `cmd`'s database.
fn profiles(state: &ServerState, cmd: &Document) -> bool {
    let db = cmd.get_str("$db").unwrap_or("admin");
    state.profiler.settings_for(db).is_some()
}

async fn run(
    state: &Arc<ServerState>,
    conn: &ConnectionInfo,
    cmd: &Document,
    documents: Option<&[Arc<[u8]>]>,
) -> Result<Answer> {
    let Some(name) = cmd.keys().next().map(String::as_str) else {
        return Err(Error::new(ErrorCode::FailedToParse, "empty command"));
    };
    let db = match cmd.get("$db") {
        Some(Bson::String(db)) => db.as_str(),
        Some(_) => return Err(Error::type_mismatch("$db must be a string")),
        None => "admin",
    };
    crate::auth::check_access(state.auth.as_ref(), conn, name)?;
    state.sessions.touch(cmd, conn.auth.lock().user());
    args::check_api_parameters(name, cmd)?;
    if let Some(reply) = admin::handle(name, state, conn, cmd) {
        return reply.map(Answer::Document);
    }
    args::reject_transactions(cmd)?;
    args::check_read_concern(cmd)?;
    let concern = args::write_concern(cmd)?;
    crate::catalog::validate_db_name(db)?;
    let a = Args::new(name, cmd).with_sent_documents(documents);
    let started = std::time::Instant::now();
    let max_time = crate::deadline::parse(name, cmd.get("maxTimeMS"))?;
    let limit = max_time
        .map(|time| crate::deadline::Limit::new(started, time, state.config.max_time_check_delay));
    let outcome = run_on_database(state, db, name, &a, limit).await;
    profiler::record(state, conn, db, name, cmd, started, &outcome);
    let reply = outcome?;
    if let Some(bytes) = reply.encoded {
        // Only reads are encoded ahead: there is no journal position to wait for.
        return Ok(Answer::Encoded(bytes));
    }
    let mut doc = reply.doc;
    if concern.journal && reply.lsn > 0 {
        if let Err(failure) = state.catalog.storage().wait_durable(reply.lsn).await {
            // The write is applied but its journaling cannot be confirmed: MongoDB's shape for
            // that is a write concern error beside the result, which drivers raise as an error.
            let e = Error::from(&failure);
            doc.insert(
                "writeConcernError",
                bson::doc! {
                    "code": e.code_number(),
                    "codeName": e.code.name(),
                    "errmsg": e.message,
                },
            );
        }
    }
    Ok(Answer::Document(doc))
}

/// The commands that run on a database's collections (everything but the admin commands).
/// The synchronous ones run under the command's `maxTimeMS` (`limit`, see [`crate::deadline`]);
/// a `getMore`'s `maxTimeMS` is how long it awaits data instead (MongoDB's meaning there).
async fn run_on_database(
    state: &Arc<ServerState>,
    db: &str,
    name: &str,
    a: &Args<'_>,
    limit: Option<crate::deadline::Limit>,
) -> Result<Reply> {
    match name {
        "getMore" => crud::get_more(state, db, a).await,
        "createBackup" => backup::create_backup(state, db, a).await,
        _ => {
            // In force only in this arm, which never awaits: the thread runs nothing else
            // meanwhile.
            let _limit = crate::deadline::enter(limit);
            run_synchronous(state, db, name, a)
        }
    }
}

/// The commands of [`run_on_database`] that do all their work without awaiting.
fn run_synchronous(state: &Arc<ServerState>, db: &str, name: &str, a: &Args<'_>) -> Result<Reply> {
    Ok(match name {
        "insert" => crud::insert(state, db, a)?,
        "find" => crud::find(state, db, a)?,
        "killCursors" => crud::kill_cursors(state, a)?,
        "update" => crud::update(state, db, a)?,
        "delete" => crud::delete(state, db, a)?,
        "findAndModify" | "findandmodify" => crud::find_and_modify(state, db, a)?,
        "count" => crud::count(state, db, a)?,
        "distinct" => crud::distinct(state, db, a)?,
        // `{aggregate, explain: true}` is the older spelling of `{explain: {aggregate}}`.
        "aggregate" if a.bool("explain", false)? => explain::explain_aggregate(state, db, a)?,
        "aggregate" => aggregate::aggregate(state, db, a)?,
        "explain" => explain::explain(state, db, a)?,
        "create" => ddl::create(state, db, a)?,
        "convertToCapped" => ddl::convert_to_capped(state, db, a)?,
        "cloneCollectionAsCapped" => ddl::clone_collection_as_capped(state, db, a)?,
        "drop" => ddl::drop(state, db, a)?,
        "dropDatabase" => ddl::drop_database(state, db, a)?,
        "listCollections" => ddl::list_collections(state, db, a)?,
        "listDatabases" => ddl::list_databases(state, a)?,
        "renameCollection" => ddl::rename_collection(state, db, a)?,
        "createIndexes" => ddl::create_indexes(state, db, a)?,
        "listIndexes" => ddl::list_indexes(state, db, a)?,
        "dropIndexes" | "deleteIndexes" => ddl::drop_indexes(state, db, a)?,
        "dbStats" | "dbstats" => ddl::db_stats(state, db, a)?,
        "collStats" | "collstats" => ddl::coll_stats(state, db, a)?,
        "validate" => validate::validate(state, db, a)?,
        "collMod" => coll_mod::coll_mod(state, db, a)?,
        _ => return Err(unsupported_or_unknown(name)),
    })
}

/// MongoDB commands docstore deliberately lacks get the refusal of the support table
/// ([`crate::support`]); anything else is CommandNotFound.
fn unsupported_or_unknown(name: &str) -> Error {
    crate::support::refusal(crate::support::Kind::Command, name).unwrap_or_else(|| {
        Error::new(
            ErrorCode::CommandNotFound,
            format!("no such command: '{name}'"),
        )
    })
}
