//! TCP listener (and, when configured, a Unix domain socket) and the per-connection loop: read
//! a frame, dispatch the command, write the reply. A connection that sends garbage is closed on
//! its own; nothing it sends can stop the others.

use crate::commands::{self, Answer};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::state::{ConnectionInfo, ServerState};
use crate::wire::{self, Message, ReplyTarget, WireError};
use bson::{doc, Document};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, error, info, warn};

/// How long shutdown waits for connections to finish their current command before cutting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Read buffer per connection: a typical command arrives in one read.
const READ_BUFFER: usize = 16 * 1024;

pub struct Server;

/// A running server. Stop it with [`ServerHandle::shutdown`]; dropping the handle also stops it,
/// in the background, without waiting.
pub struct ServerHandle {
    local_addr: SocketAddr,
    state: Arc<ServerState>,
    /// Sending `true`, or dropping the sender, tells the accept loop and connections to stop.
    stop: Option<watch::Sender<bool>>,
    accept_loop: Option<JoinHandle<()>>,
    /// The Unix domain socket also listened on, when one was configured and could be bound.
    unix_socket: Option<PathBuf>,
    /// The runtime the server started on (see [`InProcess`]).
    runtime: tokio::runtime::Handle,
}

impl Server {
    /// Open the data (recovering a data directory), bind `config.bind:config.port` and start
    /// serving in the background on the current tokio runtime.
    pub async fn start(config: Config) -> Result<ServerHandle> {
        let bind = config.bind.clone();
        let port = config.port;
        let unix_path = config.unix_socket.clone();
        // Recovery reads files: keep it off the async worker threads.
        let state = tokio::task::spawn_blocking(move || ServerState::open(config))
            .await
            .map_err(|e| Error::internal(format!("opening the data failed: {e}")))??;
        let listener = TcpListener::bind((bind.as_str(), port))
            .await
            .map_err(|e| Error::internal(format!("cannot listen on {bind}:{port}: {e}")))?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| Error::internal(format!("cannot read the listening address: {e}")))?;
        let _ = state.listen_addr.set(local_addr);
        if !local_addr.ip().is_loopback() && state.auth.is_none() {
            warn!(
                address = %local_addr,
                "docstore is listening on a non-loopback address without authentication, \
                 so anyone who can reach this address can read and change all data"
            );
        }
        info!(
            address = %local_addr,
            authentication = state.auth.is_some(),
            "docstore listening"
        );
        let unix = unix_path.as_deref().and_then(UnixSocket::bind);
        let unix_socket = unix.as_ref().map(|u| u.path.clone());
        let (stop_tx, stop_rx) = watch::channel(false);
        let ttl_monitor = tokio::spawn(ttl_monitor(Arc::clone(&state), stop_rx.clone()));
        let accept_loop = tokio::spawn(accept_loop(
            listener,
            unix,
            Arc::clone(&state),
            stop_rx,
            ttl_monitor,
        ));
        Ok(ServerHandle {
            local_addr,
            state,
            stop: Some(stop_tx),
            accept_loop: Some(accept_loop),
            unix_socket,
            runtime: tokio::runtime::Handle::current(),
        })
    }
}

impl ServerHandle {
    /// `mongodb://host:port/` for the driver.
    pub fn uri(&self) -> String {
        format!("mongodb://{}/", self.local_addr)
    }

    /// `mongodb://user:password@host:port/?authSource=admin` for a server started with
    /// [`Config::user`]. The result holds the password: keep it out of logs.
    pub fn uri_with_credentials(&self, user: &str, password: &str) -> String {
        format!(
            "mongodb://{}:{}@{}/?authSource={}",
            crate::auth::uri_escape(user),
            crate::auth::uri_escape(password),
            self.local_addr,
            crate::auth::AUTH_DB
        )
    }

    /// The Unix domain socket the server also listens on ([`Config::unix_socket`]), when it
    /// could be bound.
    pub fn unix_socket(&self) -> Option<&Path> {
        self.unix_socket.as_deref()
    }

