//! Typed, validated settings: the built-in defaults (this repository's `config.toml`), then the
//! config file, then `BAZAAR_SECTION__KEY` environment variables. Every error names the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::telemetry::LogFormat;

/// The defaults are the shipped `config.toml`, so the file and the code cannot disagree.
const DEFAULTS: &str = include_str!("../config.toml");
/// Environment variable naming the config file to read instead of `./config.toml`.
pub const CONFIG_PATH_VAR: &str = "BAZAAR_CONFIG";
const ENV_PREFIX: &str = "BAZAAR_";

/// The longest text any form field takes, in characters: the content editor's text and the
/// ceiling of `comments.max_length`. Form body limits are derived from it
/// ([`max_form_bytes`]), so the longest text a field accepts always fits in the form.
pub const MAX_TEXT_CHARS: usize = 50_000;

/// Bytes a form body may take when its longest field holds `chars` characters: each character
/// may be 4 bytes of UTF-8, each byte URL-encoded as `%XX` (12 bytes a character), plus room
/// for the form's other, short fields (title, slug, tags, token, nonce).
pub const fn max_form_bytes(chars: usize) -> usize {
    chars * 12 + 64 * 1024
}

/// Every setting Bazaar knows, as `(section, key)`. Anything else is refused, so a typo in a key
/// is an error rather than a silently ignored line.
const KNOWN_KEYS: &[(&str, &str)] = &[
    ("server", "host"),
    ("server", "port"),
    ("server", "public_url"),
    ("server", "tls"),
    ("server", "workers"),
    ("server", "body_timeout_secs"),
    ("server", "max_concurrent_bodies"),
    ("server", "trusted_proxies"),
    ("database", "uri"),
    ("database", "path"),
    ("database", "name"),
    ("database", "timeout_ms"),
    ("database", "write_concern"),
    ("session", "key"),
    ("session", "max_age_secs"),
    ("admin", "username"),
    ("admin", "password_hash"),
    ("admin", "max_concurrent_verifications"),
    ("admin", "failures_before_delay"),
    ("log", "level"),
    ("log", "database_commands"),
    ("log", "format"),
    ("metrics", "token"),
    ("metrics", "database_commands"),
    ("media", "max_upload_mb"),
    ("media", "max_image_megapixels"),
    ("cart", "expire_after_secs"),
    ("cart", "cleanup_after_secs"),
    ("cart", "jobs_every_secs"),
    ("cart", "max_units"),
    ("cart", "max_line_share_pct"),
    ("cart", "new_carts_per_hour"),
    ("cart", "order_lookups_per_hour"),
    ("cart", "retention_secs"),
    ("cart", "recover_checkout_after_secs"),
    ("payment", "gateway"),
    ("comments", "max_length"),
    ("comments", "rate_limit_per_minute"),
    ("comments", "page_size"),
    ("comments", "hold_first_time"),
    ("comments", "hold_over_links"),
    ("comments", "blocklist"),
    ("comments", "close_after_days"),
    ("comments", "restore_days"),
    ("email", "smtp_host"),
    ("email", "smtp_port"),
    ("email", "smtp_security"),
    ("email", "smtp_username"),
    ("email", "smtp_password"),
    ("email", "from"),
    ("email", "folder"),
    ("email", "send_every_ms"),
    ("email", "max_attempts"),
    ("email", "retry_after_secs"),
    ("search", "max_concurrent"),
    ("search", "max_wait_ms"),
    ("search", "per_client_per_minute"),
    ("backup", "every_hours"),
    ("backup", "every_secs"),
    ("backup", "keep"),
    ("backup", "dir"),
    ("seed", "demo"),
    ("analytics", "enabled"),
    ("analytics", "queue_capacity"),
    ("analytics", "flush_interval_ms"),
    ("analytics", "max_paths_per_day"),
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
    pub comments: CommentSettings,
    pub email: EmailSettings,
    pub search: SearchSettings,
    pub analytics: AnalyticsSettings,
    pub backup: BackupSettings,
    pub seed: SeedSettings,
    pub metrics: MetricsSettings,
}

/// What a brand-new, empty database is given at start-up.
#[derive(Debug, Clone)]
pub struct MetricsSettings {
    /// The bearer token `/metrics` asks for (`metrics.token`); `None`: no metrics are kept and
    /// `/metrics` is not found.
    pub token: Option<String>,
    /// `metrics.database_commands`: also time every database command (the driver then copies
    /// every command and reply into an event, which cost a product page about 7% of its
    /// throughput).
    pub database_commands: bool,
}

