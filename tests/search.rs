//! Site search through HTTP: the header's search box, results ranked by relevance with the
//! matched fields shown, published content only, pagination, the no-results page, hostile
//! input answered with a normal page, the admin product search's full-text fallback, and the
//! text indexes behind the queries.

use crate::common::*;
use bazaar::catalog::products::{self, AlbumDetails, BookDetails, Details, NewProduct, Shipping};
use bazaar::content::model::{Detail, NodeInput, TextDetail};
use bazaar::content::store;
use bazaar::search;
use bson::{doc, Bson, DateTime};
use reqwest::StatusCode;

const DAY_MS: i64 = 24 * 3600 * 1000;

async fn album(app: &TestApp, sku: &str, title: &str, artist: &str, description: &str) {
    products::create(
        &app.db,
        NewProduct {
            sku: bazaar::domain::Sku::parse(sku).expect("a valid SKU"),
            slug: bazaar::domain::Slug::parse(&format!("search-{}", sku.to_lowercase()))
                .expect("a valid slug"),
            title: title.to_string(),
            description: description.to_string(),
            list_price: bazaar::domain::Money::from_cents(1500),
            retail_price: bazaar::domain::Money::from_cents(1200),
            categories: Vec::new(),
            details: Details::Album(AlbumDetails {
                title: title.to_string(),
                artist: artist.to_string(),
                genre: vec!["Jazz".to_string()],
                tracks: vec!["One".to_string()],
                issue_date: DateTime::from_millis(0),
                label: "Test".to_string(),
            }),
            qty: 3,
            featured: false,
            shipping: Shipping::default(),
        },
    )
    .await
    .expect("product created");
}

async fn book(app: &TestApp, sku: &str, title: &str, author: &str) {
    products::create(
        &app.db,
        NewProduct {
            sku: bazaar::domain::Sku::parse(sku).expect("a valid SKU"),
            slug: bazaar::domain::Slug::parse(&format!("search-{}", sku.to_lowercase()))
                .expect("a valid slug"),
            title: title.to_string(),
            description: "A book.".to_string(),
            list_price: bazaar::domain::Money::from_cents(1500),
            retail_price: bazaar::domain::Money::from_cents(1200),
            categories: Vec::new(),
            details: Details::Book(BookDetails {
                author: vec![author.to_string()],
                publisher: "Test".to_string(),
                pages: 100,
                isbn: "0000000000".to_string(),
                issue_date: DateTime::from_millis(0),
                genre: vec!["Essays".to_string()],
            }),
            qty: 3,
            featured: false,
            shipping: Shipping::default(),
        },
    )
    .await
    .expect("product created");
}

async fn entry(app: &TestApp, slug: &str, title: &str, text: &str, published: Option<DateTime>) {
    store::create(
        &app.db,
        NodeInput {
            section: "blog".to_string(),
            slug: crate::common::slug(slug),
            title: title.to_string(),
            author: "Tester".to_string(),
            detail: Detail::Entry(TextDetail {
                text: text.to_string(),
                ..Default::default()
            }),
        },
        published,
        Vec::new(),
    )
    .await
    .expect("node created");
}

fn yesterday() -> Option<DateTime> {
    Some(DateTime::from_millis(
        DateTime::now().timestamp_millis() - DAY_MS,
    ))
}

async fn results(app: &TestApp, q: &str) -> scraper::Html {
    let url = format!(
        "/search?{}",
        form_urlencoded::Serializer::new(String::new())
            .append_pair("q", q)
            .finish()
    );
    let response = app.get(&url).await;
    assert_eq!(response.status(), StatusCode::OK, "{q}");
    html(&body(response).await)
}

#[tokio::test]
async fn the_header_has_a_search_box() {
    let app = spawn_app().await;
    let doc = html(&body(app.get("/").await).await);
    assert_eq!(
        attr(&doc, "header form[role=search]", "action").as_deref(),
        Some("/search")
    );
    assert_eq!(count(&doc, "header form[role=search] input[name=q]"), 1);
    let empty = results(&app, "").await;
    assert_eq!(count(&empty, ".search-hint"), 1);
    assert_eq!(count(&empty, ".search-hit"), 0);
}

