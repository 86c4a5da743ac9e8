//! The admin's product search (Admin → Products): the list's filters (type, category with its
//! subcategories, status, stock level) and its search box, which matches any part of the title
//! or SKU and, when nothing does, falls back to the site search's full-text index (people,
//! genres, descriptions) under the same filters.
//!
//! The catalog decides which queries run, in which order; the admin's change list pages and
//! sorts each one (see `admin::product_list`).

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};

use crate::catalog::lifecycle::{self, ProductStatus};
use crate::catalog::listing::contains_ignoring_case;
use crate::catalog::products::LOW_STOCK;

/// The stock-level filter's choices: sold out, low (at most [`LOW_STOCK`], sold out
/// included, as the stock screen flags them), plenty.
pub(crate) const STOCK_LEVELS: &[(&str, &str)] = &[
    ("out", "Sold out"),
    ("low", "Low (3 or fewer)"),
    ("in", "More than 3"),
];

/// The `qty` condition of a stock-level filter value.
pub(crate) fn stock_condition(level: &str) -> Option<Document> {
    match level {
        "out" => Some(doc! { "$lte": 0 }),
        "low" => Some(doc! { "$lte": LOW_STOCK }),
        "in" => Some(doc! { "$gt": LOW_STOCK }),
        _ => None,
    }
}

/// What the admin asked for: each filter as chosen in the list (unknown values are ignored,
/// as the list shows them unselected), and the search box's text.
#[derive(Debug, Clone, Default)]
pub struct AdminProductSearch<'a> {
    /// A product type (`album`, `book`, `film`).
    pub kind: Option<&'a str>,
    /// A category id (hex); the category and everything below it.
    pub category: Option<&'a str>,
    /// A [`ProductStatus`] name.
    pub status: Option<&'a str>,
    /// A [`STOCK_LEVELS`] value.
    pub stock: Option<&'a str>,
    /// The search box, trimmed; empty for none.
    pub search: &'a str,
}

/// One query of the search: its filter, and whether it is the full-text fallback (the page
/// says so above the results).
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub filter: Document,
    pub(crate) full_text: bool,
}

impl AdminProductSearch<'_> {
    /// The filters alone, without the search.
    pub(crate) fn narrowed(&self) -> Document {
        let mut filter = Document::new();
        if let Some(kind) = self.kind {
            filter.insert("type", kind);
        }
        if let Some(id) = self.category.and_then(|c| ObjectId::parse_str(c).ok()) {
            filter.insert("category_path", id);
        }
        if let Some(status) = self.status.and_then(ProductStatus::parse) {
            filter.extend(lifecycle::with_status(status));
        }
        if let Some(qty) = self.stock.and_then(stock_condition) {
            filter.insert("qty", qty);
        }
        filter
    }

    /// The filters with "the title or the SKU contains the search" (case-insensitive).
    pub(crate) fn title_or_sku(&self) -> Document {
        let mut filter = self.narrowed();
        if !self.search.is_empty() {
            let pattern = contains_ignoring_case(self.search);
            filter.insert(
                "$or",
                vec![
                    Bson::Document(doc! { "search_title": pattern.clone() }),
                    Bson::Document(doc! { "sku": pattern }),
                ],
            );
        }
        filter
    }

    /// The filters with the site search's full-text match (the products' text index).
    pub(crate) fn full_text(&self) -> Document {
        let mut filter = self.narrowed();
        filter.extend(crate::db::text_filter(self.search));
        filter
    }

    /// The queries to run in order, stopping at the first that finds anything: the title or
    /// SKU match, then, with a search, the full-text match. When none finds anything, the
    /// last one's (empty) result is the answer.
    pub fn attempts(&self) -> Vec<Attempt> {
        let mut attempts = vec![Attempt {
            filter: self.title_or_sku(),
            full_text: false,
        }];
        if !self.search.is_empty() {
            attempts.push(Attempt {
                filter: self.full_text(),
                full_text: true,
            });
        }
        attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_search_only_the_filters_run_once() {
        let search = AdminProductSearch {
            kind: Some("album"),
            stock: Some("low"),
            category: Some("not-an-id"),
            ..Default::default()
        };
        assert_eq!(
            search.attempts(),
            vec![Attempt {
                filter: doc! { "type": "album", "qty": { "$lte": LOW_STOCK } },
                full_text: false,
            }]
        );
    }

    #[test]
    fn a_search_tries_title_or_sku_then_full_text_under_the_same_filters() {
        let search = AdminProductSearch {
            kind: Some("book"),
            search: "le guin",
            ..Default::default()
        };
        let attempts = search.attempts();
        assert_eq!(attempts.len(), 2);
        assert!(!attempts[0].full_text && attempts[1].full_text);
        assert_eq!(attempts[0].filter.get_str("type"), Ok("book"));
        assert!(attempts[0].filter.contains_key("$or"));
        assert_eq!(
            attempts[1].filter,
            doc! { "type": "book", "$text": { "$search": "le guin" } }
        );
    }
}
