//! A section's stream read page by page from the `section_published_id` index, never counted
//! and never skipped through: "Older posts" carries the publication time and `_id` of the
//! page's last node (`?before=TOKEN`), "Newer posts" those of its first (`?after=TOKEN`), and the
//! next page is read from that point of the index. A page deep in a stream of 100 000 posts
//! then costs what the first does. A post's previous and next neighbours are read the same way.
//!
//! Order: newest first, ties (the same millisecond) by `_id` ([`store::newest_first`]), so
//! `(published, _id)` orders a section completely. The nodes after a point are read as two
//! finds, each a tight range of the index: the ties at the point's time (equal time, a range of
//! `_id`), then the earlier times; the second is skipped when the ties fill the page. (One find
//! with an `$or` of both would leave the store to bound it.)
//!
//! A token is `<milliseconds>.<_id hex>`, both made by the site; anything else is refused with a
//! 400 page. `?page=N`, the numbered pages of earlier versions, still works for links people
//! kept (bounded by [`MAX_NUMBERED_PAGE`]): it is read like an "Older posts" page, from the
//! section's anchor before it (the point of every page's last node, [`anchors`]), not by
//! skipping.
//!
//! Pages and anchors are kept in the content cache (`content::cache`): many visitors reading
//! the same page cost one read between them, and a page is at most `cache::TTL` (2 s) older
//! than the database (this instance's own writes show at once).

use std::sync::Arc;

use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};
use futures::TryStreamExt;
use serde::Deserialize;

use crate::content::cache;
use crate::content::model::{self, Node};
use crate::content::store;
use crate::db::{Db, DbError};
use crate::web::rendered::Part;

/// Deepest `?page=N` still answered (older links); deeper pages are reached by "Older posts".
pub(crate) const MAX_NUMBERED_PAGE: u64 = 100;

/// A point in a stream: a node's publication time and `_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cursor {
    pub published: DateTime,
    pub id: ObjectId,
}

/// A token that is not one the site makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadToken;

impl Cursor {
    /// The point of `node` (`None` for a draft, which no stream holds).
    pub(crate) fn of(node: &Node) -> Option<Cursor> {
        Some(Cursor {
            published: node.metadata.published?,
            id: node.id,
        })
    }

    pub(crate) fn token(&self) -> String {
        format!("{}.{}", self.published.timestamp_millis(), self.id.to_hex())
    }

    pub(crate) fn parse(token: &str) -> Result<Cursor, BadToken> {
        let (millis, id) = token.split_once('.').ok_or(BadToken)?;
        // Only what `token` writes: an optional minus and digits, then 24 lowercase hex digits.
        let digits = millis.strip_prefix('-').unwrap_or(millis);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BadToken);
        }
        if id.len() != 24 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(BadToken);
        }
        Ok(Cursor {
            published: DateTime::from_millis(millis.parse().map_err(|_| BadToken)?),
            id: ObjectId::parse_str(id).map_err(|_| BadToken)?,
        })
    }
}

/// Which page of a stream to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum At {
    /// The newest nodes.
    Newest,
    /// The nodes older than the point (`?before=`).
    Before(Cursor),
    /// The nodes newer than the point (`?after=`).
    After(Cursor),
    /// `?page=N` (from 2; 1 is [`At::Newest`]).
    Numbered(u64),
}

impl At {
    /// From a request's `before`, `after` and `page` parameters (at most one of them).
    pub(crate) fn from_params(
        before: Option<&str>,
        after: Option<&str>,
        page: Option<&str>,
    ) -> Result<At, &'static str> {
        const BAD: &str = "That page address is not one this site makes.";
        match (before, after, page) {
            (None, None, None) => Ok(At::Newest),
            (Some(t), None, None) => Cursor::parse(t).map(At::Before).map_err(|_| BAD),
            (None, Some(t), None) => Cursor::parse(t).map(At::After).map_err(|_| BAD),
            (None, None, Some(p)) => match p.parse::<u64>() {
                Ok(1) => Ok(At::Newest),
                Ok(n @ 2..=MAX_NUMBERED_PAGE) => Ok(At::Numbered(n)),
                Ok(n) if n > MAX_NUMBERED_PAGE => {
                    Err("Pages that deep are reached with “Older posts”.")
                }
                _ => Err("The page number must be a whole number from 1."),
            },
            _ => Err(BAD),
        }
    }
}

