//! The planner as `explain` shows it: index scans for equality, range, prefix and sort, the
//! collection scan otherwise, hints, and how many documents were examined.

use crate::common::{assert_code, find_stage, test_db};
use bson::{doc, Bson, Document};
use mongodb::options::IndexOptions;
use mongodb::{Database, IndexModel};

async fn explain_find(db: &Database, find: Document) -> Document {
    db.run_command(doc! { "explain": find, "verbosity": "executionStats" })
        .await
        .unwrap()
}

fn docs_examined(explain: &Document) -> i64 {
    let stats = explain.get_document("executionStats").unwrap();
    stats
        .get_i64("totalDocsExamined")
        .or_else(|_| stats.get_i32("totalDocsExamined").map(i64::from))
        .unwrap()
}

async fn products(t: &crate::common::TestDb) {
    let c = t.db.collection::<Document>("products");
    c.insert_many((0..300).map(|i| {
        let kind = ["album", "film", "book"][i as usize % 3];
        let genre = ["jazz", "rock"][i as usize % 2];
        doc! { "_id": i, "type": kind, "genre": genre, "price": i * 100,
        "slug": format!("item-{i:03}"), "tags": [format!("t{}", i % 7), "all"] }
    }))
    .await
    .unwrap();
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "type": 1, "genre": 1, "price": -1 })
            .build(),
    )
    .await
    .unwrap();
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "slug": 1 })
            .options(IndexOptions::builder().unique(true).build())
            .build(),
    )
    .await
    .unwrap();
    c.create_index(IndexModel::builder().keys(doc! { "price": 1 }).build())
        .await
        .unwrap();
    c.create_index(IndexModel::builder().keys(doc! { "tags": 1 }).build())
        .await
        .unwrap();
}

#[tokio::test]
async fn equality_on_leading_fields_uses_the_compound_index() {
    let t = test_db().await;
    products(&t).await;
    let e = explain_find(
        &t.db,
        doc! { "find": "products", "filter": { "type": "film", "genre": "rock" } },
    )
    .await;
    let scan = find_stage(&Bson::Document(e.clone()), "IXSCAN").expect("an index scan");
    assert_eq!(
        scan.get_document("keyPattern").unwrap(),
        &doc! { "type": 1, "genre": 1, "price": -1 }
    );
    assert_eq!(docs_examined(&e), 50);
}

#[tokio::test]
async fn the_index_serves_the_sort_and_the_limit_stops_early() {
    let t = test_db().await;
    products(&t).await;
    let e = explain_find(
        &t.db,
        doc! { "find": "products", "filter": { "type": "album", "genre": "jazz" }, "sort": { "price": -1 }, "limit": 5 },
    )
    .await;
    assert!(find_stage(&Bson::Document(e.clone()), "IXSCAN").is_some());
    assert!(
        find_stage(&Bson::Document(e.clone()), "SORT").is_none(),
        "no in-memory sort: {e}"
    );
    assert_eq!(docs_examined(&e), 5);
}

#[tokio::test]
async fn ranges_prefix_regexes_and_multikey_fields_use_indexes() {
    let t = test_db().await;
    products(&t).await;
    for filter in [
        doc! { "price": { "$gte": 1000, "$lt": 2000 } },
        doc! { "slug": { "$regex": "^item-01" } },
        doc! { "slug": "item-042" },
        doc! { "tags": "t3" },
        doc! { "slug": { "$in": ["item-001", "item-002"] } },
    ] {
        let e = explain_find(&t.db, doc! { "find": "products", "filter": filter.clone() }).await;
        assert!(
            find_stage(&Bson::Document(e.clone()), "IXSCAN").is_some(),
            "{filter}: {e}"
        );
        assert!(
            docs_examined(&e) <= 43,
            "{filter} examined {}",
            docs_examined(&e)
        );
    }
}

#[tokio::test]
async fn unindexed_filters_scan_the_collection() {
    let t = test_db().await;
    products(&t).await;
    let e = explain_find(
        &t.db,
        doc! { "find": "products", "filter": { "genre": "rock" } },
    )
    .await;
    assert!(find_stage(&Bson::Document(e.clone()), "COLLSCAN").is_some());
    assert_eq!(docs_examined(&e), 300);
}

#[tokio::test]
async fn hints_force_an_index_or_the_natural_order() {
    let t = test_db().await;
    products(&t).await;
    let e = explain_find(
        &t.db,
        doc! { "find": "products", "filter": { "genre": "rock" }, "hint": "price_1" },
    )
    .await;
    let scan = find_stage(&Bson::Document(e), "IXSCAN").expect("hinted index");
    assert_eq!(scan.get_str("indexName").unwrap(), "price_1");
    let e = explain_find(
        &t.db,
        doc! { "find": "products", "filter": { "slug": "item-001" }, "hint": { "$natural": 1 } },
    )
    .await;
    assert!(find_stage(&Bson::Document(e), "COLLSCAN").is_some());
    let r =
        t.db.run_command(doc! { "find": "products", "filter": {}, "hint": "nope_1" })
            .await;
    assert_code(r, 2);
}

