//! Middleware and cross-cutting web parts: sessions, CSRF, admin Basic auth, error pages,
//! security headers, flash messages, layout and static assets.

pub mod assets;
pub mod basic_auth;
pub mod csrf;
pub mod errors;
pub mod flash;
pub mod layout;
pub mod security_headers;
pub mod session;
