//! An order as stored, without I/O: the `orders` document, its lines, address, payment and
//! status. `checkout::orders` (the store) re-exports these types and writes them; the order
//! emails (`checkout::emails`) render them. Neither of those is needed to read an order.

use bson::oid::ObjectId;
use bson::DateTime;
use serde::{Deserialize, Serialize};

use crate::db::site;
use crate::domain::{CartId, Money, OrderNumber, Sku};

pub const COLLECTION: &str = "orders";
pub const COUNTERS: &str = "counters";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderStatus {
    Paid,
    Shipped,
    Cancelled,
}

impl OrderStatus {
    pub const ALL: [OrderStatus; 3] = [
        OrderStatus::Paid,
        OrderStatus::Shipped,
        OrderStatus::Cancelled,
    ];

    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            OrderStatus::Paid => "paid",
            OrderStatus::Shipped => "shipped",
            OrderStatus::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Address {
    pub street: String,
    pub city: String,
    pub postcode: String,
    pub country: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderItem {
    pub sku: Sku,
    pub title: String,
    pub qty: i64,
    pub unit_price: Money,
}

impl OrderItem {
    pub fn line_total(&self) -> Money {
        self.unit_price.times(self.qty)
    }

    pub(crate) fn unit(&self) -> String {
        self.unit_price.display(&site::currency())
    }

    pub(crate) fn total(&self) -> String {
        self.line_total().display(&site::currency())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payment {
    pub gateway: String,
    pub reference: String,
    pub last4: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    pub number: OrderNumber,
    pub cart_id: CartId,
    pub created: DateTime,
    pub email: String,
    pub name: String,
    pub address: Address,
    pub items: Vec<OrderItem>,
    pub subtotal: Money,
    pub shipping: Money,
    pub total: Money,
    pub payment: Payment,
    pub status: OrderStatus,
    /// SKUs of a cancelled order whose units are still to be put back on sale (empty once done;
    /// what lets a restock interrupted by a crash be finished, once per SKU).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restock: Vec<Sku>,
    /// The customer account that owns the order: set when someone signs in with the order's
    /// email (`orders::claim_for_account`); absent on guest orders nobody claimed yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<ObjectId>,
}

impl Order {
    pub fn url(&self) -> String {
        format!("/orders/{}", self.number)
    }

    pub fn subtotal_display(&self) -> String {
        self.subtotal.display(&site::currency())
    }

    pub fn shipping_display(&self) -> String {
        self.shipping.display(&site::currency())
    }

    pub fn total_display(&self) -> String {
        self.total.display(&site::currency())
    }

    /// `22 November 2026, 20:30 UTC`, in the site's time zone.
    pub(crate) fn placed(&self) -> String {
        let zone = site::time_zone();
        format!(
            "{} {}",
            zone.format(self.created, "%-d %B %Y, %H:%M"),
            zone.abbreviation(self.created)
        )
    }

    pub fn unit_count(&self) -> i64 {
        self.items.iter().map(|i| i.qty).sum()
    }
}
