//! The shopper's experience over HTTP: filters that match what people type (with chips, the
//! heading and bad values explained), honest stock states, the cart page's lines, the checkout's
//! error summary and country list, the confirmation that promises no email, the order lookup,
//! and the header's cart count on error pages.

use std::collections::BTreeSet;

use crate::common::builders::{CategoryBuilder, ProductBuilder};
use crate::common::shop::*;
use crate::common::*;
use bson::doc;
use reqwest::StatusCode;

/// The `href` of every element matching `selector`.
fn hrefs(doc: &scraper::Html, selector: &str) -> Vec<String> {
    let s = scraper::Selector::parse(selector).expect("selector");
    doc.select(&s)
        .filter_map(|e| e.value().attr("href").map(str::to_string))
        .collect()
}

/// What the filter tests filter: four jazz albums (Kind of Blue by Miles Davis, three by John
/// Coltrane, filed under Jazz) and a swing one, Harrison Ford's three films and one without
/// him, and a book by Ursula K. Le Guin; $9.99 to $19.99.
async fn filterable_shop(app: &TestApp) {
    let db = &app.db;
    let jazz = CategoryBuilder::new("jazz").name("Jazz").build(db).await;
    let album = |sku: &str, title: &str, artist: &str, genre: &str, cents: i64| {
        ProductBuilder::new(sku)
            .slug(sku)
            .title(title)
            .people(&[artist])
            .genre(&[genre])
            .price(cents, 1999)
            .stock(3)
    };
    album("kind-of-blue", "Kind of Blue", "Miles Davis", "Jazz", 1299)
        .build(db)
        .await;
    for (sku, title, cents) in [
        ("a-love-supreme", "A Love Supreme", 1499),
        ("blue-train", "Blue Train", 999),
        ("giant-steps", "Giant Steps", 1999),
    ] {
        album(sku, title, "John Coltrane", "Jazz", cents)
            .category(&jazz)
            .build(db)
            .await;
    }
    album(
        "atomic-basie",
        "The Atomic Mr. Basie",
        "Count Basie",
        "Swing",
        1100,
    )
    .build(db)
    .await;
    for (sku, title, issued, cast) in [
        (
            "star-wars",
            "Star Wars",
            "1977-05-25",
            &["Mark Hamill", "Harrison Ford"][..],
        ),
        ("alien", "Alien", "1979-05-25", &["Sigourney Weaver"][..]),
        (
            "raiders",
            "Raiders of the Lost Ark",
            "1981-06-12",
            &["Harrison Ford"][..],
        ),
        (
            "blade-runner",
            "Blade Runner",
            "1982-06-25",
            &["Harrison Ford"][..],
        ),
    ] {
        ProductBuilder::new(sku)
            .slug(sku)
            .title(title)
            .film()
            .issued(issued)
            .people(cast)
            .price(1599, 1999)
            .stock(3)
            .build(db)
            .await;
    }
    ProductBuilder::new("dispossessed")
        .slug("the-dispossessed")
        .title("The Dispossessed")
        .book()
        .people(&["Ursula K. Le Guin"])
        .price(1099, 1599)
        .stock(3)
        .build(db)
        .await;
}

#[tokio::test]
async fn genre_and_person_filters_ignore_case_and_spacing() {
    let app = spawn_app().await;
    filterable_shop(&app).await;
    let lower = titles(&page(&app, "/products?genre=jazz&sort=title").await);
    assert!(lower.len() > 3, "{lower:?}");
    for variant in ["JAZZ", "Jazz", "%20%20jaZZ%20"] {
        let found = titles(&page(&app, &format!("/products?genre={variant}&sort=title")).await);
        assert_eq!(found, lower, "genre={variant}");
    }
    for path in [
        "/products?person=miles+davis",
        "/products?person=MILES+%20DAVIS",
        "/products?type=album&person=miles+davis",
    ] {
        assert_eq!(titles(&page(&app, path).await), ["Kind of Blue"], "{path}");
    }
    // A film's people are its actors: the type's own field, whatever the case.
    assert_eq!(
        titles(&page(&app, "/products?type=film&person=harrison+ford").await),
        ["Blade Runner", "Raiders of the Lost Ark", "Star Wars"]
    );
    // An author is not an album's artist.
    let doc = page(&app, "/products?type=album&person=ursula+k.+le+guin").await;
    assert!(titles(&doc).is_empty());
    app.stop().await;
}

