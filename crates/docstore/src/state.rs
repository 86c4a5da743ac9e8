//! Everything a running server shares between connections.

pub(crate) use crate::auth::ConnectionInfo;
use crate::catalog::{Catalog, SnapshotTrigger};
use crate::config::{Config, StorageMode};
use crate::cursor::CursorManager;
use crate::error::{Error, Result};
use crate::login_throttle::LoginThrottle;
use crate::storage::{recovery, Storage};
use bson::doc;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub(crate) struct ServerState {
    pub config: Config,
    pub catalog: Catalog,
    pub cursors: CursorManager,
    pub started: Instant,
    /// Client connections open right now (`serverStatus`); kept by the server's accept loop.
    pub open_connections: AtomicI64,
    /// The address the server listens on, once bound (`serverStatus`, `getCmdLineOpts`).
    pub listen_addr: OnceLock<SocketAddr>,
    /// The user connections must authenticate as, when authentication is on.
    pub auth: Option<crate::auth::User>,
    /// Commands running right now off the async worker threads (see `server::run_command`).
    pub long_commands: AtomicI64,
    /// Failed logins by client address, which delay that address's next attempts.
    pub login_throttle: LoginThrottle,
    /// Connections closed at once because `Config::max_connections` were open.
    pub refused_connections: AtomicI64,
    /// When refusing a connection was last logged (the log says it at most every few seconds).
    pub refusal_logged: parking_lot::Mutex<Option<Instant>>,
    /// The TTL monitor's interval, which `setParameter` `ttlMonitorSleepSecs` changes at run
    /// time (starting from `Config::ttl_monitor_interval`).
    pub ttl_monitor_interval: parking_lot::Mutex<Duration>,
    /// Woken when `ttl_monitor_interval` changes, so the monitor starts the new interval now
    /// instead of finishing the old one.
    pub ttl_monitor_changed: tokio::sync::Notify,
    /// The database profiler's settings (`profile`; see `commands::profiler`).
    pub profiler: Profiler,
    /// The sessions clients have used (`$listLocalSessions`).
    pub sessions: crate::sessions::Sessions,
    next_connection_id: AtomicI64,
}

/// The profiler's settings: `slowms` and `sampleRate` are global, as in mongod; the level and
/// filter are per database. Not persisted: a restarted server profiles nothing, as mongod
/// started without `--profile`.
#[derive(Debug, Default)]
pub(crate) struct Profiler {
    settings: parking_lot::Mutex<ProfilerSettings>,
    /// Whether any database is profiled: the one check every command pays.
    any: std::sync::atomic::AtomicBool,
}

#[derive(Debug)]
pub(crate) struct ProfilerSettings {
    pub slowms: i64,
    pub sample_rate: f64,
    /// Databases with a level above 0 or a filter.
    pub databases: std::collections::HashMap<String, DatabaseProfile>,
}

impl Default for ProfilerSettings {
    fn default() -> Self {
        ProfilerSettings {
            slowms: 100,
            sample_rate: 1.0,
            databases: Default::default(),
        }
    }
}

/// One database's profiling level and filter (the filter's document and its parsed form).
#[derive(Debug, Clone, Default)]
pub(crate) struct DatabaseProfile {
    pub level: i32,
    pub filter: Option<(bson::Document, crate::query::Filter)>,
}

/// What [`Profiler::settings_for`] reports for one database.
#[derive(Debug, Clone)]
pub(crate) struct ProfileOf {
    pub level: i32,
    pub filter: Option<(bson::Document, crate::query::Filter)>,
    pub slowms: i64,
    pub sample_rate: f64,
}

impl Profiler {
    /// The settings to change; the "anything profiled" flag follows when the guard drops.
    pub(crate) fn lock(&self) -> ProfilerGuard<'_> {
        ProfilerGuard {
            settings: self.settings.lock(),
            any: &self.any,
        }
    }

    /// `db`'s settings when it is profiled at all.
    pub(crate) fn settings_for(&self, db: &str) -> Option<ProfileOf> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let settings = self.settings.lock();
        let profile = settings.databases.get(db)?;
        Some(ProfileOf {
            level: profile.level,
            filter: profile.filter.clone(),
            slowms: settings.slowms,
            sample_rate: settings.sample_rate,
        })
    }
}

/// The profiler's settings, locked for a change.
pub(crate) struct ProfilerGuard<'a> {
    settings: parking_lot::MutexGuard<'a, ProfilerSettings>,
    any: &'a std::sync::atomic::AtomicBool,
}

impl std::ops::Deref for ProfilerGuard<'_> {
    type Target = ProfilerSettings;
    fn deref(&self) -> &ProfilerSettings {
        &self.settings
    }
}

impl std::ops::DerefMut for ProfilerGuard<'_> {
    fn deref_mut(&mut self) -> &mut ProfilerSettings {
        &mut self.settings
    }
}

impl Drop for ProfilerGuard<'_> {
    fn drop(&mut self) {
        self.any
            .store(!self.settings.databases.is_empty(), Ordering::Relaxed);
    }
}

impl ServerState {
    /// Open storage (recovering a data directory) and build the in-memory catalog.
    pub(crate) fn open(config: Config) -> Result<Arc<ServerState>> {
        let (storage, recovered) = match &config.storage {
            StorageMode::InMemory => (Storage::in_memory(), Default::default()),
            StorageMode::Directory(dir) => {
                Storage::open_with_faults(dir, config.commit_interval, config.disk_faults.clone())
                    .map_err(|e| {
                    let error = Error::internal(format!(
                        "cannot open data directory {}: {e}",
                        dir.display()
                    ));
                    match recovery::damage(&e) {
                        // Marked so that an embedding program can offer its own repair command.
                        Some(damage) => error.with_extra(doc! {
                            "needsRepair": true,
                            "damage": damage.message.as_str(),
                        }),
                        None => error,
                    }
                })?
            }
        };
        let catalog = Catalog::recover(
            Arc::new(storage),
            recovered,
            SnapshotTrigger {
                min_journal_bytes: config.snapshot_threshold_bytes,
                journal_percent: config.snapshot_journal_percent,
            },
        )?;
        let ttl_interval = config.ttl_monitor_interval;
        Ok(Arc::new(ServerState {
            auth: config.user.clone(),
            cursors: CursorManager::new(config.cursor_timeout),
            config,
            catalog,
            started: Instant::now(),
            open_connections: AtomicI64::new(0),
            listen_addr: OnceLock::new(),
            long_commands: AtomicI64::new(0),
            login_throttle: LoginThrottle::default(),
            refused_connections: AtomicI64::new(0),
            refusal_logged: parking_lot::Mutex::new(None),
            ttl_monitor_interval: parking_lot::Mutex::new(ttl_interval),
            ttl_monitor_changed: tokio::sync::Notify::new(),
            profiler: Profiler::default(),
            sessions: Default::default(),
            next_connection_id: AtomicI64::new(1),
        }))
    }

    pub(crate) fn new_connection(&self, peer: Option<SocketAddr>) -> ConnectionInfo {
        ConnectionInfo {
            id: self.next_connection_id.fetch_add(1, Ordering::Relaxed),
            peer,
            auth: Default::default(),
        }
    }

    /// Connections handed out since start (`serverStatus` `totalCreated`).
    pub(crate) fn connections_created(&self) -> i64 {
        self.next_connection_id.load(Ordering::Relaxed) - 1
    }

    /// Flush the journal (clean shutdown).
    pub(crate) fn shutdown(&self) {
        self.catalog.flush();
    }
}
