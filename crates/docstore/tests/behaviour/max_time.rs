//! `maxTimeMS`: a command that runs past it is stopped with 50 MaxTimeMSExpired, 0 means no
//! limit, and bad values are refused with mongod's codes.
//!
//! The tests that need a command to outlast its limit run on a docstore whose every deadline
//! check first sleeps (`Config::max_time_check_delay`): a scan then takes at least that long,
//! whatever the machine's load, so they do not race the clock. Against a real MongoDB
//! (`MONGODB_URI`) only the tests without that hook run.

use crate::common::{assert_code, client_for, is_docstore, message_of, test_db};
use bson::{doc, Bson, Document};
use docstore::{Config, Server, ServerHandle};
use mongodb::Database;
use std::time::Duration;

/// How long each deadline check sleeps on the slowed server: far over the 1 ms limit the
/// tests give, so the first check of a scan always finds the time spent.
const CHECK_DELAY: Duration = Duration::from_millis(20);

/// Documents in the scanned collection: several checks' worth (one per thousand or so).
const DOCS: i32 = 3000;

/// A docstore whose deadline checks are slow, with collection `items` of [`DOCS`] documents
/// (`n` indexed), and the database holding it.
async fn slowed_store() -> (ServerHandle, Database) {
    let server = Server::start(Config {
        max_time_check_delay: Some(CHECK_DELAY),
        ..Config::in_memory()
    })
    .await
    .expect("docstore starts");
    let db = client_for(&server.uri()).await.database("max_time");
    let docs: Vec<Document> = (0..DOCS)
        .map(|i| doc! { "_id": i, "n": i % 10, "tag": format!("t{}", i % 7) })
        .collect();
    db.collection::<Document>("items")
        .insert_many(docs)
        .await
        .unwrap();
    db.collection::<Document>("items")
        .create_index(mongodb::IndexModel::builder().keys(doc! { "n": 1 }).build())
        .await
        .unwrap();
    (server, db)
}

/// A `count`'s or a write's `n` (int or long, as the server answers it).
fn n_of(reply: &Document) -> i64 {
    match reply.get("n") {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("no n in {reply}: {other:?}"),
    }
}

/// The documents of a find's (or an aggregate's) first batch.
fn first_batch(reply: &Document) -> usize {
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .map(Vec::len)
        .expect("a cursor reply")
}

#[tokio::test]
async fn reads_past_their_time_limit_answer_max_time_ms_expired() {
    if !is_docstore() {
        return;
    }
    let (_server, db) = slowed_store().await;
    // A collection scan (nothing matches: every document is read).
    let e = assert_code(
        db.run_command(doc! { "find": "items", "filter": { "tag": "none" }, "maxTimeMS": 1 })
            .await,
        50,
    );
    assert_eq!(message_of(&e), "operation exceeded time limit");
    match e.kind.as_ref() {
        mongodb::error::ErrorKind::Command(c) => assert_eq!(c.code_name, "MaxTimeMSExpired"),
        other => panic!("not a command error: {other:?}"),
    }
    // An index scan, a skip along the index, an aggregation, counts (from the index's keys,
    // and by matching documents) and distinct.
    for command in [
        doc! { "find": "items", "filter": { "n": { "$gte": 0 } }, "maxTimeMS": 1 },
        doc! { "find": "items", "filter": { "n": { "$gte": 0 } }, "sort": { "n": 1 },
        "skip": 2500, "limit": 1, "maxTimeMS": 1 },
        doc! { "aggregate": "items", "pipeline": [{ "$match": { "tag": "t1" } },
        { "$group": { "_id": "$n", "c": { "$sum": 1 } } }], "cursor": {}, "maxTimeMS": 1 },
        doc! { "count": "items", "query": { "n": { "$gte": 0 } }, "maxTimeMS": 1 },
        doc! { "count": "items", "query": { "tag": "t1" }, "maxTimeMS": 1 },
        doc! { "distinct": "items", "key": "tag", "maxTimeMS": 1 },
        doc! { "findAndModify": "items", "query": { "tag": "none" }, "update": { "$set": { "x": 1 } },
        "maxTimeMS": 1 },
    ] {
        assert_code(db.run_command(command).await, 50);
    }
    // The store goes on answering, and the document findAndModify looked for was not there.
    let count = db
        .run_command(doc! { "count": "items", "query": { "x": 1 } })
        .await
        .unwrap();
    assert_eq!(n_of(&count), 0);
}

