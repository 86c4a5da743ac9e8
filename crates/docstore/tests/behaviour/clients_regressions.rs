//! What real clients (mongosh, pymongo) tripped over in docstore, kept as regressions:
//! `$collStats` behind mongosh's `db.coll.stats()`/`dataSize()`, `collStats` scaling, `profile`.

use crate::common::{assert_code, is_docstore, message_of, test_db};
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::{Collection, IndexModel};

/// An integer reply field as i64, whether sent as int32 or int64.
fn int(d: &Document, key: &str) -> i64 {
    match d.get(key) {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("{key} is not an integer: {other:?} in {d}"),
    }
}

async fn three_docs_with_an_index(t: &crate::common::TestDb) -> Collection<Document> {
    let c = t.db.collection::<Document>("c");
    c.insert_many((0..3).map(|i| doc! { "_id": i, "pad": "x".repeat(100) }))
        .await
        .unwrap();
    c.create_index(IndexModel::builder().keys(doc! { "pad": 1 }).build())
        .await
        .unwrap();
    c
}

async fn aggregate(c: &Collection<Document>, pipeline: Vec<Document>) -> Vec<Document> {
    c.aggregate(pipeline)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn coll_stats_stage_reports_the_storage_figures_mongosh_stats_reads() {
    let t = test_db().await;
    let c = three_docs_with_an_index(&t).await;
    let out = aggregate(&c, vec![doc! { "$collStats": { "storageStats": {} } }]).await;
    assert_eq!(out.len(), 1, "{out:?}");
    let report = &out[0];
    assert_eq!(report.get_str("ns").unwrap(), format!("{}.c", t.db.name()));
    assert!(report.get_str("host").is_ok());
    assert!(report.get_datetime("localTime").is_ok());
    let s = report.get_document("storageStats").unwrap();
    assert_eq!(int(s, "count"), 3);
    assert!(int(s, "size") >= 300, "three 100-byte strings: {s}");
    assert_eq!(int(s, "avgObjSize"), int(s, "size") / 3);
    assert_eq!(int(s, "nindexes"), 2);
    assert_eq!(int(s, "scaleFactor"), 1);
    assert_eq!(s.get_bool("capped").ok(), Some(false));
    let mut names: Vec<&String> = s.get_document("indexSizes").unwrap().keys().collect();
    names.sort();
    assert_eq!(names, ["_id_", "pad_1"]);
    assert_eq!(
        int(s, "totalSize"),
        int(s, "storageSize") + int(s, "totalIndexSize")
    );
}

#[tokio::test]
async fn stages_after_coll_stats_run_over_its_report_as_mongosh_data_size_does() {
    let t = test_db().await;
    let c = three_docs_with_an_index(&t).await;
    let stats = aggregate(&c, vec![doc! { "$collStats": { "storageStats": {} } }]).await;
    let size = int(stats[0].get_document("storageStats").unwrap(), "size");
    // mongosh's db.coll.dataSize() sends exactly this pipeline.
    let out = aggregate(
        &c,
        vec![
            doc! { "$collStats": { "storageStats": {} } },
            doc! { "$group": { "_id": null, "value": { "$sum": "$storageStats.size" } } },
        ],
    )
    .await;
    assert_eq!(out.len(), 1);
    assert_eq!(int(&out[0], "value"), size);
    let out = aggregate(
        &c,
        vec![
            doc! { "$collStats": { "count": {} } },
            doc! { "$project": { "_id": 0, "count": 1 } },
        ],
    )
    .await;
    assert_eq!(out, vec![doc! { "count": 3 }]);
}

#[tokio::test]
async fn coll_stats_stage_scales_sizes_but_not_the_average_object_size() {
    let t = test_db().await;
    let c = three_docs_with_an_index(&t).await;
    let one = aggregate(&c, vec![doc! { "$collStats": { "storageStats": {} } }]).await;
    let one = one[0].get_document("storageStats").unwrap().clone();
    let scaled = aggregate(
        &c,
        vec![doc! { "$collStats": { "storageStats": { "scale": 64 } } }],
    )
    .await;
    let scaled = scaled[0].get_document("storageStats").unwrap();
    assert_eq!(int(scaled, "scaleFactor"), 64);
    assert_eq!(int(scaled, "size"), int(&one, "size") / 64);
    assert_eq!(int(scaled, "avgObjSize"), int(&one, "avgObjSize"));
    assert_eq!(int(scaled, "count"), 3);
    let e = assert_code(
        c.aggregate(vec![
            doc! { "$collStats": { "storageStats": { "scale": 0 } } },
        ])
        .await,
        51024,
    );
    assert!(message_of(&e).contains(">= 1"), "{e}");
}

#[tokio::test]
async fn coll_stats_stage_on_a_missing_collection_is_namespace_not_found() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("nope");
    assert_code(
        c.aggregate(vec![doc! { "$collStats": { "storageStats": {} } }])
            .await,
        26,
    );
}

