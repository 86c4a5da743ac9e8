//! The state every request handler shares: the database, settings the handlers read, and the
//! long-lived helpers every area needs (the site settings cache). Built once in
//! [`crate::startup`].
//!
//! `state` sits below the areas (see docs/architecture.md): it holds only types of `db`,
//! `config` and `web`, so every area's handlers may take it. A helper only one area uses (the
//! payment gateway, the comment, new-cart and order-lookup rate limits) is registered as app
//! data of its own by `startup`, and that area's handlers take it as a parameter
//! (`web::Data<NewCartLimit>`), so the dependency shows in their signatures.

use std::sync::Arc;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, StatusCode};
use actix_web::middleware::Next;
use actix_web::web;

use crate::config::{CartSettings, CommentSettings};
use crate::db::outage::{Admission, Outage};
use crate::db::site::{self, SiteSettings};
use crate::db::Db;
use crate::web::errors::DbUnreachable;

/// Shared by every handler. Each HTTP worker may hold its own copy with its own [`Db`] handle
/// (see `startup::WorkerStores`); the limiters and the settings cache are shared by all.
#[derive(Clone)]
pub struct AppState {
    pub(crate) db: Db,
    pub(crate) db_timeout_ms: u64,
    pub(crate) admin_user: String,
    /// `media.max_upload_mb`, in bytes.
    pub(crate) max_upload_bytes: usize,
    /// `media.max_image_megapixels`, in pixels.
    pub(crate) max_image_pixels: u64,
    /// Cart expiry and cleanup timeouts (admin can run the jobs by hand).
    pub(crate) cart: CartSettings,
    /// The site's absolute address without a trailing slash (`server.public_url`, else the
    /// bound address): feeds need absolute links.
    pub(crate) public_url: String,
    /// Comment length and page size.
    pub(crate) comments: CommentSettings,
    /// `content.revisions_kept`: how many earlier versions of a node its saves keep.
    pub(crate) revisions_kept: usize,
    /// The site settings (name, currency, shipping rates) as last read, for every worker.
    pub(crate) site: Arc<site::SettingsCache>,
}

/// Middleware: run the request with the site settings (through [`AppState::site`]) as its
/// [`site::current`] settings, and keep a database outage to one timeout per page (see
/// [`crate::db::outage`]): while the database is known to be unreachable, requests other than
/// the periodic probe get the 503 page at once; static assets never need it and always pass.
pub(crate) async fn with_site_settings(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        let settings = Arc::new(SiteSettings::default());
        return Ok(site::scope(settings, next.call(req))
            .await?
            .map_into_left_body());
    };
    if req.path().starts_with("/static/") {
        let settings = state.site.get(&state.db).await.0;
        return Ok(site::scope(settings, next.call(req))
            .await?
            .map_into_left_body());
    }
    let outage = state.db.extension::<Outage>();
    let admission = outage.admit();
    if admission == Admission::Refuse {
        return Ok(req.into_response(unavailable_page()).map_into_right_body());
    }
    let (settings, unreachable) = state.site.get(&state.db).await;
    if unreachable {
        outage.failed();
        return Ok(req.into_response(unavailable_page()).map_into_right_body());
    }
    let response = site::scope(settings, next.call(req)).await?;
    if response.response().extensions().contains::<DbUnreachable>() {
        outage.failed();
    } else if admission == Admission::Probe {
        outage.recovered();
    }
    Ok(response.map_into_left_body())
}

/// The 503 page without asking the database anything (and without logging each one: the
/// breaker logs the outage once).
fn unavailable_page() -> actix_web::HttpResponse {
    let mut page = crate::web::error_page::error_page(StatusCode::SERVICE_UNAVAILABLE, None);
    page.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    page.extensions_mut().insert(DbUnreachable);
    page
}
