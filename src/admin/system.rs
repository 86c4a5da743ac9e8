//! Admin → System: what the shop runs on (the store, the database, its collections and sizes)
//! scheduled backups' status, outgoing email (where it goes, what waits, what failed, the `.eml`
//! files) and the demo-data actions; kept apart from the dashboard, which is about the business.

use std::time::Instant;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::backup::schedule::{BackupMonitor, BackupStatus};
use crate::config::{MailTransport, SmtpSecurity};
use crate::db::CollectionCount;
use crate::demo;
use crate::mail::sender::{eml_files, Mailer};
use crate::mail::{self, MailStatus, OutboxMessage};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

#[derive(Template)]
#[template(path = "admin/system.html")]
pub(crate) struct SystemPage {
    pub(crate) layout: Layout,
    /// The kind of store and where its data lives.
    pub(crate) store: String,
    pub(crate) database: String,
    pub(crate) server_version: String,
    pub(crate) ping_ms: String,
    pub(crate) collections: Vec<CollectionCount>,
    /// Scheduled backups: the last one, or why there is none (`admin/_backups.html`).
    pub(crate) backups: BackupStatus,
    /// This process: Bazaar's version, its instance name in leases, how long it has served.
    pub(crate) version: &'static str,
    pub(crate) instance: &'static str,
    pub(crate) uptime: String,
    /// Data and index bytes of the whole database (`dbStats`), readable.
    pub(crate) data_size: String,
    /// The background jobs this instance ran.
    pub(crate) jobs: Vec<JobRow>,
    /// The warnings and errors this instance logged most recently, newest first.
    pub(crate) problems: Vec<ProblemRow>,
    pub(crate) mail: MailPanel,
}

/// One background job on the System page.
pub(crate) struct JobRow {
    pub(crate) name: &'static str,
    pub(crate) runs: u64,
    pub(crate) failures: u64,
    pub(crate) last_run: String,
    pub(crate) last_took: String,
    /// Empty when the last run succeeded.
    pub(crate) last_error: String,
}

/// One logged warning or error on the System page.
pub(crate) struct ProblemRow {
    pub(crate) at: String,
    pub(crate) level: String,
    pub(crate) text: String,
}

fn utc(at: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(at)
        .format("%Y-%m-%d %H:%M:%S UTC")
        .to_string()
}

fn readable_duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..=59 => format!("{secs} s"),
        60..=3599 => format!("{} min {} s", secs / 60, secs % 60),
        3600..=86_399 => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
        _ => format!("{} days {} h", secs / 86_400, secs % 86_400 / 3600),
    }
}

fn readable_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} {}", UNITS[0])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `dataSize + indexSize` of `dbStats`, readable; "unknown" when the server does not say.
async fn data_size(db: &crate::db::Db) -> String {
    let Ok(stats) = db.database().run_command(bson::doc! { "dbStats": 1 }).await else {
        return "unknown".to_string();
    };
    let figure = |name: &str| match stats.get(name) {
        Some(bson::Bson::Int32(n)) => f64::from(*n),
        Some(bson::Bson::Int64(n)) => *n as f64,
        Some(bson::Bson::Double(d)) => *d,
        _ => 0.0,
    };
    format!(
        "{} (data {}, indexes {})",
        readable_bytes(figure("dataSize") + figure("indexSize")),
        readable_bytes(figure("dataSize")),
        readable_bytes(figure("indexSize"))
    )
}

/// Outgoing email on the System page: where it goes, what waits, what failed.
pub(crate) struct MailPanel {
    /// "SMTP smtp.example.com:587 (STARTTLS)" or the folder `.eml` files go into.
    pub(crate) transport: String,
    /// The folder, when messages are written as files, with its newest files.
    pub(crate) folder: Option<String>,
    pub(crate) files: Vec<(String, u64)>,
    pub(crate) waiting: u64,
    pub(crate) sent: u64,
    pub(crate) failed: Vec<OutboxMessage>,
}

