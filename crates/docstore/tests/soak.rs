//! Soak test: 64 concurrent connections of mixed operations against the `docstore` binary in
//! persistent mode for `SOAK_SECONDS` (default 10), then `kill -9`, restart and a full check.

use crate::common::process::Process;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::{ClientOptions, FindOptions, ReturnDocument, WriteConcern};
use mongodb::{Client, Collection, IndexModel};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Driver clients and their pool sizes: 4 × 16 = 64 connections.
const CLIENTS: usize = 4;
const POOL_PER_CLIENT: u32 = 16;
const WORKERS: usize = CLIENTS * POOL_PER_CLIENT as usize;
/// Jobs per soak second in the shared queue that `findAndModify` claims (more than the
/// workers claim, so the queue never runs dry).
const JOBS_PER_SECOND: u64 = 2_000;

async fn client(uri: &str, pool: u32) -> Client {
    let mut options = ClientOptions::parse(uri).await.expect("valid URI");
    options.max_pool_size = Some(pool);
    options.min_pool_size = Some(pool);
    options.server_selection_timeout = Some(Duration::from_secs(10));
    Client::with_options(options).expect("client options")
}

/// Small deterministic PRNG (xorshift64*): each worker replays the same choices for a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one worker knows it wrote: its own documents (only it touches them) and its claims.
#[derive(Default)]
struct Expected {
    docs: BTreeMap<i64, Document>,
    claims: Vec<i64>,
}

/// Everything the workers count: operations done and errors seen (with the first messages).
#[derive(Default)]
struct Tally {
    ops: AtomicU64,
    errors: AtomicU64,
    messages: Mutex<Vec<String>>,
    /// Per kind of operation: count, total and worst latency.
    latency: Mutex<BTreeMap<&'static str, (u64, Duration, Duration)>>,
}

impl Tally {
    fn record(&self, kind: &'static str, took: Duration) {
        let mut l = self.latency.lock().unwrap();
        let e = l.entry(kind).or_default();
        e.0 += 1;
        e.1 += took;
        e.2 = e.2.max(took);
    }

    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut m = self.messages.lock().unwrap();
        if m.len() < 20 {
            m.push(what);
        }
    }
}

/// The sort the indexed query uses, applied to the worker's own expectation.
fn top_scores(expected: &Expected, group: i32) -> Vec<Document> {
    let mut docs: Vec<&Document> = expected
        .docs
        .values()
        .filter(|d| d.get_i32("group") == Ok(group))
        .collect();
    docs.sort_by(|a, b| {
        let (sa, sb) = (a.get_f64("score").unwrap(), b.get_f64("score").unwrap());
        sb.total_cmp(&sa)
            .then_with(|| a.get_i64("_id").unwrap().cmp(&b.get_i64("_id").unwrap()))
    });
    docs.into_iter().take(20).cloned().collect()
}

