//! Security headers on every response, error pages and static files included, and the caching
//! policy: `Cache-Control: no-store` on anything personal (see [`cache_control`]), a short
//! public lifetime only on pages that are the same for every visitor.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{HttpResponse, ResponseError};

use crate::web::error_page::error_page;

/// No inline scripts or styles anywhere: everything comes from /static. Frames only from the
/// two video hosts whose embeds video posts render (see `content::video`).
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; \
     frame-src https://www.youtube-nocookie.com https://player.vimeo.com; \
     frame-ancestors 'none'; base-uri 'self'; form-action 'self'";

const HEADERS: &[(HeaderName, &str)] = &[
    (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::REFERRER_POLICY, "strict-origin-when-cross-origin"),
    (header::X_FRAME_OPTIONS, "DENY"),
];

fn insert_headers(headers: &mut HeaderMap) {
    for (name, value) in HEADERS {
        headers.insert(name.clone(), HeaderValue::from_static(value));
    }
}

/// An error escaping the inner middleware (e.g. a session that cannot be written): the server
/// turns it into a response through this type, so even that reply is the 500 page with the
/// security headers, and its text stays in the log.
#[derive(Debug, thiserror::Error)]
#[error("a middleware failed")]
struct MiddlewareFailure;

impl ResponseError for MiddlewareFailure {
    fn status_code(&self) -> StatusCode {
        StatusCode::INTERNAL_SERVER_ERROR
    }

    fn error_response(&self) -> HttpResponse {
        let mut page = error_page(StatusCode::INTERNAL_SERVER_ERROR, None);
        insert_headers(page.headers_mut());
        page.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static(PRIVATE_CACHE_CONTROL),
        );
        page
    }
}

/// Sent when the site is served over HTTPS: browsers then refuse plain HTTP to it for a year,
/// so a network attacker cannot strip TLS from a later visit.
pub(crate) const STRICT_TRANSPORT_SECURITY: &str = "max-age=31536000";

/// App data: whether the site is served over HTTPS (`server.tls`), which adds HSTS.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TransportPolicy {
    pub(crate) tls: bool,
}

/// How long shared caches and browsers may keep a public page (one that is the same for every
/// visitor): short, so an edit shows within a minute, yet a burst of anonymous visitors to one
/// page costs the shop one render per cache.
pub(crate) const PUBLIC_PAGE_CACHE_CONTROL: &str = "public, max-age=60";
/// Anything personal: no cache may keep a copy, not even the browser's back-forward history.
pub(crate) const PRIVATE_CACHE_CONTROL: &str = "no-store";

/// Areas whose pages show one visitor's (or the admin's) data, whatever else is true.
fn is_personal_path(path: &str) -> bool {
    ["/admin", "/cart", "/checkout", "/orders"]
        .iter()
        .any(|area| crate::web::links::is_within(path, area))
}

/// What of the request decides how its response may be cached, taken before the request is
/// handed on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CacheContext {
    /// The path is in an area with personal data (`is_personal_path`).
    pub(crate) personal_path: bool,
    /// The request carries a session cookie: the page may show its cart count, flash messages
    /// and its CSRF token.
    pub(crate) has_session: bool,
    /// The request carries credentials (the admin's Basic auth).
    pub(crate) has_credentials: bool,
    /// GET or HEAD.
    pub(crate) is_read: bool,
}

impl CacheContext {
    pub(crate) fn of(req: &ServiceRequest) -> CacheContext {
        CacheContext {
            personal_path: is_personal_path(req.match_info().as_str())
                || is_personal_path(req.path()),
            has_session: req.cookie(crate::web::session::COOKIE_NAME).is_some(),
            has_credentials: req.headers().contains_key(header::AUTHORIZATION),
            is_read: matches!(
                *req.method(),
                actix_web::http::Method::GET | actix_web::http::Method::HEAD
            ),
        }
    }
}

