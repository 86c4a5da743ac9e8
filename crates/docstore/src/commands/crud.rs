//! CRUD commands: insert, find, getMore, killCursors, update, delete, findAndModify, count,
//! distinct.

use super::args::Args;
use super::read_spec::{parse_filter, parse_hint, ReadSpec};
use super::Reply;
use crate::collation;
use crate::collection::{Collection, Hit, QuerySpec, WriteSession};
use crate::error::{Error, ErrorCode, Result};
use crate::path;
use crate::query::{Filter, Projection};
use crate::state::ServerState;
use crate::stored::StoredDoc;
use crate::update::{ApplyContext, UpdateSpec};
use crate::value::values_equal;
use bson::{doc, oid::ObjectId, Bson, Document};
use std::borrow::Cow;
use std::sync::Arc;

pub(crate) fn insert(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["documents", "ordered", "bypassDocumentValidation"])?;
    let coll = args.collection()?;
    let docs = match args.sent {
        Some(_) => Vec::new(),
        None => args.documents("documents")?,
    };
    let count = args.sent.map_or(docs.len(), <[_]>::len);
    let ordered = args.bool("ordered", true)?;
    let bypass = args.bool("bypassDocumentValidation", false)?;
    if count > 100_000 {
        return Err(Error::new(
            ErrorCode::InvalidOptions,
            format!("Write batch sizes must be between 1 and 100000. Got {count} operations."),
        ));
    }
    // Validated and encoded before the collection is locked, so concurrent writers to one
    // collection encode in parallel; the lock covers only the index checks and the insert.
    // Errors are still reported (and, when ordered, stop the batch) in document order. A
    // document kept as sent is stored as its bytes (`None` for the decoded document).
    let prepared: Vec<Result<(Option<Cow<'_, Document>>, StoredDoc)>> = match args.sent {
        Some(sent) => sent.iter().map(prepared_as_sent).collect(),
        None => docs
            .iter()
            .map(|doc| {
                let doc = prepared_for_insert(doc)?;
                let stored = Collection::encode_for_insert(&doc)?;
                Ok((Some(doc), stored))
            })
            .collect(),
    };
    let outcome = state.catalog.write(db, coll, true, |c| {
        c.bypass_validation(bypass);
        let mut errors = Vec::new();
        // A large batch that goes in whole is inserted at once (its index work shared among
        // threads); otherwise, or if any document would fail, one document at a time.
        let prepared = if count >= INSERT_ALL_MIN && prepared.iter().all(Result::is_ok) {
            // Sized up front: a batch of thousands grown by doubling took fresh memory (which
            // the kernel zeroes) several times over.
            let mut whole: Vec<Option<Cow<'_, Document>>> = Vec::with_capacity(count);
            let mut stored: Vec<StoredDoc> = Vec::with_capacity(count);
            for (doc, bytes) in prepared.into_iter().flatten() {
                whole.push(doc);
                stored.push(bytes);
            }
            let refs: Vec<Option<&Document>> = whole.iter().map(Option::as_deref).collect();
            match c.insert_all(&refs, stored.clone()) {
                Ok(Some(inserted)) => return (inserted as i32, errors),
                Ok(None) => {}
                Err(e) => {
                    errors.push(e.to_write_error(0));
                    return (0, errors);
                }
            }
            whole.into_iter().zip(stored).map(Ok).collect()
        } else {
            prepared
        };
        let mut inserted = 0;
        for (i, doc) in prepared.into_iter().enumerate() {
            let result = doc.and_then(|(doc, stored)| match doc {
                Some(doc) => c.insert_encoded(&doc, stored),
                None => c.insert_sent(stored),
            });
            match result {
                Ok(_) => inserted += 1,
                Err(e) => {
                    errors.push(e.to_write_error(i));
                    if ordered {
                        break;
                    }
                }
            }
        }
        (inserted, errors)
    })?;
    let outcome = outcome.ok_or_else(|| Error::internal("collection creation failed"))?;
    let (inserted, errors) = outcome.value;
    let mut reply = doc! { "n": inserted };
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(Reply::write(reply, outcome.lsn))
}

/// Batches from this many documents are first tried whole ([`WriteSession::insert_all`]).
const INSERT_ALL_MIN: usize = 64;

/// A document of an insert's sequence as sent ([`crate::wire::OpMsg::documents`]), prepared as
/// [`prepared_for_insert`] and [`Collection::encode_for_insert`] prepare a decoded one: kept as
/// its bytes (`None`) when that stores exactly what the decoded path stores, which is when
/// [`StoredDoc::as_sent`] takes it and its `_id` comes first and is a plain value (as drivers
/// send it: an `ObjectId`, a string, a number) needing no check; otherwise decoded.
fn prepared_as_sent(bytes: &Arc<[u8]>) -> Result<(Option<Cow<'static, Document>>, StoredDoc)> {
    if let Some(stored) = StoredDoc::as_sent(bytes).filter(|s| plain_id_first(s.as_bytes())) {
        crate::collection::check_size(stored.len())?;
        return Ok((None, stored));
    }
    let doc = crate::bson_depth::decode(bytes)
        .map_err(|e| Error::internal(format!("a checked document does not decode: {e}")))?;
    let doc = prepare_for_insert(&doc)?;
    let stored = Collection::encode_for_insert(&doc)?;
    Ok((Some(Cow::Owned(doc)), stored))
}

