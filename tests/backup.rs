//! Backups, restores and migrates: a backup taken while shoppers check out restores to one point
//! in time; `bazaar backup` reaches a running Bazaar; a damaged backup restores nothing; an
//! interrupted migrate resumes to an identical copy; scheduled backups rotate and show in admin.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::shop::*;
use crate::common::*;
use bazaar::backup::migrate::{migrate, MigrateOptions, MigrateOutcome, TargetMode};
use bazaar::backup::{backup_to, collection_checksum, collection_names, restore_embedded};
use bazaar::clock::SteppedClock;
use bazaar::db::{Db, Store};
use bson::{doc, Document};
use futures::{AsyncWriteExt, TryStreamExt};
use mongodb::options::GridFsBucketOptions;

const SKUS: [&str; 3] = ["b-a", "b-b", "b-c"];
const STOCK: i64 = 40;
/// Small GridFS chunks, so every upload spans several chunk documents.
const CHUNK: u32 = 1024;

fn embedded_env(path: &Path) -> Vec<(String, String)> {
    vec![
        ("BAZAAR_DATABASE__URI".into(), "embedded".into()),
        (
            "BAZAAR_DATABASE__PATH".into(),
            path.to_string_lossy().into_owned(),
        ),
        ("BAZAAR_SERVER__WORKERS".into(), "4".into()),
    ]
}

fn settings_for(path: &Path) -> bazaar::config::Settings {
    let env = embedded_env(path);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    test_settings(&env)
}

/// A docstore opened on a data directory, and a `Db` on it.
async fn open_store(path: &Path) -> (docstore::ServerHandle, Db) {
    let handle = docstore::Server::start(docstore::Config::persistent(path))
        .await
        .expect("the restored store opens");
    let db = Db::connect(
        &handle.uri(),
        "bazaar",
        Duration::from_secs(5),
        Store::EmbeddedDirectory(path.to_path_buf()),
    )
    .await
    .expect("connect");
    (handle, db)
}

/// Upload files into the `assets` bucket until told to stop; returns how many.
async fn upload_files(db: Db, stop: Arc<AtomicBool>) -> u32 {
    let bucket = db.database().gridfs_bucket(
        GridFsBucketOptions::builder()
            .bucket_name("assets".to_string())
            .chunk_size_bytes(CHUNK)
            .build(),
    );
    let mut n = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let mut upload = bucket
            .open_upload_stream(format!("file-{n}"))
            .await
            .expect("upload opens");
        let bytes: Vec<u8> = (0..(CHUNK as usize * 3 + 100))
            .map(|i| (i as u32 + n) as u8)
            .collect();
        upload.write_all(&bytes).await.expect("upload writes");
        upload.close().await.expect("upload closes");
        n += 1;
    }
    n
}

/// Pairs of writes in two collections: a `ledger` entry, then its writer's `tally`. At any
/// single point in time each tally is its ledger count or one less; a copy that read `ledger`
/// and `tally` at different moments under load would not be.
async fn keep_a_ledger(db: Db, writer: i32, stop: Arc<AtomicBool>) -> i64 {
    let ledger = db.collection::<Document>("ledger");
    let tally = db.collection::<Document>("tally");
    let mut n = 0i64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        ledger
            .insert_one(doc! {"writer": writer, "n": n})
            .await
            .expect("ledger insert");
        tally
            .update_one(doc! {"_id": writer}, doc! {"$set": {"n": n}})
            .upsert(true)
            .await
            .expect("tally update");
    }
    n
}

async fn shop_until_stopped(shopper: Shopper, stop: Arc<AtomicBool>, seed: usize) {
    let mut i = seed;
    while !stop.load(Ordering::Relaxed) {
        let sku = SKUS[i % SKUS.len()];
        shopper.add(sku, "1").await;
        if i.is_multiple_of(2) {
            let status = shopper.checkout("4242424242424242").await.status();
            assert!(!status.is_server_error(), "checkout answered {status}");
        }
        i += 1;
    }
}

