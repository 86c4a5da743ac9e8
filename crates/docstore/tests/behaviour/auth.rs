//! Authentication through the official driver: SCRAM-SHA-256 (and SHA-1) with the usual
//! `user:password@host/?authSource=admin` URI, `AuthenticationFailed` (18) for bad credentials,
//! `Unauthorized` (13) for commands before authenticating, and the handshake commands that need
//! no authentication. docstore only: these start their own server with a user.

use crate::common::{code_of, is_docstore, message_of};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};
use docstore::{Config, Server, ServerHandle, User};
use hmac::{Hmac, KeyInit, Mac};
use mongodb::options::ClientOptions;
use mongodb::Client;
use sha2::{Digest, Sha256};
use std::time::Duration;

const USER: &str = "app";
const PASSWORD: &str = "correct horse";

async fn server_with_user(password: &str) -> ServerHandle {
    Server::start(Config {
        user: Some(User::with_password(USER, password).expect("valid user")),
        ..Config::in_memory()
    })
    .await
    .expect("docstore starts")
}

/// One connection, so that the commands of a test share its authentication state.
async fn client(uri: &str) -> Client {
    let mut options = ClientOptions::parse(uri).await.expect("valid URI");
    options.server_selection_timeout = Some(Duration::from_secs(5));
    options.max_pool_size = Some(1);
    Client::with_options(options).expect("client options")
}

/// The server's code behind a driver error, also when the driver wraps it in an
/// authentication error.
fn server_code(e: &mongodb::error::Error) -> Option<i32> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = current {
        // The driver keeps the server's error boxed as the source of its own.
        let driver_error = err.downcast_ref::<mongodb::error::Error>().or_else(|| {
            err.downcast_ref::<Box<mongodb::error::Error>>()
                .map(|b| &**b)
        });
        if let Some(code) = driver_error.and_then(code_of) {
            return Some(code);
        }
        current = err.source();
    }
    None
}

async fn find_one(client: &Client) -> mongodb::error::Result<Option<Document>> {
    client
        .database("shop")
        .collection::<Document>("orders")
        .find_one(doc! {})
        .await
}

#[tokio::test]
async fn the_right_credentials_read_and_write_and_connection_status_names_the_user() {
    if !is_docstore() {
        return;
    }
    let server = server_with_user(PASSWORD).await;
    let client = client(&server.uri_with_credentials(USER, PASSWORD)).await;
    let orders = client.database("shop").collection::<Document>("orders");
    orders
        .insert_one(doc! { "_id": 1, "email": "a@example.com" })
        .await
        .expect("an authenticated insert works");
    let found = orders.find_one(doc! { "_id": 1 }).await.unwrap().unwrap();
    assert_eq!(found.get_str("email").unwrap(), "a@example.com");
    let status = client
        .database("admin")
        .run_command(doc! { "connectionStatus": 1 })
        .await
        .unwrap();
    let auth = status.get_document("authInfo").unwrap();
    assert_eq!(
        auth.get_array("authenticatedUsers").unwrap(),
        &vec![Bson::Document(doc! { "user": USER, "db": "admin" })]
    );
    assert_eq!(
        auth.get_array("authenticatedUserRoles").unwrap(),
        &vec![Bson::Document(doc! { "role": "root", "db": "admin" })]
    );
}

#[tokio::test]
async fn a_wrong_password_an_unknown_user_or_another_auth_database_fail_with_code_18() {
    if !is_docstore() {
        return;
    }
    let server = server_with_user(PASSWORD).await;
    let addr = server.local_addr();
    for uri in [
        server.uri_with_credentials(USER, "wrong horse"),
        server.uri_with_credentials("someone", PASSWORD),
        format!("mongodb://{USER}:correct%20horse@{addr}/?authSource=shop"),
        format!("mongodb://{USER}:wrong@{addr}/?authSource=admin&authMechanism=SCRAM-SHA-1"),
    ] {
        let e = find_one(&client(&uri).await)
            .await
            .expect_err("authentication fails");
        assert_eq!(server_code(&e), Some(18), "{e}");
        assert!(e.to_string().contains("Authentication failed."), "{e}");
    }
}

