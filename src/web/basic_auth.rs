//! HTTP Basic authentication for `/admin`: the configured user name and argon2 password hash,
//! or a random password generated at start-up when no hash is configured.
//!
//! Argon2 is memory-hard on purpose (about 19 MiB per verification), so anyone able to send a
//! wrong password could otherwise make the server allocate without bound. Two limits stop that:
//! at most `admin.max_concurrent_verifications` hashes run at once (others wait briefly, then
//! get 429), and a client address whose passwords keep failing is refused without hashing for a
//! delay that doubles with every further failure.
//!
//! The delay only counts failures that have finished, so an address also holds a reservation
//! for every check it has running ([`MAX_IN_FLIGHT_PER_CLIENT`] at most): without it, a burst of
//! simultaneous guesses would all pass the "is this address waiting?" check before the first
//! failure was recorded, and all reach argon2.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
use crate::web::error_page::error_page;

pub(crate) const REALM_HEADER: &str = "Basic realm=\"Bazaar admin\", charset=\"UTF-8\"";
const GENERATED_PASSWORD_LENGTH: usize = 24;
/// How long a request waits for a free verification slot before it is answered 429.
const VERIFICATION_WAIT: Duration = Duration::from_secs(3);
/// The longest a failing client address is made to wait between attempts.
const MAX_DELAY: Duration = Duration::from_secs(300);
/// A client address without failures for this long starts afresh.
const FORGET_FAILURES_AFTER: Duration = Duration::from_secs(15 * 60);
/// Client addresses whose failures are remembered at once (the table must not grow without
/// bound under a flood from many addresses either).
const MAX_TRACKED_CLIENTS: usize = 10_000;
/// Password checks one client address may have running at once; further attempts from it are
/// answered 429 without hashing until one finishes (and is counted as a failure or success).
pub const MAX_IN_FLIGHT_PER_CLIENT: u32 = 2;

/// The outcome of checking a request's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Granted,
    Denied,
    /// Not checked: the client failed too often recently, or every verification slot stayed
    /// busy. Try again after this many seconds.
    Throttled {
        retry_after_secs: u64,
    },
}

/// Counters of password verifications (argon2 runs), for monitoring and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerificationStats {
    /// Argon2 verifications started.
    pub runs: u64,
    /// The most that ever ran at the same time.
    pub peak_concurrent: usize,
    /// Requests refused without a verification (rate limit or no free slot).
    pub(crate) throttled: u64,
}

/// Failed attempts from one client address.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
    blocked_until: Option<Instant>,
    /// Checks from this address running right now (reserved by [`Limits::reserve`]).
    in_flight: u32,
}

/// A password check handed to a verifier thread.
type Job = Box<dyn FnOnce() + Send>;

/// Threads that run argon2, one per slot. Dedicated threads rather than the shared blocking
/// pool: each thread's allocator keeps the ~19 MiB it freed for its next verification, so memory
/// stays at slots × 19 MiB however many requests come, instead of spreading over (and being
/// retained by) every thread of the pool.
struct Verifiers {
    jobs: Mutex<std::sync::mpsc::Sender<Job>>,
}

impl Verifiers {
    fn start(threads: usize) -> Verifiers {
        let (sender, receiver) = std::sync::mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        for n in 0..threads {
            let receiver = Arc::clone(&receiver);
            let spawned = std::thread::Builder::new()
                .name(format!("password-check-{n}"))
                .spawn(move || loop {
                    // Ends when the credentials (and with them the sender) are dropped.
                    let job = match receiver.lock() {
                        Ok(guard) => guard.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a password-check thread");
            }
        }
        Verifiers {
            jobs: Mutex::new(sender),
        }
    }

    /// Run `check` on a verifier thread; `None` if none is running.
    async fn run(&self, check: impl FnOnce() -> bool + Send + 'static) -> Option<bool> {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            // A request abandoned while queued needs no answer: skip the work.
            if !done.is_closed() {
                let _ = done.send(check());
            }
        });
        self.jobs.lock().ok()?.send(job).ok()?;
        result.await.ok()
    }
}

