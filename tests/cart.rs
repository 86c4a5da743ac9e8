//! The cart and stock reservations through HTTP, many shoppers at once: every test ends by
//! checking the stock invariant (`docs/invariants.md`),
//! `qty + reserved + sold == stock received` and the reservations holding `reserved`, on the
//! products it touched.

use std::time::Duration;

use crate::common::shop::*;
use crate::common::*;
use bazaar::cart::{self, CartStatus};
use bazaar::catalog::products;
use bazaar::jobs;
use bson::doc;
use reqwest::StatusCode;

#[tokio::test]
async fn adding_to_the_cart_reserves_stock_and_shows_the_line_totals_and_header_count() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "cart-basic", 5).await;
    let shopper = Shopper::new(&app).await;
    let flashes = shopper.add("cart-basic", "2").await;
    assert!(
        flashes
            .iter()
            .any(|f| f.contains("Added 2 × Test album cart-basic")),
        "{flashes:?}"
    );
    let doc = html(&body(shopper.get("/cart").await).await);
    assert_eq!(cart_lines(&doc), [("cart-basic".to_string(), 2)]);
    assert_eq!(texts(&doc, ".cart-totals .subtotal"), ["$24.00"]);
    // 600 g: $3.99 + 2 × $1.00.
    assert_eq!(texts(&doc, ".cart-totals .shipping"), ["$5.99"]);
    assert_eq!(texts(&doc, ".cart-totals .total"), ["$29.99"]);
    assert_eq!(texts(&doc, "header .cart-count"), ["2"]);
    let p = stock(&app.db, "cart-basic").await;
    assert_eq!(p.qty, 3);
    assert_eq!(p.reservations.len(), 1);
    assert_eq!(p.reservations[0].qty, 2);
    // Adding the same SKU again is a quantity change on the one line.
    shopper.add("cart-basic", "1").await;
    assert_eq!(shopper.cart_lines().await, [("cart-basic".to_string(), 3)]);
    let p = stock(&app.db, "cart-basic").await;
    assert_eq!(
        (p.qty, p.reservations.len(), p.reservations[0].qty),
        (2, 1, 3)
    );
    assert_stock_invariant(&app.db, "cart-basic", 5).await;
    app.stop().await;
}

/// A product drop through HTTP: 500 shoppers at once for 100 units. Exactly 100 get one, every
/// other is told it sold out, and the stock invariant and the carts' reservations hold.
#[tokio::test]
async fn five_hundred_shoppers_racing_for_a_hundred_units_exactly_a_hundred_get_one() {
    let app = spawn_app_with(&[
        ("BAZAAR_SERVER__WORKERS", "4"),
        ("BAZAAR_CART__NEW_CARTS_PER_HOUR", "1000"),
    ])
    .await;
    product_with_stock(&app.db, "hot-item", 100).await;
    // One visitor's fresh session copied into 500 browsers: the session lives in the cookie,
    // so each starts a cart of its own with its first add.
    let first = Shopper::new(&app).await;
    let mut shoppers = Vec::new();
    for _ in 0..500 {
        shoppers.push(first.second_device().await);
    }
    let tasks: Vec<_> = shoppers
        .into_iter()
        .map(|s| tokio::spawn(async move { (s.add("hot-item", "1").await, s) }))
        .collect();
    let mut got_one = 0;
    let mut told_sold_out = 0;
    for task in tasks {
        let (flashes, shopper) = task.await.expect("shopper task");
        if flashes.iter().any(|f| f.starts_with("Added")) {
            assert_eq!(
                shopper.cart_lines().await,
                [("hot-item".to_string(), 1)],
                "{flashes:?}"
            );
            got_one += 1;
        } else {
            assert!(
                flashes
                    .iter()
                    .any(|f| f.contains("sold out") || f.contains("only")),
                "a shopper who missed out must be told why: {flashes:?}"
            );
            told_sold_out += 1;
        }
    }
    assert_eq!((got_one, told_sold_out), (100, 400));
    let p = stock(&app.db, "hot-item").await;
    assert_eq!(p.qty, 0);
    assert_eq!(p.reservations.len(), 100);
    assert_stock_invariant(&app.db, "hot-item", 100).await;
    assert_carts_match_reservations(&app.db).await;
    app.stop().await;
}

