//! Keyset ("seek") pagination of the product listings: Next and Previous links carry a cursor
//! (`?after=` / `?before=`), walks over a catalog full of equal sort keys visit every product
//! once in order, in both directions and under every sort; bad cursors are a 400 page; products
//! added during a walk never repeat or hide products; and a keyset page is a bounded walk of the
//! sort index, not a skip.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use crate::common::builders::{CategoryBuilder, ProductBuilder};
use crate::common::*;
use bazaar::catalog::card::ProductCard;
use bazaar::catalog::listing::{ListingQuery, Sort, PAGE_SIZE};
use bazaar::catalog::products::{self, AlbumDetails, Details, NewProduct, Product, Shipping};
use bazaar::catalog::seek::{self, Cursor, Seek};
use bazaar::catalog::{categories, listing};
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use reqwest::StatusCode;

/// Products made to collide: few distinct dates, prices, discounts and titles.
const EXTRA: usize = 150;

fn new_product(n: usize, category: Option<bson::oid::ObjectId>) -> NewProduct {
    let title = format!("Echo {}", n % 6);
    let list = 2_000 + (n % 4) as i64 * 100;
    // Three discounts (0, 25 and 50 %) over four list prices.
    let retail = list * [100, 75, 50][n % 3] / 100;
    NewProduct {
        sku: bazaar::domain::Sku::parse(&format!("echo{n:04}")).expect("a valid SKU"),
        slug: bazaar::domain::Slug::parse(&format!("echo-{n:04}")).expect("a valid slug"),
        title: title.clone(),
        description: "Made to share its sort keys with others.".to_string(),
        list_price: bazaar::domain::Money::from_cents(list),
        retail_price: bazaar::domain::Money::from_cents(retail),
        categories: category.into_iter().collect(),
        details: Details::Album(AlbumDetails {
            title,
            artist: "The Echoes".to_string(),
            genre: vec!["Jazz".to_string()],
            tracks: vec!["One".to_string()],
            issue_date: DateTime::from_millis((n % 5) as i64 * 86_400_000),
            label: "Echo".to_string(),
        }),
        qty: 3,
        featured: false,
        shipping: Shipping::default(),
    }
}

/// [`EXTRA`] colliding products, a third of them filed under Swing (in Music).
async fn app_with_ties() -> TestApp {
    let app = spawn_app().await;
    let music = CategoryBuilder::new("music").build(&app.db).await;
    let swing = CategoryBuilder::new("swing")
        .parent(&music)
        .build(&app.db)
        .await;
    for n in 0..EXTRA {
        let category = (n % 3 == 0).then_some(swing.id);
        products::create(&app.db, new_product(n, category))
            .await
            .expect("created");
    }
    app
}

/// A product's sort key as something comparable.
#[derive(PartialEq, PartialOrd)]
enum Key {
    Number(i64),
    Text(String),
}

fn key(sort: Sort, p: &ProductCard) -> Key {
    match sort {
        Sort::Newest => match &p.details.issue_date {
            Some(Bson::DateTime(d)) => Key::Number(d.timestamp_millis()),
            other => panic!("not a date: {other:?}"),
        },
        Sort::PriceLow | Sort::PriceHigh => Key::Number(p.pricing.retail.cents()),
        Sort::Discount => Key::Number(i64::from(p.pricing.pct_savings)),
        Sort::Title => Key::Text(p.search_title.clone()),
    }
}

/// `a` before `b` in the listing's order: the key, then `_id`, both one way.
fn order(sort: Sort, a: &ProductCard, b: &ProductCard) -> Ordering {
    let ascending = (key(sort, a), a.id)
        .partial_cmp(&(key(sort, b), b.id))
        .expect("comparable");
    if sort.ascending() {
        ascending
    } else {
        ascending.reverse()
    }
}

/// Every product of `filter` as the store has it now, in the listing's order.
async fn expected(app: &TestApp, filter: Document, sort: Sort) -> Vec<ProductCard> {
    let mut all: Vec<ProductCard> = products::collection(&app.db)
        .clone_with_type::<ProductCard>()
        .find(filter)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    all.sort_by(|a, b| order(sort, a, b));
    all
}

fn slugs(doc: &scraper::Html) -> Vec<String> {
    let sel = scraper::Selector::parse(".product-grid .product-title a").unwrap();
    doc.select(&sel)
        .filter_map(|a| a.value().attr("href"))
        .map(|href| href.trim_start_matches("/products/").to_string())
        .collect()
}