/// Whether the document in `bytes` starts with an `_id` that [`validate_id`] has nothing to
/// check in (not an array, regex or undefined, and no document that could hold `$` names).
fn plain_id_first(bytes: &[u8]) -> bool {
    let Ok(raw) = bson::RawDocument::from_bytes(bytes) else {
        return false;
    };
    match raw.into_iter().next() {
        Some(Ok((key, value))) => {
            key == "_id"
                && !matches!(
                    value,
                    bson::RawBsonRef::Array(_)
                        | bson::RawBsonRef::Document(_)
                        | bson::RawBsonRef::RegularExpression(_)
                        | bson::RawBsonRef::Undefined
                )
        }
        _ => false,
    }
}

/// `_id` first (generated when absent) and valid, as mongod stores inserted documents: not an
/// array, regex or undefined, and with no `$`-prefixed field name anywhere inside it.
pub(crate) fn prepare_for_insert(doc: &Document) -> Result<Document> {
    prepared_for_insert(doc).map(Cow::into_owned)
}

/// [`prepare_for_insert`] that borrows `doc` when it already has its `_id` first (drivers
/// prepend one): the insert command then encodes and keys the document the client sent
/// without copying every field of it first, which was a fifth of the store's work per
/// document in a batch of small ones (the traffic log's events, docs/data-model.md).
pub(crate) fn prepared_for_insert(doc: &Document) -> Result<Cow<'_, Document>> {
    if let Some((key, id)) = doc.iter().next() {
        if key == "_id" {
            validate_id(id)?;
            return Ok(Cow::Borrowed(doc));
        }
    }
    let id = match doc.get("_id") {
        Some(id) => {
            validate_id(id)?;
            id.clone()
        }
        None => Bson::ObjectId(ObjectId::new()),
    };
    // Since MongoDB 5.0 other `$`-prefixed field names, top-level ones included, are stored.
    let mut out = Document::new();
    out.insert("_id", id);
    for (k, v) in doc {
        if k != "_id" {
            out.insert(k.clone(), v.clone());
        }
    }
    Ok(Cow::Owned(out))
}

fn validate_id(id: &Bson) -> Result<()> {
    let bad = match id {
        Bson::Array(_) => Some("array"),
        Bson::RegularExpression(_) => Some("regex"),
        Bson::Undefined => Some("undefined"),
        _ => None,
    };
    if let Some(t) = bad {
        return Err(Error::new(
            ErrorCode::InvalidIdField,
            format!("The '_id' value cannot be of type {t}"),
        ));
    }
    if let Bson::Document(d) = id {
        if let Some(name) = dollar_prefixed_name(d) {
            return Err(Error::new(
                ErrorCode::DollarPrefixedFieldName,
                format!(
                    "_id fields may not contain '$'-prefixed fields: {name} is not valid for storage."
                ),
            ));
        }
    }
    Ok(())
}

/// The first `$`-prefixed field name in a document or in the documents nested in it (inside
/// arrays too).
fn dollar_prefixed_name(d: &Document) -> Option<&str> {
    fn in_value(v: &Bson) -> Option<&str> {
        match v {
            Bson::Document(d) => dollar_prefixed_name(d),
            Bson::Array(items) => items.iter().find_map(in_value),
            _ => None,
        }
    }
    d.iter().find_map(|(k, v)| {
        if k.starts_with('$') {
            Some(k.as_str())
        } else {
            in_value(v)
        }
    })
}

pub(super) fn parse_projection(args: &Args<'_>, field: &str) -> Result<Option<Projection>> {
    match args.document(field)? {
        Some(p) if !p.is_empty() => Ok(Some(Projection::parse(p)?)),
        _ => Ok(None),
    }
}

const FIND_UNSUPPORTED: &[&str] = &["oplogReplay", "allowPartialResults", "readOnce", "exhaust"];

