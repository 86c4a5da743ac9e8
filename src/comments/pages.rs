//! The generic half of the comment pages: checking and storing a submitted comment or reply,
//! and the permalink page. A kind of discussion (products now, nodes later) adds thin routes
//! that find their discussion and call these.

use std::net::{IpAddr, Ipv4Addr};

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

use crate::comments::rate_limit::CommentRateLimit;
use crate::comments::slugs::CommentPath;
use crate::comments::store::{self, NewComment, PostError};
use crate::comments::thread::{self, CommentForm, ThreadView};
use crate::comments::{identity, names, notify, policy, Comment, CommentStatus, Discussion};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, Layout};
use crate::web::see_other;

/// Longest commenter name accepted, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 80;

/// What the comment and reply forms send.
#[derive(Debug, Deserialize)]
pub(crate) struct CommentInput {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) text: String,
    /// Optional; never shown, kept only to send reply notifications.
    #[serde(default)]
    pub(crate) email: String,
    /// "yes" when the commenter asked to be emailed about replies.
    #[serde(default)]
    pub(crate) notify: String,
    /// "yes" to keep the name and email (in the encrypted session cookie) for the next comment.
    #[serde(default)]
    pub(crate) remember: String,
    /// The honeypot: hidden from people, filled in by naive spam robots.
    #[serde(default)]
    pub(crate) website: String,
}

/// The outcome of a submit.
pub(crate) enum Submitted {
    /// Stored: where to send the browser.
    Posted(HttpResponse),
    /// Not stored: show the form again with this state and status.
    Refused(CommentForm, StatusCode),
}

/// Why a name or text is refused, per field; `None` when both are fine. The name is judged as
/// it will be stored ([`names::clean_name`]), and names the shop's staff sign with are refused
/// in any lookalike spelling.
fn check(input: &CommentInput, max_length: usize) -> CommentForm {
    let cleaned = names::clean_name(&input.name);
    let name = cleaned.as_str();
    let text = input.text.trim();
    let email = input.email.trim();
    let mut form = CommentForm {
        name: input.name.clone(),
        email: input.email.clone(),
        notify: input.notify == "yes",
        remember: input.remember == "yes",
        text: input.text.clone(),
        ..CommentForm::default()
    };
    if !email.is_empty() && !crate::web::email::is_valid(email) {
        form.email_error = Some(
            "Please check the email address (like name@example.com), or leave it empty.".into(),
        );
    } else if email.is_empty() && form.notify {
        form.email_error = Some(
            "Please give an email address to be told about replies, or untick the box.".into(),
        );
    }
    if name.is_empty() {
        form.name_error = Some("Please give a name to sign your comment with.".into());
    } else if name.chars().count() > MAX_NAME_CHARS {
        form.name_error = Some(format!(
            "Please keep the name to {MAX_NAME_CHARS} characters."
        ));
    } else if input.name.trim().chars().any(char::is_control) {
        form.name_error = Some("The name cannot contain line breaks or control characters.".into());
    } else if names::is_reserved(name, &crate::db::site::current().name) {
        form.name_error =
            Some("That name is kept for the shop's own staff; please sign with another.".into());
    }
    let length = text.chars().count();
    if text.is_empty() {
        form.text_error = Some("Please write a comment.".into());
    } else if length > max_length {
        form.text_error = Some(format!(
            "Comments are limited to {max_length} characters; this one has {length}. Please \
             shorten it."
        ));
    }
    form
}

