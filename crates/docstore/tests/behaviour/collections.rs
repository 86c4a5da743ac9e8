//! Collections, databases and indexes: create, drop, rename, list, createIndexes/listIndexes/
//! dropIndexes, and the commands docstore refuses by name.

use crate::common::{assert_code, code_of, is_docstore, message_of, test_db};
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

#[tokio::test]
async fn creating_an_existing_collection_is_namespace_exists() {
    let t = test_db().await;
    t.db.create_collection("c").await.unwrap();
    assert_code(t.db.create_collection("c").await, 48);
}

#[tokio::test]
async fn collections_appear_on_first_write_and_go_on_drop() {
    let t = test_db().await;
    assert!(t.db.list_collection_names().await.unwrap().is_empty());
    t.db.collection::<Document>("a")
        .insert_one(doc! {})
        .await
        .unwrap();
    t.db.collection::<Document>("b")
        .insert_one(doc! {})
        .await
        .unwrap();
    let mut names = t.db.list_collection_names().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["a", "b"]);
    let filtered =
        t.db.list_collection_names()
            .filter(doc! { "name": "b" })
            .await
            .unwrap();
    assert_eq!(filtered, vec!["b"]);
    t.db.collection::<Document>("a").drop().await.unwrap();
    assert_eq!(t.db.list_collection_names().await.unwrap(), vec!["b"]);
    // Dropping what does not exist is not an error.
    t.db.collection::<Document>("zzz").drop().await.unwrap();
}

#[tokio::test]
async fn databases_are_listed_and_dropped() {
    let t = test_db().await;
    t.db.collection::<Document>("a")
        .insert_one(doc! {})
        .await
        .unwrap();
    let names = t.client.list_database_names().await.unwrap();
    assert!(names.contains(&t.db.name().to_string()));
    t.db.drop().await.unwrap();
    let names = t.client.list_database_names().await.unwrap();
    assert!(!names.contains(&t.db.name().to_string()));
}

#[tokio::test]
async fn rename_moves_documents_and_indexes_and_refuses_an_existing_target() {
    let t = test_db().await;
    let a = t.db.collection::<Document>("a");
    a.insert_one(doc! { "_id": 1, "x": 1 }).await.unwrap();
    a.create_index(IndexModel::builder().keys(doc! { "x": 1 }).build())
        .await
        .unwrap();
    t.db.collection::<Document>("taken")
        .insert_one(doc! {})
        .await
        .unwrap();
    let admin = t.client.database("admin");
    let db = t.db.name();
    let r = admin
        .run_command(doc! { "renameCollection": format!("{db}.a"), "to": format!("{db}.taken") })
        .await;
    assert_code(r, 48);
    admin
        .run_command(doc! { "renameCollection": format!("{db}.a"), "to": format!("{db}.b") })
        .await
        .unwrap();
    let b = t.db.collection::<Document>("b");
    assert_eq!(
        b.find_one(doc! {}).await.unwrap().unwrap(),
        doc! { "_id": 1, "x": 1 }
    );
    let names: Vec<String> = b.list_index_names().await.unwrap();
    assert!(names.contains(&"x_1".to_string()));
    assert!(!t
        .db
        .list_collection_names()
        .await
        .unwrap()
        .contains(&"a".to_string()));
}

#[tokio::test]
async fn create_index_is_idempotent_and_listed() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    let model = IndexModel::builder().keys(doc! { "a": 1, "b": -1 }).build();
    let r = c.create_index(model.clone()).await.unwrap();
    assert_eq!(r.index_name, "a_1_b_-1");
    c.create_index(model).await.unwrap();
    let specs: Vec<IndexModel> = c.list_indexes().await.unwrap().try_collect().await.unwrap();
    assert_eq!(specs.len(), 2);
    assert_eq!(specs[1].keys, doc! { "a": 1, "b": -1 });
}

#[tokio::test]
async fn same_name_with_other_keys_conflicts() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    let named = |keys: Document| {
        IndexModel::builder()
            .keys(keys)
            .options(IndexOptions::builder().name("idx".to_string()).build())
            .build()
    };
    c.create_index(named(doc! { "a": 1 })).await.unwrap();
    assert_code(c.create_index(named(doc! { "b": 1 })).await, 86);
}

