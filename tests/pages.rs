//! Public pages: the layout, error pages, static assets, security headers and /healthz.

use crate::common::builders::{NodeBuilder, ProductBuilder};
use crate::common::*;
use reqwest::StatusCode;

#[tokio::test]
async fn home_page_renders_inside_the_layout_with_navigation_and_footer() {
    let app = spawn_app().await;
    let response = app.get("/").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html")));
    let doc = html(&body(response).await);
    assert_eq!(texts(&doc, "header .brand"), vec!["Bazaar"]);
    assert_eq!(
        texts(&doc, "header nav a"),
        vec!["Home", "Shop", "Categories", "Blog", "Gallery"]
    );
    assert_eq!(
        attr(&doc, "header nav a[aria-current=page]", "href").as_deref(),
        Some("/")
    );
    assert_eq!(count(&doc, "footer.site-footer"), 1);
    // The seeded site settings are what the page shows.
    assert_eq!(heading(&doc), "Bazaar");
    assert_eq!(
        texts(&doc, "main .tagline"),
        vec!["Records, films and books, with notes from the shop floor."]
    );
    // No inline styles or scripts: everything is allowed by the CSP (JSON-LD structured data
    // is a data block, never run, so the CSP does not concern it).
    assert_eq!(
        count(
            &doc,
            "style, script:not([src]):not([type='application/ld+json']), [style]"
        ),
        0
    );
}

#[tokio::test]
async fn the_stylesheet_link_carries_a_content_hash_and_is_cached_for_a_year() {
    let app = spawn_app().await;
    let doc = html(&body(app.get("/").await).await);
    let href = attr(&doc, "link[rel=stylesheet]", "href").expect("stylesheet linked");
    assert!(href.starts_with("/static/css/site.css?v="), "{href}");
    let hash = href.rsplit('=').next().unwrap_or("");
    assert_eq!(hash.len(), 16, "{href}");

    let response = app.get(&href).await;
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    assert_eq!(
        headers.get("cache-control").and_then(|v| v.to_str().ok()),
        Some("public, max-age=31536000, immutable")
    );
    assert_eq!(
        headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("text/css; charset=utf-8")
    );
    assert!(body(response).await.contains(".site-header"));

    // An old or missing hash still gets the file, but only a short cache lifetime.
    for stale in [
        "/static/css/site.css",
        "/static/css/site.css?v=0000000000000000",
    ] {
        let response = app.get(stale).await;
        assert_eq!(response.status(), StatusCode::OK, "{stale}");
        assert_eq!(
            response
                .headers()
                .get("cache-control")
                .and_then(|v| v.to_str().ok()),
            Some("public, max-age=300"),
            "{stale}"
        );
    }

    // Revalidation with the ETag answers 304 without a body.
    let response = app
        .client
        .get(app.url(&href))
        .header("if-none-match", format!("\"{hash}\""))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
}

#[tokio::test]
async fn unknown_pages_and_static_files_get_the_404_page_in_the_layout() {
    let app = spawn_app().await;
    for path in [
        "/no/such/page",
        "/static/css/missing.css",
        "/static/../Cargo.toml",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        let doc = html(&body(response).await);
        assert_eq!(heading(&doc), "Page not found", "{path}");
        assert_eq!(
            texts(&doc, "header nav a"),
            vec!["Home", "Shop", "Categories", "Blog", "Gallery"],
            "{path}"
        );
        assert_eq!(count(&doc, "footer.site-footer"), 1, "{path}");
    }
}

#[tokio::test]
async fn a_wrong_method_gets_the_405_page_in_the_layout() {
    let app = spawn_app().await;
    let response = app.get_admin("/admin/seed").await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_security_headers(response.headers(), "405");
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Method not allowed");
}

#[tokio::test]
async fn every_response_carries_the_security_headers() {
    let app = spawn_app().await;
    let doc = html(&body(app.get("/").await).await);
    let css = attr(&doc, "link[rel=stylesheet]", "href").expect("stylesheet linked");
    let responses = [
        ("home", app.get("/").await),
        ("404 page", app.get("/nope").await),
        ("static file", app.get(&css).await),
        ("health check", app.get("/healthz").await),
        ("admin without credentials", app.get("/admin").await),
        ("admin", app.get_admin("/admin").await),
        (
            "POST without CSRF token",
            app.post_form("/", &[("a", "b")]).await,
        ),
    ];
    for (what, response) in responses {
        assert_security_headers(response.headers(), what);
    }
}

#[tokio::test]
async fn healthz_answers_ok_when_the_database_is_reachable() {
    let app = spawn_app().await;
    let response = app.get("/healthz").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body(response).await.trim(), "ok");
}

#[tokio::test]
async fn when_the_database_goes_away_healthz_and_pages_answer_503_without_internals() {
    // A store outside the app, reached through a mongodb:// URI, that the test can stop.
    let store = docstore::Server::start(docstore::Config::in_memory())
        .await
        .expect("docstore starts");
    let uri = store.uri();
    let app = spawn_app_with(&[
        ("BAZAAR_DATABASE__URI", uri.as_str()),
        ("BAZAAR_DATABASE__TIMEOUT_MS", "500"),
        // The key would otherwise be kept under ./data.
        (
            "BAZAAR_SESSION__KEY",
            "a test key that is at least thirty-two bytes long",
        ),
    ])
    .await;
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    assert_eq!(app.get("/").await.status(), StatusCode::OK);

    store.shutdown().await;

    let response = app.get("/healthz").await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body(response).await.trim(), "unavailable");

    // A product page always reads its product (stock and price) from the database; the home
    // page's shelves may still come from the few-seconds cache, so it is not the probe here.
    let response = app.get("/products/kind-of-blue").await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_security_headers(response.headers(), "503 page");
    let text = body(response).await;
    let doc = html(&text);
    assert_eq!(heading(&doc), "Temporarily unavailable");
    assert_eq!(
        texts(&doc, "header nav a"),
        vec!["Home", "Shop", "Categories", "Blog", "Gallery"]
    );
    for leak in ["127.0.0.1", "ServerSelection", "error", "Kind"] {
        assert!(
            !doc.root_element().text().collect::<String>().contains(leak),
            "the 503 page leaks {leak:?}"
        );
    }
}

