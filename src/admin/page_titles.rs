//! The titles of the site's pages, so the traffic reports name a page ("Kind of Blue") rather
//! than only its path (`/products/kind-of-blue`). Products and content are looked up by slug
//! in one query per collection (per content section); fixed pages have fixed names. A path with
//! no known title (a page since deleted, a mistyped address) is shown as its path.

use std::collections::HashMap;

use bson::{doc, Document};
use futures::TryStreamExt;

use crate::content::model::SECTIONS;
use crate::db::{Db, DbError};

/// The title of each of `paths` that has one.
pub(crate) async fn of_paths<'a>(
    db: &Db,
    paths: impl IntoIterator<Item = &'a str>,
) -> Result<HashMap<String, String>, DbError> {
    let mut titles = HashMap::new();
    let mut product_slugs: Vec<&str> = Vec::new();
    let mut node_slugs: HashMap<&'static str, Vec<&str>> = HashMap::new();
    for path in paths {
        if let Some(fixed) = fixed_title(path) {
            titles.insert(path.to_string(), fixed);
            continue;
        }
        let mut parts = path.trim_start_matches('/').splitn(2, '/');
        let (Some(first), Some(slug)) = (parts.next(), parts.next()) else {
            continue;
        };
        if slug.is_empty() || slug.contains('/') {
            continue;
        }
        if first == "products" {
            product_slugs.push(slug);
        } else if let Some(section) = SECTIONS.iter().find(|s| s.name == first) {
            node_slugs.entry(section.name).or_default().push(slug);
        }
    }
    if !product_slugs.is_empty() {
        let found: Vec<Document> = db
            .collection::<Document>(crate::catalog::products::COLLECTION)
            .find(doc! { "slug": { "$in": &product_slugs } })
            .projection(doc! { "_id": 0, "slug": 1, "title": 1 })
            .await?
            .try_collect()
            .await?;
        for d in found {
            if let (Ok(slug), Ok(title)) = (d.get_str("slug"), d.get_str("title")) {
                titles.insert(format!("/products/{slug}"), title.to_string());
            }
        }
    }
    for (section, slugs) in node_slugs {
        let found: Vec<Document> = db
            .collection::<Document>(crate::content::store::COLLECTION)
            .find(doc! { "metadata.section": section, "metadata.slug": { "$in": &slugs } })
            .projection(doc! { "_id": 0, "metadata.slug": 1, "metadata.title": 1 })
            .await?
            .try_collect()
            .await?;
        for d in found {
            let Ok(meta) = d.get_document("metadata") else {
                continue;
            };
            if let (Ok(slug), Ok(title)) = (meta.get_str("slug"), meta.get_str("title")) {
                titles.insert(format!("/{section}/{slug}"), title.to_string());
            }
        }
    }
    Ok(titles)
}

/// The pages whose name does not depend on the data.
fn fixed_title(path: &str) -> Option<String> {
    let fixed = match path {
        "/" => "Home",
        "/products" => "Shop",
        "/categories" => "Categories",
        "/cart" => "Cart",
        "/checkout" => "Checkout",
        "/search" => "Search",
        "/tags" => "Tags",
        _ => {
            let name = path.strip_prefix('/')?;
            return SECTIONS
                .iter()
                .find(|s| s.name == name)
                .map(|s| s.title.to_string());
        }
    };
    Some(fixed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_pages_and_sections_have_their_names() {
        assert_eq!(fixed_title("/").as_deref(), Some("Home"));
        assert_eq!(fixed_title("/blog").as_deref(), Some("Blog"));
        assert_eq!(fixed_title("/products/x"), None);
    }
}
