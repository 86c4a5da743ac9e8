//! The cart pages: `/cart` with its lines, totals and notices, and the forms that add, change
//! and remove lines (each redirects back to `/cart` with a flash message).

use actix_session::Session;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

use crate::cart::{self, price_changed_notice, reserve, store, Cart, CartError, CartStatus};
use crate::catalog::products;
use crate::db::Db;
use crate::domain::{CartId, Sku};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::rate_limit::RateLimiter;
use crate::web::see_other;
use crate::web::traffic::{self, CommerceEvent};

/// A refused cart change is shown to the shopper as a conflict; a database failure as its page.
impl From<CartError> for AppError {
    fn from(e: CartError) -> Self {
        match e {
            CartError::Db(d) => d.into(),
            other => AppError::Conflict(other.to_string()),
        }
    }
}

/// Shown once when a shopper comes back to a cart the expiry job emptied.
pub(crate) const EXPIRED_NOTICE: &str =
    "Your cart expired after a while without changes, and its items were returned to the shelves.";

/// A cart line with what the shop knows about it now.
pub(crate) struct LineView {
    pub(crate) line: cart::CartLine,
    /// Units still available to add (not counting this cart's own).
    pub(crate) available: i64,
    /// The product's first photo, for the thumbnail.
    pub(crate) cover: Option<bson::oid::ObjectId>,
    /// Whether the cart can still change (stock notes only matter then).
    pub(crate) editable: bool,
}

impl LineView {
    pub(crate) fn few_left(&self) -> bool {
        products::is_low_stock(self.available)
    }

    /// The low-stock note shown on the line itself (not as a banner above the cart).
    pub(crate) fn stock_note(&self) -> Option<String> {
        if !self.editable || !self.few_left() {
            return None;
        }
        Some(if self.available == 0 {
            "You have the last ones: no more are left.".to_string()
        } else {
            format!("Only {} more left.", self.available)
        })
    }

    /// The product's page (its slug percent-encoded).
    pub(crate) fn product_url(&self) -> String {
        crate::catalog::model::url_of(&self.line.details.slug)
    }

    /// URL of the thumbnail, if the product has a photo.
    pub(crate) fn thumbnail_url(&self) -> Option<String> {
        self.cover.map(|id| format!("/media/{}/thumb", id.to_hex()))
    }

    /// The most the quantity box may ask for.
    pub(crate) fn max_qty(&self) -> i64 {
        (self.line.qty + self.available).clamp(1, cart::MAX_LINE_QTY)
    }
}

#[derive(Template)]
#[template(path = "cart/cart.html")]
pub(crate) struct CartPage {
    pub(crate) layout: Layout,
    pub(crate) cart: Option<Cart>,
    pub(crate) lines: Vec<LineView>,
    pub(crate) notices: Vec<String>,
}

impl CartPage {
    pub(crate) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub(crate) fn checking_out(&self) -> bool {
        matches!(&self.cart, Some(c) if c.status == CartStatus::Pending)
    }
}

/// The visitor's cart as the page should see it. A cart that completed is forgotten; one that
/// expired is forgotten with a notice.
async fn current_cart(
    db: &Db,
    session: &Session,
    notices: &mut Vec<String>,
) -> Result<Option<Cart>, AppError> {
    let Some(id) = cart::session_cart_id(session) else {
        return Ok(None);
    };
    match cart::by_id(db, &id).await? {
        Some(c) if matches!(c.status, CartStatus::Active | CartStatus::Pending) => Ok(Some(c)),
        Some(c) => {
            if c.status.has_expired() {
                notices.push(EXPIRED_NOTICE.to_string());
            }
            cart::forget_in_session(session);
            Ok(None)
        }
        None => {
            cart::forget_in_session(session);
            Ok(None)
        }
    }
}

/// Take over prices that changed since the lines were added (telling the shopper), and note
/// what is still available of each product.
async fn review_lines(
    db: &Db,
    cart: &mut Cart,
    notices: &mut Vec<String>,
) -> Result<Vec<LineView>, AppError> {
    let skus: Vec<&Sku> = cart.items.iter().map(|l| &l.sku).collect();
    let now_on_sale = products::sale_states(db, &skus).await?;
    let mut views = Vec::with_capacity(cart.items.len());
    for line in &mut cart.items {
        let product = now_on_sale.get(&line.sku);
        let available = product.map_or(0, |p| p.qty.max(0));
        if let Some(p) = product {
            if p.retail != line.details.price && cart.status == CartStatus::Active {
                let taken = store::take_over_price(
                    db,
                    &cart.id,
                    CartStatus::Active,
                    &line.sku,
                    line.details.price,
                    p.retail,
                )
                .await?;
                if taken {
                    notices.push(price_changed_notice(
                        &line.details.title,
                        line.details.price,
                        p.retail,
                        &crate::db::site::currency(),
                    ));
                    line.details.price = p.retail;
                }
            }
        }
        views.push(LineView {
            line: line.clone(),
            available,
            cover: product.and_then(|p| p.cover),
            editable: cart.status == CartStatus::Active,
        });
    }
    Ok(views)
}

