//! Start-up: open the database (starting embedded docstore when configured), ensure indexes,
//! seed an empty database, assemble the web app and run it until stopped.

pub mod indexes;
mod workers;

pub(crate) use workers::WorkerStores;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::cookie::Key;
use actix_web::dev::Server;
use actix_web::middleware::{from_fn, ErrorHandlers};
use actix_web::{web, App, HttpServer};
use anyhow::Context;

use crate::analytics::events::EventLog;
use crate::analytics::PageViewCounter;
use crate::backup::schedule::BackupMonitor;
use crate::cart::pages::NewCartLimit;
use crate::checkout::gateway::{PaymentGateway, TestGateway};
use crate::checkout::lookup::LookupLimit;
use crate::comments::rate_limit::CommentRateLimit;
use crate::config::{redact_uri, DatabaseUri, PaymentSettings, Settings};
use crate::db::{Db, Store};
use crate::mail::sender::Mailer;
use crate::search::limits::SearchLimits;
use crate::state::AppState;
use crate::web::basic_auth::{self, AdminCredentials};
use crate::web::body_timeout::{limit_body_time, BodyPolicy};
use crate::web::error_page::{bad_request_page, render_bare_errors};
use crate::web::security_headers::{add_security_headers, TransportPolicy};
use crate::web::{assets, csrf, session};
use crate::{analytics, demo, home, telemetry};

/// The user Bazaar creates in the embedded store (its password is random per start).
const EMBEDDED_USER: &str = "bazaar";

/// How long in-flight requests may take to finish once shutdown starts.
const SHUTDOWN_GRACE_SECS: u64 = 10;
/// At most this many traffic events wait to be written (fewer when `analytics.queue_capacity` is
/// smaller).
const EVENT_QUEUE_MAX: usize = 20_000;

/// The database connection, and the embedded server when Bazaar started one.
pub struct OpenDatabase {
    pub db: Db,
    embedded: Option<docstore::ServerHandle>,
    /// The HTTP workers' own ways into the embedded store (none on an external MongoDB).
    workers: Option<WorkerStores>,
}

