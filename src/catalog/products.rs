//! The `products` collection: one document per product whatever its type, common fields first,
//! the type's own fields in `details`, and the stock counters on the same document.

use bson::oid::ObjectId;
use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;
use serde::Deserialize;

pub use crate::catalog::model::{
    cover_url_of, is_low_stock, search_key, url_of, AlbumDetails, BookDetails, Carted, Details,
    Dimensions, FilmDetails, NewProduct, Pricing, Product, ProductStatus, ProductType, Shipping,
    COLLECTION, LOW_STOCK, MAX_LINE_QTY,
};
use crate::catalog::CatalogError;
use crate::db::{redirects, Db, DbError};
use crate::domain::{CartId, EditVersion, Money, Sku, Slug};

/// The indexes behind every product query the shop issues (listed in `docs/data-model.md`).
pub(crate) fn indexes() -> Vec<IndexModel> {
    let unique = || IndexOptions::builder().unique(true).build();
    let plain = |keys: Document| IndexModel::builder().keys(keys).build();
    vec![
        IndexModel::builder()
            .keys(doc! { "slug": 1 })
            .options(unique())
            .build(),
        IndexModel::builder()
            .keys(doc! { "sku": 1 })
            .options(unique())
            .build(),
        // Genre and people filters use the normalised keys' indexes (`facets::indexes`).
        // A type filter on the newest-first listing: the type's products already in the
        // listing's order (`_id` last), so a page reads twelve keys rather than sorting them all.
        plain(doc! { "type": 1, "details.issue_date": -1, "_id": -1 }),
        // Listing sorts end in `_id` so pages never overlap; these indexes serve them whole
        // (and, by their leading field, price ranges, minimum discounts and title prefixes).
        // The newest-first one (the default listing's) ends in `status`: the store tests the
        // storefront's on-sale condition on its keys, so a page skips and returns products
        // without reading the hidden ones, and a page anchor walk reads keys alone.
        plain(doc! { "details.issue_date": -1, "_id": -1, "status": 1 }),
        plain(doc! { "pricing.pct_savings": -1, "_id": -1 }),
        plain(doc! { "pricing.retail": 1, "_id": 1 }),
        plain(doc! { "search_title": 1, "_id": 1 }),
        // A category's listing, newest first; `status` last, as above (the store tells a key's
        // category from its element, and the status from the product's one value).
        plain(category_order_index()),
        plain(doc! { "categories": 1 }),
        plain(doc! { "featured": 1, "details.issue_date": -1 }),
        // Stock levels; `_id` after it serves the admin lists' tie-broken stock sort.
        plain(doc! { "qty": 1, "_id": 1 }),
        // The storefront's whole-catalog count subtracts the hidden (draft, archived) ones.
        plain(doc! { "status": 1 }),
        // Tag pages list the products carrying a tag.
        plain(doc! { "tags": 1 }),
        // Orphaned-file clean-up asks whether a file is still a product photo.
        plain(doc! { "photos": 1 }),
        // Stock moves a crash left half-done, by age (`stock::recover_pending`); the list holds
        // only the moves in flight, so few entries.
        plain(doc! { "pending.at": 1 }),
        // Products still keeping reservations in a `carted` array, which every start-up looks
        // for (`stock::has_carted`): sparse, so it holds only those (none once migrated), and
        // the look-up reads no product (a scan of a million products took half a second).
        IndexModel::builder()
            .keys(doc! { "carted": 1 })
            .options(IndexOptions::builder().sparse(true).build())
            .build(),
    ]
}

/// A category's listing newest first: the keys of its index (see [`indexes`]), which a read of
/// a deep page by skipping names as its hint (`catalog::anchors::skip_index`).
pub(crate) fn category_order_index() -> Document {
    doc! { "category_path": 1, "details.issue_date": -1, "_id": -1, "status": 1 }
}

/// The name of the sparse index over `carted` (see [`indexes`]), which the start-up's look-up
/// for reservations kept in products names as its hint: a store does not choose a sparse index
/// by itself.
pub(crate) const CARTED_INDEX: &str = "carted_1";

