//! Inserts, finds with cursors, updates, deletes, findAndModify, count and distinct.

use crate::common::{assert_code, code_of, test_db};
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::{FindOneAndUpdateOptions, FindOptions, ReturnDocument, WriteConcern};

#[tokio::test]
async fn insert_generates_an_object_id_first_and_find_returns_it() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("items");
    let r = c.insert_one(doc! { "name": "a", "qty": 1 }).await.unwrap();
    let id = r.inserted_id.as_object_id().expect("generated ObjectId");
    let found = c.find_one(doc! { "_id": id }).await.unwrap().unwrap();
    assert_eq!(found.keys().next().map(String::as_str), Some("_id"));
    assert_eq!(found.get_str("name").unwrap(), "a");
}

#[tokio::test]
async fn an_id_given_last_is_stored_first() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("items");
    c.insert_one(doc! { "a": 1, "_id": 7 }).await.unwrap();
    let found = c.find_one(doc! {}).await.unwrap().unwrap();
    assert_eq!(found, doc! { "_id": 7, "a": 1 });
    // Document equality ignores field order; the stored order puts _id first.
    assert_eq!(found.keys().collect::<Vec<_>>(), vec!["_id", "a"]);
}

#[tokio::test]
async fn ordered_insert_stops_at_the_first_duplicate_and_unordered_continues() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("items");
    let docs = vec![doc! {"_id": 1}, doc! {"_id": 1}, doc! {"_id": 2}];
    let e = assert_code(c.insert_many(docs.clone()).await, 11000);
    assert_eq!(code_of(&e), Some(11000));
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);

    let c2 = t.db.collection::<Document>("items2");
    let r = c2.insert_many(docs).ordered(false).await;
    assert!(r.is_err());
    assert_eq!(c2.count_documents(doc! {}).await.unwrap(), 2);
}

#[tokio::test]
async fn write_errors_carry_the_index_of_the_failing_document() {
    let t = test_db().await;
    let reply =
        t.db.run_command(doc! {
            "insert": "items",
            "documents": [ {"_id": 1}, {"_id": 2}, {"_id": 1}, {"_id": 3} ],
            "ordered": false,
        })
        .await
        .unwrap();
    assert_eq!(reply.get_i32("n").unwrap(), 3);
    let errors = reply.get_array("writeErrors").unwrap();
    assert_eq!(errors.len(), 1);
    let e = errors[0].as_document().unwrap();
    assert_eq!(e.get_i32("index").unwrap(), 2);
    assert_eq!(e.get_i32("code").unwrap(), 11000);
    assert!(e
        .get_str("errmsg")
        .unwrap()
        .starts_with("E11000 duplicate key error collection: "));
}

/// Large batches (inserted whole when every document goes in) behave like small ones: all
/// stored in order and indexed, or, with a duplicate, the same write errors and documents kept
/// as one at a time.
#[tokio::test]
async fn a_large_batch_is_stored_whole_or_reports_its_failing_documents() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("big");
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "sku": 1 })
            .options(
                mongodb::options::IndexOptions::builder()
                    .unique(true)
                    .build(),
            )
            .build(),
    )
    .await
    .unwrap();
    let batch = |from: i32| -> Vec<Document> {
        (from..from + 500)
            .map(|i| doc! { "_id": i, "sku": format!("s{i}"), "tags": [i % 5, "all"] })
            .collect()
    };
    c.insert_many(batch(0)).await.unwrap();
    assert_eq!(c.count_documents(doc! { "tags": 3 }).await.unwrap(), 100);
    let ids: Vec<i32> = c
        .find(doc! {})
        .await
        .unwrap()
        .try_collect::<Vec<Document>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(
        ids,
        (0..500).collect::<Vec<_>>(),
        "natural order is insertion order"
    );

    // A batch whose 201st document takes a stored sku: ordered stops there...
    let mut clash = batch(1000);
    clash[200].insert("sku", "s7");
    let reply =
        t.db.run_command(doc! { "insert": "big", "documents": clash.clone() })
            .await
            .unwrap();
    assert_eq!(reply.get_i32("n").unwrap(), 200);
    let errors = reply.get_array("writeErrors").unwrap();
    assert_eq!(errors.len(), 1);
    let e = errors[0].as_document().unwrap();
    assert_eq!(e.get_i32("index").unwrap(), 200);
    assert_eq!(e.get_i32("code").unwrap(), 11000);
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 700);
    // ...and unordered stores all the others (ids 1200.. are still free).
    let mut clash = batch(2000);
    clash[10].insert("_id", 2400);
    let reply =
        t.db.run_command(doc! { "insert": "big", "documents": clash, "ordered": false })
            .await
            .unwrap();
    assert_eq!(reply.get_i32("n").unwrap(), 499);
    let errors = reply.get_array("writeErrors").unwrap();
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].as_document().unwrap().get_i32("index").unwrap(),
        400
    );
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1199);
    assert_eq!(c.count_documents(doc! { "sku": "s2010" }).await.unwrap(), 1);
}

