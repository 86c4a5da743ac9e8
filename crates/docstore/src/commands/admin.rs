//! Handshake and administrative commands (`hello`, `ping`, `buildInfo`, `serverStatus`, ...): what
//! drivers, mongosh and Compass ask a server about itself before and beside real work.

use crate::error::{Error, ErrorCode, Result};
use crate::state::{ConnectionInfo, ServerState};
use crate::stats::int_or_long;
use crate::wire::{MAX_BSON_OBJECT_SIZE, MAX_MESSAGE_SIZE};
use bson::{doc, Bson, DateTime, Document};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// The MongoDB release docstore answers as.
pub(crate) const MONGODB_VERSION: &str = "7.0.0";
pub(crate) const MAX_WRITE_BATCH_SIZE: i32 = 100_000;
pub(crate) const MIN_WIRE_VERSION: i32 = 0;
/// MongoDB 7.0's wire version.
pub(crate) const MAX_WIRE_VERSION: i32 = 21;
/// `logicalSessionTimeoutMinutes` (MongoDB's default).
pub(crate) const SESSION_TIMEOUT_MINUTES: i32 = 30;

/// `None` when `name` is not an admin command.
pub(crate) fn handle(
    name: &str,
    state: &Arc<ServerState>,
    conn: &ConnectionInfo,
    cmd: &Document,
) -> Option<Result<Document>> {
    // Names compare exactly, as in MongoDB: only the registered aliases differ in case.
    let reply = match name {
        "hello" => Ok(handshake(state, conn, cmd, true)),
        "isMaster" | "ismaster" => Ok(handshake(state, conn, cmd, false)),
        "ping" => Ok(doc! {}),
        "buildInfo" | "buildinfo" => Ok(build_info()),
        "hostInfo" => Ok(host_info()),
        "whatsmyuri" => Ok(whatsmyuri(conn)),
        "getParameter" => get_parameter(state, cmd),
        "setParameter" => set_parameter(state, cmd),
        "getCmdLineOpts" => Ok(cmd_line_opts(state)),
        "getLog" => get_log(cmd),
        "serverStatus" => Ok(server_status(state)),
        "connectionStatus" => Ok(crate::auth::connection_status(
            conn,
            cmd.get("showPrivileges").is_some_and(truthy),
        )),
        "profile" => super::profiler::profile(state, cmd),
        "usersInfo" => crate::auth::users_info(state.auth.as_ref(), cmd),
        "endSessions" | "killSessions" => {
            if let Ok(ids) = cmd.get_array(name) {
                state.sessions.end(ids);
            }
            Ok(doc! {})
        }
        "killAllSessions" | "killAllSessionsByPattern" | "refreshSessions" => Ok(doc! {}),
        "saslStart" => crate::auth::sasl_start(state.auth.as_ref(), conn, cmd, db_of(cmd)),
        "saslContinue" => crate::auth::sasl_continue(state.auth.as_ref(), conn, cmd),
        "logout" => Ok(crate::auth::logout(conn)),
        // mongod accepts only MONGODB-X509 through `authenticate`, which docstore lacks.
        "authenticate" => Err(Error::new(
            ErrorCode::MechanismUnavailable,
            format!(
                "Received authentication for mechanism {} which is not enabled",
                cmd.get_str("mechanism").unwrap_or("MONGODB-X509")
            ),
        )),
        "createUser"
        | "updateUser"
        | "dropUser"
        | "dropAllUsersFromDatabase"
        | "createRole"
        | "getnonce" => Err(crate::support::refuse(crate::support::Kind::Command, name)),
        _ => return None,
    };
    Some(reply)
}

fn db_of(cmd: &Document) -> &str {
    cmd.get_str("$db").unwrap_or("admin")
}

