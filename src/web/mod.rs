//! Middleware and cross-cutting web parts: sessions, CSRF, admin Basic auth, error pages,
//! security headers, flash messages, layout and static assets.

pub mod assets;
pub mod basic_auth;
pub mod body_timeout;
pub mod client;
pub mod conditional;
pub mod conflict;
pub mod csrf;
pub mod db_errors;
pub mod email;
pub mod error_page;
pub mod errors;
pub mod field_errors;
pub mod flash;
pub mod html;
pub mod layout;
pub mod links;
pub mod merge;
pub mod meta;
pub mod rate_limit;
pub mod request_log;
pub mod security_headers;
pub mod session;
pub mod traffic;
pub mod xml;

use actix_web::http::header;
use actix_web::{guard, web, HttpResponse, Route};

/// A route for reading a page: GET, and HEAD (monitors and link checkers use it; the framework
/// drops the body).
pub fn read() -> Route {
    web::route().guard(guard::Any(guard::Get()).or(guard::Head()))
}

/// An ObjectId from a URL path (`/admin/products/{id}/edit`); anything else means there is no such
/// page, so it is a 404 rather than a bad request.
pub fn parse_object_id(id: &str) -> Result<bson::oid::ObjectId, errors::AppError> {
    bson::oid::ObjectId::parse_str(id).map_err(|_| errors::AppError::NotFound)
}

/// `303 See Other` to `location`: where a form POST sends the browser next (Post/Redirect/Get).
/// Redirects only ever go to a path on this site ([`links::local_path`]): a location built from
/// stored text that a browser would read as another site goes to the home page instead.
pub fn see_other(location: &str) -> HttpResponse {
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
pub fn moved_permanently(location: &str) -> HttpResponse {
    let location = links::local_path(location).unwrap_or_else(|| {
        tracing::warn!(location, "refused a redirect off the site");
        "/"
    });
    HttpResponse::MovedPermanently()
        .insert_header((header::LOCATION, location))
        .finish()
}