#[tokio::test]
async fn results_are_ranked_by_relevance_with_the_matched_field_shown() {
    let app = spawn_app().await;
    album(&app, "S1", "Zyzzyva", "The Weevils", "Ten tracks.").await;
    album(
        &app,
        "S2",
        "Beetle Songs",
        "The Weevils",
        "A record about the zyzzyva beetle.",
    )
    .await;
    entry(
        &app,
        "weevil",
        "On weevils",
        "The zyzzyva is a weevil.",
        yesterday(),
    )
    .await;
    entry(&app, "draft", "Zyzzyva draft", "zyzzyva zyzzyva", None).await;
    let doc = results(&app, "zyzzyvas").await;
    // Title (weight 10, the whole title) beats the entry's text (weight 1, two words) and the
    // description (weight 1, three words); the draft is never shown.
    assert_eq!(
        texts(&doc, ".search-hit-title a"),
        ["Zyzzyva", "On weevils", "Beetle Songs"]
    );
    assert_eq!(
        texts(&doc, ".matched-fields"),
        ["title", "text", "description"]
    );
    assert_eq!(
        attr(&doc, ".search-hit-title a", "href").as_deref(),
        Some("/products/search-s1")
    );
    // People and genres are searched too.
    let doc = results(&app, "weevils").await;
    let titles = texts(&doc, ".search-hit-title a");
    assert_eq!(titles.len(), 3, "{titles:?}");
    assert!(texts(&doc, ".matched-fields")
        .iter()
        .any(|m| m.contains("artist")));
    book(&app, "S3", "Collected Thoughts", "Quentin Xanadu").await;
    let doc = results(&app, "xanadu").await;
    assert_eq!(texts(&doc, ".search-hit-title a"), ["Collected Thoughts"]);
    assert_eq!(texts(&doc, ".matched-fields"), ["author"]);
}

#[tokio::test]
async fn phrases_and_negation_narrow_the_results() {
    let app = spawn_app().await;
    album(&app, "P1", "Blue Zephyr", "Quartet", "Late night music.").await;
    album(&app, "P2", "Zephyr in Blue", "Quartet", "Early music.").await;
    let doc = results(&app, "\"blue zephyr\"").await;
    assert_eq!(texts(&doc, ".search-hit-title a"), ["Blue Zephyr"]);
    let doc = results(&app, "zephyr -late").await;
    assert_eq!(texts(&doc, ".search-hit-title a"), ["Zephyr in Blue"]);
}

#[tokio::test]
async fn a_search_without_matches_shows_the_no_results_page() {
    let app = spawn_app().await;
    let doc = results(&app, "qwxzvplk").await;
    assert_eq!(count(&doc, ".no-results"), 1);
    assert!(texts(&doc, ".no-results").join(" ").contains("qwxzvplk"));
    // Only stop words or only negations select nothing either.
    for q in ["the and of", "-blue"] {
        let doc = results(&app, q).await;
        assert_eq!(count(&doc, ".no-results"), 1, "{q}");
    }
}

/// Without its text index (MongoDB while the index is being built; docstore for a few seconds
/// after starting on a large catalog, while it builds that index in the background) a search
/// answers "being prepared" with Retry-After, and works again once the index is back.
#[tokio::test]
async fn a_search_before_the_text_index_is_ready_says_it_is_being_prepared() {
    let app = spawn_app().await;
    album(&app, "P1", "Night Music", "Zanzibar Trio", "Late.").await;
    let products = app.db.collection::<bson::Document>(products::COLLECTION);
    products
        .drop_index(search::PRODUCT_INDEX)
        .await
        .expect("text index dropped");
    for path in ["/search?q=zanzibar", "/admin/products?q=zanzibar"] {
        let response = if path.starts_with("/admin") {
            app.get_admin(path).await
        } else {
            app.get(path).await
        };
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{path}");
        assert!(response.headers().get("retry-after").is_some(), "{path}");
        let text = body(response).await;
        assert!(text.contains("Search is being prepared"), "{path}: {text}");
    }
    bazaar::startup::indexes::ensure_indexes(&app.db)
        .await
        .expect("indexes created again");
    let doc = results(&app, "zanzibar").await;
    assert_eq!(texts(&doc, ".search-hit-title a"), ["Night Music"]);
}