#[tokio::test]
async fn active_filters_show_as_removable_chips_and_in_the_heading() {
    let app = spawn_app().await;
    filterable_shop(&app).await;
    let doc = page(
        &app,
        "/products?type=album&genre=jazz&person=miles+davis&sort=title",
    )
    .await;
    assert_eq!(heading(&doc), "Shop: Albums · jazz · by miles davis");
    assert_eq!(
        texts(&doc, ".filter-chip span"),
        ["Albums", "Genre: jazz", "By miles davis"]
    );
    let removes = hrefs(&doc, ".filter-chip a");
    assert_eq!(
        removes,
        [
            "/products?genre=jazz&person=miles+davis&sort=title",
            "/products?type=album&person=miles+davis&sort=title",
            "/products?type=album&genre=jazz&sort=title",
        ]
    );
    assert_eq!(
        attr(&doc, ".filter-chip a", "aria-label").as_deref(),
        Some("Remove filter: Albums")
    );
    // "Clear all" drops every filter and keeps the sort.
    assert_eq!(hrefs(&doc, ".filter-clear a"), ["/products?sort=title"]);
    // Following a chip's link removes just that filter.
    let without_person = page(&app, &removes[2]).await;
    assert!(titles(&without_person).len() > 1);
    assert_eq!(heading(&without_person), "Shop: Albums · jazz");
    // No filters, no chips, the plain heading.
    let doc = page(&app, "/products").await;
    assert_eq!(heading(&doc), "Shop");
    assert_eq!(count(&doc, ".filter-chips"), 0);
    // The category page says what it is narrowed to as well.
    let doc = page(&app, "/categories/jazz?person=John+Coltrane").await;
    assert_eq!(heading(&doc), "Jazz: by John Coltrane");
    app.stop().await;
}

#[tokio::test]
async fn a_bad_price_is_explained_on_the_page_and_not_applied() {
    let app = spawn_app().await;
    filterable_shop(&app).await;
    let all = page(&app, "/products").await;
    let doc = page(&app, "/products?min_price=abc&max_price=12").await;
    let problems = texts(&doc, ".filter-problem");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("minimum price “abc”"), "{problems:?}");
    assert!(problems[0].contains("not applied"), "{problems:?}");
    // The field shows what was typed, marked invalid and pointing at the message; the form is
    // unfolded so it can be corrected.
    assert_eq!(attr(&doc, "#f-min", "value").as_deref(), Some("abc"));
    assert_eq!(
        attr(&doc, "#f-min", "aria-invalid").as_deref(),
        Some("true")
    );
    assert_eq!(
        attr(&doc, "#f-min", "aria-describedby").as_deref(),
        Some("problem-min_price")
    );
    assert!(attr(&doc, "details.filter-disclosure", "open").is_some());
    // The good filter still applies, the bad one does not.
    assert_eq!(texts(&doc, ".filter-chip span"), ["Up to $12.00"]);
    let total = |d: &scraper::Html| texts(d, ".result-count .total")[0].clone();
    assert!(total(&doc).parse::<u32>().expect("count") < total(&all).parse().expect("count"));
    // Markup in a bad value is shown as text; a bad discount is explained too.
    let response = app
        .get("/products?max_price=%3Cscript%3Ex&min_discount=500")
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let text = body(response).await;
    assert!(!text.contains("<script>x"), "escaped");
    let doc = html(&text);
    assert_eq!(texts(&doc, ".filter-problem").len(), 2);
    // Without a problem the form starts folded (on phones the chips say what is in force).
    assert!(attr(&all, "details.filter-disclosure", "open").is_none());
    app.stop().await;
}

