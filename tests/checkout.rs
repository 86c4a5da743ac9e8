//! Checkout through HTTP: field validation, the test gateway's cards, double submits, the order
//! page's privacy, and stock moving from reserved to sold exactly once.

use crate::common::shop::*;
use crate::common::*;
use bazaar::cart::{self, CartStatus};
use bazaar::checkout::orders;
use reqwest::StatusCode;

const APPROVED: &str = "4242 4242 4242 4242";
const NO_FUNDS: &str = "4000 0000 0000 0002";
const PROCESSING: &str = "4000 0000 0000 0119";

async fn cart_status(app: &TestApp, sku: &str) -> CartStatus {
    let p = stock(&app.db, sku).await;
    let id = p
        .reservations
        .first()
        .and_then(|c| c.holder.cart().cloned())
        .expect("reserved");
    cart::by_id(&app.db, &id)
        .await
        .expect("query")
        .expect("cart")
        .status
}

#[tokio::test]
async fn a_paid_checkout_creates_the_order_and_counts_the_units_as_sold() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "buy", 10).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("buy", "3").await;
    let doc = html(&body(shopper.get("/checkout").await).await);
    assert_eq!(heading(&doc), "Checkout");
    // 3 × $12.00, and 900 g ship for $3.99 + 2 × $1.00.
    assert_eq!(texts(&doc, ".checkout-summary .total"), ["$41.99"]);
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let order_url = location(&response);
    assert_eq!(order_url, "/orders/BZ-000001");
    let doc = html(&body(shopper.get(&order_url).await).await);
    assert_eq!(heading(&doc), "Order BZ-000001");
    assert_eq!(texts(&doc, ".order-item .item-qty"), ["3"]);
    assert_eq!(texts(&doc, ".cart-totals .total"), ["$41.99"]);
    assert!(texts(&doc, ".order-payment")[0].contains("ending 4242"));
    assert_eq!(texts(&doc, "header .cart-count"), ["0"]);
    let p = stock(&app.db, "buy").await;
    assert_eq!((p.qty, p.reservations.len(), p.sold), (7, 0, 3));
    assert_stock_invariant(&app.db, "buy", 10).await;
    assert_eq!(app.gateway.charge_count().await, 1);
    let order = orders::by_number(&app.db, &order_number("BZ-000001"))
        .await
        .expect("query")
        .expect("order");
    assert_eq!(order.total.cents(), 4199);
    assert_eq!(order.payment.last4, "4242");
    let stored = bson::to_document(&order).expect("bson").to_string();
    assert!(
        !stored.contains("4242424242424242"),
        "the card number is never stored"
    );
    let cart = cart::by_id(&app.db, &order.cart_id)
        .await
        .expect("query")
        .expect("cart");
    assert_eq!(cart.status, CartStatus::Complete);
    // The next order gets the next number, in a new cart.
    shopper.add("buy", "1").await;
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/orders/BZ-000002");
    assert_stock_invariant(&app.db, "buy", 10).await;
    app.stop().await;
}

#[tokio::test]
async fn a_double_submitted_checkout_makes_one_order_and_one_charge() {
    let app = spawn_app_with(&[("BAZAAR_SERVER__WORKERS", "4")]).await;
    product_with_stock(&app.db, "twice", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("twice", "2").await;
    let other_tab = shopper.second_device().await;
    let (a, b, c) = tokio::join!(
        shopper.checkout(APPROVED),
        other_tab.checkout(APPROVED),
        shopper.checkout(APPROVED),
    );
    let urls: Vec<String> = [&a, &b, &c].iter().map(|r| location(r)).collect();
    for (response, url) in [&a, &b, &c].iter().zip(&urls) {
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            url, "/orders/BZ-000001",
            "every submit ends at the one order"
        );
    }
    assert_eq!(app.gateway.charge_count().await, 1);
    let count = orders::collection(&app.db)
        .count_documents(bson::doc! {})
        .await
        .expect("count");
    assert_eq!(count, 1);
    // A submit after the fact also shows the order rather than an error.
    let late = other_tab.checkout(APPROVED).await;
    assert_eq!(location(&late), "/orders/BZ-000001");
    let doc = html(&body(other_tab.get("/orders/BZ-000001").await).await);
    assert_eq!(heading(&doc), "Order BZ-000001");
    let p = stock(&app.db, "twice").await;
    assert_eq!((p.qty, p.sold), (3, 2));
    assert_stock_invariant(&app.db, "twice", 5).await;
    app.stop().await;
}

