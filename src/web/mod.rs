//! Middleware and cross-cutting web parts: sessions, CSRF, admin Basic auth, error pages,
//! security headers, flash messages, layout and static assets.

pub(crate) mod assets;
pub mod basic_auth;
pub(crate) mod body_timeout;
pub(crate) mod client;
pub(crate) mod conditional;
pub(crate) mod conflict;
pub mod csrf;
pub(crate) mod db_errors;
pub(crate) mod email;
pub(crate) mod error_page;
pub mod errors;
pub(crate) mod field_errors;
pub(crate) mod flash;
pub(crate) mod html;
pub mod layout;
pub(crate) mod links;
pub(crate) mod merge;
pub(crate) mod meta;
pub(crate) mod rate_limit;
pub(crate) mod rendered;
pub(crate) mod request_log;
pub(crate) mod security_headers;
pub(crate) mod session;
pub mod traffic;
pub mod xml;

use actix_web::http::header;
use actix_web::{guard, web, HttpResponse, Route};

/// A route for reading a page: GET, and HEAD (monitors and link checkers use it; the framework
/// drops the body).
pub(crate) fn read() -> Route {
    web::route().guard(guard::Any(guard::Get()).or(guard::Head()))
}

/// An ObjectId from a URL path (`/admin/products/{id}/edit`); anything else means there is no such
/// page, so it is a 404 rather than a bad request.
pub(crate) fn parse_object_id(id: &str) -> Result<bson::oid::ObjectId, errors::AppError> {
    bson::oid::ObjectId::parse_str(id).map_err(|_| errors::AppError::NotFound)
}

/// `303 See Other` to `location`: where a form POST sends the browser next (Post/Redirect/Get).
/// Redirects only ever go to a path on this site ([`links::local_path`]): a location built from
/// stored text that a browser would read as another site goes to the home page instead.
pub(crate) fn see_other(location: &str) -> HttpResponse {
    let location = links::local_path(location).unwrap_or_else(|| {
        tracing::warn!(location, "refused a redirect off the site");
        "/"
    });
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .finish()
}

/// `301 Moved Permanently` to `location`: an address that changed for good (a renamed slug), so
/// browsers and search engines learn the new one. Only to a path on this site, like
/// [`see_other`].
pub(crate) fn moved_permanently(location: &str) -> HttpResponse {
    let location = links::local_path(location).unwrap_or_else(|| {
        tracing::warn!(location, "refused a redirect off the site");
        "/"
    });
    HttpResponse::MovedPermanently()
        .insert_header((header::LOCATION, location))
        .finish()
}