    /// Like [`ServerHandle::uri_with_credentials`] through the Unix domain socket
    /// (`mongodb://user:password@%2Fpath%2Fto%2Fdocstore.sock/?authSource=admin`), when the
    /// server listens on one. The result holds the password: keep it out of logs.
    pub fn unix_uri_with_credentials(&self, user: &str, password: &str) -> Option<String> {
        let path = self.unix_socket.as_ref()?.to_str()?;
        Some(format!(
            "mongodb://{}:{}@{}/?authSource={}",
            crate::auth::uri_escape(user),
            crate::auth::uri_escape(password),
            crate::auth::uri_escape(path),
            crate::auth::AUTH_DB
        ))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn state(&self) -> &Arc<ServerState> {
        &self.state
    }

    /// What opens further listeners served on other runtimes of this process (see
    /// [`InProcess::listen_here`]); `None` once the server is stopping.
    pub fn in_process(&self) -> Option<InProcess> {
        Some(InProcess {
            state: Arc::clone(&self.state),
            stop: self.stop.as_ref()?.subscribe(),
            shared: self.runtime.clone(),
        })
    }

    /// Stop accepting, let commands in flight finish and send their replies, close every
    /// connection, then flush the journal.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(task) = self.accept_loop.take() {
            if let Err(e) = task.await {
                error!("docstore accept loop ended abnormally: {e}");
            }
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        // Dropping the sender is itself the stop signal; the accept loop then winds down (and
        // flushes) on its own if the runtime is still running.
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
    }
}

/// Opens listeners whose connections are served by the tasks of the runtime that opens them,
/// rather than the runtime the server started on.
///
/// A process that embeds the store and runs several single-threaded runtimes (an HTTP server's
/// workers) gives each its own listener and its own driver: a command then goes from the driver
/// to the store and back on one thread, with no wake-up of another thread on the way (a
/// cross-thread hand-off costs more than a small command itself). The data, the users and the
/// stop signal are the server's own; only where the connection tasks run differs.
#[derive(Clone)]
pub struct InProcess {
    state: Arc<ServerState>,
    stop: watch::Receiver<bool>,
    /// The runtime the server started on: a command that may run long ([`may_run_long`]) is
    /// handed to it from a current-thread runtime, so it never holds up that runtime's other
    /// tasks (an HTTP worker's requests).
    shared: tokio::runtime::Handle,
}

/// Where an [`InProcess`] listener listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl InProcess {
    /// Listen on the Unix socket `unix_socket` (or, without one or when it cannot be bound, on a
    /// free loopback TCP port) and serve its connections as tasks of the current tokio runtime
    /// until the server stops or that runtime ends. Must be called within a runtime.
    pub fn listen_here(&self, unix_socket: Option<&Path>) -> Result<Endpoint> {
        let unix = unix_socket.and_then(UnixSocket::bind);
        let (endpoint, tcp) = match &unix {
            Some(u) => (Endpoint::Unix(u.path.clone()), None),
            None => {
                let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .and_then(TcpListener::from_std)
                    .map_err(|e| Error::internal(format!("cannot listen on loopback: {e}")))?;
                let addr = listener
                    .local_addr()
                    .map_err(|e| Error::internal(format!("cannot read the address: {e}")))?;
                (Endpoint::Tcp(addr), Some(listener))
            }
        };
        tokio::spawn(serve_here(tcp, unix, self.clone()));
        Ok(endpoint)
    }
}

/// The accept loop of an [`InProcess`] listener: one of `tcp` and `unix` is set.
async fn serve_here(tcp: Option<TcpListener>, unix: Option<UnixSocket>, here: InProcess) {
    let InProcess {
        state,
        mut stop,
        shared,
    } = here;
    let mut connections = JoinSet::new();
    let listeners = (tcp.as_ref(), unix.as_ref());
    accept_until_stopped(
        listeners,
        &state,
        &mut stop,
        Some(&shared),
        &mut connections,
    )
    .await;
    drop((tcp, unix));
    while let Some(done) = connections.join_next().await {
        report_connection_end(done);
    }
}

/// A stop signal is pending when `true` was sent or the handle is gone.
fn stop_requested(stop: &watch::Receiver<bool>) -> bool {
    *stop.borrow() || stop.has_changed().is_err()
}