/// `hello`/`isMaster` with what authentication adds (`saslSupportedMechs`,
/// `speculativeAuthenticate`).
fn handshake(state: &ServerState, conn: &ConnectionInfo, cmd: &Document, modern: bool) -> Document {
    let mut reply = hello(conn, modern);
    crate::auth::extend_hello(state.auth.as_ref(), conn, cmd, &mut reply);
    reply
}

/// The handshake reply of a standalone server. `hello` says `isWritablePrimary`, the legacy
/// `isMaster` says `ismaster`. No `topologyVersion` is sent, so drivers poll rather than use
/// the streaming (exhaust) protocol, and no `compression` is offered.
fn hello(conn: &ConnectionInfo, modern: bool) -> Document {
    let mut reply = Document::new();
    if modern {
        reply.insert("isWritablePrimary", true);
    } else {
        reply.insert("ismaster", true);
    }
    reply.insert("helloOk", true);
    reply.insert("maxBsonObjectSize", MAX_BSON_OBJECT_SIZE as i32);
    reply.insert("maxMessageSizeBytes", MAX_MESSAGE_SIZE as i32);
    reply.insert("maxWriteBatchSize", MAX_WRITE_BATCH_SIZE);
    reply.insert("localTime", DateTime::now());
    reply.insert("logicalSessionTimeoutMinutes", SESSION_TIMEOUT_MINUTES);
    reply.insert("connectionId", int_or_long(conn.id));
    reply.insert("minWireVersion", MIN_WIRE_VERSION);
    reply.insert("maxWireVersion", MAX_WIRE_VERSION);
    reply.insert("readOnly", false);
    reply
}

fn build_info() -> Document {
    doc! {
        "version": MONGODB_VERSION,
        "gitVersion": "docstore",
        "modules": [],
        "allocator": "system",
        "javascriptEngine": "none",
        "sysInfo": "deprecated",
        "versionArray": [7, 0, 0, 0],
        "bits": 64,
        "debug": cfg!(debug_assertions),
        "maxBsonObjectSize": MAX_BSON_OBJECT_SIZE as i32,
        "storageEngines": [],
        "docstore": {
            "version": env!("CARGO_PKG_VERSION"),
            "description": "embedded MongoDB-wire-compatible store; not a MongoDB server",
        },
    }
}

fn host_info() -> Document {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut system = doc! {
        "currentTime": DateTime::now(),
        "hostname": hostname(),
        "cpuAddrSize": 64,
        "numCores": int_or_long(cores as i64),
        "cpuArch": std::env::consts::ARCH,
        "numaEnabled": false,
    };
    if let Some(mb) = memory_mb() {
        system.insert("memSizeMB", mb);
    }
    let os_type = match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Darwin",
        "windows" => "Windows",
        other => other,
    };
    doc! {
        "system": system,
        "os": { "type": os_type, "name": std::env::consts::OS },
        "extra": {},
    }
}

/// Total memory in MiB where the platform tells us cheaply (Linux).
fn memory_mb() -> Option<i64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

/// The machine's name, looked up once.
fn hostname() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| "localhost".to_string())
    })
}

fn whatsmyuri(conn: &ConnectionInfo) -> Document {
    let you = conn
        .peer
        .map_or_else(|| "(embedded)".to_string(), |p| p.to_string());
    doc! { "you": you }
}

/// A server parameter docstore reports: name, value, and whether mongod lets it be set at run
/// time and at start-up.
struct Parameter {
    name: &'static str,
    value: Bson,
    settable_at_runtime: bool,
    settable_at_startup: bool,
}

