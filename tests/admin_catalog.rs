//! Admin screens for products and categories: forms with CSRF tokens, errors next to fields,
//! duplicate slugs and SKUs as form errors, stock adjustment and the category tree operations.

use crate::common::builders::{CategoryBuilder, ProductBuilder};
use crate::common::*;
use reqwest::StatusCode;

/// A complete, valid album form.
fn album_fields<'a>(token: &'a str, slug: &'a str, sku: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("csrf_token", token),
        ("title", "Time Out"),
        ("slug", slug),
        ("sku", sku),
        ("description", "The Dave Brubeck Quartet in odd meters."),
        ("list_price", "20"),
        ("retail_price", "15.00"),
        ("qty", "7"),
        ("artist", "The Dave Brubeck Quartet"),
        ("label", "Columbia"),
        ("issue_date", "1959-12-14"),
        ("genre", "jazz, cool"),
        (
            "tracks",
            "Blue Rondo à la Turk\nStrange Meadow Lark\nTake Five",
        ),
    ]
}

#[tokio::test]
async fn the_admin_product_list_searches_by_title_prefix_or_sku() {
    let app = spawn_app().await;
    for (sku, title) in [
        ("demo0001", "Kind of Blue"),
        (
            "book0042",
            "Kind of Blue: The Making of the Miles Davis Masterpiece",
        ),
        ("film0007", "Blade Runner"),
        ("music0003", "Blue Train"),
    ] {
        ProductBuilder::new(sku).title(title).build(&app.db).await;
    }
    let doc = admin_page(&app, "/admin/products").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["4"]);
    assert_eq!(
        attr(&doc, "header nav a[aria-current=page]", "href").as_deref(),
        Some("/admin/products")
    );
    let doc = admin_page(&app, "/admin/products?q=kind").await;
    assert_eq!(
        texts(&doc, "table.admin-products tbody td.product-title"),
        [
            "Kind of Blue",
            "Kind of Blue: The Making of the Miles Davis Masterpiece"
        ]
    );
    let doc = admin_page(&app, "/admin/products?q=demo0001").await;
    assert_eq!(
        texts(&doc, "table.admin-products tbody td.product-title"),
        ["Kind of Blue"]
    );
    let doc = admin_page(&app, "/admin/products?q=%28%2A%2B%3F%5B").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["0"]);
}

#[tokio::test]
async fn a_new_album_form_has_the_album_fields_and_saves_a_product_with_derived_savings() {
    let app = spawn_app().await;
    let jazz = CategoryBuilder::new("jazz")
        .name("Jazz")
        .build(&app.db)
        .await;
    CategoryBuilder::new("modal-jazz")
        .name("Modal Jazz")
        .parent(&jazz)
        .build(&app.db)
        .await;
    let doc = admin_page(&app, "/admin/products/new?type=album").await;
    assert_eq!(heading(&doc), "New album");
    for field in ["title", "sku", "artist", "tracks", "label", "qty"] {
        assert_eq!(
            count(&doc, &format!("form.product-form [name={field}]")),
            1,
            "{field}"
        );
    }
    assert_eq!(count(&doc, "form.product-form [name=actor]"), 0);
    let doc_film = admin_page(&app, "/admin/products/new?type=film").await;
    assert_eq!(count(&doc_film, "form.product-form [name=actor]"), 1);
    assert_eq!(count(&doc_film, "form.product-form [name=tracks]"), 0);
    let token = csrf_token(&doc).expect("token");

    let mut fields = album_fields(&token, "", "tb-0001");
    // Categories are a checkbox tree; each box's title is the category's full path.
    let modal_id = {
        let sel = scraper::Selector::parse("#field-categories input[type=checkbox]").unwrap();
        doc.select(&sel)
            .find(|o| {
                o.value()
                    .attr("title")
                    .is_some_and(|t| t.ends_with("Modal Jazz"))
            })
            .and_then(|o| o.value().attr("value"))
            .expect("modal jazz checkbox")
            .to_string()
    };
    fields.push(("categories", &modal_id));
    let response = app
        .post_admin_form("/admin/products/new?type=album", &fields)
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(location(&response).starts_with("/admin/products/"));

    // In the shop: slug made from the title, savings derived, tracks and category shown.
    let doc = html(&body(app.get("/products/time-out").await).await);
    assert_eq!(heading(&doc), "Time Out");
    assert_eq!(texts(&doc, ".savings"), ["You save $5.00 (25%)"]);
    assert_eq!(texts(&doc, ".tracks li").len(), 3);
    let doc = html(&body(app.get("/categories/jazz?q=time").await).await);
    assert_eq!(texts(&doc, ".product-grid .product-title"), ["Time Out"]);
}

