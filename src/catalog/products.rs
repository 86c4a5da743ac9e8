//! The `products` collection: one document per product whatever its type, common fields first,
//! the type's own fields in `details`, and the stock counters on the same document.

use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;
use serde::{Deserialize, Serialize};

pub use crate::catalog::lifecycle::ProductStatus;
use crate::catalog::CatalogError;
use crate::db::{site, Db, DbError};
use crate::domain::{CartId, EditVersion, Money, Sku, Slug, StockHolder};

pub const COLLECTION: &str = "products";

/// The kinds of product the shop sells; each has its own `details` and page partial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProductType {
    Album,
    Film,
    Book,
}

impl ProductType {
    pub const ALL: [ProductType; 3] = [ProductType::Album, ProductType::Film, ProductType::Book];

    pub fn as_str(&self) -> &'static str {
        match self {
            ProductType::Album => "album",
            ProductType::Film => "film",
            ProductType::Book => "book",
        }
    }

    /// Plural heading for lists and filters.
    pub fn label(&self) -> &'static str {
        match self {
            ProductType::Album => "Albums",
            ProductType::Film => "Films",
            ProductType::Book => "Books",
        }
    }

    pub fn parse(s: &str) -> Option<ProductType> {
        ProductType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The `details` field naming the people behind a product of this type.
    pub fn people_field(&self) -> &'static str {
        match self {
            ProductType::Album => "details.artist",
            ProductType::Film => "details.actor",
            ProductType::Book => "details.author",
        }
    }
}

/// Prices in integer cents; `savings` and `pct_savings` are derived, never entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pricing {
    pub list: Money,
    pub retail: Money,
    pub savings: Money,
    pub pct_savings: i32,
}

impl Pricing {
    /// Pricing from the list and retail price; a retail price above list means no savings.
    pub fn new(list: Money, retail: Money) -> Pricing {
        let savings = (list - retail).max(Money::ZERO);
        let pct_savings = if list > Money::ZERO {
            i32::try_from(savings.cents() * 100 / list.cents()).unwrap_or(0)
        } else {
            0
        };
        Pricing {
            list,
            retail,
            savings,
            pct_savings,
        }
    }

