//! mongod's diacritic removal for text search: which code points are diacritics, and what a
//! character becomes without its diacritics, exactly as mongod 7.0 has them.
//!
//! mongod generates both from the Unicode 8.0.0 data it ships
//! (`src/mongo/db/fts/unicode/gen_diacritic_list.py` and `gen_diacritic_map.py`, producing
//! `codepointIsDiacritic` and `codepointRemoveDiacritics`): the diacritics are the code points
//! with the `Diacritic` property of `PropList-8.0.0.txt`, and a character maps to the one code
//! point its canonical decomposition recomposes to once the diacritics are left out (`é` → `e`,
//! `Ǻ` → `A`), when that is a single code point other than itself; any other character stays
//! as it is (`ø`, `ł` and `ß` have no decomposition to lose anything from). A diacritic alone
//! (a combining accent, `^`, `` ` ``, `¨`, a modifier letter) is removed. Marks without the
//! property stay: an Indic vowel sign is part of its word, not an accent.
//!
//! [`DIACRITICS`] is that property's ranges transcribed from the file (adjacent ranges
//! joined); the decompositions come from `unicode-normalization`, whose data is newer than
//! 8.0.0 (stable for every character 8.0.0 has, so only characters added since may differ).

use unicode_normalization::UnicodeNormalization;

/// Whether `c` has the `Diacritic` property (Unicode 8.0.0).
pub(crate) fn is_diacritic(c: char) -> bool {
    super::in_ranges(DIACRITICS, c)
}

/// `c` without its diacritics, as mongod's `codepointRemoveDiacritics`: `None` for a diacritic
/// itself (it is dropped), else the character left once the decomposition's diacritics are
/// removed, or `c` unchanged when that is not one code point.
pub(crate) fn without_diacritics(c: char) -> Option<char> {
    if is_diacritic(c) {
        return None;
    }
    // A canonical decomposition is a few characters long (four at most in today's Unicode):
    // kept on the stack, as this runs for every non-ASCII character folded.
    let mut kept = ['\0'; MAX_DECOMPOSITION];
    let mut len = 0;
    let mut whole = true;
    unicode_normalization::char::decompose_canonical(c, |part| {
        if is_diacritic(part) {
            return;
        }
        match kept.get_mut(len) {
            Some(slot) => {
                *slot = part;
                len += 1;
            }
            None => whole = false,
        }
    });
    if !whole {
        return Some(c);
    }
    if len == 1 && kept[0] == c {
        // Nothing to decompose: the common case.
        return Some(c);
    }
    let mut recomposed = kept[..len].iter().copied().nfc();
    match (recomposed.next(), recomposed.next()) {
        (Some(one), None) => Some(one),
        _ => Some(c),
    }
}

/// Room for a character's canonical decomposition (the longest is four characters today; twice
/// that leaves a margin, and a longer one would leave the character as it is).
const MAX_DECOMPOSITION: usize = 8;

