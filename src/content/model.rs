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

use crate::content::changes;
use crate::content::excerpt::Summary;
use crate::content::revisions::{self, Retention, Revision};
use crate::content::video::Video;
use crate::content::ContentError;
use crate::db::{redirects, Db, DbError};
use crate::domain::{EditVersion, Slug};

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
    pub(crate) const ALL: [NodeType; 6] = [
        NodeType::Page,
        NodeType::Entry,
        NodeType::Photo,
        NodeType::Video,
        NodeType::Quote,
        NodeType::Link,
    ];

    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            NodeType::Page => "page",
            NodeType::Entry => "entry",
            NodeType::Photo => "photo",
            NodeType::Video => "video",
            NodeType::Quote => "quote",
            NodeType::Link => "link",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<NodeType> {
        NodeType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// A section of the site: its URL segment, heading and the node types it holds.
pub(crate) struct Section {
    pub name: &'static str,
    pub title: &'static str,
    pub(crate) types: &'static [NodeType],
    /// Galleries show a grid of thumbnails rather than a stream.
    pub(crate) grid: bool,
}

/// Every section. The blog is the tumblelog: a stream of every post type.
pub(crate) const SECTIONS: &[Section] = &[
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

pub(crate) fn section(name: &str) -> Option<&'static Section> {
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
    pub(crate) fn responsive(&self) -> Option<crate::media::sizes::Responsive> {
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
    /// What lists show instead of the text's opening (plain text), when the editor wrote one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub excerpt: String,
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
    /// What a screen reader says instead of the photo; empty: the caption (or the title).
    #[serde(default)]
    pub alt: String,
}

impl PhotoDetail {
    /// The `alt` of the photo's `<img>`: its alt text, else its caption, else `title`.
    pub(crate) fn alt_or<'a>(&'a self, title: &'a str) -> &'a str {
        [self.alt.as_str(), self.caption.as_str()]
            .into_iter()
            .find(|t| !t.trim().is_empty())
            .unwrap_or(title)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VideoDetail {
    pub url: String,
    pub provider: String,
    /// The editor's own words about it (Markdown), shown under it; empty for none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub commentary: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuoteDetail {
    pub text: String,
    pub source: String,
    /// The editor's own words about it (Markdown), shown under it; empty for none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub commentary: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkDetail {
    pub url: String,
    pub text: String,
    /// The editor's own words about it (Markdown), shown under it; empty for none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub commentary: String,
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
    pub(crate) fn kind(&self) -> NodeType {
        match self {
            Detail::Page(_) => NodeType::Page,
            Detail::Entry(_) => NodeType::Entry,
            Detail::Photo(_) => NodeType::Photo,
            Detail::Video(_) => NodeType::Video,
            Detail::Quote(_) => NodeType::Quote,
            Detail::Link(_) => NodeType::Link,
        }
    }

    pub(crate) fn to_document(&self) -> Result<Document, bson::ser::Error> {
        match self {
            Detail::Page(d) | Detail::Entry(d) => bson::to_document(d),
            Detail::Photo(d) => bson::to_document(d),
            Detail::Video(d) => bson::to_document(d),
            Detail::Quote(d) => bson::to_document(d),
            Detail::Link(d) => bson::to_document(d),
        }
    }

    /// What a stream shows instead of the body (`content::excerpt`): an excerpt of a text, a
    /// quote or a link's words, a photo's caption; nothing of a video.
    pub(crate) fn summary(&self) -> Summary {
        match self {
            Detail::Page(d) | Detail::Entry(d) => {
                Summary::of_markdown(&d.text).with_excerpt(&d.excerpt)
            }
            Detail::Photo(d) => Summary::of_plain(&d.caption),
            Detail::Video(d) => Summary::of_markdown(&d.commentary),
            Detail::Quote(d) => Summary::of_plain(&d.text),
            Detail::Link(d) => Summary::of_plain(&d.text),
        }
    }

    /// The stored files this detail shows: a photo's file, and every file its text links to
    /// (`/media/{id}` in Markdown, a quote or a link's words). Stored as `metadata.media`, so
    /// the media library can tell where a file is used with one indexed query.
    pub(crate) fn media(&self) -> Vec<ObjectId> {
        let linked = crate::media::refs::linked_ids;
        match self {
            Detail::Page(d) | Detail::Entry(d) => linked(&d.text),
            Detail::Photo(d) => d.file_id.into_iter().collect(),
            Detail::Video(d) => linked(&d.commentary),
            Detail::Quote(d) => linked(&format!("{}\n{}\n{}", d.text, d.source, d.commentary)),
            Detail::Link(d) => linked(&format!("{}\n{}", d.text, d.commentary)),
        }
    }

    pub(crate) fn parse(kind: NodeType, detail: &Document) -> Result<Detail, bson::de::Error> {
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
    pub slug: Slug,
    pub title: String,
    pub created: DateTime,
    pub updated: DateTime,
    /// The admin who saved the last edit (shown on the conflict page: "saved by X at T");
    /// missing on nodes not edited since it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_by: Option<String>,
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
    /// What streams show instead of the body, worked out from `detail` at every save
    /// ([`Detail::summary`]); `None` only on nodes stored before it existed until start-up
    /// fills it in ([`backfill_summaries`]).
    #[serde(default)]
    pub summary: Option<Summary>,
    /// The stored files the node shows ([`Detail::media`]), worked out at every save like the
    /// summary; `None` only on nodes stored before it existed until start-up fills it in
    /// ([`backfill_summaries`]). Index `media_used` (the media library's "used by").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<Vec<ObjectId>>,
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
    /// This version of the node as a revision, kept when a save replaces it.
    pub(crate) fn revision(&self) -> Revision {
        Revision {
            id: ObjectId::new(),
            node_id: self.id,
            at: self.metadata.updated,
            by: self.metadata.updated_by.clone(),
            title: self.metadata.title.clone(),
            slug: self.metadata.slug.clone(),
            tags: self.metadata.tags.clone(),
            published: self.metadata.published,
            detail: self.metadata.detail.clone(),
        }
    }

    /// The node with `revision`'s editable fields: what it looked like then (its type, section,
    /// author and counters are today's, which a revision does not change).
    pub(crate) fn as_of(&self, revision: &Revision) -> Node {
        let mut then = self.clone();
        then.metadata.title = revision.title.clone();
        then.metadata.slug = revision.slug.clone();
        then.metadata.tags = revision.tags.clone();
        then.metadata.published = revision.published;
        then.metadata.detail = revision.detail.clone();
        then
    }

    pub(crate) fn detail(&self) -> Option<Detail> {
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

    /// `/{section}/{slug}`, the slug percent-encoded (a Unicode slug is sent as UTF-8 bytes,
    /// `/blog/caf%C3%A9`; an ASCII slug reads as it is).
    pub fn url(&self) -> String {
        url_of(&self.metadata.section, self.metadata.slug.as_str())
    }

    /// The node's tags, each with its tag page's address (percent-encoded like [`Node::url`]).
    pub(crate) fn tag_links(&self) -> Vec<(&str, String)> {
        self.metadata
            .tags
            .iter()
            .map(|tag| (tag.as_str(), tag_url(tag)))
            .collect()
    }

    /// What lists and link previews show of the node (`content::excerpt`): the stored summary,
    /// or one worked out from the detail for a node that has none yet.
    pub(crate) fn summary(&self) -> Summary {
        self.metadata
            .summary
            .clone()
            .or_else(|| self.detail().map(|d| d.summary()))
            .unwrap_or_default()
    }

    pub(crate) fn kind(&self) -> &'static str {
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

    pub(crate) fn published_label(&self) -> String {
        self.metadata
            .published
            .map(|p| crate::db::site::time_zone().format(p, "%-d %B %Y"))
            .unwrap_or_default()
    }

    pub(crate) fn published_iso(&self) -> String {
        self.metadata
            .published
            .map(|p| p.to_chrono().format("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default()
    }

    /// When it was last saved, in the site's time zone (`2026-11-28 21:40 CET`).
    pub(crate) fn updated_label(&self) -> String {
        crate::db::site::time_zone().minute_label(self.metadata.updated)
    }

    /// The photo's stored file, if it has one.
    pub fn photo_file(&self) -> Option<ObjectId> {
        match self.detail() {
            Some(Detail::Photo(p)) => p.file_id,
            _ => None,
        }
    }

    /// Markdown text of a page or entry rendered to safe HTML.
    pub(crate) fn text_html(&self) -> String {
        match self.detail() {
            Some(Detail::Page(d)) | Some(Detail::Entry(d)) => {
                crate::content::live_blocks::fill(crate::content::markdown::render_cached(&d.text))
            }
            _ => String::new(),
        }
    }

    /// Whether a video, quote or link carries commentary (works on a card: read from the
    /// stored detail without parsing it).
    pub(crate) fn has_commentary(&self) -> bool {
        self.metadata
            .detail
            .get_str("commentary")
            .is_ok_and(|c| !c.trim().is_empty())
    }

    /// A video's, quote's or link's commentary rendered to safe HTML (empty for none).
    pub(crate) fn commentary_html(&self) -> String {
        let commentary = match self.detail() {
            Some(Detail::Video(d)) => d.commentary,
            Some(Detail::Quote(d)) => d.commentary,
            Some(Detail::Link(d)) => d.commentary,
            _ => String::new(),
        };
        if commentary.trim().is_empty() {
            String::new()
        } else {
            crate::content::markdown::render_cached(&commentary)
        }
    }

    /// The allow-listed embed of a video node (`None` when the stored URL is not one).
    pub(crate) fn video(&self) -> Option<Video> {
        match self.detail() {
            Some(Detail::Video(d)) => Video::parse(&d.url),
            _ => None,
        }
    }

    /// The `<img>` attributes of the photo's sized copies (see [`PhotoDetail::responsive`]).
    pub(crate) fn responsive_photo(&self) -> Option<crate::media::sizes::Responsive> {
        self.photo()?.responsive()
    }

    pub fn photo(&self) -> Option<PhotoDetail> {
        match self.detail() {
            Some(Detail::Photo(d)) => Some(d),
            _ => None,
        }
    }

    pub(crate) fn quote(&self) -> Option<QuoteDetail> {
        match self.detail() {
            Some(Detail::Quote(d)) => Some(d),
            _ => None,
        }
    }

    /// A link node's target, only when it is an http(s) address (never `javascript:`).
    pub(crate) fn link(&self) -> Option<LinkDetail> {
        match self.detail() {
            Some(Detail::Link(d)) if is_web_url(&d.url) => Some(d),
            _ => None,
        }
    }

    /// A link node's target when it is an http(s) address; unlike [`Node::link`] it needs only
    /// the address, so it works on a card.
    pub(crate) fn link_url(&self) -> Option<&str> {
        self.metadata
            .detail
            .get_str("url")
            .ok()
            .filter(|url| self.metadata.kind == NodeType::Link && is_web_url(url))
    }

    pub(crate) fn comments_label(&self) -> String {
        match self.metadata.comment_count {
            1 => "1 comment".to_string(),
            n => format!("{n} comments"),
        }
    }
}

/// The address of the node at `slug` in `section`.
pub fn url_of(section: &str, slug: &str) -> String {
    format!("/{section}/{}", crate::web::meta::path_segment(slug))
}

/// The address of `tag`'s page.
pub(crate) fn tag_url(tag: &str) -> String {
    format!("/tags/{}", crate::web::meta::path_segment(tag))
}

/// True for an absolute http:// or https:// URL without spaces or control characters.
pub(crate) fn is_web_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://"))
        && url.len() <= 2000
        && url.len() > "https://".len()
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Indexes no query uses any more, dropped at start-up: `section_published` became
/// `section_published_id` (ties in a stream are ordered by `_id`), `tags` became
/// `tags_published` (a tag page reads only its newest nodes).
pub(crate) const RETIRED_INDEXES: [&str; 2] = ["section_published", "tags"];

pub(crate) fn indexes() -> Vec<IndexModel> {
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
        // Section streams and feeds, newest first ([`newest_first`]), and a post's neighbours.
        IndexModel::builder()
            .keys(doc! { "metadata.section": 1, "metadata.published": -1, "_id": -1 })
            .options(
                IndexOptions::builder()
                    .name("section_published_id".to_string())
                    .build(),
            )
            .build(),
        // Tag pages and feeds, newest first (a bounded read of the newest in a tag), and the
        // sitemap's tags.
        IndexModel::builder()
            .keys(doc! { "metadata.tags": 1, "metadata.published": -1 })
            .options(
                IndexOptions::builder()
                    .name("tags_published".to_string())
                    .build(),
            )
            .build(),
        // Where a stored file is shown (the media library's "used by", deleting a file,
        // whether a file only drafts show is public).
        IndexModel::builder()
            .keys(doc! { "metadata.media": 1 })
            .options(
                IndexOptions::builder()
                    .name("media_used".to_string())
                    .build(),
            )
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
pub(crate) fn durable(db: &Db) -> mongodb::Collection<Node> {
    db.durable(COLLECTION)
}

pub fn collection(db: &Db) -> mongodb::Collection<Node> {
    db.collection(COLLECTION)
}

/// What an editor fills in for a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInput {
    pub section: String,
    pub slug: Slug,
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
pub(crate) async fn keep_shown(db: &Db, nodes: &[Node]) -> Result<(), DbError> {
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
            updated_by: None,
            published,
            live: published.is_some_and(|p| p <= now),
            author: Author { name: input.author },
            tags,
            nonce: EditVersion::new(),
            locked: None,
            comment_count: 0,
            comments_closed: false,
            summary: Some(input.detail.summary()),
            media: Some(input.detail.media()),
            detail,
        },
    };
    let inserted = durable(db).insert_one(&node).await;
    changes::nodes_changed(db);
    inserted?;
    redirects::forget(db, &node.metadata.section, node.metadata.slug.as_str()).await?;
    Ok(node)
}

pub async fn by_id(db: &Db, id: ObjectId) -> Result<Option<Node>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": id }).await?)
}

/// The published node at `/{section}/{slug}` (drafts and scheduled nodes are not found).
pub(crate) async fn published_by_slug(
    db: &Db,
    section: &str,
    slug: &Slug,
) -> Result<Option<Node>, DbError> {
    let filter = doc! { "metadata.section": section, "metadata.slug": slug.as_str() };
    let node = collection(db).find_one(visible(filter, db.now())).await?;
    if let Some(node) = &node {
        keep_shown(db, std::slice::from_ref(node)).await?;
    }
    Ok(node)
}

/// The newest `limit` published nodes of a section, whole (the feeds show their bodies).
pub(crate) async fn latest(db: &Db, section: &str, limit: i64) -> Result<Vec<Node>, DbError> {
    let filter = visible(doc! { "metadata.section": section }, db.now());
    let nodes: Vec<Node> = collection(db)
        .find(filter)
        .sort(newest_first())
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    keep_shown(db, &nodes).await?;
    Ok(nodes)
}

/// The order of every stream: newest first, ties (the same millisecond) by `_id`, so that
/// `(published, _id)` orders a section completely. Served by the `section_published_id` index.
pub fn newest_first() -> Document {
    doc! { "metadata.published": -1, "_id": -1 }
}

/// What a list shows of a node: everything but the body text (`metadata.detail.text`: a
/// page's or entry's Markdown, a quote's or a link's words), which `metadata.summary` stands
/// in for.
pub(crate) fn card_projection() -> Document {
    doc! { "metadata.detail.text": 0 }
}

/// Nodes stored before `metadata.summary` or `metadata.media` existed.
fn missing_derived() -> Document {
    doc! { "$or": [{ "metadata.summary": null }, { "metadata.media": null }] }
}

/// Give every node stored before `metadata.summary` (or `metadata.media`) existed its summary
/// (and the files it shows); run at start-up. Each
/// update names the nonce it read, so a node saved meanwhile (which set its own summary) is
/// left alone, and several instances starting at once write the same values. Returns how many
/// nodes were filled in.
pub async fn backfill_summaries(db: &Db) -> Result<u64, DbError> {
    let mut filled = 0;
    let raw = db.collection::<Document>(COLLECTION);
    let mut cursor = raw
        .find(missing_derived())
        .projection(doc! { "metadata.type": 1, "metadata.detail": 1, "metadata.nonce": 1 })
        .await?;
    while let Some(stored) = cursor.try_next().await? {
        let (Ok(id), Ok(metadata)) = (stored.get_object_id("_id"), stored.get_document("metadata"))
        else {
            continue;
        };
        let kind = metadata.get_str("type").ok().and_then(NodeType::parse);
        let (Some(kind), Ok(detail), Some(nonce)) =
            (kind, metadata.get_document("detail"), metadata.get("nonce"))
        else {
            continue;
        };
        let parsed = Detail::parse(kind, detail).ok();
        let summary = parsed.as_ref().map(Detail::summary).unwrap_or_default();
        let summary = bson::to_bson(&summary).map_err(|e| DbError::Other(e.into()))?;
        let media = parsed.as_ref().map(Detail::media).unwrap_or_default();
        let mut filter = missing_derived();
        filter.insert("_id", id);
        filter.insert("metadata.nonce", nonce);
        let result = raw
            .update_one(
                filter,
                doc! { "$set": { "metadata.summary": summary, "metadata.media": media } },
            )
            .await?;
        filled += result.modified_count;
    }
    Ok(filled)
}

/// Published nodes carrying `tag`, newest first, whole: the tag feeds show their bodies, and the
/// tag pages read them whole too, because projecting the body away cost the embedded store more
/// than sending it (measured: the tag page at 2.3% of the ceiling with the projection, 3.6%
/// without). Measured again once docstore copied an exclusion projection's bytes without
/// decoding them: with [`card_projection`] the tag page was no faster (4.0% against 3.9%, then
/// 2.4% against 2.9% of the ceiling, 1 000 posts, 2 cores), so it still reads them whole.
pub(crate) async fn published_with_tag(
    db: &Db,
    tag: &str,
    limit: i64,
) -> Result<Vec<Node>, DbError> {
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
///
/// A new slug keeps the old address working: `stored` is the node as the handler read it, and
/// when that is the version the form was loaded with, its slug is recorded as an old address
/// of the node (`db::redirects`) before the update. First, so that a crash between the two
/// loses no redirect: a record naming the node at the address it still holds is shadowed by
/// the node itself, and harmless if the update then does not land.
pub async fn save_with_nonce(
    db: &Db,
    stored: &Node,
    form_nonce: EditVersion,
    input: &NodeInput,
) -> Result<bool, ContentError> {
    save_edit(db, stored, form_nonce, input, &EditExtras::default()).await
}

/// What the one edit form changes besides the fields of [`NodeInput`], in the same update.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct EditExtras {
    /// The whole tag list; `None` keeps the stored one.
    pub tags: Option<Vec<String>>,
    /// `Some(when)`: publish at `when` (`None` inside: back to draft), with `metadata.live` as
    /// [`set_published`] sets it; `None` keeps the publication as stored.
    pub published: Option<Option<DateTime>>,
    /// Who saves (`metadata.updated_by`).
    pub(crate) by: Option<String>,
    /// How many revisions of the node to keep once this save's is written
    /// (`content.revisions_kept`).
    pub(crate) kept: Retention,
    /// A photo node's new file, uploaded with the form: it replaces the stored one in the
    /// same update (the caller deletes the replaced file once the save landed).
    pub(crate) photo: Option<NewPhoto>,
}

/// A stored image becoming a photo node's file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewPhoto {
    pub(crate) image: crate::media::StoredImage,
    pub filename: String,
}

/// [`save_with_nonce`] with the tags, the publication and the editor's name in the same
/// nonce-guarded update, so a form's text and its status land together or not at all.
pub(crate) async fn save_edit(
    db: &Db,
    stored: &Node,
    form_nonce: EditVersion,
    input: &NodeInput,
    extras: &EditExtras,
) -> Result<bool, ContentError> {
    let id = stored.id;
    let renamed = stored.metadata.nonce == form_nonce && stored.metadata.slug != input.slug;
    if renamed {
        redirects::remember(
            db,
            &stored.metadata.section,
            stored.metadata.slug.as_str(),
            id,
        )
        .await?;
    }
    let detail = input
        .detail
        .to_document()
        .map_err(|e| ContentError::Db(DbError::Other(e.into())))?;
    // A photo's file changes only with a new upload (`extras.photo`), never from the text fields.
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
            set.insert("metadata.detail.alt", &p.alt);
        }
        _ => {
            set.insert("metadata.detail", detail);
        }
    }
    let summary = bson::to_bson(&input.detail.summary())
        .map_err(|e| ContentError::Db(DbError::Other(e.into())))?;
    set.insert("metadata.summary", summary);
    // A photo's file is not in the form (see above): its `metadata.media` is the upload's.
    if !matches!(input.detail, Detail::Photo(_)) {
        set.insert("metadata.media", input.detail.media());
    }
    if let (Some(new), Detail::Photo(_)) = (&extras.photo, &input.detail) {
        let image = &new.image;
        set.insert("metadata.detail.file_id", image.id);
        set.insert("metadata.detail.filename", &new.filename);
        set.insert("metadata.detail.content_type", image.kind.mime());
        set.insert("metadata.detail.width", i64::from(image.width));
        set.insert("metadata.detail.height", i64::from(image.height));
        set.insert("metadata.media", vec![image.id]);
    }
    if let Some(tags) = &extras.tags {
        set.insert("metadata.tags", tags.clone());
    }
    if let Some(when) = extras.published {
        let now = db.now();
        set.insert("metadata.published", when);
        set.insert("metadata.live", when.is_some_and(|w| w <= now));
    }
    if let Some(by) = &extras.by {
        set.insert("metadata.updated_by", by.clone());
    }
    // The update hands back the document it replaced, so the revision written below is exactly
    // the version this save overwrote (whatever `stored` the caller read), and a save that lost
    // its race (retried by the editor's merge) leaves no revision of a version it never replaced.
    let replaced = durable(db)
        .find_one_and_update(
            doc! { "_id": id, "metadata.nonce": form_nonce },
            doc! { "$set": set },
        )
        .await;
    changes::nodes_changed(db);
    let replaced = replaced?;
    let Some(replaced) = replaced else {
        return Ok(false);
    };
    if renamed {
        redirects::forget(db, &stored.metadata.section, input.slug.as_str()).await?;
    }
    // Written after the save: a crash in between loses one revision, never the save. A failure
    // here is logged, not returned: the edit is saved, and an error page would only make the
    // editor save it again (into a conflict with their own save).
    if let Err(e) = revisions::record(db, &replaced.revision(), extras.kept).await {
        tracing::warn!(node = %id, error = %e, "the revision of a save could not be kept");
    }
    Ok(true)
}

/// Publish at `when` (now or later) or unpublish (`None`). A time not after now makes the node
/// live at once; a later one (rescheduling a live node too) or none takes it off the site until
/// [`go_live_due`] finds it due. Not nonce-guarded: the admin editor publishes through
/// [`save_edit`] (with its text, in one update); this is for callers that hold no form.
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
        .await;
    changes::nodes_changed(db);
    Ok(result?.matched_count == 1)
}

/// The longest tag, in characters.
pub(crate) const MAX_TAG_CHARS: usize = 40;
/// The most tags one form submission gives (a node's or product's whole list).
pub(crate) const MAX_TAGS: usize = 20;

/// Normalise a tag as typed, by the slug rule (`domain::slugify`): lowercase letters and digits
/// of any script joined by dashes, at most [`MAX_TAG_CHARS`] characters; empty when nothing
/// usable is left. One normalised form is stored and shown, so `Café` and `café` are one tag.
pub(crate) fn normalise_tag(tag: &str) -> String {
    crate::domain::slugify_within(tag, MAX_TAG_CHARS)
}

/// The tags of a comma-separated list as typed (the node's edit form, the product form),
/// normalised, each once, in the order typed. Empty items (`a,,b`, a trailing comma) are not
/// tags. Refused, with what to tell the editor, when an item has no letter or digit left or
/// there are more than [`MAX_TAGS`]: nothing typed is dropped without a word.
pub(crate) fn parse_tags(typed: &str) -> Result<Vec<String>, String> {
    let mut tags: Vec<String> = Vec::new();
    let mut unusable: Vec<&str> = Vec::new();
    for item in typed.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match normalise_tag(item) {
            tag if tag.is_empty() => unusable.push(item),
            tag if !tags.contains(&tag) => tags.push(tag),
            _ => {}
        }
    }
    if !unusable.is_empty() {
        let quoted: Vec<String> = unusable
            .iter()
            .map(|t| format!("“{}”", t.chars().take(MAX_TAG_CHARS).collect::<String>()))
            .collect();
        return Err(format!(
            "{} has no letter or digit; a tag needs at least one.",
            quoted.join(", ")
        ));
    }
    if tags.len() > MAX_TAGS {
        return Err(format!(
            "That is {} tags; give at most {MAX_TAGS} at a time.",
            tags.len()
        ));
    }
    Ok(tags)
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
pub(crate) fn admin_text_filter(q: &AdminQuery<'_>) -> Document {
    let mut filter = crate::db::text_filter(q.search);
    filter.insert("metadata.section", q.section);
    if let Some(kind) = q.kind {
        filter.insert("metadata.type", kind.as_str());
    }
    filter
}

/// The admin list: titles containing the search; when none does, the full-text matches.
pub(crate) async fn admin_list(db: &Db, q: &AdminQuery<'_>) -> Result<(Vec<Node>, u64), DbError> {
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

/// Delete a node, its old addresses and its revisions; returns it as it was (its photo file is the caller's
/// to remove).
pub async fn delete(db: &Db, id: ObjectId) -> Result<Option<Node>, DbError> {
    let node = collection(db).find_one_and_delete(doc! { "_id": id }).await;
    changes::nodes_changed(db);
    let node = node?;
    if node.is_some() {
        redirects::forget_target(db, id).await?;
        revisions::delete_all(db, id).await?;
    }
    Ok(node)
}

/// Where a visitor asking for `/{section}/{slug}` should go when no published node is there:
/// the address now of the published node that was renamed away from it. `None` when nothing
/// was, or when that node is gone or not published.
pub(crate) async fn moved_to(
    db: &Db,
    section: &str,
    slug: &str,
) -> Result<Option<String>, DbError> {
    let Some(target) = redirects::target(db, section, slug).await? else {
        return Ok(None);
    };
    let filter = visible(doc! { "_id": target }, db.now());
    let node = collection(db).find_one(filter).await?;
    Ok(node
        .filter(|n| n.metadata.section == section)
        .map(|n| n.url()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_normalised_to_lowercase_words_with_dashes() {
        assert_eq!(normalise_tag("  Modal Jazz "), "modal-jazz");
        assert_eq!(normalise_tag("<b>bold</b>"), "b-bold-b");
        assert_eq!(normalise_tag("!!!"), "");
        assert_eq!(normalise_tag("Ñandú"), "ñandú");
        assert_eq!(normalise_tag("日本のジャズ"), "日本のジャズ");
        assert_eq!(
            normalise_tag(&"é".repeat(50)).chars().count(),
            MAX_TAG_CHARS
        );
    }

    #[test]
    fn a_tag_list_keeps_every_tag_once_and_refuses_one_without_a_letter() {
        assert_eq!(
            parse_tags("Ñandú, café,日本のジャズ, CAFÉ, ,").unwrap(),
            ["ñandú", "café", "日本のジャズ"]
        );
        assert_eq!(parse_tags(" , ").unwrap(), Vec::<String>::new());
        let refused = parse_tags("jazz, !!!, ---").unwrap_err();
        assert!(refused.contains("“!!!”, “---”"), "{refused}");
        let many: Vec<String> = (0..=MAX_TAGS).map(|n| format!("t{n}")).collect();
        assert!(parse_tags(&many.join(",")).is_err());
        assert!(parse_tags(&many[..MAX_TAGS].join(",")).is_ok());
    }

    #[test]
    fn only_http_addresses_are_web_urls() {
        assert!(is_web_url("https://example.com/x"));
        assert!(!is_web_url("javascript:alert(1)"));
        assert!(!is_web_url("https://exa mple.com"));
        assert!(!is_web_url("data:text/html,hi"));
    }
}