/// Indexes earlier versions created and no query uses any more, dropped at start-up (see
/// `startup::indexes`): every index costs memory, every write and, on the embedded store, start-up
/// time. The exact-case `type, details.<genre or people>, details.issue_date` indexes were
/// replaced by the normalised `genre_keys` and `people_keys` ones when the filters became
/// case-insensitive.
pub const RETIRED_INDEXES: &[&str] = &[
    "type_1_details.genre_1_details.issue_date_-1",
    "type_1_details.actor_1_details.issue_date_-1",
    "type_1_details.artist_1_details.issue_date_-1",
    "type_1_details.author_1_details.issue_date_-1",
    // Reservations moved to their own collection (`crate::stock`).
    "carted.cart_id_1",
    "carted.timestamp_1",
    // The newest-first sort index and the categories' one, now ending in `status`.
    "details.issue_date_-1__id_-1",
    "category_path_1_details.issue_date_-1__id_-1",
];

pub fn collection(db: &Db) -> mongodb::Collection<Product> {
    db.collection(COLLECTION)
}

/// Products carrying `tag`, by title, as grid cards.
pub(crate) async fn with_tag(
    db: &Db,
    tag: &str,
    limit: i64,
) -> Result<Vec<crate::catalog::card::ProductCard>, DbError> {
    use crate::catalog::card::ProductCard;
    use futures::TryStreamExt;
    Ok(collection(db)
        .clone_with_type::<ProductCard>()
        .find(crate::catalog::model::on_sale_within(doc! { "tags": tag }))
        .sort(doc! { "search_title": 1 })
        .projection(ProductCard::projection())
        .limit(limit)
        .await?
        .try_collect()
        .await?)
}

/// Replace a product's tags (the admin form's comma-separated list, already normalised).
pub async fn set_tags(db: &Db, id: ObjectId, tags: &[String]) -> Result<(), DbError> {
    durable(db)
        .update_one(doc! { "_id": id }, doc! { "$set": { "tags": tags } })
        .await?;
    super::changes::products_changed(db);
    Ok(())
}

/// For admin saves (create, edit, stock received, photos), which the admin is shown as done.
fn durable(db: &Db) -> mongodb::Collection<Product> {
    db.durable(COLLECTION)
}

pub async fn by_slug(db: &Db, slug: &Slug) -> Result<Option<Product>, DbError> {
    Ok(collection(db).find_one(doc! { "slug": slug }).await?)
}

/// The address now of the product on sale that was renamed away from `slug`, if one was.
pub(crate) async fn moved_to(db: &Db, slug: &str) -> Result<Option<String>, DbError> {
    let Some(target) = redirects::target(db, redirects::PRODUCTS, slug).await? else {
        return Ok(None);
    };
    Ok(by_id(db, target)
        .await?
        .filter(Product::is_on_sale)
        .map(|p| p.url()))
}

pub async fn by_sku(db: &Db, sku: &Sku) -> Result<Option<Product>, DbError> {
    Ok(collection(db).find_one(doc! { "sku": sku }).await?)
}

/// What changing a cart needs of a product: its counters, never who holds its units (the
/// `reservations` collection).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ForCart {
    pub(crate) sku: Sku,
    pub(crate) slug: Slug,
    pub(crate) title: String,
    #[serde(default)]
    pub(crate) status: ProductStatus,
    /// Units on sale.
    pub(crate) qty: i64,
    pub(crate) pricing: Pricing,
    pub(crate) shipping: Shipping,
    /// Units held in carts (the line-share limit counts them as the product's stock).
    #[serde(default)]
    pub(crate) reserved: i64,
}

impl ForCart {
    /// See [`Product::is_on_sale`].
    pub(crate) fn is_on_sale(&self) -> bool {
        self.status == ProductStatus::Active
    }

    pub(crate) fn url(&self) -> String {
        url_of(self.slug.as_str())
    }
}

