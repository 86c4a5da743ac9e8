//! The traffic log and its roll-ups (`bazaar::analytics::{events, rollup}`): what a page view
//! and each commerce event store (and what they must never store), the TTL index and the
//! indexes of the reports, the bounded queue, and the roll-ups' exact counts across hour, day,
//! ISO week and month boundaries, their idempotence, a crash between a level's write and its
//! watermark, HyperLogLog uniques, and three instances writing while one rolls up; and the
//! Admin → Analytics → Traffic report and its CSV, from the events and from the roll-ups.
//! Through the running app: events stamped by the stepped clock across every boundary, a
//! search's total, the queue's counts on the admin page, docstore's TTL monitor expiring events.
//! With real processes: `bazaar traffic-rollup` killed with SIGKILL at each level and run again,
//! and three `bazaar` instances on one `docstore --auth` writing and rolling up under the lease.

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
    // No query filters events by path (a page's drill-down reads the roll-ups): no index on it
    // is kept up to date on every event written.
    assert!(
        listed.iter().all(|i| i
            .get_document("key")
            .map_or(true, |k| !k.contains_key("path"))),
        "{listed:?}"
    );
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

#[tokio::test]
async fn the_sites_periods_are_read_through_the_path_and_time_index_not_every_pages() {
    // The site's rows are `path: null`: equality with null must bound the `path, at` index
    // (as in mongod), not walk every page's periods of the range on the `at` index.
    let (_server, db) = memory_db("site-periods").await;
    let start = Utc
        .with_ymd_and_hms(2026, 3, 2, 0, 0, 0)
        .single()
        .expect("t");
    for level in Level::ALL {
        let coll = db.collection::<Document>(level.collection());
        coll.create_indexes(
            rollup::indexes()
                .into_iter()
                .find(|(name, _)| *name == level.collection())
                .map(|(_, models)| models)
                .expect("the level's indexes"),
        )
        .await
        .expect("indexes");
        let mut docs = Vec::new();
        for hour in 0..24 {
            let at = bson_time(start + chrono::Duration::hours(hour));
            docs.push(doc! { "_id": { "at": at, "path": Bson::Null }, "at": at, "path": Bson::Null, "view": 1 });
            for page in 0..20 {
                let path = format!("/p{page}");
                docs.push(
                    doc! { "_id": { "at": at, "path": &path }, "at": at, "path": &path, "view": 1 },
                );
            }
        }
        coll.insert_many(docs).await.expect("inserted");
        let filter = doc! { "path": Bson::Null, "at": {
            "$gte": bson_time(start),
            "$lt": bson_time(start + chrono::Duration::hours(12)),
        } };
        let explain = db
            .database()
            .run_command(doc! {
                "explain": { "find": level.collection(), "filter": filter },
                "verbosity": "executionStats",
            })
            .await
            .expect("explain");
        let plan = Bson::Document(explain.clone());
        let scan = find_stage(&plan, "IXSCAN").unwrap_or_else(|| panic!("{explain}"));
        assert_eq!(scan.get_str("indexName"), Ok("path_1_at_1"), "{explain}");
        let stats = explain.get_document("executionStats").expect("stats");
        let n = |field: &str| {
            stats
                .get(field)
                .and_then(|v| v.as_i64().or(v.as_i32().map(i64::from)))
        };
        assert_eq!(n("nReturned"), Some(12), "{explain}");
        assert_eq!(n("totalDocsExamined"), Some(12), "{explain}");
    }
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

use bazaar::analytics::dimensions::{Dim, DIMENSIONS, HOURLY};
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
    let mut dims: Vec<Document> = all(db, DIMENSIONS, doc! {}).await;
    for mut d in all(db, HOURLY, doc! {}).await {
        d.insert("level", "hour");
        dims.push(d);
    }
    for d in &mut dims {
        let mut sketch: Vec<i64> = d
            .get_array("hll")
            .expect("hll")
            .iter()
            .filter_map(|v| v.as_i64().or(v.as_i32().map(i64::from)))
            .collect();
        sketch.sort_unstable();
        d.insert("hll", sketch);
    }
    dims.sort_by_key(|d| format!("{:?}", d.get("_id")));
    docs.extend(dims);
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

    // Crash after each level's merge in turn, and after the dimension documents, then finish:
    // the same documents.
    let crashes = Level::ALL
        .map(CrashAfter::Merge)
        .into_iter()
        .chain([CrashAfter::Dimensions]);
    for crash in crashes {
        for collection in Level::ALL
            .map(Level::collection)
            .into_iter()
            .chain([WATERMARKS, DIMENSIONS, HOURLY])
        {
            db.collection::<Document>(collection)
                .drop()
                .await
                .expect("dropped");
        }
        let crashed = rollup::roll_up_crashing(&db, now, crash).await;
        assert!(crashed.is_err());
        let unmarked = match crash {
            CrashAfter::Merge(level) => level.unit(),
            _ => bazaar::analytics::dimensions::WATERMARK,
        };
        assert_eq!(
            rollup::named_watermark(&db, unmarked).await.expect("read"),
            None
        );
        // A crash after the merge of every level but the first leaves earlier watermarks set.
        rollup::roll_up(&db, now).await.expect("finishes");
        assert_eq!(
            snapshot(&db).await,
            uninterrupted,
            "crashed after {crash:?}"
        );
        // And the re-run of the crashed step's periods replaced, not added.
        rollup::roll_up_crashing(&db, now, crash).await.ok();
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

/// Roll up `db` as of `now`, after a run crashed between the dimension documents and their
/// watermarks (it changes nothing the finishing run does not redo).
async fn roll_up_after_a_crash(db: &Db, now: bson::DateTime) {
    let crashed = rollup::roll_up_crashing(db, now, CrashAfter::Dimensions).await;
    assert!(crashed.is_err());
    rollup::roll_up(db, now).await.expect("rolls up");
}

#[tokio::test]
async fn hourly_dimension_documents_count_exactly_across_hour_and_day_boundaries_and_sum_into_the_days(
) {
    let (_server, stepped) = memory_db("dims-hourly-stepped").await;
    let (_other, at_once) = memory_db("dims-hourly-at-once").await;
    let n = 2_000;
    let events: Vec<Document> = (0..n).map(|i| varied_event(i, n)).collect();
    for db in [&stepped, &at_once] {
        db.collection::<Document>(EVENTS)
            .insert_many(events.clone())
            .await
            .expect("seeded");
    }
    // Rolled up every seven hours (each step crashed once before its watermarks, then run
    // again), so the day boundaries fall inside the steps at varying hours.
    let mut now = utc(2026, 11, 29, 3, 30);
    while now < utc(2026, 12, 1, 13, 30) {
        roll_up_after_a_crash(&stepped, bson_time(now)).await;
        now += chrono::Duration::hours(7);
    }
    roll_up_after_a_crash(&stepped, bson_time(utc(2026, 12, 1, 13, 30))).await;
    // Days to 1 December, hours to 13:00 that day; only that day's hours are kept.
    let (days, hours) = rollup::dimension_watermarks(&stepped)
        .await
        .expect("watermarks");
    assert_eq!(days, Some(bson_time(utc(2026, 12, 1, 0, 0))));
    assert_eq!(hours, Some(bson_time(utc(2026, 12, 1, 13, 0))));
    let hourly = all(&stepped, HOURLY, doc! {}).await;
    assert!(!hourly.is_empty());
    let mut seen = std::collections::BTreeSet::new();
    for d in &hourly {
        let at = *d.get_datetime("at").expect("at");
        assert!(
            at >= bson_time(utc(2026, 12, 1, 0, 0)) && at < bson_time(utc(2026, 12, 1, 13, 0)),
            "{d:?}"
        );
        // Each hour's count of a page, device or template is its views in that hour, exactly.
        let dim = d.get_str("dim").expect("dim");
        let field = match dim {
            "path" | "device" | "template" => dim,
            _ => continue,
        };
        let key = d.get_str("key").expect("a named key");
        let end = bson::DateTime::from_millis(at.timestamp_millis() + 3_600_000);
        let exact = stepped
            .collection::<Document>(EVENTS)
            .count_documents(doc! {
                "kind": events::VIEW, "bot": false, field: key, "at": { "$gte": at, "$lt": end },
            })
            .await
            .expect("counted");
        assert_eq!(d.get_i32("count").map(i64::from), Ok(exact as i64), "{d:?}");
        seen.insert(at.timestamp_millis());
    }
    // The first hour of the day (just past the boundary) and the last built one have theirs.
    assert!(seen.contains(&bson_time(utc(2026, 12, 1, 0, 0)).timestamp_millis()));
    assert!(seen.contains(&bson_time(utc(2026, 12, 1, 12, 0)).timestamp_millis()));

    // The same day tables whether the days were summed from hours over many runs or built
    // in one run (where no hour of a closed day is ever written).
    let end = bson_time(utc(2027, 1, 1, 0, 0));
    roll_up_after_a_crash(&stepped, end).await;
    rollup::roll_up(&at_once, end).await.expect("rolls up");
    let uninterrupted = snapshot(&at_once).await;
    // And a day's counts are its events': 30 November's devices.
    for d in all(
        &at_once,
        DIMENSIONS,
        doc! { "dim": "device", "at": bson_time(utc(2026, 11, 30, 0, 0)) },
    )
    .await
    {
        let exact = at_once
            .collection::<Document>(EVENTS)
            .count_documents(doc! {
                "kind": events::VIEW, "bot": false, "device": d.get_str("key").expect("key"),
                "at": { "$gte": bson_time(utc(2026, 11, 30, 0, 0)), "$lt": bson_time(utc(2026, 12, 1, 0, 0)) },
            })
            .await
            .expect("counted");
        assert_eq!(d.get_i32("count").map(i64::from), Ok(exact as i64), "{d:?}");
    }

    // Run again: nothing due; the hours of the days the last run closed are deleted (by the
    // next run, not that one), and then the documents are the same.
    let again = rollup::roll_up(&stepped, end).await.expect("rolls up");
    assert_eq!(again.dimension_hours, None);
    assert!(all(&stepped, HOURLY, doc! {}).await.is_empty());
    assert_eq!(snapshot(&stepped).await, uninterrupted);
    rollup::roll_up(&stepped, end).await.expect("rolls up");
    assert_eq!(snapshot(&stepped).await, uninterrupted);
}

/// A run that finds ten weeks due (a month's and a year's end inside, and two weeks without a
/// single event) builds them a stretch at a time (`rollup::Level::stretch`, the dimension
/// documents in one step): the same documents as runs every five days, and exact counts;
/// a crash after a later stretch (earlier stretches' watermarks written) changes nothing either.
#[tokio::test]
async fn a_catch_up_over_weeks_built_in_stretches_equals_runs_every_few_days() {
    let (_server, at_once) = memory_db("rollup-catch-up").await;
    let (_other, stepped) = memory_db("rollup-catch-up-stepped").await;
    let (_third, crashed) = memory_db("rollup-catch-up-crashed").await;
    let n = 3_000;
    // `varied_event`'s four days, moved by 7 days × (i mod 10): 29 November to 4 February,
    // without the groups 3 and 4 (20 December to 2 January).
    let events: Vec<Document> = (0..n)
        .filter(|i| !matches!(i % 10, 3 | 4))
        .map(|i| {
            let mut event = varied_event(i, n);
            let at = *event.get_datetime("at").expect("at");
            let moved = at.timestamp_millis() + i64::from(i % 10) * 7 * 86_400_000;
            event.insert("at", bson::DateTime::from_millis(moved));
            event
        })
        .collect();
    for db in [&at_once, &stepped, &crashed] {
        db.collection::<Document>(EVENTS)
            .insert_many(events.clone())
            .await
            .expect("seeded");
    }
    let end = utc(2027, 2, 20, 0, 0);
    let report = rollup::roll_up(&at_once, bson_time(end))
        .await
        .expect("rolls up");
    assert_eq!(report.built.len(), 4, "one entry a level: {report:?}");
    let stretches: Vec<usize> = report.built.iter().map(|b| b.stretches).collect();
    // Hours a day at a time (each run of empty days in one: the events fall on four days a
    // week), days a week at a time, weeks eight at a time, months whole.
    assert!(stretches[0] > 30, "{stretches:?}");
    assert!(stretches[1] > 5, "{stretches:?}");
    assert_eq!(stretches[2..], [2, 1], "{report:?}");
    let mut now = utc(2026, 11, 30, 0, 0);
    while now < end {
        rollup::roll_up(&stepped, bson_time(now))
            .await
            .expect("rolls up");
        now += chrono::Duration::days(5);
    }
    rollup::roll_up(&stepped, bson_time(end))
        .await
        .expect("rolls up");
    let uninterrupted = snapshot(&at_once).await;
    assert_eq!(snapshot(&stepped).await, uninterrupted);
    for crash in [
        CrashAfter::Stretch(Level::Hour, 9),
        CrashAfter::Stretch(Level::Day, 3),
        CrashAfter::Stretch(Level::Week, 2),
    ] {
        // From scratch each time: the roll-ups and watermarks dropped, the events kept.
        for collection in Level::ALL
            .map(Level::collection)
            .into_iter()
            .chain([WATERMARKS, DIMENSIONS, HOURLY])
        {
            crashed
                .collection::<Document>(collection)
                .drop()
                .await
                .expect("dropped");
        }
        assert!(rollup::roll_up_crashing(&crashed, bson_time(end), crash)
            .await
            .is_err());
        rollup::roll_up(&crashed, bson_time(end))
            .await
            .expect("rolls up");
        assert_eq!(snapshot(&crashed).await, uninterrupted, "{crash:?}");
    }
    // Every view a person made before February (the month not over yet) is in its month, once.
    let views: i64 = numbers(&at_once, Level::Month)
        .await
        .iter()
        .filter(|((_, path), _)| path.is_none())
        .map(|(_, n)| n.views)
        .sum();
    let exact = at_once
        .collection::<Document>(EVENTS)
        .count_documents(doc! {
            "kind": events::VIEW, "bot": false, "at": { "$lt": bson_time(utc(2027, 2, 1, 0, 0)) },
        })
        .await
        .expect("counted");
    assert_eq!(views, exact as i64);
    assert!(exact > 500, "{exact}");
}

/// Event `i` of the comparison below: four days from 29 November 2026 (a month's end inside),
/// every kind, referrers, campaigns, devices, browsers, searches in mixed case with and without
/// results, bots, response times under 128 ms, by 400 visitors.
fn varied_event(i: u32, n: u32) -> Document {
    let start = utc(2026, 11, 29, 0, 0);
    let at = start + chrono::Duration::seconds(i64::from(i) * 4 * 86_400 / i64::from(n));
    let visitor = u64::from(i * 7_919 % 400);
    let hash = u64::from_be_bytes(
        sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(
            visitor.to_be_bytes(),
        ))[..8]
            .try_into()
            .expect("8 bytes"),
    );
    let kind = match i % 10 {
        0 => "product_viewed",
        1 => "search",
        2 if i % 30 == 2 => "added_to_cart",
        3 if i % 60 == 3 => "checkout_started",
        4 if i % 90 == 4 => "order_placed",
        _ => events::VIEW,
    };
    let pick = |options: &[&str], k: u32| options[(k as usize) % options.len()].to_string();
    let event = Event {
        at: bson::DateTime::from_chrono(at),
        kind: kind.to_string(),
        path: format!("/p{}", i % 37),
        template: pick(&["/", "/p/{x}", "/blog/{slug}"], i / 3),
        status: 200,
        response_ms: ((i * 7) % 120 + 1) as i32,
        referrer: (!i.is_multiple_of(4))
            .then(|| pick(&["a.example", "b.example", "forum.example"], i / 4)),
        utm_source: i.is_multiple_of(9).then(|| pick(&["news", "forum"], i / 9)),
        utm_medium: None,
        utm_campaign: i
            .is_multiple_of(11)
            .then(|| pick(&["spring", "fall", "winter"], i / 11)),
        device: pick(&["desktop", "mobile", "tablet", "other"], i / 5),
        browser: pick(&["Firefox", "Chrome", "Safari"], i / 6),
        bot: i.is_multiple_of(50),
        visitor: hash as i64,
        hll: hll::packed(hash),
        sku: None,
        qty: None,
        total_cents: None,
        query: (kind == "search").then(|| pick(&["Shoes", "shoes", "hat", "Unicorn", "x"], i / 10)),
        results: (kind == "search").then_some((i % 3) as i32),
    };
    bson::to_document(&event).expect("encodes")
}

/// Two visitor counts agree within three standard errors of the sketch (at least 2).
fn close(estimate: i64, exact: i64, what: &str) {
    let allowed = (3.0 * hll::STANDARD_ERROR * exact as f64).max(2.0);
    assert!(
        (estimate - exact).abs() as f64 <= allowed,
        "{what}: {estimate} visitors from the roll-ups, {exact} from the events"
    );
}

/// Every report of `range` from the roll-ups (and the events after them) against the same
/// report from the events alone: equal counts, visitors within the sketch's error.
async fn same_reports(db: &Db, range: reports::Range, when: &str) {
    use bazaar::analytics::rolled;
    for level in [Level::Hour, Level::Day, Level::Week, Level::Month] {
        let from_events = reports::series(db, range, level, reports::Source::Events)
            .await
            .expect("series");
        let from_rollups = rolled::series(db, range, level).await.expect("series");
        assert_eq!(from_events.len(), from_rollups.len());
        for (e, r) in from_events.iter().zip(&from_rollups) {
            assert_eq!((e.at, e.views), (r.at, r.views), "{when}: {level:?} series");
            close(r.visitors as i64, e.visitors as i64, when);
        }
    }
    close(
        rolled::visitors(db, range).await.expect("visitors") as i64,
        reports::visitors(db, range, reports::Source::Events)
            .await
            .expect("visitors") as i64,
        when,
    );
    let mut tables = Vec::new();
    for dim in Dim::ALL.into_iter().take(6) {
        tables.push((
            dim,
            reports::top(db, range, events::VIEW, dim.name(), 20)
                .await
                .expect("top"),
        ));
    }
    for (dim, without_results) in [(Dim::Search, false), (Dim::NoResults, true)] {
        tables.push((
            dim,
            reports::searches(db, range, without_results, 20)
                .await
                .expect("searches"),
        ));
    }
    for (dim, from_events) in tables {
        let from_rollups = rolled::top(db, range, dim, 20).await.expect("top");
        assert!(!from_events.is_empty(), "{when}: {dim:?} has rows");
        let counted = |rows: &[reports::Row]| -> Vec<(String, i64)> {
            rows.iter().map(|r| (r.label.clone(), r.count)).collect()
        };
        assert_eq!(
            counted(&from_rollups),
            counted(&from_events),
            "{when}: {dim:?}"
        );
        for (r, e) in from_rollups.iter().zip(&from_events) {
            close(
                r.visitors,
                e.visitors,
                &format!("{when}: {dim:?} {}", e.label),
            );
        }
    }
    let funnel_events = reports::funnel(db, range).await.expect("funnel");
    let funnel_rollups = rolled::funnel(db, range).await.expect("funnel");
    for (r, e) in funnel_rollups.iter().zip(&funnel_events) {
        assert_eq!((r.name, r.events), (e.name, e.events), "{when}: funnel");
        close(r.visitors, e.visitors, &format!("{when}: {}", e.name));
    }
    assert_eq!(
        rolled::slowest(db, range, 5, 20).await.expect("slowest"),
        reports::slowest(db, range, 5, 20).await.expect("slowest"),
        "{when}: slowest pages"
    );
}

#[tokio::test]
async fn every_report_table_from_the_roll_ups_and_the_events_after_them_equals_the_events_alone() {
    let (_server, db) = memory_db("rollup-reports").await;
    bazaar::startup::indexes::ensure_indexes(&db)
        .await
        .expect("indexes");
    let n = 3_000;
    let events: Vec<Document> = (0..n).map(|i| varied_event(i, n)).collect();
    db.collection::<Document>(EVENTS)
        .insert_many(events)
        .await
        .expect("seeded");
    let day = |s: &str| bazaar::analytics::Day::parse(s).expect("day");
    let ranges = [
        reports::Range::new(day("2026-11-29"), day("2026-12-02")).expect("range"),
        reports::Range::new(day("2026-11-30"), day("2026-12-01")).expect("range"),
        reports::Range::new(day("2026-12-02"), day("2026-12-02")).expect("range"),
    ];
    // Nothing rolled up: every report from the events.
    for range in ranges {
        same_reports(&db, range, "nothing rolled up").await;
    }
    // Rolled up to 13:00 on 2 December: days to the 2nd, hours to 13:00, the rest from the
    // events.
    let report = rollup::roll_up(&db, bson_time(utc(2026, 12, 2, 13, 30)))
        .await
        .expect("rolls up");
    let (_, to, _) = report.dimensions.expect("dimensions built");
    assert_eq!(to, bson_time(utc(2026, 12, 2, 0, 0)));
    for range in ranges {
        same_reports(&db, range, "rolled up to 2 December 13:00").await;
    }
    // Everything rolled up: every report from the roll-ups alone.
    rollup::roll_up(&db, bson_time(utc(2027, 1, 1, 0, 0)))
        .await
        .expect("rolls up");
    for range in ranges {
        same_reports(&db, range, "all rolled up").await;
    }
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
    // Ten hours of a Monday long past, so every level (hours to months) is closed whatever
    // the day the test runs (three days ago could be a week not over yet, or straddle one).
    let base = utc(2026, 3, 2, 8, 0);
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
    for level in Level::ALL {
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
    // A retention longer than March 2026 is old: with the default 30 days, docstore's TTL
    // monitor (every minute) could delete the March events before they are rolled up, on a
    // machine slow enough that the test reaches them a minute after the app started.
    let app = spawn_app_with(&[("BAZAAR_ANALYTICS__EVENTS_RETENTION_DAYS", "3650")]).await;
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
    // The page's row (title, path, views, visitors): its visitors from the daily sketches.
    let pages = texts(&page, "#table-pages tbody tr");
    assert_eq!(pages.len(), 1, "{pages:?}");
    assert!(
        ["/old/old3029", "/old/old3030", "/old/old3031"].contains(&pages[0].as_str()),
        "{pages:?}"
    );
    let text = texts(&page, ".report-source").join(" ");
    assert!(text.contains("roll-ups"), "{text}");
    app.stop().await;
}

// ---------------------------------------------------------------------------------------------
// The clock, search totals, the queue's counts and the TTL monitor, through the running app.

use bazaar::analytics::rollup::LEASE;
use std::time::Duration;

/// Step the app's clock so that it reads `to` (it keeps flowing from there).
fn set_clock(app: &TestApp, to: DateTime<Utc>) {
    let now = app.db.now().to_chrono();
    match (to - now).to_std() {
        Ok(forward) => app.clock.step_forward(forward),
        Err(_) => app
            .clock
            .step_back((now - to).to_std().expect("a positive step back")),
    }
}

/// `GET path` as a Firefox user would, which must answer 200.
async fn visit_page(app: &TestApp, path: &str) {
    let response = app
        .client
        .get(app.url(path))
        .header("user-agent", FIREFOX)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200, "{path}");
}

#[tokio::test]
async fn events_take_their_time_and_salt_from_the_stepped_clock_across_every_boundary() {
    let app = spawn_app().await;
    // In 2032 the ISO week of Monday 29 November runs to Sunday 5 December: two months.
    let visits = [
        (utc(2032, 11, 28, 23, 30), "/"),
        (utc(2032, 11, 29, 9, 30), "/"),
        (utc(2032, 11, 29, 10, 30), "/"),
        (utc(2032, 11, 29, 10, 40), "/search?q=zither"),
        (utc(2032, 12, 1, 0, 30), "/"),
        (utc(2032, 12, 6, 0, 30), "/"),
    ];
    for (at, path) in visits {
        set_clock(&app, at);
        visit_page(&app, path).await;
    }
    app.events.as_ref().expect("the traffic log").flush().await;
    let stored: Vec<Event> = stored_events(&app.db)
        .await
        .into_iter()
        .filter(|e| !e.bot)
        .collect();
    // Stamped by the stepped clock (within the seconds a request takes).
    let views: Vec<&Event> = stored.iter().filter(|e| e.kind == "view").collect();
    assert_eq!(views.len(), 6, "{stored:#?}");
    for (event, (at, path)) in views.iter().zip(visits) {
        let drift = event.at.timestamp_millis() - bson_time(at).timestamp_millis();
        assert!(
            (-1_000..60_000).contains(&drift),
            "{path} at {at}: {event:?}"
        );
    }
    let search = stored
        .iter()
        .find(|e| e.kind == "search")
        .expect("the search event");
    assert_eq!(
        search.at.to_chrono().date_naive(),
        utc(2032, 11, 29, 0, 0).date_naive()
    );
    // One salt a day, by the clock's day: the same visitor on the same day hashes alike, and
    // differently the next day; salts older than yesterday are gone.
    assert_eq!(views[1].visitor, views[2].visitor);
    assert_ne!(views[0].visitor, views[1].visitor);
    assert_ne!(views[2].visitor, views[4].visitor);
    let salts: Vec<String> = all(&app.db, SALTS, doc! {})
        .await
        .iter()
        .map(|d| d.get_str("_id").expect("a day").to_string())
        .collect();
    assert_eq!(salts, ["2032-12-06"]);

    // The roll-up as the scheduler runs it: under the lease, at the clock's time.
    set_clock(&app, utc(2033, 1, 1, 2, 0));
    let report = rollup::roll_up_under_lease(&app.db)
        .await
        .expect("rolls up")
        .expect("the lease was free");
    assert_eq!(report.built.len(), 4, "{report:?}");
    let site = |found: &BTreeMap<(String, Option<String>), Numbers>| -> Vec<(String, i64)> {
        found
            .iter()
            .filter(|((_, path), _)| path.is_none())
            .map(|((at, _), n)| (at.clone(), n.views))
            .collect()
    };
    let expect = |rows: &[(&str, i64)]| -> Vec<(String, i64)> {
        rows.iter().map(|(at, n)| (at.to_string(), *n)).collect()
    };
    assert_eq!(
        site(&numbers(&app.db, Level::Hour).await),
        expect(&[
            ("2032-11-28T23:00:00+00:00", 1),
            ("2032-11-29T09:00:00+00:00", 1),
            ("2032-11-29T10:00:00+00:00", 2),
            ("2032-12-01T00:00:00+00:00", 1),
            ("2032-12-06T00:00:00+00:00", 1),
        ])
    );
    assert_eq!(
        site(&numbers(&app.db, Level::Day).await),
        expect(&[
            ("2032-11-28T00:00:00+00:00", 1),
            ("2032-11-29T00:00:00+00:00", 3),
            ("2032-12-01T00:00:00+00:00", 1),
            ("2032-12-06T00:00:00+00:00", 1),
        ])
    );
    assert_eq!(
        site(&numbers(&app.db, Level::Week).await),
        expect(&[
            ("2032-11-22T00:00:00+00:00", 1),
            ("2032-11-29T00:00:00+00:00", 4),
            ("2032-12-06T00:00:00+00:00", 1),
        ])
    );
    assert_eq!(
        site(&numbers(&app.db, Level::Month).await),
        expect(&[
            ("2032-11-01T00:00:00+00:00", 4),
            ("2032-12-01T00:00:00+00:00", 2),
        ])
    );
    let hours = numbers(&app.db, Level::Hour).await;
    assert_eq!(
        hours[&key("2032-11-29T10:00:00+00:00", None)].commerce,
        1,
        "the search"
    );
    // The report's default range ends on the clock's day.
    let page = admin_page(
        &app,
        "/admin/analytics/traffic?from=2032-11-28&to=2032-12-06",
    )
    .await;
    assert_eq!(texts(&page, ".total-views"), ["6"]);
    app.stop().await;
}

#[tokio::test]
async fn a_search_event_records_the_total_the_results_page_shows_not_the_first_pages_count() {
    let app = spawn_app().await;
    for i in 0..25 {
        ProductBuilder::new(&format!("MAR{i:02}"))
            .slug(&format!("marimba-{i}"))
            .title(&format!("Marimba volume {i}"))
            .stock(1)
            .build(&app.db)
            .await;
    }
    for q in ["marimba", "qwxzvplk"] {
        let response = app
            .client
            .get(app.url(&format!("/search?q={q}")))
            .header("user-agent", FIREFOX)
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 200);
        let page = html(&body(response).await);
        if q == "marimba" {
            assert_eq!(count(&page, ".search-hit"), bazaar::search::PER_PAGE);
            assert_eq!(texts(&page, ".result-count .total"), ["25"]);
        }
    }
    // The second page is not another search.
    visit_page(&app, "/search?q=marimba&page=2").await;
    app.events.as_ref().expect("log").flush().await;
    let searches: Vec<(Option<String>, Option<i32>)> = stored_events(&app.db)
        .await
        .into_iter()
        .filter(|e| e.kind == "search")
        .map(|e| (e.query, e.results))
        .collect();
    assert_eq!(
        searches,
        [
            (Some("marimba".to_string()), Some(25)),
            (Some("qwxzvplk".to_string()), Some(0)),
        ]
    );
    app.stop().await;
}