#[tokio::test]
async fn asking_for_more_than_is_left_says_how_many_are_left_and_changes_nothing() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "few", 3).await;
    let shopper = Shopper::new(&app).await;
    let flashes = shopper.add("few", "5").await;
    assert!(
        flashes.iter().any(|f| f.contains("only 3 left")),
        "{flashes:?}"
    );
    assert!(shopper.cart_lines().await.is_empty());
    shopper.add("few", "2").await;
    let flashes = shopper.set_qty("few", "4").await;
    assert!(
        flashes.iter().any(|f| f.contains("only 1 left")),
        "{flashes:?}"
    );
    assert_eq!(shopper.cart_lines().await, [("few".to_string(), 2)]);
    assert_stock_invariant(&app.db, "few", 3).await;
    app.stop().await;
}

#[tokio::test]
async fn quantity_changes_and_removal_move_stock_both_ways() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "qty", 20).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("qty", "3").await;
    shopper.set_qty("qty", "7").await;
    assert_eq!(stock(&app.db, "qty").await.qty, 13);
    shopper.set_qty("qty", "2").await;
    assert_eq!(stock(&app.db, "qty").await.qty, 18);
    assert_eq!(shopper.cart_lines().await, [("qty".to_string(), 2)]);
    let flashes = shopper.set_qty("qty", "0").await;
    assert!(flashes.iter().any(|f| f.contains("Removed")), "{flashes:?}");
    let p = stock(&app.db, "qty").await;
    assert_eq!((p.qty, p.reservations.len()), (20, 0));
    shopper.add("qty", "4").await;
    let response = shopper.post("/cart/items/qty/remove", &[]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(shopper.cart_lines().await.is_empty());
    let p = stock(&app.db, "qty").await;
    assert_eq!((p.qty, p.reservations.len()), (20, 0));
    app.stop().await;
}

#[tokio::test]
async fn two_devices_changing_one_cart_at_once_converge_on_one_of_their_quantities() {
    let app = spawn_app_with(&[("BAZAAR_SERVER__WORKERS", "4")]).await;
    product_with_stock(&app.db, "shared", 1000).await;
    let phone = Shopper::new(&app).await;
    phone.add("shared", "1").await;
    let laptop = phone.second_device().await;
    for round in 0..20 {
        let a = (round % 7 + 1).to_string();
        let b = (round % 5 + 10).to_string();
        let (phone_done, laptop_done) =
            tokio::join!(phone.set_qty("shared", &a), laptop.set_qty("shared", &b));
        for flashes in [&phone_done, &laptop_done] {
            assert!(
                flashes.iter().all(|f| !f.contains("only")),
                "plenty of stock, no shortage expected: {flashes:?}"
            );
        }
        let lines = phone.cart_lines().await;
        let expected = [a.parse::<i64>().unwrap(), b.parse::<i64>().unwrap()];
        assert_eq!(lines.len(), 1, "one line per SKU: {lines:?}");
        assert!(
            expected.contains(&lines[0].1),
            "round {round}: the cart holds {} but the devices asked for {expected:?}",
            lines[0].1
        );
        // The reservation always matches the cart line.
        let p = stock(&app.db, "shared").await;
        assert_eq!(p.reservations.len(), 1);
        assert_eq!(p.reservations[0].qty, lines[0].1, "round {round}");
        assert_stock_invariant(&app.db, "shared", 1000).await;
    }
    app.stop().await;
}