#[tokio::test]
async fn a_duplicate_slug_or_sku_is_an_error_next_to_its_field() {
    let app = spawn_app().await;
    ProductBuilder::new("taken")
        .slug("kind-of-blue")
        .build(&app.db)
        .await;
    let doc = admin_page(&app, "/admin/products/new?type=album").await;
    let token = csrf_token(&doc).expect("token");
    let response = app
        .post_admin_form(
            "/admin/products/new?type=album",
            &album_fields(&token, "kind-of-blue", "tb-0002"),
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert_eq!(
        texts(&doc, "#error-slug"),
        ["Another product already uses this slug."]
    );
    // What was typed is kept.
    assert_eq!(
        attr(&doc, "#field-title", "value").as_deref(),
        Some("Time Out")
    );

    let response = app
        .post_admin_form(
            "/admin/products/new?type=album",
            &album_fields(&token, "time-out", "taken"),
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert_eq!(
        texts(&doc, "#error-sku"),
        ["Another product already uses this SKU."]
    );
}

#[tokio::test]
async fn invalid_product_fields_are_reported_next_to_each_field() {
    let app = spawn_app().await;
    let doc = admin_page(&app, "/admin/products/new?type=book").await;
    let token = csrf_token(&doc).expect("token");
    let response = app
        .post_admin_form(
            "/admin/products/new?type=book",
            &[
                ("csrf_token", token.as_str()),
                ("title", ""),
                ("slug", "Not A Slug"),
                ("sku", "bk 1"),
                ("list_price", "ten"),
                ("retail_price", "5"),
                ("qty", "-1"),
                ("pages", "many"),
                ("issue_date", "2023-02-30"),
                ("categories", "not-an-id"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    for field in [
        "title",
        "slug",
        "sku",
        "list_price",
        "qty",
        "pages",
        "issue_date",
        "author",
        "publisher",
        "categories",
    ] {
        assert_eq!(count(&doc, &format!("#error-{field}")), 1, "{field}");
    }
    assert_eq!(count(&doc, ".form-error"), 1);
    // An unknown type or id is a 400/404 page, not a 500.
    assert_eq!(
        app.get_admin("/admin/products/new?type=spaceship")
            .await
            .status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.get_admin("/admin/products/nonsense/edit")
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn editing_a_product_keeps_its_type_fields_and_stock_can_be_adjusted() {
    let app = spawn_app().await;
    ProductBuilder::new("film0001")
        .slug("casablanca")
        .title("Casablanca")
        .film()
        .people(&["Humphrey Bogart", "Ingrid Bergman", "Paul Henreid"])
        .price(999, 1499)
        .stock(4)
        .shipping(100, (19.0, 13.5, 1.5))
        .build(&app.db)
        .await;
    let doc = admin_page(&app, "/admin/products?q=casablanca").await;
    let edit = attr(&doc, "table.admin-products tbody a", "href").expect("edit link");
    let doc = admin_page(&app, &edit).await;
    assert_eq!(heading(&doc), "Edit Casablanca");
    assert_eq!(
        attr(&doc, "#field-actor", "value").as_deref(),
        Some("Humphrey Bogart, Ingrid Bergman, Paul Henreid")
    );
    let available: i64 = texts(&doc, ".available")[0].parse().expect("a number");
    let token = csrf_token(&doc).expect("token");

    // Re-submit the form as loaded with a new retail price.
    let form_sel = scraper::Selector::parse("form.product-form input, form.product-form textarea")
        .expect("selector");
    let mut fields: Vec<(String, String)> = doc
        .select(&form_sel)
        .filter_map(|el| {
            let name = el.value().attr("name")?.to_string();
            let value = if el.value().name() == "textarea" {
                el.text().collect()
            } else {
                el.value().attr("value").unwrap_or_default().to_string()
            };
            (el.value().attr("type") != Some("checkbox")).then_some((name, value))
        })
        .collect();
    for (name, value) in fields.iter_mut() {
        if name == "retail_price" {
            *value = "7.49".into();
        }
    }
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let response = app.post_admin_form(&edit, &pairs).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get("/products/casablanca").await).await);
    assert_eq!(texts(&doc, ".savings"), ["You save $7.50 (50%)"]);
    assert_eq!(texts(&doc, ".cast li").len(), 3);
    // Saving the form as loaded keeps the shipping weight and size it showed.
    assert_eq!(texts(&doc, ".shipping-weight"), ["100 g"]);
    assert_eq!(texts(&doc, ".shipping-dimensions"), ["19 × 13.5 × 1.5 cm"]);

    let stock = edit.replace("/edit", "/stock");
    let response = app
        .post_admin_form(&stock, &[("csrf_token", token.as_str()), ("delta", "5")])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = admin_page(&app, &edit).await;
    assert_eq!(texts(&doc, ".available"), [(available + 5).to_string()]);
    assert_eq!(texts(&doc, ".flash-success"), ["Stock changed by 5."]);
    let response = app
        .post_admin_form(
            &stock,
            &[("csrf_token", token.as_str()), ("delta", "-100000")],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = admin_page(&app, &edit).await;
    assert_eq!(texts(&doc, ".available"), [(available + 5).to_string()]);
    assert_eq!(count(&doc, ".flash-error"), 1);
}

#[tokio::test]
async fn a_shipping_weight_and_size_entered_on_a_new_product_are_saved_and_shown() {
    let app = spawn_app().await;
    let doc = admin_page(&app, "/admin/products/new?type=album").await;
    for field in [
        "shipping_weight",
        "shipping_width",
        "shipping_height",
        "shipping_depth",
    ] {
        assert_eq!(
            count(&doc, &format!("form.product-form fieldset [name={field}]")),
            1,
            "{field}"
        );
    }
    let token = csrf_token(&doc).expect("token");
    let mut fields = album_fields(&token, "time-out", "tb-0002");
    fields.extend([
        ("shipping_weight", "1250"),
        ("shipping_width", "14.2"),
        ("shipping_height", "12.50"),
        ("shipping_depth", "1"),
    ]);
    let response = app
        .post_admin_form("/admin/products/new?type=album", &fields)
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let edit = location(&response);

    let doc = html(&body(app.get("/products/time-out").await).await);
    assert_eq!(texts(&doc, ".shipping-weight"), ["1.25 kg"]);
    assert_eq!(texts(&doc, ".shipping-dimensions"), ["14.2 × 12.5 × 1 cm"]);
    let doc = admin_page(&app, &edit).await;
    assert_eq!(
        attr(&doc, "#field-shipping_weight", "value").as_deref(),
        Some("1250")
    );
    assert_eq!(
        attr(&doc, "#field-shipping_height", "value").as_deref(),
        Some("12.5")
    );

    // Left empty, weight and size count as not entered: nothing about shipping is shown.
    let fields = album_fields(&token, "take-five", "tb-0003");
    let response = app
        .post_admin_form("/admin/products/new?type=album", &fields)
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get("/products/take-five").await).await);
    assert_eq!(count(&doc, ".shipping"), 0);
}

#[tokio::test]
async fn a_negative_or_non_numeric_shipping_weight_is_a_form_error_and_nothing_is_saved() {
    let app = spawn_app().await;
    let doc = admin_page(&app, "/admin/products/new?type=album").await;
    let token = csrf_token(&doc).expect("token");
    for (weight, side) in [("-5", "12"), ("abc", "-1"), ("12.5", "wide")] {
        let mut fields = album_fields(&token, "time-out", "tb-0004");
        fields.extend([
            ("shipping_weight", weight),
            ("shipping_width", side),
            ("shipping_height", "12"),
            ("shipping_depth", "1"),
        ]);
        let response = app
            .post_admin_form("/admin/products/new?type=album", &fields)
            .await;
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{weight}"
        );
        let doc = html(&body(response).await);
        assert_eq!(
            texts(&doc, "#error-shipping_weight"),
            ["Enter the weight in whole grams (0 or more), e.g. 350."],
            "{weight}"
        );
        let side_errors = count(&doc, "#error-shipping_width");
        assert_eq!(side_errors, usize::from(side != "12"), "{side}");
        assert_eq!(count(&doc, "#error-shipping_height"), 0);
        // What was typed stays in the form to be corrected.
        assert_eq!(
            attr(&doc, "#field-shipping_weight", "value").as_deref(),
            Some(weight)
        );
        assert_eq!(
            attr(&doc, "#field-shipping_width", "value").as_deref(),
            Some(side)
        );
        assert_eq!(
            attr(&doc, "#field-title", "value").as_deref(),
            Some("Time Out")
        );
    }
    assert_eq!(
        app.get("/products/time-out").await.status(),
        StatusCode::NOT_FOUND
    );
    let doc = admin_page(&app, "/admin/products?q=tb-0004").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["0"]);
}

/// The id of a category from its entry in the admin tree.
fn category_id(doc: &scraper::Html, slug: &str) -> String {
    attr(doc, &format!("#category-{slug}"), "data-id").expect("tree entry")
}

/// The version a category's rename and move forms carry, from its entry in the admin tree.
fn category_version(doc: &scraper::Html, slug: &str) -> String {
    attr(doc, &format!("#category-{slug}"), "data-version").expect("version")
}

/// The value `slug`'s move picker (on its edit page, `doc`) posts for the parent with id
/// `parent` (`id:version`).
fn move_value(doc: &scraper::Html, slug: &str, parent: &str) -> String {
    let sel =
        scraper::Selector::parse(&format!("#category-{slug} form.move option")).expect("selector");
    doc.select(&sel)
        .filter_map(|o| o.value().attr("value"))
        .find(|v| v.starts_with(&format!("{parent}:")))
        .unwrap_or(parent)
        .to_string()
}

#[tokio::test]
async fn categories_can_be_added_moved_renamed_and_deleted_from_the_admin() {
    let app = spawn_app().await;
    // Music → Jazz → Ragtime → Bop → Modal Jazz, and Rock; Kind of Blue in Modal Jazz and
    // Piano Rags in Ragtime.
    let db = &app.db;
    let music = CategoryBuilder::new("music").name("Music").build(db).await;
    CategoryBuilder::new("rock").name("Rock").build(db).await;
    let jazz = CategoryBuilder::new("jazz")
        .name("Jazz")
        .parent(&music)
        .build(db)
        .await;
    let ragtime = CategoryBuilder::new("ragtime")
        .name("Ragtime")
        .parent(&jazz)
        .build(db)
        .await;
    let bop = CategoryBuilder::new("bop")
        .name("Bop")
        .parent(&ragtime)
        .build(db)
        .await;
    let modal = CategoryBuilder::new("modal-jazz")
        .name("Modal Jazz")
        .parent(&bop)
        .build(db)
        .await;
    ProductBuilder::new("kob")
        .slug("kind-of-blue")
        .title("Kind of Blue")
        .category(&modal)
        .build(db)
        .await;
    ProductBuilder::new("rags")
        .slug("piano-rags-by-scott-joplin")
        .title("Piano Rags by Scott Joplin")
        .category(&ragtime)
        .build(db)
        .await;
    let doc = admin_page(&app, "/admin/categories").await;
    let token = csrf_token(&doc).expect("token");
    let jazz = category_id(&doc, "jazz");
    let bop = category_id(&doc, "bop");
    let modal = category_id(&doc, "modal-jazz");

    // Add under Jazz; the slug comes from the name.
    let response = app
        .post_admin_form(
            "/admin/categories",
            &[
                ("csrf_token", token.as_str()),
                ("name", "Bossa Nova"),
                ("parent", jazz.as_str()),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = admin_page(&app, "/admin/categories").await;
    assert_eq!(count(&doc, "#category-bossa-nova.depth-2"), 1);
    // A slug in use is an error next to the slug field.
    let response = app
        .post_admin_form(
            "/admin/categories",
            &[
                ("csrf_token", token.as_str()),
                ("name", "Rock"),
                ("slug", "rock"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert_eq!(
        texts(&doc, "#error-slug"),
        ["Another category already uses this slug."]
    );

    // The move picker never offers a category's own subtree.
    let jazz_page = admin_page(&app, &format!("/admin/categories/{jazz}")).await;
    assert_eq!(
        attr(&jazz_page, "#category-jazz form.move", "action"),
        Some(format!("/admin/categories/{jazz}/move"))
    );
    let targets = texts(&jazz_page, "#category-jazz form.move option");
    assert!(
        !targets.iter().any(|t| t.ends_with("Modal Jazz")),
        "{targets:?}"
    );
    // Posted anyway, the cycle is refused with a message.
    let doc = admin_page(&app, "/admin/categories").await;
    let jazz_version = category_version(&doc, "jazz");
    let modal_value = format!("{modal}:{}", category_version(&doc, "modal-jazz"));
    app.post_admin_form(
        &format!("/admin/categories/{jazz}/move"),
        &[
            ("csrf_token", token.as_str()),
            ("parent", modal_value.as_str()),
            ("edit_version", jazz_version.as_str()),
        ],
    )
    .await;
    let doc = admin_page(&app, "/admin/categories").await;
    assert!(texts(&doc, ".flash-error")[0].contains("cannot be moved under itself"));

    // Bop moves under Jazz; then Jazz is renamed: breadcrumbs follow both.
    let bop_version = category_version(&doc, "bop");
    let bop_page = admin_page(&app, &format!("/admin/categories/{bop}")).await;
    let jazz_value = move_value(&bop_page, "bop", &jazz);
    let response = app
        .post_admin_form(
            &format!("/admin/categories/{bop}/move"),
            &[
                ("csrf_token", token.as_str()),
                ("parent", jazz_value.as_str()),
                ("edit_version", bop_version.as_str()),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = admin_page(&app, "/admin/categories").await;
    let jazz_version = category_version(&doc, "jazz");
    let response = app
        .post_admin_form(
            &format!("/admin/categories/{jazz}/rename"),
            &[
                ("csrf_token", token.as_str()),
                ("name", "Jazz & Blues"),
                ("slug", "jazz-blues"),
                ("edit_version", jazz_version.as_str()),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get("/categories/modal-jazz").await).await);
    assert_eq!(
        texts(&doc, "nav.breadcrumbs li"),
        ["Categories", "Music", "Jazz & Blues", "Bop", "Modal Jazz"]
    );
    let doc = html(&body(app.get("/products/kind-of-blue").await).await);
    assert_eq!(
        texts(&doc, "nav.breadcrumbs a"),
        ["Music", "Jazz & Blues", "Bop", "Modal Jazz"]
    );
    // Products follow the move: Ragtime no longer lists Kind of Blue.
    let doc = html(&body(app.get("/categories/ragtime").await).await);
    assert_eq!(
        texts(&doc, ".product-grid .product-title"),
        ["Piano Rags by Scott Joplin"]
    );

    // Delete: refused while it has children, done when empty.
    app.post_admin_form(
        &format!("/admin/categories/{jazz}/delete"),
        &[("csrf_token", token.as_str())],
    )
    .await;
    let doc = admin_page(&app, "/admin/categories").await;
    assert!(texts(&doc, ".flash-error")[0].contains("subcategories"));
    let bossa = category_id(&doc, "bossa-nova");
    app.post_admin_form(
        &format!("/admin/categories/{bossa}/delete"),
        &[("csrf_token", token.as_str())],
    )
    .await;
    let doc = admin_page(&app, "/admin/categories").await;
    assert_eq!(texts(&doc, ".flash-success"), ["Deleted."]);
    assert_eq!(count(&doc, "#category-bossa-nova"), 0);
    // Without the token nothing happens.
    let response = app
        .post_admin_form(&format!("/admin/categories/{modal}/delete"), &[])
        .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    // Asked to, a delete hands the subcategories to the parent: Ragtime's children move up.
    let doc = admin_page(&app, "/admin/categories").await;
    let ragtime = category_id(&doc, "ragtime");
    app.post_admin_form(
        &format!("/admin/categories/{ragtime}/delete"),
        &[("csrf_token", token.as_str()), ("reparent", "1")],
    )
    .await;
    let doc = admin_page(&app, "/admin/categories").await;
    assert_eq!(texts(&doc, ".flash-success"), ["Deleted."]);
    assert_eq!(count(&doc, "#category-ragtime"), 0);
    // ... and the products filed under Ragtime are filed under its parent instead.
    let doc = html(&body(app.get("/products/piano-rags-by-scott-joplin").await).await);
    assert_eq!(texts(&doc, "nav.breadcrumbs a"), ["Music", "Jazz & Blues"]);
}
