//! Authentication as MongoDB does it: SCRAM-SHA-256 (RFC 5802 / RFC 7677) and SCRAM-SHA-1
//! through `saslStart`/`saslContinue`, the speculative first step drivers put inside `hello`, and
//! `Unauthorized` for any other command on a connection that has not authenticated.
//!
//! docstore knows at most one user, `admin.<name>`, given in [`crate::Config::user`]; it may do
//! anything (MongoDB's `root`). The server keeps only the SCRAM keys (salt, iteration count,
//! StoredKey, ServerKey), never the password.

use crate::error::{Error, ErrorCode, Result};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha1::Sha1;
use sha2::{Digest, Sha256};
use std::fmt;
use std::net::SocketAddr;
use subtle::ConstantTimeEq;
use tracing::{debug, info};

/// The database users authenticate against (`authSource=admin`).
pub(crate) const AUTH_DB: &str = "admin";
/// MongoDB's default `scramSHA256IterationCount`.
pub(crate) const SHA256_ITERATIONS: u32 = 15_000;
/// MongoDB's default `scramIterationCount` (SCRAM-SHA-1).
pub(crate) const SHA1_ITERATIONS: u32 = 10_000;
/// Random bytes in the salt and in the server's half of the nonce (as MongoDB).
const SALT_BYTES: usize = 16;
const NONCE_BYTES: usize = 24;
/// MongoDB's message for every credential failure; it does not say which part was wrong.
const AUTH_FAILED: &str = "Authentication failed.";

/// Commands a connection may run before it authenticates: the handshake, liveness, the
/// authentication commands themselves and `connectionStatus`, as in mongod.
const ALLOWED_UNAUTHENTICATED: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "ping",
    "buildInfo",
    "buildinfo",
    "saslStart",
    "saslContinue",
    "authenticate",
    "logout",
    "connectionStatus",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mechanism {
    ScramSha1,
    ScramSha256,
}

