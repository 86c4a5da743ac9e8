//! Who holds a stock reservation on a product (`reservations.cart_id`): a cart, or a cancelled
//! order whose units are on their way back on sale.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{CartId, OrderNumber};

/// A reservation's holder. Stored as the one string it always was: the cart's id, or
/// `cancelled:<order number>`; cart ids cannot contain a colon, so the two never collide.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StockHolder {
    Cart(CartId),
    /// The units of a cancelled order, held while they move from sold back to on sale.
    Cancelled(OrderNumber),
}

const CANCELLED: &str = "cancelled:";

impl StockHolder {
    /// The string stored in `reservations.cart_id`.
    pub fn stored(&self) -> String {
        self.to_string()
    }

    /// The holder a stored `reservations.cart_id` names. Total: every string is one or the other,
    /// so no product document becomes unreadable over a reservation.
    pub fn from_stored(stored: String) -> StockHolder {
        match stored.strip_prefix(CANCELLED) {
            Some(number) => StockHolder::Cancelled(OrderNumber::from_stored(number.to_string())),
            None => StockHolder::Cart(CartId::from_stored(stored)),
        }
    }

    /// The cart, when a cart holds the reservation.
    pub fn cart(&self) -> Option<&CartId> {
        match self {
            StockHolder::Cart(id) => Some(id),
            StockHolder::Cancelled(_) => None,
        }
    }
}

impl From<&CartId> for StockHolder {
    fn from(id: &CartId) -> StockHolder {
        StockHolder::Cart(id.clone())
    }
}

impl fmt::Display for StockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StockHolder::Cart(id) => f.write_str(id.as_str()),
            StockHolder::Cancelled(number) => write!(f, "{CANCELLED}{number}"),
        }
    }
}

impl Serialize for StockHolder {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.stored())
    }
}

impl<'de> Deserialize<'de> for StockHolder {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<StockHolder, D::Error> {
        String::deserialize(deserializer).map(StockHolder::from_stored)
    }
}

// `&StockHolder` converts too, through bson's blanket `From<&T>`.
impl From<StockHolder> for bson::Bson {
    fn from(holder: StockHolder) -> bson::Bson {
        bson::Bson::String(holder.stored())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_are_stored_as_the_strings_they_always_were() {
        let cart = StockHolder::Cart(CartId::parse("0f3a").unwrap());
        let order = StockHolder::Cancelled(OrderNumber::from_sequence(12));
        assert_eq!(
            bson::to_bson(&cart).unwrap(),
            bson::Bson::String("0f3a".into())
        );
        assert_eq!(
            bson::Bson::from(&order),
            bson::Bson::String("cancelled:BZ-000012".into())
        );
    }

    #[test]
    fn stored_strings_read_back_as_the_holder_they_name() {
        let read: StockHolder =
            bson::from_bson(bson::Bson::String("cancelled:BZ-000012".into())).unwrap();
        assert_eq!(read, StockHolder::Cancelled(OrderNumber::from_sequence(12)));
        let read: StockHolder = bson::from_bson(bson::Bson::String("lost-cart".into())).unwrap();
        assert_eq!(read.cart().map(CartId::as_str), Some("lost-cart"));
    }
}