#[tokio::test]
async fn array_ids_are_refused() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("items");
    assert_code(c.insert_one(doc! { "_id": [1, 2] }).await, 53);
}

async fn seed_numbers(c: &mongodb::Collection<Document>, n: i32) {
    let docs: Vec<Document> = (0..n)
        .map(|i| doc! { "_id": i, "n": i, "even": i % 2 == 0 })
        .collect();
    c.insert_many(docs).await.unwrap();
}

#[tokio::test]
async fn find_applies_sort_skip_limit_and_projection() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nums");
    seed_numbers(&c, 50).await;
    let opts = FindOptions::builder()
        .sort(doc! { "n": -1 })
        .skip(5)
        .limit(3)
        .projection(doc! { "n": 1, "_id": 0 })
        .build();
    let got: Vec<Document> = c
        .find(doc! { "even": true })
        .with_options(opts)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(got, vec![doc! {"n": 38}, doc! {"n": 36}, doc! {"n": 34}]);
}

/// A skip counts matching documents only, whether the order comes from an index or from the
/// natural order (no sort in memory): the documents the filter rejects are not skipped.
#[tokio::test]
async fn a_skip_in_scan_order_passes_matching_documents_only() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nums");
    seed_numbers(&c, 50).await;
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "n": -1 })
            .build(),
    )
    .await
    .unwrap();
    let ns = |sort: Option<Document>, skip: u64, limit: Option<i64>| {
        let c = c.clone();
        async move {
            let mut find = c.find(doc! { "even": true }).skip(skip);
            if let Some(sort) = sort {
                find = find.sort(sort);
            }
            if let Some(limit) = limit {
                find = find.limit(limit);
            }
            let docs: Vec<Document> = find.await.unwrap().try_collect().await.unwrap();
            docs.iter()
                .map(|d| d.get_i32("n").unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(ns(Some(doc! { "n": -1 }), 5, Some(3)).await, [38, 36, 34]);
    assert_eq!(ns(None, 5, Some(3)).await, [10, 12, 14]);
    assert_eq!(ns(None, 22, None).await, [44, 46, 48]);
    assert_eq!(
        ns(Some(doc! { "n": -1 }), 25, Some(3)).await,
        Vec::<i32>::new()
    );
}

#[tokio::test]
async fn cursors_return_every_document_across_get_more_batches() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nums");
    seed_numbers(&c, 1000).await;
    let got: Vec<Document> = c
        .find(doc! {})
        .batch_size(7)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(got.len(), 1000);
    let ids: Vec<i32> = got.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, (0..1000).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_negative_limit_returns_a_single_batch() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nums");
    seed_numbers(&c, 300).await;
    let got: Vec<Document> = c
        .find(doc! {})
        .limit(-150)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(got.len(), 150);
}

#[tokio::test]
async fn get_more_on_a_killed_cursor_is_cursor_not_found() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nums");
    seed_numbers(&c, 20).await;
    let reply =
        t.db.run_command(doc! { "find": "nums", "batchSize": 2 })
            .await
            .unwrap();
    let id = reply.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    let killed =
        t.db.run_command(doc! { "killCursors": "nums", "cursors": [id] })
            .await
            .unwrap();
    assert_eq!(
        killed.get_array("cursorsKilled").unwrap(),
        &vec![Bson::Int64(id)]
    );
    assert_code(
        t.db.run_command(doc! { "getMore": id, "collection": "nums" })
            .await,
        43,
    );
}

