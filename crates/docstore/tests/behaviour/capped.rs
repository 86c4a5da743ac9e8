//! Capped collections: `create` with `capped`/`size`/`max`, the oldest documents removed in
//! insertion order to make room, natural order, updates and deletes (allowed since 5.0/6.0),
//! `collMod` `cappedSize`/`cappedMax`, `collStats`/`listCollections`, tailable cursors,
//! `convertToCapped`/`cloneCollectionAsCapped`, and restarts.

use crate::common::{assert_code, client_for, find_stage, is_docstore, test_db};
use bson::{doc, Document};
use docstore::{Config, Server};
use futures::TryStreamExt;
use mongodb::Database;

/// The `_id`s in natural order (no sort).
async fn natural_ids(db: &Database, coll: &str) -> Vec<i32> {
    db.collection::<Document>(coll)
        .find(doc! {})
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .filter_map(|d| d.get_i32("_id").ok())
        .collect()
}

async fn insert_ids(db: &Database, coll: &str, ids: impl IntoIterator<Item = i32>) {
    for id in ids {
        db.collection::<Document>(coll)
            .insert_one(doc! { "_id": id, "pad": "x".repeat(100) })
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn inserts_beyond_max_remove_the_oldest_documents_in_insertion_order() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "log", "capped": true, "size": 100_000, "max": 3 })
        .await
        .unwrap();
    // Inserted in an order unlike `_id` order: natural order is insertion order.
    insert_ids(&t.db, "log", [5, 1, 4, 2, 3]).await;
    assert_eq!(natural_ids(&t.db, "log").await, vec![4, 2, 3]);
    // A batch insert makes room the same way.
    t.db.collection::<Document>("log")
        .insert_many(vec![doc! { "_id": 10 }, doc! { "_id": 11 }])
        .await
        .unwrap();
    assert_eq!(natural_ids(&t.db, "log").await, vec![3, 10, 11]);
}

#[tokio::test]
async fn inserts_beyond_size_remove_the_oldest_documents() {
    let t = test_db().await;
    // Sizes up to 4096 bytes are raised to 4096.
    t.db.run_command(doc! { "create": "small", "capped": true, "size": 1000 })
        .await
        .unwrap();
    insert_ids(&t.db, "small", 0..100).await;
    let kept = natural_ids(&t.db, "small").await;
    // Each document is 124 bytes of BSON: 4096 bytes hold 33 of them, the newest ones.
    assert_eq!(kept, (67..100).collect::<Vec<_>>());
    let stats =
        t.db.run_command(doc! { "collStats": "small" })
            .await
            .unwrap();
    assert!(stats.get_i32("size").unwrap() <= 4096, "{stats}");
}

#[tokio::test]
async fn coll_stats_and_list_collections_report_the_limits() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "c", "capped": true, "size": 8192, "max": 10 })
        .await
        .unwrap();
    let stats = t.db.run_command(doc! { "collStats": "c" }).await.unwrap();
    assert!(stats.get_bool("capped").unwrap());
    assert_eq!(stats.get_i32("max").unwrap(), 10);
    assert_eq!(stats.get_i32("maxSize").unwrap(), 8192);
    let list =
        t.db.run_command(doc! { "listCollections": 1, "filter": { "name": "c" } })
            .await
            .unwrap();
    let entry = list
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(
        entry.get_document("options").unwrap(),
        &doc! { "capped": true, "size": 8192, "max": 10 }
    );
    let plain = t.db.collection::<Document>("plain");
    plain.insert_one(doc! { "a": 1 }).await.unwrap();
    let stats =
        t.db.run_command(doc! { "collStats": "plain" })
            .await
            .unwrap();
    assert!(!stats.get_bool("capped").unwrap());
}

#[tokio::test]
async fn capped_documents_may_be_updated_to_another_size_and_deleted() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "c", "capped": true, "size": 4096 })
        .await
        .unwrap();
    insert_ids(&t.db, "c", [1, 2, 3]).await;
    let c = t.db.collection::<Document>("c");
    c.update_one(
        doc! { "_id": 2 },
        doc! { "$set": { "pad": "longer".repeat(30) } },
    )
    .await
    .unwrap();
    c.delete_one(doc! { "_id": 1 }).await.unwrap();
    // The updated document keeps its place in natural order.
    assert_eq!(natural_ids(&t.db, "c").await, vec![2, 3]);
}

#[tokio::test]
async fn a_capped_collection_needs_a_size() {
    let t = test_db().await;
    assert_code(
        t.db.run_command(doc! { "create": "c", "capped": true })
            .await,
        72,
    );
}

#[tokio::test]
async fn coll_mod_capped_max_removes_the_excess_on_the_next_insert() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "c", "capped": true, "size": 100_000, "max": 10 })
        .await
        .unwrap();
    insert_ids(&t.db, "c", 1..=6).await;
    t.db.run_command(doc! { "collMod": "c", "cappedMax": 2 })
        .await
        .unwrap();
    assert_eq!(natural_ids(&t.db, "c").await.len(), 6);
    insert_ids(&t.db, "c", [7]).await;
    assert_eq!(natural_ids(&t.db, "c").await, vec![6, 7]);
    // Only a capped collection has a cap to change.
    t.db.collection::<Document>("plain")
        .insert_one(doc! {})
        .await
        .unwrap();
    assert_code(
        t.db.run_command(doc! { "collMod": "plain", "cappedSize": 4096 })
            .await,
        72,
    );
}