/// One worker: a loop of random operations on its own documents and the shared job queue,
/// checking every answer against what it knows.
async fn worker(
    w: usize,
    items: Collection<Document>,
    jobs: Collection<Document>,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> Expected {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1).wrapping_mul(0xFF51_AFD7_ED55_8CCD));
    let mut expected = Expected::default();
    let mut next_n: i64 = 0;
    let base = w as i64 * 1_000_000_000;
    while !stop.load(Ordering::Relaxed) {
        let ids: Vec<i64> = expected.docs.keys().copied().collect();
        let pick = |rng: &mut Rng| {
            ids.get(rng.below(ids.len().max(1) as u64) as usize)
                .copied()
        };
        // Past a few hundred documents inserts turn into deletes, so a long soak stays steady.
        let choice = match rng.below(100) {
            c @ 0..=29 if expected.docs.len() >= 300 => 90 + c % 10,
            c => c,
        };
        let kind = match choice {
            0..=29 => "insert",
            30..=44 => "find by _id",
            45..=59 => "indexed find",
            60..=64 => "cursor",
            65..=79 => "update",
            80..=89 => "claim",
            _ => "delete",
        };
        let began = Instant::now();
        let result: Result<(), String> = async {
            match choice {
                // Insert.
                0..=29 => {
                    let id = base + next_n;
                    next_n += 1;
                    let d = doc! {
                        "_id": id,
                        "w": w as i64,
                        "group": (id % 10) as i32,
                        "score": (rng.below(10_000) as f64) / 10.0,
                        "counter": 0,
                        "tags": [],
                    };
                    items
                        .insert_one(d.clone())
                        .await
                        .map_err(|e| e.to_string())?;
                    expected.docs.insert(id, d);
                }
                // Find by _id.
                30..=44 => {
                    if let Some(id) = pick(&mut rng) {
                        let got = items
                            .find_one(doc! { "_id": id })
                            .await
                            .map_err(|e| e.to_string())?;
                        if got.as_ref() != expected.docs.get(&id) {
                            return Err(format!("find _id {id}: got {got:?}"));
                        }
                    }
                }
                // Indexed equality with sort and limit.
                45..=59 => {
                    let group = rng.below(10) as i32;
                    let got: Vec<Document> = items
                        .find(doc! { "w": w as i64, "group": group })
                        .sort(doc! { "score": -1, "_id": 1 })
                        .limit(20)
                        .await
                        .map_err(|e| e.to_string())?
                        .try_collect()
                        .await
                        .map_err(|e| e.to_string())?;
                    if got != top_scores(&expected, group) {
                        return Err(format!("top scores of group {group} differ"));
                    }
                }
                // A cursor over several getMore batches.
                60..=64 => {
                    let options = FindOptions::builder()
                        .batch_size(7)
                        .sort(doc! { "_id": 1 })
                        .build();
                    let got: Vec<Document> = items
                        .find(doc! { "w": w as i64 })
                        .with_options(options)
                        .await
                        .map_err(|e| e.to_string())?
                        .try_collect()
                        .await
                        .map_err(|e| e.to_string())?;
                    let want: Vec<Document> = expected.docs.values().cloned().collect();
                    if got != want {
                        return Err(format!(
                            "cursor returned {} documents, expected {}",
                            got.len(),
                            want.len()
                        ));
                    }
                }
                // $inc and $push (the array kept short with $slice).
                65..=79 => {
                    if let Some(id) = pick(&mut rng) {
                        let tag = rng.below(1000) as i64;
                        let r = items
                            .update_one(
                                doc! { "_id": id },
                                doc! {
                                    "$inc": { "counter": 1 },
                                    "$push": { "tags": { "$each": [tag], "$slice": -5 } },
                                },
                            )
                            .await
                            .map_err(|e| e.to_string())?;
                        if r.matched_count != 1 || r.modified_count != 1 {
                            return Err(format!("update of {id}: {r:?}"));
                        }
                        let d = expected.docs.get_mut(&id).expect("picked from the map");
                        let counter = d.get_i32("counter").unwrap() + 1;
                        d.insert("counter", counter);
                        let tags = d.get_array_mut("tags").unwrap();
                        tags.push(Bson::Int64(tag));
                        if tags.len() > 5 {
                            tags.remove(0);
                        }
                    }
                }
                // findAndModify: claim a job from the shared queue.
                80..=89 => {
                    let claimed = jobs
                        .find_one_and_update(
                            doc! { "state": "new" },
                            doc! { "$set": { "state": "claimed", "by": w as i64 } },
                        )
                        .sort(doc! { "_id": 1 })
                        .return_document(ReturnDocument::After)
                        .await
                        .map_err(|e| e.to_string())?;
                    if let Some(job) = claimed {
                        if job.get_i64("by") != Ok(w as i64) {
                            return Err(format!("claimed job {job:?} is not ours"));
                        }
                        expected.claims.push(job.get_i64("_id").unwrap());
                    }
                }
                // Delete.
                _ => {
                    if let Some(id) = pick(&mut rng) {
                        let r = items
                            .delete_one(doc! { "_id": id })
                            .await
                            .map_err(|e| e.to_string())?;
                        if r.deleted_count != 1 {
                            return Err(format!("delete of {id}: {r:?}"));
                        }
                        expected.docs.remove(&id);
                    }
                }
            }
            Ok(())
        }
        .await;
        tally.ops.fetch_add(1, Ordering::Relaxed);
        tally.record(kind, began.elapsed());
        if let Err(e) = result {
            tally.error(format!("worker {w} op {choice}: {e}"));
        }
    }
    expected
}

