//! Durability of the persistent mode: acknowledged writes survive `kill -9` of the `docstore`
//! process, a torn journal tail is detected and set aside at start-up, and damage elsewhere
//! refuses to start until `docstore --repair` salvages it.

use crate::common;
use crate::common::client_for;
use crate::common::process::Process;
use bson::{doc, Document};
use mongodb::options::WriteConcern;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The `shop.items` collection of the server at `uri`, through a new client.
async fn items(uri: &str) -> mongodb::Collection<Document> {
    client_for(uri)
        .await
        .database("shop")
        .collection::<Document>("items")
}

fn journal_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("journal")
        })
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_dash_nine() {
    let dir = tempfile::tempdir().unwrap();
    let p = Process::start(dir.path());
    let client = client_for(&p.uri).await;
    let c = client.database("shop").collection::<Document>("orders");
    c.insert_many((0..2000).map(|i| doc! { "_id": i, "total": i * 10 }))
        .await
        .unwrap();
    c.update_many(
        doc! { "_id": { "$lt": 100 } },
        doc! { "$set": { "paid": true } },
    )
    .await
    .unwrap();
    c.delete_many(doc! { "_id": { "$gte": 1900 } })
        .await
        .unwrap();
    let journaled = WriteConcern::builder().journal(true).build();
    c.insert_one(doc! { "_id": "last", "j": true })
        .write_concern(journaled)
        .await
        .unwrap();
    p.kill();

    let p = Process::start(dir.path());
    let client = client_for(&p.uri).await;
    let c = client.database("shop").collection::<Document>("orders");
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1901);
    assert_eq!(c.count_documents(doc! { "paid": true }).await.unwrap(), 100);
    assert!(c.find_one(doc! { "_id": "last" }).await.unwrap().is_some());
    assert_eq!(
        c.find_one(doc! { "_id": 42 }).await.unwrap().unwrap(),
        doc! { "_id": 42, "total": 420, "paid": true }
    );
}

#[tokio::test]
async fn writes_acknowledged_more_than_a_commit_interval_ago_survive_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let p = Process::start(dir.path());
    let client = client_for(&p.uri).await;
    let c = client.database("shop").collection::<Document>("items");
    for i in 0..200 {
        c.insert_one(doc! { "_id": i }).await.unwrap();
    }
    // Group commit runs every 100 ms; wait well past one interval.
    tokio::time::sleep(Duration::from_millis(500)).await;
    p.kill();
    let p = Process::start(dir.path());
    let c = items(&p.uri).await;
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 200);
}

#[tokio::test]
async fn indexes_survive_a_restart_and_still_enforce_uniqueness() {
    let dir = tempfile::tempdir().unwrap();
    let p = Process::start(dir.path());
    let client = client_for(&p.uri).await;
    let c = client.database("shop").collection::<Document>("users");
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "email": 1 })
            .options(
                mongodb::options::IndexOptions::builder()
                    .unique(true)
                    .build(),
            )
            .build(),
    )
    .await
    .unwrap();
    c.insert_one(doc! { "email": "a@x" })
        .write_concern(WriteConcern::builder().journal(true).build())
        .await
        .unwrap();
    p.kill();
    let p = Process::start(dir.path());
    let c = client_for(&p.uri)
        .await
        .database("shop")
        .collection::<Document>("users");
    let names = c.list_index_names().await.unwrap();
    assert!(names.contains(&"email_1".to_string()), "{names:?}");
    let e = c.insert_one(doc! { "email": "a@x" }).await.unwrap_err();
    assert_eq!(common::code_of(&e), Some(11000));
}

