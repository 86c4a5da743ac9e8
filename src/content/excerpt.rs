//! What a stream shows of a node instead of its whole body: a plain-text excerpt and the number
//! of words (for "N min read"), worked out once when the node is saved and stored with it
//! (`metadata.summary`), so a list page neither reads nor renders the bodies of its posts.
//!
//! The excerpt is the text's first paragraphs as plain text (Markdown markup, links' addresses and images dropped), cut after the last
//! sentence that fits in [`EXCERPT_CHARS`], or at a word boundary with an ellipsis when the first
//! sentence alone is longer.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use serde::{Deserialize, Serialize};

/// Longest automatic excerpt, in characters.
pub(crate) const EXCERPT_CHARS: usize = 320;
/// Words a reader reads in a minute, for "N min read" (the usual figure for screen reading).
pub(crate) const WORDS_PER_MINUTE: i64 = 230;

/// A node's stored summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Plain text; escaped like any other text when shown.
    pub text: String,
    /// Words in the whole body.
    pub(crate) words: i64,
    /// Whether the body holds more than the excerpt (a "Continue reading" link is worth it).
    pub(crate) more: bool,
}

impl Summary {
    /// The summary of a Markdown body.
    pub(crate) fn of_markdown(markdown: &str) -> Summary {
        // A live block (`{shipping-rates}`) is a table on the page, no words of the excerpt.
        let plain = PlainText::of(&crate::content::live_blocks::strip(markdown));
        let words = plain.all.split_whitespace().count() as i64;
        let lead = plain.lead.trim();
        let text = cut_at_sentence(lead, EXCERPT_CHARS);
        let more = text.chars().count() < plain.all.trim().chars().count();
        Summary { text, words, more }
    }

    /// The summary of a short text shown whole when it fits (a quote, a link's text).
    pub(crate) fn of_plain(text: &str) -> Summary {
        let text = text.trim();
        let shown = cut_at_sentence(text, EXCERPT_CHARS * 3);
        Summary {
            more: shown.len() < text.len(),
            words: text.split_whitespace().count() as i64,
            text: shown,
        }
    }

    /// This summary with the editor's own excerpt instead of the automatic one, when they
    /// wrote one (the body's word count stays; a written excerpt always leads to the body).
    pub(crate) fn with_excerpt(self, excerpt: &str) -> Summary {
        let excerpt = excerpt.trim();
        if excerpt.is_empty() {
            return self;
        }
        Summary {
            text: excerpt.to_string(),
            more: true,
            ..self
        }
    }

    /// Whole minutes to read the body, at least 1.
    pub(crate) fn reading_minutes(&self) -> i64 {
        ((self.words + WORDS_PER_MINUTE - 1) / WORDS_PER_MINUTE).max(1)
    }
}

/// A Markdown body as plain text, all of it (markup, link addresses, images and live-block
/// markers dropped): what search results show an excerpt of.
pub(crate) fn plain_text(markdown: &str) -> String {
    PlainText::of(&crate::content::live_blocks::strip(markdown)).all
}

/// A Markdown body as plain text: all of it, and its leading paragraphs (up to the first
/// heading after some text, or enough to fill an excerpt).
struct PlainText {
    all: String,
    lead: String,
}

impl PlainText {
    fn of(markdown: &str) -> PlainText {
        let mut all = String::with_capacity(markdown.len());
        let mut lead = String::new();
        let mut lead_done = false;
        let mut in_image = 0usize;
        let mut in_code_block = false;
        for event in Parser::new(markdown) {
            let text = match &event {
                Event::Start(Tag::Image { .. }) => {
                    in_image += 1;
                    None
                }
                Event::End(TagEnd::Image) => {
                    in_image = in_image.saturating_sub(1);
                    None
                }
                Event::Start(Tag::CodeBlock(_)) => {
                    in_code_block = true;
                    None
                }
                Event::End(TagEnd::CodeBlock) => {
                    in_code_block = false;
                    None
                }
                Event::Start(Tag::Heading { .. }) if !lead.trim().is_empty() => {
                    // A new section starts: the lead is what came before it.
                    lead_done = true;
                    None
                }
                Event::Text(t) | Event::Code(t) if in_image == 0 => Some(t.as_ref()),
                Event::SoftBreak | Event::HardBreak => Some(" "),
                Event::End(TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::Item) => Some(" "),
                _ => None,
            };
            let Some(text) = text else { continue };
            all.push_str(text);
            if !lead_done && !in_code_block {
                lead.push_str(text);
                if lead.chars().count() > EXCERPT_CHARS * 2 {
                    lead_done = true;
                }
            }
        }
        PlainText {
            all: collapse_spaces(&all),
            lead: collapse_spaces(&lead),
        }
    }
}

