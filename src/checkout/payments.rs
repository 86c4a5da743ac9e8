//! The `payments` collection: one document per cart being paid for, keyed by the idempotency key
//! the gateway charges it under (the cart id). It is written, journaled, *before* the card is
//! charged (`started`), so after a crash the shop knows which charges it may have made and can ask
//! the gateway about each; then `charged` with the gateway's reference, then `ordered` with the
//! order number. A declined card ends it as `declined`; recovery ends an attempt the gateway never
//! charged as `not_charged`, and one whose order was lost as `refunded`.
//!
//! Only `started` is journaled on its own: the later states are written fast because recovery
//! works each of them out again from the gateway and the orders (and the order insert that
//! follows `charged` is journaled, which takes every earlier write with it).

use bson::{doc, DateTime, Document};
use futures::TryStreamExt;
use mongodb::IndexModel;
use serde::{Deserialize, Serialize};

use crate::cart::Cart;
use crate::checkout::gateway::Charge;
use crate::checkout::orders::{Address, Payment};
use crate::checkout::ValidCheckout;
use crate::db::{Db, DbError};
use crate::domain::{CartId, Money};

pub const COLLECTION: &str = "payments";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaymentState {
    /// About to charge, or charging: the gateway may or may not have taken the money.
    Started,
    /// The gateway took the money; the order is being recorded.
    Charged,
    /// The order is recorded (`order` names it).
    Ordered,
    /// The gateway refused the card.
    Declined,
    /// Recovery found the gateway never charged this attempt.
    NotCharged,
    /// Recovery gave the money back: the order could not be finished.
    Refunded,
}

impl PaymentState {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            PaymentState::Started => "started",
            PaymentState::Charged => "charged",
            PaymentState::Ordered => "ordered",
            PaymentState::Declined => "declined",
            PaymentState::NotCharged => "not_charged",
            PaymentState::Refunded => "refunded",
        }
    }

    /// Money may have been taken without an order to show for it yet.
    pub fn is_unfinished(&self) -> bool {
        matches!(self, PaymentState::Started | PaymentState::Charged)
    }
}

/// One payment attempt with everything needed to finish its order without the shopper: the
/// contact details and address from the checkout form and the card's last four digits (never
/// the card number).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaymentRecord {
    /// The gateway's idempotency key: the cart id.
    #[serde(rename = "_id")]
    pub(crate) key: String,
    pub(crate) cart_id: CartId,
    pub state: PaymentState,
    pub(crate) gateway: String,
    /// As charged.
    pub amount: Money,
    pub last4: String,
    pub(crate) email: String,
    pub(crate) name: String,
    pub(crate) address: Address,
    pub started: DateTime,
    pub updated: DateTime,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The order number, once ordered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    /// Which instance's recovery is settling this attempt, until when (see [`claim`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) claimed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) claimed_until: Option<DateTime>,
}

impl PaymentRecord {
    /// A `started` attempt to pay for `cart` (as locked) with `details`, stamped `now` (the
    /// site clock, which the recovery job's cut-offs read too).
    pub fn started(
        cart: &Cart,
        gateway: &str,
        details: &ValidCheckout,
        now: DateTime,
    ) -> PaymentRecord {
        PaymentRecord {
            key: cart.id.to_string(),
            cart_id: cart.id.clone(),
            state: PaymentState::Started,
            gateway: gateway.to_string(),
            amount: cart.total_amount(),
            last4: details.card.last4(),
            email: details.email.clone(),
            name: details.name.clone(),
            address: details.address.clone(),
            started: now,
            updated: now,
            reference: None,
            order: None,
            claimed_by: None,
            claimed_until: None,
        }
    }

    /// What the order records about the payment, once `charge` went through.
    pub(crate) fn payment(&self, charge: &Charge) -> Payment {
        Payment {
            gateway: self.gateway.clone(),
            reference: charge.reference.clone(),
            last4: charge.last4.clone(),
        }
    }
}

/// Recovery finds unfinished attempts by state and age.
pub fn indexes() -> Vec<IndexModel> {
    vec![IndexModel::builder()
        .keys(doc! { "state": 1, "updated": 1 })
        .build()]
}

pub fn collection(db: &Db) -> mongodb::Collection<PaymentRecord> {
    db.collection(COLLECTION)
}

