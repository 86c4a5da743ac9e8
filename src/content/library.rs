//! The media library (Admin → Media): every uploaded original, newest first, with what it
//! is, its alt text and caption, and where it is used; deleting one that is used is refused
//! with the list of places.
//!
//! "Used" means shown by something: a product's `photos`, a node's `metadata.media` (a photo
//! node's file and every `/media/{id}` its text links to, worked out at each save), or the
//! site's social image. Each is one indexed query for a whole page of files (`photos` on
//! products, `media_used` on nodes), so the library costs the same with a million products.
//! Copies (thumbnails, display copies, sized copies, social cards) are not listed: they belong
//! to their original and go with it.

use std::collections::HashMap;

use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};
use futures::TryStreamExt;
use serde::Deserialize;

use crate::db::{site, Db, DbError};
use crate::media::{self, ORIGINAL_FIELDS};

/// Files on one page of the library.
pub const PAGE_SIZE: i64 = 30;
/// Longest alt text or caption kept, in characters.
pub const MAX_TEXT_CHARS: usize = 500;

/// An uploaded original as the library lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct LibraryFile {
    pub(crate) id: ObjectId,
    pub(crate) filename: String,
    /// Bytes of the original (its copies not counted).
    pub(crate) length: i64,
    pub(crate) content_type: String,
    /// Pixels, as measured at upload; 0 when not recorded.
    pub(crate) width: i64,
    pub(crate) height: i64,
    pub(crate) uploaded: Option<DateTime>,
    /// What a screen reader says instead of the picture (`metadata.alt`).
    pub alt: String,
    /// What is printed under it (`metadata.caption`).
    pub(crate) caption: String,
}

impl LibraryFile {
    fn from_entry(entry: &Document) -> Option<LibraryFile> {
        let metadata = entry.get_document("metadata").ok();
        let text = |field: &str| {
            metadata
                .and_then(|m| m.get_str(field).ok())
                .unwrap_or("")
                .to_string()
        };
        let number = |value: Option<&Bson>| match value {
            Some(Bson::Int64(n)) => *n,
            Some(Bson::Int32(n)) => i64::from(*n),
            Some(Bson::Double(n)) => *n as i64,
            _ => 0,
        };
        Some(LibraryFile {
            id: entry.get_object_id("_id").ok()?,
            filename: entry.get_str("filename").unwrap_or("").to_string(),
            length: number(entry.get("length")),
            content_type: text("content_type"),
            width: number(metadata.and_then(|m| m.get("width"))),
            height: number(metadata.and_then(|m| m.get("height"))),
            uploaded: entry.get_datetime("uploadDate").ok().copied(),
            alt: text("alt"),
            caption: text("caption"),
        })
    }

    /// The Markdown that shows this picture in a page or post.
    pub(crate) fn markdown(&self) -> String {
        let alt: String = self
            .alt
            .chars()
            .map(|c| match c {
                '[' | ']' | '\n' | '\r' => ' ',
                c => c,
            })
            .collect();
        format!("![{}](/media/{})", alt.trim(), self.id.to_hex())
    }
}

/// A filter matching originals only: a copy's metadata names the original it was made from.
fn originals() -> Document {
    let mut filter = Document::new();
    for field in ORIGINAL_FIELDS {
        filter.insert(format!("metadata.{field}"), Bson::Null);
    }
    filter
}

/// One page of the library, newest first: the originals uploaded before `before` (the last id
/// of the previous page), or the newest when `None`. Returns the page and whether more follow.
pub(crate) async fn page(
    db: &Db,
    before: Option<ObjectId>,
    limit: i64,
) -> Result<(Vec<LibraryFile>, bool), DbError> {
    let mut filter = originals();
    if let Some(before) = before {
        filter.insert("_id", doc! { "$lt": before });
    }
    let entries: Vec<Document> = db
        .collection::<Document>(media::FILES)
        .find(filter)
        .sort(doc! { "_id": -1 })
        .limit(limit + 1)
        .projection(doc! { "filename": 1, "length": 1, "uploadDate": 1, "metadata": 1 })
        .await?
        .try_collect()
        .await?;
    let more = entries.len() as i64 > limit;
    let files = entries
        .iter()
        .take(usize::try_from(limit).unwrap_or(0))
        .filter_map(LibraryFile::from_entry)
        .collect();
    Ok((files, more))
}

/// The original stored as `id`; `None` for a copy or an unknown id.
pub async fn file(db: &Db, id: ObjectId) -> Result<Option<LibraryFile>, DbError> {
    let mut filter = originals();
    filter.insert("_id", id);
    let entry = db
        .collection::<Document>(media::FILES)
        .find_one(filter)
        .await?;
    Ok(entry.as_ref().and_then(LibraryFile::from_entry))
}

/// A place that shows a stored file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Use {
    Product {
        id: ObjectId,
        title: String,
    },
    Node {
        id: ObjectId,
        title: String,
    },
    /// The site's social image (Admin → Settings).
    SocialImage,
}

impl Use {
    /// What the admin is shown: the thing's kind and title.
    pub(crate) fn label(&self) -> String {
        match self {
            Use::Product { title, .. } => format!("Product “{title}”"),
            Use::Node { title, .. } => format!("Content “{title}”"),
            Use::SocialImage => "The site's social image (Settings)".to_string(),
        }
    }

