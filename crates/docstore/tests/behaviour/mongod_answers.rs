//! Answers where docstore used to differ from mongod for features it claims (issue 41's
//! "genuine differences"): index collation `simple`, the Stable API, `returnKey` with
//! `showRecordId`, `listDatabases`' system databases, `unique` on the `_id` index, refused
//! stages and `$where`, and `setParameter`.

use crate::common::{assert_code, is_docstore, message_of, test_db};
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;
use std::time::Duration;

#[tokio::test]
async fn create_indexes_accepts_the_simple_collation_for_ordinary_and_text_indexes() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    let reply =
        t.db.run_command(doc! {
            "createIndexes": "c",
            "indexes": [
                { "key": { "a": 1 }, "name": "a_1", "collation": { "locale": "simple" } },
                { "key": { "body": "text" }, "name": "body_text",
                  "collation": { "locale": "simple" } },
            ],
        })
        .await
        .unwrap();
    assert_eq!(reply.get_i32("numIndexesAfter"), Ok(3), "{reply}");
    // The simple collation is no collation: the index is listed without one.
    let listed: Vec<Document> = c
        .list_indexes()
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .into_iter()
        .map(|m| bson::to_document(&m).unwrap())
        .collect();
    assert!(
        listed.iter().all(|i| !i.contains_key("collation")),
        "{listed:?}"
    );
    // A text index takes no other collation (67), as mongod's documentation says.
    let e = assert_code(
        t.db.run_command(doc! {
            "createIndexes": "c",
            "indexes": [{ "key": { "t": "text" }, "name": "t_text", "collation": { "locale": "fr" } }],
        })
        .await,
        67,
    );
    assert!(message_of(&e).contains("collation"), "{e}");
}

#[tokio::test]
async fn api_strict_refuses_a_command_outside_api_version_1_with_api_strict_error() {
    let t = test_db().await;
    t.db.collection::<Document>("c")
        .insert_one(doc! { "a": 1 })
        .await
        .unwrap();
    let e = assert_code(
        t.db.run_command(doc! {
            "distinct": "c", "key": "a", "apiVersion": "1", "apiStrict": true,
        })
        .await,
        323,
    );
    assert!(
        message_of(&e).starts_with(
            "Provided apiStrict:true, but the command distinct is not in API Version 1"
        ),
        "{e}"
    );
    // Version-1 commands run, strict or not.
    t.db.run_command(doc! {
        "find": "c", "filter": {}, "apiVersion": "1", "apiStrict": true,
    })
    .await
    .unwrap();
    t.db.run_command(doc! { "distinct": "c", "key": "a", "apiVersion": "1" })
        .await
        .unwrap();
    // So are the stages outside version 1.
    let e = assert_code(
        t.db.run_command(doc! {
            "aggregate": "c", "pipeline": [{ "$collStats": { "count": {} } }], "cursor": {},
            "apiVersion": "1", "apiStrict": true,
        })
        .await,
        323,
    );
    assert!(
        message_of(&e).starts_with("$collStats is not allowed with 'apiStrict: true'"),
        "{e}"
    );
}

#[tokio::test]
async fn an_api_version_other_than_1_is_an_api_version_error() {
    let t = test_db().await;
    let e = assert_code(
        t.db.run_command(doc! { "ping": 1, "apiVersion": "2" })
            .await,
        322,
    );
    assert_eq!(message_of(&e), "API version must be \"1\"");
}

#[tokio::test]
async fn api_strict_or_deprecation_errors_without_api_version_are_refused() {
    let t = test_db().await;
    for extra in [
        doc! { "apiStrict": true },
        doc! { "apiStrict": false },
        doc! { "apiDeprecationErrors": false },
    ] {
        let mut cmd = doc! { "ping": 1 };
        cmd.extend(extra.clone());
        let e = assert_code(t.db.run_command(cmd).await, 4886600);
        assert_eq!(
            message_of(&e),
            "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion",
            "{extra}"
        );
    }
}