#[tokio::test]
async fn products_stored_before_the_normalised_keys_get_them_at_start_up() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "old-1", 5).await;
    bazaar::catalog::products::collection(&app.db)
        .update_one(
            doc! { "sku": "old-1" },
            doc! { "$unset": { "genre_keys": "", "people_keys": "" } },
        )
        .await
        .expect("unset");
    let doc = page(&app, "/products?person=the+testers").await;
    assert!(titles(&doc).is_empty(), "not found without its keys");
    let updated = bazaar::catalog::facets::backfill(&app.db)
        .await
        .expect("backfill");
    assert_eq!(updated, 1, "only the product without keys");
    let stored = product(&app.db, "old-1").await;
    assert_eq!(stored.people_keys, ["the testers"]);
    assert_eq!(stored.genre_keys, ["jazz"]);
    let doc = page(&app, "/products?person=The+Testers&genre=JAZZ").await;
    assert_eq!(titles(&doc), ["Test album old-1"]);
    assert_eq!(
        bazaar::catalog::facets::backfill(&app.db)
            .await
            .expect("again"),
        0
    );
    // The start-up check is an index lookup, not a scan of the catalog.
    assert_uses_index(
        &app.db,
        "products missing their filter keys",
        bazaar::catalog::products::COLLECTION,
        bazaar::catalog::facets::missing_keys_filter(),
        doc! {},
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn a_sold_out_product_looks_sold_out_and_says_what_other_carts_hold() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "last", 3).await;
    let url = "/products/test-last";
    let doc = page(&app, url).await;
    assert_eq!(texts(&doc, ".stock"), ["Only 3 left"]);
    assert_eq!(count(&doc, ".stock-held"), 0);
    assert_eq!(count(&doc, "form.add-to-cart button[disabled]"), 0);

    let first = Shopper::new(&app).await;
    first.add("last", "1").await;
    let second = Shopper::new(&app).await;
    second.add("last", "2").await;
    // Sold out for a third visitor: disabled button saying so, disabled quantity, the label,
    // and the units in carts that may come back.
    let doc = page(&app, url).await;
    assert_eq!(texts(&doc, ".stock"), ["Sold out"]);
    assert_eq!(
        texts(&doc, "form.add-to-cart button[disabled]"),
        ["Sold out"]
    );
    assert!(attr(&doc, "#cart-qty", "disabled").is_some());
    assert_eq!(
        texts(&doc, ".stock-held"),
        ["3 more are in shoppers' carts and may come back."]
    );
    // A shopper holding some sees only the others' share.
    let doc = html(&body(second.get(url).await).await);
    assert_eq!(
        texts(&doc, ".stock-held"),
        ["1 more is in a shopper's cart and may come back."]
    );
    // The product card in listings says so too.
    let doc = page(&app, "/products?person=the+testers").await;
    assert_eq!(texts(&doc, ".product-card .stock-out"), ["Sold out"]);
    app.stop().await;
}

