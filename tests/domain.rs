//! No migration for the domain types (`bazaar::domain`): documents in the shapes stored before
//! `Money`, `Sku`, `Slug`, `CartId`, `OrderNumber` and `StockHolder` existed (bare integers and
//! strings, written here as raw BSON exactly as that code stored them) load through the typed
//! readers and serialize back to the same BSON; the app reads and shows them; and what the typed
//! code writes is still those shapes.

use bazaar::cart::{self, Cart, CartStatus};
use bazaar::catalog::products::{self, Product};
use bazaar::checkout::orders::{self, Order};
use bazaar::checkout::payments::PaymentRecord;
use bazaar::db::site::SiteSettings;
use bazaar::domain::{Money, OrderNumber, StockHolder};
use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};
use reqwest::StatusCode;

use crate::common::shop::*;
use crate::common::*;

/// A cart id as carts have always been made: 128 random bits as hex.
const OLD_CART: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";

fn stamp() -> DateTime {
    DateTime::from_millis(1_700_000_000_000)
}

/// A product as `catalog::products` stored it, holding units for a cart and for a cancelled
/// order (the holder written as `cancelled:<number>`).
fn old_product(id: ObjectId) -> Document {
    doc! {
        "_id": id, "status": "active", "sku": "old-1", "slug": "old-one", "type": "album",
        "title": "Old One", "search_title": "old one", "description": "Stored long ago.",
        "shipping": { "weight": 300_i64, "dimensions": { "width": 1.0, "height": 2.0, "depth": 3.0 } },
        "pricing": { "list": 1500_i64, "retail": 1299_i64, "savings": 201_i64, "pct_savings": 13_i32 },
        "categories": [], "category_path": [], "photos": [], "featured": false, "tags": [],
        "details": {
            "title": "Old One", "artist": "The Olds", "genre": ["Jazz"], "tracks": ["One"],
            "issue_date": DateTime::from_millis(0), "label": "Old",
        },
        "genre_keys": ["jazz"], "people_keys": ["the olds"], "qty": 7_i64,
        "carted": [
            { "cart_id": OLD_CART, "qty": 2_i64, "timestamp": stamp() },
            { "cart_id": "cancelled:BZ-000007", "qty": 1_i64, "timestamp": stamp() },
        ],
        "sold": 1_i64, "comment_count": 0_i64, "comments_closed": false,
        "created": stamp(), "updated": stamp(), "edit_version": ObjectId::new(),
    }
}

/// The cart holding two of `old-1`, as `cart::store` stored it.
fn old_cart() -> Document {
    doc! {
        "_id": OLD_CART, "status": "active", "created": stamp(), "last_modified": stamp(),
        "items": [{
            "sku": "old-1", "qty": 2_i64,
            "details": { "title": "Old One", "slug": "old-one", "price": 1299_i64, "weight": 200_i64 },
        }],
        "shipping_rates": { "base_cents": 399_i64, "per_half_kilo_cents": 100_i64 },
    }
}

/// A paid order, as `checkout::orders` stored it.
fn old_order() -> Document {
    doc! {
        "_id": ObjectId::new(), "number": "BZ-000007", "cart_id": OLD_CART, "created": stamp(),
        "email": "ada@example.com", "name": "Ada Lovelace",
        "address": { "street": "1 Engine Way", "city": "London", "postcode": "N1", "country": "UK" },
        "items": [{ "sku": "old-1", "title": "Old One", "qty": 2_i64, "unit_price": 1299_i64 }],
        "subtotal": 2598_i64, "shipping": 499_i64, "total": 3097_i64,
        "payment": { "gateway": "test", "reference": "ref-7", "last4": "4242" },
        "status": "paid",
    }
}

/// The payment attempt behind that order, as `checkout::payments` stored it.
fn old_payment() -> Document {
    doc! {
        "_id": OLD_CART, "cart_id": OLD_CART, "state": "ordered", "gateway": "test",
        "amount": 3097_i64, "last4": "4242", "email": "ada@example.com", "name": "Ada Lovelace",
        "address": { "street": "1 Engine Way", "city": "London", "postcode": "N1", "country": "UK" },
        "started": stamp(), "updated": stamp(), "reference": "ref-7", "order": "BZ-000007",
    }
}

