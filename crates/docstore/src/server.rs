//! TCP listener (and, when configured, a Unix domain socket) and the per-connection loop: read
//! a frame, dispatch the command, write the reply. A connection that sends garbage is closed on
//! its own; nothing it sends can stop the others.

use crate::commands::{self, Answer};
use crate::config::Config;
use crate::error::{Error, ErrorCode, Result};
use crate::login_throttle::Client;
use crate::state::{ConnectionInfo, ServerState};
use crate::wire::{self, Message, ReplyTarget, WireError};
use bson::{doc, Bson, Document};
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

    /// The server's state, for tests that look inside it.
    #[cfg(test)]
    pub(crate) fn state(&self) -> &Arc<ServerState> {
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
/// before its first pass), delete the documents whose TTL index date has expired. The interval
/// is read anew for each sleep, and a change (`setParameter` `ttlMonitorSleepSecs`) starts a
/// new sleep of the new length at once.
async fn ttl_monitor(state: Arc<ServerState>, mut stop: watch::Receiver<bool>) {
    while !stop_requested(&stop) {
        let period = (*state.ttl_monitor_interval.lock()).max(Duration::from_millis(10));
        tokio::select! {
            biased;
            _ = stop.changed() => {}
            _ = state.ttl_monitor_changed.notified() => {}
            _ = tokio::time::sleep(period) => {
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
                    let Some(open) = OpenConnection::try_new(state) else {
                        refuse_connection(state, Some(peer));
                        continue;
                    };
                    // Replies are written whole in one call; Nagle would only delay them.
                    if let Err(e) = stream.set_nodelay(true) {
                        debug!(%peer, "cannot set TCP_NODELAY: {e}");
                    }
                    connections.spawn(serve_connection(
                        stream,
                        Some(peer),
                        open,
                        stop.clone(),
                        shared.cloned(),
                    ));
                }
                Err(e) => accept_failed(e).await,
            },
            accepted = accept_unix(unix) => match accepted {
                Ok(stream) => {
                    let Some(open) = OpenConnection::try_new(state) else {
                        refuse_connection(state, None);
                        continue;
                    };
                    connections.spawn(serve_connection(
                        stream,
                        None,
                        open,
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

/// Counts a connection as open for as long as it lives (also when its task unwinds). Taken when
/// the connection is accepted, so that a burst of connections cannot slip past the cap before
/// their tasks run.
struct OpenConnection(Arc<ServerState>);

impl OpenConnection {
    /// A place for one more connection, unless `Config::max_connections` are open already.
    fn try_new(state: &Arc<ServerState>) -> Option<Self> {
        let cap = i64::try_from(state.config.max_connections).unwrap_or(i64::MAX);
        state
            .open_connections
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| {
                (open < cap).then_some(open + 1)
            })
            .ok()
            .map(|_| OpenConnection(Arc::clone(state)))
    }
}

/// How often, at most, the log says connections are being refused (a flood of them must not
/// flood the log too).
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Close a connection accepted past the cap (dropping the stream closes it; the client's driver
/// sees the connection closed, as with mongod past `maxConns`) and say so now and then.
fn refuse_connection(state: &ServerState, peer: Option<SocketAddr>) {
    let refused = state.refused_connections.fetch_add(1, Ordering::Relaxed) + 1;
    let mut logged = state.refusal_logged.lock();
    let now = std::time::Instant::now();
    if logged.is_none_or(|at| now.duration_since(at) >= REFUSAL_LOG_INTERVAL) {
        *logged = Some(now);
        warn!(
            peer = %Peer(peer),
            limit = state.config.max_connections,
            refused_so_far = refused,
            "refusing a connection: the connection limit is reached (Config::max_connections)"
        );
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
    /// The first reply of an exhaust cursor's stream (sent with `moreToCome`): the server then
    /// runs `getMore` again and sends each batch unasked until the cursor is exhausted.
    Exhaust {
        first: Vec<u8>,
        get_more: Document,
        checksum: bool,
    },
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
    open: OpenConnection,
    mut stop: watch::Receiver<bool>,
    shared: Option<tokio::runtime::Handle>,
) {
    let state = Arc::clone(&open.0);
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
            read = wire::read_message(&mut stream, &mut buf, message_limit(&state, &conn)) => read,
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
            Step::Exhaust {
                first,
                get_more,
                checksum,
            } => {
                if let Err(e) = stream_exhaust(
                    &state,
                    &conn,
                    stream.get_mut(),
                    first,
                    get_more,
                    checksum,
                    shared.as_ref(),
                )
                .await
                {
                    debug!(%peer, connection = conn.id, "writing an exhaust stream failed: {e}");
                    break;
                }
            }
            Step::Silent => {}
            Step::Close => break,
        }
    }
    // The buffers go with the connection (a large one was already released after its message).
    drop((stream, buf, open));
    debug!(%peer, connection = conn.id, "connection closed");
}

/// Sends the rest of an exhaust cursor after its first reply: each batch answers the reply
/// before it (`responseTo`), carries `moreToCome` while the cursor stays open, and the last one
/// (the cursor exhausted, or an error) clears it, which hands the connection back to the client.
async fn stream_exhaust<S: AsyncWrite + Unpin>(
    state: &Arc<ServerState>,
    conn: &Arc<ConnectionInfo>,
    stream: &mut S,
    first: Vec<u8>,
    get_more: Document,
    checksum: bool,
    shared: Option<&tokio::runtime::Handle>,
) -> std::io::Result<()> {
    let mut reply = first;
    loop {
        stream.write_all(&reply).await?;
        let answer = run_command(state, conn, get_more.clone(), None, shared).await;
        let more = cursor_continues(&answer);
        reply = wire::encode_op_msg_streamed(
            wire::request_id_of(&reply),
            &answer_bytes(answer),
            checksum,
            more,
        );
        if !more {
            return stream.write_all(&reply).await;
        }
    }
}

/// Whether a command's answer is a cursor batch with more to come (a non-zero cursor id).
fn cursor_continues(answer: &Answer) -> bool {
    let id = |raw: &bson::RawDocument| {
        raw.get_document("cursor")
            .ok()
            .and_then(|c| c.get_i64("id").ok())
    };
    let cursor_id = match answer {
        Answer::Document(doc) => doc
            .get_document("cursor")
            .ok()
            .and_then(|c| c.get_i64("id").ok()),
        Answer::Encoded(bytes) => bson::RawDocument::from_bytes(bytes).ok().and_then(id),
    };
    cursor_id.is_some_and(|id| id != 0)
}

/// An answer as BSON bytes.
fn answer_bytes(answer: Answer) -> Vec<u8> {
    match answer {
        Answer::Encoded(bytes) => bytes,
        Answer::Document(doc) => bson::to_vec(&doc).unwrap_or_else(|e| {
            bson::to_vec(&Error::internal(format!("cannot encode a reply: {e}")).to_command_reply())
                .unwrap_or_default()
        }),
    }
}

/// The longest message `conn` may send next: small until it has authenticated, when
/// authentication is on ([`wire::MAX_UNAUTHENTICATED_MESSAGE_SIZE`]).
fn message_limit(state: &ServerState, conn: &ConnectionInfo) -> usize {
    if state.auth.is_some() && conn.auth.lock().user().is_none() {
        wire::MAX_UNAUTHENTICATED_MESSAGE_SIZE
    } else {
        wire::MAX_MESSAGE_SIZE
    }
}

/// Parse one message, run its command and encode the answer.
async fn handle_message(
    state: &Arc<ServerState>,
    conn: &Arc<ConnectionInfo>,
    peer: &Peer,
    bytes: &[u8],
    shared: Option<&tokio::runtime::Handle>,
) -> Step {
    match wire::parse_keeping_inserts(bytes) {
        Ok(Message::Msg(msg)) => {
            let request_id = msg.header.request_id;
            let more_to_come = msg.more_to_come();
            let checksum = msg.checksum_present();
            // Only a getMore streams (as in mongod): the driver asked for the whole cursor.
            let exhaust = (msg.exhaust_allowed()
                && msg.body.keys().next().map(String::as_str) == Some("getMore"))
            .then(|| msg.body.clone());
            let reply = if msg.body.contains_key("$db") {
                let login = LoginStep::of(state, &msg.body);
                let run = run_command(state, conn, msg.body, msg.documents, shared);
                throttled(state, conn, login, run).await
            } else {
                Answer::Document(
                    Error::location(40571, "OP_MSG requests require a $db argument")
                        .to_command_reply(),
                )
            };
            match reply {
                _ if more_to_come => Step::Silent,
                answer if exhaust.is_some() && cursor_continues(&answer) => Step::Exhaust {
                    first: wire::encode_op_msg_streamed(
                        request_id,
                        &answer_bytes(answer),
                        checksum,
                        true,
                    ),
                    get_more: exhaust.unwrap_or_default(),
                    checksum,
                },
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
                    // pymongo and mongosh start with a legacy `hello`, which may carry a
                    // speculative login: throttled like any other.
                    let login = LoginStep::of(state, &command);
                    let run = commands::dispatch(state, conn, command, None);
                    throttled(state, conn, login, run).await.into_document()
                }
            };
            Step::Reply(wire::encode_op_reply(request_id, &reply))
        }
        Err(WireError::Rejected { target, error }) => reject(target, &error),
        Err(e @ WireError::UnsupportedOpCode(_)) => {
            error!(%peer, connection = conn.id, "{e}; closing connection");
            Step::Close
        }
        Err(e) => {
            warn!(%peer, connection = conn.id, "closing connection: {e}");
            Step::Close
        }
    }
}

/// What a command is to the login throttle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoginStep {
    /// Not part of a login (or authentication is off).
    None,
    /// Begins an attempt (`saslStart`, `authenticate`, a `hello` with `speculativeAuthenticate`):
    /// waits first if the client has failed too often.
    Start,
    /// Continues one (`saslContinue`): its failure counts, but it does not wait again.
    Continue,
}

impl LoginStep {
    fn of(state: &ServerState, cmd: &Document) -> LoginStep {
        if state.auth.is_none() {
            return LoginStep::None;
        }
        match cmd.keys().next().map(String::as_str) {
            Some("saslStart" | "authenticate") => LoginStep::Start,
            Some("hello" | "isMaster" | "ismaster")
                if cmd.contains_key("speculativeAuthenticate") =>
            {
                LoginStep::Start
            }
            Some("saslContinue") => LoginStep::Continue,
            _ => LoginStep::None,
        }
    }
}

/// Run `command`, a step of a login when `login` says so: an attempt from a client address with
/// too many failures behind it first waits ([`crate::login_throttle`]), with an async sleep on
/// this connection's task only, so no other connection waits with it; then a failure
/// (AuthenticationFailed) or a success is recorded against the address.
async fn throttled(
    state: &ServerState,
    conn: &ConnectionInfo,
    login: LoginStep,
    command: impl std::future::Future<Output = Answer>,
) -> Answer {
    if login == LoginStep::None {
        return command.await;
    }
    let client = Client::of(conn.peer);
    if login == LoginStep::Start {
        let wait = state
            .login_throttle
            .admit(client, std::time::Instant::now());
        if !wait.is_zero() {
            debug!(
                connection = conn.id,
                wait_ms = wait.as_millis() as u64,
                "delaying a login attempt after repeated failures from this address"
            );
            tokio::time::sleep(wait).await;
        }
    }
    let was_authenticated = conn.auth.lock().user().is_some();
    let answer = command.await;
    if !was_authenticated && conn.auth.lock().user().is_some() {
        state.login_throttle.succeeded(client);
    } else if matches!(&answer, Answer::Document(reply)
        if reply.get_i32("code") == Ok(ErrorCode::AuthenticationFailed.code()))
    {
        state
            .login_throttle
            .failed(client, std::time::Instant::now());
    }
    answer
}

/// Commands that may visit a whole collection or index (a count or distinct over an unindexed
/// filter, an aggregation, an index build, validation, statistics), or write many documents,
/// and the finds [`find_may_run_long`] picks out.
fn may_run_long(state: &ServerState, cmd: &Document) -> bool {
    match cmd.keys().next().map(String::as_str) {
        Some(
            "count" | "distinct" | "aggregate" | "createIndexes" | "validate" | "dbStats"
            | "dbstats" | "collStats" | "collstats",
        ) => true,
        Some("find") => find_may_run_long(state, cmd),
        Some("insert" | "update" | "delete" | "findAndModify" | "findandmodify") => {
            write_may_wait(state, cmd)
        }
        _ => false,
    }
}

/// A write whose collection is locked right now (another write to it under way, or a long
/// read) would wait for the lock on the worker thread, and every connection served by that
/// thread would wait with it: one hot document's queue of writers would stall unrelated pages.
/// Such a write is handed over like a long command; an uncontended write runs in place.
fn write_may_wait(state: &ServerState, cmd: &Document) -> bool {
    let (Some((_, Bson::String(coll))), Ok(db)) = (cmd.iter().next(), cmd.get_str("$db")) else {
        return false;
    };
    state
        .catalog
        .get(db, coll)
        .is_some_and(|collection| collection.is_locked())
}

/// A collection this small is read whole in well under a millisecond: handing a find over it
/// to another thread would cost more than running it.
const SMALL_COLLECTION: usize = 1_000;

/// The rule for finds. A find is handed over when
/// - its filter has `$text` (at the top or inside `$and`/`$or`/`$nor`): a text search reads
///   and scores every document holding a term, and with a phrase or a negation tokenizes each
///   again (0.3–0.4 s over 10 000 products), or
/// - the planner would answer it by reading the whole collection (a collection scan, or a walk
///   of a whole index without a limit) and the collection holds more than [`SMALL_COLLECTION`]
///   documents, or
/// - its collection is being written right now (the planner cannot look without waiting, and
///   the find would wait for the writer anyway: not on a thread that serves other requests).
///
/// Everything else runs in place, where it costs no hand-off: an index point or range lookup
/// (the product page's by-slug find, a category listing's page), or any find on a small
/// collection. `getMore` always runs in place: a find collects all of its cursor's documents,
/// so a `getMore` only hands out the next batch of them.
fn find_may_run_long(state: &ServerState, cmd: &Document) -> bool {
    let filter = match cmd.get("filter") {
        Some(Bson::Document(filter)) => filter,
        // Malformed: the find answers with the error at once.
        Some(Bson::Null) | None => &Document::new(),
        Some(_) => return false,
    };
    if has_text_search(filter, 0) {
        return true;
    }
    let (Ok(db), Some(Bson::String(coll))) = (cmd.get_str("$db"), cmd.get("find")) else {
        return false;
    };
    let Some(collection) = state.catalog.get(db, coll) else {
        return false;
    };
    let Some(collection) = collection.try_read() else {
        return true;
    };
    if collection.len() <= SMALL_COLLECTION {
        return false;
    }
    let limit = ["limit", "skip"]
        .iter()
        .map(|field| cmd.get(field).and_then(count_of))
        .collect::<Vec<_>>();
    let limit = match (limit[0], limit[1]) {
        (Some(0) | None, _) => None,
        (Some(limit), skip) => Some(limit.saturating_add(skip.unwrap_or(0))),
    };
    collection.find_reads_everything(
        filter,
        cmd.get_document("sort").ok(),
        cmd.get("hint"),
        limit,
    )
}

/// A find's `limit` or `skip` as a count (a negative limit means the same number, in one batch).
fn count_of(value: &Bson) -> Option<usize> {
    let n = match value {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if d.is_finite() => *d as i64,
        _ => return None,
    };
    usize::try_from(n.unsigned_abs()).ok()
}

/// Whether `filter` holds a `$text` query where MongoDB allows one: at its top level, or in a
/// branch of a top-level `$and`, `$or` or `$nor` (and their own branches).
fn has_text_search(filter: &Document, depth: usize) -> bool {
    // Filters arrive through the wire's depth check; the bound only keeps this obviously finite.
    if depth > wire::MAX_BSON_DEPTH {
        return false;
    }
    filter
        .iter()
        .any(|(key, value)| {
            match (key.as_str(), value) {
        ("$text", _) => true,
        ("$and" | "$or" | "$nor", Bson::Array(branches)) => branches.iter().any(|branch| {
            matches!(branch, Bson::Document(branch) if has_text_search(branch, depth + 1))
        }),
        _ => false,
    }
        })
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
/// Run `cmd` (with an insert's `documents` as sent, [`wire::OpMsg::documents`]).
async fn run_command(
    state: &Arc<ServerState>,
    conn: &Arc<ConnectionInfo>,
    cmd: Document,
    documents: Option<Vec<Arc<[u8]>>>,
    shared: Option<&tokio::runtime::Handle>,
) -> Answer {
    let long = may_run_long(state, &cmd);
    match shared {
        Some(runtime) if long && !on_multi_thread_runtime() => {
            let (state, conn) = (Arc::clone(state), Arc::clone(conn));
            match runtime
                .spawn(
                    async move { run_on_this_runtime(&state, &conn, cmd, documents, long).await },
                )
                .await
            {
                Ok(answer) => answer,
                Err(e) => Answer::Document(
                    Error::internal(format!("the command did not finish: {e}")).to_command_reply(),
                ),
            }
        }
        _ => run_on_this_runtime(state, conn, cmd, documents, long).await,
    }
}

fn on_multi_thread_runtime() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// [`run_command`] on the current runtime; `long` is [`may_run_long`]'s verdict.
async fn run_on_this_runtime(
    state: &Arc<ServerState>,
    conn: &ConnectionInfo,
    cmd: Document,
    documents: Option<Vec<Arc<[u8]>>>,
    long: bool,
) -> Answer {
    if long && on_multi_thread_runtime() {
        let _running = LongCommand::new(state);
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current()
                .block_on(commands::dispatch(state, conn, cmd, documents))
        })
    } else {
        commands::dispatch(state, conn, cmd, documents).await
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
        let setup = [doc! { "insert": "c", "documents": [{ "n": 1 }, { "n": 2 }], "$db": "t" }];
        let count = doc! { "count": "c", "query": { "n": { "$gt": 0 } }, "$db": "t" };
        let counted = a_blocked_command_leaves_pings_answered(server, addr, &setup, count, "count");
        assert_eq!(counted.get_i64("n"), Ok(2), "{counted}");
    }

    /// Run `setup` on a connection to `addr`, lock the collection `command` names, send
    /// `command` on that connection, and check that it runs as a long command (on the server's
    /// runtime) while a ping on a second connection is answered and `command` cannot finish.
    /// Returns `command`'s reply once the lock is released.
    fn a_blocked_command_leaves_pings_answered(
        server: &ServerHandle,
        addr: SocketAddr,
        setup: &[Document],
        command: Document,
        what: &str,
    ) -> Document {
        let connect = || {
            let stream = TcpStream::connect(addr).expect("connected");
            // Only so that a regression fails instead of hanging.
            stream
                .set_read_timeout(Some(Duration::from_secs(60)))
                .expect("a timeout");
            stream
        };
        let mut first = connect();
        for step in setup {
            let reply = send(&mut first, step.clone());
            assert_eq!(reply.get_f64("ok"), Ok(1.0), "{reply}");
        }
        let db = command.get_str("$db").expect("$db");
        let name = command
            .iter()
            .next()
            .and_then(|(_, v)| v.as_str())
            .expect("the command names its collection");
        let collection = server.state().catalog.get(db, name).expect("created");
        let held = collection.write();
        let (done, finished) = std::sync::mpsc::channel();
        let running = std::thread::spawn(move || {
            let reply = send(&mut first, command);
            done.send(()).expect("the test waits");
            reply
        });
        // The command has arrived and runs off the async workers (it waits for the collection
        // the test holds).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while server.state().long_commands.load(Ordering::SeqCst) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the {what} never ran as a long command on the server's runtime"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut second = connect();
        let pong = send(&mut second, doc! { "ping": 1, "$db": "admin" });
        assert_eq!(pong.get_f64("ok"), Ok(1.0), "{pong}");
        assert!(
            finished.try_recv().is_err(),
            "the {what} cannot have finished: its collection is still locked"
        );
        drop(held);
        running.join().expect("the command's thread")
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

    /// A server requiring `app`/`secret`, with at most `max_connections` connections.
    fn server_with(max_connections: usize, auth: bool) -> (tokio::runtime::Runtime, ServerHandle) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let user = auth.then(|| crate::auth::User::with_password("app", "secret").expect("a user"));
        let server = runtime
            .block_on(Server::start(Config {
                max_connections,
                user,
                ..Config::default()
            }))
            .expect("started");
        (runtime, server)
    }

    /// Whether the server closed `stream` (end of stream or reset) within a few seconds.
    fn closed_by_the_server(stream: &mut TcpStream) -> bool {
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("a timeout");
        let mut byte = [0u8; 1];
        match stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }

    /// With authentication on, a connection that has not authenticated and announces a 40 MB
    /// frame is closed as soon as the length arrives: the server does not wait for (or buffer)
    /// the body. Small messages before authentication, and other connections, still work.
    #[test]
    fn an_unauthenticated_connection_announcing_a_large_frame_is_closed_without_reading_it() {
        let (_runtime, server) = server_with(crate::config::DEFAULT_MAX_CONNECTIONS, true);
        let mut attacker = TcpStream::connect(server.local_addr()).expect("connected");
        // Only the header of an OP_MSG announcing 40 MB (the body never comes).
        let header: Vec<u8> = [40_000_000, 1, 0, wire::OP_MSG]
            .iter()
            .flat_map(|field: &i32| field.to_le_bytes())
            .collect();
        attacker.write_all(&header).expect("sent");
        assert!(
            closed_by_the_server(&mut attacker),
            "the connection stayed open waiting for 40 MB"
        );

        // Just over the limit is refused too; a handshake-sized message is not.
        let mut over = TcpStream::connect(server.local_addr()).expect("connected");
        let padding = "x".repeat(wire::MAX_UNAUTHENTICATED_MESSAGE_SIZE);
        // The server may close before the whole message is written: only the closing counts.
        let _ = over.write_all(&wire::encode_op_msg(
            2,
            &doc! { "hello": 1, "pad": padding, "$db": "admin" },
            false,
        ));
        assert!(closed_by_the_server(&mut over));
        let mut client = TcpStream::connect(server.local_addr()).expect("connected");
        let hello = send(&mut client, doc! { "hello": 1, "$db": "admin" });
        assert_eq!(hello.get_f64("ok"), Ok(1.0), "{hello}");
    }

    /// Without authentication every client is trusted as the owner, as with mongod: the frame
    /// limit stays the protocol's.
    #[test]
    fn without_authentication_a_large_message_is_read_whole() {
        let (_runtime, server) = server_with(crate::config::DEFAULT_MAX_CONNECTIONS, false);
        let mut client = TcpStream::connect(server.local_addr()).expect("connected");
        let big = "x".repeat(2 * wire::MAX_UNAUTHENTICATED_MESSAGE_SIZE);
        let reply = send(
            &mut client,
            doc! { "insert": "c", "documents": [{ "big": big }], "$db": "t" },
        );
        assert_eq!(reply.get_i32("n"), Ok(1), "{reply}");
    }

    /// Past `max_connections` a new connection is closed at once, the open ones keep working,
    /// and a place freed by a closed connection can be taken again.
    #[test]
    fn connections_past_the_limit_are_closed_and_the_others_keep_working() {
        let (_runtime, server) = server_with(2, false);
        let addr = server.local_addr();
        let mut first = TcpStream::connect(addr).expect("connected");
        let mut second = TcpStream::connect(addr).expect("connected");
        for stream in [&mut first, &mut second] {
            let pong = send(stream, doc! { "ping": 1, "$db": "admin" });
            assert_eq!(pong.get_f64("ok"), Ok(1.0), "{pong}");
        }
        let mut third = TcpStream::connect(addr).expect("the kernel accepts it");
        assert!(
            closed_by_the_server(&mut third),
            "a third connection was served"
        );
        assert_eq!(
            server.state().refused_connections.load(Ordering::Relaxed),
            1
        );
        let pong = send(&mut first, doc! { "ping": 1, "$db": "admin" });
        assert_eq!(pong.get_f64("ok"), Ok(1.0), "{pong}");

        drop(second);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while server.state().open_connections.load(Ordering::Relaxed) > 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the closed connection was not counted out"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut again = TcpStream::connect(addr).expect("connected");
        let pong = send(&mut again, doc! { "ping": 1, "$db": "admin" });
        assert_eq!(pong.get_f64("ok"), Ok(1.0), "{pong}");
    }

    /// A `$text` find cannot finish (its collection is locked by the test) while another
    /// connection's ping is answered: through an in-process listener on a current-thread
    /// runtime, the text search ran on the server's runtime, not on the listener's thread.
    #[test]
    fn an_in_process_listener_hands_text_searches_to_the_servers_runtime() {
        let (_runtime, server) = single_worker_server();
        let (endpoint, end, thread) = listen_on_a_current_thread_runtime(&server, None);
        let Endpoint::Tcp(addr) = endpoint else {
            panic!("no Unix socket was asked for: {endpoint:?}");
        };
        let setup = [
            doc! {
                "createIndexes": "products",
                "indexes": [{ "key": { "title": "text" }, "name": "title_text" }],
                "$db": "shop",
            },
            doc! {
                "insert": "products",
                "documents": [{ "title": "blue mug" }, { "title": "red mug" }],
                "$db": "shop",
            },
        ];
        let search = doc! {
            "find": "products",
            "filter": { "$text": { "$search": "mug -red" } },
            "$db": "shop",
        };
        let found =
            a_blocked_command_leaves_pings_answered(&server, addr, &setup, search, "text search");
        let batch = found
            .get_document("cursor")
            .and_then(|c| c.get_array("firstBatch"))
            .expect("a cursor");
        assert_eq!(batch.len(), 1, "{found}");
        end.send(()).expect("the runtime runs");
        thread.join().expect("the listener's thread");
    }

    /// An update of a document whose collection another writer holds waits on the server's
    /// runtime, not on the in-process listener's only thread: a queue of writers to one hot
    /// document leaves the thread's other connections served.
    #[test]
    fn an_in_process_listener_hands_a_write_waiting_for_its_collection_to_the_servers_runtime() {
        let (_runtime, server) = single_worker_server();
        let (endpoint, end, thread) = listen_on_a_current_thread_runtime(&server, None);
        let Endpoint::Tcp(addr) = endpoint else {
            panic!("no Unix socket was asked for: {endpoint:?}");
        };
        let setup = [doc! {
            "insert": "products",
            "documents": [{ "_id": 1, "qty": 5 }],
            "$db": "shop",
        }];
        let update = doc! {
            "update": "products",
            "updates": [{ "q": { "_id": 1, "qty": { "$gte": 1 } }, "u": { "$inc": { "qty": -1 } } }],
            "$db": "shop",
        };
        let updated =
            a_blocked_command_leaves_pings_answered(&server, addr, &setup, update, "update");
        assert_eq!(updated.get_i32("nModified"), Ok(1), "{updated}");
        end.send(()).expect("the runtime runs");
        thread.join().expect("the listener's thread");
    }

    /// The rule for finds: `$text` anywhere it may be, or a read of a whole large collection,
    /// is handed over; an indexed lookup, or any find over a small collection, is not.
    #[test]
    fn only_text_searches_and_whole_collection_reads_of_large_collections_count_as_long() {
        let (_runtime, server) = single_worker_server();
        let state = server.state();
        let find = |filter: Document| doc! { "find": "p", "filter": filter, "$db": "shop" };
        assert!(may_run_long(
            state,
            &find(doc! { "$text": { "$search": "mug" } })
        ));
        assert!(may_run_long(
            state,
            &find(doc! { "$or": [{ "a": 1 }, { "$and": [{ "$text": { "$search": "mug" } }] }] })
        ));
        // No collection yet: nothing to scan.
        assert!(!may_run_long(state, &find(doc! { "slug": "mug" })));

        let mut client = TcpStream::connect(server.local_addr()).expect("connected");
        let created = send(
            &mut client,
            doc! {
                "createIndexes": "p",
                "indexes": [{ "key": { "slug": 1 }, "name": "slug_1", "unique": true }],
                "$db": "shop",
            },
        );
        assert_eq!(created.get_f64("ok"), Ok(1.0), "{created}");
        let insert = |client: &mut TcpStream, from: usize, to: usize| {
            let documents: Vec<Document> = (from..to)
                .map(|i| doc! { "slug": format!("p{i}"), "n": i as i64 })
                .collect();
            let reply = send(
                client,
                doc! { "insert": "p", "documents": documents, "$db": "shop" },
            );
            assert_eq!(reply.get_i32("n"), Ok((to - from) as i32), "{reply}");
        };
        insert(&mut client, 0, SMALL_COLLECTION);
        assert!(
            !may_run_long(state, &find(doc! { "n": 5 })),
            "a scan of a small collection runs in place"
        );
        insert(&mut client, SMALL_COLLECTION, SMALL_COLLECTION + 10);
        assert!(
            !may_run_long(state, &find(doc! { "slug": "p5" })),
            "by slug"
        );
        assert!(!may_run_long(
            state,
            &doc! { "find": "p", "filter": { "slug": { "$gte": "p1" } }, "limit": 20, "$db": "shop" }
        ));
        assert!(may_run_long(state, &find(doc! { "n": 5 })), "unindexed");
        assert!(may_run_long(state, &find(doc! {})), "everything");
        assert!(
            may_run_long(
                state,
                &doc! { "find": "p", "sort": { "slug": 1 }, "$db": "shop" }
            ),
            "a whole index without a limit"
        );
        assert!(!may_run_long(
            state,
            &doc! { "getMore": 7_i64, "collection": "p", "$db": "shop" }
        ));
    }
}
