//! Writing XML (the Atom feeds, sitemaps, the analytics charts' inline SVG) through quick-xml's
//! writer, so escaping is by construction: element text and attribute values are always
//! escaped, and characters XML 1.0 cannot hold at all (control characters other than tab, line
//! feed and carriage return; U+FFFE, U+FFFF) are dropped, so whatever a user typed, the
//! document parses.
//!
//! ```
//! use bazaar::web::xml::XmlWriter;
//! let mut xml = XmlWriter::document();
//! xml.element("urlset", &[("xmlns", "http://www.sitemaps.org/schemas/sitemap/0.9")], |xml| {
//!     xml.element("url", &[], |xml| xml.text_element("loc", &[], "https://a.example/?a=1&b=2"));
//! });
//! assert!(xml.finish().contains("<loc>https://a.example/?a=1&amp;b=2</loc>"));
//! ```

use std::borrow::Cow;

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

/// An XML document or fragment being written into memory.
pub struct XmlWriter {
    writer: Writer<Vec<u8>>,
    /// A standalone document (declaration, indentation, final line break).
    document: bool,
}

impl XmlWriter {
    /// A standalone document: the `<?xml version="1.0" encoding="utf-8"?>` declaration, then
    /// elements one per line, indented by two spaces (text stays on its element's line).
    pub fn document() -> XmlWriter {
        let mut xml = XmlWriter {
            writer: Writer::new_with_indent(Vec::with_capacity(4096), b' ', 2),
            document: true,
        };
        xml.write(Event::Decl(BytesDecl::new("1.0", Some("utf-8"), None)));
        xml
    }

    /// A fragment to embed in a page (an inline `<svg>`): no declaration, no indentation.
    pub fn fragment() -> XmlWriter {
        XmlWriter {
            writer: Writer::new(Vec::with_capacity(4096)),
            document: false,
        }
    }

    /// `<name attributes…>`, what `children` writes, `</name>`.
    pub fn element(
        &mut self,
        name: &str,
        attributes: &[(&str, &str)],
        children: impl FnOnce(&mut XmlWriter),
    ) {
        self.open(name, attributes);
        children(self);
        self.close(name);
    }

    /// `<name attributes…>`, for an element whose children are written over several calls
    /// (a sitemap's entries as a database cursor yields them); [`XmlWriter::close`] ends it.
    pub fn open(&mut self, name: &str, attributes: &[(&str, &str)]) {
        self.write(Event::Start(start(name, attributes)));
    }

    /// `</name>`
    pub fn close(&mut self, name: &str) {
        self.write(Event::End(BytesEnd::new(name)));
    }

    /// `<name attributes…>text</name>`, the text escaped.
    pub fn text_element(&mut self, name: &str, attributes: &[(&str, &str)], text: &str) {
        self.element(name, attributes, |xml| xml.text(text));
    }

    /// `<name attributes…/>`
    pub fn empty_element(&mut self, name: &str, attributes: &[(&str, &str)]) {
        self.write(Event::Empty(start(name, attributes)));
    }

    /// Text inside the current element, escaped.
    pub fn text(&mut self, text: &str) {
        self.write(Event::Text(BytesText::new(&xml_chars(text))));
    }

    /// The document, ending with a line break when it is a standalone document.
    pub fn finish(self) -> String {
        let mut bytes = self.writer.into_inner();
        if self.document {
            bytes.push(b'\n');
        }
        // Only `&str`s went in, so this is UTF-8; the lossy path is never taken.
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    fn write(&mut self, event: Event<'_>) {
        // Writing into a `Vec` cannot fail.
        let _ = self.writer.write_event(event);
    }
}

/// An element's start tag with its attributes (values escaped by quick-xml).
fn start<'a>(name: &'a str, attributes: &[(&'a str, &'a str)]) -> BytesStart<'a> {
    BytesStart::new(name).with_attributes(
        attributes
            .iter()
            .map(|(key, value)| (*key, xml_chars(value))),
    )
}

/// `text` without the characters XML 1.0 does not allow anywhere (not even as a character
/// reference): C0 controls other than tab, line feed and carriage return, and U+FFFE/U+FFFF.
fn xml_chars(text: &str) -> Cow<'_, str> {
    let allowed = |c: char| !matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    if text.chars().all(allowed) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.chars().filter(|c| allowed(*c)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped_and_forbidden_characters_dropped() {
        let mut xml = XmlWriter::fragment();
        xml.element("a", &[("title", "\"x\" & 'y' <z>\u{1}")], |xml| {
            xml.text("]]> < & \u{0}\u{7}\u{1b}\tend\u{ffff}");
            xml.empty_element("b", &[("c", "1")]);
        });
        assert_eq!(
            xml.finish(),
            "<a title=\"&quot;x&quot; &amp; &apos;y&apos; &lt;z&gt;\">]]&gt; &lt; &amp; \tend<b c=\"1\"/></a>"
        );
    }

    #[test]
    fn a_document_has_a_declaration_and_one_element_per_line() {
        let mut xml = XmlWriter::document();
        xml.element("feed", &[], |xml| xml.text_element("title", &[], "T"));
        assert_eq!(
            xml.finish(),
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<feed>\n  <title>T</title>\n</feed>\n"
        );
    }
}
