//! Money: an amount in minor units (cents), and the one place it is parsed from a form and shown
//! to people. Showing it takes the [`Currency`] explicitly, so no page or email can fall back to
//! a symbol nobody chose.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Sub};

use serde::{Deserialize, Serialize};

/// An amount in cents. Stored as the bare `i64` it always was (`#[serde(transparent)]`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Money(i64);

/// Why a price typed into a form is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("a price is digits with at most two after the point, e.g. 12.99")]
    Malformed,
    #[error("the price is too large")]
    TooLarge,
}

impl Money {
    pub const ZERO: Money = Money(0);
    /// The largest amount a form accepts (a billion in the shop's currency): large enough for
    /// any price, small enough that a line of the most units a cart holds, and an order of many
    /// such lines, stay far inside `i64`.
    pub const MAX_TYPED: Money = Money(100_000_000_000);

    pub const fn from_cents(cents: i64) -> Money {
        Money(cents)
    }

    pub const fn cents(self) -> i64 {
        self.0
    }

    /// A price as people type it: `12`, `12.5`, `12.99`, `.5`, with an optional leading `$`
    /// and surrounding spaces. Never negative; more than two decimals is refused rather than
    /// rounded, so what is stored is what was typed.
    pub fn parse(text: &str) -> Result<Money, MoneyError> {
        let s = text.trim().trim_start_matches('$');
        let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
        let digits = |part: &str| part.chars().all(|c| c.is_ascii_digit());
        if (whole.is_empty() && frac.is_empty())
            || frac.len() > 2
            || !digits(whole)
            || !digits(frac)
        {
            return Err(MoneyError::Malformed);
        }
        let whole: i64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| MoneyError::TooLarge)?
        };
        let frac: i64 = match frac.len() {
            0 => 0,
            1 => frac.parse::<i64>().map_err(|_| MoneyError::Malformed)? * 10,
            _ => frac.parse().map_err(|_| MoneyError::Malformed)?,
        };
        whole
            .checked_mul(100)
            .and_then(|c| c.checked_add(frac))
            .filter(|&cents| cents <= Money::MAX_TYPED.0)
            .map(Money)
            .ok_or(MoneyError::TooLarge)
    }

    /// As the shop shows money: `$12.99`, `-$2.50`, with `currency`'s symbol.
    pub fn display(self, currency: &Currency) -> String {
        let sign = if self.0 < 0 { "-" } else { "" };
        // One string, not the amount's own and then this one (a listing page shows 48 prices).
        let cents = self.0.unsigned_abs();
        format!(
            "{sign}{}{}.{:02}",
            currency.symbol,
            cents / 100,
            cents % 100
        )
    }

    /// The amount without a symbol, always with two decimals: `12.99`, `12.00` (what a price
    /// field is filled with, and schema.org's `price`).
    pub fn amount(self) -> String {
        let sign = if self.0 < 0 { "-" } else { "" };
        format!("{sign}{}", self.amount_of(self.0.unsigned_abs()))
    }

    /// The amount as short as it reads back the same: `12` for whole units, else `12.50` (the
    /// listing's price filter in a URL).
    pub fn short_amount(self) -> String {
        if self.0 % 100 == 0 {
            (self.0 / 100).to_string()
        } else {
            self.amount()
        }
    }

    /// The price of `qty` units.
    pub fn times(self, qty: i64) -> Money {
        Money(self.0.saturating_mul(qty))
    }

    fn amount_of(self, cents: u64) -> String {
        format!("{}.{:02}", cents / 100, cents % 100)
    }
}

impl Add for Money {
    type Output = Money;
    fn add(self, other: Money) -> Money {
        Money(self.0.saturating_add(other.0))
    }
}

impl AddAssign for Money {
    fn add_assign(&mut self, other: Money) {
        self.0 = self.0.saturating_add(other.0);
    }
}

impl Sub for Money {
    type Output = Money;
    fn sub(self, other: Money) -> Money {
        Money(self.0.saturating_sub(other.0))
    }
}

impl Sum for Money {
    fn sum<I: Iterator<Item = Money>>(iter: I) -> Money {
        iter.fold(Money::ZERO, Add::add)
    }
}

impl From<Money> for bson::Bson {
    fn from(money: Money) -> bson::Bson {
        bson::Bson::Int64(money.0)
    }
}