    /// Where the admin edits it.
    pub(crate) fn admin_url(&self) -> String {
        match self {
            Use::Product { id, .. } => format!("/admin/products/{}/edit", id.to_hex()),
            Use::Node { id, .. } => format!("/admin/content/{}/edit", id.to_hex()),
            Use::SocialImage => "/admin/settings".to_string(),
        }
    }
}

/// Places listed per file at most (a file on more is "used by N places, among them…").
const MAX_USES_READ: i64 = 200;

/// Where each of `ids` is used, in two indexed queries and one read of the settings; a file
/// used nowhere has no entry.
pub(crate) async fn uses(
    db: &Db,
    ids: &[ObjectId],
) -> Result<HashMap<ObjectId, Vec<Use>>, DbError> {
    let mut found: HashMap<ObjectId, Vec<Use>> = HashMap::new();
    if ids.is_empty() {
        return Ok(found);
    }
    let limit = MAX_USES_READ.saturating_mul(i64::try_from(ids.len()).unwrap_or(1));

    #[derive(Deserialize)]
    struct ProductRow {
        #[serde(rename = "_id")]
        id: ObjectId,
        #[serde(default)]
        title: String,
        #[serde(default)]
        photos: Vec<ObjectId>,
    }
    let products: Vec<ProductRow> = db
        .collection::<ProductRow>(crate::catalog::products::COLLECTION)
        .find(doc! { "photos": { "$in": ids } })
        .projection(doc! { "title": 1, "photos": 1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    for product in products {
        for file in product.photos.iter().filter(|f| ids.contains(f)) {
            found.entry(*file).or_default().push(Use::Product {
                id: product.id,
                title: product.title.clone(),
            });
        }
    }

    let nodes: Vec<Document> = db
        .collection::<Document>(super::store::COLLECTION)
        .find(doc! { "metadata.media": { "$in": ids } })
        .projection(doc! { "metadata.title": 1, "metadata.media": 1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    for node in nodes {
        let (Ok(id), Ok(metadata)) = (node.get_object_id("_id"), node.get_document("metadata"))
        else {
            continue;
        };
        let title = metadata.get_str("title").unwrap_or("").to_string();
        let media = metadata
            .get_array("media")
            .map_or(&[][..], |a| a.as_slice());
        for file in media.iter().filter_map(Bson::as_object_id) {
            if ids.contains(&file) {
                found.entry(file).or_default().push(Use::Node {
                    id,
                    title: title.clone(),
                });
            }
        }
    }

    let settings = site::load(db).await?;
    for file in media::refs::linked_ids(&settings.social_image) {
        if ids.contains(&file) {
            found.entry(file).or_default().push(Use::SocialImage);
        }
    }
    Ok(found)
}

/// Why an alt text or caption was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DescribeError {
    #[error("the {0} is longer than {MAX_TEXT_CHARS} characters")]
    TooLong(&'static str),
}

/// An original's alt text and caption, trimmed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub alt: String,
    pub(crate) caption: String,
}

impl Description {
    pub fn parse(alt: &str, caption: &str) -> Result<Description, DescribeError> {
        let clean = |text: &str, what: &'static str| {
            let text: String = text
                .trim()
                .chars()
                .filter(|c| !c.is_control() || *c == '\n')
                .collect();
            if text.chars().count() > MAX_TEXT_CHARS {
                Err(DescribeError::TooLong(what))
            } else {
                Ok(text)
            }
        };
        Ok(Description {
            alt: clean(alt, "alt text")?,
            caption: clean(caption, "caption")?,
        })
    }
}

/// Set original `id`'s alt text and caption; false when there is no such original.
pub async fn describe(db: &Db, id: ObjectId, description: &Description) -> Result<bool, DbError> {
    let mut filter = originals();
    filter.insert("_id", id);
    let result = db
        .durable::<Document>(media::FILES)
        .update_one(
            filter,
            doc! { "$set": {
                "metadata.alt": &description.alt,
                "metadata.caption": &description.caption,
            } },
        )
        .await?;
    Ok(result.matched_count == 1)
}

/// What [`delete_unused`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // `Deleted::Deleted(files)` reads as what happened
pub(crate) enum Deleted {
    /// The original and its copies are gone (how many files in all).
    Deleted(u64),
    /// Refused: these places show it.
    InUse(Vec<Use>),
    /// Refused for now: older content is still being scanned for the files it shows
    /// (`store::backfill_summaries`, running in the background after a start-up).
    NotYet,
    NotFound,
}

/// Delete original `id` with its copies, unless something shows it. A save linking the file
/// between the check and the delete would show a missing picture (no transaction spans them);
/// the window is one query long and only an admin deleting while another links the same file
/// meets it.
pub(crate) async fn delete_unused(db: &Db, id: ObjectId) -> Result<Deleted, DbError> {
    if file(db, id).await?.is_none() {
        return Ok(Deleted::NotFound);
    }
    if super::store::media_backfill_pending(db).await? {
        return Ok(Deleted::NotYet);
    }
    if let Some(places) = uses(db, &[id]).await?.remove(&id) {
        return Ok(Deleted::InUse(places));
    }
    Ok(Deleted::Deleted(media::delete_file(db, id).await?))
}
