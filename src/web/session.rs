//! Cookie sessions: signed and encrypted (actix-session's cookie store), with the key from
//! `session.key` or generated once and kept in the data directory so sessions survive restarts.

use std::io::Write;
use std::path::{Path, PathBuf};

use actix_session::config::CookieContentSecurity;
use actix_session::storage::CookieSessionStore;
use actix_session::SessionMiddleware;
use actix_web::cookie::{Key, SameSite};
use anyhow::Context;
use rand::RngCore;

use crate::config::{DatabaseUri, Settings};

pub(crate) const COOKIE_NAME: &str = "bazaar_session";

/// The session key under which the cart area keeps the id of the visitor's cart.
pub(crate) const CART_ID_KEY: &str = "cart_id";

/// The visitor's cart, as the session records it. Other areas' pages (the product page's "in
/// your cart" note) read it here, so they need not know the cart area.
pub(crate) fn cart_id(session: &actix_session::Session) -> Option<String> {
    session.get::<String>(CART_ID_KEY).ok().flatten()
}

/// The session key under which the accounts area keeps the signed-in customer's account id.
/// The header reads only whether it is there (no database read per page); the account pages
/// check it against the account's `sessions_epoch`.
pub(crate) const ACCOUNT_KEY: &str = "account_id";

/// The session key of the account's `sessions_epoch` the session signed in under (the accounts
/// area writes it; comments read it to know a signed-in commenter without the accounts area).
pub(crate) const ACCOUNT_EPOCH_KEY: &str = "account_epoch";

/// Whether the session says a customer is signed in (for the header's "Account" link).
pub(crate) fn signed_in(session: &actix_session::Session) -> bool {
    session.contains_key(ACCOUNT_KEY)
}

const KEY_FILE: &str = "session.key";

/// The key that signs and encrypts session cookies.
pub(crate) fn load_or_create_key(settings: &Settings) -> anyhow::Result<Key> {
    if let Some(secret) = &settings.session.key {
        // Config validation guarantees the 32 bytes `derive_from` needs.
        return Ok(Key::derive_from(secret.as_bytes()));
    }
    match settings.database.uri {
        // Nothing is kept on disk in memory mode, so neither is the key.
        DatabaseUri::Memory => Ok(Key::generate()),
        DatabaseUri::Embedded | DatabaseUri::External(_) => {
            key_from_file(&settings.database.path.join(KEY_FILE))
        }
    }
}

fn key_from_file(path: &Path) -> anyhow::Result<Key> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let bytes = hex::decode(text.trim()).ok();
            bytes
                .and_then(|b| Key::try_from(b.as_slice()).ok())
                .with_context(|| {
                    format!(
                        "{} is not a session key (128 hex digits); delete it to generate a new one \
                         (signs everyone out)",
                        path.display()
                    )
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_key_file(path),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn create_key_file(path: &Path) -> anyhow::Result<Key> {
    if let Some(dir) = path.parent() {
        // Owner-only, as the store makes it: the directory holds customers' data too.
        docstore::private_fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the data directory {}", dir.display()))?;
    }
    let mut bytes = [0u8; 64];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // The key lets anyone forge sessions: readable by the owner only.
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(mut file) => {
            file.write_all(hex::encode(bytes).as_bytes())
                .and_then(|()| file.sync_all())
                .with_context(|| format!("cannot write {}", path.display()))?;
            tracing::info!(path = %path.display(), "generated a new session key");
            Ok(Key::from(&bytes))
        }
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => key_from_file(path),
        Err(e) => {
            Err(e).with_context(|| format!("cannot create {}", PathBuf::from(path).display()))
        }
    }
}

/// The session middleware: HttpOnly, SameSite=Lax, Secure when served over TLS, contents
/// encrypted (the cookie may hold the cart id and CSRF token).
pub(crate) fn middleware(key: Key, secure: bool) -> SessionMiddleware<CookieSessionStore> {
    SessionMiddleware::builder(CookieSessionStore::default(), key)
        .cookie_name(COOKIE_NAME.to_string())
        .cookie_http_only(true)
        .cookie_same_site(SameSite::Lax)
        .cookie_secure(secure)
        .cookie_content_security(CookieContentSecurity::Private)
        .build()
}

/// Session key holding when the session started (seconds since the Unix epoch).
const STARTED_KEY: &str = "started";

/// App data: how long a session may live (`session.max_age_secs`). The cookie is signed and
/// encrypted but otherwise self-contained, so without this a copied cookie would work forever.
#[derive(Debug, Clone)]
pub(crate) struct SessionPolicy {
    pub(crate) max_age: std::time::Duration,
    /// The database's clock (`Db::clock`): sessions are stamped and aged by the same clock as
    /// every other stamp in the shop, so a test ages a session by stepping it.
    pub(crate) clock: std::sync::Arc<dyn crate::clock::Clock>,
}

impl SessionPolicy {
    fn now_secs(&self) -> i64 {
        self.clock.now().timestamp_millis().div_euclid(1000)
    }
}

/// Middleware inside the session middleware: a session older than the maximum age is emptied
/// before the request is handled, so its cart link, remembered orders and CSRF token all go
/// (the next form gets a fresh token). A session that holds anything is stamped with its start.
pub(crate) async fn enforce_max_age(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    use actix_session::SessionExt;
    let Some(policy) = req
        .app_data::<actix_web::web::Data<SessionPolicy>>()
        .map(|p| p.get_ref().clone())
    else {
        return next
            .call(req)
            .await
            .map(actix_web::dev::ServiceResponse::map_into_boxed_body);
    };
    let session = req.get_session();
    let max_age = i64::try_from(policy.max_age.as_secs()).unwrap_or(i64::MAX);
    match session.get::<i64>(STARTED_KEY) {
        Ok(Some(started)) if policy.now_secs().saturating_sub(started) <= max_age => {}
        // Not stamped yet (new, or written before stamping existed): stamped below from now.
        Ok(None) => {}
        // Too old, or a stamp that cannot be read: start over.
        _ => {
            session.clear();
            session.renew();
        }
    }
    let res = next.call(req).await?;
    if !session.entries().is_empty() && !session.contains_key(STARTED_KEY) {
        if let Err(e) = session.insert(STARTED_KEY, policy.now_secs()) {
            tracing::warn!(error = %e, "could not stamp the session's start");
        }
    }
    Ok(res.map_into_boxed_body())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_file_is_reused_on_the_next_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("data").join(KEY_FILE);
        let first = key_from_file(&path).expect("created");
        let second = key_from_file(&path).expect("read back");
        assert_eq!(first.master(), second.master());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "key file must not be readable by others");
        }
    }

    #[test]
    fn a_corrupt_key_file_is_reported_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(KEY_FILE);
        std::fs::write(&path, "not hex").expect("write");
        let err = match key_from_file(&path) {
            Ok(_) => panic!("a corrupt key file was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("session.key"), "{err}");
    }
}