async fn page(app: &TestApp, path: &str) -> scraper::Html {
    let response = app.get(path).await;
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    html(&body(response).await)
}

/// Page `n` at `path` shows the products of `want` (the whole listing in order) that belong
/// on it.
async fn assert_shows_page(app: &TestApp, path: &str, want: &[ProductCard], n: usize) {
    let shown = slugs(&page(app, path).await);
    let start = (n - 1) * PAGE_SIZE as usize;
    let end = (start + PAGE_SIZE as usize).min(want.len());
    let wanted: Vec<String> = want[start..end].iter().map(|p| p.slug.clone()).collect();
    assert_eq!(shown, wanted, "{path}");
}

fn link(doc: &scraper::Html, rel: &str) -> Option<String> {
    attr(doc, &format!(".pagination a[rel={rel}]"), "href")
}

fn current_page(doc: &scraper::Html) -> u64 {
    texts(doc, ".pagination a[aria-current=page]")
        .first()
        .and_then(|n| n.parse().ok())
        .expect("the current page is marked")
}

/// Follow Next links from `start` to the end; then Previous links back to the start. Returns the
/// pages (slugs of each) both ways, the backward ones put back in forward order.
async fn walk(app: &TestApp, start: &str) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let mut forward = Vec::new();
    let mut path = start.to_string();
    let mut last_path;
    loop {
        let doc = page(app, &path).await;
        assert_eq!(
            current_page(&doc),
            forward.len() as u64 + 1,
            "page number along the walk at {path}"
        );
        forward.push(slugs(&doc));
        last_path = path.clone();
        match link(&doc, "next") {
            Some(next) => {
                assert!(next.contains("after="), "Next is a keyset link: {next}");
                path = next;
            }
            None => break,
        }
        assert!(forward.len() < 100, "the walk ends");
    }
    let mut backward = Vec::new();
    let mut path = last_path;
    loop {
        let doc = page(app, &path).await;
        backward.push(slugs(&doc));
        match link(&doc, "prev") {
            Some(prev) => path = prev,
            None => break,
        }
        assert!(backward.len() < 100, "the walk back ends");
    }
    backward.reverse();
    (forward, backward)
}

#[tokio::test]
async fn next_and_previous_links_visit_every_product_once_in_order_under_every_sort() {
    let app = app_with_ties().await;
    let on_sale = ListingQuery::default().filter(doc! {});
    let swing = categories::by_slug(&app.db, &crate::common::slug("swing"))
        .await
        .unwrap()
        .unwrap();
    for sort in Sort::ALL {
        for (path, filter) in [
            (format!("/products?sort={}", sort.as_str()), on_sale.clone()),
            (
                format!("/categories/swing?sort={}", sort.as_str()),
                ListingQuery::default().filter(listing::in_category(swing.id)),
            ),
        ] {
            let want: Vec<String> = expected(&app, filter, sort)
                .await
                .into_iter()
                .map(|p| p.slug)
                .collect();
            assert!(want.len() > 2 * PAGE_SIZE as usize, "{path}: several pages");
            let (forward, backward) = walk(&app, &path).await;
            for (n, p) in forward.iter().enumerate() {
                let full = n + 1 < forward.len();
                assert!(
                    !full || p.len() == PAGE_SIZE as usize,
                    "{path}: page {n} is full"
                );
            }
            assert_eq!(
                forward.concat(),
                want,
                "{path}: Next links, in order, once each"
            );
            assert_eq!(
                backward, forward,
                "{path}: Previous links show the same pages"
            );
        }
    }
}

#[tokio::test]
async fn deep_pages_link_numbers_only_near_the_ends() {
    let app = spawn_app().await;
    bazaar::demo::catalog::seed_bulk(&app.db, 636)
        .await
        .expect("seeded");
    // 636 products: 53 pages. Page 2 links its neighbours by number.
    let second = page(&app, "/products?page=2").await;
    assert_eq!(
        texts(&second, ".pagination a.page"),
        ["1", "2", "3", "4", "53"]
    );
    // Page 27 by number still works; its neighbours are too deep to be linked by number, and
    // Next and Previous are keyset links.
    let middle = page(&app, "/products?page=27").await;
    assert_eq!(texts(&middle, ".pagination a.page"), ["1", "27", "53"]);
    let next = link(&middle, "next").expect("a next page");
    let prev = link(&middle, "prev").expect("a previous page");
    assert!(next.contains("after=") && prev.contains("before="));
    let after = page(&app, &next).await;
    assert_eq!(current_page(&after), 28);
    assert_eq!(
        attr(&after, ".pagination a[aria-current=page]", "href").as_deref(),
        Some(next.as_str()),
        "a keyset page's own number links to its own address"
    );
    let numbered = page(&app, "/products?page=28").await;
    assert_eq!(
        slugs(&after),
        slugs(&numbered),
        "the keyset page 28 is page 28"
    );
    let before = page(&app, &prev).await;
    assert_eq!(
        slugs(&before),
        slugs(&page(&app, "/products?page=26").await)
    );
    // The last page by number, and Previous from it.
    let last = page(&app, "/products?page=53").await;
    assert!(link(&last, "next").is_none());
    assert_eq!(slugs(&last).len(), 636 - 52 * PAGE_SIZE as usize);
}

