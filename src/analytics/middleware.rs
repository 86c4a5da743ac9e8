//! The middleware that counts page views: after the page is built it hands the path and the time
//! to the [`PageViewCounter`] (registered as app data when `analytics.enabled`), which queues it
//! without waiting. The checks are made on the finished response, so a page that is not counted
//! costs nothing more than them, and a counted one no allocation of its own. Only a successful (`200`) HTML answer to a `GET` of a public page counts: not
//! the admin area, static files, media, the health check, redirects or error pages.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::web;

use super::events::{clip, EventLog, Hit, MAX_HEADER_BYTES};
use super::PageViewCounter;
use crate::web::traffic::CommerceEvent;

/// Paths under these prefixes are never page views.
const NOT_PAGES: &[&str] = &["/admin", "/static", "/media", "/healthz"];
/// Longer paths are not counted (no page of the site has one; it keeps report ids small).
const MAX_PATH_BYTES: usize = 512;

pub(crate) async fn count_page_views(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = std::time::Instant::now();
    let response = next.call(req).await?;
    let request = response.request();
    let is_view = request.method() == Method::GET
        && response.status() == StatusCode::OK
        && is_html(&response);
    if is_view {
        if let Some(counter) = request.app_data::<web::Data<PageViewCounter>>() {
            if let Some(path) = page_path(request.match_info().as_str()) {
                counter.record(path, counter.now());
            }
        }
    }
    if let Some(log) = request.app_data::<web::Data<EventLog>>() {
        let event = response
            .response()
            .extensions()
            .get::<CommerceEvent>()
            .cloned();
        if is_view || event.is_some() {
            log_events(log, &response, is_view, event, started.elapsed());
        }
    }
    Ok(response)
}

/// Hand the page view (when `is_view`) and the tagged `event` to the traffic log.
fn log_events<B>(
    log: &EventLog,
    response: &ServiceResponse<B>,
    is_view: bool,
    event: Option<CommerceEvent>,
    took: std::time::Duration,
) {
    let request = response.request();
    let Some(path) = page_path(request.match_info().as_str()) else {
        return;
    };
    let header = |name: header::HeaderName| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| clip(v, MAX_HEADER_BYTES))
    };
    let query = request.query_string();
    let referrer = header(header::REFERER);
    let hit = Hit {
        at: log.now(),
        event,
        path: path.to_string(),
        // The pattern is a fresh string already: cut only when too long (never, in practice).
        template: request
            .match_pattern()
            .map(|p| {
                if p.len() <= MAX_PATH_BYTES {
                    p
                } else {
                    clip(&p, MAX_PATH_BYTES)
                }
            })
            .unwrap_or_else(|| path.to_string()),
        status: response.status().as_u16(),
        response_ms: u32::try_from(took.as_millis()).unwrap_or(u32::MAX),
        // The site's host only matters to tell a link within the site from a referrer.
        own_host: referrer.as_ref().and_then(|_| header(header::HOST)),
        referrer,
        query: (!query.is_empty()).then(|| clip(query, MAX_HEADER_BYTES)),
        client: crate::web::client::client_ip(request),
        user_agent: header(header::USER_AGENT).unwrap_or_default(),
    };
    // One hit for the page's view and its event; the writer stores the two events.
    if is_view {
        log.record_page(hit);
    } else {
        log.record(hit);
    }
}

fn is_html<B>(response: &ServiceResponse<B>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"))
}

/// The path a view is counted under, or `None` when the path is never a page view. `path` is
/// the request path as routing sees it (percent-decoded where that is unambiguous, without the
/// query string); a trailing slash is dropped so `/blog/` and `/blog` count as one page.
pub fn page_path(path: &str) -> Option<&str> {
    if !path.starts_with('/') || path.len() > MAX_PATH_BYTES {
        return None;
    }
    let owned_by = |prefix: &str| {
        path == prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    if NOT_PAGES.iter().any(|p| owned_by(p)) {
        return None;
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Some("/");
    }
    Some(page_of_comment(trimmed).unwrap_or(trimmed))
}

/// The page a comment's permalink belongs to: `/products/x/comments/abc` and
/// `/blog/x/comments/abc/def` are views of `/products/x` and `/blog/x` (a product or a post is
/// one page in the reports, however its comments are reached).
fn page_of_comment(path: &str) -> Option<&str> {
    let mut segments = path[1..].split('/');
    let (first, second, third) = (segments.next()?, segments.next()?, segments.next()?);
    (third == "comments" && !first.is_empty() && !second.is_empty())
        .then(|| &path[..1 + first.len() + 1 + second.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_pages_have_a_counted_path() {
        assert_eq!(page_path("/"), Some("/"));
        assert_eq!(page_path("/blog/"), Some("/blog"));
        assert_eq!(page_path("/products/x"), Some("/products/x"));
        assert_eq!(page_path("/administrator"), Some("/administrator"));
        for never in [
            "/admin",
            "/admin/",
            "/admin/orders",
            "/static/css/site.css",
            "/media/abc/thumb",
            "/healthz",
            "relative",
        ] {
            assert_eq!(page_path(never), None, "{never}");
        }
        assert_eq!(page_path(&format!("/{}", "x".repeat(600))), None);
    }

    #[test]
    fn a_comments_permalink_counts_as_its_page() {
        assert_eq!(page_path("/products/x/comments/abc"), Some("/products/x"));
        assert_eq!(page_path("/blog/x/comments/a/b/"), Some("/blog/x"));
        assert_eq!(page_path("/blog/x/comments"), Some("/blog/x"));
        // Not a page's comment: left as it is.
        assert_eq!(page_path("/comments/x/y"), Some("/comments/x/y"));
        assert_eq!(page_path("/blog/comments"), Some("/blog/comments"));
    }
}
