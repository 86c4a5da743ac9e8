//! The storefront catalog pages: what each page, filter, sort and page link shows, read from
//! the HTML. Each test builds the products and categories it looks at on an empty database.

use std::collections::BTreeSet;

use crate::common::builders::{CategoryBuilder, ProductBuilder};
use crate::common::*;
use bazaar::catalog::categories::Category;
use reqwest::StatusCode;

fn cents(price: &str) -> i64 {
    let digits: String = price.chars().filter(char::is_ascii_digit).collect();
    digits.parse().expect("a price")
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A product titled `title` with five units in stock, its slug and SKU made from the title.
fn product(title: &str) -> ProductBuilder {
    let slug = bazaar::domain::slugify(title);
    let sku: String = slug.chars().take(40).collect();
    ProductBuilder::new(&sku).slug(&slug).title(title).stock(5)
}

/// `count` albums "Record 01", "Record 02"… issued a day apart (the last is the newest).
async fn records(app: &TestApp, count: usize, category: Option<&Category>) {
    for n in 1..=count {
        let mut record = product(&format!("Record {n:02}")).issued(&format!("20{n:02}-01-01"));
        if let Some(category) = category {
            record = record.category(category);
        }
        record.build(&app.db).await;
    }
}

/// The categories the category pages show: Books, Film and Music at the root, and under Music
/// Classical and Jazz; Jazz has Ragtime (→ Bop → Modal Jazz) and Swing.
struct Tree {
    music: Category,
    jazz: Category,
    bop: Category,
    modal: Category,
    ragtime: Category,
    swing: Category,
}

async fn tree(app: &TestApp) -> Tree {
    let db = &app.db;
    CategoryBuilder::new("books").name("Books").build(db).await;
    CategoryBuilder::new("film").name("Film").build(db).await;
    let music = CategoryBuilder::new("music").name("Music").build(db).await;
    CategoryBuilder::new("classical")
        .name("Classical")
        .parent(&music)
        .build(db)
        .await;
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
    let swing = CategoryBuilder::new("swing")
        .name("Swing")
        .parent(&jazz)
        .build(db)
        .await;
    Tree {
        music,
        jazz,
        bop,
        modal,
        ragtime,
        swing,
    }
}

#[tokio::test]
async fn the_home_page_shows_featured_discounted_and_newest_shelves() {
    let app = spawn_app().await;
    // The three newest are sold out; five on sale, all featured, at 35, 30, 20, 10 and 5 % off.
    for (title, issued) in [
        ("Gone Three", "2024-06-01"),
        ("Gone Two", "2024-05-01"),
        ("Gone One", "2024-04-01"),
    ] {
        product(title)
            .issued(issued)
            .price(1200, 1200)
            .stock(0)
            .featured()
            .build(&app.db)
            .await;
    }
    for (title, issued, retail) in [
        ("Fresh A", "2024-03-01", 1300),
        ("Fresh B", "2024-02-01", 1400),
        ("Fresh C", "2024-01-01", 1600),
        ("Fresh D", "2023-12-01", 1800),
        ("Fresh E", "2023-11-01", 1900),
    ] {
        product(title)
            .issued(issued)
            .price(retail, 2000)
            .featured()
            .build(&app.db)
            .await;
    }
    let doc = page(&app, "/").await;
    assert_eq!(
        texts(&doc, ".shelf h2"),
        ["Featured", "Biggest discounts", "Newest releases"]
    );
    assert_eq!(count(&doc, "#featured .product-card"), 4);
    let discounts: Vec<i64> = texts(&doc, "#discounts .discount")
        .iter()
        .map(|d| cents(d))
        .collect();
    assert_eq!(discounts.len(), 4);
    assert!(discounts.windows(2).all(|w| w[0] >= w[1]), "{discounts:?}");
    assert_eq!(discounts[0], 35);
    // Newest first among products on sale: the newer Gone ones are sold out, and sold-out
    // products only fill a shelf that is short.
    assert_eq!(
        texts(&doc, "#newest .product-title"),
        ["Fresh A", "Fresh B", "Fresh C", "Fresh D"]
    );
    assert_eq!(count(&doc, "#newest .stock-out"), 0);
    assert_eq!(
        texts(&doc, "header nav a"),
        ["Home", "Shop", "Categories", "Blog", "Gallery"]
    );
}

#[tokio::test]
async fn the_product_list_pages_through_every_product_newest_first() {
    let app = spawn_app().await;
    records(&app, 25, None).await;
    let first = page(&app, "/products").await;
    assert_eq!(texts(&first, ".result-count .total"), ["25"]);
    assert_eq!(
        texts(&first, ".pagination a.page"),
        ["1", "2", "3"],
        "page links"
    );
    assert_eq!(
        attr(&first, ".pagination a[aria-current=page]", "href").as_deref(),
        Some("/products?page=1")
    );
    assert_eq!(
        attr(&first, "header nav a[aria-current=page]", "href").as_deref(),
        Some("/products")
    );
    let mut seen = Vec::new();
    for (n, expected) in [(1, 12), (2, 12), (3, 1)] {
        let doc = page(&app, &format!("/products?page={n}")).await;
        let t = titles(&doc);
        assert_eq!(t.len(), expected, "page {n}");
        seen.extend(t);
    }
    assert_eq!(seen[0], "Record 25");
    assert_eq!(seen.last().map(String::as_str), Some("Record 01"));
    let distinct: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(distinct.len(), 25, "no product twice, none missing");
}

#[tokio::test]
async fn filters_by_type_person_and_genre_keep_newest_first() {
    let app = spawn_app().await;
    let db = &app.db;
    for (title, issued, cast) in [
        (
            "Star Wars",
            "1977-05-25",
            &["Mark Hamill", "Harrison Ford"][..],
        ),
        ("Alien", "1979-05-25", &["Sigourney Weaver"][..]),
        (
            "Raiders of the Lost Ark",
            "1981-06-12",
            &["Harrison Ford"][..],
        ),
        (
            "Blade Runner",
            "1982-06-25",
            &["Harrison Ford", "Rutger Hauer"][..],
        ),
    ] {
        product(title)
            .film()
            .issued(issued)
            .people(cast)
            .build(db)
            .await;
    }
    // The same person in a book is not a film.
    product("Harrison Ford Reads")
        .book()
        .issued("1990-01-01")
        .people(&["Harrison Ford"])
        .build(db)
        .await;
    for (title, issued, artist, genre) in [
        (
            "Ellington at Newport",
            "1956-07-07",
            "Duke Ellington",
            &["Swing", "Jazz"][..],
        ),
        (
            "The Atomic Mr. Basie",
            "1958-01-01",
            "Count Basie",
            &["Swing"][..],
        ),
        (
            "Kind of Blue",
            "1959-08-17",
            "Miles Davis",
            &["Modal Jazz"][..],
        ),
    ] {
        product(title)
            .issued(issued)
            .people(&[artist])
            .genre(genre)
            .build(db)
            .await;
    }
    for (title, issued, author) in [
        ("Dune", "1965-08-01", "Frank Herbert"),
        (
            "The Left Hand of Darkness",
            "1969-03-01",
            "Ursula K. Le Guin",
        ),
        ("The Dispossessed", "1974-05-01", "Ursula K. Le Guin"),
    ] {
        product(title)
            .book()
            .issued(issued)
            .people(&[author])
            .build(db)
            .await;
    }
    let doc = page(&app, "/products?type=film&person=Harrison+Ford").await;
    assert_eq!(
        titles(&doc),
        ["Blade Runner", "Raiders of the Lost Ark", "Star Wars"]
    );
    let doc = page(&app, "/products?type=album&genre=swing").await;
    assert_eq!(
        titles(&doc),
        ["The Atomic Mr. Basie", "Ellington at Newport"]
    );
    let doc = page(&app, "/products?type=book&person=Ursula+K.+Le+Guin").await;
    assert_eq!(
        titles(&doc),
        ["The Dispossessed", "The Left Hand of Darkness"]
    );
    // Without a type the person may be any artist, actor or author.
    let doc = page(&app, "/products?person=Miles+Davis").await;
    assert_eq!(titles(&doc), ["Kind of Blue"]);
    // The form shows the choices that are in force.
    assert_eq!(
        attr(&doc, "#f-person", "value").as_deref(),
        Some("Miles Davis")
    );
}

#[tokio::test]
async fn a_price_range_sorted_by_price_lists_cheapest_first() {
    let app = spawn_app().await;
    for (title, retail) in [
        ("Just Under", 999),
        ("Roman Holiday", 1000),
        ("The Big Sleep", 1050),
        ("The Atomic Mr. Basie", 1100),
        ("The Apartment", 1199),
        ("The Left Hand of Darkness", 1200),
        ("Just Over", 1201),
        ("The Dearest", 1999),
        ("In Between", 1500),
    ] {
        product(title).price(retail, 2000).build(&app.db).await;
    }
    let doc = page(&app, "/products?min_price=10&max_price=12&sort=price").await;
    let found: BTreeSet<String> = titles(&doc).into_iter().collect();
    assert_eq!(
        found,
        set(&[
            "Roman Holiday",
            "The Big Sleep",
            "The Atomic Mr. Basie",
            "The Apartment",
            "The Left Hand of Darkness"
        ])
    );
    let prices: Vec<i64> = texts(&doc, ".product-grid .retail")
        .iter()
        .map(|p| cents(p))
        .collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
    assert!(prices.iter().all(|p| (1000..=1200).contains(p)));

    let doc = page(&app, "/products?sort=price-desc").await;
    let prices: Vec<i64> = texts(&doc, ".product-grid .retail")
        .iter()
        .map(|p| cents(p))
        .collect();
    assert!(prices.windows(2).all(|w| w[0] >= w[1]), "{prices:?}");
    assert_eq!(prices[0], 1999);
}

#[tokio::test]
async fn a_minimum_discount_sorted_by_discount_lists_the_biggest_first() {
    let app = spawn_app().await;
    // List $20.00: the retail price makes the discount.
    for (title, retail) in [
        ("Half Price", 1000),
        ("Forty Off", 1200),
        ("Kind of Blue", 1300),
        ("Exactly Thirty", 1400),
        ("Twenty Nine", 1420),
        ("Ten Off", 1800),
        ("Full Price", 2000),
    ] {
        product(title).price(retail, 2000).build(&app.db).await;
    }
    let doc = page(&app, "/products?min_discount=30&sort=discount").await;
    let found: BTreeSet<String> = titles(&doc).into_iter().collect();
    assert_eq!(
        found,
        set(&["Half Price", "Forty Off", "Kind of Blue", "Exactly Thirty"])
    );
    let pct: Vec<i64> = texts(&doc, ".product-grid .discount")
        .iter()
        .map(|p| cents(p))
        .collect();
    assert!(pct.windows(2).all(|w| w[0] >= w[1]), "{pct:?}");
    assert!(pct.iter().all(|p| *p >= 30));
    assert_eq!(pct, [50, 40, 35, 30]);
}

#[tokio::test]
async fn in_stock_only_hides_sold_out_products() {
    let app = spawn_app().await;
    // 26 on sale under mixed-case titles (the title order ignores case), 3 sold out.
    let words = ["delta", "Alpha", "echo", "Bravo", "charlie"];
    for n in 0..29 {
        let units = if n < 26 { 4 } else { 0 };
        product(&format!("{} {n:02}", words[n % words.len()]))
            .stock(units)
            .build(&app.db)
            .await;
    }
    let all = page(&app, "/products?sort=title").await;
    assert!(count(&all, ".stock-out") > 0, "some products are sold out");
    let doc = page(&app, "/products?in_stock=1&sort=title").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["26"]);
    for n in 1..=3 {
        let doc = page(&app, &format!("/products?in_stock=1&sort=title&page={n}")).await;
        assert_eq!(count(&doc, ".stock-out"), 0);
    }
    let t = titles(&doc);
    let mut sorted = t.clone();
    sorted.sort_by_key(|s| s.to_lowercase());
    assert_eq!(t, sorted, "title order");
    assert_eq!(t[0], "Alpha 01");
    // Page links keep the filters; Next is a keyset link (after the page's last product).
    let next = attr(&doc, ".pagination a[rel=next]", "href").expect("a next page");
    assert!(
        next.starts_with("/products?in_stock=1&sort=title&after="),
        "{next}"
    );
    assert_eq!(
        titles(&page(&app, &next).await),
        titles(&page(&app, "/products?in_stock=1&sort=title&page=2").await)
    );
    assert_eq!(
        texts(&doc, ".pagination a.page"),
        ["1", "2", "3"],
        "numbered links keep the filters too"
    );
    assert_eq!(
        attr(&doc, ".pagination a.page:not([aria-current])", "href").as_deref(),
        Some("/products?in_stock=1&sort=title&page=2")
    );
}

