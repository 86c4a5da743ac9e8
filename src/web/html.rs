//! HTML escaping for markup built outside templates (comment text, a feed entry's HTML): the
//! escaper the templates themselves use (askama's), so there is one escaping path for HTML.
//! Its output is safe in element text and in quoted attribute values alike (`&`, `<`, `>`, `"`
//! and `'` become character references).

use std::fmt::Display;

use askama::filters::{Escaper, Html};

/// `text` escaped, for `format!` and `write!`.
pub(crate) fn text(text: &str) -> impl Display + '_ {
    struct Escaped<'a>(&'a str);
    impl Display for Escaped<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            Html.write_escaped_str(f, self.0)
        }
    }
    Escaped(text)
}

/// Append `text`, escaped, to `out`.
pub(crate) fn push(out: &mut String, text: &str) {
    // Writing into a `String` cannot fail.
    let _ = Html.write_escaped_str(out, text);
}

#[cfg(test)]
mod tests {
    #[test]
    fn markup_and_quotes_become_character_references() {
        let mut out = String::from("<p>");
        super::push(&mut out, "<a href=\"x\" title='y'>&</a>");
        assert_eq!(
            out,
            "<p>&#60;a href=&#34;x&#34; title=&#39;y&#39;&#62;&#38;&#60;/a&#62;"
        );
        assert_eq!(super::text("a<b").to_string(), "a&#60;b");
    }
}
