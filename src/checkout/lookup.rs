//! Finding an order again: `/orders/lookup` asks for the order number and the email address
//! given at checkout. The shop sends no email, so this (with the bookmarked confirmation page) is
//! how a shopper on another device, or after the session ended, gets back to their order.
//!
//! A wrong number and a wrong email get the same answer, so the form cannot be used to learn
//! which order numbers exist; attempts are rate-limited per client address
//! (`cart.order_lookups_per_hour`) so neither can be guessed by trying many.

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::checkout::orders;
use crate::checkout::pages::remember_order;
use crate::domain::OrderNumber;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{html_response, Layout};
use crate::web::rate_limit::RateLimiter;
use crate::web::see_other;

/// What the form says when nothing matches, whichever half was wrong.
pub(crate) const NO_MATCH: &str =
    "No order matches that number and email address. Check both against the order page you bookmarked or your payment record.";

/// What it says when this address tried too often.
pub(crate) const TOO_MANY: &str =
    "Too many lookups came from your network. Wait a few minutes and try again.";

#[derive(Template)]
#[template(path = "checkout/lookup.html")]
pub(crate) struct LookupPage {
    pub(crate) layout: Layout,
    pub(crate) number: String,
    pub(crate) email: String,
    /// Why the last attempt found nothing.
    pub(crate) problem: Option<&'static str>,
}

/// The lookup form as submitted.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LookupForm {
    pub(crate) number: String,
    pub(crate) email: String,
}

/// Emails match whatever their case and surrounding spaces, compared in constant time.
fn same_email(given: &str, stored: &str) -> bool {
    let given = given.trim().to_lowercase();
    let stored = stored.trim().to_lowercase();
    given.as_bytes().ct_eq(stored.as_bytes()).into()
}

fn page(
    req: &HttpRequest,
    form: &LookupForm,
    problem: Option<&'static str>,
    status: StatusCode,
) -> Result<HttpResponse, AppError> {
    let html = LookupPage {
        layout: Layout::public(req),
        number: form.number.chars().take(40).collect(),
        email: form.email.chars().take(200).collect(),
        problem,
    }
    .render()
    .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering the order lookup failed: {e}")))?;
    Ok(html_response(status, html))
}

/// `GET /orders/lookup`
pub(crate) async fn show(req: HttpRequest) -> Result<HttpResponse, AppError> {
    page(&req, &LookupForm::default(), None, StatusCode::OK)
}

/// Order lookups per client address (`cart.order_lookups_per_hour`): [`submit`]'s own
/// limiter, registered by start-up as app data.
#[derive(Debug)]
pub(crate) struct LookupLimit(RateLimiter);

impl LookupLimit {
    pub(crate) fn per_hour(lookups: u32) -> LookupLimit {
        LookupLimit(RateLimiter::new(
            lookups,
            std::time::Duration::from_secs(3600),
        ))
    }
}

/// `POST /orders/lookup`: a match lets this session see the order and goes to it.
pub(crate) async fn submit(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
    lookups: web::Data<LookupLimit>,
    form: web::Form<LookupForm>,
) -> Result<HttpResponse, AppError> {
    let form = form.into_inner();
    if !lookups.0.allow(crate::web::client::client_ip(&req)) {
        return page(&req, &form, Some(TOO_MANY), StatusCode::TOO_MANY_REQUESTS);
    }
    let found = match OrderNumber::parse(&form.number) {
        Ok(number) => orders::by_number(&state.db, &number).await?,
        Err(_) => None,
    };
    match found {
        Some(order) if same_email(&form.email, &order.email) => {
            remember_order(&session, &order.number);
            Ok(see_other(&order.url()))
        }
        _ => page(&req, &form, Some(NO_MATCH), StatusCode::OK),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_match_whatever_their_case() {
        assert!(same_email(" Ada@Example.com", "ada@example.com"));
        assert!(!same_email("ada@example.org", "ada@example.com"));
    }
}
