//! The admin's orders, carts and stock screens: orders placed through the storefront are listed,
//! shipped and cancelled (a cancel returns the stock once), carts are counted by status and the
//! cart jobs run on demand, and stock levels flag what is running low.

use std::time::Duration;

use crate::common::shop::*;
use crate::common::*;
use bazaar::cart::{self, CartStatus};
use bazaar::catalog::products;
use bazaar::checkout::orders::{self, OrderStatus};
use bazaar::db::Db;
use bson::doc;
use reqwest::StatusCode;

/// A shopper buys `qty` of `sku`; returns the order number.
async fn place_order(app: &TestApp, sku: &str, qty: &str, name: &str, email: &str) -> String {
    let shopper = Shopper::new(app).await;
    shopper.add(sku, qty).await;
    let mut form = checkout_form("4242424242424242");
    for (field, value) in form.iter_mut() {
        match *field {
            "name" => *value = name.to_string(),
            "email" => *value = email.to_string(),
            _ => {}
        }
    }
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let response = shopper.post("/checkout", &fields).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let location = location(&response);
    location
        .strip_prefix("/orders/")
        .unwrap_or_else(|| panic!("checkout went to {location}"))
        .to_string()
}

/// The admin's CSRF token, from a page with a form.
async fn admin_token(app: &TestApp) -> String {
    csrf_token(&html(&body(app.get_admin("/admin/carts").await).await))
        .expect("the carts page has forms")
}

/// POST an admin form, expect a redirect to `back`, and return the flash messages shown there.
async fn admin_action(app: &TestApp, path: &str, back: &str) -> Vec<String> {
    let token = admin_token(app).await;
    let response = app
        .post_admin_form(path, &[("csrf_token", token.as_str())])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER, "{path}");
    assert_eq!(location(&response), back, "{path}");
    let doc = html(&body(app.get_admin(back).await).await);
    texts(&doc, ".flash")
}

async fn order_status(db: &Db, number: &str) -> OrderStatus {
    orders::by_number(db, &order_number(number))
        .await
        .expect("query")
        .expect("order exists")
        .status
}

#[tokio::test]
async fn every_orders_carts_and_stock_page_and_action_requires_the_admin_password() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "auth-1", 5).await;
    let number = place_order(&app, "auth-1", "1", "Ada Lovelace", "ada@example.com").await;
    let (anonymous, _jar) = new_client();
    let order_page = format!("/admin/orders/{number}");
    for path in [
        "/admin/orders",
        order_page.as_str(),
        "/admin/carts",
        "/admin/stock",
    ] {
        let response = anonymous.get(app.url(path)).send().await.expect("sent");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "GET {path}");
        let response = anonymous
            .get(app.url(path))
            .basic_auth(ADMIN_USER, Some("wrong password"))
            .send()
            .await
            .expect("sent");
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "GET {path} with a wrong password"
        );
    }
    let ship = format!("/admin/orders/{number}/ship");
    let cancel = format!("/admin/orders/{number}/cancel");
    for path in [
        ship.as_str(),
        cancel.as_str(),
        "/admin/carts/expire",
        "/admin/carts/cleanup",
    ] {
        let response = anonymous
            .post(app.url(path))
            .form(&[("csrf_token", "x")])
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "POST {path}");
    }
    assert_eq!(order_status(&app.db, &number).await, OrderStatus::Paid);
    // With the password, every page opens.
    for path in [
        "/admin/orders",
        order_page.as_str(),
        "/admin/carts",
        "/admin/stock",
    ] {
        assert_eq!(app.get_admin(path).await.status(), StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn the_orders_list_shows_orders_newest_first_and_filters_them_by_status() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "list-1", 10).await;
    let first = place_order(&app, "list-1", "1", "Ada Lovelace", "ada@example.com").await;
    let second = place_order(&app, "list-1", "3", "Grace Hopper", "grace@example.com").await;
    assert!(orders::mark_shipped(&app.db, &order_number(&first))
        .await
        .expect("ships"));

    let response = app.get_admin("/admin/orders").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Orders");
    assert_eq!(
        attr(&doc, "header nav a[aria-current=page]", "href").as_deref(),
        Some("/admin/orders")
    );
    assert_eq!(
        texts(&doc, ".order-row .order-number"),
        [second.clone(), first.clone()]
    );
    let customers = texts(&doc, ".order-row .order-customer");
    assert!(customers[0].contains("Grace Hopper") && customers[0].contains("grace@example.com"));
    assert!(customers[1].contains("Ada Lovelace") && customers[1].contains("ada@example.com"));
    assert_eq!(texts(&doc, ".order-row .order-units"), ["3", "1"]);
    // 3 × $12.00 + shipping for 900 g ($3.99 + 2 × $1.00); 1 × $12.00 + $4.99.
    assert_eq!(texts(&doc, ".order-row .order-total"), ["$41.99", "$16.99"]);
    assert_eq!(texts(&doc, ".order-row .status"), ["paid", "shipped"]);
    assert_eq!(texts(&doc, ".order-row .order-date").len(), 2);

    let filtered = |status: &'static str| {
        let app = &app;
        async move {
            let response = app
                .get_admin(&format!("/admin/orders?status={status}"))
                .await;
            assert_eq!(response.status(), StatusCode::OK, "status={status}");
            texts(&html(&body(response).await), ".order-row .order-number")
        }
    };
    assert_eq!(filtered("shipped").await, std::slice::from_ref(&first));
    assert_eq!(filtered("paid").await, std::slice::from_ref(&second));
    assert!(filtered("cancelled").await.is_empty());
    // An unknown status (or a mangled one) shows everything rather than failing.
    for bad in ["bogus", "", "%FF", "PAID"] {
        assert_eq!(
            filtered(bad).await,
            [second.clone(), first.clone()],
            "status={bad}"
        );
    }
}

