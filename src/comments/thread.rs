//! The threaded view a page shows: one page of a discussion's comments in `full_slug` order, or
//! a permalink's comment with its sub-thread, with the post and reply forms.
//!
//! Pages hold a fixed number of comments and are reached by a range on `full_slug` (`?after=` /
//! `?before=` the last / first comment shown) rather than by a page number. Why: in a discussion
//! of 10 000 comments a page number means skipping thousands of index entries, a cost that grows
//! with the discussion, while a range starts right at the first comment wanted, so every page
//! costs the same as the first. Fixed-size pages also stay readable when one thread is huge
//! (paging by top-level threads would put a 5 000-reply thread on a single page). Readers of a
//! long discussion read on from where they are, which "Newer comments" does; a page that starts
//! inside a thread links to that thread's start, and each thread has its own permalink.

use bson::doc;

use crate::comments::slugs::CommentPath;
use crate::comments::store::{self, before_in_thread_order, in_thread_order};
use crate::comments::{text, Comment, CommentStatus, Discussion};
use crate::config::CommentSettings;
use crate::db::{Db, DbError};

/// Replies deeper than this are drawn in the list of this level (each saying which comment it
/// replies to): the thread keeps its depth, the page keeps its width.
pub(crate) const MAX_INDENT: usize = 6;
/// Longest `after`/`before` value taken from an address; a real full slug of a very deep reply
/// fits easily, and anything longer matches nothing useful.
const MAX_CURSOR_LEN: usize = 16 * 1024;

/// What a comment form holds after a failed submit: the values typed, and what to fix.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommentForm {
    pub(crate) name: String,
    pub(crate) email: String,
    pub(crate) notify: bool,
    /// "Remember me" ticked: the name and email are kept for the next comment.
    pub(crate) remember: bool,
    pub(crate) text: String,
    pub(crate) name_error: Option<String>,
    pub(crate) email_error: Option<String>,
    pub(crate) text_error: Option<String>,
    /// A message about the whole submit (spam checks, a vanished parent).
    pub(crate) notice: Option<String>,
}

impl CommentForm {
    pub(crate) fn has_errors(&self) -> bool {
        self.name_error.is_some()
            || self.email_error.is_some()
            || self.text_error.is_some()
            || self.notice.is_some()
    }
}

/// One comment as drawn.
pub(crate) struct Entry {
    pub(crate) comment: Comment,
    /// Depth below the top of what is shown (0 = top level, or the permalink's comment).
    pub(crate) depth: usize,
    /// How deep its `<li>` is nested in the page's lists (the depth, capped at [`MAX_INDENT`]).
    pub(crate) level: usize,
    /// Markup closing the lists and items above this one that end before it, and opening the
    /// reply list of its parent when it is the first reply (fixed tags only).
    pub(crate) before: String,
    /// When it is not drawn inside the comment it replies to (past [`MAX_INDENT`], or its
    /// parent is on another page): `(name, permalink)` of that comment, for "replying to X".
    pub(crate) replying_to: Option<(String, String)>,
    /// The escaped text as HTML (empty for a placeholder).
    pub(crate) html: String,
    /// "\[deleted\]" or "\[hidden\]" in place of a comment that is gone but has replies shown.
    pub(crate) placeholder: Option<&'static str>,
}

impl Entry {
    /// The CSS nesting step, capped at [`MAX_INDENT`].
    pub(crate) fn indent(&self) -> usize {
        self.level
    }
}