/// MongoDB's TTL monitor: every interval (first one after a full interval, as mongod sleeps
/// before its first pass), delete the documents whose TTL index date has expired.
async fn ttl_monitor(state: Arc<ServerState>, mut stop: watch::Receiver<bool>) {
    let period = state
        .config
        .ttl_monitor_interval
        .max(Duration::from_millis(10));
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop_requested(&stop) {
        tokio::select! {
            biased;
            _ = stop.changed() => {}
            _ = ticks.tick() => {
                let sweeping = Arc::clone(&state);
                let now = bson::DateTime::now();
                // The sweep takes collection locks: keep it off the async worker threads.
                match tokio::task::spawn_blocking(move || sweeping.catalog.expire_ttl_documents(now))
                    .await
                {
                    Ok(0) => {}
                    Ok(n) => debug!(deleted = n, "TTL monitor deleted expired documents"),
                    Err(e) => error!("TTL monitor pass failed: {e}"),
                }
            }
        }
    }
}

/// The Unix domain socket listener and the path it was bound at (removed when it closes).
struct UnixSocket {
    path: PathBuf,
    #[cfg(unix)]
    listener: tokio::net::UnixListener,
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            debug!(path = %self.path.display(), "removing the Unix socket failed: {e}");
        }
    }
}

impl UnixSocket {
    /// Bind `path` with owner-only permissions, replacing a socket file a crashed run left
    /// there (the data directory's lock is already held, so no running server owns it). On
    /// failure warn and return `None`: clients still have TCP.
    #[cfg(unix)]
    fn bind(path: &Path) -> Option<UnixSocket> {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if meta.file_type().is_socket() {
                let _ = std::fs::remove_file(path);
            }
        }
        let bound = tokio::net::UnixListener::bind(path).and_then(|listener| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            Ok(listener)
        });
        match bound {
            Ok(listener) => {
                info!(path = %path.display(), "docstore listening on a Unix socket");
                Some(UnixSocket {
                    path: path.to_path_buf(),
                    listener,
                })
            }
            Err(e) => {
                warn!(path = %path.display(), "cannot listen on the Unix socket, serving TCP only: {e}");
                let _ = std::fs::remove_file(path);
                None
            }
        }
    }

    #[cfg(not(unix))]
    fn bind(path: &Path) -> Option<UnixSocket> {
        warn!(path = %path.display(), "Unix sockets need a Unix system; serving TCP only");
        None
    }
}