#[tokio::test]
async fn an_order_detail_page_shows_the_items_address_and_actions_and_unknown_numbers_are_404() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "detail-1", 10).await;
    let number = place_order(&app, "detail-1", "2", "Ada Lovelace", "ada@example.com").await;

    let response = app.get_admin(&format!("/admin/orders/{number}")).await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), format!("Order {number}"));
    assert_eq!(
        texts(&doc, ".order-item td:first-child"),
        ["Test album detail-1"]
    );
    assert_eq!(texts(&doc, ".order-item .item-qty"), ["2"]);
    assert_eq!(texts(&doc, ".cart-totals .total"), ["$29.99"]);
    assert!(texts(&doc, ".order-address")[0].contains("12 St James's Square"));
    assert!(texts(&doc, "main .lead")[0].contains("ada@example.com"));
    // Shipping is the one button; cancelling is a link to its confirmation page.
    assert_eq!(texts(&doc, ".order-actions button"), ["Mark shipped"]);
    assert_eq!(texts(&doc, ".order-actions a.danger"), ["Cancel order…"]);

    for missing in ["BZ-999999", "nothing-here"] {
        let response = app.get_admin(&format!("/admin/orders/{missing}")).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{missing}");
    }
    let token = admin_token(&app).await;
    let response = app
        .post_admin_form(
            "/admin/orders/BZ-999999/cancel",
            &[("csrf_token", token.as_str())],
        )
        .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn marking_an_order_shipped_is_reported_and_a_shipped_order_can_no_longer_be_cancelled() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "ship-1", 5).await;
    let number = place_order(&app, "ship-1", "2", "Ada Lovelace", "ada@example.com").await;
    let detail = format!("/admin/orders/{number}");

    let flashes = admin_action(&app, &format!("{detail}/ship"), &detail).await;
    assert_eq!(flashes, [format!("Order {number} marked shipped.")]);
    assert_eq!(order_status(&app.db, &number).await, OrderStatus::Shipped);
    let doc = html(&body(app.get_admin(&detail).await).await);
    assert_eq!(texts(&doc, ".order-status .status"), ["shipped"]);
    assert!(texts(&doc, ".order-actions button").is_empty());

    // Shipping twice, or cancelling what has shipped, is refused and changes nothing.
    let flashes = admin_action(&app, &format!("{detail}/ship"), &detail).await;
    assert_eq!(flashes.len(), 1);
    assert!(
        flashes[0].contains("was not marked shipped") && flashes[0].contains("already shipped"),
        "{flashes:?}"
    );
    let flashes = admin_action(&app, &format!("{detail}/cancel"), &detail).await;
    assert!(
        flashes[0].contains("was not cancelled") && flashes[0].contains("already shipped"),
        "{flashes:?}"
    );
    assert_eq!(order_status(&app.db, &number).await, OrderStatus::Shipped);
    let p = stock(&app.db, "ship-1").await;
    assert_eq!((p.qty, p.sold), (3, 2));
    assert_stock_invariant(&app.db, "ship-1", 5).await;
}