/// The `_id`s of a cursor reply's batch, and the cursor id.
fn batch_ids(reply: &Document, batch: &str) -> (Vec<i32>, i64) {
    let cursor = reply.get_document("cursor").unwrap();
    let ids = cursor
        .get_array(batch)
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().get_i32("_id").unwrap())
        .collect();
    (ids, cursor.get_i64("id").unwrap())
}

#[tokio::test]
async fn a_tailable_find_takes_skip_and_limit_and_refuses_other_sorts() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "log", "capped": true, "size": 100_000 })
        .await
        .unwrap();
    insert_ids(&t.db, "log", [1, 2, 3]).await;
    // What a driver sends for `cursor[1]`: skip one, one document, done.
    let reply =
        t.db.run_command(doc! {
            "find": "log", "tailable": true, "skip": 1, "limit": 1, "singleBatch": true,
        })
        .await
        .unwrap();
    assert_eq!(batch_ids(&reply, "firstBatch"), (vec![2], 0));
    // Skipping only: the cursor tails after the last document.
    let reply =
        t.db.run_command(doc! { "find": "log", "tailable": true, "skip": 2 })
            .await
            .unwrap();
    let (ids, cursor) = batch_ids(&reply, "firstBatch");
    assert_eq!(ids, vec![3]);
    assert_ne!(cursor, 0);
    insert_ids(&t.db, "log", [4]).await;
    let more =
        t.db.run_command(doc! { "getMore": cursor, "collection": "log" })
            .await
            .unwrap();
    assert_eq!(batch_ids(&more, "nextBatch"), (vec![4], cursor));
    assert_code(
        t.db.run_command(doc! { "find": "log", "tailable": true, "sort": { "_id": 1 } })
            .await,
        2,
    );
}

#[tokio::test]
async fn a_tailable_cursor_returns_the_documents_inserted_after_it_was_opened() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "log", "capped": true, "size": 100_000 })
        .await
        .unwrap();
    insert_ids(&t.db, "log", [1, 2]).await;
    let reply = t
        .db
        .run_command(doc! { "find": "log", "filter": { "_id": { "$ne": 4 } }, "tailable": true })
        .await
        .unwrap();
    let (ids, cursor) = batch_ids(&reply, "firstBatch");
    assert_eq!(ids, vec![1, 2]);
    assert_ne!(
        cursor, 0,
        "a tailable cursor stays open at the end of the data"
    );
    // Nothing new: an empty batch, the cursor still open.
    let more =
        t.db.run_command(doc! { "getMore": cursor, "collection": "log" })
            .await
            .unwrap();
    assert_eq!(batch_ids(&more, "nextBatch"), (vec![], cursor));
    insert_ids(&t.db, "log", [3, 4, 5]).await;
    let more =
        t.db.run_command(doc! { "getMore": cursor, "collection": "log" })
            .await
            .unwrap();
    assert_eq!(batch_ids(&more, "nextBatch"), (vec![3, 5], cursor));
}

#[tokio::test]
async fn an_await_data_get_more_waits_for_an_insert() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "log", "capped": true, "size": 100_000 })
        .await
        .unwrap();
    insert_ids(&t.db, "log", [1]).await;
    let reply =
        t.db.run_command(doc! { "find": "log", "tailable": true, "awaitData": true })
            .await
            .unwrap();
    let (_, cursor) = batch_ids(&reply, "firstBatch");
    let db = t.db.clone();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        insert_ids(&db, "log", [2]).await;
    });
    let started = std::time::Instant::now();
    let more =
        t.db.run_command(doc! { "getMore": cursor, "collection": "log", "maxTimeMS": 5000 })
            .await
            .unwrap();
    assert_eq!(batch_ids(&more, "nextBatch"), (vec![2], cursor));
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    writer.await.unwrap();
    // With nothing arriving, it answers empty after maxTimeMS.
    let more =
        t.db.run_command(doc! { "getMore": cursor, "collection": "log", "maxTimeMS": 100 })
            .await
            .unwrap();
    assert_eq!(batch_ids(&more, "nextBatch"), (vec![], cursor));
}

