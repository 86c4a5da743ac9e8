//! Customer accounts: signing in by an emailed link or code (no passwords), the account pages
//! (orders, saved addresses, comment settings) and the checkout prefill. Guest checkout is
//! unchanged; an account owns the orders placed with its verified email (claimed when the
//! customer signs in or opens their account).
//!
//! Bottom first: `store` (the `accounts` collection), `tokens` (sign-in tokens), `limits`
//! (sign-in rate limits in the database), `email` (the sign-in message), `session` (who is
//! signed in), `privacy` (export, erasure, retention), then the pages: `sign_in`, `addresses`,
//! `pages`, `privacy_pages`, `comments` (the comments one wrote).

pub(crate) mod addresses;
pub(crate) mod comments;
pub(crate) mod email;
pub(crate) mod limits;
pub(crate) mod pages;
pub mod privacy;
pub(crate) mod privacy_pages;
pub(crate) mod session;
pub(crate) mod sign_in;
pub mod store;
pub(crate) mod tokens;

pub use store::{Account, SavedAddress};
