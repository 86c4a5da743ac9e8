//! The sign-in email: a link and a code, queued in the outbox (id `sign-in/<token id>`, one
//! message per request). The same message whether or not an account exists for the address —
//! the first sign-in creates it — so the email itself reveals nothing either. It is marked
//! secret: once sent, the outbox keeps no copy of the link or code.

use askama::Template;

use crate::accounts::tokens::Issued;
use crate::db::{Db, DbError};
use crate::domain::EmailAddress;
use crate::mail::{self, Email};

struct SignInMail<'a> {
    subject: &'a str,
    link: &'a str,
    code: &'a str,
    shop: &'a str,
}

#[derive(Template)]
#[template(path = "email/sign_in.txt")]
struct SignInText<'a> {
    m: &'a SignInMail<'a>,
}

#[derive(Template)]
#[template(path = "email/sign_in.html")]
struct SignInHtml<'a> {
    m: &'a SignInMail<'a>,
}

/// The path a sign-in link opens.
pub(crate) fn link_path(link_token: &str) -> String {
    format!("/account/sign-in/link/{link_token}")
}

/// Queue the sign-in email for `issued` to `to`.
pub(crate) async fn queue(db: &Db, to: &EmailAddress, issued: &Issued) -> Result<(), DbError> {
    let settings = crate::db::site::load(db).await?;
    let subject = format!("Sign in to {}", settings.name);
    let link = mail::absolute(&mail::site_address(db), &link_path(&issued.link_token));
    let m = SignInMail {
        subject: &subject,
        link: &link,
        code: &issued.code,
        shop: &settings.name,
    };
    let failed = |e: askama::Error| DbError::Invalid(format!("rendering a sign-in email: {e}"));
    let text = SignInText { m: &m }.render().map_err(failed)?;
    let html = SignInHtml { m: &m }.render().map_err(failed)?;
    mail::enqueue(
        db,
        Email {
            id: format!("sign-in/{}", issued.id),
            kind: "sign-in",
            to: to.as_str().to_string(),
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
