//! [`AppError`] rendered as a friendly page inside the site layout, and the middleware hooks
//! that give the framework's own error responses the same pages. Internal details go to the log,
//! never to the page.

use actix_web::body::{BoxBody, EitherBody};
use actix_web::dev::ServiceResponse;
use actix_web::http::StatusCode;
use actix_web::middleware::ErrorHandlerResponse;
use actix_web::{HttpResponse, ResponseError};
use askama::Template;

use crate::web::errors::{AppError, DbUnreachable, Rendered, NOT_WRITABLE_MESSAGE};
use crate::web::layout::{html_response, Layout};

/// What an error page says, kept on its response: the page is built where no request is at
/// hand (a handler's error), so [`render_bare_errors`] renders it again with the visitor's own
/// layout (their cart count in the header).
#[derive(Clone)]
struct ErrorPageInfo {
    status: StatusCode,
    message: String,
}

impl ResponseError for AppError {
    fn status_code(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound => StatusCode::NOT_FOUND,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::Unavailable(_) | AppError::NotWritable(_) | AppError::Busy(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let message = match self {
            AppError::BadRequest(m) | AppError::Conflict(m) => Some(m.as_str()),
            AppError::Forbidden(m) => Some(*m),
            AppError::NotFound => None,
            AppError::Unavailable(e) => {
                tracing::warn!(error = format!("{e:#}"), "database unavailable");
                let mut page = error_page(self.status_code(), None);
                page.extensions_mut().insert(DbUnreachable);
                return page;
            }
            AppError::NotWritable(e) => {
                tracing::warn!(error = format!("{e:#}"), "database refuses writes");
                Some(NOT_WRITABLE_MESSAGE)
            }
            AppError::Internal(e) => {
                tracing::error!(error = format!("{e:#}"), "internal error");
                None
            }
            AppError::Busy(m) => {
                let mut page = error_page(self.status_code(), Some(m));
                page.headers_mut().insert(
                    actix_web::http::header::RETRY_AFTER,
                    actix_web::http::header::HeaderValue::from_static("1"),
                );
                return page;
            }
        };
        error_page(self.status_code(), message)
    }
}

#[derive(Template)]
#[template(path = "errors/error.html")]
struct ErrorPage<'a> {
    layout: Layout,
    status: u16,
    title: &'a str,
    message: &'a str,
}

/// Title and default explanation for a status.
fn wording(status: StatusCode) -> (&'static str, &'static str) {
    match status.as_u16() {
        400 => (
            "Bad request",
            "The request could not be understood. Check the address or the form and try again.",
        ),
        401 => (
            "Sign-in required",
            "This area is for the shop's administrators. Sign in with the admin user name and password.",
        ),
        403 => ("Forbidden", "You are not allowed to do that."),
        404 => (
            "Page not found",
            "There is nothing at this address. It may have moved, or the link may be mistyped.",
        ),
        405 => (
            "Method not allowed",
            "This address does not accept that kind of request.",
        ),
        409 => (
            "Conflict",
            "Someone else changed this while you were working on it.",
        ),
        413 => ("Too large", "What you sent is larger than this site accepts."),
        408 => (
            "Request timed out",
            "The request took too long to arrive. Check your connection and try again.",
        ),
        429 => (
            "Too many requests",
            "Too many requests came from your network. Wait a little and try again.",
        ),
        503 => (
            "Temporarily unavailable",
            "The site cannot reach its database right now. Please try again in a moment.",
        ),
        s if s >= 500 => (
            "Something went wrong",
            "An unexpected error occurred on our side. It has been logged; please try again later.",
        ),
        _ => ("Request not handled", "The request could not be handled."),
    }
}

/// The error page for `status` in the site layout; `message` replaces the default explanation
/// and must be fit for the public.
pub(crate) fn error_page(status: StatusCode, message: Option<&str>) -> HttpResponse {
    error_page_in(Layout::bare(), status, message)
}

fn error_page_in(layout: Layout, status: StatusCode, message: Option<&str>) -> HttpResponse {
    let (title, default_message) = wording(status);
    let message = message.unwrap_or(default_message);
    let page = ErrorPage {
        layout,
        status: status.as_u16(),
        title,
        message,
    };
    let html = page.render().unwrap_or_else(|e| {
        tracing::error!(error = %e, "rendering the error page failed");
        format!("<!doctype html><title>{title}</title><h1>{title}</h1>")
    });
    let mut response = html_response(status, html);
    response.extensions_mut().insert(ErrorPageInfo {
        status,
        message: message.to_string(),
    });
    response
}

