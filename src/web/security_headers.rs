//! Security headers on every response, error pages and static files included.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{HttpResponse, ResponseError};

use crate::web::error_page::error_page;

/// No inline scripts or styles anywhere: everything comes from /static. Frames only from the
/// two video hosts whose embeds video posts render (see `content::video`).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
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
        page
    }
}

/// Sent when the site is served over HTTPS: browsers then refuse plain HTTP to it for a year,
/// so a network attacker cannot strip TLS from a later visit.
pub const STRICT_TRANSPORT_SECURITY: &str = "max-age=31536000";

/// App data: whether the site is served over HTTPS (`server.tls`), which adds HSTS.
#[derive(Debug, Clone, Copy, Default)]
pub struct TransportPolicy {
    pub tls: bool,
}

/// Outermost middleware (inside request logging): adds the headers to every response.
pub async fn add_security_headers(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let tls = req
        .app_data::<actix_web::web::Data<TransportPolicy>>()
        .is_some_and(|p| p.tls);
    match next.call(req).await {
        Ok(mut res) => {
            insert_headers(res.headers_mut());
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
