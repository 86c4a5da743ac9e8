//! The shop's domain values: email addresses, money, SKUs, slugs, cart ids, order numbers, stock holders and the
//! edit-conflict token. Each is built only through `parse` (or `TryFrom<&str>`), so a value of
//! one of these types has passed its rules once, where it came in, and the compiler keeps the
//! two ids of a call from being swapped.
//!
//! The kernel of the layer map: it uses nothing else in the crate. Every type stores itself
//! through serde exactly as the bare `String`/`i64`/`ObjectId` it replaces did, so documents
//! written before these types existed read back unchanged (tests/domain.rs).

mod edit_version;
pub mod email;
mod ids;
mod money;
mod stock_holder;
mod time_zone;

pub use edit_version::EditVersion;
pub use email::{EmailAddress, EmailError};
pub use ids::{slugify, slugify_within, CartId, IdError, OrderNumber, Sku, Slug};
pub use money::{Currency, Money, MoneyError};
pub use stock_holder::StockHolder;
pub use time_zone::{TimeZone, UnknownTimeZone};
