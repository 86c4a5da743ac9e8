//! Checkout: validate the form, lock the cart (`active → pending`), check its reservations and
//! prices, record the payment attempt (journaled), charge through the payment gateway, then
//! record the order, complete the cart and count its units as sold. A decline puts the cart back to `active`, stock still
//! reserved; a second submit of the same cart shows the one order.

pub(crate) mod countries;
pub(crate) mod emails;
pub mod gateway;
pub(crate) mod lookup;
pub(crate) mod model;
pub mod orders;
pub(crate) mod pages;
pub mod payments;

use std::time::Duration;

use bson::doc;
use bson::oid::ObjectId;
use serde::Deserialize;

use crate::cart::{self, price_changed_notice, store, Cart, CartError, CartStatus};
use crate::catalog::products;
use crate::checkout::gateway::{Card, Charge, ChargeRequest, PaymentError, PaymentGateway};
use crate::checkout::orders::{Address, Order, OrderItem, OrderStatus};
use crate::checkout::payments::{PaymentRecord, PaymentState};
use crate::db::Db;
use crate::domain::{CartId, Sku, StockHolder};
use crate::stock;

/// The checkout form as submitted; every field is text so bad input can be shown back.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CheckoutForm {
    pub email: String,
    pub name: String,
    pub street: String,
    pub city: String,
    pub postcode: String,
    pub country: String,
    pub card_number: String,
    pub expiry: String,
    pub cvc: String,
}

pub(crate) use crate::web::field_errors::FieldErrors;

/// A form that passed validation.
#[derive(Debug, Clone)]
pub struct ValidCheckout {
    pub email: String,
    pub name: String,
    pub(crate) address: Address,
    pub card: Card,
}

impl CheckoutForm {
    /// Check every field, collecting a message per bad field; `today` is (year, month).
    pub fn validate(&self, today: (i32, u32)) -> Result<ValidCheckout, FieldErrors> {
        let mut errors = FieldErrors::new();
        let email = self.email.trim();
        if !is_plausible_email(email) {
            errors.add("email", "Enter an email address like name@example.com.");
        }
        let name = required_text(&mut errors, "name", &self.name, "name", 100);
        let street = required_text(&mut errors, "street", &self.street, "street address", 200);
        let city = required_text(&mut errors, "city", &self.city, "city", 100);
        let postcode = required_text(&mut errors, "postcode", &self.postcode, "postcode", 20);
        let country = parse_country(&mut errors, "country", &self.country);
        let number: String = self
            .card_number
            .chars()
            .filter(|c| !matches!(c, ' ' | '-'))
            .collect();
        if number.is_empty() {
            errors.add("card_number", "Enter your card number.");
        } else if !(12..=19).contains(&number.len()) || !number.chars().all(|c| c.is_ascii_digit())
        {
            errors.add("card_number", "A card number has 12 to 19 digits.");
        } else if !luhn_valid(&number) {
            errors.add(
                "card_number",
                "That card number is not valid; check the digits.",
            );
        }
        let expiry = parse_expiry(&self.expiry);
        match expiry {
            None => {
                errors.add("expiry", "Enter the expiry date as MM/YY.");
            }
            Some((year, month)) if (year, month) < today => {
                errors.add("expiry", "This card has expired.");
            }
            Some(_) => {}
        }
        let cvc = self.cvc.trim();
        if !(3..=4).contains(&cvc.len()) || !cvc.chars().all(|c| c.is_ascii_digit()) {
            errors.add("cvc", "The security code is the 3 or 4 digits on the card.");
        }
        match expiry {
            Some((exp_year, exp_month)) if errors.is_empty() => Ok(ValidCheckout {
                email: email.to_string(),
                name,
                address: Address {
                    street,
                    city,
                    postcode,
                    country,
                },
                card: Card {
                    number,
                    exp_month,
                    exp_year,
                    cvc: cvc.to_string(),
                },
            }),
            _ => Err(errors),
        }
    }

