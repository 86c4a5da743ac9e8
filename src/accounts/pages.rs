//! The signed-in customer's pages: `/account` (who they are, their orders, sign-out forms),
//! `/account/orders/{number}` (an order they own, on checkout's order template) and
//! `/account/settings` (the name shown on their comments, reply notifications). A signed-out
//! visitor is sent to the sign-in form.

use crate::accounts::session::SignedIn;
use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

use crate::accounts::store::{self, Account};
use crate::checkout::orders::{self, Order};
use crate::checkout::pages::OrderPage;
use crate::domain::OrderNumber;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::field_errors::FieldErrors;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, render, Layout};
use crate::web::see_other;

/// Orders listed on the overview; a customer with more sees the newest.
const ORDERS_SHOWN: i64 = 100;

/// Longest display name.
const MAX_DISPLAY_NAME: usize = 60;

#[derive(Template)]
#[template(path = "account/overview.html")]
pub(crate) struct OverviewPage {
    pub(crate) layout: Layout,
    pub(crate) account: Account,
    pub(crate) orders: Vec<Order>,
}

/// `GET /account`: orders placed with the account's email since the last visit are claimed
/// first, so a guest order placed meanwhile shows too.
pub(crate) async fn overview(
    req: HttpRequest,
    SignedIn(account): SignedIn,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    orders::claim_for_account(&state.db, &account.email, account.id).await?;
    store::touch(&state.db, account.id).await?;
    let orders = orders::for_account(&state.db, account.id, ORDERS_SHOWN).await?;
    render(&OverviewPage {
        layout: Layout::public(&req),
        account,
        orders,
    })
}

/// `GET /account/orders/{number}`: only an order this account owns; any other is not found.
pub(crate) async fn order(
    req: HttpRequest,
    SignedIn(account): SignedIn,
    state: web::Data<AppState>,
    number: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let number = OrderNumber::parse_exact(&number).map_err(|_| AppError::NotFound)?;
    let order = orders::by_number(&state.db, &number)
        .await?
        .filter(|o| o.account_id == Some(account.id))
        .ok_or(AppError::NotFound)?;
    render(&OrderPage {
        layout: Layout::public(&req),
        order,
    })
}

#[derive(Template)]
#[template(path = "account/settings.html")]
pub(crate) struct SettingsPage {
    pub(crate) layout: Layout,
    pub(crate) display_name: String,
    pub(crate) notify_replies: bool,
    pub(crate) errors: FieldErrors,
}

impl SettingsPage {
    pub(crate) fn error(&self, field: &str) -> Option<&String> {
        self.errors.get(field)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SettingsForm {
    pub(crate) display_name: String,
    /// A ticked box (any value).
    pub(crate) notify_replies: Option<String>,
}

/// `GET /account/settings`
pub(crate) async fn settings(
    req: HttpRequest,
    SignedIn(account): SignedIn,
) -> Result<HttpResponse, AppError> {
    render(&SettingsPage {
        layout: Layout::public(&req),
        display_name: account.display_name.unwrap_or_default(),
        notify_replies: account.notify_replies,
        errors: FieldErrors::new(),
    })
}

/// `POST /account/settings`
pub(crate) async fn save_settings(
    req: HttpRequest,
    SignedIn(account): SignedIn,
    session: Session,
    state: web::Data<AppState>,
    form: web::Form<SettingsForm>,
) -> Result<HttpResponse, AppError> {
    let cleaned = crate::comments::names::clean_name(&form.display_name);
    let name = cleaned.as_str();
    let mut errors = FieldErrors::new();
    if name.chars().count() > MAX_DISPLAY_NAME {
        errors.add(
            "display_name",
            format!("A display name has at most {MAX_DISPLAY_NAME} characters."),
        );
    } else if form.display_name.trim().chars().any(char::is_control) {
        errors.add(
            "display_name",
            "The display name contains characters we cannot print.",
        );
    } else if crate::comments::names::is_reserved(name, &crate::db::site::current().name) {
        errors.add(
            "display_name",
            "That name is kept for the shop's own staff; please choose another.",
        );
    } else if crate::comments::identity::owner_of(&state.db, name)
        .await?
        .is_some_and(|owner| owner != account.id)
    {
        errors.add(
            "display_name",
            "Another customer already comments under that name; please choose another.",
        );
    }
    let notify = form.notify_replies.is_some();
    let display_name = (!name.is_empty()).then_some(name);
    if errors.is_empty()
        && store::set_comment_settings(&state.db, account.id, display_name, notify).await?
            == store::SettingsSaved::NameTaken
    {
        errors.add(
            "display_name",
            "Another customer already comments under that name; please choose another.",
        );
    }
    if !errors.is_empty() {
        let html = SettingsPage {
            layout: Layout::public(&req),
            display_name: name.chars().take(MAX_DISPLAY_NAME * 2).collect(),
            notify_replies: notify,
            errors,
        }
        .render()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering the settings failed: {e}")))?;
        return Ok(html_response(StatusCode::BAD_REQUEST, html));
    }
    flash::push(&session, Level::Success, "Settings saved.");
    Ok(see_other("/account/settings"))
}