impl OpenDatabase {
    /// Connect as configured, starting docstore in-process for `embedded`/`memory`, and check
    /// the server answers.
    pub async fn open(settings: &Settings) -> anyhow::Result<OpenDatabase> {
        // Before connecting, so the database client reports its commands to the metrics.
        if settings.metrics.token.is_some() {
            crate::metrics::install()
                .map_err(|e| anyhow::anyhow!("cannot keep metrics (metrics.token): {e}"))?;
            if settings.metrics.database_commands {
                crate::metrics::keep_database_commands();
            }
        }
        let timeout = Duration::from_millis(settings.database.timeout_ms);
        let name = &settings.database.name;
        let (uri, store, embedded) = match &settings.database.uri {
            DatabaseUri::Embedded | DatabaseUri::Memory => {
                let storage = match &settings.database.uri {
                    DatabaseUri::Embedded => {
                        let path = &settings.database.path;
                        docstore::private_fs::create_dir_all(path).with_context(|| {
                            format!("cannot create the data directory {}", path.display())
                        })?;
                        docstore::StorageMode::Directory(path.clone())
                    }
                    _ => docstore::StorageMode::InMemory,
                };
                let store = match &storage {
                    docstore::StorageMode::Directory(path) => {
                        Store::EmbeddedDirectory(path.clone())
                    }
                    docstore::StorageMode::InMemory => Store::EmbeddedMemory,
                };
                // The store listens on a loopback port any local program could reach, so it
                // requires a user whose password is generated now and known only to this
                // process; the URI that carries it is never logged.
                let password = docstore::generate_password();
                let user = docstore::User::with_password(EMBEDDED_USER, &password)
                    .context("cannot set up the embedded store's user")?;
                let unix_socket =
                    data_dir(&store).and_then(|path| unix_socket_path(&path, UNIX_SOCKET_FILE));
                let handle = match docstore::Server::start(docstore::Config {
                    storage,
                    port: 0,
                    user: Some(user),
                    disk_faults: settings.database.disk_faults.clone(),
                    unix_socket,
                    ..Default::default()
                })
                .await
                {
                    Ok(handle) => handle,
                    Err(e) if e.needs_repair() => {
                        return Err(anyhow::anyhow!(damaged_store_message(
                            &settings.database.path,
                            e.damage().unwrap_or(&e.message),
                        )))
                    }
                    Err(e) => {
                        return Err(anyhow::Error::new(e).context(format!(
                            "cannot start the embedded store ({store}); is another Bazaar using \
                             the same database.path?"
                        )))
                    }
                };
                let uri = handle.uri_with_credentials(EMBEDDED_USER, &password);
                if let Store::EmbeddedDirectory(path) = &store {
                    // Other processes (`bazaar backup`) attach over TCP.
                    crate::backup::attach::publish(path, &uri);
                }
                // This process's own connection goes through the Unix socket when there is one.
                let own = handle
                    .unix_uri_with_credentials(EMBEDDED_USER, &password)
                    .unwrap_or(uri);
                (own, store, Some(handle))
            }
            DatabaseUri::External(uri) => (uri.clone(), Store::External(redact_uri(uri)), None),
        };
        let db = Db::connect_counting(
            &uri,
            name,
            timeout,
            store.clone(),
            settings.log.database_commands,
        )
        .await
        .with_context(|| format!("invalid database.uri for {store}"))?
        .with_durability(settings.database.write_concern);
        db.ping()
            .await
            .with_context(|| format!("cannot reach the database ({store})"))?;
        tracing::info!(store = %store, database = %name, "database connected");
        let workers = embedded
            .as_ref()
            .and_then(|handle| Some(WorkerStores::new(handle.in_process()?, data_dir(&store))));
        Ok(OpenDatabase {
            db,
            embedded,
            workers,
        })
    }

    /// The address of the embedded store, when Bazaar started one.
    pub(crate) fn embedded_store_address(&self) -> Option<std::net::SocketAddr> {
        self.embedded
            .as_ref()
            .map(docstore::ServerHandle::local_addr)
    }

    /// Connect to the embedded store of the Bazaar that is serving `database.path` right now
    /// (through the address file it publishes there), for `bazaar backup` and `bazaar migrate`.
    pub(crate) async fn attach_running(settings: &Settings) -> anyhow::Result<OpenDatabase> {
        let path = &settings.database.path;
        let uri = crate::backup::attach::read(path)?;
        let store = Store::EmbeddedDirectory(path.clone());
        let timeout = Duration::from_millis(settings.database.timeout_ms);
        let db = Db::connect(&uri, &settings.database.name, timeout, store.clone())
            .await
            .with_context(|| format!("cannot connect to the running Bazaar's store ({store})"))?;
        db.ping()
            .await
            .with_context(|| format!("the running Bazaar's store does not answer ({store})"))?;
        Ok(OpenDatabase {
            db,
            embedded: None,
            workers: None,
        })
    }

    /// Open the configured store as [`OpenDatabase::open`] does or, when another Bazaar is
    /// serving the embedded store's directory, connect to that Bazaar's store instead.
    pub(crate) async fn open_or_attach(settings: &Settings) -> anyhow::Result<OpenDatabase> {
        match OpenDatabase::open(settings).await {
            Ok(database) => Ok(database),
            Err(e)
                if settings.database.uri == DatabaseUri::Embedded
                    && crate::backup::attach::exists(&settings.database.path) =>
            {
                tracing::info!(
                    "the data directory is in use ({e:#}); connecting to the Bazaar serving it"
                );
                OpenDatabase::attach_running(settings).await
            }
            Err(e) => Err(e),
        }
    }

