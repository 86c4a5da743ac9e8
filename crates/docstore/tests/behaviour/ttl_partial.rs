//! TTL indexes (expiry by the background monitor, surviving a restart) and partial indexes
//! (accepted filters, uniqueness among matching documents only, use by the planner).

use crate::common::{assert_code, client_for, is_docstore, message_of, test_db};
use bson::{doc, Bson, DateTime, Document};
use docstore::{Config, Server};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, IndexModel};
use std::time::Duration;

fn ago(secs: i64) -> DateTime {
    DateTime::from_millis(DateTime::now().timestamp_millis() - secs * 1000)
}

async fn ids(c: &Collection<Document>) -> Vec<Bson> {
    let mut ids: Vec<Bson> = c
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.get("_id").cloned().unwrap())
        .collect();
    ids.sort_by_key(|b| b.as_i32());
    ids
}

#[tokio::test]
async fn the_ttl_monitor_deletes_expired_documents_and_they_stay_deleted_after_restart() {
    // MongoDB's own monitor runs every 60 s; this test drives docstore's with a 1 s interval.
    if !is_docstore() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        ttl_monitor_interval: Duration::from_secs(1),
        ..Config::persistent(dir.path())
    };
    let server = Server::start(config).await.unwrap();
    let c = client_for(&server.uri())
        .await
        .database("ttl")
        .collection::<Document>("sessions");
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "lastSeen": 1 })
            .options(
                IndexOptions::builder()
                    .expire_after(Duration::from_secs(3600))
                    .build(),
            )
            .build(),
    )
    .await
    .unwrap();
    c.insert_many(vec![
        doc! { "_id": 1, "lastSeen": ago(2 * 3600) },
        doc! { "_id": 2, "lastSeen": ago(60) },
        doc! { "_id": 3, "lastSeen": [ago(-3600), ago(3601)] },
        doc! { "_id": 4, "lastSeen": "two hours ago" },
        doc! { "_id": 5 },
        doc! { "_id": 6, "lastSeen": 0 },
        doc! { "_id": 7, "lastSeen": [DateTime::now()] },
        doc! { "_id": 8, "lastSeen": ago(3700) },
    ])
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let kept: Vec<Bson> = [2, 4, 5, 6, 7].into_iter().map(Bson::Int32).collect();
    assert_eq!(ids(&c).await, kept);
    server.shutdown().await;

    // Restarted with the default 60 s interval, so nothing is swept before we look.
    let server = Server::start(Config::persistent(dir.path())).await.unwrap();
    let c = client_for(&server.uri())
        .await
        .database("ttl")
        .collection::<Document>("sessions");
    assert_eq!(ids(&c).await, kept);
    server.shutdown().await;
}

#[tokio::test]
async fn ttl_options_are_listed_and_invalid_ttl_indexes_are_refused() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("events");
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "at": 1 })
            .options(
                IndexOptions::builder()
                    .expire_after(Duration::from_secs(30))
                    .build(),
            )
            .build(),
    )
    .await
    .unwrap();
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
    let ttl = listed
        .iter()
        .find(|d| d.get_str("name") == Ok("at_1"))
        .expect("the TTL index is listed");
    assert_eq!(ttl.get_document("key").unwrap(), &doc! { "at": 1 });
    assert_eq!(
        ttl.get("expireAfterSeconds")
            .and_then(|v| v.as_i64().or(v.as_i32().map(i64::from))),
        Some(30)
    );

    let compound =
        t.db.run_command(doc! { "createIndexes": "events", "indexes": [
            { "key": { "at": 1, "kind": 1 }, "name": "at_kind", "expireAfterSeconds": 10 },
        ] })
        .await;
    let e = assert_code(compound, 67);
    assert!(
        message_of(&e).starts_with(
            "TTL indexes are single-field indexes, compound indexes do not support TTL."
        ),
        "{e}"
    );
    let on_id =
        t.db.run_command(doc! { "createIndexes": "events", "indexes": [
            { "key": { "_id": 1 }, "name": "_id_ttl", "expireAfterSeconds": 10 },
        ] })
        .await;
    let e = assert_code(on_id, 197);
    assert!(
        message_of(&e).starts_with("The field 'expireAfterSeconds' is not valid for an _id index"),
        "{e}"
    );
}

fn partial(keys: Document, filter: Document, unique: bool) -> IndexModel {
    IndexModel::builder()
        .keys(keys)
        .options(
            IndexOptions::builder()
                .unique(unique)
                .partial_filter_expression(filter)
                .build(),
        )
        .build()
}

#[tokio::test]
async fn a_unique_partial_index_enforces_uniqueness_only_among_matching_documents() {
    let t = test_db().await;
    let users = t.db.collection::<Document>("users");
    users
        .create_index(partial(doc! { "email": 1 }, doc! { "active": true }, true))
        .await
        .unwrap();
    users
        .insert_many(vec![
            doc! { "_id": 1, "email": "a@x", "active": true },
            doc! { "_id": 2, "email": "a@x", "active": false },
            doc! { "_id": 3, "email": "a@x" },
            doc! { "_id": 4, "email": "b@x", "active": true },
        ])
        .await
        .unwrap();
    let dup = users
        .insert_one(doc! { "_id": 5, "email": "a@x", "active": true })
        .await;
    let e = assert_code(dup, 11000);
    assert!(
        message_of(&e).contains("dup key: { email: \"a@x\" }"),
        "{e}"
    );
    // Moving a document into the filter is checked too; moving one out frees its key.
    let into = users
        .update_one(doc! { "_id": 2 }, doc! { "$set": { "active": true } })
        .await;
    assert_code(into, 11000);
    users
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "active": false } })
        .await
        .unwrap();
    users
        .update_one(doc! { "_id": 2 }, doc! { "$set": { "active": true } })
        .await
        .unwrap();
    assert_eq!(
        users
            .count_documents(doc! { "email": "a@x" })
            .await
            .unwrap(),
        3
    );
}

