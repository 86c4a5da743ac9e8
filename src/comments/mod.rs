//! Threaded comments on any discussion — a product or a content node (page, post, gallery) —
//! one document per comment in `comments`, ordered into threads by `full_slug`.
//!
//! A page shows a discussion's comments by building a [`Discussion`] and calling
//! [`thread::first_page`] (or [`thread::page`]); it includes `comments/_thread.html`, which also
//! carries the post and reply forms. The POST handlers of each kind of discussion
//! (`catalog::pages::post_comment`, `content::pages::post_reply` …) stay thin over
//! [`pages::submit`] and [`pages::reply`]. Every write of [`store`] reports itself in
//! [`changes`], which the content pages' cache follows.

pub(crate) mod changes;
pub mod identity;
pub mod names;
pub(crate) mod notify;
pub(crate) mod pages;
pub mod policy;
pub(crate) mod rate_limit;
pub mod slugs;
pub mod store;
pub(crate) mod text;
pub(crate) mod thread;

use bson::oid::ObjectId;
use bson::DateTime;
use serde::{Deserialize, Serialize};

pub use slugs::CommentPath;
pub use store::{indexes, COLLECTION};

/// The HTML id of the comment with permalink `slug` (see [`Comment::anchor`]).
pub fn anchor_of(slug: &str) -> String {
    format!("comment-{}", slug.replace('/', "-"))
}

/// What is being discussed: the kind decides where the discussion's counter lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscussionKind {
    Product,
    /// A content node (post, page, photo) in `nodes`.
    Node,
}

impl DiscussionKind {
    pub(crate) const ALL: [DiscussionKind; 2] = [DiscussionKind::Product, DiscussionKind::Node];

    /// The collection of the discussed documents. Named here rather than taken from the
    /// catalog and content areas, which sit above comments and embed its threads (their tests
    /// check the names agree).
    pub fn collection(&self) -> &'static str {
        match self {
            DiscussionKind::Product => "products",
            DiscussionKind::Node => "nodes",
        }
    }

    /// `(collection, field path)` of the number of visible comments on the discussion's own
    /// document, which listings show without counting comments.
    pub(crate) fn counter(&self) -> (&'static str, &'static str) {
        match self {
            DiscussionKind::Product => (self.collection(), "comment_count"),
            DiscussionKind::Node => (self.collection(), "metadata.comment_count"),
        }
    }

    /// The field path of the owner's "comments closed" flag on the discussed document (set from
    /// Admin → Comments; missing reads as open).
    pub(crate) fn closed_field(&self) -> &'static str {
        match self {
            DiscussionKind::Product => "comments_closed",
            DiscussionKind::Node => "metadata.comments_closed",
        }
    }
}

/// One discussion as a page sees it.
#[derive(Debug, Clone)]
pub struct Discussion {
    pub id: ObjectId,
    pub(crate) kind: DiscussionKind,
    /// What the discussion is about, for headings ("Comments on …").
    pub(crate) title: String,
    /// The discussion page's own URL (`/products/blue-train`); comments live under
    /// `{base_url}/comments`.
    pub(crate) base_url: String,
    /// Closed by the owner (Admin → Comments): no new comments or replies.
    pub(crate) closed: bool,
    /// When the discussion started (a node's publication, a product's creation): with
    /// `comments.close_after_days` it closes that many days later. `None`: never by age.
    pub(crate) opened: Option<DateTime>,
}

impl Discussion {
    /// Whether new comments and replies are taken at `now`: not closed by the owner, and
    /// (when `close_after_days` is not 0) started less than that many days ago.
    pub(crate) fn is_open(&self, now: DateTime, close_after_days: u32) -> bool {
        if self.closed {
            return false;
        }
        match self.opened {
            Some(opened) if close_after_days > 0 => {
                let age_ms = now.timestamp_millis() - opened.timestamp_millis();
                age_ms < i64::from(close_after_days) * 86_400_000
            }
            _ => true,
        }
    }

    /// Where a new top-level comment is posted.
    pub(crate) fn comments_url(&self) -> String {
        format!("{}/comments", self.base_url)
    }

    /// A comment's permalink, which is also where a reply to it is posted.
    pub(crate) fn comment_url(&self, slug: &str) -> String {
        format!("{}/comments/{slug}", self.base_url)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommentStatus {
    Visible,
    /// Held by the moderation policy until a moderator approves it (not shown, not counted).
    Pending,
    /// Judged spam by a moderator: never shown.
    Spam,
    /// Taken down by a moderator; can be shown again.
    Hidden,
    /// Deleted by a moderator: shown as "\[deleted\]" while replies hang from it, restorable for
    /// `comments.restore_days`, then purged.
    Deleted,
}

impl CommentStatus {
    pub(crate) const ALL: [CommentStatus; 5] = [
        CommentStatus::Pending,
        CommentStatus::Visible,
        CommentStatus::Hidden,
        CommentStatus::Spam,
        CommentStatus::Deleted,
    ];

    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            CommentStatus::Visible => "visible",
            CommentStatus::Pending => "pending",
            CommentStatus::Spam => "spam",
            CommentStatus::Hidden => "hidden",
            CommentStatus::Deleted => "deleted",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<CommentStatus> {
        CommentStatus::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Author {
    pub name: String,
}

/// A comment as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comment {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    pub discussion_id: ObjectId,
    /// `None` (stored as null) for a top-level comment.
    pub parent_id: Option<ObjectId>,
    /// The path of random parts from the top-level comment down: `34db/8bda`. Unique per
    /// discussion; it is the permalink.
    pub slug: CommentPath,
    /// The same path with each part prefixed by its posting time, so sorting by it gives each
    /// thread in posting order with replies right after their parent.
    pub full_slug: String,
    pub posted: DateTime,
    pub author: Author,
    pub text: String,
    pub status: CommentStatus,
    /// Written from the admin area: shown with the staff badge.
    #[serde(default)]
    pub staff: bool,
    /// The commenter's email, never shown: only for reply notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The commenter asked to be emailed about replies to this comment (and has not
    /// unsubscribed since).
    #[serde(default)]
    pub notify: bool,
    /// When a moderator deleted it: restorable until `comments.restore_days` later, then purged
    /// (text wiped, and removed when nothing replies). `None` once purged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<DateTime>,
    /// The status it had before it was deleted, which a restore gives back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_from: Option<CommentStatus>,
    /// The customer account signed in when it was posted (`identity`); absent for anonymous
    /// comments and once the account is erased.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<ObjectId>,
    /// Signed with the posting account's own display name: shown with the "verified" mark.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verified: bool,
}

impl Comment {
    /// 0 for a top-level comment.
    pub(crate) fn depth(&self) -> usize {
        self.slug.matches('/').count()
    }

    /// The permalink of the top-level comment of this comment's thread.
    pub(crate) fn thread_slug(&self) -> &str {
        self.slug.split('/').next().unwrap_or(&self.slug)
    }

    /// The HTML id of the comment on a page (`comment-34db-8bda`): where posting it, and the
    /// admin's links, take the browser.
    pub fn anchor(&self) -> String {
        anchor_of(&self.slug)
    }

    /// `22 November 2026, 20:30 UTC`, in the site's time zone.
    pub(crate) fn posted_display(&self) -> String {
        let zone = crate::db::site::time_zone();
        format!(
            "{} {}",
            zone.format(self.posted, "%-d %B %Y, %H:%M"),
            zone.abbreviation(self.posted)
        )
    }
}