#[tokio::test]
async fn a_declined_card_returns_the_cart_to_active_with_its_stock_still_reserved() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "decline", 4).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("decline", "2").await;
    for (card, reason) in [
        (NO_FUNDS, "insufficient funds"),
        (PROCESSING, "processing error"),
    ] {
        let response = shopper.checkout(card).await;
        assert_eq!(response.status(), StatusCode::PAYMENT_REQUIRED);
        let doc = html(&body(response).await);
        let problem = texts(&doc, ".payment-problem").join(" ");
        assert!(problem.contains(reason), "{problem}");
        // Values are kept, the card number is not echoed back.
        assert_eq!(
            attr(&doc, "input[name=email]", "value").as_deref(),
            Some("ada@example.com")
        );
        assert_eq!(
            attr(&doc, "input[name=card_number]", "value").as_deref(),
            Some("")
        );
        assert_eq!(cart_status(&app, "decline").await, CartStatus::Active);
        let p = stock(&app.db, "decline").await;
        assert_eq!((p.qty, p.reservations[0].qty, p.sold), (2, 2, 0));
    }
    assert_eq!(app.gateway.charge_count().await, 0);
    assert_eq!(shopper.cart_lines().await, [("decline".to_string(), 2)]);
    // The shopper can still change the cart, then pay with a good card.
    shopper.set_qty("decline", "1").await;
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/orders/BZ-000001");
    let p = stock(&app.db, "decline").await;
    assert_eq!((p.qty, p.reservations.len(), p.sold), (3, 0, 1));
    assert_stock_invariant(&app.db, "decline", 4).await;
    app.stop().await;
}

#[tokio::test]
async fn each_bad_field_is_explained_and_nothing_is_charged_or_reserved_anew() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "fields", 4).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("fields", "1").await;
    let mut form = checkout_form("4242 4242 4242 4241");
    for (name, value) in form.iter_mut() {
        match *name {
            "email" => *value = "ada at example".into(),
            "street" => *value = "   ".into(),
            "expiry" => *value = "01/20".into(),
            "cvc" => *value = "1x3".into(),
            _ => {}
        }
    }
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let response = shopper.post("/checkout", &fields).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let doc = html(&body(response).await);
    let mut invalid: Vec<String> = texts(&doc, ".field-error").into_iter().collect();
    invalid.sort();
    assert_eq!(invalid.len(), 5, "{invalid:?}");
    assert_eq!(count(&doc, "input[aria-invalid=true]"), 5);
    assert!(invalid
        .iter()
        .any(|e| e.contains("card number is not valid")));
    assert!(invalid.iter().any(|e| e.contains("expired")));
    assert_eq!(
        attr(&doc, "input[name=name]", "value").as_deref(),
        Some("Ada Lovelace")
    );
    assert_eq!(app.gateway.charge_count().await, 0);
    assert_eq!(cart_status(&app, "fields").await, CartStatus::Active);
    assert_stock_invariant(&app.db, "fields", 4).await;
    app.stop().await;
}

#[tokio::test]
async fn a_cards_expiry_is_judged_by_the_site_clock() {
    use chrono::Datelike;
    // The session must outlive the month the clock is stepped by.
    let app = spawn_app_with(&[("BAZAAR_SESSION__MAX_AGE_SECS", "8000000")]).await;
    product_with_stock(&app.db, "clocked", 4).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("clocked", "1").await;
    // A card that runs out at the end of the site clock's month...
    let now = app.db.now().to_chrono();
    let expiry = format!("{:02}/{}", now.month(), now.year());
    let mut form = checkout_form(APPROVED);
    for (name, value) in form.iter_mut() {
        if *name == "expiry" {
            *value = expiry.clone();
        }
    }
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // ...has expired once that clock is a month and a day further on, whatever the system says.
    app.clock
        .step_forward(std::time::Duration::from_secs(32 * 24 * 3600));
    let response = shopper.post("/checkout", &fields).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let doc = html(&body(response).await);
    let invalid = texts(&doc, ".field-error");
    assert!(invalid.iter().any(|e| e.contains("expired")), "{invalid:?}");
    assert_eq!(app.gateway.charge_count().await, 0);
    app.stop().await;
}