#[tokio::test]
async fn a_unique_index_rejects_duplicates_with_key_pattern_and_value() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("users");
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "email": 1 })
            .options(IndexOptions::builder().unique(true).build())
            .build(),
    )
    .await
    .unwrap();
    c.insert_one(doc! { "email": "a@x" }).await.unwrap();
    let e = assert_code(c.insert_one(doc! { "email": "a@x" }).await, 11000);
    let msg = message_of(&e);
    assert!(
        msg.contains("index: email_1 dup key: { email: \"a@x\" }"),
        "message was {msg}"
    );
    let reply =
        t.db.run_command(doc! { "insert": "users", "documents": [{ "email": "a@x" }] })
            .await
            .unwrap();
    let we = reply.get_array("writeErrors").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(we.get_document("keyPattern").unwrap(), &doc! { "email": 1 });
    assert_eq!(
        we.get_document("keyValue").unwrap(),
        &doc! { "email": "a@x" }
    );
}

#[tokio::test]
async fn building_a_unique_index_over_duplicates_fails_and_leaves_no_index() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many(vec![doc! { "a": 1 }, doc! { "a": 1 }])
        .await
        .unwrap();
    let r = c
        .create_index(
            IndexModel::builder()
                .keys(doc! { "a": 1 })
                .options(IndexOptions::builder().unique(true).build())
                .build(),
        )
        .await;
    assert_code(r, 11000);
    assert_eq!(c.list_index_names().await.unwrap(), vec!["_id_"]);
}

#[tokio::test]
async fn drop_indexes_by_name_and_the_id_index_is_protected() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.create_index(IndexModel::builder().keys(doc! { "a": 1 }).build())
        .await
        .unwrap();
    c.drop_index("a_1").await.unwrap();
    assert_eq!(c.list_index_names().await.unwrap(), vec!["_id_"]);
    assert_code(c.drop_index("a_1").await, 27);
    assert_code(c.drop_index("_id_").await, 72);
}

#[tokio::test]
async fn list_indexes_on_a_missing_collection_is_namespace_not_found() {
    let t = test_db().await;
    let r = t.db.run_command(doc! { "listIndexes": "nope" }).await;
    assert_code(r, 26);
}

#[tokio::test]
async fn unknown_commands_are_command_not_found() {
    let t = test_db().await;
    let e = assert_code(t.db.run_command(doc! { "frobnicate": 1 }).await, 59);
    assert!(message_of(&e).contains("frobnicate"));
}

#[tokio::test]
async fn unknown_command_fields_are_refused_by_name() {
    let t = test_db().await;
    let e =
        t.db.run_command(doc! { "find": "c", "filtr": {} })
            .await
            .unwrap_err();
    assert_eq!(code_of(&e), Some(40415));
    assert!(message_of(&e).contains("filtr"));
}

#[tokio::test]
async fn transactions_are_refused_like_a_standalone_server() {
    let t = test_db().await;
    let r =
        t.db.run_command(
            doc! { "find": "c", "txnNumber": 1i64, "startTransaction": true, "autocommit": false },
        )
        .await;
    // A standalone mongod answers 20 IllegalOperation.
    assert_code(r, 20);
}

#[tokio::test]
async fn unsupported_features_are_named_in_the_error() {
    if !is_docstore() {
        return; // MongoDB supports these; the test is about docstore's refusal.
    }
    let t = test_db().await;
    let e =
        t.db.run_command(doc! { "create": "v", "viewOn": "src", "pipeline": [] })
            .await
            .unwrap_err();
    assert_eq!(code_of(&e), Some(115));
    assert!(message_of(&e).contains("viewOn"));
    let e =
        t.db.run_command(doc! { "replSetGetStatus": 1 })
            .await
            .unwrap_err();
    assert!(message_of(&e).contains("replication"));
}

