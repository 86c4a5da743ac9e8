//! HTTP Basic authentication for `/admin`: the configured user name and argon2 password hash,
//! or a random password generated at start-up when no hash is configured.

use std::sync::{Arc, Mutex};

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, StatusCode};
use actix_web::middleware::Next;
use actix_web::web;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64::Engine as _;
use rand::distributions::{Alphanumeric, DistString};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::AdminSettings;
use crate::web::errors::error_page;

pub const REALM_HEADER: &str = "Basic realm=\"Bazaar admin\", charset=\"UTF-8\"";
const GENERATED_PASSWORD_LENGTH: usize = 24;

/// Who may enter `/admin`.
pub struct AdminCredentials {
    username: String,
    secret: Secret,
    /// Random per process: the cache below stores `SHA-256(pepper, user, password)`, never the
    /// password itself, and the digest is useless outside this process.
    pepper: [u8; 32],
    /// Digest of the last credentials argon2 accepted. Argon2 is deliberately slow (very slow
    /// in debug builds) and browsers resend credentials with every request, so a request with
    /// the same credentials skips it. Only successes are cached.
    verified: Mutex<Option<[u8; 32]>>,
}

enum Secret {
    /// Argon2 PHC string from the configuration.
    Hash(String),
    /// Generated at start-up because no hash was configured.
    Generated(String),
}

impl AdminCredentials {
    /// Credentials from the settings, and the generated password if one had to be made (the
    /// caller logs it once).
    pub fn from_settings(admin: &AdminSettings) -> (AdminCredentials, Option<String>) {
        let mut pepper = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut pepper);
        let (secret, generated) = match &admin.password_hash {
            Some(hash) => (Secret::Hash(hash.clone()), None),
            None => {
                let password =
                    Alphanumeric.sample_string(&mut rand::rngs::OsRng, GENERATED_PASSWORD_LENGTH);
                (Secret::Generated(password.clone()), Some(password))
            }
        };
        let credentials = AdminCredentials {
            username: admin.username.clone(),
            secret,
            pepper,
            verified: Mutex::new(None),
        };
        (credentials, generated)
    }

    pub fn username(&self) -> &str {
        &self.username
    }

    /// Whether these are the admin's credentials. Comparisons are constant-time, and the
    /// password is checked even when the user name is wrong so timing does not reveal which.
    pub async fn verify(self: &Arc<Self>, username: &str, password: &str) -> bool {
        let username_ok: bool = username.as_bytes().ct_eq(self.username.as_bytes()).into();
        let password_ok = match &self.secret {
            Secret::Generated(expected) => password.as_bytes().ct_eq(expected.as_bytes()).into(),
            Secret::Hash(phc) => {
                let digest = self.digest(username, password);
                let cached = self
                    .verified
                    .lock()
                    .ok()
                    .and_then(|guard| *guard)
                    .is_some_and(|known| bool::from(known.ct_eq(&digest)));
                if cached {
                    true
                } else {
                    let phc = phc.clone();
                    let password = password.to_string();
                    // Off the async workers: argon2 takes tens of milliseconds at least.
                    let ok = web::block(move || verify_password(&password, &phc))
                        .await
                        .unwrap_or(false);
                    if ok && username_ok {
                        if let Ok(mut guard) = self.verified.lock() {
                            *guard = Some(digest);
                        }
                    }
                    ok
                }
            }
        };
        username_ok && password_ok
    }

    fn digest(&self, username: &str, password: &str) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(self.pepper);
        hasher.update((username.len() as u64).to_le_bytes());
        hasher.update(username.as_bytes());
        hasher.update(password.as_bytes());
        hasher.finalize().into()
    }
}

fn verify_password(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(hash) => Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok(),
        Err(_) => false,
    }
}

/// A PHC string for `password` (what `bazaar hash-password` prints).
pub fn hash_password(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut rand::rngs::OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| anyhow::anyhow!("hashing the password failed: {e}"))
}

/// Whether a configured hash is an argon2 PHC string (checked when the settings load).
pub fn check_password_hash(phc: &str) -> Result<(), String> {
    let hash = PasswordHash::new(phc)
        .map_err(|e| format!("expected an argon2 PHC string from `bazaar hash-password` ({e})"))?;
    if !hash.algorithm.as_str().starts_with("argon2") {
        return Err(format!(
            "expected an argon2 hash, got algorithm {:?}",
            hash.algorithm.as_str()
        ));
    }
    Ok(())
}

/// `Authorization: Basic base64(user:password)` → `(user, password)`.
fn basic_credentials(req: &ServiceRequest) -> Option<(String, String)> {
    credentials_in(req.headers())
}

fn credentials_in(headers: &header::HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// Whether a request outside `/admin` carries the admin's credentials (pages that admins may
/// also see, such as an order's confirmation).
pub async fn carries_admin_credentials(req: &actix_web::HttpRequest) -> bool {
    let Some(credentials) = req.app_data::<web::Data<AdminCredentials>>().cloned() else {
        return false;
    };
    match credentials_in(req.headers()) {
        Some((user, password)) => credentials.into_inner().verify(&user, &password).await,
        None => false,
    }
}

/// Whether a path (as the router sees it, percent-decoding applied) is in the admin area.
pub fn is_admin_path(path: &str) -> bool {
    path == "/admin" || path.starts_with("/admin/")
}

/// Middleware for the whole app: requests for the admin area need the admin's credentials.
/// It runs before the CSRF check, so an unauthenticated POST gets 401, not 403.
pub async fn guard_admin_area(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    // `match_info` holds the path the router will match, so encodings such as `/%61dmin`
    // cannot slip past this check.
    if !is_admin_path(req.match_info().as_str()) {
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    }
    require_admin(req, next).await
}

/// Middleware: answer 401 unless the request carries the admin's credentials.
pub async fn require_admin(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(credentials) = req.app_data::<web::Data<AdminCredentials>>().cloned() else {
        // Fail closed if the app was assembled without credentials.
        tracing::error!("admin credentials are not configured in the app; refusing /admin");
        return Ok(req.into_response(error_page(StatusCode::INTERNAL_SERVER_ERROR, None)));
    };
    let authorized = match basic_credentials(&req) {
        Some((user, password)) => credentials.into_inner().verify(&user, &password).await,
        None => false,
    };
    if !authorized {
        let mut page = error_page(StatusCode::UNAUTHORIZED, None);
        page.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static(REALM_HEADER),
        );
        return Ok(req.into_response(page));
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_boxed_body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_from_hash_password_is_accepted_by_the_config_check() {
        let phc = hash_password("open sesame").expect("hash");
        assert!(check_password_hash(&phc).is_ok());
        assert!(verify_password("open sesame", &phc));
        assert!(!verify_password("open sesame!", &phc));
    }

    #[test]
    fn non_argon2_strings_are_refused() {
        assert!(check_password_hash("plaintext").is_err());
        assert!(check_password_hash("$pbkdf2-sha256$i=1000$c2FsdA$aGFzaA").is_err());
    }

    #[test]
    fn admin_paths_include_the_scope_and_everything_below_it() {
        assert!(is_admin_path("/admin"));
        assert!(is_admin_path("/admin/"));
        assert!(is_admin_path("/admin/products/1"));
        assert!(!is_admin_path("/administrator"));
        assert!(!is_admin_path("/"));
    }
}