#[tokio::test]
async fn cancelling_an_order_puts_its_units_back_on_sale_exactly_once() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "cancel-1", 5).await;
    let number = place_order(&app, "cancel-1", "2", "Ada Lovelace", "ada@example.com").await;
    let detail = format!("/admin/orders/{number}");
    let p = stock(&app.db, "cancel-1").await;
    assert_eq!((p.qty, p.sold, p.reservations.len()), (3, 2, 0));

    let flashes = admin_action(&app, &format!("{detail}/cancel"), &detail).await;
    assert_eq!(
        flashes,
        [format!(
            "Order {number} cancelled; 2 units are back in stock."
        )]
    );
    assert_eq!(order_status(&app.db, &number).await, OrderStatus::Cancelled);
    let p = stock(&app.db, "cancel-1").await;
    assert_eq!((p.qty, p.sold), (5, 0));
    assert_stock_invariant(&app.db, "cancel-1", 5).await;

    // A second cancel (a double click, another admin) is refused with a reason.
    let flashes = admin_action(&app, &format!("{detail}/cancel"), &detail).await;
    assert_eq!(flashes.len(), 1);
    assert!(
        flashes[0].contains("was not cancelled")
            && flashes[0].contains("already cancelled")
            && flashes[0].contains("nothing was changed"),
        "{flashes:?}"
    );
    // Nor can a cancelled order ship.
    let flashes = admin_action(&app, &format!("{detail}/ship"), &detail).await;
    assert!(
        flashes[0].contains("was not marked shipped") && flashes[0].contains("already cancelled"),
        "{flashes:?}"
    );
    assert_eq!(order_status(&app.db, &number).await, OrderStatus::Cancelled);
    let p = stock(&app.db, "cancel-1").await;
    assert_eq!((p.qty, p.sold), (5, 0));
    assert_stock_invariant(&app.db, "cancel-1", 5).await;
    let doc = html(&body(app.get_admin("/admin/orders?status=cancelled").await).await);
    assert_eq!(texts(&doc, ".order-row .order-number"), [number]);
}

/// The carts page's count per status, in `CartStatus::ALL` order.
fn cart_counts(doc: &scraper::Html) -> Vec<(String, u64)> {
    let rows = scraper::Selector::parse(".cart-counts tbody tr").expect("selector");
    let value = scraper::Selector::parse(".cart-count-value").expect("selector");
    doc.select(&rows)
        .map(|row| {
            let status = row.value().attr("data-status").unwrap_or_default();
            let n = row
                .select(&value)
                .next()
                .and_then(|v| v.text().collect::<String>().trim().parse().ok())
                .unwrap_or(u64::MAX);
            (status.to_string(), n)
        })
        .collect()
}

fn counts(pairs: [u64; 5]) -> Vec<(String, u64)> {
    CartStatus::ALL
        .iter()
        .zip(pairs)
        .map(|(s, n)| (s.as_str().to_string(), n))
        .collect()
}

#[tokio::test]
async fn the_carts_page_counts_carts_by_status_and_lists_the_selected_status() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "carts-1", 10).await;
    let browsing = Shopper::new(&app).await;
    browsing.add("carts-1", "3").await;
    place_order(&app, "carts-1", "1", "Ada Lovelace", "ada@example.com").await;

    let response = app.get_admin("/admin/carts").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Carts");
    assert_eq!(cart_counts(&doc), counts([1, 0, 1, 0, 0]));
    // Active carts by default: the browsing shopper's, with its units and subtotal.
    assert_eq!(texts(&doc, "#list-heading"), ["active carts"]);
    assert_eq!(texts(&doc, ".cart-row .cart-lines-count"), ["1"]);
    assert_eq!(texts(&doc, ".cart-row .cart-units"), ["3"]);
    assert_eq!(texts(&doc, ".cart-row .cart-subtotal"), ["$36.00"]);
    let active = cart::list_by_status(&app.db, CartStatus::Active, 50)
        .await
        .expect("query");
    assert_eq!(active.len(), 1);
    assert_eq!(
        attr(&doc, ".cart-row code", "title").as_deref(),
        Some(active[0].id.as_str())
    );
    assert_eq!(
        texts(&doc, ".cart-row code"),
        [active[0].id.as_str()[..8].to_string()]
    );

    let doc = html(&body(app.get_admin("/admin/carts?status=complete").await).await);
    assert_eq!(texts(&doc, ".cart-row .cart-units"), ["1"]);
    assert_eq!(texts(&doc, ".cart-row .cart-subtotal"), ["$12.00"]);
    let doc = html(&body(app.get_admin("/admin/carts?status=expired").await).await);
    assert!(texts(&doc, ".cart-row").is_empty());
    assert_eq!(texts(&doc, ".empty"), ["No expired carts."]);
    // An unknown status falls back to the active carts.
    let response = app.get_admin("/admin/carts?status=lost").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(texts(&doc, ".cart-row .cart-units"), ["3"]);
}

