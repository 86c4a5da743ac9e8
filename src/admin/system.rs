//! Admin → System: what the shop runs on (the store, the database, its collections and sizes)
//! scheduled backups' status and the demo-data actions; kept apart from the dashboard, which is about the business.

use std::time::Instant;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::backup::schedule::{BackupMonitor, BackupStatus};
use crate::db::CollectionCount;
use crate::seed;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

#[derive(Template)]
#[template(path = "admin/system.html")]
pub struct SystemPage {
    pub layout: Layout,
    /// The kind of store and where its data lives.
    pub store: String,
    pub database: String,
    pub server_version: String,
    pub ping_ms: String,
    pub collections: Vec<CollectionCount>,
    /// Scheduled backups: the last one, or why there is none (`admin/_backups.html`).
    pub backups: BackupStatus,
}

/// `GET /admin/system`.
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
    render(&SystemPage {
        layout: Layout::admin(&req),
        store: state.db.store().to_string(),
        database: state.db.database().name().to_string(),
        server_version,
        ping_ms,
        collections,
        backups: backups.shared_status(&state.db).await,
    })
}

/// `POST /admin/seed`: add missing demo data, then back to the System page with a notice.
pub async fn seed_demo_data(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let report = seed::run(&state.db).await?;
    flash::push(&req.get_session(), Level::Success, report.summary());
    Ok(see_other("/admin/system"))
}
