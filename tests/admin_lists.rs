//! The admin's lists, product lifecycle, confirmations and settings: lists page past a hundred
//! rows, sort by whitelisted columns, filter and search (regex characters match literally);
//! draft and archived products leave the storefront while orders keep them; destructive actions
//! ask first and need the CSRF token; shop settings reach the storefront and checkout totals;
//! admin error pages stay in the admin.

use crate::common::builders::{CategoryBuilder, ProductBuilder};
use crate::common::shop::*;
use crate::common::*;
use bazaar::catalog::products::{self, ProductStatus};
use bazaar::checkout::orders;
use bson::doc;
use reqwest::StatusCode;

/// The admin's CSRF token, from a page with a form.
async fn admin_token(app: &TestApp) -> String {
    csrf_token(&admin_page(app, "/admin/settings").await).expect("the settings page has a form")
}

/// A shopper buys `qty` of `sku`; returns the order number and the shopper.
async fn buy(app: &TestApp, sku: &str, qty: &str, email: &str) -> (String, Shopper) {
    let shopper = Shopper::new(app).await;
    shopper.add(sku, qty).await;
    let mut form = checkout_form("4242424242424242");
    for (field, value) in form.iter_mut() {
        if *field == "email" {
            *value = email.to_string();
        }
    }
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let response = shopper.post("/checkout", &fields).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let number = location(&response)
        .strip_prefix("/orders/")
        .expect("an order page")
        .to_string();
    (number, shopper)
}

/// Save the product `sku` through its admin form with `status`.
async fn set_status(app: &TestApp, sku: &str, status: &str) {
    let p = product(&app.db, sku).await;
    let url = format!("/admin/products/{}/edit", p.id.to_hex());
    let doc = admin_page(app, &url).await;
    let mut form = product_form(&doc);
    for (k, v) in form.iter_mut() {
        if k == "status" {
            *v = status.to_string();
        }
    }
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let response = app.post_admin_form(&url, &fields).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER, "saving {sku}");
}

fn rows(doc: &scraper::Html, selector: &str) -> Vec<String> {
    texts(doc, selector)
}

#[tokio::test]
async fn the_product_list_pages_past_a_hundred_rows_and_sorts_filters_and_searches() {
    let app = spawn_app().await;
    // Besides the 130 "page-" albums: two books and Kind of Blue.
    for sku in ["book-1", "book-2"] {
        ProductBuilder::new(sku).book().build(&app.db).await;
    }
    ProductBuilder::new("kob")
        .title("Kind of Blue")
        .build(&app.db)
        .await;
    for n in 0..130 {
        product_with_stock(&app.db, &format!("page-{n:03}"), n % 7).await;
    }
    // 130 matches: three pages of 50, nothing silently cut off.
    let doc = admin_page(&app, "/admin/products?q=page-").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["130"]);
    assert_eq!(count(&doc, "tr.product-row"), 50);
    let doc = admin_page(&app, "/admin/products?q=page-&page=3").await;
    assert_eq!(count(&doc, "tr.product-row"), 30);
    assert_eq!(texts(&doc, ".result-count .shown"), ["101–130"]);
    // A page past the end shows the last page; a bigger page size holds them all.
    let doc = admin_page(&app, "/admin/products?q=page-&page=99").await;
    assert_eq!(count(&doc, "tr.product-row"), 30);
    let doc = admin_page(&app, "/admin/products?q=page-&per_page=200").await;
    assert_eq!(count(&doc, "tr.product-row"), 130);

    // Titles link to their edit page; sorting by title both ways.
    let doc = admin_page(&app, "/admin/products?q=page-&sort=title").await;
    let titles = rows(&doc, "td.product-title a");
    assert_eq!(titles[0], "Test album page-000");
    let href = attr(&doc, "td.product-title a", "href").expect("link");
    let first = product(&app.db, "page-000").await;
    assert_eq!(href, format!("/admin/products/{}/edit", first.id.to_hex()));
    let doc = admin_page(&app, "/admin/products?q=page-&sort=-title").await;
    assert_eq!(rows(&doc, "td.product-title a")[0], "Test album page-129");
    // The sort link of the sorted column reverses it (to the default, title A–Z, which the
    // link leaves out) and keeps the search.
    assert_eq!(
        attr(&doc, "th[aria-sort=descending] a", "href").as_deref(),
        Some("/admin/products?q=page-")
    );
    assert_eq!(
        attr(&doc, "th.sortable a[href*=stock]", "href").as_deref(),
        Some("/admin/products?q=page-&sort=stock")
    );
    // Most in stock first.
    let doc = admin_page(&app, "/admin/products?q=page-&sort=-stock").await;
    assert_eq!(rows(&doc, "td.product-qty")[0], "6");
    // An unknown sort key is ignored, not passed to the database.
    let response = app.get_admin("/admin/products?sort=%24where").await;
    assert_eq!(response.status(), StatusCode::OK);

    // Filters: sold out only; by type; by status.
    let doc = admin_page(&app, "/admin/products?q=page-&stock=out&per_page=200").await;
    let sold_out = rows(&doc, "td.product-qty");
    assert_eq!(sold_out.len(), 19, "0, 7, 14, ... 126");
    assert!(sold_out.iter().all(|q| q == "0"), "{sold_out:?}");
    let books = products::collection(&app.db)
        .count_documents(doc! { "type": "book" })
        .await
        .expect("count");
    assert_eq!(books, 2);
    let doc = admin_page(&app, "/admin/products?type=book").await;
    assert_eq!(texts(&doc, ".result-count .total"), [books.to_string()]);
    assert_eq!(
        attr(&doc, "#filter-type option[selected]", "value").as_deref(),
        Some("book")
    );

    // Search finds any part of the title or SKU, ignoring case.
    let doc = admin_page(&app, "/admin/products?q=ALBUM%20PAGE-12").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["10"]);
    let doc = admin_page(&app, "/admin/products?q=of%20blu").await;
    assert!(rows(&doc, "td.product-title a").contains(&"Kind of Blue".to_string()));
}