/// The next connection on the Unix socket; never resolves when there is none.
#[cfg(unix)]
async fn accept_unix(unix: Option<&UnixSocket>) -> std::io::Result<tokio::net::UnixStream> {
    match unix {
        Some(u) => u.listener.accept().await.map(|(stream, _)| stream),
        None => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn accept_unix(_: Option<&UnixSocket>) -> std::io::Result<tokio::net::TcpStream> {
    std::future::pending().await
}

/// The next connection on the TCP listener; never resolves when there is none.
async fn accept_tcp(
    tcp: Option<&TcpListener>,
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match tcp {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// Per-connection failures (reset before accept) are routine; running out of file descriptors
/// is not, and retrying at once would spin.
async fn accept_failed(e: std::io::Error) {
    warn!("accepting a connection failed: {e}");
    if !matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
    ) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    unix: Option<UnixSocket>,
    state: Arc<ServerState>,
    mut stop: watch::Receiver<bool>,
    ttl_monitor: JoinHandle<()>,
) {
    let mut connections = JoinSet::new();
    let listeners = (Some(&listener), unix.as_ref());
    accept_until_stopped(listeners, &state, &mut stop, None, &mut connections).await;
    // The Unix socket's file goes with it (see `UnixSocket`'s `Drop`).
    drop((listener, unix));
    debug!(
        open = connections.len(),
        "docstore stopping: draining connections"
    );
    let drain = async {
        while let Some(done) = connections.join_next().await {
            report_connection_end(done);
        }
        // Connections of in-process listeners stop on the same signal, on their own runtimes.
        while state.open_connections.load(Ordering::Relaxed) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        warn!(
            open = state.open_connections.load(Ordering::Relaxed),
            "connections did not finish within {SHUTDOWN_GRACE:?}; closing them"
        );
        connections.shutdown().await;
    }
    // The monitor stops on the same signal; wait for it so its last deletions are flushed too.
    if let Err(e) = ttl_monitor.await {
        error!("TTL monitor ended abnormally: {e}");
    }
    let flushing = Arc::clone(&state);
    if let Err(e) = tokio::task::spawn_blocking(move || flushing.shutdown()).await {
        error!("flushing the journal at shutdown failed: {e}");
    }
    info!("docstore stopped");
}

/// Accept connections on the TCP and the Unix listener (either may be absent) until the stop
/// signal, each served as a task of `connections`; `shared` as for [`serve_connection`].
async fn accept_until_stopped(
    (tcp, unix): (Option<&TcpListener>, Option<&UnixSocket>),
    state: &Arc<ServerState>,
    stop: &mut watch::Receiver<bool>,
    shared: Option<&tokio::runtime::Handle>,
    connections: &mut JoinSet<()>,
) {
    while !stop_requested(stop) {
        tokio::select! {
            biased;
            _ = stop.changed() => {}
            Some(done) = connections.join_next(), if !connections.is_empty() => {
                report_connection_end(done);
            }
            accepted = accept_tcp(tcp) => match accepted {
                Ok((stream, peer)) => {
                    // Replies are written whole in one call; Nagle would only delay them.
                    if let Err(e) = stream.set_nodelay(true) {
                        debug!(%peer, "cannot set TCP_NODELAY: {e}");
                    }
                    connections.spawn(serve_connection(
                        stream,
                        Some(peer),
                        Arc::clone(state),
                        stop.clone(),
                        shared.cloned(),
                    ));
                }
                Err(e) => accept_failed(e).await,
            },
            accepted = accept_unix(unix) => match accepted {
                Ok(stream) => {
                    connections.spawn(serve_connection(
                        stream,
                        None,
                        Arc::clone(state),
                        stop.clone(),
                        shared.cloned(),
                    ));
                }
                Err(e) => accept_failed(e).await,
            },
        }
    }
}

fn report_connection_end(done: std::result::Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        if e.is_panic() {
            error!("a connection task panicked; that connection was closed: {e}");
        }
    }
}

/// Counts a connection as open for as long as it lives (also when its task unwinds).
struct OpenConnection(Arc<ServerState>);

impl OpenConnection {
    fn new(state: &Arc<ServerState>) -> Self {
        state.open_connections.fetch_add(1, Ordering::Relaxed);
        OpenConnection(Arc::clone(state))
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open_connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What to do after one message.
enum Step {
    Reply(Vec<u8>),
    Silent,
    Close,
}

/// Who is at the other end of a connection, for log lines: its TCP address, or the Unix socket.
struct Peer(Option<SocketAddr>);

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(addr) => addr.fmt(f),
            None => f.write_str("unix socket"),
        }
    }
}

/// Serve one connection until it closes or the server stops. `shared` is the runtime a command
/// that may run long is handed to when this one is a current-thread runtime ([`InProcess`]).
async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    peer: Option<SocketAddr>,
    state: Arc<ServerState>,
    mut stop: watch::Receiver<bool>,
    shared: Option<tokio::runtime::Handle>,
) {
    let _open = OpenConnection::new(&state);
    let conn = Arc::new(state.new_connection(peer));
    let peer = Peer(peer);
    debug!(%peer, connection = conn.id, "connection accepted");
    let mut stream = BufReader::with_capacity(READ_BUFFER, stream);
    let mut buf = Vec::new();
    loop {
        if stop_requested(&stop) {
            break;
        }
        // Only the wait for the next message is cut short by shutdown: a command that has been
        // read runs to completion and its reply is written.
        let read = tokio::select! {
            biased;
            _ = stop.changed() => break,
            read = wire::read_message(&mut stream, &mut buf) => read,
        };
        match read {
            Ok(true) => {}
            Ok(false) => break,
            Err(WireError::Io(e)) => {
                debug!(%peer, connection = conn.id, "connection read failed: {e}");
                break;
            }
            Err(e) => {
                warn!(%peer, connection = conn.id, "closing connection: {e}");
                break;
            }
        }
        let step = handle_message(&state, &conn, &peer, &buf, shared.as_ref()).await;
        if buf.capacity() > wire::RETAINED_BUFFER_CAPACITY {
            buf = Vec::new();
        }
        match step {
            Step::Reply(bytes) => {
                if let Err(e) = stream.get_mut().write_all(&bytes).await {
                    debug!(%peer, connection = conn.id, "writing a reply failed: {e}");
                    break;
                }
            }
            Step::Silent => {}
            Step::Close => break,
        }
    }
    debug!(%peer, connection = conn.id, "connection closed");
}