/// Server parameters docstore reports. `enableTestCommands` is false: docstore has none of
/// mongod's test-only commands (`configureFailPoint` and the like), as a production mongod.
/// `ttlMonitorSleepSecs` and `cursorTimeoutMillis` are the live settings, which
/// `setParameter` changes.
fn parameters(state: &ServerState) -> Vec<Parameter> {
    let ttl = *state.ttl_monitor_interval.lock();
    vec![
        Parameter {
            name: "featureCompatibilityVersion",
            value: Bson::Document(doc! { "version": "7.0" }),
            settable_at_runtime: true,
            settable_at_startup: false,
        },
        Parameter {
            name: "enableTestCommands",
            value: Bson::Boolean(false),
            settable_at_runtime: false,
            settable_at_startup: true,
        },
        Parameter {
            name: "ttlMonitorSleepSecs",
            // A sub-second interval (tests configure one) reports as 1.
            value: Bson::Int32(i32::try_from(ttl.as_secs().max(1)).unwrap_or(i32::MAX)),
            settable_at_runtime: true,
            settable_at_startup: true,
        },
        Parameter {
            name: "cursorTimeoutMillis",
            value: Bson::Int64(
                i64::try_from(state.cursors.timeout().as_millis()).unwrap_or(i64::MAX),
            ),
            settable_at_runtime: true,
            settable_at_startup: true,
        },
    ]
}

/// `{setParameter: 1, <name>: <value>, ...}`, answered as mongod answers: `was` holds the
/// first parameter's previous value; a parameter docstore does not know is 72 (naming it), one
/// only settable at start-up 20, a value of the wrong type or range 2. Every value is checked
/// before any is set.
fn set_parameter(state: &ServerState, cmd: &Document) -> Result<Document> {
    if db_of(cmd) != "admin" {
        return Err(Error::new(
            ErrorCode::Unauthorized,
            "setParameter may only be run against the admin database.",
        ));
    }
    let help = ", use help:true to see options ";
    let known = parameters(state);
    let mut changes = Vec::new();
    for (name, value) in cmd.iter().skip(1) {
        if super::args::is_generic_field(name) {
            continue;
        }
        let Some(parameter) = known.iter().find(|p| p.name == name) else {
            return Err(Error::new(
                ErrorCode::InvalidOptions,
                format!("attempted to set unrecognized parameter [{name}]{help}"),
            ));
        };
        if !parameter.settable_at_runtime || name == "featureCompatibilityVersion" {
            return Err(Error::new(
                ErrorCode::IllegalOperation,
                format!("not allowed to change [{name}] at runtime"),
            ));
        }
        let invalid = || {
            Error::bad_value(format!(
                "Invalid value for parameter {name}: {} is not a positive integer",
                crate::printing::fmt_value(value)
            ))
        };
        let n = crate::value::Number::from_bson(value)
            .and_then(|n| n.as_i64_exact())
            .filter(|n| *n > 0)
            .ok_or_else(invalid)?;
        let change = match name.as_str() {
            "ttlMonitorSleepSecs" => {
                i32::try_from(n).map_err(|_| invalid())?;
                Change::TtlSeconds(n as u64)
            }
            _ => Change::CursorTimeoutMillis(n as u64),
        };
        changes.push((parameter.value.clone(), change));
    }
    let Some((was, _)) = changes.first() else {
        return Err(Error::new(
            ErrorCode::InvalidOptions,
            format!("no option found to set{help}"),
        ));
    };
    let reply = doc! { "was": was.clone() };
    for (_, change) in changes {
        match change {
            Change::TtlSeconds(secs) => {
                *state.ttl_monitor_interval.lock() = std::time::Duration::from_secs(secs);
                state.ttl_monitor_changed.notify_one();
            }
            Change::CursorTimeoutMillis(ms) => {
                state
                    .cursors
                    .set_timeout(std::time::Duration::from_millis(ms));
            }
        }
    }
    Ok(reply)
}

/// A checked `setParameter` change, applied once every one is checked.
enum Change {
    TtlSeconds(u64),
    CursorTimeoutMillis(u64),
}