#[tokio::test]
async fn find_with_return_key_and_show_record_id_returns_the_index_key_only() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_many([doc! { "_id": 1, "a": 10 }, doc! { "_id": 2, "a": 20 }])
        .await
        .unwrap();
    c.create_index(IndexModel::builder().keys(doc! { "a": 1 }).build())
        .await
        .unwrap();
    let reply =
        t.db.run_command(doc! {
            "find": "c", "filter": { "a": { "$gte": 10 } }, "sort": { "a": 1 },
            "returnKey": true, "showRecordId": true,
        })
        .await
        .unwrap();
    let batch = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(
        batch,
        &vec![
            Bson::Document(doc! { "a": 10 }),
            Bson::Document(doc! { "a": 20 })
        ]
    );
}

#[tokio::test]
async fn list_databases_lists_admin_config_and_local_and_filters_count_in_total_size() {
    let t = test_db().await;
    t.db.collection::<Document>("c")
        .insert_one(doc! { "pad": "x".repeat(1000) })
        .await
        .unwrap();
    let names = t.client.list_database_names().await.unwrap();
    for system in ["admin", "config", "local"] {
        assert!(names.contains(&system.to_string()), "{names:?}");
    }
    let admin = t
        .client
        .database("admin")
        .run_command(doc! { "listDatabases": 1, "filter": { "name": "admin" } })
        .await
        .unwrap();
    let listed = admin.get_array("databases").unwrap();
    assert_eq!(listed.len(), 1, "{admin}");
    let ours = t
        .client
        .database("admin")
        .run_command(doc! { "listDatabases": 1, "filter": { "name": t.db.name() } })
        .await
        .unwrap();
    let entry = ours.get_array("databases").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    let size = |d: &Document, k: &str| match d.get(k) {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(n)) => *n as i64,
        other => panic!("{k}: {other:?}"),
    };
    // totalSize sums only the databases the filter let through.
    assert_eq!(size(&ours, "totalSize"), size(&entry, "sizeOnDisk"));
}

#[tokio::test]
async fn create_indexes_of_id_with_unique_is_invalid_index_specification_option() {
    let t = test_db().await;
    t.db.create_collection("c").await.unwrap();
    let e = assert_code(
        t.db.run_command(doc! {
            "createIndexes": "c",
            "indexes": [{ "key": { "_id": 1 }, "name": "_id_1", "unique": true }],
        })
        .await,
        197,
    );
    assert!(
        message_of(&e)
            .starts_with("The field 'unique' is not valid for an _id index specification"),
        "{e}"
    );
}

#[tokio::test]
async fn list_local_sessions_lists_the_sessions_this_server_has_seen_until_they_end() {
    let t = test_db().await;
    let admin = t.client.database("admin");
    let mut session = t.client.start_session().await.unwrap();
    t.db.collection::<Document>("c")
        .insert_one(doc! { "a": 1 })
        .session(&mut session)
        .await
        .unwrap();
    let id = session.id().get("id").cloned().unwrap();
    let listed = |reply: Document| -> Vec<Document> {
        reply
            .get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .iter()
            .map(|d| d.as_document().unwrap().clone())
            .collect()
    };
    let pipeline = doc! {
        "aggregate": 1,
        "pipeline": [
            { "$listLocalSessions": { "allUsers": true } },
            { "$match": { "_id.id": id.clone() } },
        ],
        "cursor": {},
    };
    let found = listed(admin.run_command(pipeline.clone()).await.unwrap());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].get_datetime("lastUse").is_ok());
    assert!(found[0].get_document("_id").unwrap().contains_key("uid"));
    admin
        .run_command(doc! { "endSessions": [{ "id": id }] })
        .await
        .unwrap();
    assert!(listed(admin.run_command(pipeline).await.unwrap()).is_empty());
    assert_code(
        admin
            .run_command(doc! {
                "aggregate": 1, "pipeline": [{ "$listLocalSessions": { "bogus": 1 } }], "cursor": {},
            })
            .await,
        40415,
    );
}

#[tokio::test]
async fn where_is_a_bad_value_like_other_unsupported_query_operators() {
    if !is_docstore() {
        // mongod with JavaScript runs `$where`.
        return;
    }
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_one(doc! { "a": 1 }).await.unwrap();
    let e = assert_code(c.find(doc! { "$where": "this.a == 1" }).await, 2);
    assert!(message_of(&e).contains("$where"), "{e}");
}

