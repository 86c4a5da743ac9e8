//! Admin → Comments: the newest comments across every discussion, by status, each linked to
//! its place in its discussion, with hide, unhide and delete.

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;
use serde::Deserialize;

use crate::comments::store::{self, DiscussionLink, Moderated};
use crate::comments::{Comment, CommentStatus};
use crate::db::{Db, DbError};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

/// Rows on the moderation list.
const LIST_LIMIT: i64 = 100;
/// Characters of a comment shown in a row.
const EXCERPT_CHARS: usize = 240;

/// A comment as the moderation screens list it.
pub struct ModeratedComment {
    pub comment: Comment,
    /// `None` when its discussion no longer exists.
    pub discussion: Option<DiscussionLink>,
}

impl ModeratedComment {
    /// The comment in its thread on the public site.
    pub fn context_url(&self) -> Option<String> {
        self.discussion.as_ref().map(|d| {
            format!(
                "{}/comments/{}#{}",
                d.base_url,
                self.comment.thread_slug(),
                self.comment.anchor()
            )
        })
    }

    pub fn excerpt(&self) -> String {
        let text = &self.comment.text;
        match text.char_indices().nth(EXCERPT_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.clone(),
        }
    }

    pub fn is_visible(&self) -> bool {
        self.comment.status == CommentStatus::Visible
    }

    pub fn is_hidden(&self) -> bool {
        self.comment.status == CommentStatus::Hidden
    }
}

/// The newest comments (of `status`), each with its discussion's link.
pub async fn newest_with_links(
    db: &Db,
    status: Option<CommentStatus>,
    discussion: Option<ObjectId>,
    limit: i64,
) -> Result<Vec<ModeratedComment>, DbError> {
    let comments = store::newest(db, status, discussion, limit).await?;
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
pub struct CommentListPage {
    pub layout: Layout,
    pub status: Option<CommentStatus>,
    /// Only this discussion's comments, when set.
    pub discussion: Option<ObjectId>,
    pub comments: Vec<ModeratedComment>,
    pub total: u64,
}

impl CommentListPage {
    pub fn statuses(&self) -> [CommentStatus; 3] {
        CommentStatus::ALL
    }

    pub fn is_selected(&self, status: &CommentStatus) -> bool {
        self.status == Some(*status)
    }

    pub fn status_param(&self) -> &'static str {
        self.status.map(|s| s.as_str()).unwrap_or("")
    }

    /// The list address for `status` (all when empty), keeping the discussion filter.
    pub fn filter_url(&self, status: &str) -> String {
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
pub async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let status = params.get("status").and_then(|s| CommentStatus::parse(s));
    let discussion = params
        .get("discussion")
        .and_then(|d| ObjectId::parse_str(d).ok());
    let comments = newest_with_links(&state.db, status, discussion, LIST_LIMIT).await?;
    let total = store::count(&state.db, status, discussion).await?;
    render(&CommentListPage {
        layout: Layout::admin(&req),
        status,
        discussion,
        comments,
        total,
    })
}

/// What the moderation buttons send besides the CSRF token: the list filter to return to.
#[derive(Debug, Deserialize)]
pub struct ModerationForm {
    #[serde(default)]
    pub back_status: String,
}

fn back_to_list(form: &ModerationForm) -> HttpResponse {
    match CommentStatus::parse(&form.back_status) {
        Some(s) => see_other(&format!("/admin/comments?status={}", s.as_str())),
        None => see_other("/admin/comments"),
    }
}

/// An id from the URL; one that is not an ObjectId is a 404.
use crate::web::parse_object_id as parse_id;

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
    let (result, done, unchanged) = match action {
        "hide" => (
            store::hide(db, id).await?,
            "Comment hidden.",
            "That comment was not visible, so nothing changed.",
        ),
        "unhide" => (
            store::unhide(db, id).await?,
            "Comment shown again.",
            "That comment was not hidden, so nothing changed.",
        ),
        _ => (
            store::delete(db, id).await?,
            "Comment deleted.",
            "That comment was already deleted.",
        ),
    };
    let (level, message) = match result {
        Moderated::Done => (Level::Success, done),
        Moderated::Unchanged => (Level::Info, unchanged),
    };
    flash::push(&req.get_session(), level, message);
    Ok(back_to_list(form))
}

/// `POST /admin/comments/{id}/hide`
pub async fn hide(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<ModerationForm>,
) -> Result<HttpResponse, AppError> {
    moderate(&req, &state, &id, &form, "hide").await
}

/// `POST /admin/comments/{id}/unhide`
pub async fn unhide(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<ModerationForm>,
) -> Result<HttpResponse, AppError> {
    moderate(&req, &state, &id, &form, "unhide").await
}

/// `POST /admin/comments/{id}/delete`: kept as "[deleted]" while replies hang from it.
pub async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<ModerationForm>,
) -> Result<HttpResponse, AppError> {
    moderate(&req, &state, &id, &form, "delete").await
}
