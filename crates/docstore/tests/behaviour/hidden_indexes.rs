//! Hidden indexes: created hidden or hidden by `collMod`, listed with `hidden: true`, ignored
//! by the planner and by hints, yet kept up to date and still enforcing uniqueness; and their
//! hidden state survives a restart.

use crate::common::{assert_code, client_for, find_stage, is_docstore, message_of, test_db};
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::{Collection, Database};

async fn listed(c: &Collection<Document>) -> Vec<Document> {
    c.list_indexes()
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .into_iter()
        .map(|m| bson::to_document(&m).unwrap())
        .collect()
}

fn spec<'a>(specs: &'a [Document], name: &str) -> &'a Document {
    specs
        .iter()
        .find(|s| s.get_str("name") == Ok(name))
        .unwrap_or_else(|| panic!("no index {name} in {specs:?}"))
}

async fn explain_stage(db: &Database, filter: Document) -> Bson {
    let reply = db
        .run_command(doc! {
            "explain": { "find": "c", "filter": filter },
            "verbosity": "queryPlanner",
        })
        .await
        .unwrap();
    Bson::Document(reply)
}

async fn seeded(db: &Database, hidden: bool) -> Collection<Document> {
    let c = db.collection::<Document>("c");
    c.insert_many((0..10).map(|i| doc! { "_id": i, "a": i, "u": i }))
        .await
        .unwrap();
    db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [
            { "key": { "a": 1 }, "name": "a_1", "hidden": hidden },
            { "key": { "u": 1 }, "name": "u_1", "unique": true, "hidden": hidden },
        ],
    })
    .await
    .unwrap();
    c
}

#[tokio::test]
async fn an_index_created_hidden_is_listed_hidden_and_the_planner_scans_the_collection() {
    let t = test_db().await;
    let c = seeded(&t.db, true).await;
    let specs = listed(&c).await;
    assert_eq!(
        spec(&specs, "a_1").get_bool("hidden"),
        Ok(true),
        "{specs:?}"
    );
    let plan = explain_stage(&t.db, doc! { "a": 3 }).await;
    assert!(find_stage(&plan, "COLLSCAN").is_some(), "{plan}");
    assert!(find_stage(&plan, "IXSCAN").is_none(), "{plan}");
    // The answer is the same.
    let found: Vec<Document> = c
        .find(doc! { "a": 3 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found, vec![doc! { "_id": 3, "a": 3, "u": 3 }]);
}

#[tokio::test]
async fn a_hidden_unique_index_still_refuses_duplicates() {
    let t = test_db().await;
    let c = seeded(&t.db, true).await;
    let e = assert_code(c.insert_one(doc! { "_id": 100, "u": 4 }).await, 11000);
    assert!(message_of(&e).contains("u_1"), "{e}");
}

#[tokio::test]
async fn a_hint_naming_a_hidden_index_is_refused_as_an_unknown_index() {
    let t = test_db().await;
    seeded(&t.db, true).await;
    for hint in [Bson::String("a_1".into()), Bson::Document(doc! { "a": 1 })] {
        let e = assert_code(
            t.db.run_command(doc! { "find": "c", "filter": { "a": 1 }, "hint": hint.clone() })
                .await,
            2,
        );
        assert!(
            message_of(&e).contains("hint provided does not correspond to an existing index"),
            "{e}"
        );
    }
}

#[tokio::test]
async fn coll_mod_hides_and_unhides_an_index_answering_the_old_and_new_state() {
    let t = test_db().await;
    let c = seeded(&t.db, false).await;
    let plan = explain_stage(&t.db, doc! { "a": 3 }).await;
    assert!(find_stage(&plan, "IXSCAN").is_some(), "{plan}");

    let reply =
        t.db.run_command(doc! { "collMod": "c", "index": { "name": "a_1", "hidden": true } })
            .await
            .unwrap();
    assert_eq!(reply.get_bool("hidden_old"), Ok(false), "{reply}");
    assert_eq!(reply.get_bool("hidden_new"), Ok(true), "{reply}");
    assert_eq!(spec(&listed(&c).await, "a_1").get_bool("hidden"), Ok(true));
    let plan = explain_stage(&t.db, doc! { "a": 3 }).await;
    assert!(find_stage(&plan, "COLLSCAN").is_some(), "{plan}");

    // Writes while hidden are in the index when it is shown again.
    c.insert_one(doc! { "_id": 50, "a": 50, "u": 50 })
        .await
        .unwrap();
    let reply =
        t.db.run_command(doc! {
            "collMod": "c", "index": { "keyPattern": { "a": 1 }, "hidden": false },
        })
        .await
        .unwrap();
    assert_eq!(reply.get_bool("hidden_old"), Ok(true), "{reply}");
    assert_eq!(reply.get_bool("hidden_new"), Ok(false), "{reply}");
    assert!(!spec(&listed(&c).await, "a_1").contains_key("hidden"));
    let found: Vec<Document> = c
        .find(doc! { "a": 50 })
        .hint(mongodb::options::Hint::Name("a_1".into()))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
}

#[tokio::test]
async fn coll_mod_refuses_to_hide_the_id_index_or_a_missing_one() {
    let t = test_db().await;
    seeded(&t.db, false).await;
    assert_code(
        t.db.run_command(doc! { "collMod": "c", "index": { "name": "nope", "hidden": true } })
            .await,
        27,
    );
    let e = assert_code(
        t.db.run_command(doc! { "collMod": "c", "index": { "name": "_id_", "hidden": true } })
            .await,
        2,
    );
    assert!(message_of(&e).contains("_id index"), "{e}");
    assert_code(
        t.db.run_command(doc! {
            "createIndexes": "c",
            "indexes": [{ "key": { "_id": 1 }, "name": "_id_h", "hidden": true }],
        })
        .await,
        197,
    );
}

#[tokio::test]
async fn a_hidden_index_stays_hidden_after_a_restart() {
    // Journal replay and snapshots are docstore's own.
    if !is_docstore() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = docstore::Server::start(docstore::Config::persistent(dir.path()))
        .await
        .unwrap();
    let db = client_for(&server.uri()).await.database("shop");
    seeded(&db, false).await;
    db.run_command(doc! { "collMod": "c", "index": { "name": "u_1", "hidden": true } })
        .await
        .unwrap();
    server.shutdown().await;

    let server = docstore::Server::start(docstore::Config::persistent(dir.path()))
        .await
        .unwrap();
    let db = client_for(&server.uri()).await.database("shop");
    let c = db.collection::<Document>("c");
    let specs = listed(&c).await;
    assert_eq!(
        spec(&specs, "u_1").get_bool("hidden"),
        Ok(true),
        "{specs:?}"
    );
    assert!(!spec(&specs, "a_1").contains_key("hidden"), "{specs:?}");
    assert_code(c.insert_one(doc! { "_id": 99, "u": 1 }).await, 11000);
    let plan = explain_stage(&db, doc! { "u": 3 }).await;
    assert!(find_stage(&plan, "COLLSCAN").is_some(), "{plan}");
    server.shutdown().await;
}
