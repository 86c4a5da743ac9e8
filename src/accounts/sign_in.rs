//! Signing in without a password: `/account/sign-in` takes an email address and sends a link and
//! a code (`tokens`, `email`); following the link (then pressing its button, so a mail
//! scanner's prefetch uses nothing) or entering the code in the browser that asked signs in.
//!
//! No enumeration: a request never reads `accounts` (the first sign-in creates the account),
//! so a known and an unknown address take the same steps — two rate-limit counts, one token
//! insert, one outbox insert — and get the same page and the same email. Requests are limited
//! per client address and per email address (`accounts.sign_ins_per_*_per_hour`), counted in
//! the database (`limits`) so the limits hold across instances.

use std::time::Duration;

use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

use crate::accounts::session::{self, Pending};
use crate::accounts::tokens::{self, CodeOutcome};
use crate::accounts::{email, limits, store};
use crate::checkout::orders;
use crate::config::AccountSettings;
use crate::db::Db;
use crate::domain::EmailAddress;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, Layout};
use crate::web::see_other;

const HOUR: Duration = Duration::from_secs(3600);

/// What the sign-in form says about a link or code that no longer works.
pub(crate) const DEAD_TOKEN: &str =
    "This sign-in link or code has expired, was already used or was tried too often. Ask for a new one below.";

pub(crate) const TOO_MANY: &str =
    "Too many sign-in emails were asked for from your network or for this address. Wait a while and try again.";

#[derive(Template)]
#[template(path = "account/sign_in.html")]
pub(crate) struct SignInPage {
    pub(crate) layout: Layout,
    pub(crate) email: String,
    pub(crate) problem: Option<&'static str>,
}

#[derive(Template)]
#[template(path = "account/code.html")]
pub(crate) struct CodePage {
    pub(crate) layout: Layout,
    pub(crate) email: String,
    pub(crate) problem: Option<String>,
}

