//! The shopping cart: one document per cart, its id in the session cookie, the stock it holds
//! reserved on the products themselves. No transactions: every change is a single-document update
//! whose filter states its precondition, with a compensating update when a later step fails (see
//! `docs/invariants.md`). Writes to `carts` live in [`store`], stock moves in `crate::stock`.
//!
//! Cart writes (create, add, change, remove) use the fast write concern even with
//! `database.write_concern = "durable"`: a crash that loses one is a crash between two steps,
//! which checkout's review and the cleanup job already repair, and the shopper is shown the cart
//! as it then is. Only a paid cart's completion is journaled (see `checkout::finish_paid_cart`).

pub(crate) mod pages;
pub(crate) mod reserve;
pub mod store;

use actix_session::Session;
use bson::{doc, DateTime};
use mongodb::IndexModel;
use serde::{Deserialize, Serialize};

use crate::catalog::products::ForCart;
use crate::db::site;
use crate::db::{Db, DbError};
use crate::domain::{CartId, Currency, Money, Sku};

pub const COLLECTION: &str = "carts";
/// The most units of one product a cart line may hold (the product page's quantity box uses the
/// same constant).
pub(crate) use crate::catalog::products::MAX_LINE_QTY;

/// A cart line may always hold this many units (when in stock), whatever the share below.
pub(crate) const LINE_FLOOR: i64 = 10;

/// How much of the shop one cart may hold, so one visitor cannot take a product off sale for
/// everyone else for the life of a cart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CartLimits {
    /// Units in one cart, all lines together (`cart.max_units`).
    pub(crate) max_units: i64,
    /// Percentage of a product's units on hand (on sale plus reserved) one line may hold
    /// (`cart.max_line_share_pct`), never less than [`LINE_FLOOR`] nor more than
    /// [`MAX_LINE_QTY`].
    pub(crate) max_line_share_pct: i64,
}

impl CartLimits {
    /// Only the fixed per-line maximum applies.
    pub(crate) const NONE: CartLimits = CartLimits {
        max_units: i64::MAX,
        max_line_share_pct: 100,
    };

    /// The limits the `cart.*` settings configure.
    pub(crate) fn configured(settings: &crate::config::CartSettings) -> CartLimits {
        CartLimits {
            max_units: settings.max_units,
            max_line_share_pct: settings.max_line_share_pct,
        }
    }