/// One page of a stream, newest first, with the points its "Newer" and "Older" links lead from
/// (`None`: there is nothing that way).
#[derive(Debug)]
pub struct Page {
    pub(crate) nodes: Vec<Node>,
    pub(crate) newer: Option<Cursor>,
    pub(crate) older: Option<Cursor>,
    /// The page's cards and links as a stream page shows them (`content::pages::StreamPart`),
    /// once a view has rendered them.
    pub(crate) shown: Part,
}

/// The filter of a section's visible nodes narrowed by `range` (on `metadata.published` and
/// `_id`).
fn section_range(section: &str, range: Document, now: DateTime) -> Document {
    let mut filter = doc! { "metadata.section": section };
    filter.extend(range);
    filter.extend(store::visible_at(now));
    filter
}

/// The finds that read up to `limit` nodes of `section` past `point`, going older
/// (`older: true`) or newer: the ties at the point's time, then the rest. Public for the
/// `explain` tests.
pub fn finds_past(section: &str, point: Cursor, older: bool, now: DateTime) -> [Document; 2] {
    let (beyond, sort) = if older {
        ("$lt", store::newest_first())
    } else {
        ("$gt", doc! { "metadata.published": 1, "_id": 1 })
    };
    let ties = section_range(
        section,
        doc! { "metadata.published": point.published, "_id": { beyond: point.id } },
        now,
    );
    let rest = section_range(
        section,
        doc! { "metadata.published": { beyond: point.published } },
        now,
    );
    [
        doc! { "filter": ties, "sort": sort.clone() },
        doc! { "filter": rest, "sort": sort },
    ]
}

/// Run a find of [`finds_past`] (or any `{filter, sort}`) with `projection` and `limit`.
async fn run<T>(
    db: &Db,
    find: &Document,
    projection: Document,
    limit: i64,
) -> Result<Vec<T>, DbError>
where
    T: serde::de::DeserializeOwned + Send + Sync,
{
    let filter = find.get_document("filter").cloned().unwrap_or_default();
    let sort = find.get_document("sort").cloned().unwrap_or_default();
    Ok(db
        .collection::<T>(store::COLLECTION)
        .find(filter)
        .sort(sort)
        .projection(projection)
        .limit(limit)
        .await?
        .try_collect()
        .await?)
}

/// Up to `limit` nodes past `point`, in the walk's order (older: newest first; newer: oldest
/// first).
async fn past<T>(
    db: &Db,
    section: &str,
    point: Cursor,
    older: bool,
    projection: Document,
    limit: i64,
) -> Result<Vec<T>, DbError>
where
    T: serde::de::DeserializeOwned + Send + Sync,
{
    let [ties, rest] = finds_past(section, point, older, db.now());
    let mut found: Vec<T> = run(db, &ties, projection.clone(), limit).await?;
    let wanted = limit - found.len() as i64;
    if wanted > 0 {
        found.extend(run::<T>(db, &rest, projection, wanted).await?);
    }
    Ok(found)
}

/// The page of `section`'s stream at `at`, `size` nodes, as cards
/// ([`store::card_projection`]: no body text), from the content cache while fresh.
pub(crate) async fn page(db: &Db, section: &str, at: At, size: i64) -> Result<Arc<Page>, DbError> {
    let key = (section.to_string(), at, size);
    cache::get_or_load(db, key, false, load_page(db, section, at, size)).await
}