/// `.eml` files listed on the page.
const FILES_SHOWN: usize = 20;
/// Failed messages listed on the page.
const FAILED_SHOWN: i64 = 50;

async fn mail_panel(db: &crate::db::Db, mailer: &Mailer) -> Result<MailPanel, AppError> {
    let transport = match &mailer.settings.transport {
        MailTransport::Smtp {
            host,
            port,
            security,
            ..
        } => format!(
            "SMTP {host}:{port} ({})",
            match security {
                SmtpSecurity::StartTls => "STARTTLS",
                SmtpSecurity::Tls => "TLS",
                SmtpSecurity::None => "unencrypted",
            }
        ),
        MailTransport::Folder(dir) => format!("written as .eml files into {}", dir.display()),
    };
    let folder = mailer.transport.folder().map(|d| d.to_path_buf());
    let files = match &folder {
        Some(dir) => {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || eml_files(&dir, FILES_SHOWN))
                .await
                .unwrap_or_default()
        }
        None => Vec::new(),
    };
    Ok(MailPanel {
        transport,
        folder: folder.map(|d| d.display().to_string()),
        files,
        waiting: mail::count_waiting(db).await?,
        sent: mail::count(db, MailStatus::Sent).await?,
        failed: mail::list(db, MailStatus::Failed, FAILED_SHOWN).await?,
    })
}

/// `POST /admin/mail/retry`: give a failed message another round of attempts.
pub(crate) async fn retry_mail(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<RetryForm>,
) -> Result<HttpResponse, AppError> {
    let (level, message) = if mail::retry_failed(&state.db, &form.id).await? {
        (Level::Success, "The message will be sent again shortly.")
    } else {
        (
            Level::Info,
            "That message is no longer waiting for a retry.",
        )
    };
    flash::push(&req.get_session(), level, message);
    Ok(see_other("/admin/system#mail-heading"))
}

#[derive(serde::Deserialize)]
pub(crate) struct RetryForm {
    #[serde(default)]
    pub(crate) id: String,
}

/// `GET /admin/system`.
pub(crate) async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
    backups: web::Data<BackupMonitor>,
    mailer: web::Data<Mailer>,
) -> Result<HttpResponse, AppError> {
    let started = Instant::now();
    state.db.ping().await?;
    let ping_ms = format!("{:.1} ms", started.elapsed().as_secs_f64() * 1000.0);
    let server_version = state.db.server_version().await?;
    let collections = state.db.collection_counts().await?;
    render(&SystemPage {
        layout: Layout::admin(&req),
        store: state.db.store().to_string(),
        database: state.db.database().name().to_string(),
        server_version,
        ping_ms,
        collections,
        backups: backups.shared_status(&state.db).await,
        version: env!("CARGO_PKG_VERSION"),
        instance: crate::db::lease::this_instance(),
        uptime: readable_duration(crate::metrics::uptime()),
        data_size: data_size(&state.db).await,
        jobs: crate::metrics::job_statuses()
            .into_iter()
            .map(|(name, status)| JobRow {
                name,
                runs: status.runs,
                failures: status.failures,
                last_run: status.last_run.map(utc).unwrap_or_default(),
                last_took: format!("{:.0} ms", status.last_took.as_secs_f64() * 1000.0),
                last_error: status.last_error.unwrap_or_default(),
            })
            .collect(),
        problems: crate::telemetry::recent_problems()
            .into_iter()
            .take(20)
            .map(|p| ProblemRow {
                at: utc(p.at),
                level: p.level.to_string(),
                text: p.text,
            })
            .collect(),
        mail: mail_panel(&state.db, &mailer).await?,
    })
}

/// `POST /admin/seed`: add missing demo data, then back to the System page with a notice.
pub(crate) async fn seed_demo_data(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let report = demo::run(&state.db).await?;
    flash::push(&req.get_session(), Level::Success, report.summary());
    Ok(see_other("/admin/system"))
}