/// The site settings, as `db::site` stored them (read without their `_id`).
fn old_settings() -> Document {
    doc! {
        "name": "Old Shop", "tagline": "Since before the types",
        "currency_symbol": "€", "shipping": { "base_cents": 450_i64, "per_half_kilo_cents": 125_i64 },
        "currency_code": "EUR", "description": "", "social_image": "", "organisation": "",
        "robots_txt": "User-agent: *\nDisallow:\n",
    }
}

/// `old` read as a `T` and written back: the same document, field for field and type for type.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(old: &Document) -> T {
    let typed: T = bson::from_document(old.clone()).expect("the old shape reads");
    let written = bson::to_document(&typed).expect("writes");
    assert_eq!(&written, old, "written back differently");
    typed
}

/// [`old_product`] once start-up moved its reservations out (`stock::migrate_carted`).
fn migrated_product(id: ObjectId) -> Document {
    let mut product = old_product(id);
    product.remove("carted");
    product.insert("reserved", 3_i64);
    product
}

#[test]
fn documents_stored_before_the_domain_types_read_and_write_back_unchanged() {
    let product: Product = round_trip(&migrated_product(ObjectId::new()));
    assert_eq!(product.sku, "old-1");
    assert_eq!(product.slug, "old-one");
    assert_eq!(product.pricing.retail, Money::from_cents(1299));
    assert_eq!(product.pricing.savings, Money::from_cents(201));
    assert_eq!(product.reserved, 3);

    let cart: Cart = round_trip(&old_cart());
    assert_eq!(cart.id, cart_id(OLD_CART));
    assert_eq!(cart.items[0].sku, "old-1");
    assert_eq!(cart.subtotal_amount(), Money::from_cents(2598));
    assert_eq!(cart.shipping_amount(), Money::from_cents(499));

    let order: Order = round_trip(&old_order());
    assert_eq!(order.number, order_number("BZ-000007"));
    assert_eq!(order.cart_id, cart_id(OLD_CART));
    assert_eq!(order.items[0].line_total(), Money::from_cents(2598));
    assert_eq!(order.total, Money::from_cents(3097));

    let payment: PaymentRecord = round_trip(&old_payment());
    assert_eq!(payment.amount, order.total);

    let settings: SiteSettings = round_trip(&old_settings());
    assert_eq!(settings.shipping.base_cents, Money::from_cents(450));
    assert_eq!(
        Money::from_cents(1299).display(&settings.currency()),
        "€12.99"
    );
}

#[tokio::test]
async fn the_app_reads_and_shows_what_was_stored_before_the_domain_types() {
    let app = spawn_app().await;
    let raw = |name: &str| app.db.collection::<Document>(name);
    raw(products::COLLECTION)
        .insert_one(old_product(ObjectId::new()))
        .await
        .expect("product stored");
    raw(cart::COLLECTION)
        .insert_one(old_cart())
        .await
        .expect("cart stored");
    raw(orders::COLLECTION)
        .insert_one(old_order())
        .await
        .expect("order stored");

    // What the next start-up does with reservations kept in the product; twice, as after a
    // crash, or by two instances.
    assert_eq!(
        bazaar::stock::migrate_carted(&app.db)
            .await
            .expect("migrated"),
        1
    );
    assert_eq!(
        bazaar::stock::migrate_carted(&app.db)
            .await
            .expect("migrated"),
        0
    );
    let product = products::by_sku(&app.db, &sku("old-1"))
        .await
        .expect("query")
        .expect("the old product");
    assert_eq!(product.pricing.retail, Money::from_cents(1299));
    assert_eq!(product.held_by_others(0), 3);
    let held = bazaar::stock::reservations_of(&app.db, &sku("old-1"))
        .await
        .expect("reservations");
    let holders: Vec<(&StockHolder, i64)> = held.iter().map(|r| (&r.holder, r.qty)).collect();
    assert_eq!(
        holders,
        [
            (&StockHolder::Cart(cart_id(OLD_CART)), 2),
            (&StockHolder::Cancelled(order_number("BZ-000007")), 1),
        ]
    );
    assert_eq!((product.qty, product.reserved, product.sold), (7, 3, 1));
    let cart = cart::by_id(&app.db, &cart_id(OLD_CART))
        .await
        .expect("query")
        .expect("the old cart");
    assert_eq!(cart.status, CartStatus::Active);
    assert_eq!(cart.total_amount(), Money::from_cents(3097));
    let order = orders::by_number(&app.db, &order_number("7"))
        .await
        .expect("query")
        .expect("the old order");
    assert_eq!(order.cart_id, cart.id);

    // The pages show the old amounts in the shop's currency.
    let page = app.get("/products/old-one").await;
    assert_eq!(page.status(), StatusCode::OK);
    let doc = html(&body(page).await);
    assert_eq!(texts(&doc, ".price .retail"), ["$12.99"]);
    let admin = body(app.get_admin("/admin/orders/BZ-000007").await).await;
    assert!(admin.contains("$30.97"), "the order's total is shown");
    app.stop().await;
}