#[tokio::test]
async fn single_batch_closes_the_cursor() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nums");
    seed_numbers(&c, 20).await;
    let reply =
        t.db.run_command(doc! { "find": "nums", "batchSize": 5, "singleBatch": true })
            .await
            .unwrap();
    let cursor = reply.get_document("cursor").unwrap();
    assert_eq!(cursor.get_i64("id").unwrap(), 0);
    assert_eq!(cursor.get_array("firstBatch").unwrap().len(), 5);
}

#[tokio::test]
async fn update_counts_matched_and_modified_and_reports_upserts() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nums");
    seed_numbers(&c, 10).await;
    let r = c
        .update_many(doc! { "even": true }, doc! { "$set": { "tag": "e" } })
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (5, 5));
    let again = c
        .update_many(doc! { "even": true }, doc! { "$set": { "tag": "e" } })
        .await
        .unwrap();
    assert_eq!((again.matched_count, again.modified_count), (5, 0));
    let up = c
        .update_one(doc! { "_id": 100 }, doc! { "$inc": { "n": 5 } })
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(up.upserted_id, Some(Bson::Int32(100)));
    assert_eq!(
        c.find_one(doc! { "_id": 100 }).await.unwrap().unwrap(),
        doc! { "_id": 100, "n": 5 }
    );
}

#[tokio::test]
async fn replace_keeps_the_id_and_refuses_to_change_it() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("items");
    c.insert_one(doc! { "_id": 1, "a": 1, "b": 2 })
        .await
        .unwrap();
    c.replace_one(doc! { "_id": 1 }, doc! { "c": 3 })
        .await
        .unwrap();
    assert_eq!(
        c.find_one(doc! {}).await.unwrap().unwrap(),
        doc! { "_id": 1, "c": 3 }
    );
    assert_code(
        c.replace_one(doc! { "_id": 1 }, doc! { "_id": 2, "c": 3 })
            .await,
        66,
    );
}

#[tokio::test]
async fn delete_one_and_many_remove_what_matches() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nums");
    seed_numbers(&c, 10).await;
    assert_eq!(
        c.delete_one(doc! { "even": true })
            .await
            .unwrap()
            .deleted_count,
        1
    );
    assert_eq!(
        c.delete_many(doc! { "even": true })
            .await
            .unwrap()
            .deleted_count,
        4
    );
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 5);
    assert_eq!(c.estimated_document_count().await.unwrap(), 5);
}

#[tokio::test]
async fn find_one_and_update_returns_before_or_after_and_upserts() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("jobs");
    c.insert_many(vec![
        doc! {"_id": 1, "state": "new", "p": 2},
        doc! {"_id": 2, "state": "new", "p": 1},
    ])
    .await
    .unwrap();
    let before = c
        .find_one_and_update(
            doc! { "state": "new" },
            doc! { "$set": { "state": "taken" } },
        )
        .sort(doc! { "p": 1 })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before, doc! {"_id": 2, "state": "new", "p": 1});
    let opts = FindOneAndUpdateOptions::builder()
        .return_document(ReturnDocument::After)
        .upsert(true)
        .projection(doc! { "_id": 0, "seq": 1 })
        .build();
    let after = c
        .find_one_and_update(doc! { "_id": "counter" }, doc! { "$inc": { "seq": 1 } })
        .with_options(opts)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after, doc! { "seq": 1 });
    let none = c
        .find_one_and_update(doc! { "_id": "missing" }, doc! { "$set": { "x": 1 } })
        .await
        .unwrap();
    assert!(none.is_none());
}