    /// Close the connection; an embedded docstore stops and flushes its journal.
    pub async fn close(self) {
        self.db.client().clone().shutdown().await;
        if let (Some(_), Store::EmbeddedDirectory(path)) = (&self.embedded, self.db.store()) {
            crate::backup::attach::withdraw(path);
        }
        if let Some(handle) = self.embedded {
            handle.shutdown().await;
            tracing::info!("embedded store stopped");
        }
    }
}

/// The embedded store's data directory, when it keeps its data on disk (where its Unix sockets
/// go).
fn data_dir(store: &Store) -> Option<std::path::PathBuf> {
    match store {
        Store::EmbeddedDirectory(path) => Some(path.clone()),
        _ => None,
    }
}

/// File name of the embedded store's Unix socket in the data directory.
const UNIX_SOCKET_FILE: &str = "docstore.sock";
/// A Unix socket path must fit in `sun_path` (108 bytes on Linux, 104 on macOS).
const MAX_UNIX_SOCKET_PATH: usize = 100;

/// Where the embedded store's Unix socket goes: in the data directory, by its absolute path, so
/// the app's own connection skips TCP (a database command then costs the kernel far less). `None`
/// (TCP only) when that path is too long for a socket or not valid UTF-8 for the driver's URI.
fn unix_socket_path(data: &std::path::Path, file: &str) -> Option<std::path::PathBuf> {
    if !cfg!(unix) {
        return None;
    }
    let path = std::fs::canonicalize(data).ok()?.join(file);
    let text = path.to_str()?;
    (text.len() <= MAX_UNIX_SOCKET_PATH).then_some(path)
}

/// What to tell an operator whose embedded store refused to open because of damage: what is
/// wrong, and the command that salvages it, rather than a bare error.
pub(crate) fn damaged_store_message(path: &std::path::Path, damage: &str) -> String {
    format!(
        "the embedded store in {} is damaged: {damage}.\n\nBazaar will not start rather than \
         silently drop data. To keep every record that still validates and set the damaged bytes \
         aside, stop every Bazaar using this database.path and run\n\n    bazaar repair\n\n\
         (or `cargo run -- repair`); it reports exactly what was lost and moves the old files to \
         {}/repair-<time>/. Or restore the directory from a backup.",
        path.display(),
        path.display()
    )
}

/// The running web server and its database.
pub struct Application {
    port: u16,
    address: String,
    server: Server,
    database: OpenDatabase,
    generated_admin_password: Option<String>,
    /// The built-in test gateway when it is the configured one (tests count its charges).
    test_gateway: Option<Arc<TestGateway>>,
    /// Cart expiry and cleanup, stopped with the server.
    jobs: Option<tokio::task::JoinHandle<()>>,
    /// Scheduled backups (when `backup.every_hours` is set), stopped with the server.
    backups: Option<tokio::task::JoinHandle<()>>,
    /// The outbox sender (unless `email.send_every_ms` is 0), stopped with the server.
    mail_sender: Option<tokio::task::JoinHandle<()>>,
    backup_monitor: Arc<BackupMonitor>,
    /// Who may enter `/admin` (its counters show how many password checks ran).
    credentials: web::Data<AdminCredentials>,
    /// Counts page views when `analytics.enabled`; stopped (and flushed) with the server.
    page_views: Option<PageViewCounter>,
    /// The traffic log when `analytics.events` is on too; stopped (and flushed) with the server.
    event_log: Option<EventLog>,
    /// The bounds on site search (tests hold its slots to see the busy page).
    search_limits: web::Data<SearchLimits>,
}

/// What [`Application::assemble`] builds besides the database.
struct Assembled {
    port: u16,
    gateway: Arc<dyn PaymentGateway>,
    server: Server,
    generated_admin_password: Option<String>,
    test_gateway: Option<Arc<TestGateway>>,
    credentials: web::Data<AdminCredentials>,
    backup_monitor: Arc<BackupMonitor>,
    page_views: Option<PageViewCounter>,
    event_log: Option<EventLog>,
    search_limits: web::Data<SearchLimits>,
    mailer: web::Data<Mailer>,
}