/// Every stored file has all its chunks (GridFS writes chunks first, then the file document).
async fn assert_files_complete(db: &Db) -> usize {
    let files: Vec<Document> = db
        .collection::<Document>("assets.files")
        .find(doc! {})
        .await
        .expect("files")
        .try_collect()
        .await
        .expect("files");
    for file in &files {
        let number = |key: &str| match file.get(key) {
            Some(bson::Bson::Int64(n)) => *n as u64,
            Some(bson::Bson::Int32(n)) => *n as u64,
            other => panic!("{key} is {other:?}"),
        };
        let (length, chunk) = (number("length"), number("chunkSize"));
        let chunks = db
            .collection::<Document>("assets.chunks")
            .count_documents(doc! {"files_id": file.get("_id").cloned().expect("_id")})
            .await
            .expect("count chunks");
        assert_eq!(chunks, length.div_ceil(chunk), "file {file:?} lacks chunks");
    }
    files.len()
}

async fn assert_ledger_consistent(db: &Db) -> usize {
    let tallies: Vec<Document> = db
        .collection::<Document>("tally")
        .find(doc! {})
        .await
        .expect("tally")
        .try_collect()
        .await
        .expect("tally");
    for tally in &tallies {
        let writer = tally.get_i32("_id").expect("writer");
        let n = tally.get_i64("n").expect("n");
        let entries = db
            .collection::<Document>("ledger")
            .count_documents(doc! {"writer": writer})
            .await
            .expect("ledger count") as i64;
        assert!(
            n == entries || n == entries - 1,
            "writer {writer}: tally {n} but {entries} ledger entries: the backup is torn"
        );
    }
    tallies.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_taken_during_checkouts_restores_every_collection_as_of_one_moment() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let app = spawn_with_settings(settings_for(&tmp.path().join("data"))).await;
    for sku in SKUS {
        product_with_stock(&app.db, sku, STOCK).await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut shoppers = Vec::new();
    for seed in 0..6 {
        let shopper = Shopper::new(&app).await;
        shoppers.push(tokio::spawn(shop_until_stopped(
            shopper,
            Arc::clone(&stop),
            seed,
        )));
    }
    let uploads = tokio::spawn(upload_files(app.db.clone(), Arc::clone(&stop)));
    let ledgers: Vec<_> = (0..3)
        .map(|w| tokio::spawn(keep_a_ledger(app.db.clone(), w, Arc::clone(&stop))))
        .collect();

    // Let the load build up, then back up twice while it runs.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let first = tmp.path().join("backup-1");
    let report = backup_to(&app.db, &first)
        .await
        .expect("backup while serving");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let second = tmp.path().join("backup-2");
    backup_to(&app.db, &second).await.expect("second backup");
    stop.store(true, Ordering::Relaxed);
    for shopper in shoppers {
        shopper.await.expect("shopper finished");
    }
    let uploaded = uploads.await.expect("uploads");
    for ledger in ledgers {
        ledger.await.expect("ledger");
    }
    assert!(uploaded > 0 && report.documents > 0, "no load ran");
    app.stop().await;

    for (i, backup) in [first, second].iter().enumerate() {
        let restored = tmp.path().join(format!("restored-{i}"));
        let outcome = restore_embedded(backup, &restored, false)
            .await
            .expect("restore");
        assert!(outcome.verified_manifest);
        let manifest = docstore::dump::verify_dump(backup).expect("manifest");
        let (handle, db) = open_store(&restored).await;
        let names = collection_names(db.database()).await.expect("names");
        for name in [
            "orders",
            "carts",
            "products",
            "assets.files",
            "assets.chunks",
            "ledger",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
        }
        // Every collection is exactly what the backup's point in time held.
        for entry in &manifest.collections {
            let (count, sum) = collection_checksum(db.database(), &entry.collection)
                .await
                .expect("checksum");
            assert_eq!(count, entry.documents, "{}", entry.collection);
            assert_eq!(sum, entry.bson_sha256, "{}", entry.collection);
        }
        assert_eq!(manifest.collections.len(), names.len());
        // The moment may hold a stock move between its writes (a product's `pending` entry):
        // the restored app's recovery job finishes it (`stock::recover_pending`), as this does,
        // before the units add up.
        bazaar::stock::recover_pending(&db, Duration::ZERO)
            .await
            .expect("pending moves finished");
        for sku in SKUS {
            assert_stock_invariant(&db, sku, STOCK).await;
        }
        assert!(assert_files_complete(&db).await > 0);
        assert_eq!(assert_ledger_consistent(&db).await, 3);
        db.client().clone().shutdown().await;
        handle.shutdown().await;
    }
}

#[tokio::test]
async fn an_interrupted_migrate_resumes_and_ends_identical_to_the_source() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let app = spawn_with_settings(settings_for(&tmp.path().join("data"))).await;
    // Demo data (products, categories, content, photos in GridFS) plus a larger collection.
    let bulk: Vec<Document> = (0..2500)
        .map(|i| doc! {"n": i, "text": format!("row {i}")})
        .collect();
    app.db
        .collection::<Document>("bulk")
        .insert_many(bulk)
        .await
        .expect("bulk");
    app.db
        .collection::<Document>("bulk")
        .create_index(mongodb::IndexModel::builder().keys(doc! {"n": -1}).build())
        .await
        .expect("index");

    let target = docstore::Server::start(docstore::Config::persistent(tmp.path().join("target")))
        .await
        .expect("the target server starts");
    let target_uri = format!("{}migrated", target.uri());
    let source = app.db.database();
    let mut options = MigrateOptions {
        target_uri: target_uri.clone(),
        mode: TargetMode::Fresh,
        batch: 200,
        max_batches: Some(7),
        progress: false,
    };
    let outcome = migrate(source, &options).await.expect("first part");
    let MigrateOutcome::Paused { copied, remaining } = outcome else {
        panic!("expected a pause, got {outcome:?}");
    };
    assert!(
        copied > 0 && remaining > 0,
        "{copied} copied, {remaining} to go"
    );

    // Without --resume or --force a non-empty target is refused.
    options.max_batches = None;
    let err = migrate(source, &options).await.unwrap_err();
    assert!(format!("{err:#}").contains("--resume"), "{err:#}");

    options.mode = TargetMode::Resume;
    let outcome = migrate(source, &options).await.expect("resumed");
    let MigrateOutcome::Complete { documents, .. } = outcome else {
        panic!("expected completion, got {outcome:?}");
    };
    assert_eq!(documents, copied + remaining);

    // Checked independently of migrate's own verification.
    let client = mongodb::Client::with_uri_str(target.uri())
        .await
        .expect("client");
    let copy = client.database("migrated");
    let names = collection_names(source).await.expect("names");
    assert_eq!(collection_names(&copy).await.expect("names"), names);
    assert!(names.iter().any(|n| n.ends_with(".chunks")), "{names:?}");
    for name in &names {
        assert_eq!(
            collection_checksum(source, name).await.expect("source"),
            collection_checksum(&copy, name).await.expect("target"),
            "{name}"
        );
    }
    let indexes = bazaar::backup::index_specs(&copy, "bulk")
        .await
        .expect("indexes");
    assert!(
        indexes.iter().any(|i| i.get_str("name") == Ok("n_-1")),
        "{indexes:?}"
    );

    // Starting over with --force gives the same copy.
    options.mode = TargetMode::Force;
    options.batch = 5000;
    assert!(matches!(
        migrate(source, &options).await.expect("forced"),
        MigrateOutcome::Complete { .. }
    ));
    client.shutdown().await;
    target.shutdown().await;
    app.stop().await;
}