/// [`page`] read from the database: a numbered page from its anchor, the others from the
/// index at their point.
async fn load_page(db: &Db, section: &str, at: At, size: i64) -> Result<Page, DbError> {
    // One more than a page tells whether there is anything beyond it.
    let probe = size + 1;
    let projection = store::card_projection();
    let (mut nodes, newer_exists, older_exists) = match at {
        At::Newest => {
            let filter = section_range(section, doc! {}, db.now());
            let nodes: Vec<Node> = store::collection(db)
                .find(filter)
                .sort(store::newest_first())
                .projection(projection)
                .limit(probe)
                .await?
                .try_collect()
                .await?;
            let older = nodes.len() as i64 > size;
            (nodes, false, older)
        }
        At::Numbered(n) => {
            let anchors = anchors(db, section, size).await?;
            // Page `n` starts after the last node of page `n - 1`; none: past the end.
            let Some(point) = usize::try_from(n - 2).ok().and_then(|i| anchors.get(i)) else {
                return Ok(Page {
                    nodes: Vec::new(),
                    newer: None,
                    older: None,
                    shown: Part::default(),
                });
            };
            let nodes: Vec<Node> = past(db, section, *point, true, projection, probe).await?;
            let older = nodes.len() as i64 > size;
            (nodes, true, older)
        }
        At::Before(point) => {
            let nodes: Vec<Node> = past(db, section, point, true, projection, probe).await?;
            let older = nodes.len() as i64 > size;
            (nodes, true, older)
        }
        At::After(point) => {
            let mut nodes: Vec<Node> = past(db, section, point, false, projection, probe).await?;
            let newer = nodes.len() as i64 > size;
            nodes.truncate(size as usize);
            nodes.reverse();
            (nodes, newer, true)
        }
    };
    nodes.truncate(size as usize);
    store::keep_shown(db, &nodes).await?;
    let newer = newer_exists
        .then(|| nodes.first().and_then(Cursor::of))
        .flatten();
    let older = older_exists
        .then(|| nodes.last().and_then(Cursor::of))
        .flatten();
    Ok(Page {
        nodes,
        newer,
        older,
        shown: Part::default(),
    })
}

/// Where a stream's node stands: what [`anchors`] reads of it.
#[derive(Debug, Deserialize)]
struct Point {
    #[serde(rename = "_id")]
    id: ObjectId,
    metadata: PointMetadata,
}

#[derive(Debug, Deserialize)]
struct PointMetadata {
    published: Option<DateTime>,
}

/// The anchors of `section`'s numbered pages of `size` nodes: the point of the last node of
/// page 1, 2, … up to page [`MAX_NUMBERED_PAGE`] − 1, so page `n` is the page after anchor
/// `n − 2`. Read as one find of only the points (`_id` and publication time, no more than
/// `MAX_NUMBERED_PAGE × size` of them), kept in the content cache like the pages.
pub(crate) async fn anchors(
    db: &Db,
    section: &str,
    size: i64,
) -> Result<Arc<Vec<Cursor>>, DbError> {
    let key = (section.to_string(), size);
    cache::get_or_load(db, key, false, async {
        let size = usize::try_from(size.max(1)).unwrap_or(1);
        let depth = (MAX_NUMBERED_PAGE as usize - 1) * size;
        let points: Vec<Point> = db
            .collection::<Point>(store::COLLECTION)
            .find(section_range(section, doc! {}, db.now()))
            .sort(store::newest_first())
            .projection(doc! { "_id": 1, "metadata.published": 1 })
            .limit(i64::try_from(depth).unwrap_or(i64::MAX))
            .await?
            .try_collect()
            .await?;
        Ok::<_, DbError>(
            points
                .iter()
                .skip(size - 1)
                .step_by(size)
                .filter_map(|p| {
                    Some(Cursor {
                        published: p.metadata.published?,
                        id: p.id,
                    })
                })
                .collect(),
        )
    })
    .await
}

/// A neighbour of a post: enough to link to it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Neighbour {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    pub(crate) metadata: NeighbourMetadata,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct NeighbourMetadata {
    pub(crate) section: String,
    pub(crate) slug: String,
    pub(crate) title: String,
    pub published: Option<DateTime>,
}

impl Neighbour {
    pub(crate) fn url(&self) -> String {
        model::url_of(&self.metadata.section, &self.metadata.slug)
    }
}

fn neighbour_projection() -> Document {
    doc! {
        "metadata.section": 1, "metadata.slug": 1, "metadata.title": 1,
        "metadata.published": 1,
    }
}

/// The finds of [`neighbours`]' usual case: from `point`'s time towards the newest and towards
/// the oldest, the point's own node included. Public for the `explain` tests.
pub fn neighbour_probes(section: &str, point: Cursor, now: DateTime) -> [Document; 2] {
    let towards = |older: bool| {
        let (op, sort) = if older {
            ("$lte", store::newest_first())
        } else {
            ("$gte", doc! { "metadata.published": 1, "_id": 1 })
        };
        let range = doc! { "metadata.published": { op: point.published } };
        doc! { "filter": section_range(section, range, now), "sort": sort }
    };
    [towards(false), towards(true)]
}

