//! Sitemaps (sitemaps.org protocol 0.9): `/sitemap.xml` is a sitemap index over per-kind
//! sitemaps under `/sitemaps/`, each at most [`MAX_URLS`] addresses:
//!
//! - `products-{first _id}.xml`: products on sale, in `_id` order, from that product on;
//! - `categories.xml`: the home page, the shop, the category tree and every category;
//! - `{section}-{n}.xml`: a content section's list page and its published nodes, newest first;
//! - `tags.xml`: every tag a published node or a product on sale carries.
//!
//! Nothing is built whole in memory: the index walks the products on sale once through a
//! cursor (only `_id` and `updated`), keeping every 50 000th `_id` as the start of a product
//! sitemap and the newest update of each (at most once per [`CHUNKS_TTL`] per instance, one
//! walk at a time: [`cached_product_chunks`]); a product sitemap is one keyset read of at most
//! 50 000 from its start. `lastmod` comes from the stored `updated` times; drafts, archived
//! products and unpublished or scheduled nodes are never listed. XML is written with the
//! shared [`XmlWriter`] (quick-xml), which escapes every text it is given. Responses carry an
//! ETag and Last-Modified and answer `304` to a client that has them.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};
use futures::TryStreamExt;
use serde::Deserialize;

use crate::catalog::{categories, lifecycle, products};
use crate::content::model::{self, SECTIONS};
use crate::content::store as nodes;
use crate::db::{Db, DbError};
use crate::state::AppState;
use crate::web::conditional::{self, Document as Served};
use crate::web::errors::AppError;
use crate::web::meta::path_segment as segment;
use crate::web::xml::XmlWriter;

/// The protocol's limit of addresses per sitemap.
pub const MAX_URLS: usize = 50_000;
/// The sitemap protocol's namespace.
pub const NAMESPACE: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";
/// Documents per cursor batch while walking products.
const BATCH: u32 = 2_000;
/// Section sitemaps hold the list page plus this many nodes each.
const NODES_PER_SITEMAP: usize = MAX_URLS - 1;
/// Beyond this a section sitemap number is not one (a billion nodes in one section).
const MAX_SECTION_SITEMAPS: u64 = 20_000;