/// Nest entries in thread order into lists: a reply's `<li>` sits in an `<ol class="replies">`
/// inside its parent's `<li>`, down to [`MAX_INDENT`] levels; deeper replies are drawn as
/// siblings in the deepest list, each saying whom it replies to. Sets each entry's `before`
/// and `level`, and returns the markup closing what the last entry leaves open.
fn nest(entries: &mut [Entry], discussion: &Discussion) -> String {
    // The open `<li>`s, outermost first: (depth, whether its reply list is open).
    let mut open: Vec<(usize, bool)> = Vec::new();
    let close = |open: &mut Vec<(usize, bool)>, markup: &mut String| {
        if let Some((_, list)) = open.pop() {
            if list {
                markup.push_str("</ol>");
            }
            markup.push_str("</li>");
        }
    };
    let names: std::collections::HashMap<bson::oid::ObjectId, (String, String)> = entries
        .iter()
        .map(|e| {
            let name = match e.placeholder {
                Some(_) => "a removed comment".to_string(),
                None => e.comment.author.name.clone(),
            };
            (
                e.comment.id,
                (name, discussion.comment_url(&e.comment.slug)),
            )
        })
        .collect();
    for entry in entries.iter_mut() {
        let mut markup = String::new();
        while open.last().is_some_and(|(d, _)| *d >= entry.depth) {
            close(&mut open, &mut markup);
        }
        if open.len() > MAX_INDENT {
            // At the deepest level: a sibling of the comment before it.
            close(&mut open, &mut markup);
        }
        if let Some(top) = open.last_mut() {
            if !top.1 {
                markup.push_str("<ol class=\"replies\">");
                top.1 = true;
            }
        }
        let drawn_under = open.last().map(|(d, _)| *d);
        entry.replying_to = match (entry.comment.parent_id, drawn_under) {
            (Some(parent), under) if under.map(|d| d + 1) != Some(entry.depth) => {
                Some(names.get(&parent).cloned().unwrap_or_else(|| {
                    let parent_slug = entry
                        .comment
                        .slug
                        .rsplit_once('/')
                        .map_or("", |(p, _)| p)
                        .to_string();
                    (
                        "an earlier comment".to_string(),
                        discussion.comment_url(&parent_slug),
                    )
                }))
            }
            _ => None,
        };
        entry.level = open.len();
        entry.before = markup;
        open.push((entry.depth, false));
    }
    let mut tail = String::new();
    while !open.is_empty() {
        close(&mut open, &mut tail);
    }
    tail
}

/// Where in a discussion a page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PageAt {
    First,
    /// The comments after this full slug.
    After(String),
    /// The comments before this full slug.
    Before(String),
}

impl PageAt {
    /// From the page address's `after` / `before` parameters (anything unusable: the first page).
    pub(crate) fn from_params(after: Option<&str>, before: Option<&str>) -> PageAt {
        let usable = |s: &&str| !s.is_empty() && s.len() <= MAX_CURSOR_LEN;
        match (after.filter(usable), before.filter(usable)) {
            (Some(a), _) => PageAt::After(a.to_string()),
            (None, Some(b)) => PageAt::Before(b.to_string()),
            (None, None) => PageAt::First,
        }
    }
}

/// A page of a discussion, or a permalink's sub-thread, ready for `comments/_thread.html`.
pub(crate) struct ThreadView {
    pub(crate) discussion: Discussion,
    /// Visible comments in the whole discussion.
    pub(crate) count: i64,
    pub(crate) entries: Vec<Entry>,
    /// On a permalink page: the comment it is for.
    pub(crate) focus: Option<String>,
    /// Links to the neighbouring pages.
    pub(crate) newer_url: Option<String>,
    pub(crate) older_url: Option<String>,
    /// When the page starts inside a thread: that thread's permalink.
    pub(crate) thread_start_url: Option<String>,
    /// Markup closing the lists the last entry leaves open (see [`Entry::before`]).
    pub(crate) closing: String,
    /// Whether new comments and replies are taken (the forms are shown).
    pub(crate) open: bool,
    /// The new-comment form (discussion pages).
    pub(crate) form: CommentForm,
    /// A reply form to show open, filled in: `(parent slug, form)`.
    pub(crate) reply: Option<(String, CommentForm)>,
    /// What every other reply form starts with: empty, or the remembered name and email.
    pub(crate) blank: CommentForm,
}

/// The session key of the name and email a commenter asked to be remembered.
pub(crate) const REMEMBERED_KEY: &str = "remembered_commenter";

/// The name and email kept by "remember me" (in the encrypted session cookie).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Remembered {
    pub(crate) name: String,
    pub(crate) email: String,
}

impl ThreadView {
    /// Fill the name and email of the empty forms from "remember me", if the commenter asked.
    pub(crate) fn prefill_remembered(&mut self, req: &actix_web::HttpRequest) {
        use actix_session::SessionExt;
        let Ok(Some(kept)) = req.get_session().get::<Remembered>(REMEMBERED_KEY) else {
            return;
        };
        self.blank = CommentForm {
            name: kept.name,
            email: kept.email,
            remember: true,
            ..CommentForm::default()
        };
        if self.form.name.is_empty() && !self.form.has_errors() {
            self.form = self.blank.clone();
        }
    }

    /// Why a just-submitted comment or reply was refused, for a closed discussion, which shows
    /// no form to carry the message.
    pub(crate) fn refused_notice(&self) -> Option<&str> {
        self.form
            .notice
            .as_deref()
            .or_else(|| self.reply.as_ref().and_then(|(_, f)| f.notice.as_deref()))
    }

