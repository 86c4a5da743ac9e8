//! The storefront catalog: polymorphic products, the category hierarchy, the queries the shop
//! pages issue (each backed by an index) and the demo catalog.

pub mod admin_search;
pub mod anchors;
pub mod cache;
pub mod card;
pub mod categories;
pub mod changes;
pub mod facets;
pub mod lifecycle;
pub mod listing;
pub mod model;
pub(crate) mod pages;
pub mod product_cache;
pub(crate) mod product_view;
pub mod products;
pub mod seek;

/// Why a catalog change was refused, in words a form can show.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("that slug is already used")]
    SlugTaken,
    #[error("that SKU is already used")]
    SkuTaken,
    #[error("a category cannot be moved under itself or one of its descendants")]
    Cycle,
    #[error("no such category or product")]
    NotFound,
    #[error("the category still has {0} child categories")]
    HasChildren(u64),
    #[error("the category still has {0} products")]
    HasProducts(u64),
    /// An admin form was loaded before someone else changed what it edits; nothing was written.
    #[error("it was changed by someone else after the page was loaded")]
    Stale,
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
}

/// An identifier the code itself made (demo data) that breaks its rules: a bug, reported as an
/// internal error rather than a panic.
impl From<crate::domain::IdError> for CatalogError {
    fn from(e: crate::domain::IdError) -> Self {
        CatalogError::Db(crate::db::DbError::Invalid(e.to_string()))
    }
}

impl From<mongodb::error::Error> for CatalogError {
    fn from(e: mongodb::error::Error) -> Self {
        match duplicate_key_field(&e) {
            Some(DuplicateKey::Sku) => CatalogError::SkuTaken,
            Some(DuplicateKey::Slug) => CatalogError::SlugTaken,
            None => CatalogError::Db(e.into()),
        }
    }
}

enum DuplicateKey {
    Slug,
    Sku,
}

/// Which unique key a write collided on (server error 11000), from the index named in the
/// message; the driver reports the code in different shapes for single and bulk writes.
fn duplicate_key_field(e: &mongodb::error::Error) -> Option<DuplicateKey> {
    use mongodb::error::{ErrorKind, WriteFailure};
    let message = match e.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(w)) if w.code == 11000 => w.message.clone(),
        ErrorKind::Command(c) if c.code == 11000 => c.message.clone(),
        ErrorKind::InsertMany(m) => m
            .write_errors
            .as_ref()
            .and_then(|errors| errors.iter().find(|w| w.code == 11000))
            .map(|w| w.message.clone())?,
        _ => return None,
    };
    if message.contains("sku") {
        Some(DuplicateKey::Sku)
    } else {
        Some(DuplicateKey::Slug)
    }
}

/// The one slug rule of the shop and the content (`domain::slugify`: letters and digits of
/// every script, lowercased, NFC, dashes between), re-exported where the forms have always
/// found it.
pub(crate) use crate::domain::slugify;

/// The slug a form asks for: the one typed, NFC-normalised (a keyboard may send `é` as `e` and
/// a combining accent, which is the same slug), or when none is typed the one made from `name`.
/// Still to be parsed: a typed slug may break the rule.
pub(crate) fn typed_slug(typed: &str, name: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    match typed.trim() {
        "" => slugify(name),
        typed => typed.nfc().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_valid_slug(slug: &str) -> bool {
        crate::domain::Slug::parse(slug).is_ok()
    }

    #[test]
    fn slugify_keeps_letters_and_digits_and_collapses_the_rest() {
        assert_eq!(slugify("A Love Supreme (1965)!"), "a-love-supreme-1965");
        assert_eq!(slugify("  --Modal   Jazz-- "), "modal-jazz");
        assert!(is_valid_slug("modal-jazz"));
        assert!(is_valid_slug("café-society"));
        assert_eq!(typed_slug(" cafe\u{301} ", "ignored"), "café");
        assert_eq!(typed_slug("", "Café Society"), "café-society");
        assert!(!is_valid_slug("Modal Jazz"));
        assert!(!is_valid_slug(""));
    }
}