#[tokio::test]
async fn what_the_typed_code_writes_is_the_shape_older_code_reads() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "typed-1", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("typed-1", "2").await;
    let raw = |name: &str| app.db.collection::<Document>(name);
    let product = raw(products::COLLECTION)
        .find_one(doc! { "sku": "typed-1" })
        .await
        .expect("query")
        .expect("product");
    assert_eq!(product.get("sku"), Some(&Bson::String("typed-1".into())));
    assert_eq!(
        product.get("slug"),
        Some(&Bson::String("test-typed-1".into()))
    );
    let pricing = product.get_document("pricing").expect("pricing");
    assert_eq!(pricing.get("retail"), Some(&Bson::Int64(1200)));
    assert_eq!(pricing.get("pct_savings"), Some(&Bson::Int32(20)));
    let entry = raw(bazaar::stock::COLLECTION)
        .find_one(doc! { "sku": "typed-1" })
        .await
        .expect("query")
        .expect("a reservation");
    let Some(Bson::String(held_by)) = entry.get("cart_id") else {
        panic!("the holder is stored as a string: {entry}");
    };
    let cart = raw(cart::COLLECTION)
        .find_one(doc! { "_id": held_by.as_str() })
        .await
        .expect("query")
        .expect("the reservation names the cart by its _id string");
    let line = cart.get_array("items").expect("items")[0]
        .as_document()
        .expect("a line")
        .clone();
    assert_eq!(line.get("sku"), Some(&Bson::String("typed-1".into())));
    let details = line.get_document("details").expect("details");
    assert_eq!(details.get("price"), Some(&Bson::Int64(1200)));

    assert_eq!(
        shopper.checkout("4242 4242 4242 4242").await.status(),
        StatusCode::SEE_OTHER
    );
    let order = raw(orders::COLLECTION)
        .find_one(doc! {})
        .await
        .expect("query")
        .expect("the order");
    assert_eq!(order.get("number"), Some(&Bson::String("BZ-000001".into())));
    assert_eq!(order.get("cart_id"), Some(&Bson::String(held_by.clone())));
    for (field, cents) in [("subtotal", 2400), ("shipping", 599), ("total", 2999)] {
        assert_eq!(order.get(field), Some(&Bson::Int64(cents)), "{field}");
    }

    // A cancelled order's hold is the string it always was.
    let hold = StockHolder::Cancelled(OrderNumber::from_sequence(1));
    assert!(
        bazaar::stock::unsell_into_hold(&app.db, &sku("typed-1"), &hold, 1)
            .await
            .expect("moved")
    );
    let product = raw(bazaar::stock::COLLECTION)
        .find_one(doc! { "sku": "typed-1", "cart_id": "cancelled:BZ-000001" })
        .await
        .expect("query");
    assert!(
        product.is_some(),
        "the hold is stored as cancelled:BZ-000001"
    );
    app.stop().await;
}
