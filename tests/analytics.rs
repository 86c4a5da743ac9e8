//! Traffic analytics and the admin dashboard: page views counted into the daily and monthly
//! reports (with chosen timestamps, and through real requests), what is not counted, the
//! path cap, dropped views and the flush at shutdown; the charts' SVG, the 400 page for bad
//! dates, the index behind every report query, and the dashboard's sales figures.

use std::collections::BTreeMap;

use crate::common::builders::ProductBuilder;
use crate::common::shop::product_with_stock;
use crate::common::*;
use bazaar::analytics::{report, sales, svg, Day, Month, DAILY, MONTHLY, OTHER_PATH};
use bazaar::checkout::orders::{self, Address, Order, OrderItem, OrderStatus, Payment};
use bazaar::db::Db;
use bson::{doc, Bson, Document};
use chrono::{DateTime, Duration, TimeZone, Timelike, Utc};
use futures::TryStreamExt;
use reqwest::StatusCode;
use scraper::{Html, Selector};

fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
        .single()
        .expect("valid time")
}

fn counter(app: &TestApp) -> &bazaar::analytics::PageViewCounter {
    app.page_views.as_ref().expect("counting is on by default")
}

async fn find_all(db: &Db, collection: &str, filter: Document) -> Vec<Document> {
    db.collection::<Document>(collection)
        .find(filter)
        .await
        .expect("query")
        .try_collect()
        .await
        .expect("read")
}

async fn by_id(db: &Db, collection: &str, id: &str) -> Document {
    db.collection::<Document>(collection)
        .find_one(doc! { "_id": id })
        .await
        .expect("query")
        .unwrap_or_else(|| panic!("{collection} has {id}"))
}

fn number(v: &Bson) -> i64 {
    match v {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        other => panic!("not a count: {other:?}"),
    }
}

/// A document of counters as `key → count`.
fn counts(d: &Document) -> BTreeMap<String, i64> {
    d.iter().map(|(k, v)| (k.clone(), number(v))).collect()
}

/// Every page's views summed over every day it was counted.
async fn views_of(db: &Db, path: &str) -> i64 {
    find_all(db, DAILY, doc! { "metadata.path": path })
        .await
        .iter()
        .map(|d| number(d.get("daily").expect("daily")))
        .sum()
}