#[tokio::test]
async fn a_torn_journal_tail_is_dropped_and_earlier_writes_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let p = Process::start(dir.path());
    let client = client_for(&p.uri).await;
    let c = client.database("shop").collection::<Document>("items");
    let journaled = WriteConcern::builder().journal(true).build();
    for i in 0..50 {
        c.insert_one(doc! { "_id": i, "pad": "x".repeat(100) })
            .write_concern(journaled.clone())
            .await
            .unwrap();
    }
    p.kill();

    // Simulate a crash in the middle of writing a record: a partial record at the end.
    let newest = journal_files(dir.path())
        .into_iter()
        .rev()
        .find(|f| std::fs::metadata(f).unwrap().len() > 0);
    let newest = newest.expect("a non-empty journal segment");
    // Its first bytes are what a real record starts with: a header, then the payload's length.
    let mut bytes = std::fs::read(&newest).unwrap();
    let torn = bytes[..11].to_vec();
    bytes.extend_from_slice(&torn);
    std::fs::write(&newest, &bytes).unwrap();

    let p = Process::start(dir.path());
    let c = items(&p.uri).await;
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 50);
    // And it keeps accepting writes that survive the next restart.
    c.insert_one(doc! { "_id": 50 })
        .write_concern(journaled.clone())
        .await
        .unwrap();
    p.kill();

    // Now cut the last record in half: that write is lost, all earlier ones are kept.
    let newest = journal_files(dir.path())
        .into_iter()
        .rev()
        .find(|f| std::fs::metadata(f).unwrap().len() > 0);
    let newest = newest.expect("a non-empty journal segment");
    let len = std::fs::metadata(&newest).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&newest)
        .unwrap();
    file.set_len(len - 5).unwrap();
    drop(file);
    let p = Process::start(dir.path());
    let c = items(&p.uri).await;
    let n = c.count_documents(doc! {}).await.unwrap();
    assert_eq!(
        n, 50,
        "the torn last write is dropped, the 50 before it kept"
    );
    drop(p);
}

/// The newest snapshot in `dir` (`snapshot-<n>.db`, and `indexes-<n>.db` for its kept
/// indexes), if any.
fn newest_file(dir: &Path, prefix: &str) -> Option<u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_prefix(prefix)?
                .strip_suffix(".db")?
                .parse::<u64>()
                .ok()
        })
        .max()
}

/// Whether the newest snapshot's indexes are kept (true while there is no snapshot).
fn newest_snapshot_has_kept_indexes(dir: &Path) -> bool {
    match newest_file(dir, "snapshot-") {
        Some(n) => newest_file(dir, "indexes-") == Some(n),
        None => true,
    }
}

/// What the indexed queries of `kept_indexes_...` find: per index, the `_id`s a hinted
/// query returns in index order.
async fn indexed_answers(c: &mongodb::Collection<Document>) -> Vec<Vec<i32>> {
    let mut answers = Vec::new();
    for (hint, filter, sort) in [
        (
            doc! { "n": 1 },
            doc! { "n": { "$gte": 5 } },
            doc! { "n": 1, "_id": 1 },
        ),
        (doc! { "tags": 1 }, doc! { "tags": "t3" }, doc! { "_id": 1 }),
        (doc! { "email": 1 }, doc! {}, doc! { "email": -1 }),
    ] {
        let found = c
            .find(filter)
            .hint(mongodb::options::Hint::Keys(hint))
            .sort(sort)
            .await
            .unwrap();
        answers.push(common::i32_ids(found).await);
    }
    answers
}

