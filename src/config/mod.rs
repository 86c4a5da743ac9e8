//! Typed, validated settings: the built-in defaults (this repository's `config.toml`), then the
//! config file, then `BAZAAR_SECTION__KEY` environment variables. Every error names the key, the
//! layer its value came from and what is accepted.
//!
//! Each key is declared once, in its section's `section!` below: its name, the field and type it
//! fills, its kind (range, parser — the validation) and its one-line documentation. The known-key
//! check, reading from every layer (environment variables included) and the README's settings
//! table all come from that declaration. **Adding a setting is one line in its section plus its
//! default in `config.toml`** (the shipped file stays the source of defaults; a test refuses a
//! key declared without one, loading refuses one there that is not declared, and a test checks
//! the README's table against the declarations). A key that combines with others into one
//! field (the SMTP keys into the mail transport, the two backup periods) is declared under its
//! section's `inputs` and used in its `derived` field. `layers` holds the machinery.

use std::fmt;
use std::path::{Path, PathBuf};

mod layers;

use layers::{
    any_optional_text, any_text, millis, optional_text, scaled, secs, section, text, whole, Flag,
    Key, Layers,
};

pub use crate::telemetry::LogFormat;

/// The defaults are the shipped `config.toml`, so the file and the code cannot disagree.
const DEFAULTS: &str = include_str!("../../config.toml");
/// Environment variable naming the config file to read instead of `./config.toml`.
pub const CONFIG_PATH_VAR: &str = "BAZAAR_CONFIG";

/// The longest text any form field takes, in characters: the content editor's text and the
/// ceiling of `comments.max_length`. Form body limits are derived from it
/// ([`max_form_bytes`]), so the longest text a field accepts always fits in the form.
pub const MAX_TEXT_CHARS: usize = 50_000;

/// Bytes a form body may take when its longest field holds `chars` characters: each character
/// may be 4 bytes of UTF-8, each byte URL-encoded as `%XX` (12 bytes a character), and the
/// content editor sends its text up to [`TEXT_COPIES`] times; plus room for the form's other,
/// short fields (title, slug, tags, token, nonce).
pub const fn max_form_bytes(chars: usize) -> usize {
    chars * 12 * TEXT_COPIES + 64 * 1024
}

/// How many times one form may carry the longest text: the content editor's text, the base it
/// was loaded from (for the three-way merge), and on the conflict page both sides of a choice.
pub const TEXT_COPIES: usize = 4;

/// Every section's keys, in the order of the README's table. Anything else is refused, so a typo
/// in a key is an error rather than a silently ignored line.
const SECTIONS: &[&[Key]] = &[
    ServerSettings::KEYS,
    DatabaseSettings::KEYS,
    SessionSettings::KEYS,
    AdminSettings::KEYS,
    LogSettings::KEYS,
    MetricsSettings::KEYS,
    MediaSettings::KEYS,
    CartSettings::KEYS,
    PaymentKeys::KEYS,
    AccountSettings::KEYS,
    CommentSettings::KEYS,
    ContentSettings::KEYS,
    EmailSettings::KEYS,
    SearchSettings::KEYS,
    BackupSettings::KEYS,
    SeedSettings::KEYS,
    AnalyticsSettings::KEYS,
];

#[derive(Debug, Clone)]
pub struct Settings {
    pub server: ServerSettings,
    pub database: DatabaseSettings,
    pub session: SessionSettings,
    pub admin: AdminSettings,
    pub log: LogSettings,
    pub media: MediaSettings,
    pub cart: CartSettings,
    pub payment: PaymentSettings,
    pub accounts: AccountSettings,
    pub comments: CommentSettings,
    pub content: ContentSettings,
    pub email: EmailSettings,
    pub search: SearchSettings,
    pub analytics: AnalyticsSettings,
    pub backup: BackupSettings,
    pub seed: SeedSettings,
    pub metrics: MetricsSettings,
}

section! {
    /// Listening, the public address, and what the HTTP server lets in.
    #[derive(Debug, Clone)]
    pub struct ServerSettings in "server" {
        pub host: String = "host", text(parse_host),
            "address to listen on (`0.0.0.0` for all interfaces)";
        pub port: u16 = "port", whole(0, 65_535),
            "port; `0` picks a free one (the real address is printed)";
        pub public_url: Option<String> = "public_url", optional_text(parse_public_url),
            "address printed at start-up and used for every absolute link: Atom feeds, sitemaps, \
             robots.txt's `Sitemap:` line, canonical addresses, social cards and structured data, \
             e.g. `https://shop.example.com`; empty = the bound address (set it in production)";
        pub tls: bool = "tls", Flag,
            "`true` when served over HTTPS (e.g. behind a proxy): session cookies get `Secure` and \
             responses carry `Strict-Transport-Security`";
        pub workers: usize = "workers", whole(0, 256),
            "HTTP worker threads; `0` = one per CPU core";
        pub body_timeout: std::time::Duration = "body_timeout_secs", secs(1, 3600),
            "a request body must arrive within this, plus a second per 16 KiB received; slower \
             ones are cut off (4xx) and the connection closed";
        pub max_concurrent_bodies: usize = "max_concurrent_bodies", whole(1, 1_000_000),
            "request bodies that may be arriving at once; more get `503` straight away";
        /// Empty: every peer is the client itself.
        pub trusted_proxies: TrustedProxies = "trusted_proxies", text(TrustedProxies::parse),
            "reverse proxies (addresses or CIDR blocks, comma-separated: `127.0.0.1, ::1, \
             10.0.0.0/8`) whose `X-Forwarded-For` names the real client — for every per-address \
             limit and the logs — and whose `X-Request-Id` is kept; empty: the connecting peer is \
             the client and forwarding headers are ignored";
    }
}