#[tokio::test]
async fn scheduled_backups_rotate_and_the_system_page_shows_the_last_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let backups = tmp.path().join("backups");
    let mut settings = settings_for(&tmp.path().join("data"));
    settings.backup.every = Some(Duration::from_secs(3600));
    settings.backup.keep = 2;
    settings.backup.dir = backups.clone();
    let app = bazaar::startup::Application::build(settings)
        .await
        .expect("the app starts");
    let monitor = app.backup_monitor();
    let db = app.db().clone();
    let port = app.port();
    let handle = app.server_handle();
    let task = tokio::spawn(app.run_until_stopped());
    // The schedule's first backup runs at start-up.
    let deadline = Instant::now() + Duration::from_secs(30);
    while monitor.status().last_success.is_none() {
        assert!(Instant::now() < deadline, "no scheduled backup was written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        monitor.run_once(&db).await.expect("backup");
    }
    let kept: Vec<_> = std::fs::read_dir(&backups)
        .expect("backups")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    for dir in &kept {
        docstore::dump::verify_dump(dir).expect("a kept backup verifies");
    }
    assert!(monitor.status().warning().is_none());
    // After a restart the last backup is found on disk.
    let restarted = bazaar::backup::schedule::BackupMonitor::new(bazaar::config::BackupSettings {
        every: Some(Duration::from_secs(3600)),
        keep: 2,
        dir: backups.clone(),
    });
    assert_eq!(
        restarted.status().last_success,
        monitor.status().last_success
    );

    let client = reqwest::Client::new();
    let page = client
        .get(format!("http://127.0.0.1:{port}/admin/system"))
        .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
        .send()
        .await
        .expect("system page");
    let page = html(&body(page).await);
    let last = texts(&page, ".backups .backup-last").join(" ");
    assert!(last.contains(" · "), "{last}");
    assert_eq!(count(&page, ".backups .backup-warning"), 0);

    // A backup that cannot be written is a failure the System page warns about.
    std::fs::write(tmp.path().join("in-the-way"), b"a file").expect("file");
    let mut broken = settings_for(&tmp.path().join("unused"));
    broken.backup.dir = tmp.path().join("in-the-way");
    broken.backup.every = Some(Duration::from_secs(3600));
    let failing = bazaar::backup::schedule::BackupMonitor::new(broken.backup);
    assert!(failing.run_once(&db).await.is_err());
    assert!(failing
        .status()
        .warning()
        .expect("warning")
        .contains("failed"));

    handle.stop(true).await;
    task.await.expect("joins").expect("ran cleanly");
}