impl Application {
    /// Open the database, prepare it and bind the HTTP listener (port 0 picks a free port).
    pub async fn build(settings: Settings) -> anyhow::Result<Application> {
        let database = OpenDatabase::open(&settings).await?;
        match Application::build_with_database(settings, database).await {
            Ok(app) => Ok(app),
            Err((e, database)) => {
                database.close().await;
                Err(e)
            }
        }
    }

    /// Like [`Application::build`] on an already-open database; on failure the database is
    /// handed back so the caller can close it.
    pub async fn build_with_database(
        settings: Settings,
        database: OpenDatabase,
    ) -> Result<Application, (anyhow::Error, OpenDatabase)> {
        crate::metrics::mark_started();
        match Application::assemble(&settings, &database.db, database.workers.clone()).await {
            Ok(built) => Ok(Application {
                port: built.port,
                address: settings.public_address(built.port),
                server: built.server,
                jobs: crate::jobs::spawn(
                    database.db.clone(),
                    settings.cart.clone(),
                    built.gateway.clone(),
                    settings.comments.restore_days,
                    settings.accounts.abandoned_after_days,
                ),
                backups: crate::backup::schedule::spawn(
                    database.db.clone(),
                    built.backup_monitor.clone(),
                ),
                mail_sender: crate::mail::sender::spawn(
                    database.db.clone(),
                    built.mailer.clone().into_inner(),
                ),
                backup_monitor: built.backup_monitor,
                database,
                generated_admin_password: built.generated_admin_password,
                test_gateway: built.test_gateway,
                credentials: built.credentials,
                page_views: built.page_views,
                event_log: built.event_log,
                search_limits: built.search_limits,
            }),
            Err(e) => Err((e, database)),
        }
    }