section! {
    /// Where the data lives and how writes are made.
    #[derive(Debug, Clone)]
    pub struct DatabaseSettings in "database" {
        pub uri: DatabaseUri = "uri", text(parse_database_uri),
            "`embedded` (docstore in-process, data under `database.path`), `memory` (docstore, \
             nothing on disk) or a `mongodb://` / `mongodb+srv://` URI";
        pub path: PathBuf = "path", text(|path| Ok(PathBuf::from(path.trim()))),
            "the embedded store's directory; also holds the generated `session.key` and, while \
             Bazaar runs, `docstore.sock` and one `docstore-worker-N.sock` per HTTP worker \
             (owner-only Unix sockets through which Bazaar talks to its own store: cheaper per \
             query than TCP, and each worker's served on that worker's own thread)";
        pub name: String = "name", text(parse_database_name),
            "database name";
        pub timeout_ms: u64 = "timeout_ms", whole(100, 600_000),
            "how long a request waits for an unreachable database before the 503 page";
        pub write_concern: crate::db::WriteDurability = "write_concern", text(parse_write_concern),
            "`durable`: every write whose success a person is shown — an order and its number, the \
             cart completing and its units counted as sold, the payment attempt recorded before a \
             card is charged, order ship/cancel, admin saves of products, categories and photos — \
             is in the store's on-disk journal (on a replica set: on a majority of members, \
             journaled) before the page saying so is sent, so a crash, SIGKILL or power cut right \
             after cannot undo it. `fast`: those writes return once applied in memory, and a crash \
             can lose the last ~100 ms of them (the embedded store's group-commit window). Writes \
             the background jobs repair (cart adds, reservations, expiry) are fast either way";
    }
    inputs (layers) {}
    derived {
        /// Tests only, never read from configuration: makes the embedded store's disk writes fail
        /// on demand (a full disk), to test what shoppers see then.
        pub disk_faults: Option<docstore::DiskFaults> = None;
    }
}

/// Where the data lives.
#[derive(Clone, PartialEq, Eq)]
pub enum DatabaseUri {
    /// docstore in-process, data under `database.path`.
    Embedded,
    /// docstore in-process, nothing on disk.
    Memory,
    /// A MongoDB server or cluster (`mongodb://` or `mongodb+srv://`).
    External(String),
}

impl fmt::Debug for DatabaseUri {
    // The URI may carry a password: never print it whole.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatabaseUri::Embedded => f.write_str("Embedded"),
            DatabaseUri::Memory => f.write_str("Memory"),
            DatabaseUri::External(uri) => write!(f, "External({})", redact_uri(uri)),
        }
    }
}

section! {
    /// The session cookie's key and lifetime.
    #[derive(Clone)]
    pub struct SessionSettings in "session" {
        pub key: Option<String> = "key", optional_text(parse_session_key),
            "secret of at least 32 characters that signs and encrypts session cookies; empty = \
             generated once into `<database.path>/session.key`";
        pub max_age: std::time::Duration = "max_age_secs", secs(1, 365 * 24 * 3600),
            "a session older than this (7 days) is emptied on its next request (cart link, \
             remembered orders, CSRF token) and starts afresh";
    }
}

impl fmt::Debug for SessionSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = if self.key.is_some() {
            "<set>"
        } else {
            "<generated>"
        };
        f.debug_struct("SessionSettings")
            .field("key", &key)
            .field("max_age", &self.max_age)
            .finish()
    }
}

section! {
    /// The back office's login and the limits on guessing it.
    #[derive(Debug, Clone)]
    pub struct AdminSettings in "admin" {
        pub username: String = "username", text(parse_username),
            "HTTP Basic user for `/admin`";
        /// `None` means "generate a password at start-up".
        pub password_hash: Option<String> = "password_hash", optional_text(parse_password_hash),
            "argon2 PHC string from `bazaar hash-password`; empty = random password per start, \
             logged once";
        pub max_concurrent_verifications: usize = "max_concurrent_verifications", whole(1, 64),
            "password checks (argon2, ~19 MiB each) that may run at once; others wait up to 3 s, \
             then get `429`";
        pub failures_before_delay: u32 = "failures_before_delay", whole(1, 100_000),
            "wrong passwords from one client address before it must wait between attempts (1 s, \
             doubling per further failure, at most 5 min; `429` meanwhile)";
    }
}

section! {
    /// What is logged, and how.
    #[derive(Debug, Clone)]
    pub struct LogSettings in "log" {
        pub level: String = "level", text(parse_log_level),
            "tracing filter (`RUST_LOG`, when set, wins)";
        pub format: LogFormat = "format", text(parse_log_format),
            "`text`: one readable line per event; `json`: one JSON object per line, each carrying \
             the `span` it happened in (a request's `id`, a background `job`'s name)";
        pub database_commands: bool = "database_commands", Flag,
            "count every database command and log each at `debug` level (`log.level = \
             \"bazaar=debug,info\"`): how many round trips a page costs; copies every command and \
             reply, so off on a busy site";
    }
}

section! {
    /// The operators' metrics at `/metrics`.
    #[derive(Debug, Clone)]
    pub struct MetricsSettings in "metrics" {
        /// `None`: no metrics are kept and `/metrics` is not found.
        pub token: Option<String> = "token", optional_text(parse_metrics_token),
            "bearer token (16+ visible characters) Prometheus sends to scrape `/metrics`; empty: no \
             metrics are kept and `/metrics` answers 404";
        pub database_commands: bool = "database_commands", Flag,
            "also count and time every database command by name; the driver then copies every \
             command and reply, which cost a product page about 7% of its throughput \
             (`benches/metrics_overhead.sh`), so it is for diagnosing, not for always";
    }
}

section! {
    /// Limits on uploaded photos.
    #[derive(Debug, Clone)]
    pub struct MediaSettings in "media" {
        /// In bytes (the setting is in MiB).
        pub max_upload_bytes: usize = "max_upload_mb",
            scaled(1, 1024, |mb| usize::try_from(mb).ok()?.checked_mul(1024 * 1024)),
            "largest photo upload accepted (JPEG, PNG, GIF, WebP, detected from the bytes)";
        /// In pixels (the setting is in megapixels).
        pub max_image_pixels: u64 = "max_image_megapixels",
            scaled(1, 1_000, |mp| u64::try_from(mp).ok()?.checked_mul(1_000_000)),
            "largest image accepted (width × height, read from the header before decoding); pages \
             show a copy scaled to fit 1200 px";
    }
}