#[tokio::test]
async fn bad_quantities_and_unknown_products_get_a_message_and_change_nothing() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "safe", 5).await;
    let shopper = Shopper::new(&app).await;
    for bad in ["-1", "0", "10000", "abc", "", "1.5"] {
        let flashes = shopper.add("safe", bad).await;
        assert!(
            flashes
                .iter()
                .any(|f| f.contains("whole number from 1 to 99")),
            "qty {bad:?}: {flashes:?}"
        );
    }
    let flashes = shopper.add("no-such-sku", "1").await;
    assert!(
        flashes.iter().any(|f| f.contains("does not exist")),
        "{flashes:?}"
    );
    assert!(shopper.cart_lines().await.is_empty());
    shopper.add("safe", "2").await;
    for bad in ["-1", "10000", "abc"] {
        let flashes = shopper.set_qty("safe", bad).await;
        assert!(
            flashes.iter().any(|f| f.contains("whole number")),
            "qty {bad:?}: {flashes:?}"
        );
    }
    let flashes = shopper.set_qty("not-in-cart", "1").await;
    assert!(
        flashes.iter().any(|f| f.contains("not in your cart")),
        "{flashes:?}"
    );
    assert_eq!(shopper.cart_lines().await, [("safe".to_string(), 2)]);
    // A form without its fields is a 400 page, not a 500.
    let response = shopper
        .post("/cart/items/safe", &[("qty", "9"), ("qty", "x")])
        .await;
    assert!(
        response.status() == StatusCode::SEE_OTHER || response.status() == StatusCode::BAD_REQUEST
    );
    assert_stock_invariant(&app.db, "safe", 5).await;
    app.stop().await;
}

#[tokio::test]
async fn an_idle_cart_expires_once_even_with_two_expiry_runs_racing_a_shopper() {
    let app = spawn_app_with(&[("BAZAAR_SERVER__WORKERS", "2")]).await;
    product_with_stock(&app.db, "exp-a", 10).await;
    product_with_stock(&app.db, "exp-b", 10).await;
    let idle = Shopper::new(&app).await;
    idle.add("exp-a", "3").await;
    idle.add("exp-b", "2").await;
    // Idle for longer than the expiry's second: the shop's clock moves, no real waiting.
    app.clock.step_forward(Duration::from_millis(1100));
    let busy = Shopper::new(&app).await;
    let db1 = app.db.clone();
    let db2 = app.db.clone();
    let (first, second, _) = tokio::join!(
        jobs::expire_idle_carts(&db1, Duration::from_secs(1)),
        jobs::expire_idle_carts(&db2, Duration::from_secs(1)),
        busy.add("exp-a", "4"),
    );
    let (first, second) = (first.expect("expiry"), second.expect("expiry"));
    assert_eq!(
        first.reservations_returned + second.reservations_returned,
        2,
        "each of the two lines is returned exactly once: {first:?} {second:?}"
    );
    assert_eq!(first.carts_expired + second.carts_expired, 1);
    // The busy shopper's fresh cart is untouched.
    assert_eq!(busy.cart_lines().await, [("exp-a".to_string(), 4)]);
    let a = stock(&app.db, "exp-a").await;
    assert_eq!((a.qty, a.reservations.len()), (6, 1));
    let b = stock(&app.db, "exp-b").await;
    assert_eq!((b.qty, b.reservations.len()), (10, 0));
    // The idle shopper is told, and their cart is empty.
    let doc = html(&body(idle.get("/cart").await).await);
    assert!(
        texts(&doc, ".cart-notices li")
            .iter()
            .any(|n| n.contains("expired")),
        "{:?}",
        texts(&doc, ".cart-notices li")
    );
    assert!(cart_lines(&doc).is_empty());
    // A later run finds nothing more to do.
    let again = jobs::expire_idle_carts(&app.db, Duration::from_secs(1))
        .await
        .expect("expiry");
    assert_eq!(again.reservations_returned, 0);
    assert_stock_invariant(&app.db, "exp-a", 10).await;
    assert_stock_invariant(&app.db, "exp-b", 10).await;
    app.stop().await;
}