pub(crate) fn find(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    for opt in FIND_UNSUPPORTED {
        if args.get(opt).is_some_and(|v| v != &Bson::Boolean(false)) {
            return Err(Error::not_supported(format!("find option '{opt}'")));
        }
    }
    args.allow_only(&[
        "filter",
        "sort",
        "projection",
        "hint",
        "skip",
        "limit",
        "batchSize",
        "singleBatch",
        "let",
        "collation",
        "noCursorTimeout",
        "allowDiskUse",
        "$readPreference",
        "returnKey",
        "showRecordId",
        "min",
        "max",
        "tailable",
        "awaitData",
    ])?;
    let coll = args.collection()?;
    let tailable = args.bool("tailable", false)?;
    let await_data = args.bool("awaitData", false)?;
    if await_data && !tailable {
        return Err(Error::failed_to_parse(
            "Cannot set 'awaitData' without also setting 'tailable'",
        ));
    }
    let requested = collation::parse(args.get("collation"))?;
    let vars = args.let_vars()?;
    let vars = vars.as_ref();
    let projection = parse_projection(args, "projection")?;
    let extras = super::find_options::FindExtras::parse(args)?;
    let read = ReadSpec {
        skip: args.non_negative("skip")?.unwrap_or(0) as usize,
        limit: args
            .non_negative("limit")?
            .filter(|l| *l > 0)
            .map(|l| l as usize),
        ..ReadSpec::parse(args, "filter", vars)?
    };
    if projection.as_ref().is_some_and(|p| p.needs_text_score()) && read.filter.text().is_none() {
        return Err(crate::collection::text_score_unavailable());
    }
    let single_batch = args.bool("singleBatch", false)?;
    // A single batch holds everything the limit allows (up to the 16 MiB cap).
    let batch_size = match args.non_negative("batchSize")? {
        Some(b) => Some(b as usize),
        None if single_batch => Some(read.limit.unwrap_or(usize::MAX)),
        None => None,
    };
    let ns = format!("{db}.{coll}");
    if tailable {
        return find_tailable(state, db, coll, read, projection, batch_size, await_data);
    }
    let results = match state.catalog.get(db, coll) {
        None => {
            if let Some(hint) = &read.hint {
                if !matches!(hint, Bson::Document(d) if d.contains_key("$natural")) {
                    return Err(Error::bad_value(
                        "hint provided does not correspond to an existing index",
                    ));
                }
            }
            Vec::new()
        }
        Some(handle) => {
            let c = handle.read();
            let _collation = collation::enter(requested.or_default(c.default_collation().cloned()));
            if extras.is_plain() {
                let query = QuerySpec {
                    projection: projection.as_ref(),
                    ..read.query_spec()
                };
                let (hits, _) = c.query(&query)?;
                drop(c);
                let docs = project_hits(hits, projection.as_ref())?;
                if super::encoded::fit_one_batch(&docs, batch_size) {
                    // The whole answer in one batch: the stored bytes go on the wire as they
                    // are, and no cursor stays open (idle ones are still reaped, as below).
                    state.cursors.reap_idle();
                    return Ok(Reply::encoded_read(super::encoded::exhausted_cursor_reply(
                        &ns, &docs,
                    )));
                }
                docs.iter()
                    .map(StoredDoc::to_document)
                    .collect::<Result<Vec<_>>>()?
            } else {
                extras.run(&c, &read, projection.as_ref())?
            }
        }
    };

    let batch = state
        .cursors
        .first_batch(&ns, results, batch_size, single_batch);
    Ok(Reply::read(cursor_reply(
        &ns,
        batch.cursor_id,
        "firstBatch",
        batch.documents,
    )))
}

/// A tailable `find` on a capped collection: the matching documents in natural order, under a
/// cursor that stays open for the documents inserted later (see `get_more`). As in mongod, a
/// query that matches nothing at first gives a dead cursor.
fn find_tailable(
    state: &Arc<ServerState>,
    db: &str,
    coll: &str,
    mut read: ReadSpec,
    projection: Option<Projection>,
    batch_size: Option<usize>,
    await_data: bool,
) -> Result<Reply> {
    let ns = format!("{db}.{coll}");
    let natural_forward = |sort: &Document| {
        sort.len() == 1 && sort.get("$natural").and_then(crate::value::to_f64) == Some(1.0)
    };
    if read.sort_doc.as_ref().is_some_and(|s| !natural_forward(s)) {
        return Err(Error::bad_value(
            "cannot use tailable option with a sort other than {$natural: 1}",
        ));
    }
    if matches!(&read.hint, Some(Bson::Document(h))
        if h.get("$natural").and_then(crate::value::to_f64).is_some_and(|d| d < 0.0))
    {
        return Err(Error::bad_value(
            "cannot use tailable option with a sort other than {$natural: 1}",
        ));
    }
    let Some(handle) = state.catalog.get(db, coll) else {
        return Ok(Reply::read(cursor_reply(&ns, 0, "firstBatch", Vec::new())));
    };
    let c = handle.read();
    if c.capped().is_none() {
        return Err(Error::bad_value(format!(
            "error processing query: ns={ns}: tailable cursor requested on non capped collection"
        )));
    }
    // The first batch reads the matches as they stand (`skip` and `limit` included); the
    // cursor tails from the last document matched before the skip and limit applied.
    let (skip, limit) = (read.skip, read.limit);
    read.skip = 0;
    read.limit = None;
    read.sort = None;
    let (mut hits, _) = c.query(&read.query_spec())?;
    drop(c);
    let Some(last_record) = hits.last().map(|h| h.record) else {
        return Ok(Reply::read(cursor_reply(&ns, 0, "firstBatch", Vec::new())));
    };
    hits.drain(..skip.min(hits.len()));
    if let Some(limit) = limit.filter(|&l| l > 0) {
        if hits.len() >= limit {
            // The limit is reached: nothing is left to tail for.
            hits.truncate(limit);
            let docs = project_hits(hits, projection.as_ref())?
                .iter()
                .map(StoredDoc::to_document)
                .collect::<Result<Vec<_>>>()?;
            return Ok(Reply::read(cursor_reply(&ns, 0, "firstBatch", docs)));
        }
    }
    let docs = project_hits(hits, projection.as_ref())?
        .iter()
        .map(StoredDoc::to_document)
        .collect::<Result<Vec<_>>>()?;
    let tail = crate::cursor::Tail {
        db: db.to_string(),
        coll: coll.to_string(),
        filter: read.filter,
        projection,
        last_record,
        await_data,
    };
    let batch = state
        .cursors
        .first_tailable_batch(&ns, docs, batch_size, tail);
    Ok(Reply::read(cursor_reply(
        &ns,
        batch.cursor_id,
        "firstBatch",
        batch.documents,
    )))
}