section! {
    /// How long reservations live (expiry, then cleanup of what expiry missed; see
    /// `docs/invariants.md`), and how much one cart and one client may take.
    #[derive(Debug, Clone)]
    pub struct CartSettings in "cart" {
        pub expire_after: std::time::Duration = "expire_after_secs", secs(1, 30 * 24 * 3600),
            "an active cart idle this long expires and its reserved stock goes back on sale";
        /// Always longer than `expire_after`, so cleanup never races a cart that expiry is about
        /// to handle.
        pub cleanup_after: std::time::Duration = "cleanup_after_secs", secs(1, 60 * 24 * 3600),
            "a stock reservation older than this is checked against its cart and repaired; must be \
             longer than `cart.expire_after_secs` (start-up refuses otherwise)";
        pub jobs_every: std::time::Duration = "jobs_every_secs", secs(0, 86_400),
            "how often expiry, cleanup and crashed-checkout recovery run; `0` turns them off \
             (admin → Carts can still run them)";
        pub max_units: i64 = "max_units", whole(1, 100_000),
            "units one cart may hold, all lines together";
        pub max_line_share_pct: i64 = "max_line_share_pct", whole(1, 100),
            "percentage of a product's units (on sale plus reserved) one cart line may hold; a \
             line may always hold 10 when in stock, never more than 99";
        pub new_carts_per_hour: u32 = "new_carts_per_hour", whole(1, 1_000_000),
            "new carts one client address may start per hour (a cart starts with its first added \
             item); behind a reverse proxy, list it in `server.trusted_proxies` so each visitor is \
             counted by their own address";
        pub order_lookups_per_hour: u32 = "order_lookups_per_hour", whole(1, 100_000),
            "order lookups (`/orders/lookup`, order number + email) one client address may try per \
             hour";
        pub retention: std::time::Duration = "retention_secs", secs(60, 365 * 24 * 3600),
            "expired carts are deleted by the jobs this long after they expired";
        pub recover_checkout_after: std::time::Duration = "recover_checkout_after_secs",
            secs(1, 7 * 24 * 3600),
            "a checkout still paying after this long was interrupted by a crash: recovery asks the \
             gateway whether the card was charged and finishes the order, hands the cart back or \
             refunds (keep it well above the gateway's slowest answer)";
    }
}

section! {
    /// The `[payment]` section, whose one key is [`Settings::payment`].
    struct PaymentKeys in "payment" {
        pub gateway: PaymentSettings = "gateway", text(parse_gateway),
            "the payment gateway; `test` is built in: 4242 4242 4242 4242 is approved, 4000 0000 \
             0000 0002 (insufficient funds) and 4000 0000 0000 0119 (processing error) are \
             declined, Luhn-invalid numbers never reach it";
    }
}

/// Which payment gateway charges cards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentSettings {
    /// The built-in test gateway (test card numbers only; nothing is really charged).
    Test,
}

section! {
    /// Customer accounts (`crate::accounts`): how many sign-in emails may be asked for.
    #[derive(Debug, Clone)]
    pub struct AccountSettings in "accounts" {
        pub sign_ins_per_email_per_hour: u32 = "sign_ins_per_email_per_hour", whole(1, 100_000),
            "sign-in emails (link and code) one email address may be sent per hour, counted in \
             the database so the limit holds across instances";
        pub sign_ins_per_client_per_hour: u32 = "sign_ins_per_client_per_hour",
            whole(1, 1_000_000),
            "sign-in emails one client address may ask for per hour, counted in the database";
        pub abandoned_after_days: u32 = "abandoned_after_days", whole(0, 36_500),
            "an account not signed in to and without an order for this many days is deleted \
             like a customer's own deletion (orders kept, anonymised) by a background job; `0` \
             keeps abandoned accounts";
    }
}

section! {
    /// Limits on comments, and which ones are held for moderation.
    #[derive(Debug, Clone)]
    pub struct CommentSettings in "comments" {
        pub max_length: usize = "max_length", whole(1, MAX_TEXT_CHARS as i64),
            "longest comment accepted, in characters (at most 50 000, the longest text any form \
             field takes); a longer one comes back with a form error and the text kept";
        pub rate_limit_per_minute: u32 = "rate_limit_per_minute", whole(0, 100_000),
            "comments one client address may post per minute (`0`: no limit); counted per process \
             by the client address (the connecting peer, or what a trusted proxy forwards)";
        pub page_size: usize = "page_size", whole(1, 1000),
            "comments per page of a discussion or permalink";
        pub hold_first_time: bool = "hold_first_time", Flag,
            "hold a commenter's comments for approval (Admin → Comments → pending) until one of \
             theirs was approved; known by email when given, else by name";
        pub hold_over_links: usize = "hold_over_links", whole(0, 1000),
            "hold comments with more web addresses than this";
        pub blocklist: String = "blocklist", any_text(),
            "comma-separated words or phrases; a comment whose name, email or text contains one \
             (any case) is held";
        pub close_after_days: u32 = "close_after_days", whole(0, 36_500),
            "close a discussion to new comments this many days after a post's publication or a \
             product's creation; `0` never closes by age (Admin → Comments, filtered to one \
             discussion, also closes or reopens it by hand)";
        pub restore_days: u32 = "restore_days", whole(1, 3_650),
            "a comment deleted on Admin → Comments can be restored (status filter \"deleted\") for \
             this many days; then the background jobs delete it for good (text and name wiped, \
             kept as `[deleted]` only while replies hang from it)";
        pub edit_window_minutes: u32 = "edit_window_minutes", whole(0, 10_080),
            "a signed-in customer may edit a comment of theirs for this many minutes after \
             posting it (Account → Comments); `0`: never. Deleting one's comment has no limit";
    }
}

section! {
    /// Content nodes (see `crate::content`).
    #[derive(Debug, Clone)]
    pub struct ContentSettings in "content" {
        pub revisions_kept: usize = "revisions_kept", whole(1, 1000),
            "earlier versions kept of each content node (Admin → Content → edit → Revisions); \
             after each save the oldest beyond this many are deleted";
    }
}

/// How the outgoing-mail connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpSecurity {
    /// A plain connection upgraded with STARTTLS (required; port 587).
    StartTls,
    /// TLS from the first byte (port 465).
    Tls,
    /// No encryption: only for a mail server on this machine (and tests).
    None,
}

