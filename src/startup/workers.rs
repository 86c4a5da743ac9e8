//! Each HTTP worker's own way into the embedded store.
//!
//! actix-web runs every worker on a single-threaded runtime of its own; the embedded store and
//! the driver's background tasks run on the process's shared runtime. Through one shared
//! client, each database command of a page crossed threads three times: the driver's pool hands
//! out a connection from a task on the shared runtime, the store's connection task runs there
//! too, and the connection goes back to the pool the same way. Each crossing wakes a sleeping
//! thread, which on a small machine cost more than the command itself.
//!
//! So with the embedded store each worker gets a listener of its own
//! ([`docstore::InProcess::listen_here`]), served by that worker's runtime, and a driver client
//! of its own connected to it ([`Db::through`]): a command then goes from the page to the store
//! and back on the worker's thread. The data, the caches on the [`Db`] handle and the command
//! log stay shared; a command that may take long (a count, an aggregation, a `$text` search, a
//! find that reads a whole large collection — docstore's `server::may_run_long` says which) is
//! still run on the shared runtime so it never holds up the worker's other requests.
//!
//! On an external MongoDB every worker shares the one client, as before.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mongodb::options::ServerAddress;

use crate::db::Db;

/// Opens a worker's own listener and client on the embedded store.
#[derive(Clone)]
pub(crate) struct WorkerStores {
    in_process: docstore::InProcess,
    /// Where the workers' Unix sockets go (the data directory); loopback TCP without one.
    socket_dir: Option<PathBuf>,
    /// Numbers the workers' sockets.
    opened: Arc<AtomicUsize>,
}

impl WorkerStores {
    pub(crate) fn new(
        in_process: docstore::InProcess,
        socket_dir: Option<PathBuf>,
    ) -> WorkerStores {
        WorkerStores {
            in_process,
            socket_dir,
            opened: Arc::default(),
        }
    }

    /// A handle like `db` whose commands are served on the current runtime (call it on the
    /// worker's thread, while its services are being built).
    pub(crate) fn connect_here(&self, db: &Db) -> anyhow::Result<Db> {
        let n = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
        let socket = self
            .socket_dir
            .as_deref()
            .and_then(|dir| super::unix_socket_path(dir, &format!("docstore-worker-{n}.sock")));
        let address = match self.in_process.listen_here(socket.as_deref())? {
            docstore::Endpoint::Unix(path) => unix_address(&path)?,
            docstore::Endpoint::Tcp(addr) => ServerAddress::Tcp {
                host: addr.ip().to_string(),
                port: Some(addr.port()),
            },
        };
        Ok(db.through(address)?)
    }
}

#[cfg(unix)]
fn unix_address(path: &Path) -> anyhow::Result<ServerAddress> {
    Ok(ServerAddress::Unix {
        path: path.to_path_buf(),
    })
}

#[cfg(not(unix))]
fn unix_address(path: &Path) -> anyhow::Result<ServerAddress> {
    anyhow::bail!("Unix socket {} on a system without them", path.display())
}