/// The kept indexes file of the newest snapshot in `dir` once it is there and does not hold
/// `not` (a damaged copy): it is written in the background after a snapshot, or after a
/// start from a snapshot without one (then with a new snapshot, taken at a write, when the
/// journal after the old one holds writes: `c` gets one every few milliseconds meanwhile).
async fn kept_indexes_file(dir: &Path, c: &mongodb::Collection<Document>, not: &[u8]) -> PathBuf {
    for i in 0..400 {
        // The first snapshot may still be on its way.
        if let Some(snapshot) = newest_file(dir, "snapshot-") {
            let path = dir.join(format!("indexes-{snapshot:016}.db"));
            if newest_file(dir, "indexes-") == Some(snapshot)
                && std::fs::read(&path).is_ok_and(|bytes| bytes != not)
            {
                return path;
            }
        }
        c.insert_one(doc! { "ping": i }).await.unwrap();
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the newest snapshot's indexes were not kept");
}

/// A snapshot's indexes are kept beside it (`indexes-<n>.db`) and a restart loads them:
/// the same answers, uniqueness still enforced. A damaged kept file only means the indexes
/// are built from the documents (and kept again).
#[tokio::test]
async fn kept_indexes_load_at_a_restart_and_a_damaged_file_is_built_again() {
    let dir = tempfile::tempdir().unwrap();
    let config = docstore::Config {
        snapshot_threshold_bytes: 64 * 1024,
        snapshot_journal_percent: 0,
        ..docstore::Config::persistent(dir.path())
    };
    let pings = |uri: &str| {
        let uri = uri.to_string();
        async move {
            client_for(&uri)
                .await
                .database("shop")
                .collection::<Document>("pings")
        }
    };
    let server = docstore::Server::start(config.clone()).await.unwrap();
    let c = items(&server.uri()).await;
    for (keys, unique) in [
        (doc! { "n": 1 }, false),
        (doc! { "tags": 1 }, false),
        (doc! { "email": 1 }, true),
    ] {
        let options = mongodb::options::IndexOptions::builder()
            .unique(unique)
            .build();
        c.create_index(
            mongodb::IndexModel::builder()
                .keys(keys)
                .options(options)
                .build(),
        )
        .await
        .unwrap();
    }
    c.insert_many((0..600).map(|i| {
        doc! {
            "_id": i, "n": i % 11, "tags": [format!("t{}", i % 7), "all"],
            "email": format!("u{i}@x"), "pad": "y".repeat(300),
        }
    }))
    .await
    .unwrap();
    c.delete_many(doc! { "_id": { "$lt": 20 } }).await.unwrap();
    let expected = indexed_answers(&c).await;
    assert_eq!(expected[2].len(), 580);
    let kept = kept_indexes_file(dir.path(), &pings(&server.uri()).await, &[]).await;
    server.shutdown().await;
    assert!(
        kept.exists(),
        "a short journal writes no snapshot at shutdown"
    );

    let answers_after_a_restart = || async {
        let server = docstore::Server::start(config.clone()).await.unwrap();
        let c = items(&server.uri()).await;
        assert_eq!(indexed_answers(&c).await, expected);
        let e = c
            .insert_one(doc! { "_id": 1000, "email": "u30@x" })
            .await
            .unwrap_err();
        assert_eq!(common::code_of(&e), Some(11000));
        server
    };
    answers_after_a_restart().await.shutdown().await;

    let mut damaged = std::fs::read(&kept).unwrap();
    let mid = damaged.len() / 2;
    damaged[mid] ^= 0x20;
    std::fs::write(&kept, &damaged).unwrap();
    let server = answers_after_a_restart().await;
    // Kept again: for the same snapshot when nothing was written since, else with a new one.
    let again = kept_indexes_file(dir.path(), &pings(&server.uri()).await, &damaged).await;
    assert!(
        again == kept || !kept.exists(),
        "a damaged file is replaced or goes"
    );
    server.shutdown().await;
    answers_after_a_restart().await.shutdown().await;
}

#[tokio::test]
async fn snapshots_compact_the_journal_and_restore_everything() {
    let dir = tempfile::tempdir().unwrap();
    let config = docstore::Config {
        snapshot_threshold_bytes: 256 * 1024,
        ..docstore::Config::persistent(dir.path())
    };
    let server = docstore::Server::start(config.clone()).await.unwrap();
    let c = items(&server.uri()).await;
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "n": 1 }).build())
        .await
        .unwrap();
    // Rewrite the same documents many times: far more journal than live data.
    c.insert_many((0..500).map(|i| doc! { "_id": i, "n": 0, "pad": "y".repeat(200) }))
        .await
        .unwrap();
    for round in 1..=20 {
        c.update_many(doc! {}, doc! { "$set": { "n": round } })
            .await
            .unwrap();
    }
    c.delete_many(doc! { "_id": { "$gte": 400 } })
        .await
        .unwrap();
    server.shutdown().await;

    let journal_bytes: u64 = journal_files(dir.path())
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert!(
        journal_bytes < 2 * 1024 * 1024,
        "journal was compacted, {journal_bytes} bytes left"
    );
    let snapshots = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("snapshot")
        })
        .count();
    assert!(snapshots >= 1);

    let server = docstore::Server::start(config).await.unwrap();
    let c = items(&server.uri()).await;
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 400);
    assert_eq!(c.count_documents(doc! { "n": 20 }).await.unwrap(), 400);
    assert!(c
        .list_index_names()
        .await
        .unwrap()
        .contains(&"n_1".to_string()));
    server.shutdown().await;
}