#[tokio::test]
async fn a_shopper_adding_to_an_expired_cart_is_told_and_gets_a_new_cart() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "again", 10).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("again", "2").await;
    app.clock.step_forward(Duration::from_millis(1100));
    jobs::expire_idle_carts(&app.db, Duration::from_secs(1))
        .await
        .expect("expiry");
    let flashes = shopper.add("again", "1").await;
    assert!(flashes.iter().any(|f| f.contains("expired")), "{flashes:?}");
    assert!(flashes.iter().any(|f| f.contains("Added")), "{flashes:?}");
    assert_eq!(shopper.cart_lines().await, [("again".to_string(), 1)]);
    assert_stock_invariant(&app.db, "again", 10).await;
    app.stop().await;
}

#[tokio::test]
async fn cleanup_returns_stock_orphaned_by_a_crash_and_keeps_live_reservations() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "orphan", 10).await;
    let live = Shopper::new(&app).await;
    live.add("orphan", "2").await;
    // A crash between the two writes of an add: the product was reserved for a cart whose own
    // write never happened (here: a cart that does not exist), and one that expired without
    // returning it.
    let old = bson::DateTime::from_millis(bson::DateTime::now().timestamp_millis() - 10_000);
    for (ghost, qty) in [("no-such-cart", 3_i64), ("expired-cart", 1)] {
        plant_reservation(&app.db, "orphan", ghost, qty, old, doc! { "qty": -qty }).await;
    }
    let now = bson::DateTime::now();
    cart::collection(&app.db)
        .insert_one(cart::Cart {
            id: cart_id("expired-cart"),
            status: CartStatus::Expired,
            created: now,
            last_modified: now,
            items: Vec::new(),
            shipping_rates: Default::default(),
        })
        .await
        .expect("cart");
    // Age the live reservation too: cleanup must refresh it, not return it.
    app.db
        .collection::<bson::Document>(bazaar::stock::COLLECTION)
        .update_one(
            doc! { "sku": "orphan", "qty": 2 },
            doc! { "$set": { "timestamp": old } },
        )
        .await
        .expect("aged");
    assert_eq!(stock(&app.db, "orphan").await.qty, 4);
    let report = jobs::clean_up_reservations(&app.db, Duration::from_secs(5))
        .await
        .expect("cleanup");
    assert_eq!((report.returned, report.refreshed), (2, 1), "{report:?}");
    let p = stock(&app.db, "orphan").await;
    assert_eq!(p.qty, 8);
    assert_eq!(p.reservations.len(), 1);
    assert!(p.reservations[0].timestamp > old);
    assert_eq!(live.cart_lines().await, [("orphan".to_string(), 2)]);
    let again = jobs::clean_up_reservations(&app.db, Duration::from_secs(5))
        .await
        .expect("cleanup");
    assert_eq!((again.returned, again.refreshed), (0, 0));
    assert_stock_invariant(&app.db, "orphan", 10).await;
    app.stop().await;
}

#[tokio::test]
async fn the_background_jobs_expire_idle_carts_on_their_own() {
    let app = spawn_app_with(&[
        ("BAZAAR_CART__JOBS_EVERY_SECS", "1"),
        ("BAZAAR_CART__EXPIRE_AFTER_SECS", "1"),
        ("BAZAAR_CART__CLEANUP_AFTER_SECS", "2"),
    ])
    .await;
    product_with_stock(&app.db, "auto", 4).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("auto", "4").await;
    assert_eq!(stock(&app.db, "auto").await.qty, 0);
    let mut returned = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if stock(&app.db, "auto").await.qty == 4 {
            returned = true;
            break;
        }
    }
    assert!(
        returned,
        "the expiry job never returned the idle cart's stock"
    );
    assert_stock_invariant(&app.db, "auto", 4).await;
    app.stop().await;
}

const HOUR: Duration = Duration::from_secs(3600);
const IDLE: Duration = Duration::from_secs(600);
/// A little more than [`IDLE`].
const PAST_IDLE: Duration = Duration::from_secs(660);