#[tokio::test]
async fn bad_cursors_are_a_400_page() {
    let app = spawn_app().await;
    // More than a page, at different prices, in a category.
    let jazz = CategoryBuilder::new("jazz").build(&app.db).await;
    for n in 0..PAGE_SIZE as i64 + 3 {
        ProductBuilder::new(&format!("cursor{n}"))
            .price(1_000 + n * 10, 2_000)
            .category(&jazz)
            .build(&app.db)
            .await;
    }
    let first = page(&app, "/products?sort=price").await;
    let next = link(&first, "next").expect("a second page");
    let token = next.split("after=").nth(1).expect("a token").to_string();
    // The genuine link works.
    page(&app, &next).await;
    let garbage = [
        "/products?after=".to_string(),
        "/products?after=%21%21%21".to_string(),
        "/products?before=bm90IGEgdG9rZW4".to_string(),
        // A token made for another sort order.
        format!("/products?sort=title&after={token}"),
        format!("/products?after={token}"),
        // Both at once.
        format!("/products?sort=price&after={token}&before={token}"),
        format!("/categories/jazz?sort=price&after=x{}", &token[1..]),
        format!("/categories/jazz?sort=price&after={}", "A".repeat(5_000)),
    ];
    for path in garbage {
        let response = app.get(&path).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        let text = body(response).await;
        assert!(
            text.contains("page link is not valid"),
            "{path}: the page says why"
        );
    }
}

#[tokio::test]
async fn products_added_during_a_walk_never_repeat_or_hide_others() {
    let app = app_with_ties().await;
    let sort = Sort::PriceLow;
    let filter = ListingQuery::default().filter(doc! {});
    let at_start: Vec<ProductCard> = expected(&app, filter.clone(), sort).await;
    let mut seen: Vec<String> = Vec::new();
    // Added products, each with the cursor (last product seen) at the time it was added.
    let mut added: Vec<(String, Option<String>)> = Vec::new();
    let mut path = "/products?sort=price".to_string();
    let mut n = 1_000;
    loop {
        let doc = page(&app, &path).await;
        seen.extend(slugs(&doc));
        // Two new products per page, at prices spread over the whole listing: some land ahead
        // of the walk, some behind it, some on its cursor's own price.
        for _ in 0..2 {
            let mut new = new_product(n, None);
            new.retail_price =
                bazaar::domain::Money::from_cents([100, 1_200, 2_000, 1_500, 3_000, 900][n % 6]);
            n += 1;
            let product = products::create(&app.db, new).await.expect("created");
            added.push((product.slug.to_string(), seen.last().cloned()));
        }
        match link(&doc, "next") {
            Some(next) => path = next,
            None => break,
        }
    }
    let mut once = HashSet::new();
    for slug in &seen {
        assert!(once.insert(slug.clone()), "{slug} shown twice");
    }
    for p in &at_start {
        assert!(
            once.contains(&p.slug),
            "{} was there all along but skipped",
            p.slug
        );
    }
    // An added product shows exactly when it sorts after the cursor it was added at.
    let now: HashMap<String, ProductCard> = expected(&app, filter, sort)
        .await
        .into_iter()
        .map(|p| (p.slug.clone(), p))
        .collect();
    for (slug, cursor) in &added {
        let ahead = match cursor {
            None => true,
            Some(c) => order(sort, &now[c], &now[slug]) == Ordering::Less,
        };
        assert_eq!(once.contains(slug), ahead, "{slug} (added at {cursor:?})");
    }
    // And what was shown is in order.
    let shown: Vec<&ProductCard> = seen.iter().map(|s| &now[s]).collect();
    assert!(
        shown
            .windows(2)
            .all(|w| order(sort, w[0], w[1]) == Ordering::Less),
        "the walk is in the listing's order"
    );
}