#[tokio::test]
async fn sold_out_products_come_last_on_the_newest_shelf() {
    let app = spawn_app().await;
    // More products than the shelf holds, the one kept in stock the oldest.
    for i in 1..=6 {
        product_with_stock(&app.db, &format!("shelf-{i}"), 5).await;
    }
    let doc = page(&app, "/").await;
    let stock = texts(&doc, "#newest .product-card");
    assert_eq!(stock.len(), 4);
    assert!(
        stock.iter().all(|card| !card.contains("Sold out")),
        "enough in stock to fill the shelf: {stock:?}"
    );
    // Sell out everything but one product: it leads, the sold-out ones follow, newest first.
    let keep = "shelf-1";
    bazaar::catalog::products::collection(&app.db)
        .update_many(
            doc! { "sku": { "$ne": keep } },
            doc! { "$set": { "qty": 0 } },
        )
        .await
        .expect("sold out");
    // Written behind the app's back (as another instance would): the shelves' cache would show
    // the change within seconds; clear it as this instance's own writes do.
    bazaar::catalog::changes::products_changed(&app.db);
    let doc = page(&app, "/").await;
    let cards = texts(&doc, "#newest .product-card");
    assert_eq!(cards.len(), 4);
    let kept = product(&app.db, keep).await;
    assert!(cards[0].contains(&kept.title), "{cards:?}");
    assert!(
        cards[1..].iter().all(|c| c.contains("Sold out")),
        "{cards:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn cart_lines_name_their_item_and_carry_their_own_stock_note() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "few", 3).await;
    product_with_stock(&app.db, "many", 20).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("few", "2").await;
    shopper.add("many", "1").await;
    let doc = html(&body(shopper.get("/cart").await).await);
    // Low stock is a note on its line, not a banner above the cart.
    assert_eq!(count(&doc, ".cart-notices"), 0);
    let line = |sku: &str| format!(".cart-line[data-sku='{sku}']");
    assert_eq!(
        texts(&doc, &format!("{} .line-note", line("few"))),
        ["Only 1 more left."]
    );
    assert_eq!(count(&doc, &format!("{} .line-note", line("many"))), 0);
    // Buttons say which item they act on.
    assert_eq!(
        texts(&doc, &format!("{} .line-remove button", line("few"))),
        ["Remove Test album few"]
    );
    assert_eq!(
        texts(&doc, &format!("{} .qty-form button", line("many"))),
        ["Update quantity of Test album many"]
    );
    // A thumbnail (placeholder without a photo) on each line, one checkout button.
    assert_eq!(count(&doc, ".line-thumb"), 2);
    assert_eq!(count(&doc, "a.checkout-button"), 1);
    // A product with a cover shows its thumbnail.
    let covered = ProductBuilder::new("covered")
        .stock(5)
        .cover()
        .build(&app.db)
        .await;
    shopper.add(covered.sku.as_str(), "1").await;
    let doc = html(&body(shopper.get("/cart").await).await);
    let sku = covered.sku.to_string();
    assert_eq!(
        attr(&doc, &format!("{} .line-thumb img", line(&sku)), "src"),
        covered.cover_url()
    );
    app.stop().await;
}

/// The checkout form with one field changed.
fn form_with(card: &str, field: &str, value: &str) -> Vec<(&'static str, String)> {
    let mut form = checkout_form(card);
    for (name, v) in form.iter_mut() {
        if *name == field {
            *v = value.to_string();
        }
    }
    form
}

async fn submit(shopper: &Shopper, form: &[(&'static str, String)]) -> reqwest::Response {
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    shopper.post("/checkout", &fields).await
}

#[tokio::test]
async fn checkout_errors_are_summarised_with_links_and_the_card_number_is_kept() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "co", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("co", "1").await;
    let doc = html(&body(shopper.get("/checkout").await).await);
    assert_eq!(count(&doc, ".error-summary"), 0);
    // The country is a list with nothing chosen yet.
    assert!(count(&doc, "select#field-country option") > 200);
    assert_eq!(count(&doc, "select#field-country option[selected]"), 0);

    let mut form = form_with("4242 4242 4242 4242", "postcode", " ");
    form.retain(|(k, _)| *k != "country");
    form.push(("country", "Posix".into()));
    let response = submit(&shopper, &form).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let doc = html(&body(response).await);
    // The summary takes focus (autofocus, focusable) and links each problem to its field, in
    // the order of the form.
    assert!(attr(&doc, ".error-summary", "autofocus").is_some());
    assert_eq!(
        attr(&doc, ".error-summary", "tabindex").as_deref(),
        Some("-1")
    );
    assert_eq!(
        hrefs(&doc, ".error-summary a"),
        ["#field-postcode", "#field-country"]
    );
    assert!(texts(&doc, ".error-summary a")[1].contains("Choose your country"));
    for id in ["field-postcode", "field-country"] {
        let sel = format!("#{id}");
        assert_eq!(attr(&doc, &sel, "aria-invalid").as_deref(), Some("true"));
        let described = attr(&doc, &sel, "aria-describedby").expect("described");
        assert_eq!(count(&doc, &format!("#{described}.field-error")), 1);
    }
    assert_eq!(count(&doc, ".field-invalid"), 2);
    // The card number survives another field's mistake; the security code is asked again.
    assert_eq!(
        attr(&doc, "#field-card_number", "value").as_deref(),
        Some("4242 4242 4242 4242")
    );
    assert_eq!(attr(&doc, "#field-cvc", "value").as_deref(), Some(""));
    assert_eq!(app.gateway.charge_count().await, 0);

    // A country is matched whatever its case and stored as the list spells it.
    let form = form_with("4242 4242 4242 4242", "country", "united kingdom");
    let response = submit(&shopper, &form).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let order = bazaar::checkout::orders::by_number(&app.db, &order_number("BZ-000001"))
        .await
        .expect("query")
        .expect("order");
    assert_eq!(order.address.country, "United Kingdom");
    app.stop().await;
}

#[tokio::test]
async fn the_selected_country_is_kept_when_the_form_comes_back() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "keep", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("keep", "1").await;
    let response = submit(&shopper, &form_with("4242 4242 4242 4242", "email", "nope")).await;
    let doc = html(&body(response).await);
    assert_eq!(
        texts(&doc, "select#field-country option[selected]"),
        ["United Kingdom"]
    );
    app.stop().await;
}

/// Place an order as a fresh shopper; returns the shopper and the order number.
async fn placed_order(app: &TestApp, sku: &str) -> (Shopper, String) {
    product_with_stock(&app.db, sku, 5).await;
    let shopper = Shopper::new(app).await;
    shopper.add(sku, "1").await;
    let response = shopper.checkout("4242 4242 4242 4242").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let number = location(&response)
        .trim_start_matches("/orders/")
        .to_string();
    (shopper, number)
}

#[tokio::test]
async fn the_confirmation_says_where_the_email_goes_and_points_to_the_order_lookup() {
    let app = spawn_app().await;
    let (shopper, number) = placed_order(&app, "conf").await;
    let text = body(shopper.get(&format!("/orders/{number}")).await).await;
    let doc = html(&text);
    let keep = texts(&doc, ".order-keep").join(" ");
    assert!(
        keep.contains("confirmation email is on its way to"),
        "{keep}"
    );
    // The message it promises is queued in the outbox.
    let queued = app
        .db
        .collection::<bson::Document>("outbox")
        .count_documents(bson::doc! { "_id": format!("order-placed/{number}") })
        .await
        .expect("outbox counted");
    assert_eq!(queued, 1, "the confirmation email is in the outbox");
    assert!(keep.contains(&number), "{keep}");
    assert_eq!(hrefs(&doc, ".order-keep a"), ["/orders/lookup"]);
    app.stop().await;
}

#[tokio::test]
async fn an_order_is_found_again_by_number_and_email_and_wrong_halves_answer_alike() {
    let app = spawn_app().await;
    let (_, number) = placed_order(&app, "find").await;
    let stranger = Shopper::new(&app).await;
    let order_url = format!("/orders/{number}");
    assert_eq!(
        stranger.get(&order_url).await.status(),
        StatusCode::NOT_FOUND
    );
    // Every page's footer leads to the lookup.
    let home = html(&body(stranger.get("/").await).await);
    assert!(hrefs(&home, "footer a").contains(&"/orders/lookup".to_string()));
    let form = html(&body(stranger.get("/orders/lookup").await).await);
    assert_eq!(heading(&form), "Find your order");
    assert!(csrf_token(&form).is_some(), "the form carries a CSRF token");

    // Without the token: refused.
    let response = stranger
        .client
        .post(format!("{}/orders/lookup", app.address))
        .form(&[("number", number.as_str()), ("email", "ada@example.com")])
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);

    // A wrong email and a wrong number get the same page.
    let answer = |number: &str, email: &str| {
        let (number, email) = (number.to_string(), email.to_string());
        let stranger = &stranger;
        async move {
            let response = stranger
                .post(
                    "/orders/lookup",
                    &[("number", number.as_str()), ("email", email.as_str())],
                )
                .await;
            let status = response.status();
            let doc = html(&body(response).await);
            (status, texts(&doc, ".lookup-problem"))
        }
    };
    let wrong_email = answer(&number, "eve@example.com").await;
    let wrong_number = answer("BZ-000999", "ada@example.com").await;
    let nonsense = answer("<b>x</b>", "ada@example.com").await;
    assert_eq!(wrong_email.0, StatusCode::OK);
    assert_eq!(wrong_email.1.len(), 1);
    assert_eq!(wrong_email, wrong_number);
    assert_eq!(wrong_email, nonsense);
    assert_eq!(
        stranger.get(&order_url).await.status(),
        StatusCode::NOT_FOUND
    );

    // Both right (the email in another case, the number without its prefix): to the order.
    let digits = number.trim_start_matches("BZ-").trim_start_matches('0');
    let response = stranger
        .post(
            "/orders/lookup",
            &[("number", digits), ("email", " ADA@example.com")],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), order_url);
    let doc = html(&body(stranger.get(&order_url).await).await);
    assert_eq!(heading(&doc), format!("Order {number}"));
    app.stop().await;
}