#[tokio::test]
async fn head_requests_are_answered_like_get_without_a_body() {
    let app = spawn_app().await;
    for path in ["/", "/healthz"] {
        let response = app.client.head(app.url(path)).send().await.expect("sent");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_security_headers(response.headers(), path);
        assert!(body(response).await.is_empty(), "{path}");
    }
}

#[tokio::test]
async fn the_embedded_store_refuses_clients_without_the_apps_generated_credentials() {
    let app = spawn_app().await;
    // The app itself reads and writes through its credentials.
    assert_eq!(app.get("/").await.status(), StatusCode::OK);
    let address = app.store_address.expect("tests run on the embedded store");
    // Another local program that finds the port: no credentials, then a guessed password.
    for (uri, expected) in [
        (format!("mongodb://{address}/"), 13),
        (
            format!("mongodb://bazaar:guess@{address}/?authSource=admin"),
            18,
        ),
    ] {
        let mut options = mongodb::options::ClientOptions::parse(&uri).await.unwrap();
        options.server_selection_timeout = Some(std::time::Duration::from_secs(5));
        let intruder = mongodb::Client::with_options(options).unwrap();
        let e = intruder
            .database(app.db.database().name())
            .collection::<bson::Document>("orders")
            .find_one(bson::doc! {})
            .await
            .expect_err("the store refuses the read");
        assert_eq!(server_code(&e), Some(expected), "{uri}: {e}");
    }
}

/// The server's error code behind a driver error, also inside an authentication error.
fn server_code(e: &mongodb::error::Error) -> Option<i32> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = current {
        // The driver keeps the server's error boxed as the source of its own.
        let driver_error = err.downcast_ref::<mongodb::error::Error>().or_else(|| {
            err.downcast_ref::<Box<mongodb::error::Error>>()
                .map(|b| &**b)
        });
        if let Some(mongodb::error::ErrorKind::Command(c)) = driver_error.map(|m| m.kind.as_ref()) {
            return Some(c.code);
        }
        current = err.source();
    }
    None
}

#[tokio::test]
async fn every_page_title_names_the_shop_as_the_settings_call_it() {
    let app = spawn_app().await;
    // Something behind each address below: the shipping page, and a product and a post
    // tagged jazz.
    let db = &app.db;
    NodeBuilder::page("shipping").build(db).await;
    NodeBuilder::post("hello").tags(&["jazz"]).build(db).await;
    ProductBuilder::new("jazz1")
        .title("Jazz Sampler")
        .tags(&["jazz"])
        .build(db)
        .await;
    save_settings(&app, &[("name", "Corner Records")]).await;
    let title = |doc: &scraper::Html| texts(doc, "head > title").concat();
    for path in [
        "/",
        "/products",
        "/categories",
        "/blog/",
        "/pages/shipping",
        "/tags/",
        "/tags/jazz",
        "/search?q=jazz",
        "/cart",
        "/orders/lookup",
        "/no-such-page",
    ] {
        // The 404 page too.
        let doc = html(&body(app.get(path).await).await);
        let shown = title(&doc);
        assert!(shown.ends_with("Corner Records"), "{path}: {shown}");
        assert!(!shown.contains("Bazaar"), "{path}: {shown}");
    }
    for path in [
        "/admin",
        "/admin/products",
        "/admin/orders",
        "/admin/settings",
    ] {
        let shown = title(&admin_page(&app, path).await);
        assert!(shown.ends_with("Corner Records admin"), "{path}: {shown}");
    }
    app.stop().await;
}

#[tokio::test]
async fn the_tags_page_lists_every_tag_of_posts_and_products_with_counts_and_links() {
    let app = spawn_app().await;
    NodeBuilder::post("kind-of-blue")
        .tags(&["jazz", "classics"])
        .build(&app.db)
        .await;
    NodeBuilder::post("a-love-supreme")
        .tags(&["jazz"])
        .build(&app.db)
        .await;
    // Not public yet: not counted.
    NodeBuilder::post("coming-soon")
        .tags(&["jazz", "secret"])
        .draft()
        .build(&app.db)
        .await;
    ProductBuilder::new("blue")
        .tags(&["jazz", "vinyl"])
        .build(&app.db)
        .await;
    ProductBuilder::new("gone")
        .tags(&["withdrawn"])
        .status(bazaar::catalog::model::ProductStatus::Archived)
        .build(&app.db)
        .await;

    let response = app.get("/tags/").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Tags");
    let links = texts(&doc, ".tag-index a");
    assert_eq!(links, ["classics", "jazz", "vinyl"]);
    let counts = texts(&doc, ".tag-index .tag-count");
    assert_eq!(
        counts,
        ["1 (1 post)", "3 (2 posts, 1 product)", "1 (1 product)"]
    );
    assert_eq!(
        attr(&doc, ".tag-index a", "href").as_deref(),
        Some("/tags/classics")
    );
    // Every link leads to a tag page that lists something.
    for tag in links {
        assert_eq!(
            app.get(&format!("/tags/{tag}")).await.status(),
            StatusCode::OK
        );
    }
    assert_eq!(app.get("/tags").await.status(), StatusCode::OK);
    app.stop().await;
}