#[tokio::test]
async fn an_unauthenticated_client_gets_unauthorized_for_reads_and_writes() {
    if !is_docstore() {
        return;
    }
    let server = server_with_user(PASSWORD).await;
    let client = client(&server.uri()).await;
    let e = find_one(&client)
        .await
        .expect_err("reading needs authentication");
    assert_eq!(code_of(&e), Some(13), "{e}");
    assert_eq!(message_of(&e), "command find requires authentication");
    let e = client
        .database("shop")
        .collection::<Document>("orders")
        .insert_one(doc! { "x": 1 })
        .await
        .expect_err("writing needs authentication");
    assert_eq!(code_of(&e), Some(13), "{e}");
    for command in [
        doc! { "listDatabases": 1 },
        doc! { "serverStatus": 1 },
        doc! { "getCmdLineOpts": 1 },
    ] {
        let e = client
            .database("admin")
            .run_command(command.clone())
            .await
            .expect_err("needs authentication");
        assert_eq!(code_of(&e), Some(13), "{command}: {e}");
    }
    // Nothing was written.
    let authed = self::client(&server.uri_with_credentials(USER, PASSWORD)).await;
    assert_eq!(find_one(&authed).await.unwrap(), None);
}

#[tokio::test]
async fn an_unauthenticated_client_still_gets_hello_ping_build_info_and_its_status() {
    if !is_docstore() {
        return;
    }
    let server = server_with_user(PASSWORD).await;
    let client = client(&server.uri()).await;
    let admin = client.database("admin");
    admin.run_command(doc! { "ping": 1 }).await.expect("ping");
    let info = admin.run_command(doc! { "buildInfo": 1 }).await.unwrap();
    assert_eq!(info.get_str("version").unwrap(), "7.0.0");
    let hello = admin
        .run_command(doc! { "hello": 1, "saslSupportedMechs": "admin.app" })
        .await
        .unwrap();
    assert!(hello.get_bool("isWritablePrimary").unwrap());
    assert_eq!(
        hello.get_array("saslSupportedMechs").unwrap(),
        &vec![Bson::from("SCRAM-SHA-256"), Bson::from("SCRAM-SHA-1")]
    );
    let hello = admin
        .run_command(doc! { "hello": 1, "saslSupportedMechs": "admin.nobody" })
        .await
        .unwrap();
    assert!(!hello.contains_key("saslSupportedMechs"), "{hello}");
    let status = admin
        .run_command(doc! { "connectionStatus": 1 })
        .await
        .unwrap();
    let users = status
        .get_document("authInfo")
        .unwrap()
        .get_array("authenticatedUsers")
        .unwrap();
    assert!(users.is_empty(), "{status}");
}

#[tokio::test]
async fn scram_sha_1_works_when_the_client_asks_for_it() {
    if !is_docstore() {
        return;
    }
    let server = server_with_user(PASSWORD).await;
    let uri = format!(
        "{}&authMechanism=SCRAM-SHA-1",
        server.uri_with_credentials(USER, PASSWORD)
    );
    let client = client(&uri).await;
    assert_eq!(find_one(&client).await.unwrap(), None);
}

#[tokio::test]
async fn a_password_is_compared_after_saslprep_and_may_hold_uri_special_characters() {
    if !is_docstore() {
        return;
    }
    // SASLprep maps a no-break space to a space, so both spellings are the same password.
    let server = server_with_user("p@ss:w/rd\u{00A0}\u{00E9}t\u{00E9}").await;
    for typed in [
        "p@ss:w/rd\u{00A0}\u{00E9}t\u{00E9}",
        "p@ss:w/rd \u{00E9}t\u{00E9}",
    ] {
        let client = client(&server.uri_with_credentials(USER, typed)).await;
        assert_eq!(find_one(&client).await.unwrap(), None, "{typed:?}");
    }
}

#[tokio::test]
async fn logout_makes_the_connection_unauthenticated_again() {
    if !is_docstore() {
        return;
    }
    let server = server_with_user(PASSWORD).await;
    let client = client(&server.uri_with_credentials(USER, PASSWORD)).await;
    assert_eq!(find_one(&client).await.unwrap(), None);
    client
        .database("admin")
        .run_command(doc! { "logout": 1 })
        .await
        .expect("logout");
    let e = find_one(&client).await.expect_err("logged out");
    assert_eq!(code_of(&e), Some(13), "{e}");
}

fn binary(bytes: &[u8]) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes: bytes.to_vec(),
    })
}

