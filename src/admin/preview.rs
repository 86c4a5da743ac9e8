//! `GET /admin/content/{id}/preview`: a fresh preview link for a node (see `content::preview`),
//! by redirect, so the edit page's "Preview" button always opens a link valid for the full
//! period, which the editor can copy from the address bar and share.

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use bson::oid::ObjectId;

use crate::content::{preview, store};
use crate::state::AppState;
use crate::web::errors::AppError;

pub(crate) async fn open(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let id = ObjectId::parse_str(path.as_str()).map_err(|_| AppError::NotFound)?;
    if store::by_id(&state.db, id).await?.is_none() {
        return Err(AppError::NotFound);
    }
    let link = preview::link(&state.db, id).await?;
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, link))
        .finish())
}
