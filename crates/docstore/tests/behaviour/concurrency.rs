//! Many clients at once: atomic increments, job claiming with findAndModify, and a unique index
//! under racing inserts.

use crate::common::{client_for, code_of, test_db};
use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;
use std::collections::HashSet;

/// A separate client (own connection pool) per simulated application instance.
async fn clients(t: &crate::common::TestDb, n: usize) -> Vec<mongodb::Database> {
    let uri = match &t.server {
        Some(s) => s.uri(),
        None => std::env::var("MONGODB_URI").expect("MONGODB_URI"),
    };
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(client_for(&uri).await.database(t.db.name()));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_clients_incrementing_one_document_reach_the_exact_total() {
    let t = test_db().await;
    t.db.collection::<Document>("counters")
        .insert_one(doc! { "_id": "hot", "n": 0 })
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for db in clients(&t, 32).await {
        tasks.push(tokio::spawn(async move {
            let c = db.collection::<Document>("counters");
            for _ in 0..1000 {
                c.update_one(doc! { "_id": "hot" }, doc! { "$inc": { "n": 1 } })
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let doc =
        t.db.collection::<Document>("counters")
            .find_one(doc! {})
            .await
            .unwrap()
            .unwrap();
    assert_eq!(doc.get_i32("n").unwrap(), 32_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_workers_claim_every_job_exactly_once() {
    let t = test_db().await;
    let jobs = t.db.collection::<Document>("jobs");
    jobs.insert_many((0..500).map(|i| doc! { "_id": i, "state": "queued" }))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for (worker, db) in clients(&t, 16).await.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let c = db.collection::<Document>("jobs");
            let mut claimed = Vec::new();
            while let Some(job) = c
                .find_one_and_update(
                    doc! { "state": "queued" },
                    doc! { "$set": { "state": "claimed", "worker": worker as i32 } },
                )
                .await
                .unwrap()
            {
                claimed.push(job.get_i32("_id").unwrap());
            }
            claimed
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    assert_eq!(all.len(), 500, "every job claimed once");
    let unique: HashSet<i32> = all.iter().copied().collect();
    assert_eq!(unique.len(), 500, "no job claimed twice");
    assert_eq!(
        jobs.count_documents(doc! { "state": "queued" })
            .await
            .unwrap(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_inserts_of_one_unique_key_let_exactly_one_win() {
    let t = test_db().await;
    let users = t.db.collection::<Document>("users");
    users
        .create_index(
            IndexModel::builder()
                .keys(doc! { "email": 1 })
                .options(IndexOptions::builder().unique(true).build())
                .build(),
        )
        .await
        .unwrap();
    let racers = clients(&t, 16).await;
    for round in 0..20 {
        let mut tasks = Vec::new();
        for db in racers.clone() {
            tasks.push(tokio::spawn(async move {
                db.collection::<Document>("users")
                    .insert_one(doc! { "email": format!("user{round}@example.com") })
                    .await
            }));
        }
        let mut wins = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(_) => wins += 1,
                Err(e) => assert_eq!(code_of(&e), Some(11000), "{e}"),
            }
        }
        assert_eq!(wins, 1, "round {round}");
    }
    assert_eq!(users.count_documents(doc! {}).await.unwrap(), 20);
}