#[tokio::test]
async fn the_traffic_page_shows_this_instances_written_and_dropped_events() {
    let app = spawn_app_with(&[("BAZAAR_ANALYTICS__QUEUE_CAPACITY", "10")]).await;
    let log = app.events.clone().expect("the traffic log");
    // The test's runtime has one thread: the writer cannot run until this task yields, so
    // only ten of these fit in the queue.
    for v in 0..25 {
        log.record(hit(Utc::now(), "/", v, None));
    }
    log.flush().await;
    let stats = log.stats();
    assert_eq!((stats.written, stats.dropped), (10, 15));
    let page = admin_page(&app, "/admin/analytics/traffic").await;
    assert_eq!(texts(&page, ".queue-written"), ["10"]);
    assert_eq!(texts(&page, ".queue-dropped"), ["15"]);
    assert_eq!(texts(&page, ".queue-failed"), ["0"]);
    let said = texts(&page, "#event-queue").join(" ");
    assert!(said.contains("per instance"), "{said}");
    app.stop().await;

    // Without the traffic log there is no queue to show.
    let off = spawn_app_with(&[("BAZAAR_ANALYTICS__EVENTS", "false")]).await;
    let page = admin_page(&off, "/admin/analytics/traffic").await;
    assert_eq!(count(&page, "#event-queue"), 0);
    off.stop().await;
}

