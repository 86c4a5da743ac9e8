//! The comments a signed-in customer wrote (`/account/comments`): each with its status, an edit
//! form while it is younger than `comments.edit_window_minutes`, and a delete button. A delete
//! is the moderators' delete (`comments::store::delete`): shown as "\[deleted\]" while replies
//! hang from it, purged after `comments.restore_days`. Only comments posted while signed in
//! (`account_id`) are listed and may be changed; every change is conditional on the account.

use crate::accounts::session::SignedIn;
use actix_session::Session;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;
use bson::DateTime;
use serde::Deserialize;

use crate::comments::{names, store, Comment};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, render, Layout};
use crate::web::see_other;

/// Comments the page lists (the newest).
const SHOWN: i64 = 200;

/// A comment as the list shows it.
pub(crate) struct OwnComment {
    pub(crate) comment: Comment,
    pub(crate) editable: bool,
}

#[derive(Template)]
#[template(path = "account/comments.html")]
pub(crate) struct CommentsPage {
    pub(crate) layout: Layout,
    pub(crate) comments: Vec<OwnComment>,
    pub(crate) edit_window_minutes: u32,
}

#[derive(Template)]
#[template(path = "account/comment_edit.html")]
pub(crate) struct EditPage {
    pub(crate) layout: Layout,
    pub(crate) id: String,
    pub(crate) text: String,
    pub(crate) error: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct EditForm {
    pub(crate) text: String,
}

/// The earliest posting time still editable now.
fn edit_cutoff(state: &AppState) -> Option<DateTime> {
    let minutes = state.comments.edit_window_minutes;
    (minutes > 0).then(|| {
        DateTime::from_millis(
            state
                .db
                .now()
                .timestamp_millis()
                .saturating_sub(i64::from(minutes) * 60_000),
        )
    })
}

/// `GET /account/comments`
pub(crate) async fn list(
    req: HttpRequest,
    SignedIn(account): SignedIn,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let cutoff = edit_cutoff(&state);
    let comments = store::by_account(&state.db, account.id, SHOWN)
        .await?
        .into_iter()
        .map(|comment| OwnComment {
            editable: cutoff.is_some_and(|c| comment.posted >= c),
            comment,
        })
        .collect();
    render(&CommentsPage {
        layout: Layout::public(&req),
        comments,
        edit_window_minutes: state.comments.edit_window_minutes,
    })
}

/// This account's comment `id`, or not found (someone else's, made up, deleted).
async fn own(state: &AppState, account: ObjectId, id: &str) -> Result<Comment, AppError> {
    let id = ObjectId::parse_str(id).map_err(|_| AppError::NotFound)?;
    store::by_id(&state.db, id)
        .await?
        .filter(|c| c.account_id == Some(account))
        .ok_or(AppError::NotFound)
}

fn too_late(session: &Session) -> HttpResponse {
    flash::push(
        session,
        Level::Error,
        "That comment can no longer be edited: the time for edits is over.",
    );
    see_other("/account/comments")
}

/// `GET /account/comments/{id}`: the edit form, while the window is open.
pub(crate) async fn edit_form(
    req: HttpRequest,
    SignedIn(account): SignedIn,
    session: Session,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let comment = own(&state, account.id, &id).await?;
    if edit_cutoff(&state).is_none_or(|c| comment.posted < c) {
        return Ok(too_late(&session));
    }
    render(&EditPage {
        layout: Layout::public(&req),
        id: comment.id.to_hex(),
        text: comment.text,
        error: None,
    })
}

/// `POST /account/comments/{id}`
pub(crate) async fn save(
    req: HttpRequest,
    SignedIn(account): SignedIn,
    session: Session,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<EditForm>,
) -> Result<HttpResponse, AppError> {
    let comment = own(&state, account.id, &id).await?;
    let Some(cutoff) = edit_cutoff(&state) else {
        return Ok(too_late(&session));
    };
    let text = form.text.trim();
    let max = state.comments.max_length;
    let length = text.chars().count();
    let error = if text.is_empty() {
        Some("Please write a comment (or delete it from your comments).".to_string())
    } else if length > max {
        Some(format!(
            "Comments are limited to {max} characters; this one has {length}."
        ))
    } else {
        None
    };
    if let Some(error) = error {
        let html = EditPage {
            layout: Layout::public(&req),
            id: comment.id.to_hex(),
            text: form.text.chars().take(max * 2).collect(),
            error: Some(error),
        }
        .render()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a comment edit failed: {e}")))?;
        return Ok(html_response(StatusCode::UNPROCESSABLE_ENTITY, html));
    }
    let text = names::cap_combining_marks(text);
    if !store::edit_own(&state.db, comment.id, account.id, cutoff, &text).await? {
        return Ok(too_late(&session));
    }
    flash::push(&session, Level::Success, "Your comment is changed.");
    Ok(see_other("/account/comments"))
}

/// `POST /account/comments/{id}/delete`
pub(crate) async fn delete(
    SignedIn(account): SignedIn,
    session: Session,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let comment = own(&state, account.id, &id).await?;
    store::delete(&state.db, comment.id).await?;
    flash::push(&session, Level::Success, "Your comment is deleted.");
    Ok(see_other("/account/comments"))
}