/// A keyset page is read from the sort index at its cursor: the store examines the keys from
/// the cursor to the page's last product (plus the cursor's ties), sorts nothing and skips
/// nothing, however deep the cursor is.
#[tokio::test]
async fn a_keyset_page_walks_the_sort_index_from_its_cursor() {
    let app = app_with_ties().await;
    bazaar::demo::catalog::seed_bulk(&app.db, 1_000)
        .await
        .expect("seeded");
    let music = categories::by_slug(&app.db, &crate::common::slug("music"))
        .await
        .unwrap()
        .unwrap();
    let everything = ListingQuery::default().filter(doc! {});
    for sort in Sort::ALL {
        let catalog = expected(&app, everything.clone(), sort).await;
        for (what, filter) in [
            ("all products", everything.clone()),
            (
                "the music category",
                ListingQuery::default().filter(listing::in_category(music.id)),
            ),
        ] {
            let listed: HashSet<bson::oid::ObjectId> = expected(&app, filter.clone(), sort)
                .await
                .into_iter()
                .map(|p| p.id)
                .collect();
            // A cursor three quarters of the way down the catalog.
            let at_index = catalog.len() * 3 / 4;
            let at = &catalog[at_index];
            let ties = catalog
                .iter()
                .filter(|p| key(sort, p) == key(sort, at))
                .count();
            for seek in [
                Seek::After(Cursor::at(sort, at, 9).unwrap()),
                Seek::Before(Cursor::at(sort, at, 9).unwrap()),
            ] {
                // What an ideal walk reads: index entries from the cursor until a page and one
                // more product of the listing have gone by.
                let steps: Box<dyn Iterator<Item = &ProductCard>> = if seek.forward() {
                    Box::new(catalog[at_index + 1..].iter())
                } else {
                    Box::new(catalog[..at_index].iter().rev())
                };
                let mut found = 0;
                let mut walk = 0;
                for p in steps {
                    if found == PAGE_SIZE + 1 {
                        break;
                    }
                    walk += 1;
                    found += u64::from(listed.contains(&p.id));
                }
                let mut keys = 0;
                // The category is a third of the catalog: dense enough to walk the sort index.
                for find in seek::finds(&filter, &seek, true) {
                    let explain = app
                        .db
                        .database()
                        .run_command(doc! {
                            "explain": find.command(products::COLLECTION),
                            "verbosity": "executionStats",
                        })
                        .await
                        .expect("explain runs");
                    let plan = Bson::Document(explain.clone());
                    let scan = find_stage(&plan, "IXSCAN")
                        .unwrap_or_else(|| panic!("{what} {sort:?}: no index scan: {explain}"));
                    assert_eq!(
                        scan.get_document("keyPattern").unwrap(),
                        &sort.index(),
                        "{what} {sort:?}"
                    );
                    assert!(
                        find_stage(&plan, "SORT").is_none(),
                        "{what} {sort:?}: {explain}"
                    );
                    let stats = explain.get_document("executionStats").unwrap();
                    keys += stats.get_i64("totalKeysExamined").unwrap() as usize;
                }
                // Within twice the ideal walk (the store counts a key or so beyond each find's
                // last match); a skip to the cursor would read hundreds.
                let bound = 2 * (walk + ties) + 2;
                assert!(
                    keys <= bound,
                    "{what} {sort:?} {seek:?}: {keys} keys examined, an ideal walk reads {walk} \
                     (+{ties} ties)"
                );
                assert!(
                    bound < at_index / 3,
                    "{what} {sort:?}: the cursor is deep compared with a page"
                );
            }
        }
    }
}

/// A keyset page costs the same finds however deep it is: no count, no skip.
#[tokio::test]
async fn a_keyset_page_sends_at_most_two_finds() {
    // The traffic log (off the request path) is off: only the page's own commands count.
    let app = spawn_app_with(&[
        ("BAZAAR_LOG__DATABASE_COMMANDS", "true"),
        ("BAZAAR_ANALYTICS__EVENTS", "false"),
    ])
    .await;
    bazaar::demo::catalog::seed_bulk(&app.db, 636)
        .await
        .expect("seeded");
    let middle = page(&app, "/products?sort=discount&page=27").await;
    let next = link(&middle, "next").expect("a next page");
    let after_next = link(&page(&app, &next).await, "next").expect("a page after it");
    // A page not seen before: once seen, it is served from the catalog cache for a while.
    app.db.commands().record();
    page(&app, &after_next).await;
    let sent: Vec<String> = app
        .db
        .commands()
        .take()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        !sent.is_empty() && sent.len() <= 2 && sent.iter().all(|c| c == "find products"),
        "{sent:?}"
    );
}

