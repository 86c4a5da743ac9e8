//! The admin dashboard: what the database holds right now, and re-running the demo seed.

use std::time::Instant;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::admin::comments::{newest_with_links, ModeratedComment};
use crate::backup::schedule::{BackupMonitor, BackupStatus};
use crate::db::CollectionCount;
use crate::seed;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

/// Comments listed on the dashboard.
const RECENT_COMMENTS: i64 = 5;

#[derive(Template)]
#[template(path = "admin/dashboard.html")]
pub struct DashboardPage {
    pub layout: Layout,
    pub store: String,
    pub database: String,
    pub server_version: String,
    pub ping_ms: String,
    pub collections: Vec<CollectionCount>,
    pub admin_user: String,
    /// The newest comments across the site, linked to where they are.
    pub recent_comments: Vec<ModeratedComment>,
    /// Scheduled backups: the last one, or why there is none (`admin/_backups.html`).
    pub backups: BackupStatus,
}

pub async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
    backups: web::Data<BackupMonitor>,
) -> Result<HttpResponse, AppError> {
    let started = Instant::now();
    state.db.ping().await?;
    let ping_ms = format!("{:.1} ms", started.elapsed().as_secs_f64() * 1000.0);
    let server_version = state.db.server_version().await?;
    let collections = state.db.collection_counts().await?;
    let recent_comments = newest_with_links(&state.db, None, None, RECENT_COMMENTS).await?;
    render(&DashboardPage {
        layout: Layout::admin(&req),
        store: state.db.store().to_string(),
        database: state.db.database().name().to_string(),
        server_version,
        ping_ms,
        collections,
        admin_user: state.admin_user.clone(),
        recent_comments,
        backups: backups.status(),
    })
}

/// `POST /admin/seed`: add missing demo data, then back to the dashboard with a notice.
pub async fn seed_demo_data(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let report = seed::run(&state.db).await?;
    flash::push(&req.get_session(), Level::Success, report.summary());
    Ok(see_other("/admin"))
}