#[tokio::test]
async fn a_cart_touched_just_before_the_clock_steps_back_expires_on_time() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "step-cart", 10).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("step-cart", "2").await;
    let clock = app.clock.clone();
    clock.step_back(HOUR);
    let fresh = jobs::expire_idle_carts(&app.db, IDLE)
        .await
        .expect("expiry");
    assert_eq!(
        fresh.carts_expired, 0,
        "a cart touched a moment ago expired"
    );
    clock.step_forward(PAST_IDLE);
    let due = jobs::expire_idle_carts(&app.db, IDLE)
        .await
        .expect("expiry");
    assert_eq!(
        (due.carts_expired, due.reservations_returned),
        (1, 1),
        "the step back kept an idle cart's stock held past its expiry"
    );
    let p = stock(&app.db, "step-cart").await;
    assert_eq!((p.qty, p.reservations.len()), (10, 0));
    assert_stock_invariant(&app.db, "step-cart", 10).await;
    app.stop().await;
}

#[tokio::test]
async fn a_reservation_and_an_expired_cart_stamped_before_a_step_back_are_cleaned_up_on_time() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "step-orphan", 10).await;
    let now = app.db.now();
    // A crash left a reservation for a cart that never got written, and a cart expired.
    plant_reservation(
        &app.db,
        "step-orphan",
        "never-written",
        3,
        now,
        doc! { "qty": -3_i64 },
    )
    .await;
    cart::collection(&app.db)
        .insert_one(cart::Cart {
            id: cart_id("step-expired"),
            status: CartStatus::Expired,
            created: now,
            last_modified: now,
            items: Vec::new(),
            shipping_rates: Default::default(),
        })
        .await
        .expect("cart");
    let clock = app.clock.clone();
    clock.step_back(HOUR);
    let early = jobs::clean_up_reservations(&app.db, IDLE)
        .await
        .expect("cleanup");
    assert_eq!(early.returned, 0, "{early:?}");
    assert_eq!(
        jobs::delete_expired_carts(&app.db, IDLE)
            .await
            .expect("retention"),
        0
    );
    clock.step_forward(PAST_IDLE);
    let due = jobs::clean_up_reservations(&app.db, IDLE)
        .await
        .expect("cleanup");
    assert_eq!(due.returned, 1, "{due:?}");
    assert_eq!(
        jobs::delete_expired_carts(&app.db, IDLE)
            .await
            .expect("retention"),
        1
    );
    assert_eq!(stock(&app.db, "step-orphan").await.qty, 10);
    assert_stock_invariant(&app.db, "step-orphan", 10).await;
    app.stop().await;
}

#[tokio::test]
async fn stamps_later_than_now_are_set_to_now_once_and_recent_ones_are_left_alone() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "step-stamps", 10).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("step-stamps", "1").await;
    app.db
        .collection::<bson::Document>(bazaar::checkout::payments::COLLECTION)
        .insert_one(doc! {
            "_id": "step-attempt", "cart_id": "step-attempt", "state": "started",
            "updated": app.db.now(),
        })
        .await
        .expect("attempt");
    // Within the slack (instances' clocks a little apart): nothing is rewritten.
    app.clock.step_back(Duration::from_secs(2));
    let report = jobs::bound_future_stamps(&app.db).await.expect("bound");
    assert_eq!(report.total(), 0, "{report:?}");
    app.clock.step_back(HOUR);
    let report = jobs::bound_future_stamps(&app.db).await.expect("bound");
    assert_eq!(
        (report.carts, report.reservations, report.payments),
        (1, 1, 1),
        "{report:?}"
    );
    let now = app.db.now().timestamp_millis();
    let p = stock(&app.db, "step-stamps").await;
    assert!((now - p.reservations[0].timestamp.timestamp_millis()).abs() < 5_000);
    let again = jobs::bound_future_stamps(&app.db).await.expect("bound");
    assert_eq!(again.total(), 0, "{again:?}");
    app.stop().await;
}

