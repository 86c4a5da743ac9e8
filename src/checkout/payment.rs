//! Payment gateways: a trait the checkout charges through, and the built-in `test` gateway with
//! the usual test card numbers. Card numbers are never stored; orders keep the last four digits
//! and the gateway's reference.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::future::BoxFuture;

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
    pub fn last4(&self) -> String {
        let n = self.number.len();
        self.number[n.saturating_sub(4)..].to_string()
    }
}

/// One charge. The idempotency key (the cart id) makes a retried charge return the first
/// result instead of charging twice, as real gateways do.
#[derive(Debug, Clone)]
pub struct ChargeRequest {
    pub idempotency_key: String,
    pub amount_cents: i64,
    pub card: Card,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    /// The gateway's id for the charge.
    pub reference: String,
    pub last4: String,
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
}

/// The built-in gateway for development and tests: approves 4242 4242 4242 4242, declines
/// 4000 0000 0000 0002 (insufficient funds) and 4000 0000 0000 0119 (processing error), and
/// declines every other number as a real test gateway would. Charges are kept in memory.
#[derive(Default)]
pub struct TestGateway {
    charges: Mutex<HashMap<String, Charge>>,
}

pub const APPROVED_CARD: &str = "4242424242424242";
pub const INSUFFICIENT_FUNDS_CARD: &str = "4000000000000002";
pub const PROCESSING_ERROR_CARD: &str = "4000000000000119";

impl TestGateway {
    /// How many distinct charges were made (a retried charge with the same key counts once).
    pub fn charge_count(&self) -> usize {
        self.charges.lock().map(|c| c.len()).unwrap_or(0)
    }

    fn decide(&self, request: &ChargeRequest) -> Result<Charge, PaymentError> {
        match request.card.number.as_str() {
            APPROVED_CARD => {}
            INSUFFICIENT_FUNDS_CARD => {
                return Err(PaymentError::Declined(
                    "Your card was declined: insufficient funds.".to_string(),
                ))
            }
            PROCESSING_ERROR_CARD => {
                return Err(PaymentError::Declined(
                    "Your card could not be charged: a processing error occurred. Please try \
                     again."
                        .to_string(),
                ))
            }
            _ => {
                return Err(PaymentError::Declined(
                    "Your card was declined (the test gateway only accepts its test cards)."
                        .to_string(),
                ))
            }
        }
        let mut charges = self
            .charges
            .lock()
            .map_err(|_| PaymentError::Unavailable("the test gateway failed".to_string()))?;
        let next = charges.len() + 1;
        let charge = charges
            .entry(request.idempotency_key.clone())
            .or_insert_with(|| Charge {
                reference: format!("test_ch_{next:06}"),
                last4: request.card.last4(),
            });
        Ok(charge.clone())
    }
}

impl PaymentGateway for TestGateway {
    fn name(&self) -> &'static str {
        "test"
    }

    fn charge(&self, request: ChargeRequest) -> BoxFuture<'_, Result<Charge, PaymentError>> {
        let decision = self.decide(&request);
        Box::pin(async move { decision })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(number: &str, key: &str) -> ChargeRequest {
        ChargeRequest {
            idempotency_key: key.to_string(),
            amount_cents: 1000,
            card: Card {
                number: number.to_string(),
                exp_month: 12,
                exp_year: 2099,
                cvc: "123".to_string(),
            },
            description: "test".to_string(),
        }
    }

    #[tokio::test]
    async fn the_test_cards_approve_and_decline_as_documented() {
        let gateway = TestGateway::default();
        let ok = gateway.charge(request(APPROVED_CARD, "a")).await;
        assert_eq!(ok.map(|c| c.last4), Ok("4242".to_string()));
        let funds = gateway.charge(request(INSUFFICIENT_FUNDS_CARD, "b")).await;
        assert!(matches!(funds, Err(PaymentError::Declined(m)) if m.contains("insufficient")));
        let processing = gateway.charge(request(PROCESSING_ERROR_CARD, "c")).await;
        assert!(matches!(processing, Err(PaymentError::Declined(m)) if m.contains("processing")));
        assert_eq!(gateway.charge_count(), 1);
    }

    #[tokio::test]
    async fn a_retried_charge_with_the_same_key_is_charged_once() {
        let gateway = TestGateway::default();
        let first = gateway.charge(request(APPROVED_CARD, "cart-1")).await;
        let again = gateway.charge(request(APPROVED_CARD, "cart-1")).await;
        assert_eq!(first, again);
        assert_eq!(gateway.charge_count(), 1);
    }

    #[test]
    fn a_card_never_prints_its_number() {
        let card = request(APPROVED_CARD, "k").card;
        let shown = format!("{card:?}");
        assert!(!shown.contains("42424242"), "{shown}");
        assert!(shown.contains("4242"));
    }
}