#[tokio::test]
async fn results_are_paginated() {
    let app = spawn_app().await;
    for i in 0..25 {
        album(
            &app,
            &format!("M{i:02}"),
            &format!("Marimba volume {i}"),
            "Ensemble",
            "Percussion.",
        )
        .await;
    }
    let doc = results(&app, "marimba").await;
    assert_eq!(count(&doc, ".search-hit"), search::PER_PAGE);
    let next = attr(&doc, "a[rel=next]", "href").expect("a next page");
    let response = app.get(&next).await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(count(&doc, ".search-hit"), 5);
    assert!(attr(&doc, "a[rel=next]", "href").is_none());
    assert!(attr(&doc, "a[rel=prev]", "href").is_some());
    for bad in ["0", "abc", "-1", "11", "99999999999999999999999"] {
        let response = app.get(&format!("/search?q=marimba&page={bad}")).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "page={bad}");
    }
}

#[tokio::test]
async fn the_total_is_counted_up_to_the_results_a_search_offers_then_says_more_than() {
    let app = spawn_app().await;
    let offered = search::PER_PAGE * search::MAX_PAGES as usize;
    assert_eq!(search::MAX_COUNTED, offered as u64);
    for i in 0..offered {
        album(
            &app,
            &format!("X{i:03}"),
            "Xylophone",
            "Ensemble",
            "Mallets.",
        )
        .await;
    }
    let result_count = |doc: &scraper::Html| texts(doc, ".result-count").join(" ");
    let doc = results(&app, "xylophone").await;
    let shown = result_count(&doc);
    assert!(shown.starts_with("200 results for"), "{shown}");
    // One more than the search offers: the count stops and says so (the product write drops
    // the cached page).
    album(&app, "X999", "Xylophone", "Ensemble", "Mallets.").await;
    let doc = results(&app, "xylophone").await;
    let shown = result_count(&doc);
    assert!(shown.starts_with("More than 200 results for"), "{shown}");
    assert_eq!(count(&doc, ".search-hit"), search::PER_PAGE);
}

#[tokio::test]
async fn hostile_input_gets_a_normal_page() {
    let app = spawn_app().await;
    album(&app, "H1", "Quiet Storm", "Band", "Soft.").await;
    let long = "storm ".repeat(3000);
    let nasty = [
        "\"",
        "\"\"",
        "\"unbalanced quote",
        "storm \"",
        "-",
        "--",
        "- - -",
        "-\"",
        "\0",
        "storm\0quiet",
        long.as_str(),
        "{\"$gt\": 1}",
        "$where",
        "\\",
        "'; drop table products; --",
        "<script>alert(1)</script>",
        "💥 storm",
        "\u{202e}storm",
    ];
    for q in nasty {
        let url = format!(
            "/search?{}",
            form_urlencoded::Serializer::new(String::new())
                .append_pair("q", q)
                .finish()
        );
        let response = app.get(&url).await;
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{:?}",
            q.chars().take(40).collect::<String>()
        );
        let text = body(response).await;
        assert!(!text.contains("<script>alert"), "output is escaped");
    }
    // A raw NUL and broken percent-encoding in the query string.
    for raw in ["/search?q=%00%00", "/search?q=%ZZ", "/search?q=%22%2D%22"] {
        let response = app.get(raw).await;
        assert!(
            response.status() == StatusCode::OK || response.status() == StatusCode::BAD_REQUEST,
            "{raw}: {}",
            response.status()
        );
    }
    let doc = results(&app, &long).await;
    assert_eq!(texts(&doc, ".search-hit-title a"), ["Quiet Storm"]);
}

