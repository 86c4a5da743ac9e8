//! The number of database commands each main storefront page sends, pinned: a page that starts
//! sending more (a query per item, a lost cache) fails here rather than only slowing a
//! benchmark. Commands are counted by the driver's command monitoring (`log.database_commands`).
//! Also: what the catalog cache serves is invalidated by this instance's own writes, and the
//! embedded store on disk is reached through its Unix socket rather than TCP.

use crate::common::builders::{CategoryBuilder, CommentBuilder, NodeBuilder, ProductBuilder};
use crate::common::*;
use bazaar::catalog::{categories, products};
use bazaar::db::commands::Command;
use reqwest::StatusCode;

/// The app counting its database commands, with [`shop`] built.
async fn counting_app() -> TestApp {
    // The traffic log writes off the request path (its own cost is the analytics_overhead
    // bench's); the pins count what a page itself sends.
    let app = spawn_app_with(&[
        ("BAZAAR_LOG__DATABASE_COMMANDS", "true"),
        ("BAZAAR_ANALYTICS__EVENTS", "false"),
    ])
    .await;
    shop(&app).await;
    app
}

/// Categories Books and Music → Jazz → Modal Jazz; "Kind of Blue" (`/products/kind-of-blue`)
/// in Modal Jazz with one comment, and twenty more products in Music without comments: two
/// pages of the product list and of Music, and every home page shelf filled from products in
/// stock (four of them featured, all discounted).
async fn shop(app: &TestApp) {
    let db = &app.db;
    CategoryBuilder::new("books").name("Books").build(db).await;
    let music = CategoryBuilder::new("music").name("Music").build(db).await;
    let jazz = CategoryBuilder::new("jazz")
        .name("Jazz")
        .parent(&music)
        .build(db)
        .await;
    let modal = CategoryBuilder::new("modal-jazz")
        .name("Modal Jazz")
        .parent(&jazz)
        .build(db)
        .await;
    let kind = ProductBuilder::new("kind")
        .slug("kind-of-blue")
        .title("Kind of Blue")
        .stock(5)
        .category(&modal)
        .build(db)
        .await;
    CommentBuilder::on_product(&kind).build(db).await;
    for n in 0..20 {
        let mut listed = ProductBuilder::new(&format!("listed{n}"));
        if n < 4 {
            listed = listed.featured();
        }
        listed
            .stock(3)
            .issued(&format!("19{:02}-01-01", 50 + n))
            .category(&music)
            .build(db)
            .await;
    }
}

/// The commands one GET of `path` sent.
async fn commands_for(app: &TestApp, path: &str) -> Vec<Command> {
    app.db.commands().record();
    let response = app.get(path).await;
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    let _ = body(response).await;
    app.db.commands().take()
}

fn names(commands: &[Command]) -> Vec<String> {
    commands.iter().map(Command::to_string).collect()
}

/// The steady state (caches warm) of each main page, and what its first load costs.
#[tokio::test]
async fn each_main_page_sends_a_pinned_number_of_commands() {
    let app = counting_app().await;
    assert!(app.db.commands().is_enabled());
    let product = "/products/kind-of-blue";
    // (path, commands on a first load at most, commands once warm)
    let pages: [(&str, usize, &[&str]); 4] = [
        // The product itself (fresh: its price and stock are what a shopper pays) and its
        // first page of comments; the filing categories come from the cached tree (loaded on
        // the first visit, with the shop settings).
        (product, 4, &["find products", "find comments"]),
        // Site settings and shelves are cached.
        ("/", 4, &[]),
        // The page of products; the total is cached (counted on the first visit as the
        // collection's size less the hidden products, two index-only commands).
        ("/products?page=2", 3, &["find products"]),
        // Breadcrumbs and children from the cached tree; the page of products.
        ("/categories/music?page=2", 3, &["find products"]),
    ];
    // A product nobody has commented on (most of a catalog) needs no comments query.
    let quiet = products::collection(&app.db)
        .find_one(bson::doc! { "comment_count": 0 })
        .await
        .unwrap()
        .expect("a product without comments");
    let quiet = format!("/products/{}", quiet.slug);
    let pages = pages
        .into_iter()
        .chain([(quiet.as_str(), 4, &["find products"][..])]);
    for (path, first_at_most, warm) in pages {
        let first = commands_for(&app, path).await;
        assert!(
            first.len() <= first_at_most,
            "{path}: first load sent {:?}",
            names(&first)
        );
        let again = commands_for(&app, path).await;
        assert_eq!(names(&again), warm, "{path} once warm");
    }
}

