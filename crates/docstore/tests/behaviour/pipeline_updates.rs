//! Updates given as an aggregation pipeline, through `update` and `findAndModify`: the allowed
//! stages, an immutable `_id`, `$$NOW` and `let` variables, and upserts.

use crate::common::{assert_code, message_of, test_db};
use bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;

#[tokio::test]
async fn a_pipeline_update_computes_fields_from_the_document_itself() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("lines");
    c.insert_many(vec![
        doc! { "_id": 1, "price": 3, "qty": 4, "draft": true },
        doc! { "_id": 2, "price": 5, "qty": 2, "draft": true },
        doc! { "_id": 3, "price": 1, "qty": 1 },
    ])
    .await
    .unwrap();
    let r = c
        .update_many(
            doc! { "draft": true },
            vec![
                doc! { "$set": { "total": { "$multiply": ["$price", "$qty"] } } },
                doc! { "$unset": "draft" },
                doc! { "$addFields": { "big": { "$gt": ["$total", 10] } } },
            ],
        )
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (2, 2));
    let one = c.find_one(doc! { "_id": 1 }).await.unwrap().unwrap();
    assert_eq!(
        one,
        doc! { "_id": 1, "price": 3, "qty": 4, "total": 12, "big": true }
    );
    // A pipeline that changes nothing reports nothing modified.
    let r = c
        .update_one(doc! { "_id": 3 }, vec![doc! { "$set": { "price": 1 } }])
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 0));
}

#[tokio::test]
async fn replace_root_and_project_keep_the_original_id_and_may_not_change_it() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("people");
    c.insert_one(doc! { "_id": 7, "name": { "first": "Ada", "last": "L" }, "age": 36 })
        .await
        .unwrap();
    c.update_one(
        doc! { "_id": 7 },
        vec![doc! { "$replaceRoot": { "newRoot": "$name" } }],
    )
    .await
    .unwrap();
    assert_eq!(
        c.find_one(doc! {}).await.unwrap().unwrap(),
        doc! { "_id": 7, "first": "Ada", "last": "L" }
    );
    c.update_one(
        doc! { "_id": 7 },
        vec![doc! { "$project": { "_id": 0, "first": 1 } }],
    )
    .await
    .unwrap();
    assert_eq!(
        c.find_one(doc! {}).await.unwrap().unwrap(),
        doc! { "_id": 7, "first": "Ada" }
    );
    let changed = c
        .update_one(
            doc! { "_id": 7 },
            vec![doc! { "$replaceWith": { "_id": 8, "first": "$first" } }],
        )
        .await;
    let e = assert_code(changed, 66);
    assert!(
        message_of(&e).contains("the (immutable) field '_id' was found to have been altered"),
        "{e}"
    );
}

#[tokio::test]
async fn stages_other_than_the_update_stages_are_refused_by_name() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("things");
    c.insert_one(doc! { "_id": 1, "a": 1 }).await.unwrap();
    for (stage, name) in [
        (doc! { "$match": { "a": 1 } }, "$match"),
        (doc! { "$sort": { "a": 1 } }, "$sort"),
        (doc! { "$limit": 1 }, "$limit"),
        (doc! { "$group": { "_id": "$a" } }, "$group"),
    ] {
        let result = c
            .update_one(doc! { "_id": 1 }, vec![doc! { "$set": { "b": 1 } }, stage])
            .await;
        let e = assert_code(result, 72);
        assert_eq!(
            message_of(&e),
            format!("{name} is not allowed to be used within an update")
        );
    }
    let unknown = c
        .update_one(doc! { "_id": 1 }, vec![doc! { "$bogus": {} }])
        .await;
    assert_code(unknown, 40324);
    assert_eq!(
        c.find_one(doc! {}).await.unwrap().unwrap(),
        doc! { "_id": 1, "a": 1 }
    );
}

#[tokio::test]
async fn now_let_and_per_statement_constants_are_visible_as_variables() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("events");
    c.insert_many(vec![doc! { "_id": 1 }, doc! { "_id": 2 }])
        .await
        .unwrap();
    let reply = t
        .db
        .run_command(doc! {
            "update": "events",
            "updates": [
                { "q": {}, "u": [{ "$set": { "at": "$$NOW", "label": "$$label" } }], "multi": true },
            ],
            "let": { "label": "from-let" },
        })
        .await
        .unwrap();
    assert_eq!(reply.get_i32("nModified").unwrap(), 2);
    let docs: Vec<Document> = {
        use futures::TryStreamExt;
        c.find(doc! {}).await.unwrap().try_collect().await.unwrap()
    };
    let first_at = docs[0].get_datetime("at").unwrap();
    assert!(docs.iter().all(|d| d.get_datetime("at") == Ok(first_at)));
    assert!(docs.iter().all(|d| d.get_str("label") == Ok("from-let")));
    let age_ms = bson::DateTime::now().timestamp_millis() - first_at.timestamp_millis();
    assert!((0..60_000).contains(&age_ms), "$$NOW is the command's time");

    t.db.run_command(doc! {
        "update": "events",
        "updates": [
            { "q": { "_id": 2 }, "u": [{ "$set": { "label": "$$tag" } }], "c": { "tag": "from-c" } },
        ],
    })
    .await
    .unwrap();
    assert_eq!(
        c.find_one(doc! { "_id": 2 })
            .await
            .unwrap()
            .unwrap()
            .get_str("label")
            .unwrap(),
        "from-c"
    );
}

#[tokio::test]
async fn an_upsert_with_a_pipeline_starts_from_the_query_equalities() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("counters");
    let r = c
        .update_one(
            doc! { "name": "visits", "site": { "$eq": "home" }, "n": { "$gt": 3 } },
            vec![doc! { "$set": {
                "n": { "$add": [{ "$ifNull": ["$n", 0] }, 1] },
                "key": { "$concat": ["$site", "/", "$name"] },
            } }],
        )
        .upsert(true)
        .await
        .unwrap();
    let id = r.upserted_id.expect("an upserted _id");
    assert!(matches!(id, Bson::ObjectId(_)));
    let doc = c.find_one(doc! {}).await.unwrap().unwrap();
    assert_eq!(doc.get("_id"), Some(&id));
    assert_eq!(doc.get_str("name").unwrap(), "visits");
    assert_eq!(doc.get_str("site").unwrap(), "home");
    assert_eq!(doc.get_str("key").unwrap(), "home/visits");
    assert_eq!(doc.get_i32("n").unwrap(), 1);
}

#[tokio::test]
async fn find_and_modify_takes_a_pipeline_and_returns_either_image() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("stock");
    c.insert_one(doc! { "_id": "sku1", "qty": 5, "reserved": 1 })
        .await
        .unwrap();
    let after = c
        .find_one_and_update(
            doc! { "_id": "sku1" },
            vec![doc! { "$set": {
                "qty": { "$subtract": ["$qty", "$reserved"] },
                "reserved": 0,
            } }],
        )
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after, doc! { "_id": "sku1", "qty": 4, "reserved": 0 });
    let before = c
        .find_one_and_update(
            doc! { "_id": "sku1" },
            vec![doc! { "$unset": ["reserved"] }],
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before, doc! { "_id": "sku1", "qty": 4, "reserved": 0 });
    assert_eq!(
        c.find_one(doc! {}).await.unwrap().unwrap(),
        doc! { "_id": "sku1", "qty": 4 }
    );
}