#[tokio::test]
async fn checking_out_an_empty_or_expired_cart_explains_and_changes_nothing() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "late", 4).await;
    let shopper = Shopper::new(&app).await;
    // No cart at all.
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/cart");
    let flashes = shopper.follow(response).await;
    assert!(flashes.iter().any(|f| f.contains("empty")), "{flashes:?}");
    let response = shopper.get("/checkout").await;
    assert_eq!(location(&response), "/cart");
    // A cart that expired before the shopper paid.
    shopper.add("late", "2").await;
    // Carts are stamped and expired by the database's clock: idle past the bound at once.
    app.clock
        .step_forward(std::time::Duration::from_millis(1100));
    bazaar::jobs::expire_idle_carts(&app.db, std::time::Duration::from_secs(1))
        .await
        .expect("expiry");
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/cart");
    let flashes = shopper.follow(response).await;
    assert!(flashes.iter().any(|f| f.contains("expired")), "{flashes:?}");
    assert_eq!(app.gateway.charge_count().await, 0);
    let p = stock(&app.db, "late").await;
    assert_eq!((p.qty, p.sold), (4, 0));
    app.stop().await;
}

#[tokio::test]
async fn an_order_page_is_only_visible_to_the_session_that_placed_it_and_admins() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "private", 4).await;
    let buyer = Shopper::new(&app).await;
    buyer.add("private", "1").await;
    let response = buyer.checkout(APPROVED).await;
    let url = location(&response);
    assert_eq!(buyer.get(&url).await.status(), StatusCode::OK);
    let stranger = Shopper::new(&app).await;
    assert_eq!(stranger.get(&url).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        stranger.get("/orders/BZ-999999").await.status(),
        StatusCode::NOT_FOUND
    );
    // An admin sees it with the admin credentials; a wrong password does not help.
    assert_eq!(app.get_admin(&url).await.status(), StatusCode::OK);
    let wrong = stranger
        .client
        .get(app.url(&url))
        .basic_auth(ADMIN_USER, Some("guess"))
        .send()
        .await
        .expect("sent");
    assert_eq!(wrong.status(), StatusCode::NOT_FOUND);
    app.stop().await;
}

#[tokio::test]
async fn a_price_change_since_adding_is_shown_before_the_shopper_pays() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "repriced", 4).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("repriced", "1").await;
    app.db
        .collection::<bson::Document>(bazaar::catalog::products::COLLECTION)
        .update_one(
            bson::doc! { "sku": "repriced" },
            bson::doc! { "$set": { "pricing.retail": 1500_i64 } },
        )
        .await
        .expect("repriced");
    // Paying straight away: stopped, told, not charged.
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/cart");
    let flashes = shopper.follow(response).await;
    assert!(
        flashes
            .iter()
            .any(|f| f.contains("changed from $12.00 to $15.00")),
        "{flashes:?}"
    );
    assert_eq!(app.gateway.charge_count().await, 0);
    // Now the cart holds the new price, and checkout charges it.
    let response = shopper.checkout(APPROVED).await;
    let order_url = location(&response);
    assert_eq!(order_url, "/orders/BZ-000001");
    let doc = html(&body(shopper.get(&order_url).await).await);
    assert_eq!(texts(&doc, ".cart-totals .subtotal"), ["$15.00"]);
    assert_stock_invariant(&app.db, "repriced", 4).await;
    app.stop().await;
}

#[tokio::test]
async fn checkouts_interrupted_by_a_crash_are_finished_or_handed_back() {
    use bazaar::checkout::recover_stuck_checkouts;
    let app = spawn_app().await;
    product_with_stock(&app.db, "crash", 6).await;
    // Crash before payment: the cart is stuck pending with its stock reserved.
    let unpaid = Shopper::new(&app).await;
    unpaid.add("crash", "2").await;
    // Crash after the order was recorded, before the cart completed and the units were sold.
    let paid = Shopper::new(&app).await;
    paid.add("crash", "1").await;
    let response = paid.checkout(APPROVED).await;
    assert_eq!(location(&response), "/orders/BZ-000001");
    let order = orders::by_number(&app.db, &order_number("BZ-000001"))
        .await
        .expect("query")
        .expect("order");
    let carts = cart::collection(&app.db);
    let long_ago = bson::DateTime::from_millis(0);
    carts
        .update_one(
            bson::doc! { "_id": &order.cart_id },
            bson::doc! { "$set": { "status": "pending", "last_modified": long_ago } },
        )
        .await
        .expect("simulated crash");
    plant_reservation(
        &app.db,
        "crash",
        order.cart_id.as_str(),
        1,
        long_ago,
        bson::doc! { "sold": -1_i64 },
    )
    .await;
    carts
        .update_many(
            bson::doc! { "status": "active" },
            bson::doc! { "$set": { "status": "pending", "last_modified": long_ago } },
        )
        .await
        .expect("simulated crash");
    assert_stock_invariant(&app.db, "crash", 6).await;
    let recovered = recover_stuck_checkouts(
        &app.db,
        app.gateway.as_ref(),
        std::time::Duration::from_secs(60),
    )
    .await
    .expect("recovery");
    assert_eq!((recovered.finished, recovered.handed_back), (1, 1));
    let p = stock(&app.db, "crash").await;
    assert_eq!(
        (p.qty, p.sold),
        (3, 1),
        "the paid unit is sold, the unpaid two still reserved"
    );
    assert_eq!(cart_status(&app, "crash").await, CartStatus::Active);
    let paid_cart = cart::by_id(&app.db, &order.cart_id)
        .await
        .expect("q")
        .expect("cart");
    assert_eq!(paid_cart.status, CartStatus::Complete);
    // The handed-back cart can be paid for now; nothing was charged twice.
    let response = unpaid.checkout(APPROVED).await;
    assert_eq!(location(&response), "/orders/BZ-000002");
    assert_eq!(app.gateway.charge_count().await, 2);
    assert_stock_invariant(&app.db, "crash", 6).await;
    app.stop().await;
}

