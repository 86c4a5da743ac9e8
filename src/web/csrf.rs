//! CSRF protection: a per-session random token that every state-changing request must present.
//!
//! Why a middleware rather than an extractor: the check runs for *every* POST/PUT/PATCH/DELETE
//! (any method but GET, HEAD and OPTIONS) before routing, so a handler added later is protected
//! without doing anything, and a route cannot opt out by forgetting an argument. It fails
//! closed: no session token, no presented token, or a mismatch → 403 page.
//!
//! Where the token is looked for, in order:
//! 1. the `X-CSRF-Token` header (scripts);
//! 2. the `csrf_token` query parameter (multipart upload forms put it in their `action`, so the
//!    upload body can stream to storage instead of being buffered here);
//! 3. the `csrf_token` field of an `application/x-www-form-urlencoded` body, which is buffered
//!    (up to [`MAX_FORM_BYTES`]) and handed back to the handler unchanged.

use actix_session::{Session, SessionExt};
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method};
use actix_web::middleware::Next;
use actix_web::web::{Bytes, BytesMut};
use actix_web::HttpMessage;
use futures::StreamExt;
use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::web::errors::AppError;

/// Paths whose POST is authorised by an HMAC signature in the path, not by a session: the
/// one-click unsubscribe links in emails (RFC 8058), which mail providers POST without cookies.
/// The handler refuses a wrong signature with 404, so no other request gets through here.
pub(crate) const SIGNED_LINK_PREFIX: &str = "/comments/unsubscribe/";

/// Name of the hidden form field (and query parameter).
pub(crate) const FIELD: &str = "csrf_token";
pub(crate) const HEADER: &str = "x-csrf-token";
const SESSION_KEY: &str = "csrf_token";
/// The largest plain form: one holding the longest text a field accepts
/// ([`crate::config::MAX_TEXT_CHARS`]) in the worst encoding. Anything larger is refused
/// before it is buffered. The form extractor's limit (`startup`) is this same value.
pub const MAX_FORM_BYTES: usize = crate::config::max_form_bytes(crate::config::MAX_TEXT_CHARS);

/// The session's token, created on first use: 32 bytes from the thread's generator, a
/// cryptographically secure one seeded (and reseeded) from the operating system, so a new
/// visitor's first page with a form costs no system call for it.
pub(crate) fn token(session: &Session) -> String {
    if let Ok(Some(existing)) = session.get::<String>(SESSION_KEY) {
        return existing;
    }
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    let token = hex::encode(bytes);
    if let Err(e) = session.insert(SESSION_KEY, &token) {
        // The form will then be refused with a 403; log why.
        tracing::warn!(error = %e, "could not store the CSRF token in the session");
    }
    token
}

/// Forget the session's token: the next form gets a new one. Signing in and out do this with
/// the session's renewal, so a token seen before cannot be used after.
pub(crate) fn rotate(session: &Session) {
    session.remove(SESSION_KEY);
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Middleware: refuse unsafe requests that do not carry this session's token.
pub(crate) async fn verify(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    if is_safe(req.method()) || req.path().starts_with(SIGNED_LINK_PREFIX) {
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    }
    let expected = req.get_session().get::<String>(SESSION_KEY).ok().flatten();
    let presented = match presented_token(&mut req).await {
        Ok(token) => token,
        Err(rejection) => return Ok(req.error_response(rejection)),
    };
    let valid = match (&expected, &presented) {
        (Some(expected), Some(presented)) => {
            bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
        }
        _ => false,
    };
    if !valid {
        tracing::info!(
            had_session_token = expected.is_some(),
            presented_token = presented.is_some(),
            "refused a request without a valid CSRF token"
        );
        return Ok(req.error_response(AppError::Forbidden(
            "This form has expired or did not come from this site. Go back, reload the page and \
             try again.",
        )));
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_boxed_body)
}

async fn presented_token(req: &mut ServiceRequest) -> Result<Option<String>, AppError> {
    if let Some(value) = req.headers().get(HEADER).and_then(|v| v.to_str().ok()) {
        return Ok(Some(value.to_string()));
    }
    if let Some(value) = form_field(req.query_string().as_bytes()) {
        return Ok(Some(value));
    }
    let is_form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !is_form {
        return Ok(None);
    }
    let body = read_body(req).await?;
    let token = form_field(&body);
    // Hand the body back so the handler's `web::Form` extractor still sees it.
    req.set_payload(Payload::from(body));
    Ok(token)
}

async fn read_body(req: &mut ServiceRequest) -> Result<Bytes, AppError> {
    let too_large = || AppError::BadRequest("The form is too large.".to_string());
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_FORM_BYTES) {
        return Err(too_large());
    }
    let mut payload = req.take_payload();
    let mut body = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| {
            tracing::info!(error = %e, "reading a form body failed");
            if crate::web::errors::is_body_timeout(&e) {
                AppError::BadRequest("The form took too long to arrive. Please try again.".into())
            } else {
                AppError::BadRequest("The form could not be read.".to_string())
            }
        })?;
        if body.len() + chunk.len() > MAX_FORM_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

fn form_field(encoded: &[u8]) -> Option<String> {
    form_urlencoded::parse(encoded)
        .find(|(name, _)| name == FIELD)
        .map(|(_, value)| value.into_owned())
}
