//! A seeded random workload: many shoppers adding, changing, removing and checking out while
//! expiry, cleanup and order cancellations run alongside. Afterwards every product must satisfy
//! the stock invariant (`docs/invariants.md`), hold no stray reservations, and have sold exactly
//! what the orders say.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::shop::*;
use crate::common::*;
use bazaar::checkout::orders::{self, OrderStatus};
use bazaar::jobs;
use futures::TryStreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const SKUS: [&str; 5] = ["w-a", "w-b", "w-c", "w-d", "w-e"];
const STOCK: i64 = 8;
const SHOPPERS: u64 = 16;
const OPS_PER_SHOPPER: usize = 40;

async fn shop_randomly(shopper: Shopper, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..OPS_PER_SHOPPER {
        let sku = SKUS[rng.gen_range(0..SKUS.len())];
        match rng.gen_range(0..12) {
            // Wander off long enough for the cart to expire under the shopper.
            10 | 11 if rng.gen_bool(0.4) => {
                tokio::time::sleep(Duration::from_millis(rng.gen_range(200..500))).await;
            }
            0..=3 => {
                let qty = rng.gen_range(1..=3).to_string();
                shopper.add(sku, &qty).await;
            }
            4..=5 => {
                let qty = rng.gen_range(0..=4).to_string();
                shopper.set_qty(sku, &qty).await;
            }
            6 => {
                let response = shopper
                    .post(&format!("/cart/items/{sku}/remove"), &[])
                    .await;
                assert_eq!(response.status(), reqwest::StatusCode::SEE_OTHER);
            }
            _ => {
                let card = if rng.gen_bool(0.7) {
                    "4242424242424242"
                } else {
                    "4000000000000002"
                };
                let response = shopper.checkout(card).await;
                let status = response.status();
                assert!(
                    status == reqwest::StatusCode::SEE_OTHER
                        || status == reqwest::StatusCode::PAYMENT_REQUIRED,
                    "checkout answered {status}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_random_workload_with_expiry_cleanup_and_cancels_keeps_every_product_consistent() {
    let app = spawn_app_with(&[("BAZAAR_SERVER__WORKERS", "4")]).await;
    for sku in SKUS {
        product_with_stock(&app.db, sku, STOCK).await;
    }
    // Expiry, cleanup and cancellations keep running while the shoppers shop.
    let stop = Arc::new(AtomicBool::new(false));
    let background = {
        let db = app.db.clone();
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(7);
            let mut cancelled = 0;
            let mut expired = 0;
            while !stop.load(Ordering::Relaxed) {
                expired += jobs::expire_idle_carts(&db, Duration::from_millis(300))
                    .await
                    .expect("expiry")
                    .carts_expired;
                jobs::clean_up_reservations(&db, Duration::from_millis(600))
                    .await
                    .expect("cleanup");
                let paid = orders::list(&db, Some(OrderStatus::Paid), 50)
                    .await
                    .expect("orders");
                if !paid.is_empty() && rng.gen_bool(0.3) {
                    let pick = &paid[rng.gen_range(0..paid.len())];
                    if orders::cancel(&db, &pick.number).await.expect("cancel") {
                        cancelled += 1;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (cancelled, expired)
        })
    };
    let mut tasks = Vec::new();
    for seed in 0..SHOPPERS {
        let shopper = Shopper::new(&app).await;
        tasks.push(tokio::spawn(shop_randomly(shopper, seed)));
    }
    for task in tasks {
        task.await.expect("shopper finished");
    }
    stop.store(true, Ordering::Relaxed);
    let (cancelled, expired) = background.await.expect("background jobs");
    assert!(
        expired > 0,
        "no cart expired during the run: the race was not exercised"
    );

    // Everyone has gone home: expire every cart, then clean up whatever is left.
    jobs::expire_idle_carts(&app.db, Duration::ZERO)
        .await
        .expect("final expiry");
    jobs::clean_up_reservations(&app.db, Duration::ZERO)
        .await
        .expect("final cleanup");

    let all: Vec<orders::Order> = orders::collection(&app.db)
        .find(bson::doc! {})
        .await
        .expect("orders")
        .try_collect()
        .await
        .expect("orders");
    let mut sold_by_orders: HashMap<String, i64> = HashMap::new();
    for order in all.iter().filter(|o| o.status != OrderStatus::Cancelled) {
        for item in &order.items {
            *sold_by_orders.entry(item.sku.to_string()).or_default() += item.qty;
        }
    }
    assert!(!all.is_empty(), "the workload placed no orders at all");
    assert_carts_match_reservations(&app.db).await;
    for sku in SKUS {
        assert_stock_invariant(&app.db, sku, STOCK).await;
        let p = stock(&app.db, sku).await;
        assert!(
            p.reservations.is_empty(),
            "{sku}: stray reservations {:?}",
            p.reservations
        );
        assert_eq!(
            p.sold,
            sold_by_orders.get(sku).copied().unwrap_or(0),
            "{sku}: units sold differ from the orders"
        );
    }
    assert_eq!(
        app.gateway.charge_count().await,
        all.len() as u64,
        "one charge per order"
    );
    eprintln!(
        "workload: {} orders, {cancelled} cancelled and {expired} carts expired during the run",
        all.len()
    );
    app.stop().await;
}