#[tokio::test]
async fn a_line_left_unreserved_by_a_crash_between_the_two_writes_of_an_add_is_never_charged() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "kept", 5).await;
    product_with_stock(&app.db, "lost", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("kept", "1").await;
    // The crash: the line reached the cart (first write) but the product was never reserved.
    let p = stock(&app.db, "kept").await;
    let cart_id = p.reservations[0]
        .holder
        .cart()
        .expect("a cart holds it")
        .clone();
    let lost = stock(&app.db, "lost").await;
    let line = cart::CartLine::for_product(&(&lost.product).into(), 2);
    cart::collection(&app.db)
        .update_one(
            bson::doc! { "_id": &cart_id },
            bson::doc! { "$push": { "items": bson::to_document(&line).expect("bson") } },
        )
        .await
        .expect("simulated crash");
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/cart");
    let flashes = shopper.follow(response).await;
    assert!(
        flashes.iter().any(|f| f.contains("no longer reserved")),
        "{flashes:?}"
    );
    assert_eq!(app.gateway.charge_count().await, 0);
    assert_eq!(shopper.cart_lines().await, [("kept".to_string(), 1)]);
    assert_carts_match_reservations(&app.db).await;
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/orders/BZ-000001");
    assert_stock_invariant(&app.db, "kept", 5).await;
    assert_stock_invariant(&app.db, "lost", 5).await;
    assert_eq!(stock(&app.db, "lost").await.sold, 0);
    app.stop().await;
}

#[tokio::test]
async fn units_reserved_beyond_a_paid_order_go_back_on_sale_rather_than_being_sold() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "surplus", 10).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("surplus", "1").await;
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/orders/BZ-000001");
    let order = orders::by_number(&app.db, &order_number("BZ-000001"))
        .await
        .expect("query")
        .expect("order");
    // Re-create the moment before the sale, with a change from another device that reserved two
    // more units after checkout had compared the cart with its reservations.
    let old = bson::DateTime::from_millis(0);
    for finish in ["recovery", "cleanup"] {
        plant_reservation(
            &app.db,
            "surplus",
            order.cart_id.as_str(),
            3,
            old,
            bson::doc! { "sold": -1_i64, "qty": -2_i64 },
        )
        .await;
        assert_stock_invariant(&app.db, "surplus", 10).await;
        if finish == "recovery" {
            cart::collection(&app.db)
                .update_one(
                    bson::doc! { "_id": &order.cart_id },
                    bson::doc! { "$set": { "status": "pending", "last_modified": old } },
                )
                .await
                .expect("pending");
            bazaar::checkout::recover_stuck_checkouts(
                &app.db,
                app.gateway.as_ref(),
                std::time::Duration::from_secs(60),
            )
            .await
            .expect("recovery");
        } else {
            let report =
                bazaar::jobs::clean_up_reservations(&app.db, std::time::Duration::from_secs(60))
                    .await
                    .expect("cleanup");
            assert_eq!(report.sold, 1, "{report:?}");
        }
        let p = stock(&app.db, "surplus").await;
        assert_eq!(
            (p.qty, p.reservations.len(), p.sold),
            (9, 0, 1),
            "{finish}: the order's one unit is sold, the two extra are back on sale"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn a_cancellation_interrupted_by_a_crash_is_finished_exactly_once() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "undo-a", 10).await;
    product_with_stock(&app.db, "undo-b", 10).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("undo-a", "2").await;
    shopper.add("undo-b", "3").await;
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/orders/BZ-000001");
    // The crash: the order was marked cancelled with both SKUs to restock, and undo-a got as far
    // as moving its units out of `sold` into the order's hold before the process died.
    orders::collection(&app.db)
        .update_one(
            bson::doc! { "number": "BZ-000001" },
            bson::doc! { "$set": { "status": "cancelled", "restock": ["undo-a", "undo-b"] } },
        )
        .await
        .expect("simulated crash");
    plant_reservation(
        &app.db,
        "undo-a",
        "cancelled:BZ-000001",
        2,
        bson::DateTime::now(),
        bson::doc! { "sold": -2_i64 },
    )
    .await;
    assert_stock_invariant(&app.db, "undo-a", 10).await;
    for run in 0..2 {
        let finished = orders::resume_restocking(&app.db).await.expect("resume");
        assert_eq!(finished, if run == 0 { 1 } else { 0 }, "run {run}");
        for sku in ["undo-a", "undo-b"] {
            let p = stock(&app.db, sku).await;
            assert_eq!(
                (p.qty, p.reservations.len(), p.sold),
                (10, 0, 0),
                "{sku}, run {run}"
            );
        }
    }
    // A second cancel of the same order is refused and changes nothing.
    assert!(!orders::cancel(&app.db, &order_number("BZ-000001"))
        .await
        .expect("cancel"));
    assert_stock_invariant(&app.db, "undo-b", 10).await;
    assert_eq!(stock(&app.db, "undo-b").await.qty, 10);
    app.stop().await;
}