/// A W3C Datetime (`2026-11-28T12:00:00Z`), as `lastmod` wants it.
pub(crate) fn w3c(at: DateTime) -> String {
    at.to_chrono().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// An XML document of `<url>` or `<sitemap>` entries under one root element, written as they
/// come (through [`XmlWriter`]: every address escaped by construction).
struct Entries {
    writer: XmlWriter,
    root: &'static str,
    entry: &'static str,
    count: usize,
    newest: Option<DateTime>,
}

impl Entries {
    fn start(root: &'static str, entry: &'static str) -> Entries {
        let mut writer = XmlWriter::document();
        writer.open(root, &[("xmlns", NAMESPACE)]);
        Entries {
            writer,
            root,
            entry,
            count: 0,
            newest: None,
        }
    }

    /// One entry: its absolute address and, when known, its last change.
    fn add(&mut self, loc: &str, lastmod: Option<DateTime>) {
        let newest = &mut self.newest;
        self.writer.element(self.entry, &[], |xml| {
            xml.text_element("loc", &[], loc);
            if let Some(at) = lastmod {
                xml.text_element("lastmod", &[], &w3c(at));
                *newest = (*newest).max(Some(at));
            }
        });
        self.count += 1;
    }

    fn finish(mut self) -> (String, Option<DateTime>, usize) {
        self.writer.close(self.root);
        (self.writer.finish(), self.newest, self.count)
    }
}

fn respond(req: &HttpRequest, body: String, last_modified: Option<DateTime>) -> HttpResponse {
    conditional::respond(
        req,
        Served {
            content_type: "application/xml; charset=utf-8",
            cache_control: "public, max-age=3600",
            body,
            last_modified,
        },
    )
}

/// A product as the sitemaps read it.
#[derive(Deserialize)]
struct ProductStamp {
    #[serde(rename = "_id")]
    id: ObjectId,
    #[serde(default)]
    slug: String,
    updated: Option<DateTime>,
}

/// The filter, projection and sort of the index's walk over the products on sale (served by
/// the `_id` index, in its order).
pub fn product_walk() -> (Document, Document, Document) {
    (
        lifecycle::on_sale(),
        doc! { "_id": 1, "updated": 1 },
        doc! { "_id": 1 },
    )
}

/// The filter of the product sitemap starting at `start` (a keyset read on `_id`).
pub fn product_chunk_filter(start: ObjectId) -> Document {
    lifecycle::on_sale_within(doc! { "_id": { "$gte": start } })
}

/// Where each product sitemap of `per_sitemap` products starts and the newest update in it:
/// one pass over the products on sale, keeping one `_id` per sitemap.
pub async fn product_chunks(
    db: &Db,
    per_sitemap: usize,
) -> Result<Vec<(ObjectId, Option<DateTime>)>, DbError> {
    let (filter, projection, sort) = product_walk();
    let mut cursor = products::collection(db)
        .clone_with_type::<ProductStamp>()
        .find(filter)
        .projection(projection)
        .sort(sort)
        .batch_size(BATCH)
        .await?;
    let mut chunks: Vec<(ObjectId, Option<DateTime>)> = Vec::new();
    let mut seen = 0usize;
    while let Some(stamp) = cursor.try_next().await? {
        if seen.is_multiple_of(per_sitemap.max(1)) {
            chunks.push((stamp.id, None));
        }
        if let Some(last) = chunks.last_mut() {
            last.1 = last.1.max(stamp.updated);
        }
        seen += 1;
    }
    Ok(chunks)
}

/// How long the index reuses its walk over the products: search engines fetch sitemaps hours
/// apart, and what the walk finds changes little (see [`cached_product_chunks`]).
pub(crate) const CHUNKS_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// The last walk's product sitemap starts, kept with each database handle.
#[derive(Default)]
pub(crate) struct ChunkCache {
    last: tokio::sync::Mutex<Option<(std::time::Instant, ProductChunks)>>,
}

type ProductChunks = std::sync::Arc<Vec<(ObjectId, Option<DateTime>)>>;

/// [`product_chunks`] for the index, walked at most once per [`CHUNKS_TTL`] per instance, and
/// by one request at a time: requests arriving during a walk wait for its result instead of
/// starting their own, so a crawler (or an attacker) asking for `/sitemap.xml` in a loop
/// costs one walk per period. What a stale walk can get wrong is small: a product sitemap
/// reads up to 50 000 products live from its start, so products added since are listed at
/// once in the last sitemap (until it is full), and one taken off sale is simply not listed;
/// only the index's `lastmod` values and a newly needed sitemap wait for the next walk.
pub(crate) async fn cached_product_chunks(db: &Db) -> Result<ProductChunks, DbError> {
    let cache = db.extension::<ChunkCache>();
    let mut last = cache.last.lock().await;
    if let Some((at, chunks)) = last.as_ref() {
        if at.elapsed() < CHUNKS_TTL {
            return Ok(chunks.clone());
        }
    }
    let chunks = std::sync::Arc::new(product_chunks(db, MAX_URLS).await?);
    *last = Some((std::time::Instant::now(), chunks.clone()));
    Ok(chunks)
}

/// The filter of a section's published nodes (served by the `section_published_id` index).
pub fn section_filter(section: &str, now: DateTime) -> Document {
    let mut filter = doc! { "metadata.section": section };
    filter.extend(nodes::visible_at(now));
    filter
}

/// How many sitemaps a section with `count` published nodes takes (at least one: its list page).
fn section_sitemaps(count: u64) -> u64 {
    count.div_ceil(NODES_PER_SITEMAP as u64).max(1)
}

/// The tags of published nodes and of products on sale, each with its newest update. Each
/// side is one aggregation grouped by tag (one result per tag, never the documents), read
/// through its `tags` index.
async fn tags(db: &Db) -> Result<BTreeMap<String, Option<DateTime>>, DbError> {
    let mut found: BTreeMap<String, Option<DateTime>> = BTreeMap::new();
    for (collection, pipeline) in tag_pipelines(db.now()) {
        let mut cursor = db
            .collection::<Document>(collection)
            .aggregate(pipeline)
            .await?;
        while let Some(group) = cursor.try_next().await? {
            let Ok(tag) = group.get_str("_id") else {
                continue;
            };
            if tag.is_empty() {
                continue;
            }
            let updated = group.get_datetime("updated").ok().copied();
            let entry = found.entry(tag.to_string()).or_insert(None);
            *entry = (*entry).max(updated);
        }
    }
    Ok(found)
}

/// `(collection, pipeline)` for each side of `tags`; the `$match` bounds the `tags` index
/// to documents carrying at least one tag.
pub fn tag_pipelines(now: DateTime) -> Vec<(&'static str, Vec<Document>)> {
    let mut node_match = doc! { "metadata.tags": { "$gte": "" } };
    node_match.extend(nodes::visible_at(now));
    vec![
        (
            nodes::COLLECTION,
            vec![
                doc! { "$match": node_match },
                doc! { "$unwind": "$metadata.tags" },
                doc! { "$group": { "_id": "$metadata.tags", "updated": { "$max": "$metadata.updated" } } },
            ],
        ),
        (
            products::COLLECTION,
            vec![
                doc! { "$match": lifecycle::on_sale_within(doc! { "tags": { "$gte": "" } }) },
                doc! { "$unwind": "$tags" },
                doc! { "$group": { "_id": "$tags", "updated": { "$max": "$updated" } } },
            ],
        ),
    ]
}

/// `GET /sitemap.xml`: the sitemap index.
pub(crate) async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let db = &state.db;
    let base = &state.public_url;
    let mut out = Entries::start("sitemapindex", "sitemap");
    out.add(&format!("{base}/sitemaps/categories.xml"), None);
    for (start, newest) in cached_product_chunks(db).await?.iter() {
        out.add(
            &format!("{base}/sitemaps/products-{}.xml", start.to_hex()),
            *newest,
        );
    }
    let now = db.now();
    for section in SECTIONS {
        let count = nodes::collection(db)
            .count_documents(section_filter(section.name, now))
            .await
            .map_err(DbError::from)?;
        for n in 1..=section_sitemaps(count) {
            out.add(&format!("{base}/sitemaps/{}-{n}.xml", section.name), None);
        }
    }
    if !tags(db).await?.is_empty() {
        out.add(&format!("{base}/sitemaps/tags.xml"), None);
    }
    let (body, newest, _) = out.finish();
    Ok(respond(&req, body, newest))
}

