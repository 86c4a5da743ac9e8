//! How database failures reach the visitor: unavailable and refusing writes become 503 pages,
//! anything else an internal error.

use crate::db::DbError;
use crate::web::errors::AppError;

impl From<DbError> for AppError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Unavailable(_) => AppError::Unavailable(e.into()),
            DbError::NotWritable(_) => AppError::NotWritable(e.into()),
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
        if refused {
            AppError::NotWritable(e)
        } else {
            AppError::Internal(e)
        }
    }
}
