//! Operations per second through the official driver against an in-process docstore, with 1 and
//! 16 concurrent clients, and the indexed query at 10 k and 500 k documents.
//!
//! `cargo bench -p docstore` (set `BENCH_SECONDS` for the length of each run, default 2;
//! `BENCH_LARGE` for the large collection size, default 500000; `BENCH_PERSISTENT=1` to run
//! on a data directory instead of in memory). Each figure is the median of three runs.
//!
//! The group-commit table always runs on a data directory: concurrent inserts with the default
//! write concern beside the same with `j: true`, and how many writers shared each fsync.
//! `BENCH_GROUP_COMMIT_ONLY=1` runs only that table.

use bson::{doc, Document};
use docstore::{Config, Server};
use mongodb::options::{ClientOptions, WriteConcern};
use mongodb::{Client, Collection, IndexModel};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn client(uri: &str, pool: u32) -> Client {
    let mut o = ClientOptions::parse(uri).await.unwrap();
    o.max_pool_size = Some(pool);
    Client::with_options(o).unwrap()
}

/// Run `op` from `clients` tasks for `seconds`; returns operations per second.
async fn measure<F, Fut>(clients: usize, seconds: f64, op: F) -> f64
where
    F: Fn(u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..clients {
        let op = op.clone();
        let done = Arc::clone(&done);
        tasks.push(tokio::spawn(async move {
            let mut i = worker as u64 * 1_000_000_000;
            while Instant::now() < deadline {
                op(i).await;
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

async fn median_of_three<F, Fut>(clients: usize, seconds: f64, op: F) -> f64
where
    F: Fn(u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(measure(clients, seconds, op.clone()).await);
    }
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    runs[1]
}

async fn fill(c: &Collection<Document>, n: u64) {
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "cat": 1, "ts": -1 })
            .build(),
    )
    .await
    .unwrap();
    let mut next = 0u64;
    while next < n {
        let batch: Vec<Document> = (next..(next + 10_000).min(n))
            .map(|i| doc! { "_id": i as i64, "cat": (i % 500) as i64, "ts": i as i64, "name": format!("item {i}") })
            .collect();
        next += batch.len() as u64;
        c.insert_many(batch).await.unwrap();
    }
}

/// Inserts per second with `j: false` and `j: true` side by side, on a fresh data directory,
/// and the writes each fsync carried (from the store's commit counter).
async fn group_commit_table(seconds: f64) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Config::persistent(dir.path())).await.unwrap();
    let client = client(&server.uri(), 128).await;
    let c = client.database("bench").collection::<Document>("journaled");
    println!("group commit on a data directory: inserts/s (median of 3), writes per fsync");
    println!(
        "{:<10} {:>12} {:>12} {:>16}",
        "clients", "j: false", "j: true", "j:true per fsync"
    );
    // The journal's group-commit counter, as `serverStatus` reports it.
    let admin = client.database("admin");
    let commits = move || {
        let admin = admin.clone();
        async move {
            let status = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
            let journal = status.get_document("journal").unwrap();
            match journal.get("commits") {
                Some(bson::Bson::Int32(n)) => *n as u64,
                Some(bson::Bson::Int64(n)) => *n as u64,
                _ => 0,
            }
        }
    };
    for clients in [1usize, 16, 64] {
        let mut figures = [0.0; 2];
        let mut per_fsync = 0.0;
        for (slot, journal) in [false, true].into_iter().enumerate() {
            let concern = WriteConcern::builder().journal(journal).build();
            let c = c.clone();
            let before = commits().await;
            let ops = Arc::new(AtomicU64::new(0));
            let counted = Arc::clone(&ops);
            figures[slot] = median_of_three(clients, seconds, move |i| {
                let (c, concern, counted) = (c.clone(), concern.clone(), Arc::clone(&counted));
                async move {
                    c.insert_one(doc! { "i": i as i64, "name": "order" })
                        .write_concern(concern)
                        .await
                        .unwrap();
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            })
            .await;
            if journal {
                let fsyncs = commits().await.saturating_sub(before).max(1);
                per_fsync = ops.load(Ordering::Relaxed) as f64 / fsyncs as f64;
            }
        }
        println!(
            "{:<10} {:>12.0} {:>12.0} {:>16.1}",
            clients, figures[0], figures[1], per_fsync
        );
    }
    server.shutdown().await;
    println!();
}

#[tokio::main]
async fn main() {
    let seconds: f64 = env_or("BENCH_SECONDS", 2.0);
    let large: u64 = env_or("BENCH_LARGE", 500_000);
    if std::env::var("BENCH_GROUP_COMMIT_ONLY").is_ok() {
        group_commit_table(seconds).await;
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = if std::env::var("BENCH_PERSISTENT").is_ok() {
        Config::persistent(dir.path())
    } else {
        Config::in_memory()
    };
    let server = Server::start(config).await.unwrap();
    let uri = server.uri();
    let client = client(&uri, 32).await;
    let db = client.database("bench");
    println!(
        "docstore throughput via the mongodb driver ({}s runs, median of 3)",
        seconds
    );
    println!(
        "{:<44} {:>12} {:>12}",
        "operation", "1 client", "16 clients"
    );

    let items = db.collection::<Document>("items");
    fill(&items, 10_000).await;
    let hot = db.collection::<Document>("hot");
    hot.insert_one(doc! { "_id": "hot", "n": 0i64 })
        .await
        .unwrap();
    let inserts = db.collection::<Document>("inserts");

    let mut rows: Vec<(&str, [f64; 2])> = Vec::new();
    for (name, which) in [
        ("insert (one small document)", 0),
        ("find by _id", 1),
        ("indexed equality + sort + limit 20 (10k)", 2),
        ("$inc on one hot document", 3),
        ("findAndModify ($inc, return new)", 4),
    ] {
        let mut figures = [0.0; 2];
        for (slot, clients) in [1usize, 16].into_iter().enumerate() {
            let (items, hot, inserts) = (items.clone(), hot.clone(), inserts.clone());
            figures[slot] = median_of_three(clients, seconds, move |i| {
                let (items, hot, inserts) = (items.clone(), hot.clone(), inserts.clone());
                async move {
                    match which {
                        0 => {
                            inserts
                                .insert_one(doc! { "i": i as i64, "name": "widget" })
                                .await
                                .unwrap();
                        }
                        1 => {
                            let id = (i.wrapping_mul(2654435761) % 10_000) as i64;
                            items.find_one(doc! { "_id": id }).await.unwrap().unwrap();
                        }
                        2 => {
                            let cat = (i.wrapping_mul(2654435761) % 500) as i64;
                            let mut cur = items
                                .find(doc! { "cat": cat })
                                .sort(doc! { "ts": -1 })
                                .limit(20)
                                .await
                                .unwrap();
                            let mut n = 0;
                            while cur.advance().await.unwrap() {
                                n += 1;
                            }
                            assert_eq!(n, 20);
                        }
                        3 => {
                            hot.update_one(doc! { "_id": "hot" }, doc! { "$inc": { "n": 1 } })
                                .await
                                .unwrap();
                        }
                        _ => {
                            hot.find_one_and_update(
                                doc! { "_id": "hot" },
                                doc! { "$inc": { "n": 1 } },
                            )
                            .return_document(mongodb::options::ReturnDocument::After)
                            .await
                            .unwrap();
                        }
                    }
                }
            })
            .await;
        }
        println!("{:<44} {:>12.0} {:>12.0}", name, figures[0], figures[1]);
        rows.push((name, figures));
    }

    println!();
    group_commit_table(seconds).await;
    println!("indexed equality + sort + limit 20 as the collection grows (1 client):");
    // Both sizes are loaded first and measured in alternation, so load from other processes on
    // this shared machine hits both alike.
    let small = db.collection::<Document>("scale_small");
    let big = db.collection::<Document>("scale_big");
    for (c, n) in [(&small, 10_000u64), (&big, large)] {
        let load = Instant::now();
        fill(c, n).await;
        let explain = db
            .run_command(doc! {
                "explain": { "find": c.name(), "filter": { "cat": 7i64 }, "sort": { "ts": -1 }, "limit": 20 },
                "verbosity": "executionStats",
            })
            .await
            .unwrap();
        let examined = explain
            .get_document("executionStats")
            .and_then(|s| s.get_i64("totalDocsExamined"))
            .unwrap_or(-1);
        println!(
            "{:>10} documents loaded in {:.1}s; documents examined per query: {}",
            n,
            load.elapsed().as_secs_f64(),
            examined
        );
    }
    let (mut small_runs, mut big_runs) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        for (c, runs) in [(&small, &mut small_runs), (&big, &mut big_runs)] {
            let c = c.clone();
            runs.push(
                measure(1, seconds / 2.0, move |i| {
                    let c = c.clone();
                    async move {
                        let cat = (i.wrapping_mul(2654435761) % 500) as i64;
                        let mut cur = c
                            .find(doc! { "cat": cat })
                            .sort(doc! { "ts": -1 })
                            .limit(20)
                            .await
                            .unwrap();
                        while cur.advance().await.unwrap() {}
                    }
                })
                .await,
            );
        }
    }
    let median = |runs: &mut Vec<f64>| {
        runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        runs[runs.len() / 2]
    };
    let (s_rate, b_rate) = (median(&mut small_runs), median(&mut big_runs));
    println!(
        "{:>10} documents: {:>10.0} ops/s (median of 5 alternating runs)",
        10_000, s_rate
    );
    println!(
        "{:>10} documents: {:>10.0} ops/s (median of 5 alternating runs)",
        large, b_rate
    );
    println!("ratio 10k / {}: {:.2}", large, s_rate / b_rate);
    server.shutdown().await;
}
