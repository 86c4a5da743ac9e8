//! A comment's plain text as HTML: everything escaped, line breaks kept, and bare `http(s)://`
//! addresses turned into links marked `rel="nofollow ugc"` (search engines give such links no
//! credit, which takes the point out of link spam). Escaping is the templates' own
//! ([`crate::web::html`]).

use crate::web::html;

/// Characters that end an address when they close it (`see https://a.example/x.` keeps the dot
/// out of the link).
const TRAILING: &[char] = &['.', ',', ';', ':', '!', '?', ')', ']', '\'', '"'];

/// Escaped text with `<br>` for each line break.
fn text_into(out: &mut String, text: &str) {
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push_str("<br>\n");
        }
        html::push(out, line.strip_suffix('\r').unwrap_or(line));
    }
}

/// Where the next bare address starts at or after `from`.
fn next_url_start(text: &str, from: usize) -> Option<usize> {
    let rest = &text[from..];
    let http = rest.find("http://");
    let https = rest.find("https://");
    let at = match (http, https) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    Some(from + at)
}

/// The comment text as safe HTML.
pub(crate) fn render(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut pos = 0;
    let mut search = 0;
    while let Some(start) = next_url_start(text, search) {
        // Only a free-standing address: `xhttp://` is text.
        let standalone = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || "([<\"'".contains(c));
        let len = text[start..]
            .find(|c: char| c.is_whitespace() || "<>\"".contains(c))
            .unwrap_or(text.len() - start);
        let url = text[start..start + len].trim_end_matches(TRAILING);
        let scheme_len = if url.starts_with("https://") { 8 } else { 7 };
        if !standalone || url.len() <= scheme_len {
            search = start + scheme_len.min(len.max(1));
            continue;
        }
        text_into(&mut out, &text[pos..start]);
        out.push_str("<a href=\"");
        html::push(&mut out, url);
        out.push_str("\" rel=\"nofollow ugc\">");
        html::push(&mut out, url);
        out.push_str("</a>");
        pos = start + url.len();
        search = pos;
    }
    text_into(&mut out, &text[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn markup_is_escaped_and_line_breaks_kept() {
        assert_eq!(
            render("<script>alert(1)</script>\nnext & \"last\""),
            "&#60;script&#62;alert(1)&#60;/script&#62;<br>\nnext &#38; &#34;last&#34;"
        );
    }

    #[test]
    fn bare_addresses_become_nofollow_links() {
        assert_eq!(
            render("see https://example.com/a?b=1&c=2."),
            "see <a href=\"https://example.com/a?b=1&#38;c=2\" rel=\"nofollow ugc\">\
             https://example.com/a?b=1&#38;c=2</a>."
        );
        assert_eq!(
            render("(http://x.example)"),
            "(<a href=\"http://x.example\" rel=\"nofollow ugc\">http://x.example</a>)"
        );
    }

    #[test]
    fn only_web_addresses_become_links() {
        assert_eq!(render("javascript:alert(1)"), "javascript:alert(1)");
        assert_eq!(
            render("<a href=javascript:alert(1)>x</a>"),
            "&#60;a href=javascript:alert(1)&#62;x&#60;/a&#62;"
        );
        assert_eq!(render("xhttp://a.example"), "xhttp://a.example");
        assert_eq!(render("https:// alone"), "https:// alone");
    }

    #[test]
    fn an_address_cannot_break_out_of_its_attribute() {
        let html = render("https://a.example/\"onmouseover=alert(1)");
        assert!(!html.contains("\"onmouseover"), "{html}");
    }
}
