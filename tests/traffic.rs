//! The traffic log and its roll-ups (`bazaar::analytics::{events, rollup}`): what a page view
//! and each commerce event store (and what they must never store), the TTL index and the
//! indexes of the reports, the bounded queue, and the roll-ups' exact counts across hour, day,
//! ISO week and month boundaries, their idempotence, a crash between a level's write and its
//! watermark, HyperLogLog uniques, and three instances writing while one rolls up; and the
//! Admin → Analytics → Traffic report and its CSV, from the events and from the roll-ups.

use std::net::IpAddr;

use bazaar::analytics::events::{self, Event, EventLog, Hit, EVENTS, SALTS};
use bazaar::db::Db;
use bazaar::web::traffic::CommerceEvent;
use bson::{doc, Bson, Document};
use chrono::{DateTime, TimeZone, Utc};
use futures::TryStreamExt;

use crate::common::builders::ProductBuilder;
use crate::common::shop::Shopper;
use crate::common::*;

const FIREFOX: &str =
    "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0 traffic-test";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

async fn all(db: &Db, collection: &str, filter: Document) -> Vec<Document> {
    db.collection::<Document>(collection)
        .find(filter)
        .await
        .expect("find")
        .try_collect()
        .await
        .expect("read")
}

async fn stored_events(db: &Db) -> Vec<Event> {
    db.collection::<Event>(EVENTS)
        .find(doc! {})
        .sort(doc! { "at": 1 })
        .await
        .expect("find")
        .try_collect()
        .await
        .expect("events decode")
}

/// A hit at `at` by visitor number `visitor` (its address), on `path`.
pub fn hit(at: DateTime<Utc>, path: &str, visitor: u32, event: Option<CommerceEvent>) -> Hit {
    Hit {
        at,
        event,
        path: path.to_string(),
        template: path.to_string(),
        status: 200,
        response_ms: 5,
        referrer: None,
        own_host: None,
        query: None,
        client: Some(IpAddr::from(visitor.to_be_bytes())),
        user_agent: FIREFOX.to_string(),
    }
}

pub fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
        .single()
        .expect("valid time")
}

