//! One error type for handlers. This module is a leaf: it imports nothing else of the app, so
//! every area may use it. Each area converts its own errors into it where its handlers live (for
//! example `From<CartError>` in `cart::pages`), database errors are converted in
//! [`super::db_errors`], and [`super::error_page`] renders it as a friendly page inside the site
//! layout (internal details go to the log, never to the page).

/// Whether a request body ended with the error [`super::body_timeout`] gives a body past its
/// deadline (an I/O error of kind `TimedOut`). It lives here, below every middleware, so the
/// readers of bodies (`super::csrf`) need not depend on the middleware that renders pages.
pub(crate) fn is_body_timeout(error: &actix_web::error::PayloadError) -> bool {
    matches!(error, actix_web::error::PayloadError::Io(e) if e.kind() == std::io::ErrorKind::TimedOut)
}

/// Marks a response whose body is already a finished page, so [`super::error_page::render_bare_errors`] leaves it.
#[derive(Clone, Copy)]
pub(crate) struct Rendered;

/// Marks an error page given because the database could not be reached, so the outage breaker
/// (`crate::db::outage`, consulted by `crate::state::with_site_settings`) learns of it.
#[derive(Clone, Copy)]
pub(crate) struct DbUnreachable;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The message is shown to the user: write it for them.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The message is shown to the user.
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    #[error("not found")]
    NotFound,
    /// The message is shown to the user.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database cannot be reached.
    #[error("database unavailable")]
    Unavailable(#[source] anyhow::Error),
    /// The database answers but cannot store changes (its disk is full or failing).
    #[error("database refuses writes")]
    NotWritable(#[source] anyhow::Error),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
    /// Something is being prepared in the background and will be there in a moment: a 503
    /// with `Retry-After` and this message (shown to the user).
    #[error("busy: {0}")]
    Busy(&'static str),
}

/// What a visitor is told when the database refuses writes.
pub(crate) const NOT_WRITABLE_MESSAGE: &str =
    "The shop cannot take changes right now. Please try again in a little while.";
