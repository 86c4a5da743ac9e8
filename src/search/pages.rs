//! `GET /search?q=&page=`: the results page behind the header's search box. A search is
//! counted against the client's allowance, answered from [`crate::search::cache`] when it was
//! asked within the last two seconds (or is being run for another visitor, whose answer it
//! waits for), and otherwise runs in one of a few slots
//! ([`crate::search::limits`]); an empty search costs nothing and is not counted.

use std::collections::HashMap;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::search::limits::SearchLimits;
use crate::search::{self, Hit, MAX_PAGES};
use crate::state::AppState;
use crate::web::error_page::error_page;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};
use crate::web::traffic::{self, CommerceEvent};

#[derive(Template)]
#[template(path = "search/results.html")]
pub(crate) struct SearchPage {
    pub(crate) layout: Layout,
    /// The search as used (cleaned); empty when nothing was asked.
    pub(crate) query: String,
    pub(crate) hits: Vec<Hit>,
    pub(crate) page: u64,
    pub(crate) has_next: bool,
    /// How many results the search found in all (counted up to a bound, see `more`).
    pub(crate) total: u64,
    /// More than `total` results were found (the count stopped at its bound).
    pub(crate) more: bool,
    /// "Did you mean" this search instead.
    pub(crate) suggestion: Option<String>,
}

impl SearchPage {
    pub(crate) fn page_url(&self, n: &u64) -> String {
        let qs = form_urlencoded::Serializer::new(String::new())
            .append_pair("q", &self.query)
            .append_pair("page", &n.to_string())
            .finish();
        format!("/search?{qs}")
    }

    /// The results of `suggestion` (the "did you mean" link).
    pub(crate) fn suggestion_url(&self, suggestion: &str) -> String {
        let qs = form_urlencoded::Serializer::new(String::new())
            .append_pair("q", suggestion)
            .finish();
        format!("/search?{qs}")
    }

    pub(crate) fn prev_url(&self) -> String {
        self.page_url(&self.page.saturating_sub(1))
    }

    pub(crate) fn next_url(&self) -> String {
        self.page_url(&(self.page + 1))
    }

    /// The matched fields as "title, artist".
    pub(crate) fn matched(&self, hit: &Hit) -> String {
        hit.matched.join(", ")
    }
}

/// What a visitor is told when every search slot stayed busy (a 503 with `Retry-After`).
pub(crate) const BUSY_MESSAGE: &str = "Search is busy, please try again in a moment.";

/// The 429 page for a client over its allowance, saying when to come back.
fn too_many_searches(limits: &SearchLimits) -> HttpResponse {
    let retry_after = limits.retry_after_secs();
    let message = format!(
        "You are searching faster than we allow ({} searches a minute). Please wait {} \
         seconds and try again.",
        limits.per_minute(),
        retry_after
    );
    let mut page = error_page(StatusCode::TOO_MANY_REQUESTS, Some(&message));
    page.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from(retry_after));
    page
}

/// `GET /search`
pub(crate) async fn results(
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
    let (hits, has_next, total, more, suggestion) = if query.is_empty() {
        (Vec::new(), false, 0, false, None)
    } else {
        // Registered by start-up next to the app state (the search area's own helper).
        let Some(limits) = req.app_data::<web::Data<SearchLimits>>() else {
            return Err(AppError::Internal(anyhow::anyhow!(
                "the search limits are not registered as app data"
            )));
        };
        if !limits.allow(crate::web::client::client_ip(&req)) {
            return Ok(too_many_searches(limits));
        }
        // A search kept in the cache costs a copy of one page and needs no slot; it still
        // counted against the client's allowance above, so that means the same either way.
        let results = match search::cache::cached(&state.db, &query, page) {
            Some(results) => results,
            None => {
                // The same search running for another visitor: its answer is kept for this one.
                let turn = search::cache::turn(&state.db, &query, page);
                let Ok(_turn) = tokio::time::timeout(limits.max_wait(), turn).await else {
                    return Err(AppError::Busy(BUSY_MESSAGE));
                };
                match search::cache::cached(&state.db, &query, page) {
                    Some(results) => results,
                    None => {
                        let Some(_slot) = limits.slot().await else {
                            return Err(AppError::Busy(BUSY_MESSAGE));
                        };
                        search::cache::search(&state.db, &query, page).await?
                    }
                }
            }
        };
        (
            results.hits.clone(),
            results.has_next,
            results.total,
            results.more,
            results.suggestion.clone(),
        )
    };
    // A search is logged once, from its first page, with the total the page shows (a query
    // with none is what the "searches with no results" report lists).
    let searched = (page == 1 && !query.is_empty()).then(|| CommerceEvent::Searched {
        query: query.chars().take(traffic::MAX_QUERY_CHARS).collect(),
        results: u32::try_from(total).unwrap_or(u32::MAX),
    });
    let response = render(&SearchPage {
        layout: Layout::public(&req),
        query,
        hits,
        page,
        has_next,
        total,
        more,
        suggestion,
    })?;
    Ok(match searched {
        Some(event) => traffic::tag(response, event),
        None => response,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(total: u64, more: bool) -> String {
        let req = actix_web::test::TestRequest::default().to_http_request();
        SearchPage {
            layout: Layout::public(&req),
            query: "jazz".into(),
            hits: vec![Hit {
                title: "A post".into(),
                url: "/blog/a-post".into(),
                label: "Blog entry".into(),
                excerpt: Vec::new(),
                product: None,
                matched: vec!["title"],
            }],
            page: 1,
            has_next: true,
            total,
            more,
            suggestion: None,
        }
        .render()
        .expect("the page renders")
    }

    #[test]
    fn a_count_that_stopped_at_its_bound_says_more_than() {
        let capped = page(search::MAX_COUNTED, true);
        assert!(
            capped.contains(r#"More than <span class="total">200</span> results"#),
            "{capped}"
        );
        let exact = page(1, false);
        assert!(exact.contains(r#"<span class="total">1</span> result for"#));
        assert!(!exact.contains("More than"));
    }
}