fn env_seconds() -> u64 {
    std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_connections_of_mixed_load_lose_nothing_and_memory_stays_bounded() {
    let seconds = env_seconds();
    let dir = tempfile::tempdir().unwrap();
    let process = Process::start(dir.path());

    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(client(&process.uri, POOL_PER_CLIENT).await);
    }
    let db = clients[0].database("soak");
    let items = db.collection::<Document>("items");
    let jobs = db.collection::<Document>("jobs");
    items
        .create_index(
            IndexModel::builder()
                .keys(doc! { "w": 1, "group": 1, "score": -1 })
                .build(),
        )
        .await
        .unwrap();
    // {state, _id} serves the claim's filter and sort together; with {state} alone every claim
    // sorts all open jobs (docstore has no multi-planner to prefer the _id index instead).
    jobs.create_index(
        IndexModel::builder()
            .keys(doc! { "state": 1, "_id": 1 })
            .build(),
    )
    .await
    .unwrap();
    let job_docs: Vec<Document> = (0..(JOBS_PER_SECOND * seconds) as i64)
        .map(|i| doc! { "_id": i, "state": "new" })
        .collect();
    for chunk in job_docs.chunks(5000) {
        jobs.insert_many(chunk.to_vec()).await.unwrap();
    }

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let c = &clients[w % CLIENTS];
        let db = c.database("soak");
        tasks.push(tokio::spawn(worker(
            w,
            db.collection("items"),
            db.collection("jobs"),
            Arc::clone(&stop),
            Arc::clone(&tally),
        )));
    }

    // Warm-up: pools filled, caches and buffers at their working size.
    let warm_up = Duration::from_secs((seconds / 5).clamp(1, 10));
    let started = Instant::now();
    tokio::time::sleep(warm_up).await;
    let rss_start = process.rss_bytes();
    tokio::time::sleep(Duration::from_secs(seconds).saturating_sub(warm_up)).await;
    stop.store(true, Ordering::Relaxed);
    let mut expected = Vec::new();
    for t in tasks {
        expected.push(t.await.expect("worker task"));
    }
    let elapsed = started.elapsed();
    let rss_end = process.rss_bytes();
    let ops = tally.ops.load(Ordering::Relaxed);
    let errors = tally.errors.load(Ordering::Relaxed);
    let owned: usize = expected.iter().map(|e| e.docs.len()).sum();
    let claims: usize = expected.iter().map(|e| e.claims.len()).sum();
    println!(
        "soak: {ops} operations in {:.1} s ({:.0}/s) over {WORKERS} connections, {errors} errors; \
         {owned} documents, {claims} jobs claimed; RSS after warm-up {:.1} MiB, at end {:.1} MiB",
        elapsed.as_secs_f64(),
        ops as f64 / elapsed.as_secs_f64(),
        rss_start as f64 / 1048576.0,
        rss_end as f64 / 1048576.0,
    );
    for (kind, (n, total, worst)) in tally.latency.lock().unwrap().iter() {
        println!(
            "  {kind:>12}: {n:>7} ops, mean {:>8.2} ms, worst {:>8.2} ms",
            total.as_secs_f64() * 1000.0 / *n as f64,
            worst.as_secs_f64() * 1000.0
        );
    }
    assert_eq!(
        errors,
        0,
        "errors during the soak: {:#?}",
        tally.messages.lock().unwrap()
    );
    assert!(ops > WORKERS as u64, "the workers did almost nothing");
    assert!(
        rss_end < rss_start * 3 + 200 * 1024 * 1024,
        "RSS grew from {rss_start} to {rss_end} bytes"
    );

    // One journaled write makes every earlier acknowledged write durable; then crash.
    items
        .insert_one(doc! { "_id": "marker" })
        .write_concern(WriteConcern::builder().journal(true).build())
        .await
        .unwrap();
    drop(clients);
    process.kill();

    let process = Process::start(dir.path());
    let c = client(&process.uri, 4).await;
    let items = c.database("soak").collection::<Document>("items");
    let jobs = c.database("soak").collection::<Document>("jobs");
    assert!(items
        .find_one(doc! { "_id": "marker" })
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        items.count_documents(doc! {}).await.unwrap(),
        owned as u64 + 1
    );
    for (w, e) in expected.iter().enumerate() {
        let got: Vec<Document> = items
            .find(doc! { "w": w as i64 })
            .sort(doc! { "_id": 1 })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let want: Vec<Document> = e.docs.values().cloned().collect();
        assert_eq!(got, want, "documents of worker {w} after the restart");
    }
    assert_eq!(
        jobs.count_documents(doc! { "state": "claimed" })
            .await
            .unwrap(),
        claims as u64
    );
    for (w, e) in expected.iter().enumerate() {
        let mut claimed: Vec<i64> = jobs
            .find(doc! { "by": w as i64 })
            .await
            .unwrap()
            .try_collect::<Vec<Document>>()
            .await
            .unwrap()
            .iter()
            .map(|d| d.get_i64("_id").unwrap())
            .collect();
        claimed.sort_unstable();
        let mut want = e.claims.clone();
        want.sort_unstable();
        assert_eq!(
            claimed, want,
            "jobs claimed by worker {w} after the restart"
        );
    }
}