impl From<&Product> for ForCart {
    fn from(p: &Product) -> ForCart {
        ForCart {
            sku: p.sku.clone(),
            slug: p.slug.clone(),
            title: p.title.clone(),
            status: p.status,
            qty: p.qty,
            pricing: p.pricing,
            shipping: p.shipping.clone(),
            reserved: p.reserved,
        }
    }
}

/// The fields [`ForCart`] reads.
fn for_cart_fields() -> Document {
    doc! {
        "_id": 0, "sku": 1, "slug": 1, "title": 1, "status": 1, "qty": 1, "pricing": 1,
        "shipping": 1, "reserved": 1,
    }
}

/// The product `sku` as adding it to a cart needs it, by the `sku` index.
pub(crate) async fn for_cart(db: &Db, sku: &Sku) -> Result<Option<ForCart>, DbError> {
    Ok(db
        .collection::<ForCart>(COLLECTION)
        .find_one(doc! { "sku": sku })
        .projection(for_cart_fields())
        .await?)
}

/// The collection holding who the units a product counts as `reserved` are held for, one
/// document per holder and product. Only `crate::stock` writes it; it is named here so that the
/// product page, below the stock ledger, can read one cart's share.
pub(crate) const RESERVATIONS: &str = "reservations";

/// Units `cart_id` holds reserved of `sku` (by the unique `sku, cart_id` index).
pub(crate) async fn held_by_cart(db: &Db, sku: &Sku, cart_id: &CartId) -> Result<i64, DbError> {
    Ok(db
        .collection::<Document>(RESERVATIONS)
        .find_one(doc! { "sku": sku, "cart_id": cart_id.as_str() })
        .projection(doc! { "_id": 0, "qty": 1 })
        .await?
        .and_then(|d| d.get_i64("qty").ok())
        .unwrap_or(0))
}

/// The products with any of `skus`, by SKU, in one query on the `sku` index.
pub(crate) async fn by_skus(
    db: &Db,
    skus: &[&Sku],
) -> Result<std::collections::HashMap<Sku, Product>, DbError> {
    use futures::TryStreamExt;
    let found: Vec<Product> = collection(db)
        .find(doc! { "sku": { "$in": skus } })
        .await?
        .try_collect()
        .await?;
    Ok(found.into_iter().map(|p| (p.sku.clone(), p)).collect())
}

pub(crate) async fn by_id(db: &Db, id: ObjectId) -> Result<Option<Product>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": id }).await?)
}

/// What the cart page needs to know of a product now: units available, the current price and
/// its cover for the thumbnail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SaleState {
    pub(crate) qty: i64,
    pub(crate) retail: Money,
    /// The first photo, if the product has one.
    pub(crate) cover: Option<ObjectId>,
}

/// [`SaleState`] of each of `skus` that exists, in one query on the `sku` index.
pub(crate) async fn sale_states(
    db: &Db,
    skus: &[&Sku],
) -> Result<std::collections::HashMap<Sku, SaleState>, DbError> {
    use futures::TryStreamExt;
    #[derive(Deserialize)]
    struct Row {
        sku: Sku,
        qty: i64,
        pricing: RetailOnly,
        #[serde(default)]
        photos: Vec<ObjectId>,
    }
    #[derive(Deserialize)]
    struct RetailOnly {
        retail: Money,
    }
    let rows: Vec<Row> = db
        .collection::<Row>(COLLECTION)
        .find(doc! { "sku": { "$in": skus } })
        .projection(doc! { "_id": 0, "sku": 1, "qty": 1, "pricing.retail": 1, "photos": 1 })
        .await?
        .try_collect()
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let state = SaleState {
                qty: r.qty,
                retail: r.pricing.retail,
                cover: r.photos.first().copied(),
            };
            (r.sku, state)
        })
        .collect())
}

/// Insert a new product; a duplicate slug or SKU is reported as such.
pub async fn create(db: &Db, new: NewProduct) -> Result<Product, CatalogError> {
    create_as(db, new, ProductStatus::Active).await
}