/// The verification slots and per-address failure record.
struct Limits {
    slots: tokio::sync::Semaphore,
    verifiers: Verifiers,
    failures_before_delay: u32,
    failures: Mutex<HashMap<IpAddr, Failures>>,
    /// Verifications running right now, counted on the verifier threads themselves.
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    runs: AtomicU64,
    throttled: AtomicU64,
}

impl Limits {
    fn new(admin: &AdminSettings) -> Limits {
        Limits {
            slots: tokio::sync::Semaphore::new(admin.max_concurrent_verifications.max(1)),
            verifiers: Verifiers::start(admin.max_concurrent_verifications.max(1)),
            failures_before_delay: admin.failures_before_delay.max(1),
            failures: Mutex::new(HashMap::new()),
            running: Arc::new(AtomicUsize::new(0)),
            peak: Arc::new(AtomicUsize::new(0)),
            runs: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
        }
    }

    /// Seconds left before `client` may try again, if it is being made to wait.
    fn blocked_for(&self, client: Option<IpAddr>) -> Option<u64> {
        let client = client?;
        let failures = self.failures.lock().ok()?;
        wait_left(failures.get(&client)?, Instant::now())
    }

    /// Take one of `client`'s in-flight places for a password check, or say how long to wait:
    /// the address is being made to wait, or already has [`MAX_IN_FLIGHT_PER_CLIENT`] checks
    /// running. The check and the reservation happen under one lock, so simultaneous requests
    /// cannot all pass it. The place is given back by [`Reservation`]'s drop.
    fn reserve(&self, client: Option<IpAddr>) -> Result<Reservation<'_>, u64> {
        let Some(client) = client else {
            return Ok(Reservation {
                limits: self,
                client: None,
            });
        };
        let Ok(mut failures) = self.failures.lock() else {
            return Err(1);
        };
        let now = Instant::now();
        let entry = self.entry(&mut failures, client, now);
        if let Some(wait) = wait_left(entry, now) {
            return Err(wait);
        }
        if entry.in_flight >= MAX_IN_FLIGHT_PER_CLIENT {
            return Err(1);
        }
        entry.in_flight += 1;
        Ok(Reservation {
            limits: self,
            client: Some(client),
        })
    }

    /// `client`'s record, created (room made for it first) when it has none.
    fn entry<'a>(
        &self,
        failures: &'a mut HashMap<IpAddr, Failures>,
        client: IpAddr,
        now: Instant,
    ) -> &'a mut Failures {
        self.make_room(failures, client, now);
        failures.entry(client).or_insert(Failures {
            count: 0,
            last: now,
            blocked_until: None,
            in_flight: 0,
        })
    }

    /// Keep the table within [`MAX_TRACKED_CLIENTS`] before `client` is added: forget stale
    /// addresses, then the stalest one with nothing in flight.
    fn make_room(&self, failures: &mut HashMap<IpAddr, Failures>, client: IpAddr, now: Instant) {
        if failures.len() < MAX_TRACKED_CLIENTS || failures.contains_key(&client) {
            return;
        }
        failures
            .retain(|_, f| f.in_flight > 0 || now.duration_since(f.last) < FORGET_FAILURES_AFTER);
        if failures.len() >= MAX_TRACKED_CLIENTS {
            if let Some(stalest) = failures
                .iter()
                .filter(|(_, f)| f.in_flight == 0)
                .min_by_key(|(_, f)| f.last)
                .map(|(ip, _)| *ip)
            {
                failures.remove(&stalest);
            }
        }
    }

    fn record_failure(&self, client: Option<IpAddr>) {
        let Some(client) = client else { return };
        let Ok(mut failures) = self.failures.lock() else {
            return;
        };
        let now = Instant::now();
        let entry = self.entry(&mut failures, client, now);
        if now.duration_since(entry.last) >= FORGET_FAILURES_AFTER {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        if entry.count >= self.failures_before_delay {
            // 1 s at the threshold, doubling with every further failure, up to MAX_DELAY.
            let doublings = (entry.count - self.failures_before_delay).min(16);
            let delay = Duration::from_secs(1u64 << doublings).min(MAX_DELAY);
            entry.blocked_until = Some(now + delay);
        }
    }

    fn record_success(&self, client: Option<IpAddr>) {
        if let (Some(client), Ok(mut failures)) = (client, self.failures.lock()) {
            // Other checks of this address may still be running: keep their reservations.
            if let Some(entry) = failures.get_mut(&client) {
                entry.count = 0;
                entry.blocked_until = None;
                if entry.in_flight == 0 {
                    failures.remove(&client);
                }
            }
        }
    }

    fn release(&self, client: IpAddr) {
        if let Ok(mut failures) = self.failures.lock() {
            if let Some(entry) = failures.get_mut(&client) {
                entry.in_flight = entry.in_flight.saturating_sub(1);
            }
        }
    }

    fn throttle(&self, retry_after_secs: u64) -> Verdict {
        self.throttled.fetch_add(1, Ordering::Relaxed);
        Verdict::Throttled { retry_after_secs }
    }
}

