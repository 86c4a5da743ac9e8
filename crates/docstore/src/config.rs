//! Server configuration: where to listen, where (or whether) to keep data, and timings.

use crate::storage::DiskFaults;
use std::path::PathBuf;
use std::time::Duration;

/// Where the data lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageMode {
    /// Nothing touches the disk; everything is lost at shutdown (tests).
    InMemory,
    /// Journal and snapshots in this directory.
    Directory(PathBuf),
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind; loopback by default.
    pub bind: String,
    /// Port; 0 picks a free one (see `ServerHandle::local_addr`).
    pub port: u16,
    pub storage: StorageMode,
    /// Group-commit interval of the journal (MongoDB's default is 100 ms).
    pub commit_interval: Duration,
    /// Idle cursors are closed after this long.
    pub cursor_timeout: Duration,
    /// Journal size that triggers a snapshot and journal compaction (the least: see
    /// [`Config::snapshot_journal_percent`]).
    pub snapshot_threshold_bytes: u64,
    /// Nor is a snapshot taken before the journal has grown to this percentage of the last
    /// snapshot's size (100 by default; 0 leaves the fixed threshold alone). A snapshot rewrites
    /// the whole store, so with a fixed threshold a large store (or one that keeps growing, like
    /// an event log) would rewrite far more bytes than its writes journal: at 100 % the
    /// snapshots write at most as many bytes as the journal up to a store of 1 GiB, and the
    /// journal a crash leaves to replay is at most about the size of the store. A journal of
    /// 1 GiB is compacted whatever the store's size, so the replay stays bounded.
    pub snapshot_journal_percent: u64,
    /// How often the TTL monitor deletes expired documents (MongoDB's default is 60 s).
    pub ttl_monitor_interval: Duration,
    /// The user clients must authenticate as (SCRAM, `authSource=admin`). `None` means no
    /// authentication: any client that can connect may do anything.
    pub user: Option<crate::auth::User>,
    /// Tests only: journal and snapshot writes go through this switch, which can make them fail
    /// as a full or broken disk would (see [`DiskFaults`]). `None` in normal use.
    pub disk_faults: Option<DiskFaults>,
    /// Also listen on a Unix domain socket at this path (Unix only; the path must end in
    /// `.sock` for the `mongodb` driver to take it as a socket). An embedding program's own
    /// connection then skips TCP: each command costs the kernel far less than over loopback.
    /// The socket file is made readable and writable by its owner only, replaces a stale
    /// socket left at the path by a crash, and is removed at shutdown. When it cannot be bound
    /// the server warns and serves TCP alone ([`crate::ServerHandle::unix_socket`] is `None`).
    pub unix_socket: Option<PathBuf>,
    /// Most client connections open at once, over every listener (TCP, the Unix socket and
    /// in-process listeners); a connection beyond it is closed as soon as it is accepted, as
    /// mongod does past `maxConns`. With authentication on, a connection that has not
    /// authenticated may hold at most 64 KiB of a message, so this also bounds the memory
    /// unauthenticated clients can take (see `wire::MAX_UNAUTHENTICATED_MESSAGE_SIZE`).
    pub max_connections: usize,
    /// Tests only: every check of a command's `maxTimeMS` deadline (at the start of each scan,
    /// then every thousand or so documents or keys) first sleeps this long, so that a test can
    /// make a command outlast its time limit without racing the clock (MongoDB's own tests use
    /// the `maxTimeAlwaysTimeOut` fail point for this). Commands without `maxTimeMS` never
    /// check. `None` in normal use.
    pub max_time_check_delay: Option<Duration>,
}

/// [`Config::max_connections`] by default: far more than an application's driver pools open
/// (Bazaar: ten per HTTP worker), below the usual 1 024 open files a process may have.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1000;

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".to_string(),
            port: 0,
            storage: StorageMode::InMemory,
            commit_interval: Duration::from_millis(100),
            cursor_timeout: Duration::from_secs(600),
            snapshot_threshold_bytes: 64 * 1024 * 1024,
            snapshot_journal_percent: 100,
            ttl_monitor_interval: Duration::from_secs(60),
            user: None,
            disk_faults: None,
            unix_socket: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_time_check_delay: None,
        }
    }
}

impl Config {
    pub fn in_memory() -> Self {
        Config::default()
    }

    pub fn persistent(dir: impl Into<PathBuf>) -> Self {
        Config {
            storage: StorageMode::Directory(dir.into()),
            ..Config::default()
        }
    }
}