#[derive(Debug, Clone)]
pub struct SeedSettings {
    /// Add the demo catalog, pages and comments (`seed.demo`); false: only the site settings.
    pub demo: bool,
}

#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    pub public_url: Option<String>,
    pub tls: bool,
    /// 0 = one worker per CPU core.
    pub workers: usize,
    /// A request body must arrive within this, plus a second per 16 KiB received.
    pub body_timeout: std::time::Duration,
    /// Request bodies that may be arriving at the same time.
    pub max_concurrent_bodies: usize,
    /// Reverse proxies whose `X-Forwarded-For` and `X-Request-Id` are believed
    /// (`server.trusted_proxies`); empty: every peer is the client itself.
    pub trusted_proxies: TrustedProxies,
}

#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    pub uri: DatabaseUri,
    pub path: PathBuf,
    pub name: String,
    pub timeout_ms: u64,
    /// Tests only, never read from configuration: makes the embedded store's disk writes fail
    /// on demand (a full disk), to test what shoppers see then.
    pub disk_faults: Option<docstore::DiskFaults>,
    /// How far a write a person is told about must get before the page is sent.
    pub write_concern: crate::db::WriteDurability,
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

#[derive(Clone)]
pub struct SessionSettings {
    pub key: Option<String>,
    /// A session older than this is emptied (cart link, orders, CSRF token) and starts over.
    pub max_age: std::time::Duration,
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

#[derive(Debug, Clone)]
pub struct AdminSettings {
    pub username: String,
    /// Argon2 PHC string; `None` means "generate a password at start-up".
    pub password_hash: Option<String>,
    /// Argon2 verifications allowed to run at once (each takes about 19 MiB).
    pub max_concurrent_verifications: usize,
    /// Wrong passwords from one client address before it must wait between attempts.
    pub failures_before_delay: u32,
}

#[derive(Debug, Clone)]
pub struct LogSettings {
    pub level: String,
    /// Count every database command and log each at `debug` level (`log.database_commands`).
    pub database_commands: bool,
    /// `log.format`: human-readable lines or one JSON object a line.
    pub format: LogFormat,
}

#[derive(Debug, Clone)]
pub struct MediaSettings {
    /// Largest photo upload accepted, in bytes.
    pub max_upload_bytes: usize,
    /// Largest image accepted, in pixels (width × height, read before decoding).
    pub max_image_pixels: u64,
}

/// How long reservations live (expiry, then cleanup of what expiry missed; see `docs/invariants.md`).
#[derive(Debug, Clone)]
pub struct CartSettings {
    /// An active cart idle this long expires and returns its stock.
    pub expire_after: std::time::Duration,
    /// A stock reservation older than this is checked against its cart; always longer than
    /// `expire_after`, so cleanup never races a cart that expiry is about to handle.
    pub cleanup_after: std::time::Duration,
    /// How often the expiry and cleanup jobs run; zero turns them off (admin can still run them).
    pub jobs_every: std::time::Duration,
    /// Units one cart may hold in all.
    pub max_units: i64,
    /// Percentage of a product's units on hand one cart line may hold (at least 10 units).
    pub max_line_share_pct: i64,
    /// New carts one client address may start per hour.
    pub new_carts_per_hour: u32,
    /// Order lookups (`/orders/lookup`) one client address may try per hour.
    pub order_lookups_per_hour: u32,
    /// How long an expired cart is kept (for the admin's view) before the jobs delete it.
    pub retention: std::time::Duration,
    /// A checkout still `pending` after this long is taken to have been interrupted by a crash:
    /// the jobs ask the gateway about it and finish the order or hand the cart back.
    pub recover_checkout_after: std::time::Duration,
}

/// Limits on comments.
#[derive(Debug, Clone)]
pub struct CommentSettings {
    /// Longest comment text accepted, in characters.
    pub max_length: usize,
    /// Comments one client address may post per minute; 0 turns the limit off.
    pub rate_limit_per_minute: u32,
    /// Comments on one page of a discussion or permalink.
    pub page_size: usize,
    /// Hold a commenter's comment for approval until one of theirs was approved.
    pub hold_first_time: bool,
    /// Hold comments with more web addresses than this.
    pub hold_over_links: usize,
    /// Words or phrases (comma- or line-separated) that hold a comment naming them.
    pub blocklist: String,
    /// Days after a node's publication or a product's creation when its discussion closes; 0:
    /// never.
    pub close_after_days: u32,
    /// Days a deleted comment can be restored before the jobs delete it for good.
    pub restore_days: u32,
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

/// Outgoing email: the transport, the sender address, and how the outbox is worked through.
#[derive(Debug, Clone)]
pub struct EmailSettings {
    pub transport: MailTransport,
    /// The envelope and `From:` address (the shop's name is shown with it).
    pub from: String,
    /// How often the sender looks for messages due; zero: messages wait (nothing is sent).
    pub send_every: std::time::Duration,
    /// Attempts before a message is given up on (shown as failed in the admin).
    pub max_attempts: u32,
    /// The wait after the first temporary failure; each further one doubles it (at most an hour).
    pub retry_after: std::time::Duration,
}

/// Bounds on site search (see `crate::search::limits`).
#[derive(Debug, Clone)]
pub struct SearchSettings {
    /// Searches running at once.
    pub max_concurrent: usize,
    /// How long a search waits for a slot before the visitor is told search is busy.
    pub max_wait: std::time::Duration,
    /// Searches one client address may start per minute.
    pub per_client_per_minute: u32,
}

/// Page-view counting (see `crate::analytics`).
#[derive(Debug, Clone)]
pub struct AnalyticsSettings {
    /// False: no page view is counted (the admin reports still show what was counted before).
    pub enabled: bool,
    /// Page views that may wait for the background writer; more are dropped (and counted as
    /// dropped) rather than slowing a page down.
    pub queue_capacity: usize,
    /// How long the writer gathers page views before writing them as one batch.
    pub flush_interval: std::time::Duration,
    /// Distinct paths counted per day; views of further paths that day count as "(other)".
    pub max_paths_per_day: usize,
}

/// Scheduled backups of the database (see `crate::backup`).
#[derive(Debug, Clone)]
pub struct BackupSettings {
    /// Time between scheduled backups (`backup.every_secs`, else `backup.every_hours`); `None`
    /// when scheduled backups are off.
    pub every: Option<std::time::Duration>,
    /// Scheduled backups kept; older ones are deleted after a new one is verified.
    pub keep: usize,
    /// Where scheduled backups go, one directory per backup.
    pub dir: PathBuf,
}

/// Which payment gateway charges cards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentSettings {
    /// The built-in test gateway (test card numbers only; nothing is really charged).
    Test,
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

/// Where a raw value came from, so an error can point at it.
#[derive(Debug, Clone)]
enum Origin {
    File(String),
    Env(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "in {path}"),
            Origin::Env(var) => write!(f, "from {var}"),
        }
    }
}

