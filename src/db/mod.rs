//! The database handle: a `mongodb` driver client for docstore or MongoDB, the error type
//! handlers see instead of raw driver errors, and one module per collection.
//!
//! # Which writes are durable
//!
//! A write a person is told about goes through [`Db::durable`] (or carries
//! [`Db::durable_write_concern`]): with `database.write_concern = "durable"` (the default) it is
//! journaled (`j: true`), and on a replica set acknowledged by a majority (`w: "majority"`),
//! before the driver returns, so the page that reports it can never be undone by a crash. Every
//! other write is acknowledged once applied in memory; losing the last moments of those in a
//! crash is harmless because it looks exactly like a crash just before them, which the code
//! already repairs. (Both docstore's journal and MongoDB's oplog are written in order, so a crash
//! loses a suffix of the writes, never a write in the middle.) The README's "What survives a
//! crash" lists, per collection, which writes are durable and which stay fast and why; a new
//! write that ends in a confirmation belongs there too.

pub mod commands;
pub mod lease;
pub(crate) mod outage;
pub mod redirects;
pub mod site;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bson::doc;
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::options::{
    Acknowledgment, ClientOptions, CollectionOptions, ServerAddress, WriteConcern,
};
use mongodb::{Client, Collection, Database};

use crate::clock::{Clock, SystemClock};

/// True for a unique-index violation (server error 11000), which callers turn into their own
/// domain error (a slug taken, an order already placed for the cart).
pub(crate) fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    match e.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code == 11000,
        ErrorKind::Command(c) => c.code == 11000,
        _ => false,
    }
}

/// The `$text` filter for a full-text search of `query` (site search, the admin's searches).
pub fn text_filter(query: &str) -> bson::Document {
    doc! { "$text": { "$search": query } }
}

/// A database failure, sorted by what the user should be told.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// No server reachable: the page says "try again shortly" (503).
    #[error("the database is unavailable")]
    Unavailable(#[source] mongodb::error::Error),
    /// The server answers but refuses writes because it cannot write to its disk (full or
    /// failing): the page says the shop cannot take changes right now (503).
    #[error("the database refuses writes")]
    NotWritable(#[source] mongodb::error::Error),
    /// A `$text` query found no text index: on MongoDB while the index is still being built,
    /// on the embedded store for the few seconds after start-up while it builds a large
    /// collection's text index in the background. The page says search is being prepared
    /// (503, retry shortly).
    #[error("the text index is not ready")]
    TextIndexNotReady(#[source] mongodb::error::Error),
    #[error("database operation failed")]
    Other(#[source] mongodb::error::Error),
    /// Not the driver's failure: a value that could not be turned into (or read back from) a
    /// document, or a reply without what it should carry.
    #[error("database operation failed: {0}")]
    Invalid(String),
}

impl From<mongodb::error::Error> for DbError {
    fn from(e: mongodb::error::Error) -> Self {
        if refuses_writes(&e) {
            return DbError::NotWritable(e);
        }
        if text_index_missing(&e) {
            return DbError::TextIndexNotReady(e);
        }
        match e.kind.as_ref() {
            ErrorKind::ServerSelection { .. }
            | ErrorKind::Io(_)
            | ErrorKind::ConnectionPoolCleared { .. } => DbError::Unavailable(e),
            _ => DbError::Other(e),
        }
    }
}

/// MongoDB's (and docstore's) code for a missing index (`IndexNotFound`).
const INDEX_NOT_FOUND: i32 = 27;

/// True when `e` is a `$text` query's "text index required" (see [`DbError::TextIndexNotReady`]).
pub(crate) fn text_index_missing(e: &mongodb::error::Error) -> bool {
    matches!(e.kind.as_ref(), ErrorKind::Command(c)
        if c.code == INDEX_NOT_FOUND && c.message.contains("text index required"))
}

/// MongoDB's (and docstore's) code for a write refused because the disk is full.
pub(crate) const OUT_OF_DISK_SPACE: i32 = 14031;
/// The code docstore uses for a write refused because its journal cannot be written (an I/O
/// error or a read-only disk).
pub(crate) const LOG_WRITE_FAILED: i32 = 42;

/// True when `e` says the server cannot store writes on its disk right now, whether the write
/// was refused outright or applied without its journaling confirmed (a write concern error).
pub(crate) fn refuses_writes(e: &mongodb::error::Error) -> bool {
    let refusal = |code: i32| code == OUT_OF_DISK_SPACE || code == LOG_WRITE_FAILED;
    match e.kind.as_ref() {
        ErrorKind::Command(c) => refusal(c.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => refusal(w.code),
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => refusal(w.code),
        ErrorKind::InsertMany(m) => {
            m.write_errors.iter().flatten().any(|w| refusal(w.code))
                || m.write_concern_error
                    .as_ref()
                    .is_some_and(|w| refusal(w.code))
        }
        _ => false,
    }
}

/// The moment `age` before `now` (read from [`Db::now`]): anything last touched before it is
/// older than `age` (the background jobs' "idle for", "left behind for"). Stamps a stepped-back
/// clock left in the future are the jobs' to bound (see `jobs`, docs/invariants.md).
pub fn cutoff(now: bson::DateTime, age: Duration) -> bson::DateTime {
    crate::clock::before(now, age)
}

/// What kind of store the app runs on (shown on the admin dashboard).
#[derive(Debug, Clone)]
pub enum Store {
    EmbeddedDirectory(PathBuf),
    EmbeddedMemory,
    /// The URI with any password redacted.
    External(String),
}

impl std::fmt::Display for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::EmbeddedDirectory(path) => {
                write!(f, "embedded docstore, data in {}", path.display())
            }
            Store::EmbeddedMemory => f.write_str("embedded docstore, in memory (nothing is saved)"),
            Store::External(uri) => write!(f, "MongoDB at {uri}"),
        }
    }
}

/// `database.write_concern`: how far a write a person is told about must get before the page
/// saying so is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteDurability {
    /// Journaled on disk (and on a majority of a replica set) before the write returns.
    Durable,
    /// Applied in memory; a crash may lose the last moments of writes.
    Fast,
}

