//! Capped collections: `create` with `capped`/`size`/`max`, the oldest documents removed in
//! insertion order to make room, natural order, updates and deletes (allowed since 5.0/6.0),
//! `collMod` `cappedSize`/`cappedMax`, `collStats`/`listCollections`, and restarts.

use crate::common::{assert_code, client_for, is_docstore, message_of, test_db};
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
    let stats = t.db.run_command(doc! { "collStats": "small" }).await.unwrap();
    assert!(stats.get_i32("size").unwrap() <= 4096, "{stats}");
}

#[tokio::test]
async fn coll_stats_and_list_collections_report_the_limits() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "c", "capped": true, "size": 8192, "max": 10 })
        .await
        .unwrap();
    let stats = t.db.run_command(doc! { "collStats": "c" }).await.unwrap();
    assert_eq!(stats.get_bool("capped").unwrap(), true);
    assert_eq!(stats.get_i32("max").unwrap(), 10);
    assert_eq!(stats.get_i32("maxSize").unwrap(), 8192);
    let list = t.db.run_command(doc! { "listCollections": 1, "filter": { "name": "c" } })
        .await
        .unwrap();
    let entry = list.get_document("cursor").unwrap().get_array("firstBatch").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(
        entry.get_document("options").unwrap(),
        &doc! { "capped": true, "size": 8192, "max": 10 }
    );
    let plain = t.db.collection::<Document>("plain");
    plain.insert_one(doc! { "a": 1 }).await.unwrap();
    let stats = t.db.run_command(doc! { "collStats": "plain" }).await.unwrap();
    assert_eq!(stats.get_bool("capped").unwrap(), false);
}

#[tokio::test]
async fn capped_documents_may_be_updated_to_another_size_and_deleted() {
    let t = test_db().await;
    t.db.run_command(doc! { "create": "c", "capped": true, "size": 4096 })
        .await
        .unwrap();
    insert_ids(&t.db, "c", [1, 2, 3]).await;
    let c = t.db.collection::<Document>("c");
    c.update_one(doc! { "_id": 2 }, doc! { "$set": { "pad": "longer".repeat(30) } })
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
        t.db.run_command(doc! { "create": "c", "capped": true }).await,
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
    t.db.collection::<Document>("plain").insert_one(doc! {}).await.unwrap();
    assert_code(
        t.db.run_command(doc! { "collMod": "plain", "cappedSize": 4096 }).await,
        72,
    );
}

#[tokio::test]
async fn tailable_cursors_are_refused_by_name() {
    if !is_docstore() {
        return; // MongoDB supports them on capped collections.
    }
    let t = test_db().await;
    t.db.run_command(doc! { "create": "c", "capped": true, "size": 4096 })
        .await
        .unwrap();
    let e = assert_code(
        t.db.run_command(doc! { "find": "c", "tailable": true, "awaitData": true }).await,
        115,
    );
    assert!(message_of(&e).contains("tailable"), "{e}");
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
