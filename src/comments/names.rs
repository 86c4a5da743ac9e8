//! Commenters' names and texts made safe to show next to other text: bidirectional controls and
//! invisible characters removed from names (a U+202E would flip the " · date" after the name,
//! a zero-width space makes "The\u{200b} Bazaar team" look like the shop's own name), combining
//! marks capped per letter (thousands of them stack into a smear over the page), and names the
//! shop's staff sign with kept for them, compared after normalisation so lookalikes count too.
//!
//! Templates also isolate every name in `<bdi>`, so even a name stored before this cleaning
//! cannot reorder the text around it.

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

/// Combining marks kept after one base character: enough for any script's real stacking (a
/// Vietnamese vowel with two accents, Hebrew points, Indic signs), far below a "Zalgo" smear.
pub const MAX_MARKS_PER_BASE: usize = 4;

/// Names only the shop's people sign with (besides the shop's own name and "<shop> team").
const RESERVED: &[&str] = &[
    "admin",
    "administrator",
    "moderator",
    "staff",
    "the bazaar team",
    "bazaar team",
];

/// Characters that change the direction of the text around them: the embeddings and overrides
/// (U+202A–U+202E), the isolates (U+2066–U+2069) and the direction marks (U+200E, U+200F,
/// U+061C).
pub(crate) fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Characters that show nothing (or nothing but a blank) and so let two names that look the
/// same differ: zero-width spaces and joiners, the soft hyphen, word joiners and invisible
/// operators, fillers, variation selectors, the byte-order mark, tag characters.
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200D}'
            | '\u{2060}'..='\u{2064}'
            | '\u{206A}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E007F}'
            | '\u{E0100}'..='\u{E01EF}'
    )
}

/// `text` with at most [`MAX_MARKS_PER_BASE`] combining marks after each base character (and
/// none at the very start, where they would stack on whatever precedes the text on the page).
/// Composed first (NFC), so an accent that has a precomposed letter does not count as a mark.
pub(crate) fn cap_combining_marks(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut marks = MAX_MARKS_PER_BASE;
    for c in text.nfc() {
        if is_combining_mark(c) {
            if marks < MAX_MARKS_PER_BASE {
                marks += 1;
                out.push(c);
            }
        } else {
            marks = 0;
            out.push(c);
        }
    }
    out
}

/// A name as it is stored and shown: without direction controls or invisible characters, every
/// kind of space as one plain space, trimmed, with combining marks capped, composed (NFC).
pub(crate) fn clean_name(raw: &str) -> String {
    let mut spaced = String::with_capacity(raw.len());
    let mut last_space = true;
    for c in raw.chars() {
        if is_bidi_control(c) || is_invisible(c) || (c.is_control() && !c.is_whitespace()) {
            continue;
        }
        if c.is_whitespace() {
            if !last_space {
                spaced.push(' ');
            }
            last_space = true;
        } else {
            spaced.push(c);
            last_space = false;
        }
    }
    cap_combining_marks(spaced.trim_end())
}

/// The form of a name that reserved names are compared in: compatibility-normalised (NFKC:
/// full-width and styled letters become plain ones), lower-cased, with marks, invisibles,
/// spaces and punctuation removed ("T.h.e  Ｂａｚａａｒ-team" and "the bazaar team" agree).
pub fn comparison_key(name: &str) -> String {
    name.nfkc()
        .flat_map(char::to_lowercase)
        .nfd()
        .filter(|c| c.is_alphanumeric() && !is_combining_mark(*c))
        .collect()
}

/// Whether `name` is one only the shop's staff may sign with: one of the fixed names, the
/// shop's name `shop_name`, or "\<shop\> team" / "the \<shop\> team" / "\<shop\> staff", in any
/// lookalike spelling.
pub(crate) fn is_reserved(name: &str, shop_name: &str) -> bool {
    let key = comparison_key(name);
    if key.is_empty() {
        return false;
    }
    let shop = comparison_key(shop_name);
    let shop_names = [
        shop.clone(),
        format!("{shop}team"),
        format!("the{shop}team"),
        format!("{shop}staff"),
    ];
    RESERVED.iter().any(|r| comparison_key(r) == key)
        || (!shop.is_empty() && shop_names.contains(&key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direction_controls_are_removed_from_names() {
        assert_eq!(clean_name("Mallory\u{202E}reversed"), "Malloryreversed");
        assert_eq!(clean_name("\u{2067}Eve\u{2069}"), "Eve");
        assert_eq!(clean_name("a\u{200F}b\u{061C}c"), "abc");
    }

    #[test]
    fn invisible_characters_are_removed_and_spaces_collapsed() {
        assert_eq!(clean_name("The\u{200B} Bazaar team"), "The Bazaar team");
        assert_eq!(clean_name("  Ann\u{00A0}\u{3000} Lee\u{FEFF} "), "Ann Lee");
        assert_eq!(clean_name("Bo\u{00AD}b\u{2060}"), "Bob");
    }

    #[test]
    fn a_letter_keeps_at_most_four_combining_marks() {
        let zalgo = format!("Z{}oe", "\u{0336}".repeat(4800));
        let cleaned = clean_name(&zalgo);
        assert_eq!(
            cleaned.chars().count(),
            3 + MAX_MARKS_PER_BASE,
            "{cleaned:?}"
        );
        assert!(cleaned.starts_with('Z'));
        // An accent with a precomposed letter is no mark at all.
        assert_eq!(clean_name("Rene\u{0301}e"), "Renée");
        assert_eq!(cap_combining_marks("\u{0301}\u{0301}a"), "a");
    }

    #[test]
    fn real_names_in_other_scripts_are_kept() {
        for name in ["Nguyễn Thị Hương", "שָׁלוֹם", "देवनागरी", "محمد", "Zoë O'Brien"]
        {
            assert_eq!(clean_name(name), name.nfc().collect::<String>(), "{name}");
        }
    }

    #[test]
    fn reserved_names_are_recognised_in_lookalike_spellings() {
        assert!(is_reserved("The Bazaar team", "Bazaar"));
        assert!(is_reserved("the\u{200B} BAZAAR   team", "Bazaar"));
        assert!(is_reserved("Ｔｈｅ Ｂａｚａａｒ Ｔｅａｍ", "Bazaar"));
        assert!(is_reserved("T.h.e Bazaar-team", "Bazaar"));
        assert!(is_reserved("Admin", "Bazaar"));
        assert!(is_reserved("Bazaar Staff", "Bazaar"));
        assert!(is_reserved("Corner Records team", "Corner Records"));
        assert!(is_reserved("corner records", "Corner Records"));
        assert!(!is_reserved("Bazaar fan", "Bazaar"));
        assert!(!is_reserved("Ann", "Bazaar"));
    }
}
