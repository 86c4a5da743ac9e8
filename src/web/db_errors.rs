//! How database failures reach the visitor: unavailable, refusing writes and a text index not
//! built yet become 503 pages, anything else an internal error.

use crate::db::DbError;
use crate::web::errors::AppError;

/// What a visitor is told when a search finds its text index still being built.
pub(crate) const SEARCH_PREPARING: &str =
    "Search is being prepared and will be ready in a few seconds. Please try again shortly.";

impl From<DbError> for AppError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Unavailable(_) => AppError::Unavailable(e.into()),
            DbError::NotWritable(_) => AppError::NotWritable(e.into()),
            DbError::TextIndexNotReady(_) => AppError::Busy(SEARCH_PREPARING),
            DbError::Other(_) | DbError::Invalid(_) => AppError::Internal(e.into()),
        }
    }
}

impl From<anyhow::Error> for AppError {
    /// A refused write is still a refused write, and a search without its text index still
    /// "being prepared", when a handler wrapped the error in context.
    fn from(e: anyhow::Error) -> Self {
        let refused = caused_by(
            &e,
            |db| matches!(db, DbError::NotWritable(_)),
            crate::db::refuses_writes,
        );
        let text_index_missing = caused_by(
            &e,
            |db| matches!(db, DbError::TextIndexNotReady(_)),
            crate::db::text_index_missing,
        );
        if refused {
            AppError::NotWritable(e)
        } else if text_index_missing {
            AppError::Busy(SEARCH_PREPARING)
        } else {
            AppError::Internal(e)
        }
    }
}

/// Whether a cause in `e`'s chain is a database error `db` accepts, or a driver error `driver`
/// accepts (a handler may have wrapped either in context).
fn caused_by(
    e: &anyhow::Error,
    db: impl Fn(&DbError) -> bool,
    driver: impl Fn(&mongodb::error::Error) -> bool,
) -> bool {
    e.chain().any(|cause| {
        cause.downcast_ref::<DbError>().is_some_and(&db)
            || cause
                .downcast_ref::<mongodb::error::Error>()
                .is_some_and(&driver)
    })
}