/// Seconds left of the wait imposed on an address, if any (rounded up: "retry after 1 s" must
/// not come before the delay is over).
fn wait_left(failures: &Failures, now: Instant) -> Option<u64> {
    let until = failures.blocked_until?;
    (until > now).then(|| ((until - now).as_secs_f64().ceil() as u64).max(1))
}

/// One in-flight place of a client address; given back when dropped, so a request abandoned
/// mid-check (the client hung up) releases it too.
struct Reservation<'a> {
    limits: &'a Limits,
    client: Option<IpAddr>,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client {
            self.limits.release(client);
        }
    }
}

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
    limits: Limits,
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
    pub(crate) fn from_settings(admin: &AdminSettings) -> (AdminCredentials, Option<String>) {
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
            limits: Limits::new(admin),
        };
        (credentials, generated)
    }

    pub(crate) fn username(&self) -> &str {
        &self.username
    }

    /// Check credentials sent from `client`. Comparisons are constant-time, and the password is
    /// checked even when the user name is wrong so timing does not reveal which. Credentials
    /// accepted before are recognised without argon2 even while the address is throttled, so
    /// a signed-in admin keeps working during a flood of wrong guesses from the same network.
    pub(crate) async fn check(
        self: &Arc<Self>,
        client: Option<IpAddr>,
        username: &str,
        password: &str,
    ) -> Verdict {
        let username_ok: bool = username.as_bytes().ct_eq(self.username.as_bytes()).into();
        // The address's in-flight place (if a hash runs) is held until the outcome is recorded
        // below, so the next attempt from the address already sees this failure.
        let (password_ok, _reservation) = match &self.secret {
            Secret::Generated(expected) => {
                if let Some(wait) = self.limits.blocked_for(client) {
                    return self.limits.throttle(wait);
                }
                (password.as_bytes().ct_eq(expected.as_bytes()).into(), None)
            }
            Secret::Hash(phc) => {
                let digest = self.digest(username, password);
                let cached = self
                    .verified
                    .lock()
                    .ok()
                    .and_then(|guard| *guard)
                    .is_some_and(|known| bool::from(known.ct_eq(&digest)));
                if cached && username_ok {
                    // Not a new sign-in: the address's failure record stays as it is, so a
                    // signed-in admin's requests do not reset the count of someone guessing
                    // from the same network.
                    return Verdict::Granted;
                }
                let reservation = match self.limits.reserve(client) {
                    Ok(reservation) => reservation,
                    Err(wait) => return self.limits.throttle(wait),
                };
                let Some(ok) = self.run_argon2(phc, password).await else {
                    return self.limits.throttle(VERIFICATION_WAIT.as_secs());
                };
                if ok && username_ok {
                    if let Ok(mut guard) = self.verified.lock() {
                        *guard = Some(digest);
                    }
                }
                (ok, Some(reservation))
            }
        };
        if username_ok && password_ok {
            self.limits.record_success(client);
            Verdict::Granted
        } else {
            self.limits.record_failure(client);
            Verdict::Denied
        }
    }

    /// One argon2 verification in a free slot, on a verifier thread; `None` when no slot came
    /// free within [`VERIFICATION_WAIT`].
    async fn run_argon2(&self, phc: &str, password: &str) -> Option<bool> {
        let limits = &self.limits;
        let _permit = tokio::time::timeout(VERIFICATION_WAIT, limits.slots.acquire())
            .await
            .ok()?
            .ok()?;
        limits.runs.fetch_add(1, Ordering::Relaxed);
        let phc = phc.to_string();
        let password = password.to_string();
        let (running, peak) = (Arc::clone(&limits.running), Arc::clone(&limits.peak));
        // Off the async workers: argon2 takes tens of milliseconds at least.
        let ok = limits
            .verifiers
            .run(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                let ok = verify_password(&password, &phc);
                running.fetch_sub(1, Ordering::SeqCst);
                ok
            })
            .await
            .unwrap_or(false);
        Some(ok)
    }

    /// How many verifications ran, at most how many at once, and how many were refused.
    pub fn stats(&self) -> VerificationStats {
        VerificationStats {
            runs: self.limits.runs.load(Ordering::Relaxed),
            peak_concurrent: self.limits.peak.load(Ordering::SeqCst),
            throttled: self.limits.throttled.load(Ordering::Relaxed),
        }
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
pub(crate) async fn carries_admin_credentials(req: &actix_web::HttpRequest) -> bool {
    let Some(credentials) = req.app_data::<web::Data<AdminCredentials>>().cloned() else {
        return false;
    };
    let client = crate::web::client::client_ip(req);
    match credentials_in(req.headers()) {
        Some((user, password)) => {
            credentials
                .into_inner()
                .check(client, &user, &password)
                .await
                == Verdict::Granted
        }
        None => false,
    }
}

/// Whether a path (as the router sees it, percent-decoding applied) is in the admin area.
pub(crate) fn is_admin_path(path: &str) -> bool {
    path == "/admin" || path.starts_with("/admin/")
}

/// Middleware for the whole app: requests for the admin area need the admin's credentials.
/// It runs before the CSRF check, so an unauthenticated POST gets 401, not 403.
pub(crate) async fn guard_admin_area(
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
pub(crate) async fn require_admin(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(credentials) = req.app_data::<web::Data<AdminCredentials>>().cloned() else {
        // Fail closed if the app was assembled without credentials.
        tracing::error!("admin credentials are not configured in the app; refusing /admin");
        return Ok(req.into_response(error_page(StatusCode::INTERNAL_SERVER_ERROR, None)));
    };
    let client = crate::web::client::client_ip(req.request());
    let verdict = match basic_credentials(&req) {
        Some((user, password)) => {
            credentials
                .into_inner()
                .check(client, &user, &password)
                .await
        }
        None => Verdict::Denied,
    };
    if let Verdict::Throttled { retry_after_secs } = verdict {
        let mut page = error_page(
            StatusCode::TOO_MANY_REQUESTS,
            Some("Too many sign-in attempts. Wait a little and try again."),
        );
        page.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from(retry_after_secs),
        );
        return Ok(req.into_response(page));
    }
    if verdict != Verdict::Granted {
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
    use crate::config::check_password_hash;

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

    fn limits(failures_before_delay: u32) -> Limits {
        Limits::new(&AdminSettings {
            username: "admin".into(),
            password_hash: None,
            max_concurrent_verifications: 1,
            failures_before_delay,
        })
    }

    #[test]
    fn an_address_may_have_only_a_few_checks_in_flight_and_a_finished_one_frees_its_place() {
        let limits = limits(100);
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        let held: Vec<_> = (0..MAX_IN_FLIGHT_PER_CLIENT)
            .map(|_| limits.reserve(a).expect("a free place"))
            .collect();
        assert_eq!(limits.reserve(a).err(), Some(1), "the next one waits");
        assert!(
            limits.reserve(Some(IpAddr::from([10, 0, 0, 2]))).is_ok(),
            "another address is not held up"
        );
        drop(held);
        assert!(limits.reserve(a).is_ok());
    }

    #[test]
    fn a_failure_recorded_before_the_place_is_given_back_stops_the_next_attempt() {
        let limits = limits(1);
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        let first = limits.reserve(a).expect("a free place");
        limits.record_failure(a);
        drop(first);
        assert!(limits.reserve(a).is_err(), "the address now waits");
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
