//! The catalog's product model, without I/O: the product document and its parts, its life
//! cycle status and the storefront's on-sale conditions, the normalised facet keys, and the
//! limits every area reads (low stock, the most units a line holds). The files of the catalog
//! that store and query products build on it; it uses none of them.
//!
//! `catalog::products` (the store) re-exports the product types, so callers outside the
//! catalog name them with the collection they come from (`catalog::products::Product`).

use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};
use serde::{Deserialize, Serialize};

use crate::catalog::CatalogError;
use crate::db::{site, DbError};
use crate::domain::{EditVersion, Money, Sku, Slug, StockHolder};

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
    pub(crate) const ALL: [ProductType; 3] =
        [ProductType::Album, ProductType::Film, ProductType::Book];

    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            ProductType::Album => "album",
            ProductType::Film => "film",
            ProductType::Book => "book",
        }
    }

    /// Plural heading for lists and filters.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            ProductType::Album => "Albums",
            ProductType::Film => "Films",
            ProductType::Book => "Books",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<ProductType> {
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
    pub(crate) list: Money,
    pub retail: Money,
    pub savings: Money,
    pub pct_savings: i32,
}

impl Pricing {
    /// Pricing from the list and retail price; a retail price above list means no savings.
    pub(crate) fn new(list: Money, retail: Money) -> Pricing {
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
    pub(crate) fn has_savings(&self) -> bool {
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
    pub(crate) fn product_type(&self) -> ProductType {
        match self {
            Details::Album(_) => ProductType::Album,
            Details::Film(_) => ProductType::Film,
            Details::Book(_) => ProductType::Book,
        }
    }

    pub(crate) fn to_document(&self) -> Result<Document, bson::ser::Error> {
        match self {
            Details::Album(d) => bson::to_document(d),
            Details::Film(d) => bson::to_document(d),
            Details::Book(d) => bson::to_document(d),
        }
    }

    pub(crate) fn parse(kind: ProductType, details: &Document) -> Result<Details, bson::de::Error> {
        Details::parse_owned(kind, details.clone())
    }

    /// [`Details::parse`] of a document no longer needed: parsed without a copy.
    pub(crate) fn parse_owned(kind: ProductType, d: Document) -> Result<Details, bson::de::Error> {
        Ok(match kind {
            ProductType::Album => Details::Album(bson::from_document(d)?),
            ProductType::Film => Details::Film(bson::from_document(d)?),
            ProductType::Book => Details::Book(bson::from_document(d)?),
        })
    }

    pub(crate) fn genres(&self) -> &[String] {
        match self {
            Details::Album(d) => &d.genre,
            Details::Film(d) => &d.genre,
            Details::Book(d) => &d.genre,
        }
    }

    /// Who made it: the artist, the lead actors or the authors.
    pub(crate) fn people(&self) -> Vec<String> {
        match self {
            Details::Album(d) => vec![d.artist.clone()],
            Details::Film(d) => d.actor.clone(),
            Details::Book(d) => d.author.clone(),
        }
    }

    pub(crate) fn issue_date(&self) -> DateTime {
        match self {
            Details::Album(d) => d.issue_date,
            Details::Film(d) => d.issue_date,
            Details::Book(d) => d.issue_date,
        }
    }
}

/// One reservation of stock by a cart, as products stored before the `reservations` collection
/// kept them in their `carted` array (read once, by `stock::migrate_carted`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carted {
    /// The cart (or cancelled order) holding the units; stored as `cart_id`, the name from
    /// when only carts held stock.
    #[serde(rename = "cart_id")]
    pub(crate) holder: StockHolder,
    pub qty: i64,
    pub(crate) timestamp: DateTime,
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
    pub(crate) kind: ProductType,
    pub title: String,
    /// Lowercased title: what title search and the title sort use (an index serves both).
    pub(crate) search_title: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) asin: Option<String>,
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
    /// Units held for carts and cancelled orders; who holds them is in the `reservations`
    /// collection (`crate::stock`). Products stored before the counter existed had a `carted`
    /// array instead, which start-up moves out (`stock::migrate_carted`).
    #[serde(default)]
    pub reserved: i64,
    #[serde(default)]
    pub sold: i64,
    /// Visible comments on the product (kept by the comments area as they come and go).
    #[serde(default)]
    pub comment_count: i64,
    /// Closed to new comments by the owner (Admin → Comments).
    #[serde(default)]
    pub comments_closed: bool,
    pub(crate) created: DateTime,
    pub(crate) updated: DateTime,
    /// The admin who saved the form last; missing until a save recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) updated_by: Option<String>,
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