/// The documents a tailable cursor has not seen yet, and the record of the last one; an error
/// when the record it stopped at is gone (overwritten, or deleted) or the collection dropped.
fn tail_documents(
    state: &Arc<ServerState>,
    tail: &crate::cursor::Tail,
) -> Result<(Vec<Document>, crate::index::RecordId)> {
    let Some(handle) = state.catalog.get(&tail.db, &tail.coll) else {
        return Err(Error::location(
            175,
            format!("collection dropped: {}.{}", tail.db, tail.coll),
        ));
    };
    let c = handle.read();
    if c.get(tail.last_record).is_none() {
        return Err(Error::location(
            136,
            format!(
                "CollectionScan died due to position in capped collection being deleted. Last \
                 seen record id: RecordId({})",
                tail.last_record
            ),
        ));
    }
    let mut last = tail.last_record;
    let mut docs = Vec::new();
    for (record, stored) in c.records_after(tail.last_record) {
        last = record;
        let doc = stored.to_document()?;
        if let Some(position) = tail.filter.try_matches_with_position(&doc)? {
            docs.push(match &tail.projection {
                Some(p) => p.apply(&doc, position)?,
                None => doc,
            });
        }
    }
    Ok((docs, last))
}

/// How long a `getMore` on an `awaitData` cursor waits for new documents by default (mongod's
/// default `maxTimeMS` there).
const AWAIT_DATA_DEFAULT: std::time::Duration = std::time::Duration::from_secs(1);

/// How often an awaiting `getMore` looks for new documents.
const TAIL_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// The documents a find returns as BSON: the stored bytes themselves without a projection;
/// with one that keeps or leaves out whole top-level fields, those fields of the stored bytes;
/// with one that includes or leaves out plain paths, those parts of the stored bytes (unless a
/// path reaches into an array); with any other, each document decoded only as far as the projection reads
/// it, projected and encoded.
fn project_hits(hits: Vec<Hit>, projection: Option<&Projection>) -> Result<Vec<StoredDoc>> {
    let Some(p) = projection else {
        return Ok(hits.into_iter().map(|hit| hit.doc).collect());
    };
    if let Some(fields) = p.whole_top_level_fields() {
        return hits
            .iter()
            .map(|hit| hit.doc.with_fields(|key| fields.keeps(key)))
            .collect();
    }
    let included = p.included_paths();
    let excluded = p.excluded_paths();
    let fields = p.top_level_fields();
    hits.into_iter()
        .map(|hit| {
            if let Some(copied) = included.as_ref().map(|paths| hit.doc.with_tree(paths)) {
                if let Some(copied) = copied? {
                    return Ok(copied);
                }
            }
            if let Some(copied) = excluded.as_ref().map(|paths| hit.doc.without_tree(paths)) {
                if let Some(copied) = copied? {
                    return Ok(copied);
                }
            }
            let doc = hit.doc.select(fields.as_deref())?;
            StoredDoc::from_document(&p.apply_scored(&doc, hit.position, hit.score)?)
        })
        .collect()
}

pub(crate) fn cursor_reply(ns: &str, id: i64, batch_field: &str, docs: Vec<Document>) -> Document {
    let mut cursor = Document::new();
    cursor.insert(batch_field, docs);
    cursor.insert("id", id);
    cursor.insert("ns", ns);
    doc! { "cursor": cursor }
}