#[tokio::test]
async fn no_limit_or_a_generous_one_lets_the_read_finish() {
    if !is_docstore() {
        return;
    }
    let (_server, db) = slowed_store().await;
    for max_time in [
        Bson::Int32(0),
        Bson::Int64(600_000),
        Bson::Double(600_000.0),
    ] {
        let reply = db
            .run_command(
                doc! { "find": "items", "filter": { "tag": { "$ne": "none" } },
                "batchSize": DOCS, "maxTimeMS": max_time.clone() },
            )
            .await
            .unwrap_or_else(|e| panic!("maxTimeMS {max_time}: {e}"));
        assert_eq!(first_batch(&reply), DOCS as usize);
        let count = db
            .run_command(doc! { "count": "items", "query": { "n": 3 }, "maxTimeMS": max_time })
            .await
            .unwrap();
        assert_eq!(n_of(&count), i64::from(DOCS / 10));
    }
    // Without maxTimeMS nothing is checked (the slowed checks never run) and all is read.
    let reply = db
        .run_command(doc! { "aggregate": "items", "pipeline": [], "cursor": { "batchSize": DOCS } })
        .await
        .unwrap();
    assert_eq!(first_batch(&reply), DOCS as usize);
}

#[tokio::test]
async fn a_write_past_its_time_limit_fails_the_whole_command() {
    if !is_docstore() {
        return;
    }
    let (_server, db) = slowed_store().await;
    // Not a write error of the statement: the command itself fails, as in mongod.
    for command in [
        doc! { "update": "items", "updates": [{ "q": { "tag": "t2" }, "u": { "$set": { "x": 1 } },
        "multi": true }], "maxTimeMS": 1 },
        doc! { "delete": "items", "deletes": [{ "q": { "tag": "t3" }, "limit": 0 }], "maxTimeMS": 1 },
    ] {
        assert_code(db.run_command(command).await, 50);
    }
    // The same statements without a limit run to the end.
    let reply = db
        .run_command(
            doc! { "update": "items", "updates": [{ "q": { "tag": "t2" },
            "u": { "$set": { "x": 1 } }, "multi": true }] },
        )
        .await
        .unwrap();
    assert_eq!(
        n_of(&reply),
        (0..DOCS).filter(|i| i % 7 == 2).count() as i64
    );
}

#[tokio::test]
async fn bad_max_time_ms_values_are_refused_with_mongods_codes() {
    let t = test_db().await;
    t.db.collection::<Document>("c")
        .insert_one(doc! { "a": 1 })
        .await
        .unwrap();
    let cases: [(Bson, i32); 7] = [
        (Bson::Int32(-1), 51024),
        (Bson::Int64(-5), 51024),
        (Bson::Double(1.5), 2),
        (Bson::Int64(i64::from(i32::MAX) + 1), 2),
        (Bson::Double(f64::MAX), 2),
        (Bson::Null, 2),
        (Bson::String("100".into()), 14),
    ];
    for (value, code) in cases {
        for command in [
            doc! { "find": "c", "maxTimeMS": value.clone() },
            doc! { "aggregate": "c", "pipeline": [], "cursor": {}, "maxTimeMS": value.clone() },
            doc! { "count": "c", "maxTimeMS": value.clone() },
        ] {
            let e = assert_code(t.db.run_command(command.clone()).await, code);
            if code == 51024 {
                assert!(
                    message_of(&e).starts_with("BSON field 'maxTimeMS' value must be >= 0"),
                    "{command}: {}",
                    message_of(&e)
                );
            }
        }
    }
    // The largest allowed value is accepted.
    t.db.run_command(doc! { "find": "c", "maxTimeMS": i32::MAX })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_get_more_takes_max_time_ms_only_on_an_await_data_cursor() {
    let t = test_db().await;
    let docs: Vec<Document> = (0..5).map(|i| doc! { "_id": i }).collect();
    t.db.collection::<Document>("c")
        .insert_many(docs)
        .await
        .unwrap();
    let reply =
        t.db.run_command(doc! { "find": "c", "batchSize": 2 })
            .await
            .unwrap();
    let id = reply.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_code(
        t.db.run_command(doc! { "getMore": id, "collection": "c", "maxTimeMS": 100 })
            .await,
        2,
    );
    // The cursor is still open: without maxTimeMS the getMore is answered.
    let more =
        t.db.run_command(doc! { "getMore": id, "collection": "c" })
            .await
            .unwrap();
    let batch = more
        .get_document("cursor")
        .unwrap()
        .get_array("nextBatch")
        .unwrap();
    assert_eq!(batch.len(), 3);
}