#[tokio::test]
async fn every_cart_checkout_and_job_query_uses_an_index() {
    let app = spawn_app().await;
    let db = &app.db;
    let now = bson::DateTime::now();
    let limit = now;
    let queries: [(&str, &str, bson::Document, bson::Document); 18] = [
        (
            "carts stamped in the future",
            cart::COLLECTION,
            cart::store::modified_after_query(limit),
            doc! {},
        ),
        (
            "reservations stamped in the future",
            bazaar::stock::COLLECTION,
            bazaar::stock::reserved_after_query(limit),
            doc! {},
        ),
        (
            "stock moves stamped in the future",
            products::COLLECTION,
            doc! { "pending.at": { "$gt": limit } },
            doc! {},
        ),
        (
            "payment attempts stamped in the future",
            bazaar::checkout::payments::COLLECTION,
            bazaar::checkout::payments::touched_after_query(limit),
            doc! {},
        ),
        (
            "idle carts",
            cart::COLLECTION,
            doc! { "status": "active", "last_modified": { "$lt": now } },
            doc! {},
        ),
        (
            "expiring carts",
            cart::COLLECTION,
            doc! { "status": "expiring" },
            doc! {},
        ),
        (
            "carts by status, newest first",
            cart::COLLECTION,
            doc! { "status": "active" },
            doc! { "last_modified": -1 },
        ),
        (
            "a product's reservation",
            bazaar::stock::COLLECTION,
            doc! { "sku": "x", "cart_id": "c" },
            doc! {},
        ),
        (
            "stock moves a crash left pending",
            products::COLLECTION,
            bazaar::stock::pending_before_query(now),
            doc! {},
        ),
        (
            "cancellations to finish",
            bazaar::checkout::orders::COLLECTION,
            doc! { "status": "cancelled", "restock.0": { "$exists": true } },
            doc! {},
        ),
        (
            // products::for_cart, for_cart_holding and units_reserved's $match.
            "a product as a cart line needs it",
            products::COLLECTION,
            doc! { "sku": "x" },
            doc! {},
        ),
        (
            "the cart page's products",
            products::COLLECTION,
            doc! { "sku": { "$in": ["a", "b"] } },
            doc! {},
        ),
        (
            "stale reservations",
            bazaar::stock::COLLECTION,
            doc! { "timestamp": { "$lt": now } },
            doc! {},
        ),
        (
            "reservations of a cart",
            bazaar::stock::COLLECTION,
            doc! { "cart_id": "c" },
            doc! {},
        ),
        (
            "order of a cart",
            bazaar::checkout::orders::COLLECTION,
            doc! { "cart_id": "c" },
            doc! {},
        ),
        (
            "order by number",
            bazaar::checkout::orders::COLLECTION,
            doc! { "number": "BZ-000001" },
            doc! {},
        ),
        (
            "orders by status, newest first",
            bazaar::checkout::orders::COLLECTION,
            doc! { "status": "paid" },
            doc! { "number": -1, "_id": -1 },
        ),
        (
            "newest orders",
            bazaar::checkout::orders::COLLECTION,
            doc! {},
            doc! { "number": -1, "_id": -1 },
        ),
    ];
    for (what, collection, filter, sort) in queries {
        assert_uses_index(db, what, collection, filter, sort).await;
    }
    app.stop().await;
}

