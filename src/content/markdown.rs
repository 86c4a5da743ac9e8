//! Markdown for pages and blog entries: rendered with pulldown-cmark, then cleaned with
//! ammonia so raw HTML, `javascript:` links and event attributes in the text never reach a
//! page (pulldown-cmark passes inline HTML through; ammonia keeps only an allow-list). Links
//! leaving the site are marked `rel="noopener noreferrer nofollow"`; links to the site's own
//! pages (relative ones) are not, so search engines follow them.
//!
//! Rendering is a pure function of the text, and it was a fifth of the CPU a post page cost
//! under load: [`render_cached`] keeps the HTML of recently shown texts, keyed by the text
//! itself, so an edit (a different text) can never be served an old rendering, on any instance.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use pulldown_cmark::{html, Options, Parser};

/// Safe HTML for `text`.
pub(crate) fn render(text: &str) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    let parser = Parser::new_ext(text, options);
    let mut unsafe_html = String::with_capacity(text.len() * 3 / 2);
    html::push_html(&mut unsafe_html, parser);
    let cleaned = ammonia::Builder::default()
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        // Relative links (`/pages/about`, `#notes`) stay, unless a browser would read them as
        // another site (`//host`, `/\host`): absolute links must say `https://` openly.
        .url_relative(ammonia::UrlRelative::Custom(Box::new(keep_local_relative)))
        .clean(&unsafe_html)
        .to_string();
    follow_local_links(&cleaned)
}

/// Texts whose rendering is kept at most; more start the memo over.
const MEMO_ENTRIES: usize = 1_000;
/// Longer texts are rendered every time (rare, and kept out of the memo's memory).
const MEMO_MAX_TEXT: usize = 64 * 1024;

/// Renderings of recently shown texts, by text.
static MEMO: LazyLock<Mutex<HashMap<Box<str>, Arc<str>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// [`render`], from the memo when this text was rendered lately (the same HTML: rendering
/// depends on nothing but the text).
pub(crate) fn render_cached(text: &str) -> String {
    if text.len() > MEMO_MAX_TEXT {
        return render(text);
    }
    let found = MEMO
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(text)
        .cloned();
    if let Some(html) = found {
        return html.to_string();
    }
    let html = render(text);
    let mut kept = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    if kept.len() >= MEMO_ENTRIES {
        kept.clear();
    }
    kept.insert(text.into(), Arc::from(html.as_str()));
    html
}

/// A link as ammonia writes it: `href` first, `rel` (the one it adds to every link) last;
/// attribute values never hold a raw `"`.
static MARKED_LINK: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r#"<a href="([^"]*)"((?: [a-z-]+="[^"]*")*) rel="noopener noreferrer nofollow">"#,
    )
    .expect("valid pattern")
});

/// Drop the `rel` ammonia added from links that stay on the site (no scheme: `/pages/about`,
/// `#notes`, `page-2`); links with a scheme keep it.
fn follow_local_links(html: &str) -> String {
    MARKED_LINK
        .replace_all(html, |caps: &regex::Captures<'_>| {
            let href = &caps[1];
            if has_scheme(href) {
                caps[0].to_string()
            } else {
                format!("<a href=\"{href}\"{}>", &caps[2])
            }
        })
        .into_owned()
}

/// Whether a link starts with a URL scheme (`https:`, `mailto:`).
fn has_scheme(href: &str) -> bool {
    let Some((scheme, _)) = href.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// A relative link as written, unless a browser would read it as another site (then dropped).
fn keep_local_relative(url: &str) -> Option<std::borrow::Cow<'_, str>> {
    crate::web::links::is_safe_relative_link(url).then_some(std::borrow::Cow::Borrowed(url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_rendering_is_the_rendering_of_that_very_text() {
        let text = "Some *memo* text [here](/pages/about).";
        assert_eq!(render_cached(text), render(text));
        assert_eq!(render_cached(text), render(text), "from the memo");
        let edited = "Some *memo* text [there](/pages/about).";
        assert_eq!(render_cached(edited), render(edited));
    }

    #[test]
    fn markdown_becomes_html() {
        let html = render("# Title\n\nSome *emphasis* and [a link](https://example.com).");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<em>emphasis</em>"), "{html}");
        assert!(html.contains("href=\"https://example.com\""), "{html}");
    }

    #[test]
    fn relative_links_that_a_browser_reads_as_another_site_are_removed() {
        let html = render(
            "[b](//evil.example) <a href=\"/\\evil.example\">c</a> \
             <a href=\" /\t/evil.example\">d</a> [e](/pages/about) [f](#x)",
        );
        assert!(!html.contains("href=\"//"), "{html}");
        assert!(!html.contains("href=\"/\\"), "{html}");
        assert!(!html.contains("evil.example\""), "{html}");
        assert!(html.contains("href=\"/pages/about\""), "{html}");
        assert!(html.contains("href=\"#x\""), "{html}");
    }

    #[test]
    fn scripts_event_handlers_and_javascript_links_are_removed() {
        let html = render(
            "<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n[x](javascript:alert(3)) <a href=\"javascript:alert(4)\">y</a>",
        );
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("onerror"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
    }

    #[test]
    fn only_links_leaving_the_site_are_nofollow() {
        let html = render(
            "[home](/pages/about \"About us\") [notes](#notes) [out](https://example.com/a?b=1&c=2) \
             <a href=\"/blog/x\" title='a \"q\" > b'>raw</a> [mail](mailto:a@example.com)",
        );
        assert!(
            html.contains("<a href=\"/pages/about\" title=\"About us\">home</a>"),
            "{html}"
        );
        assert!(html.contains("<a href=\"#notes\">notes</a>"), "{html}");
        assert!(
            html.contains(
                "href=\"https://example.com/a?b=1&amp;c=2\" rel=\"noopener noreferrer nofollow\""
            ),
            "{html}"
        );
        assert!(
            html.contains("href=\"mailto:a@example.com\" rel=\"noopener noreferrer nofollow\""),
            "{html}"
        );
        assert_eq!(html.matches("nofollow").count(), 2, "{html}");
    }
}