#[tokio::test]
async fn the_system_page_warns_when_scheduled_backups_are_off() {
    let app = spawn_app().await;
    let page = html(&body(app.get_admin("/admin/system").await).await);
    let warning = texts(&page, ".backups .backup-warning").join(" ");
    assert!(warning.contains("off"), "{warning}");
    app.stop().await;
}

// ---- the command line ----

const BAZAAR: &str = env!("CARGO_BIN_EXE_bazaar");

fn bazaar(args: &[&str], data: &Path) -> Command {
    let mut command = Command::new(BAZAAR);
    command.args(args).current_dir(repo_root());
    for (name, _) in std::env::vars() {
        if name.starts_with("BAZAAR_") {
            command.env_remove(name);
        }
    }
    command
        .env("BAZAAR_LOG__LEVEL", "warn")
        .env("BAZAAR_DATABASE__URI", "embedded")
        .env("BAZAAR_DATABASE__PATH", data)
        .env_remove("RUST_LOG");
    command
}

fn run(command: &mut Command) -> (bool, String) {
    let output = command.output().expect("bazaar runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

// Multi-threaded: the commands run blocking while this runtime serves the migrate's target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bazaar_backup_reaches_a_running_bazaar_and_restore_checks_before_writing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let port = free_port();
    let mut server = bazaar(&[], &data)
        .env("BAZAAR_SERVER__PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("bazaar starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .is_err()
    {
        assert!(server.try_wait().expect("wait").is_none(), "bazaar exited");
        assert!(Instant::now() < deadline, "bazaar did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let backup = tmp.path().join("backup");
    let (ok, out) = run(bazaar(&["backup", backup.to_str().unwrap()], &data).stdin(Stdio::null()));
    assert!(ok, "{out}");
    assert!(out.contains("verified"), "{out}");
    let manifest = docstore::dump::verify_dump(&backup).expect("a verified backup");
    assert!(manifest
        .entry("bazaar", "products")
        .is_some_and(|e| e.documents > 0));
    // A second backup into the same directory is refused rather than mixed in.
    let (ok, out) = run(&mut bazaar(&["backup", backup.to_str().unwrap()], &data));
    assert!(!ok && out.contains("not empty"), "{out}");
    // Restoring over the data directory of a running Bazaar is refused, even with --force.
    let (ok, out) = run(&mut bazaar(
        &["restore", backup.to_str().unwrap(), "--force"],
        &data,
    ));
    assert!(!ok && out.contains("in use"), "{out}");

    let killed = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "bazaar did not stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!data.join(bazaar::backup::attach::ADDRESS_FILE).exists());

    // Into a fresh directory: restored, and the same checksums as the backup.
    let fresh = tmp.path().join("fresh");
    let (ok, out) = run(&mut bazaar(&["restore", backup.to_str().unwrap()], &fresh));
    assert!(ok, "{out}");
    let (handle, db) = open_store(&fresh).await;
    for entry in &manifest.collections {
        let (count, sum) = collection_checksum(db.database(), &entry.collection)
            .await
            .expect("checksum");
        assert_eq!((count, sum), (entry.documents, entry.bson_sha256.clone()));
    }
    db.client().clone().shutdown().await;
    handle.shutdown().await;

    // A non-empty directory needs --force; its old files are moved aside, not deleted.
    let (ok, out) = run(&mut bazaar(&["restore", backup.to_str().unwrap()], &fresh));
    assert!(!ok && out.contains("--force"), "{out}");

    // `bazaar migrate` from the restored store to another server, in two steps.
    let target = docstore::Server::start(docstore::Config::in_memory())
        .await
        .expect("target starts");
    let to = format!("{}moved", target.uri());
    let step = [
        "migrate",
        "--to",
        to.as_str(),
        "--batch",
        "20",
        "--max-batches",
        "2",
    ];
    let (ok, out) = run(&mut bazaar(&step, &fresh));
    assert!(ok && out.contains("--resume"), "{out}");
    let (ok, out) = run(&mut bazaar(&step, &fresh));
    assert!(!ok && out.contains("already holds collections"), "{out}");
    let (ok, out) = run(&mut bazaar(&["migrate", "--to", &to, "--resume"], &fresh));
    assert!(ok && out.contains("verified"), "{out}");
    let client = mongodb::Client::with_uri_str(target.uri())
        .await
        .expect("client");
    for entry in &manifest.collections {
        let (count, sum) = collection_checksum(&client.database("moved"), &entry.collection)
            .await
            .expect("checksum");
        assert_eq!((count, sum), (entry.documents, entry.bson_sha256.clone()));
    }
    client.shutdown().await;
    target.shutdown().await;

    // --force moves the old files aside and keeps the session key, so sessions survive.
    std::fs::write(fresh.join("session.key"), b"a-session-key").expect("key");
    let (ok, out) = run(&mut bazaar(
        &["restore", backup.to_str().unwrap(), "--force"],
        &fresh,
    ));
    assert!(ok && out.contains("previous data"), "{out}");
    assert_eq!(
        std::fs::read(fresh.join("session.key")).expect("key"),
        b"a-session-key"
    );

    // One flipped byte: a clear message, and nothing restored.
    let products = backup.join("bazaar/products.bson");
    let mut bytes = std::fs::read(&products).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&products, &bytes).expect("write");
    let untouched = tmp.path().join("untouched");
    let (ok, out) = run(&mut bazaar(
        &["restore", backup.to_str().unwrap()],
        &untouched,
    ));
    assert!(!ok, "{out}");
    assert!(
        out.contains("damaged") && out.contains("products.bson"),
        "{out}"
    );
    assert!(!untouched.exists());
    let siblings: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("tmp")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("untouched"))
        .collect();
    assert!(siblings.is_empty(), "{siblings:?}");
}

#[tokio::test]
async fn an_external_mongodb_is_backed_up_and_restored_through_the_driver() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let source = docstore::Server::start(docstore::Config::in_memory())
        .await
        .expect("source starts");
    let db = Db::connect(
        &source.uri(),
        "shop",
        Duration::from_secs(5),
        Store::External(source.uri()),
    )
    .await
    .expect("connect");
    let items: Vec<Document> = (0..300)
        .map(|i| doc! {"_id": i, "sku": format!("s{i}")})
        .collect();
    db.collection::<Document>("items")
        .insert_many(items)
        .await
        .expect("insert");
    db.collection::<Document>("items")
        .create_index(
            mongodb::IndexModel::builder()
                .keys(doc! {"sku": 1})
                .options(
                    mongodb::options::IndexOptions::builder()
                        .unique(true)
                        .build(),
                )
                .build(),
        )
        .await
        .expect("index");
    let backup = tmp.path().join("backup");
    let report = backup_to(&db, &backup).await.expect("logical backup");
    assert_eq!((report.collections, report.documents), (1, 300));
    let manifest = docstore::dump::verify_dump(&backup).expect("verified");

    let target = docstore::Server::start(docstore::Config::in_memory())
        .await
        .expect("target starts");
    let client = mongodb::Client::with_uri_str(target.uri())
        .await
        .expect("client");
    let restored = bazaar::backup::restore_through_driver(&client, &backup, false)
        .await
        .expect("restore");
    assert_eq!(restored.documents, 300);
    let copy = client.database("shop");
    let (count, sum) = collection_checksum(&copy, "items").await.expect("checksum");
    let entry = manifest.entry("shop", "items").expect("entry");
    assert_eq!((count, sum), (entry.documents, entry.bson_sha256.clone()));
    let indexes = bazaar::backup::index_specs(&copy, "items")
        .await
        .expect("indexes");
    assert!(indexes
        .iter()
        .any(|i| i.get_str("name") == Ok("sku_1") && i.get_bool("unique") == Ok(true)));
    // A second restore finds the database non-empty and refuses without --force.
    let err = bazaar::backup::restore_through_driver(&client, &backup, false)
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("--force"), "{err:#}");
    bazaar::backup::restore_through_driver(&client, &backup, true)
        .await
        .expect("forced restore");
    client.shutdown().await;
    db.client().clone().shutdown().await;
    target.shutdown().await;
    source.shutdown().await;
}

