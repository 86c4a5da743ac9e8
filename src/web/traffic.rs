//! Commerce events a page reports to the traffic log: a handler that shows a product, adds to a
//! cart, opens the checkout, places an order or answers a search puts a [`CommerceEvent`] in its
//! response's extensions ([`tag`]), and the analytics middleware, which wraps every page, logs it
//! with the request's own facts (time, path, referrer, device). It lives here, below every area,
//! so the areas that tag (catalog, cart, checkout, search) need not know the analytics area above
//! them.

use actix_web::HttpResponse;

/// The longest search query logged, in characters (longer ones are cut).
pub(crate) const MAX_QUERY_CHARS: usize = 100;

/// What a response did, for the shop's funnel and search reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommerceEvent {
    /// A product page was shown.
    ProductViewed { sku: String },
    /// Units of a product went into a cart.
    AddedToCart { sku: String, qty: i64 },
    /// The checkout form was shown for a cart ready to pay.
    CheckoutStarted,
    /// An order was paid.
    OrderPlaced { total_cents: i64 },
    /// A site search was answered: its (cleaned) query and how many results it found.
    Searched { query: String, results: u32 },
}

impl CommerceEvent {
    /// The event's `kind` as stored.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            CommerceEvent::ProductViewed { .. } => "product_viewed",
            CommerceEvent::AddedToCart { .. } => "added_to_cart",
            CommerceEvent::CheckoutStarted => "checkout_started",
            CommerceEvent::OrderPlaced { .. } => "order_placed",
            CommerceEvent::Searched { .. } => "search",
        }
    }
}

/// `response` with `event` attached for the traffic log.
pub(crate) fn tag(mut response: HttpResponse, event: CommerceEvent) -> HttpResponse {
    response.extensions_mut().insert(event);
    response
}
