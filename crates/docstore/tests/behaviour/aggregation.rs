//! Aggregation through the driver: the core stages, accumulators, `$lookup`, expressions,
//! `count_documents`, and the errors for unknown stages and operators.

use crate::common::{assert_code, test_db};
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::Collection;

async fn sales() -> (crate::common::TestDb, Collection<Document>) {
    let t = test_db().await;
    let c = t.db.collection::<Document>("sales");
    c.insert_many(vec![
        doc! { "_id": 1, "item": "a", "price": 10, "qty": 2, "tags": ["x", "y"], "at": bson::DateTime::from_millis(1_700_000_000_000) },
        doc! { "_id": 2, "item": "b", "price": 20, "qty": 1, "tags": ["y"], "at": bson::DateTime::from_millis(1_700_086_400_000) },
        doc! { "_id": 3, "item": "a", "price": 10, "qty": 5, "tags": [], "at": bson::DateTime::from_millis(1_700_172_800_000) },
        doc! { "_id": 4, "item": "c", "price": 5, "qty": 10 },
    ])
    .await
    .unwrap();
    (t, c)
}

async fn run(c: &Collection<Document>, pipeline: Vec<Document>) -> Vec<Document> {
    c.aggregate(pipeline)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn group_with_accumulators_then_sort() {
    let (_t, c) = sales().await;
    let out = run(
        &c,
        vec![
            doc! { "$group": {
                "_id": "$item",
                "revenue": { "$sum": { "$multiply": ["$price", "$qty"] } },
                "avgQty": { "$avg": "$qty" },
                "maxQty": { "$max": "$qty" },
                "minQty": { "$min": "$qty" },
                "n": { "$sum": 1 },
                "ids": { "$push": "$_id" },
                "first": { "$first": "$_id" },
                "last": { "$last": "$_id" },
            } },
            doc! { "$sort": { "_id": 1 } },
        ],
    )
    .await;
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].get_str("_id").unwrap(), "a");
    assert_eq!(out[0].get_i32("revenue").unwrap(), 70);
    assert_eq!(out[0].get_f64("avgQty").unwrap(), 3.5);
    assert_eq!(out[0].get_i32("maxQty").unwrap(), 5);
    assert_eq!(out[0].get_i32("minQty").unwrap(), 2);
    assert_eq!(out[0].get_i32("n").unwrap(), 2);
    assert_eq!(
        out[0].get_array("ids").unwrap(),
        &vec![Bson::Int32(1), Bson::Int32(3)]
    );
    assert_eq!(out[0].get_i32("first").unwrap(), 1);
    assert_eq!(out[0].get_i32("last").unwrap(), 3);
}

#[tokio::test]
async fn match_project_unwind_count_skip_limit() {
    let (_t, c) = sales().await;
    let out = run(
        &c,
        vec![
            doc! { "$match": { "price": { "$gte": 10 } } },
            doc! { "$unwind": "$tags" },
            doc! { "$project": { "_id": 0, "item": 1, "tag": "$tags", "total": { "$multiply": ["$price", "$qty"] } } },
            doc! { "$sort": { "total": -1, "tag": 1, "item": -1 } },
            doc! { "$skip": 1 },
            doc! { "$limit": 2 },
        ],
    )
    .await;
    assert_eq!(
        out,
        vec![
            doc! { "item": "b", "tag": "y", "total": 20 },
            doc! { "item": "a", "tag": "y", "total": 20 },
        ]
    );
    let counted = run(
        &c,
        vec![
            doc! { "$unwind": { "path": "$tags", "preserveNullAndEmptyArrays": true } },
            doc! { "$count": "n" },
        ],
    )
    .await;
    assert_eq!(counted, vec![doc! { "n": 5 }]);
}

#[tokio::test]
async fn lookup_joins_on_local_and_foreign_fields() {
    let (t, c) = sales().await;
    let items = t.db.collection::<Document>("items");
    items
        .insert_many(vec![
            doc! { "_id": "a", "name": "Apple" },
            doc! { "_id": "b", "name": "Banana" },
        ])
        .await
        .unwrap();
    let out = run(
        &c,
        vec![
            doc! { "$match": { "_id": { "$in": [1, 4] } } },
            doc! { "$lookup": { "from": "items", "localField": "item", "foreignField": "_id", "as": "info" } },
            doc! { "$project": { "names": "$info.name" } },
            doc! { "$sort": { "_id": 1 } },
        ],
    )
    .await;
    assert_eq!(
        out,
        vec![
            doc! { "_id": 1, "names": ["Apple"] },
            doc! { "_id": 4, "names": [] }
        ]
    );
}

#[tokio::test]
async fn expressions_cond_if_null_let_and_dates() {
    let (_t, c) = sales().await;
    let out = run(
        &c,
        vec![
            doc! { "$match": { "_id": 1 } },
            doc! { "$addFields": {
                "cheap": { "$cond": [{ "$lt": ["$price", 15] }, "yes", "no"] },
                "missing": { "$ifNull": ["$nope", "default"] },
                "double": { "$let": { "vars": { "p": "$price" }, "in": { "$add": ["$$p", "$$p"] } } },
                "year": { "$year": "$at" },
                "month": { "$month": "$at" },
                "day": { "$dayOfMonth": "$at" },
                "hour": { "$hour": "$at" },
            } },
            doc! { "$unset": ["tags", "at"] },
            doc! { "$replaceRoot": { "newRoot": { "c": "$cheap", "m": "$missing", "d": "$double", "y": "$year", "mo": "$month", "day": "$day", "h": "$hour" } } },
        ],
    )
    .await;
    // 1_700_000_000_000 ms is 2023-11-14T22:13:20Z.
    assert_eq!(
        out,
        vec![doc! { "c": "yes", "m": "default", "d": 20, "y": 2023, "mo": 11, "day": 14, "h": 22 }]
    );
}

#[tokio::test]
async fn count_documents_uses_an_aggregation_with_skip_and_limit() {
    let (_t, c) = sales().await;
    assert_eq!(c.count_documents(doc! { "price": 10 }).await.unwrap(), 2);
    assert_eq!(
        c.count_documents(doc! {}).skip(1).limit(2).await.unwrap(),
        2
    );
    assert_eq!(c.count_documents(doc! { "item": "zzz" }).await.unwrap(), 0);
}

#[tokio::test]
async fn unknown_stages_and_operators_are_refused() {
    let (_t, c) = sales().await;
    assert_code(c.aggregate(vec![doc! { "$bogus": {} }]).await, 40324);
    assert_code(
        c.aggregate(vec![doc! { "$project": { "x": { "$bogusOp": 1 } } }])
            .await,
        168,
    );
    assert_code(
        c.aggregate(vec![doc! { "$group": { "total": { "$sum": 1 } } }])
            .await,
        15955,
    );
}
