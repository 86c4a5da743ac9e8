//! Payment gateways: a trait the checkout charges through (and recovery asks and refunds
//! through), and the built-in `test` gateway with the usual test card numbers. Card numbers are
//! never stored; orders keep the last four digits and the gateway's reference.

use bson::oid::ObjectId;
use bson::{doc, DateTime};
use futures::future::BoxFuture;
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, IndexModel};
use serde::{Deserialize, Serialize};

use crate::db::Db;
use crate::domain::Money;

/// A card as entered, already validated (Luhn, expiry in the future, CVC digits).
#[derive(Clone)]
pub struct Card {
    /// Digits only.
    pub number: String,
    pub exp_month: u32,
    pub exp_year: i32,
    pub cvc: String,
}

impl std::fmt::Debug for Card {
    // Never print a card number or CVC, even in a debug log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Card")
            .field("last4", &self.last4())
            .finish_non_exhaustive()
    }
}

impl Card {
    pub(crate) fn last4(&self) -> String {
        let n = self.number.len();
        self.number[n.saturating_sub(4)..].to_string()
    }
}

/// One charge. The idempotency key (the cart id) makes a retried charge return the first
/// result instead of charging twice, as real gateways do.
#[derive(Debug, Clone)]
pub struct ChargeRequest {
    pub idempotency_key: String,
    pub amount: Money,
    pub card: Card,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    /// The gateway's id for the charge.
    pub reference: String,
    pub(crate) last4: String,
    pub amount: Money,
    /// Given back in full (see [`PaymentGateway::refund`]).
    pub refunded: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PaymentError {
    /// The card was refused; the reason is shown to the shopper.
    #[error("{0}")]
    Declined(String),
    /// The gateway could not be reached or failed; nothing was charged.
    #[error("the payment service is unavailable: {0}")]
    Unavailable(String),
}

pub trait PaymentGateway: Send + Sync {
    /// The name recorded on orders (`payment.gateway`).
    fn name(&self) -> &'static str;
    fn charge(&self, request: ChargeRequest) -> BoxFuture<'_, Result<Charge, PaymentError>>;
    /// The charge made under `idempotency_key`, refunded or not; `None` if the card was never
    /// charged under it. What recovery asks after a crash left a payment attempt unfinished.
    fn find_charge<'a>(
        &'a self,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Charge>, PaymentError>>;
    /// Give a charge back in full. `idempotency_key` names this refund, as real providers take
    /// one (Stripe's `Idempotency-Key`): a retried request with the same key refunds nothing
    /// more, and refunding a charge already given back changes nothing.
    fn refund<'a>(
        &'a self,
        reference: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<(), PaymentError>>;
}

/// Where the test gateway keeps its charges.
pub const TEST_GATEWAY_CHARGES: &str = "gateway_charges";

/// One charge as the test gateway keeps it, under its idempotency key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredCharge {
    #[serde(rename = "_id")]
    pub idempotency_key: String,
    pub reference: String,
    /// Stored as cents (`Money`'s BSON), as before it was typed.
    pub amount: Money,
    pub(crate) last4: String,
    pub(crate) created: DateTime,
    #[serde(default)]
    pub refunded: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) refunded_at: Option<DateTime>,
    /// Every refund request made for this charge, counted as it arrives (before the
    /// idempotency check): what tests compare with the charges that needed refunding, since a
    /// real provider would bill or flag each one.
    #[serde(default)]
    pub refund_requests: i64,
    /// The idempotency key of the refund that gave it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) refund_key: Option<String>,
}

impl StoredCharge {
    fn to_charge(&self) -> Charge {
        Charge {
            reference: self.reference.clone(),
            last4: self.last4.clone(),
            amount: self.amount,
            refunded: self.refunded,
        }
    }
}

/// The built-in gateway for development and tests: approves 4242 4242 4242 4242, declines
/// 4000 0000 0000 0002 (insufficient funds) and 4000 0000 0000 0119 (processing error), and
/// declines every other number as a real test gateway would.
///
/// It keeps its charges in the `gateway_charges` collection, as a payment provider keeps them
/// outside the shop, so after a crash the shop can ask it what was charged (and tests can check
/// every charge against the orders). Its writes follow `database.write_concern`: durable, it
/// never forgets a charge; fast, a crash may take its newest charges along with everything the
/// shop wrote after them (a real provider would remember them: fast mode accepts that risk).
pub struct TestGateway {
    db: Db,
}

pub(crate) const APPROVED_CARD: &str = "4242424242424242";
pub(crate) const INSUFFICIENT_FUNDS_CARD: &str = "4000000000000002";
pub(crate) const PROCESSING_ERROR_CARD: &str = "4000000000000119";

