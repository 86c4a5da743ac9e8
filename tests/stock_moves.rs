//! The stock moves' crash safety (`docs/invariants.md`, "Moves between a product and its
//! reservations"): every move stopped after each of its writes, as a crash would leave it, is
//! finished by the recovery, and the mover resuming afterwards (a paused instance) changes
//! nothing; units are never counted twice or lost.

use std::time::Duration;

use bazaar::stock::{self, steps, Applied, Move};

use crate::common::shop::*;
use crate::common::*;

/// Units the test product received.
const RECEIVED: i64 = 10;

/// Where the move stops, as a crash would stop it.
#[derive(Debug, Clone, Copy)]
enum Crash {
    AfterRecord,
    AfterApply,
}

/// What the product and `cart-a`'s and `cart-b`'s reservations hold: `(qty, sold, a, b)`.
type Position = (i64, i64, i64, i64);

/// The [`Position`] now.
async fn position(app: &TestApp) -> Position {
    let s = stock(&app.db, "moves").await;
    let held = |id: &str| {
        s.reservations
            .iter()
            .filter(|r| r.holder == holder(id))
            .map(|r| r.qty)
            .sum::<i64>()
    };
    (s.qty, s.sold, held("cart-a"), held("cart-b"))
}

/// No move left pending on the product.
async fn nothing_pending(app: &TestApp) {
    let raw = app
        .db
        .collection::<bson::Document>(bazaar::catalog::products::COLLECTION)
        .find_one(bson::doc! { "sku": "moves" })
        .await
        .expect("query")
        .expect("product");
    let pending = raw.get_array("pending").map_or(0, Vec::len);
    assert_eq!(pending, 0, "{raw}");
}

/// Recover as the jobs would once the grace period passed.
async fn recover(app: &TestApp) -> u64 {
    // Past the (zero) grace period by the database's clock, which recovery reads.
    app.clock.step_forward(Duration::from_millis(5));
    stock::recover_pending(&app.db, Duration::ZERO)
        .await
        .expect("recovery")
}

/// Stop `m` at `crash`, recover, check the outcome is `expected`; then let the stopped mover
/// carry on (a paused instance waking up) and check nothing changes.
async fn crash_then_recover(app: &TestApp, m: Move, crash: Crash, expected: Position) {
    let db = &app.db;
    assert!(steps::record(db, &m).await.expect("record"), "{m:?}");
    if let Crash::AfterApply = crash {
        assert_eq!(
            steps::apply(db, &m, true).await.expect("apply"),
            Applied::Yes
        );
    }
    // Between the writes the product's counters already hold: qty + reserved + sold.
    let p = product(db, "moves").await;
    assert_eq!(p.qty + p.reserved + p.sold, RECEIVED, "{m:?} {crash:?}");
    assert_eq!(recover(app).await, 1, "{m:?} {crash:?}");
    assert_eq!(position(app).await, expected, "{m:?} {crash:?}");
    assert_stock_invariant(db, "moves", RECEIVED).await;
    nothing_pending(app).await;
    // Recovering again finds nothing.
    assert_eq!(recover(app).await, 0);
    // The mover wakes up and finishes its own steps: every one is a no-op now.
    if let Crash::AfterRecord = crash {
        steps::apply(db, &m, m.delta > 0).await.expect("apply");
    }
    assert!(!steps::settle(db, &m).await.expect("settle"));
    assert!(!steps::cancel(db, &m).await.expect("cancel"));
    assert_eq!(position(app).await, expected, "{m:?} {crash:?} resumed");
    assert_stock_invariant(db, "moves", RECEIVED).await;
}

/// A product with 10 units, 3 of them reserved for `cart-a`.
async fn fresh(app: &TestApp) {
    app.db
        .collection::<bson::Document>(bazaar::catalog::products::COLLECTION)
        .delete_many(bson::doc! { "sku": "moves" })
        .await
        .expect("delete");
    app.db
        .collection::<bson::Document>(stock::COLLECTION)
        .delete_many(bson::doc! { "sku": "moves" })
        .await
        .expect("delete");
    product_with_stock(&app.db, "moves", RECEIVED).await;
    assert!(
        stock::reserve(&app.db, &sku("moves"), &holder("cart-a"), 3, app.db.now())
            .await
            .expect("reserve")
    );
    assert_eq!(position(app).await, (7, 0, 3, 0));
}

