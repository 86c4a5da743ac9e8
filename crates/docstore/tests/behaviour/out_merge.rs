//! `$out` and `$merge`: aggregation results written to a collection, replacing it whole or
//! merged document by document, with MongoDB's modes and errors.

use crate::common::{assert_code, message_of, test_db};
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};

async fn all(c: &Collection<Document>) -> Vec<Document> {
    c.find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

async fn aggregate(
    c: &Collection<Document>,
    pipeline: Vec<Document>,
) -> mongodb::error::Result<Vec<Document>> {
    c.aggregate(pipeline).await?.try_collect().await
}

async fn sales(db: &Database) -> Collection<Document> {
    let c = db.collection::<Document>("sales");
    c.insert_many(vec![
        doc! { "_id": 1, "item": "a", "qty": 2 },
        doc! { "_id": 2, "item": "b", "qty": 1 },
        doc! { "_id": 3, "item": "a", "qty": 5 },
    ])
    .await
    .unwrap();
    c
}

#[tokio::test]
async fn out_replaces_the_target_documents_and_keeps_its_indexes() {
    let t = test_db().await;
    let source = sales(&t.db).await;
    let target = t.db.collection::<Document>("totals");
    target
        .insert_many(vec![
            doc! { "_id": "old", "total": 0 },
            doc! { "_id": "z", "total": 9 },
        ])
        .await
        .unwrap();
    target
        .create_index(
            IndexModel::builder()
                .keys(doc! { "total": 1 })
                .options(IndexOptions::builder().name("by_total".to_string()).build())
                .build(),
        )
        .await
        .unwrap();
    let returned = aggregate(
        &source,
        vec![
            doc! { "$group": { "_id": "$item", "total": { "$sum": "$qty" } } },
            doc! { "$out": "totals" },
        ],
    )
    .await
    .unwrap();
    assert!(
        returned.is_empty(),
        "$out returns no documents: {returned:?}"
    );
    assert_eq!(
        all(&target).await,
        vec![
            doc! { "_id": "a", "total": 7 },
            doc! { "_id": "b", "total": 1 }
        ]
    );
    let names = target.list_index_names().await.unwrap();
    assert!(names.contains(&"by_total".to_string()), "{names:?}");
    // The source itself may be the target.
    aggregate(
        &source,
        vec![doc! { "$match": { "item": "a" } }, doc! { "$out": "sales" }],
    )
    .await
    .unwrap();
    assert_eq!(all(&source).await.len(), 2);
}

#[tokio::test]
async fn a_failing_out_leaves_the_target_untouched() {
    let t = test_db().await;
    let source = sales(&t.db).await;
    let target = t.db.collection::<Document>("byitem");
    target
        .insert_one(doc! { "_id": 0, "item": "keep" })
        .await
        .unwrap();
    target
        .create_index(
            IndexModel::builder()
                .keys(doc! { "item": 1 })
                .options(IndexOptions::builder().unique(true).build())
                .build(),
        )
        .await
        .unwrap();
    let duplicate = aggregate(
        &source,
        vec![
            doc! { "$project": { "item": 1 } },
            doc! { "$out": "byitem" },
        ],
    )
    .await;
    assert_code(duplicate, 11000);
    assert_eq!(all(&target).await, vec![doc! { "_id": 0, "item": "keep" }]);
    let missing = t.db.collection::<Document>("never");
    let duplicate_ids = aggregate(
        &source,
        vec![
            doc! { "$project": { "_id": "$item" } },
            doc! { "$out": "never" },
        ],
    )
    .await;
    assert_code(duplicate_ids, 11000);
    assert!(all(&missing).await.is_empty());
}

#[tokio::test]
async fn out_writes_to_another_database_and_must_be_the_last_stage() {
    let t = test_db().await;
    let source = sales(&t.db).await;
    let other = t.client.database(&format!("{}_other", t.db.name()));
    other.drop().await.unwrap();
    aggregate(
        &source,
        vec![
            doc! { "$match": { "qty": { "$gt": 1 } } },
            doc! { "$out": { "db": other.name(), "coll": "big" } },
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        all(&other.collection("big")).await,
        vec![
            doc! { "_id": 1, "item": "a", "qty": 2 },
            doc! { "_id": 3, "item": "a", "qty": 5 }
        ]
    );
    other.drop().await.unwrap();
    for stage in [doc! { "$out": "x" }, doc! { "$merge": { "into": "x" } }] {
        let e = assert_code(
            aggregate(&source, vec![stage, doc! { "$match": {} }]).await,
            40601,
        );
        assert!(
            message_of(&e).contains("can only be the final stage in the pipeline"),
            "{e}"
        );
    }
}

#[tokio::test]
async fn merge_on_id_merges_replaces_keeps_or_inserts_as_asked() {
    let t = test_db().await;
    let source = t.db.collection::<Document>("updates");
    source
        .insert_many(vec![
            doc! { "_id": 1, "price": 10 },
            doc! { "_id": 3, "price": 30 },
        ])
        .await
        .unwrap();
    let target = t.db.collection::<Document>("catalog");
    let reset = || async {
        target.drop().await.unwrap();
        target
            .insert_many(vec![
                doc! { "_id": 1, "name": "one", "price": 1 },
                doc! { "_id": 2, "name": "two", "price": 2 },
            ])
            .await
            .unwrap();
    };
    let merge = |spec: Document| {
        let source = source.clone();
        async move { aggregate(&source, vec![doc! { "$merge": spec }]).await }
    };

    reset().await;
    let out = merge(doc! { "into": "catalog" }).await.unwrap();
    assert!(out.is_empty());
    assert_eq!(
        all(&target).await,
        vec![
            doc! { "_id": 1, "name": "one", "price": 10 },
            doc! { "_id": 2, "name": "two", "price": 2 },
            doc! { "_id": 3, "price": 30 },
        ]
    );

    reset().await;
    merge(doc! { "into": "catalog", "whenMatched": "replace", "whenNotMatched": "discard" })
        .await
        .unwrap();
    assert_eq!(
        all(&target).await,
        vec![
            doc! { "_id": 1, "price": 10 },
            doc! { "_id": 2, "name": "two", "price": 2 },
        ]
    );

    reset().await;
    merge(doc! { "into": "catalog", "whenMatched": "keepExisting" })
        .await
        .unwrap();
    assert_eq!(
        all(&target).await,
        vec![
            doc! { "_id": 1, "name": "one", "price": 1 },
            doc! { "_id": 2, "name": "two", "price": 2 },
            doc! { "_id": 3, "price": 30 },
        ]
    );

    reset().await;
    merge(doc! {
        "into": "catalog",
        "let": { "p": "$price" },
        "whenMatched": [{ "$set": { "price": { "$add": ["$price", "$$p"] }, "seen": true } }],
        "whenNotMatched": "discard",
    })
    .await
    .unwrap();
    assert_eq!(
        all(&target).await,
        vec![
            doc! { "_id": 1, "name": "one", "price": 11, "seen": true },
            doc! { "_id": 2, "name": "two", "price": 2 },
        ]
    );

    reset().await;
    let e = assert_code(
        merge(doc! { "into": "catalog", "whenMatched": "fail" }).await,
        11000,
    );
    assert!(message_of(&e).contains("duplicate key"), "{e}");

    reset().await;
    let e = assert_code(
        merge(doc! { "into": "catalog", "whenMatched": "merge", "whenNotMatched": "fail" }).await,
        13113,
    );
    assert!(
        message_of(&e).contains("could not find a matching document"),
        "{e}"
    );
}

#[tokio::test]
async fn merge_on_other_fields_needs_a_unique_index_over_them() {
    let t = test_db().await;
    let source = t.db.collection::<Document>("feed");
    source
        .insert_many(vec![
            doc! { "_id": 100, "sku": "a", "stock": 5 },
            doc! { "_id": 101, "sku": "c", "stock": 7 },
        ])
        .await
        .unwrap();
    let target = t.db.collection::<Document>("inventory");
    target
        .insert_many(vec![
            doc! { "_id": 1, "sku": "a", "stock": 1 },
            doc! { "_id": 2, "sku": "b", "stock": 2 },
        ])
        .await
        .unwrap();
    let pipeline = vec![
        doc! { "$project": { "_id": 0, "sku": 1, "stock": 1 } },
        doc! { "$merge": { "into": "inventory", "on": "sku" } },
    ];
    let e = assert_code(aggregate(&source, pipeline.clone()).await, 51183);
    assert!(
        message_of(&e).contains("Cannot find index to verify that join fields will be unique"),
        "{e}"
    );
    target
        .create_index(
            IndexModel::builder()
                .keys(doc! { "sku": 1 })
                .options(IndexOptions::builder().unique(true).build())
                .build(),
        )
        .await
        .unwrap();
    aggregate(&source, pipeline).await.unwrap();
    let docs = all(&target).await;
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[0], doc! { "_id": 1, "sku": "a", "stock": 5 });
    assert_eq!(docs[1], doc! { "_id": 2, "sku": "b", "stock": 2 });
    let inserted = target.find_one(doc! { "sku": "c" }).await.unwrap().unwrap();
    assert_eq!(inserted.get_i32("stock").unwrap(), 7);
    assert!(matches!(inserted.get("_id"), Some(Bson::ObjectId(_))));
}

#[tokio::test]
async fn out_and_merge_results_survive_a_restart_of_a_persistent_server() {
    // Journal replay is docstore's own; a real MongoDB is not restarted by this suite.
    if !crate::common::is_docstore() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = docstore::Server::start(docstore::Config::persistent(dir.path()))
        .await
        .unwrap();
    let db = crate::common::client_for(&server.uri())
        .await
        .database("shop");
    let source = sales(&db).await;
    let target = db.collection::<Document>("totals");
    target.insert_one(doc! { "_id": "stale" }).await.unwrap();
    target
        .create_index(IndexModel::builder().keys(doc! { "total": 1 }).build())
        .await
        .unwrap();
    aggregate(
        &source,
        vec![
            doc! { "$group": { "_id": "$item", "total": { "$sum": "$qty" } } },
            doc! { "$out": "totals" },
        ],
    )
    .await
    .unwrap();
    aggregate(
        &source,
        vec![
            doc! { "$project": { "_id": "$item", "last": "$qty" } },
            doc! { "$merge": { "into": "totals", "whenMatched": "merge" } },
        ],
    )
    .await
    .unwrap();
    let before = all(&target).await;
    assert_eq!(
        before,
        vec![
            doc! { "_id": "a", "total": 7, "last": 5 },
            doc! { "_id": "b", "total": 1, "last": 1 }
        ]
    );
    server.shutdown().await;
    let server = docstore::Server::start(docstore::Config::persistent(dir.path()))
        .await
        .unwrap();
    let target = crate::common::client_for(&server.uri())
        .await
        .database("shop")
        .collection::<Document>("totals");
    assert_eq!(all(&target).await, before);
    assert!(target
        .list_index_names()
        .await
        .unwrap()
        .contains(&"total_1".to_string()));
    server.shutdown().await;
}
