//! The update language end to end: every operator, `$push` modifiers, positional forms,
//! upsert seeding, and MongoDB's error codes.

use crate::common::{assert_code, test_db};
use bson::{doc, Bson, Document};
use mongodb::Collection;

async fn one(doc: Document) -> (crate::common::TestDb, Collection<Document>) {
    let t = test_db().await;
    let c = t.db.collection::<Document>("u");
    c.insert_one(doc).await.unwrap();
    (t, c)
}

async fn after(c: &Collection<Document>, update: Document) -> Document {
    c.update_one(doc! { "_id": 1 }, update).await.unwrap();
    c.find_one(doc! { "_id": 1 }).await.unwrap().unwrap()
}

#[tokio::test]
async fn set_unset_inc_mul_min_max_rename() {
    let (_t, c) = one(doc! { "_id": 1, "a": 1, "b": { "c": 2 }, "n": 10, "old": "v" }).await;
    assert_eq!(
        after(&c, doc! { "$set": { "b.d.e": 5, "a": 2 } }).await,
        doc! { "_id": 1, "a": 2, "b": { "c": 2, "d": { "e": 5 } }, "n": 10, "old": "v" }
    );
    let d = after(
        &c,
        doc! { "$unset": { "b.c": "" }, "$inc": { "n": 5, "fresh": 2 } },
    )
    .await;
    assert_eq!(d.get_document("b").unwrap(), &doc! { "d": { "e": 5 } });
    assert_eq!(d.get_i32("n").unwrap(), 15);
    assert_eq!(d.get_i32("fresh").unwrap(), 2);
    let d = after(
        &c,
        doc! { "$mul": { "n": 2.0 }, "$min": { "a": 1 }, "$max": { "fresh": 7 } },
    )
    .await;
    assert_eq!(d.get_f64("n").unwrap(), 30.0);
    assert_eq!(d.get_i32("a").unwrap(), 1);
    assert_eq!(d.get_i32("fresh").unwrap(), 7);
    let d = after(&c, doc! { "$rename": { "old": "new" } }).await;
    assert!(d.get("old").is_none());
    assert_eq!(d.get_str("new").unwrap(), "v");
}

#[tokio::test]
async fn operators_apply_fields_in_lexicographic_order() {
    let (_t, c) = one(doc! { "_id": 1 }).await;
    assert_eq!(
        after(&c, doc! { "$set": { "b": 1, "a": 1 } }).await,
        doc! { "_id": 1, "a": 1, "b": 1 }
    );
}

#[tokio::test]
async fn push_with_each_position_sort_and_slice() {
    let (_t, c) = one(doc! { "_id": 1, "s": [5, 1] }).await;
    let d = after(
        &c,
        doc! { "$push": { "s": { "$each": [9, 3], "$position": 0 } } },
    )
    .await;
    assert_eq!(
        d.get_array("s").unwrap(),
        &vec![
            Bson::Int32(9),
            Bson::Int32(3),
            Bson::Int32(5),
            Bson::Int32(1)
        ]
    );
    let d = after(
        &c,
        doc! { "$push": { "s": { "$each": [4], "$sort": 1, "$slice": 3 } } },
    )
    .await;
    assert_eq!(
        d.get_array("s").unwrap(),
        &vec![Bson::Int32(1), Bson::Int32(3), Bson::Int32(4)]
    );
    let d = after(&c, doc! { "$push": { "t": 1 } }).await;
    assert_eq!(d.get_array("t").unwrap(), &vec![Bson::Int32(1)]);
}

#[tokio::test]
async fn add_to_set_pop_pull_and_pull_all() {
    let (_t, c) = one(
        doc! { "_id": 1, "tags": ["a"], "n": [1, 2, 3, 4, 5, 6], "o": [{ "k": 1 }, { "k": 2 }] },
    )
    .await;
    let d = after(
        &c,
        doc! { "$addToSet": { "tags": { "$each": ["a", "b", "b"] } } },
    )
    .await;
    assert_eq!(
        d.get_array("tags").unwrap(),
        &vec![Bson::from("a"), Bson::from("b")]
    );
    let d = after(&c, doc! { "$pop": { "n": -1 } }).await;
    assert_eq!(d.get_array("n").unwrap().first(), Some(&Bson::Int32(2)));
    let d = after(
        &c,
        doc! { "$pull": { "n": { "$gte": 5 }, "o": { "k": 2 } } },
    )
    .await;
    assert_eq!(
        d.get_array("n").unwrap(),
        &vec![Bson::Int32(2), Bson::Int32(3), Bson::Int32(4)]
    );
    assert_eq!(
        d.get_array("o").unwrap(),
        &vec![Bson::Document(doc! { "k": 1 })]
    );
    let d = after(&c, doc! { "$pullAll": { "n": [2, 4] } }).await;
    assert_eq!(d.get_array("n").unwrap(), &vec![Bson::Int32(3)]);
}