    /// The form as shown again after a mistake in some field: everything kept but the
    /// security code, so a typo in the postcode does not cost the card number. (After a
    /// decline the card is not shown back at all: see [`CheckoutForm::without_card`].)
    pub(crate) fn for_correction(&self) -> CheckoutForm {
        CheckoutForm {
            cvc: String::new(),
            ..self.clone()
        }
    }

    /// The form as shown again after a decline: never echo the card number or CVC.
    pub(crate) fn without_card(&self) -> CheckoutForm {
        CheckoutForm {
            card_number: String::new(),
            cvc: String::new(),
            ..self.clone()
        }
    }
}

/// One required line of a delivery address (or the name on it), trimmed: a message in `errors`
/// under `field` when it is empty, longer than `max` characters or holds control characters.
/// Checkout and the saved addresses of accounts (`accounts::addresses`) check alike with it.
pub(crate) fn required_text(
    errors: &mut FieldErrors,
    field: &'static str,
    value: &str,
    label: &str,
    max: usize,
) -> String {
    let value = value.trim();
    if value.is_empty() {
        errors.add(field, format!("Enter your {label}."));
    } else {
        check_text(errors, field, value, label, max);
    }
    value.to_string()
}

/// An optional line (a second address line): empty is fine, otherwise as [`required_text`].
pub(crate) fn optional_text(
    errors: &mut FieldErrors,
    field: &'static str,
    value: &str,
    label: &str,
    max: usize,
) -> String {
    let value = value.trim();
    check_text(errors, field, value, label, max);
    value.to_string()
}

fn check_text(errors: &mut FieldErrors, field: &'static str, value: &str, label: &str, max: usize) {
    if value.chars().count() > max {
        errors.add(
            field,
            format!("{label} is too long (at most {max} characters)."),
        );
    } else if value.chars().any(char::is_control) {
        errors.add(
            field,
            format!("{label} contains characters we cannot print."),
        );
    }
}

/// The country as the list spells it, or a message in `errors` under `field`.
pub(crate) fn parse_country(errors: &mut FieldErrors, field: &'static str, value: &str) -> String {
    match countries::canonical(value) {
        Some(c) => c.to_string(),
        None => {
            errors.add(field, "Choose your country from the list.");
            String::new()
        }
    }
}

fn is_plausible_email(email: &str) -> bool {
    crate::web::email::is_valid(email)
}

