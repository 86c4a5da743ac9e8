//! A product's life in the shop: drafted, on sale (active), archived; deleting one that was
//! never ordered; and its photos' order and removal.
//!
//! Only active products are on the storefront: every shop query adds [`on_sale`]. Products
//! stored before statuses existed have no `status` field and count as active, so no migration
//! is needed. Orders copy title and price when they are placed, so an archived product's orders
//! keep their history.

use bson::oid::ObjectId;
use bson::{doc, Document};

use crate::catalog::model::Product;
pub use crate::catalog::model::{hidden, on_sale, on_sale_within, with_status, ProductStatus};
use crate::catalog::products;
use crate::db::{Db, DbError};

/// Why a product may not be deleted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeleteRefused {
    #[error("it appears on {0} orders; archive it instead, so those orders keep their history")]
    Ordered(u64),
    #[error("{0} units are held in shoppers' carts; archive it, or wait until the carts expire")]
    InCarts(i64),
    #[error("it was deleted already")]
    Gone,
    #[error(transparent)]
    Db(#[from] DbError),
}

/// Whether `product` may be deleted: never ordered, nothing reserved in carts. `orders` is how
/// many orders list its SKU (`checkout::orders::count_listing`: the orders are the checkout's,
/// which the catalog does not read).
pub(crate) fn check_deletable(product: &Product, orders: u64) -> Result<(), DeleteRefused> {
    if orders > 0 || product.sold > 0 {
        return Err(DeleteRefused::Ordered(orders.max(1)));
    }
    if product.reserved > 0 {
        return Err(DeleteRefused::InCarts(product.reserved));
    }
    Ok(())
}

/// Delete a product that was never ordered and has nothing in carts, then its comments and
/// photo files.
/// The delete itself re-checks that nothing was sold or reserved meanwhile. `orders` as for
/// [`check_deletable`].
pub(crate) async fn delete_unordered(
    db: &Db,
    product: &Product,
    orders: u64,
) -> Result<(), DeleteRefused> {
    check_deletable(product, orders)?;
    let result = db
        .durable::<Document>(products::COLLECTION)
        .delete_one(doc! {
            "_id": product.id,
            "sold": { "$in": [0, null] },
            "reserved": { "$in": [0, null] },
            // No move in flight either (one about to reserve a unit).
            "pending.0": { "$exists": false },
        })
        .await
        .map_err(DbError::from)?;
    if result.deleted_count == 1 {
        super::changes::products_changed(db);
    }
    if result.deleted_count == 0 {
        return match products::by_id(db, product.id).await? {
            None => Err(DeleteRefused::Gone),
            // Sold or reserved between the check and the delete: say which.
            Some(now) => Err(check_deletable(&now, orders)
                .err()
                .unwrap_or(DeleteRefused::InCarts(0))),
        };
    }
    // The product is gone first: a crash here leaves orphaned files (which the content
    // area's orphan clean-up removes), comments nobody can reach, or old addresses that lead
    // to "not found" anyway.
    crate::db::redirects::forget_target(db, product.id).await?;
    db.collection::<Document>(crate::comments::COLLECTION)
        .delete_many(doc! { "discussion_id": product.id })
        .await
        .map_err(DbError::from)?;
    for photo in &product.photos {
        delete_photo_file_if_unused(db, *photo).await?;
    }
    Ok(())
}

/// Delete an image file no product refers to any more.
async fn delete_photo_file_if_unused(db: &Db, file: ObjectId) -> Result<(), DbError> {
    let users = products::collection(db)
        .count_documents(doc! { "photos": file })
        .await?;
    if users == 0 {
        crate::media::delete_file(db, file).await?;
    }
    Ok(())
}

/// Take photo `file` off product `id` and delete the file if no product uses it. False when
/// the product does not have that photo.
pub(crate) async fn remove_photo(db: &Db, id: ObjectId, file: ObjectId) -> Result<bool, DbError> {
    let result = db
        .durable::<Document>(products::COLLECTION)
        .update_one(
            doc! { "_id": id, "photos": file },
            doc! { "$pull": { "photos": file }, "$set": { "updated": db.now() } },
        )
        .await?;
    if result.modified_count == 0 {
        return Ok(false);
    }
    super::changes::products_changed(db);
    delete_photo_file_if_unused(db, file).await?;
    Ok(true)
}

/// Which way a photo moves in the product's list (the first is the cover).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Move {
    Earlier,
    Later,
}

/// Move photo `file` one place earlier or later. The write only applies if the photo list is
/// still the one read, so two reorders at once cannot lose a photo. False when the photo is
/// not there, already at that end, or the list changed meanwhile.
pub(crate) async fn move_photo(
    db: &Db,
    id: ObjectId,
    file: ObjectId,
    direction: Move,
) -> Result<bool, DbError> {
    let Some(product) = products::by_id(db, id).await? else {
        return Ok(false);
    };
    let mut photos = product.photos.clone();
    let Some(at) = photos.iter().position(|p| *p == file) else {
        return Ok(false);
    };
    let to = match direction {
        Move::Earlier if at > 0 => at - 1,
        Move::Later if at + 1 < photos.len() => at + 1,
        _ => return Ok(false),
    };
    photos.swap(at, to);
    let result = db
        .durable::<Document>(products::COLLECTION)
        .update_one(
            doc! { "_id": id, "photos": &product.photos },
            doc! { "$set": { "photos": &photos, "updated": db.now() } },
        )
        .await?;
    if result.modified_count == 1 {
        super::changes::products_changed(db);
    }
    Ok(result.modified_count == 1)
}