impl Mechanism {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mechanism::ScramSha1 => "SCRAM-SHA-1",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
        }
    }

    fn parse(name: &str) -> Option<Mechanism> {
        match name {
            "SCRAM-SHA-1" => Some(Mechanism::ScramSha1),
            "SCRAM-SHA-256" => Some(Mechanism::ScramSha256),
            _ => None,
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            // HMAC takes keys of any length, so this cannot fail.
            let mut mac = <M as KeyInit>::new_from_slice(key).expect("HMAC accepts any key");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Mechanism::ScramSha1 => run::<Hmac<Sha1>>(key, data),
            Mechanism::ScramSha256 => run::<Hmac<Sha256>>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::ScramSha1 => Sha1::digest(data).to_vec(),
            Mechanism::ScramSha256 => Sha256::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, i)` of RFC 5802: PBKDF2 with this mechanism's HMAC.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::ScramSha1 => {
                let mut out = vec![0u8; 20];
                pbkdf2::pbkdf2::<Hmac<Sha1>>(password, salt, iterations, &mut out)
                    .expect("HMAC accepts any key");
                out
            }
            Mechanism::ScramSha256 => {
                let mut out = vec![0u8; 32];
                pbkdf2::pbkdf2::<Hmac<Sha256>>(password, salt, iterations, &mut out)
                    .expect("HMAC accepts any key");
                out
            }
        }
    }
}

/// One mechanism's stored credentials, as MongoDB keeps them in `admin.system.users`.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredentials {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramCredentials {
    /// Derive the keys from a password (already prepared as the mechanism wants) with a fresh
    /// random salt.
    fn derive(mechanism: Mechanism, password: &[u8], iterations: u32) -> ScramCredentials {
        let mut salt = vec![0u8; SALT_BYTES];
        rand::thread_rng().fill_bytes(&mut salt);
        let salted = mechanism.salted_password(password, &salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        ScramCredentials {
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(&salted, b"Server Key"),
            salt,
            iterations,
        }
    }
}

/// The user a server requires clients to authenticate as. `Debug` shows the name only.
#[derive(Clone)]
pub struct User {
    name: String,
    sha256: Option<ScramCredentials>,
    sha1: Option<ScramCredentials>,
}

impl fmt::Debug for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .field("mechanisms", &self.mechanisms())
            .finish_non_exhaustive()
    }
}

impl User {
    /// `admin.<name>` with this password, for SCRAM-SHA-256 and SCRAM-SHA-1. The password goes
    /// through SASLprep for SCRAM-SHA-256 (as drivers do before hashing); SCRAM-SHA-1 uses
    /// MongoDB's digest `md5("<name>:mongo:<password>")` instead.
    pub fn with_password(name: &str, password: &str) -> Result<User> {
        check_name(name)?;
        if password.is_empty() {
            return Err(Error::bad_value("the password must not be empty"));
        }
        let prepared = stringprep::saslprep(password).map_err(|_| {
            Error::bad_value("the password contains characters SASLprep does not allow")
        })?;
        let sha256 = ScramCredentials::derive(
            Mechanism::ScramSha256,
            prepared.as_bytes(),
            SHA256_ITERATIONS,
        );
        let sha1 = ScramCredentials::derive(
            Mechanism::ScramSha1,
            mongo_sha1_digest(name, password).as_bytes(),
            SHA1_ITERATIONS,
        );
        Ok(User {
            name: name.to_string(),
            sha256: Some(sha256),
            sha1: Some(sha1),
        })
    }

    /// `admin.<name>` from stored SCRAM-SHA-256 keys (for example copied from MongoDB's
    /// `system.users`), so that no password needs to be at hand; SCRAM-SHA-1 is then refused.
    pub fn with_scram_sha256(name: &str, credentials: ScramCredentials) -> Result<User> {
        check_name(name)?;
        if credentials.iterations < 4096 || credentials.salt.is_empty() {
            return Err(Error::bad_value(
                "SCRAM-SHA-256 credentials need a salt and at least 4096 iterations",
            ));
        }
        if credentials.stored_key.len() != 32 || credentials.server_key.len() != 32 {
            return Err(Error::bad_value(
                "SCRAM-SHA-256 StoredKey and ServerKey are 32 bytes each",
            ));
        }
        Ok(User {
            name: name.to_string(),
            sha256: Some(credentials),
            sha1: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The mechanisms this user can authenticate with, strongest first.
    pub fn mechanisms(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.sha256.is_some() {
            out.push(Mechanism::ScramSha256.name());
        }
        if self.sha1.is_some() {
            out.push(Mechanism::ScramSha1.name());
        }
        out
    }

    fn credentials(&self, mechanism: Mechanism) -> Option<&ScramCredentials> {
        match mechanism {
            Mechanism::ScramSha1 => self.sha1.as_ref(),
            Mechanism::ScramSha256 => self.sha256.as_ref(),
        }
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('\0') {
        return Err(Error::bad_value(
            "the user name must be non-empty and contain no NUL",
        ));
    }
    Ok(())
}

/// MongoDB's SCRAM-SHA-1 password: the hex MD5 of `user:mongo:password`.
fn mongo_sha1_digest(user: &str, password: &str) -> String {
    use md5::Digest as _;
    let digest = md5::Md5::digest(format!("{user}:mongo:{password}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Per-connection authentication state.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// The user this connection authenticated as.
    user: Option<String>,
    conversation: Option<Conversation>,
    next_conversation_id: i32,
}

impl Session {
    pub(crate) fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }
}

/// Per-connection facts commands may need (`connectionId`, `whatsmyuri`) and the connection's
/// authentication state. Defined here, beside [`Session`], so that authentication needs nothing
/// from the server state (`state` re-exports it).
#[derive(Debug)]
pub(crate) struct ConnectionInfo {
    pub id: i64,
    pub peer: Option<SocketAddr>,
    pub auth: parking_lot::Mutex<Session>,
}

#[derive(Debug)]
struct Conversation {
    id: i32,
    mechanism: Mechanism,
    user: String,
    /// The client's first message without the GS2 header, then `server-first-message`: both
    /// are part of the AuthMessage the proofs sign.
    client_first_bare: String,
    server_first: String,
    gs2_header: String,
    nonce: String,
    skip_empty_exchange: bool,
    /// Started inside `hello` (`speculativeAuthenticate`), which saves the client a round trip.
    speculative: bool,
    step: Step,
}

#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Waiting for `client-final-message` (the proof).
    Proof,
    /// The proof checked out and `v=` was sent; the client acknowledges with an empty message.
    Acknowledge,
}

/// Whether authentication is required and, if so, whether `name` may run on this connection.
/// `configured` here and below is the user connections must authenticate as (`None`:
/// authentication is off).
pub(crate) fn check_access(
    configured: Option<&User>,
    conn: &ConnectionInfo,
    name: &str,
) -> Result<()> {
    if configured.is_none() || ALLOWED_UNAUTHENTICATED.contains(&name) {
        return Ok(());
    }
    if conn.auth.lock().user.is_some() {
        return Ok(());
    }
    Err(Error::new(
        ErrorCode::Unauthorized,
        format!("command {name} requires authentication"),
    ))
}

/// `saslStart`: the client's first SCRAM message; answers `server-first-message`.
pub(crate) fn sasl_start(
    configured: Option<&User>,
    conn: &ConnectionInfo,
    cmd: &Document,
    db: &str,
) -> Result<Document> {
    start_conversation(configured, conn, cmd, db, false)
}

fn start_conversation(
    configured: Option<&User>,
    conn: &ConnectionInfo,
    cmd: &Document,
    db: &str,
    speculative: bool,
) -> Result<Document> {
    let mechanism = match cmd.get("mechanism") {
        Some(Bson::String(m)) => m.as_str(),
        Some(_) => return Err(Error::type_mismatch("saslStart.mechanism must be a string")),
        None => return Err(Error::failed_to_parse("saslStart requires a mechanism")),
    };
    let payload = payload(cmd)?;
    let skip_empty_exchange = cmd
        .get_document("options")
        .ok()
        .and_then(|o| o.get("skipEmptyExchange"))
        .is_some_and(crate::value::is_truthy);
    let mut session = conn.auth.lock();
    // A new conversation replaces any unfinished one, as in mongod.
    session.conversation = None;
    let result = start(
        configured,
        conn,
        mechanism,
        &payload,
        db,
        skip_empty_exchange,
    );
    match result {
        Ok(conversation) => {
            session.next_conversation_id += 1;
            let id = session.next_conversation_id;
            let reply = doc! {
                "conversationId": id,
                "done": false,
                "payload": binary(conversation.server_first.as_bytes()),
            };
            session.conversation = Some(Conversation {
                id,
                speculative,
                ..conversation
            });
            Ok(reply)
        }
        Err(e) => Err(e),
    }
}

fn start(
    configured: Option<&User>,
    conn: &ConnectionInfo,
    mechanism: &str,
    payload: &[u8],
    db: &str,
    skip_empty_exchange: bool,
) -> Result<Conversation> {
    let Some(mech) = Mechanism::parse(mechanism) else {
        return Err(Error::new(
            ErrorCode::MechanismUnavailable,
            format!("Received authentication for mechanism {mechanism} which is not enabled"),
        ));
    };
    let message = std::str::from_utf8(payload)
        .map_err(|_| Error::bad_value("SCRAM client-first-message is not UTF-8"))?;
    let first = parse_client_first(message)?;
    let credentials = configured
        .filter(|user| db == AUTH_DB && user.name == first.user)
        .and_then(|user| user.credentials(mech));
    let Some(credentials) = credentials else {
        info!(
            connection = conn.id,
            user = %first.user,
            db,
            mechanism = mech.name(),
            "authentication failed: no such user for this mechanism"
        );
        return Err(auth_failed());
    };
    let mut server_nonce = [0u8; NONCE_BYTES];
    rand::thread_rng().fill_bytes(&mut server_nonce);
    let nonce = format!("{}{}", first.nonce, B64.encode(server_nonce));
    let server_first = format!(
        "r={nonce},s={},i={}",
        B64.encode(&credentials.salt),
        credentials.iterations
    );
    Ok(Conversation {
        id: 0,
        mechanism: mech,
        user: first.user,
        client_first_bare: first.bare,
        server_first,
        gs2_header: first.gs2_header,
        nonce,
        skip_empty_exchange,
        speculative: false,
        step: Step::Proof,
    })
}

/// `saslContinue`: checks the proof and answers `v=<ServerSignature>`; with
/// `skipEmptyExchange` that ends the conversation, otherwise one more empty round does.
pub(crate) fn sasl_continue(
    configured: Option<&User>,
    conn: &ConnectionInfo,
    cmd: &Document,
) -> Result<Document> {
    let id = match cmd.get("conversationId") {
        Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))) => {
            crate::value::Number::from_bson(v).and_then(|n| n.as_i64_exact())
        }
        Some(_) => {
            return Err(Error::type_mismatch(
                "saslContinue.conversationId must be a number",
            ))
        }
        None => {
            return Err(Error::failed_to_parse(
                "saslContinue requires a conversationId",
            ))
        }
    };
    let payload = payload(cmd)?;
    let mut session = conn.auth.lock();
    let Some(conversation) = session.conversation.take() else {
        return Err(Error::new(
            ErrorCode::ProtocolError,
            "No SASL session state found",
        ));
    };
    if id != Some(i64::from(conversation.id)) {
        return Err(Error::new(
            ErrorCode::ProtocolError,
            "sasl: Mismatched conversation id",
        ));
    }
    match conversation.step {
        Step::Proof => {
            let server_final = match verify_proof(configured, &conversation, &payload) {
                Ok(v) => v,
                Err(e) => {
                    info!(
                        connection = conn.id,
                        user = %conversation.user,
                        mechanism = conversation.mechanism.name(),
                        "authentication failed: wrong password"
                    );
                    return Err(e);
                }
            };
            let reply = doc! {
                "conversationId": conversation.id,
                "done": conversation.skip_empty_exchange,
                "payload": binary(server_final.as_bytes()),
            };
            if conversation.skip_empty_exchange {
                authenticated(&mut session, conn, &conversation);
            } else {
                session.conversation = Some(Conversation {
                    step: Step::Acknowledge,
                    ..conversation
                });
            }
            Ok(reply)
        }
        Step::Acknowledge => {
            if !payload.is_empty() {
                return Err(Error::bad_value(
                    "SCRAM: the last client message must be empty",
                ));
            }
            authenticated(&mut session, conn, &conversation);
            Ok(doc! {
                "conversationId": conversation.id,
                "done": true,
                "payload": binary(b""),
            })
        }
    }
}

fn authenticated(session: &mut Session, conn: &ConnectionInfo, conversation: &Conversation) {
    // Every pooled connection authenticates: success is routine, failures are logged at info.
    debug!(
        connection = conn.id,
        user = %conversation.user,
        mechanism = conversation.mechanism.name(),
        speculative = conversation.speculative,
        "authenticated"
    );
    session.user = Some(conversation.user.clone());
}

/// Check `client-final-message` against the stored keys; `server-final-message` if it holds.
fn verify_proof(configured: Option<&User>, conv: &Conversation, payload: &[u8]) -> Result<String> {
    let message = std::str::from_utf8(payload)
        .map_err(|_| Error::bad_value("SCRAM client-final-message is not UTF-8"))?;
    let (without_proof, proof) = message
        .rsplit_once(",p=")
        .ok_or_else(|| Error::bad_value("SCRAM client-final-message has no proof (p=)"))?;
    let mut fields = without_proof.split(',');
    let channel_binding = fields
        .next()
        .and_then(|f| f.strip_prefix("c="))
        .ok_or_else(|| Error::bad_value("SCRAM client-final-message must start with c="))?;
    let nonce = fields
        .next()
        .and_then(|f| f.strip_prefix("r="))
        .ok_or_else(|| Error::bad_value("SCRAM client-final-message has no nonce (r=)"))?;
    if B64.decode(channel_binding).ok().as_deref() != Some(conv.gs2_header.as_bytes()) {
        return Err(Error::bad_value(
            "SCRAM channel binding data does not match the client's first message",
        ));
    }
    if !bool::from(nonce.as_bytes().ct_eq(conv.nonce.as_bytes())) {
        return Err(Error::bad_value("SCRAM nonce does not match"));
    }
    let proof = B64
        .decode(proof)
        .map_err(|_| Error::bad_value("SCRAM proof is not base64"))?;
    let credentials = configured
        .filter(|u| u.name == conv.user)
        .and_then(|u| u.credentials(conv.mechanism))
        .ok_or_else(auth_failed)?;
    let auth_message = format!(
        "{},{},{}",
        conv.client_first_bare, conv.server_first, without_proof
    );
    let mech = conv.mechanism;
    let client_signature = mech.hmac(&credentials.stored_key, auth_message.as_bytes());
    if proof.len() != client_signature.len() {
        return Err(auth_failed());
    }
    let client_key: Vec<u8> = proof
        .iter()
        .zip(&client_signature)
        .map(|(p, s)| p ^ s)
        .collect();
    // Constant time: how much of the key matched must not show in how long the answer takes.
    if !bool::from(mech.hash(&client_key).ct_eq(&credentials.stored_key)) {
        return Err(auth_failed());
    }
    let server_signature = mech.hmac(&credentials.server_key, auth_message.as_bytes());
    Ok(format!("v={}", B64.encode(server_signature)))
}

fn auth_failed() -> Error {
    Error::new(ErrorCode::AuthenticationFailed, AUTH_FAILED)
}

struct ClientFirst {
    gs2_header: String,
    bare: String,
    user: String,
    nonce: String,
}

/// `gs2-header client-first-message-bare`: `n,,n=<user>,r=<nonce>` (RFC 5802 section 7).
fn parse_client_first(message: &str) -> Result<ClientFirst> {
    let mut parts = message.splitn(3, ',');
    let (Some(cbind), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::bad_value(
            "SCRAM client-first-message must be 'n,,n=<user>,r=<nonce>'",
        ));
    };
    match cbind {
        "n" | "y" => {}
        _ if cbind.starts_with("p=") => {
            return Err(Error::bad_value("SCRAM channel binding is not supported"))
        }
        _ => {
            return Err(Error::bad_value(
                "SCRAM client-first-message must start with 'n,' or 'y,'",
            ))
        }
    }
    let mut fields = bare.split(',');
    let user = fields
        .next()
        .and_then(|f| f.strip_prefix("n="))
        .ok_or_else(|| Error::bad_value("SCRAM client-first-message has no user name (n=)"))?;
    let nonce = fields
        .next()
        .and_then(|f| f.strip_prefix("r="))
        .ok_or_else(|| Error::bad_value("SCRAM client-first-message has no nonce (r=)"))?;
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(Error::bad_value(
            "SCRAM client nonce must be printable ASCII",
        ));
    }
    let user = decode_sasl_name(user)?;
    if let Some(authzid) = authzid.strip_prefix("a=") {
        if decode_sasl_name(authzid)? != user {
            return Err(Error::bad_value(
                "SCRAM authorization identity must be the user name",
            ));
        }
    } else if !authzid.is_empty() {
        return Err(Error::bad_value(
            "SCRAM authorization identity must start with a=",
        ));
    }
    Ok(ClientFirst {
        gs2_header: format!("{cbind},{authzid},"),
        bare: bare.to_string(),
        user,
        nonce: nonce.to_string(),
    })
}

/// `saslname`: `=2C` is a comma and `=3D` an equals sign; any other `=` is malformed.
fn decode_sasl_name(name: &str) -> Result<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(Error::bad_value("SCRAM user name has a bad '=' escape")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(Error::bad_value("SCRAM user name is empty"));
    }
    Ok(out)
}

/// The SASL payload: BinData as drivers send it, or a string as some old shells do.
fn payload(cmd: &Document) -> Result<Vec<u8>> {
    match cmd.get("payload") {
        Some(Bson::Binary(b)) => Ok(b.bytes.clone()),
        Some(Bson::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(_) => Err(Error::type_mismatch("payload must be BinData or a string")),
        None => Err(Error::failed_to_parse("SASL commands require a payload")),
    }
}

fn binary(bytes: &[u8]) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes: bytes.to_vec(),
    })
}

/// What `hello` adds for authentication: `saslSupportedMechs` when asked about the user, and
/// the answer to `speculativeAuthenticate` (a `saslStart` carried in the handshake). A failed
/// speculative attempt is simply left out, as in mongod; the driver then runs `saslStart`
/// itself and sees the error.
pub(crate) fn extend_hello(
    configured: Option<&User>,
    conn: &ConnectionInfo,
    cmd: &Document,
    reply: &mut Document,
) {
    if let (Some(user), Ok(asked)) = (configured, cmd.get_str("saslSupportedMechs")) {
        if asked.split_once('.') == Some((AUTH_DB, user.name())) {
            reply.insert("saslSupportedMechs", user.mechanisms());
        }
    }
    if let Ok(speculative) = cmd.get_document("speculativeAuthenticate") {
        if !speculative.contains_key("saslStart") {
            // MONGODB-X509 speculative authentication: not offered.
            return;
        }
        let db = speculative.get_str("db").unwrap_or(AUTH_DB);
        if let Ok(answer) = start_conversation(configured, conn, speculative, db, true) {
            reply.insert("speculativeAuthenticate", answer);
        }
    }
}

/// `logout`: the connection is no longer authenticated.
pub(crate) fn logout(conn: &ConnectionInfo) -> Document {
    let mut session = conn.auth.lock();
    session.user = None;
    session.conversation = None;
    doc! {}
}

/// `connectionStatus.authInfo`: the user this connection authenticated as, with `root`.
pub(crate) fn connection_status(conn: &ConnectionInfo, show_privileges: bool) -> Document {
    let user = conn.auth.lock().user.clone();
    let (users, roles, privileges) = match user {
        Some(name) => (
            vec![Bson::Document(doc! { "user": name, "db": AUTH_DB })],
            vec![Bson::Document(doc! { "role": "root", "db": AUTH_DB })],
            vec![Bson::Document(doc! {
                "resource": { "anyResource": true },
                "actions": ["anyAction"],
            })],
        ),
        None => (vec![], vec![], vec![]),
    };
    let mut auth_info = doc! {
        "authenticatedUsers": users,
        "authenticatedUserRoles": roles,
    };
    if show_privileges {
        auth_info.insert("authenticatedUserPrivileges", privileges);
    }
    doc! { "authInfo": auth_info }
}

/// `usersInfo`, read-only: the one configured user (`--auth --user`) is `admin.<name>` with the
/// `root` role; without authentication there are no users. Accepts mongod's forms (`1`, a
/// name, `{user, db}`, a list of either, `forAllDBs: true`) and answers `{users: [...]}`.
pub(crate) fn users_info(auth: Option<&User>, cmd: &Document) -> Result<Document> {
    let db = cmd.get_str("$db").unwrap_or(AUTH_DB);
    let wanted = |user: &str, user_db: &str| -> Result<bool> {
        let names = |v: &Bson| -> Result<(String, String)> {
            match v {
                Bson::String(name) => Ok((name.clone(), db.to_string())),
                Bson::Document(d) => match (d.get_str("user"), d.get_str("db")) {
                    (Ok(u), Ok(d)) => Ok((u.to_string(), d.to_string())),
                    _ => Err(Error::bad_value(
                        "User name must contain 'user' and 'db' fields",
                    )),
                },
                other => Err(Error::bad_value(format!(
                    "User and role names must be either strings or objects, found {}",
                    crate::value::type_name(other)
                ))),
            }
        };
        if cmd.get_bool("forAllDBs") == Ok(true) {
            return Ok(true);
        }
        Ok(match cmd.get("usersInfo") {
            Some(Bson::Int32(1) | Bson::Int64(1)) => user_db == db,
            Some(Bson::Double(d)) if *d == 1.0 => user_db == db,
            Some(Bson::Array(items)) => {
                let mut any = false;
                for item in items {
                    let (u, d) = names(item)?;
                    any |= u == user && d == user_db;
                }
                any
            }
            Some(v) => {
                let (u, d) = names(v)?;
                u == user && d == user_db
            }
            None => false,
        })
    };
    let mut users = Vec::new();
    if let Some(user) = auth {
        if wanted(user.name(), AUTH_DB)? {
            users.push(Bson::Document(doc! {
                "_id": format!("{AUTH_DB}.{}", user.name()),
                "user": user.name(),
                "db": AUTH_DB,
                "roles": [{ "role": "root", "db": AUTH_DB }],
                "mechanisms": user.mechanisms(),
            }));
        }
    } else {
        // Validate the argument even when there is nobody to list.
        wanted("", "")?;
    }
    Ok(doc! { "users": users })
}

/// A random password for a user only this process will know (the embedded store).
pub fn generate_password() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Percent-encode a user name or password for a `mongodb://user:password@host` URI.
pub(crate) fn uri_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ServerState;

    /// RFC 7677 section 3: user "user", password "pencil".
    #[test]
    fn the_rfc_7677_example_exchange_verifies() {
        let mech = Mechanism::ScramSha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = mech.salted_password(b"pencil", &salt, 4096);
        let client_key = mech.hmac(&salted, b"Client Key");
        let user = User::with_scram_sha256(
            "user",
            ScramCredentials {
                salt,
                iterations: 4096,
                stored_key: mech.hash(&client_key),
                server_key: mech.hmac(&salted, b"Server Key"),
            },
        )
        .unwrap();
        let conv = Conversation {
            id: 1,
            mechanism: mech,
            user: "user".into(),
            client_first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO".into(),
            server_first: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                           s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
                .into(),
            gs2_header: "n,,".into(),
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into(),
            skip_empty_exchange: true,
            speculative: false,
            step: Step::Proof,
        };
        let state = ServerState::open(crate::Config {
            user: Some(user),
            ..crate::Config::in_memory()
        })
        .unwrap();
        let client_final = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                            p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        assert_eq!(
            verify_proof(state.auth.as_ref(), &conv, client_final.as_bytes()).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        let tampered = client_final.replace("p=dH", "p=eH");
        assert_eq!(
            verify_proof(state.auth.as_ref(), &conv, tampered.as_bytes())
                .unwrap_err()
                .code_number(),
            18
        );
    }

    #[test]
    fn client_first_messages_are_parsed_and_bad_ones_refused() {
        let first = parse_client_first("n,,n=al=2Cice=3D,r=abc").unwrap();
        assert_eq!(first.user, "al,ice=");
        assert_eq!(first.bare, "n=al=2Cice=3D,r=abc");
        assert_eq!(first.gs2_header, "n,,");
        for bad in [
            "",
            "n,,",
            "p=tls-unique,,n=u,r=x",
            "x,,n=u,r=x",
            "n,,r=x",
            "n,,n=u",
            "n,,n=a=2,r=x",
            "n,a=other,n=u,r=x",
        ] {
            assert_eq!(
                parse_client_first(bad).err().map(|e| e.code_number()),
                Some(2),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_sha1_password_digest_is_mongodbs() {
        // md5("user:mongo:pencil")
        assert_eq!(
            mongo_sha1_digest("user", "pencil"),
            "1c33006ec1ffd90f9cadcbcc0e118200"
        );
    }

    #[test]
    fn user_debug_output_hides_the_keys() {
        let user = User::with_password("app", "s3cret").unwrap();
        let shown = format!("{user:?}");
        assert!(shown.contains("app") && shown.contains("SCRAM-SHA-256"));
        assert!(!shown.contains("salt") && !shown.contains("s3cret"));
    }

    #[test]
    fn uri_escape_keeps_unreserved_characters_only() {
        assert_eq!(uri_escape("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(uri_escape("p@ss:w/rd%"), "p%40ss%3Aw%2Frd%25");
    }
}