/// The Luhn checksum every card number carries.
pub(crate) fn luhn_valid(digits: &str) -> bool {
    let mut sum = 0;
    for (i, c) in digits.chars().rev().enumerate() {
        let Some(mut d) = c.to_digit(10) else {
            return false;
        };
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    !digits.is_empty() && sum % 10 == 0
}

/// `MM/YY` or `MM/YYYY` → (year, month).
fn parse_expiry(value: &str) -> Option<(i32, u32)> {
    let (month, year) = value.trim().split_once('/')?;
    let month: u32 = month.trim().parse().ok()?;
    let year_text = year.trim();
    let year: i32 = year_text.parse().ok()?;
    let year = match year_text.len() {
        2 => 2000 + year,
        4 => year,
        _ => return None,
    };
    (1..=12).contains(&month).then_some((year, month))
}

/// The (year, month) of `now` (the site clock, [`Db::now`](crate::db::Db::now)), for card expiry
/// checks: a card expiring this month is still good.
pub fn month_of(now: bson::DateTime) -> (i32, u32) {
    use chrono::Datelike;
    let now = now.to_chrono();
    (now.year(), now.month())
}

/// How a checkout attempt ended.
#[derive(Debug)]
pub(crate) enum CheckoutOutcome {
    /// Paid, or already paid by an earlier submit of the same cart.
    Placed(Box<Order>),
    /// The gateway refused the card; the cart is active again with its stock still reserved.
    Declined(String),
    /// Something in the cart changed (a price, a lost reservation); the cart is active again and
    /// the shopper should review it.
    CartChanged(Vec<String>),
    /// Nothing to buy.
    Empty,
    /// The cart expired or does not exist.
    NotActive,
    /// Another submit of this cart is still being charged.
    InProgress,
}

/// How long a second submit waits for the first one's order before saying it is in progress.
const WAIT_FOR_OTHER_SUBMIT: Duration = Duration::from_secs(5);

/// Run the whole checkout for `cart_id`.
pub(crate) async fn place_order(
    db: &Db,
    gateway: &dyn PaymentGateway,
    cart_id: &CartId,
    details: &ValidCheckout,
) -> Result<CheckoutOutcome, CartError> {
    let locked = store::lock_for_checkout(db, cart_id).await?;
    let Some(cart) = locked else {
        return outcome_of_other_submit(db, cart_id).await;
    };
    let changes = review_reservations(db, &cart).await?;
    if !changes.is_empty() {
        store::unlock(db, cart_id).await?;
        return Ok(CheckoutOutcome::CartChanged(changes));
    }
    // On disk before the card is charged: after a crash, recovery asks the gateway about it.
    let attempt = PaymentRecord::started(&cart, gateway.name(), details, db.now());
    payments::start(db, &attempt).await?;
    let charge = gateway
        .charge(ChargeRequest {
            idempotency_key: attempt.key.clone(),
            amount: attempt.amount,
            card: details.card.clone(),
            description: format!("Bazaar cart {}", cart.id),
        })
        .await;
    let charge = match charge {
        Ok(charge) if !charge.refunded => {
            crate::metrics::payment("charged");
            charge
        }
        // Recovery refunds only carts that can no longer be paid for; should one come back to
        // life, its key is spent, and a refunded charge pays for nothing.
        Ok(charge) => {
            tracing::warn!(cart = %cart.id, reference = %charge.reference,
                "a checkout met its cart's refunded charge; not placing an order");
            store::unlock(db, cart_id).await?;
            return Ok(CheckoutOutcome::Declined(
                "This cart's payment was refunded and cannot be used again. Please start a new \
                 cart."
                    .to_string(),
            ));
        }
        Err(e) => {
            let reason = match e {
                PaymentError::Declined(reason) => {
                    crate::metrics::payment("declined");
                    payments::advance(
                        db,
                        &attempt.key,
                        &[PaymentState::Started],
                        PaymentState::Declined,
                        doc! {},
                    )
                    .await?;
                    reason
                }
                // The attempt stays `started`: should the gateway have charged after all,
                // recovery finds out and settles it.
                PaymentError::Unavailable(_) => {
                    crate::metrics::payment("failed");
                    tracing::warn!(error = %e, "payment gateway unavailable");
                    "The payment service is not answering; you have not been charged. Please \
                     try again in a moment."
                        .to_string()
                }
            };
            store::unlock(db, cart_id).await?;
            return Ok(CheckoutOutcome::Declined(reason));
        }
    };
    let order = record_order(db, &cart, &attempt, &charge).await?;
    crate::metrics::count(crate::metrics::ORDERS, 1);
    tracing::info!(order = %order.number, total = order.total.cents(), "order placed");
    Ok(CheckoutOutcome::Placed(Box::new(order)))
}

/// After `charge` paid for `cart` (as locked; its lines are the order's items): record the
/// order, complete the cart, count its units as sold and link the payment to the order. Safe to
/// repeat (one order per cart), so recovery uses it to finish a checkout a crash interrupted.
async fn record_order(
    db: &Db,
    cart: &Cart,
    attempt: &PaymentRecord,
    charge: &Charge,
) -> Result<Order, CartError> {
    // `not_charged` too: recovery may have asked the gateway while this (very slow) checkout
    // was still charging; the charge went through after all and this order settles it.
    let open = [
        PaymentState::Started,
        PaymentState::Charged,
        PaymentState::NotCharged,
    ];
    payments::advance(
        db,
        &attempt.key,
        &open,
        PaymentState::Charged,
        doc! { "reference": &charge.reference },
    )
    .await?;
    let order = Order {
        id: ObjectId::new(),
        number: orders::next_number(db).await?,
        cart_id: cart.id.clone(),
        created: db.now(),
        email: attempt.email.clone(),
        name: attempt.name.clone(),
        address: attempt.address.clone(),
        items: cart
            .items
            .iter()
            .map(|l| OrderItem {
                sku: l.sku.clone(),
                title: l.details.title.clone(),
                qty: l.qty,
                unit_price: l.details.price,
            })
            .collect(),
        subtotal: cart.subtotal_amount(),
        shipping: cart.shipping_amount(),
        total: cart.total_amount(),
        payment: attempt.payment(charge),
        status: OrderStatus::Paid,
        restock: Vec::new(),
        account_id: None,
    };
    let order = orders::insert_once(db, order).await?;
    // Queued before the attempt is marked ordered: a crash in between leaves the attempt
    // open, and recovery (which finds the order) queues it then; the id keeps it to one.
    emails::queue(db, emails::OrderEmail::Placed, &order).await?;
    finish_paid_cart(db, cart).await?;
    payments::advance(
        db,
        &attempt.key,
        &open,
        PaymentState::Ordered,
        doc! { "reference": &order.payment.reference, "order": &order.number },
    )
    .await?;
    Ok(order)
}

/// Mark a paid cart complete and count its lines' units as sold (a reservation holding more, from
/// a change that raced the checkout, gives the surplus back). Idempotent, so a checkout
/// interrupted after the order was recorded can be finished later. `cart` is the cart as locked,
/// whose lines are the order's items.
pub(crate) async fn finish_paid_cart(db: &Db, cart: &Cart) -> Result<(), CartError> {
    store::complete(db, &cart.id).await?;
    for line in &cart.items {
        stock::sell_reservation(db, &line.sku, &StockHolder::from(&cart.id), line.qty).await?;
    }
    Ok(())
}

/// What one recovery run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Orders recorded (or carts completed) for checkouts that had been paid.
    pub finished: u64,
    /// Carts handed back to their shoppers: never charged.
    pub handed_back: u64,
    /// Charges given back because their order could not be finished.
    pub refunded: u64,
    /// Unfinished attempts left for a later run (the gateway did not answer, or the shopper
    /// can still pay for the cart, which reuses its charge).
    pub(crate) waiting: u64,
    /// Attempts another instance's recovery was settling at the time.
    pub elsewhere: u64,
}