#[derive(Debug, Clone)]
enum RawValue {
    Toml(toml::Value),
    Env(String),
}

/// Values by `section.key`, later layers replacing earlier ones.
#[derive(Default)]
struct Layers {
    values: BTreeMap<String, (RawValue, Origin)>,
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
        let mut layers = Layers::default();
        layers.add_toml(DEFAULTS, "the built-in defaults")?;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
            layers.add_toml(&text, &path.display().to_string())?;
        }
        layers.add_env(env)?;
        layers.settings()
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

impl Layers {
    fn add_toml(&mut self, text: &str, origin: &str) -> Result<(), ConfigError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::File {
                path: origin.to_string(),
                message: e.to_string(),
            })?;
        for (section, entries) in table {
            let toml::Value::Table(entries) = entries else {
                return Err(ConfigError::UnknownKey {
                    key: section,
                    origin: format!("in {origin}"),
                    known: known_keys(),
                });
            };
            for (key, value) in entries {
                let name = format!("{section}.{key}");
                let origin = Origin::File(origin.to_string());
                if !is_known(&section, &key) {
                    return Err(ConfigError::UnknownKey {
                        key: name,
                        origin: origin.to_string(),
                        known: known_keys(),
                    });
                }
                self.values.insert(name, (RawValue::Toml(value), origin));
            }
        }
        Ok(())
    }

    fn add_env(
        &mut self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(), ConfigError> {
        for (var, value) in env {
            let Some(rest) = var.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            // Only SECTION__KEY names are settings; BAZAAR_CONFIG and the like are not.
            let Some((section, key)) = rest.split_once("__") else {
                continue;
            };
            let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
            let origin = Origin::Env(var.clone());
            if !is_known(&section, &key) {
                return Err(ConfigError::UnknownKey {
                    key: format!("{section}.{key}"),
                    origin: origin.to_string(),
                    known: known_keys(),
                });
            }
            self.values
                .insert(format!("{section}.{key}"), (RawValue::Env(value), origin));
        }
        Ok(())
    }

    fn raw(&self, key: &str) -> Result<(&RawValue, &Origin), ConfigError> {
        self.values
            .get(key)
            .map(|(value, origin)| (value, origin))
            .ok_or_else(|| ConfigError::InvalidValue {
                key: key.to_string(),
                origin: "the built-in defaults".to_string(),
                message: "missing".to_string(),
            })
    }

    fn invalid(key: &str, origin: &Origin, message: impl Into<String>) -> ConfigError {
        ConfigError::InvalidValue {
            key: key.to_string(),
            origin: origin.to_string(),
            message: message.into(),
        }
    }

    fn string(&self, key: &str) -> Result<(String, Origin), ConfigError> {
        let (value, origin) = self.raw(key)?;
        match value {
            RawValue::Toml(toml::Value::String(s)) | RawValue::Env(s) => {
                Ok((s.clone(), origin.clone()))
            }
            RawValue::Toml(other) => Err(Self::invalid(
                key,
                origin,
                format!("expected a string, got {}", other.type_str()),
            )),
        }
    }

    /// A string where empty means "not set".
    fn optional_string(&self, key: &str) -> Result<(Option<String>, Origin), ConfigError> {
        let (s, origin) = self.string(key)?;
        let s = s.trim().to_string();
        Ok(((!s.is_empty()).then_some(s), origin))
    }

    fn integer(&self, key: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
        let (value, origin) = self.raw(key)?;
        let n = match value {
            RawValue::Toml(toml::Value::Integer(n)) => *n,
            RawValue::Env(s) => s.trim().parse::<i64>().map_err(|_| {
                Self::invalid(key, origin, format!("expected a whole number, got {s:?}"))
            })?,
            RawValue::Toml(other) => {
                return Err(Self::invalid(
                    key,
                    origin,
                    format!("expected a whole number, got {}", other.type_str()),
                ))
            }
        };
        if n < min || n > max {
            return Err(Self::invalid(
                key,
                origin,
                format!("expected a number from {min} to {max}, got {n}"),
            ));
        }
        Ok(n)
    }

    fn boolean(&self, key: &str) -> Result<bool, ConfigError> {
        let (value, origin) = self.raw(key)?;
        match value {
            RawValue::Toml(toml::Value::Boolean(b)) => Ok(*b),
            RawValue::Env(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(Self::invalid(
                    key,
                    origin,
                    format!("expected true or false, got {s:?}"),
                )),
            },
            RawValue::Toml(other) => Err(Self::invalid(
                key,
                origin,
                format!("expected true or false, got {}", other.type_str()),
            )),
        }
    }

    fn settings(&self) -> Result<Settings, ConfigError> {
        Ok(Settings {
            server: self.server()?,
            database: self.database()?,
            session: self.session()?,
            admin: self.admin()?,
            log: self.log()?,
            media: MediaSettings {
                max_upload_bytes: self.integer("media.max_upload_mb", 1, 1024)? as usize
                    * 1024
                    * 1024,
                max_image_pixels: self.integer("media.max_image_megapixels", 1, 1_000)? as u64
                    * 1_000_000,
            },
            cart: self.cart()?,
            payment: self.payment()?,
            comments: CommentSettings {
                max_length: self.integer("comments.max_length", 1, MAX_TEXT_CHARS as i64)? as usize,
                rate_limit_per_minute: self.integer("comments.rate_limit_per_minute", 0, 100_000)?
                    as u32,
                page_size: self.integer("comments.page_size", 1, 1000)? as usize,
                hold_first_time: self.boolean("comments.hold_first_time")?,
                hold_over_links: self.integer("comments.hold_over_links", 0, 1000)? as usize,
                blocklist: self.string("comments.blocklist")?.0,
                close_after_days: self.integer("comments.close_after_days", 0, 36_500)? as u32,
                restore_days: self.integer("comments.restore_days", 1, 3_650)? as u32,
            },
            email: self.email()?,
            search: SearchSettings {
                max_concurrent: self.integer("search.max_concurrent", 1, 1024)? as usize,
                max_wait: std::time::Duration::from_millis(self.integer(
                    "search.max_wait_ms",
                    0,
                    60_000,
                )? as u64),
                per_client_per_minute: self.integer("search.per_client_per_minute", 1, 1_000_000)?
                    as u32,
            },
            analytics: AnalyticsSettings {
                enabled: self.boolean("analytics.enabled")?,
                queue_capacity: self.integer("analytics.queue_capacity", 1, 10_000_000)? as usize,
                flush_interval: std::time::Duration::from_millis(self.integer(
                    "analytics.flush_interval_ms",
                    10,
                    3_600_000,
                )? as u64),
                max_paths_per_day: self.integer("analytics.max_paths_per_day", 1, 1_000_000)?
                    as usize,
            },
            seed: SeedSettings {
                demo: self.boolean("seed.demo")?,
            },
            metrics: self.metrics()?,
            backup: self.backup()?,
        })
    }

    fn email(&self) -> Result<EmailSettings, ConfigError> {
        let (host, _) = self.optional_string("email.smtp_host")?;
        let port = self.integer("email.smtp_port", 1, 65_535)? as u16;
        let (security, origin) = self.string("email.smtp_security")?;
        let security = match security.trim().to_ascii_lowercase().as_str() {
            "starttls" => SmtpSecurity::StartTls,
            "tls" => SmtpSecurity::Tls,
            "none" => SmtpSecurity::None,
            other => {
                return Err(Self::invalid(
                    "email.smtp_security",
                    &origin,
                    format!("expected \"starttls\", \"tls\" or \"none\", got {other:?}"),
                ))
            }
        };
        let (user, _) = self.optional_string("email.smtp_username")?;
        let (password, _) = self.string("email.smtp_password")?;
        let (folder, folder_origin) = self.string("email.folder")?;
        let transport =
            match host {
                Some(host) => MailTransport::Smtp {
                    host,
                    port,
                    security,
                    credentials: user.map(|u| (u, password)),
                },
                None if folder.trim().is_empty() => return Err(Self::invalid(
                    "email.folder",
                    &folder_origin,
                    "with no email.smtp_host, messages are written into this folder: it cannot \
                     be empty",
                )),
                None => MailTransport::Folder(PathBuf::from(folder.trim())),
            };
        let (from, from_origin) = self.string("email.from")?;
        let from = from.trim().to_string();
        if from.parse::<lettre::Address>().is_err() || !from.contains('.') {
            return Err(Self::invalid(
                "email.from",
                &from_origin,
                format!("{from:?} is not an email address such as shop@example.com"),
            ));
        }
        Ok(EmailSettings {
            transport,
            from,
            send_every: std::time::Duration::from_millis(self.integer(
                "email.send_every_ms",
                0,
                3_600_000,
            )? as u64),
            max_attempts: self.integer("email.max_attempts", 1, 100)? as u32,
            retry_after: std::time::Duration::from_secs(self.integer(
                "email.retry_after_secs",
                0,
                86_400,
            )? as u64),
        })
    }

    fn backup(&self) -> Result<BackupSettings, ConfigError> {
        let hours = self.integer("backup.every_hours", 0, 24 * 366)?;
        let secs = self.integer("backup.every_secs", 0, 24 * 366 * 3600)?;
        let every = if secs > 0 {
            Some(std::time::Duration::from_secs(secs as u64))
        } else {
            (hours > 0).then(|| std::time::Duration::from_secs(hours as u64 * 3600))
        };
        let keep = self.integer("backup.keep", 1, 1000)? as usize;
        let (dir, origin) = self.string("backup.dir")?;
        let dir = dir.trim();
        if every.is_some() && dir.is_empty() {
            return Err(Self::invalid(
                "backup.dir",
                &origin,
                "scheduled backups (backup.every_hours) need a directory to write to",
            ));
        }
        Ok(BackupSettings {
            every,
            keep,
            dir: PathBuf::from(dir),
        })
    }

    fn cart(&self) -> Result<CartSettings, ConfigError> {
        use std::time::Duration;
        let expire = self.integer("cart.expire_after_secs", 1, 30 * 24 * 3600)?;
        let cleanup = self.integer("cart.cleanup_after_secs", 1, 60 * 24 * 3600)?;
        if cleanup <= expire {
            let (_, origin) = self.raw("cart.cleanup_after_secs")?;
            return Err(Self::invalid(
                "cart.cleanup_after_secs",
                origin,
                format!(
                    "must be longer than cart.expire_after_secs ({expire}), got {cleanup}: \
                     cleanup would return stock of carts that are still active"
                ),
            ));
        }
        Ok(CartSettings {
            expire_after: Duration::from_secs(expire as u64),
            cleanup_after: Duration::from_secs(cleanup as u64),
            jobs_every: Duration::from_secs(self.integer("cart.jobs_every_secs", 0, 86_400)? as u64),
            max_units: self.integer("cart.max_units", 1, 100_000)?,
            max_line_share_pct: self.integer("cart.max_line_share_pct", 1, 100)?,
            new_carts_per_hour: self.integer("cart.new_carts_per_hour", 1, 1_000_000)? as u32,
            order_lookups_per_hour: self.integer("cart.order_lookups_per_hour", 1, 100_000)? as u32,
            retention: Duration::from_secs(self.integer(
                "cart.retention_secs",
                60,
                365 * 24 * 3600,
            )? as u64),
            recover_checkout_after: Duration::from_secs(self.integer(
                "cart.recover_checkout_after_secs",
                1,
                7 * 24 * 3600,
            )? as u64),
        })
    }

    fn payment(&self) -> Result<PaymentSettings, ConfigError> {
        let (gateway, origin) = self.string("payment.gateway")?;
        match gateway.trim() {
            "test" => Ok(PaymentSettings::Test),
            other => Err(Self::invalid(
                "payment.gateway",
                &origin,
                format!("expected \"test\" (the only gateway built in), got {other:?}"),
            )),
        }
    }

    fn server(&self) -> Result<ServerSettings, ConfigError> {
        let (host, origin) = self.string("server.host")?;
        let host = host.trim().to_string();
        if host.is_empty() || host.contains(char::is_whitespace) || host.contains('/') {
            return Err(Self::invalid(
                "server.host",
                &origin,
                format!("expected a host name or IP address, got {host:?}"),
            ));
        }
        let (public_url, origin) = self.optional_string("server.public_url")?;
        if let Some(url) = &public_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(Self::invalid(
                    "server.public_url",
                    &origin,
                    format!("expected an http:// or https:// address, got {url:?}"),
                ));
            }
        }
        Ok(ServerSettings {
            host,
            port: self.integer("server.port", 0, i64::from(u16::MAX))? as u16,
            public_url,
            tls: self.boolean("server.tls")?,
            workers: self.integer("server.workers", 0, 256)? as usize,
            body_timeout: std::time::Duration::from_secs(self.integer(
                "server.body_timeout_secs",
                1,
                3600,
            )? as u64),
            max_concurrent_bodies: self.integer("server.max_concurrent_bodies", 1, 1_000_000)?
                as usize,
            trusted_proxies: {
                let (list, origin) = self.string("server.trusted_proxies")?;
                TrustedProxies::parse(&list)
                    .map_err(|e| Self::invalid("server.trusted_proxies", &origin, e))?
            },
        })
    }

    fn database(&self) -> Result<DatabaseSettings, ConfigError> {
        let (uri, origin) = self.string("database.uri")?;
        let uri = match uri.trim() {
            "embedded" => DatabaseUri::Embedded,
            "memory" => DatabaseUri::Memory,
            u if u.starts_with("mongodb://") || u.starts_with("mongodb+srv://") => {
                DatabaseUri::External(u.to_string())
            }
            other => {
                return Err(Self::invalid(
                    "database.uri",
                    &origin,
                    format!(
                        "expected \"embedded\", \"memory\" or a mongodb:// or mongodb+srv:// URI, \
                         got {:?}",
                        redact_uri(other)
                    ),
                ))
            }
        };
        let (path, origin) = self.string("database.path")?;
        if path.trim().is_empty() && uri == DatabaseUri::Embedded {
            return Err(Self::invalid(
                "database.path",
                &origin,
                "the embedded store needs a directory",
            ));
        }
        let (name, origin) = self.string("database.name")?;
        // MongoDB's rules for database names.
        let bad_char = name
            .chars()
            .find(|c| matches!(c, '/' | '\\' | '.' | ' ' | '"' | '$' | '\0'));
        if name.is_empty() || name.len() >= 64 || bad_char.is_some() {
            return Err(Self::invalid(
                "database.name",
                &origin,
                format!(
                    "expected a MongoDB database name (1-63 bytes, none of / \\ . space \" $), \
                     got {name:?}"
                ),
            ));
        }
        let (concern, origin) = self.string("database.write_concern")?;
        let write_concern = match concern.trim() {
            "durable" => crate::db::WriteDurability::Durable,
            "fast" => crate::db::WriteDurability::Fast,
            other => {
                return Err(Self::invalid(
                    "database.write_concern",
                    &origin,
                    format!("expected \"durable\" or \"fast\", got {other:?}"),
                ))
            }
        };
        Ok(DatabaseSettings {
            uri,
            path: PathBuf::from(path.trim()),
            name,
            timeout_ms: self.integer("database.timeout_ms", 100, 600_000)? as u64,
            disk_faults: None,
            write_concern,
        })
    }

    fn session(&self) -> Result<SessionSettings, ConfigError> {
        let (key, origin) = self.optional_string("session.key")?;
        if let Some(k) = &key {
            if k.len() < 32 {
                return Err(Self::invalid(
                    "session.key",
                    &origin,
                    format!("expected at least 32 characters, got {}", k.len()),
                ));
            }
        }
        let max_age = self.integer("session.max_age_secs", 1, 365 * 24 * 3600)? as u64;
        Ok(SessionSettings {
            key,
            max_age: std::time::Duration::from_secs(max_age),
        })
    }

    fn admin(&self) -> Result<AdminSettings, ConfigError> {
        let (username, origin) = self.string("admin.username")?;
        if username.is_empty() || username.contains(':') {
            return Err(Self::invalid(
                "admin.username",
                &origin,
                "expected a non-empty name without ':'",
            ));
        }
        let (password_hash, origin) = self.optional_string("admin.password_hash")?;
        if let Some(hash) = &password_hash {
            check_password_hash(hash)
                .map_err(|message| Self::invalid("admin.password_hash", &origin, message))?;
        }
        Ok(AdminSettings {
            username,
            password_hash,
            max_concurrent_verifications: self.integer(
                "admin.max_concurrent_verifications",
                1,
                64,
            )? as usize,
            failures_before_delay: self.integer("admin.failures_before_delay", 1, 100_000)? as u32,
        })
    }

    fn log(&self) -> Result<LogSettings, ConfigError> {
        let (level, origin) = self.string("log.level")?;
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&level) {
            return Err(Self::invalid(
                "log.level",
                &origin,
                format!("expected a tracing filter such as \"info\": {e}"),
            ));
        }
        let (format, origin) = self.string("log.format")?;
        let format = match format.trim() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                return Err(Self::invalid(
                    "log.format",
                    &origin,
                    format!("expected \"text\" or \"json\", got {other:?}"),
                ))
            }
        };
        Ok(LogSettings {
            level,
            database_commands: self.boolean("log.database_commands")?,
            format,
        })
    }

    fn metrics(&self) -> Result<MetricsSettings, ConfigError> {
        let (token, origin) = self.optional_string("metrics.token")?;
        if let Some(token) = &token {
            // A Prometheus scrape config sends it in an HTTP header: visible ASCII only.
            if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(Self::invalid(
                    "metrics.token",
                    &origin,
                    "expected at least 16 visible ASCII characters (no spaces)",
                ));
            }
        }
        Ok(MetricsSettings {
            token,
            database_commands: self.boolean("metrics.database_commands")?,
        })
    }
}

fn is_known(section: &str, key: &str) -> bool {
    KNOWN_KEYS.iter().any(|(s, k)| *s == section && *k == key)
}

fn known_keys() -> String {
    KNOWN_KEYS
        .iter()
        .map(|(s, k)| format!("{s}.{k}"))
        .collect::<Vec<_>>()
        .join(", ")
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
    fn passwords_in_database_uris_are_redacted() {
        assert_eq!(
            redact_uri("mongodb://bob:s3cret@db:27017/x?tls=true"),
            "mongodb://bob:***@db:27017/x?tls=true"
        );
        assert_eq!(redact_uri("mongodb://db:27017"), "mongodb://db:27017");
    }
}