#[tokio::test]
async fn coll_stats_and_db_stats_count_documents() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many((0..10).map(|i| doc! { "i": i }))
        .await
        .unwrap();
    let s = t.db.run_command(doc! { "collStats": "c" }).await.unwrap();
    assert_eq!(
        s.get_i32("count")
            .map(i64::from)
            .or_else(|_| s.get_i64("count"))
            .unwrap(),
        10
    );
    let d = t.db.run_command(doc! { "dbStats": 1 }).await.unwrap();
    assert_eq!(
        d.get_i64("objects")
            .or_else(|_| d.get_i32("objects").map(i64::from))
            .unwrap(),
        10
    );
    let size = |d: &Document| {
        d.get_f64("dataSize")
            .or_else(|_| d.get_i64("dataSize").map(|v| v as f64))
            .unwrap()
    };
    let scaled =
        t.db.run_command(doc! { "dbStats": 1, "scale": 1024 })
            .await
            .unwrap();
    // Scaled to KiB (MongoDB may truncate): within one unit of the exact quotient.
    assert!((size(&scaled) - size(&d) / 1024.0).abs() < 1.0, "{scaled}");
}

fn unique(keys: Document, sparse: bool) -> IndexModel {
    IndexModel::builder()
        .keys(keys)
        .options(IndexOptions::builder().unique(true).sparse(sparse).build())
        .build()
}

#[tokio::test]
async fn sparse_unique_indexes_skip_documents_without_the_field() {
    let t = test_db().await;
    let sparse = t.db.collection::<Document>("sparse");
    sparse
        .create_index(unique(doc! { "code": 1 }, true))
        .await
        .unwrap();
    sparse
        .insert_many(vec![doc! { "a": 1 }, doc! { "a": 2 }, doc! { "code": "x" }])
        .await
        .unwrap();
    assert_code(sparse.insert_one(doc! { "code": "x" }).await, 11000);

    let dense = t.db.collection::<Document>("dense");
    dense
        .create_index(unique(doc! { "code": 1 }, false))
        .await
        .unwrap();
    dense.insert_one(doc! { "a": 1 }).await.unwrap();
    let e = assert_code(dense.insert_one(doc! { "a": 2 }).await, 11000);
    assert!(
        message_of(&e).contains("dup key: { code: null }"),
        "{}",
        message_of(&e)
    );
}

#[tokio::test]
async fn unique_multikey_indexes_compare_elements_and_parallel_arrays_are_refused() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("tags");
    c.create_index(unique(doc! { "tags": 1 }, false))
        .await
        .unwrap();
    c.insert_one(doc! { "tags": ["a", "b"] }).await.unwrap();
    // Repeating a value inside one document is fine; sharing it with another is not.
    c.insert_one(doc! { "tags": ["c", "c"] }).await.unwrap();
    assert_code(c.insert_one(doc! { "tags": ["b", "z"] }).await, 11000);

    let p = t.db.collection::<Document>("pairs");
    p.create_index(IndexModel::builder().keys(doc! { "a": 1, "b": 1 }).build())
        .await
        .unwrap();
    p.insert_one(doc! { "a": [1, 2], "b": 1 }).await.unwrap();
    assert_code(p.insert_one(doc! { "a": [1, 2], "b": [3, 4] }).await, 171);
}

#[tokio::test]
async fn numbers_of_different_types_are_the_same_unique_key() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nums");
    c.create_index(unique(doc! { "n": 1 }, false))
        .await
        .unwrap();
    c.insert_one(doc! { "n": 1 }).await.unwrap();
    assert_code(c.insert_one(doc! { "n": 1.0 }).await, 11000);
    assert_code(c.insert_one(doc! { "n": 1i64 }).await, 11000);
    c.insert_one(doc! { "n": 1.5 }).await.unwrap();
}

#[tokio::test]
async fn an_oversized_document_is_refused_and_the_connection_keeps_working() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("big");
    let huge = "x".repeat(16 * 1024 * 1024 + 100);
    assert!(c.insert_one(doc! { "s": huge }).await.is_err());
    c.insert_one(doc! { "s": "small" }).await.unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
}

#[tokio::test]
async fn deeply_nested_documents_round_trip() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("deep");
    let mut d = doc! { "leaf": 1 };
    for _ in 0..90 {
        d = doc! { "n": d };
    }
    c.insert_one(doc! { "_id": 1, "root": d.clone() })
        .await
        .unwrap();
    let back = c.find_one(doc! { "_id": 1 }).await.unwrap().unwrap();
    assert_eq!(back.get_document("root").unwrap(), &d);
}
