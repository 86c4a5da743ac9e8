//! `GET /tags/`: every tag a visitor can follow, with how many published posts and pages and
//! how many products on sale carry it, each linked to its tag page (`content::pages::tag`).
//!
//! Content and products keep their tags apart (`metadata.tags` on nodes, `tags` on products)
//! but share the tag pages, so the index counts both and merges them by tag. The counts come
//! from one ordinary aggregation per collection (`$match`, `$unwind`, `$group`), the same on
//! MongoDB and on the embedded store.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;

use crate::db::{Db, DbError};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};

/// One tag of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TagCount {
    pub(crate) tag: String,
    /// Published posts and pages carrying the tag.
    pub(crate) posts: u64,
    /// Products on sale carrying the tag.
    pub(crate) products: u64,
}

impl TagCount {
    /// Everything the tag page lists.
    pub(crate) fn total(&self) -> u64 {
        self.posts + self.products
    }

    pub(crate) fn url(&self) -> String {
        crate::content::model::tag_url(&self.tag)
    }

    /// "3 posts, 1 product": what the count is made of, for the link's description.
    pub(crate) fn breakdown(&self) -> String {
        let mut parts = Vec::new();
        if self.posts > 0 {
            parts.push(counted(self.posts, "post", "posts"));
        }
        if self.products > 0 {
            parts.push(counted(self.products, "product", "products"));
        }
        parts.join(", ")
    }
}

fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Every tag on a published node or a product on sale, ordered by name (ignoring case so
/// "Jazz" and "jazz" sit together).
pub(crate) async fn all(db: &Db) -> Result<Vec<TagCount>, DbError> {
    let posts = counts(
        db,
        crate::content::store::COLLECTION,
        crate::content::store::visible_at(db.now()),
        "metadata.tags",
    )
    .await?;
    let products = counts(
        db,
        crate::catalog::products::COLLECTION,
        crate::catalog::model::on_sale_within(Document::new()),
        "tags",
    )
    .await?;
    let mut merged: BTreeMap<String, TagCount> = BTreeMap::new();
    for (tag, n) in posts {
        merged
            .entry(tag.clone())
            .or_insert_with(|| empty(tag))
            .posts = n;
    }
    for (tag, n) in products {
        merged
            .entry(tag.clone())
            .or_insert_with(|| empty(tag))
            .products = n;
    }
    let mut tags: Vec<TagCount> = merged.into_values().collect();
    tags.sort_by(|a, b| {
        a.tag
            .to_lowercase()
            .cmp(&b.tag.to_lowercase())
            .then_with(|| a.tag.cmp(&b.tag))
    });
    Ok(tags)
}

fn empty(tag: String) -> TagCount {
    TagCount {
        tag,
        posts: 0,
        products: 0,
    }
}

/// How many documents of `collection` matching `filter` carry each value of the array
/// `field`: only the counts leave the store.
async fn counts(
    db: &Db,
    collection: &str,
    mut filter: Document,
    field: &str,
) -> Result<Vec<(String, u64)>, DbError> {
    // Only documents with at least one tag are unwound.
    filter.insert(format!("{field}.0"), doc! { "$exists": true });
    let pipeline = vec![
        doc! { "$match": filter },
        doc! { "$unwind": format!("${field}") },
        doc! { "$group": { "_id": format!("${field}"), "n": { "$sum": 1 } } },
    ];
    let rows: Vec<Document> = db
        .collection::<Document>(collection)
        .aggregate(pipeline)
        .await?
        .try_collect()
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let tag = match row.get("_id") {
                Some(Bson::String(tag)) if !tag.is_empty() => tag.clone(),
                _ => return None,
            };
            let n = match row.get("n") {
                Some(Bson::Int32(n)) => u64::try_from(*n).ok()?,
                Some(Bson::Int64(n)) => u64::try_from(*n).ok()?,
                _ => return None,
            };
            Some((tag, n))
        })
        .collect())
}

#[derive(Template)]
#[template(path = "content/tags.html")]
pub(crate) struct TagsPage {
    pub(crate) layout: Layout,
    pub(crate) tags: Vec<TagCount>,
}

/// `GET /tags/` (and `/tags`): the index of tags.
pub(crate) async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let tags = all(&state.db).await?;
    let mut layout = Layout::public(&req);
    layout.meta.title = "Tags".to_string();
    layout.meta.canonical = layout.meta.absolute("/tags/");
    render(&TagsPage { layout, tags })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_breakdown_names_only_what_the_tag_has() {
        let tag = |posts, products| TagCount {
            tag: "jazz".into(),
            posts,
            products,
        };
        assert_eq!(tag(1, 0).breakdown(), "1 post");
        assert_eq!(tag(2, 1).breakdown(), "2 posts, 1 product");
        assert_eq!(tag(0, 3).breakdown(), "3 products");
        assert_eq!(tag(2, 3).total(), 5);
    }
}