#[tokio::test]
async fn find_one_and_delete_and_replace_work() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("items");
    c.insert_many(vec![doc! {"_id": 1, "v": 1}, doc! {"_id": 2, "v": 2}])
        .await
        .unwrap();
    let gone = c
        .find_one_and_delete(doc! { "v": 2 })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gone.get_i32("_id").unwrap(), 2);
    let replaced = c
        .find_one_and_replace(doc! { "_id": 1 }, doc! { "w": 9 })
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replaced, doc! { "_id": 1, "w": 9 });
}

#[tokio::test]
async fn find_and_modify_with_both_remove_and_update_is_refused() {
    let t = test_db().await;
    t.db.collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    let r = t
        .db
        .run_command(doc! { "findAndModify": "c", "query": {}, "remove": true, "update": { "$set": { "a": 1 } } })
        .await;
    assert_code(r, 9);
}

#[tokio::test]
async fn distinct_flattens_arrays_and_respects_the_filter() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("items");
    c.insert_many(vec![
        doc! { "tags": ["a", "b"], "k": 1 },
        doc! { "tags": "c", "k": 1 },
        doc! { "tags": ["b"], "k": 2 },
    ])
    .await
    .unwrap();
    let mut all = c.distinct("tags", doc! {}).await.unwrap();
    all.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    assert_eq!(all, vec![Bson::from("a"), Bson::from("b"), Bson::from("c")]);
    let some = c.distinct("tags", doc! { "k": 2 }).await.unwrap();
    assert_eq!(some, vec![Bson::from("b")]);
    // Only one level of array is flattened: a nested array is a value of its own.
    let nested = t.db.collection::<Document>("nested");
    nested.insert_one(doc! { "a": [[1, 2], 3] }).await.unwrap();
    let mut values = nested.distinct("a", doc! {}).await.unwrap();
    values.sort_by(|x, y| matches!(x, Bson::Array(_)).cmp(&matches!(y, Bson::Array(_))));
    assert_eq!(
        values,
        vec![
            Bson::Int32(3),
            Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)])
        ]
    );
}

#[tokio::test]
async fn count_command_honours_skip_and_limit() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nums");
    seed_numbers(&c, 30).await;
    let r = t
        .db
        .run_command(doc! { "count": "nums", "query": { "even": true }, "skip": 5, "limit": 4 })
        .await
        .unwrap();
    assert_eq!(
        r.get_i64("n")
            .or_else(|_| r.get_i32("n").map(i64::from))
            .unwrap(),
        4
    );
    assert_eq!(
        c.count_documents(doc! { "n": { "$gte": 10 } })
            .await
            .unwrap(),
        20
    );
}

#[tokio::test]
async fn journaled_write_concern_is_acknowledged() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("items");
    c.insert_one(doc! { "a": 1 })
        .write_concern(WriteConcern::builder().journal(true).build())
        .await
        .unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
}

#[tokio::test]
async fn majority_and_w_one_with_journaling_are_accepted_as_a_standalone_server_does() {
    use mongodb::options::Acknowledgment;
    let t = test_db().await;
    let c = t.db.collection::<Document>("items");
    for w in [Acknowledgment::Majority, Acknowledgment::Nodes(1)] {
        let concern = WriteConcern::builder()
            .w(w)
            .journal(true)
            .w_timeout(std::time::Duration::from_secs(5))
            .build();
        c.insert_one(doc! { "a": 1 })
            .write_concern(concern.clone())
            .await
            .unwrap();
        c.find_one_and_update(doc! { "a": 1 }, doc! { "$inc": { "b": 1 } })
            .write_concern(concern)
            .await
            .unwrap();
    }
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 2);
}

#[tokio::test]
async fn a_write_concern_above_one_is_refused_on_a_single_node() {
    let t = test_db().await;
    let r =
        t.db.run_command(doc! { "insert": "c", "documents": [{}], "writeConcern": { "w": 2 } })
            .await;
    assert!(r.is_err());
}