/// The `Diacritic` property in PropList-8.0.0.txt.
#[rustfmt::skip]
const DIACRITICS: &[(u32, u32)] = &[
    (0x005E, 0x005E), (0x0060, 0x0060), (0x00A8, 0x00A8), (0x00AF, 0x00AF),
    (0x00B4, 0x00B4), (0x00B7, 0x00B8), (0x02B0, 0x034E), (0x0350, 0x0357),
    (0x035D, 0x0362), (0x0374, 0x0375), (0x037A, 0x037A), (0x0384, 0x0385),
    (0x0483, 0x0487), (0x0559, 0x0559), (0x0591, 0x05A1), (0x05A3, 0x05BD),
    (0x05BF, 0x05BF), (0x05C1, 0x05C2), (0x05C4, 0x05C4), (0x064B, 0x0652),
    (0x0657, 0x0658), (0x06DF, 0x06E0), (0x06E5, 0x06E6), (0x06EA, 0x06EC),
    (0x0730, 0x074A), (0x07A6, 0x07B0), (0x07EB, 0x07F5), (0x0818, 0x0819),
    (0x08E3, 0x08FE), (0x093C, 0x093C), (0x094D, 0x094D), (0x0951, 0x0954),
    (0x0971, 0x0971), (0x09BC, 0x09BC), (0x09CD, 0x09CD), (0x0A3C, 0x0A3C),
    (0x0A4D, 0x0A4D), (0x0ABC, 0x0ABC), (0x0ACD, 0x0ACD), (0x0B3C, 0x0B3C),
    (0x0B4D, 0x0B4D), (0x0BCD, 0x0BCD), (0x0C4D, 0x0C4D), (0x0CBC, 0x0CBC),
    (0x0CCD, 0x0CCD), (0x0D4D, 0x0D4D), (0x0DCA, 0x0DCA), (0x0E47, 0x0E4C),
    (0x0E4E, 0x0E4E), (0x0EC8, 0x0ECC), (0x0F18, 0x0F19), (0x0F35, 0x0F35),
    (0x0F37, 0x0F37), (0x0F39, 0x0F39), (0x0F3E, 0x0F3F), (0x0F82, 0x0F84),
    (0x0F86, 0x0F87), (0x0FC6, 0x0FC6), (0x1037, 0x1037), (0x1039, 0x103A),
    (0x1087, 0x108D), (0x108F, 0x108F), (0x109A, 0x109B), (0x17C9, 0x17D3),
    (0x17DD, 0x17DD), (0x1939, 0x193B), (0x1A75, 0x1A7C), (0x1A7F, 0x1A7F),
    (0x1AB0, 0x1ABD), (0x1B34, 0x1B34), (0x1B44, 0x1B44), (0x1B6B, 0x1B73),
    (0x1BAA, 0x1BAB), (0x1C36, 0x1C37), (0x1C78, 0x1C7D), (0x1CD0, 0x1CE8),
    (0x1CED, 0x1CED), (0x1CF4, 0x1CF4), (0x1CF8, 0x1CF9), (0x1D2C, 0x1D6A),
    (0x1DC4, 0x1DCF), (0x1DF5, 0x1DF5), (0x1DFD, 0x1DFF), (0x1FBD, 0x1FBD),
    (0x1FBF, 0x1FC1), (0x1FCD, 0x1FCF), (0x1FDD, 0x1FDF), (0x1FED, 0x1FEF),
    (0x1FFD, 0x1FFE), (0x2CEF, 0x2CF1), (0x2E2F, 0x2E2F), (0x302A, 0x302F),
    (0x3099, 0x309C), (0x30FC, 0x30FC), (0xA66F, 0xA66F), (0xA67C, 0xA67D),
    (0xA67F, 0xA67F), (0xA69C, 0xA69D), (0xA6F0, 0xA6F1), (0xA717, 0xA721),
    (0xA788, 0xA788), (0xA7F8, 0xA7F9), (0xA8C4, 0xA8C4), (0xA8E0, 0xA8F1),
    (0xA92B, 0xA92E), (0xA953, 0xA953), (0xA9B3, 0xA9B3), (0xA9C0, 0xA9C0),
    (0xA9E5, 0xA9E5), (0xAA7B, 0xAA7D), (0xAABF, 0xAAC2), (0xAAF6, 0xAAF6),
    (0xAB5B, 0xAB5F), (0xABEC, 0xABED), (0xFB1E, 0xFB1E), (0xFE20, 0xFE2F),
    (0xFF3E, 0xFF3E), (0xFF40, 0xFF40), (0xFF70, 0xFF70), (0xFF9E, 0xFF9F),
    (0xFFE3, 0xFFE3), (0x102E0, 0x102E0), (0x10AE5, 0x10AE6), (0x110B9, 0x110BA),
    (0x11133, 0x11134), (0x11173, 0x11173), (0x111C0, 0x111C0), (0x111CA, 0x111CC),
    (0x11235, 0x11236), (0x112E9, 0x112EA), (0x1133C, 0x1133C), (0x1134D, 0x1134D),
    (0x11366, 0x1136C), (0x11370, 0x11374), (0x114C2, 0x114C3), (0x115BF, 0x115C0),
    (0x1163F, 0x1163F), (0x116B6, 0x116B7), (0x1172B, 0x1172B), (0x16AF0, 0x16AF4),
    (0x16F8F, 0x16F9F), (0x1D167, 0x1D169), (0x1D16D, 0x1D172), (0x1D17B, 0x1D182),
    (0x1D185, 0x1D18B), (0x1D1AA, 0x1D1AD), (0x1E8D0, 0x1E8D6),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_as_many_diacritics_as_proplist_8_0_0_says() {
        assert!(DIACRITICS.iter().all(|(first, last)| first <= last));
        assert!(DIACRITICS.windows(2).all(|pair| pair[0].1 + 1 < pair[1].0));
        // "# Total code points: 773" under `Diacritic`.
        let counted: u32 = DIACRITICS
            .iter()
            .map(|(first, last)| last - first + 1)
            .sum();
        assert_eq!(counted, 773);
    }

    #[test]
    fn characters_lose_their_diacritics_as_in_mongod() {
        for (from, to) in [
            ('é', Some('e')),
            ('Ç', Some('C')),
            ('ñ', Some('n')),
            ('ǻ', Some('a')),
            ('ő', Some('o')),
            // U+212B ANGSTROM SIGN decomposes to A and a ring above.
            ('\u{212B}', Some('A')),
            // U+2126 OHM SIGN has a singleton decomposition: mongod maps it too.
            ('\u{2126}', Some('\u{03A9}')),
            // No decomposition: unchanged.
            ('ø', Some('ø')),
            ('ł', Some('ł')),
            ('ß', Some('ß')),
            ('a', Some('a')),
            // Diacritics alone are dropped.
            ('\u{0301}', None),
            ('^', None),
            ('`', None),
            ('\u{00A8}', None),
            ('\u{02B0}', None),
            // A mark without the property stays (DEVANAGARI VOWEL SIGN I).
            ('\u{093F}', Some('\u{093F}')),
            // A Hangul syllable decomposes into jamo and recomposes to itself.
            ('한', Some('한')),
        ] {
            assert_eq!(without_diacritics(from), to, "{from:?}");
        }
    }
}