#[tokio::test]
async fn docstores_ttl_monitor_deletes_expired_events_while_the_roll_ups_keep_their_counts() {
    let (_server, db) = memory_db("ttl-monitor").await;
    events::ensure_retention(&db, 30)
        .await
        .expect("the TTL index");
    let now = Utc::now();
    let old = now - chrono::Duration::days(40);
    let recent = now - chrono::Duration::days(2);
    let mut hits = Vec::new();
    for v in 0..20 {
        hits.push(hit(old, "/old", v, None));
    }
    for v in 0..5 {
        hits.push(hit(recent, "/new", v, None));
    }
    log_all(&db, hits).await;
    rollup::roll_up(&db, db.now()).await.expect("rolls up");
    let rolled_up = snapshot(&db).await;
    let days = numbers(&db, Level::Day).await;
    let old_day = bson_time(old).to_chrono().date_naive();
    let of_old_day = |days: &BTreeMap<(String, Option<String>), Numbers>| {
        days.iter()
            .find(|((at, path), _)| path.is_none() && at.starts_with(&old_day.to_string()))
            .map(|(_, n)| n.views)
    };
    assert_eq!(of_old_day(&days), Some(20));

    // docstore's TTL monitor runs every 60 s by default, as mongod's; an operator (here the
    // test) sets `ttlMonitorSleepSecs` as on MongoDB.
    db.client()
        .database("admin")
        .run_command(doc! { "setParameter": 1, "ttlMonitorSleepSecs": 1 })
        .await
        .expect("setParameter");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = all(&db, EVENTS, doc! { "path": "/old" }).await.len();
        if left == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the TTL monitor left {left} expired events"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(all(&db, EVENTS, doc! { "path": "/new" }).await.len(), 5);
    // The roll-ups are untouched, and a later run changes none of them.
    assert_eq!(snapshot(&db).await, rolled_up);
    rollup::roll_up(&db, db.now()).await.expect("rolls up");
    assert_eq!(snapshot(&db).await, rolled_up);
    assert_eq!(of_old_day(&numbers(&db, Level::Day).await), Some(20));
}