    pub(crate) fn is_permalink(&self) -> bool {
        self.focus.is_some()
    }

    /// The form state for a reply form under `slug`: the failed one, or empty.
    pub(crate) fn reply_form(&self, slug: &str) -> Option<&CommentForm> {
        self.reply
            .as_ref()
            .filter(|(parent, _)| parent == slug)
            .map(|(_, form)| form)
    }

    /// [`ThreadView::reply_form`], or the blank form.
    pub(crate) fn reply_form_or_blank(&self, slug: &str) -> &CommentForm {
        self.reply_form(slug).unwrap_or(&self.blank)
    }

    pub(crate) fn comments_label(&self) -> String {
        match self.count {
            1 => "1 comment".to_string(),
            n => format!("{n} comments"),
        }
    }
}

fn page_link(base: &str, key: &str, full_slug: &str) -> String {
    let qs = form_urlencoded::Serializer::new(String::new())
        .append_pair(key, full_slug)
        .finish();
    format!("{base}?{qs}#comments")
}

/// Turn comments in thread order into entries. A hidden or deleted comment is drawn as a
/// placeholder only when the next comment replies to it (so its replies keep their place);
/// otherwise it is left out. `next` is the full slug following the last comment, if any.
fn entries(comments: Vec<Comment>, next: Option<&str>, base_depth: usize) -> Vec<Entry> {
    let mut out = Vec::with_capacity(comments.len());
    let following: Vec<Option<String>> = comments
        .iter()
        .skip(1)
        .map(|c| Some(c.full_slug.clone()))
        .chain(std::iter::once(next.map(str::to_string)))
        .collect();
    for (comment, after) in comments.into_iter().zip(following) {
        let depth = comment.depth().saturating_sub(base_depth);
        let placeholder = match comment.status {
            CommentStatus::Visible => None,
            status => {
                let prefix = format!("{}/", comment.full_slug);
                let answered = after.as_deref().is_some_and(|n| n.starts_with(&prefix));
                if !answered {
                    continue;
                }
                Some(if status == CommentStatus::Deleted {
                    "[deleted]"
                } else {
                    "[hidden by a moderator]"
                })
            }
        };
        let html = match placeholder {
            None => text::render(&comment.text),
            Some(_) => String::new(),
        };
        out.push(Entry {
            comment,
            depth,
            level: 0,
            before: String::new(),
            replying_to: None,
            html,
            placeholder,
        });
    }
    out
}

/// The comments one page of a discussion shows, as read from the database: nothing of the
/// visitor or of the forms, so a cache may keep it (the content pages keep a post's first
/// page, see `content::pages`) and build each view from it with [`view`].
#[derive(Debug, Clone, Default)]
pub(crate) struct PageComments {
    /// The page's comments in thread order, hidden and deleted ones included (a placeholder
    /// when a shown reply hangs from one).
    comments: Vec<Comment>,
    /// The full slug of the comment after the page's last, if any.
    next: Option<String>,
    has_older: bool,
    has_newer: bool,
}

/// One page of a discussion's threads.
pub(crate) async fn page(
    db: &Db,
    discussion: Discussion,
    count: i64,
    at: PageAt,
    settings: &CommentSettings,
) -> Result<ThreadView, DbError> {
    let comments = read_page(db, discussion.id, count, &at, settings.page_size).await?;
    Ok(view(db, discussion, count, comments, settings))
}

/// Read the comments of one page (`size` comments) of discussion `discussion_id`, which has
/// `count` visible comments: nothing when it has none.
pub(crate) async fn read_page(
    db: &Db,
    discussion_id: bson::oid::ObjectId,
    count: i64,
    at: &PageAt,
    size: usize,
) -> Result<PageComments, DbError> {
    let limit = size as i64 + 1;
    let filter = doc! { "discussion_id": discussion_id };
    let (comments, next, has_older, has_newer) = match at {
        // No comment a reader may see (the count is kept exact): nothing to read, since a
        // hidden comment is only shown as a placeholder above a visible reply. Most products
        // have no comments, and this would be their page's second round trip.
        _ if count <= 0 => (Vec::new(), None, false, false),
        PageAt::First | PageAt::After(_) => {
            let after = match at {
                PageAt::After(a) => Some(a.as_str()),
                _ => None,
            };
            let mut found = in_thread_order(db, filter, after, limit).await?;
            let next = (found.len() > size).then(|| found.pop()).flatten();
            let has_newer = next.is_some();
            (found, next.map(|c| c.full_slug), after.is_some(), has_newer)
        }
        PageAt::Before(before) => {
            let mut found = before_in_thread_order(db, discussion_id, before, limit).await?;
            let has_older = found.len() > size;
            if has_older {
                found.remove(0);
            }
            (found, Some(before.clone()), has_older, true)
        }
    };
    Ok(PageComments {
        comments,
        next,
        has_older,
        has_newer,
    })
}

