//! The `nodes` collection: every piece of content (pages, blog entries, photos, videos,
//! quotes, links) is one document, its common fields under `metadata` and the type's own
//! fields in `metadata.detail`. Sections group nodes under a URL (`/{section}/{slug}`).
//!
//! Publication is recorded, not recomputed: a node published now, or a scheduled node whose
//! time came, carries `metadata.live: true`, and readers see every live node whatever the clock
//! says later. Comparing `published` with the current time on every request instead would hide
//! a post for as long as the server's clock is stepped back (see docs/invariants.md).

use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;
use serde::{Deserialize, Serialize};

use crate::content::video::Video;
use crate::content::ContentError;
use crate::db::{Db, DbError};
use crate::domain::EditVersion;

pub const COLLECTION: &str = "nodes";

/// The kinds of node; each has its own `detail` fields, form fields and page partial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeType {
    Page,
    Entry,
    Photo,
    Video,
    Quote,
    Link,
}

impl NodeType {
    pub const ALL: [NodeType; 6] = [
        NodeType::Page,
        NodeType::Entry,
        NodeType::Photo,
        NodeType::Video,
        NodeType::Quote,
        NodeType::Link,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            NodeType::Page => "page",
            NodeType::Entry => "entry",
            NodeType::Photo => "photo",
            NodeType::Video => "video",
            NodeType::Quote => "quote",
            NodeType::Link => "link",
        }
    }

    pub fn parse(s: &str) -> Option<NodeType> {
        NodeType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// A section of the site: its URL segment, heading and the node types it holds.
pub struct Section {
    pub name: &'static str,
    pub title: &'static str,
    pub types: &'static [NodeType],
    /// Galleries show a grid of thumbnails rather than a stream.
    pub grid: bool,
}

/// Every section. The blog is the tumblelog: a stream of every post type.
pub const SECTIONS: &[Section] = &[
    Section {
        name: "pages",
        title: "Pages",
        types: &[NodeType::Page],
        grid: false,
    },
    Section {
        name: "blog",
        title: "Blog",
        types: &[
            NodeType::Entry,
            NodeType::Photo,
            NodeType::Video,
            NodeType::Quote,
            NodeType::Link,
        ],
        grid: false,
    },
    Section {
        name: "gallery",
        title: "Gallery",
        types: &[NodeType::Photo],
        grid: true,
    },
];

pub fn section(name: &str) -> Option<&'static Section> {
    SECTIONS.iter().find(|s| s.name == name)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Author {
    pub name: String,
}

impl PhotoDetail {
    /// The `<img>` attributes (sized copies' `srcset`, size in pixels) of the photo; `None`
    /// before its first upload, or when its size was not recorded (pages then link
    /// `/media/{id}`, which sends the largest copy).
    pub fn responsive(&self) -> Option<crate::media::sizes::Responsive> {
        crate::media::sizes::responsive(
            self.file_id?,
            u32::try_from(self.width).ok()?,
            u32::try_from(self.height).ok()?,
        )
    }
}

/// Text of a page or blog entry: Markdown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextDetail {
    pub text: String,
}

