//! Markdown for pages and blog entries: rendered with pulldown-cmark, then cleaned with
//! ammonia so raw HTML, `javascript:` links and event attributes in the text never reach a
//! page (pulldown-cmark passes inline HTML through; ammonia keeps only an allow-list).

use pulldown_cmark::{html, Options, Parser};

/// Safe HTML for `text`.
pub fn render(text: &str) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    let parser = Parser::new_ext(text, options);
    let mut unsafe_html = String::with_capacity(text.len() * 3 / 2);
    html::push_html(&mut unsafe_html, parser);
    ammonia::Builder::default()
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        // Relative links (`/pages/about`, `#notes`) stay, unless a browser would read them as
        // another site (`//host`, `/\host`): absolute links must say `https://` openly.
        .url_relative(ammonia::UrlRelative::Custom(Box::new(keep_local_relative)))
        .clean(&unsafe_html)
        .to_string()
}

/// A relative link as written, unless a browser would read it as another site (then dropped).
fn keep_local_relative(url: &str) -> Option<std::borrow::Cow<'_, str>> {
    crate::web::links::is_safe_relative_link(url).then_some(std::borrow::Cow::Borrowed(url))
}

/// A plain-text excerpt of the rendered text (for lists and feed summaries).
pub fn excerpt(text: &str, max_chars: usize) -> String {
    let html = render(text);
    let plain = ammonia::Builder::empty().clean(&html).to_string();
    let plain = plain
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'");
    let words: Vec<&str> = plain.split_whitespace().collect();
    let mut out = String::new();
    for w in words {
        if out.chars().count() + w.chars().count() + 1 > max_chars {
            out.push('…');
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn excerpts_are_plain_text_cut_at_a_word() {
        assert_eq!(excerpt("**Hello** world, again", 12), "Hello world,…");
    }
}