/// Where outgoing email goes (see `crate::mail`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailTransport {
    Smtp {
        host: String,
        port: u16,
        security: SmtpSecurity,
        /// `(user, password)` when the server wants a login.
        credentials: Option<(String, String)>,
    },
    /// No mail server: each message is written as `<id>.eml` into this folder.
    Folder(PathBuf),
}

section! {
    /// Outgoing email: the transport, the sender address, and how the outbox is worked through.
    #[derive(Debug, Clone)]
    pub struct EmailSettings in "email" {
        pub from: String = "from", text(parse_from_address),
            "the address emails come from, shown with the shop's name; its domain also ends every \
             `Message-ID`";
        pub send_every: std::time::Duration = "send_every_ms", millis(0, 3_600_000),
            "how often each instance's sender looks for due messages in the `outbox` collection; \
             `0`: messages wait (nothing is sent)";
        pub max_attempts: u32 = "max_attempts", whole(1, 100),
            "attempts before a message is given up on and listed as failed on Admin → System (a \
             `5xx` refusal is given up on at once)";
        /// Each further failure doubles it (at most an hour).
        pub retry_after: std::time::Duration = "retry_after_secs", secs(0, 86_400),
            "wait after the first temporary failure (server down, `4xx`); each further one doubles \
             it, to at most an hour";
    }
    inputs (layers) {
        smtp_host: Option<String> = "smtp_host", any_optional_text(),
            "outgoing mail server; empty: nothing is sent, every message is written as an `.eml` \
             file into `email.folder` (listed on Admin → System), so `cargo run` needs no mail \
             server";
        smtp_port: u16 = "smtp_port", whole(1, 65_535),
            "the mail server's port (465 for `tls`)";
        smtp_security: SmtpSecurity = "smtp_security", text(parse_smtp_security),
            "`starttls` (plain connection upgraded to TLS; refused if the server cannot), `tls` \
             (TLS from the first byte) or `none` (unencrypted: a mail server on this machine only)";
        smtp_username: Option<String> = "smtp_username", any_optional_text(),
            "login for the mail server; empty user: no login";
        smtp_password: String = "smtp_password", any_text(),
            "password for `email.smtp_username`";
        folder: String = "folder", text(|folder| Ok(folder.trim().to_string())),
            "where `.eml` files go when `email.smtp_host` is empty";
    }
    derived {
        pub transport: MailTransport = mail_transport(
            layers,
            smtp_host,
            smtp_port,
            smtp_security,
            smtp_username.map(|user| (user, smtp_password)),
            folder,
        )?;
    }
}

section! {
    /// Bounds on site search (see `crate::search::limits`).
    #[derive(Debug, Clone)]
    pub struct SearchSettings in "search" {
        pub max_concurrent: usize = "max_concurrent", whole(1, 1024),
            "site searches running at once; others wait for a slot";
        pub max_wait: std::time::Duration = "max_wait_ms", millis(0, 60_000),
            "how long a search waits for a slot before the visitor gets `503` \"Search is busy, \
             please try again in a moment\" (with `Retry-After`)";
        pub per_client_per_minute: u32 = "per_client_per_minute", whole(1, 1_000_000),
            "searches one client address may start per minute (short bursts allowed); beyond it \
             `429` with `Retry-After`";
    }
}

section! {
    /// Scheduled backups of the database (see `crate::backup`).
    #[derive(Debug, Clone)]
    pub struct BackupSettings in "backup" {
        pub keep: usize = "keep", whole(1, 1000),
            "scheduled backups kept; older ones are deleted once a newer one is verified";
        pub dir: PathBuf = "dir", text(|dir| Ok(PathBuf::from(dir.trim()))),
            "where scheduled backups go, one `backup-<sequence>-<UTC time>-<instance>` directory \
             each, owner-only (required when `backup.every_hours` > 0)";
    }
    inputs (layers) {
        every_hours: u64 = "every_hours", whole(0, 24 * 366),
            "hours between scheduled backups (`0`: off), one per period across all instances on \
             the database; the first is due at the first start";
        every_secs: u64 = "every_secs", whole(0, 24 * 366 * 3600),
            "seconds between scheduled backups; above `0` it replaces `backup.every_hours` \
             (frequent snapshots of a small shop; tests)";
    }
    derived {
        /// Time between scheduled backups (`backup.every_secs`, else `backup.every_hours`);
        /// `None` when scheduled backups are off.
        pub every: Option<std::time::Duration> = match (every_secs, every_hours) {
            (0, 0) => None,
            (0, hours) => Some(std::time::Duration::from_secs(hours * 3600)),
            (secs, _) => Some(std::time::Duration::from_secs(secs)),
        };
    }
}

section! {
    /// What a brand-new, empty database is given at start-up.
    #[derive(Debug, Clone)]
    pub struct SeedSettings in "seed" {
        pub demo: bool = "demo", Flag,
            "a brand-new, empty database gets the demo catalog, pages, posts and comments at \
             start-up; `false` starts it empty (only the default shop settings). Admin → Settings \
             → Remove demo data takes them out later; `bazaar seed` adds them again";
    }
}

section! {
    /// Page-view counting (see `crate::analytics`).
    #[derive(Debug, Clone)]
    pub struct AnalyticsSettings in "analytics" {
        pub enabled: bool = "enabled", Flag,
            "count page views for Admin → Analytics and the dashboard; `false` counts nothing (the \
             reports keep what was counted)";
        pub queue_capacity: usize = "queue_capacity", whole(1, 10_000_000),
            "page views waiting to be written (a write starts early when half are used); when the \
             writer is this far behind, further views are dropped and the drops counted, so a page \
             is never slowed down";
        pub flush_interval: std::time::Duration = "flush_interval_ms", millis(10, 3_600_000),
            "how long views are gathered before being written as one batch (one `$inc` upsert per \
             page and day, and per page and month): the reports lag by up to this long";
        pub max_paths_per_day: usize = "max_paths_per_day", whole(1, 1_000_000),
            "distinct paths counted per day; views of any further path that day are counted under \
             `(other)`, so requests for many different addresses cannot create unbounded report \
             documents";
        pub events: bool = "events", Flag,
            "also log every public page view and commerce event (product viewed, added to cart, \
             checkout started, order placed, search) to the `events` collection for the traffic \
             reports (visitors, sources, devices, searches, the sales funnel); no cookie, no \
             address or user agent stored";
        pub events_retention_days: u32 = "events_retention_days", whole(1, 3_650),
            "days the traffic events are kept (a TTL index deletes older ones); the hourly, \
             daily, weekly and monthly roll-ups keep their counts for good";
    }
}

