//! Admin → Comments: the newest comments across every discussion, by status, each linked to
//! its place in its discussion, with hide, unhide and delete, and replies written as staff
//! (shown with the staff badge, under a name the public forms refuse).

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;
use serde::Deserialize;

use crate::comments::pages::MAX_NAME_CHARS;
use crate::comments::store::{self, DiscussionLink, Moderated, NewComment, PostError};
use crate::comments::{names, notify, Comment, CommentStatus};
use crate::db::{Db, DbError};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

/// Characters of a search kept (a longer one is cut).
const MAX_QUERY_CHARS: usize = 200;
/// Rows on the moderation list.
const LIST_LIMIT: i64 = 100;
/// Characters of a comment shown in a row.
const EXCERPT_CHARS: usize = 240;

/// A comment as the moderation screens list it.
pub(crate) struct ModeratedComment {
    pub(crate) comment: Comment,
    /// `None` when its discussion no longer exists.
    pub(crate) discussion: Option<DiscussionLink>,
}

impl ModeratedComment {
    /// The comment in its thread on the public site.
    pub(crate) fn context_url(&self) -> Option<String> {
        self.discussion.as_ref().map(|d| {
            format!(
                "{}/comments/{}#{}",
                d.base_url,
                self.comment.thread_slug(),
                self.comment.anchor()
            )
        })
    }

    pub(crate) fn excerpt(&self) -> String {
        let text = &self.comment.text;
        match text.char_indices().nth(EXCERPT_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.clone(),
        }
    }

    pub(crate) fn is_visible(&self) -> bool {
        self.comment.status == CommentStatus::Visible
    }

    /// `(action, button label)` of the moderation buttons this comment's status allows.
    pub(crate) fn actions(&self) -> Vec<(&'static str, &'static str)> {
        use CommentStatus::*;
        let status = self.comment.status;
        let mut actions = Vec::new();
        if status == Pending {
            actions.push(("approve", "Approve"));
        }
        if matches!(status, Pending | Visible | Hidden) {
            actions.push(("spam", "Spam"));
        }
        if status == Visible {
            actions.push(("hide", "Hide"));
        }
        if status == Hidden {
            actions.push(("unhide", "Unhide"));
        }
        if matches!(status, Pending | Visible | Hidden) {
            actions.push(("delete", "Delete"));
        }
        // Restorable until the purge job takes `deleted_at` away.
        if status == Deleted && self.comment.deleted_at.is_some() {
            actions.push(("restore", "Restore"));
        }
        actions
    }
}

/// The newest comments (of `status`), each with its discussion's link.
pub(crate) async fn newest_with_links(
    db: &Db,
    status: Option<CommentStatus>,
    discussion: Option<ObjectId>,
    limit: i64,
) -> Result<Vec<ModeratedComment>, DbError> {
    let comments = store::newest(db, status, discussion, limit).await?;
    with_links(db, comments).await
}

/// `comments`, each with its discussion's link (one query per kind of discussion).
async fn with_links(db: &Db, comments: Vec<Comment>) -> Result<Vec<ModeratedComment>, DbError> {
    let mut ids: Vec<ObjectId> = comments.iter().map(|c| c.discussion_id).collect();
    ids.sort();
    ids.dedup();
    let links = store::discussion_links(db, &ids).await?;
    Ok(comments
        .into_iter()
        .map(|comment| ModeratedComment {
            discussion: links.get(&comment.discussion_id).cloned(),
            comment,
        })
        .collect())
}

#[derive(Template)]
#[template(path = "admin/comments.html")]
pub(crate) struct CommentListPage {
    pub(crate) layout: Layout,
    pub(crate) status: Option<CommentStatus>,
    /// Only this discussion's comments, when set.
    pub(crate) discussion: Option<ObjectId>,
    pub(crate) comments: Vec<ModeratedComment>,
    pub(crate) total: u64,
    /// The search text (name or comment text), empty when not searching.
    pub(crate) query: String,
    /// With the discussion filter: whether its owner closed it to new comments.
    pub(crate) closed: Option<bool>,
}

impl CommentListPage {
    pub(crate) fn statuses(&self) -> [CommentStatus; 5] {
        CommentStatus::ALL
    }

    pub(crate) fn is_selected(&self, status: &CommentStatus) -> bool {
        self.status == Some(*status)
    }

    pub(crate) fn search_scan(&self) -> i64 {
        store::SEARCH_SCAN
    }

