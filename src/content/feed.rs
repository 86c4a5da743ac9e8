//! Atom 1.0 feeds: `/{section}/feed.atom` holds the section's 20 latest published nodes and
//! `/tags/{tag}/feed.atom` the tag's, with absolute links built from `server.public_url` and
//! every text escaped for XML; both answer conditional requests (ETag, Last-Modified, 304).

use actix_web::{web, HttpRequest, HttpResponse};

use crate::content::model::{self, section, Detail, Node};
use crate::state::AppState;
use crate::web::errors::AppError;

pub const FEED_SIZE: i64 = 20;

/// Escape text for XML content and attribute values.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 does not allow at all are dropped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

fn rfc3339(d: bson::DateTime) -> String {
    d.to_chrono().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The entry's content as (already safe) HTML, escaped again by the caller for XML.
fn content_html(base: &str, node: &Node) -> String {
    match node.detail() {
        Some(Detail::Page(_)) | Some(Detail::Entry(_)) => node.text_html(),
        Some(Detail::Photo(p)) => match p.file_id {
            Some(id) => format!(
                "<p><img src=\"{base}/media/{}\" alt=\"{}\"></p><p>{}</p>",
                id.to_hex(),
                xml_escape(&p.caption),
                xml_escape(&p.caption)
            ),
            None => format!("<p>{}</p>", xml_escape(&p.caption)),
        },
        Some(Detail::Video(_)) => match node.video() {
            Some(v) => format!(
                "<p><a href=\"{}\">Watch on {}</a></p>",
                xml_escape(&v.watch_url()),
                v.provider_label()
            ),
            None => String::new(),
        },
        Some(Detail::Quote(q)) => format!(
            "<blockquote><p>{}</p></blockquote><p>— {}</p>",
            xml_escape(&q.text),
            xml_escape(&q.source)
        ),
        Some(Detail::Link(_)) => match node.link() {
            Some(l) => format!(
                "<p><a href=\"{}\">{}</a></p>",
                xml_escape(&l.url),
                xml_escape(&l.text)
            ),
            None => String::new(),
        },
        None => String::new(),
    }
}

/// The feed document for `nodes` (newest first).
pub fn atom(base: &str, section_name: &str, section_title: &str, nodes: &[Node]) -> String {
    let base = base.trim_end_matches('/');
    let section_url = format!("{base}/{section_name}/");
    let updated = nodes
        .iter()
        .map(|n| n.metadata.updated)
        .max()
        .unwrap_or_else(|| bson::DateTime::from_millis(0));
    let mut xml = String::with_capacity(4096);
    xml.push_str("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n");
    xml.push_str("<feed xmlns=\"http://www.w3.org/2005/Atom\">\n");
    xml.push_str(&format!(
        "  <title>{}</title>\n  <id>{}</id>\n  <updated>{}</updated>\n",
        xml_escape(&format!("Bazaar · {section_title}")),
        xml_escape(&section_url),
        rfc3339(updated)
    ));
    xml.push_str(&format!(
        "  <link rel=\"alternate\" type=\"text/html\" href=\"{}\"/>\n  <link rel=\"self\" type=\"application/atom+xml\" href=\"{}feed.atom\"/>\n",
        xml_escape(&section_url),
        xml_escape(&section_url)
    ));
    xml.push_str("  <author><name>Bazaar</name></author>\n");
    for node in nodes {
        let url = format!("{base}{}", node.url());
        let published = node.metadata.published.unwrap_or(node.metadata.created);
        xml.push_str("  <entry>\n");
        xml.push_str(&format!(
            "    <title>{}</title>\n    <id>{}</id>\n    <link rel=\"alternate\" type=\"text/html\" href=\"{}\"/>\n    <published>{}</published>\n    <updated>{}</updated>\n    <author><name>{}</name></author>\n",
            xml_escape(&node.metadata.title),
            xml_escape(&url),
            xml_escape(&url),
            rfc3339(published),
            rfc3339(node.metadata.updated),
            xml_escape(&node.metadata.author.name),
        ));
        for tag in &node.metadata.tags {
            xml.push_str(&format!("    <category term=\"{}\"/>\n", xml_escape(tag)));
        }
        xml.push_str(&format!(
            "    <content type=\"html\">{}</content>\n",
            xml_escape(&content_html(base, node))
        ));
        xml.push_str("  </entry>\n");
    }
    xml.push_str("</feed>\n");
    xml
}

/// `GET /{section}/feed.atom`
pub async fn serve(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let section = section(&path).ok_or(AppError::NotFound)?;
    let (nodes, _) = model::published_page(&state.db, section.name, 0, FEED_SIZE).await?;
    let xml = atom(&state.public_url, section.name, section.title, &nodes);
    Ok(feed_response(&req, xml, &nodes))
}

/// Where the feed of `tag` is (tags are lowercase letters, digits and dashes).
pub fn tag_feed_path(tag: &str) -> String {
    format!("/tags/{}/feed.atom", crate::web::meta::path_segment(tag))
}

/// `GET /tags/{tag}/feed.atom`: the tag's 20 latest published nodes; 404 for a tag no
/// published node carries.
pub async fn serve_tag(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let tag = path.into_inner();
    if tag.is_empty() || tag.len() > 100 {
        return Err(AppError::NotFound);
    }
    let nodes = model::published_with_tag(&state.db, &tag, FEED_SIZE).await?;
    if nodes.is_empty() {
        return Err(AppError::NotFound);
    }
    // The feed's `alternate` is the tag page, its `self` this address.
    let xml = atom(
        &state.public_url,
        &format!("tags/{}", crate::web::meta::path_segment(&tag)),
        &format!("Tagged {tag}"),
        &nodes,
    );
    Ok(feed_response(&req, xml, &nodes))
}

fn feed_response(req: &HttpRequest, xml: String, nodes: &[Node]) -> HttpResponse {
    crate::web::conditional::respond(
        req,
        crate::web::conditional::Document {
            content_type: "application/atom+xml; charset=utf-8",
            cache_control: "public, max-age=300",
            body: xml,
            last_modified: nodes.iter().map(|n| n.metadata.updated).max(),
        },
    )
}