#[derive(Clone)]
pub struct Db {
    client: Client,
    database: Database,
    store: Store,
    durability: WriteDurability,
    /// Bounds a majority acknowledgement on a replica set that lost its majority.
    timeout: Duration,
    /// The commands sent, when `log.database_commands` is on.
    commands: Arc<commands::CommandLog>,
    /// State the areas keep with this handle (the catalog's cache), shared by every clone.
    extensions: Arc<Extensions>,
    /// What `client` was built from, for [`Db::through`].
    options: Arc<ClientOptions>,
    /// The wall clock this handle's users read ([`Db::now`]).
    clock: Arc<dyn Clock>,
}

/// Values of any type, one per type, kept with a [`Db`] handle (see [`Db::extension`]).
#[derive(Default)]
struct Extensions {
    values: std::sync::RwLock<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Extensions {
    fn get_or_default<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let key = TypeId::of::<T>();
        let found = self
            .values
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let value = match found {
            Some(value) => value,
            None => self
                .values
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key)
                .or_insert_with(|| Arc::new(T::default()))
                .clone(),
        };
        value
            .downcast::<T>()
            .unwrap_or_else(|_| unreachable!("extensions are keyed by their own type"))
    }
}

/// A collection and how many documents it holds.
#[derive(Debug, Clone)]
pub struct CollectionCount {
    pub(crate) name: String,
    pub(crate) documents: u64,
}

impl Db {
    /// A client for `uri` using database `name`. Connecting is lazy; call [`Db::ping`] to check.
    pub async fn connect(
        uri: &str,
        name: &str,
        timeout: Duration,
        store: Store,
    ) -> Result<Db, DbError> {
        Db::connect_counting(uri, name, timeout, store, false).await
    }

    /// [`Db::connect`], counting every command sent when `count_commands` is true (see
    /// [`commands`]; `log.database_commands`).
    pub(crate) async fn connect_counting(
        uri: &str,
        name: &str,
        timeout: Duration,
        store: Store,
        count_commands: bool,
    ) -> Result<Db, DbError> {
        let mut options = ClientOptions::parse(uri).await?;
        let commands = if count_commands {
            commands::CommandLog::enabled()
        } else {
            Arc::<commands::CommandLog>::default()
        };
        if count_commands || crate::metrics::database_commands_enabled() {
            options.command_event_handler = Some(commands.handler());
        }
        options.app_name = Some("bazaar".to_string());
        // Without this the driver waits 30 s for a server before a page can say "unavailable".
        options.server_selection_timeout = Some(timeout);
        options.connect_timeout = Some(timeout);
        let client = Client::with_options(options.clone())?;
        let database = client.database(name);
        Ok(Db {
            client,
            database,
            store,
            durability: WriteDurability::Durable,
            timeout,
            commands,
            extensions: Arc::default(),
            options: Arc::new(options),
            clock: Arc::new(SystemClock),
        })
    }

    /// The same store through another address of it (an in-process listener of the embedded
    /// store, see `startup::WorkerStores`): a client of its own, with everything else shared
    /// with this handle (the command log, the areas' caches, the durability). The client's
    /// background tasks run on the current runtime, so call it on the runtime that will use it.
    pub(crate) fn through(&self, address: ServerAddress) -> Result<Db, DbError> {
        let mut options = (*self.options).clone();
        options.hosts = vec![address];
        let client = Client::with_options(options.clone())?;
        Ok(Db {
            database: client.database(self.database.name()),
            client,
            store: self.store.clone(),
            durability: self.durability,
            timeout: self.timeout,
            commands: Arc::clone(&self.commands),
            extensions: Arc::clone(&self.extensions),
            options: Arc::new(options),
            clock: Arc::clone(&self.clock),
        })
    }