#[tokio::test]
async fn the_listings_search_is_the_site_search_and_treats_metacharacters_literally() {
    let app = spawn_app().await;
    for title in [
        "Kind of Blue",
        "Kind of Blue: The Making of the Miles Davis Masterpiece",
        "12 Angry Men",
        "Blade Runner",
    ] {
        product(title).build(&app.db).await;
    }
    let doc = page(&app, "/products?q=KIND+of").await;
    let listed = titles(&doc);
    assert!(listed.contains(&"Kind of Blue".to_string()), "{listed:?}");
    assert!(
        listed.contains(&"Kind of Blue: The Making of the Miles Davis Masterpiece".to_string()),
        "{listed:?}"
    );
    assert!(!listed.contains(&"Blade Runner".to_string()), "{listed:?}");
    assert_eq!(attr(&doc, "#f-q", "value").as_deref(), Some("KIND of"));
    for search in ["(*+?[", ".*", "^", "\\"] {
        let path = format!(
            "/products?q={}",
            form_urlencoded::byte_serialize(search.as_bytes()).collect::<String>()
        );
        let doc = page(&app, &path).await;
        assert_eq!(titles(&doc), Vec::<String>::new(), "{search}");
        assert_eq!(texts(&doc, ".result-count"), ["No products match."]);
    }
    let doc = page(&app, "/products?q=12+angry").await;
    assert!(titles(&doc).contains(&"12 Angry Men".to_string()));
}