fn payload_text(reply: &Document) -> String {
    String::from_utf8(reply.get_binary_generic("payload").unwrap().clone()).unwrap()
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// `client-final-message` for `server_first`, computed as RFC 5802 describes, and the
/// ServerSignature the server must answer with.
fn client_final(password: &str, client_first_bare: &str, server_first: &str) -> (String, String) {
    let mut nonce = "";
    let mut salt = Vec::new();
    let mut iterations = 0;
    for field in server_first.split(',') {
        match field.split_at(2) {
            ("r=", v) => nonce = v,
            ("s=", v) => salt = B64.decode(v).unwrap(),
            ("i=", v) => iterations = v.parse().unwrap(),
            _ => {}
        }
    }
    let mut salted = [0u8; 32];
    pbkdf2::pbkdf2::<Hmac<Sha256>>(password.as_bytes(), &salt, iterations, &mut salted).unwrap();
    let client_key = hmac(&salted, b"Client Key");
    let stored_key = Sha256::digest(&client_key);
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
    let signature = hmac(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(k, s)| k ^ s)
        .collect();
    let server_signature = hmac(&hmac(&salted, b"Server Key"), auth_message.as_bytes());
    (
        format!("{without_proof},p={}", B64.encode(proof)),
        format!("v={}", B64.encode(server_signature)),
    )
}

#[tokio::test]
async fn speculative_authentication_in_hello_then_the_full_three_round_exchange_authenticates() {
    if !is_docstore() {
        return;
    }
    let server = server_with_user(PASSWORD).await;
    let client = client(&server.uri()).await;
    let admin = client.database("admin");
    let client_first_bare = "n=app,r=fyko+d2lbbFgONRv9qkxdawL";
    let hello = admin
        .run_command(doc! {
            "hello": 1,
            "speculativeAuthenticate": {
                "saslStart": 1,
                "mechanism": "SCRAM-SHA-256",
                "payload": binary(format!("n,,{client_first_bare}").as_bytes()),
                "db": "admin",
            },
        })
        .await
        .unwrap();
    let first = hello.get_document("speculativeAuthenticate").unwrap();
    assert!(!first.get_bool("done").unwrap());
    let server_first = payload_text(first);
    assert!(
        server_first.starts_with("r=fyko+d2lbbFgONRv9qkxdawL") && server_first.contains(",i=15000"),
        "{server_first}"
    );
    let conversation = first.get("conversationId").unwrap().clone();
    let (final_message, expected_signature) =
        client_final(PASSWORD, client_first_bare, &server_first);
    // Without skipEmptyExchange the server proves itself, then waits for an empty message.
    let second = admin
        .run_command(doc! {
            "saslContinue": 1,
            "conversationId": conversation.clone(),
            "payload": binary(final_message.as_bytes()),
        })
        .await
        .unwrap();
    assert_eq!(payload_text(&second), expected_signature);
    assert!(!second.get_bool("done").unwrap());
    let e = find_one(&client).await.expect_err("not done yet");
    assert_eq!(code_of(&e), Some(13));
    let third = admin
        .run_command(doc! {
            "saslContinue": 1,
            "conversationId": conversation,
            "payload": binary(b""),
        })
        .await
        .unwrap();
    assert!(third.get_bool("done").unwrap());
    assert_eq!(find_one(&client).await.unwrap(), None);
}

#[tokio::test]
async fn a_forged_proof_fails_with_18_and_a_failed_speculative_attempt_is_left_out_of_hello() {
    if !is_docstore() {
        return;
    }
    let server = server_with_user(PASSWORD).await;
    let client = client(&server.uri()).await;
    let admin = client.database("admin");
    let hello = admin
        .run_command(doc! {
            "hello": 1,
            "speculativeAuthenticate": {
                "saslStart": 1,
                "mechanism": "SCRAM-SHA-256",
                "payload": binary(b"n,,n=nobody,r=abc"),
                "db": "admin",
            },
        })
        .await
        .unwrap();
    assert!(!hello.contains_key("speculativeAuthenticate"), "{hello}");
    let client_first_bare = "n=app,r=abcdefgh";
    let first = admin
        .run_command(doc! {
            "saslStart": 1,
            "mechanism": "SCRAM-SHA-256",
            "payload": binary(format!("n,,{client_first_bare}").as_bytes()),
            "options": { "skipEmptyExchange": true },
        })
        .await
        .unwrap();
    let (final_message, _) = client_final("guess", client_first_bare, &payload_text(&first));
    let e = admin
        .run_command(doc! {
            "saslContinue": 1,
            "conversationId": first.get("conversationId").unwrap().clone(),
            "payload": binary(final_message.as_bytes()),
        })
        .await
        .expect_err("wrong proof");
    assert_eq!(code_of(&e), Some(18), "{e}");
    assert_eq!(message_of(&e), "Authentication failed.");
    let e = admin
        .run_command(doc! {
            "saslStart": 1,
            "mechanism": "PLAIN",
            "payload": binary(b"\0app\0pw"),
        })
        .await
        .expect_err("PLAIN is not offered");
    assert_eq!(code_of(&e), Some(334), "{e}");
    let e = find_one(&client).await.expect_err("still unauthenticated");
    assert_eq!(code_of(&e), Some(13));
}

/// An embedding program's own connection can skip TCP: the Unix socket asks for the same
/// authentication, is readable by its owner only, replaces a stale socket file a crash left
/// and is removed at shutdown. docstore only.
#[cfg(unix)]
#[tokio::test]
async fn a_unix_socket_serves_authenticated_clients_and_is_removed_at_shutdown() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if !is_docstore() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("docstore.sock");
    // What a crashed run leaves behind: a socket file nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&path).expect("stale socket"));
    let server = Server::start(Config {
        user: Some(User::with_password(USER, PASSWORD).expect("valid user")),
        unix_socket: Some(path.clone()),
        ..Config::in_memory()
    })
    .await
    .expect("docstore starts");
    assert_eq!(server.unix_socket(), Some(path.as_path()));
    let meta = std::fs::symlink_metadata(&path).expect("socket file");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    let uri = server
        .unix_uri_with_credentials(USER, PASSWORD)
        .expect("a socket URI");
    let good = client(&uri).await;
    good.database("shop")
        .collection::<Document>("orders")
        .insert_one(doc! { "_id": 1, "total": 12 })
        .await
        .expect("insert through the socket");
    assert_eq!(
        find_one(&good).await.expect("find through the socket"),
        Some(doc! { "_id": 1, "total": 12 })
    );
    let wrong = server
        .unix_uri_with_credentials(USER, "wrong password")
        .expect("a socket URI");
    let refused = find_one(&client(&wrong).await)
        .await
        .expect_err("a wrong password is refused over the socket too");
    assert_eq!(server_code(&refused), Some(18), "{refused}");

    server.shutdown().await;
    assert!(!path.exists(), "the socket file is removed at shutdown");
}