#[tokio::test]
async fn the_expire_button_expires_an_idle_cart_and_returns_its_stock() {
    let app = spawn_app_with(&[
        ("BAZAAR_CART__EXPIRE_AFTER_SECS", "1"),
        ("BAZAAR_CART__CLEANUP_AFTER_SECS", "2"),
    ])
    .await;
    product_with_stock(&app.db, "expire-1", 5).await;
    let idle = Shopper::new(&app).await;
    idle.add("expire-1", "2").await;
    assert_eq!(stock(&app.db, "expire-1").await.qty, 3);

    // Not idle long enough yet: nothing happens.
    let flashes = admin_action(&app, "/admin/carts/expire", "/admin/carts").await;
    assert_eq!(
        flashes,
        ["Expiry ran: 0 idle carts expired, 0 reservations returned to stock."]
    );
    assert_eq!(stock(&app.db, "expire-1").await.qty, 3);

    app.clock.step_forward(Duration::from_millis(1100));
    let flashes = admin_action(&app, "/admin/carts/expire", "/admin/carts").await;
    assert_eq!(
        flashes,
        ["Expiry ran: 1 idle cart expired, 1 reservation returned to stock."]
    );
    let p = stock(&app.db, "expire-1").await;
    assert_eq!((p.qty, p.reservations.len()), (5, 0));
    assert_stock_invariant(&app.db, "expire-1", 5).await;
    let doc = html(&body(app.get_admin("/admin/carts").await).await);
    assert_eq!(cart_counts(&doc), counts([0, 0, 0, 0, 1]));

    // Running it again returns nothing twice.
    let flashes = admin_action(&app, "/admin/carts/expire", "/admin/carts").await;
    assert_eq!(
        flashes,
        ["Expiry ran: 0 idle carts expired, 0 reservations returned to stock."]
    );
    assert_stock_invariant(&app.db, "expire-1", 5).await;
}

#[tokio::test]
async fn the_cleanup_button_returns_a_reservation_no_cart_holds_any_more() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "cleanup-1", 5).await;
    // A crash between the two writes of an add: the product reserved 2 units for a cart that
    // never recorded the line (here: a cart that does not exist), two hours ago.
    let two_hours_ago =
        bson::DateTime::from_millis(bson::DateTime::now().timestamp_millis() - 2 * 3_600_000);
    plant_reservation(
        &app.db,
        "cleanup-1",
        "lost-cart",
        2,
        two_hours_ago,
        doc! { "qty": -2_i64 },
    )
    .await;
    assert_stock_invariant(&app.db, "cleanup-1", 5).await;
    assert_eq!(stock(&app.db, "cleanup-1").await.qty, 3);

    let flashes = admin_action(&app, "/admin/carts/cleanup", "/admin/carts").await;
    assert_eq!(
        flashes,
        ["Cleanup ran: 0 reservations of carts in use refreshed, 1 returned to stock, 0 counted as sold."]
    );
    let p = stock(&app.db, "cleanup-1").await;
    assert_eq!((p.qty, p.reservations.len()), (5, 0));
    assert_stock_invariant(&app.db, "cleanup-1", 5).await;
}

/// The stock table's rows as (sku, available cell text, low-stock highlighted).
fn stock_rows(doc: &scraper::Html) -> Vec<(String, String, bool)> {
    let rows = scraper::Selector::parse(".admin-stock tbody tr").expect("selector");
    let available = scraper::Selector::parse(".stock-available").expect("selector");
    doc.select(&rows)
        .map(|row| {
            let sku = row.value().attr("data-sku").unwrap_or_default().to_string();
            let cell = row
                .select(&available)
                .next()
                .map(|c| c.text().collect::<String>().trim().to_string())
                .unwrap_or_default();
            let low = row.value().classes().any(|c| c == "low-stock");
            (sku, cell, low)
        })
        .collect()
}