#[tokio::test]
async fn order_lookups_are_rate_limited_per_client() {
    let app = spawn_app_with(&[("BAZAAR_CART__ORDER_LOOKUPS_PER_HOUR", "3")]).await;
    let (_, number) = placed_order(&app, "limit").await;
    let guesser = Shopper::new(&app).await;
    let mut statuses = Vec::new();
    for i in 0..4 {
        let email = format!("guess{i}@example.com");
        let response = guesser
            .post(
                "/orders/lookup",
                &[("number", number.as_str()), ("email", email.as_str())],
            )
            .await;
        statuses.push(response.status());
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    // Even the right pair is refused until the limit refills.
    let response = guesser
        .post(
            "/orders/lookup",
            &[("number", number.as_str()), ("email", "ada@example.com")],
        )
        .await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let doc = html(&body(response).await);
    assert!(texts(&doc, ".lookup-problem")[0].contains("Too many lookups"));
    app.stop().await;
}

#[tokio::test]
async fn the_header_cart_count_is_right_on_error_pages() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "err", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("err", "2").await;
    for (path, status) in [
        ("/no-such-page", StatusCode::NOT_FOUND),
        ("/products/no-such-product", StatusCode::NOT_FOUND),
        ("/orders/BZ-424242", StatusCode::NOT_FOUND),
    ] {
        let response = shopper.get(path).await;
        assert_eq!(response.status(), status, "{path}");
        let doc = html(&body(response).await);
        assert_eq!(texts(&doc, "header .cart-count"), ["2"], "{path}");
    }
    // A framework error (wrong method) too.
    let response = shopper
        .client
        .delete(format!("{}/products", app.address))
        .send()
        .await
        .expect("sent");
    assert!(response.status().is_client_error());
    let doc = html(&body(response).await);
    assert_eq!(texts(&doc, "header .cart-count"), ["2"]);
    // A visitor without a cart sees 0.
    let doc = html(&body(app.get("/no-such-page").await).await);
    assert_eq!(texts(&doc, "header .cart-count"), ["0"]);
    let distinct: BTreeSet<String> = texts(&doc, "main h1").into_iter().collect();
    assert_eq!(distinct.len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn genre_and_person_filters_are_served_by_the_normalised_key_indexes() {
    use bazaar::catalog::listing::ListingQuery;
    let app = spawn_app().await;
    for pairs in [
        vec![("genre", "JAZZ")],
        vec![("person", "miles davis")],
        vec![("type", "film"), ("person", "Harrison Ford")],
        vec![
            ("genre", "Jazz"),
            ("person", "Miles Davis"),
            ("sort", "price"),
        ],
    ] {
        let params = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let query = ListingQuery::from_params(&params);
        let filter = query.filter(doc! {});
        assert!(
            filter.contains_key("genre_keys") || filter.contains_key("people_keys"),
            "{filter}"
        );
        assert_uses_index(
            &app.db,
            &format!("{pairs:?}"),
            bazaar::catalog::products::COLLECTION,
            filter,
            query.sort.document(),
        )
        .await;
    }
    app.stop().await;
}

#[tokio::test]
async fn an_edited_product_is_found_by_its_new_artist_and_genre() {
    use bazaar::catalog::products::{self, AlbumDetails, Details, NewProduct, Shipping};
    let app = spawn_app().await;
    let created = product_with_stock(&app.db, "edit", 5).await;
    let edit = NewProduct {
        sku: bazaar::domain::Sku::parse("edit").expect("a valid SKU"),
        slug: bazaar::domain::Slug::parse("test-edit").expect("a valid slug"),
        title: "Test album edit".into(),
        description: "Edited.".into(),
        list_price: bazaar::domain::Money::from_cents(1500),
        retail_price: bazaar::domain::Money::from_cents(1200),
        categories: Vec::new(),
        details: Details::Album(AlbumDetails {
            title: "Test album edit".into(),
            artist: "Nina  Simone".into(),
            genre: vec!["Soul".into(), "Jazz".into()],
            tracks: vec!["One".into()],
            issue_date: bson::DateTime::from_millis(0),
            label: "Test".into(),
        }),
        qty: 5,
        featured: false,
        shipping: Shipping::default(),
    };
    let saved = products::update(&app.db, created.id, created.edit_version, edit, &[])
        .await
        .expect("saved");
    assert!(matches!(saved, products::Saved::Saved(_)));
    let doc = page(&app, "/products?person=nina+simone&genre=SOUL").await;
    assert_eq!(titles(&doc), ["Test album edit"]);
    assert!(titles(&page(&app, "/products?person=the+testers").await).is_empty());
    app.stop().await;
}