#[tokio::test]
async fn coll_stats_stage_refuses_unknown_options_and_counters_docstore_does_not_keep() {
    let t = test_db().await;
    let c = three_docs_with_an_index(&t).await;
    assert_code(
        c.aggregate(vec![doc! { "$collStats": { "storageStatz": {} } }])
            .await,
        40415,
    );
    if is_docstore() {
        let e = assert_code(
            c.aggregate(vec![doc! { "$collStats": { "latencyStats": {} } }])
                .await,
            115,
        );
        assert!(message_of(&e).contains("latencyStats"), "{e}");
    }
}

#[tokio::test]
async fn coll_stats_stage_must_open_the_pipeline() {
    let t = test_db().await;
    let c = three_docs_with_an_index(&t).await;
    let e = assert_code(
        c.aggregate(vec![
            doc! { "$match": {} },
            doc! { "$collStats": { "count": {} } },
        ])
        .await,
        40602,
    );
    assert!(message_of(&e).contains("first stage"), "{e}");
    // Nor inside a sub-pipeline, whose collection is not the one the report would name.
    assert_code(
        c.aggregate(vec![
            doc! { "$facet": { "stats": [{ "$collStats": { "count": {} } }] } },
        ])
        .await,
        40600,
    );
    if is_docstore() {
        // docstore has no query plan to show for a report that reads no documents.
        let explain =
            t.db.run_command(doc! {
                "explain": {
                    "aggregate": "c",
                    "pipeline": [{ "$collStats": { "count": {} } }],
                    "cursor": {},
                },
            })
            .await;
        let e = assert_code(explain, 115);
        assert!(message_of(&e).contains("explain of $collStats"), "{e}");
    }
}

#[tokio::test]
async fn coll_stats_command_divides_sizes_by_scale() {
    let t = test_db().await;
    three_docs_with_an_index(&t).await;
    let one = t.db.run_command(doc! { "collStats": "c" }).await.unwrap();
    let scaled =
        t.db.run_command(doc! { "collStats": "c", "scale": 32 })
            .await
            .unwrap();
    assert_eq!(int(&scaled, "size"), int(&one, "size") / 32);
    assert_eq!(int(&scaled, "totalSize"), int(&one, "totalSize") / 32);
    assert_eq!(int(&scaled, "scaleFactor"), 32);
    assert_eq!(int(&scaled, "count"), 3);
    assert_code(
        t.db.run_command(doc! { "collStats": "c", "scale": -1 })
            .await,
        51024,
    );
}

#[tokio::test]
async fn profile_reports_the_profiler_off_as_mongosh_get_profiling_status_reads() {
    let t = test_db().await;
    for level in [-1, 0] {
        let r = t.db.run_command(doc! { "profile": level }).await.unwrap();
        assert_eq!(int(&r, "was"), 0, "{r}");
        assert_eq!(int(&r, "slowms"), 100, "{r}");
        assert_eq!(r.get_f64("sampleRate").ok(), Some(1.0), "{r}");
    }
}