#[tokio::test]
async fn tailable_cursors_need_a_capped_collection_and_lose_their_place_when_it_is_overwritten() {
    let t = test_db().await;
    t.db.collection::<Document>("plain")
        .insert_one(doc! { "_id": 1 })
        .await
        .unwrap();
    assert_code(
        t.db.run_command(doc! { "find": "plain", "tailable": true })
            .await,
        2,
    );
    assert_code(
        t.db.run_command(doc! { "find": "plain", "awaitData": true })
            .await,
        9,
    );
    t.db.run_command(doc! { "create": "log", "capped": true, "size": 100_000, "max": 2 })
        .await
        .unwrap();
    insert_ids(&t.db, "log", [1, 2]).await;
    let reply =
        t.db.run_command(doc! { "find": "log", "tailable": true })
            .await
            .unwrap();
    let (_, cursor) = batch_ids(&reply, "firstBatch");
    // Two more inserts push out the document the cursor stopped at.
    insert_ids(&t.db, "log", [3, 4]).await;
    assert_code(
        t.db.run_command(doc! { "getMore": cursor, "collection": "log" })
            .await,
        136,
    );
}

#[tokio::test]
async fn a_capped_collection_keeps_its_limits_and_order_after_a_restart() {
    if !is_docstore() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Config::persistent(dir.path())).await.unwrap();
    let db = client_for(&server.uri()).await.database("d");
    db.run_command(doc! { "create": "log", "capped": true, "size": 100_000, "max": 3 })
        .await
        .unwrap();
    insert_ids(&db, "log", [9, 8, 7, 6]).await;
    server.shutdown().await;

    let server = Server::start(Config::persistent(dir.path())).await.unwrap();
    let db = client_for(&server.uri()).await.database("d");
    assert_eq!(natural_ids(&db, "log").await, vec![8, 7, 6]);
    insert_ids(&db, "log", [5]).await;
    assert_eq!(natural_ids(&db, "log").await, vec![7, 6, 5]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_natural_sort_returns_insertion_order_or_its_reverse() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "log", "capped": true, "size": 4096 })
        .await
        .unwrap();
    insert_ids(&t.db, "log", [3, 1, 2]).await;
    let c = t.db.collection::<Document>("log");
    let order = |sort: Document| {
        let c = c.clone();
        async move {
            c.find(doc! {})
                .sort(sort)
                .await
                .unwrap()
                .try_collect::<Vec<_>>()
                .await
                .unwrap()
                .iter()
                .map(|d| d.get_i32("_id").unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(order(doc! { "$natural": 1 }).await, vec![3, 1, 2]);
    assert_eq!(order(doc! { "$natural": -1 }).await, vec![2, 1, 3]);
    let newest = c
        .find_one(doc! {})
        .sort(doc! { "$natural": -1 })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(newest.get_i32("_id").unwrap(), 2);
    let plan =
        t.db.run_command(doc! { "explain": { "find": "log", "sort": { "$natural": -1 } } })
            .await
            .unwrap();
    let scan = find_stage(&bson::Bson::Document(plan), "COLLSCAN").unwrap();
    assert_eq!(scan.get_str("direction").unwrap(), "backward");
}

#[tokio::test]
async fn convert_to_capped_keeps_the_newest_documents_that_fit_and_only_the_id_index() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("events");
    insert_ids(&t.db, "events", 1..=5).await;
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "pad": 1 })
            .build(),
    )
    .await
    .unwrap();
    t.db.run_command(doc! { "convertToCapped": "events", "size": 4096, "max": 2 })
        .await
        .unwrap();
    assert_eq!(natural_ids(&t.db, "events").await, vec![4, 5]);
    let indexes = c.list_index_names().await.unwrap();
    assert_eq!(indexes, vec!["_id_".to_string()]);
    let stats =
        t.db.run_command(doc! { "collStats": "events" })
            .await
            .unwrap();
    assert!(stats.get_bool("capped").unwrap());
}

#[tokio::test]
async fn clone_collection_as_capped_copies_the_source_into_a_new_capped_collection() {
    let t = test_db().await;
    insert_ids(&t.db, "source", [7, 8, 9]).await;
    t.db.run_command(doc! {
        "cloneCollectionAsCapped": "source", "toCollection": "copy", "size": 4096, "max": 2,
    })
    .await
    .unwrap();
    assert_eq!(natural_ids(&t.db, "copy").await, vec![8, 9]);
    assert_eq!(natural_ids(&t.db, "source").await, vec![7, 8, 9]);
    assert_code(
        t.db.run_command(doc! {
            "cloneCollectionAsCapped": "missing", "toCollection": "other", "size": 4096,
        })
        .await,
        26,
    );
}

#[tokio::test]
async fn the_drivers_tailable_await_cursor_sees_new_documents() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "log", "capped": true, "size": 100_000 })
        .await
        .unwrap();
    insert_ids(&t.db, "log", [1]).await;
    let c = t.db.collection::<Document>("log");
    let mut cursor = c
        .find(doc! {})
        .cursor_type(mongodb::options::CursorType::TailableAwait)
        .max_await_time(std::time::Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(
        cursor
            .try_next()
            .await
            .unwrap()
            .unwrap()
            .get_i32("_id")
            .unwrap(),
        1
    );
    let db = t.db.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        insert_ids(&db, "log", [2]).await;
    });
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), cursor.try_next())
        .await
        .expect("the cursor yields the new document")
        .unwrap()
        .unwrap();
    assert_eq!(next.get_i32("_id").unwrap(), 2);
}