    /// The same connection reading the time from `clock` (tests give a [`crate::clock::SteppedClock`]
    /// before the application starts, so every clone reads it).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Db {
        self.clock = clock;
        self
    }

    /// The same connection with writes a person is told about made `durability`.
    pub(crate) fn with_durability(mut self, durability: WriteDurability) -> Db {
        self.durability = durability;
        self
    }

    /// Journaled, and acknowledged by a majority of a replica set (a standalone MongoDB and
    /// docstore take `w: "majority"` as the one node).
    pub(crate) fn journaled_write_concern(&self) -> WriteConcern {
        WriteConcern::builder()
            .w(Acknowledgment::Majority)
            .journal(true)
            .w_timeout(self.timeout)
            .build()
    }

    /// The write concern for writes whose success is shown to a person: journaled (see
    /// [`Db::journaled_write_concern`]) unless `database.write_concern = "fast"`, then `None`
    /// (the server's default: acknowledged once applied).
    pub(crate) fn durable_write_concern(&self) -> Option<WriteConcern> {
        match self.durability {
            WriteDurability::Durable => Some(self.journaled_write_concern()),
            WriteDurability::Fast => None,
        }
    }

    /// `name` for writes whose success is shown to a person (see the table at the top of this
    /// module); reads through it are the same as through [`Db::collection`].
    pub(crate) fn durable<T: Send + Sync>(&self, name: &str) -> Collection<T> {
        match self.durable_write_concern() {
            Some(concern) => self.database.collection_with_options(
                name,
                CollectionOptions::builder().write_concern(concern).build(),
            ),
            None => self.database.collection(name),
        }
    }

    pub fn database(&self) -> &Database {
        &self.database
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The value of type `T` kept with this handle, created with `T::default()` on first use.
    /// Every clone of the handle shares it; a second handle on the same store has its own. The
    /// catalog keeps its cache here, so `db` holds it without knowing the catalog.
    pub(crate) fn extension<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        self.extensions.get_or_default()
    }

    /// The wall clock this handle's users read, shared by every clone.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// The current time by [`Db::clock`]: what every stamp and cut-off that a clock step
    /// could disturb is read from.
    pub fn now(&self) -> bson::DateTime {
        self.clock().now()
    }

    /// The commands this handle's client has sent (counted only with `log.database_commands`).
    pub fn commands(&self) -> &commands::CommandLog {
        &self.commands
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub fn collection<T: Send + Sync>(&self, name: &str) -> mongodb::Collection<T> {
        self.database.collection(name)
    }

    pub(crate) async fn ping(&self) -> Result<(), DbError> {
        self.database.run_command(doc! { "ping": 1 }).await?;
        Ok(())
    }

    /// The server's `serverStatus` document (docstore's carries its journal's figures).
    pub(crate) async fn server_status(&self) -> Result<bson::Document, DbError> {
        Ok(self
            .client
            .database("admin")
            .run_command(doc! { "serverStatus": 1 })
            .await?)
    }

    /// Why the server refuses writes, when it says so: docstore reports it in `serverStatus`
    /// (`journal.writable`). `None` when writes are accepted or the server does not say (a
    /// MongoDB server, or a failed command; a ping tells whether it answers at all).
    pub(crate) async fn writes_refused(&self) -> Option<String> {
        let status = self.server_status().await.ok()?;
        let journal = status.get_document("journal").ok()?;
        if journal.get_bool("writable").unwrap_or(true) {
            return None;
        }
        let reason = journal
            .get_document("writesRefused")
            .ok()
            .and_then(|r| r.get_str("errmsg").ok())
            .unwrap_or("the database refuses writes");
        Some(reason.to_string())
    }

    /// The server's reported version (docstore reports the MongoDB version it emulates).
    pub(crate) async fn server_version(&self) -> Result<String, DbError> {
        let info = self.database.run_command(doc! { "buildInfo": 1 }).await?;
        Ok(info.get_str("version").unwrap_or("unknown").to_string())
    }

    /// Every collection of the database with its document count, by name.
    pub(crate) async fn collection_counts(&self) -> Result<Vec<CollectionCount>, DbError> {
        let mut names: Vec<String> = self.database.list_collection_names().await?;
        names.sort();
        let mut counts = Vec::with_capacity(names.len());
        for name in names {
            let documents = self
                .database
                .collection::<bson::Document>(&name)
                .count_documents(doc! {})
                .await?;
            counts.push(CollectionCount { name, documents });
        }
        Ok(counts)
    }

    /// True when some collection of the database holds at least one document: one indexed
    /// read per collection, whatever their sizes (counting them would read every document).
    pub(crate) async fn has_documents(&self) -> Result<bool, DbError> {
        for name in self.database.list_collection_names().await? {
            let found = self
                .database
                .collection::<bson::Document>(&name)
                .find_one(doc! {})
                .projection(doc! { "_id": 1 })
                .await?;
            if found.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
