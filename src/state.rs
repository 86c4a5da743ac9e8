//! The state every request handler shares: the database, settings the handlers read, and the
//! long-lived helpers (payment gateway, rate limiters). Built once in [`crate::startup`].

use std::sync::Arc;

use crate::checkout::payment::PaymentGateway;
use crate::comments::rate_limit::CommentRateLimit;
use crate::config::{CartSettings, CommentSettings};
use crate::db::Db;

/// Shared by every handler.
pub struct AppState {
    pub db: Db,
    pub db_timeout_ms: u64,
    pub admin_user: String,
    /// `media.max_upload_mb`, in bytes.
    pub max_upload_bytes: usize,
    /// `media.max_image_megapixels`, in pixels.
    pub max_image_pixels: u64,
    /// Charges checkouts (`payment.gateway`).
    pub gateway: Arc<dyn PaymentGateway>,
    /// Cart expiry and cleanup timeouts (admin can run the jobs by hand).
    pub cart: CartSettings,
    /// New carts per client address (`cart.new_carts_per_hour`).
    pub new_carts: crate::web::rate_limit::RateLimiter,
    /// The site's absolute address without a trailing slash (`server.public_url`, else the
    /// bound address): feeds need absolute links.
    pub public_url: String,
    /// Comment length, page size and rate limit.
    pub comments: CommentSettings,
    /// Comments per client address per minute.
    pub comment_rate: CommentRateLimit,
    /// Order lookups (`/orders/lookup`) per client address.
    pub order_lookups: crate::web::rate_limit::RateLimiter,
    /// The site settings (name, currency, shipping rates) as last read, for every worker.
    pub site: crate::db::site::SettingsCache,
}
