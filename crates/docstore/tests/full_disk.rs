//! A full (or failing) disk, seen through the official driver: writes are refused with
//! `OutOfDiskSpace` (14031) instead of being acknowledged without a journal, `j: true` writes get
//! an answer instead of hanging, reads keep working, and everything resumes when space returns.
//! The disk is filled with docstore's fault-injection switch, so these tests run anywhere.

use crate::common::{assert_code, client_for, code_of};
use bson::{doc, Document};
use docstore::{Config, DiskFaults, Server};
use mongodb::options::WriteConcern;
use mongodb::Collection;
use std::time::{Duration, Instant};

const OUT_OF_DISK_SPACE: i32 = 14031;
const LOG_WRITE_FAILED: i32 = 42;

fn config(dir: &std::path::Path, faults: &DiskFaults) -> Config {
    Config {
        commit_interval: Duration::from_millis(50),
        disk_faults: Some(faults.clone()),
        ..Config::persistent(dir)
    }
}

fn journaled() -> WriteConcern {
    WriteConcern::builder().journal(true).build()
}

/// Insert with the default write concern until the store refuses; returns the ids it
/// acknowledged and the refusal's code. Panics if it never refuses.
async fn insert_until_refused(c: &Collection<Document>, first_id: i32) -> (Vec<i32>, i32) {
    let mut acknowledged = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    for id in first_id.. {
        match c
            .insert_one(doc! { "_id": id, "pad": "x".repeat(100) })
            .await
        {
            Ok(_) => acknowledged.push(id),
            Err(e) => return (acknowledged, code_of(&e).expect("a server error code")),
        }
        assert!(Instant::now() < deadline, "writes were never refused");
    }
    unreachable!()
}

#[tokio::test]
async fn a_full_disk_refuses_writes_keeps_serving_reads_and_resumes_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let faults = DiskFaults::new();
    let server = Server::start(config(dir.path(), &faults)).await.unwrap();
    let client = client_for(&server.uri()).await;
    let db = client.database("shop");
    let c = db.collection::<Document>("orders");
    c.insert_many((0..100).map(|i| doc! { "_id": i, "pad": "x".repeat(100) }))
        .write_concern(journaled())
        .await
        .unwrap();

    faults.fill_after(0);
    let (acknowledged_while_full, code) = insert_until_refused(&c, 1000).await;
    assert_eq!(code, OUT_OF_DISK_SPACE);
    // Only what was accepted before the failing commit noticed the full disk: one interval (a
    // few hundred writes here; the bound is loose because a loaded machine can delay that
    // commit, and what matters is that refusals start rather than the exact count).
    assert!(
        acknowledged_while_full.len() < 5000,
        "{} writes were acknowledged on a full disk",
        acknowledged_while_full.len()
    );
    // Every kind of write is refused, `j: true` included, with an answer rather than a hang.
    assert_code(
        c.insert_one(doc! { "_id": "j" })
            .write_concern(journaled())
            .await,
        OUT_OF_DISK_SPACE,
    );
    assert_code(
        c.update_one(doc! { "_id": 1 }, doc! { "$set": { "paid": true } })
            .await,
        OUT_OF_DISK_SPACE,
    );
    assert_code(c.delete_one(doc! { "_id": 2 }).await, OUT_OF_DISK_SPACE);
    assert_code(
        db.create_collection("new_one").await.map(|_| ()),
        OUT_OF_DISK_SPACE,
    );

    // Reads and the administrative commands keep answering.
    let expected = 100 + acknowledged_while_full.len() as u64;
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), expected);
    assert!(c.find_one(doc! { "_id": 1 }).await.unwrap().is_some());
    let admin = client.database("admin");
    admin.run_command(doc! { "ping": 1 }).await.unwrap();
    admin.run_command(doc! { "hello": 1 }).await.unwrap();
    let status = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
    let journal = status.get_document("journal").unwrap();
    assert!(!journal.get_bool("writable").unwrap());
    let refused = journal.get_document("writesRefused").unwrap();
    assert_eq!(refused.get_i32("code").unwrap(), OUT_OF_DISK_SPACE);
    assert_eq!(refused.get_str("codeName").unwrap(), "OutOfDiskSpace");
    assert!(refused.get_str("errmsg").unwrap().contains("disk is full"));

    // Space returns: writes resume on their own, with nothing acknowledged lost.
    faults.heal();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c
            .insert_one(doc! { "_id": "after" })
            .write_concern(journaled())
            .await
        {
            Ok(_) => break,
            Err(e) => assert_eq!(code_of(&e), Some(OUT_OF_DISK_SPACE), "{e}"),
        }
        assert!(Instant::now() < deadline, "writes never resumed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
    assert!(status
        .get_document("journal")
        .unwrap()
        .get_bool("writable")
        .unwrap());
    drop(client);
    server.shutdown().await;

    let server = Server::start(Config::persistent(dir.path())).await.unwrap();
    let c = client_for(&server.uri())
        .await
        .database("shop")
        .collection::<Document>("orders");
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), expected + 1);
    for id in acknowledged_while_full {
        assert!(c.find_one(doc! { "_id": id }).await.unwrap().is_some());
    }
    assert!(c.find_one(doc! { "_id": "j" }).await.unwrap().is_none());
    assert!(c.find_one(doc! { "_id": "after" }).await.unwrap().is_some());
}