// ---------------------------------------------------------------------------------------------
// Real processes: `bazaar traffic-rollup` killed with SIGKILL, and three `bazaar` instances on
// one standalone `docstore --auth`.

use crate::multi_instance::{Database, Instance};
use std::process::{Child, Command, Stdio};

/// `bazaar traffic-rollup --now <now>` on database `name` of `uri`, run from `home` (no
/// config.toml there), as a child process.
fn rollup_process(uri: &str, name: &str, now: &str, home: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .current_dir(home)
        .env_remove("RUST_LOG")
        .env_remove("BAZAAR_CONFIG")
        .env("BAZAAR_DATABASE__URI", uri)
        .env("BAZAAR_DATABASE__NAME", name)
        .env("BAZAAR_LOG__LEVEL", "warn")
        .args(["traffic-rollup", "--now", now])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bazaar traffic-rollup starts")
}

/// Wait for a roll-up process to finish on its own; it must succeed. Its standard output.
fn finished(child: Child) -> String {
    let output = child.wait_with_output().expect("waited");
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "traffic-rollup failed: {out}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Make the lease a killed process held free, as its expiry (ten minutes) would.
async fn expire_rollup_lease(db: &Db) {
    db.collection::<Document>(bazaar::db::lease::COLLECTION)
        .update_one(
            doc! { "_id": LEASE },
            doc! { "$set": { "expires": bson::DateTime::from_millis(0) } },
        )
        .await
        .expect("lease expired");
}

/// The connections the store has open (`serverStatus`).
async fn open_connections(db: &Db) -> i64 {
    let status = db
        .client()
        .database("admin")
        .run_command(doc! { "serverStatus": 1 })
        .await
        .expect("serverStatus");
    let current = status
        .get_document("connections")
        .expect("connections")
        .get("current")
        .expect("current");
    match current {
        bson::Bson::Int32(n) => i64::from(*n),
        bson::Bson::Int64(n) => *n,
        other => panic!("connections.current is {other:?}"),
    }
}

/// Wait (at most 30 s) until the store has no more connections open than `before`: a killed
/// process's connections are closed, so the commands it had sent are finished.
async fn settled(db: &Db, before: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut now_open = open_connections(db).await;
    while now_open > before {
        assert!(
            std::time::Instant::now() < deadline,
            "the killed process's {} connections stayed open",
            now_open - before
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        now_open = open_connections(db).await;
    }
}

async fn connect_to(store: &Database, name: &str) -> Db {
    Db::connect(
        &store.uri(),
        name,
        Duration::from_secs(10),
        bazaar::db::Store::External("traffic test".into()),
    )
    .await
    .expect("connects")
}

/// Events enough that a roll-up takes a few seconds: `n` page views and product views over
/// three weeks around a month's end, on 40 pages, by 5 000 visitors.
fn many_events(n: u32) -> Vec<Document> {
    let start = utc(2026, 11, 16, 0, 0);
    let salt = b"a fixed salt, so both copies hold the same events";
    (0..n)
        .map(|i| {
            let at = start + chrono::Duration::seconds(i64::from(i) * 1_814_400 / i64::from(n));
            let event = (i % 7 == 0).then(|| CommerceEvent::ProductViewed {
                sku: format!("sku-{}", i % 40),
            });
            let h = hit(at, &format!("/p{}", i % 40), i % 5_000, event);
            bson::to_document(&Event::from_hit(&h, salt)).expect("encodes")
        })
        .collect()
}

async fn seed_events(db: &Db, events: &[Document]) {
    bazaar::startup::indexes::ensure_indexes(db)
        .await
        .expect("indexes");
    for chunk in events.chunks(10_000) {
        db.collection::<Document>(EVENTS)
            .insert_many(chunk.to_vec())
            .await
            .expect("seeded");
    }
}

/// The roll-ups and their watermarks, to compare two databases.
async fn rolled_up(db: &Db) -> (Vec<Document>, Vec<Document>) {
    let mut marks = all(db, WATERMARKS, doc! {}).await;
    marks.sort_by_key(|d| format!("{:?}", d.get("_id")));
    (snapshot(db).await, marks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roll_up_killed_with_sigkill_and_run_again_gives_the_numbers_of_an_uninterrupted_one() {
    let data = tempfile::tempdir().expect("temp dir");
    let home = tempfile::tempdir().expect("temp dir");
    let store = Database::on_disk(data.path(), 0);
    let uri = store.uri();
    let now = "2027-01-01T02:00:00Z";
    let events = many_events(2_000);
    let clean = connect_to(&store, "clean").await;
    let crashed = connect_to(&store, "crashed").await;
    seed_events(&clean, &events).await;
    seed_events(&crashed, &events).await;

    // The uninterrupted run, timed.
    let started = std::time::Instant::now();
    let said = finished(rollup_process(&uri, "clean", now, home.path()));
    let took = started.elapsed();
    assert!(said.contains("Built the month roll-ups"), "{said}");
    assert!(said.contains("Built the dimension roll-ups"), "{said}");
    let uninterrupted = rolled_up(&clean).await;
    assert_eq!(uninterrupted.1.len(), 5);

    // The same on the other copy, killed at a point of the run, then run again to the end;
    // from the start again for each point: while the hourly documents are being written, and
    // while each level above is being built (its source's watermark set, its own not yet).
    // The points are watched for (every few milliseconds), not timed, so a slow machine moves
    // them with the run.
    // The fifth point: while the dimension documents are written (the four levels done).
    let mut hit_points = Vec::new();
    let collections: Vec<(String, &str)> = Level::ALL
        .into_iter()
        .map(|l| (format!("{l:?}"), l.collection()))
        .chain([("Dimensions".to_string(), DIMENSIONS)])
        .collect();
    for (point, (level, collection)) in collections.iter().enumerate() {
        for emptied in collections.iter().map(|(_, c)| *c).chain([HOURLY]) {
            crashed
                .collection::<Document>(emptied)
                .delete_many(doc! {})
                .await
                .expect("emptied");
        }
        crashed
            .collection::<Document>(WATERMARKS)
            .delete_many(doc! {})
            .await
            .expect("emptied");
        let connections_before = open_connections(&crashed).await;
        let mut child = rollup_process(&uri, "crashed", now, home.path());
        let deadline = std::time::Instant::now() + took * 3 + Duration::from_secs(10);
        let mut killed_at = None;
        while child.try_wait().expect("polled").is_none() && std::time::Instant::now() < deadline {
            let marks = all(&crashed, WATERMARKS, doc! {}).await.len();
            let writing = crashed
                .collection::<Document>(collection)
                .estimated_document_count()
                .await
                .expect("counted");
            // Built in order: `point` watermarks mean the levels below are done.
            let due = if point == 0 {
                marks == 0 && writing > 0
            } else {
                marks == point
            };
            if due {
                let _ = child.kill();
                killed_at = Some((level.clone(), marks, writing));
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        if let Some(state) = killed_at {
            hit_points.push(state);
        }
        // The killed process held the lease: free it, as its expiry would ten minutes on. By
        // then the store has long finished the commands the process sent before it died (a
        // write waiting for the journal, say); freed at once, the next run could overlap them
        // (the killed run's insert landing after the next run emptied the range it fills). The
        // store closes a connection only after the command on it is done: wait for that.
        settled(&crashed, connections_before).await;
        expire_rollup_lease(&crashed).await;
        finished(rollup_process(&uri, "crashed", now, home.path()));
        let after = rolled_up(&crashed).await;
        assert!(
            after == uninterrupted,
            "killed while building the {level} roll-ups, then run again: they differ from the \
             uninterrupted run's"
        );
    }
    // (level being built, watermarks, its documents so far) at each kill.
    println!("killed at {hit_points:?}");
    assert!(
        hit_points.len() >= 3,
        "too few kills landed in the run (of {took:?}): {hit_points:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_bazaar_processes_write_events_and_roll_up_under_the_lease_with_exact_sums() {
    let store = Database::in_memory();
    let db = store.connect().await;
    // Yesterday's events, waiting when the instances start: their schedulers (every second)
    // race for the lease to roll them up.
    let yesterday = Utc::now() - chrono::Duration::days(1);
    let earlier: Vec<Hit> = (0..300)
        .map(|i| {
            let at = yesterday - chrono::Duration::minutes(i64::from(i) * 3);
            hit(at, &format!("/e{}", i % 3), i, None)
        })
        .collect();
    log_all(&db, earlier).await;
    let instances = Instance::start_together(3, &store.uri(), &[("BAZAAR_SEED__DEMO", "false")]);

    // Each instance serves page views at once, while the three keep trying to roll up.
    let paths = ["/", "/products", "/search"];
    let per_instance = 60;
    let mut requests = Vec::new();
    for instance in &instances {
        for i in 0..per_instance {
            let url = format!("{}{}", instance.address(), paths[i % paths.len()]);
            requests.push(async move {
                let response = reqwest::Client::new()
                    .get(url.as_str())
                    .header("user-agent", FIREFOX)
                    .send()
                    .await
                    .expect("sent");
                assert_eq!(response.status(), 200, "{url}");
            });
        }
    }
    futures::future::join_all(requests).await;
    let written = 300 + 3 * per_instance as u64;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while (db
        .collection::<Document>(EVENTS)
        .count_documents(doc! { "bot": false })
        .await
        .expect("counted"))
        < written
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the instances did not write their events"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The instances rolled yesterday up between them, one at a time.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let hours = numbers(&db, Level::Hour).await;
        let rolled: i64 = hours
            .iter()
            .filter(|((_, p), _)| p.is_none())
            .map(|(_, n)| n.views)
            .sum();
        if rolled >= 300 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the instances rolled up {rolled} of yesterday's 300 views:\n{}",
            instances[0].log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Today's hours close later: three roll-ups at once as of six weeks on (so every level
    // holds today), competing for the lease with each other and with the instances, until one
    // has built them.
    let home = tempfile::tempdir().expect("temp dir");
    let later = (Utc::now() + chrono::Duration::days(42)).to_rfc3339();
    let mut built = false;
    for _ in 0..10 {
        let runs: Vec<Child> = (0..3)
            .map(|_| rollup_process(&store.uri(), "bazaar", &later, home.path()))
            .collect();
        let said: Vec<String> = runs.into_iter().map(finished).collect();
        if said.iter().any(|s| s.contains("Built the month roll-ups")) {
            built = true;
            break;
        }
    }
    assert!(built, "no roll-up got the lease in ten tries");
    let fence = all(&db, bazaar::db::lease::COLLECTION, doc! { "_id": LEASE }).await[0]
        .get_i64("fence")
        .expect("fence");
    assert!(fence >= 2, "the lease was taken {fence} times");

    // Exact sums at every level: the whole site and each page, as the events say.
    let mut by_path: BTreeMap<String, i64> = BTreeMap::new();
    for e in stored_events(&db)
        .await
        .iter()
        .filter(|e| !e.bot && e.kind == "view")
    {
        *by_path.entry(e.path.clone()).or_default() += 1;
    }
    assert_eq!(by_path.values().sum::<i64>(), written as i64);
    for level in Level::ALL {
        let found = numbers(&db, level).await;
        let site: i64 = found
            .iter()
            .filter(|((_, p), _)| p.is_none())
            .map(|(_, n)| n.views)
            .sum();
        assert_eq!(site, written as i64, "{level:?}");
        let mut pages: BTreeMap<String, i64> = BTreeMap::new();
        for ((_, path), n) in &found {
            if let Some(path) = path {
                *pages.entry(path.clone()).or_default() += n.views;
            }
        }
        assert_eq!(pages, by_path, "{level:?}");
    }
    let mut dim_pages: BTreeMap<String, i64> = BTreeMap::new();
    for d in all(&db, DIMENSIONS, doc! { "dim": Dim::Path.name() }).await {
        *dim_pages
            .entry(d.get_str("key").expect("a page").to_string())
            .or_default() += i64::from(d.get_i32("count").expect("count"));
    }
    assert_eq!(dim_pages, by_path, "the dimension documents");
    drop(instances);
}