#[tokio::test]
async fn change_stream_on_a_standalone_is_error_40573() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("c");
    c.insert_one(doc! { "a": 1 }).await.unwrap();
    let e = assert_code(
        t.db.run_command(doc! {
            "aggregate": "c", "pipeline": [{ "$changeStream": {} }], "cursor": {},
        })
        .await,
        40573,
    );
    assert_eq!(
        message_of(&e),
        "The $changeStream stage is only supported on replica sets"
    );
}

#[tokio::test]
async fn set_parameter_ttl_monitor_sleep_secs_answers_was_and_changes_the_sweep_interval() {
    let t = test_db().await;
    let admin = t.client.database("admin");
    let before = admin
        .run_command(doc! { "getParameter": 1, "ttlMonitorSleepSecs": 1 })
        .await
        .unwrap();
    let was = before.get("ttlMonitorSleepSecs").cloned().unwrap();
    let c = t.db.collection::<Document>("sessions");
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "at": 1 })
            .options(
                IndexOptions::builder()
                    .expire_after(Duration::from_secs(1))
                    .build(),
            )
            .build(),
    )
    .await
    .unwrap();
    c.insert_one(doc! { "_id": 1, "at": DateTime::from_millis(0) })
        .await
        .unwrap();
    let reply = admin
        .run_command(doc! { "setParameter": 1, "ttlMonitorSleepSecs": 1 })
        .await
        .unwrap();
    assert_eq!(reply.get("was"), Some(&was), "{reply}");
    let now = admin
        .run_command(doc! { "getParameter": 1, "ttlMonitorSleepSecs": 1 })
        .await
        .unwrap();
    assert_eq!(now.get_i32("ttlMonitorSleepSecs"), Ok(1));
    let mut swept = false;
    for _ in 0..50 {
        if c.count_documents(doc! {}).await.unwrap() == 0 {
            swept = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Put the server's interval back when it is shared (a real MongoDB).
    admin
        .run_command(doc! { "setParameter": 1, "ttlMonitorSleepSecs": was })
        .await
        .unwrap();
    assert!(swept, "the expired document was not deleted within 5 s");
}

#[tokio::test]
async fn set_parameter_refuses_unknown_and_startup_only_parameters_by_name() {
    let t = test_db().await;
    let admin = t.client.database("admin");
    let e = assert_code(
        admin
            .run_command(doc! { "setParameter": 1, "noSuchParameter": 1 })
            .await,
        72,
    );
    assert!(
        message_of(&e).starts_with("attempted to set unrecognized parameter [noSuchParameter]"),
        "{e}"
    );
    let e = assert_code(admin.run_command(doc! { "setParameter": 1 }).await, 72);
    assert!(message_of(&e).starts_with("no option found to set"), "{e}");
    let e = assert_code(
        admin
            .run_command(doc! { "setParameter": 1, "enableTestCommands": 1 })
            .await,
        20,
    );
    assert_eq!(
        message_of(&e),
        "not allowed to change [enableTestCommands] at runtime"
    );
    assert_code(
        t.db.run_command(doc! { "setParameter": 1, "ttlMonitorSleepSecs": 5 })
            .await,
        13,
    );
}

#[tokio::test]
async fn set_parameter_cursor_timeout_millis_answers_the_previous_value_and_get_parameter_the_new()
{
    let t = test_db().await;
    let admin = t.client.database("admin");
    let reply = admin
        .run_command(doc! { "setParameter": 1, "cursorTimeoutMillis": 120_000_i64 })
        .await
        .unwrap();
    let was = reply.get("was").cloned().unwrap();
    let now = admin
        .run_command(doc! { "getParameter": 1, "cursorTimeoutMillis": 1 })
        .await
        .unwrap();
    assert_eq!(now.get_i64("cursorTimeoutMillis"), Ok(120_000), "{now}");
    admin
        .run_command(doc! { "setParameter": 1, "cursorTimeoutMillis": was })
        .await
        .unwrap();
    assert_code(
        admin
            .run_command(doc! { "setParameter": 1, "cursorTimeoutMillis": "soon" })
            .await,
        2,
    );
}