/// `GET /sitemaps/{name}`: one sitemap of the index; 404 for a name it would not list.
pub(crate) async fn serve(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let stem = name.strip_suffix(".xml").ok_or(AppError::NotFound)?;
    let (body, newest, count) = match stem {
        "categories" => categories_sitemap(&state).await?,
        "tags" => tags_sitemap(&state).await?,
        _ => match stem.strip_prefix("products-") {
            Some(start) => {
                let start = ObjectId::parse_str(start).map_err(|_| AppError::NotFound)?;
                products_sitemap(&state, start).await?
            }
            None => {
                let (section, n) = stem.rsplit_once('-').ok_or(AppError::NotFound)?;
                let section = model::section(section).ok_or(AppError::NotFound)?;
                let n = n
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=MAX_SECTION_SITEMAPS).contains(n))
                    .ok_or(AppError::NotFound)?;
                section_sitemap(&state, section.name, n).await?
            }
        },
    };
    if count == 0 {
        return Err(AppError::NotFound);
    }
    Ok(respond(&req, body, newest))
}

type Built = (String, Option<DateTime>, usize);

async fn products_sitemap(state: &AppState, start: ObjectId) -> Result<Built, AppError> {
    let mut out = Entries::start("urlset", "url");
    let mut cursor = products::collection(&state.db)
        .clone_with_type::<ProductStamp>()
        .find(product_chunk_filter(start))
        .projection(doc! { "_id": 1, "slug": 1, "updated": 1 })
        .sort(doc! { "_id": 1 })
        .limit(MAX_URLS as i64)
        .batch_size(BATCH)
        .await
        .map_err(DbError::from)?;
    while let Some(product) = cursor.try_next().await.map_err(DbError::from)? {
        let loc = format!("{}/products/{}", state.public_url, segment(&product.slug));
        out.add(&loc, product.updated);
    }
    Ok(out.finish())
}