#[tokio::test]
async fn the_admin_product_search_falls_back_to_full_text() {
    let app = spawn_app().await;
    album(&app, "A1", "Night Music", "Zanzibar Trio", "Late.").await;
    let response = app.get_admin("/admin/products?q=zanzibar").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(
        texts(&doc, "table.admin-products tbody td.product-title"),
        ["Night Music"]
    );
    assert_eq!(count(&doc, ".full-text-note"), 1);
    // A title prefix still answers first, without the note.
    let doc = html(&body(app.get_admin("/admin/products?q=night%20mu").await).await);
    assert_eq!(
        texts(&doc, "table.admin-products tbody td.product-title"),
        ["Night Music"]
    );
    assert_eq!(count(&doc, ".full-text-note"), 0);
    // Admin content: a title substring first, then the text of the nodes.
    entry(
        &app,
        "notes",
        "Studio notes",
        "Recorded in Zanzibar.",
        yesterday(),
    )
    .await;
    let doc = html(
        &body(
            app.get_admin("/admin/content?section=blog&q=zanzibar")
                .await,
        )
        .await,
    );
    assert_eq!(
        texts(&doc, "table.admin-content tbody td:first-child"),
        ["Studio notes"]
    );
}

#[tokio::test]
async fn searches_use_the_text_indexes() {
    let app = spawn_app().await;
    let db = app.db.database();
    let now = DateTime::now();
    for (collection, filter, projection) in [
        (
            products::COLLECTION,
            search::text_filter("blue jazz"),
            search::product_projection(),
        ),
        (
            store::COLLECTION,
            {
                let mut f = search::text_filter("blue jazz");
                f.insert("metadata.published", doc! { "$lte": now });
                f
            },
            search::node_projection(),
        ),
    ] {
        let explain = db
            .run_command(doc! {
                "explain": {
                    "find": collection,
                    "filter": filter,
                    "projection": projection,
                    "sort": search::score_sort(),
                    "limit": 21,
                },
                "verbosity": "queryPlanner",
            })
            .await
            .expect("explain runs");
        let plan = Bson::Document(explain.clone());
        assert!(find_stage(&plan, "TEXT_MATCH").is_some(), "{explain}");
        let scan = find_stage(&plan, "IXSCAN").expect("an index scan");
        assert_eq!(
            scan.get_document("keyPattern").ok(),
            Some(&doc! { "_fts": "text", "_ftsx": 1 }),
            "{collection}"
        );
        assert!(find_stage(&plan, "COLLSCAN").is_none(), "{explain}");
    }
}

// ---------------------------------------------------------------------------------------------
// Search as a denial-of-service lever: a bound on searches at once and per client.

#[tokio::test]
async fn searches_beyond_a_clients_allowance_get_a_429_page_saying_when_to_try_again() {
    let app = spawn_app_with(&[("BAZAAR_SEARCH__PER_CLIENT_PER_MINUTE", "3")]).await;
    for n in 1..=3 {
        let response = app.get(&format!("/search?q=jazz&page={n}")).await;
        assert_eq!(response.status(), StatusCode::OK, "search {n}");
    }
    let refused = app.get("/search?q=blue").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("20"),
        "one search's worth of a minute's allowance of 3"
    );
    let doc = html(&body(refused).await);
    let page = texts(&doc, "main").join(" ");
    assert!(
        page.contains("You are searching faster than we allow (3 searches a minute)"),
        "{page}"
    );
    // The empty search box costs nothing and is not counted; other pages are unaffected.
    assert_eq!(app.get("/search").await.status(), StatusCode::OK);
    assert_eq!(app.get("/products").await.status(), StatusCode::OK);
    // Another address has its own allowance (the limit is per client, not for the site).
    let other = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .expect("client");
    let response = other
        .get(app.url("/search?q=jazz"))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn when_every_search_slot_stays_busy_a_search_gets_the_busy_page_with_retry_after() {
    let settings = test_settings(&[("BAZAAR_SEARCH__MAX_WAIT_MS", "100")]);
    let app = bazaar::startup::Application::build(settings)
        .await
        .expect("the app starts");
    let address = format!("http://127.0.0.1:{}", app.port());
    let limits = app.search_limits();
    tokio::spawn(app.run_until_stopped());
    let client = reqwest::Client::new();

    // Every slot taken, as by long searches still running.
    let held = limits.hold_all().await.expect("all slots");
    let busy = client
        .get(format!("{address}/search?q=jazz"))
        .send()
        .await
        .expect("sent");
    assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        busy.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let doc = html(&body(busy).await);
    assert!(
        texts(&doc, "main")
            .join(" ")
            .contains("Search is busy, please try again in a moment."),
        "{:?}",
        texts(&doc, "main")
    );
    // Pages other than search do not wait for a slot.
    let listing = client
        .get(format!("{address}/products"))
        .send()
        .await
        .expect("sent");
    assert_eq!(listing.status(), StatusCode::OK);

    drop(held);
    let searched = client
        .get(format!("{address}/search?q=jazz"))
        .send()
        .await
        .expect("sent");
    assert_eq!(searched.status(), StatusCode::OK);
}

