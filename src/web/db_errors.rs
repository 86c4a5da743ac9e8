//! How database failures reach the visitor: unavailable, refusing writes and a text index not
//! built yet become 503 pages, anything else an internal error.

use crate::db::DbError;
use crate::web::errors::AppError;

/// What a visitor is told when a search finds its text index still being built.
pub const SEARCH_PREPARING: &str =
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
    /// A refused write is still a refused write when a handler wrapped it in context.
    fn from(e: anyhow::Error) -> Self {
        let refused = e.chain().any(|cause| {
            matches!(
                cause.downcast_ref::<DbError>(),
                Some(DbError::NotWritable(_))
            ) || cause
                .downcast_ref::<mongodb::error::Error>()
                .is_some_and(crate::db::refuses_writes)
        });
        let text_index_missing = e.chain().any(|cause| {
            matches!(
                cause.downcast_ref::<DbError>(),
                Some(DbError::TextIndexNotReady(_))
            ) || cause
                .downcast_ref::<mongodb::error::Error>()
                .is_some_and(crate::db::text_index_missing)
        });
        if refused {
            AppError::NotWritable(e)
        } else if text_index_missing {
            AppError::Busy(SEARCH_PREPARING)
        } else {
            AppError::Internal(e)
        }
    }
}