/// The content pages (`content::pages`, `content::feed`): a stream page, an old numbered page,
/// a post, a tag page, the gallery and a feed. Streams, tag pages and feeds come from the
/// content cache once warm (`content::cache`); so does a post (itself, its neighbours, the
/// first page of its comments; its rendered text is remembered).
#[tokio::test]
async fn each_content_page_sends_a_pinned_number_of_commands() {
    let app = counting_app().await;
    for i in 0..25 {
        NodeBuilder::post(&format!("post-{i:02}"))
            .tags(&["modal"])
            .text("Some *Markdown* text.")
            .days_ago(i + 1)
            .build(&app.db)
            .await;
    }
    NodeBuilder::photo("a-photo")
        .days_ago(1)
        .build(&app.db)
        .await;
    // The site settings are cached by the first page after start: not what these pin.
    let _ = body(app.get("/tags/").await).await;
    // (path, commands on a first load at most, commands once warm)
    let pages: [(&str, usize, &[&str]); 7] = [
        // The page from the section index.
        ("/blog/", 1, &[]),
        // The anchors (points only), then the page after its anchor: no skip, no count.
        ("/blog/?page=2", 3, &[]),
        // The post itself, then its comments only when it has some, and its neighbours;
        // then all from the content cache.
        ("/blog/post-10", 3, &[]),
        // The tag's newest nodes and its products.
        ("/tags/modal", 2, &[]),
        ("/gallery/", 1, &[]),
        // 20 whole nodes, written into the document once.
        ("/blog/feed.atom", 1, &[]),
        ("/tags/modal/feed.atom", 1, &[]),
    ];
    for (path, first_at_most, warm) in pages {
        let first = commands_for(&app, path).await;
        assert!(
            first.len() <= first_at_most,
            "{path}: first load sent {:?}",
            names(&first)
        );
        let again = commands_for(&app, path).await;
        assert_eq!(names(&again), warm, "{path} once warm");
    }
}

/// A product filed in several categories still costs no category query (the old page loaded
/// each filing category separately).
#[tokio::test]
async fn a_product_page_loads_no_category_per_filing() {
    let app = counting_app().await;
    let product = products::by_slug(&app.db, &slug("kind-of-blue"))
        .await
        .unwrap()
        .expect("the shop's product");
    let extra = categories::by_slug(&app.db, &crate::common::slug("books"))
        .await
        .unwrap()
        .unwrap();
    app.db
        .collection::<bson::Document>(products::COLLECTION)
        .update_one(
            bson::doc! { "_id": product.id },
            bson::doc! { "$push": { "categories": extra.id } },
        )
        .await
        .unwrap();
    let _ = commands_for(&app, "/products/kind-of-blue").await;
    let warm = commands_for(&app, "/products/kind-of-blue").await;
    assert!(
        !warm.iter().any(|c| c.target == categories::COLLECTION),
        "{:?}",
        names(&warm)
    );
    let doc = html(&body(app.get("/products/kind-of-blue").await).await);
    assert!(
        doc.root_element().text().any(|t| t.contains("Books")),
        "the added filing category is listed"
    );
}

/// Writes through this instance show on the next page: a renamed category, a new product in
/// the listing total.
#[tokio::test]
async fn this_instances_writes_invalidate_the_cache() {
    let app = counting_app().await;
    let first = body(app.get("/categories/jazz").await).await;
    assert!(
        heading(&html(&first)).contains("Jazz"),
        "{}",
        heading(&html(&first))
    );
    let jazz = categories::by_slug(&app.db, &crate::common::slug("jazz"))
        .await
        .unwrap()
        .unwrap();
    categories::rename(
        &app.db,
        jazz.id,
        "Jazz Classics",
        &crate::common::slug("jazz"),
    )
    .await
    .expect("renamed");
    let renamed = html(&body(app.get("/categories/jazz").await).await);
    assert!(
        heading(&renamed).contains("Jazz Classics"),
        "{}",
        heading(&renamed)
    );

    let total = |page: &str| -> u64 {
        let doc = html(page);
        texts(&doc, ".result-count .total")
            .first()
            .and_then(|t| t.trim().parse().ok())
            .expect("the listing shows its total")
    };
    let before = total(&body(app.get("/categories/modal-jazz").await).await);
    let template = products::by_slug(&app.db, &slug("kind-of-blue"))
        .await
        .unwrap()
        .expect("the shop's product");
    let details = template.details().expect("details parse");
    products::create(
        &app.db,
        products::NewProduct {
            sku: bazaar::domain::Sku::parse("cache-test-1").expect("a valid SKU"),
            slug: bazaar::domain::Slug::parse("cache-test-1").expect("a valid slug"),
            title: "Cache Test".into(),
            description: "A product added after the total was cached.".into(),
            list_price: bazaar::domain::Money::from_cents(1000),
            retail_price: bazaar::domain::Money::from_cents(900),
            categories: template.categories.clone(),
            details,
            qty: 3,
            featured: false,
            shipping: Default::default(),
        },
    )
    .await
    .expect("created");
    let after = body(app.get("/categories/modal-jazz").await).await;
    assert!(after.contains("Cache Test"), "the new product is listed");
    assert_eq!(
        total(&after),
        before + 1,
        "the total counts the new product"
    );
}

