//! The CMS and tumblelog: content nodes of several types (`model`) in one collection (`store`), Markdown
//! rendering (`markdown`), video embeds (`video`), the public pages and tag pages (`pages`),
//! the index of tags (`tag_index`), blocks of text filled from the settings (`live_blocks`),
//! Atom feeds (`feed`), photo uploads into GridFS (`photos`) and the history of every node's
//! saves (`revisions`). Stream pages, a post itself with the first page of its comments, a
//! post's neighbour links, tag pages and feeds are served from a cache of at most two seconds
//! (`cache`), following the node writes reported in `changes` and the comment writes reported
//! in `comments::changes`; what those pages show of a cached value (a stream page's cards, a
//! tag page's lists, a post's article and metadata) is rendered once and kept inside it
//! (`web::rendered`).
//! The admin screens are in `crate::admin::content`.

pub mod cache;
pub(crate) mod changes;
pub(crate) mod excerpt;
pub(crate) mod feed;
pub mod library;
pub(crate) mod live_blocks;
pub(crate) mod markdown;
pub(crate) mod media_access;
pub mod model;
pub mod pages;
pub mod photos;
pub(crate) mod preview;
pub mod revisions;
pub mod store;
pub mod stream;
pub(crate) mod tag_index;
pub(crate) mod video;

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
        // The only unique key on `nodes` is the section and slug.
        if crate::db::is_duplicate_key(&e) {
            ContentError::SlugTaken
        } else {
            ContentError::Db(e.into())
        }
    }
}