#[tokio::test]
async fn views_with_chosen_times_add_up_exactly_in_the_daily_and_monthly_reports() {
    let app = spawn_app().await;
    let views = [
        ("/", at(2025, 3, 14, 9, 5, 1)),
        ("/", at(2025, 3, 14, 9, 5, 59)),
        ("/", at(2025, 3, 14, 9, 6, 0)),
        ("/", at(2025, 3, 14, 23, 59, 59)),
        ("/products/widget", at(2025, 3, 14, 0, 0, 0)),
        ("/products/widget", at(2025, 3, 14, 14, 30, 0)),
        ("/products/widget", at(2025, 3, 15, 14, 30, 0)),
        ("/blog", at(2025, 3, 31, 12, 0, 0)),
        ("/blog", at(2025, 4, 1, 0, 0, 0)),
    ];
    // Two batches: the second adds to the documents the first created.
    for (path, time) in &views[..5] {
        assert!(counter(&app).record(path, *time));
    }
    counter(&app).flush().await;
    for (path, time) in &views[5..] {
        assert!(counter(&app).record(path, *time));
    }
    counter(&app).flush().await;

    // What each daily document must hold, worked out from the list directly.
    type Daily = (
        i64,
        BTreeMap<String, i64>,
        BTreeMap<String, BTreeMap<String, i64>>,
    );
    let mut expected: BTreeMap<String, Daily> = BTreeMap::new();
    for (path, time) in &views {
        let id = format!("{}/{path}", time.format("%Y%m%d"));
        let entry = expected.entry(id).or_default();
        entry.0 += 1;
        *entry.1.entry(time.hour().to_string()).or_default() += 1;
        *entry
            .2
            .entry(time.hour().to_string())
            .or_default()
            .entry(time.minute().to_string())
            .or_default() += 1;
    }
    let stored = find_all(&app.db, DAILY, doc! {}).await;
    assert_eq!(stored.len(), expected.len(), "{stored:?}");
    for (id, (daily, hourly, minute)) in &expected {
        let d = by_id(&app.db, DAILY, id).await;
        assert_eq!(number(d.get("daily").expect("daily")), *daily, "{id}");
        assert_eq!(
            &counts(d.get_document("hourly").expect("hourly")),
            hourly,
            "{id}"
        );
        let minutes: BTreeMap<String, BTreeMap<String, i64>> = d
            .get_document("minute")
            .expect("minute")
            .iter()
            .map(|(h, m)| (h.clone(), counts(m.as_document().expect("minutes"))))
            .collect();
        assert_eq!(&minutes, minute, "{id}");
        // metadata: the day at midnight UTC and the path, always in that order.
        let metadata = d.get_document("metadata").expect("metadata");
        assert_eq!(metadata.keys().collect::<Vec<_>>(), ["date", "path"]);
    }
    let home = by_id(&app.db, DAILY, "20250314//").await;
    assert_eq!(
        home.get_document("metadata").expect("metadata"),
        &doc! { "date": bson::DateTime::from_chrono(at(2025, 3, 14, 0, 0, 0)), "path": "/" }
    );
    assert_eq!(
        counts(home.get_document("hourly").expect("hourly")),
        BTreeMap::from([("9".to_string(), 3), ("23".to_string(), 1)])
    );

    // Monthly: per page, views by day of month and the month's total.
    let widget = by_id(&app.db, MONTHLY, "202503//products/widget").await;
    assert_eq!(
        counts(widget.get_document("daily").expect("daily")),
        BTreeMap::from([("14".to_string(), 2), ("15".to_string(), 1)])
    );
    assert_eq!(number(widget.get("total").expect("total")), 3);
    let blog_march = by_id(&app.db, MONTHLY, "202503//blog").await;
    assert_eq!(
        counts(blog_march.get_document("daily").expect("daily")),
        BTreeMap::from([("31".to_string(), 1)])
    );
    let blog_april = by_id(&app.db, MONTHLY, "202504//blog").await;
    assert_eq!(
        counts(blog_april.get_document("daily").expect("daily")),
        BTreeMap::from([("1".to_string(), 1)])
    );
    assert_eq!(find_all(&app.db, MONTHLY, doc! {}).await.len(), 4);
    let stats = counter(&app).stats();
    assert_eq!((stats.queued, stats.written, stats.dropped), (9, 9, 0));

    // The report queries read the same numbers back, zeros included.
    let day = Day::parse("2025-03-14").expect("valid");
    let hourly = report::hourly(&app.db, day, None).await.expect("report");
    assert_eq!((hourly[0], hourly[9], hourly[14], hourly[23]), (1, 3, 1, 1));
    assert_eq!(hourly.iter().sum::<i64>(), 6);
    let minutes = report::minutes(&app.db, day, 9, Some("/"))
        .await
        .expect("report");
    assert_eq!(
        (minutes[5], minutes[6], minutes.iter().sum::<i64>()),
        (2, 1, 3)
    );
    let march = Month::parse("2025-03").expect("valid");
    let daily = report::daily(&app.db, march, None).await.expect("report");
    assert_eq!(daily.len(), 31);
    assert_eq!((daily[13], daily[14], daily[30]), (6, 1, 1));
    let top = report::top_pages_of_month(&app.db, march, 10)
        .await
        .expect("report");
    let top: Vec<(&str, i64)> = top.iter().map(|p| (p.path.as_str(), p.views)).collect();
    assert_eq!(top, [("/", 4), ("/products/widget", 3), ("/blog", 1)]);
}

#[tokio::test]
async fn sixty_four_clients_at_once_lose_no_page_view() {
    let app = spawn_app_with(&[("BAZAAR_SERVER__WORKERS", "4")]).await;
    let paths = ["/", "/products", "/categories"];
    let clients: Vec<_> = (0..64)
        .map(|_| {
            let (client, _) = new_client();
            let base = app.address.clone();
            tokio::spawn(async move {
                for path in paths {
                    let response = client
                        .get(format!("{base}{path}"))
                        .send()
                        .await
                        .expect("sent");
                    assert_eq!(response.status(), StatusCode::OK, "{path}");
                }
            })
        })
        .collect();
    for client in clients {
        client.await.expect("client finished");
    }
    // Every response was sent after its view was queued; a flush writes them all.
    counter(&app).flush().await;
    for path in paths {
        assert_eq!(views_of(&app.db, path).await, 64, "{path}");
    }
    let stats = counter(&app).stats();
    assert_eq!((stats.written, stats.dropped, stats.failed), (192, 0, 0));
}