#[tokio::test]
async fn a_shopper_adding_while_two_expiry_runs_race_never_loses_or_doubles_stock() {
    let app = spawn_app_with(&[("BAZAAR_SERVER__WORKERS", "4")]).await;
    product_with_stock(&app.db, "race", 1000).await;
    let mut received_back = 0;
    for round in 0..12 {
        let shopper = Shopper::new(&app).await;
        shopper.add("race", "2").await;
        // Idle just past the timeout, then come back exactly as expiry runs twice.
        // Carts idle by the database's clock, which the expiry runs read too.
        app.clock
            .step_forward(Duration::from_millis(if round % 2 == 0 {
                320
            } else {
                280
            }));
        let (first, second, flashes) = tokio::join!(
            jobs::expire_idle_carts(&app.db, Duration::from_millis(300)),
            jobs::expire_idle_carts(&app.db, Duration::from_millis(300)),
            shopper.add("race", "1"),
        );
        let returned = first.expect("expiry").reservations_returned
            + second.expect("expiry").reservations_returned;
        assert!(
            returned <= 1,
            "round {round}: a line was returned {returned} times"
        );
        received_back += returned;
        let lines = shopper.cart_lines().await;
        // Either the add landed in the old cart before it expired (3 units), or the cart expired
        // and the add started a new one (1 unit, and the shopper was told).
        match lines.as_slice() {
            [(sku, 3)] if sku == "race" => {}
            [(sku, 1)] if sku == "race" => {
                assert!(
                    flashes.iter().any(|f| f.contains("expired")),
                    "round {round}: {flashes:?}"
                );
            }
            other => panic!("round {round}: unexpected cart {other:?}"),
        }
        assert_carts_match_reservations(&app.db).await;
        assert_stock_invariant(&app.db, "race", 1000).await;
        // Start the next round with no cart left to expire.
        jobs::expire_idle_carts(&app.db, Duration::ZERO)
            .await
            .expect("expiry");
    }
    eprintln!("expiry won the race {received_back} times out of 12");
    app.stop().await;
}

#[tokio::test]
async fn two_cleanup_runs_at_once_return_an_orphaned_reservation_once() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "twin", 10).await;
    let old = bson::DateTime::from_millis(0);
    plant_reservation(&app.db, "twin", "gone", 4, old, doc! { "qty": -4_i64 }).await;
    let (a, b) = tokio::join!(
        jobs::clean_up_reservations(&app.db, Duration::from_secs(60)),
        jobs::clean_up_reservations(&app.db, Duration::from_secs(60)),
    );
    assert_eq!(
        a.expect("cleanup").returned + b.expect("cleanup").returned,
        1
    );
    let p = stock(&app.db, "twin").await;
    assert_eq!((p.qty, p.reservations.len()), (10, 0));
    app.stop().await;
}

/// Poll `/healthz` until it answers `status`; returns its body.
async fn healthz_until(app: &TestApp, status: StatusCode) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let response = app.get("/healthz").await;
        if response.status() == status {
            return body(response).await;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "/healthz never answered {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn on_a_full_disk_adding_to_the_cart_says_the_shop_cannot_take_changes_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let faults = docstore::DiskFaults::new();
    let mut settings = test_settings(&[
        NO_DEMO,
        ("BAZAAR_DATABASE__URI", "embedded"),
        ("BAZAAR_DATABASE__PATH", dir.path().to_str().unwrap()),
    ]);
    settings.database.disk_faults = Some(faults.clone());
    let app = spawn_with_settings(settings).await;
    product_with_stock(&app.db, "full-disk", 5).await;
    let shopper = Shopper::new(&app).await;
    assert_eq!(healthz_until(&app, StatusCode::OK).await, "ok\n");

    faults.fill_after(0);
    // The store finds the disk full at its next group commit, which needs something to write.
    let _ = app
        .db
        .collection::<bson::Document>("probe")
        .insert_one(doc! { "probe": 1 })
        .await;
    let health = healthz_until(&app, StatusCode::SERVICE_UNAVAILABLE).await;
    assert!(health.contains("not writable"), "{health}");

    let response = shopper
        .post("/cart/items", &[("sku", "full-disk"), ("qty", "2")])
        .await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let page = body(response).await;
    assert!(
        page.contains("The shop cannot take changes right now"),
        "{page}"
    );
    // Nothing was reserved, and pages that only read still show.
    assert!(shopper.cart_lines().await.is_empty());
    assert_eq!(stock(&app.db, "full-disk").await.qty, 5);
    assert_stock_invariant(&app.db, "full-disk", 5).await;

    faults.heal();
    assert_eq!(healthz_until(&app, StatusCode::OK).await, "ok\n");
    shopper.add("full-disk", "2").await;
    assert_eq!(
        shopper.cart_lines().await,
        vec![("full-disk".to_string(), 2)]
    );
    assert_stock_invariant(&app.db, "full-disk", 5).await;
}

