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
        // The product from the product cache (at most a second old: adding to a cart and the
        // checkout read the price and stock a shopper pays themselves) and its first page of
        // comments; the filing categories come from the cached tree (loaded on the first
        // visit, with the shop settings).
        (product, 4, &["find comments"]),
        // Site settings and shelves are cached.
        ("/", 4, &[]),
        // The page of products is cached, with its total (counted on the first visit as the
        // collection's size less the hidden products, two index-only commands).
        ("/products?page=2", 3, &[]),
        // Breadcrumbs and children from the cached tree; the page of products cached.
        ("/categories/music?page=2", 3, &[]),
    ];
    // A product nobody has commented on (most of a catalog) needs no comments query.
    let quiet = products::collection(&app.db)
        .find_one(bson::doc! { "comment_count": 0 })
        .await
        .unwrap()
        .expect("a product without comments");
    let quiet = format!("/products/{}", quiet.slug);
    let pages = pages.into_iter().chain([(quiet.as_str(), 4, &[][..])]);
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

/// A search the result cache does not hold: one `$text` query per collection for the best
/// matches of the page (and one past it), with the fields a result shows; a capped count only
/// for a collection whose list came back full. Repeated, it is answered from the result cache.
#[tokio::test]
async fn a_search_sends_one_query_per_collection_and_counts_only_full_lists() {
    let app = counting_app().await;
    NodeBuilder::post("blue-notes")
        .title("Blue notes")
        .text("On the records that taught us the blues.")
        .days_ago(1)
        .build(&app.db)
        .await;
    for n in 0..=bazaar::search::PER_PAGE {
        ProductBuilder::new(&format!("marimba{n}"))
            .title(&format!("Marimba volume {n}"))
            .build(&app.db)
            .await;
    }
    // The first search after a write waits for the word list's rebuild: not what this pins.
    let _ = body(app.get("/search?q=modal").await).await;
    let blue = commands_for(&app, "/search?q=blue").await;
    assert_eq!(names(&blue), ["find products", "find nodes"]);
    assert_eq!(names(&commands_for(&app, "/search?q=blue").await), [""; 0]);
    // More products match than a page shows: they are counted (up to the bound).
    let marimba = commands_for(&app, "/search?q=marimba").await;
    assert_eq!(
        names(&marimba),
        ["find products", "find nodes", "aggregate products"]
    );
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

/// The stock line of a product page and its note on units held in other shoppers' carts.
fn stock_lines(doc: &scraper::Html) -> (String, Vec<String>) {
    (
        texts(doc, ".product-summary .stock").join(" "),
        texts(doc, ".product-summary .stock-held"),
    )
}

/// The product page is served from the product cache (`catalog::product_cache`), and every
/// write through this instance that changes what it shows is on the next view: stock moves (a
/// cart's add and removal, a checkout), an edit, a comment. The page's product read is gone
/// once warm.
#[tokio::test]
async fn this_instances_writes_show_at_once_on_a_cached_product_page() {
    use crate::common::shop::Shopper;
    let app = counting_app().await;
    let path = "/products/kind-of-blue";
    let _ = commands_for(&app, path).await;
    let warm = commands_for(&app, path).await;
    assert!(
        !warm.iter().any(|c| c.target == products::COLLECTION),
        "served from the cache: {:?}",
        names(&warm)
    );
    assert_eq!(
        stock_lines(&page(&app, path).await),
        ("In stock".to_string(), vec![])
    );

    // Five on sale: a cart takes three, then gives two back, then buys the one it keeps.
    let shopper = Shopper::new(&app).await;
    shopper.add("kind", "3").await;
    assert_eq!(
        stock_lines(&page(&app, path).await),
        (
            "Only 2 left".to_string(),
            vec!["3 more are in shoppers' carts and may come back.".to_string()]
        ),
        "another visitor sees the add at once"
    );
    let own = html(&body(shopper.get(path).await).await);
    assert_eq!(
        stock_lines(&own),
        ("Only 2 left".to_string(), vec![]),
        "the shopper's own units are not counted as others'"
    );
    shopper.set_qty("kind", "1").await;
    assert_eq!(
        stock_lines(&page(&app, path).await),
        ("In stock".to_string(), vec![]),
        "the units given back are on sale at once"
    );
    let paid = shopper.checkout("4242424242424242").await;
    assert_eq!(paid.status(), StatusCode::SEE_OTHER, "checkout");
    let sold = products::by_slug(&app.db, &slug("kind-of-blue"))
        .await
        .unwrap()
        .expect("the product");
    assert_eq!((sold.qty, sold.reserved, sold.sold), (4, 0, 1));
    let _ = page(&app, path).await;
    let again = commands_for(&app, path).await;
    assert!(
        !again.iter().any(|c| c.target == products::COLLECTION),
        "cached again after the checkout: {:?}",
        names(&again)
    );

    // An edit: the new title on the product page and in the listing.
    let mut edit = new_product_like(&sold, "kind-of-blue", "Kind of Blue (Legacy Edition)");
    edit.sku = sold.sku.clone();
    let listed = titles(&page(&app, "/categories/jazz").await);
    assert!(listed.contains(&"Kind of Blue".to_string()), "{listed:?}");
    let saved = products::update(&app.db, sold.id, sold.edit_version, edit, &[])
        .await
        .expect("saved");
    assert!(matches!(saved, products::Saved::Saved(_)));
    assert_eq!(
        heading(&page(&app, path).await),
        "Kind of Blue (Legacy Edition)"
    );
    let listed = titles(&page(&app, "/categories/jazz").await);
    assert!(
        listed.contains(&"Kind of Blue (Legacy Edition)".to_string()),
        "the listing shows the edit at once: {listed:?}"
    );

    // A comment on a product without any: shown at once.
    let quiet = products::by_slug(&app.db, &slug("test-listed3"))
        .await
        .unwrap()
        .expect("a product without comments");
    let quiet_path = quiet.url();
    let before = body(app.get(&quiet_path).await).await;
    assert!(before.contains("No comments yet"), "no comment yet");
    CommentBuilder::on_product(&quiet).build(&app.db).await;
    let after = body(app.get(&quiet_path).await).await;
    assert!(
        !after.contains("No comments yet"),
        "the comment shows at once"
    );
}

/// A product as a [`products::NewProduct`] titled `title`, with `key` as its slug and SKU.
fn new_product_like(product: &products::Product, key: &str, title: &str) -> products::NewProduct {
    products::NewProduct {
        sku: bazaar::domain::Sku::parse(key).expect("a valid SKU"),
        slug: bazaar::domain::Slug::parse(key).expect("a valid slug"),
        title: title.into(),
        description: product.description.clone(),
        list_price: product.pricing.retail + product.pricing.savings,
        retail_price: product.pricing.retail,
        categories: product.categories.clone(),
        details: product.details().expect("details parse"),
        qty: product.qty,
        featured: false,
        shipping: product.shipping.clone(),
    }
}

/// A product list page is kept in the catalog cache and dropped by this instance's writes: a new
/// product is on the first page at once.
#[tokio::test]
async fn a_cached_listing_shows_a_new_product_at_once() {
    let app = counting_app().await;
    let _ = commands_for(&app, "/products").await;
    let warm = commands_for(&app, "/products").await;
    assert!(warm.is_empty(), "{:?}", names(&warm));
    let template = products::by_slug(&app.db, &slug("kind-of-blue"))
        .await
        .unwrap()
        .expect("the shop's product");
    let mut newest = new_product_like(&template, "brand-new-release", "Brand New Release");
    if let bazaar::catalog::products::Details::Album(album) = &mut newest.details {
        album.issue_date = bson::DateTime::now();
    }
    products::create(&app.db, newest).await.expect("created");
    let listed = titles(&page(&app, "/products").await);
    assert_eq!(
        listed.first().map(String::as_str),
        Some("Brand New Release"),
        "{listed:?}"
    );
}

/// Another handle on the store (another instance) writes a product's stock: this handle's
/// product cache serves what it loaded for at most its bound, then the write; its own writes
/// show at once.
#[tokio::test]
async fn another_handles_write_shows_on_a_product_page_within_the_bound() {
    use bazaar::catalog::product_cache::{self, MAX_AGE};
    use std::time::{Duration, Instant};
    let (server, first) = memory_db("product-cache").await;
    let second = bazaar::db::Db::connect(
        &server.uri(),
        "product-cache",
        Duration::from_secs(5),
        bazaar::db::Store::EmbeddedMemory,
    )
    .await
    .expect("connects");
    let product = ProductBuilder::new("bound").stock(5).build(&first).await;
    let qty = |db: &bazaar::db::Db| {
        let db = db.clone();
        let slug = product.slug.clone();
        async move {
            product_cache::by_slug(&db, &slug)
                .await
                .expect("read")
                .expect("the product")
                .product
                .qty
        }
    };
    let loaded = Instant::now();
    assert_eq!(qty(&first).await, 5);
    assert!(bazaar::stock::adjust_available(&second, product.id, 2)
        .await
        .expect("received"));
    let written = Instant::now();
    let seen = qty(&first).await;
    if loaded.elapsed() < MAX_AGE {
        assert_eq!(seen, 5, "served from the cache within its bound");
    }
    while qty(&first).await != 7 {
        assert!(
            written.elapsed() < MAX_AGE + Duration::from_secs(1),
            "the other handle's write is not shown after the bound"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(qty(&second).await, 7);
    assert!(bazaar::stock::adjust_available(&first, product.id, -1)
        .await
        .expect("written off"));
    assert_eq!(qty(&first).await, 6, "this handle's own write at once");
    drop(server);
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
