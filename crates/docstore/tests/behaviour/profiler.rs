//! The database profiler (`profile`, `<db>.system.profile`) and `usersInfo`, with mongod's
//! answers: levels 0-2, `slowms`, `filter`, the entry fields ODMs count queries by (`op`, `ns`,
//! `command`, `nreturned`), and a capped profile collection.

use crate::common::{assert_code, test_db};
use bson::{doc, Document};
use futures::TryStreamExt;

async fn profile_entries(db: &mongodb::Database, filter: Document) -> Vec<Document> {
    db.collection::<Document>("system.profile")
        .find(filter)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn level_two_records_every_operation_with_its_command_and_counts() {
    let t = test_db().await;
    let was = t.db.run_command(doc! { "profile": 2 }).await.unwrap();
    assert_eq!(was.get_i32("was"), Ok(0), "{was}");
    assert_eq!(
        was.get_i32("slowms")
            .ok()
            .or(was.get_i64("slowms").ok().map(|v| v as i32)),
        Some(100)
    );
    let c = t.db.collection::<Document>("items");
    c.insert_many(vec![doc! { "a": 1 }, doc! { "a": 2 }, doc! { "a": 3 }])
        .await
        .unwrap();
    let found: Vec<Document> = c
        .find(doc! { "a": { "$gte": 2 } })
        .comment("look")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    c.update_one(doc! { "a": 1 }, doc! { "$set": { "b": 1 } })
        .await
        .unwrap();
    c.delete_many(doc! { "a": 3 }).await.unwrap();
    c.distinct("a", doc! {}).await.unwrap();
    let ns = format!("{}.items", t.db.name());
    let query = profile_entries(
        &t.db,
        doc! { "ns": &ns, "op": "query", "command.comment": "look" },
    )
    .await;
    assert_eq!(query.len(), 1, "{query:?}");
    assert_eq!(query[0].get_i32("nreturned"), Ok(2));
    assert!(query[0]
        .get_document("command")
        .unwrap()
        .contains_key("filter"));
    assert!(query[0].get_datetime("ts").is_ok());
    assert!(query[0].get("millis").is_some());
    let insert = profile_entries(&t.db, doc! { "ns": &ns, "op": "insert" }).await;
    assert_eq!(
        insert[0]
            .get_i64("ninserted")
            .ok()
            .or(insert[0].get_i32("ninserted").ok().map(i64::from)),
        Some(3)
    );
    let update = profile_entries(&t.db, doc! { "ns": &ns, "op": "update" }).await;
    assert_eq!(update.len(), 1);
    let remove = profile_entries(&t.db, doc! { "ns": &ns, "op": "remove" }).await;
    assert_eq!(remove.len(), 1);
    let distinct = profile_entries(
        &t.db,
        doc! { "ns": &ns, "op": "command", "command.distinct": "items" },
    )
    .await;
    assert_eq!(distinct.len(), 1);
    // The profile collection is capped, as mongod creates it (1 MiB).
    let listed: Vec<Document> =
        t.db.run_command(doc! { "listCollections": 1, "filter": { "name": "system.profile" } })
            .await
            .unwrap()
            .get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .iter()
            .map(|d| d.as_document().unwrap().clone())
            .collect();
    let options = listed[0].get_document("options").unwrap();
    assert_eq!(options.get_bool("capped"), Ok(true), "{options}");
    // Turning it off reports the level it had and records nothing more.
    let was = t.db.run_command(doc! { "profile": 0 }).await.unwrap();
    assert_eq!(was.get_i32("was"), Ok(2));
    let before = profile_entries(&t.db, doc! {}).await.len();
    c.find_one(doc! {}).await.unwrap();
    assert_eq!(profile_entries(&t.db, doc! {}).await.len(), before);
}

#[tokio::test]
async fn level_one_records_only_operations_slower_than_slowms_or_matching_the_filter() {
    let t = test_db().await;
    t.db.run_command(doc! { "profile": 1, "slowms": 100_000 })
        .await
        .unwrap();
    let c = t.db.collection::<Document>("quick");
    c.insert_one(doc! { "a": 1 }).await.unwrap();
    c.find_one(doc! {}).await.unwrap();
    assert!(profile_entries(&t.db, doc! {}).await.is_empty());
    // A filter replaces slowms: here, every find.
    let was =
        t.db.run_command(doc! { "profile": 1, "filter": { "op": "query" } })
            .await
            .unwrap();
    assert_eq!(was.get_i32("was"), Ok(1));
    c.find_one(doc! {}).await.unwrap();
    c.insert_one(doc! { "a": 2 }).await.unwrap();
    let entries = profile_entries(&t.db, doc! {}).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].get_str("op"), Ok("query"));
    let status = t.db.run_command(doc! { "profile": -1 }).await.unwrap();
    assert_eq!(
        status.get_document("filter").unwrap(),
        &doc! { "op": "query" }
    );
    t.db.run_command(doc! { "profile": 0, "filter": "unset", "slowms": 100 })
        .await
        .unwrap();
}

#[tokio::test]
async fn bad_profile_settings_are_refused() {
    let t = test_db().await;
    assert_code(t.db.run_command(doc! { "profile": 3 }).await, 2);
    assert_code(
        t.db.run_command(doc! { "profile": 1, "sampleRate": 2.0 })
            .await,
        2,
    );
    assert_code(t.db.run_command(doc! { "profile": "all" }).await, 14);
}

#[tokio::test]
async fn users_info_answers_a_users_list_not_a_cursor() {
    let t = test_db().await;
    let reply = t.db.run_command(doc! { "usersInfo": 1 }).await.unwrap();
    assert!(reply.get_array("users").is_ok(), "{reply}");
    assert!(!reply.contains_key("cursor"));
    assert_code(t.db.run_command(doc! { "usersInfo": 5.5 }).await, 2);
}