#[derive(Template)]
#[template(path = "account/link.html")]
pub(crate) struct LinkPage {
    pub(crate) layout: Layout,
    pub(crate) action: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct EmailForm {
    pub(crate) email: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CodeForm {
    pub(crate) code: String,
}

fn rendered<T: Template>(page: &T, status: StatusCode) -> Result<HttpResponse, AppError> {
    let html = page
        .render()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a sign-in page failed: {e}")))?;
    Ok(html_response(status, html))
}

fn sign_in_form(
    req: &HttpRequest,
    email: &str,
    problem: Option<&'static str>,
    status: StatusCode,
) -> Result<HttpResponse, AppError> {
    rendered(
        &SignInPage {
            layout: Layout::public(req),
            email: email.chars().take(200).collect(),
            problem,
        },
        status,
    )
}

/// `GET /account/sign-in`
pub(crate) async fn show(req: HttpRequest) -> Result<HttpResponse, AppError> {
    sign_in_form(&req, "", None, StatusCode::OK)
}

/// `POST /account/sign-in`: send a link and a code, then ask for the code.
pub(crate) async fn request(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
    settings: web::Data<AccountSettings>,
    form: web::Form<EmailForm>,
) -> Result<HttpResponse, AppError> {
    let Ok(address) = EmailAddress::parse(&form.email) else {
        return sign_in_form(
            &req,
            &form.email,
            Some("Enter an email address like name@example.com."),
            StatusCode::BAD_REQUEST,
        );
    };
    let db = &state.db;
    let client = crate::web::client::client_ip(&req)
        .map_or_else(|| "unknown".to_string(), |ip| ip.to_string());
    // Both counted every time, so a refusal by one says nothing about the other.
    let client_ok = limits::allow(
        db,
        "client",
        &client,
        settings.sign_ins_per_client_per_hour,
        HOUR,
    )
    .await?;
    let email_ok = limits::allow(
        db,
        "email",
        address.as_str(),
        settings.sign_ins_per_email_per_hour,
        HOUR,
    )
    .await?;
    if !(client_ok && email_ok) {
        return sign_in_form(
            &req,
            &form.email,
            Some(TOO_MANY),
            StatusCode::TOO_MANY_REQUESTS,
        );
    }
    let issued = tokens::issue(db, &address).await?;
    email::queue(db, &address, &issued).await?;
    session::set_pending(
        &session,
        &Pending {
            id: issued.id,
            binding: issued.binding,
            email: address.as_str().to_string(),
        },
    );
    Ok(see_other("/account/sign-in/code"))
}

fn code_page(
    req: &HttpRequest,
    pending: &Pending,
    problem: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, AppError> {
    rendered(
        &CodePage {
            layout: Layout::public(req),
            email: pending.email.clone(),
            problem,
        },
        status,
    )
}

/// `GET /account/sign-in/code`
pub(crate) async fn code_form(
    req: HttpRequest,
    session: Session,
) -> Result<HttpResponse, AppError> {
    match session::pending(&session) {
        Some(pending) => code_page(&req, &pending, None, StatusCode::OK),
        None => Ok(see_other("/account/sign-in")),
    }
}

/// `POST /account/sign-in/code`: only the session that asked holds the binding the code needs.
pub(crate) async fn enter_code(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
    form: web::Form<CodeForm>,
) -> Result<HttpResponse, AppError> {
    let Some(pending) = session::pending(&session) else {
        return sign_in_form(&req, "", Some(DEAD_TOKEN), StatusCode::BAD_REQUEST);
    };
    match tokens::try_code(&state.db, &pending.id, &pending.binding, &form.code).await? {
        CodeOutcome::SignedIn(address) => finish(&state.db, &session, &address).await,
        CodeOutcome::Wrong { left } => code_page(
            &req,
            &pending,
            Some(format!(
                "That code is not the one we sent. {left} {} left.",
                if left == 1 { "try" } else { "tries" }
            )),
            StatusCode::BAD_REQUEST,
        ),
        CodeOutcome::Dead => {
            session::clear_pending(&session);
            sign_in_form(&req, "", Some(DEAD_TOKEN), StatusCode::GONE)
        }
    }
}

/// `GET /account/sign-in/link/{token}`: a button that signs in (nothing is used by opening
/// the link, so a mail scanner fetching it spends nothing).
pub(crate) async fn open_link(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
    token: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let id = tokens::id_of_link(&token);
    let live = match &id {
        Some(id) => tokens::peek(&state.db, id).await?.is_some(),
        None => false,
    };
    if !live {
        return sign_in_form(&req, "", Some(DEAD_TOKEN), StatusCode::GONE);
    }
    if !asked_here(&session, id.as_deref()) {
        return sign_in_form(&req, "", Some(OTHER_BROWSER), StatusCode::FORBIDDEN);
    }
    rendered(
        &LinkPage {
            layout: Layout::public(&req),
            action: email::link_path(&token),
        },
        StatusCode::OK,
    )
}

/// `POST /account/sign-in/link/{token}`
pub(crate) async fn follow_link(
    req: HttpRequest,
    session: Session,
    state: web::Data<AppState>,
    token: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let id = tokens::id_of_link(&token);
    // A link opened in another browser than the one that asked is refused and left unused,
    // so it still works where it was asked for: whoever reads the mail alone cannot sign in.
    // A dead or made-up link says so first, wherever it is opened.
    if let Some(live) = &id {
        if tokens::peek(&state.db, live).await?.is_some() && !asked_here(&session, id.as_deref()) {
            return sign_in_form(&req, "", Some(OTHER_BROWSER), StatusCode::FORBIDDEN);
        }
    }
    let used = match id {
        Some(id) => tokens::consume_link(&state.db, &id).await?,
        None => None,
    };
    match used {
        Some(address) => finish(&state.db, &session, &address).await,
        None => sign_in_form(&req, "", Some(DEAD_TOKEN), StatusCode::GONE),
    }
}

/// Whether this browser is the one that asked for the sign-in token `id` (its session holds
/// the pending sign-in).
fn asked_here(session: &Session, id: Option<&str>) -> bool {
    match (session::pending(session), id) {
        (Some(pending), Some(id)) => pending.id == id,
        _ => false,
    }
}

/// What a sign-in link opened in another browser says.
pub(crate) const OTHER_BROWSER: &str =
    "This sign-in link was asked for in another browser. Open it in the \
     browser where you entered your email, or enter the 6-digit code from the same message there; \
     or ask for a new link here.";

/// The token was good: the account (created on a first sign-in), its orders claimed, the
/// session renewed and signed in.
async fn finish(
    db: &Db,
    session: &Session,
    address: &EmailAddress,
) -> Result<HttpResponse, AppError> {
    let account = store::upsert_on_sign_in(db, address).await?;
    orders::claim_for_account(db, address, account.id).await?;
    session::sign_in(session, &account);
    flash::push(
        session,
        Level::Success,
        format!("You are signed in as {}.", account.email),
    );
    Ok(see_other("/account"))
}

/// `POST /account/sign-out`
pub(crate) async fn sign_out(session: Session) -> HttpResponse {
    session::sign_out(&session);
    flash::push(&session, Level::Info, "You are signed out.");
    see_other("/")
}

/// `POST /account/sign-out-everywhere`: every session of the account, this one included.
pub(crate) async fn sign_out_everywhere(
    session: Session,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    if let Some(account) = session::current(&session, &state.db).await? {
        store::bump_sessions_epoch(&state.db, account.id).await?;
    }
    session::sign_out(&session);
    flash::push(
        &session,
        Level::Info,
        "You are signed out on every device and browser.",
    );
    Ok(see_other("/"))
}
