//! Time-series collections (MongoDB 7.0): `create` with `timeseries` and `expireAfterSeconds`
//! validated with mongod's codes, `listCollections` showing `type: "timeseries"` with the
//! defaults filled in, the time field a measurement must carry, expiry by the TTL monitor,
//! `collMod` of the expiry and granularity, and the options surviving a restart.

use crate::common::{assert_code, client_for, code_of, is_docstore, message_of, test_db};
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use mongodb::Database;
use std::time::Duration;

/// The `listCollections` entry of `name`.
async fn listed(db: &Database, name: &str) -> Document {
    let reply = db
        .run_command(doc! { "listCollections": 1, "filter": { "name": name } })
        .await
        .unwrap();
    let batch = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 1, "{reply}");
    batch[0].as_document().unwrap().clone()
}

fn options(entry: &Document) -> &Document {
    entry.get_document("options").unwrap()
}

fn timeseries(entry: &Document) -> &Document {
    options(entry).get_document("timeseries").unwrap()
}

/// An integer whatever its BSON width (mongod and docstore may differ there).
fn int(value: Option<&Bson>) -> Option<i64> {
    match value? {
        Bson::Int32(i) => Some(*i as i64),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

async fn create(db: &Database, name: &str, extra: Document) -> mongodb::error::Result<Document> {
    let mut cmd = doc! { "create": name };
    cmd.extend(extra);
    db.run_command(cmd).await
}

#[tokio::test]
async fn a_time_series_collection_is_listed_as_timeseries_with_its_defaults_filled_in() {
    let t = test_db().await;
    create(
        &t.db,
        "weather",
        doc! { "timeseries": { "timeField": "ts", "metaField": "sensor" },
        "expireAfterSeconds": 86400 },
    )
    .await
    .unwrap();
    let entry = listed(&t.db, "weather").await;
    assert_eq!(entry.get_str("type"), Ok("timeseries"), "{entry}");
    let ts = timeseries(&entry);
    assert_eq!(ts.get_str("timeField"), Ok("ts"), "{entry}");
    assert_eq!(ts.get_str("metaField"), Ok("sensor"), "{entry}");
    assert_eq!(ts.get_str("granularity"), Ok("seconds"), "{entry}");
    assert_eq!(int(ts.get("bucketMaxSpanSeconds")), Some(3600), "{entry}");
    assert_eq!(
        int(options(&entry).get("expireAfterSeconds")),
        Some(86400),
        "{entry}"
    );
    assert_eq!(
        entry.get_document("info").unwrap().get_bool("readOnly"),
        Ok(false)
    );
    // `nameOnly` keeps the type, which is how ODMs tell time-series collections apart.
    let reply =
        t.db.run_command(
            doc! { "listCollections": 1, "nameOnly": true, "filter": { "name": "weather" } },
        )
        .await
        .unwrap();
    let first = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(first.get_str("type"), Ok("timeseries"), "{first}");
}

#[tokio::test]
async fn each_granularity_implies_its_bucket_span_and_custom_spans_replace_the_granularity() {
    let t = test_db().await;
    for (name, granularity, span) in [("m", "minutes", 86_400), ("h", "hours", 2_592_000)] {
        create(
            &t.db,
            name,
            doc! { "timeseries": { "timeField": "t", "granularity": granularity } },
        )
        .await
        .unwrap();
        let entry = listed(&t.db, name).await;
        assert_eq!(timeseries(&entry).get_str("granularity"), Ok(granularity));
        assert_eq!(
            int(timeseries(&entry).get("bucketMaxSpanSeconds")),
            Some(span),
            "{entry}"
        );
    }
    create(
        &t.db,
        "custom",
        doc! { "timeseries": { "timeField": "t", "bucketMaxSpanSeconds": 500,
        "bucketRoundingSeconds": 500 } },
    )
    .await
    .unwrap();
    let entry = listed(&t.db, "custom").await;
    let ts = timeseries(&entry);
    assert!(!ts.contains_key("granularity"), "{entry}");
    assert_eq!(int(ts.get("bucketMaxSpanSeconds")), Some(500), "{entry}");
    assert_eq!(int(ts.get("bucketRoundingSeconds")), Some(500), "{entry}");
}

#[tokio::test]
async fn invalid_time_series_options_are_refused_with_mongods_codes() {
    let t = test_db().await;
    let cases: Vec<(Document, i32)> = vec![
        (doc! { "timeseries": { "metaField": "m" } }, 40414),
        (doc! { "timeseries": { "timeField": 100 } }, 14),
        (doc! { "timeseries": "" }, 14),
        (
            doc! { "timeseries": { "timeField": "t", "invalidOption": {} } },
            40415,
        ),
        (doc! { "timeseries": { "timeField": "sub.time" } }, 72),
        (
            doc! { "timeseries": { "timeField": "t", "metaField": "sub.meta" } },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t", "metaField": "t" } },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t", "metaField": "_id" } },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t", "bucketMaxSpanSeconds": 10 } },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t", "bucketMaxSpanSeconds": 10,
            "bucketRoundingSeconds": 20 } },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t", "granularity": "minutes",
            "bucketMaxSpanSeconds": 3600 } },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t", "granularity": "seconds",
            "bucketMaxSpanSeconds": 3600, "bucketRoundingSeconds": 60 } },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t" }, "capped": true, "size": 100 },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t" }, "validator": {} },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t" }, "validationLevel": "off" },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t" }, "idIndex": { "key": { "_id": 1 }, "name": "_id_" } },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t" }, "expireAfterSeconds": -10_i64 },
            72,
        ),
        (
            doc! { "timeseries": { "timeField": "t" }, "expireAfterSeconds": "" },
            14,
        ),
        // Without `timeseries` (or a clustered index) there is nothing to expire.
        (doc! { "expireAfterSeconds": 10 }, 72),
    ];
    for (i, (options, code)) in cases.into_iter().enumerate() {
        let r = create(&t.db, &format!("bad{i}"), options.clone()).await;
        assert_eq!(
            r.as_ref().err().and_then(code_of),
            Some(code),
            "{options}: {r:?}"
        );
    }
    let names = t.db.list_collection_names().await.unwrap();
    assert!(names.is_empty(), "{names:?}");
}