/// `GET /cart`. The one write a visit makes, on purpose: lines take over prices that changed
/// since they were added ([`store::take_over_price`]), so the page shows what checkout will
/// charge and tells the shopper once.
pub(crate) async fn show(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let mut notices = Vec::new();
    let mut cart = current_cart(&state.db, &session, &mut notices).await?;
    let lines = match cart.as_mut() {
        Some(c) => {
            let lines = review_lines(&state.db, c, &mut notices).await?;
            cart::remember_in_session(&session, c);
            lines
        }
        None => Vec::new(),
    };
    render(&CartPage {
        layout: Layout::public(&req),
        cart,
        lines,
        notices,
    })
}

/// The add-to-cart form on a product page.
#[derive(Deserialize)]
pub(crate) struct AddForm {
    #[serde(default)]
    sku: String,
    #[serde(default)]
    qty: String,
}

/// The quantity form of a cart line.
#[derive(Deserialize)]
pub(crate) struct QuantityForm {
    #[serde(default)]
    qty: String,
}

fn parse_qty(text: &str) -> Result<i64, CartError> {
    text.trim()
        .parse::<i64>()
        .map_err(|_| CartError::BadQuantity)
}

/// The visitor's active cart, if they have one (a finished one is noted and forgotten). A new
/// cart is only started by [`add_to_new_cart`], once there is a line to put in it.
async fn active_cart_for_adding(db: &Db, session: &Session) -> Result<Option<CartId>, AppError> {
    if let Some(id) = cart::session_cart_id(session) {
        match cart::by_id(db, &id).await? {
            Some(c) if c.status == CartStatus::Active => return Ok(Some(c.id)),
            Some(c) if c.status.has_expired() => flash::push(session, Level::Info, EXPIRED_NOTICE),
            _ => {}
        }
    }
    Ok(None)
}

/// New carts per client address (`cart.new_carts_per_hour`): the add handler's own limiter,
/// registered by start-up as app data and taken by [`add`].
#[derive(Debug)]
pub(crate) struct NewCartLimit(RateLimiter);

impl NewCartLimit {
    pub(crate) fn per_hour(carts: u32) -> NewCartLimit {
        NewCartLimit(RateLimiter::new(
            carts,
            std::time::Duration::from_secs(3600),
        ))
    }
}

/// Start a cart holding `qty` of `sku`: refused when this address started too many carts
/// lately, and deleted again if the line cannot be added, so a request that adds nothing leaves
/// no cart behind. Returns the cart's id with the outcome.
async fn add_to_new_cart(
    req: &HttpRequest,
    state: &AppState,
    new_carts: &NewCartLimit,
    session: &Session,
    sku: &Sku,
    qty: i64,
) -> Result<(Option<CartId>, Result<String, CartError>), AppError> {
    let db = &state.db;
    if !new_carts.0.allow(crate::web::client::client_ip(req)) {
        return Ok((None, Err(CartError::TooManyCarts)));
    }
    let fresh = cart::create(db).await?;
    let outcome = reserve::add_item_within(
        db,
        &fresh.id,
        sku,
        qty,
        cart::CartLimits::configured(&state.cart),
    )
    .await;
    if outcome.is_err() {
        store::delete_if_empty(db, &fresh.id).await?;
        return Ok((None, outcome));
    }
    cart::remember_in_session(session, &fresh);
    Ok((Some(fresh.id), outcome))
}

/// After a change: refresh the header count from the cart as stored.
async fn refresh_count(db: &Db, session: &Session, cart_id: &CartId) -> Result<(), AppError> {
    if let Some(c) = cart::by_id(db, cart_id).await? {
        cart::remember_in_session(session, &c);
    }
    Ok(())
}

/// Tell the shopper why a change did not happen; database failures become error pages.
fn report(session: &Session, error: CartError) -> Result<(), AppError> {
    match error {
        CartError::Db(e) => Err(e.into()),
        CartError::NotActive(Some(CartStatus::Pending)) => {
            flash::push(
                session,
                Level::Warning,
                "Your cart is being checked out and cannot be changed right now.",
            );
            Ok(())
        }
        other => {
            flash::push(session, Level::Error, capitalised(&other.to_string()));
            Ok(())
        }
    }
}