/// Re-create a checkout a crash stopped after its payment attempt was recorded: the shopper's cart
/// locked long ago, the attempt `started`, and (with `charged`) the card charged at the gateway.
/// Returns the cart id.
async fn interrupted_checkout(
    app: &TestApp,
    shopper: &Shopper,
    sku: &str,
    charged: bool,
) -> bazaar::domain::CartId {
    use bazaar::checkout::gateway::{ChargeRequest, PaymentGateway};
    use bazaar::checkout::payments::{self, PaymentRecord};
    shopper.add(sku, "2").await;
    let cart_id = stock(&app.db, sku).await.reservations[0]
        .holder
        .cart()
        .expect("a cart holds it")
        .clone();
    let long_ago = bazaar::jobs::cutoff(app.db.now(), std::time::Duration::from_secs(3600));
    cart::collection(&app.db)
        .update_one(
            bson::doc! { "_id": &cart_id },
            bson::doc! { "$set": { "status": "pending", "last_modified": long_ago } },
        )
        .await
        .expect("locked");
    let locked = cart::by_id(&app.db, &cart_id)
        .await
        .expect("query")
        .expect("cart");
    let form = bazaar::checkout::CheckoutForm {
        email: "grace@example.com".into(),
        name: "Grace Hopper".into(),
        street: "1 Navy Yard".into(),
        city: "Arlington".into(),
        postcode: "22202".into(),
        country: "United States".into(),
        card_number: APPROVED.into(),
        expiry: "12/39".into(),
        cvc: "123".into(),
    };
    let details = form
        .validate(bazaar::checkout::month_of(app.db.now()))
        .expect("valid form");
    let mut attempt = PaymentRecord::started(&locked, "test", &details, app.db.now());
    attempt.started = long_ago;
    attempt.updated = long_ago;
    payments::start(&app.db, &attempt).await.expect("recorded");
    if charged {
        app.gateway
            .charge(ChargeRequest {
                idempotency_key: cart_id.to_string(),
                amount: attempt.amount,
                card: details.card.clone(),
                description: "interrupted".into(),
            })
            .await
            .expect("charged");
    }
    cart_id
}

async fn payment_state(
    app: &TestApp,
    cart_id: &bazaar::domain::CartId,
) -> bazaar::checkout::payments::PaymentState {
    bazaar::checkout::payments::by_key(&app.db, cart_id.as_str())
        .await
        .expect("query")
        .expect("a payment record")
        .state
}

#[tokio::test]
async fn a_payment_attempt_is_recorded_and_linked_to_the_order_it_paid_for() {
    use bazaar::checkout::payments::{self, PaymentState};
    let app = spawn_app().await;
    product_with_stock(&app.db, "ledger", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("ledger", "1").await;
    let declined = shopper.checkout(NO_FUNDS).await;
    assert_eq!(declined.status(), StatusCode::PAYMENT_REQUIRED);
    let cart_id = stock(&app.db, "ledger").await.reservations[0]
        .holder
        .cart()
        .expect("a cart holds it")
        .clone();
    assert_eq!(payment_state(&app, &cart_id).await, PaymentState::Declined);
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/orders/BZ-000001");
    let record = payments::by_key(&app.db, cart_id.as_str())
        .await
        .expect("query")
        .expect("record");
    let order = orders::by_cart(&app.db, &cart_id)
        .await
        .expect("query")
        .expect("order");
    assert_eq!(record.state, PaymentState::Ordered);
    assert_eq!(record.order.as_deref(), Some("BZ-000001"));
    assert_eq!(record.reference.as_ref(), Some(&order.payment.reference));
    assert_eq!(
        (record.amount, record.last4.as_str()),
        (order.total, "4242")
    );
    let stored = bson::to_document(&record).expect("bson").to_string();
    assert!(!stored.contains("4242424242424242"), "no card number kept");
    let charges = app.gateway.all_charges().await.expect("charges");
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0].idempotency_key, cart_id.as_str());
    assert_eq!(charges[0].reference, order.payment.reference);
    app.stop().await;
}