#[tokio::test]
async fn create_backup_needs_the_admin_database_and_an_absolute_new_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = docstore::Server::start(docstore::Config::in_memory())
        .await
        .expect("starts");
    let client = mongodb::Client::with_uri_str(server.uri())
        .await
        .expect("client");
    client
        .database("shop")
        .collection::<Document>("items")
        .insert_one(doc! {"_id": 1})
        .await
        .expect("insert");
    let command = |db: &str, dir: &str| {
        let database = client.database(db);
        let dir = dir.to_string();
        async move {
            database
                .run_command(doc! {"createBackup": 1, "backupDir": dir})
                .await
        }
    };
    let err = command("admin", "relative/dir").await.unwrap_err();
    assert!(err.to_string().contains("absolute"), "{err}");
    let dir = tmp.path().join("b");
    let err = command("shop", dir.to_str().unwrap()).await.unwrap_err();
    assert!(err.to_string().contains("admin database"), "{err}");
    let reply = command("admin", dir.to_str().unwrap())
        .await
        .expect("backup");
    assert_eq!(reply.get_i64("documents"), Ok(1));
    let err = command("admin", dir.to_str().unwrap()).await.unwrap_err();
    assert!(err.to_string().contains("not empty"), "{err}");
    client.shutdown().await;
    server.shutdown().await;
}