/// Insert a new product with `status` (e.g. a draft not yet on the storefront).
pub async fn create_as(
    db: &Db,
    new: NewProduct,
    status: ProductStatus,
) -> Result<Product, CatalogError> {
    let path = crate::catalog::categories::category_path_for(db, &new.categories).await?;
    let mut product = new.into_product(path, db.now())?;
    product.status = status;
    durable(db).insert_one(&product).await?;
    super::changes::products_changed(db);
    redirects::forget(db, redirects::PRODUCTS, product.slug.as_str()).await?;
    Ok(product)
}

/// What a versioned save of the product form came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Saved {
    /// Stored; the product now carries this version.
    Saved(EditVersion),
    /// Someone saved the product after the form was loaded: nothing was written.
    Stale,
}

/// Replace the editable fields of a product (and its tags) if it still carries
/// `expected_version`, the version the form was loaded with (`None`: the product had none
/// then, so it must still have none). Stock counters, reservations, photos and the lifecycle
/// status are not written, and a stale form writes nothing at all.
pub async fn update(
    db: &Db,
    id: ObjectId,
    expected_version: Option<EditVersion>,
    edit: NewProduct,
    tags: &[String],
) -> Result<Saved, CatalogError> {
    update_with_status(db, id, expected_version, edit, tags, None, None).await
}

/// [`update`], also setting the lifecycle `status` when given (the admin form's Status), and
/// recording who saved (`updated_by`, shown on the next conflict page) when known.
pub(crate) async fn update_with_status(
    db: &Db,
    id: ObjectId,
    expected_version: Option<EditVersion>,
    edit: NewProduct,
    tags: &[String],
    status: Option<ProductStatus>,
    by: Option<&str>,
) -> Result<Saved, CatalogError> {
    let path = crate::catalog::categories::category_path_for(db, &edit.categories).await?;
    let details = edit
        .details
        .to_document()
        .map_err(|e| CatalogError::Db(DbError::Other(e.into())))?;
    let pricing = bson::to_bson(&Pricing::new(edit.list_price, edit.retail_price))
        .map_err(|e| CatalogError::Db(DbError::Other(e.into())))?;
    let shipping =
        bson::to_bson(&edit.shipping).map_err(|e| CatalogError::Db(DbError::Other(e.into())))?;
    let filter = match expected_version {
        Some(v) => doc! { "_id": id, "edit_version": v },
        None => doc! { "_id": id, "edit_version": { "$exists": false } },
    };
    let genre_keys = crate::catalog::model::keys(edit.details.genres());
    let people_keys = crate::catalog::model::keys(&edit.details.people());
    // A new slug keeps the old address working (`db::redirects`): the slug the save replaces
    // is recorded first, read under the same version check the update makes, so a crash
    // between the two loses no redirect (a record naming the product at the address it still
    // holds is shadowed by the product itself).
    let renamed_from = db
        .collection::<Document>(COLLECTION)
        .find_one(filter.clone())
        .projection(doc! { "_id": 0, "slug": 1 })
        .await?
        .and_then(|d| d.get_str("slug").ok().map(str::to_string))
        .filter(|old| old != edit.slug.as_str());
    if let Some(old) = &renamed_from {
        redirects::remember(db, redirects::PRODUCTS, old, id).await?;
    }
    let new_slug = edit.slug.clone();
    let version = EditVersion::new();
    let mut set = doc! {
                "sku": &edit.sku, "slug": &edit.slug, "type": edit.details.product_type().as_str(),
                "title": &edit.title, "search_title": search_key(&edit.title),
                "description": &edit.description, "pricing": pricing, "shipping": shipping,
                "categories": &edit.categories, "category_path": path, "details": details,
                "genre_keys": genre_keys, "people_keys": people_keys,
                "featured": edit.featured, "tags": tags, "updated": db.now(),
                "edit_version": version,
    };
    if let Some(status) = status {
        set.insert("status", status.as_str());
    }
    if let Some(by) = by {
        set.insert("updated_by", by);
    }
    let result = db
        .durable::<Document>(COLLECTION)
        .update_one(filter, doc! { "$set": set })
        .await?;
    if result.matched_count == 1 {
        super::changes::products_changed(db);
        if renamed_from.is_some() {
            redirects::forget(db, redirects::PRODUCTS, new_slug.as_str()).await?;
        }
        return Ok(Saved::Saved(version));
    }
    if by_id(db, id).await?.is_none() {
        return Err(CatalogError::NotFound);
    }
    Ok(Saved::Stale)
}