/// Parse one message, run its command and encode the answer.
async fn handle_message(
    state: &Arc<ServerState>,
    conn: &Arc<ConnectionInfo>,
    peer: &Peer,
    bytes: &[u8],
    shared: Option<&tokio::runtime::Handle>,
) -> Step {
    match wire::parse_message(bytes) {
        Ok(Message::Msg(msg)) => {
            let request_id = msg.header.request_id;
            let more_to_come = msg.more_to_come();
            let checksum = msg.checksum_present();
            let reply = if msg.body.contains_key("$db") {
                run_command(state, conn, msg.body, shared).await
            } else {
                Answer::Document(
                    Error::location(40571, "OP_MSG requests require a $db argument")
                        .to_command_reply(),
                )
            };
            match reply {
                _ if more_to_come => Step::Silent,
                Answer::Document(reply) => {
                    Step::Reply(wire::encode_op_msg(request_id, &reply, checksum))
                }
                Answer::Encoded(body) => {
                    Step::Reply(wire::encode_op_msg_bytes(request_id, &body, checksum))
                }
            }
        }
        Ok(Message::Query(query)) => {
            let request_id = query.header.request_id;
            let Some(db) = query.command_database().map(str::to_string) else {
                error!(
                    %peer,
                    connection = conn.id,
                    namespace = %query.full_collection_name,
                    "legacy OP_QUERY on a collection is not supported; closing connection"
                );
                return Step::Close;
            };
            let mut command = query.into_command();
            let reply = match command.keys().next() {
                Some(name) if !wire::OP_QUERY_ALLOWED_COMMANDS.contains(&name.as_str()) => {
                    unsupported_op_query_command(name)
                }
                _ => {
                    command.insert("$db", db);
                    commands::dispatch(state, conn, command)
                        .await
                        .into_document()
                }
            };
            Step::Reply(wire::encode_op_reply(request_id, &reply))
        }
        Err(WireError::Rejected { target, error }) => reject(target, &error),
        Err(e @ (WireError::UnsupportedOpCode(_) | WireError::LegacyQuery(_))) => {
            error!(%peer, connection = conn.id, "{e}; closing connection");
            Step::Close
        }
        Err(e) => {
            warn!(%peer, connection = conn.id, "closing connection: {e}");
            Step::Close
        }
    }
}

/// Commands that may visit a whole collection or index (a count or distinct over an unindexed
/// filter, an aggregation, an index build, validation, statistics), or write many documents.
/// Finds and getMores are not among them: a listing's find reads a page and stops, and a
/// cursor hands out bounded batches.
fn may_run_long(cmd: &Document) -> bool {
    matches!(
        cmd.keys().next().map(String::as_str),
        Some(
            "count"
                | "distinct"
                | "aggregate"
                | "createIndexes"
                | "validate"
                | "dbStats"
                | "dbstats"
                | "collStats"
                | "collstats"
        )
    )
}

/// Counts a command as running off the async workers for as long as it runs.
struct LongCommand<'a>(&'a ServerState);

impl<'a> LongCommand<'a> {
    fn new(state: &'a ServerState) -> Self {
        state.long_commands.fetch_add(1, Ordering::SeqCst);
        LongCommand(state)
    }
}

