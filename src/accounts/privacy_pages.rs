//! The customer's privacy pages: `/account/privacy` explains what is kept and offers "download
//! my data" and "delete my account"; each sends a fresh confirmation link by email
//! (`privacy::issue`), and only following that link — opening it shows a button, pressing it
//! acts, so a mail scanner's prefetch does nothing — downloads the JSON file or erases the
//! account. The link alone is enough (it proves the mailbox, as a sign-in link does), so it
//! works in any browser; it works once, for `privacy::LIFETIME`.

use std::time::Duration;

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::accounts::privacy::{self, Action};
use crate::accounts::session::{self, to_sign_in};
use crate::accounts::{limits, store, Account};
use crate::db::{Db, DbError};
use crate::mail::{self, Email};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, render, Layout};
use crate::web::see_other;

/// Confirmation emails one account may ask for per hour (both actions together).
const REQUESTS_PER_HOUR: u32 = 5;

/// What the confirmation page says about a link that no longer works.
pub(crate) const DEAD_LINK: &str =
    "This confirmation link has expired or was already used. Ask for a new one on your account's privacy page.";

#[derive(Template)]
#[template(path = "account/privacy.html")]
pub(crate) struct PrivacyPage {
    pub(crate) layout: Layout,
    pub(crate) account: Account,
    pub(crate) placeholder: &'static str,
}

#[derive(Template)]
#[template(path = "account/privacy_confirm.html")]
pub(crate) struct ConfirmPage {
    pub(crate) layout: Layout,
    /// `None`: the link is dead, and the page says so.
    pub(crate) action: Option<Action>,
    pub(crate) form_action: String,
    pub(crate) problem: Option<&'static str>,
}

/// `GET /account/privacy`
pub(crate) async fn show(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let Some(account) = session::current(&session, &state.db).await? else {
        return Ok(to_sign_in());
    };
    render(&PrivacyPage {
        layout: Layout::public(&req),
        account,
        placeholder: privacy::PLACEHOLDER,
    })
}

/// `POST /account/privacy/export`
pub(crate) async fn ask_export(
    session: Session,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    ask(session, state, Action::Export).await
}

/// `POST /account/privacy/delete`
pub(crate) async fn ask_delete(
    session: Session,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    ask(session, state, Action::Delete).await
}

async fn ask(
    session: Session,
    state: web::Data<AppState>,
    action: Action,
) -> Result<HttpResponse, AppError> {
    let db = &state.db;
    let Some(account) = session::current(&session, db).await? else {
        return Ok(to_sign_in());
    };
    let allowed = limits::allow(
        db,
        "privacy",
        &account.id.to_hex(),
        REQUESTS_PER_HOUR,
        Duration::from_secs(3600),
    )
    .await?;
    if !allowed {
        flash::push(
            &session,
            Level::Error,
            "Too many confirmation emails were asked for. Wait a while and try again.",
        );
        return Ok(see_other("/account/privacy"));
    }
    let token = privacy::issue(db, account.id, action).await?;
    queue_confirmation(db, &account, action, &token).await?;
    flash::push(
        &session,
        Level::Success,
        format!(
            "We sent a confirmation link to {}. It works once, for 30 minutes.",
            account.email
        ),
    );
    Ok(see_other("/account/privacy"))
}

/// The path a confirmation link opens.
pub(crate) fn confirm_path(token: &str) -> String {
    format!("/account/privacy/confirm/{token}")
}

struct ConfirmMail<'a> {
    subject: &'a str,
    what: &'a str,
    link: &'a str,
    shop: &'a str,
}

#[derive(Template)]
#[template(path = "email/privacy.txt")]
struct ConfirmText<'a> {
    m: &'a ConfirmMail<'a>,
}

#[derive(Template)]
#[template(path = "email/privacy.html")]
struct ConfirmHtml<'a> {
    m: &'a ConfirmMail<'a>,
}

/// Queue the confirmation email (marked secret: once sent the outbox keeps no usable link).
async fn queue_confirmation(
    db: &Db,
    account: &Account,
    action: Action,
    token: &str,
) -> Result<(), DbError> {
    let site = crate::db::site::load(db).await?;
    let (subject, what) = match action {
        Action::Export => (
            format!("Download your data from {}", site.name),
            "download the data we keep about you (a JSON file)",
        ),
        Action::Delete => (
            format!("Delete your account at {}", site.name),
            "delete your account for good",
        ),
    };
    let link = mail::absolute(&mail::site_address(db), &confirm_path(token));
    let m = ConfirmMail {
        subject: &subject,
        what,
        link: &link,
        shop: &site.name,
    };
    let failed = |e: askama::Error| DbError::Invalid(format!("rendering a privacy email: {e}"));
    let text = ConfirmText { m: &m }.render().map_err(failed)?;
    let html = ConfirmHtml { m: &m }.render().map_err(failed)?;
    mail::enqueue(
        db,
        Email {
            id: format!(
                "privacy/{}",
                crate::accounts::privacy::id_of_token(token).unwrap_or_default()
            ),
            kind: "privacy",
            to: account.email.as_str().to_string(),
            subject,
            text,
            html,
            unsubscribe: None,
            secret: true,
        },
    )
    .await?;
    Ok(())
}

fn confirm_page(
    req: &HttpRequest,
    action: Option<Action>,
    token: &str,
    status: StatusCode,
) -> Result<HttpResponse, AppError> {
    let html = ConfirmPage {
        layout: Layout::public(req),
        action,
        form_action: confirm_path(token),
        problem: action.is_none().then_some(DEAD_LINK),
    }
    .render()
    .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a privacy page failed: {e}")))?;
    Ok(html_response(status, html))
}

/// `GET /account/privacy/confirm/{token}`: what the link will do, and the button that does it.
pub(crate) async fn open(
    req: HttpRequest,
    state: web::Data<AppState>,
    token: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    match privacy::peek(&state.db, &token).await? {
        Some(request) => confirm_page(&req, Some(request.action), &token, StatusCode::OK),
        None => confirm_page(&req, None, "", StatusCode::GONE),
    }
}

/// `POST /account/privacy/confirm/{token}`: the download, or the erasure (then this browser is
/// signed out, and every other session of the account ends with the account).
pub(crate) async fn confirm(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
    token: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let db = &state.db;
    let Some(request) = privacy::consume(db, &token).await? else {
        return confirm_page(&req, None, "", StatusCode::GONE);
    };
    let Some(account) = store::find_by_id(db, request.account_id).await? else {
        return confirm_page(&req, None, "", StatusCode::GONE);
    };
    match request.action {
        Action::Export => Ok(download(&privacy::export(db, &account).await?)),
        Action::Delete => {
            privacy::erase(db, &account).await?;
            session::sign_out(&session);
            flash::push(
                &session,
                Level::Success,
                "Your account is deleted. Your orders are kept for our accounts, without your name, email or address.",
            );
            Ok(see_other("/"))
        }
    }
}

/// A JSON document as a file download.
pub(crate) fn download(data: &serde_json::Value) -> HttpResponse {
    let body = serde_json::to_string_pretty(data).unwrap_or_else(|_| "{}".to_string());
    HttpResponse::Ok()
        .content_type("application/json; charset=utf-8")
        .insert_header((
            actix_web::http::header::CONTENT_DISPOSITION,
            "attachment; filename=\"my-data.json\"",
        ))
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .body(body)
}
