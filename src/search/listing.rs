//! The product lists' search box (`/products?q=`, `/categories/{slug}?q=`): the same search
//! as `/search`, so every search box finds the same products. These handlers complete the
//! search's last word as the site search does ([`crate::search::expanded_query`]) and hand it
//! to the catalog's listing (`ListingQuery::text`), which narrows the list with that `$text`
//! query and keeps its other filters and sort. Without `q` they are the catalog's handlers.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};

use crate::catalog::pages;
use crate::search::{clean_query, expanded_query};
use crate::state::AppState;
use crate::web::errors::AppError;

/// The `$text` search for the list's `q`, if it has one.
async fn text_of(
    state: &AppState,
    params: &HashMap<String, String>,
) -> Result<Option<String>, AppError> {
    let query = clean_query(params.get("q").map(String::as_str).unwrap_or(""));
    if query.is_empty() {
        return Ok(None);
    }
    Ok(Some(expanded_query(&state.db, &query).await?))
}

/// `GET /products`
pub(crate) async fn products(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let text = text_of(&state, &params).await?;
    pages::list_searched(req, state, params, text).await
}

/// `GET /categories/{slug}`
pub(crate) async fn category(
    req: HttpRequest,
    state: web::Data<AppState>,
    slug: web::Path<String>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let text = text_of(&state, &params).await?;
    pages::category_searched(req, state, slug, params, text).await
}