    /// Whether the retail price is below list (the pages then show both).
    pub fn has_savings(&self) -> bool {
        self.savings > Money::ZERO
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dimensions {
    pub width: f64,
    pub height: f64,
    pub depth: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Shipping {
    /// Grams.
    pub weight: i64,
    /// Centimetres.
    pub dimensions: Dimensions,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlbumDetails {
    pub title: String,
    pub artist: String,
    pub genre: Vec<String>,
    pub tracks: Vec<String>,
    pub issue_date: DateTime,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilmDetails {
    pub title: String,
    pub director: Vec<String>,
    pub writer: Vec<String>,
    pub actor: Vec<String>,
    pub genre: Vec<String>,
    pub issue_date: DateTime,
    pub rating: String,
    pub aspect_ratio: String,
    /// Minutes.
    pub runtime: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BookDetails {
    pub author: Vec<String>,
    pub publisher: String,
    pub pages: i32,
    pub isbn: String,
    pub issue_date: DateTime,
    pub genre: Vec<String>,
}

/// A product's type-specific fields, parsed according to its `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum Details {
    Album(AlbumDetails),
    Film(FilmDetails),
    Book(BookDetails),
}

impl Details {
    pub fn product_type(&self) -> ProductType {
        match self {
            Details::Album(_) => ProductType::Album,
            Details::Film(_) => ProductType::Film,
            Details::Book(_) => ProductType::Book,
        }
    }

    pub fn to_document(&self) -> Result<Document, bson::ser::Error> {
        match self {
            Details::Album(d) => bson::to_document(d),
            Details::Film(d) => bson::to_document(d),
            Details::Book(d) => bson::to_document(d),
        }
    }

    pub fn parse(kind: ProductType, details: &Document) -> Result<Details, bson::de::Error> {
        let d = details.clone();
        Ok(match kind {
            ProductType::Album => Details::Album(bson::from_document(d)?),
            ProductType::Film => Details::Film(bson::from_document(d)?),
            ProductType::Book => Details::Book(bson::from_document(d)?),
        })
    }

    pub fn genres(&self) -> &[String] {
        match self {
            Details::Album(d) => &d.genre,
            Details::Film(d) => &d.genre,
            Details::Book(d) => &d.genre,
        }
    }

    /// Who made it: the artist, the lead actors or the authors.
    pub fn people(&self) -> Vec<String> {
        match self {
            Details::Album(d) => vec![d.artist.clone()],
            Details::Film(d) => d.actor.clone(),
            Details::Book(d) => d.author.clone(),
        }
    }

    pub fn issue_date(&self) -> DateTime {
        match self {
            Details::Album(d) => d.issue_date,
            Details::Film(d) => d.issue_date,
            Details::Book(d) => d.issue_date,
        }
    }
}

/// One reservation of stock by a cart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carted {
    /// The cart (or cancelled order) holding the units; stored as `cart_id`, the name from
    /// when only carts held stock.
    #[serde(rename = "cart_id")]
    pub holder: StockHolder,
    pub qty: i64,
    pub timestamp: DateTime,
}

/// A product as stored. `details` stays a document here because its shape depends on `type`;
/// [`Product::details`] parses it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Product {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    /// Draft, active or archived; only active products are on the storefront (a product
    /// stored before statuses existed has none and is active).
    ///
    /// Stored second, right after `_id`: every storefront query filters on it, and a store
    /// reads a document's fields in order until it has the ones a filter names (docstore's and
    /// MongoDB's matchers alike). A listing page that skips a few hundred products checks the
    /// status of each; found in the document's first bytes, that check no longer walks past
    /// the description and the pricing of every one (`/products?page=20` served about 1.4×
    /// the requests in one measurement at 10 000 products). Products stored before keep their
    /// order until they are saved again.
    #[serde(default)]
    pub status: ProductStatus,
    pub sku: Sku,
    pub slug: Slug,
    #[serde(rename = "type")]
    pub kind: ProductType,
    pub title: String,
    /// Lowercased title: what title search and the title sort use (an index serves both).
    pub search_title: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asin: Option<String>,
    pub shipping: Shipping,
    pub pricing: Pricing,
    pub categories: Vec<ObjectId>,
    pub category_path: Vec<ObjectId>,
    #[serde(default)]
    pub photos: Vec<ObjectId>,
    #[serde(default)]
    pub featured: bool,
    /// Shared with content nodes: `/tags/{tag}` lists both.
    #[serde(default)]
    pub tags: Vec<String>,
    pub details: Document,
    /// The genres, normalised (see [`crate::catalog::facets`]): what the genre filter matches,
    /// so `jazz`, `Jazz` and ` JAZZ ` find the same products through one index.
    #[serde(default)]
    pub genre_keys: Vec<String>,
    /// The artist, actors or authors, normalised like `genre_keys`: what the person filter
    /// matches ("miles davis" finds Miles Davis).
    #[serde(default)]
    pub people_keys: Vec<String>,
    pub qty: i64,
    #[serde(default)]
    pub carted: Vec<Carted>,
    #[serde(default)]
    pub sold: i64,
    /// Visible comments on the product (kept by the comments area as they come and go).
    #[serde(default)]
    pub comment_count: i64,
    /// Closed to new comments by the owner (Admin → Comments).
    #[serde(default)]
    pub comments_closed: bool,
    pub created: DateTime,
    pub updated: DateTime,
    /// Replaced by every save of the admin form and checked by the next one, so a form loaded
    /// before someone else's save cannot overwrite it. Stock, reservations, sales and photos
    /// leave it alone: they are not fields of the form. Products stored before it existed have
    /// none; their first save sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_version: Option<EditVersion>,
}

impl Product {
    /// The typed details; `None` when a stored document does not fit its type (shown without
    /// the type's section rather than failing the page).
    pub fn details(&self) -> Option<Details> {
        Details::parse(self.kind, &self.details).ok()
    }

    /// Whether shoppers may see and buy it (neither draft nor archived).
    pub fn is_on_sale(&self) -> bool {
        self.status == ProductStatus::Active
    }

    pub fn in_stock(&self) -> bool {
        self.qty > 0
    }

    /// On sale, but running low (see [`LOW_STOCK`]): the pages say "Only N left".
    pub fn is_low_stock(&self) -> bool {
        self.in_stock() && is_low_stock(self.qty)
    }

    /// Units other shoppers' carts hold (all reservations but `own_cart`'s): they come back on
    /// sale if those carts expire or lines are removed.
    pub fn held_by_others(&self, own_cart: Option<&CartId>) -> i64 {
        self.carted
            .iter()
            .filter(|c| c.holder.cart().is_none() || c.holder.cart() != own_cart)
            .map(|c| c.qty.max(0))
            .sum()
    }

    pub fn retail_price(&self) -> String {
        self.pricing.retail.display(&site::currency())
    }

    pub fn list_price(&self) -> String {
        self.pricing.list.display(&site::currency())
    }

    pub fn savings(&self) -> String {
        self.pricing.savings.display(&site::currency())
    }

    pub fn url(&self) -> String {
        url_of(self.slug.as_str())
    }

    /// The product as a discussion its comments hang from.
    pub fn discussion(&self) -> crate::comments::Discussion {
        crate::comments::Discussion {
            id: self.id,
            kind: crate::comments::DiscussionKind::Product,
            title: self.title.clone(),
            base_url: self.url(),
            closed: self.comments_closed,
            opened: Some(self.created),
        }
    }

    /// Units `cart_id` holds reserved of this product.
    pub fn reserved_for(&self, cart_id: &CartId) -> i64 {
        self.carted
            .iter()
            .filter(|c| c.holder.cart() == Some(cart_id))
            .map(|c| c.qty)
            .sum()
    }

    /// URL of the first photo's thumbnail, if there is a photo.
    pub fn cover_url(&self) -> Option<String> {
        cover_url_of(&self.photos)
    }
}

/// The address of the product page with this slug.
pub fn url_of(slug: &str) -> String {
    format!("/products/{slug}")
}

/// The thumbnail of the first of these photos, if any: a product's cover.
pub fn cover_url_of(photos: &[ObjectId]) -> Option<String> {
    photos
        .first()
        .map(|id| format!("/media/{}/thumb", id.to_hex()))
}

/// What an editor fills in for a product; everything else is derived when it is saved.
#[derive(Debug, Clone, PartialEq)]
pub struct NewProduct {
    pub sku: Sku,
    pub slug: Slug,
    pub title: String,
    pub description: String,
    pub list_price: Money,
    pub retail_price: Money,
    pub categories: Vec<ObjectId>,
    pub details: Details,
    pub qty: i64,
    pub featured: bool,
    pub shipping: Shipping,
}

impl NewProduct {
    /// The product document for the first insert (stock counters start from `qty`).
    pub fn into_product(self, category_path: Vec<ObjectId>) -> Result<Product, CatalogError> {
        let now = DateTime::now();
        let details = self
            .details
            .to_document()
            .map_err(|e| CatalogError::Db(DbError::Other(e.into())))?;
        Ok(Product {
            id: ObjectId::new(),
            search_title: search_key(&self.title),
            kind: self.details.product_type(),
            sku: self.sku,
            slug: self.slug,
            title: self.title,
            description: self.description,
            asin: None,
            shipping: self.shipping,
            pricing: Pricing::new(self.list_price, self.retail_price),
            categories: self.categories,
            category_path,
            photos: Vec::new(),
            featured: self.featured,
            status: ProductStatus::Active,
            tags: Vec::new(),
            genre_keys: crate::catalog::facets::keys(self.details.genres()),
            people_keys: crate::catalog::facets::keys(&self.details.people()),
            details,
            qty: self.qty,
            carted: Vec::new(),
            sold: 0,
            comment_count: 0,
            comments_closed: false,
            created: now,
            updated: now,
            edit_version: Some(EditVersion::new()),
        })
    }
}

/// The lowercased form of a title that search and the title sort compare.
pub fn search_key(title: &str) -> String {
    title.trim().to_lowercase()
}

/// The indexes behind every product query the shop issues (listed in `docs/data-model.md`).
pub fn indexes() -> Vec<IndexModel> {
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
        plain(doc! { "details.issue_date": -1, "_id": -1 }),
        plain(doc! { "pricing.pct_savings": -1, "_id": -1 }),
        plain(doc! { "pricing.retail": 1, "_id": 1 }),
        plain(doc! { "search_title": 1, "_id": 1 }),
        plain(doc! { "category_path": 1, "details.issue_date": -1, "_id": -1 }),
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
        // Stock reservations: found by cart (checkout, expiry) and by age (cleanup).
        plain(doc! { "carted.cart_id": 1 }),
        plain(doc! { "carted.timestamp": 1 }),
    ]
}

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
];

pub fn collection(db: &Db) -> mongodb::Collection<Product> {
    db.collection(COLLECTION)
}

/// Products carrying `tag`, by title, as grid cards.
pub async fn with_tag(
    db: &Db,
    tag: &str,
    limit: i64,
) -> Result<Vec<crate::catalog::card::ProductCard>, DbError> {
    use crate::catalog::card::ProductCard;
    use futures::TryStreamExt;
    Ok(collection(db)
        .clone_with_type::<ProductCard>()
        .find(crate::catalog::lifecycle::on_sale_within(
            doc! { "tags": tag },
        ))
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
    Ok(())
}

/// For admin saves (create, edit, stock received, photos), which the admin is shown as done.
fn durable(db: &Db) -> mongodb::Collection<Product> {
    db.durable(COLLECTION)
}

pub async fn by_slug(db: &Db, slug: &str) -> Result<Option<Product>, DbError> {
    Ok(collection(db).find_one(doc! { "slug": slug }).await?)
}

pub async fn by_sku(db: &Db, sku: &str) -> Result<Option<Product>, DbError> {
    Ok(collection(db).find_one(doc! { "sku": sku }).await?)
}

/// What changing a cart needs of a product: never its reservations (a product in a drop holds
/// one per cart, thousands of them), at most the one cart's own ([`for_cart_holding`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ForCart {
    pub sku: Sku,
    pub slug: Slug,
    pub title: String,
    #[serde(default)]
    pub status: ProductStatus,
    /// Units on sale.
    pub qty: i64,
    pub pricing: Pricing,
    pub shipping: Shipping,
    /// The asking cart's reservation ([`for_cart_holding`]), else nothing.
    #[serde(default)]
    carted: Vec<Carted>,
}

impl ForCart {
    /// See [`Product::is_on_sale`].
    pub fn is_on_sale(&self) -> bool {
        self.status == ProductStatus::Active
    }