/// `{getParameter: 1, <name>: 1, ...}` or `{getParameter: '*'}` (or `{allParameters: true}`).
/// As in MongoDB, names it does not know are skipped; finding none at all is error 72.
fn get_parameter(state: &ServerState, cmd: &Document) -> Result<Document> {
    let (all, show_details) = match cmd.get("getParameter") {
        Some(Bson::String(s)) => (s == "*", false),
        Some(Bson::Document(opts)) => (
            opts.get("allParameters").is_some_and(truthy),
            opts.get("showDetails").is_some_and(truthy),
        ),
        _ => (false, false),
    };
    let mut reply = Document::new();
    for p in parameters(state) {
        if all || cmd.contains_key(p.name) {
            let value = if show_details {
                Bson::Document(doc! {
                    "value": p.value,
                    "settableAtRuntime": p.settable_at_runtime,
                    "settableAtStartup": p.settable_at_startup,
                })
            } else {
                p.value
            };
            reply.insert(p.name, value);
        }
    }
    if reply.is_empty() {
        return Err(Error::new(
            ErrorCode::InvalidOptions,
            "no option found to get",
        ));
    }
    Ok(reply)
}

fn truthy(v: &Bson) -> bool {
    crate::value::is_truthy(v)
}

/// The command line of this process, and the settings docstore actually runs with.
fn cmd_line_opts(state: &ServerState) -> Document {
    let argv: Vec<Bson> = std::env::args().map(Bson::String).collect();
    let config = &state.config;
    let port = state
        .listen_addr
        .get()
        .map_or(i32::from(config.port), |a| i32::from(a.port()));
    let storage = match &config.storage {
        crate::config::StorageMode::InMemory => doc! { "engine": "inMemory" },
        crate::config::StorageMode::Directory(dir) => {
            doc! { "dbPath": dir.to_string_lossy().into_owned() }
        }
    };
    let mut parsed = doc! {
        "net": { "bindIp": config.bind.clone(), "port": port },
        "storage": storage,
    };
    if state.auth.is_some() {
        parsed.insert("security", doc! { "authorization": "enabled" });
    }
    doc! { "argv": argv, "parsed": parsed }
}

/// docstore keeps no in-memory log buffers, so the two logs MongoDB names are always empty.
fn get_log(cmd: &Document) -> Result<Document> {
    match cmd.get("getLog") {
        Some(Bson::String(s)) if s == "*" => Ok(doc! { "names": ["global", "startupWarnings"] }),
        Some(Bson::String(s)) if s == "global" || s == "startupWarnings" => {
            Ok(doc! { "totalLinesWritten": 0, "log": [] })
        }
        Some(Bson::String(s)) => Err(Error::location(
            ErrorCode::Location(96).code(),
            format!("No log named '{s}'"),
        )
        .with_extra(doc! { "codeName": "OperationFailed" })),
        Some(other) => Err(Error::type_mismatch(format!(
            "Argument to getLog must be of type String; found {} of type {}",
            other,
            crate::value::type_name(other)
        ))),
        None => Err(Error::failed_to_parse("getLog requires an argument")),
    }
}

/// `host` as MongoDB reports it in `serverStatus` and `$collStats`: the machine's name, with the
/// port unless it is the default 27017.
pub(crate) fn host(state: &ServerState) -> String {
    match state.listen_addr.get() {
        Some(addr) if addr.port() != 27017 => format!("{}:{}", hostname(), addr.port()),
        _ => hostname().to_string(),
    }
}

fn server_status(state: &ServerState) -> Document {
    let uptime = state.started.elapsed();
    let current = state.open_connections.load(Ordering::Relaxed).max(0);
    doc! {
        "host": host(state),
        "version": MONGODB_VERSION,
        "process": "docstore",
        "pid": i64::from(std::process::id()),
        "uptime": uptime.as_secs_f64().floor(),
        "uptimeMillis": i64::try_from(uptime.as_millis()).unwrap_or(i64::MAX),
        "uptimeEstimate": i64::try_from(uptime.as_secs()).unwrap_or(i64::MAX),
        "localTime": DateTime::now(),
        "connections": {
            "current": int_or_long(current),
            "available": int_or_long(
                i64::try_from(state.config.max_connections)
                    .unwrap_or(i64::MAX)
                    .saturating_sub(current)
                    .max(0)
            ),
            "totalCreated": int_or_long(state.connections_created()),
        },
        "storageEngine": { "name": "docstore", "persistent": matches!(state.config.storage, crate::config::StorageMode::Directory(_)) },
        "journal": journal_status(state),
    }
}