#[tokio::test]
async fn bad_listing_parameters_fall_back_to_defaults_and_unknown_slugs_are_404() {
    let app = spawn_app().await;
    let jazz = CategoryBuilder::new("jazz")
        .name("Jazz")
        .build(&app.db)
        .await;
    records(&app, 25, Some(&jazz)).await;
    for path in [
        "/products?page=0",
        "/products?page=abc",
        "/products?page=-1",
        "/products?page=99999999999999999999",
        "/products?sort=evil",
        "/products?type=spaceship&min_price=cheap&max_price=-3&min_discount=500",
        "/products?page=999",
        "/categories/jazz?page=abc&sort=evil",
        "/products?q=%28%2A%2B%3F%5B&page=0",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let doc = html(&body(response).await);
        assert!(count(&doc, "form.filters") == 1, "{path}");
    }
    let doc = page(&app, "/products?page=abc&sort=evil").await;
    assert_eq!(titles(&doc)[0], "Record 25");
    // Past the end: the last page.
    let doc = page(&app, "/products?page=999").await;
    assert_eq!(
        attr(&doc, ".pagination a[aria-current=page]", "href").as_deref(),
        Some("/products?page=3")
    );
    for path in ["/products/no-such-thing", "/categories/no-such-thing"] {
        let response = app.get(path).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        assert_eq!(heading(&html(&body(response).await)), "Page not found");
    }
}

