//! The home page.

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::db::site::{self, SiteSettings};
use crate::startup::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};

#[derive(Template)]
#[template(path = "home/index.html")]
pub struct HomePage {
    pub layout: Layout,
    pub site: SiteSettings,
}

pub async fn index(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, AppError> {
    let site = site::load(&state.db).await?;
    render(&HomePage {
        layout: Layout::public(&req),
        site,
    })
}

/// The default service: anything no route matched.
pub async fn not_found() -> Result<HttpResponse, AppError> {
    Err(AppError::NotFound)
}