/// A photo; `file_id` is `None` until the first upload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhotoDetail {
    pub file_id: Option<ObjectId>,
    #[serde(default)]
    pub filename: String,
    #[serde(default)]
    pub content_type: String,
    #[serde(default)]
    pub width: i64,
    #[serde(default)]
    pub height: i64,
    #[serde(default)]
    pub caption: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VideoDetail {
    pub url: String,
    pub provider: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuoteDetail {
    pub text: String,
    pub source: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkDetail {
    pub url: String,
    pub text: String,
}

/// A node's type-specific fields, parsed according to `metadata.type`.
#[derive(Debug, Clone, PartialEq)]
pub enum Detail {
    Page(TextDetail),
    Entry(TextDetail),
    Photo(PhotoDetail),
    Video(VideoDetail),
    Quote(QuoteDetail),
    Link(LinkDetail),
}

impl Detail {
    pub fn kind(&self) -> NodeType {
        match self {
            Detail::Page(_) => NodeType::Page,
            Detail::Entry(_) => NodeType::Entry,
            Detail::Photo(_) => NodeType::Photo,
            Detail::Video(_) => NodeType::Video,
            Detail::Quote(_) => NodeType::Quote,
            Detail::Link(_) => NodeType::Link,
        }
    }

    pub fn to_document(&self) -> Result<Document, bson::ser::Error> {
        match self {
            Detail::Page(d) | Detail::Entry(d) => bson::to_document(d),
            Detail::Photo(d) => bson::to_document(d),
            Detail::Video(d) => bson::to_document(d),
            Detail::Quote(d) => bson::to_document(d),
            Detail::Link(d) => bson::to_document(d),
        }
    }

    pub fn parse(kind: NodeType, detail: &Document) -> Result<Detail, bson::de::Error> {
        let d = detail.clone();
        Ok(match kind {
            NodeType::Page => Detail::Page(bson::from_document(d)?),
            NodeType::Entry => Detail::Entry(bson::from_document(d)?),
            NodeType::Photo => Detail::Photo(bson::from_document(d)?),
            NodeType::Video => Detail::Video(bson::from_document(d)?),
            NodeType::Quote => Detail::Quote(bson::from_document(d)?),
            NodeType::Link => Detail::Link(bson::from_document(d)?),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    #[serde(rename = "type")]
    pub kind: NodeType,
    pub section: String,
    pub slug: String,
    pub title: String,
    pub created: DateTime,
    pub updated: DateTime,
    /// `None`: a draft. A date in the future: scheduled.
    pub published: Option<DateTime>,
    /// Readers have been (or may be) shown this node: set by "publish now" and by
    /// [`go_live_due`] (the jobs, start-up, and any read that shows a due node), cleared by
    /// unpublishing or rescheduling. Once set, a step of the clock cannot hide the node. Missing
    /// on nodes stored before the flag existed: read as `false`, and set at start-up.
    #[serde(default)]
    pub live: bool,
    pub author: Author,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Changes at every save; a save must present the nonce its form was loaded with.
    pub nonce: EditVersion,
    /// When a photo upload took the node; `None` when free.
    #[serde(default)]
    pub locked: Option<DateTime>,
    /// Kept by the comments area.
    #[serde(default)]
    pub comment_count: i64,
    /// Closed to new comments by the owner (Admin → Comments).
    #[serde(default)]
    pub comments_closed: bool,
    pub detail: Document,
}

/// A node as stored; `metadata.detail` stays a document because its shape depends on the type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    pub metadata: Metadata,
}

impl Node {
    pub fn detail(&self) -> Option<Detail> {
        Detail::parse(self.metadata.kind, &self.metadata.detail).ok()
    }

    /// This node's comments: `discussion_id` is the node's `_id`, the count is
    /// `metadata.comment_count`.
    pub fn discussion(&self) -> crate::comments::Discussion {
        crate::comments::Discussion {
            id: self.id,
            kind: crate::comments::DiscussionKind::Node,
            title: self.metadata.title.clone(),
            base_url: self.url(),
            closed: self.metadata.comments_closed,
            opened: self.metadata.published,
        }
    }

    pub fn url(&self) -> String {
        format!("/{}/{}", self.metadata.section, self.metadata.slug)
    }

    pub fn kind(&self) -> &'static str {
        self.metadata.kind.as_str()
    }

    /// Whether readers see it: live, or scheduled for a time that has come (the jobs will mark
    /// it live).
    pub fn is_published(&self) -> bool {
        self.metadata.live
            || self
                .metadata
                .published
                .is_some_and(|p| p.timestamp_millis() <= DateTime::now().timestamp_millis())
    }

    /// "draft", "scheduled" or "published", for admin lists.
    pub fn status(&self) -> &'static str {
        match self.metadata.published {
            None => "draft",
            Some(_) if !self.is_published() => "scheduled",
            Some(_) => "published",
        }
    }

    pub fn published_label(&self) -> String {
        self.metadata
            .published
            .map(|p| p.to_chrono().format("%-d %B %Y").to_string())
            .unwrap_or_default()
    }

    pub fn published_iso(&self) -> String {
        self.metadata
            .published
            .map(|p| p.to_chrono().format("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default()
    }

    pub fn updated_label(&self) -> String {
        self.metadata
            .updated
            .to_chrono()
            .format("%Y-%m-%d %H:%M")
            .to_string()
    }

    /// The photo's stored file, if it has one.
    pub fn photo_file(&self) -> Option<ObjectId> {
        match self.detail() {
            Some(Detail::Photo(p)) => p.file_id,
            _ => None,
        }
    }

    /// Markdown text of a page or entry rendered to safe HTML.
    pub fn text_html(&self) -> String {
        match self.detail() {
            Some(Detail::Page(d)) | Some(Detail::Entry(d)) => {
                crate::content::markdown::render(&d.text)
            }
            _ => String::new(),
        }
    }

    /// The allow-listed embed of a video node (`None` when the stored URL is not one).
    pub fn video(&self) -> Option<Video> {
        match self.detail() {
            Some(Detail::Video(d)) => Video::parse(&d.url),
            _ => None,
        }
    }

    /// The `<img>` attributes of the photo's sized copies (see [`PhotoDetail::responsive`]).
    pub fn responsive_photo(&self) -> Option<crate::media::sizes::Responsive> {
        self.photo()?.responsive()
    }

    pub fn photo(&self) -> Option<PhotoDetail> {
        match self.detail() {
            Some(Detail::Photo(d)) => Some(d),
            _ => None,
        }
    }

    pub fn quote(&self) -> Option<QuoteDetail> {
        match self.detail() {
            Some(Detail::Quote(d)) => Some(d),
            _ => None,
        }
    }

    /// A link node's target, only when it is an http(s) address (never `javascript:`).
    pub fn link(&self) -> Option<LinkDetail> {
        match self.detail() {
            Some(Detail::Link(d)) if is_web_url(&d.url) => Some(d),
            _ => None,
        }
    }

    pub fn comments_label(&self) -> String {
        match self.metadata.comment_count {
            1 => "1 comment".to_string(),
            n => format!("{n} comments"),
        }
    }
}

/// True for an absolute http:// or https:// URL without spaces or control characters.
pub fn is_web_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://"))
        && url.len() <= 2000
        && url.len() > "https://".len()
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

pub fn indexes() -> Vec<IndexModel> {
    vec![
        // A node's URL; unique so two nodes of a section cannot share a slug.
        IndexModel::builder()
            .keys(doc! { "metadata.section": 1, "metadata.slug": 1 })
            .options(
                IndexOptions::builder()
                    .unique(true)
                    .name("section_slug".to_string())
                    .build(),
            )
            .build(),
        // Scheduled nodes whose time came, for [`go_live_due`]: not live (false or missing,
        // which indexes as null), by publication time.
        IndexModel::builder()
            .keys(doc! { "metadata.live": 1, "metadata.published": 1 })
            .options(
                IndexOptions::builder()
                    .name("live_published".to_string())
                    .build(),
            )
            .build(),
        // Section lists and feeds, newest first.
        IndexModel::builder()
            .keys(doc! { "metadata.section": 1, "metadata.published": -1 })
            .options(
                IndexOptions::builder()
                    .name("section_published".to_string())
                    .build(),
            )
            .build(),
        // Tag pages.
        IndexModel::builder()
            .keys(doc! { "metadata.tags": 1 })
            .options(IndexOptions::builder().name("tags".to_string()).build())
            .build(),
        // Finding the node that holds a photo file (orphan clean-up).
        IndexModel::builder()
            .keys(doc! { "metadata.detail.file_id": 1 })
            .options(
                IndexOptions::builder()
                    .name("photo_file".to_string())
                    .build(),
            )
            .build(),
    ]
}

/// For saves an editor is shown as done (create, edit, publish, tags, photo swaps): journaled
/// before the answer (`database.write_concern`).
pub fn durable(db: &Db) -> mongodb::Collection<Node> {
    db.durable(COLLECTION)
}

pub fn collection(db: &Db) -> mongodb::Collection<Node> {
    db.collection(COLLECTION)
}

/// What an editor fills in for a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInput {
    pub section: String,
    pub slug: String,
    pub title: String,
    pub author: String,
    pub detail: Detail,
}

/// The nodes a public visitor may see at `now`: every live node, and every scheduled one whose
/// time has come but that [`go_live_due`] has not marked yet (and nodes stored before the flag,
/// whose `published` is in the past). Drafts (`published: null`) match neither. Merge it into a
/// filter that bounds an index by its other fields (section, slug, tag).
pub fn visible_at(now: DateTime) -> Document {
    doc! { "$or": [
        { "metadata.live": true },
        { "metadata.published": { "$lte": now } },
    ] }
}

/// `filter` narrowed to what a visitor may see at `now` ([`visible_at`]).
fn visible(mut filter: Document, now: DateTime) -> Document {
    filter.extend(visible_at(now));
    filter
}

/// Nodes due to go live at `now`: not live (false, or missing on nodes stored before the flag)
/// and published at or before `now`. Served by the `live_published` index.
pub fn due_query(now: DateTime) -> Document {
    doc! {
        "metadata.live": { "$in": [false, Bson::Null] },
        "metadata.published": { "$lte": now },
    }
}

/// Mark live every node whose publication time has come: the background jobs run it, start-up
/// runs it (which also migrates nodes stored before the flag existed), and so does any read that
/// showed a node not yet marked. Idempotent, and safe for several instances at once: each update
/// re-checks the filter, so a node unpublished or rescheduled meanwhile is left alone. Returns
/// how many nodes went live.
pub async fn go_live_due(db: &Db) -> Result<u64, DbError> {
    let result = collection(db)
        .update_many(
            due_query(db.now()),
            doc! { "$set": { "metadata.live": true } },
        )
        .await?;
    Ok(result.modified_count)
}

/// Readers were just shown `nodes`: mark live any of them that is not yet, so that they stay
/// shown even if the clock steps back before the jobs run. A no-op (no write) when all are live.
async fn keep_shown(db: &Db, nodes: &[Node]) -> Result<(), DbError> {
    let ids: Vec<ObjectId> = nodes
        .iter()
        .filter(|n| !n.metadata.live)
        .map(|n| n.id)
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let mut filter = due_query(db.now());
    filter.insert("_id", doc! { "$in": ids });
    collection(db)
        .update_many(filter, doc! { "$set": { "metadata.live": true } })
        .await?;
    Ok(())
}

/// Create a node (a draft unless `published` is given) with a fresh nonce; live when
/// `published` is not in the future.
pub async fn create(
    db: &Db,
    input: NodeInput,
    published: Option<DateTime>,
    tags: Vec<String>,
) -> Result<Node, ContentError> {
    let now = db.now();
    let detail = input
        .detail
        .to_document()
        .map_err(|e| ContentError::Db(DbError::Other(e.into())))?;
    let node = Node {
        id: ObjectId::new(),
        metadata: Metadata {
            kind: input.detail.kind(),
            section: input.section,
            slug: input.slug,
            title: input.title,
            created: now,
            updated: now,
            published,
            live: published.is_some_and(|p| p <= now),
            author: Author { name: input.author },
            tags,
            nonce: EditVersion::new(),
            locked: None,
            comment_count: 0,
            comments_closed: false,
            detail,
        },
    };
    durable(db).insert_one(&node).await?;
    Ok(node)
}

pub async fn by_id(db: &Db, id: ObjectId) -> Result<Option<Node>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": id }).await?)
}

/// The published node at `/{section}/{slug}` (drafts and scheduled nodes are not found).
pub async fn published_by_slug(
    db: &Db,
    section: &str,
    slug: &str,
) -> Result<Option<Node>, DbError> {
    let filter = doc! { "metadata.section": section, "metadata.slug": slug };
    let node = collection(db).find_one(visible(filter, db.now())).await?;
    if let Some(node) = &node {
        keep_shown(db, std::slice::from_ref(node)).await?;
    }
    Ok(node)
}

/// One page of a section's published nodes, newest first, and how many there are.
pub async fn published_page(
    db: &Db,
    section: &str,
    skip: u64,
    limit: i64,
) -> Result<(Vec<Node>, u64), DbError> {
    let filter = visible(doc! { "metadata.section": section }, db.now());
    let total = collection(db).count_documents(filter.clone()).await?;
    let nodes: Vec<Node> = collection(db)
        .find(filter)
        .sort(doc! { "metadata.published": -1 })
        .skip(skip)
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    keep_shown(db, &nodes).await?;
    Ok((nodes, total))
}

/// Published nodes carrying `tag`, newest first.
pub async fn published_with_tag(db: &Db, tag: &str, limit: i64) -> Result<Vec<Node>, DbError> {
    let nodes: Vec<Node> = collection(db)
        .find(visible(doc! { "metadata.tags": tag }, db.now()))
        .sort(doc! { "metadata.published": -1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    keep_shown(db, &nodes).await?;
    Ok(nodes)
}

/// Save an edit under the nonce the form was loaded with: one update that only matches while
/// the stored nonce is still that one, and that sets a new nonce. `Ok(false)`: someone saved
/// in between (or the node is gone).
pub async fn save_with_nonce(
    db: &Db,
    id: ObjectId,
    form_nonce: EditVersion,
    input: &NodeInput,
) -> Result<bool, ContentError> {
    let detail = input
        .detail
        .to_document()
        .map_err(|e| ContentError::Db(DbError::Other(e.into())))?;
    // A photo's file is changed only by upload/replace, never by the text form.
    let mut set = doc! {
        "metadata.slug": &input.slug,
        "metadata.title": &input.title,
        "metadata.author.name": &input.author,
        "metadata.updated": db.now(),
        "metadata.nonce": EditVersion::new(),
    };
    match &input.detail {
        Detail::Photo(p) => {
            set.insert("metadata.detail.caption", &p.caption);
        }
        _ => {
            set.insert("metadata.detail", detail);
        }
    }
    let result = durable(db)
        .update_one(
            doc! { "_id": id, "metadata.nonce": form_nonce },
            doc! { "$set": set },
        )
        .await?;
    Ok(result.matched_count == 1)
}

/// Publish at `when` (now or later) or unpublish (`None`). A time not after now makes the node
/// live at once; a later one (rescheduling a live node too) or none takes it off the site until
/// [`go_live_due`] finds it due. Needs no nonce: it changes nothing an edit form holds.
pub async fn set_published(db: &Db, id: ObjectId, when: Option<DateTime>) -> Result<bool, DbError> {
    let now = db.now();
    let live = when.is_some_and(|w| w <= now);
    let result = durable(db)
        .update_one(
            doc! { "_id": id },
            doc! { "$set": {
                "metadata.published": when,
                "metadata.live": live,
                "metadata.updated": now,
            } },
        )
        .await?;
    Ok(result.matched_count == 1)
}

/// Add tags; tags already there stay once.
pub async fn add_tags(db: &Db, id: ObjectId, tags: &[String]) -> Result<bool, DbError> {
    let result = durable(db)
        .update_one(
            doc! { "_id": id },
            doc! { "$addToSet": { "metadata.tags": { "$each": tags } } },
        )
        .await?;
    Ok(result.matched_count == 1)
}

pub async fn remove_tag(db: &Db, id: ObjectId, tag: &str) -> Result<bool, DbError> {
    let result = durable(db)
        .update_one(
            doc! { "_id": id },
            doc! { "$pull": { "metadata.tags": tag } },
        )
        .await?;
    Ok(result.matched_count == 1)
}

/// Normalise a tag as typed: lowercase letters and digits joined by dashes; empty when
/// nothing usable is left.
pub fn normalise_tag(tag: &str) -> String {
    let slug = crate::catalog::slugify(tag);
    slug.chars()
        .take(40)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

/// Admin list: a section's nodes, optionally of one type and with titles containing `search`.
pub struct AdminQuery<'a> {
    pub section: &'a str,
    pub kind: Option<NodeType>,
    pub search: &'a str,
    /// `updated`, `title` or `published`.
    pub sort: &'a str,
    pub skip: u64,
    pub limit: i64,
}

pub fn admin_filter(q: &AdminQuery<'_>) -> Document {
    let mut filter = doc! { "metadata.section": q.section };
    if let Some(kind) = q.kind {
        filter.insert("metadata.type", kind.as_str());
    }
    if !q.search.is_empty() {
        filter.insert(
            "metadata.title",
            doc! { "$regex": regex::escape(q.search), "$options": "i" },
        );
    }
    filter
}

pub fn admin_sort(sort: &str) -> Document {
    match sort {
        "title" => doc! { "metadata.title": 1, "_id": 1 },
        "published" => doc! { "metadata.published": -1, "_id": -1 },
        _ => doc! { "metadata.updated": -1, "_id": -1 },
    }
}

/// [`admin_filter`] with the search as a full-text query (titles, tags, text, captions,
/// sources) instead of a title substring.
pub fn admin_text_filter(q: &AdminQuery<'_>) -> Document {
    let mut filter = crate::db::text_filter(q.search);
    filter.insert("metadata.section", q.section);
    if let Some(kind) = q.kind {
        filter.insert("metadata.type", kind.as_str());
    }
    filter
}

/// The admin list: titles containing the search; when none does, the full-text matches.
pub async fn admin_list(db: &Db, q: &AdminQuery<'_>) -> Result<(Vec<Node>, u64), DbError> {
    let mut filter = admin_filter(q);
    let mut total = collection(db).count_documents(filter.clone()).await?;
    if total == 0 && !q.search.trim().is_empty() {
        filter = admin_text_filter(q);
        total = collection(db).count_documents(filter.clone()).await?;
    }
    let nodes = collection(db)
        .find(filter)
        .sort(admin_sort(q.sort))
        .skip(q.skip)
        .limit(q.limit)
        .await?
        .try_collect()
        .await?;
    Ok((nodes, total))
}

/// Delete a node; returns it as it was (its photo file is the caller's to remove).
pub async fn delete(db: &Db, id: ObjectId) -> Result<Option<Node>, DbError> {
    Ok(collection(db)
        .find_one_and_delete(doc! { "_id": id })
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_normalised_to_lowercase_words_with_dashes() {
        assert_eq!(normalise_tag("  Modal Jazz "), "modal-jazz");
        assert_eq!(normalise_tag("<b>bold</b>"), "b-bold-b");
        assert_eq!(normalise_tag("!!!"), "");
    }

    #[test]
    fn only_http_addresses_are_web_urls() {
        assert!(is_web_url("https://example.com/x"));
        assert!(!is_web_url("javascript:alert(1)"));
        assert!(!is_web_url("https://exa mple.com"));
        assert!(!is_web_url("data:text/html,hi"));
    }
}
