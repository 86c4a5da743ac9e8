//! Shopping through HTTP for the cart and checkout tests: a [`Shopper`] with their own cookie
//! jar, products with known stock, and the stock invariant (`docs/invariants.md`).

use std::sync::Arc;

use bazaar::catalog::products::{self, Product};
use bazaar::db::Db;
use reqwest::cookie::Jar;
use reqwest::StatusCode;

use super::builders::ProductBuilder;
use super::*;

/// A product with `stock` units received, none sold (the [`ProductBuilder`]'s defaults).
pub async fn product_with_stock(db: &Db, sku: &str, stock: i64) -> Product {
    ProductBuilder::new(sku).stock(stock).build(db).await
}

pub async fn product(db: &Db, sku: &str) -> Product {
    products::by_sku(db, &super::sku(sku))
        .await
        .expect("query")
        .expect("product exists")
}

/// The reservations of `sku` holding units (`bazaar::stock::reservations_of`), oldest first.
pub async fn reservations(db: &Db, sku: &str) -> Vec<bazaar::stock::Reservation> {
    let sku = bazaar::domain::Sku::parse(sku).expect("a valid sku");
    bazaar::stock::reservations_of(db, &sku)
        .await
        .expect("reservations")
}

/// The stock invariants (`docs/invariants.md`) for one product with no move in flight:
/// `qty + reserved + sold = received`, and its reservations hold exactly `reserved`.
pub async fn assert_stock_invariant(db: &Db, sku: &str, received: i64) {
    let p = product(db, sku).await;
    assert!(p.qty >= 0, "{sku}: qty went negative: {}", p.qty);
    assert_eq!(
        p.qty + p.reserved + p.sold,
        received,
        "{sku}: qty {} + reserved {} + sold {} != received {received}",
        p.qty,
        p.reserved,
        p.sold
    );
    let held: i64 = reservations(db, sku).await.iter().map(|r| r.qty).sum();
    assert_eq!(
        held, p.reserved,
        "{sku}: reservations hold {held}, the product counts {} reserved",
        p.reserved
    );
}

/// One visitor with their own cookie jar.
pub struct Shopper {
    pub address: String,
    pub client: reqwest::Client,
    pub jar: Arc<Jar>,
    pub csrf: String,
}

impl Shopper {
    pub async fn new(app: &TestApp) -> Shopper {
        let (client, jar) = new_client();
        let mut shopper = Shopper {
            address: app.address.clone(),
            client,
            jar,
            csrf: String::new(),
        };
        shopper.refresh_token().await;
        shopper
    }

    /// A second browser sharing this shopper's session (same cart).
    pub async fn second_device(&self) -> Shopper {
        let (client, jar) = new_client();
        let url: reqwest::Url = self.address.parse().expect("url");
        use reqwest::cookie::CookieStore;
        if let Some(cookies) = self.jar.cookies(&url) {
            for cookie in cookies.to_str().expect("ascii").split("; ") {
                jar.add_cookie_str(cookie, &url);
            }
        }
        Shopper {
            address: self.address.clone(),
            client,
            jar,
            csrf: self.csrf.clone(),
        }
    }

    pub async fn refresh_token(&mut self) {
        let doc = html(&body(self.get("/products").await).await);
        // The listing has no form; the token lives in the session, so any page's form will do:
        // a product's, or on an empty shop the order lookup's.
        let page = match (csrf_token(&doc), attr(&doc, ".product-grid a", "href")) {
            (Some(t), _) => {
                self.csrf = t;
                return;
            }
            (None, Some(first)) => first,
            (None, None) => "/orders/lookup".to_string(),
        };
        let doc = html(&body(self.get(&page).await).await);
        self.csrf = csrf_token(&doc).expect("the page has a form");
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{}", self.address, path))
            .send()
            .await
            .expect("request sent")
    }

    pub async fn post(&self, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        let mut form: Vec<(&str, &str)> = fields.to_vec();
        form.push(("csrf_token", &self.csrf));
        self.client
            .post(format!("{}{}", self.address, path))
            .form(&form)
            .send()
            .await
            .expect("request sent")
    }

    /// Add to the cart and return the flash messages the cart (or product) page then shows.
    pub async fn add(&self, sku: &str, qty: &str) -> Vec<String> {
        let response = self
            .post("/cart/items", &[("sku", sku), ("qty", qty)])
            .await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        self.follow(response).await
    }

    pub async fn set_qty(&self, sku: &str, qty: &str) -> Vec<String> {
        let response = self
            .post(&format!("/cart/items/{sku}"), &[("qty", qty)])
            .await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        self.follow(response).await
    }

    pub async fn follow(&self, response: reqwest::Response) -> Vec<String> {
        let location = response
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .expect("a redirect")
            .to_string();
        let doc = html(&body(self.get(&location).await).await);
        texts(&doc, ".flash")
    }

    /// The cart page's lines as (sku, qty).
    pub async fn cart_lines(&self) -> Vec<(String, i64)> {
        let doc = html(&body(self.get("/cart").await).await);
        cart_lines(&doc)
    }
}