    pub(crate) fn status_param(&self) -> &'static str {
        self.status.map(|s| s.as_str()).unwrap_or("")
    }

    /// The list address for `status` (all when empty), keeping the discussion filter.
    pub(crate) fn filter_url(&self, status: &str) -> String {
        let mut qs = form_urlencoded::Serializer::new(String::new());
        if !status.is_empty() {
            qs.append_pair("status", status);
        }
        if let Some(d) = self.discussion {
            qs.append_pair("discussion", &d.to_hex());
        }
        let qs = qs.finish();
        if qs.is_empty() {
            "/admin/comments".to_string()
        } else {
            format!("/admin/comments?{qs}")
        }
    }
}

/// `GET /admin/comments?status=&discussion=`: an unknown status shows every comment; a
/// discussion id narrows the list to that discussion.
pub(crate) async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let status = params.get("status").and_then(|s| CommentStatus::parse(s));
    let discussion = params
        .get("discussion")
        .and_then(|d| ObjectId::parse_str(d).ok());
    let query: String = params
        .get("q")
        .map(|q| q.trim().chars().take(MAX_QUERY_CHARS).collect())
        .unwrap_or_default();
    let (comments, total) = if query.is_empty() {
        let comments = newest_with_links(&state.db, status, discussion, LIST_LIMIT).await?;
        (comments, store::count(&state.db, status, discussion).await?)
    } else {
        let found =
            store::search_newest(&state.db, status, discussion, &query, LIST_LIMIT as usize)
                .await?;
        let total = found.len() as u64;
        (with_links(&state.db, found).await?, total)
    };
    let closed = match discussion {
        Some(id) => store::closed_by_owner(&state.db, id).await?,
        None => None,
    };
    render(&CommentListPage {
        layout: Layout::admin(&req),
        status,
        discussion,
        comments,
        total,
        query,
        closed,
    })
}

/// What the close/reopen button sends besides the CSRF token.
#[derive(Debug, Deserialize)]
pub(crate) struct ClosingForm {
    /// "yes" closes the discussion, "no" reopens it.
    #[serde(default)]
    pub(crate) closed: String,
}

/// `POST /admin/comments/discussions/{id}/closed`: close a discussion to new comments or reopen
/// it; back to its comments. Anything but "yes"/"no" is refused without a change.
pub(crate) async fn set_closed(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<ClosingForm>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let closed = match form.closed.as_str() {
        "yes" => true,
        "no" => false,
        _ => {
            return Err(AppError::BadRequest(
                "Choose whether to close or reopen the comments.".into(),
            ))
        }
    };
    if !store::set_closed(&state.db, id, closed).await? {
        return Err(AppError::NotFound);
    }
    flash::push(
        &req.get_session(),
        Level::Success,
        if closed {
            "Comments are closed on this discussion."
        } else {
            "Comments are open again on this discussion."
        },
    );
    Ok(see_other(&format!(
        "/admin/comments?discussion={}",
        id.to_hex()
    )))
}

/// What the moderation buttons send besides the CSRF token: the list filter to return to.
#[derive(Debug, Deserialize)]
pub(crate) struct ModerationForm {
    #[serde(default)]
    pub(crate) back_status: String,
}

fn back_to_list(form: &ModerationForm) -> HttpResponse {
    match CommentStatus::parse(&form.back_status) {
        Some(s) => see_other(&format!("/admin/comments?status={}", s.as_str())),
        None => see_other("/admin/comments"),
    }
}

/// An id from the URL; one that is not an ObjectId is a 404.
use crate::web::parse_object_id as parse_id;

/// Apply moderation `action` to comment `id`: `(done, unchanged)` for the flash.
async fn apply(
    db: &Db,
    id: ObjectId,
    action: &str,
    restore_days: u32,
) -> Result<Moderated, AppError> {
    Ok(match action {
        "hide" => store::hide(db, id).await?,
        "unhide" => store::unhide(db, id).await?,
        "approve" => match store::approve(db, id).await? {
            Some(comment) => {
                notify_parent(db, &comment).await;
                Moderated::Done
            }
            None => Moderated::Unchanged,
        },
        "spam" => store::mark_spam(db, id).await?,
        "delete" => store::delete(db, id).await?,
        "restore" => store::restore(db, id, restore_days).await?,
        _ => return Err(AppError::NotFound),
    })
}