/// Pages in the second half of a listing are read from its other end: walking every page of
/// the product list and of a category shows each product exactly once, in the listing's order.
#[tokio::test]
async fn every_page_of_a_long_listing_shows_each_product_once_in_order() {
    use futures::TryStreamExt;
    let app = counting_app().await;
    // Generated products filed across a category tree in which Music is one branch.
    bazaar::demo::catalog::seed_bulk(&app.db, 100)
        .await
        .expect("seeded");
    use bazaar::catalog::listing::{self, ListingQuery, Sort};
    let music = categories::by_slug(&app.db, &crate::common::slug("music"))
        .await
        .unwrap()
        .unwrap();
    let all = ListingQuery::default();
    for (path, filter, sort) in [
        (
            "/products".to_string(),
            all.filter(bson::doc! {}),
            Sort::Newest,
        ),
        (
            "/products?sort=price".to_string(),
            all.filter(bson::doc! {}),
            Sort::PriceLow,
        ),
        (
            "/categories/music".to_string(),
            all.filter(listing::in_category(music.id)),
            Sort::Newest,
        ),
    ] {
        let sort = sort.document();
        let expected: Vec<String> = products::collection(&app.db)
            .find(filter)
            .sort(sort)
            .await
            .unwrap()
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.url())
            .collect();
        let pages = expected.len().div_ceil(12);
        assert!(pages >= 3, "{path}: {pages} pages");
        let mut shown = Vec::new();
        for page in 1..=pages {
            let sep = if path.contains('?') { '&' } else { '?' };
            let doc = html(&body(app.get(&format!("{path}{sep}page={page}")).await).await);
            let links = attr_all(&doc, ".product-card h3 a", "href");
            shown.extend(links);
        }
        assert_eq!(shown, expected, "{path}");
    }
}

/// Every value of attribute `name` on elements matching `selector`, in document order.
fn attr_all(doc: &scraper::Html, selector: &str, name: &str) -> Vec<String> {
    let sel = scraper::Selector::parse(selector).expect("selector");
    doc.select(&sel)
        .filter_map(|e| e.value().attr(name).map(str::to_string))
        .collect()
}

/// A page view sends a session cookie only when the session changed: an anonymous visitor's
/// listing gets none, and a visitor who already has one is not sent it again on every page.
#[tokio::test]
async fn page_views_do_not_rewrite_the_session_cookie() {
    let app = spawn_app().await;
    shop(&app).await;
    let sets_cookie = |r: &reqwest::Response| r.headers().contains_key("set-cookie");
    let listing = app.get("/products").await;
    assert!(
        !sets_cookie(&listing),
        "an anonymous listing sets no cookie"
    );
    // The product page's forms need a CSRF token: the first view starts a session.
    let first = app.get("/products/kind-of-blue").await;
    assert!(
        sets_cookie(&first),
        "the product page's forms need a session"
    );
    for path in [
        "/",
        "/products",
        "/categories/music",
        "/products/kind-of-blue",
    ] {
        let again = app.get(path).await;
        assert_eq!(again.status(), StatusCode::OK, "{path}");
        assert!(
            !sets_cookie(&again),
            "{path} re-sent an unchanged session cookie"
        );
    }
}

/// With the embedded store on disk the app's own connection goes through the store's Unix
/// socket in the data directory (cheaper per command than TCP loopback), and each HTTP worker's
/// through a socket of its own served on the worker's thread; the sockets go away when the app
/// stops.
#[cfg(unix)]
#[tokio::test]
async fn the_embedded_store_on_disk_is_reached_through_its_unix_sockets() {
    let data = tempfile::tempdir().expect("tempdir");
    let path = data.path().to_string_lossy().to_string();
    let app = spawn_app_with(&[
        ("BAZAAR_DATABASE__URI", "embedded"),
        ("BAZAAR_DATABASE__PATH", path.as_str()),
        ("BAZAAR_SERVER__WORKERS", "2"),
    ])
    .await;
    let socket = data.path().join("docstore.sock");
    assert!(socket.exists(), "{}", socket.display());
    let workers: Vec<_> = (1..=2)
        .map(|n| data.path().join(format!("docstore-worker-{n}.sock")))
        .collect();
    // Each worker opens its socket when it builds its services, on its own thread.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !workers.iter().all(|w| w.exists()) {
        assert!(
            std::time::Instant::now() < deadline,
            "a worker's socket never appeared: {workers:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // docstore answers `whatsmyuri` with the peer's TCP address, and without one otherwise.
    let me = app
        .db
        .database()
        .run_command(bson::doc! { "whatsmyuri": 1 })
        .await
        .expect("whatsmyuri");
    let you = me.get_str("you").expect("you");
    assert!(you.parse::<std::net::SocketAddr>().is_err(), "{you}");
    let response = app.get("/products?page=2").await;
    assert_eq!(response.status(), StatusCode::OK);
    app.stop().await;
    assert!(!socket.exists(), "the socket is removed when the app stops");
    for worker in &workers {
        assert!(!worker.exists(), "{} outlived the app", worker.display());
    }
}