/// The posts just newer and just older than `node` in its section (for "Previous" and "Next"
/// links), from the content cache ([`crate::content::cache`], keyed by the post's point in its
/// stream) when it holds them fresh (no command), else as `load_neighbours` reads them.
pub(crate) async fn neighbours(
    db: &Db,
    node: &Node,
) -> Result<(Option<Neighbour>, Option<Neighbour>), DbError> {
    let Some(point) = Cursor::of(node) else {
        return Ok((None, None));
    };
    let section = node.metadata.section.as_str();
    let key = (
        section.to_string(),
        point.published.timestamp_millis(),
        point.id,
    );
    let pair = crate::content::cache::get_or_load(
        db,
        key,
        false,
        load_neighbours(db, section, point, node.id),
    )
    .await?;
    Ok((*pair).clone())
}

/// The neighbours of the node `id` at `point` of `section`, read from the database. Usually two
/// finds, run together: from the node's time towards each end, two nodes each, the node itself
/// first; when another node shares its millisecond, the exact ranges of [`finds_past`] decide
/// instead. (One command for both directions is not to be had: docstore refuses `$unionWith`,
/// and a `$facet` reads the whole section before its sub-pipelines narrow it.)
async fn load_neighbours(
    db: &Db,
    section: &str,
    point: Cursor,
    id: ObjectId,
) -> Result<(Option<Neighbour>, Option<Neighbour>), DbError> {
    let [newer_find, older_find] = neighbour_probes(section, point, db.now());
    let (newer_probe, older_probe) = futures::try_join!(
        run::<Neighbour>(db, &newer_find, neighbour_projection(), 2),
        run::<Neighbour>(db, &older_find, neighbour_projection(), 2),
    )?;
    let starts_with_node = |found: &[Neighbour]| found.first().is_some_and(|n| n.id == id);
    if starts_with_node(&newer_probe) && starts_with_node(&older_probe) {
        // The node is first both ways: no other node shares its time.
        let mut newer = newer_probe;
        let mut older = older_probe;
        return Ok((
            (newer.len() > 1).then(|| newer.swap_remove(1)),
            (older.len() > 1).then(|| older.swap_remove(1)),
        ));
    }
    let (newer, older) = futures::try_join!(
        past::<Neighbour>(db, section, point, false, neighbour_projection(), 1),
        past::<Neighbour>(db, section, point, true, neighbour_projection(), 1),
    )?;
    Ok((newer.into_iter().next(), older.into_iter().next()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_reads_back_as_the_point_it_was_made_from() {
        let point = Cursor {
            published: DateTime::from_millis(1_764_000_000_123),
            id: ObjectId::new(),
        };
        assert_eq!(Cursor::parse(&point.token()), Ok(point));
        let before_1970 = Cursor {
            published: DateTime::from_millis(-5),
            id: point.id,
        };
        assert_eq!(Cursor::parse(&before_1970.token()), Ok(before_1970));
    }

    #[test]
    fn tokens_the_site_does_not_make_are_refused() {
        let id = ObjectId::new().to_hex();
        for bad in [
            String::new(),
            "123".into(),
            format!("abc.{id}"),
            format!("+12.{id}"),
            format!("12.{}", id.to_uppercase()),
            format!("12.{}", &id[1..]),
            format!("12.{id}0"),
            format!("-.{id}"),
            format!("99999999999999999999.{id}"),
        ] {
            assert_eq!(Cursor::parse(&bad), Err(BadToken), "{bad}");
        }
    }

    #[test]
    fn a_page_is_asked_for_one_way_at_a_time() {
        let token = Cursor {
            published: DateTime::from_millis(1),
            id: ObjectId::new(),
        }
        .token();
        assert_eq!(At::from_params(None, None, None), Ok(At::Newest));
        assert_eq!(At::from_params(None, None, Some("1")), Ok(At::Newest));
        assert_eq!(At::from_params(None, None, Some("3")), Ok(At::Numbered(3)));
        assert!(At::from_params(None, None, Some("0")).is_err());
        assert!(At::from_params(None, None, Some("101")).is_err());
        assert!(matches!(
            At::from_params(Some(&token), None, None),
            Ok(At::Before(_))
        ));
        assert!(matches!(
            At::from_params(None, Some(&token), None),
            Ok(At::After(_))
        ));
        assert!(At::from_params(Some(&token), Some(&token), None).is_err());
    }
}