fn unavailable(e: impl std::fmt::Display) -> PaymentError {
    PaymentError::Unavailable(format!("the test gateway failed: {e}"))
}

impl TestGateway {
    pub fn new(db: Db) -> TestGateway {
        TestGateway { db }
    }

    /// Refunds look charges up by reference.
    pub fn indexes() -> Vec<IndexModel> {
        vec![IndexModel::builder()
            .keys(doc! { "reference": 1 })
            .options(IndexOptions::builder().unique(true).build())
            .build()]
    }

    fn charges(&self) -> Collection<StoredCharge> {
        self.db.durable(TEST_GATEWAY_CHARGES)
    }

    /// How many distinct charges were made (a retried charge with the same key counts once).
    pub async fn charge_count(&self) -> u64 {
        self.charges()
            .count_documents(doc! {})
            .await
            .expect("counting the test gateway's charges")
    }

    /// Every charge made, refunded or not.
    pub async fn all_charges(&self) -> Result<Vec<StoredCharge>, PaymentError> {
        self.charges()
            .find(doc! {})
            .await
            .map_err(unavailable)?
            .try_collect()
            .await
            .map_err(unavailable)
    }

    fn decide(request: &ChargeRequest) -> Result<(), PaymentError> {
        match request.card.number.as_str() {
            APPROVED_CARD => Ok(()),
            INSUFFICIENT_FUNDS_CARD => Err(PaymentError::Declined(
                "Your card was declined: insufficient funds.".to_string(),
            )),
            PROCESSING_ERROR_CARD => Err(PaymentError::Declined(
                "Your card could not be charged: a processing error occurred. Please try again."
                    .to_string(),
            )),
            _ => Err(PaymentError::Declined(
                "Your card was declined (the test gateway only accepts its test cards)."
                    .to_string(),
            )),
        }
    }

    /// Charge once per idempotency key: a second request with the key gets the first charge.
    async fn record(&self, request: ChargeRequest) -> Result<Charge, PaymentError> {
        Self::decide(&request)?;
        let charge = StoredCharge {
            idempotency_key: request.idempotency_key.clone(),
            reference: format!("test_ch_{}", ObjectId::new().to_hex()),
            amount: request.amount,
            last4: request.card.last4(),
            created: DateTime::now(),
            refunded: false,
            refunded_at: None,
            refund_requests: 0,
            refund_key: None,
        };
        match self.charges().insert_one(&charge).await {
            Ok(_) => Ok(charge.to_charge()),
            Err(e) if crate::db::is_duplicate_key(&e) => self
                .lookup(&request.idempotency_key)
                .await?
                .ok_or_else(|| unavailable(e)),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn lookup(&self, idempotency_key: &str) -> Result<Option<Charge>, PaymentError> {
        let found = self
            .charges()
            .find_one(doc! { "_id": idempotency_key })
            .await
            .map_err(unavailable)?;
        Ok(found.map(|c| c.to_charge()))
    }

    /// Count the request, then give the charge back unless it already was: the first refund
    /// records its key, a repeat (same key or another) changes nothing but the count.
    async fn give_back(&self, reference: &str, idempotency_key: &str) -> Result<(), PaymentError> {
        let counted = self
            .charges()
            .update_one(
                doc! { "reference": reference },
                doc! { "$inc": { "refund_requests": 1_i64 } },
            )
            .await
            .map_err(unavailable)?;
        if counted.matched_count == 0 {
            return Err(PaymentError::Declined(format!(
                "there is no charge {reference} to refund"
            )));
        }
        self.charges()
            .update_one(
                doc! { "reference": reference, "refunded": false },
                doc! { "$set": {
                    "refunded": true,
                    "refunded_at": DateTime::now(),
                    "refund_key": idempotency_key,
                } },
            )
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

impl PaymentGateway for TestGateway {
    fn name(&self) -> &'static str {
        "test"
    }

    fn charge(&self, request: ChargeRequest) -> BoxFuture<'_, Result<Charge, PaymentError>> {
        Box::pin(self.record(request))
    }

    fn find_charge<'a>(
        &'a self,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Charge>, PaymentError>> {
        Box::pin(self.lookup(idempotency_key))
    }

    fn refund<'a>(
        &'a self,
        reference: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<(), PaymentError>> {
        Box::pin(self.give_back(reference, idempotency_key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_never_prints_its_number() {
        let card = Card {
            number: APPROVED_CARD.to_string(),
            exp_month: 12,
            exp_year: 2099,
            cvc: "123".to_string(),
        };
        let shown = format!("{card:?}");
        assert!(!shown.contains("42424242"), "{shown}");
        assert!(shown.contains("4242"));
    }
}