/// A store larger than the snapshot threshold is not rewritten every threshold's worth of
/// journal: the next snapshot waits until the journal is as large as the last snapshot
/// (`Config::snapshot_journal_percent`, 100 by default), and everything still survives a
/// restart. With the share at 0 (a fixed threshold) the same writes take many more snapshots.
#[tokio::test]
async fn a_store_larger_than_the_threshold_is_snapshotted_once_the_journal_matches_its_size() {
    let with_share = snapshots_taken_by_growing_a_store(100).await;
    let fixed = snapshots_taken_by_growing_a_store(0).await;
    // About 1.4 MB of journal: a fixed 64 kB threshold snapshots some 20 times; growing by the
    // store's own size from 64 kB (64, 128, 256, 512 kB, 1 MB) about 5 times, and once more at
    // shutdown.
    assert!(
        with_share <= 8,
        "{with_share} snapshots with the share, {fixed} without"
    );
    assert!(fixed >= 15, "{fixed} snapshots with a fixed threshold");
}

/// Grow a store to about 1.4 MB of documents in 48 inserts with a 64 kB snapshot threshold and
/// `journal_percent`, each insert waiting for a snapshot it started to finish; restart it and
/// check every document is there. Returns how many snapshots were taken (each one rotates the
/// journal, and the newest snapshot is named after the segment it started).
async fn snapshots_taken_by_growing_a_store(journal_percent: u64) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let config = docstore::Config {
        snapshot_threshold_bytes: 64 * 1024,
        snapshot_journal_percent: journal_percent,
        ..docstore::Config::persistent(dir.path())
    };
    let server = docstore::Server::start(config.clone()).await.unwrap();
    let c = items(&server.uri()).await;
    for batch in 0..48 {
        c.insert_many((0..100).map(|i| doc! { "_id": batch * 100 + i, "pad": "y".repeat(240) }))
            .await
            .unwrap();
        // A snapshot under way leaves two journal segments until it deletes the older one,
        // then keeps its indexes; waiting for it keeps a busy snapshot thread from skipping
        // one (the count is exact).
        let waited = std::time::Instant::now();
        while (journal_files(dir.path()).len() > 1 || !newest_snapshot_has_kept_indexes(dir.path()))
            && waited.elapsed() < Duration::from_secs(10)
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    server.shutdown().await;
    let newest = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_prefix("snapshot-")?
                .strip_suffix(".db")?
                .parse::<u64>()
                .ok()
        })
        .max()
        .expect("a snapshot was written");

    let server = docstore::Server::start(config).await.unwrap();
    let c = items(&server.uri()).await;
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 4_800);
    server.shutdown().await;
    // Segment 1 is the first; each snapshot starts the next.
    newest - 1
}