/// Error-handler middleware hook: responses with an error status that no handler turned into a
/// page (the framework's own 405, payload errors, ...) get the page for their status.
pub(crate) fn render_bare_errors<B>(
    res: ServiceResponse<B>,
) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let info = res.response().extensions().get::<ErrorPageInfo>().cloned();
    if let Some(info) = info {
        // A handler's error page, built without the request: again, in the visitor's layout.
        let (req, original) = res.into_parts();
        let layout = layout_for(&req, info.status);
        let mut page = error_page_in(layout, info.status, Some(&info.message));
        for (name, value) in original.headers() {
            if !page.headers().contains_key(name) {
                page.headers_mut().insert(name.clone(), value.clone());
            }
        }
        if original.extensions().contains::<DbUnreachable>() {
            page.extensions_mut().insert(DbUnreachable);
        }
        let page: HttpResponse<EitherBody<B, BoxBody>> = page.map_into_right_body();
        return Ok(ErrorHandlerResponse::Response(ServiceResponse::new(
            req, page,
        )));
    }
    if res.response().extensions().contains::<Rendered>() {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let (req, original) = res.into_parts();
    let mut page = error_page_in(layout_for(&req, original.status()), original.status(), None);
    // Keep protocol headers the status relies on (Allow for 405, WWW-Authenticate for 401).
    for (name, value) in original.headers() {
        if name == actix_web::http::header::ALLOW
            || name == actix_web::http::header::WWW_AUTHENTICATE
        {
            page.headers_mut().insert(name.clone(), value.clone());
        }
    }
    let page: HttpResponse<EitherBody<B, BoxBody>> = page.map_into_right_body();
    Ok(ErrorHandlerResponse::Response(ServiceResponse::new(
        req, page,
    )))
}

/// `/admin` and everything under it.
fn is_admin_path(path: &str) -> bool {
    path == "/admin" || path.starts_with("/admin/")
}

/// The layout of an error page: in the admin (past its sign-in: 401 and 429 answer people not
/// signed in) the admin's own, with its navigation and a link back; elsewhere the visitor's.
fn layout_for(req: &actix_web::HttpRequest, status: StatusCode) -> Layout {
    let in_admin = is_admin_path(req.path())
        && status != StatusCode::UNAUTHORIZED
        && status != StatusCode::TOO_MANY_REQUESTS;
    if in_admin {
        Layout::admin_error(req)
    } else {
        Layout::error(req)
    }
}

/// Extractor configuration errors (bad form, query or path) become 400 pages, not the
/// framework's plain-text replies.
pub(crate) fn bad_request_page(err: impl std::fmt::Display) -> actix_web::Error {
    tracing::info!(error = %err, "rejected a malformed request");
    AppError::BadRequest(
        "The request could not be understood. Check the address or the form and try again."
            .to_string(),
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn page_text(response: HttpResponse) -> String {
        let bytes = actix_web::body::to_bytes(response.into_body())
            .await
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[tokio::test]
    async fn a_conflict_shows_its_message_in_the_layout() {
        let response =
            AppError::Conflict("Someone else saved this page first.".into()).error_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        let text = page_text(response).await;
        assert!(text.contains("<h1>Conflict</h1>"), "{text}");
        assert!(
            text.contains("Someone else saved this page first."),
            "{text}"
        );
        assert!(text.contains("class=\"site-footer\""), "{text}");
    }

    #[tokio::test]
    async fn an_internal_error_page_never_shows_the_error_text() {
        let response = AppError::Internal(anyhow::anyhow!("connection string mongodb://u:p@db"))
            .error_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let text = page_text(response).await;
        assert!(text.contains("<h1>Something went wrong</h1>"), "{text}");
        assert!(!text.contains("mongodb://"), "{text}");
    }

    #[tokio::test]
    async fn user_supplied_text_in_a_message_is_escaped() {
        let response = AppError::BadRequest("<script>alert(1)</script>".into()).error_response();
        let text = page_text(response).await;
        assert!(!text.contains("<script>alert(1)"), "{text}");
        assert!(
            text.contains("&#60;script&#62;") || text.contains("&lt;script&gt;"),
            "{text}"
        );
    }
}