    /// [`Product::details`], leaving `details` empty: for a page that shows only the typed
    /// details, so the stored document is parsed without a copy.
    pub(crate) fn take_details(&mut self) -> Option<Details> {
        Details::parse_owned(self.kind, std::mem::take(&mut self.details)).ok()
    }

    /// Whether shoppers may see and buy it (neither draft nor archived).
    pub(crate) fn is_on_sale(&self) -> bool {
        self.status == ProductStatus::Active
    }

    pub(crate) fn in_stock(&self) -> bool {
        self.qty > 0
    }

    /// On sale, but running low (see [`LOW_STOCK`]): the pages say "Only N left".
    pub fn is_low_stock(&self) -> bool {
        self.in_stock() && is_low_stock(self.qty)
    }

    /// Units other shoppers' carts hold (all reservations but the `own` units the visitor's
    /// cart holds): they come back on sale if those carts expire or lines are removed.
    pub fn held_by_others(&self, own: i64) -> i64 {
        (self.reserved - own).max(0)
    }

    pub(crate) fn retail_price(&self) -> String {
        self.pricing.retail.display(&site::currency())
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

    /// URL of the first photo's thumbnail, if there is a photo.
    pub fn cover_url(&self) -> Option<String> {
        cover_url_of(&self.photos)
    }
}

/// The address of the product page with this slug.
pub fn url_of(slug: &str) -> String {
    format!("/products/{}", crate::web::meta::path_segment(slug))
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
    /// The product document for the first insert (stock counters start from `qty`), created
    /// at `now` (the site clock, `Db::now`).
    pub(crate) fn into_product(
        self,
        category_path: Vec<ObjectId>,
        now: DateTime,
    ) -> Result<Product, CatalogError> {
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
            genre_keys: keys(self.details.genres()),
            people_keys: keys(&self.details.people()),
            details,
            qty: self.qty,
            reserved: 0,
            sold: 0,
            comment_count: 0,
            comments_closed: false,
            created: now,
            updated: now,
            updated_by: None,
            edit_version: Some(EditVersion::new()),
        })
    }
}

/// The lowercased form of a title that search and the title sort compare.
pub fn search_key(title: &str) -> String {
    title.trim().to_lowercase()
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

/// Where a product stands in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProductStatus {
    /// Being prepared: only the admin sees it.
    Draft,
    /// On the storefront.
    #[default]
    Active,
    /// No longer sold: gone from the storefront, kept for its orders' history.
    Archived,
}

impl ProductStatus {
    pub(crate) const ALL: [ProductStatus; 3] = [
        ProductStatus::Draft,
        ProductStatus::Active,
        ProductStatus::Archived,
    ];

    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            ProductStatus::Draft => "draft",
            ProductStatus::Active => "active",
            ProductStatus::Archived => "archived",
        }
    }

    pub(crate) fn label(&self) -> &'static str {
        match self {
            ProductStatus::Draft => "Draft",
            ProductStatus::Active => "Active",
            ProductStatus::Archived => "Archived",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<ProductStatus> {
        ProductStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// The statuses kept off the storefront.
const HIDDEN: [&str; 2] = ["draft", "archived"];

/// The condition every storefront product query carries: not draft, not archived (a product
/// without a `status` field predates statuses and is active).
pub fn on_sale() -> Document {
    doc! { "status": { "$nin": HIDDEN.to_vec() } }
}

/// `filter` narrowed to products on sale.
pub fn on_sale_within(mut filter: Document) -> Document {
    filter.insert("status", doc! { "$nin": HIDDEN.to_vec() });
    filter
}

/// The admin list's filter for one status (active also matches products without the field).
pub fn with_status(status: ProductStatus) -> Document {
    match status {
        ProductStatus::Active => on_sale(),
        other => doc! { "status": other.as_str() },
    }
}

/// The condition of the products kept off the storefront: the complement of [`on_sale`].
pub fn hidden() -> Document {
    doc! { "status": { "$in": HIDDEN.to_vec() } }
}

/// The form a genre or name is compared in: lowercased, surrounding space trimmed and inner
/// runs of white space collapsed to one space.
pub(crate) fn normalise(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The normalised keys of `values`, each once, empty ones dropped, in their first order.
pub(crate) fn keys(values: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(values.len());
    for value in values {
        let key = normalise(value);
        if !key.is_empty() && !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

/// Midnight UTC (a release date is stored as the start of its day) of a calendar date; `None` for a date that does not exist (30 February).
pub(crate) fn midnight_utc(y: i32, m: u32, d: u32) -> Option<bson::DateTime> {
    let day = chrono::NaiveDate::from_ymd_opt(y, m, d)?;
    Some(bson::DateTime::from_millis(
        day.and_time(chrono::NaiveTime::MIN)
            .and_utc()
            .timestamp_millis(),
    ))
}