/// A type-filtered newest-first listing (the shop's filter form) reads its page from the type's
/// index in the listing's order, so it sorts nothing however many products the type has.
#[tokio::test]
async fn a_type_filtered_newest_page_is_read_in_index_order() {
    let app = spawn_app().await;
    bazaar::demo::catalog::seed_bulk(&app.db, 336)
        .await
        .expect("seeded");
    let query = ListingQuery {
        kind: Some(bazaar::catalog::products::ProductType::Album),
        in_stock: true,
        ..ListingQuery::default()
    };
    let filter = query.filter(doc! {});
    let explain = app
        .db
        .database()
        .run_command(doc! {
            "explain": {
                "find": products::COLLECTION,
                "filter": filter.clone(),
                "sort": Sort::Newest.document(),
                "limit": PAGE_SIZE as i64,
            },
            "verbosity": "executionStats",
        })
        .await
        .expect("explain runs");
    let plan = Bson::Document(explain.clone());
    let scan = find_stage(&plan, "IXSCAN").unwrap_or_else(|| panic!("no index scan: {explain}"));
    assert_eq!(
        scan.get_document("keyPattern").unwrap(),
        &doc! { "type": 1, "details.issue_date": -1, "_id": -1 }
    );
    assert!(find_stage(&plan, "SORT").is_none(), "{explain}");
    // And the page is the listing's first twelve, as a full sort would give them.
    let page: Vec<ProductCard> = products::collection(&app.db)
        .clone_with_type::<ProductCard>()
        .find(filter.clone())
        .sort(Sort::Newest.document())
        .limit(PAGE_SIZE as i64)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let all = expected(&app, filter, Sort::Newest).await;
    assert!(all.len() > PAGE_SIZE as usize);
    assert_eq!(ids(&page), ids(&all[..PAGE_SIZE as usize]));
}

/// A listing's total is what counting the listing itself gives, drafts and archived products
/// left out, whether the rest of the filter is a category, a type or nothing at all.
#[tokio::test]
async fn listing_totals_leave_out_draft_and_archived_products() {
    use bazaar::catalog::cache;
    let app = app_with_ties().await;
    let music = categories::by_slug(&app.db, &crate::common::slug("music"))
        .await
        .unwrap()
        .unwrap();
    let all: Vec<Product> = products::collection(&app.db)
        .find(doc! { "category_path": music.id })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(all.len() > 6);
    for (p, status) in all
        .iter()
        .take(4)
        .zip(["archived", "draft", "archived", "draft"])
    {
        products::collection(&app.db)
            .update_one(doc! { "_id": p.id }, doc! { "$set": { "status": status } })
            .await
            .unwrap();
    }
    bazaar::catalog::changes::products_changed(&app.db);
    let album = ListingQuery {
        kind: Some(bazaar::catalog::products::ProductType::Album),
        ..ListingQuery::default()
    };
    for filter in [
        ListingQuery::default().filter(listing::in_category(music.id)),
        ListingQuery::default().filter(doc! {}),
        album.filter(doc! {}),
        album.filter(listing::in_category(music.id)),
    ] {
        let counted = products::collection(&app.db)
            .count_documents(filter.clone())
            .await
            .unwrap();
        assert_eq!(
            cache::total(&app.db, &filter).await.unwrap(),
            counted,
            "{filter}"
        );
    }
    let in_music = ListingQuery::default().filter(listing::in_category(music.id));
    assert_eq!(
        cache::total(&app.db, &in_music).await.unwrap(),
        all.len() as u64 - 4
    );
}

/// The ids of `products`, to compare pages.
fn ids(products: &[ProductCard]) -> Vec<bson::oid::ObjectId> {
    products.iter().map(|p| p.id).collect()
}