    async fn assemble(
        settings: &Settings,
        db: &Db,
        workers: Option<WorkerStores>,
    ) -> anyhow::Result<Assembled> {
        indexes::ensure_indexes(db)
            .await
            .context("creating the database indexes failed")?;
        analytics::events::ensure_retention(db, settings.analytics.events_retention_days)
            .await
            .context("creating the traffic events' TTL index failed")?;
        crate::catalog::facets::backfill(db)
            .await
            .context("normalising the products' filter keys failed")?;
        migrate_reservations(db)
            .await
            .context("moving the reservations out of the product documents failed")?;
        // Also gives nodes stored before `metadata.live` existed their flag.
        crate::content::store::go_live_due(db)
            .await
            .context("marking due content live failed")?;
        // In the background: finding the nodes stored before summaries existed reads every node
        // (half a second at 100 000 posts), and such nodes only lack their excerpt meanwhile.
        // `/readyz` waits for it.
        let summaries = Arc::new(AtomicBool::new(false));
        tokio::spawn(backfill_summaries(db.clone(), Arc::clone(&summaries)));
        if let Some(report) = demo::run_if_empty(db, settings.seed.demo)
            .await
            .context("seeding the empty database failed")?
        {
            tracing::info!("{}", report.summary());
        }
        // Hash the static files now rather than on the first request.
        let _ = assets::assets();
        let key = session::load_or_create_key(settings)?;
        let (credentials, generated) = AdminCredentials::from_settings(&settings.admin);
        if let Some(password) = &generated {
            tracing::warn!(
                "admin.password_hash is not set: the admin password for this run is {password} \
                 (user {:?}); set admin.password_hash (see `bazaar hash-password`) to choose one",
                settings.admin.username
            );
        }
        let listener = TcpListener::bind((settings.server.host.as_str(), settings.server.port))
            .with_context(|| {
                format!(
                    "cannot listen on {}:{} (server.host, server.port)",
                    settings.server.host, settings.server.port
                )
            })?;
        let port = listener
            .local_addr()
            .context("reading the bound port")?
            .port();
        let (gateway, test_gateway): (Arc<dyn PaymentGateway>, _) = match settings.payment {
            PaymentSettings::Test => {
                let test = Arc::new(TestGateway::new(db.clone()));
                (test.clone(), Some(test))
            }
        };
        db.extension::<crate::mail::SiteAddress>()
            .set(&settings.public_address(port));
        let state = web::Data::new(AppState {
            db: db.clone(),
            db_timeout_ms: settings.database.timeout_ms,
            admin_user: settings.admin.username.clone(),
            max_upload_bytes: settings.media.max_upload_bytes,
            max_image_pixels: settings.media.max_image_pixels,
            cart: settings.cart.clone(),
            public_url: settings
                .public_address(port)
                .trim_end_matches('/')
                .to_string(),
            comments: settings.comments.clone(),
            revisions_kept: settings.content.revisions_kept,
            site: Default::default(),
        });
        let credentials = web::Data::new(credentials);
        let backup_monitor = BackupMonitor::new(settings.backup.clone());
        let page_views = settings
            .analytics
            .enabled
            .then(|| PageViewCounter::spawn(db.clone(), &settings.analytics));
        // A waiting hit holds its headers (up to about 1.5 KB), so fewer of them wait than the
        // counter's tallies.
        let event_log = (settings.analytics.enabled && settings.analytics.events).then(|| {
            EventLog::spawn(
                db.clone(),
                settings.analytics.queue_capacity.min(EVENT_QUEUE_MAX),
            )
        });
        let areas = AreaData {
            gateway: web::Data::from(gateway.clone()),
            comment_rate: web::Data::new(CommentRateLimit::new(
                settings.comments.rate_limit_per_minute,
            )),
            new_carts: web::Data::new(NewCartLimit::per_hour(settings.cart.new_carts_per_hour)),
            order_lookups: web::Data::new(LookupLimit::per_hour(
                settings.cart.order_lookups_per_hour,
            )),
            account_settings: web::Data::new(settings.accounts.clone()),
            checkout_prefill: web::Data::from(Arc::new(crate::accounts::addresses::AccountPrefill)
                as Arc<dyn crate::checkout::pages::CheckoutPrefill>),
            backup_monitor: web::Data::from(backup_monitor.clone()),
            page_views: page_views.clone().map(web::Data::new),
            event_log: event_log.clone().map(web::Data::new),
            search_limits: web::Data::new(SearchLimits::new(&settings.search)),
            readiness: web::Data::new(crate::health::ready::Readiness::new(
                indexes::index_names(),
                crate::search::indexes()
                    .into_iter()
                    .map(|(collection, _)| collection.to_string())
                    .collect(),
                vec![(SUMMARIES_PENDING, summaries)],
            )),
            metrics_access: web::Data::new(crate::health::scrape::MetricsAccess {
                token: settings.metrics.token.clone(),
            }),
            mailer: web::Data::new(
                Mailer::new(settings.email.clone())
                    .context("setting up outgoing email (email.*) failed")?,
            ),
        };
        let mailer = areas.mailer.clone();
        let search_limits = areas.search_limits.clone();
        let server = http_server(
            state,
            workers,
            credentials.clone(),
            areas,
            key,
            settings,
            listener,
        )?;
        Ok(Assembled {
            backup_monitor,
            port,
            gateway,
            server,
            generated_admin_password: generated,
            test_gateway,
            credentials,
            page_views,
            event_log,
            search_limits,
            mailer,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address to print for people to open.
    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    /// The password generated because no hash was configured (already logged once).
    pub fn generated_admin_password(&self) -> Option<&str> {
        self.generated_admin_password.as_deref()
    }

    /// The built-in test gateway, when configured (tests count its charges).
    pub fn test_gateway(&self) -> Option<Arc<TestGateway>> {
        self.test_gateway.clone()
    }

    /// The admin credentials and their password-check counters.
    pub fn admin_credentials(&self) -> web::Data<AdminCredentials> {
        self.credentials.clone()
    }

    /// The bounds on site search (concurrent searches, searches per client).
    pub fn search_limits(&self) -> web::Data<SearchLimits> {
        self.search_limits.clone()
    }

    /// The address of the embedded store, when Bazaar started one (it requires credentials
    /// only this process knows).
    pub fn embedded_store_address(&self) -> Option<std::net::SocketAddr> {
        self.database.embedded_store_address()
    }

    /// Scheduled backups' status (and a way to run one now, for tests and the admin).
    pub fn backup_monitor(&self) -> Arc<BackupMonitor> {
        self.backup_monitor.clone()
    }

    /// The page-view counter, when `analytics.enabled` (tests flush it and count with it).
    pub fn page_views(&self) -> Option<PageViewCounter> {
        self.page_views.clone()
    }

    /// The traffic log, when `analytics.events` (tests flush it).
    pub fn event_log(&self) -> Option<EventLog> {
        self.event_log.clone()
    }

    /// The database handle (tests check stock invariants through it).
    pub fn db(&self) -> &Db {
        &self.database.db
    }

    /// A handle to stop the server gracefully from elsewhere.
    pub fn server_handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// Stop gracefully on SIGINT or SIGTERM: stop accepting, let in-flight requests finish. The
    /// signals are caught from the moment this returns, so a stop right after start-up still
    /// closes the store cleanly.
    pub(crate) fn stop_on_signals(&self) {
        let handle = self.server.handle();
        let signals = Signals::listen();
        tokio::spawn(async move {
            signals.wait().await;
            tracing::info!("shutting down: finishing requests in flight");
            handle.stop(true).await;
        });
    }

    /// Serve until stopped, then write the page views still queued and close the database
    /// (flushing an embedded store).
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let served = self.server.await;
        if let Some(jobs) = self.jobs {
            jobs.abort();
        }
        if let Some(backups) = self.backups {
            backups.abort();
        }
        if let Some(sender) = self.mail_sender {
            sender.abort();
        }
        if let Some(page_views) = &self.page_views {
            page_views.stop().await;
        }
        if let Some(event_log) = &self.event_log {
            event_log.stop().await;
        }
        self.database.close().await;
        served.context("the HTTP server failed")
    }
}

/// SIGINT and SIGTERM, listened for from creation (a signal that arrives before anyone waits
/// is kept, not lost to the default action).
struct Signals {
    #[cfg(unix)]
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    fn listen() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let streams = match (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) {
                (Ok(int), Ok(term)) => Some((int, term)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the server");
                    None
                }
            };
            Signals { streams }
        }
        #[cfg(not(unix))]
        {
            Signals {}
        }
    }

