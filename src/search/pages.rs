//! `GET /search?q=&page=`: the results page behind the header's search box.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::search::{self, Hit, MAX_PAGES};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};

#[derive(Template)]
#[template(path = "search/results.html")]
pub struct SearchPage {
    pub layout: Layout,
    /// The search as used (cleaned); empty when nothing was asked.
    pub query: String,
    pub hits: Vec<Hit>,
    pub page: u64,
    pub has_next: bool,
}

impl SearchPage {
    pub fn page_url(&self, n: &u64) -> String {
        let qs = form_urlencoded::Serializer::new(String::new())
            .append_pair("q", &self.query)
            .append_pair("page", &n.to_string())
            .finish();
        format!("/search?{qs}")
    }

    pub fn prev_url(&self) -> String {
        self.page_url(&self.page.saturating_sub(1))
    }

    pub fn next_url(&self) -> String {
        self.page_url(&(self.page + 1))
    }

    /// The matched fields as "title, artist".
    pub fn matched(&self, hit: &Hit) -> String {
        hit.matched.join(", ")
    }
}

/// `GET /search`
pub async fn results(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let query = search::clean_query(params.get("q").map(String::as_str).unwrap_or(""));
    let page = match params.get("page").map(|p| p.trim().parse::<u64>()) {
        None => 1,
        Some(Ok(n)) if (1..=MAX_PAGES).contains(&n) => n,
        Some(_) => {
            return Err(AppError::BadRequest(format!(
                "The page number must be a whole number from 1 to {MAX_PAGES}."
            )))
        }
    };
    let (hits, has_next) = if query.is_empty() {
        (Vec::new(), false)
    } else {
        let results = search::search(&state.db, &query, page).await?;
        (results.hits, results.has_next)
    };
    render(&SearchPage {
        layout: Layout::public(&req),
        query,
        hits,
        page,
        has_next,
    })
}