/// A setting that could not be read, naming the key and where its value came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid value for {key} ({origin}): {message}")]
    InvalidValue {
        key: String,
        origin: String,
        message: String,
    },
    #[error("unknown setting {key} ({origin}); known settings: {known}")]
    UnknownKey {
        key: String,
        origin: String,
        known: String,
    },
    #[error("cannot read the config file {path}: {message}")]
    File { path: String, message: String },
}

impl Settings {
    /// Settings for the running process: defaults, then `$BAZAAR_CONFIG` or `./config.toml` (if
    /// present), then the process environment.
    pub fn from_environment() -> Result<Settings, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        let file = match std::env::var(CONFIG_PATH_VAR) {
            Ok(path) if !path.is_empty() => Some(PathBuf::from(path)),
            _ => {
                let local = PathBuf::from("config.toml");
                local.exists().then_some(local)
            }
        };
        Settings::load(file.as_deref(), env)
    }

    /// Settings from the defaults, an optional config file and the given environment variables
    /// (only `BAZAAR_*__*` names are considered). Tests pass their own environment here.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        let mut layers = Layers::new(SECTIONS);
        layers.add_toml(DEFAULTS, "the built-in defaults")?;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
            layers.add_toml(&text, &path.display().to_string())?;
        }
        layers.add_env(env)?;
        Settings::read(&layers)
    }

    /// Every section read, then the checks that span keys.
    fn read(layers: &Layers) -> Result<Settings, ConfigError> {
        let settings = Settings {
            server: ServerSettings::read(layers)?,
            database: DatabaseSettings::read(layers)?,
            session: SessionSettings::read(layers)?,
            admin: AdminSettings::read(layers)?,
            log: LogSettings::read(layers)?,
            media: MediaSettings::read(layers)?,
            cart: CartSettings::read(layers)?,
            payment: PaymentKeys::read(layers)?.gateway,
            accounts: AccountSettings::read(layers)?,
            comments: CommentSettings::read(layers)?,
            content: ContentSettings::read(layers)?,
            email: EmailSettings::read(layers)?,
            search: SearchSettings::read(layers)?,
            analytics: AnalyticsSettings::read(layers)?,
            backup: BackupSettings::read(layers)?,
            seed: SeedSettings::read(layers)?,
            metrics: MetricsSettings::read(layers)?,
        };
        let database = &settings.database;
        if database.path.as_os_str().is_empty() && database.uri == DatabaseUri::Embedded {
            return Err(layers.invalid("database.path", "the embedded store needs a directory"));
        }
        let cart = &settings.cart;
        if cart.cleanup_after <= cart.expire_after {
            return Err(layers.invalid(
                "cart.cleanup_after_secs",
                format!(
                    "must be longer than cart.expire_after_secs ({}), got {}: cleanup would \
                     return stock of carts that are still active",
                    cart.expire_after.as_secs(),
                    cart.cleanup_after.as_secs()
                ),
            ));
        }
        let backup = &settings.backup;
        if backup.every.is_some() && backup.dir.as_os_str().is_empty() {
            return Err(layers.invalid(
                "backup.dir",
                "scheduled backups (backup.every_hours) need a directory to write to",
            ));
        }
        Ok(settings)
    }

    /// The address printed at start-up for people to open.
    pub fn public_address(&self, bound_port: u16) -> String {
        match &self.server.public_url {
            Some(url) => url.clone(),
            None => {
                let host = match self.server.host.as_str() {
                    // A wildcard bind is reachable locally through loopback.
                    "0.0.0.0" | "::" | "[::]" => "127.0.0.1",
                    host => host,
                };
                if host.contains(':') && !host.starts_with('[') {
                    format!("http://[{host}]:{bound_port}/")
                } else {
                    format!("http://{host}:{bound_port}/")
                }
            }
        }
    }
}

/// The mail transport from the `email.smtp_*` keys: a server when `email.smtp_host` is set, else
/// `.eml` files in `email.folder`.
fn mail_transport(
    layers: &Layers,
    host: Option<String>,
    port: u16,
    security: SmtpSecurity,
    credentials: Option<(String, String)>,
    folder: String,
) -> Result<MailTransport, ConfigError> {
    match host {
        Some(host) => Ok(MailTransport::Smtp {
            host,
            port,
            security,
            credentials,
        }),
        None if folder.is_empty() => Err(layers.invalid(
            "email.folder",
            "with no email.smtp_host, messages are written into this folder: it cannot be empty",
        )),
        None => Ok(MailTransport::Folder(PathBuf::from(folder))),
    }
}

// The parsers of the text-valued keys: each takes the value as written and says what it accepts.

fn parse_host(host: &str) -> Result<String, String> {
    let host = host.trim();
    if host.is_empty() || host.contains(char::is_whitespace) || host.contains('/') {
        return Err(format!("expected a host name or IP address, got {host:?}"));
    }
    Ok(host.to_string())
}

fn parse_public_url(url: &str) -> Result<String, String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "expected an http:// or https:// address, got {url:?}"
        ));
    }
    Ok(url.to_string())
}

fn parse_database_uri(uri: &str) -> Result<DatabaseUri, String> {
    match uri.trim() {
        "embedded" => Ok(DatabaseUri::Embedded),
        "memory" => Ok(DatabaseUri::Memory),
        u if u.starts_with("mongodb://") || u.starts_with("mongodb+srv://") => {
            Ok(DatabaseUri::External(u.to_string()))
        }
        other => Err(format!(
            "expected \"embedded\", \"memory\" or a mongodb:// or mongodb+srv:// URI, got {:?}",
            redact_uri(other)
        )),
    }
}