    async fn wait(self) {
        #[cfg(unix)]
        if let Some((mut int, mut term)) = self.streams {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The long-lived helpers one area's handlers take as app data of their own (rather than
/// through [`AppState`], which stays below the areas).
struct AreaData {
    /// Charges checkouts (`payment.gateway`): `checkout::pages`.
    gateway: web::Data<dyn PaymentGateway>,
    /// Comments per client address per minute: the comment and reply handlers of
    /// `catalog::pages` and `content::pages`, passed on to `comments::pages`.
    comment_rate: web::Data<CommentRateLimit>,
    /// New carts per client address per hour: `cart::pages::add`.
    new_carts: web::Data<NewCartLimit>,
    /// Order lookups per client address per hour: `checkout::lookup::submit`.
    order_lookups: web::Data<LookupLimit>,
    /// Sign-in limits: `accounts::sign_in::request`.
    account_settings: web::Data<crate::config::AccountSettings>,
    /// A signed-in customer's email and default address in the checkout form:
    /// `checkout::pages::show`.
    checkout_prefill: web::Data<dyn crate::checkout::pages::CheckoutPrefill>,
    /// Scheduled backups' status: the admin's backup screen.
    backup_monitor: web::Data<BackupMonitor>,
    /// Page-view counting, when `analytics.enabled`.
    page_views: Option<web::Data<PageViewCounter>>,
    /// The traffic log, when `analytics.events` too: the analytics middleware.
    event_log: Option<web::Data<EventLog>>,
    /// Searches at once and per client: `search::pages`.
    search_limits: web::Data<SearchLimits>,
    /// What `/readyz` waits for: `health::ready`.
    readiness: web::Data<crate::health::ready::Readiness>,
    /// The bearer token of `/metrics`: `health::scrape`.
    metrics_access: web::Data<crate::health::scrape::MetricsAccess>,
    /// Outgoing email's settings and transport: the admin's system page (the sender job has
    /// its own handle).
    mailer: web::Data<Mailer>,
}

fn http_server(
    state: web::Data<AppState>,
    worker_stores: Option<WorkerStores>,
    credentials: web::Data<AdminCredentials>,
    areas: AreaData,
    key: Key,
    settings: &Settings,
    listener: TcpListener,
) -> anyhow::Result<Server> {
    let (tls, workers) = (settings.server.tls, settings.server.workers);
    let transport = web::Data::new(TransportPolicy { tls });
    let trusted_proxies = web::Data::new(settings.server.trusted_proxies.clone());
    let session_policy = web::Data::new(session::SessionPolicy {
        max_age: settings.session.max_age,
        clock: state.db.clock(),
    });
    let body_policy = web::Data::new(BodyPolicy::new(
        settings.server.body_timeout,
        settings.server.max_concurrent_bodies,
    ));
    // The layout's absolute links (canonical, social cards, feeds): `web::meta`.
    let site_url = web::Data::new(crate::web::meta::SiteUrl(state.public_url.clone()));
    let mut server = HttpServer::new(move || {
        let state = worker_state(&state, worker_stores.as_ref());
        let mut app = App::new();
        if let Some(page_views) = &areas.page_views {
            app = app.app_data(page_views.clone());
        }
        if let Some(event_log) = &areas.event_log {
            app = app.app_data(event_log.clone());
        }
        app.app_data(state.clone())
            .app_data(site_url.clone())
            .app_data(credentials.clone())
            .app_data(areas.backup_monitor.clone())
            .app_data(areas.gateway.clone())
            .app_data(areas.comment_rate.clone())
            .app_data(areas.new_carts.clone())
            .app_data(areas.order_lookups.clone())
            .app_data(areas.account_settings.clone())
            .app_data(areas.checkout_prefill.clone())
            .app_data(areas.search_limits.clone())
            .app_data(areas.readiness.clone())
            .app_data(areas.metrics_access.clone())
            .app_data(areas.mailer.clone())
            .app_data(transport.clone())
            .app_data(trusted_proxies.clone())
            .app_data(session_policy.clone())
            .app_data(body_policy.clone())
            .app_data(
                web::FormConfig::default()
                    .limit(csrf::MAX_FORM_BYTES)
                    .error_handler(|e, _| bad_request_page(e)),
            )
            .app_data(web::QueryConfig::default().error_handler(|e, _| bad_request_page(e)))
            .app_data(web::PathConfig::default().error_handler(|e, _| bad_request_page(e)))
            .configure(crate::routes::routes)
            .default_service(web::to(home::not_found))
            // Listed innermost first: a request passes them bottom to top.
            .wrap(from_fn(analytics::middleware::count_page_views))
            .wrap(from_fn(csrf::verify))
            .wrap(from_fn(limit_body_time))
            .wrap(from_fn(basic_auth::guard_admin_area))
            .wrap(from_fn(session::enforce_max_age))
            // Inside the session middleware, so error pages can read the visitor's cart count.
            .wrap(ErrorHandlers::new().default_handler(render_bare_errors))
            .wrap(session::middleware(key.clone(), tls))
            // Outside the error pages, so they too show the shop's name from the settings.
            .wrap(from_fn(crate::state::with_site_settings))
            .wrap(from_fn(add_security_headers))
            .wrap(from_fn(crate::web::request_log::log_requests))
    })
    // Signals are handled by `Application::stop_on_signals`, which always stops gracefully
    // (actix's own handling treats SIGINT as a forced stop).
    .disable_signals()
    .shutdown_timeout(SHUTDOWN_GRACE_SECS);
    if workers > 0 {
        server = server.workers(workers);
    }
    Ok(server.listen(listener)?.run())
}

/// The state one HTTP worker's handlers share: `shared` with a database handle of the worker's
/// own when the store is embedded (see [`WorkerStores`]). Called on the worker's thread.
fn worker_state(
    shared: &web::Data<AppState>,
    workers: Option<&WorkerStores>,
) -> web::Data<AppState> {
    let Some(workers) = workers else {
        return shared.clone();
    };
    match workers.connect_here(&shared.db) {
        Ok(db) => web::Data::new(AppState {
            db,
            ..AppState::clone(shared)
        }),
        Err(e) => {
            tracing::warn!("this HTTP worker shares the process's database client: {e:#}");
            shared.clone()
        }
    }
}

/// Start logging for the configured level (separate so the CLI can log before serving).
pub(crate) fn init_logging(settings: &Settings) {
    telemetry::init(&settings.log.level, settings.log.format);
}

/// What `/readyz` says while [`backfill_summaries`] runs.
const SUMMARIES_PENDING: &str = "the summaries of content stored before them are being worked out";

/// The first wait before [`backfill_summaries`] tries again; each failure doubles it, up to
/// [`SUMMARIES_RETRY_MAX`].
const SUMMARIES_RETRY: Duration = Duration::from_secs(5);
/// The longest wait between two tries of [`backfill_summaries`].
const SUMMARIES_RETRY_MAX: Duration = Duration::from_secs(60);

/// Give the nodes stored before summaries existed theirs (`content::store::backfill_summaries`),
/// then set `done`. While the database refuses it is tried again, a little less often each
/// time, for as long as the process runs: it never gives up, so an instance whose database was
/// away for a while becomes ready once it is back (`/readyz` says what it waits for meanwhile).
async fn backfill_summaries(db: Db, done: Arc<AtomicBool>) {
    let mut wait = SUMMARIES_RETRY;
    loop {
        match crate::content::store::backfill_summaries(&db).await {
            Ok(filled) => {
                if filled > 0 {
                    tracing::info!(nodes = filled, "worked out the summaries of older content");
                }
                done.store(true, Ordering::Relaxed);
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in_secs = wait.as_secs(), "working out the summaries of older content failed; trying again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(SUMMARIES_RETRY_MAX);
            }
        }
    }
}

/// Move reservations kept in product documents by earlier versions to their own collection
/// (`stock::migrate_carted`), under a lease so that several instances starting at once do not
/// all scan the products; the migration is safe to repeat and to run concurrently anyway, so an
/// instance that finds the lease taken just goes on (a crash mid-way is finished by the next
/// start-up).
async fn migrate_reservations(db: &Db) -> Result<(), crate::db::DbError> {
    const LEASE: &str = "migrate-reservations";
    // Nothing to move (a database written by this version, or an empty one, which must stay
    // empty for the seeding that follows): no lease either.
    if !crate::stock::has_carted(db).await? {
        return Ok(());
    }
    let Some(lease) = crate::db::lease::try_take_here(db, LEASE, Duration::from_secs(600)).await?
    else {
        tracing::info!("another instance is moving reservations out of the products");
        return Ok(());
    };
    crate::stock::migrate_carted(db).await?;
    lease.release(db).await
}
