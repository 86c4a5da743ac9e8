//! Removing the demo data that start-up (or `bazaar seed`) added: the demo and generated
//! products (SKUs `demo…`, `bulk…`) with their photos and comments, the demo pages, posts and
//! photos with theirs, and the demo categories left empty. What the shop added itself stays:
//! a demo product that was ordered or sits in a cart is archived rather than deleted (its orders
//! keep their history), and a demo category still holding other products or categories stays.

use bson::{doc, Document};
use futures::TryStreamExt;

use crate::catalog::lifecycle::{self, DeleteRefused, ProductStatus};
use crate::catalog::{categories, products, CatalogError};
use crate::content::store;
use crate::db::{Db, DbError};

/// The SKUs the demo and bulk seeds use.
fn demo_skus() -> Document {
    doc! { "sku": { "$regex": "^(demo|bulk)[0-9]+$" } }
}

/// What a removal would do (a preview) or did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DemoRemoval {
    pub(crate) products_deleted: u64,
    /// Ordered or in carts: archived instead.
    pub(crate) products_archived: u64,
    pub(crate) nodes_deleted: u64,
    pub(crate) categories_deleted: u64,
    /// Demo categories kept because something of the shop's own is filed under them.
    pub(crate) categories_kept: u64,
}

impl DemoRemoval {
    pub(crate) fn summary(&self) -> String {
        format!(
            "Demo data removed: {} products deleted, {} archived (ordered or in carts), {} pages \
             and posts deleted, {} categories deleted, {} kept (they hold your own products or \
             categories).",
            self.products_deleted,
            self.products_archived,
            self.nodes_deleted,
            self.categories_deleted,
            self.categories_kept
        )
    }
}

/// What [`remove`] would remove, counted without changing anything.
pub(crate) async fn preview(db: &Db) -> Result<DemoRemoval, DbError> {
    let products = products::collection(db)
        .count_documents(demo_skus())
        .await?;
    let mut nodes = 0;
    for (section, slug) in super::content::node_keys() {
        nodes += store::collection(db)
            .count_documents(doc! { "metadata.section": section, "metadata.slug": slug })
            .await?;
    }
    let mut categories_found = 0;
    for slug in super::catalog::category_slugs() {
        if categories::by_slug(db, &slug).await?.is_some() {
            categories_found += 1;
        }
    }
    Ok(DemoRemoval {
        products_deleted: products,
        products_archived: 0,
        nodes_deleted: nodes,
        categories_deleted: categories_found,
        categories_kept: 0,
    })
}

/// Remove the demo data. Each step is a complete write of its own: run again after a crash, it
/// finishes the job.
pub(crate) async fn remove(db: &Db) -> Result<DemoRemoval, DbError> {
    let mut report = DemoRemoval::default();
    let candidates: Vec<products::Product> = products::collection(db)
        .find(demo_skus())
        .await?
        .try_collect()
        .await?;
    for product in candidates {
        let orders = crate::checkout::orders::count_listing(db, &product.sku).await?;
        match lifecycle::delete_unordered(db, &product, orders).await {
            Ok(()) => report.products_deleted += 1,
            Err(DeleteRefused::Gone) => {}
            Err(DeleteRefused::Ordered(_) | DeleteRefused::InCarts(_)) => {
                db.durable::<Document>(products::COLLECTION)
                    .update_one(
                        doc! { "_id": product.id },
                        doc! { "$set": { "status": ProductStatus::Archived.as_str() } },
                    )
                    .await?;
                crate::catalog::changes::products_changed(db);
                report.products_archived += 1;
            }
            Err(DeleteRefused::Db(e)) => return Err(e),
        }
    }
    for (section, slug) in super::content::node_keys() {
        let Some(node) = store::collection(db)
            .find_one(doc! { "metadata.section": section, "metadata.slug": slug })
            .await?
        else {
            continue;
        };
        if store::delete(db, node.id).await?.is_none() {
            continue;
        }
        if let Some(file) = node.photo_file() {
            crate::media::delete_file(db, file).await?;
        }
        db.collection::<Document>(crate::comments::COLLECTION)
            .delete_many(doc! { "discussion_id": node.id })
            .await?;
        report.nodes_deleted += 1;
    }
    // Children before parents, so an emptied subtree goes entirely.
    for slug in super::catalog::category_slugs().into_iter().rev() {
        let Some(category) = categories::by_slug(db, &slug).await? else {
            continue;
        };
        match categories::delete(db, category.id).await {
            Ok(()) => report.categories_deleted += 1,
            Err(CatalogError::HasChildren(_) | CatalogError::HasProducts(_)) => {
                report.categories_kept += 1
            }
            Err(CatalogError::NotFound) => {}
            Err(CatalogError::Db(e)) => return Err(e),
            Err(other) => {
                return Err(DbError::Other(mongodb::error::Error::custom(
                    other.to_string(),
                )))
            }
        }
    }
    Ok(report)
}