/// The client's address for the rate limit: the connecting peer, or behind a trusted proxy the
/// address it forwards (`web::client`). (An address taken from any other sender's header would
/// let a spammer pick a new one for every comment.)
fn client_address(req: &HttpRequest) -> IpAddr {
    crate::web::client::client_ip(req).unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

/// Check and store a comment on `discussion` — a reply when `parent_slug` is given. Spam checks
/// and form errors come back as [`Submitted::Refused`] with the text kept, never as an error
/// page; after a post the browser goes to the comment's place, under its parent.
pub(crate) async fn submit(
    req: &HttpRequest,
    state: &AppState,
    comment_rate: &CommentRateLimit,
    discussion: &Discussion,
    parent_slug: Option<&CommentPath>,
    input: CommentInput,
) -> Result<Submitted, AppError> {
    let parent = match parent_slug {
        Some(slug) => {
            let parent = store::by_slug(&state.db, discussion.id, slug)
                .await?
                .ok_or(AppError::NotFound)?;
            Some(parent)
        }
        None => None,
    };
    let mut form = check(&input, state.comments.max_length);
    if !discussion.is_open(state.db.now(), state.comments.close_after_days) {
        form.notice =
            Some("Comments are closed on this page, so your comment was not posted.".into());
        return Ok(Submitted::Refused(form, StatusCode::FORBIDDEN));
    }
    if form.has_errors() {
        return Ok(Submitted::Refused(form, StatusCode::UNPROCESSABLE_ENTITY));
    }
    // One identity: a customer's display name is theirs alone.
    let commenter = identity::signed_in(&req.get_session(), &state.db).await?;
    let owner = identity::owner_of(&state.db, &names::clean_name(&input.name)).await?;
    let verified = match (owner, &commenter) {
        (None, _) => false,
        (Some(owner), Some(me)) if owner == me.id => true,
        (Some(_), _) => {
            form.name_error = Some(
                "That name belongs to a customer account; please sign with another (or sign \
                 in, if it is yours)."
                    .into(),
            );
            return Ok(Submitted::Refused(form, StatusCode::UNPROCESSABLE_ENTITY));
        }
    };
    if parent
        .as_ref()
        .is_some_and(|p| p.status != CommentStatus::Visible)
    {
        form.notice = Some(
            "The comment you replied to has been removed, so your reply was not posted.".into(),
        );
        return Ok(Submitted::Refused(form, StatusCode::CONFLICT));
    }
    if !input.website.trim().is_empty() {
        tracing::info!(discussion = %discussion.id, "comment refused: honeypot filled");
        form.notice = Some(
            "Our spam check stopped this comment (a hidden field meant for robots was filled \
             in, perhaps by your browser's autofill). Your text is kept: please post it again."
                .into(),
        );
        return Ok(Submitted::Refused(form, StatusCode::UNPROCESSABLE_ENTITY));
    }
    let client = client_address(req);
    if !comment_rate.try_acquire(client) {
        tracing::info!(%client, "comment refused: rate limit");
        form.notice = Some(format!(
            "You are commenting faster than we allow ({} comments a minute). Your comment is \
             still here: please wait a minute and post it again.",
            comment_rate.per_minute()
        ));
        return Ok(Submitted::Refused(form, StatusCode::TOO_MANY_REQUESTS));
    }
    let email = Some(input.email.trim().to_string()).filter(|e| !e.is_empty());
    let mut new = NewComment {
        name: names::clean_name(&input.name),
        text: names::cap_combining_marks(input.text.trim()),
        notify: form.notify && email.is_some(),
        email,
        staff: false,
        held: false,
        account_id: commenter.map(|c| c.id),
        verified,
    };
    let hold = match policy::hold(&state.db, &state.comments, &new).await {
        Ok(hold) => hold,
        Err(e) => {
            comment_rate.release(client);
            return Err(e.into());
        }
    };
    if let Some(why) = &hold {
        tracing::info!(discussion = %discussion.id, ?why, "comment held for approval");
        new.held = true;
    }
    let posted = store::post(&state.db, discussion, parent.as_ref(), &new).await;
    let comment = match posted {
        Ok(comment) => comment,
        Err(PostError::ParentGone) => {
            comment_rate.release(client);
            form.notice = Some(
                "The comment you replied to has been removed, so your reply was not posted.".into(),
            );
            return Ok(Submitted::Refused(form, StatusCode::CONFLICT));
        }
        Err(PostError::NoFreeSlug) => {
            comment_rate.release(client);
            return Err(AppError::Internal(anyhow::anyhow!(
                "no free comment slug in discussion {}",
                discussion.id
            )));
        }
        Err(PostError::Db(e)) => {
            comment_rate.release(client);
            return Err(e.into());
        }
    };
    remember_commenter(req, form.remember, &new);
    if new.held {
        flash::push(
            &req.get_session(),
            Level::Info,
            "Thank you: your comment is held for a moderator's approval and will appear here \
             once approved.",
        );
        return Ok(Submitted::Posted(see_other(&format!(
            "{}#comments",
            discussion.base_url
        ))));
    }
    if let Some(parent) = &parent {
        // Queued in the posting step; a failure to queue does not withdraw the reply.
        if let Err(e) =
            notify::queue_reply_notification(&state.db, discussion, parent, &comment).await
        {
            tracing::warn!(error = %e, comment = %comment.id, "could not queue a reply notification");
        }
    }
    flash::push(
        &req.get_session(),
        Level::Success,
        "Thank you: your comment is posted.",
    );
    let location = posted_location(state, discussion, parent.as_ref(), &comment).await?;
    Ok(Submitted::Posted(see_other(&location)))
}

/// After a stored comment: keep the name and email in the (encrypted, HttpOnly) session cookie
/// when "remember me" was ticked, forget them when it was not.
fn remember_commenter(req: &HttpRequest, remember: bool, new: &NewComment) {
    let session = req.get_session();
    if !remember {
        session.remove(thread::REMEMBERED_KEY);
        return;
    }
    let kept = thread::Remembered {
        name: new.name.clone(),
        email: new.email.clone().unwrap_or_default(),
    };
    if let Err(e) = session.insert(thread::REMEMBERED_KEY, kept) {
        tracing::warn!(error = %e, "could not remember the commenter in the session");
    }
}

/// Where the browser goes after posting `comment`: the discussion's own page at the comment
/// when the comment is on its first page; otherwise (a long discussion) its parent's permalink
/// (which holds the reply however long the discussion), or its own for a new thread.
async fn posted_location(
    state: &AppState,
    discussion: &Discussion,
    parent: Option<&Comment>,
    comment: &Comment,
) -> Result<String, AppError> {
    let on_page = store::on_first_page(
        &state.db,
        discussion.id,
        &comment.full_slug,
        state.comments.page_size,
    )
    .await?;
    let page = if on_page {
        discussion.base_url.clone()
    } else {
        discussion.comment_url(parent.map_or(comment.slug.as_str(), |p| p.slug.as_str()))
    };
    Ok(format!("{page}#{}", comment.anchor()))
}

#[derive(Template)]
#[template(path = "comments/permalink.html")]
pub(crate) struct PermalinkPage {
    pub(crate) layout: Layout,
    pub(crate) thread: ThreadView,
}

/// `GET {discussion}/comments/{slug}`: the comment and its sub-thread; 404 for a malformed slug
/// or one that names no comment a reader may see.
pub(crate) async fn permalink(
    req: &HttpRequest,
    state: &AppState,
    discussion: Discussion,
    count: i64,
    slug: &CommentPath,
    after: Option<&str>,
) -> Result<HttpResponse, AppError> {
    let thread = thread::sub_thread(&state.db, discussion, count, slug, after, &state.comments)
        .await?
        .ok_or(AppError::NotFound)?;
    let mut thread = thread;
    thread.prefill_remembered(req);
    render_permalink(req, thread, StatusCode::OK)
}

fn render_permalink(
    req: &HttpRequest,
    thread: ThreadView,
    status: StatusCode,
) -> Result<HttpResponse, AppError> {
    let page = PermalinkPage {
        layout: Layout::public(req),
        thread,
    };
    let html = page
        .render()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}")))?;
    Ok(html_response(status, html))
}

/// `POST {discussion}/comments/{slug}`: a reply. A refused reply shows the parent's permalink
/// page with the reply form open and filled in.
pub(crate) async fn reply(
    req: &HttpRequest,
    state: &AppState,
    comment_rate: &CommentRateLimit,
    discussion: Discussion,
    count: i64,
    slug: &CommentPath,
    input: CommentInput,
) -> Result<HttpResponse, AppError> {
    match submit(req, state, comment_rate, &discussion, Some(slug), input).await? {
        Submitted::Posted(redirect) => Ok(redirect),
        Submitted::Refused(form, status) => {
            let mut thread =
                thread::sub_thread(&state.db, discussion, count, slug, None, &state.comments)
                    .await?
                    .ok_or(AppError::NotFound)?;
            thread.reply = Some((slug.to_string(), form));
            render_permalink(req, thread, status)
        }
    }
}