#[tokio::test]
async fn search_input_with_regex_characters_matches_literally() {
    let app = spawn_app().await;
    let mut p = product_with_stock(&app.db, "rx-1", 3).await;
    p.title = "Live (1979) [Remastered]? *Deluxe*".to_string();
    products::collection(&app.db)
        .update_one(
            doc! { "_id": p.id },
            doc! { "$set": { "title": &p.title, "search_title": products::search_key(&p.title) } },
        )
        .await
        .expect("update");
    for (q, found) in [
        ("%281979%29%20%5Bremastered%5D%3F", 1),
        ("%2Adeluxe%2A", 1),
        ("%2E%2A", 0),
        ("%5B", 1),
        ("%28%2A%2B%3F%5B", 0),
        ("%5C", 0),
    ] {
        let doc = admin_page(&app, &format!("/admin/products?q={q}")).await;
        assert_eq!(
            texts(&doc, ".result-count .total"),
            [found.to_string()],
            "q={q}"
        );
    }
    // The stock list searches the same way.
    let doc = admin_page(&app, "/admin/stock?q=%5Bremastered").await;
    assert_eq!(
        texts(&doc, "tr.stock-row td.stock-title"),
        [p.title.clone()]
    );
}

#[tokio::test]
async fn an_order_placed_after_the_clock_stepped_back_is_still_listed_above_older_ones() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "ord-step", 10).await;
    let (first, _) = buy(&app, "ord-step", "1", "ada@example.com").await;
    let (second, _) = buy(&app, "ord-step", "1", "grace@example.org").await;
    // The second was placed after the clock stepped back an hour: its time reads earlier.
    let placed = orders::by_number(&app.db, &order_number(&first))
        .await
        .expect("query")
        .expect("order")
        .created;
    let an_hour_before = bson::DateTime::from_millis(placed.timestamp_millis() - 3_600_000);
    orders::collection(&app.db)
        .update_one(
            doc! { "number": &second },
            doc! { "$set": { "created": an_hour_before } },
        )
        .await
        .expect("stepped");
    let doc = admin_page(&app, "/admin/orders").await;
    assert_eq!(
        texts(&doc, "td.order-number"),
        [second.clone(), first.clone()]
    );
    let doc = admin_page(&app, "/admin/orders?status=paid").await;
    assert_eq!(
        texts(&doc, "td.order-number"),
        [second.clone(), first.clone()]
    );
    let doc = admin_page(&app, "/admin/orders?sort=placed").await;
    assert_eq!(texts(&doc, "td.order-number"), [first, second]);
}