/// Start offsets of the records in a journal segment (`[u32 length][u32 crc][payload]`).
#[tokio::test]
async fn a_clean_shutdown_after_a_long_journal_leaves_a_snapshot_to_start_from() {
    let dir = tempfile::tempdir().unwrap();
    // Far above what the writes below journal, so no snapshot is taken while they run.
    let config = docstore::Config {
        snapshot_threshold_bytes: 1024 * 1024,
        ..docstore::Config::persistent(dir.path())
    };
    let snapshots = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                let name = name.to_string_lossy();
                name.starts_with("snapshot") && name.ends_with(".db")
            })
            .count()
    };
    let server = docstore::Server::start(config.clone()).await.unwrap();
    let c = items(&server.uri()).await;
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "n": 1 }).build())
        .await
        .unwrap();
    // About 250 kB of journal: more than an eighth of the threshold, less than all of it.
    c.insert_many((0..1000).map(|i| doc! { "_id": i, "n": i % 7, "pad": "y".repeat(200) }))
        .await
        .unwrap();
    // Gaps in the record ids: the kept entries are renumbered as a load numbers documents.
    c.delete_many(doc! { "_id": { "$lt": 10 } }).await.unwrap();
    c.insert_one(doc! { "_id": 1000, "n": 3 }).await.unwrap();
    assert_eq!(snapshots(dir.path()), 0, "no snapshot before the shutdown");
    server.shutdown().await;
    assert_eq!(snapshots(dir.path()), 1, "the shutdown wrote a snapshot");
    assert!(
        newest_snapshot_has_kept_indexes(dir.path())
            && newest_file(dir.path(), "indexes-").is_some(),
        "the shutdown kept its indexes beside it"
    );

    // The next start has nothing to replay and finds every document and index.
    let server = docstore::Server::start(config.clone()).await.unwrap();
    let c = items(&server.uri()).await;
    assert_eq!(c.count_documents(doc! { "n": 3 }).await.unwrap(), 143);
    let by_n = common::i32_ids(
        c.find(doc! { "n": 3 })
            .hint(mongodb::options::Hint::Keys(doc! { "n": 1 }))
            .sort(doc! { "n": 1, "_id": 1 })
            .await
            .unwrap(),
    )
    .await;
    let expected: Vec<i32> = (10..1000).filter(|i| i % 7 == 3).chain([1000]).collect();
    assert_eq!(
        by_n, expected,
        "the kept n_1 index finds the same documents"
    );
    assert!(c
        .list_index_names()
        .await
        .unwrap()
        .contains(&"n_1".to_string()));
    // A few writes journal too little for another snapshot at shutdown.
    c.insert_one(doc! { "_id": 5000, "n": 3 }).await.unwrap();
    server.shutdown().await;
    assert_eq!(snapshots(dir.path()), 1);
    let server = docstore::Server::start(config).await.unwrap();
    let c = items(&server.uri()).await;
    assert_eq!(c.count_documents(doc! { "n": 3 }).await.unwrap(), 144);
    server.shutdown().await;
}

fn record_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut off = 0;
    while off + 8 <= bytes.len() {
        starts.push(off);
        off += 8 + u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
    }
    starts
}

#[tokio::test]
async fn damage_mid_journal_refuses_to_start_and_docstore_repair_reports_it_and_the_store_starts() {
    let dir = tempfile::tempdir().unwrap();
    let p = Process::start(dir.path());
    let client = client_for(&p.uri).await;
    let c = client.database("shop").collection::<Document>("items");
    let journaled = WriteConcern::builder().journal(true).build();
    for i in 0..300 {
        c.insert_one(doc! { "_id": i, "pad": "x".repeat(50) })
            .write_concern(journaled.clone())
            .await
            .unwrap();
    }
    p.kill();

    // Four bytes of 0xff over a length field in the middle of the journal, as in a bad sector.
    let segment = journal_files(dir.path())
        .into_iter()
        .find(|f| std::fs::metadata(f).unwrap().len() > 0)
        .expect("a non-empty journal segment");
    let mut bytes = std::fs::read(&segment).unwrap();
    let starts = record_starts(&bytes);
    let at = starts[starts.len() / 2];
    bytes[at..at + 4].copy_from_slice(&[0xff; 4]);
    std::fs::write(&segment, &bytes).unwrap();

    let docstore = env!("CARGO_BIN_EXE_docstore");
    let dbpath = dir.path().to_str().unwrap();
    let refused = std::process::Command::new(docstore)
        .args(["--dbpath", dbpath, "--port", "0"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains(&segment.display().to_string()), "{stderr}");
    assert!(
        stderr.contains(&format!("damaged at byte {at}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{} intact records",
            starts.len() - starts.len() / 2 - 1
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("docstore --repair --dbpath {dbpath}")),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&segment).unwrap(),
        bytes,
        "nothing was cut off"
    );

    let repaired = std::process::Command::new(docstore)
        .args(["--repair", "--dbpath", dbpath])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&repaired.stdout);
    assert!(repaired.status.success(), "{report}");
    let next = starts[starts.len() / 2 + 1];
    assert!(
        report.contains(&format!("LOST: {} bytes {at}..{next}", next - at)),
        "{report}"
    );
    assert!(report.contains("1 record ("), "{report}");
    assert!(report.contains("put shop.items _id"), "{report}");
    assert!(report.contains("fresh snapshot"), "{report}");

    // The repaired store starts and holds every write but the one in the damaged record.
    let p = Process::start(dir.path());
    let c = items(&p.uri).await;
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 299);
    assert!(c.find_one(doc! { "_id": 299 }).await.unwrap().is_some());
}