#[tokio::test]
async fn recovery_records_the_order_of_a_checkout_charged_just_before_a_crash() {
    use bazaar::checkout::payments::PaymentState;
    let app = spawn_app().await;
    product_with_stock(&app.db, "charged", 6).await;
    let shopper = Shopper::new(&app).await;
    let cart_id = interrupted_checkout(&app, &shopper, "charged", true).await;
    assert!(orders::by_cart(&app.db, &cart_id)
        .await
        .expect("q")
        .is_none());
    // Too recent to be taken for a crash: nothing happens.
    let report = bazaar::checkout::recover_stuck_checkouts(
        &app.db,
        app.gateway.as_ref(),
        std::time::Duration::from_secs(2 * 3600),
    )
    .await
    .expect("recovery");
    assert_eq!(report.total(), 0, "{report:?}");
    let report = bazaar::checkout::recover_stuck_checkouts(
        &app.db,
        app.gateway.as_ref(),
        std::time::Duration::from_secs(60),
    )
    .await
    .expect("recovery");
    assert_eq!(report.finished, 1, "{report:?}");
    let order = orders::by_cart(&app.db, &cart_id)
        .await
        .expect("query")
        .expect("the order was recorded");
    assert_eq!(
        (
            order.name.as_str(),
            order.email.as_str(),
            order.unit_count()
        ),
        ("Grace Hopper", "grace@example.com", 2)
    );
    let charge = &app.gateway.all_charges().await.expect("charges")[0];
    assert_eq!(order.payment.reference, charge.reference);
    assert_eq!(order.total, charge.amount);
    assert_eq!(payment_state(&app, &cart_id).await, PaymentState::Ordered);
    let cart = cart::by_id(&app.db, &cart_id)
        .await
        .expect("q")
        .expect("cart");
    assert_eq!(cart.status, CartStatus::Complete);
    let p = stock(&app.db, "charged").await;
    assert_eq!((p.qty, p.reservations.len(), p.sold), (4, 0, 2));
    // The shopper's late second submit lands on that order; nothing is charged again.
    let again = shopper.checkout(APPROVED).await;
    assert_eq!(location(&again), order.url());
    assert_eq!(app.gateway.charge_count().await, 1);
    // A second run finds nothing left to do.
    let report = bazaar::checkout::recover_stuck_checkouts(
        &app.db,
        app.gateway.as_ref(),
        std::time::Duration::from_secs(60),
    )
    .await
    .expect("recovery");
    assert_eq!(report.total(), 0, "{report:?}");
    assert_stock_invariant(&app.db, "charged", 6).await;
    app.stop().await;
}

#[tokio::test]
async fn recovery_hands_back_a_cart_whose_card_was_never_charged() {
    use bazaar::checkout::payments::PaymentState;
    let app = spawn_app().await;
    product_with_stock(&app.db, "uncharged", 6).await;
    let shopper = Shopper::new(&app).await;
    let cart_id = interrupted_checkout(&app, &shopper, "uncharged", false).await;
    let report = bazaar::checkout::recover_stuck_checkouts(
        &app.db,
        app.gateway.as_ref(),
        std::time::Duration::from_secs(60),
    )
    .await
    .expect("recovery");
    assert_eq!((report.handed_back, report.total()), (1, 1), "{report:?}");
    assert_eq!(
        payment_state(&app, &cart_id).await,
        PaymentState::NotCharged
    );
    let cart = cart::by_id(&app.db, &cart_id)
        .await
        .expect("q")
        .expect("cart");
    assert_eq!(cart.status, CartStatus::Active);
    assert_eq!(app.gateway.charge_count().await, 0);
    let p = stock(&app.db, "uncharged").await;
    assert_eq!((p.qty, p.reservations[0].qty, p.sold), (4, 2, 0));
    // The shopper pays for the cart they got back.
    let response = shopper.checkout(APPROVED).await;
    assert_eq!(location(&response), "/orders/BZ-000001");
    assert_eq!(payment_state(&app, &cart_id).await, PaymentState::Ordered);
    assert_stock_invariant(&app.db, "uncharged", 6).await;
    app.stop().await;
}

