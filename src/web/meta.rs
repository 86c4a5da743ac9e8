//! What a public page tells search engines, feed readers and link previews in its `<head>`: the
//! canonical address (absolute, from `server.public_url`), the description, OpenGraph and
//! Twitter card tags, feed autodiscovery links and JSON-LD structured data. The layout builds
//! the defaults for every page; a page handler fills in what it knows (title, picture, its own
//! feed, a `Product` or `BlogPosting`).

use std::collections::HashMap;

use actix_web::HttpRequest;

/// The site's absolute address without a trailing slash (`server.public_url`, else the bound
/// address), registered as app data by `startup` so the layout can make links absolute.
#[derive(Debug, Clone)]
pub(crate) struct SiteUrl(pub String);

/// The site's absolute address for `req`: the registered [`SiteUrl`], else the address the
/// request came in on.
pub(crate) fn site_url(req: &HttpRequest) -> String {
    match req.app_data::<actix_web::web::Data<SiteUrl>>() {
        Some(url) => url.0.trim_end_matches('/').to_string(),
        None => {
            let info = req.connection_info();
            format!("{}://{}", info.scheme(), info.host())
        }
    }
}

/// A shopper's own pages and search results: `noindex` (robots.txt disallows them too, by
/// default).
const NOT_FOR_SEARCH_ENGINES: &[&str] = &["/cart", "/checkout", "/orders", "/search"];

/// The longest description a page carries (search engines show about this much).
pub(crate) const DESCRIPTION_CHARS: usize = 160;

/// The size of a stored photo's social card, in pixels: what link previews show best
/// (`media` makes the cards to it).
pub(crate) const SOCIAL_IMAGE_SIZE: (u32, u32) = (1200, 630);

/// A link preview's picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SocialImage {
    /// Absolute address.
    pub(crate) url: String,
    /// What it shows (`og:image:alt`).
    pub(crate) alt: String,
    /// Its size in pixels (`og:image:width`, `og:image:height`), when known.
    pub(crate) size: Option<(u32, u32)>,
}

/// A feed a page announces (`<link rel="alternate" type="application/atom+xml">`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FeedLink {
    pub(crate) title: String,
    /// Absolute address.
    pub(crate) href: String,
}

/// The `<head>` metadata of one page.
#[derive(Debug, Clone, Default)]
pub(crate) struct PageMeta {
    /// The site's absolute address without a trailing slash; empty on pages without metadata
    /// (admin and error pages), which then emit none.
    pub(crate) site_url: String,
    /// The shop's name (`og:site_name`).
    pub(crate) site_name: String,
    /// The page's preferred absolute address.
    pub(crate) canonical: String,
    /// `noindex, follow` on pages that must not be indexed (filtered or re-sorted listings).
    pub(crate) noindex: bool,
    /// The title a shared link shows (without the " · shop" suffix of `<title>`).
    pub(crate) title: String,
    pub(crate) description: String,
    /// `website`, `product` or `article`.
    pub(crate) og_type: &'static str,
    pub(crate) image: Option<SocialImage>,
    pub(crate) feeds: Vec<FeedLink>,
    /// Structured data, one `<script type="application/ld+json">` each, as the text the
    /// script holds ([`PageMeta::push_json_ld`]). Private, and of a type only
    /// [`json_for_script`] makes: the template prints it unescaped.
    json_ld: Vec<ScriptJson>,
}

impl PageMeta {
    /// The defaults for a public page at `path`: canonical without the query, the site's
    /// description and picture, and the site feed (the blog's).
    pub(crate) fn for_page(
        site_url: &str,
        path: &str,
        settings: &crate::db::site::SiteSettings,
    ) -> Self {
        let site_url = site_url.trim_end_matches('/').to_string();
        let image = default_image(&site_url, &settings.social_image).map(|url| SocialImage {
            url,
            alt: settings.name.clone(),
            size: None,
        });
        let (description, site_feed) = site_defaults(&site_url, settings);
        PageMeta {
            canonical: format!("{site_url}{path}"),
            feeds: vec![site_feed],
            site_name: settings.name.clone(),
            title: settings.name.clone(),
            description,
            og_type: "website",
            image,
            noindex: NOT_FOR_SEARCH_ENGINES
                .iter()
                .any(|p| crate::web::links::is_within(path, p)),
            json_ld: Vec::new(),
            site_url,
        }
    }