/// An approved reply's notification to its parent's author, queued now that it is shown.
async fn notify_parent(db: &Db, reply: &Comment) {
    let Some(parent_id) = reply.parent_id else {
        return;
    };
    let queued = async {
        let Some(parent) = store::by_id(db, parent_id).await? else {
            return Ok(false);
        };
        let links = store::discussion_links(db, &[reply.discussion_id]).await?;
        let Some(link) = links.get(&reply.discussion_id) else {
            return Ok(false);
        };
        let mut shown = reply.clone();
        shown.status = CommentStatus::Visible;
        notify::queue_reply_notification(db, &link.discussion(reply.discussion_id), &parent, &shown)
            .await
    };
    if let Err(e) = queued.await {
        tracing::warn!(error = %e, comment = %reply.id, "could not queue a reply notification");
    }
}

fn messages(action: &str) -> (&'static str, &'static str) {
    match action {
        "hide" => (
            "Comment hidden.",
            "That comment was not visible, so nothing changed.",
        ),
        "unhide" => (
            "Comment shown again.",
            "That comment was not hidden, so nothing changed.",
        ),
        "approve" => (
            "Comment approved: it is shown now.",
            "That comment was not waiting for approval.",
        ),
        "spam" => (
            "Comment marked as spam.",
            "That comment was already spam or deleted.",
        ),
        "restore" => (
            "Comment restored.",
            "That comment was not deleted, or its restore period is over, so nothing changed.",
        ),
        _ => (
            "Comment deleted. It can be restored from the \"deleted\" list.",
            "That comment was already deleted.",
        ),
    }
}

async fn moderate(
    req: &HttpRequest,
    state: &AppState,
    id: &str,
    form: &ModerationForm,
    action: &str,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(id)?;
    let db = &state.db;
    store::by_id(db, id).await?.ok_or(AppError::NotFound)?;
    let result = apply(db, id, action, state.comments.restore_days).await?;
    let (done, unchanged) = messages(action);
    let (level, message) = match result {
        Moderated::Done => (Level::Success, done),
        Moderated::Unchanged => (Level::Info, unchanged),
    };
    flash::push(&req.get_session(), level, message);
    Ok(back_to_list(form))
}

/// `POST /admin/comments/{id}/approve`: a held comment goes live.
pub(crate) async fn approve(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<ModerationForm>,
) -> Result<HttpResponse, AppError> {
    moderate(&req, &state, &id, &form, "approve").await
}

/// `POST /admin/comments/{id}/spam`
pub(crate) async fn spam(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<ModerationForm>,
) -> Result<HttpResponse, AppError> {
    moderate(&req, &state, &id, &form, "spam").await
}

/// Comments one bulk action may name.
const BULK_LIMIT: usize = LIST_LIMIT as usize;

/// `POST /admin/comments/bulk`: `action` (approve, spam, hide, delete) on every ticked `id`.
/// Each comment is changed on its own conditional write, so a comment changed meanwhile is
/// simply counted as unchanged.
pub(crate) async fn bulk(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, AppError> {
    let mut action = String::new();
    let mut back_status = String::new();
    let mut ids = Vec::new();
    for (key, value) in form_urlencoded::parse(&body) {
        match key.as_ref() {
            "action" => action = value.into_owned(),
            "back_status" => back_status = value.into_owned(),
            "id" => ids.push(value.into_owned()),
            _ => {}
        }
    }
    let form = ModerationForm { back_status };
    if !matches!(action.as_str(), "approve" | "spam" | "hide" | "delete") {
        flash::push(
            &req.get_session(),
            Level::Warning,
            "Please choose what to do with the ticked comments.",
        );
        return Ok(back_to_list(&form));
    }
    if ids.is_empty() || ids.len() > BULK_LIMIT {
        flash::push(
            &req.get_session(),
            Level::Warning,
            format!("Please tick from 1 to {BULK_LIMIT} comments first."),
        );
        return Ok(back_to_list(&form));
    }
    let mut done = 0;
    for id in &ids {
        let Ok(id) = ObjectId::parse_str(id) else {
            continue;
        };
        if apply(&state.db, id, &action, state.comments.restore_days).await? == Moderated::Done {
            done += 1;
        }
    }
    flash::push(
        &req.get_session(),
        Level::Success,
        format!("{action}: {done} of {} ticked comments changed.", ids.len()),
    );
    Ok(back_to_list(&form))
}

/// `POST /admin/comments/{id}/hide`
pub(crate) async fn hide(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<ModerationForm>,
) -> Result<HttpResponse, AppError> {
    moderate(&req, &state, &id, &form, "hide").await
}

/// `POST /admin/comments/{id}/unhide`
pub(crate) async fn unhide(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<ModerationForm>,
) -> Result<HttpResponse, AppError> {
    moderate(&req, &state, &id, &form, "unhide").await
}

/// `POST /admin/comments/{id}/delete`: off the page, restorable for `comments.restore_days`.
pub(crate) async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<ModerationForm>,
) -> Result<HttpResponse, AppError> {
    moderate(&req, &state, &id, &form, "delete").await
}

