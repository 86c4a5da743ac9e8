//! Admin: removing the demo data, through a confirmation page saying what goes and what stays
//! (see [`crate::demo::removal`]).

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::demo::removal::{self, DemoRemoval};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

#[derive(Template)]
#[template(path = "admin/demo_data_remove.html")]
pub(crate) struct RemoveDemoDataPage {
    pub(crate) layout: Layout,
    pub(crate) found: DemoRemoval,
}

/// `GET /admin/demo-data/remove`
pub(crate) async fn confirm_remove(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let found = removal::preview(&state.db).await?;
    render(&RemoveDemoDataPage {
        layout: Layout::admin(&req),
        found,
    })
}

/// `POST /admin/demo-data/remove`
pub(crate) async fn remove(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let report = removal::remove(&state.db).await?;
    flash::push(&req.get_session(), Level::Success, report.summary());
    Ok(see_other("/admin/settings"))
}