fn collapse_spaces(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` if it fits in `max` characters; else its longest prefix ending a sentence (`.`, `!`,
/// `?`, `…` or a CJK full stop, followed by a space or the end) within `max`; else its longest
/// prefix ending at a word within `max` followed by "…". Never splits a character.
fn cut_at_sentence(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    // The byte offset just past the `max`th character.
    let limit = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
    let window = &text[..limit];
    let mut sentence_end = None;
    let mut chars = window.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let ends = matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？');
        let followed_by_space = chars.peek().is_none_or(|(_, next)| next.is_whitespace());
        let closes_cjk = matches!(c, '。' | '！' | '？');
        if ends && (followed_by_space || closes_cjk) {
            sentence_end = Some(i + c.len_utf8());
        }
    }
    if let Some(end) = sentence_end {
        return window[..end].trim_end().to_string();
    }
    let cut = window
        .rfind(char::is_whitespace)
        .filter(|&i| i > 0)
        .unwrap_or(limit);
    format!("{}…", window[..cut].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_drops_markdown_and_quote_markers() {
        assert_eq!(
            plain_text("*Kind of Blue* is one.\n\n> So what?\n\n[A Love Supreme](/products/x)"),
            "Kind of Blue is one. So what? A Love Supreme"
        );
    }

    #[test]
    fn a_short_body_is_its_own_excerpt_and_needs_no_continue_link() {
        let s = Summary::of_markdown("A *short* note with [a link](https://example.com).");
        assert_eq!(s.text, "A short note with a link.");
        assert_eq!(s.words, 6);
        assert!(!s.more);
        assert_eq!(s.reading_minutes(), 1);
    }

    #[test]
    fn a_long_body_is_cut_after_the_last_whole_sentence_that_fits() {
        let sentence = "This sentence has exactly eight words in it. ";
        let body = sentence.repeat(40);
        let s = Summary::of_markdown(&body);
        assert!(s.text.ends_with("in it."), "{}", s.text);
        assert!(s.text.chars().count() <= EXCERPT_CHARS);
        assert!(s.more);
        assert_eq!(s.words, 320);
        assert_eq!(s.reading_minutes(), 2);
    }

    #[test]
    fn a_first_sentence_longer_than_the_excerpt_is_cut_at_a_word_with_an_ellipsis() {
        let body = "word ".repeat(200);
        let s = Summary::of_markdown(&body);
        assert!(s.text.ends_with("word…"), "{}", s.text);
        assert!(s.text.chars().count() <= EXCERPT_CHARS + 1);
    }

    #[test]
    fn the_excerpt_stops_at_the_first_heading_after_the_opening_text() {
        let s = Summary::of_markdown("Opening words.\n\n## Part two\n\nMore text here.");
        assert_eq!(s.text, "Opening words.");
        assert!(s.more);
    }

    #[test]
    fn images_code_blocks_and_link_addresses_stay_out_of_the_excerpt() {
        let body = "![a cover](/media/abc) Look at [this](https://x.example/long).\n\n```\nfn main() {}\n```\n";
        let s = Summary::of_markdown(body);
        assert_eq!(s.text, "Look at this.");
    }

    #[test]
    fn cutting_never_splits_a_character_in_any_script() {
        let body = "日本のジャズ".repeat(100);
        let s = Summary::of_markdown(&body);
        assert!(s.text.ends_with('…'));
        assert!(s.text.chars().count() <= EXCERPT_CHARS + 1);
        let cjk = "これは文です。".repeat(80);
        let s = Summary::of_markdown(&cjk);
        assert!(s.text.ends_with('。'), "{}", s.text);
    }

    #[test]
    fn a_quote_is_shown_whole_unless_it_is_very_long() {
        let s = Summary::of_plain("  Less is more.  ");
        assert_eq!(s.text, "Less is more.");
        assert!(!s.more);
        let long = "Long words. ".repeat(200);
        let s = Summary::of_plain(&long);
        assert!(s.more);
        assert!(s.text.chars().count() <= EXCERPT_CHARS * 3);
    }
}
