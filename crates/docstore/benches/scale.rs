//! Scale: indexed query latency at 10 k and 1 M documents, memory per document, and start-up
//! (journal replay, then snapshot load) time for the largest size.
//!
//! `cargo bench -p docstore --bench scale`. `SCALE_DOCS` sets the sizes (comma-separated,
//! default `10000,1000000`; the largest is used for the start-up figures), `SCALE_QUERIES` the
//! number of timed queries per size (default 2000).

use bson::{doc, Document};
use docstore::{Config, Server, ServerHandle};
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection, IndexModel};
use std::path::Path;
use std::time::{Duration, Instant};

/// Categories: the equality matches `n / CATEGORIES` documents, 20 or more at every size, so
/// each query returns the same 20 and only the collection size changes.
const CATEGORIES: u64 = 250;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sizes() -> Vec<u64> {
    let raw = std::env::var("SCALE_DOCS").unwrap_or_else(|_| "10000,1000000".to_string());
    let mut sizes: Vec<u64> = raw
        .split(',')
        .filter_map(|s| s.trim().replace('_', "").parse().ok())
        .filter(|&n| n > 0)
        .collect();
    if sizes.is_empty() {
        sizes = vec![10_000, 1_000_000];
    }
    sizes
}

/// Resident set size of this process in bytes (`VmRSS` in `/proc/self/status`).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

async fn client(uri: &str) -> Client {
    let mut o = ClientOptions::parse(uri).await.unwrap();
    o.max_pool_size = Some(8);
    Client::with_options(o).unwrap()
}

/// Loads `n` small documents (index on `{cat: 1, price: 1}`) in batches of 10 000; returns the
/// load time.
async fn load(c: &Collection<Document>, n: u64) -> Duration {
    c.create_index(
        IndexModel::builder()
            .keys(doc! { "cat": 1, "price": 1 })
            .build(),
    )
    .await
    .unwrap();
    let start = Instant::now();
    let mut next = 0u64;
    while next < n {
        let batch: Vec<Document> = (next..(next + 10_000).min(n))
            .map(|i| {
                doc! {
                    "_id": i as i64,
                    "cat": (i % CATEGORIES) as i64,
                    "price": (i.wrapping_mul(2_654_435_761) % 100_000) as i64,
                    "name": format!("item {i}"),
                }
            })
            .collect();
        next += batch.len() as u64;
        c.insert_many(batch).await.unwrap();
    }
    start.elapsed()
}

/// Latencies of `queries` sequential indexed equality + sort + limit 20 queries (after 20
/// untimed warm-up queries).
async fn query_latencies(c: &Collection<Document>, n: u64, queries: u64) -> Vec<Duration> {
    let expected = (n / CATEGORIES).min(20);
    let mut times = Vec::with_capacity(queries as usize);
    for i in 0..queries + 20 {
        let cat = (i.wrapping_mul(2_654_435_761) % CATEGORIES) as i64;
        let start = Instant::now();
        let mut cursor = c
            .find(doc! { "cat": cat })
            .sort(doc! { "price": 1 })
            .limit(20)
            .await
            .unwrap();
        let mut got = 0;
        while cursor.advance().await.unwrap() {
            got += 1;
        }
        if i >= 20 {
            times.push(start.elapsed());
        }
        assert_eq!(got, expected, "query for category {cat}");
    }
    times
}

fn percentile(times: &mut [Duration], q: f64) -> Duration {
    times.sort();
    times[((times.len() as f64 * q) as usize).min(times.len() - 1)]
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Starts a server with `config` and waits until a `ping` succeeds; returns the handle, the
/// start-up time, and how long the directory stayed locked after the previous `shutdown`.
async fn timed_start(config: Config) -> (ServerHandle, Duration, Duration) {
    // `shutdown` does not wait for a snapshot still being written in the background, and that
    // thread keeps the directory's LOCK until it finishes: wait for it, and report the wait.
    let waiting = Instant::now();
    let (server, start) = loop {
        let start = Instant::now();
        match Server::start(config.clone()).await {
            Ok(server) => break (server, start),
            Err(e) if e.to_string().contains("LOCK") && waiting.elapsed().as_secs() < 600 => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("restart failed: {e}"),
        }
    };
    let locked = start - waiting;
    let c = client(&server.uri()).await;
    c.database("admin")
        .run_command(doc! { "ping": 1 })
        .await
        .unwrap();
    (server, start.elapsed(), locked)
}

/// Loads `n` documents into a persistent server with `config`, shuts it down, and times the
/// restart; returns (load time, data directory size, start-up time, lock wait).
async fn restart_figures(
    n: u64,
    snapshot_threshold: Option<u64>,
) -> (Duration, u64, Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        let mut config = Config::persistent(dir.path());
        if let Some(t) = snapshot_threshold {
            config.snapshot_threshold_bytes = t;
        }
        config
    };
    let server = Server::start(config()).await.unwrap();
    let c = client(&server.uri()).await;
    let loaded = load(&c.database("bench").collection("items"), n).await;
    drop(c);
    server.shutdown().await;
    let size = dir_bytes(dir.path());
    let (server, took, locked) = timed_start(config()).await;
    let c = client(&server.uri()).await;
    let count = c
        .database("bench")
        .collection::<Document>("items")
        .estimated_document_count()
        .await
        .unwrap();
    assert_eq!(count, n, "documents after the restart");
    drop(c);
    server.shutdown().await;
    (loaded, size, took, locked)
}