#[tokio::test]
async fn an_aggregation_starting_with_match_uses_the_index() {
    let t = test_db().await;
    products(&t).await;
    let e = t
        .db
        .run_command(doc! {
            "explain": { "aggregate": "products", "pipeline": [{ "$match": { "slug": "item-007" } }, { "$project": { "price": 1 } }], "cursor": {} },
            "verbosity": "queryPlanner",
        })
        .await
        .unwrap();
    assert!(
        find_stage(&Bson::Document(e.clone()), "IXSCAN").is_some(),
        "{e}"
    );
}

#[tokio::test]
async fn indexed_queries_return_the_same_results_as_scans() {
    let t = test_db().await;
    products(&t).await;
    let c = t.db.collection::<Document>("products");
    use futures::TryStreamExt;
    for filter in [
        doc! { "type": "book", "genre": "jazz", "price": { "$gt": 5000 } },
        doc! { "price": { "$lte": 700 } },
        doc! { "tags": { "$in": ["t1", "t2"] } },
    ] {
        let indexed: Vec<Document> = c
            .find(filter.clone())
            .sort(doc! { "_id": 1 })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let scanned: Vec<Document> = c
            .find(filter.clone())
            .hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }))
            .sort(doc! { "_id": 1 })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert!(!indexed.is_empty());
        assert_eq!(indexed, scanned, "{filter}");
    }
}

#[tokio::test]
async fn a_limited_sorted_query_walks_the_sort_index_when_the_filter_matches_many() {
    let t = test_db().await;
    let jobs = t.db.collection::<Document>("jobs");
    jobs.insert_many(
        (0..2000).map(|i| doc! { "_id": i, "state": if i % 4 == 3 { "done" } else { "queued" } }),
    )
    .await
    .unwrap();
    jobs.create_index(IndexModel::builder().keys(doc! { "state": 1 }).build())
        .await
        .unwrap();
    // Claiming the oldest queued job: walking _id finds it at once, while the state index would
    // fetch and sort 1500 documents.
    let e = explain_find(
        &t.db,
        doc! { "find": "jobs", "filter": { "state": "queued" }, "sort": { "_id": 1 }, "limit": 1 },
    )
    .await;
    let scan = find_stage(&Bson::Document(e.clone()), "IXSCAN").expect("an index scan");
    assert_eq!(scan.get_str("indexName").unwrap(), "_id_", "{e}");
    assert!(docs_examined(&e) <= 5, "examined {}", docs_examined(&e));
    // Without a limit every match is needed: the selective index and an in-memory sort.
    let e = explain_find(
        &t.db,
        doc! { "find": "jobs", "filter": { "state": "done" }, "sort": { "_id": 1 } },
    )
    .await;
    let scan = find_stage(&Bson::Document(e.clone()), "IXSCAN").expect("an index scan");
    assert_eq!(scan.get_str("indexName").unwrap(), "state_1", "{e}");
    let claimed = jobs
        .find_one_and_update(
            doc! { "state": "queued" },
            doc! { "$set": { "state": "taken" } },
        )
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.get_i32("_id").unwrap(), 0);
}

#[tokio::test]
async fn an_equality_on_a_multikey_field_still_serves_the_sort_from_the_index() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("tagged");
    c.insert_many((0..400).map(|i| {
        let tags = vec![
            format!("t{}", i % 5),
            format!("t{}", (i + 1) % 5),
            "all".to_string(),
        ];
        doc! { "_id": i, "tags": tags, "date": (i * 7919) % 1000, "scores": [i % 13, (i * 3) % 17] }
    }))
    .await
    .unwrap();
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "tags": 1, "date": -1, "_id": -1 })
            .build(),
    )
    .await
    .unwrap();
    let e = explain_find(
        &t.db,
        doc! { "find": "tagged", "filter": { "tags": "t3" }, "sort": { "date": -1, "_id": -1 }, "limit": 12 },
    )
    .await;
    assert!(
        find_stage(&Bson::Document(e.clone()), "IXSCAN").is_some(),
        "{e}"
    );
    assert!(
        find_stage(&Bson::Document(e.clone()), "SORT").is_none(),
        "{e}"
    );
    assert_eq!(docs_examined(&e), 12);

    use futures::TryStreamExt;
    let by_index: Vec<Document> = c
        .find(doc! { "tags": "t3" })
        .sort(doc! { "date": -1, "_id": -1 })
        .limit(12)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let by_scan: Vec<Document> = c
        .find(doc! { "tags": "t3" })
        .sort(doc! { "date": -1, "_id": -1 })
        .limit(12)
        .hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(by_index, by_scan);

    // Sorting by an array field through a multikey index uses each document's least element.
    c.create_index(IndexModel::builder().keys(doc! { "scores": 1 }).build())
        .await
        .unwrap();
    let asc_index: Vec<Document> = c
        .find(doc! {})
        .sort(doc! { "scores": 1, "_id": 1 })
        .limit(30)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let asc_scan: Vec<Document> = c
        .find(doc! {})
        .sort(doc! { "scores": 1, "_id": 1 })
        .limit(30)
        .hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(asc_index, asc_scan);
}