#[tokio::test]
async fn each_product_type_has_its_own_details_with_price_and_stock() {
    let app = spawn_app().await;
    let db = &app.db;
    let tree = tree(&app).await;
    product("Kind of Blue")
        .price(1299, 1999)
        .category(&tree.modal)
        .tracks(&[
            "So What",
            "Freddie Freeloader",
            "Blue in Green",
            "All Blues",
            "Flamenco Sketches",
        ])
        .build(db)
        .await;
    product("Casablanca")
        .film()
        .people(&["Humphrey Bogart", "Ingrid Bergman", "Paul Henreid"])
        .director(&["Michael Curtiz"])
        .build(db)
        .await;
    product("Dune")
        .book()
        .people(&["Frank Herbert"])
        .isbn("978-0-441-17271-9")
        .build(db)
        .await;
    product("A Love Supreme").stock(0).build(db).await;
    product("Neuromancer")
        .book()
        .price(1500, 1500)
        .build(db)
        .await;

    let doc = page(&app, "/products/kind-of-blue").await;
    assert_eq!(heading(&doc), "Kind of Blue");
    assert_eq!(texts(&doc, ".product-summary .retail"), ["$12.99"]);
    assert_eq!(texts(&doc, ".product-summary .list-price"), ["$19.99"]);
    assert_eq!(texts(&doc, ".savings"), ["You save $7.00 (35%)"]);
    assert_eq!(texts(&doc, ".stock"), ["In stock"]);
    assert_eq!(
        texts(&doc, ".tracks li"),
        [
            "So What",
            "Freddie Freeloader",
            "Blue in Green",
            "All Blues",
            "Flamenco Sketches"
        ]
    );
    assert_eq!(
        texts(&doc, "nav.breadcrumbs a"),
        ["Music", "Jazz", "Ragtime", "Bop", "Modal Jazz"]
    );
    assert!(
        csrf_token(&doc).is_some(),
        "the add-to-cart form has a token"
    );

    let doc = page(&app, "/products/casablanca").await;
    assert_eq!(
        texts(&doc, ".cast li"),
        ["Humphrey Bogart", "Ingrid Bergman", "Paul Henreid"]
    );
    assert_eq!(count(&doc, ".tracks"), 0);
    assert!(texts(&doc, ".details-film .fact")
        .iter()
        .any(|f| f.contains("Michael Curtiz")));

    let doc = page(&app, "/products/dune").await;
    assert_eq!(texts(&doc, ".byline"), ["by Frank Herbert"]);
    assert!(texts(&doc, ".details-book .fact")
        .iter()
        .any(|f| f.contains("978-0-441-17271-9")));
    assert_eq!(count(&doc, ".cast"), 0);

    // A sold-out product says so and its cart button is disabled.
    let doc = page(&app, "/products/a-love-supreme").await;
    assert_eq!(texts(&doc, ".stock"), ["Sold out"]);
    assert_eq!(count(&doc, ".add-to-cart button[disabled]"), 1);
    // Full price: no savings line.
    let doc = page(&app, "/products/neuromancer").await;
    assert_eq!(count(&doc, ".savings"), 0);
}