#[tokio::test]
async fn every_move_stopped_after_any_of_its_writes_is_finished_once_by_the_recovery() {
    let app = spawn_app().await;
    let now = app.db.now();
    let (s, a, b) = (sku("moves"), holder("cart-a"), holder("cart-b"));
    // Each is made on a fresh product, so one move (and its id) serves both crash points.
    let moves: Vec<(&str, Move, Position)> = vec![
        (
            "a new reservation",
            Move::reserve(&s, &b, 2, now),
            (5, 0, 3, 2),
        ),
        (
            "a reservation growing",
            Move::change(&s, &a, 2, now),
            (5, 0, 5, 0),
        ),
        (
            "a reservation shrinking",
            Move::change(&s, &a, -2, now),
            (9, 0, 1, 0),
        ),
        (
            "a reservation returned",
            Move::free(&s, &a, 3, 0, now),
            (10, 0, 0, 0),
        ),
        (
            "a reservation sold, its surplus returned",
            Move::free(&s, &a, 3, 2, now),
            (8, 2, 0, 0),
        ),
    ];
    for (name, m, expected) in &moves {
        for crash in [Crash::AfterRecord, Crash::AfterApply] {
            fresh(&app).await;
            eprintln!("{name}, {crash:?}");
            crash_then_recover(&app, m.clone(), crash, *expected).await;
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn a_pending_return_of_units_the_reservation_no_longer_holds_is_dropped_and_fenced() {
    let app = spawn_app().await;
    let db = &app.db;
    fresh(&app).await;
    // Recorded, then the reservation changed so that it no longer holds the 3 units.
    let m = Move::change(&sku("moves"), &holder("cart-a"), -3, db.now());
    assert!(steps::record(db, &m).await.expect("record"));
    assert!(
        stock::change_reservation(db, &sku("moves"), &holder("cart-a"), -1, db.now())
            .await
            .expect("shrink")
    );
    assert_eq!(recover(&app).await, 1);
    assert_eq!(position(&app).await, (8, 0, 2, 0));
    nothing_pending(&app).await;
    // The paused mover can no longer apply it, even though the reservation would allow it now.
    assert!(
        stock::change_reservation(db, &sku("moves"), &holder("cart-a"), 1, db.now())
            .await
            .expect("grow")
    );
    assert_eq!(
        steps::apply(db, &m, false).await.expect("apply"),
        Applied::No
    );
    assert!(!steps::settle(db, &m).await.expect("settle"));
    assert_eq!(position(&app).await, (7, 0, 3, 0));
    assert_stock_invariant(db, "moves", RECEIVED).await;
    app.stop().await;
}

#[tokio::test]
async fn a_move_younger_than_the_grace_period_is_left_to_its_mover() {
    let app = spawn_app().await;
    let db = &app.db;
    fresh(&app).await;
    let m = Move::reserve(&sku("moves"), &holder("cart-b"), 1, db.now());
    assert!(steps::record(db, &m).await.expect("record"));
    assert_eq!(
        stock::recover_pending(db, stock::PENDING_GRACE)
            .await
            .expect("recovery"),
        0
    );
    assert_eq!(
        steps::apply(db, &m, true).await.expect("apply"),
        Applied::Yes
    );
    assert!(steps::settle(db, &m).await.expect("settle"));
    assert_eq!(position(&app).await, (6, 0, 3, 1));
    assert_stock_invariant(db, "moves", RECEIVED).await;
    app.stop().await;
}

#[tokio::test]
async fn concurrent_recoveries_finish_each_pending_move_once() {
    let app = spawn_app().await;
    let db = &app.db;
    fresh(&app).await;
    let (s, a, b) = (sku("moves"), holder("cart-a"), holder("cart-b"));
    let take = Move::reserve(&s, &b, 2, db.now());
    let give = Move::free(&s, &a, 3, 1, db.now());
    assert!(steps::record(db, &take).await.expect("record"));
    assert!(steps::record(db, &give).await.expect("record"));
    app.clock.step_forward(Duration::from_millis(5));
    let (x, y, z) = tokio::join!(
        stock::recover_pending(db, Duration::ZERO),
        stock::recover_pending(db, Duration::ZERO),
        stock::recover_pending(db, Duration::ZERO),
    );
    assert_eq!(x.expect("x") + y.expect("y") + z.expect("z"), 2);
    assert_eq!(position(&app).await, (7, 1, 0, 2));
    assert_stock_invariant(db, "moves", RECEIVED).await;
    nothing_pending(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn a_refused_grow_and_a_recovery_rolling_it_forward_settle_it_once_in_either_order() {
    let app = spawn_app().await;
    let db = &app.db;
    for recovery_first in [true, false] {
        fresh(&app).await;
        // cart-b holds nothing, so growing its reservation is refused at step 2.
        let m = Move::change(&sku("moves"), &holder("cart-b"), 2, db.now());
        assert!(steps::record(db, &m).await.expect("record"));
        assert_eq!(
            steps::apply(db, &m, false).await.expect("apply"),
            Applied::No
        );
        app.clock.step_forward(Duration::from_millis(5));
        let expected = if recovery_first {
            // The recovery rolls the take forward; the mover's fence then finds it applied.
            assert!(stock::finish(db, &m).await.expect("finish"));
            assert!(steps::fence(db, &m).await.expect("fence"));
            assert!(!steps::settle(db, &m).await.expect("settle"));
            (5, 0, 3, 2)
        } else {
            // The mover fences and cancels; the recovery can no longer apply it.
            assert!(!steps::fence(db, &m).await.expect("fence"));
            assert!(steps::cancel(db, &m).await.expect("cancel"));
            assert!(!stock::finish(db, &m).await.expect("finish"));
            (7, 0, 3, 0)
        };
        assert_eq!(
            position(&app).await,
            expected,
            "recovery first: {recovery_first}"
        );
        assert_stock_invariant(db, "moves", RECEIVED).await;
        nothing_pending(&app).await;
    }
    app.stop().await;
}
