//! Atom 1.0 feeds: `/{section}/feed.atom` holds the section's 20 latest published nodes and
//! `/tags/{tag}/feed.atom` the tag's, with absolute links built from `server.public_url`,
//! written through [`XmlWriter`] (every text escaped for XML by construction); both answer
//! conditional requests (ETag, Last-Modified, 304). An entry's content is HTML, escaped by the
//! templates' escaper ([`html`]) where it holds user text.
//!
//! A feed's finished document is kept in the content cache (`content::cache`): feed readers
//! polling at once cost one read of 20 whole nodes and one rendering between them, and a feed
//! is at most `cache::TTL` (2 s) older than the database.

use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};

use crate::content::model::{section, Detail, Node};
use crate::content::store;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::html;
use crate::web::xml::XmlWriter;

pub(crate) const FEED_SIZE: i64 = 20;

fn rfc3339(d: bson::DateTime) -> String {
    d.to_chrono().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The entry's content as (already safe) HTML, a video's, quote's or link's commentary after
/// it; the XML writer escapes it again as text.
fn content_html(base: &str, node: &Node) -> String {
    let mut html = body_html(base, node);
    html.push_str(&node.commentary_html());
    html
}

fn body_html(base: &str, node: &Node) -> String {
    match node.detail() {
        Some(Detail::Page(_)) | Some(Detail::Entry(_)) => node.text_html(),
        Some(Detail::Photo(p)) => match p.file_id {
            Some(id) => format!(
                "<p><img src=\"{base}/media/{}\" alt=\"{}\"></p><p>{}</p>",
                id.to_hex(),
                html::text(p.alt_or(&node.metadata.title)),
                html::text(&p.caption)
            ),
            None => format!("<p>{}</p>", html::text(&p.caption)),
        },
        Some(Detail::Video(_)) => match node.video() {
            Some(v) => format!(
                "<p><a href=\"{}\">Watch on {}</a></p>",
                html::text(&v.watch_url()),
                v.provider_label()
            ),
            None => String::new(),
        },
        Some(Detail::Quote(q)) => format!(
            "<blockquote><p>{}</p></blockquote><p>— {}</p>",
            html::text(&q.text),
            html::text(&q.source)
        ),
        Some(Detail::Link(_)) => match node.link() {
            Some(l) => format!(
                "<p><a href=\"{}\">{}</a></p>",
                html::text(&l.url),
                html::text(&l.text)
            ),
            None => String::new(),
        },
        None => String::new(),
    }
}

/// The feed document for `nodes` (newest first).
pub(crate) fn atom(base: &str, section_name: &str, section_title: &str, nodes: &[Node]) -> String {
    let base = base.trim_end_matches('/');
    let section_url = format!("{base}/{section_name}/");
    let self_url = format!("{section_url}feed.atom");
    let updated = nodes
        .iter()
        .map(|n| n.metadata.updated)
        .max()
        .unwrap_or_else(|| bson::DateTime::from_millis(0));
    let mut xml = XmlWriter::document();
    xml.element("feed", &[("xmlns", "http://www.w3.org/2005/Atom")], |xml| {
        xml.text_element("title", &[], &format!("Bazaar · {section_title}"));
        xml.text_element("id", &[], &section_url);
        xml.text_element("updated", &[], &rfc3339(updated));
        link(xml, "alternate", "text/html", &section_url);
        link(xml, "self", "application/atom+xml", &self_url);
        author(xml, "Bazaar");
        for node in nodes {
            entry(xml, base, node);
        }
    });
    xml.finish()
}

fn entry(xml: &mut XmlWriter, base: &str, node: &Node) {
    let url = format!("{base}{}", node.url());
    let published = node.metadata.published.unwrap_or(node.metadata.created);
    xml.element("entry", &[], |xml| {
        xml.text_element("title", &[], &node.metadata.title);
        xml.text_element("id", &[], &url);
        link(xml, "alternate", "text/html", &url);
        xml.text_element("published", &[], &rfc3339(published));
        xml.text_element("updated", &[], &rfc3339(node.metadata.updated));
        author(xml, &node.metadata.author.name);
        for tag in &node.metadata.tags {
            xml.empty_element("category", &[("term", tag.as_str())]);
        }
        xml.text_element("content", &[("type", "html")], &content_html(base, node));
    });
}

fn link(xml: &mut XmlWriter, rel: &str, kind: &str, href: &str) {
    xml.empty_element("link", &[("rel", rel), ("type", kind), ("href", href)]);
}

fn author(xml: &mut XmlWriter, name: &str) {
    xml.element("author", &[], |xml| xml.text_element("name", &[], name));
}

/// A feed as served: its document and the newest change it shows (`None`: no entries).
#[derive(Debug)]
pub(crate) struct Feed {
    pub(crate) xml: String,
    pub(crate) last_modified: Option<bson::DateTime>,
    /// Whether it has entries.
    pub(crate) entries: bool,
}

impl Feed {
    fn of(xml: String, nodes: &[Node]) -> Feed {
        Feed {
            xml,
            last_modified: nodes.iter().map(|n| n.metadata.updated).max(),
            entries: !nodes.is_empty(),
        }
    }
}

/// The feed at `path` (its address: a key no two feeds share), from the content cache while
/// fresh, else as `load` reads and writes it.
async fn cached(
    state: &AppState,
    path: String,
    load: impl std::future::Future<Output = Result<Feed, crate::db::DbError>>,
) -> Result<Arc<Feed>, AppError> {
    Ok(crate::content::cache::get_or_load(&state.db, path, false, load).await?)
}

/// `GET /{section}/feed.atom`
pub(crate) async fn serve(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let section = section(&path).ok_or(AppError::NotFound)?;
    let db = &state.db;
    let feed = cached(&state, format!("/{}/feed.atom", section.name), async {
        let nodes = store::latest(db, section.name, FEED_SIZE).await?;
        let xml = atom(&state.public_url, section.name, section.title, &nodes);
        Ok(Feed::of(xml, &nodes))
    })
    .await?;
    Ok(feed_response(&req, &feed))
}

/// Where the feed of `tag` is (tags are lowercase letters, digits and dashes).
pub(crate) fn tag_feed_path(tag: &str) -> String {
    format!("/tags/{}/feed.atom", crate::web::meta::path_segment(tag))
}

/// `GET /tags/{tag}/feed.atom`: the tag's 20 latest published nodes; 404 for a tag no
/// published node carries.
pub(crate) async fn serve_tag(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let tag = path.into_inner();
    if tag.is_empty() || tag.len() > 100 {
        return Err(AppError::NotFound);
    }
    let db = &state.db;
    let feed = cached(&state, tag_feed_path(&tag), async {
        let nodes = store::published_with_tag(db, &tag, FEED_SIZE).await?;
        // The feed's `alternate` is the tag page, its `self` this address.
        let xml = atom(
            &state.public_url,
            &format!("tags/{}", crate::web::meta::path_segment(&tag)),
            &format!("Tagged {tag}"),
            &nodes,
        );
        Ok(Feed::of(xml, &nodes))
    })
    .await?;
    if !feed.entries {
        return Err(AppError::NotFound);
    }
    Ok(feed_response(&req, &feed))
}

fn feed_response(req: &HttpRequest, feed: &Feed) -> HttpResponse {
    crate::web::conditional::respond(
        req,
        crate::web::conditional::Document {
            content_type: "application/atom+xml; charset=utf-8",
            cache_control: "public, max-age=300",
            body: feed.xml.clone(),
            last_modified: feed.last_modified,
        },
    )
}