/// The number at the end of an "available" cell ("Low 2" → 2).
fn available_units(cell: &str) -> i64 {
    cell.rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(i64::MIN)
}

#[tokio::test]
async fn the_stock_page_lists_fewest_available_first_and_flags_low_stock_visibly() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "stock-low", 2).await;
    product_with_stock(&app.db, "stock-edge", 4).await;
    product_with_stock(&app.db, "stock-plenty", 50).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("stock-plenty", "1").await;
    place_order(&app, "stock-edge", "1", "Ada Lovelace", "ada@example.com").await;

    let response = app.get_admin("/admin/stock").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Stock");
    let rows = stock_rows(&doc);
    let total = products::collection(&app.db)
        .count_documents(doc! {})
        .await
        .expect("count");
    assert_eq!(rows.len() as u64, total, "every product has a row");
    let available: Vec<i64> = rows
        .iter()
        .map(|(_, cell, _)| available_units(cell))
        .collect();
    assert!(
        available.windows(2).all(|w| w[0] <= w[1]),
        "not sorted by available: {available:?}"
    );
    for (sku, cell, low) in &rows {
        let units = available_units(cell);
        assert_eq!(
            *low,
            units <= 3,
            "{sku}: highlighted {low} with {units} available"
        );
        // Visible without colour: a text marker on every highlighted row.
        assert_eq!(cell.starts_with("Low"), *low, "{sku}: {cell}");
    }
    let row = |sku: &str| {
        rows.iter()
            .find(|(s, _, _)| s == sku)
            .unwrap_or_else(|| panic!("{sku} has a row"))
            .clone()
    };
    assert_eq!(row("stock-low"), ("stock-low".into(), "Low 2".into(), true));
    // 4 received, 1 sold: 3 left is low.
    assert_eq!(
        row("stock-edge"),
        ("stock-edge".into(), "Low 3".into(), true)
    );
    assert_eq!(
        row("stock-plenty"),
        ("stock-plenty".into(), "49".into(), false)
    );
    let cells = |sku: &str| {
        texts(
            &doc,
            &format!(
                "tr[data-sku={sku}] .stock-reserved, tr[data-sku={sku}] .stock-sold, \
                 tr[data-sku={sku}] .stock-received"
            ),
        )
    };
    assert_eq!(cells("stock-plenty"), ["1", "0", "50"]);
    assert_eq!(cells("stock-edge"), ["0", "1", "4"]);

    // Low stock only.
    let doc = html(&body(app.get_admin("/admin/stock?low=1").await).await);
    let rows = stock_rows(&doc);
    assert!(rows.iter().all(|(_, _, low)| *low), "{rows:?}");
    let skus: Vec<&str> = rows.iter().map(|(s, _, _)| s.as_str()).collect();
    assert!(skus.contains(&"stock-low") && skus.contains(&"stock-edge"));
    assert!(!skus.contains(&"stock-plenty"));
    assert_eq!(
        attr(&doc, "select[name=stock] option[selected]", "value").as_deref(),
        Some("low")
    );
}

#[tokio::test]
async fn every_orders_carts_and_stock_screen_query_uses_an_index() {
    let app = spawn_app().await;
    let db = &app.db;
    for low_only in [false, true] {
        let (filter, sort) = products::stock_levels_query(low_only);
        assert_projected_query_uses_index(
            db,
            &format!("stock levels (low only: {low_only})"),
            products::COLLECTION,
            filter,
            sort,
            products::stock_levels_projection(),
        )
        .await;
    }
    for status in CartStatus::ALL {
        let (filter, sort) = cart::by_status_query(status);
        assert_projected_query_uses_index(
            db,
            &format!("{} carts", status.as_str()),
            cart::COLLECTION,
            filter,
            sort,
            doc! {},
        )
        .await;
    }
    let statuses = std::iter::once(None).chain(OrderStatus::ALL.into_iter().map(Some));
    for status in statuses {
        let (filter, sort) = orders::list_query(status);
        assert_projected_query_uses_index(
            db,
            &format!("orders ({status:?})"),
            orders::COLLECTION,
            filter,
            sort,
            doc! {},
        )
        .await;
    }
}