/// Read through page anchors (placed every few products here, to go through many of them and
/// through runs of equal keys longer than their spacing), every page start of a listing full of
/// ties shows exactly what skipping to it shows on a catalog that does not change.
#[tokio::test]
async fn pages_read_from_anchors_are_the_pages_a_skip_reads() {
    use bazaar::catalog::anchors;
    let app = app_with_ties().await;
    let swing = categories::by_slug(&app.db, &crate::common::slug("swing"))
        .await
        .unwrap()
        .unwrap();
    for sort in Sort::ALL {
        for filter in [
            ListingQuery::default().filter(doc! {}),
            ListingQuery::default().filter(listing::in_category(swing.id)),
        ] {
            let want = expected(&app, filter.clone(), sort).await;
            for hint in [true, false] {
                let anchors = anchors::walk(&app.db, &filter, sort, 7, hint)
                    .await
                    .expect("walked");
                assert!(anchors.usable);
                assert_eq!(anchors.count, want.len() as u64, "{sort:?}");
                assert_eq!(anchors.list.len(), want.len() / 7, "{sort:?}");
                for start in 0..want.len() {
                    let page =
                        anchors::read_planned(&app.db, &filter, &anchors, start as u64, 5, hint)
                            .await
                            .expect("read");
                    let end = (start + 5).min(want.len());
                    assert_eq!(
                        ids(&page),
                        ids(&want[start..end]),
                        "{sort:?} {filter} from {start} (hint {hint})"
                    );
                }
            }
        }
    }
}

/// Deep numbered pages, read through the listing's anchors, are the listing's pages.
#[tokio::test]
async fn deep_numbered_pages_show_the_listing_in_order() {
    let app = app_with_ties().await;
    bazaar::demo::catalog::seed_bulk(&app.db, 600)
        .await
        .expect("seeded");
    let filter = ListingQuery::default().filter(doc! {});
    for sort in [Sort::Newest, Sort::Discount, Sort::Title] {
        let want = expected(&app, filter.clone(), sort).await;
        let pages = want.len().div_ceil(PAGE_SIZE as usize);
        assert!(pages > 50, "deep pages exist: {pages}");
        for n in (20..=pages - 19).step_by(3) {
            let path = format!("/products?sort={}&page={n}", sort.as_str());
            assert_shows_page(&app, &path, &want, n).await;
        }
    }
}

/// Anchors are where products were at their walk: products added before a deep page since then
/// shift it by at most as many products as were added (here: it shows what it showed before
/// they were added, as a page number did when the anchors were walked), and the anchors are
/// walked again in the background, never by the page.
#[tokio::test]
async fn deep_page_numbers_drift_by_at_most_the_products_added_since_the_walk() {
    let app = spawn_app().await;
    bazaar::demo::catalog::seed_bulk(&app.db, 636)
        .await
        .expect("seeded");
    // The first deep page waits for the walk (not read by skipping), so the anchors are
    // walked before the products below are added.
    let _skipping = bazaar::catalog::anchors::of(&app.db)
        .hold_skip_reads()
        .await;
    let path = "/products?sort=price&page=30";
    let before = slugs(&page(&app, path).await);
    assert_eq!(before.len(), PAGE_SIZE as usize);
    // Three products cheaper than anything listed: a skip would now show page 30 three
    // products earlier.
    let added = 3;
    for n in 0..added {
        let mut new = new_product(n, None);
        new.retail_price = bazaar::domain::Money::from_cents(1);
        new.list_price = bazaar::domain::Money::from_cents(1);
        products::create(&app.db, new).await.expect("created");
    }
    let filter = ListingQuery::default().filter(doc! {});
    let now: Vec<String> = expected(&app, filter, Sort::PriceLow)
        .await
        .into_iter()
        .map(|p| p.slug)
        .collect();
    let start = 29 * PAGE_SIZE as usize;
    let after = slugs(&page(&app, path).await);
    let at = now
        .iter()
        .position(|s| *s == after[0])
        .expect("a listed product");
    assert!(
        (start..=start + added).contains(&at),
        "page 30 starts at {at}, within {added} of {start}"
    );
    assert_eq!(
        after,
        now[at..at + PAGE_SIZE as usize],
        "a run of the listing"
    );
    assert_eq!(
        after, before,
        "the anchors were walked before the products were added"
    );
}

/// Before a listing's anchors are walked, a deep page number is read by skipping on the index
/// keys: it answers at once with the listing's products at that place, from either half, under
/// every sort and in a category.
#[tokio::test]
async fn a_deep_page_before_its_anchors_exist_is_read_by_skipping() {
    let app = app_with_ties().await;
    bazaar::demo::catalog::seed_bulk(&app.db, 1_500)
        .await
        .expect("seeded");
    let music = categories::by_slug(&app.db, &crate::common::slug("music"))
        .await
        .unwrap()
        .unwrap();
    // No walk runs: every deep page below is read by skipping.
    let _held = bazaar::catalog::anchors::of(&app.db).hold_walks().await;
    let everything = ListingQuery::default().filter(doc! {});
    let in_music = ListingQuery::default().filter(listing::in_category(music.id));
    for sort in Sort::ALL {
        for (base, filter) in [
            ("/products".to_string(), everything.clone()),
            ("/categories/music".to_string(), in_music.clone()),
        ] {
            let want = expected(&app, filter, sort).await;
            let pages = want.len().div_ceil(PAGE_SIZE as usize);
            assert!(pages > 2 * 20 + 2, "{base}: deep pages exist ({pages})");
            // Just past the numbered pages at the start, the middle (read from the start),
            // just past it (read from the end) and just before the numbered pages at the end.
            for n in [22, pages / 2, pages / 2 + 1, pages - 21] {
                let path = format!("{base}?sort={}&page={n}", sort.as_str());
                assert_shows_page(&app, &path, &want, n).await;
            }
        }
    }
}