/// A popular search runs once every two seconds, not once per visitor; a product saved through
/// this instance drops the kept results at once, so the change shows on the next search.
#[tokio::test]
async fn a_repeated_search_is_answered_from_the_cache_until_a_product_changes() {
    let app = spawn_app().await;
    album(&app, "Q1", "Quokka Dawn", "The Quokkas", "Early.").await;
    let doc = results(&app, "quokka").await;
    assert_eq!(texts(&doc, ".search-hit-title a"), ["Quokka Dawn"]);
    assert!(
        search::cache::cached(&app.db, "quokka", 1).is_some(),
        "the page is kept"
    );
    album(&app, "Q2", "Quokka Dusk", "The Quokkas", "Late.").await;
    assert!(
        search::cache::cached(&app.db, "quokka", 1).is_none(),
        "a product write makes it stale"
    );
    let doc = results(&app, "quokka").await;
    let mut titles = texts(&doc, ".search-hit-title a");
    titles.sort();
    assert_eq!(titles, ["Quokka Dawn", "Quokka Dusk"]);
}

/// The titles of the product results of `/search?q=`, sorted.
async fn product_hits(app: &TestApp, q: &str) -> Vec<String> {
    let doc = results(app, q).await;
    let mut titles = texts(&doc, ".search-hit-product .search-hit-title a");
    titles.sort();
    titles
}

/// The titles `/products?q=` lists, sorted.
async fn listed(app: &TestApp, q: &str) -> Vec<String> {
    let url = format!(
        "/products?{}",
        form_urlencoded::Serializer::new(String::new())
            .append_pair("q", q)
            .finish()
    );
    let mut titles = titles(&page(app, &url).await);
    titles.sort();
    titles
}