#[tokio::test]
async fn creating_the_same_time_series_collection_again_succeeds_and_with_other_options_answers_48()
{
    let t = test_db().await;
    let spec = doc! { "timeseries": { "timeField": "t", "metaField": "m" } };
    create(&t.db, "c", spec.clone()).await.unwrap();
    create(&t.db, "c", spec).await.unwrap();
    assert_code(
        create(
            &t.db,
            "c",
            doc! { "timeseries": { "timeField": "t", "granularity": "hours" } },
        )
        .await,
        48,
    );
    create(&t.db, "plain", doc! {}).await.unwrap();
    assert_code(
        create(&t.db, "plain", doc! { "timeseries": { "timeField": "t" } }).await,
        48,
    );
}

#[tokio::test]
async fn a_measurement_without_a_date_in_the_time_field_is_refused_with_code_2() {
    let t = test_db().await;
    create(
        &t.db,
        "m",
        doc! { "timeseries": { "timeField": "ts", "metaField": "sensor" } },
    )
    .await
    .unwrap();
    let c = t.db.collection::<Document>("m");
    let e = assert_code(c.insert_one(doc! { "sensor": 1, "v": 1 }).await, 2);
    assert_eq!(
        message_of(&e),
        "'ts' must be present and contain a valid BSON UTC datetime value"
    );
    assert_code(c.insert_one(doc! { "ts": "2024-01-01", "v": 1 }).await, 2);
    let at = DateTime::from_millis(1_700_000_000_000);
    c.insert_many(vec![
        doc! { "ts": at, "sensor": 1, "v": 1 },
        doc! { "ts": at, "sensor": 2, "v": 2 },
    ])
    .await
    .unwrap();
    // An ordered batch stops at the measurement without a time.
    assert_code(
        c.insert_many(vec![
            doc! { "ts": at, "sensor": 3, "v": 3 },
            doc! { "sensor": 4, "v": 4 },
            doc! { "ts": at, "sensor": 5, "v": 5 },
        ])
        .await,
        2,
    );
    let found: Vec<Document> = c
        .find(doc! {})
        .sort(doc! { "sensor": 1 })
        .projection(doc! { "_id": 0 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        found,
        vec![
            doc! { "ts": at, "sensor": 1, "v": 1 },
            doc! { "ts": at, "sensor": 2, "v": 2 },
            doc! { "ts": at, "sensor": 3, "v": 3 },
        ]
    );
}

#[tokio::test]
async fn the_ttl_monitor_deletes_measurements_older_than_expire_after_seconds() {
    let t = test_db().await;
    let admin = t.client.database("admin");
    create(
        &t.db,
        "readings",
        doc! { "timeseries": { "timeField": "ts", "metaField": "sensor" },
        "expireAfterSeconds": 60 },
    )
    .await
    .unwrap();
    let c = t.db.collection::<Document>("readings");
    let recent = DateTime::from_millis(DateTime::now().timestamp_millis() + 3_600_000);
    c.insert_many(vec![
        doc! { "ts": DateTime::from_millis(0), "sensor": "old", "v": 1 },
        doc! { "ts": recent, "sensor": "new", "v": 2 },
    ])
    .await
    .unwrap();
    let was = admin
        .run_command(doc! { "setParameter": 1, "ttlMonitorSleepSecs": 1 })
        .await
        .unwrap()
        .get("was")
        .cloned()
        .unwrap();
    let mut left = Vec::new();
    for _ in 0..50 {
        left = c
            .find(doc! {})
            .projection(doc! { "_id": 0, "sensor": 1 })
            .await
            .unwrap()
            .try_collect::<Vec<Document>>()
            .await
            .unwrap();
        if left.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admin
        .run_command(doc! { "setParameter": 1, "ttlMonitorSleepSecs": was })
        .await
        .unwrap();
    assert_eq!(left, vec![doc! { "sensor": "new" }]);
}

#[tokio::test]
async fn coll_mod_changes_the_expiry_and_only_coarsens_the_granularity() {
    let t = test_db().await;
    create(
        &t.db,
        "m",
        doc! { "timeseries": { "timeField": "t", "granularity": "minutes" } },
    )
    .await
    .unwrap();
    t.db.run_command(doc! { "collMod": "m", "expireAfterSeconds": 100 })
        .await
        .unwrap();
    let entry = listed(&t.db, "m").await;
    assert_eq!(
        int(options(&entry).get("expireAfterSeconds")),
        Some(100),
        "{entry}"
    );
    t.db.run_command(doc! { "collMod": "m", "expireAfterSeconds": "off" })
        .await
        .unwrap();
    let entry = listed(&t.db, "m").await;
    assert!(
        !options(&entry).contains_key("expireAfterSeconds"),
        "{entry}"
    );
    t.db.run_command(doc! { "collMod": "m", "timeseries": { "granularity": "hours" } })
        .await
        .unwrap();
    let entry = listed(&t.db, "m").await;
    assert_eq!(timeseries(&entry).get_str("granularity"), Ok("hours"));
    assert_eq!(
        int(timeseries(&entry).get("bucketMaxSpanSeconds")),
        Some(2_592_000)
    );
    assert_code(
        t.db.run_command(doc! { "collMod": "m", "timeseries": { "granularity": "seconds" } })
            .await,
        72,
    );
    assert_code(
        t.db.run_command(doc! { "collMod": "m", "validator": { "a": 1 } })
            .await,
        72,
    );
    create(&t.db, "plain", doc! {}).await.unwrap();
    assert_code(
        t.db.run_command(doc! { "collMod": "plain", "timeseries": { "granularity": "hours" } })
            .await,
        72,
    );
}

#[tokio::test]
async fn out_and_merge_into_a_time_series_collection_are_refused_by_name() {
    // mongod 7.0.3+ can `$out` into a time-series collection; docstore refuses both by name.
    if !is_docstore() {
        return;
    }
    let t = test_db().await;
    create(&t.db, "ts", doc! { "timeseries": { "timeField": "t" } })
        .await
        .unwrap();
    let src = t.db.collection::<Document>("src");
    src.insert_one(doc! { "t": DateTime::now() }).await.unwrap();
    for stage in [doc! { "$out": "ts" }, doc! { "$merge": { "into": "ts" } }] {
        let e = assert_code(src.aggregate(vec![stage.clone()]).await, 115);
        assert!(message_of(&e).contains("time series"), "{stage}: {e}");
    }
}

#[tokio::test]
async fn a_time_series_collection_keeps_its_options_and_measurements_after_a_restart() {
    // Journal replay and snapshots are docstore's own.
    if !is_docstore() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = docstore::Server::start(docstore::Config::persistent(dir.path()))
        .await
        .unwrap();
    let db = client_for(&server.uri()).await.database("shop");
    create(
        &db,
        "m",
        doc! { "timeseries": { "timeField": "t", "metaField": "s" }, "expireAfterSeconds": 3600 },
    )
    .await
    .unwrap();
    db.run_command(doc! { "collMod": "m", "timeseries": { "granularity": "minutes" } })
        .await
        .unwrap();
    let at = DateTime::now();
    db.collection::<Document>("m")
        .insert_one(doc! { "_id": 1, "t": at, "s": 1 })
        .await
        .unwrap();
    server.shutdown().await;

    let server = docstore::Server::start(docstore::Config::persistent(dir.path()))
        .await
        .unwrap();
    let db = client_for(&server.uri()).await.database("shop");
    let entry = listed(&db, "m").await;
    assert_eq!(entry.get_str("type"), Ok("timeseries"), "{entry}");
    assert_eq!(timeseries(&entry).get_str("granularity"), Ok("minutes"));
    assert_eq!(int(options(&entry).get("expireAfterSeconds")), Some(3600));
    let c = db.collection::<Document>("m");
    assert_eq!(
        c.find_one(doc! { "_id": 1 }).await.unwrap(),
        Some(doc! { "_id": 1, "t": at, "s": 1 })
    );
    assert_code(c.insert_one(doc! { "_id": 2, "s": 1 }).await, 2);
    server.shutdown().await;
}