impl RecoveryReport {
    pub fn total(&self) -> u64 {
        self.finished + self.handed_back + self.refunded
    }
}

/// Finish what crashed checkouts left, for attempts and carts untouched for `older_than`.
///
/// First every payment attempt still `started` or `charged`: if its order exists, the cart is
/// completed and the attempt linked. Otherwise the gateway is asked about its idempotency key:
/// not charged → the cart is handed back (`active`, where the shopper can retry and expiry will
/// eventually reclaim it); charged → the order is recorded from the attempt (its contact details
/// and address) and the cart as locked, exactly as checkout would have. A charge whose cart can
/// no longer be paid for (expired or gone) is refunded and logged; one whose cart is active again
/// is left alone, since paying for that cart reuses the charge (same key).
///
/// Then every cart still `pending` with no such attempt (the crash came before the attempt was
/// recorded, or after it was settled): completed if its order exists, handed back if not.
pub async fn recover_stuck_checkouts(
    db: &Db,
    gateway: &dyn PaymentGateway,
    older_than: Duration,
) -> Result<RecoveryReport, CartError> {
    let owner = crate::db::lease::this_instance();
    recover_stuck_checkouts_as(db, gateway, older_than, owner).await
}

/// [`recover_stuck_checkouts`] claiming attempts as `owner`: tests run several "instances" in
/// one process with it.
pub async fn recover_stuck_checkouts_as(
    db: &Db,
    gateway: &dyn PaymentGateway,
    older_than: Duration,
    owner: &str,
) -> Result<RecoveryReport, CartError> {
    let cutoff = crate::db::cutoff(db.now(), older_than);
    let mut report = RecoveryReport::default();
    for attempt in payments::unfinished_before(db, cutoff).await? {
        match settle(db, gateway, &attempt, owner).await {
            Ok(Settled::Finished) => report.finished += 1,
            Ok(Settled::HandedBack) => report.handed_back += 1,
            Ok(Settled::Refunded) => report.refunded += 1,
            Ok(Settled::Waiting) => report.waiting += 1,
            Ok(Settled::ClaimedElsewhere) => report.elsewhere += 1,
            Err(e) => {
                report.waiting += 1;
                tracing::warn!(cart = %attempt.cart_id, error = %e,
                    "could not settle an interrupted payment; retrying on the next run");
            }
        }
    }
    for c in store::pending_before(db, cutoff).await? {
        let attempt = payments::by_key(db, c.id.as_str()).await?;
        if attempt.is_some_and(|a| a.state.is_unfinished()) {
            // Settled above once it is old enough, or the gateway could not tell yet.
            continue;
        }
        if orders::by_cart(db, &c.id).await?.is_some() {
            finish_paid_cart(db, &c).await?;
            report.finished += 1;
        } else {
            store::hand_back(db, &c).await?;
            report.handed_back += 1;
        }
        tracing::warn!(cart = %c.id, "recovered a checkout interrupted by a crash");
    }
    Ok(report)
}

