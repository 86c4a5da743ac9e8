//! Customer accounts: signing in by an emailed link or code (no passwords), the account pages
//! (orders, saved addresses, comment settings) and the checkout prefill. Guest checkout is
//! unchanged; an account owns the orders placed with its verified email (claimed when the
//! customer signs in or opens their account).
//!
//! Bottom first: `model` (the `accounts` collection), `tokens` (sign-in tokens), `limits`
//! (sign-in rate limits in the database), `email` (the sign-in message), `session` (who is
//! signed in), `privacy` (export, erasure, retention), then the pages: `sign_in`, `addresses`,
//! `pages`, `privacy_pages`, `comments` (the comments one wrote).

pub mod addresses;
pub mod comments;
pub mod email;
pub mod limits;
pub mod model;
pub mod pages;
pub mod privacy;
pub mod privacy_pages;
pub mod session;
pub mod sign_in;
pub mod tokens;

pub use model::{Account, SavedAddress};