/// A login attempt that fails at once: `saslStart` for a user that does not exist (18).
async fn failed_login(admin: &mongodb::Database) -> std::time::Duration {
    let started = std::time::Instant::now();
    let e = admin
        .run_command(doc! {
            "saslStart": 1,
            "mechanism": "SCRAM-SHA-256",
            "payload": binary(b"n,,n=nobody,r=fyko+d2lbbFgONRv9qkxdawL"),
        })
        .await
        .expect_err("no such user");
    assert_eq!(code_of(&e), Some(18), "{e}");
    started.elapsed()
}

/// Guessing passwords from one address is slowed down: five failures cost nothing, the sixth
/// attempt waits (half a second, doubling with each further failure), the wait holds up no
/// other connection (the test, its clients and the server share one thread here), and a
/// successful login clears the address's record.
#[tokio::test]
async fn repeated_failed_logins_from_one_address_are_slowed_down_without_holding_up_others() {
    if !is_docstore() {
        return;
    }
    let server = server_with_user(PASSWORD).await;
    let authenticated = client(&server.uri_with_credentials(USER, PASSWORD)).await;
    assert_eq!(find_one(&authenticated).await.unwrap(), None);
    let guesser = client(&server.uri()).await;
    let admin = guesser.database("admin");
    for attempt in 1..=5 {
        let took = failed_login(&admin).await;
        assert!(
            took < Duration::from_millis(400),
            "attempt {attempt} took {took:?}"
        );
    }
    let (delayed, (other, other_took)) = tokio::join!(failed_login(&admin), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        (find_one(&authenticated).await, started.elapsed())
    });
    assert!(
        delayed >= Duration::from_millis(450),
        "the sixth attempt took {delayed:?}"
    );
    assert_eq!(other.unwrap(), None);
    assert!(
        other_took < Duration::from_millis(300),
        "an authenticated client waited {other_took:?} behind the delayed login"
    );
    let seventh = failed_login(&admin).await;
    assert!(
        seventh >= Duration::from_millis(950),
        "the seventh attempt took {seventh:?}"
    );

    // The right password (after its own wait) clears the record.
    let fresh = client(&server.uri_with_credentials(USER, PASSWORD)).await;
    assert_eq!(find_one(&fresh).await.unwrap(), None);
    let after = failed_login(&admin).await;
    assert!(
        after < Duration::from_millis(400),
        "after a success it took {after:?}"
    );
}