#[tokio::test]
async fn the_last_word_matches_as_a_prefix_as_people_type() {
    let app = spawn_app().await;
    album(&app, "P1", "Zanzibar Nights", "Quillon Vex", "Late sets.").await;
    album(&app, "P2", "Harbour Lights", "Mara Quill", "Early sets.").await;
    let doc = results(&app, "zanzi").await;
    assert_eq!(texts(&doc, ".search-hit-title a"), ["Zanzibar Nights"]);
    // Both "quillon" and "quill" start with "quil".
    assert_eq!(
        product_hits(&app, "quil").await,
        ["Harbour Lights", "Zanzibar Nights"]
    );
    // Only the last word is a prefix: "zanzi" before another word is a word of its own.
    assert!(product_hits(&app, "zanzi nights").await == ["Zanzibar Nights"]);
    let doc = results(&app, "zanzi").await;
    assert_eq!(
        count(&doc, ".search-suggestion"),
        0,
        "a word being typed is no mistake"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_misspelled_word_gets_a_did_you_mean_from_the_indexes_own_words() {
    let app = spawn_app().await;
    album(&app, "M1", "A Love Supreme", "John Coltrane", "Four parts.").await;
    let doc = results(&app, "coltrain").await;
    assert_eq!(texts(&doc, ".search-suggestion a"), ["coltrane"]);
    let href = attr(&doc, ".search-suggestion a", "href").expect("a link");
    assert_eq!(href, "/search?q=coltrane");
    let followed = html(&body(app.get(&href).await).await);
    assert_eq!(texts(&followed, ".search-hit-title a"), ["A Love Supreme"]);
    assert_eq!(count(&followed, ".search-suggestion"), 0);
    // Words it knows are left as typed; the misspelled one is corrected.
    let doc = results(&app, "love supremme").await;
    assert_eq!(texts(&doc, ".search-suggestion a"), ["love supreme"]);
    app.stop().await;
}

#[tokio::test]
async fn posts_are_found_by_their_authors_name() {
    let app = spawn_app().await;
    store::create(
        &app.db,
        NodeInput {
            section: "blog".to_string(),
            slug: crate::common::slug("field-notes"),
            title: "Field notes".to_string(),
            author: "Wilhelmina Oakshott".to_string(),
            detail: Detail::Entry(TextDetail {
                text: "From the shop floor.".to_string(),
                ..Default::default()
            }),
        },
        yesterday(),
        Vec::new(),
    )
    .await
    .expect("node created");
    let doc = results(&app, "oakshott").await;
    assert_eq!(texts(&doc, ".search-hit-title a"), ["Field notes"]);
    assert_eq!(texts(&doc, ".matched-fields"), ["author"]);
    app.stop().await;
}

#[tokio::test]
async fn excerpts_are_plain_text_with_the_matched_words_marked_and_escaped() {
    let app = spawn_app().await;
    entry(
        &app,
        "blue",
        "On records",
        "*Kind of Blue* is one.\n\n> So what?\n\nThe [zebrafinch](/products/x) sings.",
        yesterday(),
    )
    .await;
    album(
        &app,
        "E1",
        "Birdsong",
        "Aviary",
        "<em>zebrafinch</em> & friends",
    )
    .await;
    let response = app.get("/search?q=zebrafinch").await;
    let text = body(response).await;
    let doc = html(&text);
    let excerpts = texts(&doc, ".search-hit-excerpt");
    assert_eq!(excerpts.len(), 2, "{excerpts:?}");
    let post = excerpts
        .iter()
        .find(|e| e.contains("Kind of Blue"))
        .expect("the post's excerpt");
    assert_eq!(post, "Kind of Blue is one. So what? The zebrafinch sings.");
    assert_eq!(
        texts(&doc, ".search-hit-excerpt mark"),
        ["zebrafinch", "zebrafinch"]
    );
    // A description's markup is shown as text, never as elements.
    assert_eq!(count(&doc, ".search-hit-excerpt em"), 0);
    assert!(
        text.contains("&lt;em&gt;") || text.contains("&#60;em&#62;"),
        "escaped: {excerpts:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn product_results_show_price_picture_and_stock() {
    let app = spawn_app().await;
    crate::common::builders::ProductBuilder::new("pic1")
        .title("Quagga Suite")
        .stock(40)
        .cover()
        .build(&app.db)
        .await;
    crate::common::builders::ProductBuilder::new("pic2")
        .title("Quagga Reprise")
        .build(&app.db)
        .await;
    let doc = results(&app, "quagga").await;
    assert_eq!(count(&doc, ".search-hit-product"), 2);
    assert_eq!(
        texts(&doc, ".search-hit-product .retail"),
        ["$12.00", "$12.00"]
    );
    assert_eq!(count(&doc, ".search-hit-product .search-hit-cover img"), 1);
    let mut stock = texts(&doc, ".search-hit-product .stock");
    stock.sort();
    assert_eq!(stock, ["In stock", "Sold out"]);
    app.stop().await;
}

#[tokio::test]
async fn the_product_lists_search_finds_the_same_products_as_site_search() {
    let app = spawn_app().await;
    album(&app, "L1", "Zanzibar Nights", "Quillon Vex", "Late sets.").await;
    album(
        &app,
        "L2",
        "Harbour Lights",
        "Mara Quill",
        "Zanzibar mornings.",
    )
    .await;
    album(&app, "L3", "Quiet", "Nobody", "Nothing to see.").await;
    book(&app, "L4", "Collected Thoughts", "Quentin Xanadu").await;
    for q in [
        "zanzibar",
        "zanzi",
        "quil",
        "xanadu",
        "lights sets",
        "nothing-here",
    ] {
        let site = product_hits(&app, q).await;
        assert_eq!(listed(&app, q).await, site, "{q}");
    }
    assert_eq!(listed(&app, "xanadu").await, ["Collected Thoughts"]);
    app.stop().await;
}
