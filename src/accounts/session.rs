//! Who is signed in, as the session records it: the account id and the `sessions_epoch` it
//! signed in under (`web::session::ACCOUNT_KEY` and `account_epoch`), and, between a sign-in
//! request and its code, the pending token's id and binding secret. Signing in and out renew
//! the session (a new cookie; actix-session's `renew`) and its CSRF token, so nothing learned
//! about the session before carries over (no fixation).

use actix_session::Session;
use bson::oid::ObjectId;
use serde::{Deserialize, Serialize};

use crate::accounts::store::{self, Account};
use crate::db::{Db, DbError};
use crate::web::csrf;
use crate::web::session::{ACCOUNT_EPOCH_KEY as EPOCH_KEY, ACCOUNT_KEY};

const PENDING_KEY: &str = "sign_in_pending";

/// The sign-in this session asked for and may finish with a code.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pending {
    /// The token's id (`tokens::Issued::id`).
    pub(crate) id: String,
    /// The secret the code is bound to (`tokens::Issued::binding`).
    pub(crate) binding: String,
    /// Where the email went, to say so on the code page.
    pub(crate) email: String,
}

pub(crate) fn set_pending(session: &Session, pending: &Pending) {
    if let Err(e) = session.insert(PENDING_KEY, pending) {
        tracing::warn!(error = %e, "could not keep the pending sign-in in the session");
    }
}

/// Forget the pending sign-in (its token is dead).
pub(crate) fn clear_pending(session: &Session) {
    session.remove(PENDING_KEY);
}

pub(crate) fn pending(session: &Session) -> Option<Pending> {
    session.get::<Pending>(PENDING_KEY).ok().flatten()
}

/// Sign `account` in on this session: a renewed session holding its id and epoch.
pub(crate) fn sign_in(session: &Session, account: &Account) {
    session.remove(PENDING_KEY);
    csrf::rotate(session);
    session.renew();
    let stored = session
        .insert(ACCOUNT_KEY, account.id.to_hex())
        .and_then(|()| session.insert(EPOCH_KEY, account.sessions_epoch));
    if let Err(e) = stored {
        tracing::warn!(error = %e, "could not record the sign-in in the session");
    }
}

/// Sign this session out: everything it held goes (on a shared computer the next person sees
/// no cart or order of the last), and the cookie is renewed.
pub(crate) fn sign_out(session: &Session) {
    session.clear();
    session.renew();
}

/// The signed-in account, or `None` when the session is signed out, the account is gone, or
/// "sign out everywhere" moved its epoch on since this session signed in (the session is then
/// signed out).
pub(crate) async fn current(session: &Session, db: &Db) -> Result<Option<Account>, DbError> {
    let Some(id) = session
        .get::<String>(ACCOUNT_KEY)
        .ok()
        .flatten()
        .and_then(|hex| ObjectId::parse_str(hex).ok())
    else {
        if session.contains_key(ACCOUNT_KEY) {
            sign_out(session);
        }
        return Ok(None);
    };
    let epoch = session.get::<i64>(EPOCH_KEY).ok().flatten();
    match store::find_by_id(db, id).await? {
        Some(account) if Some(account.sessions_epoch) == epoch => Ok(Some(account)),
        _ => {
            sign_out(session);
            Ok(None)
        }
    }
}

/// Where a signed-out visitor of an account page goes.
pub(crate) fn to_sign_in() -> actix_web::HttpResponse {
    crate::web::see_other("/account/sign-in")
}

/// The signed-in account of a request, as a handler argument: extracting it reads the session
/// and the account ([`current`]); a visitor who is not signed in (or whose session was ended
/// elsewhere) is sent to the sign-in page instead of reaching the handler.
pub(crate) struct SignedIn(pub Account);

/// Why [`SignedIn`] was not extracted: the answer is the way to the sign-in page, or the
/// database's error.
#[derive(Debug)]
pub(crate) enum NotSignedIn {
    SignInFirst,
    Db(crate::web::errors::AppError),
}

impl std::fmt::Display for NotSignedIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotSignedIn::SignInFirst => f.write_str("sign in first"),
            NotSignedIn::Db(e) => e.fmt(f),
        }
    }
}

impl actix_web::ResponseError for NotSignedIn {
    fn status_code(&self) -> actix_web::http::StatusCode {
        match self {
            NotSignedIn::SignInFirst => actix_web::http::StatusCode::SEE_OTHER,
            NotSignedIn::Db(e) => e.status_code(),
        }
    }

    fn error_response(&self) -> actix_web::HttpResponse {
        match self {
            NotSignedIn::SignInFirst => to_sign_in(),
            NotSignedIn::Db(e) => e.error_response(),
        }
    }
}

impl actix_web::FromRequest for SignedIn {
    type Error = NotSignedIn;
    type Future = futures::future::LocalBoxFuture<'static, Result<SignedIn, NotSignedIn>>;

    fn from_request(req: &actix_web::HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        use actix_session::SessionExt;
        let session = req.get_session();
        let state = req
            .app_data::<actix_web::web::Data<crate::state::AppState>>()
            .cloned();
        Box::pin(async move {
            let state = state.ok_or_else(|| {
                NotSignedIn::Db(crate::web::errors::AppError::Internal(anyhow::anyhow!(
                    "no application state"
                )))
            })?;
            match current(&session, &state.db).await {
                Ok(Some(account)) => Ok(SignedIn(account)),
                Ok(None) => Err(NotSignedIn::SignInFirst),
                Err(e) => Err(NotSignedIn::Db(e.into())),
            }
        })
    }
}