pub(crate) async fn get_more(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&[
        "collection",
        "batchSize",
        "maxTimeMS",
        "term",
        "lastKnownCommittedOpTime",
    ])?;
    let id = match args.get("getMore") {
        Some(Bson::Int64(id)) => *id,
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'getMore.getMore' is the wrong type '{}', expected type 'long'",
                crate::value::type_name(other)
            )))
        }
        None => return Err(Error::failed_to_parse("missing cursor id")),
    };
    let coll = args.string("collection")?.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'getMore.collection' is missing but a required field",
        )
    })?;
    let batch_size = args
        .non_negative("batchSize")?
        .filter(|b| *b > 0)
        .map(|b| b as usize);
    let ns = format!("{db}.{coll}");
    // A getMore's `maxTimeMS` is how long an `awaitData` cursor waits for documents (0 or
    // none: the default); mongod refuses it for any other open cursor, whose first command's
    // `maxTimeMS` bounded its work (an id naming none is answered CursorNotFound below).
    let await_time = crate::deadline::parse("getMore", args.get("maxTimeMS"))?;
    if await_time.is_some() && state.cursors.awaits_data(id) == Some(false) {
        return Err(Error::bad_value(
            "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
        ));
    }
    // A tailable cursor that has returned everything reads what was inserted since, waiting
    // (without holding a thread) up to `maxTimeMS` for it when it awaits data.
    if let Some(tail) = state.cursors.tail_to_refill(id, &ns) {
        let wait = await_time.unwrap_or(AWAIT_DATA_DEFAULT);
        let deadline = std::time::Instant::now()
            + if tail.await_data {
                wait
            } else {
                Default::default()
            };
        let mut tail = tail;
        loop {
            let (docs, last) = match tail_documents(state, &tail) {
                Ok(found) => found,
                Err(e) => {
                    state.cursors.kill(&[id]);
                    return Err(e);
                }
            };
            let found = !docs.is_empty();
            state.cursors.refill(id, docs, last);
            tail.last_record = last;
            if found || std::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(TAIL_POLL).await;
        }
    }
    let batch = state.cursors.get_more(id, &ns, batch_size)?;
    Ok(Reply::read(cursor_reply(
        &ns,
        batch.cursor_id,
        "nextBatch",
        batch.documents,
    )))
}

pub(crate) fn kill_cursors(state: &Arc<ServerState>, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["cursors"])?;
    args.collection()?;
    let ids: Vec<i64> = args
        .array("cursors")?
        .ok_or_else(|| {
            Error::location(
                40414,
                "BSON field 'killCursors.cursors' is missing but a required field",
            )
        })?
        .iter()
        .map(|v| match v {
            Bson::Int64(i) => Ok(*i),
            other => Err(Error::type_mismatch(format!(
                "BSON field 'killCursors.cursors' contains a non-long value {other}"
            ))),
        })
        .collect::<Result<_>>()?;
    let (killed, missing) = state.cursors.kill(&ids);
    Ok(Reply::read(doc! {
        "cursorsKilled": killed,
        "cursorsNotFound": missing,
        "cursorsAlive": Vec::<i64>::new(),
        "cursorsUnknown": Vec::<i64>::new(),
    }))
}

/// One update to run against one collection.
pub(crate) struct UpdatePlan {
    pub read: ReadSpec,
    pub update: UpdateSpec,
    pub multi: bool,
    pub upsert: bool,
    pub now: bson::DateTime,
    /// The statement's `collation` (the collection's default applies without one).
    pub collation: collation::Requested,
}

/// What an update did, with the documents before and after (single-document updates).
#[derive(Default)]
pub(crate) struct UpdateOutcome {
    pub matched: u64,
    pub modified: u64,
    pub upserted_id: Option<Bson>,
    pub before: Option<Document>,
    pub after: Option<Document>,
}

/// Apply an update under the collection's write lock; the session journals each document
/// changed even when a later one fails (MongoDB's updates are atomic per document, not per
/// statement).
pub(crate) fn apply_update(c: &mut WriteSession<'_>, plan: &UpdatePlan) -> Result<UpdateOutcome> {
    let _collation = collation::enter(
        plan.collation
            .clone()
            .or_default(c.default_collation().cloned()),
    );
    let mut out = UpdateOutcome::default();
    let mut query = plan.read.query_spec();
    if !plan.multi {
        query.limit = Some(1);
    }
    let (hits, _) = c.query(&query)?;
    let touched = plan.update.touched_paths();
    // Stopped at the command's `maxTimeMS`, the documents updated so far stay updated, as in
    // mongod (a multi-document update is atomic per document).
    let mut clock = crate::deadline::Ticker::start();
    for hit in hits {
        clock.tick()?;
        let doc = hit.doc.to_document()?;
        let ctx = ApplyContext {
            matched_position: hit.position,
            is_insert: false,
            now: Some(plan.now),
        };
        let updated = plan.update.apply_to(&doc, &ctx)?;
        out.matched += 1;
        if let Some(new_doc) = &updated {
            c.update_record(hit.record, &doc, new_doc, touched.as_deref())?;
            out.modified += 1;
        }
        if !plan.multi {
            out.after = Some(updated.unwrap_or_else(|| doc.clone()));
            out.before = Some(doc);
        }
    }
    if out.matched == 0 && plan.upsert {
        let ctx = ApplyContext {
            matched_position: None,
            is_insert: true,
            now: Some(plan.now),
        };
        let doc = plan.update.upsert_document(&plan.read.filter_doc, &ctx)?;
        let doc = prepare_for_insert(&doc)?;
        c.insert(doc.clone())?;
        out.upserted_id = doc.get("_id").cloned();
        out.after = Some(doc);
    }
    Ok(out)
}