    pub fn url(&self) -> String {
        url_of(self.slug.as_str())
    }

    /// Units the cart [`for_cart_holding`] asked about holds reserved.
    pub fn reserved_by_that_cart(&self) -> i64 {
        self.carted.iter().map(|c| c.qty).sum()
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
            carted: Vec::new(),
        }
    }
}

/// The fields [`ForCart`] reads.
fn for_cart_fields() -> Document {
    doc! {
        "_id": 0, "sku": 1, "slug": 1, "title": 1, "status": 1, "qty": 1, "pricing": 1,
        "shipping": 1,
    }
}

/// The product `sku` as adding it to a cart needs it, by the `sku` index.
pub async fn for_cart(db: &Db, sku: &Sku) -> Result<Option<ForCart>, DbError> {
    Ok(db
        .collection::<ForCart>(COLLECTION)
        .find_one(doc! { "sku": sku })
        .projection(for_cart_fields())
        .await?)
}

/// [`for_cart`] with `cart_id`'s own reservation, if it holds one (`$elemMatch` projection:
/// the other carts' entries stay in the store).
pub async fn for_cart_holding(
    db: &Db,
    sku: &Sku,
    cart_id: &CartId,
) -> Result<Option<ForCart>, DbError> {
    let mut fields = for_cart_fields();
    fields.insert("carted", doc! { "$elemMatch": { "cart_id": cart_id } });
    Ok(db
        .collection::<ForCart>(COLLECTION)
        .find_one(doc! { "sku": sku })
        .projection(fields)
        .await?)
}