#[tokio::test]
async fn every_stock_ledger_move_keeps_the_invariant_and_refuses_what_is_not_there() {
    use bazaar::stock;
    let app = spawn_app().await;
    let db = &app.db;
    let p = product_with_stock(db, "ledger", 5).await;
    let earlier = bson::DateTime::from_millis(bson::DateTime::now().timestamp_millis() - 60_000);
    // Reserving more than is on sale is refused and changes nothing.
    assert!(
        !stock::reserve(db, &sku("ledger"), &holder("cart-a"), 6, earlier)
            .await
            .expect("reserve")
    );
    assert!(
        stock::reserve(db, &sku("ledger"), &holder("cart-a"), 3, earlier)
            .await
            .expect("reserve")
    );
    assert_stock_invariant(db, "ledger", 5).await;
    assert_eq!(
        stock(db, "ledger").await.reserved_for(&cart_id("cart-a")),
        3
    );
    // Cleanup's refresh matches the timestamp it saw, once.
    assert_eq!(
        stock::refresh_reservation(db, &sku("ledger"), &holder("cart-a"), earlier)
            .await
            .expect("refresh"),
        1
    );
    assert_eq!(
        stock::refresh_reservation(db, &sku("ledger"), &holder("cart-a"), earlier)
            .await
            .expect("refresh"),
        0
    );
    // Growing needs units on sale; shrinking needs them reserved.
    let now = bson::DateTime::now();
    assert!(
        !stock::change_reservation(db, &sku("ledger"), &holder("cart-a"), 3, now)
            .await
            .expect("change")
    );
    assert!(
        stock::change_reservation(db, &sku("ledger"), &holder("cart-a"), 2, now)
            .await
            .expect("change")
    );
    assert!(
        !stock::change_reservation(db, &sku("ledger"), &holder("cart-a"), -6, now)
            .await
            .expect("change")
    );
    assert!(
        stock::change_reservation(db, &sku("ledger"), &holder("cart-a"), -1, now)
            .await
            .expect("change")
    );
    assert_stock_invariant(db, "ledger", 5).await;
    // Selling 3 of the 4 held puts the surplus back on sale; a second sale finds nothing.
    assert!(
        stock::sell_reservation(db, &sku("ledger"), &holder("cart-a"), 3)
            .await
            .expect("sell")
    );
    assert!(
        !stock::sell_reservation(db, &sku("ledger"), &holder("cart-a"), 3)
            .await
            .expect("sell")
    );
    let sold = stock(db, "ledger").await;
    assert_eq!((sold.qty, sold.sold, sold.reservations.len()), (2, 3, 0));
    // A cancellation: the sold units go into a hold (only once), then back on sale.
    assert!(
        stock::unsell_into_hold(db, &sku("ledger"), &holder("cancelled:BZ-1"), 3)
            .await
            .expect("hold")
    );
    assert!(
        !stock::unsell_into_hold(db, &sku("ledger"), &holder("cancelled:BZ-1"), 3)
            .await
            .expect("hold")
    );
    assert_stock_invariant(db, "ledger", 5).await;
    assert!(
        stock::return_reservation(db, &sku("ledger"), &holder("cancelled:BZ-1"))
            .await
            .expect("return")
    );
    assert!(
        !stock::return_reservation(db, &sku("ledger"), &holder("cancelled:BZ-1"))
            .await
            .expect("return")
    );
    let restocked = stock(db, "ledger").await;
    assert_eq!(
        (restocked.qty, restocked.sold, restocked.reservations.len()),
        (5, 0, 0)
    );
    // Receiving changes what was received; writing off more than is on sale is refused.
    assert!(stock::adjust_available(db, p.id, 2).await.expect("adjust"));
    assert!(!stock::adjust_available(db, p.id, -8).await.expect("adjust"));
    assert!(stock::adjust_available(db, p.id, -7).await.expect("adjust"));
    assert_stock_invariant(db, "ledger", 0).await;
}