    /// Whether the page carries metadata at all.
    pub(crate) fn is_public(&self) -> bool {
        !self.site_url.is_empty()
    }

    /// An absolute address for a path on this site.
    pub(crate) fn absolute(&self, path: &str) -> String {
        format!("{}{path}", self.site_url)
    }

    /// Canonical address and indexing of a listing at `path` (products, a category, a section):
    /// page numbers are pages of their own (`?page=N` stays in the canonical address), while any
    /// filter, sort or keyset position makes the page `noindex` with the unfiltered listing as
    /// canonical, so the combinations never become a crawl space of their own.
    pub(crate) fn listing(&mut self, path: &str, params: &HashMap<String, String>) {
        let page = params
            .get("page")
            .and_then(|p| p.parse::<u64>().ok())
            .filter(|n| *n > 1);
        let narrowed = params
            .iter()
            .any(|(k, v)| k != "page" && !v.trim().is_empty());
        self.canonical = match (narrowed, page) {
            (false, Some(n)) => format!("{}{path}?page={n}", self.site_url),
            _ => format!("{}{path}", self.site_url),
        };
        self.noindex = narrowed;
    }

    /// Set the description from page text (made plain and shortened); empty text keeps the
    /// site's.
    pub(crate) fn describe(&mut self, text: &str) {
        let text = plain_description(text);
        if !text.is_empty() {
            self.description = text;
        }
    }

    /// Use the stored image's social card (`/media/{id}/social`, cover-cropped to
    /// [`SOCIAL_IMAGE_SIZE`]) as the picture.
    pub(crate) fn picture(&mut self, file_id: bson::oid::ObjectId, alt: &str) {
        self.image = Some(SocialImage {
            url: self.absolute(&format!("/media/{}/social", file_id.to_hex())),
            alt: alt.to_string(),
            size: Some(SOCIAL_IMAGE_SIZE),
        });
    }

    /// Announce another feed (after the site's), unless it is already announced.
    pub(crate) fn add_feed(&mut self, title: String, path: &str) {
        let href = self.absolute(path);
        if !self.feeds.iter().any(|f| f.href == href) {
            self.feeds.push(FeedLink { title, href });
        }
    }

    /// `summary_large_image` with a picture, else `summary`.
    pub(crate) fn twitter_card(&self) -> &'static str {
        if self.image.is_some() {
            "summary_large_image"
        } else {
            "summary"
        }
    }

    /// Add a structured-data object, serialized once here as text safe inside `<script>`
    /// ([`json_for_script`]). A page may pass a typed value (`Product`, [`BreadcrumbList`]):
    /// written straight from its fields, with no map built per key in between.
    pub(crate) fn push_json_ld(&mut self, value: &impl serde::Serialize) {
        self.json_ld.push(json_for_script(value));
    }

    /// Add a structured-data object already made safe (a page whose object borrows from this
    /// metadata serializes it first).
    pub(crate) fn push_script_json(&mut self, json: ScriptJson) {
        self.json_ld.push(json);
    }

    /// The structured-data objects added so far, taken out (a page part made once and
    /// copied into each page's metadata keeps them).
    pub(crate) fn take_json_ld(&mut self) -> Vec<ScriptJson> {
        std::mem::take(&mut self.json_ld)
    }

    /// Each structured-data object as text safe inside `<script>`.
    pub(crate) fn json_ld_scripts(&self) -> impl Iterator<Item = &str> {
        self.json_ld.iter().map(|json| json.0.as_str())
    }
}