/// MongoDB's rules for database names.
fn parse_database_name(name: &str) -> Result<String, String> {
    let bad_char = name
        .chars()
        .find(|c| matches!(c, '/' | '\\' | '.' | ' ' | '"' | '$' | '\0'));
    if name.is_empty() || name.len() >= 64 || bad_char.is_some() {
        return Err(format!(
            "expected a MongoDB database name (1-63 bytes, none of / \\ . space \" $), got {name:?}"
        ));
    }
    Ok(name.to_string())
}

fn parse_write_concern(concern: &str) -> Result<crate::db::WriteDurability, String> {
    match concern.trim() {
        "durable" => Ok(crate::db::WriteDurability::Durable),
        "fast" => Ok(crate::db::WriteDurability::Fast),
        other => Err(format!("expected \"durable\" or \"fast\", got {other:?}")),
    }
}

fn parse_session_key(key: &str) -> Result<String, String> {
    if key.len() < 32 {
        return Err(format!(
            "expected at least 32 characters, got {}",
            key.len()
        ));
    }
    Ok(key.to_string())
}

fn parse_username(name: &str) -> Result<String, String> {
    if name.is_empty() || name.contains(':') {
        return Err("expected a non-empty name without ':'".to_string());
    }
    Ok(name.to_string())
}

fn parse_password_hash(hash: &str) -> Result<String, String> {
    check_password_hash(hash)?;
    Ok(hash.to_string())
}

fn parse_log_level(level: &str) -> Result<String, String> {
    match tracing_subscriber::EnvFilter::try_new(level) {
        Ok(_) => Ok(level.to_string()),
        Err(e) => Err(format!("expected a tracing filter such as \"info\": {e}")),
    }
}

fn parse_log_format(format: &str) -> Result<LogFormat, String> {
    match format.trim() {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        other => Err(format!("expected \"text\" or \"json\", got {other:?}")),
    }
}

fn parse_metrics_token(token: &str) -> Result<String, String> {
    // A Prometheus scrape config sends it in an HTTP header: visible ASCII only.
    if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("expected at least 16 visible ASCII characters (no spaces)".to_string());
    }
    Ok(token.to_string())
}

fn parse_gateway(gateway: &str) -> Result<PaymentSettings, String> {
    match gateway.trim() {
        "test" => Ok(PaymentSettings::Test),
        other => Err(format!(
            "expected \"test\" (the only gateway built in), got {other:?}"
        )),
    }
}

fn parse_smtp_security(security: &str) -> Result<SmtpSecurity, String> {
    match security.trim().to_ascii_lowercase().as_str() {
        "starttls" => Ok(SmtpSecurity::StartTls),
        "tls" => Ok(SmtpSecurity::Tls),
        "none" => Ok(SmtpSecurity::None),
        other => Err(format!(
            "expected \"starttls\", \"tls\" or \"none\", got {other:?}"
        )),
    }
}

fn parse_from_address(from: &str) -> Result<String, String> {
    let from = from.trim();
    if from.parse::<lettre::Address>().is_err() || !from.contains('.') {
        return Err(format!(
            "{from:?} is not an email address such as shop@example.com"
        ));
    }
    Ok(from.to_string())
}

/// The reverse proxies whose forwarding headers are believed (`server.trusted_proxies`): a
/// comma-separated list of addresses and CIDR blocks such as `127.0.0.1, 10.0.0.0/8, ::1`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    blocks: Vec<(std::net::IpAddr, u8)>,
}

impl TrustedProxies {
    /// Parse the setting's text; the error says which entry is wrong.
    pub fn parse(list: &str) -> Result<TrustedProxies, String> {
        let mut blocks = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (address, bits) = match entry.split_once('/') {
                Some((address, bits)) => (address, Some(bits)),
                None => (entry, None),
            };
            let address: std::net::IpAddr = address
                .parse()
                .map_err(|_| format!("{entry:?} is not an IP address or CIDR block"))?;
            let max = if address.is_ipv4() { 32 } else { 128 };
            let bits = match bits {
                None => max,
                Some(bits) => bits
                    .parse::<u8>()
                    .ok()
                    .filter(|b| *b <= max)
                    .ok_or_else(|| format!("{entry:?}: the prefix length must be 0 to {max}"))?,
            };
            blocks.push((address, bits));
        }
        Ok(TrustedProxies { blocks })
    }

    /// True when no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        // An IPv4 peer on a dual-stack socket arrives as ::ffff:a.b.c.d.
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
            v4 => v4,
        };
        self.blocks.iter().any(|(block, bits)| match (block, ip) {
            (std::net::IpAddr::V4(b), std::net::IpAddr::V4(a)) => {
                prefix_matches(&b.octets(), &a.octets(), *bits)
            }
            (std::net::IpAddr::V6(b), std::net::IpAddr::V6(a)) => {
                prefix_matches(&b.octets(), &a.octets(), *bits)
            }
            _ => false,
        })
    }
}

/// Whether the first `bits` bits of `a` and `b` agree.
fn prefix_matches(a: &[u8], b: &[u8], bits: u8) -> bool {
    let (whole, rest) = (usize::from(bits / 8), bits % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    rest == 0 || (a[whole] ^ b[whole]) >> (8 - rest) == 0
}

/// `mongodb://user:secret@host/...` → `mongodb://user:***@host/...`.
pub fn redact_uri(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{hosts}{tail}")
        }
        None => uri.to_string(),
    }
}