/// Attach an uploaded photo to a product.
pub async fn add_photo(db: &Db, id: ObjectId, file_id: ObjectId) -> Result<bool, DbError> {
    let result = durable(db)
        .update_one(
            doc! { "_id": id },
            doc! { "$push": { "photos": file_id }, "$set": { "updated": db.now() } },
        )
        .await?;
    super::changes::products_changed(db);
    Ok(result.matched_count == 1)
}

/// Give `id` its first photo, `file_id`: false (and nothing changed) when it has a photo
/// already, e.g. one another instance's demo seeding gave it a moment earlier.
pub(crate) async fn add_first_photo(
    db: &Db,
    id: ObjectId,
    file_id: ObjectId,
) -> Result<bool, DbError> {
    let result = durable(db)
        .update_one(
            doc! { "_id": id, "photos": { "$size": 0 } },
            doc! { "$push": { "photos": file_id }, "$set": { "updated": db.now() } },
        )
        .await?;
    if result.modified_count == 1 {
        super::changes::products_changed(db);
    }
    Ok(result.modified_count == 1)
}

/// One product's stock position: the fields the admin stock screen reads, nothing more.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct StockLevel {
    pub(crate) sku: String,
    pub(crate) title: String,
    /// On sale right now.
    pub(crate) qty: i64,
    /// Held in carts.
    #[serde(default)]
    pub(crate) reserved: i64,
    #[serde(default)]
    pub(crate) sold: i64,
}

impl StockLevel {
    /// Units held in shoppers' carts.
    pub(crate) fn reserved(&self) -> i64 {
        self.reserved
    }

    /// Everything ever received: `qty + reserved + sold` (the stock ledger's invariant, see
    /// `crate::stock`).
    pub(crate) fn received(&self) -> i64 {
        self.qty + self.reserved() + self.sold
    }

    pub(crate) fn is_low(&self) -> bool {
        is_low_stock(self.qty)
    }
}

/// Filter and sort of [`stock_levels`]: fewest available first, served by the `qty` index
/// (which also bounds the low-stock filter).
pub fn stock_levels_query(low_only: bool) -> (Document, Document) {
    let filter = if low_only {
        doc! { "qty": { "$lte": LOW_STOCK } }
    } else {
        doc! {}
    };
    (filter, doc! { "qty": 1 })
}

/// What [`stock_levels`] loads of each product: no `details`, no prices.
pub fn stock_levels_projection() -> Document {
    doc! { "_id": 0, "sku": 1, "title": 1, "qty": 1, "reserved": 1, "sold": 1 }
}

/// Every product's stock (or only the low ones), fewest available first.
pub(crate) async fn stock_levels(db: &Db, low_only: bool) -> Result<Vec<StockLevel>, DbError> {
    use futures::TryStreamExt;
    let (filter, sort) = stock_levels_query(low_only);
    Ok(db
        .collection::<StockLevel>(COLLECTION)
        .find(filter)
        .sort(sort)
        .projection(stock_levels_projection())
        .await?
        .try_collect()
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn savings_are_derived_from_list_and_retail() {
        let cents = Money::from_cents;
        let p = Pricing::new(cents(1200), cents(1100));
        assert_eq!((p.savings, p.pct_savings), (cents(100), 8));
        let p = Pricing::new(cents(1000), cents(1500));
        assert_eq!((p.savings, p.pct_savings), (Money::ZERO, 0));
        let p = Pricing::new(Money::ZERO, Money::ZERO);
        assert_eq!((p.savings, p.pct_savings), (Money::ZERO, 0));
    }
}