// ---- scheduled backups shared by several instances; private files ----

use bazaar::backup::rotation::{self, Marker};
use bazaar::backup::schedule::BackupMonitor;

/// An in-memory store with some orders, and a `Db` on it: one database several schedulers share.
async fn shared_store() -> (docstore::ServerHandle, Db) {
    let handle = docstore::Server::start(docstore::Config::in_memory())
        .await
        .expect("the store starts");
    let db = Db::connect(
        &handle.uri(),
        "bazaar",
        Duration::from_secs(5),
        Store::EmbeddedMemory,
    )
    .await
    .expect("connect");
    let orders: Vec<Document> = (0..50).map(|i| doc! {"_id": i, "total": i * 100}).collect();
    db.collection::<Document>("orders")
        .insert_many(orders)
        .await
        .expect("orders");
    (handle, db)
}

async fn close_store(handle: docstore::ServerHandle, db: Db) {
    db.client().clone().shutdown().await;
    handle.shutdown().await;
}

/// A scheduler as the instance `instance` would run it.
fn scheduler(dir: &Path, every: Duration, keep: usize, instance: &str) -> Arc<BackupMonitor> {
    BackupMonitor::with_owner(
        bazaar::config::BackupSettings {
            every: Some(every),
            keep,
            dir: dir.to_path_buf(),
        },
        instance,
    )
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the backup directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn sequences_in(dir: &Path) -> Vec<Option<i64>> {
    rotation::completed_backups(dir)
        .iter()
        .map(|c| c.sequence)
        .collect()
}

const INSTANCES: [&str; 3] = ["shop1/101/aaaaaa", "shop2/102/bbbbbb", "shop3/103/cccccc"];

/// All three schedulers check at once; returns how many wrote a backup.
async fn tick_all(schedulers: &[Arc<BackupMonitor>], db: &Db) -> usize {
    let (a, b, c) = tokio::join!(
        schedulers[0].tick(db),
        schedulers[1].tick(db),
        schedulers[2].tick(db)
    );
    [a, b, c]
        .into_iter()
        .map(|r| r.expect("a check never fails here"))
        .filter(Option::is_some)
        .count()
}

#[tokio::test]
async fn three_schedulers_on_one_database_write_one_backup_per_period() {
    let (store, db) = shared_store().await;
    let clock = Arc::new(SteppedClock::default());
    let db = db.with_clock(clock.clone());
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("backups");
    let every = Duration::from_secs(3);
    let schedulers: Vec<_> = INSTANCES
        .iter()
        .map(|i| scheduler(&dir, every, 5, i))
        .collect();

    let period_started = Instant::now();
    assert_eq!(tick_all(&schedulers, &db).await, 1, "{:?}", names_in(&dir));
    assert_eq!(sequences_in(&dir), vec![Some(1)]);
    // Later in the same period (a restart, the next check): nobody writes another.
    assert!(
        period_started.elapsed() < every,
        "the first backup took a whole period"
    );
    assert_eq!(tick_all(&schedulers, &db).await, 0, "{:?}", names_in(&dir));

    // Every instance shows the backup, whichever wrote it.
    let shown: Vec<_> = futures::future::join_all(schedulers.iter().map(|s| s.shared_status(&db)))
        .await
        .into_iter()
        .map(|status| {
            assert!(status.warning().is_none(), "{:?}", status.warning());
            status.last_success.expect("a last backup")
        })
        .collect();
    assert!(shown.iter().all(|s| *s == shown[0]), "{shown:?}");

    // The next period (by the database's clock, which the schedule reads): exactly one more.
    clock.step_forward(
        (every + Duration::from_millis(200)).saturating_sub(period_started.elapsed()),
    );
    assert_eq!(tick_all(&schedulers, &db).await, 1, "{:?}", names_in(&dir));
    assert_eq!(sequences_in(&dir), vec![Some(1), Some(2)]);
    for backup in rotation::completed_backups(&dir) {
        docstore::dump::verify_dump(&backup.dir).expect("a completed backup verifies");
    }
    // Nothing half-written or half-deleted is left.
    assert!(
        names_in(&dir).iter().all(|n| n.starts_with("backup-")),
        "{:?}",
        names_in(&dir)
    );
    close_store(store, db).await;
}

/// A completed scheduled backup as another run left it: a manifest and the completion marker.
fn completed_backup(dir: &Path, sequence: i64, taken_at_millis: i64) -> std::path::PathBuf {
    let backup = dir.join(rotation::backup_name(
        sequence,
        taken_at_millis,
        "shop2/102/bbbbbb",
    ));
    std::fs::create_dir_all(&backup).expect("dir");
    std::fs::write(backup.join(docstore::dump::MANIFEST_FILE), "{}").expect("manifest");
    Marker::new(sequence, "shop2/102/bbbbbb", taken_at_millis, 0, 0)
        .write(&backup)
        .expect("marker");
    backup
}

#[tokio::test]
async fn after_the_clock_steps_back_the_new_backup_is_kept_and_shown_as_the_last() {
    let (store, db) = shared_store().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("backups");
    // Backups written while the clock was in 2099: their names sort above any written now.
    const YEAR_2099: i64 = 4_070_908_800_000;
    for sequence in 1..=3 {
        completed_backup(&dir, sequence, YEAR_2099 + sequence * 3_600_000);
    }
    let monitor = scheduler(&dir, Duration::from_secs(3600), 2, INSTANCES[0]);
    let report = monitor.run_once(&db).await.expect("backup");

    assert!(report.dir.is_dir(), "the backup just written was deleted");
    docstore::dump::verify_dump(&report.dir).expect("it verifies");
    let name = report
        .dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(rotation::sequence_in_name(&name), Some(4), "{name}");
    // Kept: the two highest sequences, the new one among them; the oldest two went.
    assert_eq!(sequences_in(&dir), vec![Some(3), Some(4)]);
    let status = scheduler(&dir, Duration::from_secs(3600), 2, INSTANCES[1])
        .shared_status(&db)
        .await;
    assert_eq!(status.last_success, monitor.status().last_success);
    assert!(status.last_success.expect("shown").0.starts_with("20"));
    close_store(store, db).await;
}

#[tokio::test]
async fn a_failed_scheduled_backup_removes_only_its_own_partial_directory_and_every_instance_warns()
{
    let (store, db) = shared_store().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("backups");
    let earlier = completed_backup(&dir, 1, 1_767_225_600_000);
    // Another instance's backup in progress: manifest written, read-back still running.
    let theirs = dir.join(rotation::partial_name(&rotation::backup_name(
        7,
        1_767_225_600_000,
        INSTANCES[2],
    )));
    std::fs::create_dir_all(theirs.join("bazaar")).expect("dir");
    std::fs::write(theirs.join(docstore::dump::MANIFEST_FILE), "{}").expect("manifest");
    // A collection whose metadata file name is too long for the file system: the store's
    // backup fails after it has written into the new directory.
    let long_name = "x".repeat(248);
    db.collection::<Document>(&long_name)
        .insert_one(doc! {"_id": 1})
        .await
        .expect("a long collection name is valid");
    let before = names_in(&dir);

    let failing = scheduler(&dir, Duration::from_secs(3600), 1, INSTANCES[0]);
    let err = failing.run_once(&db).await.expect_err("the backup fails");
    // It failed while writing into its own directory, not before creating one.
    assert!(format!("{err:#}").contains(".metadata.json"), "{err:#}");
    assert_eq!(names_in(&dir), before, "{err:#}");
    assert!(theirs.join(docstore::dump::MANIFEST_FILE).is_file());
    assert!(earlier.is_dir());
    let other = scheduler(&dir, Duration::from_secs(3600), 1, INSTANCES[1]);
    let warning = other.shared_status(&db).await.warning().expect("a warning");
    assert!(
        warning.contains("failed") && warning.contains(INSTANCES[0]),
        "{warning}"
    );

    // Fixed: the next backup clears the warning everywhere and rotation keeps only it, still
    // leaving the other instance's unfinished backup alone.
    db.collection::<Document>(&long_name)
        .drop()
        .await
        .expect("drop");
    let report = failing.run_once(&db).await.expect("backup");
    assert!(other.shared_status(&db).await.warning().is_none());
    assert!(!earlier.exists());
    assert!(report.dir.is_dir() && theirs.is_dir());
    assert_eq!(rotation::completed_backups(&dir).len(), 1);
    close_store(store, db).await;
}

/// Every directory and file under `dir` with its permission bits.
#[cfg(unix)]
fn modes_under(dir: &Path) -> Vec<(std::path::PathBuf, bool, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path).expect("metadata");
        found.push((
            path.clone(),
            meta.is_dir(),
            meta.permissions().mode() & 0o777,
        ));
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).expect("read_dir") {
                pending.push(entry.expect("entry").path());
            }
        }
    }
    found
}