#[tokio::test]
async fn partial_filters_accept_mongodb_operators_and_refuse_the_rest_with_67() {
    let t = test_db().await;
    let c = t.db.collection::<Document>("items");
    for (i, filter) in [
        doc! { "a": { "$exists": true } },
        doc! { "a": { "$gte": 1, "$lt": 5 }, "b": { "$type": "string" } },
        doc! { "$and": [{ "a": 1 }, { "b": { "$gt": 2 } }] },
        doc! { "$or": [{ "a": 1 }, { "b": { "$lte": 2 } }] },
        doc! { "a": { "$in": [1, 2] } },
        doc! { "a": null },
    ]
    .into_iter()
    .enumerate()
    {
        c.create_index(
            IndexModel::builder()
                .keys(doc! { "k": 1 })
                .options(
                    IndexOptions::builder()
                        .name(format!("ok_{i}"))
                        .partial_filter_expression(filter)
                        .build(),
                )
                .build(),
        )
        .await
        .unwrap();
    }
    for (filter, shown) in [
        (doc! { "a": { "$exists": false } }, "$not"),
        (doc! { "a": { "$ne": 1 } }, "$not"),
        (doc! { "$nor": [{ "a": 1 }] }, "$nor"),
        (doc! { "a": { "$regex": "^x" } }, "a regex"),
        (doc! { "a": { "$size": 2 } }, "a $size"),
    ] {
        let result = c
            .create_index(partial(doc! { "k": 1 }, filter.clone(), false))
            .await;
        let e = assert_code(result, 67);
        let message = message_of(&e);
        assert!(
            message.contains(&format!(
                ":: caused by :: Expression not supported in partial index: {shown}"
            )),
            "{filter}: {message}"
        );
    }
    let sparse_and_partial =
        t.db.run_command(doc! { "createIndexes": "items", "indexes": [
            { "key": { "k": 1 }, "name": "both", "sparse": true,
              "partialFilterExpression": { "a": 1 } },
        ] })
        .await;
    assert_code(sparse_and_partial, 67);
}

/// The first stage named `name` anywhere in an explain document.
fn find_stage(v: &Bson, name: &str) -> Option<Document> {
    match v {
        Bson::Document(d) => {
            if d.get_str("stage") == Ok(name) {
                return Some(d.clone());
            }
            d.values().find_map(|x| find_stage(x, name))
        }
        Bson::Array(items) => items.iter().find_map(|x| find_stage(x, name)),
        _ => None,
    }
}

#[tokio::test]
async fn the_planner_uses_a_partial_index_only_for_queries_that_imply_its_filter() {
    let t = test_db().await;
    let orders = t.db.collection::<Document>("orders");
    orders
        .insert_many((0..60).map(|i| {
            doc! { "_id": i, "customer": i % 10, "status": if i % 3 == 0 { "open" } else { "closed" } }
        }))
        .await
        .unwrap();
    orders
        .create_index(partial(
            doc! { "customer": 1 },
            doc! { "status": "open" },
            false,
        ))
        .await
        .unwrap();
    let explain = |filter: Document| {
        let db = t.db.clone();
        async move {
            db.run_command(doc! {
                "explain": { "find": "orders", "filter": filter },
                "verbosity": "queryPlanner",
            })
            .await
            .unwrap()
        }
    };
    let implied = explain(doc! { "customer": 3, "status": "open" }).await;
    let scan = find_stage(&Bson::Document(implied.clone()), "IXSCAN")
        .unwrap_or_else(|| panic!("an index scan: {implied}"));
    assert_eq!(scan.get_str("indexName").unwrap(), "customer_1");
    assert!(scan.get_bool("isPartial").unwrap());
    for filter in [
        doc! { "customer": 3 },
        doc! { "customer": 3, "status": "closed" },
        doc! { "customer": 3, "status": { "$in": ["open", "closed"] } },
    ] {
        let e = explain(filter.clone()).await;
        assert!(
            find_stage(&Bson::Document(e.clone()), "COLLSCAN").is_some(),
            "{filter}: {e}"
        );
    }
    // Results are the same either way; the partial index only changes how they are found.
    let open: Vec<Document> = orders
        .find(doc! { "customer": 3, "status": "open" })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(open.len(), 2);
    let all: Vec<Document> = orders
        .find(doc! { "customer": 3 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all.len(), 6);
    // Hinted, the index answers from the documents it holds: those matching its filter.
    let hinted: Vec<Document> = orders
        .find(doc! {})
        .hint(mongodb::options::Hint::Name("customer_1".into()))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(hinted.len(), 20);
    assert!(hinted.iter().all(|d| d.get_str("status") == Ok("open")));
}