#[tokio::test]
async fn orders_are_found_by_number_or_email_and_filtered_by_status() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "ord-1", 10).await;
    let (first, _) = buy(&app, "ord-1", "1", "ada@example.com").await;
    let (second, _) = buy(&app, "ord-1", "1", "grace@example.org").await;
    let doc = admin_page(&app, "/admin/orders?q=ADA%40EXAMPLE").await;
    assert_eq!(texts(&doc, "td.order-number"), std::slice::from_ref(&first));
    let doc = admin_page(&app, &format!("/admin/orders?q={}", &second[3..])).await;
    assert_eq!(
        texts(&doc, "td.order-number"),
        std::slice::from_ref(&second)
    );
    // Newest first by default; oldest first when asked.
    let doc = admin_page(&app, "/admin/orders").await;
    assert_eq!(
        texts(&doc, "td.order-number"),
        [second.clone(), first.clone()]
    );
    let doc = admin_page(&app, "/admin/orders?sort=placed").await;
    assert_eq!(
        texts(&doc, "td.order-number"),
        [first.clone(), second.clone()]
    );
    let doc = admin_page(&app, "/admin/orders?status=shipped").await;
    assert_eq!(count(&doc, "tr.order-row"), 0);
    // The stock and carts lists page too, and an unknown filter value is ignored.
    let doc = admin_page(&app, "/admin/stock?q=ord-&stock=nonsense").await;
    assert_eq!(
        texts(&doc, "tr.stock-row td.stock-title"),
        ["Test album ord-1"]
    );
    let doc = admin_page(&app, "/admin/carts?status=complete&sort=-changed").await;
    assert_eq!(count(&doc, ".cart-row"), 2);
}

#[tokio::test]
async fn draft_and_archived_products_leave_the_storefront_and_orders_keep_their_history() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "life-a", 5).await;
    product_with_stock(&app.db, "life-d", 5).await;
    // One that stays on sale, so the listing has a count to show.
    product_with_stock(&app.db, "life-on", 5).await;
    let (number, shopper) = buy(&app, "life-a", "1", "ada@example.com").await;

    set_status(&app, "life-a", "archived").await;
    set_status(&app, "life-d", "draft").await;
    assert_eq!(
        product(&app.db, "life-a").await.status,
        ProductStatus::Archived
    );
    assert_eq!(
        product(&app.db, "life-d").await.status,
        ProductStatus::Draft
    );

    for sku in ["life-a", "life-d"] {
        let response = app.get(&format!("/products/test-{sku}")).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{sku}");
        // The list's search finds the product on sale with the same words, never this one.
        let doc = html(&body(app.get(&format!("/products?q=test+album+{sku}")).await).await);
        let found = texts(&doc, ".product-grid .product-title");
        assert!(
            !found.contains(&format!("Test album {sku}")),
            "{sku}: {found:?}"
        );
        // Not addable to a cart either.
        let buyer = Shopper::new(&app).await;
        buyer.add(sku, "1").await;
        assert!(buyer.cart_lines().await.is_empty(), "{sku}");
    }
    // The shop's whole-catalog count leaves them out.
    let doc = html(&body(app.get("/products").await).await);
    let total = products::collection(&app.db)
        .count_documents(doc! {})
        .await
        .expect("count");
    assert!(
        body_text(&doc).contains(&format!("of {}", total - 2)),
        "the listing counts {} products on sale",
        total - 2
    );

    // The archived product's order still shows it, to the shopper and the admin.
    let doc = html(&body(shopper.get(&format!("/orders/{number}")).await).await);
    assert!(body_text(&doc).contains("Test album life-a"));
    let doc = admin_page(&app, &format!("/admin/orders/{number}")).await;
    assert!(body_text(&doc).contains("Test album life-a"));
    // The admin list finds them by status.
    let doc = admin_page(&app, "/admin/products?status=archived").await;
    assert_eq!(rows(&doc, "td.product-title a"), ["Test album life-a"]);
    let doc = admin_page(&app, "/admin/products?status=draft").await;
    assert_eq!(rows(&doc, "td.product-title a"), ["Test album life-d"]);

    // Active again: back in the shop.
    set_status(&app, "life-d", "active").await;
    let response = app.get("/products/test-life-d").await;
    assert_eq!(response.status(), StatusCode::OK);
}

fn body_text(doc: &scraper::Html) -> String {
    texts(doc, "main").join(" ")
}