    /// The most units of a product one cart line may hold, with `on_sale` units of it on
    /// sale and `reserved` held in carts.
    pub(crate) fn line_cap(&self, on_sale: i64, reserved: i64) -> i64 {
        let on_hand = on_sale.max(0).saturating_add(reserved.max(0));
        let share = on_hand
            .saturating_mul(self.max_line_share_pct.clamp(1, 100))
            .saturating_add(99)
            / 100;
        share.clamp(LINE_FLOOR, MAX_LINE_QTY)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CartStatus {
    /// The shopper may change it; its lines hold stock.
    Active,
    /// Locked while checkout charges the card.
    Pending,
    /// Paid: an order exists for it.
    Complete,
    /// Idle too long; the expiry job is returning its stock.
    Expiring,
    /// Its stock has been returned.
    Expired,
}

impl CartStatus {
    pub const ALL: [CartStatus; 5] = [
        CartStatus::Active,
        CartStatus::Pending,
        CartStatus::Complete,
        CartStatus::Expiring,
        CartStatus::Expired,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            CartStatus::Active => "active",
            CartStatus::Pending => "pending",
            CartStatus::Complete => "complete",
            CartStatus::Expiring => "expiring",
            CartStatus::Expired => "expired",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<CartStatus> {
        CartStatus::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Expired (or on its way there): its stock went, or is going, back on sale.
    pub(crate) fn has_expired(&self) -> bool {
        matches!(self, CartStatus::Expiring | CartStatus::Expired)
    }
}

/// What the shopper saw when adding the product, kept so the cart shows (and checkout charges)
/// the price they agreed to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineDetails {
    pub title: String,
    pub slug: String,
    /// Unit price.
    pub price: Money,
    /// Shipping weight of one unit, in grams.
    #[serde(default)]
    pub weight: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CartLine {
    pub sku: Sku,
    pub qty: i64,
    pub details: LineDetails,
}

impl CartLine {
    pub fn for_product(product: &ForCart, qty: i64) -> CartLine {
        CartLine {
            sku: product.sku.clone(),
            qty,
            details: LineDetails {
                title: product.title.clone(),
                slug: product.slug.to_string(),
                price: product.pricing.retail,
                weight: product.shipping.weight,
            },
        }
    }

    pub(crate) fn line_total(&self) -> Money {
        self.details.price.times(self.qty)
    }

    pub(crate) fn unit_price(&self) -> String {
        self.details.price.display(&site::currency())
    }

    pub(crate) fn total(&self) -> String {
        self.line_total().display(&site::currency())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cart {
    /// Random hex, so carts spread evenly over shards.
    #[serde(rename = "_id")]
    pub id: CartId,
    pub status: CartStatus,
    pub created: DateTime,
    pub last_modified: DateTime,
    #[serde(default)]
    pub items: Vec<CartLine>,
    /// The shop's shipping rates when the cart was started: the cart page, the checkout, the
    /// amount charged and the order all use these, so a rate change in Admin → Settings never
    /// changes a total a shopper has already been shown (it applies to carts started after
    /// it). Carts from before rates were settings have the default rates.
    #[serde(default)]
    pub shipping_rates: crate::db::site::ShippingRates,
}

impl Cart {
    pub(crate) fn line(&self, sku: &Sku) -> Option<&CartLine> {
        self.items.iter().find(|l| l.sku == *sku)
    }

    /// Units in the cart (the header's count).
    pub(crate) fn item_count(&self) -> i64 {
        self.items.iter().map(|l| l.qty).sum()
    }

    pub fn subtotal_amount(&self) -> Money {
        self.items.iter().map(CartLine::line_total).sum()
    }

    /// Shipping at the rates the cart started with (see [`Cart::shipping_rates`]).
    pub fn shipping_amount(&self) -> Money {
        let grams = self.items.iter().map(|l| l.qty * l.details.weight).sum();
        if self.items.is_empty() {
            Money::ZERO
        } else {
            self.shipping_rates.for_weight(grams)
        }
    }

    pub fn total_amount(&self) -> Money {
        self.subtotal_amount() + self.shipping_amount()
    }

    pub(crate) fn subtotal(&self) -> String {
        self.subtotal_amount().display(&site::currency())
    }

    pub(crate) fn shipping(&self) -> String {
        self.shipping_amount().display(&site::currency())
    }

    pub(crate) fn total(&self) -> String {
        self.total_amount().display(&site::currency())
    }
}

/// Why a cart change was refused, in words the shopper can act on.
#[derive(Debug, thiserror::Error)]
pub enum CartError {
    #[error("the quantity must be a whole number from 0 to {MAX_LINE_QTY}")]
    BadQuantity,
    #[error("at most {MAX_LINE_QTY} of one item fit in a cart")]
    TooMany,
    #[error("that product does not exist")]
    UnknownSku,
    /// The line would hold more than its share of the product's stock.
    #[error("you can have at most {max} of {title} in your cart")]
    LineLimit { title: String, max: i64 },
    /// This client address started too many carts lately.
    #[error("too many carts were started from your network lately; please try again later")]
    TooManyCarts,
    /// The cart would hold more units than one cart may.
    #[error("a cart holds at most {max} items in all")]
    CartFull { max: i64 },
    #[error("that item is not in your cart")]
    NotInCart,
    /// The cart is pending, complete or expired (or gone); the shopper needs a new one.
    #[error("your cart can no longer be changed")]
    NotActive(Option<CartStatus>),
    #[error("{}", only_left_message(.title, *.available))]
    OnlyLeft { title: String, available: i64 },
    /// The line lost its reservation (a crash between two writes); it was taken out of the cart.
    #[error("{title} was no longer reserved for you and has been removed from your cart")]
    ReservationLost { title: String },
    /// Other shoppers kept changing the same cart; nothing was changed.
    #[error("your cart changed while we were updating it; please try again")]
    Contention,
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<mongodb::error::Error> for CartError {
    fn from(e: mongodb::error::Error) -> Self {
        CartError::Db(e.into())
    }
}

fn only_left_message(title: &str, available: i64) -> String {
    if available <= 0 {
        format!("Sorry, {title} is sold out")
    } else {
        format!("Sorry, only {available} left of {title}")
    }
}

/// Expiry finds idle active carts; admin lists carts by status, newest first.
pub fn indexes() -> Vec<IndexModel> {
    vec![IndexModel::builder()
        .keys(doc! { "status": 1, "last_modified": 1 })
        .build()]
}

pub fn collection(db: &Db) -> mongodb::Collection<Cart> {
    db.collection(COLLECTION)
}

pub async fn by_id(db: &Db, id: &CartId) -> Result<Option<Cart>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": id }).await?)
}

pub use store::create;

/// What the shopper is told when a line took over a changed price (see
/// [`store::take_over_price`]).
pub(crate) fn price_changed_notice(
    title: &str,
    was: Money,
    now: Money,
    currency: &Currency,
) -> String {
    format!(
        "The price of {title} changed from {} to {} since you added it.",
        was.display(currency),
        now.display(currency)
    )
}

use crate::web::layout::CART_COUNT_KEY as SESSION_COUNT;
use crate::web::session::CART_ID_KEY as SESSION_CART;

/// The cart this visitor is using, if any.
pub(crate) fn session_cart_id(session: &Session) -> Option<CartId> {
    // The cookie is signed, so only an id this app stored can come back; parsing still keeps
    // anything else from reaching a query.
    crate::web::session::cart_id(session).and_then(|id| CartId::parse(&id).ok())
}

/// Remember the visitor's cart and how many units it holds (shown in the header on every page
/// without a database read).
pub(crate) fn remember_in_session(session: &Session, cart: &Cart) {
    let stored = session
        .insert(SESSION_CART, &cart.id)
        .and_then(|()| session.insert(SESSION_COUNT, cart.item_count()));
    if let Err(e) = stored {
        tracing::warn!(error = %e, "could not store the cart in the session");
    }
}

/// Forget the visitor's cart (it completed or expired); the next add starts a new one.
pub(crate) fn forget_in_session(session: &Session) {
    session.remove(SESSION_CART);
    session.remove(SESSION_COUNT);
}

/// The header count after checkout: nothing in the cart any more.
pub(crate) fn show_empty_in_session(session: &Session) {
    if let Err(e) = session.insert(SESSION_COUNT, 0_i64) {
        tracing::warn!(error = %e, "could not store the cart count in the session");
    }
}

/// How many carts are in `status` (the admin's carts screen; the `status, last_modified` index
/// counts them).
pub(crate) async fn count_by_status(db: &Db, status: CartStatus) -> Result<u64, DbError> {
    Ok(collection(db)
        .count_documents(doc! { "status": status.as_str() })
        .await?)
}

/// The filter and sort of [`list_by_status`], for `explain` in tests.
pub fn by_status_query(status: CartStatus) -> (bson::Document, bson::Document) {
    (
        doc! { "status": status.as_str() },
        doc! { "last_modified": -1 },
    )
}

/// The `limit` most recently changed carts in `status`, newest first.
pub async fn list_by_status(db: &Db, status: CartStatus, limit: i64) -> Result<Vec<Cart>, DbError> {
    use futures::TryStreamExt;
    let (filter, sort) = by_status_query(status);
    Ok(collection(db)
        .find(filter)
        .sort(sort)
        .limit(limit)
        .await?
        .try_collect()
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipping_is_flat_plus_a_dollar_per_started_half_kilo() {
        // The default rates: a flat $3.99 plus $1.00 for every started 500 g (Admin → Settings
        // changes them for new carts).
        let shipping = |grams| site::ShippingRates::default().for_weight(grams).cents();
        assert_eq!(shipping(0), 399);
        assert_eq!(shipping(1), 499);
        assert_eq!(shipping(500), 499);
        assert_eq!(shipping(501), 599);
    }
}