/// The page of `discussion` (with `count` visible comments) holding `page`'s comments, with
/// empty forms, open or not by the settings and the site clock's now.
pub(crate) fn view(
    db: &Db,
    discussion: Discussion,
    count: i64,
    page: PageComments,
    settings: &CommentSettings,
) -> ThreadView {
    let open = discussion.is_open(db.now(), settings.close_after_days);
    let PageComments {
        comments,
        next,
        has_older,
        has_newer,
    } = page;
    let first_slug = comments.first().map(|c| c.full_slug.clone());
    let last_slug = comments.last().map(|c| c.full_slug.clone());
    let thread_start_url = comments
        .first()
        .filter(|c| c.depth() > 0)
        .map(|c| discussion.comment_url(c.thread_slug()));
    let mut shown = entries(comments, next.as_deref(), 0);
    let closing = nest(&mut shown, &discussion);
    let base = &discussion.base_url;
    ThreadView {
        older_url: first_slug
            .filter(|_| has_older)
            .map(|s| page_link(base, "before", &s)),
        newer_url: last_slug
            .filter(|_| has_newer)
            .map(|s| page_link(base, "after", &s)),
        thread_start_url,
        entries: shown,
        closing,
        focus: None,
        count,
        open,
        form: CommentForm::default(),
        reply: None,
        blank: CommentForm::default(),
        discussion,
    }
}

/// The first page of a discussion: what a discussion page calls.
pub(crate) async fn first_page(
    db: &Db,
    discussion: Discussion,
    count: i64,
    settings: &CommentSettings,
) -> Result<ThreadView, DbError> {
    page(db, discussion, count, PageAt::First, settings).await
}

/// A permalink: the comment `slug` and its sub-thread (a page of it, continuing after `after`).
/// `None` when the slug is malformed (checked before any query) or names no comment a reader
/// may see.
pub(crate) async fn sub_thread(
    db: &Db,
    discussion: Discussion,
    count: i64,
    slug: &CommentPath,
    after: Option<&str>,
    settings: &CommentSettings,
) -> Result<Option<ThreadView>, DbError> {
    let size = settings.page_size;
    let open = discussion.is_open(db.now(), settings.close_after_days);
    let Some(root) = store::by_slug(db, discussion.id, slug).await? else {
        return Ok(None);
    };
    let after = after.filter(|a| !a.is_empty() && a.len() <= MAX_CURSOR_LEN);
    let mut replies = in_thread_order(
        db,
        store::below(discussion.id, &root.full_slug),
        after,
        size as i64 + 1,
    )
    .await?;
    let next = (replies.len() > size).then(|| replies.pop()).flatten();
    let newer_url = match (&next, replies.last()) {
        (Some(_), Some(last)) => {
            let base = discussion.comment_url(&root.slug);
            let qs = form_urlencoded::Serializer::new(String::new())
                .append_pair("after", &last.full_slug)
                .finish();
            Some(format!("{base}?{qs}"))
        }
        _ => None,
    };
    let older_url = after.map(|_| discussion.comment_url(&root.slug));
    let base_depth = root.depth();
    let mut comments = vec![root];
    comments.extend(replies);
    let mut shown = entries(
        comments,
        next.as_ref().map(|c| c.full_slug.as_str()),
        base_depth,
    );
    // The permalink's own comment: a hidden or deleted one is shown as a placeholder when it
    // has replies, and is not found otherwise.
    if shown.first().is_none_or(|e| e.comment.slug != *slug) {
        return Ok(None);
    }
    let focus = Some(slug.to_string());
    let closing = nest(&mut shown, &discussion);
    Ok(Some(ThreadView {
        discussion,
        count,
        closing,
        entries: std::mem::take(&mut shown),
        focus,
        newer_url,
        older_url,
        thread_start_url: None,
        open,
        form: CommentForm::default(),
        reply: None,
        blank: CommentForm::default(),
    }))
}