#[tokio::test]
async fn a_product_is_deleted_only_if_never_ordered_and_only_after_confirming() {
    let app = spawn_app().await;
    let ordered = product_with_stock(&app.db, "del-ordered", 5).await;
    let spare = product_with_stock(&app.db, "del-spare", 5).await;
    buy(&app, "del-ordered", "1", "ada@example.com").await;
    let token = admin_token(&app).await;

    // Ordered: the page explains, and a POST changes nothing.
    let url = format!("/admin/products/{}/delete", ordered.id.to_hex());
    let doc = admin_page(&app, &url).await;
    assert!(texts(&doc, ".delete-refused")[0].contains("1 orders"));
    assert_eq!(count(&doc, "button.danger"), 0);
    let response = app
        .post_admin_form(&url, &[("csrf_token", token.as_str())])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(products::by_sku(&app.db, &sku("del-ordered"))
        .await
        .expect("query")
        .is_some());
    let doc = admin_page(
        &app,
        &format!("/admin/products/{}/edit", ordered.id.to_hex()),
    )
    .await;
    assert!(texts(&doc, ".flash-error")[0].contains("was not deleted"));

    // Never ordered: GET only asks; without the token nothing happens; with it, it is gone.
    let url = format!("/admin/products/{}/delete", spare.id.to_hex());
    let doc = admin_page(&app, &url).await;
    assert_eq!(heading(&doc), "Delete “Test album del-spare”?");
    assert_eq!(count(&doc, "form button.danger"), 1);
    assert!(product(&app.db, "del-spare").await.qty == 5);
    let response = app.post_admin_form(&url, &[]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(products::by_sku(&app.db, &sku("del-spare"))
        .await
        .expect("query")
        .is_some());
    let response = app
        .post_admin_form(&url, &[("csrf_token", token.as_str())])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), "/admin/products");
    assert!(products::by_sku(&app.db, &sku("del-spare"))
        .await
        .expect("query")
        .is_none());
}

#[tokio::test]
async fn cancelling_an_order_asks_first_and_says_what_goes_back_on_sale() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "cx-1", 5).await;
    let (number, _) = buy(&app, "cx-1", "2", "ada@example.com").await;

    // Mark shipped is the main button; cancel is a link to the confirmation.
    let doc = admin_page(&app, &format!("/admin/orders/{number}")).await;
    assert_eq!(
        texts(&doc, ".order-actions button.primary"),
        ["Mark shipped"]
    );
    assert_eq!(
        attr(&doc, ".order-actions a.danger", "href"),
        Some(format!("/admin/orders/{number}/cancel"))
    );

    let url = format!("/admin/orders/{number}/cancel");
    let doc = admin_page(&app, &url).await;
    assert_eq!(
        texts(&doc, ".restock-line"),
        ["2 × Test album cx-1 (cx-1) go back on sale."]
    );
    let status = |app: &TestApp| {
        let db = app.db.clone();
        let number = number.clone();
        async move {
            orders::by_number(&db, &order_number(&number))
                .await
                .expect("query")
                .expect("order")
                .status
        }
    };
    assert_eq!(
        status(&app).await,
        orders::OrderStatus::Paid,
        "GET only asks"
    );
    let response = app.post_admin_form(&url, &[]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(status(&app).await, orders::OrderStatus::Paid);
    let token = admin_token(&app).await;
    let response = app
        .post_admin_form(&url, &[("csrf_token", token.as_str())])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(status(&app).await, orders::OrderStatus::Cancelled);
    assert_eq!(product(&app.db, "cx-1").await.qty, 5);
    // Once cancelled, the page says it can no longer be cancelled.
    let doc = admin_page(&app, &url).await;
    assert_eq!(count(&doc, "form button.danger"), 0);
}