#[tokio::test]
async fn a_product_page_and_an_add_to_cart_log_typed_events_without_address_or_user_agent() {
    let app = spawn_app().await;
    ProductBuilder::new("tea-pot")
        .slug("tea-pot")
        .stock(5)
        .build(&app.db)
        .await;
    let shopper = Shopper::new(&app).await;
    let page = shopper
        .client
        .get(
            app.url("/products/tea-pot?utm_source=newsletter&utm_medium=email&utm_campaign=winter"),
        )
        .header("user-agent", FIREFOX)
        .header("referer", "https://www.search.example/?q=tea")
        .send()
        .await
        .expect("sent");
    assert_eq!(page.status(), 200);
    let added = shopper
        .client
        .post(app.url("/cart/items"))
        .header("referer", app.url("/products/tea-pot"))
        .header("user-agent", FIREFOX)
        .form(&[
            ("sku", "tea-pot"),
            ("qty", "2"),
            ("csrf_token", &shopper.csrf),
        ])
        .send()
        .await
        .expect("sent");
    assert_eq!(added.status(), 303);
    let log = app
        .events
        .as_ref()
        .expect("the traffic log is on by default");
    log.flush().await;
    let found = stored_events(&app.db).await;
    // The shopper's first visit (for its form token) sent no user agent: a bot's.
    let of = |kind: &str| {
        found
            .iter()
            .filter(|e| e.kind == kind && !e.bot)
            .cloned()
            .collect::<Vec<_>>()
    };
    let viewed = of("product_viewed");
    assert_eq!(viewed.len(), 1, "{found:#?}");
    assert_eq!(viewed[0].sku.as_deref(), Some("tea-pot"));
    let view = of("view")
        .into_iter()
        .find(|e| e.path == "/products/tea-pot")
        .expect("the product page's view");
    assert_eq!(view.template, "/products/{slug}");
    assert_eq!(view.status, 200);
    assert_eq!(view.referrer.as_deref(), Some("search.example"));
    assert_eq!(view.utm_source.as_deref(), Some("newsletter"));
    assert_eq!(view.utm_medium.as_deref(), Some("email"));
    assert_eq!(view.utm_campaign.as_deref(), Some("winter"));
    assert_eq!(
        (view.device.as_str(), view.browser.as_str(), view.bot),
        ("desktop", "Firefox", false)
    );
    let cart = of("added_to_cart");
    assert_eq!(cart.len(), 1);
    assert_eq!(
        (cart[0].sku.as_deref(), cart[0].qty),
        (Some("tea-pot"), Some(2))
    );
    assert_eq!(cart[0].status, 303);
    // One browser, one address, one day: one visitor.
    assert_eq!(view.visitor, cart[0].visitor);

    // Scan every collection: neither the address nor the user agent is stored anywhere.
    let names = app
        .db
        .database()
        .list_collection_names()
        .await
        .expect("names");
    for name in names {
        for document in all(&app.db, &name, doc! {}).await {
            let text = format!("{document:?}");
            for secret in ["127.0.0.1", "traffic-test", "Gecko/20100101"] {
                assert!(!text.contains(secret), "{name} stores {secret:?}: {text}");
            }
        }
    }
    // One salt per day, shared through the database.
    assert_eq!(all(&app.db, SALTS, doc! {}).await.len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn bots_are_flagged_and_search_events_carry_the_query_and_its_result_count() {
    let app = spawn_app().await;
    for (ua, q) in [(GOOGLEBOT, "teapot"), (FIREFOX, "unicorn saddle")] {
        let response = app
            .client
            .get(app.url(&format!("/search?q={}", q.replace(' ', "+"))))
            .header("user-agent", ua)
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 200);
    }
    app.events.as_ref().expect("log").flush().await;
    let searches: Vec<Event> = stored_events(&app.db)
        .await
        .into_iter()
        .filter(|e| e.kind == "search")
        .collect();
    assert_eq!(searches.len(), 2);
    assert!(searches
        .iter()
        .any(|e| e.bot && e.query.as_deref() == Some("teapot")));
    let person = searches
        .iter()
        .find(|e| !e.bot)
        .expect("the person's search");
    assert_eq!(person.query.as_deref(), Some("unicorn saddle"));
    assert_eq!(person.results, Some(0));
    app.stop().await;
}

#[tokio::test]
async fn the_ttl_index_has_the_configured_retention_and_the_report_queries_use_indexes() {
    let app = spawn_app_with(&[("BAZAAR_ANALYTICS__EVENTS_RETENTION_DAYS", "7")]).await;
    let listed: Vec<Document> = app
        .db
        .database()
        .run_command(doc! { "listIndexes": EVENTS })
        .await
        .expect("listIndexes")
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .expect("batch")
        .iter()
        .filter_map(|i| i.as_document().cloned())
        .collect();
    let ttl = listed
        .iter()
        .find(|i| i.get_str("name") == Ok(events::TTL_INDEX))
        .expect("the TTL index");
    let seconds = match ttl.get("expireAfterSeconds") {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("expireAfterSeconds: {other:?}"),
    };
    assert_eq!(seconds, 7 * 86_400);
    let range = doc! { "$gte": bson::DateTime::from_millis(0), "$lt": bson::DateTime::now() };
    assert_uses_index(
        &app.db,
        "a kind over time",
        EVENTS,
        doc! { "kind": "view", "at": range.clone() },
        doc! {},
    )
    .await;
    assert_uses_index(
        &app.db,
        "a page over time",
        EVENTS,
        doc! { "path": "/", "at": range.clone() },
        doc! {},
    )
    .await;
    for level in Level::ALL {
        let at = doc! { "$gte": bson::DateTime::from_millis(0), "$lt": bson::DateTime::now() };
        assert_uses_index(
            &app.db,
            "a level's periods (the next level's input)",
            level.collection(),
            doc! { "at": at.clone() },
            doc! {},
        )
        .await;
        assert_uses_index(
            &app.db,
            "the site's periods",
            level.collection(),
            doc! { "path": Bson::Null, "at": at },
            doc! {},
        )
        .await;
    }
    assert_uses_index(
        &app.db,
        "all events over time",
        EVENTS,
        doc! { "at": range },
        doc! {},
    )
    .await;
    app.stop().await;

    // A changed retention replaces the index at the next start.
    let (_server, db) = memory_db("retention").await;
    events::ensure_retention(&db, 30).await.expect("made");
    events::ensure_retention(&db, 2).await.expect("replaced");
    let names = db
        .collection::<Document>(EVENTS)
        .list_index_names()
        .await
        .expect("names");
    assert_eq!(names.iter().filter(|n| *n == events::TTL_INDEX).count(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn a_full_queue_drops_and_counts_instead_of_waiting() {
    let (_server, db) = memory_db("full-queue").await;
    let log = EventLog::spawn(db.clone(), 10);
    // The writer cannot run until this task yields: only ten fit.
    for i in 0..100 {
        log.record(hit(utc(2026, 11, 2, 10, 0), "/", i, None));
    }
    assert_eq!((log.stats().queued, log.stats().dropped), (10, 90));
    log.flush().await;
    assert_eq!(log.stats().written, 10);
    log.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Roll-ups.

use bazaar::analytics::hll;
use bazaar::analytics::rollup::{self, CrashAfter, Level, WATERMARKS};
use std::collections::BTreeMap;

fn bson_time(t: DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_chrono(t)
}

/// Write `hits` through a traffic log of its own on `db`, and wait until they are stored.
async fn log_all(db: &Db, hits: Vec<Hit>) {
    let log = EventLog::spawn(db.clone(), hits.len().max(1));
    for hit in hits {
        log.record(hit);
    }
    log.stop().await;
    assert_eq!(log.stats().dropped, 0);
}

/// A roll-up document's numbers: (views, the other kinds' counts, estimated visitors).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Numbers {
    views: i64,
    commerce: i64,
    visitors: u64,
}

/// Every document of `level`, by (period start, path; `None` for the whole site).
async fn numbers(db: &Db, level: Level) -> BTreeMap<(String, Option<String>), Numbers> {
    let mut found = BTreeMap::new();
    for d in all(db, level.collection(), doc! {}).await {
        let at = d.get_datetime("at").expect("at").to_chrono().to_rfc3339();
        let path = d.get_str("path").ok().map(str::to_string);
        let count = |k: &str| match d.get(k) {
            Some(Bson::Int32(n)) => i64::from(*n),
            Some(Bson::Int64(n)) => *n,
            other => panic!("{k}: {other:?} in {d}"),
        };
        let sketch: Vec<i32> = d
            .get_array("hll")
            .expect("hll")
            .iter()
            .map(|v| match v {
                Bson::Int32(n) => *n,
                Bson::Int64(n) => *n as i32,
                Bson::Double(n) => *n as i32,
                other => panic!("sketch value {other:?}"),
            })
            .collect();
        let commerce = [
            "product_viewed",
            "added_to_cart",
            "checkout_started",
            "order_placed",
            "search",
        ]
        .iter()
        .map(|k| count(k))
        .sum();
        found.insert(
            (at, path),
            Numbers {
                views: count("view"),
                commerce,
                visitors: hll::estimate(&sketch),
            },
        );
    }
    found
}

/// Every roll-up document of every level, as stored (the sketches sorted, since `$push` after
/// `$group` promises no order).
async fn snapshot(db: &Db) -> Vec<Document> {
    let mut docs = Vec::new();
    for level in Level::ALL {
        let mut of_level: Vec<Document> = all(db, level.collection(), doc! {}).await;
        for d in &mut of_level {
            let mut sketch: Vec<i64> = d
                .get_array("hll")
                .expect("hll")
                .iter()
                .filter_map(|v| {
                    v.as_i64()
                        .or(v.as_i32().map(i64::from))
                        .or(v.as_f64().map(|f| f as i64))
                })
                .collect();
            sketch.sort_unstable();
            d.insert("hll", sketch);
            d.insert("level", level.unit());
        }
        of_level.sort_by_key(|d| format!("{:?}", d.get("_id")));
        docs.extend(of_level);
    }
    docs
}

fn key(at: &str, path: Option<&str>) -> (String, Option<String>) {
    (at.to_string(), path.map(str::to_string))
}

/// The events of the boundary tests: hour, day, month and ISO-week edges, with the week of
/// Monday 30 November to Sunday 6 December 2026 spanning two months.
fn boundary_hits() -> Vec<Hit> {
    let product = |at, event| hit(at, "/products/x", 3, Some(event));
    let mut bot = hit(utc(2026, 12, 1, 12, 0), "/a", 9, None);
    bot.user_agent = GOOGLEBOT.to_string();
    vec![
        hit(utc(2026, 11, 29, 23, 30), "/a", 4, None),
        hit(utc(2026, 11, 30, 9, 59), "/a", 1, None),
        hit(utc(2026, 11, 30, 10, 0), "/a", 2, None),
        hit(utc(2026, 11, 30, 23, 59), "/b", 1, None),
        hit(utc(2026, 12, 1, 0, 0), "/b", 3, None),
        product(
            utc(2026, 12, 1, 12, 0),
            CommerceEvent::ProductViewed { sku: "x".into() },
        ),
        product(
            utc(2026, 12, 1, 12, 1),
            CommerceEvent::AddedToCart {
                sku: "x".into(),
                qty: 1,
            },
        ),
        product(
            utc(2026, 12, 1, 12, 2),
            CommerceEvent::OrderPlaced { total_cents: 1200 },
        ),
        bot,
        hit(utc(2026, 12, 6, 23, 59), "/a", 5, None),
        hit(utc(2026, 12, 7, 0, 0), "/a", 5, None),
    ]
}

fn assert_visitors(found: &Numbers, exact: u64, what: &str) {
    // A handful of visitors among 4096 registers: exact unless two share a register.
    assert!(
        found.visitors.abs_diff(exact) <= 1,
        "{what}: {} visitors estimated, {exact} exact",
        found.visitors
    );
}

#[tokio::test]
async fn roll_ups_count_exactly_across_hour_day_iso_week_and_month_boundaries() {
    let (_server, db) = memory_db("rollup-boundaries").await;
    log_all(&db, boundary_hits()).await;
    let report = rollup::roll_up(&db, bson_time(utc(2026, 12, 8, 1, 0)))
        .await
        .expect("rolls up");
    assert_eq!(report.built.len(), 4, "{report:?}");

    let hours = numbers(&db, Level::Hour).await;
    assert_eq!(
        hours[&key("2026-11-30T09:00:00+00:00", Some("/a"))].views,
        1
    );
    assert_eq!(
        hours[&key("2026-11-30T10:00:00+00:00", Some("/a"))].views,
        1
    );
    assert_eq!(hours[&key("2026-12-01T12:00:00+00:00", None)].commerce, 3);
    assert_eq!(
        hours[&key("2026-12-01T12:00:00+00:00", None)].views,
        0,
        "the bot's view is not counted"
    );
    // At 01:00 the hour from 00:00 is closed, the one from 01:00 is not.
    assert!(!hours.keys().any(|(at, _)| at.starts_with("2026-12-08T01")));

    let days = numbers(&db, Level::Day).await;
    let nov30 = &days[&key("2026-11-30T00:00:00+00:00", None)];
    assert_eq!(nov30.views, 3);
    assert_visitors(nov30, 2, "30 November");
    let dec1 = &days[&key("2026-12-01T00:00:00+00:00", None)];
    assert_eq!((dec1.views, dec1.commerce), (1, 3));
    assert_visitors(dec1, 1, "1 December");

    let weeks = numbers(&db, Level::Week).await;
    let before = &weeks[&key("2026-11-23T00:00:00+00:00", None)];
    assert_eq!(before.views, 1);
    // Monday 30 November to Sunday 6 December: both months, one week.
    let spanning = &weeks[&key("2026-11-30T00:00:00+00:00", None)];
    assert_eq!((spanning.views, spanning.commerce), (5, 3));
    assert_visitors(spanning, 4, "the week spanning two months");
    assert_eq!(
        weeks[&key("2026-11-30T00:00:00+00:00", Some("/a"))].views,
        3
    );
    assert_eq!(
        weeks[&key("2026-11-30T00:00:00+00:00", Some("/b"))].views,
        2
    );
    // The week of 7 December is not over.
    assert!(!weeks.keys().any(|(at, _)| at.starts_with("2026-12-07")));

    let months = numbers(&db, Level::Month).await;
    let november = &months[&key("2026-11-01T00:00:00+00:00", None)];
    assert_eq!((november.views, november.commerce), (4, 0));
    assert_visitors(november, 3, "November");
    assert!(
        !months.keys().any(|(at, _)| at.starts_with("2026-12")),
        "December is not over"
    );

    // A month later December is built, from its days (not from the week it shares).
    rollup::roll_up(&db, bson_time(utc(2027, 1, 1, 2, 0)))
        .await
        .expect("rolls up");
    let months = numbers(&db, Level::Month).await;
    let december = &months[&key("2026-12-01T00:00:00+00:00", None)];
    assert_eq!((december.views, december.commerce), (3, 3));
    assert_visitors(december, 2, "December");
    let weeks = numbers(&db, Level::Week).await;
    assert_eq!(weeks[&key("2026-12-07T00:00:00+00:00", None)].views, 1);
    // Every level sums to the same total of non-bot page views.
    for level in Level::ALL {
        let total: i64 = numbers(&db, level)
            .await
            .iter()
            .filter(|((_, path), _)| path.is_none())
            .map(|(_, n)| n.views)
            .sum();
        assert_eq!(total, 7, "{level:?}");
    }
}

#[tokio::test]
async fn a_second_run_and_a_run_crashed_between_merge_and_watermark_change_nothing() {
    let (_server, db) = memory_db("rollup-crash").await;
    log_all(&db, boundary_hits()).await;
    let now = bson_time(utc(2027, 1, 1, 2, 0));
    rollup::roll_up(&db, now).await.expect("rolls up");
    let uninterrupted = snapshot(&db).await;
    assert!(!uninterrupted.is_empty());

    // Again: nothing is due, nothing changes.
    let again = rollup::roll_up(&db, now).await.expect("rolls up");
    assert!(again.built.is_empty(), "{again:?}");
    assert_eq!(snapshot(&db).await, uninterrupted);

    // Crash after each level's merge in turn, then finish: the same documents.
    for level in Level::ALL {
        for collection in Level::ALL
            .map(Level::collection)
            .into_iter()
            .chain([WATERMARKS])
        {
            db.collection::<Document>(collection)
                .drop()
                .await
                .expect("dropped");
        }
        let crashed = rollup::roll_up_crashing(&db, now, CrashAfter::Merge(level)).await;
        assert!(crashed.is_err());
        assert_eq!(rollup::watermark(&db, level).await.expect("read"), None);
        // A crash after the merge of every level but the first leaves earlier watermarks set.
        rollup::roll_up(&db, now).await.expect("finishes");
        assert_eq!(
            snapshot(&db).await,
            uninterrupted,
            "crashed after the {level:?} merge"
        );
        // And the re-run of the crashed level's periods replaced, not added.
        rollup::roll_up_crashing(&db, now, CrashAfter::Merge(level))
            .await
            .ok();
        assert_eq!(snapshot(&db).await, uninterrupted);
    }

    // The events expire (as the TTL index deletes them); the roll-ups keep their counts.
    db.collection::<Document>(EVENTS)
        .delete_many(doc! {})
        .await
        .expect("deleted");
    rollup::roll_up(&db, bson_time(utc(2027, 2, 1, 0, 0)))
        .await
        .expect("rolls up");
    let after: Vec<Document> = snapshot(&db)
        .await
        .into_iter()
        .filter(|d| {
            uninterrupted
                .iter()
                .any(|u| u.get("_id") == d.get("_id") && u.get("level") == d.get("level"))
        })
        .collect();
    assert_eq!(after, uninterrupted);
}

#[tokio::test]
async fn rolled_up_visitors_stay_within_the_sketch_error_of_the_exact_distinct_count() {
    let (_server, db) = memory_db("rollup-hll").await;
    // 12 000 visitors over two days, most of them coming back on the second.
    let mut hits = Vec::new();
    for v in 0..10_000u32 {
        hits.push(hit(utc(2026, 3, 2, v % 24, v % 60), "/", v, None));
    }
    for v in 2_000..12_000u32 {
        hits.push(hit(utc(2026, 3, 3, v % 24, v % 60), "/", v, None));
    }
    log_all(&db, hits).await;
    rollup::roll_up(&db, bson_time(utc(2026, 4, 2, 1, 0)))
        .await
        .expect("rolls up");
    let within = |estimate: u64, exact: u64, what: &str| {
        let allowed = 3.0 * hll::STANDARD_ERROR * exact as f64;
        assert!(
            (estimate as f64 - exact as f64).abs() <= allowed,
            "{what}: {estimate} estimated, {exact} exact (±{allowed:.0} allowed)"
        );
    };
    let days = numbers(&db, Level::Day).await;
    within(
        days[&key("2026-03-02T00:00:00+00:00", None)].visitors,
        exact_of_day(&db, 2).await,
        "2 March",
    );
    within(
        days[&key("2026-03-03T00:00:00+00:00", None)].visitors,
        exact_of_day(&db, 3).await,
        "3 March",
    );
    let weeks = numbers(&db, Level::Week).await;
    let all_distinct = db_distinct(&db, doc! {}).await;
    // The salt rotates daily, so a returning visitor is a new hash the next day (as Plausible
    // counts): the week's exact distinct is that of the hashes.
    within(
        weeks[&key("2026-03-02T00:00:00+00:00", None)].visitors,
        all_distinct,
        "the week",
    );
    let months = numbers(&db, Level::Month).await;
    within(
        months[&key("2026-03-01T00:00:00+00:00", None)].visitors,
        all_distinct,
        "March",
    );
    assert_eq!(
        months[&key("2026-03-01T00:00:00+00:00", None)].views,
        20_000
    );
}

async fn exact_of_day(db: &Db, day: u32) -> u64 {
    let filter = doc! { "at": {
        "$gte": bson_time(utc(2026, 3, day, 0, 0)),
        "$lt": bson_time(utc(2026, 3, day + 1, 0, 0)),
    } };
    db_distinct(db, filter).await
}

async fn db_distinct(db: &Db, filter: Document) -> u64 {
    db.collection::<Document>(EVENTS)
        .distinct("visitor", filter)
        .await
        .expect("distinct")
        .len() as u64
}

#[tokio::test]
async fn three_instances_writing_events_and_one_rolling_up_give_exact_sums() {
    let (server, first) = memory_db("three-instances").await;
    let mut handles = vec![first];
    for _ in 0..2 {
        handles.push(
            Db::connect(
                &server.uri(),
                "three-instances",
                std::time::Duration::from_secs(5),
                bazaar::db::Store::EmbeddedMemory,
            )
            .await
            .expect("connects"),
        );
    }
    let base = Utc::now() - chrono::Duration::days(3);
    let mut writers = Vec::new();
    for (n, db) in handles.iter().enumerate() {
        let db = db.clone();
        writers.push(tokio::spawn(async move {
            let log = EventLog::spawn(db, 10_000);
            for i in 0..1_500u32 {
                let at = base + chrono::Duration::minutes(i64::from(i % 600));
                log.record(hit(at, &format!("/p{}", i % 5), i * 3 + n as u32, None));
            }
            log.stop().await;
            log.stats()
        }));
    }
    for writer in writers {
        let stats = writer.await.expect("writer");
        assert_eq!((stats.written, stats.dropped, stats.failed), (1_500, 0, 0));
    }
    // All three try to roll up at once; the lease lets them take turns.
    let runs = futures::future::join_all(handles.iter().map(rollup::roll_up_under_lease)).await;
    assert!(runs.iter().all(Result::is_ok), "{runs:?}");
    assert!(runs.iter().any(|r| matches!(r, Ok(Some(_)))));
    for level in Level::ALL.into_iter().take(3) {
        let found = numbers(&handles[2], level).await;
        let site: i64 = found
            .iter()
            .filter(|((_, p), _)| p.is_none())
            .map(|(_, n)| n.views)
            .sum();
        let pages: i64 = found
            .iter()
            .filter(|((_, p), _)| p.is_some())
            .map(|(_, n)| n.views)
            .sum();
        if level == Level::Week && found.is_empty() {
            continue; // three days ago may still be this week
        }
        assert_eq!((site, pages), (4_500, 4_500), "{level:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Reports.

use bazaar::analytics::traffic::{self as reports, Range};
use bazaar::analytics::Day;

/// A hit with a referrer, campaign and agent of its own.
fn visit(at: DateTime<Utc>, path: &str, visitor: u32, referrer: &str, ua: &str) -> Hit {
    let mut h = hit(at, path, visitor, None);
    h.referrer = Some(referrer.to_string());
    h.query = Some("utm_source=news&utm_campaign=spring".to_string());
    h.user_agent = ua.to_string();
    h
}

const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 \
    (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";

#[tokio::test]
async fn the_traffic_report_shows_visitors_sources_devices_searches_the_funnel_and_exports_csv() {
    let app = spawn_app().await;
    let log = app.events.clone().expect("the traffic log");
    let today = Utc::now() - chrono::Duration::minutes(5);
    let search = |q: &str, n: u32, v: u32| {
        hit(
            today,
            "/search",
            v,
            Some(CommerceEvent::Searched {
                query: q.into(),
                results: n,
            }),
        )
    };
    let step = |e: CommerceEvent, v: u32| hit(today, "/products/x", v, Some(e));
    let viewed = || CommerceEvent::ProductViewed { sku: "x".into() };
    let mut hits = vec![
        visit(today, "/", 1, "https://www.forum.example/t/1", FIREFOX),
        visit(today, "/", 2, "https://forum.example/t/2", IPHONE),
        visit(today, "/blog", 2, "https://news.example/", IPHONE),
        search("Blue Train", 3, 1),
        search("unicorn", 0, 1),
        search("Unicorn", 0, 2),
        step(viewed(), 1),
        step(viewed(), 2),
        step(viewed(), 3),
        step(viewed(), 4),
        step(
            CommerceEvent::AddedToCart {
                sku: "x".into(),
                qty: 1,
            },
            1,
        ),
        step(
            CommerceEvent::AddedToCart {
                sku: "x".into(),
                qty: 1,
            },
            2,
        ),
        step(CommerceEvent::CheckoutStarted, 1),
        step(CommerceEvent::OrderPlaced { total_cents: 1_200 }, 1),
    ];
    for ms in 1..=20 {
        let mut slow = hit(today, "/slow", 7, None);
        slow.template = "/slow/{x}".into();
        slow.response_ms = ms * 10;
        hits.push(slow);
    }
    let mut bot = visit(today, "/", 99, "https://spam.example/", GOOGLEBOT);
    bot.query = Some("utm_campaign=botnet".into());
    hits.push(bot);
    for h in hits {
        log.record(h);
    }
    log.flush().await;

    let page = admin_page(&app, "/admin/analytics/traffic").await;
    let text = page.root_element().text().collect::<String>();
    // Addresses 1, 2 (with two browsers: two visitors), 3, 4 and 7; the bot is not one.
    assert_eq!(texts(&page, ".total-visitors"), ["6"]);
    assert_eq!(texts(&page, ".total-views"), ["23"]);
    let rows = |id: &str| -> Vec<String> {
        let selector = format!("#table-{id} tbody tr");
        texts(&page, &selector)
    };
    assert!(
        rows("referrers")[0].starts_with("forum.example2"),
        "{:?}",
        rows("referrers")
    );
    assert!(
        rows("campaigns")[0].starts_with("spring3"),
        "{:?}",
        rows("campaigns")
    );
    assert!(!text.contains("botnet") && !text.contains("spam.example"));
    assert!(
        rows("devices").iter().any(|r| r.starts_with("mobile2")),
        "{:?}",
        rows("devices")
    );
    assert!(
        rows("browsers").iter().any(|r| r.starts_with("Firefox")),
        "{:?}",
        rows("browsers")
    );
    assert_eq!(rows("no_results"), ["unicorn22"]);
    assert_eq!(rows("searches").len(), 2);
    let funnel = rows("funnel");
    assert_eq!(funnel[0], "Viewed a product44100.0 %100.0 %");
    assert_eq!(funnel[1], "Added to cart2250.0 %50.0 %");
    assert_eq!(funnel[3], "Placed an order11100.0 %25.0 %");
    assert_eq!(rows("slowest")[0], "/slow/{x}20190100");

    let csv = app
        .get_admin("/admin/analytics/traffic.csv?table=no_results")
        .await;
    assert_eq!(csv.status(), 200);
    assert!(csv.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .starts_with("text/csv"));
    assert_eq!(
        body(csv).await,
        "Search,Searches,Visitors\r\nunicorn,2,2\r\n"
    );
    let series = body(
        app.get_admin("/admin/analytics/traffic.csv?table=series")
            .await,
    )
    .await;
    assert_eq!(
        series.lines().count(),
        8,
        "a header and seven days:\n{series}"
    );
    let bad = app
        .get_admin("/admin/analytics/traffic?from=2026-02-30")
        .await;
    assert_eq!(bad.status(), 400);
    let unknown = app
        .get_admin("/admin/analytics/traffic.csv?table=nope")
        .await;
    assert_eq!(unknown.status(), 400);

    // The report's queries are served by the `kind, at` index.
    let range = Range::new(
        Day::parse("2026-11-01").expect("day"),
        Day::parse("2026-11-30").expect("day"),
    )
    .expect("range");
    assert_uses_index(
        &app.db,
        "a report over events",
        EVENTS,
        reports::events_query("search", range),
        doc! {},
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn a_range_beyond_the_kept_events_is_read_from_the_roll_ups() {
    let app = spawn_app().await;
    let log = app.events.clone().expect("the traffic log");
    // Rolled up in March; those events then expired, and only today's are kept.
    for v in 0..30 {
        log.record(hit(utc(2026, 3, 10, 12, 0), "/old", v, None));
    }
    log.flush().await;
    rollup::roll_up(&app.db, bson_time(utc(2026, 4, 2, 1, 0)))
        .await
        .expect("rolls up");
    app.db
        .collection::<Document>(EVENTS)
        .delete_many(doc! {})
        .await
        .expect("expired");
    log.record(hit(Utc::now(), "/", 1, None));
    log.flush().await;
    let page = admin_page(
        &app,
        "/admin/analytics/traffic?from=2026-03-01&to=2026-03-31",
    )
    .await;
    assert_eq!(texts(&page, ".total-views"), ["30"]);
    // Estimated from the sketch: thirty visitors, give or take a shared register.
    let visitors: u64 = texts(&page, ".total-visitors")[0]
        .parse()
        .expect("a number");
    assert!(visitors.abs_diff(30) <= 1, "{visitors}");
    let pages = texts(&page, "#table-pages tbody tr");
    assert_eq!(pages, ["/old/old300"]);
    let text = texts(&page, ".report-source").join(" ");
    assert!(text.contains("roll-ups"), "{text}");
    app.stop().await;
}
