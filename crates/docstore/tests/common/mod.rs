//! Shared harness for the behaviour suites: a fresh database per test, on an in-memory docstore
//! started for the test or, when `MONGODB_URI` is set, on that real MongoDB server.

pub mod process;

use docstore::{Config, Server, ServerHandle};
use mongodb::error::{Error, ErrorKind, WriteFailure};
use mongodb::options::ClientOptions;
use mongodb::{Client, Database};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub struct TestDb {
    pub client: Client,
    pub db: Database,
    pub server: Option<ServerHandle>,
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// True when the suite runs against docstore (not a real MongoDB).
pub fn is_docstore() -> bool {
    std::env::var("MONGODB_URI").is_err()
}

pub async fn client_for(uri: &str) -> Client {
    let mut options = ClientOptions::parse(uri).await.expect("valid test URI");
    options.server_selection_timeout = Some(Duration::from_secs(5));
    options.max_pool_size = Some(64);
    Client::with_options(options).expect("client options")
}

/// A fresh, empty database for one test.
pub async fn test_db() -> TestDb {
    let (uri, server) = match std::env::var("MONGODB_URI") {
        Ok(uri) => (uri, None),
        Err(_) => {
            let server = Server::start(Config::in_memory())
                .await
                .expect("docstore starts");
            (server.uri(), Some(server))
        }
    };
    let client = client_for(&uri).await;
    let name = format!(
        "test_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let db = client.database(&name);
    db.drop().await.expect("drop fresh database");
    TestDb { client, db, server }
}

/// The `_id`s (all `i32`) of every document `cursor` returns, in its order.
pub async fn i32_ids(cursor: mongodb::Cursor<bson::Document>) -> Vec<i32> {
    use futures::TryStreamExt;
    let docs: Vec<bson::Document> = cursor.try_collect().await.unwrap();
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

/// The server error code inside a driver error (command error, write error, or the first
/// write error of an insert_many).
pub fn code_of(e: &Error) -> Option<i32> {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => Some(c.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => Some(w.code),
        ErrorKind::InsertMany(m) => m
            .write_errors
            .as_ref()
            .and_then(|errs| errs.first())
            .map(|w| w.code),
        _ => None,
    }
}

/// The server's message inside a driver error.
pub fn message_of(e: &Error) -> String {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => c.message.clone(),
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.message.clone(),
        ErrorKind::InsertMany(m) => m
            .write_errors
            .as_ref()
            .and_then(|errs| errs.first())
            .map(|w| w.message.clone())
            .unwrap_or_default(),
        _ => e.to_string(),
    }
}

/// Assert that a result failed with the given server error code.
#[track_caller]
pub fn assert_code<T: std::fmt::Debug>(result: Result<T, Error>, code: i32) -> Error {
    match result {
        Ok(v) => panic!("expected error code {code}, got success: {v:?}"),
        Err(e) => {
            assert_eq!(code_of(&e), Some(code), "wrong error: {e}");
            e
        }
    }
}

/// The first stage named `name` (`IXSCAN`, `COLLSCAN`, `SORT`...) anywhere in an explain reply.
pub fn find_stage(v: &bson::Bson, name: &str) -> Option<bson::Document> {
    match v {
        bson::Bson::Document(d) => {
            if d.get_str("stage") == Ok(name) {
                return Some(d.clone());
            }
            d.values().find_map(|x| find_stage(x, name))
        }
        bson::Bson::Array(items) => items.iter().find_map(|x| find_stage(x, name)),
        _ => None,
    }
}