/// The find a deep page skips with before its listing's anchors exist goes along an index in
/// the listing's order whose keys decide the whole filter: no sort, and no document read for
/// the products it skips (the products listing's read is covered: none read at all; the
/// category index is multikey, so the store reads the page's own twelve).
#[tokio::test]
async fn a_deep_page_skips_on_index_keys_alone() {
    use bazaar::catalog::anchors::{self, FromNearerEnd};
    let app = spawn_app().await;
    bazaar::demo::catalog::seed_bulk(&app.db, 600)
        .await
        .expect("seeded");
    let music = categories::by_slug(&app.db, &crate::common::slug("music"))
        .await
        .unwrap()
        .unwrap();
    for (what, filter, hint) in [
        (
            "all products",
            ListingQuery::default().filter(doc! {}),
            true,
        ),
        (
            "a category",
            ListingQuery::default().filter(listing::in_category(music.id)),
            false,
        ),
    ] {
        let listed = expected(&app, filter.clone(), Sort::Newest).await.len() as u64;
        let skip = listed / 2 - PAGE_SIZE;
        let nearer = FromNearerEnd {
            order: Sort::Newest.document(),
            skip,
            limit: PAGE_SIZE,
            from_end: false,
        };
        let find = anchors::skip_find(products::COLLECTION, &filter, Sort::Newest, hint, &nearer);
        let explain = app
            .db
            .database()
            .run_command(doc! { "explain": find, "verbosity": "executionStats" })
            .await
            .expect("explain runs");
        let plan = Bson::Document(explain.clone());
        assert!(find_stage(&plan, "IXSCAN").is_some(), "{what}: {explain}");
        assert!(find_stage(&plan, "SORT").is_none(), "{what}: {explain}");
        let stats = explain.get_document("executionStats").unwrap();
        assert_eq!(
            stats.get_i64("nReturned").unwrap(),
            PAGE_SIZE as i64,
            "{what}"
        );
        let read = stats.get_i64("totalDocsExamined").unwrap();
        assert!(
            read <= PAGE_SIZE as i64,
            "{what}: {read} documents read: {explain}"
        );
        let keys = stats.get_i64("totalKeysExamined").unwrap() as u64;
        assert!(
            keys >= skip && keys <= skip + 2 * PAGE_SIZE + 2,
            "{what}: {keys} keys for a skip of {skip}"
        );
    }
}

/// When a deep page can neither be read from anchors nor by skipping (another such read is
/// under way, or one took longer than its bound), it waits for the walk a moment, then answers
/// 503 with Retry-After (never a long skip); pages near the ends need neither.
#[tokio::test]
async fn a_deep_page_with_no_anchors_and_no_skip_read_asks_to_retry() {
    let app = spawn_app().await;
    bazaar::demo::catalog::seed_bulk(&app.db, 636)
        .await
        .expect("seeded");
    let anchors = bazaar::catalog::anchors::of(&app.db);
    let held = anchors.hold_walks().await;
    let skipping = anchors.hold_skip_reads().await;
    let response = app.get("/products?page=27").await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    assert!(body(response).await.contains("being prepared"));
    for near_an_end in ["/products?page=2", "/products?page=20", "/products?page=53"] {
        page(&app, near_an_end).await;
    }
    drop(held);
    // The walk was asked for by the first request and runs now; the page is served once it
    // is done (reads by skipping are still held off).
    let mut tries = 0;
    loop {
        let response = app.get("/products?page=27").await;
        if response.status() == StatusCode::OK {
            break;
        }
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        tries += 1;
        assert!(tries < 100, "the anchors are walked");
    }
    drop(skipping);
}