#[tokio::main]
async fn main() {
    let sizes = sizes();
    let queries: u64 = env_or("SCALE_QUERIES", 2000);
    println!("docstore scale (in-process server, official driver, {queries} timed queries/size)");
    println!(
        "{:>10} {:>10} {:>12} {:>12} {:>14} {:>16}",
        "documents", "load (s)", "p50 (µs)", "p99 (µs)", "RSS/doc (B)", "keys/docs exam."
    );
    // Every size lives in one server and the timed queries alternate between sizes in rounds,
    // so load from other processes on this shared machine falls on all sizes alike.
    let server = Server::start(Config::in_memory()).await.unwrap();
    let c = client(&server.uri()).await;
    let db = c.database("bench");
    let mut loaded = Vec::new();
    for &n in &sizes {
        let items = db.collection::<Document>(&format!("items_{n}"));
        let before = rss_bytes();
        let took = load(&items, n).await;
        let per_doc = rss_bytes().saturating_sub(before) as f64 / n as f64;
        loaded.push((n, items, took, per_doc, Vec::new()));
    }
    const ROUNDS: u64 = 5;
    for _ in 0..ROUNDS {
        for (n, items, _, _, samples) in loaded.iter_mut() {
            samples.extend(query_latencies(items, *n, queries / ROUNDS).await);
        }
    }
    let mut p50s = Vec::new();
    for (n, items, took, per_doc, samples) in loaded.iter_mut() {
        let explained = db
            .run_command(doc! {
                "explain": {
                    "find": items.name(),
                    "filter": { "cat": 7 },
                    "sort": { "price": 1 },
                    "limit": 20,
                },
                "verbosity": "executionStats",
            })
            .await
            .unwrap();
        let stats = explained.get_document("executionStats").ok();
        let examined = |field: &str| {
            stats
                .and_then(|s| s.get(field))
                .map(|v| v.to_string())
                .unwrap_or_else(|| "?".to_string())
        };
        let examined = format!(
            "{}/{}",
            examined("totalKeysExamined"),
            examined("totalDocsExamined")
        );
        let p50 = percentile(samples, 0.5);
        let p99 = percentile(samples, 0.99);
        println!(
            "{:>10} {:>10.1} {:>12.0} {:>12.0} {:>14.0} {:>16}",
            n,
            took.as_secs_f64(),
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6,
            per_doc,
            examined
        );
        p50s.push((*n, p50));
    }
    if let (Some((small, a)), Some((large, b))) = (p50s.first(), p50s.last()) {
        if small != large {
            println!(
                "p50 ratio {large}/{small}: {:.2}",
                b.as_secs_f64() / a.as_secs_f64()
            );
        }
    }
    db.drop().await.unwrap();
    drop(loaded);
    drop(c);
    server.shutdown().await;

    let n = sizes.iter().copied().max().unwrap_or(1_000_000);
    println!();
    println!("start-up with {n} documents on disk (persistent mode, restart until ping):");
    for (label, threshold) in [
        ("journal only (no snapshot)", u64::MAX),
        ("snapshots (threshold 4 MiB)", 4 * 1024 * 1024),
    ] {
        let (loaded, size, took, locked) = restart_figures(n, Some(threshold)).await;
        println!(
            "  {label:<28} load {:.1} s, {:.0} MiB on disk, start-up {:.2} s \
             (directory still locked {:.2} s after shutdown)",
            loaded.as_secs_f64(),
            mib(size),
            took.as_secs_f64(),
            locked.as_secs_f64()
        );
    }
    println!("  process RSS now: {:.0} MiB", mib(rss_bytes()));
}