async fn categories_sitemap(state: &AppState) -> Result<Built, AppError> {
    let base = &state.public_url;
    let mut out = Entries::start("urlset", "url");
    for path in ["/", "/products", "/categories"] {
        out.add(&format!("{base}{path}"), None);
    }
    let mut cursor = categories::collection(&state.db)
        .clone_with_type::<Document>()
        .find(doc! {})
        .projection(doc! { "slug": 1 })
        .sort(doc! { "_id": 1 })
        .limit((MAX_URLS - 3) as i64)
        .batch_size(BATCH)
        .await
        .map_err(DbError::from)?;
    while let Some(category) = cursor.try_next().await.map_err(DbError::from)? {
        if let Ok(slug) = category.get_str("slug") {
            out.add(&format!("{base}/categories/{}", segment(slug)), None);
        }
    }
    Ok(out.finish())
}

/// A published node as the sitemaps read it.
#[derive(Deserialize)]
struct NodeStamp {
    metadata: NodeStampMeta,
}

#[derive(Deserialize)]
struct NodeStampMeta {
    slug: String,
    updated: Option<DateTime>,
}

async fn section_sitemap(state: &AppState, section: &str, n: u64) -> Result<Built, AppError> {
    let base = &state.public_url;
    let mut out = Entries::start("urlset", "url");
    let mut cursor = nodes::collection(&state.db)
        .clone_with_type::<NodeStamp>()
        .find(section_filter(section, state.db.now()))
        .projection(doc! { "metadata.slug": 1, "metadata.updated": 1 })
        .sort(doc! { "metadata.published": -1 })
        .skip((n - 1) * NODES_PER_SITEMAP as u64)
        .limit(NODES_PER_SITEMAP as i64)
        .batch_size(BATCH)
        .await
        .map_err(DbError::from)?;
    let first = cursor.try_next().await.map_err(DbError::from)?;
    if n == 1 {
        // The list page leads the first sitemap; it changes when its newest post does.
        let lastmod = first.as_ref().and_then(|f| f.metadata.updated);
        out.add(&format!("{base}/{section}/"), lastmod);
    }
    let mut next = first;
    while let Some(node) = next {
        let loc = format!("{base}/{section}/{}", segment(&node.metadata.slug));
        out.add(&loc, node.metadata.updated);
        next = cursor.try_next().await.map_err(DbError::from)?;
    }
    Ok(out.finish())
}

async fn tags_sitemap(state: &AppState) -> Result<Built, AppError> {
    let base = &state.public_url;
    let mut out = Entries::start("urlset", "url");
    for (tag, updated) in tags(&state.db).await?.into_iter().take(MAX_URLS) {
        out.add(&format!("{base}/tags/{}", segment(&tag)), updated);
    }
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_take_one_sitemap_per_full_share_of_nodes() {
        assert_eq!(section_sitemaps(0), 1);
        assert_eq!(section_sitemaps(NODES_PER_SITEMAP as u64), 1);
        assert_eq!(section_sitemaps(NODES_PER_SITEMAP as u64 + 1), 2);
    }

    #[test]
    fn lastmod_is_a_w3c_datetime() {
        assert_eq!(
            w3c(DateTime::from_millis(1_764_331_200_000)),
            "2025-11-28T12:00:00Z"
        );
    }
}