#[tokio::test]
async fn a_stop_while_the_disk_is_full_keeps_every_journaled_write_and_nothing_refused() {
    let dir = tempfile::tempdir().unwrap();
    let faults = DiskFaults::new();
    let server = Server::start(config(dir.path(), &faults)).await.unwrap();
    let client = client_for(&server.uri()).await;
    let c = client.database("shop").collection::<Document>("orders");
    for i in 0..50 {
        c.insert_one(doc! { "_id": i })
            .write_concern(journaled())
            .await
            .unwrap();
    }
    faults.fill_after(0);
    let (acknowledged_while_full, _) = insert_until_refused(&c, 1000).await;
    let refused = 1000 + acknowledged_while_full.len() as i32;
    drop(client);
    // The disk is still full at shutdown, so its last flush fails too: nothing more reaches
    // the disk, as if the process had been killed.
    server.shutdown().await;

    let server = Server::start(Config::persistent(dir.path())).await.unwrap();
    let c = client_for(&server.uri())
        .await
        .database("shop")
        .collection::<Document>("orders");
    for i in 0..50 {
        assert!(
            c.find_one(doc! { "_id": i }).await.unwrap().is_some(),
            "journaled write {i} was lost"
        );
    }
    assert!(c.find_one(doc! { "_id": refused }).await.unwrap().is_none());
    // At most the writes of the one commit interval before the failure are gone.
    let count = c.count_documents(doc! {}).await.unwrap();
    assert!((50..=50 + acknowledged_while_full.len() as u64).contains(&count));
}

#[tokio::test]
async fn an_io_error_refuses_writes_with_log_write_failed() {
    let dir = tempfile::tempdir().unwrap();
    let faults = DiskFaults::new();
    let server = Server::start(config(dir.path(), &faults)).await.unwrap();
    let c = client_for(&server.uri())
        .await
        .database("shop")
        .collection::<Document>("orders");
    c.insert_one(doc! { "_id": 0 }).await.unwrap();
    faults.fail_with(docstore::faults::EIO);
    let (_, code) = insert_until_refused(&c, 1).await;
    assert_eq!(code, LOG_WRITE_FAILED);
    // Reads still answer.
    assert!(c.find_one(doc! { "_id": 0 }).await.unwrap().is_some());
}

#[tokio::test]
async fn a_journaled_write_waiting_when_the_disk_fails_gets_a_write_concern_error() {
    let dir = tempfile::tempdir().unwrap();
    let faults = DiskFaults::new();
    let server = Server::start(config(dir.path(), &faults)).await.unwrap();
    let client = client_for(&server.uri()).await;
    let c = client.database("shop").collection::<Document>("orders");
    c.insert_one(doc! { "_id": 0 })
        .write_concern(journaled())
        .await
        .unwrap();
    // A slow fsync keeps the next `j: true` write waiting long enough to break the disk under it.
    faults.slow_sync(Duration::from_millis(300));
    let waiting = tokio::spawn({
        let c = c.clone();
        async move {
            c.insert_one(doc! { "_id": 1 })
                .write_concern(journaled())
                .await
        }
    });
    let admin = client.database("admin");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
        let journal = status.get_document("journal").unwrap();
        if journal.get_i64("lastLsn").unwrap() > journal.get_i64("durableLsn").unwrap() {
            break;
        }
        assert!(Instant::now() < deadline, "the write never arrived");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    faults.fail_with(docstore::faults::EIO);
    let err = waiting.await.unwrap().unwrap_err();
    assert!(
        matches!(
            err.kind.as_ref(),
            mongodb::error::ErrorKind::Write(mongodb::error::WriteFailure::WriteConcernError(_))
        ),
        "{err}"
    );
    assert_eq!(code_of(&err), Some(LOG_WRITE_FAILED));
}
