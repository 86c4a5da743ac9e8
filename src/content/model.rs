//! The `nodes` collection: every piece of content (pages, blog entries, photos, videos,
//! quotes, links) is one document, its common fields under `metadata` and the type's own
//! fields in `metadata.detail`. Sections group nodes under a URL (`/{section}/{slug}`).
//!
//! Publication is recorded, not recomputed: a node published now, or a scheduled node whose
//! time came, carries `metadata.live: true`, and readers see every live node whatever the clock
//! says later. Comparing `published` with the current time on every request instead would hide
//! a post for as long as the server's clock is stepped back (see docs/invariants.md).

use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};
use serde::{Deserialize, Serialize};

use crate::content::excerpt::Summary;
use crate::content::revisions::Revision;
use crate::content::video::Video;
use crate::domain::{EditVersion, Slug};

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
    /// [`go_live_due`](crate::content::store::go_live_due) (the jobs, start-up, and any read that shows a due node), cleared by
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
    /// fills it in ([`backfill_summaries`](crate::content::store::backfill_summaries)).
    #[serde(default)]
    pub summary: Option<Summary>,
    /// The stored files the node shows ([`Detail::media`]), worked out at every save like the
    /// summary; `None` only on nodes stored before it existed until start-up fills it in
    /// ([`backfill_summaries`](crate::content::store::backfill_summaries)). Index `media_used` (the media library's "used by").
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

    /// Whether readers see it at `now` (the site clock, `Db::now`): live, or scheduled for a
    /// time that has come (the jobs will mark it live).
    pub fn is_published(&self, now: DateTime) -> bool {
        self.metadata.live
            || self
                .metadata
                .published
                .is_some_and(|p| p.timestamp_millis() <= now.timestamp_millis())
    }

    /// "draft", "scheduled" or "published" at `now` (the site clock), for admin lists.
    pub fn status(&self, now: DateTime) -> &'static str {
        match self.metadata.published {
            None => "draft",
            Some(_) if !self.is_published(now) => "scheduled",
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

/// What an editor fills in for a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInput {
    pub section: String,
    pub slug: Slug,
    pub title: String,
    pub author: String,
    pub detail: Detail,
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