#[tokio::test]
async fn only_successful_public_pages_are_counted_under_their_path_without_the_query() {
    let app = spawn_app().await;
    ProductBuilder::new("counted").cover().build(&app.db).await;
    let home = body(app.get("/?utm_source=mail&page=2").await).await;
    let css = attr(&html(&home), "link[rel=stylesheet]", "href").expect("stylesheet");
    assert_eq!(app.get("/blog/").await.status(), StatusCode::OK);
    let products = html(&body(app.get("/products").await).await);
    let product_url = attr(&products, ".product-title a", "href").expect("a product link");
    let product = html(&body(app.get(&product_url).await).await);
    let image = attr(&product, "img[src^='/media/']", "src").expect("a product photo");

    // None of these is a page view.
    assert_eq!(app.get(&css).await.status(), StatusCode::OK);
    assert_eq!(app.get(&image).await.status(), StatusCode::OK);
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    assert_eq!(app.get_admin("/admin").await.status(), StatusCode::OK);
    assert_eq!(
        app.get_admin("/admin/analytics").await.status(),
        StatusCode::OK
    );
    assert_eq!(app.get("/admin").await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        app.get("/no-such-page").await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/products/no-such-product").await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.get("/blog/feed.atom").await.status(), StatusCode::OK);
    let head = app.client.head(app.url("/")).send().await.expect("sent");
    assert_eq!(head.status(), StatusCode::OK);
    let post = app.post_form("/", &[("a", "b")]).await;
    assert_eq!(post.status(), StatusCode::FORBIDDEN);

    counter(&app).flush().await;
    let mut counted: Vec<(String, i64)> = find_all(&app.db, DAILY, doc! {})
        .await
        .iter()
        .map(|d| {
            let path = d
                .get_document("metadata")
                .expect("metadata")
                .get_str("path");
            (
                path.expect("path").to_string(),
                number(d.get("daily").expect("daily")),
            )
        })
        .collect();
    counted.sort();
    let mut expected = vec![
        ("/".to_string(), 1),
        ("/blog".to_string(), 1),
        ("/products".to_string(), 1),
        (product_url.clone(), 1),
    ];
    expected.sort();
    assert_eq!(counted, expected);
}

#[tokio::test]
async fn paths_beyond_the_daily_cap_are_counted_as_other() {
    let app = spawn_app_with(&[("BAZAAR_ANALYTICS__MAX_PATHS_PER_DAY", "2")]).await;
    let t = at(2025, 6, 1, 10, 0, 0);
    for path in ["/a", "/b", "/c", "/d", "/a"] {
        counter(&app).record(path, t);
    }
    counter(&app).flush().await;
    // Next batch: a known path still gets its own count, a new one goes to "(other)".
    counter(&app).record("/b", t);
    counter(&app).record("/e", t);
    // Another day has its own allowance.
    counter(&app).record("/e", at(2025, 6, 2, 10, 0, 0));
    counter(&app).flush().await;
    let day = |d: &str, p: &str| format!("{d}/{p}");
    let views = |doc: Document| number(doc.get("daily").expect("daily"));
    assert_eq!(
        views(by_id(&app.db, DAILY, &day("20250601", "/a")).await),
        2
    );
    assert_eq!(
        views(by_id(&app.db, DAILY, &day("20250601", "/b")).await),
        2
    );
    assert_eq!(
        views(by_id(&app.db, DAILY, &day("20250601", OTHER_PATH)).await),
        3
    );
    assert_eq!(
        views(by_id(&app.db, DAILY, &day("20250602", "/e")).await),
        1
    );
    assert_eq!(find_all(&app.db, DAILY, doc! {}).await.len(), 4);
    let other = by_id(&app.db, MONTHLY, &format!("202506/{OTHER_PATH}")).await;
    assert_eq!(number(other.get("total").expect("total")), 3);
}

#[tokio::test]
async fn a_full_queue_drops_views_and_counts_the_drops() {
    let app = spawn_app_with(&[("BAZAAR_ANALYTICS__QUEUE_CAPACITY", "2")]).await;
    let t = at(2025, 6, 1, 10, 0, 0);
    // The writer runs on this test's single-threaded runtime, so nothing drains the queue
    // between these calls.
    let accepted: Vec<bool> = (0..5).map(|_| counter(&app).record("/", t)).collect();
    assert_eq!(accepted, [true, true, false, false, false]);
    counter(&app).flush().await;
    let stats = counter(&app).stats();
    assert_eq!((stats.queued, stats.dropped, stats.written), (2, 3, 2));
    assert_eq!(views_of(&app.db, "/").await, 2);
    let page = html(&body(app.get_admin("/admin/analytics?date=2025-06-01").await).await);
    assert!(texts(&page, ".counter-status")[0].contains("3 dropped"));
}

#[tokio::test]
async fn stopping_the_server_writes_the_views_still_queued() {
    let data = tempfile::tempdir().expect("tempdir");
    let path = data.path().display().to_string();
    let env = [
        ("BAZAAR_DATABASE__URI", "embedded"),
        ("BAZAAR_DATABASE__PATH", path.as_str()),
        // Never written on a timer: only the stop can write them.
        ("BAZAAR_ANALYTICS__FLUSH_INTERVAL_MS", "3600000"),
    ];
    let app = spawn_app_with(&env).await;
    for _ in 0..3 {
        assert_eq!(app.get("/products").await.status(), StatusCode::OK);
    }
    assert_eq!(views_of(&app.db, "/products").await, 0, "not written yet");
    app.stop().await;

    let app = spawn_app_with(&[
        ("BAZAAR_DATABASE__URI", "embedded"),
        ("BAZAAR_DATABASE__PATH", path.as_str()),
        ("BAZAAR_ANALYTICS__ENABLED", "false"),
    ])
    .await;
    assert!(app.page_views.is_none());
    assert_eq!(views_of(&app.db, "/products").await, 3);
    // With counting off, pages are served and nothing more is counted.
    assert_eq!(app.get("/products").await.status(), StatusCode::OK);
    let page = html(&body(app.get_admin("/admin/analytics").await).await);
    assert!(texts(&page, ".counter-status")[0].contains("not being counted"));
    assert_eq!(views_of(&app.db, "/products").await, 3);
    app.stop().await;
}

/// `(label, value, height)` of every bar of the chart in `figure#id`.
fn bars(doc: &Html, id: &str) -> Vec<(String, i64, f64)> {
    let selector = Selector::parse(&format!("figure#{id} svg rect.bar")).expect("selector");
    doc.select(&selector)
        .map(|rect| {
            let a = |name: &str| rect.value().attr(name).expect(name).to_string();
            (
                a("data-label"),
                a("data-value").parse().expect("a count"),
                a("height").parse().expect("a height"),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_day_chart_draws_the_counted_hours_and_an_empty_day_draws_zeros() {
    let app = spawn_app().await;
    let hits = [(9, 4), (10, 2), (23, 1)];
    for (hour, n) in hits {
        for i in 0..n {
            counter(&app).record("/a", at(2025, 3, 14, hour, i, 0));
        }
    }
    counter(&app).record("/b", at(2025, 3, 14, 9, 30, 0));
    counter(&app).flush().await;

    let response = app.get_admin("/admin/analytics?date=2025-03-14").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    let hourly = bars(&doc, "views-by-hour");
    assert_eq!(hourly.len(), 24);
    let labels: Vec<&str> = hourly.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(labels[0], "00");
    assert_eq!(labels[23], "23");
    // Largest bar 5 → scale 0..5, drawn 170 units tall.
    for (hour, (_, value, height)) in hourly.iter().enumerate() {
        let expected = match hour {
            9 => 5,
            10 => 2,
            23 => 1,
            _ => 0,
        };
        assert_eq!(*value, expected, "hour {hour}");
        assert_eq!(
            *height,
            expected as f64 * svg::PLOT_HEIGHT / 5.0,
            "hour {hour}"
        );
    }
    assert_eq!(
        texts(&doc, "figure#views-by-hour svg title")[0],
        "Page views by hour, Friday 14 March 2025"
    );
    assert_eq!(
        texts(&doc, "figure#views-by-hour svg text.x-axis-label"),
        ["Hour of day (UTC)"]
    );
    assert_eq!(
        texts(&doc, "figure#views-by-hour svg text.y-axis-label"),
        ["Views"]
    );
    assert_eq!(texts(&doc, ".total-views"), ["8"]);
    assert_eq!(texts(&doc, "figure#views-by-hour .chart-total"), ["8"]);
    assert_eq!(
        texts(&doc, "figure#views-by-hour .chart-table tbody tr")[9],
        "095"
    );
    // The minute chart defaults to the busiest hour.
    let minutes = bars(&doc, "views-by-minute");
    assert_eq!(minutes.len(), 60);
    let nonzero: Vec<(&str, i64)> = minutes
        .iter()
        .filter(|b| b.1 > 0)
        .map(|b| (b.0.as_str(), b.1))
        .collect();
    assert_eq!(
        nonzero,
        [
            ("09:00", 1),
            ("09:01", 1),
            ("09:02", 1),
            ("09:03", 1),
            ("09:30", 1)
        ]
    );
    assert_eq!(texts(&doc, ".top-page .views"), ["7", "1"]);
    assert_eq!(texts(&doc, ".top-page .page-report"), ["/a", "/b"]);

    // Drill-down: one page, and a chosen hour.
    let drill = attr(&doc, ".top-page .page-report", "href").expect("a link");
    let doc = html(&body(app.get_admin(&format!("{drill}&hour=10")).await).await);
    assert_eq!(texts(&doc, ".total-views"), ["7"]);
    assert_eq!(bars(&doc, "views-by-hour")[9].1, 4);
    let minutes = bars(&doc, "views-by-minute");
    assert_eq!((minutes[0].1, minutes[1].1, minutes[2].1), (1, 1, 0));

    // A day without traffic: zeros, not an error.
    let response = app.get_admin("/admin/analytics?date=2025-03-15").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    let empty = bars(&doc, "views-by-hour");
    assert_eq!(empty.len(), 24);
    assert!(empty.iter().all(|b| b.1 == 0 && b.2 == 0.0), "{empty:?}");
    assert_eq!(texts(&doc, ".total-views"), ["0"]);
    assert!(texts(&doc, ".top-pages .empty")[0].contains("No page views"));

    // The month: one bar per day, the 14th holding the day's views.
    let doc = html(&body(app.get_admin("/admin/analytics/month?month=2025-03").await).await);
    let daily = bars(&doc, "views-by-day");
    assert_eq!(daily.len(), 31);
    assert_eq!((daily[13].0.as_str(), daily[13].1), ("14", 8));
    assert_eq!(daily.iter().map(|b| b.1).sum::<i64>(), 8);
    let doc = html(&body(app.get_admin("/admin/analytics/month?month=2025-02").await).await);
    assert_eq!(bars(&doc, "views-by-day").len(), 28);
}

#[tokio::test]
async fn bad_dates_hours_and_paths_in_the_address_get_the_400_page() {
    let app = spawn_app().await;
    for query in [
        "/admin/analytics?date=2025-02-30",
        "/admin/analytics?date=yesterday",
        "/admin/analytics?date=2025-03-14&hour=24",
        "/admin/analytics?date=2025-03-14&hour=-1",
        "/admin/analytics?path=https://example.com/",
        "/admin/analytics/month?month=2025-13",
        "/admin/analytics/month?month=March",
    ] {
        let response = app.get_admin(query).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{query}");
        let doc = html(&body(response).await);
        assert_eq!(heading(&doc), "Bad request", "{query}");
    }
    assert_eq!(
        app.get_admin("/admin/analytics?date=2024-02-29")
            .await
            .status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn every_report_query_uses_an_index() {
    let app = spawn_app().await;
    counter(&app).record("/a", at(2025, 3, 14, 9, 0, 0));
    counter(&app).record("/b", at(2025, 3, 14, 9, 0, 0));
    counter(&app).flush().await;
    let day = Day::parse("2025-03-14").expect("valid");
    let (filter, sort) = report::day_pages_query(day);
    assert_uses_index(&app.db, "the pages of a day", DAILY, filter, sort).await;
    assert_uses_index(
        &app.db,
        "one page's day",
        DAILY,
        report::page_day_query(day, "/a"),
        doc! {},
    )
    .await;
    let (filter, sort) = report::month_pages_query(day.month());
    assert_uses_index(&app.db, "the pages of a month", MONTHLY, filter, sort).await;
    assert_uses_index(
        &app.db,
        "one page's month",
        MONTHLY,
        report::page_month_query(day.month(), "/a"),
        doc! {},
    )
    .await;
    assert_uses_index(
        &app.db,
        "the week's sales",
        orders::COLLECTION,
        sales::sales_query(day.start()),
        doc! {},
    )
    .await;
    // A page's own reports are read through the path-then-date index.
    let explain = app
        .db
        .database()
        .run_command(doc! {
            "explain": { "find": DAILY, "filter": report::page_day_query(day, "/a") },
            "verbosity": "queryPlanner",
        })
        .await
        .expect("explain runs");
    let ixscan = find_stage(&Bson::Document(explain), "IXSCAN").expect("an index scan");
    assert_eq!(
        ixscan.get_document("keyPattern").ok(),
        Some(&doc! { "metadata.path": 1, "metadata.date": 1 })
    );
}

fn order(number: &str, created: DateTime<Utc>, total: i64, status: OrderStatus) -> Order {
    Order {
        id: bson::oid::ObjectId::new(),
        number: order_number(number),
        cart_id: cart_id(&format!("cart-{number}")),
        created: bson::DateTime::from_chrono(created),
        email: "buyer@example.com".to_string(),
        name: "A Buyer".to_string(),
        address: Address {
            street: "1 Test Street".to_string(),
            city: "Testville".to_string(),
            postcode: "12345".to_string(),
            country: "Testland".to_string(),
        },
        items: vec![OrderItem {
            sku: sku("dash-1"),
            title: "Dashboard album".to_string(),
            qty: 1,
            unit_price: bazaar::domain::Money::from_cents(total),
        }],
        subtotal: bazaar::domain::Money::from_cents(total),
        shipping: bazaar::domain::Money::ZERO,
        total: bazaar::domain::Money::from_cents(total),
        payment: Payment {
            gateway: "test".to_string(),
            reference: format!("ref-{number}"),
            last4: "4242".to_string(),
        },
        status,
        restock: Vec::new(),
        account_id: None,
    }
}

#[tokio::test]
async fn the_dashboard_figures_match_the_orders_and_stock_in_the_database() {
    let app = spawn_app().await;
    let now = Utc::now();
    // Orders placed in the test: today (paid, shipped, and a cancelled one that is no sale),
    // three days ago, and eight days ago (outside the seven days).
    for o in [
        order("BZ-900001", now, 1_000, OrderStatus::Paid),
        order("BZ-900002", now, 2_500, OrderStatus::Shipped),
        order("BZ-900003", now, 9_999, OrderStatus::Cancelled),
        order("BZ-900004", now - Duration::days(3), 700, OrderStatus::Paid),
        order(
            "BZ-900005",
            now - Duration::days(8),
            5_000,
            OrderStatus::Paid,
        ),
    ] {
        orders::collection(&app.db)
            .insert_one(o)
            .await
            .expect("order stored");
    }
    product_with_stock(&app.db, "dash-low", 2).await;
    let low_in_db = app
        .db
        .collection::<Document>(bazaar::catalog::products::COLLECTION)
        .count_documents(doc! { "qty": { "$lte": bazaar::catalog::products::LOW_STOCK } })
        .await
        .expect("count");
    assert!(low_in_db >= 1);
    counter(&app).record("/products", now);
    counter(&app).record("/products", now);
    counter(&app).record("/", now);
    counter(&app).flush().await;

    let response = app.get_admin("/admin").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Dashboard");
    // Near midnight UTC "three days ago" is still inside the week and "today" is today.
    assert_eq!(texts(&doc, ".sales-today"), ["$35.00"]);
    assert_eq!(texts(&doc, ".orders-today"), ["2"]);
    assert_eq!(texts(&doc, ".sales-week"), ["$42.00"]);
    assert_eq!(texts(&doc, ".orders-week"), ["3"]);
    assert_eq!(texts(&doc, ".to-ship"), ["3"]);
    assert_eq!(texts(&doc, ".low-stock-count"), [low_in_db.to_string()]);
    // The fewest available are listed (at most 8), each at or under the threshold.
    let listed = texts(&doc, ".low-stock-item small");
    assert_eq!(listed.len() as u64, low_in_db.min(8), "{listed:?}");
    for item in &listed {
        let left: i64 = item
            .rsplit(" · ")
            .next()
            .and_then(|l| l.trim_end_matches(" left").parse().ok())
            .expect("units left");
        assert!(left <= bazaar::catalog::products::LOW_STOCK, "{item}");
    }
    let sales = bars(&doc, "sales-by-day");
    assert_eq!(sales.len(), 7);
    let values: Vec<i64> = sales.iter().map(|b| b.1).collect();
    assert_eq!(values, [0, 0, 0, 700, 0, 0, 3_500]);
    // Recent orders, newest first (the cancelled one is listed too: it is an order).
    assert_eq!(count(&doc, ".recent-order"), 5);
    assert_eq!(texts(&doc, ".views-today"), ["3"]);
    assert_eq!(texts(&doc, ".top-pages-today .views"), ["2", "1"]);
    // The database facts moved to the System page.
    assert_eq!(count(&doc, "table.counts"), 0);
}

#[tokio::test]
async fn the_system_page_shows_the_database_and_adds_demo_data() {
    // About the demo data: with it in place, adding it again adds nothing.
    let app = spawn_app_with_demo().await;
    let response = app.get_admin("/admin/system").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "System");
    assert!(texts(&doc, ".facts dd")
        .iter()
        .any(|d| d.contains("embedded docstore, in memory")));
    let rows = texts(&doc, "table.counts tbody tr");
    assert!(rows.iter().any(|r| r.starts_with("products")), "{rows:?}");
    let token = csrf_token(&doc).expect("the demo-data form has a token");
    let response = app
        .post_admin_form("/admin/seed", &[("csrf_token", token.as_str())])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok()),
        Some("/admin/system")
    );
    let doc = html(&body(app.get_admin("/admin/system").await).await);
    assert_eq!(
        texts(&doc, ".flash"),
        ["Demo data is already in place; nothing was added."]
    );
    // Both new screens are in the admin navigation.
    let nav = texts(&doc, "header nav a");
    assert!(nav.contains(&"Analytics".to_string()) && nav.contains(&"System".to_string()));
}

#[tokio::test]
async fn reports_name_pages_by_their_titles_and_count_comment_permalinks_as_their_page() {
    let app = spawn_app().await;
    ProductBuilder::new("titled")
        .title("Kind of Blue")
        .slug("kind-of-blue")
        .build(&app.db)
        .await;
    for path in ["/products/kind-of-blue", "/products/gone-away", "/"] {
        counter(&app).record(path, at(2025, 3, 14, 9, 0, 0));
    }
    counter(&app).flush().await;
    let doc = html(&body(app.get_admin("/admin/analytics?date=2025-03-14").await).await);
    let mut named = texts(&doc, ".top-page .page-report");
    named.sort();
    // A known page by its title (its path beside it); a page since deleted by its path.
    assert_eq!(named, ["/products/gone-away", "Home", "Kind of Blue"]);
    let mut paths = texts(&doc, ".top-page .page-path");
    paths.sort();
    assert_eq!(paths, ["/", "/products/kind-of-blue"]);
    let drill = html(
        &body(
            app.get_admin("/admin/analytics?date=2025-03-14&path=/products/kind-of-blue")
                .await,
        )
        .await,
    );
    let title = texts(&drill, "figure#views-by-hour figcaption").concat();
    assert!(
        title.starts_with("Views of “Kind of Blue” by hour"),
        "{title}"
    );
    // A comment's permalink is a view of its page.
    assert_eq!(
        bazaar::analytics::middleware::page_path("/products/kind-of-blue/comments/abc"),
        Some("/products/kind-of-blue")
    );
    app.stop().await;
}