/// The fields of one `update` statement MongoDB 7.0 knows (`sort` came with 8.0).
const UPDATE_STATEMENT_FIELDS: &[&str] = &[
    "q",
    "u",
    "upsert",
    "multi",
    "arrayFilters",
    "hint",
    "collation",
    "c",
    "upsertSupplied",
    "sampleId",
];

/// The fields of one `delete` statement MongoDB 7.0 knows.
const DELETE_STATEMENT_FIELDS: &[&str] = &["q", "limit", "hint", "collation", "sampleId"];

/// MongoDB parses the whole command before running any statement, so a statement with a field
/// it does not know, or without a required one, fails the command (`ok: 0`, 40415 or 40414),
/// not just that statement.
fn check_statement_fields(
    statements: &[&Document],
    context: &str,
    known: &[&str],
    required: &[&str],
) -> Result<()> {
    for st in statements {
        if let Some(key) = st.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(Error::location(
                40415,
                format!("BSON field '{context}.{key}' is an unknown field."),
            ));
        }
        if let Some(field) = required.iter().find(|f| !st.contains_key(**f)) {
            return Err(Error::location(
                40414,
                format!("BSON field '{context}.{field}' is missing but a required field"),
            ));
        }
    }
    Ok(())
}

pub(crate) fn update(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["updates", "ordered", "bypassDocumentValidation", "let"])?;
    let coll = args.collection()?;
    let statements = args.documents("updates")?;
    check_statement_fields(
        &statements,
        "update.updates",
        UPDATE_STATEMENT_FIELDS,
        &["q", "u"],
    )?;
    let ordered = args.bool("ordered", true)?;
    let bypass = args.bool("bypassDocumentValidation", false)?;
    let vars = args.let_vars()?;
    let vars = vars.as_ref();
    let now = bson::DateTime::now();
    let (mut n, mut modified) = (0u64, 0u64);
    let mut upserted = Vec::new();
    let mut errors = Vec::new();
    let mut last_lsn = 0;
    for (i, statement) in statements.iter().enumerate() {
        let result = parse_update_statement(statement, vars, now).and_then(|plan| {
            let outcome = state.catalog.write(db, coll, plan.upsert, |c| {
                c.bypass_validation(bypass);
                apply_update(c, &plan)
            })?;
            match outcome {
                None => Ok((UpdateOutcome::default(), 0)),
                Some(o) => o.value.map(|v| (v, o.lsn)),
            }
        });
        match result {
            Ok((outcome, lsn)) => {
                last_lsn = last_lsn.max(lsn);
                n += outcome.matched;
                modified += outcome.modified;
                if let Some(id) = outcome.upserted_id {
                    n += 1;
                    upserted.push(doc! { "index": i as i32, "_id": id });
                }
            }
            // As in mongod, a statement stopped at the command's `maxTimeMS` fails the whole
            // command, not just that statement (what earlier statements wrote stays).
            Err(e) if e.code == ErrorCode::MaxTimeMSExpired => return Err(e),
            Err(e) => {
                errors.push(e.to_write_error(i));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut reply = doc! { "n": n as i32, "nModified": modified as i32 };
    if !upserted.is_empty() {
        reply.insert("upserted", upserted);
    }
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(Reply::write(reply, last_lsn))
}

fn parse_update_statement(
    st: &Document,
    vars: Option<&Document>,
    now: bson::DateTime,
) -> Result<UpdatePlan> {
    let args = Args::new("q", st);
    let requested = collation::parse(st.get("collation"))?;
    let filter_doc = args.required_document("q")?.clone();
    let u = st.get("u").ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'update.updates.u' is missing but a required field",
        )
    })?;
    let array_filters = array_filters(st.get("arrayFilters"))?;
    // The statement's constants `c` (taken as they are, not evaluated) join the command's
    // `let` variables.
    let merged;
    let vars = match (vars, st.get("c")) {
        (v, Some(Bson::Document(c))) => {
            let mut all = v.cloned().unwrap_or_default();
            all.extend(c.clone());
            merged = all;
            Some(&merged)
        }
        (v, _) => v,
    };
    let update = UpdateSpec::parse_with_vars(u, array_filters.as_deref(), vars)?;
    let multi = args.bool("multi", false)?;
    if multi && update.is_replacement() {
        return Err(Error::failed_to_parse(
            "multi update is not supported for replacement-style update",
        ));
    }
    Ok(UpdatePlan {
        read: ReadSpec {
            filter: parse_filter(&filter_doc, vars)?,
            filter_doc,
            sort: None,
            sort_doc: None,
            hint: parse_hint(&args, "hint")?,
            skip: 0,
            limit: None,
        },
        update,
        multi,
        upsert: args.bool("upsert", false)?,
        now,
        collation: requested,
    })
}