/// The default social image as an absolute address: a local path joined to the site address,
/// an `http(s)://` address as it is; anything else (or nothing) none.
fn default_image(site_url: &str, setting: &str) -> Option<String> {
    let setting = setting.trim();
    if setting.is_empty() {
        return None;
    }
    if let Some(path) = crate::web::links::local_path(setting) {
        return Some(format!("{site_url}{path}"));
    }
    is_absolute_web_url(setting).then(|| setting.to_string())
}

/// Whether `url` is an `http://` or `https://` address with a host and no spaces or controls.
pub(crate) fn is_absolute_web_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(rest) => {
            !rest.is_empty()
                && !rest.starts_with(['/', '\\'])
                && !url
                    .chars()
                    .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
        }
        None => false,
    }
}

/// `text` as one path segment of a URL: letters, digits and `-._~` as they are, every other
/// byte percent-encoded (slugs and tags are plain already; this keeps stored oddities from
/// breaking an address).
pub(crate) fn path_segment(text: &str) -> String {
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    // A slug always is (every card of a listing page links one): copied whole.
    if text.bytes().all(unreserved) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if unreserved(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What every public page without its own carries, from the settings and the site's address:
/// the description ([`plain_description`] of the settings' text) and the site feed's link.
/// Remembered per thread for the last settings seen, since they change rarely and every page
/// would otherwise cut the same text and format the same link again.
fn site_defaults(site_url: &str, settings: &crate::db::site::SiteSettings) -> (String, FeedLink) {
    /// `(site address, shop name, description text)` and what they give.
    type Last = Option<((String, String, String), (String, FeedLink))>;
    thread_local! {
        static LAST: std::cell::RefCell<Last> = const { std::cell::RefCell::new(None) };
    }
    let text = settings.description_or_tagline();
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some(((url, name, described), made)) = last.as_ref() {
            if url == site_url && *name == settings.name && described == text {
                return made.clone();
            }
        }
        let made = (
            plain_description(text),
            FeedLink {
                title: format!("{} · Blog", settings.name),
                href: format!("{site_url}/blog/feed.atom"),
            },
        );
        let key = (
            site_url.to_string(),
            settings.name.clone(),
            text.to_string(),
        );
        *last = Some((key, made.clone()));
        made
    })
}

/// One line of plain text of at most [`DESCRIPTION_CHARS`] characters, cut at a word.
pub(crate) fn plain_description(text: &str) -> String {
    words_within(text, DESCRIPTION_CHARS)
}

/// The words of `text` on one line, as many as fit in `max_chars` (then `…`).
pub(crate) fn words_within(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    // Characters in `out`, kept as it grows (counting `out` again per word was quadratic).
    let mut chars = 0;
    for word in text.split_whitespace() {
        let word_chars = word.chars().count();
        if chars + word_chars + 1 > max_chars {
            out.push('…');
            break;
        }
        if !out.is_empty() {
            out.push(' ');
            chars += 1;
        }
        out.push_str(word);
        chars += word_chars;
    }
    out
}

/// JSON text safe inside a `<script>` element, made only by [`json_for_script`].
#[derive(Debug, Clone)]
pub(crate) struct ScriptJson(String);

/// `value` as JSON that cannot end the `<script>` element holding it nor be read as HTML:
/// `<`, `>` and `&` become `\u003c`, `\u003e`, `\u0026` (the same characters to a JSON
/// parser), and so do the line and paragraph separators some JavaScript parsers refuse.
pub(crate) fn json_for_script(value: &impl serde::Serialize) -> ScriptJson {
    ScriptJson(script_text(value))
}

fn script_text(value: &impl serde::Serialize) -> String {
    let json = serde_json::to_string(value).unwrap_or_else(|_| "null".to_string());
    // Most objects hold none of the characters to escape (`\u{2028}` and `\u{2029}` both start
    // with the byte 0xE2): then the text is used as it is, not copied a character at a time.
    if !json.bytes().any(|b| matches!(b, b'<' | b'>' | b'&' | 0xE2)) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// schema.org's `BreadcrumbList` ([`breadcrumb_list`]), serialized in this key order.
#[derive(Debug, serde::Serialize)]
pub(crate) struct BreadcrumbList<'a> {
    #[serde(rename = "@context")]
    context: &'static str,
    #[serde(rename = "@type")]
    kind: &'static str,
    #[serde(rename = "itemListElement")]
    items: Vec<ListItem<'a>>,
}