/// `POST /admin/comments/{id}/restore`: a deleted comment back as it was.
pub(crate) async fn restore(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<ModerationForm>,
) -> Result<HttpResponse, AppError> {
    moderate(&req, &state, &id, &form, "restore").await
}

#[derive(Template)]
#[template(path = "admin/comment_reply.html")]
pub(crate) struct StaffReplyPage {
    pub(crate) layout: Layout,
    pub(crate) parent: ModeratedComment,
    pub(crate) name: String,
    pub(crate) text: String,
    pub(crate) error: Option<String>,
}

/// What the staff reply form sends.
#[derive(Debug, Deserialize)]
pub(crate) struct StaffReplyForm {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) text: String,
}

/// The comment `id` with its discussion, when it can be replied to (visible, discussion there).
async fn reply_target(db: &Db, id: &str) -> Result<(Comment, DiscussionLink), AppError> {
    let id = parse_id(id)?;
    let comment = store::by_id(db, id).await?.ok_or(AppError::NotFound)?;
    let links = store::discussion_links(db, &[comment.discussion_id]).await?;
    let link = links
        .get(&comment.discussion_id)
        .cloned()
        .ok_or(AppError::NotFound)?;
    Ok((comment, link))
}

fn staff_name() -> String {
    format!("{} staff", crate::db::site::current().name)
}

/// `GET /admin/comments/{id}/reply`: the staff reply form.
pub(crate) async fn reply_form(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let (comment, link) = reply_target(&state.db, &id).await?;
    render(&StaffReplyPage {
        layout: Layout::admin(&req),
        parent: ModeratedComment {
            comment,
            discussion: Some(link),
        },
        name: staff_name(),
        text: String::new(),
        error: None,
    })
}

/// `POST /admin/comments/{id}/reply`: a reply marked as staff's, then to it on the site.
pub(crate) async fn reply(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<StaffReplyForm>,
) -> Result<HttpResponse, AppError> {
    let (comment, link) = reply_target(&state.db, &id).await?;
    let name = names::clean_name(&form.name);
    let text = names::cap_combining_marks(form.text.trim());
    let max = state.comments.max_length;
    let error = if comment.status != CommentStatus::Visible {
        Some("That comment is no longer shown, so it cannot be replied to.".to_string())
    } else if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        Some(format!(
            "Please sign with a name of 1 to {MAX_NAME_CHARS} characters."
        ))
    } else if text.is_empty() || text.chars().count() > max {
        Some(format!("Please write a reply of 1 to {max} characters."))
    } else {
        None
    };
    let discussion = link.discussion(comment.discussion_id);
    if let Some(error) = error {
        let page = StaffReplyPage {
            layout: Layout::admin(&req),
            parent: ModeratedComment {
                comment,
                discussion: Some(link),
            },
            name: form.name.clone(),
            text: form.text.clone(),
            error: Some(error),
        };
        let html = page
            .render()
            .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}")))?;
        return Ok(crate::web::layout::html_response(
            actix_web::http::StatusCode::UNPROCESSABLE_ENTITY,
            html,
        ));
    }
    let new = NewComment {
        name,
        text,
        staff: true,
        ..NewComment::default()
    };
    let posted = match store::post(&state.db, &discussion, Some(&comment), &new).await {
        Ok(posted) => posted,
        Err(PostError::Db(e)) => return Err(e.into()),
        Err(e) => {
            flash::push(
                &req.get_session(),
                Level::Warning,
                format!("The reply was not posted: {e}."),
            );
            return Ok(see_other("/admin/comments"));
        }
    };
    if let Err(e) =
        notify::queue_reply_notification(&state.db, &discussion, &comment, &posted).await
    {
        tracing::warn!(error = %e, "could not queue a reply notification");
    }
    flash::push(&req.get_session(), Level::Success, "Staff reply posted.");
    Ok(see_other(&format!(
        "{}#{}",
        discussion.comment_url(&comment.slug),
        posted.anchor()
    )))
}
