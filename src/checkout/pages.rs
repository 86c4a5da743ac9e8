//! The checkout page (`GET`/`POST /checkout`) and the order confirmation (`/orders/{number}`),
//! which only the session that placed the order (and admins, under /admin) may see.

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::cart::{self, pages::EXPIRED_NOTICE, Cart, CartStatus};
use crate::checkout::gateway::PaymentGateway;
use crate::checkout::orders::{self, Order};
use crate::checkout::{self, CheckoutForm, CheckoutOutcome, FieldErrors};
use crate::domain::{CartId, OrderNumber};
use crate::state::AppState;
use crate::web::basic_auth::carries_admin_credentials;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, render, Layout};
use crate::web::see_other;
use crate::web::traffic::{self, CommerceEvent};

/// Orders this session placed, newest last; bounded so the cookie stays small.
const SESSION_ORDERS: &str = "orders";
const MAX_REMEMBERED_ORDERS: usize = 20;

#[derive(Template)]
#[template(path = "checkout/checkout.html")]
pub(crate) struct CheckoutPage {
    pub(crate) layout: Layout,
    pub(crate) cart: Cart,
    pub(crate) form: CheckoutForm,
    pub(crate) errors: FieldErrors,
    /// Why the last attempt did not go through (a decline), shown above the form.
    pub(crate) problem: Option<String>,
}

/// The form's fields in page order with their labels: the error summary lists problems in
/// the order the shopper meets the fields.
const FIELDS: [(&str, &str); 9] = [
    ("email", "Email"),
    ("name", "Full name"),
    ("street", "Street address"),
    ("city", "City"),
    ("postcode", "Postcode"),
    ("country", "Country"),
    ("card_number", "Card number"),
    ("expiry", "Expiry"),
    ("cvc", "Security code"),
];

/// One entry of the error summary: a link to the field and what is wrong with it.
pub(crate) struct SummaryEntry {
    pub(crate) field: &'static str,
    pub(crate) label: &'static str,
    pub(crate) message: String,
}

impl CheckoutPage {
    pub(crate) fn error(&self, field: &str) -> Option<&String> {
        self.errors.get(field)
    }

    /// The fields to correct, in page order, for the summary at the top of the form.
    pub(crate) fn error_summary(&self) -> Vec<SummaryEntry> {
        FIELDS
            .iter()
            .filter_map(|(field, label)| {
                self.errors.get(field).map(|message| SummaryEntry {
                    field,
                    label,
                    message: message.clone(),
                })
            })
            .collect()
    }

    /// The country list for the select.
    pub(crate) fn countries(&self) -> &'static [&'static str] {
        checkout::countries::COUNTRIES
    }

    /// Whether `country` is the one the form holds.
    pub(crate) fn is_country(&self, country: &&str) -> bool {
        self.form.country.trim().eq_ignore_ascii_case(country)
    }
}

#[derive(Template)]
#[template(path = "checkout/order.html")]
pub(crate) struct OrderPage {
    pub(crate) layout: Layout,
    pub(crate) order: Order,
}

/// Where the session's cart stands as checkout sees it.
enum CartState {
    /// Active with at least one line: ready to pay.
    Ready(Cart),
    /// Paid already.
    Ordered(Box<Order>),
    /// Locked by a checkout still charging (or one interrupted), identified by cart id.
    Busy(CartId),
    Expired,
    Empty,
}

async fn cart_state(state: &AppState, session: &Session) -> Result<CartState, AppError> {
    let cart = match cart::session_cart_id(session) {
        Some(id) => cart::by_id(&state.db, &id).await?,
        None => None,
    };
    Ok(match cart {
        Some(c) if c.status == CartStatus::Active && !c.items.is_empty() => CartState::Ready(c),
        Some(c) if matches!(c.status, CartStatus::Complete | CartStatus::Pending) => {
            match orders::by_cart(&state.db, &c.id).await? {
                Some(order) => CartState::Ordered(Box::new(order)),
                None => CartState::Busy(c.id),
            }
        }
        Some(c) if c.status.has_expired() => CartState::Expired,
        _ => CartState::Empty,
    })
}

/// Send a shopper whose cart cannot be paid now to the right place, with a notice.
fn elsewhere(session: &Session, state: CartState) -> HttpResponse {
    match state {
        CartState::Ordered(order) => placed(session, &order),
        CartState::Busy(_) => {
            flash::push(session, Level::Info, "Your payment is being processed.");
            see_other("/cart")
        }
        CartState::Expired => {
            cart::forget_in_session(session);
            flash::push(session, Level::Info, EXPIRED_NOTICE);
            see_other("/cart")
        }
        CartState::Ready(_) | CartState::Empty => {
            flash::push(
                session,
                Level::Info,
                "Your cart is empty: add something before checking out.",
            );
            see_other("/cart")
        }
    }
}

/// What the checkout form starts with for a visitor: a signed-in customer's email and default
/// address. The accounts area (above checkout) provides it; start-up registers it as app data
/// (`web::Data<dyn CheckoutPrefill>`), so checkout does not know about accounts.
pub(crate) trait CheckoutPrefill: Send + Sync {
    /// The form to start from, or `None` for the empty one. A failure to read is logged and
    /// treated as `None`: a guest's empty form is always a usable answer.
    fn prefill<'a>(
        &'a self,
        db: &'a crate::db::Db,
        session: &'a Session,
    ) -> futures::future::LocalBoxFuture<'a, Option<CheckoutForm>>;
}