fn array_filters(value: Option<&Bson>) -> Result<Option<Vec<Document>>> {
    match value {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Array(items)) => items
            .iter()
            .map(|f| match f {
                Bson::Document(d) => Ok(d.clone()),
                other => Err(Error::type_mismatch(format!(
                    "Each array filter must be an object, found {other}"
                ))),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(other) => Err(Error::type_mismatch(format!(
            "arrayFilters must be an array, found {other}"
        ))),
    }
}

pub(crate) fn delete(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["deletes", "ordered", "let"])?;
    let coll = args.collection()?;
    let statements = args.documents("deletes")?;
    check_statement_fields(
        &statements,
        "delete.deletes",
        DELETE_STATEMENT_FIELDS,
        &["q", "limit"],
    )?;
    let ordered = args.bool("ordered", true)?;
    let vars = args.let_vars()?;
    let vars = vars.as_ref();
    let mut n = 0u64;
    let mut errors = Vec::new();
    let mut last_lsn = 0;
    for (i, statement) in statements.iter().enumerate() {
        let result = parse_delete_statement(statement, vars).and_then(|(read, multi, wanted)| {
            let outcome = state.catalog.write(db, coll, false, |c| {
                let _collation =
                    collation::enter(wanted.or_default(c.default_collation().cloned()));
                delete_matching(c, &read, multi).map(|removed| removed.len() as u64)
            })?;
            match outcome {
                None => Ok((0, 0)),
                Some(o) => o.value.map(|v| (v, o.lsn)),
            }
        });
        match result {
            Ok((removed, lsn)) => {
                n += removed;
                last_lsn = last_lsn.max(lsn);
            }
            // A statement stopped at `maxTimeMS` fails the command, as in `update`.
            Err(e) if e.code == ErrorCode::MaxTimeMSExpired => return Err(e),
            Err(e) => {
                errors.push(e.to_write_error(i));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut reply = doc! { "n": n as i32 };
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(Reply::write(reply, last_lsn))
}

fn parse_delete_statement(
    st: &Document,
    vars: Option<&Document>,
) -> Result<(ReadSpec, bool, collation::Requested)> {
    let args = Args::new("q", st);
    let requested = collation::parse(st.get("collation"))?;
    let filter_doc = args.required_document("q")?.clone();
    let multi = match args.i64("limit")? {
        Some(0) => true,
        Some(1) => false,
        Some(other) => {
            return Err(Error::failed_to_parse(format!(
                "The limit field in delete objects must be 0 or 1. Got {other}"
            )))
        }
        None => {
            return Err(Error::location(
                40414,
                "BSON field 'delete.deletes.limit' is missing but a required field",
            ))
        }
    };
    Ok((
        ReadSpec {
            filter: parse_filter(&filter_doc, vars)?,
            filter_doc,
            sort: None,
            sort_doc: None,
            hint: parse_hint(&args, "hint")?,
            skip: 0,
            limit: if multi { None } else { Some(1) },
        },
        multi,
        requested,
    ))
}

/// Remove the documents a read selects; returns them.
pub(crate) fn delete_matching(
    c: &mut WriteSession<'_>,
    read: &ReadSpec,
    multi: bool,
) -> Result<Vec<Document>> {
    let mut query = read.query_spec();
    if !multi {
        query.limit = Some(1);
    }
    let (hits, _) = c.query(&query)?;
    let mut removed = Vec::with_capacity(hits.len());
    let mut clock = crate::deadline::Ticker::start();
    for hit in hits {
        clock.tick()?;
        if let Some(doc) = c.remove(hit.record) {
            removed.push(doc.to_document()?);
        }
    }
    Ok(removed)
}

pub(crate) fn find_and_modify(
    state: &Arc<ServerState>,
    db: &str,
    args: &Args<'_>,
) -> Result<Reply> {
    args.allow_only(&[
        "query",
        "sort",
        "remove",
        "update",
        "new",
        "fields",
        "upsert",
        "arrayFilters",
        "bypassDocumentValidation",
        "hint",
        "collation",
        "let",
    ])?;
    let coll = args.collection()?;
    let requested = collation::parse(args.get("collation"))?;
    let vars = args.let_vars()?;
    let vars = vars.as_ref();
    let remove = args.bool("remove", false)?;
    let return_new = args.bool("new", false)?;
    let upsert = args.bool("upsert", false)?;
    let bypass = args.bool("bypassDocumentValidation", false)?;
    let update_value = args.get("update");
    match (remove, update_value) {
        (true, Some(_)) => {
            return Err(Error::failed_to_parse(
                "Cannot specify both an update and remove=true",
            ))
        }
        (false, None) => {
            return Err(Error::failed_to_parse(
                "Either an update or remove=true must be specified",
            ))
        }
        _ => {}
    }
    if remove && upsert {
        return Err(Error::failed_to_parse(
            "Cannot specify both upsert=true and remove=true",
        ));
    }
    if remove && return_new {
        return Err(Error::failed_to_parse("Cannot specify both new=true and remove=true; 'remove' always returns the deleted document"));
    }
    let projection = parse_projection(args, "fields")?;
    let read = ReadSpec {
        limit: Some(1),
        ..ReadSpec::parse(args, "query", vars)?
    };
    let project = |doc: Option<Document>| -> Result<Bson> {
        match (doc, &projection) {
            (None, _) => Ok(Bson::Null),
            (Some(d), Some(p)) => p.apply(&d, None).map(Bson::Document),
            (Some(d), None) => Ok(Bson::Document(d)),
        }
    };
    if remove {
        let outcome = state.catalog.write(db, coll, false, |c| {
            let _collation =
                collation::enter(requested.clone().or_default(c.default_collation().cloned()));
            delete_matching(c, &read, false)
        })?;
        let (removed, lsn) = match outcome {
            None => (None, 0),
            Some(o) => (o.value?.into_iter().next(), o.lsn),
        };
        let n = removed.is_some() as i32;
        let reply = doc! { "lastErrorObject": { "n": n }, "value": project(removed)? };
        return Ok(Reply::write(reply, lsn));
    }
    let array_filters = array_filters(args.get("arrayFilters"))?;
    let update = UpdateSpec::parse_with_vars(
        update_value.unwrap_or(&Bson::Null),
        array_filters.as_deref(),
        vars,
    )?;
    let plan = UpdatePlan {
        read,
        update,
        multi: false,
        upsert,
        now: bson::DateTime::now(),
        collation: requested,
    };
    let outcome = state.catalog.write(db, coll, upsert, |c| {
        c.bypass_validation(bypass);
        apply_update(c, &plan)
    })?;
    let (result, lsn) = match outcome {
        None => (UpdateOutcome::default(), 0),
        Some(o) => (o.value?, o.lsn),
    };
    let mut last_error = doc! {
        "n": (result.matched > 0 || result.upserted_id.is_some()) as i32,
        "updatedExisting": result.matched > 0,
    };
    if let Some(id) = &result.upserted_id {
        last_error.insert("upserted", id.clone());
    }
    let value = if return_new {
        result.after
    } else {
        result.before
    };
    Ok(Reply::write(
        doc! { "lastErrorObject": last_error, "value": project(value)? },
        lsn,
    ))
}

pub(crate) fn count(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["query", "limit", "skip", "hint", "collation", "fields"])?;
    let coll = args.collection()?;
    let requested = collation::parse(args.get("collation"))?;
    let filter_doc = args.document("query")?.cloned().unwrap_or_default();
    let read = ReadSpec {
        filter: Filter::parse(&filter_doc)?,
        filter_doc,
        sort: None,
        sort_doc: None,
        hint: parse_hint(args, "hint")?,
        skip: args.non_negative("skip")?.unwrap_or(0) as usize,
        limit: args
            .i64("limit")?
            .map(|l| l.unsigned_abs() as usize)
            .filter(|l| *l > 0),
    };
    let n = match state.catalog.get(db, coll) {
        None => 0,
        Some(handle) => {
            let c = handle.read();
            let _collation = collation::enter(requested.or_default(c.default_collation().cloned()));
            if read.filter_doc.is_empty() && read.hint.is_none() {
                let total = c.len().saturating_sub(read.skip);
                read.limit.map_or(total, |l| total.min(l))
            } else {
                c.count_matching(&read.query_spec())?
            }
        }
    };
    Ok(Reply::read(doc! { "n": n as i64 }))
}

pub(crate) fn distinct(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&["key", "query", "collation", "hint"])?;
    let coll = args.collection()?;
    let requested = collation::parse(args.get("collation"))?;
    let key = args.string("key")?.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'distinct.key' is missing but a required field",
        )
    })?;
    if key.is_empty() {
        return Err(Error::failed_to_parse(
            "FieldPath cannot be constructed with empty string",
        ));
    }
    let filter_doc = args.document("query")?.cloned().unwrap_or_default();
    let read = ReadSpec {
        filter: Filter::parse(&filter_doc)?,
        filter_doc,
        sort: None,
        sort_doc: None,
        hint: parse_hint(args, "hint")?,
        skip: 0,
        limit: None,
    };
    let mut values: Vec<Bson> = Vec::new();
    // Held to the end: equal values (under the collation) count once, and the answer is sorted.
    let mut _collation = None;
    if let Some(handle) = state.catalog.get(db, coll) {
        let c = handle.read();
        _collation = Some(collation::enter(
            requested.or_default(c.default_collation().cloned()),
        ));
        let (hits, _) = c.query(&read.query_spec())?;
        let head = [key.split('.').next().unwrap_or_default().to_string()];
        let mut clock = crate::deadline::Ticker::start();
        for hit in hits {
            clock.tick()?;
            let doc = hit.doc.select(Some(&head))?;
            for value in path::collect_path_values(&doc, key, path::LeafArrays::NoTraversal) {
                // Arrays contribute their elements, as MongoDB's distinct does.
                let items = match value {
                    Bson::Array(items) => items,
                    other => vec![other],
                };
                for item in items {
                    if !values.iter().any(|v| values_equal(v, &item)) {
                        values.push(item);
                    }
                }
            }
        }
    }
    values.sort_by(crate::value::compare);
    Ok(Reply::read(doc! { "values": values }))
}