#[tokio::test]
async fn positional_operators_update_the_right_elements() {
    let (_t, c) = one(doc! { "_id": 1, "items": [{ "sku": "a", "qty": 1 }, { "sku": "b", "qty": 2 }, { "sku": "c", "qty": 3 }] }).await;
    c.update_one(
        doc! { "_id": 1, "items.sku": "b" },
        doc! { "$inc": { "items.$.qty": 10 } },
    )
    .await
    .unwrap();
    c.update_one(
        doc! { "_id": 1 },
        doc! { "$set": { "items.$[].seen": true } },
    )
    .await
    .unwrap();
    c.update_one(
        doc! { "_id": 1 },
        doc! { "$set": { "items.$[big].big": true } },
    )
    .array_filters(vec![doc! { "big.qty": { "$gte": 3 } }])
    .await
    .unwrap();
    let d = c.find_one(doc! {}).await.unwrap().unwrap();
    assert_eq!(
        d.get_array("items").unwrap(),
        &vec![
            Bson::Document(doc! { "sku": "a", "qty": 1, "seen": true }),
            Bson::Document(doc! { "sku": "b", "qty": 12, "seen": true, "big": true }),
            Bson::Document(doc! { "sku": "c", "qty": 3, "seen": true, "big": true }),
        ]
    );
    let d = after(&c, doc! { "$set": { "items.0.qty": 100 } }).await;
    assert_eq!(
        d.get_array("items").unwrap()[0]
            .as_document()
            .unwrap()
            .get_i32("qty")
            .unwrap(),
        100
    );
}

#[tokio::test]
async fn upserts_seed_from_equality_conditions_and_set_on_insert() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("u");
    c.update_one(
        doc! { "$and": [{ "sku": "x" }, { "meta.kind": "book" }], "qty": { "$gt": 5 } },
        doc! { "$set": { "price": 10 }, "$setOnInsert": { "created": true } },
    )
    .upsert(true)
    .await
    .unwrap();
    let mut d = c.find_one(doc! {}).await.unwrap().unwrap();
    assert!(d.remove("_id").is_some());
    assert_eq!(
        d,
        doc! { "sku": "x", "meta": { "kind": "book" }, "price": 10, "created": true }
    );
    // An update that matches does not apply $setOnInsert.
    c.update_one(
        doc! { "sku": "x" },
        doc! { "$set": { "price": 11 }, "$setOnInsert": { "other": 1 } },
    )
    .upsert(true)
    .await
    .unwrap();
    let d = c.find_one(doc! {}).await.unwrap().unwrap();
    assert!(d.get("other").is_none());
    assert_eq!(d.get_i32("price").unwrap(), 11);
}

#[tokio::test]
async fn update_errors_have_mongodb_codes() {
    let (_t, c) = one(doc! { "_id": 1, "s": "text", "a": { "b": 1 }, "arr": [1] }).await;
    assert_code(
        c.update_one(doc! { "_id": 1 }, doc! { "$set": { "a": 1, "a.b": 2 } })
            .await,
        40,
    );
    assert_code(
        c.update_one(doc! { "_id": 1 }, doc! { "$set": { "_id": 2 } })
            .await,
        66,
    );
    assert_code(
        c.update_one(doc! { "_id": 1 }, doc! { "$inc": { "s": 1 } })
            .await,
        14,
    );
    assert_code(
        c.update_one(doc! { "_id": 1 }, doc! { "$set": { "arr.$.x": 1 } })
            .await,
        2,
    );
    assert_code(
        c.update_one(doc! { "_id": 1 }, doc! { "$bogus": { "x": 1 } })
            .await,
        9,
    );
    assert_code(
        c.update_one(doc! { "_id": 1 }, doc! { "$push": { "s": 1 } })
            .await,
        2,
    );
    assert_code(
        c.update_one(doc! { "_id": 1 }, doc! { "$set": { "s.x": 1 } })
            .await,
        28,
    );
    // Nothing was half-applied.
    assert_eq!(
        c.find_one(doc! {}).await.unwrap().unwrap(),
        doc! { "_id": 1, "s": "text", "a": { "b": 1 }, "arr": [1] }
    );
}

#[tokio::test]
async fn current_date_sets_a_date() {
    let (_t, c) = one(doc! { "_id": 1 }).await;
    let d = after(&c, doc! { "$currentDate": { "at": true } }).await;
    assert!(matches!(d.get("at"), Some(Bson::DateTime(_))));
}