/// Units all carts hold reserved of `sku`, summed in the store (only the sum comes back).
pub async fn units_reserved(db: &Db, sku: &Sku) -> Result<i64, DbError> {
    use futures::TryStreamExt;
    let rows: Vec<Document> = db
        .collection::<Document>(COLLECTION)
        .aggregate(vec![
            doc! { "$match": { "sku": sku } },
            doc! { "$project": { "_id": 0, "reserved": { "$sum": "$carted.qty" } } },
        ])
        .await?
        .try_collect()
        .await?;
    Ok(rows
        .first()
        .and_then(|r| match r.get("reserved") {
            Some(bson::Bson::Int64(n)) => Some(*n),
            Some(bson::Bson::Int32(n)) => Some(i64::from(*n)),
            _ => None,
        })
        .unwrap_or(0))
}

/// The products with any of `skus`, by SKU, in one query on the `sku` index.
pub async fn by_skus(
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

pub async fn by_id(db: &Db, id: ObjectId) -> Result<Option<Product>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": id }).await?)
}

/// What the cart page needs to know of a product now: units available, the current price and
/// its cover for the thumbnail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleState {
    pub qty: i64,
    pub retail: Money,
    /// The first photo, if the product has one.
    pub cover: Option<ObjectId>,
}

/// [`SaleState`] of each of `skus` that exists, in one query on the `sku` index.
pub async fn sale_states(
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

/// The category path of a product filed under `categories`: those categories and all their
/// ancestors, each once, in a stable order.
pub async fn category_path_for(db: &Db, categories: &[ObjectId]) -> Result<Vec<ObjectId>, DbError> {
    let mut path: Vec<ObjectId> = Vec::new();
    for id in categories {
        if let Some(category) = crate::catalog::categories::by_id(db, *id).await? {
            for ancestor in &category.ancestors {
                if !path.contains(&ancestor.id) {
                    path.push(ancestor.id);
                }
            }
            if !path.contains(&category.id) {
                path.push(category.id);
            }
        }
    }
    Ok(path)
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
    let path = category_path_for(db, &new.categories).await?;
    let mut product = new.into_product(path)?;
    product.status = status;
    durable(db).insert_one(&product).await?;
    super::changes::products_changed(db);
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
    update_with_status(db, id, expected_version, edit, tags, None).await
}

/// [`update`], also setting the lifecycle `status` when given (the admin form's Status).
pub async fn update_with_status(
    db: &Db,
    id: ObjectId,
    expected_version: Option<EditVersion>,
    edit: NewProduct,
    tags: &[String],
    status: Option<ProductStatus>,
) -> Result<Saved, CatalogError> {
    let path = category_path_for(db, &edit.categories).await?;
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
    let genre_keys = crate::catalog::facets::keys(edit.details.genres());
    let people_keys = crate::catalog::facets::keys(&edit.details.people());
    let version = EditVersion::new();
    let mut set = doc! {
                "sku": &edit.sku, "slug": &edit.slug, "type": edit.details.product_type().as_str(),
                "title": &edit.title, "search_title": search_key(&edit.title),
                "description": &edit.description, "pricing": pricing, "shipping": shipping,
                "categories": &edit.categories, "category_path": path, "details": details,
                "genre_keys": genre_keys, "people_keys": people_keys,
                "featured": edit.featured, "tags": tags, "updated": DateTime::now(),
                "edit_version": version,
    };
    if let Some(status) = status {
        set.insert("status", status.as_str());
    }
    let result = db
        .durable::<Document>(COLLECTION)
        .update_one(filter, doc! { "$set": set })
        .await?;
    if result.matched_count == 1 {
        super::changes::products_changed(db);
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
            doc! { "$push": { "photos": file_id }, "$set": { "updated": DateTime::now() } },
        )
        .await?;
    super::changes::products_changed(db);
    Ok(result.matched_count == 1)
}

/// Give `id` its first photo, `file_id`: false (and nothing changed) when it has a photo
/// already, e.g. one another instance's demo seeding gave it a moment earlier.
pub async fn add_first_photo(db: &Db, id: ObjectId, file_id: ObjectId) -> Result<bool, DbError> {
    let result = durable(db)
        .update_one(
            doc! { "_id": id, "photos": { "$size": 0 } },
            doc! { "$push": { "photos": file_id }, "$set": { "updated": DateTime::now() } },
        )
        .await?;
    if result.modified_count == 1 {
        super::changes::products_changed(db);
    }
    Ok(result.modified_count == 1)
}

/// Units on sale at or below which a product counts as running low: the product page says "only
/// N left", the cart warns that few are left, and the admin stock screen flags it (and filters
/// by it).
pub const LOW_STOCK: i64 = 3;

/// Whether `available` units on sale count as running low (see [`LOW_STOCK`]).
pub fn is_low_stock(available: i64) -> bool {
    available <= LOW_STOCK
}

/// The most units of one product a cart line (and so an order line) may hold; the product page's
/// quantity box offers no more. The cart knows it as `cart::MAX_LINE_QTY`.
pub const MAX_LINE_QTY: i64 = 99;

/// Units one cart holds of a product (all the stock screen needs of a reservation).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReservedUnits {
    pub qty: i64,
}

/// One product's stock position: the fields the admin stock screen reads, nothing more.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StockLevel {
    pub sku: String,
    pub title: String,
    /// On sale right now.
    pub qty: i64,
    #[serde(default)]
    pub carted: Vec<ReservedUnits>,
    #[serde(default)]
    pub sold: i64,
}

impl StockLevel {
    /// Units held in shoppers' carts.
    pub fn reserved(&self) -> i64 {
        self.carted.iter().map(|c| c.qty).sum()
    }

    /// Everything ever received: `qty + Σ carted.qty + sold` (the stock ledger's invariant, see
    /// `crate::stock`).
    pub fn received(&self) -> i64 {
        self.qty + self.reserved() + self.sold
    }

    pub fn is_low(&self) -> bool {
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
    doc! { "_id": 0, "sku": 1, "title": 1, "qty": 1, "carted.qty": 1, "sold": 1 }
}

/// Every product's stock (or only the low ones), fewest available first.
pub async fn stock_levels(db: &Db, low_only: bool) -> Result<Vec<StockLevel>, DbError> {
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