/// Whether writes are accepted, and if not why and since when; group-commit counters.
fn journal_status(state: &ServerState) -> Document {
    let Some(status) = state.catalog.storage().journal_status() else {
        return doc! { "writable": true, "persistent": false };
    };
    let mut d = doc! {
        "writable": status.failure.is_none(),
        "persistent": true,
        "commits": int_or_long(i64::try_from(status.commits).unwrap_or(i64::MAX)),
        "pendingBytes": int_or_long(i64::try_from(status.pending_bytes).unwrap_or(i64::MAX)),
        "durableLsn": i64::try_from(status.durable_lsn).unwrap_or(i64::MAX),
        "lastLsn": i64::try_from(status.last_lsn).unwrap_or(i64::MAX),
        "journalBytes": int_or_long(i64::try_from(status.journal_bytes).unwrap_or(i64::MAX)),
        "commitMicros": i64::try_from(status.commit_time.as_micros()).unwrap_or(i64::MAX),
    };
    if let Some(at) = status.last_snapshot {
        d.insert("lastSnapshot", DateTime::from_system_time(at));
    }
    if let Some(failure) = status.failure {
        let e = Error::from(&failure);
        d.insert(
            "writesRefused",
            doc! {
                "code": e.code_number(),
                "codeName": e.code.name(),
                "errmsg": e.message,
                "since": DateTime::from_system_time(failure.since),
                "attempts": i64::try_from(failure.attempts).unwrap_or(i64::MAX),
            },
        );
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn setup() -> (Arc<ServerState>, ConnectionInfo) {
        let state = ServerState::open(Config::in_memory()).expect("in-memory state opens");
        let conn = state.new_connection(Some("127.0.0.1:50123".parse().expect("addr")));
        (state, conn)
    }

    fn run(name: &str, cmd: Document) -> Result<Document> {
        let (state, conn) = setup();
        handle(name, &state, &conn, &cmd).expect("is an admin command")
    }

    #[test]
    fn hello_reports_a_writable_standalone_with_mongodb_limits() {
        let (state, conn) = setup();
        let r = handle("hello", &state, &conn, &doc! { "hello": 1 })
            .unwrap()
            .unwrap();
        assert_eq!(r.get_bool("isWritablePrimary").ok(), Some(true));
        assert!(!r.contains_key("ismaster"));
        assert_eq!(r.get_bool("helloOk").ok(), Some(true));
        assert_eq!(r.get_i32("maxBsonObjectSize").ok(), Some(16_777_216));
        assert_eq!(r.get_i32("maxMessageSizeBytes").ok(), Some(48_000_000));
        assert_eq!(r.get_i32("maxWriteBatchSize").ok(), Some(100_000));
        assert!(r.get_datetime("localTime").is_ok());
        assert_eq!(r.get_i32("logicalSessionTimeoutMinutes").ok(), Some(30));
        assert_eq!(r.get_i32("connectionId").ok(), Some(conn.id as i32));
        assert_eq!(r.get_i32("minWireVersion").ok(), Some(0));
        assert_eq!(r.get_i32("maxWireVersion").ok(), Some(21));
        assert_eq!(r.get_bool("readOnly").ok(), Some(false));
        assert!(!r.contains_key("compression"));
        assert!(!r.contains_key("topologyVersion"));
    }

    #[test]
    fn legacy_is_master_says_ismaster_in_both_spellings() {
        for name in ["isMaster", "ismaster"] {
            let r = run(name, doc! { name: 1 }).unwrap();
            assert_eq!(r.get_bool("ismaster").ok(), Some(true), "{name}");
            assert!(!r.contains_key("isWritablePrimary"));
        }
    }

    #[test]
    fn command_names_are_case_sensitive() {
        let (state, conn) = setup();
        for name in ["Hello", "PING", "ISMASTER", "buildINFO", "serverstatus"] {
            assert!(
                handle(name, &state, &conn, &doc! { name: 1 }).is_none(),
                "{name}"
            );
        }
    }

    #[test]
    fn build_info_reports_mongodb_7_and_names_docstore() {
        for name in ["buildInfo", "buildinfo"] {
            let r = run(name, doc! { name: 1 }).unwrap();
            assert_eq!(r.get_str("version").ok(), Some("7.0.0"));
            assert_eq!(
                r.get_array("versionArray").ok(),
                Some(&vec![
                    Bson::Int32(7),
                    Bson::Int32(0),
                    Bson::Int32(0),
                    Bson::Int32(0)
                ])
            );
            assert_eq!(r.get_i32("bits").ok(), Some(64));
            assert_eq!(r.get_i32("maxBsonObjectSize").ok(), Some(16_777_216));
            assert!(r.get_array("storageEngines").is_ok());
            assert!(r.get_document("docstore").is_ok());
        }
    }

    #[test]
    fn whatsmyuri_returns_the_peer_address() {
        let r = run("whatsmyuri", doc! { "whatsmyuri": 1 }).unwrap();
        assert_eq!(r.get_str("you").ok(), Some("127.0.0.1:50123"));
    }

    #[test]
    fn get_parameter_returns_the_feature_compatibility_version() {
        let expected = doc! { "version": "7.0" };
        let r = run(
            "getParameter",
            doc! { "getParameter": 1, "featureCompatibilityVersion": 1 },
        )
        .unwrap();
        assert_eq!(
            r.get_document("featureCompatibilityVersion").ok(),
            Some(&expected)
        );
        let r = run("getParameter", doc! { "getParameter": "*" }).unwrap();
        assert_eq!(
            r.get_document("featureCompatibilityVersion").ok(),
            Some(&expected)
        );
        let r = run(
            "getParameter",
            doc! { "getParameter": { "showDetails": true }, "featureCompatibilityVersion": 1 },
        )
        .unwrap();
        assert_eq!(
            r.get_document("featureCompatibilityVersion")
                .and_then(|d| d.get_document("value"))
                .ok(),
            Some(&expected)
        );
    }

    #[test]
    fn get_parameter_with_no_known_parameter_is_invalid_options() {
        let e = run("getParameter", doc! { "getParameter": 1, "noSuchThing": 1 }).unwrap_err();
        assert_eq!(e.code_number(), 72);
        assert_eq!(e.message, "no option found to get");
        let r = run(
            "getParameter",
            doc! { "getParameter": 1, "noSuchThing": 1, "featureCompatibilityVersion": 1 },
        )
        .unwrap();
        assert!(!r.contains_key("noSuchThing"));
    }

    #[test]
    fn get_log_lists_and_returns_empty_logs() {
        let r = run("getLog", doc! { "getLog": "*" }).unwrap();
        assert_eq!(
            r.get_array("names").ok(),
            Some(&vec![Bson::from("global"), Bson::from("startupWarnings")])
        );
        for name in ["global", "startupWarnings"] {
            let r = run("getLog", doc! { "getLog": name }).unwrap();
            assert_eq!(r.get_i32("totalLinesWritten").ok(), Some(0));
            assert_eq!(r.get_array("log").map(Vec::len).ok(), Some(0));
        }
        let e = run("getLog", doc! { "getLog": 1 }).unwrap_err();
        assert_eq!(e.code_number(), 14);
        let e = run("getLog", doc! { "getLog": "nope" }).unwrap_err();
        assert_eq!(
            e.to_command_reply().get_str("codeName").ok(),
            Some("OperationFailed")
        );
    }

    #[test]
    fn server_status_counts_connections() {
        let (state, conn) = setup();
        state.open_connections.fetch_add(2, Ordering::Relaxed);
        let _second = state.new_connection(None);
        let r = handle("serverStatus", &state, &conn, &doc! { "serverStatus": 1 })
            .unwrap()
            .unwrap();
        assert_eq!(r.get_str("version").ok(), Some("7.0.0"));
        assert_eq!(r.get_str("process").ok(), Some("docstore"));
        assert!(r.get_i64("pid").is_ok());
        assert!(r.get_f64("uptime").is_ok());
        assert!(r.get_i64("uptimeMillis").is_ok());
        assert!(r.get_datetime("localTime").is_ok());
        let c = r.get_document("connections").unwrap();
        assert_eq!(c.get_i32("current").ok(), Some(2));
        assert_eq!(
            c.get_i32("available").ok(),
            Some(crate::config::DEFAULT_MAX_CONNECTIONS as i32 - 2)
        );
        assert_eq!(c.get_i32("totalCreated").ok(), Some(2));
    }

    #[test]
    fn connection_status_reports_no_authenticated_users() {
        let r = run("connectionStatus", doc! { "connectionStatus": 1 }).unwrap();
        let auth = r.get_document("authInfo").unwrap();
        assert_eq!(
            auth.get_array("authenticatedUsers").map(Vec::len).ok(),
            Some(0)
        );
        assert_eq!(
            auth.get_array("authenticatedUserRoles").map(Vec::len).ok(),
            Some(0)
        );
        assert!(!auth.contains_key("authenticatedUserPrivileges"));
        let r = run(
            "connectionStatus",
            doc! { "connectionStatus": 1, "showPrivileges": true },
        )
        .unwrap();
        assert!(r
            .get_document("authInfo")
            .unwrap()
            .contains_key("authenticatedUserPrivileges"));
    }

    #[test]
    fn session_commands_succeed() {
        for name in ["endSessions", "killSessions", "killAllSessions"] {
            assert!(run(name, doc! { name: [] }).is_ok(), "{name}");
        }
    }

    #[test]
    fn without_a_configured_user_sasl_fails_as_for_an_unknown_user() {
        let cmd = doc! {
            "saslStart": 1,
            "mechanism": "SCRAM-SHA-256",
            "payload": Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: b"n,,n=app,r=abcdef".to_vec(),
            }),
        };
        let e = run("saslStart", cmd).unwrap_err();
        assert_eq!(
            (e.code_number(), e.message.as_str()),
            (18, "Authentication failed.")
        );
        for name in ["createUser", "dropUser"] {
            let e = run(name, doc! { name: "x" }).unwrap_err();
            assert_eq!(e.code_number(), 115, "{name}");
            assert!(e.message.contains("user management"));
        }
        let e = run(
            "authenticate",
            doc! { "authenticate": 1, "mechanism": "PLAIN" },
        )
        .unwrap_err();
        assert_eq!(e.code_number(), 334);
    }

    #[test]
    fn host_info_and_cmd_line_opts_have_their_sections() {
        let r = run("hostInfo", doc! { "hostInfo": 1 }).unwrap();
        assert!(r
            .get_document("system")
            .unwrap()
            .get_str("hostname")
            .is_ok());
        assert!(r.get_document("os").unwrap().get_str("type").is_ok());
        let r = run("getCmdLineOpts", doc! { "getCmdLineOpts": 1 }).unwrap();
        assert!(r.get_array("argv").is_ok());
        let parsed = r.get_document("parsed").unwrap();
        assert_eq!(
            parsed
                .get_document("storage")
                .unwrap()
                .get_str("engine")
                .ok(),
            Some("inMemory")
        );
    }
}