/// Record the attempt, journaled, before the card is charged. A retry of the same cart (after a
/// decline, or a cart handed back) starts its attempt afresh under the same key.
pub async fn start(db: &Db, record: &PaymentRecord) -> Result<(), DbError> {
    db.durable::<PaymentRecord>(COLLECTION)
        .replace_one(doc! { "_id": &record.key }, record)
        .upsert(true)
        .await?;
    Ok(())
}

/// Move the attempt `key` from one of `from` to `to`, setting `extra` fields too. False when it
/// was in none of `from` (already moved on).
pub(crate) async fn advance(
    db: &Db,
    key: &str,
    from: &[PaymentState],
    to: PaymentState,
    mut extra: Document,
) -> Result<bool, DbError> {
    let from: Vec<&str> = from.iter().map(PaymentState::as_str).collect();
    extra.insert("state", to.as_str());
    extra.insert("updated", db.now());
    let result = collection(db)
        .update_one(
            doc! { "_id": key, "state": { "$in": from } },
            doc! { "$set": extra },
        )
        .await?;
    Ok(result.modified_count == 1)
}

/// Claim the unfinished attempt `key` for `owner` for `claim_for`, before recovery asks the
/// gateway anything about it or refunds it: one conditional update, so of several instances
/// whose recovery runs find the same attempt, exactly one settles it. Succeeds when the attempt
/// is still unfinished and unclaimed, its claim ran out (the instance that held it died), or
/// `owner` holds it already. `None`: another instance is settling it, or it moved on.
pub async fn claim(
    db: &Db,
    key: &str,
    owner: &str,
    claim_for: std::time::Duration,
) -> Result<Option<PaymentRecord>, DbError> {
    let now = db.now();
    let until = DateTime::from_millis(
        now.timestamp_millis()
            .saturating_add(i64::try_from(claim_for.as_millis()).unwrap_or(i64::MAX / 2)),
    );
    let unfinished = [
        PaymentState::Started.as_str(),
        PaymentState::Charged.as_str(),
    ];
    Ok(collection(db)
        .find_one_and_update(
            doc! {
                "_id": key,
                "state": { "$in": unfinished.as_slice() },
                "$or": [
                    { "claimed_until": { "$exists": false } },
                    { "claimed_until": { "$lte": now } },
                    { "claimed_by": owner },
                ],
            },
            doc! { "$set": { "claimed_by": owner, "claimed_until": until } },
        )
        .return_document(mongodb::options::ReturnDocument::After)
        .write_concern(db.journaled_write_concern())
        .await?)
}

pub async fn by_key(db: &Db, key: &str) -> Result<Option<PaymentRecord>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": key }).await?)
}

/// The filter of [`unfinished_before`], for `explain` in tests.
pub fn unfinished_query(before: DateTime) -> Document {
    doc! {
        "state": { "$in": [PaymentState::Started.as_str(), PaymentState::Charged.as_str()] },
        "updated": { "$lt": before },
    }
}

/// The filter of [`bound_future_stamps`], for `explain` in tests: unfinished attempts last
/// touched after `limit`.
pub fn touched_after_query(limit: DateTime) -> Document {
    doc! {
        "state": { "$in": [PaymentState::Started.as_str(), PaymentState::Charged.as_str()] },
        "updated": { "$gt": limit },
    }
}

/// Give every unfinished attempt last touched after `limit` the stamp `now` (see
/// `jobs::bound_future_stamps`), so recovery's "interrupted this long ago" counts from now
/// rather than from a time the clock has not reached again. Returns how many changed.
pub(crate) async fn bound_future_stamps(
    db: &Db,
    limit: DateTime,
    now: DateTime,
) -> Result<u64, DbError> {
    let changed = collection(db)
        .update_many(
            touched_after_query(limit),
            doc! { "$set": { "updated": now } },
        )
        .await?;
    Ok(changed.modified_count)
}

/// Attempts started or charged but not ordered, last touched before `before`.
pub(crate) async fn unfinished_before(
    db: &Db,
    before: DateTime,
) -> Result<Vec<PaymentRecord>, DbError> {
    Ok(collection(db)
        .find(unfinished_query(before))
        .await?
        .try_collect()
        .await?)
}