fn capitalised(message: &str) -> String {
    let mut chars = message.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `POST /cart/items`: add `qty` of `sku`.
pub(crate) async fn add(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
    new_carts: web::Data<NewCartLimit>,
    form: web::Form<AddForm>,
) -> Result<HttpResponse, AppError> {
    let db = &state.db;
    let qty = match parse_qty(&form.qty) {
        Ok(q) if (1..=cart::MAX_LINE_QTY).contains(&q) => q,
        _ => {
            flash::push(
                &session,
                Level::Error,
                format!(
                    "The quantity must be a whole number from 1 to {}.",
                    cart::MAX_LINE_QTY
                ),
            );
            return Ok(see_other(&back_to_product(db, &form.sku).await?));
        }
    };
    // An unknown SKU (or one no product could have) starts nothing.
    let sku = match Sku::parse(&form.sku) {
        Ok(sku)
            if products::for_cart(db, &sku)
                .await?
                .is_some_and(|p| p.is_on_sale()) =>
        {
            sku
        }
        _ => {
            flash::push(&session, Level::Error, "That product does not exist.");
            return Ok(see_other("/cart"));
        }
    };
    let limits = cart::CartLimits::configured(&state.cart);
    let (mut cart_id, mut outcome) = match active_cart_for_adding(db, &session).await? {
        Some(id) => {
            let outcome = reserve::add_item_within(db, &id, &sku, qty, limits).await;
            (Some(id), outcome)
        }
        None => add_to_new_cart(&req, &state, &new_carts, &session, &sku, qty).await?,
    };
    if let Err(CartError::NotActive(status)) = &outcome {
        // The cart expired (or went to checkout elsewhere) just now: carry on in a new one.
        if status.is_some_and(|s| s.has_expired()) {
            flash::push(&session, Level::Info, EXPIRED_NOTICE);
        }
        cart::forget_in_session(&session);
        (cart_id, outcome) = add_to_new_cart(&req, &state, &new_carts, &session, &sku, qty).await?;
    }
    match outcome {
        Ok(title) => {
            flash::push(&session, Level::Success, added_message(&title, qty));
            if let Some(id) = &cart_id {
                refresh_count(db, &session, id).await?;
            }
            let added = CommerceEvent::AddedToCart {
                sku: sku.to_string(),
                qty,
            };
            Ok(traffic::tag(see_other("/cart"), added))
        }
        Err(CartError::UnknownSku) => {
            flash::push(&session, Level::Error, "That product does not exist.");
            Ok(see_other("/cart"))
        }
        Err(e) => {
            report(&session, e)?;
            if let Some(id) = &cart_id {
                refresh_count(db, &session, id).await?;
            }
            Ok(see_other(&back_to_product(db, sku.as_str()).await?))
        }
    }
}

fn added_message(title: &str, qty: i64) -> String {
    if qty == 1 {
        format!("Added {title} to your cart.")
    } else {
        format!("Added {qty} × {title} to your cart.")
    }
}

/// Where to send a shopper whose add failed: back to the product, or the cart if it is unknown.
async fn back_to_product(db: &Db, sku: &str) -> Result<String, AppError> {
    let Ok(sku) = Sku::parse(sku) else {
        return Ok("/cart".to_string());
    };
    Ok(products::for_cart(db, &sku)
        .await?
        .map_or_else(|| "/cart".to_string(), |p| p.url()))
}

/// `POST /cart/items/{sku}`: set the line's quantity (0 removes it).
pub(crate) async fn change(
    session: Session,
    state: web::Data<AppState>,
    sku: web::Path<String>,
    form: web::Form<QuantityForm>,
) -> Result<HttpResponse, AppError> {
    let qty = parse_qty(&form.qty);
    update_line(
        &session,
        &state.db,
        &sku,
        qty,
        cart::CartLimits::configured(&state.cart),
    )
    .await
}

/// `POST /cart/items/{sku}/remove`
pub(crate) async fn remove(
    session: Session,
    state: web::Data<AppState>,
    sku: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    update_line(
        &session,
        &state.db,
        &sku,
        Ok(0),
        cart::CartLimits::configured(&state.cart),
    )
    .await
}

async fn update_line(
    session: &Session,
    db: &Db,
    sku: &str,
    qty: Result<i64, CartError>,
    limits: cart::CartLimits,
) -> Result<HttpResponse, AppError> {
    let Some(cart_id) = cart::session_cart_id(session) else {
        flash::push(session, Level::Info, "Your cart is empty.");
        return Ok(see_other("/cart"));
    };
    let outcome = match (qty, Sku::parse(sku)) {
        (Ok(q), Ok(sku)) => reserve::set_quantity_within(db, &cart_id, &sku, q, limits)
            .await
            .map(|()| q),
        (Err(e), _) => Err(e),
        // No line can hold a SKU no product could have.
        (Ok(_), Err(_)) => Err(CartError::NotInCart),
    };
    match outcome {
        Ok(0) => flash::push(session, Level::Success, "Removed from your cart."),
        Ok(_) => flash::push(session, Level::Success, "Cart updated."),
        // An expired cart is explained by the cart page itself.
        Err(CartError::NotActive(Some(s))) if s.has_expired() => {}
        Err(e) => report(session, e)?,
    }
    refresh_count(db, session, &cart_id).await?;
    Ok(see_other("/cart"))
}