pub fn cart_lines(doc: &scraper::Html) -> Vec<(String, i64)> {
    let rows = scraper::Selector::parse(".cart-line").expect("selector");
    let qty = scraper::Selector::parse("input[name=qty]").expect("selector");
    doc.select(&rows)
        .map(|row| {
            let sku = row.value().attr("data-sku").unwrap_or_default().to_string();
            let n = row
                .select(&qty)
                .next()
                .and_then(|i| i.value().attr("value"))
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1);
            (sku, n)
        })
        .collect()
}

/// A checkout form that passes validation, paying with `card`.
pub fn checkout_form(card: &str) -> Vec<(&'static str, String)> {
    vec![
        ("email", "ada@example.com".to_string()),
        ("name", "Ada Lovelace".to_string()),
        ("street", "12 St James's Square".to_string()),
        ("city", "London".to_string()),
        ("postcode", "SW1Y 4JH".to_string()),
        ("country", "United Kingdom".to_string()),
        ("card_number", card.to_string()),
        ("expiry", "12/39".to_string()),
        ("cvc", "123".to_string()),
    ]
}

impl Shopper {
    /// Submit the checkout form; the response is returned unread.
    pub async fn checkout(&self, card: &str) -> reqwest::Response {
        let form = checkout_form(card);
        let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.post("/checkout", &fields).await
    }
}

/// Every active or pending cart's lines hold exactly what the products have reserved for them,
/// and no product holds a reservation for a cart that is not in use.
pub async fn assert_carts_match_reservations(db: &Db) {
    use bazaar::cart::{self, CartStatus};
    use futures::TryStreamExt;
    use std::collections::HashMap;
    let carts: Vec<cart::Cart> = cart::collection(db)
        .find(bson::doc! {})
        .await
        .expect("carts")
        .try_collect()
        .await
        .expect("carts");
    let all: Vec<bazaar::stock::Reservation> = db
        .collection::<bazaar::stock::Reservation>(bazaar::stock::COLLECTION)
        .find(bson::doc! {})
        .await
        .expect("reservations")
        .try_collect()
        .await
        .expect("reservations");
    let mut reserved: HashMap<(String, String), i64> = HashMap::new();
    // Keyed by the stored strings, so a cancelled order's hold is one more holder.
    for r in &all {
        *reserved
            .entry((r.holder.to_string(), r.sku.to_string()))
            .or_default() += r.qty;
    }
    for c in &carts {
        let in_use = matches!(c.status, CartStatus::Active | CartStatus::Pending);
        for line in &c.items {
            let held = reserved
                .remove(&(c.id.to_string(), line.sku.to_string()))
                .unwrap_or(0);
            let expected = if in_use { line.qty } else { 0 };
            assert_eq!(
                held, expected,
                "cart {} ({:?}) line {}: holds {} but {held} reserved",
                c.id, c.status, line.sku, line.qty
            );
        }
    }
    let stray: Vec<_> = reserved.into_iter().filter(|(_, n)| *n != 0).collect();
    assert!(
        stray.is_empty(),
        "reservations without a cart line: {stray:?}"
    );
}

/// A product with its reservations (`bazaar::stock::reservations_of`): what the stock tests
/// compare. Reads as the product otherwise.
pub struct Stock {
    pub product: Product,
    pub reservations: Vec<bazaar::stock::Reservation>,
}

impl Stock {
    /// Units `cart_id` holds reserved of this product.
    pub fn reserved_for(&self, cart_id: &bazaar::domain::CartId) -> i64 {
        self.reservations
            .iter()
            .filter(|r| r.holder.cart() == Some(cart_id))
            .map(|r| r.qty)
            .sum()
    }
}

impl std::ops::Deref for Stock {
    type Target = Product;

    fn deref(&self) -> &Product {
        &self.product
    }
}

/// The product `sku` and who holds its reserved units.
pub async fn stock(db: &Db, sku: &str) -> Stock {
    Stock {
        product: product(db, sku).await,
        reservations: reservations(db, sku).await,
    }
}

/// Simulate what a crash or an older version left behind: `qty` units of `sku` held by
/// `holder` (a cart id or `cancelled:<number>`) stamped `at`, counted in `reserved`, taken from
/// the product's counters as `taken` says (`{"sold": -1}`; empty: received from nowhere, as a
/// reservation whose units were never accounted for elsewhere).
pub async fn plant_reservation(
    db: &Db,
    sku: &str,
    holder: &str,
    qty: i64,
    at: bson::DateTime,
    taken: bson::Document,
) {
    let mut inc = taken;
    inc.insert("reserved", qty);
    db.collection::<bson::Document>(products::COLLECTION)
        .update_one(bson::doc! { "sku": sku }, bson::doc! { "$inc": inc })
        .await
        .expect("product counters");
    db.collection::<bson::Document>(bazaar::stock::COLLECTION)
        .update_one(
            bson::doc! { "sku": sku, "cart_id": holder },
            bson::doc! { "$inc": { "qty": qty }, "$set": { "timestamp": at } },
        )
        .upsert(true)
        .await
        .expect("reservation");
}