/// The read by skipping is bounded by the store too: on a store slower than the bound (every
/// `maxTimeMS` check there sleeps past it), the very find the app sends is answered 50
/// MaxTimeMSExpired rather than run to its end, and the deep page the app serves meanwhile is
/// the 503 "being prepared" one, never an error page.
#[tokio::test]
async fn a_skip_read_past_its_bound_is_stopped_by_the_store_and_asks_to_retry() {
    use bazaar::catalog::anchors::{self, FromNearerEnd};
    let nearer = FromNearerEnd {
        order: Sort::Newest.document(),
        skip: 300,
        limit: PAGE_SIZE,
        from_end: false,
    };
    let find = anchors::skip_find(products::COLLECTION, &doc! {}, Sort::Newest, true, &nearer);
    let bound = find
        .get_i64("maxTimeMS")
        .expect("the skip read sends maxTimeMS");
    let store = docstore::Server::start(docstore::Config {
        max_time_check_delay: Some(std::time::Duration::from_millis(bound as u64 + 100)),
        ..docstore::Config::in_memory()
    })
    .await
    .expect("docstore starts");
    let app = spawn_app_with(&[("BAZAAR_DATABASE__URI", &store.uri())]).await;
    bazaar::demo::catalog::seed_bulk(&app.db, 636)
        .await
        .expect("seeded");
    let held = anchors::of(&app.db).hold_walks().await;
    let response = app.get("/products?page=27").await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(body(response).await.contains("being prepared"));
    let stopped = app
        .db
        .database()
        .run_command(find)
        .await
        .expect_err("the store stops the find at its maxTimeMS");
    match stopped.kind.as_ref() {
        mongodb::error::ErrorKind::Command(c) => {
            assert_eq!((c.code, c.code_name.as_str()), (50, "MaxTimeMSExpired"))
        }
        other => panic!("not the store's time limit: {other:?}"),
    }
    drop(held);
}

/// The total a listing page shows ("of N products").
async fn shown_total(app: &TestApp, path: &str) -> u64 {
    let doc = page(app, path).await;
    let total = scraper::Selector::parse("strong.total").expect("selector");
    doc.select(&total)
        .next()
        .and_then(|t| t.text().collect::<String>().trim().parse().ok())
        .unwrap_or(0)
}

/// A total no index answers (albums in stock) is counted by walking the listing in the
/// background, and follows what happens to the catalog: a product added through this process, a
/// sale of the last units and a restock (written to the database directly, as another instance's
/// would be) each show in the total within the cache's bound, and it is then exact.
#[tokio::test]
async fn a_walked_in_stock_total_stays_exact_through_adds_sales_and_restocks() {
    let app = spawn_app().await;
    bazaar::catalog::cache::walk_every_total(&app.db);
    bazaar::demo::catalog::seed_bulk(&app.db, 300)
        .await
        .expect("seeded");
    let path = "/products?type=album&in_stock=1";
    let filter = ListingQuery {
        kind: Some(products::ProductType::Album),
        in_stock: true,
        ..ListingQuery::default()
    }
    .filter(doc! {});
    let exact = || async {
        products::collection(&app.db)
            .count_documents(filter.clone())
            .await
            .expect("counted")
    };
    let before = exact().await;
    assert!(before > 20, "{before} albums in stock");
    assert_eq!(shown_total(&app, path).await, before);
    // Within TTL plus a count: the bound on a walked total's age for a small listing.
    let bound = bazaar::catalog::cache::MAX_AGE + std::time::Duration::from_secs(2);
    let app = &app;
    let follows = |want: u64| async move {
        let deadline = std::time::Instant::now() + bound;
        loop {
            let shown = shown_total(app, path).await;
            if shown == want {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "shows {shown}, {want} after the change"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };

    ProductBuilder::new("walked-add")
        .stock(4)
        .build(&app.db)
        .await;
    assert_eq!(exact().await, before + 1);
    follows(before + 1).await;

    let sold_out = products::collection(&app.db)
        .find_one(filter.clone())
        .await
        .expect("found")
        .expect("an album in stock");
    products::collection(&app.db)
        .clone_with_type::<Document>()
        .update_one(
            doc! { "_id": sold_out.id },
            doc! { "$set": { "qty": 0_i64 } },
        )
        .await
        .expect("sold");
    assert_eq!(exact().await, before);
    follows(before).await;

    products::collection(&app.db)
        .clone_with_type::<Document>()
        .update_one(
            doc! { "_id": sold_out.id },
            doc! { "$set": { "qty": 6_i64 } },
        )
        .await
        .expect("restocked");
    assert_eq!(exact().await, before + 1);
    follows(before + 1).await;
}