enum Settled {
    Finished,
    HandedBack,
    Refunded,
    Waiting,
    /// Another instance's recovery holds the attempt.
    ClaimedElsewhere,
}

/// How long one instance's recovery holds an attempt it settles before another instance may take
/// it over: far longer than the few gateway calls and writes a settlement makes, so only an
/// instance that died mid-way loses it.
pub(crate) const SETTLE_CLAIM: Duration = Duration::from_secs(120);

/// Settle one unfinished payment attempt (see [`recover_stuck_checkouts`]), after claiming it
/// for this instance so no other instance asks the gateway about it or refunds it meanwhile.
async fn settle(
    db: &Db,
    gateway: &dyn PaymentGateway,
    attempt: &PaymentRecord,
    owner: &str,
) -> Result<Settled, CartError> {
    let Some(attempt) = payments::claim(db, &attempt.key, owner, SETTLE_CLAIM).await? else {
        return Ok(Settled::ClaimedElsewhere);
    };
    let attempt = &attempt;
    let unfinished = [PaymentState::Started, PaymentState::Charged];
    let cart = cart::by_id(db, &attempt.cart_id).await?;
    let paid_for = |c: &Cart| matches!(c.status, CartStatus::Pending | CartStatus::Complete);
    if let Some(order) = orders::by_cart(db, &attempt.cart_id).await? {
        emails::queue(db, emails::OrderEmail::Placed, &order).await?;
        if let Some(c) = cart.as_ref().filter(|c| paid_for(c)) {
            finish_paid_cart(db, c).await?;
        }
        payments::advance(
            db,
            &attempt.key,
            &unfinished,
            PaymentState::Ordered,
            doc! { "reference": &order.payment.reference, "order": &order.number },
        )
        .await?;
        return Ok(Settled::Finished);
    }
    let charge = match gateway.find_charge(&attempt.key).await {
        Ok(charge) => charge,
        Err(e) => {
            tracing::warn!(cart = %attempt.cart_id, error = %e,
                "the payment gateway could not say whether an interrupted checkout was charged");
            return Ok(Settled::Waiting);
        }
    };
    let Some(charge) = charge else {
        if let Some(c) = cart.as_ref().filter(|c| c.status == CartStatus::Pending) {
            store::hand_back(db, c).await?;
        }
        payments::advance(
            db,
            &attempt.key,
            &unfinished,
            PaymentState::NotCharged,
            doc! {},
        )
        .await?;
        tracing::warn!(cart = %attempt.cart_id,
            "handed back a cart whose checkout was interrupted before the card was charged");
        return Ok(Settled::HandedBack);
    };
    if charge.refunded {
        payments::advance(
            db,
            &attempt.key,
            &unfinished,
            PaymentState::Refunded,
            doc! { "reference": &charge.reference },
        )
        .await?;
        return Ok(Settled::Refunded);
    }
    match cart {
        Some(c) if paid_for(&c) => {
            let order = record_order(db, &c, attempt, &charge).await?;
            crate::metrics::count(crate::metrics::ORDERS, 1);
            tracing::warn!(cart = %c.id, order = %order.number,
                "recorded the order of a checkout a crash interrupted after the card was charged");
            Ok(Settled::Finished)
        }
        Some(c) if c.status == CartStatus::Active => Ok(Settled::Waiting),
        _ => {
            // One refund per attempt, whoever sends it and however often: a retry after a
            // timeout, or after this claim ran out, repeats the key and refunds nothing more.
            let refund_key = format!("refund-{}", attempt.key);
            if let Err(e) = gateway.refund(&charge.reference, &refund_key).await {
                tracing::warn!(cart = %attempt.cart_id, reference = %charge.reference, error = %e,
                    "could not refund a charge whose order was lost; retrying on the next run");
                return Ok(Settled::Waiting);
            }
            payments::advance(
                db,
                &attempt.key,
                &unfinished,
                PaymentState::Refunded,
                doc! { "reference": &charge.reference },
            )
            .await?;
            crate::metrics::count(crate::metrics::REFUNDS, 1);
            tracing::warn!(cart = %attempt.cart_id, reference = %charge.reference,
                amount = charge.amount.cents(),
                "refunded a charge whose cart can no longer be ordered");
            Ok(Settled::Refunded)
        }
    }
}