#[tokio::test]
async fn deleting_a_category_asks_first_and_says_where_its_contents_go() {
    let app = spawn_app().await;
    // Music → Jazz (two products) → Ragtime.
    let music = CategoryBuilder::new("music")
        .name("Music")
        .build(&app.db)
        .await;
    let jazz = CategoryBuilder::new("jazz")
        .name("Jazz")
        .parent(&music)
        .build(&app.db)
        .await;
    CategoryBuilder::new("ragtime")
        .name("Ragtime")
        .parent(&jazz)
        .build(&app.db)
        .await;
    for sku in ["jazz-1", "jazz-2"] {
        ProductBuilder::new(sku)
            .category(&jazz)
            .build(&app.db)
            .await;
    }
    let tree = admin_page(&app, "/admin/categories").await;
    let jazz = attr(&tree, "#category-jazz", "data-id").expect("jazz");
    // The tree shows product counts and links to one edit page per category.
    let jazz_count = texts(&tree, "#category-jazz .product-count");
    assert!(jazz_count[0].ends_with("products"), "{jazz_count:?}");
    assert_eq!(
        attr(&tree, "#category-jazz a.category-name", "href"),
        Some(format!("/admin/categories/{jazz}"))
    );

    let url = format!("/admin/categories/{jazz}/delete");
    let doc = admin_page(&app, &url).await;
    let children = texts(&doc, ".reparent-children").join(" ");
    assert!(children.contains("move under “Music”"), "{children}");
    assert!(children.contains("Ragtime"), "{children}");
    assert_eq!(
        attr(&doc, "form input[name=reparent]", "value").as_deref(),
        Some("1")
    );
    let response = app.post_admin_form(&url, &[("reparent", "1")]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(
        bazaar::catalog::categories::by_slug(&app.db, &crate::common::slug("jazz"))
            .await
            .expect("query")
            .is_some()
    );
    let token = admin_token(&app).await;
    let response = app
        .post_admin_form(&url, &[("csrf_token", token.as_str()), ("reparent", "1")])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(
        bazaar::catalog::categories::by_slug(&app.db, &crate::common::slug("jazz"))
            .await
            .expect("query")
            .is_none()
    );
    let ragtime = bazaar::catalog::categories::by_slug(&app.db, &crate::common::slug("ragtime"))
        .await
        .expect("query")
        .expect("ragtime stays");
    assert_eq!(
        ragtime
            .ancestors
            .iter()
            .map(|a| a.slug.as_str())
            .collect::<Vec<_>>(),
        ["music"]
    );
}

#[tokio::test]
async fn shop_settings_change_the_name_currency_and_the_shipping_charged_at_checkout() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "ship-1", 10).await;
    let token = admin_token(&app).await;
    // The product page keeps its product for a second (`catalog::product_cache`) with the
    // page's part made from it (`catalog::product_view`, prices included): viewed now, so the
    // page after the change below comes from that cache.
    let doc = html(&body(app.get(&product.url()).await).await);
    assert_eq!(texts(&doc, ".product-summary .retail"), ["$12.00"]);

    // Invalid values are explained, nothing is saved.
    let response = app
        .post_admin_form(
            "/admin/settings",
            &[
                ("csrf_token", token.as_str()),
                ("name", "Corner Records"),
                ("tagline", "Vinyl"),
                ("currency_symbol", "12"),
                ("shipping_base", "abc"),
                ("shipping_per_half_kilo", "1"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert_eq!(count(&doc, "#error-currency_symbol"), 1);
    assert_eq!(count(&doc, "#error-shipping_base"), 1);

    let response = app
        .post_admin_form(
            "/admin/settings",
            &[
                ("csrf_token", token.as_str()),
                ("name", "Corner Records"),
                ("tagline", "Vinyl, mostly"),
                ("currency_symbol", "€"),
                ("shipping_base", "5.00"),
                ("shipping_per_half_kilo", "2.50"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get("/").await).await);
    assert_eq!(texts(&doc, "header .brand"), ["Corner Records"]);
    assert_eq!(texts(&doc, ".hero h1"), ["Corner Records"]);
    assert_eq!(texts(&doc, ".hero .tagline"), ["Vinyl, mostly"]);
    // Error pages too.
    let doc = html(&body(app.get("/products/no-such-thing").await).await);
    assert_eq!(texts(&doc, "header .brand"), ["Corner Records"]);
    // The cached product's page part is made again for the new settings.
    let doc = html(&body(app.get(&product.url()).await).await);
    assert_eq!(texts(&doc, ".product-summary .retail"), ["€12.00"]);

    // A new shopper's cart and checkout charge the new rates: 3 × 300 g = 900 g, two started
    // half kilos: 5.00 + 2 × 2.50 = 10.00, shown with the new symbol.
    let shopper = Shopper::new(&app).await;
    shopper.add("ship-1", "3").await;
    let doc = html(&body(shopper.get("/checkout").await).await);
    assert!(body_text(&doc).contains("€10.00"), "{}", body_text(&doc));
    let fields_owned = checkout_form("4242424242424242");
    let fields: Vec<(&str, &str)> = fields_owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let response = shopper.post("/checkout", &fields).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let number = location(&response)
        .trim_start_matches("/orders/")
        .to_string();
    let order = orders::by_number(&app.db, &order_number(&number))
        .await
        .expect("query")
        .expect("order");
    assert_eq!(order.shipping.cents(), 1000);
    assert_eq!(order.total.cents(), 3 * 1200 + 1000);
    let doc = html(&body(shopper.get(&format!("/orders/{number}")).await).await);
    assert!(body_text(&doc).contains("€46.00"), "{}", body_text(&doc));
}

#[tokio::test]
async fn admin_error_pages_stay_in_the_admin_layout_with_a_way_back() {
    let app = spawn_app().await;
    for path in [
        "/admin/products/not-an-id/edit",
        "/admin/orders/BZ-999999",
        "/admin/categories/0123456789abcdef01234567",
        "/admin/no-such-screen",
    ] {
        let response = app.get_admin(path).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        let doc = html(&body(response).await);
        assert_eq!(count(&doc, "body.area-admin"), 1, "{path}");
        assert_eq!(
            attr(&doc, "main a.back-to-admin", "href").as_deref(),
            Some("/admin"),
            "{path}"
        );
        assert!(texts(&doc, "header nav a").contains(&"Products".to_string()));
    }
    // A bad request in the admin keeps its message and the admin layout.
    let response = app.get_admin("/admin/products/new?type=vinyl").await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let doc = html(&body(response).await);
    assert_eq!(count(&doc, "body.area-admin"), 1);
    assert!(body_text(&doc).contains("Choose a product type"));
    // Public pages keep the public layout.
    let response = app.get("/products/no-such-thing").await;
    let doc = html(&body(response).await);
    assert_eq!(count(&doc, "body.area-public"), 1);
    assert_eq!(count(&doc, "a.back-to-admin"), 0);
}

#[tokio::test]
async fn without_demo_data_the_shop_starts_empty_and_demo_data_can_be_removed() {
    // `spawn_app` is a start with `seed.demo = false`.
    let app = spawn_app().await;
    let doc = admin_page(&app, "/admin/products").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["0"]);
    app.stop().await;

    // About the demo data: removing it.
    let app = spawn_app_with_demo().await;
    let mine = product_with_stock(&app.db, "mine-1", 3).await;
    buy(&app, "demo0001", "1", "ada@example.com").await;
    let doc = admin_page(&app, "/admin/demo-data/remove").await;
    assert!(texts(&doc, ".demo-products")[0].starts_with("36 demo products"));
    let demo_count = || async {
        products::collection(&app.db)
            .count_documents(doc! { "sku": { "$regex": "^demo" } })
            .await
            .expect("count")
    };
    assert_eq!(demo_count().await, 36, "GET only asks");
    let response = app.post_admin_form("/admin/demo-data/remove", &[]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let token = admin_token(&app).await;
    let response = app
        .post_admin_form("/admin/demo-data/remove", &[("csrf_token", token.as_str())])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    // The ordered demo product is archived, the rest gone; the shop's own product stays.
    assert_eq!(demo_count().await, 1);
    assert_eq!(
        product(&app.db, "demo0001").await.status,
        ProductStatus::Archived
    );
    assert_eq!(product(&app.db, "mine-1").await.id, mine.id);
    let doc = html(&body(app.get("/products").await).await);
    assert_eq!(
        texts(&doc, ".product-grid .product-title"),
        ["Test album mine-1"]
    );
    let response = app.get("/pages/about").await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

/// A small PNG, `seed` varying its pixels.
fn png(seed: u8) -> Vec<u8> {
    let img = image::RgbaImage::from_fn(16, 16, |x, y| image::Rgba([x as u8, y as u8, seed, 255]));
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgba8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .expect("encode");
    out.into_inner()
}

/// POST the create form as a browser with a photo picker does: multipart, the token in the
/// action's query, text fields then files.
async fn create_multipart(
    app: &TestApp,
    token: &str,
    fields: &[(&str, &str)],
    files: &[(&str, Vec<u8>)],
) -> reqwest::Response {
    let boundary = "----bazaar-create-boundary-5fA2";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    for (filename, bytes) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"photos\"; filename=\"{filename}\"\r\nContent-Type: image/png\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    app.post_admin_multipart(
        &format!("/admin/products/new?type=album&csrf_token={token}"),
        boundary,
        body,
    )
    .await
}

#[tokio::test]
async fn photos_chosen_on_the_create_form_are_saved_in_order_and_can_be_reordered_and_removed() {
    let app = spawn_app().await;
    let doc = admin_page(&app, "/admin/products/new?type=album").await;
    assert_eq!(
        attr(&doc, "form.product-form", "enctype").as_deref(),
        Some("multipart/form-data")
    );
    assert_eq!(
        count(&doc, "form.product-form input[type=file][name=photos]"),
        1
    );
    let token = csrf_token(&doc).expect("token");
    let fields = [
        ("csrf_token", token.as_str()),
        ("title", "Mingus Ah Um"),
        ("sku", "ph-1"),
        ("list_price", "20"),
        ("retail_price", "15"),
        ("qty", "4"),
        ("artist", "Charles Mingus"),
        ("label", "Columbia"),
        ("issue_date", "1959-10-16"),
        ("status", "active"),
    ];
    let before = stored_files(&app).await;

    // A field error: nothing saved, the photo that arrived is not kept.
    let mut bad = fields.to_vec();
    bad[1] = ("title", "");
    let response = create_multipart(&app, &token, &bad, &[("a.png", png(1))]).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(texts(&doc, ".form-error")[0].contains("Choose the photos again"));
    assert_eq!(stored_files(&app).await, before);
    // A file that is not an image is refused by name; nothing is saved.
    let response =
        create_multipart(&app, &token, &fields, &[("notes.png", b"hello".to_vec())]).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(products::by_sku(&app.db, &sku("ph-1"))
        .await
        .expect("query")
        .is_none());
    // Without the token nothing is created.
    let response = create_multipart(&app, "wrong", &fields, &[]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);

    let response = create_multipart(
        &app,
        &token,
        &fields,
        &[("a.png", png(1)), ("b.png", png(2))],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let p = product(&app.db, "ph-1").await;
    assert_eq!(p.photos.len(), 2);
    let (first, second) = (p.photos[0], p.photos[1]);

    // Reorder: the second becomes the cover.
    let edit = format!("/admin/products/{}/edit", p.id.to_hex());
    let doc = admin_page(&app, &edit).await;
    assert_eq!(count(&doc, "li.admin-photo"), 2);
    let response = app
        .post_admin_form(
            &format!(
                "/admin/products/{}/photos/{}/move",
                p.id.to_hex(),
                second.to_hex()
            ),
            &[("csrf_token", token.as_str()), ("direction", "earlier")],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(product(&app.db, "ph-1").await.photos, [second, first]);
    // Remove: the photo and its file go.
    let files = stored_files(&app).await;
    let response = app
        .post_admin_form(
            &format!(
                "/admin/products/{}/photos/{}/remove",
                p.id.to_hex(),
                second.to_hex()
            ),
            &[("csrf_token", token.as_str())],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(product(&app.db, "ph-1").await.photos, [first]);
    assert!(stored_files(&app).await < files);
}

#[tokio::test]
async fn the_lists_default_sorts_are_served_by_indexes() {
    let app = spawn_app().await;
    let db = &app.db;
    for (what, collection, filter, sort) in [
        (
            "products by title",
            products::COLLECTION,
            doc! {},
            doc! { "search_title": 1, "_id": 1 },
        ),
        (
            "products by price",
            products::COLLECTION,
            doc! {},
            doc! { "pricing.retail": -1, "_id": -1 },
        ),
        (
            "products in a category",
            products::COLLECTION,
            doc! { "category_path": bson::oid::ObjectId::new() },
            doc! { "search_title": 1, "_id": 1 },
        ),
        (
            "stock, fewest first",
            products::COLLECTION,
            doc! {},
            doc! { "qty": 1, "_id": 1 },
        ),
        (
            "orders, newest first",
            orders::COLLECTION,
            doc! {},
            doc! { "created": -1, "_id": -1 },
        ),
        (
            "paid orders, newest first",
            orders::COLLECTION,
            doc! { "status": "paid" },
            doc! { "created": -1, "_id": -1 },
        ),
        (
            "active carts, last changed first",
            bazaar::cart::COLLECTION,
            doc! { "status": "active" },
            doc! { "last_modified": -1, "_id": -1 },
        ),
        (
            "was a product ever ordered",
            orders::COLLECTION,
            doc! { "items.sku": "demo0001" },
            doc! {},
        ),
    ] {
        assert_uses_index(db, what, collection, filter, sort).await;
    }
}