/// `GET /checkout`
pub(crate) async fn show(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
    prefill: Option<web::Data<dyn CheckoutPrefill>>,
) -> Result<HttpResponse, AppError> {
    let cart = match cart_state(&state, &session).await? {
        CartState::Ready(c) => c,
        other => return Ok(elsewhere(&session, other)),
    };
    let form = match prefill {
        Some(prefill) => prefill
            .prefill(&state.db, &session)
            .await
            .unwrap_or_default(),
        None => CheckoutForm::default(),
    };
    let page = render(&CheckoutPage {
        layout: Layout::public(&req),
        cart,
        form,
        errors: FieldErrors::new(),
        problem: None,
    })?;
    Ok(traffic::tag(page, CommerceEvent::CheckoutStarted))
}

/// `POST /checkout`
pub(crate) async fn submit(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
    gateway: web::Data<dyn PaymentGateway>,
    form: web::Form<CheckoutForm>,
) -> Result<HttpResponse, AppError> {
    let form = form.into_inner();
    let cart = match cart_state(&state, &session).await? {
        CartState::Ready(c) => c,
        // A second submit while the first is still charging ends at the first one's order.
        CartState::Busy(id) => {
            return Ok(
                match checkout::outcome_of_other_submit(&state.db, &id).await? {
                    CheckoutOutcome::Placed(order) => placed(&session, &order),
                    _ => elsewhere(&session, CartState::Busy(id)),
                },
            )
        }
        other => return Ok(elsewhere(&session, other)),
    };
    let details = match form.validate(checkout::month_of(state.db.now())) {
        Ok(d) => d,
        Err(errors) => {
            return form_again(
                &req,
                cart,
                form.for_correction(),
                errors,
                None,
                StatusCode::BAD_REQUEST,
            );
        }
    };
    let outcome = checkout::place_order(&state.db, gateway.get_ref(), &cart.id, &details).await?;
    match outcome {
        CheckoutOutcome::Placed(order) => {
            let event = CommerceEvent::OrderPlaced {
                total_cents: order.total.cents(),
            };
            Ok(traffic::tag(placed(&session, &order), event))
        }
        CheckoutOutcome::Declined(reason) => {
            let cart = cart::by_id(&state.db, &cart.id).await?.unwrap_or(cart);
            form_again(
                &req,
                cart,
                form.without_card(),
                FieldErrors::new(),
                Some(reason),
                StatusCode::PAYMENT_REQUIRED,
            )
        }
        CheckoutOutcome::CartChanged(notices) => {
            for notice in notices {
                flash::push(&session, Level::Warning, notice);
            }
            flash::push(
                &session,
                Level::Info,
                "Please review your cart; you have not been charged.",
            );
            Ok(see_other("/cart"))
        }
        CheckoutOutcome::Empty => {
            flash::push(
                &session,
                Level::Info,
                "Your cart is empty: add something before checking out.",
            );
            Ok(see_other("/cart"))
        }
        CheckoutOutcome::NotActive => {
            cart::forget_in_session(&session);
            flash::push(&session, Level::Info, EXPIRED_NOTICE);
            Ok(see_other("/cart"))
        }
        CheckoutOutcome::InProgress => {
            flash::push(
                &session,
                Level::Info,
                "Your payment is still being processed; check back in a moment.",
            );
            Ok(see_other("/cart"))
        }
    }
}

/// The checkout page again with `form` as it should be shown back (see
/// [`CheckoutForm::for_correction`] and [`CheckoutForm::without_card`]).
fn form_again(
    req: &HttpRequest,
    cart: Cart,
    form: CheckoutForm,
    errors: FieldErrors,
    problem: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, AppError> {
    let page = CheckoutPage {
        layout: Layout::public(req),
        cart,
        form,
        errors,
        problem,
    };
    let html = page
        .render()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering the checkout failed: {e}")))?;
    Ok(html_response(status, html))
}

/// The order is paid: remember it in the session, start afresh and show the confirmation.
fn placed(session: &Session, order: &Order) -> HttpResponse {
    remember_order(session, &order.number);
    show_empty_cart_after(session, order);
    see_other(&order.url())
}

/// Let this session see `number` from now on (the order lookup found it for them).
pub(crate) fn remember_order(session: &Session, number: &OrderNumber) {
    let mut mine: Vec<String> = session
        .get(SESSION_ORDERS)
        .ok()
        .flatten()
        .unwrap_or_default();
    if !mine.iter().any(|n| number == n.as_str()) {
        mine.push(number.to_string());
        if mine.len() > MAX_REMEMBERED_ORDERS {
            mine.remove(0);
        }
    }
    if let Err(e) = session.insert(SESSION_ORDERS, mine) {
        tracing::warn!(error = %e, "could not remember the order in the session");
    }
}

/// The header shows an empty cart once the session's cart became this order.
fn show_empty_cart_after(session: &Session, order: &Order) {
    if cart::session_cart_id(session).as_ref() == Some(&order.cart_id) {
        // The cart id stays, so a late second submit still finds its order; the next add
        // starts a new cart because this one is complete.
        cart::show_empty_in_session(session);
    }
}

/// `GET /orders/{number}`: only for the session that placed it (others get 404, so order
/// numbers reveal nothing).
pub(crate) async fn order(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
    number: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let mine: Vec<String> = session
        .get(SESSION_ORDERS)
        .ok()
        .flatten()
        .unwrap_or_default();
    if !mine.contains(&number) && !carries_admin_credentials(&req).await {
        return Err(AppError::NotFound);
    }
    let number = OrderNumber::parse_exact(&number).map_err(|_| AppError::NotFound)?;
    let order = orders::by_number(&state.db, &number)
        .await?
        .ok_or(AppError::NotFound)?;
    render(&OrderPage {
        layout: Layout::public(&req),
        order,
    })
}