/// One step of a [`BreadcrumbList`].
#[derive(Debug, serde::Serialize)]
struct ListItem<'a> {
    #[serde(rename = "@type")]
    kind: &'static str,
    position: usize,
    name: &'a str,
    item: &'a str,
}

/// `BreadcrumbList` of `(name, absolute url)` steps, first to last.
pub(crate) fn breadcrumb_list(steps: &[(String, String)]) -> BreadcrumbList<'_> {
    BreadcrumbList {
        context: "https://schema.org",
        kind: "BreadcrumbList",
        items: steps
            .iter()
            .enumerate()
            .map(|(i, (name, url))| ListItem {
                kind: "ListItem",
                position: i + 1,
                name,
                item: url,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_json_cannot_close_the_script_element() {
        let value = serde_json::json!({ "name": "</script><script>alert(1)</script> & \u{2028}" });
        let text = script_text(&value);
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'));
        let back: serde_json::Value = serde_json::from_str(&text).expect("still JSON");
        assert_eq!(back, value);
    }

    #[test]
    fn filtered_listings_are_noindex_and_point_at_the_plain_listing() {
        let mut meta = PageMeta {
            site_url: "https://shop.example".into(),
            ..Default::default()
        };
        let params = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        meta.listing("/products", &params(&[("page", "3")]));
        assert_eq!(meta.canonical, "https://shop.example/products?page=3");
        assert!(!meta.noindex);
        meta.listing("/products", &params(&[("sort", "price"), ("page", "3")]));
        assert_eq!(meta.canonical, "https://shop.example/products");
        assert!(meta.noindex);
        meta.listing("/products", &params(&[("after", "abc")]));
        assert!(meta.noindex);
        meta.listing("/products", &params(&[("page", "1")]));
        assert_eq!(meta.canonical, "https://shop.example/products");
    }

    #[test]
    fn descriptions_are_one_short_line() {
        let long = "word ".repeat(100);
        let d = plain_description(&long);
        assert!(d.chars().count() <= DESCRIPTION_CHARS + 1);
        assert!(d.ends_with('…'));
        assert_eq!(plain_description(" a\n b\tc "), "a b c");
    }

    #[test]
    fn words_are_cut_at_the_same_place_whatever_their_characters() {
        assert_eq!(words_within("ab cd ef", 5), "ab cd…");
        assert_eq!(words_within("ab cd ef", 4), "ab…");
        assert_eq!(words_within("é ü ö", 3), "é ü…");
        assert_eq!(words_within("é ü", 3), "é ü");
        assert_eq!(words_within("", 3), "");
    }

    #[test]
    fn a_breadcrumb_list_keeps_its_keys_in_order() {
        let steps = [
            ("Shop".to_string(), "https://x/".to_string()),
            ("Jazz".to_string(), "https://x/categories/jazz".to_string()),
        ];
        assert_eq!(
            serde_json::to_string(&breadcrumb_list(&steps)).expect("json"),
            r#"{"@context":"https://schema.org","@type":"BreadcrumbList","itemListElement":[{"@type":"ListItem","position":1,"name":"Shop","item":"https://x/"},{"@type":"ListItem","position":2,"name":"Jazz","item":"https://x/categories/jazz"}]}"#
        );
    }

    #[test]
    fn only_site_paths_and_web_addresses_make_a_default_image() {
        let base = "https://shop.example";
        assert_eq!(
            default_image(base, "/static/images/card.png").as_deref(),
            Some("https://shop.example/static/images/card.png")
        );
        assert_eq!(
            default_image(base, "https://cdn.example/card.png").as_deref(),
            Some("https://cdn.example/card.png")
        );
        for bad in [
            "",
            "//evil.example/x",
            "javascript:alert(1)",
            "card.png",
            "/\\evil",
        ] {
            assert_eq!(default_image(base, bad), None, "{bad}");
        }
    }
}