/// A checkout of `sku` charged just before a crash, whose cart is then gone from under the
/// charge (expired, its stock returned): recovery can only refund it. Returns the cart id.
async fn lost_charge(app: &TestApp, sku: &str) -> bazaar::domain::CartId {
    let shopper = Shopper::new(app).await;
    let cart_id = interrupted_checkout(app, &shopper, sku, true).await;
    cart::collection(&app.db)
        .update_one(
            bson::doc! { "_id": &cart_id },
            bson::doc! { "$set": { "status": "expired" } },
        )
        .await
        .expect("expired");
    bazaar::stock::return_reservation(
        &app.db,
        &crate::common::sku(sku),
        &bazaar::domain::StockHolder::from(&cart_id),
    )
    .await
    .expect("returned");
    cart_id
}

#[tokio::test]
async fn a_charge_whose_cart_expired_before_recovery_is_refunded_not_kept() {
    use bazaar::checkout::payments::PaymentState;
    let app = spawn_app().await;
    product_with_stock(&app.db, "lapsed", 6).await;
    let cart_id = lost_charge(&app, "lapsed").await;
    let report = bazaar::checkout::recover_stuck_checkouts(
        &app.db,
        app.gateway.as_ref(),
        std::time::Duration::from_secs(60),
    )
    .await
    .expect("recovery");
    assert_eq!((report.refunded, report.total()), (1, 1), "{report:?}");
    let charges = app.gateway.all_charges().await.expect("charges");
    assert_eq!(charges.len(), 1);
    assert!(charges[0].refunded, "the money went back");
    assert_eq!(payment_state(&app, &cart_id).await, PaymentState::Refunded);
    assert!(orders::by_cart(&app.db, &cart_id)
        .await
        .expect("q")
        .is_none());
    let p = stock(&app.db, "lapsed").await;
    assert_eq!((p.qty, p.reservations.len(), p.sold), (6, 0, 0));
    // Refunding is not repeated.
    let report = bazaar::checkout::recover_stuck_checkouts(
        &app.db,
        app.gateway.as_ref(),
        std::time::Duration::from_secs(60),
    )
    .await
    .expect("recovery");
    assert_eq!(report.total(), 0, "{report:?}");
    app.stop().await;
}

#[tokio::test]
async fn three_instances_recovering_at_once_refund_each_lost_charge_exactly_once() {
    use bazaar::checkout::payments::PaymentState;
    let app = spawn_app().await;
    let mut carts = Vec::new();
    for n in 0..8 {
        let sku = format!("lost-{n}");
        product_with_stock(&app.db, &sku, 3).await;
        let cart_id = lost_charge(&app, &sku).await;
        carts.push(cart_id);
    }
    // Three instances' recovery jobs run over the same attempts at the same moment.
    let runs = ["instance-a", "instance-b", "instance-c"].map(|owner| {
        let db = app.db.clone();
        let gateway = app.gateway.clone();
        tokio::spawn(async move {
            bazaar::checkout::recover_stuck_checkouts_as(
                &db,
                gateway.as_ref(),
                std::time::Duration::from_secs(60),
                owner,
            )
            .await
            .expect("recovery")
        })
    });
    let mut refunded = 0;
    for run in runs {
        refunded += run.await.expect("joined").refunded;
    }
    assert_eq!(refunded, 8, "each attempt settled by one instance");
    let charges = app.gateway.all_charges().await.expect("charges");
    assert_eq!(charges.len(), 8);
    for charge in &charges {
        assert!(charge.refunded, "{} was given back", charge.reference);
        assert_eq!(
            charge.refund_requests, 1,
            "{} was asked to be refunded once, not {} times",
            charge.reference, charge.refund_requests
        );
    }
    for cart_id in &carts {
        assert_eq!(payment_state(&app, cart_id).await, PaymentState::Refunded);
    }
    app.stop().await;
}

