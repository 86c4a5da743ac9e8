//! Reply notifications: when someone replies to a comment whose author left an email and ticked
//! "email me", one message per reply is queued in the outbox (id `reply/<reply id>`), with a
//! signed one-click unsubscribe link (RFC 8058: `List-Unsubscribe` and
//! `List-Unsubscribe-Post`). The link is a capability: its HMAC signature, not a session,
//! authorises the POST (mail providers send it without cookies), so its path is exempt from the
//! CSRF check (`web::csrf`).

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::doc;
use bson::oid::ObjectId;

use crate::comments::store::{self, collection};
use crate::comments::{Comment, Discussion};
use crate::db::{Db, DbError};
use crate::mail::{self, signing, Email};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{html_response, Layout};

/// Where unsubscribe links live (`{PREFIX}{comment id}/{signature}`): the path the CSRF check
/// leaves to the signature.
pub(crate) const UNSUBSCRIBE_PREFIX: &str = crate::web::csrf::SIGNED_LINK_PREFIX;

fn subject_of(id: ObjectId) -> String {
    format!("unsubscribe/{}", id.to_hex())
}

/// The signed unsubscribe path for replies to comment `id`.
pub(crate) async fn unsubscribe_path(db: &Db, id: ObjectId) -> Result<String, DbError> {
    let key = signing::key(db).await?;
    Ok(format!(
        "{UNSUBSCRIBE_PREFIX}{}/{}",
        id.to_hex(),
        signing::sign(&key, &subject_of(id))
    ))
}

/// What both parts of a reply notification say.
struct ReplyMail<'a> {
    subject: &'a str,
    reply_name: &'a str,
    reply_text: &'a str,
    title: &'a str,
    reply_url: &'a str,
    unsubscribe_url: &'a str,
    shop: &'a str,
}

#[derive(Template)]
#[template(path = "email/reply.txt")]
struct ReplyText<'a> {
    m: &'a ReplyMail<'a>,
}

#[derive(Template)]
#[template(path = "email/reply.html")]
struct ReplyHtml<'a> {
    m: &'a ReplyMail<'a>,
}

/// Queue the notification of `reply` to `parent`'s author, when they asked for one (and did not
/// write the reply themselves). Returns whether a message was queued.
pub(crate) async fn queue_reply_notification(
    db: &Db,
    discussion: &Discussion,
    parent: &Comment,
    reply: &Comment,
) -> Result<bool, DbError> {
    let Some(to) = parent.email.as_deref().filter(|_| parent.notify) else {
        return Ok(false);
    };
    if reply
        .email
        .as_deref()
        .is_some_and(|e| e.eq_ignore_ascii_case(to))
    {
        return Ok(false);
    }
    let site = mail::site_address(db);
    let shop = crate::db::site::load(db).await?.name;
    let reply_url = mail::absolute(
        &site,
        &format!("{}#{}", discussion.comment_url(&reply.slug), reply.anchor()),
    );
    let unsubscribe_url = mail::absolute(&site, &unsubscribe_path(db, parent.id).await?);
    let subject = format!(
        "{} replied to your comment on {}",
        reply.author.name, discussion.title
    );
    let failed = |e: askama::Error| DbError::Invalid(format!("rendering a reply email: {e}"));
    let m = ReplyMail {
        subject: &subject,
        reply_name: &reply.author.name,
        reply_text: &reply.text,
        title: &discussion.title,
        reply_url: &reply_url,
        unsubscribe_url: &unsubscribe_url,
        shop: &shop,
    };
    let text = ReplyText { m: &m }.render().map_err(failed)?;
    let html = ReplyHtml { m: &m }.render().map_err(failed)?;
    mail::enqueue(
        db,
        Email {
            id: format!("reply/{}", reply.id.to_hex()),
            kind: "reply",
            to: to.to_string(),
            subject,
            text,
            html,
            unsubscribe: Some(unsubscribe_url),
            secret: false,
        },
    )
    .await
}

#[derive(Template)]
#[template(path = "comments/unsubscribe.html")]
struct UnsubscribePage {
    layout: Layout,
    done: bool,
    title: String,
    action: String,
    back_url: String,
}

/// The comment an unsubscribe link names, when its signature is right; 404 otherwise (a wrong
/// signature and a missing comment look alike).
async fn signed_comment(db: &Db, id: &str, signature: &str) -> Result<Comment, AppError> {
    let id = ObjectId::parse_str(id).map_err(|_| AppError::NotFound)?;
    if signature.len() != 64 {
        return Err(AppError::NotFound);
    }
    let key = signing::key(db).await?;
    if !signing::verify(&key, &subject_of(id), signature) {
        return Err(AppError::NotFound);
    }
    store::by_id(db, id).await?.ok_or(AppError::NotFound)
}

async fn page(
    req: &HttpRequest,
    state: &AppState,
    comment: &Comment,
    done: bool,
) -> Result<HttpResponse, AppError> {
    let links = store::discussion_links(&state.db, &[comment.discussion_id]).await?;
    let (title, back_url) = match links.get(&comment.discussion_id) {
        Some(d) => (d.title.clone(), format!("{}#comments", d.base_url)),
        None => ("a page that no longer exists".to_string(), "/".to_string()),
    };
    let html = UnsubscribePage {
        layout: Layout::public(req),
        done,
        title,
        action: req.path().to_string(),
        back_url,
    }
    .render()
    .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}")))?;
    Ok(html_response(StatusCode::OK, html))
}

/// `GET /comments/unsubscribe/{id}/{signature}`: asks to confirm (a GET changes nothing: link
/// scanners follow links).
pub(crate) async fn confirm(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AppError> {
    let (id, signature) = path.into_inner();
    let comment = signed_comment(&state.db, &id, &signature).await?;
    page(&req, &state, &comment, false).await
}

/// `POST /comments/unsubscribe/{id}/{signature}`: the one-click unsubscribe (RFC 8058) and the
/// confirmation page's button. Repeating it is harmless.
pub(crate) async fn unsubscribe(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AppError> {
    let (id, signature) = path.into_inner();
    let comment = signed_comment(&state.db, &id, &signature).await?;
    collection(&state.db)
        .update_one(
            doc! { "_id": comment.id, "notify": true },
            doc! { "$set": { "notify": false } },
        )
        .await
        .map_err(DbError::from)?;
    tracing::info!(comment = %comment.id, "reply notifications turned off by their link");
    page(&req, &state, &comment, true).await
}