/// Why the cart could not be locked, and what the shopper should see instead: a submit racing
/// another one for the same cart waits (briefly) for that one's order.
pub(crate) async fn outcome_of_other_submit(
    db: &Db,
    cart_id: &CartId,
) -> Result<CheckoutOutcome, CartError> {
    let deadline = tokio::time::Instant::now() + WAIT_FOR_OTHER_SUBMIT;
    loop {
        if let Some(order) = orders::by_cart(db, cart_id).await? {
            return Ok(CheckoutOutcome::Placed(Box::new(order)));
        }
        let status = cart::by_id(db, cart_id)
            .await?
            .map(|c| (c.status, c.items.is_empty()));
        match status {
            Some((CartStatus::Active, true)) => return Ok(CheckoutOutcome::Empty),
            // Unlocked again between our attempt and now (a decline): let the shopper retry.
            Some((CartStatus::Active, false)) => return Ok(CheckoutOutcome::InProgress),
            Some((CartStatus::Pending | CartStatus::Complete, _)) => {
                if tokio::time::Instant::now() >= deadline {
                    return Ok(CheckoutOutcome::InProgress);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Some(_) => return Ok(CheckoutOutcome::NotActive),
            None => return Ok(CheckoutOutcome::NotActive),
        }
    }
}

/// Before charging, compare every line with its reservation and the current price. A line whose
/// reservation is short is cut to what is reserved (removed if nothing is); a changed price is
/// taken over. Returns a notice per change; empty means the cart can be charged as it is.
async fn review_reservations(db: &Db, cart: &Cart) -> Result<Vec<String>, CartError> {
    let skus: Vec<&Sku> = cart.items.iter().map(|l| &l.sku).collect();
    let on_file = products::by_skus(db, &skus).await?;
    let held = crate::stock::held_by_cart(db, &cart.id).await?;
    let mut notices = Vec::new();
    for line in &cart.items {
        let product = on_file.get(&line.sku);
        let reserved = held.get(&line.sku).copied().unwrap_or(0);
        let title = &line.details.title;
        if reserved == 0 {
            store::drop_line(db, &cart.id, &line.sku).await?;
            notices.push(format!(
                "{title} was no longer reserved for you and has been removed from your cart."
            ));
            continue;
        }
        if reserved != line.qty {
            store::cut_line(db, &cart.id, &line.sku, reserved).await?;
            notices.push(format!(
                "Only {reserved} of {title} are reserved for you; your cart now holds {reserved}."
            ));
        }
        if let Some(p) = product {
            if p.pricing.retail != line.details.price {
                // This checkout holds the lock, so the guard holds; the shopper reviews the
                // change either way before anything is charged.
                store::take_over_price(
                    db,
                    &cart.id,
                    CartStatus::Pending,
                    &line.sku,
                    line.details.price,
                    p.pricing.retail,
                )
                .await?;
                notices.push(price_changed_notice(
                    title,
                    line.details.price,
                    p.pricing.retail,
                    &crate::db::site::currency(),
                ));
            }
        }
    }
    Ok(notices)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good_form() -> CheckoutForm {
        CheckoutForm {
            email: "ada@example.com".into(),
            name: "Ada Lovelace".into(),
            street: "12 St James's Square".into(),
            city: "London".into(),
            postcode: "SW1Y 4JH".into(),
            country: "United Kingdom".into(),
            card_number: "4242 4242 4242 4242".into(),
            expiry: "12/30".into(),
            cvc: "123".into(),
        }
    }

    #[test]
    fn a_complete_form_validates_with_the_card_digits_only() {
        let valid = good_form().validate((2026, 11)).expect("valid");
        assert_eq!(valid.card.number, "4242424242424242");
        assert_eq!((valid.card.exp_year, valid.card.exp_month), (2030, 12));
    }

    #[test]
    fn each_bad_field_gets_its_own_message() {
        let form = CheckoutForm {
            email: "not-an-email".into(),
            name: "  ".into(),
            card_number: "4242 4242 4242 4241".into(),
            expiry: "10/26".into(),
            cvc: "12a".into(),
            ..good_form()
        };
        let errors = form.validate((2026, 11)).expect_err("invalid");
        let fields: Vec<&str> = errors.fields().collect();
        assert_eq!(fields, ["card_number", "cvc", "email", "expiry", "name"]);
        assert!(errors.get("expiry").is_some_and(|m| m.contains("expired")));
        assert!(errors
            .get("card_number")
            .is_some_and(|m| m.contains("not valid")));
    }

    #[test]
    fn luhn_accepts_the_test_cards_and_rejects_a_changed_digit() {
        assert!(luhn_valid("4242424242424242"));
        assert!(luhn_valid("4000000000000002"));
        assert!(luhn_valid("4000000000000119"));
        assert!(!luhn_valid("4242424242424241"));
        assert!(!luhn_valid(""));
    }

    #[test]
    fn expiry_dates_take_two_or_four_digit_years() {
        assert_eq!(parse_expiry("07/29"), Some((2029, 7)));
        assert_eq!(parse_expiry(" 7 / 2031 "), Some((2031, 7)));
        assert_eq!(parse_expiry("13/29"), None);
        assert_eq!(parse_expiry("0729"), None);
        assert_eq!(parse_expiry("07/299"), None);
    }

    #[test]
    fn the_form_shown_again_forgets_the_card() {
        let shown = good_form().without_card();
        assert!(shown.card_number.is_empty() && shown.cvc.is_empty());
        assert_eq!(shown.email, "ada@example.com");
    }
}
