//! The CMS and tumblelog: content nodes of several types in one collection (`model`), Markdown
//! rendering (`markdown`), video embeds (`video`), the public pages and tag pages (`pages`),
//! Atom feeds (`feed`), photo uploads into GridFS (`photos`) and the demo content (`demo`).
//! The admin screens are in `crate::admin::content`.

pub mod demo;
pub mod feed;
pub mod markdown;
pub mod model;
pub mod pages;
pub mod photos;
pub mod video;

/// Why a content change was refused, in words a form can show.
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    #[error("that slug is already used in this section")]
    SlugTaken,
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
}

impl From<mongodb::error::Error> for ContentError {
    fn from(e: mongodb::error::Error) -> Self {
        if is_duplicate_key(&e) {
            ContentError::SlugTaken
        } else {
            ContentError::Db(e.into())
        }
    }
}

/// True for a unique-index violation (server error 11000); the only unique key on `nodes` is
/// the section and slug.
fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    match e.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code == 11000,
        ErrorKind::Command(c) => c.code == 11000,
        _ => false,
    }
}
