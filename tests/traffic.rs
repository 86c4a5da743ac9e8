//! The traffic log and its roll-ups (`bazaar::analytics::{events, rollup}`): what a page view
//! and each commerce event store (and what they must never store), the TTL index and the
//! indexes of the reports, the bounded queue, and the roll-ups' exact counts across hour, day,
//! ISO week and month boundaries, their idempotence, a crash between a level's write and its
//! watermark, HyperLogLog uniques, and three instances writing while one rolls up.

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