#[tokio::test]
async fn an_attempt_claimed_by_an_instance_that_died_is_settled_once_its_claim_runs_out() {
    use bazaar::checkout::payments::{self, PaymentState};
    let app = spawn_app().await;
    product_with_stock(&app.db, "orphaned", 3).await;
    let cart_id = lost_charge(&app, "orphaned").await;
    // Another instance claimed it and died before settling it.
    let claimed = payments::claim(
        &app.db,
        cart_id.as_str(),
        "dead-instance",
        std::time::Duration::from_secs(3600),
    )
    .await
    .expect("claim");
    assert!(claimed.is_some(), "the unclaimed attempt could be claimed");
    let recover = || {
        bazaar::checkout::recover_stuck_checkouts_as(
            &app.db,
            app.gateway.as_ref(),
            std::time::Duration::from_secs(60),
            "live-instance",
        )
    };
    let report = recover().await.expect("recovery");
    assert_eq!((report.refunded, report.elsewhere), (0, 1), "{report:?}");
    assert_eq!(
        app.gateway.all_charges().await.expect("c")[0].refund_requests,
        0
    );
    // The dead instance's claim runs out.
    payments::collection(&app.db)
        .update_one(
            bson::doc! { "_id": &cart_id },
            bson::doc! { "$set": { "claimed_until": bson::DateTime::from_millis(0) } },
        )
        .await
        .expect("expired claim");
    let report = recover().await.expect("recovery");
    assert_eq!(report.refunded, 1, "{report:?}");
    assert_eq!(payment_state(&app, &cart_id).await, PaymentState::Refunded);
    let charge = &app.gateway.all_charges().await.expect("c")[0];
    assert!(charge.refunded && charge.refund_requests == 1, "{charge:?}");
    app.stop().await;
}

#[tokio::test]
async fn recovery_and_refunds_find_payments_and_charges_through_indexes() {
    let app = spawn_app().await;
    assert_uses_index(
        &app.db,
        "unfinished payment attempts",
        bazaar::checkout::payments::COLLECTION,
        bazaar::checkout::payments::unfinished_query(bson::DateTime::now()),
        bson::doc! {},
    )
    .await;
    assert_uses_index(
        &app.db,
        "a test gateway charge by reference",
        bazaar::checkout::gateway::TEST_GATEWAY_CHARGES,
        bson::doc! { "reference": "test_ch_1" },
        bson::doc! {},
    )
    .await;
    app.stop().await;
}

/// The shipping checkout charges a new cart holding `qty` units of `sku`.
async fn checkout_shipping(app: &TestApp, sku: &str, qty: i64) -> String {
    let s = Shopper::new(app).await;
    s.add(sku, &qty.to_string()).await;
    let doc = html(&body(s.get("/checkout").await).await);
    texts(&doc, ".shipping")
        .first()
        .cloned()
        .expect("checkout shows shipping")
}

#[tokio::test]
async fn the_shipping_page_shows_the_configured_rates_and_checkout_charges_each_of_them() {
    let app = spawn_app().await;
    // A shipping page whose text places the rates table, as the shop's own does.
    crate::common::builders::NodeBuilder::page("shipping")
        .title("Shipping and returns")
        .text("We ship anywhere.\n\n{shipping-rates}\n\nReturns within 30 days.")
        .build(&app.db)
        .await;
    // Each unit weighs 300 g (the builder's default).
    product_with_stock(&app.db, "parcel", 50).await;
    save_settings(
        &app,
        &[
            ("currency_symbol", "€"),
            ("shipping_base", "2.50"),
            ("shipping_per_half_kilo", "1.75"),
        ],
    )
    .await;

    let page = page(&app, "/pages/shipping").await;
    let rows: Vec<Vec<String>> = {
        let row = scraper::Selector::parse("table.shipping-rates tbody tr").expect("selector");
        let cell = scraper::Selector::parse("td").expect("selector");
        page.select(&row)
            .map(|tr| {
                tr.select(&cell)
                    .map(|td| td.text().collect::<String>().trim().to_string())
                    .collect()
            })
            .collect()
    };
    let text = texts(&page, ".post-text").concat();
    assert!(!text.contains("{shipping-rates}"), "{text}");
    assert!(!text.contains('$'), "no hard-coded prices: {text}");
    assert_eq!(rows.len(), 5, "{rows:?}");
    // The heaviest parcel of 300 g units within each row's limit is charged the row's price.
    let limits = [(500, 1), (1_000, 3), (2_000, 6), (5_000, 16)];
    for ((grams, qty), row) in limits.iter().zip(&rows) {
        let label = if *grams < 1_000 {
            format!("up to {grams} g")
        } else {
            format!("up to {} kg", grams / 1_000)
        };
        assert_eq!(row[0], label, "{rows:?}");
        assert_eq!(
            checkout_shipping(&app, "parcel", *qty).await,
            row[1],
            "{label}"
        );
    }
    assert_eq!(rows[0][1], "€4.25");
    assert_eq!(rows[4], ["each further 500 g over 5 kg", "+ €1.75"]);
    // 17 units: 5.1 kg, one step past the last row.
    assert_eq!(checkout_shipping(&app, "parcel", 17).await, "€21.75");
    assert_eq!(rows[3][1], "€20.00");
    app.stop().await;
}