/// Whether a configured hash is an argon2 PHC string (checked when the settings load).
pub fn check_password_hash(phc: &str) -> Result<(), String> {
    let hash = argon2::PasswordHash::new(phc)
        .map_err(|e| format!("expected an argon2 PHC string from `bazaar hash-password` ({e})"))?;
    if !hash.algorithm.as_str().starts_with("argon2") {
        return Err(format!(
            "expected an argon2 hash, got algorithm {:?}",
            hash.algorithm.as_str()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_come_from_the_shipped_config_file() {
        let s = Settings::load(None, env(&[])).expect("defaults load");
        assert_eq!(s.server.port, 8080);
        assert_eq!(s.database.uri, DatabaseUri::Embedded);
        assert_eq!(s.database.path, PathBuf::from("./data"));
        assert_eq!(s.admin.username, "admin");
        assert!(s.admin.password_hash.is_none());
        assert!(s.session.key.is_none());
    }

    #[test]
    fn environment_overrides_name_section_and_key() {
        let s = Settings::load(
            None,
            env(&[
                ("BAZAAR_SERVER__PORT", "9001"),
                ("BAZAAR_DATABASE__URI", "mongodb://db.example:27017"),
                ("BAZAAR_SERVER__TLS", "true"),
                ("BAZAAR_CONFIG", "ignored-here"),
                ("OTHER__THING", "x"),
            ]),
        )
        .expect("loads");
        assert_eq!(s.server.port, 9001);
        assert!(s.server.tls);
        assert_eq!(
            s.database.uri,
            DatabaseUri::External("mongodb://db.example:27017".into())
        );
    }

    #[test]
    fn an_invalid_port_names_the_key_and_the_variable() {
        let err = Settings::load(None, env(&[("BAZAAR_SERVER__PORT", "eighty")]))
            .expect_err("must fail")
            .to_string();
        assert!(err.contains("server.port"), "{err}");
        assert!(err.contains("BAZAAR_SERVER__PORT"), "{err}");
        let err = Settings::load(None, env(&[("BAZAAR_SERVER__PORT", "70000")]))
            .expect_err("must fail")
            .to_string();
        assert!(err.contains("from 0 to 65535"), "{err}");
    }

    #[test]
    fn cleanup_must_wait_longer_than_expiry() {
        let err = Settings::load(
            None,
            env(&[
                ("BAZAAR_CART__EXPIRE_AFTER_SECS", "600"),
                ("BAZAAR_CART__CLEANUP_AFTER_SECS", "600"),
            ]),
        )
        .expect_err("must fail")
        .to_string();
        assert!(err.contains("cart.cleanup_after_secs"), "{err}");
        assert!(err.contains("BAZAAR_CART__CLEANUP_AFTER_SECS"), "{err}");
        let s = Settings::load(None, env(&[])).expect("defaults load");
        assert!(s.cart.cleanup_after > s.cart.expire_after);
    }

    #[test]
    fn writes_are_durable_unless_fast_is_asked_for() {
        use crate::db::WriteDurability;
        let s = Settings::load(None, env(&[])).expect("defaults load");
        assert_eq!(s.database.write_concern, WriteDurability::Durable);
        let s = Settings::load(None, env(&[("BAZAAR_DATABASE__WRITE_CONCERN", "fast")]))
            .expect("loads");
        assert_eq!(s.database.write_concern, WriteDurability::Fast);
        let err = Settings::load(None, env(&[("BAZAAR_DATABASE__WRITE_CONCERN", "majority")]))
            .expect_err("must fail")
            .to_string();
        assert!(err.contains("database.write_concern"), "{err}");
        assert!(err.contains("\"durable\" or \"fast\""), "{err}");
    }

    #[test]
    fn a_mistyped_key_in_the_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[server]\nprot = 1\n").expect("write");
        let err = Settings::load(Some(&path), env(&[]))
            .expect_err("must fail")
            .to_string();
        assert!(err.contains("server.prot"), "{err}");
    }

    #[test]
    fn values_from_the_file_are_type_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[server]\ntls = \"yes\"\n").expect("write");
        let err = Settings::load(Some(&path), env(&[]))
            .expect_err("must fail")
            .to_string();
        assert!(err.contains("server.tls"), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
    }

    #[test]
    fn bad_database_uri_short_session_key_and_bad_hash_are_refused() {
        for (var, value, key) in [
            ("BAZAAR_DATABASE__URI", "postgres://x", "database.uri"),
            ("BAZAAR_SESSION__KEY", "short", "session.key"),
            (
                "BAZAAR_ADMIN__PASSWORD_HASH",
                "not-a-hash",
                "admin.password_hash",
            ),
            ("BAZAAR_DATABASE__NAME", "a.b", "database.name"),
            ("BAZAAR_LOG__LEVEL", "info,[[", "log.level"),
        ] {
            let err = Settings::load(None, env(&[(var, value)]))
                .expect_err(var)
                .to_string();
            assert!(err.contains(key), "{var}: {err}");
        }
    }

    #[test]
    fn the_abuse_limits_have_safe_defaults_and_are_range_checked() {
        let s = Settings::load(None, env(&[])).expect("defaults load");
        assert_eq!(s.admin.max_concurrent_verifications, 2);
        assert_eq!(s.admin.failures_before_delay, 5);
        assert_eq!(s.session.max_age, std::time::Duration::from_secs(604_800));
        assert_eq!(s.media.max_image_pixels, 40_000_000);
        assert_eq!(s.cart.max_line_share_pct, 50);
        assert_eq!(s.server.body_timeout, std::time::Duration::from_secs(10));
        for (var, value, key) in [
            (
                "BAZAAR_ADMIN__MAX_CONCURRENT_VERIFICATIONS",
                "0",
                "admin.max_concurrent_verifications",
            ),
            (
                "BAZAAR_CART__MAX_LINE_SHARE_PCT",
                "101",
                "cart.max_line_share_pct",
            ),
            ("BAZAAR_CART__MAX_UNITS", "-1", "cart.max_units"),
            ("BAZAAR_SESSION__MAX_AGE_SECS", "0", "session.max_age_secs"),
            (
                "BAZAAR_SERVER__BODY_TIMEOUT_SECS",
                "0",
                "server.body_timeout_secs",
            ),
            (
                "BAZAAR_MEDIA__MAX_IMAGE_MEGAPIXELS",
                "-9223372036854775808",
                "media.max_image_megapixels",
            ),
        ] {
            let err = Settings::load(None, env(&[(var, value)]))
                .expect_err(var)
                .to_string();
            assert!(err.contains(key), "{var}: {err}");
        }
    }

    #[test]
    fn page_view_counting_is_on_by_default_and_its_limits_are_range_checked() {
        let s = Settings::load(None, env(&[])).expect("defaults load");
        assert!(s.analytics.enabled);
        assert_eq!(s.analytics.max_paths_per_day, 1000);
        let s =
            Settings::load(None, env(&[("BAZAAR_ANALYTICS__ENABLED", "false")])).expect("loads");
        assert!(!s.analytics.enabled);
        for (var, value, key) in [
            (
                "BAZAAR_ANALYTICS__QUEUE_CAPACITY",
                "0",
                "analytics.queue_capacity",
            ),
            (
                "BAZAAR_ANALYTICS__FLUSH_INTERVAL_MS",
                "1",
                "analytics.flush_interval_ms",
            ),
            (
                "BAZAAR_ANALYTICS__MAX_PATHS_PER_DAY",
                "0",
                "analytics.max_paths_per_day",
            ),
            (
                "BAZAAR_ANALYTICS__ENABLED",
                "sometimes",
                "analytics.enabled",
            ),
        ] {
            let err = Settings::load(None, env(&[(var, value)]))
                .expect_err(var)
                .to_string();
            assert!(err.contains(key), "{var}: {err}");
        }
    }

    #[test]
    fn keys_combined_into_one_field_are_read_and_checked_like_any_other() {
        let s = Settings::load(
            None,
            env(&[
                ("BAZAAR_EMAIL__SMTP_HOST", "mail.example.com"),
                ("BAZAAR_EMAIL__SMTP_USERNAME", "shop"),
                ("BAZAAR_EMAIL__SMTP_PASSWORD", "secret"),
                ("BAZAAR_BACKUP__EVERY_HOURS", "2"),
            ]),
        )
        .expect("loads");
        assert_eq!(
            s.email.transport,
            MailTransport::Smtp {
                host: "mail.example.com".into(),
                port: 587,
                security: SmtpSecurity::StartTls,
                credentials: Some(("shop".into(), "secret".into())),
            }
        );
        assert_eq!(s.backup.every, Some(std::time::Duration::from_secs(7200)));
        let s = Settings::load(
            None,
            env(&[
                ("BAZAAR_BACKUP__EVERY_HOURS", "2"),
                ("BAZAAR_BACKUP__EVERY_SECS", "5"),
            ]),
        )
        .expect("loads");
        assert_eq!(s.backup.every, Some(std::time::Duration::from_secs(5)));
        let s = Settings::load(None, env(&[])).expect("defaults load");
        assert_eq!(s.email.transport, MailTransport::Folder("./mail".into()));
        assert_eq!(s.backup.every, None);
        for (var, value, expected) in [
            (
                // The example README.md gives.
                "BAZAAR_SERVER__PORT",
                "eighty",
                "invalid value for server.port (from BAZAAR_SERVER__PORT): expected a whole \
                 number, got \"eighty\"",
            ),
            (
                "BAZAAR_EMAIL__SMTP_SECURITY",
                "ssl",
                "invalid value for email.smtp_security (from BAZAAR_EMAIL__SMTP_SECURITY): \
                 expected \"starttls\", \"tls\" or \"none\", got \"ssl\"",
            ),
            (
                "BAZAAR_EMAIL__FOLDER",
                " ",
                "invalid value for email.folder (from BAZAAR_EMAIL__FOLDER): with no \
                 email.smtp_host, messages are written into this folder: it cannot be empty",
            ),
            (
                "BAZAAR_BACKUP__EVERY_SECS",
                "-1",
                "invalid value for backup.every_secs (from BAZAAR_BACKUP__EVERY_SECS): expected a \
                 number from 0 to 31622400, got -1",
            ),
        ] {
            let err = Settings::load(None, env(&[(var, value)]))
                .expect_err(var)
                .to_string();
            assert_eq!(err, expected);
        }
    }

    #[test]
    fn an_unknown_environment_variable_is_refused_with_the_known_keys() {
        let err = Settings::load(None, env(&[("BAZAAR_SERVER__PROT", "1")]))
            .expect_err("must fail")
            .to_string();
        assert!(
            err.starts_with(
                "unknown setting server.prot (from BAZAAR_SERVER__PROT); known \
                 settings: server.host, server.port,"
            ),
            "{err}"
        );
        assert!(err.contains("analytics.max_paths_per_day"), "{err}");
    }

    /// The README's settings table as the declarations and the shipped defaults give it.
    fn settings_table() -> String {
        let defaults: toml::Table = DEFAULTS.parse().expect("the shipped config.toml parses");
        let mut table = String::from("| key | default | meaning |\n|---|---|---|\n");
        for key in SECTIONS.iter().flat_map(|keys| keys.iter()) {
            let (section, name) = key.name.split_once('.').expect("section.key");
            let default = match &defaults[section][name] {
                toml::Value::String(s) if s.is_empty() => "empty".to_string(),
                toml::Value::String(s) => format!("`{s}`"),
                other => format!("`{other}`"),
            };
            table.push_str(&format!("| `{}` | {default} | {} |\n", key.name, key.doc));
        }
        table
    }

    #[test]
    fn every_declared_key_has_a_default_in_the_shipped_config_file() {
        let defaults: toml::Table = DEFAULTS.parse().expect("the shipped config.toml parses");
        for key in SECTIONS.iter().flat_map(|keys| keys.iter()) {
            let (section, name) = key.name.split_once('.').expect("section.key");
            assert!(
                defaults
                    .get(section)
                    .and_then(|s| s.as_table())
                    .is_some_and(|s| s.contains_key(name)),
                "{} is declared but config.toml gives it no default",
                key.name
            );
        }
    }

    #[test]
    fn the_readme_settings_table_matches_the_declarations() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
            .expect("README.md");
        let start = readme
            .find("| key | default | meaning |")
            .expect("README.md has a settings table");
        let end = readme[start..]
            .find("\n\n")
            .map_or(readme.len(), |end| start + end + 1);
        let expected = settings_table();
        assert!(
            readme[start..end] == expected,
            "README.md's settings table differs from the declarations in src/config/mod.rs; \
             replace it with:\n\n{expected}"
        );
    }

    #[test]
    fn passwords_in_database_uris_are_redacted() {
        assert_eq!(
            redact_uri("mongodb://bob:s3cret@db:27017/x?tls=true"),
            "mongodb://bob:***@db:27017/x?tls=true"
        );
        assert_eq!(redact_uri("mongodb://db:27017"), "mongodb://db:27017");
    }
}