/// The currency money is shown in: the symbol written before the amount and the ISO 4217 code
/// (schema.org's `priceCurrency`). The shop has one, chosen in Admin → Settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Currency {
    symbol: String,
    code: String,
}

impl Currency {
    pub fn new(symbol: impl Into<String>, code: impl Into<String>) -> Currency {
        Currency {
            symbol: symbol.into(),
            code: code.into(),
        }
    }

    pub fn symbol(&self) -> &str {
        &self.symbol
    }

    pub fn code(&self) -> &str {
        &self.code
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dollars() -> Currency {
        Currency::new("$", "USD")
    }

    #[test]
    fn money_is_shown_with_the_symbol_of_the_currency_given() {
        assert_eq!(Money::from_cents(1299).display(&dollars()), "$12.99");
        assert_eq!(Money::from_cents(5).display(&dollars()), "$0.05");
        assert_eq!(Money::from_cents(-250).display(&dollars()), "-$2.50");
        assert_eq!(
            Money::from_cents(1299).display(&Currency::new("€", "EUR")),
            "€12.99"
        );
    }

    #[test]
    fn amounts_for_forms_have_two_decimals_and_short_amounts_drop_zero_cents() {
        assert_eq!(Money::from_cents(1200).amount(), "12.00");
        assert_eq!(Money::from_cents(1250).amount(), "12.50");
        assert_eq!(Money::from_cents(1200).short_amount(), "12");
        assert_eq!(Money::from_cents(1250).short_amount(), "12.50");
        assert_eq!(Money::from_cents(7).short_amount(), "0.07");
    }

    #[test]
    fn prices_are_read_as_typed_with_at_most_two_decimals() {
        assert_eq!(Money::parse("12"), Ok(Money::from_cents(1200)));
        assert_eq!(Money::parse(" $12.5 "), Ok(Money::from_cents(1250)));
        assert_eq!(Money::parse("0.99"), Ok(Money::from_cents(99)));
        assert_eq!(Money::parse(".5"), Ok(Money::from_cents(50)));
        assert_eq!(Money::parse("abc"), Err(MoneyError::Malformed));
        assert_eq!(Money::parse("1.234"), Err(MoneyError::Malformed));
        assert_eq!(Money::parse("-1"), Err(MoneyError::Malformed));
        assert_eq!(Money::parse(""), Err(MoneyError::Malformed));
        assert_eq!(Money::parse("."), Err(MoneyError::Malformed));
    }

    #[test]
    fn a_price_too_large_for_cents_is_refused_not_wrapped() {
        assert_eq!(
            Money::parse("92233720368547758.08"),
            Err(MoneyError::TooLarge)
        );
        assert_eq!(
            Money::parse("99999999999999999999"),
            Err(MoneyError::TooLarge)
        );
        assert_eq!(Money::parse("1000000000"), Ok(Money::MAX_TYPED));
        assert_eq!(Money::parse("1000000000.01"), Err(MoneyError::TooLarge));
    }

    #[test]
    fn sums_and_line_totals_saturate_instead_of_wrapping_or_panicking() {
        let huge = Money::from_cents(i64::MAX - 1);
        assert_eq!(huge.times(99), Money::from_cents(i64::MAX));
        assert_eq!(huge + huge, Money::from_cents(i64::MAX));
        assert_eq!(Money::MAX_TYPED.times(99).cents(), 9_900_000_000_000);
    }

    #[test]
    fn money_adds_up_and_multiplies_by_quantities() {
        let total: Money = [Money::from_cents(100), Money::from_cents(250)]
            .into_iter()
            .sum();
        assert_eq!(total, Money::from_cents(350));
        assert_eq!(Money::from_cents(250).times(3), Money::from_cents(750));
        assert_eq!(total - Money::from_cents(50), Money::from_cents(300));
    }

    #[test]
    fn money_is_stored_as_a_bare_integer() {
        let stored = bson::to_bson(&Money::from_cents(1299)).unwrap();
        assert_eq!(stored, bson::Bson::Int64(1299));
        let read: Money = bson::from_bson(bson::Bson::Int64(1299)).unwrap();
        assert_eq!(read, Money::from_cents(1299));
        // Documents written by hand (or by older code) may hold an int32.
        let read: Money = bson::from_bson(bson::Bson::Int32(5)).unwrap();
        assert_eq!(read, Money::from_cents(5));
    }
}