impl Drop for LongCommand<'_> {
    fn drop(&mut self) {
        self.0.long_commands.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Run one command. Commands run on the connection's own task, on one of the runtime's async
/// worker threads; one that may take long ([`may_run_long`]: a count of 300 000 documents takes
/// half a second) first hands that worker over to a new thread with
/// [`tokio::task::block_in_place`], so the other connections queued on the worker are served
/// meanwhile rather than after it. On a current-thread runtime (there is no other worker to
/// hand over to) a command runs in place, unless the connection belongs to an [`InProcess`]
/// listener: then one that may take long is handed to the server's own runtime (`shared`).
async fn run_command(
    state: &Arc<ServerState>,
    conn: &Arc<ConnectionInfo>,
    cmd: Document,
    shared: Option<&tokio::runtime::Handle>,
) -> Answer {
    match shared {
        Some(runtime) if may_run_long(&cmd) && !on_multi_thread_runtime() => {
            let (state, conn) = (Arc::clone(state), Arc::clone(conn));
            match runtime
                .spawn(async move { run_on_this_runtime(&state, &conn, cmd).await })
                .await
            {
                Ok(answer) => answer,
                Err(e) => Answer::Document(
                    Error::internal(format!("the command did not finish: {e}")).to_command_reply(),
                ),
            }
        }
        _ => run_on_this_runtime(state, conn, cmd).await,
    }
}

fn on_multi_thread_runtime() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// [`run_command`] on the current runtime.
async fn run_on_this_runtime(
    state: &Arc<ServerState>,
    conn: &ConnectionInfo,
    cmd: Document,
) -> Answer {
    if on_multi_thread_runtime() && may_run_long(&cmd) {
        let _running = LongCommand::new(state);
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(commands::dispatch(state, conn, cmd))
        })
    } else {
        commands::dispatch(state, conn, cmd).await
    }
}

/// The error reply for a well-framed request whose contents were refused.
fn reject(target: ReplyTarget, error: &Error) -> Step {
    let reply = error.to_command_reply();
    if target.legacy {
        Step::Reply(wire::encode_op_reply(target.request_id, &reply))
    } else if target.more_to_come {
        Step::Silent
    } else {
        Step::Reply(wire::encode_op_msg(
            target.request_id,
            &reply,
            target.checksum,
        ))
    }
}