#[cfg(unix)]
fn assert_owner_only(dir: &Path) {
    let modes = modes_under(dir);
    assert!(
        modes
            .iter()
            .any(|(p, _, _)| p.ends_with("bazaar/orders.bson")),
        "{modes:?}"
    );
    let open: Vec<_> = modes
        .iter()
        .filter(|(_, is_dir, mode)| *mode != if *is_dir { 0o700 } else { 0o600 })
        .collect();
    assert!(open.is_empty(), "readable by others: {open:?}");
}

#[cfg(unix)]
#[tokio::test]
async fn manual_and_scheduled_backups_and_restored_data_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (store, db) = shared_store().await;
    let tmp = tempfile::tempdir().expect("tempdir");

    // `bazaar backup DIR` into a new directory, and into an existing empty one made 0755.
    let manual = tmp.path().join("manual");
    backup_to(&db, &manual).await.expect("backup");
    assert_owner_only(&manual);
    let existing = tmp.path().join("existing");
    std::fs::create_dir(&existing).expect("dir");
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    backup_to(&db, &existing).await.expect("backup");
    assert_owner_only(&existing);

    let dir = tmp.path().join("scheduled");
    let report = scheduler(&dir, Duration::from_secs(3600), 3, INSTANCES[0])
        .run_once(&db)
        .await
        .expect("scheduled backup");
    assert_owner_only(&dir);
    assert_owner_only(&report.dir);

    let restored = tmp.path().join("restored");
    restore_embedded(&manual, &restored, false)
        .await
        .expect("restore");
    let mode = std::fs::metadata(&restored)
        .expect("restored")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
    close_store(store, db).await;
}