#[tokio::test]
async fn the_category_tree_lists_every_category_indented_by_depth() {
    let app = spawn_app().await;
    tree(&app).await;
    let doc = page(&app, "/categories").await;
    let all = texts(&doc, ".category-tree li");
    assert_eq!(all.len(), 9);
    assert_eq!(
        texts(&doc, ".category-tree li.depth-0"),
        ["Books", "Film", "Music"]
    );
    assert_eq!(texts(&doc, ".category-tree li.depth-4"), ["Modal Jazz"]);
    let jazz = all.iter().position(|c| c == "Jazz").expect("jazz");
    assert_eq!(
        all[jazz + 1..jazz + 5],
        ["Ragtime", "Bop", "Modal Jazz", "Swing"]
    );
}

#[tokio::test]
async fn a_category_page_has_breadcrumbs_children_and_products_of_its_descendants() {
    let app = spawn_app().await;
    let db = &app.db;
    let tree = tree(&app).await;
    // Nine under Jazz, eight of them albums; Bird and Diz the cheapest album.
    product("Kind of Blue: The Making of the Miles Davis Masterpiece")
        .book()
        .issued("2002-01-01")
        .price(900, 1500)
        .category(&tree.modal)
        .build(db)
        .await;
    for (title, issued, category) in [
        ("Maiden Voyage", "1965-05-17", &tree.modal),
        ("A Love Supreme", "1965-01-01", &tree.modal),
        ("Kind of Blue", "1959-08-17", &tree.modal),
        ("Bird and Diz", "1952-01-01", &tree.bop),
        ("Maple Leaf Rag", "1916-01-01", &tree.ragtime),
        ("The Atomic Mr. Basie", "1958-01-01", &tree.swing),
        ("Ellington at Newport", "1956-07-07", &tree.swing),
        ("Jazz Samples", "1990-01-01", &tree.jazz),
    ] {
        let retail = if title == "Bird and Diz" { 999 } else { 1299 };
        product(title)
            .issued(issued)
            .price(retail, 1999)
            .category(category)
            .build(db)
            .await;
    }
    // Music, but not Jazz.
    product("Elsewhere").category(&tree.music).build(db).await;

    let doc = page(&app, "/categories/modal-jazz").await;
    assert_eq!(heading(&doc), "Modal Jazz");
    assert_eq!(
        texts(&doc, "nav.breadcrumbs li"),
        [
            "Categories",
            "Music",
            "Jazz",
            "Ragtime",
            "Bop",
            "Modal Jazz"
        ]
    );
    assert_eq!(
        attr(&doc, "nav.breadcrumbs a[href='/categories/bop']", "href").as_deref(),
        Some("/categories/bop")
    );
    assert_eq!(
        titles(&doc),
        [
            "Kind of Blue: The Making of the Miles Davis Masterpiece",
            "Maiden Voyage",
            "A Love Supreme",
            "Kind of Blue"
        ]
    );

    let doc = page(&app, "/categories/jazz").await;
    assert_eq!(texts(&doc, ".child-categories a"), ["Ragtime", "Swing"]);
    assert_eq!(texts(&doc, ".result-count .total"), ["9"]);
    // The same filters and sorts as the shop.
    let doc = page(&app, "/categories/jazz?type=album&sort=price").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["8"]);
    assert_eq!(titles(&doc)[0], "Bird and Diz");
    assert_eq!(
        attr(&doc, "form.filters", "action").as_deref(),
        Some("/categories/jazz")
    );
}