/// MongoDB 7.0's answer to an OP_QUERY command other than the handshake.
fn unsupported_op_query_command(name: &str) -> Document {
    doc! {
        "ok": 0.0,
        "errmsg": format!(
            "Unsupported OP_QUERY command: {name}. The client driver may require an upgrade. \
             For more details see https://dochub.mongodb.org/core/legacy-opcode-removal"
        ),
        "code": 352,
        "codeName": "UnsupportedOpQueryCommand",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    /// Send `cmd` on `stream` and read its reply (blocking, plain `std` I/O: no async runtime
    /// on the client side that the server's could hold up).
    fn send(stream: &mut (impl Read + Write), cmd: Document) -> Document {
        stream
            .write_all(&wire::encode_op_msg(0, &cmd, false))
            .expect("sent");
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).expect("a reply");
        let total = i32::from_le_bytes(len) as usize;
        let mut message = vec![0u8; total];
        message[..4].copy_from_slice(&len);
        stream
            .read_exact(&mut message[4..])
            .expect("the whole reply");
        match wire::parse_message(&message).expect("a reply") {
            Message::Msg(msg) => msg.body,
            _ => panic!("not an OP_MSG reply"),
        }
    }

    /// A runtime with a single async worker (the server's), and a started in-memory server.
    fn single_worker_server() -> (tokio::runtime::Runtime, ServerHandle) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let server = runtime
            .block_on(Server::start(Config::default()))
            .expect("started");
        (runtime, server)
    }

    /// A count that cannot finish (its collection is locked by the test) is running on a
    /// connection to `addr` while another connection's ping is answered: the count did not keep
    /// every other connection served by the same runtime waiting behind it.
    fn a_blocked_count_leaves_pings_answered(server: &ServerHandle, addr: SocketAddr) {
        let connect = || {
            let stream = TcpStream::connect(addr).expect("connected");
            // Only so that a regression fails instead of hanging.
            stream
                .set_read_timeout(Some(Duration::from_secs(60)))
                .expect("a timeout");
            stream
        };
        let mut first = connect();
        let inserted = send(
            &mut first,
            doc! { "insert": "c", "documents": [{ "n": 1 }, { "n": 2 }], "$db": "t" },
        );
        assert_eq!(inserted.get_i32("n"), Ok(2), "{inserted}");
        let collection = server.state().catalog.get("t", "c").expect("created");
        let held = collection.write();
        let (done, finished) = std::sync::mpsc::channel();
        let counting = std::thread::spawn(move || {
            let reply = send(
                &mut first,
                doc! { "count": "c", "query": { "n": { "$gt": 0 } }, "$db": "t" },
            );
            done.send(()).expect("the test waits");
            reply
        });
        // The count has arrived and runs off the async workers (it waits for the collection the
        // test holds).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while server.state().long_commands.load(Ordering::SeqCst) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the count never ran as a long command on the server's runtime"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut second = connect();
        let pong = send(&mut second, doc! { "ping": 1, "$db": "admin" });
        assert_eq!(pong.get_f64("ok"), Ok(1.0), "{pong}");
        assert!(
            finished.try_recv().is_err(),
            "the count cannot have finished: its collection is still locked"
        );
        drop(held);
        let counted = counting.join().expect("the count's thread");
        assert_eq!(counted.get_i64("n"), Ok(2), "{counted}");
    }

    /// On a runtime with a single async worker, a long command hands its worker over instead of
    /// keeping every other connection waiting behind it.
    #[test]
    fn a_long_command_does_not_hold_up_another_connections_ping() {
        let (_runtime, server) = single_worker_server();
        a_blocked_count_leaves_pings_answered(&server, server.local_addr());
    }

    /// An [`InProcess`] listener opened on a current-thread runtime (another thread's, as an
    /// HTTP worker's): `unix` or loopback TCP. Returns where it listens and what ends that
    /// runtime.
    fn listen_on_a_current_thread_runtime(
        server: &ServerHandle,
        unix: Option<PathBuf>,
    ) -> (
        Endpoint,
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    ) {
        let here = server.in_process().expect("running");
        let (opened, endpoint) = std::sync::mpsc::channel();
        let (end, ended) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                opened
                    .send(here.listen_here(unix.as_deref()).expect("listening"))
                    .expect("the test waits");
                let _ = ended.await;
            });
        });
        (endpoint.recv().expect("an endpoint"), end, thread)
    }

    /// Through an in-process listener on a current-thread runtime, a long command runs on the
    /// server's own runtime: the listener's runtime goes on answering its other connections.
    #[test]
    fn an_in_process_listener_hands_long_commands_to_the_servers_runtime() {
        let (_runtime, server) = single_worker_server();
        let (endpoint, end, thread) = listen_on_a_current_thread_runtime(&server, None);
        let Endpoint::Tcp(addr) = endpoint else {
            panic!("no Unix socket was asked for: {endpoint:?}");
        };
        a_blocked_count_leaves_pings_answered(&server, addr);
        end.send(()).expect("the runtime runs");
        thread.join().expect("the listener's thread");
    }

    /// An in-process listener's Unix socket serves the server's data, and its file is removed
    /// when the runtime serving it ends.
    #[cfg(unix)]
    #[test]
    fn an_in_process_unix_socket_serves_the_same_data_and_goes_with_its_runtime() {
        use std::os::unix::net::UnixStream;
        let (_runtime, server) = single_worker_server();
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("worker.sock");
        let mut main = TcpStream::connect(server.local_addr()).expect("connected");
        send(
            &mut main,
            doc! { "insert": "c", "documents": [{ "_id": 1 }], "$db": "t" },
        );
        let (endpoint, end, thread) =
            listen_on_a_current_thread_runtime(&server, Some(path.clone()));
        assert_eq!(endpoint, Endpoint::Unix(path.clone()));
        let mut local = UnixStream::connect(&path).expect("connected");
        let found = send(&mut local, doc! { "count": "c", "$db": "t" });
        assert_eq!(found.get_i64("n"), Ok(1), "{found}");
        end.send(()).expect("the runtime runs");
        thread.join().expect("the listener's thread");
        assert!(!path.exists(), "the socket file outlived its listener");
    }
}
