//! The `$graphLookup` and `$bucketAuto` aggregation stages, with the manual's examples.

use crate::common::{assert_code, test_db};
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::{Collection, Database};

async fn aggregate(c: &Collection<Document>, pipeline: Vec<Document>) -> Vec<Document> {
    c.aggregate(pipeline)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

async fn employees(db: &Database) -> Collection<Document> {
    let c = db.collection::<Document>("employees");
    c.insert_many(vec![
        doc! { "_id": 1, "name": "Dev" },
        doc! { "_id": 2, "name": "Eliot", "reportsTo": "Dev" },
        doc! { "_id": 3, "name": "Ron", "reportsTo": "Eliot" },
        doc! { "_id": 4, "name": "Andrew", "reportsTo": "Eliot" },
        doc! { "_id": 5, "name": "Asya", "reportsTo": "Ron" },
        doc! { "_id": 6, "name": "Dan", "reportsTo": "Andrew" },
    ])
    .await
    .unwrap();
    c
}

/// The names in a lookup result, sorted (MongoDB does not order them).
fn names(doc: &Document, field: &str) -> Vec<String> {
    let mut names: Vec<String> = doc
        .get_array(field)
        .unwrap()
        .iter()
        .map(|d| {
            d.as_document()
                .unwrap()
                .get_str("name")
                .unwrap()
                .to_string()
        })
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn graph_lookup_follows_a_reporting_chain_to_its_root() {
    let t = test_db().await;
    let c = employees(&t.db).await;
    let out = aggregate(
        &c,
        vec![
            doc! { "$match": { "name": "Asya" } },
            doc! { "$graphLookup": {
                "from": "employees",
                "startWith": "$reportsTo",
                "connectFromField": "reportsTo",
                "connectToField": "name",
                "as": "reportingHierarchy",
            } },
        ],
    )
    .await;
    assert_eq!(
        names(&out[0], "reportingHierarchy"),
        vec!["Dev", "Eliot", "Ron"]
    );
}

#[tokio::test]
async fn graph_lookup_stops_at_max_depth_and_records_each_depth_as_a_long() {
    let t = test_db().await;
    let c = employees(&t.db).await;
    let out = aggregate(
        &c,
        vec![
            doc! { "$match": { "name": "Asya" } },
            doc! { "$graphLookup": {
                "from": "employees",
                "startWith": "$reportsTo",
                "connectFromField": "reportsTo",
                "connectToField": "name",
                "as": "chain",
                "maxDepth": 1,
                "depthField": "level",
            } },
        ],
    )
    .await;
    let mut found: Vec<(String, Bson)> = out[0]
        .get_array("chain")
        .unwrap()
        .iter()
        .map(|d| {
            let d = d.as_document().unwrap();
            (
                d.get_str("name").unwrap().to_string(),
                d.get("level").unwrap().clone(),
            )
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        found,
        vec![
            ("Eliot".into(), Bson::Int64(1)),
            ("Ron".into(), Bson::Int64(0))
        ]
    );
}

#[tokio::test]
async fn graph_lookup_follows_arrays_terminates_on_cycles_and_honours_restrict_search_with_match() {
    let t = test_db().await;
    let airports = t.db.collection::<Document>("airports");
    airports
        .insert_many(vec![
            doc! { "_id": 0, "name": "JFK", "connects": ["BOS", "ORD"], "open": true },
            doc! { "_id": 1, "name": "BOS", "connects": ["JFK", "PWM"], "open": true },
            doc! { "_id": 2, "name": "ORD", "connects": ["JFK"], "open": false },
            doc! { "_id": 3, "name": "PWM", "connects": ["BOS", "LHR"], "open": true },
            doc! { "_id": 4, "name": "LHR", "connects": ["PWM"], "open": true },
        ])
        .await
        .unwrap();
    let travellers = t.db.collection::<Document>("travellers");
    travellers
        .insert_one(doc! { "_id": 1, "name": "Dev", "nearestAirport": "JFK" })
        .await
        .unwrap();
    let lookup = |restrict: Option<Document>| {
        let mut spec = doc! {
            "from": "airports",
            "startWith": "$nearestAirport",
            "connectFromField": "connects",
            "connectToField": "name",
            "as": "destinations",
        };
        if let Some(r) = restrict {
            spec.insert("restrictSearchWithMatch", r);
        }
        vec![doc! { "$graphLookup": spec }]
    };
    // JFK → BOS, ORD → PWM → LHR, with the cycles back to JFK and BOS visited once.
    let out = aggregate(&travellers, lookup(None)).await;
    assert_eq!(
        names(&out[0], "destinations"),
        vec!["BOS", "JFK", "LHR", "ORD", "PWM"]
    );
    let out = aggregate(&travellers, lookup(Some(doc! { "open": true }))).await;
    assert_eq!(
        names(&out[0], "destinations"),
        vec!["BOS", "JFK", "LHR", "PWM"]
    );
}

#[tokio::test]
async fn graph_lookup_needs_its_required_fields() {
    let t = test_db().await;
    let c = employees(&t.db).await;
    let r = c
        .aggregate(vec![
            doc! { "$graphLookup": { "from": "employees", "as": "x" } },
        ])
        .await;
    assert_code(r, 40105);
    let r = c
        .aggregate(vec![doc! { "$graphLookup": {
            "from": "employees", "startWith": "$a", "connectFromField": "a",
            "connectToField": "b", "as": "x", "maxDepth": -1,
        } }])
        .await;
    assert_code(r, 40101);
}

async fn numbers(db: &Database, values: impl IntoIterator<Item = i32>) -> Collection<Document> {
    let c = db.collection::<Document>("numbers");
    let docs: Vec<Document> = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| doc! { "_id": i as i32, "v": v })
        .collect();
    c.insert_many(docs).await.unwrap();
    c
}

/// `(min, max, count)` of each bucket, the bounds as doubles.
fn buckets(out: &[Document]) -> Vec<(f64, f64, i32)> {
    out.iter()
        .map(|b| {
            let id = b.get_document("_id").unwrap();
            let num = |k: &str| match id.get(k).unwrap() {
                Bson::Int32(i) => *i as f64,
                Bson::Int64(i) => *i as f64,
                Bson::Double(d) => *d,
                other => panic!("bound {other}"),
            };
            (num("min"), num("max"), b.get_i32("count").unwrap())
        })
        .collect()
}

#[tokio::test]
async fn bucket_auto_splits_documents_into_buckets_of_equal_size() {
    let t = test_db().await;
    let c = numbers(&t.db, 1..=100).await;
    let out = aggregate(
        &c,
        vec![doc! { "$bucketAuto": { "groupBy": "$v", "buckets": 5 } }],
    )
    .await;
    assert_eq!(
        buckets(&out),
        vec![
            (1.0, 21.0, 20),
            (21.0, 41.0, 20),
            (41.0, 61.0, 20),
            (61.0, 81.0, 20),
            (81.0, 100.0, 20)
        ]
    );
    // One more document goes into the last bucket.
    c.insert_one(doc! { "_id": 1000, "v": 101 }).await.unwrap();
    let out = aggregate(
        &c,
        vec![doc! { "$bucketAuto": { "groupBy": "$v", "buckets": 5 } }],
    )
    .await;
    assert_eq!(buckets(&out)[4], (81.0, 101.0, 21));
}

#[tokio::test]
async fn bucket_auto_keeps_equal_values_in_one_bucket_and_computes_the_output_accumulators() {
    let t = test_db().await;
    let c = numbers(&t.db, [1, 1, 1, 1, 2, 3]).await;
    let out = aggregate(
        &c,
        vec![doc! { "$bucketAuto": {
            "groupBy": "$v",
            "buckets": 3,
            "output": { "n": { "$sum": 1 }, "total": { "$sum": "$v" } },
        } }],
    )
    .await;
    assert_eq!(
        out,
        vec![
            doc! { "_id": { "min": 1, "max": 2 }, "n": 4, "total": 4 },
            doc! { "_id": { "min": 2, "max": 3 }, "n": 2, "total": 5 },
        ]
    );
}

#[tokio::test]
async fn bucket_auto_rounds_boundaries_to_the_granularity_series() {
    let t = test_db().await;
    let c = numbers(&t.db, [1, 3, 5, 7, 9, 11, 20, 30]).await;
    let run =
        |g: &str| vec![doc! { "$bucketAuto": { "groupBy": "$v", "buckets": 2, "granularity": g } }];
    assert_eq!(
        buckets(&aggregate(&c, run("R5")).await),
        vec![(0.63, 10.0, 5), (10.0, 40.0, 3)]
    );
    assert_eq!(
        buckets(&aggregate(&c, run("1-2-5")).await),
        vec![(0.5, 10.0, 5), (10.0, 50.0, 3)]
    );
    assert_eq!(
        buckets(&aggregate(&c, run("POWERSOF2")).await),
        vec![(0.5, 8.0, 4), (8.0, 32.0, 4)]
    );
    let r = c.aggregate(run("R7")).await;
    assert_code(r, 40257);
    c.insert_one(doc! { "_id": 99, "v": "text" }).await.unwrap();
    let r = c.aggregate(run("R5")).await;
    assert_code(r, 40258);
}