/// The `Cache-Control` a response gets, or `None` to keep the one its handler set:
/// - `no-store` for personal areas (admin, cart, checkout, orders), for any response that sets
///   a cookie, answers a request with credentials, or answers a visitor with a session (its page
///   carries the session's CSRF token and cart count), and for anything but a successful read;
/// - the handler's own header otherwise, where it set one (media, static files, feeds);
/// - [`PUBLIC_PAGE_CACHE_CONTROL`] for the rest: a successful read of a public page by a visitor
///   without a session, which is then the same for everyone (with `Vary: Cookie`, so a cache
///   never hands it to a visitor who has one).
pub(crate) fn cache_control(
    context: CacheContext,
    status: StatusCode,
    headers: &HeaderMap,
) -> Option<&'static str> {
    let sets_cookie = headers.contains_key(header::SET_COOKIE);
    if context.personal_path || context.has_credentials || sets_cookie {
        return Some(PRIVATE_CACHE_CONTROL);
    }
    if headers.contains_key(header::CACHE_CONTROL) {
        return None;
    }
    if context.has_session || !context.is_read || !status.is_success() {
        return Some(PRIVATE_CACHE_CONTROL);
    }
    Some(PUBLIC_PAGE_CACHE_CONTROL)
}

fn apply_cache_control(context: CacheContext, status: StatusCode, headers: &mut HeaderMap) {
    if let Some(value) = cache_control(context, status, headers) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
        if value == PUBLIC_PAGE_CACHE_CONTROL {
            headers.append(header::VARY, HeaderValue::from_static("Cookie"));
        }
    }
}

/// Outermost middleware (inside request logging): adds the headers to every response.
pub(crate) async fn add_security_headers(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let tls = req
        .app_data::<actix_web::web::Data<TransportPolicy>>()
        .is_some_and(|p| p.tls);
    let context = CacheContext::of(&req);
    match next.call(req).await {
        Ok(mut res) => {
            insert_headers(res.headers_mut());
            let status = res.status();
            apply_cache_control(context, status, res.headers_mut());
            if tls {
                res.headers_mut().insert(
                    header::STRICT_TRANSPORT_SECURITY,
                    HeaderValue::from_static(STRICT_TRANSPORT_SECURITY),
                );
            }
            Ok(res)
        }
        Err(e) => {
            tracing::error!(error = %e, "a middleware failed");
            Err(MiddlewareFailure.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> CacheContext {
        CacheContext {
            personal_path: false,
            has_session: false,
            has_credentials: false,
            is_read: true,
        }
    }

    #[test]
    fn personal_areas_cookies_and_credentials_are_never_stored() {
        let empty = HeaderMap::new();
        let personal = CacheContext {
            personal_path: true,
            ..context()
        };
        assert_eq!(
            cache_control(personal, StatusCode::OK, &empty),
            Some("no-store")
        );
        let mut cookie = HeaderMap::new();
        cookie.insert(header::SET_COOKIE, HeaderValue::from_static("a=b"));
        cookie.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        );
        assert_eq!(
            cache_control(context(), StatusCode::OK, &cookie),
            Some("no-store")
        );
        let admin = CacheContext {
            has_credentials: true,
            ..context()
        };
        assert_eq!(
            cache_control(admin, StatusCode::OK, &empty),
            Some("no-store")
        );
    }

    #[test]
    fn only_a_successful_read_without_a_session_is_public() {
        let empty = HeaderMap::new();
        assert_eq!(
            cache_control(context(), StatusCode::OK, &empty),
            Some(PUBLIC_PAGE_CACHE_CONTROL)
        );
        let session = CacheContext {
            has_session: true,
            ..context()
        };
        assert_eq!(
            cache_control(session, StatusCode::OK, &empty),
            Some("no-store")
        );
        assert_eq!(
            cache_control(context(), StatusCode::NOT_FOUND, &empty),
            Some("no-store")
        );
        let post = CacheContext {
            is_read: false,
            ..context()
        };
        assert_eq!(
            cache_control(post, StatusCode::OK, &empty),
            Some("no-store")
        );
        // A handler's own policy (files, feeds) stands.
        let mut own = HeaderMap::new();
        own.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        );
        assert_eq!(cache_control(session, StatusCode::OK, &own), None);
    }
}
